/*
 * _jsontext.c — json_text(value, item_separator, key_separator): the text
 * json.dumps(value, separators=(item_separator, key_separator)) gives
 * with its other options left as they are (ASCII only, NaN and the
 * infinities allowed, keys in the dict's order), written into one buffer
 * instead of a str for every key and value joined at the end; or None
 * when `value` holds anything but dicts with str keys, lists, tuples,
 * str, int, float, bool and None of those exact types, or nests deeper
 * than MAX_DEPTH: the caller then asks the json module, which says what
 * its options make of it.  The report's journal encodes every test's
 * record so (leakcheck.report.files.one_shot_encoder): on CPython 3.11,
 * whose json encoder makes a str of every key and value and joins them,
 * that took 133k of a clean test's 3.1M instructions under --leaks, and
 * takes 34k here (bench/bench_hunt_instructions.py).
 *
 * The text is json's to the byte: a str escapes as
 * json.encoder.encode_basestring_ascii does (ascii_escape_unichar in
 * CPython's Modules/_json.c: the printable ASCII but '"' and '\\' as
 * they are, \" \\ \b \f \n \r \t, anything else \uXXXX in lowercase hex,
 * a code point past U+FFFF as its UTF-16 surrogate pair, a lone surrogate
 * as itself); an int as int.__repr__; a float as float.__repr__ (repr
 * mode 'r', ".0" added to an integral one), NaN, Infinity, -Infinity.
 * tests/python/report/test_jsontext.py holds it to json.dumps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <string.h>

#include "_jsontext.h"

#define MAX_DEPTH 64

typedef struct {
    char *p;
    Py_ssize_t len, size;
    char *heap;             /* p when it is on the heap, else NULL */
    const char *item_sep, *key_sep;
    Py_ssize_t item_len, key_len;
} out;

/* Room for `n` more bytes; 0, or -1 with MemoryError set. */
static int
reserve(out *o, Py_ssize_t n)
{
    Py_ssize_t size;
    char *p;

    if (o->len + n <= o->size)
        return 0;
    size = o->size;
    while (size < o->len + n) {
        if (size > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        size *= 2;
    }
    p = PyMem_Malloc((size_t)size);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(p, o->p, (size_t)o->len);
    PyMem_Free(o->heap);
    o->p = o->heap = p;
    o->size = size;
    return 0;
}

static inline int
put(out *o, const char *s, Py_ssize_t n)
{
    char *w;

    if (o->len + n > o->size && reserve(o, n) < 0)
        return -1;
    w = o->p + o->len;
    o->len += n;
    if (n > 16) {
        memcpy(w, s, (size_t)n);
        return 0;
    }
    /* A separator, a number, a word: a call to memcpy() costs more. */
    while (n-- > 0)
        *w++ = *s++;
    return 0;
}

static const char hexdigits[] = "0123456789abcdef";

/* u and the four hex digits of `c` (the backslash is written before). */
static char *
put_u(char *w, Py_UCS4 c)
{
    *w++ = 'u';
    *w++ = hexdigits[(c >> 12) & 0xf];
    *w++ = hexdigits[(c >> 8) & 0xf];
    *w++ = hexdigits[(c >> 4) & 0xf];
    *w++ = hexdigits[c & 0xf];
    return w;
}

/* The escaped code points [i, end) of a str of `kind` written at `w`;
 * where the writing ends.  Inlined with each kind a constant. */
static inline __attribute__((always_inline)) char *
escape(char *w, int kind, const void *data, Py_ssize_t i, Py_ssize_t end)
{
    for (; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);

        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '\\': *w++ = '\\'; break;
        case '"': *w++ = '"'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        default:
            if (c >= 0x10000) {
                w = put_u(w, Py_UNICODE_HIGH_SURROGATE(c));
                *w++ = '\\';
                c = Py_UNICODE_LOW_SURROGATE(c);
            }
            w = put_u(w, c);
        }
    }
    return w;
}

/* Escapes of a block of code points are reserved at a time: 12 bytes a
 * code point at most (a surrogate pair), without reserving twelve times
 * a long string's length at once. */
#define STR_BLOCK 1024

static int
put_str(out *o, PyObject *s)
{
    Py_ssize_t i, n;
    int kind;
    const void *data;

#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0)
        return -1;
#endif
    n = PyUnicode_GET_LENGTH(s);
    kind = PyUnicode_KIND(s);
    data = PyUnicode_DATA(s);
    if (put(o, "\"", 1) < 0)
        return -1;
    for (i = 0; i < n;) {
        Py_ssize_t end = n - i > STR_BLOCK ? i + STR_BLOCK : n;
        char *w;

        if (reserve(o, 12 * (end - i)) < 0)
            return -1;
        w = o->p + o->len;
        switch (kind) {
        case PyUnicode_1BYTE_KIND:
            w = escape(w, PyUnicode_1BYTE_KIND, data, i, end);
            break;
        case PyUnicode_2BYTE_KIND:
            w = escape(w, PyUnicode_2BYTE_KIND, data, i, end);
            break;
        default:
            w = escape(w, PyUnicode_4BYTE_KIND, data, i, end);
        }
        o->len = w - o->p;
        i = end;
    }
    return put(o, "\"", 1);
}

