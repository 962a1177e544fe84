//! Renders whole timelines and checks what a reader of the SVG would see: titles,
//! ticks, bands that reach their peak, lines broken at gaps, markers, aligned plots.
//! (The PNG's pixels are checked in `png.rs`.)

mod common;

use charts::{render_png, render_svg, Marker, Panel, Shade, Style, Timeline};
use common::*;
use resvg::usvg;

#[test]
fn svg_parses_and_shows_each_panels_title_in_order() {
    let (t, v) = flat(1000, 10.0, 5.0);
    let titles = ["vda write MiB/s", "vda read MiB/s", "msgs/s <&> \"quoted\""];
    let tl = timeline(
        titles
            .iter()
            .map(|title| panel(title, vec![series("a", t.clone(), v.clone(), Style::Line)]))
            .collect(),
    );
    let svg = render_svg(&tl);

    usvg::Tree::from_str(&svg, &usvg::Options::default()).expect("usvg parses the SVG");
    assert_eq!(panel_titles(&svg), titles);
    assert_eq!(frames(&svg).len(), titles.len(), "one plot per panel");
    let units = labels(&svg)
        .into_iter()
        .filter(|l| l.text == "MiB/s")
        .count();
    assert_eq!(units, titles.len(), "each panel's unit along its y axis");
}

#[test]
fn svg_is_standalone() {
    let (t, v) = flat(1000, 10.0, 5.0);
    let svg = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t, v, Style::Envelope)],
    )]));
    assert!(svg.starts_with("<svg "));
    assert!(svg.contains(r#"xmlns="http://www.w3.org/2000/svg""#));
    for banned in [
        "href", "<script", "url(", "@import", " id=", "<?xml", "<image",
    ] {
        assert!(!svg.contains(banned), "SVG contains {banned:?}");
    }
    assert!(svg.contains(r#"font-family="DejaVu Sans, sans-serif""#));
}

#[test]
fn control_characters_are_left_out_and_markup_is_escaped() {
    let tl = Timeline {
        title: "bad\u{1}title <b>".into(),
        ..timeline(vec![panel("p\u{7}", vec![])])
    };
    let svg = render_svg(&tl);
    usvg::Tree::from_str(&svg, &usvg::Options::default()).expect("usvg parses the SVG");
    assert!(svg.contains("badtitle &lt;b&gt;"), "{svg}");
    assert_eq!(panel_titles(&svg), ["p"]);
}

#[test]
fn a_one_ms_spike_among_600k_zeros_reaches_its_peak_in_the_svg() {
    let n = 600_000;
    let (t, mut v) = flat(n, 600.0, 0.0);
    v[345_678] = 1024.0;
    let tl = Timeline {
        x_range_s: (0.0, 600.0),
        ..timeline(vec![panel(
            "w",
            vec![series("1 ms", t, v, Style::Envelope)],
        )])
    };
    let svg = render_svg(&tl);

    // 0..1024 gets the axis 0, 500, 1000, 1500.
    assert_eq!(y_labels(&svg), ["0", "500", "1k", "1.5k"]);
    let f = frames(&svg)[0];

    let bands = polygons(&svg, FIRST);
    assert_eq!(bands.len(), 1, "one bar: the spike's column");
    let bar = &bands[0];
    assert_eq!(bar.len(), 4, "a rectangle: {bar:?}");
    let xs: Vec<i32> = bar.iter().map(|p| p.0).collect();
    let (x_min, x_max) = (*xs.iter().min().unwrap(), *xs.iter().max().unwrap());
    assert_eq!(x_max - x_min, 1, "one pixel column wide");
    let want_x = f.left as f64 + 345.678 / 600.0 * (f.right - f.left) as f64;
    assert!((x_min as f64 - want_x).abs() <= 1.0, "{x_min} vs {want_x}");
    let y_peak = bar.iter().map(|p| p.1).min().unwrap();
    let y_base = bar.iter().map(|p| p.1).max().unwrap();
    let want_peak = f.bottom as f64 - 1024.0 / 1500.0 * (f.bottom - f.top) as f64;
    assert!(
        (y_peak as f64 - want_peak).abs() <= 1.0,
        "{y_peak} vs {want_peak}"
    );
    assert_eq!(
        y_base, f.bottom,
        "the bar starts at zero, the plot's bottom"
    );
}

#[test]
fn nan_values_split_a_point_by_point_line() {
    let t: Vec<f64> = (0..100).map(|i| i as f64 * 0.1).collect();
    let mut v = vec![3.0; 100];
    let whole = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t.clone(), v.clone(), Style::Line)],
    )]));
    assert_eq!(plot_lines(&whole, FIRST).len(), 1);

    for x in &mut v[40..50] {
        *x = f64::NAN;
    }
    let gapped = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t, v, Style::Line)],
    )]));
    let lines = plot_lines(&gapped, FIRST);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(!gapped.contains("NaN"));
    // The first piece ends at 3.9 s, the second starts at 5 s.
    let f = frames(&gapped)[0];
    let x_of = |ts: f64| f.left as f64 + ts / 10.0 * (f.right - f.left) as f64;
    let end = lines[0].last().unwrap().0 as f64;
    let start = lines[1][0].0 as f64;
    assert!((end - x_of(3.9)).abs() <= 1.0, "{end} vs {}", x_of(3.9));
    assert!((start - x_of(5.0)).abs() <= 1.0, "{start} vs {}", x_of(5.0));
}

