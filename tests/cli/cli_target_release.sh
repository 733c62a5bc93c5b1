#!/bin/sh
# rma target exits 1 when releasing its region fails (a shim preloaded into
# it makes rma_region_release report -EIO), still printing the crc.
RMA=$1
SHIM=$2
. "$(dirname "$0")/cli_lib.sh"

LD_PRELOAD=$SHIM start_target --transport tcp --size 4K --fill 2
end_target
[ $trc -eq 1 ] || fail "rma target after a failed release: status $trc, want 1"
grep -q "releasing the region: " "$tmp/target.err" || fail "no message naming the release"
grep -q "^crc32c: " "$tmp/target.out" || fail "no crc printed"
echo ok
