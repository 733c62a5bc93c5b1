#!/bin/sh
# A listen address that cannot be served fails `rma target` at once, with
# status 1 and a message naming the address and the reason, and no
# advertisement; without --listen (and with a free one) the target serves
# as always.  The cases: --listen on a port another target holds, the
# same through RMA_LISTEN, an address no interface has, and one that
# does not parse.
RMA=$1
. "$(dirname "$0")/cli_lib.sh"
unset RMA_LISTEN RMA_TRANSPORTS

# A port in use: that of a target on tcp alone, its listening socket's
# in /proc/net/tcp (state 0A).
start_target --transport tcp
inodes=$(ls -l /proc/$tpid/fd 2>/dev/null | sed -n 's/.*socket:\[\([0-9]*\)\].*/\1/p')
[ -n "$inodes" ] || { echo "SKIP: cannot read /proc/$tpid/fd"; exit 77; }
port=$(awk -v ino=" $(echo $inodes) " '$4 == "0A" && index(ino, " " $10 " ") {
	split($2, a, ":"); print a[2]; exit }' /proc/net/tcp)
[ -n "$port" ] || fail "the first target's listening port not found in /proc/net/tcp"
port=$(printf '%d' "0x$port")

# expect_refused WHAT ADDRESS REASON ARGS...: `rma target ARGS` (stdin an
# empty pipe, so a target that starts stops at once) exits 1, prints no
# advertisement, and says ADDRESS and REASON on stderr.
expect_refused() {
	what=$1 at=$2 why=$3
	shift 3
	printf '' | "$RMA" target "$@" >"$tmp/second.out" 2>"$tmp/second.err"
	rc=$?
	[ $rc -eq 1 ] || fail "$what: rma target exited $rc, want 1"
	grep -q '^advertisement:' "$tmp/second.out" && fail "$what: it advertised"
	grep -qF "$at" "$tmp/second.err" || fail "$what: stderr does not name $at"
	grep -qi "$why" "$tmp/second.err" || fail "$what: stderr does not say '$why'"
}

expect_refused "port in use" "127.0.0.1:$port" "in use" --listen "127.0.0.1:$port"
export RMA_LISTEN=127.0.0.1:$port
expect_refused "RMA_LISTEN in use" "127.0.0.1:$port" "in use"
unset RMA_LISTEN
expect_refused "port in use, --alloc" "127.0.0.1:$port" "in use" --alloc --listen "127.0.0.1:$port"
# TEST-NET-1 (RFC 5737): on no interface here.
expect_refused "foreign address" "192.0.2.1:0" "not available" --listen 192.0.2.1:0
expect_refused "unparsable" "nonsense" "HOST:PORT" --listen nonsense

# The first target still serves, and one without --listen starts as ever.
"$RMA" put "$token" --size 4096 --fill 5 >"$tmp/put.out" 2>"$tmp/put.err" || fail "put: status $?"
stop_target
printf '' | "$RMA" target >"$tmp/plain.out" 2>"$tmp/plain.err" || fail "plain target: status $?"
grep -q '^advertisement:' "$tmp/plain.out" || fail "plain target: no advertisement"
printf '' | "$RMA" target --listen 127.0.0.1:0 >"$tmp/free.out" 2>"$tmp/free.err" ||
	fail "--listen 127.0.0.1:0: status $?"
grep -q '^advertisement:' "$tmp/free.out" || fail "--listen 127.0.0.1:0: no advertisement"
echo "ok"
