/*
 * test_native.c — the native probes (native_bytes, fds, threads) through
 * the Check macros, in a pure C program: for each probe a test that leaks
 * and must fail, and a clean twin that does the same work, releases it and
 * must pass; a forgotten malloc of 6 bytes caught by the defaults; what a
 * clean scope would grow once (threads' stacks, stdio buffers) settled;
 * LEAK_REPEAT failing on per-run growth with one delta per run, and
 * passing a cache that fills once; settings given to LEAK_SCOPE_BEGIN_WITH
 * and LEAK_REPEAT_WITH obeyed, and out-of-range ones refused.  The harness
 * runs the suite with CK_FORK and again with CK_NOFORK.
 *
 * The same program runs in the sanitizer build, where native_bytes reads
 * AddressSanitizer's allocator.
 */
#include <check.h>
#include <leakcheck.h>

#include <fcntl.h>
#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define BIG_LEAK (64 * 1024)
#define SMALL_LEAK 6

/*
 * Leaked things are kept reachable from non-static globals: a pointer kept
 * only in a static that is never read lets the compiler drop the malloc,
 * and then nothing leaks.
 */
void *lc_test_kept_block;
struct node { struct node *next; char pad[24]; };
struct node *lc_test_kept_list;
void *lc_test_cache;

/* Touches every page, so that the block is in use in every sense. */
static void *
filled_block(size_t size)
{
    void *p = malloc(size);

    if (p != NULL)
        memset(p, 0xab, size);
    return p;
}

START_TEST(leak_native_bytes_scope)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_block = filled_block(BIG_LEAK);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_native_bytes_scope)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_block = filled_block(BIG_LEAK);
    free(lc_test_kept_block);
    lc_test_kept_block = NULL;
    LEAK_SCOPE_END(s);
}
END_TEST

/*
 * Above glibc's largest mmap threshold (32 MiB on 64-bit systems): always
 * served with mmap, and resized with mremap.  glibc 2.43 counts 16 bytes
 * more in mallinfo2's total of such blocks at each resize and never takes
 * them back; the reading leaves them out (heap.c, mapped_bytes).
 */
#define MAPPED (36u * 1024 * 1024)
struct mapped { struct mapped *next; };
struct mapped *lc_test_kept_mapped;

static void *
resized_mapped_block(void)
{
    void *p = malloc(MAPPED);
    int i;

    for (i = 1; p != NULL && i <= 8; i++) {
        void *q = realloc(p, MAPPED + (size_t)(i % 3) * 4096 * 5);
        if (q == NULL)
            free(p);
        p = q;
    }
    return p;
}

START_TEST(clean_native_bytes_repeat_mapped_resized)
{
    LEAK_REPEAT(r, 1, 5) {
        void *p = resized_mapped_block();
        ck_assert_ptr_nonnull(p);
        free(p);
    }
}
END_TEST

/* The same blocks kept: whole pages, read as they are. */
START_TEST(leak_native_bytes_repeat_mapped_resized)
{
    LEAK_REPEAT(r, 1, 5) {
        struct mapped *p = resized_mapped_block();
        ck_assert_ptr_nonnull(p);
        p->next = lc_test_kept_mapped;
        lc_test_kept_mapped = p;
    }
}
END_TEST

/* A forgotten malloc of a few bytes fails with the default tolerance. */
START_TEST(leak_native_bytes_scope_small)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_block = filled_block(SMALL_LEAK);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_native_bytes_scope_small)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_block = filled_block(SMALL_LEAK);
    free(lc_test_kept_block);
    lc_test_kept_block = NULL;
    LEAK_SCOPE_END(s);
}
END_TEST

/*
 * A heap with free chunks one class larger than 24 bytes asks and none of
 * its own size: malloc(24) then hands out a 48-byte chunk, and freeing it
 * fills the other class of glibc's per-thread cache.  A reading that
 * counts that cache, or that tries to fill it to the same state each
 * time, reads a clean malloc/free pair as growth (+192 seen).
 */
#define NO_EXACT_PAIRS 64
#define NO_EXACT_DRAIN 20000
static void *no_exact_pairs[2 * NO_EXACT_PAIRS];
static void *no_exact_drained[NO_EXACT_DRAIN];
static int no_exact_count;

