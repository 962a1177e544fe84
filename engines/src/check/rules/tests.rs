//! Rules judged against made-up facts: the level, code and text each gives.

use super::*;
use crate::check::{DeviceFacts, FlushOutcome, SystemFacts, TargetFacts, TargetKind};
use collectors::check::flush::{Mode, ModeResult, Results};
use collectors::check::kind::DeviceKind;
use collectors::check::nvme::VolatileWriteCache;
use collectors::check::scsi::{parse_cache_type, ScsiDisk};
use collectors::check::vm::DirtyMemory;
use collectors::devices::{DevNum, Device};
use collectors::directio::{latency_histogram, record_ns, LatencyNs};
use collectors::mounts::Mount;

fn dev(name: &str, kind: DeviceKind, why: &str, queue: &[(&str, &str)]) -> DeviceFacts {
    DeviceFacts {
        dev: Device {
            name: name.into(),
            num: DevNum { major: 8, minor: 0 },
            why: why.into(),
            parent: None,
        },
        disk: name.into(),
        kind,
        virtual_disk: false,
        queue: queue
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        nvme: None,
        scsi: None,
        virtio_cache_type: None,
        stacked: false,
        lower: vec![],
        io: None,
        busy_procs: vec![],
        match_devs: vec![],
    }
}

/// Results where each mode's latency is `us` microseconds and its rate `per_s`.
fn measured(modes: [(Mode, f64, f64); 3]) -> FlushOutcome {
    FlushOutcome::Measured(Results {
        written: "/mnt/x/.diskpulse-check-1".into(),
        block_bytes: 4096,
        modes: modes
            .iter()
            .map(|&(mode, us, per_s)| {
                let mut h = latency_histogram();
                for _ in 0..100 {
                    record_ns(&mut h, (us * 1000.0) as u64);
                }
                ModeResult {
                    mode,
                    ops: per_s as u64,
                    elapsed_ns: 1_000_000_000,
                    lat: LatencyNs::from_histogram(&h),
                }
            })
            .collect(),
    })
}

fn facts(devices: Vec<DeviceFacts>, flush: FlushOutcome) -> Facts {
    Facts {
        targets: vec![TargetFacts {
            arg: "/mnt/x".into(),
            kind: TargetKind::Path,
            path: "/mnt/x".into(),
            mount: None,
            durability: None,
            devices,
            flush,
            planned: None,
        }],
        system: SystemFacts {
            dirty: Default::default(),
            memory: None,
            sample_ns: 1_000_000_000,
            processes: vec![],
            unreadable: 0,
            root: true,
            clock: collectors::clock::ClockFacts {
                source: Some("tsc".into()),
                available: vec!["tsc".into(), "hpet".into(), "jiffies".into()],
                step_ns: 30,
                read_ns: 25.0,
            },
        },
        interrupted: false,
    }
}

fn codes(f: &Facts) -> Vec<(&'static str, Level)> {
    judge(f)
        .into_iter()
        .filter(|p| p.target.is_some())
        .map(|p| (p.finding.code, p.finding.level))
        .collect()
}

const HOLDS: &str = "holds /mnt/x";

/// 400 MiB written in 3000 writes over 1 s: busy.
fn busy_io() -> crate::check::IoDelta {
    crate::check::IoDelta {
        elapsed_ns: 1_000_000_000,
        write_bytes: 400 << 20,
        writes: 3000,
        ..Default::default()
    }
}

#[test]
fn a_disk_whose_cache_is_on_but_the_kernel_says_write_through_fails() {
    let mut sda = dev(
        "sda",
        DeviceKind::Scsi,
        HOLDS,
        &[("write_cache", "write through"), ("rotational", "0")],
    );
    sda.scsi = Some(ScsiDisk {
        dir: "/sys/class/scsi_disk/0:0:0:0".into(),
        cache_type: parse_cache_type("write back"),
        fua: Some(true),
    });
    let f = facts(
        vec![sda],
        FlushOutcome::Skipped(crate::check::SkipReason::Quick),
    );
    let c = codes(&f);
    assert!(c.contains(&("flushes-dropped", Level::Fail)), "{c:?}");
    assert!(c.contains(&("scsi-write-back", Level::Pass)), "{c:?}");
    let j = judge(&f);
    let msg = &j[0].finding.message;
    assert!(msg.contains("SCSI cache_type is \"write back\""), "{msg}");
    assert_eq!(exit_code(&j, false), 1);
}

