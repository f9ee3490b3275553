# shellcheck shell=sh
# Sourced by the guest's command server (guest/init, PID 1 of the busybox VM; guest/system/serve, a service of the
# systemd VM): serves the host's commands on the command port (CTL_TTY: the second serial port, ttyS1, on x86_64;
# the virtio console hvc0 on arm64's virt machine) until the host sends "poweroff": one line
# "<id> <shell command>" in, its output lines prefixed "| " and "@@END <id> <exit code>" out. Each command runs in a
# shell of its own with /sim/lib.sh loaded, its output in /tmp/cmd.out.
CTL_TTY="${CTL_TTY:-/dev/ttyS1}"
stty -F "$CTL_TTY" raw -echo -echoe -echok -icrnl -onlcr 115200 2>/dev/null
exec 3<>"$CTL_TTY"
echo "@@READY" >&3
# Each line is read by a child shell, not by PID 1: orphans exiting (agents started in the background) send PID 1
# SIGCHLD, and busybox ash restarts a `read` interrupted by a signal with the bytes it had already read thrown away,
# so the rest of the line ran as a garbled command of its own (the VM cases' rare "unexpected |").
while line=$(sh -c 'IFS= read -r l <&3 && printf "%s" "$l"'); do
    id="${line%% *}"
    cmd="${line#* }"
    [ "$id" = "poweroff" ] && break
    sh -c ". /sim/lib.sh; $cmd" > /tmp/cmd.out 2>&1 < /dev/null
    rc=$?
    sed 's/^/| /' /tmp/cmd.out >&3
    echo "@@END $id $rc" >&3
done
