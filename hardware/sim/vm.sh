# shellcheck shell=bash
# The gpio-sim VM's host side, sourced by run-tests.sh, bench.sh and system-test.sh: boot (vm_up), one guest command
# (g), power off (vm_down). Needs CACHE (setup.sh's directory) and, optionally, VM_QEMU_ARGS (more qemu arguments,
# e.g. disks), VM_APPEND (the kernel's command line), VM_BOOT_S (how long a boot may take, 120 s) and VM_DOWN_S (how
# long a power-off may take before the VM is killed, 5 s). Sets QEMU_PID; fd 3 writes to the guest's command port,
# fd 4 reads from it.
# PARKWISE_VM_ARCH picks the machine: x86_64 (default: qemu-system-x86_64's pc, the console on ttyS0, the command port
# on the second UART, ttyS1) or arm64 (qemu-system-aarch64 -M virt -cpu cortex-a72, the console on the pl011,
# ttyAMA0; virt has one UART, so the command port is a virtio console on virtio-mmio, hvc0 in the guest: its modules
# are loaded by guest/init). Both under TCG, no network.
QEMU_PID=""
PFX="${PFX:-}"   # run-tests.sh: the pass's prefix on console lines
VM_ARCH="${PARKWISE_VM_ARCH:-x86_64}"
VM_QEMU_ARGS=()
VM_BOOT_S=120
VM_DOWN_S=5
case "$VM_ARCH" in
    x86_64) VM_APPEND="console=ttyS0 quiet panic=-1"
            VM_QEMU=(qemu-system-x86_64); VM_KERNEL=vmlinux ;;
    # cortex-a72 (a Pi 4's core): no pointer authentication, which costs much under TCG with -cpu max.
    arm64)  VM_APPEND="console=ttyAMA0 quiet panic=-1"
            VM_QEMU=(qemu-system-aarch64 -M virt -cpu cortex-a72); VM_KERNEL=Image ;;
    *) echo "PARKWISE_VM_ARCH='$VM_ARCH': expected x86_64 or arm64" >&2; return 1 ;;
esac

# The virtio block stack and ext4 are modules in Debian's kernel: bench.sh's disks and the system test's root need
# them, in this load order.
VM_BLOCK_MODULES=(drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_modern_dev
    drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci drivers/block/virtio_blk lib/crc16 fs/mbcache
    fs/jbd2/jbd2 crypto/crc32c_generic fs/ext4/ext4)
# vm_block_modules: the directory holding them (NAME.ko), taken once from the cached kernel package; 1 if it cannot.
vm_block_modules() {
    local krel image_deb mods m
    krel="$(cat "$CACHE/kernel-release")" || return 1
    mods="$CACHE/block-modules-$krel"
    if [[ ! -f "$mods/ext4.ko" ]]; then
        image_deb="$(find "$CACHE/debs" -name "linux-image-${krel}_*.deb" -print -quit)"
        [[ -n "$image_deb" ]] || { echo "no cached linux-image-$krel .deb in $CACHE/debs" >&2; return 1; }
        rm -rf "$mods.tmp"; mkdir -p "$mods.tmp"
        # shellcheck disable=SC2046
        dpkg-deb --fsys-tarfile "$image_deb" | tar -x -C "$mods.tmp" \
            $(for m in "${VM_BLOCK_MODULES[@]}"; do echo "./lib/modules/$krel/kernel/$m.ko"; done) \
            || { echo "block modules missing in $image_deb" >&2; return 1; }
        find "$mods.tmp" -name '*.ko' -exec mv {} "$mods.tmp/" \;
        rm -rf "$mods.tmp/lib" "$mods"; mv "$mods.tmp" "$mods"
    fi
    echo "$mods"
}

# vm_down: powers the pass's VM off (or kills it) and closes its control pipes.
vm_down() {
    if [[ -n "$QEMU_PID" ]] && kill -0 "$QEMU_PID" 2>/dev/null; then
        printf 'poweroff now\n' >&3 2>/dev/null
        local deadline=$((SECONDS + VM_DOWN_S))
        while kill -0 "$QEMU_PID" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
        kill "$QEMU_PID" 2>/dev/null
        wait "$QEMU_PID" 2>/dev/null
    fi
    QEMU_PID=""
    exec 3>&- 4<&-
}

PENDING=""
# read_line SECONDS: the next line from the guest into LINE (1: nothing within SECONDS, 2: the VM is gone).
read_line() {
    local deadline=$((SECONDS + $1)) chunk
    while :; do
        if IFS= read -r -t 1 chunk <&4; then
            LINE="${PENDING}${chunk}"; LINE="${LINE//$'\r'/}"; PENDING=""; return 0
        fi
        PENDING+="$chunk"
        kill -0 "$QEMU_PID" 2>/dev/null || return 2
        (( SECONDS >= deadline )) && return 1
    done
}

