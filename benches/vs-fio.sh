#!/usr/bin/env bash
# diskpulse probe vs fio: the same jobs on the same file, run alternately (fio, probe,
# probe, fio, fio, probe, ...: the order flips every round so drift hits both tools alike),
# then the ratios ours/fio of the medians over the rounds:
#   IOPS, mean and p99 completion latency (clat), CPU time per I/O.
# CPU per I/O: fio's own figure, (usr_cpu + sys_cpu)% x job_runtime / ios (the job
# thread's getrusage), against the same figure from our JSON (each job thread's
# getrusage(RUSAGE_THREAD)); and, for both, the whole process from /usr/bin/time.
#
# The file: 256 MiB on ext4 over a loop device of our own (root), or in --dir DIR
# (default /var/tmp without root); written once with dd before the rounds, so both tools
# overwrite and read allocated blocks. The loop device's backing file is in /var/tmp
# (the virtio disk: --backing var-tmp, the default, where the RECIPES.md figures were
# taken) or on tmpfs (--backing shm). On tmpfs the "disk" is a steady memory copy, good
# for comparing the tools' own CPU cost, but kernel 6.18's loop driver then often
# completes an I/O inside the submitting system call (not always: it varies from run to
# run): its work then lands in slat, and clat only measures how soon the tool reaps
# (seen: clat p50 of 1 us in one run and 50 us in the next, for fio and for us alike).
# Compare latencies on var-tmp.
# This machine's load comes and goes: the "paired" column and the spreads say how much
# a figure can be trusted; more --rounds help.
#
# Usage: benches/vs-fio.sh [--rounds N] [--runtime SECONDS] [--dir DIR | --backing shm|var-tmp] [--jobs 1,2,3,4]
# Needs fio (scripts/setup installs it) and python3. Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=5 RUNTIME=3 DIR= JOBS=1,2,3,4 BACKING=var-tmp
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --runtime) RUNTIME=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --backing) BACKING=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--runtime SECONDS] [--dir DIR | --backing shm|var-tmp] [--jobs 1,2,3,4]" >&2; exit 2 ;;
  esac
done
command -v fio >/dev/null || { echo "fio not found: apt-get install -y fio (scripts/setup)" >&2; exit 1; }
cargo build --release -q
BIN=$PWD/target/release/diskpulse
WORK=$(mktemp -d /var/tmp/dp-vs-fio.XXXXXX)
DEV= MNT=
cleanup() {
  [ -n "$MNT" ] && umount "$MNT" 2>/dev/null || true
  [ -n "$DEV" ] && losetup -d "$DEV" 2>/dev/null || true
  [ -n "${IMG:-}" ] && rm -f "$IMG"
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "$DIR" ]; then
  if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null; then
    case "$BACKING" in
      shm) IMG=/dev/shm/dp-vs-fio.$$.img ;;
      var-tmp) IMG=$WORK/vol.img ;;
      *) echo "--backing takes shm or var-tmp; got '$BACKING'" >&2; exit 2 ;;
    esac
    truncate -s 1G "$IMG"
    DEV=$(losetup -f --show "$IMG")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$DEV"
    MNT=$WORK/mnt; mkdir -p "$MNT"; mount "$DEV" "$MNT"
    DIR=$MNT; WHERE="ext4 on $DEV (loop over $IMG)"
  else
    DIR=/var/tmp; WHERE="/var/tmp (not root: no loop device)"
  fi
else
  WHERE=$DIR
fi
FILE=$DIR/dp-vs-fio.dat
dd if=/dev/urandom of="$FILE" bs=1M count=256 oflag=direct status=none
sync
trap 'rm -f "$FILE"; cleanup' EXIT

# name | fio options | probe options
JOB1=("4k randwrite QD1 sync" "--rw=randwrite --bs=4k --iodepth=1 --ioengine=psync"
      "--rw randwrite --bs 4k --iodepth 1 --ioengine sync")
JOB2=("8k randrw 70/30 QD8 15000/s" "--rw=randrw --rwmixread=70 --bs=8k --iodepth=8 --ioengine=io_uring --rate_iops=10500,4500"
      "--rw randrw --rwmixread 70 --bs 8k --iodepth 8 --ioengine io_uring --rate-iops-total 15000")
JOB3=("4k randread QD32 io_uring" "--rw=randread --bs=4k --iodepth=32 --ioengine=io_uring"
      "--rw randread --bs 4k --iodepth 32 --ioengine io_uring")
JOB4=("1M write QD1 sync" "--rw=write --bs=1m --iodepth=1 --ioengine=psync"
      "--rw write --bs 1m --iodepth 1 --ioengine sync")

