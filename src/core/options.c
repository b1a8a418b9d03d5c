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
#include <strings.h>

#include "core/engine.h"
#include "core/internal.h"
#include "core/url.h"

#define DEF_CHUNK (4ull << 20)
#define DEF_DEPTH 4u
#define DEF_BUDGET (256ull << 20)
#define DEF_RETRIES 5u
#define DEF_BACKOFF_BASE_MS 10u
#define DEF_BACKOFF_CAP_MS 1000u
/* No whole-request deadline: op timeouts bound every chunk op and retries
 * bound the tries, so a stall ends; a transfer that keeps moving, however
 * long it takes, is not cut off (docs/tuning.md). */
#define DEF_DEADLINE_MS RIO_DEADLINE_NONE
#define DEF_OP_TIMEOUT_MS 10000u
#define DEF_COOLDOWN_BASE_MS 100u
#define DEF_COOLDOWN_CAP_MS 5000u

#define MIN_CHUNK RIO__CHUNK_MIN
#define MAX_CHUNK RIO__CHUNK_MAX
#define MAX_DEPTH 1024u
#define MAX_RETRIES 1000u /* attempts per chunk (a throttled one: four times as many) */

void rio_options_init(struct rio_options *o)
{
    if (o)
        memset(o, 0, sizeof(*o));
}

/* Where an option's value came from, per option read from the URL or the
 * environment, so a refusal can name what the user typed. */
struct knob_src {
    const char *param;
    const char *name; /* param (the URL) or the variable */
    const char *value;
};

struct knobs {
    const struct rio_url *u;
    char *why;
    size_t cap;
    int err;
    unsigned nsrc;
    struct knob_src src[24];
};

/*
 * Record the first bad option. value given: what was read, named by where
 * it came from ("RIO_DEPTH=-1: not a whole number (option depth)"); value NULL:
 * a check of the resolved option, named by where it came from if it was
 * read, else as the options struct field it is.
 */
static int bad(struct knobs *k, const char *param, const char *env, const char *value,
               const char *rule)
{
    const char *name = NULL;

    if (!value)
        for (unsigned i = 0; i < k->nsrc; i++)
            if (!strcmp(k->src[i].param, param)) {
                name = k->src[i].name;
                value = k->src[i].value;
            }
    if (value && !name)
        name = k->u && rio__url_param(k->u, param) == value ? param : env;
    if (!k->err && k->why && k->cap) {
        if (!name)
            snprintf(k->why, k->cap, "option %s (URL ?%s=, %s) %s", param, param, env, rule);
        else if (!strcmp(name, env))
            snprintf(k->why, k->cap, "%s=%s: %s (option %s)", env, value, rule, param);
        else
            snprintf(k->why, k->cap, "%s=%s: %s (URL option; or %s)", param, value, rule, env);
    }
    k->err = RIO_EINVAL;
    return RIO_EINVAL;
}

/* Whether the URL or the environment gave knob param a value. */
static bool knob_set(const struct knobs *k, const char *param)
{
    for (unsigned i = 0; i < k->nsrc; i++)
        if (!strcmp(k->src[i].param, param))
            return true;
    return false;
}

/* Look a knob up in the URL (?name=) and then the environment (RIO_NAME). */
static const char *knob(struct knobs *k, const char *param, const char *env)
{
    const char *v = k->u ? rio__url_param(k->u, param) : NULL;
    const char *name = param;

    if (!v) {
        v = getenv(env);
        name = env;
        if (!v || !*v)
            return NULL;
    }
    if (k->nsrc < sizeof(k->src) / sizeof(k->src[0]))
        k->src[k->nsrc++] = (struct knob_src){param, name, v};
    return v;
}

static void knob_size_rule(struct knobs *k, const char *param, const char *env, uint64_t *dst,
                           uint64_t def, const char *rule)
{
    if (*dst)
        return;
    const char *v = knob(k, param, env);
    if (!v) {
        *dst = def;
        return;
    }
    if (rio__parse_size(v, dst) < 0)
        bad(k, param, env, v, rule);
}

static void knob_size(struct knobs *k, const char *param, const char *env, uint64_t *dst,
                      uint64_t def)
{
    knob_size_rule(k, param, env, dst, def, "not a size (e.g. 4M, 1GiB)");
}

/* A 64-bit integer (seed): digits only, a size's unit is no part of it. */
static void knob_u64(struct knobs *k, const char *param, const char *env, uint64_t *dst,
                     uint64_t def)
{
    if (*dst)
        return;
    const char *v = knob(k, param, env);
    if (!v) {
        *dst = def;
        return;
    }
    if (rio__parse_uint(v, UINT64_MAX, dst) < 0)
        bad(k, param, env, v, "not an integer (0 to 18446744073709551615)");
}

/* A count: digits only (a size's "4M" or "1.0" is no count), up to
 * UINT32_MAX; its range is the caller's rule (rio__options_check). */
