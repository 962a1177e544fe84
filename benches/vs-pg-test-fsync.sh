#!/usr/bin/env bash
# diskpulse fsync vs PostgreSQL's pg_test_fsync, side by side (TOGETHER=1, below) or one
# after the other on the same directory (round 1 pg first, round 2 diskpulse first, ...). diskpulse runs only the rows pg has,
# in pg's order, for the same time per test, so both do the same syscalls in the same
# sequence. Prints, per matching row, the median ops/s of each over the rounds, the median
# of the per-round ratios (diskpulse / pg) and their spread, the noise floor (the spread of
# pg's own round-to-round ratios: diskpulse cannot be judged closer than that), and
# diskpulse's p50/p99. A figure, not an assertion.
#
# Same blocks for both (decision 0095): on the loop device it makes, a fresh ext4 (mkfs
# -E nodiscard, so the image keeps its blocks on the disk below) before EVERY run, and
# both write pg's file name, so each tool's 16 MiB file is inode 12 on the same extent of
# the loop device and of the disk under its image. Without that, ext4 puts each new file
# after the last one and the two tools' rows are timed on different parts of the disk.
# With a DIR of your own (the root disk's /var/tmp) the files land where that file
# system puts them.
#
#   benches/vs-pg-test-fsync.sh [DIR]      # default: ext4 on a fresh loop device (root)
#   SECS=2 ROUNDS=4 PG_TEST_FSYNC=/usr/lib/postgresql/15/bin/pg_test_fsync benches/vs-pg-test-fsync.sh
#   WRAP="nice -n -10" benches/vs-pg-test-fsync.sh    # run both under the same prefix (a busy host)
#   BACKING=/dev/shm benches/vs-pg-test-fsync.sh      # loop image in RAM: the host disk's noise out
#   KEEP=/var/tmp/pgcmp benches/vs-pg-test-fsync.sh    # keep every round's raw output there
#   TOGETHER=0 benches/vs-pg-test-fsync.sh             # one after the other on one device (see below)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-2}
ROUNDS=${ROUNDS:-4}
PG=${PG_TEST_FSYNC:-/usr/lib/postgresql/15/bin/pg_test_fsync}
read -r -a WRAP <<< "${WRAP:-}"
[ -x "$PG" ] || { echo "pg_test_fsync not found at $PG (apt-get install postgresql-15, or set PG_TEST_FSYNC)" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then cargo build --release -q; BIN=$PWD/target/release/diskpulse; fi
WORK=$(mktemp -d "${BACKING:-/var/tmp}/dp-pgfsync.XXXXXX")
DEVS=()
cleanup() {
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$WORK"/pg.*.txt "$WORK"/dp.*.json "$KEEP"/ 2>/dev/null || true; fi
  for i in "${!DEVS[@]}"; do
    umount "$WORK/mnt$i" 2>/dev/null || true
    losetup -d "${DEVS[$i]}" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
# TOGETHER=1 (the default on the bench's own loop devices): both tools at the same time,
# each on a loop device of its own (they swap devices every round), so both see the same
# disk and CPU weather, row by row (each row lasts SECS in both). On a shared VM, one
# after the other (TOGETHER=0, and always with a DIR) sees pg vary 0.05-14x against
# itself between rounds (decision 0095): too much to judge 10%.
if [ $# -ge 1 ]; then TOGETHER=${TOGETHER:-0}; else TOGETHER=${TOGETHER:-1}; fi
if [ $# -ge 1 ]; then
  [ "$TOGETHER" = 1 ] && { echo "TOGETHER=1 needs the bench's own loop devices: drop the DIR argument or pass TOGETHER=0" >&2; exit 2; }
  DIRS=("$1")
else
  DIRS=()
  for i in $( [ "$TOGETHER" = 1 ] && echo 0 1 || echo 0 ); do
    truncate -s 1G "$WORK/vol$i.img"
    DEVS[$i]=$(losetup -f --show "$WORK/vol$i.img")
    mkdir "$WORK/mnt$i"
    DIRS[$i]=$WORK/mnt$i
  done
fi
# A fresh file system before each run (only on our own loop devices).
fresh() {
  local i=$1
  [ -n "${DEVS[$i]:-}" ] || return 0
  umount "${DIRS[$i]}" 2>/dev/null || true
  mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "${DEVS[$i]}"
  mount "${DEVS[$i]}" "${DIRS[$i]}"
}
# pg_test_fsync's 16 rows (fsync_writethrough is n/a on Linux), as diskpulse ids.
ONLY=one_8k.open_datasync,one_8k.fdatasync,one_8k.fsync,one_8k.open_sync
ONLY=$ONLY,two_8k.open_datasync,two_8k.fdatasync,two_8k.fsync,two_8k.open_sync
ONLY=$ONLY,open_sync_16k,other_fd,no_sync
fresh 0
echo "dir ${DIRS[*]} ($(stat -f -c %T "${DIRS[0]}")), ${SECS}s per test, $ROUNDS rounds, together=$TOGETHER, wrap '${WRAP[*]}'; $("$PG" --version)" >&2
run_pg() { "${WRAP[@]}" "$PG" -s "$SECS" -f "${DIRS[$1]}/pg_test_fsync.out" > "$WORK/pg.$r.txt"; }
# pg_test_fsync's own command line (-f FILE -s SECS) and file name, pg's rows only.
run_dp() { "${WRAP[@]}" "$BIN" fsync -f "${DIRS[$1]}/pg_test_fsync.out" -s "$SECS" --only "$ONLY" --json > "$WORK/dp.$r.json"; }
for r in $(seq 1 "$ROUNDS"); do
  if [ "$TOGETHER" = 1 ]; then
    a=$(( r % 2 )); b=$(( 1 - a ))
    fresh 0; fresh 1
    run_pg "$a" & p=$!
    run_dp "$b" & q=$!
    wait "$p"; wait "$q"
  elif [ $((r % 2)) -eq 1 ]; then
    fresh 0; run_pg 0; fresh 0; run_dp 0
  else
    fresh 0; run_dp 0; fresh 0; run_pg 0
  fi
  echo "round $r done" >&2
done
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
ROW = re.compile(r"^\s+(\S.*?)\s{2,}([\d.]+) ops/sec\s+(\d+) usecs/op")

def parse_pg(path):
    out, section = {}, None
    for line in open(path):
        if line.strip().endswith(":") and not line.startswith(" "):
            section = line.strip()
            continue
        m = ROW.match(line.rstrip("\n"))
        if m and section:
            out[(section, m.group(1).strip())] = float(m.group(2))
    return out

pg = [parse_pg(f"{work}/pg.{r}.txt") for r in range(1, rounds + 1)]
dp = [json.load(open(f"{work}/dp.{r}.json")) for r in range(1, rounds + 1)]
print(dp[0]["dir"], dp[0]["fs_type"], "devices:",
      ", ".join(f"{d['name']} write_cache={d.get('write_cache', '?')}" for d in dp[0]["devices"]) or dp[0]["devices_note"])
hdr = (f"{'row (pg_test_fsync label)':<38} {'pg ops/s':>10} {'diskpulse':>10} {'ratio':>6} {'ratio range':>13}"
       f"  {'pg/pg range':>13}  {'dp p50 us':>9} {'dp p99 us':>9}")
print(hdr)
print("-" * len(hdr))
last = None
inside = rows = 0
short = {"one_8k": "1x8k", "two_8k": "2x8k", "open_sync_16k": "16k", "other_fd": "fd", "no_sync": "nosync"}
for i, t in enumerate(dp[0]["tests"]):
    key = (t["pg_section"], t["pg_test_fsync"])
    if t["group"] != last:
        print(t["pg_section"])
        last = t["group"]
    p = [x.get(key) for x in pg]
    d = [x["tests"][i]["ops_per_s"] for x in dp]
    if None in p or None in d:
        print(f"  {t['pg_test_fsync']:<36} {'n/a':>10}")
        continue
    ratios = [b / a for a, b in zip(p, d)]
    # pg against itself, round r+1 over round r: the noise floor of this machine right now.
    floor = [b / a for a, b in zip(p, p[1:])] or [1.0]
    p50 = statistics.median(x["tests"][i]["lat_p50_us"] for x in dp)
    p99 = statistics.median(x["tests"][i]["lat_p99_us"] for x in dp)
    inside += 0.9 <= statistics.median(ratios) <= 1.1
    rows += 1
    print(f"  {t['pg_test_fsync']:<36} {statistics.median(p):>10.1f} {statistics.median(d):>10.1f} "
          f"{statistics.median(ratios):>6.2f} {min(ratios):>6.2f}-{max(ratios):<6.2f}"
          f"  {min(floor):>6.2f}-{max(floor):<6.2f}  {p50:>9.1f} {p99:>9.1f}")
print(f"{inside} of {rows} rows have a median ratio within 0.9-1.1 over {rounds} pairs")
PY
