/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio._railio: the module, railio.Client (put/get/get_into/batch_*,
 * exists, stat, delete, cancel, close, stats), railio.Cancel and the
 * exception hierarchy. Every rio_* call that may block runs with the GIL
 * released; the buffers it reads or writes are the caller's own memory
 * (buffer protocol, or a CPU torch tensor's storage), never a copy.
 */
#include "railio_py.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------- exceptions */

static PyObject *Err_Error, *Err_NotFound, *Err_AccessDenied, *Err_Timeout, *Err_Unavailable,
    *Err_VerifyError, *Err_NoSpace, *Err_OutcomeUnknown, *Err_Cancelled, *Err_InvalidArgument,
    *Err_GenerationChanged, *Err_BatchError;

/* The class of err: its kind from the library (rio_error_kind, which the
 * CLI's exit statuses come from too), with st the failed call's stats. */
static PyObject *exc_class(int err, const struct rio_stats *st)
{
    switch (rio_error_kind(err, st)) {
    case RIO_KIND_NOTFOUND:
        return Err_NotFound;
    case RIO_KIND_ACCESS:
        return Err_AccessDenied;
    case RIO_KIND_TIMEOUT:
        return Err_Timeout;
    case RIO_KIND_UNREACHABLE:
        return Err_Unavailable;
    case RIO_KIND_VERIFY:
        return Err_VerifyError;
    case RIO_KIND_NOSPACE:
        return Err_NoSpace;
    case RIO_KIND_UNKNOWN:
        return Err_OutcomeUnknown;
    case RIO_KIND_CANCELED:
        return Err_Cancelled;
    case RIO_KIND_URL:
    case RIO_KIND_INVALID:
        return Err_InvalidArgument;
    case RIO_KIND_GENERATION:
        return Err_GenerationChanged;
    default:
        return Err_Error;
    }
}

/* Set .errno, .code and .detail on an Error instance (not .strerror:
 * OSError's str() would then show "[Errno N] ..." instead of the message). */
static int error_attrs(PyObject *e, int err, const char *detail)
{
    PyObject *v;
    int ret;

    v = PyLong_FromLong(err);
    if (!v)
        return -1;
    ret = PyObject_SetAttrString(e, "errno", v);
    Py_DECREF(v);
    if (ret < 0)
        return -1;
    v = PyUnicode_FromString(rio_errname(err));
    if (!v)
        return -1;
    ret = PyObject_SetAttrString(e, "code", v);
    Py_DECREF(v);
    if (ret < 0)
        return -1;
    if (detail && detail[0])
        v = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "replace");
    else
        v = Py_NewRef(Py_None);
    if (!v)
        return -1;
    ret = PyObject_SetAttrString(e, "detail", v);
    Py_DECREF(v);
    return ret;
}

/* A new exception instance for err: "what: message (detail)". */
static PyObject *error_new(int err, const char *what, const char *detail,
                           const struct rio_stats *st)
{
    PyObject *msg, *e;

    if (detail && detail[0])
        msg = PyUnicode_FromFormat("%s: %s (%s)", what, rio_strerror(err), detail);
    else
        msg = PyUnicode_FromFormat("%s: %s", what, rio_strerror(err));
    if (!msg)
        return NULL;
    e = PyObject_CallOneArg(exc_class(err, st), msg);
    Py_DECREF(msg);
    if (e && error_attrs(e, err, detail) < 0)
        Py_CLEAR(e);
    return e;
}

/* The exception for a call that just failed with err: the library's
 * detail is read before anything else can make a rio_* call in this thread
 * (it is thread-local, valid until the next one). */
static PyObject *error_now(int err, const char *what, const struct rio_stats *st)
{
    const char *d = rio_error_detail();
    char detail[512];

    snprintf(detail, sizeof(detail), "%s", d ? d : "");
    return error_new(err, what, detail, st);
}

static PyObject *raise_st(int err, const char *what, const struct rio_stats *st)
{
    PyObject *e = error_now(err, what, st);

    if (e) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
    return NULL;
}

PyObject *rio_py_raise(int err, const char *what)
{
    return raise_st(err, what, NULL);
}

/* "get_into 'key'" (the key cut to a readable length). */
static void what_key(char *out, size_t cap, const char *fn, const char *key)
{
    snprintf(out, cap, "%s '%.200s%s'", fn, key, strlen(key) > 200 ? "..." : "");
}

/* ------------------------------------------------------------------ stats */

int rio_py_call_stats(RioClient *self, const struct rio_stats *st, PyObject *stats_arg);

/* Whether a call collects stats: unless the client's collect_stats is off
 * and the call was given no stats= dict (the library's stats cost a call
 * more than the rest of a small transfer: docs in python/README.md). */
static inline int want_stats(const RioClient *self, PyObject *stats_arg)
{
    return !self->no_stats || (stats_arg && stats_arg != Py_None);
}

/* A call failed with err: record its stats (they are filled on errors too)
 * and raise. key may be NULL (what is then fn alone). */
static void call_failed(RioClient *self, int err, const char *fn, const char *key,
                        const struct rio_stats *st, PyObject *stats_arg)

{
    char what[256];
    PyObject *e;

    if (key)
        what_key(what, sizeof(what), fn, key);
    else
        snprintf(what, sizeof(what), "%s", fn);
    e = error_now(err, what, st);
    if (st && rio_py_call_stats(self, st, stats_arg) < 0) {
        Py_XDECREF(e);
        return;
    }
    if (e) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
}

static const char *path_state_name(int s)
{
    switch (s) {
    case 0:
        return "healthy";
    case 1:
        return "cooling";
    case 2:
        return "probing";
    default:
        return "unknown";
    }
}

/* Steals v; -1 on error (v NULL included). */
static int put_item(PyObject *d, const char *k, PyObject *v)
{
    int ret;

    if (!v)
        return -1;
    ret = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return ret;
}

#define NS_S(x) PyFloat_FromDouble((double)(x) / 1e9)
#define U64(x) PyLong_FromUnsignedLongLong((unsigned long long)(x))

PyObject *rio_py_stats_dict(const struct rio_stats *st)
{
    PyObject *d, *sub, *paths;

    d = PyDict_New();
    if (!d)
        return NULL;
    if (put_item(d, "bytes", U64(st->bytes)) < 0 ||
        put_item(d, "elapsed_s", NS_S(st->elapsed_ns)) < 0 ||
        put_item(d, "goodput_mbps", PyFloat_FromDouble(st->goodput_mbps)) < 0 ||
        put_item(d, "chunks", U64(st->chunks)) < 0 ||
        put_item(d, "retries", U64(st->retries_total)) < 0 ||
        put_item(d, "replans", U64(st->replans)) < 0 ||
        put_item(d, "verdict", PyUnicode_FromString(rio_verdict_name(st->verdict))) < 0 ||
        put_item(
            d, "verdict_text",
            PyUnicode_DecodeUTF8(st->verdict_text,
                                 (Py_ssize_t)strnlen(st->verdict_text, sizeof(st->verdict_text)),
                                 "replace")) < 0 ||
        put_item(d, "hash_s", NS_S(st->hash_ns)) < 0 ||
        put_item(d, "verify_s", NS_S(st->verify_ns)) < 0 ||
        put_item(d, "copy_s", NS_S(st->copy_ns)) < 0 ||
        /* What a sink or source verdict and a storage one stand on. */
        put_item(d, "sink_s", NS_S(st->sink_ns)) < 0 ||
        put_item(d, "source_s", NS_S(st->source_ns)) < 0 ||
        put_item(d, "op_s", NS_S(st->op_ns)) < 0 ||
        put_item(d, "service_s", NS_S(st->svc_ns)) < 0 ||
        put_item(d, "peak_inflight_bytes", U64(st->peak_inflight_bytes)) < 0)
        goto err_d;

    sub = PyDict_New();
    if (put_item(d, "retries_by_class", sub) < 0)
        goto err_d;
    for (int k = 0; k < RIO_CLASS__COUNT; k++)
        if (put_item(sub, rio_class_name(k), U64(st->retries[k])) < 0)
            goto err_d;

    sub = PyDict_New();
    if (put_item(d, "latency", sub) < 0 || put_item(sub, "p50_s", NS_S(st->lat_p50_ns)) < 0 ||
        put_item(sub, "p95_s", NS_S(st->lat_p95_ns)) < 0 ||
        put_item(sub, "p99_s", NS_S(st->lat_p99_ns)) < 0 ||
        put_item(sub, "max_s", NS_S(st->lat_max_ns)) < 0)
        goto err_d;

    sub = PyDict_New();
    if (put_item(d, "cpu", sub) < 0 || put_item(sub, "engine_s", NS_S(st->engine_cpu_ns)) < 0 ||
        put_item(sub, "transport_s", NS_S(st->transport_cpu_ns)) < 0 ||
        put_item(sub, "caller_s", NS_S(st->caller_cpu_ns)) < 0 ||
        put_item(sub, "run_queue_wait_s", NS_S(st->cpu_wait_ns)) < 0)
        goto err_d;

    /* Where the adaptive concurrency stood for the call's class. */
    static const char *const adapt_state[] = {"off", "growing", "settled", "ceiling"};
    int as = st->adapt_state;
    sub = PyDict_New();
    if (put_item(d, "adapt", sub) < 0 ||
        put_item(sub, "state",
                 PyUnicode_FromString(as >= 0 && as <= RIO_ADAPT_CEILING ? adapt_state[as] : "?")) <
            0 ||
        put_item(sub, "paths", PyLong_FromUnsignedLong(st->adapt_paths)) < 0 ||
        put_item(sub, "depth", PyLong_FromUnsignedLong(st->adapt_depth)) < 0 ||
        put_item(sub, "next_pct", PyLong_FromLong(st->adapt_next_pct)) < 0)
        goto err_d;

    unsigned np = st->npaths < RIO_MAX_PATHS ? st->npaths : RIO_MAX_PATHS;
    paths = PyList_New(np);
    if (put_item(d, "paths", paths) < 0)
        goto err_d;
    for (unsigned i = 0; i < np; i++) {
        const struct rio_path_stats *p = &st->path[i];

        sub = PyDict_New();
        if (!sub)
            goto err_d;
        PyList_SET_ITEM(paths, i, sub);
        if (put_item(sub, "bytes", U64(p->bytes)) < 0 || put_item(sub, "ops", U64(p->ops)) < 0 ||
            put_item(sub, "errors", U64(p->errors)) < 0 ||
            put_item(sub, "busy_s", NS_S(p->busy_ns)) < 0 ||
            put_item(sub, "rate_mbps", PyFloat_FromDouble(p->rate_mbps)) < 0 ||
            put_item(sub, "cap_mbps", PyFloat_FromDouble(p->cap_mbps)) < 0 ||
            put_item(sub, "peak_depth", U64(p->peak_depth)) < 0 ||
            put_item(sub, "state", PyUnicode_FromString(path_state_name(p->state))) < 0)
            goto err_d;
    }
    return d;
err_d:
    Py_DECREF(d);
    return NULL;
}

