/*
 * scope.c — the scope verdict: two snapshots, one delta per probe, and a
 * leak wherever the delta exceeds the probe's tolerance.  Also the helpers
 * behind LEAK_SCOPE_BEGIN / LEAK_SCOPE_END.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { SCOPE_NEW, SCOPE_BEGUN, SCOPE_ENDED };

struct lc_scope {
    char *name;                         /* owned; never NULL               */
    const char *file;                   /* where it ends, for the report   */
    int line;
    unsigned wanted;                    /* probes asked for                */
    int64_t tolerance[LC_PROBE_COUNT];
    int64_t baseline[LC_PROBE_COUNT];   /* the measurement's own growth    */
    int state;                          /* SCOPE_*                         */
    int status;                         /* first error of open/begin/end   */
    const char *open_file;              /* LEAK_SCOPE_BEGIN_WITH's place,  */
    int open_line;                      /*   when a setting was refused,   */
    char refused[160];                  /*   and which and why; else ""    */
    lc_snapshot before, after;
    unsigned compared;                  /* read at both ends               */
    unsigned leaking;                   /* compared, and grew too much     */
    lc__fdset fds_before, fds_after;    /* open descriptors at both ends,
                                         * when fds is read                */
};

/* What LEAK_SCOPE_BEGIN gives when no scope could be made: LEAK_SCOPE_END
 * then says "out of memory", not "never begun".  Never begun, never
 * freed. */
static lc_scope oom_scope = {.name = (char *)"scope", .status = LC_ENOMEM};

/* A scope and its name live in one mapping of the engine's own (own.c),
 * not in the heap that native_bytes reads: a scope still open while
 * another ends is not counted as that one's growth. */
lc_scope *
lc_scope_new(const char *name)
{
    size_t len;
    lc_scope *s;
    int p;

    if (name == NULL)
        name = "scope";
    len = strlen(name) + 1;
    s = lc__own_alloc(sizeof *s + len);
    if (s == NULL)
        return NULL;
    s->name = memcpy((char *)(s + 1), name, len);
    s->wanted = LC_PROBES_ALL;
    for (p = 0; p < LC_PROBE_COUNT; p++)
        s->tolerance[p] = lc__probes[p].tolerance;
    return s;
}

void
lc_scope_free(lc_scope *s)
{
    if (s && s != &oom_scope) {
        lc__sites_release(s);
        lc__own_free(s);
    }
}

int
lc_scope_set_probes(lc_scope *s, unsigned probes)
{
    if (s == NULL || probes == 0 || (probes & ~LC_PROBES_ALL))
        return LC_EINVAL;
    if (s == &oom_scope)
        return LC_ENOMEM;
    if (s->state != SCOPE_NEW)
        return LC_ESTATE;
    s->wanted = probes;
    return LC_OK;
}

int
lc_scope_set_tolerance(lc_scope *s, int probe, int64_t tolerance)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || tolerance < 0)
        return LC_EINVAL;
    if (s == &oom_scope)
        return LC_ENOMEM;
    s->tolerance[probe] = tolerance;
    return LC_OK;
}

int
lc_scope_set_baseline(lc_scope *s, int probe, int64_t baseline)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL)
        return LC_EINVAL;
    if (s == &oom_scope)
        return LC_ENOMEM;
    if (s->state == SCOPE_ENDED)
        return LC_ESTATE;
    s->baseline[probe] = baseline;
    return LC_OK;
}

/* The growth judged and reported: the readings' difference less what the
 * measurement itself made, held within int64_t (a baseline near INT64_MIN
 * or INT64_MAX saturates rather than wraps). */
static int64_t
grown(const lc_scope *s, int p)
{
    int64_t d, g;

    if (__builtin_sub_overflow(s->after.values[p], s->before.values[p], &d))
        d = s->after.values[p] > s->before.values[p] ? INT64_MAX : INT64_MIN;
    if (__builtin_sub_overflow(d, s->baseline[p], &g))
        g = d > s->baseline[p] ? INT64_MAX : INT64_MIN;
    return g;
}

