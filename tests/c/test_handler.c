/*
 * test_handler.c — the C API without Check: the failure handler the macros
 * call (a custom one, and the default that reports on stderr and exits
 * non-zero, seen from a forked child), and unit checks of the public
 * functions: status texts, version, probe table and availability in a pure
 * C program, misuse answered with LC_ESTATE / LC_EINVAL, the series'
 * early stop, tolerances and thresholds, and the reports' text.
 *
 * Prints one line per check and "N passed, N failed" last; exits 0 only
 * when every check held.
 */
#include <leakcheck.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#define HAVE_VALGRIND_HEADERS 1
#endif
#endif

/* Where native_bytes reads from in this build (see heap.c). */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_SOURCE "__sanitizer_get_current_allocated_bytes"
#else
#define HEAP_SOURCE "glibc mallinfo2"
#endif

static int n_passed, n_failed;

static void
expect(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s ", ok ? "ok  " : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (ok)
        n_passed++;
    else
        n_failed++;
}

static int
contains(const char *haystack, const char *needle)
{
    return haystack != NULL && strstr(haystack, needle) != NULL;
}

/* A report on one line, for a check's line of output (one buffer, reused
 * by each call). */
static const char *
flat(const char *text)
{
    static char buf[512];
    size_t i;

    snprintf(buf, sizeof buf, "%s", text);
    for (i = 0; buf[i]; i++)
        if (buf[i] == '\n')
            buf[i] = buf[i + 1] ? '/' : '\0';
    return buf;
}

/* Leaked blocks stay reachable from a non-static global, or the compiler
 * may drop a malloc nobody reads and nothing leaks. */
void *lc_test_kept[64];
static int n_kept;

#define BIG_LEAK (64 * 1024)

static void
leak_big(void)
{
    void *p = malloc(BIG_LEAK);

    memset(p, 1, BIG_LEAK);
    lc_test_kept[n_kept++ % 64] = p;
}

/* ---- a custom failure handler ------------------------------------------- */

static struct {
    int calls;
    const char *file;
    int line;
    char report[LC_REPORT_MAX];
} seen;

static void
record(const char *file, int line, const char *report, void *arg)
{
    seen.calls++;
    seen.file = file;
    seen.line = line;
    snprintf(seen.report, sizeof seen.report, "%s", report);
    (void)arg;
}