int rio_py_call_stats(RioClient *self, const struct rio_stats *st, PyObject *stats_arg)
{
    /* last_stats is built when asked for: a call pays a copy, not a dict. */
    memcpy(self->last_st, st, sizeof(*st));
    self->has_last_st = 1;
    Py_CLEAR(self->last_stats);
    if (stats_arg && stats_arg != Py_None) {
        PyObject *d = rio_py_stats_dict(st);
        int ret;

        if (!d)
            return -1;
        PyDict_Clear(stats_arg);
        ret = PyDict_Update(stats_arg, d);
        Py_DECREF(d);
        return ret;
    }
    return 0;
}

/* ----------------------------------------------------------------- Cancel */

static PyObject *Cancel_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    RioCancel *self;
    int ret;

    if ((args && PyTuple_GET_SIZE(args)) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "Cancel() takes no arguments");
        return NULL;
    }
    self = (RioCancel *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    ret = rio_cancel_new(&self->cx);
    if (ret < 0) {
        Py_DECREF(self);
        return rio_py_raise(ret, "Cancel()");
    }
    return (PyObject *)self;
}

static void Cancel_dealloc(RioCancel *self)
{
    rio_cancel_destroy(self->cx);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void cancel_fire(RioCancel *self)
{
    self->fired = 1;
    rio_cancel_fire(self->cx);
}

static PyObject *Cancel_fire(RioCancel *self, PyObject *unused)
{
    (void)unused;
    cancel_fire(self);
    Py_RETURN_NONE;
}

static PyObject *Cancel_fired(RioCancel *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->fired);
}

