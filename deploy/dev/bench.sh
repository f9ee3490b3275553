#!/usr/bin/env bash
# Benchmarks that print figures (never assertions): core throughput and allocations per change,
# release binary size, start-up to first publish, and RSS after a minute of simulated traffic.
#   deploy/dev/bench.sh            (needs valgrind for allocations: apt-get install valgrind)
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/setup.sh
# The board build: the Swift runtime linked in statically (smaller RSS, no toolchain on the board).
swift build -c release --static-swift-stdlib 2>&1 | tail -n 1
bin=.build/release

echo "== core throughput (one core)"
"$bin/parkwise-bench" 2000000

if command -v valgrind >/dev/null 2>&1; then
    echo "== allocations per line change in the core (valgrind: with the core minus without it)"
    allocs() { valgrind "$bin/parkwise-bench" "$@" 2>&1 | sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' | tr -d ,; }
    n=100000
    with=$(allocs $n); without=$(allocs $n generate-only)
    echo "allocs: $n changes: $with with the core, $without generating only: $(( (with - without) * 100 / n ))/100 per change"
fi

echo "== release binary"
strip -o /tmp/parkwise-agent.stripped "$bin/parkwise-agent"
echo "parkwise-agent: $(stat -c %s "$bin/parkwise-agent") bytes, stripped $(stat -c %s /tmp/parkwise-agent.stripped) bytes"

echo "== start-up to first publish, RSS after 60 s of simulated traffic (campus, 60x)"
work=$(mktemp -d /tmp/parkwise-bench.XXXXXX)
port=$((20000 + RANDOM % 40000))
printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$work/m.conf"
[ "$(id -u)" -eq 0 ] && echo "user root" >> "$work/m.conf"
/usr/sbin/mosquitto -c "$work/m.conf" >/dev/null 2>&1 & broker=$!
trap 'kill $broker 2>/dev/null; kill $sub 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.5
mosquitto_sub -p "$port" -t 'parkwise/#' -C 1 -F '%t' > "$work/first" & sub=$!
sleep 0.3
t0=$(date +%s%N)
"$bin/parkwise-agent" run --config hardware/examples/campus.yaml --simulate --speed 60 \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" 2> "$work/agent.log" & agent=$!
wait $sub
t1=$(date +%s%N)
echo "start-up to first publish: $(( (t1 - t0) / 1000000 )) ms ($(cat "$work/first"))"
sleep 60
echo "RSS after 60 s: $(grep VmRSS /proc/$agent/status | awk '{print $2}') kB (peak $(grep VmHWM /proc/$agent/status | awk '{print $2}') kB)"
kill -TERM $agent; wait $agent || true
