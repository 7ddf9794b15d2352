/* Queue pairs: creation maps the SQ and RQ rings the daemon made, the attribute calls
 * translate between struct ibv_qp_attr and the protocol's own, smaller set. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void qp_release(struct qp_priv *qp)
{
	qp->send_cq->qp_uses--;
	qp->recv_cq->qp_uses--;
	LIST_REMOVE(qp, link);
	ring_unmap_park(qp->pub.context, &qp->map);
	close(qp->doorbell_fd);
	free(qp);
}

/* The RQ is placed first: that proves rq_offset lies inside the map, so the SQ can be
 * confined to the bytes before it. */
static int qp_place_rings(struct qp_priv *qp, const struct proto_create_qp_reply *r)
{
	int err;

	if (r->max_send_sge > PROTO_MAX_SGE || r->max_recv_sge > PROTO_MAX_SGE ||
	    r->max_inline_data > PROTO_MAX_INLINE)
		return EPROTO;
	qp->max_send_sge = r->max_send_sge;
	qp->max_recv_sge = r->max_recv_sge;
	qp->max_inline = r->max_inline_data;
	err = ring_place(&qp->rq, qp->map.addr, qp->map.len, r->rq_offset, r->rq_entries,
			 proto_rwqe_stride(qp->max_recv_sge));
	if (!err)
		err = ring_place(&qp->sq, qp->map.addr, (size_t)r->rq_offset, 0, r->sq_entries,
				 proto_swqe_stride(proto_swqe_room(qp->max_send_sge,
								   qp->max_inline)));
	if (err)
		return err;
	qp->sq.next = qp->sq.ctl->prod;
	qp->rq.next = qp->rq.ctl->prod;
	return 0;
}

/* fds[0] is the ring memfd (closed once mapped), fds[1] the doorbell pipe. */
static int qp_setup(struct rocemu_context *ctx, struct qp_priv *qp,
		    const struct proto_create_qp_reply *r, int *fds)
{
	int err = ring_map(ctx, fds[0], r->ring_bytes, &qp->map);

	rpc_close_fds(&fds[0], 1);
	if (err)
		return err;
	err = qp_place_rings(qp, r);
	if (err) {
		ring_unmap(&qp->map);
		return err;
	}
	qp->doorbell_fd = fds[1];
	return 0;
}

static int check_init_attr(struct rocemu_pd *pd, const struct rocemu_qp_init_attr *attr)
{
	if (!attr || !attr->send_cq || !attr->recv_cq)
		return rpc_fail(pd->ctx, EINVAL, "a QP needs a send and a receive CQ");
	if (attr->send_cq->ctx != pd->ctx || attr->recv_cq->ctx != pd->ctx ||
	    (attr->srq && attr->srq->ctx != pd->ctx))
		return rpc_fail(pd->ctx, EINVAL, "the CQs or the SRQ belong to another context");
	if (attr->max_send_sge > PROTO_MAX_SGE || attr->max_recv_sge > PROTO_MAX_SGE)
		return rpc_fail(pd->ctx, EINVAL, "max_send_sge %u or max_recv_sge %u is above %d",
				attr->max_send_sge, attr->max_recv_sge, PROTO_MAX_SGE);
	if (attr->max_inline_data > PROTO_MAX_INLINE)
		return rpc_fail(pd->ctx, EINVAL, "max_inline_data %u is above %d",
				attr->max_inline_data, PROTO_MAX_INLINE);
	return 0;
}

