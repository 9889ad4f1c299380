/*
 * heap.c — the native_bytes probe: the C heap in use, read from whichever
 * allocator serves malloc in this process, and the process state settled
 * before the first reading so that a clean scope reads exactly +0.
 *
 * Where the number comes from, in the order tried:
 *
 *   1. memcheck, when the process runs under valgrind's memcheck: the
 *      bytes of every live block (leaked, possibly lost, reachable and
 *      suppressed) found by a leak search, which memcheck's client
 *      requests run; bytes as requested.  Exact, but a search walks the
 *      memory and memcheck prints its leak summary for each (not with -q).
 *      The valgrind probe reads the same search (lc__memcheck_search).
 *      memcheck's mallinfo replacement costs nothing and prints nothing,
 *      but it is not exact: a freed block waiting in memcheck's free queue
 *      counts the bytes its size was rounded up by (a clean malloc(100) and
 *      free read +12).
 *   2. a sanitizer's allocator (AddressSanitizer, LeakSanitizer, ...):
 *      __sanitizer_get_current_allocated_bytes(), looked up at run time so
 *      that a plain build does not depend on it; bytes as requested.
 *   3. glibc's malloc: mallinfo2(), in-use chunks (requests rounded up to
 *      16 bytes, plus 8 bytes of header).
 *   4. mallinfo(): another valgrind tool's replacement, or a glibc older
 *      than 2.33.  Its fields are int: above 2 GiB in use it wraps.
 *
 * A source is kept only if a malloc moves its reading (a self-test, done
 * once): under another allocator (jemalloc or tcmalloc through
 * LD_PRELOAD, ...) glibc's counters stand still whatever leaks, and the
 * probe is then unavailable, with the reason, rather than reading a flat
 * zero.
 *
 * Every reader avoids malloc, and the only allocations here happen once,
 * before the first reading.  The choice of a source, memcheck's detection
 * and the settling each run once under pthread_once, whichever thread asks
 * first: threads that open their first scopes at the same moment wait for
 * it, and then read the same source.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <link.h>
#include <stdio_ext.h>
#define LC_HAVE_STDIO_EXT 1
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33)
#define LC_HAVE_MALLINFO2 1
#endif
#endif

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define LC_HAVE_MEMCHECK_H 1
#endif
#endif

/* ---- glibc: the per-thread cache ----------------------------------------- */

/*
 * glibc's per-thread cache (tcache) keeps freed chunks per size class (up
 * to 7 until glibc 2.41, 16 from 2.42), and mallinfo counts them as in
 * use: a clean malloc/free pair can look like growth, and which chunks sit
 * in the cache depends on what ran before, not on what the code under test
 * keeps.
 *
 * Where the main thread's cache can be read, the reading leaves it out.
 * It is found by what it is, not by where it lies: glibc up to 2.41 made
 * it the first chunk of the brk heap, 2.42 makes it at the first free(),
 * wherever malloc puts it.  The thread's own pointer to it is a word of
 * libc's thread-local block; a word of a thread-local block that points
 * into the brk heap at a chunk of the struct's size is a candidate, for
 * each known layout of struct tcache_perthread_struct (below).  A
 * candidate is trusted only after a self-test: a chunk freed into a class
 * with room must become that class's list head and move its count by one
 * in the layout's direction, in three classes (or in the class of the
 * chunk malloc hands out, which is one class larger than asked when the
 * remainder of the free chunk it takes would be too small to split off:
 * taken for the class asked, it failed the test, and the process read the
 * heap the other way below, which reads growth of a chunk in runs that
 * keep nothing).  Elsewhere (an unknown layout, a heap not made by brk,
 * a reading from another thread) every class of the calling thread's
 * cache is filled before each reading instead, so that it is in the same
 * state each time: which fails when malloc has no chunk of a class's
 * exact size to hand (it hands out a larger free chunk whose remainder
 * would be too small to split off, and the class stays short).
 */
