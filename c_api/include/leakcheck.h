/*
 * leakcheck.h — the one public header of leakcheck, a library that makes
 * leaks a test failure.
 *
 * The engine reads numbers about the running process through *probes*
 * (Python reference counts and allocator usage when CPython is initialized
 * in this process; native heap bytes, file descriptors, threads and
 * valgrind's leak counts always), keeps them in *snapshots*, and decides
 * whether something grew:
 *
 *   - a *scope* compares two snapshots once: growth above a probe's
 *     tolerance is a leak;
 *   - a *series* runs the same code repeatedly: after `warmup` unmeasured
 *     runs, each measured run yields one delta per probe, and a probe
 *     leaks when it grows to a new high in `repeat` runs, never more than
 *     `window` - 1 runs apart (a leak that skips a run or two is caught;
 *     growth freed and kept again, back and forth, is not a leak).  A
 *     probe whose growth dies out runs on until it stops.  The series
 *     stops early as soon as no probe can still leak.  The last warm-up
 *     run is read as well: when it grew nothing at all, it is the measured
 *     run, and a clean body costs its warm-up runs alone.  A leak that
 *     rests on the probes that count bytes alone (py_bytes, native_bytes)
 *     is confirmed over 8 more runs.
 *
 * Conventions (as in jansson and libuv): every exported symbol starts with
 * `lc_`, every macro with `LC_` or `LEAK_`.  Functions return 0 or a
 * negative LC_E* status that lc_strerror() describes.  The library never
 * prints and never exits on its own: only the failure handler, which the
 * test macros call, does that.
 *
 * libleakcheck does not link libpython.  It finds CPython at run time in the
 * process that loaded it, so a pure C test links without Python and the
 * Python probes report themselves unavailable there.
 */
#ifndef LEAKCHECK_H
#define LEAKCHECK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ------------------------------------------------------------ */

#define LC_VERSION_MAJOR 0
#define LC_VERSION_MINOR 1
#define LC_VERSION_PATCH 0
#define LC_VERSION "0.1.0"
/* 0xMMmmpp: compare with `#if LC_VERSION_HEX >= 0x000100`. */
#define LC_VERSION_HEX \
    ((LC_VERSION_MAJOR << 16) | (LC_VERSION_MINOR << 8) | LC_VERSION_PATCH)

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". */
const char *lc_version(void);

/* ---- Status ------------------------------------------------------------- */

#define LC_OK        0
#define LC_ENOMEM   (-1) /* out of memory */
#define LC_EINVAL   (-2) /* an argument is out of range or NULL */
#define LC_ENOPROBE (-3) /* no probe has that name or number */
#define LC_EUNAVAIL (-4) /* the probe cannot be read here, or was not read */
#define LC_ESTATE   (-5) /* called out of order (end before begin, ...) */
#define LC_EPYTHON  (-6) /* a call into CPython failed */
#define LC_ESYS     (-7) /* a system call failed */

/* A static English sentence for a status; never NULL. */
const char *lc_strerror(int status);

/* ---- Probes ------------------------------------------------------------- */

typedef enum lc_probe {
    LC_PROBE_REFS = 0,     /* total reference count (debug CPython only)    */
    LC_PROBE_BLOCKS,       /* pymalloc live blocks                          */
    LC_PROBE_PY_BYTES,     /* live bytes allocated through the PyMem domains */
    LC_PROBE_PY_ALLOCS,    /* live allocations through the PyMem domains    */
    LC_PROBE_OBJECTS,      /* objects tracked by the cyclic GC              */
    LC_PROBE_GARBAGE,      /* len(gc.garbage) after a full collection       */
    LC_PROBE_NATIVE_BYTES, /* C heap in use, from malloc's own numbers      */
    LC_PROBE_FDS,          /* open file descriptors                         */
    LC_PROBE_THREADS,      /* live threads of this process                  */
    LC_PROBE_VALGRIND,     /* bytes memcheck finds leaked                   */
    LC_PROBE_COUNT
} lc_probe;

/* The fds and threads probes read /proc/self/fd and /proc/self/task
 * through two descriptors the library opens (close-on-exec) at the first
 * reading of either, and keeps: they take the lowest free numbers then,
 * every fds reading counts both, and no report names them.  Code may
 * close them: the next reading opens them again.  A forked child opens
 * its own.  On Linux 6.2 and later fds reads the kernel's count, which
 * also counts a number a thread blocked in accept() has taken. */

