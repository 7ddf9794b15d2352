/* The requester of an RC or UC QP: SEND, RDMA WRITE, READ, atomic and FLUSH work requests from
 * the client's ring, checked once as they are copied out, segmented by the path MTU and
 * sent in the QP's turns, at most a window of PSNs unacknowledged and max_rd_atomic
 * READs and atomics outstanding. The completer (comp.c) moves it back for a resend.
 *
 * A UC QP sends SEND and RDMA WRITE [WITH IMMEDIATE] only, as RC's opcodes + 0x20, asks
 * for no ACK and never resends: each request is handed to the completer as its last
 * packet leaves, as rxe's requester does. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

#define MAX_MESSAGE (1ull << 31)

/* UC has no READ, atomic or SEND WITH INVALIDATE opcode (rxe's requester fails them with
 * IBV_WC_LOC_QP_OP_ERR; the client library refuses them at post already). Both take the
 * local operations, as on rxe. */
static bool qp_sends_opcode(const struct qp *qp, const struct send_wqe *w)
{
	if (wqe_is_local(w))
		return true;
	if (w->opcode == IBV_WR_ATOMIC_WRITE || wqe_is_flush(w))
		return qp->type == IBV_QPT_RC;
	if (qp->type == IBV_QPT_UC)
		return w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM ||
		       wqe_is_write(w);
	return wqe_is_send(w) || wqe_is_write(w) || wqe_wants_response(w);
}

