/* The completer of an RC QP: ACKs, NAKs, READ responses and ATOMIC ACKNOWLEDGEs taken
 * against the requests outstanding, which complete in order (a READ when its last response
 * is placed); a sequence NAK, lost READ responses or the retransmission timer start a
 * resend round from the first PSN missing, an RNR NAK a wait, any other NAK ends the QP.
 * A UC QP's requests complete as their last packet leaves (comp_on_sent). */
#include <string.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

/* IBA's encoding of the minimal RNR NAK timer, in microseconds (index 0 is the largest). */
static const uint32_t rnr_usec[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560,
	3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840,
	245760, 327680, 491520,
};

static enum ibv_wc_opcode wc_opcode(const struct send_wqe *w)
{
	if (w->opcode == IBV_WR_BIND_MW)
		return IBV_WC_BIND_MW;
	if (w->opcode == IBV_WR_LOCAL_INV)
		return IBV_WC_LOCAL_INV;
	if (w->opcode == IBV_WR_ATOMIC_WRITE)
		return IBV_WC_ATOMIC_WRITE;
	if (wqe_is_flush(w))
		return PROTO_WC_FLUSH;
	if (wqe_is_send(w))
		return IBV_WC_SEND;
	if (wqe_is_atomic(w))
		return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD;
	return wqe_is_read(w) ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
}

void comp_complete(struct qp *qp, struct send_wqe *w, enum ibv_wc_status status)
{
	struct proto_cqe cqe = { .wr_id = w->wr_id, .status = status, .opcode = wc_opcode(w),
				 .byte_len = (uint32_t)w->length, .qp_num = qp->qpn };

	if (wqe_takes_rd_credit(w) && w->started)
		qp->req.rd_outstanding--;
	qp->comp.idx++;
	__atomic_store_n(&qp->sq_ctl->cons, qp->comp.idx, __ATOMIC_RELEASE);
	if (w->signaled || status != IBV_WC_SUCCESS)
		cq_push(qp->send_cq, &cqe);
}

static const char *const failure_names[PROTO_NFAILURES] = {
#define FAILURE_NAME(name, help) #name,
	PROTO_FAILURES(FAILURE_NAME)
#undef FAILURE_NAME
};

/* The completion status each reason gives, as rxe's completer reports it. */
static enum ibv_wc_status failure_status(enum proto_failure why)
{
	switch (why) {
	case PROTO_FAILED_local_opcode: return IBV_WC_LOC_QP_OP_ERR;
	case PROTO_FAILED_mw_bind: return IBV_WC_MW_BIND_ERR;
	case PROTO_FAILED_local_length: return IBV_WC_LOC_LEN_ERR;
	case PROTO_FAILED_nak_invalid_request: return IBV_WC_REM_INV_REQ_ERR;
	case PROTO_FAILED_nak_remote_access: return IBV_WC_REM_ACCESS_ERR;
	case PROTO_FAILED_nak_remote_operational: return IBV_WC_REM_OP_ERR;
	case PROTO_FAILED_retry_exceeded: return IBV_WC_RETRY_EXC_ERR;
	case PROTO_FAILED_rnr_retry_exceeded: return IBV_WC_RNR_RETRY_EXC_ERR;
	case PROTO_FAILED_response_unexpected: return IBV_WC_BAD_RESP_ERR;
	default: return IBV_WC_LOC_PROT_ERR;   /* local_lkey, response_placement */
	}
}

/* The oldest outstanding request fails for why; everything behind it is flushed. Each
 * failure is counted by its reason, kept as the QP's last and logged at debug level. */
void comp_fail_head(struct qp *qp, enum proto_failure why)
{
	qp->dev->failed[why]++;
	qp->comp.last_failure = why;
	log_limited_debug("QP 0x%06x: send request failed: %s", qp->qpn, failure_names[why]);
	if (qp->comp.idx != qp->req.fetch_idx)
		comp_complete(qp, wqe_at(qp, qp->comp.idx), failure_status(why));
	qp_to_error(qp);
}

