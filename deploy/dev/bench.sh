#!/usr/bin/env bash
# Benchmarks that print figures (never assertions): core throughput and allocations per change,
# the uplink (outbox append with fsync, drain of 200 buffered events and of a full 20,000, sustained QoS 1), release
# binary size, start-up to first publish, RSS after a minute of simulated traffic and with 200
# events buffered. Needs valgrind for the allocation count (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/setup.sh
. deploy/dev/lib.sh
# The board build: the Swift runtime linked in statically (smaller RSS, no toolchain on the board).
swift_build -c release --static-swift-stdlib
bin=.build/release
work=$(mktemp -d /tmp/parkwise-bench.XXXXXX)
trap 'stop_started; rm -rf "$work"' EXIT

echo "== core throughput (one core)"
"$bin/parkwise-bench" core 2000000

if command -v valgrind >/dev/null 2>&1; then
    echo "== allocations per line change in the core (valgrind: with the core minus without it)"
    allocs() { valgrind "$bin/parkwise-bench" core "$@" 2>&1 | sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' | tr -d ,; }
    n=100000
    with=$(allocs $n); without=$(allocs $n generate-only)
    echo "allocs: $n changes: $with with the core, $without generating only: $(( (with - without) * 100 / n ))/100 per change"
fi

echo "== payload encode on the edge path (hand-written vs JSONEncoder, same bytes)"
"$bin/parkwise-bench" wire 200000
"$bin/parkwise-bench" delivery 1000000
"$bin/parkwise-bench" overflow 200

echo "== release binary"
strip -o "$work/parkwise-agent.stripped" "$bin/parkwise-agent"
echo "parkwise-agent: $(stat -c %s "$bin/parkwise-agent") bytes, stripped $(stat -c %s "$work/parkwise-agent.stripped") bytes"

start_private_broker "$work" "max_inflight_messages 0"

echo "== uplink on loopback"
"$bin/parkwise-bench" uplink "$port" "$work/uplink" 2>/dev/null
"$bin/parkwise-bench" drain "$port" "$work/uplink" 2>/dev/null

echo "== highest sustained rate without drops, broker acking in 5-20 ms (about 90 s)"
"$bin/parkwise-bench" sustained "$port" "$work/sustained" 2>/dev/null

echo "== RSS with 200 events buffered (broker unreachable, 500 events)"
mkdir -p "$work/offline"
{ printf 'site: bench\ndevice: offline\nboard: simulated\nlevels: [ { id: P1, capacity: 20 } ]\nspots:\n'
  for s in 1 2 3 4 5 6 7 8; do printf '  - { id: P1-A-0%s, input: GPIO%s, delayed_on: 0, delayed_off: 0, chatter_limit: 10000 }\n' $s $((s + 1)); done
} > "$work/offline/agent.yaml"
for i in $(seq 0 499); do s=$((i % 8)); printf '{"t_ms": %s, "input": "GPIO%s", "value": %s}\n' $((i * 4)) $((s + 2)) $(( (i / 8 + 1) % 2 )); done > "$work/offline/trace.jsonl"
"$bin/parkwise-agent" run --config "$work/offline/agent.yaml" --replay "$work/offline/trace.jsonl" \
    --broker "mqtt://127.0.0.1:1" --outbox "$work/offline/outbox" 2> "$work/offline/log" & agent=$!; pids+=("$agent")
for _ in $(seq 1 100); do grep -q "trace finished" "$work/offline/log" && break; sleep 0.1; done
echo "RSS: $(grep VmRSS /proc/$agent/status | awk '{print $2}') kB with 200 events in the outbox"
kill -TERM $agent; wait $agent 2>/dev/null || true

echo "== start-up to first publish, RSS after 60 s of simulated traffic (campus, 60x)"
mosquitto_sub -p "$port" -t 'parkwise/v1/uniandes/#' -C 1 -F '%t' > "$work/first" & sub=$!
sleep 0.3
t0=$(date +%s%N)
"$bin/parkwise-agent" run --config hardware/examples/campus.yaml --simulate --speed 60 \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" 2> "$work/agent.log" & agent=$!; pids+=("$agent")
wait $sub
t1=$(date +%s%N)
echo "start-up to first publish: $(( (t1 - t0) / 1000000 )) ms ($(cat "$work/first"))"
sleep 60
echo "RSS after 60 s: $(grep VmRSS /proc/$agent/status | awk '{print $2}') kB (peak $(grep VmHWM /proc/$agent/status | awk '{print $2}') kB)"
kill -TERM $agent; wait $agent 2>/dev/null || true
