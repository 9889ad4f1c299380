/*
 * bench_snapshot.c — what a snapshot costs.
 *
 * 1. Native probes in a process without CPython, and the first snapshot,
 *    which settles the process once.
 * 2. With an embedded CPython holding a realistic heap (a few stdlib
 *    modules imported, plus `--objects` extra objects): a bare gc.collect(),
 *    a snapshot of every probe (which starts with that collection), and the
 *    same snapshot without the collection: the snapshot's own cost.
 *
 * Each figure is the median of --runs timings.  Build and run:
 *     make bench/bench_snapshot && ./bench/bench_snapshot
 */
#include <Python.h>
#include <leakcheck.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

typedef void (*work_fn)(void *arg);

static double
median_us(work_fn fn, void *arg, int runs)
{
    double *t = malloc(sizeof(double) * (size_t)runs), m;
    int i;

    fn(arg); /* warm */
    for (i = 0; i < runs; i++) {
        double t0 = now_us();
        fn(arg);
        t[i] = now_us() - t0;
    }
    qsort(t, (size_t)runs, sizeof(double), cmp_double);
    m = t[runs / 2];
    free(t);
    return m;
}

struct snap_arg {
    lc_snapshot *snap;
    unsigned probes;
    unsigned flags;
};

static void
take(void *p)
{
    struct snap_arg *a = p;
    if (lc_snapshot_take(a->snap, a->probes, a->flags) != LC_OK) {
        fprintf(stderr, "snapshot failed\n");
        exit(1);
    }
}

static void
bare_collect(void *p)
{
    PyObject *collect = p, *r = PyObject_CallObject(collect, NULL);
    Py_XDECREF(r);
}

int
main(int argc, char **argv)
{
    int runs = 2000, objects = 200000, i, p;
    struct snap_arg a;
    PyObject *gc, *collect;
    double bare, all, nocollect;
    char code[256];

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc)
            objects = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--runs N] [--objects N]\n", argv[0]);
            return 2;
        }
    }
    a.snap = lc_snapshot_new();
    printf("leakcheck %s, median of %d runs\n", lc_version(), runs);

    a.probes = LC_PROBES_NATIVE;
    a.flags = 0;
    {
        /* Once per process: the first reading of native_bytes settles
         * threads' stacks and arenas and stdio buffers (heap.c). */
        double t0 = now_us();
        take(&a);
        printf("without CPython:\n  first snapshot (settles once)  %8.1f us\n",
               now_us() - t0);
    }
    printf("  snapshot, native probes        %8.1f us\n",
           median_us(take, &a, runs));
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        lc_probe_info info;
        lc_probe_get_info(p, &info);
        if (!info.available)
            continue;
        a.probes = LC_PROBE_BIT(p);
        printf("    %-28s %8.1f us\n", info.name, median_us(take, &a, runs));
    }

    Py_Initialize();
    snprintf(code, sizeof code,
             "import json, re, typing, collections, decimal, unittest\n"
             "_bench_heap = [[i] for i in range(%d)]\n", objects);
    if (PyRun_SimpleString(code) != 0)
        return 1;
    gc = PyImport_ImportModule("gc");
    collect = PyObject_GetAttrString(gc, "collect");
    {
        PyObject *objs = PyObject_CallMethod(gc, "get_objects", NULL);
        printf("with CPython %s, %zd GC-tracked objects:\n", Py_GetVersion(),
               PyList_Size(objs));
        Py_DECREF(objs);
    }
    bare = median_us(bare_collect, collect, runs / 10);
    a.probes = LC_PROBES_ALL;
    a.flags = 0;
    all = median_us(take, &a, runs / 10);
    a.flags = LC_SNAPSHOT_NO_COLLECT;
    nocollect = median_us(take, &a, runs / 10);
    printf("  bare gc.collect()              %8.1f us\n", bare);
    printf("  snapshot, all probes           %8.1f us  (%+.1f us over the "
           "collection)\n", all, all - bare);
    printf("  snapshot, all, no collection   %8.1f us\n", nocollect);
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        lc_probe_info info;
        lc_probe_get_info(p, &info);
        if (!info.available)
            continue;
        a.probes = LC_PROBE_BIT(p);
        printf("    %-28s %8.1f us\n", info.name,
               median_us(take, &a, runs / 10));
    }

    /* The same after gc.freeze(): what a harness that freezes the heap it
     * found pays per snapshot. */
    PyRun_SimpleString("import gc; gc.collect(); gc.freeze()");
    bare = median_us(bare_collect, collect, runs);
    a.probes = LC_PROBES_ALL;
    a.flags = 0;
    all = median_us(take, &a, runs);
    printf("after gc.freeze():\n  bare gc.collect()              %8.1f us\n"
           "  snapshot, all probes           %8.1f us  (%+.1f us over the "
           "collection)\n", bare, all, all - bare);

    Py_DECREF(collect);
    Py_DECREF(gc);
    lc_snapshot_free(a.snap);
    Py_Finalize();
    return 0;
}
