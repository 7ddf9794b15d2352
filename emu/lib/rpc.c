/* The control channel: one SOCK_SEQPACKET request, one reply, fds beside them as
 * SCM_RIGHTS. Every way the daemon can fail us ends in an error code and a sentence in the
 * context's last error; nothing here blocks except waiting for the reply, which the
 * daemon always sends (or it closes the socket, which wakes us too). */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* More fds than any reply carries, so a misbehaving daemon's extras are seen (and closed)
 * rather than silently truncated. */
#define RPC_MAX_FDS (PROTO_MAX_REPLY_FDS + 2)
/* Errno values the kernel can return; anything else in a status is not one. */
#define RPC_MAX_ERRNO 4095

/* A reply of any op, read through its common head. */
union rpc_buf {
	struct proto_reply r;
	char bytes[PROTO_MAX_MSG];
};

union rpc_cmsg {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int) * RPC_MAX_FDS)];
};

int rpc_fail(struct rocemu_context *ctx, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->last_error, sizeof(ctx->last_error), fmt, ap);
	va_end(ap);
	return err;
}

int rpc_gone(struct rocemu_context *ctx)
{
	ctx->dead = true;
	return rpc_fail(ctx, EPIPE, "the daemon at %s went away", ctx->path);
}

void rpc_close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int rpc_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags >= 0 && (flags & O_NONBLOCK))
		return 0;                /* the daemon made it so (its pipes are) */
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
		return errno;
	return 0;
}

static bool peer_closed(int err)
{
	return err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ECONNREFUSED;
}

static int send_request(struct rocemu_context *ctx, const struct rpc_msg *req)
{
	union rpc_cmsg cbuf;
	struct iovec iov = { .iov_base = req->buf, .iov_len = req->len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (req->nfds) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * req->nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * req->nfds);
		memcpy(CMSG_DATA(c), req->fds, sizeof(int) * req->nfds);
	}
	do
		n = sendmsg(ctx->sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0 && peer_closed(errno))
		return rpc_gone(ctx);
	if (n < 0)
		return rpc_fail(ctx, errno, "sending to the daemon at %s: %s", ctx->path,
				strerror(errno));
	return 0;
}

/* Moves the fds of every SCM_RIGHTS message into fds (at most max); returns the count
 * received, closing whatever does not fit. */
static unsigned take_fds(struct msghdr *msg, int *fds, unsigned max)
{
	unsigned got = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (got < max)
				fds[got] = fd;
			else
				close(fd);
			got++;
		}
	}
	return got;
}

/* The reply's bytes into buf, its length into *len, its fds into fds. */
static int recv_reply(struct rocemu_context *ctx, union rpc_buf *buf, size_t *len, int *fds,
		      unsigned *nfds)
{
	union rpc_cmsg cbuf;
	struct iovec iov = { .iov_base = buf->bytes, .iov_len = sizeof(buf->bytes) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	ssize_t n;

	do
		n = recvmsg(ctx->sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0 || (n < 0 && peer_closed(errno)))
		return rpc_gone(ctx);
	if (n < 0)
		return rpc_fail(ctx, errno, "receiving from the daemon at %s: %s", ctx->path,
				strerror(errno));
	*nfds = take_fds(&msg, fds, RPC_MAX_FDS);
	*len = (size_t)n;
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		rpc_close_fds(fds, *nfds < RPC_MAX_FDS ? *nfds : RPC_MAX_FDS);
		return rpc_fail(ctx, EPROTO, "the daemon at %s sent an oversized reply",
				ctx->path);
	}
	return 0;
}

/* A failure reply may come as the op's own reply struct or as a bare proto_reply. */
static int check_status(struct rocemu_context *ctx, const struct proto_reply *r)
{
	int32_t status = r->hdr.status;

	if (status == 0)
		return 0;
	if (status > 0 || status < -RPC_MAX_ERRNO)
		return rpc_fail(ctx, EPROTO, "the daemon at %s replied with status %d",
				ctx->path, (int)status);
	if (r->errmsg[0] == '\0')
		return rpc_fail(ctx, -status, "%s", strerror(-status));
	return rpc_fail(ctx, -status, "%.*s", PROTO_ERRMSG, r->errmsg);
}

