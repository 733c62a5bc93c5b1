#!/bin/sh
# rma target exits 1 when releasing its region fails (a shim preloaded into
# it makes rma_region_release report -EIO), still printing the crc.
RMA=$1
SHIM=$2
. "$(dirname "$0")/cli_lib.sh"

LD_PRELOAD=$SHIM start_target --transport tcp --size 4K --fill 2
exec 3>&-
i=0
while kill -0 "$tpid" 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
kill -0 "$tpid" 2>/dev/null && fail "rma target did not stop 10 s after stdin closed"
wait "$tpid"
rc=$?
tpid=
[ $rc -eq 1 ] || fail "rma target after a failed release: status $rc, want 1"
grep -q "releasing the region: " "$tmp/target.err" || fail "no message naming the release"
grep -q "^crc32c: " "$tmp/target.out" || fail "no crc printed"
echo ok
