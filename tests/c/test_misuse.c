/*
 * test_misuse.c — misuse of the macros gets a message that says what was
 * wrong, before anything is measured, and limits hold without overflow:
 *
 *   - LEAK_SCOPE_END twice, or on a scope never begun: "never begun, or
 *     has already ended", not "out of memory";
 *   - LEAK_REPEAT with repeat above the maximum (10000), 0, or a negative
 *     warm-up: a message naming the argument (and the maximum), and no
 *     allocation of repeat's size (the sanitizer build runs this too);
 *   - a tolerance of INT64_MAX, in a scope and in a series, and a
 *     threshold of INT64_MAX are accepted and tolerate a real leak; a
 *     baseline of INT64_MIN saturates the delta rather than wrapping;
 *   - crossed scopes (BEGIN a, BEGIN b, END a, END b) are judged without
 *     counting leakcheck's own scope object: clean code is clean, and a
 *     real leak inside both is reported with its own size in both.
 *
 * Each test's expected outcome and message fragments are listed in the
 * table below; the suite runs with CK_FORK and with CK_NOFORK.
 */
#include <check.h>
#include <leakcheck.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NATIVE LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES)

void *lc_test_kept[4];
int lc_test_runs;

START_TEST(end_twice)
{
    LEAK_SCOPE_BEGIN(s);
    LEAK_SCOPE_END(s);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(end_never_begun)
{
    lc_scope *s = NULL;

    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(repeat_above_max)
{
    LEAK_REPEAT(r, 1, 2000000000)
        lc_test_runs++;
}
END_TEST

START_TEST(repeat_just_above_max)
{
    LEAK_REPEAT(r, 0, 10001)
        lc_test_runs++;
}
END_TEST

START_TEST(repeat_zero)
{
    LEAK_REPEAT(r, 1, 0)
        lc_test_runs++;
}
END_TEST

START_TEST(warmup_negative)
{
    LEAK_REPEAT(r, -1, 3)
        lc_test_runs++;
}
END_TEST

/* The message comes before anything runs: a body that ran would fail
 * with its own message instead. */
START_TEST(repeat_above_max_runs_nothing)
{
    LEAK_REPEAT(r, 1, 2000000000)
        ck_abort_msg("the body ran");
}
END_TEST

START_TEST(scope_tolerance_max)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(NATIVE),
                          LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, INT64_MAX));
    lc_test_kept[0] = malloc(4096);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(repeat_tolerance_max)
{
    int i = 0;

    LEAK_REPEAT_WITH(r, 1, 3, LC_PROBES(NATIVE),
                     LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, INT64_MAX)) {
        if (i < 4)
            lc_test_kept[i++] = malloc(4096);
    }
}
END_TEST

START_TEST(repeat_threshold_max)
{
    int i = 0;

    LEAK_REPEAT_WITH(r, 1, 3, LC_PROBES(NATIVE),
                     LC_THRESHOLD(LC_PROBE_NATIVE_BYTES, INT64_MAX)) {
        if (i < 4)
            lc_test_kept[i++] = malloc(4096);
    }
}
END_TEST

/* Through the functions: a baseline of INT64_MIN makes the delta
 * INT64_MAX (saturated), which a tolerance of INT64_MAX still allows. */
START_TEST(baseline_extreme)
{
    lc_scope *s = lc_scope_new("extreme");
    int64_t d = 0;

    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(lc_scope_set_probes(s, NATIVE), LC_OK);
    ck_assert_int_eq(lc_scope_set_tolerance(s, LC_PROBE_NATIVE_BYTES,
                                            INT64_MAX), LC_OK);
    ck_assert_int_eq(lc_scope_set_baseline(s, LC_PROBE_NATIVE_BYTES,
                                           INT64_MIN), LC_OK);
    ck_assert_int_eq(lc_scope_begin(s), LC_OK);
    ck_assert_int_eq(lc_scope_end(s), LC_OK);
    ck_assert_int_eq(lc_scope_delta(s, LC_PROBE_NATIVE_BYTES, &d), LC_OK);
    ck_assert(d == INT64_MAX);
    ck_assert_int_eq(lc_scope_leaked(s), 0);
    lc_scope_free(s);
}
END_TEST

START_TEST(crossed_clean)
{
    LEAK_SCOPE_BEGIN_WITH(a, LC_PROBES(NATIVE));
    LEAK_SCOPE_BEGIN_WITH(b, LC_PROBES(NATIVE));
    LEAK_SCOPE_END(a);
    LEAK_SCOPE_END(b);
}
END_TEST

/* A series open across a scope's end is not counted either. */
START_TEST(crossed_series_clean)
{
    lc_series *r = lc_series_new("open", 0, 3);

    ck_assert_ptr_nonnull(r);
    {
        LEAK_SCOPE_BEGIN_WITH(a, LC_PROBES(NATIVE));
        lc_series_free(r);
        r = lc_series_new("opened", 0, 10000);
        LEAK_SCOPE_END(a);
    }
    lc_series_free(r);
}
END_TEST

