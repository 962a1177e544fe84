//! The progress line of `demo` and `run` (issue 23, item 9): on a terminal, one line that
//! says how far the run is (elapsed of its total; for a study "run N of M" and an ETA from
//! the runs done so far), the load's and the probe's operations per second in their last
//! window and the write bursts the store's devices have shown so far.
//!
//! Where the figures come from, and what they are not:
//! - ops/s: the rows of the run's `load.csv` and `probe.csv` as the load and the probe
//!   write them (a row is written once its window is 300 ms old: the figure is the last
//!   whole window's, up to ~1.3 s old). Read by offset: each poll reads only new lines.
//! - write bursts: the recording's diskstats sampler feeds a [`engines::live::Live`] (as
//!   `record --listen` does) with 10 ms write bins; this thread keeps its own copy of the
//!   store devices' bins and runs the report's burst finder on all of them once a
//!   second. It is a live count by the same rule, not the report's: the report works from
//!   the 1 ms samples and knows the whole run, so its count is the one to quote.
//! - ETA: the mean time of the runs done so far times the runs left, plus what the
//!   current run has left of that mean; before the first run ends, the plan's time (the
//!   phases plus the setup estimate of [`crate::scenario::plan`]), marked "planned".
//!
//! What must stay true:
//! - Nothing changes where stderr is not a terminal (pipes, CI, tests) unless
//!   `--progress` asks: then one plain line a second instead of the bar. `--no-progress`
//!   turns it off.
//! - The display runs on a thread of its own and only reads files and the shared live
//!   state (a `try_lock` on the sampler's side): it never slows the load or the sampler.
//! - It is cleared on every way out: [`Progress::finish`], and `Drop` (an error, a panic,
//!   Ctrl-C/SIGTERM/SIGHUP ending the run), so the last lines a command prints are never
//!   under a half-drawn bar.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engines::live::Live;
use format::units::clock;
use report::analysis::{find_bursts, BurstParams};

/// How the progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Off,
    /// An indicatif bar on stderr, redrawn in place.
    Bar,
    /// One plain line a second on stderr (`--progress` where stderr is not a terminal).
    Lines,
}

/// `--progress` forces it on, `--no-progress` off; by default a bar when stderr is a
/// terminal, nothing otherwise.
pub fn choose(progress: bool, no_progress: bool, stderr_is_terminal: bool) -> Output {
    match (no_progress, progress, stderr_is_terminal) {
        (true, _, _) => Output::Off,
        (false, _, true) => Output::Bar,
        (false, true, false) => Output::Lines,
        (false, false, false) => Output::Off,
    }
}

/// [`choose`] for this process's stderr.
pub fn choose_for_stderr(progress: bool, no_progress: bool) -> Output {
    use std::io::IsTerminal;
    choose(progress, no_progress, std::io::stderr().is_terminal())
}

/// A rate in a few characters, 3 significant digits: "950", "4.1k", "12.3k", "1.2M".
pub fn rate_words(r: f64) -> String {
    let short = |x: f64| {
        let t = if x < 10.0 {
            format!("{x:.2}")
        } else if x < 100.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.0}")
        };
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        }
    };
    if !r.is_finite() || r < 0.0 {
        "-".into()
    } else if r >= 999_500.0 {
        format!("{}M", short(r / 1e6))
    } else if r >= 999.5 {
        format!("{}k", short(r / 1e3))
    } else {
        format!("{}", r.round() as u64)
    }
}

/// Seconds left in a study, and whether they come from runs done (`false`: from the plan).
///
/// `done_s`: the runs finished so far; `run`: the current run, 1-based, of `runs`;
/// `current_s`: how long it has run; `planned_run_s`: the plan's time of one run.
pub fn eta_s(
    done_s: &[f64],
    run: usize,
    runs: usize,
    current_s: f64,
    planned_run_s: f64,
) -> (f64, bool) {
    let (per_run, measured) = if done_s.is_empty() {
        (planned_run_s, false)
    } else {
        (done_s.iter().sum::<f64>() / done_s.len() as f64, true)
    };
    let after = runs.saturating_sub(run) as f64;
    ((per_run - current_s).max(0.0) + per_run * after, measured)
}

/// Where a study is.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyPos {
    /// 1-based.
    pub run: usize,
    pub runs: usize,
    /// The cell and repeat: "raid-1 r2".
    pub label: String,
    /// Since the study began.
    pub elapsed_s: f64,
    pub eta_s: f64,
    /// The ETA comes from runs done (not from the plan).
    pub eta_measured: bool,
}

