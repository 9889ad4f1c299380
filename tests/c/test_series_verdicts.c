/*
 * test_series_verdicts.c — the series verdict on the cases of
 * tests/series_verdicts.txt, judged by lc_series_feed(): for each case its
 * verdict, its leaking probes and the measured runs it took, and the
 * confirming runs' verdict in its report.  tests/python/api/
 * test_series_verdicts.py judges the same table through leakcheck._core,
 * so both sides assert one rule.  One Check test per case (a loop test).
 */
#include <check.h>
#include <leakcheck.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CASES 64
#define MAX_VALUES 1024         /* deltas of one probe in one case        */
#define MAX_SETTINGS 8

typedef struct verdict_case {
    char name[64];
    int line;                   /* where the case starts in the table     */
    int warmup, repeat, thorough, confirm;
    lc_setting settings[MAX_SETTINGS + 1];   /* ended by LC_SET_END      */
    int n_settings;
    unsigned warm_read;         /* probes with a warm-up delta            */
    int64_t warm[LC_PROBE_COUNT];
    int count[LC_PROBE_COUNT];  /* measured deltas given per probe        */
    int64_t deltas[LC_PROBE_COUNT][MAX_VALUES];
    int expect_leak, expect_runs;
    unsigned expect_leaking;
} verdict_case;

static verdict_case cases[MAX_CASES];
static int n_cases;

/* Reading the table: a mistake in it stops the program with one line
 * naming the line. */
static const char *table_path;
static int table_line;

static void
table_error(const char *what, const char *token)
{
    fprintf(stderr, "%s:%d: %s%s%s\n", table_path, table_line, what,
            token ? ": " : "", token ? token : "");
    exit(1);
}

static int64_t
number(const char *token)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(token, &end, 10);
    if (errno != 0 || end == token || *end != '\0')
        table_error("not a number", token);
    return v;
}

static int
probe_named(const char *token)
{
    int p = token ? lc_probe_lookup(token) : LC_ENOPROBE;

    if (p < 0)
        table_error("no such probe", token);
    return p;
}

static int
int_after(const char *keyword, const char *word)
{
    char *token = strtok(NULL, " \t\n");

    if (token == NULL || strcmp(token, keyword) != 0)
        table_error("expected", keyword);
    token = strtok(NULL, " \t\n");
    if (token == NULL)
        table_error("a number is missing after", word);
    return (int)number(token);
}

/* "D" or "D*K" appended K times to probe p's deltas. */
static void
add_values(verdict_case *c, int p, const char *token)
{
    char copy[64], *star;
    int64_t value, times = 1;

    snprintf(copy, sizeof copy, "%s", token);
    star = strchr(copy, '*');
    if (star != NULL) {
        *star = '\0';
        times = number(star + 1);
    }
    value = number(copy);
    while (times-- > 0) {
        if (c->count[p] == MAX_VALUES)
            table_error("too many deltas", token);
        c->deltas[p][c->count[p]++] = value;
    }
}

static void
parse_deltas(verdict_case *c)
{
    int p = probe_named(strtok(NULL, " \t\n"));
    char *token;

    if (c->warmup > 0) {
        token = strtok(NULL, " \t\n");
        if (token == NULL)
            table_error("the warm-up run's delta is missing", NULL);
        c->warm[p] = number(token);
        c->warm_read |= LC_PROBE_BIT(p);
        token = strtok(NULL, " \t\n");
        if (token == NULL || strcmp(token, "|") != 0)
            table_error("expected | after the warm-up run's delta", token);
    }
    while ((token = strtok(NULL, " \t\n")) != NULL)
        add_values(c, p, token);
}

static void
parse_expect(verdict_case *c)
{
    char *token = strtok(NULL, " \t\n");

    if (token == NULL ||
        (strcmp(token, "leak") != 0 && strcmp(token, "clean") != 0))
        table_error("expect leak or clean", token);
    c->expect_leak = strcmp(token, "leak") == 0;
    while ((token = strtok(NULL, " \t\n")) != NULL &&
           strcmp(token, "runs") != 0)
        c->expect_leaking |= LC_PROBE_BIT(probe_named(token));
    token = token ? strtok(NULL, " \t\n") : NULL;
    if (token == NULL)
        table_error("expect ends with runs N", NULL);
    c->expect_runs = (int)number(token);
}

static void
parse_case(verdict_case *c)
{
    char *token = strtok(NULL, " \t\n");

    if (token == NULL)
        table_error("a case needs a name", NULL);
    snprintf(c->name, sizeof c->name, "%s", token);
    c->line = table_line;
    c->confirm = 1;
    c->warmup = int_after("warmup", token);
    c->repeat = int_after("repeat", token);
    while ((token = strtok(NULL, " \t\n")) != NULL) {
        if (strcmp(token, "thorough") == 0)
            c->thorough = 1;
        else if (strcmp(token, "noconfirm") == 0)
            c->confirm = 0;
        else
            table_error("unknown flag", token);
    }
}

