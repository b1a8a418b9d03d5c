/* Helpers shared by the CLI's subcommands. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/url.h"

int rio_cli_parse_size(const char *s, uint64_t *out)
{
    /* The library's own rule, so a size reads the same on the command line
     * and in a URL: K/M/G are powers of 1024, KB/MB/GB powers of 1000. */
    return s && rio__parse_size(s, out) == 0 ? 0 : -1;
}

int rio_cli_parse_list(const char *s, uint64_t *out, unsigned max)
{
    char buf[256], *save = NULL, *tok;
    unsigned n = 0;

    if (!s || strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max || rio_cli_parse_size(tok, &out[n]) < 0 || out[n] == 0)
            return -1;
        n++;
    }
    return n > 0 ? (int)n : -1;
}

int rio_cli_sibling(const char *name, char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n < 0)
        return -errno;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/%s", self, name) >= cap)
        return -ENAMETOOLONG;
    return 0;
}

/* s as a JSON string literal, quotes included. */
void rio_cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}
