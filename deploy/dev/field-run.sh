#!/usr/bin/env bash
# The field run of issue 33: FIELD_BOARDS simulated boards (default 20, each its own device id and password, a level of
# 24 spots) on one broker with the site's ACL (deploy/mosquitto/acl.conf, its parkwise-admin role too) and persistence,
# one bridge with `spot_owners: registered`, the site's register written as provisioning writes it. Then, with what
# both fleet views (`parkwise-bridge fleet`, `parkwise-agent monitor --fleet`) say after each step:
#   1. every board started at once (and the register: each board its 24 spots)
#   2. three boards killed (SIGKILL: the broker's last will says it)
#   3. one board revoked as revoke.sh does it (password removed, the broker reloaded, its register entry revoked, its
#      retained topics cleared), and a neighbour's spots reported by it refused before that
#   4. a 60 s broker outage (FIELD_OUTAGE_S), then the broker back
#   5. the end: every agent stopped; every seq of every board arrived or lies in a declared gap, nothing of the revoked
#      board applied after its revocation, its spots unknown.
# Exits 1 when a view or the end is wrong. Debug binaries (swift build first): deploy/dev/field-run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
boards=${FIELD_BOARDS:-20}
outage_s=${FIELD_OUTAGE_S:-60}
((boards >= 5 && boards <= 200)) || { echo "field-run: FIELD_BOARDS is 5 to 200" >&2; exit 64; }
agent_bin=${PARKWISE_AGENT_BIN:-$PWD/.build/debug/parkwise-agent}
bridge=${PARKWISE_BRIDGE_BIN:-$PWD/.build/debug/parkwise-bridge}
{ [ -x "$agent_bin" ] && [ -x "$bridge" ]; } || { echo "field-run: no binaries: swift build first" >&2; exit 1; }

. deploy/dev/bridge-services.sh
root=$(mktemp -d /tmp/parkwise-field.XXXXXX)
device() { printf 'b%02d\n' "$1"; }
level() { printf 'F%02d\n' "$1"; }
users="parkwise-backend parkwise-admin $(for i in $(seq 1 "$boards"); do device "$i"; done)"
# shellcheck disable=SC2086
site_broker_files "$root" field $users
# Each login as mosquitto_pub's and mosquitto_sub's options file (-u, -P): no password on a command line.
for user in $users; do
    for tool in mosquitto_pub mosquitto_sub; do
        sed -e 's/^username=/-u /' -e 's/^password=/-P /' "$root/$user/credentials" > "$root/$user/$tool"
        chmod 600 "$root/$user/$tool"
    done
done

start_bridge_services "$bridge"
agent_pids=() bridge_pid=
trap 'for p in "${agent_pids[@]}" $bridge_pid; do kill "$p" 2>/dev/null || true; done; stop_bridge_services;
      [ -n "${FIELD_KEEP:-}" ] && echo "kept: $root" >&2 || rm -rf "$root"' EXIT
