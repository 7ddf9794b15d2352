/* Responder of an RC QP for SEND, RDMA WRITE, RDMA READ, atomics and FLUSH: rxe's checks in
 * rxe's order (PSN, opcode sequence, the QP's permission, the receive WQE or responder
 * resources, the length for the packet's place, the rkey), each with rxe's NAK and, when
 * the message holds a receive WQE, rxe's status on its completion. Only after all of them
 * does data move: a WRITE through the target MR's page table, a SEND through the receive
 * WQE's SGEs, a READ's responses out of the MR (read.c), an atomic on the MR's word
 * (atomic.c), a FLUSH's fence and empty READ response (flush.c).
 *
 * A UC QP's SENDs and WRITEs go through the same checks after UC's own PSN check, and
 * nothing is answered: a refusal or a lost packet drops the rest of the message silently
 * (counted by its reason), up to the next FIRST or ONLY, as rxe's responder does. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

#define MAX_DMA_LEN (1u << 31)
#define RNR_NAK 0x20

/* What the PSN check makes of a request. */
enum psn_verdict { PSN_EXPECTED, PSN_DROP, PSN_DUP_READ, PSN_DUP_ATOMIC, PSN_DUP_EMPTY_ANSWER };

/* A check's verdict is a refusal (proto.h names each), PROTO_REFUSED_none to go on, or
 * DROPPED: taken silently, as if lost. */
typedef unsigned verdict;
#define GO_ON PROTO_REFUSED_none
#define DROPPED PROTO_NREFUSALS

/* The NAK each refusal draws, as rxe's responder answers the same check. */
enum nak_class { NAK_INV, NAK_ACCESS, NAK_OP, NAK_RNR, NAK_NONE };

static enum nak_class refusal_nak(verdict v)
{
	switch (v) {
	case PROTO_REFUSED_no_receive:
		return NAK_RNR;
	case PROTO_REFUSED_receive_malformed: case PROTO_REFUSED_receive_too_small:
	case PROTO_REFUSED_receive_sge: case PROTO_REFUSED_receive_not_held:
		return NAK_OP;
	case PROTO_REFUSED_rkey_unknown: case PROTO_REFUSED_rkey_stale:
	case PROTO_REFUSED_rkey_other_pd: case PROTO_REFUSED_rkey_no_access:
	case PROTO_REFUSED_rkey_mr_invalid: case PROTO_REFUSED_rkey_bounds:
	case PROTO_REFUSED_rkey_other_qp: case PROTO_REFUSED_rkey_mw_unbound:
	case PROTO_REFUSED_write_copy: case PROTO_REFUSED_read_memory:
	case PROTO_REFUSED_atomic_memory:
		return NAK_ACCESS;
	case PROTO_REFUSED_send_invalidate:
		return NAK_NONE;
	default:
		return NAK_INV;
	}
}

static const char *const refusal_names[PROTO_NREFUSALS] = {
#define REFUSAL_NAME(name, help) #name,
	PROTO_REFUSALS(REFUSAL_NAME)
#undef REFUSAL_NAME
};

/* The refusal mr_lookup_remote()'s answer makes. */
static verdict rkey_refusal(enum mr_check st)
{
	switch (st) {
	case MR_OK: return GO_ON;
	case MR_NO_REGION: return PROTO_REFUSED_rkey_unknown;
	case MR_KEY_MISMATCH: return PROTO_REFUSED_rkey_stale;
	case MR_PD_MISMATCH: return PROTO_REFUSED_rkey_other_pd;
	case MR_ACCESS: return PROTO_REFUSED_rkey_no_access;
	case MR_INVALID: return PROTO_REFUSED_rkey_mr_invalid;
	case MR_QP_MISMATCH: return PROTO_REFUSED_rkey_other_qp;
	case MR_MW_UNBOUND: return PROTO_REFUSED_rkey_mw_unbound;
	default: return PROTO_REFUSED_rkey_bounds;
	}
}