#[test]
fn nan_values_split_a_downsampled_line_and_are_not_drawn_as_zero() {
    let (t, mut v) = flat(600_000, 10.0, 7.0);
    let whole = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t.clone(), v.clone(), Style::Envelope)],
    )]));
    let whole_lines = plot_lines(&whole, FIRST);
    assert_eq!(whole_lines.len(), 1);
    let y7 = whole_lines[0][0].1;

    // 200k..300k of 600k samples over 10 s: no values from 3.33 s to 5 s.
    for x in &mut v[200_000..300_000] {
        *x = f64::NAN;
    }
    let gapped = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t, v, Style::Envelope)],
    )]));
    let lines = plot_lines(&gapped, FIRST);
    assert_eq!(lines.len(), 2, "{lines:?}");
    // Every point of the line is at the value 7's height: no dip to zero.
    assert!(lines.iter().flatten().all(|p| p.1 == y7), "{lines:?}");
    let f = frames(&gapped)[0];
    let x_of = |ts: f64| f.left as f64 + ts / 10.0 * (f.right - f.left) as f64;
    let end = lines[0].last().unwrap().0 as f64;
    let start = lines[1][0].0 as f64;
    assert!((end - x_of(10.0 / 3.0)).abs() <= 1.5, "{end}");
    assert!((start - x_of(5.0)).abs() <= 1.5, "{start}");
    // A flat line has no band.
    assert!(polygons(&gapped, FIRST).is_empty());
}

#[test]
fn panels_without_values_say_no_data() {
    let (t, v) = flat(100, 10.0, 1.0);
    let tl = timeline(vec![
        panel(
            "has data",
            vec![series("a", t.clone(), v.clone(), Style::Line)],
        ),
        panel("no series", vec![]),
        panel(
            "empty series",
            vec![series("a", vec![], vec![], Style::Line)],
        ),
        panel(
            "all NaN",
            vec![series("a", t.clone(), vec![f64::NAN; 100], Style::Envelope)],
        ),
        panel(
            "outside the range",
            vec![series(
                "a",
                t.iter().map(|x| x + 100.0).collect(),
                v,
                Style::Line,
            )],
        ),
    ]);
    let svg = render_svg(&tl);
    // Each panel's texts follow its title; "no data" is among them or not.
    let mut says_no_data: Vec<bool> = Vec::new();
    for l in labels(&svg) {
        if l.bold && l.font_px == 12.0 {
            says_no_data.push(false);
        } else if l.text == "no data" {
            *says_no_data.last_mut().expect("after a panel title") = true;
        }
    }
    assert_eq!(says_no_data, [false, true, true, true, true]);
    // Only the panel with data has value ticks.
    assert_eq!(
        y_labels(&svg),
        y_labels(&render_svg(&timeline(vec![tl.panels[0].clone()])))
    );
    render_png(&tl).expect("empty panels still rasterize");
}

