#!/bin/sh
# A consumer of the installed library through pkg-config: examples/check
# built with its Makefile against a scratch `make install` alone.  The
# fixed twin must pass; the leaky one must fail through Check, with
# leakcheck's report at the line of its LEAK_SCOPE_END.
#
# At run time a prefix outside the loader's paths needs LD_LIBRARY_PATH or
# an rpath (README): without either the test cannot start (exit 127); with
# LD_LIBRARY_PATH, and built with -Wl,-rpath,LIBDIR, it runs.
set -eu
. "$top_srcdir/tests/c/consumer-install.sh"

flags=$("$PKG_CONFIG" --cflags --libs leakcheck check) || fail "pkg-config"
echo "pkg-config --cflags --libs leakcheck check: $flags"
case "$flags" in
*"-I$root"*"-L$root$libdir"*) ;;
*) fail "the flags do not point into the installed copy" ;;
esac

# Without an rpath: the loader does not find the library by itself.
$MAKE -C "$tmp/ex" CC="$CC" PKG_CONFIG="$PKG_CONFIG" test_leaky test_fixed ||
    fail "building examples/check"
set +e
"$tmp/ex/test_fixed" >"$tmp/norpath.out" 2>&1
rc=$?
set -e
[ "$rc" = 127 ] || { cat "$tmp/norpath.out"; fail "test_fixed without rpath or LD_LIBRARY_PATH exited $rc, not 127"; }
grep -q "libleakcheck\.so.*cannot open shared object file" "$tmp/norpath.out" ||
    { cat "$tmp/norpath.out"; fail "exit 127 without the loader naming libleakcheck"; }
echo "ok   without rpath or LD_LIBRARY_PATH: exit 127, libleakcheck.so not found"

LD_LIBRARY_PATH="$root$libdir" lc_check_example "$tmp/ex"

# With an rpath to the library's directory: no LD_LIBRARY_PATH needed.
$MAKE -C "$tmp/ex" clean >/dev/null
$MAKE -C "$tmp/ex" CC="$CC" PKG_CONFIG="$PKG_CONFIG" \
    LDFLAGS="${LDFLAGS:+$LDFLAGS }-Wl,-rpath,$root$libdir" test_leaky test_fixed ||
    fail "building examples/check with an rpath"
lc_check_example "$tmp/ex"
echo "ok   built with -Wl,-rpath,LIBDIR it runs without LD_LIBRARY_PATH"
