/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/fault_spec.c src/core/url.c src/core/errors.c src/core/alloc.c */
/* FUZZ_SOURCES src/core/secret.c */
/*
 * libFuzzer target for the fault language (src/transport/fault_spec.c):
 * `faults=` is accepted on every URL, so a spec is whatever a user pasted.
 * The input, terminated, is parsed as one spec. A spec the parser accepts
 * must be a rule the filter can hold: a known kind, an op of that kind,
 * path and chunk -1 or in range, an error code that is negative (0: the
 * default) and a probability in [0, 1]; and only specs shorter than
 * RIO_FAULT_SPEC_MAX are accepted. The checks abort otherwise.
 * Seeds: tests/fuzz/corpus/fault_spec/.
 */
#include <string.h>

#include "fuzz.h"
#include "railio.h"
#include "railio_mock.h"
#include "transport/fault.h"

#define CHECK FUZZ_CHECK

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rio_mock_fault f;
    char *s;

    if (size > 4096)
        return 0;
    s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    memset(&f, 0xA5, sizeof(f));
    if (rio_mock_fault_parse(s, &f) == 0) {
        CHECK(strlen(s) < RIO_FAULT_SPEC_MAX);
        CHECK(rio__fault_spec_check(&f) == 0);
        CHECK(f.kind >= RIO_MOCK_DISCONNECT && f.kind <= RIO_MOCK_UNFENCED);
        CHECK(f.path >= -1 && f.path < RIO_MAX_PATHS);
        CHECK(f.chunk >= -1);
        CHECK(f.error <= 0);
        CHECK(f.probability >= 0 && f.probability <= 1);
    } else {
        /* A refused spec leaves the output as it was. */
        struct rio_mock_fault z;
        memset(&z, 0xA5, sizeof(z));
        CHECK(memcmp(&f, &z, sizeof(f)) == 0);
    }
    free(s);
    return 0;
}