static PyMethodDef Cancel_methods[] = {
    {"fire", (PyCFunction)Cancel_fire, METH_NOARGS,
     "fire()\n--\n\nCancel every call carrying this token (they raise railio.Cancelled). "
     "Safe from any thread; a fired token stays fired."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Cancel_getset[] = {
    {"fired", (getter)Cancel_fired, NULL, "True once fire() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RioCancel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "railio.Cancel",
    .tp_basicsize = sizeof(RioCancel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Cancel()\n--\n\nA cancellation token: pass it as cancel= to calls, fire() it "
              "from any thread to make them raise railio.Cancelled.",
    .tp_new = Cancel_new,
    .tp_dealloc = (destructor)Cancel_dealloc,
    .tp_methods = Cancel_methods,
    .tp_getset = Cancel_getset,
};

/* --------------------------------------------------------- call plumbing */

RioCancel *rio_py_call_begin(RioClient *self, PyObject *cancel_arg)
{
    RioCancel *cx;

    if (!cancel_arg || cancel_arg == Py_None) {
        cx = (RioCancel *)Py_NewRef(self->all);
    } else {
        PyObject *n;
        long k = 0;

        if (!PyObject_TypeCheck(cancel_arg, &RioCancel_Type)) {
            PyErr_Format(PyExc_TypeError, "cancel must be a railio.Cancel, not %.100s",
                         Py_TYPE(cancel_arg)->tp_name);
            return NULL;
        }
        /* inflight counts each token's calls: one token may serve several. */
        n = PyDict_GetItemWithError(self->inflight, cancel_arg);
        if (n)
            k = PyLong_AsLong(n);
        else if (PyErr_Occurred())
            return NULL;
        n = PyLong_FromLong(k + 1);
        if (!n || PyDict_SetItem(self->inflight, cancel_arg, n) < 0) {
            Py_XDECREF(n);
            return NULL;
        }
        Py_DECREF(n);
        cx = (RioCancel *)Py_NewRef(cancel_arg);
    }
    self->busy++;
    return cx;
}

void rio_py_call_end(RioClient *self, RioCancel *cx)
{
    if ((PyObject *)cx != self->all) {
        PyObject *exc_type, *exc_value, *exc_tb, *n;

        /* Runs on error paths too: keep the pending exception. */
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        n = PyDict_GetItem(self->inflight, (PyObject *)cx);
        if (n) {
            long k = PyLong_AsLong(n);

            if (k <= 1) {
                PyDict_DelItem(self->inflight, (PyObject *)cx);
            } else {
                n = PyLong_FromLong(k - 1);
                if (n) {
                    PyDict_SetItem(self->inflight, (PyObject *)cx, n);
                    Py_DECREF(n);
                }
            }
        }
        PyErr_Clear();
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    self->busy--;
    Py_DECREF(cx);
}

int rio_py_forked(RioClient *self)
{
    if (self->c && self->pid != getpid()) {
        /* The library's threads did not come along: a call would wait
         * for them for good. */
        PyErr_SetString(PyExc_RuntimeError,
                        "railio.Client was created in another process (this one was forked "
                        "from it): create a new Client here (for torch DataLoader workers: "
                        "in worker_init_fn or on first use)");
        return 1;
    }
    return 0;
}

struct rio_client *rio_py_client(RioClient *self)
{
    if (rio_py_forked(self))
        return NULL;
    if (!self->c || self->closing) {
        PyErr_SetString(PyExc_ValueError, self->c ? "railio.Client is closing (close() was "
                                                    "called with calls in progress)"
                                                  : "railio.Client is closed");
        return NULL;
    }
    return self->c;
}

/* Begin a call and return the client it runs on, the call counted in busy
 * so close() cannot destroy it: nothing between here and the rio_* call
 * may run Python code that releases the GIL unaccounted. */
static struct rio_client *call_enter(RioClient *self, PyObject *cancel_arg, RioCancel **cx)
{
    struct rio_client *c;

    *cx = rio_py_call_begin(self, cancel_arg);
    if (!*cx)
        return NULL;
    c = rio_py_client(self);
    if (!c) {
        rio_py_call_end(self, *cx);
        *cx = NULL;
    }
    return c;
}

/* ---------------------------------------------------------------- buffers */

/* torch.Tensor, if the program imported torch (a tensor cannot exist
 * otherwise): 1 with a new reference, 0 without torch. */
static int torch_tensor_type(PyObject **cls)
{
    static PyObject *name;
    PyObject *torch;

    *cls = NULL;
    if (!name && !(name = PyUnicode_InternFromString("torch")))
        return -1;
    torch = PyImport_GetModule(name);
    if (!torch)
        return PyErr_Occurred() ? -1 : 0;
    *cls = PyObject_GetAttrString(torch, "Tensor");
    Py_DECREF(torch);
    if (!*cls || !PyType_Check(*cls)) {
        Py_CLEAR(*cls);
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Whether t.<method>() is true; -1 with the exception set. A method the
 * tensor does not have (an older torch) is false. */
static int tensor_flag(PyObject *t, const char *method)
{
    PyObject *v;
    int r;

    if (!PyObject_HasAttrString(t, method))
        return 0;
    v = PyObject_CallMethod(t, method, NULL);
    if (!v)
        return -1;
    r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* t's storage object (untyped_storage() in torch 2, _storage() in 1.13,
 * storage() before), a new reference; NULL with the exception set. */
static PyObject *tensor_storage(PyObject *t)
{
    static const char *const names[] = {"untyped_storage", "_storage", "storage"};

    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (PyObject_HasAttrString(t, names[i]))
            return PyObject_CallMethod(t, names[i], NULL);
    PyErr_SetString(PyExc_TypeError, "this torch tensor has no storage() method");
    return NULL;
}

/*
 * A CPU tensor's bytes: its data_ptr() for numel() x element_size() bytes,
 * the buffer holding the tensor and its storage object, so that the
 * memory stays alive while the call runs even if t is given other storage
 * meanwhile (set_() from another thread). A tensor with bytes but no
 * memory behind them (a wrapper subclass: data_ptr() 0, which sent the C
 * stack) and a lazy conjugate or negative view (whose bytes are not its
 * values) are refused. Resizing a tensor while a call uses it is the
 * caller's race, as with any memory handed to C (docs/python.md): torch
 * has no way to forbid it short of tensor.numpy(), which makes the
 * storage non-resizable for good.
 */
static int tensor_buffer(PyObject *t, Py_buffer *view, int writable, const char *what)
{
    PyObject *dev = NULL, *dtype = NULL, *v = NULL, *st = NULL, *hold = NULL;
    void *ptr;
    Py_ssize_t numel, esize;
    int ret = -1, r;

    dev = PyObject_GetAttrString(t, "device");
    if (!dev)
        return -1;
    dtype = PyObject_GetAttrString(dev, "type");
    if (!dtype)
        goto out;
    if (!PyUnicode_Check(dtype) || PyUnicode_CompareWithASCIIString(dtype, "cpu") != 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a torch tensor on device %S: move it to the CPU (tensor.cpu(), "
                     "or a pinned CPU tensor) first",
                     what, dev);
        goto out;
    }
    /* A sparse or MKL-DNN tensor has no one block of memory (torch's own
     * RuntimeError from is_contiguous() or data_ptr() said less): refused
     * as other tensors with no memory behind their bytes are. */
    Py_CLEAR(dtype);
    dtype = PyObject_GetAttrString(t, "layout");
    if (!dtype)
        goto out;
    v = PyObject_Str(dtype);
    if (!v)
        goto out;
    if (PyUnicode_CompareWithASCIIString(v, "torch.strided") != 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a torch tensor of layout %U, with no memory behind its values as "
                     "one block: pass tensor.to_dense()",
                     what, v);
        goto out;
    }
    Py_CLEAR(v);
    if ((r = tensor_flag(t, "is_contiguous")) <= 0) {
        if (r == 0)
            PyErr_Format(PyExc_BufferError,
                         "%s is not contiguous (a torch tensor view with strides): pass "
                         "tensor.contiguous()",
                         what);
        goto out;
    }
    if ((r = tensor_flag(t, "is_conj")) != 0 || (r = tensor_flag(t, "is_neg")) != 0) {
        if (r > 0)
            PyErr_Format(PyExc_BufferError,
                         "%s is a lazy conjugate or negative view, whose bytes are not its "
                         "values: pass tensor.resolve_conj().resolve_neg()",
                         what);
        goto out;
    }
    v = PyObject_CallMethod(t, "numel", NULL);
    if (!v || (numel = PyLong_AsSsize_t(v)) < 0)
        goto out;
    Py_CLEAR(v);
    v = PyObject_CallMethod(t, "element_size", NULL);
    if (!v || (esize = PyLong_AsSsize_t(v)) < 0)
        goto out;
    Py_CLEAR(v);
    if (numel && esize > PY_SSIZE_T_MAX / numel) {
        PyErr_Format(PyExc_OverflowError, "%s: tensor too large", what);
        goto out;
    }
    v = PyObject_CallMethod(t, "data_ptr", NULL);
    if (!v)
        goto out;
    ptr = PyLong_AsVoidPtr(v);
    if (!ptr && PyErr_Occurred())
        goto out;
    if (!ptr && numel * esize > 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a torch tensor of %zd bytes with no memory behind them "
                     "(data_ptr() is 0: a wrapper subclass?)",
                     what, numel * esize);
        goto out;
    }
    st = tensor_storage(t);
    if (!st)
        goto out;
    if (!ptr)
        ptr = view; /* an empty tensor: any address, no byte is touched */
    hold = PyTuple_Pack(2, t, st);
    if (!hold)
        goto out;
    ret = PyBuffer_FillInfo(view, hold, ptr, numel * esize, 0,
                            writable ? PyBUF_WRITABLE | PyBUF_SIMPLE : PyBUF_SIMPLE);
out:
    Py_XDECREF(hold);
    Py_XDECREF(st);
    Py_XDECREF(v);
    Py_XDECREF(dtype);
    Py_XDECREF(dev);
    return ret;
}

/*
 * Whether a buffer's items hold Python objects: struct code 'O' anywhere
 * in its format (numpy's dtype=object, ctypes' py_object arrays, a
 * structured dtype with an object field), field names (":name:") aside.
 * Their bytes are PyObject pointers: a PUT would publish addresses and a
 * GET would write the object's bytes over them, pointers the interpreter
 * then follows.
 */
static int format_holds_objects(const char *fmt)
{
    for (const char *p = fmt; p && *p; p++) {
        if (*p == ':') {
            p = strchr(p + 1, ':');
            if (!p)
                return 0;
        } else if (*p == 'O') {
            return 1;
        }
    }
    return 0;
}

int rio_py_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    int r;

    if (PyObject_CheckBuffer(obj)) {
        /* With its format, to refuse Python objects; an exporter that
         * cannot name its items (numpy's datetime64) holds plain bytes
         * and is taken without one. */
        if (PyObject_GetBuffer(obj, view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            if (PyObject_GetBuffer(obj, view, PyBUF_STRIDES) < 0) {
                /* e.g. a numpy array with negative strides refusing STRIDES */
                PyErr_Clear();
                PyErr_Format(PyExc_BufferError, "%s is not contiguous: pass a contiguous buffer",
                             what);
                return -1;
            }
        }
        if (format_holds_objects(view->format)) {
            PyErr_Format(PyExc_TypeError,
                         "%s holds Python objects (format '%.40s'), whose bytes are pointers: "
                         "pass a buffer of plain data (not a numpy dtype=object array)",
                         what, view->format);
            PyBuffer_Release(view);
            return -1;
        }
        if (!PyBuffer_IsContiguous(view, 'A')) {
            PyBuffer_Release(view);
            PyErr_Format(PyExc_BufferError,
                         "%s is not contiguous: pass a contiguous buffer (e.g. "
                         "numpy.ascontiguousarray(a))",
                         what);
            return -1;
        }
        if (writable && view->readonly) {
            PyBuffer_Release(view);
            PyErr_Format(PyExc_TypeError,
                         "%s is read-only: what is read lands in it, so it must be writable "
                         "(bytearray, numpy array, writable mmap or memoryview, CPU torch "
                         "tensor), not %.100s",
                         what, Py_TYPE(obj)->tp_name);
            return -1;
        }
        return 0;
    }
    PyObject *cls;
    r = torch_tensor_type(&cls);
    if (r < 0)
        return -1;
    /* A type check, not isinstance(): an object cannot claim to be a
     * tensor through __class__. */
    if (r && PyObject_TypeCheck(obj, (PyTypeObject *)cls)) {
        Py_DECREF(cls);
        return tensor_buffer(obj, view, writable, what);
    }
    Py_XDECREF(cls);
    PyErr_Format(PyExc_TypeError,
                 "%s must be a buffer (bytes, bytearray, memoryview, mmap, numpy array) or a "
                 "CPU torch tensor, not %.100s",
                 what, Py_TYPE(obj)->tp_name);
    return -1;
}

/* ------------------------------------------------------------ arguments */

const char *rio_py_text(PyObject *obj, const char *what)
{
    const char *s;
    Py_ssize_t n;

    if (PyUnicode_Check(obj)) {
        s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (!s) {
            /* A lone surrogate (a name decoded with surrogateescape): no
             * UTF-8 spells it; the caller's key is its bytes. Said as the
             * other key rules are, naming which argument broke it. */
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                return NULL;
            PyErr_Clear();
            PyErr_Format(Err_InvalidArgument,
                         "%s is not valid UTF-8 text (it holds a lone surrogate): pass it as "
                         "bytes (os.fsencode(name))",
                         what);
            return NULL;
        }
    } else if (PyBytes_Check(obj)) {
        s = PyBytes_AS_STRING(obj);
        n = PyBytes_GET_SIZE(obj);
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be str or bytes, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if ((size_t)n != strlen(s)) {
        PyErr_Format(Err_InvalidArgument, "%s holds a NUL character", what);
        return NULL;
    }
    return s;
}

const char *rio_py_key(PyObject *obj, const char *what)
{
    const char *s = rio_py_text(obj, what);
    size_t n;

    if (!s)
        return NULL;
    n = strlen(s);

    if (n == 0 || n > RIO_KEY_MAX) {
        PyErr_Format(Err_InvalidArgument, "%s must be 1 to %d bytes, not %zu", what,
                     (int)RIO_KEY_MAX, n);
        return NULL;
    }
    return s;
}

enum { MAX_POS = 3 };

/*
 * Vectorcall arguments: npos required ones (positionally or by name), then
 * the keyword-only cancel= and stats=. out: npos objects, then cancel and
 * stats (NULL when not given). All borrowed.
 */
/* parse_args, and keyword-only arguments of its own (extra[0..nextra):
 * their names; xout: the values, NULL when absent). */
static int parse_args_ex(const char *fn, const char *const *names, Py_ssize_t npos,
                         PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         PyObject **out, const char *const *extra, unsigned nextra,
                         PyObject **xout)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

    for (unsigned i = 0; i < nextra; i++)
        xout[i] = NULL;

    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments but %zd were given", fn,
                     npos, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < npos + 2; i++)
        out[i] = i < nargs ? args[i] : NULL;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, j);
        Py_ssize_t slot = -1;

        if (PyUnicode_CompareWithASCIIString(k, "cancel") == 0)
            slot = npos;
        else if (PyUnicode_CompareWithASCIIString(k, "stats") == 0)
            slot = npos + 1;
        else
            for (Py_ssize_t i = 0; i < npos; i++)
                if (PyUnicode_CompareWithASCIIString(k, names[i]) == 0)
                    slot = i;
        if (slot < 0) {
            unsigned x = 0;
            while (x < nextra && PyUnicode_CompareWithASCIIString(k, extra[x]) != 0)
                x++;
            if (x < nextra) {
                if (xout[x]) {
                    PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", fn,
                                 k);
                    return -1;
                }
                xout[x] = args[nargs + j];
                continue;
            }
        }
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, k);
            return -1;
        }
        if (out[slot]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", fn, k);
            return -1;
        }
        out[slot] = args[nargs + j];
    }
    for (Py_ssize_t i = 0; i < npos; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, names[i]);
            return -1;
        }
    if (out[npos + 1] && out[npos + 1] != Py_None && !PyDict_Check(out[npos + 1])) {
        PyErr_Format(PyExc_TypeError, "%s(): stats must be a dict, not %.100s", fn,
                     Py_TYPE(out[npos + 1])->tp_name);
        return -1;
    }
    return 0;
}

