//! Teardown when things went wrong: SIGINT and SIGKILL in the middle of `lab up`, a dead
//! creator's stale entry, and a loop device and a mount that are not ours left alone.

use super::*;

#[test]
fn sigint_in_the_middle_of_lab_up_leaves_nothing_behind() {
    if !can_use_loop_devices() || !have("mkfs.btrfs", "btrfs-progs") {
        return;
    }
    // `--write-iops`: a cgroup in whichever hierarchy (v1 blkio or v2 io) has the controller.
    let _lock = cgroup::lock();
    if cgroup::hierarchy().is_none() {
        return;
    }
    let t = TestLab::new();
    let name = unique("int");
    let mut interrupted = 0;
    let mut rolled_back_devices = 0;
    let mut completed = 0;
    // A btrfs RAID 10 over four 1 GiB devices takes ~0.5-1 s to build here: signals at
    // these delays land while images, loop devices, mkfs or mount are under way.
    for delay_ms in [5u64, 30, 80, 150, 250, 320, 400, 480, 600, 900] {
        let child = diskpulse()
            .args([
                "lab", "up", &name, "--fs", "btrfs", "--raid", "10", "--size", "1G",
            ])
            .args(["--write-iops", "5000", "--root", t.root_s()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(130) => {
                interrupted += 1;
                assert!(err.contains("interrupted"), "{err}");
                if err.contains("detached /dev/loop") {
                    rolled_back_devices += 1;
                }
            }
            Some(0) => {
                completed += 1;
                assert_eq!(t.cli(&["down", &name]).status.code(), Some(0));
            }
            // The signal beat the handler (nothing can have been created yet).
            None if out.status.signal() == Some(libc::SIGINT) => {}
            other => panic!("after SIGINT at {delay_ms} ms: exit {other:?}: {err}"),
        }
        eprintln!(
            "SIGINT at {delay_ms} ms: exit {:?}: {}",
            out.status.code(),
            err.trim()
        );
        t.assert_clean(&[&name]);
    }
    assert!(
        interrupted >= 2,
        "only {interrupted} runs were interrupted ({completed} completed)"
    );
    assert!(
        rolled_back_devices >= 1,
        "no SIGINT landed after a loop device was attached"
    );
}

#[test]
fn sigkill_in_the_middle_of_lab_up_leaves_a_stale_entry_that_down_all_cleans() {
    if !can_use_loop_devices() || !have("mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let t = TestLab::new();
    let name = unique("kill");
    let mut stale_seen = 0;
    for delay_ms in [20u64, 100, 250, 500] {
        let mut child = diskpulse()
            .args([
                "lab", "up", &name, "--fs", "btrfs", "--raid", "1", "--size", "1G",
            ])
            .args(["--root", t.root_s()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL: no handler runs, no rollback
        let st = child.wait().unwrap();
        // Its tools get SIGKILL too (PR_SET_PDEATHSIG); give a mount(2) in flight time
        // to return, as it would have long before anyone runs `down` by hand.
        std::thread::sleep(Duration::from_millis(300));
        let vols = t.lab().list().unwrap();
        if let Some(v) = vols.first() {
            if st.code() != Some(0) {
                assert_eq!(v.state, VolumeState::Stale, "{v:?}");
                let o = t.cli(&["list"]);
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(text.contains("stale"), "{text}");
                stale_seen += 1;
            }
        }
        let o = t.cli(&["down", "--all"]);
        assert_eq!(o.status.code(), Some(0));
        t.assert_clean(&[&name]);
    }
    assert!(stale_seen >= 1, "no kill landed mid-way");
}

#[test]
fn a_dead_creator_makes_an_entry_stale_and_down_all_cleans_it() {
    if !can_use_loop_devices() {
        return;
    }
    let t = TestLab::new();
    let name = unique("dead");
    // A volume made through the library whose creator "died": forget the handle without
    // its Drop and hand the entry to a pid that has exited.
    let vol = t
        .lab()
        .up(&VolumeSpec::new(&name, 64 << 20, Fs::Ext4))
        .unwrap();
    let mount = vol.mount.clone();
    let mut ok = t.lab().list().unwrap();
    assert_eq!(ok[0].state, VolumeState::Ok, "its creator (us) is alive");
    std::mem::forget(vol);
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let p = t.root.join("state.json");
    let mut s = read_json(&p);
    s["volumes"][0]["owner_pid"] = dead_pid.into();
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();

    ok = t.lab().list().unwrap();
    assert_eq!(ok[0].state, VolumeState::Stale);
    assert!(
        ok[0]
            .problem
            .as_deref()
            .unwrap()
            .contains(&dead_pid.to_string()),
        "{:?}",
        ok[0].problem
    );
    let o = t.cli(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["volumes"][0]["state"], "stale");
    assert!(mounted_at(&mount).is_some(), "list changes nothing");

    assert_eq!(t.cli(&["down", "--all"]).status.code(), Some(0));
    t.assert_clean(&[]);
    // And with nothing left, --all is a no-op that succeeds.
    assert_eq!(t.cli(&["down", "--all"]).status.code(), Some(0));
}

#[test]
fn down_leaves_a_loop_device_and_a_mount_that_are_not_ours_alone() {
    if !can_use_loop_devices() {
        return;
    }
    let t = TestLab::new();
    std::fs::create_dir_all(t.root.join("images")).unwrap();
    std::fs::create_dir_all(t.root.join("mnt/fake")).unwrap();
    // A loop device made by hand, over an image outside the lab, with ext4 mounted at
    // the very place the lab would mount "fake".
    let mut foreign = LoopDev::new("64M");
    sh("mkfs.ext4", &["-q", "-F", &foreign.dev]);
    let point = t.root.join("mnt/fake");
    sh("mount", &[&foreign.dev, point.to_str().unwrap()]);
    foreign.mount = Some(point.clone());
    std::fs::write(point.join("precious"), b"not yours").unwrap();

    // A state entry that claims it, twice over: once with an image path of the lab,
    // once with the foreign image itself (outside ROOT/images).
    let lab_img = t.root.join("images/fake-0.img");
    let entry = |name: &str, img: &Path| {
        serde_json::json!({
            "name": name, "id": format!("{name}-1-1"),
            "spec": {"name": name, "size_bytes": 64u64 << 20, "fs": "ext4", "raid": "single",
                     "devices": 1, "mount_options": null, "throttle": null, "write_cache": null},
            "owner_pid": 1, "owner_start_ticks": 0, "kept": true, "complete": true,
            "created": "2025-01-01T00:00:00Z",
            "images": [img],
            "loop_devices": [{"device": foreign.dev, "image": img, "write_cache_before": "write through"}],
            "mount": t.root.join(format!("mnt/{name}")),
            "cgroup": null
        })
    };
    let state = serde_json::json!({
        "format_version": 1,
        "volumes": [entry("fake", &lab_img), entry("fake2", &foreign.image)]
    });
    std::fs::write(t.root.join("state.json"), state.to_string()).unwrap();
    let wc = format!("/sys/block/{}/queue/write_cache", foreign.name());
    let wc_before = std::fs::read_to_string(&wc).unwrap();

    let vols = t.lab().list().unwrap();
    assert!(
        vols.iter().all(|v| v.state == VolumeState::Stale),
        "{vols:?}"
    );

    // The mount at our mount point is not from our loop device: refused, exit 1.
    let o = t.cli(&["down", "fake"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not ours"));
    assert_eq!(
        mounted_at(&point).map(|m| m.0),
        Some(foreign.dev.clone()),
        "the foreign mount survives"
    );
    assert_eq!(std::fs::read(point.join("precious")).unwrap(), b"not yours");

    // Without the mount in the way: the entry goes, the device stays attached.
    sh("umount", &[point.to_str().unwrap()]);
    foreign.mount = None;
    let o = t.cli(&["down", "--all"]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("left alone"), "{err}");
    let backing =
        std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", foreign.name()))
            .expect("the foreign loop device is still attached");
    assert_eq!(backing.trim(), foreign.image.to_str().unwrap());
    assert!(
        foreign.image.exists(),
        "the foreign image is not ours to remove"
    );
    assert_eq!(
        std::fs::read_to_string(&wc).unwrap(),
        wc_before,
        "its write_cache untouched"
    );
    assert_eq!(t.state()["volumes"].as_array().unwrap().len(), 0);
}
