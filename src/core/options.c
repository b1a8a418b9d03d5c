/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Options: the struct, then URL parameters, then RIO_* environment variables
 * (read once, here, at client creation), then defaults. docs/tuning.md gives
 * each knob's trade-off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/url.h"

#define DEF_CHUNK (4ull << 20)
#define DEF_DEPTH 4u
#define DEF_BUDGET (256ull << 20)
#define DEF_RETRIES 5u
#define DEF_BACKOFF_BASE_MS 10u
#define DEF_BACKOFF_CAP_MS 1000u
#define DEF_DEADLINE_MS 120000u
#define DEF_OP_TIMEOUT_MS 10000u
#define DEF_COOLDOWN_BASE_MS 100u
#define DEF_COOLDOWN_CAP_MS 5000u

#define MIN_CHUNK 4096ull
#define MAX_CHUNK (1ull << 30)
#define MAX_DEPTH 1024u

void rio_options_init(struct rio_options *o)
{
    memset(o, 0, sizeof(*o));
}

/* Look a knob up in the URL (?name=) and then the environment (RIO_NAME). */
static const char *knob(const struct rio_url *u, const char *param, const char *env)
{
    const char *v = u ? rio__url_param(u, param) : NULL;
    if (v)
        return v;
    v = getenv(env);
    return v && *v ? v : NULL;
}

static int knob_size(const struct rio_url *u, const char *param, const char *env, uint64_t *dst,
                     uint64_t def)
{
    if (*dst)
        return 0;
    const char *v = knob(u, param, env);
    if (!v) {
        *dst = def;
        return 0;
    }
    return rio__parse_size(v, dst) < 0 ? RIO_EINVAL : 0;
}

static int knob_u32(const struct rio_url *u, const char *param, const char *env, uint32_t *dst,
                    uint32_t def)
{
    uint64_t v = *dst;
    int ret = knob_size(u, param, env, &v, def);
    if (ret < 0 || v > UINT32_MAX)
        return RIO_EINVAL;
    *dst = (uint32_t)v;
    return 0;
}

static int knob_ms(const struct rio_url *u, const char *param, const char *env, uint32_t *dst,
                   uint32_t def)
{
    if (*dst)
        return 0;
    const char *v = knob(u, param, env);
    if (!v) {
        *dst = def;
        return 0;
    }
    uint64_t ns;
    if (rio__parse_duration_ns(v, &ns) < 0 || ns / 1000000 > UINT32_MAX)
        return RIO_EINVAL;
    *dst = (uint32_t)((ns + 999999) / 1000000);
    return 0;
}

static int knob_bool(const struct rio_url *u, const char *param, const char *env, int *dst)
{
    if (*dst)
        return 0;
    const char *v = knob(u, param, env);
    if (!v) {
        *dst = 1;
        return 0;
    }
    if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes"))
        *dst = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no"))
        *dst = -1;
    else
        return RIO_EINVAL;
    return 0;
}

int rio__options_resolve(const struct rio_options *in, const struct rio_url *u,
                         struct rio_options *o)
{
    uint32_t v32;
    int ret = 0;

    if (in)
        *o = *in;
    else
        rio_options_init(o);

    ret |= knob_size(u, "chunk", "RIO_CHUNK_SIZE", &o->chunk_size, DEF_CHUNK);
    v32 = o->paths;
    ret |= knob_u32(u, "paths", "RIO_PATHS", &v32, 0);
    o->paths = v32;
    v32 = o->depth;
    ret |= knob_u32(u, "depth", "RIO_DEPTH", &v32, DEF_DEPTH);
    o->depth = v32;
    ret |= knob_size(u, "budget", "RIO_BUDGET", &o->budget_bytes, DEF_BUDGET);
    ret |=
        knob_size(u, "request_budget", "RIO_REQUEST_BUDGET", &o->request_budget, o->budget_bytes);
    if (!o->budget_mode) {
        const char *v = knob(u, "budget_mode", "RIO_BUDGET_MODE");
        if (v && !strcmp(v, "fail"))
            o->budget_mode = RIO_BUDGET_FAIL;
        else if (v && strcmp(v, "wait"))
            ret |= RIO_EINVAL;
    }
    v32 = o->retry_attempts;
    ret |= knob_u32(u, "retries", "RIO_RETRIES", &v32, DEF_RETRIES);
    o->retry_attempts = v32;
    ret |=
        knob_ms(u, "backoff_base", "RIO_BACKOFF_BASE_MS", &o->backoff_base_ms, DEF_BACKOFF_BASE_MS);
    ret |= knob_ms(u, "backoff_cap", "RIO_BACKOFF_CAP_MS", &o->backoff_cap_ms, DEF_BACKOFF_CAP_MS);
    ret |= knob_ms(u, "deadline", "RIO_DEADLINE_MS", &o->deadline_ms, DEF_DEADLINE_MS);
    ret |= knob_ms(u, "op_timeout", "RIO_OP_TIMEOUT_MS", &o->op_timeout_ms, DEF_OP_TIMEOUT_MS);
    ret |= knob_ms(u, "cooldown_base", "RIO_COOLDOWN_BASE_MS", &o->cooldown_base_ms,
                   DEF_COOLDOWN_BASE_MS);
    ret |=
        knob_ms(u, "cooldown_cap", "RIO_COOLDOWN_CAP_MS", &o->cooldown_cap_ms, DEF_COOLDOWN_CAP_MS);
    ret |= knob_bool(u, "verify", "RIO_VERIFY", &o->verify);
    ret |= knob_bool(u, "retry_checksum", "RIO_RETRY_CHECKSUM", &o->retry_checksum);
    ret |= knob_size(u, "seed", "RIO_SEED", &o->seed, 0);
    if (!o->etag) {
        const char *v = knob(u, "etag", "RIO_ETAG");
        if (!v || !strcmp(v, "md5"))
            o->etag = 1;
        else if (!strcmp(v, "none"))
            o->etag = -1;
        else
            ret |= RIO_EINVAL;
    }
    if (ret)
        return RIO_EINVAL;

    if (o->chunk_size < MIN_CHUNK || o->chunk_size > MAX_CHUNK)
        return RIO_EINVAL;
    if (o->depth < 1 || o->depth > MAX_DEPTH || o->paths > RIO_MAX_PATHS)
        return RIO_EINVAL;
    if (o->etag != 1 && o->etag != -1)
        return RIO_EINVAL;
    if (o->budget_mode != RIO_BUDGET_WAIT && o->budget_mode != RIO_BUDGET_FAIL)
        return RIO_EINVAL;
    if (o->retry_attempts < 1 || o->backoff_base_ms > o->backoff_cap_ms ||
        o->cooldown_base_ms > o->cooldown_cap_ms || o->budget_bytes == 0 || o->request_budget == 0)
        return RIO_EINVAL;
    if (o->request_budget > o->budget_bytes)
        o->request_budget = o->budget_bytes;
    return 0;
}
