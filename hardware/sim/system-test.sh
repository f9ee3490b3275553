#!/usr/bin/env bash
# The installed system, booted (issue 23, section 1): the .deb built from this tree, installed with apt in a Debian
# bookworm root and run by systemd as PID 1 with the shipped unit, reading gpio-sim lines through the shipped udev
# rule and publishing to Debian's mosquitto, all inside one qemu VM (TCG, no network: -nic none).
#   - the kernel, its gpio-sim modules and the qemu invocation are the GPIO VM's (setup.sh, vm.sh); the root is a
#     debootstrap image cached by exact package versions (system-root.sh); every boot runs through a small initramfs
#     (guest/system/init) that mounts it and copies the harness in, so the root stays the cached one;
#   - the disk the cases change is a qcow2 overlay on that image, kept for the run: the reboot case boots it again;
#   - the host talks to the guest as run-tests.sh does: a command server on ttyS1 (guest/serve.sh, run by
#     parkwise-sim-serve.service), every parkwise message logged in the guest by a persistent subscriber
#     (parkwise-sim-sub.service, /var/lib/parkwise-sim/mqtt.log, kept across reboots).
# The cases build on each other (install, start, ..., purge), one function each, one line each; every wait is on what
# the guest says, with a deadline. Ends with "N passed, M failed"; exits non-zero if anything failed or could not run.
#
#   bash hardware/sim/system-test.sh
#
# PARKWISE_DEB             the agent's amd64 .deb to test (default: built now by deploy/package/make-deb.sh)
# PARKWISE_BRIDGE_DEB      the bridge's amd64 .deb (default: built now by make-deb.sh parkwise-bridge)
# PARKWISE_VM_CACHE        as run-tests.sh (~/.cache/parkwise-vm): kernel, modules, the root image (system-<key>/)
# PARKWISE_SYSTEST_CASES   only these cases, by function name (they build on each other: to try a change quickly)
# PARKWISE_SYSTEST_SHELL   set: after the first boot, guest commands from stdin (one a line, output and exit code
#                          printed), then the cases; to look around in the guest by hand
# shellcheck disable=SC2317  # (the cases: functions called by name, by vm.sh's run_case)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PFX=""
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parkwise-systest.XXXXXX")"
T0=$SECONDS
# shellcheck source=hardware/sim/vm.sh
. "$HERE/vm.sh"   # vm_up, g, vm_down, check, run_case
VM_CASES="${PARKWISE_SYSTEST_CASES:-}"
VM_APPEND="console=ttyS0 quiet panic=-1 net.ifnames=0"
VM_BOOT_S=300      # systemd's whole boot under TCG on a shared 2-core machine
VM_DOWN_S=90       # a clean power-off: the agent stops (TimeoutStopSec=15), the disk is synced
SUMMARY=()         # timings, printed at the end

finish() {
    local line
    [[ ! -d "$WORK/gnupg" ]] || gpgconf --homedir "$WORK/gnupg" --kill gpg-agent 2>/dev/null
    for line in "${SUMMARY[@]}"; do echo "system-test: $line"; done
    vm_finish system-test
}
cannot_run() { echo "system-test: CANNOT RUN: $*" >&2; FAIL=$((FAIL + 1)); finish; }
field() { local v="${OUT##*"$1"=}"; printf '%s' "${v%%[[:space:]]*}"; }   # NAME=value printed by a guest command
timed() { SUMMARY+=("$(printf '%-44s %s' "$1" "$2")"); echo "system-test: $1: $2"; }

# --- host tools, the VM's kernel, the packages, the root image, the initramfs ------------------------------------------
need=()
for tool in qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils debootstrap:debootstrap mkfs.ext4:e2fsprogs gpg:gpg; do
    command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
