/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_CLI_SPAWN_H
#define RIO_CLI_SPAWN_H

/* The child's side of starting railiod (`railio demo`) and the tests' peers
 * (tests/lib/tlib.c t_spawn). */

#include <fcntl.h>
#include <unistd.h>

/* In a child about to exec: its stdout and stderr into log when log is given
 * (kept as they are when it cannot be opened). */
static inline void rio_cli_log_to(const char *log)
{
    if (!log)
        return;
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
}

/* Runs bin with argv, its output into log (rio_cli_log_to); exits 127 when
 * bin cannot run. */
__attribute__((noreturn)) static inline void
rio_cli_exec_logged(const char *bin, const char *const *argv, const char *log)
{
    rio_cli_log_to(log);
    execv(bin, (char *const *)argv);
    _exit(127);
}

#endif
