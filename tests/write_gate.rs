//! The one block-device write gate (`collectors::gate`): probe, check and lab refuse the
//! same real loop devices for the same reason (ext4, a partition table, swap) and take an
//! empty one. Needs root and losetup; says why and skips without them.

mod common;
use common::*;

use std::path::Path;

/// What the one write gate says about `dev` now.
fn gate_refusals(dev: &str, name: &str) -> Vec<collectors::gate::Refusal> {
    let path = Path::new(dev);
    let num = collectors::gate::rdev_of(path).expect("a block device");
    let d = collectors::gate::BlockDev { path, name, num };
    collectors::gate::refusals(&d, Path::new("/sys"), Path::new("/proc"))
}

/// Overwrites the first 128 KiB of `dev` with zeros, then `head` at offset 0.
fn write_head(dev: &str, head: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(dev).unwrap();
    f.write_all_at(&vec![0u8; 128 << 10], 0).unwrap();
    f.write_all_at(head, 0).unwrap();
    f.sync_all().unwrap();
}

/// A DOS (MBR) partition table with one Linux partition from sector 2048 on.
fn mbr_with_one_partition() -> Vec<u8> {
    let mut b = vec![0u8; 512];
    let e = &mut b[446..462];
    e[4] = 0x83;
    e[8..12].copy_from_slice(&2048u32.to_le_bytes());
    e[12..16].copy_from_slice(&4096u32.to_le_bytes());
    b[510] = 0x55;
    b[511] = 0xAA;
    b
}

#[test]
fn probe_check_and_lab_refuse_ext4_a_partition_table_and_swap_through_one_gate_and_take_an_empty_device(
) {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("64M");
    let probe = |extra: &[&str]| {
        diskpulse()
            .current_dir("/var/tmp")
            .args(["probe", "--filename", &lo.dev, "--rw", "randwrite"])
            .args(["--runtime", "300ms", "--time-based", "--allow-destructive"])
            .args(extra)
            .output()
            .unwrap()
    };
    let check_dev = || {
        let o = diskpulse()
            .args([
                "check",
                "--json",
                "--sample",
                "100ms",
                "--test-time",
                "200ms",
            ])
            .args(["--allow-destructive", &lo.dev])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stderr)))
    };

    // Empty: the gate finds nothing, probe writes, check measures, lab would format it.
    write_head(&lo.dev, &[]);
    assert_eq!(gate_refusals(&lo.dev, lo.name()), vec![]);
    assert_eq!(diskpulse::lab::os::write_refusals(&lo.dev).unwrap(), vec![]);
    let o = probe(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = check_dev();
    assert_eq!(
        v["targets"][0]["flush_tests"]["status"], "measured",
        "{v:#}"
    );

    type Prepare = Box<dyn Fn(&str)>;
    let cases: [(&str, Prepare); 3] = [
        (
            "ext2/3/4",
            Box::new(|d: &str| {
                sh("mkfs.ext4", &["-q", "-F", d]);
            }),
        ),
        (
            "MBR partition table",
            Box::new(|d: &str| write_head(d, &mbr_with_one_partition())),
        ),
        (
            "swap",
            Box::new(|d: &str| {
                sh("mkswap", &[d]);
            }),
        ),
    ];
    for (what, prepare) in cases {
        write_head(&lo.dev, &[]);
        prepare(&lo.dev);
        let r = gate_refusals(&lo.dev, lo.name());
        let holds = r.first().and_then(|r| r.holds()).unwrap_or_default();
        assert!(holds.contains(what), "{what}: the gate says {r:?}");
        let first = r[0].to_string();
        // lab asks the same gate before mkfs.
        assert_eq!(
            diskpulse::lab::os::write_refusals(&lo.dev).unwrap(),
            r,
            "{what}: lab"
        );

        let o = probe(&[]);
        assert_eq!(o.status.code(), Some(2), "{what}: probe wrote");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&first), "{what}: probe said {err}");

        let v = check_dev();
        assert_eq!(
            v["targets"][0]["flush_tests"]["status"], "skipped",
            "{what}: check wrote: {v:#}"
        );
        let msg = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "tests-skipped")
            .and_then(|f| f["message"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(msg.contains(&holds), "{what}: check said {msg}");
        // Neither of them wrote: the signature is still there.
        assert_eq!(gate_refusals(&lo.dev, lo.name())[0], r[0], "{what}");
    }
}
