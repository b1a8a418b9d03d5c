/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio fsck rados://POOL: find and remove chunk objects no head refers to
 * (rio_fsck; what an orphan is and why an upload in progress keeps its
 * chunks: docs/rados.md "Orphans and fsck"). Prints one line per orphan
 * with -v, and a summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/url.h"
#include "railio.h"

static const char fsck_usage[] =
    "usage: railio fsck [-q] [-v] [--json] [--dry-run] [--grace DURATION] [--index]\n"
    "                   rados://POOL[?opts]\n"
    "  Find the chunk objects no head refers to (left by uploads that were killed, that\n"
    "  lost a race, or whose cleanup failed) and remove them. A generation whose newest\n"
    "  chunk was written within the grace may be an upload still running: it is kept.\n"
    "  --dry-run          remove nothing; count (and with -v name) what would go\n"
    "  --grace DURATION   how long an upload may go without writing a chunk: 30s, 10m,\n"
    "                     1h (the default), 0 (none: uploads in progress lose chunks)\n"
    "  --index            give the pool a key index if it has none (listings read pages\n"
    "                     of names from it instead of scanning the pool); a pool with\n"
    "                     one has it checked by every fsck: heads without an entry get\n"
    "                     one, entries of no head older than the grace (10m at least) go\n"
    "  -v                 one line per orphan: removed, would remove, young, raced, failed\n";

static const char *verdict_name(int v)
{
    switch (v) {
    case RIO_FSCK_REMOVED:
        return "removed";
    case RIO_FSCK_WOULD_REMOVE:
        return "would-remove";
    case RIO_FSCK_YOUNG:
        return "young";
    case RIO_FSCK_RACED:
        return "raced";
    default:
        return "failed";
    }
}

/* One orphan: a JSON object or a line, with -v only. */
static void fsck_item(void *arg, const struct rio_fsck_item *it)
{
    const struct rio_cli *cl = arg;

    if (!cl->verbose)
        return;
    if (cl->json) {
        rio_cli_json_begin(stdout, "fsck_chunk");
        rio_cli_json_kstr(stdout, "verdict", verdict_name(it->verdict));
        rio_cli_json_kstr(stdout, "pool", it->where);
        rio_cli_json_kstr(stdout, "name", it->name);
        rio_cli_json_kstr(stdout, "key", it->key);
        rio_cli_json_kgen(stdout, "generation", it->generation);
        rio_cli_json_ku64(stdout, "bytes", it->bytes);
        char t[64];
        rio_cli_fmt_time(t, sizeof(t), it->mtime_ns, true);
        rio_cli_json_kstr(stdout, "mtime", t);
        if (it->err)
            rio_cli_json_kstr(stdout, "error", rio_errname(it->err));
        rio_cli_json_end(stdout);
        return;
    }
    /* Names come from the pool: a control byte must not reach the terminal. */
    char *pool = strdup(it->where), *name = strdup(it->name);
    if (pool && name)
        printf("%s %s %s %llu%s%s\n", verdict_name(it->verdict), rio_cli_ctl_mask(pool),
               rio_cli_ctl_mask(name), (unsigned long long)it->bytes, it->err ? " " : "",
               it->err ? rio_errname(it->err) : "");
    free(pool);
    free(name);
}

/* --grace: a duration with its unit (a bare number is refused, but 0). */
static int parse_grace(const char *s, uint64_t *ns)
{
    size_t n = strspn(s, "0123456789.");
    if (!strcmp(s, "0")) {
        *ns = 0;
        return 0;
    }
    if (n == 0 || s[n] == '\0')
        return -1;
    return rio__parse_duration_ns(s, ns) < 0 ? -1 : 0;
}

static const char *const index_states[] = {"none", "building", "ready"};

