#!/usr/bin/env bash
# diskpulse agent's cost and one recorder's capacity (issue 15). Prints figures; asserts
# nothing. Needs root, fio, nats-server (scripts/setup).
#
# 1. CPU: one agent at 1 ms on 4 loop devices under fio (500 write IOPS each, so every
#    device's counters change about every 2 ms), beside `diskpulse record` of the same 4
#    devices (the same samplers writing files), side by side, alternating, ROUNDS x SECS s
#    each; CPU from getrusage of each child (os.wait4).
# 2. Bytes per second on the wire: what the recorder received from that agent (meta.json
#    agents.nodes.*.sources.*.bytes) over the run.
# 3. N agents on loopback (all sampling the same 4 busy devices, as N nodes would their own)
#    into one `record --agents`: the recorder's CPU, the longest a batch waited to be
#    written (max_lag_ns: ~0.1-0.3 s while it keeps up), lost and duplicate batches.
#    N goes up to AGENTS_MAX (8: this shared 2-core VM runs the agents too). Where the
#    recorder falls behind: `cargo bench --bench agent_flood` (stand-ins on the wire).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_INCREMENTAL=0 cargo build --release -q
BIN=$PWD/target/release/diskpulse
WORK=$(mktemp -d /var/tmp/dp-agents.XXXXXX)
PORT=$((14000 + $$ % 1000))
DEVS=()
cleanup() {
  [ -n "${FIO:-}" ] && kill "$FIO" 2>/dev/null || true
  [ -n "${NATS:-}" ] && kill "$NATS" 2>/dev/null || true
  wait 2>/dev/null || true
  for d in "${DEVS[@]}"; do losetup -d "$d" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
for i in 0 1 2 3; do
  truncate -s 256M "$WORK/v$i.img"
  DEVS+=("$(losetup -f --show "$WORK/v$i.img")")
done
nats-server -a 127.0.0.1 -p "$PORT" >"$WORK/nats.log" 2>&1 &
NATS=$!
sleep 0.5
FIOARGS=()
for d in "${DEVS[@]}"; do
  FIOARGS+=(--name="$(basename "$d")" --filename="$d" --rw=randwrite --bs=4k --direct=1
            --ioengine=psync --rate_iops=500 --time_based --runtime=3600)
done
fio "${FIOARGS[@]}" --output=/dev/null &
FIO=$!
sleep 1
python3 - "$BIN" "$WORK" "$PORT" "${ROUNDS:-3}" "${SECS:-15}" "${AGENTS_MAX:-8}" "${DEVS[@]}" <<'PY'
import json, os, subprocess, sys, time
bin_, work, port, rounds, secs, nmax = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
devs = sys.argv[7:]
server = f"nats://127.0.0.1:{port}"
devargs = [a for d in devs for a in ("--device", d)]
q = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def cpu_of(p):
    _, _, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime

def agent(name, dur, **kw):
    return subprocess.Popen([bin_, "agent", "--server", server, "--name", name, "--duration", f"{dur}s"] + devargs, **kw)

print(f"1. CPU, 1 ms on {len(devs)} busy devices, {secs} s runs, alternating (share of one core):")
a_all, r_all = [], []
for r in range(rounds):
    p = agent("solo", secs, **q)
    a = cpu_of(p) / secs
    out = f"{work}/rec{r}"
    p = subprocess.Popen([bin_, "record", "--duration", f"{secs}s", "--no-progress", "--out", out] + devargs, **q)
    b = cpu_of(p) / secs
    subprocess.run(["rm", "-rf", out])
    a_all.append(a); r_all.append(b)
    print(f"   round {r+1}: agent {a*100:.1f}%   record {b*100:.1f}%   agent/record {a/b:.2f}")
print(f"   mean: agent {sum(a_all)/rounds*100:.1f}%  record {sum(r_all)/rounds*100:.1f}%  ratio {sum(a_all)/sum(r_all):.2f}")

print("2. bytes on the wire (one agent, its recorder's count):")
out = f"{work}/wire"
ag = agent("wire", secs + 4, **q)
time.sleep(1)
subprocess.run([bin_, "record", "--agents", "wire", "--server", server, "--device", devs[0],
                "--interval", "10ms", "--duration", f"{secs}s", "--no-progress", "--out", out], **q)
ag.wait()
m = json.load(open(f"{out}/meta.json"))
n = m["agents"]["nodes"]["wire"]
dur = m["duration_ns"] / 1e9
tot = 0
for s, v in n["sources"].items():
    tot += v["bytes"]
    print(f"   {s:9s} {v['bytes']/dur/1024:8.1f} KiB/s  {v['rows']/dur:8.0f} rows/s  {v['batches']/dur:5.1f} batches/s")
print(f"   total     {tot/dur/1024:8.1f} KiB/s (offset {n['offset_ns']/1e6:+.3f} ms, bound {n['bound_ns']/1e6:.3f} ms)")
subprocess.run(["rm", "-rf", out])

print(f"3. N agents into one recorder ({secs} s each):")
print("   N   recorder CPU   per agent   max lag     lost  dup   agents' CPU (sum)")
n = 1
while n <= nmax:
    names = [f"a{i}" for i in range(n)]
    ags = [agent(x, secs + 5, **q) for x in names]
    time.sleep(1.5)
    out = f"{work}/cap{n}"
    p = subprocess.Popen([bin_, "record", "--agents", ",".join(names), "--server", server,
                          "--device", devs[0], "--interval", "10ms", "--duration", f"{secs}s",
                          "--no-progress", "--out", out], **q)
    c = cpu_of(p) / secs
    acpu = sum(cpu_of(a) for a in ags) / (secs + 5)
    m = json.load(open(f"{out}/meta.json"))
    nodes = m["agents"]["nodes"].values()
    lag = max((v.get("max_lag_ns") or 0) for nd in nodes for v in nd["sources"].values())
    lost = sum(v["lost"] for nd in nodes for v in nd["sources"].values())
    dup = sum(v["duplicates"] for nd in nodes for v in nd["sources"].values())
    print(f"   {n:<3d} {c*100:9.1f}%   {c/n*100:8.2f}%   {lag/1e6:7.0f} ms  {lost:5d} {dup:4d}   {acpu*100:.0f}%")
    subprocess.run(["rm", "-rf", out])
    n *= 2
PY
