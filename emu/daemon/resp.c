/* Responder of an RC QP for RDMA WRITE: the checks of ROCEV2.md in their order, each with
 * rxe's NAK, and the copy through the target MR's page table only after all of them. */
#include <arpa/inet.h>
#include <string.h>

#include "emu/daemon/daemon.h"

#define MAX_DMA_LEN (1u << 31)
#define RNR_NAK 0x20

enum verdict { GO_ON, DROP, NAK_INV, NAK_ACCESS, NAK_RNR };

static bool is_last(const struct wire_opcode_info *op)
{
	return op->pos == WIRE_POS_LAST || op->pos == WIRE_POS_ONLY;
}

static bool has_imm(const struct wire_opcode_info *op)
{
	return op->headers & WIRE_HDR_IMMDT;
}

/* An ACK covers every PSN up to its own, so one per QP for all the frames read in one
 * wakeup says what one per AckReq would, in a fraction of the packets: it goes out when
 * the loop is about to sleep, or just before a NAK of the same QP. */
static void ack_later(struct qp *qp)
{
	if (qp->ack_due)
		return;
	qp->ack_due = true;
	TAILQ_INSERT_TAIL(&qp->dev->acks_due, qp, ack_link);
}

void resp_cancel_ack(struct qp *qp)
{
	if (!qp->ack_due)
		return;
	qp->ack_due = false;
	TAILQ_REMOVE(&qp->dev->acks_due, qp, ack_link);
}

static void send_due_ack(struct qp *qp)
{
	if (!qp->ack_due)
		return;
	resp_cancel_ack(qp);
	if (!qp_takes_requests(qp))
		return;
	qp->dev->cnt.acks_sent++;
	send_ack(qp, qp->rcv_psn - 1, WIRE_SYN_ACK);
}

void resp_send_due_acks(struct dev *dev)
{
	struct qp *qp;

	while ((qp = TAILQ_FIRST(&dev->acks_due)))
		send_due_ack(qp);
}

/* 1. PSN: ahead gets one sequence NAK per episode; behind is a duplicate, re-ACKed and not
 * executed again. An episode ends when the expected PSN arrives, or when the requester is
 * seen to go back (an ahead packet at or below the highest seen since the NAK): its
 * resend lost the expected PSN again, and without a new NAK only its timer would notice. */
static enum verdict check_psn(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	int32_t d = wire_psn_diff(psn, qp->rcv_psn);

	if (d > 0) {
		qp->dev->cnt.out_of_seq_request++;
		if (!qp->nak_seq_sent || wire_psn_diff(psn, qp->nak_high) <= 0) {
			qp->nak_seq_sent = true;
			qp->dev->cnt.nak_seq_sent++;
			send_due_ack(qp);
			send_ack(qp, qp->rcv_psn, WIRE_SYN_NAK_PSN_SEQ);
			qp->nak_high = psn;
		} else if (wire_psn_diff(psn, qp->nak_high) > 0) {
			qp->nak_high = psn;
		}
		return DROP;
	}
	if (d < 0) {
		qp->dev->cnt.duplicate_request++;
		ack_later(qp);
		return DROP;
	}
	qp->nak_seq_sent = false;
	return GO_ON;
}

/* 2-4. Opcode sequence, the QP's own access, and the packet's length for its place. */
static enum verdict check_request(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_opcode_info *op = pkt->op;
	bool starts = op->pos == WIRE_POS_FIRST || op->pos == WIRE_POS_ONLY;

	if (op->kind != WIRE_KIND_WRITE || starts == qp->in_write)
		return NAK_INV;
	if (!(qp->attr.access & IBV_ACCESS_REMOTE_WRITE))
		return NAK_INV;
	if (op->pos == WIRE_POS_ONLY && pkt->payload_len > qp->pmtu)
		return NAK_INV;
	if ((op->pos == WIRE_POS_FIRST || op->pos == WIRE_POS_MIDDLE) &&
	    pkt->payload_len != qp->pmtu)
		return NAK_INV;
	if (op->pos == WIRE_POS_LAST && (pkt->payload_len == 0 || pkt->payload_len > qp->pmtu))
		return NAK_INV;
	if (starts && pkt->ext.reth.length > MAX_DMA_LEN)
		return NAK_INV;
	return GO_ON;
}

/* 5. Memory, on every packet: the rkey resolves to an MR of this QP's PD that grants
 * remote write and holds [va, va + remaining); then the payload must fit the message. */
static enum verdict check_memory(struct qp *qp, const struct wire_pkt *pkt, struct mr **mr)
{
	const struct wire_opcode_info *op = pkt->op;

