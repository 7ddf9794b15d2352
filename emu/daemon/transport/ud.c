/* UD QPs: SEND ONLY [WITH IMMEDIATE] datagrams with a DETH, one packet each, to whichever
 * address handle the work request names, and the receive side's checks in rxe's order.
 *
 * Nothing is acknowledged: a send completes as soon as its frame is handed to the wire.
 * Datagrams take turns with the other QPs' packets, QP_BURST at a time, at the QP's DCQCN
 * rate once a CNP has cut it (cc.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

#define QKEY_PRIVILEGED 0x80000000u

static bool is_send_opcode(uint32_t opcode)
{
	return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
}

/* The send slot leaves the ring before the completion is published, as on RC. */
static void complete_send(struct qp *qp, const struct proto_swqe *in, uint64_t length,
			  enum ibv_wc_status status)
{
	struct proto_cqe cqe = { .wr_id = in->wr_id, .status = status, .opcode = IBV_WC_SEND,
				 .byte_len = (uint32_t)length, .qp_num = qp->qpn };

	qp->comp.idx++;
	qp->req.fetch_idx = qp->req.send_idx = qp->comp.idx;
	__atomic_store_n(&qp->sq_ctl->cons, qp->comp.idx, __ATOMIC_RELEASE);
	if (qp->sq_sig_all || (in->flags & IBV_SEND_SIGNALED) || status != IBV_WC_SUCCESS)
		cq_push(qp->send_cq, &cqe);
}

/* The bytes a request carries, or a local error when it cannot be sent at all. */
static enum ibv_wc_status datagram_length(const struct qp *qp, const struct proto_swqe *in,
					  uint64_t *length)
{
	*length = 0;
	if (!sq_wqe_fits(qp, in, in->flags & IBV_SEND_INLINE))
		return IBV_WC_LOC_LEN_ERR;
	if (in->flags & IBV_SEND_INLINE) {
		*length = in->inline_len;
		return IBV_WC_SUCCESS;
	}
	for (uint32_t i = 0; i < in->num_sge; i++)
		*length += in->sge[i].length;
	return IBV_WC_SUCCESS;
}

/* IBA 10.2.5: a work request's Q_Key with the top bit set means "the QP's own". */
static uint32_t wire_qkey(const struct qp *qp, uint32_t wr_qkey)
{
	return wr_qkey & QKEY_PRIVILEGED ? qp->attr.qkey : wr_qkey;
}

static enum ibv_wc_status send_datagram(struct qp *qp, const struct proto_swqe *in,
					const struct ah *ah, size_t n)
{
	struct wire_bth bth = { .pkey = 0xffff, .dest_qp = in->remote_qpn & 0xffffff,
				.psn = qp->req.snd_nxt, .solicited = in->flags & IBV_SEND_SOLICITED };
	struct wire_ext ext = { .deth = { wire_qkey(qp, in->remote_qkey), qp->qpn },
				.imm = ntohl(in->imm) };
	struct wire_path path = ah->path;
	struct tx_pkt p;

	bth.opcode = in->opcode == IBV_WR_SEND_WITH_IMM ? WIRE_OP_UD_SEND_ONLY_IMM
							: WIRE_OP_UD_SEND_ONLY;
	path.src_port = qp_flow_port(ah->flow_label, qp->qpn, bth.dest_qp);
	if (!tx_begin_on(qp->dev, &path, &bth, &ext, n, &p))
		return IBV_WC_LOC_LEN_ERR;
	if (in->flags & IBV_SEND_INLINE)
		memcpy(p.payload, in->inline_data, n);
	else if (sgl_gather(qp, in->sge, in->num_sge, 0, p.payload, n) < 0)
		return IBV_WC_LOC_PROT_ERR;   /* the slot is not committed: nothing leaves */
	tx_end(qp, &p, n);
	cc_on_sent(qp, WIRE_BASE_LEN + n);
	qp->req.snd_nxt = (qp->req.snd_nxt + 1) & WIRE_PSN_MASK;
	qp->dev->cnt.rdma_sends++;
	return IBV_WC_SUCCESS;
}

/* One request, checked as rxe's requester does; a datagram longer than the port's MTU is
 * not sent and still completes successfully (IBA C10-93.1.1: UD is unreliable). */
static enum ibv_wc_status send_one(struct qp *qp, const struct proto_swqe *in,
				   uint64_t *length)
{
	const struct ah *ah = qp->dev->tp.find_ah(qp->owner, in->ah);
	enum ibv_wc_status st;

	if (!is_send_opcode(in->opcode) || !ah || ah->pd != qp->pd)
		return IBV_WC_LOC_QP_OP_ERR;
	st = datagram_length(qp, in, length);
	if (st != IBV_WC_SUCCESS)
		return st;
	if (*length > qp->pmtu) {
		qp->dev->cnt.ud_send_too_long++;
		return IBV_WC_SUCCESS;
	}
	return send_datagram(qp, in, ah, (size_t)*length);
}

