/*
 * series.c — the series verdict.  After `warmup` unmeasured runs, each
 * measured run gives one delta per probe between consecutive snapshots.
 * A probe's *level* is the sum of its deltas; a run *raises* the probe
 * when the level reaches the highest level since its lowest by at least
 * the probe's threshold (a first delta at or above the threshold raises;
 * growth that is freed and kept again, back and forth, raises once).  A
 * probe stays alive while it raises at least once in every `window`
 * consecutive runs, and is suspected of leaking once it has raised in
 * `repeat` runs: a leak every run takes `repeat` runs, one that skips a
 * run or two (a cache growing on every second or third call) takes up to
 * `repeat * window`.  Growth that happens once (a cache that fills) does
 * not stay alive.  The series stops as soon as every probe is dead (clean)
 * or every live probe is suspected.
 *
 * A suspect whose growth dies out (its second half of runs grew less than
 * half its first: a cache that fills in shrinking steps) runs on, up to
 * `extension` more runs, while it stays alive: if it then stops raising
 * for `window` runs it was no leak.  In thorough mode every suspect runs
 * on so, for up to LC__THOROUGH_EXTENSION runs (a cache bounded at a few
 * hundred entries fills and stops), the window is 3 and a warm-up run that
 * grew nothing does not end the series.
 *
 * The last warm-up run is read too.  When it grew nothing (every probe's
 * delta at least 0 and below its threshold), there was nothing to warm up,
 * and that run is the measured run: the verdict is clean at once, and a
 * clean body costs its warm-up runs alone (a leak that skips that run is
 * left to thorough mode).  Any growth, or a probe that read less than
 * before (something freed: it could hide a leak), and the series goes on
 * as above, the run unmeasured but for the window: a probe that did not
 * grow in it has one run fewer to raise.  A probe that counts bytes may
 * read less by a chunk's slack (drop_slack_of) and still have grown
 * nothing.
 *
 * A leak that rests on probes that count bytes alone (py_bytes,
 * native_bytes) is confirmed over 8 more runs that read those probes only
 * (confirm_runs_of, confirmed()).  lc_series_feed() judges deltas given
 * instead of readings, by the same steps.  Also LEAK_REPEAT's helper.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define LC__DEFAULT_WINDOW 2
#define LC__THOROUGH_WINDOW 3
#define LC__MAX_WINDOW 8
#define LC__EXTENSION_PER_REPEAT 8      /* default extension: repeat * 8   */
#define LC__THOROUGH_EXTENSION 512
#define LC__CONFIRM_RUNS 8              /* the most of confirm_runs_of     */

/*
 * A verdict that rests on these probes alone is confirmed over this many
 * more runs.  They count bytes, and see every resize of a block above
 * pymalloc's 512-byte limit (py_bytes) or every malloc() in the process
 * (native_bytes): a dict or list that grows with amortized doubling, or
 * glibc's heap in a long session, can creep for a few runs with nothing
 * kept.  In pyyaml 6.0.2's own suite under --leaks, 37 of 1,283 clean
 * tests grew native_bytes by 16 to 336 bytes in each of 4 runs with no
 * Python probe moving, every one stopping within 6 runs (a bare loop of
 * the same code grows nothing); and its constructor tests, which define
 * new classes each run, grew py_bytes and native_bytes together by +16 to
 * +19,016 bytes in each of 4 runs, a few tests per session, while a bare
 * loop of 2,500 calls of the same code shows no sustained growth.  Over
 * the confirming runs the probe must grow in each half of them, by at
 * least its threshold per run on average, rather than in every run (see
 * confirmed()).  The probes that count blocks, objects and references are
 * exact and need no confirmation (0).
 */
static const int confirm_runs_of[LC_PROBE_COUNT] = {
    [LC_PROBE_PY_BYTES] = LC__CONFIRM_RUNS,
    [LC_PROBE_NATIVE_BYTES] = LC__CONFIRM_RUNS,
};

/*
 * How much less than before a probe may read in the last warm-up run and
 * still have grown nothing (warmup_grew_nothing()).  The probes that count
 * bytes read glibc's chunks (usable sizes, in-use chunks), and glibc
 * serves a request with a chunk 16 bytes larger than it needs whenever
 * splitting it would leave less than its smallest chunk (32 bytes): the
 * same blocks freed and made again can read 16 bytes less each.  pytest's
 * log capture replaces its StringIO in every phase of every test, and the
 * StringIO's buffer (a 1-byte malloc) lands now in a 32-byte chunk, now in
 * a 48-byte one: clean tests read -16 or -32 bytes in both probes in their
 * reported run, and ran twice more (unittest methods more often than
 * functions).  Two such blocks' worth is tolerated.  It hides nothing
 * that no change at all would not: a leak read through it must come with
 * a free in the same run, of as many bytes give or take the slack, and a
 * free of exactly as many hides it already; a drop alone is no growth.
 * The probes that count blocks, objects and references are exact (0).
 */