#[test]
fn nvme_get_features_results_become_findings() {
    let mut n = dev(
        "nvme0n1",
        DeviceKind::Nvme,
        HOLDS,
        &[("write_cache", "write back")],
    );
    n.nvme = Some(Ok(VolatileWriteCache {
        present: true,
        enabled: Some(false),
        model: None,
    }));
    let c = codes(&facts(vec![n.clone()], FlushOutcome::NotRun));
    assert!(c.contains(&("nvme-vwc-disabled", Level::Warn)), "{c:?}");
    n.nvme = Some(Ok(VolatileWriteCache {
        present: false,
        enabled: None,
        model: None,
    }));
    let c = codes(&facts(vec![n], FlushOutcome::NotRun));
    assert!(c.contains(&("nvme-no-vwc", Level::Info)), "{c:?}");
}

#[test]
fn the_reference_studys_raid1_lun_writes_as_slowly_as_it_flushes() {
    // Write cache forcibly off on the array while the LUN still says write back:
    // plain writes ~260 us, durable ones about the same.
    let lun = dev(
        "sdb",
        DeviceKind::Scsi,
        HOLDS,
        &[("write_cache", "write back"), ("rotational", "0")],
    );
    let f = facts(
        vec![lun.clone()],
        measured([
            (Mode::Direct, 260.0, 3800.0),
            (Mode::DirectDsync, 280.0, 3500.0),
            (Mode::WriteFdatasync, 300.0, 3300.0),
        ]),
    );
    let c = codes(&f);
    assert!(
        c.contains(&("writes-as-slow-as-flushes", Level::Warn)),
        "{c:?}"
    );
    // With the cache on, flushes cost something: PASS.
    let f = facts(
        vec![lun.clone()],
        measured([
            (Mode::Direct, 120.0, 8000.0),
            (Mode::DirectDsync, 900.0, 1100.0),
            (Mode::WriteFdatasync, 1000.0, 1000.0),
        ]),
    );
    assert!(codes(&f).contains(&("flush-cost", Level::Pass)));
    // "write through" and flushes as fast as writes: a note.
    let mut wt = lun;
    wt.queue[0].1 = "write through".into();
    let f = facts(
        vec![wt],
        measured([
            (Mode::Direct, 60.0, 15000.0),
            (Mode::DirectDsync, 62.0, 14000.0),
            (Mode::WriteFdatasync, 70.0, 12000.0),
        ]),
    );
    let c = codes(&f);
    assert!(c.contains(&("no-flushes-sent", Level::Info)), "{c:?}");
    assert!(c.contains(&("write-cache-off", Level::Info)), "{c:?}");
}

#[test]
fn flush_rate_against_a_spinning_disk() {
    let (hdd, flush) = spinning("write back", 2000.0);
    let c = codes(&facts(vec![hdd.clone()], flush));
    assert!(c.contains(&("flush-rate-impossible", Level::Fail)), "{c:?}");
    let (_, flush) = spinning("write back", 110.0);
    let c = codes(&facts(vec![hdd.clone()], flush));
    assert!(c.contains(&("flush-rate-plausible", Level::Pass)), "{c:?}");
    // Slow because someone else was writing: no conclusion.
    let mut busy = hdd.clone();
    busy.io = Some(busy_io());
    let (_, flush) = spinning("write back", 110.0);
    let c = codes(&facts(vec![busy], flush));
    assert!(
        c.contains(&("flush-rate-inconclusive", Level::Info)),
        "{c:?}"
    );
    assert!(c.contains(&("device-busy", Level::Warn)), "{c:?}");
    let mut vm = hdd;
    vm.virtual_disk = true;
    let (_, flush) = spinning("write back", 2000.0);
    let c = codes(&facts(vec![vm], flush));
    assert!(c.contains(&("flush-rate-impossible", Level::Warn)), "{c:?}");
}