static int check_reply(struct rocemu_context *ctx, uint32_t op, const struct proto_reply *r,
		       size_t len, const struct rpc_msg *reply, unsigned nfds)
{
	int err;

	if (len < sizeof(*r) || r->hdr.op != op)
		return rpc_fail(ctx, EPROTO, "the daemon at %s answered op %u with %zu bytes "
				"of op %u", ctx->path, op, len,
				len >= sizeof(r->hdr) ? r->hdr.op : 0);
	err = check_status(ctx, r);
	if (err)
		return err;
	if (len != reply->len || nfds != reply->nfds)
		return rpc_fail(ctx, EPROTO, "the daemon at %s answered op %u with %zu bytes "
				"and %u fds (expected %zu and %u)", ctx->path, op, len, nfds,
				reply->len, reply->nfds);
	return 0;
}

/* whole: a failure's reply is copied too when it has the success's size (a batch's says
 * how many requests ran) */
static int exchange(struct rocemu_context *ctx, const struct rpc_msg *req, struct rpc_msg *reply,
		    bool whole)
{
	union rpc_buf buf;
	int fds[RPC_MAX_FDS];
	unsigned nfds = 0;
	size_t len = 0;
	uint32_t op = ((const struct proto_hdr *)req->buf)->op;
	int err;

	if (ctx->dead)
		return rpc_gone(ctx);
	err = send_request(ctx, req);
	if (!err)
		err = recv_reply(ctx, &buf, &len, fds, &nfds);
	if (err)
		return err;
	err = check_reply(ctx, op, &buf.r, len, reply, nfds);
	if (err) {
		if (whole && buf.r.hdr.op == op && len == reply->len && nfds == 0)
			memcpy(reply->buf, buf.bytes, len);
		rpc_close_fds(fds, nfds < RPC_MAX_FDS ? nfds : RPC_MAX_FDS);
		return err;
	}
	memcpy(reply->buf, buf.bytes, len);
	if (nfds)
		memcpy(reply->fds, fds, nfds * sizeof(int));
	return 0;
}

int rpc_call(struct rocemu_context *ctx, const struct rpc_msg *req, struct rpc_msg *reply)
{
	return exchange(ctx, req, reply, false);
}

int rpc_call_whole(struct rocemu_context *ctx, const struct rpc_msg *req, struct rpc_msg *reply)
{
	return exchange(ctx, req, reply, true);
}

/* The flag is the message's only while it is sent: a caller whose send failed may still
 * run the same request and wait for its reply. */
int rpc_post(struct rocemu_context *ctx, void *req, size_t req_len)
{
	struct proto_hdr *hdr = req;
	struct rpc_msg in = { .buf = req, .len = req_len };
	int err;

	if (ctx->dead)
		return rpc_gone(ctx);
	hdr->op |= PROTO_NO_REPLY;
	err = send_request(ctx, &in);
	hdr->op &= ~PROTO_NO_REPLY;
	return err;
}

int rpc_simple(struct rocemu_context *ctx, void *req, size_t req_len)
{
	struct proto_reply r;
	struct rpc_msg in = { .buf = req, .len = req_len };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };

	return rpc_call(ctx, &in, &out);
}

int rpc_handle_op(struct rocemu_context *ctx, uint32_t op, uint32_t handle)
{
	struct proto_handle req = { .hdr.op = op, .handle = handle };

	return rpc_simple(ctx, &req, sizeof(req));
}

bool rpc_alive(struct rocemu_context *ctx)
{
	struct pollfd p = { .fd = ctx->sock, .events = POLLRDHUP };

	if (ctx->dead)
		return false;
	if (poll(&p, 1, 0) > 0 && (p.revents & RPC_HANGUP))
		rpc_gone(ctx);
	return !ctx->dead;
}
