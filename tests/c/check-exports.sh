#!/bin/sh
# The shared library exports exactly the symbols of c_api/leakcheck.sym:
# nothing internal leaks out, nothing public goes missing.
set -eu
lib="$top_builddir/c_api/.libs/libleakcheck.so"
expected="$top_srcdir/c_api/leakcheck.sym"
[ -f "$lib" ] || { echo "no $lib: build the library first"; exit 1; }
actual=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort)
if [ "$actual" != "$(sort "$expected")" ]; then
    echo "exported symbols differ from c_api/leakcheck.sym (< expected, > actual):"
    printf '%s\n' "$actual" | diff "$expected" - || true
    exit 1
fi
echo "exports: $(printf '%s\n' "$actual" | wc -l) symbols, as c_api/leakcheck.sym lists"
