/*
 * test_tokenizer.c — Check tests of the tokenizer, with leakcheck making a
 * leak a failure.  Built against leaky.c the error-path tests fail with a
 * report; against fixed.c everything passes.
 */
#include <check.h>
#include <leakcheck.h>   /* after check.h: a leak then fails the Check test */

#include <stdlib.h>

#include "tokenizer.h"

START_TEST(test_split)
{
    tok_list list;

    ck_assert_int_eq(tok_split("a,\"b,c\",,d", ',', &list), 0);
    ck_assert_int_eq(list.count, 4);
    ck_assert_str_eq(list.fields[1], "b,c");
    ck_assert_str_eq(list.fields[2], "");
    tok_free(&list);
}
END_TEST

/* The error path once: the few bytes it forgets fail the scope. */
START_TEST(test_unterminated_quote)
{
    tok_list list;

    LEAK_SCOPE_BEGIN(bad_quote);
    ck_assert_int_eq(tok_split("a,b,\"c", ',', &list), -1);
    LEAK_SCOPE_END(bad_quote);
}
END_TEST

/* One call a run: LEAK_REPEAT fails when every run grows. */
START_TEST(test_unterminated_quote_repeat)
{
    tok_list list;

    LEAK_REPEAT(bad_quote_once, 2, 5) {
        ck_assert_int_eq(tok_split("x,\"y", ',', &list), -1);
    }
}
END_TEST

START_TEST(test_split_repeat)
{
    tok_list list;

    LEAK_REPEAT(split, 2, 5) {
        ck_assert_int_eq(tok_split("one,two,three", ',', &list), 0);
        tok_free(&list);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_unterminated_quote);
    tcase_add_test(tc, test_unterminated_quote_repeat);
    tcase_add_test(tc, test_split_repeat);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
