/* SPDX-License-Identifier: Apache-2.0 */
/* railio bench file:///DIR: the file:// transport against fio, same run. */
#ifndef RIO_CLI_BENCH_FILE_H
#define RIO_CLI_BENCH_FILE_H

/**
 * `railio bench file:///DIR [options]`. argv[0] is the URL (a directory; URL
 * parameters such as ?direct= or ?sync= are passed on to the transport),
 * argv[1..] the options (--help lists them). Sweeps sequential and random
 * reads and writes over chunk sizes, queues and commands in flight per queue;
 * each row runs railio, then fio with the same block size, queues, depth and
 * direct flag in the same run, and prints railio/fio. Writes its files under
 * DIR and removes them. Returns the process exit code (0 ok, 1 failure,
 * 2 usage). Blocking; not thread-safe (it is a program).
 */
int rio_cli_bench_file(int argc, char **argv);

#endif
