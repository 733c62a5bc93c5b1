#!/bin/sh
# result.sh OUT NAME - one guest test's result, for ctest: its log, then its
# exit status (0 pass, 77 skip, else fail).  No result: the guest never ran it.
out=$1 name=$2
if [ -f "$out/skipped" ]; then
	cat "$out/skipped"
	exit 77
fi
if [ ! -f "$out/$name.rc" ]; then
	echo "result.sh: $name has no result: the guest run (test rdma_guest) failed or did not list it"
	exit 1
fi
cat "$out/$name.log"
rc=$(cat "$out/$name.rc")
[ "$rc" = 124 ] && echo "result.sh: $name ran past its time limit in the guest"
exit "$rc"