/* UC: nothing comes back, so a request is done once all its packets have left, as rxe
 * marks a UC or UD request done when it hands its last packet to the wire. */
void comp_on_sent(struct qp *qp)
{
	while (qp->comp.idx != qp->req.send_idx)
		comp_complete(qp, wqe_at(qp, qp->comp.idx), IBV_WC_SUCCESS);
}

static void retry_from(struct qp *qp, uint32_t psn);

static void grow_window(struct qp *qp, uint32_t acked)
{
	uint32_t w = qp->req.window + acked;

	qp->req.window = w < QP_MAX_INFLIGHT ? w : QP_MAX_INFLIGHT;
}

/* Everything up to and including psn arrived: complete what that covers. A READ moves on
 * only by the responses placed: a PSN past them (a later response of the same READ, or
 * an ACK past the whole READ) means responses were lost, and a new request from the first
 * missing one asks for them again. */
static void ack_through(struct qp *qp, uint32_t psn)
{
	uint32_t next = (psn + 1) & WIRE_PSN_MASK;
	bool lost = false;

	while (qp->comp.idx != qp->req.fetch_idx) {
		struct send_wqe *w = wqe_at(qp, qp->comp.idx);

		/* a local operation that failed fails in the requester's turn (req.c) */
		if (!w->started || w->local_error != IBV_WC_SUCCESS)
			break;
		if (wqe_wants_response(w) && !w->answered) {
			uint32_t placed = (w->first_psn + w->read_placed) & WIRE_PSN_MASK;

			lost = wire_psn_diff(next, placed) > 0;
			next = lost ? placed : next;
			break;
		}
		if (wire_psn_diff(wqe_end_psn(w), next) > 0)
			break;
		comp_complete(qp, w, IBV_WC_SUCCESS);
	}
	if (wire_psn_diff(next, qp->req.snd_una) > 0) {
		grow_window(qp, (uint32_t)wire_psn_diff(next, qp->req.snd_una));
		qp->req.snd_una = next;
		sched_account(qp);
		rto_on_progress(qp, next);
		qp->comp.retry_left = qp->attr.retry_cnt;
		qp->comp.rnr_left = qp->attr.rnr_retry;
		if (wire_psn_diff(qp->req.snd_nxt, qp->req.snd_una) < 0)
			req_seek(qp, qp->req.snd_una);
		ev_timer_stop(qp->dev->loop, &qp->retry_timer);
		req_arm_timer(qp);
		qp->comp.resend_started = false;
	}
	/* once per loss: the ACKs that follow tell the same story */
	if (lost && !qp->comp.resend_started)
		retry_from(qp, qp->req.snd_una);
}

/* A resend round from psn, paid for with one retry (rxe's completer counts the same way:
 * one per round, whatever the NAKs or ACKs that reveal the loss while it goes on). */
static void retry_from(struct qp *qp, uint32_t psn)
{
	qp->comp.resend_started = true;
	qp->req.window = qp->req.window / 2 > QP_MIN_WINDOW ? qp->req.window / 2 : QP_MIN_WINDOW;
	qp->dev->cnt.completer_retry_err++;
	if (qp->comp.retry_left == 0) {
		qp->dev->cnt.retry_exceeded_err++;
		comp_fail_head(qp, PROTO_FAILED_retry_exceeded);
		return;
	}
	if (qp->attr.retry_cnt != 7)
		qp->comp.retry_left--;
	rto_on_resend(qp);
	req_seek(qp, psn);
	req_pump(qp);
}

static void on_rnr_nak(struct qp *qp, uint32_t psn, uint8_t timer)
{
	qp->dev->cnt.rcvd_rnr_err++;
	if (qp->comp.rnr_left == 0) {
		qp->dev->cnt.retry_rnr_exceeded_err++;
		comp_fail_head(qp, PROTO_FAILED_rnr_retry_exceeded);
		return;
	}
	if (qp->attr.rnr_retry != 7)
		qp->comp.rnr_left--;
	rto_on_resend(qp);
	req_seek(qp, psn);
	qp->req.rnr_wait = true;
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_set(&qp->rnr_timer, rnr_usec[timer & 31] * 1e-6, 0);
	ev_timer_start(qp->dev->loop, &qp->rnr_timer);
}

