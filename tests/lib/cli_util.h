/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the tests that run the railio binary. */
#ifndef RIO_TEST_CLI_UTIL_H
#define RIO_TEST_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "t.h"
#include "tlib.h"

/* $T_BUILD_DIR/railio (build/railio when unset). Static storage. */
const char *cli_bin(void);
/* Create or truncate path with n bytes. */
#define cli_write_file t_write_file

#endif
