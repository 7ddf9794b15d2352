/* Memory regions: the buffer's pages move onto the arena (arena.c), then the daemon is
 * handed the arena fd with fd_offset = addr and the iova peers will use. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The arena's fd goes with the connection's first registration only: the daemon keeps it,
 * and later requests name it by its inode. A daemon that holds another (a forked child's
 * registration on the same connection handed over its own arena) says ESTALE, and the
 * request goes again with the fd. */
static int send_reg_mr(struct rocemu_pd *pd, int fd, uint64_t ino, struct mr_priv *mr,
		       uint64_t iova, int access)
{
	struct proto_reg_mr req = {
		.hdr.op = PROTO_REG_MR,
		.pd = pd->handle,
		.access = (uint32_t)access,
		.iova = iova,
		.length = mr->pub.length,
		.fd_offset = (uintptr_t)mr->pub.addr,
		.memfd_ino = ino,
	};
	struct proto_reg_mr_reply r;
	bool held = __atomic_load_n(&pd->ctx->memfd_held, __ATOMIC_RELAXED) == ino;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req), .fds = &fd, .nfds = held ? 0 : 1 };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	int err = rpc_call(pd->ctx, &in, &out);

	if (err == ESTALE && held) {
		in.nfds = 1;
		err = rpc_call(pd->ctx, &in, &out);
	}
	if (err)
		return err;
	if (in.nfds)
		__atomic_store_n(&pd->ctx->memfd_held, ino, __ATOMIC_RELAXED);
	mr->pub.handle = r.handle;
	mr->pub.lkey = r.lkey;
	mr->pub.rkey = r.rkey;
	return 0;
}

struct rocemu_mr *rocemu_reg_mr_iova(struct rocemu_pd *pd, void *addr, size_t length,
				     uint64_t iova, int access)
{
	struct mr_priv *mr;
	uint64_t ino;
	int fd, err;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	mr->ctx = pd->ctx;
	mr->pub = (struct rocemu_mr){ .pd = pd, .addr = addr, .length = length };
	err = arena_adopt(addr, length, &fd, &ino);
	if (err)
		rpc_fail(pd->ctx, err, "cannot share [%p, +%zu) with the daemon: %s", addr, length,
			 strerror(err));
	else
		err = send_reg_mr(pd, fd, ino, mr, iova, access);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	LIST_INSERT_HEAD(&pd->ctx->mrs, mr, link);
	return &mr->pub;
}

struct rocemu_mr *rocemu_reg_mr(struct rocemu_pd *pd, void *addr, size_t length, int access)
{
	return rocemu_reg_mr_iova(pd, addr, length, (uintptr_t)addr, access);
}

/* The new buffer moves onto the arena first, as at registration; the daemon swaps it in
 * only once it has pinned it, so a refusal leaves the MR as it was. */
int rocemu_rereg_mr(struct rocemu_mr *pub, int flags, struct rocemu_pd *pd, void *addr,
		    size_t length, int access)
{
	bool moves = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	struct proto_rereg_mr req = {
		.hdr.op = PROTO_REREG_MR, .flags = (uint32_t)flags, .access = (uint32_t)access,
		.iova = (uintptr_t)addr, .length = length, .fd_offset = (uintptr_t)addr,
	};
	struct proto_reg_mr_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	struct mr_priv *mr;
	int fd, err;

	if (!pub || ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->ctx != to_mr(pub)->ctx)))
		return EINVAL;
	mr = to_mr(pub);
	req.handle = pub->handle;
	req.pd = flags & IBV_REREG_MR_CHANGE_PD ? pd->handle : 0;
	if (moves) {
		err = arena_adopt(addr, length, &fd, NULL);
		if (err)
			return rpc_fail(mr->ctx, err, "cannot share [%p, +%zu) with the daemon: %s",
					addr, length, strerror(err));
		in.fds = &fd;
		in.nfds = 1;
	}
	err = rpc_call(mr->ctx, &in, &out);
	if (err)
		return err;
	if (flags & IBV_REREG_MR_CHANGE_PD)
		pub->pd = pd;
	if (moves) {
		pub->addr = addr;
		pub->length = length;
	}
	pub->lkey = r.lkey;
	pub->rkey = r.rkey;
	return 0;
}

int rocemu_dereg_mr(struct rocemu_mr *pub)
{
	struct mr_priv *mr;
	int err;

	if (!pub)
		return EINVAL;
	mr = to_mr(pub);
	err = rpc_handle_op(mr->ctx, PROTO_DEREG_MR, pub->handle);
	if (err)
		return err;
	LIST_REMOVE(mr, link);
	free(mr);
	return 0;
}
