/* CQs and QPs: their rings in memfds shared with the client, their wakeup pipes, and the
 * daemon-wide QPN table. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

/* A doorbell or notification channel: a pipe, so the daemon's end is an open file of its
 * own that no client can make blocking (an eventfd would share its flags with the client).
 * ends[0] reads, ends[1] writes; the daemon's end is made non-blocking. */
static int channel_open(int ends[2], int daemon_end)
{
	if (pipe2(ends, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(ends[daemon_end], F_SETFL, O_NONBLOCK) < 0) {
		close(ends[0]);
		close(ends[1]);
		return -errno;
	}
	return 0;
}


/* A zeroed shared mapping of bytes in a new memfd; *fd receives the memfd. */
static void *ring_alloc(const char *name, size_t bytes, int *fd)
{
	void *map;

	/* sealed to its size: a client that could shrink it would make our next access SIGBUS */
	*fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0)
		return NULL;
	if (ftruncate(*fd, (off_t)bytes) < 0 ||
	    fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (map == MAP_FAILED)
		goto fail;
	return map;
fail:
	close(*fd);
	*fd = -1;
	return NULL;
}

struct cq *cq_create(struct owner *o, uint32_t cqe, int fds[2], int *err)
{
	struct cq *cq = calloc(1, sizeof(*cq));
	int ends[2] = { -1, -1 };
	void *map;

	if (!cq) {
		*err = -ENOMEM;
		return NULL;
	}
	cq->owner = o;
	cq->entries = pow2_at_least(cqe < 1 ? 1 : cqe);
	cq->ring_bytes = proto_ring_bytes(cq->entries, sizeof(struct proto_cqe));
	map = ring_alloc("rocemu-cq", cq->ring_bytes, &fds[0]);
	*err = map ? channel_open(ends, 1) : -errno;
	if (*err) {
		if (map)
			munmap(map, cq->ring_bytes);
		if (fds[0] >= 0)
			close(fds[0]);
		free(cq);
		return NULL;
	}
	cq->ctl = map;
	cq->ring = (struct proto_cqe *)(cq->ctl + 1);
	cq->notify_fd = ends[1];
	cq->client_end = ends[0];
	fds[1] = ends[0];
	return cq;
}

int cq_destroy(struct cq *cq)
{
	if (cq->users)
		return -EBUSY;
	if (cq->notify_pending)
		STAILQ_REMOVE(&cq->owner->dev->tp.notify_list, cq, cq, notify_link);
	munmap(cq->ctl, cq->ring_bytes);
	close(cq->notify_fd);
	close(cq->client_end);
	free(cq);
	return 0;
}

/* The client owns the consumer index: it is trusted only as far as it stays between what
 * was produced and one ring behind it. A CQ whose consumer lies counts as full. */
void cq_push(struct cq *cq, const struct proto_cqe *cqe)
{
	uint32_t prod = cq->ctl->prod;
	uint32_t cons = __atomic_load_n(&cq->ctl->cons, __ATOMIC_ACQUIRE);

	if (prod - cons >= cq->entries) {
		cq->owner->dev->cnt.cq_overflow++;
		if (!cq->overflowed)
			log_limited("client pid %d: CQ %u overflowed; completions lost",
				    (int)cq->owner->pid, cq->handle);
		cq->overflowed = true;
		return;
	}
	cq->ring[prod & (cq->entries - 1)] = *cqe;
	__atomic_store_n(&cq->ctl->prod, prod + 1, __ATOMIC_RELEASE);
	if (!cq->notify_pending) {
		cq->notify_pending = true;
		STAILQ_INSERT_TAIL(&cq->owner->dev->tp.notify_list, cq, notify_link);
	}
}

/* One wakeup write per CQ per loop iteration, however many completions it got. */
void cq_flush_notify(struct dev *dev)
{
	struct cq *cq;
	uint64_t one = 1;

	/* a full pipe (EAGAIN) already holds a wakeup the client has not read */
	while ((cq = STAILQ_FIRST(&dev->tp.notify_list))) {
		STAILQ_REMOVE_HEAD(&dev->tp.notify_list, notify_link);
		cq->notify_pending = false;
		(void)!write(cq->notify_fd, &one, sizeof(one));
	}
}

/* A shared receive queue: its ring, and a pipe for its limit event. */
struct srq *srq_create(struct owner *o, uint32_t max_wr, uint32_t limit, int fds[2],
		       int *err)
{
	struct srq *srq = calloc(1, sizeof(*srq));
	int ends[2] = { -1, -1 };
	void *map;

	if (!srq) {
		*err = -ENOMEM;
		return NULL;
	}
	srq->owner = o;
	srq->entries = pow2_at_least(max_wr);
	srq->limit = limit;
	srq->ring_bytes = proto_ring_bytes(srq->entries, sizeof(struct proto_rwqe));
	map = ring_alloc("rocemu-srq", srq->ring_bytes, &fds[0]);
	*err = map ? channel_open(ends, 1) : -errno;
	if (*err) {
		if (map)
			munmap(map, srq->ring_bytes);
		if (fds[0] >= 0)
			close(fds[0]);
		free(srq);
		return NULL;
	}
	srq->ctl = map;
	srq->ring = (struct proto_rwqe *)(srq->ctl + 1);
	srq->event_fd = ends[1];
	srq->client_end = ends[0];
	fds[1] = ends[0];
	return srq;
}

int srq_destroy(struct srq *srq)
{
	if (srq->users)
		return -EBUSY;
	munmap(srq->ctl, srq->ring_bytes);
	close(srq->event_fd);
	close(srq->client_end);
	free(srq);
	return 0;
}

static int qp_alloc_qpn(struct dev *dev, struct qp *qp)
{
	for (uint32_t tries = 0; tries < DEV_MAX_QP; tries++) {
		uint32_t slot = dev->tp.qp_cursor++ % DEV_MAX_QP;

		if (slot < 2 || dev->tp.qps[slot])
			continue;
		if (slot == 2)
			dev->tp.qp_generation++;
		qp->qpn = ((dev->tp.qp_generation & 0x3ff) << DEV_QP_SLOT_BITS) | slot;
		dev->tp.qps[slot] = qp;
		dev->tp.qp_count++;
		return 0;
	}
	return -ENOSPC;
}

struct qp *qp_find(struct dev *dev, uint32_t qpn)
{
	struct qp *qp = dev->tp.qps[qpn & (DEV_MAX_QP - 1)];

	return qp && qp->qpn == qpn ? qp : NULL;
}

static int qp_map_rings(struct qp *qp, const struct proto_create_qp *req, int *ring_fd)
{
	size_t sq_bytes, rq_bytes;

	qp->sq_entries = pow2_at_least(req->max_send_wr ? req->max_send_wr : 1);
	qp->rq_entries = pow2_at_least(req->max_recv_wr ? req->max_recv_wr : 1);
	sq_bytes = proto_ring_bytes(qp->sq_entries, sizeof(struct proto_swqe));
	rq_bytes = proto_ring_bytes(qp->rq_entries, sizeof(struct proto_rwqe));
	qp->ring_bytes = sq_bytes + rq_bytes;
	qp->ring_map = ring_alloc("rocemu-qp", qp->ring_bytes, ring_fd);
	qp->req.wqes = calloc(qp->sq_entries, sizeof(*qp->req.wqes));
	if (!qp->ring_map || !qp->req.wqes)
		return -ENOMEM;
	qp->sq_ctl = qp->ring_map;
	qp->sq = (struct proto_swqe *)(qp->sq_ctl + 1);
	qp->rq_ctl = (struct proto_ring_ctl *)((char *)qp->ring_map + sq_bytes);
	qp->rq = (struct proto_rwqe *)(qp->rq_ctl + 1);
	return 0;
}

static void qp_free(struct qp *qp, int ring_fd)
{
	if (qp->ring_map)
		munmap(qp->ring_map, qp->ring_bytes);
	if (ring_fd >= 0)
		close(ring_fd);
	if (qp->doorbell_fd >= 0)
		close(qp->doorbell_fd);
	if (qp->client_end >= 0)
		close(qp->client_end);
	free(qp->req.wqes);
	reply_free(qp);
	free(qp);
}

struct qp *qp_create(struct owner *o, const struct proto_create_qp *req, int fds[2],
		     int *err)
{
	struct qp *qp = calloc(1, sizeof(*qp));
	int ends[2] = { -1, -1 };
	int ring_fd = -1;

	if (!qp) {
		*err = -ENOMEM;
		return NULL;
	}
	qp->dev = o->dev;
	qp->owner = o;
	qp->type = (enum ibv_qp_type)req->qp_type;

	*err = channel_open(ends, 0);
	qp->doorbell_fd = ends[0];
	qp->client_end = ends[1];
	if (!*err)
		*err = qp_map_rings(qp, req, &ring_fd);
	if (!*err)
		*err = qp_alloc_qpn(o->dev, qp);
	if (*err) {
		qp_free(qp, ring_fd);
		return NULL;
	}
	qp->state = IBV_QPS_RESET;
	qp->sq_sig_all = req->sq_sig_all;
	ev_io_init(&qp->doorbell, req_doorbell_cb, qp->doorbell_fd, EV_READ);
	qp->doorbell.data = qp;
	ev_io_start(o->dev->loop, &qp->doorbell);
	ev_init(&qp->retry_timer, comp_timer_cb);
	qp->retry_timer.data = qp;
	ev_init(&qp->rnr_timer, req_rnr_cb);
	qp->rnr_timer.data = qp;
	ev_init(&qp->req.pace_timer, cc_pace_cb);
	qp->req.pace_timer.data = qp;
	qp_reset(qp);
	fds[0] = ring_fd;
	fds[1] = qp->client_end;
	return qp;
}

int qp_destroy(struct qp *qp)
{
	struct dev *dev = qp->dev;

	ev_io_stop(dev->loop, &qp->doorbell);
	ev_timer_stop(dev->loop, &qp->retry_timer);
	ev_timer_stop(dev->loop, &qp->rnr_timer);
	ev_timer_stop(dev->loop, &qp->req.pace_timer);
	sched_forget(qp);
	resp_cancel_ack(qp);
	dev->tp.qps[qp->qpn & (DEV_MAX_QP - 1)] = NULL;
	dev->tp.qp_count--;
	qp->send_cq->users--;
	qp->recv_cq->users--;
	if (qp->srq)
		qp->srq->users--;
	qp_free(qp, -1);
	return 0;
}
