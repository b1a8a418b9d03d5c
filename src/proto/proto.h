/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The railio wire protocol (docs/protocol.md), shared by the railio://
 * transport (src/transport/tcp/) and the server (src/server/). Every frame is
 * a fixed 32-byte header and a body. Little-endian throughout. Every length is
 * bounded and checked without overflow before anything is allocated.
 *
 * Decoders never allocate: they fill structs whose pointers borrow the body
 * they were given (valid as long as that buffer is). Encoders write into a
 * caller buffer and return the byte count, or -ENOBUFS when it is too small.
 */
#ifndef RIO_PROTO_H
#define RIO_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "core/le.h"

#define RIO_PROTO_MAGIC 0x314F4952u /* "RIO1" on the wire */
#define RIO_PROTO_VERSION 2
/* The HELLO request keeps version 1's framing (a header with version 1, no
 * trailer) so that a server of either version can answer it. */
#define RIO_PROTO_HELLO_VERSION 1
#define RIO_PROTO_HDR_LEN 32
/* Every frame's body carries this tag after its control part: the frame
 * check (xxh3-128) or, after AUTH, the truncated HMAC-SHA256. */
#define RIO_PROTO_TAG_LEN 16
#define RIO_PROTO_NONCE_LEN 16
#define RIO_PROTO_MAC_LEN 32
#define RIO_PROTO_MAX_RAILS 16
#define RIO_PROTO_ADDR_MAX 64 /* "host:port" of one rail, NUL excluded */
/* Upper bound on any body, whatever a peer announces: a chunk (<= 1 GiB, the
 * engine's maximum chunk size) plus its fixed fields. */
#define RIO_PROTO_BODY_CAP ((1u << 30) + 4096u)
/* Bodies of control messages (everything but PUT_CHUNK data and READ data, and
 * LOOKUP/COMMIT's checksum list) stay under this, tag excluded. */
#define RIO_PROTO_CTRL_MAX 8192u
/* ... and their body_len, tag included. */
#define RIO_PROTO_CTRL_BODY_MAX (RIO_PROTO_CTRL_MAX + RIO_PROTO_TAG_LEN)
/* Fixed part of a PUT_CHUNK request and of a successful READ response. */
#define RIO_PROTO_CHUNK_FIXED 24u
#define RIO_PROTO_READ_FIXED 8u
/* Byte offsets of the fields of PUT_CHUNK's fixed part (u64 LE each). */
#define RIO_PROTO_CHUNK_OFF_ID 0u
#define RIO_PROTO_CHUNK_OFF_INDEX 8u
#define RIO_PROTO_CHUNK_OFF_XXH 16u
/* PUT_ONE request: its fields before the key (chunk_size, xxh3, ttl_ms,
 * flags, etag, key_len), then the key, the tag and the data. */
#define RIO_PROTO_ONE_FIXED 58u
#define RIO_PROTO_ONE_OFF_KEYLEN 56u
/* GET_ONE request: max_len, flags, then the key. Its answer's control
 * part: the descriptor's fixed fields, and (when the object's bytes come
 * with it) the xxh3 of its one chunk. */
#define RIO_PROTO_GET_ONE_FIXED 8u
#define RIO_PROTO_GET_ONE_DESC 64u
#define RIO_PROTO_GET_ONE_WITH_DATA 72u
/* Fixed part of a PUT_COMMIT request (upload id, nchunks, etag) before its
 * checksum list, and its fields' offsets. */
#define RIO_PROTO_COMMIT_FIXED 48u
#define RIO_PROTO_COMMIT_OFF_ID 0u
#define RIO_PROTO_COMMIT_OFF_NCHUNKS 8u
#define RIO_PROTO_COMMIT_OFF_ETAG 16u
/* Fixed part of a LOOKUP response (generation, size, chunk_size, nchunks,
 * etag) before its checksum list. */
