#!/usr/bin/env bash
# Bridge idle wake-ups, figures printed (never asserted): a private PostgreSQL 15 and mosquitto on free loopback
# ports, the ParkWise test schema, the bridge with its default settings (reassert_every 5 s) and no traffic. After a
# short settle, the context switches of each of the bridge's threads (/proc/PID/task/*/status) over IDLE_SECONDS
# (default 60), per minute. With IDLE_STRACE=1, a second window counts the waiting system calls (strace -f -c). With
# IDLE_METRICS=1 the bridge also writes a metrics_file (deploy/prometheus/): how often it was replaced in the window.
#   deploy/dev/bridge-idle.sh                       # the debug bridge (swift build --product parkwise-bridge)
#   BRIDGE_BIN=/path/to/parkwise-bridge IDLE_SECONDS=60 deploy/dev/bridge-idle.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${IDLE_SECONDS:-60}
settle=${IDLE_SETTLE:-3}

. deploy/dev/bridge-services.sh
bridge=${BRIDGE_BIN:-}
if [ -z "$bridge" ]; then
    swift_build --say --product parkwise-bridge
    bridge=$PWD/.build/debug/parkwise-bridge
fi
start_bridge_services "$bridge"

printf 'client_id: idle\n' > "$work/bridge.yaml"   # everything else at its default (reassert_every 5s)
metrics=""
if [ "${IDLE_METRICS:-0}" = 1 ]; then
    metrics=$work/parkwise-bridge.prom
    printf 'metrics_file: %s\n' "$metrics" >> "$work/bridge.yaml"
fi
"$bridge" run --broker "mqtt://127.0.0.1:$mqport" --database "$db" --config "$work/bridge.yaml" 2> "$work/bridge.log" &
pid=$!
pids+=("$pid")
# Over once the bridge says it runs, or has exited.
settled() { grep -q "bridge running" "$work/bridge.log" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; }
wait_until 60 settled || true
grep -q "bridge running" "$work/bridge.log" || { cat "$work/bridge.log" >&2; exit 1; }
sleep "$settle"

# tid name voluntary nonvoluntary, one line per thread.
switches() {
    for task in /proc/"$pid"/task/*; do
        awk -v tid="${task##*/}" '/^Name:/ {name=$2} /^voluntary_ctxt_switches:/ {v=$2} /^nonvoluntary_ctxt_switches:/ {n=$2}
            END {print tid, name, v, n}' "$task/status" 2>/dev/null || true
    done
}

echo "== idle for ${seconds} s, no traffic, reassert_every 5 s (default): context switches per minute, per thread"
switches > "$work/before"
inode_before=$([ -z "$metrics" ] || stat -c %i "$metrics")
sleep "$seconds"
switches > "$work/after"
if [ -n "$metrics" ]; then
    # Each replacement is a rename: a new inode.
    [ "$(stat -c %i "$metrics")" = "$inode_before" ] && replaced=no || replaced=yes
    echo "== metrics file $metrics replaced during the idle window: $replaced"
fi
python3 - "$work/before" "$work/after" "$seconds" <<'PY'
import sys
read = lambda p: {l.split()[0]: l.split()[1:] for l in open(p) if l.strip()}
before, after, seconds = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
total = 0.0
for tid, (name, v, n) in sorted(after.items(), key=lambda kv: int(kv[0])):
    if tid not in before:
        continue
    dv, dn = int(v) - int(before[tid][1]), int(n) - int(before[tid][2])
    per_min = (dv + dn) * 60 / seconds
    total += per_min
    print(f"  {name:<16} tid {tid:>7}: {per_min:8.1f}/min ({dv} voluntary, {dn} involuntary in {seconds:.0f} s)")
print(f"  all threads: {total:.1f} wake-ups/min ({total / 60:.2f}/s)")
PY

if [ "${IDLE_STRACE:-0}" = 1 ] && command -v strace >/dev/null; then
    echo "== idle for ${seconds} s under strace -f -c: waiting system calls"
    timeout -s INT "$seconds" strace -f -c -e trace=futex,poll,ppoll,nanosleep,clock_nanosleep -p "$pid" 2>&1 \
        | grep -E "calls|futex|poll|nanosleep|total" | sed 's/^/  /' || true
fi
