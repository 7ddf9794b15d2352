/* Control request handlers: each checks every field the client sent before acting, and
 * names only the client's own objects (handles are per client). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/daemon/control/ctl.h"
#include "emu/daemon/log.h"

#define MAX_MR_SIZE (1ull << 40)
#define FEW_QUEUES 4

void op_error(struct ctl_reply *rep, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rep->u.r.errmsg, sizeof(rep->u.r.errmsg), fmt, ap);
	va_end(ap);
}

/* The client's object behind handle, or NULL with the reply saying which was missing. */
static void *find(const struct handle_table *t, uint32_t handle, const char *what,
		  struct ctl_reply *rep)
{
	void *item = handle_get(t, handle);

	if (!item)
		op_error(rep, "no %s %u", what, handle);
	return item;
}

/* The connection's event pipe (proto.h): its read end goes with the reply, and a hello
 * said again replaces it. 0 or -errno. */
static int open_event_pipe(struct client *c, struct ctl_reply *rep)
{
	int ends[2];

	if (pipe2(ends, O_NONBLOCK | O_CLOEXEC) < 0) {
		int err = errno;

		op_error(rep, "no event pipe: %s", strerror(err));
		return -err;
	}
	if (c->own.async_fd >= 0)
		close(c->own.async_fd);
	c->own.async_fd = ends[1];
	rep->fds[0] = ends[0];
	rep->nfds = 1;
	rep->fds_given = true;
	return 0;
}

int op_hello(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_hello_reply *r = REP(proto_hello_reply);
	int rc;

	if (REQ(proto_hello)->version != PROTO_VERSION) {
		op_error(rep, "protocol version %u, this rocemud speaks %u: rebuild against "
			 "the same rocemu", REQ(proto_hello)->version, PROTO_VERSION);
		return -EPROTO;
	}
	if ((rc = open_event_pipe(c, rep)) < 0)
		return rc;
	r->version = PROTO_VERSION;
	r->max_qp = DEV_MAX_QP - 2;
	r->max_qp_wr = PROTO_MAX_RING;
	r->max_cqe = PROTO_MAX_RING;
	r->max_mr = MR_MAX_REGIONS;
	r->max_sge = PROTO_MAX_SGE;
	r->max_mr_size = MAX_MR_SIZE;
	r->pin_limit = c->pin_cap;
	r->max_qp_rd_atom = QP_MAX_RD_ATOMIC;
	/* every atomic runs on the daemon's one thread with the CPU's atomic instructions,
	 * so it is atomic against every other QP and against the owning process */
	r->atomic_cap = IBV_ATOMIC_GLOB;
	r->max_srq = CLIENT_MAX_QUEUES;
	r->max_srq_wr = PROTO_MAX_RING;
	r->max_inline_data = PROTO_MAX_INLINE;
	return 0;
}

int op_query_port(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_port_reply *r = REP(proto_port_reply);
	struct dev *dev = c->own.dev;

	(void)req;
	r->state = net_link_up(&dev->port) ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	r->max_mtu = dev->port.max_mtu;
	r->active_mtu = dev->port.active_mtu;
	r->ipv4 = dev->port.ipv4;
	snprintf(r->ifname, sizeof(r->ifname), "%s", dev->port.ifname);
	memcpy(r->mac, dev->port.mac, sizeof(r->mac));
	r->ngids = dev->port.ngids;
	for (unsigned i = 0; i < dev->port.ngids; i++)
		memcpy(r->gids[i], dev->port.gids[i].raw, 16);
	return 0;
}

int op_alloc_pd(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct mr_pd *pd = mr_pd_alloc(c->mrc);
	int rc;

	(void)req;
	if (!pd)
		return -ENOMEM;
	rc = handle_add(&c->pds, pd, &REP(proto_handle_reply)->handle);
	if (rc)
		mr_pd_dealloc(pd);
	return rc;
}

static bool pd_has_qps(struct client *c, struct mr_pd *pd)
{
	for (uint32_t h = 1; h < c->qps.cap; h++) {
		struct qp *qp = c->qps.items[h];

		if (qp && qp->pd == pd)
			return true;
	}
	return false;
}