/* The SGEs are copied only once their number is known to fit the slot they came from. */
static enum ibv_wc_status check_sges(struct qp *qp, struct send_wqe *w,
				     const struct proto_swqe *in)
{
	uint64_t total = 0;

	/* a QP given no max_rd_atomic could never issue a READ: refused, not left waiting */
	if (!qp_sends_opcode(qp, w) ||
	    (wqe_takes_rd_credit(w) && qp->attr.max_rd_atomic == 0) ||
	    (wqe_is_atomic(w) && (w->remote_addr & 7)))
		return IBV_WC_LOC_QP_OP_ERR;
	if (!sq_wqe_fits(qp, in, false))
		return IBV_WC_LOC_LEN_ERR;
	memcpy(w->sge, in->sge, (size_t)in->num_sge * sizeof(*w->sge));
	for (uint32_t i = 0; i < w->num_sge; i++) {
		const struct proto_sge *s = &w->sge[i];

		total += s->length;
		if (s->length && mr_lookup(qp->dev->mrs, s->lkey, qp->pd,
					   wqe_wants_response(w) ? IBV_ACCESS_LOCAL_WRITE : 0, s->addr,
					   s->length, NULL) != MR_OK)
			return IBV_WC_LOC_PROT_ERR;
	}
	if (total > MAX_MESSAGE || (wqe_is_atomic(w) && total < sizeof(uint64_t)))
		return IBV_WC_LOC_LEN_ERR;
	w->length = total;
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status check_inline(const struct qp *qp, const struct send_wqe *w,
				       const struct proto_swqe *in)
{
	if ((!wqe_is_send(w) && !wqe_is_write(w)) || !qp_sends_opcode(qp, w))
		return IBV_WC_LOC_QP_OP_ERR;
	return sq_wqe_fits(qp, in, true) ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
}

/* A FLUSH names its range (or its MR) and the placement type to reach, and no local
 * memory: RC only, a type of the two defined and a level of the two (the client library
 * refused anything else at post), and a READ's limits on length and max_rd_atomic. */
static void fetch_flush(const struct qp *qp, struct send_wqe *w, const struct proto_swqe *in)
{
	w->num_sge = 0;
	w->length = in->flush_len;
	w->flush_type = (uint8_t)in->flush_type;
	w->flush_level = (uint8_t)in->flush_level;
	w->local_error = qp_sends_opcode(qp, w) && qp->attr.max_rd_atomic &&
			 !(in->flush_type & ~(uint32_t)(PROTO_FLUSH_GLOBAL | PROTO_FLUSH_PERSISTENT)) &&
			 in->flush_level <= PROTO_FLUSH_MR && in->flush_len <= MAX_MESSAGE
				 ? IBV_WC_SUCCESS : IBV_WC_LOC_QP_OP_ERR;
}

/* Copies one entry out of the shared ring first, so the client cannot change it between
 * the checks and the use. */
static void fetch_one(struct qp *qp, uint32_t idx)
{
	struct proto_swqe in;
	struct send_wqe *w = wqe_at(qp, idx);
	uint32_t slot = idx & (qp->sq_entries - 1);

	sq_copy(qp, idx, &in);
	memset(w, 0, sizeof(*w));
	w->sge = qp->req.sges + (size_t)slot * qp->max_send_sge;
	w->wr_id = in.wr_id;
	w->opcode = in.opcode;
	w->signaled = qp->sq_sig_all || (in.flags & IBV_SEND_SIGNALED);
	w->fence = in.flags & IBV_SEND_FENCE;
	w->solicited = in.flags & IBV_SEND_SOLICITED;
	w->remote_addr = in.remote_addr;
	w->rkey = in.rkey;
	w->imm = in.imm;
	w->compare_add = in.compare_add;
	w->swap = in.swap;
	w->num_sge = in.num_sge;
	if (wqe_is_local(w)) {
		w->mw_rkey = in.mw_rkey;
		w->mr_lkey = in.mr_lkey;
		w->mw_access = in.mw_access;
		w->num_sge = 0;
		return;
	}
	if (wqe_is_flush(w)) {
		fetch_flush(qp, w, &in);
		return;
	}
	if (w->opcode == IBV_WR_ATOMIC_WRITE) {
		/* its 8 bytes came in compare_add; like an atomic, 8-byte aligned, and with a
		 * responder resource to take */
		w->num_sge = 0;
		w->length = sizeof(uint64_t);
		w->local_error = qp_sends_opcode(qp, w) && !(w->remote_addr & 7) &&
					 qp->attr.max_rd_atomic > 0
					 ? IBV_WC_SUCCESS : IBV_WC_LOC_QP_OP_ERR;
		return;
	}
	w->inlined = (in.flags & IBV_SEND_INLINE) && !wqe_wants_response(w);
	if (w->inlined) {
		w->length = in.inline_len;
		w->local_error = check_inline(qp, w, &in);
	} else {
		w->local_error = check_sges(qp, w, &in);
	}
	if (w->local_error != IBV_WC_SUCCESS)
		w->num_sge = 0;
}

/* Takes what the client posted. A producer index more than a ring ahead of what we
 * completed, or behind what we already took, is a client bug: the QP goes to the error
 * state. */
static bool fetch(struct qp *qp)
{
	uint32_t prod = __atomic_load_n(&qp->sq_ctl->prod, __ATOMIC_ACQUIRE);

	if (prod - qp->comp.idx > qp->sq_entries ||
	    prod - qp->comp.idx < qp->req.fetch_idx - qp->comp.idx) {
		log_limited("client pid %d: QP 0x%06x send ring index %u is beyond the ring",
			    (int)qp->owner->pid, qp->qpn, prod);
		return false;
	}
	while (qp->req.fetch_idx != prod)
		fetch_one(qp, qp->req.fetch_idx++);
	return true;
}

/* The send queue slot is given back before the completion is published: a client that
 * sees the completion and posts at once must find the slot free (its post would fail with
 * "the send queue is full" otherwise). */
void req_flush(struct qp *qp)
{
	if (!fetch(qp))
		qp->req.fetch_idx = qp->comp.idx; /* a lying producer index: nothing to flush */
	while (qp->comp.idx != qp->req.fetch_idx)
		comp_complete(qp, wqe_at(qp, qp->comp.idx), IBV_WC_WR_FLUSH_ERR);
	qp->req.send_idx = qp->req.fetch_idx;
	qp->req.send_pkt = 0;
}

/* SEND and WRITE share one layout: FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM; UC's is
 * RC's moved up by 0x20 (a UC request is never a SEND WITH INVALIDATE: check_sges). */
static uint8_t packet_opcode(const struct qp *qp, const struct send_wqe *w, uint32_t k)
{
	enum { FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM };
	uint8_t base = wqe_is_send(w) ? WIRE_OP_RC_SEND_FIRST : WIRE_OP_RC_WRITE_FIRST;
	bool imm = wqe_has_imm(w);
	bool inv = w->opcode == IBV_WR_SEND_WITH_INV;

	if (w->opcode == IBV_WR_ATOMIC_WRITE)
		return WIRE_OP_RC_ATOMIC_WRITE;
	if (qp->type == IBV_QPT_UC)
		base += WIRE_OP_UC_BASE;

	if (w->npkts == 1)
		return inv ? WIRE_OP_RC_SEND_ONLY_INV : base + (imm ? ONLY_IMM : ONLY);
	if (k == 0)
		return base + FIRST;
	if (k + 1 < w->npkts)
		return base + MIDDLE;
	return inv ? WIRE_OP_RC_SEND_LAST_INV : base + (imm ? LAST_IMM : LAST);
}

/* The inline data of request w, in its slot of the shared ring: the client may not reuse
 * the slot before w completes, so it is there at every (re)send, as an HCA reads a WQE
 * from host memory each time. A client that rewrites it changes only what its own QP
 * sends; its length was checked when w was fetched. */
static const uint8_t *inline_payload(const struct qp *qp, const struct send_wqe *w)
{
	return sq_slot(qp, (uint32_t)(w - qp->req.wqes))->inline_data;
}

/* Packet k of request w, with PSN psn: headers, payload gathered from the local MRs straight
 * into the frame, ICRC over both. */
static int send_packet(struct qp *qp, const struct send_wqe *w, uint32_t k, uint32_t psn)
{
	/* ibv_send_wr carries the immediate in network order, the rkey to invalidate in host
	 * order (the two share a union); wire_ext has both in host order */
	struct wire_ext ext = { .reth = { w->remote_addr, w->rkey, (uint32_t)w->length },
				.imm = ntohl(w->imm), .ieth = w->imm };
	struct wire_bth bth = { .opcode = packet_opcode(qp, w, k), .pkey = 0xffff,
				.dest_qp = qp->attr.dest_qpn, .psn = psn };
	uint64_t offset = (uint64_t)k * qp->pmtu;
	struct tx_pkt p;
	size_t n;

	if (k >= w->npkts)
		return -EFAULT;
	if (qp->resp.ack_due)
		resp_ack_before_request(qp);
	n = w->length - offset < qp->pmtu ? (size_t)(w->length - offset) : qp->pmtu;
	/* UC is never acknowledged: AckReq stays clear, as today's rxe leaves it */
	bth.ack_req = qp->type == IBV_QPT_RC &&
		      (k + 1 == w->npkts || ++qp->req.since_ackreq >= sched_ack_interval(qp->dev) ||
		       qp->dev->tp.inflight + 1 >= DEV_MAX_INFLIGHT);
	if (bth.ack_req)
		qp->req.since_ackreq = 0;
	bth.solicited = w->solicited && k + 1 == w->npkts;
	if (!tx_begin(qp, &bth, &ext, n, &p))
		return -EFAULT;
	if (w->opcode == IBV_WR_ATOMIC_WRITE)
		memcpy(p.payload, &w->compare_add, n);
	else if (w->inlined)
		memcpy(p.payload, inline_payload(qp, w) + offset, n);
	else if (sgl_gather(qp, w->sge, w->num_sge, offset, p.payload, n) < 0)
		return -EFAULT;
	tx_end(qp, &p, n);
	return 0;
}

/* A request of headers alone (a READ, an atomic, a FLUSH), AckReq set: it is answered. */
static int send_header_request(struct qp *qp, uint8_t opcode, uint32_t psn,
			       const struct wire_ext *ext)
{
	struct wire_bth bth = { .opcode = opcode, .pkey = 0xffff, .dest_qp = qp->attr.dest_qpn,
				.psn = psn, .ack_req = true };
	uint8_t *frame = net_tx_slot(&qp->dev->port);
	size_t len = wire_build(frame, DEV_FRAME_MAX, &qp->path, qp->dev->port.ip_id++, &bth, ext,
				NULL, 0);

	if (!len)
		return -EFAULT;
	net_tx_commit(&qp->dev->port, len);
	return 0;
}

/* A READ request for its responses k on (from k = 0, or from the first one missing): the
 * RETH moves on by the bytes already placed. */
static int send_read_request(struct qp *qp, const struct send_wqe *w, uint32_t k,
			     uint32_t psn)
{
	uint64_t done = (uint64_t)k * qp->pmtu;
	struct wire_ext ext = { .reth = { w->remote_addr + done, w->rkey,
					  (uint32_t)(w->length - done) } };

	return send_header_request(qp, WIRE_OP_RC_READ_REQUEST, psn, &ext);
}

static int send_flush_request(struct qp *qp, const struct send_wqe *w, uint32_t psn)
{
	struct wire_ext ext = { .feth = { w->flush_type, w->flush_level },
				.reth = { w->remote_addr, w->rkey, (uint32_t)w->length } };

	return send_header_request(qp, WIRE_OP_RC_FLUSH, psn, &ext);
}

static int send_atomic_request(struct qp *qp, const struct send_wqe *w, uint32_t psn)
{
	struct wire_ext ext = { .atomic = { w->remote_addr, w->rkey, w->swap, w->compare_add } };
	bool cmp_swap = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;

	if (!cmp_swap) {
		ext.atomic.swap_add = w->compare_add;
		ext.atomic.compare = 0;
	}
	return send_header_request(qp, cmp_swap ? WIRE_OP_RC_COMPARE_SWAP : WIRE_OP_RC_FETCH_ADD,
				   psn, &ext);
}

/* The interval runs from now, not from the start of this turn of the loop: a turn that
 * served many clients' requests can itself last longer than a short timeout. */
void req_arm_timer(struct qp *qp)
{
	if (!qp->attr.timeout || !req_outstanding(qp))
		return;
	ev_now_update(qp->dev->loop);
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_set(&qp->retry_timer, rto_interval(qp), 0);
	ev_timer_start(qp->dev->loop, &qp->retry_timer);
}

/* Puts the send cursor on PSN psn: the request and packet that carry it. */
void req_seek(struct qp *qp, uint32_t psn)
{
	for (uint32_t i = qp->comp.idx; i != qp->req.fetch_idx; i++) {
		struct send_wqe *w = wqe_at(qp, i);

		if (!w->started || wire_psn_diff(psn, w->first_psn + w->npkts) < 0) {
			qp->req.send_idx = i;
			qp->req.send_pkt = w->started ? (psn - w->first_psn) & WIRE_PSN_MASK : 0;
			qp->req.snd_nxt = psn;
			return;
		}
	}
	qp->req.send_idx = qp->req.fetch_idx;
	qp->req.send_pkt = 0;
	qp->req.snd_nxt = psn;
}

/* The reason for a status a request was refused with at fetch (or send) time. */
static enum proto_failure local_failure(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_LOC_QP_OP_ERR: return PROTO_FAILED_local_opcode;
	case IBV_WC_MW_BIND_ERR: return PROTO_FAILED_mw_bind;
	case IBV_WC_LOC_LEN_ERR: return PROTO_FAILED_local_length;
	default: return PROTO_FAILED_local_lkey;
	}
}

