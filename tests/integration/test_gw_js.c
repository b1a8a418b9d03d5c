/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 180 */
/*
 * railiod's S3 gateway under the JavaScript S3 clients Node.js applications
 * use: the AWS SDK for JavaScript v3 (@aws-sdk/client-s3 with lib-storage's
 * Upload and the presigner: tests/integration/js/sdk.mjs, some fifty calls,
 * its 2025 checksum defaults, conditional writes, multipart with
 * UploadPartCopy and a composite CRC32, presigned GET and PUT, object
 * tags (Upload's tags, PutObject's Tagging, the tagging calls), a
 * bucket's CORS rules and a preflight by fetch) and the
 * MinIO SDK (js/minio.mjs: its own multipart, listings, presigned URLs and
 * a POST upload), each against a gateway over file:// with keys, every
 * byte compared by the scripts. The npm packages are installed by
 * scripts/install-deps.sh into $RIO_NPM_DIR (default ~/.cache/railio/npm)
 * where Node.js 20 or newer is there; without them the tests skip.
 */
#include <limits.h>

#include "gw_util.h"

#define AK "AKJSCLIENT1"
#define SK "js-client-secret/0123456789"

/* Run js/NAME.mjs against a fresh gateway: its output in scratch file
 * "out", which must end with "all ok". */
static void run_script(const char *name, const char *pkg)
{
    struct gw g;
    char keys[256], nm[PATH_MAX], src[PATH_MAX], url[256];
    const char *npm = getenv("RIO_NPM_DIR"), *home = getenv("HOME"),
               *xdg = getenv("XDG_CACHE_HOME");
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("command -v node >/dev/null && "
             "[ \"$(node -p 'process.versions.node.split(\".\")[0]')\" -ge 20 ]") != 0)
        T_SKIP("Node.js 20 or newer is not installed");
    if (npm && *npm)
        snprintf(nm, sizeof(nm), "%s/node_modules", npm);
    else if (xdg && *xdg)
        snprintf(nm, sizeof(nm), "%s/railio/npm/node_modules", xdg);
    else
        snprintf(nm, sizeof(nm), "%s/.cache/railio/npm/node_modules", home ? home : "/root");
    if (t_sh("test -f '%s/%s/package.json'", nm, pkg) != 0)
        T_SKIP("%s is not installed in %s (scripts/install-deps.sh test)", pkg, nm);
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    const char *dir = t_scratch_dir("gw-js");
    snprintf(url, sizeof(url), "file://%s/store", dir);
    T_EQ(t_sh("mkdir -p %s/store", dir), 0);
    gw_start(&g, url, extra);
    /* ES modules resolve their imports beside the script: it runs from a
     * directory whose node_modules is the installed one. */
    char rel[64];
    snprintf(rel, sizeof(rel), "../integration/js/%s.mjs", name);
    t_harness_path(src, sizeof(src), rel); /* the source tree's tests/integration/js/ */
    T_EQ(t_sh("cp '%s' %s/%s.mjs && ln -sfn '%s' %s/node_modules", src, g.dir, name, nm, g.dir), 0);
    T_EQ(t_sh("cd %s && NODE_NO_WARNINGS=1 EP=%s AK=%s SK='%s' BUCKET=jsb DIR=%s "
              "timeout 150 node %s.mjs > out 2>&1 || { cat out >&2; exit 1; }",
              g.dir, g.url, AK, SK, g.dir, name),
         0);
    T_TRUE(gw_has(&g, "out", "all ok"));
    gw_stop(&g);
}

TEST(aws_sdk_js_v3)
{
    run_script("sdk", "@aws-sdk/client-s3");
}

TEST(minio_js)
{
    run_script("minio", "minio");
}
