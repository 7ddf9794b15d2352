/* The control socket: one context per connection (a process's connections share its
 * pinning budget), a request table checked for exact sizes, and replies that may carry
 * file descriptors. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/daemon/cm/cm.h"
#include "emu/daemon/control/ctl.h"
#include "emu/daemon/control/control.h"
#include "emu/rocemu.h"
#include "emu/daemon/log.h"

#define CAP_IPC_LOCK_BIT 14

typedef int (*handler_fn)(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);

struct op_entry {
	size_t req_size;
	size_t rep_size;
	bool takes_fd;
	handler_fn fn;
	bool fd_optional; /* the handler decides whether the request needs its descriptor */
	bool whole_reply; /* sent whole on failure too */
};

static int op_batch(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);

static const struct op_entry ops[PROTO_OP_COUNT] = {
	[PROTO_HELLO] = { sizeof(struct proto_hello), sizeof(struct proto_hello_reply), false, op_hello },
	[PROTO_QUERY_PORT] = { sizeof(struct proto_handle), sizeof(struct proto_port_reply), false, op_query_port },
	[PROTO_ALLOC_PD] = { sizeof(struct proto_handle), sizeof(struct proto_handle_reply), false, op_alloc_pd },
	[PROTO_DEALLOC_PD] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_dealloc_pd },
	[PROTO_REG_MR] = { sizeof(struct proto_reg_mr), sizeof(struct proto_reg_mr_reply), false, op_reg_mr, .fd_optional = true },
	[PROTO_DEREG_MR] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_dereg_mr },
	[PROTO_CREATE_CQ] = { sizeof(struct proto_create_cq), sizeof(struct proto_create_cq_reply), false, op_create_cq },
	[PROTO_DESTROY_CQ] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_destroy_cq },
	[PROTO_CREATE_QP] = { sizeof(struct proto_create_qp), sizeof(struct proto_create_qp_reply), false, op_create_qp },
	[PROTO_MODIFY_QP] = { sizeof(struct proto_modify_qp), sizeof(struct proto_reply), false, op_modify_qp },
	[PROTO_QUERY_QP] = { sizeof(struct proto_handle), sizeof(struct proto_query_qp_reply), false, op_query_qp },
	[PROTO_DESTROY_QP] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_destroy_qp },
	[PROTO_STATS] = { sizeof(struct proto_handle), sizeof(struct proto_stats_reply), false, op_stats },
	[PROTO_SET_FAULT] = { sizeof(struct proto_fault), sizeof(struct proto_reply), false, op_set_fault },
	[PROTO_STATUS] = { sizeof(struct proto_handle), sizeof(struct proto_status_reply), false, op_status },
	[PROTO_LIST] = { sizeof(struct proto_list), sizeof(struct proto_list_reply), false, op_list },
	[PROTO_CREATE_SRQ] = { sizeof(struct proto_create_srq), sizeof(struct proto_create_srq_reply), false, op_create_srq },
	[PROTO_MODIFY_SRQ] = { sizeof(struct proto_modify_srq), sizeof(struct proto_reply), false, op_modify_srq },
	[PROTO_QUERY_SRQ] = { sizeof(struct proto_handle), sizeof(struct proto_query_srq_reply), false, op_query_srq },
	[PROTO_DESTROY_SRQ] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_destroy_srq },
	[PROTO_CREATE_AH] = { sizeof(struct proto_create_ah), sizeof(struct proto_handle_reply), false, op_create_ah },
	[PROTO_DESTROY_AH] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_destroy_ah },
	[PROTO_RESIZE_CQ] = { sizeof(struct proto_resize_cq), sizeof(struct proto_create_cq_reply), false, op_resize_cq },
	[PROTO_ALLOC_MW] = { sizeof(struct proto_alloc_mw), sizeof(struct proto_alloc_mw_reply), false, op_alloc_mw },
	[PROTO_DEALLOC_MW] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_dealloc_mw },
	[PROTO_CM_CHANNEL] = { sizeof(struct proto_handle), sizeof(struct proto_handle_reply), true, op_cm_channel },
	[PROTO_CM_CLOSE_CHANNEL] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_cm_close_channel },
	[PROTO_CM_LISTEN] = { sizeof(struct proto_cm_listen), sizeof(struct proto_handle_reply), false, op_cm_listen },
	[PROTO_CM_UNLISTEN] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_cm_unlisten },
	[PROTO_CM_RESOLVE] = { sizeof(struct proto_cm_resolve), sizeof(struct proto_reply), false, op_cm_resolve },
	[PROTO_CM_CONNECT] = { sizeof(struct proto_cm_connect), sizeof(struct proto_handle_reply), false, op_cm_connect },
	[PROTO_CM_ACCEPT] = { sizeof(struct proto_cm_accept), sizeof(struct proto_reply), false, op_cm_accept },
	[PROTO_CM_REJECT] = { sizeof(struct proto_cm_reject), sizeof(struct proto_reply), false, op_cm_reject },
	[PROTO_CM_ESTABLISH] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_cm_establish },
	[PROTO_CM_DISCONNECT] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_cm_disconnect },
	[PROTO_CM_DESTROY] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_cm_destroy },
	[PROTO_CM_MIGRATE] = { sizeof(struct proto_cm_migrate), sizeof(struct proto_reply), false, op_cm_migrate },
	[PROTO_ATTACH_MCAST] = { sizeof(struct proto_mcast), sizeof(struct proto_reply), false, op_attach_mcast },
	[PROTO_DETACH_MCAST] = { sizeof(struct proto_mcast), sizeof(struct proto_reply), false, op_detach_mcast },
	[PROTO_REREG_MR] = { sizeof(struct proto_rereg_mr), sizeof(struct proto_reg_mr_reply), false, op_rereg_mr, .fd_optional = true },
	[PROTO_BATCH] = { sizeof(struct proto_batch), sizeof(struct proto_batch_reply), false, op_batch, .whole_reply = true },
	[PROTO_CREATE_QP_CQS] = { sizeof(struct proto_create_qp_cqs), sizeof(struct proto_create_qp_cqs_reply), false, op_create_qp_cqs },
};

