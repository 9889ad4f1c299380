/*
 * harness.h — the outer half of every Check-based test binary here.
 *
 * A binary builds an *inner* Check suite whose tests say by their name what
 * must happen to them: `clean_*` must pass; `leak_<probe>[_<probe>...]_*`
 * must fail through leakcheck, with a report in which each named probe grew,
 * at a source line holding LEAK_SCOPE_END or LEAK_REPEAT; `refused_*` must
 * fail through leakcheck at such a line because a setting was refused.  The harness runs
 * that suite silently in each fork mode asked for, judges every result,
 * prints one line per judgement and a last line "N passed, N failed", and
 * gives the exit status automake's test driver reads.
 *
 * A leaking test can therefore only count as passed when leakcheck really
 * reported the leak: nothing is skipped.
 */
#ifndef LC_TEST_HARNESS_H
#define LC_TEST_HARNESS_H

#include <check.h>

#define HARNESS_FORK   0x1u   /* run the inner suite with CK_FORK          */
#define HARNESS_NOFORK 0x2u   /* and/or with CK_NOFORK                     */
#define HARNESS_BOTH   (HARNESS_FORK | HARNESS_NOFORK)

/*
 * Adds `test` to `suite` in a test case of its own named like the test:
 * Check's results carry the test case name (tr_tcname) but not the test's,
 * and the name is what tells the harness what to expect.
 */
void harness_add(Suite *suite, const TTest *test);

/* Records one judgement made outside the inner suite (a precondition such
 * as "running under valgrind"): prints it and counts it in the summary. */
void harness_expect(int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * Builds a fresh suite with make_suite() for each mode of `modes` (a runner
 * frees its suites), runs it with CK_SILENT output and judges the results.
 * Then prints the summary and returns the exit status for main(): 0 only
 * when every judgement, including harness_expect()'s, held and there was
 * at least one.  With modes 0 nothing runs (make_suite may be NULL): a
 * binary whose preconditions failed still ends with the summary.
 */
int harness_run(Suite *(*make_suite)(void), unsigned modes);

/* The number of the first line of tests/c/<file> (under $top_srcdir)
 * that holds `mark`, or 0: how a test names the line it expects a report
 * to point at without writing the number down. */
int harness_source_line(const char *file, const char *mark);

/* How many times `what` occurs in `text`. */
int harness_count(const char *text, const char *what);

#endif /* LC_TEST_HARNESS_H */