static bool is_first(const struct wire_opcode_info *op)
{
	return op->pos == WIRE_POS_FIRST || op->pos == WIRE_POS_ONLY;
}

static bool is_last(const struct wire_opcode_info *op)
{
	return op->pos == WIRE_POS_LAST || op->pos == WIRE_POS_ONLY;
}

static bool has_imm(const struct wire_opcode_info *op)
{
	return op->headers & WIRE_HDR_IMMDT;
}

/* A SEND takes a receive WQE at its first packet, a WRITE WITH IMMEDIATE at its last. */
static bool takes_recv(const struct wire_opcode_info *op)
{
	return op->kind == WIRE_KIND_SEND ? is_first(op) : has_imm(op) && is_last(op);
}

/* An ACK covers every PSN up to its own, so one per QP for all the frames read in one
 * wakeup says what one per AckReq would, in a fraction of the packets: it goes out when
 * the loop is about to sleep, or just before a NAK of the same QP. */
static void ack_later(struct qp *qp)
{
	if (qp->resp.ack_due)
		return;
	qp->resp.ack_due = true;
	TAILQ_INSERT_TAIL(&qp->dev->tp.acks_due, qp, resp.ack_link);
}

void resp_cancel_ack(struct qp *qp)
{
	if (!qp->resp.ack_due)
		return;
	qp->resp.ack_due = false;
	TAILQ_REMOVE(&qp->dev->tp.acks_due, qp, resp.ack_link);
}

static void send_due_ack(struct qp *qp)
{
	if (!qp->resp.ack_due)
		return;
	resp_cancel_ack(qp);
	if (!qp_takes_requests(qp))
		return;
	qp->dev->cnt.acks_sent++;
	reply_ack(qp, qp->resp.rcv_psn - 1, WIRE_SYN_ACK);
}

/* Without it, a client that saw its receive complete (the completion is visible before the
 * loop sends the ACKs due) could post its answer, the doorbell be served in the same
 * wakeup, and the answer overtake the ACK: the peer would see the answer complete before
 * the request it answers, which no RoCE NIC shows, and a program that takes one event for
 * its send (perftest's latency tests with -e) then polls its send CQ too early and loses
 * step with its peer. */
void resp_ack_before_request(struct qp *qp)
{
	send_due_ack(qp);
}

void resp_send_due_acks(struct dev *dev)
{
	struct qp *qp;

	while ((qp = TAILQ_FIRST(&dev->tp.acks_due)))
		send_due_ack(qp);
}

/* 1. PSN: ahead gets one sequence NAK per gap, as rxe's responder sends it: the gap ends
 * when the expected PSN arrives. Packets that a reordering network delivers late, or a
 * resend that lost the expected PSN again, draw no further NAK: a requester resending
 * already takes none as news (rxe's and ours), and its timer covers the second loss. Behind
 * is a duplicate, re-ACKed and not executed again (a READ or atomic is answered again
 * from its responder resource). The packet that ends the gap is ACKed, asked or not. */
static enum psn_verdict check_psn(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	int32_t d = wire_psn_diff(psn, qp->resp.rcv_psn);

	if (d > 0) {
		qp->dev->cnt.out_of_seq_request++;
		if (!qp->resp.nak_seq_sent) {
			qp->resp.nak_seq_sent = true;
			qp->dev->cnt.nak_seq_sent++;
			send_due_ack(qp);
			reply_ack(qp, qp->resp.rcv_psn, WIRE_SYN_NAK_PSN_SEQ);
		}
		return PSN_DROP;
	}
	if (d < 0) {
		qp->dev->cnt.duplicate_request++;
		if (pkt->op->kind == WIRE_KIND_READ_REQ)
			return PSN_DUP_READ;
		if (pkt->op->kind == WIRE_KIND_ATOMIC)
			return PSN_DUP_ATOMIC;
		if (pkt->op->kind == WIRE_KIND_FLUSH || pkt->op->kind == WIRE_KIND_ATOMIC_WRITE)
			return PSN_DUP_EMPTY_ANSWER;
		ack_later(qp);
		return PSN_DROP;
	}
	/* The resend the NAK asked for has come: an ACK says so at once, AckReq or not.
	 * rxe's requester gets its retries back only from an ACK, and under reordering the
	 * resend's own packets may draw the next NAK before one of them asks for an ACK: a
	 * round after round of NAKs alone ran its retries out (seen against the kernel's rxe
	 * at 5% reordering). */
	if (qp->resp.nak_seq_sent) {
		qp->resp.nak_seq_sent = false;
		ack_later(qp);
	}
	return PSN_EXPECTED;
}

