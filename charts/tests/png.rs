//! Rasterizes whole timelines and checks the PNG's pixels: its size, that it is the
//! SVG rasterized, that a lone spike shows and that text is drawn.

mod common;

use charts::{render_png, render_svg, svg_to_png, Marker, Style, Timeline};
use common::*;
use resvg::usvg;

#[test]
fn the_png_is_the_svg_rasterized() {
    let (t, mut v) = flat(50_000, 10.0, 3.0);
    v[12_345] = 90.0;
    let tl = Timeline {
        events: vec![Marker {
            t_s: 4.0,
            label: "restart n2".into(),
        }],
        ..timeline(vec![panel("p", vec![series("a", t, v, Style::Envelope)])])
    };
    assert_eq!(
        render_png(&tl).unwrap(),
        svg_to_png(&render_svg(&tl)).unwrap()
    );
}

#[test]
fn png_has_the_svgs_size_and_grows_by_one_panel_height_per_panel() {
    let (t, v) = flat(5000, 10.0, 2.0);
    let one = panel("p", vec![series("a", t, v, Style::Envelope)]);
    let mut sizes = Vec::new();
    for panels in 1..=3 {
        let tl = Timeline {
            width_px: 900,
            panel_height_px: 150,
            ..timeline(vec![one.clone(); panels])
        };
        let bytes = render_png(&tl).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let (w, h, _) = decode(&bytes);
        let svg = render_svg(&tl);
        assert!(svg.contains(&format!(r#"width="{w}" height="{h}""#)));
        sizes.push((w, h));
    }
    assert!(sizes.iter().all(|(w, _)| *w == 900));
    assert_eq!(sizes[1].1 - sizes[0].1, 150);
    assert_eq!(sizes[2].1 - sizes[1].1, 150);
}

#[test]
fn a_lone_spike_is_visible_in_the_png() {
    let (t, mut v) = flat(200_000, 10.0, 0.0);
    v[151_234] = 1e9; // at 7.56 s, off the time grid
    let tl = Timeline {
        width_px: 800,
        panel_height_px: 160,
        ..timeline(vec![panel("p", vec![series("a", t, v, Style::Envelope)])])
    };
    let svg = render_svg(&tl);
    let bar = polygons(&svg, FIRST).pop().expect("a band polygon");
    // The bar covers the pixel column x (from x to x + 1) from y_top down to y_bottom.
    let x = bar.iter().map(|p| p.0).min().unwrap();
    let y_top = bar.iter().map(|p| p.1).min().unwrap();
    let y_bottom = bar.iter().map(|p| p.1).max().unwrap();
    assert!(y_bottom - y_top > 50, "the bar is tall");

    let (w, _, rgba) = decode(&render_png(&tl).unwrap());
    let pixel = |px: i32, py: i32| {
        let i = ((py as u32 * w + px as u32) * 4) as usize;
        [rgba[i], rgba[i + 1], rgba[i + 2]]
    };
    // Just under the peak and halfway down, the spike's column is tinted blue...
    let mid = (y_top + y_bottom) / 2;
    for py in [y_top + 1, mid] {
        let [r, g, b] = pixel(x, py);
        assert!(b > r && r < 230, "pixel ({x},{py}) = {:?}", [r, g, b]);
    }
    // ...while its neighbours a few pixels away are background (white or grey grid).
    for dx in [-4, 4] {
        let [r, g, b] = pixel(x + dx, mid);
        assert!(
            r == g && g == b && r > 200,
            "neighbour {dx}: {:?}",
            [r, g, b]
        );
    }
}

#[test]
fn png_text_is_drawn_when_fonts_exist() {
    // Fonts are the system's; without DejaVu (fonts-dejavu-core) this says so and stops.
    if !std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        let why = "DejaVu Sans is not installed (apt-get install fonts-dejavu-core)";
        // As tests/common::skip: CI (.ci/run) makes a missing prerequisite a failure.
        if std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var("DISKPULSE_STRICT").is_ok_and(|v| v == "1")
        {
            panic!("a prerequisite is missing (CI=true or DISKPULSE_STRICT=1): {why}");
        }
        eprintln!("skipped: {why}");
        return;
    }
    let base = timeline(vec![panel("p", vec![])]);
    let with_title = Timeline {
        title: "A TITLE WITH INK".into(),
        ..base.clone()
    };
    let ink = |tl: &Timeline| {
        let (_, _, rgba) = decode(&render_png(tl).unwrap());
        rgba.chunks(4).filter(|p| p[0] < 128).count()
    };
    assert!(
        ink(&with_title) > ink(&base) + 100,
        "the title's glyphs are drawn"
    );
}

#[test]
fn odd_inputs_still_render() {
    let cases = vec![
        // No panels at all, zero sizes.
        Timeline {
            width_px: 0,
            panel_height_px: 0,
            ..Timeline::default()
        },
        // Mismatched lengths, infinities, a NaN time range, one point, markers piled up.
        Timeline {
            x_range_s: (f64::NAN, 5.0),
            width_px: 120,
            panel_height_px: 10,
            events: (0..20)
                .map(|i| Marker {
                    t_s: 2.0 + i as f64 * 0.01,
                    label: format!("marker {i}"),
                })
                .collect(),
            ..timeline(vec![
                panel(
                    "mismatched",
                    vec![series(
                        "a",
                        vec![1.0, 2.0, 3.0],
                        vec![1.0, f64::INFINITY],
                        Style::Step,
                    )],
                ),
                panel(
                    "one point",
                    vec![series("b", vec![2.0], vec![-1e300], Style::DashedLine)],
                ),
            ])
        },
    ];
    for tl in cases {
        let svg = render_svg(&tl);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        usvg::Tree::from_str(&svg, &usvg::Options::default()).expect("usvg parses it");
        let (w, h, _) = decode(&render_png(&tl).expect("renders"));
        assert!(w >= 200 && h > 0);
    }
}
