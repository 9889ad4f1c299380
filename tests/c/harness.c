/*
 * harness.c — runs an inner Check suite in both fork modes and judges each
 * result by the test's name (see harness.h): a `leak_*` test passes here
 * only when it failed with a leakcheck report naming the probes its name
 * lists, at a LEAK_SCOPE_END or LEAK_REPEAT line of its source file.
 */
#include "harness.h"

#include <leakcheck.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TESTS 128

static const char *registered[MAX_TESTS];  /* names added to this suite  */
static int n_registered;
static int n_passed, n_failed;

void
harness_add(Suite *suite, const TTest *test)
{
    TCase *tc = tcase_create(test->name);

    /* Fork mode's default timeout is 4 s; under valgrind every snapshot
     * runs a leak search, which is slower. */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test);
    suite_add_tcase(suite, tc);
    if (n_registered < MAX_TESTS)
        registered[n_registered++] = test->name;
    else
        harness_expect(0, "too many tests: raise MAX_TESTS in harness.c");
}

static void
verdict(int ok, const char *mode, const char *name, const char *fmt,
        va_list ap)
{
    printf("%s %-9s %s: ", ok ? "ok  " : "FAIL", mode, name);
    vprintf(fmt, ap);
    putchar('\n');
    if (ok)
        n_passed++;
    else
        n_failed++;
}

void
harness_expect(int ok, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    verdict(ok, "-", "precondition", fmt, ap);
    va_end(ap);
}

static void
judge(int ok, const char *mode, const char *name, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    verdict(ok, mode, name, fmt, ap);
    va_end(ap);
}

/* The message, indented, under a failed judgement: the log then says why. */
static void
show(const char *msg)
{
    const char *p = msg;

    while (p && *p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        printf("     | %.*s\n", len, p);
        p = nl ? nl + 1 : NULL;
    }
}

static int
starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/*
 * The probes a `leak_` name lists, as a mask: probe names joined by '_'
 * after the prefix, up to the first word that is no probe name.  Probe
 * names hold '_' themselves, so the longest name that fits wins.
 */
static unsigned
expected_probes(const char *name)
{
    const char *p = name + strlen("leak_");
    unsigned mask = 0;

    for (;;) {
        size_t best_len = 0;
        int best = -1, i;
        for (i = 0; i < LC_PROBE_COUNT; i++) {
            lc_probe_info info;
            size_t len;
            if (lc_probe_get_info(i, &info) != LC_OK)
                continue;
            len = strlen(info.name);
            if (strncmp(p, info.name, len) == 0 &&
                (p[len] == '_' || p[len] == '\0') && len > best_len) {
                best = i;
                best_len = len;
            }
        }
        if (best < 0)
            return mask;
        mask |= LC_PROBE_BIT(best);
        p += best_len;
        if (*p == '\0')
            return mask;
        p++;
    }
}

/* The report line saying that `probe` grew ("  fds          grew ..."),
 * or NULL. */
static const char *
grew_line(const char *msg, const char *probe)
{
    size_t len = strlen(probe);
    const char *p = msg;

    while ((p = strstr(p, probe)) != NULL) {
        const char *q = p + len;
        int at_line_start = p - msg >= 2 && p[-1] == ' ' && p[-2] == ' ' &&
                            (p - msg == 2 || p[-3] == '\n');
        while (*q == ' ')
            q++;
        if (at_line_start && q > p + len && starts_with(q, "grew"))
            return p;
        p += len;
    }
    return NULL;
}

/*
 * For a series report: whether the line of a leaking probe lists one delta
 * per measured run ("5 measured runs ...", then "grew in every run: +48
 * +48 ...").  1 for a scope report, which has one delta by nature.
 */
