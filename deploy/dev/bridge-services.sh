# Sourced by the bridge's dev scripts (bridge-bench.sh, bridge-idle.sh): a private PostgreSQL 15 and mosquitto on
# free loopback ports, the ParkWise test schema migrated by the bridge, both stopped (with what `pids` lists) at exit.
#   start_bridge_services BRIDGE [postgres -c option…]   sets work, pgport, mqport, db and pids; extra lines for
#                                                         mosquitto's config in $mosquitto_extra (and
#                                                         $mosquitto_access in place of allow_anonymous true)
pgbin=/usr/lib/postgresql/15/bin
pids=()
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop_bridge_services() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$work/data/postmaster.pid" ] && kill -INT "$(head -1 "$work/data/postmaster.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}

start_bridge_services() {
    local bridge=$1; shift
    local as_pg=()
    work=$(mktemp -d /tmp/parkwise-bridge-dev.XXXXXX)
    chmod 755 "$work"
    trap stop_bridge_services EXIT
    [ "$(id -u)" -eq 0 ] && { chown postgres "$work"; as_pg=(runuser -u postgres --); }
    pgport=$(free_port); mqport=$(free_port)
    "${as_pg[@]}" "$pgbin/initdb" -D "$work/data" -A trust -U postgres -N >/dev/null
    "${as_pg[@]}" "$pgbin/postgres" -D "$work/data" -p "$pgport" -k "$work" -c listen_addresses=127.0.0.1 "$@" \
        > "$work/postgres.log" 2>&1 &
    pids+=($!)
    printf 'listener %s 127.0.0.1\n%s%s' "$mqport" "${mosquitto_access:-$'allow_anonymous true\n'}" "${mosquitto_extra:-}" > "$work/mosquitto.conf"
    [ "$(id -u)" -eq 0 ] && echo "user root" >> "$work/mosquitto.conf"
    /usr/sbin/mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 &
    pids+=($!)
    until "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport"; do sleep 0.1; done
    db=postgresql://postgres@127.0.0.1:$pgport/postgres
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f deploy/backend/parkwise-test-schema.sql
    "$bridge" migrate --database "$db" >/dev/null
}
