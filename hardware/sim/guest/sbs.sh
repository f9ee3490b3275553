# shellcheck shell=sh
# Guest side of the side-by-side benchmark (hardware/sim/bench.sh), sourced after lib.sh by each host command.
# The C agent (/usr/local/bin/c-agent) reads the Pi 5 chip's GPIO9, parkwise-agent (configs/bench1.yaml) its GPIO8, and
# a baseline parkwise-agent when the host gave one (/usr/local/bin/parkwise-baseline, configs/bench2.yaml) GPIO10;
# /usr/local/bin/probe drives the lines and subscribes (see hardware/sim/bench/probe.c). Figures only.
PULLS="/sys/devices/platform/$(device pi5)/$(chip pi5)"
C_TOPIC=parkwise/v1/vm/c-agent
PW_TOPIC=parkwise/v1/vm/bench1
PB_TOPIC=parkwise/v1/vm/bench2

# sbs_disks: the virtio block stack and ext4 (modules in the Debian kernel), the two disks mounted at /mnt/disk
# (writes and flushes reach the host file) and /mnt/sd (the same, throttled like an SD card), with MOUNT_OPTS if set.
sbs_disks() {
    for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk crc16 mbcache jbd2 \
             crc32c_generic ext4; do
        insmod /lib/modules/bench/$m.ko || { echo "insmod $m failed"; return 1; }
    done
    n=0; until [ -b /dev/vdb ]; do n=$((n + 1)); [ $n -gt 100 ] && { echo "no /dev/vdb"; ls /dev; return 1; }; usleep 50000; done
    mkdir -p /mnt/disk /mnt/sd
    mount -t ext4 ${MOUNT_OPTS:+-o "$MOUNT_OPTS"} /dev/vda /mnt/disk && mount -t ext4 ${MOUNT_OPTS:+-o "$MOUNT_OPTS"} /dev/vdb /mnt/sd || return 1
    echo "disks: vda $(cat /sys/block/vda/size) sectors at /mnt/disk, vdb at /mnt/sd; write cache: $(cat /sys/block/vda/queue/write_cache); mount options: $(grep ' /mnt/sd ' /proc/mounts | cut -d' ' -f4)"
    echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) (clock_gettime is a system call unless it is tsc)"
}

# sbs_start c|pw|pb [OUTBOX]: starts one agent through the probe (which times spawn -> first publish), waits for its line.
sbs_start() {
    if [ "$1" = c ]; then
        probe spawn "$C_TOPIC/#" /tmp/c.log -- /usr/local/bin/c-agent "$(chip pi5)" 9 127.0.0.1 1883 "$C_TOPIC" > /tmp/spawn.out
        line=9
    elif [ "$1" = pb ]; then
        rm -rf "$2"
        probe spawn "$PB_TOPIC/#" /tmp/pb.log -- /usr/local/bin/parkwise-baseline run --config /sim/configs/bench2.yaml \
            --broker mqtt://127.0.0.1:1883 --outbox "$2" > /tmp/spawn.out
        line=10
    else
        rm -rf "$2"
        probe spawn "$PW_TOPIC/#" /tmp/pw.log -- /usr/local/bin/parkwise-agent run --config /sim/configs/bench1.yaml \
            --broker mqtt://127.0.0.1:1883 --outbox "$2" > /tmp/spawn.out
        line=8
    fi
    rc=$?
    echo "$1 $(cat /tmp/spawn.out)"
    sed -n 's/.*pid=\([0-9]*\).*/\1/p' /tmp/spawn.out > "/tmp/$1.pid"
    [ $rc = 0 ] && wait_used pi5 $line
}