#if defined(LC_HAVE_MALLINFO2)
#define LC__TCACHE_SMALL 64         /* classes of 32 + 16 * i bytes        */
#define LC__TCACHE_BINS_MAX 76
#define LC__TCACHE_FILL 16          /* the largest default class size     */
#define LC__TCACHE_STRAYS 32
#define LC__TCACHE_WALK 65535       /* a list longer is not a cache's     */

/* struct tcache_perthread_struct as each glibc lays it out: uint16_t
 * counts[bins], then tcache_entry *entries[bins]. */
typedef struct {
    size_t chunk;               /* its chunk's size: sizeof + header       */
    size_t bins;
    int slots;                  /* 1: counts hold the room left (2.42+),
                                 * 0: the chunks held (2.30 to 2.41)       */
    unsigned room;              /* 2.30-2.41: the default class size       */
} lc__tcache_layout;

#define DOC_MALLINFO2 "C heap in use (glibc mallinfo2)"
#define DOC_MALLINFO2_CACHE "C heap in use (glibc mallinfo2, less the " \
    "chunks in the main thread's malloc cache)"

static const lc__tcache_layout tcache_layouts[] = {
    {0x290, 64, 0, 7},  /* 2.30 to 2.41                                    */
    {0x300, 76, 1, 0},  /* 2.42 on: classes 64-75 hold larger chunks of
                         * mixed sizes, when glibc.malloc.tcache_max
                         * raises the limit (none by default)             */
};

static struct {
    int known;                  /* 1 once looked for                       */
    const volatile uint16_t *counts;   /* NULL: not readable               */
    void *const volatile *heads;
    const lc__tcache_layout *layout;
    uint16_t size[LC__TCACHE_BINS_MAX]; /* slots layout: a class's size    */
    pid_t owner;                /* the thread whose cache it is            */
    int owner_forks;            /* 1 while the owner is in fork()          */
} tcache;

/* The calling thread's id, asked of the kernel once per thread (a system
 * call at every reading was two a test under the pytest plugin).  A
 * child forked by the owner asks again: tcache_child_forked() forgets the
 * forking thread's id first. */
static __thread pid_t my_tid;

static pid_t
thread_id(void)
{
    if (my_tid == 0)
        my_tid = (pid_t)syscall(SYS_gettid);
    return my_tid;
}

/* A child forked by the owner goes on with the owner's cache, at the same
 * address; a child forked by another thread does not. */
static void
tcache_prepare_fork(void)
{
    tcache.owner_forks = thread_id() == tcache.owner;
}

static void
tcache_parent_forked(void)
{
    tcache.owner_forks = 0;
}

static void
tcache_child_forked(void)
{
    my_tid = 0;                 /* the parent's thread's id */
    if (tcache.owner_forks)
        tcache.owner = thread_id();
    else
        tcache.counts = NULL;
    tcache.owner_forks = 0;
}

static size_t
tcache_chunk(size_t bin)
{
    return 32 + 16 * bin;
}

static size_t
chunk_size(const void *mem)
{
    return ((const size_t *)mem)[-1] & ~(size_t)7;
}

/* The next entry of a cache list: glibc 2.32 and later store it mangled
 * with the address it is stored at (safe-linking); the list heads in the
 * struct are stored plain. */
static void *
tcache_next(const void *entry)
{
    uintptr_t stored = *(const volatile uintptr_t *)entry;

    return (void *)(((uintptr_t)entry >> 12) ^ stored);
}

/* How many chunks class `bin`'s list holds and their bytes; -1 when the
 * list does not end as a cache's does.  Only for the adopted cache: its
 * entries are chunks, in whichever arena they came from. */
static int64_t
tcache_list(size_t bin, int64_t *bytes)
{
    const void *e = tcache.heads[bin];
    int64_t n = 0;

    *bytes = 0;
    while (e != NULL) {
        if (((uintptr_t)e & 15) != 0 || ++n > LC__TCACHE_WALK)
            return -1;
        *bytes += (int64_t)chunk_size(e);
        e = tcache_next(e);
    }
    return n;
}

