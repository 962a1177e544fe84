//! A throttle (v1 blkio or v2 io.max, whichever the host has) on a lab volume really caps the O_DIRECT writes of processes in its
//! cgroup.

use super::*;

/// Runs `dd` writing `count` 4 KiB O_DIRECT blocks over an existing file; returns IOPS.
fn dd_iops(file: &Path, count: u32, vol: Option<&diskpulse::lab::Volume>) -> f64 {
    let mut cmd = Command::new("dd");
    cmd.args([
        "if=/dev/zero",
        &format!("of={}", file.display()),
        "bs=4k",
        &format!("count={count}"),
        "oflag=direct",
        "conv=notrunc",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(v) = vol {
        v.throttle_command(&mut cmd).unwrap();
    }
    let t0 = Instant::now();
    let st = cmd.status().unwrap();
    assert!(st.success());
    count as f64 / t0.elapsed().as_secs_f64()
}

#[test]
fn a_write_iops_throttle_caps_o_direct_writes_of_processes_in_the_cgroup() {
    if !can_use_loop_devices() {
        return;
    }
    let _lock = cgroup::lock();
    let Some(h) = cgroup::hierarchy() else {
        return;
    };
    // Images on tmpfs: the unthrottled rate is then the loop stack's own (tens of
    // thousands of IOPS), not that of a virtual disk shared with other builds, so
    // "far below unthrottled" holds however busy the machine is.
    let t = TestLab::new_in("/dev/shm");
    let name = unique("thr");
    let spec = VolumeSpec {
        throttle: Some(Throttle {
            write_iops: Some(200),
            ..Default::default()
        }),
        ..VolumeSpec::new(&name, 256 << 20, Fs::Ext4)
    };
    let vol = t.lab().up(&spec).unwrap();
    let cg = vol.cgroup.clone().expect("a throttled volume has a cgroup");
    assert_eq!(cg, h.group(&name));
    let majmin = cgroup::majmin(&vol.device_names()[0]);
    match h.version {
        cgroup::Version::V1 => {
            let rules =
                std::fs::read_to_string(cg.join("blkio.throttle.write_iops_device")).unwrap();
            assert_eq!(rules.trim(), format!("{majmin} 200"));
        }
        cgroup::Version::V2 => {
            let max = std::fs::read_to_string(cg.join("io.max")).unwrap();
            assert!(
                max.lines()
                    .any(|l| l.starts_with(&format!("{majmin} ")) && l.contains("wiops=200")),
                "io.max: {max}"
            );
        }
    }

    // Allocate the file first (outside the cgroup), so both runs overwrite in place.
    let f = vol.mount.join("f");
    write_direct(&f, 4 << 20, 1 << 20);
    let free = dd_iops(&f, 1000, None);
    let capped = dd_iops(&f, 400, Some(&vol));
    eprintln!("4 KiB O_DIRECT writes: {free:.0} IOPS unthrottled, {capped:.0} IOPS in the cgroup (cap 200)");
    assert!(
        (120.0..=260.0).contains(&capped),
        "throttled to 200 but measured {capped:.0} IOPS"
    );
    assert!(
        free > 3.0 * capped,
        "unthrottled {free:.0} IOPS should be far above throttled {capped:.0}"
    );
    // The kernel charged those writes to the cgroup, on our device.
    let writes = cgroup::writes_charged(&cg, h.version, &majmin);
    assert!(writes >= 400, "{writes} writes charged to {}", cg.display());

    // add_pid moves a running process in; down moves it out and removes the cgroup.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    vol.add_pid(sleeper.id()).unwrap();
    let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|l| l == sleeper.id().to_string()),
        "{procs}"
    );
    vol.down().unwrap();
    assert!(!cg.exists());
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
    t.assert_clean(&[&name]);
}
