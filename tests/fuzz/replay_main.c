/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The replay program of every fuzz target that has no main of its own
 * (built with -DRIO_FUZZ_STANDALONE=1, any compiler, no libFuzzer):
 *
 *   fuzz_<name>_replay [FILE|DIR]...   run each file (each file of each DIR)
 *   fuzz_<name>_replay                 run the corpus in $RIO_FUZZ_CORPUS (if
 *                                      set), the target's built-in seeds
 *                                      (rio_fuzz_seeds, if defined) and a
 *                                      deterministic set of mutations of both
 *
 * main is weak: a target that defines its own main (fuzz_proto.c) keeps it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX (1u << 20)
#define MUTATIONS 2000

extern void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len)) __attribute__((weak));
extern int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static uint8_t *buf;
static unsigned long runs;
static uint64_t rng = 1;

static void run_one(const uint8_t *d, size_t n)
{
    /* A copy of exactly n bytes, so ASan sees reads past the input. */
    uint8_t *c = malloc(n ? n : 1);
    if (!c) {
        fprintf(stderr, "fuzz replay: out of memory\n");
        exit(1);
    }
    memcpy(c, d, n);
    LLVMFuzzerTestOneInput(c, n);
    free(c);
    runs++;
}

/* The input and MUTATIONS byte-flipped and truncated copies of it. */
static void run_mutated(const uint8_t *d, size_t n)
{
    run_one(d, n);
    if (n == 0)
        return;
    for (int m = 0; m < MUTATIONS; m++) {
        size_t len = n;
        memcpy(buf, d, len);
        for (int f = 0; f < 1 + m % 4; f++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            buf[(size_t)(rng >> 33) % len] ^= (uint8_t)(rng >> 13);
        }
        if (m % 7 == 0)
            len = (size_t)(rng >> 40) % len; /* truncated */
        run_one(buf, len);
    }
}

/* 0 ok, -1 unreadable. */
static int run_file(const char *path, void (*run)(const uint8_t *, size_t))
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *in = malloc(REPLAY_MAX);
    if (!in) {
        fclose(f);
        return -1;
    }
    size_t len = fread(in, 1, REPLAY_MAX, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "fuzz replay: %s: read error\n", path);
        free(in);
        return -1;
    }
    run(in, len);
    free(in);
    return 0;
}

static int run_path(const char *path, void (*run)(const uint8_t *, size_t))
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path, run);
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort); /* sorted: repeatable */
    if (n < 0) {
        fprintf(stderr, "fuzz replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", path, names[i]->d_name);
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && run_file(p, run) != 0)
                rc = -1;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

__attribute__((weak)) int main(int argc, char **argv)
{
    const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int rc = 0;

    buf = malloc(REPLAY_MAX);
    if (!buf)
        return 1;
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            if (run_path(argv[i], run_one) != 0)
                rc = 1;
        printf("%s: %lu inputs ran clean\n", self, runs);
        free(buf);
        return rc;
    }
    const char *corpus = getenv("RIO_FUZZ_CORPUS");
    if (corpus && *corpus) {
        struct stat st;
        if (stat(corpus, &st) == 0 && run_path(corpus, run_mutated) != 0)
            rc = 1;
    }
    if (rio_fuzz_seeds)
        rio_fuzz_seeds(run_mutated);
    if (runs == 0) {
        fprintf(stderr, "%s: no corpus ($RIO_FUZZ_CORPUS) and no built-in seeds\n", self);
        rc = 1;
    }
    printf("%s: %lu runs clean\n", self, runs);
    free(buf);
    return rc;
}