#define LC_PROBE_BIT(p) (1u << (unsigned)(p))
#define LC_PROBES_ALL ((1u << LC_PROBE_COUNT) - 1u)
#define LC_PROBES_PYTHON                                                    \
    (LC_PROBE_BIT(LC_PROBE_REFS) | LC_PROBE_BIT(LC_PROBE_BLOCKS) |          \
     LC_PROBE_BIT(LC_PROBE_PY_BYTES) | LC_PROBE_BIT(LC_PROBE_PY_ALLOCS) |   \
     LC_PROBE_BIT(LC_PROBE_OBJECTS) | LC_PROBE_BIT(LC_PROBE_GARBAGE))
#define LC_PROBES_NATIVE (LC_PROBES_ALL & ~LC_PROBES_PYTHON)

/* What a probe is, and whether it can be read in this process right now. */
typedef struct lc_probe_info {
    const char *name;    /* "native_bytes", as lc_probe_lookup() takes it    */
    const char *unit;    /* "bytes", "refs", "blocks", "objects", ...        */
    const char *doc;     /* one line: what it reads (for native_bytes,
                            whose allocator's numbers)                       */
    int available;       /* 1 when it can be read here and now               */
    const char *reason;  /* when not available, why; NULL otherwise          */
    int64_t tolerance;   /* default noise floor of a scope: growth up to
                            this is not a leak                               */
    int64_t threshold;   /* default series threshold: a run leaks when its
                            delta is at least this                           */
} lc_probe_info;

/* Fills *info for `probe`.  LC_ENOPROBE when `probe` is out of range. */
int lc_probe_get_info(int probe, lc_probe_info *info);

/* The probe called `name`, or LC_ENOPROBE. */
int lc_probe_lookup(const char *name);

/* The set of probes (LC_PROBE_BIT mask) that can be read now. */
unsigned lc_probes_available(void);

/* ---- Settling ----------------------------------------------------------- */

/*
 * A function the engine calls, with the GIL held, before the full
 * collection that starts every snapshot taken while CPython is initialized.
 * The Python package installs one that clears interpreter caches.  NULL
 * removes it.  Not thread-safe: set it before snapshots are taken.
 */
typedef void (*lc_settle_fn)(void *arg);
void lc_set_settle(lc_settle_fn fn, void *arg);

/* How long (milliseconds) a verdict waits for extra threads to exit before
 * it counts them; default 200.  Negative values are refused. */
int lc_set_thread_settle_ms(int ms);

/* ---- Snapshots ---------------------------------------------------------- */

typedef struct lc_snapshot lc_snapshot;

#define LC_SNAPSHOT_NO_COLLECT 0x1u /* the caller has already collected     */

lc_snapshot *lc_snapshot_new(void);
void lc_snapshot_free(lc_snapshot *snap);

/*
 * Reads the probes in `probes` that are available now into `snap`, after
 * settling and a full collection when CPython is initialized.  Probes that
 * are not available are left out (lc_snapshot_probes() tells which were
 * read).  Taking a snapshot allocates nothing that outlives the call.
 */
int lc_snapshot_take(lc_snapshot *snap, unsigned probes, unsigned flags);

/* The mask of probes `snap` holds a reading for. */
unsigned lc_snapshot_probes(const lc_snapshot *snap);

/* The reading of `probe`; LC_EUNAVAIL when the snapshot has none. */
int lc_snapshot_value(const lc_snapshot *snap, int probe, int64_t *value);

/* ---- Scope verdict (one delta) ------------------------------------------ */

typedef struct lc_scope lc_scope;

/* A scope over all available probes with their default tolerances.  `name`
 * (may be NULL) is copied and names the scope in reports.  Scopes and
 * series are not allocated with malloc: a scope or series that is still
 * open while another scope ends (crossed scopes: BEGIN a, BEGIN b, END a)
 * is not counted in that scope's native_bytes. */
lc_scope *lc_scope_new(const char *name);
void lc_scope_free(lc_scope *scope);

