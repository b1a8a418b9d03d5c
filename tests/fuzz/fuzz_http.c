/* SPDX-License-Identifier: Apache-2.0 */
/* clang-format off */
/* FUZZ_SOURCES src/transport/s3/http.c src/transport/s3/range.c src/transport/s3/xml.c src/transport/s3/text.c src/transport/s3/sidecar.c src/core/alloc.c src/core/checksum.c */
/* clang-format on */
/*
 * libFuzzer target for an HTTP response head as the s3:// and http://
 * transports read it (src/transport/s3/http.c): the input is cut into lines
 * (each with its CRLF or LF, as curl hands them over) and fed to
 * rio__s3_rsp_header; then what was kept is checked: every string
 * terminated within its field, a Content-Range in order, the status
 * mapped to an error, and the part count of the ETag read. Seeds: tests/fuzz/corpus/http/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "transport/s3/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIELD_OK(f) (memchr((f), '\0', sizeof(f)) != NULL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct s3_rsp r;
    const char *p = (const char *)data, *end = p + size;

    memset(&r, 0, sizeof(r));
    rio__s3_rsp_reset(&r);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        /* A copy of exactly the line: reads past it are caught. */
        char *line = malloc(len ? len : 1);
        if (!line)
            return 0;
        memcpy(line, p, len);
        rio__s3_rsp_header(&r, line, len);
        free(line);
        p += len;
    }
    if (!FIELD_OK(r.etag) || !FIELD_OK(r.lastmod) || !FIELD_OK(r.m_v) || !FIELD_OK(r.m_id) ||
        !FIELD_OK(r.m_chunk) || !FIELD_OK(r.m_size) || !FIELD_OK(r.m_md5) ||
        !FIELD_OK(r.m_sidecar) || !FIELD_OK(r.m_xxh))
        abort();
    if (r.have_crange && r.cr_first > r.cr_last)
        abort();
    if (r.status < 0 || r.status > 999)
        abort();
    int err = rio__s3_map_http(r.status, "");
    if ((r.status >= 200 && r.status < 300) != (err == 0))
        abort();
    if (rio__s3_etag_parts(r.etag) > 10000)
        abort();
    uint64_t ck;
    uint8_t algo = rio__s3_rsp_checksum(&r, &ck);
    if (algo > RIO_S3_CK_CRC64NVME ||
        ((algo == RIO_S3_CK_CRC32 || algo == RIO_S3_CK_CRC32C) && ck >> 32))
        abort();
    uint64_t v;
    (void)rio__s3_parse_u64(r.m_chunk, &v);
    (void)rio__s3_parse_u64(r.m_size, &v);
    uint64_t *xxh = NULL;
    (void)rio__s3_parse_xxh_list(r.m_xxh, strlen(r.m_xxh) / 16, &xxh);
    rio__free(xxh);
    return 0;
}
