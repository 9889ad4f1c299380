/*
 * test_embed.c — the Python probes from a Check test that embeds CPython:
 * a forgotten object (objects, blocks), forgotten PyMem blocks small
 * (py_allocs, blocks) and large (py_bytes too) and a forgotten
 * PyMem_RawMalloc block (py_allocs, py_bytes), each with a clean
 * twin that makes and releases the same thing, and LEAK_REPEAT over Python
 * code that grows a global list every run (leak) or fills a cache once
 * (clean).  Built twice: against the release CPython, where the refs probe
 * must say it needs a debug build, and with LC_TEST_DEBUG_PYTHON against
 * python3.11d, where refs must be live and catch a forgotten Py_INCREF.
 *
 * CPython is initialized in main() before the runner: with CK_FORK every
 * test's child inherits the interpreter; with CK_NOFORK what a leaking test
 * leaves behind stays in the process, which later scopes do not see since
 * each measures only its own growth.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <check.h>
#include <leakcheck.h>

#include <string.h>

#include "harness.h"

/* What the leaking tests forget, kept in non-static globals so that the
 * compiler keeps the allocations. */
PyObject *lc_test_forgotten;
void *lc_test_block, *lc_test_raw_block;

START_TEST(clean_python_probes_available)
{
    static const int probes[] = {LC_PROBE_BLOCKS, LC_PROBE_PY_BYTES,
                                 LC_PROBE_PY_ALLOCS, LC_PROBE_OBJECTS,
                                 LC_PROBE_GARBAGE};
    lc_probe_info info;
    size_t i;

    for (i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        ck_assert_int_eq(lc_probe_get_info(probes[i], &info), LC_OK);
        ck_assert_msg(info.available, "%s: %s", info.name,
                      info.reason ? info.reason : "?");
    }
}
END_TEST

START_TEST(leak_objects_blocks_list)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_forgotten = PyList_New(0);
    ck_assert_ptr_nonnull(lc_test_forgotten);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_objects_blocks_list)
{
    PyObject *list;

    LEAK_SCOPE_BEGIN(s);
    list = PyList_New(0);
    ck_assert_ptr_nonnull(list);
    Py_DECREF(list);
    LEAK_SCOPE_END(s);
}
END_TEST

/* A small block lives in pymalloc: blocks and py_allocs see it (py_bytes
 * keeps sizes only of large and raw blocks, to keep the hook cheap). */
START_TEST(leak_py_allocs_blocks_pymem)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_block = PyMem_Malloc(100);
    ck_assert_ptr_nonnull(lc_test_block);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_py_allocs_blocks_pymem)
{
    void *block;

    LEAK_SCOPE_BEGIN(s);
    block = PyMem_Malloc(100);
    ck_assert_ptr_nonnull(block);
    PyMem_Free(block);
    LEAK_SCOPE_END(s);
}
END_TEST

