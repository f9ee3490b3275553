# Sourced by the bridge's dev scripts (bridge-bench.sh, bridge-idle.sh): a private PostgreSQL 15 and mosquitto on
# free loopback ports, the ParkWise test schema migrated by the bridge, both stopped (with what `pids` lists) at exit.
#   start_bridge_services BRIDGE [postgres -c option…]   sets work, pgport, mqport, db and pids; extra lines for
#                                                         mosquitto's config in $mosquitto_extra (and
#                                                         $mosquitto_access in place of allow_anonymous true);
#                                                         no mosquitto with bridge_services_broker=none
#   site_broker_files ROOT SITE USER…                    the site's ACL and a password for each USER in ROOT, for the
#                                                         broker start_bridge_services starts
pgbin=/usr/lib/postgresql/15/bin
pids=()
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop_bridge_services() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$work/data/postmaster.pid" ] && kill -INT "$(head -1 "$work/data/postmaster.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}

# site_broker_files ROOT SITE USER...: in ROOT (made here, kept by the caller), the shipped ACL (deploy/mosquitto/acl.conf)
# for SITE, a password file with a random password for each USER, and ROOT/USER/credentials (username=, password=;
# 0600); sets mosquitto_access to them and mosquitto_extra to persistence in ROOT (append to it for more).
site_broker_files() {
    local root=$1 site=$2 user password
    shift 2
    mkdir -p "$root"
    chmod 755 "$root"
    : > "$root/passwd"
    for user in "$@"; do
        password=pw-$user-$RANDOM$RANDOM
        printf '%s:%s\n' "$user" "$password" >> "$root/passwd"
        mkdir -p "$root/$user"
        printf 'username=%s\npassword=%s\n' "$user" "$password" > "$root/$user/credentials"
        chmod 600 "$root/$user/credentials"
    done
    mosquitto_passwd -U "$root/passwd"
    sed "s#parkwise/v1/uniandes/#parkwise/v1/$site/#" deploy/mosquitto/acl.conf > "$root/acl"
    [ "$(id -u)" -ne 0 ] || chown -R root "$root"
    mosquitto_access=$'allow_anonymous false\npassword_file '"$root"$'/passwd\nacl_file '"$root"$'/acl\n'
    mosquitto_extra=$'persistence true\npersistence_location '"$root"$'/\n'
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
    if [ "${bridge_services_broker:-mosquitto}" = mosquitto ]; then
        /usr/sbin/mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 &
        pids+=($!)
    fi
    until "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport"; do sleep 0.1; done
    db=postgresql://postgres@127.0.0.1:$pgport/postgres
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f deploy/backend/parkwise-test-schema.sql
    "$bridge" migrate --database "$db" >/dev/null
}
