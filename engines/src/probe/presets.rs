//! `probe`'s `--preset`s: named jobs whose values apply where a flag was not given
//! (moved out of args.rs to keep it under the file-size limit).

use std::time::Duration;

use format::usage;

/// A preset's values: each applies where the flag was not given.
#[derive(Default)]
pub(super) struct Preset {
    pub(super) rw: Option<&'static str>,
    pub(super) rwmixread: Option<f64>,
    pub(super) bs: Option<&'static str>,
    pub(super) iodepth: Option<u32>,
    pub(super) ioengine: Option<&'static str>,
    pub(super) direct: Option<bool>,
    pub(super) fdatasync: Option<u32>,
    pub(super) rate_iops: Option<f64>,
    pub(super) time_based: bool,
    pub(super) runtime: Option<Duration>,
    pub(super) size: Option<u64>,
}

pub(super) fn preset(name: &str) -> anyhow::Result<Preset> {
    Ok(match name {
        // ../shared/reference/nats-jetstream-on-e-series.txt, Appendix C: 15,000 IOPS,
        // 8 KiB, 70/30 read/write, queue depth 8.
        "array-check" => Preset {
            rw: Some("randrw"),
            rwmixread: Some(70.0),
            bs: Some("8k"),
            iodepth: Some(8),
            ioengine: Some("io_uring"),
            direct: Some(true),
            rate_iops: Some(15_000.0),
            time_based: true,
            runtime: Some(Duration::from_secs(30)),
            ..Default::default()
        },
        // What a broker's or database's log does: append 8 KiB, make it durable, repeat.
        // Buffered like NATS, etcd and PostgreSQL write their logs.
        "wal" => Preset {
            rw: Some("write"),
            bs: Some("8k"),
            iodepth: Some(1),
            ioengine: Some("sync"),
            direct: Some(false),
            fdatasync: Some(1),
            time_based: true,
            runtime: Some(Duration::from_secs(10)),
            size: Some(64 << 20),
            ..Default::default()
        },
        other => return Err(usage!("--preset takes array-check or wal; got '{other}'")),
    })
}