#define RIO_PROTO_DESC_FIXED 64u
/* A token file's longest content (trailing whitespace included). */
#define RIO_PROTO_TOKEN_MAX 4096u
/* One chunk's checksum (xxh3-64, LE) in a checksum list. */
#define RIO_PROTO_XXH_LEN 8u
/* An etag on the wire: 32 hex digits, not NUL-terminated. */
#define RIO_PROTO_ETAG_LEN 32u

enum rio_proto_op {
    RIO_OP_HELLO = 1,
    RIO_OP_AUTH = 2,
    RIO_OP_PING = 3,
    RIO_OP_LOOKUP = 4,
    RIO_OP_PUT_OPEN = 5,
    RIO_OP_PUT_CHUNK = 6,
    RIO_OP_PUT_COMMIT = 7,
    RIO_OP_PUT_ABORT = 8,
    RIO_OP_READ = 9,
    RIO_OP_DELETE = 10,
    RIO_OP_STAT = 11,
    RIO_OP_LIST = 12,
    RIO_OP_EXISTS = 13,
    RIO_OP_PUT_ONE = 14,
    RIO_OP_GET_ONE = 15,
    RIO_OP__MAX = 15
};

/* HELLO response caps: what the server serves beyond version 2's opcodes.
 * A client asks for LIST or EXISTS only of a server that says it has them
 * (an older one closes the connection on an opcode it does not know). */
#define RIO_PROTO_CAP_LIST 0x1u
#define RIO_PROTO_CAP_EXISTS 0x2u
#define RIO_PROTO_CAP_STREAM_PUT 0x4u /* PUT_OPEN of size RIO_PROTO_SIZE_UNKNOWN */
/* PUT_COMMIT with a condition after its list (docs/protocol.md). */
#define RIO_PROTO_CAP_COND_COMMIT 0x8u
/* DELETE with a generation after its key (docs/protocol.md). */
#define RIO_PROTO_CAP_COND_DELETE 0x10u
/* PUT_ONE: a one-chunk object opened, sent and committed in one frame. */
#define RIO_PROTO_CAP_PUT_ONE 0x20u
/* GET_ONE: a lookup that carries a one-chunk object's bytes. */
#define RIO_PROTO_CAP_GET_ONE 0x40u
/* Service time: a request with RIO_PF_SVC is answered with the time the
 * server spent serving it in the answer's header (docs/protocol.md). */
#define RIO_PROTO_CAP_SVC_TIME 0x80u
/* PUT_COMMIT's condition: publish only if the key holds no object. */
#define RIO_PROTO_IF_ABSENT UINT64_MAX
/* PUT_OPEN's size of an upload whose length arrives with its PUT_COMMIT. */
#define RIO_PROTO_SIZE_UNKNOWN UINT64_MAX

/* LIST: the most entries one answer holds, and the most bytes its control
 * part takes, whatever the request asks (the server stops earlier and says
 * the page is truncated). */
#define RIO_PROTO_LIST_MAX_KEYS 10000u
#define RIO_PROTO_LIST_RESP_MAX (1u << 20)
/* LIST request flags. */
#define RIO_PROTO_LIST_DELIM 0x1u /* group keys at the first '/' after the prefix */
/* LIST answer flags. */
#define RIO_PROTO_LIST_TRUNCATED 0x1u /* more keys follow the last entry */
/* LIST entry flags. */
#define RIO_PROTO_ENTRY_DIR 0x1u /* a common prefix (DELIM): only the key is set */
/* Fixed part of a LIST answer (n, flags) and of one entry (before its key). */
#define RIO_PROTO_LIST_FIXED 8u
#define RIO_PROTO_ENTRY_FIXED 62u
/* EXISTS: the most keys one request names, and its longest control part
 * (the one request allowed a body above RIO_PROTO_CTRL_MAX). */
#define RIO_PROTO_EXISTS_MAX_KEYS 10000u
#define RIO_PROTO_EXISTS_MAX (1u << 20)

