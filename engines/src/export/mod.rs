//! `diskpulse export RUN`: a run directory's series as OpenMetrics text (for
//! `promtool tsdb create-blocks-from openmetrics`) or Influx line protocol, on absolute
//! time (`meta.json` `clock_zero_unix_ns` + each row's `t_ns`).
//!
//! Downsampled to `--step` (default 1 s): a sampled value (a counter, a gauge) is the
//! last row at or before each grid point `k * step` of the run clock, plus the device's
//! (table's) first and last row themselves, so totals and the first value are exact;
//! what only the 1 ms rows show is kept as peaks: the highest 1/10/100 ms window rate
//! within each step (`diskpulse_disk_peak_bytes_per_second`, stamped at the step's
//! start). One 1 ms row per device for an hour would be 3.6 M points per counter; at
//! 1 s it is 3,600.
//!
//! Both formats come from one list of [`Group`]s (a series' labels and times, and its
//! fields); [`openmetrics`] writes them family by family, [`influx`] row by row.

pub mod influx;
pub mod names;
pub mod openmetrics;

use format::csv::Table;
use format::load::LoadRow;
use report::analysis;
use report::run::{DiskRows, Run};

/// One field of a [`Group`]: one OpenMetrics series, one Influx field.
#[derive(Debug, Clone)]
pub struct Field {
    /// OpenMetrics sample name (counters end in `_total`).
    pub metric: String,
    /// Labels added to the group's for OpenMetrics (e.g. `window`).
    pub extra: Vec<(String, String)>,
    /// Influx field key.
    pub key: String,
    pub counter: bool,
    /// Influx writes it as an integer (`123i`).
    pub integer: bool,
    pub help: String,
    /// One value per time of the group; NaN: none there.
    pub v: Vec<f64>,
}

/// Series sharing labels and times: one Influx measurement and tag set.
#[derive(Debug, Clone)]
pub struct Group {
    pub measurement: String,
    pub labels: Vec<(String, String)>,
    /// Run clock, ns, strictly increasing and in distinct milliseconds.
    pub t_ns: Vec<u64>,
    pub fields: Vec<Field>,
}

/// What to export.
#[derive(Debug, Clone)]
pub struct Options {
    pub step_ns: u64,
}

/// The times a sampled series is exported at: its first row, the grid points after
/// it, and its last row; one per millisecond of the wall clock (`zero` + t: the
/// OpenMetrics timestamp), the later kept.
fn sample_times(first: u64, last: u64, step: u64, zero: u64) -> Vec<u64> {
    let mut out = vec![first];
    let mut k = first / step + 1;
    while k * step < last {
        out.push(k * step);
        k += 1;
    }
    if last > first {
        out.push(last);
    }
    let mut dedup: Vec<u64> = Vec::with_capacity(out.len());
    for t in out {
        match dedup.last_mut() {
            Some(p) if (zero + *p) / 1_000_000 == (zero + t) / 1_000_000 => *p = t,
            _ => dedup.push(t),
        }
    }
    dedup
}

/// The index of the last of `t` at or before `at` (`t` sorted), advancing `i`.
fn last_at(t: &[u64], at: u64, i: &mut usize) -> Option<usize> {
    while *i + 1 < t.len() && t[*i + 1] <= at {
        *i += 1;
    }
    (t.first().is_some_and(|&f| f <= at)).then_some(*i)
}

