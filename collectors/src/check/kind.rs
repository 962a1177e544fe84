//! What sort of block device a name is, from sysfs: the rules that judge a cache or a
//! flush rate differ for a loop device, a virtual disk and real hardware.
//!
//! A virtual disk's `rotational` says nothing about platters (virtio-blk and Xen disks
//! report 1 by default), and what a flush does is decided by the hypervisor's cache mode.

use std::path::Path;

use super::read_trim;

/// The sort of device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceKind {
    /// A loop device; `dio` is its direct-I/O mode (`loop/dio`).
    Loop {
        backing_file: Option<String>,
        dio: Option<bool>,
    },
    Nvme,
    /// A disk under the SCSI `sd` driver (SAS, SATA, array LUN, USB, virtio-scsi).
    Scsi,
    /// virtio-blk (`vda`).
    Virtio,
    /// Xen blkfront (`xvda`).
    Xen,
    DeviceMapper,
    Md,
    Zram,
    Other {
        driver: Option<String>,
    },
}

impl DeviceKind {
    /// Short name for output and JSON.
    pub fn label(&self) -> &'static str {
        match self {
            DeviceKind::Loop { .. } => "loop",
            DeviceKind::Nvme => "nvme",
            DeviceKind::Scsi => "scsi",
            DeviceKind::Virtio => "virtio",
            DeviceKind::Xen => "xen",
            DeviceKind::DeviceMapper => "dm",
            DeviceKind::Md => "md",
            DeviceKind::Zram => "zram",
            DeviceKind::Other { .. } => "other",
        }
    }
}

/// Identifies whole disk `disk` under `<sysfs>/block/`.
pub fn device_kind(sysfs: &Path, disk: &str) -> DeviceKind {
    let base = sysfs.join("block").join(disk);
    let driver = std::fs::read_link(base.join("device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|s| s.to_string_lossy().into_owned()));
    if disk.starts_with("loop") {
        return DeviceKind::Loop {
            backing_file: read_trim(&base.join("loop/backing_file")),
            dio: read_trim(&base.join("loop/dio")).map(|s| s == "1"),
        };
    }
    if disk.starts_with("nvme") {
        return DeviceKind::Nvme;
    }
    if base.join("device/scsi_disk").exists() || driver.as_deref() == Some("sd") {
        return DeviceKind::Scsi;
    }
    match driver.as_deref() {
        Some("virtio_blk") => return DeviceKind::Virtio,
        Some("vbd") => return DeviceKind::Xen,
        _ => {}
    }
    if disk.starts_with("dm-") {
        DeviceKind::DeviceMapper
    } else if disk.starts_with("md") {
        DeviceKind::Md
    } else if disk.starts_with("zram") {
        DeviceKind::Zram
    } else if disk.starts_with("vd") {
        DeviceKind::Virtio
    } else if disk.starts_with("xvd") {
        DeviceKind::Xen
    } else {
        DeviceKind::Other { driver }
    }
}

/// Whether a disk is virtual hardware: virtio, Xen, or a SCSI disk whose vendor/model
/// names a hypervisor (QEMU, VMware, VirtualBox, Hyper-V).
pub fn is_virtual(kind: &DeviceKind, vendor: Option<&str>, model: Option<&str>) -> bool {
    match kind {
        DeviceKind::Virtio | DeviceKind::Xen => true,
        DeviceKind::Scsi | DeviceKind::Other { .. } => {
            let id = format!("{} {}", vendor.unwrap_or(""), model.unwrap_or("")).to_lowercase();
            ["qemu", "vmware", "vbox", "virtual", "msft"]
                .iter()
                .any(|w| id.contains(w))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_a_fixture_tree() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        let mk = |name: &str, driver: Option<&str>| {
            let b = sys.join("block").join(name);
            std::fs::create_dir_all(b.join("device")).unwrap();
            if let Some(drv) = driver {
                let target = sys.join("bus/drivers").join(drv);
                std::fs::create_dir_all(&target).unwrap();
                std::os::unix::fs::symlink(&target, b.join("device/driver")).unwrap();
            }
            b
        };
        mk("vdb", Some("virtio_blk"));
        let sda = mk("sda", Some("sd"));
        std::fs::create_dir_all(sda.join("device/scsi_disk/0:0:0:0")).unwrap();
        mk("nvme0n1", None);
        let lo = mk("loop3", None);
        std::fs::create_dir_all(lo.join("loop")).unwrap();
        std::fs::write(lo.join("loop/backing_file"), "/var/tmp/x.img\n").unwrap();
        std::fs::write(lo.join("loop/dio"), "0\n").unwrap();
        mk("weird0", Some("mydrv"));
        assert_eq!(device_kind(sys, "vdb"), DeviceKind::Virtio);
        assert_eq!(device_kind(sys, "sda"), DeviceKind::Scsi);
        assert_eq!(device_kind(sys, "nvme0n1"), DeviceKind::Nvme);
        assert_eq!(
            device_kind(sys, "loop3"),
            DeviceKind::Loop {
                backing_file: Some("/var/tmp/x.img".into()),
                dio: Some(false)
            }
        );
        assert_eq!(
            device_kind(sys, "weird0"),
            DeviceKind::Other {
                driver: Some("mydrv".into())
            }
        );
        assert!(is_virtual(&DeviceKind::Virtio, None, None));
        assert!(is_virtual(
            &DeviceKind::Scsi,
            Some("QEMU"),
            Some("QEMU HARDDISK")
        ));
        assert!(!is_virtual(
            &DeviceKind::Scsi,
            Some("ATA"),
            Some("ST4000NM0035")
        ));
    }
}
