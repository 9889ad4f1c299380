#!/bin/sh
# Runs test_sites as the allocating lines are got in this build: in a
# sanitized build from AddressSanitizer itself (lines); in a plain one,
# once alone (the messages carry the one-line hint naming the tracer) and
# once with libleakcheck-trace.so preloaded (lines).
set -u
: "${top_builddir:?top_builddir is not set: run through make check}"
prog="$top_builddir/tests/c/test_sites"
case "${CFLAGS:-}" in
*-fsanitize=address*)
    echo "== sanitized build: lines from AddressSanitizer"
    LC_SITES_EXPECT=lines "$prog"
    exit $?
    ;;
esac
tracer="$top_builddir/c_api/.libs/libleakcheck-trace.so"
[ -f "$tracer" ] || { echo "FAIL no tracer at $tracer"; exit 1; }
echo "== without the tracer: the hint"
LC_SITES_EXPECT=hint "$prog" || exit $?
echo "== LD_PRELOAD=$tracer: lines"
LD_PRELOAD="$tracer" LC_SITES_EXPECT=lines "$prog"
