//! `diskpulse lab up|down|list`: lab volumes from the command line (see `engines::lab`).
//!
//! Exit codes: 0 done; 1 failed (what `up` had created is removed; what `down` could not
//! remove stays in the state file); 2 bad usage, one line, nothing created; 130 `up`
//! interrupted by Ctrl-C/SIGTERM (everything it had created is removed).

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Subcommand};

use ::format::cli::parse_size;
use engines::lab::{fmt_bytes, Fs, Interrupted, Lab, Raid, Throttle, VolumeSpec, WriteCache};

#[derive(Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    pub cmd: LabCmd,
}

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Create a volume (images, loop devices, mkfs, mount, throttles) and print its mount point.
    #[command(after_help = "\
Examples:
  diskpulse lab up vol0 --size 2G --fs ext4
  diskpulse lab up r1 --size 1G --fs btrfs --raid 1 --write-iops 500")]
    Up(UpArgs),
    /// Tear down a volume, or all of them (stale ones from crashed runs too).
    #[command(after_help = "\
Examples:
  diskpulse lab down vol0
  diskpulse lab down --all")]
    Down(DownArgs),
    /// The volumes in the lab's state file, each ok, creating or stale.
    #[command(after_help = "\
Examples:
  diskpulse lab list
  diskpulse lab list --json")]
    List(ListArgs),
}

#[derive(Args, Debug)]
pub struct RootArg {
    /// The lab's directory: images/, mnt/<name>, state.json.
    #[arg(long, value_name = "DIR", default_value = Lab::DEFAULT_ROOT)]
    pub root: PathBuf,
}

fn one_line<T: std::str::FromStr<Err = String>>(s: &str) -> Result<T, String> {
    s.parse()
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// The volume's name (letters, digits, '.', '_', '-').
    pub name: String,
    /// Size of each device's image: 512M, 2G (a whole number of MiB).
    #[arg(long, value_parser = parse_size)]
    pub size: u64,
    /// ext4, xfs or btrfs.
    #[arg(long, value_parser = one_line::<Fs>)]
    pub fs: Fs,
    /// 0, 1, 10 (btrfs data and metadata profile) or single.
    #[arg(long, default_value = "single", value_parser = one_line::<Raid>)]
    pub raid: Raid,
    /// Loop devices (default: 1 for single, 2 for RAID 0/1, 4 for RAID 10).
    #[arg(long)]
    pub devices: Option<usize>,
    /// Cap on read I/Os per second, per device, for processes in the volume's cgroup.
    #[arg(long)]
    pub read_iops: Option<u64>,
    /// Cap on write I/Os per second, per device, for processes in the volume's cgroup.
    #[arg(long)]
    pub write_iops: Option<u64>,
    /// Cap on read bytes per second (50M), per device.
    #[arg(long, value_parser = parse_size)]
    pub read_bps: Option<u64>,
    /// Cap on write bytes per second (50M), per device.
    #[arg(long, value_parser = parse_size)]
    pub write_bps: Option<u64>,
    /// The loop devices' queue/write_cache: back (flushes are sent) or through (none are).
    #[arg(long, value_parser = one_line::<WriteCache>)]
    pub write_cache: Option<WriteCache>,
    /// Options for `mount -o`, like noatime,commit=5.
    #[arg(long)]
    pub mount_options: Option<String>,
    #[command(flatten)]
    pub root: RootArg,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// The volume to tear down.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub name: Option<String>,
    /// Every volume in the state file, stale ones included.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub root: RootArg,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON: {"format_version": 1, "root", "volumes": [...]}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub root: RootArg,
}

pub fn run(a: LabArgs) -> anyhow::Result<i32> {
    match a.cmd {
        LabCmd::Up(u) => up(u),
        LabCmd::Down(d) => down(d),
        LabCmd::List(l) => list(l),
    }
}

