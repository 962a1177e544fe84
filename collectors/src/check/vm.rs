//! `vm.dirty_*`: how much buffered writing the kernel lets pile up in memory, and for
//! how long, before it writes back. A broker with a periodic sync, and any buffered-write
//! benchmark, is shaped by these. See the kernel's Documentation/admin-guide/sysctl/vm.rst.
//!
//! Units as the kernel keeps them: `*_ratio` percent of dirtyable memory, `*_bytes`
//! bytes (0 = use the ratio), `*_centisecs` hundredths of a second; meminfo in KiB.

use std::path::Path;

use super::read_trim;

/// The six `vm.dirty_*` settings (`None` when the file is missing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirtySettings {
    pub dirty_ratio: Option<u64>,
    pub dirty_background_ratio: Option<u64>,
    pub dirty_bytes: Option<u64>,
    pub dirty_background_bytes: Option<u64>,
    pub dirty_expire_centisecs: Option<u64>,
    pub dirty_writeback_centisecs: Option<u64>,
}

/// Names as `sysctl` prints them, with the value, in a fixed order.
impl DirtySettings {
    pub fn entries(&self) -> [(&'static str, Option<u64>); 6] {
        [
            ("dirty_ratio", self.dirty_ratio),
            ("dirty_background_ratio", self.dirty_background_ratio),
            ("dirty_bytes", self.dirty_bytes),
            ("dirty_background_bytes", self.dirty_background_bytes),
            ("dirty_expire_centisecs", self.dirty_expire_centisecs),
            ("dirty_writeback_centisecs", self.dirty_writeback_centisecs),
        ]
    }
}

/// Reads `<procfs>/sys/vm/dirty_*`.
pub fn read_dirty_settings(procfs: &Path) -> DirtySettings {
    let vm = procfs.join("sys/vm");
    let r = |n: &str| read_trim(&vm.join(n)).and_then(|s| s.parse().ok());
    DirtySettings {
        dirty_ratio: r("dirty_ratio"),
        dirty_background_ratio: r("dirty_background_ratio"),
        dirty_bytes: r("dirty_bytes"),
        dirty_background_bytes: r("dirty_background_bytes"),
        dirty_expire_centisecs: r("dirty_expire_centisecs"),
        dirty_writeback_centisecs: r("dirty_writeback_centisecs"),
    }
}

/// Dirty memory now, and roughly what the ratios apply to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirtyMemory {
    pub dirty_kib: u64,
    pub writeback_kib: u64,
    /// MemFree + Active(file) + Inactive(file): close to the kernel's
    /// `global_dirtyable_memory()` (which also subtracts reserves).
    pub dirtyable_kib: u64,
}

/// Parses `/proc/meminfo` text.
fn parse_dirty_memory(text: &str) -> DirtyMemory {
    let mut m = DirtyMemory::default();
    let mut free = 0;
    let mut file = 0;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v: u64 = v
            .split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        match k {
            "Dirty" => m.dirty_kib = v,
            "Writeback" => m.writeback_kib = v,
            "MemFree" => free = v,
            "Active(file)" | "Inactive(file)" => file += v,
            _ => {}
        }
    }
    m.dirtyable_kib = free + file;
    m
}

/// Reads `<procfs>/meminfo`.
pub fn read_dirty_memory(procfs: &Path) -> Option<DirtyMemory> {
    std::fs::read_to_string(procfs.join("meminfo"))
        .ok()
        .map(|t| parse_dirty_memory(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_settings_and_memory_from_a_fixture_procfs() {
        let d = tempfile::tempdir().unwrap();
        let vm = d.path().join("sys/vm");
        std::fs::create_dir_all(&vm).unwrap();
        for (k, v) in [
            ("dirty_ratio", "20\n"),
            ("dirty_background_ratio", "10\n"),
            ("dirty_bytes", "0\n"),
            ("dirty_background_bytes", "0\n"),
            ("dirty_expire_centisecs", "3000\n"),
        ] {
            std::fs::write(vm.join(k), v).unwrap();
        }
        let s = read_dirty_settings(d.path());
        assert_eq!(s.dirty_ratio, Some(20));
        assert_eq!(s.dirty_expire_centisecs, Some(3000));
        assert_eq!(s.dirty_writeback_centisecs, None);
        assert_eq!(s.entries()[1], ("dirty_background_ratio", Some(10)));

        std::fs::write(
            d.path().join("meminfo"),
            "MemTotal: 100 kB\nMemFree:  1000 kB\nActive(file):  300 kB\n\
             Inactive(file): 200 kB\nDirty:  42 kB\nWriteback: 7 kB\n",
        )
        .unwrap();
        let m = read_dirty_memory(d.path()).unwrap();
        assert_eq!(
            m,
            DirtyMemory {
                dirty_kib: 42,
                writeback_kib: 7,
                dirtyable_kib: 1500
            }
        );
    }

    #[test]
    fn this_machine_has_the_settings() {
        let s = read_dirty_settings(Path::new("/proc"));
        assert!(s.dirty_ratio.is_some() && s.dirty_expire_centisecs.is_some());
    }
}
