/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transport-level entry points of the mock (mock.c). The public API in
 * include/railio_mock.h reaches a client's transport through the client; these
 * take the transport itself, for tests that drive the ops table without a
 * client (tests/unit/test_mock_transport.c). Each accepts the mock or the
 * fault filter stacked over it (transport/fault.h), and returns RIO_EINVAL
 * (or does nothing) for any other transport. Faults are the filter's.
 */
#ifndef RIO_TRANSPORT_MOCK_H
#define RIO_TRANSPORT_MOCK_H

#include <stdint.h>

#include "railio_mock.h"
#include "transport/transport.h"

extern const struct rio_transport_ops rio__mock_ops;

/* Whether t is a mock transport (not through a filter). */
int rio__mock_is(const struct rio_transport *t);
int rio__mock_set_path(struct rio_transport *t, unsigned path, double rate_bps, uint64_t lat_ns);
/* The shared storage service's rate (disk=, bytes/s, 0 unlimited) and its
 * contention (contend=) from now on. */
int rio__mock_set_service(struct rio_transport *t, double disk_bps, double contend);
/* The mock's counters; the filter's fields (ops, faults, inflight) are its
 * own here: rio_mock_counters overlays the filter's. */
void rio__mock_counters(struct rio_transport *t, struct rio_mock_counters *out);
/* The next n reaps (err < 0) return err at once and deliver nothing; what
 * finished meanwhile is delivered by the first reap after them. n = 0 ends
 * it. reaps_failed counts the reaps that failed so. */
void rio__mock_reap_fail(struct rio_transport *t, uint64_t n, int err);
uint64_t rio__mock_reaps_failed(struct rio_transport *t);
/* Submits the mock answered -EAGAIN (a path at its depth_cap, which open
 * publishes as the transport's max_depth). */
uint64_t rio__mock_refused(struct rio_transport *t);
int rio__mock_desc_set(struct rio_transport *t, const struct rio_desc *d, uint64_t xxh_len);
/*
 * The fault filter's GENCHANGE hook: replace key's object of generation gen
 * by a new generation of the same geometry whose bytes are the old ones XOR
 * 0x5A. Returns 0 (also when the object is already gone or changed),
 * -ENOMEM, or RIO_EINVAL when t is not a mock.
 */
int rio__mock_genchange(struct rio_transport *t, const char *key, uint64_t gen);

#endif