int lc_scope_set_probes(lc_scope *scope, unsigned probes);
int lc_scope_set_tolerance(lc_scope *scope, int probe, int64_t tolerance);
/* Growth of `probe` that the measurement itself makes between the two
 * snapshots (a binding's own references, say), positive or negative: it is
 * subtracted from the delta before the delta is judged, returned by
 * lc_scope_delta() and reported.  0 unless set; may be set until
 * lc_scope_end(). */
int lc_scope_set_baseline(lc_scope *scope, int probe, int64_t baseline);
/* Where the scope ends in the source, for its report (file is not copied). */
void lc_scope_set_location(lc_scope *scope, const char *file, int line);

int lc_scope_begin(lc_scope *scope);
/* Takes the second snapshot and decides.  0 or a negative status; the
 * verdict is lc_scope_leaked(). */
int lc_scope_end(lc_scope *scope);

/* 1 when something leaked, 0 when clean, LC_ESTATE before lc_scope_end(). */
int lc_scope_leaked(const lc_scope *scope);
/* The probes compared (read at both ends) and those that leaked. */
unsigned lc_scope_probes(const lc_scope *scope);
unsigned lc_scope_leaking(const lc_scope *scope);
int lc_scope_delta(const lc_scope *scope, int probe, int64_t *delta);
int64_t lc_scope_tolerance(const lc_scope *scope, int probe);

/*
 * Writes the readable report into buf (always NUL-terminated when size > 0)
 * and returns the length it needed, as snprintf does.  When fds leaked,
 * each descriptor open at the end and not at the begin is named under the
 * fds line, with what /proc/self/fd says it is when the report is
 * written ("    fd 7 -> pipe:[81234]", a path, socket:[...]): up to 8 of
 * them, among descriptors 0 to 4095 (the sets are fixed bitmaps, taken
 * without malloc); more are counted.  A series names those opened since
 * its first measured run began.
 */
size_t lc_scope_report(const lc_scope *scope, char *buf, size_t size);

/* ---- Series verdict (repeated runs) ------------------------------------- */

typedef struct lc_series lc_series;

/* warmup >= 0 unmeasured runs, then measured runs until every probe is
 * dead or suspected (`repeat` raises, 1 <= repeat <= 10000, the maximum:
 * a series' deltas are allocated up front for the longest series its
 * settings allow, never between snapshots): `repeat`
 * runs for a leak in every run, up to repeat * window when it skips runs,
 * plus up to repeat * 8 more for a suspect whose growth dies out.
 * NULL on bad arguments or no memory.  When warmup >= 1, a snapshot is also
 * taken before the last warm-up run; if that run grew nothing (each probe
 * read at least as much as before and less than its threshold more; a
 * probe that counts bytes may read up to 32 bytes less, what glibc's chunk
 * rounding moves by when the same blocks are made again), the verdict is
 * clean after it, with that run as the one measured run. */
lc_series *lc_series_new(const char *name, int warmup, int repeat);
void lc_series_free(lc_series *series);

int lc_series_set_probes(lc_series *series, unsigned probes);
int lc_series_set_threshold(lc_series *series, int probe, int64_t threshold);
/* Growth up to `tolerance` (>= 0) is clean: sets the threshold to
 * tolerance + 1 (INT64_MAX for INT64_MAX: no run leaks).  Before the
 * first step. */
int lc_series_set_tolerance(lc_series *series, int probe, int64_t tolerance);
void lc_series_set_location(lc_series *series, const char *file, int line);
/* Flags passed to every snapshot of the series (LC_SNAPSHOT_NO_COLLECT). */
void lc_series_set_snapshot_flags(lc_series *series, unsigned flags);
/* A live probe raises at least once in every `window` runs (1 to 8;
 * default 2; 1 is "every run").  Before the first step. */
int lc_series_set_window(lc_series *series, int window);
/* Thorough mode (on != 0), for nightly hunts: window 3, a warm-up run that
 * grew nothing does not end the series (a leak that skips it is caught at
 * the cost of two more runs), and every suspect runs on up to 512 more
 * runs while it grows (a cache bounded at a few hundred entries fills and
 * is no leak).  Sets the window.  Before the first step. */
int lc_series_set_thorough(lc_series *series, int on);

