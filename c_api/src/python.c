/*
 * python.c — the probes that read CPython: refs, blocks, py_bytes,
 * py_allocs, objects, garbage.
 *
 * libleakcheck does not link libpython: it looks the C API up at run time
 * in the process (dlsym on RTLD_DEFAULT), so one build serves a pure C test,
 * a C test that embeds any CPython 3.9-3.15, and the Python extension.  Only
 * functions that every one of those versions exports are called, through
 * the declarations below, which need no Python header.
 *
 * Python objects the probes call (gc.collect, gc.get_objects, ...) are
 * looked up once per interpreter and dropped by a Py_AtExit callback, so a
 * finalized and re-initialized interpreter starts afresh.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef struct lc__pyobject PyObject;     /* opaque: never dereferenced   */
typedef ptrdiff_t Py_ssize_t;

/* The part of the C API used here; each is looked up by name. */
static struct {
    int resolved;                         /* 1 once dlsym has run          */
    int (*IsInitialized)(void);
    int (*GILState_Ensure)(void);
    void (*GILState_Release)(int);
    int (*AtExit)(void (*)(void));
    PyObject *(*ImportModule)(const char *);
    PyObject *(*GetAttrString)(PyObject *, const char *);
    PyObject *(*CallObject)(PyObject *, PyObject *);
    Py_ssize_t (*Long_AsSsize_t)(PyObject *);
    Py_ssize_t (*Object_Size)(PyObject *);
    void (*DecRef)(PyObject *);
    void (*Err_Fetch)(PyObject **, PyObject **, PyObject **);
    void (*Err_Restore)(PyObject *, PyObject *, PyObject *);
    void (*Err_Clear)(void);
    PyObject *(*Err_Occurred)(void);
    PyObject *(*List_New)(Py_ssize_t);
    void *Mem_GetAllocator;
    void *Mem_SetAllocator;
    Py_ssize_t (*GetAllocatedBlocks)(void); /* absent from 3.12 on       */
    PyObject *(*Object_Call)(PyObject *, PyObject *, PyObject *);
    PyObject *(*Tuple_New)(Py_ssize_t);
    PyObject *(*Dict_New)(void);
    int (*Dict_SetItemString)(PyObject *, const char *, PyObject *);
    PyObject *(*Bool_FromLong)(long);
    int free_threaded;          /* 1: a Py_GIL_DISABLED build (below)     */
} api;

/* Per-interpreter lookups; reset by the Py_AtExit callback. */
static struct {
    int ready;                  /* 1 when the objects below are looked up  */
    PyObject *gc_collect;       /* gc.collect                              */
    PyObject *gc_get_objects;   /* gc.get_objects                          */
    PyObject *gc_garbage;       /* the gc.garbage list                     */
    PyObject *sys_blocks;       /* sys.getallocatedblocks                  */
    PyObject *sys_totalrefs;    /* sys.gettotalrefcount, debug builds only */
    PyObject *interned;         /* sys.getunicodeinternedsize, 3.12+       */
    PyObject *interned_args;    /* () and {"_only_immortal": True} (3.13+) */
    PyObject *interned_kwargs;  /* or NULL (3.12: every one is immortal)   */
    int walk;                   /* 1: count objects by walking the GC list;
                                 * 0: by len(gc.get_objects())             */
    int blocks_based;           /* 1: blocks = the hook's pymalloc count
                                 * plus blocks_offset (see read_blocks)    */
    int64_t blocks_offset;
} py;

static lc_settle_fn settle_fn;
static void *settle_arg;
static lc_settle_fn after_collect_fn;
static void *after_collect_arg;

void
lc_set_settle(lc_settle_fn fn, void *arg)
{
    settle_fn = fn;
    settle_arg = arg;
}

void
lc__set_after_collect(lc_settle_fn fn, void *arg)
{
    after_collect_fn = fn;
    after_collect_arg = arg;
}

static lc__count_fn interned_counter;

void
lc__set_interned_counter(lc__count_fn fn)
{
    interned_counter = fn;
}

#define LC__SYM(field, name) (*(void **)&api.field = dlsym(RTLD_DEFAULT, name))

