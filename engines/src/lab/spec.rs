//! What a lab volume is made of: its file system, RAID profile, member count, size,
//! throttle and write cache, with the checks that refuse what cannot be built.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use format::usage;

pub(super) const MIB: u64 = 1 << 20;

/// A file system diskpulse can make on lab volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    Ext4,
    Xfs,
    Btrfs,
}

impl Fs {
    pub fn name(self) -> &'static str {
        match self {
            Fs::Ext4 => "ext4",
            Fs::Xfs => "xfs",
            Fs::Btrfs => "btrfs",
        }
    }

    /// The smallest image (per device) its mkfs accepts here: xfsprogs 6.1 refuses
    /// file systems under 300 MiB; mkfs.btrfs 6.2 wants 131072000 bytes (125 MiB) per
    /// member for RAID profiles (we use that for every profile); ext4 works far lower,
    /// 16 MiB leaves room for a journal and a little data.
    fn min_device_bytes(self) -> u64 {
        match self {
            Fs::Ext4 => 16 * MIB,
            Fs::Xfs => 300 * MIB,
            Fs::Btrfs => 125 * MIB,
        }
    }
}

impl FromStr for Fs {
    type Err = String;
    fn from_str(s: &str) -> Result<Fs, String> {
        match s.to_ascii_lowercase().as_str() {
            "ext4" => Ok(Fs::Ext4),
            "xfs" => Ok(Fs::Xfs),
            "btrfs" => Ok(Fs::Btrfs),
            _ => Err(format!("takes ext4, xfs or btrfs; got '{s}'")),
        }
    }
}

/// How data and metadata spread over the devices (btrfs profiles; ext4 and xfs are
/// `Single` on one device: there is no md or device-mapper to stripe them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Raid {
    Single,
    Raid0,
    Raid1,
    Raid10,
}

impl Raid {
    pub fn name(self) -> &'static str {
        match self {
            Raid::Single => "single",
            Raid::Raid0 => "raid0",
            Raid::Raid1 => "raid1",
            Raid::Raid10 => "raid10",
        }
    }

    /// Devices needed: one for single, two for RAID 0 and 1, four for RAID 10.
    fn min_devices(self) -> usize {
        match self {
            Raid::Single => 1,
            Raid::Raid0 | Raid::Raid1 => 2,
            Raid::Raid10 => 4,
        }
    }

    /// The number of devices when none is given.
    pub fn default_devices(self) -> usize {
        self.min_devices()
    }
}

impl FromStr for Raid {
    type Err = String;
    fn from_str(s: &str) -> Result<Raid, String> {
        match s.to_ascii_lowercase().as_str() {
            "single" | "none" => Ok(Raid::Single),
            "0" | "raid0" => Ok(Raid::Raid0),
            "1" | "raid1" => Ok(Raid::Raid1),
            "10" | "raid10" => Ok(Raid::Raid10),
            _ => Err(format!("takes 0, 1, 10 or single; got '{s}'")),
        }
    }
}

/// Block I/O limits (cgroup v1 blkio or v2 io.max: [`super::cgroup`]), applied to each
/// member loop device. `None` is no limit. `*_iops` are I/Os per second, `*_bps` bytes
/// per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttle {
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
}

impl Throttle {
    /// "read 100 IOPS, write 50 MiB/s".
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        for (what, iops, bps) in [
            ("read", self.read_iops, self.read_bps),
            ("write", self.write_iops, self.write_bps),
        ] {
            if let Some(n) = iops {
                v.push(format!("{what} {n} IOPS"));
            }
            if let Some(b) = bps {
                v.push(format!("{what} {}/s", fmt_bytes(b)));
            }
        }
        v.join(", ")
    }
}

/// The loop device's `queue/write_cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteCache {
    /// "write back": flushes are sent (and become an fsync of the image).
    #[serde(rename = "back")]
    WriteBack,
    /// "write through": no flushes are sent.
    #[serde(rename = "through")]
    WriteThrough,
}

impl WriteCache {
    pub(super) fn sysfs(self) -> &'static str {
        match self {
            WriteCache::WriteBack => "write back",
            WriteCache::WriteThrough => "write through",
        }
    }
}