static const int64_t drop_slack_of[LC_PROBE_COUNT] = {
    [LC_PROBE_PY_BYTES] = 32,
    [LC_PROBE_NATIVE_BYTES] = 32,
};

struct lc_series {
    char *name;                         /* owned; never NULL               */
    const char *file;                   /* LEAK_REPEAT's line, for reports */
    int line;
    int warmup, repeat;
    int window;                         /* runs a live probe may go without
                                         * a raise, plus one              */
    int thorough;
    int extension;                      /* most runs a suspect runs on     */
    int max_runs;                       /* rows of `deltas`                */
    unsigned wanted;                    /* probes asked for                */
    unsigned flags;                     /* for every snapshot              */
    int64_t threshold[LC_PROBE_COUNT];
    int calls;                          /* lc_series_next calls returning 1 */
    int runs;                           /* measured runs with a delta      */
    int main_runs;                      /* runs before the extension       */
    int done;                           /* the verdict is in               */
    unsigned compared;                  /* read in every snapshot so far   */
    unsigned alive;                     /* raised within every window      */
    unsigned extending;                 /* suspects running on             */
    int64_t level[LC_PROBE_COUNT];      /* sum of the deltas               */
    int64_t low[LC_PROBE_COUNT];        /* lowest level so far             */
    int64_t peak[LC_PROBE_COUNT];       /* highest level since `low`       */
    int64_t level_at_main[LC_PROBE_COUNT];  /* when the main runs ended    */
    int stale[LC_PROBE_COUNT];          /* runs since the last raise       */
    int raises[LC_PROBE_COUNT];         /* runs that raised the probe      */
    lc_snapshot prev, cur;
    lc_snapshot pre;                    /* before the last warm-up run     */
    int has_pre;
    int warmup_measured;                /* the last warm-up run was read
                                         * as the measured run            */
    unsigned warm_read;                 /* probes read at both ends of the
                                         * last warm-up run               */
    int64_t warm[LC_PROBE_COUNT];       /* their deltas in that run        */
    int64_t *deltas;                    /* [max_runs][LC_PROBE_COUNT]      */
    int confirm;                        /* confirm byte-probe verdicts     */
    unsigned main_leaking;              /* leaking when the runs before
                                         * confirmation ended              */
    unsigned confirming;                /* probes whose verdict the last
                                         * runs confirm                    */
    int confirm_due;                    /* confirming runs needed          */
    int confirm_runs;                   /* confirming runs done            */
    int64_t confirm_delta[LC__CONFIRM_RUNS][LC_PROBE_COUNT];
    lc__fdset fds_before, fds_after;    /* open descriptors before the
                                         * measured runs and at the end    */
};

/* Sizes `deltas` for the longest series the settings allow.  Only before
 * the first step: the engine allocates nothing between two snapshots.
 * The series, its name and its deltas live in mappings of the engine's own
 * (own.c), outside the heap native_bytes reads. */
static int
size_rows(lc_series *s)
{
    int rows = s->repeat * s->window + s->extension;
    int64_t *d;

    if (rows == s->max_runs)
        return LC_OK;
    d = lc__own_alloc((size_t)rows * sizeof(int64_t) * LC_PROBE_COUNT);
    if (d == NULL)
        return LC_ENOMEM;
    lc__own_free(s->deltas);
    s->deltas = d;
    s->max_runs = rows;
    return LC_OK;
}

lc_series *
lc_series_new(const char *name, int warmup, int repeat)
{
    lc_series *s;
    size_t len;
    int p;

    /* Caps that keep repeat * window + extension an int. */
    if (warmup < 0 || repeat < 1 || repeat > LC__MAX_REPEAT)
        return NULL;
    if (name == NULL)
        name = "series";
    len = strlen(name) + 1;
    s = lc__own_alloc(sizeof *s + len);
    if (s == NULL)
        return NULL;
    s->name = memcpy((char *)(s + 1), name, len);
    s->warmup = warmup;
    s->repeat = repeat;
    s->window = LC__DEFAULT_WINDOW;
    s->extension = repeat * LC__EXTENSION_PER_REPEAT;
    if (s->name == NULL || size_rows(s) != LC_OK) {
        lc_series_free(s);
        return NULL;
    }
    s->wanted = LC_PROBES_ALL;
    s->confirm = 1;
    for (p = 0; p < LC_PROBE_COUNT; p++)
        s->threshold[p] = lc__probes[p].threshold;
    return s;
}

