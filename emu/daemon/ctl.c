/* The control socket: one context per connected process, a request table checked for
 * exact sizes, and replies that may carry file descriptors. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/daemon/ctl.h"
#include "emu/daemon/daemon.h"

#define CAP_IPC_LOCK_BIT 14

typedef int (*handler_fn)(struct client *c, const struct request *req, struct reply *rep);

struct op_entry {
	size_t req_size;
	size_t rep_size;
	bool takes_fd;
	handler_fn fn;
};

static const struct op_entry ops[PROTO_OP_COUNT] = {
	[PROTO_HELLO] = { sizeof(struct proto_hello), sizeof(struct proto_hello_reply), false, op_hello },
	[PROTO_QUERY_PORT] = { sizeof(struct proto_handle), sizeof(struct proto_port_reply), false, op_query_port },
	[PROTO_ALLOC_PD] = { sizeof(struct proto_handle), sizeof(struct proto_handle_reply), false, op_alloc_pd },
	[PROTO_DEALLOC_PD] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_dealloc_pd },
	[PROTO_REG_MR] = { sizeof(struct proto_reg_mr), sizeof(struct proto_reg_mr_reply), true, op_reg_mr },
	[PROTO_DEREG_MR] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_dereg_mr },
	[PROTO_CREATE_CQ] = { sizeof(struct proto_create_cq), sizeof(struct proto_create_cq_reply), false, op_create_cq },
	[PROTO_DESTROY_CQ] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_destroy_cq },
	[PROTO_CREATE_QP] = { sizeof(struct proto_create_qp), sizeof(struct proto_create_qp_reply), false, op_create_qp },
	[PROTO_MODIFY_QP] = { sizeof(struct proto_modify_qp), sizeof(struct proto_reply), false, op_modify_qp },
	[PROTO_QUERY_QP] = { sizeof(struct proto_handle), sizeof(struct proto_query_qp_reply), false, op_query_qp },
	[PROTO_DESTROY_QP] = { sizeof(struct proto_handle), sizeof(struct proto_reply), false, op_destroy_qp },
	[PROTO_STATS] = { sizeof(struct proto_handle), sizeof(struct proto_stats_reply), false, op_stats },
	[PROTO_SET_FAULT] = { sizeof(struct proto_fault), sizeof(struct proto_reply), false, op_set_fault },
};

static void send_reply(struct client *c, struct reply *rep)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 2)] = { 0 };
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
		log_limited("client pid %d: reply lost: %s", (int)c->pid, strerror(errno));
	if (rep->close_first && rep->nfds)
		close(rep->fds[0]);
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
			   bool extra_fds)
{
	const struct proto_hdr *hdr = (const struct proto_hdr *)buf;
	const struct op_entry *e = NULL;
	struct reply rep = { .len = sizeof(struct proto_reply), .fds = { -1, -1 } };
	struct request req = { buf, fd };

	if (n >= sizeof(*hdr) && hdr->op < PROTO_OP_COUNT && ops[hdr->op].fn)
		e = &ops[hdr->op];
	rep.u.r.hdr.op = n >= sizeof(*hdr) ? hdr->op : 0;
	if (!e) {
		rep.u.r.hdr.status = -EOPNOTSUPP;
		reply_error(&rep, "unknown operation");
	} else if (n != e->req_size || extra_fds || (fd >= 0) != e->takes_fd) {
		rep.u.r.hdr.status = -EPROTO;
		reply_error(&rep, "malformed request: %zu bytes%s", n,
			    (fd >= 0) != e->takes_fd || extra_fds ? ", wrong descriptors" : "");
	} else {
		rep.len = e->rep_size;
		rep.u.r.hdr.status = e->fn(c, &req, &rep);
	}
	if (rep.u.r.hdr.status < 0) {
		rep.len = sizeof(struct proto_reply);
		rep.nfds = 0;
		log_debug("client pid %d: op %u failed: %s", (int)c->pid, rep.u.r.hdr.op,
			  rep.u.r.errmsg);
	}
	if (fd >= 0)
		close(fd);
	send_reply(c, &rep);
}

static void client_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client *c = w->data;
	uint8_t buf[PROTO_MAX_MSG] __attribute__((aligned(8)));
	bool extra_fds;
	int fd;

	(void)loop;
	(void)revents;
	for (int i = 0; i < 64; i++) {
		ssize_t n = recv_request(c, buf, &fd, &extra_fds);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			if (fd >= 0)
				close(fd);
			client_destroy(c);
			return;
		}
		handle_request(c, buf, (size_t)n, fd, extra_fds);
	}
}

/* Pinned memory a client may hold: unlimited with CAP_IPC_LOCK, as for mlock itself,
 * otherwise its own RLIMIT_MEMLOCK, read when it connects. */
static uint64_t pin_cap_of(pid_t pid)
{
	char path[64], line[256];
	unsigned long long caps = 0;
	struct rlimit rl;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	if (f)
		fclose(f);
	if (caps & (1ull << CAP_IPC_LOCK_BIT))
		return 0;
	if (prlimit(pid, RLIMIT_MEMLOCK, NULL, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return rl.rlim_cur ? rl.rlim_cur : 1;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dev *dev = w->data;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct client *c;
	int fd = accept4(dev->ctl_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	(void)revents;
	if (fd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    !(c->mrc = mr_client_new(dev->mrs, pin_cap_of(cred.pid)))) {
		log_warn("refusing a client: %s", strerror(errno));
		free(c);
		close(fd);
		return;
	}
	c->dev = dev;
	c->fd = fd;
	c->pid = cred.pid;
	c->uid = cred.uid;
	ev_io_init(&c->watcher, client_cb, fd, EV_READ);
	c->watcher.data = c;
	ev_io_start(loop, &c->watcher);
	LIST_INSERT_HEAD(&dev->clients, c, link);
	log_info("client pid %d uid %u connected", (int)c->pid, (unsigned)c->uid);
}

void client_destroy(struct client *c)
{
	uint64_t pinned = mr_client_pinned_bytes(c->mrc);

	for (uint32_t h = 1; h < c->qps.cap; h++)
		if (c->qps.items[h])
			qp_destroy(c->qps.items[h]);
	for (uint32_t h = 1; h < c->cqs.cap; h++)
		if (c->cqs.items[h])
			cq_destroy(c->cqs.items[h]);
	mr_client_free(c->mrc);
	handle_free(&c->qps);
	handle_free(&c->cqs);
	handle_free(&c->mrs);
	handle_free(&c->pds);
	ev_io_stop(c->dev->loop, &c->watcher);
	close(c->fd);
	LIST_REMOVE(c, link);
	log_info("client pid %d gone: its objects destroyed, %llu bytes unpinned", (int)c->pid,
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

int ctl_open(struct dev *dev, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	dev->ctl_fd = -1;
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
	dev->ctl_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (dev->ctl_fd < 0 || bind(dev->ctl_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chmod(path, 0660) < 0 || listen(dev->ctl_fd, 64) < 0) {
		snprintf(err, errlen, "cannot serve %s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(dev->sock_path, sizeof(dev->sock_path), "%s", path);
	ev_io_init(&dev->ctl_watcher, accept_cb, dev->ctl_fd, EV_READ);
	dev->ctl_watcher.data = dev;
	ev_io_start(dev->loop, &dev->ctl_watcher);
	return 0;
}

void ctl_close(struct dev *dev)
{
	if (dev->ctl_fd < 0)
		return;
	ev_io_stop(dev->loop, &dev->ctl_watcher);
	close(dev->ctl_fd);
	if (dev->sock_path[0])
		unlink(dev->sock_path);
}
