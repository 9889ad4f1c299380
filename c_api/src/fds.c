/*
 * fds.c — which descriptors a scope or series left open, by number and
 * what /proc/self/fd says each one is (a path, socket:[...], pipe:[...]).
 *
 * A set of open descriptors is taken where the fds probe is read first
 * (a scope's begin, a series' first measured snapshot) and again at the
 * end, into a fixed bitmap of descriptors 0 to LC__FDSET_MAX - 1: listing
 * /proc/self/fd goes through getdents64 into a stack buffer, so taking a
 * set allocates nothing and changes no probe's reading.  Descriptors from
 * LC__FDSET_MAX on are counted, not named.  The report reads each new
 * descriptor's target with readlink when it is written, and, where the
 * preloaded tracer recorded the call that opened it, names that call's
 * line (sites.c).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct lc__fd_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

#define LC__FDS_LISTED 8        /* new descriptors named in a report       */

static int
has(const lc__fdset *set, long fd)
{
    return (set->bits[fd / 64] >> (fd % 64)) & 1u;
}

void
lc__fdset_take(lc__fdset *set)
{
    char buf[4096];
    long got;
    int dfd;

    memset(set, 0, sizeof *set);
    dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    while ((got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        long off = 0;
        while (off < got) {
            struct lc__fd_dirent64 *d =
                (struct lc__fd_dirent64 *)(buf + off);
            char *end;
            long fd;

            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9')
                continue;
            fd = strtol(d->d_name, &end, 10);
            if (*end != '\0' || fd == dfd || fd < 0)
                continue;
            if (fd < LC__FDSET_MAX)
                set->bits[fd / 64] |= (uint64_t)1 << (fd % 64);
            else
                set->above++;
        }
    }
    set->taken = got == 0;
    close(dfd);
}

static _Thread_local lc__fdset *reading_into;

void
lc__fdset_reading(lc__fdset *set)
{
    reading_into = set;
}

/* Counts the descriptors of a set; -1 when it was not taken. */
static int64_t
set_count(const lc__fdset *set)
{
    int64_t n;
    int i;

    if (!set->taken)
        return -1;
    n = set->above;
    for (i = 0; i < LC__FDSET_MAX / 64; i++)
        n += __builtin_popcountll(set->bits[i]);
    return n;
}

/*
 * Linux 6.2 and later give the number of open descriptors as the size of
 * /proc/self/fd: one stat(), no descriptor opened, no listing (the
 * listing costs a few microseconds a snapshot).  Earlier kernels give 0.
 * Trusted once it agreed with a listing of a process that has some open:
 * `stat_counts` is 0 until asked, 1 trusted, -1 not.  Threads may ask at
 * once: each would decide the same.
 */
static int stat_counts;

static int64_t
stat_count(void)
{
    struct stat st;

    return stat("/proc/self/fd", &st) == 0 ? (int64_t)st.st_size : -1;
}

int64_t
lc__fds_read(void)
{
    lc__fdset local;
    int state = __atomic_load_n(&stat_counts, __ATOMIC_RELAXED);
    int64_t listed, counted;

    /* A set to fill for a report: the listing, which names them. */
    if (reading_into != NULL) {
        lc__fdset_take(reading_into);
        return set_count(reading_into);
    }
    if (state > 0)
        return stat_count();
    lc__fdset_take(&local);
    listed = set_count(&local);
    if (state == 0) {
        counted = stat_count();
        __atomic_store_n(&stat_counts,
                         listed > 0 && counted == listed ? 1 : -1,
                         __ATOMIC_RELAXED);
    }
    return listed;
}

void
lc__fds_report(lc__buf *b, const lc__fdset *before, const lc__fdset *after)
{
    char path[64], target[256], opener[200];
    long fd;
    int listed = 0, more = 0, openers = 0;

    if (!before->taken || !after->taken)
        return;
    for (fd = 0; fd < LC__FDSET_MAX; fd++) {
        ssize_t n;

        if (!has(after, fd) || has(before, fd))
            continue;
        if (listed == LC__FDS_LISTED) {
            more++;
            continue;
        }
        listed++;
        snprintf(path, sizeof path, "/proc/self/fd/%ld", fd);
        n = readlink(path, target, sizeof target - 1);
        if (n < 0) {
            lc__buf_printf(b, "    fd %ld (closed since)\n", fd);
            continue;
        }
        target[n] = '\0';
        lc__buf_printf(b, "    fd %ld -> %s%s", fd, target,
                       (size_t)n == sizeof target - 1 ? "..." : "");
        if (lc__sites_fd_opener(fd, opener, sizeof opener)) {
            lc__buf_printf(b, ", opened at %s", opener);
            openers++;
        }
        lc__buf_printf(b, "\n");
    }
    if (openers > 0)
        lc__sites_fds_named();
    if (more > 0)
        lc__buf_printf(b, "    and %d more new descriptor%s\n", more,
                       more == 1 ? "" : "s");
    if (after->above > before->above)
        lc__buf_printf(b, "    and %d more open from descriptor %d on, "
                          "not named\n", after->above - before->above,
                       LC__FDSET_MAX);
}
