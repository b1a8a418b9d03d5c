/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory for secrets. A secret on the malloc heap goes into every core dump
 * of the process (a crash of a program that links the library, of the CLI,
 * of Python, of railiod), and malloc may leave copies of it behind in blocks
 * it moved or freed. So each secret gets an anonymous mapping of its own:
 * marked MADV_DONTDUMP, so that the kernel leaves it out of a core dump, and
 * MADV_WIPEONFORK, so that a child made by fork() does not inherit it (a
 * client is of no use in such a child: its threads did not come along; a
 * child that execs loses the mapping anyway). A mapping is a page or more,
 * which is why the callers keep few, long-lived secrets here and put many
 * small ones in one allocation (the S3 gateway's users). Pages are not
 * locked: a secret may still be swapped out.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/secret.h"

/* The mapping's length is kept ahead of the caller's bytes; 16 keeps those
 * aligned for any type. */
#define SECRET_HDR 16

static size_t page_size(void)
{
    long pg = sysconf(_SC_PAGESIZE);

    return pg > 0 ? (size_t)pg : 4096;
}

void *rio__secret_alloc(size_t n)
{
    size_t pg = page_size(), len;
    uint8_t *base;

    if (n > RIO_SECRET_MAX)
        return NULL;
    if (rio__alloc_attempt_fails())
        return NULL;
    len = (SECRET_HDR + (n ? n : 1) + pg - 1) / pg * pg;
    base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    /* Without DONTDUMP the secret would go into a core dump: refuse rather
     * than hand out memory that does not keep the promise. */
    if (madvise(base, len, MADV_DONTDUMP) != 0) {
        munmap(base, len);
        return NULL;
    }
#ifdef MADV_WIPEONFORK
    (void)madvise(base, len, MADV_WIPEONFORK); /* kernels before 4.14 lack it */
#endif
    memcpy(base, &len, sizeof(len));
    rio__alloc_outstanding_add(1);
    return base + SECRET_HDR;
}

void rio__secret_free(void *p)
{
    uint8_t *base;
    size_t len;

    if (!p)
        return;
    base = (uint8_t *)p - SECRET_HDR;
    memcpy(&len, base, sizeof(len));
    explicit_bzero(base, len);
    munmap(base, len);
    rio__alloc_outstanding_add(-1);
}

char *rio__secret_strndup(const char *s, size_t n)
{
    char *d;

    if (!s || n >= RIO_SECRET_MAX)
        return NULL;
    d = rio__secret_alloc(n + 1);
    if (d)
        memcpy(d, s, n); /* d[n] is the mapping's zero */
    return d;
}

char *rio__secret_strdup(const char *s)
{
    return s ? rio__secret_strndup(s, strlen(s)) : NULL;
}