static void
test_custom_handler(void)
{
    int end_line, repeat_line, body_runs = 0;

    lc_set_failure_handler(record, NULL);

    memset(&seen, 0, sizeof seen);
    {
        LEAK_SCOPE_BEGIN(s);
        leak_big();
        end_line = __LINE__ + 1;
        LEAK_SCOPE_END(s);
    }
    expect(seen.calls == 1, "custom handler runs once for a leaky scope "
           "(%d calls)", seen.calls);
    expect(seen.file && strcmp(seen.file, __FILE__) == 0 &&
           seen.line == end_line, "it gets the file:line of LEAK_SCOPE_END "
           "(%s:%d, expected %s:%d)", seen.file ? seen.file : "NULL",
           seen.line, __FILE__, end_line);
    expect(contains(seen.report, "leakcheck: scope 's' leaked") &&
           contains(seen.report, "native_bytes") &&
           contains(seen.report, "grew by"),
           "its report names the scope and native_bytes: %.60s",
           flat(seen.report));

    memset(&seen, 0, sizeof seen);
    {
        LEAK_SCOPE_BEGIN(s);
        void *p = malloc(BIG_LEAK);
        memset(p, 1, BIG_LEAK);
        free(p);
        LEAK_SCOPE_END(s);
    }
    expect(seen.calls == 0, "custom handler does not run for a clean scope");

    memset(&seen, 0, sizeof seen);
    repeat_line = __LINE__ + 1;
    LEAK_REPEAT(r, 1, 3) { ++body_runs; lc_test_kept[n_kept++ % 64] = malloc(40); }
    expect(seen.calls == 1 && seen.line == repeat_line &&
           contains(seen.report, "leakcheck: series 'r' leaked"),
           "custom handler runs for a leaky LEAK_REPEAT at its line (%d "
           "calls, line %d)", seen.calls, seen.line);
    /* A leak of native_bytes alone: confirmed over 8 more runs. */
    expect(body_runs == 4 + 8 &&
           contains(seen.report, "  confirmed over 8 more runs\n"),
           "the leaky LEAK_REPEAT ran warmup + repeat = 4 times, and 8 more "
           "that confirm it (%d)", body_runs);

    /* Its clean twin: the same block, freed each run. */
    memset(&seen, 0, sizeof seen);
    body_runs = 0;
    LEAK_REPEAT(r, 1, 3) {
        lc_test_kept[n_kept % 64] = malloc(40);
        ++body_runs;
        free(lc_test_kept[n_kept % 64]);
    }
    expect(seen.calls == 0 && body_runs >= 1,
           "custom handler does not run for the clean twin of that "
           "LEAK_REPEAT (%d calls, %d runs)", seen.calls, body_runs);

    memset(&seen, 0, sizeof seen);
    LEAK_REPEAT(bad, -1, 0) { body_runs = -100; }
    expect(seen.calls == 1 && body_runs != -100 &&
           contains(seen.report, "warmup is -1; it must be at least 0"),
           "LEAK_REPEAT with warmup -1, repeat 0 fails without running the "
           "body: %.70s", flat(seen.report));

    memset(&seen, 0, sizeof seen);
    body_runs = 0;
    LEAK_REPEAT(huge, 1, 2000000000) { body_runs = -100; }
    expect(seen.calls == 1 && body_runs != -100 &&
           contains(seen.report, "repeat is 2000000000; it must be from 1 "
                                 "to the maximum, 10000"),
           "LEAK_REPEAT with repeat 2000000000 says why, not \"out of "
           "memory\": %.90s", flat(seen.report));

    lc_set_failure_handler(NULL, NULL);
}

/* ---- settings ----------------------------------------------------------- */

