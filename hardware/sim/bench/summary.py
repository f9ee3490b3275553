"""Summary of hardware/sim/bench.sh's raw figures: per boot, parkwise-agent / C agent from the same boot; then
min-max over the boots. Input lines: "boot=B phase=P KIND [NAME] key=value ...". Prints figures, judges nothing."""
import statistics
import sys
from collections import defaultdict


def parse(path):
    rows = []
    for line in open(path):
        words = line.split()
        if len(words) < 3 or not words[0].startswith("boot=") or not words[1].startswith("phase="):
            continue
        row = {"boot": int(words[0][5:]), "phase": words[1][6:], "kind": words[2], "name": None}
        for w in words[3:]:
            if "=" in w:
                k, v = w.split("=", 1)
                try:
                    row[k] = float(v)
                except ValueError:
                    row[k] = v
            elif row["name"] is None:
                row["name"] = w
        rows.append(row)
    return rows


def pick(rows, boot, phase, kind, name, key):
    for r in rows:
        if r["boot"] == boot and r["phase"] == phase and r["kind"] == kind and r["name"] == name and key in r:
            return r[key] if isinstance(r[key], float) else None
    return None


def span(values, fmt="{:.2f}"):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "–" + fmt.format(hi)


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def main(path):
    rows = parse(path)
    boots = sorted({r["boot"] for r in rows})
    table = []  # (label, parkwise values, C values, ratio values, unit)

    def add(label, pw, c, unit, fmt="{:.2f}"):
        table.append((label, span(pw, fmt), span(c, fmt), span([ratio(a, b) for a, b in zip(pw, c)]), unit))

    for phase, title in (("tmpfs", "outbox on tmpfs"), ("vda", "outbox on ext4 virtio disk"),
                         ("vdb", "outbox on SD-like disk (throttled)"), ("loaded", "tmpfs, host loaded")):
        kind = "lat" if phase in ("tmpfs", "loaded") else "lat-" + phase
        ph = {"vda": "disk", "vdb": "sd"}.get(phase, phase)
        for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            add(f"edge → subscriber {label}, {title}", [pick(rows, b, ph, kind, "pw", key) for b in boots],
                [pick(rows, b, ph, kind, "c", key) for b in boots], "ms")
    add("CPU per edge (schedstat, all threads)", [pick(rows, b, "tmpfs", "lat", "pw", "cpu_ms_per_edge") for b in boots],
        [pick(rows, b, "tmpfs", "lat", "c", "cpu_ms_per_edge") for b in boots], "ms", "{:.3f}")
    add("CPU per edge (utime+stime)", [pick(rows, b, "tmpfs", "lat", "pw", "ticks_per_edge") for b in boots],
        [pick(rows, b, "tmpfs", "lat", "c", "ticks_per_edge") for b in boots], "ticks (10 ms)", "{:.3f}")
    add("  of which in the kernel (stime)", [pick(rows, b, "tmpfs", "lat", "pw", "kernel_ticks_per_edge") for b in boots],
        [pick(rows, b, "tmpfs", "lat", "c", "kernel_ticks_per_edge") for b in boots], "ticks (10 ms)", "{:.3f}")
    add("system calls per edge (strace -c -f)", [pick(rows, b, "strace", "syscalls", "pw", "per_edge") for b in boots],
        [pick(rows, b, "strace", "syscalls", "c", "per_edge") for b in boots], "calls", "{:.1f}")
    add("system calls per edge, less the idle rate", [pick(rows, b, "strace", "syscalls", "pw", "per_edge_less_idle") for b in boots],
        [pick(rows, b, "strace", "syscalls", "c", "per_edge_less_idle") for b in boots], "calls", "{:.1f}")
    add("system calls per edge, less idle and clock_gettime", [pick(rows, b, "strace", "syscalls", "pw", "per_edge_less_idle_and_clock") for b in boots],
        [pick(rows, b, "strace", "syscalls", "c", "per_edge_less_idle_and_clock") for b in boots], "calls", "{:.1f}")
    add("fsync + fdatasync per edge (strace)", [pick(rows, b, "strace", "syscalls", "pw", "syncs_per_edge") for b in boots],
        [pick(rows, b, "strace", "syscalls", "c", "syncs_per_edge") for b in boots], "calls")
    add("system calls per second idle (strace, 10 s)", [pick(rows, b, "strace", "syscalls", "pw", "idle_per_s") for b in boots],
        [pick(rows, b, "strace", "syscalls", "c", "idle_per_s") for b in boots], "calls/s", "{:.1f}")
    add("idle wake-ups (voluntary switches, all threads)", [pick(rows, b, "idle", "idle", "pw", "per_s") for b in boots],
        [pick(rows, b, "idle", "idle", "c", "per_s") for b in boots], "per s", "{:.3f}")

    def spawn_median(b, name, phase="spawn"):
        v = [r["first_publish_ms"] for r in rows if r["boot"] == b and r["phase"] == phase and r["kind"] == name
             and isinstance(r.get("first_publish_ms"), float)]
        return statistics.median(v) if v else None
    add("spawn → first publish (median)", [spawn_median(b, "pw") for b in boots], [spawn_median(b, "c") for b in boots],
        "ms", "{:.1f}")
    add("  the same, guest ASLR off (no TCG retranslation)", [spawn_median(b, "pw", "spawn-fixed") for b in boots],
        [spawn_median(b, "c", "spawn-fixed") for b in boots], "ms", "{:.1f}")
    add("RSS after the tmpfs run", [kb / 1024 if (kb := pick(rows, b, "tmpfs", "lat", "pw", "rss_kb")) else None for b in boots],
        [kb / 1024 if (kb := pick(rows, b, "tmpfs", "lat", "c", "rss_kb")) else None for b in boots], "MB")

    print(f"\n=== side by side, {len(boots)} boot(s): parkwise-agent / C agent, min–max over boots ===")
    w = max(len(t[0]) for t in table)
    print(f"{'':{w}}  {'parkwise':>15}  {'C agent':>15}  {'ratio':>11}")
    for label, pw, c, r, unit in table:
        print(f"{label:{w}}  {pw:>15}  {c:>15}  {r:>11}  {unit}")

    # The headline of each closing note: what one paced edge costs parkwise against the C agent, per boot.
    print("\n=== per edge, parkwise / C agent (outbox on tmpfs), each boot ===")
    for b in boots:
        fig = {k: ratio(pick(rows, b, "tmpfs", "lat", "pw", k), pick(rows, b, "tmpfs", "lat", "c", k))
               for k in ("p50_ms", "p99_ms", "cpu_ms_per_edge")}
        print(f"boot {b}: p50 ×{span([fig['p50_ms']])}  p99 ×{span([fig['p99_ms']])}  CPU ×{span([fig['cpu_ms_per_edge']])}")

    # An older build in the same boots (PARKWISE_BENCH_BASELINE): before and after a change, without boot-to-boot noise.
    if any(pick(rows, b, "tmpfs", "lat", "pb", "p50_ms") is not None for b in boots):
        print(f"\n=== the baseline build in the same boots (outbox on tmpfs): parkwise / baseline, baseline / C agent ===")
        for key, label, unit in (("p50_ms", "edge → subscriber p50", "ms"), ("p99_ms", "edge → subscriber p99", "ms"),
                                 ("cpu_ms_per_edge", "CPU per edge (schedstat)", "ms")):
            pw = [pick(rows, b, "tmpfs", "lat", "pw", key) for b in boots]
            pb = [pick(rows, b, "tmpfs", "lat", "pb", key) for b in boots]
            c = [pick(rows, b, "tmpfs", "lat", "c", key) for b in boots]
            print(f"{label:26} parkwise {span(pw, '{:.3f}'):>13}  baseline {span(pb, '{:.3f}'):>13}  "
                  f"parkwise/baseline {span([ratio(a, x) for a, x in zip(pw, pb)]):>11}  "
                  f"baseline/C {span([ratio(x, y) for x, y in zip(pb, c)]):>11}  {unit}")

    print("\n=== p99 growth under host load (loaded p99 / quiet tmpfs p99, same boot) ===")
    for name, who in (("pw", "parkwise"), ("c", "C agent")):
        g = [ratio(pick(rows, b, "loaded", "lat", name, "p99_ms"), pick(rows, b, "tmpfs", "lat", name, "p99_ms")) for b in boots]
        print(f"{who:9} ×{span(g)}")

    print("\n=== what reached the disk, per parkwise event (sectors written and flushes from /sys/block/vdX/stat) ===")
    for dev, title in (("vda", "ext4 virtio disk"), ("vdb", "SD-like, throttled")):
        ph = "disk" if dev == "vda" else "sd"
        fig = {k: span([pick(rows, b, ph, "disk", dev, k) for b in boots], f) for k, f in
               (("bytes_per_event", "{:.0f}"), ("data_writes_per_event", "{:.2f}"), ("flushes_per_event", "{:.2f}"))}
        print(f"{title:20} bytes/event {fig['bytes_per_event']:>11}  data write requests/event {fig['data_writes_per_event']:>9}"
              f"  flushes/event {fig['flushes_per_event']:>9}")

    print("\n=== a burst of edges 5 ms apart (what a group commit is for): parkwise event, then the C agent's ===")
    for dev, title in (("vda", "ext4 virtio disk"), ("vdb", "SD-like, throttled")):
        ph = "disk" if dev == "vda" else "sd"
        fig = {k: span([pick(rows, b, ph, "disk-burst", dev, k) for b in boots], f) for k, f in
               (("bytes_per_event", "{:.0f}"), ("flushes_per_event", "{:.2f}"))}
        last = {n: [pick(rows, b, ph, "burst-" + dev, n, "last_ms") for b in boots] for n in ("pw", "c")}
        got = {n: span([pick(rows, b, ph, "burst-" + dev, n, "got") for b in boots], "{:.0f}") for n in ("pw", "c")}
        print(f"{title:20} bytes/event {fig['bytes_per_event']:>11}  flushes/event {fig['flushes_per_event']:>9}"
              f"  first edge → last message: parkwise {span(last['pw'], '{:.0f}')} ms ({got['pw']} events),"
              f" C {span(last['c'], '{:.0f}')} ms ({got['c']}), ratio {span([ratio(a, b) for a, b in zip(last['pw'], last['c'])])}")

    print("\n=== top system calls (first boot) ===")
    for name in ("pw", "c"):
        top = [line.split() for line in open(path) if line.startswith(f"boot={boots[0]} ") and f" syscall-top {name} " in line]
        print(f"{name:3} " + ", ".join(f"{t[4]} {t[5].split('=')[1]}" for t in top))

    print("\n=== idle threads (first boot): voluntary switches per second ===")
    for line in open(path):
        if line.startswith(f"boot={boots[0]} ") and " idle-thread " in line:
            words = line.split()
            kv = dict(x.split("=", 1) for x in words[4:] if "=" in x)
            print(f"{words[3]:3} tid {kv.get('tid', '?'):>5} {kv.get('comm', '?'):16} {kv.get('per_s', '?'):>8}/s"
                  f"  cpu {kv.get('cpu_ms', '?')} ms")

    loads = defaultdict(list)
    for r in rows:
        if r["kind"] in ("hostload", "hostload-end") and isinstance(r.get("load1"), float):
            loads[r["phase"]].append(r["load1"])
    print("\n=== host load (1-min loadavg of the 2-core host at the start and end of each phase, min–max over boots) ===")
    print("  ".join(f"{p} {span(v)}" for p, v in loads.items()))


if __name__ == "__main__":
    main(sys.argv[1])