#[test]
fn y_axis_has_3_to_5_ticks_covering_the_data() {
    for peak in [0.7, 13.0, 999.0, 123_456.0, 7.7e9] {
        let (t, mut v) = flat(1000, 10.0, peak / 3.0);
        v[500] = peak;
        let svg = render_svg(&timeline(vec![panel(
            "p",
            vec![series("a", t, v, Style::Line)],
        )]));
        let labels = y_labels(&svg);
        assert!((3..=5).contains(&labels.len()), "{peak}: {labels:?}");
        assert_eq!(labels[0], "0", "{peak}: y_min_zero");
    }
}

#[test]
fn x_range_falls_back_to_the_data_and_markers_are_drawn() {
    let t: Vec<f64> = (0..=120).map(|i| 100.0 + i as f64).collect();
    let v = vec![1.0; t.len()];
    let tl = Timeline {
        x_range_s: (0.0, 0.0),
        events: vec![
            Marker {
                t_s: 150.0,
                label: "restart n2".into(),
            },
            Marker {
                t_s: 1e9,
                label: "outside".into(),
            },
        ],
        ..timeline(vec![panel("p", vec![series("a", t, v, Style::Step)])])
    };
    let svg = render_svg(&tl);
    let texts: Vec<String> = labels(&svg).into_iter().map(|l| l.text).collect();
    assert!(texts.contains(&"restart n2".to_string()), "{texts:?}");
    assert!(!texts.contains(&"outside".to_string()));
    let x_labels = x_labels(&svg);
    // 100..220 s: ticks every 10 s, in seconds.
    assert_eq!(
        x_labels.first().map(String::as_str),
        Some("100"),
        "{x_labels:?}"
    );
    assert!(x_labels.contains(&"220".to_string()), "{x_labels:?}");
    assert!(!x_labels.contains(&"0".to_string()), "{x_labels:?}");
    assert!(svg.contains(">\ntime since run start (s)\n<"));
}

/// Three panels with different y ranges, one event.
fn three_panels_and_an_event() -> Timeline {
    let (t, mut v) = flat(200_000, 10.0, 0.0);
    v[151_234] = 1e9;
    let scaled = |k: f64| v.iter().map(|x| x * k).collect::<Vec<f64>>();
    Timeline {
        events: vec![Marker {
            t_s: 2.5,
            label: "restart n2".into(),
        }],
        ..timeline(vec![
            panel(
                "a",
                vec![series("", t.clone(), scaled(1.0), Style::Envelope)],
            ),
            panel(
                "b",
                vec![series("", t.clone(), scaled(1e-6), Style::Envelope)],
            ),
            panel("c", vec![series("", t, scaled(-3.0), Style::Envelope)]),
        ])
    }
}

#[test]
fn every_panel_plots_the_same_instant_at_the_same_x() {
    let svg = render_svg(&three_panels_and_an_event());
    let f = frames(&svg);
    assert_eq!(f.len(), 3);
    assert!(
        f.iter()
            .all(|p| (p.left, p.right) == (f[0].left, f[0].right)),
        "{f:?}"
    );
    assert!(
        f[0].bottom < f[1].top && f[1].bottom < f[2].top,
        "stacked: {f:?}"
    );
    let bars = polygons(&svg, FIRST);
    assert_eq!(bars.len(), 3, "{bars:?}");
    let x_of_bar = |b: &Vec<Px>| b.iter().map(|p| p.0).min().unwrap();
    assert!(
        bars.iter().all(|b| x_of_bar(b) == x_of_bar(&bars[0])),
        "{bars:?}"
    );
}

