//! args_where's unit tests (beside it to keep it under 800 lines).
use super::*;

fn res(w: WhereArgs, rw: &str) -> anyhow::Result<Placed> {
    let (m, n) = split_rw(rw);
    resolve(&w, Rw::parse(m).unwrap(), n, [4096, 4096], None)
}

#[test]
fn strides_and_runs_follow_the_rw_mode() {
    let p = res(WhereArgs::default(), "read:-8k").unwrap().place;
    assert_eq!(p.seq_add, -8192);
    let p = res(WhereArgs::default(), "write:112k").unwrap().place;
    assert_eq!(p.seq_add, 112 * 1024);
    let p = res(WhereArgs::default(), "randread:8").unwrap().place;
    assert_eq!((p.seq_nr, p.seq_add), (8, 0));
    assert!(res(WhereArgs::default(), "read:x").is_err());
    assert!(res(WhereArgs::default(), "randread:0").is_err());
}

#[test]
fn bssplit_fills_missing_shares_and_sets_the_largest_size() {
    let w = WhereArgs {
        bssplit: Some("4k/10:64k/50:32k".into()),
        ..Default::default()
    };
    let r = res(w, "randread").unwrap();
    assert_eq!(r.bs, [65536, 65536]);
    let BsChoice::Split(v) = &r.place.bs[0] else {
        panic!()
    };
    assert_eq!(v, &vec![(4096, 10.0), (32768, 40.0), (65536, 50.0)]);
    let w = WhereArgs {
        bssplit: Some("4k/60:8k/60".into()),
        ..Default::default()
    };
    assert!(res(w, "read").err().unwrap().to_string().contains("120"));
}

#[test]
fn distributions_and_zones_parse_as_fio_writes_them() {
    let w = WhereArgs {
        random_distribution: Some("zipf:1.2".into()),
        ..Default::default()
    };
    let p = res(w, "randread").unwrap().place;
    assert!(!p.randommap, "a non-uniform distribution has no random map");
    let w = WhereArgs {
        random_distribution: Some("zoned:60/10:30/20:10/70".into()),
        ..Default::default()
    };
    assert!(matches!(
        res(w, "randread").unwrap().place.dist,
        Dist::Zoned(_)
    ));
    // fio's examples/rand-zones.fio: the last region share left out is the rest.
    let w = WhereArgs {
        random_distribution: Some("zoned:50/5:30/15:20/".into()),
        ..Default::default()
    };
    let Dist::Zoned([r, _]) = res(w, "randread").unwrap().place.dist else {
        panic!()
    };
    assert_eq!(r, vec![(50.0, 5.0), (30.0, 15.0), (20.0, 80.0)]);
    let w = WhereArgs {
        random_distribution: Some("zoned:60/10:30/20".into()),
        ..Default::default()
    };
    assert!(res(w, "randread").err().unwrap().to_string().contains("90"));
    for bad in ["zipf:1", "pareto:2", "lognormal:1"] {
        let w = WhereArgs {
            random_distribution: Some(bad.into()),
            ..Default::default()
        };
        assert!(res(w, "randread").is_err(), "{bad}");
    }
    let w = WhereArgs {
        zonesize: Some("16k".into()),
        zoneskip: Some("32k".into()),
        ..Default::default()
    };
    let z = res(w, "read").unwrap().place.zone.unwrap();
    assert_eq!((z.size, z.range, z.skip), (16384, 16384, 32768));
    let w = WhereArgs {
        zonemode: Some("zbd".into()),
        ..Default::default()
    };
    assert!(res(w, "read")
        .err()
        .unwrap()
        .to_string()
        .contains("zoned block"));
}

#[test]
fn sizes_take_percentages() {
    assert_eq!(parse_size_arg("50%"), Ok(SizeArg::Pct(50.0)));
    assert_eq!(parse_size_arg("8k"), Ok(SizeArg::Bytes(8192)));
    assert!(parse_size_arg("150%").is_err());
    let w = WhereArgs {
        offset: Some("10%".into()),
        offset_increment: Some("64k".into()),
        ..Default::default()
    };
    let p = res(w, "read").unwrap().place;
    assert_eq!(p.offset, Amount::Pct(10.0));
    assert_eq!(p.offset_increment, Amount::Bytes(65536));
}

#[test]
fn a_blockalign_other_than_the_smallest_block_turns_the_random_map_off_as_in_fio() {
    let w = |ba: &str, range: Option<&str>| WhereArgs {
        blockalign: Some(ba.into()),
        bsrange: range.map(Into::into),
        ..Default::default()
    };
    // tests/fio-jobs/bsrange-blockalign.fio: bsrange=4k-64k blockalign=8k.
    let r = res(w("8k", Some("4k-64k")), "randread").unwrap();
    assert!(!r.place.randommap);
    assert!(r.notes[0].starts_with("fio: Any use of blockalign= turns off randommap"));
    // The smallest size, or a sequential job (fio ignores blockalign there): map kept.
    for (ba, range, rw) in [
        ("4k", Some("4k-64k"), "randread"),
        ("4k", None, "randwrite"),
        ("8k", Some("4k-64k"), "read"),
    ] {
        let r = res(w(ba, range), rw).unwrap();
        assert!(
            r.place.randommap && r.notes.is_empty(),
            "{ba} {range:?} {rw}"
        );
    }
    // bsrange alone keeps the map (fio trims an I/O at the first used block instead).
    let r = res(
        WhereArgs {
            bsrange: Some("4k-64k".into()),
            ..Default::default()
        },
        "randread",
    )
    .unwrap();
    assert!(r.place.randommap);
}
