#!/usr/bin/env bash
# A city on one machine (issue 25): FLEET_AGENTS simulated garages (default 200), each its own device id, password,
# level of 24 spots with a gate in and out, and outbox; one mosquitto with the site's ACL (deploy/mosquitto/acl.conf)
# and persistence; two bridges on a shared subscription; one PostgreSQL with the backend's tables and a level of spots
# per garage. Prints figures, and exits 1 when the end is wrong:
#   1. start storm: every agent started at once; time until `parkwise-bridge fleet` shows every board online
#   2. peak: FLEET_PEAK_S (120) seconds of the morning at FLEET_SPEED (60)x: events/s committed, the bridges' delivery
#      to commit latency, CPU (cores) and memory by kind of process
#   3. broker restart: mosquitto stopped (SIGTERM: its persistence written) and started again; time until every board
#      is online again and the bridges caught up
#   4. the end: every agent stopped (SIGTERM); every spot in the database equals its board's retained state, every
#      seq of every board arrived or lies in a declared gap, and both fleet views show every board OFFLINE.
#   FLEET_AGENTS=300 deploy/dev/fleet-bench.sh      (FLEET_BRIDGES=1: one bridge, to compare)
# FLEET_BROKER=nats: the site broker is a three-node NATS cluster (deploy/nats/README.md, deploy/dev/nats-cluster.sh) with
# the same users and permissions; each board lists the three nodes (starting at a different one), each bridge too, and
# both bridges take every board (NATS has no shared subscriptions; the database applies each seq once; FLEET_PARTITION=1:
# they split the boards with `partition: k/N`). Step 3 is then
# a node lost: one node killed (SIGKILL) mid-stream, its boards and bridges moving to the others; the node started
# again with its store, and the end's retained states read from it:
#   FLEET_BROKER=nats FLEET_AGENTS=24 FLEET_PEAK_S=30 deploy/dev/fleet-bench.sh      (the node-loss run)
set -euo pipefail
cd "$(dirname "$0")/../.."
agents=${FLEET_AGENTS:-200}
speed=${FLEET_SPEED:-60}
peak_s=${FLEET_PEAK_S:-120}
bridges=${FLEET_BRIDGES:-2}   # 1: one bridge, for comparison
broker=${FLEET_BROKER:-mosquitto}
((agents >= 1 && agents <= 9999)) || { echo "fleet-bench: FLEET_AGENTS is 1 to 9999" >&2; exit 64; }
case $broker in mosquitto|nats) ;; *) echo "fleet-bench: FLEET_BROKER is mosquitto or nats" >&2; exit 64 ;; esac

# FLEET_BUILD=debug: the test command's debug binaries (a correctness run; the figures are release builds').
build=${FLEET_BUILD:-release}
. deploy/dev/bridge-services.sh
swift_build -c "$build" --product parkwise-agent
swift_build -c "$build" --product parkwise-bridge
agent_bin=$PWD/.build/$build/parkwise-agent
bridge=$PWD/.build/$build/parkwise-bridge
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
poll_seconds=0.2
# The password file and ACL exist before the broker starts.
fleet_root=$(mktemp -d /tmp/parkwise-fleet.XXXXXX)
width=$(( agents > 999 ? 4 : 3 ))   # digits of a garage's number: g001…g999, or g0001… for a city of 1,000 and more
device() { printf 'g%0*d\n' "$width" "$1"; }
level() { printf 'G%0*d\n' "$width" "$1"; }
if [ "$broker" = nats ]; then
    . deploy/dev/nats-cluster.sh
    # shellcheck disable=SC2046
    nats_users "$fleet_root" city parkwise-backend $(for i in $(seq 1 "$agents"); do device "$i"; done)
    bridge_services_broker=none
else
    # shellcheck disable=SC2046
    site_broker_files "$fleet_root" city parkwise-backend $(for i in $(seq 1 "$agents"); do device "$i"; done)
    mosquitto_extra+=$'max_queued_messages 0\nmax_connections -1\n'
fi
cp -p "$fleet_root/parkwise-backend/credentials" "$fleet_root/backend.credentials"
bridge_password=$(sed -n 's/^password=//p' "$fleet_root/backend.credentials")

start_bridge_services "$bridge"
# FLEET_KEEP=1 keeps the logs, configs and outboxes (and the broker's persistence) in $fleet_root.
trap 'declare -F stop_fleet > /dev/null && stop_fleet; [ "$broker" != nats ] || stop_nats_cluster; stop_bridge_services
      [ -n "${FLEET_KEEP:-}" ] && echo "kept: $fleet_root" >&2 || rm -rf "$fleet_root"' EXIT
