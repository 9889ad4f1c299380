/*
 * _core.c — leakcheck's C engine (c_api/) as the Python module
 * leakcheck._core.
 *
 * Thin on purpose, as CPython's Modules/_tracemalloc.c is: each function
 * parses its arguments, calls the engine, and turns a status into an
 * exception through check().  Readings, verdicts and their reports stay
 * in the engine; names, validation and diagnosis live in the Python
 * package.
 *
 * One thing here is more than a wrapper: a Snapshot object must not measure
 * itself.  `b - a` of two snapshots around clean code is zero only if the
 * object `b` (alive at b's reading, absent at a's) is invisible to the
 * probes.  So Snapshot objects are allocated with malloc(), outside the
 * PyMem domains (blocks, py_bytes, py_allocs), are not tracked by the GC
 * (objects), and their own share of the two readings they do touch --
 * their reference counts (refs) and their heap chunks (native_bytes) -- is
 * subtracted from every reading.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>   /* the frame's fields: drop_running_zombies */
#endif

#include "leakcheck.h"
#include "internal.h"      /* lc__pyhook_restored, lc__python_release_hook */
#include "_jsontext.h"

#include <limits.h>
#include <string.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* ---- status -> exception ------------------------------------------------ */

/* An exception raised by the settle callable while the engine ran; the
 * engine cannot carry it, so check() raises it when the call returns. */
static PyObject *settle_exc_type, *settle_exc_value, *settle_exc_tb;

/*
 * The one place a status becomes an exception.  Returns 0 when `status`
 * is not negative and nothing failed meanwhile, else -1 with an exception
 * set.  An exception from the settle callable wins over the status: it
 * says more.
 */
static int
check(int status)
{
    PyObject *type;

    if (settle_exc_type != NULL) {
        PyErr_Restore(settle_exc_type, settle_exc_value, settle_exc_tb);
        settle_exc_type = settle_exc_value = settle_exc_tb = NULL;
        return -1;
    }
    if (status >= 0)
        return 0;
    if (PyErr_Occurred())
        return -1;
    switch (status) {
    case LC_ENOMEM:
        PyErr_NoMemory();
        return -1;
    case LC_EINVAL:
    case LC_ENOPROBE:
        type = PyExc_ValueError;
        break;
    case LC_EUNAVAIL:
        type = PyExc_LookupError;
        break;
    case LC_ESYS:
        type = PyExc_OSError;
        break;
    default: /* LC_ESTATE, LC_EPYTHON */
        type = PyExc_RuntimeError;
        break;
    }
    PyErr_Format(type, "leakcheck: %s", lc_strerror(status));
    return -1;
}

/* An int argument; -1 with an exception when it is not one that fits. */
static int
int_arg(PyObject *arg, int *value)
{
    long v = PyLong_AsLong(arg);

    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "leakcheck: integer out of range");
        return -1;
    }
    *value = (int)v;
    return 0;
}

static int
probe_arg(PyObject *arg, int *probe)
{
    if (int_arg(arg, probe) < 0)
        return -1;
    if (*probe < 0 || *probe >= LC_PROBE_COUNT) {
        PyErr_Format(PyExc_ValueError, "leakcheck: no probe number %d", *probe);
        return -1;
    }
    return 0;
}

/* A report as a str, from a buffer of the length the engine asks for;
 * `scope` or `series` is the one to report on. */
static PyObject *
report_str(const lc_scope *scope, const lc_series *series)
{
    size_t n = scope ? lc_scope_report(scope, NULL, 0)
                     : lc_series_report(series, NULL, 0);
    char *buf = PyMem_Malloc(n + 1);
    PyObject *s;

    if (buf == NULL)
        return PyErr_NoMemory();
    if (scope)
        lc_scope_report(scope, buf, n + 1);
    else
        lc_series_report(series, buf, n + 1);
    s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, "replace");
    PyMem_Free(buf);
    return s;
}

/* ---- settling ----------------------------------------------------------- */

/* The object a weak reference names (a new reference), or NULL. */
static PyObject *
deref(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) < 0)
        PyErr_Clear();
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    if (obj == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (obj == Py_None)
        return NULL;
    Py_INCREF(obj);
    return obj;
#endif
}

/* The settle callable, held through a weak reference: a reference from
 * here would be a root that the interpreter's finalization cannot clear.
 * Through the callable's globals (leakcheck._settle's) it kept what that
 * module reaches alive in the collection that finalization makes once
 * sys.modules is emptied, which then freed none of it and walked all of
 * it once more, with the program's objects (`python bench/bench_regions.py
 * --regions exit`: the exit of a pytest session of 200 fast tests took
 * 371,171 instructions a test under --leaks against plain pytest's
 * 309,313; 311,482 against 309,581 since).  Whoever sets the callable
 * keeps it alive: leakcheck's module does. */
static PyObject *settle_ref;

/* The engine's settle hook: GIL held, no exception pending. */
static void
settle_trampoline(void *arg)
{
    PyObject *fn, *r;

    (void)arg;
    if (settle_ref == NULL || settle_exc_type != NULL)
        return;
    fn = deref(settle_ref);
    if (fn == NULL)
        return;                 /* gone: the interpreter is finalizing */
    r = PyObject_CallNoArgs(fn);
    Py_DECREF(fn);
    if (r == NULL)
        PyErr_Fetch(&settle_exc_type, &settle_exc_value, &settle_exc_tb);
    else
        Py_DECREF(r);
}

static PyObject *
core_set_settle(PyObject *mod, PyObject *fn)
{
    PyObject *ref;

    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "settle hook must be callable or None");
        return NULL;
    }
    if (fn == Py_None) {
        lc_set_settle(NULL, NULL);
        Py_CLEAR(settle_ref);
    } else {
        ref = PyWeakref_NewRef(fn, NULL);
        if (ref == NULL)
            return NULL;
        Py_XSETREF(settle_ref, ref);
        lc_set_settle(settle_trampoline, NULL);
    }
    Py_RETURN_NONE;
}

/* ---- probes ------------------------------------------------------------- */

static PyObject *
core_probe_info(PyObject *mod, PyObject *arg)
{
    lc_probe_info info;
    int probe;

    if (probe_arg(arg, &probe) < 0 || check(lc_probe_get_info(probe, &info)) < 0)
        return NULL;
    return Py_BuildValue("(sssNzLL)", info.name, info.unit, info.doc,
                         PyBool_FromLong(info.available), info.reason,
                         (long long)info.tolerance, (long long)info.threshold);
}

static PyObject *
core_probes_available(PyObject *mod, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lc_probes_available());
}

static PyObject *
core_hook_restored(PyObject *mod, PyObject *unused)
{
    return PyLong_FromLong(lc__pyhook_restored());
}

static PyObject *
core_release_hook(PyObject *mod, PyObject *unused)
{
    return PyLong_FromLong(lc__python_release_hook());
}

static PyObject *
core_blocks_check(PyObject *mod, PyObject *unused)
{
    int64_t counted, walked;
    int rc = lc__python_blocks_check(&counted, &walked);

    if (rc == LC_EUNAVAIL)
        Py_RETURN_NONE;
    if (check(rc) < 0)
        return NULL;
    return Py_BuildValue("(LL)", (long long)counted, (long long)walked);
}

static PyObject *
core_allocated_blocks(PyObject *mod, PyObject *args)
{
    int walk = 1;
    int64_t blocks;

    if (!PyArg_ParseTuple(args, "|p:allocated_blocks", &walk))
        return NULL;
    blocks = lc__python_allocated_blocks(walk);
    if (blocks == LC__BLOCKS_UNCOUNTED)
        Py_RETURN_NONE;
    if (blocks < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError,
                            "leakcheck: cannot read pymalloc's blocks");
        return NULL;
    }
    return PyLong_FromLongLong((long long)blocks);
}

static PyObject *
core_threads(PyObject *mod, PyObject *unused)
{
    int64_t threads = lc__threads_now();

    if (threads < 0) {
        PyErr_SetString(PyExc_OSError,
                        "leakcheck: /proc/self/task cannot be read");
        return NULL;
    }
    return PyLong_FromLongLong((long long)threads);
}

/*
 * pointer_at(address) -> int: the address the pointer slot at `address`
 * holds.  hold(address, new) -> bool: makes that slot, which owns a
 * reference (or is NULL), hold one to `new` instead, releasing the one it
 * held (its object freed when that was the last); False, and nothing
 * done, when it holds `new` already.  For settling's sync of the list of
 * warning filters the C warnings module holds (leakcheck/_settle.py),
 * which finds the slot and proves it is that one before ever calling
 * these: the caller vouches for the slot.
 */
