#!/usr/bin/env bash
# insn.sh BUILD_DIR [put|get] [BYTES] - instructions the initiator executes
# for ONE op round trip (posted, completion taken), counted by callgrind.
#
# A target (`rma target`) runs natively in its own process; the initiator
# (bench/insn_put.c, built here with cc against BUILD_DIR's librma) runs
# under valgrind --tool=callgrind with manual progress, waiting in the
# kernel between ops.  It runs twice, with N1 and N2 ops; (I2 - I1) / (N2 -
# N1) is the cost of one op, with start-up, connect and exit cancelled.
# Env: N1 (default 1000), N2 (default 2000), CC (default cc).
# Prints "insn_per_op: X" last; exits non-zero when something fails.
set -u

BUILD=${1:-build}
OP=${2:-put}
BYTES=${3:-8}
N1=${N1:-1000}
N2=${N2:-2000}
CC=${CC:-cc}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RMA=$BUILD/tools/rma/rma

die() { echo "insn: $*" >&2; exit 1; }
[ -x "$RMA" ] || die "$RMA not found; build first"
command -v valgrind >/dev/null || die "valgrind not installed (sudo apt-get install -y valgrind)"
LIBDIR=$(cd "$BUILD" && pwd)
[ -e "$LIBDIR/librma.so" ] || die "$LIBDIR/librma.so not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-insn.XXXXXX")
target_pid=
cleanup() {
	if [ -n "$target_pid" ]; then
		kill "$target_pid" 2>/dev/null
		wait "$target_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$CC" -O2 -g -std=c11 -I"$ROOT/include" -o "$tmp/insn_put" "$HERE/insn_put.c" \
	-L"$LIBDIR" -lrma -Wl,-rpath,"$LIBDIR" || die "cannot build insn_put.c"

# stdin /dev/null: the target serves until SIGTERM.
"$RMA" target --size 64K </dev/null >"$tmp/target.out" 2>"$tmp/target.err" &
target_pid=$!
token=
for _ in $(seq 100); do
	token=$(sed -n 's/^advertisement: //p' "$tmp/target.out")
	[ -n "$token" ] && break
	kill -0 "$target_pid" 2>/dev/null || break
	sleep 0.1
done
[ -n "$token" ] || die "the target printed no advertisement: $(cat "$tmp/target.err")"

# run N -> prints the total instruction count, and the client's output
# to $tmp/client.N.
count() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" \
		"$tmp/insn_put" "$token" "$1" "$OP" "$BYTES" >"$tmp/client.$1" 2>"$tmp/vg.$1" ||
		die "insn_put $1 failed: $(grep -v '^==' "$tmp/vg.$1" | tail -n 3)"
	sed -n 's/^summary: //p; s/^totals: //p' "$tmp/cg.$1" | head -n 1
}
i1=$(count "$N1")
i2=$(count "$N2")
p1=$(sed -n 's/^progress_calls: //p' "$tmp/client.$N1")
p2=$(sed -n 's/^progress_calls: //p' "$tmp/client.$N2")
echo "op: $OP $BYTES bytes"
echo "insn_total_N$N1: $i1 (rma_progress calls: $p1)"
echo "insn_total_N$N2: $i2 (rma_progress calls: $p2)"
awk -v a="$i1" -v b="$i2" -v n1="$N1" -v n2="$N2" -v p1="$p1" -v p2="$p2" 'BEGIN {
	printf "progress_calls_per_op: %.3f\n", (p2 - p1) / (n2 - n1)
	printf "insn_per_op: %.0f\n", (b - a) / (n2 - n1)
}'
