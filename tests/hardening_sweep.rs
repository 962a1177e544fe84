//! Issue 10 point 5: a sweep over every subcommand's flags with the values a careless or
//! adversarial user types (empty, zero, negative, huge, wrong unit, NaN, non-UTF-8,
//! pseudo-file-system paths, missing parents, conflicting and repeated flags, bad URLs).
//!
//! One row per case: argv, the exit code, a piece of the message. Every row is also
//! checked for what must hold of any refusal: no panic (no "panicked at", no backtrace),
//! no hang (each row has a deadline), our own errors are one line, nothing written (the
//! working directory and the fixtures are unchanged, no path the row names under `{T}` is
//! created) and no process left in the row's process group. The binary refuses before it
//! does any work, so a row takes milliseconds and needs no root and no nats-server.
//!
//! Placeholders in a row: `{T}` the row's own (empty) working directory, `{F}` an existing
//! regular file, `{D}` an existing empty directory, `{X}` two bytes that are not UTF-8.

mod common;
use common::*;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One case: the argv after `diskpulse`, the exit code, a piece of stderr.
struct Row {
    code: i32,
    msg: &'static str,
    args: &'static [&'static str],
}

macro_rules! rows {
    ($( $code:literal, $msg:literal, [$($a:literal),* $(,)?]; )*) => {
        &[ $( Row { code: $code, msg: $msg, args: &[$($a),*] }, )* ]
    };
}

