#!/usr/bin/env bash
# CI for what ships (run by .ci/run after the tests; as root on a Debian 12 machine):
#  1. cross-builds the arm64 agent for Raspberry Pi OS bookworm with Debian's Swift 6.0.3 (cached in
#     ~/.cache/parkwise-cross: keeps the source compiling on 6.0 as well as on the host's toolchain);
#  2. smoke-tests it under qemu-aarch64-static: version, check-config of every example, a replayed
#     trace published to a loopback mosquitto and the events checked;
#  3. builds the amd64 and arm64 .debs and runs lintian (no errors, no warnings);
#  4. install -> configure -> upgrade -> remove -> purge of the amd64 .deb in a throwaway Debian 12
#     root (debootstrap with systemd, cached as a tarball), checking user, groups, conffile, unit and state dir.
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
PARKWISE_DEB_OUT=$debs bash deploy/package/make-deb.sh >/dev/null
timing "amd64 .deb (host build)"
lintian --fail-on error,warning "$debs"/*.deb >"$log" 2>&1 || { cat "$log" >&2; fail "lintian"; }
# The units' hardening: exposure at most 2.0 (systemd-analyze's scale: 20 tenths), the agent's and the bridge's.
for unit in deploy/systemd/parkwise-agent.service deploy/systemd/parkwise-bridge.service; do
    systemd-analyze security --offline=yes --threshold=20 "$unit" >"$log" 2>&1 ||
        { cat "$log" >&2; fail "systemd-analyze security: $unit exposure above 2.0"; }
done
timing "lintian, systemd-analyze security"
ls -l "$debs" >&2
# PARKWISE_CI_DEBS=DIR: the packages kept there for the next step of .ci/run (the system test installs the amd64 one).
if [ -n "${PARKWISE_CI_DEBS:-}" ]; then mkdir -p "$PARKWISE_CI_DEBS" && cp "$debs"/*.deb "$PARKWISE_CI_DEBS/"; fi

# 4. Install, upgrade, remove, purge in a throwaway Debian 12 root.
base=$CROSS_CACHE/bookworm-systemd-root.tar
if [ ! -e "$base" ]; then
    # systemd for `systemd-analyze verify` of the installed unit (not booted: a chroot).
    quiet debootstrap --variant=minbase --include=systemd bookworm "$work/base" "$CROSS_MIRROR"
    quiet chroot_run "$work/base" apt-get update -q
    tar -C "$work/base" -cf "$base.new" .
    mv "$base.new" "$base"
    rm -rf "$work/base"
fi
root=$work/root
mkdir -p "$root"
tar -C "$root" -xf "$base"
deb=$(find "$debs" -name '*_amd64.deb' -print -quit)
cp "$deb" "$root/tmp/v1.deb"
# The upgrade: the same package with a higher version (its agent.yaml unchanged, as in a bug-fix release).
dpkg-deb -R "$deb" "$work/v2"
sed -i 's/^Version: \(.*\)/Version: \1+ci1/' "$work/v2/DEBIAN/control"
dpkg-deb --root-owner-group --build "$work/v2" "$root/tmp/v2.deb" >/dev/null
# A second upgrade that changes the shipped template: the board's config is its own (no conffile), so the upgrade
# asks nothing (stdin closed, no --force-conf* option: what an unattended upgrade must get through) and leaves it.
sed -i 's/+ci1$/+ci2/' "$work/v2/DEBIAN/control"
echo "# v3" >>"$work/v2/usr/share/parkwise-agent/agent.yaml"
(cd "$work/v2" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
    >"$work/v2/DEBIAN/md5sums"
dpkg-deb --root-owner-group --build "$work/v2" "$root/tmp/v3.deb" >/dev/null
# A package of before the config left the conffiles (0.1.0 shipped /etc/parkwise-agent/agent.yaml as one): a lower
# version with the template as that conffile.
dpkg-deb -R "$deb" "$work/v0"
sed -i 's/^Version: \(.*\)/Version: \1~conffile/' "$work/v0/DEBIAN/control"
install -D -m 0640 "$work/v0/usr/share/parkwise-agent/agent.yaml" "$work/v0/etc/parkwise-agent/agent.yaml"
echo /etc/parkwise-agent/agent.yaml >"$work/v0/DEBIAN/conffiles"
chmod 0644 "$work/v0/DEBIAN/conffiles"
(cd "$work/v0" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
    >"$work/v0/DEBIAN/md5sums"
dpkg-deb --root-owner-group --build "$work/v0" "$root/tmp/v0.deb" >/dev/null
in_root() { chroot_run "$root" "$@"; }
unit=/lib/systemd/system/parkwise-agent.service
check() { in_root sh -c "$1" >"$log" 2>&1 || { cat "$log" >&2; fail "after $2: $1"; }; }

in_root apt-get install -y -q --no-install-recommends /tmp/v1.deb >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "install"; }
grep -F "  sudo parkwise-agent check-config /etc/parkwise-agent/agent.yaml && sudo systemctl enable --now parkwise-agent" \
    "$work/install.log" >/dev/null || { cat "$work/install.log" >&2; fail "postinst's closing hint"; }
check 'id -nG parkwise | grep -w gpio && id -nG parkwise | grep -w parkwise' install
check '[ "$(stat -c %U:%G:%a /var/lib/parkwise-agent)" = parkwise:parkwise:750 ]' install
check '[ "$(stat -c %U:%G:%a /etc/parkwise-agent/agent.yaml)" = root:parkwise:640 ]' install
check "[ -f $unit ] && [ -f /lib/udev/rules.d/60-parkwise-agent-gpio.rules ]" install
# The hint's first command, as typed (systemctl needs a booted system, not a chroot): refused until the installer
# sets the board's device id, then ok.
check 'parkwise-agent check-config /etc/parkwise-agent/agent.yaml; [ $? = 78 ]' install
check 'parkwise-agent check-config /etc/parkwise-agent/agent.yaml 2>&1 | grep "device is empty"' install
check 'sed -i "s/^device: .*/device: ci-gate/" /etc/parkwise-agent/agent.yaml && parkwise-agent check-config /etc/parkwise-agent/agent.yaml' install
check "systemd-analyze verify $unit" install
check 'man -w parkwise-agent || [ -f /usr/share/man/man1/parkwise-agent.1.gz ]' install
check 'echo "# edited on site" >> /etc/parkwise-agent/agent.yaml && touch /var/lib/parkwise-agent/outbox-marker' edit

