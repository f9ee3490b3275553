#!/usr/bin/env bash
# Prints figures (never assertions): check-config's wall time and peak RSS on generated configs of 1,000,
# 10,000 and 60,000 spots (deploy/dev/gen-config.sh: a city's garages), valid and with one wrong level on every
# spot (60,000 problems whose hints list every level), and `lines --config` on the valid ones.
#   deploy/dev/config-bench.sh [SPOTS...]      (default 1000 10000 60000; needs /usr/bin/time)
#   PARKWISE_AGENT=/path/to/parkwise-agent deploy/dev/config-bench.sh   (another build, e.g. an older one; no build)
set -euo pipefail
cd "$(dirname "$0")/../.."

. deploy/dev/lib.sh
bin=${PARKWISE_AGENT:-}
if [ -z "$bin" ]; then
    swift_build -c release --product parkwise-agent
    bin=.build/release/parkwise-agent
fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000 60000)
work=$(mktemp -d /tmp/parkwise-config-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# measure LABEL COMMAND...: one line of wall time, peak RSS and exit status.
measure() {
    local label=$1; shift
    local status=0
    /usr/bin/time -v -o "$work/time" "$@" > /dev/null 2> "$work/stderr" || status=$?
    local wall rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
    printf '%-38s wall %9s  peak RSS %7d KB  exit %d\n' "$label" "$wall" "$rss" "$status"
}

for n in "${sizes[@]}"; do
    deploy/dev/gen-config.sh "$n" > "$work/city-$n.yaml"
    # Every spot on a level the file does not list: one problem per spot, each hint naming every level.
    sed -E 's/^(  - \{ id: G[0-9]+P[0-9]+-[A-Z]-[0-9]+), input/\1, level: X0001P9, input/' \
        "$work/city-$n.yaml" > "$work/wrong-level-$n.yaml"
    measure "check-config $n spots" "$bin" check-config "$work/city-$n.yaml"
    measure "check-config $n spots, wrong level" "$bin" check-config "$work/wrong-level-$n.yaml"
    measure "lines --config $n spots" "$bin" lines --config "$work/city-$n.yaml"
done
