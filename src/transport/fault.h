/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fault filter (fault.c): a transport that wraps any other and injects
 * the faults of include/railio_mock.h into its op stream and metadata calls.
 * The registry stacks it over a transport whose URL carries `faults=` (even
 * empty) and over every mock:// transport. The public API (rio_mock_fault_add
 * and the rest) reaches it through the client; these take the transport
 * itself, for tests that drive an ops table without a client. Each returns
 * RIO_EINVAL (or does nothing) when t is not a fault filter.
 */
#ifndef RIO_TRANSPORT_FAULT_H
#define RIO_TRANSPORT_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "railio_mock.h"
#include "transport/transport.h"

/*
 * Wrap inner in a fault filter with the rules of spec ("SPEC;SPEC;...", the
 * syntax of rio_mock_fault_parse; "" or NULL: none yet). o gives the seed of
 * probabilistic rules. On success the filter owns inner (closing the filter
 * closes it); on failure inner is untouched and still the caller's.
 * Returns 0, RIO_EINVAL for a bad spec, or -ENOMEM.
 */
int rio__fault_stack(struct rio_transport *inner, const char *spec, const struct rio_options *o,
                     struct rio_transport **out);

/* The transport t wraps, or t itself when t is not a fault filter. */
struct rio_transport *rio__fault_inner(struct rio_transport *t);
/* Whether t is a fault filter. */
int rio__fault_is(const struct rio_transport *t);

int rio__fault_add(struct rio_transport *t, const struct rio_mock_fault *f);
void rio__fault_clear(struct rio_transport *t);
void rio__fault_heal(struct rio_transport *t);
/* The filter's own counters: ops_read, ops_write, faults_fired,
 * late_writes and inflight (ops accepted and not yet completed); the other
 * fields are left as they are. */
void rio__fault_counters(struct rio_transport *t, struct rio_mock_counters *out);

/* fault_spec.c: the fault language, apart from the filter (fuzzed on its
 * own: tests/fuzz/fuzz_fault_spec.c). A spec is shorter than this. */
#define RIO_FAULT_SPEC_MAX 256u
/* Whether f is a rule of the language whatever transport it goes to: kind,
 * op for that kind, path, chunk and probability in range. 0 or RIO_EINVAL. */
int rio__fault_spec_check(const struct rio_mock_fault *f);

/* Whether op (RIO_MOCK_OP_*) is a metadata op (meta_error's ops). */
static inline bool rio__fault_meta_op(int op)
{
    return op >= RIO_MOCK_OP_LOOKUP && op <= RIO_MOCK_OP_EXISTS;
}

/* Whether a rule of kind and op is about metadata calls: meta_error, or a
 * delay naming one of them (op=put_commit, ...). */
static inline bool rio__fault_meta_rule(int kind, int op)
{
    return kind == RIO_MOCK_META_ERROR || (kind == RIO_MOCK_DELAY && rio__fault_meta_op(op));
}
/* Whether the unsafe kinds (unfenced: it writes into the caller's buffer
 * after the op completed) may be added: only when the environment has
 * RIO_TEST_UNSAFE_FAULTS=1, which the tests that need them set. */
bool rio__fault_unsafe_allowed(void);

#endif
