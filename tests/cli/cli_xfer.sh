#!/bin/sh
# put and get at their edges: --file from a pipe (no size to stat); a
# --size past the window's end refused before its buffer is allocated; a
# get --out that cannot be written leaves PATH as it was; /dev/stdout is
# written through, not replaced.
RMA=$1
. "$(dirname "$0")/cli_lib.sh"

# ---- put --file from a pipe moves what the pipe holds ----
start_target --transport tcp --size 5
printf hello | "$RMA" put "$token" --file /dev/stdin >"$tmp/pipe.out" 2>"$tmp/pipe.err" ||
	fail "put from a pipe: status $?"
grep -q '^bytes: 5$' "$tmp/pipe.out" || fail "put from a pipe did not move 5 bytes"
printf hello | "$RMA" put "$token" -F /dev/stdin -s 5 >"$tmp/pipe5.out" 2>"$tmp/pipe5.err" ||
	fail "put from a pipe with --size 5: status $?"
printf hell | "$RMA" put "$token" -F /dev/stdin -s 5 >"$tmp/short.out" 2>"$tmp/short.err"
rc=$?
[ $rc -eq 1 ] || fail "put --size 5 from a 4-byte pipe: status $rc, want 1"
grep -q "only 4 bytes" "$tmp/short.err" || fail "no message naming the short pipe"
printf hello! | "$RMA" put "$token" -F /dev/stdin >"$tmp/long.out" 2>"$tmp/long.err" &&
	fail "put of 6 piped bytes into a 5-byte window succeeded"
stop_target
[ "$final" = "$(crc_of "$tmp/pipe.out")" ] ||
	fail "target's crc $final != the put's $(crc_of "$tmp/pipe.out")"

# max_rss CMD...: runs CMD (output to $tmp/rss.out, .err), sets $rss_rc to
# its status and $rss_kb to the most memory it held in KiB, or to "" where
# that cannot be told here
max_rss() {
	rss_kb=
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -o "$tmp/rss" -f %M "$@" >"$tmp/rss.out" 2>"$tmp/rss.err"
		rss_rc=$?
		rss_kb=$(tail -n 1 "$tmp/rss")
	elif command -v python3 >/dev/null 2>&1; then
		python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1] + ".out", "w"),
                   stderr=open(sys.argv[1] + ".err", "w")).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r)' "$tmp/rss" "$@" >"$tmp/rss"
		rss_kb=$(cut -d' ' -f1 "$tmp/rss")
		rss_rc=$(cut -d' ' -f2 "$tmp/rss")
	else
		"$@" >"$tmp/rss.out" 2>"$tmp/rss.err"
		rss_rc=$?
	fi
}

# ---- a --size past the window fails before its buffer is faulted in ----
start_target --transport tcp --size 64K
max_rss "$RMA" get "$token" --size 512M
[ "$rss_rc" -eq 1 ] || fail "get --size 512M of a 64K window: status $rss_rc, want 1"
grep -q "outside the advertised window.*the window is 65536 bytes" "$tmp/rss.err" ||
	fail "get --size 512M: no message naming the window: $(cat "$tmp/rss.err")"
[ -z "$rss_kb" ] || [ "$rss_kb" -lt 65536 ] ||
	fail "get --size 512M held $rss_kb KiB before failing"
printf hello | "$RMA" put "$token" -F /dev/stdin -s 1K -o 65535 >/dev/null 2>"$tmp/past.err" &&
	fail "put past the window's end succeeded"
grep -q "outside the advertised window" "$tmp/past.err" ||
	fail "put past the window's end: $(cat "$tmp/past.err")"

# ---- get --out: a failed write leaves PATH as it was ----
mkdir "$tmp/outdir"
printf old >"$tmp/outdir/kept"
# SIGXFSZ ignored: a write past the limit fails with EFBIG
(trap '' XFSZ; ulimit -f 16; exec "$RMA" get "$token" --out "$tmp/outdir/kept") \
	>"$tmp/big1.out" 2>"$tmp/big1.err"
rc=$?
[ $rc -eq 1 ] || fail "get --out past the file size limit: status $rc, want 1"
[ "$(cat "$tmp/outdir/kept")" = old ] || fail "a failed get --out changed the file"
grep -q "left as it was" "$tmp/big1.err" || fail "no message saying the file is kept"
(trap '' XFSZ; ulimit -f 16; exec "$RMA" get "$token" --out "$tmp/outdir/new") \
	>"$tmp/big2.out" 2>"$tmp/big2.err" && fail "get --out past the file size limit succeeded"
[ ! -e "$tmp/outdir/new" ] || fail "a failed get --out left a partial file"
[ "$(ls -A "$tmp/outdir")" = kept ] || fail "a failed get --out left $(ls -A "$tmp/outdir")"
"$RMA" get "$token" --out "$tmp/outdir/kept" >"$tmp/get.out" 2>"$tmp/get.err" ||
	fail "get --out: status $?"
[ "$(wc -c <"$tmp/outdir/kept")" -eq 65536 ] || fail "get --out did not write 64K"
# /dev/stdout appended to a file: written through, the file not replaced
printf 'HEAD\n' >"$tmp/log"
ino=$(stat -c %i "$tmp/log")
"$RMA" get "$token" --size 4096 --out /dev/stdout >>"$tmp/log" 2>"$tmp/so.err" ||
	fail "get --out /dev/stdout: status $?"
[ "$(stat -c %i "$tmp/log")" = "$ino" ] || fail "get --out /dev/stdout replaced the file"
[ "$(head -c 5 "$tmp/log")" = HEAD ] || fail "get --out /dev/stdout truncated the file"
tail -c +6 "$tmp/log" | head -c 4096 | cmp -s -n 4096 - "$tmp/outdir/kept" ||
	fail "get --out /dev/stdout: the bytes after HEAD are not the window's"
grep -aq '^crc32c: ' "$tmp/log" || fail "get --out /dev/stdout lost its summary"
stop_target
echo ok
