//! `--trigger 'ack_p99_ms>50'` (issue 13 item 1): keep the window around a load window
//! whose ack p99 crosses a threshold.
//!
//! The load writes `RUN/load.csv` wherever it runs: in this process (`demo`, `load
//! --record`), as the child of `record -- diskpulse load ...` (through
//! `DISKPULSE_RUN_DIR`), or as a scenario phase's child. So the recorder does not ask
//! the load: a thread of its own tails load.csv ([`LoadWatch`]) every [`POLL`], reads
//! the whole rows appended since, and compares each row's `lat_p99_us` (÷ 1000: ms) with
//! every `ack_p99_ms` trigger. A row is written by the load's collector 300 ms (its
//! grace for late workers) to 400 ms after its window ends, so a firing is seen about
//! half a second after the window; the kept window does not care, it spans minutes.
//!
//! Which rows: `ROLE:ack_p99_ms>V` watches that load.csv role; `ack_p99_ms>V` the roles
//! whose latency ends in an ack or confirm ([`ACKED_ROLES`]: js-pub, kv-put, obj-put,
//! amqp-pub). A firing is a `trigger` event stamped at the window's start (`t_ns` of the
//! row: the operations that completed in `[t_ns, t_ns + window_ns)`) with `trigger`,
//! `role`, `value` (the p99 in ms), `window_ns`, `seen_t_ns` (when the recorder read the
//! row), `keep_from_t_ns`, `keep_to_t_ns`; it keeps `--trigger-window` before the window
//! and after its end. As the disk triggers, the same trigger on the same role fires again
//! only after its kept window has passed; a row still above meanwhile extends the window.
//!
//! A load.csv that shrinks or is replaced (another phase's load starting over) is read
//! again from its start; rows already seen are not re-fired because their windows are
//! quiet. A line that is not whole yet waits for its newline.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::chunks::{Flight, Measure, Trigger};
use super::EventLog;
use format::events::{self as ev, Body};

/// How often load.csv is read.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The load.csv roles whose latency ends in a broker's ack or confirm: what a bare
/// `ack_p99_ms` watches.
pub(crate) const ACKED_ROLES: [&str; 4] = ["js-pub", "kv-put", "obj-put", "amqp-pub"];

/// The tailing thread; stopped by the recording's stop flag, after one last read.
pub(crate) struct LoadWatch {
    handle: std::thread::JoinHandle<()>,
}

impl LoadWatch {
    /// Starts watching `dir/load.csv` when `flight` has an `ack_p99_ms` trigger.
    pub fn start(
        flight: &Arc<Flight>,
        triggers: &[Trigger],
        dir: &Path,
        stop: Arc<AtomicBool>,
        events: EventLog,
    ) -> Option<LoadWatch> {
        let mut w = Watcher::new(flight.clone(), triggers, dir, events)?;
        let handle = std::thread::Builder::new()
            .name("ack-trigger".into())
            .spawn(move || loop {
                let last = stop.load(Ordering::Relaxed);
                w.poll();
                if last {
                    break;
                }
                std::thread::sleep(POLL);
            })
            .ok()?;
        Some(LoadWatch { handle })
    }

    /// Waits for the last read (call after setting the stop flag).
    pub fn join(self) {
        let _ = self.handle.join();
    }
}

/// The columns of load.csv this needs, by position in its header.
#[derive(Clone, Copy)]
struct Cols {
    t_ns: usize,
    window_ns: usize,
    role: usize,
    p99: usize,
}

impl Cols {
    fn of(header: &str) -> Option<Cols> {
        let pos = |n: &str| header.trim_end().split(',').position(|c| c == n);
        Some(Cols {
            t_ns: pos("t_ns")?,
            window_ns: pos("window_ns")?,
            role: pos("role")?,
            p99: pos("lat_p99_us")?,
        })
    }
}

/// One row's fields the triggers read.
#[derive(Debug, PartialEq)]
struct AckRow<'a> {
    pub t_ns: u64,
    pub window_ns: u64,
    pub role: &'a str,
    pub p99_ms: f64,
}

