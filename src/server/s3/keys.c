/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's users: --s3-keys FILE, one `ACCESS_KEY SECRET [BUCKETS]` a
 * line (see s3.h). Loaded once into an array sorted by access key, then
 * read-only: any number of request threads look users up without a lock.
 * The file holds secrets, so it must be private to its owner, and no message
 * ever quotes a line (a secret could be on it): only its number. The users'
 * secrets are kept in one allocation of secret memory (core/secret.h), out
 * of a core dump of railiod: one mapping for them all, not one a user.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/secret.h"
#include "railio.h"
#include "server/s3/auth.h"

struct s3_user {
    char *ak;
    char *secret;   /* in the table's secrets */
    char **buckets; /* NULL: every bucket */
    unsigned nbuckets;
};

struct rio_s3_keys {
    struct s3_user *u; /* sorted by ak */
    unsigned n;
    struct s3_user anon; /* anon.ak == NULL: anonymous access off */
    /* Every user's secret, each with its NUL, in secret memory: room for a
     * secret of RIO_S3_SECRET_MAX bytes for each user u has room for. */
    char *secrets;
    size_t secrets_cap, secrets_used;
};

_Static_assert((size_t)RIO_S3_KEYS_MAX_USERS *(RIO_S3_SECRET_MAX + 1) <= RIO_SECRET_MAX,
               "every user's secret fits one secret allocation");

static void user_clear(struct s3_user *u)
{
    rio__free(u->ak);
    for (unsigned i = 0; i < u->nbuckets; i++)
        rio__free(u->buckets[i]);
    rio__free(u->buckets);
    memset(u, 0, sizeof(*u));
}