static void
resolve_once(void)
{
    LC__SYM(IsInitialized, "Py_IsInitialized");
    LC__SYM(GILState_Ensure, "PyGILState_Ensure");
    LC__SYM(GILState_Release, "PyGILState_Release");
    LC__SYM(AtExit, "Py_AtExit");
    LC__SYM(ImportModule, "PyImport_ImportModule");
    LC__SYM(GetAttrString, "PyObject_GetAttrString");
    LC__SYM(CallObject, "PyObject_CallObject");
    LC__SYM(Long_AsSsize_t, "PyLong_AsSsize_t");
    LC__SYM(Object_Size, "PyObject_Size");
    LC__SYM(DecRef, "Py_DecRef");
    LC__SYM(Err_Fetch, "PyErr_Fetch");
    LC__SYM(Err_Restore, "PyErr_Restore");
    LC__SYM(Err_Clear, "PyErr_Clear");
    LC__SYM(Err_Occurred, "PyErr_Occurred");
    LC__SYM(List_New, "PyList_New");
    api.Mem_GetAllocator = dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
    api.Mem_SetAllocator = dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
    LC__SYM(GetAllocatedBlocks, "_Py_GetAllocatedBlocks");
    LC__SYM(Object_Call, "PyObject_Call");
    LC__SYM(Tuple_New, "PyTuple_New");
    LC__SYM(Dict_New, "PyDict_New");
    LC__SYM(Dict_SetItemString, "PyDict_SetItemString");
    LC__SYM(Bool_FromLong, "PyBool_FromLong");
    api.free_threaded =
        dlsym(RTLD_DEFAULT, "_Py_MergeZeroLocalRefcount") != NULL;
    /* A failed lookup's message stays in malloc'd memory until delivered:
     * delivered now, before any reading, not inside a measured scope. */
    (void)dlerror();
    api.resolved = 1;
}

/* Once per process, whichever thread asks first; the others wait. */
static void
resolve(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, resolve_once);
}

static int
api_complete(void)
{
    return api.IsInitialized && api.GILState_Ensure && api.GILState_Release &&
           api.AtExit && api.ImportModule && api.GetAttrString &&
           api.CallObject && api.Long_AsSsize_t && api.Object_Size &&
           api.DecRef && api.Err_Fetch && api.Err_Restore && api.Err_Clear &&
           api.Err_Occurred && api.List_New && api.Mem_GetAllocator &&
           api.Mem_SetAllocator && api.Object_Call && api.Tuple_New &&
           api.Dict_New && api.Dict_SetItemString && api.Bool_FromLong;
}

static void
forget_interpreter(void)
{
    /* Called at the end of Py_FinalizeEx: the objects are gone already. */
    py.ready = 0;
    py.gc_collect = py.gc_get_objects = py.gc_garbage = NULL;
    py.sys_blocks = py.sys_totalrefs = NULL;
    py.interned = py.interned_args = py.interned_kwargs = NULL;
    py.walk = 0;
    py.blocks_based = 0;
}

static PyObject *
attr(const char *module, const char *name)
{
    PyObject *m, *a;

    m = api.ImportModule(module);
    if (m == NULL)
        return NULL;
    a = api.GetAttrString(m, name);
    api.DecRef(m);
    return a;
}

static int64_t call_int(PyObject *fn);
static int64_t call_len(PyObject *fn);

/*
 * The objects probe counts what gc.get_objects() would return, without
 * building that list.  Every version from 3.9 to 3.15 (default builds) puts
 * a tracked object's PyGC_Head just before it: two words, the first the
 * address of the next head in its generation's circular list.  A full
 * collection merges every generation into the oldest, so after one, walking
 * that list from a list object made just before it visits every tracked
 * object but those made since (the caller's own), plus the generation's
 * head, which has no object.  Objects frozen by gc.freeze() sit in another
 * list and are not counted, as gc.get_objects() does not count them.
 *
 * The walk reads memory, nothing more, but relies on a layout: it is used
 * only once a first walk gives exactly len(gc.get_objects()).  It does on
 * 3.9-3.13, 3.14.10 and 3.15.2, release and debug (measured); 3.14.0-3.14.4
 * ran an incremental collector with the old generation in two lists, where
 * that check decides alone (none of those builds was at hand).
 */
typedef struct lc__gc_head {
    uintptr_t next;            /* next head; bit 0 is a collection's flag  */
    uintptr_t prev;
} lc__gc_head;

static lc__gc_head *
gc_next(const lc__gc_head *g)
{
    return (lc__gc_head *)(g->next & ~(uintptr_t)3);
}