/* A request refused at fetch time completes in order, once everything before it has. */
static bool blocked_by_local_error(struct qp *qp, struct send_wqe *w)
{
	if (w->local_error == IBV_WC_SUCCESS)
		return false;
	if (qp->comp.idx == qp->req.send_idx && !req_outstanding(qp))
		comp_fail_head(qp, local_failure(w->local_error));
	return true;
}

/* A READ waits while max_rd_atomic of them are outstanding; a fenced request while any is. */
static bool waits_for_reads(const struct qp *qp, const struct send_wqe *w)
{
	if (w->started)
		return false;
	if (wqe_takes_rd_credit(w) && qp->req.rd_outstanding >= qp->attr.max_rd_atomic)
		return true;
	return w->fence && qp->req.rd_outstanding > 0;
}

/* BIND_MW and LOCAL_INV, as rxe's requester does them: in their turn (a fence holds them
 * too), nothing sent. One that fails completes with IBV_WC_MW_BIND_ERR or
 * IBV_WC_LOC_QP_OP_ERR once everything before it has, and the QP goes to the error
 * state; one that succeeds completes in order with those before it. */
static int execute_local(struct qp *qp, const struct send_wqe *w)
{
	struct mr_mw_bind bind = { .mw_rkey = w->mw_rkey, .new_rkey = w->rkey,
				   .mr_lkey = w->mr_lkey, .access = (int)w->mw_access,
				   .addr = w->remote_addr, .length = w->compare_add };

	if (w->opcode == IBV_WR_LOCAL_INV)
		return mr_mw_invalidate(qp->dev->mrs, w->imm, qp->pd, NULL);
	return mr_mw_bind(mr_pd_client(qp->pd), qp->pd, qp, &bind);
}