static enum proto_failure nak_failure(uint8_t code)
{
	switch (code) {
	case 1: return PROTO_FAILED_nak_invalid_request;
	case 2: return PROTO_FAILED_nak_remote_access;
	default: return PROTO_FAILED_nak_remote_operational;
	}
}

/* Whether psn is one of request w's PSNs (a READ's request covers all its responses'). */
static bool holds(const struct send_wqe *w, uint32_t psn)
{
	return w->started && wire_psn_diff(psn, w->first_psn) >= 0 &&
	       wire_psn_diff(psn, wqe_end_psn(w)) < 0;
}

/* The oldest request, or NULL. */
static struct send_wqe *head(struct qp *qp)
{
	return qp->comp.idx != qp->req.fetch_idx ? wqe_at(qp, qp->comp.idx) : NULL;
}

/* A NAK that names the oldest request: a sequence NAK starts a resend round unless one is
 * under way already; any other ends the request with its error. */
static void on_nak(struct qp *qp, uint32_t psn, uint8_t code)
{
	if (code != 0) {
		comp_fail_head(qp, nak_failure(code));
		return;
	}
	qp->dev->cnt.rcvd_seq_err++;
	if (qp->comp.resend_started) {
		qp->dev->cnt.rcvd_seq_err_in_resend++;
		return;
	}
	retry_from(qp, psn);
}

