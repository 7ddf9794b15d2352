/* Protection domains, memory regions and memory windows (fork.c keeps registered pages out of children
 * after ibv_fork_init). */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* verbs.h wraps these two in macros; here they are the exported functions themselves. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ibctx)
{
	struct rv_context *ctx = rv_ctx(ibctx);
	struct rv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	pd->pd = rocemu_alloc_pd(ctx->rc);
	pthread_mutex_unlock(&ctx->lock);
	if (!pd->pd) {
		errno = rv_fail(ctx, errno, "ibv_alloc_pd");
		free(pd);
		return NULL;
	}
	pd->ibpd.context = ibctx;
	return &pd->ibpd;
}

int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct rv_context *ctx = rv_ctx(ibpd->context);
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_dealloc_pd(rv_pd(ibpd)->pd);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_dealloc_pd");
	free(ibpd);
	return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	struct rv_context *ctx = rv_ctx(ibpd->context);
	struct rv_mr *mr;

	if (access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB))
		return rv_unsupported_null("ibv_reg_mr with ON_DEMAND or HUGETLB",
					   "on-demand paging does not exist in rocemu; every MR "
					   "is pinned");
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	mr->mr = rocemu_reg_mr_iova(rv_pd(ibpd)->pd, addr, length, iova,
				    (int)(access & ~IBV_ACCESS_RELAXED_ORDERING));
	pthread_mutex_unlock(&ctx->lock);
	if (!mr->mr) {
		errno = rv_fail(ctx, errno, "ibv_reg_mr");
		free(mr);
		return NULL;
	}
	rv_fork_track(addr, length);
	mr->ibmr = (struct ibv_mr){
		.context = ibpd->context, .pd = ibpd, .addr = addr, .length = length,
		.handle = mr->mr->handle, .lkey = mr->mr->lkey, .rkey = mr->mr->rkey,
	};
	return &mr->ibmr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			       int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct rv_context *ctx = rv_ctx(ibmr->context);
	struct rv_mr *mr = (struct rv_mr *)ibmr;
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_dereg_mr(mr->mr);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_dereg_mr");
	rv_fork_untrack(ibmr->addr, ibmr->length);
	free(mr);
	return 0;
}

/* libibverbs' own checks of the arguments, refused before any command: IBV_REREG_MR_ERR_INPUT
 * with errno EINVAL (0 when they pass). */
static int rereg_input_error(const struct ibv_mr *ibmr, int flags, const struct ibv_pd *pd,
			     const void *addr, size_t length, int access)
{
	const char *why = NULL;

	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)
		why = "unknown flags";
	else if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))
		why = "IBV_REREG_MR_CHANGE_TRANSLATION needs an address and a length";
	else if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
		why = "access flags given without IBV_REREG_MR_CHANGE_ACCESS";
	else if ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != ibmr->context))
		why = "IBV_REREG_MR_CHANGE_PD needs a PD of the MR's context";
	return why ? rv_refuse(EINVAL, "ibv_rereg_mr", why) : 0;
}

/* As libibverbs documents it (man ibv_rereg_mr): the keys stay, which is what a program
 * that handed its rkey to a peer before re-registering expects (pyverbs' rereg tests do).
 * rocemu's fork tracking cannot fail, so the DONT_FORK/DO_FORK codes never come; the
 * daemon changes all or nothing, so after IBV_REREG_MR_ERR_CMD the MR is still as it was. */
int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		 int access)
{
	struct rv_context *ctx = rv_ctx(ibmr->context);
	struct rv_mr *mr = (struct rv_mr *)ibmr;
	bool moves = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	int err = rereg_input_error(ibmr, flags, pd, addr, length, access);

	if (err) {
		errno = err;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)) {
		errno = rv_unsupported("ibv_rereg_mr with ON_DEMAND or HUGETLB",
				       "on-demand paging does not exist in rocemu; every MR is pinned");
		return IBV_REREG_MR_ERR_CMD;
	}
	if (moves)
		rv_fork_track(addr, length);
	pthread_mutex_lock(&ctx->lock);
	err = rocemu_rereg_mr(mr->mr, flags, flags & IBV_REREG_MR_CHANGE_PD ? rv_pd(pd)->pd : NULL,
			      addr, length, access & ~IBV_ACCESS_RELAXED_ORDERING);
	pthread_mutex_unlock(&ctx->lock);
	if (err) {
		if (moves)
			rv_fork_untrack(addr, length);
		errno = rv_fail(ctx, err, "ibv_rereg_mr");
		return IBV_REREG_MR_ERR_CMD;
	}
	if (moves) {
		rv_fork_untrack(ibmr->addr, ibmr->length);
		ibmr->addr = addr;
		ibmr->length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		ibmr->pd = pd;
	ibmr->lkey = mr->mr->lkey;
	ibmr->rkey = mr->mr->rkey;
	return 0;
}

struct ibv_mw *rv_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	struct rv_context *ctx = rv_ctx(ibpd->context);
	struct rv_mw *mw = calloc(1, sizeof(*mw));

	if (!mw)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	mw->mw = rocemu_alloc_mw(rv_pd(ibpd)->pd, (int)type);
	pthread_mutex_unlock(&ctx->lock);
	if (!mw->mw) {
		errno = rv_fail(ctx, errno, "ibv_alloc_mw");
		free(mw);
		return NULL;
	}
	mw->ibmw = (struct ibv_mw){ .context = ibpd->context, .pd = ibpd, .rkey = mw->mw->rkey,
				    .handle = mw->mw->handle, .type = type };
	return &mw->ibmw;
}

int rv_dealloc_mw(struct ibv_mw *ibmw)
{
	struct rv_context *ctx = rv_ctx(ibmw->context);
	struct rv_mw *mw = (struct rv_mw *)ibmw;
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_dealloc_mw(mw->mw);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_dealloc_mw");
	free(mw);
	return 0;
}

/* ibv_bind_mw, as rxe's provider does it: a BIND_MW work request on the QP with the next
 * key byte; the window takes the new rkey at once, and a caller whose bind then completes
 * in error undoes it. A type 1 window only (type 2 windows are bound by IBV_WR_BIND_MW),
 * never zero-based. */
int rv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr = { .wr_id = bind->wr_id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = bind->send_flags };
	struct ibv_send_wr *bad;
	int err;

	if (mw->type != IBV_MW_TYPE_1)
		return rv_refuse(EINVAL, "ibv_bind_mw", "only a type 1 window is bound with it; "
				 "post IBV_WR_BIND_MW for type 2");
	if (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return rv_refuse(EINVAL, "ibv_bind_mw", "a type 1 window is never zero-based");
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	err = rv_post_send(qp, &wr, &bad);
	if (err)
		return err;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}