in_root dpkg -i /tmp/v2.deb >"$log" 2>&1 || { cat "$log" >&2; fail "upgrade"; }
check 'grep "# edited on site" /etc/parkwise-agent/agent.yaml' upgrade
check '[ "$(stat -c %U:%G:%a /etc/parkwise-agent/agent.yaml)" = root:parkwise:640 ]' upgrade
check '[ -e /var/lib/parkwise-agent/outbox-marker ] && id parkwise' upgrade
check "dpkg-query -W -f='\${Version}' parkwise-agent | grep '+ci1\$' && [ -f $unit ]" upgrade

in_root dpkg -i /tmp/v3.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "upgrade (changed template)"; }
check 'grep "# edited on site" /etc/parkwise-agent/agent.yaml && ! grep "# v3" /etc/parkwise-agent/agent.yaml' \
    "upgrade (changed template)"
check '! ls /etc/parkwise-agent/*.dpkg-* && grep "# v3" /usr/share/parkwise-agent/agent.yaml' "upgrade (changed template)"

check 'install -d -o parkwise /var/lib/parkwise-agent/outbox && touch /var/lib/parkwise-agent/outbox/outbox.log' "an outbox"
in_root dpkg -r parkwise-agent >"$log" 2>&1 || { cat "$log" >&2; fail "remove"; }
grep -F "the outbox in /var/lib/parkwise-agent/outbox (events not delivered yet, if any) is kept" "$log" >/dev/null ||
    { cat "$log" >&2; fail "remove: no word of the outbox kept"; }
check "[ ! -e /usr/bin/parkwise-agent ] && [ ! -e $unit ]" remove
check 'grep "# edited on site" /etc/parkwise-agent/agent.yaml' remove
check 'id parkwise && [ -e /var/lib/parkwise-agent/outbox-marker ]' remove
# A reinstall after the remove keeps the board's config (no template over it).
in_root dpkg -i /tmp/v3.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "reinstall"; }
check 'grep "# edited on site" /etc/parkwise-agent/agent.yaml' reinstall
check 'echo "username=ci-gate" > /etc/parkwise-agent/credentials && chown parkwise: /etc/parkwise-agent/credentials' \
    "credentials added"

in_root dpkg -P parkwise-agent >"$log" 2>&1 || { cat "$log" >&2; fail "purge"; }
# The user stays (the credentials kept below are its files: a freed uid could hand them to another package's user).
check 'getent passwd parkwise && getent group gpio' purge
check '[ ! -e /var/lib/parkwise-agent ] && [ ! -e /etc/parkwise-agent/agent.yaml ]' purge
check '[ "$(stat -c %U /etc/parkwise-agent/credentials)" = parkwise ]' purge
# From the conffile era: the edited config stays, the upgrade asks nothing (stdin closed, no --force-conf*), dpkg keeps
# the file as an obsolete conffile, and the purge takes it.
in_root dpkg -i /tmp/v0.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "install (conffile era)"; }
check 'echo "# edited in the conffile era" >> /etc/parkwise-agent/agent.yaml' "install (conffile era)"
in_root dpkg -i /tmp/v3.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "upgrade from the conffile era"; }
check 'grep "# edited in the conffile era" /etc/parkwise-agent/agent.yaml && ! ls /etc/parkwise-agent/*.dpkg-*' \
    "upgrade from the conffile era"
check "dpkg-query -W -f='\${Conffiles}' parkwise-agent | grep '/etc/parkwise-agent/agent.yaml .* obsolete'" \
    "upgrade from the conffile era"
in_root dpkg -P parkwise-agent >"$log" 2>&1 || { cat "$log" >&2; fail "purge (after the conffile era)"; }
check '[ ! -e /etc/parkwise-agent/agent.yaml ] && [ ! -e /var/lib/parkwise-agent ]' "purge (after the conffile era)"
timing "install/upgrade/remove/purge (Debian 12 root)"
echo "ci-arm64: ok" >&2