void
lc_series_free(lc_series *s)
{
    if (s) {
        lc__sites_release(s);
        lc__own_free(s->deltas);
        lc__own_free(s);
    }
}

int
lc_series_set_probes(lc_series *s, unsigned probes)
{
    if (s == NULL || probes == 0 || (probes & ~LC_PROBES_ALL))
        return LC_EINVAL;
    if (s->calls > 0)
        return LC_ESTATE;
    s->wanted = probes;
    return LC_OK;
}

int
lc_series_set_threshold(lc_series *s, int probe, int64_t threshold)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || threshold < 1)
        return LC_EINVAL;
    if (s->calls > 0)
        return LC_ESTATE;
    s->threshold[probe] = threshold;
    return LC_OK;
}

int
lc_series_set_tolerance(lc_series *s, int probe, int64_t tolerance)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || tolerance < 0)
        return LC_EINVAL;
    /* Growth up to the tolerance is clean: a run leaks from one unit
     * above it.  A tolerance of INT64_MAX tolerates any growth: its
     * threshold, INT64_MAX, is no delta's. */
    return lc_series_set_threshold(s, probe, tolerance == INT64_MAX
                                                 ? INT64_MAX
                                                 : tolerance + 1);
}

int
lc_series_set_confirm(lc_series *s, int on)
{
    if (s == NULL)
        return LC_EINVAL;
    if (s->calls > 0)
        return LC_ESTATE;
    s->confirm = on != 0;
    return LC_OK;
}

int
lc_series_set_window(lc_series *s, int window)
{
    int old, rc;

    if (s == NULL || window < 1 || window > LC__MAX_WINDOW)
        return LC_EINVAL;
    if (s->calls > 0)
        return LC_ESTATE;
    old = s->window;
    s->window = window;
    rc = size_rows(s);
    if (rc != LC_OK)
        s->window = old;
    return rc;
}

int
lc_series_set_thorough(lc_series *s, int on)
{
    int window, extension, rc;

    if (s == NULL)
        return LC_EINVAL;
    if (s->calls > 0)
        return LC_ESTATE;
    window = s->window;
    extension = s->extension;
    s->thorough = on != 0;
    s->window = on ? LC__THOROUGH_WINDOW : LC__DEFAULT_WINDOW;
    s->extension = on ? LC__THOROUGH_EXTENSION
                      : s->repeat * LC__EXTENSION_PER_REPEAT;
    rc = size_rows(s);
    if (rc != LC_OK) {
        s->thorough = !s->thorough;
        s->window = window;
        s->extension = extension;
    }
    return rc;
}

void
lc_series_set_location(lc_series *s, const char *file, int line)
{
    if (s) {
        s->file = file;
        s->line = line;
    }
}

void
lc_series_set_snapshot_flags(lc_series *s, unsigned flags)
{
    if (s)
        s->flags = flags;
}

/* Records one measured run's deltas (row[p] for the probes of `read`),
 * raises or ages each probe and narrows `alive`. */
static void
measure(lc_series *s, unsigned read, const int64_t *row)
{
    int64_t *dst = s->deltas + (size_t)s->runs * LC_PROBE_COUNT;
    int p;

    s->compared &= read;
    s->alive &= s->compared;
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if (!(s->compared & bit))
            continue;
        dst[p] = row[p];
        s->level[p] += row[p];
        if (s->level[p] < s->low[p])        /* a fresh climb starts here */
            s->low[p] = s->peak[p] = s->level[p];
        if (s->level[p] - s->peak[p] >= s->threshold[p]) {
            s->peak[p] = s->level[p];
            s->raises[p]++;
            s->stale[p] = 0;
        } else if (++s->stale[p] >= s->window) {
            s->alive &= ~bit;
        }
    }
    s->runs++;
}

/* Whether the last warm-up run grew nothing: each compared probe's delta
 * (`warm`) in [-slack, threshold) (drop_slack_of). */
