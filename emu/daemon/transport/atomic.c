/* The responder's atomics, as rxe does them: COMPARE_SWAP and FETCH_ADD on 8 aligned bytes
 * of an MR, executed once, and ATOMIC WRITE. The original value is kept in a responder resource, so a
 * duplicate request is answered with it again and never executed twice. The memory is
 * changed with the CPU's own atomic instructions: the process that owns it may be using it
 * at the same time. */
#include <errno.h>
#include <string.h>

#include "emu/daemon/transport/transport.h"

int atomic_execute(struct qp *qp, const struct wire_pkt *pkt)
{
	const struct wire_atomiceth *a = &pkt->ext.atomic;
	uint32_t psn = pkt->bth.psn;
	struct rd_res *res;
	struct mr *mr;
	uint64_t *word, orig, at;
	size_t span;

	if (resp_lookup(qp, a->rkey, IBV_ACCESS_REMOTE_ATOMIC, a->va, sizeof(*word), &mr,
			&at) != MR_OK)
		return -EFAULT;
	word = mr_host_span(mr, at, &span);
	if (!word || span < sizeof(*word))
		return -EFAULT;
	if (pkt->bth.opcode == WIRE_OP_RC_COMPARE_SWAP) {
		orig = a->compare;
		__atomic_compare_exchange_n(word, &orig, a->swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(word, a->swap_add, __ATOMIC_SEQ_CST);
	}
	res = rd_res_take(qp);
	*res = (struct rd_res){ .used = true, .atomic = true, .first_psn = psn, .last_psn = psn,
				.orig = orig };
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
	qp->resp.rcv_psn = (psn + 1) & WIRE_PSN_MASK;
	reply_atomic(qp, psn, orig);
	return 0;
}

/* As rxe (6.2 on): the bytes as they came, one release store, so whoever sees them sees
 * every earlier write of the QP too. The caller keeps a responder resource for it, so a
 * duplicate is answered again and not executed. */
int atomic_write_execute(struct mr *mr, uint64_t va, const uint8_t *data)
{
	uint64_t *word, value;
	size_t span;

	word = mr_host_span(mr, va, &span);
	if (!word || span < sizeof(*word) || ((uintptr_t)word & 7))
		return -EFAULT;
	memcpy(&value, data, sizeof(value));
	__atomic_store_n(word, value, __ATOMIC_RELEASE);
	return 0;
}

void atomic_replay(struct qp *qp, const struct wire_pkt *pkt)
{
	for (uint32_t i = 0; i < qp->attr.max_dest_rd_atomic; i++) {
		const struct rd_res *res = &qp->resp.rd_res[i];

		if (res->used && res->atomic && res->first_psn == pkt->bth.psn) {
			reply_atomic(qp, res->first_psn, res->orig);
			return;
		}
	}
}