impl FromStr for WriteCache {
    type Err = String;
    fn from_str(s: &str) -> Result<WriteCache, String> {
        match s.to_ascii_lowercase().as_str() {
            "back" | "write-back" | "writeback" | "on" => Ok(WriteCache::WriteBack),
            "through" | "write-through" | "writethrough" | "off" => Ok(WriteCache::WriteThrough),
            _ => Err(format!("takes back or through; got '{s}'")),
        }
    }
}

/// What to build. Start from [`VolumeSpec::new`] and change fields with struct update
/// syntax; [`Lab::up`] validates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeSpec {
    /// Letters, digits, `.`, `_`, `-`: it names the mount point, the images and the
    /// cgroup `diskpulse-<name>`.
    pub name: String,
    /// Size of *each* member device's image, bytes (a whole number of MiB).
    #[serde(rename = "size_bytes")]
    pub size: u64,
    pub fs: Fs,
    pub raid: Raid,
    /// Loop devices: 1 for single, >= 2 for RAID 0/1, >= 4 for RAID 10.
    pub devices: usize,
    /// Passed to `mount -o`.
    pub mount_options: Option<String>,
    pub throttle: Option<Throttle>,
    /// `None` leaves the kernel's default ("write back" on loop devices).
    pub write_cache: Option<WriteCache>,
}

impl VolumeSpec {
    /// One device, no RAID, no throttle, default mount options and write cache.
    pub fn new(name: &str, size: u64, fs: Fs) -> VolumeSpec {
        VolumeSpec {
            name: name.to_string(),
            size,
            fs,
            raid: Raid::Single,
            devices: 1,
            mount_options: None,
            throttle: None,
            write_cache: None,
        }
    }

    /// Checks everything that can be checked without touching the system. Errors are
    /// usage errors (one line; exit code 2 in the CLI).
    pub fn validate(&self) -> anyhow::Result<()> {
        validate_name(&self.name)?;
        let n = &self.name;
        if self.fs != Fs::Btrfs && (self.raid != Raid::Single || self.devices != 1) {
            return Err(usage!(
                "lab up {n}: {} takes one device and no RAID here (no md or device-mapper); use --fs btrfs for RAID 0/1/10",
                self.fs.name()
            ));
        }
        if self.devices < self.raid.min_devices() {
            return Err(usage!(
                "lab up {n}: {} needs at least {} devices; got {}",
                self.raid.name(),
                self.raid.min_devices(),
                self.devices
            ));
        }
        if self.raid == Raid::Single && self.devices != 1 {
            return Err(usage!(
                "lab up {n}: single takes one device; got {} (use --raid 0 to stripe)",
                self.devices
            ));
        }
        if self.devices > 16 {
            return Err(usage!(
                "lab up {n}: at most 16 devices; got {}",
                self.devices
            ));
        }
        if !self.size.is_multiple_of(MIB) {
            return Err(usage!(
                "lab up {n}: the size takes a whole number of MiB, like 512M or 2G; got {} bytes",
                self.size
            ));
        }
        let min = self.fs.min_device_bytes();
        if self.size < min {
            return Err(usage!(
                "lab up {n}: {} needs at least {} per device; got {}",
                self.fs.name(),
                fmt_bytes(min),
                fmt_bytes(self.size)
            ));
        }
        if self.size > (16u64 << 40) {
            return Err(usage!(
                "lab up {n}: at most 16 TiB per device; got {}",
                fmt_bytes(self.size)
            ));
        }
        if let Some(o) = &self.mount_options {
            if o.is_empty() || o.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(usage!(
                    "lab up {n}: mount options are a comma-separated list without spaces, like noatime,commit=5; got '{o}'"
                ));
            }
        }
        if let Some(t) = &self.throttle {
            let limits: Vec<u64> = [t.read_iops, t.write_iops, t.read_bps, t.write_bps]
                .into_iter()
                .flatten()
                .collect();
            if limits.is_empty() {
                return Err(usage!("lab up {n}: a throttle needs at least one limit"));
            }
            if limits.contains(&0) {
                return Err(usage!(
                    "lab up {n}: a throttle limit of 0 means no limit to the kernel; leave it out instead"
                ));
            }
        }
        Ok(())
    }

    /// "btrfs raid1, 2 x 1 GiB".
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} {}, {} x {}",
            self.fs.name(),
            self.raid.name(),
            self.devices,
            fmt_bytes(self.size)
        );
        if let Some(t) = &self.throttle {
            s.push_str(&format!(", throttled to {}", t.describe()));
        }
        if let Some(w) = self.write_cache {
            s.push_str(&format!(", write cache {}", w.sysfs()));
        }
        s
    }
}

