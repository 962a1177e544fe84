//! `diskpulse nats-bench SUBJECT --pub N --sub M ...`: natscli's `nats bench` command
//! line (the flat form of natscli 0.0.x and 0.1.x that the walkthroughs use), mapped onto
//! `diskpulse load` (one load generator; see [`to_load`] for the mapping), printed as
//! `nats bench` prints it and written as natscli's CSV.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::load::{LoadCmdArgs, Style};
use ::format::usage;
use engines::load::connect::ConnectArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchStorage {
    File,
    Memory,
}

#[derive(Args, Debug)]
pub struct NatsBenchArgs {
    /// natscli v0.2's form (`pub`, `sub`, `service`, `js`, `kv`); see nats_bench_v2.
    #[command(subcommand)]
    pub v2: Option<super::nats_bench_v2::Bench>,
    /// Subject to use for the benchmark (natscli v0.1's only argument; after `--` when it
    /// is spelled like a v0.2 subcommand).
    #[arg(value_name = "SUBJECT", required = true)]
    pub subject: Option<String>,
    /// Number of concurrent publishers.
    #[arg(long = "pub", default_value_t = 0, value_name = "N")]
    pub pubs: usize,
    /// Number of concurrent subscribers.
    #[arg(long = "sub", default_value_t = 0, value_name = "N")]
    pub subs: usize,
    /// Number of messages to publish (each core subscriber or ordered JetStream consumer
    /// receives all of them; requests, pull/push consumers and KV gets split them).
    #[arg(long, default_value_t = 100_000)]
    pub msgs: u64,
    /// Size of the test messages (128, 1KB, 4KiB, 1MB: K = 1024 as natscli).
    #[arg(long, default_value = "128", value_parser = ::format::cli::parse_size)]
    pub size: u64,
    /// Save benchmark data to CSV file (natscli's 7 columns); diskpulse's extra columns
    /// go to FILE.diskpulse.csv, the per-client chart to .png and .svg beside it.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Use JetStream: publishers publish to stream --stream, subscribers consume it.
    #[arg(long)]
    pub js: bool,
    /// KV mode: publishers put in bucket --bucket, subscribers get from it.
    #[arg(long)]
    pub kv: bool,
    /// Request-reply mode: publishers send requests and wait for the reply (with --sub M,
    /// M responders run here).
    #[arg(long)]
    pub request: bool,
    /// Request-reply mode: subscribers send replies (serve until --msgs or Ctrl-C).
    #[arg(long)]
    pub reply: bool,
    /// --js: a shared durable pull consumer (the subscribers split the messages) rather
    /// than one ordered consumer each.
    #[arg(long)]
    pub pull: bool,
    /// --js: a shared durable push consumer, its clients in one queue group (as natscli).
    #[arg(long)]
    pub push: bool,
    /// --js: the stream (created on SUBJECT if missing).
    #[arg(long, default_value = "benchstream")]
    pub stream: String,
    /// --kv: the bucket (created if missing).
    #[arg(long, default_value = "benchbucket")]
    pub bucket: String,
    /// --js/--kv: storage of the stream or bucket created.
    #[arg(long, value_enum, default_value_t = BenchStorage::File)]
    pub storage: BenchStorage,
    /// --js/--kv: replicas of the stream or bucket created.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// --js/--kv: purge the stream or bucket before running.
    #[arg(long)]
    pub purge: bool,
    /// --js: wait for each ack before the next publish.
    #[arg(long)]
    pub syncpub: bool,
    /// Disable the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Sleep between publications, per publisher (as `--rate PUBS/SLEEP`).
    #[arg(long, value_parser = ::format::cli::parse_duration, value_name = "DURATION")]
    pub pubsleep: Option<std::time::Duration>,
    /// --reply: time each responder spends on a request before replying.
    #[arg(long, value_parser = ::format::cli::parse_duration, value_name = "DURATION")]
    pub subsleep: Option<std::time::Duration>,
    /// --js: async publishes in flight per publisher (natscli's batch of async publishes).
    #[arg(long, value_name = "N")]
    pub pubbatch: Option<usize>,
    /// --js --pull/--push: messages per pull (natscli's --pullbatch, --consumerbatch).
    #[arg(long, alias = "consumerbatch", value_name = "N")]
    pub pullbatch: Option<usize>,
    /// --js/--kv: the maximum size of the stream or bucket created.
    #[arg(long, value_parser = ::format::cli::parse_size)]
    pub maxbytes: Option<u64>,
    /// --js: a message id on each publish (the stream de-duplicates).
    #[arg(long)]
    pub dedup: bool,
    /// --js/--kv: the timeout of each JetStream operation.
    #[arg(long, value_parser = ::format::cli::parse_duration, value_name = "DURATION")]
    pub jstimeout: Option<std::time::Duration>,
    /// --kv: the history depth of the bucket created (values kept per key, 1 to 64).
    #[arg(long)]
    pub history: Option<u8>,
    /// Each message on SUBJECT.N (N its number in the run, modulo --multisubjectmax);
    /// subscribers and the stream listen on SUBJECT.*.
    #[arg(long)]
    pub multisubject: bool,
    /// --multisubject: the number of subjects (0: no max).
    #[arg(long, default_value_t = 100_000)]
    pub multisubjectmax: u64,
    /// natscli 0.1's --retries N, taken and, as in natscli (which parses it and
    /// never reads it), unused; a note on stderr says so.
    #[arg(long, hide = true)]
    pub retries: Option<u64>,
    /// Print the summary as JSON (diskpulse's, as `load --json`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Embedded broker (no --server and no $NATS_URL): the nats-server binary (default:
    /// found on PATH).
    #[arg(long, value_name = "PATH")]
    pub nats_server: Option<PathBuf>,
}