/* 2. Opcode sequence: a message under way goes on with its own kind, MIDDLE or LAST;
 * otherwise a message starts. */
static verdict check_op_seq(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_opcode_info *op = pkt->op;
	bool fits = qp->resp.in_msg ? !is_first(op) && op->kind == qp->resp.msg_kind : is_first(op);

	return fits ? GO_ON : PROTO_REFUSED_opcode_sequence;
}

/* The IBV_ACCESS_FLUSH_* rights a FLUSH's placement type asks for (rxe reads only the two
 * types defined; a FLUSH of neither asks for no right and is answered all the same). */
static int flush_access(const struct wire_feth *feth)
{
	return (feth->placement & WIRE_FLUSH_GLOBAL ? PROTO_ACCESS_FLUSH_GLOBAL : 0) |
	       (feth->placement & WIRE_FLUSH_PERSISTENT ? PROTO_ACCESS_FLUSH_PERSISTENT : 0);
}

/* A FLUSH needs the QP's right for each placement type it asks (rxe's check); a level
 * other than range or whole MR rocemu refuses too, where rxe takes it for whole MR after
 * a range check. */
static verdict check_flush_valid(const struct qp *qp, const struct wire_feth *feth)
{
	uint32_t need = (uint32_t)flush_access(feth);

	if ((qp->attr.access & need) != need)
		return PROTO_REFUSED_no_flush_access;
	return feth->selectivity <= WIRE_FLUSH_MR ? GO_ON : PROTO_REFUSED_flush_level;
}

/* 3. The QP's own permission for the operation. */
static verdict check_op_valid(struct qp *qp, const struct wire_pkt *pkt)
{
	switch (pkt->op->kind) {
	case WIRE_KIND_SEND:
		return GO_ON;
	case WIRE_KIND_WRITE:
	case WIRE_KIND_ATOMIC_WRITE:
		return qp->attr.access & IBV_ACCESS_REMOTE_WRITE ? GO_ON
								 : PROTO_REFUSED_no_remote_write;
	case WIRE_KIND_READ_REQ:
		return qp->attr.access & IBV_ACCESS_REMOTE_READ ? GO_ON
								: PROTO_REFUSED_no_remote_read;
	case WIRE_KIND_ATOMIC:
		return qp->attr.access & IBV_ACCESS_REMOTE_ATOMIC ? GO_ON
								  : PROTO_REFUSED_no_remote_atomic;
	case WIRE_KIND_FLUSH:
		return check_flush_valid(qp, &pkt->ext.feth);
	default:
		return PROTO_REFUSED_opcode_unsupported;
	}
}

/* 4. The receive WQE: none posted is an RNR NAK; one the client filled with nonsense is
 * taken and fails as malformed. A READ or atomic (ATOMIC WRITE too, as rxe) needs
 * responder resources (max_dest_rd_atomic), and so does a FLUSH, which takes one (rxe
 * takes one as well, without this check). */