/* Confirmation (on != 0, the default): a leak that rests on py_bytes or
 * native_bytes alone (the probes that count bytes, which a buffer resized
 * with room to spare, or glibc's heap, can move for a few runs with
 * nothing kept) is confirmed over 8 more runs that read those probes
 * only: a probe leaks when it grew, in each half of them, by at least its
 * threshold per run on average.  Off: the verdict of the runs before
 * stands.  Before the first step. */
int lc_series_set_confirm(lc_series *series, int on);

/*
 * Drives the series:  while ((rc = lc_series_next(s)) > 0) run_once();
 * Returns 1 when the code must run once more, 0 when the verdict is in, or
 * a negative status.  Snapshots are taken inside this call, between runs.
 */
int lc_series_next(lc_series *series);

/*
 * Drives the series from deltas instead of snapshots: the judging of
 * lc_series_next() on readings taken elsewhere (a table of cases, a
 * replay).  `deltas[p]` is the growth of probe p in one run, for each
 * probe of the mask `probes`.  When warmup >= 1 the first call gives the
 * last warm-up run's deltas (NULL: that run was not read, `probes` still
 * names the probes compared); every other call a measured run's (a
 * confirming run's need hold only the probes it confirms; a delta beyond
 * +-2^40 is refused, LC_EINVAL).  Returns as lc_series_next().  Drive a
 * series with one of the two only.
 */
int lc_series_feed(lc_series *series, unsigned probes, const int64_t *deltas);

int lc_series_leaked(const lc_series *series);   /* 1, 0, or LC_ESTATE   */
unsigned lc_series_probes(const lc_series *series);
unsigned lc_series_leaking(const lc_series *series);
int lc_series_warmup(const lc_series *series);
int lc_series_repeat(const lc_series *series);
/* Measured runs done, the confirming runs included. */
int lc_series_runs(const lc_series *series);
/* The probes whose leak the last runs confirm (0 when none is
 * confirmed), and how many of those runs are done. */
unsigned lc_series_confirming(const lc_series *series);
int lc_series_confirm_runs(const lc_series *series);
/* 1 when the last warm-up run grew nothing and was the measured run. */
int lc_series_warmup_measured(const lc_series *series);
/* The delta of `probe` in the last warm-up run, read at both of its ends
 * (what made more runs due when it was not the measured run);
 * LC_EUNAVAIL when that run was not read (no warm-up run, a reading that
 * failed, a probe not read at both ends). */
int lc_series_warmup_delta(const lc_series *series, int probe,
                           int64_t *delta);
/* The delta of `probe` in measured run `run` (0-based); in a confirming
 * run (from lc_series_runs() - lc_series_confirm_runs() on), only of the
 * probes confirmed: LC_EUNAVAIL for the others. */
int lc_series_delta(const lc_series *series, int run, int probe,
                    int64_t *delta);
int64_t lc_series_threshold(const lc_series *series, int probe);
int lc_series_window(const lc_series *series);
int lc_series_thorough(const lc_series *series);
/* Measured runs before suspects ran on (all of them when none did). */
int lc_series_main_runs(const lc_series *series);
/* Runs in which `probe` grew to a new high by its threshold or more. */
int lc_series_raises(const lc_series *series, int probe);
size_t lc_series_report(const lc_series *series, char *buf, size_t size);

/* ---- Failure handler (used by the test macros) -------------------------- */

/*
 * Called by the macros, when Check is not in use, after a leak or an error:
 * `report` is the readable report and `file`/`line` where the check ended.
 * The default, inside a test run by Check (the program links libcheck,
 * shared or static, and Check has started a test in this process), fails
 * that test as ck_abort_msg would, with the report as its message; this
 * is what happens when leakcheck.h is included before check.h.  Elsewhere
 * it writes the report to stderr and exits with status 1.  A handler may
 * return: the macro then goes on after the check.  Not thread-safe: set
 * it before scopes run.
 */
typedef void (*lc_failure_fn)(const char *file, int line, const char *report,
                              void *arg);
/* NULL restores the default. */
void lc_set_failure_handler(lc_failure_fn fn, void *arg);
void lc_fail(const char *file, int line, const char *report);

