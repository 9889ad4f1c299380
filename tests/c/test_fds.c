/*
 * test_fds.c — a scope or series whose fds probe leaked names each new
 * descriptor by number and by what /proc/self/fd says it is: a leaked file
 * by its path, a leaked pipe's two ends as pipe:[inode], a leaked socket
 * as socket:[inode].  Descriptors open before the scope began (or before a
 * series' measured runs) are not listed.  Real Check tests, run with
 * CK_FORK and with CK_NOFORK; each failure's message is read back.
 *
 * With the tracer preloaded (LC_FDS_EXPECT=lines, run-sites.sh), each
 * leaked descriptor's line also names the line that opened it, marked
 * "opened:<mark>" below: through open, fopen, socket, socketpair, pipe,
 * dup2 and fcntl, in a scope and in a series; one opened and closed
 * inside is named nowhere, and a number given out again after a close
 * names its new opener.  LC_FDS_EXPECT=hint (no tracer): no line is
 * named, and one line says what to preload; none (a sanitizer): no line,
 * no hint.  Unset (make check's plain run): no line, at most one hint.
 */
#define _GNU_SOURCE
/* glibc's fortified open, an inline wrapper in <bits/fcntl2.h> (calling
 * __open_2 where the flags are not known at compile time): a descriptor
 * it opens is named at the line here that called it. */
#if defined(__OPTIMIZE__) && !defined(_FORTIFY_SOURCE)
#define _FORTIFY_SOURCE 2
#endif
#include <check.h>
#include <leakcheck.h>

#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FDS LC_PROBE_BIT(LC_PROBE_FDS)

static char path[64];           /* the file the tests leak                */
static volatile int read_only = O_RDONLY;   /* flags not known at compile
                                             * time */
static int before_fd = -1;      /* open before every scope: never listed  */

