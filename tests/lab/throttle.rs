//! A blkio throttle on a lab volume really caps the O_DIRECT writes of processes in its
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
    if !can_use_loop_devices() || !can_throttle() {
        return;
    }
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
    assert_eq!(cg, Path::new(Lab::BLKIO).join(format!("diskpulse-{name}")));
    let (maj, min) = {
        let d =
            std::fs::read_to_string(format!("/sys/block/{}/dev", vol.device_names()[0])).unwrap();
        let (a, b) = d.trim().split_once(':').unwrap();
        (a.to_string(), b.to_string())
    };
    let rules = std::fs::read_to_string(cg.join("blkio.throttle.write_iops_device")).unwrap();
    assert_eq!(rules.trim(), format!("{maj}:{min} 200"));

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
    let served = std::fs::read_to_string(cg.join("blkio.throttle.io_serviced")).unwrap();
    let writes: u64 = served
        .lines()
        .find(|l| l.starts_with(&format!("{maj}:{min} Write")))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(writes >= 400, "io_serviced: {served}");

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
