/*
 * internal.h — what the engine's source files share and nobody else sees.
 * Names here are lc__* (visibly internal, as libuv's uv__*) and are kept
 * out of the shared library's export list by -export-symbols-regex.
 */
#ifndef LC_INTERNAL_H
#define LC_INTERNAL_H

#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "leakcheck.h"

#define LC__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Static description of one probe; availability is asked of `avail`. */
typedef struct lc__probe_desc {
    const char *name;
    const char *unit;
    const char *doc;
    int64_t tolerance;          /* default scope noise floor                */
    int64_t threshold;          /* default series threshold                 */
    int python;                 /* 1: needs an initialized CPython          */
} lc__probe_desc;

extern const lc__probe_desc lc__probes[LC_PROBE_COUNT];

/* A snapshot: the readings, nothing else (no Python objects).             */
struct lc_snapshot {
    unsigned mask;                   /* which values[] were read            */
    int64_t values[LC_PROBE_COUNT];  /* indexed by lc_probe                 */
};

/* ---- native probes (probes.c) ---- */

/* NULL when `probe` (a native one) can be read here, else why not. */
const char *lc__native_unavailable(int probe);
/* Reads the native probes of `mask` into snap; `flags` as given to
 * lc_snapshot_take, with LC__SNAPSHOT_LAST. */
void lc__native_read(lc_snapshot *snap, unsigned mask, unsigned flags);
/* A snapshot flag of the engine's own: the last snapshot of a scope or
 * series, where memcheck's leak search prints its loss records. */
#define LC__SNAPSHOT_LAST 0x100u
/* The most measured runs a series may ask for: its deltas are allocated
 * up front (repeat * window + extension rows), never between snapshots. */
#define LC__MAX_REPEAT 10000
#define LC__STR_(x) #x
#define LC__STR(x) LC__STR_(x)

/* What one memcheck leak search found, in bytes (VALGRIND_COUNT_LEAKS). */
typedef struct lc__leak_counts {
    int64_t leaked, dubious, reachable, suppressed;
} lc__leak_counts;

/* 1 when the process runs under valgrind's memcheck; else why not. */
int lc__memcheck(void);
const char *lc__memcheck_unavailable(void);
/* Runs one memcheck leak search into *c: quiet but for memcheck's summary,
 * or, with `report`, printing the loss records added since the last one.
 * LC_EUNAVAIL when not under memcheck. */
int lc__memcheck_search(int report, lc__leak_counts *c);

/* The native heap (heap.c): NULL when it can be read, else why not; what
 * it reads (names the allocator whose numbers are used); whether it reads
 * memcheck's search (then lc__heap_read takes its counts, or searches
 * when given NULL); the reading in bytes, or -1.  The first reading
 * settles the process first (lc__heap_settle, once). */
const char *lc__heap_unavailable(void);
const char *lc__heap_doc(void);
int lc__heap_memcheck(void);
int64_t lc__heap_read(const lc__leak_counts *counts);
void lc__heap_settle(void);
/* dlsym(RTLD_DEFAULT, name) that leaves dlerror's state as it found it
 * (heap.c): NULL when nothing of that name is loaded. */
void *lc__lookup(const char *name);
/* Reads only the thread count; -1 when it cannot. */
int64_t lc__threads_now(void);
/* fstat() of /proc/self/fd or /proc/self/task through a descriptor kept
 * open (fds.c), both opened at the first call; 0, or -1 when it cannot. */
#define LC__PROC_FDS 0
#define LC__PROC_TASKS 1
struct stat;
int lc__proc_stat(int which, struct stat *st);

/* ---- Python probes (python.c, pyhook.c) ---- */

/* NULL when Python probes can be read now, else why not (static string). */
const char *lc__python_unavailable(int probe);
/* Settles and collects (unless LC_SNAPSHOT_NO_COLLECT), reads the Python
 * probes of `mask`, then reads the native ones through lc__native_read()
 * while the interpreter is quiet.  Returns 0 or a negative status. */
int lc__python_snapshot(lc_snapshot *snap, unsigned mask, unsigned flags);
/* A function the engine calls, GIL held, right after the collection of
 * every snapshot taken while CPython is initialized (after it, whether or
 * not the snapshot collects): settling's second half, for what only dies
 * once the collection freed what else held it (the Python package trims
 * CPython's type cache there).  It must not run Python code.  NULL
 * removes it. */
void lc__set_after_collect(lc_settle_fn fn, void *arg);
/* A count of the immortal interned strings that replaces the engine's
 * (sys.getunicodeinternedsize(_only_immortal=True), which walks every
 * interned string on CPython 3.13 and later): called, GIL held, where a
 * snapshot reads that count; only its differences matter.  -1 when it
 * cannot be read now.  NULL removes it. */
typedef int64_t (*lc__count_fn)(void);
void lc__set_interned_counter(lc__count_fn fn);

/* The allocator hook, called with the GIL held.  Installs it the first
 * time; later, puts it back in the domains it was taken out of (by
 * tracemalloc.stop() when tracemalloc was there first): 1 then, the
 * counters having missed what happened meanwhile.  0 when it is in place;
 * LC_EUNAVAIL when it cannot be (put back too often), LC_ENOMEM. */
int lc__pyhook_install(void *get_allocator, void *set_allocator);
/* How many times a domain's hook was put back since the process began. */
int lc__pyhook_restored(void);
/* Takes the hook off the mem and object domains where it is on top (the
 * raw domain keeps it: threads call that one without the GIL, and its
 * allocator cannot be swapped under them); how many domains.  With the
 * GIL held.  A later snapshot puts it back (lc__pyhook_install: 1). */
