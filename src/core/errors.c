/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error codes: names and messages for RIO_E* and -errno, the inverse mapping
 * used by fault specs and the CLI, the retry classes the engine keys its
 * decisions and stats on, and the kind of failure (rio_error_kind) the CLI's
 * exit statuses and the Python binding's exceptions come from. rio_verdict_name lives with the
 * verdict, in stats.c.
 *
 * Everything here returns static strings and is safe from any thread: no
 * strerror() (its buffer is shared) and no locale. errno values outside our
 * own table fall back to glibc's strerrorname_np/strerrordesc_np, which return
 * static strings too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerrorname_np, strerrordesc_np */
#endif
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"
#include "railio.h"

#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 32)
#define HAVE_STRERRORNAME_NP 1
#endif
#endif

struct err_entry {
    int code;
    const char *name;
    const char *msg;
};

static const struct err_entry rio_errs[] = {
#define RIO__ERR_ENTRY(name, value, msg) {value, #name, msg},
    RIO_ERRNO_LIST(RIO__ERR_ENTRY)
#undef RIO__ERR_ENTRY
};

/* clang-format off */
#define E(name, msg) {-(name), #name, msg}
/* clang-format on */
/* The errnos a storage client meets; aliases (same value) after the main name. */
static const struct err_entry errno_errs[] = {
    E(EPERM, "operation not permitted"),
    E(ENOENT, "no such file or directory"),
    E(ESRCH, "no such process"),
    E(EINTR, "interrupted system call"),
    E(EIO, "input/output error"),
    E(ENXIO, "no such device or address"),
    E(E2BIG, "argument list too long"),
    E(EBADF, "bad file descriptor"),
    E(ECHILD, "no child processes"),
    E(EAGAIN, "resource temporarily unavailable"),
    E(ENOMEM, "cannot allocate memory"),
    E(EACCES, "permission denied"),
    E(EFAULT, "bad address"),
    E(EBUSY, "device or resource busy"),
    E(EEXIST, "file exists"),
    E(EXDEV, "invalid cross-device link, or a file:// key that leads out of its root"),
    E(ENODEV, "no such device"),
    E(ENOTDIR, "not a directory"),
    E(EISDIR, "is a directory"),
    E(EINVAL, "invalid argument"),
    E(ENFILE, "too many open files in system"),
    E(EMFILE, "too many open files"),
    E(EFBIG, "file too large"),
    E(ENOSPC, "no space left on device"),
    E(ESPIPE, "illegal seek"),
    E(EROFS, "read-only file system"),
    E(EPIPE, "broken pipe"),
    E(EDOM, "numerical argument out of domain"),
    E(ERANGE, "numerical result out of range"),
    E(EDEADLK, "resource deadlock avoided"),
    E(ENAMETOOLONG, "file name too long"),
    E(ENOSYS, "function not implemented"),
    E(ENOTEMPTY, "directory not empty"),
    E(ENODATA, "no data available"),
    E(EPROTO, "protocol error"),
    E(EBADMSG, "bad message"),
    E(EOVERFLOW, "value too large for defined data type"),
    E(EILSEQ, "invalid or incomplete multibyte or wide character"),
    E(ENOTSOCK, "socket operation on non-socket"),
    E(EMSGSIZE, "message too long"),
    E(EPROTONOSUPPORT, "protocol not supported"),
    E(EOPNOTSUPP, "operation not supported"),
    E(EAFNOSUPPORT, "address family not supported by protocol"),
    E(EADDRINUSE, "address already in use"),
    E(EADDRNOTAVAIL, "cannot assign requested address"),
    E(ENETDOWN, "network is down"),
    E(ENETUNREACH, "network is unreachable"),
    E(ENETRESET, "network dropped connection on reset"),
    E(ECONNABORTED, "software caused connection abort"),
    E(ECONNRESET, "connection reset by peer"),
    E(ENOBUFS, "no buffer space available"),
    E(EISCONN, "transport endpoint is already connected"),
    E(ENOTCONN, "transport endpoint is not connected"),
    E(ESHUTDOWN, "cannot send after transport endpoint shutdown"),
    E(ETIMEDOUT, "connection timed out"),
    E(ECONNREFUSED, "connection refused"),
    E(EHOSTDOWN, "host is down"),
    E(EHOSTUNREACH, "no route to host"),
    E(EALREADY, "operation already in progress"),
    E(EINPROGRESS, "operation now in progress"),
    E(ESTALE, "stale file handle"),
    E(EDQUOT, "disk quota exceeded"),
    E(ECANCELED, "operation canceled"),
    /* Aliases: only reached by name. */
    E(EWOULDBLOCK, "resource temporarily unavailable"),
    E(ENOTSUP, "operation not supported"),
    E(EDEADLOCK, "resource deadlock avoided"),
};
#undef E

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const struct err_entry *err_lookup(int err)
{
    size_t i;

    if (err <= RIO_EINVAL) {
        for (i = 0; i < NELEM(rio_errs); i++)
            if (rio_errs[i].code == err)
                return &rio_errs[i];
        return NULL;
    }
    for (i = 0; i < NELEM(errno_errs); i++)
        if (errno_errs[i].code == err)
            return &errno_errs[i];
    return NULL;
}

