#!/usr/bin/env bash
# Side-by-side benchmark (issue 12): parkwise-agent (release, libgpiod 1.6, one spot, zero filter delays) next to a
# minimal C agent (bench/c-agent.c: libgpiod + libmosquitto, no durability) in the same gpio-sim VM boot, both
# publishing QoS 1 to mosquitto in the VM. Prints figures and ratios parkwise / C agent; asserts nothing. Per boot:
#   tmpfs     edge -> subscriber latency p50/p99 (edges driven and messages received by bench/probe.c in the guest,
#             one clock), CPU per edge (schedstat of every thread; utime+stime and stime too), RSS; the two agents' edges
#             alternate, one at a time
#   idle      voluntary context switches per thread over PARKWISE_BENCH_IDLE_S seconds of nothing happening
#   strace    system calls per edge (strace -c -f attached to every thread in the guest)
#   loaded    the tmpfs run again with two busy processes (`yes`) on the host's cores
#   disk      parkwise's outbox on an ext4 virtio disk (a host file, cache=none: writes and flushes reach the host)
#   sd        the same on a disk throttled like an SD card (qemu throttling.iops-write=PARKWISE_BENCH_SD_IOPS)
#             with bytes written and flushes per event from /sys/block/vdX/stat; then a burst of
#             PARKWISE_BENCH_BURST (50) edges 5 ms apart on each agent (what a group commit is for)
#   spawn     spawn -> first publish, each agent started PARKWISE_BENCH_SPAWNS times, alternating
#   spawn-fixed  the same with the guest's address-space randomization off (one uncounted start of each first):
#             without TCG's translating the code again at every new base, which a board's CPU does not do
# The host is not assumed quiet: its /proc/loadavg is printed with every phase.
#
#   bash hardware/sim/bench.sh            # PARKWISE_BENCH_BOOTS boots (default 3), then the summary
#
# PARKWISE_BENCH_BOOTS (3) PARKWISE_BENCH_EDGES (100 per agent and run) PARKWISE_BENCH_GAP_MS (50: pause after a
# message, plus a random 0..GAP) PARKWISE_BENCH_IDLE_S (60) PARKWISE_BENCH_SPAWNS (5) PARKWISE_BENCH_SD_IOPS (300) PARKWISE_BENCH_BURST (50)
# PARKWISE_BENCH_PHASES ("tmpfs idle strace loaded disk sd spawn spawn-fixed", any of them; the start always runs)
# PARKWISE_BENCH_MOUNT_OPTS (ext4 mount options for both disks, e.g. "lazytime"; default: none)
# PARKWISE_BENCH_BASELINE (a libgpiod 1.6 agent binary of an older build: it runs in every boot as a third agent, on
# GPIO10 with configs/bench2.yaml, and its edges alternate with the two others' in the tmpfs and loaded phases, so a
# change is measured before and after in the same boots; the summary prints parkwise / baseline)
# PARKWISE_BENCH_BASELINE_REV (a git revision of this repository instead: its tree is exported and built like the
# agent in .build/vm-baseline-REV, kept, so the next run's build is incremental; e.g. the commit before a change)
# PARKWISE_BENCH_PERF (1: a host `perf record` of the qemu process during each tmpfs phase, its top symbols printed)
# PARKWISE_AGENT (a libgpiod 1.6 agent binary instead of building one) PARKWISE_VM_BUILD, PARKWISE_VM_CACHE as in
# run-tests.sh. PARKWISE_BENCH_OUT: where the raw figures go (default: a temporary directory, kept and printed).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BOOTS="${PARKWISE_BENCH_BOOTS:-3}"
EDGES="${PARKWISE_BENCH_EDGES:-100}"
GAP="${PARKWISE_BENCH_GAP_MS:-50}"
IDLE="${PARKWISE_BENCH_IDLE_S:-60}"
SPAWNS="${PARKWISE_BENCH_SPAWNS:-5}"
SD_IOPS="${PARKWISE_BENCH_SD_IOPS:-300}"
BURST="${PARKWISE_BENCH_BURST:-50}"
MOUNT_OPTS="${PARKWISE_BENCH_MOUNT_OPTS:-}"
PHASES=" ${PARKWISE_BENCH_PHASES:-tmpfs idle strace loaded disk sd spawn spawn-fixed} "
# phase NAME: whether the phase was asked for.
phase() { [[ "$PHASES" == *" $1 "* ]]; }
WORK="${PARKWISE_BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/parkwise-bench.XXXXXX")}"
mkdir -p "$WORK"
RESULTS="$WORK/results.txt"
: > "$RESULTS"
LOAD_PIDS=()
die() { echo "vm-bench: $*" >&2; exit 1; }
# shellcheck source=hardware/sim/vm.sh
. "$HERE/vm.sh"
stop_load() { local pid; for pid in "${LOAD_PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done; LOAD_PIDS=(); }
trap 'stop_load; vm_down' EXIT

# --- parts: VM cache, the two agents, the probe, strace, block modules, disk images --------------------------------
command -v qemu-system-x86_64 >/dev/null || apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null \
    || die "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
for tool in strace mkfs.ext4; do
    command -v "$tool" >/dev/null || apt-get install -y -q --no-install-recommends strace e2fsprogs >/dev/null \
        || die "$tool missing (apt-get install strace e2fsprogs)"
done
# (Its output in a file, the cache directory its last line: no build piped into another program.)
bash "$HERE/setup.sh" >"$WORK/setup.out" || die "VM setup failed (see above)"
{ CACHE="$(tail -n 1 "$WORK/setup.out")" && [[ -f "$CACHE/vmlinux" ]]; } || die "VM setup failed (see above)"
AGENT="${PARKWISE_AGENT:-}"
if [[ -z "$AGENT" ]]; then
    BUILD="${PARKWISE_VM_BUILD:-$REPO/.build/vm-gpiod1}"
    echo "vm-bench: building the libgpiod 1.6 agent (release, static Swift runtime) in $BUILD" >&2
    (cd "$REPO" && env -u PKG_CONFIG_PATH PARKWISE_LIBGPIOD=1 swift build -c release --static-swift-stdlib \
        --scratch-path "$BUILD" --product parkwise-agent) > "$WORK/build.log" 2>&1 \
        || { cat "$WORK/build.log" >&2; die "the agent does not build"; }
    AGENT="$BUILD/release/parkwise-agent"
fi
gcc -O2 -Wall -o "$WORK/c-agent" "$HERE/bench/c-agent.c" -lgpiod -lmosquitto || die "c-agent does not build (libgpiod-dev libmosquitto-dev)"
gcc -O2 -Wall -o "$WORK/probe" "$HERE/bench/probe.c" -lmosquitto -lpthread || die "probe does not build"

MODS="$(vm_block_modules)" || die "no block modules"
EXTRAS=("$WORK/c-agent=/usr/local/bin/c-agent" "$WORK/probe=/usr/local/bin/probe" "$(command -v strace)=/usr/bin/strace"
        "$HERE/guest/sbs.sh=/sim/sbs.sh")
BASELINE="${PARKWISE_BENCH_BASELINE:-}"
rev=""
if [[ -z "$BASELINE" && -n "${PARKWISE_BENCH_BASELINE_REV:-}" ]]; then
    rev="$(git -C "$REPO" rev-parse --short "${PARKWISE_BENCH_BASELINE_REV}^{commit}" 2>/dev/null)" \
        || die "PARKWISE_BENCH_BASELINE_REV=$PARKWISE_BENCH_BASELINE_REV is not a revision of $REPO"
    tree="$REPO/.build/vm-baseline-$rev/tree"   # (one place per revision: the next run's build is incremental)
    if [[ ! -f "$tree/Package.swift" ]]; then
        rm -rf "$tree"; mkdir -p "$tree" || die "cannot make $tree"
        git -C "$REPO" archive "$rev" | tar -x -C "$tree" || die "the tree of $rev could not be exported"
    fi
    echo "vm-bench: building the baseline agent of $rev in $REPO/.build/vm-baseline-$rev" >&2
    (cd "$tree" && env -u PKG_CONFIG_PATH PARKWISE_LIBGPIOD=1 swift build -c release --static-swift-stdlib \
        --scratch-path "$REPO/.build/vm-baseline-$rev/build" --product parkwise-agent) > "$WORK/baseline-build.log" 2>&1 \
        || { tail -n 20 "$WORK/baseline-build.log" >&2; die "the baseline agent of $rev does not build"; }
    BASELINE="$REPO/.build/vm-baseline-$rev/build/release/parkwise-agent"
fi
if [[ -n "$BASELINE" ]]; then
    [[ -x "$BASELINE" ]] || die "PARKWISE_BENCH_BASELINE=$BASELINE is not an executable agent binary"
    EXTRAS+=("$BASELINE=/usr/local/bin/parkwise-baseline")
fi
for m in "${VM_BLOCK_MODULES[@]}"; do EXTRAS+=("$MODS/${m##*/}.ko=/lib/modules/bench/${m##*/}.ko"); done
bash "$HERE/initramfs.sh" "$CACHE" "$AGENT" "$WORK/initrd.cpio" "${EXTRAS[@]}" || die "initramfs failed"

# --- one boot ----------------------------------------------------------------------------------------------------------
# run BOOT PHASE COMMAND: a guest command (sbs.sh loaded); its output lines printed and kept as "boot=B phase=P ...".
hostload() { read -r one five fifteen _ < /proc/loadavg; echo "load1=$one load5=$five load15=$fifteen"; }
run() {
    local boot=$1 phase=$2 rc
    echo "vm-bench: boot $boot: $phase (host load $(cut -d' ' -f1-3 /proc/loadavg))"
    echo "boot=$boot phase=$phase hostload $(hostload)" >> "$RESULTS"
    g -t 900 ". /sim/sbs.sh; $3"; rc=$?
    printf '%s' "$OUT" | sed "s/^/  /"
    printf '%s' "$OUT" | sed "s/^/boot=$boot phase=$phase /" >> "$RESULTS"
    echo "boot=$boot phase=$phase hostload-end $(hostload)" >> "$RESULTS"
    [[ $rc -eq 0 ]] || echo "vm-bench: boot $boot: $phase failed (exit $rc)"
    return $rc
}

# tmpfs_run BOOT: the tmpfs phase; with PARKWISE_BENCH_PERF=1 a host `perf` profile of qemu meanwhile (what the emulated
# CPU spends its time on: translated code, lookups of translated blocks, device emulation), kept in WORK, top printed.
tmpfs_run() {
    local rc perf_pid="" report="$WORK/qemu-boot$1.txt"
    if [[ "${PARKWISE_BENCH_PERF:-0}" == 1 ]]; then
        command -v perf > /dev/null || apt-get install -y -q --no-install-recommends linux-perf > /dev/null
        perf record -q -F 999 -p "$QEMU_PID" -o "$WORK/qemu-boot$1.perf" > /dev/null 2>&1 & perf_pid=$!
    fi
    run "$1" tmpfs "sbs_lat $EDGES $GAP"; rc=$?
    if [[ -n "$perf_pid" ]]; then
        kill -INT "$perf_pid" 2> /dev/null
        wait "$perf_pid" 2> /dev/null
        perf report -q -i "$WORK/qemu-boot$1.perf" --no-children --sort dso,sym > "$report" 2> /dev/null
        echo "  qemu's profile during the tmpfs phase (host perf, the whole VM), top symbols ($report):"
        sed -n '1,15p' "$report" | sed 's/^/    /'
    fi
    return $rc
}

boot() {
    local b=$1 dir="$WORK/boot$1"
    mkdir -p "$dir"
    cp "$WORK/initrd.cpio" "$dir/initrd.cpio"
    for disk in disk sd; do
        truncate -s 256M "$dir/$disk.img"
        # 4 KB blocks as on a Raspberry Pi OS root filesystem (for 256 MB mkfs would pick 1 KB).
        mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$dir/$disk.img" || die "mkfs.ext4 failed"
    done
    VM_QEMU_ARGS=(-drive "file=$dir/disk.img,if=virtio,format=raw,cache=none,aio=threads"
                  -drive "file=$dir/sd.img,if=virtio,format=raw,cache=none,aio=threads,throttling.iops-write=$SD_IOPS")
    vm_up "$dir" || { echo "vm-bench: boot $b: the VM did not come up"; return 1; }
    { run "$b" disks "MOUNT_OPTS='$MOUNT_OPTS' sbs_disks" &&
      run "$b" start "sbs_start c && sbs_start pw /tmp/outbox-pw${BASELINE:+ && sbs_start pb /tmp/outbox-pb}" &&
      { ! phase tmpfs || tmpfs_run "$b"; } &&
      { ! phase idle || run "$b" idle "probe idle $IDLE c,\$(cat /tmp/c.pid) pw,\$(cat /tmp/pw.pid)"; } &&
      { ! phase strace || run "$b" strace "sbs_strace $((EDGES / 2)) $GAP"; }; } || { vm_down; return 1; }
    if phase loaded; then
        yes > /dev/null & LOAD_PIDS+=($!)
        yes > /dev/null & LOAD_PIDS+=($!)
        sleep 2
        run "$b" loaded "sbs_lat $EDGES $GAP"
        stop_load
    fi
    { ! phase disk || run "$b" disk "BURST=$BURST sbs_durable vda /mnt/disk $EDGES $GAP"; } &&
    { ! phase sd || run "$b" sd "BURST=$BURST sbs_durable vdb /mnt/sd $EDGES $GAP"; } &&
    { ! phase spawn || run "$b" spawn "sbs_spawn $SPAWNS"; } &&
    { ! phase spawn-fixed || run "$b" spawn-fixed "sbs_spawn_fixed $SPAWNS"; }
    vm_down
    rm -f "$dir/disk.img" "$dir/sd.img" "$dir/initrd.cpio"
}

echo "vm-bench: $BOOTS boot(s), $EDGES edges per agent and run; raw figures in $RESULTS"
echo "vm-bench: parkwise-agent $AGENT ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null))${BASELINE:+, baseline $BASELINE}${rev:+ ($rev)}"
for b in $(seq 1 "$BOOTS"); do boot "$b"; done
python3 "$HERE/bench/summary.py" "$RESULTS"
echo "vm-bench: raw figures kept in $RESULTS"