void rio_s3_keys_free(struct rio_s3_keys *k)
{
    if (!k)
        return;
    for (unsigned i = 0; i < k->n; i++)
        user_clear(&k->u[i]);
    user_clear(&k->anon);
    rio__secret_free(k->secrets); /* wipes them */
    rio__free(k->u);
    rio__free(k);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = rio__malloc(n + 1);

    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Printable ASCII without blanks: what an access key, a secret or a bucket
 * list may be made of. */
static int token_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

static int bucket_ok(const char *s, size_t n)
{
    if (n < 1 || n > 255)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

/* BUCKETS of one line: "*" (u->buckets stays NULL) or "a,b,c". */
static int parse_buckets(struct s3_user *u, const char *s, size_t n, const char **why)
{
    unsigned cnt = 1;

    if (n == 1 && s[0] == '*')
        return 0;
    for (size_t i = 0; i < n; i++)
        cnt += s[i] == ',';
    u->buckets = rio__calloc(cnt, sizeof(*u->buckets));
    if (!u->buckets)
        return -ENOMEM;
    for (size_t i = 0; i < n;) {
        const char *c = memchr(s + i, ',', n - i);
        size_t l = c ? (size_t)(c - (s + i)) : n - i;

        if (!bucket_ok(s + i, l)) {
            *why = "a bucket name in BUCKETS is empty, longer than 255 bytes or has a character "
                   "other than A-Z a-z 0-9 . - _";
            return RIO_EINVAL;
        }
        u->buckets[u->nbuckets] = dup_n(s + i, l);
        if (!u->buckets[u->nbuckets])
            return -ENOMEM;
        u->nbuckets++;
        i += l + 1;
        if (c && i == n) {
            *why = "BUCKETS ends with ','";
            return RIO_EINVAL;
        }
    }
    return 0;
}

static int user_cmp(const void *a, const void *b)
{
    return strcmp(((const struct s3_user *)a)->ak, ((const struct s3_user *)b)->ak);
}

/* One line, without its newline, split into at most 3 blank-separated fields. */
static int parse_line(struct rio_s3_keys *k, const char *s, size_t n, const char **why)
{
    const char *f[4];
    size_t fl[4];
    unsigned nf = 0;
    struct s3_user *u;
    int ret;

    for (size_t i = 0; i < n;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n)
            break;
        if (nf == 4)
            break;
        f[nf] = s + i;
        while (i < n && s[i] != ' ' && s[i] != '\t')
            i++;
        fl[nf] = (size_t)(s + i - f[nf]);
        nf++;
    }
    if (nf == 0 || f[0][0] == '#')
        return 0;
    if (nf < 2 || nf > 3) {
        *why = "expected `ACCESS_KEY SECRET [BUCKETS]`";
        return RIO_EINVAL;
    }
    if (!token_ok(f[0], fl[0]) || !token_ok(f[1], fl[1]) || (nf == 3 && !token_ok(f[2], fl[2]))) {
        *why = "a field has a byte that is not printable ASCII";
        return RIO_EINVAL;
    }
    if (fl[0] == 1 && f[0][0] == '*') {
        if (k->anon.ak) {
            *why = "a second anonymous (`*`) line";
            return RIO_EINVAL;
        }
        if (nf != 3) {
            *why = "the anonymous (`*`) line needs its BUCKETS";
            return RIO_EINVAL;
        }
        u = &k->anon;
        u->ak = dup_n("", 0);
        if (!u->ak)
            return -ENOMEM;
        return parse_buckets(u, f[2], fl[2], why);
    }
    if (fl[0] >= sizeof(((struct rio_s3_auth *)0)->access_key)) {
        *why = "ACCESS_KEY longer than 127 bytes";
        return RIO_EINVAL;
    }
    if (fl[1] > RIO_S3_SECRET_MAX) {
        *why = "SECRET longer than 256 bytes";
        return RIO_EINVAL;
    }
    if (k->n == RIO_S3_KEYS_MAX_USERS) {
        *why = "more than 10000 users";
        return RIO_EINVAL;
    }
    u = &k->u[k->n];
    u->ak = dup_n(f[0], fl[0]);
    /* Room is there: a line per user, and RIO_S3_SECRET_MAX + 1 a line. */
    if (fl[1] + 1 > k->secrets_cap - k->secrets_used) {
        *why = "more secrets than the table has room for";
        return RIO_EINVAL;
    }
    u->secret = k->secrets + k->secrets_used;
    memcpy(u->secret, f[1], fl[1]); /* its NUL: the mapping's zero */
    k->secrets_used += fl[1] + 1;
    k->n++;
    if (!u->ak)
        return -ENOMEM;
    ret = nf == 3 ? parse_buckets(u, f[2], fl[2], why) : 0;
    return ret;
}

int rio__s3_keys_parse(const char *text, size_t len, struct rio_s3_keys **out, unsigned *line,
                       const char **why)
{
    struct rio_s3_keys *k;
    unsigned cap = 1;
    int ret = 0;

    *line = 0;
    *why = NULL;
    for (size_t i = 0; i < len; i++)
        cap += text[i] == '\n';
    if (cap > RIO_S3_KEYS_MAX_USERS)
        cap = RIO_S3_KEYS_MAX_USERS;
    k = rio__calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->u = rio__calloc(cap, sizeof(*k->u));
    k->secrets_cap = (size_t)cap * (RIO_S3_SECRET_MAX + 1);
    k->secrets = rio__secret_alloc(k->secrets_cap);
    if (!k->u || !k->secrets) {
        ret = -ENOMEM;
        goto err;
    }
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (text + i)) : len - i;

        ++*line;
        if (l > RIO_S3_KEYS_MAX_LINE) {
            *why = "line longer than 4096 bytes";
            ret = RIO_EINVAL;
            goto err;
        }
        if (l > 0 && text[i + l - 1] == '\r')
            ret = parse_line(k, text + i, l - 1, why);
        else
            ret = parse_line(k, text + i, l, why);
        if (ret < 0)
            goto err;
        i += l + 1;
    }
    *line = 0;
    if (k->n == 0 && !k->anon.ak) {
        *why = "no user in the file";
        ret = RIO_EINVAL;
        goto err;
    }
    if (k->n > 1)
        qsort(k->u, k->n, sizeof(*k->u), user_cmp);
    for (unsigned i = 1; i < k->n; i++) {
        if (strcmp(k->u[i - 1].ak, k->u[i].ak) == 0) {
            *why = "an access key is listed twice";
            ret = RIO_EINVAL;
            goto err;
        }
    }
    *out = k;
    return 0;