static int
warmup_grew_nothing(const lc_series *s, const int64_t *warm)
{
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++) {
        if (!(s->compared & LC_PROBE_BIT(p)))
            continue;
        if (warm[p] < -drop_slack_of[p] || warm[p] >= s->threshold[p])
            return 0;
    }
    return 1;
}

/* The warm-up run counts in the first window: a probe of `read` that did
 * not reach its threshold in it has one run fewer to raise. */
static void
age_by_warmup(lc_series *s, unsigned read, const int64_t *warm)
{
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++)
        if ((read & s->compared & LC_PROBE_BIT(p)) &&
            warm[p] < s->threshold[p])
            s->stale[p] = 1;
}

/* Whether probe p's growth dies out: its later runs grew less than half
 * of what its earlier runs grew. */
static int
dying_out(const lc_series *s, int p)
{
    int64_t first = 0, second = 0;
    int run, half = s->runs / 2;

    for (run = 0; run < s->runs; run++) {
        int64_t d = s->deltas[(size_t)run * LC_PROBE_COUNT + (size_t)p];
        if (run < half)
            first += d;
        else if (run >= s->runs - half)
            second += d;
    }
    return second < first / 2;
}

/* Ends the main runs when every live probe is a suspect, and chooses the
 * suspects that run on.  1 when the series goes on. */
static int
main_goes_on(lc_series *s)
{
    int p;

    if (s->alive == 0)
        return 0;
    if (s->runs < s->repeat * s->window)
        for (p = 0; p < LC_PROBE_COUNT; p++)
            if ((s->alive & LC_PROBE_BIT(p)) && s->raises[p] < s->repeat)
                return 1;
    s->main_runs = s->runs;
    memcpy(s->level_at_main, s->level, sizeof s->level);
    for (p = 0; p < LC_PROBE_COUNT; p++)
        if ((s->alive & LC_PROBE_BIT(p)) && (s->thorough || dying_out(s, p)))
            s->extending |= LC_PROBE_BIT(p);
    return s->extending != 0 && s->extension > 0;
}

/* The runs before confirmation have ended with `alive` leaking.  When
 * that verdict rests on probes of confirm_runs_of alone, the confirming
 * runs are due (1); otherwise the verdict is in (0). */
static int
main_ends(lc_series *s)
{
    int p, due = 0;

    s->main_leaking = s->alive;
    for (p = 0; s->confirm && p < LC_PROBE_COUNT; p++) {
        if (!(s->alive & LC_PROBE_BIT(p)))
            continue;
        if (confirm_runs_of[p] == 0) {
            due = 0;
            break;
        }
        if (confirm_runs_of[p] > due)
            due = confirm_runs_of[p];
    }
    if (due > 0) {
        s->confirming = s->alive;
        s->confirm_due = due;
        return 1;
    }
    s->done = 1;
    return 0;
}

/* Whether probe p's confirming runs confirm its leak: it grew in each
 * half of them by at least its threshold per run on average.  Not in
 * every run: a leaked buffer that grows by reallocation is resized with
 * room to spare, so some runs read +0 while it keeps growing.  The sums
 * are wide enough for any int64 deltas and thresholds. */
static int
confirmed(const lc_series *s, int p)
{
    __extension__ typedef __int128 wide;
    int run, n = s->confirm_runs, half = n / 2;
    wide first = 0, second = 0;

    for (run = 0; run < n; run++) {
        if (run < half)
            first += s->confirm_delta[run][p];
        else
            second += s->confirm_delta[run][p];
    }
    return first >= (wide)half * s->threshold[p] &&
           second >= (wide)(n - half) * s->threshold[p];
}

/* Records a confirming run's deltas (a probe not read counts +0); once
 * the last is in, the leaking probes are those it confirms. */
static int
confirm_run(lc_series *s, unsigned read, const int64_t *row)
{
    int64_t *dst = s->confirm_delta[s->confirm_runs];
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++)
        if (s->confirming & LC_PROBE_BIT(p))
            dst[p] = (read & LC_PROBE_BIT(p)) ? row[p] : 0;
    if (++s->confirm_runs < s->confirm_due)
        return 1;
    s->alive = 0;
    for (p = 0; p < LC_PROBE_COUNT; p++)
        if ((s->confirming & LC_PROBE_BIT(p)) && confirmed(s, p))
            s->alive |= LC_PROBE_BIT(p);
    s->done = 1;
    return 0;
}