if [ "$broker" = nats ]; then
    start_nats_cluster "$fleet_root" || exit 1
    broker_pids() { echo "${nats_pids[@]}"; }
    # Board i lists the three nodes from node (i mod 3) on, so the boards spread over the cluster.
    # MQTT 3.1.1 said in the config (deploy/nats/README.md): no refused MQTT 5 handshake per node at each reconnection.
    brokers_of() { local k=$(( $1 % 3 )) urls=("${nats_urls[@]}")
                   printf '  brokers: ["%s", "%s", "%s"]\n  protocol: "3.1.1"' "${urls[@]:k}" "${urls[@]:0:k}"; }
    bridge_brokers=$(IFS=,; echo "${nats_urls[*]}")
    # No shared subscriptions on NATS: each bridge takes every board, and the database applies each seq once (a QoS 1
    # delivery NATS 2.9 dropped for one subscriber reached the other in our runs: deploy/nats/README.md);
    # FLEET_PARTITION=1: the bridges split the boards (`partition: k/N`), half the database work, one copy of each.
    share_line=""
    mqport=${nats_mqtt[1]}
else
    mosquitto_pid=$broker_pid
    broker_pids() { echo "$mosquitto_pid"; }
    brokers_of() { printf '  brokers: ["mqtt://127.0.0.1:%s"]' "$mqport"; }
    bridge_brokers=mqtt://127.0.0.1:$mqport
    share_line='share_group: city-bridges\n'
