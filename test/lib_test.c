/* Check suite for librocemu, run against a fake daemon: a thread of the test process that
 * accepts on a real socket in a temporary directory, answers proto.h requests, maps the
 * memfds it is given or creates (as rocemud does), and can be told to refuse, to answer
 * wrongly or to hang up. The fake asserts that every request has exactly its struct's
 * size. */
#include "emu/lib/lib_int.h" /* white-box: ctx_find_socket */

#include <alloca.h>
#include <arpa/inet.h>
#include <check.h>
#include <malloc.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_S 20
#define FAKE_MAX_MRS 48
#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE

/* ------------------------------------------------------------------ the fake daemon */

enum fake_misreply { MIS_NONE, MIS_OP, MIS_SIZE, MIS_EXTRA_FD };

struct fake_mr {
	struct proto_reg_mr req;
	int seals;
	void *map;
	size_t map_len;
	uint8_t *view;          /* the daemon's mapping of byte iova of the MR */
};

struct fake_ring {
	void *map;
	size_t len;
	int efd;                /* the daemon's side of the CQ's notify / QP's doorbell fd */
};

struct fake {
	char dir[64];
	char path[108];
	int listen_fd;
	int conn;               /* exchanged atomically: whoever takes it closes it */
	pthread_t thread;
	bool running;
	/* behaviour, set by a test before the call it affects */
	uint32_t hello_version;
	uint32_t fail_op;       /* refuse this op with fail_status and fail_msg */
	int32_t fail_status;
	const char *fail_msg;
	bool fail_full;         /* refuse with the op's own reply struct, not a bare reply */
	uint32_t hangup_op;     /* close the connection instead of answering this op */
	uint32_t mis_op;        /* answer this op wrongly, as mis says */
	enum fake_misreply mis;
	bool bad_cq_ring;
	bool reuse_cq_ring;     /* a new CQ gets the last CQ's memfd again, as the daemon's */
	uint32_t ring_start;    /* both indices of every new ring start here */
	bool drop_memfd;        /* forget the memfd held, as a daemon given another would */
	int events;             /* the write end of the event pipe HELLO handed out */
	/* what it saw and made */
	unsigned count[PROTO_OP_COUNT];
	unsigned unanswered[PROTO_OP_COUNT];  /* of count, those sent with PROTO_NO_REPLY */
	unsigned nmrs;
	struct fake_mr mrs[FAKE_MAX_MRS];
	int memfd;              /* the last memfd a REG_MR carried, held as rocemud holds it */
	uint64_t memfd_ino;
	unsigned reg_fds;       /* REG_MRs that carried one */
	struct fake_ring cq;
	int cq_memfd;           /* the last CQ's ring */
	uint32_t cq_entries;
	struct fake_ring qp;
	uint32_t sq_entries, rq_entries;
	uint32_t sq_stride, rq_stride;  /* as the daemon sizes the slots */
	uint64_t rq_offset;
	struct proto_modify_qp modify;
	struct proto_create_qp create_qp;    /* the last CREATE_QP */
	struct proto_create_qp_cqs create_qp_cqs;
	struct proto_batch batch;
	int32_t batch_status;   /* a batch fails so, after batch_done requests ran */
	uint32_t batch_done;
	uint32_t next_handle;
};

static const size_t req_size[PROTO_OP_COUNT] = {
	[PROTO_HELLO] = sizeof(struct proto_hello),
	[PROTO_QUERY_PORT] = sizeof(struct proto_handle),
	[PROTO_ALLOC_PD] = sizeof(struct proto_handle),
	[PROTO_DEALLOC_PD] = sizeof(struct proto_handle),
	[PROTO_REG_MR] = sizeof(struct proto_reg_mr),
	[PROTO_DEREG_MR] = sizeof(struct proto_handle),
	[PROTO_CREATE_CQ] = sizeof(struct proto_create_cq),
	[PROTO_DESTROY_CQ] = sizeof(struct proto_handle),
	[PROTO_CREATE_QP] = sizeof(struct proto_create_qp),
	[PROTO_MODIFY_QP] = sizeof(struct proto_modify_qp),
	[PROTO_QUERY_QP] = sizeof(struct proto_handle),
	[PROTO_DESTROY_QP] = sizeof(struct proto_handle),
	[PROTO_BATCH] = sizeof(struct proto_batch),
	[PROTO_CREATE_QP_CQS] = sizeof(struct proto_create_qp_cqs),
};

static const size_t reply_size[PROTO_OP_COUNT] = {
	[PROTO_HELLO] = sizeof(struct proto_hello_reply),
	[PROTO_QUERY_PORT] = sizeof(struct proto_port_reply),
	[PROTO_ALLOC_PD] = sizeof(struct proto_handle_reply),
	[PROTO_DEALLOC_PD] = sizeof(struct proto_reply),
	[PROTO_REG_MR] = sizeof(struct proto_reg_mr_reply),
	[PROTO_DEREG_MR] = sizeof(struct proto_reply),
	[PROTO_CREATE_CQ] = sizeof(struct proto_create_cq_reply),
	[PROTO_DESTROY_CQ] = sizeof(struct proto_reply),
	[PROTO_CREATE_QP] = sizeof(struct proto_create_qp_reply),
	[PROTO_MODIFY_QP] = sizeof(struct proto_reply),
	[PROTO_QUERY_QP] = sizeof(struct proto_query_qp_reply),
	[PROTO_DESTROY_QP] = sizeof(struct proto_reply),
	[PROTO_BATCH] = sizeof(struct proto_batch_reply),
	[PROTO_CREATE_QP_CQS] = sizeof(struct proto_create_qp_cqs_reply),
};

static long page;

/* A message of any op, read through its common head. */
union fake_buf {
	struct proto_hdr hdr;
	struct proto_reply r;
	char bytes[PROTO_MAX_MSG];
};

static void fake_send(struct fake *f, const void *buf, size_t len, const int *fds,
		      unsigned nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * PROTO_MAX_REPLY_FDS)] = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *c;

		msg.msg_control = cbuf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	ck_assert_int_eq(sendmsg(f->conn, &msg, MSG_NOSIGNAL), (ssize_t)len);
}

static ssize_t fake_recv(struct fake *f, void *buf, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = PROTO_MAX_MSG };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	ssize_t n = recvmsg(f->conn, &msg, MSG_CMSG_CLOEXEC);

	*fd = -1;
	c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return n;
}

static void fake_reply_ok(struct fake *f, uint32_t op)
{
	struct proto_reply r = { .hdr.op = op };

	fake_send(f, &r, sizeof(r), NULL, 0);
}

static void fake_refuse(struct fake *f, uint32_t op)
{
	union fake_buf buf = { .r.hdr = { .op = op, .status = f->fail_status } };

	snprintf(buf.r.errmsg, sizeof(buf.r.errmsg), "%s", f->fail_msg ? f->fail_msg : "");
	fake_send(f, buf.bytes, f->fail_full ? reply_size[op] : sizeof(buf.r), NULL, 0);
}

static void fake_misreply(struct fake *f, uint32_t op)
{
	union fake_buf buf = { .r.hdr.op = f->mis == MIS_OP ? op + 1 : op };
	int efd = eventfd(0, EFD_CLOEXEC);

	if (f->mis == MIS_SIZE)
		fake_send(f, buf.bytes, reply_size[op] - 4, NULL, 0);
	else
		fake_send(f, buf.bytes, reply_size[op], &efd, f->mis == MIS_EXTRA_FD);
	close(efd);
}

static void on_hello(struct fake *f, const void *req, int fd)
{
	struct proto_hello qv, *q = memcpy(&qv, req, sizeof(qv));
	struct proto_hello_reply r = {
		.r.hdr.op = PROTO_HELLO,
		.version = f->hello_version ? f->hello_version : PROTO_VERSION,
		.max_qp = 64, .max_qp_wr = 1024, .max_cqe = 4096, .max_mr = 128, .max_sge = 4,
		.max_mr_size = UINT64_C(1) << 30, .pin_limit = UINT64_C(1) << 26,
		.max_qp_rd_atom = 16, .atomic_cap = IBV_ATOMIC_GLOB, .max_srq = 32,
		.max_srq_wr = 512, .max_inline_data = 128,
	};

	int ends[2];

	(void)fd;
	ck_assert_uint_eq(q->version, PROTO_VERSION);
	ck_assert_int_eq(pipe2(ends, O_CLOEXEC | O_NONBLOCK), 0);
	if (f->events >= 0)
		close(f->events);
	f->events = ends[1];
	fake_send(f, &r, sizeof(r), &ends[0], 1);
	close(ends[0]);
}

static void on_query_port(struct fake *f, const void *req, int fd)
{
	struct proto_port_reply r = {
		.r.hdr.op = PROTO_QUERY_PORT,
		.state = IBV_PORT_ACTIVE,
		.max_mtu = IBV_MTU_4096,
		.active_mtu = IBV_MTU_1024,
		.ipv4 = htonl(0x0a000001),
		.ngids = 2,
		.gids = { { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 },
			  { 0xfd, 0x52, 0x6f, 0x63, [15] = 1 } },
	};

	(void)req;
	(void)fd;
	memcpy(r.ifname, "abcdefghijklmnop", sizeof(r.ifname)); /* no NUL on the wire */
	fake_send(f, &r, sizeof(r), NULL, 0);
}

static void on_alloc_pd(struct fake *f, const void *req, int fd)
{
	struct proto_handle_reply r = { .r.hdr.op = PROTO_ALLOC_PD, .handle = ++f->next_handle };

	(void)req;
	(void)fd;
	fake_send(f, &r, sizeof(r), NULL, 0);
}

/* As rocemud does: hold the memfd a registration hands over, for the later ones that name
 * it instead (or refuse them with ESTALE when it holds another), and map it at fd_offset,
 * so the MR's bytes are the daemon's to write. */