static verdict check_resource(struct qp *qp, const struct wire_pkt *pkt)
{
	if (pkt->op->kind == WIRE_KIND_READ_REQ || pkt->op->kind == WIRE_KIND_ATOMIC ||
	    pkt->op->kind == WIRE_KIND_ATOMIC_WRITE || pkt->op->kind == WIRE_KIND_FLUSH)
		return qp->attr.max_dest_rd_atomic ? GO_ON : PROTO_REFUSED_no_rd_resources;
	if (!takes_recv(pkt->op))
		return GO_ON;
	switch (rq_take(qp)) {
	case 0:
		return GO_ON;
	case -EAGAIN:
		return PROTO_REFUSED_no_receive;
	case -EPROTO:
		return PROTO_REFUSED_receive_ring_index;
	default:
		return PROTO_REFUSED_receive_malformed;
	}
}

/* 5. The payload for the packet's place in its message, and a WRITE's DMA length. */
static verdict check_length(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_opcode_info *op = pkt->op;

	if (op->pos == WIRE_POS_ONLY && pkt->payload_len > qp->pmtu)
		return PROTO_REFUSED_length_only;
	if ((op->pos == WIRE_POS_FIRST || op->pos == WIRE_POS_MIDDLE) &&
	    pkt->payload_len != qp->pmtu)
		return PROTO_REFUSED_length_not_pmtu;
	if (op->pos == WIRE_POS_LAST && (pkt->payload_len == 0 || pkt->payload_len > qp->pmtu))
		return PROTO_REFUSED_length_last;
	if ((op->headers & WIRE_HDR_RETH) && pkt->ext.reth.length > MAX_DMA_LEN)
		return PROTO_REFUSED_length_dma;
	return GO_ON;
}

/* An ATOMIC WRITE as rxe checks it: its rkey for remote write over the RETH's length,
 * which the payload must match and which must be 8, at an 8-byte aligned address. */
static verdict check_atomic_write(struct qp *qp, const struct wire_pkt *pkt, struct mr **mr)
{
	const struct wire_reth *reth = &pkt->ext.reth;
	verdict v = rkey_refusal(resp_lookup(qp, reth->rkey, IBV_ACCESS_REMOTE_WRITE, reth->va,
					     reth->length, mr, &qp->resp.write_mr_va));

	if (v != GO_ON)
		return v;
	if (reth->length != sizeof(uint64_t) || pkt->payload_len != reth->length)
		return PROTO_REFUSED_write_length;
	return qp->resp.write_mr_va & 7 ? PROTO_REFUSED_atomic_unaligned : GO_ON;
}

/* A FLUSH as rxe checks it: its rkey must grant the rights its placement type asks, over
 * the RETH's range at level range and with no range at level whole MR (a window's MR, for
 * a window's key). */
static verdict check_flush_rkey(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_reth *reth = &pkt->ext.reth;
	uint64_t len = pkt->ext.feth.selectivity == WIRE_FLUSH_RANGE ? reth->length : 0;
	uint64_t at;

	return rkey_refusal(resp_lookup(qp, reth->rkey, flush_access(&pkt->ext.feth), reth->va,
					len, NULL, &at));
}

/* 6. Memory. An atomic's rkey resolves to an MR of this QP's PD that grants remote atomic
 * and holds its 8 bytes, 8-byte aligned (else an invalid request, as rxe). A READ's, to
 * one that grants remote read and holds [va, va + length) (a READ of 0 bytes names no
 * memory). A WRITE's, on every packet, to one that grants remote write and holds
 * [va, va + remaining); then the payload must fit. An rkey may also name a memory window
 * of the QP's PD (type 2: bound on this QP) that grants the access and holds the range,
 * over an MR that still holds it (memreg's mr_lookup_remote). */