/* The start of the brk heap, from /proc/self/maps; 0 when there is none.
 * read() into a stack buffer: no malloc. */
static uintptr_t
brk_heap_start(void)
{
    char buf[4096], line[512];
    size_t len = 0;
    ssize_t got;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    uintptr_t start = 0;

    if (fd < 0)
        return 0;
    while (start == 0 && (got = read(fd, buf, sizeof buf)) > 0) {
        ssize_t i;
        for (i = 0; i < got; i++) {
            if (buf[i] != '\n') {
                if (len < sizeof line - 1)
                    line[len++] = buf[i];
                continue;
            }
            line[len] = '\0';
            len = 0;
            if (strstr(line, "[heap]") != NULL) {
                start = (uintptr_t)strtoull(line, NULL, 16);
                break;
            }
        }
    }
    close(fd);
    return start;
}

/* Whether freeing a chunk of `bin`'s size puts it at the head of that
 * class in the cache found, its count moved by one the layout's way.
 * malloc hands out a chunk one class larger than asked when the free
 * chunk it takes would leave a remainder too small to split off (a heap
 * can hold hundreds of those): freed, it goes to its own class, which is
 * then the class tested. */
static int
tcache_follows_free(const lc__tcache_layout *layout,
                    const volatile uint16_t *counts,
                    void *const volatile *heads, size_t bin)
{
    void *volatile p = malloc(tcache_chunk(bin) - 8);
    void *volatile room = NULL;
    unsigned before;
    int full, ok;

    if (p == NULL)
        return 0;
    if (chunk_size(p) < tcache_chunk(0) ||
        (chunk_size(p) - tcache_chunk(0)) / 16 >= layout->bins) {
        free(p);
        return 0;
    }
    bin = (chunk_size(p) - tcache_chunk(0)) / 16;
    full = layout->slots ? counts[bin] == 0 : counts[bin] >= layout->room;
    if (full)                           /* taken from the full class      */
        room = malloc(tcache_chunk(bin) - 8);
    before = counts[bin];
    free(p);
    ok = heads[bin] == p &&
         (layout->slots ? before > 0 && counts[bin] == before - 1
                        : before < layout->room && counts[bin] == before + 1);
    free(room);
    return ok;
}

/*
 * The words of every loaded object's thread-local block (the calling
 * thread's) that point into the brk heap [lo, hi): glibc's `tcache` is one
 * of libc's.  Every object's, not libc's alone: libc is found by none of
 * its addresses reliably (a non-PIE program's own PLT entry is malloc's
 * address there), and where libc is linked into the program its block is
 * the program's.  Collected first, tested after: the test calls malloc,
 * which dl_iterate_phdr's lock has no business around.
 */
#define LC__TCACHE_CANDIDATES 32

typedef struct {
    uintptr_t lo, hi;
    uintptr_t words[LC__TCACHE_CANDIDATES];
    size_t count;
} lc__tls_words;

static int
heap_words(struct dl_phdr_info *info, size_t size, void *data)
{
    lc__tls_words *s = data;
    const uintptr_t *w;
    size_t i, n = 0;
    int k;

    if (size < offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof(void *))
        return 1;
    if (info->dlpi_tls_data == NULL)
        return 0;
    for (k = 0; k < info->dlpi_phnum; k++)
        if (info->dlpi_phdr[k].p_type == PT_TLS)
            n = info->dlpi_phdr[k].p_memsz / sizeof(uintptr_t);
    w = info->dlpi_tls_data;
    for (i = 0; i < n && s->count < LC__TCACHE_CANDIDATES; i++)
        if (w[i] >= s->lo + 16 && w[i] < s->hi && (w[i] & 15) == 0)
            s->words[s->count++] = w[i];
    return 0;
}

/* Whether the struct at `mem`, laid out as `layout`, is the calling
 * thread's cache; then it is adopted. */
