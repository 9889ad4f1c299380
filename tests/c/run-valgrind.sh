#!/bin/sh
# Runs test_valgrind under memcheck: the valgrind probe is live there, and
# any memcheck error (in the engine or the test) fails the test with status
# 99.  Leaks are not errors here: test_valgrind leaks on purpose and judges
# them through the probe itself.
set -eu
: "${VALGRIND:?VALGRIND is not set: run through make check}"
exec "$VALGRIND" --quiet --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=none "$top_builddir/tests/c/test_valgrind"