# sbs_lat N GAP_MS [c|pw|both]: N edges per agent, alternating, each timed to its message at the probe; with both, the
# baseline agent too when it runs.
sbs_lat() {
    t_c="c,$(cat /tmp/c.pid),$PULLS/sim_gpio9/pull,$C_TOPIC/events,\"seq\""
    t_pw="pw,$(cat /tmp/pw.pid),$PULLS/sim_gpio8/pull,$PW_TOPIC/events,\"spot."
    case "${3:-both}" in
        c) probe lat "$1" "$2" "$t_c" ;;
        pw) probe lat "$1" "$2" "$t_pw" ;;
        *)
            if [ -f /tmp/pb.pid ]; then
                probe lat "$1" "$2" "$t_c" "$t_pw" "pb,$(cat /tmp/pb.pid),$PULLS/sim_gpio10/pull,$PB_TOPIC/events,\"spot."
            else
                probe lat "$1" "$2" "$t_c" "$t_pw"
            fi ;;
    esac
}

# sbs_strace N GAP_MS: system calls per edge of each agent (strace -c -f attached to every thread) over N edges;
# also over 10 s without edges, so per_edge_less_idle takes out what the agent does anyway in the same time.
sbs_strace() {
    for a in c pw; do
        strace_window "$a" "/tmp/strace-idle.$a" sleep 10
        idle_calls=$(strace_total "/tmp/strace-idle.$a"); idle_s=$window; idle_clock=$(strace_calls "/tmp/strace-idle.$a" clock_gettime)
        strace_window "$a" "/tmp/strace.$a" sbs_lat "$1" "$2" "$a" > "/tmp/strace-lat.$a"
        sed 's/^lat /strace-lat /' "/tmp/strace-lat.$a"
        total=$(strace_total "/tmp/strace.$a"); clock=$(strace_calls "/tmp/strace.$a" clock_gettime)
        syncs=$(( $(strace_calls "/tmp/strace.$a" fsync) + $(strace_calls "/tmp/strace.$a" fdatasync) ))
        awk -v a="$a" -v n="$1" -v t="$total" -v w="$window" -v i="$idle_calls" -v is="$idle_s" -v c="$clock" -v ic="$idle_clock" -v y="$syncs" 'BEGIN {
            printf "syscalls %s edges=%d calls=%d window_s=%.1f per_edge=%.1f idle_calls=%d idle_s=%.1f idle_per_s=%.2f per_edge_less_idle=%.1f per_edge_less_idle_and_clock=%.1f syncs_per_edge=%.2f\n",
                   a, n, t, w, t / n, i, is, i / is, (t - i / is * w) / n, (t - c - (i - ic) / is * w) / n, y / n }'
        awk -v a="$a" '/^[ ]*[0-9.]+ / && $NF != "total" { print "syscall-top " a " " $NF " calls=" (($4 ~ /^[0-9]+$/) ? $4 : $3) }' "/tmp/strace.$a" | head -n 12
    done
}
# strace_window AGENT FILE COMMAND...: strace -c of every thread of AGENT while COMMAND runs; seconds in $window.
strace_window() {
    a=$1 file=$2; shift 2
    strace -c -S calls -f -p "$(cat "/tmp/$a.pid")" -o "$file" 2>"$file.err" &
    spid=$!
    n=0; until grep -q "attached" "$file.err" 2>/dev/null || [ $n -gt 100 ]; do n=$((n + 1)); usleep 20000; done
    t0=$(cut -d' ' -f1 /proc/uptime)
    "$@"
    t1=$(cut -d' ' -f1 /proc/uptime)
    kill -INT $spid; wait $spid
    window=$(awk "BEGIN { print $t1 - $t0 }")
}
strace_total() { strace_calls "$1" total; }
# strace_calls FILE NAME: the calls column of one row of strace -c's table (0 if absent).
strace_calls() { awk -v s="$2" '$NF == s { c = ($4 ~ /^[0-9]+$/) ? $4 : $3 } END { print c + 0 }' "$1"; }

# sbs_disk_stat DEV: write requests, sectors written, flushes (fields 5, 7 and 16 of /sys/block/DEV/stat).
sbs_disk_stat() { awk '{ print $5, $7, $16 }' "/sys/block/$1/stat"; }

