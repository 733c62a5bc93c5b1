#!/bin/sh
# bench/fi_rma --peer: the bare libfabric loop measured against `rma
# target --transport ofi:tcp` (its fabric: line) instead of its own passive
# side.  The loop first puts a pattern and gets it back (a mismatch fails
# it), then prints one JSON line per size marked "target":"peer"; a wrong
# rkey or a malformed --peer fails it, and the target keeps serving.
# fi_rma --serve runs the loop's own passive side alone, for rma bench and
# fi_rma --peer to measure against.
# Skips where `rma info` says ofi is unusable.
RMA=$1
FI_RMA=$2
. "$(dirname "$0")/cli_lib.sh"

"$RMA" info >"$tmp/info.out" 2>&1 || fail "info: status $?"
grep -q '^transport: ofi .*available=yes' "$tmp/info.out" || {
	grep '^transport: ofi' "$tmp/info.out"
	echo "SKIP: ofi not usable here"
	exit 77
}

start_target --transport ofi:tcp --size 65536 --fill 3
fab=$(sed -n 's/^fabric: //p' "$tmp/target.out")
[ -n "$fab" ] || fail "rma target --transport ofi:tcp printed no fabric: line"

for op in put get; do
	"$FI_RMA" --peer "$fab" --op $op --sizes 8,64K --duration 20 \
		>"$tmp/$op.out" 2>"$tmp/$op.err" || fail "fi_rma --peer --op $op: status $?"
	[ "$(grep -c "\"op\":\"$op\".*\"target\":\"peer\",\"iters\":[1-9]" "$tmp/$op.out")" = 2 ] ||
		fail "fi_rma --peer --op $op: not two measured sizes"
done
echo "ok: fi_rma --peer put and get against rma target"

set -- $fab
"$FI_RMA" --peer "$1 $(bad_key "$2") $3" --sizes 4K \
	--duration 20 >"$tmp/badkey.out" 2>"$tmp/badkey.err" && fail "a wrong rkey measured"
grep -q "completion error" "$tmp/badkey.err" || fail "a wrong rkey gave no completion error"
"$FI_RMA" --peer "$1 $2" --sizes 4K >"$tmp/short.out" 2>"$tmp/short.err" &&
	fail "a --peer without its remote address ran"
grep -q "want 'ADDRESS-HEX RKEY REMOTE-ADDR'" "$tmp/short.err" || fail "no usage for a short --peer"
"$FI_RMA" --peer "$fab" --sizes 128K >"$tmp/big.out" 2>"$tmp/big.err" &&
	fail "a size past the target's window measured"
"$FI_RMA" --peer "$fab" --op get --sizes 4K --duration 20 >"$tmp/after.out" 2>"$tmp/after.err" ||
	fail "the target stopped serving after the refusals: status $?"
stop_target
echo "ok: wrong rkeys, a short --peer and an oversized op refused; the target kept serving"

# fi_rma --serve: the loop's passive side alone, named by its fabric: line;
# rma bench (puts read back equal) and fi_rma --peer both measure against it,
# and it ends when its stdin does.
rm -f "$tmp/serve.in"
mkfifo "$tmp/serve.in"
"$FI_RMA" --serve --sizes 64K <"$tmp/serve.in" >"$tmp/serve.out" 2>"$tmp/serve.err" &
spid=$!
exec 4>"$tmp/serve.in"
i=0
while [ $i -lt 300 ] && ! grep -q '^fabric: ' "$tmp/serve.out"; do
	kill -0 $spid 2>/dev/null || fail "fi_rma --serve exited: $(cat "$tmp/serve.err")"
	sleep 0.1
	i=$((i + 1))
done
sfab=$(sed -n 's/^fabric: //p' "$tmp/serve.out")
[ -n "$sfab" ] || fail "fi_rma --serve printed no fabric: line in 30 s"
"$RMA" bench --transport ofi:tcp --target "$sfab" --op put --sizes 8,64K --iters 100 \
	--warmup 0 --verify >"$tmp/sput.out" 2>"$tmp/sput.err" ||
	fail "rma bench against fi_rma --serve: status $?: $(cat "$tmp/sput.err")"
[ "$(grep -c ' ok$' "$tmp/sput.out")" -eq 2 ] || fail "rma bench --verify: $(cat "$tmp/sput.out")"
"$FI_RMA" --peer "$sfab" --op get --sizes 8,64K --duration 20 >"$tmp/sget.out" 2>"$tmp/sget.err" ||
	fail "fi_rma --peer against fi_rma --serve: status $?"
exec 4>&-
i=0
while [ $i -lt 100 ] && kill -0 $spid 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
kill -0 $spid 2>/dev/null && fail "fi_rma --serve did not end with its stdin"
wait $spid || fail "fi_rma --serve: status $?"
echo "ok: rma bench and fi_rma --peer against fi_rma --serve"
