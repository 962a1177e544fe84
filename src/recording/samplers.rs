//! The sampler threads of a recording: diskstats, meminfo, cpu.
//!
//! ## `diskstats.csv.gz`
//! `t_ns,device,major,minor,` then the 17 raw counters of [`collectors::diskstats`] in
//! kernel order (empty where the kernel prints fewer). Gzip-compressed, readable with
//! `zcat`. A device's row is written when any counter changed since its previous
//! sample, together with that previous sample if it was not written (so every delta
//! spans exactly one sampling interval), and at least once a second. An idle device
//! therefore costs one row a second, and the deltas of consecutive rows are always
//! exact.
//!
//! ## `meminfo.csv`, `cpu.csv`
//! `t_ns` then [`collectors::procstat::MEM_COLUMNS`] / [`collectors::procstat::CPU_COLUMNS`],
//! every sample.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use collectors::clock::Clock;
use collectors::diskstats::{self, DiskCounters, DiskstatsReader, FIELD_NAMES, MAX_FIELDS};
use collectors::periodic::{self, LoopStats};
use collectors::procstat::{self, ProcFile};

use super::writer::{put_u64, ChunkSink};
use super::EventLog;

/// Which devices the diskstats sampler records.
#[derive(Debug, Clone)]
pub enum DeviceFilter {
    /// Every device in `/proc/diskstats`, including ones that appear mid-run.
    All,
    /// These (major, minor) numbers.
    Only(Vec<(u32, u32)>),
}

struct Tracked {
    major: u32,
    minor: u32,
    name: Vec<u8>,
    last: DiskCounters,
    last_t: u64,
    last_written_t: u64,
    pending: bool,
    present: bool,
    seen_this_sample: bool,
    ever_seen: bool,
}

impl Tracked {
    fn new(major: u32, minor: u32, name: &[u8]) -> Tracked {
        Tracked {
            major,
            minor,
            name: name.to_vec(),
            last: DiskCounters::default(),
            last_t: 0,
            last_written_t: 0,
            pending: false,
            present: false,
            seen_this_sample: false,
            ever_seen: false,
        }
    }
}

/// Header of `diskstats.csv.gz`.
pub fn diskstats_header() -> String {
    let mut h = String::from("t_ns,device,major,minor");
    for f in FIELD_NAMES {
        h.push(',');
        h.push_str(f);
    }
    h
}

fn put_disk_row(buf: &mut Vec<u8>, t_ns: u64, d: &Tracked, c: &DiskCounters) {
    put_u64(buf, t_ns);
    buf.push(b',');
    buf.extend_from_slice(&d.name);
    buf.push(b',');
    put_u64(buf, d.major as u64);
    buf.push(b',');
    put_u64(buf, d.minor as u64);
    for i in 0..MAX_FIELDS {
        buf.push(b',');
        if i < c.nfields as usize {
            put_u64(buf, c.f[i]);
        }
    }
    buf.push(b'\n');
}

const KEYFRAME_NS: u64 = 1_000_000_000;

/// The diskstats sampler: one reader, one set of tracked devices, one sink.
pub struct DiskSampler {
    reader: DiskstatsReader,
    filter: DeviceFilter,
    tracked: Vec<Tracked>,
    sink: ChunkSink,
    events: EventLog,
    clock: Clock,
    read_errors: u64,
    samples: u64,
}

impl DiskSampler {
    pub fn new(
        procfs: &Path,
        filter: DeviceFilter,
        names: &[(u32, u32, String)],
        out: &Path,
        events: EventLog,
    ) -> anyhow::Result<DiskSampler> {
        let reader = DiskstatsReader::open(procfs)?;
        let tracked = names
            .iter()
            .map(|(ma, mi, n)| Tracked::new(*ma, *mi, n.as_bytes()))
            .collect();
        let sink = ChunkSink::create(out, &diskstats_header(), true)?;
        let clock = events.clock();
        Ok(DiskSampler {
            reader,
            filter,
            tracked,
            sink,
            events,
            clock,
            read_errors: 0,
            samples: 0,
        })
    }