static void
no_exact_chunk_begin(void)
{
    int i;

    for (i = 0; i < 2 * NO_EXACT_PAIRS; i++)
        no_exact_pairs[i] = malloc(40);
    for (i = 0; i < 2 * NO_EXACT_PAIRS; i += 2) {   /* a hole between two */
        free(no_exact_pairs[i]);
        no_exact_pairs[i] = NULL;
    }
    free(malloc(4000));         /* sorts the freed chunks into their bin  */
    no_exact_count = 0;
    while (no_exact_count < NO_EXACT_DRAIN) {
        void *p = malloc(24);
        ck_assert_ptr_nonnull(p);
        no_exact_drained[no_exact_count++] = p;
        if (malloc_usable_size(p) != 24)
            break;              /* no chunk of its own size is left       */
    }
}

static void
no_exact_chunk_end(void)
{
    int i;

    for (i = 0; i < no_exact_count; i++)
        free(no_exact_drained[i]);
    for (i = 0; i < 2 * NO_EXACT_PAIRS; i++)
        free(no_exact_pairs[i]);
}

START_TEST(clean_native_bytes_scope_no_exact_chunk)
{
    int i;

    no_exact_chunk_begin();
    for (i = 0; i < 5; i++) {
        LEAK_SCOPE_BEGIN(s);
        lc_test_kept_block = malloc(24);
        free(lc_test_kept_block);
        lc_test_kept_block = NULL;
        LEAK_SCOPE_END(s);
    }
    no_exact_chunk_end();
}
END_TEST

START_TEST(leak_native_bytes_scope_no_exact_chunk)
{
    no_exact_chunk_begin();
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_block = malloc(24);
    LEAK_SCOPE_END(s);
}
END_TEST

/* stdin's buffer is allocated on its first read (this is the only test
 * reading it); the engine allocates it before its first reading. */
START_TEST(clean_native_bytes_stdio_first_use)
{
    LEAK_SCOPE_BEGIN(s);
    (void)getc(stdin);
    clearerr(stdin);
    LEAK_SCOPE_END(s);
}
END_TEST

/*
 * Snapshot pairs around a clean strdup/free, with malloc/free churn of
 * varying sizes and counts between the pairs, so that each pair starts
 * with the per-thread cache in another state: every pair reads exactly 0
 * (glibc 2.43 read -160 in 1 of 20 pairs when its cache was not found).
 */
#define PAIRS 200
START_TEST(clean_native_bytes_back_to_back)
{
    lc_snapshot *a = lc_snapshot_new(), *b = lc_snapshot_new();
    const unsigned probe = LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES);
    void *churn[13];
    int i, k;

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    for (i = 0; i < PAIRS; i++) {
        int64_t before, after;
        for (k = 0; k <= i % 13; k++)
            churn[k] = malloc(8 + 24 * (size_t)((i * 7 + k) % 40));
        for (k = 0; k <= i % 13; k++)
            free(churn[k]);
        ck_assert_int_eq(lc_snapshot_take(a, probe, 0), LC_OK);
        lc_test_kept_block = strdup("x");
        free(lc_test_kept_block);
        lc_test_kept_block = NULL;
        ck_assert_int_eq(lc_snapshot_take(b, probe, 0), LC_OK);
        ck_assert_int_eq(lc_snapshot_value(a, LC_PROBE_NATIVE_BYTES, &before), LC_OK);
        ck_assert_int_eq(lc_snapshot_value(b, LC_PROBE_NATIVE_BYTES, &after), LC_OK);
        ck_assert_msg(after == before, "pair %d read %+lld bytes", i,
                      (long long)(after - before));
    }
    lc_snapshot_free(a);
    lc_snapshot_free(b);
}
END_TEST

START_TEST(leak_fds_scope)
{
    int fd;

    LEAK_SCOPE_BEGIN(s);
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_fds_scope)
{
    int fd;

    LEAK_SCOPE_BEGIN(s);
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    close(fd);
    LEAK_SCOPE_END(s);
}
END_TEST

/* A worker that lives until its pipe says stop (or is closed). */
static void *
worker(void *arg)
{
    char c;

    (void)!read((int)(intptr_t)arg, &c, 1);
    return NULL;
}

/* The pipe is made before the scope so that only the thread is measured;
 * a leaked worker stays blocked on it until the process ends. */
static int stop_pipe[2];

