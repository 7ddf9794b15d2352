/* ctl_hostile_e2e: hostile local clients against one running rocemud, on the same host.
 *
 *   ctl_hostile_e2e SOCK_B PID_B SOCK_A [CASE-PREFIX...]
 *
 * B is the daemon under attack (PID_B its process, for /proc), A a second daemon that
 * only serves as the far end of a real RDMA WRITE. Before anything hostile happens a
 * well-behaved librocemu client on B registers a buffer with canaries around it, creates a
 * CQ and a QP, and connects the QP to one on A. Then hostile clients speak proto.h over
 * raw sockets: every malformed, out-of-range or foreign control message must draw an error
 * reply (status < 0 and an explanation) or a disconnection; ring indices and work requests
 * the daemon reads from shared memory are abused; clients flood, never read, exhaust
 * descriptors, vanish by the hundred; an unprivileged client tries to pin more than its
 * RLIMIT_MEMLOCK. After every case the daemon must be alive and the well-behaved client
 * unaffected (its port, a PD allocated and freed, its QP still in RTS); at the end A
 * writes into its buffer with an RDMA WRITE, byte-exact, canaries intact.
 *
 * One line per case, "NAME: OK|FAIL: what was seen"; exit 0 when every case matched, 1
 * otherwise, 2 for bad usage or a failed setup. Needs root (it plays uid nobody in a child,
 * stops the daemon with SIGSTOP for one case and lowers its RLIMIT_NOFILE for another);
 * the caller makes SOCK_B reachable for nobody. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/rocemu.h"
#include "test/e2e.h"

#define WAIT_MS        3000     /* the longest wait for a reply, a completion, a state */
#define QUIET_MS       300      /* how long "nothing more happens" is watched for */
#define PAGE           4096u
#define MR_BYTES       (64u * 1024)        /* the hostile client's memfd */
#define MR_IOVA        0x10000000ull
#define REG_BYTES      (16u * 1024)        /* what its REG_MR requests register */
#define GOOD_OFF       (PAGE + 100)        /* the good client's MR inside its buffer */
#define GOOD_LEN       (2 * PAGE + 1000)
#define GOOD_PAGES     5
#define BOGUS_QPN      0x00dead            /* the hostile QP's peer: no such QP on A */
#define PSN            0x123456
#define CHURN_KIDS     4
#define CHURN_EACH     50                  /* 4 x 50 = 200 clients */
#define FLOOD_REQUESTS 3000
#define FLOOD_CQS      100
#define PIN_CAP        (1u << 20)
#define EXHAUST_ROOM   40                  /* descriptors left to the daemon in that case */
#define CPU_BUSY_TICKS 20                  /* of 100 per second: a spinning daemon */

#define CNT_ENUM(name, help) C_##name,
enum counter { PROTO_COUNTERS(CNT_ENUM) C_COUNT };
#undef CNT_ENUM

/* ---- one line per case ---- */

static bool g_any_failed;

/* A case that noted nothing says "as expected". */
static void report(const char *name)
{
	g_any_failed |= e2e_report(name, "as expected");
}

static const char *errno_name(int err)
{
	const char *s = strerrorname_np(err);

	return s ? s : "?";
}

/* The statuses rocemu completes with (librocemu links no libibverbs for its names). */
static const char *wc_name(unsigned status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "SUCCESS", [IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
		[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR", [IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
		[IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR", [IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
		[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR", [IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
		[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
	};

	return status < sizeof(names) / sizeof(names[0]) && names[status] ? names[status]
									    : "(other)";
}

/* ---- the daemon under attack, seen from /proc ---- */

static pid_t g_pid;
static const char *g_sock_b, *g_sock_a;

static char proc_state(void)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)g_pid);
	f = fopen(path, "r");
	if (!f)
		return 'X';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] ? p[2] : 'X';
}

static bool daemon_alive(void)
{
	char s = proc_state();

	return kill(g_pid, 0) == 0 && s != 'Z' && s != 'X';
}

/* utime + stime, in clock ticks. */
static long cpu_ticks(void)
{
	char path[64], buf[1024], *p;
	long utime = 0, stime = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)g_pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld",
			 &utime, &stime) != 2)
		return -1;
	return utime + stime;
}

/* The daemon's CPU use over ms milliseconds, in ticks. */
static long cpu_over(int ms)
{
	long before = cpu_ticks();

	usleep((useconds_t)ms * 1000);
	return cpu_ticks() - before;
}

static int fd_count(void)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)g_pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static long vmlck_kb(void)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)g_pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* The daemon's descriptors and locked memory once they hold still: the clients of
 * earlier cases are gone. */
static void baseline(int *fds, long *lck_kb)
{
	int64_t deadline = e2e_now_ms() + WAIT_MS;
	int last = -2, same = 0;

	while (same < 3 && e2e_now_ms() < deadline) {
		usleep(100000);
		*fds = fd_count();
		same = *fds == last ? same + 1 : 0;
		last = *fds;
	}
	*lck_kb = vmlck_kb();
}

/* Waits until the daemon's descriptors and locked memory are back to a baseline. */
static bool back_to(int fds, long lck_kb, int timeout_ms)
{
	int64_t deadline = e2e_now_ms() + timeout_ms;

	while (fd_count() != fds || vmlck_kb() != lck_kb) {
		if (e2e_now_ms() > deadline)
			return e2e_mismatch("descriptors %d (baseline %d), VmLck %ld kB (baseline %ld)",
					    fd_count(), fds, vmlck_kb(), lck_kb);
		usleep(20000);
	}
	return true;
}

/* ---- the raw control protocol ---- */

union msgbuf {
	struct proto_reply r;
	uint64_t align;      /* replies hold 64-bit fields: read them in place */
	uint8_t bytes[4096];
};

enum got { GOT_REPLY, GOT_GONE, GOT_NOTHING };

struct answer {
	enum got got;
	size_t len;
	int fds[PROTO_MAX_REPLY_FDS];
	int nfds;
	union msgbuf m;
};

static const size_t op_size[PROTO_OP_COUNT] = {
	[PROTO_HELLO] = sizeof(struct proto_hello),
	[PROTO_QUERY_PORT] = sizeof(struct proto_handle),
	[PROTO_ALLOC_PD] = sizeof(struct proto_handle),
	[PROTO_DEALLOC_PD] = sizeof(struct proto_handle),
	[PROTO_REG_MR] = sizeof(struct proto_reg_mr),
	[PROTO_DEREG_MR] = sizeof(struct proto_handle),
	[PROTO_REREG_MR] = sizeof(struct proto_rereg_mr),
	[PROTO_CREATE_CQ] = sizeof(struct proto_create_cq),
	[PROTO_DESTROY_CQ] = sizeof(struct proto_handle),
	[PROTO_CREATE_QP] = sizeof(struct proto_create_qp),
	[PROTO_MODIFY_QP] = sizeof(struct proto_modify_qp),
	[PROTO_QUERY_QP] = sizeof(struct proto_handle),
	[PROTO_DESTROY_QP] = sizeof(struct proto_handle),
	[PROTO_STATS] = sizeof(struct proto_handle),
	[PROTO_SET_FAULT] = sizeof(struct proto_fault),
	[PROTO_CREATE_AH] = sizeof(struct proto_create_ah),
	[PROTO_CREATE_SRQ] = sizeof(struct proto_create_srq),
	[PROTO_ALLOC_MW] = sizeof(struct proto_alloc_mw),
	[PROTO_CM_LISTEN] = sizeof(struct proto_cm_listen),
	[PROTO_CM_RESOLVE] = sizeof(struct proto_cm_resolve),
	[PROTO_CM_CONNECT] = sizeof(struct proto_cm_connect),
	[PROTO_CM_ACCEPT] = sizeof(struct proto_cm_accept),
	[PROTO_CM_REJECT] = sizeof(struct proto_cm_reject),
	[PROTO_BATCH] = sizeof(struct proto_batch),
	[PROTO_CREATE_QP_CQS] = sizeof(struct proto_create_qp_cqs),
};

static size_t size_of_op(uint32_t op)
{
	return op < PROTO_OP_COUNT && op_size[op] ? op_size[op] : sizeof(struct proto_handle);
}

static int sock_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/* 0, or -1 when the daemon is gone. */
static int send_msg(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
	union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(int) * 4)]; } c;
	struct iovec iov = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *cm;

		memset(&c, 0, sizeof(c));
		msg.msg_control = c.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	return sendmsg(fd, &msg, MSG_NOSIGNAL | flags) == (ssize_t)len ? 0 : -1;
}

static void take_fds(struct msghdr *msg, struct answer *a)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (size_t i = 0; cm->cmsg_type == SCM_RIGHTS && i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (a->nfds < PROTO_MAX_REPLY_FDS)
				a->fds[a->nfds++] = fd;
			else
				close(fd);
		}
	}
}

static void recv_answer(int fd, int timeout_ms, struct answer *a)
{
	union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_REPLY_FDS)]; } c;
	struct iovec iov = { a->m.bytes, sizeof(a->m.bytes) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
			      .msg_controllen = sizeof(c.buf) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	memset(a, 0, offsetof(struct answer, m));
	a->got = GOT_NOTHING;
	if (poll(&p, 1, timeout_ms) <= 0)
		return;
	n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n <= 0) {
		a->got = n == 0 || errno != EAGAIN ? GOT_GONE : GOT_NOTHING;
		return;
	}
	a->got = GOT_REPLY;
	a->len = (size_t)n;
	take_fds(&msg, a);
}

static void close_fds(struct answer *a)
{
	for (int i = 0; i < a->nfds; i++)
		close(a->fds[i]);
	a->nfds = 0;
}

static void call(int fd, const void *req, size_t len, const int *fds, int nfds, struct answer *a)
{
	if (send_msg(fd, req, len, fds, nfds, 0) < 0) {
		memset(a, 0, offsetof(struct answer, m));
		a->got = GOT_GONE;
		return;
	}
	recv_answer(fd, WAIT_MS, a);
}

/* A request that must succeed, during setup; -1 (reported) when it did not. */
static int call_ok(int fd, const void *req, size_t len, const int *fds, int nfds,
		   struct answer *a, const char *what)
{
	call(fd, req, len, fds, nfds, a);
	if (a->got == GOT_REPLY && a->len >= sizeof(struct proto_reply) && a->m.r.hdr.status == 0)
		return 0;
	close_fds(a);
	e2e_mismatch("%s: %s %d \"%.*s\"", what, a->got == GOT_REPLY ? "status" :
		     a->got == GOT_GONE ? "disconnected" : "no reply", (int)a->m.r.hdr.status,
		     PROTO_ERRMSG, a->m.r.errmsg);
	return -1;
}

static int handle_op(int fd, uint32_t op, uint32_t handle, struct answer *a, const char *what)
{
	struct proto_handle req = { .hdr.op = op, .handle = handle };

	return call_ok(fd, &req, sizeof(req), NULL, 0, a, what);
}

/* The daemon said no, with a negative status and an explanation, or hung up. */
static bool refused(struct answer *a)
{
	if (a->got == GOT_GONE) {
		e2e_note("disconnected");
		return true;
	}
	if (a->got == GOT_NOTHING)
		return e2e_mismatch("no answer within %d ms", WAIT_MS);
	if (a->len < sizeof(struct proto_reply))
		return e2e_mismatch("a %zu-byte reply", a->len);
	if (a->m.r.hdr.status >= 0) {
		close_fds(a);
		return e2e_mismatch("accepted (status %d)", (int)a->m.r.hdr.status);
	}
	if (a->nfds) {
		close_fds(a);
		return e2e_mismatch("an error reply carried descriptors");
	}
	if (!a->m.r.errmsg[0])
		return e2e_mismatch("%s without an explanation", errno_name(-a->m.r.hdr.status));
	e2e_note("%s \"%.*s\"", errno_name(-a->m.r.hdr.status), PROTO_ERRMSG, a->m.r.errmsg);
	return true;
}

static uint64_t stat_counter(int fd, enum counter c)
{
	struct proto_handle req = { .hdr.op = PROTO_STATS };
	struct answer a;

	call(fd, &req, sizeof(req), NULL, 0, &a);
	if (a.got != GOT_REPLY || a.len != sizeof(struct proto_stats_reply))
		return UINT64_MAX;
	return ((struct proto_stats_reply *)a.m.bytes)->counters[c];
}

/* ---- the well-behaved clients: on B (the one that must stay unaffected) and on A ---- */

struct good {
	const char *name;
	struct rocemu_context *ctx;
	struct rocemu_port_attr port;
	struct rocemu_pd *pd;
	uint8_t *buf;
	struct rocemu_mr *mr;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;
};

static struct good g_b = { .name = "B" }, g_a = { .name = "A" };

static uint8_t canary(size_t i)
{
	return (uint8_t)(i * 13 + 5);
}

static int good_fail(struct good *g, const char *call_name, int err)
{
	e2e_mismatch("%s on %s: %s (%s)", call_name, g->name, strerror(err),
		     g->ctx ? rocemu_last_error(g->ctx) : "");
	return -1;
}

static int good_open(struct good *g, const char *sock, int access)
{
	struct rocemu_qp_init_attr init = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
					    .max_recv_sge = 1 };
	int err;

	g->buf = mmap(NULL, GOOD_PAGES * PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->buf == MAP_FAILED)
		return good_fail(g, "mmap", errno);
	for (size_t i = 0; i < GOOD_PAGES * PAGE; i++)
		g->buf[i] = canary(i);
	if (!(g->ctx = rocemu_open(sock)))
		return good_fail(g, "rocemu_open", errno);
	if ((err = rocemu_query_port(g->ctx, &g->port)))
		return good_fail(g, "rocemu_query_port", err);
	if (!(g->pd = rocemu_alloc_pd(g->ctx)))
		return good_fail(g, "rocemu_alloc_pd", errno);
	if (!(g->mr = rocemu_reg_mr(g->pd, g->buf + GOOD_OFF, GOOD_LEN, access)))
		return good_fail(g, "rocemu_reg_mr", errno);
	if (!(g->cq = rocemu_create_cq(g->ctx, 16)))
		return good_fail(g, "rocemu_create_cq", errno);
	init.send_cq = init.recv_cq = g->cq;
	if (!(g->qp = rocemu_create_qp(g->pd, &init)))
		return good_fail(g, "rocemu_create_qp", errno);
	return 0;
}

