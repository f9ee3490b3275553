#!/usr/bin/env bash
# What a large command costs the agent under its unit's memory limit (MemoryMax=64M), printed as figures: an agent in
# a 64 MiB memory cgroup (no swap) is sent a cmd/diag of each size in COMMAND_SIZES (MB = 10^6 bytes; default
# "1 8 32 256") with mosquitto_pub, a fresh agent and cgroup for each, in three set-ups:
#   3.1.1, no broker limit  MQTT 3.1.1 and a broker without max_packet_size: only the agent's own drop (over 64 KiB,
#                           in libmosquitto's callback); libmosquitto has read the whole packet and copied its
#                           payload once more before that callback, so this set-up shows what the drop alone bounds
#   3.1.1, shipped limit    the same agent, the broker with deploy/mosquitto/mosquitto.conf's max_packet_size
#   MQTT 5, no broker limit the agent's CONNECT carries its maximum packet size; the broker has no limit of its own
# Per run: whether the agent is still running and answers a small diag after it, what it replied to the big one, the
# cgroup's use when idle and its peak (memory.peak, or v1's max_usage_in_bytes: page cache included), the agent's RSS
# when idle and its peak (VmHWM), and OOM kills. Root, for the cgroup (v2 or v1, whichever has the memory controller). The board build (release, static Swift
# runtime) unless PARKWISE_AGENT_BIN names a binary.
#   deploy/dev/command-size-check.sh
#   COMMAND_SIZES="1 8" PARKWISE_AGENT_BIN=.build/debug/parkwise-agent deploy/dev/command-size-check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

[ "$(id -u)" -eq 0 ] || { echo "command-size-check: run as root (it makes memory cgroups)" >&2; exit 1; }
sizes=${COMMAND_SIZES:-"1 8 32 256"}
limit_mib=64
. deploy/dev/lib.sh
agent=${PARKWISE_AGENT_BIN:-}
if [ -z "$agent" ]; then
    bash deploy/dev/setup.sh
    swift_build -c release --static-swift-stdlib --product parkwise-agent
    agent=.build/release/parkwise-agent
fi
work=$(mktemp -d /tmp/parkwise-size.XXXXXX)
cgroups=()
cleanup() {
    stop_started
    for c in "${cgroups[@]}"; do rmdir "$c" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# The memory cgroup: v2 (memory.max, memory.peak) where the unified hierarchy has the memory controller, else v1.
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.subtree_control; then
    kind=v2
    parent=/sys/fs/cgroup
else
    kind=v1
    own=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
    parent=/sys/fs/cgroup/memory${own%/}
    [ -f "$parent/memory.limit_in_bytes" ] || { echo "command-size-check: no memory cgroup (v2 or v1) found" >&2; exit 1; }
fi
new_cgroup() {   # directory: made, limited to limit_mib without swap
    local dir=$1
    mkdir "$dir"
    cgroups+=("$dir")
    if [ "$kind" = v2 ]; then
        echo "${limit_mib}M" > "$dir/memory.max"
        [ ! -f "$dir/memory.swap.max" ] || echo 0 > "$dir/memory.swap.max"
    else
        echo "${limit_mib}M" > "$dir/memory.limit_in_bytes"
        [ ! -f "$dir/memory.memsw.limit_in_bytes" ] || echo "${limit_mib}M" > "$dir/memory.memsw.limit_in_bytes"
    fi
}
peak() {   # cgroup dir -> bytes
    if [ "$kind" = v2 ]; then cat "$1/memory.peak"; else cat "$1/memory.max_usage_in_bytes"; fi
}
usage() {   # cgroup dir -> bytes
    if [ "$kind" = v2 ]; then cat "$1/memory.current"; else cat "$1/memory.usage_in_bytes"; fi
}
oom_kills() {   # cgroup dir
    if [ "$kind" = v2 ]; then
        awk '$1 == "oom_kill" {print $2}' "$1/memory.events"
    else
        awk '$1 == "oom_kill" {n = $2} END {print n + 0}' "$1/memory.oom_control"
    fi
}
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }

shipped=$(awk '$1 == "max_packet_size" {print $2}' deploy/mosquitto/mosquitto.conf)
[ -n "$shipped" ] || { echo "command-size-check: deploy/mosquitto/mosquitto.conf has no max_packet_size" >&2; exit 1; }
mkdir "$work/plain" "$work/limited"
start_private_broker "$work/plain"
plain_port=$port
start_private_broker "$work/limited" "max_packet_size $shipped"
limited_port=$port

