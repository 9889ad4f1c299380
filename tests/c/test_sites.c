/*
 * test_sites.c — the allocating lines in the failure message of a scope or
 * series: a block leaked through a helper function, through strdup, and
 * through calloc in a LEAK_REPEAT must fail with a message naming
 * test_sites.c:LINE and the function of each allocation (the line marked
 * "site:" below), and nothing else, their clean twins must pass; and
 * where blocks are also allocated and freed from another thread, a signal
 * handler or a forked child while they are recorded, a name kept must be
 * the one site named.  Run in both fork modes.
 *
 * LC_SITES_EXPECT says what the messages must hold: `lines` (the tracer
 * preloaded, or a sanitizer build), `hint` (neither: one line naming the
 * tracer to preload, by a path that exists), `memcheck` (under valgrind:
 * one line sending to memcheck's loss records) or `refused` (the tracer
 * preloaded where the program has a malloc of its own: one line saying
 * that it cannot record).  run-sites.sh runs it.
 */
#include <check.h>
#include <leakcheck.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Kept reachable from non-static globals, so that no malloc is dropped; one
 * for each leaking test, so that none is lost later (under valgrind, a
 * block lost in a later test would be that test's leak). */
struct node { struct node *next; char pad[40]; };
void *lc_test_kept_record, *lc_test_kept_name, *lc_test_kept_at_exit;
void *lc_test_kept_extra[4];
struct node *lc_test_list;
void *volatile lc_test_sink;

static __attribute__((noinline)) void *
make_record(size_t size)
{
    void *p = malloc(size);                     /* site:make_record */

    if (p != NULL)
        memset(p, 0x5a, size);
    return p;
}

START_TEST(leak_helper)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_record = make_record(200);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_helper)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_sink = make_record(200);
    free(lc_test_sink);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_strdup)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_name = strdup("kept name"); /* site:leak_strdup_fn */
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_strdup)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_sink = strdup("kept name");
    free(lc_test_sink);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_repeat_calloc)
{
    LEAK_REPEAT(r, 1, 3) {
        struct node *n = calloc(1, sizeof *n); /* site:leak_repeat_calloc_fn */
        n->next = lc_test_list;
        lc_test_list = n;
    }
}
END_TEST

START_TEST(clean_repeat_calloc)
{
    LEAK_REPEAT(r, 1, 3) {
        struct node *n = calloc(1, sizeof *n);
        n->next = lc_test_list;
        lc_test_list = n;
        lc_test_list = n->next;
        free(n);
    }
}
END_TEST

/* posix_memalign and aligned_alloc are recorded as malloc is. */
void *lc_test_kept_aligned, *lc_test_kept_aligned2;

START_TEST(leak_aligned)
{
    LEAK_SCOPE_BEGIN(s);
    ck_assert_int_eq(posix_memalign(&lc_test_kept_aligned, 64, 256), 0);
    lc_test_kept_aligned2 = aligned_alloc(64, 128); /* site:leak_aligned_fn */
    LEAK_SCOPE_END(s);
}
END_TEST

/* Allocated in code without debug information (sites_nodebug.c). */
void *lc_test_nodebug_alloc(size_t size);
void *lc_test_kept_nodebug;

START_TEST(leak_nodebug)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_nodebug = lc_test_nodebug_alloc(72);
    LEAK_SCOPE_END(s);
}
END_TEST

/* Seven sites: the message lists five, most bytes first, and the rest in
 * one line. */
void *lc_test_kept_seven[7];

START_TEST(leak_seven_sites)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_kept_seven[0] = malloc(100);        /* site:seven7 */
    lc_test_kept_seven[1] = malloc(700);        /* site:seven1 */
    lc_test_kept_seven[2] = malloc(300);        /* site:seven5 */
    lc_test_kept_seven[3] = malloc(600);        /* site:seven2 */
    lc_test_kept_seven[4] = malloc(200);        /* site:seven6 */
    lc_test_kept_seven[5] = malloc(500);        /* site:seven3 */
    lc_test_kept_seven[6] = malloc(400);        /* site:seven4 */
    LEAK_SCOPE_END(s);
}
END_TEST

