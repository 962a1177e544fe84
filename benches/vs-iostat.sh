#!/usr/bin/env bash
# diskpulse vs iostat on the same device at the same time: a loop device of our own under a
# fio load that changes rate every 2 s; iostat -x 1 and `diskpulse record` watch it.
# Prints per second iostat -x's w/s, wkB/s, w_await, wareq-sz, aqu-sz, %util from both (rates.csv
# carries them under iostat's names), and the ratio of totals.
# Needs root, fio, sysstat (scripts/setup). Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
BIN=target/release/diskpulse
WORK=$(mktemp -d /var/tmp/dp-iostat.XXXXXX)
IMG=$WORK/vol.img
truncate -s 1G "$IMG"
DEV=$(losetup -f --show "$IMG"); NAME=$(basename "$DEV")
cleanup() { losetup -d "$DEV" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
$BIN record --device "$NAME" --duration 13s --out "$WORK/run" >/dev/null 2>&1 &
REC=$!
sleep 1
iostat -d -x -y -o JSON 1 10 "$NAME" > "$WORK/iostat.json" &
IOS=$!
for r in 1000 4000 2000 8000 500; do
  fio --name=w --filename="$DEV" --ioengine=psync --direct=1 --rw=randwrite --bs=8k \
      --rate_iops=$r --time_based --runtime=2 --output=/dev/null
done
wait $IOS; wait $REC
$BIN report "$WORK/run" --window 1s --no-charts >/dev/null
python3 - "$WORK" "$NAME" <<'PY'
import csv, json, sys
work, name = sys.argv[1], sys.argv[2]
ios = json.load(open(f"{work}/iostat.json"))["sysstat"]["hosts"][0]["statistics"]
io_w = [s["disk"][0] for s in ios]
ours = [r for r in csv.DictReader(open(f"{work}/run/rates.csv")) if r["device"] == name]
# rates.csv carries iostat -x's columns under iostat's names: compare like with like.
COLS = ["w/s", "wkB/s", "w_await", "wareq-sz", "aqu-sz", "util"]
def mine(r, c):
    return float(r["%util" if c == "util" else c])
# iostat started about 1 s after the recording: find the lag that lines the series up.
def err(lag):
    return sum(abs(a["wkB/s"] - mine(ours[k + lag], "wkB/s")) for k, a in enumerate(io_w) if k + lag < len(ours))
lag = min(range(0, 3), key=err)
print(f"iostat -x 1 | rates.csv --window 1s (diskpulse shifted by {lag} s), same columns")
print(f"{'second':>6} | " + " ".join(f"{c:>9}" for c in COLS) + " | " + " ".join(f"{c:>9}" for c in COLS))
pairs = []
for k, a in enumerate(io_w):
    if k + lag >= len(ours):
        break
    b = ours[k + lag]
    pairs.append((a, b))
    print(f"{k:>6} | " + " ".join(f"{a[c]:9.2f}" for c in COLS) + " | " + " ".join(f"{mine(b, c):9.2f}" for c in COLS))
for c in ["w/s", "wkB/s", "aqu-sz"]:
    ti = sum(a[c] for a, _ in pairs)
    to = sum(mine(b, c) for _, b in pairs)
    print(f"over {len(pairs)} matched seconds, {c}: diskpulse/iostat = {to:.1f}/{ti:.1f} = {to/ti:.4f}")
PY
