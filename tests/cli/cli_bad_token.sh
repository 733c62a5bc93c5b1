#!/bin/sh
# A token with one character changed is refused with a clear message (and
# a non-zero status); the target keeps serving: a put with the real token
# then works.
RMA=$1
. "$(dirname "$0")/cli_lib.sh"

start_target --transport tcp --size 1M
n=${#token}
mid=$((n / 2))
c=$(printf '%s' "$token" | cut -c$((mid + 1)))
if [ "$c" = A ]; then r=B; else r=A; fi
bad=$(printf '%s' "$token" | cut -c1-$mid)$r$(printf '%s' "$token" | cut -c$((mid + 2))-)
[ ${#bad} -eq "$n" ] && [ "$bad" != "$token" ] || fail "could not build the altered token"

"$RMA" put "$bad" --size 4096 --fill 3 >"$tmp/bad.out" 2>"$tmp/bad.err" &&
	fail "rma put accepted an altered token"
grep -qi "advertisement" "$tmp/bad.err" ||
	fail "rma put: no clear message about the token: $(cat "$tmp/bad.err")"
"$RMA" get "$bad" --size 4096 >"$tmp/bad.out" 2>"$tmp/bad.err" &&
	fail "rma get accepted an altered token"
grep -qi "advertisement" "$tmp/bad.err" ||
	fail "rma get: no clear message about the token: $(cat "$tmp/bad.err")"
# A token that is not even base64url.
"$RMA" put "rma1!!!" --size 4096 --fill 3 >"$tmp/bad.out" 2>"$tmp/bad.err" &&
	fail "rma put accepted 'rma1!!!'"
grep -qi "advertisement" "$tmp/bad.err" || fail "no clear message for 'rma1!!!'"

"$RMA" put "$token" --size 1M --fill 9 >"$tmp/put.out" 2>"$tmp/put.err" || fail "put after bad tokens: status $?"
put=$(crc_of "$tmp/put.out")
stop_target
[ -n "$put" ] && [ "$final" = "$put" ] || fail "target crc $final != put crc $put"
echo "ok"
