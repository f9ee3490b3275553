# shellcheck shell=bash
# Sourced by the dev scripts (fleet-bench.sh): a three-node NATS cluster with JetStream and MQTT on free loopback ports,
# the shipped node config (deploy/nats/nats-node.conf) filled in per node, each node's store and log in its folder.
#   nats_users ROOT SITE USER…   ROOT/users.conf: each USER's password and the site's permissions (deploy/nats/README.md:
#                                a board writes its own topics, parkwise-backend reads the feed); ROOT/USER/credentials
#   start_nats_cluster ROOT      starts the nodes; sets nats_mqtt (MQTT ports), nats_pids, nats_urls (mqtt://…, one per node)
#   stop_nats_node I / start_nats_node I   stops (SIGKILL: a host lost) or starts node I (1–3) again with its store
#   wait_nats_node I             waits until node I takes MQTT connections (returns 1 after 60 s)
#   stop_nats_cluster            stops every node (SIGTERM)
. deploy/dev/lib.sh
nats_pids=(); nats_mqtt=(); nats_urls=(); nats_routes=(); nats_clients=()

# A board's permissions: its own topics, as deploy/mosquitto/acl.conf gives them (MQTT `/` is NATS `.`; `a/#` is both `a`
# and `a.>`); `$MQTT.sub.>` is where the cluster hands a QoS 1 subscription its messages (no topic of ours).
nats_device_permissions() {
    local p="parkwise.v1.$1.$2"
    printf '{ publish: { allow: ["%s.status", "%s.events", "%s.state.>", "%s.reply", "%s.doctor"] },\n' "$p" "$p" "$p" "$p" "$p"
    # shellcheck disable=SC2016  # ($MQTT is a NATS subject's, not the shell's)
    printf '  subscribe: { allow: ["%s.cmd", "%s.cmd.>", "%s.status", "%s.doctor", "$MQTT.sub.>"] } }' "$p" "$p" "$p" "$p"
}

nats_users() {
    local root=$1 site=$2 user password permissions
    shift 2
    # NATS 2.9 closes the connection of a client that publishes to a topic with a '.' (deploy/nats/README.md).
    for user in "$site" "$@"; do
        case $user in *.*) echo "nats_users: '$user' has a '.', which a NATS broker refuses in MQTT topics" >&2; return 1 ;; esac
    done
    mkdir -p "$root"
    { echo "authorization { users: ["
      for user in "$@"; do
          password=pw-$user-$RANDOM$RANDOM
          mkdir -p "$root/$user"
          printf 'username=%s\npassword=%s\n' "$user" "$password" > "$root/$user/credentials"
          chmod 600 "$root/$user/credentials"
          # shellcheck disable=SC2016  # ($MQTT is a NATS subject's, not the shell's)
          case $user in
              parkwise-backend) permissions='{ publish: { allow: ["parkwise.v1.*.*.cmd.>"] }, subscribe: { allow: ["parkwise.v1", "parkwise.v1.>", "$MQTT.sub.>"] } }' ;;
              parkwise-admin) permissions='{ publish: { allow: ["parkwise.v1.>"] }, subscribe: { allow: ["parkwise.v1", "parkwise.v1.>", "$MQTT.sub.>"] } }' ;;
              *) permissions=$(nats_device_permissions "$site" "$user") ;;
          esac
          printf '  { user: "%s", password: "%s", permissions: %s }\n' "$user" "$password" "$permissions"
      done
      echo "] }"; } > "$root/users.conf"
}

start_nats_node() {
    local i=$1 dir=$nats_root/n$1
    mkdir -p "$dir/store"
    sed -e "s#@NAME@#n$i#; s#@STORE@#$dir/store#; s#@CLIENT@#127.0.0.1:${nats_clients[$i]}#" \
        -e "s#@CLUSTER@#127.0.0.1:${nats_routes[$i]}#; s#@MQTT@#127.0.0.1:${nats_mqtt[$i]}#" \
        -e "s#@ROUTES@#nats-route://127.0.0.1:${nats_routes[1]}, nats-route://127.0.0.1:${nats_routes[2]}, nats-route://127.0.0.1:${nats_routes[3]}#" \
        -e "s#@USERS@#../users.conf#" deploy/nats/nats-node.conf > "$dir/nats.conf"
    nats-server -c "$dir/nats.conf" >> "$dir/nats.log" 2>&1 &
    nats_pids[i]=$!
}

# Waits until node I takes MQTT connections (a node opens its MQTT port once its routes are up).
wait_nats_node() {
    local i=$1
    wait_listening "${nats_mqtt[$i]}" 60 "${nats_pids[$i]}" && return 0
    kill -0 "${nats_pids[$i]}" 2>/dev/null || { echo "nats node n$i stopped: $(tail -3 "$nats_root/n$i/nats.log")" >&2; return 1; }
    echo "nats node n$i did not open its MQTT port in 60 s: $nats_root/n$i/nats.log" >&2
    return 1
}

stop_nats_node() { kill -KILL "${nats_pids[$1]}" 2>/dev/null || true; wait "${nats_pids[$1]}" 2>/dev/null || true; }

start_nats_cluster() {
    nats_root=$1
    command -v nats-server > /dev/null || { echo "nats-server is not installed: apt install nats-server (Debian 12+)" >&2; return 1; }
    local i
    for i in 1 2 3; do
        nats_clients[i]=$(free_port); nats_routes[i]=$(free_port); nats_mqtt[i]=$(free_port)
        # shellcheck disable=SC2034  # (for the scripts that source this)
        nats_urls[i]=mqtt://127.0.0.1:${nats_mqtt[$i]}
    done
    for i in 1 2 3; do start_nats_node "$i"; done
    for i in 1 2 3; do wait_nats_node "$i" || return 1; done
    nats_prime
}

# The cluster makes its MQTT streams at the first MQTT connection. Made by several nodes at once (boards and bridges
# connecting to different nodes right after a start), a stream came out with 4 replicas on 3 nodes ("MQTT messages
# stream replicas mismatch: current is 4"); so one connection (the backend's login) makes them once the nodes agree
# on a JetStream leader, and the clients come after.
nats_prime() {
    local i end=$(( SECONDS + 60 )) user password
    for i in 1 2 3; do
        until grep -q "metadata leader" "$nats_root/n$i/nats.log"; do
            [ $SECONDS -lt $end ] || { echo "nats node n$i never saw a JetStream leader: $nats_root/n$i/nats.log" >&2; return 1; }
            sleep 0.1
        done
    done
    user=$(sed -n 's/^username=//p' "$nats_root/parkwise-backend/credentials")
    password=$(sed -n 's/^password=//p' "$nats_root/parkwise-backend/credentials")
    mosquitto_sub -p "${nats_mqtt[1]}" -u "$user" -P "$password" -i nats-prime -t parkwise/v1/prime -W 1 > /dev/null 2>&1 || true
    until grep -q "new stream leader for '\$G > \$MQTT_msgs'" "$nats_root"/n*/nats.log; do
        [ $SECONDS -lt $end ] || { echo "the cluster made no MQTT message stream in 60 s: $nats_root/n1/nats.log" >&2; return 1; }
        sleep 0.1
    done
}

stop_nats_cluster() {
    local i
    for i in 1 2 3; do [ -z "${nats_pids[$i]:-}" ] || kill "${nats_pids[$i]}" 2>/dev/null || true; done
    for i in 1 2 3; do [ -z "${nats_pids[$i]:-}" ] || wait "${nats_pids[$i]}" 2>/dev/null || true; done
}
