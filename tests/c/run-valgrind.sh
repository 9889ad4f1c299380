#!/bin/sh
# Runs test_valgrind under memcheck: the valgrind probe is live there, and
# any memcheck error (in the engine or the test) fails the test with status
# 99.  Leaks are not errors here: test_valgrind leaks on purpose and judges
# them through the probes themselves.  With --leak-check=no memcheck's
# only loss records are those leakcheck's searches print: the record of the
# block leak_valgrind_repeat loses every run must appear once per fork mode
# (once per series), not once per run.
set -u
: "${VALGRIND:?VALGRIND is not set: run through make check}"
log=$(mktemp "${TMPDIR:-/tmp}/leakcheck-valgrind.XXXXXX")
trap 'rm -f "$log"' EXIT
"$VALGRIND" --quiet --log-file="$log" --error-exitcode=99 --leak-check=no \
    --errors-for-leak-kinds=none \
    "$top_builddir/tests/c/test_valgrind"
status=$?
cat "$log"
[ "$status" -eq 0 ] || exit "$status"
records=$(grep -c 'by 0x[0-9A-F]*: leak_valgrind_repeat_fn ' "$log")
if [ "$records" -ne 2 ]; then
    echo "FAIL memcheck printed the loss record of leak_valgrind_repeat $records times, not once per fork mode (2)"
    exit 1
fi
echo "ok   memcheck printed the loss record of leak_valgrind_repeat once per series"
