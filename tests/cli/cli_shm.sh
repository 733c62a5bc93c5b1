#!/bin/sh
# rma target --transport shm, with plain and with --alloc memory: put --fill,
# get, and the target's final crc32c agree (both sides offer only shm, so
# nothing else can carry them).  Skips where `rma info` says shm is unusable.
RMA=$1
. "$(dirname "$0")/cli_lib.sh"
SIZE=16777216

"$RMA" info >"$tmp/info.out" 2>&1 || fail "info: status $?"
grep -q '^transport: shm level=memory available=yes' "$tmp/info.out" || {
	grep '^transport: shm' "$tmp/info.out"
	echo "SKIP: shm not usable here"
	exit 77
}

for mode in plain alloc; do
	extra=
	[ $mode = alloc ] && extra=--alloc
	start_target --transport shm --size $SIZE $extra
	"$RMA" put "$token" --transport shm --fill 9 --size $SIZE \
		>"$tmp/put.out" 2>"$tmp/put.err" || fail "$mode put: status $?"
	put=$(crc_of "$tmp/put.out")
	[ -n "$put" ] || fail "$mode put printed no crc32c"
	"$RMA" get "$token" --transport shm --size $SIZE >"$tmp/get.out" 2>"$tmp/get.err" ||
		fail "$mode get: status $?"
	get=$(crc_of "$tmp/get.out")
	[ "$get" = "$put" ] || fail "$mode: get crc $get != put crc $put"
	stop_target
	[ "$final" = "$put" ] || fail "$mode: target's final crc $final != put crc $put"
	echo "ok: $mode crc32c $put"
done