static int parse_args(const char *fn, const char *const *names, Py_ssize_t npos,
                      PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    return parse_args_ex(fn, names, npos, args, nargs, kwnames, out, NULL, 0, NULL);
}

PyObject *rio_py_key_obj(const char *key)
{
    size_t n = strnlen(key, RIO_KEY_MAX + 1);
    PyObject *s = PyUnicode_DecodeUTF8(key, (Py_ssize_t)n, "strict");

    if (s || !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return s;
    PyErr_Clear();
    return PyBytes_FromStringAndSize(key, (Py_ssize_t)n);
}

static PyObject *desc_dict(const struct rio_desc *d)
{
    /* The key as a listing gives it (bytes when it is not UTF-8: a
     * surrogate-escaped str could not be passed back). */
    return Py_BuildValue(
        "{s:N,s:K,s:K,s:s,s:K,s:K}", "key", rio_py_key_obj(d->key),
        "size", (unsigned long long)d->size, "generation", (unsigned long long)d->generation,
        "etag", d->etag, "chunk_size", (unsigned long long)d->chunk_size, "nchunks",
        (unsigned long long)d->nchunks);
}

/* ----------------------------------------------------------------- Client */

/* Append "name=value" (value percent-encoded) to the URL being built. */
static int url_append(PyObject *parts, int *first, PyObject *name, PyObject *value)
{
    static const char hex[] = "0123456789ABCDEF";
    PyObject *sv, *enc, *piece;
    const char *s;
    Py_ssize_t n, i;
    char *buf, *w;
    int ret = -1;

    if (!PyUnicode_Check(name))
        return -1;
    s = PyUnicode_AsUTF8AndSize(name, &n);
    if (!s)
        return -1;
    for (i = 0; i < n; i++)
        if (!(Py_ISALNUM(s[i]) || s[i] == '_')) {
            PyErr_Format(Err_InvalidArgument, "option name '%U' is not a railio option", name);
            return -1;
        }
    if (value == Py_True)
        sv = PyUnicode_FromString("1");
    else if (value == Py_False)
        sv = PyUnicode_FromString("0");
    else if (PyLong_Check(value) || PyFloat_Check(value) || PyUnicode_Check(value))
        sv = PyObject_Str(value);
    else {
        PyErr_Format(PyExc_TypeError, "option %U: expected str, int, float or bool, not %.100s",
                     name, Py_TYPE(value)->tp_name);
        return -1;
    }
    if (!sv)
        return -1;
    s = PyUnicode_AsUTF8AndSize(sv, &n);
    if (!s)
        goto out_sv;
    if (n > 65536) {
        PyErr_Format(Err_InvalidArgument, "option %U: value too long", name);
        goto out_sv;
    }
    buf = PyMem_Malloc((size_t)n * 3 + 1);
    if (!buf) {
        PyErr_NoMemory();
        goto out_sv;
    }
    w = buf;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (Py_ISALNUM(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            *w++ = (char)ch;
        } else {
            *w++ = '%';
            *w++ = hex[ch >> 4];
            *w++ = hex[ch & 15];
        }
    }
    enc = PyUnicode_FromStringAndSize(buf, w - buf);
    PyMem_Free(buf);
    if (!enc)
        goto out_sv;
    piece = PyUnicode_FromFormat("%s%U=%U", *first ? "" : "&", name, enc);
    Py_DECREF(enc);
    if (!piece)
        goto out_sv;
    ret = PyList_Append(parts, piece);
    Py_DECREF(piece);
    *first = 0;
out_sv:
    Py_DECREF(sv);
    return ret;
}

/* url with **options appended as query parameters. New reference. */
static PyObject *url_with_options(PyObject *url, PyObject *kw)
{
    PyObject *parts, *sep, *out, *k, *v;
    Py_ssize_t pos = 0;
    int first;

    if (!kw || !PyDict_GET_SIZE(kw))
        return Py_NewRef(url);
    parts = PyList_New(0);
    if (!parts)
        return NULL;
    if (PyList_Append(parts, url) < 0)
        goto err_parts;
    first = PyUnicode_FindChar(url, '?', 0, PyUnicode_GET_LENGTH(url), 1) >= 0;
    {
        PyObject *q = PyUnicode_FromString(
            first ? (PyUnicode_READ_CHAR(url, PyUnicode_GET_LENGTH(url) - 1) == '?' ? "" : "&")
                  : "?");

        if (!q || PyList_Append(parts, q) < 0) {
            Py_XDECREF(q);
            goto err_parts;
        }
        Py_DECREF(q);
    }
    first = 1;
    while (PyDict_Next(kw, &pos, &k, &v))
        if (url_append(parts, &first, k, v) < 0)
            goto err_parts;
    sep = PyUnicode_FromString("");
    if (!sep)
        goto err_parts;
    out = PyUnicode_Join(sep, parts);
    Py_DECREF(sep);
    Py_DECREF(parts);
    return out;
err_parts:
    Py_DECREF(parts);
    return NULL;
}

static PyObject *Client_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    RioClient *self = (RioClient *)type->tp_alloc(type, 0);

    (void)args;
    (void)kw;
    if (!self)
        return NULL;
    self->url = Py_NewRef(Py_None);
    self->last_stats = NULL;
    self->last_st = PyMem_Calloc(1, sizeof(*self->last_st));
    self->inflight = PyDict_New();
    self->all = PyObject_CallNoArgs((PyObject *)&RioCancel_Type);
    if (!self->last_st || !self->inflight || !self->all) {
        Py_DECREF(self);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static int Client_init(RioClient *self, PyObject *args, PyObject *kw)
{
    PyObject *url, *full;
    struct rio_client *c = NULL;
    const char *s;
    Py_ssize_t n;
    int ret;

    if (self->c) {
        PyErr_SetString(PyExc_RuntimeError, "railio.Client is already open");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "U:Client", &url))
        return -1;
    full = url_with_options(url, kw);
    if (!full)
        return -1;
    s = PyUnicode_AsUTF8AndSize(full, &n);
    if (!s)
        goto err_full;
    if ((size_t)n != strlen(s)) {
        PyErr_SetString(Err_InvalidArgument, "Client: the URL holds a NUL character");
        goto err_full;
    }
    Py_BEGIN_ALLOW_THREADS;
    ret = rio_client_new(s, NULL, &c);
    Py_END_ALLOW_THREADS;
    if (ret < 0) {
        rio_py_raise(ret, "Client");
        goto err_full;
    }
    Py_DECREF(full);
    if (self->c) {
        /* Another thread's __init__ opened it while this one built its
         * client without the GIL: that one stands, this one goes. */
        Py_BEGIN_ALLOW_THREADS;
        rio_client_destroy(c);
        Py_END_ALLOW_THREADS;
        PyErr_SetString(PyExc_RuntimeError, "railio.Client is already open");
        return -1;
    }
    self->c = c;
    self->pid = getpid();
    self->closing = 0;
    Py_SETREF(self->url, Py_NewRef(url));
    return 0;
err_full:
    Py_DECREF(full);
    return -1;
}

static void Client_dealloc(RioClient *self)
{
    /* A call holds a reference on the client: none runs here. In a
     * forked child the client is left as it is: its threads are the
     * parent's, and joining them would wait for nothing (or crash). */
    if (self->c && self->pid == getpid()) {
        struct rio_client *c = self->c;

        self->c = NULL;
        Py_BEGIN_ALLOW_THREADS;
        rio_client_destroy(c);
        Py_END_ALLOW_THREADS;
    }
    Py_XDECREF(self->url);
    Py_XDECREF(self->all);
    Py_XDECREF(self->main_cx);
    Py_XDECREF(self->inflight);
    Py_XDECREF(self->last_stats);
    PyMem_Free(self->last_st);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The URL without what may hold a secret: its query and a password. */
static PyObject *Client_repr(RioClient *self)
{
    const char *s, *q, *auth, *end, *at, *colon;
    PyObject *r;
    Py_ssize_t n;

    if (!PyUnicode_Check(self->url))
        return PyUnicode_FromFormat("<railio.Client (not open)>");
    s = PyUnicode_AsUTF8AndSize(self->url, &n);
    if (!s)
        return NULL;
    q = strchr(s, '?');
    n = q ? q - s : n;
    auth = strstr(s, "://");
    auth = auth && auth < s + n ? auth + 3 : s;
    end = memchr(auth, '/', (size_t)(s + n - auth));
    end = end ? end : s + n;
    at = NULL;
    for (const char *p = auth; p < end; p++)
        if (*p == '@')
            at = p;
    colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon) {
        PyObject *a = PyUnicode_DecodeUTF8(s, colon - s, "replace");
        PyObject *b = PyUnicode_DecodeUTF8(at, s + n - at, "replace");

        r = a && b ? PyUnicode_FromFormat("<railio.Client '%U:***%U'%s>", a, b,
                                          self->c ? "" : " closed")
                   : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        return r;
    }
    {
        PyObject *a = PyUnicode_DecodeUTF8(s, n, "replace");

        r = a ? PyUnicode_FromFormat("<railio.Client '%U'%s>", a, self->c ? "" : " closed") : NULL;
        Py_XDECREF(a);
        return r;
    }
}

static const char *const names_key[] = {"key"};
static const char *const names_key_buf[] = {"key", "buffer"};
static const char *const names_keys[] = {"keys"};
static const char *const names_keys_bufs[] = {"keys", "buffers"};

/* One object's call: its arguments (key, a buffer for put and get_into,
 * then cancel= and stats=), the client entered and the rio_call set up. */
struct one_call {
    const char *fn;
    /* A signal's exception (KeyboardInterrupt) taken while the call ran:
     * raised when it returns (intr_progress). */
    PyObject *intr_type, *intr_value, *intr_tb;
    PyObject *a[MAX_POS + 2];
    PyObject *stats_arg;
    const char *key;
    Py_buffer view;
    int has_view;
    struct rio_client *c;
    RioCancel *cx;
    struct rio_stats st;
    struct rio_call call;
};

/* An if_generation= argument of fn: an int above 0 into *g; -1 with the
 * exception set (TypeError, ValueError, OverflowError) otherwise. */
static int generation_arg(const char *fn, PyObject *v, unsigned long long *g)
{
    /* A bool is an int to Python: if_generation=True was generation 1. */
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s(): if_generation must be an int, not %.100s", fn,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    *g = PyLong_AsUnsignedLongLong(v);
    if (*g == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (*g == 0) {
        PyErr_Format(PyExc_ValueError, "%s(): if_generation must be above 0", fn);
        return -1;
    }
    return 0;
}

/* put's conditions: if_absent=True (RIO_IF_ABSENT), if_generation=G (the
 * PUT's expect_generation); into o->call. 0, or -1 with the exception set. */
static const char *const names_put_cond[] = {"if_absent", "if_generation"};

static int put_conditions(struct one_call *o, PyObject *const *x)
{
    if (x[0] && x[0] != Py_None) {
        int t = PyObject_IsTrue(x[0]);
        if (t < 0)
            return -1;
        if (t)
            o->call.flags |= RIO_IF_ABSENT;
    }
    if (x[1] && x[1] != Py_None) {
        unsigned long long g;
        if (generation_arg("put", x[1], &g) < 0)
            return -1;
        if (o->call.flags & RIO_IF_ABSENT) {
            PyErr_SetString(PyExc_ValueError,
                            "put(): if_absent and if_generation cannot both be given");
            return -1;
        }
        o->call.expect_generation = g;
    }
    return 0;
}

/* The main thread's ident: Python runs signal handlers on that thread
 * only. */
static unsigned long main_ident;

/* threading.main_thread().ident: the module may be imported first on
 * another thread (lazily, in a worker). */
static void main_ident_init(void)
{
    PyObject *th = PyImport_ImportModule("threading"), *mt = NULL, *id = NULL;

    main_ident = PyThread_get_thread_ident();
    if (th)
        mt = PyObject_CallMethod(th, "main_thread", NULL);
    if (mt)
        id = PyObject_GetAttrString(mt, "ident");
    if (id && PyLong_Check(id)) {
        unsigned long v = PyLong_AsUnsignedLong(id);
        if (!PyErr_Occurred())
            main_ident = v;
    }
    PyErr_Clear();
    Py_XDECREF(id);
    Py_XDECREF(mt);
    Py_XDECREF(th);
}

/*
 * The progress callback of a main-thread call (put, get, get_into without
 * cancel=): runs in the calling thread, which released the GIL, every
 * 100 ms while the call waits (also when nothing moves). It takes the GIL
 * and runs Python's pending signal handlers: a Ctrl-C's KeyboardInterrupt
 * (or any exception a handler raises) is kept and the call's own token
 * fired, so the call returns within a few milliseconds and the exception
 * is raised then. Without it a Ctrl-C waited for the whole transfer, or
 * for the deadline of a stalled one.
 */
static void intr_progress(void *arg, uint64_t done, uint64_t total)
{
    struct one_call *o = arg;
    PyGILState_STATE g;

    (void)done;
    (void)total;
    if (o->intr_type)
        return;
    g = PyGILState_Ensure();
    if (PyErr_CheckSignals() < 0) {
        PyErr_Fetch(&o->intr_type, &o->intr_value, &o->intr_tb);
        cancel_fire(o->cx);
    }
    PyGILState_Release(g);
}

/* The main thread's own token for a call given no cancel= (a borrowed
 * reference: self keeps it), or NULL when the call is not on the main
 * thread or no token could be made (it then runs on the shared one). */
static PyObject *main_token(RioClient *self)
{
    if (PyThread_get_thread_ident() != main_ident)
        return NULL;
    if (!self->main_cx || ((RioCancel *)self->main_cx)->fired) {
        PyObject *fresh = PyObject_CallNoArgs((PyObject *)&RioCancel_Type);
        if (!fresh) {
            PyErr_Clear();
            return NULL;
        }
        Py_XSETREF(self->main_cx, fresh);
    }
    return self->main_cx;
}

/* What one_begin takes besides key, cancel= and stats=. */
enum one_args {
    ONE_KEY,     /* nothing (get, stat) */
    ONE_KEY_GEN, /* if_generation= (delete) */
    ONE_SRC,     /* a readable buffer, if_absent= and if_generation= (put) */
    ONE_DST,     /* a writable buffer (get_into) */
};

static const char *const names_if_gen[] = {"if_generation"};

/* The keyword-only arguments of kind's own: their names into *names, how
 * many returned. */
static unsigned one_extra(enum one_args kind, const char *const **names)
{
    *names = kind == ONE_KEY_GEN ? names_if_gen : names_put_cond;
    return kind == ONE_SRC ? 2 : kind == ONE_KEY_GEN ? 1 : 0;
}

/* 0, or -1 with the exception set and nothing held. */
static int one_begin(RioClient *self, struct one_call *o, const char *fn, enum one_args kind,
                     PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int has_buf = kind == ONE_SRC || kind == ONE_DST;
    Py_ssize_t npos = has_buf ? 2 : 1;
    const char *const *xnames;
    unsigned nx = one_extra(kind, &xnames);
    PyObject *x[2];

    memset(o, 0, sizeof(*o));
    o->fn = fn;
    if (parse_args_ex(fn, has_buf ? names_key_buf : names_key, npos, args, nargs, kwnames, o->a,
                      xnames, nx, x) < 0)
        return -1;
    if (kind == ONE_SRC && put_conditions(o, x) < 0)
        return -1;
    if (kind == ONE_KEY_GEN && x[0] && x[0] != Py_None) {
        unsigned long long g;
        if (generation_arg(fn, x[0], &g) < 0)
            return -1;
        o->call.expect_generation = g;
    }
    o->key = rio_py_key(o->a[0], "key");
    if (!o->key)
        return -1;
    if (has_buf) {
        if (rio_py_buffer(o->a[1], &o->view, kind == ONE_DST, "buffer") < 0)
            return -1;
        o->has_view = 1;
    }
    PyObject *cancel_arg = o->a[npos], *own = NULL;
    if (!cancel_arg || cancel_arg == Py_None)
        cancel_arg = own = main_token(self);
    o->c = call_enter(self, cancel_arg, &o->cx);
    if (!o->c) {
        if (o->has_view)
            PyBuffer_Release(&o->view);
        return -1;
    }
    o->stats_arg = o->a[npos + 1];
    o->call.cancel = o->cx->cx;
    if (own) {
        o->call.progress = intr_progress;
        o->call.progress_arg = o;
    }
    o->call.stats = want_stats(self, o->stats_arg) ? &o->st : NULL;
    return 0;
}

/* After the call returned r: the exception for a failure, the stats for a
 * success. 1 when the caller may build its result, else 0 (exception set). */
static int one_result(RioClient *self, struct one_call *o, int64_t r)
{
    if (o->intr_type) {
        /* Interrupted: the signal's exception, whatever the call did. */
        PyErr_Restore(o->intr_type, o->intr_value, o->intr_tb);
        o->intr_type = o->intr_value = o->intr_tb = NULL;
        return 0;
    }
    if (r < 0) {
        call_failed(self, (int)r, o->fn, o->key, o->call.stats, o->stats_arg);
        return 0;
    }
    return !o->call.stats || rio_py_call_stats(self, &o->st, o->stats_arg) == 0;
}

static void one_end(RioClient *self, struct one_call *o)
{
    Py_XDECREF(o->intr_type);
    Py_XDECREF(o->intr_value);
    Py_XDECREF(o->intr_tb);
    rio_py_call_end(self, o->cx);
    if (o->has_view)
        PyBuffer_Release(&o->view);
}

static PyObject *Client_put(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    struct one_call o;
    struct rio_desc desc;
    PyObject *ret = NULL;
    int r;

    if (one_begin(self, &o, "put", ONE_SRC, args, nargs, kwnames) < 0)
        return NULL;
    memset(&desc, 0, sizeof(desc));
    Py_BEGIN_ALLOW_THREADS;
    r = rio_put(o.c, o.key, o.view.buf, (size_t)o.view.len, &o.call, &desc);
    Py_END_ALLOW_THREADS;
    if (one_result(self, &o, r))
        ret = desc_dict(&desc);
    rio_desc_cleanup(&desc);
    one_end(self, &o);
    return ret;
}

static PyObject *Client_get_into(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    struct one_call o;
    PyObject *ret = NULL;
    int64_t r;

    if (one_begin(self, &o, "get_into", ONE_DST, args, nargs, kwnames) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS;
    r = rio_get(o.c, o.key, o.view.buf, (size_t)o.view.len, &o.call);
    Py_END_ALLOW_THREADS;
    if (one_result(self, &o, r))
        ret = PyLong_FromLongLong(r);
    one_end(self, &o);
    return ret;
}

static PyObject *Client_get(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    struct one_call o;
    PyObject *ret = NULL;
    void *buf = NULL;
    int64_t r;

    if (one_begin(self, &o, "get", ONE_KEY, args, nargs, kwnames) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS;
    r = rio_get_alloc(o.c, o.key, &buf, &o.call);
    Py_END_ALLOW_THREADS;
    if (one_result(self, &o, r)) {
        if (r > PY_SSIZE_T_MAX)
            PyErr_SetString(PyExc_OverflowError, "get: object too large for bytes");
        else
            ret = PyBytes_FromStringAndSize(buf, (Py_ssize_t)r);
    }
    free(buf);
    one_end(self, &o);
    return ret;
}

/* A sequence of keys as a tuple of at most UINT_MAX items. */
static PyObject *seq_arg(PyObject *obj, const char *what)
{
    PyObject *s;

    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of keys, not a single %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    /* A tuple of its own: the key pointers handed to the library stay
     * valid even if another thread empties the caller's list meanwhile. */
    s = PySequence_Tuple(obj);
    if (s && PySequence_Fast_GET_SIZE(s) > (Py_ssize_t)UINT_MAX) {
        PyErr_Format(Err_InvalidArgument, "%s: too many items", what);
        Py_CLEAR(s);
    }
    return s;
}

/* Raise BatchError for the ops that failed; results: an int or an Error per op. */
static void batch_raise(const char *fn, const struct rio_op *ops, Py_ssize_t n,
                        const struct rio_stats *st)
{
    PyObject *results, *e = NULL, *msg;
    Py_ssize_t failed = 0, first = -1;
    char what[320];

    results = PyList_New(n);
    if (!results)
        return;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v;

        if (ops[i].result >= 0) {
            v = PyLong_FromLongLong(ops[i].result);
        } else {
            snprintf(what, sizeof(what), "%s keys[%zd] '%.200s'", fn, i, ops[i].key);
            /* per-op causes are not kept by the library: no detail */
            v = error_new((int)ops[i].result, what, NULL, NULL);
            failed++;
            if (first < 0)
                first = i;
        }
        if (!v)
            goto err_results;
        PyList_SET_ITEM(results, i, v);
    }
    msg = PyUnicode_FromFormat("%s: %zd of %zd ops failed (first: keys[%zd] '%.200s': %s)", fn,
                               failed, n, first, ops[first].key,
                               rio_strerror((int)ops[first].result));
    if (!msg)
        goto err_results;
    e = PyObject_CallOneArg(Err_BatchError, msg);
    Py_DECREF(msg);
    if (!e || error_attrs(e, (int)ops[first].result, NULL) < 0 ||
        PyObject_SetAttrString(e, "results", results) < 0)
        goto err_results;
    (void)st;
    PyErr_SetObject(Err_BatchError, e);
err_results:
    Py_XDECREF(e);
    Py_DECREF(results);
}

static PyObject *batch(RioClient *self, const char *fn, int type, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[MAX_POS + 2], *keys = NULL, *bufs = NULL, *ret = NULL;
    struct rio_op *ops = NULL;
    Py_buffer *views = NULL;
    struct rio_client *c;
    struct rio_stats st;
    struct rio_call call;
    Py_ssize_t n, got = 0;
    RioCancel *cx;
    PyObject *x[1];
    int r, if_absent = 0;

    /* batch_put also takes if_absent= (RIO_IF_ABSENT on each PUT). */
    static const char *const names_if_absent[] = {"if_absent"};
    if (parse_args_ex(fn, names_keys_bufs, 2, args, nargs, kwnames, a, names_if_absent,
                      type == RIO_OP_PUT ? 1 : 0, x) < 0)
        return NULL;
    if (type == RIO_OP_PUT && x[0] && x[0] != Py_None && (if_absent = PyObject_IsTrue(x[0])) < 0)
        return NULL;
    keys = seq_arg(a[0], "keys");
    if (!keys)
        return NULL;
    bufs = PySequence_Tuple(a[1]); /* its own, as keys: another thread may mutate a list */
    if (!bufs)
        goto out;
    n = PySequence_Fast_GET_SIZE(keys);
    if (PySequence_Fast_GET_SIZE(bufs) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd keys but %zd buffers", fn, n,
                     PySequence_Fast_GET_SIZE(bufs));
        goto out;
    }
    ops = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*ops));
    views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*views));
    if (!ops || !views) {
        PyErr_NoMemory();
        goto out;
    }
    for (got = 0; got < n; got++) {
        char what[32];

        snprintf(what, sizeof(what), "keys[%zd]", got);
        ops[got].key = rio_py_key(PySequence_Fast_GET_ITEM(keys, got), what);
        if (!ops[got].key)
            goto out;
        snprintf(what, sizeof(what), "buffers[%zd]", got);
        if (rio_py_buffer(PySequence_Fast_GET_ITEM(bufs, got), &views[got], type == RIO_OP_GET,
                          what) < 0)
            goto out;
        ops[got].type = type;
        ops[got].buf = views[got].buf;
        ops[got].len = (size_t)views[got].len;
    }
    if (n == 0) {
        ret = PyList_New(0);
        goto out;
    }
    c = call_enter(self, a[2], &cx);
    if (!c)
        goto out;
    memset(&call, 0, sizeof(call));
    call.flags = if_absent ? RIO_IF_ABSENT : 0;
    call.cancel = cx->cx;
    call.stats = want_stats(self, a[3]) ? &st : NULL;
    Py_BEGIN_ALLOW_THREADS;
    r = rio_batch(c, ops, (unsigned)n, &call);
    Py_END_ALLOW_THREADS;
    if (r < 0) {
        call_failed(self, r, fn, NULL, call.stats, a[3]);
    } else if (!call.stats || rio_py_call_stats(self, &st, a[3]) == 0) {
        if (r < n) {
            batch_raise(fn, ops, n, &st);
        } else {
            ret = PyList_New(n);
            for (Py_ssize_t i = 0; ret && i < n; i++) {
                PyObject *v = PyLong_FromLongLong(ops[i].result);

                if (!v)
                    Py_CLEAR(ret);
                else
                    PyList_SET_ITEM(ret, i, v);
            }
        }
    }
    rio_py_call_end(self, cx);
out:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(ops);
    Py_XDECREF(bufs);
    Py_XDECREF(keys);
    return ret;
}

static PyObject *Client_batch_put(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    return batch(self, "batch_put", RIO_OP_PUT, args, nargs, kwnames);
}

static PyObject *Client_batch_get_into(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    return batch(self, "batch_get_into", RIO_OP_GET, args, nargs, kwnames);
}

/* exists and batch_exists: one rio_exists_batch. Returns -1 on error, else
 * prefix hits (batch) or 0/1. */
static PyObject *exists_common(RioClient *self, const char *fn, int many, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[MAX_POS + 2], *keys = NULL, *ret = NULL;
    const char **kv = NULL, *one = NULL;
    struct rio_client *c;
    struct rio_stats st;
    struct rio_call call;
    unsigned hits = 0;
    Py_ssize_t n;
    uint8_t e1 = 0;
    RioCancel *cx;
    int r;

    if (parse_args(fn, many ? names_keys : names_key, 1, args, nargs, kwnames, a) < 0)
        return NULL;
    if (many) {
        keys = seq_arg(a[0], "keys");
        if (!keys)
            return NULL;
        n = PySequence_Fast_GET_SIZE(keys);
        if (n == 0) {
            ret = PyLong_FromLong(0);
            goto out;
        }
        kv = PyMem_Calloc((size_t)n, sizeof(*kv));
        if (!kv) {
            PyErr_NoMemory();
            goto out;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            char what[32];

            snprintf(what, sizeof(what), "keys[%zd]", i);
            kv[i] = rio_py_key(PySequence_Fast_GET_ITEM(keys, i), what);
            if (!kv[i])
                goto out;
        }
    } else {
        one = rio_py_key(a[0], "key");
        if (!one)
            return NULL;
        kv = &one;
        n = 1;
    }
    c = call_enter(self, a[1], &cx);
    if (!c)
        goto out;
    memset(&call, 0, sizeof(call));
    memset(&st, 0, sizeof(st));
    call.cancel = cx->cx;
    call.stats = want_stats(self, a[2]) ? &st : NULL;
    Py_BEGIN_ALLOW_THREADS;
    r = rio_exists_batch(c, kv, (unsigned)n, many ? NULL : &e1, many ? &hits : NULL, &call);
    Py_END_ALLOW_THREADS;
    if (r < 0) {
        call_failed(self, r, fn, many ? NULL : one, call.stats, a[2]);
    } else if (!call.stats || rio_py_call_stats(self, &st, a[2]) == 0) {
        ret = many ? PyLong_FromUnsignedLong(hits) : PyBool_FromLong(e1);
    }
    rio_py_call_end(self, cx);
out:
    if (many)
        PyMem_Free((void *)kv);
    Py_XDECREF(keys);
    return ret;
}