static void *
free_it(void *p)
{
    free(p);
    return NULL;
}

/* A block allocated while recording and freed by another thread is gone:
 * the one site is the name kept. */
START_TEST(leak_freed_by_other_thread)
{
    pthread_t t;

    LEAK_SCOPE_BEGIN(s);
    lc_test_sink = make_record(64);
    ck_assert_int_eq(pthread_create(&t, NULL, free_it, lc_test_sink), 0);
    pthread_join(t, NULL);
    lc_test_kept_extra[0] =
        strdup("kept name"); /* site:leak_freed_by_other_thread_fn */
    LEAK_SCOPE_END(s);
}
END_TEST

/* The timer's handler does not allocate: one that interrupted glibc's
 * malloc could deadlock glibc itself.  It interrupts the tracer, though,
 * in the middle of recording or forgetting a block. */
static void
on_alarm(int sig)
{
    (void)sig;
    lc_test_sink = NULL;
}

/* Raised from the scope's own code: allocates and frees a block, and frees
 * the one the scope allocated. */
static void
on_usr1(int sig)
{
    void *p = malloc(80);

    (void)sig;
    free(p);
    free(lc_test_sink);
    lc_test_sink = NULL;
}

START_TEST(leak_signal_handler)
{
    signal(SIGUSR1, on_usr1);
    LEAK_SCOPE_BEGIN(s);
    lc_test_sink = make_record(48);
    raise(SIGUSR1);
    lc_test_kept_extra[1] =
        strdup("kept name"); /* site:leak_signal_handler_fn */
    LEAK_SCOPE_END(s);
    signal(SIGUSR1, SIG_DFL);
}
END_TEST

static void *
churn(void *arg)
{
    int i;

    (void)arg;
    for (i = 0; i < 20000; i++) {
        void *p = malloc(16 + (size_t)(i % 512));
        lc_test_sink = p;
        free(p);
    }
    return NULL;
}

/* Two threads allocating and freeing while a timer's signal interrupts
 * them: no deadlock, and the one site is the name kept. */
START_TEST(leak_threads_and_signals)
{
    struct itimerval every = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    pthread_t t;

    signal(SIGALRM, on_alarm);
    LEAK_SCOPE_BEGIN(s);
    setitimer(ITIMER_REAL, &every, NULL);
    ck_assert_int_eq(pthread_create(&t, NULL, churn, NULL), 0);
    churn(NULL);
    pthread_join(t, NULL);
    setitimer(ITIMER_REAL, &off, NULL);
    lc_test_kept_extra[2] =
        strdup("kept name"); /* site:leak_threads_and_signals_fn */
    LEAK_SCOPE_END(s);
    signal(SIGALRM, SIG_DFL);
}
END_TEST

/* A child forked inside a recording scope allocates and exits; in the
 * parent the one site is the name kept. */
START_TEST(leak_fork_inside)
{
    pid_t pid;
    int status = 0;

    LEAK_SCOPE_BEGIN(s);
    pid = fork();
    if (pid == 0) {
        void *p = make_record(100);
        _exit(p != NULL ? 0 : 3);
    }
    ck_assert_int_gt(pid, 0);
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    lc_test_kept_extra[3] =
        strdup("kept name"); /* site:leak_fork_inside_fn */
    LEAK_SCOPE_END(s);
}
END_TEST

static Suite *
sites_suite(void)
{
    const TTest *const tests[] = {
        leak_helper, clean_helper, leak_strdup, clean_strdup,
        leak_repeat_calloc, clean_repeat_calloc, leak_freed_by_other_thread,
        leak_threads_and_signals, leak_signal_handler, leak_fork_inside,
        leak_seven_sites, leak_aligned, leak_nodebug,
    };
    Suite *suite = suite_create("sites");
    size_t i;

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        TCase *tc = tcase_create(tests[i]->name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(suite, tc);
    }
    return suite;
}

/* The line of this file that holds "site:<func> ". */
static int
site_line(const char *func)
{
    char mark[128];

    snprintf(mark, sizeof mark, "site:%s ", func);
    return harness_source_line("test_sites.c", mark);
}