static int good_modify(struct good *g, struct ibv_qp_attr *a, int mask)
{
	int err = rocemu_modify_qp(g->qp, a, mask);

	return err ? good_fail(g, "rocemu_modify_qp", err) : 0;
}

static int good_connect(struct good *g, const struct good *peer, enum ibv_mtu mtu)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_qp_attr rtr = { .qp_state = IBV_QPS_RTR, .path_mtu = mtu,
				   .dest_qp_num = peer->qp->qp_num, .rq_psn = PSN,
				   .ah_attr = { .is_global = 1, .port_num = 1,
						.grh = { .dgid = peer->port.gid, .hop_limit = 64 } } };
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = PSN, .timeout = 14,
				   .retry_cnt = 7, .rnr_retry = 7 };

	if (good_modify(g, &init, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS) < 0 ||
	    good_modify(g, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN) < 0)
		return -1;
	return good_modify(g, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
}

/* The well-behaved client on B does real work, and its QP is still in RTS. */
static bool victim_ok(void)
{
	struct rocemu_port_attr port;
	struct ibv_qp_attr qa;
	struct rocemu_pd *pd;
	int err;

	if (!daemon_alive())
		return e2e_mismatch("rocemud is gone (state %c)", proc_state());
	if ((err = rocemu_query_port(g_b.ctx, &port)))
		return good_fail(&g_b, "rocemu_query_port", err), false;
	if (!(pd = rocemu_alloc_pd(g_b.ctx)))
		return good_fail(&g_b, "rocemu_alloc_pd", errno), false;
	if ((err = rocemu_dealloc_pd(pd)))
		return good_fail(&g_b, "rocemu_dealloc_pd", err), false;
	if ((err = rocemu_query_qp(g_b.qp, &qa)))
		return good_fail(&g_b, "rocemu_query_qp", err), false;
	if (qa.qp_state != IBV_QPS_RTS)
		return e2e_mismatch("the good client's QP left RTS (state %d)", (int)qa.qp_state);
	return true;
}

/* ---- a hostile client: a raw socket, its objects, its rings mapped ---- */

struct cq_ring {
	struct proto_ring_ctl *ctl;
	struct proto_cqe *e;
	uint32_t entries;
	size_t bytes;
	int ring_fd, notify_fd;
};

struct qp_ring {
	void *map;
	size_t bytes;
	struct proto_ring_ctl *sq_ctl, *rq_ctl;
	struct proto_swqe *sq;
	struct proto_rwqe *rq;
	uint32_t sq_entries, rq_entries;
	int ring_fd, doorbell_fd;
};

struct hostile {
	int fd;
	uint32_t pd, pd2, cq2, mr, qp, qpn, lkey;
	int mr_fd;
	struct cq_ring cq;
	struct qp_ring q;
};

