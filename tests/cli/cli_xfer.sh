#!/bin/sh
# put and get at their edges: --file from a pipe (no size to stat).
RMA=$1
. "$(dirname "$0")/cli_lib.sh"

# ---- put --file from a pipe moves what the pipe holds ----
start_target --transport tcp --size 5
printf hello | "$RMA" put "$token" --file /dev/stdin >"$tmp/pipe.out" 2>"$tmp/pipe.err" ||
	fail "put from a pipe: status $?"
grep -q '^bytes: 5$' "$tmp/pipe.out" || fail "put from a pipe did not move 5 bytes"
printf hello | "$RMA" put "$token" -F /dev/stdin -s 5 >"$tmp/pipe5.out" 2>"$tmp/pipe5.err" ||
	fail "put from a pipe with --size 5: status $?"
printf hell | "$RMA" put "$token" -F /dev/stdin -s 5 >"$tmp/short.out" 2>"$tmp/short.err"
rc=$?
[ $rc -eq 1 ] || fail "put --size 5 from a 4-byte pipe: status $rc, want 1"
grep -q "only 4 bytes" "$tmp/short.err" || fail "no message naming the short pipe"
printf hello! | "$RMA" put "$token" -F /dev/stdin >"$tmp/long.out" 2>"$tmp/long.err" &&
	fail "put of 6 piped bytes into a 5-byte window succeeded"
stop_target
[ "$final" = "$(crc_of "$tmp/pipe.out")" ] ||
	fail "target's crc $final != the put's $(crc_of "$tmp/pipe.out")"
echo ok
