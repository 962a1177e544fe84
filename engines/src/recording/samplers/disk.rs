//! The diskstats sampler: `/proc/diskstats` or per-device sysfs `stat` files, every
//! interval, into `diskstats.csv.gz` (format in `super`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use collectors::clock::Clock;
use collectors::devices::DevNum;
use collectors::diskstats::{self, DiskCounters, DiskstatsReader, MAX_FIELDS};
use collectors::periodic;
use collectors::sysfs::BlockSysfs;

pub use super::disk_source::DiskSource;
use super::loopwatch::{Change, LoopWatch};
use super::SamplerThread;
use crate::recording::envelopes::EnvelopeFeed;
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;
use format::csv::put_u64;
use format::events::{self as ev, Body};

/// Which devices the diskstats sampler records.
#[derive(Debug, Clone)]
pub enum DeviceFilter {
    /// Every device in `/proc/diskstats`, including ones that appear mid-run.
    All,
    /// These (major, minor) numbers.
    Only(Vec<(u32, u32)>),
}

struct Tracked {
    /// Its index in `DiskSampler::tracked` (the envelopes' device number).
    idx: u32,
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
    /// The sysfs stat file (sysfs source only).
    stat: Option<File>,
    last_reopen_ns: u64,
    /// Loop devices bound at the start: whether they are still bound ([`LoopWatch`]).
    loop_watch: Option<LoopWatch>,
}

impl Tracked {
    fn new(idx: usize, major: u32, minor: u32, name: &[u8]) -> Tracked {
        Tracked {
            idx: idx as u32,
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
            stat: None,
            last_reopen_ns: 0,
            loop_watch: None,
        }
    }
}

/// Header of `diskstats.csv.gz` (its columns and reader: [`format::diskstats`]).
pub fn diskstats_header() -> String {
    format::diskstats::header()
}

/// Formats one row, and hands it to the envelopes (`recording::envelopes`).
fn put_disk_row(out: &mut Rows, t_ns: u64, d: &Tracked, c: &DiskCounters) {
    if let Some(e) = out.env.as_deref_mut() {
        e.push(d.idx, t_ns, c);
    }
    let buf = &mut *out.buf;
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

/// Where a written row goes: the file's buffer and the envelope feed.
struct Rows<'a> {
    buf: &'a mut Vec<u8>,
    env: Option<&'a mut EnvelopeFeed>,
}

const KEYFRAME_NS: u64 = 1_000_000_000;

/// Records one observation of a device: writes its row if a counter changed (with the
/// unwritten sample before it) or a second has passed, and notes a device that is back.
#[inline]
fn observe(d: &mut Tracked, t: u64, c: DiskCounters, out: &mut Rows, events: &EventLog) {
    d.seen_this_sample = true;
    if d.present && c == d.last && t - d.last_written_t < KEYFRAME_NS {
        d.pending = true;
        d.last_t = t;
        return;
    }
    if d.ever_seen && !d.present {
        events.event_at(
            t,
            Body::DeviceBack(ev::DeviceBack {
                device: String::from_utf8_lossy(&d.name).into_owned(),
            }),
        );
    }
    if d.pending {
        let (lt, lc) = (d.last_t, d.last);
        put_disk_row(out, lt, d, &lc);
    }
    put_disk_row(out, t, d, &c);
    d.last = c;
    d.last_t = t;
    d.last_written_t = t;
    d.pending = false;
    d.present = true;
    d.ever_seen = true;
}

/// Records that a device present before is gone (its last sample is written first);
/// a detached loop device says so and which file it was bound to.
fn gone(d: &mut Tracked, t: u64, out: &mut Rows, events: &EventLog) {
    d.present = false;
    if d.pending {
        let (lt, lc) = (d.last_t, d.last);
        put_disk_row(out, lt, d, &lc);
        d.pending = false;
    }
    let why = d
        .loop_watch
        .as_ref()
        .filter(|w| !w.bound)
        .map(|w| format!("loop device detached (it was bound to {})", w.backing));
    events.event_at(
        t,
        Body::DeviceGone(ev::DeviceGone {
            device: String::from_utf8_lossy(&d.name).into_owned(),
            why,
        }),
    );
}

/// Whether a device's rows stop: a loop device no longer bound to its file.
fn detached(d: &Tracked) -> bool {
    d.loop_watch.as_ref().is_some_and(|w| !w.bound)
}

