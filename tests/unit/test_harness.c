/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the test harness itself (tests/lib): comparisons, failure
 * and skip exit codes, and the pattern helpers every data test relies on. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "railio.h"
#include "t.h"

TEST(mixed_type_comparisons)
{
    uint64_t big = UINT64_MAX;
    int64_t neg = -5;
    size_t n = 4096;
    unsigned u = 3;

    T_EQ(big, UINT64_MAX);
    T_GT(big, 1); /* unsigned: not -1 > 1 */
    T_LT(neg, 3);
    T_LT(neg, (int64_t)u); /* signed */
    T_EQ(n, 4096);
    T_GE(n, 0);
    T_NE(neg, 5);
    T_LE(-1, -1);
    T_EQ(RIO_EURL, -10002);
    T_EQ(0.5 + 0.25, 0.75);
    T_LT(0.1, 1);
    T_NEAR(0.1 + 0.2, 0.3, 1e-12);
    T_TRUE(n == 4096);
    T_FALSE(n == 4095);
    T_NULL(NULL);
    T_NOTNULL(&n);
    T_PTREQ(&n, &n);
    T_STREQ(NULL, NULL);
    T_STREQ("a", "a");
    T_MEMEQ("abc", "abc", 3);
    T_OK(0);
    T_OK(12);
    T_ERR(RIO_ECHECKSUM, RIO_ECHECKSUM);
}

static volatile int sink;

/* Run which(k) in a child with stderr silenced; its exit code. */
static int child_exit(void (*which)(int), int k)
{
    int status;
    pid_t pid = fork();

    T_GE(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0)
            dup2(fd, 2);
        which(k);
        _exit(0);
    }
    T_EQ(waitpid(pid, &status, 0), pid);
    T_TRUE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void failing(int k)
{
    int64_t neg = -1;
    uint64_t one = 1;
    char a[4] = "abc", b[4] = "abd";

    switch (k) {
    case 0:
        T_EQ(neg, 1);
        break;
    case 1:
        T_GT(one, 2);
        break;
    case 2:
        T_LT(neg, -2);
        break;
    case 3:
        T_MEMEQ(a, b, 4);
        break;
    case 4:
        T_STREQ(a, NULL);
        break;
    case 5:
        T_OK(RIO_EDEADLINE);
        break;
    case 6:
        T_ERR(-1, RIO_EURL);
        break;
    case 7:
        T_TRUE(sink == 1);
        break;
    case 8:
        T_NEAR(1.0, 1.1, 0.01);
        break;
    case 9:
        T_FAIL("explicit %d", k);
        break;
    default:
        T_NE(sink, 0); /* sink is 0: fails */
        break;
    }
}

TEST(failed_assertions_exit_with_fail_code)
{
    int k;

    for (k = 0; k <= 10; k++) {
        int code = child_exit(failing, k);
        if (code != T_EXIT_FAIL)
            T_FAIL("failing assertion %d: exit code %d, want %d", k, code, T_EXIT_FAIL);
    }
}

static void skipping(int k)
{
    T_SKIP("skip %d", k);
}

TEST(skip_exits_77)
{
    T_EQ(child_exit(skipping, 0), T_EXIT_SKIP);
}

/* The failure hook: a run of this program by itself (T_HARNESS_DEMO=1) with
 * one failing test; the hook prints in the runner process. */
static void demo_hook(const char *test)
{
    printf("hook after %s in %d\n", test, (int)getpid());
}

__attribute__((constructor)) static void demo_init(void)
{
    if (getenv("T_HARNESS_DEMO"))
        t_on_fail(demo_hook);
}

TEST(fails_in_the_demo_run)
{
    if (getenv("T_HARNESS_DEMO"))
        T_FAIL("demo failure in %d", (int)getpid());
}

TEST(fail_hook_runs_in_the_runner_after_a_failure)
{
    char cmd[256], *out;
    const char *f, *h;
    FILE *p;
    size_t n = 0;
    int child = 0, runner = 0;

    snprintf(cmd, sizeof(cmd),
             "T_HARNESS_DEMO=1 /proc/%d/exe fails_in_the_demo_run 2>&1; echo rc=$?", (int)getpid());
    out = calloc(1, 4096);
    T_NOTNULL(out);
    p = popen(cmd, "r");
    T_NOTNULL(p);
    while (n < 4095 && fgets(out + n, (int)(4096 - n), p))
        n = strlen(out);
    T_EQ(pclose(p), 0);
    /* The failure, then the hook, in the demo's runner process (not in the
     * forked test that failed), and the run fails. */
    f = strstr(out, "demo failure in ");
    h = strstr(out, "hook after fails_in_the_demo_run in ");
    T_NOTNULL(f);
    T_NOTNULL(h);
    T_TRUE(f < h);
    T_TRUE(strstr(out, "FAIL fails_in_the_demo_run") != NULL);
    T_TRUE(strstr(out, "rc=1") != NULL);
    child = atoi(f + strlen("demo failure in "));
    runner = atoi(h + strlen("hook after fails_in_the_demo_run in "));
    T_GT(child, 0);
    T_GT(runner, 0);
    T_NE(child, runner);
    free(out);
}

TEST(pattern_helpers)
{
    unsigned char a[1000], b[1000];

    t_fill_pattern(a, sizeof(a), 1);
    T_EQ(t_check_pattern(a, sizeof(a), 1), -1);
    T_NE(t_check_pattern(a, sizeof(a), 2), -1);
    T_PATTERN(a, sizeof(a), 1);
    /* A window is exactly the stream's bytes at that offset. */
    t_fill_pattern_at(b, 333, 1, 101);
    T_MEMEQ(b, a + 101, 333);
    T_EQ(t_check_pattern_at(a + 7, 500, 1, 7), -1);
    a[517] ^= 0x10;
    T_EQ(t_check_pattern(a, sizeof(a), 1), 517);
    T_EQ(t_check_pattern_at(a + 3, 600, 1, 3), 514);
    /* Other seeds differ almost everywhere. */
    t_fill_pattern(b, sizeof(b), 2);
    T_EQ(t_check_pattern(b, sizeof(b), 1), 0);
}
