/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk tier's records (disk.c has the layout): the object file header
 * and the tombstone, written and checked from a buffer with nothing but the
 * checksums needed, so the fuzz target (tests/fuzz/fuzz_disk.c) runs them
 * without a server and builds its seeds with the same writer. Every length
 * is bounded by the buffer and the file before it is used.
 */
#include <string.h>

#include "core/checksum.h"
#include "core/key.h"
#include "proto/proto.h"
#include "server/server.h"

#include "railio.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void rio__srv_disk_seal(uint8_t *buf, size_t len)
{
    wr64(buf + len - 8, rio__xxh3(buf, len - 8));
}

void rio__srv_disk_enc_record(uint8_t *buf, const struct rio_srv_disk_rec *r)
{
    memset(buf, 0, RIO_SRV_DISK_HDR_FIXED);
    memcpy(buf, RIO_SRV_DISK_MAGIC, 8);
    wr32(buf + 8, (uint32_t)r->header_len);
    buf[12] = (uint8_t)r->key_len;
    buf[13] = (uint8_t)(r->key_len >> 8);
    wr64(buf + 16, r->generation);
    wr64(buf + 24, r->size);
    wr64(buf + 32, r->chunk_size);
    wr64(buf + 40, r->nchunks);
    wr64(buf + 48, r->data_off);
    memcpy(buf + 56, r->etag, 32);
    memcpy(buf + RIO_SRV_DISK_HDR_FIXED, r->key, r->key_len);
    if (r->nchunks)
        memcpy(buf + RIO_SRV_DISK_HDR_FIXED + r->key_len, r->xxh, (size_t)r->nchunks * 8);
    rio__srv_disk_seal(buf, (size_t)r->header_len);
}

size_t rio__srv_disk_enc_tomb(uint8_t *buf, const char *key, uint16_t klen, uint64_t gen)
{
    size_t n = RIO_SRV_DISK_TOMB_FIXED + klen + 8u;

    memset(buf, 0, RIO_SRV_DISK_TOMB_FIXED);
    memcpy(buf, RIO_SRV_DISK_TMAGIC, 8);
    buf[8] = (uint8_t)klen;
    buf[9] = (uint8_t)(klen >> 8);
    wr64(buf + 16, gen);
    memcpy(buf + RIO_SRV_DISK_TOMB_FIXED, key, klen);
    rio__srv_disk_seal(buf, n);
    return n;
}

uint64_t rio__srv_disk_header_len(uint64_t key_len, uint64_t nchunks, uint64_t max_chunks)
{
    if (!rio__key_len_ok(key_len) || nchunks > max_chunks)
        return 0;
    return RIO_SRV_DISK_HDR_FIXED + key_len + nchunks * 8 + 8;
}

uint64_t rio__srv_disk_round_up(uint64_t v)
{
    return (v + RIO_SRV_DISK_ALIGN - 1) / RIO_SRV_DISK_ALIGN * RIO_SRV_DISK_ALIGN;
}

uint64_t rio__srv_disk_data_off_max(uint64_t key_len, uint64_t nchunks)
{
    if (nchunks < RIO_SRV_DISK_STREAM_CHUNKS)
        nchunks = RIO_SRV_DISK_STREAM_CHUNKS;
    return rio__srv_disk_round_up(RIO_SRV_DISK_HDR_FIXED + key_len + nchunks * 8 + 8);
}

/* Why a record's or tombstone's key and generation cannot be railiod's, or
 * NULL: a key with a NUL byte (no protocol request names it: it broke
 * every LIST and could not be deleted), a generation of 0 or within 2^40
 * of the end of its range (the next PUT's wrapped to 1, and an
 * acknowledged PUT of that key was lost behind the forged one). */
static const char *rec_fields_why(const char *key, size_t key_len, uint64_t gen)
{
    if (memchr(key, '\0', key_len))
        return "key holds a NUL byte";
    if (gen == 0 || gen > RIO_SRV_DISK_GEN_MAX)
        return "generation out of range";
    return NULL;
}