/* Tracked objects in the generation of `sentinel`, itself excluded; -1 if
 * it is not tracked. */
static int64_t
walk_count(PyObject *sentinel)
{
    const lc__gc_head *start = (const lc__gc_head *)sentinel - 1, *g;
    int64_t n = 0;

    if (start->next == 0)
        return -1;
    for (g = gc_next(start); g != start; g = gc_next(g)) {
        if (g == NULL)
            return -1;
        n++;
    }
    return n - 1; /* the list's head */
}

/* 1 when, right after a full collection, the walk counts what
 * gc.get_objects() lists (the sentinel aside).  A collection that runs
 * finalizers may leave new objects in the youngest generation, hence a few
 * tries. */
static int
walk_agrees(void)
{
    int i, agrees = 0;

    for (i = 0; i < 3 && !agrees; i++) {
        PyObject *sentinel = api.List_New(0);
        int64_t found, walked, listed;
        if (sentinel == NULL) {
            api.Err_Clear();
            return 0;
        }
        found = call_int(py.gc_collect);
        walked = walk_count(sentinel);
        listed = call_len(py.gc_get_objects);
        api.DecRef(sentinel);
        agrees = found == 0 && walked >= 0 && listed == walked + 1;
    }
    return agrees;
}

/*
 * Interned strings are immortal on CPython 3.12 (all of them) and 3.13
 * (those made immortal): each new one stays allocated for good, one block
 * (and one allocation) more, though nothing the code keeps holds it.
 * pathlib interns every path part on 3.12, so a test that makes a
 * uniquely named temporary directory would grow a block every run.
 * CPython's own refleak runner subtracts them from its block count, and
 * so does blocks here (and py_allocs): the count comes from
 * sys.getunicodeinternedsize(_only_immortal=True), or without the keyword
 * on 3.12, where it does not exist; or from the counter the Python package
 * gives (lc__set_interned_counter) on 3.13 and later, where that call
 * walks every interned string.  -1 when it cannot be read.
 */
static int64_t
interned_immortal(void)
{
    PyObject *r;
    Py_ssize_t v;

    if (py.interned == NULL)
        return 0;
    if (interned_counter != NULL)
        return interned_counter();
    r = api.Object_Call(py.interned, py.interned_args, py.interned_kwargs);
    if (r == NULL) {
        api.Err_Clear();
        return -1;
    }
    v = api.Long_AsSsize_t(r);
    api.DecRef(r);
    if (v < 0) {
        api.Err_Clear();
        return -1;
    }
    return (int64_t)v;
}

static void
forget_interned(void)
{
    PyObject *o[] = {py.interned, py.interned_args, py.interned_kwargs};
    size_t i;

    for (i = 0; i < LC__ARRAY_LEN(o); i++)
        if (o[i])
            api.DecRef(o[i]);
    py.interned = py.interned_args = py.interned_kwargs = NULL;
}

/* Finds the count and how to call it; absent before 3.12 (interned
 * strings are mortal there), which leaves py.interned NULL. */
static void
lookup_interned(void)
{
    PyObject *yes;

    py.interned = attr("sys", "getunicodeinternedsize");
    py.interned_args = api.Tuple_New(0);
    py.interned_kwargs = api.Dict_New();
    if (py.interned == NULL || py.interned_args == NULL ||
        py.interned_kwargs == NULL) {
        api.Err_Clear();
        forget_interned();
        return;
    }
    yes = api.Bool_FromLong(1);
    if (yes == NULL || api.Dict_SetItemString(py.interned_kwargs,
                                              "_only_immortal", yes) < 0) {
        api.Err_Clear();
        if (yes)
            api.DecRef(yes);
        forget_interned();
        return;
    }
    api.DecRef(yes);
    if (interned_immortal() < 0) {
        /* 3.12: no keyword; every interned string is immortal there.  On
         * a later version without it, counting them all would take
         * mortal ones out too: no correction then. */
        const unsigned long *version =
            (const unsigned long *)dlsym(RTLD_DEFAULT, "Py_Version");
        api.DecRef(py.interned_kwargs);
        py.interned_kwargs = NULL;
        if (version == NULL || (*version >> 16) != 0x030C ||
            interned_immortal() < 0)
            forget_interned();
    }
}