/* What a leak's message must say: the site (lines) or the hint. */
static void
judge_leak(const char *mode, const char *name, const char *msg,
           const char *func, long bytes, int blocks, int lines)
{
    char want[256];
    int ok;

    if (lines == 2 || lines == 3) {
        const char *line = lines == 2
            ? "  allocating lines: in memcheck's loss records, printed to "
              "valgrind's output"
            : "  allocating lines: another malloc than the tracer's serves "
              "this process";
        ok = strstr(msg, line) != NULL &&
             strstr(msg, "    test_sites.c:") == NULL;
        harness_expect(ok, "%s %s: the message says, in one line, %s", mode,
                       name, lines == 2 ? "that memcheck's loss records "
                                          "name the lines"
                                        : "that the tracer cannot record");
        if (!ok)
            printf("     | %s\n", msg);
        return;
    }
    if (!lines) {
        const char *p = strstr(msg, "allocating lines: run again with "
                                    "LD_PRELOAD=/");
        char path[4096];
        ok = p != NULL &&
                 sscanf(strchr(p, '=') + 1, "%4095s", path) == 1 &&
                 strstr(path, "/libleakcheck-trace.so") != NULL &&
                 access(path, R_OK) == 0;
        harness_expect(ok, "%s %s: the message names the tracer to preload "
                       "by a path that exists", mode, name);
        if (!ok)
            printf("     | %s\n", msg);
        return;
    }
    snprintf(want, sizeof want, "    test_sites.c:%d %s(): %ld bytes in %d "
             "block%s\n", site_line(func), func, bytes, blocks,
             blocks == 1 ? "" : "s");
    ok = strstr(msg, want) != NULL &&
         harness_count(msg, "    test_sites.c:") == 1 &&
         strstr(msg, "more site") == NULL;
    harness_expect(ok,
                   "%s %s: the message names the allocating line, and only "
                   "it: %.*s", mode, name, (int)strcspn(want + 4, "\n"),
                   want + 4);
    if (!ok)
        printf("     | %s\n", msg);
}

/* The seven sites: the five biggest in order, then "and 2 more sites". */
static void
judge_seven(const char *mode, const char *msg)
{
    const char *p = msg;
    char want[256], mark[16];
    int k, ok = 1;

    for (k = 1; k <= 5 && ok; k++) {
        snprintf(mark, sizeof mark, "seven%d", k);
        snprintf(want, sizeof want, "    test_sites.c:%d leak_seven_sites_fn"
                 "(): %d bytes in 1 block\n", site_line(mark),
                 100 * (8 - k));
        p = strstr(p, want);
        ok = p != NULL;
    }
    ok = ok && strstr(p, "\n    and 2 more sites: 300 bytes in 2 blocks\n");
    harness_expect(ok, "%s leak_seven_sites: five sites listed, most bytes "
                   "first, and 2 more in one line", mode);
    if (!ok)
        printf("     | %s\n", msg);
}

/* posix_memalign's block, then aligned_alloc's, on lines of their own. */
static void
judge_aligned(const char *mode, const char *msg)
{
    char want[256];
    const char *p;
    int line = site_line("leak_aligned_fn");

    snprintf(want, sizeof want, "    test_sites.c:%d leak_aligned_fn(): 256 "
             "bytes in 1 block\n    test_sites.c:%d leak_aligned_fn(): 128 "
             "bytes in 1 block\n", line - 1, line);
    p = strstr(msg, want);
    harness_expect(p != NULL && harness_count(msg, "    test_sites.c:") == 2,
                   "%s leak_aligned: posix_memalign's and aligned_alloc's "
                   "lines, and only them", mode);
    if (p == NULL)
        printf("     | %s\n", msg);
}

/* No debug information: function and object, and the line about -g. */
static void
judge_nodebug(const char *mode, const char *msg)
{
    int ok = strstr(msg, "    lc_test_nodebug_alloc() in test_sites: 72 "
                         "bytes in 1 block\n") != NULL &&
             strstr(msg, "compile it with -g") != NULL;

    harness_expect(ok, "%s leak_nodebug: function and object, and that -g "
                   "gives lines", mode);
    if (!ok)
        printf("     | %s\n", msg);
}

