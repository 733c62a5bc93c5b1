#!/bin/sh
# rma bench's options: --duration reads a bare number as seconds, --verify
# checks the bytes (and fails when they differ), --batch, --peers and
# --regions run and report themselves, and bad combinations are refused.
# Correctness only: no timing is asserted.
RMA=$1
. "$(dirname "$0")/cli_lib.sh"

# json_get FILE KEY [LINE]: the value of KEY in the LINE-th object (default 1)
json_get() {
	sed -n "${3:-1}p" "$1" | sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p"
}

# bench NAME ARGS...: run it, JSON into $tmp/NAME.out; must succeed
bench() {
	name=$1
	shift
	"$RMA" bench --json "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
		fail "rma bench $*: status $?"
}

# ---- --duration: a bare number is seconds, a unit is honoured ----
bench d2 --sizes 8 -d 2 --iters 20 --warmup 0
[ "$(json_get "$tmp/d2.out" duration_s)" = "2.000" ] || fail "-d 2 is not 2 seconds"
bench d05 --sizes 8 --duration 0.5 --iters 20 --warmup 0
[ "$(json_get "$tmp/d05.out" duration_s)" = "0.500" ] || fail "--duration 0.5 is not 0.5 s"
bench d250 --sizes 8 --duration 250ms --iters 20 --warmup 50ms
[ "$(json_get "$tmp/d250.out" duration_s)" = "0.250" ] || fail "--duration 250ms misread"
[ "$(json_get "$tmp/d250.out" warmup_s)" = "0.050" ] || fail "--warmup 50ms misread"
"$RMA" bench -d 2q >/dev/null 2>"$tmp/bad.err" && fail "took -d 2q"

# ---- put and get with --verify against the target bench starts ----
bench put --op put --sizes 8,4K,64K -d 0.1 --verify
[ "$(wc -l <"$tmp/put.out")" -eq 3 ] || fail "put: want 3 lines"
for i in 1 2 3; do
	[ "$(json_get "$tmp/put.out" verified $i)" = true ] || fail "put line $i not verified"
	ops=$(json_get "$tmp/put.out" ops_per_s $i)
	[ -n "$ops" ] && [ "${ops%%.*}" -gt 0 ] || fail "put line $i: ops_per_s '$ops'"
	[ -n "$(json_get "$tmp/put.out" bandwidth_Gbps $i)" ] || fail "no bandwidth_Gbps"
	v=$(json_get "$tmp/put.out" target_cpu_us_per_op $i)
	[ -n "$v" ] && [ "$v" != null ] || fail "line $i: the target's CPU per op not measured"
done
bench get --op get --sizes 8,4K -d 0.1 --verify --fill 11
[ "$(json_get "$tmp/get.out" verified 2)" = true ] || fail "get not verified"
bench nov --sizes 8 -d 0.05
[ "$(json_get "$tmp/nov.out" verified)" = null ] || fail "verified without --verify"

# ---- --batch: many ops per rma_post ----
bench batch --op put --sizes 8 --batch 8 -d 0.1 --verify
[ "$(json_get "$tmp/batch.out" batch)" = 8 ] || fail "batch not reported"
[ "$(json_get "$tmp/batch.out" window)" = 16 ] || fail "--batch 8 changed the default window"
[ "$(json_get "$tmp/batch.out" verified)" = true ] || fail "batched puts not verified"
bench batch2 --op get --sizes 8 --batch 32 --iters 96 --verify
[ "$(json_get "$tmp/batch2.out" window)" = 64 ] || fail "--batch 32: window is not 64"
[ "$(json_get "$tmp/batch2.out" iters)" = 96 ] || fail "--iters 96 with --batch 32"
[ "$(json_get "$tmp/batch2.out" ops_per_post)" = 32.00 ] || fail "--batch 32: not 32 per post"
"$RMA" bench --batch 8 --window 4 >/dev/null 2>"$tmp/bad.err"
[ $? -eq 2 ] || fail "took --batch larger than --window"

# ---- --peers and --regions ----
bench scale --op put --sizes 8,4K --peers 3 --regions 5 -d 0.1 --verify
[ "$(json_get "$tmp/scale.out" peers)" = 3 ] || fail "peers not 3"
[ "$(json_get "$tmp/scale.out" regions)" = 5 ] || fail "regions not 5"
[ "$(json_get "$tmp/scale.out" verified 2)" = true ] || fail "scale run not verified"
for k in register_per_s target_B_per_region target_B_per_peer initiator_B_per_peer; do
	v=$(json_get "$tmp/scale.out" $k)
	[ -n "$v" ] && [ "$v" != null ] || fail "$k not measured: '$v'"
done
bench scaleget --op get --sizes 8 --peers 2 --regions 3 --iters 50 --verify
[ "$(json_get "$tmp/scaleget.out" verified)" = true ] || fail "scale get not verified"
bench manual --op get --sizes 8,4K -m --peers 2 --batch 4 -d 0.05 --verify
[ "$(json_get "$tmp/manual.out" manual_progress 2)" = true ] || fail "-m not reported"
[ "$(json_get "$tmp/manual.out" verified 2)" = true ] || fail "-m run not verified"
"$RMA" bench --peers 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "took --peers 0"

# ---- an existing target: --verify sees its bytes, and a wrong seed ----
start_target --transport tcp --size 64K --fill 9
bench tget --target "$token" --op get --sizes 8,4K -d 0.05 --verify --fill 9
[ "$(json_get "$tmp/tget.out" verified 2)" = true ] || fail "get from the target not verified"
"$RMA" bench --json --target "$token" --op get --sizes 8 -d 0.05 --verify --fill 8 \
	>"$tmp/wrong.out" 2>"$tmp/wrong.err"
[ $? -eq 1 ] || fail "get --verify with the wrong seed did not fail with status 1"
grep -q "differs" "$tmp/wrong.err" || fail "no message naming the difference"
[ "$(json_get "$tmp/wrong.out" verified)" = false ] || fail "wrong seed: verified not false"
"$RMA" bench --target "$token" --op get --verify >/dev/null 2>"$tmp/bad.err"
[ $? -eq 2 ] || fail "get --verify with --target took no --fill"
"$RMA" bench --target "$token" --regions 2 >/dev/null 2>"$tmp/bad.err"
[ $? -eq 2 ] || fail "took --regions with --target"
"$RMA" get "$token" >"$tmp/before.out" 2>"$tmp/before.err" || fail "get: status $?"
bench tput --target "$token" --op put --sizes 8,4K -d 0.05 --verify
[ "$(json_get "$tmp/tput.out" verified 2)" = true ] || fail "put into the target not verified"
[ "$(json_get "$tmp/tput.out" target_cpu_us_per_op)" = null ] ||
	fail "CPU of a target not ours reported"
stop_target
[ "$final" != "$(crc_of "$tmp/before.out")" ] || fail "put --verify left the target as it was"
echo ok
