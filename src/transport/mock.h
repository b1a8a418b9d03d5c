/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transport-level entry points of the mock (mock.c). The public test API in
 * include/railio_mock.h reaches a client's transport through the client; these
 * take the transport itself, for tests that drive the ops table without a
 * client (tests/unit/test_mock_transport.c). Each returns RIO_EINVAL (or does
 * nothing) when t is not a mock transport.
 */
#ifndef RIO_TRANSPORT_MOCK_H
#define RIO_TRANSPORT_MOCK_H

#include <stdint.h>

#include "railio_mock.h"
#include "transport/transport.h"

extern const struct rio_transport_ops rio__mock_ops;

int rio__mock_fault_add(struct rio_transport *t, const struct rio_mock_fault *f);
void rio__mock_faults_clear(struct rio_transport *t);
void rio__mock_heal(struct rio_transport *t);
int rio__mock_set_path(struct rio_transport *t, unsigned path, double rate_bps, uint64_t lat_ns);
void rio__mock_counters(struct rio_transport *t, struct rio_mock_counters *out);
/* The next n reaps (err < 0) return err at once and deliver nothing; what
 * finished meanwhile is delivered by the first reap after them. n = 0 ends
 * it. reaps_failed counts the reaps that failed so. */
void rio__mock_reap_fail(struct rio_transport *t, uint64_t n, int err);
uint64_t rio__mock_reaps_failed(struct rio_transport *t);
int rio__mock_desc_set(struct rio_transport *t, const struct rio_desc *d, uint64_t xxh_len);

#endif
