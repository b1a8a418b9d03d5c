/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The HTTP response head as the s3:// and http:// transports read it
 * (src/transport/s3/http.c): Content-Length repeated with values that
 * disagree is believed in none of them (a HEAD claiming 64 then 1,000,000,000
 * bytes made every GET wait for bytes that never came, 44 s, instead of
 * failing at once), while the same value repeated still counts. Also
 * Content-Range (range.c) and the checksum sidecar, written and read back
 * (sidecar.c).
 */
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "t.h"
#include "transport/s3/parse.h"

static void feed(struct s3_rsp *r, const char *const *lines)
{
    rio__s3_rsp_reset(r);
    for (; *lines; lines++)
        rio__s3_rsp_header(r, *lines, strlen(*lines));
}

TEST(content_length_conflict_is_no_length)
{
    struct s3_rsp r;
    const char *conflict[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n",
                              "Content-Length: 1000000000\r\n", NULL};
    const char *conflict3[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n",
                               "content-length: 65\r\n", "Content-Length: 64\r\n", NULL};
    const char *bad_then_good[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: -1\r\n",
                                   "Content-Length: 64\r\n", NULL};
    const char *same[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n", "Content-Length: 64\r\n",
                          NULL};
    const char *one[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 18446744073709551615\r\n", NULL};

    feed(&r, conflict);
    T_EQ(r.status, 200);
    T_FALSE(r.have_clen);
    feed(&r, conflict3);
    T_FALSE(r.have_clen);
    feed(&r, bad_then_good);
    T_FALSE(r.have_clen);
    feed(&r, same);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, 64u);
    feed(&r, one);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, UINT64_MAX);
    /* A new status line (after 100 Continue) starts over. */
    const char *again[] = {"HTTP/1.1 100 Continue\r\n", "Content-Length: 1\r\n",
                           "Content-Length: 2\r\n",     "HTTP/1.1 200 OK\r\n",
                           "Content-Length: 5\r\n",     NULL};
    feed(&r, again);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, 5u);
}

/* Content-Range: in order, a total or '*', nothing else. */
TEST(content_range)
{
    struct s3_rsp r;

    rio__s3_rsp_reset(&r);
    T_TRUE(rio__s3_parse_crange("bytes 0-99/200", &r));
    T_EQ(r.cr_first, 0u);
    T_EQ(r.cr_last, 99u);
    T_EQ(r.cr_total, 200u);
    T_TRUE(rio__s3_parse_crange("bytes 4096-8191/*", &r));
    T_EQ(r.cr_total, UINT64_MAX);
    T_FALSE(rio__s3_parse_crange("bytes 5-4/10", &r));
    T_FALSE(rio__s3_parse_crange("bytes 0-9", &r));
    T_FALSE(rio__s3_parse_crange("items 0-9/10", &r));
}

/* What sidecar.c writes it reads back; a damaged or foreign one is refused. */
TEST(sidecar_round_trip)
{
    const uint64_t xxh[4] = {1, 0xfedcba9876543210ull, 0, UINT64_MAX};
    const char *id = "0123456789abcdef", *md5 = "d41d8cd98f00b204e9800998ecf8427e";
    uint64_t size = 3 * 4096 + 5, *got = NULL;
    char *sc = NULL, got_md5[33], key[RIO_KEY_MAX + 8], big[RIO_KEY_MAX + 1];
    size_t len = 0;

    T_EQ(rio__s3_sidecar_format(id, size, 4096, md5, 4, xxh, &sc, &len), 0);
    T_EQ(strlen(sc), len);
    T_EQ(rio__s3_sidecar_parse(sc, len, id, size, 4096, got_md5, &got), 0);
    T_STREQ(got_md5, md5);
    for (int i = 0; i < 4; i++)
        T_EQ(got[i], xxh[i]);
    rio__free(got);
    got = NULL;
    /* Another upload's, another geometry's: not this object's. */
    T_EQ(rio__s3_sidecar_parse(sc, len, "0123456789abcdee", size, 4096, got_md5, &got), RIO_EPROTO);
    T_EQ(rio__s3_sidecar_parse(sc, len, id, size + 1, 4096, got_md5, &got), RIO_EPROTO);
    /* One checksum digit changed: the trailing xxh3 no longer matches. */
    char *line = strstr(sc, "fedcba");
    T_NOTNULL(line);
    line[0] = 'e';
    T_EQ(rio__s3_sidecar_parse(sc, len, id, size, 4096, got_md5, &got), RIO_EPROTO);
    T_NULL(got);
    rio__free(sc);

    /* Written without the stream MD5 (etag=none): read back as "". */
    T_EQ(rio__s3_sidecar_format(id, 0, 4096, "", 0, NULL, &sc, &len), 0);
    T_EQ(rio__s3_sidecar_parse(sc, len, id, 0, 4096, got_md5, &got), 0);
    T_STREQ(got_md5, "");
    T_NULL(got);
    rio__free(sc);

    T_EQ(rio__s3_sidecar_key("a/b", id, key, sizeof(key)), 0);
    T_STREQ(key, "a/b.railio-0123456789abcdef");
    memset(big, 'k', RIO_KEY_MAX);
    big[RIO_KEY_MAX] = '\0';
    T_EQ(rio__s3_sidecar_key(big, id, key, sizeof(key)), RIO_EINVAL);
}
