/* The receive queue of an RC QP, as the responder uses it: the WQE at the head is copied out
 * when a message needs one (SEND_FIRST or _ONLY, the last packet of a WRITE WITH IMMEDIATE),
 * a SEND's payload is scattered through its SGEs packet by packet, and it leaves the ring
 * only when it completes, as rxe does without an SRQ. */
#include <errno.h>
#include <string.h>

#include "emu/daemon/daemon.h"

static struct proto_rwqe *rq_head(struct qp *qp)
{
	return &qp->rq[qp->rq_cons & (qp->rq_entries - 1)];
}

int rq_take(struct qp *qp)
{
	uint32_t prod = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);
	struct recv_wqe *r = &qp->recv;

	if (qp->recv_held)
		return 0;
	if (prod - qp->rq_cons > qp->rq_entries) {
		log_limited("client pid %d: QP 0x%06x receive ring index %u is beyond the ring",
			    (int)qp->client->pid, qp->qpn, prod);
		return -EPROTO;
	}
	if (prod == qp->rq_cons)
		return -EAGAIN;
	/* copied once: the client cannot change it between the checks and the use */
	memcpy(&r->wqe, rq_head(qp), sizeof(r->wqe));
	qp->recv_held = true;
	r->placed = 0;
	r->length = 0;
	if (r->wqe.num_sge > PROTO_MAX_SGE)
		return -EINVAL;
	for (uint32_t i = 0; i < r->wqe.num_sge; i++)
		r->length += r->wqe.sge[i].length;
	return 0;
}

/* n bytes at the held WQE's current offset. */
int rq_scatter(struct qp *qp, const uint8_t *data, size_t n)
{
	struct recv_wqe *r = &qp->recv;
	int rc;

	if (r->wqe.num_sge > PROTO_MAX_SGE || n > r->length - r->placed)
		return -ERANGE;
	rc = sgl_scatter(qp, r->wqe.sge, r->wqe.num_sge, r->placed, data, n);
	if (rc == 0)
		r->placed += n;
	return rc;
}

/* The held WQE leaves the ring and its completion is published. */
void rq_complete(struct qp *qp, struct proto_cqe *cqe)
{
	cqe->wr_id = qp->recv.wqe.wr_id;
	cqe->qp_num = qp->qpn;
	cqe->src_qp = qp->attr.dest_qpn;
	qp->recv_held = false;
	qp->rq_cons++;
	__atomic_store_n(&qp->rq_ctl->cons, qp->rq_cons, __ATOMIC_RELEASE);
	cq_push(qp->recv_cq, cqe);
}

void rq_flush(struct qp *qp)
{
	uint32_t prod = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);

	qp->recv_held = false;
	if (prod - qp->rq_cons > qp->rq_entries)
		prod = qp->rq_cons;
	while (qp->rq_cons != prod) {
		struct proto_cqe cqe = { .wr_id = rq_head(qp)->wr_id, .status = IBV_WC_WR_FLUSH_ERR,
					 .opcode = IBV_WC_RECV, .qp_num = qp->qpn };

		qp->rq_cons++;
		__atomic_store_n(&qp->rq_ctl->cons, qp->rq_cons, __ATOMIC_RELEASE);
		cq_push(qp->recv_cq, &cqe);
	}
}
