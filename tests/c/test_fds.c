/*
 * test_fds.c — a scope or series whose fds probe leaked names each new
 * descriptor by number and by what /proc/self/fd says it is: a leaked file
 * by its path, a leaked pipe's two ends as pipe:[inode], a leaked socket
 * as socket:[inode].  Descriptors open before the scope began (or before a
 * series' measured runs) are not listed.  Real Check tests, run with
 * CK_FORK and with CK_NOFORK; each failure's message is read back.
 */
#define _GNU_SOURCE
#include <check.h>
#include <leakcheck.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FDS LC_PROBE_BIT(LC_PROBE_FDS)

static char path[64];           /* the file the tests leak                */
static int before_fd = -1;      /* open before every scope: never listed  */

START_TEST(scope_file_and_pipe)
{
    int p[2];

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    ck_assert_int_ge(open(path, O_RDONLY), 0);
    ck_assert_int_eq(pipe(p), 0);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(scope_socket)
{
    int sv[2];

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(repeat_file)
{
    LEAK_REPEAT_WITH(r, 1, 3, LC_PROBES(FDS))
        ck_assert_int_ge(open(path, O_RDONLY), 0);
}
END_TEST

START_TEST(scope_clean)
{
    int p[2];

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    ck_assert_int_eq(pipe(p), 0);
    close(p[0]);
    close(p[1]);
    LEAK_SCOPE_END(s);
}
END_TEST

static Suite *
make_suite(void)
{
    Suite *s = suite_create("fds");
    const TTest *tests[] = {scope_file_and_pipe, scope_socket, repeat_file,
                            scope_clean};
    size_t i;

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        TCase *tc = tcase_create(tests[i]->name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

/* How many report lines "    fd N -> <what>..." name a descriptor
 * pointing to `what`, and whether one names `fd`. */
static int
named(const char *msg, const char *what, int fd, int *names_fd)
{
    const char *p = msg;
    int n = 0;

    *names_fd = 0;
    while ((p = strstr(p, "\n    fd ")) != NULL) {
        char *end;
        long num = strtol(p + 8, &end, 10);

        p += 8;
        if (strncmp(end, " -> ", 4) != 0)
            continue;
        if (num == fd)
            *names_fd = 1;
        if (strncmp(end + 4, what, strlen(what)) == 0)
            n++;
    }
    return n;
}

static int
judge(TestResult *tr, const char *mode)
{
    const char *name = tr_tcname(tr) ? tr_tcname(tr) : "?";
    const char *msg = tr_msg(tr) ? tr_msg(tr) : "";
    int ok, old, files, pipes, sockets, leaks = strcmp(name, "scope_clean");

    files = named(msg, path, -1, &old);
    pipes = named(msg, "pipe:[", before_fd, &old);
    sockets = named(msg, "socket:[", -1, &old);
    if (!leaks)
        ok = tr_rtype(tr) == CK_PASS;
    else if (tr_rtype(tr) != CK_FAILURE ||
             strstr(msg, "fds          grew") == NULL || old)
        ok = 0;
    else if (strcmp(name, "scope_file_and_pipe") == 0)
        ok = files == 1 && pipes == 2 && sockets == 0;
    else if (strcmp(name, "scope_socket") == 0)
        ok = files == 0 && pipes == 0 && sockets == 1;
    else    /* three measured runs, one file each; not the warm-up's */
        ok = files == 3 && pipes == 0 && sockets == 0;
    printf("%s %-9s %s: %s\n", ok ? "ok  " : "FAIL", mode, name,
           leaks ? "" : ok ? "passed" : "expected a pass");
    if (leaks || !ok) {
        const char *p = msg;
        while (*p) {
            int len = (int)strcspn(p, "\n");
            printf("     | %.*s\n", len, p);
            p += len + (p[len] == '\n');
        }
    }
    return ok;
}

static int
run(enum fork_status fork, const char *mode)
{
    SRunner *sr = srunner_create(make_suite());
    TestResult **results;
    int n, i, bad = 0;

    srunner_set_fork_status(sr, fork);
    fflush(stdout);
    srunner_run_all(sr, CK_SILENT);
    n = srunner_ntests_run(sr);
    results = srunner_results(sr);
    for (i = 0; i < n; i++)
        bad += !judge(results[i], mode);
    if (n != 4) {
        printf("FAIL %-9s ran %d tests, not 4\n", mode, n);
        bad++;
    }
    free(results);
    srunner_free(sr);
    return bad;
}

int
main(void)
{
    const char *tmp = getenv("TMPDIR");
    int fd, bad, p[2];

    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(path, sizeof path, "%s/leakcheck-fds-XXXXXX",
             tmp && strlen(tmp) < 32 ? tmp : "/tmp");
    fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    /* A pipe open before every scope: it must never be listed. */
    if (pipe(p) != 0) {
        perror("pipe");
        return 1;
    }
    before_fd = p[0];
    bad = run(CK_FORK, "CK_FORK");
    bad += run(CK_NOFORK, "CK_NOFORK");
    unlink(path);
    printf("%s\n", bad ? "some fds tests failed" : "all passed");
    return bad ? 1 : 0;
}
