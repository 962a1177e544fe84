//! Where the diskstats sampler reads its counters: `/proc/diskstats` or one sysfs
//! `stat` file per recorded device, picked once at the start (the choice is written to
//! `meta.json`).

use std::path::{Path, PathBuf};

use collectors::sysfs::BlockSysfs;

use super::DeviceFilter;

/// Where the counters come from. Both give the same kernel counters
/// (`part_stat_read_all`), in the same order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskSource {
    /// `<procfs>/diskstats`: one read for every device on the host. Needed to see devices
    /// appear ([`DeviceFilter::All`]); its cost grows with every device the host has.
    Procfs(PathBuf),
    /// `<sysfs>/class/block/<name>/stat`, one held file per recorded device: the same
    /// counters without the name columns. Costs grow with the devices recorded only
    /// (about 1.5 us each here, against ~9 us for a 10-device /proc/diskstats).
    Sysfs(PathBuf),
}

impl DiskSource {
    /// Per-device sysfs files when every listed device has one, else /proc/diskstats.
    pub fn auto(
        procfs: &Path,
        sysfs: &Path,
        filter: &DeviceFilter,
        names: &[(u32, u32, String)],
    ) -> DiskSource {
        let all_have_stat = matches!(filter, DeviceFilter::Only(_))
            && !names.is_empty()
            && names
                .iter()
                .all(|(_, _, n)| BlockSysfs::new(sysfs).has_stat(n));
        if all_have_stat {
            DiskSource::Sysfs(sysfs.to_path_buf())
        } else {
            DiskSource::Procfs(procfs.to_path_buf())
        }
    }

    /// For meta.json.
    pub fn describe(&self) -> String {
        match self {
            DiskSource::Procfs(p) => p.join("diskstats").display().to_string(),
            DiskSource::Sysfs(p) => format!("{}/class/block/<device>/stat", p.display()),
        }
    }
}