fi
sql() { psql -X -At -d "$db" -c "$1"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
fail() { echo "fleet-bench: FAILED: $*" >&2; exit 1; }

# The backend's side: a level of 24 spots (zones A and B of 12) per garage, beside the campus.
sql "INSERT INTO levels (code, name, sort, underground)
       SELECT format('G%s', lpad(g::text, $width, '0')), 'Garage ' || g, 100 + g, false FROM generate_series(1, $agents) g;
     INSERT INTO spots (id, level_code, zone, code)
       SELECT format('G%s-%s-%s', lpad(g::text, $width, '0'), z, lpad(n::text, 2, '0')), format('G%s', lpad(g::text, $width, '0')),
              z, z || '-' || lpad(n::text, 2, '0')
       FROM generate_series(1, $agents) g, unnest(ARRAY['A', 'B']) z, generate_series(1, 12) n" > /dev/null

# The agents' configs: a simulated board, its level, two lanes, 24 spots.
for i in $(seq 1 "$agents"); do
    d=$(device "$i"); l=$(level "$i")
    {
        printf 'site: city\ndevice: %s\nboard: simulated\nmqtt:\n%s\n' "$d" "$(brokers_of "$i")"
        printf '  credentials: %s\n  keepalive: 30s\noutbox:\n  path: %s\n  capacity: 200\n' "$fleet_root/$d/credentials" "$fleet_root/$d/outbox"
        printf 'spot_id_pattern: "<level>-<zone>-<nn>"\nlevels:\n  - { id: %s, capacity: 24 }\nlanes:\n' "$l"
        printf '  - { id: gate-in, from: outside, to: %s, loops: { a: GPIO24, b: GPIO25 } }\n' "$l"
        printf '  - { id: gate-out, from: %s, to: outside, loops: { a: GPIO13, b: GPIO19 } }\nspots:\n' "$l"
        n=0
        for pin in 2 3 4 5 6 7 8 9 10 11 12 14 15 16 17 18 20 21 22 23 26 27 0 1; do
            n=$(( n + 1 ))
            zone=A; k=$n; [ $n -gt 12 ] && { zone=B; k=$(( n - 12 )); }
            printf '  - { id: %s-%s-%02d, input: GPIO%s }\n' "$l" "$zone" "$k" "$pin"
        done
    } > "$fleet_root/$d/agent.yaml"
done
"$agent_bin" check-config "$fleet_root/$(device 1)/agent.yaml" > /dev/null || fail "the generated config is refused"

bridge_pids=()
start_bridges() {
    local names=(bridge-a bridge-b) k=0 split
    for name in "${names[@]:0:$bridges}"; do
        k=$(( k + 1 )); split=""
        [ "$broker" != nats ] || [ -z "${FLEET_PARTITION:-}" ] || split="partition: $k/$bridges\n"
        printf "sites: [city]\naccept_simulated: true\nspot_owners: first_report\n${share_line}${split}client_id: %s\ncredentials: %s\n" \
            "$name" "$fleet_root/backend.credentials" > "$fleet_root/$name.yaml"
        "$bridge" run --broker "$bridge_brokers" --database "$db" --config "$fleet_root/$name.yaml" \
            > /dev/null 2>> "$fleet_root/$name.log" &
        bridge_pids+=($!)
    done
}
agent_pids=()
stop_fleet() {
    for p in "${agent_pids[@]}" "${bridge_pids[@]}"; do kill "$p" 2>/dev/null || true; done
}

fleet_online() { sql "SELECT count(*) FROM sensor_devices WHERE site = 'city' AND online"; }
committed() { sql "SELECT count(*) FROM sensor_events WHERE site = 'city'"; }
# CPU seconds so far of the PIDs listed in $1 (utime + stime of the process, its threads included).
cpu() { local t=0 p list; read -ra list <<<"$1"; for p in "${list[@]}"; do
    t=$(awk -v t="$t" -v hz="$(getconf CLK_TCK)" '{ print t + ($14 + $15) / hz }' "/proc/$p/stat" 2>/dev/null || echo "$t"); done; echo "$t"; }
# Memory of the PIDs listed in $1: their proportional set sizes (shared pages split among the processes sharing them).
pss_mb() { local k=0 p list; read -ra list <<<"$1"; for p in "${list[@]}"; do
    k=$(( k + $(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0) )); done; echo $(( k / 1024 )); }
postgres_pids() { local main children; main=$(head -1 "$work/data/postmaster.pid"); children=$(pgrep -P "$main" || true)
                  echo "$main" "${children//$'\n'/ }"; }

echo "== $agents garages (24 spots, 2 lanes each: $(( agents * 24 )) spots), $bridges bridge(s), broker $broker, speed ${speed}x"
start_bridges
running_bridges() { cat "$fleet_root"/bridge-*.log 2>/dev/null | grep -c "bridge running"; }
wait_until 30 prints_at_least "$bridges" running_bridges \
    || fail "the bridges did not start: $(cat "$fleet_root"/bridge-*.log)"

# FLEET_TAP=1: every event the broker hands a third QoS 1 subscriber, in $fleet_root/tap.txt (with FLEET_KEEP: which
# seqs reached the broker's subscribers, against what the bridges committed).
if [ -n "${FLEET_TAP:-}" ]; then
    stdbuf -oL mosquitto_sub -p "$mqport" -u parkwise-backend -P "$bridge_password" -i fleet-tap -c -q 1 -v \
        -t 'parkwise/v1/city/+/events' > "$fleet_root/tap.txt" 2>&1 &
    bridge_pids+=($!)
fi
echo "== 1. start storm: $agents agents started at once"
t0=$(now)
for i in $(seq 1 "$agents"); do
    d=$(device "$i")
    "$agent_bin" run --config "$fleet_root/$d/agent.yaml" --simulate --speed "$speed" --sim-start 07:00 --seed "$i" \
        > /dev/null 2> "$fleet_root/$d/agent.log" &
    agent_pids+=($!)
done
wait_until 300 prints "$agents" fleet_online || fail "only $(fleet_online) of $agents boards online after 300 s"
echo "every board online in the database after $(since "$t0") s"

echo "== 2. peak: ${peak_s} s of the morning at ${speed}x"
declare -A members cpu0
members=([agents]="${agent_pids[*]}" [broker]="$(broker_pids)" [bridges]="${bridge_pids[*]}" [postgres]="$(postgres_pids)")
kinds="agents broker bridges postgres"
for k in $kinds; do cpu0[$k]=$(cpu "${members[$k]}"); done
e0=$(committed); t0=$(now)
sleep "$peak_s"   # a measuring window, not a wait for a condition
e1=$(committed); t1=$(now)
for k in $kinds; do
    python3 -c "import sys; n, a, b, w, m = sys.argv[1:]; print(f'  {n:8} {(float(b) - float(a)) / float(w):.2f} cores, {m} MB (PSS)')" \
        "$k" "${cpu0[$k]}" "$(cpu "${members[$k]}")" "$(python3 -c "print($t1 - $t0)")" "$(pss_mb "${members[$k]}")"
done
python3 -c "print(f'committed: {($e1 - $e0) / ($t1 - $t0):.0f} events/s ({$e1 - $e0} in {$t1 - $t0:.0f} s)')"
grep -h "info applied" "$fleet_root"/bridge-*.log | tail -4 | sed 's/^/  /' || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); rebirths asked for missing seqs so far: $(cat "$fleet_root"/bridge-*.log | grep -c 'events missing' || true)"