#[test]
fn a_partition_and_its_disk_are_judged_once() {
    let mut part = dev(
        "sda1",
        DeviceKind::Scsi,
        HOLDS,
        &[("write_cache", "write back")],
    );
    part.dev.parent = Some("sda".into());
    part.disk = "sda".into();
    let disk = dev(
        "sda",
        DeviceKind::Scsi,
        "whole disk of sda1",
        &[("write_cache", "write back")],
    );
    let c = codes(&facts(vec![part, disk], FlushOutcome::NotRun));
    assert_eq!(
        c.iter().filter(|x| x.0 == "write-cache-on").count(),
        1,
        "{c:?}"
    );
}

#[test]
fn levels_and_exit_codes() {
    let placed = |level, target| Placed {
        target,
        device: None,
        finding: Finding {
            code: "x",
            level,
            scope: Scope::System,
            message: "seen".into(),
            advice: "do".into(),
        },
    };
    let w = placed(Level::Warn, None);
    let f = placed(Level::Fail, Some(0));
    let i = placed(Level::Info, None);
    assert_eq!(exit_code(&[], true), 0);
    assert_eq!(exit_code(std::slice::from_ref(&i), true), 0);
    assert_eq!(exit_code(std::slice::from_ref(&w), false), 0);
    assert_eq!(exit_code(std::slice::from_ref(&w), true), 1);
    assert_eq!(exit_code(&[w, f], false), 1);
}

/// A rotational disk at `per_s` durable writes/s, as `sdc` below a path.
fn spinning(write_cache: &str, per_s: f64) -> (DeviceFacts, FlushOutcome) {
    let hdd = dev(
        "sdc",
        DeviceKind::Scsi,
        HOLDS,
        &[("write_cache", write_cache), ("rotational", "1")],
    );
    let flush = measured([
        (Mode::Direct, 100.0, 9000.0),
        (Mode::DirectDsync, 1e6 / per_s, per_s),
        (Mode::WriteFdatasync, 1e6 / per_s, per_s),
    ]);
    (hdd, flush)
}

#[test]
fn an_impossible_flush_rate_fails_only_on_real_write_back_disks() {
    let level = |f: &Facts| {
        let j = judge(f);
        let p = j
            .iter()
            .find(|p| p.finding.code == "flush-rate-impossible")
            .expect("flush-rate-impossible")
            .clone();
        assert!(
            p.finding.message.contains("2000 durable writes/s"),
            "{}",
            p.finding.message
        );
        p.finding.level
    };
    let (hdd, flush) = spinning("write back", 2000.0);
    assert_eq!(level(&facts(vec![hdd.clone()], flush)), Level::Fail);
    let (_, flush) = spinning("write back", 2000.0);
    let mut vm = hdd;
    vm.virtual_disk = true;
    assert_eq!(level(&facts(vec![vm], flush)), Level::Warn);
    let (wt, flush) = spinning("write through", 2000.0);
    assert_eq!(level(&facts(vec![wt], flush)), Level::Warn);
}

#[test]
fn flush_rate_findings_name_their_disk_and_show_with_the_tests() {
    for (per_s, busy, code) in [
        (2000.0, false, "flush-rate-impossible"),
        (110.0, false, "flush-rate-plausible"),
        (110.0, true, "flush-rate-inconclusive"),
    ] {
        let (mut hdd, flush) = spinning("write back", per_s);
        if busy {
            hdd.io = Some(busy_io());
        }
        let j = judge(&facts(vec![hdd], flush));
        let p = j.iter().find(|p| p.finding.code == code).expect(code);
        assert_eq!(p.device.as_deref(), Some("sdc"), "{code}");
        assert_eq!(p.finding.scope, Scope::Tests, "{code}");
    }
}