static int memfd_of(size_t bytes, unsigned seals)
{
	int fd = memfd_create("ctl-hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0 ||
	    (seals && fcntl(fd, F_ADD_SEALS, seals) < 0)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int hostile_connect(const char *path)
{
	struct proto_hello hello = { .hdr.op = PROTO_HELLO, .version = PROTO_VERSION };
	struct answer a;
	int fd = sock_connect(path);

	if (fd < 0) {
		e2e_mismatch("connect %s: %s", path, strerror(errno));
		return -1;
	}
	if (call_ok(fd, &hello, sizeof(hello), NULL, 0, &a, "HELLO") < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int map_cq(struct cq_ring *r, struct answer *a)
{
	const struct proto_create_cq_reply *rep = (const void *)a->m.bytes;
	void *map;

	if (a->nfds != 2)
		return close_fds(a), e2e_mismatch("CREATE_CQ came with %d descriptors", a->nfds), -1;
	map = mmap(NULL, rep->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a->fds[0], 0);
	if (map == MAP_FAILED)
		return close_fds(a), e2e_mismatch("mapping the CQ ring: %s", strerror(errno)), -1;
	*r = (struct cq_ring){ .ctl = map, .e = (struct proto_cqe *)((struct proto_ring_ctl *)map + 1),
			       .entries = rep->entries, .bytes = rep->ring_bytes,
			       .ring_fd = a->fds[0], .notify_fd = a->fds[1] };
	return 0;
}

static int map_qp(struct qp_ring *r, struct answer *a)
{
	const struct proto_create_qp_reply *rep = (const void *)a->m.bytes;
	void *map;

	if (a->nfds != 2)
		return close_fds(a), e2e_mismatch("CREATE_QP came with %d descriptors", a->nfds), -1;
	if (rep->max_send_sge != PROTO_MAX_SGE || rep->max_recv_sge != PROTO_MAX_SGE ||
	    rep->max_inline_data != PROTO_MAX_INLINE)
		return close_fds(a), e2e_mismatch("CREATE_QP made %u send SGEs, %u receive SGEs, "
						  "%u bytes inline; 32 SGEs asked",
						  rep->max_send_sge, rep->max_recv_sge,
						  rep->max_inline_data), -1;
	map = mmap(NULL, rep->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a->fds[0], 0);
	if (map == MAP_FAILED)
		return close_fds(a), e2e_mismatch("mapping the QP ring: %s", strerror(errno)), -1;
	*r = (struct qp_ring){ .map = map, .bytes = rep->ring_bytes, .sq_ctl = map,
			       .sq = (struct proto_swqe *)((struct proto_ring_ctl *)map + 1),
			       .rq_ctl = (struct proto_ring_ctl *)((char *)map + rep->rq_offset),
			       .sq_entries = rep->sq_entries, .rq_entries = rep->rq_entries,
			       .ring_fd = a->fds[0], .doorbell_fd = a->fds[1] };
	r->rq = (struct proto_rwqe *)(r->rq_ctl + 1);
	return 0;
}

static int hostile_reg(struct hostile *h, struct answer *a)
{
	struct proto_reg_mr m = { .hdr.op = PROTO_REG_MR, .pd = h->pd2, .length = MR_BYTES,
				  .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
				  .iova = MR_IOVA };

	h->mr_fd = memfd_of(MR_BYTES, F_SEAL_SHRINK);
	if (h->mr_fd < 0 || call_ok(h->fd, &m, sizeof(m), &h->mr_fd, 1, a, "REG_MR") < 0)
		return -1;
	h->mr = ((struct proto_reg_mr_reply *)a->m.bytes)->handle;
	h->lkey = ((struct proto_reg_mr_reply *)a->m.bytes)->lkey;
	return 0;
}

/* Two PDs, two CQs and an MR, so that handle 2 of a PD or CQ and handle 1 of an MR or QP
 * exist in this client only; the QP uses the second PD and CQ. */
static int hostile_objects(struct hostile *h)
{
	struct proto_create_cq cq = { .hdr.op = PROTO_CREATE_CQ, .cqe = 64 };
	/* slots made for the largest WQEs are whole structs, which the cases write */
	struct proto_create_qp qp = { .hdr.op = PROTO_CREATE_QP, .max_send_wr = 16,
				      .max_recv_wr = 16, .qp_type = IBV_QPT_RC,
				      .max_send_sge = PROTO_MAX_SGE,
				      .max_recv_sge = PROTO_MAX_SGE };
	struct answer a;

	if (handle_op(h->fd, PROTO_ALLOC_PD, 0, &a, "ALLOC_PD") < 0)
		return -1;
	h->pd = ((struct proto_handle_reply *)a.m.bytes)->handle;
	if (handle_op(h->fd, PROTO_ALLOC_PD, 0, &a, "ALLOC_PD") < 0)
		return -1;
	h->pd2 = ((struct proto_handle_reply *)a.m.bytes)->handle;
	if (call_ok(h->fd, &cq, sizeof(cq), NULL, 0, &a, "CREATE_CQ") < 0)
		return -1;
	close_fds(&a);
	if (call_ok(h->fd, &cq, sizeof(cq), NULL, 0, &a, "CREATE_CQ") < 0 || map_cq(&h->cq, &a) < 0)
		return -1;
	h->cq2 = ((struct proto_create_cq_reply *)a.m.bytes)->handle;
	if (hostile_reg(h, &a) < 0)
		return -1;
	qp.pd = h->pd2;
	qp.send_cq = qp.recv_cq = h->cq2;
	if (call_ok(h->fd, &qp, sizeof(qp), NULL, 0, &a, "CREATE_QP") < 0 || map_qp(&h->q, &a) < 0)
		return -1;
	h->qp = ((struct proto_create_qp_reply *)a.m.bytes)->handle;
	h->qpn = ((struct proto_create_qp_reply *)a.m.bytes)->qpn;
	return 0;
}

static struct hostile hostile_blank(void)
{
	return (struct hostile){ .fd = -1, .mr_fd = -1,
				 .cq = { .ring_fd = -1, .notify_fd = -1 },
				 .q = { .ring_fd = -1, .doorbell_fd = -1 } };
}

static void close_if(int fd)
{
	if (fd >= 0)
		close(fd);
}

static void hostile_close(struct hostile *h)
{
	if (h->q.map)
		munmap(h->q.map, h->q.bytes);
	if (h->cq.ctl)
		munmap(h->cq.ctl, h->cq.bytes);
	close_if(h->q.ring_fd);
	close_if(h->q.doorbell_fd);
	close_if(h->cq.ring_fd);
	close_if(h->cq.notify_fd);
	close_if(h->mr_fd);
	close_if(h->fd);
	*h = hostile_blank();
}

static int hostile_open(struct hostile *h, bool objects)
{
	*h = hostile_blank();
	h->fd = hostile_connect(g_sock_b);
	if (h->fd < 0 || (objects && hostile_objects(h) < 0)) {
		hostile_close(h);
		return -1;
	}
	return 0;
}

/* The hostile client of most cases: reopened whenever the daemon hung up on it. */
static struct hostile g_h = { .fd = -1, .mr_fd = -1,
			      .cq = { .ring_fd = -1, .notify_fd = -1 },
			      .q = { .ring_fd = -1, .doorbell_fd = -1 } };

static struct hostile *h1(void)
{
	struct pollfd p = { .fd = g_h.fd, .events = POLLRDHUP };

	if (g_h.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)))
		hostile_close(&g_h);
	if (g_h.fd < 0 && hostile_open(&g_h, true) < 0)
		return NULL;
	return &g_h;
}

/* ---- QP states, by valid MODIFY_QP requests ---- */

static uint32_t g_peer_ip;      /* A's address: where the hostile QP "sends" */
static enum ibv_mtu g_port_mtu; /* B's active MTU */

static struct proto_modify_qp modify_msg(uint32_t handle, enum ibv_qp_state to)
{
	struct proto_modify_qp m = { .hdr.op = PROTO_MODIFY_QP, .handle = handle,
				     .attr = { .state = to } };

	m.attr_mask = IBV_QP_STATE;
	if (to == IBV_QPS_INIT) {
		m.attr_mask |= IBV_QP_ACCESS_FLAGS;
		m.attr.access = IBV_ACCESS_REMOTE_WRITE;
	} else if (to == IBV_QPS_RTR) {
		m.attr_mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		m.attr.dest_gid[10] = m.attr.dest_gid[11] = 0xff;
		memcpy(m.attr.dest_gid + 12, &g_peer_ip, 4);
		m.attr.path_mtu = g_port_mtu;
		m.attr.dest_qpn = BOGUS_QPN;
		m.attr.rq_psn = PSN;
	} else if (to == IBV_QPS_RTS) {
		m.attr_mask |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		m.attr.sq_psn = PSN;
		m.attr.max_rd_atomic = 1;   /* atomics may go: what refuses one is its own fault */
		m.attr.timeout = 14;
		m.attr.retry_cnt = 7;
		m.attr.rnr_retry = 7;
	}
	return m;
}

/* RESET, then up through INIT and RTR to `to`. */
static int h_to(struct hostile *h, enum ibv_qp_state to)
{
	static const enum ibv_qp_state path[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
						  IBV_QPS_RTS };
	struct answer a;

	for (size_t i = 0; i < sizeof(path) / sizeof(path[0]) && path[i] <= to; i++) {
		struct proto_modify_qp m = modify_msg(h->qp, path[i]);

		if (call_ok(h->fd, &m, sizeof(m), NULL, 0, &a, "MODIFY_QP (setup)") < 0)
			return -1;
	}
	return 0;
}

static int qp_state_of(int fd, uint32_t qp)
{
	struct proto_handle req = { .hdr.op = PROTO_QUERY_QP, .handle = qp };
	struct answer a;

	call(fd, &req, sizeof(req), NULL, 0, &a);
	if (a.got != GOT_REPLY || a.m.r.hdr.status != 0)
		return -1;
	return (int)((struct proto_query_qp_reply *)a.m.bytes)->attr.state;
}

static bool wait_state(struct hostile *h, int want)
{
	int64_t deadline = e2e_now_ms() + WAIT_MS;
	int s;

	while ((s = qp_state_of(h->fd, h->qp)) != want && e2e_now_ms() < deadline)
		usleep(5000);
	if (s != want)
		return e2e_mismatch("QP state %d, expected %d", s, want);
	e2e_note("QP in state %d", s);
	return true;
}

/* ---- cases: malformed control messages ---- */

enum fdkind { FD_NONE, FD_MEMFD, FD_TWO, FD_PIPE, FD_FILE, FD_DEVZERO, FD_UNSEALED,
	      FD_RDONLY, FD_WRITE_SEALED };

struct patch {
	uint16_t off, size;   /* size 0: no patch */
	uint64_t val;
};

#define SET(type, field, v) { offsetof(struct type, field), sizeof(((struct type *)0)->field), \
			      (uint64_t)(v) }

struct msg_case {
	const char *name;
	uint32_t op;
	enum fdkind fds;
	struct patch p;
	int delta;            /* bytes added to (or taken from) the op's size */
	size_t size;          /* instead, this many bytes */
	bool empty;           /* a zero-length message */
	bool accept;          /* a control: the well-formed request is accepted */
	const char *misleads; /* the explanation must not say this: it is not the cause */
};

static const struct msg_case msg_cases[] = {
	{ .name = "msg: QUERY_PORT of 8 bytes (the header only)", .op = PROTO_QUERY_PORT,
	  .size = 8 },
	{ .name = "msg: REG_MR one byte short", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .delta = -1 },
	{ .name = "msg: ALLOC_PD 8 bytes long", .op = PROTO_ALLOC_PD, .delta = 8 },
	{ .name = "msg: STATS of 3000 bytes (beyond PROTO_MAX_MSG)", .op = PROTO_STATS,
	  .size = 3000 },
	{ .name = "msg: 3 bytes (less than a header)", .op = PROTO_QUERY_PORT, .size = 3 },
	{ .name = "msg: unknown op 0", .op = 0 },
	{ .name = "msg: unknown op PROTO_OP_COUNT", .op = PROTO_OP_COUNT },
	{ .name = "msg: unknown op 0xffffffff", .op = 0xffffffff },
	{ .name = "msg: HELLO of protocol version 0xbad", .op = PROTO_HELLO,
	  .p = SET(proto_hello, version, 0xbad) },
	{ .name = "fd: REG_MR without a descriptor, naming no memfd held", .op = PROTO_REG_MR },
	{ .name = "fd: REG_MR with two memfds", .op = PROTO_REG_MR, .fds = FD_TWO },
	{ .name = "fd: REG_MR with a pipe", .op = PROTO_REG_MR, .fds = FD_PIPE },
	{ .name = "fd: REG_MR with a regular file without seals", .op = PROTO_REG_MR,
	  .fds = FD_FILE },
	{ .name = "fd: REG_MR with /dev/zero", .op = PROTO_REG_MR, .fds = FD_DEVZERO },
	{ .name = "fd: REG_MR with a memfd not sealed against shrinking", .op = PROTO_REG_MR,
	  .fds = FD_UNSEALED },
	{ .name = "fd: REG_MR with a sealed memfd reopened read-only", .op = PROTO_REG_MR,
	  .fds = FD_RDONLY },
	{ .name = "fd: REG_MR with a memfd sealed against writing", .op = PROTO_REG_MR,
	  .fds = FD_WRITE_SEALED, .misleads = "RLIMIT_MEMLOCK" },
	{ .name = "fd: QUERY_PORT with a memfd", .op = PROTO_QUERY_PORT, .fds = FD_MEMFD },
	{ .name = "fd: ALLOC_PD with a pipe", .op = PROTO_ALLOC_PD, .fds = FD_PIPE },
	{ .name = "fd: MODIFY_QP with a memfd", .op = PROTO_MODIFY_QP, .fds = FD_MEMFD },
	{ .name = "mr: offset + length past 2^63", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, fd_offset, INT64_MAX - 4095) },
	{ .name = "mr: offset 2^63", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, fd_offset, 1ull << 63) },
	{ .name = "mr: offset beyond the file", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, fd_offset, 1u << 20) },
	{ .name = "mr: range past the end of the file", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, length, MR_BYTES + 1) },
	{ .name = "mr: length 0", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, length, 0) },
	{ .name = "mr: length 2^40 + 1", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, length, (1ull << 40) + 1) },
	{ .name = "mr: length 2^64 - 1", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, length, UINT64_MAX) },
	{ .name = "mr: iova + length wrapping 2^64", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, iova, UINT64_MAX - 4095) },
	{ .name = "mr: iova at another offset in its page than the file offset",
	  .op = PROTO_REG_MR, .fds = FD_MEMFD, .p = SET(proto_reg_mr, iova, MR_IOVA + 1) },
	{ .name = "mr: access 0x80000000 (unknown flag)", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, access, 0x80000000u) },
	{ .name = "mr: remote write without local write", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, access, IBV_ACCESS_REMOTE_WRITE) },
	{ .name = "mr: PD 0", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, pd, 0) },
	{ .name = "mr: PD 0xffffffff", .op = PROTO_REG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_reg_mr, pd, 0xffffffffu) },
	{ .name = "mr: control, the same REG_MR well formed", .op = PROTO_REG_MR,
	  .fds = FD_MEMFD, .accept = true },
	{ .name = "rereg: CHANGE_TRANSLATION without its memfd", .op = PROTO_REREG_MR },
	{ .name = "rereg: a memfd without CHANGE_TRANSLATION", .op = PROTO_REREG_MR,
	  .fds = FD_MEMFD, .p = SET(proto_rereg_mr, flags, IBV_REREG_MR_CHANGE_ACCESS) },
	{ .name = "rereg: no flag", .op = PROTO_REREG_MR, .p = SET(proto_rereg_mr, flags, 0) },
	{ .name = "rereg: flag 0x80 (unknown)", .op = PROTO_REREG_MR,
	  .p = SET(proto_rereg_mr, flags, 0x80) },
	{ .name = "rereg: MR 0xffffffff", .op = PROTO_REREG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_rereg_mr, handle, 0xffffffffu) },
	{ .name = "rereg: CHANGE_PD to PD 0xffffffff", .op = PROTO_REREG_MR,
	  .p = SET(proto_rereg_mr, flags, IBV_REREG_MR_CHANGE_PD) },
	{ .name = "rereg: new length 2^40 + 1", .op = PROTO_REREG_MR, .fds = FD_MEMFD,
	  .p = SET(proto_rereg_mr, length, (1ull << 40) + 1) },
	{ .name = "rereg: new range past the end of the file", .op = PROTO_REREG_MR,
	  .fds = FD_MEMFD, .p = SET(proto_rereg_mr, length, MR_BYTES + 1) },
	{ .name = "rereg: a memfd that can shrink", .op = PROTO_REREG_MR, .fds = FD_UNSEALED },
	{ .name = "rereg: a plain file", .op = PROTO_REREG_MR, .fds = FD_FILE },
	{ .name = "handle: DEALLOC_PD 0", .op = PROTO_DEALLOC_PD,
	  .p = SET(proto_handle, handle, 0) },
	{ .name = "handle: DEALLOC_PD 0xffffffff", .op = PROTO_DEALLOC_PD,
	  .p = SET(proto_handle, handle, 0xffffffffu) },
	{ .name = "handle: DEREG_MR 0", .op = PROTO_DEREG_MR,
	  .p = SET(proto_handle, handle, 0) },
	{ .name = "handle: DEREG_MR 4096", .op = PROTO_DEREG_MR,
	  .p = SET(proto_handle, handle, 4096) },
	{ .name = "handle: DESTROY_CQ 0xffffffff", .op = PROTO_DESTROY_CQ,
	  .p = SET(proto_handle, handle, 0xffffffffu) },
	{ .name = "handle: DESTROY_QP 0", .op = PROTO_DESTROY_QP,
	  .p = SET(proto_handle, handle, 0) },
	{ .name = "handle: DESTROY_QP 0x7fffffff", .op = PROTO_DESTROY_QP,
	  .p = SET(proto_handle, handle, 0x7fffffffu) },
	{ .name = "handle: QUERY_QP 0xffffffff", .op = PROTO_QUERY_QP,
	  .p = SET(proto_handle, handle, 0xffffffffu) },
	{ .name = "handle: MODIFY_QP of QP 0xffffffff", .op = PROTO_MODIFY_QP,
	  .p = SET(proto_modify_qp, handle, 0xffffffffu) },
	{ .name = "cm: CHANNEL without a descriptor", .op = PROTO_CM_CHANNEL },
	{ .name = "cm: CHANNEL with a memfd (not a socket)", .op = PROTO_CM_CHANNEL,
	  .fds = FD_MEMFD },
	{ .name = "cm: CHANNEL with a pipe", .op = PROTO_CM_CHANNEL, .fds = FD_PIPE },
	{ .name = "cm: CLOSE_CHANNEL 7 (none)", .op = PROTO_CM_CLOSE_CHANNEL,
	  .p = SET(proto_handle, handle, 7) },
	{ .name = "cm: LISTEN on channel 0", .op = PROTO_CM_LISTEN },
	{ .name = "cm: LISTEN on channel 0xffffffff", .op = PROTO_CM_LISTEN,
	  .p = SET(proto_cm_listen, channel, 0xffffffffu) },
	{ .name = "cm: UNLISTEN 0", .op = PROTO_CM_UNLISTEN },
	{ .name = "cm: RESOLVE the unspecified address", .op = PROTO_CM_RESOLVE },
	{ .name = "cm: CONNECT to the unspecified address", .op = PROTO_CM_CONNECT },
	{ .name = "cm: CONNECT to ::ffff:0.0.0.0", .op = PROTO_CM_CONNECT,
	  .p = { offsetof(struct proto_cm_connect, dgid[10]), 2, 0xffff },
	  .misleads = "source" },
	{ .name = "cm: ACCEPT of connection 0xffffffff", .op = PROTO_CM_ACCEPT,
	  .p = SET(proto_cm_accept, conn, 0xffffffffu) },
	{ .name = "cm: REJECT of connection 0", .op = PROTO_CM_REJECT },
	{ .name = "cm: ESTABLISH 0x12345678", .op = PROTO_CM_ESTABLISH,
	  .p = SET(proto_handle, handle, 0x12345678) },
	{ .name = "cm: DISCONNECT 0xffffffff", .op = PROTO_CM_DISCONNECT,
	  .p = SET(proto_handle, handle, 0xffffffffu) },
	{ .name = "cm: DESTROY 0", .op = PROTO_CM_DESTROY },
	{ .name = "cq: cqe 0", .op = PROTO_CREATE_CQ, .p = SET(proto_create_cq, cqe, 0) },
	{ .name = "cq: cqe one above the limit", .op = PROTO_CREATE_CQ,
	  .p = SET(proto_create_cq, cqe, PROTO_MAX_RING + 1) },
	{ .name = "cq: cqe 0xffffffff", .op = PROTO_CREATE_CQ,
	  .p = SET(proto_create_cq, cqe, 0xffffffffu) },
	{ .name = "cq: control, cqe at the limit (2^20)", .op = PROTO_CREATE_CQ,
	  .p = SET(proto_create_cq, cqe, PROTO_MAX_RING), .accept = true },
	{ .name = "qp: PD 0", .op = PROTO_CREATE_QP, .p = SET(proto_create_qp, pd, 0) },
	{ .name = "qp: PD 0xffffffff", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, pd, 0xffffffffu) },
	{ .name = "qp: send CQ 0", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, send_cq, 0) },
	{ .name = "qp: receive CQ 99", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, recv_cq, 99) },
	{ .name = "qp: control, max_send_wr 0 (a QP that only receives)", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_send_wr, 0), .accept = true },
	{ .name = "qp: max_send_wr one above the limit", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_send_wr, PROTO_MAX_RING + 1) },
	{ .name = "qp: max_recv_wr one above the limit", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_recv_wr, PROTO_MAX_RING + 1) },
	{ .name = "qp: max_send_sge 33", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_send_sge, PROTO_MAX_SGE + 1) },
	{ .name = "qp: max_recv_sge 0xffffffff", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_recv_sge, 0xffffffffu) },
	{ .name = "qp: max_inline_data 513", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_inline_data, PROTO_MAX_INLINE + 1) },
	{ .name = "qp: control, max_send_wr at the limit (2^20)", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_send_wr, PROTO_MAX_RING), .accept = true },
	{ .name = "qp: control, max_recv_sge 32", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_recv_sge, PROTO_MAX_SGE), .accept = true },
	{ .name = "qp: control, max_inline_data 512", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_inline_data, PROTO_MAX_INLINE), .accept = true },
	{ .name = "qp: max_send_wr 0xffffffff", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, max_send_wr, 0xffffffffu) },
	{ .name = "qp: type 8 (raw packet)", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, qp_type, IBV_QPT_RAW_PACKET) },
	{ .name = "qp: type 0", .op = PROTO_CREATE_QP, .p = SET(proto_create_qp, qp_type, 0) },
	{ .name = "qp: type 0xffffffff", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, qp_type, 0xffffffffu) },
	{ .name = "qp: control, the same CREATE_QP well formed (UD)", .op = PROTO_CREATE_QP,
	  .accept = true },
	{ .name = "srq: max_sge 33", .op = PROTO_CREATE_SRQ,
	  .p = SET(proto_create_srq, max_sge, PROTO_MAX_SGE + 1) },
	{ .name = "srq: max_wr one above the limit", .op = PROTO_CREATE_SRQ,
	  .p = SET(proto_create_srq, max_wr, PROTO_MAX_RING + 1) },
	{ .name = "srq: control, max_sge 32", .op = PROTO_CREATE_SRQ,
	  .p = SET(proto_create_srq, max_sge, PROTO_MAX_SGE), .accept = true },
	{ .name = "ah: PD 0", .op = PROTO_CREATE_AH, .p = SET(proto_create_ah, pd, 0) },
	{ .name = "ah: PD 0xffffffff", .op = PROTO_CREATE_AH,
	  .p = SET(proto_create_ah, pd, 0xffffffffu) },
	{ .name = "ah: source GID index 1", .op = PROTO_CREATE_AH,
	  .p = SET(proto_create_ah, sgid_index, 1) },
	{ .name = "ah: flow label wider than 20 bits", .op = PROTO_CREATE_AH,
	  .p = SET(proto_create_ah, flow_label, 0x100000) },
	{ .name = "ah: destination GID not IPv4-mapped", .op = PROTO_CREATE_AH,
	  .p = SET(proto_create_ah, dgid[10], 0) },
	{ .name = "ah: destination GID ::ffff:0.0.0.0", .op = PROTO_CREATE_AH,
	  .p = { offsetof(struct proto_create_ah, dgid[12]), 4, 0 } },
	{ .name = "ah: CREATE_AH one byte short", .op = PROTO_CREATE_AH, .delta = -1 },
	{ .name = "ah: control, the same CREATE_AH well formed", .op = PROTO_CREATE_AH,
	  .accept = true },
	{ .name = "handle: DESTROY_AH 0", .op = PROTO_DESTROY_AH,
	  .p = SET(proto_handle, handle, 0) },
	{ .name = "handle: DESTROY_AH 0xffffffff", .op = PROTO_DESTROY_AH,
	  .p = SET(proto_handle, handle, 0xffffffffu) },
	/* last: it may cost the connection */
	{ .name = "msg: zero-length message", .op = PROTO_QUERY_PORT, .empty = true },
};

