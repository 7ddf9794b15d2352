/* Shared receive queues (basic ones: XRC and tag matching SRQs do not exist in rocemu).
 * The SRQ's limit event reaches the program as IBV_EVENT_SRQ_LIMIT_REACHED (async.c). */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct ibv_srq *srq_create(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct rv_context *ctx = rv_ctx(pd->context);
	struct rv_srq *srq = calloc(1, sizeof(*srq));

	if (!srq)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	srq->srq = rocemu_create_srq(rv_pd(pd)->pd, attr);
	if (srq->srq)
		rv_async_watch_srq(ctx, srq);
	else
		errno = rv_fail(ctx, errno, "ibv_create_srq");
	pthread_mutex_unlock(&ctx->lock);
	if (!srq->srq) {
		free(srq);
		return NULL;
	}
	pthread_mutex_init(&srq->lock, NULL);
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = pd;
	return &srq->ibsrq;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	return srq_create(pd, attr);
}

struct ibv_srq *rv_create_srq_ex(struct ibv_context *ibctx, struct ibv_srq_init_attr_ex *a)
{
	struct ibv_srq_init_attr attr = { .srq_context = a->srq_context, .attr = a->attr };
	struct ibv_srq *srq;

	(void)ibctx;
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type != IBV_SRQT_BASIC)
		return rv_unsupported_null("XRC and tag-matching SRQs",
					   "rocemu has basic SRQs only");
	if (a->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD))
		return rv_unsupported_null("ibv_create_srq_ex with an XRC domain, CQ or tag "
					   "matching", "rocemu has basic SRQs only");
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
		errno = EINVAL;
		return NULL;
	}
	srq = srq_create(a->pd, &attr);
	if (srq)
		a->attr = attr.attr;
	return srq;
}

int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct rv_context *ctx = rv_ctx(ibsrq->context);
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_modify_srq(rv_srq(ibsrq)->srq, attr, mask);
	pthread_mutex_unlock(&ctx->lock);
	return err ? rv_fail(ctx, err, "ibv_modify_srq") : 0;
}

int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct rv_context *ctx = rv_ctx(ibsrq->context);
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_query_srq(rv_srq(ibsrq)->srq, attr);
	pthread_mutex_unlock(&ctx->lock);
	return err ? rv_fail(ctx, err, "ibv_query_srq") : 0;
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct rv_context *ctx = rv_ctx(ibsrq->context);
	struct rv_srq *srq = rv_srq(ibsrq);
	int err;

	pthread_mutex_lock(&ctx->lock);
	rv_async_unwatch_srq(ctx, srq);
	err = rocemu_destroy_srq(srq->srq);
	if (err)
		rv_async_watch_srq(ctx, srq);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_destroy_srq");
	pthread_mutex_destroy(&srq->lock);
	free(srq);
	return 0;
}

int rv_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct rv_srq *srq = rv_srq(ibsrq);
	int err;

	pthread_mutex_lock(&srq->lock);
	err = rocemu_post_srq_recv(srq->srq, wr, bad);
	pthread_mutex_unlock(&srq->lock);
	return err;
}
