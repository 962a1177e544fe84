//! NVMe volatile write cache, asked of the controller itself through the admin
//! passthrough ioctl (`NVME_IOCTL_ADMIN_CMD`), the way `nvme get-feature -f 6` does,
//! without nvme-cli.
//!
//! Two admin commands (NVM Express Base Specification 2.0, 5.15 and 5.27):
//! - Identify Controller (opcode 06h, CNS 01h, 4096 bytes back): byte 525, VWC.
//!   Bit 0: a volatile write cache is present. Bits 2:1 (1.4+): whether Flush with NSID
//!   FFFFFFFFh is supported (00b not reported, 10b no, 11b yes).
//! - Get Features (opcode 0Ah), CDW10 = FID | SEL << 8, FID 06h = Volatile Write Cache,
//!   SEL 000b = current value. The value comes back in completion dword 0: bit 0, WCE.
//!
//! The kernel's sysfs `queue/write_cache` for an NVMe namespace says "write back" when
//! VWC is present, whatever WCE is; only Get Features tells whether someone disabled the
//! cache (`nvme set-feature -f 6 -v 0`), which makes every write wait for the flash like
//! the array LUN in the reference study whose cache was forcibly off.
//!
//! The ioctl returns 0, a negative errno, or a positive NVMe status: the completion's
//! status field shifted right by one (SC bits 7:0, SCT bits 10:8, More bit 13, DNR 14).
//! There is no NVMe device on our machines: encoding and decoding are tested on fixtures.

use std::os::unix::io::AsRawFd;
use std::path::Path;

/// `struct nvme_passthru_cmd` (alias `nvme_admin_cmd`) from `<linux/nvme_ioctl.h>`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PassthruCmd {
    pub opcode: u8,
    pub flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    /// Completion dword 0, filled in by the kernel.
    pub result: u32,
}

/// `_IOWR(type, nr, size)` on Linux (x86, arm, riscv): dir bits 31:30, size 29:16.
const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    (3u32 << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}

/// `NVME_IOCTL_ADMIN_CMD = _IOWR('N', 0x41, struct nvme_admin_cmd)` = 0xC0484E41.
pub(crate) const NVME_IOCTL_ADMIN_CMD: u32 = iowr(b'N', 0x41, std::mem::size_of::<PassthruCmd>());

const OPC_IDENTIFY: u8 = 0x06;
const OPC_GET_FEATURES: u8 = 0x0A;
/// Identify CNS 01h: the controller data structure.
const CNS_CONTROLLER: u32 = 0x01;
/// Feature Identifier 06h: Volatile Write Cache.
const FID_VOLATILE_WRITE_CACHE: u8 = 0x06;
/// Bytes an Identify returns.
const IDENTIFY_LEN: usize = 4096;
/// Offset of VWC in the Identify Controller data structure.
const IDENTIFY_VWC_OFFSET: usize = 525;

/// Get Features SEL: which value to return (1, default, and 2, saved, are not asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Select {
    Current = 0,
    #[cfg(test)]
    SupportedCapabilities = 3,
}

/// Get Features for `fid` (controller scope: NSID 0).
fn get_features_cmd(fid: u8, sel: Select) -> PassthruCmd {
    PassthruCmd {
        opcode: OPC_GET_FEATURES,
        cdw10: fid as u32 | (sel as u32) << 8,
        timeout_ms: 5000,
        ..Default::default()
    }
}

/// Identify Controller into a buffer at `addr` of [`IDENTIFY_LEN`] bytes.
fn identify_controller_cmd(addr: u64) -> PassthruCmd {
    PassthruCmd {
        opcode: OPC_IDENTIFY,
        addr,
        data_len: IDENTIFY_LEN as u32,
        cdw10: CNS_CONTROLLER,
        timeout_ms: 5000,
        ..Default::default()
    }
}

/// Whether Flush with NSID FFFFFFFFh (all namespaces) is supported (VWC bits 2:1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushAllNamespaces {
    NotReported,
    NotSupported,
    Supported,
    Reserved,
}

/// VWC from Identify Controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct VwcSupport {
    pub present: bool,
    flush_all_namespaces: FlushAllNamespaces,
}

