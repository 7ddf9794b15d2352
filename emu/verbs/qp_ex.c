/* The ibv_wr_* calls (perftest's default way of posting): ibv_wr_start takes the send
 * queue's lock, each ibv_wr_<op> opens a work request in a slot and the ibv_wr_set_*
 * calls fill it, ibv_wr_complete posts the whole list with one doorbell and lets go of
 * the lock. Inline data is copied when it is set, as verbs promises. A misuse (a setter
 * with no work request open, too many SGEs, inline data too long) is remembered and
 * returned by ibv_wr_complete, which then posts nothing. */
#include "emu/verbs/verbs_int.h"
#include "emu/proto.h"     /* FLUSH's names, which Debian 12's verbs.h lacks */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* rdma-core's later struct ibv_qp_ex adds wr_flush after wr_atomic_write, the last member
 * of Debian 12's: rv_qp.wr_flush sits exactly there. Built against headers that have it
 * already, this stops the build rather than hand out a table with a hole. */
_Static_assert(sizeof(struct ibv_qp_ex) ==
	       offsetof(struct ibv_qp_ex, wr_atomic_write) + sizeof(void (*)(void)),
	       "struct ibv_qp_ex ends at wr_atomic_write no more: set ex.wr_flush instead");
_Static_assert(offsetof(struct rv_qp, wr_flush) ==
	       offsetof(struct rv_qp, ex) + sizeof(struct ibv_qp_ex),
	       "rv_qp.wr_flush must follow its struct ibv_qp_ex directly");

#define SUPPORTED_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV | \
		       IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | \
		       IBV_QP_EX_WITH_ATOMIC_WRITE | PROTO_QP_EX_WITH_FLUSH)
#define MAX_SGE ((int)(sizeof(((struct rv_wr_slot *)0)->sge) / \
		       sizeof(((struct rv_wr_slot *)0)->sge[0])))
#define MAX_INLINE sizeof(((struct rv_wr_slot *)0)->inline_data)

int rv_qp_ex_check_ops(uint64_t send_ops_flags)
{
	return send_ops_flags & ~(uint64_t)SUPPORTED_OPS ? EOPNOTSUPP : 0;
}

static struct rv_qp *to_rv(struct ibv_qp_ex *ex)
{
	return (struct rv_qp *)ex;
}

static void fail(struct rv_qp *qp, int err)
{
	if (!qp->build_err)
		qp->build_err = err;
}

static struct ibv_send_wr *open_wr(struct ibv_qp_ex *ex, enum ibv_wr_opcode opcode)
{
	struct rv_qp *qp = to_rv(ex);
	struct rv_wr_slot *slot;

	if (qp->build_err)
		return NULL;
	if (qp->nslots == qp->slots_cap) {
		unsigned cap = qp->slots_cap ? qp->slots_cap * 2 : 8;
		struct rv_wr_slot *grown = realloc(qp->slots, cap * sizeof(*grown));

		if (!grown) {
			fail(qp, ENOMEM);
			return NULL;
		}
		qp->slots = grown;
		qp->slots_cap = cap;
	}
	slot = &qp->slots[qp->nslots++];
	memset(&slot->wr, 0, sizeof(slot->wr));
	slot->is_flush = false;
	slot->wr.wr_id = ex->wr_id;
	slot->wr.send_flags = ex->wr_flags;
	slot->wr.opcode = opcode;
	return &slot->wr;
}

/* The work request the setters apply to: the one opened last. */
static struct rv_wr_slot *open_slot(struct rv_qp *qp)
{
	if (qp->build_err)
		return NULL;
	if (qp->nslots == 0) {
		fail(qp, EINVAL);
		return NULL;
	}
	return &qp->slots[qp->nslots - 1];
}

static struct ibv_send_wr *wr_rdma(struct ibv_qp_ex *ex, enum ibv_wr_opcode op, uint32_t rkey,
				   uint64_t remote_addr)
{
	struct ibv_send_wr *wr = open_wr(ex, op);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
	return wr;
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr)
{
	wr_rdma(ex, IBV_WR_RDMA_WRITE, rkey, addr);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct ibv_send_wr *wr = wr_rdma(ex, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr);

	if (wr)
		wr->imm_data = imm;
}

static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr)
{
	wr_rdma(ex, IBV_WR_RDMA_READ, rkey, addr);
}

