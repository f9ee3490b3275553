# The gpio-sim VM's host side, sourced by run-tests.sh and bench.sh: boot (vm_up), one guest command (g), power off
# (vm_down). Needs CACHE (setup.sh's directory) and, optionally, VM_QEMU_ARGS (more qemu arguments, e.g. disks).
# Sets QEMU_PID; fd 3 writes to the guest's command port (ttyS1), fd 4 reads from it.
QEMU_PID=""
PFX="${PFX:-}"   # run-tests.sh: the pass's prefix on console lines
VM_QEMU_ARGS=()

# vm_down: powers the pass's VM off (or kills it) and closes its control pipes.
vm_down() {
    if [[ -n "$QEMU_PID" ]] && kill -0 "$QEMU_PID" 2>/dev/null; then
        printf 'poweroff now\n' >&3 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.5; done
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
    mkfifo "$dir/ctl.in" "$dir/ctl.out"
    qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -display none -no-reboot -nic none -monitor none \
        -kernel "$CACHE/vmlinux" -initrd "$dir/initrd.cpio" -append "console=ttyS0 quiet panic=-1" \
        -serial "file:$dir/console.log" -serial "pipe:$dir/ctl" "${VM_QEMU_ARGS[@]}" > "$dir/qemu.log" 2>&1 &
    QEMU_PID=$!
    exec 3<>"$dir/ctl.in" 4<>"$dir/ctl.out"   # read-write opens of the fifos never block
    PENDING=""
    SEQ=0
    local start=$SECONDS
    while :; do
        read_line 120; status=$?
        [[ $status -eq 0 && "$LINE" == *@@READY* ]] && break
        if [[ $status -ne 0 || $((SECONDS - start)) -gt 120 ]]; then
            cat "$dir/qemu.log"; tr -d '\r' < "$dir/console.log" | tail -n 20 | sed "s/^/$PFX/"
            return 1
        fi
    done
    echo "${PFX}VM up in $((SECONDS - start)) s ($(grep -a -o '@@BOOTED [0-9.]*s' "$dir/console.log" | cut -d' ' -f2) guest time)"
}

# g [-t SECONDS] COMMAND: runs a shell command in the guest (with guest/lib.sh loaded); its output in OUT.
# Returns the command's exit code; 124 if it did not finish in time (default 60 s), 125 if the VM is gone, 126 if the
# guest answered another command (the line reached it garbled).
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
                       OUT+="(the guest answered command '${LINE% *}' instead of $SEQ: the command line reached it garbled)"
                       return 126 ;;
            "| "*) OUT+="${LINE#| }"$'\n' ;;
        esac
    done
}
