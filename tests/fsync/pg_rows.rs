//! pg_test_fsync's rows, syscall for syscall: `strace -f` of the real pg_test_fsync 15 and
//! of `diskpulse fsync` (pg's rows, pg's command line), cut into rows at each write to
//! stdout (both print a row's label before its loop), each row reduced to the op it
//! repeats: open flags, every write's size and offset, the sync call, the closes. The two
//! lists must be equal, and diskpulse must run as one thread, as pg_test_fsync does: a
//! second thread (the stdio watcher other commands have) made every pwrite/fdatasync take
//! the shared-file-table path (atomic fdget/fput) and glibc's cancellation bookkeeping,
//! which pg's loop does not pay (decision 0095, docs/commands/fsync.md).

use super::*;

/// pg's rows as `--only` ids, in its order.
const PG_ROWS: &str = "one_8k.open_datasync,one_8k.fdatasync,one_8k.fsync,one_8k.open_sync,\
two_8k.open_datasync,two_8k.fdatasync,two_8k.fsync,two_8k.open_sync,open_sync_16k,other_fd,no_sync";

/// What one traced syscall did to the test file, or a write to stdout (a row boundary).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// Open flags without O_CLOEXEC and O_EXCL (ours, on purpose: never inherited, never
    /// an existing file) and without O_LARGEFILE (strace shows it on some builds).
    Open(String),
    /// (bytes, offset): a `write` at the descriptor's position counts as a `pwrite` there.
    Write(u64, u64),
    Fdatasync,
    Fsync,
    Close,
    Stdout,
}

