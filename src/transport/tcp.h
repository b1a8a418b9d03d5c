/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal entry points of the railio:// transport (tcp/) for tests and
 * benches: counters that show what the transport holds (request slots armed,
 * connections, dials, watchdog trips). Reach a client's transport with
 * rio__client_transport() (core/internal.h).
 */
#ifndef RIO_TRANSPORT_TCP_H
#define RIO_TRANSPORT_TCP_H

#include <stdint.h>

#include "transport/transport.h"

extern const struct rio_transport_ops rio__tcp_ops;

struct rio__tcp_counters {
    /* Request slots: one per op in flight (submitted, not yet completed) plus
     * one per cancelled op whose response is still owed (a tombstone). No
     * slot, receive buffer or window is armed ahead of an op. */
    uint64_t slots_armed;     /* held now */
    uint64_t slots_peak;      /* most held at once since open or the last reset */
    uint64_t slots_allocated; /* slot structs ever allocated (the pool only grows to the peak) */
    uint64_t conns_open;      /* data connections established now */
    uint64_t conns_peak;      /* most open at once since open or the last reset */
    uint64_t dials;           /* data connection dials started */
    uint64_t dial_failures;   /* dials that failed (connect, handshake, auth, timeout) */
    uint64_t conn_failures;   /* established data connections that failed */
    uint64_t watchdog_trips;  /* connections cut for making no progress */
    uint64_t tombstones;      /* cancelled ops whose response was drained, not landed */
    uint64_t requeued;        /* ops moved to a fresh connection after a deliberate close */
    uint64_t grace_closes;    /* connections closed: a tombstone's answer did not drain in time */
    /* A frame that breaks the protocol (a header that does not decode, an
     * answer to no outstanding request or a second one, the wrong opcode or
     * length) poisons its connection: closed, its ops fail with -EPROTO,
     * which the engine retries like a reset. A control connection whose
     * exchange failed is closed; the next request (the engine's try again,
     * a request on a reused connection found closed, a commit asked again
     * by upload id, a greeting redone) dials a fresh one. */
    uint64_t poisoned;    /* data connections closed for a protocol violation */
    uint64_t ctl_retries; /* fresh control connections dialled after a failed exchange */
    /* Metadata calls that overlap share rounds on the control connection:
     * one write of every queued request, their answers read back to back. */
    uint64_t ctl_rounds;     /* rounds sent */
    uint64_t ctl_requests;   /* requests sent in them */
    uint64_t ctl_round_peak; /* most requests in one round */
    uint64_t ctl_queued;     /* requests waiting for a round now (every member) */
    /* Path state. A failed dial reports its path down to the engine
     * (rio__t_path_event), which cools it and moves its chunks; a path's
     * ops only travel on its own connection. A dial the server cuts while
     * another connection of the rail is up (its connection limit) backs off
     * alone and dials again in the background; a dial that succeeds after
     * the path was reported down reports it up. */
    uint64_t dials_refused; /* dials cut by the server while the rail had a connection */
    uint64_t paths_down;    /* connections whose path is reported down now */
    uint64_t reported_down; /* RIO_PATH_DOWN reports made */
    uint64_t grow_dials;    /* background dials of down paths */
    uint64_t regrown;       /* down paths back up (RIO_PATH_UP reports made) */
    /* Payload bytes of ops answered successfully on the connections of
     * path p (every member's): what the engine's per-path stats must show. */
    uint64_t path_bytes[RIO_MAX_PATHS];
    uint64_t bytes_in, bytes_out; /* on data connections, headers included */
    /* PUTs of one chunk sent as one PUT_ONE frame (open, data and commit),
     * and those refused at submit by a connection whose server lacks it. */
    uint64_t put_one;
    uint64_t put_one_refused;
    /* GETs sent as one GET_ONE frame (lookup and bytes), and those refused
     * at submit by a connection whose server lacks it. */
    uint64_t get_one;
    uint64_t get_one_refused;
};

/* Snapshot of t's counters. RIO_EINVAL if t is not a railio:// transport. */
int rio__tcp_counters(struct rio_transport *t, struct rio__tcp_counters *out);
/* Restart slots_peak and conns_peak at the current values. */
void rio__tcp_reset_peaks(struct rio_transport *t);
/* The member (index in the URL's authority) that owns key; -1 if t is not railio://. */
int rio__tcp_owner(struct rio_transport *t, const char *key);

#endif
