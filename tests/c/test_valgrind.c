/*
 * test_valgrind.c — the probes under memcheck, run by run-valgrind.sh: a
 * scope around a function that loses a malloc'd pointer must fail naming
 * "valgrind", a twin that frees it must pass; a forgotten malloc of a few
 * bytes, still reachable, must fail a scope and a series through
 * native_bytes (which reads memcheck's own numbers here, glibc's counters
 * standing still under valgrind), and their clean twins pass.  A series
 * losing a block every run has memcheck print that loss record once
 * (run-valgrind.sh counts them).  Memcheck watches the engine at the same
 * time (run-valgrind.sh makes its errors fail the test).
 *
 * Outside valgrind the probe cannot be read, and this program fails rather
 * than pass without having tested anything.
 */
#include <check.h>
#include <leakcheck.h>

#include <stdlib.h>
#include <string.h>

#include "harness.h"

/*
 * The pointer lives only in this frame, which is gone once the function
 * returns: memcheck then finds the block definitely lost.  noinline keeps
 * the frame (and the pointer) from merging into the test's own.
 */
__attribute__((noinline)) static void
lose_block(size_t size)
{
    char *volatile p = malloc(size);

    if (p != NULL)
        memset(p, 0x5a, size);
}

__attribute__((noinline)) static void
free_block(size_t size)
{
    char *volatile p = malloc(size);

    if (p != NULL)
        memset(p, 0x5a, size);
    free(p);
}

/* Kept reachable through a global: valgrind does not count such a block
 * as leaked, native_bytes does.  Each is kept for good, or with CK_NOFORK
 * a later test would see it lost. */
void *lc_test_kept[64];
static int n_kept;

static void *
kept_block(size_t size)
{
    void *p = malloc(size);

    if (p != NULL && n_kept < 64)
        lc_test_kept[n_kept++] = p;
    return p;
}

START_TEST(clean_valgrind_available)
{
    lc_probe_info info;

    ck_assert_int_eq(lc_probe_get_info(LC_PROBE_VALGRIND, &info), LC_OK);
    ck_assert_msg(info.available, "valgrind: %s",
                  info.reason ? info.reason : "?");
}
END_TEST

START_TEST(leak_valgrind_lost_block)
{
    LEAK_SCOPE_BEGIN(s);
    lose_block(100);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_valgrind_freed_block)
{
    LEAK_SCOPE_BEGIN(s);
    free_block(100);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_valgrind_repeat)
{
    LEAK_REPEAT(r, 2, 5) {
        lose_block(40);
    }
}
END_TEST

START_TEST(leak_native_bytes_scope_small)
{
    LEAK_SCOPE_BEGIN(s);
    ck_assert_ptr_nonnull(kept_block(6));
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_native_bytes_scope_small)
{
    void *volatile p;

    LEAK_SCOPE_BEGIN(s);
    p = malloc(6);
    free(p);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_native_bytes_repeat_small)
{
    LEAK_REPEAT(r, 1, 4) {
        ck_assert_ptr_nonnull(kept_block(6));
    }
}
END_TEST

START_TEST(clean_native_bytes_repeat_small)
{
    LEAK_REPEAT(r, 1, 4) {
        void *volatile p = malloc(6);
        free(p);
    }
}
END_TEST

static Suite *
valgrind_suite(void)
{
    Suite *s = suite_create("valgrind");

    harness_add(s, clean_valgrind_available);
    harness_add(s, leak_valgrind_lost_block);
    harness_add(s, clean_valgrind_freed_block);
    harness_add(s, leak_valgrind_repeat);
    harness_add(s, leak_native_bytes_scope_small);
    harness_add(s, clean_native_bytes_scope_small);
    harness_add(s, leak_native_bytes_repeat_small);
    harness_add(s, clean_native_bytes_repeat_small);
    return s;
}

int
main(void)
{
    lc_probe_info info;

    lc_probe_get_info(LC_PROBE_VALGRIND, &info);
    harness_expect(info.available, "running under valgrind (%s)",
                   info.available ? "the valgrind probe is live"
                                  : info.reason);
    lc_probe_get_info(LC_PROBE_NATIVE_BYTES, &info);
    harness_expect(info.available && strstr(info.doc, "memcheck") != NULL,
                   "native_bytes reads memcheck: %s",
                   info.available ? info.doc : info.reason);
    if (!info.available) {
        /* The inner suite would only prove that the probe is missing. */
        return harness_run(NULL, 0);
    }
    return harness_run(valgrind_suite, HARNESS_BOTH);
}
