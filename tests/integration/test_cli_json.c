/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file;net */
/* T_TIMEOUT 180 */
/*
 * railio --json (docs/cli.md "JSON output"): every line one object that a
 * JSON parser (python3's) reads, each with "schema":"railio/1" and a
 * "type"; a generation is a string that keeps all 64 bits (jq and
 * JavaScript round numbers above 2^53); errors are objects too, on stdout,
 * with the exit status in them; with the object's bytes on stdout (get
 * URL -) the result goes to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"

#define OBJ_SIZE (200 * 1000 + 3)

static const char *dir;

static void setup(void)
{
    if (!cli_have_python())
        T_SKIP("no python3 to parse JSON with");
    dir = cli_scratch("rio-json", NULL, OBJ_SIZE, 4);
}

/* python3 runs check (a Python expression over `o`, each object of the
 * JSON lines in DIR/FILE, and `objs`, all of them): whether every line
 * parsed and check held. */
static bool json_check(const char *file, const char *check)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys\n"
             "objs=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]\n"
             "assert objs, \"no object\"\n"
             "for o in objs:\n"
             "    assert o[\"schema\"]==\"railio/1\" and isinstance(o[\"type\"], str), o\n"
             "    assert (%s), o\n' %s/%s",
             check, dir, file);
    return system(cmd) == 0;
}

TEST(stat_put_get_cp_rm_objects)
{
    char text[4096], gen[64] = "";
    setup();
    T_EQ(cli_run(NULL, 0, "put --json file://%s/store/obj %s/in.bin > %s/put.json", dir, dir, dir),
         0);
    T_TRUE(json_check("put.json", "o[\"type\"]==\"put\" and o[\"key\"]==\"obj\" and "
                                  "o[\"size\"]==200003 and isinstance(o[\"generation\"], str) and "
                                  "o[\"stats\"][\"bytes\"]==200003"));
    /* The generation, exactly as the text output says it. */
    T_EQ(cli_run(text, sizeof(text), "stat file://%s/store/obj", dir), 0);
    const char *g = strstr(text, "generation: ");
    T_NOTNULL(g);
    T_EQ(sscanf(g, "generation: %63s", gen), 1);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/obj --json > %s/stat.json", dir, dir), 0);
    char check[512];
    snprintf(check, sizeof(check),
             "o[\"type\"]==\"object\" and o[\"generation\"]==\"%s\" and o[\"size\"]==200003 and "
             "o[\"chunks\"]>=1 and len(objs)==1",
             gen);
    T_TRUE(json_check("stat.json", check));
    T_EQ(cli_run(NULL, 0, "get --json file://%s/store/obj %s/o > %s/get.json", dir, dir, dir), 0);
    /* The time spent writing the file is the destination's. */
    T_TRUE(json_check("get.json", "o[\"type\"]==\"get\" and o[\"bytes\"]==200003 and "
                                  "o[\"stats\"][\"sink_ns\"]>0 and "
                                  "o[\"stats\"][\"source_ns\"]==0 and "
                                  "o[\"stats\"][\"verdict\"] in (\"network\", \"storage\", "
                                  "\"software\", \"sink\", \"none\")"));
    /* Bytes on stdout: the object goes to stderr. */
    T_EQ(cli_run(NULL, 0, "get --json file://%s/store/obj - > %s/bytes 2> %s/get2.json", dir, dir,
                 dir),
         0);
    T_TRUE(json_check("get2.json", "o[\"type\"]==\"get\" and o[\"bytes\"]==200003"));
    T_EQ(cli_run(NULL, 0, "cp --json file://%s/store/obj file://%s/store/obj2 > %s/cp.json", dir,
                 dir, dir),
         0);
    T_TRUE(json_check("cp.json", "o[\"type\"]==\"cp\" and o[\"bytes\"]==200003 and "
                                 "isinstance(o[\"generation\"], str) and \"put\" in o"));
    T_EQ(cli_run(NULL, 0, "rm --json file://%s/store/obj2 > %s/rm.json", dir, dir), 0);
    T_TRUE(json_check("rm.json", "o[\"type\"]==\"removed\" and o[\"key\"]==\"obj2\""));
    T_EQ(cli_run(NULL, 0, "version --json > %s/v.json", dir), 0);
    T_TRUE(json_check("v.json", "o[\"type\"]==\"version\" and \"file\" in o[\"backends\"]"));
}

/* An error is one object on stdout, nothing on stderr, its exit status in it;
 * a secret in the URL is not. */
