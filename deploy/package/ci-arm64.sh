#!/usr/bin/env bash
# CI for what ships (run by .ci/run after the tests; as root on a Debian 12 machine):
#  1. cross-builds the arm64 agent for Raspberry Pi OS bookworm with Debian's Swift 6.0.3 (cached in
#     ~/.cache/parkwise-cross: keeps the source compiling on 6.0 as well as on the host's toolchain);
#  2. smoke-tests it under qemu-aarch64-static: version, check-config of every example, a replayed
#     trace published to a loopback mosquitto and the events checked;
#  3. builds the amd64 and arm64 .debs, the agent's and the bridge's, and runs lintian (no errors, no warnings);
#  4. install -> configure -> upgrade -> remove -> purge of each .deb in a throwaway Debian root of its release and
#     architecture (debootstrap with systemd, cached as a tarball), checking user, groups, settings, unit and state dir.
#  5. the signed apt repository of the agent's .debs in that root: install, unattended upgrade, tampering refused.
# Prints each step's wall time.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/package/cross-env.sh
source deploy/package/cross-env.sh
work=$(mktemp -d /tmp/parkwise-ci.XXXXXX)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "ci-arm64: FAIL: $*" >&2; exit 1; }
log=$work/log
: >"$log"

install_missing debootstrap qemu-user-static lintian mosquitto mosquitto-clients binutils python3 rsync systemd
timing "host packages"

# 1. The cross build.
binary=$(bash deploy/package/cross-build.sh bookworm)
agent=(qemu-aarch64-static -L "$(cross_sysroot bookworm)" "$binary")
timing "cross build (bookworm, arm64)"