/* ---- Test macros ------------------------------------------------------------
 *
 *   LEAK_SCOPE_BEGIN(s);        declares scope `s`, takes the first snapshot
 *       ...code under test...
 *   LEAK_SCOPE_END(s);          second snapshot; on growth the test fails
 *
 *   LEAK_REPEAT(s, warmup, repeat) { ...body... }     series verdict
 *
 * With settings, the same macros followed by a list of LC_TOLERANCE,
 * LC_THRESHOLD and LC_PROBES (see Settings below):
 *
 *   LEAK_SCOPE_BEGIN_WITH(s, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, 64));
 *   LEAK_REPEAT_WITH(s, warmup, repeat, LC_THRESHOLD(LC_PROBE_FDS, 2)) {...}
 *
 * When <check.h> is included before this header, a leak fails the current
 * Check test (ck_abort_msg) at the line of LEAK_SCOPE_END / LEAK_REPEAT
 * with the report as its message; the scope is released first, so this is
 * right with CK_FORK=yes and CK_FORK=no alike.  Otherwise lc_fail() runs,
 * whose default handler fails the current Check test the same way when
 * the program runs one: either include order works.  Define
 * LEAKCHECK_NO_CHECK to use lc_fail() with Check too.
 * Do not leave a LEAK_REPEAT body with break, goto or return.
 *
 * Misuse is told before anything is measured: LEAK_SCOPE_END on a scope
 * already ended (it sets the variable to NULL) or never begun (NULL) fails
 * with "the scope was never begun, or has already ended"; a LEAK_REPEAT
 * warmup below 0 or repeat outside 1 to 10000 fails with a message naming
 * the argument and the limit, and its body never runs.  "out of memory"
 * means that the scope or series could not be allocated.
 *
 * The first scopes of a process may open in several threads at once: the
 * engine's set-up (choosing the heap reader, settling) runs once.  A verdict
 * still counts what every thread does between its snapshots.
 *
 * When native_bytes leaked, the report lists where the blocks still
 * allocated were allocated, most bytes first, a few at most (how many more
 * is said): "test_parse.c:42 parse_name(): 32 bytes in 1 block", the first
 * frame in the caller's code (past strdup and the like).  The blocks are
 * recorded while the macros' scope is open (a series: its measured runs)
 * by AddressSanitizer in a sanitized build, or by the tracer of a plain
 * glibc build, loaded with LD_PRELOAD=libleakcheck-trace.so (installed
 * beside the library; `pkg-config --variable=tracer leakcheck`).  Without
 * either, the report says in one line how to preload it; under valgrind,
 * memcheck's loss records name the lines.  Lines need -g.
 */

#define LC_REPORT_MAX 4096 /* bytes of report a macro keeps                 */

/* ---- Settings ---------------------------------------------------------------
 *
 * The defaults catch any growth: a scope tolerates none (lc_probe_info's
 * `tolerance`, 0 for every probe), and a run of a series leaks from one
 * unit on (`threshold`, 1).  Where code under test keeps something on
 * purpose, say so in a list of settings:
 *
 *   LC_TOLERANCE(probe, n)  growth up to n is not a leak (0 <= n <=
 *                           INT64_MAX).  In a series a run then leaks from
 *                           n + 1 on (INT64_MAX: never); Python's
 *                           tolerance= sets it through the same call.
 *   LC_THRESHOLD(probe, n)  a series' threshold (1 <= n <= INT64_MAX): a
 *                           run leaks when its delta is at least n.  Series
 *                           only.
 *   LC_PROBES(mask)         read only these probes (an LC_PROBE_BIT mask).
 *
 * `probe` is an lc_probe (LC_PROBE_NATIVE_BYTES, ...).  For example:
 *
 *   LEAK_SCOPE_BEGIN_WITH(s, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES, 4096));
 *   LEAK_REPEAT_WITH(r, 2, 5, LC_PROBES(LC_PROBE_BIT(LC_PROBE_FDS)),
 *                    LC_THRESHOLD(LC_PROBE_FDS, 2)) { ... }
 *
 * A setting out of range (a negative tolerance, a threshold of 0, no such
 * probe, LC_THRESHOLD in a scope) fails the test at LEAK_SCOPE_END or
 * LEAK_REPEAT_WITH with a message naming it, and nothing is measured.  The
 * same lists work without the macros: lc_scope_apply(), lc_series_apply().
 */

typedef struct lc_setting {
    int what;                 /* LC_SET_*; LC_SET_END ends a list      */
    int probe;                /* the lc_probe set, for LC_SET_TOLERANCE
                                 and LC_SET_THRESHOLD                  */
    int64_t value;            /* the tolerance, threshold or mask      */
} lc_setting;