static int
deltas_complete(const char *msg, const char *line, int *runs, int *listed)
{
    const char *p = strstr(msg, " measured run");
    const char *q;

    *runs = *listed = 0;
    if (!starts_with(msg, "leakcheck: series '"))
        return 1;
    if (p == NULL)
        return 0;
    while (p > msg && p[-1] >= '0' && p[-1] <= '9')
        p--;
    *runs = atoi(p);
    q = strstr(line, "grew in every run:");
    if (q == NULL)
        return 0;
    q += strlen("grew in every run:");
    for (;;) {
        char *end;
        while (*q == ' ')
            q++;
        if (*q != '+' && *q != '-')
            break;
        if (strtoll(q, &end, 10) < 1)  /* every delta reached threshold 1 */
            return 0;
        (*listed)++;
        q = end;
    }
    return *runs > 0 && *listed == *runs;
}

/*
 * Reads line `lno` of the source file `file` names into buf.  The sources
 * live in $top_srcdir/tests/c whatever path the compiler was given.
 */
static int
source_line(const char *file, int lno, char *buf, size_t size)
{
    const char *srcdir = getenv("top_srcdir");
    const char *base = strrchr(file, '/');
    char path[4096];
    FILE *f;
    int n = 0, found = 0;

    base = base ? base + 1 : file;
    if (srcdir && *srcdir)
        snprintf(path, sizeof path, "%s/tests/c/%s", srcdir, base);
    else
        snprintf(path, sizeof path, "%s", file);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(buf, (int)size, f) != NULL) {
        if (strchr(buf, '\n') != NULL || feof(f))
            n++;
        if (n == lno) {
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

static void
judge_leak(const char *mode, const char *name, TestResult *tr)
{
    const char *msg = tr_msg(tr) ? tr_msg(tr) : "";
    const char *file = tr_lfile(tr) ? tr_lfile(tr) : "?";
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    unsigned want = expected_probes(name);
    char src[1024];
    int p, runs = 0, listed = 0;

    if (tr_rtype(tr) != CK_FAILURE) {
        judge(0, mode, name, "expected a leakcheck failure, got %s",
              tr_rtype(tr) == CK_PASS ? "a pass" : "an error");
        show(msg);
        return;
    }
    if (!starts_with(msg, "leakcheck:")) {
        judge(0, mode, name, "failed, but not with a leakcheck report");
        show(msg);
        return;
    }
    if (want == 0) {
        judge(0, mode, name, "the name lists no probe after leak_");
        return;
    }
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        lc_probe_info info;
        const char *line;
        if (!(want & LC_PROBE_BIT(p)))
            continue;
        lc_probe_get_info(p, &info);
        line = grew_line(msg, info.name);
        if (line == NULL) {
            judge(0, mode, name, "the report does not say that %s grew",
                  info.name);
            show(msg);
            return;
        }
        if (!deltas_complete(msg, line, &runs, &listed)) {
            judge(0, mode, name, "%s: %d delta(s) >= 1 listed for %d "
                  "measured run(s)", info.name, listed, runs);
            show(msg);
            return;
        }
    }
    if (!source_line(file, tr_lno(tr), src, sizeof src)) {
        judge(0, mode, name, "cannot read line %d of %s (top_srcdir=%s)",
              tr_lno(tr), file, getenv("top_srcdir") ? getenv("top_srcdir")
                                                      : "unset");
        return;
    }
    if (strstr(src, "LEAK_SCOPE_END") == NULL &&
        strstr(src, "LEAK_REPEAT") == NULL) {
        judge(0, mode, name, "failed at %s:%d, which holds no "
              "LEAK_SCOPE_END or LEAK_REPEAT: %s", base, tr_lno(tr), src);
        return;
    }
    judge(1, mode, name, "leak reported at %s:%d (%s)%s", base, tr_lno(tr),
          strstr(src, "LEAK_REPEAT") ? "LEAK_REPEAT" : "LEAK_SCOPE_END",
          runs > 0 ? ", one delta per measured run" : "");
}

/* A refused setting: a leakcheck message saying so, at the macro's line. */
static void
judge_refused(const char *mode, const char *name, TestResult *tr)
{
    const char *msg = tr_msg(tr) ? tr_msg(tr) : "";
    const char *file = tr_lfile(tr) ? tr_lfile(tr) : "?";
    char src[1024];

    if (tr_rtype(tr) != CK_FAILURE || !starts_with(msg, "leakcheck:") ||
        strstr(msg, " refused: ") == NULL) {
        judge(0, mode, name, "expected a leakcheck failure for a refused "
              "setting, got %s", tr_rtype(tr) == CK_PASS ? "a pass" : "this");
        show(msg);
        return;
    }
    if (!source_line(file, tr_lno(tr), src, sizeof src) ||
        (strstr(src, "LEAK_SCOPE_END") == NULL &&
         strstr(src, "LEAK_REPEAT") == NULL)) {
        judge(0, mode, name, "failed at %s:%d, which holds no "
              "LEAK_SCOPE_END or LEAK_REPEAT", file, tr_lno(tr));
        return;
    }
    judge(1, mode, name, "%.*s", (int)strcspn(msg, "\n"), msg);
}

static void
judge_result(const char *mode, TestResult *tr)
{
    const char *name = tr_tcname(tr) ? tr_tcname(tr) : "?";

    if (starts_with(name, "clean_")) {
        int ok = tr_rtype(tr) == CK_PASS;
        judge(ok, mode, name, ok ? "passed" : "expected a pass, got %s at "
              "%s:%d", tr_rtype(tr) == CK_FAILURE ? "a failure" : "an error",
              tr_lfile(tr) ? tr_lfile(tr) : "?", tr_lno(tr));
        if (!ok)
            show(tr_msg(tr));
    } else if (starts_with(name, "leak_")) {
        judge_leak(mode, name, tr);
    } else if (starts_with(name, "refused_")) {
        judge_refused(mode, name, tr);
    } else {
        judge(0, mode, name, "name starts with none of clean_, leak_, "
              "refused_");
    }
}

static void
run_mode(Suite *(*make_suite)(void), enum fork_status fork,
         const char *mode)
{
    SRunner *sr;
    TestResult **results;
    int n, i, j;

    n_registered = 0;
    sr = srunner_create(make_suite());
    srunner_set_fork_status(sr, fork);
    /* Forked children exit through exit(): anything still buffered here
     * would be written once more by each of them. */
    fflush(stdout);
    fflush(stderr);
    srunner_run_all(sr, CK_SILENT);
    n = srunner_ntests_run(sr);
    results = srunner_results(sr);
    for (i = 0; i < n; i++)
        judge_result(mode, results[i]);
    for (j = 0; j < n_registered; j++) {
        int seen = 0;
        for (i = 0; i < n; i++)
            if (tr_tcname(results[i]) &&
                strcmp(tr_tcname(results[i]), registered[j]) == 0)
                seen++;
        if (seen != 1)
            judge(0, mode, registered[j], "ran %d times, not once", seen);
    }
    free(results);
    srunner_free(sr);
    fflush(stdout);
}

int
harness_run(Suite *(*make_suite)(void), unsigned modes)
{
    if (modes & HARNESS_FORK)
        run_mode(make_suite, CK_FORK, "CK_FORK");
    if (modes & HARNESS_NOFORK)
        run_mode(make_suite, CK_NOFORK, "CK_NOFORK");
    printf("%d passed, %d failed\n", n_passed, n_failed);
    fflush(stdout);
    return n_failed == 0 && n_passed > 0 ? 0 : 1;
}

int
harness_source_line(const char *file, const char *mark)
{
    const char *srcdir = getenv("top_srcdir");
    char path[4096], buf[512];
    FILE *f;
    int n = 0, found = 0;

    snprintf(path, sizeof path, "%s/tests/c/%s", srcdir ? srcdir : ".",
             file);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (found == 0 && fgets(buf, sizeof buf, f) != NULL)
        if (++n, strstr(buf, mark) != NULL)
            found = n;
    fclose(f);
    return found;
}

int
harness_count(const char *text, const char *what)
{
    int n = 0;

    while ((text = strstr(text, what)) != NULL) {
        n++;
        text += strlen(what);
    }
    return n;
}