static PyObject **
slot_at(PyObject *arg)
{
    unsigned long long address = PyLong_AsUnsignedLongLong(arg);

    if (address == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (address == 0 || address % sizeof(void *) != 0) {
        PyErr_SetString(PyExc_ValueError, "leakcheck: bad pointer slot");
        return NULL;
    }
    return (PyObject **)(uintptr_t)address;
}

static PyObject *
core_pointer_at(PyObject *mod, PyObject *arg)
{
    PyObject **slot = slot_at(arg);

    return slot == NULL ? NULL : PyLong_FromVoidPtr(*slot);
}

static PyObject *
core_hold(PyObject *mod, PyObject *args)
{
    PyObject *address, *new_, *old, **slot;

    if (!PyArg_ParseTuple(args, "OO:hold", &address, &new_))
        return NULL;
    slot = slot_at(address);
    if (slot == NULL)
        return NULL;
    old = *slot;
    if (old == new_)
        Py_RETURN_FALSE;
    Py_INCREF(new_);
    *slot = new_;
    Py_XDECREF(old);
    Py_RETURN_TRUE;
}

static PyObject *
core_is_immortal(PyObject *mod, PyObject *obj)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyBool_FromLong(_Py_IsImmortal(obj));
#else
    (void)obj;
    Py_RETURN_FALSE;
#endif
}

/*
 * retarget(address, count, stride, old, new) -> n: in `count` pointer slots
 * `stride` bytes apart from `address`, replaces each reference to `old` by
 * one to `new`, moving the references with them; returns how many.  For
 * settling's refill of CPython's type cache (leakcheck/_settle.py), which
 * finds the table and proves it is one before ever calling this: the
 * caller vouches that the slots are owned references.
 */
static PyObject *
core_retarget(PyObject *mod, PyObject *args)
{
    unsigned long long address;
    Py_ssize_t count, stride, i, n = 0;
    PyObject *old, *new_;

    if (!PyArg_ParseTuple(args, "KnnOO:retarget", &address, &count, &stride,
                          &old, &new_))
        return NULL;
    if (address == 0 || count < 0 || stride < (Py_ssize_t)sizeof(void *)) {
        PyErr_SetString(PyExc_ValueError, "retarget: bad table");
        return NULL;
    }
    for (i = 0; i < count; i++) {
        PyObject **slot = (PyObject **)(uintptr_t)(address + (unsigned long long)(i * stride));
        if (*slot == old) {
            *slot = new_;
            n++;
        }
    }
    for (i = 0; i < n; i++) {
        Py_INCREF(new_);
        Py_DECREF(old);      /* old is still held by the caller: never 0 */
    }
    return PyLong_FromSsize_t(n);
}

/*
 * type_cache_trim(address, count, filler) -> n: empties the entries of
 * CPython's type attribute cache (`count` entries {unsigned
 * version; PyObject *name; PyObject *value} from `address`) whose name
 * nothing but the cache holds, giving each a reference to `filler`
 * instead; returns how many.  Those names live on only because the cache
 * holds them, and would read as growth; every other entry is left, so
 * that the lookups after a snapshot still find them (emptying the whole
 * cache, as sys._clear_type_cache() does, made the plugin's and pytest's
 * lookups after each snapshot miss: about an eighth of what a clean test
 * cost, in instructions).  A name may be in several entries (one per type
 * it was looked up on): its references from the cache are taken off its
 * count for the time of one loop, and it is the cache's alone when
 * nothing is left.  No Python code runs until the counts are back; then
 * the names let go are released, which only frees str objects.  Same
 * contract as retarget(): settling found the table and vouches for it.
 * The engine runs it after each snapshot's collection
 * (trim_type_cache_after_collect below); type_cache_trim() runs it now.
 */
typedef struct {
    unsigned int version;
    PyObject *name;
    PyObject *value;
} lc__type_cache_entry;

#define LC__TYPE_CACHE_MAX 4096

/*
 * The table the engine trims after each snapshot's collection, and what
 * its last trim left.  Every name the table holds is looked at in every
 * trim, not only those of the entries that changed since the last: a
 * name cached before and the cache's alone only since would live on
 * until a lookup evicts it, in some later run, which would then read a
 * drop and run again.  But most of the table is empty (version 0, no
 * lookup's name), and an empty entry comes to hold a name only through a
 * lookup that takes its slot, which releases what the slot held.  So
 * the engine's trim gives every empty entry `own`, a string that nothing
 * but the engine and the table can reach (made here, never handed to
 * Python code), whose reference count is then one (the engine's) plus
 * the entries that hold it.  Where that count is what the last trim
 * left, no empty entry was taken since, and every name is in an entry
 * that held one then (`at`): the trim reads those entries alone, not the
 * whole table (96 KB, two trims a clean test).  Where it moved (a lookup
 * took an empty slot; a clear), the trim reads every entry, gives each
 * empty one `own` (None or NULL after a clear, the Python side's filler
 * after type_cache_trim()), and notes again which hold a name.  (Telling
 * the entries that changed by comparing the whole table with a copy was
 * tried before: it read as much memory as the trim, and saved 0.02 M
 * instructions a test on 3.11.  bench/bench_hunt_instructions.py --ll
 * counts what reading the named entries alone saves: the CHANGELOG.)
 */
static struct {
    lc__type_cache_entry *table;
    Py_ssize_t count;
    PyObject *filler;           /* the Python side's                      */
    PyObject *own;              /* the engine's filler, see above         */
    int known;                  /* 1: `at` and `own_refs` hold            */
    Py_ssize_t own_refs;        /* Py_REFCNT(own) after the last trim     */
    Py_ssize_t named;           /* the entries that held a name then...   */
    uint16_t at[LC__TYPE_CACHE_MAX];    /* ... in the table's order       */
    Py_ssize_t read;            /* entries the last trim read             */
} trimmed;

/* Whether an entry holding `name` is empty: no lookup's name. */
static inline int
empty_name(PyObject *name, PyObject *filler)
{
    return name == NULL || name == filler || name == trimmed.own ||
           name == Py_None;
}

static Py_ssize_t
trim_table(lc__type_cache_entry *table, Py_ssize_t count, PyObject *filler,
           int engine)
{
    /* Static: 40 KB is much for the stack of a thread a snapshot may be
     * taken in, and the GIL is held throughout (no Python code runs). */
    static PyObject *held[LC__TYPE_CACHE_MAX];
    static uint16_t at[LC__TYPE_CACHE_MAX];
    static uint16_t alone[LC__TYPE_CACHE_MAX];
    PyObject *give = engine ? trimmed.own : filler;
    Py_ssize_t i, j, k, m = 0, a = 0, n = 0, known = -1;

    /* The engine's trim reads only the entries that held a name after
     * the last, where no empty one was taken since (see `trimmed`). */
    if (engine && trimmed.known && Py_REFCNT(give) == trimmed.own_refs)
        known = trimmed.named;
    trimmed.known = 0;
    if (engine)
        trimmed.read = known < 0 ? count : known;

    /* The entries that hold a name, their references taken off it.  A
     * name's count reaches 0 there at its last entry, and only if the
     * cache alone holds it (each entry holds a reference): that entry is
     * noted, one per name the cache alone holds, and there are few. */
    for (j = 0; j < (known < 0 ? count : known); j++) {
        lc__type_cache_entry *e;
        PyObject *name;
        Py_ssize_t left;

        i = known < 0 ? j : trimmed.at[j];
        e = &table[i];
        name = e->name;
        if (empty_name(name, filler)) {
            /* An empty entry holds the engine's filler after its trim
             * (in a slot that answers no lookup: version 0). */
            if (engine && name != give && e->version == 0) {
                Py_INCREF(give);
                e->name = give;
                Py_XDECREF(name);       /* held elsewhere: never 0 */
            }
            else if (engine && name != give)
                engine = 0;     /* not an entry we know: note nothing */
            continue;
        }
        left = Py_REFCNT(name) - 1;
        Py_SET_REFCNT(name, left);
        at[m] = (uint16_t)i;
        held[m++] = name;
        if (left == 0)
            alone[a++] = (uint16_t)i;
    }
    /* Every count is put back before any name is let go. */
    for (j = 0; j < m; j++)
        Py_SET_REFCNT(held[j], Py_REFCNT(held[j]) + 1);
    /* Then each such name leaves every entry that holds it: its count is
     * how many, and they all come before the one noted. */
    for (k = 0; k < a; k++) {
        PyObject *name = table[alone[k]].name;
        Py_ssize_t left = Py_REFCNT(name);

        for (i = alone[k]; left > 0 && i >= 0; i--) {
            lc__type_cache_entry *e = &table[i];
            if (e->name != name)
                continue;
            left--;
            e->version = 0;
            e->value = NULL;
            Py_INCREF(give);
            e->name = give;
            Py_DECREF(name);    /* the last one frees it */
            n++;
        }
    }
    if (engine) {
        /* What the next trim may read alone: the entries that still hold
         * a name, in the table's order. */
        for (j = k = 0; j < m; j++)
            if (n == 0 || table[at[j]].name != give)
                trimmed.at[k++] = at[j];
        trimmed.named = k;
        trimmed.own_refs = Py_REFCNT(give);
        trimmed.known = 1;
    }
    return n;
}

