//! Output of `check`: a human report grouped per target and device, or JSON.
//!
//! Both are pure functions of the facts and findings (no I/O), so tests can assert on
//! them. The JSON layout is documented in docs/commands/check.md; change both
//! together and bump [`FORMAT_VERSION`] when a field changes meaning.

use std::fmt::Write as _;

use format::check::{
    CheckReport, ClockJson, Counts, DeviceJson, Finding, FlushTestsJson, IoJson, LatJson, ModeJson,
    MountJson, NvmeJson, ProcessJson, ScsiJson, SystemJson, TargetJson,
};

use super::rules::{Level, Placed, Scope};
use super::{DeviceFacts, Facts, FlushOutcome, TargetKind};
use collectors::check::flush::Mode;
use collectors::directio::LatencyNs;

pub const FORMAT_VERSION: u32 = 1;

/// The attributes shown on a device's line, in this order.
const SHOWN: [&str; 7] = [
    "write_cache",
    "fua",
    "rotational",
    "scheduler",
    "nr_requests",
    "read_ahead_kb",
    "model",
];

fn counts(findings: &[Placed]) -> [usize; 4] {
    let mut c = [0; 4];
    for p in findings {
        c[p.finding.level as usize] += 1;
    }
    c
}

/// The active scheduler from sysfs's `none [mq-deadline] kyber`.
fn active_scheduler(s: &str) -> &str {
    s.split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
        .unwrap_or(s)
}

fn device_line(d: &DeviceFacts) -> String {
    let mut parts = vec![];
    for k in SHOWN {
        let v = d.attr(k).map(|v| {
            if k == "scheduler" {
                active_scheduler(v).to_string()
            } else {
                v.to_string()
            }
        });
        parts.push(format!("{k} {}", v.unwrap_or_else(|| "-".into())));
    }
    if let Some(Ok(v)) = &d.nvme {
        parts.push(format!(
            "nvme vwc {}",
            match (v.present, v.enabled) {
                (false, _) => "absent",
                (true, Some(false)) => "disabled",
                _ => "enabled",
            }
        ));
    }
    if let Some(s) = &d.scsi {
        if let Ok(ct) = &s.cache_type {
            parts.push(format!("scsi cache_type {}", ct.raw));
        }
    }
    if let Some(Ok(ct)) = &d.virtio_cache_type {
        parts.push(format!("virtio cache_type {}", ct.raw));
    }
    parts.join(" | ")
}

fn push_finding(s: &mut String, p: &Placed) {
    let f = &p.finding;
    let _ = writeln!(s, "  {}  {}", f.level.as_str(), f.message);
    let _ = writeln!(s, "        -> {}", f.advice);
}

fn lat_us(l: &LatencyNs, p: f64) -> f64 {
    l.at(p).unwrap_or(0) as f64 / 1000.0
}

