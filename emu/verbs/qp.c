/* Queue pairs: RC, UC and UD, created plain or extended, driven through the verbs state
 * machine by the daemon, which checks every transition. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SUPPORTED_INIT_MASK (IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
/* What rxe's provider lets a UC QP be created with (without memory windows, which rocemu
 * has not); SEND WITH INVALIDATE is taken here as there, and refused when posted. */
#define UC_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		     IBV_QP_EX_WITH_SEND_WITH_INV)

/* Create flags and a TSO header size that ask for nothing are taken, as rxe takes them
 * (programs set the mask bits with zero values). */
static uint32_t asked_init_mask(const struct ibv_qp_init_attr_ex *a)
{
	uint32_t mask = a->comp_mask;

	if ((mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && !a->create_flags)
		mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if ((mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) && !a->max_tso_header)
		mask &= ~(uint32_t)IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	return mask;
}

static int check_init_attr(const struct ibv_qp_init_attr_ex *a)
{
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD)
		return rv_unsupported("XRC, raw packet and driver QPs",
				      "rocemu does RC, UC and UD only");
	if (asked_init_mask(a) & ~(uint32_t)SUPPORTED_INIT_MASK)
		return rv_unsupported("ibv_create_qp_ex with XRC domains, create flags, TSO, "
				      "RSS or source QPNs", "rocemu QPs are plain RC, UC or UD QPs");
	if (a->qp_type == IBV_QPT_UD && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (a->send_ops_flags & ~(uint64_t)(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)))
		return rv_refuse(EINVAL, "ibv_create_qp_ex", "a UD QP sends SEND [WITH IMM] only");
	if (a->qp_type == IBV_QPT_UC && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (a->send_ops_flags & ~(uint64_t)UC_SEND_OPS))
		return rv_refuse(EINVAL, "ibv_create_qp_ex",
				 "a UC QP sends SEND and RDMA WRITE [WITH IMM] only");
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || !a->send_cq || !a->recv_cq)
		return EINVAL;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    rv_qp_ex_check_ops(a->send_ops_flags))
		return rv_unsupported("ibv_qp_ex send_ops_flags other than SEND [WITH IMM or INV], "
				      "RDMA WRITE [WITH IMM], RDMA READ and the two atomics",
				      "memory windows, local invalidate, TSO and ATOMIC WRITE "
				      "do not exist in rocemu");
	return 0;
}

/* The attributes the daemon takes (the port and P_Key index are fixed) */
static int daemon_mask(int mask)
{
	return mask & ~(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_CUR_STATE |
			IBV_QP_EN_SQD_ASYNC_NOTIFY);
}

/* (the CQs when a names them) */
static struct rocemu_qp_init_attr lib_attr(const struct ibv_qp_init_attr_ex *a,
					   const struct rv_qp_change *to_init)
{
	return (struct rocemu_qp_init_attr){
		.qp_type = a->qp_type,
		.send_cq = a->send_cq ? rv_cq(a->send_cq)->cq : NULL,
		.recv_cq = a->recv_cq ? rv_cq(a->recv_cq)->cq : NULL,
		.max_send_wr = a->cap.max_send_wr,
		.max_recv_wr = a->cap.max_recv_wr,
		.max_send_sge = a->cap.max_send_sge,
		.max_recv_sge = a->cap.max_recv_sge,
		.max_inline_data = a->cap.max_inline_data,
		.sq_sig_all = a->sq_sig_all,
		.srq = a->srq ? rv_srq(a->srq)->srq : NULL,
		.init = to_init ? &to_init->attr : NULL,
		.init_mask = to_init ? daemon_mask(to_init->mask) : 0,
	};
}

/* The queues' sizes and the room of their slots, which the QP's cap reports */
static void cap_made(const struct ibv_qp_init_attr_ex *a, const struct rocemu_qp_init_attr *init,
		     struct ibv_qp_cap *made)
{
	*made = a->cap;
	made->max_send_wr = init->max_send_wr;
	made->max_recv_wr = init->max_recv_wr;
	made->max_send_sge = init->max_send_sge;
	made->max_recv_sge = init->max_recv_sge;
	made->max_inline_data = init->max_inline_data;
}