mosquitto_pid=$broker_pid
poll_seconds=0.2
sql() { psql -X -At -d "$db" -c "$1"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
fail() { echo "field-run: FAILED: $*" >&2; exit 1; }
# as USER PROGRAM ARGS...: mosquitto_pub/sub with USER's login (an options file: no password on a command line).
as() { XDG_CONFIG_HOME=$root/$1 "$2" -h 127.0.0.1 -p "$mqport" "${@:3}"; }

# The backend's side: a level of 24 spots per board.
sql "INSERT INTO levels (code, name, sort, underground)
       SELECT format('F%s', lpad(g::text, 2, '0')), 'Field ' || g, 200 + g, false FROM generate_series(1, $boards) g;
     INSERT INTO spots (id, level_code, zone, code)
       SELECT format('F%s-A-%s', lpad(g::text, 2, '0'), lpad(n::text, 2, '0')), format('F%s', lpad(g::text, 2, '0')),
              'A', 'A-' || lpad(n::text, 2, '0')
       FROM generate_series(1, $boards) g, generate_series(1, 24) n" > /dev/null
pins=(2 3 4 5 6 7 8 9 10 11 12 14 15 16 17 18 20 21 22 23 26 27 0 1)
for i in $(seq 1 "$boards"); do
    d=$(device "$i"); l=$(level "$i")
    {
        printf 'site: field\ndevice: %s\nboard: simulated\nmqtt:\n  brokers: ["mqtt://127.0.0.1:%s"]\n' "$d" "$mqport"
        printf '  credentials: %s\n  keepalive: 5s\noutbox:\n  path: %s\n' "$root/$d/credentials" "$root/$d/outbox"
        printf 'levels:\n  - { id: %s, capacity: 24 }\nspots:\n' "$l"
        for n in $(seq 1 24); do printf '  - { id: %s-A-%02d, input: GPIO%s }\n' "$l" "$n" "${pins[$((n - 1))]}"; done
    } > "$root/$d/agent.yaml"
done
"$agent_bin" check-config "$root/b01/agent.yaml" > /dev/null || fail "the generated config is refused"

# register DEVICE STATE REV SPOT...: the device's register entry, as provision.sh, spots.sh and revoke.sh publish it.
register() {
    local list="" id
    for id in "${@:4}"; do list+="${list:+,}\"$id\""; done
    as parkwise-admin mosquitto_pub -q 1 -r -t "parkwise/v1/field/_register/$1" \
        -m "{\"rev\":$3,\"spots\":[$list],\"state\":\"$2\"}"
}
spots_of() { local n; for n in $(seq 1 24); do printf '%s-A-%02d ' "$(level "$1")" "$n"; done; }
# quiet: a fleet table without its online boards (their lines and notes), nor the monitor's connection line.
quiet() { awk '/^b[0-9]+ +online / { skip = 1; next } /^  / && skip { next } /^info uplink connected/ { next } { skip = 0; print }'; }
# views STEP: what both fleet views say now (their summaries and every line that is not an online board's).
views() {
    echo "-- $1"
    echo "   parkwise-bridge fleet:"
    "$bridge" fleet --database "$db" --site field --stale 2m 2>&1 | quiet | sed 's/^/     /' || true
    echo "   parkwise-agent monitor --fleet:"
    "$agent_bin" monitor --broker "mqtt://127.0.0.1:$mqport" --credentials "$root/parkwise-backend/credentials" --fleet field \
        --stale 2m 2>&1 | quiet | sed 's/^/     /' || true
}
online() { sql "SELECT count(*) FROM sensor_devices WHERE site = 'field' AND online"; }
monitor_count() {   # monitor_count STATE: boards in that STATE in monitor --fleet
    "$agent_bin" monitor --broker "mqtt://127.0.0.1:$mqport" --credentials "$root/parkwise-backend/credentials" --fleet field \
        2>/dev/null | grep -c "^b[0-9]* *$1 " || true
}

echo "== $boards boards (24 spots each), one bridge (spot_owners: registered), the site's ACL with its admin role"
t0=$(now)
for i in $(seq 1 "$boards"); do
    # shellcheck disable=SC2046
    register "$(device "$i")" provisioned 1 $(spots_of "$i")
done
echo "register: $boards entries published as parkwise-admin in $(since "$t0") s"
printf 'sites: [field]\naccept_simulated: true\ncredentials: %s\nreassert_every: 1s\nstale_after: 30s\n' \
    "$root/parkwise-backend/credentials" > "$root/bridge.yaml"
"$bridge" run --broker "mqtt://127.0.0.1:$mqport" --database "$db" --config "$root/bridge.yaml" > /dev/null 2> "$root/bridge.log" &
bridge_pid=$!
wait_until 30 grep -q "bridge running" "$root/bridge.log" || fail "the bridge did not start: $(cat "$root/bridge.log")"
wait_until 30 prints $((boards * 24)) sql "SELECT count(*) FROM sensor_spot_owners WHERE site = 'field'" ||
    fail "the bridge has $(sql "SELECT count(*) FROM sensor_spot_owners") spot owners, not $((boards * 24))"

echo "== 1. every board started at once"
t0=$(now)
for i in $(seq 1 "$boards"); do
    d=$(device "$i")
    "$agent_bin" run --config "$root/$d/agent.yaml" --simulate --speed 60 --sim-start 07:00 --seed "$i" > /dev/null 2> "$root/$d/agent.log" &
    agent_pids+=($!)
done
wait_until 120 prints "$boards" online || fail "only $(online) of $boards boards online after 120 s"
echo "every board online in the database after $(since "$t0") s"
views "all $boards online"

echo "== 2. three boards killed (SIGKILL)"
t0=$(now)
for i in 1 2 3; do kill -KILL "${agent_pids[$((i - 1))]}"; done
wait_until 60 prints $((boards - 3)) online || fail "$(online) boards online 60 s after three were killed"
wait_until 30 prints 3 monitor_count OFFLINE || fail "monitor --fleet shows $(monitor_count OFFLINE) OFFLINE, not 3"
echo "the three OFFLINE in both views after $(since "$t0") s (keepalive 5 s: the broker's will within 7.5 s)"
views "three killed"

echo "== 3. board b04 revoked; before that it reports a spot of b05 (refused)"
revoked=b04
as "$revoked" mosquitto_pub -q 1 -t "parkwise/v1/field/$revoked/state/spot/F05-A-01" \
    -m '{"checked_in":false,"seq":0,"since":"2026-12-06T07:00:00.000Z","state":"free"}'
wait_until 30 prints_at_least 1 sql "SELECT coalesce(sum(reports), 0) FROM sensor_refused_spots WHERE device = '$revoked'" ||
    fail "b04's report of F05-A-01 was not refused"
t0=$(now)
mosquitto_passwd -D "$root/passwd" "$revoked"
kill -HUP "$mosquitto_pid"
register "$revoked" revoked 2
as parkwise-admin mosquitto_sub -t "parkwise/v1/field/$revoked/#" --remove-retained --retained-only -W 2 > /dev/null 2>&1 || true
wait_until 30 prints 1 sql "SELECT count(*) FROM sensor_devices WHERE device = '$revoked' AND revoked_at IS NOT NULL" ||
    fail "the bridge never marked $revoked revoked"
revoked_at=$(sql "SELECT revoked_at FROM sensor_devices WHERE device = '$revoked'")
echo "$revoked revoked in the bridge's table $(since "$t0") s after revoke's steps"
views "b04 revoked"

echo "== 4. a ${outage_s} s broker outage"
kill -TERM "$mosquitto_pid"; while kill -0 "$mosquitto_pid" 2>/dev/null; do sleep 0.05; done
t0=$(now)
sleep 10   # the outage's length is the measured thing here, not a wait for a condition
views "broker down for 10 s"
sleep $((outage_s - 10))
views "broker down for ${outage_s} s"
restart_private_broker "$work"
mosquitto_pid=$broker_pid
t0=$(now)
live=$((boards - 4))
# A board is back once its status online says it reconnected (none had before the outage).
back="SELECT count(*) FROM sensor_devices WHERE site = 'field' AND online AND (status->>'reconnects')::int >= 1"
wait_until 120 prints_at_least "$live" sql "$back" ||
    fail "only $(sql "$back") boards back online 120 s after the broker came back"
echo "the $live live boards online again $(since "$t0") s after the broker came back"
views "broker back"

echo "== 5. the end"
for p in "${agent_pids[@]:3}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${agent_pids[@]:3}"; do wait "$p" || true; done
agent_pids=()
undeclared=$(sql "
    WITH top AS (SELECT device, max(seq) AS top FROM sensor_events WHERE site = 'field' GROUP BY device),
         declared AS (SELECT device, (payload->>'first_seq')::bigint AS a, (payload->>'last_seq')::bigint AS b
                      FROM sensor_events WHERE site = 'field' AND type = 'outbox.dropped')
    SELECT top.device || ':' || s FROM top, generate_series(1, top.top) s
    WHERE top.device NOT IN ('b01', 'b02', 'b03', '$revoked')
      AND NOT EXISTS (SELECT 1 FROM sensor_events e WHERE e.site = 'field' AND e.device = top.device AND e.seq = s)
      AND NOT EXISTS (SELECT 1 FROM declared d WHERE d.device = top.device AND s BETWEEN d.a AND d.b)
    ORDER BY 1")
[ -z "$undeclared" ] || fail "seqs neither arrived nor declared: $(head -20 <<<"$undeclared" | tr '\n' ' ')"
echo "seqs: $(sql "SELECT count(*) FROM sensor_events WHERE site = 'field'") events, every seq of the live boards arrived or declared"
late=$(sql "SELECT count(*) FROM sensor_events WHERE device = '$revoked' AND received_at > '$revoked_at'")
[ "$late" = 0 ] || fail "$late events of $revoked applied after its revocation"
unknown=$(sql "SELECT count(*) FROM sensor_spots WHERE site = 'field' AND spot_id LIKE 'F04-%' AND state = 'unknown'")
echo "revoked $revoked: nothing applied after its revocation; $unknown of its 24 spots unknown in sensor_spots"
views "every agent stopped"
echo "field-run: ok"
