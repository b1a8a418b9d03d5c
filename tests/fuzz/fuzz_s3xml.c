/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/s3/xml.c src/transport/s3/listxml.c src/transport/s3/text.c */
/*
 * libFuzzer target for the S3 XML answers as the s3:// transport reads them
 * (src/transport/s3/xml.c): an error body (<Code>, <Message>), an
 * InitiateMultipartUpload (<UploadId>), a CompleteMultipartUpload (<ETag>),
 * a ListMultipartUploads (<Key>, <UploadId>), each tag read into buffers of
 * several sizes as the transport does; the text must stay within its buffer
 * and the input (not terminated), and the <Code> maps to an error for any
 * status. Byte 0 picks the status. The same bytes as a ListObjectsV2 answer
 * (listxml.c): every item's key within RIO_KEY_MAX and terminated, sizes
 * within INT64_MAX, the token within RIO_LIST_TOKEN_MAX and set only when
 * truncated; and any LastModified text through the ISO 8601 reader.
 * Seeds: tests/fuzz/corpus/s3xml/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "railio.h"
#include "transport/s3/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check_item(void *arg, const struct rio_s3_list_item *it)
{
    unsigned *n = arg;

    if (it->klen == 0 || it->klen > RIO_KEY_MAX || it->key[it->klen] != '\0' ||
        strlen(it->key) != it->klen || it->size > (uint64_t)INT64_MAX ||
        strnlen(it->etag, sizeof(it->etag)) == sizeof(it->etag))
        abort();
    return ++*n > RIO_LIST_PAGE_MAX ? -1 : 0;
}

static const char *const tags[] = {"Code", "Message", "UploadId", "ETag", "Key", "Bucket", "a"};
static const size_t caps[] = {1, 2, 24, 64, 256, 4096};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 206, 301, 304, 400, 403, 404, 408, 409,
                                    412, 429, 500, 501, 503, 599, 0,   999};
    char out[4096];
    long status = size ? statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))] : 0;
    const char *body = size ? (const char *)data + 1 : (const char *)data;
    size_t len = size ? size - 1 : 0;

    for (size_t t = 0; t < sizeof(tags) / sizeof(tags[0]); t++)
        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
            memset(out, 'Z', sizeof(out));
            rio__s3_xml_text(body, len, tags[t], out, caps[c]);
            size_t n = strnlen(out, caps[c]);
            if (n >= caps[c] || n > len)
                abort();
        }
    char code[64];
    rio__s3_xml_text(body, len, "Code", code, sizeof(code));
    int err = rio__s3_map_http(status, code);
    if (status >= 200 && status < 300 ? err != 0 : err >= 0)
        abort();

    struct rio_s3_list_result res;
    unsigned n = 0;
    int ret = rio__s3_list_parse(body, len, &res, check_item, &n);
    size_t tl = strnlen(res.next_token, sizeof(res.next_token));
    if (tl > RIO_LIST_TOKEN_MAX || (tl && !res.truncated) || (ret == 0 && res.nitems != n) ||
        (ret < 0 && (res.nitems || tl)))
        abort();

    char date[64];
    int64_t ns;
    size_t dl = len < sizeof(date) - 1 ? len : sizeof(date) - 1;
    memcpy(date, body, dl);
    date[dl] = '\0';
    (void)rio__s3_parse_iso8601(date, &ns);
    return 0;
}