/// The human report.
pub fn human(facts: &Facts, findings: &[Placed], exit_code: i32) -> String {
    let mut s = String::new();
    for (ti, t) in facts.targets.iter().enumerate() {
        let what = match (&t.mount, t.kind) {
            (Some(m), _) => format!(
                "{} on {}, mounted at {} ({})",
                m.fstype,
                m.source,
                m.point.display(),
                m.options().join(",")
            ),
            (None, TargetKind::Device) => "block device, not mounted".to_string(),
            (None, TargetKind::Path) => "no mount found".to_string(),
        };
        let chain = t
            .devices
            .iter()
            .map(|d| d.dev.name.as_str())
            .collect::<Vec<_>>()
            .join(" -> ");
        let _ = writeln!(s, "== {}: {what}; devices: {chain}", t.arg);
        for d in &t.devices {
            let _ = writeln!(
                s,
                "{}  {}  {}  [{}{}]",
                d.dev.name,
                d.dev.num,
                d.dev.why,
                d.kind.label(),
                if d.virtual_disk { ", virtual" } else { "" }
            );
            let _ = writeln!(s, "  {}", device_line(d));
            for p in findings.iter().filter(|p| {
                p.target == Some(ti)
                    && p.device.as_deref() == Some(&d.dev.name)
                    && p.finding.scope == Scope::Device
            }) {
                push_finding(&mut s, p);
            }
        }
        let _ = writeln!(s, "{}: mount and flush tests", t.arg);
        if let FlushOutcome::Measured(r) = &t.flush {
            let whose = if r.written.starts_with("/dev") {
                "the raw device, --allow-destructive"
            } else {
                "our file, removed afterwards"
            };
            let _ = writeln!(
                s,
                "  {} B writes at queue depth 1 on {} ({whose}):",
                r.block_bytes,
                r.written.display()
            );
            let _ = writeln!(
                s,
                "  {:<18} {:>8} {:>10} {:>10} {:>10}",
                "mode", "ops/s", "p50 us", "p99 us", "max us"
            );
            for m in &r.modes {
                let _ = writeln!(
                    s,
                    "  {:<18} {:>8.0} {:>10.1} {:>10.1} {:>10.1}",
                    m.mode.label(),
                    m.ops_per_s(),
                    lat_us(&m.lat, 50.0),
                    lat_us(&m.lat, 99.0),
                    m.lat.max as f64 / 1000.0
                );
            }
        }
        for p in findings
            .iter()
            .filter(|p| p.target == Some(ti) && p.finding.scope != Scope::Device)
        {
            push_finding(&mut s, p);
        }
    }
    let sys = &facts.system;
    let sample_s = sys.sample_ns as f64 / 1e9;
    let _ = writeln!(s, "== system");
    let vm: Vec<String> = sys
        .dirty
        .entries()
        .iter()
        .map(|(k, v)| format!("{k} {}", v.map(|x| x.to_string()).unwrap_or("-".into())))
        .collect();
    let _ = writeln!(s, "  vm.{}", vm.join(" | vm."));
    if let Some(m) = sys.memory {
        let _ = writeln!(
            s,
            "  Dirty {:.1} MiB | Writeback {:.1} MiB",
            m.dirty_kib as f64 / 1024.0,
            m.writeback_kib as f64 / 1024.0
        );
    }
    let shown: Vec<_> = sys.processes.iter().take(10).collect();
    if shown.is_empty() {
        let _ = writeln!(s, "  processes doing I/O during {sample_s:.1} s: none");
    } else {
        let _ = writeln!(
            s,
            "  processes doing I/O during {sample_s:.1} s (/proc/PID/io: per process, any \
             device; 'files on' = checked devices it has files open on):"
        );
        for p in &shown {
            let on = if p.on_devices.is_empty() {
                String::new()
            } else {
                format!("  files on {}", p.on_devices.join(", "))
            };
            let _ = writeln!(
                s,
                "    {:>7} {:<16} {:>8.1} MiB/s read {:>8.1} MiB/s write{on}",
                p.pid,
                p.comm,
                p.read_bytes as f64 / 1048576.0 / sample_s,
                p.write_bytes as f64 / 1048576.0 / sample_s,
            );
        }
        if sys.processes.len() > shown.len() {
            let _ = writeln!(s, "    ... and {} more", sys.processes.len() - shown.len());
        }
    }
    let _ = writeln!(
        s,
        "  clocksource {} (available: {}) | step {} ns | read {:.0} ns",
        sys.clock.source.as_deref().unwrap_or("-"),
        sys.clock.available.join(" "),
        sys.clock.step_ns,
        sys.clock.read_ns
    );
    for p in findings.iter().filter(|p| p.target.is_none()) {
        push_finding(&mut s, p);
    }
    let c = counts(findings);
    let _ = writeln!(
        s,
        "summary: {} FAIL, {} WARN, {} PASS, {} INFO -> exit {exit_code}",
        c[Level::Fail as usize],
        c[Level::Warn as usize],
        c[Level::Pass as usize],
        c[Level::Info as usize]
    );
    s
}

fn lat_json(l: &LatencyNs) -> LatJson {
    LatJson {
        lat_min_us: l.min as f64 / 1000.0,
        lat_mean_us: l.mean / 1000.0,
        lat_p50_us: lat_us(l, 50.0),
        lat_p99_us: lat_us(l, 99.0),
        lat_p999_us: lat_us(l, 99.9),
        lat_max_us: l.max as f64 / 1000.0,
    }
}

fn device_json(d: &DeviceFacts) -> DeviceJson {
    let nvme = d.nvme.as_ref().map(|r| match r {
        Ok(v) => NvmeJson::Read {
            vwc_present: v.present,
            vwc_enabled: v.enabled,
            model: v.model.clone(),
        },
        Err(e) => NvmeJson::Error { error: e.clone() },
    });
    let scsi = d.scsi.as_ref().map(|s| match &s.cache_type {
        Ok(ct) => ScsiJson::Read {
            cache_type: ct.raw.clone(),
            wce: ct.write_cache,
            rcd: ct.read_cache_disabled,
            fua: s.fua,
        },
        Err(e) => ScsiJson::Error {
            error: e.clone(),
            fua: s.fua,
        },
    });
    let virtio = d.virtio_cache_type.as_ref().map(|r| {
        r.as_ref()
            .map(|c| c.raw.clone())
            .unwrap_or_else(|e| e.clone())
    });
    let io = d.io.map(|io| IoJson {
        read_mib_s: io.read_mib_s(),
        write_mib_s: io.write_mib_s(),
        iops: io.iops(),
        reads: io.reads,
        writes: io.writes,
        read_bytes: io.read_bytes,
        write_bytes: io.write_bytes,
        flushes: io.flushes,
    });
    DeviceJson {
        name: d.dev.name.clone(),
        major: d.dev.num.major,
        minor: d.dev.num.minor,
        why: d.dev.why.clone(),
        parent: d.dev.parent.clone(),
        kind: d.kind.label().to_string(),
        virtual_disk: d.virtual_disk,
        queue: d.queue.iter().cloned().collect(),
        nvme,
        scsi,
        virtio_cache_type: virtio,
        io_during_sample: io,
    }
}