/// The `clock` finding at each of its levels, from the facts alone.
#[test]
fn clock_warns_on_ticks_notes_slow_reads_and_passes_a_fine_clock() {
    let clock = |f: &Facts| {
        judge(f)
            .into_iter()
            .find(|p| p.finding.code == "clock")
            .map(|p| p.finding)
            .expect("clock is always judged")
    };
    let mut f = facts(vec![], FlushOutcome::NotRun);
    let c = clock(&f);
    assert_eq!(c.level, Level::Pass, "{c:?}");
    assert!(
        c.message.contains("clocksource tsc") && c.message.contains("30 ns"),
        "{c:?}"
    );

    f.system.clock.read_ns = 1800.0;
    let c = clock(&f);
    assert_eq!(c.level, Level::Info, "{c:?}");
    assert!(c.message.contains("1800 ns"), "{c:?}");

    // A 4 ms tick: the step decides, and the advice names a finer source that exists.
    f.system.clock.source = Some("jiffies".into());
    f.system.clock.step_ns = 4_000_000;
    let c = clock(&f);
    assert_eq!(c.level, Level::Warn, "{c:?}");
    assert!(c.message.contains("4.0 ms"), "{c:?}");
    assert!(
        c.advice
            .starts_with("echo tsc > /sys/devices/system/clocksource/"),
        "{c:?}"
    );
    f.system.clock.available = vec!["jiffies".into()];
    let c = clock(&f);
    assert!(c.advice.starts_with("no finer clocksource"), "{c:?}");
    // A named fine source that still steps coarsely (a broken TSC emulation) warns too.
    f.system.clock.source = Some("tsc".into());
    assert_eq!(clock(&f).level, Level::Warn);
    f.system.clock.step_ns = 40;
    f.system.clock.read_ns = 20.0;
    assert_eq!(clock(&f).level, Level::Pass);
}

#[test]
fn rule_codes_are_unique_kebab_case_with_levels() {
    let all = all();
    assert_eq!(all.len(), 34);
    for (i, (code, levels)) in all.iter().enumerate() {
        assert!(!levels.is_empty(), "{code}");
        assert!(
            code.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
            "{code}"
        );
        assert!(all[..i].iter().all(|(c, _)| c != code), "{code} twice");
    }
}

/// Facts that make many rules speak: a busy write-through loop device over a disk with
/// a write cache on a mount with every risky option, a failed test, dirty memory.
fn noisy_facts() -> Facts {
    let mut lo = dev(
        "loop0",
        DeviceKind::Loop {
            backing_file: Some("/var/img".into()),
            dio: Some(false),
        },
        HOLDS,
        &[("write_cache", "write through"), ("read_ahead_kb", "8192")],
    );
    lo.stacked = true;
    lo.lower = vec!["nvme0n1".into()];
    lo.io = Some(busy_io());
    lo.busy_procs = vec![0];
    let mut n = dev(
        "nvme0n1",
        DeviceKind::Nvme,
        "backing file of loop0",
        &[("write_cache", "write back")],
    );
    n.nvme = Some(Ok(VolatileWriteCache {
        present: true,
        enabled: Some(false),
        model: None,
    }));
    n.virtual_disk = true;
    let mut f = facts(
        vec![lo, n],
        FlushOutcome::Failed(collectors::check::flush::FlushError::Write {
            path: "/mnt/x/f".into(),
            mode: "direct",
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        }),
    );
    let m = Mount {
        mount_id: 1,
        devnum: DevNum { major: 7, minor: 0 },
        root: "/".into(),
        point: "/mnt/x".into(),
        fstype: "ext4".into(),
        source: "/dev/loop0".into(),
        mount_options: vec!["rw".into()],
        super_options: "rw,nobarrier,journal_async_commit,data=writeback,sync,dirsync"
            .split(',')
            .map(String::from)
            .collect(),
    };
    f.targets[0].durability = Some(m.durability());
    f.targets[0].mount = Some(m);
    f.system.processes = vec![crate::check::ProcFacts {
        pid: 42,
        comm: "dd".into(),
        read_bytes: 0,
        write_bytes: 400 << 20,
        on_devices: vec!["loop0".into()],
    }];
    f.system.dirty.dirty_writeback_centisecs = Some(0);
    f.system.memory = Some(DirtyMemory {
        dirty_kib: 100 << 10,
        writeback_kib: 0,
        dirtyable_kib: 1 << 20,
    });
    f.system.unreadable = 2;
    f.system.root = false;
    f
}

