#!/bin/sh
# rma target (64 MiB, zeros) / put --fill 7 / get: the put's, the get's and
# the target's final crc32c all agree, and differ from the zeros'.
# CLI_TRANSPORT names the transport (default tcp).
RMA=$1
. "$(dirname "$0")/cli_lib.sh"
SIZE=67108864

start_target --transport "${CLI_TRANSPORT:-tcp}" --size $SIZE
"$RMA" get "$token" --size $SIZE >"$tmp/get0.out" 2>"$tmp/get0.err" || fail "first get: status $?"
zero=$(crc_of "$tmp/get0.out")
[ -n "$zero" ] || fail "get printed no crc32c"

"$RMA" put "$token" --fill 7 --size $SIZE >"$tmp/put.out" 2>"$tmp/put.err" || fail "put: status $?"
put=$(crc_of "$tmp/put.out")
[ -n "$put" ] || fail "put printed no crc32c"
[ "$put" != "$zero" ] || fail "pattern 7 has the crc of zeros ($put)"
grep -q "^bytes: $SIZE\$" "$tmp/put.out" || fail "put did not report $SIZE bytes"

"$RMA" get "$token" --size $SIZE >"$tmp/get.out" 2>"$tmp/get.err" || fail "get: status $?"
get=$(crc_of "$tmp/get.out")
[ "$get" = "$put" ] || fail "get crc $get != put crc $put"

stop_target
[ "$final" = "$put" ] || fail "target's final crc $final != put crc $put"
echo "ok: crc32c $put"