fn flush_json(flush: &FlushOutcome) -> FlushTestsJson {
    match flush {
        FlushOutcome::Measured(r) => {
            let modes = r
                .modes
                .iter()
                .map(|m| {
                    let v = ModeJson {
                        lat: lat_json(&m.lat),
                        ops: m.ops,
                        ops_per_s: m.ops_per_s(),
                    };
                    (m.mode.key().to_string(), v)
                })
                .collect();
            let p50 = |m: Mode| r.get(m).map(|x| lat_us(&x.lat, 50.0));
            FlushTestsJson::Measured {
                written: r.written.clone(),
                block_bytes: r.block_bytes,
                modes,
                flush_cost_p50_us: p50(Mode::DirectDsync)
                    .zip(p50(Mode::Direct))
                    .map(|(a, b)| a - b),
            }
        }
        FlushOutcome::Skipped(_) => FlushTestsJson::Skipped,
        FlushOutcome::NotRun => FlushTestsJson::NotRun,
        FlushOutcome::Failed(e) => FlushTestsJson::Failed {
            error: e.to_string(),
        },
    }
}

/// The JSON document (print it through a `serde_json::Value`: its keys sorted, as the
/// README shows them).
pub fn json(facts: &Facts, findings: &[Placed], exit_code: i32) -> CheckReport {
    let targets = facts
        .targets
        .iter()
        .map(|t| TargetJson {
            arg: t.arg.clone(),
            kind: match t.kind {
                TargetKind::Path => "path",
                TargetKind::Device => "device",
            }
            .to_string(),
            path: t.path.clone(),
            mount: t.mount.as_ref().map(|m| MountJson {
                point: m.point.clone(),
                fstype: m.fstype.clone(),
                source: m.source.clone(),
                options: m.options().into_iter().map(String::from).collect(),
                barrier_off: t.durability.as_ref().and_then(|d| d.barrier_off.clone()),
            }),
            devices: t.devices.iter().map(device_json).collect(),
            flush_tests: flush_json(&t.flush),
        })
        .collect();
    let sys = &facts.system;
    let sample_s = sys.sample_ns as f64 / 1e9;
    let processes = sys
        .processes
        .iter()
        .map(|p| ProcessJson {
            pid: p.pid,
            comm: p.comm.clone(),
            read_mib_s: p.read_bytes as f64 / 1048576.0 / sample_s,
            write_mib_s: p.write_bytes as f64 / 1048576.0 / sample_s,
            read_bytes: p.read_bytes,
            write_bytes: p.write_bytes,
            files_on: p.on_devices.clone(),
        })
        .collect();
    let list = findings
        .iter()
        .map(|p| Finding {
            level: p.finding.level.as_str().to_string(),
            code: p.finding.code.to_string(),
            target: p.target.map(|i| facts.targets[i].arg.clone()),
            device: p.device.clone(),
            message: p.finding.message.clone(),
            advice: p.finding.advice.clone(),
        })
        .collect();
    let c = counts(findings);
    let n = |l: Level| c[l as usize] as u64;
    CheckReport {
        format_version: FORMAT_VERSION,
        version: env!("CARGO_PKG_VERSION").to_string(),
        targets,
        system: SystemJson {
            vm: sys
                .dirty
                .entries()
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            dirty_mib: sys.memory.map(|m| m.dirty_kib as f64 / 1024.0),
            writeback_mib: sys.memory.map(|m| m.writeback_kib as f64 / 1024.0),
            sample_s,
            processes,
            processes_unreadable: sys.unreadable,
            clock: ClockJson {
                source: sys.clock.source.clone(),
                available: sys.clock.available.clone(),
                step_ns: sys.clock.step_ns,
                read_ns: sys.clock.read_ns,
            },
        },
        findings: list,
        counts: Counts {
            fail: n(Level::Fail),
            warn: n(Level::Warn),
            pass: n(Level::Pass),
            info: n(Level::Info),
        },
        exit_code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_in_brackets_is_the_active_one() {
        assert_eq!(
            active_scheduler("none [mq-deadline] kyber bfq"),
            "mq-deadline"
        );
        assert_eq!(active_scheduler("none"), "none");
    }
}
