//! Writes a demo timeline (10 minutes of synthetic 1 ms disk samples, a per-second
//! broker rate, an empty panel) as `timeline.svg` and `timeline.png` into the folder
//! given as the first argument (default: the current folder), to look at by eye.
//!
//! `cargo run --release -p charts --example demo -- /tmp/out`

use charts::{Marker, Panel, Series, Style, Timeline};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let t = demo_timeline();
    let started = std::time::Instant::now();
    let svg = charts::render_svg(&t);
    let svg_ms = started.elapsed().as_secs_f64() * 1e3;
    let png = charts::render_png(&t)?;
    std::fs::write(dir.join("timeline.svg"), &svg)?;
    std::fs::write(dir.join("timeline.png"), &png)?;
    println!(
        "wrote {} ({} bytes SVG in {svg_ms:.1} ms, {} bytes PNG)",
        dir.display(),
        svg.len(),
        png.len()
    );
    Ok(())
}

/// A small deterministic pseudo-random generator, so the demo needs no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn demo_timeline() -> Timeline {
    let n = 600_000; // 10 minutes of 1 ms samples
    let t_s: Vec<f64> = (0..n).map(|i| i as f64 / 1000.0).collect();
    let mut rng = Rng(42);

    // Writes: a steady trickle, a 300 ms flush every 2 minutes, one lone 1 ms spike.
    let write: Vec<f64> = t_s
        .iter()
        .map(|&t| {
            let base = 18.0 + 6.0 * rng.next();
            let flush = if t % 120.0 >= 60.0 && t % 120.0 < 60.3 {
                380.0
            } else {
                0.0
            };
            base + flush
        })
        .enumerate()
        .map(|(i, v)| if i == 451_234 { 1024.0 } else { v })
        .collect();
    // The 30 s average an array UI shows: one value per window, held for the window.
    let (avg_t, avg_v): (Vec<f64>, Vec<f64>) = write
        .chunks(30_000)
        .enumerate()
        .flat_map(|(w, c)| {
            let mean = c.iter().sum::<f64>() / c.len() as f64;
            [(w as f64 * 30.0, mean), ((w + 1) as f64 * 30.0, mean)]
        })
        .unzip();

    // Reads: quiet, a read storm after the restart at 300 s, and the device missing
    // (NaN) for 20 s during it.
    let read: Vec<f64> = t_s
        .iter()
        .map(|&t| {
            if (310.0..330.0).contains(&t) {
                f64::NAN
            } else if (300.0..360.0).contains(&t) {
                150.0 + 200.0 * rng.next()
            } else {
                2.0 * rng.next()
            }
        })
        .collect();

    // Broker: messages per second, one value per second.
    let msg_t: Vec<f64> = (0..600).map(|s| s as f64 + 1.0).collect();
    let msg_v: Vec<f64> = msg_t
        .iter()
        .map(|&t| {
            if (300.0..305.0).contains(&t) {
                0.0
            } else {
                52_000.0 + 3_000.0 * rng.next()
            }
        })
        .collect();

    Timeline {
        title: "demo: 3-node JetStream, file storage, sync 2m".into(),
        x_range_s: (0.0, 600.0),
        shades: vec![],
        panels: vec![
            Panel {
                title: "vda write MiB/s".into(),
                y_label: "MiB/s".into(),
                series: vec![
                    Series {
                        label: "1 ms".into(),
                        t_s: t_s.clone(),
                        v: write,
                        style: Style::Envelope,
                        color: None,
                        folded: None,
                    },
                    Series {
                        label: "30 s UI average".into(),
                        t_s: avg_t,
                        v: avg_v,
                        style: Style::DashedLine,
                        color: Some("#d62728".into()),
                        folded: None,
                    },
                ],
                y_min_zero: true,
                y_scale: Default::default(),
            },
            Panel {
                title: "vda read MiB/s".into(),
                y_label: "MiB/s".into(),
                series: vec![Series {
                    label: "1 ms".into(),
                    t_s,
                    v: read,
                    ..Series::default()
                }],
                y_min_zero: true,
                y_scale: Default::default(),
            },
            Panel {
                title: "published msgs/s".into(),
                y_label: "msgs/s".into(),
                series: vec![Series {
                    label: "per second".into(),
                    t_s: msg_t,
                    v: msg_v,
                    style: Style::Step,
                    color: Some("#2ca02c".into()),
                    folded: None,
                }],
                y_min_zero: true,
                y_scale: Default::default(),
            },
            Panel {
                title: "vdb fsync latency ms".into(),
                y_label: "ms".into(),
                series: vec![Series {
                    label: "p99".into(),
                    ..Series::default()
                }],
                y_min_zero: true,
                y_scale: Default::default(),
            },
        ],
        events: vec![
            Marker {
                t_s: 0.0,
                label: "phase: warmup".into(),
            },
            Marker {
                t_s: 30.0,
                label: "phase: publish".into(),
            },
            Marker {
                t_s: 300.0,
                label: "restart n2".into(),
            },
            Marker {
                t_s: 302.0,
                label: "n2 ready".into(),
            },
        ],
        width_px: 1600,
        panel_height_px: 180,
    }
}