static void on_reg_mr(struct fake *f, const void *req, int fd)
{
	struct proto_reg_mr qv, *q = memcpy(&qv, req, sizeof(qv));
	struct fake_mr *m = &f->mrs[f->nmrs];
	uint64_t base = q->fd_offset & ~(uint64_t)(page - 1);
	struct proto_reg_mr_reply r = { .r.hdr.op = PROTO_REG_MR };

	ck_assert_uint_lt(f->nmrs, FAKE_MAX_MRS);
	if (f->drop_memfd && f->memfd >= 0) {
		close(f->memfd);
		f->memfd = -1;
	}
	if (fd >= 0) {
		struct stat st;

		ck_assert_int_eq(fstat(fd, &st), 0);
		if (f->memfd >= 0)
			close(f->memfd);
		f->memfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		f->memfd_ino = st.st_ino;
		f->reg_fds++;
	} else if (f->memfd < 0 || q->memfd_ino != f->memfd_ino) {
		f->fail_status = -ESTALE;
		fake_refuse(f, PROTO_REG_MR);
		f->fail_status = 0;
		return;
	}
	m->req = *q;
	m->seals = fcntl(f->memfd, F_GET_SEALS);
	m->map_len = (size_t)((q->fd_offset - base + q->length + (uint64_t)page - 1) &
			      ~(uint64_t)(page - 1));
	m->map = mmap(NULL, m->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd,
		      (off_t)base);
	ck_assert_ptr_ne(m->map, MAP_FAILED);
	m->view = (uint8_t *)m->map + (q->fd_offset - base);
	r.handle = ++f->next_handle;
	r.lkey = 0x1000 + f->nmrs;
	r.rkey = 0x2000 + f->nmrs;
	f->nmrs++;
	fake_send(f, &r, sizeof(r), NULL, 0);
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void fake_unmap(struct fake_ring *r)
{
	if (r->map)
		munmap(r->map, r->len);
	if (r->efd >= 0)
		close(r->efd);
	r->map = NULL;
	r->efd = -1;
}

/* A ring memfd of len bytes mapped into r, both indices at start, and an eventfd. The
 * returned fds are the ones to send: the memfd (the caller closes it) and the eventfd. */
static void fake_make_ring(struct fake_ring *r, uint64_t len, uint32_t start,
			   uint64_t second_ctl, int fds[2])
{
	struct proto_ring_ctl *ctl;

	fake_unmap(r); /* the fake keeps the daemon's side of the newest ring only */
	fds[0] = memfd_create("fake-ring", MFD_CLOEXEC);
	ck_assert_int_ge(fds[0], 0);
	ck_assert_int_eq(ftruncate(fds[0], (off_t)len), 0);
	r->len = (size_t)len;
	r->map = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	ck_assert_ptr_ne(r->map, MAP_FAILED);
	r->efd = fds[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(r->efd, 0);
	ctl = r->map;
	ctl->prod = ctl->cons = start;
	if (second_ctl) {
		ctl = (struct proto_ring_ctl *)((char *)r->map + second_ctl);
		ctl->prod = ctl->cons = start;
	}
}

static void on_create_cq(struct fake *f, const void *req, int fd)
{
	struct proto_create_cq qv, *q = memcpy(&qv, req, sizeof(qv));
	struct proto_create_cq_reply r = { .r.hdr.op = PROTO_CREATE_CQ };
	int fds[2];

	(void)fd;
	f->cq_entries = pow2_at_least(q->cqe);
	r.handle = ++f->next_handle;
	r.entries = f->bad_cq_ring ? 3 : f->cq_entries;
	r.ring_bytes = proto_ring_bytes(f->cq_entries, sizeof(struct proto_cqe));
	if (f->reuse_cq_ring && f->cq_memfd >= 0 && f->cq.len == r.ring_bytes) {
		/* zeroed and handed out again, with a new pipe */
		struct proto_ring_ctl *ctl = f->cq.map;

		memset(f->cq.map, 0, f->cq.len);
		ctl->prod = ctl->cons = f->ring_start;
		close(f->cq.efd);
		f->cq.efd = fds[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		fds[0] = f->cq_memfd;
		fake_send(f, &r, sizeof(r), fds, 2);
		return;
	}
	fake_make_ring(&f->cq, r.ring_bytes, f->ring_start, 0, fds);
	fake_send(f, &r, sizeof(r), fds, 2);
	if (f->cq_memfd >= 0)
		close(f->cq_memfd);
	f->cq_memfd = fds[0];
}

/* The QP's reply and ring (the ring's memfd, to be closed once sent, and pipe in fds) */
static struct proto_create_qp_reply fake_qp(struct fake *f, const struct proto_create_qp *q,
					    int fds[2])
{
	struct proto_create_qp_reply r;
	uint32_t room = proto_swqe_room(q->max_send_sge, q->max_inline_data);

	f->create_qp = *q;
	f->sq_entries = pow2_at_least(q->max_send_wr);
	f->rq_entries = pow2_at_least(q->max_recv_wr);
	f->sq_stride = proto_swqe_stride(room);
	f->rq_stride = proto_rwqe_stride(q->max_recv_sge);
	f->rq_offset = proto_ring_bytes(f->sq_entries, f->sq_stride);
	r = (struct proto_create_qp_reply){
		.r.hdr.op = PROTO_CREATE_QP,
		.handle = ++f->next_handle,
		.qpn = 0x11 + f->next_handle,
		.sq_entries = f->sq_entries,
		.rq_entries = f->rq_entries,
		.rq_offset = f->rq_offset,
		.ring_bytes = f->rq_offset + proto_ring_bytes(f->rq_entries, f->rq_stride),
		.max_send_sge = room / sizeof(struct proto_sge),
		.max_recv_sge = q->max_recv_sge,
		.max_inline_data = room,
	};
	fake_make_ring(&f->qp, r.ring_bytes, f->ring_start, f->rq_offset, fds);
	return r;
}

static void on_create_qp(struct fake *f, const void *req, int fd)
{
	struct proto_create_qp q;
	int fds[2];
	struct proto_create_qp_reply r = fake_qp(f, memcpy(&q, req, sizeof(q)), fds);

	(void)fd;
	fake_send(f, &r, sizeof(r), fds, 2);
	close(fds[0]);
}

/* A CQ's reply and ring, in a fake_ring of its own (fds as fake_make_ring's) */
static struct proto_cq_made fake_cq(struct fake *f, uint32_t cqe, struct fake_ring *ring,
				    int fds[2])
{
	struct proto_cq_made m = { .handle = ++f->next_handle };

	f->cq_entries = pow2_at_least(cqe);
	m.entries = f->bad_cq_ring ? 3 : f->cq_entries;
	m.ring_bytes = proto_ring_bytes(f->cq_entries, sizeof(struct proto_cqe));
	fake_make_ring(ring, m.ring_bytes, f->ring_start, 0, fds);
	return m;
}

/* (the fake keeps no ring of these CQs: they are only made and destroyed) */
static void on_create_qp_cqs(struct fake *f, const void *req, int fd)
{
	struct proto_create_qp_cqs m;
	struct proto_create_qp_cqs_reply r;
	struct fake_ring recv = { .efd = -1 }, send = { .efd = -1 };
	int fds[6];

	(void)fd;
	memcpy(&m, req, sizeof(m));
	f->create_qp_cqs = m;
	r.recv_cq = fake_cq(f, m.recv_cqe, &recv, &fds[2]);
	r.send_cq = fake_cq(f, m.send_cqe, &send, &fds[4]);
	r.qp = fake_qp(f, &m.qp, fds);
	r.qp.r.hdr.op = PROTO_CREATE_QP_CQS;
	fake_send(f, &r, sizeof(r), fds, 6);
	close(fds[0]);
	close(fds[2]);
	close(fds[4]);
	fake_unmap(&recv);
	fake_unmap(&send);
}

static void on_modify_qp(struct fake *f, const void *req, int fd)
{
	(void)fd;
	memcpy(&f->modify, req, sizeof(f->modify));
	fake_reply_ok(f, PROTO_MODIFY_QP);
}

static void on_query_qp(struct fake *f, const void *req, int fd)
{
	struct proto_query_qp_reply r = { .r.hdr.op = PROTO_QUERY_QP, .attr = f->modify.attr };

	(void)req;
	(void)fd;
	fake_send(f, &r, sizeof(r), NULL, 0);
}

static void on_batch(struct fake *f, const void *req, int fd)
{
	struct proto_batch_reply r = { .r.hdr = { .op = PROTO_BATCH, .status = f->batch_status } };

	(void)fd;
	memcpy(&f->batch, req, sizeof(f->batch));
	r.done = f->batch_status ? f->batch_done : f->batch.count;
	if (f->batch_status)
		snprintf(r.r.errmsg, sizeof(r.r.errmsg), "%s", "INIT to RTS is not a transition");
	fake_send(f, &r, sizeof(r), NULL, 0);
}

typedef void fake_handler(struct fake *f, const void *req, int fd);

static fake_handler *const handlers[PROTO_OP_COUNT] = {
	[PROTO_HELLO] = on_hello,
	[PROTO_QUERY_PORT] = on_query_port,
	[PROTO_ALLOC_PD] = on_alloc_pd,
	[PROTO_REG_MR] = on_reg_mr,
	[PROTO_CREATE_CQ] = on_create_cq,
	[PROTO_CREATE_QP] = on_create_qp,
	[PROTO_CREATE_QP_CQS] = on_create_qp_cqs,
	[PROTO_MODIFY_QP] = on_modify_qp,
	[PROTO_QUERY_QP] = on_query_qp,
	[PROTO_BATCH] = on_batch,
};

/* One request; false when the connection is over. */
static bool fake_serve_one(struct fake *f)
{
	union fake_buf buf;
	int fd;
	ssize_t n = fake_recv(f, buf.bytes, &fd);
	uint32_t op;

	if (n <= 0)
		return false;
	op = buf.hdr.op & ~PROTO_NO_REPLY;
	ck_assert_uint_gt(op, 0);
	ck_assert_uint_lt(op, PROTO_OP_COUNT);
	ck_assert_uint_eq((size_t)n, req_size[op]);
	ck_assert_int_eq(buf.hdr.status, 0);
	f->count[op]++;
	if (buf.hdr.op & PROTO_NO_REPLY) {
		/* as the daemon: no reply, whatever becomes of it */
		ck_assert(op == PROTO_BATCH || reply_size[op] == sizeof(struct proto_reply));
		f->unanswered[op]++;
		if (op == PROTO_BATCH)
			memcpy(&f->batch, buf.bytes, sizeof(f->batch));
		if (fd >= 0)
			close(fd);
		return true;
	}
	if (op == f->hangup_op) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	if (op == f->fail_op)
		fake_refuse(f, op);
	else if (op == f->mis_op)
		fake_misreply(f, op);
	else if (handlers[op])
		handlers[op](f, buf.bytes, fd);
	else
		fake_reply_ok(f, op);
	if (fd >= 0)
		close(fd);
	return true;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int conn = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (conn < 0)
		return NULL;
	__atomic_store_n(&f->conn, conn, __ATOMIC_RELEASE);
	while (fake_serve_one(f))
		;
	conn = __atomic_exchange_n(&f->conn, -1, __ATOMIC_ACQ_REL);
	if (conn >= 0)
		close(conn);
	return NULL;
}

static int bind_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void fake_start(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	f->conn = -1;
	f->cq.efd = f->qp.efd = f->cq_memfd = f->events = f->memfd = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/rocemu-lib-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/rocemud.sock", f->dir);
	f->listen_fd = bind_socket(f->path);
	ck_assert_int_eq(listen(f->listen_fd, 4), 0);
	ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
	f->running = true;
}

/* Waits for the fake to see its client close the connection. */
static void fake_wait_end(struct fake *f)
{
	if (f->running)
		pthread_join(f->thread, NULL);
	f->running = false;
}

/* The daemon goes away: the connection closes as if rocemud had exited. */
static void fake_hangup(struct fake *f)
{
	int conn = __atomic_exchange_n(&f->conn, -1, __ATOMIC_ACQ_REL);

	if (conn >= 0)
		shutdown(conn, SHUT_RDWR);
	shutdown(f->listen_fd, SHUT_RDWR);
	fake_wait_end(f);
	if (conn >= 0)
		close(conn);
}

static void fake_stop(struct fake *f)
{
	fake_hangup(f);
	close(f->listen_fd);
	unlink(f->path);
	rmdir(f->dir);
	for (unsigned i = 0; i < f->nmrs; i++)
		munmap(f->mrs[i].map, f->mrs[i].map_len);
	fake_unmap(&f->cq);
	fake_unmap(&f->qp);
	if (f->cq_memfd >= 0)
		close(f->cq_memfd);
	if (f->memfd >= 0)
		close(f->memfd);
	if (f->events >= 0)
		close(f->events);
}

/* The daemon's side of the rings. */
static void fake_push_cqe(struct fake *f, const struct proto_cqe *e)
{
	struct proto_ring_ctl *ctl = f->cq.map;
	struct proto_cqe *slots = (struct proto_cqe *)(ctl + 1);
	uint32_t prod = ctl->prod;

	slots[prod & (f->cq_entries - 1)] = *e;
	__atomic_store_n(&ctl->prod, prod + 1, __ATOMIC_RELEASE);
}

static void fake_notify_cq(struct fake *f)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(f->cq.efd, &one, sizeof(one)), sizeof(one));
}

static struct proto_ring_ctl *fake_sq(struct fake *f)
{
	return f->qp.map;
}

static struct proto_ring_ctl *fake_rq(struct fake *f)
{
	return (struct proto_ring_ctl *)((char *)f->qp.map + f->rq_offset);
}

/* The doorbell's counter, reset by the read as the daemon's would be; 0 if never rung. */
static uint64_t fake_doorbell(struct fake *f)
{
	uint64_t v = 0;

	if (read(f->qp.efd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

/* ------------------------------------------------------------------ fixture, helpers */

static struct fake fk;
static struct rocemu_context *ctx;
static struct rocemu_pd *pd;

static void setup(void)
{
	page = sysconf(_SC_PAGESIZE);
	fake_start(&fk);
	ctx = rocemu_open(fk.path);
	ck_assert_ptr_nonnull(ctx);
	pd = rocemu_alloc_pd(ctx);
	ck_assert_ptr_nonnull(pd);
}

static void teardown(void)
{
	rocemu_close(ctx);
	ctx = NULL;
	fake_stop(&fk);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CPU time of the calling thread: a waiter that sleeps barely uses any. */
static int64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void *map_anon(size_t pages)
{
	void *p = mmap(NULL, pages * (size_t)page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	return p;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 31 + 7);
}

static void fill(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(i);
}

static void check_pattern(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		ck_assert_uint_eq(buf[i], pattern(i));
}

/* The daemon's writes land in the application's buffer and the application's in the
 * daemon's view, at the first, a middle and the last byte. */
static void check_shared(const struct fake_mr *m, uint8_t *buf, size_t len)
{
	const size_t at[] = { 0, len / 2, len - 1 };

	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		size_t i = at[k];

		m->view[i] = (uint8_t)(0xa0 + k);
		ck_assert_uint_eq(buf[i], 0xa0 + k);
		buf[i] = (uint8_t)(0x50 + k);
		ck_assert_uint_eq(m->view[i], 0x50 + k);
		buf[i] = pattern(i);
	}
}

static struct rocemu_mr *reg(void *addr, size_t len)
{
	struct rocemu_mr *mr = rocemu_reg_mr(pd, addr, len, LW | RW);

	ck_assert_msg(mr != NULL, "reg_mr: %s (%s)", strerror(errno), rocemu_last_error(ctx));
	return mr;
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* ------------------------------------------------------------------ gid */

START_TEST(test_gid_round_trip)
{
	static const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
					  192, 168, 1, 2 };
	union ibv_gid gid;

	memset(&gid, 0x77, sizeof(gid));
	rocemu_gid_from_ipv4(&gid, htonl(0xc0a80102));
	ck_assert_mem_eq(gid.raw, want, sizeof(want));
	ck_assert_uint_eq(rocemu_gid_to_ipv4(&gid), htonl(0xc0a80102));
}
END_TEST

START_TEST(test_gid_not_ipv4)
{
	union ibv_gid gid = { .raw = { 0xfe, 0x80, [15] = 1 } };

	ck_assert_uint_eq(rocemu_gid_to_ipv4(&gid), 0);
	rocemu_gid_from_ipv4(&gid, htonl(0x0a000002));
	gid.raw[9] = 1; /* ::1:ffff:a.b.c.d is not IPv4-mapped */
	ck_assert_uint_eq(rocemu_gid_to_ipv4(&gid), 0);
}
END_TEST

/* ------------------------------------------------------------------ open */

START_TEST(test_open_missing_socket)
{
	errno = 0;
	ck_assert_ptr_null(rocemu_open("/nonexistent-rocemu-dir/rocemud.sock"));
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_open_nobody_listening)
{
	char dir[] = "/tmp/rocemu-lib-test-XXXXXX", path[64];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dead.sock", dir);
	close(bind_socket(path));
	errno = 0;
	ck_assert_ptr_null(rocemu_open(path));
	ck_assert_int_eq(errno, ECONNREFUSED);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_open_path_too_long)
{
	char path[200];

	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	errno = 0;
	ck_assert_ptr_null(rocemu_open(path));
	ck_assert_int_eq(errno, ENAMETOOLONG);
}
END_TEST

START_TEST(test_open_env)
{
	struct rocemu_context *c;

	fake_start(&fk);
	setenv("ROCEMU_SOCKET", fk.path, 1);
	c = rocemu_open(NULL);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(rocemu_socket_path(c), fk.path);
	ck_assert_str_eq(rocemu_last_error(c), "");
	rocemu_close(c);
	fake_stop(&fk);
	unsetenv("ROCEMU_SOCKET");
}
END_TEST

START_TEST(test_open_path_beats_env)
{
	struct rocemu_context *c;

	fake_start(&fk);
	setenv("ROCEMU_SOCKET", "/nonexistent-rocemu-dir/x.sock", 1);
	c = rocemu_open(fk.path);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(rocemu_socket_path(c), fk.path);
	rocemu_close(c);
	fake_stop(&fk);
	unsetenv("ROCEMU_SOCKET");
}
END_TEST

START_TEST(test_open_version_mismatch)
{
	fake_start(&fk);
	fk.hello_version = PROTO_VERSION + 1;
	errno = 0;
	ck_assert_ptr_null(rocemu_open(fk.path));
	ck_assert_int_eq(errno, EPROTO);
	fake_stop(&fk);
}
END_TEST

START_TEST(test_open_refused_by_daemon)
{
	fake_start(&fk);
	fk.fail_op = PROTO_HELLO;
	fk.fail_status = -EUSERS;
	fk.fail_msg = "too many clients";
	errno = 0;
	ck_assert_ptr_null(rocemu_open(fk.path));
	ck_assert_int_eq(errno, EUSERS);
	fake_stop(&fk);
}
END_TEST

START_TEST(test_find_socket)
{
	char dir[] = "/tmp/rocemu-lib-test-XXXXXX", path[128], found[108];
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(ctx_find_socket(dir, found, sizeof(found)), ENOENT);
	snprintf(path, sizeof(path), "%s/file.sock", dir); /* not a socket */
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/other", dir); /* a socket, not named *.sock */
	close(bind_socket(path));
	ck_assert_int_eq(ctx_find_socket(dir, found, sizeof(found)), ENOENT);
	snprintf(path, sizeof(path), "%s/a.sock", dir);
	close(bind_socket(path));
	ck_assert_int_eq(ctx_find_socket(dir, found, sizeof(found)), 0);
	ck_assert_str_eq(found, path);
	snprintf(path, sizeof(path), "%s/b.sock", dir);
	close(bind_socket(path));
	ck_assert_int_eq(ctx_find_socket(dir, found, sizeof(found)), ENOTUNIQ);
	ck_assert_int_eq(ctx_find_socket("/nonexistent-rocemu-dir", found, sizeof(found)),
			 ENOENT);
	for (const char *n = "file.sock\0other\0a.sock\0b.sock\0"; *n; n += strlen(n) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, n);
		unlink(path);
	}
	rmdir(dir);
}
END_TEST

START_TEST(test_query_device)
{
	struct rocemu_device_attr a;

	ck_assert_int_eq(rocemu_query_device(ctx, &a), 0);
	ck_assert_uint_eq(a.max_qp, 64);
	ck_assert_uint_eq(a.max_qp_wr, 1024);
	ck_assert_uint_eq(a.max_cqe, 4096);
	ck_assert_uint_eq(a.max_mr, 128);
	ck_assert_uint_eq(a.max_sge, 4);
	ck_assert_uint_eq(a.max_mr_size, UINT64_C(1) << 30);
	ck_assert_uint_eq(a.pin_limit, UINT64_C(1) << 26);
	ck_assert_uint_eq(a.max_qp_rd_atom, 16);
	ck_assert_int_eq(a.atomic_cap, IBV_ATOMIC_GLOB);
	ck_assert_uint_eq(a.max_srq, 32);
	ck_assert_uint_eq(a.max_srq_wr, 512);
	ck_assert_uint_eq(a.max_inline_data, 128);
}
END_TEST

START_TEST(test_query_port)
{
	struct rocemu_port_attr a;

	memset(&a, 0x55, sizeof(a));
	ck_assert_int_eq(rocemu_query_port(ctx, &a), 0);
	ck_assert_int_eq(a.state, IBV_PORT_ACTIVE);
	ck_assert_int_eq(a.max_mtu, IBV_MTU_4096);
	ck_assert_int_eq(a.active_mtu, IBV_MTU_1024);
	ck_assert_uint_eq(a.ipv4, htonl(0x0a000001));
	ck_assert_uint_eq(rocemu_gid_to_ipv4(&a.gid), htonl(0x0a000001));
	ck_assert_uint_eq(a.gid_count, 2);
	ck_assert_uint_eq(rocemu_gid_to_ipv4(&a.gids[0]), htonl(0x0a000001));
	ck_assert_uint_eq(a.gids[1].raw[0], 0xfd);
	ck_assert_uint_eq(a.gids[1].raw[15], 1);
	ck_assert_str_eq(a.ifname, "abcdefghijklmno");
}
END_TEST

/* ------------------------------------------------------------------ rpc */

START_TEST(test_error_reply)
{
	fk.fail_op = PROTO_ALLOC_PD;
	fk.fail_status = -EINVAL;
	fk.fail_msg = "no more PDs for you";
	errno = 0;
	ck_assert_ptr_null(rocemu_alloc_pd(ctx));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_str_eq(rocemu_last_error(ctx), "no more PDs for you");
	fk.fail_op = 0;
	ck_assert_ptr_nonnull(rocemu_alloc_pd(ctx));
}
END_TEST

START_TEST(test_error_reply_full_size)
{
	struct rocemu_port_attr a;

	fk.fail_op = PROTO_DEALLOC_PD;
	fk.fail_status = -EBUSY;
	fk.fail_msg = "PD still has MRs";
	fk.fail_full = true;
	ck_assert_int_eq(rocemu_dealloc_pd(pd), EBUSY);
	ck_assert_str_eq(rocemu_last_error(ctx), "PD still has MRs");
	fk.fail_op = PROTO_QUERY_PORT;
	fk.fail_status = -ENOENT;
	fk.fail_msg = NULL; /* no words: the library falls back on strerror */
	ck_assert_int_eq(rocemu_query_port(ctx, &a), ENOENT);
	ck_assert_str_eq(rocemu_last_error(ctx), strerror(ENOENT));
}
END_TEST

START_TEST(test_daemon_gone_during_call)
{
	struct rocemu_port_attr a;

	fk.hangup_op = PROTO_ALLOC_PD;
	errno = 0;
	ck_assert_ptr_null(rocemu_alloc_pd(ctx));
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), fk.path));
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "went away"));
	ck_assert_int_eq(rocemu_query_port(ctx, &a), EPIPE);
	ck_assert_int_eq(rocemu_dealloc_pd(pd), EPIPE);
	errno = 0;
	ck_assert_ptr_null(rocemu_create_cq(ctx, 4));
	ck_assert_int_eq(errno, EPIPE);
}
END_TEST

