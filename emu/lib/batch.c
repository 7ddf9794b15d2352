/* Batches: requests that run in the daemon one after another for one round trip, until
 * one fails (proto.h's PROTO_BATCH). What the library mirrors of them (a QP's state, the
 * rings of a QP or CQ destroyed) is updated for those that ran. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a request that ran changes in the library's own view */
struct batch_effect {
	enum { EFFECT_NONE, EFFECT_QP_STATE, EFFECT_QP_GONE, EFFECT_CQ_GONE } kind;
	struct rocemu_qp *qp;
	struct rocemu_cq *cq;
	enum ibv_qp_state state;
};

struct rocemu_batch {
	struct rocemu_context *ctx;
	struct proto_batch msg;
	size_t used;                           /* bytes of msg.body taken */
	struct batch_effect effect[PROTO_BATCH_MAX];
};

_Static_assert(ROCEMU_BATCH_MAX == PROTO_BATCH_MAX, "rocemu.h tells the batch's room");

struct rocemu_batch *rocemu_batch_new(struct rocemu_context *ctx)
{
	struct rocemu_batch *b = calloc(1, sizeof(*b));

	if (b) {
		b->ctx = ctx;
		b->msg.hdr.op = PROTO_BATCH;
	}
	return b;
}

/* Whether the daemon will surely run the whole batch, so that it may go with no reply
 * wanted: destroys only, of QPs that receive nothing more (in ERROR or RESET, so no
 * message lands in the program's buffers after it was told the QP is gone) and are in no
 * multicast group (not UD), and of CQs no QP uses by then. */
static bool surely_runs(const struct rocemu_batch *b)
{
	for (uint32_t i = 0; i < b->msg.count; i++) {
		const struct batch_effect *e = &b->effect[i];
		unsigned uses_left;

		switch (e->kind) {
		case EFFECT_QP_GONE:
			if ((e->qp->state != IBV_QPS_ERR && e->qp->state != IBV_QPS_RESET) ||
			    to_qp(e->qp)->ud)
				return false;
			break;
		case EFFECT_CQ_GONE:
			uses_left = e->cq->qp_uses;
			for (uint32_t j = 0; j < i; j++)
				if (b->effect[j].kind == EFFECT_QP_GONE)
					uses_left -= (to_qp(b->effect[j].qp)->send_cq == e->cq) +
						     (to_qp(b->effect[j].qp)->recv_cq == e->cq);
			if (uses_left)
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
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
	b->effect[b->msg.count] = (struct batch_effect){ .kind = EFFECT_NONE };
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
	if (!err && (attr_mask & IBV_QP_STATE))
		b->effect[b->msg.count - 1] = (struct batch_effect){
			.kind = EFFECT_QP_STATE, .qp = qp, .state = attr->qp_state };
	return err;
}

static int add_destroy(struct rocemu_batch *b, struct rocemu_context *owner, uint32_t op,
		       uint32_t handle, struct batch_effect effect)
{
	struct proto_handle req = { .hdr.op = op, .handle = handle };
	int err = owner == b->ctx ? 0 :
		  rpc_fail(b->ctx, EINVAL, "a batch's QP or CQ belongs to another context");

	if (!err)
		err = rocemu_batch_add(b, &req, sizeof(req));
	if (!err)
		b->effect[b->msg.count - 1] = effect;
	return err;
}

int rocemu_batch_destroy_qp(struct rocemu_batch *b, struct rocemu_qp *qp)
{
	if (!qp)
		return EINVAL;
	return add_destroy(b, qp->context, PROTO_DESTROY_QP, qp->handle,
			   (struct batch_effect){ .kind = EFFECT_QP_GONE, .qp = qp });
}

int rocemu_batch_destroy_cq(struct rocemu_batch *b, struct rocemu_cq *cq)
{
	if (!cq)
		return EINVAL;
	return add_destroy(b, cq->ctx, PROTO_DESTROY_CQ, cq->handle,
			   (struct batch_effect){ .kind = EFFECT_CQ_GONE, .cq = cq });
}

static void take_effect(const struct batch_effect *e)
{
	switch (e->kind) {
	case EFFECT_QP_STATE:
		e->qp->state = e->state;
		break;
	case EFFECT_QP_GONE:
		qp_release(to_qp(e->qp));
		break;
	case EFFECT_CQ_GONE:
		cq_release(e->cq);
		break;
	case EFFECT_NONE:
		break;
	}
}

int rocemu_batch_post(struct rocemu_batch *b)
{
	int err;

	if (!surely_runs(b))
		return EAGAIN;
	err = rpc_post(b->ctx, &b->msg, sizeof(b->msg));
	for (uint32_t i = 0; !err && i < b->msg.count; i++)
		take_effect(&b->effect[i]);
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
		take_effect(&b->effect[i]);
	if (done)
		*done = r.done;
	return err;
}