static bool batchable(uint32_t op)
{
	const struct op_entry *e = op < PROTO_OP_COUNT ? &ops[op] : NULL;

	return e && e->fn && e->rep_size == sizeof(struct proto_reply) && !e->takes_fd &&
	       !e->fd_optional && op != PROTO_BATCH;
}

/* Where each request of a batch starts in its body, all checked before any runs. */
static int batch_layout(const struct proto_batch *b, size_t *at, struct ctl_reply *rep)
{
	size_t off = 0;

	if (b->count == 0 || b->count > PROTO_BATCH_MAX) {
		op_error(rep, "a batch of %u requests (1 to %d)", b->count, PROTO_BATCH_MAX);
		return -EPROTO;
	}
	for (uint32_t i = 0; i < b->count; i++) {
		const struct proto_hdr *h = (const struct proto_hdr *)(b->body + off);

		if (b->len[i] < sizeof(*h) || b->len[i] > sizeof(b->body) - off) {
			op_error(rep, "batch request %u: %u bytes at %zu of %zu", i, b->len[i], off,
				 sizeof(b->body));
			return -EPROTO;
		}
		if (!batchable(h->op) || b->len[i] != ops[h->op].req_size) {
			op_error(rep, "batch request %u: op %u of %u bytes cannot be batched", i,
				 h->op, b->len[i]);
			return -EPROTO;
		}
		at[i] = off;
		off += (b->len[i] + 7) & ~7u;
	}
	return 0;
}

/* A request that waits for a neighbour defers the whole batch, which goes on from that
 * request when it is handled again (nothing else of the client is read meanwhile). */