START_TEST(test_daemon_gone_between_calls)
{
	fake_hangup(&fk);
	ck_assert_int_eq(rocemu_dealloc_pd(pd), EPIPE);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "went away"));
}
END_TEST

START_TEST(test_reply_wrong_op)
{
	fk.mis_op = PROTO_ALLOC_PD;
	fk.mis = MIS_OP;
	errno = 0;
	ck_assert_ptr_null(rocemu_alloc_pd(ctx));
	ck_assert_int_eq(errno, EPROTO);
	fk.mis_op = 0;
	ck_assert_ptr_nonnull(rocemu_alloc_pd(ctx));
}
END_TEST

START_TEST(test_reply_wrong_size)
{
	fk.mis_op = PROTO_ALLOC_PD;
	fk.mis = MIS_SIZE;
	errno = 0;
	ck_assert_ptr_null(rocemu_alloc_pd(ctx));
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "bytes"));
}
END_TEST

/* The fake closes its copies of the fds it sent after replying: a query in between makes
 * sure it is done before the fds are counted. */
static unsigned count_fds_settled(void)
{
	struct rocemu_port_attr a;

	ck_assert_int_eq(rocemu_query_port(ctx, &a), 0);
	return count_fds();
}

START_TEST(test_reply_unexpected_fd)
{
	struct rocemu_cq *cq1 = rocemu_create_cq(ctx, 4);
	unsigned before;

	ck_assert_ptr_nonnull(cq1);
	fk.mis_op = PROTO_DESTROY_CQ;
	fk.mis = MIS_EXTRA_FD;
	before = count_fds_settled();
	ck_assert_int_eq(rocemu_destroy_cq(cq1), EPROTO);
	ck_assert_uint_eq(count_fds_settled(), before); /* the stray fd was closed */
}
END_TEST

/* ------------------------------------------------------------------ arena */

START_TEST(test_reg_malloc_shared)
{
	size_t len = 2 * (size_t)page + 50;
	uint8_t *buf = malloc(len + 20), *addr = buf + 10;
	struct rocemu_mr *mr;
	struct fake_mr *m = &fk.mrs[0];

	fill(addr, len);
	mr = reg(addr, len);
	ck_assert_ptr_eq(mr->addr, addr);
	ck_assert_uint_eq(mr->length, len);
	ck_assert_uint_eq(mr->lkey, 0x1000);
	ck_assert_uint_eq(mr->rkey, 0x2000);
	ck_assert_ptr_eq(mr->pd, pd);
	check_pattern(addr, len);
	ck_assert_uint_eq(m->req.pd, pd->handle);
	ck_assert_uint_eq(m->req.access, LW | RW);
	ck_assert_uint_eq(m->req.iova, (uintptr_t)addr);
	ck_assert_uint_eq(m->req.fd_offset, (uintptr_t)addr);
	ck_assert_uint_eq(m->req.length, len);
	check_pattern(m->view, len);
	check_shared(m, addr, len);
	ck_assert_int_eq(rocemu_dereg_mr(mr), 0);
	ck_assert_uint_eq(fk.count[PROTO_DEREG_MR], 1);
	check_shared(m, addr, len); /* still the application's memory, still memfd-backed */
	free(buf);
}
END_TEST

START_TEST(test_reg_seals)
{
	uint8_t *buf = map_anon(1);

	reg(buf, 64);
	ck_assert_int_ne(fk.mrs[0].seals & F_SEAL_SHRINK, 0);
	ck_assert_int_ne(fk.mrs[0].seals & F_SEAL_GROW, 0);
}
END_TEST

/* The second registration of a page must not move it again, or the first MR's pages would
 * no longer be the application's. */
START_TEST(test_reg_same_page_twice)
{
	uint8_t *buf = map_anon(2), *a = buf + 100, *b = buf + 1000;

	fill(buf, 2 * (size_t)page);
	reg(a, 200);
	reg(b, (size_t)page); /* the same first page, and one more */
	reg(a, 200);          /* the very same buffer again */
	check_pattern(buf, 2 * (size_t)page);
	check_shared(&fk.mrs[0], a, 200);
	check_shared(&fk.mrs[1], b, (size_t)page);
	check_shared(&fk.mrs[2], a, 200);
	fk.mrs[0].view[0] = 0xee;
	ck_assert_uint_eq(fk.mrs[2].view[0], 0xee);
	ck_assert_uint_eq(a[0], 0xee);
}
END_TEST

START_TEST(test_reg_neighbouring_malloc_buffers)
{
	uint8_t *x = malloc(64), *y = malloc(64);

	fill(x, 64);
	fill(y, 64);
	reg(x, 64);
	reg(y, 64);
	check_shared(&fk.mrs[0], x, 64);
	check_shared(&fk.mrs[1], y, 64);
	check_pattern(x, 64);
	free(x);
	free(y);
}
END_TEST

/* A buffer just below malloc's top chunk shares its last page with the top's header: the
 * registration must not allocate or free between copying that page and mapping it (the
 * header would go back to what it was), or the next malloc that grows the heap aborts in
 * sysmalloc. perftest's UD buffers (memalign'd, 2 x (4096 + 64) bytes) met this. */
START_TEST(test_reg_buffer_below_top_chunk)
{
	size_t len = 2 * ((size_t)page + 64);
	uint8_t *buf = memalign((size_t)page, len);
	void *grown[8];

	fill(buf, len);
	reg(buf, len);
	check_pattern(buf, len);
	for (int i = 0; i < 8; i++) {
		grown[i] = malloc(100 * 1024);   /* below the mmap threshold: the heap grows */
		ck_assert_ptr_nonnull(grown[i]);
		memset(grown[i], i, 100 * 1024);
	}
	for (int i = 0; i < 8; i++)
		free(grown[i]);
	check_pattern(buf, len);
	free(buf);
}
END_TEST

enum { STACK_MR_LEN = 256, STACK_DEPTHS = 32, STACK_STEP_EXTRA = 128 };

/* A buffer at the low end of this frame: the frames of the registration itself lie just
 * below it, in the same page whenever the buffer is far enough into its page. skip moves
 * it deeper, onto stack pages no earlier call registered. */
static void __attribute__((noinline)) reg_low_on_stack(size_t skip)
{
	uint8_t *buf = alloca(skip + STACK_MR_LEN);

	fill(buf, STACK_MR_LEN);
	reg(buf, STACK_MR_LEN);
	check_pattern(buf, STACK_MR_LEN);
	check_shared(&fk.mrs[fk.nmrs - 1], buf, STACK_MR_LEN);
}

/* The main thread's stack grows only below a mapping the kernel made for it: once its
 * lowest page is the arena's, it cannot grow further. So reach the depth first. */
static void __attribute__((noinline)) grow_stack(size_t bytes)
{
	volatile uint8_t *deep = alloca(bytes);

	deep[0] = 1;
}

/* At every offset within a page, in steps of STACK_STEP_EXTRA: the moved page holds the
 * live frames of the call that moves it, which must come back intact. */
START_TEST(test_reg_stack_frames_in_moved_page)
{
	grow_stack((STACK_DEPTHS + 4) * (3 * (size_t)page + STACK_STEP_EXTRA));
	for (size_t i = 0; i < STACK_DEPTHS; i++)
		reg_low_on_stack(i * (3 * (size_t)page + STACK_STEP_EXTRA));
	ck_assert_uint_eq(fk.nmrs, STACK_DEPTHS);
}
END_TEST

enum { FREE_STACK_BELOW = 100 * 1024, FREE_STACK_LEN = 90 * 1024 };

/* A range reaching far into the free stack below the registering call, the stack the
 * registration itself runs on, is refused rather than moved under its own feet. */
START_TEST(test_reg_free_stack_refused)
{
	uint8_t *frame = __builtin_frame_address(0);

	grow_stack(2 * FREE_STACK_BELOW);
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, frame - FREE_STACK_BELOW, FREE_STACK_LEN, LW));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(fk.count[PROTO_REG_MR], 0);
}
END_TEST

static void *reg_low_on_thread_stack(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < STACK_DEPTHS; i++)
		reg_low_on_stack(i * (3 * (size_t)page + STACK_STEP_EXTRA));
	return NULL;
}

/* The same on another thread's stack, a mapping of its own. */
START_TEST(test_reg_thread_stack_frames_in_moved_page)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, reg_low_on_thread_stack, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(fk.nmrs, STACK_DEPTHS);
}
END_TEST

static void __attribute__((noinline)) reg_on_stack(void)
{
	uint8_t stack_buf[3000];

	fill(stack_buf, sizeof(stack_buf));
	reg(stack_buf, sizeof(stack_buf));
	check_pattern(stack_buf, sizeof(stack_buf));
	check_shared(&fk.mrs[0], stack_buf, sizeof(stack_buf));
}

START_TEST(test_reg_stack_buffer)
{
	reg_on_stack();
	reg_on_stack(); /* the stack, now memfd-backed, still works and registers again */
	ck_assert_uint_eq(fk.nmrs, 2);
}
END_TEST

/* The arena's fd goes with the connection's first registration only; later ones name it
 * by its inode. */
START_TEST(test_reg_hands_the_arena_over_once)
{
	uint8_t *buf = map_anon(3);

	fill(buf, 3 * (size_t)page);
	reg(buf, 10);
	reg(buf + page, 10);
	reg(buf + 2 * page, 10);
	ck_assert_uint_eq(fk.nmrs, 3);
	ck_assert_uint_eq(fk.reg_fds, 1);
	ck_assert_uint_eq(fk.mrs[1].req.memfd_ino, fk.memfd_ino);
	check_shared(&fk.mrs[2], buf + 2 * page, 10);
}
END_TEST

/* A daemon that no longer holds the arena (another process on the connection handed over
 * its own) refuses with ESTALE, and the registration goes again with the fd. */
