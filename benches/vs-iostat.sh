#!/usr/bin/env bash
# diskpulse vs iostat on the same device at the same time: a loop device of our own under a
# fio load that changes rate every 2 s; iostat -x 1 and `diskpulse record` watch it.
# Prints per-second write MiB/s, w/s and w_await from both, and the ratio of totals.
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
# iostat started about 1 s after the recording: find the lag that lines the series up.
ow = [float(r["write_mib_s"]) for r in ours]
iw = [d["wkB/s"] / 1024 for d in io_w]
def err(lag):
    return sum(abs(iw[k] - ow[k + lag]) for k in range(len(iw)) if k + lag < len(ow))
lag = min(range(0, 3), key=err)
print(f"{'second':>6} | {'iostat MiB/s':>12} {'w/s':>8} {'w_await':>8} | {'diskpulse':>9} {'w/s':>8} {'w_await':>8}  (diskpulse shifted by {lag} s)")
pairs = []
for k, a in enumerate(io_w):
    if k + lag >= len(ours):
        break
    b = ours[k + lag]
    pairs.append((a, b))
    print(f"{k:>6} | {a['wkB/s']/1024:12.2f} {a['w/s']:8.0f} {a['w_await']:8.3f} | "
          f"{float(b['write_mib_s']):9.2f} {float(b['write_iops']):8.0f} {b['w_await_ms'] or '-':>8}")
ti = sum(a["wkB/s"] for a, _ in pairs) / 1024
to = sum(float(b["write_mib_s"]) for _, b in pairs)
ni = sum(a["w/s"] for a, _ in pairs)
no = sum(float(b["write_iops"]) for _, b in pairs)
print(f"over {len(pairs)} matched seconds: MiB written diskpulse/iostat = {to:.1f}/{ti:.1f} = {to/ti:.4f}; "
      f"writes = {no:.0f}/{ni:.0f} = {no/ni:.4f}")
PY
