/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 60 */
/* T_LABELS unit */
/*
 * A transport's size option refused at rio_client_new names itself and the
 * range it takes, through the one parser (rio__opt_size): mock:// disk= and
 * rate=, file:// bounce=; and a count option (rio__opt_uint): mock://
 * depth_cap=, railio:// conns=. s3:// is in test_s3_faults
 * (refused_option_names_itself); rados:// max_object= is read after the
 * cluster connects (test_rados).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "railio.h"
#include "t.h"
#include "tlib.h"

TEST(mock_size_option_refused_names_itself)
{
    struct rio_options o;

    t_opts(&o, T_PROFILE_ENGINE);
    t_client_refused("mock://opt?disk=fast", &o, "railio: disk=fast: expected a size (e.g. 64K");
    t_client_refused("mock://opt?disk=16384P", &o, "railio: disk=16384P: expected a size");
    t_client_refused("mock://opt?paths=2&rate=1G,x", &o, "railio: rate=1G,x: expected a size");
    t_client_refused("mock://opt?faults=short:bytes=lots", &o,
                     "railio: faults=: \"short:bytes=lots\" is not a fault rule");
    t_client_refused("mock://opt?depth_cap=0", &o,
                     "railio: depth_cap=0: expected a whole number from 1 to ");
    /* An option given twice: the first was taken, the others dropped
     * without a word. */
    t_client_refused("mock://opt?chunk=4M&chunk=8M", &o, "railio: URL option 'chunk' given twice");
    t_client_refused("mock://opt?rate=1G&paths=1&rate=2G", &o, "URL option 'rate' given twice");
    struct rio_client *c = NULL;
    T_OK(rio_client_new("mock://opt?paths=2&rate=1G,500M&disk=2G&depth_cap=8", &o, &c));
    t_close(c, -1);
}

TEST(file_size_option_refused_names_itself)
{
    const char *dir;
    char url[512];
    struct rio_options o;

    if (!rio_has_scheme("file"))
        T_SKIP("file:// is not built in");
    dir = t_scratch_dir("railio-opt");
    t_opts(&o, T_PROFILE_ENGINE);
    snprintf(url, sizeof(url), "file://%s?bounce=5000", dir);
    t_client_refused(url, &o,
                     "railio: bounce=5000: expected a size (e.g. 64K, 1M) in steps of 4096 up to "
                     "67108864");
    snprintf(url, sizeof(url), "file://%s?bounce=128M", dir);
    t_client_refused(url, &o, "railio: bounce=128M: expected a size");
    snprintf(url, sizeof(url), "file://%s?bounce=256K", dir);
    struct rio_client *c = NULL;
    T_OK(rio_client_new(url, &o, &c));
    t_close(c, -1);
}

/* railio:// refuses conns= before it dials (nothing listens on port 1). */
TEST(tcp_count_option_refused_names_itself)
{
    struct rio_options o;

    t_opts(&o, T_PROFILE_TCP);
    t_client_refused("railio://127.0.0.1:1?conns=0", &o,
                     "railio: conns=0: expected a whole number from 1 to ");
    t_client_refused("railio://127.0.0.1:1?conns=lots", &o,
                     "railio: conns=lots: expected a whole number");
    /* Each of these said only "invalid argument" (the token file's reason,
     * computed, was dropped). */
    char path[256], url[512];
    snprintf(path, sizeof(path), "%s/empty-token", t_scratch_dir("railio-opt"));
    t_write_file(path, "", 0);
    snprintf(url, sizeof(url), "railio://127.0.0.1:1?token_file=%s", path);
    t_client_refused(url, &o, "railio: token_file=");
    t_client_refused(url, &o, ": empty");
    struct rio_client *c = NULL;
    T_ERR(rio_client_new("railio://127.0.0.1:1?token_file=/nonexistent/tok", &o, &c), -ENOENT);
    T_NOTNULL(strstr(rio_error_detail(), "token_file=/nonexistent/tok: No such file"));
    t_client_refused("railio://127.0.0.1:1?token=", &o, "railio: token=***: must be 1 to ");
    t_client_refused("railio://127.0.0.1:1?token=SECRET&token_file=/x", &o, "not both");
    t_client_refused("railio://127.0.0.1:1?connect_timeout=0", &o,
                     "railio: connect_timeout=0: must be more than 0");
    t_client_refused("railio://127.0.0.1:1?cancel_grace=0", &o,
                     "railio: cancel_grace=0: must be more than 0");
    t_client_refused("railio://127.0.0.1:1?dial_backoff=5s&dial_backoff_cap=1s", &o,
                     "railio: dial_backoff=5s: 5000 ms must not exceed dial_backoff_cap");
    setenv("RIO_TOKEN_FILE", path, 1);
    t_client_refused("railio://127.0.0.1:1", &o, "railio: RIO_TOKEN_FILE=");
    unsetenv("RIO_TOKEN_FILE");
}