/* BEGIN a, BEGIN b, leak, END a: a reports the leak, at its own size. */
START_TEST(crossed_leak)
{
    lc_scope *b;
    int64_t d = -1;

    {
        LEAK_SCOPE_BEGIN_WITH(a, LC_PROBES(NATIVE));
        b = lc_scope_new("b");
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(lc_scope_set_probes(b, NATIVE), LC_OK);
        ck_assert_int_eq(lc_scope_begin(b), LC_OK);
        lc_test_kept[0] = malloc(100);
        ck_assert_int_eq(lc_scope_end(b), LC_OK);
        ck_assert_int_eq(lc_scope_delta(b, LC_PROBE_NATIVE_BYTES, &d),
                         LC_OK);
        lc_scope_free(b);
        /* glibc counts the chunk (112 bytes), a sanitizer the request */
        ck_assert_msg(d >= 100 && d <= 112, "b grew %lld", (long long)d);
        LEAK_SCOPE_END(a);
    }
}
END_TEST

typedef struct expect {
    const TTest *const *test;
    int fails;                  /* 1: must fail with every fragment below */
    const char *says[3];
} expect;

static const expect expected[] = {
    {&end_twice, 1, {"leakcheck: LEAK_SCOPE_END at ",
                     "never begun, or has already ended", NULL}},
    {&end_never_begun, 1, {"leakcheck: LEAK_SCOPE_END at ",
                           "never begun, or has already ended", NULL}},
    {&repeat_above_max, 1, {"LEAK_REPEAT 'r'",
                            "repeat is 2000000000; it must be from 1 to "
                            "the maximum, 10000", NULL}},
    {&repeat_just_above_max, 1, {"repeat is 10001; it must be from 1 to "
                                 "the maximum, 10000", NULL}},
    {&repeat_zero, 1, {"repeat is 0; it must be from 1", NULL}},
    {&warmup_negative, 1, {"warmup is -1; it must be at least 0", NULL}},
    {&repeat_above_max_runs_nothing, 1, {"repeat is 2000000000", NULL}},
    {&scope_tolerance_max, 0, {NULL}},
    {&repeat_tolerance_max, 0, {NULL}},
    {&repeat_threshold_max, 0, {NULL}},
    {&baseline_extreme, 0, {NULL}},
    {&crossed_clean, 0, {NULL}},
    {&crossed_series_clean, 0, {NULL}},
    {&crossed_leak, 1, {"scope 'a' leaked", "native_bytes grew by +1", NULL}},
};
#define N_EXPECTED (sizeof expected / sizeof expected[0])

static Suite *
make_suite(void)
{
    Suite *s = suite_create("misuse");
    size_t i;

    for (i = 0; i < N_EXPECTED; i++) {
        TCase *tc = tcase_create((*expected[i].test)->name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, *expected[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

static const expect *
find(const char *name)
{
    size_t i;

    for (i = 0; name != NULL && i < N_EXPECTED; i++)
        if (strcmp((*expected[i].test)->name, name) == 0)
            return &expected[i];
    return NULL;
}

static int
run(enum fork_status fork, const char *mode)
{
    SRunner *sr = srunner_create(make_suite());
    TestResult **results;
    int n, i, j, bad = 0;

    srunner_set_fork_status(sr, fork);
    fflush(stdout);
    srunner_run_all(sr, CK_SILENT);
    n = srunner_ntests_run(sr);
    results = srunner_results(sr);
    for (i = 0; i < n; i++) {
        const expect *e = find(tr_tcname(results[i]));
        const char *msg = tr_msg(results[i]) ? tr_msg(results[i]) : "";
        int ok = e != NULL;

        if (ok && e->fails) {
            ok = tr_rtype(results[i]) == CK_FAILURE;
            for (j = 0; ok && j < 3 && e->says[j]; j++)
                ok = strstr(msg, e->says[j]) != NULL;
        } else if (ok) {
            ok = tr_rtype(results[i]) == CK_PASS;
        }
        printf("%s %-9s %s: %s%s%.*s\n", ok ? "ok  " : "FAIL", mode,
               tr_tcname(results[i]), e && e->fails ? "failed: " : "",
               e && e->fails ? "" : (ok ? "passed" : "expected a pass: "),
               (int)strcspn(msg, "\n"), e && !e->fails && ok ? "" : msg);
        bad += !ok;
    }
    if (n != (int)N_EXPECTED) {
        printf("FAIL %-9s ran %d tests, not %d\n", mode, n, (int)N_EXPECTED);
        bad++;
    }
    free(results);
    srunner_free(sr);
    return bad;
}

int
main(void)
{
    int bad;

    setvbuf(stdout, NULL, _IOLBF, 0);
    bad = run(CK_FORK, "CK_FORK");
    bad += run(CK_NOFORK, "CK_NOFORK");
    printf("%s\n", bad ? "some misuse tests failed" : "all passed");
    return bad ? 1 : 0;
}
