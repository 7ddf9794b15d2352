/* Batches: requests that run in the daemon one after another for one round trip, until
 * one fails (proto.h's PROTO_BATCH). What the library mirrors of them (a QP's state) is
 * updated for those that ran. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rocemu_batch {
	struct rocemu_context *ctx;
	struct proto_batch msg;
	size_t used;                           /* bytes of msg.body taken */
	struct rocemu_qp *qp[PROTO_BATCH_MAX]; /* the QP a request changes the state of */
	enum ibv_qp_state state[PROTO_BATCH_MAX];
};

struct rocemu_batch *rocemu_batch_new(struct rocemu_context *ctx)
{
	struct rocemu_batch *b = calloc(1, sizeof(*b));

	if (b) {
		b->ctx = ctx;
		b->msg.hdr.op = PROTO_BATCH;
	}
	return b;
}

void rocemu_batch_free(struct rocemu_batch *b)
{
	free(b);
}

int rocemu_batch_add(struct rocemu_batch *b, const void *req, size_t len)
{
	size_t room = sizeof(b->msg.body) - b->used;

	if (b->msg.count == PROTO_BATCH_MAX || len > room || len < sizeof(struct proto_hdr))
		return rpc_fail(b->ctx, ENOSPC, "a batch holds %d requests in %zu bytes",
				PROTO_BATCH_MAX, sizeof(b->msg.body));
	memcpy(b->msg.body + b->used, req, len);
	b->msg.len[b->msg.count] = (uint32_t)len;
	b->qp[b->msg.count] = NULL;
	b->msg.count++;
	b->used += (len + 7) & ~(size_t)7;
	if (b->used > sizeof(b->msg.body))
		b->used = sizeof(b->msg.body);
	return 0;
}

int rocemu_batch_modify_qp(struct rocemu_batch *b, struct rocemu_qp *qp,
			   const struct ibv_qp_attr *attr, int attr_mask)
{
	struct proto_modify_qp req;
	int err = qp_modify_request(qp, attr, attr_mask, &req);

	if (!err && qp->context != b->ctx)
		err = rpc_fail(b->ctx, EINVAL, "a batch's QP belongs to another context");
	if (!err)
		err = rocemu_batch_add(b, &req, sizeof(req));
	if (!err && (attr_mask & IBV_QP_STATE)) {
		b->qp[b->msg.count - 1] = qp;
		b->state[b->msg.count - 1] = attr->qp_state;
	}
	return err;
}

int rocemu_batch_run(struct rocemu_batch *b, unsigned *done)
{
	struct proto_batch_reply r = { .done = 0 };
	struct rpc_msg in = { .buf = &b->msg, .len = sizeof(b->msg) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	int err = rpc_call_whole(b->ctx, &in, &out);

	/* a reply that never came ran nothing we can tell of */
	if (r.done > b->msg.count)
		r.done = 0;
	for (unsigned i = 0; i < r.done; i++)
		if (b->qp[i])
			b->qp[i]->state = b->state[i];
	if (done)
		*done = r.done;
	return err;
}