START_TEST(test_reg_hands_the_arena_over_again_on_estale)
{
	uint8_t *buf = map_anon(2);

	fill(buf, 2 * (size_t)page);
	reg(buf, 10);
	fk.drop_memfd = true;
	reg(buf + page, 10);
	ck_assert_uint_eq(fk.nmrs, 2);
	ck_assert_uint_eq(fk.reg_fds, 2);
	ck_assert_uint_eq(fk.count[PROTO_REG_MR], 3);
	check_shared(&fk.mrs[1], buf + page, 10);
}
END_TEST

START_TEST(test_reg_mmap_buffer)
{
	uint8_t *buf = map_anon(4), *addr = buf + page / 2;
	size_t len = 2 * (size_t)page;

	fill(buf, 4 * (size_t)page);
	reg(addr, len);
	check_pattern(buf, 4 * (size_t)page); /* the pages' bytes outside the MR too */
	check_shared(&fk.mrs[0], addr, len);
	munmap(buf, 4 * (size_t)page);
}
END_TEST

/* Memory unmapped and mapped again at the same address is new anonymous memory: it must
 * be moved again, whatever was registered there before. */
START_TEST(test_reg_reused_address)
{
	size_t len = 2 * (size_t)page;
	uint8_t *buf = map_anon(2), *again;

	reg(buf, len);
	munmap(buf, len);
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ck_assert_ptr_eq(again, buf);
	fill(again, len);
	reg(again, len);
	check_pattern(fk.mrs[1].view, len);
	check_shared(&fk.mrs[1], again, len);
}
END_TEST

/* ---- contents: registration copies only pages with contents, and loses none ---- */

/* expect(i) is the byte at offset i of both the application's buffer and the daemon's
 * view of it; view_at is the offset in the buffer of view[0]. */
static void check_contents(const uint8_t *buf, size_t len, const uint8_t *view, size_t view_at,
			   size_t view_len, uint8_t (*expect)(size_t))
{
	for (size_t i = 0; i < len; i++)
		ck_assert_msg(buf[i] == expect(i), "buffer byte %zu is 0x%02x, not 0x%02x", i,
			      buf[i], expect(i));
	for (size_t i = 0; i < view_len; i++)
		ck_assert_msg(view[i] == expect(view_at + i), "daemon's byte %zu is 0x%02x, not 0x%02x",
			      view_at + i, view[i], expect(view_at + i));
}

static uint8_t zero(size_t i)
{
	(void)i;
	return 0;
}

/* Bytes of memory the arena holds, through an fd arena_adopt hands out. */
static long long arena_bytes(const void *adopted)
{
	struct stat st;
	int fd;

	ck_assert_int_eq(arena_adopt((void *)adopted, 1, &fd, NULL), 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	return (long long)st.st_blocks * 512;
}

/* A buffer never written: nothing to copy, so the arena stays empty (each test is a
 * process of its own, with an arena of its own), yet every byte reads as zero. */
START_TEST(test_reg_untouched_buffer)
{
	const size_t pages = 64, len = pages * (size_t)page - 200;
	uint8_t *buf = map_anon(pages), *addr = buf + 100;

	reg(addr, len);
	ck_assert_int_eq(arena_bytes(addr), 0);
	check_contents(buf, pages * (size_t)page, fk.mrs[0].view, 100, len, zero);
	check_shared(&fk.mrs[0], addr, len);
}
END_TEST

/* A file whose path is close to PATH_MAX, mapped private and writable: its line in
 * /proc/self/maps is longer than the pieces the arena reads the maps in. */
static void *map_long_named_file(char *dir, size_t dir_cap)
{
	char name[256];
	size_t depth = 0;
	void *map;
	int fd;

	snprintf(dir, dir_cap, "/tmp/rocemu-maps.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(name, 'n', 200);
	name[200] = '\0';
	/* directories one under another, then a file name, to a path of 4,080 bytes: its
	 * line is longer than the kernel's reads of 4 KiB, which then cut it */
	for (size_t len = strlen(dir); len + 201 + 100 < 4080; len += 201, depth++) {
		strcat(dir, "/");
		strcat(dir, name);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
	}
	ck_assert_uint_gt(depth, 0);
	strcat(dir, "/");
	memset(dir + strlen(dir), 'f', 4080 - strlen(dir));
	dir[4080] = '\0';
	fd = open(dir, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, page), 0);
	map = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	close(fd);
	return map;
}

static void remove_long_named_file(char *path)
{
	char *slash;

	unlink(path);
	while ((slash = strrchr(path, '/')) != NULL && strncmp(path, "/tmp/", 5) == 0 &&
	       slash > path + 4) {
		*slash = '\0';
		if (rmdir(path) != 0)
			break;
	}
}

/* Registration reads the maps line of the buffer's own mapping, here longer than a piece
 * of the maps the arena reads at once. */
START_TEST(test_reg_buffer_in_a_long_named_file)
{
	char path[4096];
	uint8_t *buf = map_long_named_file(path, sizeof(path));

	fill(buf, (size_t)page);
	reg(buf, (size_t)page);
	check_contents(buf, (size_t)page, fk.mrs[0].view, 0, (size_t)page, pattern);
	check_shared(&fk.mrs[0], buf, (size_t)page);
	munmap(buf, (size_t)page);
	remove_long_named_file(path);
}
END_TEST

START_TEST(test_reg_touched_buffer)
{
	const size_t pages = 16, len = pages * (size_t)page;
	uint8_t *buf = map_anon(pages);

	fill(buf, len);
	reg(buf, len);
	ck_assert_int_ge(arena_bytes(buf), (long long)len);
	check_contents(buf, len, fk.mrs[0].view, 0, len, pattern);
	check_shared(&fk.mrs[0], buf, len);
}
END_TEST

enum { SPARSE_PAGES = 32, SPARSE_READ_PAGE = 4, SPARSE_BYTE_PAGE = 7, SPARSE_BYTE = 0x77 };

/* Every third page written whole, one byte at the end of another, one only read (it maps
 * the zero page), the rest never touched. */
static uint8_t sparse(size_t i)
{
	size_t p = i / (size_t)page;

	if (p % 3 == 0)
		return pattern(i);
	return i == (SPARSE_BYTE_PAGE + 1) * (size_t)page - 1 ? SPARSE_BYTE : 0;
}

START_TEST(test_reg_sparse_pages)
{
	const size_t len = SPARSE_PAGES * (size_t)page;
	uint8_t *buf = map_anon(SPARSE_PAGES);
	volatile uint8_t *read_only = buf + SPARSE_READ_PAGE * (size_t)page;

	for (size_t i = 0; i < len; i++)
		if (i / (size_t)page % 3 == 0)
			buf[i] = pattern(i);
	buf[(SPARSE_BYTE_PAGE + 1) * (size_t)page - 1] = SPARSE_BYTE;
	ck_assert_uint_eq(*read_only, 0);
	reg(buf + 10, len - 20);
	check_contents(buf, len, fk.mrs[0].view, 10, len - 20, sparse);
	check_shared(&fk.mrs[0], buf + 10, len - 20);
}
END_TEST

enum { EDGE_PAGES = 6, EDGE_DATA = 100, EDGE_GAP = 200 };

/* Data of the application's own before and after the MR, in the MR's first and last
 * pages; the pages between never touched. */
static uint8_t edges(size_t i)
{
	size_t len = EDGE_PAGES * (size_t)page;

	if (i < EDGE_DATA)
		return pattern(i);
	return i >= len - EDGE_DATA ? pattern(i - (len - EDGE_DATA)) : 0;
}

START_TEST(test_reg_edge_pages_shared)
{
	const size_t len = EDGE_PAGES * (size_t)page, mr_len = len - 2 * EDGE_GAP;
	uint8_t *buf = map_anon(EDGE_PAGES);

	fill(buf, EDGE_DATA);
	fill(buf + len - EDGE_DATA, EDGE_DATA);
	reg(buf + EDGE_GAP, mr_len);
	check_contents(buf, len, fk.mrs[0].view, EDGE_GAP, mr_len, edges);
	check_shared(&fk.mrs[0], buf + EDGE_GAP, mr_len);
}
END_TEST

enum { PARTLY_PAGES = 8, PARTLY_FIRST = 2, PARTLY_ALSO_WRITTEN = 5, DAEMON_BYTE = 0xd1 };

/* Pages PARTLY_FIRST and the next written, the first of them then registered and written
 * by the daemon; one byte of page PARTLY_ALSO_WRITTEN written later; the rest untouched. */
static uint8_t partly(size_t i)
{
	size_t first = PARTLY_FIRST * (size_t)page;

	if (i == first + 5)
		return DAEMON_BYTE;
	if (i >= first && i < first + 2 * (size_t)page)
		return pattern(i - first);
	return i == PARTLY_ALSO_WRITTEN * (size_t)page ? 0xe2 : 0;
}

/* A range already partly in the arena: the moved page keeps what the daemon wrote into it
 * and stays the first MR's, the rest moves around it. */
START_TEST(test_reg_partly_adopted)
{
	const size_t len = PARTLY_PAGES * (size_t)page, first = PARTLY_FIRST * (size_t)page;
	uint8_t *buf = map_anon(PARTLY_PAGES);

	fill(buf + first, 2 * (size_t)page);
	reg(buf + first, (size_t)page);
	fk.mrs[0].view[5] = DAEMON_BYTE;
	buf[PARTLY_ALSO_WRITTEN * (size_t)page] = 0xe2;
	reg(buf, len);
	check_contents(buf, len, fk.mrs[1].view, 0, len, partly);
	fk.mrs[0].view[6] = 0x66;
	ck_assert_uint_eq(fk.mrs[1].view[first + 6], 0x66);
	ck_assert_uint_eq(buf[first + 6], 0x66);
	check_shared(&fk.mrs[1], buf, len);
}
END_TEST

static uint8_t only_second_page(size_t i)
{
	return i == (size_t)page ? 0x42 : 0;
}

/* The arena still holds the first buffer's bytes at the address; new memory there that
 * was never touched must not show them. */
START_TEST(test_reg_reused_address_untouched)
{
	const size_t len = 4 * (size_t)page;
	uint8_t *buf = map_anon(4), *again;

	fill(buf, len);
	reg(buf, len);
	munmap(buf, len);
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ck_assert_ptr_eq(again, buf);
	again[page] = 0x42;
	reg(again, len);
	check_contents(again, len, fk.mrs[1].view, 0, len, only_second_page);
	check_contents(again, len, fk.mrs[0].view, 0, len, only_second_page);
}
END_TEST

enum { MIXED_PAGES = 3 };

/* The middle page is a file's, the others anonymous and untouched. */
static uint8_t file_in_middle(size_t i)
{
	return i / (size_t)page == 1 ? pattern(i - (size_t)page) : 0;
}

/* A page of a file mapping that this mapping never touched still has the file's bytes
 * (written here through another mapping), shared or private alike. */
START_TEST(test_reg_file_pages_untouched)
{
	static const int kinds[] = { MAP_PRIVATE, MAP_SHARED };
	const size_t len = MIXED_PAGES * (size_t)page;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		int fd = memfd_create("lib_test-file", MFD_CLOEXEC);
		uint8_t *writer, *buf = map_anon(MIXED_PAGES), *middle;

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(ftruncate(fd, page), 0);
		writer = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ck_assert_ptr_ne(writer, MAP_FAILED);
		fill(writer, (size_t)page);
		middle = mmap(buf + page, (size_t)page, PROT_READ | PROT_WRITE,
			      kinds[k] | MAP_FIXED, fd, 0);
		ck_assert_ptr_eq(middle, buf + page);
		reg(buf + 1, len - 2);
		check_contents(buf, len, fk.mrs[k].view, 1, len - 2, file_in_middle);
		check_shared(&fk.mrs[k], buf + 1, len - 2);
		munmap(writer, (size_t)page);
		close(fd);
	}
}
END_TEST

/* Memory the application cannot read is refused, as copying it always was. */
START_TEST(test_reg_unreadable)
{
	uint8_t *buf = map_anon(2);

	ck_assert_int_eq(mprotect(buf, 2 * (size_t)page, PROT_NONE), 0);
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, buf + 10, (size_t)page, LW));
	ck_assert_int_eq(errno, EFAULT);
	ck_assert_uint_eq(fk.count[PROTO_REG_MR], 0);
}
END_TEST

START_TEST(test_reg_invalid)
{
	uint8_t *buf = map_anon(1);

	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, buf, 0, LW));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, (void *)(UINTPTR_MAX - 10), 100, LW));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, (void *)(UINTPTR_MAX - 100), 10, LW));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(NULL, buf, 10, LW));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(fk.count[PROTO_REG_MR], 0);
}
END_TEST

START_TEST(test_reg_unmapped)
{
	uint8_t *buf = map_anon(1);

	munmap(buf, (size_t)page);
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, buf, 10, LW));
	ck_assert_int_eq(errno, EFAULT);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "share"));
	ck_assert_uint_eq(fk.count[PROTO_REG_MR], 0);
}
END_TEST

START_TEST(test_reg_refused)
{
	uint8_t *buf = map_anon(1);

	fill(buf, (size_t)page);
	fk.fail_op = PROTO_REG_MR;
	fk.fail_status = -ENOMEM;
	fk.fail_msg = "pin limit reached";
	errno = 0;
	ck_assert_ptr_null(rocemu_reg_mr(pd, buf, 100, LW));
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_str_eq(rocemu_last_error(ctx), "pin limit reached");
	check_pattern(buf, (size_t)page);
}
END_TEST

START_TEST(test_dereg_refused_keeps_mr)
{
	uint8_t *buf = map_anon(1);
	struct rocemu_mr *mr = reg(buf, 100);

	fk.fail_op = PROTO_DEREG_MR;
	fk.fail_status = -EBUSY;
	ck_assert_int_eq(rocemu_dereg_mr(mr), EBUSY);
	fk.fail_op = 0;
	ck_assert_int_eq(rocemu_dereg_mr(mr), 0);
	ck_assert_uint_eq(fk.count[PROTO_DEREG_MR], 2);
}
END_TEST

static ino_t fd_inode(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* After fork() the child's own registrations must go to an arena of its own, or they
 * would write into the parent's memfd. White-box, with arena_adopt. */
START_TEST(test_fork_child_gets_own_arena)
{
	uint8_t *buf = map_anon(1);
	int parent_fd, status;
	ino_t parent_arena;
	pid_t pid;

	buf[0] = 1;
	ck_assert_int_eq(arena_adopt(buf, 10, &parent_fd, NULL), 0);
	parent_arena = fd_inode(parent_fd);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int child_fd;

		if (arena_adopt(buf, 10, &child_fd, NULL) != 0)
			_exit(2);
		if (fd_inode(child_fd) == parent_arena)
			_exit(3);
		buf[0] = 2;
		_exit(buf[0] == 2 ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_uint_eq(buf[0], 1);
}
END_TEST

/* The descriptor this process holds open on /proc/PID/maps, or -1. */
static int maps_fd_of(pid_t pid)
{
	char want[64], path[300], target[64];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	ck_assert_ptr_nonnull(d);
	snprintf(want, sizeof(want), "/proc/%d/maps", (int)pid);
	while (found < 0 && (e = readdir(d)) != NULL) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n > 0 && (target[n] = '\0', strcmp(target, want) == 0))
			found = atoi(e->d_name);
	}
	closedir(d);
	return found;
}