#[test]
fn every_finding_says_one_line_of_what_was_seen_and_one_of_what_to_do() {
    let j = judge(&noisy_facts());
    let got: Vec<&str> = j.iter().map(|p| p.finding.code).collect();
    for code in [
        "flushes-dropped",
        "nvme-vwc-disabled",
        "virtual-disk",
        "loop-device",
        "read-ahead-large",
        "device-busy",
        "barriers-off",
        "journal-async-commit",
        "data-writeback",
        "sync-mount",
        "dirsync-mount",
        "tests-failed",
        "dirty-settings",
        "writeback-disabled",
        "dirty-pending",
        "processes-unreadable",
    ] {
        assert!(got.contains(&code), "{code} missing from {got:?}");
    }
    for p in &j {
        let f = &p.finding;
        assert!(!f.message.is_empty() && !f.advice.is_empty(), "{}", f.code);
        assert!(
            !f.message.contains('\n') && !f.advice.contains('\n'),
            "{}",
            f.code
        );
        let (_, levels) = all().into_iter().find(|(c, _)| *c == f.code).unwrap();
        assert!(levels.contains(&f.level), "{}: {:?}", f.code, f.level);
    }
    let at = |code| j.iter().find(|p| p.finding.code == code).unwrap();
    assert!(at("nvme-vwc-disabled")
        .finding
        .advice
        .contains("nvme set-feature /dev/nvme0n1 -f 6 -v 1"));
    assert!(at("device-busy")
        .finding
        .message
        .contains("42 dd (0.0 MiB/s read, 400.0 MiB/s write)"));
    assert!(at("tests-failed")
        .finding
        .advice
        .contains("free at least 4 MiB"));
    assert!(at("barriers-off")
        .finding
        .message
        .contains("volatile write cache of nvme0n1"));
    assert_eq!(at("barriers-off").target, Some(0));
    assert_eq!(at("dirty-pending").target, None);
}

/// The rows of the `check` table in docs/commands/check.md (the README's until issue 24):
/// each row's codes and levels, "a / b" pairs splitting into one per code (one level for
/// all when only one is given).
fn readme_rows() -> Vec<(String, Vec<Level>)> {
    let readme = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/commands/check.md"
    ));
    let table = readme
        .split("| code | level | when |\n|---|---|---|\n")
        .nth(1)
        .expect("docs/commands/check.md has the check table");
    let mut rows = vec![];
    for line in table.lines().take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let codes: Vec<String> = cells[1]
            .split(" / ")
            .map(|c| c.trim_matches('`').to_string())
            .collect();
        let levels: Vec<Level> = cells[2]
            .split(" / ")
            .map(|l| {
                *Level::ALL
                    .iter()
                    .find(|x| x.as_str() == l)
                    .unwrap_or_else(|| panic!("docs level '{l}' in: {line}"))
            })
            .collect();
        if codes.len() == levels.len() && codes.len() > 1 {
            rows.extend(codes.into_iter().zip(levels).map(|(c, l)| (c, vec![l])));
        } else if levels.len() == 1 {
            rows.extend(codes.into_iter().map(|c| (c, levels.clone())));
        } else {
            assert_eq!(codes.len(), 1, "codes and levels do not pair up: {line}");
            rows.push((codes[0].clone(), levels));
        }
    }
    rows
}

#[test]
fn the_readme_check_table_lists_every_rule_and_only_those_with_their_levels() {
    let rows = readme_rows();
    let rules = all();
    for (code, levels) in &rules {
        let row = rows.iter().find(|(c, _)| c == code);
        let Some((_, documented)) = row else {
            panic!("rule {code} is missing from docs/commands/check.md's check table");
        };
        let mut want = levels.to_vec();
        let mut got = documented.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "levels of {code} in docs/commands/check.md");
    }
    for (code, _) in &rows {
        assert!(
            rules.iter().any(|(c, _)| c == code),
            "docs/commands/check.md's check table names {code}, which no rule gives"
        );
    }
    assert_eq!(
        rows.len(),
        rules.len(),
        "a code listed twice in docs/commands/check.md"
    );
}