/* Looks the objects up; GIL held.  0, or LC_EPYTHON with nothing kept. */
static int
lookup_objects(void)
{
    if (py.ready)
        return LC_OK;
    py.gc_collect = attr("gc", "collect");
    py.gc_get_objects = attr("gc", "get_objects");
    py.gc_garbage = attr("gc", "garbage");
    py.sys_blocks = attr("sys", "getallocatedblocks");
    py.sys_totalrefs = attr("sys", "gettotalrefcount");
    api.Err_Clear(); /* gettotalrefcount is missing from release builds */
    if (!py.gc_collect || !py.gc_get_objects || !py.gc_garbage ||
        !py.sys_blocks) {
        PyObject *o[] = {py.gc_collect, py.gc_get_objects, py.gc_garbage,
                         py.sys_blocks, py.sys_totalrefs};
        size_t i;
        for (i = 0; i < LC__ARRAY_LEN(o); i++)
            if (o[i])
                api.DecRef(o[i]);
        forget_interpreter();
        return LC_EPYTHON;
    }
    if (api.AtExit(forget_interpreter) != 0) {
        /* Without the callback a re-initialized interpreter would see
         * dangling objects: refuse rather than risk it. */
        forget_interpreter();
        return LC_EPYTHON;
    }
    /* The first call of a function with keyword parameters (gc.collect,
     * gc.get_objects) builds its argument parser's keyword tuple, kept for
     * the interpreter's life.  Made during a process's first snapshot, it
     * would count as growth of blocks and py_allocs in its first scope (in
     * every test, with Check's CK_FORK): one call each now, before any
     * reading, and the collection that follows untracks the tuples. */
    call_int(py.gc_collect);
    call_len(py.gc_get_objects);
    call_int(py.sys_blocks);
    if (py.sys_totalrefs)
        call_int(py.sys_totalrefs);
    lookup_interned();          /* its first calls parse the keyword too */
    py.walk = walk_agrees();
    py.ready = 1;
    return LC_OK;
}

/*
 * A free-threaded build (3.13t, 3.14t) is refused, not read: untested, and
 * each probe would mean something else there.  Objects carry no GC header
 * (they sit in mimalloc's GC heaps), so the objects walk would read
 * unrelated memory; sys.getallocatedblocks() counts mimalloc's blocks of
 * every size in every thread's heap, not pymalloc's small ones;
 * sys.gettotalrefcount() sums per-thread totals that are merged only when
 * a thread ends, so refs moves with thread exits; py_bytes and py_allocs
 * would see the object domain through mimalloc, whose blocks freed by
 * another thread are counted when that thread collects them.  Such a build
 * is known by what it exports: the functions that its inline Py_DECREF
 * calls, which a default build does not have.
 */
static int
free_threaded(void)
{
    return api.free_threaded;
}

const char *
lc__python_unavailable(int probe)
{
    resolve();
    if (!api.IsInitialized)
        return "no CPython in this process";
    if (!api_complete())
        return "this CPython lacks a function leakcheck needs";
    if (!api.IsInitialized())
        return "CPython is not initialized";
    if (free_threaded())
        return "free-threaded CPython (Py_GIL_DISABLED) is not supported "
               "yet";
    if (probe == LC_PROBE_REFS) {
        /* Whether sys has gettotalrefcount, not lookup_objects(): that
         * collects the whole heap more than once, which `import
         * leakcheck` would pay, every pytest session with the plugin
         * installed included (bench/bench_import.py).  The first reading
         * does it, after the plugin's freezer has frozen what was
         * there. */
        int gil, has;
        PyObject *f;
        if (py.ready)
            return py.sys_totalrefs ? NULL : "needs a debug build of CPython";
        gil = api.GILState_Ensure();
        f = attr("sys", "gettotalrefcount");
        has = f != NULL;
        if (f != NULL)
            api.DecRef(f);
        else
            api.Err_Clear();
        api.GILState_Release(gil);
        return has ? NULL : "needs a debug build of CPython";
    }
    return NULL;
}

/* Calls a no-argument callable and returns its result as an integer, or -1
 * (error cleared).  The result object is released before returning. */
static int64_t
call_int(PyObject *fn)
{
    PyObject *r = api.CallObject(fn, NULL);
    Py_ssize_t v;

    if (r == NULL) {
        api.Err_Clear();
        return -1;
    }
    v = api.Long_AsSsize_t(r);
    api.DecRef(r);
    if (v == -1 && api.Err_Occurred()) {
        api.Err_Clear();
        return -1;
    }
    return v;
}

