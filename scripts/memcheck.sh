#!/usr/bin/env bash
# memcheck.sh - valgrind memcheck on the CLI round trip:
#   rma target (serving on its progress thread) / rma put / rma get
# each under memcheck, with leak checking; any error, any definite or
# indirect leak, or a crc mismatch fails.  Skips (exit 0, with a message)
# when valgrind is not installed.
#   scripts/memcheck.sh [BUILD_DIR]      (default build)
set -euo pipefail

BUILD=${1:-build}
RMA=$BUILD/tools/rma/rma
SIZE=${MEMCHECK_SIZE:-4M}

if ! command -v valgrind >/dev/null 2>&1; then
	echo "memcheck: skipped (valgrind not installed: apt-get install valgrind)"
	exit 0
fi
[[ -x "$RMA" ]] || { echo "memcheck: no $RMA (make build first)" >&2; exit 1; }

# 99: memcheck found something (distinct from rma's own 1 and 2).
VG=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
    --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
    --track-origins=yes --num-callers=30 --quiet)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-memcheck.XXXXXX")
tpid=
cleanup() {
	exec 3>&- 2>/dev/null || true
	if [[ -n "$tpid" ]]; then kill -9 "$tpid" 2>/dev/null || true; wait "$tpid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "memcheck: FAIL: $*" >&2
	for f in "$tmp"/*.log "$tmp"/*.out; do
		[[ -s "$f" ]] && { echo "--- ${f##*/}:" >&2; cat "$f" >&2; }
	done
	exit 1
}

crc_of() { sed -n 's/^crc32c: //p' "$1"; }

# The target's stdin is a FIFO: closing it is the clean stop.
mkfifo "$tmp/stdin"
"${VG[@]}" --log-file="$tmp/target.log" "$RMA" target --size "$SIZE" \
	<"$tmp/stdin" >"$tmp/target.out" 2>&1 &
tpid=$!
exec 3>"$tmp/stdin"
token=
for _ in $(seq 600); do # valgrind starts slowly: up to 60 s
	token=$(sed -n 's/^advertisement: //p' "$tmp/target.out")
	[[ -n "$token" ]] && break
	kill -0 "$tpid" 2>/dev/null || fail "rma target exited early"
	sleep 0.1
done
[[ -n "$token" ]] || fail "rma target printed no advertisement in 60 s"

run() { # name, rma args...
	local name=$1
	shift
	local rc=0
	"${VG[@]}" --log-file="$tmp/$name.log" "$RMA" "$@" >"$tmp/$name.out" 2>&1 || rc=$?
	[[ $rc -eq 99 ]] && fail "memcheck errors in rma $name"
	[[ $rc -eq 0 ]] || fail "rma $name: status $rc"
}
run put put "$token" --fill 7 --size "$SIZE"
run get get "$token" --size "$SIZE"
put=$(crc_of "$tmp/put.out")
get=$(crc_of "$tmp/get.out")
[[ -n "$put" && "$put" == "$get" ]] || fail "get crc '$get' != put crc '$put'"

exec 3>&-
rc=0
wait "$tpid" || rc=$?
tpid=
[[ $rc -eq 99 ]] && fail "memcheck errors in rma target"
[[ $rc -eq 0 ]] || fail "rma target: status $rc"
final=$(crc_of "$tmp/target.out")
[[ "$final" == "$put" ]] || fail "target's final crc '$final' != put crc '$put'"
for f in "$tmp"/*.log; do
	[[ -s "$f" ]] && fail "memcheck wrote to ${f##*/}"
done
echo "memcheck: clean (rma target, put, get of $SIZE; crc32c $put)"