e0=$(committed)
sql "CREATE TABLE fleet_before AS SELECT device, (status->>'reconnects')::int AS reconnects FROM sensor_devices WHERE site = 'city'" > /dev/null
# A board is back once its status online says one more reconnection than before.
back="SELECT count(*) FROM sensor_devices d JOIN fleet_before b USING (device)
      WHERE d.site = 'city' AND d.online AND (d.status->>'reconnects')::int > b.reconnects"
if [ "$broker" = nats ]; then
    echo "== 3. node lost: n1 of the cluster killed (SIGKILL) mid-stream, then started again"
    # The boards whose link to n1 broke: those that log a loss after the kill.
    lost_boards() { local n=0 d; for d in "$fleet_root"/g*/agent.log; do
        [ "$(grep -c "uplink lost" "$d" || true)" -gt "${lost_before[$d]:-0}" ] && n=$(( n + 1 )); done; echo "$n"; }
    declare -A lost_before
    for d in "$fleet_root"/g*/agent.log; do lost_before[$d]=$(grep -c "uplink lost" "$d" || true); done
    bridge_lost0=$(cat "$fleet_root"/bridge-*.log | grep -c "uplink lost" || true)
    stop_nats_node 1
    t0=$(now); restarted=$t0
    lost_boards_back() { local lost; lost=$(lost_boards); [ "$lost" -gt 0 ] && prints_at_least "$lost" sql "$back"; }
    wait_until 300 lost_boards_back \
        || fail "only $(sql "$back") of $(lost_boards) boards of n1 back online 300 s after it was lost"
    echo "the $(lost_boards) boards of n1 online again through n2/n3 $(since "$t0") s after n1 was lost; $(( $(committed) - e0 )) events committed meanwhile"
    echo "bridges: $(( $(cat "$fleet_root"/bridge-*.log | grep -c "uplink lost" || true) - bridge_lost0 )) lost their link to n1; their reconnections:"
    grep -h "uplink connected" "$fleet_root"/bridge-*.log | tail -2 | sed 's/^/  /' || true
    t1=$(now)
    start_nats_node 1
    wait_nats_node 1 || fail "n1 did not start again"
    echo "n1 back after $(since "$t1") s (its store: $(du -sh "$fleet_root/n1/store" | cut -f1))"
    mqport=${nats_mqtt[1]}
else
    echo "== 3. broker restart: $agents boards reconnect, replay and publish every state again"
    kill -TERM "$mosquitto_pid"; while kill -0 "$mosquitto_pid" 2>/dev/null; do sleep 0.05; done
    t0=$(now); restarted=$t0
    restart_private_broker "$work"
    mosquitto_pid=$broker_pid
    wait_until 300 prints "$agents" sql "$back" || fail "only $(sql "$back") of $agents boards back online 300 s after the restart"
    echo "every board online again $(since "$t0") s after the broker came back; $(( $(committed) - e0 )) events committed meanwhile"
fi

echo "== 4. the end: every agent stopped"
t0=$(now)
for p in "${agent_pids[@]}"; do kill -TERM "$p"; done
for p in "${agent_pids[@]}"; do wait "$p" || fail "an agent exited $? at its stop: see $fleet_root"; done
agent_pids=()
echo "every agent stopped after $(since "$t0") s"
mosquitto_sub -p "$mqport" -u parkwise-backend -P "$bridge_password" -t 'parkwise/v1/city/+/state/spot/#' -v --retained-only -C $(( agents * 24 )) -W 30 \
    > "$fleet_root/truth.txt" 2>/dev/null || true
truth=$(python3 - "$fleet_root/truth.txt" "$(( agents * 24 ))" <<'PY'
import json, sys
spots = {}
for line in open(sys.argv[1]):
    topic, payload = line.rstrip("\n").split(" ", 1)
    state = json.loads(payload)["state"]
    spots[topic.rsplit("/", 1)[1]] = "disabled" if state == "unknown" else state
if len(spots) != int(sys.argv[2]):
    sys.exit(f"{len(spots)} retained spot states, not {sys.argv[2]}")
print(",".join(f"{k}={v}" for k, v in sorted(spots.items())))
PY
) || fail "the retained states: $truth"
sensed="SELECT coalesce(string_agg(id || '=' || status, ',' ORDER BY id COLLATE \"C\"), '') FROM spots WHERE source = 'sensor' AND id LIKE 'G%'"
if wait_until 120 prints "$truth" sql "$sensed"; then
    echo "every spot in the database equals its board's retained state $(since "$t0") s after the stop"