static void
test_settings(void)
{
    const lc_setting bad_scope[] = {LC_TOLERANCE(LC_PROBE_FDS, 1),
                                    LC_THRESHOLD(LC_PROBE_FDS, 2),
                                    {LC_SET_END, 0, 0}};
    const lc_setting good_series[] = {LC_TOLERANCE(LC_PROBE_FDS, 2),
                                      LC_THRESHOLD(LC_PROBE_THREADS, 3),
                                      LC_PROBES(LC_PROBE_BIT(LC_PROBE_FDS) |
                                                LC_PROBE_BIT(LC_PROBE_THREADS)),
                                      {LC_SET_END, 0, 0}};
    const lc_setting bad_mask[] = {LC_PROBES(1u << LC_PROBE_COUNT),
                                   {LC_SET_END, 0, 0}};
    char msg[256], expected[256];
    lc_scope *s = lc_scope_new("s");
    lc_series *r = lc_series_new("r", 0, 2);
    int line, body_runs = 0;

    expect(lc_scope_apply(s, bad_scope, msg, sizeof msg) == LC_EINVAL &&
           lc_scope_tolerance(s, LC_PROBE_FDS) == 1 &&
           strcmp(msg, "LC_THRESHOLD(fds, 2) refused: a scope takes "
                       "LC_TOLERANCE; LC_THRESHOLD is for a series") == 0,
           "lc_scope_apply applies settings up to the refused one, which it "
           "names: %s", msg);
    expect(lc_series_apply(r, good_series, msg, sizeof msg) == LC_OK &&
           msg[0] == '\0' && lc_series_threshold(r, LC_PROBE_FDS) == 3 &&
           lc_series_threshold(r, LC_PROBE_THREADS) == 3,
           "lc_series_apply: LC_TOLERANCE 2 is threshold 3, LC_THRESHOLD 3 "
           "is 3");
    expect(lc_series_apply(r, bad_mask, msg, sizeof msg) == LC_EINVAL &&
           contains(msg, "LC_PROBES(0x400) refused: the mask holds no "
                         "probe, or bits that are no probe"),
           "a mask beyond the probes is refused: %s", msg);
    expect(lc_scope_apply(s, NULL, msg, sizeof msg) == LC_OK,
           "a NULL list is no setting");
    lc_scope_free(s);
    lc_series_free(r);

    lc_set_failure_handler(record, NULL);
    memset(&seen, 0, sizeof seen);
    line = __LINE__ + 1;
    LEAK_REPEAT_WITH(bad, 1, 3, LC_THRESHOLD(LC_PROBE_FDS, 0)) { body_runs++; }
    snprintf(expected, sizeof expected, "leakcheck: LEAK_REPEAT_WITH 'bad' "
             "at %s:%d: LC_THRESHOLD(fds, 0) refused: a threshold is at "
             "least 1\n", __FILE__, line);
    expect(seen.calls == 1 && seen.line == line && body_runs == 0 &&
           strcmp(seen.report, expected) == 0,
           "a refused LEAK_REPEAT_WITH fails at its line without running "
           "its body: %s", flat(seen.report));

    memset(&seen, 0, sizeof seen);
    {
        LEAK_SCOPE_BEGIN_WITH(sc, LC_TOLERANCE(LC_PROBE_COUNT + 3, 1));
        line = __LINE__ - 1;
        LEAK_SCOPE_END(sc);
    }
    snprintf(expected, sizeof expected, "leakcheck: scope 'sc' "
             "(LEAK_SCOPE_BEGIN_WITH at %s:%d): LC_TOLERANCE(probe %d, 1) "
             "refused: no such probe\n", __FILE__, line, LC_PROBE_COUNT + 3);
    expect(seen.calls == 1 && seen.line == line + 2 &&
           strcmp(seen.report, expected) == 0,
           "a refused LEAK_SCOPE_BEGIN_WITH fails at LEAK_SCOPE_END, naming "
           "the setting and its line: %s", flat(seen.report));

    memset(&seen, 0, sizeof seen);
    {
        LEAK_SCOPE_BEGIN_WITH(sc, LC_TOLERANCE(LC_PROBE_NATIVE_BYTES,
                                               2 * BIG_LEAK));
        leak_big();
        LEAK_SCOPE_END(sc);
    }
    expect(seen.calls == 0, "LEAK_SCOPE_BEGIN_WITH's tolerance holds a "
           "64 KiB leak under 128 KiB");
    lc_set_failure_handler(NULL, NULL);
}

/* ---- the default handler, in a child ------------------------------------ */

/*
 * Runs fn in a child whose stderr is a pipe, returns its wait status and
 * what it wrote.  The child is forked with the default handler in place.
 */
static int
run_child(void (*fn)(void), char *err, size_t size)
{
    int fds[2], status = -1;
    size_t len = 0;
    ssize_t got;
    pid_t pid;

    err[0] = '\0';
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    while (len + 1 < size &&
           (got = read(fds[0], err + len, size - 1 - len)) > 0)
        len += (size_t)got;
    err[len] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    return status;
}

static void
child_leaks(void)
{
    LEAK_SCOPE_BEGIN(s);
    leak_big();
    LEAK_SCOPE_END(s);
}
enum { CHILD_END_LINE = __LINE__ - 2 };

static void
child_clean(void)
{
    LEAK_SCOPE_BEGIN(s);
    free(malloc(BIG_LEAK));
    LEAK_SCOPE_END(s);
}