/* The series' first reading: the probes of `read` are compared from now
 * on.  `warm` holds the last warm-up run's deltas for the probes of
 * `warm_read` (NULL: that run was not read), `whole` when those were read
 * at both its ends and are all of `read`.  1 when the series goes on, 0
 * when the verdict is in. */
static int
begin(lc_series *s, unsigned read, unsigned warm_read, int whole,
      const int64_t *warm)
{
    int p;

    s->compared = s->alive = read;
    if (warm == NULL)
        return 1;
    s->warm_read = warm_read;
    for (p = 0; p < LC_PROBE_COUNT; p++)
        if (warm_read & LC_PROBE_BIT(p))
            s->warm[p] = warm[p];
    if (!s->thorough && whole && read != 0 && warm_read == read &&
        warmup_grew_nothing(s, warm)) {
        measure(s, read, warm);
        s->alive = 0;
        s->warmup_measured = 1;
        return main_ends(s);
    }
    age_by_warmup(s, warm_read, warm);
    return 1;
}

/* Judges a measured run from its deltas: 1 when another run is due, 0
 * when the verdict is in. */
static int
judge(lc_series *s, unsigned read, const int64_t *row)
{
    if (s->confirming)
        return confirm_run(s, read, row);
    measure(s, read, row);
    if (s->main_runs == 0) {
        if (main_goes_on(s))
            return 1;
    } else if ((s->alive & s->extending) &&
               s->runs < s->main_runs + s->extension) {
        return 1;
    }
    return main_ends(s);
}

/* The deltas from `from` to `to` for the probes both hold, into row;
 * returns those probes. */
static unsigned
difference(const lc_snapshot *from, const lc_snapshot *to, int64_t *row)
{
    unsigned both = from->mask & to->mask;
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++)
        if (both & LC_PROBE_BIT(p))
            row[p] = to->values[p] - from->values[p];
    return both;
}

int
lc_series_next(lc_series *s)
{
    int64_t row[LC_PROBE_COUNT];
    unsigned read, flags;
    int rc;

    if (s == NULL)
        return LC_EINVAL;
    if (s->done)
        return 0;
    if (s->calls < s->warmup) {
        /* A reading that fails here only means the warm-up run is not
         * judged. */
        if (s->calls == s->warmup - 1)
            s->has_pre = lc_snapshot_take(&s->pre, s->wanted, s->flags) ==
                         LC_OK;
        s->calls++;
        return 1;
    }
    if (s->calls == s->warmup) {
        rc = lc_snapshot_take(&s->prev, s->wanted, s->flags);
        if (rc != LC_OK)
            return rc;
        read = s->has_pre ? difference(&s->pre, &s->prev, row) : 0;
        rc = begin(s, s->prev.mask, read,
                   s->has_pre && s->pre.mask == s->prev.mask,
                   s->has_pre ? row : NULL);
        /* Runs to measure follow: the descriptors open now are those the
         * report compares the series' end with.  Listed here rather than
         * in the snapshot, which counted them (a listing costs three
         * times a count): a series whose warm-up run was its measured
         * run needs none, and nothing ran since. */
        if (rc == 1 && (s->prev.mask & LC_PROBE_BIT(LC_PROBE_FDS)))
            lc__fdset_take(&s->fds_before);
        s->calls += rc;
        return rc;
    }
    /* The threads probe waits for threads only in a series' last
     * snapshot, and any snapshot from the repeat-th on may be that; the
     * confirming runs read the probes they confirm, and the last of
     * them ends the series. */
    flags = s->flags;
    if (s->confirming ? s->confirm_runs + 1 == s->confirm_due
                      : s->runs + 1 >= s->repeat)
        flags |= LC__SNAPSHOT_LAST;
    /* Every measured snapshot's listing of /proc/self/fd leaves its set
     * here: the last one is the series' end, for the report. */
    lc__fdset_reading(&s->fds_after);
    rc = lc__snapshot_settled(&s->cur,
                              s->confirming ? s->confirming : s->compared,
                              flags, &s->prev);
    lc__fdset_reading(NULL);
    if (rc != LC_OK)
        return rc;
    read = difference(&s->prev, &s->cur, row);
    s->prev = s->cur;
    rc = judge(s, read, row);
    s->calls += rc;
    return rc;
}

/* Between two measured runs (lc_series_next() returned 1 past the
 * warm-up): takes again the snapshot the next run is measured from, so
 * that what the driver made since the last one is not that run's growth.
 * The probes are those the next snapshot reads; the descriptors listed
 * replace those of the series' start when no run was measured yet. */
