#!/bin/sh
# In-VM benchmark (prints figures, asserts nothing): 16 spots on the Pi 5 chip's GPIO8..GPIO23, no debounce.
#  1. latency: one line toggled every 100 ms; from the edge (the kernel's timestamp, which the event carries in `at`,
#     in milliseconds: figures are up to 1 ms high) to the subscriber receiving the event (mosquitto_sub's %U), p50/p99.
#  2. throughput: all 16 lines toggled as fast as the shell can write them, in rounds; the events must arrive
#     complete and, per spot, alternating occupied/vacated in order. Figures: edges/s end to end.
# shellcheck source=hardware/sim/guest/lib.sh
. /sim/lib.sh
EV=parkwise/v1/vm/bench16/events
P="/sys/devices/platform/$(device pi5)/$(chip pi5)"
LINES="8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23"
# seconds of the day, from the receive time (field 1, unix s.ns) and from "at":"…THH:MM:SS.mmmZ"
SOD='function rx(l,  s) { split(l, s, " "); return (s[1] % 86400) }
     function at(l,  t, h) { match(l, /"at":"[^"]*"/); t = substr(l, RSTART + 17, 12); split(t, h, ":"); return h[1] * 3600 + h[2] * 60 + h[3] }'
count() { grep -F "$EV" /tmp/mqtt.log | grep -c -F '"spot.'; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

start bench bench16.yaml || exit 1
for o in $LINES; do wait_used pi5 "$o" || exit 1; done
sleep 1

# 1. latency
N=${BENCH_SAMPLES:-100}
i=0
while [ $i -lt "$N" ]; do
    if [ $((i % 2)) -eq 0 ]; then v=up; else v=down; fi
    echo "pull-$v" > "$P/sim_gpio8/pull"
    i=$((i + 1))
    usleep 100000
done
sleep 1
msgs $EV '"P1-B-00"' > /tmp/lat.raw
echo "latency: $N edges, $(wc -l < /tmp/lat.raw) events"
awk "$SOD"' { d = (rx($0) - at($0)) * 1000; if (d < -43200000) d += 86400000; print d }' /tmp/lat.raw | sort -n > /tmp/lat
awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99) + 1];
      printf "latency edge -> subscriber: p50 %.1f ms, p99 %.1f ms, max %.1f ms (n=%d)\n", p50, p99, v[NR], NR }' /tmp/lat

# 2. throughput, in rounds of 16 rising then 16 falling edges
for R in ${BENCH_ROUNDS:-25 100}; do
    before=$(count)
    t0=$(uptime_s)
    r=0
    while [ $r -lt "$R" ]; do
        for o in $LINES; do echo pull-up > "$P/sim_gpio$o/pull"; done
        for o in $LINES; do echo pull-down > "$P/sim_gpio$o/pull"; done
        r=$((r + 1))
    done
    t1=$(uptime_s)
    want=$((before + 32 * R))
    # wait until all arrived, or nothing more came for 5 s
    last=-1; still=0
    while [ "$(count)" -lt $want ] && [ $still -lt 10 ]; do
        now=$(count); if [ "$now" = "$last" ]; then still=$((still + 1)); else still=0; last=$now; fi
        usleep 500000
    done
    sleep 1
    grep -F "$EV" /tmp/mqtt.log | grep -F '"spot.' | tail -n +$((before + 1)) > /tmp/round
    got=$(wc -l < /tmp/round)
    # end to end: from the first edge (its kernel timestamp) to the receipt of the last event
    e2e_s=$(awk "$SOD"' NR == 1 { a = at($0) } { r = rx($0) } END { d = r - a; if (d < 0) d += 86400; printf "%.3f", d }' /tmp/round)
    # per spot: events must alternate occupied, vacated, occupied...
    bad=$(awk '{ match($0, /"spot":"[^"]*"/); id = substr($0, RSTART, RLENGTH); occ = index($0, "\"spot.occupied\"") > 0;
                 want = (n[id] % 2 == 0); if (occ != want) bad++; n[id]++ } END { print bad + 0 }' /tmp/round)
    write_s=$(awk "BEGIN { print $t1 - $t0 }")
    echo "throughput: $R rounds x 32 edges = $((32 * R)) edges written in ${write_s} s; $got events ($((32 * R - got)) lost), $bad out of order; last event after ${e2e_s} s: $(awk "BEGIN { printf \"%.0f\", 32 * $R / $e2e_s }") edges/s end to end"
done
echo "agent warnings: $(grep -c -E "^(warn|error)" /tmp/bench.log) (first: $(grep -m1 -E "^(warn|error)" /tmp/bench.log))"
stop bench
