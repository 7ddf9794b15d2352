/* rocemud's limits and sizes, shared by every layer. Nothing here allocates or calls. */
#ifndef ROCEMU_DAEMON_LIMITS_H
#define ROCEMU_DAEMON_LIMITS_H

#include <stdint.h>

#include "emu/proto.h"
#include "wire/wire.h"

#define DEV_MAX_QP 16384          /* QPN slots; qpn = generation << 14 | slot */
#define DEV_QP_SLOT_BITS 14
#define DEV_TX_BATCH 64
#define DEV_RX_BUDGET 256         /* frames per wakeup; the rest waits for the next turn */
#define DEV_FRAME_MAX (WIRE_BASE6_LEN + WIRE_RETH_LEN + WIRE_IMMDT_LEN + 4096 + 8)
#define UD_GRH_LEN 40             /* the receive buffer's first bytes on a UD QP */
#define CLIENT_MAX_AH 32767       /* address handles per connection (rxe's max_ah) */
#define DEV_MAX_GIDS PROTO_MAX_GIDS  /* addresses one daemon serves: its GID table */
/* The largest UDP GSO frame sent (headers once, then the segments' payloads): every
 * daemon's receive ring takes one whole, whatever its link MTU. */
#define NET_GSO_FRAME_MAX 16256
#define NET_GSO_MAX_SEGS 64
/* Through a UDP socket the kernel cuts the frame before the interface (udptx.c), so no
 * ring has to take it whole: up to a UDP datagram's size. */
#define NET_UDP_GSO_FRAME_MAX 64000
/* Unacknowledged PSNs a requester may have out: a window that halves at each loss, down to
 * QP_MIN_WINDOW, and grows back by the PSNs acknowledged. A resend round sends again all
 * that was out after the loss, so the window a lossy path keeps is small; where nothing is
 * lost (RoCE's fabrics, veths, virtio) a long round trip needs the whole window: between
 * two TCG guests, 1 MiB WRITEs went 1.45x faster at 512 than at rxe's 128. */
#define QP_MAX_INFLIGHT 512
#define QP_MIN_WINDOW 32
/* What a requester waiting for READ responses counts against DEV_MAX_INFLIGHT at most:
 * the responses fill our ring, not the peer's, and a long READ must not take the whole
 * device's credit. */
#define QP_READ_CREDIT 128
#define QP_MAX_RD_ATOMIC 128       /* READs and atomics outstanding, each way (rxe's) */
#define QP_ACKREQ_EVERY 64
#define QP_BURST 16                /* packets a requester sends before the next QP's turn */
#define QP_UD_CNP_SLOTS 8          /* a UD QP's senders, hashed, each with its CNP interval */
/* Packets of waiting QPs sent per turn of the loop. A doorbell or a completion waits for
 * the turn in progress to end: at 256, a 64 B WRITE beside 31 streams took about a
 * millisecond a round trip, at 32 about 150 us, with the same goodput. */
#define DEV_SERVE_BUDGET 32
/* PSNs all RC requesters together may have unacknowledged (each counting for at most
 * QP_MAX_INFLIGHT): half a receive ring (rxring.c's 1024 frames), so no burst of ours
 * overflows a rocemu peer's ring, whatever the CPU does. What PFC is to a real fabric: the
 * lossless backstop under congestion control. */
#define DEV_MAX_INFLIGHT 512
#define DEV_CREDIT_WAKE (DEV_MAX_INFLIGHT - QP_ACKREQ_EVERY)
/* CQs plus QPs one connection may hold: each costs the daemon two descriptors. */
#define CLIENT_MAX_QUEUES 4096
#define LOOPQ_SLOTS 256

/* The daemon's counters, in the order of the stats reply (proto.h). */
struct dev_counters {
#define COUNTER_FIELD(name, help) uint64_t name;
	PROTO_COUNTERS(COUNTER_FIELD)
#undef COUNTER_FIELD
};

static inline uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

#endif
