//! `down`: tears a volume down from what the state file records, touching only what is
//! still ours (see the rules at the top of the module).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde::Serialize;

use super::state::{self, Entry, Locked, LoopRecord};
use super::{cgroup, os, save, validate_name, Fs, Lab};
use format::usage;

/// What one teardown did.
#[derive(Debug, Clone, Serialize)]
pub struct Teardown {
    pub name: String,
    /// What was removed ("unmounted /var/tmp/diskpulse-lab/mnt/r1", "detached /dev/loop5", ...).
    pub removed: Vec<String>,
    /// What the state file named but that was not ours any more, so was left as it is.
    pub left_alone: Vec<String>,
}

impl Lab {
    /// Tears down the volume `name` (whoever created it). Things it names that are not
    /// ours any more are left alone and listed in the result. An error (entry kept) when
    /// something of ours could not be removed, e.g. a mount still in use.
    pub fn down(&self, name: &str) -> anyhow::Result<Teardown> {
        validate_name(name)?;
        let Some(root) = self.existing_root() else {
            return Err(usage!(
                "lab down: no lab volume named '{name}': {} does not exist",
                self.root.display()
            ));
        };
        let known: Vec<String> = state::load(&root.join("state.json"))?
            .volumes
            .into_iter()
            .map(|e| e.name)
            .collect();
        if !known.contains(&name.to_string()) {
            return Err(usage!(
                "lab down: no lab volume named '{name}' under {} (there: {})",
                root.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
        let mut t = self.teardown_matching(&root, |e| e.name == name)?;
        Ok(t.pop().unwrap_or(Teardown {
            name: name.to_string(),
            removed: vec![],
            left_alone: vec![],
        }))
    }

    /// Tears down every volume in the state file: kept ones, ones still owned by a
    /// running process, and stale ones from crashed runs. Goes on past failures and
    /// reports them all at the end.
    pub fn down_all(&self) -> anyhow::Result<Vec<Teardown>> {
        let Some(root) = self.existing_root() else {
            return Ok(vec![]);
        };
        self.teardown_matching(&root, |_| true)
    }

    /// Tears down the volumes whose creator died without tearing them down (a `kill -9`
    /// of `run` mid-study) and that were not kept with `lab up`: what the next `run`
    /// calls before it starts, so a killed study's loop devices, mounts, cgroups and
    /// images do not pile up. A mount can stay busy for a moment while the killed run's
    /// broker exits (it dies with its parent), so a busy teardown is tried again for up
    /// to 5 s.
    pub fn clean_stale(&self) -> anyhow::Result<Vec<Teardown>> {
        let Some(root) = self.existing_root() else {
            return Ok(vec![]);
        };
        let stale = |e: &Entry| !e.kept && !os::process_alive(e.owner_pid, e.owner_start_ticks);
        let t0 = std::time::Instant::now();
        loop {
            match self.teardown_matching(&root, stale) {
                Err(_) if t0.elapsed() < Duration::from_secs(5) => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                r => return r,
            }
        }
    }

    /// Tears down each entry `pick` selects, under the state lock.
    pub(super) fn teardown_matching(
        &self,
        root: &Path,
        pick: impl Fn(&Entry) -> bool,
    ) -> anyhow::Result<Vec<Teardown>> {
        let l = Locked::acquire(root)?;
        let entries: Vec<Entry> = l.load()?.volumes.into_iter().filter(|e| pick(e)).collect();
        let mut done = Vec::new();
        let mut errors = Vec::new();
        for e in entries {
            match self.teardown_entry(root, &l, e) {
                Ok(t) => done.push(t),
                Err(err) => errors.push(format!("{err:#}")),
            }
        }
        if errors.is_empty() {
            Ok(done)
        } else {
            for t in &done {
                for a in &t.left_alone {
                    eprintln!("diskpulse lab: {}: left alone: {a}", t.name);
                }
            }
            Err(anyhow!(errors.join("; ")))
        }
    }

    /// Removes one entry's cgroup, mount, loop devices and images, each only if it is
    /// still ours; saves progress after each step; drops the entry when all is gone.
    #[allow(
        clippy::too_many_lines,
        reason = "one entry's teardown in the reverse order of its making, each step next to the error it reports"
    )]
    fn teardown_entry(&self, root: &Path, l: &Locked, mut e: Entry) -> anyhow::Result<Teardown> {
        let mut t = Teardown {
            name: e.name.clone(),
            removed: vec![],
            left_alone: vec![],
        };
        let mut errors: Vec<String> = Vec::new();
        let images_dir = root.join("images");
        let image_ok = |p: &Path| -> bool {
            p.parent() == Some(images_dir.as_path())
                && p.file_name()
                    .and_then(|f| f.to_str())
                    .and_then(|f| f.strip_prefix(&format!("{}-", e.name)))
                    .and_then(|f| f.strip_suffix(".img"))
                    .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        };
        let images: Vec<PathBuf> = e.images.iter().filter(|p| image_ok(p)).cloned().collect();
        for p in e.images.iter().filter(|p| !image_ok(p)) {
            t.left_alone.push(format!(
                "image {} (not a lab image path under {})",
                p.display(),
                images_dir.display()
            ));
        }
        // Loop devices that are ours now: recorded, and backed by a recorded image.
        let ours: Vec<LoopRecord> = e
            .loop_devices
            .iter()
            .filter(|r| {
                os::loop_name(&r.device).is_some()
                    && images.contains(&r.image)
                    && os::loop_backing(&r.device).is_some_and(|b| os::backed_by(&b, &r.image))
            })
            .cloned()
            .collect();
        let our_devs: Vec<String> = ours.iter().map(|r| r.device.clone()).collect();

        // 1. cgroup (its processes move to the cgroup above it: the hierarchy's root).
        if let Some(cg) = e.cgroup.clone() {
            if !cgroup::is_volume_group(&cg, &e.name) {
                if cg.exists() {
                    t.left_alone.push(format!(
                        "cgroup {} (not diskpulse-{} in a cgroup file system)",
                        cg.display(),
                        e.name
                    ));
                }
            } else if let Some(parent) = cg.parent().filter(|_| cg.exists()) {
                match os::remove_cgroup(&cg, parent) {
                    Ok(()) => t.removed.push(format!("removed cgroup {}", cg.display())),
                    Err(err) => errors.push(format!("{err:#}")),
                }
            }
            if errors.is_empty() {
                e.cgroup = None;
                save(l, &e)?;
            }
        }

        // 2. The mount, while the top mount at our point comes from our loop device.
        if let Some(point) = e.mount.clone() {
            let expected = root.join("mnt").join(&e.name);
            if point != expected {
                t.left_alone.push(format!(
                    "mount point {} (not {})",
                    point.display(),
                    expected.display()
                ));
                e.mount = None;
            } else {
                let mut unmounted = false;
                for _ in 0..8 {
                    match os::top_mount_at(&point)? {
                        None => break,
                        Some(m) if our_devs.contains(&m.source) => {
                            match os::run_tool(&["umount", &point.to_string_lossy()], false, None) {
                                Ok(_) => {
                                    unmounted = true;
                                    t.removed.push(format!(
                                        "unmounted {} ({})",
                                        point.display(),
                                        m.source
                                    ));
                                }
                                Err(err) => {
                                    errors.push(format!("{err:#} (is a process still using it?)"));
                                    break;
                                }
                            }
                        }
                        Some(m) => {
                            t.left_alone.push(format!(
                                "the {} mount at {} from {} (not one of our loop devices)",
                                m.fstype,
                                point.display(),
                                m.source
                            ));
                            errors.push(format!(
                                "{} has a mount that is not ours on top ({}): unmount it, then run down again",
                                point.display(),
                                m.source
                            ));
                            break;
                        }
                    }
                }
                if unmounted && e.spec.fs == Fs::Btrfs {
                    // Let the btrfs module forget the members before the devices are reused.
                    for d in &our_devs {
                        let _ =
                            os::run_tool(&["btrfs", "device", "scan", "--forget", d], false, None);
                    }
                }
                if errors.is_empty() {
                    match fs::remove_dir(&point) {
                        Ok(()) => t.removed.push(format!("removed {}", point.display())),
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                        Err(err) => t.left_alone.push(format!(
                            "directory {} ({err}): left as it is",
                            point.display()
                        )),
                    }
                    e.mount = None;
                }
            }
            save(l, &e)?;
        }
        if !errors.is_empty() {
            bail!("lab down {}: {}", e.name, errors.join("; "));
        }

        // 3. Loop devices backed by our images: put write_cache back, detach.
        let mut kept_records = Vec::new();
        for r in e.loop_devices.clone() {
            if !our_devs.contains(&r.device) {
                match os::loop_backing(&r.device).filter(|_| os::loop_name(&r.device).is_some()) {
                    None => {} // not attached: nothing to do
                    Some(b) => t.left_alone.push(format!(
                        "{} (backed by {}, not our image {})",
                        r.device,
                        b.path,
                        r.image.display()
                    )),
                }
                continue;
            }
            if let Some(before) = &r.write_cache_before {
                let name = os::loop_name(&r.device).expect("checked");
                let _ = fs::write(format!("/sys/block/{name}/queue/write_cache"), before);
            }
            match os::run_tool(&["losetup", "-d", &r.device], false, None) {
                Ok(_) if os::wait_detached(&r.device, Duration::from_secs(5)) => {
                    t.removed.push(format!("detached {}", r.device));
                }
                Ok(_) => {
                    errors.push(format!(
                        "{} is still attached 5 s after `losetup -d` (held open: mounted elsewhere?)",
                        r.device
                    ));
                    kept_records.push(r);
                }
                Err(err) => {
                    errors.push(format!("{err:#}"));
                    kept_records.push(r);
                }
            }
        }
        e.loop_devices = kept_records;
        save(l, &e)?;
        if !errors.is_empty() {
            bail!("lab down {}: {}", e.name, errors.join("; "));
        }

        // 4. Images.
        for p in &images {
            match fs::remove_file(p) {
                Ok(()) => t.removed.push(format!("removed {}", p.display())),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => errors.push(format!("removing {}: {err}", p.display())),
            }
        }
        if !errors.is_empty() {
            bail!("lab down {}: {}", e.name, errors.join("; "));
        }
        let mut s = l.load()?;
        s.volumes.retain(|x| x.id != e.id);
        l.save(&s)?;
        Ok(t)
    }
}