printf '{"parkwise_trace": 1}\n' > "$work/empty.jsonl"
write_config() {   # file, protocol
    cat > "$1" <<EOF
site: dev
device: size-check
board: simulated
mqtt: { protocol: "$2" }
levels:
  - { id: P1, capacity: 10 }
spots:
  - { id: P1-A-01, input: GPIO22 }
EOF
}
write_config "$work/v311.yaml" 3.1.1
write_config "$work/v5.yaml" 5
topic=parkwise/v1/dev/size-check
for mb in $sizes; do head -c $((mb * 1000000)) /dev/zero > "$work/payload-$mb"; done

alive() {   # pid: running (not gone, not a zombie nobody has reaped yet)
    local state
    state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}
gone() { ! alive "$1"; }
answered_after() { grep -qF '"id":"after"' "$1"; }
refused_big() { grep -qF 'dropped unread' "$1"; }

run=0
one() {   # label, broker port, config, size in MB
    local label=$1 broker=$2 config=$3 mb=$4
    run=$((run + 1))
    local cg log replies agent_pid sub_pid pub_rc hwm state reply
    cg=$parent/parkwise-size-$$-$run
    new_cgroup "$cg"
    log=$work/agent-$run.log
    replies=$work/replies-$run
    mosquitto_sub -p "$broker" -t "$topic/reply" -q 1 > "$replies" 2>/dev/null &
    sub_pid=$!
    pids+=("$sub_pid")
    # Started from a subshell, so that this shell does not report the job when the kernel kills it.
    (bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$agent" run --config "$config" --replay "$work/empty.jsonl" \
        --broker "mqtt://127.0.0.1:$broker" --outbox "$work/outbox-$run" 2> "$log" > /dev/null & echo $! > "$work/pid-$run")
    agent_pid=$(cat "$work/pid-$run")
    pids+=("$agent_pid")
    wait_until 20 grep -qsF "uplink connected" "$log" || { echo "command-size-check: the agent did not connect" >&2; cat "$log" >&2; exit 1; }
    sleep 1   # its subscription is in place once the broker has answered it; a second is plenty on loopback
    local idle idle_rss
    idle=$(usage "$cg")
    idle_rss=$(awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status")
    pub_rc=0
    timeout 120 mosquitto_pub -p "$broker" -q 1 -t "$topic/cmd/diag" -f "$work/payload-$mb" 2> "$work/pub-$run.err" || pub_rc=$?
    # Whatever became of the big one, a small diag next (the broker keeps their order): answered only by a live agent
    # that still publishes, after its reply to the big one if it got that.
    mosquitto_pub -p "$broker" -q 1 -t "$topic/cmd/diag" -m '{"id":"after"}' 2>/dev/null || true
    wait_until 60 answered_after "$replies" || true
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$agent_pid/status" 2>/dev/null || echo 0)
    if alive "$agent_pid" && answered_after "$replies"; then state="runs, answers"; else state="KILLED"; fi
    if refused_big "$replies"; then reply="refused, dropped unread"; else reply="none"; fi
    [ "$pub_rc" -eq 0 ] || reply="$reply (publisher cut off: exit $pub_rc)"
    printf '%-24s %6s MB  %-14s %-40s %7s %7s %7s %7s %4s\n' "$label" "$mb" "$state" "$reply" \
        "$(mib "$idle")" "$(mib "$(peak "$cg")")" "$(mib $((idle_rss * 1024)))" "$(mib $((hwm * 1024)))" "$(oom_kills "$cg")"
    kill -TERM "$agent_pid" 2>/dev/null || true
    wait_until 15 gone "$agent_pid" || { echo "command-size-check: the agent did not stop" >&2; exit 1; }
    kill "$sub_pid" 2>/dev/null || true
    wait "$sub_pid" 2>/dev/null || true
    rmdir "$cg"
}

echo "== a cmd/diag of each size, the agent in a ${limit_mib} MiB memory cgroup ($kind, no swap); agent: $agent"
echo "   broker limit shipped in deploy/mosquitto/mosquitto.conf: max_packet_size $shipped; the agent's command limit: 64 KiB"
echo "   MiB: the cgroup's use when idle and its peak (what MemoryMax counts: what the agent allocated, page cache"
echo "   included, not the binary's pages cached before); the agent's RSS when idle and its peak (VmHWM; 0 once killed)"
printf '%-24s %9s  %-14s %-40s %7s %7s %7s %7s %4s\n' "set-up" "payload" "agent after" "reply to the big one" \
    "cg idle" "cg peak" "RSS" "VmHWM" "OOM"
for mb in $sizes; do one "3.1.1, no broker limit" "$plain_port" "$work/v311.yaml" "$mb"; done
for mb in $sizes; do one "3.1.1, shipped limit" "$limited_port" "$work/v311.yaml" "$mb"; done
for mb in $sizes; do one "MQTT 5, no broker limit" "$plain_port" "$work/v5.yaml" "$mb"; done