static void attr_to_proto(const struct ibv_qp_attr *attr, int mask, struct proto_qp_attr *p)
{
	*p = (struct proto_qp_attr){
		.state = attr->qp_state,
		.path_mtu = attr->path_mtu,
		.dest_qpn = attr->dest_qp_num,
		.rq_psn = attr->rq_psn,
		.sq_psn = attr->sq_psn,
		.access = attr->qp_access_flags,
		.timeout = attr->timeout,
		.retry_cnt = attr->retry_cnt,
		.rnr_retry = attr->rnr_retry,
		.min_rnr_timer = attr->min_rnr_timer,
		.max_rd_atomic = attr->max_rd_atomic,
		.max_dest_rd_atomic = attr->max_dest_rd_atomic,
		.qkey = attr->qkey,
	};
	if (mask & IBV_QP_AV) {
		memcpy(p->dest_gid, attr->ah_attr.grh.dgid.raw, sizeof(p->dest_gid));
		p->sgid_index = attr->ah_attr.grh.sgid_index;
		p->traffic_class = attr->ah_attr.grh.traffic_class;
		p->hop_limit = attr->ah_attr.grh.hop_limit;
		p->flow_label = attr->ah_attr.grh.flow_label;
	}
}

/* (the CQs' handles when attr names them) */
static void create_request(const struct rocemu_pd *pd, const struct rocemu_qp_init_attr *attr,
			   uint32_t op, struct proto_create_qp *req)
{
	*req = (struct proto_create_qp){
		.hdr.op = op,
		.pd = pd->handle,
		.send_cq = attr->send_cq ? attr->send_cq->handle : 0,
		.recv_cq = attr->recv_cq ? attr->recv_cq->handle : 0,
		.max_send_wr = attr->max_send_wr,
		.max_recv_wr = attr->max_recv_wr,
		.sq_sig_all = attr->sq_sig_all != 0,
		.srq = attr->srq ? attr->srq->handle : 0,
		.qp_type = attr->qp_type ? (uint32_t)attr->qp_type : IBV_QPT_RC,
		.max_send_sge = attr->max_send_sge,
		.max_recv_sge = attr->max_recv_sge,
		.max_inline_data = attr->max_inline_data,
	};
	if (attr->init) {
		req->init_mask = (uint32_t)attr->init_mask;
		attr_to_proto(attr->init, attr->init_mask, &req->init);
	}
}

/* The QP the daemon made, its rings in fds (taken); unusable, the daemon's QP is the
 * caller's to destroy. */
static int adopt_qp(struct rocemu_context *ctx, const struct proto_create_qp_reply *r, int *fds,
		    struct qp_priv *qp)
{
	int err = qp_setup(ctx, qp, r, fds);

	if (err) {
		rpc_close_fds(fds, 2);
		return rpc_fail(ctx, err, "the daemon at %s sent unusable QP rings", ctx->path);
	}
	qp->pub.qp_num = r->qpn;
	qp->pub.handle = r->handle;
	return 0;
}

static int send_create_qp(struct rocemu_pd *pd, const struct rocemu_qp_init_attr *attr,
			  struct qp_priv *qp)
{
	struct proto_create_qp req;
	struct proto_create_qp_reply r;
	int fds[2] = { -1, -1 };
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r), .fds = fds, .nfds = 2 };
	int err;

	create_request(pd, attr, PROTO_CREATE_QP, &req);
	err = rpc_call(pd->ctx, &in, &out);
	if (!err && (err = adopt_qp(pd->ctx, &r, fds, qp)))
		rpc_handle_op(pd->ctx, PROTO_DESTROY_QP, r.handle);
	return err;
}

/* The new QP's own view, and what ibv_create_qp reports in cap */
static void qp_made(struct rocemu_pd *pd, struct rocemu_qp_init_attr *attr, struct qp_priv *qp)
{
	qp->pub.context = pd->ctx;
	qp->pub.pd = pd;
	qp->pub.state = attr->init ? IBV_QPS_INIT : IBV_QPS_RESET;
	qp->has_srq = attr->srq != NULL;
	qp->ud = attr->qp_type == IBV_QPT_UD;
	qp->uc = attr->qp_type == IBV_QPT_UC;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->send_cq->qp_uses++;
	qp->recv_cq->qp_uses++;
	/* what ibv_create_qp reports in cap: the queues made, at least what was asked (SGEs
	 * and inline data share a send slot's room, as on rxe) */
	attr->max_send_wr = qp->sq.count;
	attr->max_recv_wr = qp->has_srq ? 0 : qp->rq.count;
	attr->max_send_sge = qp->max_send_sge;
	attr->max_recv_sge = qp->has_srq ? 0 : qp->max_recv_sge;
	attr->max_inline_data = qp->max_inline;
	LIST_INSERT_HEAD(&pd->ctx->qps, qp, link);
}

