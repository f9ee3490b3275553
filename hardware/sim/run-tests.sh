#!/usr/bin/env bash
# The real-kernel GPIO tests (issue 5): boots Debian bookworm's kernel under qemu TCG with gpio-sim chips that look
# like a Pi 4 (pinctrl-bcm2711), a Pi 5 (pinctrl-rp1) and an MCP23017, runs the release agent binary inside with
# mosquitto on 127.0.0.1, drives the lines from here through the VM's second serial port and checks what the agent
# publishes. Two passes, one fresh VM each: the agent built against libgpiod 1.6 (the host's, Debian 12) and the agent
# built against libgpiod 2.x (compiled from PyPI's gpiod sdist by libgpiod2.sh); every output line of a pass is
# prefixed with its build. Ends with one line "N passed, M failed" over both passes; exits non-zero if anything
# failed or could not run (a pass that cannot run counts as a failure: nothing is ever skipped).
#
#   bash hardware/sim/run-tests.sh            # the tests, both builds
#   bash hardware/sim/run-tests.sh --bench    # the tests, then the in-VM benchmark (latency, edges/s), per build
#
# PARKWISE_VM_ARCH=arm64 runs the same cases on Debian's arm64 kernel (qemu-system-aarch64 -M virt, TCG) with the
# cross-built arm64 agents of deploy/package/cross-build.sh (needs root): build 1 is Raspberry Pi OS bookworm's
# (libgpiod 1.6, glibc 2.36), build 2 trixie's (libgpiod 2.x, and its suite's glibc 2.41 in the guest); the guest's
# programs and libraries are Debian bookworm's arm64 packages (setup.sh, initramfs.sh).
#
# PARKWISE_VM_ARCH         x86_64 (default) or arm64
# PARKWISE_VM_LIBGPIOD     which builds: "1 2" (default), "1" or "2"
# PARKWISE_VM_CACHE        downloads, kernel, modules, libgpiod 2 (default ~/.cache/parkwise-vm); reused by later runs
# PARKWISE_VM_BUILD        swift scratch path of the libgpiod 1.6 build (default .build/vm-gpiod1 in the package)
# PARKWISE_VM_BUILD_GPIOD2 swift scratch path of the libgpiod 2.x build (default .build/vm-gpiod2 in the package)
# PARKWISE_AGENT           a libgpiod 1.6 agent binary to test instead of building one (arm64: with
#                          PARKWISE_AGENT_SYSROOT, where its libraries are)
# PARKWISE_AGENT_GPIOD2    a libgpiod 2.x agent binary to test instead of building one (arm64: with
#                          PARKWISE_AGENT_GPIOD2_SYSROOT)
# PARKWISE_VM_CASES        only these cases, by function name (e.g. "line_busy chip_gone"): to try a change quickly;
#                          CI runs them all
# shellcheck disable=SC2317  # (the cases: functions called by name, by vm.sh's run_case)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BENCH=0
[[ "${1:-}" == "--bench" ]] && BENCH=1
BUILDS="${PARKWISE_VM_LIBGPIOD:-1 2}"
ARCH="${PARKWISE_VM_ARCH:-x86_64}"
[[ $ARCH == x86_64 || $ARCH == arm64 ]] || { echo "vm-tests: CANNOT RUN: PARKWISE_VM_ARCH='$ARCH': expected x86_64 or arm64" >&2; exit 1; }
PFX=""
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parkwise-vm.XXXXXX")"
T0=$SECONDS
# shellcheck source=hardware/sim/vm.sh
. "$HERE/vm.sh"   # vm_up, g, vm_down, check, run_case
VM_CASES="${PARKWISE_VM_CASES:-}"

finish() { vm_finish vm-tests; }
# cannot_run REASON: nothing can run at all (host tools, VM parts): counts a failure and ends here.
cannot_run() { echo "vm-tests: CANNOT RUN: $*" >&2; FAIL=$((FAIL + 1)); finish; }
# pass_cannot_run REASON: this build's pass cannot (go on) run: counts a failure; the other pass still runs.
pass_cannot_run() { echo "${PFX}CANNOT RUN: $*"; FAIL=$((FAIL + 1)); return 1; }

