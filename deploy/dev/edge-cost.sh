#!/usr/bin/env bash
# What one edge costs the agent, counted, not timed (issue 37): callgrind over a replay of paced edges of one spot
# sensor (zero filter delays: one edge, one event), counting only from "uplink connected" to the end of the trace
# (callgrind_control zeroes and dumps), against a private mosquitto on loopback, the outbox on the host's disk.
# Prints, per edge: instructions (all threads), calls to malloc, system calls (strace -f -c, two trace lengths
# subtracted), and the functions with the largest inclusive share of the edge path. Instruction counts repeat for the
# same binary and input whatever else the machine does, so a change in the hot path shows here before any VM run.
#   EDGES=400 BIN=path/to/parkwise-agent deploy/dev/edge-cost.sh
# SYSCALLS=0 skips the strace runs. KEEP=FILE keeps callgrind's dump there (for callgrind_annotate --tree=caller and the like).
# BIN: default the release build with the Swift runtime linked in statically (as on the board), built here.
set -euo pipefail
cd "$(dirname "$0")/../.."

EDGES=${EDGES:-400}
TOP=${TOP:-30}
. deploy/dev/lib.sh
for tool in valgrind strace; do
    command -v "$tool" > /dev/null || { echo "edge-cost: $tool missing (apt-get install valgrind strace)" >&2; exit 1; }
done
if [[ -z "${BIN:-}" ]]; then
    swift_build -c release --static-swift-stdlib --product parkwise-agent
    BIN=.build/release/parkwise-agent
fi
work=$(mktemp -d /tmp/parkwise-edge-cost.XXXXXX)
trap 'stop_started; rm -rf "$work"' EXIT
start_private_broker "$work" "max_inflight_messages 0"

printf '%s\n' 'site: bench' 'device: edge' 'board: simulated' 'levels: [ { id: L1, capacity: 1 } ]' 'spots:' \
    '  - { id: L1-001, input: GPIO2, delayed_on: 0, delayed_off: 0, chatter_limit: 10000 }' > "$work/agent.yaml"

# trace N START_MS STEP_MS: N edges of GPIO2, alternating, the first at START_MS.
trace() {
    local i
    for ((i = 0; i < $1; i++)); do printf '{"t_ms": %s, "input": "GPIO2", "value": %s}\n' $(($2 + i * $3)) $(((i + 1) % 2)); done
}

# wait_for FILE TEXT [SECONDS]: until the file holds the text.
wait_for() {
    wait_until "${3:-60}" grep -q "$2" "$1" 2>/dev/null && return 0
    echo "edge-cost: '$2' not seen in $1" >&2
    cat "$1" >&2
    return 1
}

