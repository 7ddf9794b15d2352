/* Shared receive queues: a ring of receive WQEs the client produces, and a pipe for the
 * limit event. rq.c takes WQEs from it as from a QP's own receive ring. */

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "emu/daemon/transport/transport.h"

/* A shared receive queue: its ring, and a pipe for its limit event. */
struct srq *srq_create(struct owner *o, const struct proto_create_srq *req, int fds[2],
		       int *err)
{
	struct srq *srq = calloc(1, sizeof(*srq));
	struct ring_mem m;

	if (!srq) {
		*err = -ENOMEM;
		return NULL;
	}
	srq->owner = o;
	srq->entries = pow2_at_least(req->max_wr);
	srq->limit = req->srq_limit;
	srq->max_sge = req->max_sge;
	srq->stride = proto_rwqe_stride(srq->max_sge);
	srq->ring_bytes = proto_ring_bytes(srq->entries, srq->stride);
	*err = ring_take(o, RING_SRQ, srq->ring_bytes, &m);
	if (*err) {
		free(srq);
		return NULL;
	}
	srq->ctl = m.map;
	srq->ring = (uint8_t *)(srq->ctl + 1);
	srq->memfd = m.memfd;
	srq->event_fd = m.ends[1];
	srq->client_end = m.ends[0];
	fds[0] = m.memfd;
	fds[1] = m.ends[0];
	return srq;
}

int srq_destroy(struct srq *srq)
{
	if (srq->users)
		return -EBUSY;
	ring_give(srq->owner, RING_SRQ, &(struct ring_mem){ .map = srq->ctl,
			.bytes = srq->ring_bytes, .memfd = srq->memfd,
			.ends = { srq->client_end, srq->event_fd } });
	free(srq);
	return 0;
}