static void
run_mode(enum fork_status fork_mode, const char *mode, int lines)
{
    SRunner *sr = srunner_create(sites_suite());
    TestResult **results;
    int n, i;

    srunner_set_fork_status(sr, fork_mode);
    fflush(stdout);
    srunner_run_all(sr, CK_SILENT);
    n = srunner_ntests_run(sr);
    results = srunner_results(sr);
    for (i = 0; i < n; i++) {
        const char *name = tr_tcname(results[i]);
        const char *msg = tr_msg(results[i]) ? tr_msg(results[i]) : "";
        int failed = tr_rtype(results[i]) == CK_FAILURE &&
                     strncmp(msg, "leakcheck:", 10) == 0;

        if (strncmp(name, "clean_", 6) == 0) {
            harness_expect(tr_rtype(results[i]) == CK_PASS, "%s %s passes",
                           mode, name);
            if (tr_rtype(results[i]) != CK_PASS)
                printf("     | %s\n", msg);
            continue;
        }
        harness_expect(failed, "%s %s fails through leakcheck", mode, name);
        if (!failed)
            printf("     | %s\n", msg);
        else if (strcmp(name, "leak_helper") == 0)
            judge_leak(mode, name, msg, "make_record", 200, 1, lines);
        else if (strcmp(name, "leak_strdup") == 0)
            judge_leak(mode, name, msg, "leak_strdup_fn",
                       (long)sizeof "kept name", 1, lines);
        else if (lines == 1 && strcmp(name, "leak_seven_sites") == 0)
            judge_seven(mode, msg);
        else if (lines == 1 && strcmp(name, "leak_aligned") == 0)
            judge_aligned(mode, msg);
        else if (lines == 1 && strcmp(name, "leak_nodebug") == 0)
            judge_nodebug(mode, msg);
        else if (lines != 1 && strncmp(name, "leak_", 5) == 0)
            judge_leak(mode, name, msg, NULL, 0, 0, lines);
        else if (strcmp(name, "leak_repeat_calloc") == 0)
            /* Three measured runs, and 8 that confirm a leak of
             * native_bytes alone: a block each. */
            judge_leak(mode, name, msg, "leak_repeat_calloc_fn",
                       (3 + 8) * (long)sizeof(struct node), 3 + 8, lines);
        else {
            char func[128];
            snprintf(func, sizeof func, "%s_fn", name);
            judge_leak(mode, name, msg, func, (long)sizeof "kept name", 1,
                       lines);
        }
    }
    harness_expect(n == 13, "%s: all 13 tests ran (%d)", mode, n);
    free(results);
    srunner_free(sr);
}

/* A process that ends with a scope still recording ends normally. */
static void
expect_open_scope_at_exit(void)
{
    int status = -1;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        LEAK_SCOPE_BEGIN(s);
        lc_test_kept_at_exit = make_record(32);
        (void)s;
        exit(0);
    }
    waitpid(pid, &status, 0);
    harness_expect(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                   "a process that exits with a scope open exits normally "
                   "(status %#x)", status);
}

int
main(void)
{
    const char *expect = getenv("LC_SITES_EXPECT");
    int lines;

    /* What judge_leak() expects: 0 hint, 1 lines, 2 memcheck, 3 refused. */
    static const char *const modes[] = {"hint", "lines", "memcheck",
                                        "refused"};

    for (lines = 0; lines < 4; lines++)
        if (expect != NULL && strcmp(expect, modes[lines]) == 0)
            break;
    if (lines == 4) {
        harness_expect(0, "LC_SITES_EXPECT is hint, lines, memcheck or "
                       "refused (run through run-sites.sh)");
        return harness_run(NULL, 0);
    }
    expect_open_scope_at_exit();
    run_mode(CK_FORK, "CK_FORK", lines);
    run_mode(CK_NOFORK, "CK_NOFORK", lines);
    return harness_run(NULL, 0);
}