/// Checks a volume name (usage error if bad).
pub(crate) fn validate_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(usage!(
            "lab: a volume name is 1-48 letters, digits, '.', '_' or '-', not starting with '.' or '-' (it names a directory and a cgroup); got '{name}'"
        ))
    }
}

/// A size as a user gives it ("1 GiB", "125 MiB"): [`format::units::bytes_exact`].
pub use format::units::bytes_exact as fmt_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &VolumeSpec) -> String {
        let e = spec.validate().unwrap_err();
        assert!(e.downcast_ref::<format::cli::UsageError>().is_some(), "{e}");
        let s = e.to_string();
        assert_eq!(s.lines().count(), 1, "{s}");
        s
    }

    #[test]
    fn specs_that_cannot_be_built_are_usage_errors() {
        let ok = VolumeSpec::new("v0", 1 << 30, Fs::Ext4);
        ok.validate().unwrap();
        assert!(err(&VolumeSpec::new("a/b", 1 << 30, Fs::Ext4)).contains("'a/b'"));
        assert!(err(&VolumeSpec::new("", 1 << 30, Fs::Ext4)).contains("name"));
        assert!(err(&VolumeSpec::new("..", 1 << 30, Fs::Ext4)).contains("'..'"));
        let r1 = VolumeSpec {
            raid: Raid::Raid1,
            devices: 1,
            ..VolumeSpec::new("r1", 1 << 30, Fs::Btrfs)
        };
        assert!(err(&r1).contains("at least 2 devices"));
        let r10 = VolumeSpec {
            raid: Raid::Raid10,
            devices: 3,
            ..VolumeSpec::new("r10", 1 << 30, Fs::Btrfs)
        };
        assert!(err(&r10).contains("at least 4"));
        assert!(err(&VolumeSpec::new("b", 100 * MIB, Fs::Btrfs)).contains("125 MiB"));
        assert!(err(&VolumeSpec::new("x", 200 * MIB, Fs::Xfs)).contains("300 MiB"));
        VolumeSpec::new("x", 300 * MIB, Fs::Xfs).validate().unwrap();
        assert!(err(&VolumeSpec::new("x", (1 << 30) + 5, Fs::Xfs)).contains("whole number of MiB"));
        let ext4_raid = VolumeSpec {
            raid: Raid::Raid0,
            devices: 2,
            ..VolumeSpec::new("e", 1 << 30, Fs::Ext4)
        };
        assert!(err(&ext4_raid).contains("--fs btrfs"));
        let zero = VolumeSpec {
            throttle: Some(Throttle {
                write_iops: Some(0),
                ..Default::default()
            }),
            ..VolumeSpec::new("t", 1 << 30, Fs::Ext4)
        };
        assert!(err(&zero).contains("0"));
        let spaces = VolumeSpec {
            mount_options: Some("noatime, sync".into()),
            ..VolumeSpec::new("m", 1 << 30, Fs::Ext4)
        };
        assert!(err(&spaces).contains("noatime, sync"));
    }

    #[test]
    fn names_parse() {
        assert_eq!("XFS".parse::<Fs>(), Ok(Fs::Xfs));
        assert!("zfs".parse::<Fs>().unwrap_err().contains("'zfs'"));
        assert_eq!("10".parse::<Raid>(), Ok(Raid::Raid10));
        assert_eq!("raid1".parse::<Raid>(), Ok(Raid::Raid1));
        assert!("5".parse::<Raid>().is_err());
        assert_eq!(
            "through".parse::<WriteCache>(),
            Ok(WriteCache::WriteThrough)
        );
        assert_eq!(fmt_bytes(1 << 30), "1 GiB");
        assert_eq!(fmt_bytes(125 * MIB), "125 MiB");
    }

    #[test]
    fn spec_json_names_units() {
        let s = VolumeSpec {
            write_cache: Some(WriteCache::WriteThrough),
            ..VolumeSpec::new("v", 1 << 30, Fs::Btrfs)
        };
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["size_bytes"], 1u64 << 30);
        assert_eq!(j["fs"], "btrfs");
        assert_eq!(j["raid"], "single");
        assert_eq!(j["write_cache"], "through");
        let back: VolumeSpec = serde_json::from_value(j).unwrap();
        assert_eq!(back, s);
    }
}