int op_dealloc_pd(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct mr_pd *pd = find(&c->pds, h, "PD", rep);
	int rc;

	if (!pd)
		return -EINVAL;
	if (pd_has_qps(c, pd) || ah_pd_has_any(c, pd)) {
		op_error(rep, "PD %u still has QPs or address handles", h);
		return -EBUSY;
	}
	rc = mr_pd_dealloc(pd);
	if (rc) {
		op_error(rep, "PD %u still has memory regions", h);
		return rc;
	}
	handle_del(&c->pds, h);
	return 0;
}

/* The memory comes as a memfd the client cannot shrink under us: a shrink would turn our
 * next copy into SIGBUS. */
static int check_mr_fd(int fd, struct ctl_reply *rep)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		op_error(rep, "memory must come as a memfd sealed with F_SEAL_SHRINK");
		return -EINVAL;
	}
	return 0;
}

/* The memfd a REG_MR maps: the one it carries, or the one the connection holds when the
 * request names its inode (the library registers everything from one memfd, so only its
 * first registration needs to carry it). */
static int reg_mr_memfd(const struct client *c, int fd, uint64_t ino, struct ctl_reply *rep)
{
	if (fd >= 0)
		return check_mr_fd(fd, rep) ? -EINVAL : fd;
	if (c->memfd >= 0 && ino == c->memfd_ino)
		return c->memfd;
	op_error(rep, "no memfd of inode %llu was handed over on this connection: send it "
		 "with the request", (unsigned long long)ino);
	return -ESTALE;
}