fn lab(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field(metric: &str, key: &str, counter: bool, integer: bool, help: &str) -> Field {
    Field {
        metric: metric.into(),
        extra: vec![],
        key: key.into(),
        counter,
        integer,
        help: help.into(),
        v: vec![],
    }
}

fn disk_group(d: &DiskRows, step: u64, zero: u64) -> Option<Group> {
    let (&first, &last) = (d.t_ns.first()?, d.t_ns.last()?);
    let times = sample_times(first, last, step, zero);
    let mut fields = vec![];
    for m in names::DISK_METRICS {
        if !analysis::has_field(d, m.field) {
            continue;
        }
        let key = m
            .name
            .trim_start_matches("node_disk_")
            .trim_end_matches("_total");
        let mut f = field(m.name, key, m.counter, m.scale.fract() == 0.0, m.help);
        let mut i = 0;
        f.v = times
            .iter()
            .map(|&t| {
                last_at(&d.t_ns, t, &mut i)
                    .and_then(|k| d.f[k].get(m.field))
                    .map(|x| x as f64 * m.scale)
                    .unwrap_or(f64::NAN)
            })
            .collect();
        fields.push(f);
    }
    Some(Group {
        measurement: "diskstats".into(),
        labels: lab(&[("device", &d.name)]),
        t_ns: times,
        fields,
    })
}

/// Per step, the highest rate over each peak window (windows wider than the step are
/// left out), one group per direction.
fn peak_groups(d: &DiskRows, duration: u64, step: u64) -> Vec<Group> {
    let steps = duration / step;
    if steps == 0 {
        return vec![];
    }
    let t: Vec<u64> = (0..steps).map(|k| k * step).collect();
    let mut out = vec![];
    for (dir, iv) in [
        ("read", analysis::read_bytes(d)),
        ("write", analysis::write_bytes(d)),
    ] {
        let mut fields = vec![];
        for (w, label) in names::WINDOWS_NS.iter().zip(names::WINDOW_LABELS) {
            if *w > step {
                continue;
            }
            let sums = analysis::window_sums(&iv, *w, (duration / w) as usize);
            let mut f = field(
                names::PEAK,
                &format!("peak_{label}"),
                false,
                false,
                "Highest rate in bytes per second over aligned windows of `window` within the step starting at the timestamp.",
            );
            f.extra = lab(&[("window", label)]);
            // Each window counts in the step its start lies in.
            let mut v = vec![0.0f64; steps as usize];
            for (j, s) in sums.iter().enumerate() {
                if let Some(x) = v.get_mut((j as u64 * w / step) as usize) {
                    *x = x.max(*s / (*w as f64 / 1e9));
                }
            }
            f.v = v;
            fields.push(f);
        }
        if fields.is_empty() {
            continue;
        }
        out.push(Group {
            measurement: "diskpulse_peaks".into(),
            labels: lab(&[("device", &d.name), ("direction", dir)]),
            t_ns: t.clone(),
            fields,
        });
    }
    out
}

/// A table of sampled values (meminfo, cpu, varz): `(column, metric, key, counter,
/// scale, help)` for the columns it has.
type ColumnSpec<'a> = (&'a str, String, &'a str, bool, f64, String);

fn table_group(
    measurement: &str,
    labels: Vec<(String, String)>,
    t: &Table,
    cols: &[ColumnSpec],
    step: u64,
    zero: u64,
) -> Option<Group> {
    let (&first, &last) = (t.t_ns.first()?, t.t_ns.last()?);
    let times = sample_times(first, last, step, zero);
    let mut fields = vec![];
    for (col, metric, key, counter, scale, help) in cols {
        let Some(vals) = t.col(col) else { continue };
        if vals.iter().all(|v| v.is_nan()) {
            continue;
        }
        let mut f = field(metric, key, *counter, scale.fract() == 0.0, help);
        let mut i = 0;
        f.v = times
            .iter()
            .map(|&at| {
                last_at(&t.t_ns, at, &mut i)
                    .map(|k| vals[k] * scale)
                    .unwrap_or(f64::NAN)
            })
            .collect();
        fields.push(f);
    }
    (!fields.is_empty()).then(|| Group {
        measurement: measurement.into(),
        labels,
        t_ns: times,
        fields,
    })
}

fn memory_cols() -> Vec<ColumnSpec<'static>> {
    collectors::procstat::MEM_COLUMNS
        .iter()
        .map(|c| {
            let base = c.trim_end_matches("_kib");
            (
                *c,
                format!("diskpulse_memory_{base}_bytes"),
                base,
                false,
                1024.0,
                format!("/proc/meminfo {base}, bytes (meminfo.csv {c} x 1024)."),
            )
        })
        .collect()
}

fn cpu_cols(user_hz: u64) -> Vec<ColumnSpec<'static>> {
    let hz = user_hz.max(1) as f64;
    collectors::procstat::CPU_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i < collectors::procstat::CPU_TICK_COLUMNS {
                let mode = c.trim_end_matches("_ticks");
                (
                    *c,
                    format!("diskpulse_cpu_{mode}_seconds_total"),
                    mode,
                    true,
                    1.0 / hz,
                    format!("CPU time in {mode} mode summed over all CPUs, seconds (/proc/stat ticks / USER_HZ)."),
                )
            } else {
                (
                    *c,
                    format!("diskpulse_{c}"),
                    *c,
                    false,
                    1.0,
                    format!("/proc/stat {c}: a gauge."),
                )
            }
        })
        .collect()
}

