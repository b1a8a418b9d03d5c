/*
 * The built-in transports, reached by URL scheme. A backend whose library is
 * not built in (RIO_HAVE_<NAME> unset) is simply absent from the table, and
 * opening its scheme fails with RIO_EURL in the client.
 */
#include <stddef.h>
#include <string.h>

#include "transport/transport.h"

extern const struct rio_transport_ops rio__mock_ops;
extern const struct rio_transport_ops rio__tcp_ops; /* railio://, no external library */
#ifdef RIO_HAVE_URING
extern const struct rio_transport_ops rio__file_ops;
#endif
#ifdef RIO_HAVE_RADOS
extern const struct rio_transport_ops rio__rados_ops;
#endif
#ifdef RIO_HAVE_CURL
extern const struct rio_transport_ops rio__s3_ops, rio__http_ops, rio__https_ops;
#endif

/* One entry a line, each behind its build option. */
/* clang-format off */
static const struct rio_transport_ops *const transports[] = {
    &rio__mock_ops,
    &rio__tcp_ops,
#ifdef RIO_HAVE_URING
    &rio__file_ops,
#endif
#ifdef RIO_HAVE_RADOS
    &rio__rados_ops,
#endif
#ifdef RIO_HAVE_CURL
    &rio__s3_ops,
    &rio__http_ops,
    &rio__https_ops,
#endif
};
/* clang-format on */

const struct rio_transport_ops *rio__transport_find(const char *scheme)
{
    size_t i;

    if (!scheme)
        return NULL;
    for (i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
        if (strcmp(transports[i]->scheme, scheme) == 0)
            return transports[i];
    return NULL;
}