/* The maps are read through a descriptor kept open, and each look reads them anew: a
 * mapping made after the last look is found, one unmapped since is not. */
START_TEST(test_adopt_reads_the_maps_anew)
{
	uint8_t *a = map_anon(1), *b;
	int fd;

	ck_assert_int_eq(arena_adopt(a, 10, &fd, NULL), 0);
	ck_assert_int_ge(maps_fd_of(getpid()), 0);
	b = map_anon(2);
	ck_assert_int_eq(arena_adopt(b, 2 * (size_t)page, &fd, NULL), 0);
	ck_assert_int_eq(munmap(b + page, (size_t)page), 0);
	ck_assert_int_eq(arena_adopt(b, 2 * (size_t)page, &fd, NULL), EFAULT);
	ck_assert_int_eq(arena_adopt(b, 10, &fd, NULL), 0);
	munmap(b, (size_t)page);
	munmap(a, (size_t)page);
}
END_TEST

/* A program that closes the kept descriptor, whose number then names another file, still
 * registers; that file stays open (it is not ours to close), and the next look keeps a
 * descriptor of its own again. */
START_TEST(test_adopt_survives_its_maps_fd_closed)
{
	uint8_t *a = map_anon(1);
	int fd, kept, other = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	ck_assert_int_eq(arena_adopt(a, 10, &fd, NULL), 0);
	kept = maps_fd_of(getpid());
	ck_assert_int_ge(kept, 0);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(dup3(other, kept, O_CLOEXEC), kept);   /* closes ours */
	ck_assert_int_eq(arena_adopt(a, 10, &fd, NULL), 0);
	ck_assert_int_eq(fcntl(kept, F_GETFD), FD_CLOEXEC);
	ck_assert_int_eq(arena_adopt(a, 10, &fd, NULL), 0);
	ck_assert_int_ge(maps_fd_of(getpid()), 0);
	ck_assert_int_ne(maps_fd_of(getpid()), kept);
	close(kept);
	close(other);
	munmap(a, (size_t)page);
}
END_TEST

/* A child must read its own maps, not the parent's through the inherited descriptor. */
START_TEST(test_fork_child_reads_its_own_maps)
{
	uint8_t *a = map_anon(1);
	pid_t parent = getpid(), pid;
	int fd, status;

	ck_assert_int_eq(arena_adopt(a, 10, &fd, NULL), 0);
	ck_assert_int_ge(maps_fd_of(parent), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint8_t *mine = map_anon(1);

		if (maps_fd_of(parent) >= 0)
			_exit(2);
		if (arena_adopt(mine, 10, &fd, NULL) != 0)
			_exit(3);
		_exit(maps_fd_of(getpid()) >= 0 ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	munmap(a, (size_t)page);
}
END_TEST

/* A child gets copies of the arena's pages, as fork gives of private memory: what it
 * writes, without registering anything, stays out of the parent's buffer; it reads what
 * the parent had, a page never populated as zeros. */
START_TEST(test_fork_child_writes_its_own_copy)
{
	uint8_t *buf = map_anon(3);
	int fd, status;
	pid_t pid;

	memset(buf, 0x5a, 4096);
	buf[2 * 4096] = 0x6b;   /* the middle page is never populated */
	ck_assert_int_eq(arena_adopt(buf, 3 * 4096, &fd, NULL), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		bool read_ok = buf[0] == 0x5a && buf[4095] == 0x5a && buf[4096] == 0 &&
			       buf[8191] == 0 && buf[8192] == 0x6b;

		memset(buf, 0x77, 3 * 4096);
		_exit(read_ok ? 0 : 3);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_uint_eq(buf[0], 0x5a);
	ck_assert_uint_eq(buf[4096], 0);
	ck_assert_uint_eq(buf[8192], 0x6b);
}
END_TEST

/* ------------------------------------------------------------------ cq */

static struct rocemu_cq *cq;

static void cq_setup(void)
{
	setup();
	cq = rocemu_create_cq(ctx, 5);
	ck_assert_ptr_nonnull(cq);
}

static struct proto_cqe cqe_n(uint32_t n)
{
	return (struct proto_cqe){
		.wr_id = 1000 + n,
		.status = n % 2 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV_RDMA_WITH_IMM,
		.byte_len = 100 * n,
		.imm = htonl(0xabc000 + n),
		.qp_num = 0x12,
		.wc_flags = IBV_WC_WITH_IMM,
		.vendor_err = n,
	};
}

static void check_wc(const struct ibv_wc *wc, uint32_t n)
{
	ck_assert_uint_eq(wc->wr_id, 1000 + n);
	ck_assert_int_eq(wc->status, n % 2 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS);
	ck_assert_int_eq(wc->opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert_uint_eq(wc->byte_len, 100 * n);
	ck_assert_uint_eq(wc->imm_data, htonl(0xabc000 + n));
	ck_assert_uint_eq(wc->qp_num, 0x12);
	ck_assert_uint_eq(wc->wc_flags, IBV_WC_WITH_IMM);
	ck_assert_uint_eq(wc->vendor_err, n);
	ck_assert_uint_eq(wc->src_qp, 0);
	ck_assert_uint_eq(wc->pkey_index, 0);
}

START_TEST(test_cq_poll_in_order)
{
	struct ibv_wc wc[8];
	struct proto_ring_ctl *ctl = fk.cq.map;

	ck_assert_uint_eq(fk.cq_entries, 8);
	ck_assert_int_eq(rocemu_poll_cq(cq, 8, wc), 0);
	for (uint32_t n = 0; n < 3; n++) {
		struct proto_cqe e = cqe_n(n);

		fake_push_cqe(&fk, &e);
	}
	memset(wc, 0x5a, sizeof(wc));
	ck_assert_int_eq(rocemu_poll_cq(cq, 2, wc), 2);
	check_wc(&wc[0], 0);
	check_wc(&wc[1], 1);
	ck_assert_uint_eq(__atomic_load_n(&ctl->cons, __ATOMIC_ACQUIRE), 2);
	ck_assert_int_eq(rocemu_poll_cq(cq, 8, wc), 1);
	check_wc(&wc[0], 2);
	ck_assert_int_eq(rocemu_poll_cq(cq, 8, wc), 0);
	ck_assert_uint_eq(ctl->cons, 3);
	ck_assert_int_eq(rocemu_poll_cq(cq, -1, wc), -1);
}
END_TEST

/* Indices are free-running u32: they wrap past zero, slots wrap past the ring's end. */
START_TEST(test_cq_indices_wrap)
{
	struct rocemu_cq *small;
	struct ibv_wc wc[4];
	uint32_t next = 0;

	fk.ring_start = UINT32_MAX - 5;
	small = rocemu_create_cq(ctx, 4);
	ck_assert_ptr_nonnull(small);
	for (int round = 0; round < 5; round++) {
		int got;

		for (uint32_t n = 0; n < 3; n++) {
			struct proto_cqe e = cqe_n(round * 3 + n);

			fake_push_cqe(&fk, &e);
		}
		got = rocemu_poll_cq(small, 4, wc);
		ck_assert_int_eq(got, 3);
		for (int i = 0; i < got; i++)
			check_wc(&wc[i], next++);
	}
	ck_assert_uint_eq(((struct proto_ring_ctl *)fk.cq.map)->cons, UINT32_MAX - 5 + 15);
}
END_TEST

static void *push_later(void *arg)
{
	struct proto_cqe e = cqe_n(7);

	(void)arg;
	sleep_ms(150);
	fake_push_cqe(&fk, &e);
	fake_notify_cq(&fk);
	return NULL;
}

START_TEST(test_cq_wait_wakes)
{
	pthread_t t;
	struct ibv_wc wc;
	int64_t start = now_ms(), cpu = cpu_ms();

	ck_assert_int_eq(pthread_create(&t, NULL, push_later, NULL), 0);
	ck_assert_int_eq(rocemu_wait_cq(cq, 10000), 0);
	ck_assert_int_ge(now_ms() - start, 100);
	ck_assert_int_lt(cpu_ms() - cpu, 50);
	ck_assert_int_lt(now_ms() - start, 5000);
	pthread_join(t, NULL);
	ck_assert_int_eq(rocemu_poll_cq(cq, 1, &wc), 1);
	check_wc(&wc, 7);
}
END_TEST

START_TEST(test_cq_wait_ready)
{
	struct proto_cqe e = cqe_n(1);

	fake_push_cqe(&fk, &e); /* no eventfd signal: the ring is looked at first */
	ck_assert_int_eq(rocemu_wait_cq(cq, 0), 0);
	ck_assert_int_eq(rocemu_wait_cq(cq, -1), 0);
}
END_TEST

START_TEST(test_cq_wait_timeout)
{
	int64_t start = now_ms(), cpu = cpu_ms();

	ck_assert_int_eq(rocemu_wait_cq(cq, 150), ETIMEDOUT);
	ck_assert_int_ge(now_ms() - start, 140);
	ck_assert_int_lt(cpu_ms() - cpu, 50); /* it slept, it did not spin */
	ck_assert_int_eq(rocemu_wait_cq(cq, 0), ETIMEDOUT);
}
END_TEST

/* Hybrid polling's look before a sleep: up at once to twice a wait it missed, down slowly
 * after shorter ones, to the floor after waits no look could have saved, always within
 * its bounds. */
START_TEST(test_wait_spin_follows_waits)
{
	uint64_t spin = WAIT_SPIN_MIN_NS;

	spin = wait_spin_next(spin, 50000);
	ck_assert_uint_eq(spin, 100000);
	spin = wait_spin_next(spin, 10000);
	ck_assert_uint_lt(spin, 100000);
	ck_assert_uint_gt(spin, 80000);
	ck_assert_uint_eq(wait_spin_next(spin, 190000), WAIT_SPIN_MAX_NS);
	ck_assert_uint_eq(wait_spin_next(WAIT_SPIN_MIN_NS, 1000), WAIT_SPIN_MIN_NS);
	spin = WAIT_SPIN_MAX_NS;
	for (int i = 0; i < 200; i++) {
		spin = wait_spin_next(spin, 5000000);
		ck_assert_uint_ge(spin, WAIT_SPIN_MIN_NS);
		ck_assert_uint_le(spin, WAIT_SPIN_MAX_NS);
	}
	ck_assert_uint_le(spin, WAIT_SPIN_MIN_NS + 1000);
}
END_TEST

/* A wait that timed out teaches the CQ nothing; one that slept 100 ms puts its look at the
 * floor again. */
START_TEST(test_cq_wait_learns)
{
	pthread_t t;

	cq->spin_ns = 150000;
	ck_assert_int_eq(rocemu_wait_cq(cq, 50), ETIMEDOUT);
	ck_assert_uint_eq(cq->spin_ns, 150000);
	ck_assert_int_eq(pthread_create(&t, NULL, push_later, NULL), 0);
	ck_assert_int_eq(rocemu_wait_cq(cq, 10000), 0);
	pthread_join(t, NULL);
	ck_assert_uint_lt(cq->spin_ns, 150000);
	ck_assert_uint_ge(cq->spin_ns, WAIT_SPIN_MIN_NS);
}
END_TEST

/* A stale eventfd count (completions already polled) wakes wait_cq, which must then sleep
 * again rather than return with an empty ring. */
START_TEST(test_cq_wait_spurious_wakeup)
{
	struct proto_cqe e = cqe_n(2);
	struct ibv_wc wc;
	int64_t start = now_ms(), cpu = cpu_ms();

	fake_push_cqe(&fk, &e);
	fake_notify_cq(&fk);
	ck_assert_int_eq(rocemu_poll_cq(cq, 1, &wc), 1);
	ck_assert_int_eq(rocemu_wait_cq(cq, 150), ETIMEDOUT);
	ck_assert_int_ge(now_ms() - start, 140);
	ck_assert_int_lt(cpu_ms() - cpu, 50);
}
END_TEST

static void *hangup_later(void *arg)
{
	(void)arg;
	sleep_ms(150);
	fake_hangup(&fk);
	return NULL;
}

START_TEST(test_cq_wait_daemon_gone)
{
	pthread_t t;
	int64_t start = now_ms(), cpu = cpu_ms();

	ck_assert_int_eq(pthread_create(&t, NULL, hangup_later, NULL), 0);
	ck_assert_int_eq(rocemu_wait_cq(cq, 10000), EPIPE);
	ck_assert_int_lt(now_ms() - start, 5000);
	ck_assert_int_lt(cpu_ms() - cpu, 50);
	pthread_join(t, NULL);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "went away"));
	ck_assert_int_eq(rocemu_wait_cq(cq, -1), EPIPE);
}
END_TEST

START_TEST(test_cq_poll_daemon_gone)
{
	struct proto_cqe e = cqe_n(4);
	struct ibv_wc wc;
	int n = 0;

	fake_push_cqe(&fk, &e);
	fake_hangup(&fk);
	ck_assert_int_eq(rocemu_poll_cq(cq, 1, &wc), 1); /* what was there still comes out */
	check_wc(&wc, 4);
	for (int i = 0; i < 100000 && n == 0; i++)
		n = rocemu_poll_cq(cq, 1, &wc);
	ck_assert_int_eq(n, -1);
	ck_assert_int_eq(errno, EPIPE);
}
END_TEST

/* The daemon queues an asynchronous event in the context's pipe: taken with the CQ it is
 * about, NULL once that CQ is destroyed; none left is EAGAIN, and the pipe is quiet. */
START_TEST(test_cq_async_event)
{
	struct proto_async_event ev = { .type = IBV_EVENT_CQ_ERR, .handle = cq->handle };
	struct rocemu_async_event got;
	struct pollfd p = { .fd = rocemu_async_event_fd(ctx), .events = POLLIN };

	ck_assert_int_eq(poll(&p, 1, 0), 0);
	ck_assert_int_eq(write(fk.events, &ev, sizeof(ev)), sizeof(ev));
	ck_assert_int_eq(poll(&p, 1, 1000), 1);
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), 0);
	ck_assert_int_eq(got.type, IBV_EVENT_CQ_ERR);
	ck_assert_ptr_eq(got.cq, cq);
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), EAGAIN);
	ck_assert_int_eq(write(fk.events, &ev, sizeof(ev)), sizeof(ev));
	ck_assert_int_eq(rocemu_destroy_cq(cq), 0);
	cq = NULL;
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), 0);
	ck_assert_ptr_null(got.cq);
	ck_assert_int_eq(poll(&p, 1, 0), 0);
}
END_TEST