/* Keeps a memfd a registration mapped, for the next ones to name. */
static void hold_memfd(struct client *c, int fd)
{
	struct stat st;
	int kept;

	if (fstat(fd, &st) != 0 || (kept = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return;     /* the next registration carries it again */
	if (c->memfd >= 0)
		close(c->memfd);
	c->memfd = kept;
	c->memfd_ino = st.st_ino;
}

static void explain_reg_error(struct ctl_reply *rep, int rc, uint64_t length)
{
	switch (rc) {
	case -ENOMEM:
	case -EPERM:
		op_error(rep, "cannot pin %llu bytes: rocemud's RLIMIT_MEMLOCK is too low "
			 "(raise LimitMEMLOCK or ulimit -l)", (unsigned long long)length);
		break;
	case -EACCES:
		op_error(rep, "cannot map the memory writable: the memfd is read-only or "
			 "sealed against writes");
		break;
	case -EDQUOT:
		op_error(rep, "pinning %llu more bytes exceeds this client's limit "
			 "(its RLIMIT_MEMLOCK)", (unsigned long long)length);
		break;
	case -ENOSPC:
		op_error(rep, "no free memory region: %u are registered", MR_MAX_REGIONS);
		break;
	default:
		op_error(rep, "cannot register: %s", strerror(-rc));
	}
}

int op_reg_mr(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_reg_mr *m = REQ(proto_reg_mr);
	struct proto_reg_mr_reply *r = REP(proto_reg_mr_reply);
	struct mr_pd *pd = find(&c->pds, m->pd, "PD", rep);
	struct mr *mr;
	int memfd, rc;

	if (!pd)
		return -EINVAL;
	if (m->length == 0 || m->length > MAX_MR_SIZE || m->fd_offset > INT64_MAX) {
		op_error(rep, "length %llu is not between 1 and 2^40",
			 (unsigned long long)m->length);
		return -EINVAL;
	}
	memfd = reg_mr_memfd(c, req->fd, m->memfd_ino, rep);
	if (memfd < 0)
		return memfd;
	rc = mr_reg_fd(pd, memfd, (off_t)m->fd_offset, m->length, m->iova, (int)m->access, &mr);
	if (rc) {
		explain_reg_error(rep, rc, m->length);
		return rc;
	}
	rc = handle_add(&c->mrs, mr, &r->handle);
	if (rc) {
		mr_dereg(mr);
		return rc;
	}
	if (req->fd >= 0)
		hold_memfd(c, req->fd);
	r->lkey = mr_keys(mr).lkey;
	r->rkey = mr_keys(mr).rkey;
	return 0;
}

int op_dereg_mr(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct mr *mr = find(&c->mrs, h, "MR", rep);

	if (!mr)
		return -EINVAL;
	if (mr_dereg_check(mr)) {
		op_error(rep, "MR %u has memory windows bound to it", h);
		return -EINVAL;
	}
	handle_del(&c->mrs, h);
	return mr_dereg(mr);
}

/* The request's new translation: present exactly when asked for, and as REG_MR's. */
static int check_rereg_memory(const struct proto_rereg_mr *m, int fd, struct ctl_reply *rep)
{
	bool moves = m->flags & IBV_REREG_MR_CHANGE_TRANSLATION;

	if (moves != (fd >= 0)) {
		op_error(rep, "a memfd comes with IBV_REREG_MR_CHANGE_TRANSLATION and only then");
		return -EPROTO;
	}
	if (!moves)
		return 0;
	if (m->length == 0 || m->length > MAX_MR_SIZE || m->fd_offset > INT64_MAX) {
		op_error(rep, "length %llu is not between 1 and 2^40",
			 (unsigned long long)m->length);
		return -EINVAL;
	}
	return check_mr_fd(fd, rep);
}

/* memreg's -EINVAL: no flag, or one of the parts asked for (each named here) refused: a PD
 * of another client, an access an MR cannot have, a range not at the iova's page offset. */
static void explain_rereg_inval(struct ctl_reply *rep, const struct proto_rereg_mr *m)
{
	char access[24] = "", range[64] = "";

	if (!m->flags) {
		op_error(rep, "no IBV_REREG_MR_CHANGE_* flag given");
		return;
	}
	if (m->flags & IBV_REREG_MR_CHANGE_ACCESS)
		snprintf(access, sizeof(access), " access %#x", m->access);
	if (m->flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		snprintf(range, sizeof(range), " iova %#llx (+%llu)", (unsigned long long)m->iova,
			 (unsigned long long)m->length);
	op_error(rep, "MR %u cannot take%s%s%s", m->handle,
		 m->flags & IBV_REREG_MR_CHANGE_PD ? " that PD" : "", access, range);
}

static void explain_rereg_error(struct ctl_reply *rep, int rc, const struct proto_rereg_mr *m)
{
	switch (rc) {
	case -EBUSY:
		op_error(rep, "MR %u has memory windows bound to it", m->handle);
		break;
	case -EOPNOTSUPP:
		op_error(rep, "rereg flags %#x: only IBV_REREG_MR_CHANGE_TRANSLATION, _PD and "
			 "_ACCESS", m->flags);
		break;
	case -EINVAL:
		explain_rereg_inval(rep, m);
		break;
	default:
		explain_reg_error(rep, rc, m->length);
	}
}

int op_rereg_mr(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_rereg_mr *m = REQ(proto_rereg_mr);
	struct proto_reg_mr_reply *r = REP(proto_reg_mr_reply);
	struct mr_rereg change = { .flags = (int)m->flags, .access = (int)m->access,
				   .len = m->length, .iova = m->iova };
	struct mr *mr = find(&c->mrs, m->handle, "MR", rep);
	int rc;

	if (!mr)
		return -EINVAL;
	if ((m->flags & IBV_REREG_MR_CHANGE_PD) &&
	    !(change.pd = find(&c->pds, m->pd, "PD", rep)))
		return -EINVAL;
	rc = check_rereg_memory(m, req->fd, rep);
	if (rc)
		return rc;
	rc = mr_rereg_fd(mr, &change, req->fd, (off_t)m->fd_offset);
	if (rc) {
		explain_rereg_error(rep, rc, m);
		return rc;
	}
	r->handle = m->handle;
	r->lkey = mr_keys(mr).lkey;
	r->rkey = mr_keys(mr).rkey;
	return 0;
}

int op_alloc_mw(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_alloc_mw *m = REQ(proto_alloc_mw);
	struct proto_alloc_mw_reply *r = REP(proto_alloc_mw_reply);
	struct mr_pd *pd = find(&c->pds, m->pd, "PD", rep);
	struct mr_mw *mw;
	int rc;

	if (!pd)
		return -EINVAL;
	rc = mr_mw_alloc(pd, (int)m->type, &mw);
	if (rc == -EINVAL)
		op_error(rep, "memory window type %u: only 1 and 2", m->type);
	else if (rc == -ENOSPC)
		op_error(rep, "no free key: %u MRs and MWs exist", MR_MAX_REGIONS);
	if (rc)
		return rc;
	rc = handle_add(&c->mws, mw, &r->handle);
	if (rc) {
		mr_mw_dealloc(mw);
		return rc;
	}
	r->rkey = mr_mw_rkey(mw);
	return 0;
}

int op_dealloc_mw(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct mr_mw *mw = find(&c->mws, h, "MW", rep);

	if (!mw)
		return -EINVAL;
	handle_del(&c->mws, h);
	mr_mw_dealloc(mw);
	return 0;
}

long ctl_free_descriptors(void)
{
	struct rlimit rl;
	DIR *d = opendir("/proc/self/fd");
	long open_fds = 0;

	while (d && readdir(d))
		open_fds++;
	if (d)
		closedir(d);
	if (!d || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return LONG_MAX;
	return (long)rl.rlim_cur - open_fds;
}

/* Each CQ and QP costs two descriptors. No connection may hold more than
 * CLIENT_MAX_QUEUES, and the last FD_RESERVE descriptors go only to connections that
 * hold few queues: one greedy client cannot lock every other out. */
static bool too_many_queues(struct client *c, struct ctl_reply *rep)
{
	uint32_t held = c->cqs.count + c->qps.count + c->srqs.count;

	if (held >= CLIENT_MAX_QUEUES) {
		op_error(rep, "this connection holds %u CQs, SRQs and QPs already, the most it may",
			 CLIENT_MAX_QUEUES);
		return true;
	}
	if (held >= FEW_QUEUES && ctl_free_descriptors() < FD_RESERVE) {
		op_error(rep, "rocemud is short of file descriptors (raise its LimitNOFILE); "
			 "this connection holds %u CQs and QPs", held);
		return true;
	}
	return false;
}

/* A CQ of cqe entries, listed; its ring's memfd and pipe end in fds[0] and fds[1]. */
static struct cq *make_cq(struct client *c, uint32_t cqe, int fds[2], struct ctl_reply *rep,
			  int *rc)
{
	struct cq *cq;

	if (cqe < 1 || cqe > PROTO_MAX_RING) {
		op_error(rep, "a CQ holds 1 to %u entries, not %u", PROTO_MAX_RING, cqe);
		*rc = -EINVAL;
		return NULL;
	}
	if (too_many_queues(c, rep)) {
		*rc = -EDQUOT;
		return NULL;
	}
	cq = cq_create(&c->own, cqe, fds, rc);
	if (!cq) {
		op_error(rep, "cannot create a CQ: %s", strerror(-*rc));
		return NULL;
	}
	*rc = handle_add(&c->cqs, cq, &cq->handle);
	if (*rc) {
		cq_destroy(cq);
		return NULL;
	}
	return cq;
}

static void unmake_cq(struct client *c, struct cq *cq)
{
	uint32_t h = cq->handle;

	if (cq_destroy(cq) == 0)
		handle_del(&c->cqs, h);
}

int op_create_cq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_create_cq_reply *r = REP(proto_create_cq_reply);
	int rc;
	struct cq *cq = make_cq(c, REQ(proto_create_cq)->cqe, rep->fds, rep, &rc);

	if (!cq)
		return rc;
	r->handle = cq->handle;
	r->entries = cq->entries;
	r->ring_bytes = cq->ring_bytes;
	rep->nfds = 2;
	return 0;
}

/* What the client posted before it asked, taken first: its doorbells and this request
 * come on two channels the loop may read in either order, and a UD send completes as it
 * goes, so the CQ holds its completion before it is resized (as on rxe). */
static void take_posted(struct client *c, const struct cq *cq)
{
	for (uint32_t h = 1; h < c->qps.cap; h++) {
		struct qp *qp = c->qps.items[h];

		if (qp && (qp->send_cq == cq || qp->recv_cq == cq))
			req_pump(qp);
	}
}

int op_resize_cq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_resize_cq *m = REQ(proto_resize_cq);
	struct proto_create_cq_reply *r = REP(proto_create_cq_reply);
	struct cq *cq = find(&c->cqs, m->handle, "CQ", rep);
	int rc;

	if (!cq)
		return -EINVAL;
	if (m->cqe < 1 || m->cqe > PROTO_MAX_RING) {
		op_error(rep, "a CQ holds 1 to %u entries, not %u", PROTO_MAX_RING, m->cqe);
		return -EINVAL;
	}
	take_posted(c, cq);
	rc = cq_resize(cq, m->cqe, &rep->fds[0]);
	if (rc == -EINVAL)
		op_error(rep, "CQ %u holds more completions than %u entries", m->handle, m->cqe);
	else if (rc)
		op_error(rep, "cannot resize CQ %u: %s", m->handle, strerror(-rc));
	if (rc)
		return rc;
	r->handle = cq->handle;
	r->entries = cq->entries;
	r->ring_bytes = cq->ring_bytes;
	rep->nfds = 1;
	return 0;
}

int op_destroy_cq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct cq *cq = find(&c->cqs, h, "CQ", rep);
	int rc;

	if (!cq)
		return -EINVAL;
	rc = cq_destroy(cq);
	if (rc) {
		op_error(rep, "CQ %u is still used by QPs", h);
		return rc;
	}
	handle_del(&c->cqs, h);
	return 0;
}

int op_create_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_create_srq *m = REQ(proto_create_srq);
	struct proto_create_srq_reply *r = REP(proto_create_srq_reply);
	struct srq *srq;
	int rc;

	if (!handle_get(&c->pds, m->pd)) {
		op_error(rep, "unknown PD %u", m->pd);
		return -EINVAL;
	}
	if (m->max_wr < 1 || m->max_wr > PROTO_MAX_RING || m->srq_limit > m->max_wr) {
		op_error(rep, "an SRQ holds 1 to %u WQEs and its limit is at most that, not %u "
			 "and %u", PROTO_MAX_RING, m->max_wr, m->srq_limit);
		return -EINVAL;
	}
	if (m->max_sge > PROTO_MAX_SGE) {
		op_error(rep, "an SRQ's WQEs hold at most %u SGEs, not %u", PROTO_MAX_SGE,
			 m->max_sge);
		return -EINVAL;
	}
	if (too_many_queues(c, rep))
		return -EDQUOT;
	srq = srq_create(&c->own, m, rep->fds, &rc);
	if (!srq) {
		op_error(rep, "cannot create an SRQ: %s", strerror(-rc));
		return rc;
	}
	rc = handle_add(&c->srqs, srq, &srq->handle);
	if (rc) {
		srq_destroy(srq);
		return rc;
	}
	r->handle = srq->handle;
	r->entries = srq->entries;
	r->ring_bytes = srq->ring_bytes;
	rep->nfds = 2;
	return 0;
}

