/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placeholder until py-stream's stream.c lands: Client.list and
 * Client.open raise NotImplementedError.
 */
#include "railio_py.h"

int rio_py_stream_init(PyObject *m)
{
    (void)m;
    return 0;
}

PyObject *rio_py_list(RioClient *self, PyObject *args, PyObject *kw)
{
    (void)self;
    (void)args;
    (void)kw;
    PyErr_SetString(PyExc_NotImplementedError, "Client.list: not built yet");
    return NULL;
}

PyObject *rio_py_open(RioClient *self, PyObject *args, PyObject *kw)
{
    (void)self;
    (void)args;
    (void)kw;
    PyErr_SetString(PyExc_NotImplementedError, "Client.open: not built yet");
    return NULL;
}
