/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resume record of an interrupted `railio get URL FILE`: FILE.railio-tmp
 * holds the object's first bytes, FILE.railio-tmp.resume says which object
 * they belong to (a hash of the URL, generation, size, chunk size) and how
 * many of them were written in order. The record is replaced atomically
 * (written under a temporary name, renamed), read back as hostile input
 * (bounded, every field checked), and the bytes it covers are trusted only
 * once each chunk's xxh3 matches the descriptor's list again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/checksum.h"
#include "railio.h"

#define REC_MAX 512 /* a record is never longer */

static uint64_t fnv1a(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int rio_cli_resume_init(struct rio_cli_resume *rs, const char *file, const char *url)
{
    memset(rs, 0, sizeof(*rs));
    /* A name too long for FILE.railio-tmp.resume.new is not resumable
     * (the get takes the unnamed temporary file). */
    const char *base = strrchr(file, '/');
    if (strlen(base ? base + 1 : file) + strlen(".railio-tmp.resume.new") > NAME_MAX)
        return -ENAMETOOLONG;
    int n = snprintf(rs->data, sizeof(rs->data), "%s.railio-tmp", file);
    int m = snprintf(rs->rec, sizeof(rs->rec), "%s.railio-tmp.resume", file);
    if (n < 0 || (size_t)n >= sizeof(rs->data) || m < 0 || (size_t)m >= sizeof(rs->rec))
        return -ENAMETOOLONG;
    /* The object's name (scheme, place, key), not the options after '?':
     * the same object fetched with other paths or depth is the same. */
    rs->url_hash = fnv1a(url, strcspn(url, "?"));
    return 0;
}

static int rec_format(const struct rio_cli_resume *rs, char *buf, size_t cap)
{
    char body[REC_MAX];
    int n = snprintf(body, sizeof(body),
                     "railio-resume 1\nurl %016" PRIx64 "\ngeneration %" PRIu64 "\nsize %" PRIu64
                     "\nchunk %" PRIu64 "\ndone %" PRIu64 "\n",
                     rs->url_hash, rs->generation, rs->size, rs->chunk_size, rs->done);
    if (n < 0 || (size_t)n >= sizeof(body))
        return -EOVERFLOW;
    int m = snprintf(buf, cap, "%scheck %016" PRIx64 "\n", body, fnv1a(body, (size_t)n));
    return m < 0 || (size_t)m >= cap ? -EOVERFLOW : m;
}

int rio_cli_resume_save(const struct rio_cli_resume *rs)
{
    char buf[REC_MAX], tmp[sizeof(rs->rec) + 8];
    int n = rec_format(rs, buf, sizeof(buf));
    if (n < 0)
        return n;
    snprintf(tmp, sizeof(tmp), "%s.new", rs->rec);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int ret = write(fd, buf, (size_t)n) == n ? 0 : -EIO;
    if (close(fd) < 0 && ret == 0)
        ret = -errno;
    if (ret == 0 && rename(tmp, rs->rec) < 0)
        ret = -errno;
    if (ret < 0)
        unlink(tmp);
    return ret;
}

int rio_cli_resume_load(struct rio_cli_resume *rs)
{
    char buf[REC_MAX + 1], want[REC_MAX];
    struct rio_cli_resume r = *rs;
    /* O_NONBLOCK: a FIFO planted under the record's name cannot hold us. */
    int fd = open(rs->rec, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
        close(fd);
        return -EPERM;
    }
    ssize_t n = read(fd, buf, REC_MAX + 1);
    close(fd);
    if (n <= 0 || n > REC_MAX)
        return -EINVAL; /* empty, unreadable or too long: not ours */
    buf[n] = '\0';
    uint64_t uh;
    if (sscanf(buf,
               "railio-resume 1\nurl %16" SCNx64 "\ngeneration %20" SCNu64 "\nsize %20" SCNu64
               "\nchunk %20" SCNu64 "\ndone %20" SCNu64 "\n",
               &uh, &r.generation, &r.size, &r.chunk_size, &r.done) != 5)
        return -EINVAL;
    /* Re-formatted, it must read byte for byte the same (check line
     * included): no field with extra digits, signs or trailing junk. */
    if (uh != rs->url_hash)
        return -ESTALE; /* another URL's download into the same FILE */
    if (rec_format(&r, want, sizeof(want)) != n || memcmp(want, buf, (size_t)n))
        return -EINVAL;
    if (!r.generation || !r.chunk_size || r.done > r.size ||
        (r.done % r.chunk_size && r.done != r.size))
        return -EINVAL;
    *rs = r;
    return 0;
}

void rio_cli_resume_drop(const struct rio_cli_resume *rs)
{
    unlink(rs->rec);
    unlink(rs->data);
}

int rio_cli_resume_open(const struct rio_cli_resume *rs)
{
    int fd = open(rs->data, O_RDWR | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    /* Ours only: a regular file of this user with no other name (a hard
     * link planted in a shared directory would be written through). */
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || sb.st_nlink != 1) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

uint64_t rio_cli_resume_prove(int fd, const struct rio_desc *d, uint64_t upto, uint8_t *buf,
                              size_t cap)
{
    uint64_t ok = 0;
    if (!d->xxh || !d->chunk_size || d->chunk_size > cap)
        return 0;
    for (uint64_t i = 0; i < d->nchunks && ok < upto; i++) {
        uint64_t len = d->size - ok < d->chunk_size ? d->size - ok : d->chunk_size;
        if (ok + len > upto)
            break;
        ssize_t n = pread(fd, buf, (size_t)len, (off_t)ok);
        if (n != (ssize_t)len || rio__xxh3(buf, (size_t)len) != d->xxh[i])
            break;
        ok += len;
    }
    return ok;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t l = strlen(suffix);
    return n > l && memcmp(s + n - l, suffix, l) == 0;
}

bool rio_cli_resume_name(const char *path)
{
    size_t n = strlen(path);
    char rec[PATH_MAX];

    if (ends_with(path, n, ".railio-tmp.resume") || ends_with(path, n, ".railio-tmp.resume.new"))
        return true;
    if (!ends_with(path, n, ".railio-tmp"))
        return false;
    if (snprintf(rec, sizeof(rec), "%s.resume", path) >= (int)sizeof(rec))
        return false;
    return access(rec, F_OK) == 0;
}