#define LC_SET_END       0
#define LC_SET_TOLERANCE 1
#define LC_SET_THRESHOLD 2
#define LC_SET_PROBES    3

#define LC_TOLERANCE(probe, n) {LC_SET_TOLERANCE, (probe), (n)}
#define LC_THRESHOLD(probe, n) {LC_SET_THRESHOLD, (probe), (n)}
#define LC_PROBES(mask) {LC_SET_PROBES, -1, (int64_t)(mask)}

/*
 * Apply `settings`, a list ended by an entry of what == LC_SET_END (NULL:
 * none), to a scope before it begins or a series before its first step.
 * 0, or a negative status; then no further setting is applied and, when
 * size > 0, `msg` says in one line which setting was refused and why.
 */
int lc_scope_apply(lc_scope *scope, const lc_setting *settings, char *msg,
                   size_t size);
int lc_series_apply(lc_series *series, const lc_setting *settings,
                    char *msg, size_t size);

/* Helpers of the macros.  They release the scope or series before they
 * return, and return 1 when the test must fail with `msg`.  The _with
 * forms take a list of settings (NULL: none). */
lc_scope *lc_scope_open(const char *name, const char *file, int line);
lc_scope *lc_scope_open_with(const char *name, const lc_setting *settings,
                             const char *file, int line);
int lc_scope_close(lc_scope *scope, const char *file, int line, char *msg,
                   size_t size);

typedef struct lc_repeat {
    lc_series *series;        /* the series while it runs, else NULL   */
    int done;                 /* 1 once the verdict is in              */
    int failed;               /* 1 when msg holds a report to fail with */
    char msg[LC_REPORT_MAX];  /* the report                            */
} lc_repeat;
int lc_repeat_step(lc_repeat *r, const char *name, int warmup, int repeat,
                   const char *file, int line);
int lc_repeat_step_with(lc_repeat *r, const char *name, int warmup,
                        int repeat, const lc_setting *settings,
                        const char *file, int line);

#if defined(CHECK_H) && !defined(LEAKCHECK_NO_CHECK)
#define LC_FAIL_(file, line, msg) ck_abort_msg("%s", (msg))
#else
#define LC_FAIL_(file, line, msg) lc_fail((file), (line), (msg))
#endif

#define LEAK_SCOPE_BEGIN(s) \
    lc_scope *s = lc_scope_open(#s, __FILE__, __LINE__)

#define LEAK_SCOPE_END(s)                                                   \
    do {                                                                    \
        char lc_msg_[LC_REPORT_MAX];                                        \
        lc_scope *lc_s_ = (s);                                              \
        (s) = NULL;                                                         \
        if (lc_scope_close(lc_s_, __FILE__, __LINE__, lc_msg_,              \
                           sizeof lc_msg_))                                 \
            LC_FAIL_(__FILE__, __LINE__, lc_msg_);                          \
    } while (0)

#define LEAK_REPEAT(s, warmup, repeat)                                      \
    for (lc_repeat s = {0, 0, 0, {0}};                                         \
         lc_repeat_step(&s, #s, (warmup), (repeat), __FILE__, __LINE__)     \
         || (s.failed && (LC_FAIL_(__FILE__, __LINE__, s.msg), 0));)

/* The settings' list, ended for the helpers. */
#define LC_SETTINGS_(...)                                                   \
    ((const lc_setting[]){__VA_ARGS__, {LC_SET_END, 0, 0}})

#define LEAK_SCOPE_BEGIN_WITH(s, ...)                                       \
    lc_scope *s = lc_scope_open_with(#s, LC_SETTINGS_(__VA_ARGS__),         \
                                     __FILE__, __LINE__)

#define LEAK_REPEAT_WITH(s, warmup, repeat, ...)                            \
    for (lc_repeat s = {0, 0, 0, {0}};                                      \
         lc_repeat_step_with(&s, #s, (warmup), (repeat),                    \
                             LC_SETTINGS_(__VA_ARGS__), __FILE__, __LINE__) \
         || (s.failed && (LC_FAIL_(__FILE__, __LINE__, s.msg), 0));)

#ifdef __cplusplus
}
#endif

#endif /* LEAKCHECK_H */