/* A valid request of op from h (or an empty one for the ops the table only misuses). */
static void default_msg(const struct hostile *h, uint32_t op, union msgbuf *m)
{
	memset(m, 0, sizeof(*m));
	m->r.hdr.op = op;
	if (op == PROTO_HELLO) {
		((struct proto_hello *)m)->version = PROTO_VERSION;
	} else if (op == PROTO_REG_MR) {
		*(struct proto_reg_mr *)m = (struct proto_reg_mr){
			.hdr.op = op, .pd = h->pd2, .length = REG_BYTES, .iova = MR_IOVA,
			.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
	} else if (op == PROTO_REREG_MR) {
		/* PD 0xffffffff for the CHANGE_PD case; TRANSLATION alone reads it not */
		*(struct proto_rereg_mr *)m = (struct proto_rereg_mr){
			.hdr.op = op, .handle = h->mr, .flags = IBV_REREG_MR_CHANGE_TRANSLATION,
			.pd = 0xffffffffu, .length = REG_BYTES, .iova = MR_IOVA };
	} else if (op == PROTO_CREATE_CQ) {
		((struct proto_create_cq *)m)->cqe = 16;
	} else if (op == PROTO_CREATE_QP) {
		*(struct proto_create_qp *)m = (struct proto_create_qp){
			.hdr.op = op, .pd = h->pd2, .send_cq = h->cq2, .recv_cq = h->cq2,
			.max_send_wr = 4, .max_recv_wr = 4, .qp_type = IBV_QPT_UD };
	} else if (op == PROTO_CREATE_QP_CQS) {
		*(struct proto_create_qp_cqs *)m = (struct proto_create_qp_cqs){
			.qp = { .hdr.op = op, .pd = h->pd2, .max_send_wr = 4, .max_recv_wr = 4,
				.qp_type = IBV_QPT_UD },
			.recv_cqe = 16, .send_cqe = 16 };
	} else if (op == PROTO_CREATE_SRQ) {
		*(struct proto_create_srq *)m = (struct proto_create_srq){
			.hdr.op = op, .pd = h->pd2, .max_wr = 4, .max_sge = 1 };
	} else if (op == PROTO_CREATE_AH) {
		struct proto_create_ah *ah = (struct proto_create_ah *)m;

		*ah = (struct proto_create_ah){ .hdr.op = op, .pd = h->pd2, .hop_limit = 64 };
		ah->dgid[10] = ah->dgid[11] = 0xff;
		memcpy(ah->dgid + 12, &g_peer_ip, 4);
	} else if (op == PROTO_MODIFY_QP) {
		((struct proto_modify_qp *)m)->handle = h->qp;
		((struct proto_modify_qp *)m)->attr_mask = IBV_QP_STATE;
		((struct proto_modify_qp *)m)->attr.state = IBV_QPS_ERR;
	}
}

static void apply_patch(union msgbuf *m, const struct patch *p)
{
	uint8_t *at = m->bytes + p->off;
	uint32_t v32 = (uint32_t)p->val;
	uint16_t v16 = (uint16_t)p->val;

	switch (p->size) {
	case 1: *at = (uint8_t)p->val; break;
	case 2: memcpy(at, &v16, 2); break;
	case 4: memcpy(at, &v32, 4); break;
	case 8: memcpy(at, &p->val, 8); break;
	}
}

/* The descriptors a case sends; returns how many (fds[] to be closed by the caller). */
static int make_fds(enum fdkind kind, int fds[2])
{
	char path[] = "/tmp/ctl-hostile.XXXXXX", self[64];
	int p[2], sealed;

	fds[0] = fds[1] = -1;
	switch (kind) {
	case FD_NONE: return 0;
	case FD_MEMFD: fds[0] = memfd_of(MR_BYTES, F_SEAL_SHRINK); return 1;
	case FD_TWO: fds[0] = memfd_of(MR_BYTES, F_SEAL_SHRINK);
		fds[1] = memfd_of(MR_BYTES, F_SEAL_SHRINK); return 2;
	case FD_UNSEALED: fds[0] = memfd_of(MR_BYTES, 0); return 1;
	case FD_WRITE_SEALED:
		fds[0] = memfd_of(MR_BYTES, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE);
		return 1;
	case FD_DEVZERO: fds[0] = open("/dev/zero", O_RDWR | O_CLOEXEC); return 1;
	case FD_PIPE:
		if (pipe2(p, O_CLOEXEC) == 0) {
			fds[0] = p[0];
			close(p[1]);
		}
		return 1;
	case FD_FILE:
		fds[0] = mkstemp(path);
		if (fds[0] >= 0 && (unlink(path) < 0 || ftruncate(fds[0], MR_BYTES) < 0))
			close(fds[0]), fds[0] = -1;
		return 1;
	case FD_RDONLY:
		sealed = memfd_of(MR_BYTES, F_SEAL_SHRINK | F_SEAL_GROW);
		snprintf(self, sizeof(self), "/proc/self/fd/%d", sealed);
		fds[0] = sealed >= 0 ? open(self, O_RDONLY | O_CLOEXEC) : -1;
		if (sealed >= 0)
			close(sealed);
		return 1;
	}
	return 0;
}

/* Undoes what a control request created. */
static bool undo_control(struct hostile *h, uint32_t op, struct answer *a)
{
	const struct proto_handle_reply *r = (const void *)a->m.bytes;
	uint32_t destroy = op == PROTO_REG_MR ? PROTO_DEREG_MR :
			   op == PROTO_CREATE_CQ ? PROTO_DESTROY_CQ :
			   op == PROTO_CREATE_SRQ ? PROTO_DESTROY_SRQ :
			   op == PROTO_CREATE_AH ? PROTO_DESTROY_AH : PROTO_DESTROY_QP;
	struct answer d;

	close_fds(a);
	e2e_note("accepted: handle %u", r->handle);
	return handle_op(h->fd, destroy, r->handle, &d, "destroying it") == 0;
}

static bool run_msg_case(struct hostile *h, const struct msg_case *c)
{
	union msgbuf m;
	struct answer a;
	int fds[2], nfds = make_fds(c->fds, fds);
	size_t len = c->empty ? 0 : c->size ? c->size : (size_t)((long)size_of_op(c->op) + c->delta);
	bool ok;

	if (nfds && (fds[0] < 0 || (nfds == 2 && fds[1] < 0)))
		return e2e_mismatch("cannot make the descriptors: %s", strerror(errno));
	default_msg(h, c->op, &m);
	apply_patch(&m, &c->p);
	call(h->fd, m.bytes, len, fds, nfds, &a);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (!c->accept && c->misleads && a.got == GOT_REPLY && strstr(a.m.r.errmsg, c->misleads))
		return refused(&a), e2e_mismatch("the explanation blames %s", c->misleads);
	if (!c->accept)
		return refused(&a);
	ok = a.got == GOT_REPLY && a.m.r.hdr.status == 0;
	if (!ok)
		return close_fds(&a), e2e_mismatch("refused: %d \"%.*s\"", (int)a.m.r.hdr.status,
						   PROTO_ERRMSG, a.m.r.errmsg);
	return undo_control(h, c->op, &a);
}

/* ---- cases: MODIFY_QP out of bounds; the QP must stay where it was ---- */

struct modify_case {
	const char *name;
	enum ibv_qp_state from, to;
	uint32_t drop_mask, add_mask;
	struct patch p;          /* on the request */
};

#define ATTR(field, v) SET(proto_modify_qp, attr.field, v)

static const struct modify_case modify_cases[] = {
	{ .name = "modify: RESET -> RTR", .from = IBV_QPS_RESET, .to = IBV_QPS_RTR },
	{ .name = "modify: RESET -> RTS", .from = IBV_QPS_RESET, .to = IBV_QPS_RTS },
	{ .name = "modify: INIT -> RTS", .from = IBV_QPS_INIT, .to = IBV_QPS_RTS },
	{ .name = "modify: RTR -> INIT", .from = IBV_QPS_RTR, .to = IBV_QPS_INIT },
	{ .name = "modify: state 7", .from = IBV_QPS_RESET, .to = IBV_QPS_INIT,
	  .p = ATTR(state, 7) },
	{ .name = "modify: state 0xffffffff", .from = IBV_QPS_RESET, .to = IBV_QPS_INIT,
	  .p = ATTR(state, 0xffffffffu) },
	{ .name = "modify: path MTU 2048, above the port's active MTU", .from = IBV_QPS_INIT,
	  .to = IBV_QPS_RTR, .p = ATTR(path_mtu, IBV_MTU_2048) },
	{ .name = "modify: path MTU 0", .from = IBV_QPS_INIT, .to = IBV_QPS_RTR,
	  .p = ATTR(path_mtu, 0) },
	{ .name = "modify: path MTU 6 (no such MTU)", .from = IBV_QPS_INIT, .to = IBV_QPS_RTR,
	  .p = ATTR(path_mtu, 6) },
	{ .name = "modify: dest QPN 0", .from = IBV_QPS_INIT, .to = IBV_QPS_RTR,
	  .p = ATTR(dest_qpn, 0) },
	{ .name = "modify: dest QPN 2^24", .from = IBV_QPS_INIT, .to = IBV_QPS_RTR,
	  .p = ATTR(dest_qpn, 1u << 24) },
	{ .name = "modify: peer ::ffff:0.0.0.0", .from = IBV_QPS_INIT, .to = IBV_QPS_RTR,
	  .p = { offsetof(struct proto_modify_qp, attr.dest_gid[12]), 4, 0 } },
	{ .name = "modify: peer IPv6 from the IPv4 GID 0", .from = IBV_QPS_INIT,
	  .to = IBV_QPS_RTR, .p = ATTR(dest_gid[10], 0) },
	{ .name = "modify: source GID index 7 (of 1)", .from = IBV_QPS_INIT, .to = IBV_QPS_RTR,
	  .p = ATTR(sgid_index, 7) },
	{ .name = "modify: RTR without DEST_QPN in the mask", .from = IBV_QPS_INIT,
	  .to = IBV_QPS_RTR, .drop_mask = IBV_QP_DEST_QPN },
	{ .name = "modify: retry_cnt 8", .from = IBV_QPS_RTR, .to = IBV_QPS_RTS,
	  .p = ATTR(retry_cnt, 8) },
	{ .name = "modify: rnr_retry 8", .from = IBV_QPS_RTR, .to = IBV_QPS_RTS,
	  .p = ATTR(rnr_retry, 8) },
	{ .name = "modify: timeout 32", .from = IBV_QPS_RTR, .to = IBV_QPS_RTS,
	  .p = ATTR(timeout, 32) },
	{ .name = "modify: RTS -> RTS changing the path MTU", .from = IBV_QPS_RTS,
	  .to = IBV_QPS_RTS, .add_mask = IBV_QP_PATH_MTU, .p = ATTR(path_mtu, IBV_MTU_256) },
	{ .name = "modify: access flags 0x80000000", .from = IBV_QPS_RESET, .to = IBV_QPS_INIT,
	  .p = ATTR(access, 0x80000000u) },
};

static bool run_modify_case(struct hostile *h, const struct modify_case *c)
{
	struct proto_modify_qp m = modify_msg(h->qp, c->to);
	struct patch p = c->p;
	struct answer a;
	int state;

	if (h_to(h, c->from) < 0)
		return false;
	m.attr_mask = (m.attr_mask & ~c->drop_mask) | c->add_mask;
	apply_patch((union msgbuf *)&m, &p);
	call(h->fd, &m, sizeof(m), NULL, 0, &a);
	if (!refused(&a))
		return false;
	if (a.got == GOT_REPLY && (state = qp_state_of(h->fd, h->qp)) != (int)c->from)
		return e2e_mismatch("the QP moved from %d to %d", (int)c->from, state);
	return true;
}

/* ---- case: one client names another's objects ---- */

/* A request of the intruder's, valid but for one handle: the owner's. */
struct foreign_case {
	const char *what;
	uint32_t op;
	struct patch p;          /* val: F_PD, F_CQ, F_MR or F_QP */
};

enum { F_PD = 1, F_CQ, F_MR, F_QP };

static const struct foreign_case foreign_cases[] = {
	{ .what = "DEALLOC_PD", .op = PROTO_DEALLOC_PD, .p = SET(proto_handle, handle, F_PD) },
	{ .what = "REG_MR on its PD", .op = PROTO_REG_MR, .p = SET(proto_reg_mr, pd, F_PD) },
	{ .what = "DEREG_MR", .op = PROTO_DEREG_MR, .p = SET(proto_handle, handle, F_MR) },
	{ .what = "DESTROY_CQ", .op = PROTO_DESTROY_CQ, .p = SET(proto_handle, handle, F_CQ) },
	{ .what = "CREATE_QP on its PD", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, pd, F_PD) },
	{ .what = "CREATE_QP on its CQ (send)", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, send_cq, F_CQ) },
	{ .what = "CREATE_QP on its CQ (receive)", .op = PROTO_CREATE_QP,
	  .p = SET(proto_create_qp, recv_cq, F_CQ) },
	{ .what = "MODIFY_QP to ERR", .op = PROTO_MODIFY_QP,
	  .p = SET(proto_modify_qp, handle, F_QP) },
	{ .what = "QUERY_QP", .op = PROTO_QUERY_QP, .p = SET(proto_handle, handle, F_QP) },
	{ .what = "DESTROY_QP", .op = PROTO_DESTROY_QP, .p = SET(proto_handle, handle, F_QP) },
};

