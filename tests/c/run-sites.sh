#!/bin/sh
# Runs test_sites as the allocating lines are got in this build: in a
# sanitized build from AddressSanitizer itself (lines); in a plain one,
# once alone (the messages carry the one-line hint naming the tracer), once
# with libleakcheck-trace.so preloaded (lines), under valgrind (memcheck's
# loss records), and test_sites_own, whose malloc is its own, with the
# tracer preloaded (which refuses, and the message says why).  test_fds
# likewise: with the tracer each leaked descriptor names the line that
# opened it; without it, one line names the tracer; under AddressSanitizer,
# which keeps nothing of descriptors, nothing more is said.
set -u
: "${top_builddir:?top_builddir is not set: run through make check}"
prog="$top_builddir/tests/c/test_sites"
fds="$top_builddir/tests/c/test_fds"
case "${CFLAGS:-}" in
*-fsanitize=address*)
    echo "== sanitized build: lines from AddressSanitizer"
    LC_SITES_EXPECT=lines "$prog" || exit $?
    echo "== test_fds, sanitized build: no opening lines"
    LC_FDS_EXPECT=none "$fds"
    exit $?
    ;;
esac
tracer="$top_builddir/c_api/.libs/libleakcheck-trace.so"
[ -f "$tracer" ] || { echo "FAIL no tracer at $tracer"; exit 1; }
echo "== without the tracer: the hint"
LC_SITES_EXPECT=hint "$prog" || exit $?
echo "== LD_PRELOAD=$tracer: lines"
LD_PRELOAD="$tracer" LC_SITES_EXPECT=lines "$prog" || exit $?
echo "== test_sites_own (a malloc of its own), LD_PRELOAD=$tracer: refused"
LD_PRELOAD="$tracer" LC_SITES_EXPECT=refused "${prog}_own" || exit $?
echo "== test_fds without the tracer: the hint"
LC_FDS_EXPECT=hint "$fds" || exit $?
echo "== test_fds, LD_PRELOAD=$tracer: the lines that opened them"
LD_PRELOAD="$tracer" LC_FDS_EXPECT=lines "$fds" || exit $?
if [ -n "${VALGRIND:-}" ]; then
    echo "== under valgrind: memcheck's loss records"
    LC_SITES_EXPECT=memcheck "$VALGRIND" --quiet --error-exitcode=99 \
        --leak-check=no --errors-for-leak-kinds=none "$prog"
fi