static verdict check_rkey(struct qp *qp, const struct wire_pkt *pkt, struct mr **mr)
{
	const struct wire_opcode_info *op = pkt->op;
	const struct wire_reth *reth = &pkt->ext.reth;
	verdict v;

	uint64_t at;

	*mr = NULL;
	if (op->kind == WIRE_KIND_ATOMIC) {
		v = rkey_refusal(resp_lookup(qp, pkt->ext.atomic.rkey, IBV_ACCESS_REMOTE_ATOMIC,
					     pkt->ext.atomic.va, sizeof(uint64_t), NULL, &at));
		return v != GO_ON || !(at & 7) ? v : PROTO_REFUSED_atomic_unaligned;
	}
	if (op->kind == WIRE_KIND_ATOMIC_WRITE)
		return check_atomic_write(qp, pkt, mr);
	if (op->kind == WIRE_KIND_FLUSH)
		return check_flush_rkey(qp, pkt);
	if (op->kind == WIRE_KIND_READ_REQ)
		return reth->length ? rkey_refusal(resp_lookup(qp, reth->rkey,
							       IBV_ACCESS_REMOTE_READ, reth->va,
							       reth->length, NULL, &at)) : GO_ON;
	if (op->kind != WIRE_KIND_WRITE)
		return GO_ON;
	if (is_first(op)) {
		qp->resp.write_va = pkt->ext.reth.va;
		qp->resp.write_rkey = pkt->ext.reth.rkey;
		qp->resp.write_left = qp->resp.write_len = pkt->ext.reth.length;
	}
	if (qp->resp.write_left) {
		v = rkey_refusal(resp_lookup(qp, qp->resp.write_rkey, IBV_ACCESS_REMOTE_WRITE,
					     qp->resp.write_va, qp->resp.write_left, mr,
					     &qp->resp.write_mr_va));
		if (v != GO_ON)
			return v;
	}
	/* A packet carries the bytes remaining when they fit in it, else a PMTU (check_length
	 * made that so): a FIRST or MIDDLE may end the DMA length, as on rxe, and the packet
	 * after it is then refused; a LAST must end it. */
	if (is_last(op) ? pkt->payload_len != qp->resp.write_left
			: qp->resp.write_left < pkt->payload_len)
		return PROTO_REFUSED_write_length;
	return GO_ON;
}

/* rq_scatter()'s failures, named. */
static verdict scatter_refusal(int rc)
{
	switch (rc) {
	case 0: return GO_ON;
	case -ERANGE: return PROTO_REFUSED_receive_too_small;
	case -EFAULT: return PROTO_REFUSED_receive_sge;
	default: return PROTO_REFUSED_receive_not_held;
	}
}

static verdict place(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt,
		     struct mr *mr)
{
	const uint8_t *data = frame + pkt->payload_off;

	if (pkt->op->kind == WIRE_KIND_SEND)
		return scatter_refusal(rq_scatter(qp, data, pkt->payload_len));
	if (pkt->payload_len) {
		/* the range was checked just now: a failure here is the MR's own check */
		if (mr_copy_in(mr, qp->resp.write_mr_va, data, pkt->payload_len) < 0)
			return PROTO_REFUSED_write_copy;
		qp->resp.write_va += pkt->payload_len;
		qp->resp.write_left -= pkt->payload_len;
	}
	return GO_ON;
}

/* The receive completion of a message's last packet, as rxe fills it in: IBV_WC_GRH on
 * every one, the immediate as it came on the wire (network order). */
static void complete_receive(struct qp *qp, const struct wire_pkt *pkt,
			     enum ibv_wc_status status)
{
	bool write = pkt->op->kind == WIRE_KIND_WRITE;
	struct proto_cqe cqe = { .status = status,
				 .opcode = write ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
				 .byte_len = write ? qp->resp.write_len : (uint32_t)qp->resp.recv.placed,
				 .wc_flags = IBV_WC_GRH, .solicited = pkt->bth.solicited };

	if (has_imm(pkt->op)) {
		cqe.wc_flags |= IBV_WC_WITH_IMM;
		cqe.imm = htonl(pkt->ext.imm);
	}
	if (pkt->op->headers & WIRE_HDR_IETH) {
		cqe.wc_flags |= IBV_WC_WITH_INV;
		cqe.imm = pkt->ext.ieth;
	}
	rq_complete(qp, &cqe);
}

