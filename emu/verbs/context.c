/* Contexts: a connection to the device's daemon, with the ops libibverbs' inline calls
 * use filled in. The daemon frees whatever the program did not destroy when it closes. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void set_ops(struct rv_context *ctx)
{
	struct verbs_context *v = &ctx->vctx;

	v->context.ops.poll_cq = rv_poll_cq;
	v->context.ops.req_notify_cq = rv_req_notify_cq;
	v->context.ops.post_send = rv_post_send;
	v->context.ops.post_recv = rv_post_recv;
	v->context.ops.post_srq_recv = rv_post_srq_recv;
	v->query_port = rv_query_port;
	v->query_device_ex = rv_query_device_ex;
	v->create_cq_ex = rv_create_cq_ex;
	v->create_qp_ex = rv_create_qp_ex;
	v->create_srq_ex = rv_create_srq_ex;
	rv_set_unsupported_ops(v);
	v->sz = sizeof(*v);
	v->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
}

static int context_connect(struct rv_context *ctx, struct rv_device *dev)
{
	int err;

	ctx->rc = rocemu_open(dev->socket);
	if (!ctx->rc)
		return errno;
	err = rocemu_query_device(ctx->rc, &ctx->attr);
	if (!err)
		err = rocemu_query_port(ctx->rc, &ctx->port);
	if (!err)
		err = rv_async_init(ctx);
	if (err)
		rocemu_close(ctx->rc);
	return err;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct rv_device *dev = (struct rv_device *)device;
	struct rv_context *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx)
		return NULL;
	err = context_connect(ctx, dev);
	if (err) {
		free(ctx);
		rv_warn("cannot open %s (the daemon at %s): %s", dev->ibdev.name, dev->socket,
			strerror(err));
		errno = err;
		return NULL;
	}
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	ctx->dev = dev;
	ctx->vctx.context.device = device;
	/* the command channel to the device, as a kernel device's uverbs file is: programs
	 * dup() it to import the context elsewhere, which then fails with EOPNOTSUPP */
	ctx->vctx.context.cmd_fd = rocemu_context_fd(ctx->rc);
	ctx->vctx.context.async_fd = ctx->async_ep;
	ctx->vctx.context.num_comp_vectors = 1;
	set_ops(ctx);
	return &ctx->vctx.context;
}

int ibv_close_device(struct ibv_context *ibctx)
{
	struct rv_context *ctx = rv_ctx(ibctx);

	rocemu_close(ctx->rc);
	close(ctx->async_ep);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
	return 0;
}
