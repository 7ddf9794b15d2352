/* Posting work requests: the fast path. Entries are written into the shared rings, the
 * producer index is published once per batch (release, so the daemon sees whole
 * entries), and one doorbell write wakes the daemon. No state check here: the daemon
 * rejects or flushes what the QP's state does not allow, as a verbs device does. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

static bool ring_full(const struct ring *r)
{
	return r->next - ring_load(&r->ctl->cons) >= r->count;
}

/* The index is published, then (full fence) the daemon's flag read: while the daemon
 * polls this ring it sees the index without a doorbell, and once it has cleared the flag
 * it looks at the index again before it sleeps (proto.h), so one of the two sees the
 * other. A receive ring rings only for a QP in ERROR (PROTO_RING_LAZY): otherwise the
 * daemon reads it when a message arrives. The write is the post's only syscall. */
static void ring_doorbell(struct qp_priv *qp, struct ring *r)
{
	uint64_t one = 1;

	ring_store(&r->ctl->prod, r->next);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->ctl->cons_flags, __ATOMIC_RELAXED) &
	    (PROTO_RING_POLLED | PROTO_RING_LAZY))
		return;
	/* EAGAIN means the pipe is full: the daemon has a wakeup pending anyway. */
	while (write(qp->doorbell_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static bool opcode_supported(enum ibv_wr_opcode opcode)
{
	return opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	       opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
	       opcode == IBV_WR_SEND_WITH_INV || opcode == IBV_WR_RDMA_READ ||
	       opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	       opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV ||
	       opcode == IBV_WR_ATOMIC_WRITE;
}

static bool is_atomic(enum ibv_wr_opcode opcode)
{
	return opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Entry i of a program's sg_list, wherever it lies: libiscsi's sits in a packed struct, 4
 * bytes off the 8 its 64-bit address wants (as the kernel's providers, which copy it the
 * same way on x86, never notice). */
static struct ibv_sge sge_at(const struct ibv_sge *sg_list, int i)
{
	struct ibv_sge sge;

	memcpy(&sge, (const char *)sg_list + (size_t)i * sizeof(sge), sizeof(sge));
	return sge;
}

static uint64_t sg_list_bytes(const struct ibv_sge *sg_list, int num_sge)
{
	uint64_t total = 0;

	for (int i = 0; i < num_sge; i++)
		total += sge_at(sg_list, i).length;
	return total;
}

/* As rxe's provider: an atomic names an 8-byte aligned remote address and has room for
 * the 8-byte original value. */
static int check_atomic_wr(struct rocemu_context *ctx, const struct ibv_send_wr *wr)
{
	if (wr->wr.atomic.remote_addr & 7)
		return rpc_fail(ctx, EINVAL, "atomic remote_addr 0x%llx is not 8-byte aligned",
				(unsigned long long)wr->wr.atomic.remote_addr);
	if (sg_list_bytes(wr->sg_list, wr->num_sge) < 8)
		return rpc_fail(ctx, EINVAL, "an atomic needs 8 bytes of local SGEs for the "
				"original value");
	return 0;
}

/* A WQE's slot has room for the SGEs its queue was made with, no more. */
static int check_sg_list(struct rocemu_context *ctx, int num_sge, const struct ibv_sge *sg_list,
			 uint32_t max_sge)
{
	if (num_sge < 0 || (uint32_t)num_sge > max_sge || (num_sge && !sg_list))
		return rpc_fail(ctx, EINVAL, "num_sge %d: the queue was made for at most %u, "
				"with an sg_list", num_sge, max_sge);
	return 0;
}

/* SENDs and WRITEs only: for READs and atomics the data's place is the point (an ATOMIC
 * WRITE's 8 bytes are taken at post anyway). */
static bool goes_inline(const struct ibv_send_wr *wr)
{
	return (wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ &&
	       !is_atomic(wr->opcode) && wr->opcode != IBV_WR_ATOMIC_WRITE;
}

/* An ATOMIC WRITE's 8 bytes, read from its entries now (ibv_wr_atomic_write hands them
 * over so), to an 8-byte aligned address. */
static int check_atomic_write_wr(struct rocemu_context *ctx, const struct ibv_send_wr *wr)
{
	if (wr->wr.rdma.remote_addr & 7)
		return rpc_fail(ctx, EINVAL, "ATOMIC WRITE remote_addr 0x%llx is not 8-byte aligned",
				(unsigned long long)wr->wr.rdma.remote_addr);
	if (sg_list_bytes(wr->sg_list, wr->num_sge) != 8)
		return rpc_fail(ctx, EINVAL, "an ATOMIC WRITE writes 8 bytes: its entries hold %llu",
				(unsigned long long)sg_list_bytes(wr->sg_list, wr->num_sge));
	return 0;
}

static int check_inline(struct qp_priv *qp, const struct ibv_send_wr *wr)
{
	uint64_t total = sg_list_bytes(wr->sg_list, wr->num_sge);

	if (total > qp->max_inline)
		return rpc_fail(qp->pub.context, EINVAL, "%llu bytes inline: the QP was created "
				"with max_inline_data %u", (unsigned long long)total,
				qp->max_inline);
	return 0;
}

/* The 8 bytes of an ATOMIC WRITE (check_atomic_write_wr counted them), in memory order:
 * they travel in the fixed fields, so a slot with no room for entries takes one too. */
static uint64_t atomic_write_bytes(const struct ibv_send_wr *wr)
{
	uint8_t bytes[8];
	uint32_t at = 0;
	uint64_t value;

	for (int i = 0; i < wr->num_sge; i++) {
		struct ibv_sge sge = sge_at(wr->sg_list, i);

		memcpy(bytes + at, (const void *)(uintptr_t)sge.addr, sge.length);
		at += sge.length;
	}
	memcpy(&value, bytes, sizeof(value));
	return value;
}

/* The data goes into the WQE now: the buffers need no lkey and may be reused at once. */
static void copy_inline(struct proto_swqe *slot, const struct ibv_send_wr *wr)
{
	uint32_t at = 0;

	for (int i = 0; i < wr->num_sge; i++) {
		struct ibv_sge sge = sge_at(wr->sg_list, i);

		memcpy(slot->inline_data + at, (const void *)(uintptr_t)sge.addr, sge.length);
		at += sge.length;
	}
	slot->inline_len = at;
	slot->num_sge = 0;
}

/* A UD QP sends datagrams: SENDs to an address handle of this context. */
static int check_ud_wr(struct qp_priv *qp, const struct ibv_send_wr *wr)
{
	struct rocemu_context *ctx = qp->pub.context;

	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM)
		return rpc_fail(ctx, EINVAL, "opcode %d on UD QP 0x%06x: only SEND [WITH IMM]",
				(int)wr->opcode, qp->pub.qp_num);
	if (!wr->wr.ud.ah)
		return rpc_fail(ctx, EINVAL, "a UD send needs an address handle (wr.ud.ah)");
	if (to_ah((struct rocemu_ah *)wr->wr.ud.ah)->pub.pd->ctx != ctx)
		return rpc_fail(ctx, EINVAL, "the address handle belongs to another context");
	return 0;
}

/* UC has no opcode for READs, atomics or SEND WITH INVALIDATE; it takes the local
 * operations, as rxe. */
static int check_uc_wr(struct qp_priv *qp, const struct ibv_send_wr *wr)
{
	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
	    wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
	    wr->opcode != IBV_WR_BIND_MW && wr->opcode != IBV_WR_LOCAL_INV)
		return rpc_fail(qp->pub.context, EINVAL, "opcode %d on UC QP 0x%06x: only SEND, "
				"RDMA WRITE [WITH IMM], BIND_MW and LOCAL_INV", (int)wr->opcode,
				qp->pub.qp_num);
	return 0;
}

/* A bind names the window and, unless it empties a type 1 window (length 0), the MR. */
static int check_bind_wr(struct rocemu_context *ctx, const struct ibv_send_wr *wr)
{
	if (!wr->bind_mw.mw)
		return rpc_fail(ctx, EINVAL, "IBV_WR_BIND_MW needs bind_mw.mw");
	if (wr->bind_mw.bind_info.length && !wr->bind_mw.bind_info.mr)
		return rpc_fail(ctx, EINVAL, "IBV_WR_BIND_MW of %llu bytes needs bind_info.mr",
				(unsigned long long)wr->bind_mw.bind_info.length);
	return 0;
}

static int check_send_wr(struct qp_priv *qp, const struct ibv_send_wr *wr)
{
	struct rocemu_context *ctx = qp->pub.context;

	if (qp->ud && check_ud_wr(qp, wr))
		return EINVAL;
	if (qp->uc && check_uc_wr(qp, wr))
		return EINVAL;
	if (!opcode_supported(wr->opcode))
		return rpc_fail(ctx, EINVAL, "opcode %d: RDMA WRITE [WITH IMM], SEND [WITH IMM "
				"or INV], RDMA READ, the two atomics, ATOMIC WRITE, BIND_MW and LOCAL_INV are supported", (int)wr->opcode);
	if (check_sg_list(ctx, wr->num_sge, wr->sg_list, qp->max_send_sge))
		return EINVAL;
	if (is_atomic(wr->opcode) && check_atomic_wr(ctx, wr))
		return EINVAL;
	if (wr->opcode == IBV_WR_BIND_MW && check_bind_wr(ctx, wr))
		return EINVAL;
	if (wr->opcode == IBV_WR_ATOMIC_WRITE && check_atomic_write_wr(ctx, wr))
		return EINVAL;
	if (goes_inline(wr) && check_inline(qp, wr))
		return EINVAL;
	if (ring_full(&qp->sq))
		return rpc_fail(ctx, ENOMEM, "the send queue is full (%u entries)", qp->sq.count);
	return 0;
}

static void copy_sg_list(struct proto_sge *to, const struct ibv_sge *from, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = sge_at(from, i);

		to[i] = (struct proto_sge){ .addr = sge.addr, .length = sge.length,
					    .lkey = sge.lkey };
	}
}

/* BIND_MW and LOCAL_INV carry no data; the window's place goes where a WRITE's would. */
static void fill_local_op(struct proto_swqe *slot, const struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *info = &wr->bind_mw.bind_info;

	slot->num_sge = 0;
	slot->flags &= ~(uint32_t)IBV_SEND_INLINE;
	if (wr->opcode == IBV_WR_LOCAL_INV) {
		slot->imm = wr->invalidate_rkey;
		slot->remote_addr = 0;
		slot->rkey = 0;
		return;
	}
	slot->remote_addr = info->addr;
	slot->compare_add = info->length;
	slot->rkey = wr->bind_mw.rkey;
	slot->mw_rkey = wr->bind_mw.mw->rkey;
	slot->mr_lkey = info->mr ? info->mr->lkey : 0;
	slot->mw_access = info->mw_access_flags;
}

/* The fixed fields are built aside and copied: the slot ends where its room does, so the
 * whole struct must never be written to it. */
static int post_one_send(struct qp_priv *qp, const struct ibv_send_wr *wr)
{
	struct proto_swqe *slot;
	int err = check_send_wr(qp, wr);

	if (err)
		return err;
	slot = ring_slot(&qp->sq, qp->sq.next);
	memcpy(slot, &(struct proto_swqe){
		.wr_id = wr->wr_id,
		.opcode = wr->opcode,
		.flags = wr->send_flags,
		.remote_addr = wr->wr.rdma.remote_addr,
		.rkey = wr->wr.rdma.rkey,
		.imm = wr->imm_data,
		.num_sge = (uint32_t)wr->num_sge,
	}, offsetof(struct proto_swqe, sge));
	if (qp->ud) {
		slot->ah = ((struct rocemu_ah *)wr->wr.ud.ah)->handle;
		slot->remote_qpn = wr->wr.ud.remote_qpn;
		slot->remote_qkey = wr->wr.ud.remote_qkey;
		slot->remote_addr = 0;
		slot->rkey = 0;
	} else if (is_atomic(wr->opcode)) {
		slot->remote_addr = wr->wr.atomic.remote_addr;
		slot->rkey = wr->wr.atomic.rkey;
		slot->compare_add = wr->wr.atomic.compare_add;
		slot->swap = wr->wr.atomic.swap;
	}
	if (wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV) {
		fill_local_op(slot, wr);
	} else if (wr->opcode == IBV_WR_ATOMIC_WRITE) {
		slot->compare_add = atomic_write_bytes(wr);
		slot->num_sge = 0;
		slot->flags &= ~(uint32_t)IBV_SEND_INLINE;
	} else if (goes_inline(wr))
		copy_inline(slot, wr);
	else
		copy_sg_list(slot->sge, wr->sg_list, wr->num_sge);
	qp->sq.next++;
	return 0;
}

/* Nobody consumes the rings of a daemon that is gone. Sends are taken from RTS on (IBA
 * C10-29: a post to a QP in RESET, INIT or RTR is an immediate error, as on rxe). */
static int check_takes_sends(struct qp_priv *qp)
{
	if (qp->pub.context->dead)
		return rpc_gone(qp->pub.context);
	if (qp->pub.state == IBV_QPS_RESET || qp->pub.state == IBV_QPS_INIT ||
	    qp->pub.state == IBV_QPS_RTR)
		return rpc_fail(qp->pub.context, EINVAL, "QP 0x%06x takes sends from RTS on, not "
				"in %s", qp->pub.qp_num, proto_qp_state_name(qp->pub.state));
	return 0;
}

int rocemu_post_send(struct rocemu_qp *pub, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct qp_priv *qp;
	uint32_t start;
	int err;

	if (!pub)
		return EINVAL;
	qp = to_qp(pub);
	start = qp->sq.next;
	err = check_takes_sends(qp);
	while (wr && !err) {
		err = post_one_send(qp, wr);
		if (!err)
			wr = wr->next;
	}
	if (err && bad)
		*bad = wr;
	if (qp->sq.next != start)
		ring_doorbell(qp, &qp->sq);
	return err;
}

static int check_flush_wr(struct qp_priv *qp, const struct rocemu_flush_wr *wr)
{
	struct rocemu_context *ctx = qp->pub.context;

	if (qp->ud || qp->uc)
		return rpc_fail(ctx, EINVAL, "a FLUSH on QP 0x%06x: RC QPs only", qp->pub.qp_num);
	if (!wr->type || (wr->type & ~(PROTO_FLUSH_GLOBAL | PROTO_FLUSH_PERSISTENT)))
		return rpc_fail(ctx, EINVAL, "FLUSH placement type %u: IBV_FLUSH_GLOBAL (1), "
				"IBV_FLUSH_PERSISTENT (2) or both", wr->type);
	if (wr->level > PROTO_FLUSH_MR)
		return rpc_fail(ctx, EINVAL, "FLUSH selectivity level %u: IBV_FLUSH_RANGE (0) or "
				"IBV_FLUSH_MR (1)", wr->level);
	if (wr->length > (1ull << 31))
		return rpc_fail(ctx, EINVAL, "FLUSH of %llu bytes: at most 2^31",
				(unsigned long long)wr->length);
	if (ring_full(&qp->sq))
		return rpc_fail(ctx, ENOMEM, "the send queue is full (%u entries)", qp->sq.count);
	return 0;
}

int rocemu_post_flush(struct rocemu_qp *pub, const struct rocemu_flush_wr *wr)
{
	struct qp_priv *qp;
	int err;

	if (!pub || !wr)
		return EINVAL;
	qp = to_qp(pub);
	err = check_takes_sends(qp);
	if (!err)
		err = check_flush_wr(qp, wr);
	if (err)
		return err;
	memcpy(ring_slot(&qp->sq, qp->sq.next), &(struct proto_swqe){
		.wr_id = wr->wr_id,
		.opcode = PROTO_WR_FLUSH,
		.flags = wr->send_flags & (IBV_SEND_SIGNALED | IBV_SEND_FENCE),
		.remote_addr = wr->remote_addr,
		.rkey = wr->rkey,
		.flush_len = (uint32_t)wr->length,
		.flush_type = wr->type,
		.flush_level = wr->level,
	}, offsetof(struct proto_swqe, sge));
	qp->sq.next++;
	ring_doorbell(qp, &qp->sq);
	return 0;
}

/* One receive WQE into ring r (a QP's RQ or an SRQ). */
static int post_one_recv(struct rocemu_context *ctx, struct ring *r, uint32_t max_sge,
			 const struct ibv_recv_wr *wr)
{
	struct proto_rwqe *slot;

	if (check_sg_list(ctx, wr->num_sge, wr->sg_list, max_sge))
		return EINVAL;
	if (ring_full(r))
		return rpc_fail(ctx, ENOMEM, "the receive queue is full (%u entries)", r->count);
	slot = ring_slot(r, r->next);
	slot->wr_id = wr->wr_id;
	slot->num_sge = (uint32_t)wr->num_sge;
	slot->pad = 0;
	copy_sg_list(slot->sge, wr->sg_list, wr->num_sge);
	r->next++;
	return 0;
}

static int post_recv_list(struct rocemu_context *ctx, struct ring *r, uint32_t max_sge,
			  struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int err = ctx->dead ? rpc_gone(ctx) : 0;

	while (wr && !err) {
		err = post_one_recv(ctx, r, max_sge, wr);
		if (!err)
			wr = wr->next;
	}
	if (err && bad)
		*bad = wr;
	return err;
}

int rocemu_post_recv(struct rocemu_qp *pub, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct qp_priv *qp;
	uint32_t start;
	int err;

	if (!pub)
		return EINVAL;
	qp = to_qp(pub);
	if (qp->has_srq) {
		if (bad)
			*bad = wr;
		return rpc_fail(pub->context, EINVAL, "QP 0x%06x takes its receives from an SRQ: "
				"post them there", pub->qp_num);
	}
	if (qp->pub.state == IBV_QPS_RESET) {
		if (bad)
			*bad = wr;
		return rpc_fail(pub->context, EINVAL, "QP 0x%06x takes receives from INIT on, not "
				"in RESET", pub->qp_num);
	}
	start = qp->rq.next;
	err = post_recv_list(pub->context, &qp->rq, qp->max_recv_sge, wr, bad);
	if (qp->rq.next != start)
		ring_doorbell(qp, &qp->rq);
	return err;
}

/* Nothing waits on an SRQ: the daemon looks when a SEND needs a WQE. */
int rocemu_post_srq_recv(struct rocemu_srq *srq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad)
{
	uint32_t start;
	int err;

	if (!srq)
		return EINVAL;
	start = srq->ring.next;
	err = post_recv_list(srq->ctx, &srq->ring, srq->max_sge, wr, bad);
	if (srq->ring.next != start)
		ring_store(&srq->ring.ctl->prod, srq->ring.next);
	return err;
}
