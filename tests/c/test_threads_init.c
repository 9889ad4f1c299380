/*
 * test_threads_init.c — the engine's lazy set-up (the heap reader's
 * choice, the settling before the first reading, /proc's availability,
 * memcheck's detection, the CPython lookups) happens once even when the
 * first scopes of a process open in several threads at the same moment.
 *
 * It is the first scopes that matter, so each round runs in a child forked
 * from a parent that never calls the library: 20 rounds, each starting 8
 * threads that wait at a barrier and then open, end and free a scope at
 * once.  A round passes when its child exits 0: every lc_scope_begin and
 * lc_scope_end returned LC_OK and the scope compared native_bytes, fds and
 * threads.  A crash (a call through a NULL reader, say) is reported with
 * its signal.
 */
#define _GNU_SOURCE
#include <leakcheck.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 20
#define THREADS 8

static pthread_barrier_t start;

static void *
open_first_scope(void *arg)
{
    const unsigned wanted = LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES) |
                            LC_PROBE_BIT(LC_PROBE_FDS) |
                            LC_PROBE_BIT(LC_PROBE_THREADS);
    lc_scope *s = lc_scope_new("first");
    intptr_t failed = 0;
    int rc;

    (void)arg;
    pthread_barrier_wait(&start);
    if (s == NULL)
        return (void *)1;
    if ((rc = lc_scope_begin(s)) != LC_OK) {
        fprintf(stderr, "lc_scope_begin: %s\n", lc_strerror(rc));
        failed = 1;
    } else if ((rc = lc_scope_end(s)) != LC_OK) {
        fprintf(stderr, "lc_scope_end: %s\n", lc_strerror(rc));
        failed = 1;
    } else if ((lc_scope_probes(s) & wanted) != wanted) {
        fprintf(stderr, "the scope compared probes 0x%x, not all of 0x%x\n",
                lc_scope_probes(s), wanted);
        failed = 1;
    }
    lc_scope_free(s);
    return (void *)failed;
}

/* One round, in a fresh process: 0 when every thread's scope worked. */
static int
round_in_child(void)
{
    pthread_t t[THREADS];
    int i, n = 0, failed = 0;

    pthread_barrier_init(&start, NULL, THREADS);
    for (i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, open_first_scope, NULL) == 0)
            n++;
    if (n != THREADS) {
        fprintf(stderr, "could start only %d threads\n", n);
        _exit(2);       /* the others wait at the barrier for good */
    }
    for (i = 0; i < n; i++) {
        void *r;
        pthread_join(t[i], &r);
        failed |= r != NULL;
    }
    return failed;
}

int
main(void)
{
    int round, crashed = 0, failed = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    for (round = 0; round < ROUNDS; round++) {
        pid_t pid = fork();
        int status;

        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            _exit(round_in_child());
        if (waitpid(pid, &status, 0) != pid) {
            perror("waitpid");
            return 1;
        }
        if (WIFSIGNALED(status)) {
            printf("round %d: killed by signal %d (%s)\n", round + 1,
                   WTERMSIG(status), strsignal(WTERMSIG(status)));
            crashed++;
        } else if (WEXITSTATUS(status) != 0) {
            printf("round %d: exit status %d\n", round + 1,
                   WEXITSTATUS(status));
            failed++;
        }
    }
    printf("%d rounds of %d threads opening the first scopes: %d crashed, "
           "%d failed\n", ROUNDS, THREADS, crashed, failed);
    return crashed || failed ? 1 : 0;
}
