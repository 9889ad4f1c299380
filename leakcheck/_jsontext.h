/*
 * _jsontext.h — json_text() of leakcheck._core (_jsontext.c).
 */
#ifndef LEAKCHECK_JSONTEXT_H
#define LEAKCHECK_JSONTEXT_H

#include <Python.h>

PyObject *lc_py_json_text(PyObject *module, PyObject *args);

#endif
