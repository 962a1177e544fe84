#!/usr/bin/env bash
# record --listen: does scraping /metrics cost the 1 ms sampler samples? Alternating
# pairs (quiet, hammered): `record --device DEV --duration 5s --listen 127.0.0.1:0`,
# once with no scrape and once scraped back to back for 4 s from one Python client
# (urllib, a new connection each). Prints per run: scrapes and their rate and latency,
# diskstats samples of expected, skipped deadlines, jitter p99/max, CPU ns per sample
# (meta.json). Prints figures; asserts nothing.
#
# Environment (defaults): ROUNDS=3 DEV=vda BIN=target/release/diskpulse (or debug).
set -euo pipefail
ROUNDS=${ROUNDS:-3}
DEV=${DEV:-vda}
BIN=${BIN:-target/release/diskpulse}
[ -x "$BIN" ] || BIN=target/debug/diskpulse
tmp=$(mktemp -d /tmp/diskpulse-listen-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/hammer.py" <<'PY'
import sys, time, urllib.request
addr, secs = sys.argv[1], float(sys.argv[2])
lat = []
end = time.time() + secs
while time.time() < end:
    t = time.perf_counter()
    urllib.request.urlopen(f"http://{addr}/metrics").read()
    lat.append(time.perf_counter() - t)
lat.sort()
print(f"{len(lat)} scrapes ({len(lat)/secs:.0f}/s, p50 {lat[len(lat)//2]*1e3:.2f} ms, p99 {lat[int(len(lat)*.99)]*1e3:.2f} ms)")
PY
for i in $(seq "$ROUNDS"); do
  for mode in quiet hammered; do
    d="$tmp/run-$mode-$i"
    "$BIN" record --device "$DEV" --duration 5s --listen 127.0.0.1:0 --out "$d" 2>"$d.err" >/dev/null &
    pid=$!
    sleep 0.5
    addr=$(grep -o '127.0.0.1:[0-9]*' "$d.err")
    said="no scrapes"
    if [ "$mode" = hammered ]; then said=$(python3 "$tmp/hammer.py" "$addr" 4); fi
    wait "$pid"
    python3 - "$d" "$mode" "$said" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/meta.json"))["samplers"]["diskstats"]
print(f"{sys.argv[2]:8s} {m['samples']} of {m['expected']} samples, {m['skipped']} skipped, "
      f"jitter p99 {m['jitter_p99_us']:.0f} us max {m['jitter_max_us']:.0f} us, "
      f"{m['ns_per_sample_cpu']:.0f} ns CPU/sample; {sys.argv[3]}")
PY
  done
done