/* Only the limit may change (arm it again after the event, or disarm it with 0). */
int op_modify_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_modify_srq *m = REQ(proto_modify_srq);
	struct srq *srq = find(&c->srqs, m->handle, "SRQ", rep);

	if (!srq)
		return -EINVAL;
	if (m->attr_mask & ~(uint32_t)IBV_SRQ_LIMIT) {
		op_error(rep, "an SRQ's size cannot change (attr_mask 0x%x): only IBV_SRQ_LIMIT",
			 m->attr_mask);
		return -EINVAL;
	}
	if ((m->attr_mask & IBV_SRQ_LIMIT) && m->srq_limit > srq->entries) {
		op_error(rep, "limit %u is above the SRQ's %u WQEs", m->srq_limit, srq->entries);
		return -EINVAL;
	}
	if (m->attr_mask & IBV_SRQ_LIMIT)
		srq->limit = m->srq_limit;
	return 0;
}

int op_query_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct srq *srq = find(&c->srqs, h, "SRQ", rep);
	struct proto_query_srq_reply *r = REP(proto_query_srq_reply);

	if (!srq)
		return -EINVAL;
	r->max_wr = srq->entries;
	r->srq_limit = srq->limit;
	return 0;
}

int op_destroy_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct srq *srq = find(&c->srqs, h, "SRQ", rep);
	int rc;

	if (!srq)
		return -EINVAL;
	rc = srq_destroy(srq);
	if (rc) {
		op_error(rep, "SRQ %u is still used by QPs", h);
		return rc;
	}
	handle_del(&c->srqs, h);
	return 0;
}