/// The `diskpulse load` arguments (without the connection, which is copied as given)
/// that run what `nats bench` runs for `a`:
///
/// | nats bench | diskpulse load |
/// |---|---|
/// | `--pub N [--sub M]` | `pub --clients N --sub M` |
/// | `--sub M` | `sub --clients M` (messages from publishers elsewhere) |
/// | `--request --pub N [--sub M]` | `request --clients N --reply M` |
/// | `--reply --sub M` | `reply --clients M` |
/// | `--js --pub N [--sub M]` | `js-pub --clients N --consume M --ordered` (`--pull`/`--push`: shared durable) |
/// | `--js --sub M` | `js-consume --clients M --ordered` (`--pull`/`--push`: shared durable) |
/// | `--kv --pub N` | `kv-put --clients N` |
/// | `--kv --sub M` | `kv-get --clients M` |
///
/// Forms natscli refuses, or that have no meaning here, are usage errors naming the flag.
pub fn to_load(a: &NatsBenchArgs) -> anyhow::Result<Vec<String>> {
    let (p, s) = (a.pubs, a.subs);
    let subject = a.subject.as_deref().unwrap_or_default();
    if p == 0 && s == 0 {
        return Err(usage!(
            "nats-bench needs --pub N and/or --sub M (both are 0): e.g. `diskpulse nats-bench {subject} --pub 1 --sub 1`"
        ));
    }
    if a.js && a.kv {
        return Err(usage!(
            "--js and --kv: one or the other (as natscli); --kv benchmarks the bucket, --js the stream"
        ));
    }
    if a.request && a.reply {
        return Err(usage!(
            "--request and --reply: one or the other; `--request --pub N --sub M` runs N requesters and M responders here"
        ));
    }
    if (a.request || a.reply) && (a.js || a.kv) {
        return Err(usage!(
            "--{} is core NATS request-reply; it does not go with --{}",
            if a.request { "request" } else { "reply" },
            if a.js { "js" } else { "kv" }
        ));
    }
    if a.pull && a.push {
        return Err(usage!(
            "--pull and --push: the durable consumer is one or the other (as natscli)"
        ));
    }
    let durable = a.pull || a.push;
    if durable && !a.js {
        return Err(usage!(
            "--{} chooses JetStream's consumer; it needs --js",
            if a.pull { "pull" } else { "push" }
        ));
    }
    if a.syncpub && !a.js {
        return Err(usage!("--syncpub publishes to a stream; it needs --js"));
    }
    v01_refused(a)?;
    let storage_flags = a.purge || a.replicas != 1 || a.storage != BenchStorage::File;
    if storage_flags && !(a.js || a.kv) {
        return Err(usage!(
            "--purge, --replicas and --storage set up a stream or bucket; they need --js or --kv"
        ));
    }
    let n = |v: usize| v.to_string();
    let mut v: Vec<String> = vec![];
    let mut push = |xs: &[&str]| v.extend(xs.iter().map(|x| x.to_string()));
    if a.kv {
        if p > 0 && s > 0 {
            return Err(usage!(
                "--kv --pub {p} --sub {s}: puts and gets are two runs here: first `--kv --pub {p}`, then `--kv --sub {s}`"
            ));
        }
        if p > 0 {
            push(&["kv-put", "--clients", &n(p)]);
        } else {
            push(&["kv-get", "--clients", &n(s)]);
        }
        push(&["--bucket", &a.bucket]);
    } else if a.js {
        if p > 0 {
            push(&["js-pub", "--clients", &n(p)]);
            if s > 0 {
                push(&["--consume", &n(s)]);
            }
            if a.syncpub {
                push(&["--sync"]);
            }
        } else {
            push(&["js-consume", "--clients", &n(s)]);
        }
        if s > 0 && !durable {
            push(&["--ordered"]);
        }
        if a.push {
            push(&["--push"]);
        }
        push(&["--stream", &a.stream]);
    } else if a.request {
        if p == 0 {
            return Err(usage!(
                "--request sends requests from publishers: add --pub N (and --sub M for M responders here)"
            ));
        }
        push(&["request", "--clients", &n(p)]);
        if s > 0 {
            push(&["--reply", &n(s)]);
        }
    } else if a.reply {
        if p > 0 || s == 0 {
            return Err(usage!(
                "--reply serves requests with subscribers: --sub M and no --pub (publishers with --request, here or in another nats-bench)"
            ));
        }
        push(&["reply", "--clients", &n(s)]);
    } else if p > 0 {
        push(&["pub", "--clients", &n(p)]);
        if s > 0 {
            push(&["--sub", &n(s)]);
        }
    } else {
        push(&["sub", "--clients", &n(s)]);
    }
    push(&["--subject", subject, "--msgs", &a.msgs.to_string()]);
    push(&["--size", &a.size.to_string()]);
    if a.js || a.kv {
        push(&[
            "--storage",
            match a.storage {
                BenchStorage::File => "file",
                BenchStorage::Memory => "memory",
            },
            "--replicas",
            &n(a.replicas),
        ]);
        if a.purge {
            push(&["--purge"]);
        }
    }
    v01_flags(a, &mut push)?;
    if a.no_progress {
        push(&["--quiet"]);
    }
    if a.json {
        push(&["--json"]);
    }
    Ok(v)
}

