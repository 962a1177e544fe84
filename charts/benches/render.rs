//! Prints how long the charts take on full-size inputs: 4 panels of 600,000 points
//! (1 ms samples over 10 minutes), 1600 px wide. Not a test: it prints figures.
//!
//! Two inputs: "noise" (every column spans the same 0..1008, with rare 50k spikes: the
//! band is nearly one rectangle, the mean line nearly flat) and "bursty" (a quiet
//! baseline that wanders, bursts of 300 ms and lone 1 ms spikes: every column
//! differs, as in a real recording).
//!
//! Times are this thread's CPU time, best of 5.
//!
//! `cargo bench -p charts`

use charts::{envelope, render_png, render_svg, Panel, Series, Style, Timeline};

const N: usize = 600_000;

fn main() {
    let t_s: Vec<f64> = (0..N).map(|i| i as f64 / 1000.0).collect();
    let noise = timeline(&t_s, |p, i| {
        ((i * (p + 7919)) % 1009) as f64 + if i % 120_000 == 0 { 5e4 } else { 0.0 }
    });
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let bursty = timeline(&t_s, |p, i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = (x >> 11) as f64 / (1u64 << 53) as f64;
        let t = i as f64 / 1000.0;
        let base = 20.0 + 10.0 * (t / (7.0 + p as f64)).sin() + 6.0 * r;
        let burst = if (t % 37.0) < 0.3 { 400.0 * r } else { 0.0 };
        let spike = if i % 77_777 == 0 { 1e4 } else { 0.0 };
        base + burst + spike
    });

    let v0 = &noise.panels[0].series[0].v;
    let (ms, cols) = best(&mut || envelope(&t_s, v0, 0.0, 600.0, 1517).len());
    println!("envelope   1 x {N} points -> {cols} columns:   {ms:8.2} ms");
    for (name, tl) in [("noise", &noise), ("bursty", &bursty)] {
        let (ms, bytes) = best(&mut || render_svg(tl).len());
        println!("render_svg 4 x {N} points, {name:6}: {ms:8.2} ms, {bytes} bytes");
        let (ms, bytes) = best(&mut || render_png(tl).map(|p| p.len()).unwrap_or(0));
        println!(
            "render_png 4 x {N} points, {name:6}: {ms:8.2} ms, {bytes} bytes (fonts loaded once)"
        );
    }
}

/// Four panels, one envelope series each, values from `v(panel, index)`.
fn timeline(t_s: &[f64], mut v: impl FnMut(usize, usize) -> f64) -> Timeline {
    let panels: Vec<Panel> = (0..4)
        .map(|p| Panel {
            title: format!("panel {p}"),
            y_label: "MiB/s".into(),
            series: vec![Series {
                label: "1 ms".into(),
                t_s: t_s.to_vec(),
                v: (0..N).map(|i| v(p, i)).collect(),
                style: Style::Envelope,
                color: None,
                folded: None,
            }],
            y_min_zero: true,
            y_scale: Default::default(),
        })
        .collect();
    Timeline {
        title: "bench".into(),
        x_range_s: (0.0, 600.0),
        panels,
        ..Timeline::default()
    }
}

/// The best of 5 runs in milliseconds of this thread's CPU time (a shared machine's
/// other work does not count, as it would in wall time), and what the last run
/// returned.
fn best(f: &mut dyn FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut out = 0;
    for _ in 0..5 {
        let start = thread_cpu_ms();
        out = f();
        best = best.min(thread_cpu_ms() - start);
    }
    (best, out)
}

fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}
