#!/bin/sh
# bench/scale --report on rounds made up here.  Time per op in the rate
# phase: one peer 10, 20, 30 us (median 20); 64 peers 13, 23, 21 (median
# 21: 1.050x, holds by the medians), though within each round 1.30x,
# 1.15x and 0.70x (median 1.15x: the verdict is the medians');
# 100,000 regions 12, 23, 40 (median 23: 1.150x, misses), within each
# round 1.20x, 1.15x, 1.33x.  The ping-pong over 64 connections against
# one: p50 15, 12, 13 against 10, 10, 10.
SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-scale.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp/run.json" <<'EOF' || fail "cannot write the rounds"
import json, sys
recs = []
for rnd, (plain, peers, regions, pp, ppn) in enumerate(
        ((10, 13, 12, 10, 15), (20, 23, 23, 10, 12), (30, 21, 40, 10, 13)), 1):
    for case, v in (("plain", plain), ("peers", peers), ("regions", regions)):
        recs.append({"case": case, "round": rnd, "us_per_op": v, "p50": 2.0 * v,
                     "p99": 4.0 * v, "cpu": v, "target_cpu": v / 2})
    recs.append({"case": "pingpong", "round": rnd, "p50": pp, "p99": 2 * pp})
    recs.append({"case": "pingpong-N", "round": rnd, "p50": ppn, "p99": 2 * ppn})
json.dump({"date": "test", "transport": "tcp", "peers": 64, "regions": 100000,
           "rounds": 3, "duration_s": 1, "pingpong_iters": 1000, "records": recs},
          open(sys.argv[1], "w"))
EOF

out=$(python3 "$SRC/bench/scale" --report "$tmp/run.json") ||
	fail "bench/scale --report failed: $out"
echo "$out" | grep -q "^1 peer, 1 region  *20\.00 \[10\.00-30\.00\]  *40\.00 \[20\.00-60\.00\]" ||
	fail "one peer's row is wrong: $out"
echo "$out" | grep -q "^64 peers  *us/op (16 in flight)  *1\.050x  *1\.15x \[0\.70-1\.30\]  *holds$" ||
	fail "64 peers' time per op is wrong: $out"
echo "$out" | grep -q "^100000 regions  *us/op (16 in flight)  *1\.150x  *1\.20x \[1\.15-1\.33\]  *MISSES$" ||
	fail "100,000 regions' time per op is wrong: $out"
echo "$out" | grep -q "^100000 regions  *target cpu us/op  *1\.150x" ||
	fail "the target's CPU ratio is wrong: $out"
echo "$out" | grep -q "^pingpong, 64 connections  *p50 us  *1\.300x  *1\.30x \[1\.20-1\.50\]  *$" ||
	fail "the ping-pong's ratio is wrong: $out"
echo "$out" | grep -q "^1 of 2 hold: time per op within 10% of one peer and one region" ||
	fail "the count is wrong: $out"
echo "ok: ratios of medians and within each round, and the verdicts"
