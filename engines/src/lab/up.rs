//! `up`: images, loop devices, write cache, mkfs, mount and cgroup, each recorded in the
//! state file before it is created, and rolled back on any error or stop.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use super::cgroup::Hierarchy;
use super::state::{Entry, Locked, LoopRecord};
use super::{fmt_bytes, now_ns, os, require_root, Fs, Lab, Volume, VolumeSpec};
use format::usage;

/// `up` stopped because the stop flag was set; everything it had created was removed
/// (`removed` says what that was, in [`Teardown::removed`]'s words).
#[derive(Debug, Clone, Default)]
pub struct Interrupted {
    pub removed: Vec<String>,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Checks a lab root before anything is made under it, the one check of `lab up --root`
/// and `run --lab-root` (issue 25 point 8: `run --lab-root /proc/x` passed `--dry-run`,
/// then the run failed): it is a directory, or can become one, on a writable file system
/// that holds files (not /proc, /sys, /dev, a cgroup or another kernel pseudo file
/// system). Returns its nearest existing ancestor (where it would be made), or why not,
/// worded to follow the flag and the path ("is not a directory; ..."). Makes nothing.
pub fn check_root(root: &Path) -> Result<PathBuf, String> {
    let fix = format!("name a directory on a disk, like {}", Lab::DEFAULT_ROOT);
    if root.exists() && !root.is_dir() {
        return Err(format!("is not a directory; {fix}"));
    }
    // The root may not exist yet: its nearest existing ancestor is where it would be made.
    // A relative root's last ancestor is "": the current directory.
    let Some(base) = root
        .ancestors()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .find(|p| p.exists())
    else {
        return Err("has no existing parent".into());
    };
    if !base.is_dir() {
        return Err(format!(
            "is under {}, which is not a directory; {fix}",
            base.display()
        ));
    }
    // /sys/fs/cgroup is a tmpfs on cgroup v1 hosts, and /dev a devtmpfs: the kernel's
    // trees are refused by path as well as by file system.
    let real = fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    let kernel_tree = ["/proc", "/sys", "/dev"]
        .iter()
        .any(|t| real.starts_with(t))
        && !real.starts_with("/dev/shm");
    if kernel_tree {
        return Err(format!(
            "is in the kernel's tree {}, not a place for images; {fix}",
            real.display()
        ));
    }
    if let Some(fs) = os::pseudo_fs(base) {
        return Err(format!(
            "is on {fs}, a kernel file system that holds no files; {fix}"
        ));
    }
    if os::read_only(base) {
        return Err(format!(
            "is on a read-only file system; name a writable directory on a disk, like {}",
            Lab::DEFAULT_ROOT
        ));
    }
    Ok(base.to_path_buf())
}

impl Lab {
    /// Checks the lab root before anything is created under it (usage errors: exit 2,
    /// nothing written): [`check_root`], and room for every image. Images are sparse, but a full disk would fail the
    /// volume's writes in the middle of a benchmark.
    fn check_root(&self, spec: &VolumeSpec) -> anyhow::Result<()> {
        let n = &spec.name;
        let root = &self.root;
        let base =
            check_root(root).map_err(|e| usage!("lab up {n}: --root {} {e}", root.display()))?;
        let base = base.as_path();
        let need = spec.size.saturating_mul(spec.devices as u64);
        if let Some(free) = os::free_bytes(base) {
            if need > free {
                return Err(usage!(
                    "lab up {n}: {} image(s) of {} need {} on the file system of {}; it has {} free (images are sparse, but a full disk would fail the volume's writes): use a smaller --size or a --root with more room",
                    spec.devices,
                    fmt_bytes(spec.size),
                    fmt_bytes(need),
                    base.display(),
                    fmt_bytes(free)
                ));
            }
        }
        Ok(())
    }