# --- host tools, cached VM parts ----------------------------------------------------------------------------------
for build in $BUILDS; do
    [[ "$build" == 1 || "$build" == 2 ]] || cannot_run "PARKWISE_VM_LIBGPIOD='$BUILDS': expected 1, 2 or \"1 2\""
done
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
# qemu for the VM; strace in the guest (a case holds the agent's syncs with its fault injection; arm64's is Debian's
# arm64 package, setup.sh's); arm64's gpio-sim modules are built with Debian's cross compiler.
needs=(qemu-system-x86_64:qemu-system-x86 strace:strace)
[[ $ARCH == arm64 ]] && needs=(qemu-system-aarch64:qemu-system-arm aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu)
for need in "${needs[@]}"; do
    tool=${need%%:*} package=${need#*:}
    command -v "$tool" >/dev/null && continue
    echo "vm-tests: installing $package" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package" >/dev/null \
        || { as_root apt-get update -q >/dev/null && as_root env DEBIAN_FRONTEND=noninteractive \
                 apt-get install -y -q --no-install-recommends "$package" >/dev/null; } \
        || cannot_run "$tool is missing and could not be installed (apt-get install $package)"
done
if [[ $ARCH == x86_64 ]] && ! grep -q 'Candidate: [0-9]' <<<"$(apt-cache policy linux-image-amd64 2>/dev/null)"; then
    as_root apt-get update -q >/dev/null || cannot_run "apt-get update failed"
fi
# (Its output in a file, the cache directory its last line: no build piped into another program.)
bash "$HERE/setup.sh" >"$WORK/setup.out" || cannot_run "VM setup failed (see above)"
{ CACHE="$(tail -n 1 "$WORK/setup.out")" && [[ -f "$CACHE/vmlinux" || -f "$CACHE/Image" ]]; } \
    || cannot_run "VM setup failed (see above)"
[[ $ARCH == x86_64 ]] && export PARKWISE_VM_CACHE="$CACHE"
echo "vm-tests: $ARCH, cache $CACHE ($((SECONDS - T0)) s)" >&2

# --- the agents: both built before the first VM boots -------------------------------------------------------------------
declare -A AGENTS=() SONAMES=([1]=libgpiod.so.2 [2]=libgpiod.so.3) NAMES=([1]="libgpiod 1.6" [2]="libgpiod 2.x")
declare -A BUILD_ERROR=() SYSROOTS=()
[[ $ARCH == arm64 ]] && NAMES=([1]="arm64 bookworm, libgpiod 1.6" [2]="arm64 trixie, libgpiod 2.x")
for build in $BUILDS; do
    if [[ $ARCH == arm64 ]]; then
        # The cross build of deploy/package/cross-build.sh (cached in ~/.cache/parkwise-cross; a second call reuses
        # the binary built from the same sources) and its suite's sysroot, where its libraries are.
        suite=bookworm; [[ $build == 2 ]] && suite=trixie
        AGENT="${PARKWISE_AGENT:-}"; SYSROOTS[$build]="${PARKWISE_AGENT_SYSROOT:-}"
        [[ $build == 2 ]] && { AGENT="${PARKWISE_AGENT_GPIOD2:-}"; SYSROOTS[$build]="${PARKWISE_AGENT_GPIOD2_SYSROOT:-}"; }
        if [[ -z "$AGENT" ]]; then
            echo "vm-tests: the arm64 agent for $suite (deploy/package/cross-build.sh $suite)" >&2
            if as_root bash "$REPO/deploy/package/cross-build.sh" "$suite" > "$WORK/cross-$suite.out" 2> "$WORK/cross-$suite.log" \
                    && AGENT="$(tail -n 1 "$WORK/cross-$suite.out")" && [[ -n "$AGENT" ]]; then
                # shellcheck source=deploy/package/cross-env.sh
                SYSROOTS[$build]="$(source "$REPO/deploy/package/cross-env.sh" && cross_sysroot "$suite")"
            else
                tail -n 30 "$WORK/cross-$suite.log"; AGENT=""
                BUILD_ERROR[$build]="the arm64 agent for $suite does not build (deploy/package/cross-build.sh $suite)"
            fi
        fi
        [[ -n "$AGENT" && -z "${SYSROOTS[$build]}" ]] && BUILD_ERROR[$build]="no sysroot for the arm64 agent $AGENT"
    elif [[ $build == 1 ]]; then
        AGENT="${PARKWISE_AGENT:-}"
        if [[ -z "$AGENT" ]]; then
            BUILD="${PARKWISE_VM_BUILD:-$REPO/.build/vm-gpiod1}"
            echo "vm-tests: building the libgpiod 1.6 agent (release, static Swift runtime) in $BUILD" >&2
            # PARKWISE_LIBGPIOD=1: the host's libgpiod 1.6, whatever PKG_CONFIG_PATH this shell has.
            if (cd "$REPO" && env -u PKG_CONFIG_PATH PARKWISE_LIBGPIOD=1 swift build -c release --static-swift-stdlib \
                    --scratch-path "$BUILD" --product parkwise-agent) > "$WORK/build-gpiod1.log" 2>&1; then
                AGENT="$BUILD/release/parkwise-agent"
            else
                tail -n 30 "$WORK/build-gpiod1.log"; BUILD_ERROR[1]="the libgpiod 1.6 agent does not build"
            fi
        fi
    else
        AGENT="${PARKWISE_AGENT_GPIOD2:-}"
        if [[ -z "$AGENT" ]]; then
            echo "vm-tests: libgpiod 2.x from PyPI's gpiod sdist, and the agent against it" >&2
            if bash "$HERE/libgpiod2.sh" 2> "$WORK/build-gpiod2.log" >"$WORK/gpiod2.out" && AGENT="$(tail -n 1 "$WORK/gpiod2.out")" && [[ -n "$AGENT" ]]; then :; else
                tail -n 30 "$WORK/build-gpiod2.log"; AGENT=""
                BUILD_ERROR[2]="libgpiod 2.x or the agent against it does not build (hardware/sim/libgpiod2.sh)"
            fi
        fi
    fi
    [[ -n "$AGENT" && -z "${BUILD_ERROR[$build]:-}" && ! -x "$AGENT" ]] && BUILD_ERROR[$build]="no agent binary at $AGENT"
    AGENTS[$build]="$AGENT"
done

# --- one pass: a fresh VM with one agent ---------------------------------------------------------------------------------
# --- the cases ----------------------------------------------------------------------------------------------------------
T=parkwise/v1/vm

command_channel() {  # the harness itself: 40 long command lines arrive whole while orphans exit in the guest
    check "orphans exiting every few ms" "(while true; do (usleep 3000 &); usleep 2000; done) > /dev/null 2>&1 & echo \$! > /tmp/orphans.pid" || return 1
    local i
    for i in $(seq 1 40); do
        { check "line $i whole" "echo line-$i | sed s/line/got/ | grep -x got-$i > /dev/null && echo $i-$(printf '%0200d' 0) | cut -c1-20" &&
          [[ "$OUT" == "$(printf '%s-%0200d' "$i" 0 | cut -c1-20)"$'\n' ]]; } || { WHY="${WHY:-line $i: $(printf '%q' "$OUT")}"; return 1; }
    done
}

spot_changes() {  # Pi 4 profile: GPIO17 and pin 13 (= GPIO27) on pinctrl-bcm2711 (gpiochip1)
    check "agent starts" "start spots pi4-spots.yaml" &&
    check "lines requested with the agent as consumer" "wait_used pi4 17 && wait_used pi4 27 && info pi4 17 | grep parkwise-agent && info pi4 27 | grep parkwise-agent" &&
    check "free at start (retained)" "retained $T/pi4-spots/state/spot/P1-A-01 | grep '\"state\":\"free\"'" &&
    check "GPIO17 high -> spot.occupied" "pull pi4 17 up && wait_msg 10 $T/pi4-spots/events '\"spot.occupied\"' '\"P1-A-01\"'" &&
    check "retained occupied" "wait_retained 5 $T/pi4-spots/state/spot/P1-A-01 '\"state\":\"occupied\"'" &&
    check "status: GPIO17 high, one change" "\$AGENT status --json --outbox /tmp/outbox-spots > /tmp/status.json; grep -q '\"changes\":1,\"feeds\":\"spot P1-A-01\",\"filtered\":true,\"health\":\"ok\",\"input\":\"GPIO17\",\"last_change\":\"[^\"]*\",\"last_change_ago_s\":[0-9.e-]*,\"raw\":true' /tmp/status.json || { cat /tmp/status.json; false; }" &&
    check "pin 13 high -> spot.occupied P1-A-02" "pull pi4 27 up && wait_msg 10 $T/pi4-spots/events '\"spot.occupied\"' '\"P1-A-02\"'" &&
    check "level count 2 from spots" "wait_retained 5 $T/pi4-spots/state/level/P1 '\"occupied\":2'" &&
    check "GPIO17 low -> spot.vacated" "pull pi4 17 down && wait_msg 10 $T/pi4-spots/events '\"spot.vacated\"' '\"P1-A-01\"'" &&
    check "retained free" "wait_retained 5 $T/pi4-spots/state/spot/P1-A-01 '\"state\":\"free\"'" &&
    check "a 30 ms blip is filtered (delayed_on 1s)" "pull pi4 17 up; usleep 30000; pull pi4 17 down; sleep 1.5; [ \$(msgs $T/pi4-spots/events '\"P1-A-01\"' | wc -l) -eq 2 ]" &&
    check "SIGTERM: clean stop, lines released, offline status" "stop spots && wait_free pi4 17 && wait_free pi4 27 && retained $T/pi4-spots/status | grep '\"offline\"'"
}

lane_passage() {  # two loops a=GPIO22, b=GPIO23
    check "agent starts" "start lane pi4-lane.yaml && wait_used pi4 22 && wait_used pi4 23" &&
    check "a, a+b, b -> lane.passage outside -> P1" "pull pi4 22 up; usleep 300000; pull pi4 23 up; usleep 300000; pull pi4 22 down; usleep 300000; pull pi4 23 down; wait_msg 10 $T/pi4-lane/events '\"lane.passage\"' '\"from\":\"outside\"' '\"to\":\"P1\"'" &&
    check "b, b+a, a -> lane.passage P1 -> outside" "pull pi4 23 up; usleep 300000; pull pi4 22 up; usleep 300000; pull pi4 23 down; usleep 300000; pull pi4 22 down; wait_msg 10 $T/pi4-lane/events '\"lane.passage\"' '\"from\":\"P1\"' '\"to\":\"outside\"'" &&
    check "exactly two passages" "sleep 0.5; [ \$(msgs $T/pi4-lane/events lane.passage | wc -l) -eq 2 ] || msgs $T/pi4-lane/events" &&
    check "clean stop" "stop lane && wait_free pi4 22"
}

bias_active_low() {  # MCP23017 (gpiochip0, device gpio-sim.0, unnamed lines): mcp23017:GPA2, gpio-sim.0:GPB1
    check "agent starts" "start mcp mcp-bias.yaml && wait_used mcp 2 && wait_used mcp 9" &&
    check "gpioinfo: GPA2 active-low with pull-up" "info mcp 2 | grep parkwise-agent | grep active-low | grep pull-up" &&
    check "gpioinfo: GPB1 (offset 9) pull-down" "info mcp 9 | grep parkwise-agent | grep active-high | grep pull-down" &&
    check "the pull-up holds GPA2 high at rest" "[ \$(value mcp 2) = 1 ]" &&
    check "active-low spot reads free at rest" "retained $T/mcp-bias/state/spot/P1-A-01 | grep '\"state\":\"free\"'" &&
    check "pull-down spot free at rest" "retained $T/mcp-bias/state/spot/P1-A-02 | grep '\"state\":\"free\"'" &&
    check "GPA2 pulled low -> occupied" "pull mcp 2 down && wait_msg 10 $T/mcp-bias/events '\"spot.occupied\"' '\"P1-A-01\"'" &&
    check "GPB1 high -> occupied" "pull mcp 9 up && wait_msg 10 $T/mcp-bias/events '\"spot.occupied\"' '\"P1-A-02\"'" &&
    check "GPA2 back high -> vacated" "pull mcp 2 up && wait_msg 10 $T/mcp-bias/events '\"spot.vacated\"' '\"P1-A-01\"'" &&
    check "clean stop" "stop mcp && wait_free mcp 2"
}

initial_state() {  # GPIO5 high before the agent starts
    check "line high before start" "pull pi4 5 up && [ \$(value pi4 5) = 1 ]" &&
    check "agent starts" "start init pi4-initial.yaml && wait_used pi4 5" &&
    check "retained state occupied at once" "retained $T/pi4-initial/state/spot/P1-A-05 | grep '\"state\":\"occupied\"'" &&
    check "no spot.occupied event" "sleep 0.5; no_msg $T/pi4-initial/events spot.occupied" &&
    check "level counts it" "retained $T/pi4-initial/state/level/P1 | grep '\"occupied\":1'" &&
    check "status: GPIO5 high, no change since start" "\$AGENT status --json --outbox /tmp/outbox-init > /tmp/status.json; grep -q '\"changes\":0,\"feeds\":\"spot P1-A-05\",\"filtered\":true,\"health\":\"ok\",\"input\":\"GPIO5\",\"raw\":true' /tmp/status.json || { cat /tmp/status.json; false; }" &&
    check "clean stop" "stop init"
}

line_busy() {  # gpiomon holds GPIO6
    check "gpiomon holds GPIO6" "gpiomon \$(chip pi4) 6 > /dev/null 2>&1 & echo \$! > /tmp/gpiomon.pid; wait_used pi4 6 && info pi4 6 | grep gpiomon" &&
    check "its only line busy: the agent exits 1 (systemd tries again) naming 'gpiomon'" "timeout 60 \$AGENT run --config /sim/configs/pi4-busy.yaml --broker mqtt://127.0.0.1:1883 --outbox /tmp/outbox-busy > /tmp/busy.log 2>&1; rc=\$?; cat /tmp/busy.log; echo rc=\$rc; [ \$rc = 1 ] && grep -q \"in use by 'gpiomon'\" /tmp/busy.log" &&
    check "one line of two busy: the agent runs, the busy spot a fault (lost), 'gpiomon' named in its log" "start busy pi4-busy-two.yaml && wait_used pi4 13 && wait_msg 10 $T/pi4-busy2/events '\"sensor.fault\"' '\"lost\"' 'spot P1-A-06' && grep \"in use by 'gpiomon'\" /tmp/busy.log | grep 'runs without it' >/dev/null" &&
    check "the free line works meanwhile" "pull pi4 13 up && wait_msg 10 $T/pi4-busy2/events '\"spot.occupied\"' '\"P1-A-13\"'" &&
    check "gpiomon gone: the agent takes the line within its retry, the spot recovers" "kill \$(cat /tmp/gpiomon.pid) && n=0; until info pi4 6 | grep parkwise-agent >/dev/null || [ \$n -gt 1500 ]; do n=\$((n + 1)); usleep 20000; done; info pi4 6 | grep parkwise-agent && wait_msg 10 $T/pi4-busy2/events '\"sensor.recovered\"' 'spot P1-A-06'" &&
    check "its edges count from then on" "pull pi4 6 up && wait_msg 10 $T/pi4-busy2/events '\"spot.occupied\"' '\"P1-A-06\"'" &&
    check "diagnose meanwhile: refused, the agent named as holder" "timeout 60 \$AGENT diagnose --config /sim/configs/pi4-busy.yaml > /tmp/busy-diag.log 2>&1; rc=\$?; cat /tmp/busy-diag.log; [ \$rc = 1 ] && grep -q \"in use by 'parkwise-agent': the agent is running\" /tmp/busy-diag.log" &&
    check "clean stop" "stop busy"
}

label_resolution() {  # board raspberry-pi-5: GPIO17 on pinctrl-rp1 (gpiochip2; arm64: gpiochip3), not on the Pi 4 chip's GPIO17
    check "agent starts" "start pi5 pi5-label.yaml && wait_used pi5 17" &&
    check "the rp1 chip is not gpiochip0" "[ \$(chip pi5) != gpiochip0 ] && gpiodetect | grep \"\$(chip pi5) \[pinctrl-rp1\]\"" &&
    check "pinctrl-bcm2711 GPIO17 left alone" "info pi4 17; ! info pi4 17 | grep '\\[used' >/dev/null" &&
    check "rp1 GPIO17 high -> spot.occupied" "pull pi5 17 up && wait_msg 10 $T/pi5-label/events '\"spot.occupied\"' '\"P1-A-17\"'" &&
    check "rp1 GPIO17 low -> spot.vacated" "pull pi5 17 down && wait_msg 10 $T/pi5-label/events '\"spot.vacated\"' '\"P1-A-17\"'" &&
    check "clean stop" "stop pi5"
}

auto_ambiguous() {  # board auto, no device tree, GPIO17 on two chips: refused with both named
    check "agent exits 78 naming both chips" "timeout 60 \$AGENT run --config /sim/configs/auto-ambiguous.yaml --broker mqtt://127.0.0.1:1883 --outbox /tmp/outbox-auto > /tmp/auto.log 2>&1; rc=\$?; cat /tmp/auto.log; echo rc=\$rc; [ \$rc = 78 ] && grep pinctrl-bcm2711 /tmp/auto.log | grep pinctrl-rp1 >/dev/null"
}

inventory() {  # GPIOInventory.lines() through `parkwise-agent lines`, against gpioinfo
    check "lines: every chip with its device, the config's spots mapped" "\$AGENT lines --config /sim/configs/mcp-bias.yaml > /tmp/lines.out 2>&1; rc=\$?; cat /tmp/lines.out; [ \$rc = 0 ] && grep 'mcp23017' /tmp/lines.out | grep 'gpio-sim.0' >/dev/null && grep -q pinctrl-rp1 /tmp/lines.out && grep -q pinctrl-bcm2711 /tmp/lines.out && grep -q P1-A-01 /tmp/lines.out && grep -q P1-A-02 /tmp/lines.out" &&
    check "lines: as many lines as gpioinfo" "[ \$(grep -c -E 'GPIO[0-9]+' /tmp/lines.out) -ge \$(gpioinfo | grep -c -E '\"GPIO[0-9]+\"') ] || { gpioinfo | grep -c GPIO; grep -c GPIO /tmp/lines.out; false; }"
}

chip_gone() {  # the MCP23017 removed under the agent: both spots faulted (lost), then exit 1 so systemd restarts it
    check "agent starts" "(\$AGENT run --config /sim/configs/mcp-bias.yaml --broker mqtt://127.0.0.1:1883 --outbox /tmp/outbox-gone > /tmp/gone.log 2>&1; echo \$? > /tmp/gone.rc) & n=0; until grep 'agent running' /tmp/gone.log >/dev/null || [ \$n -gt 600 ]; do n=\$((n + 1)); usleep 50000; done; grep 'agent running' /tmp/gone.log && wait_used mcp 2 && wait_used mcp 9" &&
    check "chip removed: sensor.fault lost for both spots" "echo 0 > \$SIM/mcp/live; wait_msg 10 $T/mcp-bias/events '\"sensor.fault\"' '\"lost\"' 'spot P1-A-01' && wait_msg 10 $T/mcp-bias/events '\"sensor.fault\"' '\"lost\"' 'spot P1-A-02'" &&
    check "the agent exits 1" "n=0; while [ ! -f /tmp/gone.rc ] && [ \$n -lt 200 ]; do n=\$((n + 1)); usleep 50000; done; cat /tmp/gone.log; [ \"\$(cat /tmp/gone.rc 2>/dev/null)\" = 1 ] && grep -q 'every GPIO input is lost' /tmp/gone.log"
}

late_edge() {  # GPIO4 (delayed_on 2s) ends before its deadline while the agent is held in GPIO7's outbox sync (3 s)
    check "agent starts" "start late pi4-late.yaml && wait_used pi4 4 && wait_used pi4 7" &&
    check "strace holds every outbox sync 3 s" "strace -f -p \$(cat /tmp/late.pid) -e trace=fdatasync -e inject=fdatasync:delay_enter=3000000 -o /tmp/late.strace 2>/dev/null & echo \$! > /tmp/late-strace.pid; n=0; until grep -q 'TracerPid:[[:space:]]*[1-9]' /proc/\$(cat /tmp/late.pid)/status || [ \$n -gt 200 ]; do n=\$((n + 1)); usleep 50000; done; grep -q 'TracerPid:[[:space:]]*[1-9]' /proc/\$(cat /tmp/late.pid)/status" &&
    check "GPIO4 up; GPIO7 up (its event's sync held); GPIO4 down before GPIO4's deadline (no fork between the edges but usleep's, the time it took said)" "p=/sys/devices/platform/\$(device pi4)/\$(chip pi4); t0=\$(cut -d' ' -f1 /proc/uptime); echo pull-up > \$p/sim_gpio4/pull; usleep 300000; echo pull-up > \$p/sim_gpio7/pull; usleep 300000; echo pull-down > \$p/sim_gpio4/pull; t1=\$(cut -d' ' -f1 /proc/uptime); echo \"GPIO4 up at \$t0 s, down by \$t1 s\"; awk -v a=\$t0 -v b=\$t1 'BEGIN { exit !(b - a < 1.9) }' || { echo 'the guest took 1.9 s or more to drive GPIO4 up and down again: its 2 s deadline may have passed first, which makes an event right (the host is too loaded for this case)'; false; }" &&
    check "P1-L-07 occupied" "wait_msg 20 $T/pi4-late/events '\"spot.occupied\"' '\"P1-L-07\"'" &&
    check "then P1-L-07 vacated (events go out in order: a P1-L-04 event would come before)" "pull pi4 7 down && wait_msg 20 $T/pi4-late/events '\"spot.vacated\"' '\"P1-L-07\"'" &&
    check "no event for P1-L-04: its edge reached the garage before the deadline's timer" "no_msg $T/pi4-late/events '\"P1-L-04\"'" &&
    check "clean stop" "kill \$(cat /tmp/late-strace.pid); stop late"
}

edge_queue_full() {  # GPIO12: 41 edges while the agent is stopped; the kernel keeps 16, the last of them low
    check "agent starts" "start burst pi4-burst.yaml && wait_used pi4 12" &&
    check "held (SIGSTOP): 41 edges, ending high; SIGCONT" "kill -STOP \$(cat /tmp/burst.pid) && i=0; while [ \$i -lt 20 ]; do pull pi4 12 up; pull pi4 12 down; i=\$((i + 1)); done; pull pi4 12 up; [ \$(value pi4 12) = 1 ] && kill -CONT \$(cat /tmp/burst.pid)" &&
    check "the level read again: spot.occupied" "wait_msg 10 $T/pi4-burst/events '\"spot.occupied\"' '\"P1-A-12\"' || { cat /tmp/burst.log; false; }" &&
    check "retained occupied" "wait_retained 5 $T/pi4-burst/state/spot/P1-A-12 '\"state\":\"occupied\"'" &&
    check "said in the log" "grep 'GPIO edge queue was full' /tmp/burst.log" &&
    check "clean stop" "stop burst"
}

# shellcheck source=hardware/sim/toolkit-cases.sh
source "$HERE/toolkit-cases.sh"

# run_pass BUILD: the cases (and with --bench the benchmark) against that build's agent, in a fresh VM.
run_pass() {
    local build=$1 dir="$WORK/gpiod$1" fails_before=$FAIL start=$SECONDS
    PFX="[${NAMES[$build]}] "
    mkdir -p "$dir"
    echo "--- ${NAMES[$build]}: ${AGENTS[$build]:-no agent}"
    [[ -z "${BUILD_ERROR[$build]:-}" ]] || { pass_cannot_run "${BUILD_ERROR[$build]}"; return; }
    local extras=()
    [[ $ARCH == x86_64 ]] && extras=("$(command -v strace)=/usr/bin/strace")   # arm64's comes from setup.sh's root
    AGENT_SYSROOT="${SYSROOTS[$build]:-}" bash "$HERE/initramfs.sh" "$CACHE" "${AGENTS[$build]}" "$dir/initrd.cpio" \
        "${extras[@]}" || { pass_cannot_run "initramfs failed"; return; }
    vm_up "$dir" || { pass_cannot_run "the VM did not come up (see its console above)"; vm_down; return; }
    # The agent must run on this build's libgpiod (the loader's own report), or the pass proves nothing.
    if ! g "LD_DEBUG=libs \$AGENT --help 2>&1 >/dev/null | grep -E 'calling init: .*/libgpiod\.so\.[0-9]+$' | sed 's/.*calling init: //'" \
        || ! grep -q "/${SONAMES[$build]}\$" <<<"$OUT"; then
        pass_cannot_run "the agent in the VM does not load ${SONAMES[$build]}: $(printf '%s' "$OUT" | tr '\n' ' ')"
        vm_down; return
    fi
    echo "${PFX}agent loads ${OUT%%$'\n'*}"

    run_case "command channel: long lines arrive whole while orphans exit" command_channel "kill \$(cat /tmp/orphans.pid) 2>/dev/null; true"
    run_case "spot occupied/vacated, retained states, clean stop (Pi 4)" spot_changes "[ -f /tmp/spots.pid ] && stop spots; pull pi4 17 down; pull pi4 27 down"
    run_case "lane passage in both directions (two loops)" lane_passage "[ -f /tmp/lane.pid ] && stop lane; pull pi4 22 down; pull pi4 23 down"
    run_case "bias and active-low (MCP23017 by label and by device, GPA/GPB names)" bias_active_low "[ -f /tmp/mcp.pid ] && stop mcp"
    run_case "initial state read at start" initial_state "[ -f /tmp/init.pid ] && stop init; pull pi4 5 down"
    run_case "line busy: holder named; the agent runs without it (exit 1 if it was its only line), takes it once free" line_busy "kill \$(cat /tmp/gpiomon.pid) 2>/dev/null; [ -f /tmp/busy.pid ] && stop busy; pulls pi4 '6 13' down; true"
    run_case "board raspberry-pi-5 resolved by chip label (rp1 is not gpiochip0)" label_resolution "[ -f /tmp/pi5.pid ] && stop pi5; pull pi5 17 down"
    run_case "board auto with GPIO17 on two chips is refused" auto_ambiguous ""
    run_case "parkwise-agent lines matches gpioinfo" inventory ""
    run_case "walk-test: lane, swapped spot pair, JSON report (real GPIO lines)" walk_test "pulls mcp '0 1' down; pulls pi4 '24 25 26' down"
    run_case "walk-test --learn: each spot's line written into the config, a lane's line refused (real GPIO lines)" walk_learn "[ -f /tmp/learn.rc ] || kill -INT \$(cat /tmp/learn.pid) 2>/dev/null; pulls mcp '0 1' down; pulls pi4 '24 25 26' down; true"
    run_case "doctor: lines requested (agent stopped) or read from its status (agent running)" doctor_checks "[ -f /tmp/doctor.pid ] && stop doctor; pull pi4 21 down"
    run_case "an edge before a filter's deadline, read after it (the agent held in a sync): no event" late_edge "kill \$(cat /tmp/late-strace.pid) 2>/dev/null; [ -f /tmp/late.pid ] && stop late; pull pi4 4 down; pull pi4 7 down"
    run_case "more edges than the kernel keeps: the level read again, final state right" edge_queue_full "[ -f /tmp/burst.pid ] && { kill -CONT \$(cat /tmp/burst.pid); stop burst; }; pull pi4 12 down"
    run_case "chip removed under the agent: faults, then exit 1" chip_gone "echo 1 > \$SIM/mcp/live"

    if [[ $BENCH -eq 1 ]]; then
        echo "${PFX}--- benchmark (inside the VM, qemu TCG; figures only, no assertions)"
        g -t 900 "BENCH_SAMPLES=${PARKWISE_BENCH_SAMPLES:-100} BENCH_ROUNDS='${PARKWISE_BENCH_ROUNDS:-25 100}' sh /sim/bench.sh"; local rc=$?
        printf '%s' "$OUT" | sed "s/^/$PFX/"
        [[ $rc -eq 0 ]] || { FAIL=$((FAIL + 1)); echo "${PFX}FAIL  benchmark (exit $rc)"; }
    fi
    vm_down
    if [[ $FAIL -gt $fails_before && -f "$dir/console.log" ]]; then
        echo "${PFX}--- VM console (last lines):"; tail -n 15 "$dir/console.log" | tr -d '\r' | sed "s/^/$PFX/"
    fi
    echo "${PFX}pass done in $((SECONDS - start)) s"
}

for build in $BUILDS; do run_pass "$build"; done
PFX=""
finish