static uint64_t foreign_value(const struct hostile *owner, uint64_t v)
{
	switch (v) {
	case F_PD: return owner->pd2;
	case F_CQ: return owner->cq2;
	case F_MR: return owner->mr;
	default: return owner->qp;
	}
}

/* The intruder has one PD and one CQ (handle 1) of its own and no MR or QP, so every handle
 * it is made to name here exists only in the owner's table. */
static bool foreign_requests(struct hostile *owner, int intruder)
{
	struct hostile own = hostile_blank();
	bool ok = true;

	own.pd2 = own.cq2 = 1;
	for (size_t i = 0; i < sizeof(foreign_cases) / sizeof(foreign_cases[0]); i++) {
		const struct foreign_case *c = &foreign_cases[i];
		int fd = c->op == PROTO_REG_MR ? memfd_of(MR_BYTES, F_SEAL_SHRINK) : -1;
		struct patch p = c->p;
		union msgbuf m;
		struct answer a;

		default_msg(&own, c->op, &m);
		p.val = foreign_value(owner, p.val);
		apply_patch(&m, &p);
		call(intruder, m.bytes, size_of_op(c->op), fd >= 0 ? &fd : NULL, fd >= 0, &a);
		if (fd >= 0)
			close(fd);
		e2e_note("%s", c->what);
		ok &= refused(&a);
	}
	return ok;
}

static bool case_foreign_handles(void)
{
	struct proto_create_cq cq = { .hdr.op = PROTO_CREATE_CQ, .cqe = 4 };
	struct hostile *h = h1();
	struct answer a;
	int intruder;
	bool ok;

	if (!h || h_to(h, IBV_QPS_INIT) < 0 || (intruder = hostile_connect(g_sock_b)) < 0)
		return false;
	if (h->pd2 != 2 || h->cq2 != 2 || h->mr != 1 || h->qp != 1)
		e2e_note("owner's handles PD %u CQ %u MR %u QP %u", h->pd2, h->cq2, h->mr, h->qp);
	ok = handle_op(intruder, PROTO_ALLOC_PD, 0, &a, "intruder ALLOC_PD") == 0 &&
	     call_ok(intruder, &cq, sizeof(cq), NULL, 0, &a, "intruder CREATE_CQ") == 0;
	close_fds(&a);
	ok = ok && foreign_requests(h, intruder);
	close(intruder);
	if (ok && qp_state_of(h->fd, h->qp) != IBV_QPS_INIT)
		return e2e_mismatch("the owner's QP is no longer in INIT");
	if (ok && handle_op(h->fd, PROTO_QUERY_QP, h->qp, &a, "owner QUERY_QP") < 0)
		return false;
	return ok;
}

/* ---- cases: the rings ---- */

/* The CQs and QPs this process holds on B, over all its connections */
static bool own_queues(int fd, uint32_t *cqs, uint32_t *qps)
{
	struct proto_list req = { .hdr.op = PROTO_LIST, .kind = PROTO_LIST_CLIENTS };
	const struct proto_list_reply *r;
	struct answer a;

	*cqs = *qps = 0;
	if (call_ok(fd, &req, sizeof(req), NULL, 0, &a, "LIST clients") < 0)
		return false;
	r = (const struct proto_list_reply *)a.m.bytes;
	for (uint32_t i = 0; i < r->count && i < PROTO_LIST_MAX(clients); i++)
		if (r->u.clients[i].pid == (uint32_t)getpid()) {
			*cqs += r->u.clients[i].cqs;
			*qps += r->u.clients[i].qps;
		}
	return true;
}

/* CREATE_QP_CQS makes its two CQs and the QP or none: refused at the first CQ, at the
 * second, or at the QP after both CQs, nothing is left behind. */
static bool case_qp_cqs_all_or_nothing(void)
{
	static const struct patch bad[] = {
		SET(proto_create_qp_cqs, recv_cqe, 0),
		SET(proto_create_qp_cqs, send_cqe, PROTO_MAX_RING + 1),
		SET(proto_create_qp_cqs, qp.pd, 0xffffffffu),
	};
	struct hostile *h = h1();
	const struct proto_create_qp_cqs_reply *made;
	uint32_t cqs0, qps0, cqs, qps;
	union msgbuf m;
	struct answer a, d;
	bool ok;

	if (!h || !own_queues(h->fd, &cqs0, &qps0))
		return false;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		default_msg(h, PROTO_CREATE_QP_CQS, &m);
		apply_patch(&m, &bad[i]);
		call(h->fd, m.bytes, sizeof(struct proto_create_qp_cqs), NULL, 0, &a);
		if (!refused(&a) || !own_queues(h->fd, &cqs, &qps))
			return false;
		if (cqs != cqs0 || qps != qps0)
			return e2e_mismatch("refusal %zu left %u CQs and %u QPs (%u and %u before)",
					    i, cqs, qps, cqs0, qps0);
	}
	default_msg(h, PROTO_CREATE_QP_CQS, &m);
	if (call_ok(h->fd, m.bytes, sizeof(struct proto_create_qp_cqs), NULL, 0, &a,
		    "CREATE_QP_CQS") < 0)
		return false;
	ok = a.nfds == 6 || e2e_mismatch("CREATE_QP_CQS came with %d descriptors", a.nfds);
	close_fds(&a);
	made = (const struct proto_create_qp_cqs_reply *)a.m.bytes;
	ok = ok && own_queues(h->fd, &cqs, &qps) &&
	     ((cqs == cqs0 + 2 && qps == qps0 + 1) ||
	      e2e_mismatch("made %u CQs and %u QPs", cqs - cqs0, qps - qps0));
	ok = handle_op(h->fd, PROTO_DESTROY_QP, made->qp.handle, &d, "DESTROY_QP") == 0 && ok;
	ok = handle_op(h->fd, PROTO_DESTROY_CQ, made->recv_cq.handle, &d, "DESTROY_CQ") == 0 && ok;
	ok = handle_op(h->fd, PROTO_DESTROY_CQ, made->send_cq.handle, &d, "DESTROY_CQ") == 0 && ok;
	if (ok)
		e2e_note("three refusals left nothing; the well formed one made 2 CQs and a QP");
	return ok;
}

static bool case_ring_seals(void)
{
	struct hostile *h = h1();
	const struct { const char *what; int fd; size_t bytes; } rings[] = {
		{ "QP ring", h ? h->q.ring_fd : -1, h ? h->q.bytes : 0 },
		{ "CQ ring", h ? h->cq.ring_fd : -1, h ? h->cq.bytes : 0 },
	};
	bool ok = h != NULL;

	for (size_t i = 0; ok && i < 2; i++) {
		int seals = fcntl(rings[i].fd, F_GET_SEALS);
		int shrink = ftruncate(rings[i].fd, (off_t)rings[i].bytes / 2);
		int shrink_err = errno;
		int grow = ftruncate(rings[i].fd, (off_t)rings[i].bytes * 2);

		e2e_note("%s seals 0x%x, shrink %s, grow %s", rings[i].what, seals,
			 shrink ? errno_name(shrink_err) : "allowed", grow ? errno_name(errno) : "allowed");
		if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
				     (F_SEAL_SHRINK | F_SEAL_GROW) || !shrink || !grow)
			ok = e2e_mismatch("%s can be resized", rings[i].what);
	}
	return ok;
}

/* A REG_MR may leave its memfd out and name by inode the one the connection's last
 * REG_MR carried; naming any other inode is refused with ESTALE, saying what to do. */
static bool case_reg_names_its_memfd(void)
{
	struct hostile *h = h1();
	struct proto_reg_mr m = { .hdr.op = PROTO_REG_MR, .length = REG_BYTES, .iova = MR_IOVA,
				  .access = IBV_ACCESS_LOCAL_WRITE };
	int fd = memfd_of(REG_BYTES, F_SEAL_SHRINK);
	uint32_t handles[2];
	unsigned n = 0;
	struct answer a, d;
	struct stat st;
	bool ok = true;

	if (!h || fd < 0 || fstat(fd, &st) < 0)
		return e2e_mismatch("no hostile client or memfd");
	m.pd = h->pd2;
	if (call_ok(h->fd, &m, sizeof(m), &fd, 1, &a, "REG_MR with its memfd") == 0)
		handles[n++] = ((struct proto_reg_mr_reply *)a.m.bytes)->handle;
	close(fd);   /* the daemon holds its own */
	m.memfd_ino = (uint64_t)st.st_ino + 1;
	call(h->fd, &m, sizeof(m), NULL, 0, &a);
	if (!refused(&a) || a.got != GOT_REPLY || a.m.r.hdr.status != -ESTALE ||
	    !strstr(a.m.r.errmsg, "send it"))
		ok = e2e_mismatch("naming inode %llu: status %d \"%.*s\"",
				  (unsigned long long)m.memfd_ino, (int)a.m.r.hdr.status,
				  PROTO_ERRMSG, a.m.r.errmsg);
	m.memfd_ino = (uint64_t)st.st_ino;
	if (call_ok(h->fd, &m, sizeof(m), NULL, 0, &a, "REG_MR naming the memfd held") == 0)
		handles[n++] = ((struct proto_reg_mr_reply *)a.m.bytes)->handle;
	for (unsigned i = 0; i < n; i++)
		if (handle_op(h->fd, PROTO_DEREG_MR, handles[i], &d, "DEREG_MR") < 0)
			ok = false;
	return ok && n == 2;
}

static void doorbell(struct qp_ring *q)
{
	uint64_t one = 1;

	(void)!write(q->doorbell_fd, &one, sizeof(one));
}

static void sq_post(struct qp_ring *q, const struct proto_swqe *w, int n, bool ring)
{
	uint32_t prod = q->sq_ctl->prod;

	for (int i = 0; i < n; i++)
		q->sq[(prod + (uint32_t)i) & (q->sq_entries - 1)] = w[i];
	__atomic_store_n(&q->sq_ctl->prod, prod + (uint32_t)n, __ATOMIC_RELEASE);
	if (ring)
		doorbell(q);
}

/* Up to max completions from the CQ ring within timeout_ms; the client owns cons. */
static int cq_take(struct cq_ring *c, struct proto_cqe *out, int max, int timeout_ms)
{
	int64_t deadline = e2e_now_ms() + timeout_ms;
	int got = 0;

	for (;;) {
		uint32_t prod = __atomic_load_n(&c->ctl->prod, __ATOMIC_ACQUIRE);
		uint32_t cons = c->ctl->cons;

		while (cons != prod && got < max)
			out[got++] = c->e[cons++ & (c->entries - 1)];
		__atomic_store_n(&c->ctl->cons, cons, __ATOMIC_RELEASE);
		if (got >= max || e2e_now_ms() > deadline)
			return got;
		usleep(1000);
	}
}

static struct proto_swqe good_wqe(const struct hostile *h)
{
	return (struct proto_swqe){ .wr_id = 7, .opcode = IBV_WR_RDMA_WRITE,
				    .flags = IBV_SEND_SIGNALED, .remote_addr = 0x1000,
				    .rkey = 0x1234, .num_sge = 1,
				    .sge[0] = { MR_IOVA, 64, h->lkey } };
}

enum wqe_bad { BAD_OPCODE, BAD_NUM_SGE, BAD_FOREIGN_LKEY, BAD_LENGTH, BAD_ATOMIC_ALIGN };

struct wqe_case {
	const char *name;
	enum wqe_bad bad;
	enum ibv_wc_status want, alt;
};

static const struct wqe_case wqe_cases[] = {
	{ .name = "ring: WQE with opcode 0x77", .bad = BAD_OPCODE,
	  .want = IBV_WC_LOC_QP_OP_ERR, .alt = IBV_WC_LOC_QP_OP_ERR },
	{ .name = "ring: WQE with num_sge 100", .bad = BAD_NUM_SGE, .want = IBV_WC_LOC_LEN_ERR,
	  .alt = IBV_WC_LOC_LEN_ERR },
	{ .name = "ring: WQE with another client's lkey", .bad = BAD_FOREIGN_LKEY,
	  .want = IBV_WC_LOC_PROT_ERR, .alt = IBV_WC_LOC_PROT_ERR },
	{ .name = "ring: WQE with an SGE of 2^32-1 bytes", .bad = BAD_LENGTH,
	  .want = IBV_WC_LOC_PROT_ERR, .alt = IBV_WC_LOC_LEN_ERR },
	/* librocemu refuses it at post time; written into the ring directly, the daemon must */
	{ .name = "ring: COMPARE_SWAP at a remote address 4 bytes off alignment",
	  .bad = BAD_ATOMIC_ALIGN, .want = IBV_WC_LOC_QP_OP_ERR, .alt = IBV_WC_LOC_QP_OP_ERR },
};

