#!/usr/bin/env bash
# diskpulse's load generator vs the official Go client (nats.go, benches/go-ref) on one
# nats-server: same workloads, run alternately (Go, diskpulse, Go, diskpulse, ...) ROUNDS
# times; each run starts on a freshly deleted and recreated stream/bucket. Prints the
# median msgs/s of each side, the ratio diskpulse/Go, the spread of the runs, and each
# client's msgs per CPU-second of its own process (user+sys) and of the server.
# Prints figures; asserts nothing.
#
# Needs: nats-server on PATH, Debian's golang-go and golang-github-nats-io-go-nats-dev
# (GOPATH build, no module downloads), cargo, python3.
#
# pubsub (nats bench --pub 4 --sub 4): PUBSUB_PUBS publishers send PUBSUB_MSGS in all and
# each of PUBSUB_SUBS subscribers must receive every one; the figures are the subscribers'
# (delivered msgs/s, first to last receipt over all of them), messages lost (expected -
# delivered) and, beside them, the publishers' own msgs/s.
#
# Environment (defaults): ROUNDS=3 ASYNC_MSGS=500000 SYNC_MSGS=20000 PUB_MSGS=2000000
#   KV_MSGS=20000 SIZE=128 WINDOW=256 CLIENTS=1
#   PUBSUB_MSGS=1000000 PUBSUB_PUBS=4 PUBSUB_SUBS=4
#   WORKLOADS="js-async js-sync pub kv-put pubsub"
#   GO_LEAN=1   also run nats.go js-pub-async with -lat=false (no per-ack future wait)
#   NICE=-10    run the server and both clients at this nice level (root; less noise from
#               other work on the machine, same for both sides)
#   KEEP=1      keep the work dir (server store, per-run JSON, raw results.tsv)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
ASYNC_MSGS=${ASYNC_MSGS:-500000}
SYNC_MSGS=${SYNC_MSGS:-20000}
PUB_MSGS=${PUB_MSGS:-2000000}
KV_MSGS=${KV_MSGS:-20000}
PUBSUB_MSGS=${PUBSUB_MSGS:-1000000}
PUBSUB_PUBS=${PUBSUB_PUBS:-4}
PUBSUB_SUBS=${PUBSUB_SUBS:-4}
SIZE=${SIZE:-128}
WINDOW=${WINDOW:-256}
CLIENTS=${CLIENTS:-1}
WORKLOADS=${WORKLOADS:-"js-async js-sync pub kv-put pubsub"}
STREAM=VSGO
SUBJECT=vsgo.js
PUB_SUBJECT=vsgo.core # captured by no stream: core publish stays core
BUCKET=vsgo

NICE_CMD=${NICE:+nice -n $NICE}
WORK=$(mktemp -d /var/tmp/dp-vs-go.XXXXXX)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# --- build ------------------------------------------------------------------------------
GO_REF=$WORK/go-ref
# Debian packages the Go sources under /usr/share/gocode: GOPATH mode, nothing downloaded.
env GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off GOCACHE="$WORK/gocache" \
  go build -o "$GO_REF" ./benches/go-ref
cargo build --release -q
DP=target/release/diskpulse

# --- server -----------------------------------------------------------------------------
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=nats://127.0.0.1:$PORT
mkdir -p "$WORK/store" "$WORK/out"
# JetStream, file store under /var/tmp, default sync_interval, no monitor port.
$NICE_CMD nats-server -js -sd "$WORK/store" -a 127.0.0.1 -p "$PORT" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do
  "$GO_REF" -url "$URL" -mode reset >/dev/null 2>&1 && break
  sleep 0.1
done
"$GO_REF" -url "$URL" -mode reset

server_cpu() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; } # clock ticks
TCK=$(getconf CLK_TCK)

echo "go: $(go version | awk '{print $3}'); nats.go: $(awk -F'"' '/Version += "/{print $2; exit}' /usr/share/gocode/src/github.com/nats-io/nats.go/nats.go);" \
  "$(nats-server --version); diskpulse: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo +dirty)" >&2
echo "server $URL store $WORK/store; rounds $ROUNDS; clients $CLIENTS; size $SIZE; nice ${NICE:-0}; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

RESULTS=$WORK/results.tsv
printf 'workload\tclient\tround\tmsgs_per_s\tmsgs\terrors\twall_s\tcpu_s\tserver_cpu_s\tp50_us\tp99_us\tstatus\tvol_cs\tinvol_cs\tlost\tpub_msgs_per_s\n' >"$RESULTS"

# fresh: an empty stream and bucket (or none, for core publish) before every run.
fresh() {
  "$GO_REF" -url "$URL" -mode reset -stream "$STREAM" -bucket "$BUCKET"
  [ "$1" = pub ] || [ "$1" = pubsub ] || "$GO_REF" -url "$URL" -mode setup -stream "$STREAM" -subject "$SUBJECT" -bucket "$BUCKET"
}

