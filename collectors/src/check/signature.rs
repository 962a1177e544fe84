//! Before writing to a block device: is something on it (a file system, a partition
//! table, swap, LUKS, an LVM label), and is it in use (mounted, a btrfs member, under
//! device-mapper)?
//!
//! Signatures are the magic numbers blkid looks for, at their documented offsets. "In use"
//! is asked of the kernel: `open(O_EXCL)` on a block device claims it and fails with
//! EBUSY while anything else holds it (a mounted file system, a btrfs member, a dm/md
//! holder), which no reading of /proc can miss.

use std::io::Read;
use std::path::Path;

/// Bytes [`detect`] needs from the start of a device (btrfs's superblock is at 64 KiB).
pub const HEAD_BYTES: usize = 128 * 1024;

/// What the start of a device holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    Ext,
    Xfs,
    Btrfs,
    F2fs,
    Swap,
    Luks,
    Lvm2,
    Gpt,
    /// 0x55AA at 510: an MBR partition table or a FAT/NTFS boot sector.
    MbrOrBootSector,
    Iso9660,
}

impl Signature {
    pub fn name(&self) -> &'static str {
        match self {
            Signature::Ext => "an ext2/3/4 file system",
            Signature::Xfs => "an xfs file system",
            Signature::Btrfs => "a btrfs file system",
            Signature::F2fs => "an f2fs file system",
            Signature::Swap => "swap space",
            Signature::Luks => "a LUKS header",
            Signature::Lvm2 => "an LVM2 physical volume",
            Signature::Gpt => "a GPT partition table",
            Signature::MbrOrBootSector => "an MBR partition table or boot sector",
            Signature::Iso9660 => "an ISO 9660 image",
        }
    }
}

fn at(buf: &[u8], off: usize, magic: &[u8]) -> bool {
    buf.get(off..off + magic.len()) == Some(magic)
}

/// The first signature found in `head` (bytes from offset 0 of the device).
pub fn detect(head: &[u8]) -> Option<Signature> {
    let checks: [(Signature, usize, &[u8]); 12] = [
        (Signature::Luks, 0, b"LUKS\xba\xbe"),
        (Signature::Xfs, 0, b"XFSB"),
        (Signature::Ext, 0x438, &[0x53, 0xEF]),
        (Signature::F2fs, 0x400, &[0x10, 0x20, 0xF5, 0xF2]),
        (Signature::Btrfs, 0x10040, b"_BHRfS_M"),
        (Signature::Swap, 4086, b"SWAPSPACE2"),
        (Signature::Swap, 4086, b"SWAP-SPACE"),
        (Signature::Lvm2, 512, b"LABELONE"),
        (Signature::Gpt, 512, b"EFI PART"),
        (Signature::Gpt, 4096, b"EFI PART"),
        (Signature::Iso9660, 0x8001, b"CD001"),
        (Signature::MbrOrBootSector, 510, &[0x55, 0xAA]),
    ];
    checks
        .iter()
        .find(|(_, off, magic)| at(head, *off, magic))
        .map(|c| c.0)
}

/// Reads the first [`HEAD_BYTES`] of `dev` (fewer if it is smaller).
pub fn read_head(dev: &Path) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(dev)?;
    let mut v = Vec::with_capacity(HEAD_BYTES);
    f.take(HEAD_BYTES as u64).read_to_end(&mut v)?;
    Ok(v)
}

/// Opens block device `dev` for writing with O_EXCL (and O_DIRECT if asked): EBUSY means
/// it is mounted or held by something else.
pub fn open_exclusive(dev: &Path, direct: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_EXCL;
    if direct {
        flags |= libc::O_DIRECT;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .open(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_with(off: usize, magic: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; HEAD_BYTES];
        v[off..off + magic.len()].copy_from_slice(magic);
        v
    }

    #[test]
    fn finds_each_signature_at_its_offset() {
        assert_eq!(detect(&vec![0u8; HEAD_BYTES]), None);
        assert_eq!(
            detect(&head_with(0x438, &[0x53, 0xEF])),
            Some(Signature::Ext)
        );
        assert_eq!(detect(&head_with(0, b"XFSB")), Some(Signature::Xfs));
        assert_eq!(
            detect(&head_with(0x10040, b"_BHRfS_M")),
            Some(Signature::Btrfs)
        );
        assert_eq!(
            detect(&head_with(4086, b"SWAPSPACE2")),
            Some(Signature::Swap)
        );
        assert_eq!(detect(&head_with(512, b"EFI PART")), Some(Signature::Gpt));
        assert_eq!(
            detect(&head_with(510, &[0x55, 0xAA])),
            Some(Signature::MbrOrBootSector)
        );
        // A short device: no panic, nothing past its end.
        assert_eq!(detect(&[0u8; 100]), None);
    }

    #[test]
    fn a_real_ext4_image_is_recognised() {
        if std::process::Command::new("mkfs.ext4")
            .arg("-V")
            .output()
            .is_err()
        {
            eprintln!("skipping: mkfs.ext4 not found (apt-get install e2fsprogs)");
            return;
        }
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let img = d.path().join("fs.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(8 << 20)
            .unwrap();
        let st = std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&img)
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(detect(&read_head(&img).unwrap()), Some(Signature::Ext));
    }
}