#[test]
fn an_event_is_one_dashed_line_across_all_panels() {
    let svg = render_svg(&three_panels_and_an_event());
    let f = frames(&svg);
    let dashes = polylines(&svg, MARKER);
    assert!(dashes.len() > 20, "dashed: {} pieces", dashes.len());
    let xs: Vec<i32> = dashes.iter().flatten().map(|p| p.0).collect();
    assert!(xs.iter().all(|x| *x == xs[0]), "one vertical line");
    let want_x = f[0].left as f64 + 0.25 * (f[0].right - f[0].left) as f64;
    assert!((xs[0] as f64 - want_x).abs() <= 1.0);
    let ys: Vec<i32> = dashes.iter().flatten().map(|p| p.1).collect();
    assert!(
        *ys.iter().min().unwrap() < f[0].top,
        "starts above the first plot"
    );
    // It ends at the last plot's bottom, or in the last gap (3 px) before it.
    let end = *ys.iter().max().unwrap();
    assert!(
        (f[2].bottom - 3..=f[2].bottom).contains(&end),
        "{end} vs {f:?}"
    );
}

#[test]
fn legends_name_their_series_and_a_dashed_series_is_drawn_in_dashes() {
    let (t, v) = flat(100, 10.0, 2.0);
    let dashed = charts::Series {
        color: Some("#d62728".into()),
        ..series("30 s UI average", t.clone(), v.clone(), Style::DashedLine)
    };
    let tl = timeline(vec![Panel {
        series: vec![
            series("1 ms", t.clone(), v.clone(), Style::Line),
            dashed,
            series("", t, v, Style::Line),
        ],
        ..panel("p", vec![])
    }]);
    let svg = render_svg(&tl);
    let texts: Vec<String> = labels(&svg).into_iter().map(|l| l.text).collect();
    assert!(texts.contains(&"1 ms".to_string()));
    assert!(texts.contains(&"30 s UI average".to_string()));
    let f = frames(&svg)[0];
    let legend_y = |stroke: &str| {
        polylines(&svg, stroke)
            .into_iter()
            .filter(|p| p.iter().all(|&(_, y)| y < f.top))
            .count()
    };
    assert_eq!(legend_y(FIRST), 1, "a solid line in the legend");
    assert!(legend_y("#D62728") >= 2, "a dashed one");
    // Solid: one line across the plot. Dashed: pieces of 6 px with 4 px gaps.
    assert_eq!(plot_lines(&svg, FIRST).len(), 1);
    let pieces = plot_lines(&svg, "#D62728");
    let width = (f.right - f.left) as usize;
    assert!(
        (width / 10 - 2..=width / 10 + 2).contains(&pieces.len()),
        "{}",
        pieces.len()
    );
    // The unlabelled third series has a line and no legend entry.
    assert_eq!(legend_y("#2CA02C"), 0);
    assert_eq!(plot_lines(&svg, "#2CA02C").len(), 1);
}

