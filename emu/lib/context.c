/* Contexts: finding and connecting to the daemon's socket, the HELLO handshake, the cached
 * device attributes, the port query, and closing.
 *
 * Closing the socket is what tells the daemon to destroy everything the client owned, so
 * rocemu_close does not ask it to destroy objects one by one: it only frees the local side
 * of whatever the application still holds (those pointers are invalid afterwards). */
#include "emu/lib/lib_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOCK_SUFFIX ".sock"

static bool is_socket_name(int dirfd, const char *name)
{
	size_t len = strlen(name), suffix = strlen(SOCK_SUFFIX);
	struct stat st;

	if (len <= suffix || strcmp(name + len - suffix, SOCK_SUFFIX) != 0)
		return false;
	return fstatat(dirfd, name, &st, 0) == 0 && S_ISSOCK(st.st_mode);
}

int ctx_find_socket(const char *dir, char *out, size_t out_len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned found = 0;
	int err = 0;

	if (!d)
		return errno;
	while ((e = readdir(d)) != NULL) {
		if (!is_socket_name(dirfd(d), e->d_name))
			continue;
		if (found++ == 0 &&
		    (size_t)snprintf(out, out_len, "%s/%s", dir, e->d_name) >= out_len)
			err = ENAMETOOLONG;
	}
	closedir(d);
	if (err)
		return err;
	return found == 0 ? ENOENT : found > 1 ? ENOTUNIQ : 0;
}

static int pick_path(const char *path, char *out, size_t out_len)
{
	const char *env = getenv("ROCEMU_SOCKET");

	if (!path && env && env[0])
		path = env;
	if (!path)
		return ctx_find_socket(ROCEMU_DEFAULT_SOCKET_DIR, out, out_len);
	if (!path[0])
		return ENOENT;
	if (strlen(path) >= out_len)
		return ENAMETOOLONG;
	strcpy(out, path);
	return 0;
}

static int connect_socket(struct rocemu_context *ctx)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memcpy(sa.sun_path, ctx->path, sizeof(sa.sun_path));
	ctx->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (ctx->sock < 0)
		return errno;
	if (connect(ctx->sock, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return errno;
	return 0;
}

static int hello(struct rocemu_context *ctx)
{
	struct proto_hello req = { .hdr.op = PROTO_HELLO, .version = PROTO_VERSION };
	struct proto_hello_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r), .fds = &ctx->event_fd, .nfds = 1 };
	int err = rpc_call(ctx, &in, &out);

	if (err)
		return err;
	if (r.version != PROTO_VERSION)
		return EPROTO;
	ctx->device = (struct rocemu_device_attr){
		.max_qp = r.max_qp,
		.max_qp_wr = r.max_qp_wr,
		.max_cqe = r.max_cqe,
		.max_mr = r.max_mr,
		.max_mr_size = r.max_mr_size,
		.max_sge = r.max_sge,
		.pin_limit = r.pin_limit,
		.max_qp_rd_atom = r.max_qp_rd_atom,
		.atomic_cap = (enum ibv_atomic_cap)r.atomic_cap,
		.max_srq = r.max_srq,
		.max_srq_wr = r.max_srq_wr,
		.max_inline_data = r.max_inline_data,
	};
	return 0;
}

/* There is no context to hold a message when opening fails: errno is the whole story. */
struct rocemu_context *rocemu_open(const char *path)
{
	struct rocemu_context *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx)
		return NULL;
	ctx->sock = -1;
	ctx->event_fd = -1;
	LIST_INIT(&ctx->pds);
	LIST_INIT(&ctx->mrs);
	LIST_INIT(&ctx->mws);
	LIST_INIT(&ctx->cqs);
	LIST_INIT(&ctx->qps);
	LIST_INIT(&ctx->srqs);
	LIST_INIT(&ctx->ahs);
	err = pick_path(path, ctx->path, sizeof(ctx->path));
	if (!err)
		err = connect_socket(ctx);
	if (!err)
		err = hello(ctx);
	if (err) {
		if (ctx->sock >= 0)
			close(ctx->sock);
		if (ctx->event_fd >= 0)
			close(ctx->event_fd);
		free(ctx);
		errno = err;
		return NULL;
	}
	return ctx;
}

/* The local side only: the daemon frees its side when the socket closes. */
static void free_objects(struct rocemu_context *ctx)
{
	while (!LIST_EMPTY(&ctx->qps))
		qp_release(LIST_FIRST(&ctx->qps));
	while (!LIST_EMPTY(&ctx->cqs))
		cq_release(LIST_FIRST(&ctx->cqs));
	while (!LIST_EMPTY(&ctx->srqs))
		srq_release(LIST_FIRST(&ctx->srqs));
	ring_park_empty(ctx);
	while (!LIST_EMPTY(&ctx->ahs))
		ah_release(LIST_FIRST(&ctx->ahs));
	while (!LIST_EMPTY(&ctx->mws)) {
		struct mw_priv *mw = LIST_FIRST(&ctx->mws);

		LIST_REMOVE(mw, link);
		free(mw);
	}
	while (!LIST_EMPTY(&ctx->mrs)) {
		struct mr_priv *mr = LIST_FIRST(&ctx->mrs);

		LIST_REMOVE(mr, link);
		free(mr);
	}
	while (!LIST_EMPTY(&ctx->pds)) {
		struct rocemu_pd *pd = LIST_FIRST(&ctx->pds);

		LIST_REMOVE(pd, link);
		free(pd);
	}
}

