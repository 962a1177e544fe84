//! The per-client rates of a run as a chart (the walkthrough's "this is a little hard to
//! read, so let's plot it"): one horizontal bar per client in natscli's CSV order
//! (`S0..`, then `P0..`), its msgs/s as the bar and the number, subscribers and
//! publishers in two colours with a legend. Written as SVG and as the same SVG
//! rasterized to PNG (`charts::svg_to_png`), next to the `--csv` file.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::natscli::{self, Group};
use super::record::ClientTotals;

const WIDTH: f64 = 760.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 48.0;
const BAR: f64 = 22.0;
const GAP: f64 = 8.0;
const BOTTOM: f64 = 46.0;
const FONT: &str = "DejaVu Sans, sans-serif";
/// Subscribers blue, publishers orange (the report's palette).
fn colour(g: Group) -> &'static str {
    match g {
        Group::Sub => "#1f77b4",
        Group::Pub => "#ff7f0e",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The chart as an SVG document. `title` heads it (e.g. the command line, redacted).
pub fn svg(title: &str, clients: &[ClientTotals]) -> String {
    let rows = natscli::ordered(clients);
    let rate = |c: &ClientTotals| {
        let d = c.duration_s();
        if d > 0.0 {
            c.ops as f64 / d
        } else {
            0.0
        }
    };
    let max = rows.iter().map(|(_, c)| rate(c)).fold(0.0, f64::max);
    let ticks = charts::nice_ticks(0.0, max.max(1.0));
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |v: f64| LEFT + plot_w * (v - ticks.lo) / (ticks.hi - ticks.lo);
    let height = TOP + rows.len().max(1) as f64 * (BAR + GAP) + BOTTOM;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" font-size="12">"#
    );
    let _ = write!(
        o,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    // Legend.
    for (i, (g, name)) in [
        (Group::Sub, "subscribers (S)"),
        (Group::Pub, "publishers (P)"),
    ]
    .into_iter()
    .enumerate()
    {
        let lx = LEFT + i as f64 * 150.0;
        let _ = write!(
            o,
            r#"<rect x="{lx}" y="28" width="12" height="12" fill="{}"/><text x="{}" y="38">{name}</text>"#,
            colour(g),
            lx + 16.0
        );
    }
    let bottom = height - BOTTOM;
    for &t in &ticks.values {
        let tx = x(t);
        let _ = write!(
            o,
            r##"<line x1="{tx:.1}" y1="{TOP}" x2="{tx:.1}" y2="{bottom}" stroke="#ddd"/><text x="{tx:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 16.0,
            charts::format_compact(t, ticks.step)
        );
    }
    let _ = write!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">msgs/s per client</text>"#,
        LEFT + plot_w / 2.0,
        bottom + 34.0
    );
    for (i, (id, c)) in rows.iter().enumerate() {
        let y = TOP + GAP / 2.0 + i as f64 * (BAR + GAP);
        let r = rate(c);
        let w = (x(r) - LEFT).max(0.0);
        let _ = write!(
            o,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{id}</text><rect x="{LEFT}" y="{y:.1}" width="{w:.1}" height="{BAR}" fill="{}"><title>{id}: {r:.0} msgs/s ({} msgs)</title></rect><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT - 8.0,
            y + BAR * 0.7,
            colour(natscli::group(c.role)),
            c.ops,
            LEFT + w + 4.0,
            y + BAR * 0.7,
            natscli::commas(r as u64)
        );
    }
    let _ = write!(
        o,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/></svg>"#
    );
    o
}

/// Writes the chart beside the CSV `csv`: `results.csv` -> `results.svg` and
/// `results.png`. Returns the two paths.
pub fn write(csv: &Path, title: &str, clients: &[ClientTotals]) -> anyhow::Result<[PathBuf; 2]> {
    let doc = svg(title, clients);
    let svg_path = natscli::sibling(csv, "svg");
    let png_path = natscli::sibling(csv, "png");
    format::atomic::write(&svg_path, doc.as_bytes())?;
    let png = charts::svg_to_png(&doc)?;
    format::atomic::write(&png_path, &png)?;
    Ok([png_path, svg_path])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::record::Role;

    fn client(role: Role, index: usize, ops: u64) -> ClientTotals {
        ClientTotals {
            role,
            index,
            server: String::new(),
            ops,
            bytes: ops * 128,
            errors: 0,
            errors_by_kind: Default::default(),
            error_times_ns: Default::default(),
            first_ns: 0,
            last_ns: 1_000_000_000,
            lat: collectors::directio::latency_histogram(),
            co: collectors::directio::latency_histogram(),
        }
    }

    #[test]
    fn one_bar_per_client_in_csv_order_coloured_by_group() {
        let cs = vec![
            client(Role::Pub, 0, 250_000),
            client(Role::Sub, 0, 1_000_000),
            client(Role::Sub, 1, 500_000),
        ];
        let s = svg("nats-bench <x>", &cs);
        assert!(s.contains("nats-bench &lt;x&gt;"));
        let bars: Vec<&str> = s.split("<title>").skip(1).collect();
        assert_eq!(bars.len(), 3);
        assert!(bars[0].starts_with("S0: 1000000 msgs/s"), "{}", bars[0]);
        assert!(bars[1].starts_with("S1: 500000 msgs/s"));
        assert!(bars[2].starts_with("P0: 250000 msgs/s"));
        // The longest bar is the fastest client; the half-rate one is half as long.
        let width = |id: &str| -> f64 {
            let i = s.find(&format!("<title>{id}:")).unwrap();
            let w = &s[..i];
            let w = &w[w.rfind("width=\"").unwrap() + 7..];
            w[..w.find('"').unwrap()].parse().unwrap()
        };
        assert!((width("S1") / width("S0") - 0.5).abs() < 0.01);
        assert_eq!(s.matches(colour(Group::Sub)).count(), 3, "legend + 2 bars");
        // It rasterizes.
        let png = charts::svg_to_png(&s).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