/* Above pymalloc's 512-byte limit: py_bytes counts it. */
START_TEST(leak_py_allocs_py_bytes_pymem_large)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_block = PyMem_Malloc(4000);
    ck_assert_ptr_nonnull(lc_test_block);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_py_allocs_py_bytes_pymem_large)
{
    void *block;

    LEAK_SCOPE_BEGIN(s);
    block = PyMem_Malloc(4000);
    ck_assert_ptr_nonnull(block);
    PyMem_Free(block);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(leak_py_allocs_py_bytes_raw)
{
    LEAK_SCOPE_BEGIN(s);
    lc_test_raw_block = PyMem_RawMalloc(100);
    ck_assert_ptr_nonnull(lc_test_raw_block);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_py_allocs_py_bytes_raw)
{
    void *block;

    LEAK_SCOPE_BEGIN(s);
    block = PyMem_RawMalloc(100);
    ck_assert_ptr_nonnull(block);
    PyMem_RawFree(block);
    LEAK_SCOPE_END(s);
}
END_TEST

/* One new list a run, kept by a module global. */
START_TEST(leak_objects_repeat_python)
{
    ck_assert_int_eq(PyRun_SimpleString("_leaky = []"), 0);
    LEAK_REPEAT(r, 2, 4) {
        ck_assert_int_eq(PyRun_SimpleString("_leaky.append([])"), 0);
    }
}
END_TEST

/* No warm-up: the cache fills in the first measured run, which the series
 * must not call a leak since no later run grows. */
START_TEST(clean_objects_repeat_python_cache)
{
    ck_assert_int_eq(PyRun_SimpleString("_cache = None"), 0);
    LEAK_REPEAT(r, 0, 4) {
        ck_assert_int_eq(PyRun_SimpleString(
                             "if _cache is None:\n"
                             "    _cache = [[] for _ in range(100)]\n"),
                         0);
    }
}
END_TEST

#if defined(LC_TEST_DEBUG_PYTHON)

START_TEST(clean_refs_available)
{
    lc_probe_info info;

    ck_assert_int_eq(lc_probe_get_info(LC_PROBE_REFS, &info), LC_OK);
    ck_assert_msg(info.available, "refs: %s",
                  info.reason ? info.reason : "?");
}
END_TEST

/* None is not immortal before 3.12: a reference taken and never given
 * back shows in sys.gettotalrefcount() and nowhere else. */
START_TEST(leak_refs_incref)
{
    LEAK_SCOPE_BEGIN(s);
    Py_INCREF(Py_None);
    LEAK_SCOPE_END(s);
}
END_TEST

START_TEST(clean_refs_incref)
{
    LEAK_SCOPE_BEGIN(s);
    Py_INCREF(Py_None);
    Py_DECREF(Py_None);
    LEAK_SCOPE_END(s);
}
END_TEST

#else

START_TEST(clean_refs_unavailable)
{
    lc_probe_info info;

    ck_assert_int_eq(lc_probe_get_info(LC_PROBE_REFS, &info), LC_OK);
    ck_assert_msg(!info.available, "refs is available in a release build");
    ck_assert_ptr_nonnull(info.reason);
    ck_assert_msg(strstr(info.reason, "debug build") != NULL,
                  "refs: unexpected reason '%s'", info.reason);
}
END_TEST

#endif

static Suite *
embed_suite(void)
{
    Suite *s = suite_create("embed");

    harness_add(s, clean_python_probes_available);
    harness_add(s, leak_objects_blocks_list);
    harness_add(s, clean_objects_blocks_list);
    harness_add(s, leak_py_allocs_blocks_pymem);
    harness_add(s, clean_py_allocs_blocks_pymem);
    harness_add(s, leak_py_allocs_py_bytes_pymem_large);
    harness_add(s, clean_py_allocs_py_bytes_pymem_large);
    harness_add(s, leak_py_allocs_py_bytes_raw);
    harness_add(s, clean_py_allocs_py_bytes_raw);
    harness_add(s, leak_objects_repeat_python);
    harness_add(s, clean_objects_repeat_python_cache);
#if defined(LC_TEST_DEBUG_PYTHON)
    harness_add(s, clean_refs_available);
    harness_add(s, leak_refs_incref);
    harness_add(s, clean_refs_incref);
#else
    harness_add(s, clean_refs_unavailable);
#endif
    return s;
}

int
main(void)
{
    int status;

    Py_Initialize();
#if defined(LC_TEST_DEBUG_PYTHON)
    harness_expect(PySys_GetObject("gettotalrefcount") != NULL,
                   "linked against a debug CPython %s", PY_VERSION);
#else
    harness_expect(PySys_GetObject("gettotalrefcount") == NULL,
                   "linked against a release CPython %s", PY_VERSION);
#endif
    status = harness_run(embed_suite, HARNESS_BOTH);
    if (Py_FinalizeEx() != 0)
        status = 1;
    return status;
}