fn up(a: UpArgs) -> anyhow::Result<i32> {
    let throttle = Throttle {
        read_iops: a.read_iops,
        write_iops: a.write_iops,
        read_bps: a.read_bps,
        write_bps: a.write_bps,
    };
    let spec = VolumeSpec {
        name: a.name.clone(),
        size: a.size,
        fs: a.fs,
        raid: a.raid,
        devices: a.devices.unwrap_or(a.raid.default_devices()),
        mount_options: a.mount_options.clone(),
        throttle: (throttle != Throttle::default()).then_some(throttle),
        write_cache: a.write_cache,
    };
    spec.validate()?;
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    let lab = Lab::open(&a.root.root).with_stop(stop.clone());
    let t0 = Instant::now();
    let vol = match lab.up(&spec) {
        Ok(v) => v,
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            let removed = &e.downcast_ref::<Interrupted>().expect("checked").removed;
            eprintln!(
                "lab up {}: interrupted; {}",
                spec.name,
                if removed.is_empty() {
                    "nothing had been created yet".to_string()
                } else {
                    format!("rolled back: {}", removed.join(", "))
                }
            );
            return Ok(130);
        }
        Err(e) => return Err(e),
    };
    let mount = vol.mount.clone();
    let devices = vol.loop_devices.join(" ");
    let cgroup = vol.cgroup.clone();
    vol.keep()?;
    if stop.load(Ordering::Relaxed) {
        // The signal came after the last step: the user still asked to stop.
        lab.down(&spec.name)?;
        eprintln!(
            "lab up {}: interrupted; everything it had created was removed",
            spec.name
        );
        return Ok(130);
    }
    eprintln!(
        "lab up {}: {} on {devices}{} in {:.2} s; `diskpulse lab down {}` removes it",
        spec.name,
        spec.describe(),
        cgroup
            .map(|c| format!(", cgroup {}", c.display()))
            .unwrap_or_default(),
        t0.elapsed().as_secs_f64(),
        spec.name
    );
    println!("{}", mount.display());
    Ok(0)
}

fn down(a: DownArgs) -> anyhow::Result<i32> {
    // Ctrl-C must not cut a teardown in half: it finishes, then exits 130.
    check_root_to_read(&a.root.root)?;
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    let lab = Lab::open(&a.root.root);
    let t0 = Instant::now();
    let done = if a.all {
        lab.down_all()?
    } else {
        let name = a.name.as_deref().expect("clap requires NAME without --all");
        vec![lab.down(name)?]
    };
    for t in &done {
        for l in &t.left_alone {
            eprintln!("lab down {}: left alone: {l}", t.name);
        }
        eprintln!(
            "lab down {}: {}",
            t.name,
            if t.removed.is_empty() {
                "nothing was left to remove".to_string()
            } else {
                t.removed.join(", ")
            }
        );
    }
    if a.all && done.is_empty() {
        eprintln!("lab down --all: no volumes under {}", lab.root().display());
    } else {
        eprintln!("lab down: {:.2} s", t0.elapsed().as_secs_f64());
    }
    Ok(if stop.load(Ordering::Relaxed) { 130 } else { 0 })
}

/// `lab down` and `lab list` read `--root`: a missing one holds no volumes, but one that
/// is not a directory is a slip (it failed with exit 1 reading `FILE/state.json`).
fn check_root_to_read(root: &std::path::Path) -> anyhow::Result<()> {
    if root.exists() && !root.is_dir() {
        return Err(::format::usage!(
            "--root {} is not a directory; name the lab's directory, like /var/tmp/diskpulse-lab",
            root.display()
        ));
    }
    Ok(())
}

fn list(a: ListArgs) -> anyhow::Result<i32> {
    check_root_to_read(&a.root.root)?;
    let lab = Lab::open(&a.root.root);
    let vols = lab.list()?;
    let mut out = String::new();
    if a.json {
        #[derive(serde::Serialize)]
        struct Listing<'a> {
            format_version: u32,
            root: &'a std::path::Path,
            volumes: &'a [engines::lab::VolumeStatus],
        }
        out = serde_json::to_string_pretty(&Listing {
            format_version: 1,
            root: lab.root(),
            volumes: &vols,
        })?;
        out.push('\n');
    } else if vols.is_empty() {
        out.push_str(&format!("no lab volumes under {}\n", lab.root().display()));
    } else {
        let rows: Vec<[String; 8]> = vols
            .iter()
            .map(|v| {
                [
                    v.name.clone(),
                    v.state.name().to_string(),
                    v.fs.name().to_string(),
                    v.raid.name().to_string(),
                    format!(
                        "{} ({})",
                        v.devices,
                        v.loop_devices
                            .iter()
                            .map(|d| d.trim_start_matches("/dev/"))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    fmt_bytes(v.size_bytes),
                    v.throttle
                        .map(|t| t.describe())
                        .unwrap_or_else(|| "-".into()),
                    v.mount
                        .as_ref()
                        .map(|m| m.display().to_string())
                        .unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        let head = [
            "NAME", "STATE", "FS", "RAID", "DEVICES", "SIZE", "THROTTLE", "MOUNT",
        ];
        let mut w = head.map(|h| h.len());
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else {
                    s.push_str(&format!("{c:<width$}  ", width = w[i]));
                }
            }
            s.push('\n');
            s
        };
        out.push_str(&line(head.to_vec()));
        for (r, v) in rows.iter().zip(&vols) {
            out.push_str(&line(r.iter().map(|s| s.as_str()).collect()));
            if let Some(p) = &v.problem {
                out.push_str(&format!(
                    "  {}: {p}; `diskpulse lab down {}` cleans it\n",
                    v.name, v.name
                ));
            }
        }
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(out.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    Ok(0)
}
