/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fault language (include/railio_mock.h): one spec "KIND[:key=value]..."
 * into a struct rio_mock_fault. It stands apart from the filter (fault.c)
 * because a spec may come from a URL a user pasted (`faults=` is accepted on
 * every URL): it is hostile input, parsed with every length bounded, and
 * fuzzed on its own (tests/fuzz/fuzz_fault_spec.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"
#include "core/url.h"
#include "railio.h"
#include "railio_mock.h"
#include "transport/fault.h"

static const char *const kind_names[] = {
    [RIO_MOCK_DISCONNECT] = "disconnect", [RIO_MOCK_SHORT] = "short",
    [RIO_MOCK_BITFLIP] = "bitflip",       [RIO_MOCK_STALL] = "stall",
    [RIO_MOCK_ERROR] = "error",           [RIO_MOCK_LATE] = "late",
    [RIO_MOCK_GENCHANGE] = "genchange",   [RIO_MOCK_DELAY] = "delay",
    [RIO_MOCK_META_ERROR] = "meta_error", [RIO_MOCK_UNFENCED] = "unfenced",
};

static const char *const op_names[] = {
    [0] = "any",
    [RIO_MOCK_OP_READ] = "read",
    [RIO_MOCK_OP_WRITE] = "write",
    [RIO_MOCK_OP_LOOKUP] = "lookup",
    [RIO_MOCK_OP_PUT_OPEN] = "put_open",
    [RIO_MOCK_OP_PUT_COMMIT] = "put_commit",
    [RIO_MOCK_OP_REMOVE] = "remove",
    [RIO_MOCK_OP_LIST] = "list",
    [RIO_MOCK_OP_EXISTS] = "exists",
};

int rio__fault_spec_check(const struct rio_mock_fault *f)
{
    if (!f || f->kind < RIO_MOCK_DISCONNECT || f->kind > RIO_MOCK_UNFENCED)
        return RIO_EINVAL;
    if (f->kind == RIO_MOCK_META_ERROR ? f->op != 0 && !rio__fault_meta_op(f->op)
        : f->kind == RIO_MOCK_DELAY
            ? f->op != 0 && f->op != RIO_MOCK_OP_READ && f->op != RIO_MOCK_OP_WRITE &&
                  !rio__fault_meta_op(f->op)
            : f->op != 0 && f->op != RIO_MOCK_OP_READ && f->op != RIO_MOCK_OP_WRITE)
        return RIO_EINVAL;
    if (f->path < -1 || f->path >= RIO_MAX_PATHS || f->chunk < -1)
        return RIO_EINVAL;
    if (!(f->probability >= 0 && f->probability <= 1)) /* NaN fails too */
        return RIO_EINVAL;
    return 0;
}

bool rio__fault_unsafe_allowed(void)
{
    const char *v = secure_getenv("RIO_TEST_UNSAFE_FAULTS");
    return v && strcmp(v, "1") == 0;
}

/* -1 (or "any") or a non-negative integer. */
static int parse_index(const char *v, int64_t max, int64_t *out)
{
    uint64_t u;

    if (strcmp(v, "-1") == 0 || strcasecmp(v, "any") == 0) {
        *out = -1;
        return 0;
    }
    if (rio__parse_uint(v, (uint64_t)max, &u) < 0)
        return RIO_EINVAL;
    *out = (int64_t)u;
    return 0;
}

static int parse_op(const char *v, int *out)
{
    size_t i;

    if (strcasecmp(v, "get") == 0) {
        *out = RIO_MOCK_OP_READ;
        return 0;
    }
    if (strcasecmp(v, "put") == 0) {
        *out = RIO_MOCK_OP_WRITE;
        return 0;
    }
    for (i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++)
        if (strcasecmp(v, op_names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    return RIO_EINVAL;
}

static int parse_kv(struct rio_mock_fault *f, const char *k, const char *v)
{
    uint64_t u;
    int64_t i;

    if (strcmp(k, "op") == 0) {
        return parse_op(v, &f->op);
    } else if (strcmp(k, "path") == 0) {
        if (parse_index(v, RIO_MAX_PATHS - 1, &i) < 0)
            return RIO_EINVAL;
        f->path = (int)i;
    } else if (strcmp(k, "chunk") == 0) {
        if (parse_index(v, INT64_MAX, &i) < 0)
            return RIO_EINVAL;
        f->chunk = i;
    } else if (strcmp(k, "count") == 0 || strcmp(k, "skip") == 0) {
        if (rio__parse_uint(v, UINT32_MAX, &u) < 0)
            return RIO_EINVAL;
        *(k[0] == 'c' ? &f->count : &f->skip) = (uint32_t)u;
    } else if (strcmp(k, "bytes") == 0) {
        if (rio__parse_size(v, &f->after_bytes) < 0)
            return RIO_EINVAL;
    } else if (strcmp(k, "error") == 0) {
        int e = rio__err_from_name(v);
        if (e >= 0)
            return RIO_EINVAL;
        f->error = e;
    } else if (strcmp(k, "delay") == 0) {
        return rio__parse_ms(v, &f->delay_ms);
    } else if (strcmp(k, "down") == 0) {
        return rio__parse_ms(v, &f->down_ms);
    } else if (strcmp(k, "p") == 0) {
        char *end;
        double p;
        errno = 0;
        p = strtod(v, &end);
        if (errno || end == v || *end || !(p >= 0 && p <= 1))
            return RIO_EINVAL;
        f->probability = p;
    } else {
        return RIO_EINVAL;
    }
    return 0;
}

int rio_mock_fault_parse(const char *spec, struct rio_mock_fault *out)
{
    struct rio_mock_fault f = {.path = -1, .chunk = -1};
    char buf[RIO_FAULT_SPEC_MAX], *save = NULL, *tok;
    size_t i;

    if (!spec || !out || strlen(spec) >= sizeof(buf))
        return RIO_EINVAL;
    strcpy(buf, spec);
    tok = strtok_r(buf, ":", &save);
    if (!tok)
        return RIO_EINVAL;
    for (i = 1; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
        if (strcasecmp(tok, kind_names[i]) == 0)
            f.kind = (int)i;
    if (!f.kind)
        return RIO_EINVAL;
    while ((tok = strtok_r(NULL, ":", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return RIO_EINVAL;
        *eq = '\0';
        if (parse_kv(&f, tok, eq + 1) < 0)
            return RIO_EINVAL;
    }
    if (rio__fault_spec_check(&f) < 0)
        return RIO_EINVAL;
    *out = f;
    return 0;
}
