//! The right device first, rates a disk can do, and the UI average drawn (issue 23 items
//! 5, 6, 8), on real devices: a loop device (`inner`, direct I/O) over a file on an ext4
//! volume that is itself a loop device over /dev/shm (`outer`), so `record --device
//! inner` also records `outer` as its backing disk. 32 writers each write 128 KiB with
//! O_DIRECT every 200 ms (20 MiB/s, a write every ~6 ms); `outer`'s file system is frozen
//! for 400 ms, so inner's requests wait in flight (its completions stop) and, at the thaw,
//! the 32 that waited complete within a millisecond or two: 4 MiB in one 1 ms window that
//! the device moved over 400 ms. Checked: that 1 ms figure is called completion bunching
//! and never headlined; inner comes before its backing disk everywhere and the backing
//! disk is labelled; `report --device` keeps one device and refuses an unknown one;
//! the PNG/SVG and report.html draw the 30 s average on a log axis at a visible height.
//!
//! Needs root, losetup, mkfs.ext4 and fsfreeze.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A loop device over a file in /dev/shm, formatted ext4 and mounted: memory, so the only
/// stall is the one the test makes. Dropping it unmounts, detaches and removes the file.
struct ShmVolume {
    image: PathBuf,
    dev: String,
    mount: PathBuf,
}

impl ShmVolume {
    fn new(size: &str) -> ShmVolume {
        let image = PathBuf::from(format!(
            "/dev/shm/diskpulse-test-{}-{}.img",
            std::process::id(),
            unique_suffix()
        ));
        sh("truncate", &["-s", size, image.to_str().unwrap()]);
        let dev = sh("losetup", &["-f", "--show", image.to_str().unwrap()]);
        let mount = PathBuf::from(format!("{}.mnt", image.display()));
        let v = ShmVolume { image, dev, mount };
        sh(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &v.dev,
            ],
        );
        std::fs::create_dir_all(&v.mount).unwrap();
        sh("mount", &[&v.dev, v.mount.to_str().unwrap()]);
        v
    }
}

