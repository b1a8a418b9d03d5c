/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the tests that run the railio binary. */
#ifndef RIO_TEST_CLI_UTIL_H
#define RIO_TEST_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "t.h"

/* $T_BUILD_DIR/railio (build/railio when unset). */
static inline const char *cli_bin(void)
{
    static char path[4096];
    const char *b = getenv("T_BUILD_DIR");
    snprintf(path, sizeof(path), "%s/railio", b ? b : "build");
    return path;
}

/* Create or truncate path with n bytes. */
static inline void cli_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    T_NOTNULL(f);
    T_EQ(fwrite(p, 1, n, f), n);
    T_EQ(fclose(f), 0);
}

#endif
