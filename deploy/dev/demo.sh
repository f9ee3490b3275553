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
work=$(mktemp -d /tmp/parkwise-demo.XXXXXX)
swift build --product parkwise-agent > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
agent=.build/debug/parkwise-agent
backend=${DEMO_BACKEND:-}
if [ -n "$backend" ]; then
    swift build --product parkwise-bridge > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
fi
. deploy/dev/private-broker.sh
start_private_broker "$work" || exit 1
broker=$broker_pid
monitor=""
agent_pid=""
bridge_pid=""
cleanup() {
    # DEMO_KEEP_LOGS=DIR: the logs copied there first (deploy/dev/demo-check.sh shows them when a check fails).
    if [ -n "${DEMO_KEEP_LOGS:-}" ]; then cp -f "$work"/*.log "$work"/pg/log "$DEMO_KEEP_LOGS"/ 2>/dev/null || true; fi
    [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
    [ -n "$monitor" ] && kill "$monitor" 2>/dev/null || true
    [ -n "$bridge_pid" ] && kill -TERM "$bridge_pid" 2>/dev/null && wait "$bridge_pid" 2>/dev/null || true
    [ -f "$work/pg/data/postmaster.pid" ] && kill -INT "$(head -1 "$work/pg/data/postmaster.pid")" 2>/dev/null || true
    kill "$broker" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

echo "demo: broker mqtt://127.0.0.1:$port, state in $work" >&2
echo "demo: the garage live, in another terminal: $agent status --watch --outbox $work/outbox" >&2
if [ -n "$backend" ]; then
    # A private PostgreSQL (as the postgres user when root: it refuses to run as root), the
    # ParkWise schema, the bridge's migration, the bridge told to accept the simulated feed.
    pgbin=/usr/lib/postgresql/15/bin
    mkdir -p "$work/pg" && chmod 755 "$work" "$work/pg"
    as_pg=()
    [ "$(id -u)" -eq 0 ] && { chown postgres "$work/pg"; as_pg=(runuser -u postgres --); }
    pgport=$(free_port) || { echo "demo: no free loopback port found for PostgreSQL" >&2; exit 1; }
    "${as_pg[@]}" "$pgbin/initdb" -D "$work/pg/data" -A trust -U postgres -N > /dev/null
    "${as_pg[@]}" "$pgbin/postgres" -D "$work/pg/data" -p "$pgport" -k "$work/pg" -c listen_addresses=127.0.0.1 \
        > "$work/pg/log" 2>&1 &
    for _ in $(seq 1 300); do "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport" && break; sleep 0.1; done
    "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport" \
        || { echo "demo: PostgreSQL did not start within 30 s on port $pgport:" >&2; tail -n 20 "$work/pg/log" >&2; exit 1; }
    db=postgresql://postgres@127.0.0.1:$pgport/postgres
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f deploy/backend/parkwise-test-schema.sql
    .build/debug/parkwise-bridge migrate --database "$db" >&2
    printf 'accept_simulated: true\nspot_owners: first_report\nsnapshot_every: 1m\n' > "$work/bridge.yaml"   # simulated boards: nobody provisions them
    .build/debug/parkwise-bridge run --broker "mqtt://127.0.0.1:$port" --database "$db" --config "$work/bridge.yaml" \
        2> "$work/bridge.log" &
    bridge_pid=$!
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
    monitor=$!
else
    "$agent" monitor --broker "mqtt://127.0.0.1:$port" &
    monitor=$!
fi
"$agent" run --config hardware/examples/campus.yaml --simulate --speed "${DEMO_SPEED:-60}" \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" &
agent_pid=$!
if [ -n "${DEMO_SECONDS:-}" ]; then
    sleep "$DEMO_SECONDS"
else
    wait "$agent_pid"
fi
