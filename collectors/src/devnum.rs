//! A block device's number, `MAJ:MIN`: the one key devices, mounts and sysfs share.

/// A block device identified by its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for DevNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl DevNum {
    pub fn from_dev_t(dev: u64) -> DevNum {
        DevNum {
            major: libc::major(dev),
            minor: libc::minor(dev),
        }
    }

    /// Parses `MAJ:MIN`.
    pub fn parse(s: &str) -> Option<DevNum> {
        let (a, b) = s.trim().split_once(':')?;
        Some(DevNum {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }
}
