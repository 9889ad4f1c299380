/*
 * test_series_rule.c — the series verdict on growth patterns that are not
 * "every run or never", judged on the fds probe (exact: a descriptor open
 * is +1, a close -1): a leak every run, every second and third run, a
 * leak that skips the warm-up run, growth kept and freed back and forth,
 * growth that dies out in shrinking steps, a cache that fills for a
 * bounded number of runs, in the default and the thorough mode.
 *
 * Prints one line per check and "N passed, N failed" last; exits 0 only
 * when every check held.
 */
#include <leakcheck.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* Descriptors the bodies keep, closed between cases. */
#define KEPT_MAX 1024
static int kept[KEPT_MAX];
static int n_kept;

static void
keep(int n)
{
    while (n-- > 0 && n_kept < KEPT_MAX)
        kept[n_kept++] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void
drop(int n)
{
    while (n-- > 0 && n_kept > 0)
        close(kept[--n_kept]);
}

static void
drop_all(void)
{
    drop(n_kept);
}

/* How many descriptors body run `i` (0 = the first warm-up run) opens; a
 * negative count closes that many. */
typedef int (*pattern_fn)(int i);

typedef struct {
    int body_runs, runs, main_runs, leaked, warmup_measured;
    int warm_rc;                /* lc_series_warmup_delta()'s, for fds */
    int64_t warm;               /* the delta it gave */
    char report[LC_REPORT_MAX];
} outcome;

static outcome
run(const char *name, int warmup, int repeat, int thorough, pattern_fn f)
{
    outcome o;
    lc_series *s = lc_series_new(name, warmup, repeat);
    int n;

    memset(&o, 0, sizeof o);
    lc_series_set_probes(s, LC_PROBE_BIT(LC_PROBE_FDS));
    if (thorough)
        lc_series_set_thorough(s, 1);
    while (lc_series_next(s) > 0) {
        n = f(o.body_runs++);
        if (n > 0)
            keep(n);
        else
            drop(-n);
    }
    o.runs = lc_series_runs(s);
    o.main_runs = lc_series_main_runs(s);
    o.leaked = lc_series_leaked(s);
    o.warmup_measured = lc_series_warmup_measured(s);
    o.warm_rc = lc_series_warmup_delta(s, LC_PROBE_FDS, &o.warm);
    lc_series_report(s, o.report, sizeof o.report);
    lc_series_free(s);
    drop_all();
    return o;
}

static int every_run(int i) { (void)i; return 1; }
static int every_second(int i) { return i % 2 == 0; }
static int every_second_late(int i) { return i % 2 == 1; }
static int every_third(int i) { return i % 3 == 0; }
static int every_third_late(int i) { return i % 3 == 2; }
static int back_and_forth(int i) { return i % 2 == 0 ? 1 : -1; }
static int nothing(int i) { (void)i; return 0; }
static int first_only(int i) { return i == 0; }

/* 64, 32, 16, ... 1, then nothing: a cache that fills in halving steps. */
static int
dies_out(int i)
{
    return i < 7 ? 64 >> i : 0;
}

/* One descriptor a run for the first 40 runs, then none: a cache bounded
 * at 40 entries, filled one a run. */
static int
bounded_40(int i)
{
    return i < 40;
}

/* Halving steps that settle on one a run: a real leak under a cache that
 * fills. */
static int
dies_to_a_leak(int i)
{
    return i < 6 ? 64 >> i : 1;
}

static void
test_default_mode(void)
{
    outcome o;

    o = run("every_run", 1, 4, 0, every_run);
    expect(o.leaked == 1 && o.runs == 4 && o.body_runs == 5 &&
           strstr(o.report, "fds          grew in every run: +1 +1 +1 +1"),
           "a leak every run: 4 measured runs, a leak (%d runs) %s", o.runs,
           o.report);

    o = run("every_second", 1, 4, 0, every_second);
    expect(o.leaked == 1 && o.runs <= 8 &&
           strstr(o.report, "grew to a new high in 4 of"),
           "a leak every second run (warm-up run included) is a leak in %d "
           "runs: %s", o.runs, o.report);

    o = run("every_third", 1, 4, 0, every_third);
    expect(o.leaked == 0,
           "default mode (window 2): a leak every third run is left to the "
           "thorough mode (%d runs)", o.runs);

    o = run("every_second_late", 1, 4, 0, every_second_late);
    expect(o.leaked == 0 && o.warmup_measured == 1 && o.body_runs == 1,
           "default mode: a leak that skips the warm-up run ends the series "
           "there (%d body runs)", o.body_runs);

    o = run("back_and_forth", 1, 4, 0, back_and_forth);
    expect(o.leaked == 0 && o.runs <= 4,
           "kept one run, freed the next: no leak (%d runs)", o.runs);

    o = run("nothing", 1, 4, 0, nothing);
    expect(o.leaked == 0 && o.body_runs == 1 && o.warmup_measured == 1,
           "a clean body costs its warm-up run alone (%d)", o.body_runs);
    expect(o.warm_rc == LC_OK && o.warm == 0,
           "its warm-up run reads as nothing (rc %d, %lld)", o.warm_rc,
           (long long)o.warm);

    o = run("first_only", 1, 4, 0, first_only);
    expect(o.leaked == 0 && o.body_runs == 3 && o.runs == 2,
           "growth in the warm-up run alone: two measured runs follow, a "
           "leak every second run would have grown in one (%d body runs)",
           o.body_runs);
    expect(o.warm_rc == LC_OK && o.warm == 1,
           "the warm-up delta says what made them due: fds %+lld (rc %d)",
           (long long)o.warm, o.warm_rc);

    o = run("first_only_no_warmup", 0, 4, 0, first_only);
    expect(o.warm_rc == LC_EUNAVAIL,
           "no warm-up run, none read (rc %d)", o.warm_rc);

    o = run("dies_out", 1, 4, 0, dies_out);
    expect(o.leaked == 0 && o.main_runs == 4 && o.runs > 4 &&
           strstr(o.report, "growth that dies out, no leak"),
           "growth in halving steps runs on until it stops: no leak (%d + %d "
           "runs) %s", o.main_runs, o.runs - o.main_runs, o.report);

    o = run("dies_to_a_leak", 1, 4, 0, dies_to_a_leak);
    expect(o.leaked == 1 && o.runs == 4 + 32 &&
           strstr(o.report, "grew in every run: +32 +16 +8 +4 fds") &&
           strstr(o.report, "still growing over 32 more runs (+33 fds)"),
           "halving steps that settle on one a run: runs on, and leaks (%d "
           "runs) %s", o.runs, o.report);

    o = run("bounded_40", 1, 4, 0, bounded_40);
    expect(o.leaked == 1 && o.runs == 4,
           "default mode: a cache that fills one entry a run for 40 runs "
           "looks like a leak (%d runs)", o.runs);
}

static void
test_thorough_mode(void)
{
    outcome o;

    o = run("thorough_nothing", 1, 4, 1, nothing);
    expect(o.leaked == 0 && o.body_runs == 3 && o.warmup_measured == 0,
           "thorough: a clean body costs two runs more than its warm-up run "
           "(%d body runs)", o.body_runs);

    o = run("thorough_every_third", 1, 4, 1, every_third);
    expect(o.leaked == 1 && strstr(o.report, "(thorough)"),
           "thorough (window 3): a leak every third run is a leak (%d runs) "
           "%s", o.runs, o.report);

    o = run("thorough_every_third_late", 1, 4, 1, every_third_late);
    expect(o.leaked == 1,
           "thorough: a leak every third run that skips the warm-up run is a "
           "leak (%d runs)", o.runs);

    o = run("thorough_every_second_late", 1, 4, 1, every_second_late);
    expect(o.leaked == 1,
           "thorough: a leak every second run that skips the warm-up run is "
           "a leak (%d runs)", o.runs);

    o = run("thorough_bounded_40", 1, 4, 1, bounded_40);
    expect(o.leaked == 0 && o.runs > 30 && o.runs < 4 + 512,
           "thorough: a cache that fills for 40 runs runs on until it stops: "
           "no leak (%d runs) %s", o.runs, o.report);

    o = run("thorough_every_run", 1, 4, 1, every_run);
    expect(o.leaked == 1 && o.runs == 4 + 512,
           "thorough: a leak every run is confirmed over 512 more runs (%d)",
           o.runs);

    o = run("thorough_back_and_forth", 1, 4, 1, back_and_forth);
    expect(o.leaked == 0, "thorough: back and forth is no leak (%d runs)",
           o.runs);
}

static void
test_settings(void)
{
    lc_series *s = lc_series_new("w", 1, 4);

    expect(lc_series_window(s) == 2 && lc_series_thorough(s) == 0,
           "the default window is 2, thorough off");
    expect(lc_series_set_window(s, 0) == LC_EINVAL &&
           lc_series_set_window(s, 9) == LC_EINVAL &&
           lc_series_set_window(NULL, 2) == LC_EINVAL,
           "a window from 1 to 8 only");
    expect(lc_series_set_window(s, 1) == LC_OK && lc_series_window(s) == 1,
           "window 1: every run must grow");
    expect(lc_series_set_thorough(s, 1) == LC_OK &&
           lc_series_window(s) == 3 && lc_series_thorough(s) == 1,
           "thorough sets window 3");
    lc_series_next(s);
    expect(lc_series_set_window(s, 2) == LC_ESTATE &&
           lc_series_set_thorough(s, 0) == LC_ESTATE,
           "window and thorough are refused once the series started");
    lc_series_free(s);
    expect(lc_series_new("big", 1, 10001) == NULL,
           "repeat above 10000 is refused");
}

int
main(void)
{
    test_default_mode();
    test_thorough_mode();
    test_settings();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
