#!/bin/sh
# The man pages cover everything: rma(3) every function rma.h declares,
# rma(1) every command and every long option the tool's tables hold; and
# both format without warnings where groff is installed.
SRC=$2
MAN1=$SRC/docs/man/man1/rma.1
MAN3=$SRC/docs/man/man3/rma.3
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$MAN1" ] && [ -f "$MAN3" ] || fail "man pages missing under $SRC/docs/man"

funcs=$(sed -n 's/^[a-z].*[ *]\(rma_[a-z0-9_]*\)(.*/\1/p' "$SRC/include/rma.h" | sort -u)
[ -n "$funcs" ] || fail "no functions found in rma.h"
for f in $funcs; do
	# a section of its own, alone or in a comma list of names
	grep -Eq "^\.SS (.*, )?$f(,|\$)" "$MAN3" || fail "rma(3) has no section for $f"
	grep -q "[ *]$f(" "$MAN3" || fail "rma(3)'s synopsis lacks $f"
done

for c in info target put get bench; do
	grep -q "^\.SS rma $c\$" "$MAN1" || fail "rma(1) has no section for rma $c"
done
longs=$(sed -n 's/^[[:space:]]*{ "\([a-z-]*\)", .*/\1/p' "$SRC"/tools/rma/cmd_*.c | sort -u)
[ -n "$longs" ] || fail "no options found in tools/rma"
for o in $longs secret-file log help; do
	pat=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
	grep -q "^\.BR .*\\\\-\\\\-$pat\\b" "$MAN1" || fail "rma(1) does not describe --$o"
done

if command -v groff >/dev/null 2>&1; then
	for m in "$MAN1" "$MAN3"; do
		w=$(groff -man -Tutf8 -ww -z "$m" 2>&1)
		[ -z "$w" ] || fail "groff warns about $m: $w"
	done
fi
echo "ok: $(echo $funcs | wc -w) functions, $(echo $longs | wc -w) options documented"