static void
parse_setting(verdict_case *c, int what)
{
    lc_setting *set;

    if (c->n_settings == MAX_SETTINGS)
        table_error("too many settings", NULL);
    set = &c->settings[c->n_settings++];
    set->what = what;
    set->probe = probe_named(strtok(NULL, " \t\n"));
    set->value = number(strtok(NULL, " \t\n") ? : "");
}

static void
read_table(void)
{
    const char *srcdir = getenv("top_srcdir");
    static char path[4096];
    char line[8192];
    verdict_case *c = NULL;
    FILE *f;

    snprintf(path, sizeof path, "%s/tests/series_verdicts.txt",
             srcdir ? srcdir : ".");
    table_path = path;
    f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        exit(1);
    }
    while (fgets(line, sizeof line, f) != NULL) {
        char *word = strtok(line, " \t\n");
        table_line++;
        if (word == NULL || word[0] == '#')
            continue;
        if (strcmp(word, "case") == 0) {
            if (n_cases == MAX_CASES)
                table_error("too many cases", NULL);
            c = &cases[n_cases++];
            parse_case(c);
        } else if (c == NULL) {
            table_error("expected a case first", word);
        } else if (strcmp(word, "deltas") == 0) {
            parse_deltas(c);
        } else if (strcmp(word, "tolerance") == 0) {
            parse_setting(c, LC_SET_TOLERANCE);
        } else if (strcmp(word, "threshold") == 0) {
            parse_setting(c, LC_SET_THRESHOLD);
        } else if (strcmp(word, "expect") == 0) {
            parse_expect(c);
        } else {
            table_error("unknown line", word);
        }
    }
    fclose(f);
}

/* Feeds a case to the engine's series, run by run. */
START_TEST(judged_as_the_table_says)
{
    const verdict_case *c = &cases[_i];
    int64_t row[LC_PROBE_COUNT];
    char refused[160], report[LC_REPORT_MAX];
    lc_series *s = lc_series_new(c->name, c->warmup, c->repeat);
    int run = 0, rc, p, confirmed;
    unsigned read;

    ck_assert_msg(s != NULL, "%s: lc_series_new", c->name);
    ck_assert_int_eq(lc_series_set_thorough(s, c->thorough), LC_OK);
    ck_assert_int_eq(lc_series_set_confirm(s, c->confirm), LC_OK);
    ck_assert_msg(lc_series_apply(s, c->settings, refused,
                                  sizeof refused) == LC_OK,
                  "%s: %s", c->name, refused);
    rc = c->warmup > 0 ? lc_series_feed(s, c->warm_read, c->warm) : 1;
    while (rc == 1) {
        read = 0;
        for (p = 0; p < LC_PROBE_COUNT; p++) {
            if (run < c->count[p]) {
                row[p] = c->deltas[p][run];
                read |= LC_PROBE_BIT(p);
            }
        }
        ck_assert_msg(read != 0, "%s (line %d): the table gives %d runs; "
                      "the series wants more", c->name, c->line, run);
        rc = lc_series_feed(s, read, row);
        run++;
    }
    ck_assert_msg(rc == 0, "%s: lc_series_feed: %s", c->name,
                  lc_strerror(rc));
    lc_series_report(s, report, sizeof report);
    ck_assert_msg(lc_series_leaked(s) == c->expect_leak &&
                  lc_series_leaking(s) == c->expect_leaking &&
                  lc_series_runs(s) == c->expect_runs,
                  "%s (line %d): leaked %d, leaking 0x%x, %d runs; the "
                  "table says %d, 0x%x, %d runs\n%s", c->name, c->line,
                  lc_series_leaked(s), lc_series_leaking(s),
                  lc_series_runs(s), c->expect_leak, c->expect_leaking,
                  c->expect_runs, report);
    /* The report gives the confirming runs' verdict. */
    confirmed = strstr(report, "  confirmed over 8 more runs\n") != NULL;
    if (lc_series_confirm_runs(s) > 0)
        ck_assert_msg(confirmed == c->expect_leak &&
                      (strstr(report, "  not confirmed over 8 more runs "
                                      "(growth in each half of them "
                                      "needed): clean\n") != NULL) ==
                          !c->expect_leak,
                      "%s: the report says %s\n%s", c->name,
                      confirmed ? "confirmed" : "not confirmed", report);
    else
        ck_assert_msg(strstr(report, "confirmed over") == NULL,
                      "%s: no confirming run, yet\n%s", c->name, report);
    lc_series_free(s);
}
END_TEST

int
main(void)
{
    Suite *suite = suite_create("series_verdicts");
    TCase *tc = tcase_create("table");
    SRunner *runner;
    int failed;

    read_table();
    if (n_cases == 0) {
        fprintf(stderr, "%s: no case\n", table_path);
        return 1;
    }
    tcase_add_loop_test(tc, judged_as_the_table_says, 0, n_cases);
    suite_add_tcase(suite, tc);
    runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    printf("%d cases from %s\n", n_cases, table_path);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
