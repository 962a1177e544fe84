//! The table `report` prints on stdout.

use std::fmt::Write;

use format::summary::Summary;
use format::units::{bytes_fixed, rate_mib_s};

#[allow(
    clippy::too_many_lines,
    reason = "the text table's rows in the order they print"
)]
pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "run {} ({:.1} s)", s.run, s.duration_s);
    let _ = writeln!(
        out,
        "{:<10} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9} {:>8}",
        "device",
        "dir",
        "total",
        "mean",
        "peak 1ms",
        "peak 10ms",
        "peak 100ms",
        "peak 1s",
        format!("UI {:.0}s", s.ui_window_s),
        "hidden",
        "bursts",
        "period"
    );
    let mut notes = vec![];
    for d in &s.devices {
        if let Some(l) = super::order::label_of(d) {
            notes.push(format!(
                "{}: {l}; it also carries the rest of the machine's I/O",
                d.name
            ));
        }
        for (name, x) in [("write", &d.write), ("read", &d.read)] {
            if x.bytes == 0.0 && name == "read" {
                continue;
            }
            // A completion peak that is bunching is marked, and said under the table.
            let peak = |v: f64, width: &str| {
                let r = rate_mib_s(v);
                if x.bunched.iter().any(|b| b == width) {
                    format!("{r}*")
                } else {
                    r
                }
            };
            if !x.bunched.is_empty() {
                let sp = x.service_peak_mib_s.as_ref();
                notes.push(format!(
                    "* {} {name}: the {} completion peak(s) are completion bunching (I/Os that waited completing together); counted over their service time: {}",
                    d.name,
                    x.bunched.join(", "),
                    sp.map(|p| format!(
                        "{} at 1 ms, {} at 10 ms, {} at 100 ms",
                        rate_mib_s(p.p1ms),
                        rate_mib_s(p.p10ms),
                        rate_mib_s(p.p100ms)
                    ))
                    .unwrap_or_else(|| "-".into())
                ));
            }
            let _ =
                writeln!(
                out,
                "{:<10} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9} {:>8}",
                d.name,
                if name == "write" { "W" } else { "R" },
                bytes_fixed(x.bytes),
                rate_mib_s(x.mean_mib_s),
                peak(x.peak_mib_s.p1ms, "1ms"),
                peak(x.peak_mib_s.p10ms, "10ms"),
                peak(x.peak_mib_s.p100ms, "100ms"),
                peak(x.peak_mib_s.p1s, "1s"),
                rate_mib_s(x.ui_average_mib_s).replace(" MiB/s", ""),
                x.hidden_factor.map(|h| format!("{h:.0}x")).unwrap_or("-".into()),
                x.bursts.count,
                x.bursts.period_s.map(|p| format!("{p:.2}s")).unwrap_or("-".into()),
            );
        }
    }
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    let opt = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or("null".into());
    for (role, l) in &s.load {
        let _ = writeln!(
            out,
            "broker {role}: {} ops ({:.0}/s), worst window p99 {} us, errors {}",
            l.ops,
            l.ops_per_s,
            opt(l.worst_window_lat_p99_us),
            l.errors
        );
    }
    if let Some(m) = &s.memory {
        let _ = writeln!(
            out,
            "memory: Dirty up to {:.1} MiB, Writeback up to {:.1} MiB",
            m.dirty_max_mib.unwrap_or(0.0),
            m.writeback_max_mib.unwrap_or(0.0)
        );
    }
    if let Some(st) = s
        .samplers
        .get("diskstats")
        .and_then(|d| d.stats.as_ref().map(|st| (d, st)))
    {
        let (d, st) = st;
        let _ = writeln!(
            out,
            "sampler: {} of {} diskstats samples at {} us, jitter p99 {:.0} us",
            st.samples, st.expected, d.interval_us, st.jitter_p99_us
        );
    }
    if let Some(b) = &s.broker_io {
        for d in &b.devices {
            let _ = writeln!(out, "{}", d.line);
        }
    }
    if let Some(t) = &s.trace {
        for l in &t.lines {
            let _ = writeln!(out, "trace: {l}");
        }
        for c in t.slowest_fsyncs.iter().take(3) {
            let _ = writeln!(
                out,
                "slow {} at {:.3} s: {:.1} ms ({} pid {}{}); {}",
                c.call,
                c.t_s,
                c.dur_ms,
                c.comm,
                c.pid,
                if c.file.is_empty() {
                    String::new()
                } else {
                    format!(", {}", c.file)
                },
                c.at.line
            );
        }
        for r in t.slowest_requests.iter().take(3) {
            let _ = writeln!(
                out,
                "slow {} {} at {:.3} s: {:.1} ms service, {} B {} ({}); {}",
                r.device, r.op, r.t_s, r.service_ms, r.bytes, r.flags, r.comm, r.at.line
            );
        }
    }
    for r in &s.restarts {
        let _ = writeln!(
            out,
            "restart {} at {:.1} s: read {} from {} (peak {} over 100 ms, burst {:.2} s); healthy after {} ms",
            r.node,
            r.t_s,
            bytes_fixed(r.read_bytes),
            r.devices.join("+"),
            rate_mib_s(r.read_peak_mib_s),
            r.read_burst_s,
            r.healthy_ms.map(|h| format!("{h:.0}")).unwrap_or("-".into())
        );
    }
    for f in &s.faults {
        let _ = writeln!(out, "{}", super::faults::line(f));
    }
    for h in &s.headline {
        let _ = writeln!(out, "{h}");
    }
    // What ran at the same time did to each other: the sentences one can quote.
    for l in s.interference.iter().flat_map(|i| &i.lines) {
        let _ = writeln!(out, "{l}");
    }
    out
}