int
lc__series_rebase(lc_series *s)
{
    int rc;

    if (s == NULL)
        return LC_EINVAL;
    if (s->done || s->calls <= s->warmup)
        return LC_ESTATE;
    lc__fdset_reading(s->runs == 0 ? &s->fds_before : NULL);
    rc = lc_snapshot_take(&s->prev,
                          s->confirming ? s->confirming : s->compared,
                          s->flags);
    lc__fdset_reading(NULL);
    return rc;
}

/* The largest delta lc_series_feed() takes, either way: the sum of the
 * longest series' deltas (under 2^18 runs) stays well within int64. */
#define LC__FEED_MAX ((int64_t)1 << 40)

int
lc_series_feed(lc_series *s, unsigned probes, const int64_t *deltas)
{
    int rc, p;

    if (s == NULL || (probes & ~LC_PROBES_ALL) ||
        (deltas == NULL && !(s->warmup > 0 && s->calls <= s->warmup)))
        return LC_EINVAL;
    for (p = 0; deltas != NULL && p < LC_PROBE_COUNT; p++)
        if ((probes & LC_PROBE_BIT(p)) &&
            (deltas[p] > LC__FEED_MAX || deltas[p] < -LC__FEED_MAX))
            return LC_EINVAL;
    if (s->done)
        return 0;
    if (s->calls < s->warmup)
        s->calls = s->warmup;
    if (s->calls == s->warmup) {
        /* The first call: the last warm-up run, or with no warm-up the
         * first measured run, judged below. */
        rc = begin(s, probes, probes, 1, s->warmup > 0 ? deltas : NULL);
        s->calls += rc;
        if (rc == 0 || s->warmup > 0)
            return rc;
    }
    rc = judge(s, probes, deltas);
    s->calls += rc;
    return rc;
}

int
lc_series_leaked(const lc_series *s)
{
    if (s == NULL)
        return LC_EINVAL;
    if (!s->done)
        return LC_ESTATE;
    return s->alive != 0;
}

unsigned
lc_series_probes(const lc_series *s)
{
    return s ? s->compared : 0;
}

unsigned
lc_series_leaking(const lc_series *s)
{
    return s && s->done ? s->alive : 0;
}

int
lc_series_warmup(const lc_series *s)
{
    return s ? s->warmup : 0;
}

int
lc_series_repeat(const lc_series *s)
{
    return s ? s->repeat : 0;
}

int
lc_series_runs(const lc_series *s)
{
    return s ? s->runs + s->confirm_runs : 0;
}

unsigned
lc_series_confirming(const lc_series *s)
{
    return s ? s->confirming : 0;
}

int
lc_series_confirm_runs(const lc_series *s)
{
    return s ? s->confirm_runs : 0;
}

int
lc_series_warmup_measured(const lc_series *s)
{
    return s ? s->warmup_measured : 0;
}

int
lc_series_warmup_delta(const lc_series *s, int probe, int64_t *delta)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || delta == NULL)
        return LC_EINVAL;
    if (!(s->warm_read & LC_PROBE_BIT(probe)))
        return LC_EUNAVAIL;
    *delta = s->warm[probe];
    return LC_OK;
}

int
lc_series_delta(const lc_series *s, int run, int probe, int64_t *delta)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || delta == NULL || run < 0 ||
        run >= s->runs + s->confirm_runs)
        return LC_EINVAL;
    if (!(s->compared & LC_PROBE_BIT(probe)))
        return LC_EUNAVAIL;
    if (run < s->runs) {
        *delta = s->deltas[(size_t)run * LC_PROBE_COUNT + (size_t)probe];
    } else {
        /* Only the probes confirmed were read in the confirming runs. */
        if (!(s->confirming & LC_PROBE_BIT(probe)))
            return LC_EUNAVAIL;
        *delta = s->confirm_delta[run - s->runs][probe];
    }
    return LC_OK;
}

int64_t
lc_series_threshold(const lc_series *s, int probe)
{
    if (s == NULL || probe < 0 || probe >= LC_PROBE_COUNT)
        return 0;
    return s->threshold[probe];
}

int
lc_series_window(const lc_series *s)
{
    return s ? s->window : 0;
}

int
lc_series_thorough(const lc_series *s)
{
    return s ? s->thorough : 0;
}

int
lc_series_main_runs(const lc_series *s)
{
    if (s == NULL)
        return 0;
    return s->main_runs ? s->main_runs : s->runs;
}