static void
test_default_handler(void)
{
    char err[LC_REPORT_MAX + 256], where[256];
    int status;

    status = run_child(child_leaks, err, sizeof err);
    snprintf(where, sizeof where, "%s:%d: leakcheck: scope 's' leaked",
             __FILE__, CHILD_END_LINE);
    expect(WIFEXITED(status) && WEXITSTATUS(status) != 0,
           "default handler: a leaking child exits non-zero (status %d)",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    expect(strncmp(err, where, strlen(where)) == 0 &&
           contains(err, "native_bytes") && contains(err, "grew by"),
           "default handler: the child's stderr holds the report at "
           "LEAK_SCOPE_END: %.80s", flat(err));

    status = run_child(child_clean, err, sizeof err);
    expect(WIFEXITED(status) && WEXITSTATUS(status) == 0 && err[0] == '\0',
           "default handler: a clean child exits 0 and writes nothing "
           "(status %d, stderr '%.40s')",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
}

/* ---- status texts, version, probes -------------------------------------- */

static void
test_strerror_and_version(void)
{
    static const int codes[] = {LC_OK, LC_ENOMEM, LC_EINVAL, LC_ENOPROBE,
                                LC_EUNAVAIL, LC_ESTATE, LC_EPYTHON, LC_ESYS};
    const char *unknown = lc_strerror(-12345);
    size_t i, j;

    for (i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *t = lc_strerror(codes[i]);
        int distinct = 1;
        for (j = 0; j < i; j++)
            if (strcmp(t, lc_strerror(codes[j])) == 0)
                distinct = 0;
        expect(t != NULL && *t && distinct && strcmp(t, unknown) != 0,
               "lc_strerror(%d) = \"%s\", its own text", codes[i],
               t ? t : "NULL");
    }
    expect(unknown != NULL && lc_strerror(1) != NULL,
           "lc_strerror of an unknown status: \"%s\"", unknown);
    expect(strcmp(lc_version(), LC_VERSION) == 0,
           "lc_version() = \"%s\" = LC_VERSION", lc_version());
    {
        char hex[32];
        snprintf(hex, sizeof hex, "%d.%d.%d", (LC_VERSION_HEX >> 16) & 0xff,
                 (LC_VERSION_HEX >> 8) & 0xff, LC_VERSION_HEX & 0xff);
        expect(strcmp(hex, LC_VERSION) == 0, "LC_VERSION_HEX spells %s",
               hex);
    }
}

static void
test_probes(void)
{
    static const char *const names[LC_PROBE_COUNT] = {
        "refs", "blocks", "py_bytes", "py_allocs", "objects", "garbage",
        "native_bytes", "fds", "threads", "valgrind"};
    const char *valgrind_reason =
#if defined(HAVE_VALGRIND_HEADERS)
        "not running under valgrind";
#else
        "built without valgrind's headers";
#endif
    lc_probe_info info;
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++) {
        int rc = lc_probe_get_info(p, &info);
        expect(rc == LC_OK && strcmp(info.name, names[p]) == 0 &&
               lc_probe_lookup(names[p]) == p && info.unit && info.doc,
               "probe %d is \"%s\" and lc_probe_lookup(\"%s\") = %d", p,
               rc == LC_OK ? info.name : "?", names[p],
               lc_probe_lookup(names[p]));
        if (LC_PROBES_PYTHON & LC_PROBE_BIT(p))
            expect(!info.available && info.reason && *info.reason,
                   "%s is unavailable in a pure C program: %s", info.name,
                   info.reason ? info.reason : "(no reason)");
    }
    expect(lc_probe_lookup("nope") == LC_ENOPROBE &&
           lc_probe_lookup("") == LC_ENOPROBE &&
           lc_probe_lookup("FDS") == LC_ENOPROBE &&
           lc_probe_lookup(NULL) == LC_ENOPROBE,
           "lc_probe_lookup of a bad name is LC_ENOPROBE");
    expect(lc_probe_get_info(-1, &info) == LC_ENOPROBE &&
           lc_probe_get_info(LC_PROBE_COUNT, &info) == LC_ENOPROBE &&
           lc_probe_get_info(LC_PROBE_FDS, NULL) == LC_EINVAL,
           "lc_probe_get_info refuses a bad probe and a NULL info");

    lc_probe_get_info(LC_PROBE_VALGRIND, &info);
    expect(!info.available && info.reason &&
           strcmp(info.reason, valgrind_reason) == 0,
           "valgrind is unavailable: \"%s\"",
           info.reason ? info.reason : "(no reason)");
    lc_probe_get_info(LC_PROBE_NATIVE_BYTES, &info);
    expect(info.tolerance == 0 && info.threshold == 1,
           "native_bytes: tolerance 0, threshold 1 by default");
    expect(info.available && contains(info.doc, HEAP_SOURCE),
           "native_bytes reads %s here: %s", HEAP_SOURCE, info.doc);
    expect(lc_probes_available() ==
           (LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES) | LC_PROBE_BIT(LC_PROBE_FDS) |
            LC_PROBE_BIT(LC_PROBE_THREADS)),
           "lc_probes_available() = native_bytes, fds, threads (0x%x)",
           lc_probes_available());
}

