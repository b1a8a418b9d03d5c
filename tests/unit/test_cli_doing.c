/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The CLI's JSON error objects carry "doing" (docs/cli.md, "JSON output"):
 * every value the code passes as the doing of a failure (the second
 * argument of rio_cli_fail, _sys, _st, _why, _rc and cp -r's cp_fail_why, a
 * string literal or either side of a ?:) must be one the page lists, so a
 * script can match on it. The sources are read as text.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "tlib.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    T_NOTNULL(f);
    size_t cap = 1 << 20;
    char *s = malloc(cap);
    T_NOTNULL(s);
    size_t n = fread(s, 1, cap - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* The line of docs/cli.md that documents the error object's members. */
static char *doing_row(char *doc)
{
    char *p = strstr(doc, "`doing` (when said:");
    T_NOTNULL(p);
    char *e = strchr(p, '\n');
    if (e)
        *e = '\0';
    return p;
}

/* Each string literal of the doing argument of every failure call in s
 * must be in row as `LITERAL`; the count checked. */
static unsigned check_file(const char *name, const char *s, const char *row)
{
    static const char *const calls[] = {"rio_cli_fail(",
                                        "rio_cli_fail_sys(",
                                        "rio_cli_fail_st(",
                                        "rio_cli_fail_why(",
                                        "rio_cli_fail_rc(",
                                        "cp_fail_why(",
                                        NULL};
    unsigned n = 0;
    for (const char *const *c = calls; *c; c++) {
        for (const char *p = s; (p = strstr(p, *c)); p++) {
            const char *a = p + strlen(*c);
            int depth = 0, arg = 0;
            /* The second argument: from the first top-level ',' to the next. */
            for (; *a && !(depth == 0 && (*a == ')' || *a == ';')); a++) {
                if (*a == '(')
                    depth++;
                else if (*a == ')')
                    depth--;
                else if (*a == ',' && depth == 0 && ++arg == 2)
                    break;
                else if (*a == '"' && arg == 1) {
                    const char *e = strchr(a + 1, '"');
                    T_NOTNULL(e);
                    char want[128];
                    snprintf(want, sizeof(want), "`%.*s`", (int)(e - a - 1), a + 1);
                    if (!strstr(row, want))
                        T_FAIL("src/cli/%s passes doing \"%.*s\": docs/cli.md does not list it",
                               name, (int)(e - a - 1), a + 1);
                    n++;
                    a = e;
                } else if (*a == '"') {
                    a = strchr(a + 1, '"'); /* another argument's string */
                    T_NOTNULL(a);
                }
            }
        }
    }
    return n;
}

TEST(every_doing_is_documented)
{
    char path[1024];
    t_harness_path(path, sizeof(path), "../../docs/cli.md");
    char *doc = slurp(path);
    const char *row = doing_row(doc);
    t_harness_path(path, sizeof(path), "../../src/cli");
    DIR *d = opendir(path);
    T_NOTNULL(d);
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 3 || strcmp(e->d_name + l - 2, ".c"))
            continue;
        char file[1400];
        snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
        char *s = slurp(file);
        n += check_file(e->d_name, s, row);
        free(s);
    }
    closedir(d);
    free(doc);
    T_GT(n, 10u); /* the calls were found */
}
