/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio._railio streams: Client.list's iterator (railio.Entry items, one
 * rio_list page at a time), Client.open's Reader ("rb", rio_reader_*) and
 * Writer ("wb", rio_writer_*).
 *
 * A Reader or Writer is one call of its Client from open to close: it holds
 * a reference to the Client and the token rio_py_call_begin gave it (the
 * library holds the token's rio_cancel until the stream is closed), and
 * counts in the Client's busy count until closed, so Client.close() refuses
 * (firing the token) while a stream is open, and Client.cancel() stops it.
 *
 * Every rio_* call that may block runs with the GIL released. A stream is
 * used by one thread at a time: `active` (read and written with the GIL
 * held) is set while a call runs without the GIL; a second call from
 * another thread meanwhile raises instead of racing it (the library's
 * readers and writers are not thread-safe).
 */
#include "railio_py.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <structmember.h>

/* ------------------------------------------------------------------ helpers */

/* railio.InvalidArgument (a ValueError) for a bad argument, as client.c
 * raises it, in place of any exception set; ValueError if the module
 * cannot be had. NULL. */
static PyObject *bad_arg(const char *fmt, ...)
{
    PyObject *mod, *cls, *msg;
    va_list ap;

    PyErr_Clear();
    mod = PyImport_ImportModule("railio._railio");
    cls = mod ? PyObject_GetAttrString(mod, "InvalidArgument") : NULL;
    Py_XDECREF(mod);
    PyErr_Clear();
    va_start(ap, fmt);
    msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg)
        PyErr_SetObject(cls ? cls : PyExc_ValueError, msg);
    Py_XDECREF(msg);
    Py_XDECREF(cls);
    return NULL;
}

/* A key from the library: str, or bytes when it is not valid UTF-8. */
/* "open 'key'" (the key cut to a readable length) for rio_py_raise's message. */
static void what_key(char *buf, size_t cap, const char *call, const char *key)
{
    snprintf(buf, cap, "%s '%.200s%s'", call, key, strlen(key) > 200 ? "..." : "");
}

/* The desc dict of put/stat: {key, size, generation, etag, chunk_size, nchunks}. */
static PyObject *desc_dict(const struct rio_desc *d)
{
    PyObject *key = rio_py_key_obj(d->key);

    if (!key)
        return NULL;
    return Py_BuildValue(
        "{s:N,s:K,s:K,s:s,s:K,s:K}", "key", key, "size", (unsigned long long)d->size, "generation",
        (unsigned long long)d->generation, "etag", d->etag, "chunk_size",
        (unsigned long long)d->chunk_size, "nchunks", (unsigned long long)d->nchunks);
}

/* A stream's call ended: its stats go into the caller's dict (if given) and
 * the client's last_stats. Keeps an exception already set. */
static void publish_stats(RioClient *cl, const struct rio_stats *st, PyObject *stats_arg)
{
    PyObject *exc_type, *exc_val, *exc_tb;

    if (!st)
        return;
    PyErr_Fetch(&exc_type, &exc_val, &exc_tb);
    if (rio_py_call_stats(cl, st, stats_arg) < 0)
        PyErr_WriteUnraisable((PyObject *)cl);
    PyErr_Restore(exc_type, exc_val, exc_tb);
}

/* The stats= argument: None or a dict. */
static int stats_arg_ok(PyObject *stats_arg)
{
    if (stats_arg && stats_arg != Py_None && !PyDict_Check(stats_arg)) {
        PyErr_Format(PyExc_TypeError, "stats must be a dict or None, not %.100s",
                     Py_TYPE(stats_arg)->tp_name);
        return 0;
    }
    return 1;
}