static int
put_int(out *o, PyObject *v)
{
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    char digits[24];
    PyObject *text;
    const char *s;
    Py_ssize_t n;
    int rc;

    if (x == -1 && PyErr_Occurred())
        return -1;
    if (!overflow) {
        /* The digits from the end (snprintf() costs more than the rest
         * of a record's small ints). */
        unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x
                                     : (unsigned long long)x;
        char *end = digits + sizeof digits, *d = end;

        do {
            *--d = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (x < 0)
            *--d = '-';
        return put(o, d, end - d);
    }
    /* int.__repr__, as json's encoder calls it (its limit on digits
     * included). */
    text = PyLong_Type.tp_repr(v);
    if (text == NULL)
        return -1;
    s = PyUnicode_AsUTF8AndSize(text, &n);
    rc = s == NULL ? -1 : put(o, s, n);
    Py_DECREF(text);
    return rc;
}

static int
put_float(out *o, PyObject *v)
{
    double x = PyFloat_AS_DOUBLE(v);
    char *s;
    int rc;

    if (isnan(x))
        return put(o, "NaN", 3);
    if (isinf(x))
        return x > 0 ? put(o, "Infinity", 8) : put(o, "-Infinity", 9);
    if (x == 0.0)               /* a record's costs, as a rule */
        return signbit(x) ? put(o, "-0.0", 4) : put(o, "0.0", 3);
    /* float.__repr__ (float_repr in Objects/floatobject.c). */
    s = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL)
        return -1;
    rc = put(o, s, (Py_ssize_t)strlen(s));
    PyMem_Free(s);
    return rc;
}

/* 1 written, 0 not this encoder's (nothing written that counts: the
 * caller gives up), -1 an error set. */
static int put_value(out *o, PyObject *v, int depth);

static int
put_items(out *o, PyObject *const *items, Py_ssize_t n, int depth)
{
    Py_ssize_t i;
    int rc;

    if (put(o, "[", 1) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (i && put(o, o->item_sep, o->item_len) < 0)
            return -1;
        if ((rc = put_value(o, items[i], depth)) <= 0)
            return rc;
    }
    return put(o, "]", 1) < 0 ? -1 : 1;
}

static int
put_dict(out *o, PyObject *d, int depth)
{
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    int rc;

    if (put(o, "{", 1) < 0)
        return -1;
    /* No Python code runs while it iterates: every key and value is of an
     * exact built-in type, whose encoding calls none. */
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            return 0;
        if (i++ && put(o, o->item_sep, o->item_len) < 0)
            return -1;
        if (put_str(o, key) < 0 || put(o, o->key_sep, o->key_len) < 0)
            return -1;
        if ((rc = put_value(o, value, depth)) <= 0)
            return rc;
    }
    return put(o, "}", 1) < 0 ? -1 : 1;
}

static int
put_value(out *o, PyObject *v, int depth)
{
    PyTypeObject *t = Py_TYPE(v);

    if (t == &PyUnicode_Type)
        return put_str(o, v) < 0 ? -1 : 1;
    if (v == Py_None)
        return put(o, "null", 4) < 0 ? -1 : 1;
    if (v == Py_True)
        return put(o, "true", 4) < 0 ? -1 : 1;
    if (v == Py_False)
        return put(o, "false", 5) < 0 ? -1 : 1;
    if (t == &PyLong_Type)
        return put_int(o, v) < 0 ? -1 : 1;
    if (t == &PyFloat_Type)
        return put_float(o, v) < 0 ? -1 : 1;
    if (depth >= MAX_DEPTH)
        return 0;
    if (t == &PyDict_Type)
        return put_dict(o, v, depth + 1);
    if (t == &PyList_Type) {
        /* A list of exact built-ins cannot change while it is written
         * (no Python code runs), so its items are read in place. */
        return put_items(o, PySequence_Fast_ITEMS(v), PyList_GET_SIZE(v),
                         depth + 1);
    }
    if (t == &PyTuple_Type)
        return put_items(o, PySequence_Fast_ITEMS(v), PyTuple_GET_SIZE(v),
                         depth + 1);
    return 0;
}

/* True when the `n` bytes at `s` are ASCII. */
static int
ascii(const char *s, Py_ssize_t n)
{
    Py_ssize_t i;

    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] > 127)
            return 0;
    return 1;
}

PyObject *
lc_py_json_text(PyObject *module, PyObject *args)
{
    char stack[2048];
    out o = {stack, 0, sizeof stack, NULL, NULL, NULL, 0, 0};
    PyObject *value, *result = NULL;
    int rc = 0;

    (void)module;
    if (!PyArg_ParseTuple(args, "Os#s#:json_text", &value, &o.item_sep,
                          &o.item_len, &o.key_sep, &o.key_len))
        return NULL;
    /* The text is made ASCII (a str of one byte a character): separators
     * that are not are json's to write. */
    if (ascii(o.item_sep, o.item_len) && ascii(o.key_sep, o.key_len))
        rc = put_value(&o, value, 0);
    if (rc > 0) {
        result = PyUnicode_New(o.len, 127);
        if (result != NULL)
            memcpy(PyUnicode_1BYTE_DATA(result), o.p, (size_t)o.len);
    } else if (rc == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    PyMem_Free(o.heap);
    return result;
}