/// Opens a device's sysfs stat file if the device there still has number `major:minor`.
fn open_stat(sysfs: &Path, d: &Tracked) -> Option<File> {
    let num = DevNum {
        major: d.major,
        minor: d.minor,
    };
    BlockSysfs::new(sysfs).open_stat(std::str::from_utf8(&d.name).ok()?, num)
}

enum Reader {
    Procfs(DiskstatsReader),
    Sysfs { root: PathBuf, buf: Vec<u8> },
}

/// The diskstats sampler: one source, one set of tracked devices, one sink.
pub struct DiskSampler {
    reader: Reader,
    filter: DeviceFilter,
    tracked: Vec<Tracked>,
    sink: ChunkSink,
    /// The envelopes of the rows written (`envelopes.csv.gz` beside the file).
    env: Option<EnvelopeFeed>,
    events: EventLog,
    clock: Clock,
    read_errors: u64,
    samples: u64,
    /// `record --listen`: the live /metrics state, fed from these very samples.
    live: Option<crate::live::Tap>,
    /// `record --trigger`: fed these very samples too.
    triggers: Option<crate::recording::chunks::TriggerFeed>,
}

impl DiskSampler {
    pub fn new(
        source: DiskSource,
        filter: DeviceFilter,
        names: &[(u32, u32, String)],
        out: &Path,
        events: EventLog,
    ) -> anyhow::Result<DiskSampler> {
        Self::new_chunked(source, filter, names, out, events, None)
    }

    /// [`DiskSampler::new`], the file and envelopes.csv.gz cut into chunks by `flight`
    /// (`record --chunk`).
    pub(crate) fn new_chunked(
        source: DiskSource,
        filter: DeviceFilter,
        names: &[(u32, u32, String)],
        out: &Path,
        events: EventLog,
        flight: Option<&std::sync::Arc<crate::recording::chunks::Flight>>,
    ) -> anyhow::Result<DiskSampler> {
        let sink = match flight {
            Some(f) => ChunkSink::create_rotating(
                out,
                &diskstats_header(),
                Some(crate::recording::writer::GZIP_LEVEL),
                f.rotate(),
            )?,
            None => ChunkSink::create(out, &diskstats_header(), true)?,
        };
        // envelopes.csv.gz is cut by the same rules (its own chunks).
        let env = EnvelopeFeed::with_sink(crate::recording::chunks::Flight::sink(
            flight,
            out.parent().unwrap_or(Path::new(".")),
            format::envelopes::FILE,
            format::envelopes::HEADER,
            Some(crate::recording::writer::GZIP_LEVEL),
        )?)?;
        Self::with_sink(source, filter, names, sink, Some(env), events)
    }

    /// A sampler writing its rows (the `diskstats.csv.gz` rows, no header) into `sink`,
    /// with or without envelopes: the agent's, whose sink is a channel to the wire.
    pub(crate) fn with_sink(
        source: DiskSource,
        filter: DeviceFilter,
        names: &[(u32, u32, String)],
        sink: ChunkSink,
        mut env: Option<EnvelopeFeed>,
        events: EventLog,
    ) -> anyhow::Result<DiskSampler> {
        let mut tracked: Vec<Tracked> = names
            .iter()
            .enumerate()
            .map(|(i, (ma, mi, n))| Tracked::new(i, *ma, *mi, n.as_bytes()))
            .collect();
        // Where to watch loop devices' binding: the sysfs of the source, or the real one
        // beside the real /proc (a fake /proc in tests has no sysfs to match).
        let sysfs = match &source {
            DiskSource::Sysfs(root) => Some(root.clone()),
            DiskSource::Procfs(p) if p == Path::new("/proc") => Some(PathBuf::from("/sys")),
            DiskSource::Procfs(_) => None,
        };
        if let Some(sys) = &sysfs {
            for d in tracked.iter_mut() {
                d.loop_watch = std::str::from_utf8(&d.name)
                    .ok()
                    .and_then(|n| LoopWatch::for_device(sys, n));
            }
        }
        let reader = match source {
            DiskSource::Procfs(p) => Reader::Procfs(DiskstatsReader::open(&p)?),
            DiskSource::Sysfs(root) => {
                if matches!(filter, DeviceFilter::All) {
                    anyhow::bail!("sysfs stat files need a device list");
                }
                for d in tracked.iter_mut() {
                    d.stat = open_stat(&root, d);
                }
                Reader::Sysfs {
                    root,
                    buf: vec![0u8; 1024],
                }
            }
        };
        if let Some(env) = env.as_mut() {
            for d in &tracked {
                env.device(d.idx, &d.name);
            }
        }
        let clock = events.clock();
        Ok(DiskSampler {
            reader,
            filter,
            tracked,
            sink,
            env,
            events,
            clock,
            read_errors: 0,
            samples: 0,
            live: None,
            triggers: None,
        })
    }