/* SEND WITH INVALIDATE names an rkey to invalidate after the data is placed: a type 2
 * memory window of this QP's PD bound on this QP (memreg's mr_mw_invalidate; rxe also
 * takes fast-registration MRs, which rocemu does not have, and refuses ordinary MRs). One
 * that cannot be invalidated fails as on rxe (its class J): the receive completes with
 * IBV_WC_REM_INV_REQ_ERR and the QP goes to the error state, and the packet is still
 * ACKed, not NAKed. */
static void note_refusal(struct qp *qp, const struct wire_pkt *pkt, verdict v);

static void refuse_invalidate(struct qp *qp, const struct wire_pkt *pkt)
{
	note_refusal(qp, pkt, PROTO_REFUSED_send_invalidate);
	send_due_ack(qp);
	if (pkt->bth.ack_req) {
		qp->dev->cnt.acks_sent++;
		reply_ack(qp, pkt->bth.psn, WIRE_SYN_ACK);
	}
	complete_receive(qp, pkt, IBV_WC_REM_INV_REQ_ERR);
	reply_fail_after(qp);
}

static void finish_message(struct qp *qp, const struct wire_pkt *pkt)
{
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
	qp->dev->cnt.rdma_recvs++;
	if (qp->resp.recv_held)
		complete_receive(qp, pkt, IBV_WC_SUCCESS);
}

/* An ATOMIC WRITE takes a responder resource and is answered as rxe (6.2 on) answers it,
 * with an empty READ response: a duplicate gets the answer again, never a second write. */
static verdict atomic_write_answer(struct qp *qp, const uint8_t *frame,
				   const struct wire_pkt *pkt, struct mr *mr)
{
	if (atomic_write_execute(mr, qp->resp.write_mr_va, frame + pkt->payload_off) < 0)
		return PROTO_REFUSED_atomic_memory;
	qp->resp.in_msg = false;
	qp->resp.msg_kind = pkt->op->kind;
	qp->dev->cnt.rdma_recvs++;
	if (empty_answer(qp, pkt) < 0)
		qp->dev->cnt.drop_reply_full++;
	return GO_ON;
}

static verdict execute(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt,
		       struct mr *mr)
{
	verdict v;

	if (pkt->op->kind == WIRE_KIND_READ_REQ || pkt->op->kind == WIRE_KIND_ATOMIC ||
	    pkt->op->kind == WIRE_KIND_FLUSH || pkt->op->kind == WIRE_KIND_ATOMIC_WRITE) {
		/* no room to queue the answer: as if lost, the requester asks again */
		if (!reply_reserve(qp)) {
			qp->dev->cnt.drop_reply_full++;
			return DROPPED;
		}
		/* the ACK of what came before goes ahead of the answer */
		send_due_ack(qp);
	}
	if (pkt->op->kind == WIRE_KIND_READ_REQ)
		return read_execute(qp, pkt) < 0 ? PROTO_REFUSED_read_memory : GO_ON;
	if (pkt->op->kind == WIRE_KIND_ATOMIC)
		return atomic_execute(qp, pkt) < 0 ? PROTO_REFUSED_atomic_memory : GO_ON;
	if (pkt->op->kind == WIRE_KIND_FLUSH) {
		if (flush_execute(qp, pkt) < 0)
			qp->dev->cnt.drop_reply_full++;
		return GO_ON;
	}
	if (pkt->op->kind == WIRE_KIND_ATOMIC_WRITE)
		return atomic_write_answer(qp, frame, pkt, mr);
	v = place(qp, frame, pkt, mr);
	if (v != GO_ON)
		return v;
	if ((pkt->op->headers & WIRE_HDR_IETH) &&
	    mr_mw_invalidate(qp->dev->mrs, pkt->ext.ieth, qp->pd, qp) < 0) {
		refuse_invalidate(qp, pkt);
		return GO_ON;
	}
	qp->resp.rcv_psn = (qp->resp.rcv_psn + 1) & WIRE_PSN_MASK;
	qp->resp.in_msg = !is_last(pkt->op);
	qp->resp.msg_kind = pkt->op->kind;
	if (is_last(pkt->op))
		finish_message(qp, pkt);
	/* UC is never acknowledged, whatever the AckReq bit says (rxe up to 6.x sets it) */
	if (pkt->bth.ack_req && qp->type == IBV_QPT_RC)
		ack_later(qp);
	return GO_ON;
}

