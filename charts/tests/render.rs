//! Renders whole timelines and checks what a reader of the SVG or PNG would see.

use charts::{render_png, render_svg, Marker, Panel, Series, Style, Timeline};
use resvg::usvg::{self, roxmltree};

fn series(label: &str, t_s: Vec<f64>, v: Vec<f64>, style: Style) -> Series {
    Series {
        label: label.into(),
        t_s,
        v,
        style,
        color: None,
    }
}

fn panel(title: &str, series: Vec<Series>) -> Panel {
    Panel {
        title: title.into(),
        y_label: "MiB/s".into(),
        series,
        y_min_zero: true,
    }
}

/// `n` samples evenly spaced over `[0, span_s)`, all `value`.
fn flat(n: usize, span_s: f64, value: f64) -> (Vec<f64>, Vec<f64>) {
    let t = (0..n).map(|i| i as f64 * span_s / n as f64).collect();
    (t, vec![value; n])
}

fn timeline(panels: Vec<Panel>) -> Timeline {
    Timeline {
        title: "test".into(),
        x_range_s: (0.0, 10.0),
        panels,
        ..Timeline::default()
    }
}

fn class_is<'a>(node: &roxmltree::Node<'a, 'a>, class: &str) -> bool {
    node.attribute("class") == Some(class)
}

/// The `d` attributes of all paths of a class, in document order.
fn paths(svg: &str, class: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("path") && class_is(n, class))
        .map(|n| n.attribute("d").unwrap_or_default().to_string())
        .collect()
}

fn subpaths(d: &str) -> usize {
    d.matches('M').count()
}

#[test]
fn svg_parses_and_has_one_group_per_panel_with_its_title() {
    let (t, v) = flat(1000, 10.0, 5.0);
    let titles = ["vda write MiB/s", "vda read MiB/s", "msgs/s <&> \"quoted\""];
    let t = timeline(
        titles
            .iter()
            .map(|title| panel(title, vec![series("a", t.clone(), v.clone(), Style::Line)]))
            .collect(),
    );
    let svg = render_svg(&t);

    usvg::Tree::from_str(&svg, &usvg::Options::default()).expect("usvg parses the SVG");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let groups: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && class_is(n, "panel"))
        .collect();
    assert_eq!(groups.len(), titles.len());
    for (g, want) in groups.iter().zip(titles) {
        let title = g
            .descendants()
            .find(|n| n.has_tag_name("text") && class_is(n, "panel-title"))
            .and_then(|n| n.text());
        assert_eq!(title, Some(want));
    }
}

#[test]
fn svg_is_standalone() {
    let (t, v) = flat(1000, 10.0, 5.0);
    let svg = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t, v, Style::Envelope)],
    )]));
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    for banned in ["href", "<script", "url(", "@import", " id=", "<?xml"] {
        assert!(!svg.contains(banned), "SVG contains {banned:?}");
    }
    assert!(svg.contains(r#"font-family="DejaVu Sans, sans-serif""#));
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
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let labels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && class_is(n, "y-axis"))
        .flat_map(|g| g.children().filter_map(|c| c.text()))
        .collect();
    assert_eq!(labels, ["0", "500", "1k", "1.5k"]);
    let frame = doc.descendants().find(|n| class_is(n, "frame")).unwrap();
    let num = |a: &str| frame.attribute(a).unwrap().parse::<f64>().unwrap();
    let (top, height) = (num("y"), num("height"));

    let bands = paths(&svg, "band");
    assert_eq!(bands.len(), 1);
    assert_eq!(subpaths(&bands[0]), 1, "one bar: the spike's column");
    let bar = bands[0].trim_start_matches('M');
    let (_, ys) = bar.split_once(',').unwrap();
    let (y_peak, y_base) = ys.split_once('V').unwrap();
    let (y_peak, y_base): (f64, f64) = (y_peak.parse().unwrap(), y_base.parse().unwrap());
    let want_peak = top + height - 1024.0 / 1500.0 * height;
    assert!(
        (y_peak - want_peak).abs() <= 0.051,
        "{y_peak} vs {want_peak}"
    );
    assert!((y_base - (top + height)).abs() <= 0.051);
}