else
    python3 - "$truth" "$(sql "$sensed")" <<'PY' >&2
import sys
a = dict(x.split("=") for x in sys.argv[1].split(",")); b = dict(x.split("=") for x in sys.argv[2].split(",") if x)
diff = [f"{k}: board {a.get(k)}, database {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
print(f"{len(diff)} spots differ, e.g. " + "; ".join(diff[:10]))
PY
    fail "the database does not equal the boards' retained states"
fi
undeclared=$(sql "
    WITH top AS (SELECT device, max(seq) AS top FROM sensor_events WHERE site = 'city' GROUP BY device),
         declared AS (SELECT device, (payload->>'first_seq')::bigint AS a, (payload->>'last_seq')::bigint AS b
                      FROM sensor_events WHERE site = 'city' AND type = 'outbox.dropped')
    SELECT top.device || ':' || s FROM top, generate_series(1, top.top) s
    WHERE NOT EXISTS (SELECT 1 FROM sensor_events e WHERE e.site = 'city' AND e.device = top.device AND e.seq = s)
      AND NOT EXISTS (SELECT 1 FROM declared d WHERE d.device = top.device AND s BETWEEN d.a AND d.b)
    ORDER BY 1")
if [ -n "$undeclared" ]; then
    first=${undeclared%%$'\n'*}
    echo "the first: $first; its neighbours as committed (seq, type, at, received_at):" >&2
    sql "SELECT seq, type, at, received_at FROM sensor_events WHERE site = 'city' AND device = '${first%%:*}'
         AND seq BETWEEN ${first#*:} - 3 AND ${first#*:} + 3 ORDER BY seq" >&2
    sql "SELECT first_seq, last_seq, declared, detected_at FROM sensor_gaps WHERE site = 'city' AND device = '${first%%:*}'" >&2
    echo "broker restarted at $(date -u -d "@${restarted%.*}" +%T) (UTC); its log:" >&2
    if [ "$broker" = nats ]; then tail -5 "$fleet_root"/n1/nats.log >&2; else tail -5 "$work/mosquitto.log" >&2; fi
    fail "$(wc -l <<<"$undeclared") seqs neither arrived nor declared: $(head -20 <<<"$undeclared" | tr '\n' ' ')"
fi
echo "seqs: $(committed) events of $agents boards, every seq arrived or declared ($(sql "SELECT count(*) FROM sensor_events WHERE site = 'city' AND type = 'outbox.dropped'") outbox.dropped)"
wait_until 60 prints "$agents" sql "SELECT count(*) FROM sensor_devices WHERE site = 'city' AND NOT online" \
    || { left=$(sql "SELECT device FROM sensor_devices WHERE site = 'city' AND online ORDER BY device LIMIT 1")
         sql "SELECT device, status_at, heard_at, status::text FROM sensor_devices WHERE site = 'city' AND device = '$left'" >&2
         grep -h "$left" "$fleet_root"/bridge-*.log | tail -5 >&2
         fail "$(sql "SELECT count(*) FROM sensor_devices WHERE site = 'city' AND online") boards still online in the database after every agent stopped"; }
offline=$("$bridge" fleet --database "$db" --site city | grep -c OFFLINE || true)
[ "$offline" -eq "$agents" ] || fail "parkwise-bridge fleet shows $offline boards OFFLINE, not $agents"
offline=$("$agent_bin" monitor --broker "mqtt://127.0.0.1:$mqport" --credentials "$fleet_root/backend.credentials" --fleet city \
    2> /dev/null | grep -c OFFLINE || true)
[ "$offline" -eq "$agents" ] || fail "parkwise-agent monitor --fleet shows $offline boards OFFLINE, not $agents"
echo "both fleet views: $agents boards OFFLINE"
grep -h "info applied" "$fleet_root"/bridge-*.log | tail -2 | sed 's/^/  /' || true
echo "rebirths asked for missing seqs in the whole run: $(cat "$fleet_root"/bridge-*.log | grep -c 'events missing' || true)"
echo "fleet-bench: ok"
