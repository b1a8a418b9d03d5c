/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio's CPython extension (railio._railio): what its files share.
 * client.c: the module, Client (put, get, get_into, batch_*, exists, stat, delete,
 * stats), Cancel, the exception hierarchy. stream.c: Client.list's iterator,
 * Client.open's Reader ("rb") and Writer ("wb").
 */
#ifndef RAILIO_PY_H
#define RAILIO_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/types.h>

#include <railio.h>

/* railio.Client. c is NULL once closed (every method then raises ValueError). */
typedef struct {
    PyObject_HEAD struct rio_client *c;
    PyObject *url; /* str, the URL as given (secrets never shown in repr) */
    /* Everything below is read and written with the GIL held (the GIL is
     * the lock); a call keeps its token alive by holding a reference while
     * it runs with the GIL released. */
    PyObject *all;             /* RioCancel: the token of calls given no cancel=;
                                * Client.cancel() fires it and puts a fresh one here */
    PyObject *inflight;        /* caller-given Cancel objects of calls in progress: a dict
                                * {Cancel: number of calls using it} */
    PyObject *main_cx;         /* RioCancel or NULL: the token of the main thread's
                                * put, get and get_into given no cancel=, its own so
                                * that a Ctrl-C cancels that call only (counted in
                                * inflight while one runs; replaced once fired) */
    PyObject *last_stats;      /* dict of the last call's stats, or NULL: built from
                                * last_st when Client.last_stats is first read */
    Py_ssize_t busy;           /* calls in progress: close() with busy > 0 fires
                                * their tokens and raises RuntimeError, never
                                * destroys a client a call is using */
    struct rio_stats *last_st; /* the last call's stats (valid if has_last_st) */
    int has_last_st;
    int no_stats; /* Client.collect_stats = False: only calls given stats= collect */
    pid_t pid;    /* the process that created c: a forked child may not use it */
    int closing;  /* close() was refused with calls in progress: no new call
                   * begins (rio_py_client fails), so the next close() can
                   * succeed once they have returned */
} RioClient;

/* railio.Cancel: a cancellation token (rio_cancel). fire() from any thread. */
typedef struct {
    PyObject_HEAD struct rio_cancel *cx;
    int fired; /* fire() was called (Cancel.fired) */
} RioCancel;

extern PyTypeObject RioClient_Type;
extern PyTypeObject RioCancel_Type;

/* Raise the exception mapped from a RIO_E* or -errno value, with what (the
 * call and key) and rio_error_detail() in the message. Returns NULL. */
PyObject *rio_py_raise(int err, const char *what);

/* The stats dict of a call (same keys as `railio -v --json`'s "stats"). */
PyObject *rio_py_stats_dict(const struct rio_stats *st);

/* Record a finished call's stats (success or error): the client's
 * last_stats, and stats_arg (a dict or None/NULL) filled in place. 0, or -1
 * with an exception set. */
int rio_py_call_stats(RioClient *self, const struct rio_stats *st, PyObject *stats_arg);

/* NULL with ValueError set if the client is closed or closing, or with
 * RuntimeError set if rio_py_forked. */
struct rio_client *rio_py_client(RioClient *self);
/* 1 with RuntimeError set if self is open and was created in another
 * process (this one was forked from it): its library objects, and its
 * readers' and writers', may not be touched here; else 0. */
int rio_py_forked(RioClient *self);

/* A key argument (str, encoded UTF-8, or bytes) as a C string borrowed
 * from obj, or NULL with TypeError (not str/bytes) or InvalidArgument (a
 * NUL inside, not 1..RIO_KEY_MAX bytes) set; what names the argument in
 * the message. */
const char *rio_py_key(PyObject *obj, const char *what);
/* The same for a prefix or a start key: any length, "" allowed. */
const char *rio_py_text(PyObject *obj, const char *what);
/* A key as Python gets it: str when it is UTF-8, else bytes (a new
 * reference, NULL with an exception set). */
PyObject *rio_py_key_obj(const char *key);

/* Per-call cancel plumbing (client.c), with the GIL held: begin returns a
 * new reference to the token the call must use (the caller's Cancel, then
 * registered in self->inflight, or self->all when cancel_arg is None or
 * NULL) or NULL with TypeError set, and counts the call in self->busy;
 * end drops it (unregisters it, uncounts the call). */
RioCancel *rio_py_call_begin(RioClient *self, PyObject *cancel_arg);
void rio_py_call_end(RioClient *self, RioCancel *cx);

/* A contiguous CPU buffer of obj (client.c): the buffer protocol (bytes,
 * bytearray, memoryview, mmap, numpy), else a CPU torch tensor's memory
 * (no copy; a CUDA tensor is a TypeError saying to move it to the CPU).
 * writable asks for a writable one. -1 with TypeError/BufferError set
 * naming what (e.g. "buffers[3]") when obj is none of these or not
 * contiguous. Release with PyBuffer_Release. */
int rio_py_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what);

/* stream.c: registers Reader, Writer and the list iterator types on m. */
int rio_py_stream_init(PyObject *m);
/* stream.c: Client.list(prefix="", *, recursive=True, start_after=None, page_size=1000,
 * cancel=None) and Client.open(key, mode="rb", *, prefetch=0, size=None, cancel=None). */
PyObject *rio_py_list(RioClient *self, PyObject *args, PyObject *kw);
PyObject *rio_py_open(RioClient *self, PyObject *args, PyObject *kw);

#endif
