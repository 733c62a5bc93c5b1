#!/bin/sh
# The CLI's conventions: put refuses to guess what to write; every --help
# lists every option its command takes; a short option means one thing in
# every command; --secret-file and --log work and win over RMA_SECRET and
# RMA_LOG, which keep working; durations take units; numbers are digits;
# a bad long option is named as it was given.
RMA=$1
SRC=$2
. "$(dirname "$0")/cli_lib.sh"

# ---- put without --fill, --file or --zero ----
start_target --transport tcp --size 64K --fill 5
"$RMA" get "$token" >"$tmp/before.out" 2>"$tmp/before.err" || fail "get: status $?"
"$RMA" put "$token" >"$tmp/noarg.out" 2>"$tmp/noarg.err"
rc=$?
[ $rc -eq 2 ] || fail "put with nothing to write: status $rc, want 2"
grep -q -- "--zero" "$tmp/noarg.err" || fail "put's refusal does not name --zero"
"$RMA" get "$token" >"$tmp/after.out" 2>"$tmp/after.err" || fail "get: status $?"
[ "$(crc_of "$tmp/after.out")" = "$(crc_of "$tmp/before.out")" ] ||
	fail "put with nothing to write changed the buffer"
"$RMA" put "$token" --zero --fill 1 >"$tmp/both.out" 2>"$tmp/both.err" &&
	fail "put took --zero with --fill"
"$RMA" put "$token" --zero --timeout 5s >"$tmp/zero.out" 2>"$tmp/zero.err" ||
	fail "put --zero: status $?"
"$RMA" get "$token" >"$tmp/zget.out" 2>"$tmp/zget.err" || fail "get: status $?"
[ "$(crc_of "$tmp/zget.out")" = "$(crc_of "$tmp/zero.out")" ] ||
	fail "the buffer is not the zeros put wrote"
[ "$(crc_of "$tmp/zget.out")" != "$(crc_of "$tmp/before.out")" ] ||
	fail "put --zero changed nothing"
"$RMA" get "$token" --timeout 5q >/dev/null 2>"$tmp/dur.err" && fail "get took --timeout 5q"
"$RMA" get "$token" -T 2s >/dev/null 2>"$tmp/dur.err" || fail "get -T 2s: status $?"
stop_target

# ---- --help describes every long option of its command's table ----
for c in info target put get bench; do
	"$RMA" $c --help >"$tmp/help.$c.out" 2>&1 || fail "rma $c --help: status $?"
