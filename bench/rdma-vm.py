#!/usr/bin/env python3
"""rdma-vm.py DIR - the table of a bench/rdma-vm.sh run: per size, each
system's bandwidth (MB/s) and 8-byte latency (us) as the range over runs
(min-max, median in brackets), and rma's ratios to perftest and UCX."""
import glob
import json
import os
import re
import statistics
import sys

d = sys.argv[1]
vals = {}  # (system, op, size) -> [value per run]


def add(key, v):
    vals.setdefault(key, []).append(v)


for path in sorted(glob.glob(os.path.join(d, "r*.log"))):
    name = os.path.basename(path)[:-4]
    m = re.match(r"r(\d+)\.(\w+)\.(.*)$", name)
    if not m:
        continue
    kind, rest = m.group(2), m.group(3)
    text = open(path, errors="replace").read()
    if kind == "perftest":
        what, size = rest.split(".")
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 5 and f[0] == size and f[1].isdigit():
                if what.endswith("_bw"):  # BW average, Gb/s
                    add(("perftest", what[:-3], int(size)), float(f[3]) * 1000 / 8)
                else:  # t_typical, us (write: half a round trip)
                    add(("perftest", what, 8), float(f[4]))
    elif kind == "ucx":
        what, size = rest.split(".")
        for line in text.splitlines():
            if line.strip().startswith("Final:"):
                f = line.split()[1:]
                if what.endswith("_bw"):
                    add(("ucx", what[:-3], int(size)), float(f[4]))
                else:  # typical latency, us (half a round trip)
                    add(("ucx", what, 8), float(f[1]))
    elif kind in ("rma", "fi"):
        system = "fi-verbs" if kind == "fi" else "rma-" + rest.split(".")[0]
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            op = j["op"]
            if j["size"] == 8:
                add((system, op + "_lat", 8), j["latency_us_p50"])
            else:
                add((system, op, j["size"]), j["bandwidth_MBps"])


def rng(key):
    v = vals.get(key)
    if not v:
        return "-"
    return "%.1f-%.1f [%.1f]" % (min(v), max(v), statistics.median(v))


def med(key):
    v = vals.get(key)
    return statistics.median(v) if v else None


def ratio(a, b):
    return "%.2fx" % (a / b) if a and b else "-"


print("| op | size | rma-verbs | rma-ofi | fi-verbs | perftest | ucx | rma/perftest | rma/ucx | rma-ofi/fi |")
print("|---|---|---|---|---|---|---|---|---|---|")
for op, pt in (("put", "write"), ("get", "read")):
    for size in (65536, 1048576, 16777216):
        r, o, f = ("rma-verbs", op, size), ("rma-ofi", op, size), ("fi-verbs", op, size)
        p, u = ("perftest", pt, size), ("ucx", op, size)
        print("| %s MB/s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            op, size, rng(r), rng(o), rng(f), rng(p), rng(u),
            ratio(med(r), med(p)), ratio(med(r), med(u)), ratio(med(o), med(f))))
# rma's latency is a completed op: a put's is a full round trip, so it
# stands beside twice perftest's and UCX's write latency (half a round
# trip each); ib_read_lat is a whole read already.
for op, pt, scale in (("put", "write_lat", 2), ("get", "read_lat", 1)):
    r, o, f = ("rma-verbs", op + "_lat", 8), ("rma-ofi", op + "_lat", 8), ("fi-verbs", op + "_lat", 8)
    p = ("perftest", pt, 8)
    u = ("ucx", "put_lat", 8) if op == "put" else None
    pm = med(p) * scale if med(p) else None
    um = med(u) * 2 if u and med(u) else None
    print("| %s 8 B us | 8 | %s | %s | %s | %s%s | %s%s | %s | %s | %s |" % (
        op, rng(r), rng(o), rng(f), rng(p), " (x%d)" % scale if scale > 1 else "",
        rng(u) if u else "-", " (x2)" if u else "", ratio(med(r), pm),
        ratio(med(r), um), ratio(med(o), med(f))))