    /// Takes one sample: read, stamp, parse, write changed rows. Allocates nothing in the
    /// steady state.
    pub fn sample(&mut self) {
        let t0 = self.clock.now_ns();
        let data = match self.reader.read() {
            Ok(d) => d,
            Err(e) => {
                self.read_errors += 1;
                if self.read_errors == 1 {
                    self.events.error("diskstats", "read", &e.to_string());
                }
                return;
            }
        };
        let t1 = self.clock.now_ns();
        // The kernel fills the buffer during the read: stamp its middle.
        let t = t0 + (t1 - t0) / 2;
        for d in self.tracked.iter_mut() {
            d.seen_this_sample = false;
        }
        let tracked = &mut self.tracked;
        let sink = &mut self.sink;
        let filter = &self.filter;
        let events = &self.events;
        let first = self.samples == 0;
        for raw in data.split(|&b| b == b'\n') {
            let Some((major, minor, name, rest)) = diskstats::parse_head(raw) else {
                continue;
            };
            let pos = tracked
                .iter()
                .position(|d| d.major == major && d.minor == minor);
            if pos.is_none() && !matches!(filter, DeviceFilter::All) {
                continue;
            }
            let Some(c) = diskstats::parse_counters(rest) else {
                continue;
            };
            let idx = match pos {
                Some(i) => i,
                None => {
                    // A device that appeared mid-run (rare: allocation is fine here).
                    tracked.push(Tracked::new(major, minor, name));
                    if t > 0 && !first {
                        events.event_at(
                            t,
                            "device_appeared",
                            serde_json::json!({"device": String::from_utf8_lossy(name),
                                "major": major, "minor": minor}),
                        );
                    }
                    tracked.len() - 1
                }
            };
            let d = &mut tracked[idx];
            d.seen_this_sample = true;
            if d.present && c == d.last && t - d.last_written_t < KEYFRAME_NS {
                d.pending = true;
                d.last_t = t;
                continue;
            }
            if d.ever_seen && !d.present {
                events.event_at(
                    t,
                    "device_back",
                    serde_json::json!({"device": String::from_utf8_lossy(&d.name)}),
                );
            }
            let buf = sink.buf();
            if d.pending {
                let (lt, lc) = (d.last_t, d.last);
                put_disk_row(buf, lt, d, &lc);
            }
            put_disk_row(buf, t, d, &c);
            d.last = c;
            d.last_t = t;
            d.last_written_t = t;
            d.pending = false;
            d.present = true;
            d.ever_seen = true;
        }
        self.samples += 1;
        for d in self.tracked.iter_mut() {
            if d.present && !d.seen_this_sample {
                d.present = false;
                if d.pending {
                    let (lt, lc) = (d.last_t, d.last);
                    put_disk_row(self.sink.buf(), lt, d, &lc);
                    d.pending = false;
                }
                self.events.event_at(
                    t,
                    "device_gone",
                    serde_json::json!({"device": String::from_utf8_lossy(&d.name)}),
                );
            }
        }
        self.sink.row_done(t);
    }

    /// Writes the last unwritten samples and closes the file.
    pub fn finish(mut self) -> anyhow::Result<u64> {
        for d in self.tracked.iter_mut() {
            if d.pending {
                let (lt, lc) = (d.last_t, d.last);
                put_disk_row(self.sink.buf(), lt, d, &lc);
                d.pending = false;
            }
        }
        self.sink.finish()
    }
}

/// A running sampler thread.
pub struct SamplerThread {
    pub name: &'static str,
    pub file: &'static str,
    handle: JoinHandle<anyhow::Result<LoopStats>>,
}

impl SamplerThread {
    pub fn join(self) -> (&'static str, &'static str, anyhow::Result<LoopStats>) {
        let r = match self.handle.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("sampler {} panicked", self.name)),
        };
        (self.name, self.file, r)
    }
}