/* Header flags. */
#define RIO_PF_RESPONSE 0x0001u /* set on every response */
/* On a request (to a server with RIO_PROTO_CAP_SVC_TIME): answer with the
 * service time. On its answer: bytes 28..31 of the header carry it. */
#define RIO_PF_SVC 0x0002u

struct rio_proto_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t opcode;
    uint16_t flags;
    uint64_t id;       /* request id, echoed by the response */
    uint32_t body_len; /* bytes after the header */
    int32_t status;    /* responses: 0 or -errno / RIO_E*; requests: 0 */
    /* bytes 24..27: low 32 bits of xxh3-64 over bytes 0..23 (header check);
     * bytes 28..31: a response with RIO_PF_SVC: svc_us; else zero. */
    uint32_t svc_us; /* the server's service time, microseconds, saturated */
};

/* Name of an opcode ("READ"), or "?" */
const char *rio__proto_op_name(int op);

/* Encode h into out[32] (computes the header check). svc_us is written
 * only on a response with RIO_PF_SVC (zero otherwise). */
void rio__proto_hdr_encode(const struct rio_proto_hdr *h, uint8_t out[RIO_PROTO_HDR_LEN]);
/* Set the flags of an encoded header (and its header check again). */
void rio__proto_hdr_set_flags(uint8_t hdr[RIO_PROTO_HDR_LEN], uint16_t flags);
/* Nanoseconds as a header's svc_us: microseconds, UINT32_MAX at most. */
static inline uint32_t rio__proto_svc_us(uint64_t ns)
{
    uint64_t us = ns / 1000u;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}
/* A peer's svc_us as the service time of an op the client saw take op_ns:
 * never more than op_ns (a server cannot have served a request for longer
 * than the client waited for its answer; a larger value is a lie or a
 * clock fault, and would make the verdict's share absurd). */
static inline uint64_t rio__proto_svc_clamp(uint32_t svc_us, uint64_t op_ns)
{
    uint64_t ns = (uint64_t)svc_us * 1000u;
    return ns < op_ns ? ns : op_ns;
}
/*
 * Decode and validate a header: magic, header check, version, reserved bytes
 * (svc_us: zero but on a response with RIO_PF_SVC), opcode range, flags, and
 * body_len <= max_body. Returns 0, RIO_EVERSION
 * (a well-formed header of another version: h is filled) or RIO_EPROTO.
 */
int rio__proto_hdr_decode(const uint8_t in[RIO_PROTO_HDR_LEN], uint32_t max_body,
                          struct rio_proto_hdr *h);

/* ---------------------------------------------------------------- bodies */

/* HELLO request: what the client speaks, and its nonce for authentication. */
struct rio_proto_hello {
    uint16_t version_min, version_max;
    uint32_t caps;
    uint8_t nonce[RIO_PROTO_NONCE_LEN];
};

/* HELLO response. */
struct rio_proto_hello_resp {
    uint16_t version; /* chosen */
    uint32_t caps;
    uint32_t auth_required; /* 1: send AUTH before anything but PING */
    uint32_t max_body;      /* the largest body the server accepts */
    uint32_t max_depth;     /* outstanding requests per connection it serves */
    uint8_t nonce[RIO_PROTO_NONCE_LEN];
    uint32_t nrails;
    /* "host:port" of each listener (rail) of the server; borrowed, not NUL-terminated */
    const char *rail[RIO_PROTO_MAX_RAILS];
    uint16_t rail_len[RIO_PROTO_MAX_RAILS];
};

/* AUTH request: HMAC-SHA256(token, "railio-auth-v1" || server nonce || client nonce). */
struct rio_proto_auth {
    uint8_t mac[RIO_PROTO_MAC_LEN];
};
/* AUTH response: HMAC-SHA256(token, "railio-server-v1" || client nonce || server nonce). */
struct rio_proto_auth_resp {
    uint8_t mac[RIO_PROTO_MAC_LEN];
};

/* Requests naming a key: LOOKUP, DELETE. Key 1..1024 bytes, borrowed. */
struct rio_proto_key {
    const char *key;
    uint16_t key_len;
};