static int
tcache_adopt(const lc__tcache_layout *layout, uintptr_t mem, uintptr_t lo,
             uintptr_t hi)
{
    const volatile uint16_t *counts = (const volatile uint16_t *)mem;
    void *const volatile *heads = (void *const volatile *)(counts + layout->bins);
    size_t bin;

    if (mem < lo + 16 || mem - 16 + layout->chunk > hi || (mem & 15) != 0 ||
        chunk_size((const void *)mem) != layout->chunk)
        return 0;
    if (!tcache_follows_free(layout, counts, heads, 0) ||
        !tcache_follows_free(layout, counts, heads, 37) ||
        !tcache_follows_free(layout, counts, heads, LC__TCACHE_SMALL - 1))
        return 0;
    tcache.counts = counts;
    tcache.heads = heads;
    tcache.layout = layout;
    for (bin = 0; layout->slots && bin < layout->bins; bin++) {
        int64_t bytes, held = tcache_list(bin, &bytes);
        if (held < 0 || held + counts[bin] > UINT16_MAX) {
            tcache.counts = NULL;
            return 0;
        }
        tcache.size[bin] = (uint16_t)(held + counts[bin]);
    }
    return 1;
}

static void
find_tcache(void)
{
    lc__tls_words tls;
    size_t w, l;

    /* The main thread's cache lives as long as the process; another
     * thread's is freed when it ends, and its id can be reused.  A reading
     * from another thread leaves the search to the main thread's first
     * (a program whose first reading is a thread's would otherwise fill
     * the cache before every reading, for good). */
    if (getpid() != thread_id())
        return;
    tcache.known = 1;
    free(malloc(1));                    /* the cache exists from here on  */
    tls.lo = brk_heap_start();
    tls.hi = (uintptr_t)sbrk(0);
    tls.count = 0;
    if (tls.lo == 0 || tls.hi <= tls.lo)
        return;
    dl_iterate_phdr(heap_words, &tls);
    for (w = 0; w < tls.count && tcache.counts == NULL; w++)
        for (l = 0; l < sizeof tcache_layouts / sizeof *tcache_layouts; l++)
            if (tcache_adopt(&tcache_layouts[l], tls.words[w], tls.lo,
                             tls.hi))
                break;
    if (tcache.counts == NULL ||
        pthread_atfork(tcache_prepare_fork, tcache_parent_forked,
                       tcache_child_forked) != 0) {
        tcache.counts = NULL;
        return;
    }
    tcache.owner = thread_id();
}

/* Bytes in the calling thread's cache when it can be read, else -1. */
static int64_t
tcache_bytes(void)
{
    int64_t bytes = 0, listed;
    size_t bin;

    if (!tcache.known)
        find_tcache();
    if (tcache.counts == NULL || thread_id() != tcache.owner)
        return -1;
    if (!tcache.layout->slots) {
        for (bin = 0; bin < tcache.layout->bins; bin++)
            bytes += (int64_t)tcache.counts[bin] * (int64_t)tcache_chunk(bin);
        return bytes;
    }
    for (bin = 0; bin < LC__TCACHE_SMALL; bin++)
        bytes += (int64_t)(tcache.size[bin] - tcache.counts[bin]) *
                 (int64_t)tcache_chunk(bin);
    for (; bin < tcache.layout->bins; bin++)
        if (tcache.heads[bin] != NULL) {
            if (tcache_list(bin, &listed) < 0)
                return -1;
            bytes += listed;
        }
    return bytes;
}

/*
 * The other way: filling every class of the calling thread's cache.
 * Cost: 64 x 16 malloc/free pairs (16 covers both class sizes glibc has
 * had; where a class holds 7, the other 9 go back to the heap).  malloc may hand out a chunk one class
 * larger than asked, and freeing it fills that class, not this one: such
 * strays are set aside until the class holds 7 chunks of its own size.
 * Classes go in ascending order, so the class a stray lands in is filled
 * after it.
 */