/// Decodes VWC (byte 525) of an Identify Controller buffer; `None` if it is too short.
fn decode_identify_vwc(id: &[u8]) -> Option<VwcSupport> {
    let b = *id.get(IDENTIFY_VWC_OFFSET)?;
    Some(VwcSupport {
        present: b & 1 == 1,
        flush_all_namespaces: match (b >> 1) & 0b11 {
            0b00 => FlushAllNamespaces::NotReported,
            0b10 => FlushAllNamespaces::NotSupported,
            0b11 => FlushAllNamespaces::Supported,
            _ => FlushAllNamespaces::Reserved,
        },
    })
}

/// Model number (bytes 24..63, ASCII padded with spaces) of Identify Controller.
fn decode_identify_model(id: &[u8]) -> Option<String> {
    let mn = id.get(24..64)?;
    Some(String::from_utf8_lossy(mn).trim().to_string())
}

/// WCE (bit 0) from Get Features 06h's completion dword 0.
fn decode_vwc_feature(dw0: u32) -> bool {
    dw0 & 1 == 1
}

/// An NVMe completion status, as the ioctl returns it (status field >> 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Status Code Type (0 generic, 1 command specific, 2 media, 3 path, 7 vendor).
    sct: u8,
    /// Status Code.
    pub sc: u8,
    /// Do Not Retry.
    dnr: bool,
}

impl Status {
    fn from_ioctl(ret: i32) -> Status {
        let s = ret as u32;
        Status {
            sct: ((s >> 8) & 0x7) as u8,
            sc: (s & 0xff) as u8,
            dnr: s & 0x4000 != 0,
        }
    }

    /// Names of the statuses these two commands can give.
    pub fn describe(&self) -> &'static str {
        match (self.sct, self.sc) {
            (0, 0x01) => "Invalid Command Opcode",
            (0, 0x02) => "Invalid Field in Command",
            (0, 0x0b) => "Invalid Namespace or Format",
            (1, 0x0d) => "Feature Identifier Not Saveable",
            (1, 0x0e) => "Feature Not Changeable",
            (1, 0x0f) => "Feature Not Namespace Specific",
            _ => "see the NVMe status code tables",
        }
    }
}

/// Errors asking an NVMe device.
#[derive(Debug, thiserror::Error)]
pub enum NvmeError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("{what} on {path}: {source}")]
    Ioctl {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{what} on {path}: NVMe status SCT {sct:#x} SC {sc:#04x} ({desc})", sct = status.sct, sc = status.sc, desc = status.describe())]
    Status {
        what: &'static str,
        path: String,
        status: Status,
    },
}

/// What the controller says about its volatile write cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolatileWriteCache {
    /// Identify Controller VWC bit 0.
    pub present: bool,
    /// Get Features 06h WCE; `None` when no cache is present (nothing to ask).
    pub enabled: Option<bool>,
    pub model: Option<String>,
}

fn submit(
    fd: i32,
    cmd: &mut PassthruCmd,
    what: &'static str,
    path: &Path,
) -> Result<u32, NvmeError> {
    // SAFETY: cmd is a valid nvme_passthru_cmd; its addr, if any, points to a live buffer
    // of data_len bytes owned by the caller for the duration of the call.
    let ret = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, cmd as *mut PassthruCmd) };
    if ret < 0 {
        return Err(NvmeError::Ioctl {
            what,
            path: path.display().to_string(),
            source: std::io::Error::last_os_error(),
        });
    }
    if ret > 0 {
        return Err(NvmeError::Status {
            what,
            path: path.display().to_string(),
            status: Status::from_ioctl(ret),
        });
    }
    Ok(cmd.result)
}