# run WORKLOAD CLIENT ROUND CMD...: times CMD (its own CPU and the server's), records a row.
run() {
  local wl=$1 who=$2 round=$3; shift 3
  local out=$WORK/out/$wl.$who.$round s0 s1 rc=0
  fresh "$wl"
  sync; sleep 0.5
  s0=$(server_cpu)
  $NICE_CMD /usr/bin/time -o "$out.time" -f '%e %U %S %w %c' "$@" >"$out.json" 2>"$out.err" || rc=$?
  s1=$(server_cpu)
  python3 - "$wl" "$who" "$round" "$out" "$rc" "$(( s1 - s0 ))" "$TCK" >>"$RESULTS" <<'PY'
import json, sys
wl, who, rnd, out, rc, sticks, tck = sys.argv[1:]
wall, u, s, vcs, ics = (open(out + ".time").read().split()[-5:] + ["nan"] * 5)[:5]
err = open(out + ".err").read().strip().replace("\t", " ").replace("\n", " | ")
row = dict(rate="", msgs="", errors="", p50="", p99="", status="ok", lost="", pub_rate="")
try:
    d = json.load(open(out + ".json"))
    if "roles" in d:  # diskpulse
        roles = {r["role"]: r for r in d["roles"]}
        r = roles["sub"] if wl == "pubsub" else d["roles"][0]
        lat = r.get("lat_us") or {}
        row.update(rate=r["msgs_per_s"], msgs=r["ops"], errors=sum(x["errors"] for x in d["roles"]),
                   p50=lat.get("p50", ""), p99=lat.get("p99", ""))
        if wl == "pubsub":
            row.update(lost=r["errors_by_kind"].get("missing", 0), pub_rate=roles["pub"]["msgs_per_s"])
    else:  # go-ref
        row.update(rate=d["msgs_per_s"], msgs=d["msgs"], errors=d["errors"],
                   p50=d.get("lat_p50_us", ""), p99=d.get("lat_p99_us", ""))
        if wl == "pubsub":
            row.update(lost=d.get("missing", ""), pub_rate=d.get("pub_msgs_per_s", ""))
    if int(rc) != 0:
        row["status"] = f"rc={rc}: {err[:200]}"
except Exception:
    row["status"] = "not built yet" if "not built yet" in err else f"failed rc={rc}: {err[:200]}"
cpu = float(u) + float(s) if u != "nan" else ""
print("\t".join(str(x) for x in [wl, who, rnd, row["rate"], row["msgs"], row["errors"], wall, cpu,
      int(sticks) / int(tck), row["p50"], row["p99"], row["status"], vcs, ics, row["lost"], row["pub_rate"]]))
PY
  tail -n 1 "$RESULTS" | awk -F'\t' '{printf "  %-8s %-10s round %s: %12s msgs/s  errors %s%s  client cpu %.2fs  server cpu %.2fs  ctx-sw vol/invol %s/%s  %s\n", $1, $2, $3, ($4==""?"-":sprintf("%.0f",$4)), ($6==""?"-":$6), ($15==""?"":sprintf("  lost %s  publishers %.0f msgs/s", $15, $16)), $8, $9, $13, $14, $12}' >&2
}

for wl in $WORKLOADS; do
  C=$CLIENTS
  case $wl in
    js-async)
      G=(-mode js-pub-async -msgs "$ASYNC_MSGS" -window "$WINDOW" -stream "$STREAM" -subject "$SUBJECT")
      D=(load js-pub --msgs "$ASYNC_MSGS" --window "$WINDOW" --stream "$STREAM" --subject "$SUBJECT") ;;
    js-sync)
      G=(-mode js-pub-sync -msgs "$SYNC_MSGS" -stream "$STREAM" -subject "$SUBJECT")
      D=(load js-pub --sync --msgs "$SYNC_MSGS" --stream "$STREAM" --subject "$SUBJECT") ;;
    pub)
      G=(-mode pub -msgs "$PUB_MSGS" -subject "$PUB_SUBJECT")
      D=(load pub --msgs "$PUB_MSGS" --subject "$PUB_SUBJECT") ;;
    pubsub)
      C=$PUBSUB_PUBS
      G=(-mode pubsub -msgs "$PUBSUB_MSGS" -subs "$PUBSUB_SUBS" -subject "$PUB_SUBJECT")
      D=(load pub --msgs "$PUBSUB_MSGS" --sub "$PUBSUB_SUBS" --subject "$PUB_SUBJECT") ;;
    kv-put)
      G=(-mode kv-put -msgs "$KV_MSGS" -bucket "$BUCKET" -keys 1000)
      D=(load kv-put --msgs "$KV_MSGS" --bucket "$BUCKET" --keys 1000) ;;
    *) echo "unknown workload $wl" >&2; exit 2 ;;
  esac
  echo "$wl:" >&2
  for r in $(seq "$ROUNDS"); do
    run "$wl" go "$r" "$GO_REF" -url "$URL" -size "$SIZE" -clients "$C" "${G[@]}"
    run "$wl" diskpulse "$r" "$DP" "${D[@]}" --server "$URL" --size "$SIZE" --clients "$C" --quiet --json
    if [ "$wl" = js-async ] && [ "${GO_LEAN:-0}" = 1 ]; then
      run "$wl" go-lean "$r" "$GO_REF" -url "$URL" -size "$SIZE" -clients "$C" "${G[@]}" -lat=false
    fi
  done