static void wr_atomic(struct ibv_qp_ex *ex, enum ibv_wr_opcode op, uint32_t rkey,
		      uint64_t addr, uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *wr = open_wr(ex, op);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = addr;
		wr->wr.atomic.compare_add = compare_add;
		wr->wr.atomic.swap = swap;
	}
}

static void wr_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t compare,
		       uint64_t swap)
{
	wr_atomic(ex, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t add)
{
	wr_atomic(ex, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void wr_send(struct ibv_qp_ex *ex)
{
	open_wr(ex, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm)
{
	struct ibv_send_wr *wr = open_wr(ex, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *ex, uint32_t rkey)
{
	struct ibv_send_wr *wr = open_wr(ex, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = rkey;
}

static void set_sge_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_sge *list)
{
	struct rv_qp *qp = to_rv(ex);
	struct rv_wr_slot *slot = open_slot(qp);

	if (!slot)
		return;
	if (n > (size_t)MAX_SGE) {
		fail(qp, EINVAL);
		return;
	}
	memcpy(slot->sge, list, n * sizeof(*list));
	slot->wr.num_sge = (int)n;
	slot->wr.send_flags &= ~(unsigned)IBV_SEND_INLINE;
}

static void set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	set_sge_list(ex, 1, &sge);
}

static void set_inline_data_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_data_buf *bufs)
{
	struct rv_qp *qp = to_rv(ex);
	struct rv_wr_slot *slot = open_slot(qp);
	size_t len = 0;

	if (!slot)
		return;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > MAX_INLINE - len) {
			fail(qp, EINVAL);
			return;
		}
		memcpy(slot->inline_data + len, bufs[i].addr, bufs[i].length);
		len += bufs[i].length;
	}
	/* The address is filled in by complete(): the slots may still move. */
	slot->sge[0] = (struct ibv_sge){ .length = (uint32_t)len };
	slot->wr.num_sge = 1;
	slot->wr.send_flags |= IBV_SEND_INLINE;
}

static void set_inline_data(struct ibv_qp_ex *ex, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	set_inline_data_list(ex, 1, &buf);
}

static void wr_start(struct ibv_qp_ex *ex)
{
	struct rv_qp *qp = to_rv(ex);

	pthread_mutex_lock(&qp->send_lock);
	qp->nslots = 0;
	qp->build_err = 0;
}

static void link_slots(struct rv_qp *qp)
{
	for (unsigned i = 0; i < qp->nslots; i++) {
		struct rv_wr_slot *slot = &qp->slots[i];

		slot->wr.sg_list = slot->sge;
		if (slot->wr.send_flags & IBV_SEND_INLINE)
			slot->sge[0].addr = (uintptr_t)slot->inline_data;
		slot->wr.next = i + 1 < qp->nslots ? &qp->slots[i + 1].wr : NULL;
	}
}

/* The slots in order: each run of ordinary work requests as one list, each FLUSH by
 * itself (ibv_send_wr has no room for one). */
static int post_slots(struct rv_qp *qp)
{
	struct ibv_send_wr *bad;
	unsigned i = 0;
	int err = 0;

	link_slots(qp);
	while (i < qp->nslots && !err) {
		unsigned run = i;

		if (qp->slots[i].is_flush) {
			err = rocemu_post_flush(qp->qp, &qp->slots[i++].flush);
			continue;
		}
		while (i + 1 < qp->nslots && !qp->slots[i + 1].is_flush)
			i++;
		qp->slots[i].wr.next = NULL;
		err = rocemu_post_send(qp->qp, &qp->slots[run].wr, &bad);
		i++;
	}
	return err;
}

static int wr_complete(struct ibv_qp_ex *ex)
{
	struct rv_qp *qp = to_rv(ex);
	int err = qp->build_err;

	if (!err && qp->nslots)
		err = post_slots(qp);
	qp->nslots = 0;
	pthread_mutex_unlock(&qp->send_lock);
	return err;
}

static void wr_abort(struct ibv_qp_ex *ex)
{
	struct rv_qp *qp = to_rv(ex);

	qp->nslots = 0;
	pthread_mutex_unlock(&qp->send_lock);
}

/* What send_ops_flags could not ask for: refused at creation, so never called. */
static void wr_unsupported(struct rv_qp *qp, const char *what)
{
	rv_unsupported(what, "it does not exist in rocemu");
	fail(qp, EOPNOTSUPP);
}

/* The bind info is copied: the caller's may be gone by ibv_wr_complete. */
static void wr_bind_mw(struct ibv_qp_ex *ex, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = open_wr(ex, IBV_WR_BIND_MW);

	if (!wr)
		return;
	if (!mw || !info) {
		fail(to_rv(ex), EINVAL);
		return;
	}
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *info;
}

static void wr_local_inv(struct ibv_qp_ex *ex, uint32_t rkey)
{
	struct ibv_send_wr *wr = open_wr(ex, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = rkey;
}

static void wr_send_tso(struct ibv_qp_ex *ex, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	wr_unsupported(to_rv(ex), "ibv_wr_send_tso");
}

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct rv_wr_slot *slot = open_slot(to_rv(ex));

	if (!slot)
		return;
	slot->wr.wr.ud.ah = ah;
	slot->wr.wr.ud.remote_qpn = qpn;
	slot->wr.wr.ud.remote_qkey = qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *ex, uint32_t srqn)
{
	(void)srqn;
	wr_unsupported(to_rv(ex), "ibv_wr_set_xrc_srqn");
}

/* The 8 bytes are copied now, as rxe's provider takes them; they travel as one entry to
 * the slot's own copy, which needs no lkey (complete() points the entry at it). */
static void wr_atomic_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr,
			    const void *data)
{
	struct ibv_send_wr *wr = wr_rdma(ex, IBV_WR_ATOMIC_WRITE, rkey, addr);
	struct rv_wr_slot *slot = open_slot(to_rv(ex));

	if (!wr || !slot)
		return;
	memcpy(slot->inline_data, data, 8);
	slot->sge[0] = (struct ibv_sge){ .length = 8 };
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_INLINE;
}