/* DELETE: the key, and (if_gen not 0, a server with
 * RIO_PROTO_CAP_COND_DELETE) the generation it must hold, after it. */
struct rio_proto_delete {
    const char *key;
    uint16_t key_len;
    uint64_t if_gen;
};

/* LOOKUP response (also the body of PUT_COMMIT's request, minus the key). */
struct rio_proto_desc {
    uint64_t generation, size, chunk_size, nchunks;
    char etag[32];      /* hex MD5, not NUL-terminated on the wire */
    const uint8_t *xxh; /* nchunks x u64 LE, borrowed; read with rio__proto_u64 */
};

struct rio_proto_put_open {
    uint64_t size, chunk_size;
    uint32_t ttl_ms; /* 0 = no expiry */
    const char *key;
    uint16_t key_len;
};
struct rio_proto_put_open_resp {
    uint64_t upload_id;
};

/* PUT_CHUNK request: the data follows the fixed fields, borrowed. */
struct rio_proto_put_chunk {
    uint64_t upload_id, index, xxh;
    const uint8_t *data;
    uint32_t len;
};

/* PUT_ONE request: an object of one chunk, its size bytes of data after
 * the control part and the tag (size is body_len's rest, not a field). */
struct rio_proto_put_one {
    uint64_t chunk_size; /* size..2^30: the object's chunk size */
    uint64_t xxh;        /* xxh3 of the data */
    uint32_t ttl_ms;     /* 0 = the server's default */
    uint32_t flags;      /* 0 */
    char etag[32];
    const char *key;
    uint16_t key_len;
};

/* GET_ONE request: the object under key, its bytes in the answer when it
 * is one chunk of at most max_len bytes. */
struct rio_proto_get_one {
    uint32_t max_len; /* 1..2^30 */
    uint32_t flags;   /* 0 */
    const char *key;
    uint16_t key_len;
};

/* PUT_COMMIT request. */
struct rio_proto_put_commit {
    uint64_t upload_id;
    uint64_t nchunks;
    char etag[32];
    const uint8_t *xxh; /* nchunks x u64 LE, borrowed */
    /* 0: none; else the commit's condition, sent after the list: the
     * key's object must have this generation (RIO_PROTO_IF_ABSENT: none). */
    uint64_t if_gen;
};
struct rio_proto_put_commit_resp {
    uint64_t generation;
};

struct rio_proto_put_abort {
    uint64_t upload_id;
};

/* READ request: bytes [off, off+len) of the named generation of key. The
 * response body is exactly len bytes on success. */
struct rio_proto_read {
    uint64_t generation, off;
    uint32_t len;
    const char *key;
    uint16_t key_len;
};

/* LIST request: up to max_keys entries (the server clamps it to
 * RIO_PROTO_LIST_MAX_KEYS; 0 = 1000) of the keys that start with prefix
 * (0..1024 bytes) and come after `after` (0..1024 bytes; "" = from the
 * first) in byte order. Borrowed. */
struct rio_proto_list {
    uint32_t max_keys, flags;
    const char *prefix;
    uint16_t prefix_len;
    const char *after;
    uint16_t after_len;
};

/* LIST answer: n entries in strictly ascending byte order of key. */
struct rio_proto_list_resp {
    uint32_t n, flags;
    const uint8_t *entries; /* the encoded entries, borrowed */
    size_t entries_len;
};

/* One entry of a LIST answer. */
struct rio_proto_entry {
    uint32_t flags;
    uint64_t size, generation;
    int64_t mtime_ns;
    char etag[32]; /* hex MD5, or zeros when unknown */
    const char *key;
    uint16_t key_len;
};

/* EXISTS request: n keys (1..RIO_PROTO_EXISTS_MAX_KEYS), each as LOOKUP's,
 * one after the other; walk them with rio__proto_exists_key. */
struct rio_proto_exists {
    uint32_t n;
    const uint8_t *keys; /* borrowed */
    size_t keys_len;
};