#[test]
fn nan_values_split_a_point_by_point_line() {
    let t: Vec<f64> = (0..100).map(|i| i as f64 * 0.1).collect();
    let mut v = vec![3.0; 100];
    let whole = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t.clone(), v.clone(), Style::Line)],
    )]));
    assert_eq!(subpaths(&paths(&whole, "line")[0]), 1);

    for x in &mut v[40..50] {
        *x = f64::NAN;
    }
    let gapped = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t, v, Style::Line)],
    )]));
    let line = &paths(&gapped, "line")[0];
    assert_eq!(subpaths(line), 2, "{line}");
    assert!(!line.contains("NaN"));
}

#[test]
fn nan_values_split_a_downsampled_line_and_are_not_drawn_as_zero() {
    let (t, mut v) = flat(600_000, 10.0, 7.0);
    let whole = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t.clone(), v.clone(), Style::Envelope)],
    )]));
    let whole_line = paths(&whole, "line")[0].clone();
    assert_eq!(subpaths(&whole_line), 1);

    for x in &mut v[200_000..300_000] {
        *x = f64::NAN;
    }
    let gapped = render_svg(&timeline(vec![panel(
        "p",
        vec![series("a", t, v, Style::Envelope)],
    )]));
    let line = &paths(&gapped, "line")[0];
    assert_eq!(subpaths(line), 2, "{line}");
    // Every point of the line is at the value 7's height: no dip to zero.
    let ys: Vec<&str> = line
        .split(['M', 'L', ' '])
        .filter_map(|p| p.split_once(',').map(|(_, y)| y))
        .collect();
    assert!(ys.len() > 100);
    assert!(ys.iter().all(|y| *y == ys[0]), "flat line expected");
    // The gap is a sixth of the range wide: about a sixth of the points are missing.
    let whole_points = whole_line.matches(',').count() as f64;
    let ratio = ys.len() as f64 / whole_points;
    assert!((0.82..0.85).contains(&ratio), "{ratio}");
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
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let says_no_data: Vec<bool> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && class_is(n, "panel"))
        .map(|g| {
            g.descendants()
                .any(|n| n.has_tag_name("text") && n.text() == Some("no data"))
        })
        .collect();
    assert_eq!(says_no_data, [false, true, true, true, true]);
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
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let labels: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("g") && class_is(n, "y-axis"))
            .flat_map(|g| g.children().filter_map(|c| c.text()))
            .collect();
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
    assert!(svg.contains(">restart n2</text>"));
    assert!(!svg.contains(">outside</text>"));
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let x_labels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && class_is(n, "x-axis"))
        .flat_map(|g| g.children().filter_map(|c| c.text()))
        .collect();
    // 100..220 s: ticks every 10 s, in seconds.
    assert_eq!(x_labels.first(), Some(&"100"), "{x_labels:?}");
    assert!(x_labels.contains(&"220"), "{x_labels:?}");
    assert!(!x_labels.contains(&"0"), "{x_labels:?}");
}

/// Width, height and RGBA pixels of a PNG.
fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(png_bytes);
    let mut reader = decoder.read_info().expect("a valid PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.color_type, png::ColorType::Rgba);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
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
    let band = paths(&svg, "band").pop().expect("a band path");
    let (x, rest) = band.trim_start_matches('M').split_once(',').unwrap();
    let (y_top, y_bottom) = rest.split_once('V').unwrap();
    let x: f64 = x.parse().unwrap();
    let (y_top, y_bottom): (f64, f64) = (y_top.parse().unwrap(), y_bottom.parse().unwrap());
    assert!(y_bottom - y_top > 50.0, "the bar is tall");

    let (w, _, rgba) = decode(&render_png(&tl).unwrap());
    let pixel = |px: u32, py: u32| {
        let i = ((py * w + px) * 4) as usize;
        [rgba[i], rgba[i + 1], rgba[i + 2]]
    };
    let px = x.floor() as u32;
    // Just under the peak and halfway down, the spike's column is tinted blue...
    for py in [y_top.ceil() as u32 + 1, ((y_top + y_bottom) / 2.0) as u32] {
        let [r, g, b] = pixel(px, py);
        assert!(b > r && r < 230, "pixel ({px},{py}) = {:?}", [r, g, b]);
    }
    // ...while its neighbours a few pixels away are background (white or grey grid).
    let mid = ((y_top + y_bottom) / 2.0) as u32;
    for dx in [-4i32, 4] {
        let [r, g, b] = pixel(px.saturating_add_signed(dx), mid);
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
        eprintln!("skipped: DejaVu Sans is not installed (apt-get install fonts-dejavu-core)");
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