/* Checked now: a FLUSH that cannot be made fails ibv_wr_complete before any of the list
 * is posted. */
static void wr_flush(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, size_t len,
		     uint8_t type, uint8_t level)
{
	struct rv_qp *qp = to_rv(ex);
	struct ibv_send_wr *wr = open_wr(ex, (enum ibv_wr_opcode)PROTO_WR_FLUSH);
	struct rv_wr_slot *slot = open_slot(qp);

	if (!wr || !slot)
		return;
	if (ex->qp_base.qp_type != IBV_QPT_RC || !type ||
	    (type & ~(PROTO_FLUSH_GLOBAL | PROTO_FLUSH_PERSISTENT)) || level > PROTO_FLUSH_MR ||
	    len > (1ull << 31)) {
		fail(qp, EINVAL);
		return;
	}
	slot->is_flush = true;
	slot->flush = (struct rocemu_flush_wr){ .wr_id = wr->wr_id, .send_flags = wr->send_flags,
						.rkey = rkey, .remote_addr = addr, .length = len,
						.type = type, .level = level };
}

void rv_qp_ex_init(struct rv_qp *qp)
{
	struct ibv_qp_ex *ex = &qp->ex;

	ex->wr_atomic_cmp_swp = wr_cmp_swp;
	ex->wr_atomic_fetch_add = wr_fetch_add;
	ex->wr_bind_mw = wr_bind_mw;
	ex->wr_local_inv = wr_local_inv;
	ex->wr_rdma_read = wr_rdma_read;
	ex->wr_rdma_write = wr_rdma_write;
	ex->wr_rdma_write_imm = wr_rdma_write_imm;
	ex->wr_send = wr_send;
	ex->wr_send_imm = wr_send_imm;
	ex->wr_send_inv = wr_send_inv;
	ex->wr_send_tso = wr_send_tso;
	ex->wr_set_ud_addr = wr_set_ud_addr;
	ex->wr_set_xrc_srqn = wr_set_xrc_srqn;
	ex->wr_set_inline_data = set_inline_data;
	ex->wr_set_inline_data_list = set_inline_data_list;
	ex->wr_set_sge = set_sge;
	ex->wr_set_sge_list = set_sge_list;
	ex->wr_start = wr_start;
	ex->wr_complete = wr_complete;
	ex->wr_abort = wr_abort;
	ex->wr_atomic_write = wr_atomic_write;
	qp->wr_flush = wr_flush;
}

void rv_qp_ex_free(struct rv_qp *qp)
{
	free(qp->slots);
}
