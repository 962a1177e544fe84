//! `diskpulse fsync` (being written).
use clap::Args;

#[derive(Args, Debug)]
pub struct FsyncArgs {}

pub fn run(_a: FsyncArgs) -> anyhow::Result<i32> {
    Err(crate::usage!("diskpulse fsync: being written"))
}