/* EXISTS answer: n bits, bit i (byte i / 8, LSB first) set when key i exists. */
struct rio_proto_exists_resp {
    uint32_t n;
    const uint8_t *bits; /* (n + 7) / 8 bytes, borrowed; unused bits zero */
};

/* STAT response: the server's counters. */
struct rio_proto_stat_resp {
    uint64_t objects, bytes, capacity, uploads, connections;
};

/*
 * Encoders: write the BODY (not the header) into out (cap bytes); return its
 * length or -ENOBUFS. PUT_CHUNK and READ responses carry bulk data: their
 * encoders write only the fixed fields (the caller sends the data from its
 * own buffer right after, with writev).
 */
int rio__proto_enc_hello(const struct rio_proto_hello *m, uint8_t *out, size_t cap);
int rio__proto_enc_hello_resp(const struct rio_proto_hello_resp *m, uint8_t *out, size_t cap);
int rio__proto_enc_auth(const struct rio_proto_auth *m, uint8_t *out, size_t cap);
int rio__proto_enc_auth_resp(const struct rio_proto_auth_resp *m, uint8_t *out, size_t cap);
int rio__proto_enc_key(const struct rio_proto_key *m, uint8_t *out, size_t cap);
int rio__proto_enc_delete(const struct rio_proto_delete *m, uint8_t *out, size_t cap);
/* Fixed fields, then the checksum list (nchunks x 8 bytes) from xxh (host
 * order uint64_t array here, unlike the decoded view). */
int rio__proto_enc_desc(const struct rio_proto_desc *m, const uint64_t *xxh, uint8_t *out,
                        size_t cap);
/* Only the fixed fields (m->xxh unused): the server sends the list from the
 * object's memory. Returns RIO_PROTO_DESC_FIXED. */
int rio__proto_enc_desc_fixed(const struct rio_proto_desc *m, uint8_t out[RIO_PROTO_DESC_FIXED]);
int rio__proto_enc_put_open(const struct rio_proto_put_open *m, uint8_t *out, size_t cap);
int rio__proto_enc_put_open_resp(const struct rio_proto_put_open_resp *m, uint8_t *out, size_t cap);
/* Fixed part of PUT_CHUNK (24 bytes); m->data/len are not written. */
int rio__proto_enc_put_chunk_fixed(const struct rio_proto_put_chunk *m, uint8_t *out, size_t cap);
/* PUT_ONE's control part (fixed fields and key): the data and tag follow. */
int rio__proto_enc_put_one(const struct rio_proto_put_one *m, uint8_t *out, size_t cap);
int rio__proto_enc_put_commit(const struct rio_proto_put_commit *m, const uint64_t *xxh,
                              uint8_t *out, size_t cap);
int rio__proto_enc_put_commit_resp(const struct rio_proto_put_commit_resp *m, uint8_t *out,
                                   size_t cap);
int rio__proto_enc_put_abort(const struct rio_proto_put_abort *m, uint8_t *out, size_t cap);
int rio__proto_enc_read(const struct rio_proto_read *m, uint8_t *out, size_t cap);
int rio__proto_enc_get_one(const struct rio_proto_get_one *m, uint8_t *out, size_t cap);
/* A GET_ONE answer's control part: d's fixed fields, and xxh after them
 * when with_data (RIO_PROTO_GET_ONE_WITH_DATA bytes, else
 * RIO_PROTO_GET_ONE_DESC). */
int rio__proto_enc_get_one_resp(const struct rio_proto_desc *d, int with_data, uint64_t xxh,
                                uint8_t *out, size_t cap);
int rio__proto_enc_stat_resp(const struct rio_proto_stat_resp *m, uint8_t *out, size_t cap);
int rio__proto_enc_list(const struct rio_proto_list *m, uint8_t *out, size_t cap);
/* A LIST answer is its fixed part and the entries: _list_resp writes both
 * (m->entries copied), _list_resp_fixed only the fixed part, _entry one
 * entry (the server writes them one after the other). */