void
lc_scope_set_location(lc_scope *s, const char *file, int line)
{
    if (s) {
        s->file = file;
        s->line = line;
    }
}

int
lc_scope_begin(lc_scope *s)
{
    int rc;

    if (s == NULL)
        return LC_EINVAL;
    if (s == &oom_scope)
        return LC_ENOMEM;
    if (s->state != SCOPE_NEW)
        return LC_ESTATE;
    /* The fds probe's listing of /proc/self/fd also leaves its set, for
     * the report to name the descriptors left open. */
    lc__fdset_reading(&s->fds_before);
    rc = lc_snapshot_take(&s->before, s->wanted, 0);
    lc__fdset_reading(NULL);
    if (rc != LC_OK)
        return rc;
    s->state = SCOPE_BEGUN;
    return LC_OK;
}

int
lc_scope_end(lc_scope *s)
{
    int rc, p;

    if (s == NULL)
        return LC_EINVAL;
    if (s->state != SCOPE_BEGUN)
        return LC_ESTATE;
    lc__fdset_reading(&s->fds_after);
    rc = lc__snapshot_settled(&s->after, s->before.mask, LC__SNAPSHOT_LAST,
                              &s->before);
    lc__fdset_reading(NULL);
    if (rc != LC_OK)
        return rc;
    s->compared = s->before.mask & s->after.mask;
    s->leaking = 0;
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if ((s->compared & bit) && grown(s, p) > s->tolerance[p])
            s->leaking |= bit;
    }
    s->state = SCOPE_ENDED;
    return LC_OK;
}

int
lc_scope_leaked(const lc_scope *s)
{
    if (s == NULL)
        return LC_EINVAL;
    if (s->state != SCOPE_ENDED)
        return LC_ESTATE;
    return s->leaking != 0;
}

unsigned
lc_scope_probes(const lc_scope *s)
{
    return s && s->state == SCOPE_ENDED ? s->compared : 0;
}

unsigned
lc_scope_leaking(const lc_scope *s)
{
    return s && s->state == SCOPE_ENDED ? s->leaking : 0;
}

int
lc_scope_delta(const lc_scope *s, int probe, int64_t *delta)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (s == NULL || delta == NULL)
        return LC_EINVAL;
    if (s->state != SCOPE_ENDED)
        return LC_ESTATE;
    if (!(s->compared & LC_PROBE_BIT(probe)))
        return LC_EUNAVAIL;
    *delta = grown(s, probe);
    return LC_OK;
}

int64_t
lc_scope_tolerance(const lc_scope *s, int probe)
{
    if (s == NULL || probe < 0 || probe >= LC_PROBE_COUNT)
        return 0;
    return s->tolerance[probe];
}

size_t
lc_scope_report(const lc_scope *s, char *buf, size_t size)
{
    lc__buf b = {buf, size, 0};
    int p, first = 1;

    if (size > 0)
        buf[0] = '\0';
    if (s == NULL)
        return 0;
    if (s->state != SCOPE_ENDED) {
        lc__buf_printf(&b, "leakcheck: scope '%s' has not ended", s->name);
        return b.len;
    }
    lc__buf_printf(&b, "leakcheck: scope '%s' %s", s->name,
                   s->leaking ? "leaked" : "is clean");
    if (s->file)
        lc__buf_printf(&b, " (at %s:%d)", s->file, s->line);
    lc__buf_printf(&b, "\n");
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        if (s->leaking & LC_PROBE_BIT(p))
            lc__buf_printf(&b, "  %-12s grew by %+lld %s (tolerance %lld)\n",
                           lc__probes[p].name,
                           (long long)grown(s, p), lc__probes[p].unit,
                           (long long)s->tolerance[p]);
        if (p == LC_PROBE_FDS && (s->leaking & LC_PROBE_BIT(p)))
            lc__fds_report(&b, &s->fds_before, &s->fds_after);
    }
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if ((s->compared & bit) && !(s->leaking & bit)) {
            lc__buf_printf(&b, "%s %s %+lld", first ? "  within tolerance:"
                                                    : ",",
                           lc__probes[p].name, (long long)grown(s, p));
            first = 0;
        }
    }
    if (!first)
        lc__buf_printf(&b, "\n");
    return b.len;
}