static int op_batch(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_batch *b = REQ(proto_batch);
	struct proto_batch_reply *r = REP(proto_batch_reply);
	size_t at[PROTO_BATCH_MAX];
	uint32_t i = c->batch_next;
	int rc = batch_layout(b, at, rep);

	c->batch_next = 0;
	for (; !rc && i < b->count; i++) {
		struct ctl_request sub = { b->body + at[i], -1 };
		struct ctl_reply sub_rep = { .len = sizeof(struct proto_reply) };

		sub_rep.u.r.hdr.op = ((const struct proto_hdr *)sub.msg)->op;
		rc = ops[sub_rep.u.r.hdr.op].fn(c, &sub, &sub_rep);
		if (rc == -EINPROGRESS)
			c->batch_next = i;
		if (rc) {
			memcpy(rep->u.r.errmsg, sub_rep.u.r.errmsg, sizeof(rep->u.r.errmsg));
			break;
		}
	}
	r->done = i;
	return rc;
}

static void send_reply(struct client *c, struct ctl_reply *rep)
{
	char cbuf[CMSG_SPACE(sizeof(int) * PROTO_MAX_REPLY_FDS)] = { 0 };
	struct iovec iov = { rep->u.bytes, rep->len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (rep->nfds) {
		struct cmsghdr *cm;

		msg.msg_control = cbuf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)rep->nfds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)rep->nfds);
		memcpy(CMSG_DATA(cm), rep->fds, sizeof(int) * (size_t)rep->nfds);
	}
	if (sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_limited("client pid %d: reply lost: %s", (int)c->own.pid, strerror(errno));
}

/* Receives one request and the descriptors beside it; more than one is refused. */
static ssize_t recv_request(struct client *c, uint8_t *buf, int *fd, bool *extra_fds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { buf, PROTO_MAX_MSG };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	*fd = -1;
	*extra_fds = (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0;
	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		int nfd, fds[4];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)nfd);
		for (int i = 0; i < nfd; i++) {
			if (*fd < 0)
				*fd = fds[i];
			else {
				close(fds[i]);
				*extra_fds = true;
			}
		}
	}
	return n;
}

static void handle_request(struct client *c, const uint8_t *buf, size_t n, int fd,
			   bool extra_fds);

/* The handler waits for a neighbour: the request is kept and handled again by
 * ctl_resume(), and nothing more is read from this client until then, so its requests are
 * still answered in order. False (and the request fails) when it cannot be kept. */
static bool defer(struct client *c, const uint8_t *buf, size_t n)
{
	c->deferred = malloc(n);
	if (!c->deferred) {
		neigh_stop(&c->own.neigh);
		return false;
	}
	memcpy(c->deferred, buf, n);
	c->deferred_len = n;
	ev_io_stop(c->own.dev->loop, &c->watcher);
	c->own.dev->cnt.ctl_neigh_waits++;
	return true;
}

void ctl_resume(struct client *c)
{
	uint8_t *req = c->deferred;
	size_t n = c->deferred_len;

	c->deferred = NULL;
	if (req)
		handle_request(c, req, n, -1, false);
	free(req);
	if (!c->deferred)
		ev_io_start(c->own.dev->loop, &c->watcher);
}

static bool fd_fits(const struct op_entry *e, int fd)
{
	return e->fd_optional || (fd >= 0) == e->takes_fd;
}

/* A request sent with PROTO_NO_REPLY that failed: nobody hears of it but the log. */
static void unanswered_failed(struct client *c, const struct ctl_reply *rep)
{
	c->own.dev->cnt.ctl_unanswered_failed++;
	log_limited("client pid %d: op %u, sent with no reply wanted, failed: %s",
		    (int)c->own.pid, rep->u.r.hdr.op, rep->u.r.errmsg);
}

