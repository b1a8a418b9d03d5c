/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where s3:// finds its AWS settings, the way the AWS CLI does: the
 * profile (URL option profile=, else AWS_PROFILE, else "default"), the
 * shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) and the config file (AWS_CONFIG_FILE, else
 * ~/.aws/config), each read once at open through awsini.c. Then the keys:
 * the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN) unless profile= names a profile, then the profile in
 * the credentials file, then in the config file; none is RIO_ENOCREDS
 * unless unsigned=1. docs/s3.md says the same for users.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/secret.h"
#include "transport/s3/internal.h"

/* The file named by env, else ~/.aws/name, into path. false when neither
 * can be named (no HOME). */
static bool file_path(const char *env, const char *name, char *path, size_t cap)
{
    const char *v = getenv(env), *home;
    int w;

    if (v && *v) {
        w = snprintf(path, cap, "%s", v);
    } else {
        home = getenv("HOME");
        if (!home || !*home)
            return false;
        w = snprintf(path, cap, "%s/.aws/%s", home, name);
    }
    return w > 0 && (size_t)w < cap;
}

/*
 * Read path and parse profile from it into out. 0 (read, *found says
 * whether the profile is there), 1 when the file does not exist, or an
 * error with rio_error_detail naming the file (never its contents).
 */
static int read_ini(const char *path, const char *profile, bool config, struct rio_awsini *out,
                    bool *found)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    int fd, ret;

    *found = false;
    /* O_NONBLOCK: a FIFO there is refused below, not waited on for ever
     * (a plain file reads the same). */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 1;
        ret = -errno;
        rio__detail("AWS %s file %s: cannot be read (%s)", config ? "config" : "credentials", path,
                    strerror(-ret));
        return ret;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > RIO_AWSINI_FILE_MAX) {
        rio__detail("AWS %s file %s: not a regular file of at most %u bytes",
                    config ? "config" : "credentials", path, RIO_AWSINI_FILE_MAX);
        close(fd);
        return RIO_EINVAL;
    }
    /* One byte over the bound shows a file that grew since fstat. */
    buf = rio__malloc((size_t)RIO_AWSINI_FILE_MAX + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        ssize_t n = read(fd, buf + len, (size_t)RIO_AWSINI_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ret = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > RIO_AWSINI_FILE_MAX)
            break;
    }
    ret = rio__awsini_parse(buf, len, profile, config, out);
    if (ret == RIO_EPROTO) {
        if (out->bad_line)
            rio__detail("AWS %s file %s: line %u is malformed or too long",
                        config ? "config" : "credentials", path, out->bad_line);
        else
            rio__detail("AWS %s file %s: over %u bytes", config ? "config" : "credentials", path,
                        RIO_AWSINI_FILE_MAX);
        ret = RIO_EINVAL;
        goto out;
    }
    *found = ret == 0;
    ret = 0;
out:
    explicit_bzero(buf, len);
    rio__free(buf);
    close(fd);
    return ret;
}

void rio__s3_profile_clear(struct s3_profile *p)
{
    explicit_bzero(p, sizeof(*p));
}

int rio__s3_profile_load(const struct rio_url *u, struct s3_profile *p)
{
    const char *v;
    int ret;

    memset(p, 0, sizeof(*p));
    v = rio__url_param(u, "profile");
    p->explicit_name = v && *v;
    if (!p->explicit_name)
        v = getenv("AWS_PROFILE");
    p->named = v && *v;
    snprintf(p->name, sizeof(p->name), "%s", v && *v ? v : "default");
    if (v && strlen(v) >= sizeof(p->name)) {
        rio__detail("AWS profile name over %zu bytes", sizeof(p->name) - 1);
        return RIO_EINVAL;
    }
    if (file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials", p->cred_path,
                  sizeof(p->cred_path))) {
        ret = read_ini(p->cred_path, p->name, false, &p->cred, &p->in_cred);
        if (ret < 0)
            return ret;
    }
    if (file_path("AWS_CONFIG_FILE", "config", p->conf_path, sizeof(p->conf_path))) {
        ret = read_ini(p->conf_path, p->name, true, &p->conf, &p->in_conf);
        if (ret < 0)
            return ret;
    }
    /* A profile asked for by name must exist, as for the AWS CLI. */
    if (p->named && !p->in_cred && !p->in_conf) {
        rio__detail("AWS profile %s is in neither %s nor %s", p->name,
                    p->cred_path[0] ? p->cred_path : "(no credentials file: HOME unset)",
                    p->conf_path[0] ? p->conf_path : "(no config file: HOME unset)");
        return RIO_ENOCREDS;
    }
    return 0;
}

