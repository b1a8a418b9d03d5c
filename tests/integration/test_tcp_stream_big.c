/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net;slow */
/* T_TIMEOUT 300 */
/*
 * `railio put railio://HOST/KEY -` streams 2 GiB from a pipe with the CLI's
 * peak RSS under 256 MiB (an upload of unknown size: nothing buffers the
 * whole input), and a GET gives back the same bytes (hashed while they
 * stream, never held whole).
 */
#include <sys/resource.h>
#include <sys/wait.h>
#include <xxhash.h>

#include "tcp_util.h"

#define LINE "railio-stream-0123456789abcdefghijklmnopqrstu\n" /* 46 bytes */
#define TOTAL (2048ull * TU_MIB)

/* xxh3 of the first TOTAL bytes of `yes` printing LINE's text. */
static uint64_t want_hash(void)
{
    static char piece[64 * 16384];
    XXH3_state_t *st = XXH3_createState();
    size_t ll = strlen(LINE), plen = ll * 16384; /* whole lines only */

    for (size_t off = 0; off < plen; off += ll)
        memcpy(piece + off, LINE, ll);
    XXH3_64bits_reset(st);
    for (uint64_t off = 0; off < TOTAL;) {
        size_t k = TOTAL - off < plen ? (size_t)(TOTAL - off) : plen;
        XXH3_64bits_update(st, piece, k);
        off += k;
    }
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

TEST(cli_put_stdin_2gib_rss_bounded)
{
    struct srv_env e;
    const char *args[] = {"--memory", "3G", NULL};
    const char *b = getenv("T_BUILD_DIR");
    char cmd[1024], text[64];

    srv_start(&e, args);
    snprintf(text, sizeof(text), "%.*s", (int)strlen(LINE) - 1, LINE);
    snprintf(cmd, sizeof(cmd), "yes '%s' | head -c %llu | %s/railio put railio://%s/big/stdin -",
             text, (unsigned long long)TOTAL, b ? b : ".", e.addr[0]);
    pid_t pid = fork();
    T_GE(pid, 0);
    if (pid == 0) {
        execl("/bin/bash", "bash", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    T_EQ(waitpid(pid, &status, 0), pid);
    T_TRUE(WIFEXITED(status));
    T_EQ(WEXITSTATUS(status), 0);
    /* The largest of the children waited for (bash, yes, head, railio). */
    struct rusage ru;
    T_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
    fprintf(stderr, "peak RSS of the put pipeline: %ld KiB for 2 GiB from stdin\n", ru.ru_maxrss);
    T_LT(ru.ru_maxrss, 256l * 1024);

    struct rio_options o;
    struct tu u;
    char url[256];
    tu_opts(&o);
    o.chunk_size = 4 * TU_MIB;
    tu_url(url, sizeof(url), &e, NULL);
    tu_open(&u, url, &o);
    struct rio_desc d;
    T_EQ(rio_stat(u.c, "big/stdin", &d), 0);
    T_EQ(d.size, TOTAL);
    rio_desc_cleanup(&d);
    struct tu_hasher h = {XXH3_createState(), 0};
    XXH3_64bits_reset(h.st);
    T_EQ(rio_get_stream(u.c, "big/stdin", 0, tu_hash_cb, &h, NULL), (int64_t)TOTAL);
    T_EQ(XXH3_64bits_digest(h.st), want_hash());
    XXH3_freeState(h.st);
    tu_close(&u);
    T_EQ(srv_stop(&e), 0);
}
