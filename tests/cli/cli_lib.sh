# Shared by the cli_*.sh tests: start `rma target` with stdin on a FIFO
# (closing it stops the target), and read its advertisement.
# Sets: tmp, tpid, token.  Needs: RMA.

set -u
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-cli.XXXXXX")
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

# start_target ARGS...: token in $token
start_target() {
	rm -f "$tmp/stdin"
	mkfifo "$tmp/stdin"
	# Empty the last target's output here: the child opens (truncates) it
	# only after the FIFO meets, and a loaded host may let us read the
	# old advertisement first.
	: >"$tmp/target.out"
	"$RMA" target "$@" <"$tmp/stdin" >"$tmp/target.out" 2>"$tmp/target.err" &
	tpid=$!
	exec 3>"$tmp/stdin"
	i=0
	token=
	while [ $i -lt 200 ]; do
		token=$(sed -n 's/^advertisement: //p' "$tmp/target.out")
		[ -n "$token" ] && return 0
		kill -0 "$tpid" 2>/dev/null || fail "rma target exited early"
		sleep 0.1
		i=$((i + 1))
	done
	fail "rma target printed no advertisement in 20 s"
}

# end_target: closes its stdin and waits; its exit status in $trc
# (not in $(...): a subshell's close would leave our end of the FIFO open)
end_target() {
	exec 3>&-
	i=0
	while kill -0 "$tpid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 "$tpid" 2>/dev/null && fail "rma target did not stop 10 s after stdin closed"
	wait "$tpid"
	trc=$?
	tpid=
}

# stop_target: end_target, which must exit 0; sets $final to its final crc
stop_target() {
	end_target
	[ "$trc" -eq 0 ] || fail "rma target exited with status $trc"
	final=$(sed -n 's/^crc32c: //p' "$tmp/target.out")
}

crc_of() { sed -n 's/^crc32c: //p' "$1"; }

# bad_key KEY: the same key with its last hex digit changed
bad_key() {
	case $1 in
	*0) echo "$1" | sed 's/.$/1/' ;;
	*) echo "$1" | sed 's/.$/0/' ;;
	esac
}
