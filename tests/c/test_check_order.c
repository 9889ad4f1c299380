/*
 * test_check_order.c — a leak fails the current Check test with
 * leakcheck's report, whichever header comes first.  Built twice: as
 * test_check_order with leakcheck.h before check.h (the macros then call
 * lc_fail(), whose default handler finds Check at run time), and as
 * test_check_order_check_first with check.h first (the macros call
 * ck_abort_msg).  The harness runs the suite with CK_FORK and CK_NOFORK:
 * each leak must be a Check failure at its LEAK_SCOPE_END / LEAK_REPEAT
 * line (not an "Early exit" error), and with CK_NOFORK the runner must go
 * on to the next test and its summary.
 */
#if defined(LC_TEST_CHECK_FIRST)
#include <check.h>
#include <leakcheck.h>
#else
#include <leakcheck.h>
#include <check.h>
#endif

#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define NATIVE LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES)

void *lc_test_kept_order[8];

START_TEST(leak_native_bytes_scope)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(NATIVE));
    lc_test_kept_order[0] = malloc(4096);
    memset(lc_test_kept_order[0], 1, 4096);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_native_bytes_scope)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(NATIVE));
    free(malloc(4096));
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_native_bytes_repeat)
{
    int i = 1;

    LEAK_REPEAT_WITH(r, 1, 3, LC_PROBES(NATIVE)) {
        lc_test_kept_order[i] = malloc(4096);
        memset(lc_test_kept_order[i], 1, 4096);
        if (i < 7)
            i++;
    }
}
END_TEST

START_TEST(refused_scope_threshold)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_THRESHOLD(LC_PROBE_FDS, 1));
    LEAK_SCOPE_END(s);
}
END_TEST

/* After the failures above, in the same runner: still run and judged. */
START_TEST(clean_after_failures)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(NATIVE));
    LEAK_SCOPE_END(s);
}
END_TEST

static Suite *
make_suite(void)
{
    Suite *s = suite_create("check_order");

    harness_add(s, leak_native_bytes_scope);
    harness_add(s, clean_native_bytes_scope);
    harness_add(s, leak_native_bytes_repeat);
    harness_add(s, refused_scope_threshold);
    harness_add(s, clean_after_failures);
    return s;
}

int
main(void)
{
    return harness_run(make_suite, HARNESS_BOTH);
}