struct rocemu_qp *rocemu_create_qp(struct rocemu_pd *pd, struct rocemu_qp_init_attr *attr)
{
	struct qp_priv *qp;
	int err;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	err = check_init_attr(pd, attr);
	qp = err ? NULL : calloc(1, sizeof(*qp));
	if (!err && !qp)
		err = ENOMEM;
	if (!err)
		err = send_create_qp(pd, attr, qp);
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	qp_made(pd, attr, qp);
	return &qp->pub;
}

static struct proto_create_cq_reply cq_reply(const struct proto_cq_made *m)
{
	return (struct proto_create_cq_reply){ .handle = m->handle, .entries = m->entries,
					       .ring_bytes = m->ring_bytes };
}

/* What the daemon made and we could not take: the QP first, it holds the CQs. */
static void unmake(struct rocemu_context *ctx, const struct proto_create_qp_cqs_reply *r,
		   struct rocemu_cq *cqs[2])
{
	rpc_handle_op(ctx, PROTO_DESTROY_QP, r->qp.handle);
	rpc_handle_op(ctx, PROTO_DESTROY_CQ, r->recv_cq.handle);
	rpc_handle_op(ctx, PROTO_DESTROY_CQ, r->send_cq.handle);
	for (int i = 0; i < 2; i++)
		if (cqs[i])
			cq_release(cqs[i]);
}

/* fds: the QP's two, the receive CQ's two, the send CQ's two (all taken). */
static int adopt_qp_cqs(struct rocemu_context *ctx, const struct proto_create_qp_cqs_reply *r,
			int fds[6], struct qp_priv *qp, struct rocemu_cq *cqs[2])
{
	struct proto_create_cq_reply recv = cq_reply(&r->recv_cq), send = cq_reply(&r->send_cq);
	int err = 0;

	cqs[0] = cq_adopt(ctx, &recv, &fds[2]);
	cqs[1] = cq_adopt(ctx, &send, &fds[4]);
	if (!cqs[0] || !cqs[1])
		err = errno;
	else if (!qp)
		err = ENOMEM;
	if (err || (err = adopt_qp(ctx, &r->qp, fds, qp))) {
		rpc_close_fds(fds, 6);
		unmake(ctx, r, cqs);
	}
	return err;
}

struct rocemu_qp *rocemu_create_qp_cqs(struct rocemu_pd *pd, struct rocemu_qp_init_attr *attr,
				       int send_cqe, int recv_cqe)
{
	struct proto_create_qp_cqs req = { .recv_cqe = (uint32_t)recv_cqe,
					   .send_cqe = (uint32_t)send_cqe };
	struct proto_create_qp_cqs_reply r;
	int fds[6] = { -1, -1, -1, -1, -1, -1 };
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r), .fds = fds, .nfds = 6 };
	struct rocemu_cq *cqs[2] = { NULL, NULL };
	struct qp_priv *qp;
	int err;

	if (!pd || !attr || send_cqe <= 0 || recv_cqe <= 0) {
		errno = EINVAL;
		return NULL;
	}
	create_request(pd, attr, PROTO_CREATE_QP_CQS, &req.qp);
	err = rpc_call(pd->ctx, &in, &out);
	if (err) {
		errno = err;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	err = adopt_qp_cqs(pd->ctx, &r, fds, qp, cqs);
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	attr->recv_cq = cqs[0];
	attr->send_cq = cqs[1];
	qp_made(pd, attr, qp);
	return &qp->pub;
}

