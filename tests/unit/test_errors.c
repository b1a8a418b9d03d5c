/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: error names, messages and retry classes (src/core/errors.c). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "railio.h"
#include "t.h"

TEST(rio_codes_have_names_and_messages)
{
#define CHECK_ONE(name, value, msg)                                                                \
    T_EQ(name, value);                                                                             \
    T_STREQ(rio_errname(name), #name);                                                             \
    T_STREQ(rio_strerror(name), msg);                                                              \
    T_EQ(rio__err_from_name(#name), name);
    RIO_ERRNO_LIST(CHECK_ONE)
#undef CHECK_ONE
}

TEST(errno_names)
{
    static const struct {
        int code;
        const char *name;
    } common[] = {
        {-EINVAL, "EINVAL"},
        {-ENOMEM, "ENOMEM"},
        {-ENOENT, "ENOENT"},
        {-EIO, "EIO"},
        {-EAGAIN, "EAGAIN"},
        {-ECONNRESET, "ECONNRESET"},
        {-ECONNREFUSED, "ECONNREFUSED"},
        {-ECONNABORTED, "ECONNABORTED"},
        {-EPIPE, "EPIPE"},
        {-ETIMEDOUT, "ETIMEDOUT"},
        {-ENETUNREACH, "ENETUNREACH"},
        {-EHOSTUNREACH, "EHOSTUNREACH"},
        {-ENETDOWN, "ENETDOWN"},
        {-ECANCELED, "ECANCELED"},
        {-EBADF, "EBADF"},
        {-EEXIST, "EEXIST"},
        {-ENOSPC, "ENOSPC"},
        {-EFBIG, "EFBIG"},
        {-ERANGE, "ERANGE"},
        {-EOVERFLOW, "EOVERFLOW"},
        {-ENOBUFS, "ENOBUFS"},
        {-EPROTO, "EPROTO"},
        {-EMSGSIZE, "EMSGSIZE"},
        {-EACCES, "EACCES"},
        {-EPERM, "EPERM"},
        {-ENOTCONN, "ENOTCONN"},
        {-EINTR, "EINTR"},
    };
    size_t i;

    for (i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
        T_STREQ(rio_errname(common[i].code), common[i].name);
        T_EQ(rio__err_from_name(common[i].name), common[i].code);
        T_TRUE(strlen(rio_strerror(common[i].code)) > 0);
        T_TRUE(strcmp(rio_strerror(common[i].code), "unknown error") != 0);
    }
    T_STREQ(rio_strerror(-ECONNRESET), "connection reset by peer");
    T_STREQ(rio_strerror(-ENOMEM), "cannot allocate memory");
}

TEST(success_and_unknown)
{
    T_STREQ(rio_errname(0), "OK");
    T_STREQ(rio_strerror(0), "success");
    T_STREQ(rio_strerror(4096), "success");
    T_STREQ(rio_errname(-9999), "E?-9999");
    T_STREQ(rio_strerror(-9999), "unknown error");
    T_STREQ(rio_errname(-10999), "E?-10999");
    T_STREQ(rio_strerror(-10999), "unknown error");
    T_NOTNULL(rio_strerror(-2147483647 - 1));
    T_NOTNULL(rio_errname(-2147483647 - 1));
}

TEST(from_name_forms)
{
    T_EQ(rio__err_from_name("econnreset"), -ECONNRESET);
    T_EQ(rio__err_from_name("rio_eserver"), RIO_ESERVER);
    T_EQ(rio__err_from_name("EWOULDBLOCK"), -EAGAIN);
    T_EQ(rio__err_from_name("EHOSTDOWN"), -EHOSTDOWN);
    T_EQ(rio__err_from_name("-104"), -104);
    T_EQ(rio__err_from_name("104"), -104);
    T_EQ(rio__err_from_name("-10014"), RIO_ESERVER);
    T_EQ(rio__err_from_name("0"), 0);
    T_EQ(rio__err_from_name(""), 0);
    T_EQ(rio__err_from_name(NULL), 0);
    T_EQ(rio__err_from_name("ENOSUCHTHING"), 0);
    T_EQ(rio__err_from_name("12x"), 0);
    T_EQ(rio__err_from_name("99999999999"), 0);
    /* Unprefixed names are errnos: EPROTO is not RIO_EPROTO. */
    T_EQ(rio__err_from_name("EPROTO"), -EPROTO);
    T_EQ(rio__err_from_name("RIO_EPROTO"), RIO_EPROTO);
}

TEST(classes)
{
    static const struct {
        int err, cls;
    } map[] = {
        {-ECONNRESET, RIO_CLASS_RESET},
        {-ECONNABORTED, RIO_CLASS_RESET},
        {-EPIPE, RIO_CLASS_RESET},
        {-ENOTCONN, RIO_CLASS_RESET},
        {-EPROTO, RIO_CLASS_RESET}, /* a connection dropped for breaking the protocol */
        {RIO_EPROTO, RIO_CLASS_FATAL},
        {-ECONNREFUSED, RIO_CLASS_REFUSED},
        {-ETIMEDOUT, RIO_CLASS_TIMEOUT},
        {-ENETUNREACH, RIO_CLASS_UNREACH},
        {-EHOSTUNREACH, RIO_CLASS_UNREACH},
        {-ENETDOWN, RIO_CLASS_UNREACH},
        {-EHOSTDOWN, RIO_CLASS_UNREACH},
        {RIO_EDNS, RIO_CLASS_DNS},
        {RIO_ESHORT, RIO_CLASS_SHORT},
        {RIO_ECHECKSUM, RIO_CLASS_CHECKSUM},
        {RIO_ESERVER, RIO_CLASS_SERVER},
        {RIO_ETHROTTLE, RIO_CLASS_THROTTLE},
        {RIO_EDEADLINE, RIO_CLASS_FATAL},
        {RIO_ECANCELED, RIO_CLASS_FATAL},
        {-ECANCELED, RIO_CLASS_FATAL},
        {-EINVAL, RIO_CLASS_FATAL},
        {-ENOMEM, RIO_CLASS_FATAL},
        {-EIO, RIO_CLASS_FATAL},
        {RIO_ENOTFOUND, RIO_CLASS_FATAL},
        {RIO_EGENERATION, RIO_CLASS_FATAL},
        {RIO_EUNKNOWN, RIO_CLASS_FATAL},
        {RIO_ENOUPLOAD, RIO_CLASS_FATAL},
        {0, RIO_CLASS_FATAL},
    };
    size_t i;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (rio__err_class(map[i].err) != map[i].cls)
            T_FAIL("rio__err_class(%s) = %s, want %s", rio_errname(map[i].err),
                   rio_class_name(rio__err_class(map[i].err)), rio_class_name(map[i].cls));
    }
}

TEST(class_predicates_and_names)
{
    static const char *const names[RIO_CLASS__COUNT] = {
        "reset", "refused",  "timeout", "unreach",  "dns",
        "short", "checksum", "server",  "throttle", "fatal",
    };
    int c;

    for (c = 0; c < RIO_CLASS__COUNT; c++) {
        T_STREQ(rio_class_name(c), names[c]);
        T_EQ(rio__class_is_retryable(c), c != RIO_CLASS_FATAL);
        T_EQ(rio__class_is_path(c), c <= RIO_CLASS_DNS);
    }
    T_STREQ(rio_class_name(-1), "?");
    T_STREQ(rio_class_name(RIO_CLASS__COUNT), "?");
    T_EQ(rio__class_is_retryable(-1), 0);
    T_EQ(rio__class_is_retryable(RIO_CLASS__COUNT), 0);
}

/* rio_error_kind: every RIO_E* code (the table must name each one: a new
 * code fails here until its kind is decided) and the errnos docs/cli.md's
 * exit status table names. */
TEST(error_kinds)
{
    static const struct {
        int err, kind;
    } map[] = {
        {0, RIO_KIND_OK},
        {RIO_EINVAL, RIO_KIND_INVALID},
        {RIO_EURL, RIO_KIND_URL},
        {RIO_ECHECKSUM, RIO_KIND_VERIFY},
        {RIO_EGENERATION, RIO_KIND_GENERATION},
        {RIO_ERETRIES, RIO_KIND_UNREACHABLE},
        {RIO_EDEADLINE, RIO_KIND_TIMEOUT},
        {RIO_EBUSY, RIO_KIND_OTHER},
        {RIO_ENOPATH, RIO_KIND_UNREACHABLE},
        {RIO_ESHORT, RIO_KIND_VERIFY},
        {RIO_ENOTFOUND, RIO_KIND_NOTFOUND},
        {RIO_ETOOBIG, RIO_KIND_OTHER},
        {RIO_ECANCELED, RIO_KIND_CANCELED},
        {RIO_EPROTO, RIO_KIND_VERIFY},
        {RIO_ESERVER, RIO_KIND_OTHER},
        {RIO_ETHROTTLE, RIO_KIND_OTHER},
        {RIO_EDNS, RIO_KIND_UNREACHABLE},
        {RIO_ENOTSUP, RIO_KIND_OTHER},
        {RIO_ECLOSED, RIO_KIND_OTHER},
        {RIO_EUNKNOWN, RIO_KIND_UNKNOWN},
        {RIO_ENOUPLOAD, RIO_KIND_OTHER},
        {RIO_EVERSION, RIO_KIND_UNREACHABLE},
        {RIO_EAUTH, RIO_KIND_ACCESS},
        {RIO_ETLS, RIO_KIND_UNREACHABLE},
        {RIO_ETLSVERIFY, RIO_KIND_UNREACHABLE},
        {RIO_ENOCONTAINER, RIO_KIND_NOTFOUND},
        {RIO_ENOCREDS, RIO_KIND_ACCESS},
        {-EINVAL, RIO_KIND_INVALID},
        {-ENOENT, RIO_KIND_NOTFOUND},
        {-ENOTDIR, RIO_KIND_NOTFOUND},
        {-EACCES, RIO_KIND_ACCESS},
        {-EPERM, RIO_KIND_ACCESS},
        {-EROFS, RIO_KIND_ACCESS},
        {-ECONNREFUSED, RIO_KIND_UNREACHABLE},
        {-ECONNRESET, RIO_KIND_UNREACHABLE},
        {-ECONNABORTED, RIO_KIND_UNREACHABLE},
        {-EHOSTUNREACH, RIO_KIND_UNREACHABLE},
        {-ENETUNREACH, RIO_KIND_UNREACHABLE},
        {-ENETDOWN, RIO_KIND_UNREACHABLE},
        {-EHOSTDOWN, RIO_KIND_UNREACHABLE},
        {-ETIMEDOUT, RIO_KIND_TIMEOUT},
        {-ENOSPC, RIO_KIND_NOSPACE},
        {-EDQUOT, RIO_KIND_NOSPACE},
        {-EFBIG, RIO_KIND_NOSPACE},
        {-EIO, RIO_KIND_OTHER},
        {-ENOMEM, RIO_KIND_OTHER},
        {-EPIPE, RIO_KIND_OTHER},
        {-ECANCELED, RIO_KIND_OTHER},
        {-EPROTO, RIO_KIND_OTHER},
        {-99999, RIO_KIND_OTHER},
        {1, RIO_KIND_OK}, /* a count (rio_get's length), as rio_strerror reads it */
        {INT_MAX, RIO_KIND_OK},
    };
    static const int codes[] = {
#define CODE(name, value, msg) name,
        RIO_ERRNO_LIST(CODE)
#undef CODE
    };
    struct rio_stats st = {0};
    size_t i, j;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        T_EQ(rio_error_kind(map[i].err, NULL), map[i].kind);
        /* Stats change nothing for a code other than RIO_ERETRIES/ENOPATH. */
        st.retries[RIO_CLASS_CHECKSUM] = 5;
        if (map[i].err != RIO_ERETRIES && map[i].err != RIO_ENOPATH)
            T_EQ(rio_error_kind(map[i].err, &st), map[i].kind);
        st.retries[RIO_CLASS_CHECKSUM] = 0;
    }
    for (j = 0; j < sizeof(codes) / sizeof(codes[0]); j++) {
        for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
            if (map[i].err == codes[j])
                break;
        if (i == sizeof(map) / sizeof(map[0]))
            T_FAIL("%s has no kind in this test's table", rio_errname(codes[j]));
    }
}

/* RIO_ERETRIES and RIO_ENOPATH with the call's stats: the retry class with
 * the most failed attempts decides (docs/cli.md: exit 5, 6 or 1). */
TEST(error_kinds_by_retries)
{
    static const int want[RIO_CLASS__COUNT] = {
        [RIO_CLASS_RESET] = RIO_KIND_UNREACHABLE,   [RIO_CLASS_REFUSED] = RIO_KIND_UNREACHABLE,
        [RIO_CLASS_TIMEOUT] = RIO_KIND_UNREACHABLE, [RIO_CLASS_UNREACH] = RIO_KIND_UNREACHABLE,
        [RIO_CLASS_DNS] = RIO_KIND_UNREACHABLE,     [RIO_CLASS_SHORT] = RIO_KIND_VERIFY,
        [RIO_CLASS_CHECKSUM] = RIO_KIND_VERIFY,     [RIO_CLASS_SERVER] = RIO_KIND_OTHER,
        [RIO_CLASS_THROTTLE] = RIO_KIND_OTHER,      [RIO_CLASS_FATAL] = RIO_KIND_OTHER,
    };
    const int errs[] = {RIO_ERETRIES, RIO_ENOPATH};
    struct rio_stats st;

    for (size_t e = 0; e < 2; e++) {
        memset(&st, 0, sizeof(st));
        T_EQ(rio_error_kind(errs[e], &st), RIO_KIND_UNREACHABLE); /* no retries */
        for (int c = 0; c < RIO_CLASS__COUNT; c++) {
            memset(&st, 0, sizeof(st));
            st.retries[c] = 2;
            st.retries_total = 2;
            T_EQ(rio_error_kind(errs[e], &st), want[c]);
            /* A class with fewer attempts does not decide. */
            st.retries[(c + 1) % RIO_CLASS__COUNT] = 1;
            T_EQ(rio_error_kind(errs[e], &st), want[c]);
        }
        /* Mostly checksum, some resets: verification failed. */
        memset(&st, 0, sizeof(st));
        st.retries[RIO_CLASS_RESET] = 3;
        st.retries[RIO_CLASS_CHECKSUM] = 4;
        T_EQ(rio_error_kind(errs[e], &st), RIO_KIND_VERIFY);
        /* A tie goes to the first class: reset before checksum. */
        st.retries[RIO_CLASS_RESET] = 4;
        T_EQ(rio_error_kind(errs[e], &st), RIO_KIND_UNREACHABLE);
    }
}

/* Names of unknown codes come from a per-thread buffer: threads must never
 * see each other's number. */
static void *unknown_names(void *arg)
{
    int base = (int)(intptr_t)arg, i;

    for (i = 0; i < 20000; i++) {
        char want[24];
        int code = -(9000 + base);

        snprintf(want, sizeof(want), "E?%d", code);
        if (strcmp(rio_errname(code), want) != 0)
            return (void *)1;
    }
    return NULL;
}

TEST(unknown_names_thread_safe)
{
    pthread_t th[4];
    void *r;
    int i;

    for (i = 0; i < 4; i++)
        T_EQ(pthread_create(&th[i], NULL, unknown_names, (void *)(intptr_t)i), 0);
    for (i = 0; i < 4; i++) {
        T_EQ(pthread_join(th[i], &r), 0);
        T_NULL(r);
    }
}