echo "diskpulse probe vs $(fio --version) on $WHERE, file $FILE (256 MiB, O_DIRECT)"
echo "$ROUNDS rounds x ${RUNTIME}s per run (+1s ramp), alternating; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
run_fio() { # job-index round
  local -n J=JOB$1
  /usr/bin/time -f "%U %S" -o "$WORK/time.fio.$1.$2" \
    fio --name=j --filename="$FILE" --size=256m --direct=1 --time_based --runtime="$RUNTIME" \
        --ramp_time=1 ${J[1]} --output-format=json --output="$WORK/fio.$1.$2.json" >/dev/null
}
run_probe() {
  local -n J=JOB$1
  /usr/bin/time -f "%U %S" -o "$WORK/time.dp.$1.$2" \
    "$BIN" probe --filename "$FILE" --size 256MiB --direct 1 --time-based --runtime "${RUNTIME}s" \
        --ramp 1s ${J[2]} --output-format json > "$WORK/dp.$1.$2.json"
}
for r in $(seq 1 "$ROUNDS"); do
  for j in ${JOBS//,/ }; do
    if [ $((r % 2)) = 1 ]; then run_fio "$j" "$r"; run_probe "$j" "$r"
    else run_probe "$j" "$r"; run_fio "$j" "$r"; fi
    printf '.' >&2
  done
done
echo >&2
NAMES=$(for j in ${JOBS//,/ }; do n=JOB$j[0]; echo "$j=${!n}"; done)
python3 - "$WORK" "$ROUNDS" "$JOBS" "$NAMES" <<'PY'
import json, statistics, sys
work, rounds, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
names = dict(l.split("=", 1) for l in sys.argv[4].splitlines())

def load(tool, j, r):
    d = json.load(open(f"{work}/{tool}.{j}.{r}.json"))
    job = d["jobs"][0]
    usr, sys_ = map(float, open(f"{work}/time.{tool}.{j}.{r}").read().split()[-2:])
    out = {}
    ios = 0
    for dirn in ("read", "write"):
        b = job[dirn]
        if b["total_ios"] == 0:
            continue
        ios += b["total_ios"]
        out[dirn] = {"iops": b["iops"], "mean": b["clat_ns"]["mean"] / 1000,
                     "p50": b["clat_ns"]["percentile"]["50.000000"] / 1000,
                     "p99": b["clat_ns"]["percentile"]["99.000000"] / 1000}
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000
    out["iops"] = sum(v["iops"] for k, v in out.items() if k in ("read", "write"))
    out["cpu_us"] = cpu_s / ios * 1e6
    # whole process, incl. start-up and ramp: per I/O of the measured part (same for both)
    out["proc_us"] = (usr + sys_) / ios * 1e6
    return out

def med(xs):
    return statistics.median(xs)

def spread(xs):
    m = med(xs)
    return 0 if m == 0 else (max(xs) - min(xs)) / m * 100

rows = []
print()
print("fio, diskpulse: medians over the rounds; ours/fio: ratio of those medians; paired: median over")
print("rounds of (ours / the fio run next to it), which cancels drift; spread: (max-min)/median of each tool.")
print()
print(f"{'job':<31}{'metric':<20}{'fio':>10}{'diskpulse':>11}{'ours/fio':>10}{'paired':>8}   spread fio / ours")
for j in jobs:
    f = [load("fio", j, r) for r in range(1, rounds + 1)]
    d = [load("dp", j, r) for r in range(1, rounds + 1)]
    metrics = [("IOPS", lambda x: x["iops"])]
    for dirn in ("read", "write"):
        if dirn in f[0]:
            tag = dirn if ("read" in f[0] and "write" in f[0]) else ""
            metrics.append((f"clat mean us {tag}".strip(), lambda x, k=dirn: x[k]["mean"]))
            metrics.append((f"clat p50 us {tag}".strip(), lambda x, k=dirn: x[k]["p50"]))
            metrics.append((f"clat p99 us {tag}".strip(), lambda x, k=dirn: x[k]["p99"]))
    metrics.append(("CPU us/IO job", lambda x: x["cpu_us"]))
    metrics.append(("CPU us/IO proc", lambda x: x["proc_us"]))
    first = True
    for name, get in metrics:
        fv = [get(x) for x in f]
        dv = [get(x) for x in d]
        a, b = med(fv), med(dv)
        paired = med([y / x for x, y in zip(fv, dv) if x])
        label = names[j] if first else ""
        first = False
        print(f"{label:<31}{name:<20}{a:>10.1f}{b:>11.1f}{b / a if a else float('nan'):>10.3f}{paired:>8.3f}   {spread(fv):5.0f}% / {spread(dv):5.0f}%")
PY