static PyObject *unsupported(const char *msg)
{
    PyObject *io = PyImport_ImportModule("io");
    PyObject *exc;

    if (!io)
        return NULL;
    exc = PyObject_GetAttrString(io, "UnsupportedOperation");
    Py_DECREF(io);
    if (!exc)
        return NULL;
    PyErr_SetString(exc, msg);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *closed_error(void)
{
    PyErr_SetString(PyExc_ValueError, "I/O operation on closed file");
    return NULL;
}

static PyObject *in_use_error(const char *what)
{
    PyErr_Format(PyExc_RuntimeError, "this %s is in use by another thread", what);
    return NULL;
}

/* -------------------------------------------------------------- railio.Entry */

static PyStructSequence_Field entry_fields[] = {
    {"key", "the key (str, or bytes when it is not valid UTF-8); a directory ends in '/'"},
    {"size", "bytes (0 for a directory)"},
    {"etag", "as in stat's desc (str), '' when the listing cannot say"},
    {"generation", "0 when the listing cannot say (stat can)"},
    {"mtime", "last modified, float seconds since the epoch, 0.0 if unknown"},
    {"is_dir", "True for a common prefix of a listing with recursive=False"},
    {NULL, NULL},
};

static PyStructSequence_Desc entry_desc = {
    "railio.Entry",
    "One listed object, or (is_dir) one common prefix of a listing with recursive=False.",
    entry_fields,
    6,
};

static PyTypeObject *Entry_Type;

static PyObject *entry_new(const struct rio_entry *e)
{
    PyObject *o = PyStructSequence_New(Entry_Type);
    PyObject *v[6];
    bool dir = e->flags & RIO_ENTRY_DIR;

    if (!o)
        return NULL;
    v[0] = rio_py_key_obj(e->key);
    v[1] = PyLong_FromUnsignedLongLong(dir ? 0 : e->size);
    /* Unknown is '' and 0 as in the library (and stat's desc), never None. */
    v[2] = PyUnicode_FromStringAndSize(e->etag,
                                       dir ? 0 : (Py_ssize_t)strnlen(e->etag, sizeof(e->etag)));
    v[3] = PyLong_FromUnsignedLongLong(dir ? 0 : e->generation);
    v[4] = PyFloat_FromDouble(dir ? 0.0 : (double)e->mtime_ns / 1e9);
    v[5] = PyBool_FromLong(dir);
    for (int i = 0; i < 6; i++) {
        if (!v[i]) {
            for (int j = 0; j < 6; j++)
                Py_XDECREF(v[j]);
            Py_DECREF(o);
            return NULL;
        }
    }
    for (int i = 0; i < 6; i++)
        PyStructSequence_SET_ITEM(o, i, v[i]);
    return o;
}

/* ------------------------------------------------------- the list iterator */

typedef struct {
    PyObject_HEAD RioClient *client;
    PyObject *cancel_arg; /* the caller's Cancel, or None */
    char *prefix;         /* PyMem copies */
    char *start_after;    /* NULL, or for the first page only */
    unsigned flags;
    unsigned page_size;
    bool first; /* no page fetched yet */
    bool done;  /* the last page was fetched */
    bool active;
    struct rio_list_page page;
    unsigned pos;
    char token[RIO_LIST_TOKEN_MAX + 1];
} RioListIter;

static char *mem_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = PyMem_Malloc(n);

    if (!p)
        PyErr_NoMemory();
    else
        memcpy(p, s, n);
    return p;
}

static void listiter_dealloc(RioListIter *self)
{
    rio_list_page_cleanup(&self->page);
    PyMem_Free(self->prefix);
    PyMem_Free(self->start_after);
    Py_XDECREF(self->cancel_arg);
    Py_XDECREF(self->client);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Fetch the next page into self->page (GIL released while it runs). */
static int listiter_fetch(RioListIter *self)
{
    struct rio_list_args a = {0};
    struct rio_call call = {0};
    struct rio_client *c = rio_py_client(self->client);
    RioCancel *cx;
    int ret;

    if (!c)
        return -1;
    cx = rio_py_call_begin(self->client, self->cancel_arg);
    if (!cx)
        return -1;
    rio_list_page_cleanup(&self->page);
    self->pos = 0;
    a.prefix = self->prefix;
    a.token = self->first ? NULL : self->token;
    a.start_after = self->first ? self->start_after : NULL;
    a.max_keys = self->page_size;
    a.flags = self->flags;
    call.cancel = cx->cx;
    self->active = true;
    Py_BEGIN_ALLOW_THREADS;
    ret = rio_list(c, &a, &self->page, &call);
    Py_END_ALLOW_THREADS;
    self->active = false;
    rio_py_call_end(self->client, cx); /* drops cx */
    if (ret < 0) {
        char what[256];

        what_key(what, sizeof(what), "list", self->prefix);
        rio_py_raise(ret, what);
        return -1;
    }
    self->first = false;
    if (self->page.n > RIO_LIST_PAGE_MAX)
        self->page.n = RIO_LIST_PAGE_MAX; /* never read past what a page may hold */
    memcpy(self->token, self->page.next_token, sizeof(self->token));
    self->token[RIO_LIST_TOKEN_MAX] = '\0';
    if (!self->token[0])
        self->done = true;
    return 0;
}

static PyObject *listiter_next(RioListIter *self)
{
    if (self->active) {
        PyErr_SetString(PyExc_ValueError, "list iterator already executing");
        return NULL;
    }
    while (self->pos >= self->page.n) {
        if (self->done) {
            rio_list_page_cleanup(&self->page);
            self->pos = 0;
            return NULL; /* StopIteration */
        }
        if (listiter_fetch(self) < 0) {
            self->done = true; /* an error ends the listing */
            return NULL;
        }
    }
    return entry_new(&self->page.entries[self->pos++]);
}

static PyTypeObject RioListIter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "railio.ListIterator",
    .tp_basicsize = sizeof(RioListIter),
    .tp_dealloc = (destructor)listiter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Iterator of railio.Entry returned by Client.list (one page fetched at a time).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)listiter_next,
};

