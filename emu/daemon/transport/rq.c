/* The receive queue of a QP (RC and UC, and UD the same way for its one-packet messages), as the
 * responder uses it: the WQE at the head is copied out
 * when a message needs one (SEND_FIRST or _ONLY, the last packet of a WRITE WITH IMMEDIATE),
 * a SEND's payload is scattered through its SGEs packet by packet, and it leaves the ring
 * only when it completes, as rxe does without an SRQ; a QP on a shared receive queue takes
 * the SRQ's head instead. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

/* Slots hold the WQE's fixed fields and the SGEs the queue was made for: only those are
 * copied, and a WQE claiming more is refused by rq_take. */
static const struct proto_rwqe *rq_head(struct qp *qp)
{
	return (const struct proto_rwqe *)(qp->rq + (size_t)(qp->resp.rq_cons & (qp->rq_entries - 1)) *
					   qp->rq_stride);
}

/* An SRQ's head is copied out and consumed at once, as rxe does (another QP may take the
 * next one before this message completes); when the WQEs left fall below the armed limit,
 * the limit is cleared and the client's event pipe gets a byte: verbs'
 * IBV_EVENT_SRQ_LIMIT_REACHED. The producer index is the client's: more than a ring ahead
 * of what was taken is a lie. */
static int srq_take(struct srq *srq, struct proto_rwqe *out)
{
	uint32_t prod = __atomic_load_n(&srq->ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t one = 1;

	if (prod - srq->cons > srq->entries) {
		log_limited("client pid %d: SRQ %u ring index %u is beyond the ring",
			    (int)srq->owner->pid, srq->handle, prod);
		return -EPROTO;
	}
	if (prod == srq->cons)
		return -EAGAIN;
	memcpy(out, srq->ring + (size_t)(srq->cons & (srq->entries - 1)) * srq->stride,
	       srq->stride);
	srq->cons++;
	__atomic_store_n(&srq->ctl->cons, srq->cons, __ATOMIC_RELEASE);
	if (srq->limit && prod - srq->cons < srq->limit) {
		srq->limit = 0;
		/* a full pipe already holds an event the client has not read */
		(void)!write(srq->event_fd, &one, sizeof(one));
	}
	return 0;
}

/* The head of the QP's own ring, copied out and left in the ring until it completes. */
static int own_take(struct qp *qp, struct proto_rwqe *out)
{
	uint32_t prod = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);

	if (prod - qp->resp.rq_cons > qp->rq_entries) {
		log_limited("client pid %d: QP 0x%06x receive ring index %u is beyond the ring",
			    (int)qp->owner->pid, qp->qpn, prod);
		return -EPROTO;
	}
	if (prod == qp->resp.rq_cons)
		return -EAGAIN;
	memcpy(out, rq_head(qp), qp->rq_stride);
	return 0;
}

int rq_take(struct qp *qp)
{
	struct recv_wqe *r = &qp->resp.recv;
	int rc;

	if (qp->resp.recv_held)
		return 0;
	/* copied once: the client cannot change it between the checks and the use */
	rc = qp->srq ? srq_take(qp->srq, &r->wqe) : own_take(qp, &r->wqe);
	if (rc)
		return rc;
	qp->resp.recv_held = true;
	r->placed = 0;
	r->length = 0;
	if (r->wqe.num_sge > (qp->srq ? qp->srq->max_sge : qp->max_recv_sge)) {
		r->wqe.num_sge = 0;
		return -EINVAL;
	}
	for (uint32_t i = 0; i < r->wqe.num_sge; i++)
		r->length += r->wqe.sge[i].length;
	return 0;
}

/* n bytes at the held WQE's current offset; none without a held WQE (the last one,
 * completed, belongs to the application again). */
int rq_scatter(struct qp *qp, const uint8_t *data, size_t n)
{
	struct recv_wqe *r = &qp->resp.recv;
	int rc;

	if (!qp->resp.recv_held)
		return -EPROTO;
	if (n > r->length - r->placed)
		return -ERANGE;
	rc = sgl_scatter(qp, r->wqe.sge, r->wqe.num_sge, r->placed, data, n);
	if (rc == 0)
		r->placed += n;
	return rc;
}

/* Whatever of the dropped message was scattered into the WQE's buffers will be written
 * over by the next message, which starts again at its first byte. */
void rq_rewind(struct qp *qp)
{
	qp->resp.recv.placed = 0;
}

/* No receive WQE held, and nothing of the last one kept to write through. */
void rq_forget(struct qp *qp)
{
	qp->resp.recv_held = false;
	memset(&qp->resp.recv, 0, sizeof(qp->resp.recv));
}

/* Taking the flag back is followed by a full fence: a post that still saw it is then in
 * the producer index that rq_flush reads next (proto.h). */
void rq_lazy(struct qp *qp, bool lazy)
{
	if (lazy) {
		__atomic_fetch_or(&qp->rq_ctl->cons_flags, PROTO_RING_LAZY, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_and(&qp->rq_ctl->cons_flags, ~PROTO_RING_LAZY, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* The held WQE leaves the ring (an SRQ's left it when taken) and its completion is
 * published. */
void rq_complete(struct qp *qp, struct proto_cqe *cqe)
{
	cqe->wr_id = qp->resp.recv.wqe.wr_id;
	cqe->qp_num = qp->qpn;
	if (qp->type != IBV_QPT_UD)
		cqe->src_qp = qp->attr.dest_qpn;   /* a UD datagram names its own in the DETH */
	rq_forget(qp);
	if (!qp->srq) {
		qp->resp.rq_cons++;
		__atomic_store_n(&qp->rq_ctl->cons, qp->resp.rq_cons, __ATOMIC_RELEASE);
	}
	cq_push(qp->recv_cq, cqe);
}

/* Everything the QP's own ring holds completes as flushed; of an SRQ, only the WQE this
 * QP took: the rest belongs to the other QPs as much as to this one. */
void rq_flush(struct qp *qp)
{
	uint32_t prod = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);

	if (qp->srq) {
		if (qp->resp.recv_held)
			rq_complete(qp, &(struct proto_cqe){ .status = IBV_WC_WR_FLUSH_ERR,
							     .opcode = IBV_WC_RECV });
		return;
	}
	rq_forget(qp);
	if (prod - qp->resp.rq_cons > qp->rq_entries)
		prod = qp->resp.rq_cons;
	while (qp->resp.rq_cons != prod) {
		struct proto_cqe cqe = { .wr_id = rq_head(qp)->wr_id, .status = IBV_WC_WR_FLUSH_ERR,
					 .opcode = IBV_WC_RECV, .qp_num = qp->qpn };

		qp->resp.rq_cons++;
		__atomic_store_n(&qp->rq_ctl->cons, qp->resp.rq_cons, __ATOMIC_RELEASE);
		cq_push(qp->recv_cq, &cqe);
	}
}