static struct proto_swqe bad_wqe(const struct hostile *h, enum wqe_bad bad)
{
	struct proto_swqe w = good_wqe(h);

	w.wr_id = 100 + bad;
	switch (bad) {
	case BAD_OPCODE: w.opcode = 0x77; break;
	case BAD_NUM_SGE: w.num_sge = 100; break;
	case BAD_FOREIGN_LKEY:
		w.sge[0] = (struct proto_sge){ (uintptr_t)g_b.mr->addr, 64, g_b.mr->lkey };
		break;
	case BAD_LENGTH: w.sge[0].length = 0xffffffffu; break;
	case BAD_ATOMIC_ALIGN:
		w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		w.remote_addr = 0x1004;
		w.sge[0].length = 8;
		break;
	}
	return w;
}

static bool expect_cqe(const struct proto_cqe *e, uint64_t wr_id, enum ibv_wc_status want,
		       enum ibv_wc_status alt)
{
	e2e_note("wr_id %llu -> %s", (unsigned long long)e->wr_id,
		 wc_name(e->status));
	if (e->wr_id != wr_id || (e->status != want && e->status != alt))
		return e2e_mismatch("expected %s for wr_id %llu", wc_name(want),
				    (unsigned long long)wr_id);
	return true;
}

/* The bad WQE fails with its status; a good one posted behind it is flushed; neither puts
 * a frame on the wire. */
static bool run_wqe_case(struct hostile *h, const struct wqe_case *c)
{
	struct proto_swqe w[2] = { bad_wqe(h, c->bad), good_wqe(h) };
	struct proto_cqe e[3];
	uint64_t sent;
	int n;

	if (h_to(h, IBV_QPS_RTS) < 0)
		return false;
	sent = stat_counter(h->fd, C_sent_pkts);
	sq_post(&h->q, w, 2, true);
	n = cq_take(&h->cq, e, 2, WAIT_MS);
	if (n != 2)
		return e2e_mismatch("%d completions, expected 2", n);
	if (!expect_cqe(&e[0], w[0].wr_id, c->want, c->alt) ||
	    !expect_cqe(&e[1], w[1].wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR))
		return false;
	if (cq_take(&h->cq, e, 1, QUIET_MS))
		return e2e_mismatch("an extra completion");
	if (stat_counter(h->fd, C_sent_pkts) != sent)
		return e2e_mismatch("%llu frame(s) sent",
				    (unsigned long long)(stat_counter(h->fd, C_sent_pkts) - sent));
	return wait_state(h, IBV_QPS_ERR);
}

/* A producer index the daemon must refuse: the QP goes to ERR, nothing completes. */
static bool sq_index_case(int32_t delta_entries, int32_t delta)
{
	struct hostile *h = h1();
	struct proto_cqe e;
	uint32_t prod;

	if (!h || h_to(h, IBV_QPS_RTS) < 0)
		return false;
	prod = h->q.sq_ctl->prod + (uint32_t)(delta_entries * (int32_t)h->q.sq_entries + delta);
	e2e_note("producer %u -> %u", h->q.sq_ctl->prod, prod);
	__atomic_store_n(&h->q.sq_ctl->prod, prod, __ATOMIC_RELEASE);
	doorbell(&h->q);
	if (!wait_state(h, IBV_QPS_ERR))
		return false;
	if (cq_take(&h->cq, &e, 1, QUIET_MS))
		return e2e_mismatch("a completion (wr_id %llu, %s)", (unsigned long long)e.wr_id,
				    wc_name(e.status));
	return true;
}

static bool case_sq_backwards(void)
{
	return sq_index_case(0, -1);
}

static bool case_sq_ahead(void)
{
	return sq_index_case(1, 1);
}

/* A receive producer beyond the ring: flushing the QP must not read past it. */
static bool case_rq_beyond(void)
{
	struct hostile *h = h1();
	struct proto_modify_qp m;
	struct proto_cqe e;
	struct answer a;

	if (!h || h_to(h, IBV_QPS_RTS) < 0)
		return false;
	__atomic_store_n(&h->q.rq_ctl->prod, h->q.rq_ctl->prod + h->q.rq_entries + 5,
			 __ATOMIC_RELEASE);
	m = modify_msg(h->qp, IBV_QPS_ERR);
	if (call_ok(h->fd, &m, sizeof(m), NULL, 0, &a, "MODIFY_QP to ERR") < 0)
		return false;
	if (cq_take(&h->cq, &e, 1, QUIET_MS))
		return e2e_mismatch("a flushed receive completion (wr_id %llu)",
				    (unsigned long long)e.wr_id);
	return wait_state(h, IBV_QPS_ERR);
}

/* A CQ whose consumer index lies beyond its producer counts as full: completions are
 * dropped and counted in cq_overflow, none is written over an unread one; once the
 * consumer index is honest again, completions flow again. */
static bool case_cq_cons_beyond(void)
{
	struct hostile *h = h1();
	struct proto_swqe w;
	struct proto_cqe e;
	uint64_t before, after;
	uint32_t prod;

	if (!h || h_to(h, IBV_QPS_RTS) < 0)
		return false;
	before = stat_counter(h->fd, C_cq_overflow);
	prod = h->cq.ctl->prod;
	__atomic_store_n(&h->cq.ctl->cons, prod + 7, __ATOMIC_RELEASE);
	w = bad_wqe(h, BAD_OPCODE);
	sq_post(&h->q, &w, 1, true);
	if (!wait_state(h, IBV_QPS_ERR))
		return false;
	after = stat_counter(h->fd, C_cq_overflow);
	e2e_note("cq_overflow %llu -> %llu, producer %u -> %u", (unsigned long long)before,
		 (unsigned long long)after, prod, h->cq.ctl->prod);
	if (after <= before || after == UINT64_MAX || h->cq.ctl->prod != prod)
		return e2e_mismatch("the completion was not dropped and counted");
	__atomic_store_n(&h->cq.ctl->cons, prod, __ATOMIC_RELEASE);
	if (h_to(h, IBV_QPS_RTS) < 0)
		return false;
	sq_post(&h->q, &w, 1, true);
	return cq_take(&h->cq, &e, 1, WAIT_MS) == 1 ? expect_cqe(&e, w.wr_id, IBV_WC_LOC_QP_OP_ERR,
								   IBV_WC_LOC_QP_OP_ERR)
						    : e2e_mismatch("no completion once the CQ was honest");
}

/* Both wakeup descriptors closed at once: the daemon still completes (the work is found
 * when the QP is modified), and does not spin on the dead pipes. */
static bool case_closed_fds(void)
{
	struct proto_modify_qp m;
	struct hostile h;
	struct proto_swqe w;
	struct proto_cqe e;
	struct answer a;
	long ticks;
	bool ok;

	if (hostile_open(&h, true) < 0)
		return false;
	close(h.q.doorbell_fd);
	close(h.cq.notify_fd);
	h.q.doorbell_fd = h.cq.notify_fd = -1;
	w = bad_wqe(&h, BAD_NUM_SGE);
	ok = h_to(&h, IBV_QPS_RTS) == 0;
	sq_post(&h.q, &w, 1, false);
	m = modify_msg(h.qp, IBV_QPS_RTS);
	m.attr_mask = IBV_QP_STATE;
	ok = ok && call_ok(h.fd, &m, sizeof(m), NULL, 0, &a, "MODIFY_QP RTS -> RTS") == 0;
	ok = ok && (cq_take(&h.cq, &e, 1, WAIT_MS) == 1 ? expect_cqe(&e, w.wr_id,
				IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_LEN_ERR) : e2e_mismatch("no completion"));
	ticks = cpu_over(500);
	e2e_note("daemon CPU %ld ticks in 0.5 s", ticks);
	if (ticks > CPU_BUSY_TICKS / 2)
		ok = e2e_mismatch("the daemon is busy with nothing to do");
	hostile_close(&h);
	return ok;
}

/* ---- cases: clients that misbehave as a whole ---- */

static void finish(const char *name, bool ok);

/* Thousands of requests, a hundred CQs, not one reply read: the daemon must drop the
 * replies it cannot send rather than block, and serve everyone else meanwhile. */
static bool case_never_reads(void)
{
	struct proto_create_cq cq = { .hdr.op = PROTO_CREATE_CQ, .cqe = 4 };
	struct proto_handle st = { .hdr.op = PROTO_STATS };
	int base_fds, fd, sent = 0;
	long base_lck;
	int64_t t0, end;
	bool ok;

	baseline(&base_fds, &base_lck);
	fd = hostile_connect(g_sock_b);
	end = e2e_now_ms() + 1000;
	if (fd < 0)
		return false;
	while (sent < FLOOD_CQS + FLOOD_REQUESTS && e2e_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		if (send_msg(fd, sent < FLOOD_CQS ? (const void *)&cq : (const void *)&st,
			     sent < FLOOD_CQS ? sizeof(cq) : sizeof(st), NULL, 0, MSG_DONTWAIT) == 0)
			sent++;
		else
			poll(&p, 1, 10);
	}
	t0 = e2e_now_ms();
	ok = victim_ok();
	e2e_note("%d requests sent (%d CREATE_CQ) in at most 1 s, no reply read; the good client "
		 "served in %lld ms", sent, FLOOD_CQS, (long long)(e2e_now_ms() - t0));
	if (ok && e2e_now_ms() - t0 > 1000)
		ok = e2e_mismatch("the good client waited over a second");
	if (sent < FLOOD_CQS + FLOOD_REQUESTS)
		ok = e2e_mismatch("the daemon stopped reading the requests");
	close(fd);
	return back_to(base_fds, base_lck, 5000) && ok;
}

/* One child's share of the churn: CHURN_EACH clients with objects, then SIGKILL. */
static void churn_child(int report)
{
	struct hostile h[CHURN_EACH];
	int made = 0;

	for (int i = 0; i < CHURN_EACH; i++)
		made += hostile_open(&h[i], i % 2 == 0) == 0;
	(void)!write(report, &made, sizeof(made));
	raise(SIGKILL);
}

static bool case_churn(void)
{
	int base_fds, made = 0, p[2];
	long base_lck;
	pid_t kids[CHURN_KIDS];

	baseline(&base_fds, &base_lck);

	if (pipe2(p, O_CLOEXEC) < 0)
		return e2e_mismatch("pipe: %s", strerror(errno));
	fflush(stdout);
	for (int i = 0; i < CHURN_KIDS; i++)
		if ((kids[i] = fork()) == 0)
			churn_child(p[1]);
	close(p[1]);
	for (int i = 0, n; i < CHURN_KIDS; i++)
		if (read(p[0], &n, sizeof(n)) == sizeof(n))
			made += n;
	close(p[0]);
	for (int i = 0; i < CHURN_KIDS; i++)
		waitpid(kids[i], NULL, 0);
	e2e_note("%d of %d clients connected (half with PD, CQ, MR and QP), then SIGKILLed", made,
		 CHURN_KIDS * CHURN_EACH);
	if (made != CHURN_KIDS * CHURN_EACH)
		return e2e_mismatch("only %d clients were set up", made);
	if (!back_to(base_fds, base_lck, 5000))
		return false;
	e2e_note("descriptors back to %d, VmLck to %ld kB", base_fds, base_lck);
	return true;
}

/* Says HELLO on a new connection; whether the daemon answered within timeout_ms. */
static bool hello_answered(int fd, int timeout_ms)
{
	struct proto_hello hello = { .hdr.op = PROTO_HELLO, .version = PROTO_VERSION };
	struct answer a;

	if (send_msg(fd, &hello, sizeof(hello), NULL, 0, 0) < 0)
		return false;
	recv_answer(fd, timeout_ms, &a);
	close_fds(&a);
	return a.got == GOT_REPLY && a.m.r.hdr.status == 0;
}

/* The hog's CQs, until the daemon refuses one: with an explanation, like any refusal. */
static bool exhaust_cqs(int hog)
{
	struct proto_create_cq cq = { .hdr.op = PROTO_CREATE_CQ, .cqe = 4 };
	struct answer a;
	int n = 0;

	do {
		call(hog, &cq, sizeof(cq), NULL, 0, &a);
		close_fds(&a);
	} while (a.got == GOT_REPLY && a.m.r.hdr.status == 0 && ++n < 4 * EXHAUST_ROOM);
	e2e_note("%d CQs, then", n);
	return refused(&a);
}

static bool exhaust_good_cq(void)
{
	struct rocemu_cq *cq = rocemu_create_cq(g_b.ctx, 4);

	if (!cq)
		return e2e_mismatch("the good client cannot create a CQ: %s (\"%s\")", strerror(errno),
				    rocemu_last_error(g_b.ctx));
	rocemu_destroy_cq(cq);
	e2e_note("the good client created a CQ");
	return true;
}

/* A connection waits while the daemon has no descriptor left to accept it with: the
 * daemon must neither spin on it nor stop serving the clients it has. */
static bool exhaust_waiting(int *waiting)
{
	struct rocemu_port_attr port;
	long ticks;
	int err;

	*waiting = sock_connect(g_sock_b);
	if (*waiting < 0)
		return e2e_mismatch("connect: %s", strerror(errno));
	usleep(100000);
	ticks = cpu_over(1000);
	e2e_note("daemon CPU %ld ticks in 1 s", ticks);
	if ((err = rocemu_query_port(g_b.ctx, &port)))
		return good_fail(&g_b, "rocemu_query_port", err), false;
	return ticks <= CPU_BUSY_TICKS || e2e_mismatch("the daemon spins");
}