static int check_create_qp(struct client *c, const struct proto_create_qp *m,
			   struct ctl_reply *rep)
{
	if (!handle_get(&c->pds, m->pd) || !handle_get(&c->cqs, m->send_cq) ||
	    !handle_get(&c->cqs, m->recv_cq)) {
		op_error(rep, "unknown PD or CQ");
		return -EINVAL;
	}
	if (m->srq && !handle_get(&c->srqs, m->srq)) {
		op_error(rep, "unknown SRQ %u", m->srq);
		return -EINVAL;
	}
	if (m->qp_type != IBV_QPT_RC && m->qp_type != IBV_QPT_UC && m->qp_type != IBV_QPT_UD) {
		op_error(rep, "QP type %u: rocemu has RC (2), UC (3) and UD (4) QPs", m->qp_type);
		return -EINVAL;
	}
	/* 0 is a queue that takes nothing (qperf's receiving end asks for no sends): rxe and
	 * mlx5 make one, and so does this, one entry deep, as a device may give more */
	if (m->max_send_wr > PROTO_MAX_RING || m->max_recv_wr > PROTO_MAX_RING) {
		op_error(rep, "queue depths go up to %u", PROTO_MAX_RING);
		return -EINVAL;
	}
	if (m->max_send_sge > PROTO_MAX_SGE || m->max_recv_sge > PROTO_MAX_SGE ||
	    m->max_inline_data > PROTO_MAX_INLINE) {
		op_error(rep, "max_send_sge %u, max_recv_sge %u, max_inline_data %u: at most %u, "
			 "%u and %u", m->max_send_sge, m->max_recv_sge, m->max_inline_data,
			 PROTO_MAX_SGE, PROTO_MAX_SGE, PROTO_MAX_INLINE);
		return -EINVAL;
	}
	/* a change with an address may wait for a neighbour: only RESET to INIT comes along */
	if (m->init_mask && (!(m->init_mask & IBV_QP_STATE) || m->init.state != IBV_QPS_INIT ||
			     (m->init_mask & IBV_QP_AV))) {
		op_error(rep, "a QP's change at creation goes to INIT, without an address "
			 "(mask 0x%x, state %u)", m->init_mask, m->init.state);
		return -EINVAL;
	}
	return 0;
}

