/* Shared receive queues: a ring of receive WQEs that several QPs of this context draw from,
 * and a pipe the daemon writes to when the WQEs left fall below the armed limit. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void srq_release(struct rocemu_srq *srq)
{
	LIST_REMOVE(srq, link);
	ring_unmap_park(srq->ctx, &srq->map);
	close(srq->event_fd);
	free(srq);
}

/* fds[0] is the ring memfd (closed once mapped), fds[1] the event pipe. */
static int srq_setup(struct rocemu_context *ctx, struct rocemu_srq *srq,
		     const struct proto_create_srq_reply *r, int *fds)
{
	int err = r->entries ? ring_map(ctx, fds[0], r->ring_bytes, &srq->map) : EPROTO;

	rpc_close_fds(&fds[0], 1);
	if (err)
		return err;
	err = ring_place(&srq->ring, srq->map.addr, srq->map.len, 0, r->entries,
			 proto_rwqe_stride(srq->max_sge));
	if (!err)
		err = rpc_set_nonblock(fds[1]);
	if (err) {
		ring_unmap(&srq->map);
		return err;
	}
	srq->ring.next = srq->ring.ctl->prod;
	srq->event_fd = fds[1];
	return 0;
}

struct rocemu_srq *rocemu_create_srq(struct rocemu_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct proto_create_srq req = { .hdr.op = PROTO_CREATE_SRQ };
	struct proto_create_srq_reply r;
	int fds[2] = { -1, -1 };
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r), .fds = fds, .nfds = 2 };
	struct rocemu_srq *srq;
	int err;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->attr.max_sge > PROTO_MAX_SGE) {
		errno = rpc_fail(pd->ctx, EINVAL, "max_sge %u is above %d", attr->attr.max_sge,
				 PROTO_MAX_SGE);
		return NULL;
	}
	req.pd = pd->handle;
	req.max_wr = attr->attr.max_wr;
	req.srq_limit = attr->attr.srq_limit;
	req.max_sge = attr->attr.max_sge;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	srq->max_sge = req.max_sge;
	err = rpc_call(pd->ctx, &in, &out);
	if (!err && (err = srq_setup(pd->ctx, srq, &r, fds))) {
		rpc_close_fds(fds, 2);
		rpc_handle_op(pd->ctx, PROTO_DESTROY_SRQ, r.handle);
		rpc_fail(pd->ctx, err, "the daemon at %s sent an unusable SRQ ring", pd->ctx->path);
	}
	if (err) {
		free(srq);
		errno = err;
		return NULL;
	}
	srq->ctx = pd->ctx;
	srq->handle = r.handle;
	attr->attr.max_wr = r.entries;
	LIST_INSERT_HEAD(&pd->ctx->srqs, srq, link);
	return srq;
}

int rocemu_modify_srq(struct rocemu_srq *srq, struct ibv_srq_attr *attr, int attr_mask)
{
	struct proto_modify_srq req = { .hdr.op = PROTO_MODIFY_SRQ };

	if (!srq || !attr)
		return EINVAL;
	req.handle = srq->handle;
	req.attr_mask = (uint32_t)attr_mask;
	req.max_wr = attr->max_wr;
	req.srq_limit = attr->srq_limit;
	return rpc_simple(srq->ctx, &req, sizeof(req));
}

int rocemu_query_srq(struct rocemu_srq *srq, struct ibv_srq_attr *attr)
{
	struct proto_handle req = { .hdr.op = PROTO_QUERY_SRQ };
	struct proto_query_srq_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	int err;

	if (!srq || !attr)
		return EINVAL;
	req.handle = srq->handle;
	err = rpc_call(srq->ctx, &in, &out);
	if (!err)
		*attr = (struct ibv_srq_attr){ .max_wr = r.max_wr, .max_sge = srq->max_sge,
					       .srq_limit = r.srq_limit };
	return err;
}

int rocemu_destroy_srq(struct rocemu_srq *srq)
{
	int err;

	if (!srq)
		return EINVAL;
	err = rpc_handle_op(srq->ctx, PROTO_DESTROY_SRQ, srq->handle);
	if (!err)
		srq_release(srq);
	return err;
}

int rocemu_srq_event_fd(const struct rocemu_srq *srq)
{
	return srq ? srq->event_fd : -1;
}

int rocemu_get_srq_event(struct rocemu_srq *srq, int timeout_ms)
{
	struct pollfd p = { .fd = srq ? srq->event_fd : -1, .events = POLLIN };
	uint64_t count;
	int n;

	if (!srq)
		return EINVAL;
	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno;
	if (n == 0)
		return ETIMEDOUT;
	if (read(srq->event_fd, &count, sizeof(count)) < 0)
		return errno == EAGAIN ? ETIMEDOUT : errno;
	return 0;
}