    /// Creates the volume: images, loop devices, write cache, mkfs, mount, cgroup. On any
    /// error (or [`Interrupted`]) what was created so far is removed before returning.
    pub fn up(&self, spec: &VolumeSpec) -> anyhow::Result<Volume> {
        spec.validate()?;
        self.check_root(spec)?;
        require_root()?;
        // The hierarchy is found before anything is created: without one, nothing is written.
        let cgroup = match spec.throttle {
            None => None,
            Some(_) => {
                let h = Hierarchy::find().map_err(|e| {
                    if e.downcast_ref::<format::cli::UsageError>().is_some() {
                        usage!("lab up {}: {e:#}", spec.name)
                    } else {
                        e
                    }
                })?;
                let cg = h.group(&spec.name);
                Some((h, cg))
            }
        };
        for d in ["images", "mnt"] {
            let p = self.root.join(d);
            fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        }
        let root = fs::canonicalize(&self.root)?;
        let me = std::process::id();
        let id = format!("{}-{me}-{}", spec.name, now_ns());
        {
            let l = Locked::acquire(&root)?;
            let mut s = l.load()?;
            if s.volumes.iter().any(|e| e.name == spec.name) {
                return Err(usage!(
                    "lab up {0}: a volume named '{0}' is in {1}/state.json already (`diskpulse lab list --root {1}`; `diskpulse lab down {0}` removes it)",
                    spec.name,
                    root.display()
                ));
            }
            if let Some((_, cg)) = cgroup.as_ref().filter(|(_, cg)| cg.exists()) {
                bail!(
                    "lab up {}: cgroup {} exists already (a volume of the same name under another lab root?): use another name, or rmdir it if it is a leftover",
                    spec.name,
                    cg.display()
                );
            }
            s.volumes.push(Entry {
                name: spec.name.clone(),
                id: id.clone(),
                spec: spec.clone(),
                owner_pid: me,
                owner_start_ticks: os::process_start_ticks(me).unwrap_or(0),
                kept: false,
                complete: false,
                created: chrono::Utc::now().to_rfc3339(),
                images: vec![],
                loop_devices: vec![],
                mount: None,
                cgroup: None,
            });
            l.save(&s)?;
        }
        // From here on the Volume is armed: a panic tears down through Drop.
        let mut vol = Volume {
            name: spec.name.clone(),
            mount: root.join("mnt").join(&spec.name),
            loop_devices: vec![],
            cgroup: None,
            spec: spec.clone(),
            lab: Lab {
                stop: None,
                ..self.clone()
            },
            root: root.clone(),
            id,
            armed: true,
        };
        match self.build(&mut vol, cgroup) {
            Ok(()) => Ok(vol),
            Err(e) => {
                vol.armed = false;
                match self.teardown_matching(&root, |x| x.id == vol.id) {
                    Ok(t) if e.downcast_ref::<Interrupted>().is_some() => {
                        Err(anyhow!(Interrupted {
                            removed: t.into_iter().flat_map(|t| t.removed).collect(),
                        }))
                    }
                    Ok(_) => Err(e),
                    Err(te) => Err(anyhow!(
                        "{e:#}; rolling back also failed: {te:#} (run `diskpulse lab down {}`)",
                        vol.name
                    )),
                }
            }
        }
    }

    /// Records a change to the entry `id` under the lock.
    fn record(&self, root: &Path, id: &str, f: impl FnOnce(&mut Entry)) -> anyhow::Result<()> {
        Locked::acquire(root)?.update(id, f)
    }