static void
fill_tcache(void)
{
    void *held[LC__TCACHE_FILL], *stray[LC__TCACHE_STRAYS];
    size_t bin;
    int n, strays;

    for (bin = 0; bin < LC__TCACHE_SMALL; bin++) {
        size_t request = tcache_chunk(bin) - 8;   /* lands in `bin`     */
        n = strays = 0;
        while (n < LC__TCACHE_FILL && strays < LC__TCACHE_STRAYS) {
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
#endif /* LC_HAVE_MALLINFO2 */

/* ---- the readers ---------------------------------------------------------- */

/* ---- memcheck ------------------------------------------------------------- */

static int on_memcheck;
static pthread_once_t memcheck_once = PTHREAD_ONCE_INIT;

static void
detect_memcheck(void)
{
#if defined(LC_HAVE_MEMCHECK_H)
    if (RUNNING_ON_VALGRIND) {
        char byte = 0, bits;
        on_memcheck = VALGRIND_GET_VBITS(&byte, &bits, 1) == 1;
    }
#endif
}

/* memcheck, not another valgrind tool: only memcheck answers GET_VBITS. */
int
lc__memcheck(void)
{
    pthread_once(&memcheck_once, detect_memcheck);
    return on_memcheck;
}

const char *
lc__memcheck_unavailable(void)
{
#if defined(LC_HAVE_MEMCHECK_H)
    if (lc__memcheck())
        return NULL;
    return RUNNING_ON_VALGRIND ? "valgrind's tool is not memcheck"
                               : "not running under valgrind";
#else
    return "built without valgrind's headers";
#endif
}

int
lc__memcheck_search(int report, lc__leak_counts *c)
{
#if defined(LC_HAVE_MEMCHECK_H)
    unsigned long leaked = 0, dubious = 0, reachable = 0, suppressed = 0;

    if (!lc__memcheck())
        return LC_EUNAVAIL;
    if (report)
        VALGRIND_DO_ADDED_LEAK_CHECK;
    else
        VALGRIND_DO_QUICK_LEAK_CHECK;
    VALGRIND_COUNT_LEAKS(leaked, dubious, reachable, suppressed);
    c->leaked = (int64_t)leaked;
    c->dubious = (int64_t)dubious;
    c->reachable = (int64_t)reachable;
    c->suppressed = (int64_t)suppressed;
    return LC_OK;
#else
    (void)report;
    (void)c;
    return LC_EUNAVAIL;
#endif
}

static int64_t
read_memcheck(const lc__leak_counts *given)
{
    lc__leak_counts c;

    if (given == NULL) {
        if (lc__memcheck_search(0, &c) != LC_OK)
            return -1;
        given = &c;
    }
    return given->leaked + given->dubious + given->reachable +
           given->suppressed;
}

/* ---- the allocators' own counters ---------------------------------------- */

typedef size_t (*lc__sanitizer_fn)(void);
static lc__sanitizer_fn sanitizer_bytes;

static int64_t
read_sanitizer(const lc__leak_counts *unused)
{
    (void)unused;
    return (int64_t)sanitizer_bytes();
}

#if defined(LC_HAVE_MALLINFO2)
/*
 * The bytes of the chunks glibc serves with mmap (large requests), from
 * mallinfo2's hblkhd.  Each such chunk is whole pages, but glibc 2.43
 * adds 16 bytes to hblkhd at every realloc() of one and never takes them
 * back (seen with Debian sid's 2.43: realloc of a 300 KB block, then
 * free, leaves hblkhd 16 bytes up; 2.36 leaves it as it was).  Code that
 * resizes a large buffer each run would read as growing 16 bytes a
 * resize: regex's matching of a 50,000-character string grew 128 bytes a
 * call, and no mapping grew.  So what changed since the last reading is
 * taken in whole pages, rounded down: exact while fewer than a page's
 * worth of those resizes (256 with 4 KiB pages) happen between two
 * readings, and the same number where glibc counts right.  Readings may
 * come from several threads: the running total is kept under a lock.
 */
static struct {
    pthread_mutex_t lock;
    int64_t page;
    int started;
    size_t last;                /* hblkhd at the last reading             */
    int64_t total;              /* the mapped chunks' bytes, so far       */
} mapped = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};

/* Held across fork(), so that a child never starts with it locked by a
 * thread it does not have. */
static void
mapped_prepare_fork(void)
{
    pthread_mutex_lock(&mapped.lock);
}

static void
mapped_forked(void)
{
    pthread_mutex_unlock(&mapped.lock);
}

static int64_t
mapped_bytes(size_t hblkhd)
{
    int64_t total, change;

    pthread_mutex_lock(&mapped.lock);
    if (!mapped.started) {
        long page = sysconf(_SC_PAGESIZE);

        mapped.page = page > 0 ? (int64_t)page : 4096;
        mapped.total = (int64_t)hblkhd;
        mapped.started = 1;
    } else {
        change = (int64_t)hblkhd - (int64_t)mapped.last;
        /* Rounded down, negative changes too (a page freed and 16 bytes
         * added read -4080: one page). */
        change -= ((change % mapped.page) + mapped.page) % mapped.page;
        mapped.total += change;
    }
    mapped.last = hblkhd;
    total = mapped.total;
    pthread_mutex_unlock(&mapped.lock);
    return total;
}

static int64_t
read_mallinfo2(const lc__leak_counts *unused)
{
    struct mallinfo2 mi;

    int64_t cached;

    (void)unused;
    cached = tcache_bytes();
    if (cached < 0) {
        fill_tcache();
        cached = 0;
    }
    mi = mallinfo2();
    return (int64_t)mi.uordblks + mapped_bytes(mi.hblkhd) - cached;
}
#endif

/* Looked up rather than called, since glibc declares it deprecated: read
 * only where mallinfo2 is missing (glibc older than 2.33) or stands still
 * (another valgrind tool's replacement). */
typedef struct mallinfo (*lc__mallinfo_fn)(void);
static lc__mallinfo_fn old_mallinfo;

static int64_t
read_mallinfo(const lc__leak_counts *unused)
{
    struct mallinfo mi = old_mallinfo();

    (void)unused;
    return (int64_t)(unsigned)mi.uordblks + (int64_t)(unsigned)mi.hblkhd;
}

/* ---- choosing a source, once ---------------------------------------------- */

static pthread_once_t heap_once = PTHREAD_ONCE_INIT;

static struct {
    int64_t (*read)(const lc__leak_counts *); /* NULL: unavailable         */
    const char *doc;            /* what it reads, for lc_probe_get_info    */
    const char *reason;         /* why it is unavailable                   */
} heap;

/*
 * dlsym that leaves the error state as it found it.  glibc keeps a failed
 * lookup's message in malloc'd memory until dlerror() delivers it; the
 * first failure in a thread also allocates that thread's error state for
 * good (~900 bytes, measured with glibc 2.36), which happens here, before
 * the first reading.
 */
void *
lc__lookup(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);

    if (p == NULL)
        (void)dlerror();
    return p;
}

/*
 * Whether `read` follows malloc: a 64 KiB block (above glibc's per-thread
 * cache, below its mmap threshold) must move the reading by at least its
 * size.  The pointer goes through a volatile so that the compiler cannot
 * drop the malloc/free pair.
 */
static int
follows_malloc(int64_t (*read)(const lc__leak_counts *))
{
    const size_t size = 64 * 1024;
    void *volatile p;
    int64_t before, after;

    before = read(NULL);
    p = malloc(size);
    if (p == NULL)
        return 0;
    after = read(NULL);
    free(p);
    return after - before >= (int64_t)size;
}

/* The name of the allocator that replaced malloc, when one is known. */
static const char *
foreign_allocator(void)
{
    if (lc__lookup("mallctl") != NULL)
        return "malloc is jemalloc's, whose numbers are not read";
    if (lc__lookup("tc_malloc") != NULL)
        return "malloc is tcmalloc's, whose numbers are not read";
    if (lc__lookup("mi_malloc") != NULL)
        return "malloc is mimalloc's, whose numbers are not read";
    return "malloc is neither glibc's nor a sanitizer's or valgrind's, "
           "and its numbers are not read";
}

static void
choose_source(void)
{
    int on_valgrind = 0;

#if defined(LC_HAVE_MEMCHECK_H)
    on_valgrind = RUNNING_ON_VALGRIND != 0;
#endif
    /* Trusted without a self-test, whose two searches would print two
     * leak summaries into the user's log. */
    if (lc__memcheck()) {
        heap.read = read_memcheck;
        heap.doc = "C heap in use (memcheck's leak search: every live "
                   "block, leaked, possibly lost, reachable or suppressed)";
        return;
    }
    sanitizer_bytes = (lc__sanitizer_fn)lc__lookup(
        "__sanitizer_get_current_allocated_bytes");
    if (sanitizer_bytes != NULL && follows_malloc(read_sanitizer)) {
        heap.read = read_sanitizer;
        heap.doc = "C heap in use (the sanitizer's allocator: "
                   "__sanitizer_get_current_allocated_bytes)";
        return;
    }
#if defined(LC_HAVE_MALLINFO2)
    /* Before any reading: registering may allocate. */
    if (pthread_atfork(mapped_prepare_fork, mapped_forked,
                       mapped_forked) == 0 &&
            follows_malloc(read_mallinfo2)) {
        heap.read = read_mallinfo2;
        heap.doc = DOC_MALLINFO2;       /* lc__heap_doc() says more      */
        return;
    }
#endif
    old_mallinfo = (lc__mallinfo_fn)lc__lookup("mallinfo");
    if (old_mallinfo != NULL && follows_malloc(read_mallinfo)) {
        heap.read = read_mallinfo;
        heap.doc = on_valgrind ? "C heap in use (the valgrind tool's "
                                 "malloc, through its mallinfo)"
                               : "C heap in use (mallinfo)";
        return;
    }
    heap.doc = "C heap in use";
    if (on_valgrind)
        heap.reason = "valgrind's tool replaced malloc and its mallinfo "
                      "does not follow it";
    else if (sanitizer_bytes != NULL)
        heap.reason = "the sanitizer's allocated-bytes counter does not "
                      "follow malloc";
    else
        heap.reason = foreign_allocator();
}

const char *
lc__heap_unavailable(void)
{
    pthread_once(&heap_once, choose_source);
    return heap.read ? NULL : heap.reason;
}

/* Where the main thread's cache is left out, the doc says so; asked from
 * the main thread before its first reading, the cache is looked for now
 * (which that reading would do), so that the doc says what the readings
 * will do. */
const char *
lc__heap_doc(void)
{
    pthread_once(&heap_once, choose_source);
#if defined(LC_HAVE_MALLINFO2)
    if (heap.read == read_mallinfo2) {
        if (!tcache.known)
            find_tcache();
        if (tcache.counts != NULL)
            return DOC_MALLINFO2_CACHE;
    }
#endif
    return heap.doc;
}

/* ---- settling, once ------------------------------------------------------- */

/*
 * What a clean scope would otherwise grow once, made to happen before the
 * first reading:
 *
 * - glibc keeps the stacks of ended threads for reuse (up to 40 MiB of
 *   them), each with its TLS vector (a ~300-byte malloc), and the arenas
 *   of ended threads (each with a ~2 KiB header counted as in use): the
 *   first threads a test runs at once leave those behind.  Running as
 *   many threads at once as the stack cache keeps, each calling malloc,
 *   fills both.  A test that runs more threads at once, or threads with
 *   smaller stacks, can still grow them.
 *   The cache frees its oldest stacks once it holds more than 40 MiB, so
 *   the threads of the default stack size are as many as fit in it with
 *   their guard pages (4 of 8 MiB), and the others, which take an arena
 *   each as well, get a small stack: more would evict stacks cached
 *   before the first reading, such as a thread's that the program ran
 *   first to warm its code up (its next thread, in the program's first
 *   scope, would then get a new stack and TLS vector, and read as
 *   growth).
 * - stdio allocates a stream's buffer on its first use: a test printing
 *   for the first time would grow 4 KiB and more.  setvbuf() with no
 *   buffer makes glibc allocate it now, the same size it would pick; a
 *   terminal keeps its line buffering.  Streams already used or set up by
 *   the program are left alone.
 */
#define LC__STACK_CACHE (40u * 1024 * 1024)
#define LC__WARM_THREADS_MAX 8
#define LC__WARM_SMALL_STACK (64u * 1024)

/* The warming threads: each takes an arena with its first malloc and
 * holds it until all of them have one, so that each gets its own. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ready;          /* threads holding their arena                     */
    int release;        /* 1: they may end                                 */
} warm = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void *
warming(void *unused)
{
    void *volatile p = malloc(1);

    pthread_mutex_lock(&warm.lock);
    warm.ready++;
    pthread_cond_broadcast(&warm.cond);
    while (!warm.release)
        pthread_cond_wait(&warm.cond, &warm.lock);
    pthread_mutex_unlock(&warm.lock);
    free(p);
    return unused;
}