if ((${#need[@]})); then
    echo "system-test: installing ${need[*]}" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; } \
        > "$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; cannot_run "could not install ${need[*]}"; }
fi
if ! grep -q 'Candidate: [0-9]' <<<"$(apt-cache policy linux-image-amd64 2>/dev/null)"; then
    apt-get update -q >/dev/null || cannot_run "apt-get update failed"
fi
bash "$HERE/setup.sh" > "$WORK/setup.out" || cannot_run "VM setup failed (see above)"
CACHE="$(tail -n 1 "$WORK/setup.out")"
[[ -f "$CACHE/vmlinux" ]] || cannot_run "no vmlinux in '$CACHE'"
timed "VM kernel and modules (setup.sh)" "$((SECONDS - T0)) s"

step=$SECONDS
V1="${PARKWISE_DEB:-}"
if [[ -z "$V1" ]]; then
    PARKWISE_DEB_OUT="$WORK/debs" bash "$REPO/deploy/package/make-deb.sh" > "$WORK/make-deb.out" 2> "$WORK/make-deb.err" \
        || { cat "$WORK/make-deb.err"; cannot_run "make-deb.sh failed"; }
    V1="$(tail -n 1 "$WORK/make-deb.out")"
fi
[[ -f "$V1" && "$V1" == *_amd64.deb ]] || cannot_run "no amd64 .deb at '$V1'"
BRIDGE="${PARKWISE_BRIDGE_DEB:-}"
if [[ -z "$BRIDGE" ]]; then
    PARKWISE_DEB_OUT="$WORK/debs" bash "$REPO/deploy/package/make-deb.sh" parkwise-bridge > "$WORK/make-deb.out" \
        2> "$WORK/make-deb.err" || { cat "$WORK/make-deb.err"; cannot_run "make-deb.sh parkwise-bridge failed"; }
    BRIDGE="$(tail -n 1 "$WORK/make-deb.out")"
fi
[[ -f "$BRIDGE" && "$BRIDGE" == */parkwise-bridge_*_amd64.deb ]] || cannot_run "no parkwise-bridge amd64 .deb at '$BRIDGE'"
# The newer build of the upgrade case: the same package, its version bumped (as ci-arm64.sh's upgrade cycle does).
VERSION1="$(dpkg-deb -f "$V1" Version)"
VERSION2="$VERSION1+systest1"
{ dpkg-deb -R "$V1" "$WORK/v2" && sed -i "s/^Version: .*/Version: $VERSION2/" "$WORK/v2/DEBIAN/control" &&
    dpkg-deb --root-owner-group --build "$WORK/v2" "$WORK/v2.deb" > /dev/null; } || cannot_run "cannot repack $V1 as $VERSION2"
rm -rf "$WORK/v2"
timed "the .debs (make-deb.sh) and the agent's newer build" "$((SECONDS - step)) s"
# The board's apt repository for the commissioning case (a file: URL in the guest), signed by a throwaway key.
export GNUPGHOME="$WORK/gnupg"
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key "ParkWise system test <systest@parkwise.invalid>" ed25519 sign 1d \
    > "$WORK/gpg.log" 2>&1 || { cat "$WORK/gpg.log"; cannot_run "gpg could not make the repository's key"; }
REPO_KEY="$(gpg --batch --with-colons --list-secret-keys systest@parkwise.invalid 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')"
PARKWISE_REPO_KEY="$REPO_KEY" PARKWISE_REPO_URL=file:/var/cache/parkwise-sim/repo/ bash "$REPO/deploy/package/make-repo.sh" \
    "$WORK/repo" "$V1" 2> "$WORK/make-repo.err" || { cat "$WORK/make-repo.err"; cannot_run "make-repo.sh failed"; }

step=$SECONDS
bash "$HERE/system-root.sh" "$CACHE" "$V1" "$BRIDGE" > "$WORK/root.out" || cannot_run "the root image failed (see above)"
IMAGE="$(tail -n 1 "$WORK/root.out")"
[[ -f "$IMAGE" ]] || cannot_run "no root image at '$IMAGE'"
timed "root image (system-root.sh)" "$((SECONDS - step)) s"

MODS="$(vm_block_modules)" || cannot_run "no block modules"
BB="$CACHE/root/bin/busybox"
initrd() {  # the stage-1 initramfs into $WORK/initrd.cpio: busybox, block modules, guest/system/init, the harness
    local stage="$WORK/initrd" m applet
    rm -rf "$stage"
    mkdir -p "$stage"/{bin,modules,proc,sys,dev,newroot} "$stage/files/sim/system" "$stage/files/etc/systemd/system" \
        "$stage/files/var/cache/parkwise-sim" || return 1
    cp "$BB" "$stage/bin/busybox" || return 1
    for applet in $("$BB" --list); do [[ "$applet" == busybox ]] || ln -sf busybox "$stage/bin/$applet"; done
    for m in "${VM_BLOCK_MODULES[@]}"; do cp "$MODS/${m##*/}.ko" "$stage/modules/" && echo "${m##*/}"; done > "$stage/modules/order"
    cp "$HERE/guest/system/init" "$stage/init" && chmod +x "$stage/init" &&
    cp "$HERE/guest/lib.sh" "$HERE/guest/serve.sh" "$stage/files/sim/" &&
    cp "$HERE/guest/system/serve" "$HERE/guest/system/chips" "$HERE/guest/system/backend" "$HERE/guest/system/commission" \
        "$stage/files/sim/system/" &&
    mkdir -p "$stage/files/sim/mosquitto" && cp "$REPO"/deploy/mosquitto/{provision.sh,devices.sh,crl.sh,bundle.sh,make-certs.sh} \
        "$REPO"/deploy/mosquitto/{mosquitto.conf,acl.conf} "$stage/files/sim/mosquitto/" &&
    cp -a "$WORK/repo" "$stage/files/var/cache/parkwise-sim/repo" &&
    cp "$HERE"/guest/system/*.service "$stage/files/etc/systemd/system/" &&
    cp "$V1" "$BRIDGE" "$WORK/v2.deb" "$REPO/deploy/backend/parkwise-test-schema.sql" "$stage/files/var/cache/parkwise-sim/" ||
        return 1
    (cd "$stage" && find . -mindepth 1 | "$BB" cpio -o -H newc 2>/dev/null) > "$WORK/initrd.cpio"
}
initrd || cannot_run "initramfs failed"
qemu-img create -q -f qcow2 -F raw -b "$IMAGE" "$WORK/disk.qcow2" || cannot_run "qemu-img create failed"
VM_QEMU_ARGS=(-drive "file=$WORK/disk.qcow2,if=virtio,format=qcow2")
DEB1="/var/cache/parkwise-sim/$(basename "$V1")"
DEB2=/var/cache/parkwise-sim/v2.deb
BRIDGE_DEB="/var/cache/parkwise-sim/$(basename "$BRIDGE")"

BOOTS=0
# boot: the VM up on the run's disk (a fresh directory for its console and pipes each time).
boot() {
    local dir
    BOOTS=$((BOOTS + 1)); dir="$WORK/boot$BOOTS"
    mkdir -p "$dir" && cp "$WORK/initrd.cpio" "$dir/initrd.cpio"
    local start=$SECONDS
    vm_up "$dir" || return 1
    timed "boot $BOOTS: kernel to the command server" "$((SECONDS - start)) s wall, $(grep -a -o '@@BOOTED [0-9.]*s' "$dir/console.log" | cut -d' ' -f2) guest"
}

# --- the cases -----------------------------------------------------------------------------------------------------------
CONFIG=/etc/parkwise-agent/agent.yaml
T=parkwise/v1/uniandes/sys-gate
# Guest shell snippets.
prop() { printf '%s' "\$(systemctl show -p $1 --value parkwise-agent)"; }   # a property of the agent's unit
depth() { printf '%s' "\$(parkwise-agent status | sed -n 's/^outbox *\\([0-9]*\\) of.*/\\1/p')"; }   # events in the outbox
PASSAGES=0
# passage: a car through the single gate's lane, street to lot (loops active-low: a pulled low is a car on loop a),
# and waits for its lane.passage event (the count of them so far).
passage() {
    PASSAGES=$((PASSAGES + 1))
    printf '%s' "pull pi4 17 down; usleep 600000; pull pi4 27 down; usleep 600000; pull pi4 17 up; usleep 600000; pull pi4 27 up; wait_count 30 $PASSAGES $T/events '\"lane.passage\"'"
}
# seq_promise: every seq of the device's events arrived or is declared by an outbox.dropped (CONTRACT.md, Gaps),
# none used by two events, checked on the host over everything the guest's subscriber logged.
seq_promise() {
    check "the subscriber's log" "grep -F ' $T/events ' \$MQTT_LOG" || return 1
    printf '%s' "$OUT" > "$WORK/events.log"
    OUT="$(python3 - "$WORK/events.log" <<'PY'
import json, sys
seen, ids, declared = {}, {}, []
for line in open(sys.argv[1]):
    parts = line.rstrip("\n").split(" ", 2)
    if len(parts) < 3:
        continue
    event = json.loads(parts[2])
    seq = event["seq"]
    if seq in seen and seen[seq] != event["id"]:
        sys.exit(f"seq {seq} used by two events: {seen[seq]} and {event['id']}")
    seen[seq] = event["id"]
    if event["type"] == "outbox.dropped":
        declared.append((event["first_seq"], event["last_seq"]))
if not seen:
    sys.exit("no events")
top = max(seen)
undeclared = [s for s in range(1, top + 1) if s not in seen and not any(a <= s <= b for a, b in declared)]
if undeclared:
    sys.exit(f"undeclared gaps: {undeclared[:20]} (seqs 1..{top}, declared {declared})")
print(f"seqs 1..{top}: {len(seen)} arrived, the rest declared by {declared or 'nothing'}")
PY
)" || { WHY="seq promise broken: $OUT"; return 1; }
    echo "      $OUT"
}

booted() {
    check -t "$VM_BOOT_S" "boot finished, nothing failed" "systemctl is-system-running --wait; systemctl --failed --no-legend; [ \"\$(systemctl is-system-running)\" = running ]" || return 1
    check "systemd is PID 1" "[ \"\$(cat /proc/1/comm)\" = systemd ]" &&
    check "gpio-sim chips (the Pi 4 block is gpiochip1)" "[ \"\$(chip pi4)\" = gpiochip1 ] && [ -c /dev/gpiochip1 ]" &&
    check "Debian's mosquitto runs" "systemctl is-active mosquitto && dpkg-query -W mosquitto" &&
    check "no network but loopback" "[ \"\$(ls /sys/class/net)\" = lo ]" &&
    check "boot time" "systemd-analyze time" && echo "      ${OUT%%$'\n'*}"
}

installed() {
    check -t 600 "apt install ./parkwise-agent_..._amd64.deb: its Depends from the root's cache, no network" "apt-get install -y --no-install-recommends $DEB1 > /tmp/apt.log 2>&1; rc=\$?; cat /tmp/apt.log; [ \$rc = 0 ]" || return 1
    grep -q "Setting up libgpiod2" <<<"$OUT" || { WHY="apt did not install libgpiod2 (a Depends) with it"$'\n'"$OUT"; return 1; }
    grep -qF "sudo systemctl enable --now parkwise-agent" <<<"$OUT" || { WHY="no closing hint from the postinst"$'\n'"$OUT"; return 1; }
    check "user parkwise in group gpio, the config from the template, refused unedited (78)" "id -nG parkwise | grep -w gpio && [ \"\$(stat -c %U:%G:%a $CONFIG)\" = root:parkwise:640 ] && parkwise-agent check-config $CONFIG; [ \$? = 78 ]" &&
    check "the shipped udev rule: /dev/gpiochip* root:gpio 0660" "stat -c '%n %U:%G %a' /dev/gpiochip*; for c in /dev/gpiochip*; do [ \"\$(stat -c %U:%G:%a \$c)\" = root:gpio:660 ] || exit 1; done" &&
    check -t 300 "gpiod (the test's gpioinfo) from the cache too" "apt-get install -y --no-install-recommends gpiod > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; false; }"
}

ready() {
    check "the config edited: this board's id (the template's Pi 4 pins are the gpio-sim Pi 4 block's)" "sed -i 's/^device: .*/device: sys-gate/' $CONFIG && parkwise-agent check-config $CONFIG" &&
    check -t 300 "systemctl enable --now returns once the agent said READY=1" "t0=\$(date +%s%N); systemctl enable --now parkwise-agent; rc=\$?; t1=\$(date +%s%N); echo enable_now_ms=\$(( (t1 - t0) / 1000000 )); [ \$rc = 0 ]" || return 1
    local wall
    wall="$(field enable_now_ms)"
    check "active (running); exec to READY" "[ $(prop SubState) = running ] && echo ready_ms=\$(( ($(prop ActiveEnterTimestampMonotonic) - $(prop ExecMainStartTimestampMonotonic)) / 1000 ))" || return 1
    timed "READY (first start)" "$(field ready_ms) ms from exec to READY=1 (systemd's timestamps), enable --now $wall ms"
}

publishes() {
    check -t 90 "online status (retained), read with mosquitto_sub" "wait_msg 60 $T/status '\"online\"' > /dev/null && retained $T/status | grep '\"online\"'" &&
    check -t 90 "a car through the gate (GPIO17 then GPIO27): lane.passage published" "$(passage)"
}

as_parkwise() {
    check "the agent runs as user parkwise, not root, with group gpio" "pid=$(prop MainPID); grep -E '^(Uid|Gid|Groups):' /proc/\$pid/status; awk '/^Uid:/ {print \$2}' /proc/\$pid/status | grep -x \"\$(id -u parkwise)\" && awk '/^Groups:/' /proc/\$pid/status | grep -w \"\$(getent group gpio | cut -d: -f3)\"" &&
    check "it holds its lines (consumer parkwise-agent, active-low, pull-up)" "info pi4 17 | grep parkwise-agent | grep active-low | grep pull-up && info pi4 27 | grep parkwise-agent" &&
    check "the chip is open only through group gpio (no ACL, no other mode)" "ls -l /dev/gpiochip1; [ \"\$(stat -c %a /dev/gpiochip1)\" = 660 ] && ls -l /proc/$(prop MainPID)/fd | grep gpiochip1"
}

outbox_sandbox() {
    check "its outbox in /var/lib/parkwise-agent, written by parkwise" "ls -lnR /var/lib/parkwise-agent; find /var/lib/parkwise-agent/outbox -type f -user parkwise -size +0 | grep ." &&
    check "the sandbox: / read-only for the agent, its state directory writable, /root hidden" "pid=$(prop MainPID); ! nsenter -t \$pid -m touch /usr/parkwise-probe 2>&1 && nsenter -t \$pid -m touch /var/lib/parkwise-agent/.probe && nsenter -t \$pid -m rm /var/lib/parkwise-agent/.probe && [ -z \"\$(nsenter -t \$pid -m ls -A /root)\" ] && touch /root/.host-probe"
}

watchdog() {
    local pid
    check "the agent's pid and restarts so far" "echo pid=$(prop MainPID) restarts=$(prop NRestarts)" || return 1
    pid="${OUT#pid=}"; pid="${pid%% *}"
    # Frozen: systemd's watchdog (WatchdogSec=60, fed every 30 s) fires 30-60 s later, SIGABRT (with SIGCONT) ends
    # it, the restart comes RestartSec=5 later: a new READY within 60 + 5 s of the freeze, plus the start itself.
    check -t 200 "SIGSTOP: killed by the watchdog, restarted and READY again within WatchdogSec + RestartSec (+10 s start)" "t0=\$(date +%s); kill -STOP $pid; until [ $(prop MainPID) != $pid ] && [ $(prop MainPID) != 0 ] && [ $(prop SubState) = running ]; do [ \$(( \$(date +%s) - t0 )) -gt 120 ] && { systemctl status --no-pager parkwise-agent; exit 1; }; usleep 200000; done; t1=\$(date +%s); echo restart_s=\$((t1 - t0)); journalctl -u parkwise-agent --no-pager -o cat | grep -i -e watchdog -e 'Main process exited'; [ \$((t1 - t0)) -le 75 ] && [ $(prop NRestarts) -ge 1 ]" || return 1
    timed "watchdog: SIGSTOP to READY again" "$(field restart_s) s"
    grep -q "Watchdog timeout" <<<"$OUT" || { WHY="systemd's journal does not say 'Watchdog timeout'"$'\n'"$OUT"; return 1; }
    check -t 90 "a car after the restart: published" "$(passage)" &&
    seq_promise
}

journal_warnings() {
    check "journalctl -p warning -u parkwise-agent: its warnings (the seqs the killed run left declared), no info lines" "journalctl -p warning -u parkwise-agent --no-pager -o cat > /tmp/warn.log; cat /tmp/warn.log; grep -q '^warn seqs of the last run unaccounted for' /tmp/warn.log && ! grep -q '^info ' /tmp/warn.log" &&
    check "priority 4 in the journal, not a '<4>' in the text; info lines at 6" "journalctl -u parkwise-agent -o json --no-pager | grep '\"MESSAGE\":\"warn seqs of the last run' | grep '\"PRIORITY\":\"4\"' && journalctl -u parkwise-agent -o json --no-pager | grep '\"MESSAGE\":\"info ' | grep '\"PRIORITY\":\"6\"' > /dev/null && ! journalctl -u parkwise-agent -o cat --no-pager | grep '^<[0-7]>'"
}

config_error() {
    # NRestarts counts systemd's own restarts; a manual restart sets it to 0.
    check "the config made invalid (device id emptied): the restart fails with exit 78, not restarted" "cp $CONFIG /root/agent.yaml.good; sed -i 's/^device: .*/device: \"\"/' $CONFIG; systemctl restart parkwise-agent; rc=\$?; echo rc=\$rc status=$(prop ExecMainStatus) state=$(prop SubState) result=$(prop Result) restarts=$(prop NRestarts); [ \$rc != 0 ] && [ $(prop ExecMainStatus) = 78 ] && [ $(prop SubState) = failed ] && [ $(prop NRestarts) = 0 ]" &&
    check "systemctl status tells the technician why" "systemctl status --no-pager -l parkwise-agent > /tmp/st.log; cat /tmp/st.log; grep 'status=78/CONFIG' /tmp/st.log && grep 'Status: \"exit 78: /etc/parkwise-agent/agent.yaml:[0-9:]* error: device is empty' /tmp/st.log" &&
    check "the config fixed: it starts again" "cp /root/agent.yaml.good $CONFIG && systemctl start parkwise-agent && [ $(prop SubState) = running ]"
}

crash_loop() {
    check "its lines held by another program (gpiomon): the start fails with exit 1" "systemctl stop parkwise-agent && { gpiomon \$(chip pi4) 17 27 > /dev/null 2>&1 & echo \$! > /tmp/gpiomon.pid; } && wait_used pi4 17 && wait_used pi4 27 && date +%s > /tmp/loop.t0 && ! systemctl start parkwise-agent && [ $(prop ExecMainStatus) = 1 ]" &&
    check -t 90 "retried every RestartSec=5, not given up: a second restart after 10 s or more" "t0=\$(cat /tmp/loop.t0); until [ $(prop NRestarts) -ge 2 ]; do [ \$(( \$(date +%s) - t0 )) -gt 60 ] && exit 1; usleep 200000; done; t=\$(( \$(date +%s) - t0 )); echo restarts=$(prop NRestarts) after=\${t}s state=$(prop ActiveState)/$(prop SubState); [ \$t -ge 10 ] && [ $(prop ActiveState) != failed ]" &&
    # What a technician reads: the agent's reason as the unit's status (STATUS= before it exits), beside systemd's
    # own lines: the journal's excerpt in `systemctl status`, read in the RestartSec wait, often lacks it (systemd #7748).
    check "systemctl status names the holder (the agent's STATUS=), says auto-restart, status=1; so does the journal" "journalctl -u parkwise-agent --no-pager -o cat | grep \"in use by 'gpiomon'\" | grep 'pin 11' || exit 1; systemctl status --no-pager -l parkwise-agent > /tmp/st.log; cat /tmp/st.log; grep -e 'activating (auto-restart)' -e 'activating (start)' /tmp/st.log && grep 'status=1/FAILURE' /tmp/st.log && grep \"Status: .exit 1: .*in use by 'gpiomon'\" /tmp/st.log" &&
    check -t 90 "the holder gone: the next restart takes the lines, READY" "kill \$(cat /tmp/gpiomon.pid); t0=\$(date +%s); until [ $(prop SubState) = running ]; do [ \$(( \$(date +%s) - t0 )) -gt 60 ] && exit 1; usleep 200000; done; info pi4 17 | grep parkwise-agent"
}

memory_max() {
    # The campus config (157 inputs, the traffic simulator drives them all) at 200 times real speed, through a drop-in
    # as a technician would write it; its own device id and outbox, so the gate's seqs are not touched.
    check "a drop-in runs the campus config simulated at --speed 200 under the same unit" "install -m 0640 -g parkwise /usr/share/doc/parkwise-agent/examples/campus.yaml /etc/parkwise-agent/campus.yaml && mkdir -p /etc/systemd/system/parkwise-agent.service.d && printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/parkwise-agent run --config /etc/parkwise-agent/campus.yaml --simulate --speed 200 --broker mqtt://127.0.0.1:1883 --outbox /var/lib/parkwise-agent/campus\\n' > /etc/systemd/system/parkwise-agent.service.d/campus.conf && systemctl daemon-reload && systemctl restart parkwise-agent && [ $(prop SubState) = running ] && [ $(prop MemoryMax) = 67108864 ]" &&
    check -t 200 "500 campus events published" "wait_count 180 500 parkwise/v1/uniandes/campus-main/events '\"seq\"' > /dev/null" &&
    check "inside MemoryMax=64M: peak below it, no OOM kill, never restarted" "cg=/sys/fs/cgroup/system.slice/parkwise-agent.service; echo peak_kb=\$(( \$(cat \$cg/memory.peak) / 1024 )) current_kb=\$(( \$(cat \$cg/memory.current) / 1024 )); cat \$cg/memory.events; [ \$(cat \$cg/memory.peak) -lt 67108864 ] && grep -x 'oom_kill 0' \$cg/memory.events && [ $(prop NRestarts) = 0 ] && [ $(prop SubState) = running ]" || return 1
    timed "campus config at --speed 200: memory peak" "$(( $(field peak_kb) / 1024 )) MB of 64 (now $(( $(field current_kb) / 1024 )) MB)"
    check "the drop-in gone: the gate's config again" "rm -r /etc/systemd/system/parkwise-agent.service.d /etc/parkwise-agent/campus.yaml && systemctl daemon-reload && systemctl restart parkwise-agent && [ $(prop SubState) = running ]"
}

upgraded() {
    check "before: pid, boot, config" "md5sum $CONFIG > /root/agent.md5; echo pid=$(prop MainPID); retained $T/status" || return 1
    local pid="${OUT#*pid=}" boot
    pid="${pid%%$'\n'*}"; boot="$(sed -n 's/.*"boot":\([0-9]*\).*/\1/p' <<<"$OUT")"
    check -t 600 "apt install the newer build ($VERSION2): the service restarted on it" "apt-get install -y --no-install-recommends $DEB2 > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }; dpkg-query -W -f='\${Version}\\n' parkwise-agent | grep -x '$VERSION2' && [ $(prop MainPID) != $pid ] && [ $(prop SubState) = running ]" &&
    check "config unchanged, outbox kept" "md5sum -c /root/agent.md5 && find /var/lib/parkwise-agent/outbox -type f -size +0 | grep ." &&
    check -t 150 "boot counter +1 (the new process), a car after the upgrade: published" "wait_msg 60 $T/status '\"boot\":$((boot + 1)),' > /dev/null && $(passage)" &&
    seq_promise
}

# reboot: systemctl reboot in the guest, then the VM booted again on the same disk (with VM_QEMU_ARGS, VM_APPEND as set).
reboot() {
    g "systemctl reboot"   # the command server ends with the system; qemu ends at the reboot (-no-reboot)
    local deadline=$((SECONDS + VM_DOWN_S))
    while kill -0 "$QEMU_PID" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.5; done
    if kill -0 "$QEMU_PID" 2>/dev/null; then WHY="the VM did not go down within $VM_DOWN_S s of systemctl reboot"; return 1; fi
    wait "$QEMU_PID" 2>/dev/null
    QEMU_PID=""
    exec 3>&- 4<&-
    boot || { WHY="the VM did not come up again"; return 1; }
}

rebooted() {
    reboot || return 1
    check -t "$VM_BOOT_S" "up again, the agent enabled and READY" "systemctl is-system-running --wait; [ $(prop SubState) = running ] && echo ready_ms=\$(( $(prop ActiveEnterTimestampMonotonic) / 1000 ))" || return 1
    local ms
    ms="$(field ready_ms)"
    timed "READY after the reboot" "$((ms / 1000)).$(printf '%03d' $((ms % 1000))) s from the kernel's start"
    check -t 90 "a car after the reboot: published" "$(passage)" &&
    seq_promise
}

# A board without an RTC: it boots with its clock a year behind and the broker unreachable; then NTP sets the clock.
clock_behind() {
    check "the last seq before this boot" "grep -F ' $T/events ' \$MQTT_LOG | sed -n 's/.*\"seq\":\\([0-9]*\\).*/\\1/p' | sort -n | tail -n 1" || return 1
    local before="${OUT//[!0-9]/}" args=("${VM_QEMU_ARGS[@]}") rc started
    started=$(date -u +%s)
    VM_QEMU_ARGS+=(-rtc "base=$(date -u -d '1 year ago' +%Y-%m-%dT%H:%M:%S)")
    check "the broker masked for the next boot (the board boots where no network reaches it)" "systemctl mask mosquitto" || return 1
    reboot; rc=$?
    VM_QEMU_ARGS=("${args[@]}")
    ((rc == 0)) || return 1
    check -t "$VM_BOOT_S" "booted with the RTC a year behind (systemd advances it to its build date) and no broker: the agent READY, its clock unsynced" "systemctl is-system-running --wait; date -u; [ \$(date +%s) -lt $(( $(date +%s) - 86400 )) ] && ! systemctl is-active mosquitto && [ $(prop SubState) = running ] && parkwise-agent status > /tmp/status.txt; rc=\$?; cat /tmp/status.txt; [ \$rc = 0 ] && grep -q '  clock unsynced' /tmp/status.txt" &&
    check -t 60 "two cars while the broker is away: their events wait in the outbox" "d0=$(depth); for i in 1 2; do pull pi4 17 down; usleep 600000; pull pi4 27 down; usleep 600000; pull pi4 17 up; usleep 600000; pull pi4 27 up; usleep 600000; done; t0=\$(date +%s); until [ $(depth) -ge \$((d0 + 2)) ]; do [ \$(( \$(date +%s) - t0 )) -gt 30 ] && { parkwise-agent status; exit 1; }; usleep 200000; done" &&
    # As NTP sets it: the time stepped, then the kernel told it is synchronised (adjtimex: STA_UNSYNC cleared, a small
    # maximum error), which is what the agent reads. perl-base is in every Debian; 159 is adjtimex on x86_64.
    check "the clock set as NTP sets it (date, then adjtimex's status): synchronised" "date -u -s @$(date -u +%s) && perl -e 'my \$t = pack(\"I x4 q q q q i x4\", 0x1c, 0, 0, 16000, 16000, 0) . (\"\\0\" x 160); my \$r = syscall(159, \$t); die \"adjtimex: \$!\\n\" if \$r < 0; my @f = unpack(\"I x4 q q q q i\", \$t); print \"state=\$r status=\$f[5]\\n\"; exit((\$f[5] & 0x40) ? 1 : 0)'" &&
    check -t 150 "the agent sees it (it looks again at most every 64 s)" "t0=\$(date +%s); until parkwise-agent status | grep 'clock synced'; do [ \$(( \$(date +%s) - t0 )) -gt 120 ] && exit 1; usleep 500000; done" &&
    check -t 120 "the broker back: the two passages waiting (seqs after $before) arrive" "systemctl unmask mosquitto && systemctl start mosquitto parkwise-sim-sub && t0=\$(date +%s); until [ \$(grep -F ' $T/events ' \$MQTT_LOG | grep -F '\"lane.passage\"' | sed -n 's/.*\"seq\":\\([0-9]*\\).*/\\1/p' | awk '\$1 > $before' | sort -u | wc -l) -ge 2 ]; do [ \$(( \$(date +%s) - t0 )) -gt 90 ] && exit 1; usleep 200000; done" || return 1
    PASSAGES=$((PASSAGES + 2))
    check "the subscriber's log" "grep -F ' $T/events ' \$MQTT_LOG" || return 1
    printf '%s' "$OUT" > "$WORK/clock.log"
    OUT="$(python3 - "$WORK/clock.log" "$before" "$started" "$(date -u +%s)" <<'PY'
import json, sys
from datetime import datetime

def fail(message):
    print(message)
    sys.exit(1)

before, started, now = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
events = []
for line in open(sys.argv[1]):
    parts = line.rstrip("\n").split(" ", 2)
    if len(parts) == 3:
        event = json.loads(parts[2])
        if event["seq"] > before:
            events.append(event)
if not events:
    fail(f"no events after seq {before}")
clocks = {}
for event in events:
    clocks[event["clock"]] = clocks.get(event["clock"], 0) + 1
    at = datetime.fromisoformat(event["at"].replace("Z", "+00:00")).timestamp()
    if not started - 60 <= at <= now + 60:
        fail(f"seq {event['seq']} ({event['type']}, clock {event['clock']}) carries a time outside this case "
             f"(host clock {started}..{now}): {event['at']}")
    if event["clock"] == "unsynced":
        fail(f"seq {event['seq']} ({event['type']}) arrived unsynced after the clock was set: {event['at']}")
passages = [e for e in events if e["type"] == "lane.passage"]
if len(passages) < 2 or any(e["clock"] != "corrected" for e in passages[:2]):
    fail(f"the two cars' passages are not marked corrected: {[(e['seq'], e['clock'], e['at']) for e in passages]}")
print(f"{len(events)} events after seq {before}, all stamped within this case's time: "
      + ", ".join(f"{n} {c}" for c, n in sorted(clocks.items())))
PY
)" || { WHY="clock: $OUT"; return 1; }
    echo "      $OUT"
    seq_promise
}

purged() {
    check -t 300 "apt remove: the service stopped, its lines free, outbox and config kept" "apt-get remove -y parkwise-agent > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }; cat /tmp/apt.log; ! systemctl is-active parkwise-agent && wait_free pi4 17 && [ -d /var/lib/parkwise-agent/outbox ] && [ -f $CONFIG ] && grep 'the outbox in /var/lib/parkwise-agent/outbox' /tmp/apt.log" &&
    check -t 300 "apt purge: state, config, enablement and unit gone; user parkwise and group gpio stay (Debian policy)" "apt-get purge -y parkwise-agent > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }; [ ! -e /var/lib/parkwise-agent ] && [ ! -e /etc/parkwise-agent ] && [ ! -e /etc/systemd/system/multi-user.target.wants/parkwise-agent.service ] && [ ! -e /lib/systemd/system/parkwise-agent.service ] && getent passwd parkwise && getent group gpio && case \"\$(dpkg-query -W -f='\${Status}' parkwise-agent 2>/dev/null)\" in '' | *not-installed) ;; *) false ;; esac; rc=\$?; systemctl status parkwise-agent --no-pager; [ \$rc = 0 ]"
}

# --- the bridge: its .deb, run by systemd against Debian's PostgreSQL in the guest (guest/system/backend) ---------------
bprop() { printf '%s' "\$(systemctl show -p $1 --value parkwise-bridge)"; }   # a property of the bridge's unit
BACKEND=". /sim/system/backend"

bridge_installed() {
    check -t 600 "apt install ./parkwise-bridge_..._amd64.deb: its Depends from the root's cache, no network" "apt-get install -y --no-install-recommends $BRIDGE_DEB > /tmp/apt.log 2>&1; rc=\$?; cat /tmp/apt.log; [ \$rc = 0 ]" || return 1
    grep -qF "sudo systemctl enable --now parkwise-bridge" <<<"$OUT" || { WHY="no closing hint from the postinst"$'\n'"$OUT"; return 1; }
    check "user parkwise-bridge; /etc/parkwise-bridge 0750, environment 0600 root, bridge.yaml 0640; unit not enabled, not running" "id parkwise-bridge && stat -c '%n %U:%G %a' /etc/parkwise-bridge /etc/parkwise-bridge/* && [ \"\$(stat -c %U:%G:%a /etc/parkwise-bridge)\" = root:parkwise-bridge:750 ] && [ \"\$(stat -c %U:%G:%a /etc/parkwise-bridge/environment)\" = root:root:600 ] && [ \"\$(stat -c %U:%G:%a /etc/parkwise-bridge/bridge.yaml)\" = root:parkwise-bridge:640 ] && [ \"\$(systemctl is-enabled parkwise-bridge)\" = disabled ] && ! systemctl is-active parkwise-bridge && parkwise-bridge check-config /etc/parkwise-bridge/bridge.yaml"
}

bridge_started() {
    check -t 120 "the backend's database: test schema, roles; parkwise-bridge migrate --grant as the tables' owner" "$BACKEND; make_database" || return 1
    { grep -q "applied " <<<"$OUT" && grep -q "GRANT" <<<"$OUT"; } || { WHY="migrate --grant said no 'applied' step or no GRANT"$'\n'"$OUT"; return 1; }
    check "the settings edited (DATABASE_URL: the bridge's role; sites: [uniandes]), check-config ok" "$BACKEND; configure_bridge" &&
    check -t 200 "systemctl enable --now: running as parkwise-bridge, run --migrate finds nothing to do, the gate's status lands in sensor_devices" "$BACKEND; t0=\$(now_ms); systemctl enable --now parkwise-bridge && wait_sql 150 1 \"SELECT count(*) FROM sensor_devices WHERE site = 'uniandes' AND device = 'sys-gate' AND online\" && echo first_row_ms=\$((\$(now_ms) - t0)); rc=\$?; journalctl -u parkwise-bridge --no-pager -o short-monotonic | tail -n 20; [ \$rc = 0 ] && [ $(bprop SubState) = running ] && [ \"\$(ps -o user= -p $(bprop MainPID))\" = parkwise-bridge ]" || return 1
    timed "bridge: enable --now to the first row" "$(field first_row_ms) ms"
    grep '^\[' <<<"$OUT" | sed 's/^/      /'   # the bridge's start, in its journal (seconds since the guest's boot)
}

bridge_events() {
    check -t 120 "a car through the gate: its events land in sensor_events" "$BACKEND; echo \$(next_seq) > /root/bridge.from && { $(passage); } && wait_landed 60 \$(cat /root/bridge.from)"
}

bridge_postgres_restart() {
    check -t 120 "systemctl restart postgresql, then a car: its events land, the bridge not restarted (same process)" "$BACKEND; pid=$(bprop MainPID); from=\$(next_seq); systemctl restart postgresql && t0=\$(now_ms) && { $(passage); } && wait_landed 90 \$from && echo resumed_ms=\$((\$(now_ms) - t0)) && [ $(bprop MainPID) = \$pid ] && [ $(bprop NRestarts) = 0 ]" || return 1
    timed "bridge: PostgreSQL restarted to a new car's row" "$(field resumed_ms) ms (the car's own 1.8 s included)"
    check -t 200 "PostgreSQL down while a car passes: held, and in once it is back, nothing lost; the journal says both" "$BACKEND; pid=$(bprop MainPID); from=\$(next_seq); systemctl stop postgresql && { $(passage); } && systemctl start postgresql && t0=\$(now_ms) && wait_landed 120 \$from && echo resumed_ms=\$((\$(now_ms) - t0)) && [ $(bprop MainPID) = \$pid ] && journalctl -u parkwise-bridge --no-pager -o cat | grep -e 'database unavailable, holding received messages' -e 'database available again'" || return 1
    timed "bridge: PostgreSQL started to the held car's row" "$(field resumed_ms) ms"
    grep -q "database available again" <<<"$OUT" || { WHY="the bridge's journal does not say 'database available again'"$'\n'"$OUT"; return 1; }
}

bridge_config_error() {
    check "a setting made invalid: systemctl restart fails (no READY: Type=notify), exit 78, not restarted, systemctl status says why" "cp /etc/parkwise-bridge/bridge.yaml /root/bridge.yaml.good; echo 'snapshot_every: often' >> /etc/parkwise-bridge/bridge.yaml; systemctl restart parkwise-bridge; rc=\$?; echo rc=\$rc status=$(bprop ExecMainStatus) state=$(bprop SubState) restarts=$(bprop NRestarts); systemctl status --no-pager parkwise-bridge > /tmp/status.txt; cat /tmp/status.txt; [ \$rc != 0 ] && [ $(bprop ExecMainStatus) = 78 ] && [ $(bprop SubState) = failed ] && [ $(bprop NRestarts) = 0 ] && grep -F 'Status: \"exit 78: /etc/parkwise-bridge/bridge.yaml:' /tmp/status.txt" &&
    check "the setting fixed: systemctl start waits for READY (the broker reached), running" "cp /root/bridge.yaml.good /etc/parkwise-bridge/bridge.yaml && systemctl start parkwise-bridge && [ $(bprop SubState) = running ] && journalctl -u parkwise-bridge -o cat -n 20 | grep 'bridge running'"
}

bridge_security() {
    check "systemd-analyze security parkwise-bridge (the running unit): exposure 2.0 or less" "systemd-analyze security --no-pager --threshold=20 parkwise-bridge > /tmp/sec.log; rc=\$?; tail -n 1 /tmp/sec.log; [ \$rc = 0 ]" || return 1
    timed "bridge: systemd-analyze security in the guest" "$(sed -n 's/.*Overall exposure level for parkwise-bridge.service: //p' <<<"$OUT")"
}

bridge_purged() {
    check -t 300 "apt purge parkwise-bridge: stopped, settings, unit and enablement gone, only what the administrator added kept; user stays; the backend's rows untouched" "$BACKEND; apt-get purge -y parkwise-bridge > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }; ! systemctl is-active parkwise-bridge && [ ! -e /etc/parkwise-bridge/environment ] && [ ! -e /etc/parkwise-bridge/bridge.yaml ] && [ \"\$(ls -A /etc/parkwise-bridge 2>/dev/null)\" = \"\$(cat /root/bridge-added 2>/dev/null)\" ] && [ ! -e /lib/systemd/system/parkwise-bridge.service ] && [ ! -e /etc/systemd/system/multi-user.target.wants/parkwise-bridge.service ] && getent passwd parkwise-bridge && [ \"\$(sql 'SELECT count(*) > 0 FROM sensor_events')\" = t ] && case \"\$(dpkg-query -W -f='\${Status}' parkwise-bridge 2>/dev/null)\" in '' | *not-installed) ;; *) false ;; esac"
}

# --- commissioning: the board the purge left blank, to doctor green (hardware/COMMISSIONING.md, "From a blank board") --
COMMISSION=". /sim/system/commission"
CHAIN_MS=0 CHAIN_CMDS=0
# chain_step SECONDS WHAT FUNCTION: one step of the installer's path (guest/system/commission), timed, commands counted.
chain_step() {
    check -t "$1" "$2" "$COMMISSION; timed_step $3" || return 1
    local ms n
    ms="$(field step_ms)"; n="$(grep -c '^+ ' <<<"$OUT")"
    CHAIN_MS=$((CHAIN_MS + ms)); CHAIN_CMDS=$((CHAIN_CMDS + n))
    timed "commissioning: $3" "$n command(s), $ms ms"
}

commissioned() {
    check -t 120 "the site's broker, once per site (TLS listeners, passwords, ACL); the bridge logs in" "$COMMISSION; site_broker" &&
    chain_step 30 "add the repository: its .sources file, the key inline" add_repository &&
    chain_step 600 "apt update, apt install parkwise-agent from it" install_agent &&
    check "installed from the ParkWise repository, not a file" "apt-cache policy parkwise-agent; apt-cache policy parkwise-agent | grep -A1 '^ \*\*\* ' | grep -F 'file:/var/cache/parkwise-sim/repo bookworm/main amd64 Packages'" &&
    chain_step 60 "export-config: level P1 zone A from the backend's spots" export_config &&
    chain_step 60 "provision.sh uniandes p1-a with those spots (broker host)" provision &&
    chain_step 30 "the bundle unpacked on the board" unbundle &&
    check "the config: broker, certificate and 20 spots, every input UNSET" "cat $CONFIG; grep -c 'input: UNSET' $CONFIG | grep -x 20 && grep -F 'mqtts://localhost:8884' $CONFIG" &&
    chain_step 300 "walk-test --learn: 20 spots covered in turn" learn_wiring &&
    check "check-config with the backend's spot list: ok; the hand-over report lists the 20" "parkwise-agent check-config $CONFIG --spots /root/spots.txt && cat /root/walk-learn-p1-a.txt && grep -F '20 of 20 learned' /root/walk-learn-p1-a.txt" &&
    chain_step 120 "systemctl enable --now parkwise-agent" start_service &&
    chain_step 120 "doctor, as user parkwise: exit 0" doctor || return 1
    grep -q 'came back through a subscription' <<<"$OUT" || { WHY="doctor passed without the broker's round trip"$'\n'"$OUT"; return 1; }
    timed "commissioning: blank board to doctor green" "$CHAIN_CMDS commands, $((CHAIN_MS / 1000)).$(printf '%03d' $((CHAIN_MS % 1000))) s"
    check -t 90 "live: the board online in the backend's sensor_devices" "$BACKEND; wait_sql 60 1 \"SELECT count(*) FROM sensor_devices WHERE site = 'uniandes' AND device = 'p1-a' AND online\"" &&
    check -t 90 "a car parks on P1-A-05 (GPIO8): the backend's spot turns occupied" "$BACKEND; pull pi4 8 up; wait_sql 60 1 \"SELECT count(*) FROM spots WHERE id = 'P1-A-05' AND status = 'occupied'\""
}

boot || cannot_run "the VM did not come up (see its console above)"
if [[ -n "${PARKWISE_SYSTEST_SHELL:-}" ]]; then   # by hand: guest commands from stdin, one a line, before the cases
    while IFS= read -r line; do g -t 600 "$line"; echo "[exit $?]"; printf '%s' "$OUT"; done
fi
run_case "booted: systemd as PID 1, gpio-sim chips, Debian's mosquitto, no network" booted ""
run_case "apt install of the .deb, Depends from the cached root; postinst: user, groups, config, udev rule" installed ""
run_case "config edited, systemctl enable --now: READY (timed)" ready ""
run_case "publishes: online status, a lane.passage from the gpio-sim lines" publishes ""
run_case "reads the lines as user parkwise (group gpio through the udev rule), not root" as_parkwise ""
run_case "outbox inside the sandbox (ProtectSystem=strict, StateDirectory)" outbox_sandbox ""
run_case "watchdog: SIGSTOP -> killed and restarted in time; every seq arrives or is declared" watchdog "kill -CONT \$(systemctl show -p MainPID --value parkwise-agent) 2>/dev/null; true"
run_case "journalctl -p warning shows the agent's warnings, at their priority" journal_warnings ""
run_case "a config made invalid: exit 78, not restarted, systemctl status says why" config_error "[ -f /root/agent.yaml.good ] && cp /root/agent.yaml.good $CONFIG; systemctl start parkwise-agent; true"
run_case "another exit (its lines busy: 1): restarted every RestartSec until it heals, the holder named" crash_loop "kill \$(cat /tmp/gpiomon.pid) 2>/dev/null; systemctl start parkwise-agent; true"
run_case "upgrade to a newer build: restarted, config/outbox/seq kept" upgraded ""
run_case "reboot of the VM (same disk): enabled at boot, the seq promise kept" rebooted ""
run_case "MemoryMax=64M holds: the campus config (157 inputs) simulated at high speed" memory_max "rm -rf /etc/systemd/system/parkwise-agent.service.d; systemctl daemon-reload; systemctl restart parkwise-agent; true"
run_case "no RTC: booted with the clock behind, broker away; NTP sets the clock: waiting events corrected, none with a wrong time" clock_behind "systemctl unmask mosquitto; systemctl start mosquitto parkwise-sim-sub; true"
run_case "the bridge's .deb: apt install, postinst: user, settings from the templates, unit not enabled" bridge_installed ""
run_case "the bridge configured, enable --now against Debian's PostgreSQL: migrated, running, first row (timed)" bridge_started ""
run_case "the bridge: the gate's events land in the backend's tables" bridge_events ""
run_case "the bridge across PostgreSQL restarts: resumes by itself, nothing lost (timed)" bridge_postgres_restart ""
run_case "the bridge's unit is Type=notify: a bad setting fails the start, exit 78, said in systemctl status" bridge_config_error "[ -f /root/bridge.yaml.good ] && cp /root/bridge.yaml.good /etc/parkwise-bridge/bridge.yaml; systemctl start parkwise-bridge; true"
run_case "the bridge's unit hardened: systemd-analyze security in the guest <= 2.0" bridge_security ""
run_case "remove, then purge: what Debian policy says stays" purged ""
run_case "commissioning the blank board: repository, install, export, provision, learn, doctor green; live (timed)" commissioned "pull pi4 8 down; true"
run_case "the bridge purged: what Debian policy says stays" bridge_purged ""
finish