impl Drop for ShmVolume {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze")
            .args(["--unfreeze"])
            .arg(&self.mount)
            .status();
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = std::fs::remove_dir(&self.mount);
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A direct-I/O loop device over `file`; detached on drop (before its volume is).
struct InnerLoop {
    dev: String,
}

impl InnerLoop {
    fn new(file: &Path) -> InnerLoop {
        sh("truncate", &["-s", "64M", file.to_str().unwrap()]);
        let dev = sh(
            "losetup",
            &["-f", "--show", "--direct-io=on", file.to_str().unwrap()],
        );
        InnerLoop { dev }
    }
    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for InnerLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// `n` threads, each writing 128 KiB with O_DIRECT to `dev` on its own 200 ms schedule
/// (staggered), skipping the slots a stall made it miss (no catch-up burst), for `secs`.
fn writers(dev: &str, n: usize, secs: f64) -> Vec<std::thread::JoinHandle<()>> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    const BS: usize = 128 * 1024;
    (0..n)
        .map(|i| {
            let dev = dev.to_string();
            std::thread::spawn(move || {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(&dev)
                    .unwrap();
                let layout = std::alloc::Layout::from_size_align(BS, 4096).unwrap();
                // SAFETY: non-zero size; freed below.
                let buf = unsafe { std::alloc::alloc_zeroed(layout) };
                let slot = Duration::from_millis(200);
                std::thread::sleep(slot * i as u32 / n as u32);
                let t0 = Instant::now();
                let mut k = 0usize;
                while t0.elapsed().as_secs_f64() < secs {
                    let off = ((i * 13 + k) % 256) * BS;
                    // SAFETY: buf holds BS bytes, 4096-aligned as O_DIRECT needs.
                    let w = unsafe {
                        libc::pwrite(
                            f.as_raw_fd(),
                            buf as *const libc::c_void,
                            BS,
                            off as libc::off_t,
                        )
                    };
                    assert_eq!(w, BS as isize, "O_DIRECT write to {dev}");
                    k += 1;
                    let next = (t0.elapsed().as_secs_f64() / 0.2).floor() as u32 + 1;
                    let at = t0 + slot * next;
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                }
                // SAFETY: allocated above with this layout.
                unsafe { std::alloc::dealloc(buf, layout) };
            })
        })
        .collect()
}

/// The JSON the zoomable timeline embeds in report.html.
fn zoom_data(html: &str) -> serde_json::Value {
    let start = "<script type=\"application/json\" id=\"dp-zoom-data\">";
    let a = html
        .find(start)
        .unwrap_or_else(|| panic!("report.html has no zoom data (uPlot missing?)"))
        + start.len();
    let b = a + html[a..].find("</script>").unwrap();
    serde_json::from_str(&html[a..b]).unwrap()
}

#[test]
fn a_backlog_completing_at_once_is_bunching_and_the_named_volume_leads_its_backing_disk() {
    if !can_use_loop_devices()
        || !have_tool("fsfreeze", "util-linux")
        || !have_tool("mkfs.ext4", "e2fsprogs")
    {
        return;
    }
    if let Err(why) = diskpulse::report::html::zoom::find_uplot() {
        skip(&why);
        return;
    }
    let outer = ShmVolume::new("256M");
    let inner = InnerLoop::new(&outer.mount.join("inner.img"));
    let (iname, oname) = (
        inner.name().to_string(),
        outer.dev.trim_start_matches("/dev/").to_string(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let mut rec = diskpulse()
        .args(["record", "--no-progress", "--device", &iname, "--out"])
        .arg(&run)
        .args(["--", "sleep", "4.5"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let w = writers(&inner.dev, 32, 3.8);
    std::thread::sleep(Duration::from_millis(1700));
    sh("fsfreeze", &["--freeze", outer.mount.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(400));
    sh("fsfreeze", &["--unfreeze", outer.mount.to_str().unwrap()]);
    for t in w {
        t.join().unwrap();
    }
    assert!(rec.wait().unwrap().success(), "record failed");
    let report = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let table = String::from_utf8_lossy(&report.stdout).to_string();

    // Item 5: the device asked about first, its backing disk after, labelled.
    let s = read_json(&run.join("summary.json"));
    let names: Vec<&str> = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[..2], [iname.as_str(), oname.as_str()], "{names:?}");
    assert_eq!(
        device(&s, &oname)["why"],
        format!("backing file of {iname}").as_str()
    );
    let heads: Vec<&str> = s["headline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert!(heads[0].starts_with(&format!("{iname}: ")), "{heads:#?}");
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with(&format!("{oname} (backing disk of {iname}): "))),
        "{heads:#?}"
    );

    // Item 6: the thaw's 1 ms figure is completion bunching, labelled and never quoted.
    let w = &device(&s, &iname)["write"];
    let bunched: Vec<&str> = w["bunched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(bunched.contains(&"1ms"), "{w:#}");
    let raw_1ms = w["peak_mib_s"]["1ms"].as_f64().unwrap();
    let service_1ms = w["service_peak_mib_s"]["1ms"].as_f64().unwrap();
    assert!(raw_1ms > 2.0 * service_1ms, "{w:#}");
    // 32 x 128 KiB that waited 400 ms land in one 1 ms window: over 1 GiB/s. The writers'
    // own rate is 20 MiB/s; counted over their service time nothing nears the raw figure.
    assert!(raw_1ms > 1024.0, "{w:#}");
    let rate = diskpulse::units::rate_mib_s;
    assert!(!heads[0].contains(&rate(raw_1ms)), "{}", heads[0]);
    assert!(heads[0].contains("its 1 ms "), "{}", heads[0]);
    assert!(heads[0].contains("completion bunching"), "{}", heads[0]);
    if bunched.contains(&"10ms") {
        let raw_10 = w["peak_mib_s"]["10ms"].as_f64().unwrap();
        assert!(!heads[0].contains(&rate(raw_10)), "{}", heads[0]);
        assert!(w["headline_peak_10ms_mib_s"].as_f64().unwrap() < raw_10 / 2.0);
    }
    // The table marks it.
    assert!(table.contains(&format!("{}*", rate(raw_1ms))), "{table}");
    assert!(
        table.contains(&format!("* {iname} write: the 1ms")),
        "{table}"
    );

    // Item 8: the UI average on a log axis, a visible height above the floor; in the SVG
    // and in report.html's zoomable chart. Inner's throughput axis stops at what it moved.
    let ui_title = format!("{iname} write: the 30 s UI average against 10 ms windows (log axis)");
    let svg = std::fs::read_to_string(run.join("timeline.svg")).unwrap();
    assert!(svg.contains(&ui_title), "no UI view panel in the SVG");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let z = zoom_data(&html);
    let view = z["ui_views"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["device"] == iname.as_str())
        .unwrap_or_else(|| panic!("no UI view of {iname}: {}", z["ui_views"]));
    let floor = view["floor"].as_f64().unwrap();
    let series = view["series"].as_array().unwrap();
    let ui = series
        .iter()
        .find(|x| x["label"].as_str().unwrap().contains("UI average"))
        .unwrap();
    let ui_max = ui["v"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_f64())
        .fold(0.0, f64::max);
    let top = series
        .iter()
        .flat_map(|x| x["v"].as_array().unwrap().iter().filter_map(|v| v.as_f64()))
        .fold(floor * 10.0, f64::max);
    // The page's axis: from the floor to the decade at or above the top.
    let top = 10f64.powf(top.log10().ceil());
    let height = (ui_max / floor).log10() / (top / floor).log10();
    assert!(
        height >= 0.15,
        "the UI average ({ui_max} MiB/s) sits {height:.2} of the way up {floor}..{top}"
    );
    let cap = z["axes"][&iname]["cap"]
        .as_f64()
        .expect("inner's axis is capped");
    assert!(cap < raw_1ms / 2.0, "cap {cap} vs raw {raw_1ms}");
    let devices_table = html.find("<h3>Devices</h3>").unwrap();
    let at = |n: &str| html[devices_table..].find(&format!(">{n}<")).unwrap();
    assert!(
        at(&iname) < at(&oname),
        "inner after its backing disk in Devices"
    );

    // report --device keeps one device; an unknown one is refused, nothing rewritten.
    let out = diskpulse()
        .arg("report")
        .arg(&run)
        .args(["--device", &iname])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s1 = read_json(&run.join("summary.json"));
    let kept: Vec<&str> = s1["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(kept, [iname.as_str()]);
    assert!(
        s1["headline"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h.as_str().unwrap().starts_with(&format!("{iname}: "))),
        "{:#}",
        s1["headline"]
    );
    let html1 = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(!html1.contains(&format!("{oname} throughput MiB/s")));
    let before = std::fs::read(run.join("summary.json")).unwrap();
    let out = diskpulse()
        .arg("report")
        .arg(&run)
        .args(["--device", "nosuch9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'nosuch9'") && err.contains(&iname) && err.contains(&oname),
        "{err}"
    );
    assert_eq!(std::fs::read(run.join("summary.json")).unwrap(), before);
    drop(inner);
}
