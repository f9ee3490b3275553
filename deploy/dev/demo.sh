#!/usr/bin/env bash
# The demo: a simulated ParkWise campus (156 spots, 4 lanes) publishing to a private mosquitto on a
# free loopback port, with the monitor showing what a backend would see. A morning at 60x: the
# garage fills from 06:30 in about two minutes. Ctrl-C stops it (the agent says offline first).
#   DEMO_SPEED=120 DEMO_SECONDS=60 deploy/dev/demo.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/setup.sh
work=$(mktemp -d /tmp/parkwise-demo.XXXXXX)
swift build --product parkwise-agent > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
agent=.build/debug/parkwise-agent
port=""
for _ in $(seq 1 50); do
    candidate=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then port=$candidate; break; fi
done
[ -n "$port" ] || { echo "demo: no free port found" >&2; exit 1; }

printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$work/mosquitto.conf"
[ "$(id -u)" -eq 0 ] && echo "user root" >> "$work/mosquitto.conf"
/usr/sbin/mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 &
broker=$!
monitor=""
agent_pid=""
cleanup() {
    [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
    [ -n "$monitor" ] && kill "$monitor" 2>/dev/null || true
    kill "$broker" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

echo "demo: broker mqtt://127.0.0.1:$port, state in $work" >&2
"$agent" monitor --broker "mqtt://127.0.0.1:$port" &
monitor=$!
"$agent" run --config hardware/examples/campus.yaml --simulate --speed "${DEMO_SPEED:-60}" \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" &
agent_pid=$!
if [ -n "${DEMO_SECONDS:-}" ]; then
    sleep "$DEMO_SECONDS"
else
    wait "$agent_pid"
fi