# 2. Smoke test under qemu-user.
grep "^parkwise-agent [0-9]" >/dev/null <<<"$("${agent[@]}" version)" || fail "version"
for config in hardware/examples/*.yaml; do
    "${agent[@]}" check-config "$config" >"$log" 2>&1 || { cat "$log" >&2; fail "check-config $config"; }
done
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
persistence false
user root
log_dest file $work/mosquitto.log
log_type all
CONF
mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.out" 2>&1 &
pids+=($!)
# Two cars through the single gate's lane (loop a = GPIO17, b = GPIO27), street to lot.
cat >"$work/trace.jsonl" <<'TRACE'
{"parkwise_trace": 1, "site": "uniandes", "device": "lot-b-gate", "note": "two cars in"}
{"t_ms": 0, "input": "GPIO17", "value": 1}
{"t_ms": 700, "input": "GPIO27", "value": 1}
{"t_ms": 1400, "input": "GPIO17", "value": 0}
{"t_ms": 2100, "input": "GPIO27", "value": 0}
{"t_ms": 5000, "input": "GPIO17", "value": 1}
{"t_ms": 5700, "input": "GPIO27", "value": 1}
{"t_ms": 6400, "input": "GPIO17", "value": 0}
{"t_ms": 7100, "input": "GPIO27", "value": 0}
TRACE
# Waits up to 10 s for a line of mosquitto's log.
await_log() {
    local _
    for _ in $(seq 100); do
        grep "$1" "$work/mosquitto.log" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cat "$work/mosquitto.out" "$work/mosquitto.log" >&2
    fail "mosquitto's log never said: $1"
}
await_log "Opening ipv4 listen socket on port $port"
mosquitto_sub -h 127.0.0.1 -p "$port" -i ci-sub -q 1 -t parkwise/v1/uniandes/lot-b-gate/events -C 2 -W 120 \
    >"$work/events" 2>"$work/sub.err" &
sub=$!
pids+=("$sub")
await_log "as ci-sub"
"${agent[@]}" run --config hardware/examples/single-gate.yaml --replay "$work/trace.jsonl" --speed 2 \
    --broker "mqtt://127.0.0.1:$port" --outbox "$work/outbox" 2>"$work/agent.log" &
agent_pid=$!
pids+=("$agent_pid")
wait "$sub" || { cat "$work/sub.err" "$work/agent.log" >&2; fail "fewer than 2 events within 120 s"; }
kill -TERM "$agent_pid"
wait "$agent_pid" || { cat "$work/agent.log" >&2; fail "the agent did not stop cleanly on SIGTERM"; }
kill "${pids[0]}"   # mosquitto
wait "${pids[0]}" 2>/dev/null || true
pids=()
python3 - "$work/events" <<'PY' || { cat "$work/events" >&2; fail "events"; }
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
assert len(events) == 2, events
for e in events:
    assert (e["type"], e["lane"], e["from"], e["to"]) == ("lane.passage", "lot-b-gate", "outside", "LOT-B"), e
assert events[1]["seq"] > events[0]["seq"], events
PY
timing "qemu-aarch64 smoke (version, check-config, replay)"

# 3. Packages and lintian.
debs=$work/debs
mkdir -p "$debs"
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh arm64 bookworm >/dev/null
timing "arm64 .deb (bookworm)"
# Raspberry Pi OS 13 (trixie): libgpiod 2.x, glibc 2.41 (the same sources, the other GPIO adapter).
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh arm64 trixie >/dev/null
timing "arm64 .deb (trixie)"
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh >/dev/null
timing "amd64 .deb (host build)"
# The bridge (libpq, libmosquitto): for the backend's host, amd64 or arm64.
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh parkwise-bridge >/dev/null
timing "amd64 bridge .deb (host build)"
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh parkwise-bridge arm64 bookworm >/dev/null
timing "arm64 bridge .deb (bookworm)"
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh parkwise-bridge arm64 trixie >/dev/null
timing "arm64 bridge .deb (trixie)"
lintian --fail-on error,warning "$debs"/*.deb >"$log" 2>&1 || { cat "$log" >&2; fail "lintian"; }
# The units' hardening: exposure at most 2.0 (systemd-analyze's scale: 20 tenths), the agent's and the bridge's.
for unit in deploy/systemd/parkwise-agent.service deploy/systemd/parkwise-bridge.service; do
    systemd-analyze security --offline=yes --threshold=20 "$unit" >"$log" 2>&1 ||
        { cat "$log" >&2; fail "systemd-analyze security: $unit exposure above 2.0"; }
done
timing "lintian, systemd-analyze security"
ls -l "$debs" >&2
# PARKWISE_CI_DEBS=DIR: the packages kept there for the next step of .ci/run (the system test installs the amd64 ones).
if [ -n "${PARKWISE_CI_DEBS:-}" ]; then mkdir -p "$PARKWISE_CI_DEBS" && cp "$debs"/*.deb "$PARKWISE_CI_DEBS/"; fi

# 4. Install, upgrade, remove, purge in throwaway Debian roots: the amd64 package, and the arm64 ones the boards get
#    (bookworm and trixie), each in an arm64 root of its release run under qemu-user (deploy/package/install-cycle.sh).
for package in parkwise-agent parkwise-bridge; do
    bash deploy/package/install-cycle.sh amd64 bookworm "$(find "$debs" -name "${package}_*_amd64.deb" -print -quit)"
    timing "$package install/upgrade/remove/purge (Debian 12 root, amd64)"
done
# The signed apt repository of the agent's three, as a board adds it, installs from it and is upgraded unattended from
# it, and the tampered ones apt refuses (in the amd64 root install-cycle.sh cached just now).
bash deploy/package/repo-check.sh "$debs"/parkwise-agent_*.deb
timing "signed apt repository: install, unattended upgrade, tampering"
for package in parkwise-agent parkwise-bridge; do
    bash deploy/package/install-cycle.sh arm64 bookworm "$(find "$debs" -name "${package}_*+deb12_arm64.deb" -print -quit)"
    timing "$package install/upgrade/remove/purge (Debian 12 root, arm64 under qemu-user)"
    bash deploy/package/install-cycle.sh arm64 trixie "$(find "$debs" -name "${package}_*+deb13_arm64.deb" -print -quit)"
    timing "$package install/upgrade/remove/purge (Debian 13 root, arm64 under qemu-user)"
done
echo "ci-arm64: ok" >&2