    fn build(&self, vol: &mut Volume, cgroup: Option<(Hierarchy, PathBuf)>) -> anyhow::Result<()> {
        let root = vol.root.clone();
        let id = vol.id.clone();
        let spec = vol.spec.clone();
        let stop = self.stop.as_ref();

        // 1. Images: sparse files we create (O_EXCL: never one that was there before).
        let mut images = Vec::new();
        for i in 0..spec.devices {
            self.check_stop()?;
            let img = root.join("images").join(format!("{}-{i}.img", spec.name));
            self.record(&root, &id, |e| e.images.push(img.clone()))?;
            let f = match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&img)
            {
                Ok(f) => f,
                Err(err) => {
                    // Not created by this run: forget it, so the rollback leaves it be.
                    self.record(&root, &id, |e| e.images.retain(|p| *p != img))?;
                    let hint = if err.kind() == std::io::ErrorKind::AlreadyExists {
                        " (a leftover of an earlier run? nothing in state.json names it: remove it by hand)"
                    } else {
                        ""
                    };
                    return Err(anyhow!(err).context(format!("creating {}{hint}", img.display())));
                }
            };
            f.set_len(spec.size)
                .with_context(|| format!("sizing {}", img.display()))?;
            images.push(img);
        }

        // 2. Loop devices: pick a free one, record it, attach it by name.
        for img in &images {
            self.check_stop()?;
            let dev = self.attach(&root, &id, img)?;
            vol.loop_devices.push(dev.clone());
            if let Some(wc) = spec.write_cache {
                let name = os::loop_name(&dev).expect("checked in attach");
                let p = format!("/sys/block/{name}/queue/write_cache");
                let before = fs::read_to_string(&p)
                    .with_context(|| format!("reading {p}"))?
                    .trim()
                    .to_string();
                let d = dev.clone();
                self.record(&root, &id, |e| {
                    if let Some(r) = e.loop_devices.iter_mut().find(|r| r.device == d) {
                        r.write_cache_before = Some(before.clone());
                    }
                })?;
                fs::write(&p, wc.sysfs()).with_context(|| format!("writing {p}"))?;
                let now = fs::read_to_string(&p).unwrap_or_default();
                if now.trim() != wc.sysfs() {
                    bail!("{p} reads '{}' after writing '{}'", now.trim(), wc.sysfs());
                }
            }
        }

        // 3. mkfs, on devices checked again to be ours. No force flag: if anything were
        //    on them, mkfs would refuse.
        for (dev, img) in vol.loop_devices.iter().zip(&images) {
            match os::loop_backing(dev) {
                Some(b) if os::backed_by(&b, img) => {}
                _ => bail!(
                    "{dev} is no longer backed by {}: not formatting it",
                    img.display()
                ),
            }
            if let Some(r) = os::write_refusals(dev)?.first() {
                bail!("{r}: not formatting it");
            }
        }
        self.check_stop()?;
        let devs: Vec<&str> = vol.loop_devices.iter().map(|s| s.as_str()).collect();
        let mut argv: Vec<&str> = match spec.fs {
            Fs::Ext4 => vec![
                "mkfs.ext4",
                "-q",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
            ],
            Fs::Xfs => vec!["mkfs.xfs", "-q", "-K"],
            Fs::Btrfs => vec![
                "mkfs.btrfs",
                "-q",
                "-K",
                "-d",
                spec.raid.name(),
                "-m",
                spec.raid.name(),
            ],
        };
        argv.extend(&devs);
        os::run_tool(&argv, true, stop)?;