/* The QP made and listed, taken to INIT as CREATE_QP asked; refused, it is undone. */
static int create_qp_init(struct client *c, struct qp *qp, const struct proto_create_qp *m,
			  struct ctl_reply *rep)
{
	int rc;

	if (!m->init_mask)
		return 0;
	rc = qp_modify(qp, m->init_mask, &m->init, rep->u.r.errmsg, sizeof(rep->u.r.errmsg));
	if (rc) {
		handle_del(&c->qps, qp->handle);
		qp_destroy(qp);
	}
	return rc;
}

int op_create_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_create_qp *m = REQ(proto_create_qp);
	struct proto_create_qp_reply *r = REP(proto_create_qp_reply);
	struct qp *qp;
	int rc = check_create_qp(c, m, rep);

	if (rc)
		return rc;
	if (too_many_queues(c, rep))
		return -EDQUOT;
	qp = qp_create(&c->own, m, rep->fds, &rc);
	if (!qp) {
		op_error(rep, "cannot create a QP: %s",
			 rc == -ENOSPC ? "no free QP number" : strerror(-rc));
		return rc;
	}
	qp->pd = handle_get(&c->pds, m->pd);
	qp->send_cq = handle_get(&c->cqs, m->send_cq);
	qp->recv_cq = handle_get(&c->cqs, m->recv_cq);
	qp->send_cq->users++;
	qp->recv_cq->users++;
	qp->srq = m->srq ? handle_get(&c->srqs, m->srq) : NULL;
	if (qp->srq)
		qp->srq->users++;
	rc = handle_add(&c->qps, qp, &qp->handle);
	if (rc) {
		qp_destroy(qp);
		return rc;
	}
	rc = create_qp_init(c, qp, m, rep);
	if (rc)
		return rc;
	r->handle = qp->handle;
	r->qpn = qp->qpn;
	r->sq_entries = qp->sq_entries;
	r->rq_entries = qp->rq_entries;
	r->ring_bytes = qp->ring_bytes;
	r->rq_offset = (uint64_t)((char *)qp->rq_ctl - (char *)qp->ring_map);
	r->max_send_sge = qp->max_send_sge;
	r->max_recv_sge = qp->max_recv_sge;
	r->max_inline_data = qp->max_inline;
	rep->nfds = 2;
	return 0;
}

