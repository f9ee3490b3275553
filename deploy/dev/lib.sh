# shellcheck shell=bash
# Sourced by the dev scripts (from the repo's root): the build, a private mosquitto and PostgreSQL on free loopback
# ports, waits with a deadline, and the processes the script started, ended by PID.
#   swift_build [--say] OPTION…          `swift build OPTION…`, its output in a file: all of it on stderr and exit 1 if
#                                         the build fails; --say prints its last line (what was built, how long)
#   free_port                            prints a loopback port nothing listens on
#   wait_until SECONDS COMMAND…          true once COMMAND succeeds (tried every $poll_seconds, default 0.1), false if it
#                                         has not within SECONDS
#   prints VALUE COMMAND…               true if COMMAND prints VALUE (a condition for wait_until)
#   prints_at_least N COMMAND…           true if COMMAND prints a whole number of N or more
#   wait_listening PORT SECONDS [PID]    true once something takes connections on 127.0.0.1:PORT; false after SECONDS
#                                         or once PID has exited
#   start_private_broker DIR [LINE…]     mosquitto on a free loopback port: DIR/mosquitto.conf (its listener,
#                                         `allow_anonymous true` unless a LINE says allow_anonymous, each LINE, `user
#                                         root` when root) and DIR/mosquitto.log; sets port and broker_pid; returns 1 if
#                                         it does not listen within 10 s
#   restart_private_broker DIR           mosquitto again with DIR's config and port (once the caller stopped the last)
#   start_postgres DIR [-c option…]      a PostgreSQL 15 cluster on a free loopback port (as the postgres user when
#                                         root: DIR's parents must let it in): data in DIR/data, socket in DIR, log
#                                         DIR/postgres.log; sets pgport, postgres_pid and db (its URL); returns 1 if it
#                                         does not take connections within 30 s
#   stop_started                         ends every PID in pids, the last started first (SIGTERM; PostgreSQL's fast
#                                         shutdown), and waits for each; for the script's EXIT trap
# Every process these start is added to pids; a script adds its own there too.
[ -z "${parkwise_dev_lib:-}" ] || return 0
parkwise_dev_lib=1
pids=()
poll_seconds=0.1
pgbin=/usr/lib/postgresql/15/bin

swift_build() {
    local say="" log status=0
    [ "${1:-}" != --say ] || { say=1; shift; }
    log=$(mktemp /tmp/parkwise-build.XXXXXX)
    swift build "$@" > "$log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then cat "$log" >&2; rm -f "$log"; exit 1; fi
    [ -z "$say" ] || tail -n 1 "$log"
    rm -f "$log"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_until() {
    local end=$((SECONDS + $1))
    shift
    while ! "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep "$poll_seconds"
    done
}

prints() { local out; out=$("${@:2}") && [ "$out" = "$1" ]; }
prints_at_least() { local n; n=$("${@:2}") && [ "$n" -ge "$1" ]; }

listening() { { : 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null; }

wait_listening() {
    local port=$1 end=$((SECONDS + $2)) pid=${3:-}
    until listening "$port"; do
        [ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || return 1
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

start_private_broker() {
    local dir=$1
    shift
    port=$(free_port)
    printf 'listener %s 127.0.0.1\n' "$port" > "$dir/mosquitto.conf"
    [[ "$*" == *allow_anonymous* ]] || echo "allow_anonymous true" >> "$dir/mosquitto.conf"
    [ $# -eq 0 ] || printf '%s\n' "$@" >> "$dir/mosquitto.conf"
    [ "$(id -u)" -ne 0 ] || echo "user root" >> "$dir/mosquitto.conf"
    restart_private_broker "$dir"
}

restart_private_broker() {
    local dir=$1 listen
    listen=$(awk '$1 == "listener" { print $2; exit }' "$dir/mosquitto.conf")
    /usr/sbin/mosquitto -c "$dir/mosquitto.conf" >> "$dir/mosquitto.log" 2>&1 &
    broker_pid=$!
    pids+=("$broker_pid")
    wait_listening "$listen" 10 "$broker_pid" && return 0
    echo "mosquitto did not come up on port $listen (log: $dir/mosquitto.log)" >&2
    return 1
}

start_postgres() {
    local dir=$1 as_pg=()
    shift
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" -ne 0 ] || { chown postgres "$dir"; as_pg=(runuser -u postgres --); }
    pgport=$(free_port)
    "${as_pg[@]}" "$pgbin/initdb" -D "$dir/data" -A trust -U postgres -N > /dev/null
    "${as_pg[@]}" "$pgbin/postgres" -D "$dir/data" -p "$pgport" -k "$dir" -c listen_addresses=127.0.0.1 "$@" \
        > "$dir/postgres.log" 2>&1 &
    postgres_pid=$!
    postgres_dir=$dir
    pids+=("$postgres_pid")
    # shellcheck disable=SC2034  # (for the scripts that source this)
    db=postgresql://postgres@127.0.0.1:$pgport/postgres
    wait_until 30 "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport" && return 0
    echo "PostgreSQL did not start within 30 s on port $pgport:" >&2
    tail -n 20 "$dir/postgres.log" >&2
    return 1
}

stop_started() {
    local i pid
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        pid=${pids[i]}
        if [ "$pid" = "${postgres_pid:-}" ] && [ -f "$postgres_dir/data/postmaster.pid" ]; then
            kill -INT "$(head -n 1 "$postgres_dir/data/postmaster.pid")" 2>/dev/null || true
        else
            kill "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    pids=()
}