#[test]
fn shaded_spans_cover_their_time_in_every_panel_under_the_data() {
    let (t, v) = flat(1000, 10.0, 5.0);
    let tl = Timeline {
        x_range_s: (0.0, 10.0),
        shades: vec![
            Shade {
                t0_s: 2.0,
                t1_s: 3.0,
            },
            // A span past the end is clipped to the axis; a reversed one is left out.
            Shade {
                t0_s: 9.5,
                t1_s: 99.0,
            },
            Shade {
                t0_s: 5.0,
                t1_s: 4.0,
            },
        ],
        ..timeline(vec![
            panel("a", vec![series("a", t.clone(), v.clone(), Style::Line)]),
            panel("b", vec![series("b", t, v, Style::Line)]),
        ])
    };
    let svg = render_svg(&tl);
    let doc = usvg::roxmltree::Document::parse(&svg).unwrap();
    let shades: Vec<(f64, f64, f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#FFA500"))
        .map(|n| {
            let f = |a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
            (f("x"), f("y"), f("width"), f("height"))
        })
        .collect();
    assert_eq!(
        shades.len(),
        4,
        "two spans in each of two panels: {shades:?}"
    );
    let fr = frames(&svg);
    let px = |ts: f64| fr[0].left as f64 + ts / 10.0 * (fr[0].right - fr[0].left) as f64;
    // 2..3 s in the first panel, within a pixel of the time axis's mapping.
    assert!((shades[0].0 - px(2.0)).abs() <= 1.0, "{shades:?} {fr:?}");
    assert!(
        (shades[0].0 + shades[0].2 - px(3.0)).abs() <= 1.5,
        "{shades:?}"
    );
    assert!(
        shades[1].0 + shades[1].2 <= fr[0].right as f64 + 1.0,
        "clipped: {shades:?}"
    );
    // Each panel's spans lie inside its own plot.
    assert!(shades[2].1 >= fr[1].top as f64 - 1.0, "{shades:?} {fr:?}");
    // Under the data: the shade comes before the panel's line in the document.
    let first_shade = svg.find("#FFA500").unwrap();
    let first_line = svg.find("<polyline").unwrap();
    assert!(first_shade < first_line);
}

/// The shade rects of an SVG as (x, y, width, height), in document order.
fn shade_rects(svg: &str) -> Vec<(f64, f64, f64, f64)> {
    let doc = usvg::roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#FFA500"))
        .map(|n| {
            let f = |a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
            (f("x"), f("y"), f("width"), f("height"))
        })
        .collect()
}

#[test]
fn many_bursts_fold_to_at_most_one_shade_per_pixel_column_and_all_stay_covered() {
    // A 6-hour axis with 30,000 bursts of 5 ms..3 s at pseudo-random times (an LCG,
    // so the run is the same every time), many of them overlapping or a few ms apart.
    let span_s = 6.0 * 3600.0;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let bursts: Vec<Shade> = (0..30_000)
        .map(|_| {
            let t0_s = next() * span_s;
            Shade {
                t0_s,
                t1_s: t0_s + 0.005 + next() * 3.0,
            }
        })
        .collect();
    let (t, v) = flat(1000, span_s, 5.0);
    let tl = Timeline {
        x_range_s: (0.0, span_s),
        shades: bursts.clone(),
        ..timeline(vec![
            panel("a", vec![series("a", t.clone(), v.clone(), Style::Line)]),
            panel("b", vec![series("b", t, v, Style::Line)]),
        ])
    };
    let svg = render_svg(&tl);
    let fr = frames(&svg);
    assert_eq!(fr.len(), 2);
    let rects = shade_rects(&svg);
    let plot_w = (fr[0].right - fr[0].left + 1) as usize;
    for (p, f) in fr.iter().enumerate() {
        let mine: Vec<(f64, f64)> = rects
            .iter()
            .filter(|r| r.1 >= f.top as f64 - 1.0 && r.1 + r.3 <= f.bottom as f64 + 1.0)
            .map(|r| (r.0, r.0 + r.2))
            .collect();
        assert!(
            !mine.is_empty() && mine.len() <= plot_w,
            "panel {p}: {} shade rects for a plot {plot_w} px wide",
            mine.len()
        );
        // Disjoint and not touching: nothing is drawn twice (no darker overlaps).
        for w in mine.windows(2) {
            assert!(w[0].1 < w[1].0, "panel {p}: {:?} touches {:?}", w[0], w[1]);
        }
        // The union still covers every burst's time span (to the pixel).
        let px = |ts: f64| f.left as f64 + ts / span_s * (f.right - f.left) as f64;
        for b in &bursts {
            let (a, z) = (px(b.t0_s), px(b.t1_s.min(span_s)));
            assert!(
                mine.iter().any(|r| r.0 <= a + 1.0 && z <= r.1 + 1.0),
                "panel {p}: burst {b:?} ({a:.1}..{z:.1} px) not covered by {} rects",
                mine.len()
            );
        }
        // And covers nothing else: every rect holds at least one burst.
        for r in &mine {
            assert!(
                bursts
                    .iter()
                    .any(|b| px(b.t0_s) <= r.1 + 1.0 && px(b.t1_s.min(span_s)) >= r.0 - 1.0),
                "panel {p}: rect {r:?} covers no burst"
            );
        }
    }
    // Folding merged something: far fewer rects than bursts.
    assert!(rects.len() < bursts.len() / 10, "{} rects", rects.len());
}

#[test]
fn overlapping_shades_draw_one_rect_and_separate_ones_stay_apart() {
    let (t, v) = flat(1000, 10.0, 5.0);
    let tl = Timeline {
        x_range_s: (0.0, 10.0),
        shades: vec![
            // Two overlapping spans and one inside them: one rect, not three layers.
            Shade {
                t0_s: 2.0,
                t1_s: 3.0,
            },
            Shade {
                t0_s: 2.5,
                t1_s: 4.0,
            },
            Shade {
                t0_s: 2.2,
                t1_s: 2.3,
            },
            // Far away: its own rect.
            Shade {
                t0_s: 7.0,
                t1_s: 7.5,
            },
        ],
        ..timeline(vec![panel("a", vec![series("a", t, v, Style::Line)])])
    };
    let svg = render_svg(&tl);
    let rects = shade_rects(&svg);
    assert_eq!(rects.len(), 2, "{rects:?}");
    let f = &frames(&svg)[0];
    let px = |ts: f64| f.left as f64 + ts / 10.0 * (f.right - f.left) as f64;
    assert!((rects[0].0 - px(2.0)).abs() <= 1.0, "{rects:?}");
    assert!(
        (rects[0].0 + rects[0].2 - px(4.0)).abs() <= 1.5,
        "{rects:?}"
    );
    assert!((rects[1].0 - px(7.0)).abs() <= 1.0, "{rects:?}");
}

#[test]
fn thousands_of_events_draw_at_most_one_marker_line_per_pixel_column() {
    // 6,000 "trigger" events over 6 h (every 3.6 s): many share a pixel column.
    let span_s = 6.0 * 3600.0;
    let events: Vec<Marker> = (0..6000)
        .map(|i| Marker {
            t_s: i as f64 * 3.6,
            label: "trigger".into(),
        })
        .collect();
    let (t, v) = flat(1000, span_s, 5.0);
    let tl = Timeline {
        x_range_s: (0.0, span_s),
        events: events.clone(),
        ..timeline(vec![panel("a", vec![series("a", t, v, Style::Line)])])
    };
    let svg = render_svg(&tl);
    let f = frames(&svg)[0];
    let plot_w = (f.right - f.left + 1) as usize;
    // One event alone draws a line of this many dashes.
    let one = {
        let tl1 = Timeline {
            events: events[..1].to_vec(),
            ..tl.clone()
        };
        polylines(&render_svg(&tl1), MARKER).len()
    };
    let dashes = polylines(&svg, MARKER);
    let mut xs: Vec<i32> = dashes.iter().flatten().map(|p| p.0).collect();
    xs.sort_unstable();
    xs.dedup();
    assert!(xs.len() <= plot_w, "{} marker columns", xs.len());
    assert_eq!(
        dashes.len(),
        xs.len() * one,
        "each column's line drawn once"
    );
    // Every event still has its line.
    let px = |ts: f64| f.left as f64 + ts / span_s * (f.right - f.left) as f64;
    for e in &events {
        assert!(
            xs.iter().any(|&x| (x as f64 - px(e.t_s)).abs() <= 1.0),
            "event at {} s has no line",
            e.t_s
        );
    }
    let texts = labels(&svg)
        .into_iter()
        .filter(|l| l.text == "trigger")
        .count();
    assert!(texts <= plot_w, "{texts} labels");
}