int
lc_series_raises(const lc_series *s, int probe)
{
    if (s == NULL || probe < 0 || probe >= LC_PROBE_COUNT)
        return 0;
    return s->raises[probe];
}

/* " +1 +0 +1" for runs [from, to) of probe p. */
static void
print_deltas(lc__buf *b, const lc_series *s, int p, int from, int to)
{
    int run;

    for (run = from; run < to; run++)
        lc__buf_printf(b, " %+lld",
                       (long long)s->deltas[(size_t)run * LC_PROBE_COUNT +
                                            (size_t)p]);
}

/* What the confirming runs read, after the report of the runs before
 * them: the verdict, and each confirmed probe's deltas. */
static void
report_confirmation(lc__buf *b, const lc_series *s)
{
    int p;

    if (s->alive)
        lc__buf_printf(b, "  confirmed over %d more runs\n", s->confirm_runs);
    else
        lc__buf_printf(b, "  not confirmed over %d more runs (growth in each "
                          "half of them needed): clean\n", s->confirm_runs);
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        int run;
        if (!(s->confirming & LC_PROBE_BIT(p)))
            continue;
        lc__buf_printf(b, "    %s", lc__probes[p].name);
        for (run = 0; run < s->confirm_runs; run++)
            lc__buf_printf(b, " %+lld", (long long)s->confirm_delta[run][p]);
        lc__buf_printf(b, "\n");
    }
}

size_t
lc_series_report(const lc_series *s, char *buf, size_t size)
{
    lc__buf b = {buf, size, 0};
    int p, first = 1, main_runs;
    unsigned leaking;

    if (size > 0)
        buf[0] = '\0';
    if (s == NULL)
        return 0;
    main_runs = lc_series_main_runs(s);
    /* What the runs before confirmation found; the confirming runs'
     * verdict follows them. */
    leaking = s->done ? s->main_leaking : 0;
    lc__buf_printf(&b, "leakcheck: series '%s' %s", s->name,
                   !s->done ? "has not finished"
                            : leaking ? "leaked" : "is clean");
    if (s->file)
        lc__buf_printf(&b, " (at %s:%d)", s->file, s->line);
    if (s->warmup_measured)
        lc__buf_printf(&b, ": its last warm-up run grew nothing, so it was "
                           "the measured run (%d warm-up run%s)\n",
                       s->warmup, s->warmup == 1 ? "" : "s");
    else
        lc__buf_printf(&b, ": %d measured run%s after %d warm-up run%s%s\n",
                       s->runs, s->runs == 1 ? "" : "s", s->warmup,
                       s->warmup == 1 ? "" : "s",
                       s->thorough ? " (thorough)" : "");
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if (!(leaking & bit))
            continue;
        if (s->raises[p] == s->runs)
            lc__buf_printf(&b, "  %-12s grew in every run:",
                           lc__probes[p].name);
        else
            lc__buf_printf(&b, "  %-12s grew to a new high in %d of %d "
                               "runs:", lc__probes[p].name,
                           s->raises[p], s->runs);
        print_deltas(&b, s, p, 0, main_runs);
        lc__buf_printf(&b, " %s (threshold %lld per run)\n",
                       lc__probes[p].unit, (long long)s->threshold[p]);
        if (p == LC_PROBE_FDS)
            lc__fds_report(&b, &s->fds_before, &s->fds_after);
        if (s->runs > main_runs)
            lc__buf_printf(&b, "  %-12s still growing over %d more runs "
                               "(%+lld %s)\n", "",
                           s->runs - main_runs,
                           (long long)(s->level[p] - s->level_at_main[p]),
                           lc__probes[p].unit);
    }
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if (s->runs > main_runs && (s->extending & bit) && !(leaking & bit))
            lc__buf_printf(&b, "  %-12s grew %+lld %s in %d runs, then "
                               "stopped within %d more: growth that dies "
                               "out, no leak\n", lc__probes[p].name,
                           (long long)s->level_at_main[p], lc__probes[p].unit,
                           main_runs, s->runs - main_runs);
    }
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if ((s->compared & bit) && !(leaking & bit)) {
            lc__buf_printf(&b, "%s %s", first ? "  no leak:" : ",",
                           lc__probes[p].name);
            first = 0;
        }
    }
    if (!first)
        lc__buf_printf(&b, "\n");
    if (s->done && s->confirming)
        report_confirmation(&b, s);
    return b.len;
}