/* Everything released: the connection that waited, and a new one, are served. */
static bool exhaust_recovered(int waiting)
{
	int fd = sock_connect(g_sock_b);
	bool ok = hello_answered(waiting, WAIT_MS);

	if (!ok)
		e2e_mismatch("the waiting client is not served");
	if (fd < 0 || !hello_answered(fd, WAIT_MS))
		ok = e2e_mismatch("a new client is not served");
	close_if(fd);
	close_if(waiting);
	return ok && (e2e_note("the waiting client and a new one are served"), true);
}

/* One client holding the daemon's descriptors, with RLIMIT_NOFILE at what the daemon
 * has plus EXHAUST_ROOM (a service's usual soft limit is 1024: the same, sooner); then
 * no descriptor left at all (the limit below what it has). One line per step. */
static bool case_exhaust(void)
{
	const char *steps[] = { "exhaust: CQs until refused, with an explanation",
				"exhaust: the good client still creates a CQ",
				"exhaust: no descriptor left, a client waits: the daemon does not spin",
				"exhaust: released, the waiting client and a new one are served" };
	int hog = hostile_connect(g_sock_b), waiting = -1;
	struct rlimit old, low;

	if (hog < 0 || prlimit(g_pid, RLIMIT_NOFILE, NULL, &old) < 0)
		return e2e_mismatch("setup: %s", strerror(errno));
	low = (struct rlimit){ (rlim_t)fd_count() + EXHAUST_ROOM, old.rlim_max };
	prlimit(g_pid, RLIMIT_NOFILE, &low, NULL);
	finish(steps[0], exhaust_cqs(hog));
	finish(steps[1], exhaust_good_cq());
	low.rlim_cur = 3;
	prlimit(g_pid, RLIMIT_NOFILE, &low, NULL);
	finish(steps[2], exhaust_waiting(&waiting));
	prlimit(g_pid, RLIMIT_NOFILE, &old, NULL);
	close(hog);
	finish(steps[3], exhaust_recovered(waiting));
	e2e_note("the steps' lines are above");
	return true;
}

/* ---- cases: pinned memory of an unprivileged client ---- */

static int drop_to_nobody(void)
{
	struct rlimit rl = { PIN_CAP, PIN_CAP };
	struct passwd *pw = getpwnam("nobody");

	if (!pw || setrlimit(RLIMIT_MEMLOCK, &rl) < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)
		return -1;
	return 0;
}

/* REG_MR of bytes from a fresh memfd on a fresh PD of fd's client. */
static void reg_bytes(int fd, size_t bytes, struct answer *a)
{
	struct proto_reg_mr m = { .hdr.op = PROTO_REG_MR, .length = bytes, .iova = MR_IOVA,
				  .access = IBV_ACCESS_LOCAL_WRITE };
	int mfd = memfd_of(bytes, F_SEAL_SHRINK);

	if (handle_op(fd, PROTO_ALLOC_PD, 0, a, "ALLOC_PD") < 0 || mfd < 0) {
		a->got = GOT_NOTHING;
		if (mfd >= 0)
			close(mfd);
		return;
	}
	m.pd = ((struct proto_handle_reply *)a->m.bytes)->handle;
	call(fd, &m, sizeof(m), &mfd, 1, a);
	close(mfd);
}

static bool expect_edquot(struct answer *a)
{
	if (!refused(a))
		return false;
	if (a->got == GOT_REPLY && a->m.r.hdr.status != -EDQUOT)
		return e2e_mismatch("status %s, expected EDQUOT", errno_name(-a->m.r.hdr.status));
	if (a->got == GOT_REPLY && !strstr(a->m.r.errmsg, "RLIMIT_MEMLOCK"))
		return e2e_mismatch("the message does not name the limit");
	return true;
}

static bool expect_ok(struct answer *a)
{
	if (a->got == GOT_REPLY && a->m.r.hdr.status == 0) {
		e2e_note("accepted");
		return true;
	}
	return e2e_mismatch("refused: %s \"%.*s\"", a->got == GOT_REPLY ?
			    errno_name(-a->m.r.hdr.status) : "no reply", PROTO_ERRMSG, a->m.r.errmsg);
}

/* The child's cases, as nobody with RLIMIT_MEMLOCK of 1 MiB; one line each. */
static int pin_child(void)
{
	struct proto_hello hello = { .hdr.op = PROTO_HELLO, .version = PROTO_VERSION };
	struct proto_fault fault = { .hdr.op = PROTO_SET_FAULT, .spec = "drop=0.5" };
	struct answer a;
	int fd, fd2;
	uint64_t limit;

	g_any_failed = false; /* the parent's verdicts so far are not the child's */
	if (drop_to_nobody() < 0 || (fd = sock_connect(g_sock_b)) < 0) {
		e2e_mismatch("as nobody: %s (is the socket reachable for nobody?)", strerror(errno));
		report("pin: connect as nobody");
		return 1;
	}
	call(fd, &hello, sizeof(hello), NULL, 0, &a);
	limit = ((struct proto_hello_reply *)a.m.bytes)->pin_limit;
	e2e_note("HELLO says pin_limit %llu", (unsigned long long)limit);
	if (a.got != GOT_REPLY || limit != PIN_CAP)
		e2e_mismatch("expected %u, the client's RLIMIT_MEMLOCK", PIN_CAP);
	report("pin: HELLO reports the client's pin limit");
	reg_bytes(fd, 2 * PIN_CAP, &a);
	expect_edquot(&a);
	report("pin: nobody with RLIMIT_MEMLOCK 1 MiB registers 2 MiB");
	reg_bytes(fd, PIN_CAP / 2, &a);
	expect_ok(&a);
	report("pin: nobody with RLIMIT_MEMLOCK 1 MiB registers 512 KiB");
	a.got = GOT_NOTHING;
	if ((fd2 = sock_connect(g_sock_b)) >= 0)
		reg_bytes(fd2, 3 * PIN_CAP / 4, &a);
	e2e_note("the process already pins 512 KiB on its first connection");
	expect_edquot(&a);
	report("pin: the same process registers 768 KiB more on a second connection");
	call(fd, &fault, sizeof(fault), NULL, 0, &a);
	if (refused(&a) && a.got == GOT_REPLY && a.m.r.hdr.status != -EPERM)
		e2e_mismatch("expected EPERM");
	report("pin: SET_FAULT as nobody");
	return g_any_failed ? 1 : 0;
}

static bool case_pin_cap(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(pin_child());
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return e2e_mismatch("fork: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
		return e2e_mismatch("the unprivileged child did not finish (status 0x%x)", status);
	/* its lines above are the cases; this one only says that they ran */
	g_any_failed |= WEXITSTATUS(status) != 0;
	e2e_note("the child's lines are above");
	return true;
}

/* The grandchild of case_orphan: a connection made by a process gone before the daemon
 * accepted it. */
static void orphan_grandchild(int fd, int go, int result)
{
	struct proto_hello hello = { .hdr.op = PROTO_HELLO, .version = PROTO_VERSION };
	struct answer a;
	char c;

	if (read(go, &c, 1) != 1)
		_exit(1);
	call(fd, &hello, sizeof(hello), NULL, 0, &a);
	if (a.got == GOT_REPLY && a.m.r.hdr.status == 0)
		reg_bytes(fd, 2 * PIN_CAP, &a);
	(void)!write(result, &a, sizeof(a));
	_exit(0);
}

/* The child connects as nobody with a 1 MiB limit, hands the socket to its own child and
 * exits; only then (the daemon was stopped) does the daemon accept and look the limit up. */
static pid_t orphan_child(int go, int result)
{
	pid_t pid = fork();
	int fd;

	if (pid != 0)
		return pid;
	if (drop_to_nobody() < 0 || (fd = sock_connect(g_sock_b)) < 0)
		_exit(1);
	if (fork() == 0)
		orphan_grandchild(fd, go, result);
	_exit(0);
}

static bool case_orphan(void)
{
	int go[2], result[2], status;
	struct answer a = { .got = GOT_NOTHING };
	struct pollfd p;
	pid_t child;

	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(result, O_CLOEXEC) < 0)
		return e2e_mismatch("pipe: %s", strerror(errno));
	fflush(stdout);
	kill(g_pid, SIGSTOP);
	child = orphan_child(go[0], result[1]);
	waitpid(child, &status, 0);
	kill(g_pid, SIGCONT);
	(void)!write(go[1], "g", 1);
	p = (struct pollfd){ .fd = result[0], .events = POLLIN };
	if (poll(&p, 1, 2 * WAIT_MS) == 1 && read(result[0], &a, sizeof(a)) != sizeof(a))
		a.got = GOT_NOTHING;
	for (int i = 0; i < 2; i++)
		close(go[i]), close(result[i]);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return e2e_mismatch("the connecting child failed (exit %d)", WEXITSTATUS(status));
	e2e_note("the connecting process (nobody, RLIMIT_MEMLOCK 1 MiB) exited before the "
		 "daemon accepted; its child registers 2 MiB");
	return expect_edquot(&a);
}

/* ---- the final proof: an RDMA WRITE from A into the good client's buffer on B ---- */

