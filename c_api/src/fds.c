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
#include <pthread.h>
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
 * /proc/self/fd and /proc/self/task are kept open once either is read:
 * a reading of the descriptors' or the threads' count (their folder's
 * size, its links) is then an fstat() of a descriptor instead of a stat()
 * that walks the path through the /proc/self link each time (`fds` 0.5 us
 * against 1.9 us, `threads` 0.5 against 1.7, bench/bench_snapshot.c; a
 * snapshot reads both).  Both are opened at once,
 * before either is first read, so that the fds probe counts both in every
 * reading.  A descriptor is trusted while it names the folder it was
 * opened on (device and inode): when code closed it, or a file of its
 * own took its number, the next reading opens the folder again (the old
 * number is not ours to close), so that a file opened in its place counts
 * as one more and a descriptor merely closed as none.  A forked child
 * closes the parent's (they name the parent's folders) and opens its own
 * at its first reading.  Under a lock: threads may read at once.
 */
static struct {
    const char *path;
    int fd;                     /* -1 when not open                        */
    dev_t dev;
    ino_t ino;
} procdirs[2] = {
    [LC__PROC_FDS] = {"/proc/self/fd", -1, 0, 0},
    [LC__PROC_TASKS] = {"/proc/self/task", -1, 0, 0},
};
static pthread_mutex_t procdirs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t procdirs_once = PTHREAD_ONCE_INIT;

static void
procdirs_prepare_fork(void)
{
    pthread_mutex_lock(&procdirs_lock);
}

static void
procdirs_parent_forked(void)
{
    pthread_mutex_unlock(&procdirs_lock);
}

static void
procdirs_child_forked(void)
{
    size_t i;

    for (i = 0; i < sizeof procdirs / sizeof procdirs[0]; i++)
        if (procdirs[i].fd >= 0) {
            close(procdirs[i].fd);
            procdirs[i].fd = -1;
        }
    pthread_mutex_unlock(&procdirs_lock);
}

static void
procdirs_register(void)
{
    (void)pthread_atfork(procdirs_prepare_fork, procdirs_parent_forked,
                         procdirs_child_forked);
}

static void
procdir_open(int which)
{
    struct stat st;
    int fd = open(procdirs[which].path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    procdirs[which].fd = -1;
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    procdirs[which].dev = st.st_dev;
    procdirs[which].ino = st.st_ino;
    procdirs[which].fd = fd;
}

int
lc__proc_stat(int which, struct stat *st)
{
    size_t i;
    int fd, ok;

    pthread_once(&procdirs_once, procdirs_register);
    pthread_mutex_lock(&procdirs_lock);
    for (i = 0; i < sizeof procdirs / sizeof procdirs[0]; i++)
        if (procdirs[i].fd < 0)
            procdir_open((int)i);
    fd = procdirs[which].fd;
    ok = fd >= 0 && fstat(fd, st) == 0 && st->st_dev == procdirs[which].dev
         && st->st_ino == procdirs[which].ino;
    if (!ok && fd >= 0) {
        procdir_open(which);
        fd = procdirs[which].fd;
        ok = fd >= 0 && fstat(fd, st) == 0;
    }
    pthread_mutex_unlock(&procdirs_lock);
    return ok ? 0 : -1;
}

/* The descriptors kept open on /proc now, -1 for one that is not (opened
 * again at a new number when code closed the old one: not the code's). */
static void
kept_open(int kept[2])
{
    pthread_mutex_lock(&procdirs_lock);
    kept[0] = procdirs[0].fd;
    kept[1] = procdirs[1].fd;
    pthread_mutex_unlock(&procdirs_lock);
}

/*
 * Linux 6.2 and later give the number of open descriptors as the size of
 * /proc/self/fd: one fstat() of the descriptor kept open (above), no
 * listing (an open, two reads of the folder and a close).  Earlier
 * kernels give 0.  Trusted once it agreed with a listing of a process
 * that has some open, or, where it counts more than the listing shows,
 * once it followed a descriptor opened and closed (count_follows): the
 * kernel counts a number from the moment it is taken, and a thread
 * blocked in accept() holds one that names no file until a connection
 * comes (pytest-rerunfailures' server thread does, in every session it
 * is installed in), which no listing shows.  Such a number is taken all
 * the same: counted, it is a descriptor more while it lasts, and a
 * listing that differs from the count by it would send every reading to
 * the listing.  `stat_counts` is 0 until asked, 1 trusted, -1 not.
 * Threads may ask at once: each would decide the same.
 */
static int stat_counts;

/* The count of /proc/self/fd, -1 when unreadable. */
static int64_t
stat_count(void)
{
    struct stat st;

    return lc__proc_stat(LC__PROC_FDS, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Whether the count (`counted` now) goes up by one with a descriptor
 * opened and back with it closed, as a count of descriptors does (a size
 * of another meaning, or none, does not).  Another thread opening or
 * closing meanwhile makes it fail: the listing is then used, which is
 * never wrong. */
static int
count_follows(int64_t counted)
{
    int64_t opened, closed;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    opened = stat_count();
    close(fd);
    closed = stat_count();
    return counted > 0 && opened == counted + 1 && closed == counted;
}

int64_t
lc__fds_read(void)
{
    lc__fdset local;
    /* A set to fill for a report: the listing, which names them. */
    lc__fdset *set = reading_into != NULL ? reading_into : &local;
    int state = __atomic_load_n(&stat_counts, __ATOMIC_RELAXED);
    /* First: it opens the folders kept open, which every reading counts,
     * the listings too. */
    int64_t counted = stat_count();
    int64_t listed;

    if (state > 0 && set == &local)
        return counted;
    lc__fdset_take(set);
    listed = set_count(set);
    if (state == 0) {
        state = listed > 0 && (counted == listed ||
                               (counted > listed && count_follows(counted)))
                    ? 1 : -1;
        __atomic_store_n(&stat_counts, state, __ATOMIC_RELAXED);
    }
    /* Trusted, the count is every reading's, a report's too: the two may
     * differ by the numbers taken that name no file yet. */
    return state > 0 ? counted : listed;
}

void
lc__fds_report(lc__buf *b, const lc__fdset *before, const lc__fdset *after)
{
    char path[64], target[256], opener[200];
    long fd;
    int listed = 0, more = 0, openers = 0, kept[2];

    if (!before->taken || !after->taken)
        return;
    kept_open(kept);
    for (fd = 0; fd < LC__FDSET_MAX; fd++) {
        ssize_t n;

        if (!has(after, fd) || has(before, fd) || fd == kept[0] ||
                fd == kept[1])
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