static uint8_t nak_syndrome(struct dev *dev, enum nak_class nak)
{
	switch (nak) {
	case NAK_ACCESS:
		dev->cnt.nak_rem_access_sent++;
		return WIRE_SYN_NAK_REM_ACCESS;
	case NAK_OP:
		dev->cnt.nak_rem_op_sent++;
		return WIRE_SYN_NAK_REM_OP;
	default:
		dev->cnt.nak_inv_req_sent++;
		return WIRE_SYN_NAK_INV_REQ;
	}
}

static enum ibv_wc_status receive_status(enum nak_class nak)
{
	switch (nak) {
	case NAK_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case NAK_OP:
		return IBV_WC_LOC_QP_OP_ERR;
	default:
		return IBV_WC_REM_INV_REQ_ERR;
	}
}

/* Every refusal is counted by its reason, kept as the QP's last (rocemuctl qp) and logged
 * at debug level: a user who sees a NAK's completion status can find which check it was. */
static void note_refusal(struct qp *qp, const struct wire_pkt *pkt, verdict v)
{
	qp->dev->refused[v]++;
	qp->resp.last_refusal = v;
	log_limited_debug("QP 0x%06x: refused PSN 0x%06x (%s from QP 0x%06x): %s", qp->qpn,
			  pkt->bth.psn, pkt->op->name, qp->attr.dest_qpn, refusal_names[v]);
}

/* A NAK carries the PSN of the packet it answers. An RNR NAK only asks the requester to
 * come back; the others end the QP, and the receive WQE the message holds completes with
 * the error first. */
static void refuse(struct qp *qp, const struct wire_pkt *pkt, verdict v)
{
	enum nak_class nak = refusal_nak(v);

	note_refusal(qp, pkt, v);
	send_due_ack(qp);
	if (nak == NAK_RNR) {
		qp->dev->cnt.send_rnr_err++;
		reply_ack(qp, pkt->bth.psn, RNR_NAK | (qp->attr.min_rnr_timer & 0x1f));
		return;
	}
	reply_ack(qp, pkt->bth.psn, nak_syndrome(qp->dev, nak));
	if (qp->resp.recv_held)
		complete_receive(qp, pkt, receive_status(nak));
	reply_fail_after(qp);
}

/* rxe's checks in rxe's order; the first that refuses names the reason. */
static verdict check_request(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	struct mr *mr = NULL;
	verdict v = check_op_seq(qp, pkt);

	if (v == GO_ON)
		v = check_op_valid(qp, pkt);
	if (v == GO_ON)
		v = check_resource(qp, pkt);
	if (v == GO_ON)
		v = check_length(qp, pkt);
	if (v == GO_ON)
		v = check_rkey(qp, pkt, &mr);
	if (v == GO_ON)
		v = execute(qp, frame, pkt, mr);
	return v;
}

/* ---- UC: no ACK, no NAK, no duplicate; what cannot be placed is dropped ---- */

/* The message under way is dropped from here to its end: the next FIRST or ONLY starts
 * the next one. */
static void uc_drop_message(struct qp *qp)
{
	qp->resp.in_msg = false;
	qp->resp.uc_dropping = true;
	if (qp->resp.recv_held)
		rq_rewind(qp);
}