static void summary(const struct rio_cli *cl, const struct rio_fsck_report *r, bool dry, bool index,
                    const char *grace)
{
    char freed[32];

    if (cl->json) {
        rio_cli_json_begin(stdout, "fsck_summary");
        rio_cli_json_kstr(stdout, "mode", dry ? "dry-run" : "remove");
        rio_cli_json_kstr(stdout, "grace", grace);
        rio_cli_json_ku64(stdout, "heads", r->heads);
        rio_cli_json_ku64(stdout, "chunks", r->chunks);
        rio_cli_json_ku64(stdout, "orphans", r->orphans);
        rio_cli_json_ku64(stdout, dry ? "would_remove" : "removed", r->removed);
        rio_cli_json_ku64(stdout, dry ? "bytes_would_free" : "bytes_freed", r->bytes_freed);
        rio_cli_json_ku64(stdout, "young", r->young);
        rio_cli_json_ku64(stdout, "raced", r->raced);
        rio_cli_json_ku64(stdout, "errors", r->errors);
        rio_cli_json_ku64(stdout, "foreign", r->foreign);
        rio_cli_json_ku64(stdout, "index_entries", r->index_entries);
        rio_cli_json_ku64(stdout, dry ? "index_would_add" : "index_added", r->index_added);
        rio_cli_json_ku64(stdout, dry ? "index_would_remove" : "index_removed", r->index_removed);
        rio_cli_json_ku64(stdout, "index_built", r->index_built);
        rio_cli_json_kstr(stdout, "index", index_states[r->index_state < 3 ? r->index_state : 0]);
        rio_cli_json_end(stdout);
        return;
    }
    if (cl->quiet)
        return;
    rio_cli_human(freed, sizeof(freed), (double)r->bytes_freed);
    printf("fsck: %llu heads, %llu chunks scanned, %llu orphans: %llu %s (%s), %llu skipped as "
           "too young (grace %s), %llu raced, %llu errors; %llu foreign objects left alone\n",
           (unsigned long long)r->heads, (unsigned long long)r->chunks,
           (unsigned long long)r->orphans, (unsigned long long)r->removed,
           dry ? "would be removed" : "removed", freed, (unsigned long long)r->young, grace,
           (unsigned long long)r->raced, (unsigned long long)r->errors,
           (unsigned long long)r->foreign);
    if (r->index_entries || r->index_added || r->index_removed || r->index_built)
        printf("fsck: key index%s: %llu entries read, %llu heads without one %s, %llu entries "
               "of no head %s\n",
               r->index_built ? " built" : "", (unsigned long long)r->index_entries,
               (unsigned long long)r->index_added, dry ? "(would be given one)" : "given one",
               (unsigned long long)r->index_removed, dry ? "would be removed" : "removed");
    if (index && dry && r->index_state == 0)
        printf("fsck: key index: none; --index without --dry-run builds one (each of the %llu "
               "heads given its entry)\n",
               (unsigned long long)r->heads);
    else if (r->index_state == 1 && !r->index_built)
        printf("fsck: key index: still being built (an fsck --index stopped before its end): "
               "run fsck --index again\n");
}

int rio_cli_fsck(const char *cmd, int argc, char **argv)
{
    int dry = 0, index = 0;
    const char *grace = NULL;
    const struct rio_cli_opt opts[] = {
        {"--dry-run", 0, NULL, &dry, NULL},
        {"--index", 0, NULL, &index, NULL},
        {"--grace", 0, "DURATION", NULL, &grace},
        {0},
    };
    struct rio_cli cl;
    int rc = rio_cli_parse(&cl, cmd, fsck_usage, opts, 1, 1, argc, argv);

    if (rc >= 0)
        return rc;
    struct rio_fsck_args a = {.each = fsck_item, .arg = &cl};
    if (dry)
        a.flags |= RIO_FSCK_DRY_RUN;
    if (index)
        a.flags |= RIO_FSCK_INDEX;
    if (grace) {
        if (parse_grace(grace, &a.grace_ns) < 0)
            return rio_cli_usage_error(&cl, "--grace '%s' is not a duration (30s, 10m, 1h, 0)",
                                       grace);
        a.flags |= RIO_FSCK_GRACE;
    }
    const char *url = cl.pos[0];
    if (strncmp(url, "rados://", 8) != 0)
        return rio_cli_usage_error(&cl, "only rados:// URLs have chunk objects to check");
    /* Below the writers' stall_check (default 60 s), an upload that stalls
     * longer than the grace loses chunks without its commit noticing. */
    if (grace && !dry && a.grace_ns == 0 && !cl.quiet && !cl.json)
        fprintf(stderr, "railio fsck: --grace 0: uploads in progress lose their chunks\n");
    else if (grace && !dry && a.grace_ns < 60ull * 1000000000ull && !cl.quiet && !cl.json)
        fprintf(stderr,
                "railio fsck: a grace under 60 s: an upload that stalls longer than %s loses "
                "its chunks (docs/rados.md, \"Orphans and fsck\")\n",
                grace);

    struct rio_client *c;
    char *key = NULL;
    if ((rc = rio_cli_open(&cl, url, RIO_CLI_KEY_OPTIONAL, &c, &key)))
        return rc;
    if (key && *key) {
        rio_client_destroy(c);
        free(key);
        return rio_cli_usage_error(&cl, "checks a whole pool, and '%s' names a key", url);
    }
    free(key);

    struct rio_fsck_report r;
    int ret = rio_fsck(c, &a, &r);
    if (ret < 0) {
        rc = rio_cli_fail(&cl, "checking", url, ret);
        rio_client_destroy(c);
        return rc;
    }
    rio_client_destroy(c);
    summary(&cl, &r, dry, index, grace ? grace : "1h");
    if (r.errors) {
        if (!cl.json)
            fprintf(stderr, "railio fsck: %llu orphans could not be examined or removed%s\n",
                    (unsigned long long)r.errors, cl.verbose ? "" : " (-v names them)");
        return RIO_CLI_EXIT_FAIL;
    }
    return 0;
}