	if (op->pos == WIRE_POS_FIRST || op->pos == WIRE_POS_ONLY) {
		qp->write_va = pkt->ext.reth.va;
		qp->write_rkey = pkt->ext.reth.rkey;
		qp->write_left = qp->write_len = pkt->ext.reth.length;
	}
	*mr = NULL;
	if (qp->write_left && mr_lookup(qp->dev->mrs, qp->write_rkey, qp->pd,
					IBV_ACCESS_REMOTE_WRITE, qp->write_va, qp->write_left,
					mr) != MR_OK)
		return NAK_ACCESS;
	if (is_last(op) ? pkt->payload_len != qp->write_left
			: qp->write_left <= pkt->payload_len)
		return NAK_INV;
	return GO_ON;
}

/* WRITE WITH IMMEDIATE consumes a receive WQE; none posted is an RNR NAK. */
static enum verdict check_receive(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t prod;

	if (!has_imm(pkt->op))
		return GO_ON;
	prod = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);
	if (prod - qp->rq_cons > qp->rq_entries) {
		log_limited("client pid %d: QP 0x%06x receive ring index %u is beyond the ring",
			    (int)qp->client->pid, qp->qpn, prod);
		return NAK_INV;
	}
	return prod == qp->rq_cons ? NAK_RNR : GO_ON;
}

static void complete_receive(struct qp *qp, const struct wire_pkt *pkt)
{
	struct proto_rwqe rwqe = qp->rq[qp->rq_cons & (qp->rq_entries - 1)];
	struct proto_cqe cqe = { .wr_id = rwqe.wr_id, .status = IBV_WC_SUCCESS,
				 .opcode = IBV_WC_RECV_RDMA_WITH_IMM, .byte_len = qp->write_len,
				 .imm = htonl(pkt->ext.imm), .qp_num = qp->qpn,
				 .wc_flags = IBV_WC_WITH_IMM };

	qp->rq_cons++;
	__atomic_store_n(&qp->rq_ctl->cons, qp->rq_cons, __ATOMIC_RELEASE);
	cq_push(qp->recv_cq, &cqe);
}

static void execute(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt,
		    struct mr *mr)
{
	if (pkt->payload_len) {
		mr_copy_in(mr, qp->write_va, frame + pkt->payload_off, pkt->payload_len);
		qp->write_va += pkt->payload_len;
		qp->write_left -= pkt->payload_len;
	}
	qp->rcv_psn = (qp->rcv_psn + 1) & WIRE_PSN_MASK;
	qp->in_write = !is_last(pkt->op);
	if (is_last(pkt->op)) {
		qp->msn = (qp->msn + 1) & 0xffffff;
		qp->dev->cnt.rdma_recvs++;
		if (has_imm(pkt->op))
			complete_receive(qp, pkt);
	}
	if (pkt->bth.ack_req)
		ack_later(qp);
}

/* A NAK carries the PSN of the packet it answers; invalid requests and access errors end
 * the QP, an RNR NAK only asks the requester to come back. */
static void refuse(struct qp *qp, const struct wire_pkt *pkt, enum verdict v)
{
	send_due_ack(qp);
	if (v == NAK_RNR) {
		qp->dev->cnt.send_rnr_err++;
		send_ack(qp, pkt->bth.psn, RNR_NAK | (qp->attr.min_rnr_timer & 0x1f));
		return;
	}
	if (v == NAK_ACCESS) {
		qp->dev->cnt.nak_rem_access_sent++;
		send_ack(qp, pkt->bth.psn, WIRE_SYN_NAK_REM_ACCESS);
	} else {
		qp->dev->cnt.nak_inv_req_sent++;
		send_ack(qp, pkt->bth.psn, WIRE_SYN_NAK_INV_REQ);
	}
	qp_to_error(qp);
}

void resp_on_request(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	struct mr *mr = NULL;
	enum verdict v = check_psn(qp, pkt);

	if (v == DROP)
		return;
	if (v == GO_ON)
		v = check_request(qp, pkt);
	if (v == GO_ON)
		v = check_memory(qp, pkt, &mr);
	if (v == GO_ON && is_last(pkt->op))
		v = check_receive(qp, pkt);
	if (v != GO_ON) {
		refuse(qp, pkt, v);
		return;
	}
	execute(qp, frame, pkt, mr);
}

void resp_flush_rq(struct qp *qp)
{
	uint32_t prod = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);

	if (prod - qp->rq_cons > qp->rq_entries)
		prod = qp->rq_cons;
	while (qp->rq_cons != prod) {
		struct proto_cqe cqe = { .wr_id = qp->rq[qp->rq_cons & (qp->rq_entries - 1)].wr_id,
					 .status = IBV_WC_WR_FLUSH_ERR, .opcode = IBV_WC_RECV,
					 .qp_num = qp->qpn };

		qp->rq_cons++;
		__atomic_store_n(&qp->rq_ctl->cons, qp->rq_cons, __ATOMIC_RELEASE);
		cq_push(qp->recv_cq, &cqe);
	}
}
