#!/usr/bin/env bash
# What `report` of a traced run costs as its trace grows (issue 13 item 3 for `--trace`):
# a real 3 s `record --trace` run directory, its block_requests.csv.gz and
# fsync_calls.csv.gz replaced by synthetic ones of REQUESTS block requests and CALLS sync
# calls spread over DURATION_S (3: the base run's length) seconds (as the recorder writes them: gzip members of whole
# rows, in time order), then `report` of it under /usr/bin/time: wall time and peak RSS.
#
#   BINS="/tmp/diskpulse-old target/release/diskpulse" REQUESTS=1000000,4000000 benches/report-trace.sh
#
# BINS: the builds to compare side by side (default: target/release/diskpulse), each on
# the same files, alternating per size. Root (record --trace needs tracefs). Everything it
# writes is under a temporary directory in /var/tmp, removed at the end and on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:-target/release/diskpulse}
REQUESTS=${REQUESTS:-1000000,4000000}
DURATION_S=${DURATION_S:-3}
work=$(mktemp -d /var/tmp/diskpulse-report-trace.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
first=${BINS%% *}
"$first" record --trace --device vda --duration 3s --no-progress --out "$work/base" >/dev/null 2>&1
printf '%-12s %-10s %-34s %10s %12s\n' requests calls binary wall_s peak_rss_MB
for n in ${REQUESTS//,/ }; do
  calls=${CALLS:-$((n / 20))}
  run="$work/run-$n"
  cp -r "$work/base" "$run"
  rm -rf "$run"/summary.json "$run"/report.html "$run"/timeline.* "$run"/rates.csv
  python3 - "$run" "$n" "$calls" "$DURATION_S" <<'EOF'
import gzip, random, sys
run, n, calls, dur = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
random.seed(n)
span = int(dur * 1e9)
def write(name, header, rows, line):
    step = span // max(rows, 1)
    with open(f"{run}/{name}", "wb") as f:
        f.write(gzip.compress((header + "\n").encode(), 1))
        buf = []
        for i in range(rows):
            buf.append(line(i * step + random.randrange(step or 1)))
            if len(buf) == 50000:
                f.write(gzip.compress("".join(buf).encode(), 1))
                buf = []
        if buf:
            f.write(gzip.compress("".join(buf).encode(), 1))
ops = [("write", "WS"), ("write", "W"), ("read", "R"), ("flush", "FF")]
def req(t):
    op, fl = random.choice(ops)
    return f"{t},vda,254,0,{op},{fl},{random.randrange(1 << 24)},{4096 << random.randrange(6)},{random.randrange(200000)},{random.randrange(20, 5000) * 1000},0,nats-server\n"
def call(t):
    pid = 1000 + random.randrange(3)
    return f"{t},{random.randrange(100, 20000) * 1000},{pid},{pid},nats-server,fdatasync,7,/data/jetstream/x.blk,0\n"
write("block_requests.csv.gz", "t_ns,device,major,minor,op,flags,sector,bytes,queue_ns,service_ns,error,comm", n, req)
write("fsync_calls.csv.gz", "t_ns,dur_ns,pid,tid,comm,call,fd,file,ret", calls, call)
EOF
  for bin in $BINS; do
    /usr/bin/time -v "$bin" report "$run" >/dev/null 2>"$work/time" || { tail -5 "$work/time"; exit 1; }
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$work/time")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$work/time")
    printf '%-12s %-10s %-34s %10s %12s\n' "$n" "$calls" "$bin" "$wall" "$rss"
    rm -f "$run"/summary.json "$run"/report.html "$run"/timeline.* "$run"/rates.csv
  done
done