        // 4. Mount at ROOT/mnt/<name>.
        self.check_stop()?;
        let point = vol.mount.clone();
        self.record(&root, &id, |e| e.mount = Some(point.clone()))?;
        if let Some(m) = os::top_mount_at(&point)? {
            bail!(
                "{} is already a mount point ({} from {}): not mounting over it",
                point.display(),
                m.fstype,
                m.source
            );
        }
        match fs::create_dir(&point) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if fs::read_dir(&point)?.next().is_some() {
                    bail!(
                        "{} exists and is not empty: not mounting over it",
                        point.display()
                    );
                }
            }
            Err(e) => return Err(anyhow!(e).context(format!("creating {}", point.display()))),
        }
        let point_s = point
            .to_str()
            .ok_or_else(|| anyhow!("the lab root must be a UTF-8 path; got {}", point.display()))?;
        let mut argv = vec!["mount", "-t", spec.fs.name()];
        let options = mount_options(&spec);
        if let Some(o) = &options {
            argv.extend(["-o", o.as_str()]);
        }
        argv.extend([devs[0], point_s]);
        os::run_tool(&argv, false, stop)?;
        match os::top_mount_at(&point)? {
            Some(m) if vol.loop_devices.contains(&m.source) => {}
            other => bail!("after mount, {} shows {other:?}", point.display()),
        }

        // 5. The cgroup (v1 blkio or v2 io) with the limits on each member device.
        if let (Some((h, cg)), Some(t)) = (cgroup, spec.throttle) {
            self.check_stop()?;
            h.enable()?;
            self.record(&root, &id, |e| e.cgroup = Some(cg.clone()))?;
            fs::create_dir(&cg).with_context(|| format!("creating cgroup {}", cg.display()))?;
            vol.cgroup = Some(cg.clone());
            for dev in &vol.loop_devices {
                let (maj, min) = os::dev_numbers(os::loop_name(dev).expect("ours"))?;
                for (file, line) in h.rules(&t, maj, min) {
                    let p = cg.join(file);
                    fs::write(&p, &line)
                        .with_context(|| format!("writing '{line}' to {}", p.display()))?;
                }
            }
        }
        self.check_stop()?;
        self.record(&root, &id, |e| e.complete = true)?;
        Ok(())
    }

    /// Attaches `img` to a free loop device with direct I/O and returns `/dev/loopN`.
    fn attach(&self, root: &Path, id: &str, img: &Path) -> anyhow::Result<String> {
        let img_s = img
            .to_str()
            .ok_or_else(|| anyhow!("the lab root must be a UTF-8 path; got {}", img.display()))?;
        let mut last = None;
        for _ in 0..8 {
            let out = os::run_tool(&["losetup", "-f"], false, None)?;
            let dev = out.trim().to_string();
            if os::loop_name(&dev).is_none() {
                bail!("`losetup -f` printed '{dev}', not a loop device");
            }
            let rec = LoopRecord {
                device: dev.clone(),
                image: img.to_path_buf(),
                write_cache_before: None,
            };
            self.record(root, id, |e| e.loop_devices.push(rec))?;
            match os::run_tool(&["losetup", "--direct-io=on", &dev, img_s], false, None) {
                Ok(_) => match os::loop_backing(&dev) {
                    Some(b) if os::backed_by(&b, img) => return Ok(dev),
                    b => bail!("after attaching {}, {dev} shows {b:?}", img.display()),
                },
                Err(e) => {
                    // Another process took the device between `-f` and our attach (EBUSY).
                    // Forget it, unless it somehow is ours.
                    let ours = os::loop_backing(&dev).is_some_and(|b| os::backed_by(&b, img));
                    if ours {
                        return Ok(dev);
                    }
                    self.record(root, id, |e| {
                        e.loop_devices
                            .retain(|r| !(r.device == dev && r.image == img));
                    })?;
                    last = Some(e);
                }
            }
        }
        Err(last
            .unwrap_or_else(|| anyhow!("no attempt made"))
            .context(format!("attaching {} to a loop device", img.display())))
    }
}

/// The `mount -o` list: the spec's, and for btrfs `nodiscard` unless the spec says
/// anything about discard. Since 6.2 btrfs mounts with `discard=async` where the device
/// can discard (loop devices can: it punches holes in the image), and those background
/// discards would show up on the timeline as I/O nobody asked for.
fn mount_options(spec: &VolumeSpec) -> Option<String> {
    let user = spec.mount_options.clone();
    if spec.fs != Fs::Btrfs || user.as_deref().is_some_and(|o| o.contains("discard")) {
        return user;
    }
    Some(match user {
        Some(o) => format!("nodiscard,{o}"),
        None => "nodiscard".to_string(),
    })
}