static void
warm_threads(void)
{
    const struct timespec pause = {0, 1000 * 1000};
    pthread_t t[LC__WARM_THREADS_MAX];
    pthread_attr_t attr, small;
    size_t stack = 8u * 1024 * 1024, guard = 4096;
    int64_t threads = lc__threads_now();
    int n = 0, want, fit, i, have_small;

    if (pthread_getattr_default_np(&attr) == 0) {
        (void)pthread_attr_getstacksize(&attr, &stack);
        (void)pthread_attr_getguardsize(&attr, &guard);
        pthread_attr_destroy(&attr);
    }
    want = stack ? (int)(LC__STACK_CACHE / stack) + 1 : 1;
    if (want > LC__WARM_THREADS_MAX)
        want = LC__WARM_THREADS_MAX;
    fit = stack ? (int)(LC__STACK_CACHE / (stack + guard)) : want;
    have_small = pthread_attr_init(&small) == 0;
    if (have_small &&
            pthread_attr_setstacksize(&small, LC__WARM_SMALL_STACK) != 0) {
        pthread_attr_destroy(&small);
        have_small = 0;
    }
    for (; n < want; n++) {
        const pthread_attr_t *a = NULL;
        if (n >= fit) {
            if (!have_small)
                break;
            a = &small;
        }
        if (pthread_create(&t[n], a, warming, NULL) != 0)
            break;
    }
    if (have_small)
        pthread_attr_destroy(&small);
    pthread_mutex_lock(&warm.lock);
    while (warm.ready < n)
        pthread_cond_wait(&warm.cond, &warm.lock);
    warm.release = 1;
    pthread_cond_broadcast(&warm.cond);
    pthread_mutex_unlock(&warm.lock);
    for (i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    /* A joined thread can stay listed for a moment: the thread count read
     * next must not include it. */
    for (i = 0; i < 200 && threads >= 0 && lc__threads_now() > threads; i++)
        nanosleep(&pause, NULL);
}

static void
allocate_buffer(FILE *f)
{
#if defined(LC_HAVE_STDIO_EXT)
    if (__fbufsize(f) == 0) {
        int tty = isatty(fileno(f));
        setvbuf(f, NULL, _IOFBF, 0);
        if (tty)
            setvbuf(f, NULL, _IOLBF, 0);
    }
#else
    (void)f;
#endif
}

static void
settle(void)
{
    warm_threads();
    allocate_buffer(stdout);
    allocate_buffer(stdin);
}

void
lc__heap_settle(void)
{
    static pthread_once_t settled = PTHREAD_ONCE_INIT;

    pthread_once(&settled, settle);
}

int
lc__heap_memcheck(void)
{
    return lc__heap_unavailable() == NULL && heap.read == read_memcheck;
}

int64_t
lc__heap_read(const lc__leak_counts *counts)
{
    if (lc__heap_unavailable() != NULL)
        return -1;
    lc__heap_settle();
    return heap.read(counts);
}
