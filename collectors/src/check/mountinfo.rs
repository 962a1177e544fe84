//! What a mount's options do to durability. The table itself is [`crate::mounts`].
//!
//! Flags such as `sync`/`dirsync` and file system options such as `nobarrier`
//! or `data=writeback` are super-block options; `ro` can be in either list.
//!
//! Options that drop write barriers (the cache flushes a journal commit and fsync rely on):
//! `nobarrier`, `barrier=0` (ext3/ext4 print it as `nobarrier`), `barrier=none` (gfs2,
//! reiserfs), `barrier=off`, and btrfs's `nobarrier`. xfs removed `nobarrier` in Linux
//! 4.19 (a mount with it fails), so a new kernel never shows it for xfs.

use crate::mounts::Mount;

impl Mount {
    /// What the options do to durability.
    pub fn durability(&self) -> Durability {
        let barrier_off = self
            .options()
            .into_iter()
            .find(|o| {
                matches!(
                    *o,
                    "nobarrier" | "barrier=0" | "barrier=none" | "barrier=off"
                )
            })
            .map(str::to_string);
        Durability {
            barrier_off,
            journal_async_commit: self.has("journal_async_commit"),
            data_mode: self.value("data").map(str::to_string),
            sync: self.has("sync"),
            dirsync: self.has("dirsync"),
            read_only: self.mount_options.iter().any(|o| o == "ro")
                || self.super_options.iter().any(|o| o == "ro"),
        }
    }
}

/// The durability-relevant options of a mount.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durability {
    /// The option that drops barriers, as written (`nobarrier`, `barrier=0`, ...).
    pub barrier_off: Option<String>,
    /// ext4 `journal_async_commit`: the commit block is written without waiting for the
    /// journal blocks before it (ext4(5) warns it can lose data on a crash).
    pub journal_async_commit: bool,
    /// ext3/ext4 `data=` mode (`ordered`, `writeback`, `journal`), when printed.
    pub data_mode: Option<String>,
    /// Mounted `sync`: every write is synchronous.
    pub sync: bool,
    /// Mounted `dirsync`: directory updates are synchronous.
    pub dirsync: bool,
    pub read_only: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mounts::parse;

    const FIXTURE: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict
42 27 7:0 / /mnt/a\\040b rw,relatime shared:7 - ext4 /dev/loop0 rw,journal_async_commit,nobarrier,data=writeback
43 27 7:1 / /mnt/s rw,relatime - ext4 /dev/loop1 rw,sync,dirsync
44 27 0:55 / /mnt/r1 ro,relatime - btrfs /dev/loop2 ro,space_cache=v2,subvolid=5,subvol=/
45 27 7:3 / /mnt/g rw - gfs2 /dev/loop3 rw,barrier=none
";

    #[test]
    fn barrier_sync_and_journal_options() {
        let m = parse(FIXTURE);
        let d = m[1].durability();
        assert_eq!(d.barrier_off.as_deref(), Some("nobarrier"));
        assert!(d.journal_async_commit);
        assert_eq!(d.data_mode.as_deref(), Some("writeback"));
        assert!(!d.sync && !d.read_only);
        let s = m[2].durability();
        assert!(s.sync && s.dirsync && s.barrier_off.is_none());
        assert!(m[3].durability().read_only);
        assert_eq!(
            m[4].durability().barrier_off.as_deref(),
            Some("barrier=none")
        );
        assert_eq!(m[0].durability(), Durability::default());
    }
}
