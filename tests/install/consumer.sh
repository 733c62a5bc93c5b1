#!/bin/sh
# Install into a scratch prefix, then build and run an example the way a
# consumer would: only the installed header, library and rma.pc.
# usage: consumer.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rma-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
pc=$(find "$tmp/prefix" -name rma.pc | head -n1)
[ -n "$pc" ] || { echo "FAIL: no rma.pc installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir rma)
[ -f "$libdir/librma.so" ] || { echo "FAIL: no librma.so in $libdir"; exit 1; }
[ -f "$(pkg-config --variable=includedir rma)/rma.h" ] || { echo "FAIL: no rma.h"; exit 1; }
[ -x "$tmp/prefix/bin/rma" ] || { echo "FAIL: no rma tool installed"; exit 1; }

# Only public symbols leave the library.
if nm -D --defined-only "$libdir/librma.so" | awk '$2 != "A" {print $3}' | grep -v '^rma_[a-z]' | grep -q .; then
	echo "FAIL: librma.so exports non-public symbols:"
	nm -D --defined-only "$libdir/librma.so" | awk '$2 != "A" {print $3}' | grep -v '^rma_[a-z]'
	exit 1
fi

${CC:-cc} -std=c11 -Wall -Wextra -Werror -o "$tmp/put_get" "$src/examples/put_get.c" \
	$(pkg-config --cflags --libs rma) -Wl,-rpath,"$libdir"
"$tmp/put_get" >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; echo "FAIL: example"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$tmp/prefix/bin/rma" info | grep -q "transport: tcp" \
	|| { echo "FAIL: installed rma info"; exit 1; }
echo "ok: installed, built against rma.pc, ran"
