#!/bin/sh
# The installed tracer on the Check example: examples/check's leaky tests,
# built against a scratch `make install`, run with the tracer that
# `pkg-config --variable=tracer leakcheck` names preloaded (make traced),
# must fail (make traced then succeeds) with reports naming the lines of leaky.c that allocated what
# they left (its realloc and its strndup, in push()).
set -eu
. "$top_srcdir/tests/c/consumer-install.sh"

tracer=$("$PKG_CONFIG" --variable=tracer leakcheck) || fail "pkg-config --variable=tracer"
case "$tracer" in
"$root"*) ;;
*) tracer="$root$tracer" ;;
esac
[ "$tracer" = "$root$libdir/libleakcheck-trace.so" ] ||
    fail "the tracer variable names $tracer, not libleakcheck-trace.so in libdir"
[ -f "$tracer" ] || fail "no tracer installed at $tracer"
echo "ok   pkg-config --variable=tracer leakcheck: $tracer, installed"

$MAKE -C "$tmp/ex" CC="$CC" PKG_CONFIG="$PKG_CONFIG" CFLAGS="-g -O2" \
    LDFLAGS="${LDFLAGS:+$LDFLAGS }-Wl,-rpath,$root$libdir" test_leaky ||
    fail "building examples/check"
set +e
$MAKE -s -C "$tmp/ex" TRACER="$tracer" traced >"$tmp/traced.out" 2>&1
rc=$?
set -e
cat "$tmp/traced.out"
[ "$rc" -eq 0 ] || fail "make traced exited $rc"
grep -q "leakcheck: scope 'bad_quote' leaked" "$tmp/traced.out" ||
    fail "test_leaky did not fail with leakcheck's report"
for what in "realloc(" "strndup("; do
    line=$(grep -n -F "$what" "$tmp/ex/leaky.c" | head -n 1 | cut -d: -f1)
    grep -q "^    leaky\.c:$line push(): " "$tmp/traced.out" ||
        fail "no report names leaky.c:$line push() ($what)"
    echo "ok   the reports name leaky.c:$line push() ($what)"
done
