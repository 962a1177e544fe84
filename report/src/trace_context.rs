//! What else was going on at one instant of the run clock (a slow sync call's or block
//! request's start): the load.csv window and the probe.csv window that hold it (windows
//! are `[t_ns, t_ns + window_ns)`), the broker's /varz polls on either side of it
//! (varz.csv rows are instants: the rate between the two polls, the CPU estimate of the
//! later one), and the broker device's write burst it falls in. Everything is looked up
//! in what the run recorded; a source the run lacks is simply absent.

use super::interference::{burst_spans, lat};
use super::run::Run;
use format::summary::{AtThatMs, BrokerAt, DeviceSummary, LoadAt, ProbeAt};

/// The row of `rows` (sorted by `t_ns`) whose window holds `t`.
fn window_of<R>(
    rows: &[R],
    t: u64,
    start: impl Fn(&R) -> u64,
    len: impl Fn(&R) -> u64,
) -> Option<&R> {
    let k = rows.partition_point(|r| start(r) <= t);
    let r = rows.get(k.checked_sub(1)?)?;
    (t < start(r) + len(r).max(1)).then_some(r)
}

fn num(x: f64) -> String {
    format::units::num(x, 0)
}

/// [`AtThatMs`] at `t_ns`.
pub(crate) fn at_that_ms(
    run: &Run,
    devices: &[DeviceSummary],
    broker: &[String],
    t_ns: u64,
) -> AtThatMs {
    let in_write_burst = devices
        .iter()
        .filter(|d| broker.is_empty() || broker.contains(&d.name))
        .find(|d| burst_spans(d).iter().any(|&(a, b)| a <= t_ns && t_ns <= b))
        .map(|d| d.name.clone());
    let load: Vec<LoadAt> = run
        .load
        .iter()
        .filter_map(|(role, rows)| {
            let r = window_of(rows, t_ns, |r| r.t_ns, |r| r.window_ns)?;
            Some(LoadAt {
                role: role.clone(),
                window_start_s: r.t_ns as f64 / 1e9,
                ops_per_s: r.ops_per_s(),
                lat_p99_us: r.lat_p99_us,
            })
        })
        .collect();
    let broker_at: Vec<BrokerAt> = run
        .varz
        .iter()
        .filter_map(|(server, t)| {
            let k = t.t_ns.partition_point(|&x| x <= t_ns);
            if k == 0 || k >= t.len() {
                return None;
            }
            let (a, b) = (k - 1, k);
            let dt = (t.t_ns[b] - t.t_ns[a]) as f64 / 1e9;
            let col = |c: &str, i: usize| {
                t.col(c)
                    .and_then(|v| v.get(i).copied())
                    .filter(|x| x.is_finite())
            };
            let in_msgs = match (col("in_msgs", a), col("in_msgs", b)) {
                (Some(x), Some(y)) if y >= x && dt > 0.0 => Some((y - x) / dt),
                _ => None,
            };
            Some(BrokerAt {
                server: server.clone(),
                cpu_pct: col("cpu_pct", b),
                in_msgs_per_s: in_msgs,
            })
        })
        .collect();
    let probe: Vec<ProbeAt> = run
        .probe
        .iter()
        .flatten()
        .filter_map(|(direction, rows)| {
            let r = window_of(rows, t_ns, |r| r.t_ns, |r| r.window_ns)?;
            Some(ProbeAt {
                direction: direction.clone(),
                window_start_s: r.t_ns as f64 / 1e9,
                iops: r.ios as f64 / (r.active_ns.max(1) as f64 / 1e9),
                clat_p99_us: r.clat_p99_us,
            })
        })
        .collect();
    let mut parts = vec![];
    if let Some(d) = &in_write_burst {
        parts.push(format!("inside {d}'s write burst"));
    }
    for l in &load {
        parts.push(format!(
            "{} {} ops/s (p99 {})",
            l.role,
            num(l.ops_per_s),
            lat(l.lat_p99_us)
        ));
    }
    for b in &broker_at {
        let mut s = format!("{}:", b.server);
        if let Some(c) = b.cpu_pct {
            s.push_str(&format!(" cpu {c:.0}%"));
        }
        if let Some(m) = b.in_msgs_per_s {
            s.push_str(&format!(" {} msgs/s in", num(m)));
        }
        parts.push(s);
    }
    for p in &probe {
        parts.push(format!(
            "probe {} {} IOPS (p99 {})",
            p.direction,
            num(p.iops),
            lat(p.clat_p99_us)
        ));
    }
    AtThatMs {
        in_write_burst,
        load,
        broker: broker_at,
        probe,
        line: if parts.is_empty() {
            "nothing else recorded then".into()
        } else {
            parts.join("; ")
        },
    }
}
