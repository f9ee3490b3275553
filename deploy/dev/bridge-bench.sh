#!/usr/bin/env bash
# Bridge benchmark, figures printed (never asserted): a private PostgreSQL 15 and mosquitto on free
# loopback ports, the ParkWise test schema, the release bridge.
#   1. throughput: N events queued for the bridge's persistent session while it is stopped, then
#      drained (batched transactions): events/s committed, one instance and two ($share group);
#   2. latency at 100 events/s: broker delivery to committed row, p50/p99, and the round trips a batch waits for
#      (the bridge's own figures);
#   3. database load: statements per second the bridge sends, idle (8 devices online, every spot sensed: the
#      sweep alone) and at 100 events/s, from pg_stat_statements, with the statements that cost most;
#   4. slow writes (a trigger sleeping BENCH_ROW_MS per event row): drained without a statement_timeout, then
#      under one (BENCH_TIMEOUT_MS) that a full batch exceeds: the cost of cutting the batches.
#   BENCH_EVENTS=20000 deploy/dev/bridge-bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
events=${BENCH_EVENTS:-20000}

. deploy/dev/bridge-services.sh
swift_build --say -c release --product parkwise-bridge
bridge=$PWD/.build/release/parkwise-bridge
poll_seconds=0.05
mosquitto_extra=$'max_queued_messages 0\n'
start_bridge_services "$bridge" -c shared_preload_libraries=pg_stat_statements
sql() { psql -X -At -d "$db" -c "$1"; }

# Events as an agent sends them: 8 devices, each owning a slice of the 156 spots, seqs from 1.
generate() {  # count rate(0: as fast as possible) first_seq
    python3 - "$@" <<'PY'
import json, sys, time, uuid, datetime
count, rate, first = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
spots = [f"{l}-{z}-{n:02d}" for l, zones, per in (("P1", "ABC", 20), ("P2", "AB", 24), ("P3", "AB", 24)) for z in zones for n in range(1, per + 1)]
start = time.monotonic()
for i in range(count):
    device = i % 8
    seq = first + i // 8
    spot = spots[(device * 19 + seq) % len(spots)]
    at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    event = {"id": str(uuid.uuid4()), "seq": seq, "boot": 1, "type": "spot.occupied" if seq % 2 else "spot.vacated",
             "at": at, "clock": "synced", "spot": spot, "level": spot[:2]}
    print(f"parkwise/v1/bench/dev-{device}/events\t{json.dumps(event)}", flush=rate > 0)
    if rate > 0:
        time.sleep(max(0, start + (i + 1) / rate - time.monotonic()))
PY
}
publish() {  # topic<TAB>payload lines -> one mosquitto_pub per device (-l: a message per line)
    python3 -c '
import subprocess, sys
port = sys.argv[1]
procs = {}
for line in sys.stdin:
    topic, payload = line.rstrip("\n").split("\t", 1)
    if topic not in procs:
        procs[topic] = subprocess.Popen(["mosquitto_pub", "-p", port, "-q", "1", "-t", topic, "-l"], stdin=subprocess.PIPE, text=True)
    procs[topic].stdin.write(payload + "\n"); procs[topic].stdin.flush()
for p in procs.values():
    p.stdin.close(); p.wait()
' "$mqport"
}
online() {
    for d in 0 1 2 3 4 5 6 7; do
        mosquitto_pub -p "$mqport" -q 1 -r -t "parkwise/v1/bench/dev-$d/status" \
            -m "{\"state\":\"online\",\"boot\":1,\"version\":\"bench\",\"since\":\"2026-12-01T00:00:00.000Z\"}"
    done
}
started=""
start_bridge() {  # client-id share-group(or -) log [database URL]; sets $started to its PID
    local config="$work/$1.yaml"
    printf 'client_id: %s\nspot_owners: first_report\nbatch_size: %s\n' "$1" "${BENCH_BATCH:-500}" > "$config"
    if [ "$2" != - ]; then printf 'share_group: %s\n' "$2" >> "$config"; fi
    "$bridge" run --broker "mqtt://127.0.0.1:$mqport" --database "${4:-$db}" --config "$config" > /dev/null 2> "$3" &
    started=$!
    pids+=("$started")
    wait_until 60 grep -q "bridge running" "$3" 2>/dev/null || fail "$1 did not start: $(cat "$3")"
}
stop_bridge() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; }
fail() { echo "bridge-bench: $*" >&2; exit 1; }
counted() { [ "$(sql 'SELECT count(*) FROM sensor_events')" -ge "$1" ]; }
wait_count() { wait_until 600 counted "$1" || fail "$(sql 'SELECT count(*) FROM sensor_events') of $1 events committed in 600 s"; }
now() { date +%s.%N; }

echo "== throughput: $events events drained from the broker's queue, one bridge"
start_bridge bench-1 - "$work/b1.log"; online; stop_bridge "$started"
generate "$events" 0 1 | publish
start_bridge bench-1 - "$work/b1.log"; pid=$started; t0=$(now)
wait_count "$events"; t1=$(now)
stop_bridge "$pid"
grep "info applied" "$work/b1.log" | tail -1
python3 -c "print(f'one instance: {int($events / ($t1 - $t0))} events/s committed ($events in {$t1 - $t0:.2f} s)')"

