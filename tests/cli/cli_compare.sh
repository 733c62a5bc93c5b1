#!/bin/sh
# bench/compare --report on a run made up here: each ratio to the best
# other, by medians and within each run.  Three runs where rma-tcp moved
# 10, 20, 30 MB/s and fi-tcp 30, 10, 20: both medians are 20 (1.00x), but
# run by run rma-tcp was 0.33x, 2.00x and 1.50x: median 1.50x [0.33x-2.00x].
# Latency the other way round (lower is better): the same shape.
SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-compare.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp/run.json" <<'EOF' || fail "cannot write the run"
import json, sys
records = []
for run, (mine, other) in enumerate(((10, 30), (20, 10), (30, 20)), 1):
    for system, v in (("rma-tcp", mine), ("fi-tcp", other)):
        records.append({"system": system, "op": "put", "size": 8, "run": run,
                        "bandwidth_MBps": v, "ops_per_s": v * 1e6 / 8,
                        "latency_us_p50": 100.0 / v, "latency_us_p99": 200.0 / v})
json.dump({"command": "bench/compare", "commit": "test",
           "config": {"runs": 3, "window": 16, "sizes": [8], "rate_window": 0},
           "systems": [{"name": "rma-tcp", "class": "tcp"},
                       {"name": "fi-tcp", "class": "tcp"}],
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
echo "ok: ratios of medians and run by run"