/// Everything one line shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    pub study: Option<StudyPos>,
    /// The current run's (or the demo's) time so far.
    pub elapsed_s: f64,
    /// Its expected time (`None`: not known); `total_is_plan`: the plan's, a lower bound.
    pub total_s: Option<f64>,
    pub total_is_plan: bool,
    /// Operations per second of each series in its last whole window ("js-pub", "probe write").
    pub ops: Vec<(String, f64)>,
    /// Write bursts seen so far per watched device; `None`: no live diskstats.
    pub bursts: Option<Vec<(String, usize)>>,
}

/// The line: `run 3 of 6 raid-1 r1 · 0:05 of ~0:10 · 1:12 elapsed · ETA 2:24 · js-pub 4.1k
/// ops/s · write bursts so far: loop3 2`.
pub fn line(v: &View) -> String {
    let mut parts = vec![];
    if let Some(s) = &v.study {
        parts.push(format!("run {} of {} {}", s.run, s.runs, s.label));
    }
    parts.push(match v.total_s {
        Some(t) => format!(
            "{} of {}{}",
            clock(v.elapsed_s),
            if v.total_is_plan { "~" } else { "" },
            clock(t)
        ),
        None => format!("{} elapsed", clock(v.elapsed_s)),
    });
    if let Some(s) = &v.study {
        parts.push(format!("{} elapsed", clock(s.elapsed_s)));
        parts.push(format!(
            "ETA {}{}",
            clock(s.eta_s),
            if s.eta_measured { "" } else { " (planned)" }
        ));
    }
    if !v.ops.is_empty() {
        parts.push(
            v.ops
                .iter()
                .map(|(k, r)| format!("{k} {} ops/s", rate_words(*r)))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if let Some(b) = &v.bursts {
        if !b.is_empty() {
            parts.push(format!(
                "write bursts so far: {}",
                b.iter()
                    .map(|(d, n)| format!("{d} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    parts.join(" · ")
}

/// Follows one of a run's window files (`load.csv`, `probe.csv`): new complete lines only,
/// each poll. The last whole window's count per series, as a rate.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    /// Prefix of each series ("" for load roles, "probe " for probe directions).
    prefix: &'static str,
    offset: u64,
    /// Column indices: t_ns, window_ns, series, count.
    cols: Option<[usize; 4]>,
    partial: String,
    /// Per series: the last window's start, width and count, and when its last row came.
    last: Vec<(String, u64, u64, u64, Instant)>,
}

/// A series without a new row for this long has ended (its phase is over): not shown.
const STALE: Duration = Duration::from_secs(3);

impl Tail {
    pub fn new(path: PathBuf, prefix: &'static str) -> Tail {
        Tail {
            path,
            prefix,
            offset: 0,
            cols: None,
            partial: String::new(),
            last: vec![],
        }
    }

    /// Reads what was appended since the last poll. A file that shrank (cut into a
    /// chunk) is read again from its start.
    pub fn poll(&mut self) {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0;
            self.cols = None;
            self.partial.clear();
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = String::new();
        // At most 4 MiB a poll: a huge backlog is read over several polls.
        let n = match (&mut f).take(4 << 20).read_to_string(&mut buf) {
            Ok(n) => n,
            Err(_) => return,
        };
        self.offset += n as u64;
        self.partial.push_str(&buf);
        let Some(end) = self.partial.rfind('\n') else {
            return;
        };
        let complete: String = self.partial.drain(..=end).collect();
        for l in complete.lines() {
            self.line(l);
        }
    }

    fn line(&mut self, l: &str) {
        let fields: Vec<&str> = l.split(',').collect();
        let Some([t, w, k, c]) = self.cols else {
            let find = |names: &[&str]| fields.iter().position(|f| names.contains(f));
            if let (Some(t), Some(w), Some(k), Some(c)) = (
                find(&["t_ns"]),
                find(&["window_ns"]),
                find(&["role", "direction"]),
                find(&["ops", "ios"]),
            ) {
                self.cols = Some([t, w, k, c]);
            }
            return;
        };
        let num = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
        let (Some(t_ns), Some(w_ns), Some(n), Some(key)) = (num(t), num(w), num(c), fields.get(k))
        else {
            return;
        };
        let key = format!("{}{key}", self.prefix);
        let now = Instant::now();
        match self.last.iter_mut().find(|e| e.0 == key) {
            // Two phases of one role share the file: their rows of one window add up.
            Some(e) if e.1 == t_ns => {
                e.3 += n;
                e.4 = now;
            }
            Some(e) if t_ns > e.1 => *e = (key, t_ns, w_ns, n, now),
            Some(_) => {}
            None => self.last.push((key, t_ns, w_ns, n, now)),
        }
    }

    /// Each running series' rate in its last window, per second.
    pub fn rates(&self) -> Vec<(String, f64)> {
        self.last
            .iter()
            .filter(|e| e.2 > 0 && e.4.elapsed() < STALE)
            .map(|e| (e.0.clone(), e.3 as f64 / (e.2 as f64 / 1e9)))
            .collect()
    }
}

/// The write bursts of some devices so far, from a [`Live`]'s 10 ms bins.
pub struct BurstWatch {
    live: Arc<Live>,
    /// Device name, its bins so far, bins taken.
    devices: Vec<(String, Vec<f64>, u64)>,
    counts: Vec<(String, usize)>,
    last_count: Option<Instant>,
}

impl BurstWatch {
    pub fn new(live: Arc<Live>, devices: Vec<String>) -> BurstWatch {
        BurstWatch {
            live,
            devices: devices.into_iter().map(|d| (d, vec![], 0)).collect(),
            counts: vec![],
            last_count: None,
        }
    }

    /// Takes the new bins; counts the bursts again once a second.
    pub fn poll(&mut self) {
        let s = self.live.scrape();
        for (name, bins, seen) in self.devices.iter_mut() {
            let Some(d) = s.devices.iter().find(|d| &d.name == name) else {
                continue;
            };
            let hist = &d.history[1];
            let new = (d.bins_total[1].saturating_sub(*seen) as usize).min(hist.len());
            bins.extend(hist.iter().skip(hist.len() - new).map(|&b| b as f64));
            *seen = d.bins_total[1];
        }
        if self
            .last_count
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.last_count = Some(Instant::now());
        let p = BurstParams::default();
        self.counts = self
            .devices
            .iter()
            .filter(|(_, bins, _)| !bins.is_empty())
            .map(|(n, bins, _)| (n.clone(), find_bursts(bins, &p).count))
            .collect();
    }

    pub fn counts(&self) -> Vec<(String, usize)> {
        self.counts.clone()
    }
}

/// The devices a run is about, whose write bursts the line counts: those named or
/// holding a store or volume (btrfs members too), not the backing disks under them
/// (issue 23 item 5: the right device first). All of them when none is marked so.
pub fn own_devices(devices: &[collectors::devices::Device]) -> Vec<String> {
    let own: Vec<String> = devices
        .iter()
        .filter(|d| {
            d.why == "named" || d.why.starts_with("holds") || d.why.starts_with("btrfs member")
        })
        .map(|d| d.name.clone())
        .collect();
    if own.is_empty() {
        devices.iter().map(|d| d.name.clone()).collect()
    } else {
        own
    }
}

/// What the current run is watched through.
struct Watch {
    tails: Vec<Tail>,
    bursts: Option<BurstWatch>,
}

#[derive(Default)]
struct Shared {
    /// Runs of the study (`None`: one run, `demo`).
    runs: Option<usize>,
    study_t0: Option<Instant>,
    run: usize,
    label: String,
    run_t0: Option<Instant>,
    total_s: Option<f64>,
    total_is_plan: bool,
    planned_run_s: f64,
    done_s: Vec<f64>,
    watch: Option<Watch>,
}

impl Shared {
    fn view(&mut self) -> View {
        let elapsed_s = self.run_t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let study = self.runs.map(|runs| {
            let (eta_s, eta_measured) =
                eta_s(&self.done_s, self.run, runs, elapsed_s, self.planned_run_s);
            StudyPos {
                run: self.run,
                runs,
                label: self.label.clone(),
                elapsed_s: self.study_t0.map_or(0.0, |t| t.elapsed().as_secs_f64()),
                eta_s,
                eta_measured,
            }
        });
        let (mut ops, mut bursts) = (vec![], None);
        if let Some(w) = self.watch.as_mut() {
            for t in w.tails.iter_mut() {
                t.poll();
                ops.extend(t.rates());
            }
            if let Some(b) = w.bursts.as_mut() {
                b.poll();
                bursts = Some(b.counts());
            }
        }
        View {
            study,
            elapsed_s,
            total_s: self.total_s,
            total_is_plan: self.total_is_plan,
            ops,
            bursts,
        }
    }
}

/// The running display; [`Progress::finish`] (or drop) clears it.
pub struct Progress {
    out: Output,
    shared: Arc<Mutex<Shared>>,
    bar: Option<indicatif::ProgressBar>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Progress {
    /// Starts the display (`None` for [`Output::Off`]); `runs`: a study's run count.
    pub fn start(out: Output, runs: Option<usize>) -> Option<Progress> {
        if out == Output::Off {
            return None;
        }
        let shared = Arc::new(Mutex::new(Shared {
            runs,
            study_t0: Some(Instant::now()),
            ..Default::default()
        }));
        let bar = (out == Output::Bar).then(|| {
            let pb = indicatif::ProgressBar::new(1000);
            pb.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{bar:20}] {wide_msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            pb
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st, b) = (shared.clone(), stop.clone(), bar.clone());
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&s, b.as_ref(), &st))
            .ok();
        Some(Progress {
            out,
            shared,
            bar,
            stop,
            thread: Mutex::new(thread),
        })
    }

    /// A run begins: `label` ("raid-1 r2"), its expected time (`plan`: a lower bound from
    /// the plan) and, for a study, the plan's time of one run (for the ETA before a run
    /// has ended).
    pub fn begin_run(&self, run: usize, label: &str, total_s: Option<f64>, plan: bool) {
        let mut g = lock(&self.shared);
        g.run = run;
        g.label = label.to_string();
        g.run_t0 = Some(Instant::now());
        g.total_s = total_s;
        g.total_is_plan = plan;
        if plan {
            g.planned_run_s = total_s.unwrap_or(0.0);
        }
        g.watch = None;
    }

    /// Where the current run's figures come from: its directory (load.csv, probe.csv) and
    /// the live diskstats of the store's devices.
    pub fn watch(&self, dir: &Path, live: Option<(Arc<Live>, Vec<String>)>) {
        let tails = vec![
            Tail::new(dir.join(format::load::FILE), ""),
            Tail::new(dir.join(format::probe::FILE), "probe "),
        ];
        let bursts = live.map(|(l, d)| BurstWatch::new(l, d));
        lock(&self.shared).watch = Some(Watch { tails, bursts });
    }

    /// The current run ended (its time counts for the ETA).
    pub fn end_run(&self) {
        let mut g = lock(&self.shared);
        if let Some(t) = g.run_t0.take() {
            g.done_s.push(t.elapsed().as_secs_f64());
        }
        g.watch = None;
    }

    /// A line above the bar (or just the line without one, or once it is finished).
    pub fn println(&self, l: &str) {
        match &self.bar {
            Some(b) if !b.is_finished() => b.println(l),
            _ => eprintln!("{l}"),
        }
    }

    pub fn output(&self) -> Output {
        self.out
    }

    /// Stops and clears the display (again: nothing); lines printed after it are plain.
    pub fn finish(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(t) = t {
            let _ = t.join();
        }
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The display thread: the bar 4 times a second, plain lines once a second.
fn draw(shared: &Mutex<Shared>, bar: Option<&indicatif::ProgressBar>, stop: &AtomicBool) {
    let step = Duration::from_millis(250);
    let mut k: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        // Plain lines start after the first second, and only while a run is on.
        if bar.is_some() || (k > 0 && k.is_multiple_of(4)) {
            let (v, running) = {
                let mut g = lock(shared);
                let running = g.run_t0.is_some();
                (g.view(), running)
            };
            if running {
                match bar {
                    Some(b) => {
                        let frac = v
                            .total_s
                            .filter(|t| *t > 0.0)
                            .map_or(0.0, |t| (v.elapsed_s / t).min(1.0));
                        b.set_position((frac * 1000.0) as u64);
                        b.set_message(line(&v));
                        b.tick();
                    }
                    None => eprintln!("{}", line(&v)),
                }
            }
        }
        k += 1;
        std::thread::sleep(step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_shows_on_a_terminal_or_when_asked_and_never_with_no_progress() {
        assert_eq!(choose(false, false, false), Output::Off);
        assert_eq!(choose(false, false, true), Output::Bar);
        assert_eq!(choose(true, false, false), Output::Lines);
        assert_eq!(choose(true, false, true), Output::Bar);
        assert_eq!(choose(false, true, true), Output::Off);
        assert_eq!(choose(true, true, false), Output::Off);
    }

    #[test]
    fn the_eta_is_the_mean_of_runs_done_times_the_runs_left() {
        // Two runs of 60 s done, the third 20 s in, of 6: 40 s of it left and 3 more.
        assert_eq!(eta_s(&[50.0, 70.0], 3, 6, 20.0, 10.0), (220.0, true));
        // A run over the mean has nothing left of its own, not a negative time.
        assert_eq!(eta_s(&[60.0], 2, 3, 90.0, 10.0), (60.0, true));
        // Before any run ended: the plan's time of a run.
        assert_eq!(eta_s(&[], 1, 4, 5.0, 15.0), (55.0, false));
        // The last run.
        assert_eq!(eta_s(&[30.0, 30.0], 3, 3, 10.0, 1.0), (20.0, true));
    }

    #[test]
    fn a_study_line_says_run_n_of_m_elapsed_and_eta() {
        let v = View {
            study: Some(StudyPos {
                run: 3,
                runs: 6,
                label: "raid-1 r1".into(),
                elapsed_s: 72.0,
                eta_s: 144.0,
                eta_measured: true,
            }),
            elapsed_s: 5.0,
            total_s: Some(10.0),
            total_is_plan: true,
            ops: vec![("probe write".into(), 4100.0), ("probe read".into(), 950.0)],
            bursts: Some(vec![("loop3".into(), 2)]),
        };
        assert_eq!(
            line(&v),
            "run 3 of 6 raid-1 r1 · 0:05 of ~0:10 · 1:12 elapsed · ETA 2:24 · probe write 4.1k ops/s, probe read 950 ops/s · write bursts so far: loop3 2"
        );
        let mut p = v.clone();
        p.study.as_mut().unwrap().eta_measured = false;
        assert!(line(&p).contains("ETA 2:24 (planned)"), "{}", line(&p));
    }

    #[test]
    fn a_demo_line_says_elapsed_of_total_and_what_is_known() {
        let v = View {
            elapsed_s: 12.4,
            total_s: Some(30.0),
            ops: vec![("js-pub".into(), 41_234.0)],
            bursts: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(line(&v), "0:12 of 0:30 · js-pub 41.2k ops/s");
        assert_eq!(rate_words(999.4), "999");
        assert_eq!(rate_words(999.6), "1k");
        assert_eq!(rate_words(12_340.0), "12.3k");
        assert_eq!(rate_words(250_000.0), "250k");
        assert_eq!(rate_words(1_500_000.0), "1.5M");
        assert_eq!(clock(3723.0), "1:02:03");
        assert_eq!(clock(59.6), "1:00");
    }

    #[test]
    fn the_tail_reads_only_whole_new_lines_and_adds_rows_of_one_window() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("load.csv");
        let head = "t_ns,window_ns,role,ops,bytes\n";
        std::fs::write(
            &p,
            format!("{head}0,100000000,js-pub,100,1\n100000000,1000"),
        )
        .unwrap();
        let mut t = Tail::new(p.clone(), "");
        t.poll();
        assert_eq!(t.rates(), vec![("js-pub".to_string(), 1000.0)]);
        // The cut line completed, and a second phase's row of the same window.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        write!(f, "00000,js-pub,200,1\n100000000,100000000,js-pub,50,1\n").unwrap();
        t.poll();
        assert_eq!(t.rates(), vec![("js-pub".to_string(), 2500.0)]);
        // A file cut into a chunk starts again.
        std::fs::write(&p, format!("{head}0,1000000000,js-sub,7,1\n")).unwrap();
        t.poll();
        assert!(
            t.rates().contains(&("js-sub".to_string(), 7.0)),
            "{:?}",
            t.rates()
        );
    }

    #[test]
    fn bursts_so_far_count_every_bin_even_past_the_live_history() {
        let live = Live::new(1_000_000);
        let mut tap = live.tap();
        let mut w = BurstWatch::new(live.clone(), vec!["loop9".into()]);
        let mut c = collectors::diskstats::DiskCounters {
            nfields: 17,
            ..Default::default()
        };
        // 8 MiB in 40 ms every 5 s, for 80 s (past the live state's 60 s of bins), in 1 ms
        // samples; the watcher polls every 100 ms (the thread: 4x a second) and counts once
        // at the end.
        let mut written = 0u64;
        for k in 0..=80_000u64 {
            if k % 5000 >= 2500 && k % 5000 < 2540 {
                written += 8 * 1024 * 1024 / 512 / 40;
            }
            c.f[collectors::diskstats::F_SECTORS_WRITTEN] = written;
            tap.observe(0, b"loop9", k * 1_000_000, &c);
            tap.sample_done(k * 1_000_000);
            if k % 100 == 0 {
                w.last_count = Some(Instant::now());
                w.poll();
            }
        }
        w.last_count = None;
        w.poll();
        assert_eq!(w.counts(), vec![("loop9".to_string(), 16)]);
        assert_eq!(w.devices[0].1.len(), 8000, "every 10 ms bin, once");
    }
}