done

python3 - "$RESULTS" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
names = {"js-async": "js-pub async (window)", "js-sync": "js-pub sync", "pub": "core pub", "kv-put": "kv-put",
         "pubsub": "pub+sub delivered"}
def ok(r): return r["status"] == "ok" and r["msgs_per_s"] != ""
def med(rs, k): return st.median(float(r[k]) for r in rs) if rs else None
def spread(rs):
    if len(rs) < 2: return "-"
    v = [float(r["msgs_per_s"]) for r in rs]; m = st.median(v)
    return f"{(min(v) - m) / m * 100:+.0f}/{(max(v) - m) / m * 100:+.0f}%"
def per_cpu(rs, k):
    v = [float(r["msgs"]) / float(r[k]) for r in rs if r[k] not in ("", "nan") and float(r[k]) > 0]
    return f"{st.median(v) / 1e3:.0f}k" if v else "-"
print(f"{'workload':<22} {'Go msgs/s':>11} {'diskpulse':>11} {'dp/Go':>6}   {'Go spread':>10} {'dp spread':>10}"
      f"   {'msgs/client-CPU-s Go|dp':>23}   {'msgs/server-CPU-s Go|dp':>23}   {'p50 us Go|dp':>15}")
for wl in dict.fromkeys(r["workload"] for r in rows):
    g = [r for r in rows if r["workload"] == wl and r["client"] == "go" and ok(r)]
    d = [r for r in rows if r["workload"] == wl and r["client"] == "diskpulse" and ok(r)]
    dall = [r for r in rows if r["workload"] == wl and r["client"] == "diskpulse"]
    gm, dm = med(g, "msgs_per_s"), med(d, "msgs_per_s")
    ds = f"{dm:11.0f}" if dm else f"{(dall[0]['status'] if dall else 'no run')[:11]:>11}"
    ratio = f"{dm / gm:6.2f}" if dm and gm else f"{'-':>6}"
    lat = lambda rs: f"{med(rs, 'p50_us'):.0f}" if rs and all(r["p50_us"] for r in rs) else "-"
    print(f"{names.get(wl, wl):<22} {gm or 0:11.0f} {ds} {ratio}   {spread(g):>10} {spread(d):>10}"
          f"   {per_cpu(g, 'cpu_s') + ' | ' + per_cpu(d, 'cpu_s'):>23}"
          f"   {per_cpu(g, 'server_cpu_s') + ' | ' + per_cpu(d, 'server_cpu_s'):>23}   {lat(g) + ' | ' + lat(d):>15}")
    lean = [r for r in rows if r["workload"] == wl and r["client"] == "go-lean" and ok(r)]
    if lean:
        print(f"{'  (nats.go -lat=false)':<22} {med(lean, 'msgs_per_s'):11.0f} {'':11} {dm / med(lean, 'msgs_per_s') if dm else 0:6.2f}"
              f"   {spread(lean):>10} {'':>10}   {per_cpu(lean, 'cpu_s') + ' |':>23}")
ps = [r for r in rows if r["workload"] == "pubsub"]
if ps:
    print("pub+sub (each subscriber must get every message): lost messages and delivered msgs/s per run")
    for who in ("go", "diskpulse"):
        rs = [r for r in ps if r["client"] == who]
        runs = ", ".join(f"lost {r['lost'] or '?'} at {float(r['msgs_per_s'] or 0):,.0f}" for r in rs)
        pubs = [float(r["pub_msgs_per_s"]) for r in rs if r["pub_msgs_per_s"]]
        print(f"  {who:<10} {runs}; publishers median {st.median(pubs) if pubs else 0:,.0f} msgs/s")
    g = [r for r in ps if r["client"] == "go" and ok(r)]
    d = [r for r in ps if r["client"] == "diskpulse" and ok(r)]
    if g and d:
        print(f"  delivered msgs/s median: Go {med(g, 'msgs_per_s'):,.0f}, diskpulse {med(d, 'msgs_per_s'):,.0f}, "
              f"ratio {med(d, 'msgs_per_s') / med(g, 'msgs_per_s'):.2f}; "
              f"lost in all: Go {sum(int(r['lost'] or 0) for r in ps if r['client'] == 'go')}, "
              f"diskpulse {sum(int(r['lost'] or 0) for r in ps if r['client'] == 'diskpulse')}")
bad = [r for r in rows if not ok(r) or (r["errors"] not in ("", "0"))]
for r in bad:
    print(f"note: {r['workload']} {r['client']} round {r['round']}: errors={r['errors']} {r['status']}")
print("medians of the runs; spread = min/max vs median; CPU = user+sys of the client process "
      "(whole process, incl. connect) and of nats-server during the run")
PY