err:
    rio_s3_keys_free(k);
    return ret;
}

int rio_s3_keys_load(const char *path, struct rio_s3_keys **out)
{
    struct stat st;
    char *b = NULL;
    size_t n = 0;
    unsigned line = 0;
    const char *why = NULL;
    int fd, ret;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK); /* a FIFO: not waited on */
    if (fd < 0) {
        ret = -errno;
        rio__detail("--s3-keys %s: cannot open it", path);
        return ret;
    }
    if (fstat(fd, &st) < 0) {
        ret = -errno;
        rio__detail("--s3-keys %s: cannot stat it", path);
        goto err;
    }
    if (!S_ISREG(st.st_mode)) {
        ret = RIO_EINVAL;
        rio__detail("--s3-keys %s: not a regular file", path);
        goto err;
    }
    if (st.st_mode & 077) {
        ret = -EACCES;
        rio__detail("--s3-keys %s: holds secrets but group or others may read or write it "
                    "(mode %03o); chmod 600 it",
                    path, (unsigned)(st.st_mode & 0777));
        goto err;
    }
    if (st.st_size > RIO_S3_KEYS_MAX_FILE) {
        ret = RIO_EINVAL;
        rio__detail("--s3-keys %s: larger than %d bytes", path, RIO_S3_KEYS_MAX_FILE);
        goto err;
    }
    b = rio__malloc((size_t)st.st_size + 1);
    if (!b) {
        ret = -ENOMEM;
        goto err;
    }
    /* Read what fstat saw, and one byte more to notice a file that grew. */
    for (;;) {
        ssize_t r = read(fd, b + n, (size_t)st.st_size + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ret = -errno;
            rio__detail("--s3-keys %s: read failed", path);
            goto err;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > (size_t)st.st_size) {
            ret = RIO_EINVAL;
            rio__detail("--s3-keys %s: changed while it was read", path);
            goto err;
        }
    }
    ret = rio__s3_keys_parse(b, n, out, &line, &why);
    if (ret == RIO_EINVAL && line)
        rio__detail("--s3-keys %s line %u: %s", path, line, why);
    else if (ret == RIO_EINVAL)
        rio__detail("--s3-keys %s: %s", path, why);
err:
    if (b) {
        OPENSSL_cleanse(b, n);
        rio__free(b);
    }
    close(fd);
    return ret;
}

const char *rio__s3_keys_secret(const struct rio_s3_keys *k, const char *access_key)
{
    struct s3_user key = {.ak = (char *)access_key};
    const struct s3_user *u;

    if (!k || !access_key || k->n == 0)
        return NULL;
    u = bsearch(&key, k->u, k->n, sizeof(*k->u), user_cmp);
    return u ? u->secret : NULL;
}

int rio__s3_keys_anon(const struct rio_s3_keys *k)
{
    return k && k->anon.ak != NULL;
}

int rio_s3_user_may(const struct rio_s3_keys *k, const char *access_key, const char *bucket)
{
    const struct s3_user *u;

    if (!k || !access_key || !bucket)
        return 0;
    if (access_key[0] == '\0') {
        u = k->anon.ak ? &k->anon : NULL;
    } else {
        struct s3_user key = {.ak = (char *)access_key};
        u = k->n ? bsearch(&key, k->u, k->n, sizeof(*k->u), user_cmp) : NULL;
    }
    if (!u)
        return 0;
    if (!u->buckets)
        return 1;
    for (unsigned i = 0; i < u->nbuckets; i++)
        if (strcmp(u->buckets[i], bucket) == 0)
            return 1;
    return 0;
}