/// The test file's syscalls from an `strace -f -s 0 -o` file, and whether a thread was
/// started (clone/clone3).
fn tokens(trace: &str, file: &Path) -> (Vec<Tok>, bool) {
    let quoted = format!("\"{}\"", file.display());
    let mut fds: std::collections::HashMap<String, u64> = Default::default();
    let mut out = vec![];
    let mut cloned = false;
    for line in trace.lines() {
        // "PID call(args) = ret"
        let Some((_, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some((call, ret)) = rest.trim_start().rsplit_once(" = ") else {
            continue;
        };
        let (call, ret) = (call.trim_end(), ret.split_whitespace().next().unwrap_or(""));
        let Some((name, args)) = call.split_once('(') else {
            continue;
        };
        let args = args.strip_suffix(')').unwrap_or(args);
        let first = args.split(", ").next().unwrap_or("");
        match name {
            "clone" | "clone3" => cloned = true,
            "openat" if args.contains(&quoted) && !ret.starts_with('-') => {
                let flags: Vec<&str> = args
                    .split(", ")
                    .nth(2)
                    .unwrap_or("")
                    .split('|')
                    .filter(|f| !["O_CLOEXEC", "O_EXCL", "O_LARGEFILE"].contains(f))
                    .collect();
                fds.insert(ret.to_string(), 0);
                out.push(Tok::Open(flags.join("|")));
            }
            "write" | "writev" if first == "1" => out.push(Tok::Stdout),
            "write" if fds.contains_key(first) => {
                let n: u64 = ret.parse().unwrap();
                let pos = fds.get_mut(first).unwrap();
                out.push(Tok::Write(n, *pos));
                *pos += n;
            }
            "pwrite64" if fds.contains_key(first) => {
                let v: Vec<&str> = args.rsplitn(3, ", ").collect();
                out.push(Tok::Write(v[1].parse().unwrap(), v[0].parse().unwrap()));
            }
            "fdatasync" if fds.contains_key(first) => out.push(Tok::Fdatasync),
            "fsync" if fds.contains_key(first) => out.push(Tok::Fsync),
            "close" if fds.contains_key(first) => {
                fds.remove(first);
                out.push(Tok::Close);
            }
            _ => {}
        }
    }
    (out, cloned)
}

/// A row: (before its loop, the op its loop repeats, after its loop).
type Shape = (Vec<Tok>, Vec<Tok>, Vec<Tok>);

/// One row as (what comes before the loop, the op it repeats, what comes after), with
/// the count of ops left out: the rows ran for a time, not a number of ops. A row whose
/// loop repeats at least twice is open + op x n + close (one descriptor) or op x n
/// (an open per op); anything else stays as it is.
fn row_shape(seg: &[Tok]) -> Shape {
    let periodic = |body: &[Tok]| -> Option<usize> {
        (1..=16.min(body.len() / 2))
            .find(|&p| body.len().is_multiple_of(p) && body.chunks(p).all(|c| c == &body[..p]))
    };
    let n = seg.len();
    if n >= 2 && matches!(seg[0], Tok::Open(_)) && seg[n - 1] == Tok::Close {
        if let Some(p) = periodic(&seg[1..n - 1]) {
            return (
                vec![seg[0].clone()],
                seg[1..1 + p].to_vec(),
                vec![Tok::Close],
            );
        }
    }
    if let Some(p) = periodic(seg) {
        return (vec![], seg[..p].to_vec(), vec![]);
    }
    (seg.to_vec(), vec![], vec![])
}

/// The rows of a trace: the test file's syscalls between writes to stdout, empty
/// stretches left out (fsync_writethrough's n/a, our sub-lines).
fn rows_of(toks: &[Tok]) -> Vec<Shape> {
    toks.split(|t| *t == Tok::Stdout)
        .filter(|s| !s.is_empty())
        .map(row_shape)
        .collect()
}

fn strace(argv: &[&std::ffi::OsStr], out: &Path) -> Output {
    let o = Command::new("strace")
        .args(["-f", "-s", "0", "-o"])
        .arg(out)
        .args([
            "-e",
            "trace=openat,write,writev,pwrite64,fdatasync,fsync,close,clone,clone3",
        ])
        .args(argv)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn pg_rows_make_pg_test_fsyncs_syscalls_on_one_thread() {
    let pg = std::env::var("PG_TEST_FSYNC")
        .unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_test_fsync".to_string());
    if !have_tool(&pg, "postgresql-15") || !have_tool("strace", "strace") {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let (pg_dir, dp_dir) = (d.path().join("pg"), d.path().join("dp"));
    std::fs::create_dir(&pg_dir).unwrap();
    std::fs::create_dir(&dp_dir).unwrap();
    // The same file name for both, in a directory each.
    let (pg_file, dp_file) = (
        pg_dir.join("pg_test_fsync.out"),
        dp_dir.join("pg_test_fsync.out"),
    );
    let (pg_trace, dp_trace) = (d.path().join("pg.strace"), d.path().join("dp.strace"));
    strace(
        &[
            pg.as_ref(),
            "-s".as_ref(),
            "1".as_ref(),
            "-f".as_ref(),
            pg_file.as_os_str(),
        ],
        &pg_trace,
    );
    let bin = diskpulse().get_program().to_owned();
    let o = strace(
        &[
            bin.as_os_str(),
            "fsync".as_ref(),
            "-s".as_ref(),
            "0.3".as_ref(),
            "--only".as_ref(),
            PG_ROWS.as_ref(),
            "-f".as_ref(),
            dp_file.as_os_str(),
        ],
        &dp_trace,
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let (pg_toks, pg_cloned) = tokens(&read(&pg_trace), &pg_file);
    let (dp_toks, dp_cloned) = tokens(&read(&dp_trace), &dp_file);
    assert!(!pg_cloned, "pg_test_fsync 15 is one thread");
    assert!(
        !dp_cloned,
        "diskpulse fsync started a thread; pg_test_fsync runs as one (decision 0095)"
    );
    let (a, b) = (rows_of(&pg_toks), rows_of(&dp_toks));
    // The fill (open, one 16 MiB write, fsync, close), then pg's 16 rows that run here
    // (fsync_writethrough is n/a on Linux and touches no file).
    assert_eq!(a.len(), 17, "pg_test_fsync's rows: {a:#?}");
    assert_eq!(
        a[0].0,
        [
            Tok::Open("O_RDWR|O_CREAT".into()),
            Tok::Write(16 << 20, 0),
            Tok::Fsync,
            Tok::Close
        ],
        "pg's fill"
    );
    for (i, (p, o)) in a.iter().zip(&b).enumerate() {
        assert_eq!(p, o, "row {i}: pg_test_fsync's op, then ours\n{text}");
    }
    assert_eq!(a.len(), b.len(), "{b:#?}\n{text}");
    // The shapes are what pg's source says (src/bin/pg_test_fsync/pg_test_fsync.c):
    // two 8 KiB writes at 0 and 8192 then fdatasync; write, close, reopen, fsync, close.
    assert_eq!(
        a[6],
        (
            vec![Tok::Open("O_RDWR".into())],
            vec![Tok::Write(8192, 0), Tok::Write(8192, 8192), Tok::Fdatasync],
            vec![Tok::Close]
        )
    );
    assert_eq!(
        a[15].1,
        [
            Tok::Open("O_RDWR".into()),
            Tok::Write(8192, 0),
            Tok::Close,
            Tok::Open("O_RDWR".into()),
            Tok::Fsync,
            Tok::Close
        ]
    );
    assert!(!dp_file.exists() && !pg_file.exists());
}