echo "== throughput: $events more, two bridges sharing the feed (\$share/tp/…)"
sql "TRUNCATE sensor_events" >/dev/null
start_bridge tp-a tp "$work/ba.log"; pa=$started; start_bridge tp-b tp "$work/bb.log"; pb=$started
stop_bridge "$pa"; stop_bridge "$pb"
first=$(( events / 8 + 1 ))
generate "$events" 0 "$first" | publish
start_bridge tp-a tp "$work/ba.log"; pa=$started; start_bridge tp-b tp "$work/bb.log"; pb=$started; t0=$(now)
wait_count "$events"; t1=$(now)
stop_bridge "$pa"; stop_bridge "$pb"
python3 -c "print(f'two instances: {int($events / ($t1 - $t0))} events/s committed ($events in {$t1 - $t0:.2f} s)')"

echo "== latency at 100 events/s for 20 s (broker delivery to committed row)"
for mode in one two; do
    sql "TRUNCATE sensor_events" >/dev/null
    first=$(( first + events / 8 + 1000 ))
    if [ $mode = one ]; then
        start_bridge lat-1 - "$work/l1.log"; logs=("$work/l1.log"); running=("$started")
    else
        start_bridge lat-a lat "$work/la.log"; pa=$started; start_bridge lat-b lat "$work/lb.log"
        logs=("$work/la.log" "$work/lb.log"); running=("$pa" "$started")
    fi
    generate 2000 100 "$first" | publish
    wait_count 2000
    for p in "${running[@]}"; do stop_bridge "$p"; done
    echo "$mode instance(s):"
    for l in "${logs[@]}"; do grep "info applied" "$l" | tail -1 | sed 's/^/  /'; done
done

echo "== database load: statements/s the bridge sends (pg_stat_statements), idle and at 100 events/s"
sql "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; CREATE ROLE bench_load LOGIN SUPERUSER" >/dev/null
load_db="postgresql://bench_load@127.0.0.1:$pgport/postgres"
calls() { sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE userid = 'bench_load'::regrole"; }
top() {
    sql "SELECT calls || E'\t' || left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_statements
         WHERE userid = 'bench_load'::regrole ORDER BY calls DESC LIMIT 6" | sed 's/^/    /'
}
start_bridge load - "$work/load.log" "$load_db"; pid=$started
for d in 0 1 2 3 4 5 6 7; do   # every spot sensed, so the sweep's statements have the campus to look at
    for spot in $(python3 -c "
spots = [f'{l}-{z}-{n:02d}' for l, zones, per in (('P1','ABC',20),('P2','AB',24),('P3','AB',24)) for z in zones for n in range(1, per + 1)]
print(' '.join(spots[$d::8]))"); do
        mosquitto_pub -p "$mqport" -q 1 -r -t "parkwise/v1/bench/dev-$d/state/spot/$spot" \
            -m '{"checked_in":false,"seq":1,"since":null,"state":"free"}'
    done
done
until [ "$(sql "SELECT count(*) FROM sensor_spots")" -ge 156 ]; do sleep 0.1; done
sleep 2
sql "SELECT pg_stat_statements_reset()" >/dev/null; t0=$(now); sleep 30; n=$(calls); t1=$(now)
python3 -c "print(f'idle: {$n / ($t1 - $t0):.2f} statements/s ({$n} in {$t1 - $t0:.0f} s; the sweep every reassert_every = 5 s)')"
top
first=$(( first + events / 8 + 1000 ))
sql "SELECT pg_stat_statements_reset()" >/dev/null; t0=$(now)
generate 2000 100 "$first" | publish
n=$(calls); t1=$(now)
python3 -c "print(f'100 events/s: {$n / ($t1 - $t0):.1f} statements/s ({$n} in {$t1 - $t0:.0f} s)')"
top
stop_bridge "$pid"
# The bridge counts the statements each batch waits for (round_trips_per_batch: BEGIN to COMMIT, the sweep apart).
grep "info applied" "$work/load.log" | tail -1 | grep -o 'batches=[0-9]*\|round_trips_per_batch=[0-9.]*' | paste -sd' ' | sed 's/^/  /'

row_ms=${BENCH_ROW_MS:-0.5}; timeout_ms=${BENCH_TIMEOUT_MS:-100}
slow_events=$(( events / 4 ))
echo "== slow writes: $slow_events events, a trigger sleeping $row_ms ms per event row"
sql "CREATE FUNCTION bench_slow() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_sleep($row_ms / 1000.0); RETURN NEW; END \$\$;
     CREATE TRIGGER bench_slow BEFORE INSERT ON sensor_events FOR EACH ROW EXECUTE FUNCTION bench_slow()" >/dev/null
for limit in none "$timeout_ms"; do
    sql "TRUNCATE sensor_events" >/dev/null
    url=$db; [ "$limit" != none ] && url="$db?options=-c%20statement_timeout%3D${limit}ms"
    start_bridge "slow-$limit" - "$work/s-$limit.log" "$url"; stop_bridge "$started"
    first=$(( first + events / 8 + 1000 ))
    generate "$slow_events" 0 "$first" | publish
    start_bridge "slow-$limit" - "$work/s-$limit.log" "$url"; pid=$started; t0=$(now)
    wait_count "$slow_events"; t1=$(now)
    stop_bridge "$pid"
    label=none; [ "$limit" != none ] && label="$limit ms"
    python3 -c "print(f'statement_timeout $label: {int($slow_events / ($t1 - $t0))} events/s committed ($slow_events in {$t1 - $t0:.2f} s)')"
    grep -E "batches cut|batches back" "$work/s-$limit.log" | sed 's/^/  /' || true
done