/* Events about a CQ still unread when it is destroyed and a new CQ takes its handle: they
 * are about the old one, so they come with no CQ, as the kernel drops a destroyed CQ's
 * events; one the daemon raises after, about the new CQ, comes with it. */
START_TEST(test_cq_async_event_of_a_reused_handle)
{
	uint32_t handle = cq->handle;
	struct proto_async_event ev = { .type = IBV_EVENT_CQ_ERR, .handle = handle };
	struct proto_async_event port = { .type = IBV_EVENT_PORT_ERR, .handle = 1 };
	struct rocemu_async_event got;

	ck_assert_int_eq(write(fk.events, &ev, sizeof(ev)), sizeof(ev));
	ck_assert_int_eq(write(fk.events, &port, sizeof(port)), sizeof(port));
	ck_assert_int_eq(write(fk.events, &ev, sizeof(ev)), sizeof(ev));
	ck_assert_int_eq(rocemu_destroy_cq(cq), 0);
	fk.next_handle = handle - 1;
	cq = rocemu_create_cq(ctx, 5);
	ck_assert_ptr_nonnull(cq);
	ck_assert_uint_eq(cq->handle, handle);
	ck_assert_int_eq(write(fk.events, &ev, sizeof(ev)), sizeof(ev));
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), 0);
	ck_assert_ptr_null(got.cq);
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), 0);
	ck_assert_int_eq(got.type, IBV_EVENT_PORT_ERR);
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), 0);
	ck_assert_ptr_null(got.cq);
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), 0);
	ck_assert_ptr_eq(got.cq, cq);
	ck_assert_int_eq(rocemu_take_async_event(ctx, &got), EAGAIN);
	ck_assert_uint_eq(ctx->n_gone_cqs, 0);
}
END_TEST

START_TEST(test_cq_destroy)
{
	ck_assert_int_eq(rocemu_destroy_cq(cq), 0);
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_CQ], 1);
}
END_TEST

/* A destroyed CQ's mapping serves the next CQ the daemon gives the same memfd: the same
 * pages, no new mapping, completions through it as through a new one; a new memfd gets a
 * mapping of its own; what is kept goes with the context. */
START_TEST(test_cq_ring_mapping_kept)
{
	struct proto_cqe e = cqe_n(3);
	void *first = cq->map.addr;
	struct ibv_wc wc;

	fk.reuse_cq_ring = true;
	ck_assert_int_eq(rocemu_destroy_cq(cq), 0);
	ck_assert_uint_eq(ctx->park.n, 1);
	cq = rocemu_create_cq(ctx, 5);
	ck_assert_ptr_nonnull(cq);
	ck_assert_ptr_eq(cq->map.addr, first);
	ck_assert_uint_eq(ctx->park.n, 0);
	fake_push_cqe(&fk, &e);
	ck_assert_int_eq(rocemu_poll_cq(cq, 1, &wc), 1);
	check_wc(&wc, 3);
	fk.reuse_cq_ring = false;
	ck_assert_int_eq(rocemu_destroy_cq(cq), 0);
	cq = rocemu_create_cq(ctx, 5);
	ck_assert_ptr_nonnull(cq);
	ck_assert_ptr_ne(cq->map.addr, first);
	ck_assert_uint_eq(ctx->park.n, 1);
}
END_TEST

/* Kept mappings are bounded in number: beyond PROTO_RING_PARK_SLOTS a destroyed queue's goes. */
START_TEST(test_ring_park_bounded)
{
	struct rocemu_cq *cqs[PROTO_RING_PARK_SLOTS + 2];

	for (unsigned i = 0; i < PROTO_RING_PARK_SLOTS + 2; i++)
		ck_assert_ptr_nonnull(cqs[i] = rocemu_create_cq(ctx, 5));
	for (unsigned i = 0; i < PROTO_RING_PARK_SLOTS + 2; i++)
		ck_assert_int_eq(rocemu_destroy_cq(cqs[i]), 0);
	ck_assert_uint_eq(ctx->park.n, PROTO_RING_PARK_SLOTS);
}
END_TEST

START_TEST(test_cq_create_invalid)
{
	errno = 0;
	ck_assert_ptr_null(rocemu_create_cq(ctx, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(fk.count[PROTO_CREATE_CQ], 1); /* the fixture's CQ only */
}
END_TEST

START_TEST(test_cq_bad_ring)
{
	fk.bad_cq_ring = true;
	errno = 0;
	ck_assert_ptr_null(rocemu_create_cq(ctx, 4));
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_CQ], 1); /* the daemon's half is undone */
}
END_TEST

START_TEST(test_cq_destroy_daemon_gone)
{
	fake_hangup(&fk);
	ck_assert_int_eq(rocemu_destroy_cq(cq), EPIPE); /* rocemu_close frees it */
}
END_TEST

/* ------------------------------------------------------------------ qp */

static struct rocemu_qp *qp;

#define QP_SGES 2  /* what make_qp's queues are made for */

static struct rocemu_qp *make_qp(uint32_t send_wr, uint32_t recv_wr)
{
	struct rocemu_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .max_send_wr = send_wr, .max_recv_wr = recv_wr,
		.max_send_sge = QP_SGES, .max_recv_sge = QP_SGES,
	};
	struct rocemu_qp *q = rocemu_create_qp(pd, &init);

	ck_assert_msg(q != NULL, "create_qp: %s (%s)", strerror(errno), rocemu_last_error(ctx));
	return q;
}

/* As if taken to RTS: the fake daemon keeps no QP state, the library posts only from RTS. */
static void ready_to_post(struct rocemu_qp *q)
{
	q->state = IBV_QPS_RTS;
}

static void qp_setup(void)
{
	cq_setup();
	qp = make_qp(4, 4);
}

static struct ibv_sge sges[2] = {
	{ .addr = 0x1000, .length = 100, .lkey = 0x1111 },
	{ .addr = 0x2000, .length = 200, .lkey = 0x2222 },
};

static struct ibv_send_wr write_wr(uint64_t id)
{
	return (struct ibv_send_wr){
		.wr_id = id, .sg_list = sges, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = 0x7000 + id, .rkey = 0x4242 },
	};
}

static const struct proto_swqe *sq_slot(uint32_t index)
{
	return (const struct proto_swqe *)((char *)(fake_sq(&fk) + 1) +
					   (index & (fk.sq_entries - 1)) * fk.sq_stride);
}

START_TEST(test_qp_create)
{
	ck_assert_int_eq(qp->state, IBV_QPS_RESET);
	ck_assert_ptr_eq(qp->context, ctx);
	ck_assert_ptr_eq(qp->pd, pd);
	ck_assert_uint_eq(qp->qp_num, 0x11 + qp->handle);
	ck_assert_uint_eq(fk.sq_entries, 4);
	ck_assert_uint_eq(fk.rq_entries, 4);
}
END_TEST

/* rdma_create_qp's: the QP and its two CQs in one request, ready to use; the CQs are
 * destroyed as any are. */
START_TEST(test_qp_cqs_in_one_round_trip)
{
	struct rocemu_qp_init_attr init = { .max_send_wr = 8, .max_recv_wr = 16,
					    .max_send_sge = 1, .max_recv_sge = 1 };
	unsigned cqs_before = fk.count[PROTO_CREATE_CQ];
	struct rocemu_qp *q = rocemu_create_qp_cqs(pd, &init, 8, 16);

	ck_assert_msg(q != NULL, "%s (%s)", strerror(errno), rocemu_last_error(ctx));
	ck_assert_uint_eq(fk.count[PROTO_CREATE_QP_CQS], 1);
	ck_assert_uint_eq(fk.count[PROTO_CREATE_CQ], cqs_before);
	ck_assert_uint_eq(fk.create_qp_cqs.send_cqe, 8);
	ck_assert_uint_eq(fk.create_qp_cqs.recv_cqe, 16);
	ck_assert_uint_eq(fk.create_qp_cqs.qp.max_recv_wr, 16);
	ck_assert_ptr_nonnull(init.send_cq);
	ck_assert_ptr_nonnull(init.recv_cq);
	ck_assert_ptr_ne(init.send_cq, init.recv_cq);
	ck_assert_uint_eq(init.max_send_wr, 8);
	ck_assert_int_eq(rocemu_poll_cq(init.send_cq, 1, &(struct ibv_wc){ 0 }), 0);
	ck_assert_int_eq(rocemu_destroy_qp(q), 0);
	ck_assert_int_eq(rocemu_destroy_cq(init.send_cq), 0);
	ck_assert_int_eq(rocemu_destroy_cq(init.recv_cq), 0);
}
END_TEST

/* A reply the library cannot use, or a refusal: nothing is left on either side. */
START_TEST(test_qp_cqs_all_or_nothing)
{
	struct rocemu_qp_init_attr init = { .max_send_wr = 4, .max_recv_wr = 4 };

	fk.bad_cq_ring = true;
	errno = 0;
	ck_assert_ptr_null(rocemu_create_qp_cqs(pd, &init, 4, 4));
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_QP], 1);
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_CQ], 2);
	fk.bad_cq_ring = false;
	fk.fail_op = PROTO_CREATE_QP_CQS;
	fk.fail_status = -EDQUOT;
	errno = 0;
	ck_assert_ptr_null(rocemu_create_qp_cqs(pd, &init, 4, 4));
	ck_assert_int_eq(errno, EDQUOT);
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_CQ], 2);
	errno = 0;
	ck_assert_ptr_null(rocemu_create_qp_cqs(pd, &init, 0, 4));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(fk.count[PROTO_CREATE_QP_CQS], 2);
}
END_TEST

START_TEST(test_post_send_writes_wqes)
{
	struct ibv_send_wr wr[2] = { write_wr(1), write_wr(2) }, *bad = NULL;
	struct proto_swqe want[2] = {
		{ .wr_id = 1, .opcode = IBV_WR_RDMA_WRITE, .flags = IBV_SEND_SIGNALED,
		  .remote_addr = 0x7001, .rkey = 0x4242, .num_sge = 2,
		  .sge = { { 0x1000, 100, 0x1111 }, { 0x2000, 200, 0x2222 } } },
		{ .wr_id = 2, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .flags = 0,
		  .remote_addr = 0x7002, .rkey = 0x4242, .imm = htonl(0xfeed), .num_sge = 1,
		  .sge = { { 0x1000, 100, 0x1111 } } },
	};

	ready_to_post(qp);
	wr[0].num_sge = 2;
	wr[0].next = &wr[1];
	wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[1].send_flags = 0;
	wr[1].imm_data = htonl(0xfeed);
	ck_assert_int_eq(rocemu_post_send(qp, wr, &bad), 0);
	ck_assert_ptr_null(bad);
	ck_assert_uint_eq(__atomic_load_n(&fake_sq(&fk)->prod, __ATOMIC_ACQUIRE), 2);
	/* a slot is the fixed fields and the SGEs given; the rest of its room is not read */
	ck_assert_mem_eq(sq_slot(0), &want[0],
			 offsetof(struct proto_swqe, sge) + 2 * sizeof(struct proto_sge));
	ck_assert_mem_eq(sq_slot(1), &want[1],
			 offsetof(struct proto_swqe, sge) + sizeof(struct proto_sge));
	ck_assert_uint_gt(fake_doorbell(&fk), 0);
}
END_TEST

/* An sg_list four bytes off the alignment its 64-bit addresses want, as libiscsi's (in a
 * packed struct) is: read as any other, with no misaligned access (the sanitizer build's
 * UBSan stops at one). */
START_TEST(test_post_send_misaligned_sg_list)
{
	_Alignas(8) uint8_t room[4 + 2 * sizeof(struct ibv_sge)];
	struct ibv_sge *packed = (struct ibv_sge *)(room + 4);
	struct ibv_send_wr wr = write_wr(5), *bad = NULL;
	const struct proto_sge want[2] = { { 0x1000, 100, 0x1111 }, { 0x2000, 200, 0x2222 } };

	memcpy(room + 4, sges, 2 * sizeof(struct ibv_sge));
	wr.sg_list = packed;
	wr.num_sge = 2;
	ready_to_post(qp);
	ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), 0);
	ck_assert_mem_eq(sq_slot(0)->sge, want, sizeof(want));
}
END_TEST

START_TEST(test_post_send_full)
{
	struct ibv_send_wr wr[6], *bad = NULL;

	ready_to_post(qp);
	for (int i = 0; i < 6; i++) {
		wr[i] = write_wr((uint64_t)i);
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
	}
	ck_assert_int_eq(rocemu_post_send(qp, wr, &bad), ENOMEM);
	ck_assert_ptr_eq(bad, &wr[4]);
	ck_assert_uint_eq(fake_sq(&fk)->prod, 4);
	ck_assert_uint_gt(fake_doorbell(&fk), 0); /* the four that fit were announced */
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "full"));
	__atomic_store_n(&fake_sq(&fk)->cons, 2, __ATOMIC_RELEASE); /* the daemon took two */
	bad = NULL;
	ck_assert_int_eq(rocemu_post_send(qp, &wr[4], &bad), 0);
	ck_assert_ptr_null(bad);
	ck_assert_uint_eq(fake_sq(&fk)->prod, 6);
	ck_assert_uint_eq(sq_slot(4)->wr_id, 4);
	ck_assert_uint_eq(sq_slot(5)->wr_id, 5);
}
END_TEST

START_TEST(test_post_send_wraps)
{
	struct rocemu_qp *q;
	struct ibv_send_wr wr = write_wr(9), *bad;

	fk.ring_start = UINT32_MAX - 1;
	q = make_qp(4, 1);
	ready_to_post(q);
	for (uint32_t i = 0; i < 4; i++) {
		wr.wr_id = i;
		ck_assert_int_eq(rocemu_post_send(q, &wr, &bad), 0);
		ck_assert_uint_eq(sq_slot(UINT32_MAX - 1 + i)->wr_id, i);
	}
	ck_assert_uint_eq(fake_sq(&fk)->prod, 2);
	ck_assert_int_eq(rocemu_post_send(q, &wr, &bad), ENOMEM);
}
END_TEST

