//! The probe against block devices it may write: a cgroup-throttled loop device, several
//! jobs sharing one claimed device.

use super::*;

fn write_iops(o: &Output) -> f64 {
    assert!(o.status.success(), "{}", text(&o.stderr));
    json_of(o)["jobs"][0]["write"]["iops"].as_f64().unwrap()
}

#[test]
fn a_throttled_loop_device_shows_up_as_slower() {
    if !can_use_loop_devices() {
        return;
    }
    let _t = timing();
    let _lock = cgroup::lock();
    let Some(h) = cgroup::hierarchy() else {
        return;
    };
    let lo = LoopDev::new("64M");
    let args = [
        "probe",
        "--filename",
        &lo.dev,
        "--allow-destructive",
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--runtime",
        "1500ms",
        "--time-based",
        "--output-format",
        "json",
    ];
    let free = write_iops(&diskpulse().args(args).output().unwrap());
    let cg = cgroup::Throttled::new(&h, &lo.dev, 200);
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let mut argv = vec![bin];
    argv.extend_from_slice(&args);
    let capped = write_iops(&cg.command(&argv).output().unwrap());
    eprintln!("write IOPS: {free:.0} unthrottled, {capped:.0} capped at 200");
    assert!(
        (150.0..=260.0).contains(&capped),
        "capped at 200 write IOPS, the probe saw {capped:.0}"
    );
    assert!(
        free > 3.0 * capped,
        "unthrottled {free:.0} vs throttled {capped:.0}"
    );

    // Asked for 1000/s from a device capped at 200/s: the run still ends on time, says
    // how many scheduled I/Os it never issued, and the latency from the intended start
    // (coordinated omission corrected) shows the backlog that clat alone hides.
    let mut argv = vec![bin];
    argv.extend_from_slice(&args);
    argv.extend_from_slice(&["--rate-iops-total", "1000", "--iodepth", "4"]);
    let t = std::time::Instant::now();
    let o = cg.command(&argv).output().unwrap();
    let took = t.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let w = &j["jobs"][0]["write"];
    let done = w["total_ios"].as_u64().unwrap();
    let missed = j["diskpulse"]["rate_missed_ios"].as_u64().unwrap();
    let co_p99 = w["lat_co_ns"]["percentile"]["99.000000"].as_u64().unwrap();
    let clat_p99 = w["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap();
    eprintln!("rate 1000 on a 200 cap: {done} done, {missed} missed, clat p99 {clat_p99} ns, lat_co p99 {co_p99} ns, {took:.2}s");
    assert!(took < 3.5, "a 1.5 s run took {took:.2}s");
    assert!(
        (900..=1_600).contains(&(done + missed)),
        "{done} + {missed} of 1500 scheduled"
    );
    assert!(missed > 800, "{missed}");
    assert!(
        co_p99 > 500_000_000,
        "lat_co p99 {co_p99} ns: the backlog grows to ~1 s"
    );
    // clat alone stays at the throttle's own queueing (tens to hundreds of ms here).
    assert!(
        co_p99 > 2 * clat_p99,
        "clat p99 {clat_p99} ns vs lat_co p99 {co_p99} ns"
    );
}

#[test]
fn several_jobs_share_a_claimed_block_device() {
    let Some(lo) = ShmLoop::new("64M") else {
        return;
    };
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            &lo.dev,
            "--allow-destructive",
            "--rw",
            "randwrite",
            "--numjobs",
            "3",
            "--runtime",
            "300ms",
            "--time-based",
            "--output-format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3, "fio prints one entry per job");
    for job in jobs {
        assert!(job["write"]["total_ios"].as_u64().unwrap() > 0, "{job}");
    }
}