static struct rocemu_qp *create(struct rv_context *ctx, const struct ibv_qp_init_attr_ex *a,
				const struct rv_qp_change *to_init, struct ibv_qp_cap *made)
{
	struct rocemu_qp_init_attr init = lib_attr(a, to_init);
	struct rocemu_qp *qp;

	pthread_mutex_lock(&ctx->lock);
	qp = rocemu_create_qp(rv_pd(a->pd)->pd, &init);
	if (!qp)
		errno = rv_fail(ctx, errno, "ibv_create_qp");
	pthread_mutex_unlock(&ctx->lock);
	cap_made(a, &init, made);
	return qp;
}

/* Under ctx's lock: the verbs CQs of the two the daemon made with the QP; on failure none
 * is left, nor the QP. */
static int wrap_new_cqs(struct rv_context *ctx, struct rocemu_qp *qp,
			const struct rocemu_qp_init_attr *init, struct rv_new_cq send,
			struct rv_new_cq recv, void *cq_context, struct ibv_qp_init_attr_ex *a)
{
	struct rv_cq *s = rv_cq_wrap(ctx, init->send_cq, send.cqe, send.channel, cq_context);
	struct rv_cq *r = s ? rv_cq_wrap(ctx, init->recv_cq, recv.cqe, recv.channel, cq_context)
			    : NULL;
	int err = errno;

	if (r) {
		a->send_cq = (struct ibv_cq *)&s->ex;
		a->recv_cq = (struct ibv_cq *)&r->ex;
		return 0;
	}
	if (s) {
		rv_channel_unbind(s);
		rv_cq_free(s);
	}
	rocemu_destroy_qp(qp);
	rocemu_destroy_cq(init->send_cq);
	rocemu_destroy_cq(init->recv_cq);
	return err;
}

static struct rocemu_qp *create_with_cqs(struct rv_context *ctx, struct ibv_qp_init_attr_ex *a,
					 const struct rv_qp_change *to_init,
					 struct rv_new_cq send, struct rv_new_cq recv,
					 void *cq_context, struct ibv_qp_cap *made)
{
	struct rocemu_qp_init_attr init = lib_attr(a, to_init);
	struct rocemu_qp *qp;
	int err = 0;

	pthread_mutex_lock(&ctx->lock);
	qp = rocemu_create_qp_cqs(rv_pd(a->pd)->pd, &init, send.cqe, recv.cqe);
	if (!qp)
		err = rv_fail(ctx, errno, "rdma_create_qp");
	else if ((err = wrap_new_cqs(ctx, qp, &init, send, recv, cq_context, a)))
		qp = NULL;
	pthread_mutex_unlock(&ctx->lock);
	cap_made(a, &init, made);
	errno = err;
	return qp;
}

static void init_verbs_qp(struct rv_qp *qp, struct rv_context *ctx,
			  const struct ibv_qp_init_attr_ex *a, const struct rv_qp_change *init)
{
	struct ibv_qp *q = &qp->ex.qp_base;

	q->context = &ctx->vctx.context;
	q->qp_context = a->qp_context;
	q->pd = a->pd;
	q->send_cq = a->send_cq;
	q->recv_cq = a->recv_cq;
	q->srq = a->srq;
	q->handle = qp->qp->handle;
	q->qp_num = qp->qp->qp_num;
	q->state = init ? init->attr.qp_state : IBV_QPS_RESET;
	q->qp_type = a->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	pthread_mutex_init(&qp->send_lock, NULL);
	pthread_mutex_init(&qp->recv_lock, NULL);
	if (a->srq)
		qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
	qp->sq_sig_all = a->sq_sig_all;
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->has_ex = true;
		rv_qp_ex_init(qp);
	}
}

