//! Rules about the machine ([`SYSTEM`]): writeback settings, dirty memory, what could not
//! be read.

use super::{said, Level::*, Rule, Said, DIRTY_PENDING_MIB};
use crate::check::Facts;

type SystemRule = Rule<fn(&Facts) -> Option<Said>>;

/// A `vm.dirty_*` threshold as printed, and in MiB when known: `*_bytes` wins when set,
/// else `*_ratio` of the dirtyable memory.
fn threshold(f: &Facts, bytes: Option<u64>, ratio: Option<u64>) -> (String, Option<f64>) {
    let dirtyable_mib = f.system.memory.map(|m| m.dirtyable_kib as f64 / 1024.0);
    match (bytes, ratio) {
        (Some(b), _) if b > 0 => {
            let m = b as f64 / 1048576.0;
            (format!("{m:.0} MiB (bytes)"), Some(m))
        }
        (_, Some(r)) => {
            let m = dirtyable_mib.map(|x| x * r as f64 / 100.0);
            let approx = m.map(|m| format!(" = ~{m:.0} MiB")).unwrap_or_default();
            (format!("{r}%{approx}"), m)
        }
        _ => ("?".into(), None),
    }
}

/// A clock read above this is not a vDSO read (a system call or a hypervisor exit).
const SLOW_CLOCK_READ_NS: f64 = 500.0;

/// A clock step as the finding prints it.
fn step(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} us", ns as f64 / 1e3),
        _ => format!("{:.1} ms", ns as f64 / 1e6),
    }
}

/// The machine, in report order.
pub(crate) const SYSTEM: &[SystemRule] = &[
    Rule {
        code: "dirty-settings",
        levels: &[Info],
        judge: |f| {
            let d = &f.system.dirty;
            let (bg_text, bg_mib) =
                threshold(f, d.dirty_background_bytes, d.dirty_background_ratio);
            let (lim_text, _) = threshold(f, d.dirty_bytes, d.dirty_ratio);
            let expire_s = d.dirty_expire_centisecs.map(|c| c as f64 / 100.0);
            let wb_s = d.dirty_writeback_centisecs.map(|c| c as f64 / 100.0);
            let secs =
                |v: Option<f64>| v.map(|s| format!("{s:.0} s")).unwrap_or_else(|| "?".into());
            let mib = bg_mib
                .map(|m| format!("{m:.0} MiB"))
                .unwrap_or_else(|| "the background threshold".into());
            let s = expire_s
                .map(|s| format!("{s:.0} s"))
                .unwrap_or_else(|| "the expiry time".into());
            said(
                format!(
                    "writeback starts at {bg_text} dirty, writers block at {lim_text}; data \
                     dirty for {} is written back, checked every {}",
                    secs(expire_s),
                    secs(wb_s)
                ),
                format!(
                    "a buffered-write benchmark shorter than {s} or smaller than {mib} may never \
                     reach the disk: fsync at the end, or use O_DIRECT"
                ),
            )
        },
    },
    Rule {
        code: "writeback-disabled",
        levels: &[Warn],
        judge: |f| {
            if f.system.dirty.dirty_writeback_centisecs != Some(0) {
                return None;
            }
            said(
                "vm.dirty_writeback_centisecs is 0: periodic writeback is disabled, dirty data \
                 waits until memory runs short or a sync",
                "echo 500 > /proc/sys/vm/dirty_writeback_centisecs (the default) unless that is \
                 on purpose",
            )
        },
    },
    Rule {
        code: "dirty-pending",
        levels: &[Warn],
        judge: |f| {
            let m = f.system.memory?;
            let dirty_mib = m.dirty_kib as f64 / 1024.0;
            let writeback_mib = m.writeback_kib as f64 / 1024.0;
            if dirty_mib + writeback_mib < DIRTY_PENDING_MIB {
                return None;
            }
            said(
                format!(
                    "{dirty_mib:.0} MiB dirty and {writeback_mib:.0} MiB under writeback in the \
                     page cache: it will reach the disks during your benchmark"
                ),
                "run sync (and wait for it) before benchmarking",
            )
        },
    },
    Rule {
        code: "clock",
        levels: &[Pass, Info, Warn],
        judge: |f| {
            let c = &f.system.clock;
            let source = c.source.as_deref().unwrap_or("unknown");
            let seen = format!(
                "clocksource {source}: CLOCK_MONOTONIC seen to step by {}, a read costs {:.0} ns",
                step(c.step_ns),
                c.read_ns
            );
            if c.coarse() {
                let better: Vec<&str> = c
                    .available
                    .iter()
                    .map(String::as_str)
                    .filter(|s| !collectors::clock::COARSE_SOURCES.contains(s))
                    .collect();
                let advice = match better.first() {
                    Some(b) => format!(
                        "echo {b} > /sys/devices/system/clocksource/clocksource0/current_clocksource \
                         (available: {}); if the kernel switched away from it, dmesg says why",
                        c.available.join(" ")
                    ),
                    None => "no finer clocksource is available: boot the kernel with one (tsc, \
                             kvm-clock, hpet) before trusting 1 ms samples"
                        .into(),
                };
                return said(
                    format!("{seen}: 1 ms samples and microsecond latencies cannot be timed"),
                    advice,
                )
                .map(|s| s.at(Warn));
            }
            if c.read_ns > SLOW_CLOCK_READ_NS {
                return said(
                    format!(
                        "{seen}: every sample and every latency pays it (a vDSO read costs tens of \
                         ns)"
                    ),
                    format!(
                        "a clocksource with a vDSO read (tsc where the hypervisor offers it; \
                         available: {}) makes 1 ms sampling cheaper",
                        c.available.join(" ")
                    ),
                )
                .map(|s| s.at(Info));
            }
            said(seen, "nothing to change").map(|s| s.at(Pass))
        },
    },
    Rule {
        code: "processes-unreadable",
        levels: &[Info],
        judge: |f| {
            let n = f.system.unreadable;
            if n == 0 || f.system.root {
                return None;
            }
            said(
                format!(
                    "could not read /proc/PID/io of {n} processes (not root): busy processes may \
                     be missing"
                ),
                "run as root to see every process",
            )
        },
    },
];
