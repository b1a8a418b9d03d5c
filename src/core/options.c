/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Options: the struct, then URL parameters, then RIO_* environment variables
 * (read once, here, at client creation), then defaults. docs/tuning.md gives
 * each knob's trade-off.
 */
#include <errno.h>
#include <stdio.h>
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

/* Where an option's value came from and what went wrong with it. */
struct knobs {
    const struct rio_url *u;
    char *why;
    size_t cap;
    int err;
};

/* Record the first bad option: its URL name, its variable and the value. */
static int bad(struct knobs *k, const char *param, const char *env, const char *value,
               const char *rule)
{
    if (!k->err && k->why && k->cap)
        snprintf(k->why, k->cap, "option %s (URL ?%s=, %s): %s%s%s%s", param, param, env,
                 value ? "\"" : "", value ? value : "", value ? "\" " : "", rule);
    k->err = RIO_EINVAL;
    return RIO_EINVAL;
}

/* Look a knob up in the URL (?name=) and then the environment (RIO_NAME). */
static const char *knob(const struct knobs *k, const char *param, const char *env)
{
    const char *v = k->u ? rio__url_param(k->u, param) : NULL;
    if (v)
        return v;
    v = getenv(env);
    return v && *v ? v : NULL;
}

static void knob_size(struct knobs *k, const char *param, const char *env, uint64_t *dst,
                      uint64_t def)
{
    if (*dst)
        return;
    const char *v = knob(k, param, env);
    if (!v) {
        *dst = def;
        return;
    }
    if (rio__parse_size(v, dst) < 0)
        bad(k, param, env, v, "is not a size");
}

static void knob_u32(struct knobs *k, const char *param, const char *env, uint32_t *dst,
                     uint32_t def)
{
    uint64_t v = *dst;
    int err = k->err;
    knob_size(k, param, env, &v, def);
    if (k->err && !err)
        return;
    if (v > UINT32_MAX) {
        bad(k, param, env, NULL, "too large");
        return;
    }
    *dst = (uint32_t)v;
}

/*
 * A duration in ms. zero: what a value of 0 means, ZERO_NONE (stored as
 * RIO_DEADLINE_NONE: no limit) or ZERO_BAD (refused: a limit of nothing
 * would fail every op at once).
 */
enum { ZERO_NONE = 1, ZERO_BAD = 2 };

static void knob_ms(struct knobs *k, const char *param, const char *env, uint32_t *dst,
                    uint32_t def, int zero)
{
    if (*dst)
        return;
    const char *v = knob(k, param, env);
    if (!v) {
        *dst = def;
        return;
    }
    uint32_t ms;
    if (rio__parse_ms(v, &ms) < 0) {
        bad(k, param, env, v, "is not a duration (e.g. 250ms, 2s) under 49 days");
        return;
    }
    if (ms == 0 && zero == ZERO_BAD) {
        bad(k, param, env, v, "must be more than 0");
        return;
    }
    *dst = ms == 0 && zero == ZERO_NONE ? RIO_DEADLINE_NONE : ms;
}

static void knob_bool(struct knobs *k, const char *param, const char *env, int *dst)
{
    if (*dst)
        return;
    const char *v = knob(k, param, env);
    if (!v) {
        *dst = 1;
        return;
    }
    bool b;
    if (rio__parse_bool(v, &b) == 0)
        *dst = b ? 1 : -1;
    else
        bad(k, param, env, v, "is not on or off");
}