/* Length of the result of fn(), which is released; -1 on error. */
static int64_t
call_len(PyObject *fn)
{
    PyObject *r = api.CallObject(fn, NULL);
    Py_ssize_t n;

    if (r == NULL) {
        api.Err_Clear();
        return -1;
    }
    n = api.Object_Size(r);
    api.DecRef(r);
    if (n < 0)
        api.Err_Clear();
    return n;
}

static void
put(lc_snapshot *snap, int probe, int64_t value)
{
    if (value >= 0) {
        snap->values[probe] = value;
        snap->mask |= LC_PROBE_BIT(probe);
    }
}

/* sys.getallocatedblocks(): a walk of every pool pymalloc has (~0.5 ms in
 * a process holding 6.7M objects); -1 on error. */
static int64_t
walk_blocks(void)
{
    return api.GetAllocatedBlocks ? (int64_t)api.GetAllocatedBlocks()
                                  : call_int(py.sys_blocks);
}

/*
 * pymalloc's live blocks, as sys.getallocatedblocks() counts them.  When
 * the allocator hook counts the allocations of pymalloc's domains
 * (`counted`: it is in place, has been since the last snapshot that
 * checked, and runs the hooks chosen for pymalloc, pyhook.c), the reading
 * is that count plus what was live before the hook: one walk of the pools
 * learns that offset, every later reading is O(1) and exact.  Otherwise,
 * and on the snapshot that learns the offset, the pools are walked.  A
 * hook put back (its counts missed what happened meanwhile) is not
 * `counted`, which forgets the offset.
 */
static int64_t
read_blocks(int counted, int64_t pymalloc)
{
    int64_t walked;

    if (counted && py.blocks_based)
        return pymalloc + py.blocks_offset;
    py.blocks_based = 0;
    walked = walk_blocks();
    if (counted && walked >= 0) {
        py.blocks_offset = walked - pymalloc;
        py.blocks_based = 1;
    }
    return walked;
}

int64_t
lc__python_allocated_blocks(int walk)
{
    int64_t bytes, allocs, pymalloc, blocks = -1;
    int gil;

    gil = api.GILState_Ensure();
    if (lookup_objects() == LC_OK) {
        /* Not lc__pyhook_install(): a hook put back is the next
         * snapshot's to find. */
        if (py.blocks_based && lc__pyhook_on_top(api.Mem_GetAllocator) &&
            lc__pyhook_read(&bytes, &allocs, &pymalloc))
            blocks = pymalloc + py.blocks_offset;
        else
            blocks = walk ? walk_blocks() : LC__BLOCKS_UNCOUNTED;
    }
    api.GILState_Release(gil);
    return blocks;
}

int
lc__python_release_hook(void)
{
    int gil, n;

    if (!api.resolved || !api_complete() || api.free_threaded)
        return 0;
    gil = api.GILState_Ensure();
    n = lc__pyhook_release(api.Mem_GetAllocator, api.Mem_SetAllocator);
    api.GILState_Release(gil);
    return n;
}

int
lc__python_blocks_check(int64_t *counted, int64_t *walked)
{
    int64_t bytes, allocs, pymalloc;
    int gil, rc = LC_EUNAVAIL;

    gil = api.GILState_Ensure();
    if (lookup_objects() == LC_OK && py.blocks_based &&
        lc__pyhook_install(api.Mem_GetAllocator, api.Mem_SetAllocator) ==
            LC_OK &&
        lc__pyhook_read(&bytes, &allocs, &pymalloc)) {
        *counted = pymalloc + py.blocks_offset;
        *walked = walk_blocks();
        rc = *walked >= 0 ? LC_OK : LC_EPYTHON;
    }
    api.GILState_Release(gil);
    return rc;
}

/*
 * Up to three full collections, stopping when one finds nothing: objects
 * freed by a collection (finalizers, weakref callbacks) can make more
 * garbage, and CPython's own refleak runner collects more than once too.
 */
static int
collect(void)
{
    int i;

    for (i = 0; i < 3; i++) {
        int64_t found = call_int(py.gc_collect);
        if (found < 0)
            return LC_EPYTHON;
        if (found == 0)
            break;
    }
    return LC_OK;
}

