/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * Secrets stay out of core dumps. Each test makes secrets of random bytes
 * (never in the test binary, never on the test's heap: they are made in a
 * page of the test's own marked MADV_DONTDUMP), hands them to a client or
 * railiod through files and URLs written straight from that page, and then
 * reads every readable mapping of the process that a core dump would carry
 * (no "dd" in its VmFlags, /proc/PID/smaps) through /proc/PID/mem: none may
 * hold a secret. A first test shows the scan finds a secret that is there.
 */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "core/secret.h"
#include "tcp_util.h"
#include "transport/s3/sign.h"

#define PAGE 4096
#define SCAN_CHUNK (1u << 20)

/* A page of secrets kept out of every scan (and every core dump). */
static char *dd_page(void)
{
    char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    T_TRUE(p != MAP_FAILED);
    T_EQ(madvise(p, PAGE, MADV_DONTDUMP), 0);
    return p;
}

/* 48 random hex digits at p (NUL-terminated): a secret no one else holds. */
static char *make_secret(char *p)
{
    uint8_t r[24];

    T_EQ(getrandom(r, sizeof(r), 0), (ssize_t)sizeof(r));
    for (size_t i = 0; i < sizeof(r); i++) {
        p[2 * i] = "0123456789abcdef"[r[i] >> 4];
        p[2 * i + 1] = "0123456789abcdef"[r[i] & 15];
    }
    p[2 * sizeof(r)] = '\0';
    explicit_bzero(r, sizeof(r));
    return p;
}

/* A private file of the given parts, written with write(2) alone: no stdio
 * buffer on the heap ever holds a secret. */
static void write_parts(const char *path, const char *const *parts)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    T_TRUE(fd >= 0);
    for (; *parts; parts++)
        T_EQ(write(fd, *parts, strlen(*parts)), (ssize_t)strlen(*parts));
    T_EQ(close(fd), 0);
}

/* Does the mapping [lo, hi) of pid's memory hold s[0..n)? buf: a DONTDUMP
 * scratch of SCAN_CHUNK bytes (so it is never scanned itself). */
static bool range_holds(int mem, uint64_t lo, uint64_t hi, const void *s, size_t n, char *buf)
{
    for (uint64_t a = lo; a < hi;) {
        size_t want = hi - a < SCAN_CHUNK ? (size_t)(hi - a) : SCAN_CHUNK;
        ssize_t r = pread(mem, buf, want, (off_t)a);

        if (r <= 0)
            return false; /* [vvar] and the like: not readable, not dumped */
        if (memmem(buf, (size_t)r, s, n))
            return true;
        /* Overlap by n - 1 so a secret across two chunks is seen. */
        a += (size_t)r > n ? (size_t)r - (n - 1) : (size_t)r;
    }
    return false;
}

/*
 * How many mappings of pid that a core dump would carry hold s[0..n); the
 * first one's smaps line goes to where.
 */
static unsigned dumped_holding(pid_t pid, const void *s, size_t n, char *where, size_t cap)
{
    char path[64], line[512], cur[512] = "";
    uint64_t lo = 0, hi = 0;
    bool readable = false;
    unsigned hits = 0;
    char *buf = mmap(NULL, SCAN_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    T_TRUE(buf != MAP_FAILED);
    T_EQ(madvise(buf, SCAN_CHUNK, MADV_DONTDUMP), 0);
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    T_NOTNULL(f);
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDONLY | O_CLOEXEC);
    T_TRUE(mem >= 0);
    where[0] = '\0';
    while (fgets(line, sizeof(line), f)) {
        char perms[8];
        unsigned long long a, b;

        if (sscanf(line, "%llx-%llx %7s", &a, &b, perms) == 3 && strchr(line, ' ')) {
            lo = a;
            hi = b;
            readable = perms[0] == 'r';
            snprintf(cur, sizeof(cur), "%s", line);
            continue;
        }
        if (strncmp(line, "VmFlags:", 8) != 0 || !readable)
            continue;
        /* The kernel leaves a "dd" mapping out of a core dump. */
        if (strstr(line, " dd"))
            continue;
        if (range_holds(mem, lo, hi, s, n, buf)) {
            if (!hits++)
                snprintf(where, cap, "%s", cur);
        }
    }
    fclose(f);
    close(mem);
    munmap(buf, SCAN_CHUNK);
    return hits;
}

#define T_NOT_DUMPED(pid, s, what) T_NOT_DUMPED_N((pid), (s), strlen(s), (what))
#define T_NOT_DUMPED_N(pid, s, n, what)                                                            \
    do {                                                                                           \
        char w_[512];                                                                              \
        unsigned h_ = dumped_holding((pid), (s), (n), w_, sizeof(w_));                             \
        if (h_)                                                                                    \
            fprintf(stderr, "%s is in %u dumped mapping(s), first: %s", (what), h_, w_);           \
        T_EQ(h_, 0);                                                                               \
    } while (0)