/* The table's name or message for err, else libc's, else NULL. */
static const char *err_text(int err, bool name)
{
    const struct err_entry *e = err_lookup(err);

    if (e)
        return name ? e->name : e->msg;
#ifdef HAVE_STRERRORNAME_NP
    if (err > -4096)
        return name ? strerrorname_np(-err) : strerrordesc_np(-err);
#endif
    return NULL;
}

const char *rio_strerror(int err)
{
    const char *m;

    if (err >= 0)
        return "success";
    m = err_text(err, false);
    return m ? m : "unknown error";
}

const char *rio_errname(int err)
{
    static __thread char unknown[24];
    const char *n;

    if (err >= 0)
        return "OK";
    n = err_text(err, true);
    if (n)
        return n;
    /* Per thread, so concurrent callers never see each other's number. */
    snprintf(unknown, sizeof(unknown), "E?%d", err);
    return unknown;
}

int rio__err_from_name(const char *name)
{
    size_t i;
    char *end;
    long v;

    if (!name || !*name)
        return 0;
    for (i = 0; i < NELEM(rio_errs); i++)
        if (strcasecmp(name, rio_errs[i].name) == 0)
            return rio_errs[i].code;
    for (i = 0; i < NELEM(errno_errs); i++)
        if (strcasecmp(name, errno_errs[i].name) == 0)
            return errno_errs[i].code;
#ifdef HAVE_STRERRORNAME_NP
    for (i = 1; i < 4096; i++) {
        const char *n = strerrorname_np((int)i);
        if (n && strcasecmp(name, n) == 0)
            return -(int)i;
    }
#endif
    /* A number: "-104" as it is; "104" is taken as the errno, so -104. */
    errno = 0;
    v = strtol(name, &end, 10);
    if (errno || end == name || *end || v < -INT_MAX || v > INT_MAX)
        return 0;
    return v > 0 ? (int)-v : (int)v;
}

int rio__err_class(int err)
{
    switch (err) {
    case -ECONNRESET:
    case -ECONNABORTED:
    case -EPIPE:
    case -ENOTCONN:
    case -EPROTO: /* a transport dropped a connection whose stream broke the protocol */
        return RIO_CLASS_RESET;
    case -ECONNREFUSED:
        return RIO_CLASS_REFUSED;
    case -ETIMEDOUT:
        return RIO_CLASS_TIMEOUT;
    case -ENETUNREACH:
    case -EHOSTUNREACH:
    case -ENETDOWN:
    case -EHOSTDOWN:
        return RIO_CLASS_UNREACH;
    case RIO_EDNS:
        return RIO_CLASS_DNS;
    case RIO_ESHORT:
        return RIO_CLASS_SHORT;
    case RIO_ECHECKSUM:
        return RIO_CLASS_CHECKSUM;
    case RIO_ESERVER:
        return RIO_CLASS_SERVER;
    case RIO_ETHROTTLE:
        return RIO_CLASS_THROTTLE;
    default:
        return RIO_CLASS_FATAL;
    }
}

int rio__class_is_path(int cls)
{
    switch (cls) {
    case RIO_CLASS_RESET:
    case RIO_CLASS_REFUSED:
    case RIO_CLASS_TIMEOUT:
    case RIO_CLASS_UNREACH:
    case RIO_CLASS_DNS:
        return 1;
    default:
        return 0;
    }
}

