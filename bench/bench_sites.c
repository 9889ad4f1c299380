/*
 * bench_sites.c — what recording allocating sites costs (sites.c, the
 * tracer libleakcheck-trace.so).  In a process without CPython:
 *
 *   - a clean scope of the test macros (lc_scope_open + lc_scope_close,
 *     the native probes) around an empty body;
 *   - a malloc(64)/free pair outside any scope, and inside a scope, where
 *     the tracer (when preloaded) records it;
 *   - an open("/dev/null")/close pair likewise, whose opening call the
 *     tracer records inside a scope.
 *
 * Each figure is the median of --runs timings.  Build and run, without and
 * with the tracer:
 *     make bench/bench_sites && ./bench/bench_sites
 *     LD_PRELOAD=$PWD/c_api/.libs/libleakcheck-trace.so ./bench/bench_sites
 */
#include <leakcheck.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 10000

void *volatile bench_sink;

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void
pairs(void)
{
    int i;

    for (i = 0; i < PAIRS; i++) {
        bench_sink = malloc(64);
        free(bench_sink);
    }
}

static void
fd_pairs(void)
{
    int i, fd;

    for (i = 0; i < PAIRS; i++) {
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            perror("open /dev/null");
            exit(1);
        }
        close(fd);
    }
}

static void
empty_scope(void)
{
    char msg[LC_REPORT_MAX];
    lc_scope *s = lc_scope_open("bench", __FILE__, __LINE__);

    if (lc_scope_close(s, __FILE__, __LINE__, msg, sizeof msg)) {
        fprintf(stderr, "the empty scope leaked:\n%s", msg);
        exit(1);
    }
}

/* The pairs, timed inside an open scope (recorded where a recorder is). */
static double scoped_pairs_us;

static void
scope_with(void (*body)(void))
{
    char msg[LC_REPORT_MAX];
    lc_scope *s = lc_scope_open("bench", __FILE__, __LINE__);
    double t0 = now_us();

    body();
    scoped_pairs_us = now_us() - t0;
    if (lc_scope_close(s, __FILE__, __LINE__, msg, sizeof msg)) {
        fprintf(stderr, "the scope leaked:\n%s", msg);
        exit(1);
    }
}

static void
scope_with_pairs(void)
{
    scope_with(pairs);
}

static void
scope_with_fd_pairs(void)
{
    scope_with(fd_pairs);
}

static double
median_us(void (*fn)(void), int runs, double *inner)
{
    double *t = malloc(sizeof(double) * (size_t)runs), m;
    int i;

    fn();
    for (i = 0; i < runs; i++) {
        double t0 = now_us();
        fn();
        t[i] = inner ? *inner : now_us() - t0;
    }
    qsort(t, (size_t)runs, sizeof(double), cmp_double);
    m = t[runs / 2];
    free(t);
    return m;
}

int
main(int argc, char **argv)
{
    int runs = 1000;

    if (argc == 3 && strcmp(argv[1], "--runs") == 0)
        runs = atoi(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [--runs N]\n", argv[0]);
        return 2;
    }
    printf("leakcheck %s, median of %d runs, tracer %s\n", lc_version(), runs,
           dlsym(RTLD_DEFAULT, "lc_trace_table_v1") ? "preloaded"
                                                    : "not loaded");
    printf("  clean scope, empty body         %8.2f us\n",
           median_us(empty_scope, runs, NULL));
    printf("  malloc(64)+free, no scope       %8.1f ns per pair\n",
           median_us(pairs, runs / 10 + 1, NULL) * 1e3 / PAIRS);
    printf("  malloc(64)+free, in a scope     %8.1f ns per pair\n",
           median_us(scope_with_pairs, runs / 10 + 1, &scoped_pairs_us) *
               1e3 / PAIRS);
    printf("  open+close /dev/null, no scope  %8.1f ns per pair\n",
           median_us(fd_pairs, runs / 10 + 1, NULL) * 1e3 / PAIRS);
    printf("  open+close /dev/null, in a scope%8.1f ns per pair\n",
           median_us(scope_with_fd_pairs, runs / 10 + 1, &scoped_pairs_us) *
               1e3 / PAIRS);
    return 0;
}