int lc__pyhook_release(void *get_allocator, void *set_allocator);
/* `pymalloc`: allocations minus frees in pymalloc's domains since the
 * hooks in place went in; returns 1 when they count those, else 0. */
int lc__pyhook_read(int64_t *bytes, int64_t *allocs, int64_t *pymalloc);
/* For the tests: pymalloc's live blocks as a snapshot reads them from the
 * hook's count and as sys.getallocatedblocks() walks them, at one instant.
 * LC_EUNAVAIL when snapshots walk (no hook counting them, or no snapshot
 * has learnt the offset yet). */
int lc__python_blocks_check(int64_t *counted, int64_t *walked);
/* pymalloc's live blocks, as sys.getallocatedblocks() counts them, now,
 * without settling or collecting: from the hook's count where a snapshot
 * reads it so (O(1)), else walked when `walk` (a walk grows with the
 * heap), else LC__BLOCKS_UNCOUNTED; -1 when they cannot be read. */
#define LC__BLOCKS_UNCOUNTED (-2)
int64_t lc__python_allocated_blocks(int walk);
/* lc__pyhook_release() with the interpreter's allocator functions, when
 * CPython runs with a GIL and the hook was installed; 0 otherwise. */
int lc__python_release_hook(void);
/* Whether the hook is installed and on top in every domain (checked
 * without installing or putting anything back). */
int lc__pyhook_on_top(void *get_allocator);

/* Reads again the snapshot a series' next measured run is compared with
 * (what was made since the last snapshot is not that run's growth):
 * LC_ESTATE unless a measured run is due. */
int lc__series_rebase(lc_series *series);

/* ---- shared by scope.c and series.c ---- */

/* Probes of `wanted` readable now (Python ones only when CPython is up). */
unsigned lc__probes_readable(unsigned wanted);
/* Takes a snapshot and, when `baseline` is given and its thread count is
 * lower, waits up to the settle time for extra threads to end. */
int lc__snapshot_settled(lc_snapshot *snap, unsigned mask, unsigned flags,
                         const lc_snapshot *baseline);

/* Memory for the engine's own objects (own.c): zero-filled pages that no
 * heap the native_bytes probe reads counts; NULL when none is left. */
void *lc__own_alloc(size_t size);
void lc__own_free(void *obj);

/* A set of open descriptors (fds.c), taken without malloc: the numbers
 * below LC__FDSET_MAX, and a count of those above. */
#define LC__FDSET_MAX 4096
typedef struct lc__fdset {
    uint64_t bits[LC__FDSET_MAX / 64];
    int above;                  /* open descriptors >= LC__FDSET_MAX       */
    int taken;                  /* 1 when /proc/self/fd was listed         */
} lc__fdset;
void lc__fdset_take(lc__fdset *set);
/* The fds probe's reading (fds.c): the open descriptors, -1 when
 * /proc/self/fd cannot be listed.  After lc__fdset_reading(set), each
 * reading in this thread also leaves its set in *set (one listing serves
 * both), until lc__fdset_reading(NULL). */
int64_t lc__fds_read(void);
void lc__fdset_reading(lc__fdset *set);

/* Appends printf-style text to a report buffer, snprintf-like. */
typedef struct lc__buf {
    char *p;        /* destination, may be NULL when size is 0             */
    size_t size;    /* bytes available at p                                */
    size_t len;     /* bytes the whole text needs, without the NUL         */
} lc__buf;
/* Says which setting was refused and why: "LC_THRESHOLD(fds, 0) refused:
 * <why>". */
void lc__setting_refused(lc__buf *b, const lc_setting *set,
                         const char *why);
void lc__buf_printf(lc__buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Lines naming each descriptor open in `after` and not in `before`, with
 * what /proc/self/fd/N points to now ("    fd 5 -> pipe:[1234]"). */
void lc__fds_report(lc__buf *b, const lc__fdset *before,
                    const lc__fdset *after);

/* ---- allocating sites (sites.c) ---- */

/* Finds the recorder (AddressSanitizer's hooks, or the preloaded tracer),
 * once; called before a macro's first snapshot, since a failed dlsym
 * allocates.  Then `owner` (a scope or series of the macros) records the
 * blocks allocated from lc__sites_start on; pause (before a snapshot: only
 * frees are seen) and resume; stop before reading them; release when the
 * owner is freed.  Each is a no-op where nothing records or another owner
 * records. */
void lc__sites_prepare(void);
void lc__sites_start(const void *owner);
void lc__sites_pause(const void *owner);
void lc__sites_resume(const void *owner);
void lc__sites_stop(const void *owner);
void lc__sites_release(const void *owner);
/* Appends to a failure report, when `leaking` holds native_bytes or
 * valgrind, the allocating lines of the blocks owner's recording left (or
 * one line saying how to get them, or why there are none); when it holds
 * only fds and nothing records, the line saying how to get the lines that
 * opened them. */
void lc__sites_report(const void *owner, unsigned leaking, lc__buf *b);
/* For the report of the scope or series whose recording has just ended:
 * names into buf the call that opened descriptor fd while it recorded
 * ("file.c:LINE function()", as lc__sites_report names a block) and
 * returns 1, or returns 0 when nothing recorded it (no tracer, opened
 * outside the recording, or closed since).  lc__sites_fds_named() ends a
 * report that named some. */
int lc__sites_fd_opener(long fd, char *buf, size_t size);
void lc__sites_fds_named(void);

#endif /* LC_INTERNAL_H */
