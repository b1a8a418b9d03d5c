/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a fuzz target (tests/fuzz/fuzz_<name>.c) may define besides
 * LLVMFuzzerTestOneInput. See docs/internals/testing.md.
 */
#ifndef RIO_TESTS_FUZZ_H
#define RIO_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Optional. Built-in seeds: call run() once per seed. The replay program
 * (replay_main.c) runs them and deterministic mutations of them. */
void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len));

#endif
