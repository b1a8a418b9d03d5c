/* SPDX-License-Identifier: Apache-2.0 */
/* railio bench s3://BUCKET: the s3:// transport against curl and aws s3 cp, same run. */
#ifndef RIO_CLI_BENCH_S3_H
#define RIO_CLI_BENCH_S3_H

/**
 * `railio bench s3://BUCKET[?endpoint=...&knobs] [options]`. argv[0] is the
 * URL (the bucket must exist; credentials and endpoint as for any s3:// URL),
 * argv[1..] the options (--help lists them). For each object size: a
 * single-stream curl PUT and GET (and `aws s3 cp` when installed) of the same
 * bytes as the ceiling, then railio PUT and GET at each depth (ranges in
 * flight per path), printing MB/s and railio/curl. Writes objects under
 * "railio-bench/" in the bucket and removes them. Returns the process exit
 * code (0 ok, 1 failure, 2 usage). Blocking; not thread-safe (a program).
 */
int rio_cli_bench_s3(int argc, char **argv);

#endif