static void knob_count(struct knobs *k, const char *param, const char *env, uint32_t *dst,
                       uint32_t def)
{
    if (*dst)
        return;
    const char *v = knob(k, param, env);
    uint64_t x;
    if (!v) {
        *dst = def;
        return;
    }
    if (rio__parse_uint(v, UINT32_MAX, &x) < 0) {
        bad(k, param, env, v, "not a whole number");
        return;
    }
    *dst = (uint32_t)x;
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
    if (zero == ZERO_NONE && strcasecmp(v, "none") == 0) {
        *dst = RIO_DEADLINE_NONE;
        return;
    }
    if (rio__parse_ms(v, &ms) < 0) {
        bad(k, param, env, v,
            zero == ZERO_NONE ? "not a duration (e.g. 250ms, 2s) under 49 days, 0 or none"
                              : "not a duration (e.g. 250ms, 2s) under 49 days");
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
        bad(k, param, env, v, "not on or off");
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
    /* Never written by a program that zero-initialised the struct (the ABI
     * rules in railio.h): set, it is garbage, or a field of a newer
     * library this one would silently ignore. */
    for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
        if (o->reserved[i]) {
            if (why && cap)
                snprintf(why, cap,
                         "rio_options.reserved[%zu] is not zero (initialise the struct with "
                         "rio_options_init)",
                         i);
            return RIO_EINVAL;
        }

    knob_size(k, "chunk", "RIO_CHUNK_SIZE", &o->chunk_size, DEF_CHUNK);
    v32 = o->paths;
    knob_count(k, "paths", "RIO_PATHS", &v32, 0);
    o->paths = v32;
    v32 = o->depth;
    knob_count(k, "depth", "RIO_DEPTH", &v32, DEF_DEPTH);
    o->depth = v32;
    knob_size(k, "budget", "RIO_BUDGET", &o->budget_bytes, DEF_BUDGET);
    knob_size(k, "request_budget", "RIO_REQUEST_BUDGET", &o->request_budget, o->budget_bytes);
    if (!o->budget_mode) {
        const char *v = knob(k, "budget_mode", "RIO_BUDGET_MODE");
        if (v && !strcmp(v, "fail"))
            o->budget_mode = RIO_BUDGET_FAIL;
        else if (v && strcmp(v, "wait"))
            bad(k, "budget_mode", "RIO_BUDGET_MODE", v, "not wait or fail");
    }
    v32 = o->retry_attempts;
    knob_count(k, "retries", "RIO_RETRIES", &v32, DEF_RETRIES);
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
    /* On unless asked off (docs/tuning.md, "Adaptive concurrency"): a path
     * down, probed or stalled lifts the limits to the ceilings, so a class
     * held low does not leave the survivors of a brownout idle. */
    knob_bool(k, "adapt", "RIO_ADAPT", &o->adapt);
    knob_u64(k, "seed", "RIO_SEED", &o->seed, 0);
    if (!o->etag) {
        const char *v = knob(k, "etag", "RIO_ETAG");
        if (!v || !strcmp(v, "fast"))
            o->etag = RIO_ETAG_FAST;
        else if (!strcmp(v, "md5"))
            o->etag = RIO_ETAG_MD5;
        else if (!strcmp(v, "none"))
            o->etag = RIO_ETAG_NONE;
        else
            bad(k, "etag", "RIO_ETAG", v, "not fast, md5 or none");
    }
    if (!o->tls) {
        const char *v = knob(k, "tls", "RIO_TLS");
        bool b = false;
        if (v && rio__parse_bool(v, &b) < 0)
            bad(k, "tls", "RIO_TLS", v, "not on or off");
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
    if (o->adapt != 1 && o->adapt != -1)
        return bad(k, "adapt", "RIO_ADAPT", NULL, "must be 1 (on) or -1 (off)");
    if (o->verify != 1 && o->verify != -1)
        return bad(k, "verify", "RIO_VERIFY", NULL, "must be 1 (on) or -1 (off)");
    if (o->retry_checksum != 1 && o->retry_checksum != -1)
        return bad(k, "retry_checksum", "RIO_RETRY_CHECKSUM", NULL, "must be 1 (on) or -1 (off)");
    if (o->budget_mode != RIO_BUDGET_WAIT && o->budget_mode != RIO_BUDGET_FAIL)
        return bad(k, "budget_mode", "RIO_BUDGET_MODE", NULL, "must be wait or fail");
    if (o->retry_attempts < 1 || o->retry_attempts > MAX_RETRIES)
        return bad(k, "retries", "RIO_RETRIES", NULL, "must be 1 to 1000");
    /* Of a base above its cap, the one the user set is named (both, or
     * neither: the base): RIO_BACKOFF_CAP_MS=0 was blamed on backoff_base. */
    if (o->backoff_base_ms > o->backoff_cap_ms)
        return knob_set(k, "backoff_cap") && !knob_set(k, "backoff_base")
                   ? bad(k, "backoff_cap", "RIO_BACKOFF_CAP_MS", NULL,
                         "must not be below backoff_base")
                   : bad(k, "backoff_base", "RIO_BACKOFF_BASE_MS", NULL,
                         "must not exceed backoff_cap");
    if (o->cooldown_base_ms > o->cooldown_cap_ms)
        return knob_set(k, "cooldown_cap") && !knob_set(k, "cooldown_base")
                   ? bad(k, "cooldown_cap", "RIO_COOLDOWN_CAP_MS", NULL,
                         "must not be below cooldown_base")
                   : bad(k, "cooldown_base", "RIO_COOLDOWN_BASE_MS", NULL,
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
    if (ret < 0) {
        rio__detail("%s", why);
    }
    return ret;
}

/* ------------------------------------------------------- known names */

/* The URL options every transport takes: the knobs above and the fault
 * filter's (transport/fault.h), which stacks over any of them. */
const char *const rio__core_url_options[] = {
    "chunk",       "paths",         "depth",        "budget",      "request_budget",
    "budget_mode", "retries",       "backoff_base", "backoff_cap", "deadline",
    "op_timeout",  "cooldown_base", "cooldown_cap", "verify",      "retry_checksum",
    "seed",        "etag",          "tls",          "adapt",       "faults",
    NULL,
};

/*
 * Every RIO_* variable the library reads (the knobs above, and the
 * transports' own): a variable near one of these is taken for a typo of it.
 */
const char *const rio__known_env[] = {
    "RIO_CHUNK_SIZE",
    "RIO_PATHS",
    "RIO_DEPTH",
    "RIO_BUDGET",
    "RIO_REQUEST_BUDGET",
    "RIO_BUDGET_MODE",
    "RIO_RETRIES",
    "RIO_BACKOFF_BASE_MS",
    "RIO_BACKOFF_CAP_MS",
    "RIO_DEADLINE_MS",
    "RIO_OP_TIMEOUT_MS",
    "RIO_COOLDOWN_BASE_MS",
    "RIO_COOLDOWN_CAP_MS",
    "RIO_VERIFY",
    "RIO_RETRY_CHECKSUM",
    "RIO_SEED",
    "RIO_ETAG",
    "RIO_TLS",
    "RIO_ADAPT",
    "RIO_TLS_CA",
    "RIO_TOKEN_FILE",
    "RIO_CEPH_CONF",
    "RIO_MODULE_DIR",
    "RIO_S3_ENDPOINT",
    "RIO_S3_DEBUG",
    "RIO_S3_CONTENT_MD5",
    "RIO_S3_CHECKSUM",
    "RIO_S3_NT_COPY",
    "RIO_S3_DISCARD",
    "RIO_S3_DNS_SHUFFLE",
    "RIO_S3_BUFSIZE",
    "RIO_S3_UPBUFSIZE",
    "RIO_S3_RCVBUF",
    "RIO_S3_STALL",
    "RIO_S3_MIN_SPEED",
    "RIO_S3_CONNECT_TIMEOUT",
    "RIO_S3_MIN_PART",
    "RIO_TEST_UNSAFE_FAULTS",
    "RIO_S3_UNSIGNED",
    "RIO_S3_CONDITIONAL",
    "RIO_S3_GET_ONE",
    "RIO_S3_ETAG_CHECK",
    "RIO_MD5_LANES",
    NULL,
};

int rio__url_options_known(const struct rio_url *u, const char *scheme,
                           const char *const *transport)
{
    const char *const *lists[] = {rio__core_url_options, transport};

    for (unsigned i = 0; i < u->nparams; i++) {
        const char *name = u->pkey[i];
        for (unsigned j = 0; j < i; j++)
            if (!strcmp(u->pkey[j], name)) {
                /* The first one was taken and the others were dropped
                 * without a word (chunk=4M&chunk=8M ran in 4 MiB chunks). */
                rio__detail("URL option '%.64s' given twice", name);
                return RIO_EINVAL;
            }
        if (rio__name_in(name, rio__core_url_options) || rio__name_in(name, transport))
            continue;
        const char *near = rio__closest_name(name, lists, 2);
        char why[256];
        if (near)
            snprintf(why, sizeof(why), "unknown URL option '%.64s' (did you mean '%s'?)", name,
                     near);
        else
            snprintf(why, sizeof(why), "unknown URL option '%.64s' for %s://", name, scheme);
        rio__detail("%s", why);
        return RIO_EINVAL;
    }
    return 0;
}

extern char **environ;

/* Another program's RIO_* variables are none of ours to refuse, so a typo
 * of one of ours is only named, once a process. */
static atomic_bool env_warned;

void rio__env_typos(void)
{
    const char *const *lists[] = {rio__known_env};

    if (atomic_exchange(&env_warned, true))
        return;
    for (char **e = environ; e && *e; e++) {
        char name[64];
        size_t n = strcspn(*e, "=");
        if (strncmp(*e, "RIO_", 4) != 0 || n >= sizeof(name))
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (rio__name_in(name, rio__known_env))
            continue;
        const char *near = rio__closest_name(name, lists, 1);
        if (near)
            fprintf(stderr, "railio: warning: %s is not a railio variable (did you mean %s?)\n",
                    name, near);
    }
}
