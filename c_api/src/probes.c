/*
 * probes.c — the probe table, and the probes that need no Python: native
 * heap bytes, file descriptors, threads and valgrind's leak count.
 *
 * Every reader here avoids malloc (stack buffers and raw system calls), so
 * that reading a probe never changes another probe's reading.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define LC_HAVE_VALGRIND 1
#endif
#endif

#if defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define LC_HAVE_MALLINFO2 1
#endif

/*
 * Defaults.  Python probes are exact once the interpreter is settled, so a
 * scope tolerates no growth and a series needs one unit per run.
 * native_bytes tolerates one page in a scope: glibc keeps bookkeeping that
 * a clean test can grow once (a new thread's arena header, stdio buffers on
 * first use); a series sees such one-off growth in one run only.
 */
const lc__probe_desc lc__probes[LC_PROBE_COUNT] = {
    [LC_PROBE_REFS] = {"refs", "refs",
                       "total reference count (sys.gettotalrefcount)",
                       0, 1, 1},
    [LC_PROBE_BLOCKS] = {"blocks", "blocks",
                         "pymalloc live blocks (sys.getallocatedblocks)",
                         0, 1, 1},
    [LC_PROBE_PY_BYTES] = {"py_bytes", "bytes",
                           "live bytes through the PyMem domains (raw blocks "
                           "and blocks over 512 bytes)",
                           0, 1, 1},
    [LC_PROBE_PY_ALLOCS] = {"py_allocs", "allocations",
                            "live allocations through the PyMem domains",
                            0, 1, 1},
    [LC_PROBE_OBJECTS] = {"objects", "objects",
                          "objects tracked by the cyclic garbage collector",
                          0, 1, 1},
    [LC_PROBE_GARBAGE] = {"garbage", "objects",
                          "uncollectable objects in gc.garbage", 0, 1, 1},
    [LC_PROBE_NATIVE_BYTES] = {"native_bytes", "bytes",
                               "C heap in use (glibc mallinfo2)", 4096, 1, 0},
    [LC_PROBE_FDS] = {"fds", "fds", "open file descriptors", 0, 1, 0},
    [LC_PROBE_THREADS] = {"threads", "threads", "live threads", 0, 1, 0},
    [LC_PROBE_VALGRIND] = {"valgrind", "bytes",
                           "bytes memcheck finds leaked (definite and "
                           "possible)",
                           0, 1, 0},
};

int
lc_probe_lookup(const char *name)
{
    int i;

    if (name == NULL)
        return LC_ENOPROBE;
    for (i = 0; i < LC_PROBE_COUNT; i++)
        if (strcmp(lc__probes[i].name, name) == 0)
            return i;
    return LC_ENOPROBE;
}

static const char *
unavailable(int probe)
{
    return lc__probes[probe].python ? lc__python_unavailable(probe)
                                    : lc__native_unavailable(probe);
}

int
lc_probe_get_info(int probe, lc_probe_info *info)
{
    const lc__probe_desc *d;

    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (info == NULL)
        return LC_EINVAL;
    d = &lc__probes[probe];
    info->name = d->name;
    info->unit = d->unit;
    info->doc = d->doc;
    info->reason = unavailable(probe);
    info->available = info->reason == NULL;
    info->tolerance = d->tolerance;
    info->threshold = d->threshold;
    return LC_OK;
}

unsigned
lc_probes_available(void)
{
    unsigned mask = 0;
    int i;

    for (i = 0; i < LC_PROBE_COUNT; i++)
        if (unavailable(i) == NULL)
            mask |= LC_PROBE_BIT(i);
    return mask;
}

/* ---- file descriptors ---------------------------------------------------- */

struct lc__dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Counts the entries of a /proc folder with getdents64 into a stack buffer
 * (opendir would malloc); -1 if it cannot be read. */
