//! `list`: every volume in the state file, and whether it still is what was made.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::state::{self, Entry};
use super::{os, Fs, Lab, Raid, Throttle, WriteCache};

/// A volume as `list` sees it.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeStatus {
    pub name: String,
    /// `ok`, `creating` (its creator is still building it) or `stale`.
    pub state: VolumeState,
    /// Why it is stale.
    pub problem: Option<String>,
    pub mount: Option<PathBuf>,
    pub fs: Fs,
    pub raid: Raid,
    pub devices: usize,
    pub size_bytes: u64,
    pub throttle: Option<Throttle>,
    pub write_cache: Option<WriteCache>,
    pub mount_options: Option<String>,
    pub loop_devices: Vec<String>,
    /// Per loop device: the kernel does direct I/O to the image (`loop/dio`); `None`
    /// when it is not attached.
    pub direct_io: Vec<Option<bool>>,
    pub images: Vec<PathBuf>,
    pub cgroup: Option<PathBuf>,
    pub owner_pid: u32,
    /// Stays up after its creator exits (made by `diskpulse lab up`).
    pub kept: bool,
    pub created: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeState {
    Ok,
    Creating,
    Stale,
}

impl VolumeState {
    pub fn name(self) -> &'static str {
        match self {
            VolumeState::Ok => "ok",
            VolumeState::Creating => "creating",
            VolumeState::Stale => "stale",
        }
    }
}

impl Lab {
    /// Every volume in the state file, with whether it is still what was made.
    pub fn list(&self) -> anyhow::Result<Vec<VolumeStatus>> {
        let Some(root) = self.existing_root() else {
            return Ok(vec![]);
        };
        let s = state::load(&root.join("state.json"))?;
        Ok(s.volumes.iter().map(|e| status_of(&root, e)).collect())
    }
}

/// Whether an entry still is what it says, and why not.
fn status_of(root: &Path, e: &Entry) -> VolumeStatus {
    let alive = os::process_alive(e.owner_pid, e.owner_start_ticks);
    let mut problem = None;
    let mut state = VolumeState::Ok;
    let backings: Vec<Option<os::Backing>> = e
        .loop_devices
        .iter()
        .map(|r| os::loop_backing(&r.device))
        .collect();
    if !e.complete {
        if alive {
            state = VolumeState::Creating;
        } else {
            state = VolumeState::Stale;
            problem = Some(format!(
                "its creator (pid {}) is gone and it was never complete",
                e.owner_pid
            ));
        }
    } else if !e.kept && !alive {
        state = VolumeState::Stale;
        problem = Some(format!(
            "its creator (pid {}) exited without tearing it down",
            e.owner_pid
        ));
    } else {
        for (r, b) in e.loop_devices.iter().zip(&backings) {
            if !b.as_ref().is_some_and(|b| os::backed_by(b, &r.image)) {
                state = VolumeState::Stale;
                problem = Some(format!(
                    "{} is no longer backed by {}",
                    r.device,
                    r.image.display()
                ));
                break;
            }
        }
        if state == VolumeState::Ok {
            let point = root.join("mnt").join(&e.name);
            let mounted = os::top_mount_at(&point)
                .ok()
                .flatten()
                .is_some_and(|m| e.loop_devices.iter().any(|r| r.device == m.source));
            if !mounted {
                state = VolumeState::Stale;
                problem = Some(format!("{} is not mounted", point.display()));
            } else if let Some(cg) = &e.cgroup {
                if !cg.exists() {
                    state = VolumeState::Stale;
                    problem = Some(format!("cgroup {} is gone", cg.display()));
                }
            }
        }
    }
    VolumeStatus {
        name: e.name.clone(),
        state,
        problem,
        mount: e.mount.clone(),
        fs: e.spec.fs,
        raid: e.spec.raid,
        devices: e.spec.devices,
        size_bytes: e.spec.size,
        throttle: e.spec.throttle,
        write_cache: e.spec.write_cache,
        mount_options: e.spec.mount_options.clone(),
        loop_devices: e.loop_devices.iter().map(|r| r.device.clone()).collect(),
        direct_io: backings
            .iter()
            .map(|b| b.as_ref().map(|b| b.direct_io))
            .collect(),
        images: e.images.clone(),
        cgroup: e.cgroup.clone(),
        owner_pid: e.owner_pid,
        kept: e.kept,
        created: e.created.clone(),
    }
}