/// The sweep. Expected behaviour is the rule: bad input exits 2 with one line naming the
/// input (clap's own errors start with "error:" and also exit 2).
const ROWS: &[Row] = rows![
    // record
    2, "shortest is 100us", ["record", "--interval", "0ms", "--duration", "1s"];
    2, "shortest is 100us", ["record", "--interval", "50us", "--duration", "1s"];
    2, "invalid value ''", ["record", "--interval", ""];
    2, "unexpected argument '-1'", ["record", "--interval", "-1ms"];
    2, "'1e30s'", ["record", "--interval", "1e30s"];
    2, "'NaNs'", ["record", "--interval", "NaNs"];
    2, "'infms'", ["record", "--interval", "infms"];
    2, "'5parsecs'", ["record", "--duration", "5parsecs"];
    2, "'10'", ["record", "--duration", "10"];
    2, "31 years", ["record", "--duration", "99999999999999999999h"];
    2, "longer than --duration", ["record", "--interval", "1h", "--duration", "1s"];
    2, "--mem-interval 0s", ["record", "--mem-interval", "0s", "--duration", "1s"];
    2, "--cpu-interval 0s", ["record", "--cpu-interval", "0s", "--duration", "1s"];
    2, "--cpu-interval", ["record", "--cpu-interval", "12s", "--duration", "300ms"];
    2, "--duration must be above 0", ["record", "--duration", "0s"];
    2, "unknown device 'nosuchdev'", ["record", "--device", "nosuchdev", "--duration", "1s"];
    2, "unknown device '999:999'", ["record", "--device", "999:999", "--duration", "1s"];
    2, "unknown device ''", ["record", "--device", "", "--duration", "1s"];
    2, "invalid UTF-8", ["record", "--device", "{X}", "--duration", "1s"];
    2, "'{T}/nope'", ["record", "--path", "{T}/nope", "--duration", "1s"];
    2, "is on proc", ["record", "--path", "/proc", "--duration", "1s"];
    2, "is on sysfs", ["record", "--path", "/sys/kernel", "--duration", "1s"];
    2, "a value is required for '--path", ["record", "--path", "", "--duration", "1s"];
    2, "--out /proc/x", ["record", "--out", "/proc/x", "--duration", "1s"];
    2, "--out {F}", ["record", "--out", "{F}", "--duration", "1s"];
    2, "--out /dev/null", ["record", "--out", "/dev/null", "--duration", "1s"];
    2, "--out /sys/kernel", ["record", "--out", "/sys/kernel", "--duration", "1s"];
    2, "cannot be used multiple times", ["record", "--duration", "1s", "--duration", "2s"];
    2, "--out /proc/sys/x", ["record", "--out", "/proc/sys/x", "--duration", "1s"];
    2, "the command is empty", ["record", "--duration", "1s", "--out", "{T}/o", "--", ""];
    2, "cannot run it", ["record", "--duration", "1s", "--out", "{T}/o", "--", "{T}/no-such-cmd"];
    2, "is a directory", ["record", "--duration", "1s", "--out", "{T}/o", "--", "{D}"];
    2, "not executable", ["record", "--duration", "1s", "--out", "{T}/o", "--", "{F}"];
    2, "invalid UTF-8", ["record", "--duration", "1s", "--", "{X}"];
    2, "'{T}/{X}'", ["record", "--path", "{T}/{X}", "--duration", "1s"];
    2, "unexpected argument '--nope'", ["record", "--nope"];
    // report
    2, "not a directory", ["report", "{T}/nope"];
    2, "a value is required for '<RUN>'", ["report", ""];
    2, "no meta.json", ["report", "/proc"];
    2, "not a directory", ["report", "{F}"];
    2, "no meta.json", ["report", "{D}"];
    2, "not a directory", ["report", "/dev/null"];
    2, "not a directory", ["report", "{T}/{X}"];
    2, "--window must be at least 1ms", ["report", "{D}", "--window", "0s"];
    2, "'1e30s'", ["report", "{D}", "--window", "1e30s"];
    2, "--ui-average must be at least 10ms", ["report", "{D}", "--ui-average", "0s"];
    2, "cannot be used multiple times", ["report", "{D}", "--json", "--json"];
    2, "'99999999h' is longer", ["report", "{D}", "--window", "99999999h"];
    2, "unexpected argument", ["report", "{D}", "{D}"];
    2, "required arguments were not provided", ["report"];
    // bench
    2, "must be above 0", ["bench", "--duration", "0s"];
    2, "--interval 0s", ["bench", "--interval", "0s"];
    2, "--interval 3600s", ["bench", "--interval", "1h"];
    2, "must be above 0", ["bench", "--devices", "0"];
    2, "number too large", ["bench", "--devices", "99999999999999999999"];
    2, "unexpected argument '-1'", ["bench", "--devices", "-1"];
    2, "must be above 0", ["bench", "--iterations", "0"];
    2, "--iterations 18446744073709551615", ["bench", "--iterations", "18446744073709551615"];
    2, "invalid digit", ["bench", "--iterations", "1e9"];
    2, "--duration", ["bench", "--duration", "99999h"];
    // fsync
    2, "'{T}/nope'", ["fsync", "--dir", "{T}/nope"];
    2, "is on proc", ["fsync", "--dir", "/proc"];
    2, "is on sysfs", ["fsync", "--dir", "/sys"];
    2, "is on proc", ["fsync", "--dir", "/proc/sys"];
    2, "is not one", ["fsync", "--dir", "{F}"];
    2, "a value is required for '--dir", ["fsync", "--dir", ""];
    2, "'{T}/{X}'", ["fsync", "--dir", "{T}/{X}"];
    2, "the shortest is 10ms", ["fsync", "--secs-per-test", "0s"];
    2, "31 years", ["fsync", "--secs-per-test", "1000000000h"];
    2, "--secs-per-test", ["fsync", "--secs-per-test", "99999h"];
    2, "no test 'nosuch'", ["fsync", "--only", "nosuch"];
    2, "no test ''", ["fsync", "--only", ""];
    2, "no test ''", ["fsync", "--only", ",,"];
    2, "invalid UTF-8", ["fsync", "--only", "{X}"];
    2, "the file exists", ["fsync", "-f", "{F}", "-s", "1"];
    2, "'{T}/nope'", ["fsync", "-f", "{T}/nope/pg.out"];
    2, "is on proc", ["fsync", "-f", "/proc/pg.out"];
    2, "takes a file name", ["fsync", "-f", "{T}/"];
    2, "cannot be used with", ["fsync", "-f", "{T}/pg.out", "--dir", "{D}"];
    2, "takes a duration", ["fsync", "-f", "{T}/pg.out", "-s", "five"];
    2, "the shortest is 10ms", ["fsync", "-f", "{T}/pg.out", "-s", "0"];
    2, "cannot be used with", ["record", "--progress", "--no-progress", "--duration", "1s", "--out", "{T}/o"];
    // probe
    2, "is on proc", ["probe", "--filename", "/proc/version"];
    2, "is on sysfs", ["probe", "--filename", "/sys/kernel/x"];
    2, "does not exist", ["probe", "--filename", "{T}/no/dir/f"];
    2, "is a directory", ["probe", "--filename", "{D}"];
    2, "a value is required for '--filename", ["probe", "--filename", ""];
    2, "neither a regular file nor a block device", ["probe", "--filename", "/dev/null"];
    2, "neither a regular file nor a block device", ["probe", "--filename", "/dev/zero", "--rw", "write"];
    2, "does not exist", ["probe", "--filename", "{T}/nodir/{X}"];
    2, "smaller than the block size", ["probe", "--filename", "{T}/p.dat", "--size", "0"];
    2, "'1e30'", ["probe", "--filename", "{T}/p.dat", "--size", "1e30"];
    2, "--size", ["probe", "--filename", "{T}/p.dat", "--size", "18446744073709551615"];
    2, "--size", ["probe", "--filename", "{T}/p.dat", "--size", "16383G"];
    2, "'100T'", ["probe", "--filename", "{T}/p.dat", "--size", "100T"];
    2, "(0 bytes)", ["probe", "--filename", "{T}/p.dat", "--bs", "0"];
    2, "smaller than the block size", ["probe", "--filename", "{T}/p.dat", "--bs", "1G", "--size", "4k"];
    2, "got '4k,4k,4k'", ["probe", "--filename", "{T}/p.dat", "--bs", "4k,4k,4k"];
    2, "got ','", ["probe", "--filename", "{T}/p.dat", "--bs", ","];
    2, "got 'nope'", ["probe", "--filename", "{T}/p.dat", "--rw", "nope"];
    2, "from 0 to 100; got 101", ["probe", "--filename", "{T}/p.dat", "--rwmixread", "101"];
    2, "got NaN", ["probe", "--filename", "{T}/p.dat", "--rwmixread", "NaN"];
    2, "unexpected argument '-1'", ["probe", "--filename", "{T}/p.dat", "--rwmixread", "-1"];
    2, "cannot be used with", ["probe", "--filename", "{T}/p.dat", "--rwmixread", "30", "--rwmixwrite", "30"];
    2, "1 to 4096; got 0", ["probe", "--filename", "{T}/p.dat", "--iodepth", "0"];
    2, "1 to 4096; got 100000", ["probe", "--filename", "{T}/p.dat", "--iodepth", "100000"];
    2, "needs --ioengine io_uring", ["probe", "--filename", "{T}/p.dat", "--iodepth", "8", "--ioengine", "sync"];
    2, "1 to 256; got 0", ["probe", "--filename", "{T}/p.dat", "--numjobs", "0"];
    2, "1 to 256; got 100000", ["probe", "--filename", "{T}/p.dat", "--numjobs", "100000"];
    2, "got 'foo'", ["probe", "--filename", "{T}/p.dat", "--ioengine", "foo"];
    2, "0 or 1; got '2'", ["probe", "--filename", "{T}/p.dat", "--direct", "2"];
    2, "got 'maybe'", ["probe", "--filename", "{T}/p.dat", "--sync", "maybe"];
    2, "cannot be used with", ["probe", "--filename", "{T}/p.dat", "--fsync", "1", "--fdatasync", "1"];
    2, "does not write", ["probe", "--filename", "{T}/p.dat", "--fsync", "1", "--rw", "read"];
    2, "got 0", ["probe", "--filename", "{T}/p.dat", "--rate-iops-total", "0"];
    2, "got NaN", ["probe", "--filename", "{T}/p.dat", "--rate-iops-total", "NaN"];
    2, "at most 10000000", ["probe", "--filename", "{T}/p.dat", "--rate-iops-total", "18446744073709551615"];
    2, "got 'x'", ["probe", "--filename", "{T}/p.dat", "--rate-process", "x"];
    2, "--runtime must be above 0", ["probe", "--filename", "{T}/p.dat", "--runtime", "0s"];
    2, "'1e30s'", ["probe", "--filename", "{T}/p.dat", "--runtime", "1h", "--ramp", "1e30s"];
    2, "longer than --runtime", ["probe", "--filename", "{T}/p.dat", "--ramp", "1h", "--runtime", "300ms", "--time-based"];
    2, "needs --runtime", ["probe", "--filename", "{T}/p.dat", "--time-based"];
    2, "1ms or more; got 0s", ["probe", "--filename", "{T}/p.dat", "--window", "0s"];
    2, "--window 3600s", ["probe", "--filename", "{T}/p.dat", "--window", "1h", "--runtime", "1s"];
    2, "got 'nope'", ["probe", "--filename", "{T}/p.dat", "--preset", "nope"];
    2, "got 'xml'", ["probe", "--filename", "{T}/p.dat", "--output-format", "xml"];
    2, "unexpected argument '-1'", ["probe", "--filename", "{T}/p.dat", "--seed", "-1"];
    2, "does not exist", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--write-lat-log", "{T}/no/x"];
    2, "a value is required", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--write-lat-log", ""];
    2, "--write-lat-log /proc/x", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--write-lat-log", "/proc/x"];
    2, "got '{D}/'", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--write-lat-log", "{D}/"];
    // P3: log_offset alone runs as in fio (tests/probe_verify.rs); its value is checked.
    2, "invalid value 'x'", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--log-offset=x"];
    2, "--verify=crc7: diskpulse runs md5", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--verify", "crc7"];
    2, "--verify_pattern takes 0x", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--verify-pattern", "0xzz"];
    2, "--verify=pattern needs --verify_pattern", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--verify", "pattern"];
    2, "--verify_only needs --verify", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--verify-only"];
    2, "--verify_interval 100", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--verify", "md5", "--verify-interval", "100"];
    2, "--do_verify takes 0 or 1", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--verify", "md5", "--do-verify=2"];
    2, "does not exist", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--write-bw-log", "{T}/no/x"];
    2, "--write-iops-log /proc/x", ["probe", "--filename", "{T}/p.dat", "--size", "1M", "--write-iops-log", "/proc/x"];
    // check
    2, "required arguments were not provided", ["check"];
    2, "neither an existing path nor a block device", ["check", "{T}/nope"];
    2, "unknown device ''", ["check", ""];
    2, "is on proc", ["check", "/proc"];
    2, "is on sysfs", ["check", "/sys/block"];
    2, "is on devtmpfs", ["check", "/dev/null"];
    2, "unknown device 'nosuchdev'", ["check", "nosuchdev"];
    2, "unknown device '999:999'", ["check", "999:999"];
    2, "invalid UTF-8", ["check", "{T}/{X}"];
    2, "--sample takes 10ms to 10m; got 0s", ["check", "/", "--sample", "0s"];
    2, "--sample takes 10ms to 10m; got 3600s", ["check", "/", "--sample", "1h"];
    2, "--test-time takes 10ms to 10m; got 5ms", ["check", "/", "--test-time", "5ms"];
    2, "'1e30s'", ["check", "/", "--test-time", "1e30s"];
    2, "cannot be used multiple times", ["check", "/", "--sample", "1s", "--sample", "2s"];
    // load (refused before any broker is started or reached)
    2, "required arguments were not provided", ["load"];
    2, "invalid value 'nope'", ["load", "nope"];
    2, "an empty server URL", ["load", "pub", "--server", "", "--duration", "1s"];
    2, "scheme 'http'", ["load", "pub", "--server", "http://127.0.0.1:4222", "--duration", "1s"];
    2, "port '0'", ["load", "pub", "--server", "nats://127.0.0.1:0", "--duration", "1s"];
    2, "port '99999'", ["load", "pub", "--server", "nats://127.0.0.1:99999", "--duration", "1s"];
    2, "closing ']'", ["load", "pub", "--server", "nats://[::1", "--duration", "1s"];
    2, "invalid UTF-8", ["load", "pub", "--server", "{X}", "--duration", "1s"];
    2, "--clients must be at least 1", ["load", "pub", "--clients", "0", "--duration", "1s"];
    2, "file descriptors", ["load", "pub", "--clients", "100000000", "--duration", "1s"];
    2, "--clients 18446744073709551615", ["load", "pub", "--clients", "18446744073709551615", "--duration", "1s"];
    2, "--msgs must be at least 1", ["load", "pub", "--msgs", "0"];
    2, "--duration must be more than 0s", ["load", "pub", "--duration", "0s"];
    2, "at most 168h", ["load", "pub", "--duration", "1000h"];
    2, "64 MiB", ["load", "pub", "--size", "100G", "--duration", "1s"];
    2, "got 0", ["load", "pub", "--rate", "0", "--duration", "1s"];
    2, "got NaN", ["load", "pub", "--rate", "NaN", "--duration", "1s"];
    2, "got inf", ["load", "pub", "--rate", "inf", "--duration", "1s"];
    2, "at most 100000000 ops/s", ["load", "pub", "--rate", "1e30", "--duration", "1s"];
    2, "unexpected argument '-1'", ["load", "pub", "--rate", "-1", "--duration", "1s"];
    2, "--window must be at least 1", ["load", "pub", "--window", "0", "--duration", "1s"];
    2, "--timeout must be more than 0s", ["load", "request", "--timeout", "0s", "--duration", "1s"];
    2, "--stream ''", ["load", "js-pub", "--stream", "", "--duration", "1s"];
    2, "--stream 'a.b'", ["load", "js-pub", "--stream", "a.b", "--duration", "1s"];
    2, "--stream 'a b'", ["load", "js-pub", "--stream", "a b", "--duration", "1s"];
    2, "--stream '../x'", ["load", "js-consume", "--stream", "../x", "--duration", "1s"];
    2, "--subject ''", ["load", "pub", "--subject", "", "--duration", "1s"];
    2, "--subject 'a b'", ["load", "pub", "--subject", "a b", "--duration", "1s"];
    2, "--subject 'a..b'", ["load", "pub", "--subject", "a..b", "--duration", "1s"];
    2, "--subject '.a'", ["load", "pub", "--subject", ".a", "--duration", "1s"];
    2, "invalid UTF-8", ["load", "pub", "--subject", "{X}", "--duration", "1s"];
    2, "--bucket 'a/b'", ["load", "kv-put", "--bucket", "a/b", "--duration", "1s"];
    2, "--bucket ''", ["load", "kv-put", "--bucket", "", "--duration", "1s"];
    2, "--bucket 'a.b'", ["load", "obj-put", "--bucket", "a.b", "--duration", "1s"];
    2, "1 to 5, got 0", ["load", "js-pub", "--replicas", "0", "--duration", "1s"];
    2, "1 to 5, got 7", ["load", "js-pub", "--replicas", "7", "--duration", "1s"];
    2, "--max-bytes must be more than 0", ["load", "js-pub", "--max-bytes", "0", "--duration", "1s"];
    2, "--batch must be at least 1", ["load", "js-consume", "--batch", "0", "--duration", "1s"];
    2, "--keys must be at least 1", ["load", "kv-put", "--keys", "0", "--duration", "1s"];
    2, "1k to 1024k, got 0 bytes", ["load", "obj-put", "--object-size", "0", "--duration", "1s"];
    2, "1k to 1024k", ["load", "obj-put", "--object-size", "10G", "--duration", "1s"];
    2, "--objects must be at least 1", ["load", "obj-put", "--objects", "0", "--duration", "1s"];
    2, "at least 1", ["load", "obj-put", "--workers", "0", "--duration", "1s"];
    2, "at most 1024", ["load", "pub", "--threads", "100000", "--duration", "1s"];
    2, "at least 1ms", ["load", "pub", "--stats-window", "0s", "--duration", "1s"];
    2, "longer than --duration", ["load", "pub", "--stats-window", "1h", "--duration", "1s"];
    2, "--csv {T}/no/x.csv", ["load", "pub", "--csv", "{T}/no/x.csv", "--duration", "1s"];
    2, "--csv /proc/x.csv", ["load", "pub", "--csv", "/proc/x.csv", "--duration", "1s"];
    2, "--csv {D}", ["load", "pub", "--csv", "{D}", "--duration", "1s"];
    2, "1, 3 or 5 nodes, got 2", ["load", "pub", "--cluster", "2", "--duration", "1s"];
    2, "1, 3 or 5 nodes, got 0", ["load", "pub", "--cluster", "0", "--duration", "1s"];
    2, "--store-dir {T}/no/such", ["load", "pub", "--store-dir", "{T}/no/such", "--duration", "1s"];
    2, "--store-dir /proc", ["load", "pub", "--store-dir", "/proc", "--duration", "1s"];
    2, "--store-dir {F}", ["load", "pub", "--store-dir", "{F}", "--duration", "1s"];
    2, "a value is required for '--store-dir", ["load", "pub", "--store-dir", "", "--duration", "1s"];
    2, "got 'nope'", ["load", "pub", "--sync-interval", "nope", "--duration", "1s"];
    2, "got '0s'", ["load", "pub", "--sync-interval", "0s", "--duration", "1s"];
    2, "--nats-server {T}/nope", ["load", "pub", "--nats-server", "{T}/nope", "--duration", "1s"];
    2, "not executable", ["load", "pub", "--nats-server", "{F}", "--duration", "1s"];
    2, "--monitor 'ftp://x'", ["load", "pub", "--monitor", "ftp://x", "--duration", "1s"];
    2, "--monitor 'http://127.0.0.1:0'", ["load", "pub", "--monitor", "http://127.0.0.1:0", "--duration", "1s"];
    2, "--monitor-interval", ["load", "pub", "--record", "--out", "{T}/o", "--monitor-interval", "0s", "--duration", "1s"];
    2, "--out /proc/x", ["load", "pub", "--record", "--out", "/proc/x", "--duration", "1s"];
    2, "--out {F}", ["load", "pub", "--record", "--out", "{F}", "--duration", "1s"];
    2, "needs --record", ["load", "pub", "--out", "{T}/o", "--duration", "1s"];
    2, "needs --record", ["load", "pub", "--device", "vda", "--duration", "1s"];
    2, "needs --record", ["load", "pub", "--path", "/", "--duration", "1s"];
    2, "needs --record", ["load", "pub", "--interval", "10ms", "--duration", "1s"];
    2, "shortest is 100us", ["load", "pub", "--record", "--out", "{T}/o", "--interval", "0s", "--duration", "1s"];
    2, "longer than --duration", ["load", "pub", "--record", "--out", "{T}/o", "--interval", "1h", "--duration", "1s"];
    2, "--cpu-interval", ["load", "pub", "--record", "--out", "{T}/o", "--cpu-interval", "1h", "--duration", "1s"];
    2, "unknown device 'nosuch'", ["load", "pub", "--record", "--device", "nosuch", "--duration", "1s"];
    2, "is on proc", ["load", "pub", "--record", "--path", "/proc", "--duration", "1s"];
    2, "go together", ["load", "pub", "--user", "u", "--duration", "1s"];
    2, "go together", ["load", "pub", "--tls-cert", "{T}/nope", "--duration", "1s"];
    2, "no such file", ["load", "pub", "--tls-ca", "{T}/nope", "--duration", "1s"];
    2, "no such file", ["load", "pub", "--creds", "{T}/nope", "--duration", "1s"];
    2, "no such file", ["load", "pub", "--nkey", "{T}/nope", "--duration", "1s"];
    2, "--creds {F}", ["load", "pub", "--creds", "{F}", "--duration", "1s"];
    2, "--token", ["load", "pub", "--token", "", "--duration", "1s"];
    2, "--user ''", ["load", "pub", "--user", "", "--password", "", "--duration", "1s"];
    2, "--sub 18446744073709551615", ["load", "pub", "--sub", "18446744073709551615", "--duration", "1s"];
    2, "--reply 18446744073709551615", ["load", "request", "--reply", "18446744073709551615", "--duration", "1s"];
    2, "--consumers 18446744073709551615", ["load", "obj-put", "--consumers", "18446744073709551615", "--duration", "1s"];
    2, "--consume 18446744073709551615", ["load", "js-pub", "--consume", "18446744073709551615", "--duration", "1s"];
    2, "at most 1000000 messages per pull", ["load", "js-consume", "--batch", "18446744073709551615", "--duration", "1s"];
    2, "--msg-id is for js-pub", ["load", "pub", "--msg-id", "--duration", "1s"];
    2, "--rate paces senders", ["load", "sub", "--rate", "5", "--duration", "1s"];
    2, "one per node (1); got 2", ["load", "pub", "--store-dir", "{T}/a,{T}/b", "--duration", "1s"];
    2, "are for the embedded broker", ["load", "pub", "--server", "nats://127.0.0.1:4222", "--cluster", "3", "--duration", "1s"];
    2, "shortest is 100us", ["load", "pub", "--record", "--out", "{T}/o", "--interval", "50us", "--duration", "1s"];
    // demo
    2, "--duration must be more than 0s", ["demo", "--duration", "0s"];
    2, "'1e30s'", ["demo", "--duration", "1e30s"];
    2, "got 'nope'", ["demo", "--sync-interval", "nope"];
    2, "--store-dir /proc", ["demo", "--store-dir", "/proc", "--duration", "1s"];
    2, "--store-dir {T}/no/such", ["demo", "--store-dir", "{T}/no/such", "--duration", "1s"];
    2, "--store-dir {F}", ["demo", "--store-dir", "{F}", "--duration", "1s"];
    2, "--store-dir", ["demo", "--store-dir", "{T}/{X}/x", "--duration", "1s"];
    2, "--out /proc/x", ["demo", "--out", "/proc/x", "--duration", "1s"];
    2, "--out {F}", ["demo", "--out", "{F}", "--duration", "1s"];
    2, "not executable", ["demo", "--nats-server", "{F}", "--duration", "1s"];
    2, "at most 1 MiB", ["demo", "--size", "2MiB", "--duration", "1s"];
    2, "--window must be at least 1", ["demo", "--window", "0", "--duration", "1s"];
    2, "at most 1000000 operations", ["demo", "--window", "18446744073709551615", "--duration", "1s"];
    2, "--interval 0s", ["demo", "--interval", "0s", "--duration", "1s"];
    2, "--interval 3600s", ["demo", "--interval", "1h", "--duration", "1s"];
    2, "--ui-average 0s", ["demo", "--ui-average", "0s", "--duration", "1s"];
    2, "--ui-average 1ms is too short", ["demo", "--ui-average", "1ms", "--duration", "1s"];
    2, "at most 168h", ["demo", "--duration", "1000h"];
    // run
    2, "cannot read scenario", ["run", "{T}/nope.toml"];
    2, "cannot read scenario", ["run", "{D}"];
    2, "/dev/null: it is a character device", ["run", "/dev/null", "--dry-run"];
    2, "/proc/self/status:1", ["run", "/proc/self/status", "--dry-run"];
    2, "{F}:1", ["run", "{F}", "--dry-run"];
    2, "cannot read scenario", ["run", "{T}/{X}.toml"];
    2, "required arguments were not provided", ["run"];
    // lab (refused before anything is made: no root needed)
    2, "required arguments were not provided", ["lab", "up"];
    2, "--root /proc", ["lab", "up", "vol0", "--size", "1G", "--fs", "ext4", "--root", "/proc"];
    2, "got 'a\\nb'", ["lab", "up", "a\nb", "--size", "1G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "got 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'", ["lab", "up", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "--size", "1G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "got 'a\\tb'", ["probe", "--filename", "{T}/p.dat", "--rw", "a\tb"];
    2, "got 'x\\ny'", ["load", "pub", "--sync-interval", "x\ny", "--duration", "1s"];
    2, "got 'ro,a b'", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--mount-options", "ro,a b", "--root", "{T}/lab"];
    2, "--root /sys/fs/cgroup", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--root", "/sys/fs/cgroup"];
    2, "cannot be used multiple times", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--size", "2G", "--root", "{T}/lab"];
    2, "got '../x'", ["lab", "up", "../x", "--size", "1G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "got ''", ["lab", "up", "", "--size", "1G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "got 'a/b'", ["lab", "up", "a/b", "--size", "1G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "invalid UTF-8", ["lab", "up", "{X}", "--size", "1G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "at least 16 MiB", ["lab", "up", "v", "--size", "0", "--fs", "ext4", "--root", "{T}/lab"];
    2, "'1T'", ["lab", "up", "v", "--size", "1T", "--fs", "ext4", "--root", "{T}/lab"];
    2, "at most 16 TiB", ["lab", "up", "v", "--size", "100000G", "--fs", "ext4", "--root", "{T}/lab"];
    2, "whole number of MiB", ["lab", "up", "v", "--size", "1000", "--fs", "ext4", "--root", "{T}/lab"];
    2, "got 'zfs'", ["lab", "up", "v", "--size", "1G", "--fs", "zfs", "--root", "{T}/lab"];
    2, "got '5'", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--raid", "5", "--root", "{T}/lab"];
    2, "use --fs btrfs for RAID", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--raid", "1", "--root", "{T}/lab"];
    2, "at least 2 devices; got 1", ["lab", "up", "v", "--size", "1G", "--fs", "btrfs", "--raid", "1", "--devices", "1", "--root", "{T}/lab"];
    2, "got 0", ["lab", "up", "v", "--size", "1G", "--fs", "btrfs", "--devices", "0", "--root", "{T}/lab"];
    2, "got 1000", ["lab", "up", "v", "--size", "1G", "--fs", "btrfs", "--devices", "1000", "--root", "{T}/lab"];
    2, "at most 16 devices; got 1000", ["lab", "up", "v", "--size", "1G", "--fs", "btrfs", "--raid", "0", "--devices", "1000", "--root", "{T}/lab"];
    2, "leave it out instead", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--write-iops", "0", "--root", "{T}/lab"];
    2, "unexpected argument '-5'", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--write-iops", "-5", "--root", "{T}/lab"];
    2, "'5parsecs'", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--write-bps", "5parsecs", "--root", "{T}/lab"];
    2, "leave it out instead", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--write-bps", "0", "--root", "{T}/lab"];
    2, "got 'maybe'", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--write-cache", "maybe", "--root", "{T}/lab"];
    2, "got ''", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--mount-options", "", "--root", "{T}/lab"];
    2, "--root {F} is not a directory", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--root", "{F}"];
    2, "a value is required for '--root", ["lab", "up", "v", "--size", "1G", "--fs", "ext4", "--root", ""];
    2, "no lab volume named 'x'", ["lab", "down", "x", "--root", "{T}/nope"];
    2, "required arguments were not provided", ["lab", "down"];
    2, "cannot be used with '--all'", ["lab", "down", "x", "--all"];
    2, "got '../x'", ["lab", "down", "../x", "--root", "{T}/lab"];
    2, "--root {F}", ["lab", "list", "--root", "{F}"];
    2, "not an IP address and port", ["record", "--duration", "1s", "--out", "{T}/o", "--listen", "localhost:9464"];
    2, "not an IP address and port", ["record", "--duration", "1s", "--out", "{T}/o", "--listen", ""];
    2, "not a directory", ["export", "{T}/nope", "--format", "influx"];
    2, "not a diskpulse recording", ["export", "{D}", "--format", "openmetrics"];
    2, "invalid value 'csv'", ["export", "{D}", "--format", "csv"];
    2, "a whole number of milliseconds", ["export", "{D}", "--format", "influx", "--step", "0s"];
    2, "--out {F}: exists", ["export", "{D}", "--format", "influx", "--out", "{F}"];
    2, "does not exist", ["export", "{D}", "--format", "influx", "--out", "{T}/no/x.lp"];
    2, "not a directory", ["view", "{T}/nope"];
    2, "not a diskpulse recording", ["view", "{D}"];
    2, "--allow-remote", ["view", "{D}", "--listen", "0.0.0.0:0"];
    2, "not an IP address and port", ["view", "{D}", "--listen", "localhost:9465"];
    2, "required arguments were not provided", ["view"];
    2, "unrecognized subcommand", ["lab", "nope"];
    // proxy
    2, "required arguments were not provided", ["proxy", "--delay", "1ms"];
    2, "unexpected argument '-1'", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "-1ms"];
    2, "'NaNs'", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "NaNs"];
    2, "at most 1h", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "2h"];
    2, "at most 10.000ms", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "10ms", "--jitter", "11ms"];
    2, "a third of the delay", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "10ms", "--jitter", "4ms", "--jitter-dist", "normal"];
    2, "expected host:port", ["proxy", "--upstream", "nowhere", "--delay", "1ms"];
    2, "cannot listen on 'nohost'", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "1ms", "--listen", "nohost"];
    2, "--duration must be more than 0s", ["proxy", "--upstream", "127.0.0.1:4222", "--delay", "1ms", "--duration", "0s"];
    2, "add --inject-latency", ["load", "request", "--jitter", "2ms"];
    2, "at most 1h", ["load", "request", "--inject-latency", "2h"];
    2, "TLS", ["load", "request", "--inject-latency", "10ms", "--server", "tls://127.0.0.1:4222"];
    2, "unrecognized subcommand", ["nope"];
];

