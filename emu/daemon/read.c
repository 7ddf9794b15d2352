/* The responder's RDMA READ side, as rxe does it. A READ that passed the responder's checks
 * takes the next of max_dest_rd_atomic responder resources (the oldest is overwritten: a
 * peer that sends more is told nothing, it only loses the chance to replay the oldest),
 * and its responses go out at once, one PSN each. A duplicate READ is answered again from
 * its resource, from the duplicate's PSN on, when its RETH asks for part of what the
 * original did with the same rkey; otherwise it is dropped. Every response looks its bytes
 * up again right before they are copied, so an MR deregistered part-way ends the READ with
 * an access error and not one byte outside a valid MR leaves. */
#include <errno.h>

#include "emu/daemon/daemon.h"

static uint32_t packets_for(const struct qp *qp, uint32_t len)
{
	return len ? (len + qp->pmtu - 1) / qp->pmtu : 1;
}

/* A reply starts with FIRST or ONLY; a replay from the middle with MIDDLE or LAST. */
static uint8_t response_opcode(uint32_t k, uint32_t n, bool starts)
{
	bool last = k + 1 == n;

	if (k == 0 && starts)
		return last ? WIRE_OP_RC_READ_RESP_ONLY : WIRE_OP_RC_READ_RESP_FIRST;
	return last ? WIRE_OP_RC_READ_RESP_LAST : WIRE_OP_RC_READ_RESP_MIDDLE;
}

static int send_response(struct qp *qp, uint8_t opcode, uint32_t psn, uint32_t rkey,
			 uint64_t va, size_t n)
{
	struct wire_bth bth = { .opcode = opcode, .pkey = 0xffff, .dest_qp = qp->attr.dest_qpn,
				.psn = psn & WIRE_PSN_MASK };
	struct wire_ext ext = { .aeth = { .syndrome = WIRE_SYN_ACK, .msn = qp->msn } };
	struct mr *mr = NULL;
	struct tx_pkt p;

	if (n && mr_lookup(qp->dev->mrs, rkey, qp->pd, IBV_ACCESS_REMOTE_READ, va, n, &mr) != MR_OK)
		return -EFAULT;
	if (!tx_begin(qp, &bth, &ext, n, &p) || (n && mr_copy_out(mr, va, p.payload, n) < 0))
		return -EFAULT;
	tx_end(qp, &p, n);
	return 0;
}

static int send_responses(struct qp *qp, uint32_t psn, uint32_t rkey, uint64_t va,
			  uint32_t len, bool starts)
{
	uint32_t n = packets_for(qp, len);

	for (uint32_t k = 0; k < n; k++) {
		uint64_t off = (uint64_t)k * qp->pmtu;
		size_t chunk = len - off < qp->pmtu ? (size_t)(len - off) : qp->pmtu;

		if (send_response(qp, response_opcode(k, n, starts), psn + k, rkey, va + off,
				  chunk) < 0)
			return -EFAULT;
	}
	return 0;
}

int read_execute(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_reth *reth = &pkt->ext.reth;
	uint32_t psn = pkt->bth.psn, n = packets_for(qp, reth->length);
	struct rd_res *res = rd_res_take(qp);

	*res = (struct rd_res){ .used = true, .first_psn = psn,
				.last_psn = (psn + n - 1) & WIRE_PSN_MASK, .va = reth->va,
				.rkey = reth->rkey, .len = reth->length };
	qp->msn = (qp->msn + 1) & 0xffffff;
	qp->rcv_psn = (psn + n) & WIRE_PSN_MASK;
	return send_responses(qp, psn, res->rkey, res->va, res->len, true);
}

/* Whether [va, va + len) lies inside what res was asked for (overflow-safe). */
static bool within(const struct rd_res *res, uint64_t va, uint32_t len)
{
	return va >= res->va && len <= res->len && va - res->va <= res->len - len;
}

int read_replay(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_reth *reth = &pkt->ext.reth;
	uint32_t psn = pkt->bth.psn;

	for (uint32_t i = 0; i < qp->attr.max_dest_rd_atomic; i++) {
		const struct rd_res *res = &qp->rd_res[i];

		if (!res->used || res->atomic || wire_psn_diff(psn, res->first_psn) < 0 ||
		    wire_psn_diff(psn, res->last_psn) > 0)
			continue;
		if (reth->rkey != res->rkey || !within(res, reth->va, reth->length))
			return 0;
		return send_responses(qp, psn, res->rkey, reth->va, reth->length,
				      psn == res->first_psn);
	}
	return 0;
}