/// Starts the diskstats sampler thread.
pub fn spawn_disk(
    mut s: DiskSampler,
    interval_ns: u64,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<SamplerThread> {
    let clock = s.clock;
    let handle = std::thread::Builder::new()
        .name("diskstats".into())
        .spawn(move || {
            let _ = periodic::try_realtime();
            let stats = periodic::run(&clock, interval_ns, &stop, |_| {
                s.sample();
                true
            });
            s.finish()?;
            Ok(stats)
        })?;
    Ok(SamplerThread {
        name: "diskstats",
        file: "diskstats.csv.gz",
        handle,
    })
}

/// A small `/proc` file parsed into a fixed row of numbers.
pub struct ProcSource<const N: usize> {
    pub name: &'static str,
    /// Output file name in the run directory.
    pub file: &'static str,
    pub proc_path: std::path::PathBuf,
    pub columns: [&'static str; N],
    pub parse: fn(&[u8]) -> [u64; N],
}

/// Starts a sampler thread for a [`ProcSource`].
pub fn spawn_proc<const N: usize>(
    src: ProcSource<N>,
    out_dir: &Path,
    clock: Clock,
    interval_ns: u64,
    stop: Arc<AtomicBool>,
    events: EventLog,
) -> anyhow::Result<SamplerThread> {
    let ProcSource {
        name,
        file,
        proc_path,
        columns,
        parse,
    } = src;
    let proc_path = proc_path.as_path();
    let mut pf = ProcFile::open(proc_path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", proc_path.display()))?;
    let mut header = String::from("t_ns");
    for c in columns {
        header.push(',');
        header.push_str(c);
    }
    let mut sink = ChunkSink::create(&out_dir.join(file), &header, false)?;
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = periodic::try_realtime();
            let mut failed = false;
            let stats = periodic::run(&clock, interval_ns, &stop, |_| {
                let t0 = clock.now_ns();
                match pf.read() {
                    Ok(data) => {
                        let t1 = clock.now_ns();
                        let t = t0 + (t1 - t0) / 2;
                        let vals = parse(data);
                        let b = sink.buf();
                        put_u64(b, t);
                        for v in vals {
                            b.push(b',');
                            put_u64(b, v);
                        }
                        b.push(b'\n');
                        sink.row_done(t);
                    }
                    Err(e) if !failed => {
                        failed = true;
                        events.error(name, "read", &format!("{}: {e}", pf.path()));
                    }
                    Err(_) => {}
                }
                true
            });
            sink.finish()?;
            Ok(stats)
        })?;
    Ok(SamplerThread { name, file, handle })
}

/// meminfo parse adapter for [`spawn_proc`].
pub fn mem_row(b: &[u8]) -> [u64; 4] {
    procstat::parse_meminfo(b).values()
}

/// /proc/stat parse adapter for [`spawn_proc`].
pub fn cpu_row(b: &[u8]) -> [u64; 10] {
    procstat::parse_stat(b).values()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn rows(path: &Path) -> Vec<String> {
        let mut s = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        s.lines().skip(1).map(|l| l.to_string()).collect()
    }

    /// A fake /proc whose diskstats we rewrite between samples (same inode, so the held
    /// fd sees the new text, as with the real file).
    fn set(procfs: &Path, text: &str) {
        std::fs::write(procfs.join("diskstats"), text).unwrap();
    }

    const A: &str = "7 0 loop0 1 0 8 0 2 0 16 0 0 0 0 0 0 0 0 0 0\n";
    const B: &str = "7 1 loop1 5 0 40 0 6 0 48 0 0 0 0 0 0 0 0 0 0\n";
    const B2: &str = "7 1 loop1 9 0 72 0 6 0 48 0 0 0 0 0 0 0 0 0 0\n";
    const B_RESET: &str = "7 1 loop1 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn unchanged_samples_are_suppressed_and_the_one_before_a_change_kept() {
        let d = tempfile::tempdir().unwrap();
        set(d.path(), &format!("{A}{B}"));
        let ev = EventLog::create(&d.path().join("events.jsonl"), Clock::start()).unwrap();
        let out = d.path().join("ds.csv.gz");
        let names = [(7, 0, "loop0".to_string()), (7, 1, "loop1".to_string())];
        let mut s = DiskSampler::new(
            d.path(),
            DeviceFilter::Only(vec![(7, 0), (7, 1)]),
            &names,
            &out,
            ev,
        )
        .unwrap();
        s.sample(); // both written (first sight)
        s.sample(); // unchanged: nothing
        s.sample(); // unchanged: nothing
        set(d.path(), &format!("{A}{B2}"));
        s.sample(); // loop1 changed: its previous sample and this one
        s.finish().unwrap(); // loop0's last unwritten sample
        let r = rows(&out);
        let dev: Vec<&str> = r.iter().map(|l| l.split(',').nth(1).unwrap()).collect();
        assert_eq!(dev, ["loop0", "loop1", "loop1", "loop1", "loop0"], "{r:#?}");
        let f: Vec<&str> = r[2].split(',').collect();
        assert_eq!(f[4], "5", "the kept previous sample has the old counters");
        let f: Vec<&str> = r[3].split(',').collect();
        assert_eq!(f[4], "9");
        // Every field: 4 leading columns + 17 counters.
        assert_eq!(f.len(), 21);
        let t: Vec<u64> = r
            .iter()
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert!(t[2] < t[3] && t[1] < t[2]);
    }

    #[test]
    fn a_vanishing_device_is_an_event_and_its_return_too() {
        let d = tempfile::tempdir().unwrap();
        set(d.path(), &format!("{A}{B}"));
        let evp = d.path().join("events.jsonl");
        let ev = EventLog::create(&evp, Clock::start()).unwrap();
        let out = d.path().join("ds.csv.gz");
        let names = [(7, 0, "loop0".to_string()), (7, 1, "loop1".to_string())];
        let mut s = DiskSampler::new(
            d.path(),
            DeviceFilter::Only(vec![(7, 0), (7, 1)]),
            &names,
            &out,
            ev,
        )
        .unwrap();
        s.sample();
        set(d.path(), A);
        s.sample();
        s.sample();
        set(d.path(), &format!("{A}{B_RESET}"));
        s.sample();
        s.finish().unwrap();
        let events = std::fs::read_to_string(&evp).unwrap();
        assert!(
            events.contains("\"device_gone\"") && events.contains("loop1"),
            "{events}"
        );
        assert!(events.contains("\"device_back\""), "{events}");
        let r = rows(&out);
        let loop1: Vec<&String> = r.iter().filter(|l| l.contains(",loop1,")).collect();
        assert_eq!(loop1.len(), 2, "{r:#?}");
        assert!(
            loop1[1].contains(",1,0,8,"),
            "the re-added device's reset counters are recorded"
        );
    }

    #[test]
    fn all_mode_picks_up_a_device_that_appears_and_old_formats_leave_fields_empty() {
        let d = tempfile::tempdir().unwrap();
        // An old kernel: 14 columns (11 counters).
        set(d.path(), "8 0 sda 1 0 8 0 2 0 16 0 0 3 4\n");
        let evp = d.path().join("events.jsonl");
        let ev = EventLog::create(&evp, Clock::start()).unwrap();
        let out = d.path().join("ds.csv.gz");
        let mut s = DiskSampler::new(d.path(), DeviceFilter::All, &[], &out, ev).unwrap();
        s.sample();
        set(
            d.path(),
            "8 0 sda 1 0 8 0 2 0 16 0 0 3 4\n8 16 sdb 1 0 8 0 2 0 16 0 0 3 4 0 0 0 0\n",
        );
        s.sample();
        s.finish().unwrap();
        let r = rows(&out);
        let sda: Vec<&str> = r[0].split(',').collect();
        assert_eq!(sda.len(), 21);
        assert_eq!(sda[14], "4", "weighted_io_ms");
        assert!(sda[15..].iter().all(|x| x.is_empty()), "{sda:?}");
        assert!(r.iter().any(|l| l.contains(",sdb,8,16,")));
        let sdb = r.iter().find(|l| l.contains(",sdb,")).unwrap();
        let f: Vec<&str> = sdb.split(',').collect();
        assert_eq!(f[18], "0", "18-column kernel prints discard_ms");
        assert_eq!(f[19], "", "but no flushes");
        let events = std::fs::read_to_string(&evp).unwrap();
        assert!(
            events.contains("\"device_appeared\"") && events.contains("sdb"),
            "{events}"
        );
    }
}