/// natscli v0.1 flags with no meaning for the form given.
fn v01_refused(a: &NatsBenchArgs) -> anyhow::Result<()> {
    let needs = [
        (
            a.subsleep.is_some() && !a.reply && !a.request,
            "--subsleep",
            "--reply or --request (responders here)",
        ),
        (a.pubbatch.is_some() && !a.js, "--pubbatch", "--js"),
        (
            a.pullbatch.is_some() && !(a.js && (a.pull || a.push)),
            "--pullbatch",
            "--js --pull or --js --push",
        ),
        (
            a.maxbytes.is_some() && !(a.js || a.kv),
            "--maxbytes",
            "--js or --kv",
        ),
        (a.dedup && !a.js, "--dedup", "--js"),
        (
            a.jstimeout.is_some() && !(a.js || a.kv),
            "--jstimeout",
            "--js or --kv",
        ),
        (a.pubsleep.is_some() && a.pubs == 0, "--pubsleep", "--pub N"),
        (
            a.history.is_some() && !(a.kv && a.pubs > 0),
            "--history",
            "--kv --pub N (the bucket's puts create it)",
        ),
    ];
    if let Some((_, f, what)) = needs.iter().find(|(bad, _, _)| *bad) {
        return Err(usage!("{f} needs {what} (as natscli)"));
    }
    Ok(())
}

