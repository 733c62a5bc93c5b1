#!/usr/bin/env bash
# demo.sh BUILD_DIR - a one-minute tour of rma on this host:
#   1. start `rma target --size 64M`, fed by a FIFO so closing it stops it;
#   2. put the --fill 7 pattern into the whole buffer, get it back to a file;
#   3. check put crc == get crc == the target's final crc (PASS/FAIL lines);
#   4. a short `rma bench` of put and get as one table.
# Exits non-zero on any mismatch or failure.  Children are cleaned up on exit.
set -u

BUILD=${1:-build}
RMA=$BUILD/tools/rma/rma
SIZE=64M
SEED=7

if [ ! -x "$RMA" ]; then
	echo "demo: $RMA not found; build first (cmake -S . -B $BUILD && cmake --build $BUILD)" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-demo.XXXXXX")
target_pid=
failures=0

cleanup() {
	exec 3>&- 2>/dev/null
	if [ -n "$target_pid" ] && kill -0 "$target_pid" 2>/dev/null; then
		kill "$target_pid" 2>/dev/null
		wait "$target_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "PASS: $*"; }
field() { sed -n "s/^$1: //p" "$2" | head -n 1; }

# 1. The target reads its stdin from a FIFO that we hold open on fd 3.
mkfifo "$tmp/stdin"
"$RMA" target --size "$SIZE" <"$tmp/stdin" >"$tmp/target.out" 2>"$tmp/target.err" &
target_pid=$!
exec 3>"$tmp/stdin" # meets the target's open of the read end

token=
for _ in $(seq 100); do
	token=$(field advertisement "$tmp/target.out")
	[ -n "$token" ] && break
	kill -0 "$target_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$token" ]; then
	echo "FAIL: the target printed no advertisement" >&2
	cat "$tmp/target.err" >&2
	exit 1
fi
echo "target: pid $target_pid, $SIZE bytes, token ${token:0:24}... (${#token} chars)"

# 2. Put the pattern, then read everything back.
echo "--- rma put TOKEN --fill $SEED"
if "$RMA" put "$token" --fill "$SEED" >"$tmp/put.out"; then
	sed 's/^/    /' "$tmp/put.out"
else
	fail "rma put exited with $?"
fi
echo "--- rma get TOKEN --out FILE"
if "$RMA" get "$token" --out "$tmp/got.bin" >"$tmp/get.out"; then
	sed 's/^/    /' "$tmp/get.out"
else
	fail "rma get exited with $?"
fi

# 3. Stop the target by closing its stdin; it prints the buffer's crc.
exec 3>&-
wait "$target_pid"
rc=$?
target_pid=
[ "$rc" -eq 0 ] || fail "rma target exited with $rc"

put_crc=$(field crc32c "$tmp/put.out")
get_crc=$(field crc32c "$tmp/get.out")
target_crc=$(field crc32c "$tmp/target.out")
got_bytes=$(stat -c %s "$tmp/got.bin" 2>/dev/null || echo 0)

if [ -n "$put_crc" ] && [ "$put_crc" = "$get_crc" ]; then
	pass "put crc32c $put_crc == get crc32c $get_crc"
else
	fail "put crc32c '${put_crc}' != get crc32c '${get_crc}'"
fi
if [ -n "$put_crc" ] && [ "$put_crc" = "$target_crc" ]; then
	pass "target's final crc32c $target_crc == put crc32c"
else
	fail "target's final crc32c '${target_crc}' != put crc32c '${put_crc}'"
fi
if [ "$got_bytes" -eq $((64 << 20)) ]; then
	pass "get wrote $got_bytes bytes to its --out file"
else
	fail "get wrote $got_bytes bytes, expected $((64 << 20))"
fi

# 4. A short benchmark of both operations (each starts its own target).
human() { # 65536 -> 64K: the way --sizes spells it
	local n=$1 u=
	for s in K M G; do
		[ "$n" -ge 1024 ] && [ $((n % 1024)) -eq 0 ] || break
		n=$((n / 1024))
		u=$s
	done
	echo "$n$u"
}
json_field() { # json_field KEY LINE: the value of a flat JSON key
	printf '%s\n' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"
}
for op in put get; do
	if ! "$RMA" bench --op "$op" --sizes 8,64K,1M,16M --duration 200ms --json \
		>"$tmp/bench.$op" 2>"$tmp/bench.$op.err"; then
		fail "rma bench --op $op: $(tail -n 1 "$tmp/bench.$op.err")"
	fi
done
echo "--- rma bench --sizes 8,64K,1M,16M (transport $(json_field transport "$(head -n 1 "$tmp/bench.put")"))"
printf '%8s | %12s %10s | %12s %10s\n' size "put MB/s" "put p50us" "get MB/s" "get p50us"
paste -d '\n' "$tmp/bench.put" "$tmp/bench.get" | while read -r put_line && read -r get_line; do
	printf '%8s | %12s %10s | %12s %10s\n' "$(human "$(json_field size "$put_line")")" \
		"$(json_field bandwidth_MBps "$put_line")" "$(json_field latency_us_p50 "$put_line")" \
		"$(json_field bandwidth_MBps "$get_line")" "$(json_field latency_us_p50 "$get_line")"
done

if [ "$failures" -ne 0 ]; then
	echo "demo: $failures check(s) FAILED"
	exit 1
fi
echo "demo: all checks passed"