START_TEST(test_post_send_bad_opcode)
{
	struct ibv_send_wr wr[2] = { write_wr(1), write_wr(2) }, *bad = NULL;

	ready_to_post(qp);
	wr[0].next = &wr[1];
	wr[1].opcode = IBV_WR_TSO;
	ck_assert_int_eq(rocemu_post_send(qp, wr, &bad), EINVAL);
	ck_assert_ptr_eq(bad, &wr[1]);
	ck_assert_uint_eq(fake_sq(&fk)->prod, 1);
	ck_assert_uint_gt(fake_doorbell(&fk), 0);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "opcode"));
}
END_TEST

START_TEST(test_post_send_too_many_sge)
{
	struct ibv_sge many[QP_SGES + 1] = { { 0 } };
	struct ibv_send_wr wr = write_wr(1), *bad = NULL;

	ready_to_post(qp);
	wr.sg_list = many;
	wr.num_sge = QP_SGES + 1;
	ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), EINVAL);
	ck_assert_ptr_eq(bad, &wr);
	wr.num_sge = -1;
	ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), EINVAL);
	ck_assert_uint_eq(fake_sq(&fk)->prod, 0);
	ck_assert_uint_eq(fake_doorbell(&fk), 0); /* nothing posted, nothing rung */
	wr.num_sge = QP_SGES;
	ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), 0);
	ck_assert_uint_eq(sq_slot(0)->num_sge, QP_SGES);
}
END_TEST

START_TEST(test_post_recv)
{
	struct ibv_recv_wr wr[5], *bad = NULL;
	const char *ring = (const char *)(fake_rq(&fk) + 1);
	struct ibv_sge rsge[2] = { { .addr = 0x1000, .length = 10, .lkey = 7 },
				   { .addr = 0x2000, .length = 20, .lkey = 8 } };

	ready_to_post(qp);
	for (int i = 0; i < 5; i++)
		wr[i] = (struct ibv_recv_wr){ .wr_id = 50 + (uint64_t)i,
					      .next = i < 4 ? &wr[i + 1] : NULL };
	wr[1].sg_list = rsge;
	wr[1].num_sge = 2;
	ck_assert_int_eq(rocemu_post_recv(qp, wr, &bad), ENOMEM);
	ck_assert_ptr_eq(bad, &wr[4]);
	ck_assert_uint_eq(__atomic_load_n(&fake_rq(&fk)->prod, __ATOMIC_ACQUIRE), 4);
	for (int i = 0; i < 4; i++) {
		const struct proto_rwqe *slot = (const void *)(ring + (size_t)i * fk.rq_stride);

		ck_assert_uint_eq(slot->wr_id, 50 + (uint64_t)i);
		ck_assert_uint_eq(slot->num_sge, i == 1 ? 2 : 0);
	}
	ck_assert_uint_eq(fk.rq_stride, proto_rwqe_stride(QP_SGES));
	const struct proto_rwqe *second = (const void *)(ring + fk.rq_stride);
	ck_assert_uint_eq(second->sge[0].addr, 0x1000);
	ck_assert_uint_eq(second->sge[1].length, 20);
	ck_assert_uint_eq(second->sge[1].lkey, 8);
	ck_assert_uint_eq(fake_sq(&fk)->prod, 0);
	ck_assert_uint_gt(fake_doorbell(&fk), 0);
}
END_TEST

START_TEST(test_post_recv_too_many_sge)
{
	struct ibv_sge rsge[QP_SGES + 1] = { { 0 } };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = rsge, .num_sge = QP_SGES + 1 };
	struct ibv_recv_wr *bad = NULL;

	ready_to_post(qp);
	ck_assert_int_eq(rocemu_post_recv(qp, &wr, &bad), EINVAL);
	ck_assert_ptr_eq(bad, &wr);
	ck_assert_uint_eq(fake_rq(&fk)->prod, 0);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "num_sge"));
}
END_TEST

/* As on rxe: sends are taken from RTS on, receives from INIT on; create_qp says how large
 * the queues it made are. */
START_TEST(test_post_in_a_state_that_takes_none)
{
	struct ibv_send_wr wr = write_wr(1), *bad = NULL;
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *rbad = NULL;
	const enum ibv_qp_state too_early[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR };

	for (size_t i = 0; i < sizeof(too_early) / sizeof(too_early[0]); i++) {
		qp->state = too_early[i];
		bad = NULL;
		ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), EINVAL);
		ck_assert_ptr_eq(bad, &wr);
		ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "from RTS on"));
	}
	ck_assert_uint_eq(__atomic_load_n(&fake_sq(&fk)->prod, __ATOMIC_ACQUIRE), 0);
	qp->state = IBV_QPS_RESET;
	ck_assert_int_eq(rocemu_post_recv(qp, &rwr, &rbad), EINVAL);
	ck_assert_ptr_eq(rbad, &rwr);
	qp->state = IBV_QPS_INIT;
	ck_assert_int_eq(rocemu_post_recv(qp, &rwr, &rbad), 0);
	qp->state = IBV_QPS_ERR;
	ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), 0);
}
END_TEST

START_TEST(test_create_qp_reports_queue_sizes)
{
	struct rocemu_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .max_send_wr = 5,
					    .max_recv_wr = 3, .max_send_sge = 1 };
	struct rocemu_qp *q = rocemu_create_qp(pd, &init);

	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(init.max_send_wr, 8);
	ck_assert_uint_eq(fk.sq_entries, 8);
	ck_assert_uint_eq(init.max_recv_wr, 4);
}
END_TEST

START_TEST(test_post_daemon_gone)
{
	struct ibv_send_wr wr = write_wr(1), *bad = NULL;
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *rbad = NULL;

	ready_to_post(qp);
	fake_hangup(&fk);
	ck_assert_int_eq(rocemu_destroy_qp(qp), EPIPE);
	ck_assert_int_eq(rocemu_post_send(qp, &wr, &bad), EPIPE);
	ck_assert_ptr_eq(bad, &wr);
	ck_assert_int_eq(rocemu_post_recv(qp, &rwr, &rbad), EPIPE);
	ck_assert_ptr_eq(rbad, &rwr);
}
END_TEST

static struct ibv_qp_attr rtr_attr(void)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = 0x77,
		.rq_psn = 0x123456, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1 },
	};

	rocemu_gid_from_ipv4(&a.ah_attr.grh.dgid, htonl(0x0a000002));
	return a;
}

#define RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
		  IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS)

START_TEST(test_modify_without_grh)
{
	struct ibv_qp_attr a = rtr_attr();

	a.ah_attr.is_global = 0;
	ck_assert_int_eq(rocemu_modify_qp(qp, &a, RTR_MASK), EINVAL);
	ck_assert_uint_eq(fk.count[PROTO_MODIFY_QP], 0);
	ck_assert_int_eq(qp->state, IBV_QPS_RESET);
	ck_assert_ptr_nonnull(strstr(rocemu_last_error(ctx), "GRH"));
}
END_TEST

/* An IPv6 GID and the GRH's other fields go to the daemon as they are. */
START_TEST(test_modify_ipv6_gid)
{
	struct ibv_qp_attr a = rtr_attr();
	const struct proto_qp_attr *p = &fk.modify.attr;
	static const uint8_t v6[16] = { 0xfd, 0x52, 0x6f, 0x63, [15] = 2 };

	memcpy(a.ah_attr.grh.dgid.raw, v6, 16);
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.traffic_class = 0x68;
	a.ah_attr.grh.flow_label = 0xabcde;
	a.ah_attr.grh.hop_limit = 9;
	ck_assert_int_eq(rocemu_modify_qp(qp, &a, RTR_MASK), 0);
	ck_assert_mem_eq(p->dest_gid, v6, 16);
	ck_assert_uint_eq(p->sgid_index, 1);
	ck_assert_uint_eq(p->traffic_class, 0x68);
	ck_assert_uint_eq(p->flow_label, 0xabcde);
	ck_assert_uint_eq(p->hop_limit, 9);
}
END_TEST

START_TEST(test_modify_sends_attrs)
{
	struct ibv_qp_attr a = rtr_attr();
	const struct proto_qp_attr *p = &fk.modify.attr;

	ck_assert_int_eq(rocemu_modify_qp(qp, &a, RTR_MASK), 0);
	ck_assert_uint_eq(fk.modify.handle, qp->handle);
	ck_assert_uint_eq(fk.modify.attr_mask, RTR_MASK);
	ck_assert_uint_eq(p->state, IBV_QPS_RTR);
	ck_assert_uint_eq(p->path_mtu, IBV_MTU_1024);
	ck_assert_uint_eq(p->dest_qpn, 0x77);
	ck_assert_uint_eq(p->rq_psn, 0x123456);
	ck_assert_uint_eq(p->access, IBV_ACCESS_REMOTE_WRITE);
	ck_assert_uint_eq(p->dest_gid[10], 0xff);
	ck_assert_uint_eq(p->dest_gid[11], 0xff);
	ck_assert_mem_eq(p->dest_gid + 12, "\x0a\x00\x00\x02", 4);
	ck_assert_uint_eq(p->min_rnr_timer, 12);
	ck_assert_int_eq(qp->state, IBV_QPS_RTR);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0x654321, .timeout = 14,
				  .retry_cnt = 7, .rnr_retry = 6 };
	ck_assert_int_eq(rocemu_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY), 0);
	ck_assert_uint_eq(p->sq_psn, 0x654321);
	ck_assert_uint_eq(p->timeout, 14);
	ck_assert_uint_eq(p->retry_cnt, 7);
	ck_assert_uint_eq(p->rnr_retry, 6);
	ck_assert_uint_eq(p->dest_gid[15], 0); /* no IBV_QP_AV, no address */
	ck_assert_int_eq(qp->state, IBV_QPS_RTS);
}
END_TEST

START_TEST(test_modify_refused)
{
	struct ibv_qp_attr a = rtr_attr();

	fk.fail_op = PROTO_MODIFY_QP;
	fk.fail_status = -EINVAL;
	fk.fail_msg = "RESET to RTR is not a transition";
	ck_assert_int_eq(rocemu_modify_qp(qp, &a, RTR_MASK), EINVAL);
	ck_assert_int_eq(qp->state, IBV_QPS_RESET);
	ck_assert_str_eq(rocemu_last_error(ctx), "RESET to RTR is not a transition");
}
END_TEST

/* Four requests at most, and nothing goes to the daemon for a fifth. */
START_TEST(test_batch_holds_four)
{
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT };

	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &a, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &a, IBV_QP_STATE), ENOSPC);
	ck_assert_uint_eq(fk.count[PROTO_BATCH], 0);
	rocemu_batch_free(b);
}
END_TEST

/* The changes go in order, in one request; those that ran before the refusal take effect. */
START_TEST(test_batch_stops_at_refusal)
{
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT }, rts = { .qp_state = IBV_QPS_RTS };
	const struct proto_modify_qp *second;
	unsigned done = 99;

	fk.batch_status = -EINVAL;
	fk.batch_done = 1;
	ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &init, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &rts, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_run(b, &done), EINVAL);
	rocemu_batch_free(b);
	ck_assert_uint_eq(done, 1);
	ck_assert_int_eq(qp->state, IBV_QPS_INIT);
	ck_assert_str_eq(rocemu_last_error(ctx), "INIT to RTS is not a transition");
	ck_assert_uint_eq(fk.count[PROTO_BATCH], 1);
	ck_assert_uint_eq(fk.count[PROTO_MODIFY_QP], 0);
	ck_assert_uint_eq(fk.batch.count, 2);
	ck_assert_uint_eq(fk.batch.len[1], sizeof(struct proto_modify_qp));
	second = (const struct proto_modify_qp *)(fk.batch.body +
						  ((sizeof(struct proto_modify_qp) + 7) & ~7ul));
	ck_assert_uint_eq(second->hdr.op, PROTO_MODIFY_QP);
	ck_assert_uint_eq(second->handle, qp->handle);
	ck_assert_uint_eq(second->attr.state, IBV_QPS_RTS);
}
END_TEST

START_TEST(test_batch_runs_whole)
{
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT }, err = { .qp_state = IBV_QPS_ERR };
	unsigned done = 99;

	ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &init, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &err, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_run(b, &done), 0);
	rocemu_batch_free(b);
	ck_assert_uint_eq(done, 2);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

/* A QP made in INIT asks for the change in its CREATE_QP, and says INIT; without one, its
 * CREATE_QP asks for none and it is in RESET. */
START_TEST(test_create_qp_in_init)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT,
				    .qp_access_flags = IBV_ACCESS_REMOTE_READ };
	struct rocemu_qp_init_attr attr = { .send_cq = cq, .recv_cq = cq, .max_send_wr = 2,
					    .max_recv_wr = 2, .init = &init,
					    .init_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS };
	struct rocemu_qp *made = rocemu_create_qp(pd, &attr);

	ck_assert_ptr_nonnull(made);
	ck_assert_int_eq(made->state, IBV_QPS_INIT);
	ck_assert_uint_eq(fk.create_qp.init_mask, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
	ck_assert_uint_eq(fk.create_qp.init.state, IBV_QPS_INIT);
	ck_assert_uint_eq(fk.create_qp.init.access, IBV_ACCESS_REMOTE_READ);
	ck_assert_uint_eq(fk.count[PROTO_MODIFY_QP], 0);
	attr.init = NULL;
	made = rocemu_create_qp(pd, &attr);
	ck_assert_ptr_nonnull(made);
	ck_assert_int_eq(made->state, IBV_QPS_RESET);
	ck_assert_uint_eq(fk.create_qp.init_mask, 0);
}
END_TEST

static bool cq_listed(const struct rocemu_cq *c)
{
	const struct rocemu_cq *it;

	LIST_FOREACH(it, &ctx->cqs, link)
		if (it == c)
			return true;
	return false;
}

/* A QP and its CQ destroyed in one request; a refusal of the CQ keeps it, mapped. */
START_TEST(test_batch_destroys_what_ran)
{
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	const struct proto_handle *first = (const struct proto_handle *)fk.batch.body;
	const struct proto_handle *second = (const struct proto_handle *)(fk.batch.body +
								  ((sizeof(struct proto_handle) + 7) & ~7ul));
	uint32_t qp_handle = qp->handle;
	struct ibv_wc wc;
	unsigned done = 99;

	fk.batch_status = -EBUSY;
	fk.batch_done = 1;
	ck_assert_int_eq(rocemu_batch_destroy_qp(b, qp), 0);
	ck_assert_int_eq(rocemu_batch_destroy_cq(b, cq), 0);
	ck_assert_int_eq(rocemu_batch_run(b, &done), EBUSY);
	rocemu_batch_free(b);
	qp = NULL;
	ck_assert_uint_eq(done, 1);
	ck_assert_uint_eq(fk.batch.count, 2);
	ck_assert_uint_eq(fk.batch.len[0], sizeof(struct proto_handle));
	ck_assert_uint_eq(first->hdr.op, PROTO_DESTROY_QP);
	ck_assert_uint_eq(first->handle, qp_handle);
	ck_assert_uint_eq(second->hdr.op, PROTO_DESTROY_CQ);
	ck_assert_uint_eq(second->handle, cq->handle);
	ck_assert(LIST_EMPTY(&ctx->qps));
	ck_assert(cq_listed(cq));
	ck_assert_int_eq(rocemu_poll_cq(cq, 1, &wc), 0);
}
END_TEST