/* The scan sees a secret on the heap, and none in secret memory. */
TEST(scan_finds_heap_copy)
{
    char *p = dd_page(), w[512];
    const char *s = make_secret(p);
    char *heap = malloc(64), *sec;

    T_NOTNULL(heap);
    memcpy(heap, s, strlen(s) + 1);
    T_TRUE(dumped_holding(getpid(), s, strlen(s), w, sizeof(w)) >= 1);
    explicit_bzero(heap, 64);
    free(heap);
    T_NOT_DUMPED(getpid(), s, "the wiped copy");

    sec = rio__secret_strdup(s);
    T_NOTNULL(sec);
    T_STREQ(sec, s);
    T_NOT_DUMPED(getpid(), s, "a rio__secret_strdup copy");
    rio__secret_free(sec);
    /* Over the bound: refused, not a mapping of any size asked for. */
    T_NULL(rio__secret_alloc((size_t)RIO_SECRET_MAX + 1));
    munmap(p, PAGE);
}

/* An s3:// client's secret access key and session token, read from an AWS
 * credentials file, are in no dumped mapping of the client's process. */
TEST(s3_client_keys)
{
    char *p = dd_page(), cred[256], url[128];
    const char *sk = make_secret(p), *st = make_secret(p + 64);
    struct rio_client *c = NULL;
    struct rio_options o;

    snprintf(cred, sizeof(cred), "%s/credentials", t_scratch_dir("secret"));
    write_parts(cred, (const char *const[]){"[default]\naws_access_key_id = AKIDSECRETDUMP\n"
                                            "aws_secret_access_key = ",
                                            sk, "\naws_session_token = ", st, "\n", NULL});
    setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_PROFILE");
    /* Nothing listens there: the client opens without asking anything. */
    snprintf(url, sizeof(url), "s3://bkt?endpoint=http://127.0.0.1:47177&region=us-east-1");
    rio_options_init(&o);
    int ret = rio_client_new(url, &o, &c);
    if (ret < 0)
        fprintf(stderr, "%s\n", rio_error_detail());
    T_OK(ret);
    T_NOT_DUMPED(getpid(), sk, "the secret access key");
    T_NOT_DUMPED(getpid(), st, "the session token");
    /* A request signs with the key (and fails: no server). */
    struct rio_desc d;
    T_TRUE(rio_stat(c, "k", &d) < 0);
    T_NOT_DUMPED(getpid(), sk, "the secret access key, after signing");
    rio_client_destroy(c);
    T_NOT_DUMPED(getpid(), sk, "the secret access key, after destroy");
    munmap(p, PAGE);
}

/* Open a railio:// client on e with params (held in secret memory: it may
 * be the token), PUT once, and check t is in no dumped mapping. */
static void client_put(const struct srv_env *e, char *scratch, const char *t, const char *what)
{
    struct tu u;
    struct rio_options o;
    char *url = scratch + 512;

    tu_opts(&o);
    tu_url(url, 512, e, scratch);
    tu_open(&u, url, &o);
    tu_put(u.c, "k", 1000, 1);
    T_NOT_DUMPED(getpid(), t, what);
    tu_close(&u);
}

/* railiod with token t in its --auth-token-file, whose path goes to tok. */
static void start_with_token(struct srv_env *e, const char *t, char *tok, size_t cap)
{
    srv_prepare(e);
    snprintf(tok, cap, "%s/token", e->dir);
    write_parts(tok, (const char *const[]){t, "\n", NULL});
    const char *args[] = {"--auth-token-file", tok, NULL};
    srv_start_listen(e, NULL, args);
}

/* A railio:// client's token, from token_file= and from token= inline,
 * is in no dumped mapping of the client's process, also after an AUTH. */
TEST(tcp_client_token)
{
    struct srv_env e;
    char *p = dd_page(), tok[256], *params = p + 1024;
    const char *t = make_secret(p);

    start_with_token(&e, t, tok, sizeof(tok));

    snprintf(params, 512, "token_file=%s", tok);
    client_put(&e, params, t, "the token (token_file=)");
    snprintf(params, 512, "token=%s", t);
    client_put(&e, params, t, "the token (token=)");
    T_NOT_DUMPED(getpid(), t, "the token, after destroy");
    T_EQ(srv_stop(&e), 0);
    munmap(p, PAGE);
}

/* The SigV4 signing key of secret sk on the UTC day of t (us-east-1, s3). */
static void signing_key(const char *sk, time_t t, uint8_t out[32])
{
    char d[9];
    struct tm tm;
    EVP_MD_CTX *m = EVP_MD_CTX_new();

    T_NOTNULL(m);
    gmtime_r(&t, &tm);
    strftime(d, sizeof(d), "%Y%m%d", &tm);
    T_EQ(rio__s3_signing_key(m, sk, d, "us-east-1", "s3", out), 0);
    EVP_MD_CTX_free(m);
}

/* railiod's --auth-token-file token and its S3 gateway's users' secret keys
 * (--s3-keys) are in no dumped mapping of railiod, also after an AUTH; nor
 * is the signing key of a SigV4 request the gateway verified. */
