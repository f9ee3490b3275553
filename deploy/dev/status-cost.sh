#!/usr/bin/env bash
# What the status endpoint costs, printed as figures (never asserted): RSS of an idle agent with and
# without the status socket (a socket path too long to bind turns it off), the socket thread's CPU
# time and context switches while nobody asks (STATUS_IDLE_SECONDS, default 60), RSS after
# answering 1000 requests, the size of the campus's status (156 spots) and of its cmd/diag reply,
# and the time to answer a request. The board build (release, Swift runtime linked in statically).
#   STATUS_IDLE_SECONDS=60 deploy/dev/status-cost.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/setup.sh
. deploy/dev/lib.sh
swift_build -c release --static-swift-stdlib --product parkwise-agent
agent=.build/release/parkwise-agent
idle=${STATUS_IDLE_SECONDS:-60}
work=$(mktemp -d /tmp/parkwise-status.XXXXXX)
trap 'stop_started; rm -rf "$work"' EXIT
start_private_broker "$work"

# An idle campus: a replay of an empty trace (no line changes), connected to the broker.
printf '{"parkwise_trace": 1}\n' > "$work/empty.jsonl"
start_agent() {   # outbox dir, log file; prints the pid
    "$agent" run --config hardware/examples/campus.yaml --replay "$work/empty.jsonl" \
        --broker "mqtt://127.0.0.1:$port" --outbox "$1" > /dev/null 2> "$2" &
    echo $!
}
wait_for() {   # log file, text
    wait_until 10 grep -qF "$2" "$1" && return 0
    echo "status-cost: '$2' never appeared in $1" >&2; cat "$1" >&2; exit 1
}
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

long="$work/$(printf 'd%.0s' $(seq 1 110))"
without=$(start_agent "$long" "$work/without.log"); pids+=("$without")
wait_for "$work/without.log" "uplink connected"
grep -qF "status socket path too long" "$work/without.log"
with=$(start_agent "$work/outbox" "$work/with.log"); pids+=("$with")
wait_for "$work/with.log" "uplink connected"
sleep 2
echo "== RSS, idle campus agent (KiB)"
echo "without the status socket: $(rss "$without")   with it: $(rss "$with")"
kill -TERM "$without"

thread=""
for task in /proc/"$with"/task/*; do
    [ "$(cat "$task/comm")" = "status-socket" ] && thread=$task
done
[ -n "$thread" ] || { echo "status-cost: no status-socket thread" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "$thread/stat"; }
switches() { awk '/^voluntary_ctxt_switches/ {v=$2} /^nonvoluntary_ctxt_switches/ {n=$2} END {print v + n}' "$thread/status"; }
whole() { awk '{print $14 + $15}' "/proc/$with/stat"; }
t0=$(ticks); s0=$(switches); w0=$(whole)
sleep "$idle"
echo "== nobody asks for ${idle} s"
echo "status-socket thread: $(( $(ticks) - t0 )) ticks of CPU (1/$(getconf CLK_TCK) s), $(( $(switches) - s0 )) context switches;" \
     "whole agent: $(( $(whole) - w0 )) ticks"

echo "== answers (campus: 156 spots, 164 inputs)"
python3 - "$work/outbox/status.sock" <<'PY'
import socket, statistics, sys, time
path = sys.argv[1]
def ask():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"status\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data
size = len(ask())
times = []
for _ in range(1000):
    t = time.perf_counter()
    ask()
    times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"status: {size} bytes; 1000 requests one after another: median {statistics.median(times):.2f} ms, "
      f"p99 {times[989]:.2f} ms, max {times[-1]:.2f} ms")
PY
echo "RSS after 1000 answers: $(rss "$with") KiB"
mosquitto_sub -p "$port" -t parkwise/v1/uniandes/campus-main/reply -C 1 -W 10 > "$work/diag.json" &
sub=$!
sleep 0.5
mosquitto_pub -p "$port" -q 1 -t parkwise/v1/uniandes/campus-main/cmd/diag -m '{"id":"cost"}'
wait "$sub"
echo "cmd/diag reply: $(wc -c < "$work/diag.json") bytes$(grep -q '"truncated"' "$work/diag.json" && echo ', truncated' || echo ', whole')"
kill -TERM "$with"