static void handle_request(struct client *c, const uint8_t *buf, size_t n, int fd,
			   bool extra_fds)
{
	const struct proto_hdr *hdr = (const struct proto_hdr *)buf;
	uint32_t op = n >= sizeof(*hdr) ? hdr->op & ~PROTO_NO_REPLY : 0;
	bool unanswered = n >= sizeof(*hdr) && (hdr->op & PROTO_NO_REPLY);
	const struct op_entry *e = NULL;
	struct ctl_reply rep = { .len = sizeof(struct proto_reply), .fds = { -1, -1 } };
	struct ctl_request req = { buf, fd };

	if (op < PROTO_OP_COUNT && ops[op].fn)
		e = &ops[op];
	rep.u.r.hdr.op = op;
	if (!e) {
		unanswered = false;
		rep.u.r.hdr.status = -EOPNOTSUPP;
		op_error(&rep, "unknown operation");
	} else if (unanswered && !batchable(op) && op != PROTO_BATCH) {
		unanswered = false;     /* refused, and told: the client broke the protocol */
		rep.u.r.hdr.status = -EPROTO;
		op_error(&rep, "op %u cannot be sent with no reply wanted", op);
	} else if (n != e->req_size || extra_fds || !fd_fits(e, fd)) {
		rep.u.r.hdr.status = -EPROTO;
		op_error(&rep, "malformed request: %zu bytes%s", n,
			 !fd_fits(e, fd) || extra_fds ? ", wrong descriptors" : "");
	} else {
		rep.len = e->rep_size;
		rep.u.r.hdr.status = e->fn(c, &req, &rep);
	}
	if (rep.u.r.hdr.status == -EINPROGRESS && fd < 0 && defer(c, buf, n))
		return;
	c->batch_next = 0;
	if (rep.u.r.hdr.status == -EINPROGRESS) {
		rep.u.r.hdr.status = -ENOMEM;
		op_error(&rep, "out of memory while waiting for a neighbour");
	}
	if (rep.u.r.hdr.status < 0) {
		if (!e || !e->whole_reply || rep.len != e->rep_size)
			rep.len = sizeof(struct proto_reply);
		rep.nfds = 0;
		if (!unanswered)   /* (unanswered_failed says it below) */
			log_debug("client pid %d: op %u failed: %s", (int)c->own.pid,
				  rep.u.r.hdr.op, rep.u.r.errmsg);
	}
	if (fd >= 0)
		close(fd);
	if (unanswered) {
		if (rep.u.r.hdr.status < 0)
			unanswered_failed(c, &rep);
		return;
	}
	send_reply(c, &rep);
	for (int i = 0; rep.fds_given && i < rep.nfds; i++)
		close(rep.fds[i]);
}

/* Registering memory or making a QP can take milliseconds, and a turn of the loop may
 * serve many clients' requests: before each one the data path has a turn (the frames that
 * arrived read, the ACKs due, a turn of the requesters waiting and the batch sent), so no
 * peer's timer, nor ours, runs out while the traffic waits behind them: a requester held
 * mid-message has not asked for its ACK yet. */
static void data_path_turn(struct dev *dev)
{
	net_rx_read(&dev->port);
	sched_send(dev);
}

/* One request a wakeup: a client waits for each answer before it asks again, so a second
 * read would nearly always find nothing, a system call per request for nothing; a client
 * that did queue more is ready again at the loop's next turn. */
static void client_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client *c = w->data;
	uint8_t buf[PROTO_MAX_MSG] __attribute__((aligned(8)));
	bool extra_fds;
	ssize_t n;
	int fd;

	(void)loop;
	(void)revents;
	data_path_turn(c->own.dev);
	n = recv_request(c, buf, &fd, &extra_fds);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (fd >= 0)
			close(fd);
		ctl_client_destroy(c);
		return;
	}
	handle_request(c, buf, (size_t)n, fd, extra_fds);
}

/* The line of /proc/PID/FILE that starts with key, or false. */
static bool proc_line(pid_t pid, const char *file, const char *key, char *line, size_t len)
{
	char path[64];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	f = fopen(path, "r");
	while (f && !found && fgets(line, (int)len, f))
		found = !strncmp(line, key, strlen(key));
	if (f)
		fclose(f);
	return found;
}

/* Pinned memory a client may hold: unlimited with CAP_IPC_LOCK, as for mlock itself,
 * otherwise its own RLIMIT_MEMLOCK when it connects. /proc/PID/limits is read rather than
 * prlimit(), which a daemon without CAP_SYS_RESOURCE may not call on another user's
 * process. A limit that cannot be read pins nothing: -1 refuses the client. */
