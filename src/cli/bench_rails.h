/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench --rails-from-harness N --rate R[,R...]: railio:// over veth
 * rails built by tests/harness/rails.sh, every row against iperf3 over the
 * same rails measured in the same run (bench_rails.c).
 */
#ifndef RIO_CLI_BENCH_RAILS_H
#define RIO_CLI_BENCH_RAILS_H

/** Whether argv asks for the rails bench (has --rails-from-harness). */
int rio_cli_bench_rails_wanted(int argc, char **argv);

/**
 * Run the rails bench; argv are the arguments after "bench". Needs root
 * (network namespaces); returns the process exit code: 0 every row
 * verified, 1 a row or the setup failed, 2 bad arguments, 77 this machine
 * cannot host rails (not root, no namespaces), 130 interrupted (the rails
 * are torn down first, whatever ends the run).
 */
int rio_cli_bench_rails(int argc, char **argv);

#endif
