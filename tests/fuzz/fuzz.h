/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a fuzz target (tests/fuzz/fuzz_<name>.c) may define besides
 * LLVMFuzzerTestOneInput. See docs/internals/testing.md.
 */
#ifndef RIO_TESTS_FUZZ_H
#define RIO_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A property the target checks: a failure aborts, which the fuzzer reports. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Optional. Built-in seeds: call run() once per seed. The replay program
 * (replay_main.c) runs them and deterministic mutations of them. */
void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len));

#endif