/* ---- misuse -------------------------------------------------------------- */

static void
test_scope_misuse(void)
{
    lc_scope *s = lc_scope_new(NULL);
    int64_t d;
    char buf[256];

    expect(s != NULL, "lc_scope_new(NULL) makes a scope");
    expect(lc_scope_end(s) == LC_ESTATE, "lc_scope_end before begin: "
           "LC_ESTATE");
    expect(lc_scope_leaked(s) == LC_ESTATE &&
           lc_scope_delta(s, LC_PROBE_FDS, &d) == LC_ESTATE,
           "verdict and delta before end: LC_ESTATE");
    lc_scope_report(s, buf, sizeof buf);
    expect(contains(buf, "has not ended"), "report before end: %s", buf);
    expect(lc_scope_set_probes(s, 0) == LC_EINVAL &&
           lc_scope_set_probes(s, 1u << 31) == LC_EINVAL,
           "lc_scope_set_probes of no probe or an unknown bit: LC_EINVAL");
    expect(lc_scope_set_tolerance(s, LC_PROBE_FDS, -1) == LC_EINVAL &&
           lc_scope_set_tolerance(s, LC_PROBE_COUNT, 1) == LC_ENOPROBE,
           "lc_scope_set_tolerance of -1: LC_EINVAL; of a bad probe: "
           "LC_ENOPROBE");
    expect(lc_scope_begin(NULL) == LC_EINVAL && lc_scope_end(NULL) ==
           LC_EINVAL && lc_scope_leaked(NULL) == LC_EINVAL,
           "NULL scope: LC_EINVAL");

    expect(lc_scope_begin(s) == LC_OK, "lc_scope_begin");
    expect(lc_scope_begin(s) == LC_ESTATE, "lc_scope_begin twice: "
           "LC_ESTATE");
    expect(lc_scope_set_probes(s, LC_PROBES_NATIVE) == LC_ESTATE,
           "lc_scope_set_probes after begin: LC_ESTATE");
    expect(lc_scope_end(s) == LC_OK && lc_scope_end(s) == LC_ESTATE,
           "lc_scope_end, then again: LC_ESTATE");
    expect(lc_scope_leaked(s) == 0, "an empty scope is clean");
    expect(lc_scope_delta(s, LC_PROBE_OBJECTS, &d) == LC_EUNAVAIL &&
           lc_scope_delta(s, LC_PROBE_FDS, NULL) == LC_EINVAL,
           "delta of an unread probe: LC_EUNAVAIL; into NULL: LC_EINVAL");
    expect(lc_scope_probes(s) == lc_probes_available(),
           "the scope compared every available probe");
    lc_scope_free(s);
    lc_scope_free(NULL);
}

