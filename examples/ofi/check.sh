#!/bin/sh
# Runs each librma example against its own one_target (plain libfabric,
# provider tcp) and checks that the target's final crc32c is the one the
# example printed for the bytes it moved.  Exit 77 if libfabric offers no
# tcp provider here.   usage: check.sh DIR-OF-THE-BUILT-EXAMPLES
set -u
BIN=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-ofi-ex.XXXXXX")
tpid=
cleanup() {
	exec 3>&- 2>/dev/null
	if [ -n "$tpid" ]; then kill -9 "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f:" >&2; cat "$f" >&2; }
	done
	exit 1
}

# start ARGS...: one_target with stdin on a FIFO; its triple in $triple
start() {
	rm -f "$tmp/stdin"
	mkfifo "$tmp/stdin"
	# Empty the last target's output here: the child opens (truncates) it
	# only after the FIFO meets, and a loaded host may let us read the
	# old advertisement first.
	: >"$tmp/target.out"
	"$BIN/one_target" "$@" <"$tmp/stdin" >"$tmp/target.out" 2>"$tmp/target.err" &
	tpid=$!
	exec 3>"$tmp/stdin"
	i=0
	while [ $i -lt 300 ]; do
		triple=$(sed -n 's/^advertisement: //p' "$tmp/target.out")
		[ -n "$triple" ] && return 0
		if ! kill -0 "$tpid" 2>/dev/null; then
			wait "$tpid"
			st=$?
			tpid=
			# 77: one_target found no tcp provider; anything else fails
			[ $st -eq 77 ] &&
				{ echo "SKIP: libfabric has no tcp provider here"; cat "$tmp/target.err"; exit 77; }
			fail "one_target exited early (status $st)"
		fi
		sleep 0.1
		i=$((i + 1))
	done
	fail "one_target printed no advertisement in 30 s"
}

# stop: close its stdin; its final crc in $final
stop() {
	exec 3>&-
	wait "$tpid" || fail "one_target exited with status $?"
	tpid=
	final=$(sed -n 's/^crc32c: //p' "$tmp/target.out")
}

for ex in one_transfer async_transfer registered_arena read_from_peer; do
	if [ $ex = read_from_peer ]; then start --read; else start; fi
	# shellcheck disable=SC2086 # the triple is three words
	"$BIN/$ex" $triple >"$tmp/$ex.out" 2>"$tmp/$ex.err" || fail "$ex: status $?"
	moved=$(sed -n 's/^crc32c: //p' "$tmp/$ex.out")
	stop
	[ -n "$moved" ] || fail "$ex printed no crc32c"
	[ "$final" = "$moved" ] || fail "$ex: target's crc32c $final != the example's $moved"
	echo "ok: $ex $moved"
done

# The target's buffer starts as zeros: a put that moved nothing would
# leave their crc, so make sure no example's crc is it.
start
stop
zeros=$final
for ex in one_transfer async_transfer registered_arena read_from_peer; do
	grep -q "^crc32c: $zeros\$" "$tmp/$ex.out" && fail "$ex: its crc32c is that of zeros ($zeros)"
done
echo "ok: every example's bytes reached the target"
