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
work=$(mktemp -d /tmp/parkwise-soak.XXXXXX)
if [[ -z "${BIN:-}" ]]; then
    swift build -c release --static-swift-stdlib --product parkwise-agent > "$work/build.log" 2>&1 \
        || { cat "$work/build.log" >&2; exit 1; }
    BIN=.build/release/parkwise-agent
fi
broker=""
agent=""
counter=""
cleanup() {
    for p in $agent $counter $broker; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 40000))
printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$work/m.conf"
[ "$(id -u)" -eq 0 ] && echo "user root" >> "$work/m.conf"
start_broker() {
    /usr/sbin/mosquitto -c "$work/m.conf" >/dev/null 2>&1 & broker=$!
    for _ in $(seq 1 50); do mosquitto_pub -p "$port" -t probe -n 2>/dev/null && return 0; sleep 0.1; done
    echo "soak: mosquitto did not come up on port $port" >&2
    return 1
}
start_broker
# Events seen by a subscriber, one line each (it reconnects by itself after a broker restart).
mosquitto_sub -p "$port" -t 'parkwise/v1/+/+/events' -c -i soak-counter -q 1 > "$work/events" 2>/dev/null & counter=$!

echo "== soak: campus at ${speed}x for ${SOAK_MINUTES} min (${SIM_DAYS} simulated days), broker restarted every ${RESTART_SECONDS} s"
"$BIN" run --config hardware/examples/campus.yaml --simulate --speed "$speed" \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" 2> "$work/agent.log" & agent=$!

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
        kill "$broker"; wait "$broker" 2>/dev/null || true
        sleep 2
        start_broker
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