int
lc__python_snapshot(lc_snapshot *snap, unsigned mask, unsigned flags)
{
    const unsigned hooked = LC_PROBE_BIT(LC_PROBE_PY_BYTES) |
                            LC_PROBE_BIT(LC_PROBE_PY_ALLOCS);
    PyObject *et, *ev, *etb, *sentinel = NULL;
    int64_t interned = 0, pymalloc = 0;
    int gil, rc = LC_OK, hook_checked = 0, counted = 0;

    gil = api.GILState_Ensure();
    api.Err_Fetch(&et, &ev, &etb); /* the caller's exception, if any */

    rc = lookup_objects();
    if (rc == LC_OK && (mask & hooked)) {
        /* A hook just put back (or that cannot be) has missed what was
         * allocated meanwhile: no reading, so that no delta spans that. */
        int put = lc__pyhook_install(api.Mem_GetAllocator,
                                     api.Mem_SetAllocator);
        if (put == 1 || put == LC_EUNAVAIL)
            mask &= ~hooked;
        else
            rc = put;
        hook_checked = put == LC_OK;
    }
    if (rc == LC_OK && settle_fn != NULL)
        settle_fn(settle_arg);
    /* Made before the collection, so that the collection puts it in the
     * oldest generation with everything that survives; see walk_count. */
    if (rc == LC_OK && py.walk && (mask & LC_PROBE_BIT(LC_PROBE_OBJECTS)) &&
        !(flags & LC_SNAPSHOT_NO_COLLECT)) {
        sentinel = api.List_New(0);
        if (sentinel == NULL)
            api.Err_Clear();
    }
    if (rc == LC_OK && !(flags & LC_SNAPSHOT_NO_COLLECT))
        rc = collect();
    if (rc == LC_OK && after_collect_fn != NULL)
        after_collect_fn(after_collect_arg);
    if (rc != LC_OK)
        goto done;

    /* Before the counters: the call's temporary int is gone by then. */
    if (mask & (hooked | LC_PROBE_BIT(LC_PROBE_BLOCKS))) {
        interned = interned_immortal();
        if (interned < 0)       /* unreadable now: no blocks, no py_allocs */
            mask &= ~(LC_PROBE_BIT(LC_PROBE_BLOCKS) |
                      LC_PROBE_BIT(LC_PROBE_PY_ALLOCS));
    }
    /* First what temporaries would disturb: the allocator counters and the
     * native heap.  Then the probes that call into Python, whose
     * temporaries are gone before the next snapshot reads anything. */
    if (hook_checked) {
        int64_t bytes, allocs;
        counted = lc__pyhook_read(&bytes, &allocs, &pymalloc);
        /* Not put(): py_allocs counts frees of blocks allocated before the
         * hook too, so it can be negative; only its deltas mean anything. */
        snap->values[LC_PROBE_PY_BYTES] = bytes;
        snap->values[LC_PROBE_PY_ALLOCS] = allocs - interned;
        snap->mask |= mask & hooked;
    }
    if (mask & LC_PROBE_BIT(LC_PROBE_BLOCKS)) {
        int64_t blocks = read_blocks(counted, pymalloc);
        if (blocks >= 0)
            put(snap, LC_PROBE_BLOCKS, blocks - interned);
    }
    lc__native_read(snap, mask & LC_PROBES_NATIVE, flags);
    if (mask & LC_PROBE_BIT(LC_PROBE_GARBAGE)) {
        Py_ssize_t n = api.Object_Size(py.gc_garbage);
        if (n < 0)
            api.Err_Clear();
        put(snap, LC_PROBE_GARBAGE, n);
    }
    if (mask & LC_PROBE_BIT(LC_PROBE_OBJECTS))
        put(snap, LC_PROBE_OBJECTS, sentinel != NULL
                                        ? walk_count(sentinel)
                                        : call_len(py.gc_get_objects));
    /* Last, so that no other reading's temporaries hold references. */
    if ((mask & LC_PROBE_BIT(LC_PROBE_REFS)) && py.sys_totalrefs)
        put(snap, LC_PROBE_REFS, call_int(py.sys_totalrefs));

done:
    if (sentinel != NULL)
        api.DecRef(sentinel);
    api.Err_Restore(et, ev, etb);
    api.GILState_Release(gil);
    return rc;
}
