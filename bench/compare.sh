#!/usr/bin/env bash
# compare.sh [BUILD_DIR] [RMA BENCH OPTIONS...] - rma against plain TCP on
# loopback:
#   bandwidth: iperf3, one stream, 1 MiB writes, 5 s    vs  rma bench put/get
#   latency:   8-byte TCP busy-poll ping-pong (pingpong.c) vs rma 8-byte p50
# Extra arguments go to `rma bench` (e.g. --transport tcp, --window 32).
# Prints a side-by-side summary with ratios (rma / baseline).
# Needs iperf3 and a C compiler; skips what is missing.
set -u

BUILD=${1:-build}
shift || true
RMA=$BUILD/tools/rma/rma
HERE=$(cd "$(dirname "$0")" && pwd)
SIZES=8,1M,16M,64M

if [ ! -x "$RMA" ]; then
	echo "compare: $RMA not found; build first" >&2
	exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-compare.XXXXXX")
iperf_pid=
cleanup() {
	[ -n "$iperf_pid" ] && kill "$iperf_pid" 2>/dev/null && wait "$iperf_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Value of a top-level key in a flat one-line JSON object.
json_field() {
	printf '%s\n' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"
}

# ---- iperf3: one stream, loopback ----
iperf_gbps=
if command -v iperf3 >/dev/null; then
	port=$((20000 + RANDOM % 20000))
	iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$tmp/iperf-server.log" 2>&1 &
	iperf_pid=$!
	for _ in $(seq 50); do # the server needs a moment to listen
		if iperf3 -c 127.0.0.1 -p "$port" -l 1M -t 5 --json >"$tmp/iperf.json" 2>/dev/null; then
			break
		fi
		grep -q '"error"' "$tmp/iperf.json" 2>/dev/null || break
		sleep 0.1
	done
	wait "$iperf_pid" 2>/dev/null
	iperf_pid=
	if command -v jq >/dev/null; then
		bps=$(jq -r '.end.sum_received.bits_per_second // empty' "$tmp/iperf.json" 2>/dev/null)
	else
		bps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])' \
			"$tmp/iperf.json" 2>/dev/null)
	fi
	[ -n "$bps" ] && iperf_gbps=$(awk -v b="$bps" 'BEGIN { printf "%.2f", b / 1e9 }')
	[ -n "$iperf_gbps" ] || echo "compare: iperf3 gave no result (see its JSON: $(head -c 200 "$tmp/iperf.json"))" >&2
else
	echo "compare: iperf3 not installed; skipping the bandwidth baseline" >&2
fi

# ---- TCP ping-pong: 8 bytes each way, both ends busy-polling ----
pp_p50=
CC=${CC:-cc}
if "$CC" -O2 -o "$tmp/pingpong" "$HERE/pingpong.c" 2>"$tmp/cc.log"; then
	"$tmp/pingpong" -s 8 -n 100000 >"$tmp/pingpong.out"
	pp_p50=$(sed -n 's/^rtt_us_p50: //p' "$tmp/pingpong.out")
else
	echo "compare: cannot build pingpong.c: $(head -n 1 "$tmp/cc.log")" >&2
fi

# ---- rma bench ----
for op in put get; do
	if ! "$RMA" bench --op "$op" --sizes "$SIZES" --json "$@" >"$tmp/rma.$op" 2>"$tmp/rma.$op.err"; then
		echo "compare: rma bench --op $op failed: $(tail -n 1 "$tmp/rma.$op.err")" >&2
	fi
done
rma_field() { # rma_field OP SIZE KEY
	local line
	line=$(grep "\"size\":$2," "$tmp/rma.$1" | head -n 1)
	[ -n "$line" ] && json_field "$3" "$line"
}
ratio() { # ratio A B -> A/B with two decimals, or "-"
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}

# ---- summary ----
transport=$(json_field transport "$(head -n 1 "$tmp/rma.put" 2>/dev/null)")
iperf_mbps=
[ -n "$iperf_gbps" ] && iperf_mbps=$(awk -v g="$iperf_gbps" 'BEGIN { printf "%.0f", g * 1e9 / 8 / 1e6 }')
echo
echo "== bandwidth: loopback, rma over ${transport:-?} (MB = 10^6 bytes) =="
echo "iperf3, 1 stream, 1M writes: ${iperf_gbps:--} Gbit/s = ${iperf_mbps:--} MB/s"
printf '%6s | %12s %7s | %12s %7s\n' size "put MB/s" "ratio" "get MB/s" "ratio"
for size in 1048576 16777216 67108864; do
	put_bw=$(rma_field put "$size" bandwidth_MBps)
	get_bw=$(rma_field get "$size" bandwidth_MBps)
	printf '%6s | %12s %7s | %12s %7s\n' "$((size >> 20))M" "${put_bw:--}" \
		"$(ratio "$put_bw" "$iperf_mbps")" "${get_bw:--}" "$(ratio "$get_bw" "$iperf_mbps")"
done
echo
echo "== latency: 8 bytes, p50 microseconds =="
put_lat=$(rma_field put 8 latency_us_p50)
get_lat=$(rma_field get 8 latency_us_p50)
echo "TCP ping-pong RTT (busy-poll): ${pp_p50:--} us"
echo "rma put 8 B:                   ${put_lat:--} us (ratio $(ratio "$put_lat" "$pp_p50"))"
echo "rma get 8 B:                   ${get_lat:--} us (ratio $(ratio "$get_lat" "$pp_p50"))"
echo
echo "raw rma bench output:"
cat "$tmp/rma.put" "$tmp/rma.get"
