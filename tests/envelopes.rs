//! `envelopes.csv.gz` (issue 13 item 2), written while recording a real loop device under
//! a bursty O_DIRECT write load: every row equals what the raw diskstats rows give for its
//! window (min, max and count exactly, mean to float rounding), and nothing is missing
//! or extra.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::time::Duration;

use collectors::diskstats::{counter_delta, FIELD_NAMES};
use diskpulse::format::{diskstats, envelopes};
use diskpulse::recording::envelopes::rate;

const MIB: f64 = 1_048_576.0;

/// (measure, diskstats field, scale): docs/files.md's definitions, spelled out here.
fn rates() -> Vec<(&'static str, usize, f64)> {
    let f = |n: &str| FIELD_NAMES.iter().position(|x| *x == n).unwrap();
    vec![
        ("read_mib_s", f("sectors_read"), 512.0 / MIB),
        ("write_mib_s", f("sectors_written"), 512.0 / MIB),
        ("read_iops", f("reads"), 1.0),
        ("write_iops", f("writes"), 1.0),
        ("util_pct", f("io_ms"), 0.1),
    ]
}

type Key = (u64, u64, String, String); // window_ns, t_ns, device, measure

#[derive(Debug)]
struct Want {
    min: f64,
    max: f64,
    sum: f64,
    dt_ns: u64,
    count: u64,
}

fn add(map: &mut BTreeMap<Key, Want>, key: Key, v: f64, x: f64, dt: u64) {
    let w = map.entry(key).or_insert(Want {
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        sum: 0.0,
        dt_ns: 0,
        count: 0,
    });
    w.min = w.min.min(v);
    w.max = w.max.max(v);
    w.sum += x;
    w.dt_ns += dt;
    w.count += 1;
}

/// The envelopes the raw rows give.
fn from_raw(disks: &[diskstats::DiskRows]) -> BTreeMap<Key, (f64, f64, f64, u64)> {
    let in_flight = FIELD_NAMES.iter().position(|x| *x == "in_flight").unwrap();
    let mut map = BTreeMap::new();
    for d in disks {
        for k in 0..d.t_ns.len() {
            let t = d.t_ns[k];
            for &len in &envelopes::LEVELS_NS {
                let key = |m: &str| (len, t / len * len, d.name.clone(), m.to_string());
                if let Some(g) = d.f[k].get(in_flight) {
                    add(&mut map, key("in_flight"), g as f64, g as f64, 0);
                }
                if k == 0 {
                    continue;
                }
                let dt = t - d.t_ns[k - 1];
                for (m, field, scale) in rates() {
                    let (Some(a), Some(b)) = (d.f[k - 1].get(field), d.f[k].get(field)) else {
                        continue;
                    };
                    if let Some(ch) = counter_delta(field, a, b) {
                        add(&mut map, key(m), rate(ch, scale, dt), ch as f64 * scale, dt);
                    }
                }
            }
        }
    }
    map.into_iter()
        .map(|(k, w)| {
            let mean = if k.3 == "in_flight" {
                w.sum / w.count as f64
            } else {
                w.sum / (w.dt_ns as f64 / 1e9)
            };
            (k, (w.min, w.max, mean, w.count))
        })
        .collect()
}

#[test]
fn envelopes_equal_what_the_raw_rows_give_under_a_bursty_load() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("256M");
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let mut rec = diskpulse()
        .args(["record", "--device", lo.name(), "--duration", "4s", "--out"])
        .arg(&run)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Bursts of different sizes with idle gaps between them (idle stretches are single
    // raw intervals: the windows must take them as the raw rows do).
    // A burst is N writes of 256 KiB, 1 ms apart: it spans many 10 ms windows.
    for (k, n) in [64usize, 16, 128, 32, 96].into_iter().enumerate() {
        for _ in 0..n {
            write_direct(std::path::Path::new(&lo.dev), 256 << 10, 256 << 10);
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(150 + 90 * k as u64));
    }
    assert!(rec.wait().unwrap().success());

    let (disks, warnings) = diskstats::read(&run.join(diskstats::FILE)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let (rows, warnings) = envelopes::read(&run.join(envelopes::FILE)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let want = from_raw(&disks);

    let mut got: BTreeMap<Key, (f64, f64, f64, u64)> = BTreeMap::new();
    for r in &rows {
        let key = (r.window_ns, r.t_ns, r.device.clone(), r.measure.clone());
        assert!(
            got.insert(key.clone(), (r.min, r.max, r.mean, r.count))
                .is_none(),
            "two rows for {key:?}"
        );
    }
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for (k, w) in &want {
        let g = got[k];
        assert_eq!((g.0, g.1, g.3), (w.0, w.1, w.3), "{k:?}: min, max, count");
        let tol = 1e-9 * w.2.abs().max(1e-9);
        assert!((g.2 - w.2).abs() <= tol, "{k:?}: mean {} vs {}", g.2, w.2);
    }

    // Not vacuous: the device's bursts are in the windows, at every level.
    let dev = lo.name().to_string();
    let raw = disks
        .iter()
        .find(|d| d.name == dev)
        .expect("the loop device's rows");
    let written = FIELD_NAMES
        .iter()
        .position(|x| *x == "sectors_written")
        .unwrap();
    let total_mib = (raw.f.last().unwrap().get(written).unwrap() - raw.f[0].get(written).unwrap())
        as f64
        * 512.0
        / MIB;
    assert!((total_mib - 84.0).abs() < 1.0, "wrote {total_mib} MiB");
    for &len in &envelopes::LEVELS_NS {
        let w: Vec<_> = rows
            .iter()
            .filter(|r| r.device == dev && r.measure == "write_mib_s" && r.window_ns == len)
            .collect();
        assert!(!w.is_empty(), "no write_mib_s windows of {len} ns");
        // The windows' mean x covered time adds up to what was written.
        let sum: f64 = w.iter().map(|r| r.mean * covered_s(raw, len, r.t_ns)).sum();
        assert!(
            (sum - total_mib).abs() < 0.01,
            "{len} ns windows hold {sum} MiB of {total_mib}"
        );
        let peak = w.iter().map(|r| r.max).fold(0.0, f64::max);
        assert!(peak > 20.0, "{len} ns: peak {peak} MiB/s");
    }
    let ten_ms = rows
        .iter()
        .filter(|r| r.device == dev && r.window_ns == 10_000_000 && r.measure == "write_iops")
        .count();
    assert!(ten_ms > 40, "{ten_ms} 10 ms windows");
    eprintln!(
        "{} envelope rows equal the raw rows' ({} raw rows of {}); {ten_ms} 10 ms windows of {dev} with writes",
        rows.len(),
        raw.t_ns.len(),
        dev
    );
}

/// The time a window's intervals cover (those that end in it), from the raw rows.
fn covered_s(d: &diskstats::DiskRows, len: u64, start: u64) -> f64 {
    (1..d.t_ns.len())
        .filter(|&k| d.t_ns[k] / len * len == start)
        .map(|k| (d.t_ns[k] - d.t_ns[k - 1]) as f64 / 1e9)
        .sum()
}
