#!/bin/sh
# Interop with plain libfabric (provider tcp), both ways:
#  - rma put/get name one_target (plain libfabric) by its triple: the put's,
#    the get's and one_target's final crc32c agree; a get from
#    `one_target --read` returns its payload; rma bench --target takes the
#    triple and its puts read back equal;
#  - fi_initiator (plain libfabric) writes and reads `rma target
#    --transport ofi:tcp` through its `fabric:` line: the target's final
#    crc32c covers what it wrote;
#  - a wrong rkey is a clear error on both sides and leaves the target as
#    it was and serving; an engine with a secret moves nothing to a plain
#    target, and a target with a secret prints no fabric: line.
# Skips where `rma info` says ofi is unusable or libfabric lacks tcp.
RMA=$1
ONE_TARGET=$2
FI_INIT=$3
. "$(dirname "$0")/cli_lib.sh"
SIZE=1048576

"$RMA" info >"$tmp/info.out" 2>&1 || fail "info: status $?"
grep -q '^transport: ofi .*available=yes' "$tmp/info.out" || {
	grep '^transport: ofi' "$tmp/info.out"
	echo "SKIP: ofi not usable here"
	exit 77
}

# start_one ARGS...: one_target; its triple in $triple (as start_target)
start_one() {
	rm -f "$tmp/stdin"
	mkfifo "$tmp/stdin"
	# Empty the last target's output here: the child opens (truncates) it
	# only after the FIFO meets, and a loaded host may let us read the
	# old advertisement first.
	: >"$tmp/target.out"
	"$ONE_TARGET" "$@" <"$tmp/stdin" >"$tmp/target.out" 2>"$tmp/target.err" &
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
			[ $st -eq 77 ] && {
				cat "$tmp/target.err"
				echo "SKIP: libfabric has no tcp provider here"
				exit 77
			}
			fail "one_target exited early (status $st)"
		fi
		sleep 0.1
		i=$((i + 1))
	done
	fail "one_target printed no advertisement in 30 s"
}

# ---- rma -> plain target ----
start_one --size $SIZE
set -- $triple
# The triple's own usage errors: exit 2, nothing moved.
usage() {
	"$RMA" "$@" >"$tmp/usage.out" 2>"$tmp/usage.err"
	st=$?
	[ $st -eq 2 ] || fail "rma $*: status $st, not 2"
	grep -q "$want" "$tmp/usage.err" || fail "rma $*: no '$want' in: $(cat "$tmp/usage.err")"
}
want="needs --transport" usage put "$1" "$2" "$3" --size 4K --fill 1
want="needs --transport" usage get --transport ofi:tcp,tcp "$1" "$2" "$3" --size 4K
want="needs --size" usage get --transport ofi:tcp "$1" "$2" "$3"
want="bad fabric address" usage get --transport ofi:tcp "${1}0" "$2" "$3" --size 4K
want="bad fabric address" usage get --transport ofi:tcp "zz$1" "$2" "$3" --size 4K
want="bad rkey" usage get --transport ofi:tcp "$1" "key" "$3" --size 4K
want="bad remote address" usage get --transport ofi:tcp "$1" "$2" "0x" --size 4K
want="unexpected argument" usage get --transport ofi:tcp "$1" "$2" --size 4K
# A stream (no size to stat) into a window of unknown length: --size needed
# (/dev/zero would be read until memory ran out).
want="not a regular file: --size is needed" usage put --transport ofi:tcp "$1" "$2" "$3" --file /dev/zero
zero_get() { "$RMA" get --transport ofi:tcp "$@" --size $SIZE; }
zero_get "$@" >"$tmp/get0.out" 2>"$tmp/get0.err" || fail "first get: status $?"
zeros=$(crc_of "$tmp/get0.out")
[ -n "$zeros" ] || fail "get printed no crc32c"

# A wrong rkey: a clear error, and nothing written.  tcp;ofi_rxm refuses
# a small put by its key, and drops the connection under a large one.
bad=$(bad_key "$2")
"$RMA" put --transport ofi:tcp "$1" "$bad" "$3" --size 4096 --fill 5 \
	>"$tmp/badput.out" 2>"$tmp/badput.err" && fail "put with a wrong rkey succeeded"