/// The watcher's state: where it is in load.csv and which trigger is quiet until when.
struct Watcher {
    flight: Arc<Flight>,
    triggers: Vec<Trigger>,
    events: EventLog,
    path: PathBuf,
    /// load.csv as it was opened (held across a rotation until read to its end).
    file: Option<std::fs::File>,
    offset: u64,
    ino: Option<u64>,
    cols: Option<Cols>,
    partial: Vec<u8>,
    /// (trigger index, role) -> no new firing before this t.
    quiet_until: HashMap<(usize, String), u64>,
}

impl Watcher {
    /// `None` when no trigger is an `ack_p99_ms` one.
    pub fn new(
        flight: Arc<Flight>,
        triggers: &[Trigger],
        dir: &Path,
        events: EventLog,
    ) -> Option<Watcher> {
        let triggers: Vec<Trigger> = triggers
            .iter()
            .filter(|t| t.measure == Measure::AckP99Ms)
            .cloned()
            .collect();
        (!triggers.is_empty()).then(|| Watcher {
            flight,
            triggers,
            events,
            path: dir.join(format::load::FILE),
            file: None,
            offset: 0,
            ino: None,
            cols: None,
            partial: vec![],
            quiet_until: HashMap::new(),
        })
    }

    /// Reads what was appended to load.csv since the last call and feeds its rows.
    ///
    /// It follows a rotation (`record --chunk` moves load.csv into
    /// `chunks/load.NNNNNN.csv` under the appenders' lock, [`crate::recording::writer::rotate_shared`]):
    /// the file it has open is read to its end; when the path is then another file (a
    /// new inode, or gone), the old one is read to its end once more (no appender writes
    /// to it after the rename, so this is all of it) before the new one is opened and
    /// read from its start.
    pub fn poll(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if self.file.is_none() {
            let Ok(f) = std::fs::File::open(&self.path) else {
                return; // no load yet
            };
            self.open_new(f);
        }
        self.read_on();
        let now_at = std::fs::metadata(&self.path).ok().map(|m| m.ino());
        if now_at != self.ino {
            // Rotated (or replaced): the rest of the old file, then the new one.
            self.read_on();
            self.file = None;
            if let Ok(f) = std::fs::File::open(&self.path) {
                self.open_new(f);
                self.read_on();
            }
        }
    }

    fn open_new(&mut self, f: std::fs::File) {
        use std::os::unix::fs::MetadataExt;
        self.ino = f.metadata().ok().map(|m| m.ino());
        self.file = Some(f);
        self.offset = 0;
        self.cols = None;
        self.partial.clear();
    }

    /// Feeds the whole lines appended to the open file since the last read.
    fn read_on(&mut self) {
        let Some(mut f) = self.file.as_ref() else {
            return;
        };
        let Ok(m) = f.metadata() else { return };
        if m.len() < self.offset {
            // Truncated and rewritten in place: from its start.
            self.offset = 0;
            self.cols = None;
            self.partial.clear();
        }
        if m.len() == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = std::mem::take(&mut self.partial);
        let Ok(n) = (&mut f).take(16 << 20).read_to_end(&mut buf) else {
            self.partial = buf;
            return;
        };
        self.offset += n as u64;
        let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let text = String::from_utf8_lossy(&buf[..whole]).into_owned();
        self.partial = buf[whole..].to_vec();
        for line in text.lines() {
            self.line(line);
        }
    }

    fn line(&mut self, line: &str) {
        if line.starts_with("t_ns,") {
            self.cols = Cols::of(line);
            return;
        }
        let Some(c) = self.cols else { return };
        if let Some(r) = parse_row(line, c) {
            self.row(&r);
        }
    }