static int pin_cap_of(pid_t pid, uint64_t *cap)
{
	char line[256], soft[32];
	unsigned long long caps = 0, bytes;

	if (proc_line(pid, "status", "CapEff:", line, sizeof(line)))
		sscanf(line, "CapEff: %llx", &caps);
	*cap = 0;
	if (caps & (1ull << CAP_IPC_LOCK_BIT))
		return 0;
	if (!proc_line(pid, "limits", "Max locked memory", line, sizeof(line)) ||
	    sscanf(line, "Max locked memory %31s", soft) != 1)
		return -1;
	if (!strcmp(soft, "unlimited"))
		return 0;
	if (sscanf(soft, "%llu", &bytes) != 1)
		return -1;
	*cap = bytes ? bytes : 1; /* 0 means no cap of its own: a zero limit is one byte */
	return 0;
}

/* Another connection of the same process: its pinned bytes count against one budget. */
static struct client *same_process(struct dev *dev, pid_t pid)
{
	struct client *c;

	LIST_FOREACH(c, &dev->ctl.clients, link)
		if (c->own.pid == pid)
			return c;
	return NULL;
}

static int client_memory(struct dev *dev, struct client *c)
{
	struct client *sibling = same_process(dev, c->own.pid);

	if (sibling) {
		c->mrc = sibling->mrc;
		c->pin_cap = sibling->pin_cap;
		return 0;
	}
	if (pin_cap_of(c->own.pid, &c->pin_cap) < 0) {
		errno = EPERM;
		return -1;
	}
	c->mrc = mr_client_new(dev->mrs, c->pin_cap);
	return c->mrc ? 0 : -1;
}

static void accept_resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dev *dev = w->data;

	(void)revents;
	ev_io_start(loop, &dev->ctl.watcher);
}

/* Out of descriptors, the listening socket stays readable: stop watching it for a while
 * rather than spin on accept. */
static void pause_accepting(struct dev *dev)
{
	log_limited("cannot accept clients: out of file descriptors (raise LimitNOFILE)");
	ev_io_stop(dev->loop, &dev->ctl.watcher);
	ev_timer_set(&dev->ctl.accept_pause, 0.1, 0);
	ev_timer_start(dev->loop, &dev->ctl.accept_pause);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dev *dev = w->data;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct client *c;
	int fd = accept4(dev->ctl.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	(void)revents;
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE)
			pause_accepting(dev);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		c->own.pid = cred.pid;
		c->own.uid = cred.uid;
	}
	if (!c || !c->own.pid || client_memory(dev, c) < 0) {
		log_warn("refusing a client%s", c && c->own.pid ? ": its locked-memory limit is "
			 "unreadable (did it exit?)" : "");
		free(c);
		close(fd);
		return;
	}
	c->own.dev = dev;
	c->own.async_fd = -1;
	c->memfd = -1;
	c->fd = fd;
	neigh_init(&c->own.neigh, &dev->port, c);
	ev_io_init(&c->watcher, client_cb, fd, EV_READ);
	c->watcher.data = c;
	ev_io_start(loop, &c->watcher);
	LIST_INSERT_HEAD(&dev->ctl.clients, c, link);
	log_info("client pid %d uid %u connected", (int)c->own.pid, (unsigned)c->own.uid);
}

/* What this connection registered and allocated; the process's other connections keep
 * theirs. */
static uint64_t release_memory(struct client *c)
{
	uint64_t before = mr_client_pinned_bytes(c->mrc);

	/* windows first: an MR with windows bound cannot be deregistered */
	for (uint32_t h = 1; h < c->mws.cap; h++)
		if (c->mws.items[h])
			mr_mw_dealloc(c->mws.items[h]);
	for (uint32_t h = 1; h < c->mrs.cap; h++)
		if (c->mrs.items[h])
			mr_dereg(c->mrs.items[h]);
	for (uint32_t h = 1; h < c->pds.cap; h++)
		if (c->pds.items[h])
			mr_pd_dealloc(c->pds.items[h]);
	LIST_REMOVE(c, link);
	if (!same_process(c->own.dev, c->own.pid)) {
		mr_client_free(c->mrc);
		return before;
	}
	return before - mr_client_pinned_bytes(c->mrc);
}

void ctl_link_changed(void *ctx, bool running)
{
	struct dev *dev = ctx;
	struct client *c;

	log_info("link %s %s", dev->port.ifname, running ? "running: port active" :
		 "not running: port down");
	LIST_FOREACH(c, &dev->ctl.clients, link)
		owner_async_event(&c->own, running ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR,
				  PROTO_PORT_NUM);
}