START_TEST(scope_file_and_pipe)
{
    int p[2];

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    ck_assert_int_ge(open(path, O_RDONLY), 0);  /* opened:open */
    ck_assert_int_eq(pipe(p), 0);               /* opened:pipe */
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(scope_socket)
{
    int sv[2], rc;

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    rc = socketpair(AF_UNIX, SOCK_STREAM, 0, sv); /* opened:socketpair */
    ck_assert_int_eq(rc, 0);
    close(sv[1]);
    LEAK_SCOPE_END(s);
}
END_TEST

FILE *lc_test_kept_stream;

START_TEST(scope_fopen_socket)
{
    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    lc_test_kept_stream = fopen(path, "r");     /* opened:fopen */
    ck_assert_ptr_nonnull(lc_test_kept_stream);
    ck_assert_int_ge(socket(AF_UNIX, SOCK_DGRAM, 0), 0); /* opened:socket */
    ck_assert_int_ge(open(path, read_only), 0); /* opened:open_2 */
    LEAK_SCOPE_END(s);
}
END_TEST

/* Opened and closed (through fopen and fclose, whose descriptor glibc
 * opens and closes internally), then the same number opened again. */
START_TEST(scope_reused)
{
    FILE *f;
    int first, again;

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    f = fopen(path, "r");                       /* opened:first */
    ck_assert_ptr_nonnull(f);
    first = fileno(f);
    fclose(f);
    again = open(path, O_RDONLY);               /* opened:again */
    ck_assert_int_eq(again, first);
    LEAK_SCOPE_END(s);
}
END_TEST

/* Opened and closed inside, through close and through fclose, then the
 * same numbers opened again by a raw system call, which no interposition
 * sees: nothing names them. */
START_TEST(scope_closed_then_raw)
{
    FILE *f;
    int fd, raw, first;

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    close(fd);
    raw = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    ck_assert_int_eq(raw, fd);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    first = fileno(f);
    fclose(f);
    raw = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    ck_assert_int_eq(raw, first);
    LEAK_SCOPE_END(s);
}
END_TEST

/* A dup2 over a socket opened inside: the number names the dup2; a
 * descriptor made by fcntl's F_DUPFD_CLOEXEC names the fcntl. */
START_TEST(scope_dup2_over)
{
    int sock, fd, rc, copy;

    LEAK_SCOPE_BEGIN_WITH(s, LC_PROBES(FDS));
    sock = socket(AF_UNIX, SOCK_DGRAM, 0);
    fd = open(path, O_RDONLY);
    ck_assert_int_ge(sock, 0);
    ck_assert_int_ge(fd, 0);
    rc = dup2(fd, sock);                        /* opened:dup2 */
    ck_assert_int_eq(rc, sock);
    copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);       /* opened:fcntl */
    ck_assert_int_ge(copy, 0);
    close(fd);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(repeat_file)
{
    LEAK_REPEAT_WITH(r, 1, 3, LC_PROBES(FDS))
        ck_assert_int_ge(open(path, O_RDONLY), 0); /* opened:repeat */
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
    const TTest *tests[] = {scope_file_and_pipe, scope_socket,
                            scope_fopen_socket, scope_reused,
                            scope_closed_then_raw, scope_dup2_over,
                            repeat_file, scope_clean};
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

static const char *expect;      /* LC_FDS_EXPECT                          */

/* The line of this file marked "opened:<mark> ". */
static int
mark_line(const char *mark)
{
    char want[64];

    snprintf(want, sizeof want, "opened:%s ", mark);
    return harness_source_line("test_fds.c", want);
}

/* How many descriptor lines end naming the line marked `mark` in
 * function `fn`. */
static int
opened_at(const char *msg, const char *mark, const char *fn)
{
    char want[160];

    snprintf(want, sizeof want, ", opened at test_fds.c:%d %s()\n",
             mark_line(mark), fn);
    return harness_count(msg, want);
}

/* What a leak's message says of the lines that opened its descriptors. */
static int
judge_openers(const char *name, const char *msg)
{
    const char *hint = "  opening lines: run again with LD_PRELOAD=";
    char fn[64];
    int all = harness_count(msg, ", opened at ");

    if (expect == NULL)
        return all == 0 && harness_count(msg, hint) <= 1;
    if (strcmp(expect, "none") == 0)
        return all == 0 && strstr(msg, "opening lines") == NULL;
    if (strcmp(expect, "hint") == 0) {
        const char *p = strstr(msg, hint);
        char tracer[4096];
        return all == 0 && harness_count(msg, "opening lines") == 1 &&
               p != NULL &&
               sscanf(p + strlen(hint), "%4095s", tracer) == 1 &&
               access(tracer, R_OK) == 0;
    }
    snprintf(fn, sizeof fn, "%s_fn", name);
    if (strcmp(name, "scope_file_and_pipe") == 0)
        return all == 3 && opened_at(msg, "open", fn) == 1 &&
               opened_at(msg, "pipe", fn) == 2;
    if (strcmp(name, "scope_socket") == 0)
        return all == 1 && opened_at(msg, "socketpair", fn) == 1;
    if (strcmp(name, "scope_fopen_socket") == 0)
        return all == 3 && opened_at(msg, "fopen", fn) == 1 &&
               opened_at(msg, "socket", fn) == 1 &&
               opened_at(msg, "open_2", fn) == 1;
    if (strcmp(name, "scope_reused") == 0)
        return all == 1 && opened_at(msg, "again", fn) == 1;
    if (strcmp(name, "scope_closed_then_raw") == 0)
        return all == 0;
    if (strcmp(name, "scope_dup2_over") == 0)
        return all == 2 && opened_at(msg, "dup2", fn) == 1 &&
               opened_at(msg, "fcntl", fn) == 1;
    return all == 3 && opened_at(msg, "repeat", fn) == 3;
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
    else if (strcmp(name, "scope_fopen_socket") == 0)
        ok = files == 2 && pipes == 0 && sockets == 1;
    else if (strcmp(name, "scope_reused") == 0)
        ok = files == 1 && pipes == 0 && sockets == 0;
    else if (strcmp(name, "scope_closed_then_raw") == 0 ||
             strcmp(name, "scope_dup2_over") == 0)
        ok = files == 2 && pipes == 0 && sockets == 0;
    else    /* three measured runs, one file each; not the warm-up's */
        ok = files == 3 && pipes == 0 && sockets == 0;
    if (ok && leaks && !judge_openers(name, msg)) {
        printf("FAIL %-9s %s: the lines that opened the descriptors "
               "(LC_FDS_EXPECT=%s)\n", mode, name, expect ? expect : "");
        ok = 0;
    }
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
    if (n != 8) {
        printf("FAIL %-9s ran %d tests, not 8\n", mode, n);
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
    expect = getenv("LC_FDS_EXPECT");
    if (expect != NULL && strcmp(expect, "lines") != 0 &&
        strcmp(expect, "hint") != 0 && strcmp(expect, "none") != 0) {
        printf("FAIL LC_FDS_EXPECT is lines, hint or none\n");
        return 1;
    }
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
