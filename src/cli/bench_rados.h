/* SPDX-License-Identifier: Apache-2.0 */
/* railio bench rados://POOL: the rados:// transport against librados itself, same run. */
#ifndef RIO_CLI_BENCH_RADOS_H
#define RIO_CLI_BENCH_RADOS_H

/**
 * `railio bench rados://POOL[?conf=PATH&id=NAME] [options]`. argv[0] is the
 * URL, argv[1..] the options (--help lists them). For each object size and
 * each concurrency (chunk ops in flight), in one run on one cluster: railio
 * PUT (with and without the stream MD5) and GET, a plain librados aio
 * writer/reader of the same chunk objects at the same concurrency (no
 * hashing: the ceiling for what the library costs), `rados --striper
 * put/get` timed from outside, and the one-core MD5 and xxh3 rates. Prints
 * a table (or --json) of medians over --reps runs. Writes and removes
 * objects under "railio-bench/" in POOL. Returns the process exit code (0
 * ok, 1 failure, 2 usage). Blocking; a program, not thread-safe. Built only
 * with librados (RIO_HAVE_RADOS).
 */
int rio_cli_bench_rados(int argc, char **argv);

#endif