START_TEST(leak_threads_scope)
{
    pthread_t t;

    ck_assert_int_eq(pipe(stop_pipe), 0);
    LEAK_SCOPE_BEGIN(s);
    ck_assert_int_eq(pthread_create(&t, NULL, worker,
                                    (void *)(intptr_t)stop_pipe[0]), 0);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_threads_scope)
{
    pthread_t t;

    ck_assert_int_eq(pipe(stop_pipe), 0);
    LEAK_SCOPE_BEGIN(s);
    ck_assert_int_eq(pthread_create(&t, NULL, worker,
                                    (void *)(intptr_t)stop_pipe[0]), 0);
    ck_assert_int_eq(write(stop_pipe[1], "x", 1), 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    LEAK_SCOPE_END(s);
    close(stop_pipe[0]);
    close(stop_pipe[1]);
}
END_TEST

/* A thread of a small stack run once before the first scope (a test
 * warming its code up), then again in it: the engine's settling at its
 * first reading must not make glibc drop that thread's cached stack. */
static void *
small_worker(void *arg)
{
    return arg;
}

static void
run_small_thread(void)
{
    pthread_attr_t attr;
    pthread_t t;

    ck_assert_int_eq(pthread_attr_init(&attr), 0);
    ck_assert_int_eq(pthread_attr_setstacksize(&attr, 64 * 1024), 0);
    ck_assert_int_eq(pthread_create(&t, &attr, small_worker, NULL), 0);
    pthread_attr_destroy(&attr);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}

START_TEST(clean_threads_scope_warmed_first)
{
    run_small_thread();
    LEAK_SCOPE_BEGIN(s);
    run_small_thread();
    LEAK_SCOPE_END(s);
}
END_TEST

/* Three threads at once, each allocating: glibc keeps their stacks for
 * reuse, which the engine settled before the first snapshot. */
static void *
allocating_worker(void *arg)
{
    void *volatile p = malloc(100);

    free(p);
    return arg;
}

START_TEST(clean_threads_scope_three)
{
    pthread_t t[3];
    int i;

    LEAK_SCOPE_BEGIN(s);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, allocating_worker,
                                        NULL), 0);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    LEAK_SCOPE_END(s);
}
END_TEST

/* 24 bytes a run. */
START_TEST(leak_native_bytes_repeat)
{
    LEAK_REPEAT(r, 2, 5) {
        struct node *n = malloc(sizeof *n);
        ck_assert_ptr_nonnull(n);
        n->next = lc_test_kept_list;
        lc_test_kept_list = n;
    }
}
END_TEST

/* The same allocation, released each run. */
START_TEST(clean_native_bytes_repeat)
{
    LEAK_REPEAT(r, 2, 5) {
        struct node *n = malloc(sizeof *n);
        ck_assert_ptr_nonnull(n);
        n->next = lc_test_kept_list;
        lc_test_kept_list = n->next;
        free(n);
    }
}
END_TEST

/* No warm-up: the cache fills in the first measured run, which a series
 * must not take for a leak since the next run does not grow. */
START_TEST(clean_native_bytes_repeat_cache)
{
    LEAK_REPEAT(r, 0, 5) {
        if (lc_test_cache == NULL)
            lc_test_cache = filled_block(BIG_LEAK);
    }
}
END_TEST

START_TEST(leak_native_bytes_repeat_small)
{
    LEAK_REPEAT(r, 1, 4) {
        lc_test_kept_block = filled_block(SMALL_LEAK);
    }
}
END_TEST

START_TEST(clean_native_bytes_repeat_small)
{
    LEAK_REPEAT(r, 1, 4) {
        lc_test_kept_block = filled_block(SMALL_LEAK);
        free(lc_test_kept_block);
        lc_test_kept_block = NULL;
    }
}
END_TEST

START_TEST(leak_fds_repeat)
{
    LEAK_REPEAT(r, 1, 4) {
        ck_assert_int_ge(open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
    }
}
END_TEST

/* ---- settings ---- */

START_TEST(clean_native_bytes_scope_tolerated)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, 4096));
    lc_test_kept_block = filled_block(SMALL_LEAK);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_native_bytes_scope_over_tolerance)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, 64));
    lc_test_kept_block = filled_block(1024);
    LEAK_SCOPE_END(s);
}
END_TEST

/* Only fds are read: the kept block is not seen. */
START_TEST(clean_fds_scope_probes)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(LC_PROBE_BIT(LC_PROBE_FDS)));
    lc_test_kept_block = filled_block(SMALL_LEAK);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_native_bytes_repeat_threshold)
{
    LEAK_REPEAT_WITH(r, 1, 4, LC_THRESHOLD(LC_PROBE_NATIVE_BYTES, 4096)) {
        lc_test_kept_block = filled_block(SMALL_LEAK);
    }
}
END_TEST

/* A tolerance of 16 bytes a run: 1 KiB a run is over it. */
START_TEST(leak_native_bytes_repeat_tolerance)
{
    LEAK_REPEAT_WITH(r, 1, 4, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, 16)) {
        lc_test_kept_block = filled_block(1024);
    }
}
END_TEST