done
cat "$tmp/help.put.out" "$tmp/help.get.out" >"$tmp/help.xfer.out"
for pair in info:info target:target xfer:xfer bench:bench; do
	src=${pair%%:*}
	help=$tmp/help.${pair#*:}.out
	longs=$(sed -n 's/^[[:space:]]*{ "\([a-z-]*\)", .*/\1/p' "$SRC/tools/rma/cmd_$src.c")
	[ -n "$longs" ] || [ "$src" = info ] || fail "no options found in cmd_$src.c"
	for o in $longs secret-file log help; do
		# an entry of its own in the option list, not a mention in passing
		grep -Eq -- "^ +(-[A-Za-z], )?--$o( |\$)" "$help" ||
			fail "rma $src --help does not describe --$o"
	done
done

# ---- one meaning per short option across commands ----
cat "$tmp"/help.*.out | sed -n 's/^ *-\([A-Za-z]\), --\([a-z-]*\).*/\1 \2/p' |
	sort -u >"$tmp/shorts"
[ -s "$tmp/shorts" ] || fail "no short options found in the help texts"
dup=$(cut -d' ' -f1 "$tmp/shorts" | uniq -d)
[ -z "$dup" ] || fail "short options with two meanings: $dup ($(grep "^$dup " "$tmp/shorts" | tr '\n' ' '))"

# ---- --secret-file and RMA_SECRET ----
printf 'right\n' >"$tmp/right"
printf 'wrong\n' >"$tmp/wrong"
start_target --transport tcp --size 4K --secret-file "$tmp/right"
"$RMA" put "$token" --fill 1 --secret-file "$tmp/wrong" >"$tmp/s1.out" 2>"$tmp/s1.err" &&
	fail "put with the wrong secret file succeeded"
"$RMA" put "$token" --fill 1 >"$tmp/s2.out" 2>"$tmp/s2.err" &&
	fail "put with no secret succeeded"
"$RMA" put "$token" --fill 1 --secret-file "$tmp/right" >"$tmp/s3.out" 2>"$tmp/s3.err" ||
	fail "put with the right secret file: status $?"
RMA_SECRET=right "$RMA" put "$token" --fill 2 >"$tmp/s4.out" 2>"$tmp/s4.err" ||
	fail "put with RMA_SECRET: status $?"
RMA_SECRET=wrong "$RMA" put "$token" --fill 3 --secret-file "$tmp/right" \
	>"$tmp/s5.out" 2>"$tmp/s5.err" || fail "--secret-file did not win over RMA_SECRET"
"$RMA" put "$token" --fill 3 --secret-file "$tmp/absent" >/dev/null 2>"$tmp/s6.err" &&
	fail "put took a missing secret file"
grep -q "absent" "$tmp/s6.err" || fail "no message naming the missing secret file"

# ---- --log and RMA_LOG ----
# The library refuses a bad RMA_LOG; --log replaces it, so the same put works.
RMA_LOG=loud "$RMA" put "$token" --fill 4 --secret-file "$tmp/right" \
	>"$tmp/l1.out" 2>"$tmp/l1.err" && fail "RMA_LOG=loud was not read"
grep -q "RMA_LOG" "$tmp/l1.err" || fail "no message naming RMA_LOG"
RMA_LOG=loud "$RMA" put "$token" --fill 4 --secret-file "$tmp/right" --log error \
	>"$tmp/l2.out" 2>"$tmp/l2.err" || fail "--log did not win over RMA_LOG"
RMA_LOG=debug "$RMA" get "$token" --secret-file "$tmp/right" >"$tmp/l3.out" 2>"$tmp/l3.err" ||
	fail "get with RMA_LOG=debug: status $?"
"$RMA" info --log loud >/dev/null 2>&1 && fail "info took --log loud"
"$RMA" get "$token" --log loud >/dev/null 2>"$tmp/l4.err" && fail "get took --log loud"
grep -q "bad --log" "$tmp/l4.err" || fail "no message naming --log"
stop_target

# ---- --listen and --transport win over RMA_LISTEN and RMA_TRANSPORTS ----
RMA_LISTEN=not-an-address RMA_TRANSPORTS=nonesuch start_target --transport tcp \
	--listen 127.0.0.1:0 --size 4K
"$RMA" get "$token" >"$tmp/e1.out" 2>"$tmp/e1.err" || fail "get from it: status $?"
RMA_TRANSPORTS=nonesuch "$RMA" get "$token" >"$tmp/e2.out" 2>"$tmp/e2.err" &&
	fail "RMA_TRANSPORTS=nonesuch was not read"
RMA_TRANSPORTS=nonesuch "$RMA" get "$token" --transport tcp >"$tmp/e3.out" 2>"$tmp/e3.err" ||
	fail "--transport did not win over RMA_TRANSPORTS"
stop_target

# ---- numbers: digits of one base, 0x hex or decimal, nothing else ----
for v in 0x0x10 0x 0x-1 -1 +1 " 1" "1 " 0xg 1x; do
	"$RMA" put TOKEN --fill "$v" >/dev/null 2>"$tmp/n.err"
	rc=$?
	[ $rc -eq 2 ] || fail "put --fill '$v': status $rc, want 2"
	grep -q "bad --fill seed" "$tmp/n.err" || fail "put --fill '$v': $(cat "$tmp/n.err")"
done

# ---- a long option's fault names the long option ----
"$RMA" put TOKEN --zero=1 >/dev/null 2>"$tmp/o1.err"
rc=$?
[ $rc -eq 2 ] || fail "put --zero=1: status $rc, want 2"
grep -q "option '--zero' takes no value" "$tmp/o1.err" || fail "put --zero=1: $(cat "$tmp/o1.err")"
"$RMA" get TOKEN --nonesuch >/dev/null 2>"$tmp/o2.err" && fail "get took --nonesuch"
grep -q "unknown option '--nonesuch'" "$tmp/o2.err" || fail "get --nonesuch: $(cat "$tmp/o2.err")"

echo "ok: conventions hold"
