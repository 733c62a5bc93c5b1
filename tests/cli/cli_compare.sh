#!/bin/sh
# bench/compare --report on a run made up here: each ratio to the best
# other, by medians and within each run.  Three runs where rma-tcp moved
# 10, 20, 30 MB/s and fi-tcp 30, 10, 20: both medians are 20 (1.00x), but
# run by run rma-tcp was 0.33x, 2.00x and 1.50x: median 1.50x [0.33x-2.00x].
# Latency the other way round (lower is better): the same shape.  ucx-tcp
# (40, 5, 5 MB/s) is the worse peer by medians, so these ratios are to
# fi-tcp; but it is the better one in run 1, where a target against "the
# best of" both compares with it.
SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-compare.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp/run.json" <<'EOF' || fail "cannot write the run"
import json, sys
records = []
for run, (mine, other, ucx) in enumerate(((10, 30, 40), (20, 10, 5), (30, 20, 5)), 1):
    for system, v in (("rma-tcp", mine), ("fi-tcp", other), ("ucx-tcp", ucx)):
        records.append({"system": system, "op": "put", "size": 8, "run": run,
                        "bandwidth_MBps": v, "ops_per_s": v * 1e6 / 8,
                        "latency_us_p50": 100.0 / v, "latency_us_p99": 200.0 / v})
# the ping-pong: 8, 4 and 4 us (median 4), so rma-tcp's p50 (10, 5, 3.33;
# median 5) is 1.25x it by medians and 1.25x [0.83x-1.25x] run by run
for run, rtt in enumerate((8.0, 4.0, 4.0), 1):
    records.append({"system": "pingpong", "op": "rtt", "size": 8, "run": run,
                    "latency_us_p50": rtt, "latency_us_p99": 2 * rtt})
json.dump({"command": "bench/compare", "commit": "test",
           "config": {"runs": 3, "window": 16, "sizes": [8], "rate_window": 0},
           "systems": [{"name": "rma-tcp", "class": "tcp"},
                       {"name": "fi-tcp", "class": "tcp"},
                       {"name": "ucx-tcp", "class": "tcp"}],
           "records": records}, open(sys.argv[1], "w"))
EOF

out=$(python3 "$SRC/bench/compare" --report "$tmp/run.json") ||
	fail "bench/compare --report failed: $out"
echo "$out" | grep -q "^== put bandwidth" || fail "no put bandwidth table: $out"
# bandwidth, latency and message rate: 1.00x by medians
n=$(echo "$out" | grep -c "^rma-tcp / best  *1\.00x fi-tcp")
[ "$n" -eq 3 ] || fail "expected three 1.00x ratios of medians, got $n: $out"
# bandwidth and message rate run by run: 1.50x [0.33x-2.00x]
n=$(echo "$out" | grep -c "^rma-tcp / best, each run  *1\.50x \[0\.33x-2\.00x\]")
[ "$n" -eq 2 ] || fail "expected two run-by-run rows 1.50x [0.33x-2.00x], got $n: $out"
# latency p50 and p99: 1/1.50 = 0.67x [0.50x-3.00x] run by run
echo "$out" | grep -q "^rma-tcp / best, each run  *0\.67x \[0\.50x-3\.00x\]  *0\.67x \[0\.50x-3\.00x\]" ||
	fail "latency's run-by-run row is wrong: $out"
# The issues' targets.  Against the ping-pong: 1.25x, held in all three runs.
echo "$out" | grep -q "^rma-tcp put 8 p50 <= 1\.30x pingpong  *1\.25x  *1\.25x \[0\.83x-1\.25x\]  *3 of 3  *holds$" ||
	fail "the ping-pong target is wrong: $out"
# Below the better peer (strictly): by medians that is fi-tcp's 5 us,
# 1.00x, a miss though two runs of three held; run by run 10/2.5, 5/10 and
# 3.33/5 (ucx-tcp the better in run 1).  p99 no worse: 1.00x holds.
echo "$out" | grep -q "^rma-tcp put 8 p50 < 1\.00x best of ucx-tcp,fi-tcp  *1\.000x  *0\.67x \[0\.50x-4\.00x\]  *2 of 3  *MISSES$" ||
	fail "the p50 target against the peers is wrong: $out"
echo "$out" | grep -q "^rma-tcp put 8 p99 <= 1\.00x best of ucx-tcp,fi-tcp  *1\.000x  *0\.67x \[0\.50x-4\.00x\]  *2 of 3  *holds$" ||
	fail "the p99 target is wrong: $out"
# (1.000x: at the bound, a third decimal shows which side.)  What this
# run left out (get, the other sizes, the rate phase) is counted apart.
echo "$out" | grep -q "^2 of 3 hold by the medians; 1 of 3 hold in every run; 17 more not measured" ||
	fail "the targets' count is wrong: $out"
echo "$out" | grep -q "ping-pong's 8-byte p50 by run: 8\.00, 4\.00, 4\.00 us (it moved 2\.0x" ||
	fail "the host's line is wrong: $out"

# The order of a run's steps (run_order): a class at a time, each class
# every system's first op, then every one's second in the reverse order,
# each limit once among its class's steps; the first op alternates.
python3 - "$SRC/bench/compare" <<'EOF' || fail "the order of a run's steps is wrong"
import sys
import importlib.machinery, importlib.util
loader = importlib.machinery.SourceFileLoader("compare", sys.argv[1])
cmp = importlib.util.module_from_spec(importlib.util.spec_from_loader("compare", loader))
loader.exec_module(cmp)
class System:
    def __init__(self, name, klass):
        self.name, self.klass = name, klass
systems = [System(n, k) for n, k in (("rma-tcp", "tcp"), ("rma-shm", "memory"),
                                     ("rma-ofi", "tcp"), ("ucx-tcp", "tcp"),
                                     ("ucx-posix", "memory"), ("fi-tcp", "tcp"),
                                     ("fi-shm", "memory"))]
klass = {s.name: s.klass for s in systems}
limits = [(n, None) for n in ("memcpy", "iperf3", "pingpong")]
klass.update(memcpy="memory", iperf3="tcp", pingpong="tcp")  # the limits' own classes
firsts = set()
for run in range(6):
    steps, order, ops = cmp.run_order(run, systems, limits, None, 1)
    labels = [label for label, _ in steps]
    want = sorted([s.name + " put" for s in systems] + [s.name + " get" for s in systems] +
                  [n for n, _ in limits])
    assert sorted(labels) == want, ("every step once", run, labels)
    assert ops == (("put", "get") if run % 2 == 0 else ("get", "put")), ("ops", run, ops)
    classes = [klass[l.split()[0]] for l in labels]
    changes = sum(a != b for a, b in zip(classes, classes[1:]))
    assert changes == 1, ("a class at a time", run, labels)
    for k in ("tcp", "memory"):
        mine = [l for l, c in zip(labels, classes) if c == k and " " in l]
        first = [l.split()[0] for l in mine if l.endswith(ops[0])]
        second = [l.split()[0] for l in mine if l.endswith(ops[1])]
        assert mine == [n + " " + ops[0] for n in first] + [n + " " + ops[1] for n in second], \
            ("every first op before every second", run, mine)
        assert second == first[::-1], ("the second op reversed", run, mine)
        firsts.add(first[0])
    assert [s.name for s in order] == [l.split()[0] for l in labels
                                       if " " in l and l.endswith(ops[0])], ("order", run)
# shuffled: over six runs more than two systems went first in a class
assert len(firsts) > 2, ("shuffled", firsts)
EOF
echo "ok: ratios of medians and run by run, the targets, and the order of a run"
