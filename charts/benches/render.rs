//! Prints how long the charts take on a full-size input: 4 panels of 600,000 points
//! (1 ms samples over 10 minutes), 1600 px wide. Not a test: it prints figures.
//!
//! `cargo bench -p charts`

use std::time::Instant;

use charts::{envelope, render_png, render_svg, Panel, Series, Style, Timeline};

fn main() {
    let n = 600_000;
    let t_s: Vec<f64> = (0..n).map(|i| i as f64 / 1000.0).collect();
    let panels: Vec<Panel> = (0..4)
        .map(|p| {
            let v: Vec<f64> = (0..n)
                .map(|i| {
                    ((i * (p + 7919)) % 1009) as f64 + if i % 120_000 == 0 { 5e4 } else { 0.0 }
                })
                .collect();
            Panel {
                title: format!("panel {p}"),
                y_label: "MiB/s".into(),
                series: vec![Series {
                    label: "1 ms".into(),
                    t_s: t_s.clone(),
                    v,
                    style: Style::Envelope,
                    color: None,
                }],
                y_min_zero: true,
            }
        })
        .collect();
    let tl = Timeline {
        title: "bench".into(),
        x_range_s: (0.0, 600.0),
        panels,
        ..Timeline::default()
    };

    let best = |f: &mut dyn FnMut() -> usize| {
        let mut best = f64::INFINITY;
        let mut out = 0;
        for _ in 0..5 {
            let start = Instant::now();
            out = f();
            best = best.min(start.elapsed().as_secs_f64() * 1e3);
        }
        (best, out)
    };

    let v0 = &tl.panels[0].series[0].v;
    let (ms, cols) = best(&mut || envelope(&t_s, v0, 0.0, 600.0, 1518).len());
    println!("envelope   1 x {n} points -> {cols} columns: {ms:8.2} ms");
    let (ms, bytes) = best(&mut || render_svg(&tl).len());
    println!("render_svg 4 x {n} points:               {ms:8.2} ms, {bytes} bytes");
    let (ms, bytes) = best(&mut || render_png(&tl).map(|p| p.len()).unwrap_or(0));
    println!(
        "render_png 4 x {n} points:               {ms:8.2} ms, {bytes} bytes (fonts loaded once)"
    );
}
