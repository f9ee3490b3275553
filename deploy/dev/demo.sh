#!/usr/bin/env bash
# The demo: a simulated ParkWise campus (156 spots, 4 lanes) publishing to a private mosquitto on a
# free loopback port, with the monitor showing what a backend would see. A morning at 60x: the
# garage fills from 06:30 in about two minutes. Ctrl-C stops it (the agent says offline first).
#   DEMO_SPEED=120 DEMO_SECONDS=60 deploy/dev/demo.sh
# DEMO_BACKEND=1 also starts a private PostgreSQL 15 with the ParkWise schema (156 spots) and
# parkwise-bridge, and prints the free spots per level as read back from the database.
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/setup.sh
. deploy/dev/lib.sh
swift_build --product parkwise-agent
agent=.build/debug/parkwise-agent
backend=${DEMO_BACKEND:-}
if [ -n "$backend" ]; then
    swift_build --product parkwise-bridge
fi
work=$(mktemp -d /tmp/parkwise-demo.XXXXXX)
# Ends the agent first (it says offline while the broker is up), the broker last.
cleanup() {
    # DEMO_KEEP_LOGS=DIR: the logs copied there first (deploy/dev/demo-check.sh shows them when a check fails).
    if [ -n "${DEMO_KEEP_LOGS:-}" ]; then cp -f "$work"/*.log "$work"/pg/*.log "$DEMO_KEEP_LOGS"/ 2>/dev/null || true; fi
    stop_started
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
start_private_broker "$work"

echo "demo: broker mqtt://127.0.0.1:$port, state in $work" >&2
echo "demo: the garage live, in another terminal: $agent status --watch --outbox $work/outbox" >&2
if [ -n "$backend" ]; then
    # A private PostgreSQL (as the postgres user when root: it refuses to run as root), the
    # ParkWise schema, the bridge's migration, the bridge told to accept the simulated feed.
    chmod 755 "$work"
    start_postgres "$work/pg"
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f deploy/backend/parkwise-test-schema.sql
    .build/debug/parkwise-bridge migrate --database "$db" >&2
    printf 'accept_simulated: true\nspot_owners: first_report\nsnapshot_every: 1m\n' > "$work/bridge.yaml"   # simulated boards: nobody provisions them
    .build/debug/parkwise-bridge run --broker "mqtt://127.0.0.1:$port" --database "$db" --config "$work/bridge.yaml" \
        2> "$work/bridge.log" &
    pids+=($!)
    echo "demo: database $db (psql -d $db), bridge log $work/bridge.log" >&2
    (
        while sleep 2; do
            psql -X -At -d "$db" -c "SELECT to_char(now(), 'HH24:MI:SS') || '  free spots (from PostgreSQL): ' ||
                string_agg(level_code || ' ' || free || '/' || total, '   ' ORDER BY level_code) ||
                '   sensor-unknown: ' || sum(unknown)
                FROM (SELECT level_code, count(*) FILTER (WHERE status = 'free') AS free, count(*) AS total,
                             count(*) FILTER (WHERE status = 'disabled' AND source = 'sensor') AS unknown
                      FROM spots GROUP BY level_code) l" 2>/dev/null || true
        done
    ) &
    pids+=($!)
else
    "$agent" monitor --broker "mqtt://127.0.0.1:$port" &
    pids+=($!)
fi
"$agent" run --config hardware/examples/campus.yaml --simulate --speed "${DEMO_SPEED:-60}" \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" &
agent_pid=$!
pids+=("$agent_pid")
if [ -n "${DEMO_SECONDS:-}" ]; then
    sleep "$DEMO_SECONDS"
else
    wait "$agent_pid"
fi
