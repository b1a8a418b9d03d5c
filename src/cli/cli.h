/* SPDX-License-Identifier: Apache-2.0 */
/* railio CLI: shared helpers between subcommands. */
#ifndef RIO_CLI_H
#define RIO_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "railio.h"

/* ------------------------------------------------------------------------
 * The CLI frame: what every verb shares (docs/cli.md is the user's side).
 *
 * A verb is a row of main.c's table: { "name", run, flags, "summary" }, run
 * called as run(name, argc, argv) with argv the arguments after the verb.
 * A verb's run():
 *   1. rio_cli_parse(): -q -v --json -h/--help and its own options, before or
 *      after the operands, "--" ends options; returns -1 to go on, or the
 *      exit status (0 after --help, 2 after a usage error: nothing done);
 *   2. rio_cli_open() per URL operand (split, client opened, errors said);
 *   3. hands call.cancel = rio_cli_cancel_token() to every transfer, checks
 *      rio_cli_interrupted() between the objects of a loop;
 *   4. reports results with rio_cli_json_begin/..._end (--json) or text, and
 *      failures with rio_cli_fail() (whose return is the exit status);
 *   5. returns an exit status. main() then flushes stdout (a write error,
 *      /dev/full, gives RIO_CLI_EXIT_OUTPUT) and, when a signal interrupted
 *      the verb, ends by that signal (the shell sees 130, 143, 129).
 * ------------------------------------------------------------------------ */

/* Exit statuses: fixed forever (docs/cli.md, railio(1)). */
#define RIO_CLI_EXIT_OK 0
#define RIO_CLI_EXIT_FAIL 1        /* any other failure */
#define RIO_CLI_EXIT_USAGE 2       /* bad command line or URL: nothing was done */
#define RIO_CLI_EXIT_NOTFOUND 3    /* no such object, bucket, pool, store, local file */
#define RIO_CLI_EXIT_ACCESS 4      /* permission denied, authentication, no credentials */
#define RIO_CLI_EXIT_UNREACHABLE 5 /* refused, DNS, TLS, no path left, timed out */
#define RIO_CLI_EXIT_VERIFY 6      /* checksum mismatch, malformed answer, short object */
#define RIO_CLI_EXIT_NOSPACE 7     /* out of space or over quota */
#define RIO_CLI_EXIT_UNKNOWN 8     /* outcome unknown: the change may or may not be done */
#define RIO_CLI_EXIT_OUTPUT 9      /* writing stdout failed (/dev/full, EIO) */
#define RIO_CLI_EXIT_CHANGED 10    /* not the object asked for: put --if-absent, --if-generation */
/* The exit status for err (-errno or RIO_E*; 0 gives 0). RIO_ECANCELED after
 * a signal gives 128 + the signal. */
int rio_cli_exit_code(int err);
/* As rio_cli_exit_code, where a call's stats say more: RIO_ERETRIES or
 * RIO_ENOPATH after failed attempts mostly of the checksum or short class
 * is a verification failure (6), mostly server errors 1, else 5. */
int rio_cli_exit_code_st(int err, const struct rio_stats *st);

/* The JSON schema name every object carries ("schema":"railio/1"). */
#define RIO_CLI_SCHEMA "railio/1"

/* A verb's own option. A flag (value NULL) increments *flag; an option with
 * a value (value names it in messages, "N") stores it in *arg. */
struct rio_cli_opt {
    const char *name; /* "--recursive" (or NULL: short only) */
    char short_name;  /* 'r', or 0 */
    const char *value;
    int *flag;
    const char **arg;
};

/* What rio_cli_parse() found; a verb keeps it for the messages. */
struct rio_cli {
    const char *cmd; /* "get": messages read "railio get: ..." */
    const char *usage;
    int json;        /* --json */
    int quiet;       /* -q: no progress, no stats (errors still said) */
    int verbose;     /* -v: full stats, the verdict, error details */
    int data_stdout; /* the verb writes object bytes to stdout (get URL -, cat):
                      * set it after parsing, JSON then goes to stderr */
    int npos;
    char **pos; /* the operands, in order (argv permuted in place) */
};

