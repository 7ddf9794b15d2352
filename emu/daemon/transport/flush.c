/* The responder's RDMA FLUSH (IBA Memory Placement Extensions), as the kernel's rxe has it
 * since 6.2. A FLUSH that passed the responder's checks (the QP grants the placement type
 * asked, the MR or window grants it too and, at level range, holds the range) asks that
 * everything placed before it be visible: rocemu places every byte with the CPU's own
 * stores, in order, into memory the owner maps, so a full fence before the answer is all
 * global visibility takes. Persistence no rocemu MR can grant (memreg refuses
 * MR_ACCESS_FLUSH_PERSISTENT: no memory here is pmem), so such a FLUSH never gets here.
 *
 * The answer is rxe's, for a FLUSH and for an ATOMIC WRITE alike: an RDMA READ RESPONSE
 * ONLY with no payload, in its turn behind the READ responses queued before it. Each takes
 * a responder resource, so a duplicate is answered again (never executed twice); one whose
 * resource was reused is dropped, as rxe drops it. */
#include "emu/daemon/transport/transport.h"

int flush_execute(struct qp *qp, const struct wire_pkt *pkt)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return empty_answer(qp, pkt);
}

int empty_answer(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	struct rd_res *res = rd_res_take(qp);

	/* the caller made room with reply_reserve() */
	*res = (struct rd_res){ .used = true, .empty_answer = true, .first_psn = psn,
				.last_psn = psn };
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
	qp->resp.rcv_psn = (psn + 1) & WIRE_PSN_MASK;
	return reply_read(qp, psn, 0, 0, 0, true);
}

void empty_answer_replay(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;

	if (reply_will_send(qp, psn))
		return;
	for (uint32_t i = 0; i < qp->attr.max_dest_rd_atomic; i++) {
		const struct rd_res *res = &qp->resp.rd_res[i];

		if (res->used && res->empty_answer && res->first_psn == psn) {
			if (reply_read(qp, psn, 0, 0, 0, true) < 0)
				qp->dev->cnt.drop_reply_full++;
			return;
		}
	}
}