/* The outstanding READ that holds psn. */
static struct send_wqe *read_holding(struct qp *qp, uint32_t psn)
{
	for (uint32_t i = qp->comp.idx; i != qp->req.fetch_idx && wqe_at(qp, i)->started; i++) {
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
		comp_fail_head(qp, nak_failure(syn & 0x1f));
	else
		qp->dev->cnt.drop_stale_ack++;   /* an earlier READ's answers are asked again */
	return true;
}

void comp_on_ack(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	uint8_t syn = pkt->ext.aeth.syndrome;

	if (read_refused(qp, psn, syn))
		return;
	if (wire_psn_diff(psn, qp->req.snd_una) < -1 || wire_psn_diff(psn, qp->req.snd_max) >= 0) {
		qp->dev->cnt.drop_stale_ack++;
		return;
	}
	if (wire_aeth_type(syn) != WIRE_AETH_ACK &&
	    (wire_psn_diff(psn, qp->req.snd_una) < 0 || qp->req.rnr_wait)) {
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

	if (wire_psn_diff(psn, qp->req.snd_una) < 0 || wire_psn_diff(psn, qp->req.snd_max) >= 0) {
		qp->dev->cnt.drop_stale_ack++;
		return NULL;
	}
	ack_through(qp, (psn - 1) & WIRE_PSN_MASK);
	w = qp->comp.idx != qp->req.fetch_idx ? wqe_at(qp, qp->comp.idx) : NULL;
	if (qp->state != IBV_QPS_RTS || !w || !w->started || psn != qp->req.snd_una) {
		qp->dev->cnt.drop_stale_ack++;
		return NULL;
	}
	return w;
}

/* A FLUSH is answered with an empty READ RESPONSE ONLY, as rxe (6.2 on) answers it; rxe
 * answers an ATOMIC WRITE so too, and so does rocemu's responder (an ACK that covers it
 * completes it as well, as rocemu's responder answered before).
 * Anything else in its place ends the request with IBV_WC_BAD_RESP_ERR. */
static void on_empty_response(struct qp *qp, struct send_wqe *w, const struct wire_pkt *pkt)
{
	if (pkt->op->pos != WIRE_POS_ONLY || pkt->payload_len != 0 ||
	    wire_aeth_type(pkt->ext.aeth.syndrome) != WIRE_AETH_ACK) {
		comp_fail_head(qp, PROTO_FAILED_response_unexpected);
		return;
	}
	w->answered = true;
	ack_through(qp, pkt->bth.psn);
	req_pump(qp);
}

/* A READ response's payload goes through the READ's own SGEs at the offset its PSN gives;
 * one that answers anything but a READ, or is of the wrong kind for its place, ends the
 * request with IBV_WC_BAD_RESP_ERR, as rxe does. */
void comp_on_read_response(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn, k, want;
	struct send_wqe *w = answered_head(qp, psn);

	if (!w)
		return;
	if (wqe_is_flush(w) || w->opcode == IBV_WR_ATOMIC_WRITE) {
		on_empty_response(qp, w, pkt);
		return;
	}
	k = (psn - w->first_psn) & WIRE_PSN_MASK;
	want = k + 1 == w->npkts ? (uint32_t)(w->length - (uint64_t)k * qp->pmtu) : qp->pmtu;
	if (!wqe_is_read(w) || !response_fits(w, k, pkt->op->pos) || pkt->payload_len != want ||
	    ((pkt->op->headers & WIRE_HDR_AETH) &&
	     wire_aeth_type(pkt->ext.aeth.syndrome) != WIRE_AETH_ACK)) {
		comp_fail_head(qp, PROTO_FAILED_response_unexpected);
		return;
	}
	if (sgl_scatter(qp, w->sge, w->num_sge, (uint64_t)k * qp->pmtu,
			frame + pkt->payload_off, pkt->payload_len) < 0) {
		comp_fail_head(qp, PROTO_FAILED_response_placement);
		return;
	}
	w->read_placed = k + 1;
	w->answered = w->read_placed == w->npkts;
	ack_through(qp, psn);
	req_pump(qp);
}

/* An ATOMIC ACKNOWLEDGE answers the oldest request outstanding when that is an atomic and
 * the PSN is its own: the original value goes into its SGEs as a host u64. */
void comp_on_atomic_ack(struct qp *qp, const struct wire_pkt *pkt)
{
	uint64_t orig = pkt->ext.atomic_ack;
	struct send_wqe *w = answered_head(qp, pkt->bth.psn);

	if (!w)
		return;
	if (!wqe_is_atomic(w) || wire_aeth_type(pkt->ext.aeth.syndrome) != WIRE_AETH_ACK) {
		comp_fail_head(qp, PROTO_FAILED_response_unexpected);
		return;
	}
	if (sgl_scatter(qp, w->sge, w->num_sge, 0, (const uint8_t *)&orig, sizeof(orig)) < 0) {
		comp_fail_head(qp, PROTO_FAILED_response_placement);
		return;
	}
	w->answered = true;
	ack_through(qp, pkt->bth.psn);
	req_pump(qp);
}

void comp_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct qp *qp = w->data;

	(void)loop;
	(void)revents;
	if (!req_outstanding(qp) || qp->state != IBV_QPS_RTS)
		return;
	/* after a stall the ACK may be in the ring, behind more than one turn's frames: an
	 * ACK that moved the window re-armed the timer */
	net_rx_catch_up(&qp->dev->port);
	if (!req_outstanding(qp) || qp->state != IBV_QPS_RTS || ev_is_active(&qp->retry_timer))
		return;
	qp->dev->cnt.timeouts++;
	log_debug("QP 0x%06x: no ACK within %.1f ms (round trip %.1f ms): PSNs 0x%06x to 0x%06x "
		  "resent; %u PSNs out daemon-wide", qp->qpn, rto_interval(qp) * 1e3,
		  qp->comp.rto.srtt * 1e3, qp->req.snd_una, (qp->req.snd_max - 1) & WIRE_PSN_MASK,
		  qp->dev->tp.inflight);
	rto_on_expiry(qp);
	retry_from(qp, qp->req.snd_una);
}