fn varz_cols() -> Vec<ColumnSpec<'static>> {
    let counter = |c: &'static str| {
        (
            c,
            format!("diskpulse_nats_{c}_total"),
            c,
            true,
            1.0,
            format!("nats-server /varz {c}: a counter since the server started."),
        )
    };
    let gauge = |c: &'static str, metric: &str| {
        (
            c,
            metric.to_string(),
            c,
            false,
            1.0,
            format!("nats-server /varz {c}: a gauge."),
        )
    };
    vec![
        gauge("cpu_pct", "diskpulse_nats_cpu_percent"),
        gauge("mem_bytes", "diskpulse_nats_mem_bytes"),
        gauge("connections", "diskpulse_nats_connections"),
        gauge("routes", "diskpulse_nats_routes"),
        gauge("subscriptions", "diskpulse_nats_subscriptions"),
        gauge("disk_io_waiters", "diskpulse_nats_disk_io_waiters"),
        counter("total_connections"),
        counter("in_msgs"),
        counter("out_msgs"),
        counter("in_bytes"),
        counter("out_bytes"),
        counter("slow_consumers"),
        counter("stalled_clients"),
        counter("disk_io_waits"),
    ]
}

/// load.csv of one role at grid points `t = k * step` up to the end of its last window:
/// ops, bytes and errors of the windows ended by `t` (counters: the last point holds
/// the totals), and the highest window p99 and max latency among the windows starting
/// in `[t, t + step)` (gauges, stamped at the step's start like every window).
fn load_group(role: &str, rows: &[LoadRow], step: u64) -> Option<Group> {
    let mut rows: Vec<&LoadRow> = rows.iter().collect();
    rows.sort_by_key(|r| r.t_ns + r.window_ns);
    let end = rows.iter().map(|r| r.t_ns + r.window_ns).max()?;
    let t: Vec<u64> = (0..=end.div_ceil(step)).map(|k| k * step).collect();
    let mut f_ops = field(
        "diskpulse_load_ops_total",
        "ops",
        true,
        true,
        "Operations completed by the load role (load.csv ops) in the windows ended by the timestamp.",
    );
    let mut f_bytes = field(
        "diskpulse_load_bytes_total",
        "bytes",
        true,
        true,
        "Payload bytes of the load role's operations (load.csv bytes).",
    );
    let mut f_err = field(
        "diskpulse_load_errors_total",
        "errors",
        true,
        true,
        "Failed operations of the load role (load.csv errors).",
    );
    let mut f_p99 = field(
        "diskpulse_load_latency_p99_max_seconds",
        "latency_p99_max_s",
        false,
        false,
        "The highest window p99 latency among the load windows starting in the step, seconds.",
    );
    let mut f_max = field(
        "diskpulse_load_latency_max_seconds",
        "latency_max_s",
        false,
        false,
        "The longest operation among the load windows starting in the step, seconds.",
    );
    let mut by_start = rows.clone();
    by_start.sort_by_key(|r| r.t_ns);
    let (mut ops, mut bytes, mut errors) = (0u64, 0u64, 0u64);
    let (mut i, mut j) = (0, 0);
    for &t0 in &t {
        let t1 = t0 + step;
        while i < rows.len() && rows[i].t_ns + rows[i].window_ns <= t0 {
            ops += rows[i].ops;
            bytes += rows[i].bytes;
            errors += rows[i].errors;
            i += 1;
        }
        let (mut p99, mut max) = (f64::NAN, f64::NAN);
        while j < by_start.len() && by_start[j].t_ns < t1 {
            let r = by_start[j];
            j += 1;
            if let Some(x) = r.lat_p99_us {
                p99 = if p99.is_nan() { x } else { p99.max(x) };
            }
            if let Some(x) = r.lat_max_us {
                max = if max.is_nan() { x } else { max.max(x) };
            }
        }
        f_ops.v.push(ops as f64);
        f_bytes.v.push(bytes as f64);
        f_err.v.push(errors as f64);
        f_p99.v.push(p99 / 1e6);
        f_max.v.push(max / 1e6);
    }
    Some(Group {
        measurement: "load".into(),
        labels: lab(&[("role", role)]),
        t_ns: t,
        fields: vec![f_ops, f_bytes, f_err, f_p99, f_max],
    })
}