static PyObject *Client_exists(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    return exists_common(self, "exists", 0, args, nargs, kwnames);
}

static PyObject *Client_batch_exists(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    return exists_common(self, "batch_exists", 1, args, nargs, kwnames);
}

/* stat(key, *, cancel=None, stats=None): one rio_stat_call, bounded by
 * the token (and the client's deadline) as a get is. */
static PyObject *Client_stat(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    struct one_call o;
    struct rio_desc desc;
    PyObject *ret = NULL;
    int r;

    if (one_begin(self, &o, "stat", ONE_KEY, args, nargs, kwnames) < 0)
        return NULL;
    memset(&desc, 0, sizeof(desc));
    Py_BEGIN_ALLOW_THREADS;
    r = rio_stat_call(o.c, o.key, &desc, NULL, &o.call);
    Py_END_ALLOW_THREADS;
    if (one_result(self, &o, r))
        ret = desc_dict(&desc);
    rio_desc_cleanup(&desc);
    one_end(self, &o);
    return ret;
}

/* delete(key, *, if_generation=None, cancel=None, stats=None): one
 * rio_delete_call, the generation its call's expect_generation. */
static PyObject *Client_delete(RioClient *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    struct one_call o;
    PyObject *ret = NULL;
    int r;

    if (one_begin(self, &o, "delete", ONE_KEY_GEN, args, nargs, kwnames) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS;
    r = rio_delete_call(o.c, o.key, &o.call);
    Py_END_ALLOW_THREADS;
    if (one_result(self, &o, r))
        ret = Py_NewRef(Py_None);
    one_end(self, &o);
    return ret;
}

/* Fire every call in progress: those on the shared token (which is then
 * replaced, so later calls run) and those with their own. */
static int cancel_all(RioClient *self)
{
    PyObject *fresh, *k, *v;
    Py_ssize_t pos = 0;

    fresh = PyObject_CallNoArgs((PyObject *)&RioCancel_Type);
    if (!fresh)
        return -1;
    cancel_fire((RioCancel *)self->all);
    Py_SETREF(self->all, fresh);
    while (PyDict_Next(self->inflight, &pos, &k, &v))
        cancel_fire((RioCancel *)k);
    return 0;
}

static PyObject *Client_cancel(RioClient *self, PyObject *unused)
{
    (void)unused;
    if (cancel_all(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Client_close(RioClient *self, PyObject *unused)
{
    struct rio_client *c = self->c;

    (void)unused;
    if (!c)
        Py_RETURN_NONE;
    if (self->pid != getpid()) {
        /* Forked: the parent's, never destroyed here. Its calls in
         * progress are the parent's threads' and streams', none of which
         * ends here: a client opened again here starts with none (its
         * close() refused "calls in progress" for good). */
        self->c = NULL;
        self->busy = 0;
        self->closing = 0;
        PyDict_Clear(self->inflight);
        Py_RETURN_NONE;
    }
    if (self->busy > 0) {
        Py_ssize_t busy = self->busy;

        if (cancel_all(self) < 0)
            return NULL;
        self->closing = 1;
        PyErr_Format(PyExc_RuntimeError,
                     "railio.Client.close: %zd call%s in progress (cancelled now, and no new "
                     "call begins; close again once they have returned)",
                     busy, busy == 1 ? "" : "s");
        return NULL;
    }
    /* No call can begin once c is NULL, so none races with the destroy. */
    self->c = NULL;
    Py_BEGIN_ALLOW_THREADS;
    rio_client_destroy(c);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

static PyObject *Client_enter(RioClient *self, PyObject *unused)
{
    (void)unused;
    if (!rio_py_client(self))
        return NULL;
    return Py_NewRef(self);
}

static PyObject *Client_exit(RioClient *self, PyObject *args)
{
    (void)args;
    return Client_close(self, NULL);
}

static PyObject *Client_list(RioClient *self, PyObject *args, PyObject *kw)
{
    return rio_py_list(self, args, kw);
}

static PyObject *Client_open(RioClient *self, PyObject *args, PyObject *kw)
{
    return rio_py_open(self, args, kw);
}

static PyObject *Client_get_last_stats(RioClient *self, void *unused)
{
    (void)unused;
    if (!self->last_stats && self->has_last_st) {
        self->last_stats = rio_py_stats_dict(self->last_st);
        if (!self->last_stats)
            return NULL;
    }
    return Py_NewRef(self->last_stats ? self->last_stats : Py_None);
}

static PyObject *Client_get_url(RioClient *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->url);
}

static PyObject *Client_get_collect_stats(RioClient *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(!self->no_stats);
}

static int Client_set_collect_stats(RioClient *self, PyObject *v, void *unused)
{
    int on;

    (void)unused;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "collect_stats cannot be deleted");
        return -1;
    }
    on = PyObject_IsTrue(v);
    if (on < 0)
        return -1;
    self->no_stats = !on;
    return 0;
}

static PyObject *Client_get_closed(RioClient *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->c == NULL);
}

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)