# vm_up DIR: boots the VM with DIR/initrd.cpio; its console in DIR/console.log. 1 if it does not come up.
vm_up() {
    local dir="$1" status
    local port=(-serial "pipe:$dir/ctl")
    # shellcheck disable=SC2054  # (qemu's own commas: pipe,id=...,path=...)
    [[ $VM_ARCH == arm64 ]] && port=(-chardev "pipe,id=ctl,path=$dir/ctl" -device virtio-serial-device
                                     -device virtconsole,chardev=ctl)
    mkfifo "$dir/ctl.in" "$dir/ctl.out"
    "${VM_QEMU[@]}" -accel tcg -m 1024 -smp 2 -display none -no-reboot -nic none -monitor none \
        -kernel "$CACHE/$VM_KERNEL" -initrd "$dir/initrd.cpio" -append "$VM_APPEND" \
        -serial "file:$dir/console.log" "${port[@]}" "${VM_QEMU_ARGS[@]}" > "$dir/qemu.log" 2>&1 &
    QEMU_PID=$!
    exec 3<>"$dir/ctl.in" 4<>"$dir/ctl.out"   # read-write opens of the fifos never block
    PENDING=""
    SEQ=0
    local start=$SECONDS
    while :; do
        read_line "$VM_BOOT_S"; status=$?
        [[ $status -eq 0 && "$LINE" == *@@READY* ]] && break
        if [[ $status -ne 0 || $((SECONDS - start)) -gt VM_BOOT_S ]]; then
            cat "$dir/qemu.log"; tr -d '\r' < "$dir/console.log" | tail -n 20 | sed "s/^/$PFX/"
            return 1
        fi
    done
    echo "${PFX}VM up in $((SECONDS - start)) s ($(grep -a -o '@@BOOTED [0-9.]*s' "$dir/console.log" | cut -d' ' -f2) guest time)"
}

# g [-t SECONDS] COMMAND: runs a shell command in the guest (with guest/lib.sh loaded); its output in OUT.
# Returns the command's exit code; 124 if it did not finish in time (default 60 s), 125 if the VM is gone, 126 if the
# guest answered another command (the line reached it garbled). What an earlier command that ran out of time still
# prints, up to its end, is skipped.
g() {
    local timeout=60 status
    if [[ "$1" == -t ]]; then timeout=$2; shift 2; fi
    SEQ=$((SEQ + 1))
    printf '%s %s\n' "$SEQ" "$1" >&3
    OUT=""
    while :; do
        read_line "$timeout"; status=$?
        [[ $status -eq 1 ]] && { OUT+="(no answer in ${timeout} s)"; return 124; }
        [[ $status -eq 2 ]] && { OUT+="(the VM is gone)"; return 125; }
        case "$LINE" in
            "@@END $SEQ "*) return "${LINE##* }" ;;
            "@@END "*) LINE="${LINE#@@END }"
                       # The late end of an earlier command that ran out of time: its output is not this one's.
                       [[ "${LINE% *}" =~ ^[0-9]+$ ]] && (( ${LINE% *} < SEQ )) && { OUT=""; continue; }
                       OUT+="(the guest answered command '${LINE% *}' instead of $SEQ: the command line reached it garbled)"
                       return 126 ;;
            "| "*) OUT+="${LINE#| }"$'\n' ;;
        esac
    done
}

# --- cases (run-tests.sh, system-test.sh): counted in PASS and FAIL; VM_CASES (function names) limits the cases run.
PASS=0
FAIL=0
WHY=""
# vm_finish NAME: powers the VM off, keeps WORK (the caller's directory) if anything failed, says the wall time since
# T0 and "N passed, M failed", and exits: 0 only if something passed and nothing failed.
vm_finish() {
    vm_down
    [[ $FAIL -eq 0 ]] && rm -rf "$WORK"
    [[ $FAIL -gt 0 ]] && echo "$1: logs and consoles kept in $WORK"
    echo "$1: $((SECONDS - T0)) s wall"
    echo "$PASS passed, $FAIL failed"
    [[ $FAIL -eq 0 && $PASS -gt 0 ]] && exit 0
    exit 1
}
# check [-t SECONDS] DESCRIPTION COMMAND [EXIT]: a step of a case (a guest command given SECONDS, default 60); on a
# different exit code the case fails with the output.
check() {
    local timeout=60
    if [[ "$1" == -t ]]; then timeout=$2; shift 2; fi
    g -t "$timeout" "$2"; local rc=$?
    [[ $rc -eq ${3:-0} ]] && return 0
    WHY="$1: exit $rc, expected ${3:-0}"$'\n'"$(printf '%s' "$OUT" | sed 's/^/      /')"
    return 1
}
# run_case NAME FUNCTION CLEANUP: counts the case; CLEANUP (guest command) runs whatever happened.
run_case() {
    [[ -z "${VM_CASES:-}" || " $VM_CASES " == *" $2 "* ]] || return 0
    WHY=""
    local start=$SECONDS ok=0
    "$2" && ok=1
    [[ -n "${3:-}" ]] && g "$3" >/dev/null
    if [[ $ok -eq 1 ]]; then
        PASS=$((PASS + 1)); echo "${PFX}ok    $1 ($((SECONDS - start)) s)"
    else
        FAIL=$((FAIL + 1)); echo "${PFX}FAIL  $1 ($((SECONDS - start)) s)"; printf '%s\n' "      $WHY" | sed "s/^/$PFX/"
    fi
}
