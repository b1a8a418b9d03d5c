/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/s3/awsini.c */
/*
 * libFuzzer target for the AWS shared credentials and config files as the
 * s3:// transport reads them (src/transport/s3/awsini.c): byte 0 picks the
 * profile asked for and the kind of file; every field comes back
 * terminated within its buffer, found and the return agree, and a refusal
 * names a line of the input. Seeds: tests/fuzz/corpus/awsini/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "railio.h"
#include "transport/s3/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_field(const char *f, size_t cap)
{
    if (strnlen(f, cap) == cap)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const profiles[] = {"default", "dev", "profile", "a b", ""};
    static struct rio_awsini a; /* 5 KiB: off the stack */
    const char *body = size ? (const char *)data + 1 : (const char *)data;
    size_t len = size ? size - 1 : 0, lines = 1;
    const char *profile = profiles[size ? data[0] % 5 : 0];
    bool config = size && (data[0] & 0x80);
    int ret = rio__awsini_parse(body, len, profile, config, &a);

    check_field(a.access_key, sizeof(a.access_key));
    check_field(a.secret_key, sizeof(a.secret_key));
    check_field(a.token, sizeof(a.token));
    check_field(a.region, sizeof(a.region));
    check_field(a.endpoint_url, sizeof(a.endpoint_url));
    for (size_t i = 0; i < len; i++)
        lines += body[i] == '\n';
    if ((ret == 0) != a.found || (ret < 0 && ret != RIO_ENOTFOUND && ret != RIO_EPROTO) ||
        (ret == RIO_EPROTO && (a.bad_line == 0 || a.bad_line > lines)))
        abort();
    return 0;
}
