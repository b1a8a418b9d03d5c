/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one reader of a shared-secret token file, for the client (railio://
 * token_file=, RIO_TOKEN_FILE) and railiod (--auth-token-file, reread on
 * SIGHUP). The token is read straight into secret memory (core/secret.h),
 * so it is never on the heap; free it with rio__secret_free. Kept out of proto.c so the frame fuzz
 * target stays free of I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/secret.h"
#include "proto/proto.h"
#include "railio.h"

int rio__proto_token_read(const char *path, uint8_t **out, size_t *len, int *loose,
                          const char **why)
{
    struct stat st;
    uint8_t *b;
    size_t n = 0;
    int fd, ret;

    *why = NULL;
    *loose = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: never waited on */
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) == 0 && (st.st_mode & 077))
        *loose = 1;
    b = rio__secret_alloc(RIO_PROTO_TOKEN_MAX + 1);
    if (!b) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        ssize_t r = read(fd, b + n, RIO_PROTO_TOKEN_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ret = -errno;
            goto err;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > RIO_PROTO_TOKEN_MAX) {
            *why = "longer than 4096 bytes";
            ret = RIO_EINVAL;
            goto err;
        }
    }
    close(fd);
    fd = -1;
    /* Trailing whitespace (the newline an editor adds) is not part of it. */
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == ' ' || b[n - 1] == '\t'))
        n--;
    if (n == 0) {
        *why = "empty";
        ret = RIO_EINVAL;
        goto err;
    }
    *out = b;
    *len = n;
    return 0;
err:
    if (fd >= 0)
        close(fd);
    rio__secret_free(b);
    return ret;
}
