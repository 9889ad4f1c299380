/*
 * leakylib.c — a test-only extension that leaks on purpose, so that
 * leakcheck's tests exercise real leaks of every kind it measures.  Every
 * leak_* function has a clean twin that does the same work and releases
 * what it took.
 *
 *   refs          leak_ref(obj)         Py_INCREF without Py_DECREF
 *   objects,      leak_new_list(n)      a new list returned with one
 *   blocks,                             reference too many (a forgotten
 *   py_allocs                           Py_DECREF): never freed
 *                 keep(obj)             obj appended to a C static list
 *   blocks,       leak_pymem(n)         PyMem_Malloc without PyMem_Free
 *   py_allocs,    leak_rawmem(n)        PyMem_RawMalloc without free
 *   py_bytes
 *   native_bytes  leak_native(n)        malloc without free
 *                 leak_strdup(s)        strdup without free (glibc's
 *                                       strdup calls malloc)
 *   (none)        replace_native(n)     n malloc'd blocks kept in a static
 *                                       array, freed and made again by
 *                                       each call: no growth, though the
 *                                       last call's blocks outlive it
 *   blocks,       leak_str_dict(n)      a dict of n strings the C code
 *   py_allocs                           keeps a reference to (a forgotten
 *                                       Py_DECREF); a dict of strings only
 *                                       is not tracked by the GC
 *   garbage       make_uncollectable()  a reference cycle of objects with
 *                                       a legacy finalizer (tp_del): the
 *                                       collector moves it to gc.garbage
 *   fds           leak_fd(path)         open() without close()
 *   threads       leak_thread(name)     a pthread that never ends
 *
 * churn(seconds) allocates and frees through all three PyMem domains, and
 * malloc, from a thread of its own without the GIL for the raw domain: the
 * tests take snapshots meanwhile.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- refs and objects ---------------------------------------------------- */

static PyObject *
leak_ref(PyObject *mod, PyObject *obj)
{
    Py_INCREF(obj);                     /* and never released */
    Py_RETURN_NONE;
}

static PyObject *
clean_ref(PyObject *mod, PyObject *obj)
{
    Py_INCREF(obj);
    Py_DECREF(obj);
    Py_RETURN_NONE;
}

