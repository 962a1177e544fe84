#!/bin/bash
# A long recording with rotation, retention and triggers beside a periodic-sync nats-server,
# with a write stall caused by a cgroup v1 blkio throttle in the middle (issue 13 item 1,
# "a real 2-hour recording on this machine with rotation and a trigger").
#
#   DURATION=2h benches/record-days.sh            # the real one (root; ~2.5 GB free needed)
#   DURATION=90s CHUNK=20s KEEP=40s STALL_AT=45 benches/record-days.sh   # a rehearsal
#
# What it does: a 4 GiB loop volume with --direct-io=on over /var/tmp (so the loop
# device's requests stay in flight while the backing device is throttled: the stall shows
# as await on the loop device), ext4 on it, nats-server with `sync_interval: 5s`, then
#   diskpulse record --path VOLUME --chunk $CHUNK --keep $KEEP \
#       --trigger 'loopN:await_ms>50' --trigger 'loopN:write_mibps>400' \
#       --trigger 'ack_p99_ms>50' --trigger-window 2m \
#       --duration $DURATION -- diskpulse load js-pub --rate $RATE ...
# At STALL_AT seconds nats-server's writes to the backing disk are capped at $STALL_IOPS
# IOPS for $STALL_SECS seconds (blkio.throttle.write_iops_device), and the recorder gets
# SIGUSR1 (keep now) at the same moment. At the end: the run directory's size, its chunk
# list and triggers, and `diskpulse report`. Everything it starts is stopped and removed
# (also on Ctrl-C); the run directory stays.
set -euo pipefail
DURATION=${DURATION:-2h}
CHUNK=${CHUNK:-10m}
KEEP=${KEEP:-30m}
WINDOW=${WINDOW:-2m}
RATE=${RATE:-2000}
STALL_AT=${STALL_AT:-3600}
STALL_SECS=${STALL_SECS:-20}
STALL_IOPS=${STALL_IOPS:-10}
ACK_MS=${ACK_MS:-50}
BIN=${DISKPULSE:-$(dirname "$0")/../target/release/diskpulse}
[ -x "$BIN" ] || BIN=$(dirname "$0")/../target/debug/diskpulse
OUT=${OUT:-/var/tmp/record-days-$(date +%Y%m%d-%H%M%S)}
W=/var/tmp/record-days-$$
IMG=$W.img MNT=$W.mnt CG=/sys/fs/cgroup/blkio/diskpulse-record-days-$$
mkdir -p "$MNT"
DEV= NATS= REC=
cleanup() {
    set +e
    [ -n "$REC" ] && kill -INT "$REC" 2>/dev/null && wait "$REC" 2>/dev/null
    [ -n "$NATS" ] && kill "$NATS" 2>/dev/null && wait "$NATS" 2>/dev/null
    if [ -d "$CG" ]; then
        for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do echo "$p" > /sys/fs/cgroup/blkio/cgroup.procs; done
        rmdir "$CG"
    fi
    mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$DEV" ] && losetup -d "$DEV"
    rm -rf "$IMG" "$MNT" "$W.conf" "$W.mnt.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

truncate -s 4G "$IMG"
DEV=$(losetup -f --show --direct-io=on "$IMG")
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$DEV"
mount "$DEV" "$MNT"
cat > "$W.conf" <<EOF
listen: 127.0.0.1:14322
http: 127.0.0.1:18322
jetstream { store_dir: $MNT/js, sync_interval: 5s }
EOF
nats-server -c "$W.conf" > "$W.mnt.log" 2>&1 &
NATS=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:18322/healthz?js-enabled-only=true > /dev/null && break; sleep 0.1; done
# The backing file's disk (what the loop device's direct I/O reaches).
BACK=$(df --output=source /var/tmp | tail -1)
PK=$(lsblk -no PKNAME "$BACK" 2>/dev/null | head -1 | tr -d ' ' || true)
[ -n "$PK" ] && BACK=/dev/$PK
BACK_MM=$(lsblk -dno MAJ:MIN "$BACK" | head -1 | tr -d ' ')
mkdir -p "$CG"
echo "record-days: volume $DEV on $MNT (backing disk $BACK_MM), nats-server pid $NATS, run $OUT" >&2

"$BIN" record --no-progress --path "$MNT" --chunk "$CHUNK" --keep "$KEEP" \
    --trigger "${DEV#/dev/}:await_ms>50" --trigger "${DEV#/dev/}:write_mibps>400" \
    --trigger "ack_p99_ms>$ACK_MS" --trigger-window "$WINDOW" \
    --duration "$DURATION" --out "$OUT" -- \
    "$BIN" load js-pub --server nats://127.0.0.1:14322 --rate "$RATE" --size 128 \
    --duration "$DURATION" --max-bytes 1GiB --discard old --clients 2 &
REC=$!
sleep "$STALL_AT"
echo "record-days: stall: nats-server's writes to $BACK_MM capped at $STALL_IOPS IOPS for $STALL_SECS s" >&2
echo "$BACK_MM $STALL_IOPS" > "$CG/blkio.throttle.write_iops_device"
for t in $(ls /proc/$NATS/task); do echo "$t" > "$CG/tasks" 2>/dev/null || true; done
kill -USR1 "$REC"
sleep "$STALL_SECS"
for t in $(cat "$CG/tasks"); do echo "$t" > /sys/fs/cgroup/blkio/tasks 2>/dev/null || true; done
echo "$BACK_MM 0" > "$CG/blkio.throttle.write_iops_device" 2>/dev/null || true
echo "record-days: stall over" >&2
wait "$REC" || true
REC=
echo "== run directory: $(du -sh "$OUT" | cut -f1)" >&2
ls -la "$OUT" "$OUT/chunks" >&2 || true
python3 - "$OUT" <<'EOF' >&2
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/meta.json")).get("chunks") or {}
print("closed", len(c.get("closed", [])), "dropped", len(c.get("dropped", [])))
for f, fc in sorted((c.get("files") or {}).items()):
    print("%s: closed %d dropped %d" % (f, len(fc.get("closed", [])), len(fc.get("dropped", []))))
for k in c.get("kept_windows", []):
    print("kept %.1f-%.1f s: %s" % (k["from_t_ns"] / 1e9, k["to_t_ns"] / 1e9, k["what"][:200]))
for l in open(d + "/events.jsonl"):
    e = json.loads(l)
    if e["kind"] == "trigger":
        print("trigger at %.3f s: %s" % (e["t_ns"] / 1e9, e["detail"]))
EOF
/usr/bin/time -v "$BIN" report "$OUT" 2> "$W.time" | tail -20 || true
grep -E "Elapsed|Maximum resident" "$W.time" >&2 || true
rm -f "$W.time" "$W.mnt.log"