TEST(errors_are_objects)
{
    setup();
    T_EQ(
        cli_run(NULL, 0, "stat --json file://%s/store/nope > %s/e.json 2> %s/e.err", dir, dir, dir),
        3);
    T_TRUE(json_check("e.json", "o[\"type\"]==\"error\" and o[\"error\"]==\"RIO_ENOTFOUND\" and "
                                "o[\"exit\"]==3 and o[\"command\"]==\"stat\" and len(objs)==1"));
    char path[128];
    snprintf(path, sizeof(path), "%s/e.err", dir);
    FILE *f = fopen(path, "r");
    T_NOTNULL(f);
    T_EQ(fgetc(f), EOF);
    fclose(f);
    int port = cli_dead_port();
    T_EQ(cli_run(NULL, 0, "get --json 'railio://127.0.0.1:%d/k?token=S3cret' %s/o > %s/e2.json",
                 port, dir, dir),
         5);
    T_TRUE(json_check("e2.json", "o[\"type\"]==\"error\" and o[\"exit\"]==5 and "
                                 "\"S3cret\" not in json.dumps(o) and \"***\" in o[\"target\"]"));
    /* With the bytes on stdout, an error (even at open) goes to stderr. */
    T_EQ(cli_run(NULL, 0, "get --json railio://127.0.0.1:%d/k - > %s/e4.out 2> %s/e4.json", port,
                 dir, dir),
         5);
    T_TRUE(json_check("e4.json", "o[\"type\"]==\"error\" and o[\"exit\"]==5"));
    snprintf(path, sizeof(path), "%s/e4.out", dir);
    f = fopen(path, "r");
    T_NOTNULL(f);
    T_EQ(fgetc(f), EOF);
    fclose(f);
    /* A refused URL option: usage, and the object says so. */
    T_EQ(cli_run(NULL, 0, "stat --json 'file://%s/store/k?op_timeout=0' > %s/e3.json 2>/dev/null",
                 dir, dir),
         2);
    T_TRUE(json_check("e3.json", "o[\"type\"]==\"error\" and o[\"exit\"]==2 and "
                                 "o[\"error\"]==\"RIO_EINVAL\""));
    /* stdout that cannot take the bytes: 9, and the object says 9 (get's
     * said 7, ENOSPC's; cat's was a line of text). */
    T_EQ(cli_run(NULL, 0, "put -q file://%s/store/obj %s/in.bin", dir, dir), 0);
    T_EQ(cli_run(NULL, 0, "get --json file://%s/store/obj - > /dev/full 2> %s/e5.json", dir, dir),
         9);
    T_TRUE(json_check("e5.json", "o[\"type\"]==\"error\" and o[\"exit\"]==9 and "
                                 "o[\"error\"]==\"ENOSPC\" and o[\"target\"]==\"stdout\""));
    T_EQ(cli_run(NULL, 0, "cat --json file://%s/store/obj > /dev/full 2> %s/e6.json", dir, dir), 9);
    T_TRUE(json_check("e6.json", "o[\"type\"]==\"error\" and o[\"exit\"]==9 and "
                                 "o[\"command\"]==\"cat\" and o[\"error\"]==\"ENOSPC\""));
}

/* A key is any bytes; JSON text is UTF-8. A key that is not UTF-8 prints
 * as valid JSON (U+FFFD for each stray byte) with its exact bytes in
 * key_hex: the reproducer printed the raw bytes, which no strict parser
 * reads. */
TEST(keys_not_utf8_stay_json)
{
    char odd[4096];
    setup();
    snprintf(odd, sizeof(odd), "%s/odd", dir);
    T_EQ(mkdir(odd, 0700), 0);
    T_EQ(cli_run(NULL, 0, "put -q \"$(printf 'file://%s/odd/b\\377\\376')\" %s/in.bin", dir, dir),
         0);
    T_EQ(cli_run(NULL, 0, "put -q file://%s/odd/caf\xc3\xa9 %s/in.bin", dir, dir), 0);
    T_EQ(cli_run(NULL, 0, "ls -r --json file://%s/odd/ > %s/ls.json", dir, dir), 0);
    T_TRUE(json_check("ls.json", "o[\"type\"]==\"object\" and len(objs)==2 and "
                                 "any(x[\"key\"]==\"b\\ufffd\\ufffd\" and "
                                 "x[\"key_hex\"]==\"62fffe\" for x in objs) and "
                                 "any(x[\"key\"]==\"caf\\u00e9\" and \"key_hex\" not in x "
                                 "for x in objs)"));
}
