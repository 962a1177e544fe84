//! The job files against the issue's list: together they set every option it names.

use super::{all_job_files, JOBS_DIR};
use std::path::Path;

/// The issue's point 1, option by option: each must be set by at least one job file (a
/// key, or `key=value` for a value that is its own case), so the comparison covers it.
const ISSUE_OPTIONS: &[&str] = &[
    "stonewall",
    "new_group",
    "wait_for",
    "numjobs",
    "group_reporting",
    "ioengine=libaio",
    "ioengine=io_uring",
    "ioengine=psync",
    "ioengine=sync",
    "ioengine=pvsync",
    "norandommap",
    "directory",
    "filename",
    "filesize",
    "nrfiles",
    "file_service_type",
    "openfiles",
    "buffered",
    "thread",
    "offset",
    "size",
    "io_size",
    "offset_increment",
    "rw=read:-8k",
    "bssplit",
    "bsrange",
    "blockalign",
    "random_distribution=zipf",
    "random_distribution=pareto",
    "random_distribution=zoned",
    "rate",
    "rate_iops",
    "ratemin",
    "rate_process",
    "thinktime",
    "number_ios",
    "loops",
    "startdelay",
    "ramp_time",
    "timeout",
    "verify=crc32c",
    "verify=crc64",
    "verify=md5",
    "verify=meta",
    "verify=pattern",
    "zonemode=strided",
    "zonesize",
    "zoneskip",
    "rw=trim",
    "rw=randtrim",
    "rw=trimwrite",
    "fill_device",
    "write_bw_log",
    "write_iops_log",
    "write_lat_log",
    "log_avg_msec",
    "log_offset",
    "description",
    "invalidate",
];

#[test]
fn the_job_files_together_use_every_option_of_issue_26() {
    let files = all_job_files();
    let mut text = String::new();
    for f in files
        .iter()
        .chain([&Path::new(JOBS_DIR).join("corrupt/verify.fio")])
    {
        text.push_str(&std::fs::read_to_string(f).unwrap());
        text.push('\n');
    }
    let mut set: Vec<String> = vec![];
    let mut inline_comment = false;
    let mut buffered = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with(';') || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let bare = line.split([';', '#']).next().unwrap().trim();
        inline_comment |= bare.len() < line.len();
        set.push(bare.replace(' ', ""));
    }
    for job in &files {
        let t = std::fs::read_to_string(job).unwrap();
        buffered |= !t.lines().any(|l| l.trim().starts_with("direct"));
    }
    let missing: Vec<&&str> = ISSUE_OPTIONS
        .iter()
        .filter(|o| {
            !set.iter().any(|s| {
                s == *o || s.starts_with(&format!("{o}=")) || s.starts_with(&format!("{o}:"))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "no job file in tests/fio-jobs uses {missing:?}"
    );
    assert!(inline_comment, "no job file has an inline comment");
    assert!(
        buffered,
        "no job file leaves direct= to fio's default (buffered)"
    );
    assert!(
        files.len() >= 30,
        "{} job files; the issue asks for 30",
        files.len()
    );
}