/// What one row did wrong, or None.
fn try_row(row: &Row, fixtures: &Path, file: &Path, dir: &Path) -> Option<String> {
    let cwd = tempfile::tempdir().unwrap();
    let t = cwd.path().to_str().unwrap();
    let subst = |a: &str| -> OsString {
        let s = a
            .replace("{T}", t)
            .replace("{F}", file.to_str().unwrap())
            .replace("{D}", dir.to_str().unwrap());
        let mut bytes = vec![];
        for (i, part) in s.split("{X}").enumerate() {
            if i > 0 {
                bytes.extend_from_slice(b"\xff\xfe");
            }
            bytes.extend_from_slice(part.as_bytes());
        }
        OsString::from_vec(bytes)
    };
    let argv: Vec<OsString> = row.args.iter().map(|a| subst(a)).collect();
    let msg = row
        .msg
        .replace("{T}", t)
        .replace("{F}", file.to_str().unwrap())
        .replace("{D}", dir.to_str().unwrap())
        .replace("{X}", "\u{FFFD}\u{FFFD}");
    let shown = format!("{:?}", row.args);
    let fixtures_before = listing(fixtures);
    let mut child = diskpulse()
        .args(&argv)
        .current_dir(cwd.path())
        .env("RUST_BACKTRACE", "1")
        .env_remove("NATS_URL")
        .env_remove("DISKPULSE_RUN_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let mut wrong = vec![];
    match status {
        None => wrong.push("hung (killed after 30 s)".to_string()),
        Some(s) if s.code() != Some(row.code) => {
            wrong.push(format!("exit {:?}, expected {}", s.code(), row.code))
        }
        _ => {}
    }
    if err.contains("panicked at") || err.contains("stack backtrace") {
        wrong.push("panicked".into());
    }
    if !err.contains(&msg) {
        wrong.push(format!("message lacks {msg:?}"));
    }
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.first() {
        Some(l) if l.starts_with("Error: ") => {
            if lines.len() != 1 {
                wrong.push(format!("{} lines on stderr, expected one", lines.len()));
            }
        }
        Some(l) if l.starts_with("error: ") => {} // clap's own format
        _ => wrong.push("no error line on stderr".into()),
    }
    let left = listing(cwd.path());
    if !left.is_empty() {
        wrong.push(format!("wrote {left:?}"));
    }
    // Nor anything of its own elsewhere: an embedded broker's default store.
    for own in [
        format!("/var/tmp/diskpulse-load-{pgid}"),
        format!("/var/tmp/diskpulse-demo-{pgid}"),
    ] {
        if Path::new(&own).exists() {
            let _ = std::fs::remove_dir_all(&own);
            wrong.push(format!("left {own}"));
        }
    }
    if listing(fixtures) != fixtures_before {
        wrong.push("changed the fixtures".into());
    }
    // SAFETY: kill with signal 0 only asks whether the group has a process.
    if unsafe { libc::kill(-pgid, 0) } == 0 {
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        wrong.push("left a process behind".into());
    }
    let first: String = err.lines().next().unwrap_or("").chars().take(200).collect();
    (!wrong.is_empty()).then(|| format!("{shown}: {} | stderr: {first}", wrong.join("; ")))
}

/// Every path under `d`, sorted.
fn listing(d: &Path) -> Vec<PathBuf> {
    let mut v = vec![];
    let mut todo = vec![d.to_path_buf()];
    while let Some(p) = todo.pop() {
        for e in std::fs::read_dir(&p).unwrap().flatten() {
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(path.clone());
            }
            v.push(path);
        }
    }
    v.sort();
    v
}