/// The `load` flags of natscli v0.1's --pubsleep, --subsleep, --pubbatch, --pullbatch,
/// --maxbytes, --dedup and --jstimeout.
fn v01_flags(a: &NatsBenchArgs, push: &mut impl FnMut(&[&str])) -> anyhow::Result<()> {
    if let Some(s) = a.pubsleep.filter(|s| !s.is_zero()) {
        push(&["--rate", &format!("{}", a.pubs as f64 / s.as_secs_f64())]);
    }
    if let Some(s) = a.subsleep.filter(|s| !s.is_zero()) {
        push(&["--service-time", &::format::cli::fmt_duration(s)]);
    }
    if let Some(b) = a.pubbatch {
        if a.syncpub && b > 1 {
            return Err(usage!("--pubbatch {b} with --syncpub: synchronous publishing has one in flight; leave one out"));
        }
        push(&["--window", &b.max(1).to_string()]);
    }
    if let Some(b) = a.pullbatch {
        push(&["--batch", &b.to_string()]);
    }
    if let Some(m) = a.maxbytes {
        push(&["--max-bytes", &m.to_string()]);
    }
    if a.dedup {
        push(&["--msg-id"]);
    }
    if let Some(t) = a.jstimeout {
        push(&["--timeout", &::format::cli::fmt_duration(t)]);
    }
    if let Some(h) = a.history {
        push(&["--history", &h.to_string()]);
    }
    if a.multisubject {
        push(&[
            "--multisubject",
            "--multisubject-max",
            &a.multisubjectmax.to_string(),
        ]);
    }
    Ok(())
}

/// natscli's banner line (on stderr): what runs, in its words.
fn banner(a: &NatsBenchArgs) -> String {
    let kind = if a.js {
        "JetStream"
    } else if a.kv {
        "KV"
    } else if a.request || a.reply {
        "request-reply"
    } else {
        "Core NATS pub/sub"
    };
    format!(
        "Starting {kind} benchmark [subject={}, msgs={}, msgsize={} B, pubs={}, subs={}, js={}, kv={}]",
        a.subject.as_deref().unwrap_or_default(),
        a.msgs,
        a.size,
        a.pubs,
        a.subs,
        a.js,
        a.kv
    )
}

/// `diskpulse load` parsed from `argv` (what [`to_load`] or the v0.2 plan made).
fn load_args(argv: &[String]) -> anyhow::Result<LoadCmdArgs> {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        load: LoadCmdArgs,
    }
    use clap::Parser;
    let w = Wrap::try_parse_from(std::iter::once("load".to_string()).chain(argv.iter().cloned()))
        .map_err(|e| {
        usage!(
            "{}",
            e.to_string()
                .lines()
                .next()
                .unwrap_or("bad nats-bench flags")
        )
    })?;
    Ok(w.load)
}

/// natscli v0.2's form: its plan run by the load generator, printed as natscli v0.2.
fn run_v2(b: &super::nats_bench_v2::Bench) -> anyhow::Result<i32> {
    let plan = b.plan()?;
    let mut load = load_args(&plan.argv)?;
    load.load.connect = plan.common.connect.clone();
    load.load.csv = plan.common.csv.clone();
    load.nats_server = plan.common.nats_server.clone();
    if !plan.common.json {
        eprintln!("{}", plan.banner);
        eprintln!("(diskpulse load {})", plan.argv.join(" "));
    }
    super::load::run_as(load, Style::NatsBenchV2(plan.kind))
}

