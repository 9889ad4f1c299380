/*
 * leaky.c — a small CPython extension with four leaks of the kinds that
 * reach production, one per function.  fixed.c is the same module with the
 * four fixes; `diff leaky.c fixed.c` shows them.
 *
 *   squares(seq)        a forgotten reference on an error path: the result
 *                       list is not released when an item is not an int
 *                       (refs, blocks, objects grow)
 *   checksum(data)      a PyMem block: the scratch copy is never freed
 *                       (py_bytes, py_allocs grow)
 *   histogram(data, n)  a native malloc: the counting table is never freed
 *                       (native_bytes grows; no Python probe can see it)
 *   hexlify(data)       a forgotten object: the scratch bytes object made
 *                       with PyBytes_FromStringAndSize is never released
 *                       (blocks, py_allocs grow; refs on a debug build)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* squares(seq) -> [x*x for x in seq]; TypeError when an item is not an
 * int. */
static PyObject *
squares(PyObject *self, PyObject *arg)
{
    PyObject *seq, *result;
    Py_ssize_t i, n;

    seq = PySequence_Fast(arg, "squares() needs a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    result = PyList_New(n);
    if (result == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *sq;
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError, "item %zd is %.50s, not int", i,
                         Py_TYPE(item)->tp_name);
            Py_DECREF(seq);
            return NULL;                    /* LEAK: result is not released */
        }
        sq = PyNumber_Multiply(item, item);
        if (sq == NULL) {
            Py_DECREF(result);
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SET_ITEM(result, i, sq);
    }
    Py_DECREF(seq);
    return result;
}

/* checksum(data: bytes) -> int: Adler-32 of a scratch copy of data. */
static PyObject *
checksum(PyObject *self, PyObject *arg)
{
    char *buf;
    Py_ssize_t len, i;
    uint32_t a = 1, b = 0;

    if (PyBytes_AsStringAndSize(arg, &buf, &len) < 0)
        return NULL;
    {
        unsigned char *copy = PyMem_Malloc(len ? (size_t)len : 1);
        if (copy == NULL)
            return PyErr_NoMemory();
        memcpy(copy, buf, (size_t)len);
        for (i = 0; i < len; i++) {
            a = (a + copy[i]) % 65521;
            b = (b + a) % 65521;
        }
        /* LEAK: the copy is never given back with PyMem_Free(copy). */
    }
    return PyLong_FromUnsignedLong((unsigned long)((b << 16) | a));
}

/* histogram(data: bytes, buckets: int) -> list of counts of data's bytes
 * in `buckets` equal ranges. */
static PyObject *
histogram(PyObject *self, PyObject *args)
{
    const unsigned char *data;
    Py_ssize_t len, i, buckets;
    size_t *table;
    PyObject *result;

    if (!PyArg_ParseTuple(args, "y#n", &data, &len, &buckets))
        return NULL;
    if (buckets < 1 || buckets > 256) {
        PyErr_SetString(PyExc_ValueError, "buckets must be in 1..256");
        return NULL;
    }
    /* A generous table, as real code sizes them: 4096 counters. */
    table = calloc(4096, sizeof *table);
    if (table == NULL)
        return PyErr_NoMemory();
    for (i = 0; i < len; i++)
        table[data[i] * buckets / 256]++;
    result = PyList_New(buckets);
    if (result == NULL)
        return NULL;                        /* (and here too) */
    for (i = 0; i < buckets; i++) {
        PyObject *count = PyLong_FromSize_t(table[i]);
        if (count == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, i, count);
    }
    return result;                          /* LEAK: free(table) missing */
}

/* hexlify(data: bytes) -> str: data in hexadecimal, written into a
 * scratch bytes object first. */
static PyObject *
hexlify(PyObject *self, PyObject *arg)
{
    static const char digits[] = "0123456789abcdef";
    char *src, *dst;
    Py_ssize_t len, i;
    PyObject *scratch;

    if (PyBytes_AsStringAndSize(arg, &src, &len) < 0)
        return NULL;
    scratch = PyBytes_FromStringAndSize(NULL, 2 * len);
    if (scratch == NULL)
        return NULL;
    dst = PyBytes_AS_STRING(scratch);
    for (i = 0; i < len; i++) {
        dst[2 * i] = digits[(unsigned char)src[i] >> 4];
        dst[2 * i + 1] = digits[(unsigned char)src[i] & 15];
    }
    return PyUnicode_DecodeASCII(dst, 2 * len, NULL);
                                            /* LEAK: scratch is never released */
}

static PyMethodDef methods[] = {
    {"squares", squares, METH_O, "squares(seq) -> list of x*x"},
    {"checksum", checksum, METH_O, "checksum(data) -> Adler-32 of data"},
    {"histogram", histogram, METH_VARARGS,
     "histogram(data, buckets) -> counts of data's bytes per bucket"},
    {"hexlify", hexlify, METH_O, "hexlify(data) -> data in hexadecimal"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "leaky",
    "Four leaks for leakcheck's examples (see fixed for the fixes).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit_leaky(void)
{
    return PyModule_Create(&module);
}