PyObject *rio_py_list(RioClient *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"prefix", "recursive", "start_after", "page_size", "cancel", NULL};
    PyObject *prefix_obj = NULL, *start_obj = Py_None, *cancel_arg = Py_None;
    int recursive = 1;
    Py_ssize_t page_size = 1000;
    const char *prefix = "", *start_after = NULL;
    RioListIter *it;

    /* No stats=: rio_list fills none. */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$pOnO:list", kwlist, &prefix_obj, &recursive,
                                     &start_obj, &page_size, &cancel_arg))
        return NULL;
    if (!rio_py_client(self))
        return NULL;
    if (prefix_obj && prefix_obj != Py_None && !(prefix = rio_py_text(prefix_obj, "prefix")))
        return NULL;
    if (start_obj != Py_None && !(start_after = rio_py_text(start_obj, "start_after")))
        return NULL;
    if (page_size < 1 || page_size > (Py_ssize_t)RIO_LIST_PAGE_MAX) {
        return bad_arg("page_size must be 1..%u, not %zd", RIO_LIST_PAGE_MAX, page_size);
    }
    if (cancel_arg != Py_None && !PyObject_TypeCheck(cancel_arg, &RioCancel_Type)) {
        PyErr_Format(PyExc_TypeError, "cancel must be a railio.Cancel or None, not %.100s",
                     Py_TYPE(cancel_arg)->tp_name);
        return NULL;
    }
    it = PyObject_New(RioListIter, &RioListIter_Type);
    if (!it)
        return NULL;
    /* Every field set before anything can fail (dealloc reads them all). */
    it->client = (RioClient *)Py_NewRef(self);
    it->cancel_arg = Py_NewRef(cancel_arg);
    it->prefix = NULL;
    it->start_after = NULL;
    it->flags = recursive ? 0 : RIO_LIST_DELIM;
    it->page_size = (unsigned)page_size;
    it->first = true;
    it->done = false;
    it->active = false;
    memset(&it->page, 0, sizeof(it->page));
    it->pos = 0;
    it->token[0] = '\0';
    it->prefix = mem_strdup(prefix);
    if (!it->prefix || (start_after && !(it->start_after = mem_strdup(start_after)))) {
        Py_DECREF(it);
        return NULL;
    }
    return (PyObject *)it;
}

/* -------------------------------------------------------- Reader and Writer */

/* What Reader and Writer share: the call they are. */
typedef struct {
    PyObject_HEAD RioClient *client;
    RioCancel *cx;           /* from rio_py_call_begin; NULL once the call ended */
    PyObject *stats_arg;     /* the caller's stats dict, or None */
    struct rio_stats *stats; /* NULL when the call collects none */
    PyObject *key;           /* as given */
    pid_t pid;               /* the process that opened it (not the client's: a
                              * forked child may close the client and open it again) */
    bool active;             /* a call runs on it without the GIL */
} RioStream;

typedef struct {
    RioStream s;
    struct rio_reader *rd; /* NULL once closed */
    uint64_t size, generation, pos;
    char etag[48];
} RioReader;

typedef struct {
    RioStream s;
    struct rio_writer *w; /* NULL once closed or aborted */
    PyObject *desc;       /* close()'s result once committed, else NULL */
    bool aborted;
} RioWriter;

/* Whether this process was forked from the one that opened the stream:
 * the library's reader or writer belongs to the parent, whose threads fill
 * and drain it, so no rio_* call may touch it here (reading or closing it
 * waited for them for good). */
static bool stream_forked(const RioStream *s)
{
    return s->pid != getpid();
}