int
lc_scope_apply(lc_scope *s, const lc_setting *set, char *msg, size_t size)
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
            rc = lc_scope_set_tolerance(s, set->probe, set->value);
            why = rc == LC_ENOPROBE ? "no such probe"
                                    : "a tolerance is at least 0";
            break;
        case LC_SET_PROBES:
            rc = set->value < 0 || set->value > (int64_t)LC_PROBES_ALL
                     ? LC_EINVAL
                     : lc_scope_set_probes(s, (unsigned)set->value);
            why = rc == LC_ESTATE ? "the scope has begun"
                                  : "the mask holds no probe, or bits that "
                                    "are no probe";
            break;
        case LC_SET_THRESHOLD:
            rc = LC_EINVAL;
            why = "a scope takes LC_TOLERANCE; LC_THRESHOLD is for a series";
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

/* ---- the macros' helpers ---- */

lc_scope *
lc_scope_open_with(const char *name, const lc_setting *settings,
                   const char *file, int line)
{
    lc_scope *s = lc_scope_new(name);

    if (s == NULL)
        return &oom_scope;
    lc_scope_set_location(s, file, line);
    s->status = lc_scope_apply(s, settings, s->refused, sizeof s->refused);
    if (s->status != LC_OK) {
        s->open_file = file;
        s->open_line = line;
        return s;
    }
    lc__sites_prepare();
    s->status = lc_scope_begin(s);
    if (s->status == LC_OK)
        lc__sites_start(s);
    return s;
}

lc_scope *
lc_scope_open(const char *name, const char *file, int line)
{
    return lc_scope_open_with(name, NULL, file, line);
}

int
lc_scope_close(lc_scope *s, const char *file, int line, char *msg,
               size_t size)
{
    int rc, failed;

    if (s == NULL || s == &oom_scope) {
        lc__buf b = {msg, size, 0};
        if (size > 0)
            msg[0] = '\0';
        if (s == NULL)
            lc__buf_printf(&b, "leakcheck: LEAK_SCOPE_END at %s:%d: the "
                               "scope was never begun, or has already "
                               "ended (each LEAK_SCOPE_BEGIN takes one "
                               "LEAK_SCOPE_END)\n", file, line);
        else
            lc__buf_printf(&b, "leakcheck: could not open the scope ending "
                               "at %s:%d: %s\n", file, line,
                           lc_strerror(LC_ENOMEM));
        return 1;
    }
    lc_scope_set_location(s, file, line);
    lc__sites_pause(s);
    rc = s->status != LC_OK ? s->status : lc_scope_end(s);
    lc__sites_stop(s);
    if (s->refused[0] != '\0') {
        lc__buf b = {msg, size, 0};
        if (size > 0)
            msg[0] = '\0';
        lc__buf_printf(&b, "leakcheck: scope '%s' (LEAK_SCOPE_BEGIN_WITH at "
                           "%s:%d): %s\n", s->name, s->open_file,
                       s->open_line, s->refused);
        failed = 1;
    } else if (rc != LC_OK) {
        lc__buf b = {msg, size, 0};
        if (size > 0)
            msg[0] = '\0';
        lc__buf_printf(&b, "leakcheck: scope '%s' ending at %s:%d could not "
                           "be measured: %s\n", s->name, file, line,
                       lc_strerror(rc));
        failed = 1;
    } else {
        failed = s->leaking != 0;
        if (failed) {
            lc__buf b = {msg, size, lc_scope_report(s, msg, size)};
            lc__sites_report(s, s->leaking, &b);
        }
    }
    lc_scope_free(s);
    return failed;
}