grep -q "remote key refused.*check the rkey" "$tmp/badput.err" ||
	fail "a wrong rkey was not called a refused key: $(cat "$tmp/badput.err")"
"$RMA" get --transport ofi:tcp "$1" "$bad" "$3" --size $SIZE \
	>"$tmp/badget.out" 2>"$tmp/badget.err" && fail "get with a wrong rkey succeeded"
grep -q "remote key refused.*check the rkey" "$tmp/badget.err" ||
	fail "a wrong rkey was not called a refused key: $(cat "$tmp/badget.err")"
"$RMA" put --transport ofi:tcp "$1" "$bad" "$3" --size $SIZE --fill 5 \
	>"$tmp/badput2.out" 2>"$tmp/badput2.err" && fail "large put with a wrong rkey succeeded"
grep -q "wrong rkey" "$tmp/badput2.err" || grep -q "check the rkey" "$tmp/badput2.err" ||
	fail "a large put with a wrong rkey named no rkey: $(cat "$tmp/badput2.err")"

# An engine with a secret moves nothing to a plain target.
printf 'sekrit\n' >"$tmp/secret"
"$RMA" put --transport ofi:tcp "$@" --size $SIZE --fill 5 --secret-file "$tmp/secret" \
	>"$tmp/secretput.out" 2>"$tmp/secretput.err" && fail "put with a secret succeeded"
zero_get "$@" >"$tmp/get1.out" 2>"$tmp/get1.err" || fail "get after refusals: status $?"
[ "$(crc_of "$tmp/get1.out")" = "$zeros" ] || fail "a refused put changed the target"

# The rkey in decimal, with a leading zero (not octal), as the CLI also
# takes it.
dec_key=$(printf '%u' "$2")
"$RMA" put --transport ofi:tcp "$1" "0$dec_key" "$(printf '%u' "$3")" --size $SIZE --fill 7 \
	>"$tmp/put.out" 2>"$tmp/put.err" || fail "put: status $?"
put=$(crc_of "$tmp/put.out")
[ -n "$put" ] && [ "$put" != "$zeros" ] || fail "put crc '$put' (zeros: $zeros)"
"$RMA" get --transport ofi:tcp "$@" --size $SIZE >"$tmp/get.out" 2>"$tmp/get.err" ||
	fail "get: status $?"
get=$(crc_of "$tmp/get.out")
[ "$get" = "$put" ] || fail "get crc $get != put crc $put"
stop_target
[ "$final" = "$put" ] || fail "one_target's final crc $final != put crc $put"
echo "ok: rma put/get -> one_target, crc32c $put"

start_one --read --size $SIZE
set -- $triple
"$RMA" get --transport ofi:tcp "$@" --size $SIZE >"$tmp/rget.out" 2>"$tmp/rget.err" ||
	fail "get from one_target --read: status $?"
rget=$(crc_of "$tmp/rget.out")
stop_target
[ "$rget" = "$final" ] || fail "get crc $rget != one_target --read's crc $final"
[ "$rget" != "$zeros" ] || fail "one_target --read served zeros"
echo "ok: rma get <- one_target --read, crc32c $rget"

# rma bench names a plain target by the triple too (one quoted word):
# puts read back equal, gets run; usage errors exit 2, a wrong rkey 1.
start_one --size $SIZE
set -- $triple
bench() { "$RMA" bench --sizes 8,4K,64K --iters 100 --warmup 0 "$@"; }
bench --transport ofi:tcp --target "$*" --op put --verify >"$tmp/bput.out" 2>"$tmp/bput.err" ||
	fail "bench put --target TRIPLE --verify: status $?: $(cat "$tmp/bput.err")"
[ "$(grep -c ' ok$' "$tmp/bput.out")" -eq 3 ] ||
	fail "bench put --verify did not check all 3 sizes: $(cat "$tmp/bput.out")"
bench --transport ofi:tcp --target "$*" --op get >"$tmp/bget.out" 2>"$tmp/bget.err" ||
	fail "bench get --target TRIPLE: status $?: $(cat "$tmp/bget.err")"