/* The call of the stream ended: uncount it, publish its stats. */
static void stream_end(RioStream *s)
{
    if (!s->cx)
        return;
    if (stream_forked(s)) {
        /* The parent's call: a client closed here forgot it (and one
         * still the parent's takes no call here), so it uncounts nothing. */
        Py_CLEAR(s->cx);
        return;
    }
    rio_py_call_end(s->client, s->cx); /* drops the reference */
    s->cx = NULL;
    publish_stats(s->client, s->stats, s->stats_arg);
}

static void stream_free(RioStream *s)
{
    PyMem_Free(s->stats);
    Py_XDECREF(s->stats_arg);
    Py_XDECREF(s->key);
    Py_XDECREF(s->client);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *stream_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *stream_false(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(ignored))
{
    Py_RETURN_FALSE;
}

static PyObject *stream_fileno(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(ignored))
{
    return unsupported("fileno: a railio stream has no file descriptor");
}

static PyObject *stream_seek(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    return unsupported("seek: a railio stream is not seekable");
}

static PyObject *stream_key(RioStream *s, void *Py_UNUSED(closure))
{
    return Py_NewRef(s->key);
}

/* The stream's error err from call ("read", "write", "close") as an exception. */
static PyObject *stream_raise(RioStream *s, int64_t err, const char *call)
{
    char what[256];
    const char *key = PyUnicode_Check(s->key) ? PyUnicode_AsUTF8(s->key) : PyBytes_AsString(s->key);

    PyErr_Clear();
    what_key(what, sizeof(what), call, key ? key : "?");
    return rio_py_raise((int)err, what);
}

/* 1 if a method may use the stream now (open, in the process that opened
 * it, and no other thread in it); else 0 with RuntimeError or ValueError
 * set. */
static int stream_usable(RioStream *s, bool open, const char *what)
{
    if (s->active) {
        in_use_error(what);
        return 0;
    }
    if (!open) {
        closed_error();
        return 0;
    }
    if (stream_forked(s)) {
        PyErr_Format(PyExc_RuntimeError,
                     "this railio.%s was opened in another process (this one was forked from "
                     "it): open it again on a Client created here",
                     what[0] == 'r' ? "Reader" : "Writer");
        return 0;
    }
    return 1;
}

/* ----------------------------------------------------------------- Reader */

static int reader_closed(RioReader *self)
{
    return !self->rd;
}

/* Close the library's reader (GIL released) and end the call. */
static void reader_finish(RioReader *self)
{
    struct rio_reader *rd = self->rd;

    if (!rd)
        return;
    self->rd = NULL;
    if (!stream_forked(&self->s)) { /* a forked child leaves the parent's reader alone */
        Py_BEGIN_ALLOW_THREADS;
        (void)rio_reader_close(rd); /* RIO_ECANCELED when closed early; read errors were raised */
        Py_END_ALLOW_THREADS;
    }
    stream_end(&self->s);
}

static void reader_dealloc(RioReader *self)
{
    reader_finish(self);
    stream_free(&self->s);
}

/* Fill buf[0..n) from the reader, GIL released; the count (< n only at the
 * end of the object), or an error when nothing was read. An error after
 * some bytes is left for the next call (the reader returns it again). */
static int64_t reader_fill(RioReader *self, void *buf, size_t n)
{
    struct rio_reader *rd = self->rd;
    size_t got = 0;
    int64_t r = 0;

    self->s.active = true;
    Py_BEGIN_ALLOW_THREADS;
    while (got < n) {
        r = rio_reader_read(rd, (char *)buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    Py_END_ALLOW_THREADS;
    self->s.active = false;
    if (got)
        return (int64_t)got;
    return r < 0 ? r : 0;
}

static PyObject *reader_readinto(RioReader *self, PyObject *arg)
{
    Py_buffer view;
    int64_t r;

    if (!stream_usable(&self->s, self->rd, "reader"))
        return NULL;
    /* In use from here: taking the buffer may run Python code (a tensor's
     * methods) that lets another thread in, which must find it busy, not
     * read beside this call or close the reader under it. */
    self->s.active = true;
    if (rio_py_buffer(arg, &view, 1, "b") < 0) {
        self->s.active = false;
        return NULL;
    }
    r = reader_fill(self, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (r < 0)
        return stream_raise(&self->s, r, "read");
    self->pos += (uint64_t)r;
    return PyLong_FromLongLong(r);
}

/* read(n) of want bytes at most (want already bounded by what is left). */
static PyObject *reader_read_n(RioReader *self, size_t want)
{
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)want);
    int64_t r;

    if (!b)
        return NULL;
    if (!want)
        return b;
    r = reader_fill(self, PyBytes_AS_STRING(b), want);
    if (r < 0) {
        Py_DECREF(b);
        return stream_raise(&self->s, r, "read");
    }
    self->pos += (uint64_t)r;
    if ((size_t)r < want && _PyBytes_Resize(&b, (Py_ssize_t)r) < 0)
        return NULL;
    return b;
}

static size_t reader_left(RioReader *self)
{
    uint64_t left = self->pos < self->size ? self->size - self->pos : 0;

    return left > (uint64_t)PY_SSIZE_T_MAX ? (size_t)PY_SSIZE_T_MAX : (size_t)left;
}

static PyObject *reader_readall(RioReader *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *b, *more;

    if (!stream_usable(&self->s, self->rd, "reader"))
        return NULL;
    b = reader_read_n(self, reader_left(self));
    if (!b)
        return NULL;
    /* The object holds size bytes: confirm the end (or raise its error). */
    more = reader_read_n(self, 1);
    if (!more) {
        Py_DECREF(b);
        return NULL;
    }
    if (PyBytes_GET_SIZE(more)) {
        Py_DECREF(more);
        Py_DECREF(b);
        return rio_py_raise(RIO_EPROTO, "read: more bytes than the object's size");
    }
    Py_DECREF(more);
    return b;
}

static PyObject *reader_read(RioReader *self, PyObject *args)
{
    Py_ssize_t n = -1;
    size_t left;

    if (!PyArg_ParseTuple(args, "|n:read", &n))
        return NULL;
    if (n < 0)
        return reader_readall(self, NULL);
    if (!stream_usable(&self->s, self->rd, "reader"))
        return NULL;
    left = reader_left(self);
    /* Past the size the reader still reports its end or its error. */
    return reader_read_n(self, (size_t)n < left ? (size_t)n : left ? left : n ? 1 : 0);
}

static PyObject *reader_close(RioReader *self, PyObject *Py_UNUSED(ignored))
{
    if (self->s.active)
        return in_use_error("reader");
    reader_finish(self);
    Py_RETURN_NONE;
}

static PyObject *reader_exit(RioReader *self, PyObject *Py_UNUSED(args))
{
    return reader_close(self, NULL);
}

static PyObject *reader_true(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (reader_closed((RioReader *)self))
        return closed_error();
    Py_RETURN_TRUE;
}

static PyObject *reader_flush(RioReader *self, PyObject *Py_UNUSED(ignored))
{
    if (reader_closed(self))
        return closed_error();
    Py_RETURN_NONE;
}

static PyObject *reader_tell(RioReader *self, PyObject *Py_UNUSED(ignored))
{
    if (reader_closed(self))
        return closed_error();
    return PyLong_FromUnsignedLongLong(self->pos);
}

static PyObject *reader_get_closed(RioReader *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(reader_closed(self));
}

static PyObject *reader_get_etag(RioReader *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(self->etag);
}

static PyObject *reader_repr(RioReader *self)
{
    return PyUnicode_FromFormat("<railio.Reader key=%R size=%llu%s>", self->s.key,
                                (unsigned long long)self->size,
                                reader_closed(self) ? " closed" : "");
}

static PyMethodDef reader_methods[] = {
    {"readinto", (PyCFunction)reader_readinto, METH_O,
     "readinto(b) -> int: fill the writable contiguous buffer b in place (no copy; the GIL "
     "released); fewer than len(b) bytes only at the end of the object, 0 there."},
    {"read", (PyCFunction)reader_read, METH_VARARGS,
     "read(n=-1) -> bytes: up to n bytes (all that is left when n < 0); b'' at the end."},
    {"readall", (PyCFunction)reader_readall, METH_NOARGS, "readall() -> bytes: all that is left."},
    {"readable", (PyCFunction)reader_true, METH_NOARGS, "True."},
    {"seekable", (PyCFunction)stream_false, METH_NOARGS, "False: a reader streams forward."},
    {"writable", (PyCFunction)stream_false, METH_NOARGS, "False."},
    {"isatty", (PyCFunction)stream_false, METH_NOARGS, "False."},
    {"fileno", (PyCFunction)stream_fileno, METH_NOARGS, "Raises io.UnsupportedOperation."},
    {"seek", (PyCFunction)stream_seek, METH_VARARGS, "Raises io.UnsupportedOperation."},
    {"tell", (PyCFunction)reader_tell, METH_NOARGS, "Bytes read so far."},
    {"flush", (PyCFunction)reader_flush, METH_NOARGS, "Does nothing."},
    {"close", (PyCFunction)reader_close, METH_NOARGS,
     "Stop the fetches still in flight and end the call (idempotent); its stats go to "
     "stats= and client.last_stats."},
    {"__enter__", stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)reader_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef reader_members[] = {
    {"size", T_ULONGLONG, offsetof(RioReader, size), READONLY, "the object's size in bytes"},
    {"generation", T_ULONGLONG, offsetof(RioReader, generation), READONLY,
     "the generation being read"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef reader_getset[] = {
    {"closed", (getter)reader_get_closed, NULL, "True once closed", NULL},
    {"etag", (getter)reader_get_etag, NULL, "the object's etag (str, '' if unknown)", NULL},
    {"key", (getter)stream_key, NULL, "the key as given to open", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RioReader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "railio.Reader",
    .tp_basicsize = sizeof(RioReader),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_repr = (reprfunc)reader_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A streaming reader (Client.open(key, 'rb')): an io.RawIOBase (readinto, read, "
              "readall), not seekable; io.BufferedReader(reader) buffers it. Every chunk is "
              "verified before its bytes are handed out.",
    .tp_methods = reader_methods,
    .tp_members = reader_members,
    .tp_getset = reader_getset,
};

/* ----------------------------------------------------------------- Writer */

static void writer_dealloc(RioWriter *self)
{
    struct rio_writer *w = self->w;

    if (w) { /* never closed: nothing is published */
        self->w = NULL;
        if (!stream_forked(&self->s)) { /* a forked child leaves the parent's writer alone */
            Py_BEGIN_ALLOW_THREADS;
            rio_writer_abort(w);
            Py_END_ALLOW_THREADS;
        }
        stream_end(&self->s);
    }
    Py_XDECREF(self->desc);
    stream_free(&self->s);
}

static PyObject *writer_write(RioWriter *self, PyObject *arg)
{
    Py_buffer view;
    int ret;

    if (!stream_usable(&self->s, self->w, "writer"))
        return NULL;
    self->s.active = true; /* before the buffer: as in reader_readinto */
    if (rio_py_buffer(arg, &view, 0, "b") < 0) {
        self->s.active = false;
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS;
    ret = rio_writer_write(self->w, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS;
    self->s.active = false;
    PyBuffer_Release(&view);
    if (ret < 0)
        return stream_raise(&self->s, ret, "write");
    return PyLong_FromSsize_t(view.len);
}

static PyObject *writer_close(RioWriter *self, PyObject *Py_UNUSED(ignored))
{
    struct rio_writer *w = self->w;
    struct rio_desc d;
    int ret;

    if (self->s.active)
        return in_use_error("writer");
    if (!w) /* closed already: the same result again */
        return self->desc ? Py_NewRef(self->desc) : Py_NewRef(Py_None);
    if (!stream_usable(&self->s, true, "writer"))
        return NULL; /* forked: only the parent can publish it */
    memset(&d, 0, sizeof(d));
    self->w = NULL;
    self->s.active = true;
    Py_BEGIN_ALLOW_THREADS;
    ret = rio_writer_close(w, &d);
    Py_END_ALLOW_THREADS;
    self->s.active = false;
    stream_end(&self->s);
    if (ret < 0) {
        rio_desc_cleanup(&d);
        self->aborted = true;
        return stream_raise(&self->s, ret, "close");
    }
    self->desc = desc_dict(&d);
    rio_desc_cleanup(&d);
    return self->desc ? Py_NewRef(self->desc) : NULL;
}

static PyObject *writer_abort(RioWriter *self, PyObject *Py_UNUSED(ignored))
{
    struct rio_writer *w = self->w;

    if (self->s.active)
        return in_use_error("writer");
    if (!w)
        Py_RETURN_NONE;
    self->w = NULL;
    self->aborted = true;
    if (!stream_forked(&self->s)) { /* a forked child drops only its handle */
        Py_BEGIN_ALLOW_THREADS;
        rio_writer_abort(w);
        Py_END_ALLOW_THREADS;
    }
    stream_end(&self->s);
    Py_RETURN_NONE;
}

static PyObject *writer_exit(RioWriter *self, PyObject *args)
{
    PyObject *exc_type = Py_None, *exc, *tb;
    PyObject *r;

    if (!PyArg_ParseTuple(args, "|OOO:__exit__", &exc_type, &exc, &tb))
        return NULL;
    if (exc_type != Py_None)
        r = writer_abort(self, NULL);
    else
        r = writer_close(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *writer_true(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!((RioWriter *)self)->w)
        return closed_error();
    Py_RETURN_TRUE;
}

static PyObject *writer_flush(RioWriter *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->w)
        return closed_error();
    Py_RETURN_NONE; /* bytes are sent as chunks fill; close publishes */
}

static PyObject *writer_get_closed(RioWriter *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(!self->w);
}

static PyObject *writer_repr(RioWriter *self)
{
    return PyUnicode_FromFormat("<railio.Writer key=%R%s>", self->s.key,
                                self->w         ? ""
                                : self->aborted ? " aborted"
                                                : " closed");
}

static PyMethodDef writer_methods[] = {
    {"write", (PyCFunction)writer_write, METH_O,
     "write(b) -> int: append the contiguous buffer b (all of it, the GIL released)."},
    {"close", (PyCFunction)writer_close, METH_NOARGS,
     "Send what is left, publish the object atomically and return its desc dict (as put's); "
     "after an error nothing is published and the error is raised. Idempotent."},
    {"abort", (PyCFunction)writer_abort, METH_NOARGS,
     "Stop the stream and drop every chunk sent: nothing is published."},
    {"writable", (PyCFunction)writer_true, METH_NOARGS, "True."},
    {"readable", (PyCFunction)stream_false, METH_NOARGS, "False."},
    {"seekable", (PyCFunction)stream_false, METH_NOARGS, "False."},
    {"isatty", (PyCFunction)stream_false, METH_NOARGS, "False."},
    {"fileno", (PyCFunction)stream_fileno, METH_NOARGS, "Raises io.UnsupportedOperation."},
    {"seek", (PyCFunction)stream_seek, METH_VARARGS, "Raises io.UnsupportedOperation."},
    {"flush", (PyCFunction)writer_flush, METH_NOARGS,
     "Does nothing: nothing is visible before close()."},
    {"__enter__", stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)writer_exit, METH_VARARGS,
     "close() after a clean with-block, abort() after an exception in it."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"closed", (getter)writer_get_closed, NULL, "True once closed or aborted", NULL},
    {"key", (getter)stream_key, NULL, "the key as given to open", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RioWriter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "railio.Writer",
    .tp_basicsize = sizeof(RioWriter),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_repr = (reprfunc)writer_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A streaming PUT (Client.open(key, 'wb')): write() appends, close() publishes "
              "atomically and returns the desc, abort() (or an exception in a with-block) drops "
              "it; nothing is visible before close().",
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
};

/* ------------------------------------------------------------ Client.open */

/* A new stream object of type tp, its call begun; NULL with an exception. */
static RioStream *stream_new(PyTypeObject *tp, RioClient *client, PyObject *key,
                             PyObject *cancel_arg, PyObject *stats_arg)
{
    RioStream *s = (RioStream *)tp->tp_alloc(tp, 0); /* zeroed */

    if (!s)
        return NULL;
    s->client = (RioClient *)Py_NewRef(client);
    s->pid = getpid();
    s->key = Py_NewRef(key);
    s->stats_arg = Py_NewRef(stats_arg);
    /* Stats unless the client's collect_stats is off and no stats= was given. */
    if (!client->no_stats || stats_arg != Py_None) {
        s->stats = PyMem_Calloc(1, sizeof(*s->stats));
        if (!s->stats) {
            PyErr_NoMemory();
            goto err;
        }
    }
    s->cx = rio_py_call_begin(client, cancel_arg);
    if (!s->cx)
        goto err;
    return s;
err:
    Py_DECREF(s);
    return NULL;
}

static PyObject *open_reader(RioClient *self, struct rio_client *c, PyObject *key_o,
                             const char *key, unsigned prefetch, PyObject *cancel_arg,
                             PyObject *stats_arg)
{
    RioReader *r = (RioReader *)stream_new(&RioReader_Type, self, key_o, cancel_arg, stats_arg);
    struct rio_call call = {0};
    struct rio_reader *rd = NULL;
    const struct rio_desc *d;
    int ret;

    if (!r)
        return NULL;
    call.cancel = r->s.cx->cx;
    call.stats = r->s.stats;
    Py_BEGIN_ALLOW_THREADS;
    ret = rio_reader_open(c, key, prefetch, &call, &rd);
    Py_END_ALLOW_THREADS;
    if (ret < 0) {
        char what[256];

        stream_end(&r->s);
        Py_DECREF(r);
        what_key(what, sizeof(what), "open", key);
        return rio_py_raise(ret, what);
    }
    r->rd = rd;
    d = rio_reader_desc(rd);
    if (d) {
        r->size = d->size;
        r->generation = d->generation;
        memcpy(r->etag, d->etag, sizeof(r->etag));
        r->etag[sizeof(r->etag) - 1] = '\0';
    }
    return (PyObject *)r;
}

static PyObject *open_writer(RioClient *self, struct rio_client *c, PyObject *key_o,
                             const char *key, unsigned slots, uint64_t size, PyObject *cancel_arg,
                             PyObject *stats_arg)
{
    RioWriter *w = (RioWriter *)stream_new(&RioWriter_Type, self, key_o, cancel_arg, stats_arg);
    struct rio_call call = {0};
    struct rio_writer *wr = NULL;
    int ret;

    if (!w)
        return NULL;
    call.cancel = w->s.cx->cx;
    call.stats = w->s.stats;
    Py_BEGIN_ALLOW_THREADS;
    ret = rio_writer_open(c, key, size, slots, &call, &wr);
    Py_END_ALLOW_THREADS;
    if (ret < 0) {
        char what[256];

        stream_end(&w->s);
        Py_DECREF(w);
        what_key(what, sizeof(what), "open", key);
        return rio_py_raise(ret, what);
    }
    w->w = wr;
    return (PyObject *)w;
}

#define RIO_PY_PREFETCH_MAX 1024

PyObject *rio_py_open(RioClient *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", "mode", "prefetch", "size", "cancel", "stats", NULL};
    PyObject *key_o, *size_o = Py_None, *cancel_arg = Py_None, *stats_arg = Py_None;
    const char *mode = "rb", *key;
    Py_ssize_t prefetch = 0;
    uint64_t size = RIO_SIZE_UNKNOWN;
    struct rio_client *c;
    bool reading;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|s$nOOO:open", kwlist, &key_o, &mode, &prefetch,
                                     &size_o, &cancel_arg, &stats_arg))
        return NULL;
    if (!(c = rio_py_client(self)))
        return NULL;
    if (!(key = rio_py_key(key_o, "key")))
        return NULL;
    if (!strcmp(mode, "rb")) {
        reading = true;
    } else if (!strcmp(mode, "wb")) {
        reading = false;
    } else {
        return bad_arg("mode must be 'rb' or 'wb', not '%.20s'", mode);
    }
    if (prefetch < 0 || prefetch > RIO_PY_PREFETCH_MAX) {
        return bad_arg("prefetch must be 0..%d, not %zd", RIO_PY_PREFETCH_MAX, prefetch);
    }
    if (size_o != Py_None) {
        if (reading) {
            return bad_arg("size is for mode 'wb'");
        }
        if (!PyLong_Check(size_o)) {
            PyErr_Format(PyExc_TypeError, "size must be an int or None, not %.100s",
                         Py_TYPE(size_o)->tp_name);
            return NULL;
        }
        size = PyLong_AsUnsignedLongLong(size_o);
        if (PyErr_Occurred() || size == RIO_SIZE_UNKNOWN) {
            return bad_arg("size must be 0..2**64-2 bytes, or None (unknown)");
        }
    }
    if (!stats_arg_ok(stats_arg))
        return NULL;
    if (reading)
        return open_reader(self, c, key_o, key, (unsigned)prefetch, cancel_arg, stats_arg);
    return open_writer(self, c, key_o, key, (unsigned)prefetch, size, cancel_arg, stats_arg);
}

/* ------------------------------------------------------------------- init */

/* io.RawIOBase.register(tp): isinstance(reader, io.RawIOBase) holds. */
static int register_raw(PyTypeObject *tp)
{
    PyObject *io = PyImport_ImportModule("io");
    PyObject *raw, *r;

    if (!io)
        return -1;
    raw = PyObject_GetAttrString(io, "RawIOBase");
    Py_DECREF(io);
    if (!raw)
        return -1;
    r = PyObject_CallMethod(raw, "register", "O", (PyObject *)tp);
    Py_DECREF(raw);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

int rio_py_stream_init(PyObject *m)
{
    static PyTypeObject *types[] = {&RioListIter_Type, &RioReader_Type, &RioWriter_Type};
    static const char *names[] = {"ListIterator", "Reader", "Writer"};

    if (!Entry_Type) {
        Entry_Type = PyStructSequence_NewType(&entry_desc);
        if (!Entry_Type)
            return -1;
    }
    if (PyModule_AddObjectRef(m, "Entry", (PyObject *)Entry_Type) < 0)
        return -1;
    for (int i = 0; i < 3; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            return -1;
    }
    if (register_raw(&RioReader_Type) < 0 || register_raw(&RioWriter_Type) < 0)
        return -1;
    return 0;
}