static struct proto_cq_made cq_made(const struct cq *cq)
{
	return (struct proto_cq_made){ .handle = cq->handle, .entries = cq->entries,
				       .ring_bytes = cq->ring_bytes };
}

int op_create_qp_cqs(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_create_qp_cqs *m = REQ(proto_create_qp_cqs);
	struct proto_create_qp_cqs_reply *r = REP(proto_create_qp_cqs_reply);
	struct proto_create_qp qp = m->qp;
	struct ctl_request qp_req = { (const uint8_t *)&qp, -1 };
	struct cq *recv_cq, *send_cq = NULL;
	int rc;

	recv_cq = make_cq(c, m->recv_cqe, &rep->fds[2], rep, &rc);
	if (recv_cq)
		send_cq = make_cq(c, m->send_cqe, &rep->fds[4], rep, &rc);
	if (send_cq) {
		qp.recv_cq = recv_cq->handle;
		qp.send_cq = send_cq->handle;
		rc = op_create_qp(c, &qp_req, rep);
	}
	if (rc) {
		if (send_cq)
			unmake_cq(c, send_cq);
		if (recv_cq)
			unmake_cq(c, recv_cq);
		return rc;
	}
	r->recv_cq = cq_made(recv_cq);
	r->send_cq = cq_made(send_cq);
	rep->nfds = 6;
	return 0;
}

int op_modify_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_modify_qp *m = REQ(proto_modify_qp);
	struct qp *qp = find(&c->qps, m->handle, "QP", rep);

	if (!qp)
		return -EINVAL;
	return qp_modify(qp, m->attr_mask, &m->attr, rep->u.r.errmsg, sizeof(rep->u.r.errmsg));
}

int op_query_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct qp *qp = find(&c->qps, h, "QP", rep);
	struct proto_query_qp_reply *r = REP(proto_query_qp_reply);

	if (!qp)
		return -EINVAL;
	r->attr = qp->attr;
	r->attr.state = qp->state;
	r->attr.sq_psn = qp->req.snd_nxt;
	r->attr.rq_psn = qp->resp.rcv_psn;
	return 0;
}

int op_destroy_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t h = REQ(proto_handle)->handle;
	struct qp *qp = find(&c->qps, h, "QP", rep);

	if (!qp)
		return -EINVAL;
	/* as the kernel's uverbs: a QP still in a multicast group is the program's to detach
	 * (a client that dies has its QPs detached for it) */
	if (qp->mcast_groups) {
		op_error(rep, "QP 0x%06x is still attached to %u multicast group(s): "
			 "ibv_detach_mcast first", qp->qpn, qp->mcast_groups);
		return -EBUSY;
	}
	handle_del(&c->qps, h);
	return qp_destroy(qp);
}

int op_create_ah(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_handle_reply *r = REP(proto_handle_reply);
	int rc;
	struct ah *ah = ah_create(c, REQ(proto_create_ah), &rc, rep->u.r.errmsg,
				  sizeof(rep->u.r.errmsg));

	if (!ah)
		return rc;
	r->handle = ah->handle;
	return 0;
}

int op_destroy_ah(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct ah *ah = find(&c->ahs, REQ(proto_handle)->handle, "address handle", rep);

	if (!ah)
		return -EINVAL;
	ah_destroy(ah);
	return 0;
}

int op_attach_mcast(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_mcast *m = REQ(proto_mcast);
	struct qp *qp = find(&c->qps, m->qp, "QP", rep);

	if (!qp)
		return -EINVAL;
	return attach_qp(qp, m->gid, rep->u.r.errmsg, sizeof(rep->u.r.errmsg));
}

int op_detach_mcast(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_mcast *m = REQ(proto_mcast);
	struct qp *qp = find(&c->qps, m->qp, "QP", rep);

	if (!qp)
		return -EINVAL;
	return attach_detach(qp, m->gid, rep->u.r.errmsg, sizeof(rep->u.r.errmsg));
}