/* Completes the local operations done at the head of the queue: the completer completes
 * those behind a request still outstanding when its ACK comes (their PSN range is empty). */
static void complete_local_done(struct qp *qp)
{
	while (qp->comp.idx != qp->req.send_idx) {
		struct send_wqe *w = wqe_at(qp, qp->comp.idx);

		if (!wqe_is_local(w) || !w->started || w->local_error != IBV_WC_SUCCESS)
			break;
		comp_complete(qp, w, IBV_WC_SUCCESS);
	}
}

static void run_local(struct qp *qp, struct send_wqe *w)
{
	w->started = true;
	w->first_psn = qp->req.snd_nxt;
	w->npkts = 0;
	if (execute_local(qp, w) < 0) {
		w->local_error = w->opcode == IBV_WR_BIND_MW ? IBV_WC_MW_BIND_ERR
							      : IBV_WC_LOC_QP_OP_ERR;
		blocked_by_local_error(qp, w);
		return;
	}
	qp->req.send_idx++;
	if (qp->type == IBV_QPT_UC)
		comp_on_sent(qp);
	complete_local_done(qp);
}

static void start(struct qp *qp, struct send_wqe *w)
{
	w->started = true;
	w->first_psn = qp->req.snd_nxt;
	w->npkts = wqe_is_atomic(w) || wqe_is_flush(w) ? 1 : qp_packets(qp, w->length);
	if (wqe_takes_rd_credit(w))
		qp->req.rd_outstanding++;
	if (!wqe_wants_response(w))
		qp->dev->cnt.rdma_sends++;
}

