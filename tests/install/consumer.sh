#!/bin/sh
# Install into a scratch prefix, then build and run an example the way a
# consumer would: only the installed header, library and rma.pc; and run
# the installed rma and Python package with nothing on LD_LIBRARY_PATH.
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

# The installed tool and Python package run as installed: nothing on the
# loader's path (an rma built for a system prefix, /usr, relies on it).
unset LD_LIBRARY_PATH RMA_LIBRARY RMA_BUILD
case $(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt") in
/usr | /usr/) export LD_LIBRARY_PATH="$libdir" ;;
esac
"$tmp/prefix/bin/rma" --version >"$tmp/version.log" 2>&1 ||
	{ cat "$tmp/version.log"; echo "FAIL: installed rma --version"; exit 1; }
"$tmp/prefix/bin/rma" info >"$tmp/info.log" 2>&1 ||
	{ cat "$tmp/info.log"; echo "FAIL: installed rma info"; exit 1; }
grep -q "transport: tcp" "$tmp/info.log" || { cat "$tmp/info.log"; echo "FAIL: installed rma info"; exit 1; }

py=${PYTHON:-python3}
if command -v "$py" >/dev/null; then
	init=$(find "$tmp/prefix" -path '*-packages/rma/__init__.py' | head -n1)
	[ -n "$init" ] || { echo "FAIL: no Python package installed"; exit 1; }
	# From $tmp, so that the checkout's python/ is not on sys.path.
	(cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$(dirname "$(dirname "$init")")" \
		"$py" -c '
import os, sys
import rma
lib = os.path.realpath(rma.library_path)
want = os.path.realpath(sys.argv[1])
assert os.path.dirname(lib) == want, "librma from %s, not %s" % (lib, want)
assert rma.version(), "no version"
with rma.Engine() as e:
    pass
' "$libdir") >"$tmp/python.log" 2>&1 ||
		{ cat "$tmp/python.log"; echo "FAIL: the installed Python package"; exit 1; }
else
	echo "no $py: the Python package not checked"
fi
echo "ok: installed, built against rma.pc, ran; the tool and the Python package as installed"