int rocemu_destroy_qp(struct rocemu_qp *pub)
{
	int err;

	if (!pub)
		return EINVAL;
	err = rpc_handle_op(pub->context, PROTO_DESTROY_QP, pub->handle);
	if (!err)
		qp_release(to_qp(pub));
	return err;
}

int qp_modify_request(struct rocemu_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
		      struct proto_modify_qp *req)
{
	if (!qp || !attr)
		return EINVAL;
	if ((attr_mask & IBV_QP_AV) && !attr->ah_attr.is_global)
		return rpc_fail(qp->context, EINVAL, "RoCE needs a GRH in ah_attr (is_global 1)");
	memset(req, 0, sizeof(*req));
	req->hdr.op = PROTO_MODIFY_QP;
	req->handle = qp->handle;
	req->attr_mask = (uint32_t)attr_mask;
	attr_to_proto(attr, attr_mask, &req->attr);
	return 0;
}

int rocemu_modify_qp(struct rocemu_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct proto_modify_qp req;
	int err = qp_modify_request(qp, attr, attr_mask, &req);

	if (err)
		return err;
	err = rpc_simple(qp->context, &req, sizeof(req));
	if (!err && (attr_mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return err;
}

static void proto_to_attr(const struct proto_qp_attr *p, struct ibv_qp_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = (enum ibv_qp_state)p->state;
	attr->path_mtu = (enum ibv_mtu)p->path_mtu;
	attr->dest_qp_num = p->dest_qpn;
	attr->rq_psn = p->rq_psn;
	attr->sq_psn = p->sq_psn;
	attr->qp_access_flags = p->access;
	memcpy(attr->ah_attr.grh.dgid.raw, p->dest_gid, sizeof(p->dest_gid));
	attr->ah_attr.grh.sgid_index = p->sgid_index;
	attr->ah_attr.grh.traffic_class = p->traffic_class;
	attr->ah_attr.grh.hop_limit = p->hop_limit;
	attr->ah_attr.grh.flow_label = p->flow_label;
	attr->ah_attr.is_global = 1;
	attr->timeout = p->timeout;
	attr->retry_cnt = p->retry_cnt;
	attr->rnr_retry = p->rnr_retry;
	attr->min_rnr_timer = p->min_rnr_timer;
	attr->max_rd_atomic = p->max_rd_atomic;
	attr->max_dest_rd_atomic = p->max_dest_rd_atomic;
	attr->qkey = p->qkey;
}

int rocemu_query_qp(struct rocemu_qp *qp, struct ibv_qp_attr *attr)
{
	struct proto_handle req = { .hdr.op = PROTO_QUERY_QP };
	struct proto_query_qp_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	int err;

	if (!qp || !attr)
		return EINVAL;
	req.handle = qp->handle;
	err = rpc_call(qp->context, &in, &out);
	if (err)
		return err;
	proto_to_attr(&r.attr, attr);
	qp->state = attr->qp_state;
	return 0;
}

static int mcast_op(struct rocemu_qp *qp, uint32_t op, const union ibv_gid *gid)
{
	struct proto_mcast req = { .hdr.op = op };
	struct proto_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };

	if (!qp || !gid)
		return EINVAL;
	req.qp = qp->handle;
	memcpy(req.gid, gid->raw, sizeof(req.gid));
	return rpc_call(qp->context, &in, &out);
}

int rocemu_attach_mcast(struct rocemu_qp *qp, const union ibv_gid *gid)
{
	return mcast_op(qp, PROTO_ATTACH_MCAST, gid);
}

int rocemu_detach_mcast(struct rocemu_qp *qp, const union ibv_gid *gid)
{
	return mcast_op(qp, PROTO_DETACH_MCAST, gid);
}
