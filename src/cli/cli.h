/* SPDX-License-Identifier: Apache-2.0 */
/* railio CLI: shared helpers between subcommands. */
#ifndef RIO_CLI_H
#define RIO_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "railio.h"

int rio_cli_bench(int argc, char **argv);
int rio_cli_demo(int argc, char **argv);
int rio_cli_objects(const char *cmd, int argc, char **argv);
int rio_cli_serve(int argc, char **argv);

/* Print one call's stats as a human table (to f). */
void rio_cli_print_stats(FILE *f, const struct rio_stats *st);
/* GB/s one core verifies (verify_bytes / verify_cpu_ns); 0 when nothing
 * was verified. */
double rio_cli_verify_gbps_core(const struct rio_stats *st);
/* Print one call's stats as a JSON object (no trailing newline). */
void rio_cli_json_stats(FILE *f, const struct rio_stats *st);

/* A size ("4M" = 4 MiB, "4MB" = 4e6, as in URLs); 0 or -1. */
int rio_cli_parse_size(const char *s, uint64_t *out);
/* "1,4,8M" into out (at most max entries, each > 0); the count or -1. */
int rio_cli_parse_list(const char *s, uint64_t *out, unsigned max);
/* The path of program `name` in the directory of this executable (installed: in
 * ../sbin when it is there and not here); 0 or -errno. */
int rio_cli_sibling(const char *name, char *out, size_t cap);
/* Write s to f as a JSON string literal, quotes included. */
void rio_cli_json_str(FILE *f, const char *s);
/* url for a message: the value of every secret query parameter (token=) and
 * a password in user:password@ replaced by "***" (a message or a log never
 * shows a secret); out, truncated to cap. */
const char *rio_cli_url_safe(const char *url, char *out, size_t cap);
/* Monotonic time in seconds. */
double rio_cli_now_s(void);
/* Median of v[0..n) (sorted in place); 0 when n == 0. */
double rio_cli_median(double *v, unsigned n);
#define RIO_CLI_MUTE_OUT 1
#define RIO_CLI_MUTE_ERR 2
/* Run argv (PATH lookup), its stdout/stderr to /dev/null as mute says;
 * seconds it took, or < 0 when it could not run or exited non-zero. */
double rio_cli_run_timed(char *const argv[], int mute);
/* Whether name is a command on PATH. */
bool rio_cli_have_program(const char *name);
/* The 1, 5 and 15 min load averages, -1 each when unknown. */
void rio_cli_loadavg(double out[3]);

/* Deterministic test bytes. */
void rio_cli_fill(void *buf, size_t n, uint64_t seed);

/* A bench's two buffers of size bytes: *src filled (rio_cli_fill, seed 42),
 * *dst zeroed so that no page is touched first inside a measurement. 0, or
 * -1 after printing "who: cannot allocate ..." (free() both on success). */
int rio_cli_bench_buffers(const char *who, uint64_t size, uint8_t **src, uint8_t **dst);
/* A bench's scratch file: $TMPDIR (or /tmp)/railio-bench-TAG-PID into out. */
void rio_cli_bench_path(char *out, size_t cap, const char *tag);
/* Write size bytes of buf to path; 0, or -1 after printing "who: cannot
 * write PATH" (the file removed). */
int rio_cli_write_file(const char *who, const char *path, const void *buf, uint64_t size);
/* The longest list a bench option takes. */
#define RIO_CLI_LIST_MAX 16

/* What `railio bench s3://` and `rados://` share on their command line. */
struct rio_cli_bench_opts {
    uint64_t sizes[RIO_CLI_LIST_MAX]; /* --sizes LIST */
    unsigned nsizes;
    uint64_t chunk; /* --chunk SIZE (> 0) */
    unsigned reps;  /* --reps N */
    bool json;      /* --json */
};
/*
 * argv[*i] if it is one of those options (--reps N in 1..max_reps): 1 once
 * taken (*i is then on its value), 0 when it is none of them or its value
 * is bad (the caller refuses it as a bad argument).
 */
int rio_cli_bench_opt(struct rio_cli_bench_opts *o, unsigned max_reps, int argc, char **argv,
                      int *i);
/* An argument no option took: --help (or -h) prints usage and gives 0;
 * anything else is refused (named, then usage) with 2. */
int rio_cli_bench_other(const char *bench, const char *a, void (*usage)(void));
/* A bench's first argument, its target: -1 when there is one; else usage
 * printed and the exit status (0 for --help or -h, 2 when none given). */
int rio_cli_bench_target(int argc, char **argv, void (*usage)(void));
/* The largest of --sizes (0 when none). */
uint64_t rio_cli_bench_max_size(const struct rio_cli_bench_opts *o);
/* "1,4,16" into out as counts, each at most cap: the count of entries
 * (at most max), or -1. */
int rio_cli_parse_counts(const char *s, unsigned *out, unsigned max, unsigned cap);

/* *best_mbps = max(*best_mbps, bytes / seconds in MB/s); seconds <= 0 (a
 * run that failed) changes nothing. */
void rio_cli_keep_best(double *best_mbps, uint64_t bytes, double seconds);

/* memcpy and xxh3 throughput of this machine in MB/s (one core, n bytes). */
double rio_cli_memcpy_mbps(size_t n);
double rio_cli_xxh3_mbps(size_t n);

/* "%s" of a byte count, human units (static buffer per call site not needed:
 * writes into out). */
void rio_cli_human(char *out, size_t n, double bytes);

#endif