int rio__srv_disk_parse_record(const uint8_t *buf, size_t avail, uint64_t file_size,
                               uint64_t max_chunks, struct rio_srv_disk_rec *r)
{
    uint64_t hlen;

    memset(r, 0, sizeof(*r));
    if (avail < RIO_SRV_DISK_HDR_FIXED || file_size < RIO_SRV_DISK_HDR_FIXED) {
        r->why = "shorter than a header";
        return RIO_ECHECKSUM;
    }
    if (memcmp(buf, RIO_SRV_DISK_MAGIC, 8) != 0) {
        r->why = "bad magic";
        return RIO_ECHECKSUM;
    }
    r->key_len = (uint16_t)(buf[12] | buf[13] << 8);
    r->generation = rd64(buf + 16);
    r->size = rd64(buf + 24);
    r->chunk_size = rd64(buf + 32);
    r->nchunks = rd64(buf + 40);
    r->data_off = rd64(buf + 48);
    hlen = rio__srv_disk_header_len(r->key_len, r->nchunks, max_chunks);
    /* Bounded by the file itself before anything is allocated for it. */
    if (!hlen || rd32(buf + 8) != hlen || hlen > file_size) {
        r->why = "bad header length";
        return RIO_ECHECKSUM;
    }
    r->header_len = hlen;
    /* The geometry is checked from the fixed part, before the caller
     * allocates and reads header_len bytes: a sparse file whose header
     * claims the most chunks but whose size says otherwise costs nothing. */
    if (r->chunk_size == 0 || (r->size ? (r->size - 1) / r->chunk_size + 1 : 0) != r->nchunks ||
        r->data_off % RIO_SRV_DISK_ALIGN || r->data_off < rio__srv_disk_round_up(hlen) ||
        r->data_off > rio__srv_disk_data_off_max(r->key_len, r->nchunks) ||
        r->size > UINT64_MAX - r->data_off) {
        r->why = "bad geometry";
        return RIO_ECHECKSUM;
    }
    if (file_size != r->data_off + r->size) {
        r->why = file_size < r->data_off + r->size ? "data truncated" : "trailing bytes";
        return RIO_ECHECKSUM;
    }
    if (avail < hlen)
        return 1; /* read header_len bytes, then again */
    if (rio__xxh3(buf, (size_t)hlen - 8) != rd64(buf + hlen - 8)) {
        r->why = "header checksum mismatch";
        return RIO_ECHECKSUM;
    }
    r->etag = (const char *)buf + 56;
    r->key = (const char *)buf + RIO_SRV_DISK_HDR_FIXED;
    r->xxh = buf + RIO_SRV_DISK_HDR_FIXED + r->key_len;
    /* Only what railiod itself could have written (the checksum is no
     * seal: anyone who can write the file can compute it). */
    r->why = rec_fields_why(r->key, r->key_len, r->generation);
    if (!r->why && r->chunk_size > RIO_PROTO_BODY_CAP)
        r->why = "chunk size larger than a chunk the protocol carries";
    return r->why ? RIO_ECHECKSUM : 0;
}

int rio__srv_disk_parse_tomb(const uint8_t *buf, size_t n, struct rio_srv_disk_rec *r)
{
    memset(r, 0, sizeof(*r));
    r->key_len = (uint16_t)(n >= RIO_SRV_DISK_TOMB_FIXED ? buf[8] | buf[9] << 8 : 0);
    if (n < RIO_SRV_DISK_TOMB_FIXED || memcmp(buf, RIO_SRV_DISK_TMAGIC, 8) != 0)
        r->why = "bad tombstone magic or length";
    else if (!rio__key_len_ok(r->key_len) || n != RIO_SRV_DISK_TOMB_FIXED + r->key_len + 8u)
        r->why = "bad tombstone length";
    else if (rio__xxh3(buf, RIO_SRV_DISK_TOMB_FIXED + r->key_len) !=
             rd64(buf + RIO_SRV_DISK_TOMB_FIXED + r->key_len))
        r->why = "tombstone checksum mismatch";
    if (r->why)
        return RIO_ECHECKSUM;
    r->generation = rd64(buf + 16);
    r->key = (const char *)buf + RIO_SRV_DISK_TOMB_FIXED;
    r->why = rec_fields_why(r->key, r->key_len, r->generation);
    return r->why ? RIO_ECHECKSUM : 0;
}
