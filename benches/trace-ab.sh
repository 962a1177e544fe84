#!/bin/bash
# Two diskpulse builds side by side (issue 11's trace cost), alternating round by round:
# `record --trace --device LOOP` of OLD and of NEW beside fio randwrite 4k O_DIRECT libaio
# iodepth 32 on a loop device (page cache; DIO=on for --direct-io=on): fio's IOPS and the CPU
# of the recorder's `trace` and `write-block_req` threads (/proc/PID/task/*/stat, 10 ms ticks)
# per event read (meta.json trace.stats.events). Root, fio.
#   OLD=/tmp/diskpulse-main NEW=target/release/diskpulse benches/trace-ab.sh
# SECS (fio's run, default 8), ROUNDS (default 5).
set -e
: "${OLD:?OLD=path of the first diskpulse binary}" "${NEW:?NEW=path of the second}"
SECS=${SECS:-8}; ROUNDS=${ROUNDS:-5}; DIO=${DIO:-off}
F=/var/tmp/diskpulse-trace-ab-$$.img; truncate -s 256M $F
LO=$(losetup -f --show --direct-io=$DIO $F); N=$(basename $LO)
RP=
cleanup(){ [ -n "$RP" ] && kill -INT $RP 2>/dev/null && wait $RP; losetup -d $LO; rm -f $F; rm -rf /tmp/diskpulse-trace-ab-$$; }
trap cleanup EXIT
fio_iops(){ fio --name=w --filename=$LO --rw=randwrite --bs=4k --direct=1 --ioengine=libaio --iodepth=32 --size=256M --time_based --runtime=$1 --output-format=json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["write"]["iops"]))'; }
ticks(){ cat /proc/$1/task/*/stat 2>/dev/null | awk -v t="$2" '{ if ($2 ~ t) s += $14 + $15 } END { print s + 0 }'; }
one(){ # $1 = label, $2 = binary
  rm -rf /tmp/diskpulse-trace-ab-$$
  $2 record --trace --device $N --duration 1h --out /tmp/diskpulse-trace-ab-$$ >/dev/null 2>&1 &
  RP=$!
  for i in $(seq 200); do grep -q '"trace"' /tmp/diskpulse-trace-ab-$$/meta.json 2>/dev/null && break; sleep 0.05; done
  a0=$(ticks $RP '\\(trace\\)'); b0=$(ticks $RP 'write-block')
  iops=$(fio_iops $SECS)
  a1=$(ticks $RP '\\(trace\\)'); b1=$(ticks $RP 'write-block')
  kill -INT $RP; wait $RP || true; RP=
  ev=$(python3 -c "import json; print(json.load(open('/tmp/diskpulse-trace-ab-$$/meta.json'))['trace']['stats']['events'])")
  python3 -c "
ev=$ev; a=($a1-$a0)*1e7; b=($b1-$b0)*1e7
print(f'$1 iops $iops events {ev} trace_ns_per_ev {a/ev:.0f} writer_ns_per_ev {b/ev:.0f} both {(a+b)/ev:.0f}')"
}
fio_iops 2 >/dev/null
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then one old $OLD; one new $NEW; else one new $NEW; one old $OLD; fi
done