static PyObject *
new_list(PyObject *arg)
{
    Py_ssize_t i, n = PyLong_AsSsize_t(arg);
    PyObject *list;

    if (n < 0)
        return n == -1 && PyErr_Occurred() ? NULL
               : (PyErr_SetString(PyExc_ValueError, "n must be >= 0"), NULL);
    list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *item = PyLong_FromSsize_t(1000000 + i);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *
leak_new_list(PyObject *mod, PyObject *arg)
{
    PyObject *list = new_list(arg);

    Py_XINCREF(list);                   /* one reference too many */
    return list;
}

static PyObject *
clean_new_list(PyObject *mod, PyObject *arg)
{
    return new_list(arg);
}

static PyObject *kept;                  /* the static list keep() fills */

static PyObject *
keep(PyObject *mod, PyObject *obj)
{
    if (kept == NULL && (kept = PyList_New(0)) == NULL)
        return NULL;
    if (PyList_Append(kept, obj) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* keep()'s twin: holds obj only while it works with it. */
static PyObject *
borrow(PyObject *mod, PyObject *obj)
{
    PyObject *held = PyList_New(0);

    if (held == NULL)
        return NULL;
    if (PyList_Append(held, obj) < 0) {
        Py_DECREF(held);
        return NULL;
    }
    Py_DECREF(held);
    Py_RETURN_NONE;
}

static PyObject *
release_kept(PyObject *mod, PyObject *unused)
{
    Py_CLEAR(kept);
    Py_RETURN_NONE;
}

/* ---- allocators ---------------------------------------------------------- */

static int
size_arg(PyObject *arg, size_t *n)
{
    Py_ssize_t v = PyLong_AsSsize_t(arg);

    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 1) {
        PyErr_SetString(PyExc_ValueError, "size must be >= 1");
        return -1;
    }
    *n = (size_t)v;
    return 0;
}

static PyObject *
leak_pymem(PyObject *mod, PyObject *arg)
{
    size_t n;
    char *p;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if ((p = PyMem_Malloc(n)) == NULL)
        return PyErr_NoMemory();
    memset(p, 0xab, n);                 /* and never freed */
    Py_RETURN_NONE;
}

static PyObject *
clean_pymem(PyObject *mod, PyObject *arg)
{
    size_t n;
    char *p;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if ((p = PyMem_Malloc(n)) == NULL)
        return PyErr_NoMemory();
    memset(p, 0xab, n);
    PyMem_Free(p);
    Py_RETURN_NONE;
}

static PyObject *
leak_rawmem(PyObject *mod, PyObject *arg)
{
    size_t n;
    char *p;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if ((p = PyMem_RawMalloc(n)) == NULL)
        return PyErr_NoMemory();
    memset(p, 0xcd, n);
    Py_RETURN_NONE;
}

static PyObject *
clean_rawmem(PyObject *mod, PyObject *arg)
{
    size_t n;
    char *p;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if ((p = PyMem_RawMalloc(n)) == NULL)
        return PyErr_NoMemory();
    memset(p, 0xcd, n);
    PyMem_RawFree(p);
    Py_RETURN_NONE;
}

static PyObject *
leak_native(PyObject *mod, PyObject *arg)
{
    size_t n;
    volatile char *p;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if ((p = malloc(n)) == NULL)
        return PyErr_NoMemory();
    memset((char *)p, 0xef, n);
    Py_RETURN_NONE;
}

static PyObject *
clean_native(PyObject *mod, PyObject *arg)
{
    size_t n;
    volatile char *p;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if ((p = malloc(n)) == NULL)
        return PyErr_NoMemory();
    memset((char *)p, 0xef, n);
    free((char *)p);
    Py_RETURN_NONE;
}

#define REPLACED_MAX 16
static void *replaced[REPLACED_MAX];    /* the blocks replace_native() keeps */

static PyObject *
replace_native(PyObject *mod, PyObject *arg)
{
    size_t n, i;

    if (size_arg(arg, &n) < 0)
        return NULL;
    if (n > REPLACED_MAX)
        n = REPLACED_MAX;
    for (i = 0; i < REPLACED_MAX; i++) {
        free(replaced[i]);
        replaced[i] = NULL;
    }
    for (i = 0; i < n; i++) {
        if ((replaced[i] = malloc(64)) == NULL)     /* REPLACED_LINE */
            return PyErr_NoMemory();
        memset(replaced[i], 0x5a, 64);
    }
    Py_RETURN_NONE;
}

static PyObject *
leak_strdup(PyObject *mod, PyObject *arg)
{
    const char *text = PyUnicode_AsUTF8(arg);
    volatile char *copy;

    if (text == NULL)
        return NULL;
    if ((copy = strdup(text)) == NULL)  /* and never freed */
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *
clean_strdup(PyObject *mod, PyObject *arg)
{
    const char *text = PyUnicode_AsUTF8(arg);
    char *copy;

    if (text == NULL)
        return NULL;
    if ((copy = strdup(text)) == NULL)
        return PyErr_NoMemory();
    free(copy);
    Py_RETURN_NONE;
}

/* ---- an object the GC does not track ------------------------------------- */

/* A dict of n distinct strings: a dict whose keys and values are all
 * atomic (here str) is not tracked by the GC, so `objects` misses it. */
static PyObject *
str_dict(PyObject *arg)
{
    Py_ssize_t i, n = PyLong_AsSsize_t(arg);
    PyObject *dict;

    if (n < 0)
        return n == -1 && PyErr_Occurred() ? NULL
               : (PyErr_SetString(PyExc_ValueError, "n must be >= 0"), NULL);
    if ((dict = PyDict_New()) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *key = PyUnicode_FromFormat("key-%zd", i);
        PyObject *value = key ? PyUnicode_FromFormat("value-%zd", i) : NULL;
        int rc = value ? PyDict_SetItem(dict, key, value) : -1;

        Py_XDECREF(key);
        Py_XDECREF(value);
        if (rc < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

static PyObject *
leak_str_dict(PyObject *mod, PyObject *arg)
{
    PyObject *dict = str_dict(arg);

    if (dict == NULL)
        return NULL;
    Py_RETURN_NONE;                     /* dict never released */
}

static PyObject *
clean_str_dict(PyObject *mod, PyObject *arg)
{
    PyObject *dict = str_dict(arg);

    if (dict == NULL)
        return NULL;
    Py_DECREF(dict);
    Py_RETURN_NONE;
}

/* ---- garbage ------------------------------------------------------------- */

/* Node: a GC object that refers to one other object.  Legacy is a Node
 * with a legacy finalizer (tp_del), which makes a cycle through it
 * uncollectable: the collector appends it to gc.garbage. */
typedef struct {
    PyObject_HEAD
    PyObject *other;
} NodeObject;

static int
node_traverse(NodeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->other);
    return 0;
}

static int
node_clear(NodeObject *self)
{
    Py_CLEAR(self->other);
    return 0;
}

static void
node_dealloc(NodeObject *self)
{
    PyObject_GC_UnTrack(self);
    node_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void
legacy_del(PyObject *self)
{
    /* A finalizer CPython cannot order within a cycle. */
}

static PyObject *
node_unlink(NodeObject *self, PyObject *unused)
{
    Py_CLEAR(self->other);
    Py_RETURN_NONE;
}

static PyMethodDef node_methods[] = {
    {"unlink", (PyCFunction)node_unlink, METH_NOARGS,
     "Drops the reference to the other node (breaks the cycle)."},
    {NULL},
};

static PyTypeObject Node_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "leakylib.Node",
    .tp_basicsize = sizeof(NodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_methods = node_methods,
};

static PyTypeObject Legacy_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "leakylib.Legacy",
    .tp_basicsize = sizeof(NodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_del = legacy_del,
    .tp_methods = node_methods,
};

/* Two objects of `type` referring to each other, then dropped. */
static PyObject *
make_cycle(PyTypeObject *type)
{
    NodeObject *a = PyObject_GC_New(NodeObject, type);
    NodeObject *b;

    if (a == NULL)
        return NULL;
    a->other = NULL;
    PyObject_GC_Track(a);
    b = PyObject_GC_New(NodeObject, type);
    if (b == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    b->other = NULL;
    PyObject_GC_Track(b);
    Py_INCREF(b);
    a->other = (PyObject *)b;
    b->other = (PyObject *)a;           /* takes our reference to a */
    Py_DECREF(b);
    Py_RETURN_NONE;
}

static PyObject *
make_uncollectable(PyObject *mod, PyObject *unused)
{
    return make_cycle(&Legacy_Type);
}

static PyObject *
make_collectable(PyObject *mod, PyObject *unused)
{
    return make_cycle(&Node_Type);
}

/* ---- fds ----------------------------------------------------------------- */

static PyObject *
leak_fd(PyObject *mod, PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    int fd;

    if (path == NULL)
        return NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
    return PyLong_FromLong(fd);         /* and never closed */
}

static PyObject *
clean_fd(PyObject *mod, PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    int fd;

    if (path == NULL)
        return NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
    close(fd);
    Py_RETURN_NONE;
}

/* ---- threads ------------------------------------------------------------- */

static void *
park(void *arg)
{
    for (;;)
        pause();                        /* never ends */
    return NULL;
}

static void *
finish(void *arg)
{
    return NULL;
}

static PyObject *
start_thread(PyObject *arg, void *(*body)(void *), int join)
{
    const char *name = PyUnicode_AsUTF8(arg);
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int rc;

    if (name == NULL)
        return NULL;
    /* The thread takes no signals: they stay the main thread's. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    rc = pthread_create(&t, &attr, body, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_setname_np(t, name);        /* at most 15 characters */
    if (join)
        pthread_join(t, NULL);
    else
        pthread_detach(t);
    Py_RETURN_NONE;
}

static PyObject *
leak_thread(PyObject *mod, PyObject *arg)
{
    return start_thread(arg, park, 0);
}

static PyObject *
clean_thread(PyObject *mod, PyObject *arg)
{
    return start_thread(arg, finish, 1);
}

/* ---- churn --------------------------------------------------------------- */

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* churn(seconds): allocates and frees for that long, in every domain, with
 * the GIL released for the raw domain and malloc; returns the number of
 * rounds.  Leaves nothing behind. */
static PyObject *
churn(PyObject *mod, PyObject *arg)
{
    double seconds = PyFloat_AsDouble(arg), end;
    long rounds = 0;

    if (seconds == -1.0 && PyErr_Occurred())
        return NULL;
    end = now() + seconds;
    while (now() < end) {
        void *raw[16], *obj[16], *mem[4];
        int i;

        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < 16; i++)
            raw[i] = PyMem_RawMalloc(32 + 97 * (size_t)i);
        for (i = 0; i < 16; i++) {
            void *p = malloc(48 + 31 * (size_t)i);
            free(p);
            PyMem_RawFree(raw[i]);
        }
        Py_END_ALLOW_THREADS
        for (i = 0; i < 16; i++)
            obj[i] = PyObject_Malloc(16 + 40 * (size_t)i);
        for (i = 0; i < 4; i++)
            mem[i] = PyMem_Malloc(600 + 300 * (size_t)i);
        for (i = 0; i < 16; i++)
            PyObject_Free(obj[i]);
        for (i = 0; i < 4; i++)
            PyMem_Free(mem[i]);
        rounds++;
    }
    return PyLong_FromLong(rounds);
}

/* ---- module -------------------------------------------------------------- */

static PyMethodDef leakylib_methods[] = {
    {"leak_ref", leak_ref, METH_O, "Py_INCREF(obj), never released."},
    {"clean_ref", clean_ref, METH_O, "Py_INCREF(obj) then Py_DECREF(obj)."},
    {"leak_new_list", leak_new_list, METH_O,
     "A new list of n ints, returned with a reference too many."},
    {"clean_new_list", clean_new_list, METH_O, "A new list of n ints."},
    {"keep", keep, METH_O, "Appends obj to a static C list."},
    {"borrow", borrow, METH_O, "Holds obj in a C list while it works."},
    {"release_kept", release_kept, METH_NOARGS, "Drops the static list."},
    {"leak_pymem", leak_pymem, METH_O, "PyMem_Malloc(n), never freed."},
    {"clean_pymem", clean_pymem, METH_O, "PyMem_Malloc(n) and PyMem_Free."},
    {"leak_rawmem", leak_rawmem, METH_O, "PyMem_RawMalloc(n), never freed."},
    {"clean_rawmem", clean_rawmem, METH_O,
     "PyMem_RawMalloc(n) and PyMem_RawFree."},
    {"leak_native", leak_native, METH_O, "malloc(n), never freed."},
    {"clean_native", clean_native, METH_O, "malloc(n) and free."},
    {"replace_native", replace_native, METH_O,
     "n blocks of 64 bytes, in place of the previous call's."},
    {"leak_strdup", leak_strdup, METH_O, "strdup(s), never freed."},
    {"clean_strdup", clean_strdup, METH_O, "strdup(s) and free."},
    {"leak_str_dict", leak_str_dict, METH_O,
     "A dict of n strings (not GC-tracked), never released."},
    {"clean_str_dict", clean_str_dict, METH_O,
     "A dict of n strings, released."},
    {"make_uncollectable", make_uncollectable, METH_NOARGS,
     "A cycle of two Legacy objects (tp_del): it ends in gc.garbage."},
    {"make_collectable", make_collectable, METH_NOARGS,
     "A cycle of two Node objects: the collector frees it."},
    {"leak_fd", leak_fd, METH_O, "open(path), never closed; the fd."},
    {"clean_fd", clean_fd, METH_O, "open(path) and close."},
    {"leak_thread", leak_thread, METH_O,
     "A thread called `name` that never ends."},
    {"clean_thread", clean_thread, METH_O,
     "A thread called `name`, joined."},
    {"churn", churn, METH_O,
     "Allocates and frees in every domain for `seconds`."},
    {NULL},
};

static struct PyModuleDef leakylib_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "leakylib",
    .m_doc = "leaks on purpose, for leakcheck's tests",
    .m_size = -1,
    .m_methods = leakylib_methods,
};

PyMODINIT_FUNC
PyInit_leakylib(void)
{
    PyObject *m;

    if (PyType_Ready(&Node_Type) < 0 || PyType_Ready(&Legacy_Type) < 0)
        return NULL;
    m = PyModule_Create(&leakylib_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&Node_Type);
    Py_INCREF(&Legacy_Type);
    if (PyModule_AddObject(m, "Node", (PyObject *)&Node_Type) < 0 ||
        PyModule_AddObject(m, "Legacy", (PyObject *)&Legacy_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