/* The payload bytes of packet k of w: what the congestion-controlled rate is spent on. */
static size_t packet_payload(const struct qp *qp, const struct send_wqe *w, uint32_t k)
{
	uint64_t offset = (uint64_t)k * qp->pmtu;

	if (wqe_wants_response(w) || offset >= w->length)
		return 0;
	return w->length - offset < qp->pmtu ? (size_t)(w->length - offset) : qp->pmtu;
}

/* Sends packet send_pkt of w (a READ: its one request, which covers the rest of its PSNs);
 * false when it cannot be built. */
static bool send_next(struct qp *qp, struct send_wqe *w)
{
	uint32_t covers = wqe_is_read(w) ? w->npkts - qp->req.send_pkt : 1;
	int rc = wqe_is_read(w)	  ? send_read_request(qp, w, qp->req.send_pkt, qp->req.snd_nxt)
		 : wqe_is_atomic(w) ? send_atomic_request(qp, w, qp->req.snd_nxt)
		 : wqe_is_flush(w)  ? send_flush_request(qp, w, qp->req.snd_nxt)
				    : send_packet(qp, w, qp->req.send_pkt, qp->req.snd_nxt);

	if (rc < 0)
		return false;
	cc_on_sent(qp, packet_payload(qp, w, qp->req.send_pkt) + WIRE_BASE_LEN);
	if (wqe_takes_rd_credit(w))
		qp->req.since_ackreq = 0;   /* a READ or atomic request is always answered */
	/* a READ's responses stream for as long as it is large: not a round trip */
	if (qp->type == IBV_QPT_RC && qp->req.snd_nxt == qp->req.snd_max && !wqe_is_read(w))
		rto_on_first_send(qp, qp->req.snd_nxt);
	qp->req.snd_nxt = (qp->req.snd_nxt + covers) & WIRE_PSN_MASK;
	/* nothing of UC's waits for an answer: what left is done with */
	if (qp->type == IBV_QPT_UC)
		qp->req.snd_una = qp->req.snd_nxt;
	if (wire_psn_diff(qp->req.snd_nxt, qp->req.snd_max) > 0) {
		qp->req.snd_max = qp->req.snd_nxt;
		sched_account(qp);
	}
	qp->req.send_pkt += covers;
	if (qp->req.send_pkt == w->npkts) {
		qp->req.send_idx++;
		qp->req.send_pkt = 0;
		if (qp->type == IBV_QPT_UC)
			comp_on_sent(qp);
	}
	return true;
}