/*
 * Up to CPython 3.10 a code object keeps the frame of its last call for
 * its next one (its "zombie frame").  A code that is running has handed
 * its zombie to that call; two calls of it nested in that one (a hook
 * called inside a hook inside the hook that runs the test, as pluggy's
 * machinery does for a function-scoped fixture's setup) leave it the
 * inner call's frame, taken from the frame free list whatever its size,
 * and so does a frame of it that dies in the collection (one a traceback
 * in a reference cycle held).  Such a frame differs from test to test,
 * and the C heap and the blocks read its difference.  So after every
 * snapshot's collection, before any reading, the frames the running code
 * objects keep are freed (as a code object's own deallocation frees its
 * zombie): no reading holds one.  Before the collection would not do: the
 * frames it frees become zombies after.
 */
static void
drop_running_zombies(void)
{
#if PY_VERSION_HEX < 0x030B0000
    for (PyFrameObject *f = PyEval_GetFrame(); f != NULL; f = f->f_back) {
        PyCodeObject *co = f->f_code;
        if (co != NULL && co->co_zombieframe != NULL) {
            void *zombie = co->co_zombieframe;
            co->co_zombieframe = NULL;
            PyObject_GC_Del(zombie);
        }
    }
#endif
}

/* 1 while a Snapshot that does not collect reads (snapshot_new). */
static int uncollected;

/*
 * shrink_after_collect(sets): after each snapshot's collection, the engine
 * empties each of `sets` (a tuple of sets) that holds nothing, which
 * gives it back its inline table: a set keeps the table its entries once
 * needed after they are gone, until an addition makes it resize.
 * asyncio's registry of live tasks is such a set (leakcheck/_settle.py):
 * empty between two tests, it held a table of its own (a block) after
 * a test that ran six tasks at once, and none after an addition that
 * found it full of removed entries, so a test's run made or freed that
 * block.  After the collection, not before: the tasks a run left in
 * reference cycles leave the set there (a weak reference's callback).
 * Clearing an empty set changes nothing a program sees, and allocates
 * nothing: it only frees the table.
 */
static PyObject *shrunk;        /* a tuple of sets, or NULL */

static void
shrink_empty_sets(void)
{
    Py_ssize_t i;

    if (shrunk == NULL)
        return;
    for (i = 0; i < PyTuple_GET_SIZE(shrunk); i++) {
        PyObject *set = PyTuple_GET_ITEM(shrunk, i);
        if (PySet_GET_SIZE(set) == 0 && PySet_Clear(set) < 0)
            PyErr_Clear();
    }
}

static PyObject *
core_shrink_after_collect(PyObject *mod, PyObject *sets)
{
    Py_ssize_t i;

    if (!PyTuple_CheckExact(sets)) {
        PyErr_SetString(PyExc_TypeError,
                        "shrink_after_collect: a tuple of sets");
        return NULL;
    }
    for (i = 0; i < PyTuple_GET_SIZE(sets); i++)
        if (Py_TYPE(PyTuple_GET_ITEM(sets, i)) != &PySet_Type) {
            PyErr_SetString(PyExc_TypeError,
                            "shrink_after_collect: a tuple of sets");
            return NULL;
        }
    Py_INCREF(sets);
    Py_XSETREF(shrunk, PyTuple_GET_SIZE(sets) ? sets : NULL);
    if (shrunk == NULL)
        Py_DECREF(sets);
    Py_RETURN_NONE;
}

/* What the engine runs right after the collection of every snapshot (and
 * where a snapshot does not collect). */
static void
after_collect(void *unused)
{
    (void)unused;
    if (trimmed.table != NULL)
        trim_table(trimmed.table, trimmed.count, trimmed.filler, 1);
    if (!uncollected) {
        drop_running_zombies();
        shrink_empty_sets();
    }
}

static int
table_arg(PyObject *args, const char *format, lc__type_cache_entry **table,
          Py_ssize_t *count, PyObject **filler)
{
    unsigned long long address;

    if (!PyArg_ParseTuple(args, format, &address, count, filler))
        return -1;
    if (address == 0 || *count < 0 || *count > LC__TYPE_CACHE_MAX) {
        PyErr_SetString(PyExc_ValueError, "type cache: bad table");
        return -1;
    }
    *table = (lc__type_cache_entry *)(uintptr_t)address;
    return 0;
}

static PyObject *
core_type_cache_trim(PyObject *mod, PyObject *args)
{
    lc__type_cache_entry *table;
    Py_ssize_t count;
    PyObject *filler;

    if (table_arg(args, "KnO:type_cache_trim", &table, &count, &filler) < 0)
        return NULL;
    return PyLong_FromSsize_t(trim_table(table, count, filler, 0));
}

/* type_cache_trim_read() -> n: how many entries the engine's last trim
 * read (the tests' view of `trimmed`). */
static PyObject *
core_type_cache_trim_read(PyObject *mod, PyObject *unused)
{
    return PyLong_FromSsize_t(trimmed.read);
}

/* trim_type_cache_after_collect(address, count, filler), or (None): the
 * engine trims that table right after the collection of every snapshot.
 * After it, not before: a name that what the collection frees still
 * held is the cache's alone only then. */
static PyObject *
core_trim_type_cache_after_collect(PyObject *mod, PyObject *args)
{
    lc__type_cache_entry *table;
    Py_ssize_t count;
    PyObject *filler;

    if (PyTuple_GET_SIZE(args) == 1 && PyTuple_GET_ITEM(args, 0) == Py_None) {
        trimmed.table = NULL;
        Py_CLEAR(trimmed.filler);
        Py_RETURN_NONE;
    }
    if (table_arg(args, "KnO:trim_type_cache_after_collect", &table, &count,
                  &filler) < 0)
        return NULL;
    if (trimmed.own == NULL) {
        /* Made once and kept for good: entries hold it. */
        trimmed.own = PyUnicode_FromString(
            "leakcheck: an empty type cache slot");
        if (trimmed.own == NULL)
            return NULL;
    }
    Py_INCREF(filler);
    Py_XSETREF(trimmed.filler, filler);
    trimmed.table = table;
    trimmed.count = count;
    trimmed.known = 0;          /* its first trim reads every entry */
    Py_RETURN_NONE;
}

/*
 * count_interned_in(interned) or (None): on CPython 3.13 and later (with
 * the GIL), the engine's count of immortal interned strings comes from
 * the interpreter's dict of interned strings, found and vouched for by
 * leakcheck.cpython, instead of sys.getunicodeinternedsize(
 * _only_immortal=True), which walks every interned string (50,000 and
 * more in a pytest process: most of what a snapshot cost there).  The
 * dict only grows at its end until it is resized: each snapshot looks at
 * the entries added since the last one, and counts those immortal by
 * then.  A string that was interned mortal and made immortal later (code
 * objects' names, PyUnicode_InternFromString) was allocated before: it is
 * not counted, as it is no new block (the walk counted it, and a run that
 * immortalized strings read as a drop).  When the dict was resized, the
 * count cannot tell what is new: the snapshot reads -1 (no blocks, no
 * py_allocs) and the next ones count on from there.
 */
#if PY_VERSION_HEX >= 0x030D0000 && !defined(Py_GIL_DISABLED)
#define LC__COUNT_INTERNED 1
static struct {
    PyObject *dict;             /* the interned strings, or NULL          */
    void *keys;                 /* its table when last looked at          */
    Py_ssize_t pos;             /* PyDict_Next's place in that table      */
    int64_t immortal;           /* immortal ones among those looked at    */
} interned;

