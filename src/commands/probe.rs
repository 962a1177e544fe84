//! `diskpulse probe` (being written).
use clap::Args;

#[derive(Args, Debug)]
pub struct ProbeArgs {}

pub fn run(_a: ProbeArgs) -> anyhow::Result<i32> {
    Err(crate::usage!("diskpulse probe: being written"))
}
