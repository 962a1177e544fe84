//! `diskpulse check` (being written).
use clap::Args;

#[derive(Args, Debug)]
pub struct CheckArgs {}

pub fn run(_a: CheckArgs) -> anyhow::Result<i32> {
    Err(crate::usage!("diskpulse check: being written"))
}