int
lc_series_apply(lc_series *s, const lc_setting *set, char *msg, size_t size)
{
    lc__buf b = {msg, size, 0};
    const char *why;
    int rc;

    if (size > 0)
        msg[0] = '\0';
    if (s == NULL)
        return LC_EINVAL;
    for (; set != NULL && set->what != LC_SET_END; set++) {
        switch (set->what) {
        case LC_SET_TOLERANCE:
            rc = lc_series_set_tolerance(s, set->probe, set->value);
            why = rc == LC_ENOPROBE ? "no such probe"
                  : rc == LC_ESTATE ? "the series has started"
                                    : "a tolerance is at least 0";
            break;
        case LC_SET_THRESHOLD:
            rc = lc_series_set_threshold(s, set->probe, set->value);
            why = rc == LC_ENOPROBE ? "no such probe"
                  : rc == LC_ESTATE ? "the series has started"
                                    : "a threshold is at least 1";
            break;
        case LC_SET_PROBES:
            rc = set->value < 0 || set->value > (int64_t)LC_PROBES_ALL
                     ? LC_EINVAL
                     : lc_series_set_probes(s, (unsigned)set->value);
            why = rc == LC_ESTATE ? "the series has started"
                                  : "the mask holds no probe, or bits that "
                                    "are no probe";
            break;
        default:
            rc = LC_EINVAL;
            why = "no such setting";
        }
        if (rc != LC_OK) {
            lc__setting_refused(&b, set, why);
            return rc;
        }
    }
    return LC_OK;
}

/* ---- LEAK_REPEAT's helper ---- */

int
lc_repeat_step(lc_repeat *r, const char *name, int warmup, int repeat,
               const char *file, int line)
{
    return lc_repeat_step_with(r, name, warmup, repeat, NULL, file, line);
}

int
lc_repeat_step_with(lc_repeat *r, const char *name, int warmup, int repeat,
                    const lc_setting *settings, const char *file, int line)
{
    lc__buf b = {r->msg, sizeof r->msg, 0};
    char refused[160];
    int rc;

    if (r->done)
        return 0;
    if (r->series == NULL) {
        r->series = lc_series_new(name, warmup, repeat);
        if (r->series == NULL) {
            if (warmup < 0)
                lc__buf_printf(&b, "leakcheck: LEAK_REPEAT '%s' at %s:%d: "
                                   "warmup is %d; it must be at least 0\n",
                               name, file, line, warmup);
            else if (repeat < 1 || repeat > LC__MAX_REPEAT)
                lc__buf_printf(&b, "leakcheck: LEAK_REPEAT '%s' at %s:%d: "
                                   "repeat is %d; it must be from 1 to the "
                                   "maximum, " LC__STR(LC__MAX_REPEAT)
                                   "\n", name, file, line, repeat);
            else
                lc__buf_printf(&b, "leakcheck: LEAK_REPEAT '%s' at %s:%d: "
                                   "%s (warmup %d, repeat %d)\n", name,
                               file, line, lc_strerror(LC_ENOMEM), warmup,
                               repeat);
            r->done = r->failed = 1;
            return 0;
        }
        lc_series_set_location(r->series, file, line);
        if (lc_series_apply(r->series, settings, refused,
                            sizeof refused) != LC_OK) {
            lc__buf_printf(&b, "leakcheck: LEAK_REPEAT_WITH '%s' at %s:%d: "
                               "%s\n", name, file, line, refused);
            lc_series_free(r->series);
            r->series = NULL;
            r->done = r->failed = 1;
            return 0;
        }
    }
    if (r->series->calls == 0)
        lc__sites_prepare();
    lc__sites_pause(r->series);
    rc = lc_series_next(r->series);
    if (rc > 0) {
        /* Blocks are recorded from the first measured run on. */
        if (r->series->calls == r->series->warmup + 1)
            lc__sites_start(r->series);
        else
            lc__sites_resume(r->series);
        return 1;
    }
    lc__sites_stop(r->series);
    if (rc < 0) {
        lc__buf_printf(&b, "leakcheck: LEAK_REPEAT '%s' at %s:%d could not "
                           "be measured: %s\n", name, file, line,
                       lc_strerror(rc));
        r->failed = 1;
    } else if (lc_series_leaked(r->series) == 1) {
        b.len = lc_series_report(r->series, r->msg, sizeof r->msg);
        lc__sites_report(r->series, lc_series_leaking(r->series), &b);
        r->failed = 1;
    }
    lc_series_free(r->series);
    r->series = NULL;
    r->done = 1;
    return 0;
}