/* Copies of id, secret and token (token may be "" or NULL: none). Each
 * bounded as the files' fields are, so that the headers of every request
 * fit (S3_HBUF); where names the source. */
static int take(struct s3_transport *t, const char *id, const char *secret, const char *token,
                const char *where)
{
    struct rio_awsini f;

    if (strlen(id) >= sizeof(f.access_key) || strlen(secret) >= sizeof(f.secret_key) ||
        (token && strlen(token) >= sizeof(f.token))) {
        rio__detail("%s: an access key id over %zu bytes, a secret over %zu or a session token "
                    "over %zu",
                    where, sizeof(f.access_key) - 1, sizeof(f.secret_key) - 1, sizeof(f.token) - 1);
        return RIO_EINVAL;
    }
    /* They go into request headers as they are: a CR or LF (a token
     * pasted with its newline, a hostile credential source) would end the
     * header and start one of its own. Not said: the values are secrets. */
    const char *const vals[] = {id, secret, token ? token : ""};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
        for (const unsigned char *c = (const unsigned char *)vals[i]; *c; c++)
            if (*c < 0x20 || *c == 0x7f) {
                rio__detail("%s: a control character (a newline?) in the %s", where,
                            i == 0   ? "access key id"
                            : i == 1 ? "secret access key"
                                     : "session token");
                return RIO_EINVAL;
            }
    t->access_key = rio__strdup(id);
    /* Secret memory (core/secret.h): out of a core dump of the process. */
    t->secret_key = rio__secret_strdup(secret);
    t->token = token && *token ? rio__secret_strdup(token) : NULL;
    if (!t->access_key || !t->secret_key || (token && *token && !t->token))
        return -ENOMEM;
    t->sign = true;
    return 0;
}

/* One source's pair: both set (1), neither (0), or one without the other
 * (RIO_EINVAL naming the source). */
static int pair(const char *id, const char *secret, const char *where)
{
    bool hi = id && *id, hs = secret && *secret;

    if (hi != hs) {
        rio__detail("%s: an access key id without its secret access key, or the other way round",
                    where);
        return RIO_EINVAL;
    }
    return hi;
}

int rio__s3_creds_pick(struct s3_transport *t, const struct s3_profile *p, bool anonymous)
{
    const char *eid = getenv("AWS_ACCESS_KEY_ID"), *esk = getenv("AWS_SECRET_ACCESS_KEY");
    char where[200];
    int ret;

    if (anonymous) {
        t->sign = false;
        return 0;
    }
    /* The environment first, unless the URL names a profile (as the AWS
     * CLI's --profile beats the environment and AWS_PROFILE does not). */
    if (!p->explicit_name) {
        ret = pair(eid, esk, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
        if (ret < 0)
            return ret;
        if (ret)
            return take(t, eid, esk, getenv("AWS_SESSION_TOKEN"),
                        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN");
    }
    snprintf(where, sizeof(where), "AWS credentials file, profile %s", p->name);
    ret = pair(p->cred.access_key, p->cred.secret_key, where);
    if (ret < 0)
        return ret;
    if (ret)
        return take(t, p->cred.access_key, p->cred.secret_key, p->cred.token, where);
    snprintf(where, sizeof(where), "AWS config file, profile %s", p->name);
    ret = pair(p->conf.access_key, p->conf.secret_key, where);
    if (ret < 0)
        return ret;
    if (ret)
        return take(t, p->conf.access_key, p->conf.secret_key, p->conf.token, where);
    rio__detail("s3 bucket %s: no AWS credentials: looked in %sthe profile %s of %s and of %s; "
                "unsigned=1 sends requests unsigned (a public bucket)",
                t->bucket, p->explicit_name ? "" : "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ",
                p->name, p->cred_path[0] ? p->cred_path : "~/.aws/credentials (HOME unset)",
                p->conf_path[0] ? p->conf_path : "~/.aws/config (HOME unset)");
    return RIO_ENOCREDS;
}
