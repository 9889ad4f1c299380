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
 * grow in it has one run fewer to raise.  Also LEAK_REPEAT's helper.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define LC__DEFAULT_WINDOW 2
#define LC__THOROUGH_WINDOW 3
#define LC__MAX_WINDOW 8
#define LC__EXTENSION_PER_REPEAT 8      /* default extension: repeat * 8   */
#define LC__THOROUGH_EXTENSION 512

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
    int64_t *deltas;                    /* [max_runs][LC_PROBE_COUNT]      */
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

/* Records the delta of the run that just ended, raises or ages each probe
 * and narrows `alive`. */
static void
measure(lc_series *s)
{
    int64_t *row = s->deltas + (size_t)s->runs * LC_PROBE_COUNT;
    int p;

    s->compared &= s->cur.mask;
    s->alive &= s->compared;
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if (!(s->compared & bit))
            continue;
        row[p] = s->cur.values[p] - s->prev.values[p];
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
    s->prev = s->cur;
}

/* Whether the last warm-up run, read from `pre` to `prev`, grew nothing:
 * the same probes read, each delta in [0, threshold). */
static int
warmup_grew_nothing(const lc_series *s)
{
    int p;

    if (!s->has_pre || s->pre.mask != s->prev.mask || s->prev.mask == 0)
        return 0;
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        int64_t d;
        if (!(s->prev.mask & LC_PROBE_BIT(p)))
            continue;
        d = s->prev.values[p] - s->pre.values[p];
        if (d < 0 || d >= s->threshold[p])
            return 0;
    }
    return 1;
}

/* The warm-up run counts in the first window: a probe that did not reach
 * its threshold in it has one run fewer to raise. */
static void
age_by_warmup(lc_series *s)
{
    int p;

    if (!s->has_pre)
        return;
    for (p = 0; p < LC_PROBE_COUNT; p++)
        if ((s->pre.mask & s->prev.mask & LC_PROBE_BIT(p)) &&
            s->prev.values[p] - s->pre.values[p] < s->threshold[p])
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

int
lc_series_next(lc_series *s)
{
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
        lc__fdset_reading(&s->fds_before);
        rc = lc_snapshot_take(&s->prev, s->wanted, s->flags);
        lc__fdset_reading(NULL);
        if (rc != LC_OK)
            return rc;
        s->compared = s->alive = s->prev.mask;
        if (!s->thorough && warmup_grew_nothing(s)) {
            s->cur = s->prev;
            s->prev = s->pre;
            measure(s);
            s->alive = 0;
            s->warmup_measured = 1;
            s->done = 1;
            return 0;
        }
        age_by_warmup(s);
        s->calls++;
        return 1;
    }
    /* The threads probe waits for threads only in a series' last
     * snapshot, and any snapshot from the repeat-th on may be that. */
    /* Every measured snapshot's listing of /proc/self/fd leaves its set
     * here: the last one is the series' end, for the report. */
    lc__fdset_reading(&s->fds_after);
    rc = lc__snapshot_settled(&s->cur, s->compared,
                              s->flags | (s->runs + 1 >= s->repeat
                                              ? LC__SNAPSHOT_LAST : 0),
                              &s->prev);
    lc__fdset_reading(NULL);
    if (rc != LC_OK)
        return rc;
    measure(s);
    if (s->main_runs == 0) {
        if (main_goes_on(s)) {
            s->calls++;
            return 1;
        }
    } else if ((s->alive & s->extending) &&
               s->runs < s->main_runs + s->extension) {
        s->calls++;
        return 1;
    }
    s->done = 1;
    return 0;
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
    return s ? s->runs : 0;
}

int
lc_series_warmup_measured(const lc_series *s)
{
    return s ? s->warmup_measured : 0;
}

int
lc_series_delta(const lc_series *s, int run, int probe, int64_t *delta)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || delta == NULL || run < 0 || run >= s->runs)
        return LC_EINVAL;
    if (!(s->compared & LC_PROBE_BIT(probe)))
        return LC_EUNAVAIL;
    *delta = s->deltas[(size_t)run * LC_PROBE_COUNT + (size_t)probe];
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

size_t
lc_series_report(const lc_series *s, char *buf, size_t size)
{
    lc__buf b = {buf, size, 0};
    int p, first = 1, main_runs;

    if (size > 0)
        buf[0] = '\0';
    if (s == NULL)
        return 0;
    main_runs = lc_series_main_runs(s);
    lc__buf_printf(&b, "leakcheck: series '%s' %s", s->name,
                   !s->done ? "has not finished"
                            : s->alive ? "leaked" : "is clean");
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
        if (!(s->done && (s->alive & bit)))
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
        if (s->runs > main_runs && (s->extending & bit) && !(s->alive & bit))
            lc__buf_printf(&b, "  %-12s grew %+lld %s in %d runs, then "
                               "stopped within %d more: growth that dies "
                               "out, no leak\n", lc__probes[p].name,
                           (long long)s->level_at_main[p], lc__probes[p].unit,
                           main_runs, s->runs - main_runs);
    }
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if ((s->compared & bit) && !(s->done && (s->alive & bit))) {
            lc__buf_printf(&b, "%s %s", first ? "  no leak:" : ",",
                           lc__probes[p].name);
            first = 0;
        }
    }
    if (!first)
        lc__buf_printf(&b, "\n");
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
            /* Growth up to the tolerance is clean: a run leaks from one
             * unit above it.  A tolerance of INT64_MAX tolerates any
             * growth: its threshold, INT64_MAX, is no delta's. */
            rc = set->value < 0
                     ? (set->probe < 0 || set->probe >= LC_PROBE_COUNT
                            ? LC_ENOPROBE : LC_EINVAL)
                     : lc_series_set_threshold(
                           s, set->probe,
                           set->value == INT64_MAX ? INT64_MAX
                                                   : set->value + 1);
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
