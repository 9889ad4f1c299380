/*
 * probes.c — the probe table, and the probes that need no Python: file
 * descriptors, threads and valgrind's leak count (native heap bytes are
 * read in heap.c).
 *
 * Every reader here avoids malloc (stack buffers and raw system calls), so
 * that reading a probe never changes another probe's reading.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Defaults.  Every probe is exact once the process is settled, so a scope
 * tolerates no growth and a series needs one unit per run: a forgotten
 * malloc of any size fails.  native_bytes settles what a clean scope would
 * otherwise grow once (heap.c).
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
                               "C heap in use", 0, 1, 0},
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
    info->doc = probe == LC_PROBE_NATIVE_BYTES ? lc__heap_doc() : d->doc;
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

/* The listing's own descriptor is not counted; those fds.c keeps open on
 * /proc/self/fd and /proc/self/task are, in every reading (fds.c). */
static int64_t
count_fds(void)
{
    return lc__fds_read();
}

/* ---- threads ------------------------------------------------------------- */

/* One entry per thread in /proc/self/task: unlike /proc/self/stat's thread
 * count, listing it costs the same however large the address space is
 * (reading /proc/self/stat sums up the memory map, ~15 us in a Python
 * process).  Linux also gives the count as that folder's link count, less
 * its two own links (proc_task_getattr): one stat(), no listing (2.0 us
 * against 5.8 us, measured on Linux 6.18), an fstat() of the descriptor
 * fds.c keeps open on the folder (lc__proc_stat).  Trusted
 * once it agreed with a listing, as the descriptors' count is (fds.c):
 * `threads_stat_counts` is 0 until asked, 1 trusted, -1 not.  Threads may
 * ask at once: each would decide the same. */
static int threads_stat_counts;

static int64_t
threads_by_links(void)
{
    struct stat st;

    return lc__proc_stat(LC__PROC_TASKS, &st) == 0 && st.st_nlink >= 2
               ? (int64_t)st.st_nlink - 2
               : -1;
}

int64_t
lc__threads_now(void)
{
    int state = __atomic_load_n(&threads_stat_counts, __ATOMIC_RELAXED);
    int64_t listed, linked;

    if (state > 0)
        return threads_by_links();
    listed = count_entries("/proc/self/task");
    if (state == 0) {
        linked = threads_by_links();
        /* Decided only when a second listing agrees with the first: a
         * thread that began or ended between them is asked about again. */
        if (listed > 0 && count_entries("/proc/self/task") == listed)
            __atomic_store_n(&threads_stat_counts, linked == listed ? 1 : -1,
                             __ATOMIC_RELAXED);
    }
    return listed;
}

/* Whether a /proc folder can be read; once it could, that is remembered
 * (an access() per probe per snapshot cost ~2.5 us each): a reading that
 * fails later is no reading, not a zero.  Threads may ask at once: the
 * flag is read and set atomically. */
static int proc_fd_seen, proc_task_seen;

static int
readable_proc(const char *path, int *seen)
{
    if (!__atomic_load_n(seen, __ATOMIC_ACQUIRE) && access(path, R_OK) == 0)
        __atomic_store_n(seen, 1, __ATOMIC_RELEASE);
    return __atomic_load_n(seen, __ATOMIC_ACQUIRE);
}

const char *
lc__native_unavailable(int probe)
{
    switch (probe) {
    case LC_PROBE_NATIVE_BYTES:
        return lc__heap_unavailable();
    case LC_PROBE_FDS:
        return readable_proc("/proc/self/fd", &proc_fd_seen)
                   ? NULL
                   : "/proc/self/fd cannot be read";
    case LC_PROBE_THREADS:
        return readable_proc("/proc/self/task", &proc_task_seen)
                   ? NULL
                   : "/proc/self/task cannot be read";
    case LC_PROBE_VALGRIND:
        return lc__memcheck_unavailable();
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

/*
 * Under memcheck, one leak search serves native_bytes and valgrind alike.
 * It prints memcheck's loss records only in the last snapshot of a scope
 * or series: what that scope leaked, once, rather than again at every
 * snapshot (the records added since the previous search).  The valgrind
 * probe counts definitely and possibly lost bytes.
 */
void
lc__native_read(lc_snapshot *snap, unsigned mask, unsigned flags)
{
    const unsigned heap = LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES);
    const unsigned vg = LC_PROBE_BIT(LC_PROBE_VALGRIND);
    lc__leak_counts c;
    int searched = LC_EUNAVAIL;

    if (mask & (heap | vg))
        lc__heap_settle();
    if ((mask & vg) || ((mask & heap) && lc__heap_memcheck()))
        searched = lc__memcheck_search((flags & LC__SNAPSHOT_LAST) != 0, &c);
    if (mask & heap)
        put(snap, LC_PROBE_NATIVE_BYTES,
            lc__heap_read(searched == LC_OK ? &c : NULL));
    /* The threads first: their reading opens /proc/self/task again if
     * code closed the descriptor kept on it, which the fds probe counts
     * (lc__proc_stat). */
    if (mask & LC_PROBE_BIT(LC_PROBE_THREADS))
        put(snap, LC_PROBE_THREADS, lc__threads_now());
    if (mask & LC_PROBE_BIT(LC_PROBE_FDS))
        put(snap, LC_PROBE_FDS, count_fds());
    if ((mask & vg) && searched == LC_OK)
        put(snap, LC_PROBE_VALGRIND, c.leaked + c.dubious);
}
