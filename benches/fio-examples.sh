#!/usr/bin/env bash
# fio's own examples/ through `diskpulse probe JOB.fio`, with `fio JOB.fio` beside it: which
# run, which are refused and why, and for those that ran the IOPS and bandwidth ratio
# probe/fio (one run each, probe first; a table for finding what is missing, not a benchmark:
# benches/vs-fio.sh and tests/fio_vs_probe.rs alternate runs and take medians).
#
# Which examples: every examples/*.fio whose ioengine= values (all of its sections; a file
# naming none gets fio's Linux default, psync) are all among sync, psync, pvsync, libaio and
# io_uring. At fio f5344384 (2026-08-21) that is 44 of 107 files: 29 name libaio (with sync
# or psync beside it in 2), 1 sync, 2 psync, and 12 name no engine (4 of those are xnvme-*
# files whose comments run them with --ioengine=xnvme; as files they run psync). Issue 26
# counted 42; the zoned-device (zonemode=zbd) and xnvme-* files are in this count and are
# refused by fio itself on a regular file, which the fio column shows.
#
# What the script changes in each copy (the copy is in a temp dir, never in the tree), and
# nothing else:
#   - a first section `[global] size=256M runtime=5` is put above the file's own text (a
#     job that sets neither gets these; the file's own [global] and job sections override);
#   - size=, filesize= and io_size= values above 256M (or given as a percentage) become 256M
#     (each end of a range is capped alike);
#   - runtime= and timeout= values above 5 s become 5;
#   - each path of filename= (':'-separated) becomes a file of the same base name in the
#     job's work directory on the volume (/dev/sdb -> WORK/sdb, /dev/null -> WORK/null);
#     directory= becomes the work directory;
#   - both tools run with the work directory as their current directory (jobs naming no file
#     lay theirs out there, as fio does in its cwd). The work directory is emptied between
#     job files, not between the two tools (the second finds the first's laid-out files).
# Inline comments, startdelay=, ramp_time=, numjobs= and the rest are left as they are. Each
# tool run is cut at 120 s of wall time ("timeout" in the table).
#
# Usage: benches/fio-examples.sh [--bin PATH] [--only NAME,NAME] FIO_SRC TARGET_DIR
#   FIO_SRC     a fio git directory (fetch github:axboe/fio) or an examples/ directory
#   TARGET_DIR  a directory on an ext4 volume (a loop device of your own, RECIPES.md; a few
#               GiB free: numjobs=16 jobs lay out 16 files of up to 256M)
#   --bin       the diskpulse binary (default target/debug/diskpulse; build it first)
# Needs fio and python3. Prints the table; asserts nothing; exit 0 unless its input is bad.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/target/debug/diskpulse ONLY=
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    -*) echo "usage: $0 [--bin PATH] [--only NAME,NAME] FIO_SRC TARGET_DIR; unknown flag '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: $0 [--bin PATH] [--only NAME,NAME] FIO_SRC TARGET_DIR" >&2; exit 2; }
SRC=$1 TARGET=$2
[ -x "$BIN" ] || { echo "--bin: $BIN is not an executable; build diskpulse (cargo build) or pass --bin PATH" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio not found: apt-get install -y fio (scripts/setup)" >&2; exit 2; }
[ -d "$TARGET" ] || { echo "TARGET_DIR: '$TARGET' is not a directory; mount an ext4 volume and pass a directory on it" >&2; exit 2; }
case "$(stat -f -c %T "$TARGET")" in
  ext2/ext3) ;;
  *) echo "TARGET_DIR: '$TARGET' is on $(stat -f -c %T "$TARGET"), not ext4; pass a directory on an ext4 volume" >&2; exit 2 ;;