int rio__class_is_retryable(int cls)
{
    return cls >= 0 && cls < RIO_CLASS_FATAL;
}

const char *rio_class_name(int cls)
{
    static const char *const names[RIO_CLASS__COUNT] = {
        [RIO_CLASS_RESET] = "reset",       [RIO_CLASS_REFUSED] = "refused",
        [RIO_CLASS_TIMEOUT] = "timeout",   [RIO_CLASS_UNREACH] = "unreach",
        [RIO_CLASS_DNS] = "dns",           [RIO_CLASS_SHORT] = "short",
        [RIO_CLASS_CHECKSUM] = "checksum", [RIO_CLASS_SERVER] = "server",
        [RIO_CLASS_THROTTLE] = "throttle", [RIO_CLASS_FATAL] = "fatal",
    };

    if (cls < 0 || cls >= RIO_CLASS__COUNT)
        return "?";
    return names[cls];
}

/* The kind of err alone: docs/cli.md's exit status table, with timeouts
 * and the argument errors told apart (the CLI folds them back). */
static int err_kind(int err)
{
    if (err > 0) /* a count a call returned (rio_get's length): no failure */
        return RIO_KIND_OK;
    switch (err) {
    case 0:
        return RIO_KIND_OK;
    case RIO_EURL:
        return RIO_KIND_URL;
    case RIO_EINVAL:
    case -EINVAL:
        return RIO_KIND_INVALID;
    case -ENOENT:
    case -ENOTDIR:
    case RIO_ENOTFOUND:
    case RIO_ENOCONTAINER:
        return RIO_KIND_NOTFOUND;
    case -EACCES:
    case -EPERM:
    case -EROFS:
    case RIO_EAUTH:
    case RIO_ENOCREDS:
        return RIO_KIND_ACCESS;
    case RIO_ENOPATH:
    case RIO_ERETRIES:
    case RIO_EDNS:
    case RIO_ETLS:
    case RIO_ETLSVERIFY:
    case RIO_EVERSION:
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ENETDOWN:
    case -EHOSTDOWN:
        return RIO_KIND_UNREACHABLE;
    case RIO_EDEADLINE:
    case -ETIMEDOUT:
        return RIO_KIND_TIMEOUT;
    case RIO_ECHECKSUM:
    case RIO_EPROTO:
    case RIO_ESHORT:
        return RIO_KIND_VERIFY;
    case -ENOSPC:
    case -EDQUOT:
    case -EFBIG:
        return RIO_KIND_NOSPACE;
    case RIO_EUNKNOWN:
        return RIO_KIND_UNKNOWN;
    case RIO_ECANCELED:
        return RIO_KIND_CANCELED;
    case RIO_EGENERATION:
        return RIO_KIND_GENERATION;
    default:
        return RIO_KIND_OTHER;
    }
}

int rio_error_kind(int err, const struct rio_stats *st)
{
    int top = -1;
    uint64_t most = 0;

    if (!st || (err != RIO_ERETRIES && err != RIO_ENOPATH))
        return err_kind(err);
    /* Retries exhausted (or no path left) because chunks kept failing their
     * checksum is a verification failure; because the server kept failing,
     * a plain failure, not an unreachable target. Ties: the first class. */
    for (int k = 0; k < RIO_CLASS__COUNT; k++)
        if (st->retries[k] > most) {
            most = st->retries[k];
            top = k;
        }
    switch (top) {
    case RIO_CLASS_CHECKSUM:
    case RIO_CLASS_SHORT:
        return RIO_KIND_VERIFY;
    case RIO_CLASS_SERVER:
    case RIO_CLASS_THROTTLE:
    case RIO_CLASS_FATAL:
        return RIO_KIND_OTHER;
    default:
        return err_kind(err);
    }
}

/* rio_error_detail: one buffer per thread, written by the call that failed. */
static __thread char detail_buf[512];

void rio__detail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail_buf, sizeof(detail_buf), fmt, ap);
    va_end(ap);
}

void rio__detail_clear(void)
{
    detail_buf[0] = 0;
}

const char *rio_error_detail(void)
{
    return detail_buf;
}
