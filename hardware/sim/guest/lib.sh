# shellcheck shell=sh
# Guest helpers for the host's test commands (sourced by every command). Chips are named by role: mcp, pi4, pi5.
SIM=/sys/kernel/config/gpio-sim
AGENT="${AGENT:-/usr/local/bin/parkwise-agent}"   # the system test's guest: /usr/bin/parkwise-agent, from the .deb
MQTT_LOG="${MQTT_LOG:-/tmp/mqtt.log}"            # every parkwise message: receive time (unix ns), topic, payload

# make_chip ROLE LABEL LINES PREFIX: a gpio-sim device with one bank; lines named PREFIX0.. (unnamed if PREFIX is "").
make_chip() {
    mkdir "$SIM/$1" "$SIM/$1/bank0" || return 1
    echo "$3" > "$SIM/$1/bank0/num_lines" && echo "$2" > "$SIM/$1/bank0/label" || return 1
    if [ -n "$4" ]; then
        n=0
        while [ $n -lt "$3" ]; do
            mkdir "$SIM/$1/bank0/line$n" && echo "$4$n" > "$SIM/$1/bank0/line$n/name" || return 1
            n=$((n + 1))
        done
    fi
    echo 1 > "$SIM/$1/live" || return 1
}
# make_chips: the three simulated chips. Creation order fixes the numbers: gpiochip0 = the MCP23017 (device
# gpio-sim.0), gpiochip1 = the Pi 4 block, gpiochip2 = the Pi 5 block, so neither board's chip is gpiochip0. On arm64's
# virt machine its own PL061 is gpiochip0 and these three are gpiochip1-3.
make_chips() {
    make_chip mcp mcp23017 16 "" || { echo "gpio-sim chip mcp23017"; return 1; }
    make_chip pi4 pinctrl-bcm2711 58 GPIO || { echo "gpio-sim chip pinctrl-bcm2711"; return 1; }
    make_chip pi5 pinctrl-rp1 54 GPIO || { echo "gpio-sim chip pinctrl-rp1"; return 1; }
}
chip() { cat "$SIM/$1/bank0/chip_name"; }
device() { cat "$SIM/$1/dev_name"; }

# pull ROLE OFFSET up|down: drive a line from outside, as a sensor would.
pull() { echo "pull-$3" > "/sys/devices/platform/$(device "$1")/$(chip "$1")/sim_gpio$2/pull"; }
# pulls ROLE "OFFSETS" up|down: several lines at once (one shell, no command round trips).
pulls() { for o in $2; do pull "$1" "$o" "$3" || return 1; done; }
# value ROLE OFFSET: what the simulated line carries now (0/1).
value() { cat "/sys/devices/platform/$(device "$1")/$(chip "$1")/sim_gpio$2/value"; }

# info ROLE OFFSET: the gpioinfo line of one line.
info() { gpioinfo "$(chip "$1")" | grep -E "^[[:space:]]+line[[:space:]]+$2:"; }
# wait_used ROLE OFFSET [SECONDS]: until some program has requested the line.
wait_used() {
    end=$(( $(date +%s) + ${3:-20} ))
    while ! info "$1" "$2" | grep -q '\[used'; do
        [ "$(date +%s)" -gt $end ] && { echo "line $2 of $1 never became used"; info "$1" "$2"; return 1; }
        usleep 20000
    done
}
wait_free() {
    end=$(( $(date +%s) + ${3:-20} ))
    while info "$1" "$2" | grep -q '\[used'; do
        [ "$(date +%s)" -gt $end ] && { echo "line $2 of $1 still used"; info "$1" "$2"; return 1; }
        usleep 20000
    done
}

# msgs PATTERN...: the MQTT messages (from the subscriber's log) containing every fixed-string PATTERN.
msgs() {
    out="$(cat "$MQTT_LOG")"
    for p in "$@"; do out="$(printf '%s\n' "$out" | grep -F -- "$p")"; done
    [ -n "$out" ] && printf '%s\n' "$out"
}
# wait_msg SECONDS PATTERN...: until such a message arrived; prints it.
wait_msg() {
    secs=$1; shift
    end=$(( $(date +%s) + secs ))
    until msgs "$@"; do
        [ "$(date +%s)" -gt $end ] && { echo "no message with: $*"; echo "--- last messages:"; tail -n 8 "$MQTT_LOG"; return 1; }
        usleep 20000
    done
}
# wait_count SECONDS N PATTERN...: until at least N such messages arrived.
wait_count() {
    secs=$1; n=$2; shift 2
    end=$(( $(date +%s) + secs ))
    until [ "$(msgs "$@" | wc -l)" -ge "$n" ]; do
        [ "$(date +%s)" -gt $end ] && { echo "fewer than $n messages with: $*"; msgs "$@"; echo "--- last messages:"; tail -n 8 "$MQTT_LOG"; return 1; }
        usleep 50000
    done
}
# no_msg PATTERN...: fails (printing them) if such messages arrived.
no_msg() { if msgs "$@"; then echo "unexpected message(s) above"; return 1; fi; return 0; }
# retained TOPIC: the retained payload now on the broker.
retained() { mosquitto_sub -h 127.0.0.1 -t "$1" -C 1 -W 3; }
# wait_retained SECONDS TOPIC TEXT: until the payload retained on TOPIC holds TEXT; prints it. (A spot's or a level's
# state goes at most once a second: a change within the second after the last comes up to 1.25 s later, StatePace.)
wait_retained() {
    end=$(( $(date +%s) + $1 ))
    while :; do
        out="$(retained "$2")"
        case "$out" in *"$3"*) printf '%s\n' "$out"; return 0 ;; esac
        [ "$(date +%s)" -gt $end ] && { echo "retained on $2: $out (expected $3)"; return 1; }
        usleep 100000
    done
}

# start NAME CONFIG: the agent in the background (log /tmp/NAME.log), then wait for its online status.
start() {
    "$AGENT" run --config "/sim/configs/$2" --broker mqtt://127.0.0.1:1883 --outbox "/tmp/outbox-$1" \
        > "/tmp/$1.log" 2>&1 &
    echo $! > "/tmp/$1.pid"
    site="$(sed -n 's/^site: *//p' "/sim/configs/$2")"; dev="$(sed -n 's/^device: *//p' "/sim/configs/$2")"
    wait_msg 30 "parkwise/v1/$site/$dev/status" '"online"' > /dev/null || { echo "agent log:"; cat "/tmp/$1.log"; return 1; }
}
# stop NAME: SIGTERM, then wait up to 10 s for the exit.
stop() {
    pid="$(cat "/tmp/$1.pid")"
    kill -TERM "$pid" 2>/dev/null
    n=0
    while [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
        n=$((n + 1)); [ $n -gt 200 ] && { echo "agent did not stop in 10 s"; kill -KILL "$pid"; return 1; }
        usleep 50000
    done
    return 0
}
