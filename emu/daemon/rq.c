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

/* n bytes at the held WQE's current offset, each SGE's piece checked (lkey of the QP's PD
 * with LOCAL_WRITE, inside its MR) right before it is copied. */
int rq_scatter(struct qp *qp, const uint8_t *data, size_t n)
{
	struct recv_wqe *r = &qp->recv;
	uint64_t skip = r->placed;

	if (r->wqe.num_sge > PROTO_MAX_SGE || n > r->length - r->placed)
		return -ERANGE;
	for (uint32_t i = 0; i < r->wqe.num_sge && n; i++) {
		const struct proto_sge *s = &r->wqe.sge[i];
		size_t piece;
		struct mr *mr;

		if (skip >= s->length) {
			skip -= s->length;
			continue;
		}
		piece = s->length - skip < n ? (size_t)(s->length - skip) : n;
		if (mr_lookup(qp->dev->mrs, s->lkey, qp->pd, IBV_ACCESS_LOCAL_WRITE,
			      s->addr + skip, piece, &mr) != MR_OK ||
		    mr_copy_in(mr, s->addr + skip, data, piece) < 0)
			return -EFAULT;
		data += piece;
		n -= piece;
		r->placed += piece;
		skip = 0;
	}
	return 0;
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