int rio__proto_enc_list_resp(const struct rio_proto_list_resp *m, uint8_t *out, size_t cap);
int rio__proto_enc_list_resp_fixed(uint32_t n, uint32_t flags, uint8_t *out, size_t cap);
int rio__proto_enc_entry(const struct rio_proto_entry *e, uint8_t *out, size_t cap);
/* EXISTS request: n keys (keys[i], key_len[i]); answer: n bits from bits. */
int rio__proto_enc_exists_keys(const char *const *keys, const uint16_t *key_len, uint32_t n,
                               uint8_t *out, size_t cap);
int rio__proto_enc_exists(const struct rio_proto_exists *m, uint8_t *out, size_t cap);
int rio__proto_enc_exists_resp(const struct rio_proto_exists_resp *m, uint8_t *out, size_t cap);

/* Decoders: parse body[0..len) exactly (trailing bytes are an error); 0 or
 * RIO_EPROTO. */
int rio__proto_dec_hello(const uint8_t *body, size_t len, struct rio_proto_hello *m);
int rio__proto_dec_hello_resp(const uint8_t *body, size_t len, struct rio_proto_hello_resp *m);
int rio__proto_dec_auth(const uint8_t *body, size_t len, struct rio_proto_auth *m);
int rio__proto_dec_auth_resp(const uint8_t *body, size_t len, struct rio_proto_auth_resp *m);
int rio__proto_dec_key(const uint8_t *body, size_t len, struct rio_proto_key *m);
int rio__proto_dec_delete(const uint8_t *body, size_t len, struct rio_proto_delete *m);
int rio__proto_dec_desc(const uint8_t *body, size_t len, struct rio_proto_desc *m);
int rio__proto_dec_put_open(const uint8_t *body, size_t len, struct rio_proto_put_open *m);
int rio__proto_dec_put_open_resp(const uint8_t *body, size_t len,
                                 struct rio_proto_put_open_resp *m);
/* The data is the rest of the body after the 24 fixed bytes (at least 1 byte). */
int rio__proto_dec_put_chunk(const uint8_t *body, size_t len, struct rio_proto_put_chunk *m);
/* PUT_ONE: the key's length from the fixed part (RIO_PROTO_ONE_FIXED
 * bytes), 1..1024, or RIO_EPROTO; then the whole control part (fixed part
 * and key) with the data's length: flags 0, chunk_size 1..2^30 and at
 * least the data's length (1 at least), a key without NUL. */
int rio__proto_put_one_key_len(const uint8_t *fixed, uint16_t *key_len);
int rio__proto_dec_put_one(const uint8_t *ctl, size_t len, uint64_t data_len,
                           struct rio_proto_put_one *m);
int rio__proto_dec_put_commit(const uint8_t *body, size_t len, struct rio_proto_put_commit *m);
int rio__proto_dec_put_commit_resp(const uint8_t *body, size_t len,
                                   struct rio_proto_put_commit_resp *m);
int rio__proto_dec_put_abort(const uint8_t *body, size_t len, struct rio_proto_put_abort *m);
int rio__proto_dec_read(const uint8_t *body, size_t len, struct rio_proto_read *m);
/* GET_ONE: max_len 1..2^30, flags 0, a key. */
int rio__proto_dec_get_one(const uint8_t *body, size_t len, struct rio_proto_get_one *m);
/* A GET_ONE answer's control part (ctl_len bytes, as rio__proto_layout
 * split it) with its data's length, for a request of max_len: a valid
 * descriptor (d->xxh NULL); with the data, an object of one chunk of
 * data_len bytes (1..max_len) and *xxh its xxh3; without, any object but
 * such a one (it must have come with its bytes). */
int rio__proto_dec_get_one_resp(const uint8_t *ctl, size_t ctl_len, uint64_t data_len,
                                uint32_t max_len, struct rio_proto_desc *d, uint64_t *xxh);