/* Several settings: only native_bytes read, with a threshold of 2 KiB,
 * which 6 bytes a run do not reach; the fd each run leaks is not read. */
START_TEST(clean_native_bytes_repeat_settings)
{
    LEAK_REPEAT_WITH(r, 1, 3, LC_PROBES(LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES)),
                     LC_THRESHOLD(LC_PROBE_NATIVE_BYTES, 2048)) {
        lc_test_kept_block = filled_block(SMALL_LEAK);
        ck_assert_int_ge(open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
    }
}
END_TEST

START_TEST(refused_scope_threshold)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_THRESHOLD(LC_PROBE_FDS, 2));
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(refused_scope_negative_tolerance)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, -1));
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(refused_repeat_threshold_zero)
{
    LEAK_REPEAT_WITH(r, 1, 3, LC_THRESHOLD(LC_PROBE_FDS, 0)) {
        ck_abort_msg("the body of a refused LEAK_REPEAT_WITH ran");
    }
}
END_TEST

START_TEST(refused_repeat_no_such_probe)
{
    LEAK_REPEAT_WITH(r, 1, 3, LC_TOLERANCE(LC_PROBE_COUNT, 1)) {
        ck_abort_msg("the body of a refused LEAK_REPEAT_WITH ran");
    }
}
END_TEST

static Suite *
native_suite(void)
{
    Suite *s = suite_create("native");

    harness_add(s, leak_native_bytes_scope);
    harness_add(s, clean_native_bytes_scope);
    harness_add(s, leak_native_bytes_scope_small);
    harness_add(s, clean_native_bytes_scope_small);
    harness_add(s, clean_native_bytes_scope_no_exact_chunk);
    harness_add(s, leak_native_bytes_scope_no_exact_chunk);
    harness_add(s, clean_native_bytes_stdio_first_use);
    harness_add(s, clean_native_bytes_back_to_back);
    harness_add(s, leak_fds_scope);
    harness_add(s, clean_fds_scope);
    harness_add(s, leak_threads_scope);
    harness_add(s, clean_threads_scope);
    harness_add(s, clean_threads_scope_three);
    harness_add(s, clean_threads_scope_warmed_first);
    harness_add(s, leak_native_bytes_repeat);
    harness_add(s, clean_native_bytes_repeat);
    harness_add(s, clean_native_bytes_repeat_cache);
    harness_add(s, leak_native_bytes_repeat_small);
    harness_add(s, clean_native_bytes_repeat_mapped_resized);
    harness_add(s, leak_native_bytes_repeat_mapped_resized);
    harness_add(s, clean_native_bytes_repeat_small);
    harness_add(s, leak_fds_repeat);
    harness_add(s, clean_native_bytes_scope_tolerated);
    harness_add(s, leak_native_bytes_scope_over_tolerance);
    harness_add(s, clean_fds_scope_probes);
    harness_add(s, clean_native_bytes_repeat_threshold);
    harness_add(s, leak_native_bytes_repeat_tolerance);
    harness_add(s, clean_native_bytes_repeat_settings);
    harness_add(s, refused_scope_threshold);
    harness_add(s, refused_scope_negative_tolerance);
    harness_add(s, refused_repeat_threshold_zero);
    harness_add(s, refused_repeat_no_such_probe);
    return s;
}

/*
 * On the glibc versions whose cache layouts are known (2.30 to 2.43), the
 * main thread's malloc cache is found and left out of the reading rather
 * than filled before each one; a newer glibc is left to the layout check.
 */
static void
expect_cache_found(const lc_probe_info *info)
{
#if defined(__GLIBC__)
    int major = 0, minor = 0;

    if (strstr(info->doc, "mallinfo2") == NULL ||
        sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2 ||
        major != 2 || minor < 30 || minor > 43)
        return;
    harness_expect(strstr(info->doc, "malloc cache") != NULL,
                   "glibc %d.%d: native_bytes reads the main thread's "
                   "malloc cache (%s)", major, minor, info->doc);
#else
    (void)info;
#endif
}

int
main(void)
{
    lc_probe_info info;
    int p;

    for (p = LC_PROBE_NATIVE_BYTES; p <= LC_PROBE_THREADS; p++) {
        lc_probe_get_info(p, &info);
        harness_expect(info.available, "probe %s is available%s%s",
                       info.name, info.reason ? ": " : "",
                       info.reason ? info.reason : "");
    }
    lc_probe_get_info(LC_PROBE_NATIVE_BYTES, &info);
    expect_cache_found(&info);
    return harness_run(native_suite, HARNESS_BOTH);
}