/// Every group of a run, in a fixed order: devices (counters, then peaks), memory,
/// cpu, load roles, nats servers.
/// The diskstats rows are held in memory here ([`Run::disk_rows`]; `report` streams them).
pub fn groups(run: &Run, o: &Options) -> anyhow::Result<Vec<Group>> {
    let step = o.step_ns;
    let zero = run.meta.clock_zero_unix_ns;
    let mut out = vec![];
    let disks = run.disk_rows().map_err(|e| run.bad(e))?;
    for d in &disks {
        out.extend(disk_group(d, step, zero));
    }
    for d in &disks {
        out.extend(peak_groups(d, run.duration_ns, step));
    }
    // Every meminfo row (the report's `run.mem` is folded for drawing).
    if run.mem.is_some() {
        let m =
            format::procfs::read(&run.dir, format::procfs::MEMINFO_FILE).map_err(|e| run.bad(e))?;
        if let Some((m, _)) = m {
            out.extend(table_group(
                "memory",
                vec![],
                &m,
                &memory_cols(),
                step,
                zero,
            ));
        }
    }
    // Every cpu row (the report's `run.cpu` is folded for drawing).
    if run.cpu.is_some() {
        let c = format::procfs::read(&run.dir, format::procfs::CPU_FILE).map_err(|e| run.bad(e))?;
        if let Some((c, _)) = c {
            out.extend(table_group(
                "cpu",
                vec![],
                &c,
                &cpu_cols(run.meta.user_hz),
                step,
                zero,
            ));
        }
    }
    for (role, rows) in &run.load {
        out.extend(load_group(role, rows, step));
    }
    for (server, t) in &run.varz {
        out.extend(table_group(
            "nats_varz",
            lab(&[("server", server)]),
            t,
            &varz_cols(),
            step,
            zero,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_times_keep_first_and_last_and_one_per_ms() {
        let s = 1_000_000_000;
        assert_eq!(
            sample_times(300, 2_500_000_000, s, 0),
            vec![300, s, 2 * s, 2_500_000_000]
        );
        // The first row and a grid point in the same millisecond: the later stays.
        assert_eq!(sample_times(s - 10, s + 5, s, 0), vec![s - 10, s + 5]);
        assert_eq!(sample_times(s + 1, 3 * s, s, 0), vec![s + 1, 2 * s, 3 * s]);
        assert_eq!(sample_times(7, 7, s, 0), vec![7]);
        // Distinct run-clock milliseconds on one wall-clock millisecond.
        assert_eq!(
            sample_times(999_999, 1_000_001, s, 500_000),
            vec![1_000_001]
        );
    }

    #[test]
    fn load_counters_count_ended_windows_and_latency_is_stamped_at_the_start() {
        let row = |t_ns: u64, ops: u64, p99: f64| LoadRow {
            t_ns,
            window_ns: 100_000_000,
            role: "js-pub".into(),
            ops,
            bytes: ops * 10,
            errors: 0,
            lat_p50_us: None,
            lat_p90_us: None,
            lat_p99_us: Some(p99),
            lat_p999_us: None,
            lat_max_us: Some(p99 * 2.0),
            co_p50_us: None,
            co_p99_us: None,
            co_max_us: None,
            active_ns: 0,
            phase: None,
            oldest_wait_us: None,
        };
        let g = load_group(
            "js-pub",
            &[row(100_000_000, 20, 2000.0), row(0, 10, 1000.0)],
            100_000_000,
        )
        .unwrap();
        assert_eq!(g.t_ns, vec![0, 100_000_000, 200_000_000]);
        assert_eq!(g.fields[0].v, vec![0.0, 10.0, 30.0]);
        assert_eq!(g.fields[1].v, vec![0.0, 100.0, 300.0]);
        assert_eq!(g.fields[3].v[..2], [0.001, 0.002]);
        assert!(g.fields[3].v[2].is_nan());
    }

    #[test]
    fn last_at_walks_forward() {
        let t = [10, 20, 30];
        let mut i = 0;
        assert_eq!(last_at(&t, 5, &mut i), None);
        assert_eq!(last_at(&t, 10, &mut i), Some(0));
        assert_eq!(last_at(&t, 29, &mut i), Some(1));
        assert_eq!(last_at(&t, 99, &mut i), Some(2));
    }
}