esac
JOBS=$(mktemp -d /var/tmp/dp-fio-examples.XXXXXX)
WORK=$TARGET/dp-fio-examples.$$
cleanup() { rm -rf "$JOBS" "$WORK"; }
trap cleanup EXIT
# The example files, copied out of the git dir or the directory.
if git --git-dir="$SRC" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  REV=$(git --git-dir="$SRC" rev-parse --short HEAD)
  for f in $(git --git-dir="$SRC" ls-tree --name-only HEAD examples/ | grep '\.fio$'); do
    git --git-dir="$SRC" show "HEAD:$f" > "$JOBS/$(basename "$f")"
  done
elif [ -d "$SRC" ]; then
  REV=$SRC
  cp "$SRC"/*.fio "$JOBS"/
else
  echo "FIO_SRC: '$SRC' is neither a git directory nor a directory of .fio files" >&2; exit 2
fi
echo "fio examples at $REV; probe: $BIN ($("$BIN" --version 2>/dev/null | head -1)); fio: $(fio --version); target: $TARGET"
python3 - "$JOBS" "$WORK" "$BIN" "$ONLY" <<'PY'
import json, os, re, shutil, signal, subprocess, sys
from collections import Counter

jobs_dir, work, binary, only = sys.argv[1:5]
only = set(n.removesuffix(".fio") for n in only.split(",") if n)
ENGINES = {"sync", "psync", "pvsync", "libaio", "io_uring"}
MAX_SIZE = 256 << 20
MAX_RUNTIME_S = 5
WALL_S = 120

def strip_comment(line):
    # fio ends a value at ';' or '#' (inline comments); lines starting with them are comments.
    return re.split(r"[;#]", line, maxsplit=1)[0].strip()

def engines(text):
    found = set()
    for raw in text.splitlines():
        line = strip_comment(raw)
        m = re.match(r"ioengine\s*=\s*(\S+)", line)
        if m:
            found.add(m.group(1))
    return found or {"psync"}

def size_bytes(v):
    m = re.fullmatch(r"(\d+)\s*([kmgtp]?)(i?b?)", v.strip(), re.I)
    if not m:
        return None
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
    return int(m.group(1)) * mult[m.group(2).lower()]

def seconds(v):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?", v.strip(), re.I)
    if not m:
        return None
    mult = {None: 1, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return float(m.group(1)) * mult[(m.group(2) or None) and m.group(2).lower()]

def cap_size(v):
    parts = v.split("-")
    out = []
    for p in parts:
        b = size_bytes(p)
        out.append("256M" if (p.strip().endswith("%") or (b is not None and b > MAX_SIZE)) else p.strip())
    return "-".join(out)

def rewrite(text, wdir):
    """The copy's text: the changes the header of fio-examples.sh lists, nothing else."""
    out = ["[global]", "size=256M", f"runtime={MAX_RUNTIME_S}"]
    for raw in text.splitlines():
        m = re.match(r"^(\s*)(size|filesize|io_size|runtime|timeout|filename|directory)(\s*=\s*)([^;#]*?)(\s*[;#].*)?$", raw)
        if not m:
            out.append(raw)
            continue
        pre, key, eq, val, rest = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5) or ""
        if key in ("size", "filesize", "io_size"):
            val = cap_size(val)
        elif key in ("runtime", "timeout"):
            s = seconds(val)
            if s is not None and s > MAX_RUNTIME_S:
                val = str(MAX_RUNTIME_S)
        elif key == "filename":
            names = [os.path.basename(p.rstrip("/")) or "file" for p in re.split(r"(?<!\\):", val)]
            val = ":".join(os.path.join(wdir, n).replace(":", "\\:") for n in names)
        elif key == "directory":
            val = wdir
        out.append(f"{pre}{key}{eq}{val}{rest}")
    return "\n".join(out) + "\n"

def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out

def run(argv, cwd):
    # At the wall-clock limit the tool and every process under it go: fio's job processes
    # call setsid, so neither the tool's group nor its session reaches them.
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=WALL_S)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        for pid in descendants(p.pid) + [p.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.communicate()
        return "timeout", "", f"timed out after {WALL_S} s"

def totals(doc_text):
    # fio prints its error lines before the document on stdout; the JSON starts at '{'.
    i = doc_text.find("{")
    if i < 0:
        return None
    try:
        d = json.loads(doc_text[i:])
    except json.JSONDecodeError:
        return None
    iops = bw = 0.0
    for j in d.get("jobs", []):
        for dr in ("read", "write", "trim"):
            iops += j.get(dr, {}).get("iops", 0) or 0
            bw += j.get(dr, {}).get("bw_bytes", 0) or 0
    return iops, bw, len(d.get("jobs", []))

def first_line(s):
    for l in s.splitlines():
        if l.strip():
            return l.strip()
    return ""

def reason_key(r):
    # "Error: FILE:LINE: fio option 'x' is ..." -> "L LINE: fio option 'x' is ..."
    m = re.match(r"^(?:Error: )?\S+\.fio(?::(\d+))?: (?:error: )?(.*)$", r)
    r = f"line {m.group(1)}: {m.group(2)}" if m and m.group(1) else (m.group(2) if m else r)
    return r.replace(" (see diskpulse probe --help for the options it runs)", "")

def reason_group(r):
    # What a reason is about, for the count: the option probe names, else the message.
    r = re.sub(r"^line \d+: ", "", r)
    m = re.match(r"fio option '([^']+)' is not supported", r)
    if m:
        return f"option {m.group(1)} not supported"
    return re.sub(r"'(.{40})[^']*'", r"'\1...'", r)[:100]

rows = []
for name in sorted(os.listdir(jobs_dir)):
    stem = name.removesuffix(".fio")
    if only and stem not in only:
        continue
    text = open(os.path.join(jobs_dir, name)).read()
    eng = engines(text)
    if not eng <= ENGINES:
        continue
    wdir = os.path.join(work, stem)
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)
    job = os.path.join(jobs_dir, "run-" + name)
    with open(job, "w") as f:
        f.write(rewrite(text, wdir))
    prc, pout, perr = run([binary, "probe", "--output-format=json", job], wdir)
    frc, fout, ferr = run(["fio", "--output-format=json", job], wdir)
    ptot, ftot = totals(pout), totals(fout)
    if prc == 0:
        state, reason = "ran", ""
    elif prc == 2:
        state, reason = "refused", reason_key(first_line(perr))
    else:
        state, reason = ("timeout" if prc == "timeout" else f"exit {prc}"), reason_key(first_line(perr) or first_line(pout))
    fio_state = "ran" if frc == 0 else f"exit {frc}: " + first_line(ferr or fout)[:70]
    ratio = lambda i: (f"{ptot[i] / ftot[i]:.2f}" if ptot and ftot and ftot[i] > 0 else "-")
    rows.append((stem, ",".join(sorted(eng)), state, reason, ratio(0) if state == "ran" else "-",
                 ratio(1) if state == "ran" else "-", fio_state))
    shutil.rmtree(wdir, ignore_errors=True)

w = [max(len(r[i]) for r in rows + [("job", "engines", "probe", "", "", "", "")]) for i in range(3)]
print(f"\n{'job':<{w[0]}}  {'engines':<{w[1]}}  {'probe':<{w[2]}}  {'IOPS p/f':>8}  {'BW p/f':>6}  fio | probe's reason")
for r in rows:
    print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[4]:>8}  {r[5]:>6}  {r[6]} | {r[3]}")
c = Counter(r[2] for r in rows)
print(f"\n{len(rows)} job files: " + ", ".join(f"{v} {k}" for k, v in c.most_common()))
reasons = Counter(reason_group(r[3]) for r in rows if r[2] != "ran")
print("probe's reasons (the first it meets in each file), by number of files:")
for k, v in reasons.most_common():
    print(f"  {v:>3}  {k}")
PY