pub fn run(a: NatsBenchArgs) -> anyhow::Result<i32> {
    if let Some(b) = &a.v2 {
        return run_v2(b);
    }
    let argv = to_load(&a)?;
    let mut w = load_args(&argv)?;
    // The connection as given: --server (comma-separated), credentials, $NATS_* (read
    // by clap, flags first).
    w.load.connect = a.connect.clone();
    w.load.csv = a.csv.clone();
    w.nats_server = a.nats_server.clone();
    if !a.json {
        eprintln!("{}", banner(&a));
        eprintln!("(diskpulse load {})", argv.join(" "));
        if let Some(n) = a.retries {
            eprintln!(
                "--retries {n}: natscli 0.1 parses it and never uses it (its failed publishes are retried without limit); here a failed publish is counted as a failure, not retried"
            );
        }
    }
    super::load::run_as(w, Style::NatsBench)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> NatsBenchArgs {
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            a: NatsBenchArgs,
        }
        use clap::Parser;
        W::try_parse_from(std::iter::once("nats-bench").chain(args.iter().copied()))
            .unwrap()
            .a
    }

    fn load(args: &[&str]) -> String {
        to_load(&parse(args))
            .map(|v| v.join(" "))
            .unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn each_nats_bench_form_maps_onto_one_load_mode() {
        assert_eq!(
            load(&[
                "my_subject",
                "--msgs",
                "1000000",
                "--pub",
                "4",
                "--sub",
                "4",
                "--csv=r.csv"
            ]),
            "pub --clients 4 --sub 4 --subject my_subject --msgs 1000000 --size 128"
        );
        assert!(load(&["s", "--sub", "2"]).starts_with("sub --clients 2 "));
        assert!(load(&["s", "--pub", "3", "--sub", "2", "--request"])
            .starts_with("request --clients 3 --reply 2 "));
        assert!(load(&["s", "--sub", "2", "--reply"]).starts_with("reply --clients 2 "));
        assert_eq!(
            load(&["s", "--js", "--pub", "2", "--sub", "3", "--purge", "--storage", "memory"]),
            "js-pub --clients 2 --consume 3 --ordered --stream benchstream --subject s --msgs 100000 --size 128 --storage memory --replicas 1 --purge"
        );
        assert!(load(&["s", "--js", "--sub", "3", "--pull"])
            .starts_with("js-consume --clients 3 --stream benchstream "));
        assert!(load(&["s", "--js", "--sub", "3", "--push"])
            .starts_with("js-consume --clients 3 --push --stream"));
        assert!(
            load(&["s", "--kv", "--pub", "2", "--size", "1KB"]).starts_with(
                "kv-put --clients 2 --bucket benchbucket --subject s --msgs 100000 --size 1024"
            )
        );
        assert!(load(&["s", "--kv", "--sub", "2"]).starts_with("kv-get --clients 2 "));
        assert!(load(&["s", "--pub", "1", "--no-progress"]).ends_with(" --quiet"));
    }

    #[test]
    fn forms_natscli_refuses_are_usage_errors_naming_the_flag() {
        for (args, flag) in [
            (&["s"][..], "--pub N and/or --sub M"),
            (&["s", "--pub", "1", "--js", "--kv"], "--js and --kv"),
            (
                &["s", "--pub", "1", "--request", "--reply"],
                "--request and --reply",
            ),
            (&["s", "--pub", "1", "--js", "--request"], "--request"),
            (
                &["s", "--sub", "1", "--js", "--pull", "--push"],
                "--pull and --push",
            ),
            (&["s", "--sub", "1", "--pull"], "--pull"),
            (&["s", "--pub", "1", "--purge"], "--purge"),
            (
                &["s", "--pub", "1", "--sub", "1", "--kv"],
                "--kv --pub 1 --sub 1",
            ),
            (&["s", "--sub", "1", "--request"], "--request"),
            (&["s", "--pub", "1", "--reply"], "--reply"),
            (&["s", "--pub", "1", "--syncpub"], "--syncpub"),
        ] {
            let e = to_load(&parse(args)).unwrap_err();
            assert!(e.downcast_ref::<::format::cli::UsageError>().is_some());
            assert!(e.to_string().contains(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn v01_s_other_flags_map_onto_load_flags_or_are_refused_by_name() {
        assert!(load(&["s", "--pub", "4", "--pubsleep", "1ms"]).ends_with("--rate 4000"));
        assert!(load(&["s", "--sub", "2", "--reply", "--subsleep", "50us"])
            .ends_with("--service-time 50us"));
        assert!(
            load(&["s", "--js", "--pub", "1", "--pubbatch", "100", "--dedup"])
                .ends_with("--window 100 --msg-id")
        );
        assert!(
            load(&["s", "--js", "--sub", "2", "--pull", "--pullbatch", "50"])
                .ends_with("--batch 50")
        );
        assert!(load(&[
            "s",
            "--kv",
            "--pub",
            "1",
            "--maxbytes",
            "1MB",
            "--jstimeout",
            "2s"
        ])
        .ends_with("--max-bytes 1048576 --timeout 2s"));
        assert!(load(&["s", "--kv", "--pub", "1", "--history", "5"]).ends_with("--history 5"));
        assert!(load(&["s", "--pub", "1", "--multisubject"])
            .ends_with("--multisubject --multisubject-max 100000"));
        for (args, flag) in [
            (
                &["s", "--kv", "--sub", "1", "--history", "5"][..],
                "--history",
            ),
            (&["s", "--pub", "1", "--subsleep", "1ms"], "--subsleep"),
            (&["s", "--pub", "1", "--pubbatch", "5"], "--pubbatch"),
            (
                &["s", "--js", "--sub", "1", "--pullbatch", "5"],
                "--pullbatch",
            ),
        ] {
            let e = to_load(&parse(args)).unwrap_err();
            assert!(e.to_string().contains(flag), "{args:?}: {e}");
        }
    }
}
