/* Shared receive queues: a ring of receive WQEs the client produces, and a pipe for the
 * limit event. rq.c takes WQEs from it as from a QP's own receive ring. */

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/transport/transport.h"

/* A shared receive queue: its ring, and a pipe for its limit event. */
struct srq *srq_create(struct owner *o, const struct proto_create_srq *req, int fds[2],
		       int *err)
{
	struct srq *srq = calloc(1, sizeof(*srq));
	int ends[2] = { -1, -1 };
	void *map;

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
	map = ring_alloc("rocemu-srq", srq->ring_bytes, &fds[0]);
	*err = map ? ring_channel_open(ends, 1) : -errno;
	if (*err) {
		if (map)
			munmap(map, srq->ring_bytes);
		if (fds[0] >= 0)
			close(fds[0]);
		free(srq);
		return NULL;
	}
	srq->ctl = map;
	srq->ring = (uint8_t *)(srq->ctl + 1);
	srq->event_fd = ends[1];
	srq->client_end = ends[0];
	fds[1] = ends[0];
	return srq;
}

int srq_destroy(struct srq *srq)
{
	if (srq->users)
		return -EBUSY;
	munmap(srq->ctl, srq->ring_bytes);
	close(srq->event_fd);
	close(srq->client_end);
	free(srq);
	return 0;
}
