//! The write cache a SCSI disk (SAS, SATA through libata, an array LUN, USB) reports in
//! its Caching mode page, as the `sd` driver shows it in
//! `/sys/class/scsi_disk/H:C:T:L/cache_type`, and the cache mode of a virtio-blk disk
//! (`/sys/block/vdX/cache_type`), without sdparm.
//!
//! `sd.c` prints one of four strings built from two mode-page bits, WCE (write cache
//! enable) and RCD (read cache disable): index `RCD + 2 * WCE` into
//! `{"write through", "none", "write back", "write back, no read (daft)"}`. Writing
//! `temporary <type>` changes only the kernel's idea, not the disk; reads never show the
//! prefix, but we accept it. virtio-blk shows "write back" or "write through" (its
//! `VIRTIO_BLK_F_CONFIG_WCE` writeback bit).
//!
//! There is no SCSI disk on our machines: parsing is tested on the kernel's strings and a
//! fixture sysfs tree.

use std::path::{Path, PathBuf};

use super::read_trim;

/// A parsed `cache_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheType {
    /// The string as sysfs printed it.
    pub raw: String,
    /// WCE: the disk acknowledges writes from a volatile cache (needs flushes).
    pub write_cache: bool,
    /// RCD: the read cache is disabled.
    pub read_cache_disabled: bool,
}

/// Parses a `cache_type` string; the error says what was found.
pub fn parse_cache_type(s: &str) -> Result<CacheType, String> {
    let t = s.trim();
    let body = t.strip_prefix("temporary ").unwrap_or(t);
    let (wce, rcd) = match body {
        "write through" => (false, false),
        "none" => (false, true),
        "write back" => (true, false),
        "write back, no read (daft)" => (true, true),
        _ => {
            return Err(format!(
                "unknown cache_type '{t}' (expected write through, none, write back or \
                 write back, no read (daft))"
            ))
        }
    };
    Ok(CacheType {
        raw: t.to_string(),
        write_cache: wce,
        read_cache_disabled: rcd,
    })
}

/// What `sd` shows for one disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiDisk {
    /// `/sys/class/scsi_disk/H:C:T:L`.
    pub dir: PathBuf,
    pub cache_type: Result<CacheType, String>,
    /// `FUA`: the disk accepts Force Unit Access writes.
    pub fua: Option<bool>,
}

/// Finds the `scsi_disk` of block device `disk` (a whole disk, `sda`): the entry of
/// `<sysfs>/class/scsi_disk/` whose `device/block/` holds `disk`.
pub fn read_scsi_disk(sysfs: &Path, disk: &str) -> Option<ScsiDisk> {
    let rd = std::fs::read_dir(sysfs.join("class/scsi_disk")).ok()?;
    for e in rd.flatten() {
        let dir = e.path();
        if !dir.join("device/block").join(disk).exists() {
            continue;
        }
        let cache_type = match read_trim(&dir.join("cache_type")) {
            Some(s) => parse_cache_type(&s),
            None => Err(format!("cannot read {}/cache_type", dir.display())),
        };
        let fua = read_trim(&dir.join("FUA")).map(|s| s == "1");
        return Some(ScsiDisk {
            dir,
            cache_type,
            fua,
        });
    }
    None
}

/// `cache_type` of a virtio-blk disk (`<sysfs>/block/vda/cache_type`), if it has one.
pub fn read_virtio_cache_type(sysfs: &Path, disk: &str) -> Option<Result<CacheType, String>> {
    read_trim(&sysfs.join("block").join(disk).join("cache_type")).map(|s| parse_cache_type(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_sd_prints() {
        let wt = parse_cache_type("write through\n").unwrap();
        assert!(!wt.write_cache && !wt.read_cache_disabled);
        assert_eq!(wt.raw, "write through");
        let none = parse_cache_type("none").unwrap();
        assert!(!none.write_cache && none.read_cache_disabled);
        let wb = parse_cache_type("write back").unwrap();
        assert!(wb.write_cache && !wb.read_cache_disabled);
        let daft = parse_cache_type("write back, no read (daft)").unwrap();
        assert!(daft.write_cache && daft.read_cache_disabled);
        assert!(
            parse_cache_type("temporary write back")
                .unwrap()
                .write_cache
        );
        let e = parse_cache_type("writeback").unwrap_err();
        assert!(e.contains("'writeback'"), "{e}");
    }

    #[test]
    fn finds_the_scsi_disk_of_a_block_device_in_a_fixture_tree() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        for (hctl, dev, ct, fua) in [
            ("0:0:0:0", "sda", "write back\n", "1\n"),
            ("1:0:0:0", "sdb", "write through\n", "0\n"),
            ("2:0:0:0", "sdc", "bogus\n", "0\n"),
        ] {
            let dir = sys.join("class/scsi_disk").join(hctl);
            std::fs::create_dir_all(dir.join("device/block").join(dev)).unwrap();
            std::fs::write(dir.join("cache_type"), ct).unwrap();
            std::fs::write(dir.join("FUA"), fua).unwrap();
        }
        let a = read_scsi_disk(sys, "sda").unwrap();
        assert!(a.cache_type.as_ref().unwrap().write_cache);
        assert_eq!(a.fua, Some(true));
        let b = read_scsi_disk(sys, "sdb").unwrap();
        assert!(!b.cache_type.unwrap().write_cache);
        assert_eq!(b.fua, Some(false));
        assert!(read_scsi_disk(sys, "sdc").unwrap().cache_type.is_err());
        assert!(read_scsi_disk(sys, "vda").is_none());

        std::fs::create_dir_all(sys.join("block/vda")).unwrap();
        std::fs::write(sys.join("block/vda/cache_type"), "write back\n").unwrap();
        assert!(
            read_virtio_cache_type(sys, "vda")
                .unwrap()
                .unwrap()
                .write_cache
        );
        assert!(read_virtio_cache_type(sys, "loop0").is_none());
    }
}
