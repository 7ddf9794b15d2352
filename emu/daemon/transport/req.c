/* Requester and completer of an RC QP: RDMA WRITE, SEND and READ work requests from the
 * client's ring, segmented by the path MTU, at most QP_MAX_INFLIGHT PSNs unacknowledged and
 * max_rd_atomic READs outstanding, completed in order when ACKed (a READ when its last
 * response is placed), resent go-back-N on a sequence NAK or a timeout (a READ from its
 * first missing response). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

#define MAX_MESSAGE (1ull << 31)

/* IBA's encoding of the minimal RNR NAK timer, in microseconds (index 0 is the largest). */
static const uint32_t rnr_usec[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560,
	3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840,
	245760, 327680, 491520,
};

static struct send_wqe *wqe_at(struct qp *qp, uint32_t idx)
{
	return &qp->wqes[idx & (qp->sq_entries - 1)];
}

static bool outstanding(const struct qp *qp)
{
	return qp->snd_max != qp->snd_una;
}

static bool wqe_is_send(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM ||
	       w->opcode == IBV_WR_SEND_WITH_INV;
}

static bool wqe_is_write(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool wqe_is_read(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ;
}

static bool wqe_is_atomic(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* READs and atomics are answered with data, and count against max_rd_atomic. */
static bool wqe_wants_response(const struct send_wqe *w)
{
	return wqe_is_read(w) || wqe_is_atomic(w);
}

static bool wqe_has_imm(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static enum ibv_wc_status check_sges(struct qp *qp, struct send_wqe *w)
{
	uint64_t total = 0;

	/* a QP given no max_rd_atomic could never issue a READ: refused, not left waiting */
	if ((!wqe_is_send(w) && !wqe_is_write(w) && !wqe_wants_response(w)) ||
	    (wqe_wants_response(w) && qp->attr.max_rd_atomic == 0) ||
	    (wqe_is_atomic(w) && (w->remote_addr & 7)))
		return IBV_WC_LOC_QP_OP_ERR;
	if (w->num_sge > PROTO_MAX_SGE)
		return IBV_WC_LOC_LEN_ERR;
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

static enum ibv_wc_status check_inline(const struct send_wqe *w)
{
	if (!wqe_is_send(w) && !wqe_is_write(w))
		return IBV_WC_LOC_QP_OP_ERR;
	return w->length <= PROTO_MAX_INLINE ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
}

/* Copies one entry out of the shared ring first, so the client cannot change it between
 * the checks and the use. */
static void fetch_one(struct qp *qp, uint32_t idx)
{
	struct proto_swqe in = qp->sq[idx & (qp->sq_entries - 1)];
	struct send_wqe *w = wqe_at(qp, idx);

	memset(w, 0, sizeof(*w));
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
	w->inlined = (in.flags & IBV_SEND_INLINE) && !wqe_wants_response(w);
	if (w->inlined) {
		w->length = in.inline_len;
		w->local_error = check_inline(w);
	} else {
		memcpy(w->sge, in.sge, sizeof(w->sge));
		w->local_error = check_sges(qp, w);
	}
}

/* Takes what the client posted. A producer index more than a ring ahead of what we
 * completed, or behind what we already took, is a client bug: the QP goes to the error
 * state. */
static bool fetch(struct qp *qp)
{
	uint32_t prod = __atomic_load_n(&qp->sq_ctl->prod, __ATOMIC_ACQUIRE);

	if (prod - qp->comp_idx > qp->sq_entries ||
	    prod - qp->comp_idx < qp->fetch_idx - qp->comp_idx) {
		log_limited("client pid %d: QP 0x%06x send ring index %u is beyond the ring",
			    (int)qp->owner->pid, qp->qpn, prod);
		return false;
	}
	while (qp->fetch_idx != prod)
		fetch_one(qp, qp->fetch_idx++);
	return true;
}

/* The send queue slot is given back before the completion is published: a client that
 * sees the completion and posts at once must find the slot free (its post would fail with
 * "the send queue is full" otherwise). */
static enum ibv_wc_opcode wc_opcode(const struct send_wqe *w)
{
	if (wqe_is_send(w))
		return IBV_WC_SEND;
	if (wqe_is_atomic(w))
		return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD;
	return wqe_is_read(w) ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
}

static void complete(struct qp *qp, struct send_wqe *w, enum ibv_wc_status status)
{
	struct proto_cqe cqe = { .wr_id = w->wr_id, .status = status, .opcode = wc_opcode(w),
				 .byte_len = (uint32_t)w->length, .qp_num = qp->qpn };

	if (wqe_wants_response(w) && w->started)
		qp->rd_outstanding--;
	qp->comp_idx++;
	__atomic_store_n(&qp->sq_ctl->cons, qp->comp_idx, __ATOMIC_RELEASE);
	if (w->signaled || status != IBV_WC_SUCCESS)
		cq_push(qp->send_cq, &cqe);
}

/* The oldest outstanding request fails with status; everything behind it is flushed. */
static void fail_head(struct qp *qp, enum ibv_wc_status status)
{
	if (qp->comp_idx != qp->fetch_idx)
		complete(qp, wqe_at(qp, qp->comp_idx), status);
	qp_to_error(qp);
}

void req_flush(struct qp *qp)
{
	if (!fetch(qp))
		qp->fetch_idx = qp->comp_idx; /* a lying producer index: nothing to flush */
	while (qp->comp_idx != qp->fetch_idx)
		complete(qp, wqe_at(qp, qp->comp_idx), IBV_WC_WR_FLUSH_ERR);
	qp->send_idx = qp->fetch_idx;
	qp->send_pkt = 0;
}

/* SEND and WRITE share one layout: FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM. */
static uint8_t packet_opcode(const struct send_wqe *w, uint32_t k)
{
	enum { FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM };
	uint8_t base = wqe_is_send(w) ? WIRE_OP_RC_SEND_FIRST : WIRE_OP_RC_WRITE_FIRST;
	bool imm = wqe_has_imm(w);

	bool inv = w->opcode == IBV_WR_SEND_WITH_INV;

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
	return qp->sq[w - qp->wqes].inline_data;
}

/* Packet k of request w, with PSN psn: headers, payload gathered from the local MRs straight
 * into the frame, ICRC over both. */
static int send_packet(struct qp *qp, const struct send_wqe *w, uint32_t k, uint32_t psn)
{
	/* ibv_send_wr carries the immediate in network order, the rkey to invalidate in host
	 * order (the two share a union); wire_ext has both in host order */
	struct wire_ext ext = { .reth = { w->remote_addr, w->rkey, (uint32_t)w->length },
				.imm = ntohl(w->imm), .ieth = w->imm };
	struct wire_bth bth = { .opcode = packet_opcode(w, k), .pkey = 0xffff,
				.dest_qp = qp->attr.dest_qpn, .psn = psn };
	uint64_t offset = (uint64_t)k * qp->pmtu;
	struct tx_pkt p;
	size_t n;

	if (k >= w->npkts)
		return -EFAULT;
	n = w->length - offset < qp->pmtu ? (size_t)(w->length - offset) : qp->pmtu;
	bth.ack_req = k + 1 == w->npkts || ++qp->since_ackreq >= sched_ack_interval(qp->dev) ||
		      qp->dev->tp.inflight + 1 >= DEV_MAX_INFLIGHT;
	if (bth.ack_req)
		qp->since_ackreq = 0;
	bth.solicited = w->solicited && k + 1 == w->npkts;
	if (!tx_begin(qp, &bth, &ext, n, &p))
		return -EFAULT;
	if (w->inlined)
		memcpy(p.payload, inline_payload(qp, w) + offset, n);
	else if (sgl_gather(qp, w->sge, w->num_sge, offset, p.payload, n) < 0)
		return -EFAULT;
	tx_end(qp, &p, n);
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
	struct wire_bth bth = { .opcode = WIRE_OP_RC_READ_REQUEST, .pkey = 0xffff,
				.dest_qp = qp->attr.dest_qpn, .psn = psn, .ack_req = true };
	uint8_t *frame = net_tx_slot(&qp->dev->port);
	size_t len = wire_build(frame, DEV_FRAME_MAX, &qp->path, qp->dev->port.ip_id++, &bth, &ext,
				NULL, 0);

	if (!len)
		return -EFAULT;
	net_tx_commit(&qp->dev->port, len);
	return 0;
}

static int send_atomic_request(struct qp *qp, const struct send_wqe *w, uint32_t psn)
{
	struct wire_ext ext = { .atomic = { w->remote_addr, w->rkey, w->swap, w->compare_add } };
	struct wire_bth bth = { .pkey = 0xffff, .dest_qp = qp->attr.dest_qpn, .psn = psn,
				.ack_req = true };
	uint8_t *frame = net_tx_slot(&qp->dev->port);
	size_t len;

	bth.opcode = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? WIRE_OP_RC_COMPARE_SWAP
							     : WIRE_OP_RC_FETCH_ADD;
	if (w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		ext.atomic.swap_add = w->compare_add;
		ext.atomic.compare = 0;
	}
	len = wire_build(frame, DEV_FRAME_MAX, &qp->path, qp->dev->port.ip_id++, &bth, &ext, NULL, 0);
	if (!len)
		return -EFAULT;
	net_tx_commit(&qp->dev->port, len);
	return 0;
}

/* The interval runs from now, not from the start of this turn of the loop: a turn that
 * served many clients' requests can itself last longer than a short timeout. */
static void arm_timer(struct qp *qp)
{
	if (!qp->attr.timeout || !outstanding(qp))
		return;
	ev_now_update(qp->dev->loop);
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_set(&qp->retry_timer, rto_interval(qp), 0);
	ev_timer_start(qp->dev->loop, &qp->retry_timer);
}

/* Puts the send cursor on PSN psn: the request and packet that carry it. */
static void seek(struct qp *qp, uint32_t psn)
{
	for (uint32_t i = qp->comp_idx; i != qp->fetch_idx; i++) {
		struct send_wqe *w = wqe_at(qp, i);

		if (!w->started || wire_psn_diff(psn, w->first_psn + w->npkts) < 0) {
			qp->send_idx = i;
			qp->send_pkt = w->started ? (psn - w->first_psn) & WIRE_PSN_MASK : 0;
			qp->snd_nxt = psn;
			return;
		}
	}
	qp->send_idx = qp->fetch_idx;
	qp->send_pkt = 0;
	qp->snd_nxt = psn;
}

/* A request refused at fetch time completes in order, once everything before it has. */
static bool blocked_by_local_error(struct qp *qp, struct send_wqe *w)
{
	if (w->local_error == IBV_WC_SUCCESS)
		return false;
	if (qp->comp_idx == qp->send_idx && !outstanding(qp))
		fail_head(qp, w->local_error);
	return true;
}

/* A READ waits while max_rd_atomic of them are outstanding; a fenced request while any is. */
static bool waits_for_reads(const struct qp *qp, const struct send_wqe *w)
{
	if (w->started)
		return false;
	if (wqe_wants_response(w) && qp->rd_outstanding >= qp->attr.max_rd_atomic)
		return true;
	return w->fence && qp->rd_outstanding > 0;
}

static void start(struct qp *qp, struct send_wqe *w)
{
	w->started = true;
	w->first_psn = qp->snd_nxt;
	w->npkts = wqe_is_atomic(w) ? 1 : qp_packets(qp, w->length);
	if (wqe_wants_response(w))
		qp->rd_outstanding++;
	else
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
	uint32_t covers = wqe_is_read(w) ? w->npkts - qp->send_pkt : 1;
	int rc = wqe_is_read(w)	  ? send_read_request(qp, w, qp->send_pkt, qp->snd_nxt)
		 : wqe_is_atomic(w) ? send_atomic_request(qp, w, qp->snd_nxt)
				    : send_packet(qp, w, qp->send_pkt, qp->snd_nxt);

	if (rc < 0)
		return false;
	cc_on_sent(qp, packet_payload(qp, w, qp->send_pkt) + WIRE_BASE_LEN);
	if (wqe_wants_response(w))
		qp->since_ackreq = 0;   /* a READ or atomic request is always answered */
	/* a READ's responses stream for as long as it is large: not a round trip */
	if (qp->snd_nxt == qp->snd_max && !wqe_is_read(w))
		rto_on_first_send(qp, qp->snd_nxt);
	qp->snd_nxt = (qp->snd_nxt + covers) & WIRE_PSN_MASK;
	if (wire_psn_diff(qp->snd_nxt, qp->snd_max) > 0) {
		qp->snd_max = qp->snd_nxt;
		sched_account(qp);
	}
	qp->send_pkt += covers;
	if (qp->send_pkt == w->npkts) {
		qp->send_idx++;
		qp->send_pkt = 0;
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
	if (qp->state != IBV_QPS_RTS || qp->rnr_wait)
		return;
	if (!fetch(qp)) {
		qp_to_error(qp);
		return;
	}
	while (qp->send_idx != qp->fetch_idx &&
	       wire_psn_diff(qp->snd_nxt, qp->snd_una) < QP_MAX_INFLIGHT) {
		struct send_wqe *w = wqe_at(qp, qp->send_idx);

		if (blocked_by_local_error(qp, w))
			return;
		if (waits_for_reads(qp, w) || !cc_may_send(qp))
			break;
		/* a resend takes no new credit: its PSNs are counted already. Out of credit,
		 * one more packet goes if those before it asked for no ACK: it asks, or they
		 * would hold their credit until the timer (the overdraft is a packet per QP) */
		if (qp->snd_nxt == qp->snd_max && !sched_has_credit(qp) && !qp->since_ackreq)
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
	if (outstanding(qp) && !ev_is_active(&qp->retry_timer))
		arm_timer(qp);
}

static void retry_from(struct qp *qp, uint32_t psn);

/* The PSN after w's last. */
static uint32_t end_psn(const struct send_wqe *w)
{
	return (w->first_psn + w->npkts) & WIRE_PSN_MASK;
}

/* Everything up to and including psn arrived: complete what that covers. A READ moves on
 * only by the responses placed: a PSN past them (a later response of the same READ, or
 * an ACK past the whole READ) means responses were lost, and a new request from the first
 * missing one asks for them again. */
static void ack_through(struct qp *qp, uint32_t psn)
{
	uint32_t next = (psn + 1) & WIRE_PSN_MASK;
	bool lost = false;

	while (qp->comp_idx != qp->fetch_idx) {
		struct send_wqe *w = wqe_at(qp, qp->comp_idx);

		if (!w->started)
			break;
		if (wqe_wants_response(w) && !w->answered) {
			uint32_t placed = (w->first_psn + w->read_placed) & WIRE_PSN_MASK;

			lost = wire_psn_diff(next, placed) > 0;
			next = lost ? placed : next;
			break;
		}
		if (wire_psn_diff(end_psn(w), next) > 0)
			break;
		complete(qp, w, IBV_WC_SUCCESS);
	}
	if (wire_psn_diff(next, qp->snd_una) > 0) {
		qp->snd_una = next;
		sched_account(qp);
		rto_on_progress(qp, next);
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		if (wire_psn_diff(qp->snd_nxt, qp->snd_una) < 0)
			seek(qp, qp->snd_una);
		ev_timer_stop(qp->dev->loop, &qp->retry_timer);
		arm_timer(qp);
		qp->resend_started = false;
	}
	/* once per loss: the ACKs that follow tell the same story */
	if (lost && !qp->resend_started)
		retry_from(qp, qp->snd_una);
}

/* A resend round from psn, paid for with one retry (rxe's completer counts the same way:
 * one per round, whatever the NAKs or ACKs that reveal the loss while it goes on). */
static void retry_from(struct qp *qp, uint32_t psn)
{
	qp->resend_started = true;
	qp->dev->cnt.completer_retry_err++;
	if (qp->retry_left == 0) {
		qp->dev->cnt.retry_exceeded_err++;
		fail_head(qp, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	if (qp->attr.retry_cnt != 7)
		qp->retry_left--;
	rto_on_resend(qp);
	seek(qp, psn);
	req_pump(qp);
}

static void on_rnr_nak(struct qp *qp, uint32_t psn, uint8_t timer)
{
	qp->dev->cnt.rcvd_rnr_err++;
	if (qp->rnr_left == 0) {
		qp->dev->cnt.retry_rnr_exceeded_err++;
		fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR);
		return;
	}
	if (qp->attr.rnr_retry != 7)
		qp->rnr_left--;
	rto_on_resend(qp);
	seek(qp, psn);
	qp->rnr_wait = true;
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_set(&qp->rnr_timer, rnr_usec[timer & 31] * 1e-6, 0);
	ev_timer_start(qp->dev->loop, &qp->rnr_timer);
}

static enum ibv_wc_status nak_status(uint8_t code)
{
	switch (code) {
	case 1: return IBV_WC_REM_INV_REQ_ERR;
	case 2: return IBV_WC_REM_ACCESS_ERR;
	default: return IBV_WC_REM_OP_ERR;
	}
}

/* Whether psn is one of request w's PSNs (a READ's request covers all its responses'). */
static bool holds(const struct send_wqe *w, uint32_t psn)
{
	return w->started && wire_psn_diff(psn, w->first_psn) >= 0 &&
	       wire_psn_diff(psn, end_psn(w)) < 0;
}

/* The oldest request, or NULL. */
static struct send_wqe *head(struct qp *qp)
{
	return qp->comp_idx != qp->fetch_idx ? wqe_at(qp, qp->comp_idx) : NULL;
}

/* A NAK that names the oldest request: a sequence NAK starts a resend round unless one is
 * under way already; any other ends the request with its error. */
static void on_nak(struct qp *qp, uint32_t psn, uint8_t code)
{
	if (code != 0) {
		fail_head(qp, nak_status(code));
		return;
	}
	qp->dev->cnt.rcvd_seq_err++;
	if (qp->resend_started) {
		qp->dev->cnt.rcvd_seq_err_in_resend++;
		return;
	}
	retry_from(qp, psn);
}

/* The outstanding READ that holds psn. */
static struct send_wqe *read_holding(struct qp *qp, uint32_t psn)
{
	for (uint32_t i = qp->comp_idx; i != qp->fetch_idx && wqe_at(qp, i)->started; i++) {
		struct send_wqe *w = wqe_at(qp, i);

		if (wqe_is_read(w) && !w->answered && holds(w, psn))
			return w;
	}
	return NULL;
}

/* A remote error in the midst of a READ's responses: the responder refused the rest (its
 * MR went away) and names the READ's PSN, which may lie below the responses already
 * placed, or a response's. It answers that READ, never an old packet (rxe completes the
 * READ with the error since 2022), once everything before the READ is done; a resend would
 * only meet a QP in the error state. True when the NAK was taken so. */
static bool read_refused(struct qp *qp, uint32_t psn, uint8_t syn)
{
	struct send_wqe *w;

	if (wire_aeth_type(syn) != WIRE_AETH_NAK || (syn & 0x1f) == 0 ||
	    !(w = read_holding(qp, psn)))
		return false;
	ack_through(qp, w->first_psn - 1);
	if (head(qp) == w)
		fail_head(qp, nak_status(syn & 0x1f));
	else
		qp->dev->cnt.drop_stale_ack++;   /* an earlier READ's answers are asked again */
	return true;
}

void req_on_ack(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	uint8_t syn = pkt->ext.aeth.syndrome;

	if (read_refused(qp, psn, syn))
		return;
	if (wire_psn_diff(psn, qp->snd_una) < -1 || wire_psn_diff(psn, qp->snd_max) >= 0) {
		qp->dev->cnt.drop_stale_ack++;
		return;
	}
	if (wire_aeth_type(syn) != WIRE_AETH_ACK &&
	    (wire_psn_diff(psn, qp->snd_una) < 0 || qp->rnr_wait)) {
		/* a NAK names an outstanding PSN; during an RNR wait the packets pipelined
		 * behind the refused one draw sequence NAKs that the wait already answers */
		qp->dev->cnt.drop_stale_ack++;
		return;
	}
	switch (wire_aeth_type(syn)) {
	case WIRE_AETH_ACK:
		ack_through(qp, psn);
		/* what the ACK lets go waits its turn: sent from here, the ACKs of one ring
		 * read could send megabytes before the loop looks at a doorbell again */
		sched_ready(qp);
		return;
	case WIRE_AETH_RNR_NAK:
		ack_through(qp, psn - 1);
		on_rnr_nak(qp, psn, syn & 0x1f);
		return;
	case WIRE_AETH_NAK:
		ack_through(qp, psn - 1);
		/* otherwise an earlier READ or atomic still misses its answer: ack_through
		 * asked for it again, and the resent requests will meet this NAK's cause */
		if (head(qp) && holds(head(qp), psn))
			on_nak(qp, psn, syn & 0x1f);
		else
			qp->dev->cnt.drop_stale_ack++;
		return;
	default:
		qp->dev->cnt.drop_stale_ack++;
	}
}

/* Which READ response may carry response k of w's npkts: FIRST and ONLY start a (re)issued
 * request, MIDDLE and LAST go on with one, as rxe's responder replays them. */
static bool response_fits(const struct send_wqe *w, uint32_t k, uint8_t pos)
{
	bool last = k + 1 == w->npkts;

	switch (pos) {
	case WIRE_POS_ONLY: return last;
	case WIRE_POS_FIRST: return !last;
	case WIRE_POS_MIDDLE: return k > 0 && !last;
	default: return k > 0 && last;
	}
}

/* A response that carries data (a READ response, an ATOMIC ACKNOWLEDGE) counts only at
 * exactly the PSN expected next, once it has acknowledged what came before it: then it
 * answers the oldest request outstanding, returned here; otherwise it is dropped (a
 * duplicate, or one past a lost response: the timer, or the gap, asks again). */
static struct send_wqe *answered_head(struct qp *qp, uint32_t psn)
{
	struct send_wqe *w;

	if (wire_psn_diff(psn, qp->snd_una) < 0 || wire_psn_diff(psn, qp->snd_max) >= 0) {
		qp->dev->cnt.drop_stale_ack++;
		return NULL;
	}
	ack_through(qp, (psn - 1) & WIRE_PSN_MASK);
	w = qp->comp_idx != qp->fetch_idx ? wqe_at(qp, qp->comp_idx) : NULL;
	if (qp->state != IBV_QPS_RTS || !w || !w->started || psn != qp->snd_una) {
		qp->dev->cnt.drop_stale_ack++;
		return NULL;
	}
	return w;
}

/* A READ response's payload goes through the READ's own SGEs at the offset its PSN gives;
 * one that answers anything but a READ, or is of the wrong kind for its place, ends the
 * request with IBV_WC_BAD_RESP_ERR, as rxe does. */
void req_on_read_response(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn, k, want;
	struct send_wqe *w = answered_head(qp, psn);

	if (!w)
		return;
	k = (psn - w->first_psn) & WIRE_PSN_MASK;
	want = k + 1 == w->npkts ? (uint32_t)(w->length - (uint64_t)k * qp->pmtu) : qp->pmtu;
	if (!wqe_is_read(w) || !response_fits(w, k, pkt->op->pos) || pkt->payload_len != want ||
	    ((pkt->op->headers & WIRE_HDR_AETH) &&
	     wire_aeth_type(pkt->ext.aeth.syndrome) != WIRE_AETH_ACK)) {
		fail_head(qp, IBV_WC_BAD_RESP_ERR);
		return;
	}
	if (sgl_scatter(qp, w->sge, w->num_sge, (uint64_t)k * qp->pmtu,
			frame + pkt->payload_off, pkt->payload_len) < 0) {
		fail_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->read_placed = k + 1;
	w->answered = w->read_placed == w->npkts;
	ack_through(qp, psn);
	req_pump(qp);
}

/* An ATOMIC ACKNOWLEDGE answers the oldest request outstanding when that is an atomic and
 * the PSN is its own: the original value goes into its SGEs as a host u64. */
void req_on_atomic_ack(struct qp *qp, const struct wire_pkt *pkt)
{
	uint64_t orig = pkt->ext.atomic_ack;
	struct send_wqe *w = answered_head(qp, pkt->bth.psn);

	if (!w)
		return;
	if (!wqe_is_atomic(w) || wire_aeth_type(pkt->ext.aeth.syndrome) != WIRE_AETH_ACK) {
		fail_head(qp, IBV_WC_BAD_RESP_ERR);
		return;
	}
	if (sgl_scatter(qp, w->sge, w->num_sge, 0, (const uint8_t *)&orig, sizeof(orig)) < 0) {
		fail_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->answered = true;
	ack_through(qp, pkt->bth.psn);
	req_pump(qp);
}

void req_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct qp *qp = w->data;

	(void)loop;
	(void)revents;
	if (!outstanding(qp) || qp->state != IBV_QPS_RTS)
		return;
	/* after a stall the ACK may be in the ring, behind more than one turn's frames: an
	 * ACK that moved the window re-armed the timer */
	net_rx_catch_up(&qp->dev->port);
	if (!outstanding(qp) || qp->state != IBV_QPS_RTS || ev_is_active(&qp->retry_timer))
		return;
	qp->dev->cnt.timeouts++;
	log_debug("QP 0x%06x: no ACK within %.1f ms (round trip %.1f ms): PSNs 0x%06x to 0x%06x "
		  "resent; %u PSNs out daemon-wide", qp->qpn, rto_interval(qp) * 1e3,
		  qp->rto.srtt * 1e3, qp->snd_una, (qp->snd_max - 1) & WIRE_PSN_MASK,
		  qp->dev->tp.inflight);
	rto_on_expiry(qp);
	retry_from(qp, qp->snd_una);
}

void req_rnr_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct qp *qp = w->data;

	(void)loop;
	(void)revents;
	qp->rnr_wait = false;
	req_pump(qp);
}

void req_doorbell_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct qp *qp = w->data;
	uint64_t count;

	(void)loop;
	(void)revents;
	while (read(qp->doorbell_fd, &count, sizeof(count)) > 0)
		;
	req_pump(qp);
}
