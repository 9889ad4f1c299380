/*
 * report.c — what the library says: its version, status texts, report
 * buffers, and the failure handler the test macros call.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *
lc_version(void)
{
    return LC_VERSION;
}

const char *
lc_strerror(int status)
{
    switch (status) {
    case LC_OK:
        return "success";
    case LC_ENOMEM:
        return "out of memory";
    case LC_EINVAL:
        return "invalid argument";
    case LC_ENOPROBE:
        return "no such probe";
    case LC_EUNAVAIL:
        return "probe not available here";
    case LC_ESTATE:
        return "called out of order";
    case LC_EPYTHON:
        return "a call into CPython failed";
    case LC_ESYS:
        return "a system call failed";
    default:
        return "unknown status";
    }
}

void
lc__buf_printf(lc__buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    size_t room = b->len < b->size ? b->size - b->len : 0;

    va_start(ap, fmt);
    n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

void
lc__setting_refused(lc__buf *b, const lc_setting *set, const char *why)
{
    static const char *const names[] = {"LC_SET_END", "LC_TOLERANCE",
                                        "LC_THRESHOLD", "LC_PROBES"};

    if (set->what == LC_SET_PROBES) {
        lc__buf_printf(b, "LC_PROBES(0x%llx)", (unsigned long long)set->value);
    } else if (set->what == LC_SET_TOLERANCE ||
               set->what == LC_SET_THRESHOLD) {
        lc__buf_printf(b, "%s(", names[set->what]);
        if (set->probe >= 0 && set->probe < LC_PROBE_COUNT)
            lc__buf_printf(b, "%s", lc__probes[set->probe].name);
        else
            lc__buf_printf(b, "probe %d", set->probe);
        lc__buf_printf(b, ", %lld)", (long long)set->value);
    } else {
        lc__buf_printf(b, "setting %d", set->what);
    }
    lc__buf_printf(b, " refused: %s", why);
}

/*
 * Check's own failure, when the program links Check (libcheck, shared or
 * static): weak references, so that libleakcheck does not depend on it.
 * tcase_name() is the name of the test Check last started in this
 * process, NULL before the first: a failure inside a Check test fails
 * that test the Check way (a failure with the report as its message; the
 * forked child exits, or, with CK_FORK=no, Check's runner goes on with
 * the next test), whichever order check.h and leakcheck.h were included
 * in.
 */
extern void _ck_assert_failed(const char *file, int line, const char *expr,
                              const char *msg, ...) __attribute__((weak));
extern const char *tcase_name(void) __attribute__((weak));

static int
in_check_test(void)
{
    return _ck_assert_failed != NULL && tcase_name != NULL &&
           tcase_name() != NULL;
}

static void
default_failure(const char *file, int line, const char *report, void *arg)
{
    (void)arg;
    if (in_check_test())
        _ck_assert_failed(file, line, "Failed", "%s", report);
    fprintf(stderr, "%s:%d: %s", file, line, report);
    fflush(stderr);
    exit(1);
}

static lc_failure_fn failure_fn = default_failure;
static void *failure_arg;

void
lc_set_failure_handler(lc_failure_fn fn, void *arg)
{
    failure_fn = fn ? fn : default_failure;
    failure_arg = fn ? arg : NULL;
}

void
lc_fail(const char *file, int line, const char *report)
{
    failure_fn(file, line, report, failure_arg);
}
