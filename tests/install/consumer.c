/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program built outside the tree against an installed railio (by
 * tests/install/test_install.sh, with pkg-config and with find_package,
 * against the shared and the static library). It prints the library's
 * version and backends, round-trips 1 MiB through mock:// and, given a URL,
 * through railio://, then fails if the process has librados or libcurl
 * mapped: a program that names neither rados:// nor s3:// loads neither.
 *
 *   consumer [railio://HOST:PORT]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <railio.h>

#define SIZE (1u << 20)

static int round_trip(const char *url)
{
    struct rio_client *c = NULL;
    char *in = malloc(SIZE), *out = malloc(SIZE);
    int64_t got;
    unsigned i;
    int ret;

    if (!in || !out) {
        ret = -1;
        goto out;
    }
    for (i = 0; i < SIZE; i++)
        in[i] = (char)(i * 7 + 3);
    ret = rio_client_new(url, NULL, &c);
    if (ret < 0) {
        fprintf(stderr, "consumer: %s: %s\n", url, rio_strerror(ret));
        goto out;
    }
    ret = rio_put(c, "consumer/obj", in, SIZE, NULL, NULL);
    if (ret < 0) {
        fprintf(stderr, "consumer: put %s: %s\n", url, rio_strerror(ret));
        goto out;
    }
    got = rio_get(c, "consumer/obj", out, SIZE, NULL);
    if (got != SIZE || memcmp(in, out, SIZE) != 0) {
        fprintf(stderr, "consumer: get %s: %lld bytes, %s\n", url, (long long)got,
                got < 0 ? rio_strerror((int)got) : "content differs");
        ret = -1;
        goto out;
    }
    printf("round trip %s: %u bytes\n", url, SIZE);
    ret = 0;
out:
    rio_client_destroy(c);
    free(in);
    free(out);
    return ret;
}

static int maps_has(const char *lib)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");

    if (!f)
        return 1;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    printf("railio %s (header %d.%d.%d), backends: %s\n", rio_version(), RIO_VERSION_MAJOR,
           RIO_VERSION_MINOR, RIO_VERSION_PATCH, rio_backends());
    if (!rio_has_scheme("mock") || !rio_has_scheme("railio"))
        return 1;
    if (round_trip("mock://consumer") < 0)
        return 1;
    if (argc > 1 && round_trip(argv[1]) < 0)
        return 1;
    if (maps_has("librados") || maps_has("libcurl")) {
        fprintf(stderr, "consumer: librados or libcurl is mapped\n");
        return 1;
    }
    printf("librados and libcurl not loaded\n");
    return 0;
}