    /// Feeds every sample to `tap` too (`record --listen`).
    pub(crate) fn set_live(&mut self, tap: crate::live::Tap) {
        self.live = Some(tap);
    }

    /// Feeds every sample to the triggers too (`record --trigger`).
    pub(crate) fn set_triggers(&mut self, feed: crate::recording::chunks::TriggerFeed) {
        self.triggers = Some(feed);
    }

    /// Takes one sample: read, stamp, parse, write changed rows. Allocates nothing in the
    /// steady state.
    pub fn sample(&mut self) {
        let now = self.clock.now_ns();
        for d in self.tracked.iter_mut() {
            d.seen_this_sample = false;
            if let Some(Change::Attached) = d.loop_watch.as_mut().and_then(|w| w.check(now)) {
                self.events.event_at(
                    now,
                    Body::LoopAttached(ev::LoopAttached {
                        device: String::from_utf8_lossy(&d.name).into_owned(),
                        backing_file: d.loop_watch.as_ref().map(|w| w.backing.clone()),
                    }),
                );
            }
        }
        let t = match &mut self.reader {
            Reader::Procfs(r) => {
                let t0 = self.clock.now_ns();
                let data = match r.read() {
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
                let first = self.samples == 0;
                for raw in data.split(|&b| b == b'\n') {
                    let Some((major, minor, name, rest)) = diskstats::parse_head(raw) else {
                        continue;
                    };
                    let pos = self
                        .tracked
                        .iter()
                        .position(|d| d.major == major && d.minor == minor);
                    if pos.is_none() && !matches!(self.filter, DeviceFilter::All) {
                        continue;
                    }
                    let Some(c) = diskstats::parse_counters(rest) else {
                        continue;
                    };
                    if pos.is_some_and(|i| detached(&self.tracked[i])) {
                        continue;
                    }
                    let idx = match pos {
                        Some(i) => i,
                        None => {
                            // A device that appeared mid-run (rare: allocation is fine here).
                            let i = self.tracked.len();
                            self.tracked.push(Tracked::new(i, major, minor, name));
                            if let Some(e) = self.env.as_mut() {
                                e.device(i as u32, name);
                            }
                            if !first {
                                self.events.event_at(
                                    t,
                                    Body::DeviceAppeared(ev::DeviceAppeared {
                                        device: String::from_utf8_lossy(name).into_owned(),
                                        major,
                                        minor,
                                    }),
                                );
                            }
                            self.tracked.len() - 1
                        }
                    };
                    let mut out = Rows {
                        buf: self.sink.buf(),
                        env: self.env.as_mut(),
                    };
                    observe(&mut self.tracked[idx], t, c, &mut out, &self.events);
                    if let Some(l) = self.live.as_mut() {
                        l.observe(idx, name, t, &c);
                    }
                    if let Some(tr) = self.triggers.as_mut() {
                        tr.observe(idx, name, t, &c);
                    }
                }
                t
            }
            Reader::Sysfs { root, buf } => {
                let mut t_last = 0;
                for (idx, d) in self.tracked.iter_mut().enumerate() {
                    if detached(d) {
                        continue;
                    }
                    if d.stat.is_none() {
                        // Gone: look for it again once a second (opening allocates a path).
                        let now = self.clock.now_ns();
                        if now.saturating_sub(d.last_reopen_ns) < KEYFRAME_NS {
                            continue;
                        }
                        d.last_reopen_ns = now;
                        d.stat = open_stat(root, d);
                        if d.stat.is_none() {
                            continue;
                        }
                    }
                    let t0 = self.clock.now_ns();
                    let r = d.stat.as_ref().map(|f| f.read_at(buf, 0));
                    let t1 = self.clock.now_ns();
                    let t = t0 + (t1 - t0) / 2;
                    t_last = t;
                    match r {
                        Some(Ok(n)) => match diskstats::parse_counters(&buf[..n]) {
                            Some(c) => {
                                let mut out = Rows {
                                    buf: self.sink.buf(),
                                    env: self.env.as_mut(),
                                };
                                observe(d, t, c, &mut out, &self.events);
                                if let Some(l) = self.live.as_mut() {
                                    l.observe(idx, &d.name, t, &c);
                                }
                                if let Some(tr) = self.triggers.as_mut() {
                                    tr.observe(idx, &d.name, t, &c);
                                }
                            }
                            None => d.stat = None,
                        },
                        // ENODEV once the device is removed.
                        _ => d.stat = None,
                    }
                }
                if t_last == 0 {
                    self.clock.now_ns()
                } else {
                    t_last
                }
            }
        };
        self.samples += 1;
        for d in self.tracked.iter_mut() {
            if d.present && !d.seen_this_sample {
                let mut out = Rows {
                    buf: self.sink.buf(),
                    env: self.env.as_mut(),
                };
                gone(d, t, &mut out, &self.events);
            }
        }
        self.sink.row_done(t);
        if let Some(l) = self.live.as_mut() {
            l.sample_done(t);
        }
        if let Some(e) = self.env.as_mut() {
            e.done(t);
        }
    }

    /// Writes the last unwritten samples and closes the file.
    pub fn finish(mut self) -> anyhow::Result<u64> {
        for d in self.tracked.iter_mut() {
            if d.pending {
                let (lt, lc) = (d.last_t, d.last);
                let mut out = Rows {
                    buf: self.sink.buf(),
                    env: self.env.as_mut(),
                };
                put_disk_row(&mut out, lt, d, &lc);
                d.pending = false;
            }
        }
        if let Some(e) = self.env.take() {
            e.finish()?;
        }
        self.sink.finish()
    }
}

/// Starts the diskstats sampler thread.
pub(crate) fn spawn_disk(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn rows(path: &Path) -> Vec<String> {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
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
            DiskSource::Procfs(d.path().to_path_buf()),
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
            DiskSource::Procfs(d.path().to_path_buf()),
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
        let mut s = DiskSampler::new(
            DiskSource::Procfs(d.path().to_path_buf()),
            DeviceFilter::All,
            &[],
            &out,
            ev,
        )
        .unwrap();
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

#[cfg(test)]
mod sysfs_tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn sysfs_source_reads_stat_files_and_sees_a_device_go_and_come_back() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("class/block/loop1");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("dev"), "7:1\n").unwrap();
        let stat = |s: &str| std::fs::write(dev.join("stat"), s).unwrap();
        stat("       5        0       40        0        6        0       48        0        0        0        0        0        0        0        0        0        0\n");
        let names = [(7, 1, "loop1".to_string())];
        let filter = DeviceFilter::Only(vec![(7, 1)]);
        let src = DiskSource::auto(Path::new("/proc"), d.path(), &filter, &names);
        assert_eq!(src, DiskSource::Sysfs(d.path().to_path_buf()));
        let evp = d.path().join("events.jsonl");
        let ev = EventLog::create(&evp, Clock::start()).unwrap();
        let out = d.path().join("ds.csv.gz");
        let mut s = DiskSampler::new(src, filter, &names, &out, ev).unwrap();
        s.sample();
        stat(""); // what a removed device's file gives
        s.sample();
        stat("1 0 8 0 0 0 0 0 0 0 0\n"); // back, counters reset, 11 fields
        s.sample(); // too soon to look again
        std::thread::sleep(std::time::Duration::from_millis(1100));
        s.sample();
        s.finish().unwrap();
        let events = std::fs::read_to_string(&evp).unwrap();
        assert!(events.contains("\"device_gone\""), "{events}");
        assert!(events.contains("\"device_back\""), "{events}");
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(File::open(&out).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(
            rows[0].contains(",loop1,7,1,5,0,40,0,6,0,48,"),
            "{}",
            rows[0]
        );
        assert!(
            rows[1].ends_with(",loop1,7,1,1,0,8,0,0,0,0,0,0,0,0,,,,,,")
                || rows[1].contains(",loop1,7,1,1,0,8,"),
            "{}",
            rows[1]
        );
    }
}
