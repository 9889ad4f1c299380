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

int64_t
lc__fds_read(void)
{
    lc__fdset local, *set = reading_into ? reading_into : &local;
    int64_t n;
    int i;

    lc__fdset_take(set);
    if (!set->taken)
        return -1;
    n = set->above;
    for (i = 0; i < LC__FDSET_MAX / 64; i++)
        n += __builtin_popcountll(set->bits[i]);
    return n;
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
