#!/usr/bin/env bash
# Host figures for the agent's edge path (issue 12), printed, never asserted:
#   - idle: voluntary context switches per thread over IDLE_SECONDS (default 60) with nothing happening
#   - per edge: system calls (strace -f -c, two trace lengths subtracted, so start and stop cancel out)
#     and CPU time (all threads' schedstat run time) for one spot sensor, zero filter delays, one edge at a time
#   - start-up: spawn -> first PUBLISH seen by a subscriber (RUNS runs, min and median)
#   - overload: RSS while a 400,000-change trace is replayed at 2000x (OVERLOAD_SECONDS, default 60)
#   - profile: the top symbols of `perf record` over a fast replay (PROFILE=0 skips it)
# Against a private mosquitto on loopback; the outbox on the host's disk (real fdatasync).
# BIN=path/to/parkwise-agent measures another build (default: the release build, static stdlib, made here).
set -euo pipefail
cd "$(dirname "$0")/../.."

IDLE_SECONDS=${IDLE_SECONDS:-60}
EDGES=${EDGES:-500}
RUNS=${RUNS:-7}
PROFILE=${PROFILE:-1}
OVERLOAD_SECONDS=${OVERLOAD_SECONDS:-60}
. deploy/dev/lib.sh
if [[ -z "${BIN:-}" ]]; then
    swift_build -c release --static-swift-stdlib --product parkwise-agent
    BIN=.build/release/parkwise-agent
fi
work=$(mktemp -d /tmp/parkwise-edge.XXXXXX)
trap 'stop_started; rm -rf "$work"' EXIT
start_private_broker "$work" "max_inflight_messages 0"

# One spot sensor, no filter delays: one line change, one event.
printf '%s\n' 'site: bench' 'device: edge' 'board: simulated' 'levels: [ { id: L1, capacity: 1 } ]' 'spots:' \
    '  - { id: L1-001, input: GPIO2, delayed_on: 0, delayed_off: 0, chatter_limit: 10000 }' > "$work/agent.yaml"

# trace N START_MS STEP_MS: N edges of GPIO2, alternating, the first at START_MS.
trace() {
    local i
    for ((i = 0; i < $1; i++)); do printf '{"t_ms": %s, "input": "GPIO2", "value": %s}\n' $(($2 + i * $3)) $(((i + 1) % 2)); done
}

# wait_for FILE TEXT [SECONDS]: until the file holds the text (30 s by default).
wait_for() {
    wait_until "${3:-30}" grep -q "$2" "$1" 2>/dev/null && return 0
    echo "edge-bench: '$2' not seen in $1" >&2
    cat "$1" >&2
    return 1
}