static struct ibv_qp *make_qp(struct rv_context *ctx, struct ibv_qp_init_attr_ex *a,
			      const struct rv_qp_change *init)
{
	struct rv_qp *qp;
	int err = check_init_attr(a);

	if (err) {
		errno = err;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	qp->qp = create(ctx, a, init, &qp->cap);
	if (!qp->qp) {
		free(qp);
		return NULL;
	}
	init_verbs_qp(qp, ctx, a, init);
	return &qp->ex.qp_base;
}

struct ibv_qp *rv_create_qp_ex(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *a)
{
	return make_qp(rv_ctx(ibctx), a, NULL);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	memcpy(&a, attr, sizeof(*attr));
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	qp = rv_create_qp_ex(pd->context, &a);
	if (qp)
		attr->cap = rv_qp(qp)->cap;
	return qp;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct rv_qp *q = rv_qp(qp);

	return q->has_ex ? &q->ex : NULL;
}

static int check_av(const struct rv_context *ctx, const struct ibv_qp_attr *attr, int mask)
{
	const struct ibv_ah_attr *ah = &attr->ah_attr;

	if ((mask & IBV_QP_PORT) && attr->port_num != RV_PORT)
		return EINVAL;
	if (!(mask & IBV_QP_AV))
		return 0;
	if (!ah->is_global || ah->grh.sgid_index >= ctx->port.gid_count ||
	    (ah->port_num && ah->port_num != RV_PORT))
		return rv_refuse(EINVAL, "ibv_modify_qp", "RoCE needs a GRH in ah_attr "
				 "(is_global 1, sgid_index one of the port's GIDs, port 1)");
	return 0;
}

/* A QP back in RESET starts afresh, and so do its CQs: its completions not yet polled
 * (the flushed work requests of an error, say) are dropped, as libmlx5 drops them, so a
 * program that resets a QP after an error does not poll the old errors again. A QP with
 * an SRQ keeps its receives': their WQEs left the SRQ, and libmlx5 hands those back to
 * the SRQ, which here only the program can do, once it has polled them. */
static void forget_completions(struct ibv_qp *ibqp)
{
	bool keep_receives = ibqp->srq != NULL;

	if (ibqp->send_cq)
		rv_cq_forget_qp(ibqp->send_cq, ibqp->qp_num, keep_receives);
	if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
		rv_cq_forget_qp(ibqp->recv_cq, ibqp->qp_num, keep_receives);
}

/* What ibv_modify_qp refuses before the daemon; 0 or an errno. */
static int check_modify(struct rv_context *ctx, const struct ibv_qp_attr *attr, int mask)
{
	int err = check_av(ctx, attr, mask);

	if (err)
		return err;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return EINVAL;
	if (mask & IBV_QP_RATE_LIMIT)
		return rv_unsupported("ibv_modify_qp with IBV_QP_RATE_LIMIT",
				      "rocemu has no per-QP rate limit");
	return 0;
}

static void modified(struct ibv_qp *ibqp, const struct ibv_qp_attr *attr, int mask)
{
	if (!(mask & IBV_QP_STATE))
		return;
	ibqp->state = attr->qp_state;
	if (attr->qp_state == IBV_QPS_RESET)
		forget_completions(ibqp);
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct rv_context *ctx = rv_ctx(ibqp->context);
	struct rv_qp *qp = rv_qp(ibqp);
	int err = check_modify(ctx, attr, mask);

	if (err)
		return err;
	pthread_mutex_lock(&ctx->lock);
	err = rocemu_modify_qp(qp->qp, attr, daemon_mask(mask));
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_modify_qp");
	modified(ibqp, attr, mask);
	return 0;
}

static int add_changes(struct rocemu_batch *b, struct ibv_qp *ibqp,
		       const struct rv_qp_change *changes, unsigned n)
{
	int err = 0;

	for (unsigned i = 0; i < n && !err; i++) {
		err = check_modify(rv_ctx(ibqp->context), &changes[i].attr, changes[i].mask);
		if (!err)
			err = rocemu_batch_modify_qp(b, rv_qp(ibqp)->qp, &changes[i].attr,
						     daemon_mask(changes[i].mask));
	}
	return err;
}

int rv_modify_qp_then(struct ibv_qp *ibqp, const struct rv_qp_change *changes, unsigned n,
		      void *req, size_t len, const char *what, unsigned *ran)
{
	struct rv_context *ctx = rv_ctx(ibqp->context);
	struct rocemu_batch *b = rocemu_batch_new(ctx->rc);
	unsigned done = 0;
	int err = b ? 0 : ENOMEM;

	if (!err)
		err = add_changes(b, ibqp, changes, n);
	if (!err && req)
		err = rocemu_batch_add(b, req, len);
	if (err) {
		rocemu_batch_free(b);
		return err;
	}
	pthread_mutex_lock(&ctx->lock);
	err = rocemu_batch_run(b, &done);
	pthread_mutex_unlock(&ctx->lock);
	rocemu_batch_free(b);
	for (unsigned i = 0; i < done && i < n; i++)
		modified(ibqp, &changes[i].attr, changes[i].mask);
	if (ran)
		*ran = done;
	if (err)
		return rv_fail(ctx, err, done < n ? "ibv_modify_qp" : what);
	return 0;
}

struct ibv_qp *rv_create_qp_in_init(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *a,
				    const struct rv_qp_change *init)
{
	struct rv_context *ctx = rv_ctx(ibctx);
	int err = check_modify(ctx, &init->attr, init->mask);

	if (err) {
		errno = err;
		return NULL;
	}
	return make_qp(ctx, a, init);
}

/* Only rdma_create_qp's connected QPs come here (a UD QP goes to RTS at once). */
struct ibv_qp *rv_create_qp_cqs_in_init(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *a,
					const struct rv_qp_change *init, struct rv_new_cq send,
					struct rv_new_cq recv, void *cq_context)
{
	struct rv_context *ctx = rv_ctx(ibctx);
	int err = check_modify(ctx, &init->attr, init->mask);
	struct rv_qp *qp = NULL;

	a->send_cq = a->recv_cq = NULL;
	if (!err && ((a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC) ||
		     !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd))
		err = EINVAL;
	if (!err && !(qp = calloc(1, sizeof(*qp))))
		err = ENOMEM;
	if (!err && !(qp->qp = create_with_cqs(ctx, a, init, send, recv, cq_context, &qp->cap)))
		err = errno;
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	init_verbs_qp(qp, ctx, a, init);
	return &qp->ex.qp_base;
}

static void fill_init_attr(const struct rv_qp *qp, struct ibv_qp_init_attr *init)
{
	const struct ibv_qp *q = &qp->ex.qp_base;

	memset(init, 0, sizeof(*init));
	init->qp_context = q->qp_context;
	init->send_cq = q->send_cq;
	init->recv_cq = q->recv_cq;
	init->srq = q->srq;
	init->cap = qp->cap;
	init->qp_type = q->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	struct rv_context *ctx = rv_ctx(ibqp->context);
	struct rv_qp *qp = rv_qp(ibqp);
	int err;

	(void)mask;     /* everything is answered: verbs allows more than asked */
	pthread_mutex_lock(&ctx->lock);
	err = rocemu_query_qp(qp->qp, attr);
	if (!err)
		ibqp->state = attr->qp_state;
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_query_qp");
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	attr->port_num = RV_PORT;
	attr->ah_attr.port_num = RV_PORT;
	attr->ah_attr.grh.hop_limit = 64;
	if (init)
		fill_init_attr(qp, init);
	return 0;
}

/* once the daemon's QP is gone */
static void qp_free(struct rv_qp *qp)
{
	rv_qp_ex_free(qp);
	free(qp);
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct rv_context *ctx = rv_ctx(ibqp->context);
	struct rv_qp *qp = rv_qp(ibqp);
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_destroy_qp(qp->qp);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_destroy_qp");
	qp_free(qp);
	return 0;
}

static int destroy_one_by_one(struct ibv_qp *qp, struct ibv_cq *const *cqs, unsigned n)
{
	int err = ibv_destroy_qp(qp);

	for (unsigned i = 0; i < n && !err; i++)
		err = ibv_destroy_cq(cqs[i]);
	return err;
}

int rv_destroy_qp_and_cqs(struct ibv_qp *ibqp, struct ibv_cq *const *cqs, unsigned n)
{
	struct rv_context *ctx = rv_ctx(ibqp->context);
	struct rv_qp *qp = rv_qp(ibqp);
	struct rocemu_batch *b = NULL;
	unsigned unbound = 0, done = 0, i;
	int err;

	for (i = 0; i < n; i++)
		if (cqs[i]->context != ibqp->context)
			break;
	if (i < n || n + 1 > ROCEMU_BATCH_MAX || !(b = rocemu_batch_new(ctx->rc)))
		return destroy_one_by_one(ibqp, cqs, n);
	pthread_mutex_lock(&ctx->lock);
	err = rocemu_batch_destroy_qp(b, qp->qp);
	for (; !err && unbound < n; unbound++) {
		rv_channel_unbind(rv_cq(cqs[unbound]));
		err = rocemu_batch_destroy_cq(b, rv_cq(cqs[unbound])->cq);
	}
	/* a connection's teardown, its QP in ERROR since rdma_disconnect, need not wait */
	if (!err && rocemu_batch_post(b) == 0)
		done = unbound + 1;
	else if (!err)
		err = rocemu_batch_run(b, &done);
	/* request 0 is the QP's, request 1 + i the CQ cqs[i]'s */
	for (i = done ? done - 1 : 0; i < unbound; i++)
		if (rv_cq(cqs[i])->channel)
			rv_channel_bind(rv_cq(cqs[i])->channel, rv_cq(cqs[i]));
	pthread_mutex_unlock(&ctx->lock);
	rocemu_batch_free(b);
	if (done >= 1)
		qp_free(qp);
	for (i = 0; i + 1 < done; i++)
		rv_cq_free(rv_cq(cqs[i]));
	if (err)
		return rv_fail(ctx, err, done ? "ibv_destroy_cq" : "ibv_destroy_qp");
	return 0;
}

/* RoCE has no LIDs: the kernel ignores lid for an Ethernet port (is_valid_mcast_lid). */
static int mcast_call(struct ibv_qp *ibqp, const union ibv_gid *gid, bool attach)
{
	struct rv_context *ctx;
	int err;

	if (!ibqp || !gid)
		return rv_refuse(EINVAL, attach ? "ibv_attach_mcast" : "ibv_detach_mcast",
				 "no QP or no GID");
	ctx = rv_ctx(ibqp->context);
	pthread_mutex_lock(&ctx->lock);
	err = attach ? rocemu_attach_mcast(rv_qp(ibqp)->qp, gid) :
		       rocemu_detach_mcast(rv_qp(ibqp)->qp, gid);
	pthread_mutex_unlock(&ctx->lock);
	return err ? rv_fail(ctx, err, attach ? "ibv_attach_mcast" : "ibv_detach_mcast") : 0;
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast_call(qp, gid, true);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast_call(qp, gid, false);
}

/* The QP's own SGE limits, as rxe checks them on every post: the device's are the
 * library's. The first request over its limit is refused with everything after it. */
static int check_send_sges(struct ibv_send_wr *wr, uint32_t max_sge, struct ibv_send_wr **bad)
{
	for (; wr; wr = wr->next)
		if (wr->num_sge > (int)max_sge) {
			*bad = wr;
			return rv_refuse(EINVAL, "ibv_post_send", "more SGEs than the QP's cap");
		}
	return 0;
}

static int check_recv_sges(struct ibv_recv_wr *wr, uint32_t max_sge, struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next)
		if (wr->num_sge > (int)max_sge) {
			*bad = wr;
			return rv_refuse(EINVAL, "ibv_post_recv", "more SGEs than the QP's cap");
		}
	return 0;
}

int rv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rv_qp *qp = rv_qp(ibqp);
	int err = check_send_sges(wr, qp->cap.max_send_sge, bad);

	if (err)
		return err;
	pthread_mutex_lock(&qp->send_lock);
	err = rocemu_post_send(qp->qp, wr, bad);
	pthread_mutex_unlock(&qp->send_lock);
	return err;
}

int rv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct rv_qp *qp = rv_qp(ibqp);
	int err = ibqp->srq ? 0 : check_recv_sges(wr, qp->cap.max_recv_sge, bad);

	if (err)
		return err;
	pthread_mutex_lock(&qp->recv_lock);
	err = rocemu_post_recv(qp->qp, wr, bad);
	pthread_mutex_unlock(&qp->recv_lock);
	return err;
}
