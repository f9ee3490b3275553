#!/usr/bin/env bash
# Soak: the ParkWise campus (hardware/examples/campus.yaml) in fast simulation for a simulated week (by default in
# SOAK_MINUTES=10 real minutes, about 1000x), against a private mosquitto on loopback that is restarted every
# RESTART_SECONDS (default 120). Prints the agent's RSS, open file descriptors, threads and events seen every
# SAMPLE_SECONDS (default 30), then the first and last figures. Figures, never assertions: flat RSS and fds are
# what to look for. BIN=path/to/parkwise-agent measures another build (default: the release build made here).
set -euo pipefail
cd "$(dirname "$0")/../.."

SOAK_MINUTES=${SOAK_MINUTES:-10}
RESTART_SECONDS=${RESTART_SECONDS:-120}
SAMPLE_SECONDS=${SAMPLE_SECONDS:-30}
SIM_DAYS=${SIM_DAYS:-7}
speed=$(awk -v d="$SIM_DAYS" -v m="$SOAK_MINUTES" 'BEGIN { s = d * 86400 / (m * 60); if (s > 10000) s = 10000; printf "%.0f", s }')
. deploy/dev/lib.sh
if [[ -z "${BIN:-}" ]]; then
    swift_build -c release --static-swift-stdlib --product parkwise-agent
    BIN=.build/release/parkwise-agent
fi
work=$(mktemp -d /tmp/parkwise-soak.XXXXXX)
trap 'stop_started; rm -rf "$work"' EXIT
start_private_broker "$work"
# Events seen by a subscriber, one line each (it reconnects by itself after a broker restart).
mosquitto_sub -p "$port" -t 'parkwise/v1/+/+/events' -c -i soak-counter -q 1 > "$work/events" 2>/dev/null &
pids+=($!)

echo "== soak: campus at ${speed}x for ${SOAK_MINUTES} min (${SIM_DAYS} simulated days), broker restarted every ${RESTART_SECONDS} s"
"$BIN" run --config hardware/examples/campus.yaml --simulate --speed "$speed" \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" 2> "$work/agent.log" &
agent=$!
pids+=("$agent")

sample() {
    local rss fds threads
    rss=$(awk '/^VmRSS/ {print $2}' /proc/"$agent"/status)
    fds=$(find /proc/"$agent"/fd -mindepth 1 -maxdepth 1 | wc -l)
    threads=$(awk '/^Threads/ {print $2}' /proc/"$agent"/status)
    printf '%6s s  RSS %6s kB  fds %3s  threads %2s  events seen %8s\n' "$1" "$rss" "$fds" "$threads" "$(wc -l < "$work/events")"
}

begin=$(date +%s)
next_restart=$((begin + RESTART_SECONDS))
restarts=0
: > "$work/samples"
while :; do
    now=$(date +%s)
    elapsed=$((now - begin))
    kill -0 "$agent" 2>/dev/null || { echo "soak: the agent exited" >&2; cat "$work/agent.log" >&2; exit 1; }
    sample "$elapsed" | tee -a "$work/samples"
    ((elapsed >= SOAK_MINUTES * 60)) && break
    if ((now >= next_restart)); then
        kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true
        sleep 2   # the outage: a measured length, not a wait for a condition
        restart_private_broker "$work"
        restarts=$((restarts + 1))
        next_restart=$((next_restart + RESTART_SECONDS))
    fi
    sleep "$SAMPLE_SECONDS"
done

kill -TERM "$agent"; wait "$agent" || true
echo "== broker restarts: $restarts"
echo "== first and last: $(sed -n 2p "$work/samples" | tr -s ' ')  ->  $(tail -n 1 "$work/samples" | tr -s ' ')"
awk '{ if ($4 > max) max = $4 } END { print "== highest RSS: " max " kB" }' "$work/samples"
echo "== agent log: $(grep -c '^warn' "$work/agent.log" || true) warnings; outbox drops declared: $(grep -c 'announcing dropped' "$work/agent.log" || true); line changes shed: $(grep -c 'line changes shed' "$work/agent.log" || true)"