static int64_t
count_interned(void)
{
    PyObject *key, *value;
    int resized;

    if (interned.dict == NULL || !PyDict_CheckExact(interned.dict))
        return -1;
    resized = ((PyDictObject *)interned.dict)->ma_keys != interned.keys;
    if (resized) {
        interned.keys = ((PyDictObject *)interned.dict)->ma_keys;
        interned.pos = 0;
        interned.immortal = 0;
    }
    while (PyDict_Next(interned.dict, &interned.pos, &key, &value))
        if (PyUnicode_CheckExact(key) &&
            PyUnicode_CHECK_INTERNED(key) == SSTATE_INTERNED_IMMORTAL)
            interned.immortal++;
    return resized ? -1 : interned.immortal;
}
#endif

/* interned_count() -> n or None: the engine's count now, as a snapshot
 * reads it (None while the engine asks sys instead). */
static PyObject *
core_interned_count(PyObject *mod, PyObject *unused)
{
#ifdef LC__COUNT_INTERNED
    if (interned.dict != NULL)
        return PyLong_FromLongLong((long long)count_interned());
#endif
    (void)mod;
    (void)unused;
    Py_RETURN_NONE;
}

static PyObject *
core_count_interned_in(PyObject *mod, PyObject *arg)
{
#ifdef LC__COUNT_INTERNED
    if (arg == Py_None) {
        lc__set_interned_counter(NULL);
        Py_CLEAR(interned.dict);
        Py_RETURN_NONE;
    }
    if (!PyDict_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "count_interned_in: not a dict");
        return NULL;
    }
    Py_INCREF(arg);
    Py_XSETREF(interned.dict, arg);
    interned.keys = NULL;           /* the first count looks at them all */
    (void)count_interned();
    lc__set_interned_counter(count_interned);
    return PyLong_FromLongLong((long long)interned.immortal);
#else
    (void)mod;
    if (arg == Py_None)
        Py_RETURN_NONE;
    PyErr_SetString(PyExc_NotImplementedError,
                    "count_interned_in: CPython 3.13 and later, with the GIL");
    return NULL;
#endif
}

/* ---- settling's loops --------------------------------------------------- */

/*
 * Two loops of leakcheck._settle.settle(), which runs before every
 * snapshot, over every ABC and every module: here they cost a few
 * nanoseconds an item.  Each clears what settle() cleared before, by the
 * same call; they only skip what holds nothing.
 */

static PyObject *str_abc_impl;          /* "_abc_impl", interned at import  */
static PyObject *str_warningregistry;   /* "__warningregistry__"            */

/* The layout of _abc's _abc_data (Modules/_abc.c, unchanged from 3.7 on):
 * settle() checks it against _abc._get_dump() before relying on it. */
typedef struct {
    PyObject_HEAD
    PyObject *registry;         /* a set of weak references, or NULL        */
    PyObject *cache;            /* the same                                 */
    PyObject *negative_cache;   /* the same                                 */
    unsigned long long negative_cache_version;
} abc_data;

/* 1 when one of an ABC's two caches holds something, 0 when both are
 * empty, -1 when that cannot be read (not the C abc's data). */