TEST(railiod_token_and_keys)
{
    struct srv_env e;
    char *p = dd_page(), tok[256], keys[256], *params = p + 1024;
    const char *t = make_secret(p), *sk1 = make_secret(p + 64), *sk2 = make_secret(p + 128);
    char bin[512];

    srv_binary(bin, sizeof(bin));
    if (t_sh("%s --s3-listen 127.0.0.1:0 --sync 2>&1 | grep -q 'built without the S3 gateway'",
             bin) == 0)
        T_SKIP("railiod built without libmicrohttpd (no --s3-listen)");
    srv_prepare(&e);
    snprintf(tok, sizeof(tok), "%s/token", e.dir);
    write_parts(tok, (const char *const[]){t, "\n", NULL});
    snprintf(keys, sizeof(keys), "%s/keys", e.dir);
    write_parts(keys, (const char *const[]){"# users\nDUMPUSER1 ", sk1, " bkt\nDUMPUSER2 ", sk2,
                                            "\n", NULL});
    const char *args[] = {"--auth-token-file", tok,  "--s3-listen", "127.0.0.1:0",
                          "--s3-keys",         keys, NULL};
    srv_start_listen(&e, NULL, args);
    T_TRUE(e.s3[0] != '\0');
    snprintf(params, 512, "token_file=%s", tok);
    client_put(&e, params, t, "the token (token_file=)");
    T_NOT_DUMPED(e.pid, t, "railiod's token");
    T_NOT_DUMPED(e.pid, sk1, "a gateway user's secret key");
    T_NOT_DUMPED(e.pid, sk2, "a gateway user's secret key");

    /* Signed by curl as DUMPUSER1: verified (a 404: no such bucket, not a
     * 403), its signing key (of the day it was sent) derived by railiod. */
    uint8_t *k0 = (uint8_t *)p + 2048, *k1 = k0 + 32;
    time_t t0 = time(NULL);
    T_EQ(t_sh("curl -s -o /dev/null -w '%%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 "
              "--user DUMPUSER1:%s -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "
              "http://%s/bkt > %s/code",
              sk1, e.s3, e.dir),
         0);
    signing_key(sk1, t0, k0);
    signing_key(sk1, time(NULL), k1);
    snprintf(keys, sizeof(keys), "%s/code", e.dir);
    size_t n = 0;
    char *code = (char *)t_slurp(keys, &n);
    T_TRUE(n == 3 && !memcmp(code, "404", 3));
    free(code);
    T_NOT_DUMPED(e.pid, sk1, "a gateway user's secret key, after a signed request");
    /* The gateway lets go of the request as it ends its answer, which
     * curl may have read a moment before: 2 to 3 s for that. */
    char w[512];
    time_t until = time(NULL) + 3;
    while ((dumped_holding(e.pid, k0, 32, w, sizeof(w)) ||
            dumped_holding(e.pid, k1, 32, w, sizeof(w))) &&
           time(NULL) < until)
        usleep(10 * 1000);
    T_NOT_DUMPED_N(e.pid, k0, 32, "a verified request's signing key");
    T_NOT_DUMPED_N(e.pid, k1, 32, "a verified request's signing key");
    T_EQ(srv_stop(&e), 0);
    munmap(p, PAGE);
}

/* Whether pid has a socket open: the CLI has opened its client. */
static bool has_socket(pid_t pid)
{
    char dir[64], path[320], link[64];
    bool found = false;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    for (struct dirent *de; !found && (de = readdir(d));) {
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        found = n > 7 && !strncmp(link, "socket:", 7);
    }
    closedir(d);
    return found;
}

/* `railio put 'railio://...?token=T' -`: while it waits on its stdin, with
 * its client open, T is in no dumped mapping of the CLI (its command line
 * is masked, its own copies of the URL are secret memory). */
TEST(cli_token_in_argv)
{
    struct srv_env e;
    char *p = dd_page(), tok[256], bin[512], *params = p + 1024, *url = p + 1536;
    const char *t = make_secret(p);
    int in[2];
    pid_t pid;

    start_with_token(&e, t, tok, sizeof(tok));
    snprintf(params, 512, "token=%s", t);
    tu_url(url, 1024, &e, params);
    /* railio://ADDR?token=T: the key goes before the options */
    char *qm = strchr(url, '?');
    T_NOTNULL(qm);
    memmove(qm + 2, qm, strlen(qm) + 1);
    memcpy(qm, "/k", 2);
    snprintf(bin, sizeof(bin), "%s/railio", getenv("T_BUILD_DIR"));
    T_EQ(pipe(in), 0);
    pid = fork();
    T_TRUE(pid >= 0);
    if (pid == 0) {
        dup2(in[0], 0);
        close(in[1]);
        execl(bin, "railio", "put", url, "-", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    for (int i = 0; i < 1000 && !has_socket(pid); i++)
        usleep(10 * 1000);
    T_TRUE(has_socket(pid));
    T_NOT_DUMPED(pid, t, "the CLI's token (token= in its command line)");
    T_EQ(write(in[1], "x", 1), 1);
    close(in[1]);
    int st = 0;
    T_EQ(waitpid(pid, &st, 0), pid);
    T_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    T_EQ(srv_stop(&e), 0);
    munmap(p, PAGE);
}
