/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio ls, cat, rm (several keys, -r) and cp -r: the verbs that work on
 * many keys at once, through rio_list pages, and the wildcards they take in
 * the last path element.
 */
#ifndef RIO_CLI_TREE_H
#define RIO_CLI_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"
#include "railio.h"

/* The row of main.c's table for ls, cat, rm and cp: rm and cp go to the
 * single-object verbs (rio_cli_objects) unless rio_cli_tree_wants them. */
int rio_cli_tree_cmd(const char *cmd, int argc, char **argv);
int rio_cli_ls(int argc, char **argv);
int rio_cli_cat(int argc, char **argv);
/* rm with -r, a wildcard or several keys; cp with -r or a wildcard. */
int rio_cli_rm_tree(int argc, char **argv);
int rio_cli_cp_tree(int argc, char **argv);
/* Whether `railio rm`/`cp` with these arguments is one of the above (else
 * the single-object verbs take it). */
bool rio_cli_tree_wants(const char *cmd, int argc, char **argv);

/* ---------------------------------------------------------- wildcards */

/* The first unquoted wildcard of pat ('*', '?' or a closed '[...]'), or NULL. */
const char *rio_cli_glob_first(const char *pat);
/* The literal part of pat before its first wildcard, quotes removed, into
 * out (truncated to cap); its full length. */
size_t rio_cli_glob_prefix(const char *pat, char *out, size_t cap);
/* Whether s matches pat; '*', '?' and brackets match '/' only when slash. */
bool rio_cli_glob_match(const char *pat, const char *s, bool slash);

/* ------------------------------------------------------------ targets */

/* target_parse flags: a file:// path that is a directory is the store root
 * (TARGET_DIR), created when missing (TARGET_MKDIR); TARGET_LITERAL below. */
#define RIO_CLI_TARGET_DIR 0x1u
#define RIO_CLI_TARGET_MKDIR 0x2u
/* The path is a key or prefix as written, never a pattern: '?', '*', '['
 * and '\\' are its own characters (cp's destination). */
#define RIO_CLI_TARGET_LITERAL 0x4u

/* SCHEME://AUTHORITY/PATH[?options] as a client and a key path. */
struct rio_cli_target {
    char *client_url; /* SCHEME://AUTHORITY[?options] (file://: the store root) */
    char *path;       /* the key, prefix or pattern after it; "" for none */
    char *prefix;     /* path before its first wildcard: what to list */
    bool glob;        /* path has a wildcard (in its last element only) */
};

/* 0, or an error after which t holds nothing; *why says what was wrong. */
int rio_cli_target_parse(const char *arg, unsigned flags, struct rio_cli_target *t,
                         const char **why);
void rio_cli_target_cleanup(struct rio_cli_target *t);

/* A set of strings (the lister's folded common prefixes, the directories
 * cp -r read): open addressing, FNV-1a, grown at half full. */
struct rio_cli_seen {
    char **v;
    size_t n, cap;
};
/* 1 when s was added, 0 when it was there, -ENOMEM. */
int rio_cli_seen_add(struct rio_cli_seen *set, const char *s);
/* Free the strings and the table; set is empty again. */
void rio_cli_seen_cleanup(struct rio_cli_seen *set);

/* Every entry under a prefix, page by page (never one giant page). */
struct rio_cli_lister {
    struct rio_client *c;
    const char *prefix;  /* what to list */
    const char *pattern; /* NULL, or only entries whose last element matches */
    bool recursive;      /* false: one level (RIO_LIST_DELIM) */
    bool sorted;         /* byte order of key on every backend (RIO_LIST_SORTED) */
    unsigned max_keys;   /* per page; 0 = the library's default */
    uint64_t pages;      /* out: pages fetched so far */
    uint64_t matched;    /* out: entries handed out so far */
    /* private */
    struct rio_list_page page;
    unsigned i;
    bool started, last;
    bool fold;                      /* the backend has no RIO_LIST_DELIM: fold here */
    struct rio_cli_seen seen;       /* prefixes shown so far (not sorted only) */
    char last_dir[RIO_KEY_MAX + 1]; /* the prefix shown last (sorted) */
    struct rio_entry dir;           /* the folded prefix handed out */
    char token[RIO_LIST_TOKEN_MAX + 1];
};

/* The next entry: 1 with *e (valid until the next call), 0 at the end, or
 * an error. rio_cli_lister_cleanup frees the page. */
int rio_cli_lister_next(struct rio_cli_lister *l, const struct rio_entry **e);
void rio_cli_lister_cleanup(struct rio_cli_lister *l);

/* Run fn(arg, i) for i in [0, n) on up to jobs threads; returns when all ran. */
void rio_cli_pool_run(unsigned jobs, size_t n, void (*fn)(void *arg, size_t i), void *arg);

/* ------------------------------------------------- what the verbs share */

struct rio_cli_tree_opts {
    struct rio_cli cl;  /* the frame's parse: messages, --json, -q, -v */
    bool recursive;     /* -r, --recursive */
    bool unsorted;      /* ls --unsorted: the backend's own order (rados://: the pool's) */
    bool json;          /* --json */
    bool quiet;         /* -q: errors only */
    bool verbose;       /* -v: each key as it is done */
    unsigned page_size; /* --page-size N: entries per listing page (1..10000) */
    unsigned jobs;      /* --jobs N: objects in flight at once (1..64) */
    uint64_t if_gen;    /* rm --if-generation G: that generation only (0: any) */
    char **pos;         /* the operands (cl.pos) */
    int npos;
};

/* rio_cli_parse with -r/--recursive, --page-size N and -j/--jobs N (and
 * for rm --if-generation G): -1 to go on, else the exit status (0 after
 * --help, 2 after a usage mistake). */
int rio_cli_tree_opts_parse(const char *cmd, int argc, char **argv, struct rio_cli_tree_opts *o,
                            const char *usage, int min_pos);
/* rio_cli_fail: "railio CMD: WHAT: message (NAME)[: detail]" on stderr, or
 * the JSON error object with --json. */
void rio_cli_tree_error(const char *cmd, const struct rio_cli_tree_opts *o, const char *what,
                        int err);
/* The exit status for an error. */
int rio_cli_tree_exit(int err);
/* Parse arg and open its client; 0, or the exit status after a message. */
int rio_cli_tree_open(const char *cmd, const struct rio_cli_tree_opts *o, const char *arg,
                      unsigned flags, struct rio_cli_target *t, struct rio_client **c);

#endif