/// Asks the controller behind `node` (`/dev/nvme0n1` or `/dev/nvme0`) for its volatile
/// write cache. Needs CAP_SYS_ADMIN.
pub fn query(node: &Path) -> Result<VolatileWriteCache, NvmeError> {
    let f = std::fs::File::open(node).map_err(|source| NvmeError::Open {
        path: node.display().to_string(),
        source,
    })?;
    let fd = f.as_raw_fd();
    let mut id = vec![0u8; IDENTIFY_LEN];
    let mut cmd = identify_controller_cmd(id.as_mut_ptr() as u64);
    submit(fd, &mut cmd, "Identify Controller", node)?;
    let vwc = decode_identify_vwc(&id).expect("buffer is IDENTIFY_LEN bytes");
    let model = decode_identify_model(&id);
    if !vwc.present {
        return Ok(VolatileWriteCache {
            present: false,
            enabled: None,
            model,
        });
    }
    let mut cmd = get_features_cmd(FID_VOLATILE_WRITE_CACHE, Select::Current);
    let dw0 = submit(fd, &mut cmd, "Get Features 06h", node)?;
    Ok(VolatileWriteCache {
        present: true,
        enabled: Some(decode_vwc_feature(dw0)),
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_and_ioctl_number_match_the_kernel_header() {
        assert_eq!(std::mem::size_of::<PassthruCmd>(), 72);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
        // Field offsets of nvme_passthru_cmd.
        let c = PassthruCmd::default();
        let base = &c as *const _ as usize;
        assert_eq!(&c.addr as *const _ as usize - base, 24);
        assert_eq!(&c.data_len as *const _ as usize - base, 36);
        assert_eq!(&c.cdw10 as *const _ as usize - base, 40);
        assert_eq!(&c.result as *const _ as usize - base, 68);
    }

    #[test]
    fn get_features_06h_current_is_encoded_like_nvme_cli() {
        // nvme get-feature /dev/nvme0 -f 6 --sel 0: opcode 0x0a, cdw10 0x00000006.
        let c = get_features_cmd(FID_VOLATILE_WRITE_CACHE, Select::Current);
        assert_eq!(c.opcode, 0x0a);
        assert_eq!(c.cdw10, 0x0000_0006);
        assert_eq!((c.nsid, c.addr, c.data_len), (0, 0, 0));
        // --sel 3 (supported capabilities): SEL sits in bits 10:8.
        assert_eq!(
            get_features_cmd(FID_VOLATILE_WRITE_CACHE, Select::SupportedCapabilities).cdw10,
            0x0000_0306
        );
        let i = identify_controller_cmd(0x1000);
        assert_eq!(
            (i.opcode, i.cdw10, i.data_len, i.addr),
            (0x06, 1, 4096, 0x1000)
        );
    }

    /// An Identify Controller buffer as a drive would return it.
    fn identify_fixture(vwc: u8, model: &str) -> Vec<u8> {
        let mut id = vec![0u8; IDENTIFY_LEN];
        id[0..2].copy_from_slice(&0x144du16.to_le_bytes()); // VID
        let mut mn = [b' '; 40];
        mn[..model.len()].copy_from_slice(model.as_bytes());
        id[24..64].copy_from_slice(&mn);
        id[IDENTIFY_VWC_OFFSET] = vwc;
        id
    }

    #[test]
    fn identify_vwc_is_decoded() {
        let id = identify_fixture(0x07, "SAMSUNG MZVL2512HCJQ-00B00");
        assert_eq!(
            decode_identify_vwc(&id),
            Some(VwcSupport {
                present: true,
                flush_all_namespaces: FlushAllNamespaces::Supported
            })
        );
        assert_eq!(
            decode_identify_model(&id).as_deref(),
            Some("SAMSUNG MZVL2512HCJQ-00B00")
        );
        // A data-center drive with power-loss protection: no volatile cache.
        let plp = decode_identify_vwc(&identify_fixture(0x00, "X")).unwrap();
        assert!(!plp.present);
        assert_eq!(plp.flush_all_namespaces, FlushAllNamespaces::NotReported);
        let v = decode_identify_vwc(&identify_fixture(0x05, "X")).unwrap();
        assert!(v.present);
        assert_eq!(v.flush_all_namespaces, FlushAllNamespaces::NotSupported);
        assert_eq!(decode_identify_vwc(&[0u8; 100]), None);
    }

    #[test]
    fn get_features_result_and_status_are_decoded() {
        assert!(decode_vwc_feature(0x0000_0001));
        assert!(!decode_vwc_feature(0x0000_0000));
        assert!(!decode_vwc_feature(0xffff_fffe));
        // Invalid Field in Command with DNR, as a controller without VWC answers 06h.
        let s = Status::from_ioctl(0x4002);
        assert_eq!((s.sct, s.sc, s.dnr), (0, 2, true));
        assert_eq!(s.describe(), "Invalid Field in Command");
        let e = NvmeError::Status {
            what: "Get Features 06h",
            path: "/dev/nvme0n1".into(),
            status: s,
        };
        assert_eq!(
            e.to_string(),
            "Get Features 06h on /dev/nvme0n1: NVMe status SCT 0x0 SC 0x02 (Invalid Field in Command)"
        );
    }

    #[test]
    fn a_non_nvme_device_gives_an_error_not_a_crash() {
        // /dev/null rejects the ioctl (ENOTTY); no NVMe device is needed to see that.
        let e = query(Path::new("/dev/null")).unwrap_err();
        assert!(
            e.to_string().contains("Identify Controller on /dev/null"),
            "{e}"
        );
    }
}