/* Sends what the window, the READ limit and the congestion rate allow, QP_BURST packets at
 * most before the QP waits for its next turn (sched.c). */
void req_pump(struct qp *qp)
{
	unsigned burst = QP_BURST;

	if (qp->type == IBV_QPT_UD) {
		ud_pump(qp);
		return;
	}
	if (qp->state == IBV_QPS_ERR) {
		req_flush(qp);
		return;
	}
	if (qp->state != IBV_QPS_RTS || qp->req.rnr_wait)
		return;
	if (!fetch(qp)) {
		qp_to_error(qp);
		return;
	}
	while (qp->req.send_idx != qp->req.fetch_idx &&
	       wire_psn_diff(qp->req.snd_nxt, qp->req.snd_una) < (int32_t)qp->req.window) {
		struct send_wqe *w = wqe_at(qp, qp->req.send_idx);

		if (blocked_by_local_error(qp, w))
			return;
		if (waits_for_reads(qp, w))
			break;
		if (wqe_is_local(w)) {
			if (!w->started)
				run_local(qp, w);
			else
				qp->req.send_idx++;   /* done already: a resend passes over it */
			continue;
		}
		if (!cc_may_send(qp))
			break;
		/* a resend takes no new credit: its PSNs are counted already. Out of credit,
		 * one more packet goes if those before it asked for no ACK: it asks, or they
		 * would hold their credit until the timer (the overdraft is a packet per QP) */
		if (qp->type == IBV_QPT_RC && qp->req.snd_nxt == qp->req.snd_max &&
		    !sched_has_credit(qp) && !qp->req.since_ackreq)
			break;
		if (burst-- == 0) {
			sched_ready(qp);
			break;
		}
		if (!w->started)
			start(qp, w);
		if (!send_next(qp, w)) {
			/* its local MR went away since it was checked: it fails in its turn */
			w->local_error = IBV_WC_LOC_PROT_ERR;
			blocked_by_local_error(qp, w);
			return;
		}
	}
	if (req_outstanding(qp) && !ev_is_active(&qp->retry_timer))
		req_arm_timer(qp);
}

void req_rnr_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct qp *qp = w->data;

	(void)loop;
	(void)revents;
	qp->req.rnr_wait = false;
	req_pump(qp);
}

/* One read empties the pipe unless clients rang more than the buffer holds. A client
 * closes its end when it destroys the QP without waiting for the answer (PROTO_NO_REPLY),
 * so the end of the pipe may come before the destroy is read: the watcher stops rather
 * than wake the loop for it every turn. */
void req_doorbell_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct qp *qp = w->data;
	uint64_t rings[16];
	ssize_t n;

	(void)revents;
	while ((n = read(qp->doorbell_fd, rings, sizeof(rings))) == (ssize_t)sizeof(rings))
		;
	if (n == 0) {
		ev_io_stop(loop, w);
		return;
	}
	qp->dev->cnt.doorbells++;
	poll_adopt(qp);
	poll_doorbell(qp);
}