void ctl_client_destroy(struct client *c)
{
	uint64_t pinned;

	neigh_stop(&c->own.neigh);
	free(c->deferred);
	cm_owner_gone(c->own.dev->cm, &c->own);
	for (uint32_t h = 1; h < c->qps.cap; h++)
		if (c->qps.items[h])
			qp_destroy(c->qps.items[h]);
	for (uint32_t h = 1; h < c->cqs.cap; h++)
		if (c->cqs.items[h])
			cq_destroy(c->cqs.items[h]);
	for (uint32_t h = 1; h < c->srqs.cap; h++)
		if (c->srqs.items[h])
			srq_destroy(c->srqs.items[h]);
	ring_park_empty(&c->own);
	for (uint32_t h = 1; h < c->ahs.cap; h++)
		if (c->ahs.items[h])
			ah_destroy(c->ahs.items[h]);
	pinned = release_memory(c);
	handle_free(&c->ahs);
	handle_free(&c->qps);
	handle_free(&c->srqs);
	handle_free(&c->cqs);
	handle_free(&c->mws);
	handle_free(&c->mrs);
	handle_free(&c->pds);
	ev_io_stop(c->own.dev->loop, &c->watcher);
	close(c->fd);
	if (c->own.async_fd >= 0)
		close(c->own.async_fd);
	if (c->memfd >= 0)
		close(c->memfd);
	log_info("client pid %d gone: its objects destroyed, %llu bytes unpinned", (int)c->own.pid,
		 (unsigned long long)pinned);
	free(c);
}

/* A socket file that still accepts connections belongs to a running daemon. */
static bool socket_in_use(const struct sockaddr_un *sun)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool used = fd >= 0 && connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0;

	if (fd >= 0)
		close(fd);
	return used;
}

static int socket_group(const char *group, gid_t *gid, char *err, size_t errlen)
{
	struct group *g = getgrnam(group);
	char *end;
	unsigned long n = strtoul(group, &end, 10);

	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	if (*group && !*end) {
		*gid = (gid_t)n;
		return 0;
	}
	snprintf(err, errlen, "-g %s: no such group", group);
	return -1;
}

int ctl_open(struct dev *dev, const char *path, const char *group, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	gid_t gid = (gid_t)-1;

	dev->ctl.fd = -1;
	if (group && socket_group(group, &gid, err, errlen) < 0)
		return -1;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "socket path %s is too long", path);
		return -1;
	}
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (!strncmp(path, ROCEMU_DEFAULT_SOCKET_DIR "/", sizeof(ROCEMU_DEFAULT_SOCKET_DIR)))
		mkdir(ROCEMU_DEFAULT_SOCKET_DIR, 0755);
	if (socket_in_use(&sun)) {
		snprintf(err, errlen, "another rocemud is serving %s", path);
		return -1;
	}
	unlink(path);
	dev->ctl.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (dev->ctl.fd < 0 || bind(dev->ctl.fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chmod(path, 0660) < 0 || (group && chown(path, (uid_t)-1, gid) < 0) ||
	    listen(dev->ctl.fd, 64) < 0) {
		snprintf(err, errlen, "cannot serve %s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(dev->ctl.sock_path, sizeof(dev->ctl.sock_path), "%s", path);
	ev_io_init(&dev->ctl.watcher, accept_cb, dev->ctl.fd, EV_READ);
	dev->ctl.watcher.data = dev;
	ev_io_start(dev->loop, &dev->ctl.watcher);
	ev_init(&dev->ctl.accept_pause, accept_resume_cb);
	dev->ctl.accept_pause.data = dev;
	return 0;
}

void ctl_close(struct dev *dev)
{
	if (dev->ctl.fd < 0)
		return;
	ev_io_stop(dev->loop, &dev->ctl.watcher);
	ev_timer_stop(dev->loop, &dev->ctl.accept_pause);
	close(dev->ctl.fd);
	if (dev->ctl.sock_path[0])
		unlink(dev->ctl.sock_path);
}
