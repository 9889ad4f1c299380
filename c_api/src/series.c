/*
 * series.c — the series verdict, as CPython's refleak runner decides it:
 * `warmup` unmeasured runs, then up to `repeat` measured runs with one
 * delta per probe between consecutive snapshots.  A probe leaks when every
 * delta is at least its threshold; growth that happens once (a cache that
 * fills) does not.  The series stops as soon as every probe has had a delta
 * below its threshold, since none can leak any more: a clean body costs its
 * warm-up runs and one measured run.
 *
 * The last warm-up run is read too.  When it grew nothing (every probe's
 * delta at least 0 and below its threshold), there was nothing to warm up,
 * and that run is the measured run: the verdict is clean at once, and a
 * clean body costs its warm-up runs alone.  Any growth, or a probe that
 * read less than before (something freed: it could hide a leak), and the
 * series goes on as above, the run unmeasured.  Also LEAK_REPEAT's helper.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct lc_series {
    char *name;                         /* owned; never NULL               */
    const char *file;                   /* LEAK_REPEAT's line, for reports */
    int line;
    int warmup, repeat;
    unsigned wanted;                    /* probes asked for                */
    unsigned flags;                     /* for every snapshot              */
    int64_t threshold[LC_PROBE_COUNT];
    int calls;                          /* lc_series_next calls returning 1 */
    int runs;                           /* measured runs with a delta      */
    int done;                           /* the verdict is in               */
    unsigned compared;                  /* read in every snapshot so far   */
    unsigned alive;                     /* every delta so far >= threshold */
    lc_snapshot prev, cur;
    lc_snapshot pre;                    /* before the last warm-up run     */
    int has_pre;
    int warmup_measured;                /* the last warm-up run was read
                                         * as the measured run            */
    int64_t *deltas;                    /* [repeat][LC_PROBE_COUNT]        */
};

lc_series *
lc_series_new(const char *name, int warmup, int repeat)
{
    lc_series *s;
    int p;

    if (warmup < 0 || repeat < 1)
        return NULL;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->name = strdup(name ? name : "series");
    s->deltas = calloc((size_t)repeat, sizeof(int64_t) * LC_PROBE_COUNT);
    if (s->name == NULL || s->deltas == NULL) {
        lc_series_free(s);
        return NULL;
    }
    s->warmup = warmup;
    s->repeat = repeat;
    s->wanted = LC_PROBES_ALL;
    for (p = 0; p < LC_PROBE_COUNT; p++)
        s->threshold[p] = lc__probes[p].threshold;
    return s;
}

void
lc_series_free(lc_series *s)
{
    if (s) {
        free(s->name);
        free(s->deltas);
        free(s);
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

/* Records the delta of the run that just ended and narrows `alive`. */
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
        if (row[p] < s->threshold[p])
            s->alive &= ~bit;
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
        rc = lc_snapshot_take(&s->prev, s->wanted, s->flags);
        if (rc != LC_OK)
            return rc;
        s->compared = s->alive = s->prev.mask;
        if (warmup_grew_nothing(s)) {
            s->cur = s->prev;
            s->prev = s->pre;
            measure(s);
            s->warmup_measured = 1;
            s->done = 1;
            return 0;
        }
        s->calls++;
        return 1;
    }
    /* A probe still alive runs the series to its last run, which is
     * therefore the last snapshot of any series that can leak. */
    rc = lc__snapshot_settled(&s->cur, s->compared,
                              s->flags | (s->runs + 1 == s->repeat
                                              ? LC__SNAPSHOT_LAST : 0),
                              &s->prev);
    if (rc != LC_OK)
        return rc;
    measure(s);
    if (s->alive == 0 || s->runs == s->repeat) {
        s->done = 1;
        return 0;
    }
    s->calls++;
    return 1;
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

size_t
lc_series_report(const lc_series *s, char *buf, size_t size)
{
    lc__buf b = {buf, size, 0};
    int p, run, first = 1;

    if (size > 0)
        buf[0] = '\0';
    if (s == NULL)
        return 0;
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
        lc__buf_printf(&b, ": %d measured run%s after %d warm-up run%s\n",
                       s->runs, s->runs == 1 ? "" : "s", s->warmup,
                       s->warmup == 1 ? "" : "s");
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        if (!(s->done && (s->alive & LC_PROBE_BIT(p))))
            continue;
        lc__buf_printf(&b, "  %-12s grew in every run:", lc__probes[p].name);
        for (run = 0; run < s->runs; run++)
            lc__buf_printf(&b, " %+lld",
                           (long long)s->deltas[(size_t)run * LC_PROBE_COUNT +
                                                (size_t)p]);
        lc__buf_printf(&b, " %s (threshold %lld per run)\n",
                       lc__probes[p].unit, (long long)s->threshold[p]);
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
             * unit above it. */
            rc = set->value < 0 || set->value == INT64_MAX
                     ? (set->probe < 0 || set->probe >= LC_PROBE_COUNT
                            ? LC_ENOPROBE : LC_EINVAL)
                     : lc_series_set_threshold(s, set->probe,
                                               set->value + 1);
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
            lc__buf_printf(&b, "leakcheck: LEAK_REPEAT '%s' at %s:%d: %s "
                               "(warmup %d, repeat %d)\n", name, file, line,
                           warmup < 0 || repeat < 1
                               ? "warmup must be >= 0 and repeat >= 1"
                               : lc_strerror(LC_ENOMEM),
                           warmup, repeat);
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
    rc = lc_series_next(r->series);
    if (rc > 0)
        return 1;
    if (rc < 0) {
        lc__buf_printf(&b, "leakcheck: LEAK_REPEAT '%s' at %s:%d could not "
                           "be measured: %s\n", name, file, line,
                       lc_strerror(rc));
        r->failed = 1;
    } else if (lc_series_leaked(r->series) == 1) {
        lc_series_report(r->series, r->msg, sizeof r->msg);
        r->failed = 1;
    }
    lc_series_free(r->series);
    r->series = NULL;
    r->done = 1;
    return 0;
}