static void
test_series_misuse(void)
{
    lc_series *s;
    int64_t d;

    expect(lc_series_new("x", -1, 0) == NULL &&
           lc_series_new("x", 0, 0) == NULL &&
           lc_series_new("x", -1, 1) == NULL,
           "lc_series_new with warmup < 0 or repeat < 1: NULL");
    s = lc_series_new(NULL, 0, 2);
    expect(s != NULL, "lc_series_new(NULL, 0, 2)");
    expect(lc_series_leaked(s) == LC_ESTATE, "series verdict before the "
           "runs: LC_ESTATE");
    expect(lc_series_set_threshold(s, LC_PROBE_FDS, 0) == LC_EINVAL &&
           lc_series_set_threshold(s, -1, 1) == LC_ENOPROBE &&
           lc_series_set_probes(s, 0) == LC_EINVAL,
           "threshold 0, a bad probe, no probes: refused");
    expect(lc_series_next(NULL) == LC_EINVAL && lc_series_leaked(NULL) ==
           LC_EINVAL, "NULL series: LC_EINVAL");
    expect(lc_series_next(s) == 1, "lc_series_next asks for a run");
    expect(lc_series_set_threshold(s, LC_PROBE_FDS, 2) == LC_ESTATE &&
           lc_series_set_probes(s, LC_PROBES_NATIVE) == LC_ESTATE,
           "settings once the series runs: LC_ESTATE");
    expect(lc_series_delta(s, 0, LC_PROBE_FDS, &d) == LC_EINVAL,
           "delta of a run not measured yet: LC_EINVAL");
    while (lc_series_next(s) > 0)
        ;
    expect(lc_series_leaked(s) == 0 && lc_series_next(s) == 0,
           "an empty body is clean, and next stays 0 after the verdict");
    expect(lc_series_delta(s, 0, LC_PROBE_OBJECTS, &d) == LC_EUNAVAIL &&
           lc_series_delta(s, 5, LC_PROBE_FDS, &d) == LC_EINVAL,
           "delta of an unread probe: LC_EUNAVAIL; of a run out of range: "
           "LC_EINVAL");
    lc_series_free(s);

    {
        lc_snapshot *snap = lc_snapshot_new();
        int64_t v;
        expect(lc_snapshot_take(NULL, LC_PROBES_ALL, 0) == LC_EINVAL &&
               lc_snapshot_take(snap, 1u << 30, 0) == LC_EINVAL,
               "lc_snapshot_take of NULL or an unknown bit: LC_EINVAL");
        expect(lc_snapshot_take(snap, LC_PROBES_ALL, 0) == LC_OK &&
               lc_snapshot_probes(snap) == lc_probes_available() &&
               lc_snapshot_value(snap, LC_PROBE_FDS, &v) == LC_OK && v > 0 &&
               lc_snapshot_value(snap, LC_PROBE_REFS, &v) == LC_EUNAVAIL,
               "a snapshot reads what is available, nothing else");
        lc_snapshot_free(snap);
    }
    expect(lc_set_thread_settle_ms(-1) == LC_EINVAL &&
           lc_set_thread_settle_ms(200) == LC_OK,
           "lc_set_thread_settle_ms(-1): LC_EINVAL");
}

/* ---- early stop, tolerances, thresholds, reports ------------------------ */

static void
test_early_stop(void)
{
    lc_series *s = lc_series_new("clean", 3, 10);
    int body = 0;

    char buf[LC_REPORT_MAX];
    void *once = NULL;
    int64_t d;

    while (lc_series_next(s) > 0)
        body++;
    expect(body == 3 && lc_series_runs(s) == 1 && lc_series_leaked(s) == 0 &&
           lc_series_warmup_measured(s) == 1,
           "a clean series with warmup 3 stops after its warm-up runs, the "
           "last one measured (%d runs, %d measured)", body,
           lc_series_runs(s));
    lc_series_report(s, buf, sizeof buf);
    expect(contains(buf, "is clean") &&
           contains(buf, "its last warm-up run grew nothing"),
           "the report says the warm-up run was measured: %s", flat(buf));
    lc_series_free(s);

    /* Growth in the last warm-up run (a cache that fills once): that run
     * is not measured, and two measured runs follow (a leak every second
     * run would grow in the second). */
    body = 0;
    s = lc_series_new("fills_once", 1, 10);
    lc_series_set_probes(s, LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES));
    while (lc_series_next(s) > 0) {
        if (once == NULL)
            once = malloc(4096);
        body++;
    }
    expect(body == 3 && lc_series_runs(s) == 2 && lc_series_leaked(s) == 0 &&
           lc_series_warmup_measured(s) == 0 &&
           lc_series_delta(s, 0, LC_PROBE_NATIVE_BYTES, &d) == LC_OK &&
           d == 0,
           "growth in the warm-up run: two measured runs after it (%d runs, "
           "warm-up measured %d)", body, lc_series_warmup_measured(s));
    lc_series_free(s);

    /* A warm-up run that frees what was there could hide a leak of the
     * same size: it is not measured either. */
    body = 0;
    s = lc_series_new("frees_once", 1, 10);
    lc_series_set_probes(s, LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES));
    while (lc_series_next(s) > 0) {
        free(once);
        once = NULL;
        body++;
    }
    expect(body == 2 && lc_series_leaked(s) == 0 &&
           lc_series_warmup_measured(s) == 0,
           "a warm-up run that freed memory is not measured (%d runs)", body);
    lc_series_free(s);

    body = 0;
    s = lc_series_new("leaky", 2, 5);
    while (lc_series_next(s) > 0) {
        body++;
        lc_test_kept[n_kept++ % 64] = malloc(100);
    }
    /* native_bytes alone grows: 8 more runs confirm it. */
    expect(body == 7 + 8 && lc_series_runs(s) == 5 + 8 &&
           lc_series_confirm_runs(s) == 8 && lc_series_leaked(s) == 1 &&
           lc_series_leaking(s) == LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES),
           "a leaky series runs warmup + repeat = 7 times, and 8 that "
           "confirm it (%d)", body);
    lc_series_free(s);

    /* The macro stops as early as the API. */
    body = 0;
    lc_set_failure_handler(record, NULL);
    memset(&seen, 0, sizeof seen);
    LEAK_REPEAT(r, 2, 20) { body++; }
    lc_set_failure_handler(NULL, NULL);
    expect(body == 2 && seen.calls == 0,
           "a clean LEAK_REPEAT(2, 20) body runs its 2 warm-up runs (%d)",
           body);
}