void ud_pump(struct qp *qp)
{
	unsigned burst = QP_BURST;
	uint32_t prod;

	if (qp->state == IBV_QPS_ERR) {
		req_flush(qp);
		return;
	}
	if (qp->state != IBV_QPS_RTS)
		return;
	prod = __atomic_load_n(&qp->sq_ctl->prod, __ATOMIC_ACQUIRE);
	if (prod - qp->comp.idx > qp->sq_entries) {
		log_limited("client pid %d: QP 0x%06x send ring index %u is beyond the ring",
			    (int)qp->owner->pid, qp->qpn, prod);
		qp_to_error(qp);
		return;
	}
	while (qp->comp.idx != prod && cc_may_send(qp)) {
		struct proto_swqe in;
		uint64_t length = 0;
		enum ibv_wc_status st;

		if (burst-- == 0) {
			sched_ready(qp);
			return;
		}
		sq_copy(qp, qp->comp.idx, &in);
		st = send_one(qp, &in, &length);

		complete_send(qp, &in, length, st);
		if (st != IBV_WC_SUCCESS) {
			qp_to_error(qp);
			return;
		}
	}
}

/* The 40 bytes before the payload: an IPv6 header as received, or 20 zero bytes and then
 * the IPv4 header (its first 20 bytes: RoCEv2 sends no options). */
static void grh_area(const uint8_t *frame, const struct wire_pkt *pkt, uint8_t grh[UD_GRH_LEN])
{
	if (pkt->ip_version == 6) {
		memcpy(grh, frame + pkt->l3_off, UD_GRH_LEN);
		return;
	}
	memset(grh, 0, UD_GRH_LEN - WIRE_IPV4_LEN);
	memcpy(grh + UD_GRH_LEN - WIRE_IPV4_LEN, frame + pkt->l3_off, WIRE_IPV4_LEN);
}

/* A WQE that cannot take the datagram: on an SRQ it was already consumed and completes in
 * error (rxe's class E); the QP's own head stays for the next datagram (class D). */
static void refuse_too_long(struct qp *qp)
{
	qp->dev->cnt.drop_ud_too_long++;
	if (qp->srq)
		rq_complete(qp, &(struct proto_cqe){ .status = IBV_WC_REM_INV_REQ_ERR,
						     .opcode = IBV_WC_RECV });
}

/* A receive WQE whose SGEs fail their checks is the client's fault (class A): it completes
 * with a local QP operation error and the QP goes to the error state. */
static void fail_malformed(struct qp *qp)
{
	rq_complete(qp, &(struct proto_cqe){ .status = IBV_WC_LOC_QP_OP_ERR,
					     .opcode = IBV_WC_RECV });
	qp_to_error(qp);
}

static void place_datagram(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	uint8_t grh[UD_GRH_LEN];
	struct proto_cqe cqe = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV,
				 .byte_len = UD_GRH_LEN + pkt->payload_len,
				 .wc_flags = IBV_WC_GRH, .src_qp = pkt->ext.deth.src_qp,
				 .solicited = pkt->bth.solicited, .ip_version = pkt->ip_version };

	grh_area(frame, pkt, grh);
	if (rq_scatter(qp, grh, UD_GRH_LEN) < 0 ||
	    rq_scatter(qp, frame + pkt->payload_off, pkt->payload_len) < 0) {
		fail_malformed(qp);
		return;
	}
	if (pkt->op->headers & WIRE_HDR_IMMDT) {
		cqe.imm = htonl(pkt->ext.imm);
		cqe.wc_flags |= IBV_WC_WITH_IMM;
	}
	qp->dev->cnt.rdma_recvs++;
	rq_complete(qp, &cqe);
}

/* The checks of a datagram whose Q_Key rx.c found right, in order: size against the MTU,
 * a receive WQE, room in it. Every refusal before placement writes nothing. */
void ud_on_datagram(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	struct dev *dev = qp->dev;
	int rc;

	if (pkt->payload_len > net_mtu_bytes(dev->port.active_mtu)) {
		dev->cnt.drop_ud_too_long++;
		return;
	}
	rc = rq_take(qp);
	if (rc == -EAGAIN) {
		dev->cnt.drop_ud_no_recv++;
		return;
	}
	if (rc == -EPROTO) {
		qp_to_error(qp);
		return;
	}
	if (rc == -EINVAL) {
		fail_malformed(qp);
		return;
	}
	if (qp->resp.recv.length < UD_GRH_LEN + (uint64_t)pkt->payload_len) {
		refuse_too_long(qp);
		return;
	}
	place_datagram(qp, frame, pkt);
}