# Sum of every thread's CPU time (ns) from schedstat.
cpu_ns() {
    local sum=0 t v
    for t in /proc/"$1"/task/*/schedstat; do read -r v _ < "$t" && sum=$((sum + v)); done
    echo "$sum"
}

# Per thread: "tid name voluntary nonvoluntary".
switches() {
    local t
    for t in /proc/"$1"/task/*; do
        printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ < "$t/comm")" \
            "$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status")" \
            "$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status")"
    done
}

stop_agent() {
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

echo "== binary: $BIN ($(stat -c %s "$BIN") bytes)"

echo "== idle: voluntary context switches per thread over ${IDLE_SECONDS} s (connected, nothing happening)"
trace 2 100 100 > "$work/idle.jsonl"
"$BIN" run --config "$work/agent.yaml" --replay "$work/idle.jsonl" --broker "mqtt://127.0.0.1:$port" \
    --outbox "$work/idle" 2> "$work/idle.log" & agent=$!; pids+=("$agent")
wait_for "$work/idle.log" "trace finished"
sleep 2
switches $agent > "$work/sw0"
sleep "$IDLE_SECONDS"
switches $agent > "$work/sw1"
join "$work/sw0" "$work/sw1" | awk -v s="$IDLE_SECONDS" '
    { d = $6 - $3; total += d; printf "  thread %-8s %-16s %6d voluntary (%.2f/s)\n", $1, $2, d, d / s }
    END { printf "  all threads: %d voluntary switches in %d s = %.2f wake-ups/s\n", total, s, total / s }'
stop_agent $agent

echo "== per edge: system calls (strace -f -c) and CPU, one edge every 20 ms"
short=100
syscalls() {   # syscalls N: total system calls of a run over an N-edge trace
    trace "$1" 1500 20 > "$work/t$1.jsonl"
    rm -rf "$work/s$1"
    strace -f -c -o "$work/strace$1" "$BIN" run --config "$work/agent.yaml" --replay "$work/t$1.jsonl" \
        --broker "mqtt://127.0.0.1:$port" --outbox "$work/s$1" 2> "$work/s$1.log" & local tracer=$!
    wait_for "$work/s$1.log" "trace finished" 60
    sleep 1
    # strace's child is the agent: stop it, not strace.
    kill -TERM "$(pgrep -P $tracer)"
    wait $tracer || true
    awk '$NF == "total" {print $4}' "$work/strace$1"
}
a=$(syscalls $short)
b=$(syscalls $((short + EDGES)))
echo "  $a calls with $short edges, $b with $((short + EDGES)): $(( (b - a) / EDGES )) system calls per edge"
echo "  by call, per edge (the longer run minus the shorter):"
# strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
calls() { awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $NF, $4}' "$1" | sort; }
join -a 2 -e 0 -o 0,1.2,2.2 <(calls "$work/strace$short") <(calls "$work/strace$((short + EDGES))") \
    | awk -v n="$EDGES" '{ d = ($3 - $2) / n; if (d >= 0.05) printf "    %-18s %5.2f\n", $1, d }' | sort -k2 -rn

trace "$EDGES" 1500 20 > "$work/cpu.jsonl"
"$BIN" run --config "$work/agent.yaml" --replay "$work/cpu.jsonl" --broker "mqtt://127.0.0.1:$port" \
    --outbox "$work/cpu" 2> "$work/cpu.log" & agent=$!; pids+=("$agent")
wait_for "$work/cpu.log" "uplink connected"
c0=$(cpu_ns $agent)
wait_for "$work/cpu.log" "trace finished" 60
sleep 1
c1=$(cpu_ns $agent)
echo "  CPU: $(( (c1 - c0) / EDGES / 1000 )) us per edge (all threads, $EDGES edges)"
stop_agent $agent

echo "== start-up: spawn -> first PUBLISH at a subscriber ($RUNS runs)"
times=()
for _ in $(seq 1 "$RUNS"); do
    rm -rf "$work/up"
    mosquitto_sub -p "$port" -t "parkwise/v1/bench/edge/#" -R -C 1 > /dev/null & sub=$!
    sleep 0.3
    t0=$(date +%s%N)
    "$BIN" run --config "$work/agent.yaml" --replay "$work/idle.jsonl" --broker "mqtt://127.0.0.1:$port" \
        --outbox "$work/up" 2> "$work/up.log" & agent=$!
    wait $sub
    t1=$(date +%s%N)
    times+=("$(( (t1 - t0) / 1000 ))")
    stop_agent $agent
done
printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "  min %.1f ms, median %.1f ms, max %.1f ms\n", v[1] / 1000, v[int((NR + 1) / 2)] / 1000, v[NR] / 1000 }'

echo "== overload: 400,000 changes of 8 spot sensors (one every 2 s of trace time) replayed at 2000x, broker up: RSS"
printf '%s\n' 'site: bench' 'device: overload' 'board: simulated' 'levels: [ { id: L1, capacity: 8 } ]' 'spots:' > "$work/over.yaml"
for s in 2 3 4 5 6 7 8 9; do
    printf '  - { id: L1-00%s, input: GPIO%s, delayed_on: 0, delayed_off: 0, chatter_limit: 10000 }\n' "$s" "$s" >> "$work/over.yaml"
done
awk 'BEGIN { for (i = 0; i < 400000; i++) printf "{\"t_ms\": %d, \"input\": \"GPIO%d\", \"value\": %d}\n", 1000 + i * 2000, 2 + i % 8, int(i / 8 + 1) % 2 }' \
    > "$work/over.jsonl"
"$BIN" run --config "$work/over.yaml" --replay "$work/over.jsonl" --speed 2000 --broker "mqtt://127.0.0.1:$port" \
    --outbox "$work/over" 2> "$work/over.log" & agent=$!; pids+=("$agent")
wait_for "$work/over.log" "agent running"
for ((t = 0; t <= OVERLOAD_SECONDS; t += 10)); do
    printf '  %4s s  RSS %6s kB\n' "$t" "$(awk '/^VmRSS/ {print $2}' /proc/$agent/status)"
    ((t < OVERLOAD_SECONDS)) && sleep 10
done
echo "  $(grep -c 'line changes shed' "$work/over.log" || true) shed warnings, $(grep -c 'outbox full' "$work/over.log" || true) outbox-full warnings"
stop_agent $agent

if [[ "$PROFILE" == 1 ]] && command -v perf >/dev/null 2>&1; then
    echo "== profile: perf record over $((EDGES * 4)) edges at 2 ms (top symbols, self time)"
    trace $((EDGES * 4)) 1500 2 > "$work/prof.jsonl"
    "$BIN" run --config "$work/agent.yaml" --replay "$work/prof.jsonl" --broker "mqtt://127.0.0.1:$port" \
        --outbox "$work/prof" 2> "$work/prof.log" & agent=$!; pids+=("$agent")
    wait_for "$work/prof.log" "uplink connected"
    perf record -q -F 2000 -g -p $agent -o "$work/perf.data" > /dev/null 2>&1 & rec=$!
    wait_for "$work/prof.log" "trace finished" 60
    kill -INT $rec; wait $rec || true
    stop_agent $agent
    perf report -i "$work/perf.data" --no-children --sort dso,symbol --stdio 2> /dev/null \
        | grep -E '^ +[0-9.]+%' > "$work/perf.txt" || true
    cut -c1-110 "$work/perf.txt" | sed -n 1,25p
    echo "  user space only (the agent's binary and libc, share of all samples):"
    perf report -i "$work/perf.data" --no-children --sort symbol --dsos "$(basename "$BIN"),libc.so.6" --stdio 2> /dev/null \
        | grep -E '^ +[0-9.]+%' > "$work/perf-user.txt" || true
    cut -c1-110 "$work/perf-user.txt" | sed -n 1,15p
fi