    /// One load.csv row against every ack trigger.
    pub fn row(&mut self, r: &AckRow) {
        let now = self.events.clock().now_ns();
        for (i, tr) in self.triggers.iter().enumerate() {
            let watched = match tr.device.as_deref() {
                Some(role) => role == r.role,
                None => ACKED_ROLES.contains(&r.role),
            };
            if !watched || r.p99_ms <= tr.above {
                continue;
            }
            let end = r.t_ns.saturating_add(r.window_ns);
            let key = (i, r.role.to_string());
            let quiet = self.quiet_until.get(&key).copied().unwrap_or(0);
            if r.t_ns < quiet {
                self.flight.keep(r.t_ns, "");
                self.flight.keep(end, "");
                continue;
            }
            let w = self.flight.window_ns();
            self.flight.keep(
                r.t_ns,
                &format!("{} on {}: {:.1}", tr.text, r.role, r.p99_ms),
            );
            self.flight.keep(end, "");
            self.events.event_at(
                r.t_ns,
                Body::Trigger(ev::Trigger {
                    trigger: tr.text.clone(),
                    role: Some(r.role.to_string()),
                    value: Some(r.p99_ms),
                    window_ns: Some(r.window_ns),
                    seen_t_ns: Some(now),
                    keep_from_t_ns: r.t_ns.saturating_sub(w),
                    keep_to_t_ns: end.saturating_add(w),
                    ..Default::default()
                }),
            );
            self.quiet_until.insert(key, end.saturating_add(w));
        }
    }
}