int rio__options_check(const struct rio_options *in, const struct rio_url *u, struct rio_options *o,
                       char *why, size_t cap)
{
    struct knobs kk = {.u = u, .why = why, .cap = cap}, *k = &kk;
    uint32_t v32;

    if (why && cap)
        why[0] = '\0';
    if (in)
        *o = *in;
    else
        rio_options_init(o);

    knob_size(k, "chunk", "RIO_CHUNK_SIZE", &o->chunk_size, DEF_CHUNK);
    v32 = o->paths;
    knob_u32(k, "paths", "RIO_PATHS", &v32, 0);
    o->paths = v32;
    v32 = o->depth;
    knob_u32(k, "depth", "RIO_DEPTH", &v32, DEF_DEPTH);
    o->depth = v32;
    knob_size(k, "budget", "RIO_BUDGET", &o->budget_bytes, DEF_BUDGET);
    knob_size(k, "request_budget", "RIO_REQUEST_BUDGET", &o->request_budget, o->budget_bytes);
    if (!o->budget_mode) {
        const char *v = knob(k, "budget_mode", "RIO_BUDGET_MODE");
        if (v && !strcmp(v, "fail"))
            o->budget_mode = RIO_BUDGET_FAIL;
        else if (v && strcmp(v, "wait"))
            bad(k, "budget_mode", "RIO_BUDGET_MODE", v, "is not wait or fail");
    }
    v32 = o->retry_attempts;
    knob_u32(k, "retries", "RIO_RETRIES", &v32, DEF_RETRIES);
    o->retry_attempts = v32;
    knob_ms(k, "backoff_base", "RIO_BACKOFF_BASE_MS", &o->backoff_base_ms, DEF_BACKOFF_BASE_MS, 0);
    knob_ms(k, "backoff_cap", "RIO_BACKOFF_CAP_MS", &o->backoff_cap_ms, DEF_BACKOFF_CAP_MS, 0);
    knob_ms(k, "deadline", "RIO_DEADLINE_MS", &o->deadline_ms, DEF_DEADLINE_MS, ZERO_NONE);
    knob_ms(k, "op_timeout", "RIO_OP_TIMEOUT_MS", &o->op_timeout_ms, DEF_OP_TIMEOUT_MS, ZERO_BAD);
    knob_ms(k, "cooldown_base", "RIO_COOLDOWN_BASE_MS", &o->cooldown_base_ms, DEF_COOLDOWN_BASE_MS,
            0);
    knob_ms(k, "cooldown_cap", "RIO_COOLDOWN_CAP_MS", &o->cooldown_cap_ms, DEF_COOLDOWN_CAP_MS, 0);
    knob_bool(k, "verify", "RIO_VERIFY", &o->verify);
    knob_bool(k, "retry_checksum", "RIO_RETRY_CHECKSUM", &o->retry_checksum);
    knob_size(k, "seed", "RIO_SEED", &o->seed, 0);
    if (!o->etag) {
        const char *v = knob(k, "etag", "RIO_ETAG");
        if (!v || !strcmp(v, "fast"))
            o->etag = RIO_ETAG_FAST;
        else if (!strcmp(v, "md5"))
            o->etag = RIO_ETAG_MD5;
        else if (!strcmp(v, "none"))
            o->etag = RIO_ETAG_NONE;
        else
            bad(k, "etag", "RIO_ETAG", v, "is not fast, md5 or none");
    }
    if (!o->tls) {
        const char *v = knob(k, "tls", "RIO_TLS");
        bool b = false;
        if (v && rio__parse_bool(v, &b) < 0)
            bad(k, "tls", "RIO_TLS", v, "is not on or off");
        else
            o->tls = b ? 1 : -1;
    }
    if (k->err)
        return k->err;

    if (o->chunk_size < MIN_CHUNK || o->chunk_size > MAX_CHUNK)
        return bad(k, "chunk", "RIO_CHUNK_SIZE", NULL, "must be 4 KiB to 1 GiB");
    if (o->depth < 1 || o->depth > MAX_DEPTH)
        return bad(k, "depth", "RIO_DEPTH", NULL, "must be 1 to 1024");
    if (o->paths > RIO_MAX_PATHS)
        return bad(k, "paths", "RIO_PATHS", NULL, "must be at most 16");
    if (o->etag != RIO_ETAG_FAST && o->etag != RIO_ETAG_MD5 && o->etag != RIO_ETAG_NONE)
        return bad(k, "etag", "RIO_ETAG", NULL, "must be 2 (fast), 1 (md5) or -1 (none)");
    if (o->tls != 1 && o->tls != -1)
        return bad(k, "tls", "RIO_TLS", NULL, "must be 1 (on) or -1 (off)");
    if (o->budget_mode != RIO_BUDGET_WAIT && o->budget_mode != RIO_BUDGET_FAIL)
        return bad(k, "budget_mode", "RIO_BUDGET_MODE", NULL, "must be wait or fail");
    if (o->retry_attempts < 1)
        return bad(k, "retries", "RIO_RETRIES", NULL, "must be 1 or more");
    if (o->backoff_base_ms > o->backoff_cap_ms)
        return bad(k, "backoff_base", "RIO_BACKOFF_BASE_MS", NULL, "must not exceed backoff_cap");
    if (o->cooldown_base_ms > o->cooldown_cap_ms)
        return bad(k, "cooldown_base", "RIO_COOLDOWN_BASE_MS", NULL,
                   "must not exceed cooldown_cap");
    if (o->budget_bytes == 0)
        return bad(k, "budget", "RIO_BUDGET", NULL, "must be more than 0");
    if (o->request_budget == 0)
        return bad(k, "request_budget", "RIO_REQUEST_BUDGET", NULL, "must be more than 0");
    if (o->request_budget > o->budget_bytes)
        o->request_budget = o->budget_bytes;
    return 0;
}

int rio__options_resolve(const struct rio_options *in, const struct rio_url *u,
                         struct rio_options *o)
{
    char why[256];
    int ret = rio__options_check(in, u, o, why, sizeof(why));
    if (ret < 0)
        fprintf(stderr, "railio: %s\n", why);
    return ret;
}
