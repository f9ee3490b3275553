# Sourced by the dev scripts: a private mosquitto on a free loopback port.
#   start_private_broker DIR [LINE…]   sets `port` and `broker_pid`; config (with each LINE added) and log in DIR;
#                                     returns 1 if it does not come up
#   free_port                  prints a loopback port nothing listens on (returns 1 if none is found)
free_port() {
    local candidate
    for _ in $(seq 1 50); do
        candidate=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then echo "$candidate"; return 0; fi
    done
    return 1
}

start_private_broker() {
    local dir=$1
    shift
    port=$(free_port) || { echo "no free loopback port found for mosquitto" >&2; return 1; }
    printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$dir/mosquitto.conf"
    [ $# -eq 0 ] || printf '%s\n' "$@" >> "$dir/mosquitto.conf"
    [ "$(id -u)" -eq 0 ] && echo "user root" >> "$dir/mosquitto.conf"
    /usr/sbin/mosquitto -c "$dir/mosquitto.conf" > "$dir/mosquitto.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0; sleep 0.1; done
    echo "mosquitto did not come up on port $port (log: $dir/mosquitto.log)" >&2
    return 1
}