# sbs_durable DEV MOUNT N GAP_MS: parkwise-agent restarted with its outbox on MOUNT; N edges per agent, paced, then a
# burst of BURST (50) edges 5 ms apart per agent; what reached DEV in each.
sbs_durable() {
    stop pw > /dev/null
    sbs_start pw "$2/outbox" > /dev/null || { cat /tmp/pw.log; return 1; }
    sync; sleep 6
    # shellcheck disable=SC2046  # (its three numbers: the next positional parameters)
    set -- "$@" $(sbs_disk_stat "$1")
    sbs_lat "$3" "$4" | sed "s/^lat /lat-$1 /"
    sleep 6   # ext4's 5 s journal commit: what the events left for later counts too
    # shellcheck disable=SC2046  # (its three numbers: the next positional parameters)
    set -- "$@" $(sbs_disk_stat "$1")
    awk -v d="$1" -v n="$3" -v w0="$5" -v s0="$6" -v f0="$7" -v w1="$8" -v s1="$9" -v f1="${10}" 'BEGIN {
        printf "disk %s events=%d writes=%d bytes=%d flushes=%d writes_per_event=%.2f bytes_per_event=%.0f flushes_per_event=%.2f data_writes_per_event=%.2f\n",
               d, n, w1 - w0, (s1 - s0) * 512, f1 - f0, (w1 - w0) / n, (s1 - s0) * 512 / n, (f1 - f0) / n, (w1 - w0 - (f1 - f0)) / n }'
    # a burst: BURST edges 5 ms apart, parkwise first (what reached the disk), then the C agent
    # shellcheck disable=SC2046  # (its three numbers: the next positional parameters)
    set -- "$1" "$2" "$3" "$4" $(sbs_disk_stat "$1")
    probe burst "${BURST:-50}" 5000 "pw,$(cat /tmp/pw.pid),$PULLS/sim_gpio8/pull,$PW_TOPIC/events,\"spot." | sed "s/^burst /burst-$1 /"
    sleep 6
    # shellcheck disable=SC2046  # (its three numbers: the next positional parameters)
    set -- "$@" $(sbs_disk_stat "$1")
    awk -v d="$1" -v n="${BURST:-50}" -v w0="$5" -v s0="$6" -v f0="$7" -v w1="$8" -v s1="$9" -v f1="${10}" 'BEGIN {
        printf "disk-burst %s events=%d writes=%d bytes=%d flushes=%d writes_per_event=%.2f bytes_per_event=%.0f flushes_per_event=%.2f\n",
               d, n, w1 - w0, (s1 - s0) * 512, f1 - f0, (w1 - w0) / n, (s1 - s0) * 512 / n, (f1 - f0) / n }'
    probe burst "${BURST:-50}" 5000 "c,$(cat /tmp/c.pid),$PULLS/sim_gpio9/pull,$C_TOPIC/events,\"seq\"" | sed "s/^burst /burst-$1 /"
    stop pw > /dev/null
    sbs_start pw /tmp/outbox-pw > /dev/null
}

# sbs_spawn ROUNDS: each agent started ROUNDS times (alternating), spawn -> first publish; the agents stay running after.
sbs_spawn() {
    r=0
    while [ $r -lt "$1" ]; do
        for a in c pw; do
            stop $a > /dev/null
            sbs_start $a /tmp/outbox-pw || return 1
        done
        r=$((r + 1))
    done
}

# sbs_spawn_fixed ROUNDS: sbs_spawn with address-space randomization off in the guest, after one start of each agent
# that is not counted (printed as "warmup"). Under TCG, qemu 7.2 keys the code it has translated by virtual address,
# so with ASLR every start of a PIE binary translates all the code it runs again at its new base; a real CPU has no
# such cost. With the bases fixed, a start reuses what the last one translated, and what is left is what a board pays:
# exec, page faults, relocations, system calls. Both agents (and their libraries) are PIE; the setting is put back.
sbs_spawn_fixed() {
    aslr=$(cat /proc/sys/kernel/randomize_va_space)
    echo 0 > /proc/sys/kernel/randomize_va_space
    sbs_spawn 1 | sed 's/^/warmup /'
    sbs_spawn "$1"; rc=$?
    echo "$aslr" > /proc/sys/kernel/randomize_va_space
    return $rc
}