static bool final_write(void)
{
	struct ibv_sge sge = { (uintptr_t)g_a.mr->addr, GOOD_LEN, g_a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 42, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { (uintptr_t)g_b.mr->addr, g_b.mr->rkey } };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int err, n = 0;

	for (size_t i = 0; i < GOOD_LEN; i++)
		g_a.buf[GOOD_OFF + i] = (uint8_t)(i * 31 + 7);
	if ((err = rocemu_post_send(g_a.qp, &wr, &bad)))
		return good_fail(&g_a, "rocemu_post_send", err), false;
	if (rocemu_wait_cq(g_a.cq, 10000) == 0)
		n = rocemu_poll_cq(g_a.cq, 1, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		return e2e_mismatch("the write did not complete (%s)", n == 1 ?
				    wc_name(wc.status) : "no completion");
	for (size_t i = 0; i < GOOD_PAGES * PAGE; i++) {
		bool inside = i >= GOOD_OFF && i < GOOD_OFF + GOOD_LEN;
		uint8_t want = inside ? (uint8_t)((i - GOOD_OFF) * 31 + 7) : canary(i);

		if (g_b.buf[i] != want)
			return e2e_mismatch("byte %zu of B's buffer is 0x%02x, not 0x%02x", i,
					    g_b.buf[i], want);
	}
	e2e_note("%u bytes written byte-exact, canaries intact", GOOD_LEN);
	return victim_ok();
}

/* ---- cases: batches (PROTO_BATCH) ---- */

static void batch_put(struct proto_batch *b, const void *req, size_t len)
{
	size_t off = 0;

	for (uint32_t i = 0; i < b->count; i++)
		off += (b->len[i] + 7) & ~7u;
	memcpy(b->body + off, req, len);
	b->len[b->count++] = (uint32_t)len;
}

static bool batch_answer(struct answer *a, int status, uint32_t done)
{
	const struct proto_batch_reply *r = (const struct proto_batch_reply *)a->m.bytes;

	if (a->got != GOT_REPLY || a->len != sizeof(*r))
		return e2e_mismatch("%s of %zu bytes", a->got == GOT_REPLY ? "a reply" : "no reply",
				    a->len);
	if (r->r.hdr.status != status || r->done != done)
		return e2e_mismatch("status %d after %u requests (expected %d after %u): \"%.*s\"",
				    (int)r->r.hdr.status, r->done, status, done, PROTO_ERRMSG,
				    r->r.errmsg);
	return true;
}

/* A batch runs its requests in order until one fails, says how many ran, and runs nothing
 * after it: RESET -> INIT runs, INIT -> RTS is refused, the ERROR after it never runs. */
static bool case_batch_stops(void)
{
	struct hostile *h = h1();
	struct proto_batch b = { .hdr.op = PROTO_BATCH };
	struct proto_modify_qp init, rts, err, reset;
	struct answer a;
	int state;

	if (!h || h_to(h, IBV_QPS_RESET) < 0)
		return false;
	init = modify_msg(h->qp, IBV_QPS_INIT);
	rts = modify_msg(h->qp, IBV_QPS_RTS);
	err = modify_msg(h->qp, IBV_QPS_ERR);
	reset = modify_msg(h->qp, IBV_QPS_RESET);
	batch_put(&b, &init, sizeof(init));
	batch_put(&b, &rts, sizeof(rts));
	batch_put(&b, &err, sizeof(err));
	call(h->fd, &b, sizeof(b), NULL, 0, &a);
	if (!refused(&a) || !batch_answer(&a, -EINVAL, 1))
		return false;
	if ((state = qp_state_of(h->fd, h->qp)) != IBV_QPS_INIT)
		return e2e_mismatch("the QP is in state %d, not INIT", state);
	memset(&b, 0, sizeof(b));
	b.hdr.op = PROTO_BATCH;
	batch_put(&b, &err, sizeof(err));
	batch_put(&b, &reset, sizeof(reset));
	call(h->fd, &b, sizeof(b), NULL, 0, &a);
	if (!batch_answer(&a, 0, 2))
		return false;
	if ((state = qp_state_of(h->fd, h->qp)) != IBV_QPS_RESET)
		return e2e_mismatch("the QP is in state %d after ERROR and RESET", state);
	return true;
}

enum batch_flaw { B_EMPTY, B_FIVE, B_SHORT, B_PAST_BODY, B_NESTED, B_CREATE, B_REG_MR,
		  B_LONG_MODIFY };

/* A malformed batch is refused whole, before any of it runs (the QP stays in RESET). */
static bool batch_flawed(enum batch_flaw flaw)
{
	struct hostile *h = h1();
	struct proto_batch b = { .hdr.op = PROTO_BATCH }, inner = { .hdr.op = PROTO_BATCH };
	struct proto_modify_qp init;
	struct proto_create_qp create = { .hdr.op = PROTO_CREATE_QP };
	struct proto_reg_mr reg = { .hdr.op = PROTO_REG_MR };
	struct answer a;
	int state;

	if (!h || h_to(h, IBV_QPS_RESET) < 0)
		return false;
	init = modify_msg(h->qp, IBV_QPS_INIT);
	batch_put(&b, &init, sizeof(init));
	switch (flaw) {
	case B_EMPTY: b.count = 0; break;
	case B_FIVE: b.count = PROTO_BATCH_MAX + 1; break;
	case B_SHORT: batch_put(&b, &init, 4); break;
	case B_PAST_BODY: b.len[0] = PROTO_BATCH_BODY + 8; break;
	case B_NESTED: batch_put(&inner, &init, sizeof(init));
		batch_put(&b, &inner, sizeof(inner) - sizeof(b.body) + 8); break;
	case B_CREATE: batch_put(&b, &create, sizeof(create)); break;
	case B_REG_MR: batch_put(&b, &reg, sizeof(reg)); break;
	case B_LONG_MODIFY: b.len[0] += 8; break;
	}
	call(h->fd, &b, sizeof(b), NULL, 0, &a);
	if (!refused(&a) || !batch_answer(&a, -EPROTO, 0))
		return false;
	if ((state = qp_state_of(h->fd, h->qp)) != IBV_QPS_RESET)
		return e2e_mismatch("the QP moved to state %d", state);
	return true;
}

static bool case_batch_malformed(void)
{
	static const char *const what[] = { "no request", "five requests", "a 4-byte request",
		"a request past the body", "a batch in a batch", "CREATE_QP (its reply has fds)",
		"REG_MR (it takes a memfd)", "a MODIFY_QP 8 bytes long" };

	for (enum batch_flaw f = B_EMPTY; f <= B_LONG_MODIFY; f++)
		if (!batch_flawed(f))
			return e2e_mismatch("with %s", what[f]);
	return true;
}

/* A request sent with no reply wanted: nothing comes back, a failure is counted, and the
 * client's next request is answered as its own (nothing of the silent one left in the
 * socket); one whose reply would say more than success, or that is unknown, or that sits
 * in a batch with the flag, is refused with a reply. */
static bool no_answer_within(int fd, const char *what)
{
	struct answer a;

	recv_answer(fd, QUIET_MS, &a);
	if (a.got == GOT_NOTHING)
		return true;
	close_fds(&a);
	return e2e_mismatch("%s was answered (%s)", what, a.got == GOT_GONE ? "hung up" :
			    "a reply");
}

static bool case_unanswered(void)
{
	struct hostile *h = h1();
	struct proto_create_cq cq = { .hdr.op = PROTO_CREATE_CQ, .cqe = 4 };
	struct proto_handle bogus = { .hdr.op = PROTO_DESTROY_QP | PROTO_NO_REPLY,
				      .handle = 0xfffffff0u };
	struct proto_handle pd = { .hdr.op = PROTO_ALLOC_PD | PROTO_NO_REPLY };
	struct proto_handle unknown = { .hdr.op = PROTO_OP_COUNT | PROTO_NO_REPLY };
	struct proto_handle inner = { .hdr.op = PROTO_DESTROY_CQ | PROTO_NO_REPLY };
	struct proto_batch b = { .hdr.op = PROTO_BATCH };
	uint32_t cqs0, qps0, cqs, qps;
	uint64_t failed0, failed;
	struct answer a;

	if (!h || !own_queues(h->fd, &cqs0, &qps0) ||
	    (failed0 = stat_counter(h->fd, C_ctl_unanswered_failed)) == UINT64_MAX)
		return false;
	if (send_msg(h->fd, &bogus, sizeof(bogus), NULL, 0, 0) < 0 ||
	    !no_answer_within(h->fd, "a DESTROY_QP of no QP"))
		return false;
	failed = stat_counter(h->fd, C_ctl_unanswered_failed);
	if (failed != failed0 + 1)
		return e2e_mismatch("ctl_unanswered_failed went from %llu to %llu",
				    (unsigned long long)failed0, (unsigned long long)failed);
	call(h->fd, &pd, sizeof(pd), NULL, 0, &a);
	if (!refused(&a))
		return false;
	call(h->fd, &unknown, sizeof(unknown), NULL, 0, &a);
	if (!refused(&a))
		return false;
	if (call_ok(h->fd, &cq, sizeof(cq), NULL, 0, &a, "CREATE_CQ") < 0)
		return false;
	close_fds(&a);
	inner.handle = ((const struct proto_create_cq_reply *)a.m.bytes)->handle;
	batch_put(&b, &inner, sizeof(inner));
	call(h->fd, &b, sizeof(b), NULL, 0, &a);
	if (!refused(&a) || !batch_answer(&a, -EPROTO, 0))
		return false;
	inner.hdr.op = PROTO_DESTROY_CQ;
	memset(&b, 0, sizeof(b));
	b.hdr.op = PROTO_BATCH | PROTO_NO_REPLY;
	batch_put(&b, &inner, sizeof(inner));
	if (send_msg(h->fd, &b, sizeof(b), NULL, 0, 0) < 0 ||
	    !no_answer_within(h->fd, "a batch destroying a CQ") || !own_queues(h->fd, &cqs, &qps))
		return false;
	if (cqs != cqs0 || qps != qps0)
		return e2e_mismatch("%u CQs and %u QPs after the silent destroy, %u and %u before",
				    cqs, qps, cqs0, qps0);
	if (stat_counter(h->fd, C_ctl_unanswered_failed) != failed)
		return e2e_mismatch("the silent destroy that ran was counted as failed");
	e2e_note("a silent failure counted, silent ALLOC_PD and unknown op refused aloud, "
		 "a silent batch ran");
	return true;
}

static uint32_t daemon_qps(int fd)
{
	struct proto_handle req = { .hdr.op = PROTO_STATUS };
	struct answer a;

	call(fd, &req, sizeof(req), NULL, 0, &a);
	if (a.got != GOT_REPLY || a.len != sizeof(struct proto_status_reply))
		return UINT32_MAX;
	return ((struct proto_status_reply *)a.m.bytes)->qps;
}

/* CREATE_QP of one of the client's QP types, with a change at creation; status is its. */
static bool create_in(struct hostile *h, uint32_t type, uint32_t mask, uint32_t state,
		      int status)
{
	struct proto_create_qp m = { .hdr.op = PROTO_CREATE_QP, .pd = h->pd2,
				     .send_cq = h->cq2, .recv_cq = h->cq2, .max_send_wr = 4,
				     .max_recv_wr = 4, .qp_type = type, .init_mask = mask,
				     .init = { .state = state, .access = IBV_ACCESS_REMOTE_WRITE,
					       .qkey = 0x1234 } };
	uint32_t before = daemon_qps(h->fd), handle;
	struct answer a;
	int got;

	call(h->fd, &m, sizeof(m), NULL, 0, &a);
	if (status)
		return refused(&a) && (int)a.m.r.hdr.status == status &&
		       (daemon_qps(h->fd) == before ||
			e2e_mismatch("%u QPs after the refusal, %u before", daemon_qps(h->fd),
				     before));
	if (a.got != GOT_REPLY || a.m.r.hdr.status != 0 || a.nfds != 2) {
		close_fds(&a);
		return e2e_mismatch("refused: %d \"%.*s\"", (int)a.m.r.hdr.status, PROTO_ERRMSG,
				    a.m.r.errmsg);
	}
	close_fds(&a);
	handle = ((struct proto_create_qp_reply *)a.m.bytes)->handle;
	if ((got = qp_state_of(h->fd, handle)) != (int)state)
		return e2e_mismatch("the new QP is in state %d, not %u", got, state);
	return handle_op(h->fd, PROTO_DESTROY_QP, handle, &a, "DESTROY_QP") == 0;
}

/* A QP made in INIT in one request; a change at creation that is not to INIT, carries an
 * address or is refused as a MODIFY_QP would be leaves no QP behind. */
static bool case_create_in_init(void)
{
	struct hostile *h = h1();

	if (!h)
		return false;
	return create_in(h, IBV_QPT_RC, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, IBV_QPS_INIT, 0) &&
	       create_in(h, IBV_QPT_UD, IBV_QP_STATE | IBV_QP_QKEY, IBV_QPS_INIT, 0) &&
	       create_in(h, IBV_QPT_RC, IBV_QP_STATE, IBV_QPS_RTS, -EINVAL) &&
	       create_in(h, IBV_QPT_RC, IBV_QP_STATE | IBV_QP_AV, IBV_QPS_INIT, -EINVAL) &&
	       create_in(h, IBV_QPT_RC, IBV_QP_ACCESS_FLAGS, IBV_QPS_INIT, -EINVAL) &&
	       /* UD needs its Q_Key, UC its access flags, on the way to INIT */
	       create_in(h, IBV_QPT_UD, IBV_QP_STATE, IBV_QPS_INIT, -EINVAL) &&
	       create_in(h, IBV_QPT_UC, IBV_QP_STATE, IBV_QPS_INIT, -EINVAL);
}

/* ---- the table of cases ---- */

struct named_case {
	const char *name;
	bool (*fn)(void);
};

static const struct named_case cases[] = {
	{ .name = "batch: runs in order, stops at the first failure, says how many ran",
	  .fn = case_batch_stops },
	{ .name = "batch: malformed batches refused before any request runs",
	  .fn = case_batch_malformed },
	{ .name = "unanswered: requests sent with no reply wanted", .fn = case_unanswered },
	{ .name = "create: a QP made in INIT; a refused change at creation leaves no QP",
	  .fn = case_create_in_init },
	{ .name = "foreign: a second client names the first one's PD, CQ, MR and QP",
	  .fn = case_foreign_handles },
	{ .name = "ring: the ring memfds are sealed against resizing", .fn = case_ring_seals },
	{ .name = "mr: REG_MR without a descriptor names the memfd held, no other",
	  .fn = case_reg_names_its_memfd },
	{ .name = "qp+cqs: refused at any of its three, none is made",
	  .fn = case_qp_cqs_all_or_nothing },
	{ .name = "ring: send producer index moved backwards", .fn = case_sq_backwards },
	{ .name = "ring: send producer index more than a ring ahead", .fn = case_sq_ahead },
	{ .name = "ring: receive producer index beyond the ring, QP flushed",
	  .fn = case_rq_beyond },
	{ .name = "ring: CQ consumer index beyond the producer", .fn = case_cq_cons_beyond },
	{ .name = "ring: doorbell and notification descriptors closed early",
	  .fn = case_closed_fds },
	{ .name = "client: sends requests and never reads a reply", .fn = case_never_reads },
	{ .name = "client: 200 clients connect and vanish abruptly", .fn = case_churn },
	{ .name = "exhaust: one client held the daemon's descriptors in the steps above",
	  .fn = case_exhaust },
	{ .name = "pin: an unprivileged child ran the cases above", .fn = case_pin_cap },
	{ .name = "pin: the connecting process is gone before the daemon accepts",
	  .fn = case_orphan },
};

static const char *const *g_only;
static int g_nonly;

static bool selected(const char *name)
{
	for (int i = 0; i < g_nonly; i++)
		if (!strncmp(name, g_only[i], strlen(g_only[i])))
			return true;
	return g_nonly == 0;
}

/* Each case, then the same check of the daemon and the good client. */
static void finish(const char *name, bool ok)
{
	if (!ok && !e2e_case_failed())
		e2e_mismatch("the case could not run");
	victim_ok();
	report(name);
}

static void run_tables(void)
{
	for (size_t i = 0; i < sizeof(msg_cases) / sizeof(msg_cases[0]); i++) {
		struct hostile *h;

		if (!selected(msg_cases[i].name))
			continue;
		h = h1();
		finish(msg_cases[i].name, h && run_msg_case(h, &msg_cases[i]));
	}
	for (size_t i = 0; i < sizeof(modify_cases) / sizeof(modify_cases[0]); i++) {
		struct hostile *h;

		if (!selected(modify_cases[i].name))
			continue;
		h = h1();
		finish(modify_cases[i].name, h && run_modify_case(h, &modify_cases[i]));
	}
	for (size_t i = 0; i < sizeof(wqe_cases) / sizeof(wqe_cases[0]); i++) {
		struct hostile *h;

		if (!selected(wqe_cases[i].name))
			continue;
		h = h1();
		finish(wqe_cases[i].name, h && run_wqe_case(h, &wqe_cases[i]));
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (selected(cases[i].name))
			finish(cases[i].name, cases[i].fn());
}

static int setup(void)
{
	enum ibv_mtu mtu;

	if (good_open(&g_b, g_sock_b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) < 0 ||
	    good_open(&g_a, g_sock_a, IBV_ACCESS_LOCAL_WRITE) < 0)
		return -1;
	mtu = g_a.port.active_mtu < g_b.port.active_mtu ? g_a.port.active_mtu
							: g_b.port.active_mtu;
	g_peer_ip = g_a.port.ipv4;
	g_port_mtu = g_b.port.active_mtu;
	if (g_port_mtu >= IBV_MTU_2048)
		return e2e_mismatch("B's active MTU must be below 2048 (start it with -m 1024)"), -1;
	return good_connect(&g_b, &g_a, mtu) < 0 || good_connect(&g_a, &g_b, mtu) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: ctl_hostile_e2e SOCK_B PID_B SOCK_A [CASE-PREFIX...]\n");
		return 2;
	}
	g_sock_b = argv[1];
	g_pid = (pid_t)atoi(argv[2]);
	g_sock_a = argv[3];
	g_only = (const char *const *)argv + 4;
	g_nonly = argc - 4;
	signal(SIGPIPE, SIG_IGN);
	if (setup() < 0) {
		report("setup");
		return 2;
	}
	run_tables();
	finish("final: RDMA WRITE from A into the good client's MR on B", final_write());
	hostile_close(&g_h);
	return g_any_failed ? 1 : 0;
}