/// A load.csv data line's `t_ns`, `window_ns`, `role` and `lat_p99_us` (as ms); `None`
/// for a line without a p99 (a role without latency, a window without any) or a
/// damaged one.
fn parse_row(line: &str, c: Cols) -> Option<AckRow<'_>> {
    let cells: Vec<&str> = line.split(',').collect();
    let get = |i: usize| cells.get(i).copied();
    let p99_us: f64 = get(c.p99)?.parse().ok()?;
    Some(AckRow {
        t_ns: get(c.t_ns)?.parse().ok()?,
        window_ns: get(c.window_ns)?.parse().ok()?,
        role: get(c.role)?,
        p99_ms: (p99_us.is_finite() && p99_us >= 0.0).then_some(p99_us / 1000.0)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::chunks::{parse_trigger, ChunkSetup};
    use format::load::{LoadRow, HEADER};

    fn line(t_ms: u64, role: &str, p99_ms: Option<f64>) -> String {
        LoadRow {
            t_ns: t_ms * 1_000_000,
            window_ns: 100_000_000,
            role: role.into(),
            ops: 10,
            lat_p99_us: p99_ms.map(|v| v * 1000.0),
            ..Default::default()
        }
        .to_line()
    }

    #[test]
    fn the_watcher_fires_once_per_window_reads_whole_lines_and_follows_a_new_file() {
        let d = tempfile::tempdir().unwrap();
        let clock = collectors::clock::Clock::start();
        let events = EventLog::create(&d.path().join("events.jsonl"), clock).unwrap();
        let setup = ChunkSetup {
            triggers: vec![parse_trigger("ack_p99_ms>50").unwrap()],
            window_ns: 1_000_000_000,
            ..Default::default()
        };
        let flight = Flight::new(
            setup.clone(),
            d.path(),
            Arc::new(std::sync::Mutex::new(Default::default())),
            events.clone(),
        );
        let mut w = Watcher::new(flight.clone(), &setup.triggers, d.path(), events).unwrap();
        w.poll(); // no load.csv yet: nothing
        let csv = d.path().join(format::load::FILE);
        let mut text = format!("{HEADER}\n");
        text += &line(0, "js-pub", Some(2.0));
        text += &line(100, "sub", Some(400.0)); // not an acked role
        text += &line(200, "js-pub", Some(80.0)); // fires
        text += &line(300, "js-pub", Some(90.0)); // within its window: extends only
        let cut = line(1400, "js-pub", Some(70.0)); // past it: fires again, once whole
        text += &cut[..10];
        std::fs::write(&csv, &text).unwrap();
        w.poll();
        let fired = |d: &Path| -> Vec<serde_json::Value> {
            std::fs::read_to_string(d.join("events.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|e| e["kind"] == "trigger")
                .collect()
        };
        let f = fired(d.path());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0]["t_ns"], 200_000_000u64);
        assert_eq!(f[0]["detail"]["role"], "js-pub");
        assert_eq!(f[0]["detail"]["value"], 80.0);
        // The rest of the cut line arrives.
        text += &cut[10..];
        std::fs::write(&csv, &text).unwrap();
        w.poll();
        let f = fired(d.path());
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[1]["t_ns"], 1_400_000_000u64);
        let kept = flight.snapshot_state().kept_windows;
        assert_eq!(kept.len(), 1, "{kept:?}");
        // 0.2 s - 1 s (saturating) .. 1.4 s + 0.1 s + 1 s, both firings named.
        assert_eq!((kept[0].from_t_ns, kept[0].to_t_ns), (0, 2_500_000_000));
        assert!(
            kept[0].what.contains("ack_p99_ms>50 on js-pub: 80.0"),
            "{kept:?}"
        );
        assert!(
            kept[0].what.contains("ack_p99_ms>50 on js-pub: 70.0"),
            "{kept:?}"
        );
        // A replaced load.csv (another run's) is read from its start.
        std::fs::remove_file(&csv).unwrap();
        std::fs::write(
            &csv,
            format!("{HEADER}\n{}", line(9000, "kv-put", Some(60.0))),
        )
        .unwrap();
        w.poll();
        let f = fired(d.path());
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[2]["detail"]["role"], "kv-put");
    }

    /// A row appended just before a rotation (not yet read when load.csv moved into a
    /// chunk) still fires, and so does the first row of the new load.csv.
    #[test]
    fn the_watcher_follows_a_rotation_without_losing_the_rows_before_it() {
        use crate::recording::writer::{rotate_shared, SharedAppend};
        let d = tempfile::tempdir().unwrap();
        let clock = collectors::clock::Clock::start();
        let events = EventLog::create(&d.path().join("events.jsonl"), clock).unwrap();
        let setup = ChunkSetup {
            triggers: vec![parse_trigger("ack_p99_ms>50").unwrap()],
            window_ns: 1_000_000_000,
            ..Default::default()
        };
        let flight = Flight::new(
            setup.clone(),
            d.path(),
            Arc::new(std::sync::Mutex::new(Default::default())),
            events.clone(),
        );
        let mut w = Watcher::new(flight, &setup.triggers, d.path(), events).unwrap();
        let csv = d.path().join(format::load::FILE);
        let mut a = SharedAppend::open(&csv, HEADER).unwrap();
        a.append(line(0, "js-pub", Some(80.0)).as_bytes()).unwrap();
        w.poll();
        a.append(line(5000, "js-pub", Some(90.0)).as_bytes())
            .unwrap(); // unread
        std::fs::create_dir(d.path().join("chunks")).unwrap();
        let chunk = d.path().join("chunks/load.000000.csv");
        assert!(rotate_shared(&csv, &chunk, HEADER.len() as u64 + 1).unwrap());
        a.append(line(10000, "js-pub", Some(70.0)).as_bytes())
            .unwrap(); // the new file
        assert_eq!(a.reopened(), 1);
        w.poll();
        let t: Vec<u64> = std::fs::read_to_string(d.path().join("events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["kind"] == "trigger")
            .map(|e| e["t_ns"].as_u64().unwrap())
            .collect();
        assert_eq!(t, [0, 5_000_000_000, 10_000_000_000]);
        assert!(std::fs::read_to_string(&csv)
            .unwrap()
            .starts_with(&format!("{HEADER}\n")));
    }

    #[test]
    fn rows_are_read_by_the_header_and_a_row_without_p99_is_none() {
        let c = Cols::of(HEADER).unwrap();
        let r = LoadRow {
            t_ns: 300_000_000,
            window_ns: 100_000_000,
            role: "js-pub".into(),
            lat_p99_us: Some(51_234.5),
            ..Default::default()
        };
        let line = r.to_line();
        assert_eq!(
            parse_row(line.trim_end(), c),
            Some(AckRow {
                t_ns: 300_000_000,
                window_ns: 100_000_000,
                role: "js-pub",
                p99_ms: 51.2345
            })
        );
        let none = LoadRow {
            role: "pub".into(),
            lat_p99_us: None,
            ..r
        };
        assert_eq!(parse_row(none.to_line().trim_end(), c), None);
        assert!(Cols::of("t_ns,role").is_none());
    }
}