stop_agent() {
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

echo "== binary: $BIN ($(stat -c %s "$BIN") bytes), $EDGES edges, one every 40 ms"

# Under callgrind the agent runs some 50 times slower: 40 ms between edges keeps them one at a time.
trace "$EDGES" 4000 40 > "$work/edges.jsonl"
valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --dump-instr=no --collect-atstart=yes \
    "$BIN" run --config "$work/agent.yaml" --replay "$work/edges.jsonl" --broker "mqtt://127.0.0.1:$port" \
    --outbox "$work/cg" 2> "$work/cg.log" & agent=$!; pids+=("$agent")
wait_for "$work/cg.log" "uplink connected" 120
callgrind_control -z "$agent" > /dev/null
wait_for "$work/cg.log" "trace finished" 300
# The last edge's message and its PUBACK (a subscriber would see it within milliseconds; callgrind is slower).
sleep 2
callgrind_control -d "$agent" > /dev/null
stop_agent "$agent"
# The dump callgrind_control asked for is the first numbered one (cg.out itself is what the exit wrote).
dump="$work/cg.out.1"
[[ -f "$dump" ]] || { echo "edge-cost: no callgrind dump in $work" >&2; exit 1; }
[[ -z "${KEEP:-}" ]] || cp "$dump" "$KEEP"
total=$(callgrind_annotate "$dump" 2> /dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
echo "  instructions per edge (all threads): $((total / EDGES))"
# Calls of malloc per edge and the inclusive ranking, from the dump itself (its calls= lines and their costs).
python3 - "$dump" "$EDGES" "$TOP" <<'PY'
import re, subprocess, sys
dump, edges, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Parse the callgrind file: calls=N lines after cfn= give call counts; fn= blocks give self cost; inclusive from calls.
names, self_cost, incl_calls, calls_to = {}, {}, {}, {}
fn = cfn = None
pending_calls = None
def name(kind, text):
    m = re.match(r"\((\d+)\)(?: (.*))?", text)
    if not m:
        return text
    key = (kind, m.group(1))
    if m.group(2):
        names[key] = m.group(2)
    return names.get(key, m.group(1))
for line in open(dump, errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("fn="):
        fn = name("fn", line[3:]); cfn = None
    elif line.startswith("cfn="):
        cfn = name("fn", line[4:])
    elif line.startswith("calls="):
        pending_calls = int(line[6:].split()[0])
    elif line and (line[0].isdigit() or line[0] in "+-*"):
        parts = line.split()
        cost = int(parts[1]) if len(parts) > 1 else 0
        if pending_calls is not None:
            calls_to[cfn] = calls_to.get(cfn, 0) + pending_calls
            incl_calls[(fn, cfn)] = incl_calls.get((fn, cfn), 0) + cost
            pending_calls = None
        else:
            self_cost[fn] = self_cost.get(fn, 0) + cost
total = sum(self_cost.values())
alloc = sum(v for k, v in calls_to.items() if k in ("malloc", "calloc", "realloc", "posix_memalign"))
print(f"  malloc/calloc/realloc/posix_memalign calls per edge: {alloc / edges:.1f} (swift_allocObject: {calls_to.get('swift_allocObject', 0) / edges:.1f})")
# Calls: under the VM bench's emulated CPU (qemu TCG) a call into another page and its return are each a lookup of
# the translated code, after every context switch a slow one; they cost more there than the instructions they run.
def share(prefixes):
    return sum(v for k, v in calls_to.items() if k.startswith(prefixes)) / edges
every = sum(calls_to.values()) / edges
counting = share(("swift_retain", "swift_release", "swift_bridgeObjectRetain", "swift_bridgeObjectRelease"))
access = share(("swift_beginAccess", "swift_endAccess"))
print(f"  calls per edge: {every:.0f} (swift_retain/release and bridge-object ones: {counting:.0f}, "
      f"swift_beginAccess/endAccess (exclusivity checks): {access:.0f}, memcpy: {share(('__memcpy',)):.0f})")
# Inclusive cost: self plus what each call made cost (callgrind's inclusive cost per call arc; recursion counted once
# per arc, which is fine for a ranking).
incl = dict(self_cost)
for (f, c), cost in incl_calls.items():
    if f != c:
        incl[f] = incl.get(f, 0) + cost
# Swift's symbols demangled (swift-demangle, from the toolchain; without it they stay mangled).
shown = {}
def demangle(symbols):
    mangled = [s for s in symbols if s.startswith(("$s", "_$s"))]
    try:
        out = subprocess.run(["swift-demangle", "--simplified"], input="\n".join(mangled), capture_output=True,
                             text=True, check=True).stdout.split("\n")
        shown.update(zip(mangled, out))
    except (OSError, subprocess.CalledProcessError):
        pass
def short(n):
    n = shown.get(n, n)
    return n if len(n) <= 110 else n[:107] + "..."
ranked = sorted(incl.items(), key=lambda kv: -kv[1])[:top]
selfs = sorted(self_cost.items(), key=lambda kv: -kv[1])[:top // 2]
demangle([f for f, _ in ranked + selfs])
print(f"  inclusive share of all instructions, per edge (top {top}):")
for f, cost in ranked:
    print(f"    {100 * cost / total:5.1f}%  {cost / edges:9.0f}  {short(f)}")
print(f"  self cost, per edge (top {top // 2}):")
for f, cost in selfs:
    print(f"    {100 * cost / total:5.1f}%  {cost / edges:9.0f}  {short(f)}")
PY

[[ "${SYSCALLS:-1}" == 1 ]] || exit 0
echo "== system calls per edge (strace -f -c, $EDGES more edges in the longer run), one edge every 20 ms"
short=50
syscalls() {   # syscalls N: total system calls of a run over an N-edge trace
    trace "$1" 1500 20 > "$work/t$1.jsonl"
    strace -f -c -o "$work/strace$1" "$BIN" run --config "$work/agent.yaml" --replay "$work/t$1.jsonl" \
        --broker "mqtt://127.0.0.1:$port" --outbox "$work/s$1" 2> "$work/s$1.log" & local tracer=$!
    wait_for "$work/s$1.log" "trace finished" 60
    sleep 1
    kill -TERM "$(pgrep -P $tracer)"
    wait $tracer || true
    awk '$NF == "total" {print $4}' "$work/strace$1"
}
a=$(syscalls $short)
b=$(syscalls $((short + EDGES)))
awk -v a="$a" -v b="$b" -v n="$EDGES" 'BEGIN { printf "  %.1f system calls per edge\n", (b - a) / n }'
calls() { awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $NF, $4}' "$1" | sort; }
join -a 2 -e 0 -o 0,1.2,2.2 <(calls "$work/strace$short") <(calls "$work/strace$((short + EDGES))") \
    | awk -v n="$EDGES" '{ d = ($3 - $2) / n; if (d >= 0.05) printf "    %-18s %5.2f\n", $1, d }' | sort -k2 -rn