/*
 * Parse a verb's argv (the arguments after the verb): -q/--quiet,
 * -v/--verbose, --json, -h/--help, the verb's opts (terminated by a zeroed
 * row; NULL for none), short flags bundled (-rq), --name=value and
 * --name value, "-" is an operand, "--" ends options. usage is the verb's
 * help text (its first line "usage: railio VERB ..."). Between min_pos and
 * max_pos operands (max_pos < 0: no limit). Returns -1 to go on; else the
 * exit status: 0 once --help printed usage on stdout, RIO_CLI_EXIT_USAGE once
 * the mistake was named on stderr with the usage.
 */
int rio_cli_parse(struct rio_cli *cl, const char *cmd, const char *usage,
                  const struct rio_cli_opt *opts, int min_pos, int max_pos, int argc, char **argv);
/* A usage mistake found after parsing ("railio VERB: MESSAGE" + usage on
 * stderr): RIO_CLI_EXIT_USAGE. */
/* --if-generation's value s: a number above 0 into *gen, or the usage
 * error (RIO_CLI_EXIT_USAGE, the message printed). 0 when taken. */
int rio_cli_parse_generation(const struct rio_cli *cl, const char *s, uint64_t *gen);
int rio_cli_usage_error(const struct rio_cli *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Say that doing (optional: "reading", "writing", NULL) what (a URL, a key or
 * a file: shown through rio_cli_url_safe) failed with err. Text on stderr:
 * "railio VERB: [DOING ]WHAT: MESSAGE (NAME)[: DETAIL]" with DETAIL from
 * rio_error_detail() (call it right after the failed rio_* call). With
 * --json one object on stdout (stderr when data_stdout):
 * {"schema":"railio/1","type":"error","command":VERB,"target":WHAT,
 *  "doing":DOING,"error":NAME,"code":ERR,"message":MESSAGE,"detail":DETAIL,
 *  "exit":STATUS}. Returns rio_cli_exit_code(err). rio_cli_fail_sys is the
 * same for a local failure (open(2) of a file): no library detail.
 */
int rio_cli_fail(const struct rio_cli *cl, const char *doing, const char *what, int err);
int rio_cli_fail_sys(const struct rio_cli *cl, const char *doing, const char *what, int err);
/* rio_cli_fail for a transfer: the exit status from rio_cli_exit_code_st. */
int rio_cli_fail_st(const struct rio_cli *cl, const char *doing, const char *what, int err,
                    const struct rio_stats *st);
/* rio_cli_fail_sys ending in the exit status rc, not err's (a failed write
 * to stdout is RIO_CLI_EXIT_OUTPUT whatever errno it had): the JSON "exit"
 * says rc. Returns rc. */
int rio_cli_fail_rc(const struct rio_cli *cl, const char *doing, const char *what, int err, int rc);
/* rio_cli_fail with the verb's own detail (why) instead of the library's. */
int rio_cli_fail_why(const struct rio_cli *cl, const char *doing, const char *what, int err,
                     const char *why);

/* Where a URL's options begin: the first '?' followed by NAME= (NAME:
 * letters, digits, '_', '-', '.'), so that '?' elsewhere stays part of the
 * path (a key "a?b", a wildcard "dir/?.bin"); NULL when there are none. */
const char *rio_cli_query_start(const char *s);
/* Split "SCHEME://AUTHORITY/KEY[?query]" into the client URL
 * ("SCHEME://AUTHORITY[?query]") and KEY, the query starting where
 * rio_cli_query_start says (a key may hold '?'). file:///DIR/NAME: the store is
 * DIR, the key NAME (the last path element). With RIO_CLI_KEY_OPTIONAL
 * (a prefix: ls, rm -r) "SCHEME://AUTHORITY" and "SCHEME://AUTHORITY/" give
 * an empty key, and file:///DIR/ the store DIR and "". 0, RIO_EURL,
 * RIO_EINVAL (key too long) or -ENOMEM; free(key), and
 * rio__secret_free(client_url) (it may hold a token: core/secret.h). */
#define RIO_CLI_KEY_OPTIONAL 1u
int rio_cli_split_url(const char *arg, unsigned flags, char **client_url, char **key);
/* arg[0..blen) and then q (NULL: none), in secret memory (its options may
 * hold a token): a client URL. NULL when memory is short. */
char *rio_cli_client_url(const char *arg, size_t blen, const char *q);
/* rio_cli_split_url then rio_client_new (the process's options): 0, or the
 * exit status once the failure was said (a malformed URL or a refused
 * option: RIO_CLI_EXIT_USAGE). free(*key), rio_client_destroy(*c). */
int rio_cli_open(const struct rio_cli *cl, const char *url, unsigned flags, struct rio_client **c,
                 char **key);

/* JSON objects: rio_cli_json_begin writes {"schema":"railio/1","type":TYPE
 * then members ,"name":value, rio_cli_json_end "}\n" (one object a line).
 * Integers that may exceed 2^53 (sizes, byte counts) are numbers up to 2^53
 * and strings above; a generation is always a string. */
void rio_cli_json_begin(FILE *f, const char *type);
void rio_cli_json_end(FILE *f);
void rio_cli_json_kstr(FILE *f, const char *name, const char *s);
void rio_cli_json_ku64(FILE *f, const char *name, uint64_t v);
void rio_cli_json_kgen(FILE *f, const char *name, uint64_t generation);
/* Where a verb's JSON goes: stdout, or stderr when data_stdout. */
FILE *rio_cli_json_out(const struct rio_cli *cl);

/* Interrupts. rio_cli_signals_init() (main does it before a verb whose row
 * has RIO_CLI_CMD_SIGNALS, before any client exists) blocks SIGINT, SIGTERM
 * and SIGHUP in every thread; a watcher thread takes them: the first fires
 * rio_cli_cancel_token() (every call carrying it returns RIO_ECANCELED, an
 * upload is aborted) and the verb unwinds; a second removes the registered
 * temporary file and ends the process at once. */
int rio_cli_signals_init(void);
struct rio_cancel *rio_cli_cancel_token(void); /* NULL without signals_init */
int rio_cli_interrupted(void);                 /* the signal taken, or 0 */
/* Wait until fd is readable: 0, or RIO_ECANCELED once a signal came (a
 * blocking read of stdin cannot hold an interrupted command). */
int rio_cli_wait_readable(int fd);
/* The temporary file a second signal removes (NULL: none). */
void rio_cli_tmp_register(const char *path);

/* A progress line on stderr while a call runs: only when stderr is a
 * terminal and neither -q nor --json; what is "get", "put", "cp". With a
 * call, the library reports (rio_call.progress); without (NULL: a streamed
 * upload, whose writer reports nothing), the caller feeds the bytes its
 * source gave with rio_cli_progress_feed (shown at most every 100 ms). */
struct rio_cli_progress {
    double t0, last;
    const char *what; /* NULL: not shown */
    uint64_t done;
    int shown;
};
void rio_cli_progress_start(struct rio_cli_progress *pr, const struct rio_cli *cl,
                            struct rio_call *call, const char *what);
void rio_cli_progress_feed(struct rio_cli_progress *pr, uint64_t n, uint64_t total);
void rio_cli_progress_end(struct rio_cli_progress *pr);
/* A call's stats after success: -q nothing, default one line, -v the full
 * table and the verdict (on stderr); with --json the caller puts
 * rio_cli_json_stats in its object instead. */
void rio_cli_report_stats(const struct rio_cli *cl, const char *label, const struct rio_stats *st);

/* A row of main.c's verb table. */
#define RIO_CLI_CMD_SIGNALS 1u /* transfers: signals cancel (rio_cli_signals_init) */
struct rio_cli_cmd {
    const char *name;
    int (*run)(const char *cmd, int argc, char **argv);
    unsigned flags;
    const char *summary; /* one line of `railio --help`: "%-26s %s" of the
                          * verb with its operands, and what it does */
};

int rio_cli_bench(int argc, char **argv);
int rio_cli_demo(int argc, char **argv);
int rio_cli_objects(const char *cmd, int argc, char **argv);
/* railio fsck rados://POOL (fsck.c). */
int rio_cli_fsck(const char *cmd, int argc, char **argv);
int rio_cli_demo_cmd(const char *cmd, int argc, char **argv);
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
/* The length of the valid UTF-8 sequence at s (1..4), or 0. */
size_t rio_cli_utf8_len(const unsigned char *s);
/* Whether s is valid UTF-8 throughout. */
bool rio_cli_utf8_valid(const char *s);
/* Write s to f as a JSON string literal, quotes included: always valid
 * JSON (control bytes escaped, bytes that are not UTF-8 as U+FFFD). */
void rio_cli_json_str(FILE *f, const char *s);
/* url for a message: the value of every secret query parameter (token=) and
 * a password in user:password@ replaced by "***" (a message or a log never
 * shows a secret); out, truncated to cap. */
const char *rio_cli_url_safe(const char *url, char *out, size_t cap);
/* Each byte of a control character of s (rio_cli_ctl_len) as '?' (a key
 * from the command line or a listing may hold an escape sequence that
 * repaints or retitles the terminal). */
char *rio_cli_ctl_mask(char *s);
/* The bytes of a control character at s (a C0 one or DEL: 1; a C1 one,
 * U+0080 to U+009F, in UTF-8: 2), or 0. A terminal acts on C1 controls as
 * on ESC sequences (0xc2 0x9b is CSI). */
size_t rio_cli_ctl_len(const unsigned char *s);
/* Why a PUT of a file failed whose read gave got bytes, not the size
 * declared when it started (another process truncated or appended to it):
 * "the file changed size while it was being read (...); nothing was
 * written", into out. */
const char *rio_cli_size_changed(char *out, size_t cap, uint64_t declared, uint64_t got);
/* write(2) all n bytes of p to fd (EINTR retried): 0 or -errno. */
int rio_cli_write_all(int fd, const void *p, size_t n);
/* The client's deadline (deadline=, RIO_DEADLINE_MS), 0 for none: for the
 * calls that read a stream, which the library bounds only by a deadline
 * given per call (a reader lives as long as its consumer reads), while a
 * command's user asked for the whole request to be bounded. */
uint32_t rio_cli_deadline(struct rio_client *c);
/* rio_client_new for a bench's rows: a URL refused (RIO_EINVAL, RIO_EURL)
 * says why once on stderr (the rows show only the error's name). */
int rio_cli_bench_open(const char *url, const struct rio_options *o, struct rio_client **out);
/* ns since the epoch as "2026-01-02T03:04:05.123456789Z" (iso) or
 * "2026-01-02 03:04:05" (human); "" (iso) or "-" when ns <= 0. */
void rio_cli_fmt_time(char *out, size_t cap, int64_t ns, bool iso);
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

/* ------------------------------------------------------------ tmpfile */

/*
 * The temporary file a download writes before it replaces FILE (tmpfile.c):
 * unnamed (O_TMPFILE) where the file system has it, so that whatever ends
 * the process leaves nothing, and named ".BASE.railio-tmp-<16 hex digits>"
 * beside FILE only for the rename once complete; where O_TMPFILE is
 * refused, named from the start. FILE and the name are relative to dfd
 * (AT_FDCWD: paths). With reg the name, while it exists, is the one a
 * second signal removes (rio_cli_tmp_register: one at a time, so one
 * thread's).
 */
struct rio_cli_tmpfile {
    int dfd;
    int fd;     /* write the bytes here; -1 once committed or aborted */
    bool anon;  /* unnamed until the commit */
    bool named; /* name is on disk, ours */
    bool reg;
    char name[4096];
};
/* Open t for file: the fd (also t->fd), or -errno. */
int rio_cli_tmpfile_open(struct rio_cli_tmpfile *t, int dfd, const char *file, bool reg);
/* Close t and put it in file's place (rio__replace_at): 0, or -errno with
 * the temporary removed. */
int rio_cli_tmpfile_commit(struct rio_cli_tmpfile *t, const char *file);
/* Close t and remove what it named. */
void rio_cli_tmpfile_abort(struct rio_cli_tmpfile *t);
/* Whether name (a file name, no '/') is a temporary's: ".BASE.railio-tmp-"
 * and 16 lower-case hex digits. */
bool rio_cli_tmp_name(const char *name);
/* Whether tmp is a temporary's name for the file named name (its BASE is
 * name, or name's first 200 bytes for a longer name). */
bool rio_cli_tmp_name_of(const char *tmp, const char *name);
/* The directory part of file ("." for a bare name) into dir: 0 or
 * -ENAMETOOLONG. */
int rio_cli_dir_part(const char *file, char *dir, size_t cap);
/* Whether writing through file (lstat as lsb: a link, a FIFO, a device) is
 * refused because someone else planted it in a sticky, world-writable
 * directory (objects.c): -EACCES, 0, or another error finding out. */
struct stat;
int rio_cli_planted(const char *file, const struct stat *lsb);
/* Whether path (trailing '/' ignored) is a symbolic link someone else
 * planted so: -EACCES with its *owner, else 0. */
int rio_cli_planted_link(const char *path, unsigned *owner);
/* That refusal of a destination directory said as a failure; exit 4. */
int rio_cli_planted_dir_refused(const struct rio_cli *cl, const char *dir, unsigned owner);

/* ------------------------------------------------------------- resume */

/* An interrupted `railio get URL FILE` (resume.c): the bytes in
 * FILE.railio-tmp, the record in FILE.railio-tmp.resume. */
struct rio_cli_resume {
    char data[4096];
    char rec[4096];
    uint64_t url_hash, generation, size, chunk_size;
    uint64_t done; /* bytes written in order, whole chunks (or the size) */
};
/* Names and URL hash for FILE and URL: 0 or -ENAMETOOLONG. */
int rio_cli_resume_init(struct rio_cli_resume *rs, const char *file, const char *url);
/* Read the record: 0 with the fields set, or < 0 (none, another URL's
 * (-ESTALE), malformed). */
int rio_cli_resume_load(struct rio_cli_resume *rs);
/* Replace the record atomically: 0 or -errno. */
int rio_cli_resume_save(const struct rio_cli_resume *rs);
/* Remove the record and the bytes. */
void rio_cli_resume_drop(const struct rio_cli_resume *rs);
/* Whether path is part of an interrupted get's pair: a record
 * (NAME.railio-tmp.resume, or its NAME.railio-tmp.resume.new being
 * written), or kept bytes NAME.railio-tmp that have their record beside
 * them (without one, NAME.railio-tmp is not ours: a user's file). */
bool rio_cli_resume_name(const char *path);
/* Open the kept bytes read-write (a regular file of ours, one link): fd or -errno. */
int rio_cli_resume_open(const struct rio_cli_resume *rs);
/* How many bytes from the start of fd, up to upto, are whole chunks whose
 * xxh3 is d's (0 when d has no list); buf holds a chunk (cap bytes). */
uint64_t rio_cli_resume_prove(int fd, const struct rio_desc *d, uint64_t upto, uint8_t *buf,
                              size_t cap);

#endif