/* UC's PSN check, as rxe's: any PSN but the expected one means packets were lost. A FIRST
 * or ONLY starts a message wherever it lands (the PSN follows it), ending a message that
 * lost its last packets; a MIDDLE or LAST after a gap, or of a message already dropped, is
 * dropped with the rest of its message. (rxe 6.1 drops a FIRST that finds a message
 * unfinished as well, so a lost LAST costs it the next message too, though its own notes
 * say that packet may well start a valid message: rocemu takes it.) */
static bool uc_check_psn(struct qp *qp, const struct wire_pkt *pkt)
{
	bool in_order = pkt->bth.psn == qp->resp.rcv_psn;

	if (wire_psn_diff(pkt->bth.psn, qp->resp.rcv_psn) > 0)
		qp->dev->cnt.out_of_seq_request++;
	if (is_first(pkt->op)) {
		if (qp->resp.in_msg)
			uc_drop_message(qp);
		qp->resp.uc_dropping = false;
		qp->resp.rcv_psn = pkt->bth.psn;
		return true;
	}
	if (!in_order || qp->resp.uc_dropping) {
		note_refusal(qp, pkt, PROTO_REFUSED_uc_message_dropped);
		uc_drop_message(qp);
		return false;
	}
	return true;
}

/* The status an SRQ's receive WQE completes with when its UC message is refused: it left
 * the SRQ when it was taken, so it cannot wait for the next message (rxe's class E). */
static enum ibv_wc_status uc_srq_status(verdict v)
{
	return refusal_nak(v) == NAK_ACCESS ? IBV_WC_REM_ACCESS_ERR : IBV_WC_REM_INV_REQ_ERR;
}

/* A refusal on a UC QP, by rxe's classes: a receive WQE the client filled wrong ends the
 * QP, its completion first (class A, without the NAK: UC has none); a client's receive
 * ring index that lies ends it too. Anything else drops the message silently: the receive
 * WQE it held stays whole for the next message (class D), an SRQ's completes in error. */
static void uc_refuse(struct qp *qp, const struct wire_pkt *pkt, verdict v)
{
	note_refusal(qp, pkt, v);
	switch (v) {
	case PROTO_REFUSED_receive_malformed:
	case PROTO_REFUSED_receive_sge:
		complete_receive(qp, pkt, IBV_WC_LOC_QP_OP_ERR);
		qp_to_error(qp);
		return;
	case PROTO_REFUSED_receive_ring_index:
		qp_to_error(qp);
		return;
	default:
		break;
	}
	if (qp->srq && qp->resp.recv_held)
		complete_receive(qp, pkt, uc_srq_status(v));
	uc_drop_message(qp);
}

static void uc_on_request(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	verdict v;

	if (!uc_check_psn(qp, pkt))
		return;
	v = check_request(qp, frame, pkt);
	if (v != GO_ON && v != DROPPED)
		uc_refuse(qp, pkt, v);
}

void resp_on_request(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	verdict v;

	if (qp->type == IBV_QPT_UC) {
		uc_on_request(qp, frame, pkt);
		return;
	}
	/* a NAK that ends the QP waits behind READ responses: nothing after it is taken */
	if (qp->resp.stopped) {
		qp->dev->cnt.drop_qp_state++;
		return;
	}
	switch (check_psn(qp, pkt)) {
	case PSN_DROP:
		return;
	case PSN_DUP_READ:
		read_replay(qp, pkt);
		return;
	case PSN_DUP_ATOMIC:
		atomic_replay(qp, pkt);
		return;
	case PSN_DUP_EMPTY_ANSWER:
		empty_answer_replay(qp, pkt);
		return;
	case PSN_EXPECTED:
		break;
	}
	v = check_request(qp, frame, pkt);
	if (v != GO_ON && v != DROPPED)
		refuse(qp, pkt, v);
}
