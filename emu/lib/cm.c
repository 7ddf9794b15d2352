/* RDMA CM requests: the verbs layer's rdma_cm calls (emu/rdmacm/) go to the daemon's CM
 * through here, one request and one fixed-size reply each. */
#include "emu/lib/lib_int.h"

int rocemu_cm_request(struct rocemu_context *ctx, void *req, size_t req_len, void *reply,
		      size_t reply_len, int fd)
{
	struct proto_reply bare;
	struct rpc_msg q = { .buf = req, .len = req_len, .fds = &fd, .nfds = fd >= 0 };
	struct rpc_msg r = { .buf = reply ? reply : &bare, .len = reply ? reply_len : sizeof(bare) };

	return rpc_call(ctx, &q, &r);
}

int rocemu_cm_post(struct rocemu_context *ctx, void *req, size_t req_len)
{
	return rpc_post(ctx, req, req_len);
}
