/* SPDX-License-Identifier: Apache-2.0 */
/* file_util: the file:// tests' scratch directory and files (see file_util.h). */
#include "file_util.h"

const char *fu_dir = "";

const char *fu_mkdir(void)
{
    fu_dir = t_scratch_dir("railio-file");
    return fu_dir;
}

const char *fu_url(const char *fmt, ...)
{
    static char url[1024];
    char sfx[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sfx, sizeof(sfx), fmt, ap);
    va_end(ap);
    snprintf(url, sizeof(url), "file://%s%s", fu_dir, sfx);
    return url;
}

const char *fu_path(const char *name)
{
    static char p[1024];

    snprintf(p, sizeof(p), "%s/%s", fu_dir, name);
    return p;
}

static int tmp_count;
static int count_tmp(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (strstr(p + ftw->base, ".railio-tmp-"))
        tmp_count++;
    return 0;
}

int fu_tmp_files(void)
{
    tmp_count = 0;
    nftw(fu_dir, count_tmp, 16, FTW_PHYS);
    return tmp_count;
}
