/* The responder's RDMA READ side, as rxe does it. A READ that passed the responder's checks
 * takes the next of max_dest_rd_atomic responder resources (the oldest is overwritten: a
 * peer that sends more is told nothing, it only loses the chance to replay the oldest),
 * and its responses, one PSN each, are queued to go out in the QP's turns (reply.c). A
 * duplicate READ is answered again from its resource, from the duplicate's PSN on, when
 * its RETH asks for part of what the original did with the same rkey; otherwise it is
 * dropped, and so is one whose responses are still queued. One that asks for responses of
 * the READ being sent takes it back there. Every response looks its bytes
 * up again right before they are copied, so an MR deregistered part-way ends the READ
 * with an access error and not one byte outside a valid MR leaves. */
#include <errno.h>

#include "emu/daemon/transport/transport.h"

/* A reply starts with FIRST or ONLY; a replay from the middle with MIDDLE or LAST. */
uint8_t read_response_opcode(uint32_t k, uint32_t n, bool starts)
{
	bool last = k + 1 == n;

	if (k == 0 && starts)
		return last ? WIRE_OP_RC_READ_RESP_ONLY : WIRE_OP_RC_READ_RESP_FIRST;
	return last ? WIRE_OP_RC_READ_RESP_LAST : WIRE_OP_RC_READ_RESP_MIDDLE;
}

int read_execute(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_reth *reth = &pkt->ext.reth;
	uint32_t psn = pkt->bth.psn, n = qp_packets(qp, reth->length);
	struct rd_res *res = rd_res_take(qp);

	/* the caller made room with reply_reserve() */
	*res = (struct rd_res){ .used = true, .first_psn = psn,
				.last_psn = (psn + n - 1) & WIRE_PSN_MASK, .va = reth->va,
				.rkey = reth->rkey, .len = reth->length };
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
	qp->resp.rcv_psn = (psn + n) & WIRE_PSN_MASK;
	return reply_read(qp, psn, res->rkey, res->va, res->len, true);
}

/* Whether [va, va + len) lies inside what res was asked for (overflow-safe). */
static bool within(const struct rd_res *res, uint64_t va, uint32_t len)
{
	return va >= res->va && len <= res->len && va - res->va <= res->len - len;
}

void read_replay(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_reth *reth = &pkt->ext.reth;
	uint32_t psn = pkt->bth.psn;

	if (reply_will_send(qp, psn) ||
	    reply_rewind(qp, psn, reth->rkey, reth->va, reth->length))
		return;
	for (uint32_t i = 0; i < qp->attr.max_dest_rd_atomic; i++) {
		const struct rd_res *res = &qp->resp.rd_res[i];

		if (!res->used || res->atomic || res->empty_answer || wire_psn_diff(psn, res->first_psn) < 0 ||
		    wire_psn_diff(psn, res->last_psn) > 0)
			continue;
		if (reth->rkey != res->rkey || !within(res, reth->va, reth->length))
			return;
		if (reply_read(qp, psn, res->rkey, reth->va, reth->length,
			       psn == res->first_psn) < 0)
			qp->dev->cnt.drop_reply_full++;
		return;
	}
}