int rio__proto_dec_stat_resp(const uint8_t *body, size_t len, struct rio_proto_stat_resp *m);
/* LIST: max_keys any value, flags only RIO_PROTO_LIST_DELIM, strings with
 * no NUL. */
int rio__proto_dec_list(const uint8_t *body, size_t len, struct rio_proto_list *m);
/* A LIST answer is checked whole: n <= RIO_PROTO_LIST_MAX_KEYS, each entry
 * well formed (key 1..1024 bytes without NUL, a DIR entry's fields zero,
 * known flags), keys strictly ascending. Then rio__proto_list_entry walks
 * it. */
int rio__proto_dec_list_resp(const uint8_t *body, size_t len, struct rio_proto_list_resp *m);
/* The entry at *off of a decoded answer's entries (0 to start); advances
 * *off. 0, or RIO_EPROTO at the end. */
int rio__proto_list_entry(const struct rio_proto_list_resp *m, size_t *off,
                          struct rio_proto_entry *e);
int rio__proto_dec_exists(const uint8_t *body, size_t len, struct rio_proto_exists *m);
/* The key at *off of a decoded EXISTS request (0 to start); as above. */
int rio__proto_exists_key(const struct rio_proto_exists *m, size_t *off, const char **key,
                          uint16_t *key_len);
int rio__proto_dec_exists_resp(const uint8_t *body, size_t len, struct rio_proto_exists_resp *m);

/* A little-endian u64 field of a frame. */
static inline uint64_t rio__proto_u64(const uint8_t *p)
{
    return rio__le64_get(p);
}

/*
 * Where a frame's tag sits: body = control part (*ctl bytes), tag (16), bulk
 * data (*data bytes). The data is the payload of a PUT_CHUNK request and of
 * a successful READ response (at least 1 byte); every other frame has none.
 * A PUT_ONE request is fixed part (*ctl = RIO_PROTO_ONE_FIXED), key, tag,
 * data: its key's length is in the fixed part, so *data counts the key and
 * the data (rio__proto_put_one_key_len). A successful GET_ONE answer is
 * the descriptor's fixed part alone (body_len 64 + 16) or with the xxh3
 * and the object's bytes (72, tag, at least 1 byte). RIO_EPROTO when
 * body_len cannot hold that.
 */
int rio__proto_layout(const struct rio_proto_hdr *h, uint32_t *ctl, uint32_t *data);

/*
 * The HELLO request (version 1 framing, no trailer) carries its check in its
 * caps field: the low 32 bits of xxh3-64 over the header and the 24-byte body
 * with caps zeroed. rio__proto_hello_seal sets it, _check verifies it (0 or
 * RIO_EPROTO).
 */
void rio__proto_hello_seal(const uint8_t hdr[RIO_PROTO_HDR_LEN], uint8_t body[24]);
int rio__proto_hello_check(const uint8_t hdr[RIO_PROTO_HDR_LEN], const uint8_t body[24]);

/*
 * The frame check of one connection's session. Unkeyed (before AUTH, or a
 * server without a token): tag = xxh3-128(header || control part). Keyed
 * (after AUTH): tag = HMAC-SHA256(direction key, u64 seq || header ||
 * control part), first 16 bytes, with one sequence number per direction
 * counting the keyed frames from 0. docs/protocol.md has the derivation.
 */
struct rio_proto_sess {
    void *tx_key, *rx_key; /* EVP_MAC_CTX, keyed templates; NULL: unkeyed */
    uint64_t tx_seq, rx_seq;
    void *rx_mac; /* EVP_MAC_CTX of the frame being received (keyed) */
    void *rx_xxh; /* XXH3_state_t of the frame being received (unkeyed) */
};

/* s zeroed is an unkeyed session; _free releases it (and zeroes it). */
void rio__proto_sess_free(struct rio_proto_sess *s);
/* Derive both direction keys from the token and the nonces; server picks
 * which one sends. Sequence numbers restart at 0. 0 or -ENOMEM. */