want="needs --transport" usage bench --target "$*"
want="three words" usage bench --transport ofi:tcp --target "$* 0"
want="bad rkey" usage bench --transport ofi:tcp --target "$1 key $3"
# Its window's length is not known here: an op past it is the fabric's
# refusal or, for a large op the provider may send in pieces, a dropped
# connection; either way with the hint.
bench --transport ofi:tcp --target "$*" --sizes 2M --timeout 5s \
	>"$tmp/bbig.out" 2>"$tmp/bbig.err" && fail "bench past one_target's window succeeded"
grep -Eq "(remote key refused|connection to peer lost).*(inside|outside) (the target's|its) registration" \
	"$tmp/bbig.err" || fail "bench past the window: not the fabric's refusal: $(cat "$tmp/bbig.err")"
bench --transport ofi:tcp --target "$1 $(bad_key "$2") $3" --op get --timeout 5s \
	>"$tmp/bbad.out" 2>"$tmp/bbad.err" && fail "bench with a wrong rkey succeeded"
grep -q "remote key refused.*check the rkey" "$tmp/bbad.err" ||
	fail "bench: a wrong rkey was not called a refused key: $(cat "$tmp/bbad.err")"
stop_target
echo "ok: rma bench -> one_target by its triple"

# ---- plain initiator -> rma target ----
fabric_line() {
	fab=$(sed -n 's/^fabric: //p' "$tmp/target.out")
	[ -n "$fab" ] || fail "rma target --transport ofi:tcp printed no fabric: line"
}
start_target --transport ofi:tcp --size $SIZE --fill 3
fabric_line
set -- $fab
"$FI_INIT" --read --size $SIZE "$@" >"$tmp/fread.out" 2>"$tmp/fread.err" ||
	fail "fi_initiator --read: status $?"
filled=$(crc_of "$tmp/fread.out")
"$RMA" get "$token" --transport ofi:tcp --size $SIZE >"$tmp/tget.out" 2>"$tmp/tget.err" || fail "get: status $?"
[ "$(crc_of "$tmp/tget.out")" = "$filled" ] || fail "fi_read crc $filled != rma get's"

bad=$(bad_key "$2")
"$FI_INIT" --size $SIZE --fill 4 "$1" "$bad" "$3" >"$tmp/fbad.out" 2>"$tmp/fbad.err" &&
	fail "fi_writemsg with a wrong rkey succeeded"
grep -q "transfer failed" "$tmp/fbad.err" || fail "no completion error for a wrong rkey"

"$FI_INIT" --size $SIZE --fill 11 "$@" >"$tmp/fwrite.out" 2>"$tmp/fwrite.err" ||
	fail "fi_initiator: status $?"
wrote=$(crc_of "$tmp/fwrite.out")
[ "$wrote" != "$filled" ] || fail "fi_initiator wrote what was there"
# A window at an offset: the fabric line's remote address is its byte 0.
"$FI_INIT" --size 4096 --offset 8192 --read "$@" >"$tmp/foff.out" 2>"$tmp/foff.err" ||
	fail "fi_initiator --read --offset: status $?"
"$RMA" get "$token" --transport ofi:tcp --size 4096 --offset 8192 >"$tmp/toff.out" 2>"$tmp/toff.err" ||
	fail "get --offset: status $?"
[ "$(crc_of "$tmp/foff.out")" = "$(crc_of "$tmp/toff.out")" ] ||
	fail "fi_read at offset 8192 differs from rma get's"
stop_target
[ "$final" = "$wrote" ] || fail "rma target's final crc $final != fi_initiator's $wrote"
echo "ok: fi_initiator -> rma target, crc32c $wrote"

# A target with a secret hands out no fabric: line (ofi may refuse to start).
"$RMA" target --transport ofi:tcp --secret-file "$tmp/secret" </dev/null \
	>"$tmp/starget.out" 2>"$tmp/starget.err" &
spid=$!
i=0
while [ $i -lt 100 ] && kill -0 $spid 2>/dev/null && ! grep -q '^advertisement:' "$tmp/starget.out"; do
	sleep 0.1
	i=$((i + 1))
done
kill $spid 2>/dev/null
wait $spid 2>/dev/null
grep -q '^fabric:' "$tmp/starget.out" && fail "a target with a secret printed a fabric: line"
echo "ok: wrong rkeys refused, secrets keep plain peers out"