static PyMethodDef Client_methods[] = {
    {"put", (PyCFunction)(void (*)(void))Client_put, FASTKW,
     "put(key, buffer, *, cancel=None, stats=None, if_absent=False, if_generation=None)\n--\n\n"
     "Store buffer's bytes under key (published atomically). Returns the descriptor (a dict): "
     "{key, size, generation, etag, chunk_size, nchunks}."},
    {"get", (PyCFunction)(void (*)(void))Client_get, FASTKW,
     "get(key, *, cancel=None, stats=None)\n--\n\n"
     "The whole object as bytes, every chunk verified (get_into avoids the copy into bytes)."},
    {"get_into", (PyCFunction)(void (*)(void))Client_get_into, FASTKW,
     "get_into(key, buffer, *, cancel=None, stats=None)\n--\n\n"
     "Read the object straight into buffer (writable, contiguous: bytearray, numpy array, "
     "mmap, memoryview, CPU torch tensor); returns the byte count."},
    {"batch_put", (PyCFunction)(void (*)(void))Client_batch_put, FASTKW,
     "batch_put(keys, buffers, *, cancel=None, stats=None, if_absent=False)\n--\n\n"
     "Store every buffer under its key in one batch (a list of 0s); raises BatchError (.results) if any "
     "failed."},
    {"batch_get_into", (PyCFunction)(void (*)(void))Client_batch_get_into, FASTKW,
     "batch_get_into(keys, buffers, *, cancel=None, stats=None)\n--\n\n"
     "Read every key into its buffer in one batch; returns the byte counts; raises "
     "BatchError (.results: an int or an Error per key) if any failed."},
    {"exists", (PyCFunction)(void (*)(void))Client_exists, FASTKW,
     "exists(key, *, cancel=None, stats=None)\n--\n\nTrue if key holds an object."},
    {"batch_exists", (PyCFunction)(void (*)(void))Client_batch_exists, FASTKW,
     "batch_exists(keys, *, cancel=None, stats=None)\n--\n\n"
     "How many keys exist in a row from keys[0] (the KV-cache prefix-hit count)."},
    {"stat", (PyCFunction)(void (*)(void))Client_stat, FASTKW,
     "stat(key, *, cancel=None, stats=None)\n--\n\nThe descriptor (a dict) of key (as put's); "
     "NotFound if absent. cancel= and stats= as get's."},
    {"delete", (PyCFunction)(void (*)(void))Client_delete, FASTKW,
     "delete(key, *, if_generation=None, cancel=None, stats=None)\n--\n\nRemove key; NotFound "
     "if absent. With if_generation, only if key's object is that generation (else "
     "GenerationChanged). cancel= and stats= as get's."},
    {"list", (PyCFunction)(void (*)(void))Client_list, METH_VARARGS | METH_KEYWORDS,
     "list(prefix='', *, recursive=True, start_after=None, page_size=1000, cancel=None)\n--\n\n"
     "Iterate over the keys under prefix (railio.Entry objects)."},
    {"open", (PyCFunction)(void (*)(void))Client_open, METH_VARARGS | METH_KEYWORDS,
     "open(key, mode='rb', *, prefetch=0, size=None, cancel=None, stats=None)\n--\n\n"
     "A streaming railio.Reader ('rb') or railio.Writer ('wb')."},
    {"cancel", (PyCFunction)Client_cancel, METH_NOARGS,
     "cancel()\n--\n\nCancel every call in progress on this client (they raise "
     "railio.Cancelled); later calls run normally."},
    {"close", (PyCFunction)Client_close, METH_NOARGS,
     "close()\n--\n\nClose the client (idempotent). With calls in progress it cancels them "
     "and raises RuntimeError instead: the client is never destroyed under a call."},
    {"__enter__", (PyCFunction)Client_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Client_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Client_getset[] = {
    {"url", (getter)Client_get_url, NULL, "The URL as given (its options may hold secrets).", NULL},
    {"last_stats", (getter)Client_get_last_stats, NULL,
     "The stats dict of the last call that finished on this client, or None.", NULL},
    {"closed", (getter)Client_get_closed, NULL, "True once close() succeeded.", NULL},
    {"collect_stats", (getter)Client_get_collect_stats, (setter)Client_set_collect_stats,
     "True (the default): every call collects its stats (last_stats). False: only calls "
     "given stats= do, which saves the library's per-call stats work on small transfers.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RioClient_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "railio.Client",
    .tp_basicsize = sizeof(RioClient),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Client(url, **options)\n--\n\n"
              "A railio client for url (mock://, railio://, s3://, rados://, file://). Each "
              "keyword option is added to the URL as a query parameter (True/False as 1/0). "
              "Safe to share between threads; every call releases the GIL.",
    .tp_new = Client_new,
    .tp_init = (initproc)Client_init,
    .tp_dealloc = (destructor)Client_dealloc,
    .tp_repr = (reprfunc)Client_repr,
    .tp_methods = Client_methods,
    .tp_getset = Client_getset,
};

/* ----------------------------------------------------------------- module */

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyUnicode_FromString(rio_version());
}

static PyObject *mod_backends(PyObject *m, PyObject *unused)
{
    PyObject *s, *l;

    (void)m;
    (void)unused;
    s = PyUnicode_FromString(rio_backends());
    if (!s)
        return NULL;
    l = PyUnicode_Split(s, NULL, -1);
    Py_DECREF(s);
    return l;
}

/* _error(err): the exception a call failing with err raises (for tests). */
static PyObject *mod_error(PyObject *m, PyObject *arg)
{
    int overflow;
    long err = PyLong_AsLongAndOverflow(arg, &overflow);

    (void)m;
    if (err == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || err < INT_MIN || err > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "_error: not an int error code");
        return NULL;
    }
    return error_new((int)err, "_error", NULL, NULL);
}

static PyMethodDef mod_methods[] = {
    {"_error", mod_error, METH_O,
     "_error(err, /)\n--\n\nThe exception (an Error) a call that fails with err (a RIO_E* or "
     "-errno value) raises."},
    {"version", mod_version, METH_NOARGS,
     "version()\n--\n\nThe version of the loaded librailio (a str)."},
    {"backends", mod_backends, METH_NOARGS,
     "backends()\n--\n\nThe URL schemes this librailio can open (a list of str)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "railio._railio",
    .m_doc = "railio's C extension (import railio instead).",
    .m_size = -1,
    .m_methods = mod_methods,
};

/*
 * Error.__reduce__: its arguments (the message) and its state, errno
 * included. OSError's own keeps only the arguments and __dict__ (code,
 * detail, results): errno is no item of either, so an Error pickled across
 * processes (a ProcessPoolExecutor's worker, multiprocessing) or copied
 * came back with errno None.
 */
static PyObject *error_reduce(PyObject *self, PyObject *unused)
{
    PyObject *args, *d, *state = NULL, *v, *ret = NULL;

    (void)unused;
    args = PyObject_GetAttrString(self, "args");
    if (!args)
        return NULL;
    d = PyObject_GenericGetDict(self, NULL);
    if (!d)
        goto out_args;
    state = PyDict_Copy(d);
    Py_DECREF(d);
    if (!state)
        goto out_args;
    v = PyObject_GetAttrString(self, "errno");
    if (!v || PyDict_SetItemString(state, "errno", v) < 0) {
        Py_XDECREF(v);
        goto out_state;
    }
    Py_DECREF(v);
    ret = PyTuple_Pack(3, (PyObject *)Py_TYPE(self), args, state);
out_state:
    Py_DECREF(state);
out_args:
    Py_DECREF(args);
    return ret;
}

static PyMethodDef error_reduce_def = {
    "__reduce__", error_reduce, METH_NOARGS,
    "The message and the state (errno, code, detail, results): pickled whole."};

/* Err_Error's own methods (its subclasses inherit them). */
static int error_methods(void)
{
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)Err_Error, &error_reduce_def);
    int ret;

    if (!descr)
        return -1;
    ret = PyObject_SetAttrString(Err_Error, "__reduce__", descr);
    Py_DECREF(descr);
    return ret;
}