static int
abc_cached(PyObject *cls)
{
    PyObject *dict, *impl;
    abc_data *d;

    if (!PyType_Check(cls))
        return -1;
    dict = ((PyTypeObject *)cls)->tp_dict;
    impl = dict != NULL && PyDict_CheckExact(dict)
               ? PyDict_GetItemWithError(dict, str_abc_impl)
               : NULL;
    if (impl == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (strcmp(Py_TYPE(impl)->tp_name, "_abc._abc_data") != 0)
        return -1;
    d = (abc_data *)impl;
    if ((d->cache != NULL && !PySet_Check(d->cache)) ||
        (d->negative_cache != NULL && !PySet_Check(d->negative_cache)))
        return -1;
    return (d->cache != NULL && PySet_GET_SIZE(d->cache) > 0) ||
           (d->negative_cache != NULL &&
            PySet_GET_SIZE(d->negative_cache) > 0);
}

static PyObject *
core_abc_cache_sizes(PyObject *mod, PyObject *cls)
{
    int cached = abc_cached(cls);
    abc_data *d;

    if (cached < 0)
        Py_RETURN_NONE;
    d = (abc_data *)PyDict_GetItemWithError(((PyTypeObject *)cls)->tp_dict,
                                            str_abc_impl);
    return Py_BuildValue(
        "(nn)", d->cache != NULL ? PySet_GET_SIZE(d->cache) : 0,
        d->negative_cache != NULL ? PySet_GET_SIZE(d->negative_cache) : 0);
}

/* The flags of settling's loops: a bytearray with one byte per item of
 * `items` (a tuple), or NULL after an exception. */
static char *
settle_flags(PyObject *flags, PyObject *items, const char *who)
{
    if (!PyByteArray_CheckExact(flags) ||
        PyByteArray_GET_SIZE(flags) != PyTuple_GET_SIZE(items)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a bytearray of one flag per item expected", who);
        return NULL;
    }
    return PyByteArray_AS_STRING(flags);
}

/* abc_reset(abcs, reset, seen, light) -> n: calls reset(cls) on each ABC
 * of `abcs` (weak references) whose caches hold something, and sets its
 * byte in `seen`; when `light`, looks only at those whose byte is set (the
 * ABCs seen filled before).  Allocates nothing of its own. */
static PyObject *
core_abc_reset(PyObject *mod, PyObject *args)
{
    PyObject *refs, *reset, *flags;
    Py_ssize_t i, n = 0;
    int light;
    char *seen;

    if (!PyArg_ParseTuple(args, "O!OOp:abc_reset", &PyTuple_Type, &refs,
                          &reset, &flags, &light))
        return NULL;
    if ((seen = settle_flags(flags, refs, "abc_reset")) == NULL)
        return NULL;
    for (i = 0; i < PyTuple_GET_SIZE(refs); i++) {
        PyObject *ref = PyTuple_GET_ITEM(refs, i), *cls, *r;
        if (light && !seen[i])
            continue;
        if (!PyWeakref_Check(ref) || (cls = deref(ref)) == NULL)
            continue;
        if (abc_cached(cls) != 0) {
            seen[i] = 1;
            r = PyObject_CallOneArg(reset, cls);
            if (r == NULL) {
                Py_DECREF(cls);
                return NULL;
            }
            Py_DECREF(r);
            n++;
        }
        Py_DECREF(cls);
    }
    return PyLong_FromSsize_t(n);
}

/* clear_registries(namespaces, seen, light) -> n: empties the
 * __warningregistry__ dict of each namespace that has one, and sets its
 * byte in `seen`; when `light`, looks only at those whose byte is set. */
static PyObject *
core_clear_registries(PyObject *mod, PyObject *args)
{
    PyObject *namespaces, *flags;
    Py_ssize_t i, n = 0;
    int light;
    char *seen;

    if (!PyArg_ParseTuple(args, "O!Op:clear_registries", &PyTuple_Type,
                          &namespaces, &flags, &light))
        return NULL;
    if ((seen = settle_flags(flags, namespaces, "clear_registries")) == NULL)
        return NULL;
    for (i = 0; i < PyTuple_GET_SIZE(namespaces); i++) {
        PyObject *ns = PyTuple_GET_ITEM(namespaces, i), *registry;
        if ((light && !seen[i]) || !PyDict_CheckExact(ns))
            continue;
        registry = PyDict_GetItemWithError(ns, str_warningregistry);
        if (registry == NULL) {
            if (PyErr_Occurred())
                return NULL;
            continue;
        }
        if (PyDict_CheckExact(registry)) {
            seen[i] = 1;
            /* Clearing can run finalizers that touch the namespace. */
            Py_INCREF(registry);
            PyDict_Clear(registry);
            Py_DECREF(registry);
            n++;
        }
    }
    return PyLong_FromSsize_t(n);
}

/* call_each(callables) -> n: calls each of the tuple `callables` with no
 * argument, as settling's loop over the standard library's cache clears
 * did in Python (`try: clear() except Exception: pass`): an Exception one
 * raises is dropped and the next is called; anything else (KeyboardInterrupt,
 * SystemExit) propagates.  n: how many returned.  One C loop instead of a
 * Python one: settling runs before every snapshot. */
static PyObject *
core_call_each(PyObject *mod, PyObject *callables)
{
    Py_ssize_t i, n = 0;

    if (!PyTuple_Check(callables)) {
        PyErr_SetString(PyExc_TypeError, "call_each: a tuple expected");
        return NULL;
    }
    for (i = 0; i < PyTuple_GET_SIZE(callables); i++) {
        PyObject *r = PyObject_CallNoArgs(PyTuple_GET_ITEM(callables, i));
        if (r != NULL) {
            Py_DECREF(r);
            n++;
        }
        else if (PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear();
        else
            return NULL;
    }
    return PyLong_FromSsize_t(n);
}

/* True when every entry of linecache.cache `arg` (an exact dict) is one no
 * file backs, which settling keeps: a 4-tuple whose mtime is None (code
 * registered by exec or generation); False when one is to drop, or `arg` is
 * not an exact dict.  Settling rebuilds the cache only then: with the 67
 * entries attrs registers, the check took 1 us and the rebuild 10. */
static PyObject *
core_linecache_settled(PyObject *mod, PyObject *arg)
{
    Py_ssize_t pos = 0;
    PyObject *key, *entry;

    (void)mod;
    if (!PyDict_CheckExact(arg))
        Py_RETURN_FALSE;
    while (PyDict_Next(arg, &pos, &key, &entry)) {
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4 ||
                PyTuple_GET_ITEM(entry, 1) != Py_None)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* ---- Snapshot ----------------------------------------------------------- */

typedef struct snapshot_object {
    PyObject_HEAD
    lc_snapshot *snap;                  /* the readings (engine memory)    */
    int64_t refs_own;                   /* our share of the refs reading   */
    int64_t native_own;                 /* ... and of native_bytes         */
    struct snapshot_object *prev, *next; /* live snapshots; GIL-protected  */
} SnapshotObject;

static PyTypeObject Snapshot_Type;
static SnapshotObject *live_snapshots;  /* head of the live list           */
static Py_ssize_t n_live_snapshots;

/* The heap bytes one Snapshot holds, as mallinfo2 counts in-use chunks. */
static int64_t
native_cost(SnapshotObject *s)
{
#if defined(__GLIBC__)
    return (int64_t)(malloc_usable_size(s) + malloc_usable_size(s->snap) +
                     2 * sizeof(size_t));
#else
    (void)s;
    return 0;
#endif
}

static void
snapshot_dealloc(SnapshotObject *self)
{
    if (self->prev)
        self->prev->next = self->next;
    else
        live_snapshots = self->next;
    if (self->next)
        self->next->prev = self->prev;
    n_live_snapshots--;
    lc_snapshot_free(self->snap);
    free(self);
}

/* Snapshot(mask, flags=0): reads the probes of `mask` now. */
static PyObject *
snapshot_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"mask", "flags", NULL};
    unsigned int mask, flags = 0;
    SnapshotObject *self, *s;
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|I:Snapshot", kwlist,
                                     &mask, &flags))
        return NULL;
    /* malloc, not PyObject_Malloc: see the comment at the top. */
    self = malloc(sizeof *self);
    if (self == NULL)
        return PyErr_NoMemory();
    self->snap = lc_snapshot_new();
    if (self->snap == NULL) {
        free(self);
        return PyErr_NoMemory();
    }
    PyObject_Init((PyObject *)self, &Snapshot_Type);
    self->refs_own = self->native_own = 0;
    self->prev = NULL;
    self->next = live_snapshots;
    if (live_snapshots)
        live_snapshots->prev = self;
    live_snapshots = self;
    n_live_snapshots++;

    /* A reading that does not collect (the heap-line tracer's, at every
     * trace event) drops no frame: it would read the drop as the running
     * line's heap shrinking. */
    uncollected = (flags & LC_SNAPSHOT_NO_COLLECT) != 0;
    rc = lc_snapshot_take(self->snap, mask, flags);
    uncollected = 0;
    /* Every live Snapshot, this one included, was counted by the reading;
     * nothing has touched their reference counts since. */
    for (s = live_snapshots; s != NULL; s = s->next) {
        self->refs_own += (int64_t)Py_REFCNT(s);
        self->native_own += native_cost(s);
    }
    if (check(rc) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* The reading of `probe`, net of the Snapshots' own share; 0 or -1. */
static int
snapshot_get(SnapshotObject *self, int probe, int64_t *value)
{
    if (lc_snapshot_value(self->snap, probe, value) != LC_OK)
        return -1;
    if (probe == LC_PROBE_REFS)
        *value -= self->refs_own;
    else if (probe == LC_PROBE_NATIVE_BYTES)
        *value -= self->native_own;
    return 0;
}

/* The probe a mapping key names, or -1 (no exception set). */
static int
snapshot_key(SnapshotObject *self, PyObject *key)
{
    const char *name;
    int probe;

    if (!PyUnicode_Check(key) || (name = PyUnicode_AsUTF8(key)) == NULL) {
        PyErr_Clear();
        return -1;
    }
    probe = lc_probe_lookup(name);
    if (probe < 0 || !(lc_snapshot_probes(self->snap) & LC_PROBE_BIT(probe)))
        return -1;
    return probe;
}

static PyObject *
snapshot_subscript(SnapshotObject *self, PyObject *key)
{
    int64_t v;
    int probe = snapshot_key(self, key);

    if (probe < 0 || snapshot_get(self, probe, &v) < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return PyLong_FromLongLong((long long)v);
}

static Py_ssize_t
snapshot_length(SnapshotObject *self)
{
    return __builtin_popcount(lc_snapshot_probes(self->snap));
}

static int
snapshot_contains(SnapshotObject *self, PyObject *key)
{
    return snapshot_key(self, key) >= 0;
}

/* {name: reading} in probe order: what keys(), items(), values(), ==, -
 * and repr() are built on. */
static PyObject *
snapshot_dict(SnapshotObject *self)
{
    PyObject *d = PyDict_New();
    int p;

    if (d == NULL)
        return NULL;
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        lc_probe_info info;
        PyObject *v;
        int64_t value;

        if (snapshot_get(self, p, &value) < 0)
            continue;
        lc_probe_get_info(p, &info);
        v = PyLong_FromLongLong((long long)value);
        if (v == NULL || PyDict_SetItemString(d, info.name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *
snapshot_iter(SnapshotObject *self)
{
    PyObject *d = snapshot_dict(self), *it;

    if (d == NULL)
        return NULL;
    it = PyObject_GetIter(d);
    Py_DECREF(d);
    return it;
}

static PyObject *
snapshot_view(SnapshotObject *self, const char *method)
{
    PyObject *d = snapshot_dict(self), *v;

    if (d == NULL)
        return NULL;
    v = PyObject_CallMethod(d, method, NULL);
    Py_DECREF(d);
    return v;
}

static PyObject *
snapshot_keys(SnapshotObject *self, PyObject *unused)
{
    return snapshot_view(self, "keys");
}

static PyObject *
snapshot_items(SnapshotObject *self, PyObject *unused)
{
    return snapshot_view(self, "items");
}

static PyObject *
snapshot_values(SnapshotObject *self, PyObject *unused)
{
    return snapshot_view(self, "values");
}

static PyObject *
snapshot_get_method(SnapshotObject *self, PyObject *args)
{
    PyObject *key, *dflt = Py_None;
    int64_t v;
    int probe;

    if (!PyArg_UnpackTuple(args, "get", 1, 2, &key, &dflt))
        return NULL;
    probe = snapshot_key(self, key);
    if (probe < 0 || snapshot_get(self, probe, &v) < 0) {
        Py_INCREF(dflt);
        return dflt;
    }
    return PyLong_FromLongLong((long long)v);
}

static PyObject *
snapshot_mask(SnapshotObject *self, void *closure)
{
    return PyLong_FromUnsignedLong(lc_snapshot_probes(self->snap));
}

/* b - a: {name: b[name] - a[name]} for the probes both hold. */
static PyObject *
snapshot_subtract(PyObject *b, PyObject *a)
{
    SnapshotObject *sa, *sb;
    PyObject *d;
    int p;

    if (!PyObject_TypeCheck(a, &Snapshot_Type) ||
        !PyObject_TypeCheck(b, &Snapshot_Type))
        Py_RETURN_NOTIMPLEMENTED;
    sa = (SnapshotObject *)a;
    sb = (SnapshotObject *)b;
    if ((d = PyDict_New()) == NULL)
        return NULL;
    for (p = 0; p < LC_PROBE_COUNT; p++) {
        lc_probe_info info;
        int64_t va, vb;
        PyObject *v;

        if (snapshot_get(sa, p, &va) < 0 || snapshot_get(sb, p, &vb) < 0)
            continue;
        lc_probe_get_info(p, &info);
        v = PyLong_FromLongLong((long long)(vb - va));
        if (v == NULL || PyDict_SetItemString(d, info.name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *
snapshot_richcompare(PyObject *self, PyObject *other, int op)
{
    PyObject *d, *r;

    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(other, &Snapshot_Type))
        Py_RETURN_NOTIMPLEMENTED;
    if ((d = snapshot_dict((SnapshotObject *)self)) == NULL)
        return NULL;
    if ((r = snapshot_dict((SnapshotObject *)other)) == NULL) {
        Py_DECREF(d);
        return NULL;
    }
    Py_SETREF(d, PyObject_RichCompare(d, r, op));
    Py_DECREF(r);
    return d;
}

static PyObject *
snapshot_repr(SnapshotObject *self)
{
    PyObject *d = snapshot_dict(self), *r;

    if (d == NULL)
        return NULL;
    r = PyUnicode_FromFormat("Snapshot(%R)", d);
    Py_DECREF(d);
    return r;
}

static PyMappingMethods snapshot_as_mapping = {
    .mp_length = (lenfunc)snapshot_length,
    .mp_subscript = (binaryfunc)snapshot_subscript,
};

static PySequenceMethods snapshot_as_sequence = {
    .sq_contains = (objobjproc)snapshot_contains,
};

static PyNumberMethods snapshot_as_number = {
    .nb_subtract = snapshot_subtract,
};

static PyMethodDef snapshot_methods[] = {
    {"keys", (PyCFunction)snapshot_keys, METH_NOARGS, "The probe names."},
    {"items", (PyCFunction)snapshot_items, METH_NOARGS,
     "(probe name, reading) pairs."},
    {"values", (PyCFunction)snapshot_values, METH_NOARGS, "The readings."},
    {"get", (PyCFunction)snapshot_get_method, METH_VARARGS,
     "get(name, default=None): the reading of probe `name`."},
    {NULL},
};

static PyGetSetDef snapshot_getset[] = {
    {"mask", (getter)snapshot_mask, NULL,
     "the engine's bit mask of the probes read", NULL},
    {NULL},
};

static PyTypeObject Snapshot_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "leakcheck.Snapshot",
    .tp_basicsize = sizeof(SnapshotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,     /* final, and not GC-tracked */
    .tp_doc = "Snapshot(mask, flags=0): the readings of the probes in "
              "`mask`, taken after settling and a full collection; a "
              "read-only mapping of probe name to reading.  `b - a` is a "
              "dict of deltas.",
    .tp_new = snapshot_new,
    .tp_dealloc = (destructor)snapshot_dealloc,
    .tp_repr = (reprfunc)snapshot_repr,
    .tp_as_number = &snapshot_as_number,
    .tp_as_sequence = &snapshot_as_sequence,
    .tp_as_mapping = &snapshot_as_mapping,
    .tp_richcompare = snapshot_richcompare,
    .tp_iter = (getiterfunc)snapshot_iter,
    .tp_methods = snapshot_methods,
    .tp_getset = snapshot_getset,
};

/* ---- Scope -------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    lc_scope *scope;
    PyObject *file;                     /* keeps the location's text alive */
} ScopeObject;

static void
scope_dealloc(ScopeObject *self)
{
    lc_scope_free(self->scope);
    Py_XDECREF(self->file);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
scope_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"name", NULL};
    const char *name = NULL;
    ScopeObject *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|z:Scope", kwlist, &name))
        return NULL;
    self = (ScopeObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->scope = lc_scope_new(name);
    if (self->scope == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static PyObject *
scope_set_probes(ScopeObject *self, PyObject *arg)
{
    unsigned long mask = PyLong_AsUnsignedLong(arg);

    if (PyErr_Occurred() || check(lc_scope_set_probes(self->scope, mask)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
scope_set_tolerance(ScopeObject *self, PyObject *args)
{
    int probe;
    long long tol;

    if (!PyArg_ParseTuple(args, "iL:set_tolerance", &probe, &tol) ||
        check(lc_scope_set_tolerance(self->scope, probe, tol)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
scope_set_baseline(ScopeObject *self, PyObject *args)
{
    int probe;
    long long baseline;

    if (!PyArg_ParseTuple(args, "iL:set_baseline", &probe, &baseline) ||
        check(lc_scope_set_baseline(self->scope, probe, baseline)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
scope_set_location(ScopeObject *self, PyObject *args)
{
    PyObject *file;
    const char *text;
    int line;

    if (!PyArg_ParseTuple(args, "Ui:set_location", &file, &line) ||
        (text = PyUnicode_AsUTF8(file)) == NULL)
        return NULL;
    /* The engine keeps the pointer: the str (and its UTF-8) must live. */
    Py_INCREF(file);
    Py_XSETREF(self->file, file);
    lc_scope_set_location(self->scope, text, line);
    Py_RETURN_NONE;
}

static PyObject *
scope_begin(ScopeObject *self, PyObject *unused)
{
    if (check(lc_scope_begin(self->scope)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
scope_end(ScopeObject *self, PyObject *unused)
{
    if (check(lc_scope_end(self->scope)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
scope_leaked(ScopeObject *self, PyObject *unused)
{
    int r = lc_scope_leaked(self->scope);

    if (check(r) < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
scope_probes(ScopeObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lc_scope_probes(self->scope));
}

static PyObject *
scope_leaking(ScopeObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lc_scope_leaking(self->scope));
}

static PyObject *
scope_delta(ScopeObject *self, PyObject *arg)
{
    int64_t d;
    int probe;

    if (probe_arg(arg, &probe) < 0 ||
        check(lc_scope_delta(self->scope, probe, &d)) < 0)
        return NULL;
    return PyLong_FromLongLong((long long)d);
}

static PyObject *
scope_report(ScopeObject *self, PyObject *unused)
{
    return report_str(self->scope, NULL);
}

static PyMethodDef scope_methods[] = {
    {"set_probes", (PyCFunction)scope_set_probes, METH_O, NULL},
    {"set_tolerance", (PyCFunction)scope_set_tolerance, METH_VARARGS, NULL},
    {"set_baseline", (PyCFunction)scope_set_baseline, METH_VARARGS, NULL},
    {"set_location", (PyCFunction)scope_set_location, METH_VARARGS, NULL},
    {"begin", (PyCFunction)scope_begin, METH_NOARGS, NULL},
    {"end", (PyCFunction)scope_end, METH_NOARGS, NULL},
    {"leaked", (PyCFunction)scope_leaked, METH_NOARGS, NULL},
    {"probes", (PyCFunction)scope_probes, METH_NOARGS, NULL},
    {"leaking", (PyCFunction)scope_leaking, METH_NOARGS, NULL},
    {"delta", (PyCFunction)scope_delta, METH_O, NULL},
    {"report", (PyCFunction)scope_report, METH_NOARGS, NULL},
    {NULL},
};

static PyTypeObject Scope_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "leakcheck._core.Scope",
    .tp_basicsize = sizeof(ScopeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scope(name=None): the engine's lc_scope.",
    .tp_new = scope_new,
    .tp_dealloc = (destructor)scope_dealloc,
    .tp_methods = scope_methods,
};

/* ---- Series ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    lc_series *series;
    PyObject *file;                     /* keeps the location's text alive */
} SeriesObject;

static void
series_dealloc(SeriesObject *self)
{
    lc_series_free(self->series);
    Py_XDECREF(self->file);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
series_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"name", "warmup", "repeat", NULL};
    const char *name = NULL;
    int warmup, repeat;
    SeriesObject *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "zii:Series", kwlist, &name,
                                     &warmup, &repeat))
        return NULL;
    if (warmup < 0 || repeat < 1 || repeat > 10000) {
        PyErr_SetString(PyExc_ValueError,
                        "leakcheck: warmup must be >= 0 and repeat from 1 "
                        "to 10000");
        return NULL;
    }
    self = (SeriesObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->series = lc_series_new(name, warmup, repeat);
    if (self->series == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static PyObject *
series_set_probes(SeriesObject *self, PyObject *arg)
{
    unsigned long mask = PyLong_AsUnsignedLong(arg);

    if (PyErr_Occurred() || check(lc_series_set_probes(self->series, mask)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
series_set_threshold(SeriesObject *self, PyObject *args)
{
    int probe;
    long long threshold;

    if (!PyArg_ParseTuple(args, "iL:set_threshold", &probe, &threshold) ||
        check(lc_series_set_threshold(self->series, probe, threshold)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
series_set_tolerance(SeriesObject *self, PyObject *args)
{
    int probe;
    long long tolerance;

    if (!PyArg_ParseTuple(args, "iL:set_tolerance", &probe, &tolerance) ||
        check(lc_series_set_tolerance(self->series, probe, tolerance)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
series_set_confirm(SeriesObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);

    if (on < 0 || check(lc_series_set_confirm(self->series, on)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
series_set_location(SeriesObject *self, PyObject *args)
{
    PyObject *file;
    const char *text;
    int line;

    if (!PyArg_ParseTuple(args, "Ui:set_location", &file, &line) ||
        (text = PyUnicode_AsUTF8(file)) == NULL)
        return NULL;
    Py_INCREF(file);
    Py_XSETREF(self->file, file);
    lc_series_set_location(self->series, text, line);
    Py_RETURN_NONE;
}

static PyObject *
series_set_thorough(SeriesObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);

    if (on < 0 || check(lc_series_set_thorough(self->series, on)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
series_window(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromLong(lc_series_window(self->series));
}

static PyObject *
series_main_runs(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromLong(lc_series_main_runs(self->series));
}

static PyObject *
series_next(SeriesObject *self, PyObject *unused)
{
    int rc = lc_series_next(self->series);

    if (check(rc) < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

/* rebase(): lc__series_rebase, between two measured runs. */
static PyObject *
series_rebase(SeriesObject *self, PyObject *unused)
{
    if (check(lc__series_rebase(self->series)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* feed(mask, deltas): lc_series_feed, `deltas` a sequence of
 * PROBE_COUNT ints (those of probes outside `mask` unread) or None. */
static PyObject *
series_feed(SeriesObject *self, PyObject *args)
{
    int64_t deltas[LC_PROBE_COUNT];
    unsigned long mask;
    PyObject *seq, *fast;
    int p, rc;

    if (!PyArg_ParseTuple(args, "kO:feed", &mask, &seq))
        return NULL;
    if (seq != Py_None) {
        fast = PySequence_Fast(seq, "leakcheck: feed() takes a sequence of "
                                    "deltas, or None");
        if (fast == NULL)
            return NULL;
        if (PySequence_Fast_GET_SIZE(fast) != LC_PROBE_COUNT) {
            Py_DECREF(fast);
            return PyErr_Format(PyExc_ValueError, "leakcheck: feed() takes "
                                "%d deltas, one per probe", LC_PROBE_COUNT);
        }
        for (p = 0; p < LC_PROBE_COUNT; p++) {
            long long d = PyLong_AsLongLong(
                PySequence_Fast_GET_ITEM(fast, p));
            if (d == -1 && PyErr_Occurred()) {
                Py_DECREF(fast);
                return NULL;
            }
            deltas[p] = d;
        }
        Py_DECREF(fast);
    }
    rc = lc_series_feed(self->series, (unsigned)mask,
                        seq == Py_None ? NULL : deltas);
    if (check(rc) < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

static PyObject *
series_confirming(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lc_series_confirming(self->series));
}

static PyObject *
series_confirm_runs(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromLong(lc_series_confirm_runs(self->series));
}

static PyObject *
series_leaked(SeriesObject *self, PyObject *unused)
{
    int r = lc_series_leaked(self->series);

    if (check(r) < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
series_probes(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lc_series_probes(self->series));
}

static PyObject *
series_leaking(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lc_series_leaking(self->series));
}

static PyObject *
series_runs(SeriesObject *self, PyObject *unused)
{
    return PyLong_FromLong(lc_series_runs(self->series));
}

static PyObject *
series_warmup_measured(SeriesObject *self, PyObject *unused)
{
    return PyBool_FromLong(lc_series_warmup_measured(self->series));
}

/* The delta of `probe` in the last warm-up run, or None when that run
 * was not read (lc_series_warmup_delta). */
static PyObject *
series_warmup_delta(SeriesObject *self, PyObject *arg)
{
    int probe, rc;
    int64_t d;

    if (probe_arg(arg, &probe) < 0)
        return NULL;
    rc = lc_series_warmup_delta(self->series, probe, &d);
    if (rc == LC_EUNAVAIL)
        Py_RETURN_NONE;
    if (check(rc) < 0)
        return NULL;
    return PyLong_FromLongLong((long long)d);
}

static PyObject *
series_delta(SeriesObject *self, PyObject *args)
{
    int run, probe;
    int64_t d;

    if (!PyArg_ParseTuple(args, "ii:delta", &run, &probe) ||
        check(lc_series_delta(self->series, run, probe, &d)) < 0)
        return NULL;
    return PyLong_FromLongLong((long long)d);
}

/* The deltas of one probe over the first `runs` runs, as a list: what
 * Series._finish() reads of every probe, in one call. */
static PyObject *
series_deltas(SeriesObject *self, PyObject *args)
{
    int probe, runs, run;
    PyObject *list;

    if (!PyArg_ParseTuple(args, "ii:deltas", &probe, &runs))
        return NULL;
    if (runs < 0) {
        PyErr_SetString(PyExc_ValueError, "deltas: runs must be >= 0");
        return NULL;
    }
    list = PyList_New(runs);
    if (list == NULL)
        return NULL;
    for (run = 0; run < runs; run++) {
        int64_t d;
        PyObject *v;

        if (check(lc_series_delta(self->series, run, probe, &d)) < 0 ||
            (v = PyLong_FromLongLong((long long)d)) == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, run, v);
    }
    return list;
}

/* results(names) -> (deltas, thresholds): what Series._finish reads of
 * a finished series in one call, {name: [delta per run]} and {name:
 * threshold} of its probes in probe order, `names` the tuple of every
 * probe's name by index (PROBE_NAMES).  A probe the confirming runs read
 * has a delta per run; the others one per run before the confirming
 * ones, as deltas() gives them. */
static PyObject *
series_results(SeriesObject *self, PyObject *names)
{
    unsigned long probes, confirming;
    int runs, before, probe;
    PyObject *deltas, *thresholds;

    if (!PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "results: names must be a tuple");
        return NULL;
    }
    probes = lc_series_probes(self->series);
    confirming = lc_series_confirming(self->series);
    runs = lc_series_runs(self->series);
    before = runs - lc_series_confirm_runs(self->series);
    if (before < 0) {
        PyErr_SetString(PyExc_ValueError, "deltas: runs must be >= 0");
        return NULL;
    }
    deltas = PyDict_New();
    thresholds = PyDict_New();
    if (deltas == NULL || thresholds == NULL)
        goto error;
    for (probe = 0; probe < PyTuple_GET_SIZE(names) &&
         probe < (int)(sizeof probes * CHAR_BIT); probe++) {
        PyObject *name = PyTuple_GET_ITEM(names, probe), *list, *v;
        int n, run, r;

        if (!(probes >> probe & 1))
            continue;
        n = confirming >> probe & 1 ? runs : before;
        list = PyList_New(n);
        if (list == NULL)
            goto error;
        for (run = 0; run < n; run++) {
            int64_t d;

            if (check(lc_series_delta(self->series, run, probe, &d)) < 0 ||
                (v = PyLong_FromLongLong((long long)d)) == NULL) {
                Py_DECREF(list);
                goto error;
            }
            PyList_SET_ITEM(list, run, v);
        }
        r = PyDict_SetItem(deltas, name, list);
        Py_DECREF(list);
        if (r < 0)
            goto error;
        v = PyLong_FromLongLong(
            (long long)lc_series_threshold(self->series, probe));
        if (v == NULL)
            goto error;
        r = PyDict_SetItem(thresholds, name, v);
        Py_DECREF(v);
        if (r < 0)
            goto error;
    }
    return Py_BuildValue("(NN)", deltas, thresholds);
error:
    Py_XDECREF(deltas);
    Py_XDECREF(thresholds);
    return NULL;
}

static PyObject *
series_threshold(SeriesObject *self, PyObject *arg)
{
    int probe;

    if (probe_arg(arg, &probe) < 0)
        return NULL;
    return PyLong_FromLongLong(
        (long long)lc_series_threshold(self->series, probe));
}

static PyObject *
series_report(SeriesObject *self, PyObject *unused)
{
    return report_str(NULL, self->series);
}

static PyMethodDef series_methods[] = {
    {"set_probes", (PyCFunction)series_set_probes, METH_O, NULL},
    {"set_threshold", (PyCFunction)series_set_threshold, METH_VARARGS, NULL},
    {"set_tolerance", (PyCFunction)series_set_tolerance, METH_VARARGS,
     NULL},
    {"set_confirm", (PyCFunction)series_set_confirm, METH_O, NULL},
    {"set_location", (PyCFunction)series_set_location, METH_VARARGS, NULL},
    {"set_thorough", (PyCFunction)series_set_thorough, METH_O, NULL},
    {"window", (PyCFunction)series_window, METH_NOARGS, NULL},
    {"main_runs", (PyCFunction)series_main_runs, METH_NOARGS, NULL},
    {"next", (PyCFunction)series_next, METH_NOARGS, NULL},
    {"rebase", (PyCFunction)series_rebase, METH_NOARGS, NULL},
    {"feed", (PyCFunction)series_feed, METH_VARARGS, NULL},
    {"confirming", (PyCFunction)series_confirming, METH_NOARGS, NULL},
    {"confirm_runs", (PyCFunction)series_confirm_runs, METH_NOARGS, NULL},
    {"leaked", (PyCFunction)series_leaked, METH_NOARGS, NULL},
    {"probes", (PyCFunction)series_probes, METH_NOARGS, NULL},
    {"leaking", (PyCFunction)series_leaking, METH_NOARGS, NULL},
    {"runs", (PyCFunction)series_runs, METH_NOARGS, NULL},
    {"warmup_measured", (PyCFunction)series_warmup_measured, METH_NOARGS,
     NULL},
    {"warmup_delta", (PyCFunction)series_warmup_delta, METH_O, NULL},
    {"delta", (PyCFunction)series_delta, METH_VARARGS, NULL},
    {"deltas", (PyCFunction)series_deltas, METH_VARARGS, NULL},
    {"threshold", (PyCFunction)series_threshold, METH_O, NULL},
    {"results", (PyCFunction)series_results, METH_O, NULL},
    {"report", (PyCFunction)series_report, METH_NOARGS, NULL},
    {NULL},
};

static PyTypeObject Series_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "leakcheck._core.Series",
    .tp_basicsize = sizeof(SeriesObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Series(name, warmup, repeat): the engine's lc_series.",
    .tp_new = series_new,
    .tp_dealloc = (destructor)series_dealloc,
    .tp_methods = series_methods,
};

/* ---- module ------------------------------------------------------------- */

static PyMethodDef core_methods[] = {
    {"set_settle", core_set_settle, METH_O,
     "set_settle(fn): call fn() before the collection that starts every "
     "snapshot (None removes it); fn is held weakly: keep it alive."},
    {"probe_info", core_probe_info, METH_O,
     "probe_info(n) -> (name, unit, doc, available, reason, tolerance, "
     "threshold)"},
    {"probes_available", core_probes_available, METH_NOARGS,
     "The mask of probes that can be read now."},
    {"hook_restored", core_hook_restored, METH_NOARGS,
     "How many times the allocator hook behind py_bytes and py_allocs was "
     "found taken out and put back."},
    {"release_hook", core_release_hook, METH_NOARGS,
     "release_hook() -> n: takes the allocator hook off the mem and object "
     "domains where it is on top (at the interpreter's exit: no reading "
     "follows); how many.  A later snapshot puts it back."},
    {"blocks_check", core_blocks_check, METH_NOARGS,
     "(blocks read from the allocator hook's count, blocks walked) at one "
     "instant, or None while snapshots walk the pools."},
    {"allocated_blocks", core_allocated_blocks, METH_VARARGS,
     "allocated_blocks(walk=True): sys.getallocatedblocks(), from the "
     "allocator hook's count where snapshots read it so (no walk of "
     "pymalloc's pools); elsewhere walked, or None when not `walk`."},
    {"threads", core_threads, METH_NOARGS,
     "The threads of this process, as the threads probe reads them."},
    {"abc_reset", core_abc_reset, METH_VARARGS,
     "abc_reset(refs, reset, seen, light) -> n: calls reset(cls) for each "
     "live class of the weak references refs whose ABC caches are not both "
     "empty, or cannot be read, and marks it in seen; only of those marked "
     "when light (settling's use only)."},
    {"abc_cache_sizes", core_abc_cache_sizes, METH_O,
     "(len of the cache, len of the negative cache) of an ABC as the C abc "
     "module lays them out, or None."},
    {"call_each", core_call_each, METH_O,
     "call_each(callables) -> n: calls each callable of the tuple with no "
     "argument; an Exception one raises is dropped, anything else "
     "propagates; n is how many returned (settling's use only)."},
    {"clear_registries", core_clear_registries, METH_VARARGS,
     "clear_registries(namespaces, seen, light) -> n: empties the "
     "__warningregistry__ dict of each namespace, only of those seen with "
     "one before when light (settling's use only)."},
    {"linecache_settled", core_linecache_settled, METH_O,
     "linecache_settled(cache) -> bool: True when every entry of that "
     "exact dict is a 4-tuple whose mtime is None, one settling keeps "
     "(settling's use only)."},
    {"shrink_after_collect", core_shrink_after_collect, METH_O,
     "shrink_after_collect(sets): the engine empties each of that tuple of "
     "sets that holds nothing after each snapshot's collection, which gives "
     "it back its inline table (settling's use only)."},
    {"trim_type_cache_after_collect", core_trim_type_cache_after_collect,
     METH_VARARGS,
     "trim_type_cache_after_collect(address, count, filler) or (None): the "
     "engine trims that type cache table after each snapshot's collection "
     "(settling's use only)."},
    {"interned_count", core_interned_count, METH_NOARGS,
     "interned_count() -> n or None: the engine's count of immortal "
     "interned strings now, as a snapshot reads it (-1: unreadable now), "
     "None when it asks sys.getunicodeinternedsize() instead."},
    {"count_interned_in", core_count_interned_in, METH_O,
     "count_interned_in(interned) -> n, or (None): the engine counts the "
     "immortal interned strings in that dict, the interpreter's, as they "
     "are added (settling's use only); n is how many it holds now."},
    {"type_cache_trim_read", core_type_cache_trim_read, METH_NOARGS,
     "type_cache_trim_read() -> n: how many of the type cache's entries "
     "the engine's last trim read (all, or those that held a name after "
     "the trim before)."},
    {"type_cache_trim", core_type_cache_trim, METH_VARARGS,
     "type_cache_trim(address, count, filler) -> n: empties the type "
     "cache's entries whose name only the cache holds (settling's use "
     "only)."},
    {"retarget", core_retarget, METH_VARARGS,
     "retarget(address, count, stride, old, new) -> n: moves the references "
     "to old in a table of pointer slots to new (settling's use only)."},
    {"pointer_at", core_pointer_at, METH_O,
     "pointer_at(address) -> int: the address a pointer slot holds "
     "(settling's use only)."},
    {"hold", core_hold, METH_VARARGS,
     "hold(address, new) -> bool: makes a pointer slot that owns a "
     "reference hold one to new instead (settling's use only)."},
    {"json_text", lc_py_json_text, METH_VARARGS,
     "json_text(value, item_separator, key_separator) -> str or None: "
     "json.dumps(value, separators=(item_separator, key_separator)), or "
     "None when value holds what only json's encoder writes (any type but "
     "exact dict with str keys, list, tuple, str, int, float, bool, None; "
     "nesting past 64)."},
    {"is_immortal", core_is_immortal, METH_O,
     "True for an immortal object (CPython 3.12+), whose reference count "
     "never changes."},
    {NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "leakcheck._core",
    .m_doc = "leakcheck's C engine; use the leakcheck package instead.",
    .m_size = -1,
    .m_methods = core_methods,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    PyObject *m;

    if (PyType_Ready(&Snapshot_Type) < 0 || PyType_Ready(&Scope_Type) < 0 ||
        PyType_Ready(&Series_Type) < 0)
        return NULL;
    if (str_abc_impl == NULL &&
        (str_abc_impl = PyUnicode_InternFromString("_abc_impl")) == NULL)
        return NULL;
    if (str_warningregistry == NULL &&
        (str_warningregistry =
             PyUnicode_InternFromString("__warningregistry__")) == NULL)
        return NULL;
    m = PyModule_Create(&core_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&Snapshot_Type);
    Py_INCREF(&Scope_Type);
    Py_INCREF(&Series_Type);
    if (PyModule_AddObject(m, "Snapshot", (PyObject *)&Snapshot_Type) < 0 ||
        PyModule_AddObject(m, "Scope", (PyObject *)&Scope_Type) < 0 ||
        PyModule_AddObject(m, "Series", (PyObject *)&Series_Type) < 0 ||
        PyModule_AddStringConstant(m, "VERSION", lc_version()) < 0 ||
        PyModule_AddIntConstant(m, "PROBE_COUNT", LC_PROBE_COUNT) < 0 ||
        PyModule_AddIntConstant(m, "SNAPSHOT_NO_COLLECT",
                                LC_SNAPSHOT_NO_COLLECT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    lc__set_after_collect(after_collect, NULL);
    return m;
}