#[test]
fn every_row_of_the_sweep_is_refused_by_the_rule() {
    let fixtures = tempfile::tempdir().unwrap();
    let file = fixtures.path().join("a-file");
    std::fs::write(&file, "not a run, not a scenario, not a credential\n").unwrap();
    let dir = fixtures.path().join("an-empty-dir");
    std::fs::create_dir(&dir).unwrap();
    let wrong: Vec<String> = ROWS
        .iter()
        .filter_map(|r| try_row(r, fixtures.path(), &file, &dir))
        .collect();
    eprintln!("sweep: {} rows, {} misbehave", ROWS.len(), wrong.len());
    assert!(
        wrong.is_empty(),
        "{} of {} rows misbehave:\n{}",
        wrong.len(),
        ROWS.len(),
        wrong.join("\n")
    );
}

/// A scenario with one phase of `kind` and `args`, on a path volume (`dir`).
fn scenario_with_phase(dir: &Path, kind: &str, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "name = \"sweep\"\n\n[[volumes]]\nname = \"v\"\npath = {:?}\n\n[[phases]]\nkind = \"{kind}\"\nvolume = \"v\"\nargs = [{}]\n",
        dir.display().to_string(),
        args.join(", ")
    )
}

#[test]
fn run_dry_run_refuses_fsync_and_check_phase_args_the_child_would_refuse() {
    let d = tempfile::tempdir().unwrap();
    let vol = d.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    // Each passed clap, so `--dry-run` said OK and the real child then refused (a check
    // phase's refusal was even swallowed: check.json was empty).
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "fsync",
            &["--secs-per-test", "1ms"],
            "--secs-per-test 1ms is too short",
        ),
        (
            "fsync",
            &["--secs-per-test", "1h"],
            "--secs-per-test 3600s is too long",
        ),
        ("fsync", &["--only", "nosuch"], "no test 'nosuch'"),
        ("check", &["--sample", "1h"], "--sample takes 10ms to 10m"),
        (
            "check",
            &["--test-time", "1ms"],
            "--test-time takes 10ms to 10m",
        ),
    ];
    for (kind, args, msg) in cases {
        let sc = d.path().join(format!("{kind}.toml"));
        std::fs::write(&sc, scenario_with_phase(&vol, kind, args)).unwrap();
        let out = d.path().join("study");
        let o = diskpulse()
            .args(["run", "--dry-run"])
            .arg(&sc)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{kind} {args:?}: {err}");
        assert!(err.contains(msg), "{kind} {args:?}: '{msg}' not in {err}");
        assert!(err.contains(&format!("{}:", sc.display())), "{err}");
        assert!(!out.exists(), "{kind} {args:?} made {}", out.display());
    }
    // The same file with good args passes: the refusals above are the args'.
    let sc = d.path().join("ok.toml");
    std::fs::write(
        &sc,
        scenario_with_phase(&vol, "fsync", &["--secs-per-test", "10ms"]),
    )
    .unwrap();
    let o = diskpulse()
        .args(["run", "--dry-run"])
        .arg(&sc)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The subcommands `diskpulse ARGS --help` lists (clap's own `help` left out).
fn subcommands(args: &[&str]) -> Vec<String> {
    let o = diskpulse().args(args).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let Some(start) = text.find("\nCommands:\n") else {
        return vec![];
    };
    text[start + "\nCommands:\n".len()..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

#[test]
fn every_help_page_shows_an_example() {
    let mut pages: Vec<Vec<String>> = vec![vec![]];
    let mut i = 0;
    while i < pages.len() {
        let path = pages[i].clone();
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        for c in subcommands(&args) {
            let mut p = path.clone();
            p.push(c);
            pages.push(p);
        }
        i += 1;
    }
    // The root page lists the commands; every command and nested one has examples.
    let commands = &pages[1..];
    assert!(
        commands.len() >= 13,
        "expected every subcommand (record .. lab list), found {pages:?}"
    );
    let mut missing = vec![];
    for p in commands {
        for flag in ["--help", "-h"] {
            let o = diskpulse().args(p).arg(flag).output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{p:?} {flag}");
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let example = format!("  diskpulse {}", p.join(" "));
            let shown = text
                .split_once("Examples:\n")
                .is_some_and(|(_, ex)| ex.lines().any(|l| l.starts_with(&example)));
            if !shown {
                missing.push(format!("diskpulse {} {flag}", p.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "help pages without an example of their own command: {missing:?}"
    );
}
