# shellcheck shell=bash
# Sourced by the bridge's dev scripts (bridge-bench.sh, bridge-idle.sh, field-run.sh, fleet-bench.sh): a private PostgreSQL
# 15 and mosquitto on free loopback ports (deploy/dev/lib.sh), the ParkWise test schema migrated by the bridge, both
# stopped (with everything else in `pids`) at exit.
#   start_bridge_services BRIDGE [postgres -c option…]   sets work, pgport, mqport, db and pids; extra lines for
#                                                         mosquitto's config in $mosquitto_extra (and
#                                                         $mosquitto_access in place of allow_anonymous true);
#                                                         no mosquitto with bridge_services_broker=none
#   site_broker_files ROOT SITE USER…                    the site's ACL and a password for each USER in ROOT, for the
#                                                         broker start_bridge_services starts
. deploy/dev/lib.sh

stop_bridge_services() {
    stop_started
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
    local bridge=$1 line lines=()
    shift
    work=$(mktemp -d /tmp/parkwise-bridge-dev.XXXXXX)
    chmod 755 "$work"
    trap stop_bridge_services EXIT
    start_postgres "$work" "$@"
    if [ "${bridge_services_broker:-mosquitto}" = mosquitto ]; then
        while IFS= read -r line; do [ -z "$line" ] || lines+=("$line"); done <<<"${mosquitto_access:-}${mosquitto_extra:-}"
        start_private_broker "$work" "${lines[@]}"
        # shellcheck disable=SC2034  # (for the scripts that source this)
        mqport=$port
    fi
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f deploy/backend/parkwise-test-schema.sql
    "$bridge" migrate --database "$db" >/dev/null
}
