#!/usr/bin/env bash
# The README's first command, run as a user would (deploy/dev/demo.sh), checked end to end: the simulated campus
# fills up, its feed goes through the broker and parkwise-bridge into PostgreSQL, and the free spots read back
# from the database fall below the level's total; then the monitor's form on its own. Part of deploy/dev/test.sh.
#   bash deploy/dev/demo-check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/parkwise-demo-check.XXXXXX)
trap 'rm -rf "$out"' EXIT

fail() {
    echo "demo-check: $1" >&2
    echo "--- demo output" >&2
    cat "$out/$2.out" "$out/$2.err" >&2
    for log in "$out/$2.logs"/*; do [ -f "$log" ] && { echo "--- ${log##*/}" >&2; tail -n 40 "$log" >&2; }; done
    exit 1
}

# demo NAME SECONDS [VAR=VALUE...]: the demo as a user runs it, its output and logs kept under NAME; a demo that
# does not end by itself in time (a service that never came up) is stopped: exit 124.
demo() {
    local name=$1 seconds=$2
    shift 2
    mkdir -p "$out/$name.logs"
    env "$@" DEMO_SECONDS="$seconds" DEMO_KEEP_LOGS="$out/$name.logs" \
        timeout --kill-after=15 $((seconds + 150)) bash deploy/dev/demo.sh > "$out/$name.out" 2> "$out/$name.err"
}

# 600x: the morning rush (06:30 onwards) is under way within seconds.
demo backend 25 DEMO_BACKEND=1 DEMO_SPEED=600 || fail "the demo with DEMO_BACKEND=1 failed (exit $?; 124: it did not end)" backend
# "HH:MM:SS  free spots (from PostgreSQL): P1 52/60   P2 40/49   P3 47/47   sensor-unknown: 0"
last=$(grep -a "free spots (from PostgreSQL)" "$out/backend.out" | tail -n 1 || true)
[ -n "$last" ] || fail "no free-spots line read back from PostgreSQL" backend
# Every spot starts free in the demo's database: taken = total - free - sensor-unknown.
taken=$(printf '%s\n' "$last" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\/[0-9]+$/) { split($i, f, "/"); t += f[2] - f[1] }
                                     unknown = $NF } END { print t - unknown }')
[ "$taken" -gt 0 ] || fail "no spot was taken: $last" backend
grep -aq "applied 1: sensor source and bridge tables" "$out/backend.err" || fail "the bridge's migration did not run" backend

demo monitor 10 DEMO_SPEED=600 || fail "the demo failed (exit $?; 124: it did not end)" monitor
grep -aq "spot.occupied" "$out/monitor.out" || fail "the monitor showed no spot.occupied event" monitor
echo "demo-check: the demo fills the campus ($last); the monitor shows its events"