int rocemu_close(struct rocemu_context *ctx)
{
	if (!ctx)
		return 0;
	free_objects(ctx);
	close(ctx->sock);
	if (ctx->event_fd >= 0)
		close(ctx->event_fd);
	free(ctx);
	return 0;
}

int rocemu_async_event_fd(const struct rocemu_context *ctx)
{
	return ctx ? ctx->event_fd : -1;
}

static struct rocemu_cq *cq_of(struct rocemu_context *ctx, uint32_t handle)
{
	struct rocemu_cq *cq;

	LIST_FOREACH(cq, &ctx->cqs, link)
		if (cq->handle == handle)
			return cq;
	return NULL;
}

/* The kernel drops a destroyed CQ's events that were not read; here they wait in the pipe,
 * and a new CQ may take the handle they name. What the pipe holds at the destroy was
 * written before it, so the next that many events are looked at for the handle. Up to
 * GONE_CQS_MAX destroys are remembered at once (the oldest goes first): only a program
 * that destroys more CQs than that while leaving their events unread could be told of an
 * old CQ's loss as the new one's. */
void ctx_cq_gone(struct rocemu_context *ctx, uint32_t handle)
{
	int bytes = 0;

	if (ctx->event_fd < 0 || ioctl(ctx->event_fd, FIONREAD, &bytes) != 0 ||
	    bytes < (int)sizeof(struct proto_async_event))
		return;
	if (ctx->n_gone_cqs == GONE_CQS_MAX)
		memmove(ctx->gone_cqs, ctx->gone_cqs + 1, --ctx->n_gone_cqs * sizeof(ctx->gone_cqs[0]));
	ctx->gone_cqs[ctx->n_gone_cqs++] = (struct gone_cq){
		.handle = handle, .queued = (uint32_t)bytes / sizeof(struct proto_async_event) };
}

/* Whether ev, just read, is about a CQ destroyed since it was written; it passes every
 * remembered destroy's window by one. */
static bool event_of_gone_cq(struct rocemu_context *ctx, const struct proto_async_event *ev)
{
	unsigned kept = 0;
	bool gone = false;

	for (unsigned i = 0; i < ctx->n_gone_cqs; i++) {
		struct gone_cq *g = &ctx->gone_cqs[i];

		gone |= ev->type == IBV_EVENT_CQ_ERR && ev->handle == g->handle;
		if (--g->queued > 0)
			ctx->gone_cqs[kept++] = *g;
	}
	ctx->n_gone_cqs = kept;
	return gone;
}

int rocemu_take_async_event(struct rocemu_context *ctx, struct rocemu_async_event *event)
{
	struct proto_async_event ev;
	ssize_t n;

	if (!ctx || !event)
		return EINVAL;
	do
		n = read(ctx->event_fd, &ev, sizeof(ev));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? EAGAIN : errno;
	if (n == 0)
		return rpc_gone(ctx);
	if (n != (ssize_t)sizeof(ev))
		return rpc_fail(ctx, EPROTO, "the daemon at %s wrote an event of %zd bytes",
				ctx->path, n);
	*event = (struct rocemu_async_event){ .type = ev.type };
	if (event_of_gone_cq(ctx, &ev))
		event->cq = NULL;
	else if (ev.type == IBV_EVENT_CQ_ERR)
		event->cq = cq_of(ctx, ev.handle);
	else if (ev.type == IBV_EVENT_PORT_ACTIVE || ev.type == IBV_EVENT_PORT_ERR)
		event->port_num = (uint8_t)ev.handle;
	return 0;
}

int rocemu_context_fd(const struct rocemu_context *ctx)
{
	return ctx ? ctx->sock : -1;
}

const char *rocemu_socket_path(const struct rocemu_context *ctx)
{
	return ctx ? ctx->path : "";
}

const char *rocemu_last_error(const struct rocemu_context *ctx)
{
	return ctx ? ctx->last_error : "";
}

int rocemu_query_device(struct rocemu_context *ctx, struct rocemu_device_attr *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	*attr = ctx->device;
	return 0;
}

int rocemu_query_port(struct rocemu_context *ctx, struct rocemu_port_attr *attr)
{
	struct proto_handle req = { .hdr.op = PROTO_QUERY_PORT };
	struct proto_port_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	int err;

	if (!ctx || !attr)
		return EINVAL;
	err = rpc_call(ctx, &in, &out);
	if (err)
		return err;
	memset(attr, 0, sizeof(*attr));
	attr->state = (enum ibv_port_state)r.state;
	attr->max_mtu = (enum ibv_mtu)r.max_mtu;
	attr->active_mtu = (enum ibv_mtu)r.active_mtu;
	attr->ipv4 = r.ipv4;
	memcpy(attr->ifname, r.ifname, sizeof(attr->ifname) - 1);
	memcpy(attr->mac, r.mac, sizeof(attr->mac));
	if (r.ngids > ROCEMU_MAX_GIDS)
		return rpc_fail(ctx, EPROTO, "the daemon at %s sent %u GIDs", ctx->path, r.ngids);
	attr->gid_count = r.ngids;
	for (unsigned i = 0; i < r.ngids; i++)
		memcpy(attr->gids[i].raw, r.gids[i], 16);
	attr->gid = attr->gids[0];
	return 0;
}
