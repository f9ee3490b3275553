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
    exit 1
}

# 600x: the morning rush (06:30 onwards) is under way within seconds.
DEMO_BACKEND=1 DEMO_SPEED=600 DEMO_SECONDS=25 bash deploy/dev/demo.sh > "$out/backend.out" 2> "$out/backend.err" \
    || fail "the demo with DEMO_BACKEND=1 failed (exit $?)" backend
# "HH:MM:SS  free spots (from PostgreSQL): P1 52/60   P2 40/49   P3 47/47   sensor-unknown: 0"
last=$(grep -a "free spots (from PostgreSQL)" "$out/backend.out" | tail -n 1 || true)
[ -n "$last" ] || fail "no free-spots line read back from PostgreSQL" backend
# Every spot starts free in the demo's database: taken = total - free - sensor-unknown.
taken=$(printf '%s\n' "$last" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\/[0-9]+$/) { split($i, f, "/"); t += f[2] - f[1] }
                                     unknown = $NF } END { print t - unknown }')
[ "$taken" -gt 0 ] || fail "no spot was taken: $last" backend
grep -aq "applied 1: sensor source and bridge tables" "$out/backend.err" || fail "the bridge's migration did not run" backend

DEMO_SPEED=600 DEMO_SECONDS=10 bash deploy/dev/demo.sh > "$out/monitor.out" 2> "$out/monitor.err" \
    || fail "the demo failed (exit $?)" monitor
grep -aq "spot.occupied" "$out/monitor.out" || fail "the monitor showed no spot.occupied event" monitor
echo "demo-check: the demo fills the campus ($last); the monitor shows its events"