START_TEST(test_batch_destroys_whole)
{
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	unsigned done = 99;

	ck_assert_int_eq(rocemu_batch_destroy_qp(b, qp), 0);
	ck_assert_int_eq(rocemu_batch_destroy_cq(b, cq), 0);
	ck_assert_int_eq(rocemu_batch_run(b, &done), 0);
	rocemu_batch_free(b);
	ck_assert_uint_eq(done, 2);
	ck_assert(LIST_EMPTY(&ctx->qps));
	ck_assert(!cq_listed(cq));
	qp = NULL;
	cq = NULL;
}
END_TEST

/* A teardown's batch goes with no reply wanted when the daemon will surely run it: the
 * library takes its effects at once, and its next request is answered as its own. */
START_TEST(test_batch_posted_when_sure)
{
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	struct rocemu_pd *next;

	ck_assert_int_eq(rocemu_modify_qp(qp, &err, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_destroy_qp(b, qp), 0);
	ck_assert_int_eq(rocemu_batch_destroy_cq(b, cq), 0);
	ck_assert_int_eq(rocemu_batch_post(b), 0);
	rocemu_batch_free(b);
	ck_assert(LIST_EMPTY(&ctx->qps));
	ck_assert(!cq_listed(cq));
	qp = NULL;
	cq = NULL;
	next = rocemu_alloc_pd(ctx);     /* answered after the fake read the batch */
	ck_assert_ptr_nonnull(next);
	ck_assert_uint_eq(fk.unanswered[PROTO_BATCH], 1);
	ck_assert_uint_eq(fk.count[PROTO_BATCH], 1);
	ck_assert_uint_eq(fk.batch.count, 2);
	ck_assert_uint_eq(((const struct proto_handle *)fk.batch.body)->hdr.op, PROTO_DESTROY_QP);
	ck_assert_int_eq(rocemu_dealloc_pd(next), 0);
}
END_TEST

/* Any batch the daemon might refuse, or whose QP might still take a message, is not sent:
 * EAGAIN, and it can still be run. */
START_TEST(test_batch_post_only_when_sure)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT }, err = { .qp_state = IBV_QPS_ERR };
	struct rocemu_batch *b = rocemu_batch_new(ctx);
	struct rocemu_qp *other;
	unsigned done = 99;

	ck_assert_int_eq(rocemu_modify_qp(qp, &init, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_destroy_qp(b, qp), 0);
	ck_assert_int_eq(rocemu_batch_post(b), EAGAIN);           /* INIT: it may receive */
	rocemu_batch_free(b);
	ck_assert_int_eq(rocemu_modify_qp(qp, &err, IBV_QP_STATE), 0);
	other = make_qp(2, 2);                                      /* the CQ's second user */
	b = rocemu_batch_new(ctx);
	ck_assert_int_eq(rocemu_batch_destroy_qp(b, qp), 0);
	ck_assert_int_eq(rocemu_batch_destroy_cq(b, cq), 0);
	ck_assert_int_eq(rocemu_batch_post(b), EAGAIN);
	rocemu_batch_free(b);
	b = rocemu_batch_new(ctx);
	ck_assert_int_eq(rocemu_batch_modify_qp(b, qp, &err, IBV_QP_STATE), 0);
	ck_assert_int_eq(rocemu_batch_post(b), EAGAIN);           /* a change may be refused */
	ck_assert_uint_eq(fk.count[PROTO_BATCH], 0);
	ck_assert_int_eq(rocemu_batch_run(b, &done), 0);
	ck_assert_uint_eq(done, 1);
	rocemu_batch_free(b);
	ck_assert_int_eq(rocemu_destroy_qp(other), 0);
	b = rocemu_batch_new(ctx);
	ck_assert_int_eq(rocemu_batch_destroy_qp(b, qp), 0);
	ck_assert_int_eq(rocemu_batch_destroy_cq(b, cq), 0);
	ck_assert_int_eq(rocemu_batch_post(b), 0);                 /* the CQ's last user goes */
	rocemu_batch_free(b);
	qp = NULL;
	cq = NULL;
}
END_TEST

START_TEST(test_query_qp)
{
	struct ibv_qp_attr a = rtr_attr(), got;

	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 6;
	a.sq_psn = 99;
	ck_assert_int_eq(rocemu_modify_qp(qp, &a, RTR_MASK), 0);
	qp->state = IBV_QPS_ERR;
	memset(&got, 0x5a, sizeof(got));
	ck_assert_int_eq(rocemu_query_qp(qp, &got), 0);
	ck_assert_int_eq(got.qp_state, IBV_QPS_RTR);
	ck_assert_int_eq(qp->state, IBV_QPS_RTR);
	ck_assert_int_eq(got.path_mtu, IBV_MTU_1024);
	ck_assert_uint_eq(got.dest_qp_num, 0x77);
	ck_assert_uint_eq(got.rq_psn, 0x123456);
	ck_assert_uint_eq(got.sq_psn, 99);
	ck_assert_uint_eq(got.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
	ck_assert_uint_eq(rocemu_gid_to_ipv4(&got.ah_attr.grh.dgid), htonl(0x0a000002));
	ck_assert_uint_eq(got.ah_attr.is_global, 1);
	ck_assert_uint_eq(got.timeout, 14);
	ck_assert_uint_eq(got.retry_cnt, 7);
	ck_assert_uint_eq(got.rnr_retry, 6);
	ck_assert_uint_eq(got.min_rnr_timer, 12);
	ck_assert_uint_eq(got.qkey, 0);
}
END_TEST

START_TEST(test_qp_bad_init_attr)
{
	struct rocemu_qp_init_attr init = { .send_cq = cq, .max_send_wr = 1, .max_recv_wr = 1 };

	errno = 0;
	ck_assert_ptr_null(rocemu_create_qp(pd, &init));
	ck_assert_int_eq(errno, EINVAL);
	init.recv_cq = cq;
	init.max_send_sge = PROTO_MAX_SGE + 1;
	errno = 0;
	ck_assert_ptr_null(rocemu_create_qp(pd, &init));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(fk.count[PROTO_CREATE_QP], 1); /* the fixture's QP only */
}
END_TEST

START_TEST(test_qp_destroy)
{
	ck_assert_int_eq(rocemu_destroy_qp(qp), 0);
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_QP], 1);
}
END_TEST

/* rocemu_close frees what the application still holds (ASan's leak check watches) and
 * closing the socket is all the daemon needs to hear. */
START_TEST(test_close_with_live_objects)
{
	uint8_t *buf = map_anon(1);

	reg(buf, 100);
	ck_assert_ptr_nonnull(rocemu_alloc_pd(ctx));
	ck_assert_ptr_nonnull(rocemu_create_cq(ctx, 2));
	ck_assert_int_eq(rocemu_close(ctx), 0);
	ctx = NULL;
	fake_wait_end(&fk); /* hangs (and times out) unless the socket was closed */
	ck_assert_uint_eq(fk.count[PROTO_DESTROY_QP] + fk.count[PROTO_DESTROY_CQ] +
			  fk.count[PROTO_DEREG_MR] + fk.count[PROTO_DEALLOC_PD], 0);
}
END_TEST

/* ------------------------------------------------------------------ suite */

static TCase *add_tcase(Suite *s, const char *name, void (*up)(void), void (*down)(void))
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, TIMEOUT_S);
	if (up)
		tcase_add_checked_fixture(tc, up, down);
	suite_add_tcase(s, tc);
	return tc;
}

static void add_open_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "gid", NULL, NULL);

	tcase_add_test(tc, test_gid_round_trip);
	tcase_add_test(tc, test_gid_not_ipv4);
	tc = add_tcase(s, "open", NULL, NULL);
	tcase_add_test(tc, test_open_missing_socket);
	tcase_add_test(tc, test_open_nobody_listening);
	tcase_add_test(tc, test_open_path_too_long);
	tcase_add_test(tc, test_open_env);
	tcase_add_test(tc, test_open_path_beats_env);
	tcase_add_test(tc, test_open_version_mismatch);
	tcase_add_test(tc, test_open_refused_by_daemon);
	tcase_add_test(tc, test_find_socket);
	tc = add_tcase(s, "query", setup, teardown);
	tcase_add_test(tc, test_query_device);
	tcase_add_test(tc, test_query_port);
}

static void add_rpc_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "rpc", setup, teardown);

	tcase_add_test(tc, test_error_reply);
	tcase_add_test(tc, test_error_reply_full_size);
	tcase_add_test(tc, test_daemon_gone_during_call);
	tcase_add_test(tc, test_daemon_gone_between_calls);
	tcase_add_test(tc, test_reply_wrong_op);
	tcase_add_test(tc, test_reply_wrong_size);
	tcase_add_test(tc, test_reply_unexpected_fd);
}

static void add_arena_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "arena", setup, teardown);

	tcase_add_test(tc, test_reg_malloc_shared);
	tcase_add_test(tc, test_reg_seals);
	tcase_add_test(tc, test_reg_same_page_twice);
	tcase_add_test(tc, test_reg_neighbouring_malloc_buffers);
	tcase_add_test(tc, test_reg_buffer_below_top_chunk);
	tcase_add_test(tc, test_reg_stack_buffer);
	tcase_add_test(tc, test_reg_stack_frames_in_moved_page);
	tcase_add_test(tc, test_reg_thread_stack_frames_in_moved_page);
	tcase_add_test(tc, test_reg_free_stack_refused);
	tcase_add_test(tc, test_reg_mmap_buffer);
	tcase_add_test(tc, test_reg_hands_the_arena_over_once);
	tcase_add_test(tc, test_reg_hands_the_arena_over_again_on_estale);
	tcase_add_test(tc, test_reg_reused_address);
	tcase_add_test(tc, test_reg_untouched_buffer);
	tcase_add_test(tc, test_reg_touched_buffer);
	tcase_add_test(tc, test_reg_buffer_in_a_long_named_file);
	tcase_add_test(tc, test_reg_sparse_pages);
	tcase_add_test(tc, test_reg_edge_pages_shared);
	tcase_add_test(tc, test_reg_partly_adopted);
	tcase_add_test(tc, test_reg_reused_address_untouched);
	tcase_add_test(tc, test_reg_file_pages_untouched);
	tcase_add_test(tc, test_reg_unreadable);
	tcase_add_test(tc, test_reg_invalid);
	tcase_add_test(tc, test_reg_unmapped);
	tcase_add_test(tc, test_reg_refused);
	tcase_add_test(tc, test_dereg_refused_keeps_mr);
	tcase_add_test(tc, test_fork_child_gets_own_arena);
	tcase_add_test(tc, test_fork_child_writes_its_own_copy);
	tcase_add_test(tc, test_fork_child_reads_its_own_maps);
	tcase_add_test(tc, test_adopt_reads_the_maps_anew);
	tcase_add_test(tc, test_adopt_survives_its_maps_fd_closed);
}

static void add_cq_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "cq", cq_setup, teardown);

	tcase_add_test(tc, test_cq_poll_in_order);
	tcase_add_test(tc, test_cq_indices_wrap);
	tcase_add_test(tc, test_cq_wait_wakes);
	tcase_add_test(tc, test_cq_wait_ready);
	tcase_add_test(tc, test_cq_wait_timeout);
	tcase_add_test(tc, test_cq_wait_spurious_wakeup);
	tcase_add_test(tc, test_cq_ring_mapping_kept);
	tcase_add_test(tc, test_ring_park_bounded);
	tcase_add_test(tc, test_wait_spin_follows_waits);
	tcase_add_test(tc, test_cq_wait_learns);
	tcase_add_test(tc, test_cq_wait_daemon_gone);
	tcase_add_test(tc, test_cq_poll_daemon_gone);
	tcase_add_test(tc, test_cq_destroy);
	tcase_add_test(tc, test_cq_async_event);
	tcase_add_test(tc, test_cq_async_event_of_a_reused_handle);
	tcase_add_test(tc, test_cq_create_invalid);
	tcase_add_test(tc, test_cq_bad_ring);
	tcase_add_test(tc, test_cq_destroy_daemon_gone);
}

static void add_qp_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "qp", qp_setup, teardown);

	tcase_add_test(tc, test_qp_create);
	tcase_add_test(tc, test_qp_cqs_in_one_round_trip);
	tcase_add_test(tc, test_qp_cqs_all_or_nothing);
	tcase_add_test(tc, test_post_send_writes_wqes);
	tcase_add_test(tc, test_post_send_misaligned_sg_list);
	tcase_add_test(tc, test_post_send_full);
	tcase_add_test(tc, test_post_send_wraps);
	tcase_add_test(tc, test_post_send_bad_opcode);
	tcase_add_test(tc, test_post_send_too_many_sge);
	tcase_add_test(tc, test_post_recv);
	tcase_add_test(tc, test_post_recv_too_many_sge);
	tcase_add_test(tc, test_post_in_a_state_that_takes_none);
	tcase_add_test(tc, test_create_qp_reports_queue_sizes);
	tcase_add_test(tc, test_post_daemon_gone);
	tcase_add_test(tc, test_modify_without_grh);
	tcase_add_test(tc, test_modify_ipv6_gid);
	tcase_add_test(tc, test_modify_sends_attrs);
	tcase_add_test(tc, test_modify_refused);
	tcase_add_test(tc, test_batch_holds_four);
	tcase_add_test(tc, test_batch_stops_at_refusal);
	tcase_add_test(tc, test_batch_runs_whole);
	tcase_add_test(tc, test_create_qp_in_init);
	tcase_add_test(tc, test_batch_destroys_what_ran);
	tcase_add_test(tc, test_batch_destroys_whole);
	tcase_add_test(tc, test_batch_posted_when_sure);
	tcase_add_test(tc, test_batch_post_only_when_sure);
	tcase_add_test(tc, test_query_qp);
	tcase_add_test(tc, test_qp_bad_init_attr);
	tcase_add_test(tc, test_qp_destroy);
	tcase_add_test(tc, test_close_with_live_objects);
}

static Suite *lib_suite(void)
{
	Suite *s = suite_create("librocemu");

	add_open_tests(s);
	add_rpc_tests(s);
	add_arena_tests(s);
	add_cq_tests(s);
	add_qp_tests(s);
	return s;
}

int main(void)
{
	SRunner *runner = srunner_create(lib_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