int rio__proto_sess_key(struct rio_proto_sess *s, const uint8_t *token, size_t token_len,
                        const uint8_t cnonce[RIO_PROTO_NONCE_LEN],
                        const uint8_t snonce[RIO_PROTO_NONCE_LEN], int server);
static inline int rio__proto_sess_keyed(const struct rio_proto_sess *s)
{
    return s->tx_key != NULL;
}
/* The tag of a frame to send: parts[0] is its 32-byte header, the rest its
 * control part. Keyed: with sequence number seq (the caller counts). */
struct iovec;
int rio__proto_seal(const struct rio_proto_sess *s, uint64_t seq, const struct iovec *parts, int n,
                    uint8_t tag[RIO_PROTO_TAG_LEN]);
/* Check a received frame piece by piece: begin with its header, feed the
 * control part, end with its tag: 0, or RIO_EPROTO (frame check failed).
 * Keyed, each end consumes one receive sequence number. */
int rio__proto_rx_begin(struct rio_proto_sess *s, const uint8_t hdr[RIO_PROTO_HDR_LEN]);
void rio__proto_rx_update(struct rio_proto_sess *s, const void *p, size_t n);
int rio__proto_rx_end(struct rio_proto_sess *s, const uint8_t tag[RIO_PROTO_TAG_LEN]);
/* The three at once: header, control part, tag. */
int rio__proto_rx_check(struct rio_proto_sess *s, const uint8_t hdr[RIO_PROTO_HDR_LEN],
                        const void *ctl, size_t ctl_len, const uint8_t tag[RIO_PROTO_TAG_LEN]);

/*
 * How both ends receive a large body (a PUT_CHUNK's data on railiod, a
 * READ answer's on the client) straight into its destination: before
 * waiting on the socket again, its receive low-water mark (SO_RCVLOWAT) is
 * half of what the body still owes, at most RIO_PROTO_LOWAT_MAX, when that
 * is RIO_PROTO_LOWAT_MIN or more; else the default. So epoll wakes the
 * reader once per that many bytes, not once per segment the sender pushes
 * (on loopback each wake-up is the sender's CPU too: docs/bench.md,
 * "Wake-ups per chunk"). Never above what the body still owes, which the
 * peer sends without waiting for an answer, so the mark is reached; half
 * of it, so that of a body a peer stops sending in the middle all but a
 * small tail is taken in. owed: the bytes the body still owes, 0 where no
 * mark applies (TLS, bytes already buffered, no large body); *cur: the
 * mark as last set (0: the default), changed only where setsockopt took
 * the new one (a failure keeps the default: wake-ups only). Called
 * whenever a read ends, whatever ended it.
 */
#define RIO_PROTO_LOWAT_MIN (16u << 10)
#define RIO_PROTO_LOWAT_MAX (512u << 10)
void rio__proto_rcvlowat(int fd, int *cur, uint64_t owed);

/* HMACs of the authentication exchange (OpenSSL HMAC-SHA256). */
int rio__proto_auth_mac(const uint8_t *token, size_t token_len, const char *label,
                        const uint8_t a[RIO_PROTO_NONCE_LEN], const uint8_t b[RIO_PROTO_NONCE_LEN],
                        uint8_t mac[RIO_PROTO_MAC_LEN]);

/*
 * Read a token file, for the client and railiod alike: at most
 * RIO_PROTO_TOKEN_MAX bytes (more: RIO_EINVAL), trailing whitespace (the
 * newline an editor adds) trimmed, empty refused (RIO_EINVAL); *why says
 * which, NULL for an errno. *loose is set when group or others may read it
 * (railiod warns; the client does not). *out is RIO_PROTO_TOKEN_MAX + 1
 * bytes of secret memory (kept out of core dumps): rio__secret_free wipes
 * and frees it.
 */
int rio__proto_token_read(const char *path, uint8_t **out, size_t *len, int *loose,
                          const char **why);

#endif