static int
open_null(void)
{
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void
test_tolerances(void)
{
    lc_scope *s;
    int64_t d;
    int a, b;
    char buf[LC_REPORT_MAX];
    size_t need;

    /* fds are exact: two descriptors are a delta of exactly 2. */
    s = lc_scope_new("two_fds");
    lc_scope_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    lc_scope_set_tolerance(s, LC_PROBE_FDS, 2);
    lc_scope_begin(s);
    a = open_null();
    b = open_null();
    lc_scope_end(s);
    d = -1;
    lc_scope_delta(s, LC_PROBE_FDS, &d);
    expect(d == 2 && lc_scope_leaked(s) == 0 && lc_scope_tolerance(s, LC_PROBE_FDS)
           == 2, "fds +2 with tolerance 2: clean (delta %lld)",
           (long long)d);
    lc_scope_report(s, buf, sizeof buf);
    expect(contains(buf, "leakcheck: scope 'two_fds' is clean") &&
           contains(buf, "within tolerance: fds +2"),
           "clean report: %s", flat(buf));
    lc_scope_free(s);
    close(a);
    close(b);

    s = lc_scope_new("two_fds");
    lc_scope_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    lc_scope_set_tolerance(s, LC_PROBE_FDS, 1);
    lc_scope_set_location(s, "here.c", 42);
    lc_scope_begin(s);
    a = open_null();
    b = open_null();
    lc_scope_end(s);
    expect(lc_scope_leaked(s) == 1 &&
           lc_scope_leaking(s) == LC_PROBE_BIT(LC_PROBE_FDS),
           "fds +2 with tolerance 1: leaked");
    need = lc_scope_report(s, buf, sizeof buf);
    expect(contains(buf, "leakcheck: scope 'two_fds' leaked (at "
                         "here.c:42)") &&
           contains(buf, "fds") && contains(buf, "grew by +2 fds "
                                                 "(tolerance 1)"),
           "leak report names probe, delta, unit, tolerance, place: %s",
           flat(buf));
    expect(need == strlen(buf) && lc_scope_report(s, NULL, 0) == need,
           "lc_scope_report returns the length it needs (%zu)", need);
    {
        char small[8];
        size_t n = lc_scope_report(s, small, sizeof small);
        expect(n == need && strlen(small) == sizeof small - 1 &&
               strncmp(small, buf, sizeof small - 1) == 0,
               "a short buffer gets a NUL-terminated prefix, as snprintf");
    }
    lc_scope_free(s);
    close(a);
    close(b);

    /* A baseline is the measurement's own growth: subtracted before the
     * verdict, in the delta and in the report, either sign. */
    s = lc_scope_new("own_fd");
    lc_scope_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    lc_scope_begin(s);
    a = open_null();
    expect(lc_scope_set_baseline(s, LC_PROBE_FDS, 1) == LC_OK,
           "a baseline may be set while the scope is open");
    lc_scope_end(s);
    d = -1;
    lc_scope_delta(s, LC_PROBE_FDS, &d);
    expect(lc_scope_leaked(s) == 0 && d == 0,
           "fds +1 with baseline 1: clean, delta 0 (%lld)", (long long)d);
    expect(lc_scope_set_baseline(s, LC_PROBE_FDS, 0) == LC_ESTATE &&
           lc_scope_set_baseline(s, LC_PROBE_COUNT, 0) == LC_ENOPROBE,
           "no baseline after the end, nor for a probe that does not exist");
    lc_scope_free(s);
    close(a);

    s = lc_scope_new("borrowed");
    lc_scope_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    lc_scope_set_baseline(s, LC_PROBE_FDS, -2);
    lc_scope_begin(s);
    lc_scope_end(s);
    lc_scope_report(s, buf, sizeof buf);
    expect(lc_scope_leaked(s) == 1 && contains(buf, "grew by +2 fds"),
           "nothing opened with baseline -2: a leak of +2: %s", flat(buf));
    lc_scope_free(s);

    /* native_bytes: 64 KiB under a tolerance of 1 MiB. */
    s = lc_scope_new("big");
    lc_scope_set_tolerance(s, LC_PROBE_NATIVE_BYTES, 1 << 20);
    lc_scope_begin(s);
    leak_big();
    lc_scope_end(s);
    lc_scope_delta(s, LC_PROBE_NATIVE_BYTES, &d);
    expect(lc_scope_leaked(s) == 0 && d >= BIG_LEAK,
           "native_bytes +%lld with tolerance 1 MiB: clean", (long long)d);
    lc_scope_free(s);
}

static void
test_thresholds(void)
{
    lc_series *s;
    char buf[LC_REPORT_MAX];
    int64_t d;
    int run, exact = 1;

    /* One descriptor a run is below a threshold of 2. */
    s = lc_series_new("one_fd", 1, 3);
    lc_series_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    lc_series_set_threshold(s, LC_PROBE_FDS, 2);
    while (lc_series_next(s) > 0)
        open_null();
    expect(lc_series_leaked(s) == 0 && lc_series_threshold(s, LC_PROBE_FDS)
           == 2, "fds +1 a run with threshold 2: clean");
    lc_series_free(s);

    /* Two a run reach it. */
    s = lc_series_new("two_fds", 1, 3);
    lc_series_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    lc_series_set_threshold(s, LC_PROBE_FDS, 2);
    lc_series_set_location(s, "there.c", 7);
    while (lc_series_next(s) > 0) {
        open_null();
        open_null();
    }
    for (run = 0; run < lc_series_runs(s); run++)
        if (lc_series_delta(s, run, LC_PROBE_FDS, &d) != LC_OK || d != 2)
            exact = 0;
    expect(lc_series_leaked(s) == 1 && lc_series_runs(s) == 3 && exact,
           "fds +2 a run with threshold 2: leaked, every delta 2");
    lc_series_report(s, buf, sizeof buf);
    expect(contains(buf, "leakcheck: series 'two_fds' leaked (at there.c:7)"
                         ": 3 measured runs after 1 warm-up run") &&
           contains(buf, "fds          grew in every run: +2 +2 +2 fds "
                         "(threshold 2 per run)"),
           "series report lists every run's delta: %s", flat(buf));
    lc_series_free(s);

    /* native_bytes: 100 bytes a run against thresholds 1 and 1024. */
    s = lc_series_new("small", 1, 3);
    lc_series_set_threshold(s, LC_PROBE_NATIVE_BYTES, 1024);
    while (lc_series_next(s) > 0)
        lc_test_kept[n_kept++ % 64] = malloc(100);
    expect(lc_series_leaked(s) == 0, "native_bytes +~100 a run with "
           "threshold 1024: clean");
    lc_series_free(s);
}

int
main(void)
{
    test_strerror_and_version();
    test_probes();
    test_scope_misuse();
    test_series_misuse();
    test_early_stop();
    test_tolerances();
    test_thresholds();
    test_custom_handler();
    test_settings();
    test_default_handler();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
