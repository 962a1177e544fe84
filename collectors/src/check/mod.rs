//! Facts `diskpulse check` gathers before a benchmark: what the kernel and the devices say
//! about write caches, what mount options and `vm.dirty_*` settings do to durability, who
//! else is doing I/O, and what a flush really costs on this stack.
//!
//! This module only reads and measures; judging the facts (PASS/WARN/FAIL and the advice)
//! is the CLI's job (`src/check/`). Every reader takes `sysfs`/`procfs` roots or plain
//! buffers, so tests feed fixtures: there are no NVMe or SCSI disks on our machines, so
//! their decoding is tested against fixture bytes and strings taken from the specs and
//! the kernel's `sd.c`.
//!
//! - [`mountinfo`]: which mount options (of the one mount table, [`crate::mounts`]) drop
//!   barriers or make a mount synchronous.
//! - [`nvme`]: Identify Controller (VWC) and Get Features 06h (Volatile Write Cache)
//!   through `NVME_IOCTL_ADMIN_CMD`.
//! - [`scsi`]: `cache_type` of SCSI disks (`/sys/class/scsi_disk/*/cache_type`) and of
//!   virtio-blk disks.
//! - [`kind`]: what sort of device a name is (loop, NVMe, SCSI, virtio, ...).
//! - [`vm`]: `vm.dirty_*` and the dirty memory right now.
//! - [`procio`]: `/proc/PID/io` snapshots and the devices a process has files open on.
//! - [`flush`]: the empirical tests: 4 KiB O_DIRECT writes plain, with O_DSYNC, and
//!   buffered write + fdatasync, each with a latency histogram (timed by
//!   [`crate::durable`], the loop `diskpulse fsync` uses).
//!
//! Whether a raw device may be written is decided by the one write gate, [`crate::gate`].

pub mod flush;
pub mod kind;
pub mod mountinfo;
pub mod nvme;
pub mod procio;
pub mod scsi;
pub mod vm;

pub(crate) use crate::sysfs::read_trim;