static int64_t
count_entries(const char *path)
{
    char buf[4096];
    int64_t n = 0;
    long got;
    int dfd;

    dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    while ((got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        long off = 0;
        while (off < got) {
            struct lc__dirent64 *d = (struct lc__dirent64 *)(buf + off);
            if (d->d_name[0] != '.')
                n++;
            off += d->d_reclen;
        }
    }
    close(dfd);
    return got < 0 ? -1 : n;
}

/* The descriptor used for reading is not counted. */
static int64_t
count_fds(void)
{
    int64_t n = count_entries("/proc/self/fd");
    return n < 0 ? -1 : n - 1;
}

/* ---- threads ------------------------------------------------------------- */

/* One entry per thread in /proc/self/task: unlike /proc/self/stat's thread
 * count, listing it costs the same however large the address space is
 * (reading /proc/self/stat sums up the memory map, ~15 us in a Python
 * process). */
int64_t
lc__threads_now(void)
{
    return count_entries("/proc/self/task");
}

/* ---- native heap --------------------------------------------------------- */

/*
 * glibc's per-thread cache (tcache) keeps up to 7 freed chunks per size
 * class, and mallinfo counts them as in use: a clean malloc/free pair can
 * look like growth.  Filling every class of the calling thread's cache
 * before each reading puts the cache in the same state every time, so
 * it cancels out of any delta.  Cost: 64 x 7 malloc/free pairs.
 *
 * malloc may hand out a chunk one class larger than asked (when splitting
 * a free chunk would leave less than a minimum chunk), and freeing it
 * fills that class, not this one: such strays are set aside until the
 * class holds 7 chunks of its own size.  Classes go in ascending order,
 * so the class a stray lands in is filled after it.
 */
#define LC__TCACHE_BINS 64
#define LC__TCACHE_COUNT 7
#define LC__TCACHE_STRAYS 32

static void
fill_tcache(void)
{
    void *held[LC__TCACHE_COUNT], *stray[LC__TCACHE_STRAYS];
    size_t bin;
    int n, strays;

    for (bin = 0; bin < LC__TCACHE_BINS; bin++) {
        size_t request = 24 + 16 * bin;   /* lands in tcache bin `bin` */
        n = strays = 0;
        while (n < LC__TCACHE_COUNT && strays < LC__TCACHE_STRAYS) {
            void *p = malloc(request);
            if (p == NULL)
                break;
            if (malloc_usable_size(p) == request)
                held[n++] = p;
            else
                stray[strays++] = p;
        }
        while (n > 0)
            free(held[--n]);
        while (strays > 0)
            free(stray[--strays]);
    }
}

static int64_t
heap_in_use(void)
{
#if defined(LC_HAVE_MALLINFO2)
    struct mallinfo2 mi;

    fill_tcache();
    mi = mallinfo2();
    return (int64_t)mi.uordblks + (int64_t)mi.hblkhd;
#else
    return -1;
#endif
}

/* ---- valgrind ------------------------------------------------------------ */

static int64_t
valgrind_leaked(void)
{
#if defined(LC_HAVE_VALGRIND)
    unsigned long leaked = 0, dubious = 0, reachable = 0, suppressed = 0;

    /* "added" mode also has memcheck log where each new leak was allocated. */
    VALGRIND_DO_ADDED_LEAK_CHECK;
    VALGRIND_COUNT_LEAKS(leaked, dubious, reachable, suppressed);
    (void)reachable;
    (void)suppressed;
    return (int64_t)(leaked + dubious);
#else
    return -1;
#endif
}

const char *
lc__native_unavailable(int probe)
{
    switch (probe) {
    case LC_PROBE_NATIVE_BYTES:
#if defined(LC_HAVE_MALLINFO2)
        return NULL;
#else
        return "needs glibc 2.33 or later (mallinfo2)";
#endif
    case LC_PROBE_FDS:
        return access("/proc/self/fd", R_OK) == 0
                   ? NULL
                   : "/proc/self/fd cannot be read";
    case LC_PROBE_THREADS:
        return access("/proc/self/task", R_OK) == 0
                   ? NULL
                   : "/proc/self/task cannot be read";
    case LC_PROBE_VALGRIND:
#if defined(LC_HAVE_VALGRIND)
        return RUNNING_ON_VALGRIND ? NULL : "not running under valgrind";
#else
        return "built without valgrind's headers";
#endif
    default:
        return "not a native probe";
    }
}

static void
put(lc_snapshot *snap, int probe, int64_t value)
{
    if (value >= 0) {
        snap->values[probe] = value;
        snap->mask |= LC_PROBE_BIT(probe);
    }
}

void
lc__native_read(lc_snapshot *snap, unsigned mask)
{
    if (mask & LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES))
        put(snap, LC_PROBE_NATIVE_BYTES, heap_in_use());
    if (mask & LC_PROBE_BIT(LC_PROBE_FDS))
        put(snap, LC_PROBE_FDS, count_fds());
    if (mask & LC_PROBE_BIT(LC_PROBE_THREADS))
        put(snap, LC_PROBE_THREADS, lc__threads_now());
    if (mask & LC_PROBE_BIT(LC_PROBE_VALGRIND))
        put(snap, LC_PROBE_VALGRIND, valgrind_leaked());
}