static int add_exc(PyObject *m, PyObject **slot, const char *name, PyObject *base2, const char *doc)
{
    char full[64];
    PyObject *bases, *dict;

    snprintf(full, sizeof(full), "railio.%s", name);
    if (!*slot) {
        if (!Err_Error)
            bases = Py_NewRef(PyExc_OSError);
        else if (base2)
            bases = PyTuple_Pack(2, Err_Error, base2);
        else
            bases = Py_NewRef(Err_Error);
        if (!bases)
            return -1;
        /* Error's code and detail are None until a failed call sets them:
         * an Error made in Python (a test double, a wrapper's) has them too. */
        dict = !Err_Error ? Py_BuildValue("{s:O,s:O}", "code", Py_None, "detail", Py_None) : NULL;
        if (!Err_Error && !dict) {
            Py_DECREF(bases);
            return -1;
        }
        *slot = PyErr_NewExceptionWithDoc(full, doc, bases, dict);
        Py_XDECREF(dict);
        Py_DECREF(bases);
        if (!*slot)
            return -1;
        if (slot == &Err_Error && error_methods() < 0) {
            Py_CLEAR(*slot);
            return -1;
        }
    }
    Py_INCREF(*slot);
    if (PyModule_AddObject(m, name, *slot) < 0) {
        Py_DECREF(*slot);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__railio(void);

PyMODINIT_FUNC PyInit__railio(void)
{
    PyObject *m;

    if (PyType_Ready(&RioCancel_Type) < 0 || PyType_Ready(&RioClient_Type) < 0)
        return NULL;
    main_ident_init();
    m = PyModule_Create(&mod_def);
    if (!m)
        return NULL;
    if (add_exc(m, &Err_Error, "Error", NULL,
                "Base of railio's errors: .code (e.g. 'RIO_ENOTFOUND'), .errno (the negative "
                "rio/errno value), .detail (the library's cause, or None).") < 0 ||
        add_exc(m, &Err_NotFound, "NotFound", PyExc_FileNotFoundError,
                "No such object, bucket, pool or store root.") < 0 ||
        add_exc(m, &Err_AccessDenied, "AccessDenied", PyExc_PermissionError,
                "Access denied, authentication failed or no credentials.") < 0 ||
        add_exc(m, &Err_Timeout, "Timeout", PyExc_TimeoutError,
                "The request's deadline passed, or an operation timed out.") < 0 ||
        add_exc(m, &Err_Unavailable, "Unavailable", PyExc_ConnectionError,
                "The target could not be reached: no path left, connection refused, TLS.") < 0 ||
        add_exc(m, &Err_VerifyError, "VerifyError", NULL,
                "Verification failed: chunk checksums, short transfers, malformed frames.") < 0 ||
        add_exc(m, &Err_NoSpace, "NoSpace", NULL, "The target is full.") < 0 ||
        add_exc(m, &Err_OutcomeUnknown, "OutcomeUnknown", NULL,
                "A commit, a delete or a PUT in one exchange may or may not have taken "
                "effect: look the key up.") < 0 ||
        add_exc(m, &Err_Cancelled, "Cancelled", NULL,
                "The call was cancelled (railio.Cancel.fire or Client.cancel).") < 0 ||
        add_exc(m, &Err_InvalidArgument, "InvalidArgument", PyExc_ValueError,
                "An invalid argument, option or URL.") < 0 ||
        add_exc(m, &Err_GenerationChanged, "GenerationChanged", NULL,
                "The object was replaced during the operation.") < 0 ||
        add_exc(m, &Err_BatchError, "BatchError", NULL,
                "Some ops of a batch failed: .results holds an int or an Error per key.") < 0)
        goto err_m;
    Py_INCREF(&RioClient_Type);
    if (PyModule_AddObject(m, "Client", (PyObject *)&RioClient_Type) < 0) {
        Py_DECREF(&RioClient_Type);
        goto err_m;
    }
    Py_INCREF(&RioCancel_Type);
    if (PyModule_AddObject(m, "Cancel", (PyObject *)&RioCancel_Type) < 0) {
        Py_DECREF(&RioCancel_Type);
        goto err_m;
    }
    if (rio_py_stream_init(m) < 0)
        goto err_m;
    return m;
err_m:
    Py_DECREF(m);
    return NULL;
}
