/* Requester and completer of an RC QP: RDMA WRITE and SEND work requests from the client's ring,
 * segmented by the path MTU, at most QP_MAX_INFLIGHT PSNs unacknowledged, completed in
 * order when ACKed, resent go-back-N on a sequence NAK or a timeout. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/daemon.h"

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

static bool wqe_has_imm(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static enum ibv_wc_status check_sges(struct qp *qp, struct send_wqe *w)
{
	uint64_t total = 0;

	if (!wqe_is_send(w) && w->opcode != IBV_WR_RDMA_WRITE &&
	    w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
		return IBV_WC_LOC_QP_OP_ERR;
	if (w->num_sge > PROTO_MAX_SGE)
		return IBV_WC_LOC_LEN_ERR;
	for (uint32_t i = 0; i < w->num_sge; i++) {
		const struct proto_sge *s = &w->sge[i];

		total += s->length;
		if (s->length && mr_lookup(qp->dev->mrs, s->lkey, qp->pd, 0, s->addr, s->length,
					   NULL) != MR_OK)
			return IBV_WC_LOC_PROT_ERR;
	}
	if (total > MAX_MESSAGE)
		return IBV_WC_LOC_LEN_ERR;
	w->length = total;
	return IBV_WC_SUCCESS;
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
	w->remote_addr = in.remote_addr;
	w->rkey = in.rkey;
	w->imm = in.imm;
	w->num_sge = in.num_sge;
	memcpy(w->sge, in.sge, sizeof(w->sge));
	w->local_error = check_sges(qp, w);
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
			    (int)qp->client->pid, qp->qpn, prod);
		return false;
	}
	while (qp->fetch_idx != prod)
		fetch_one(qp, qp->fetch_idx++);
	return true;
}

/* The send queue slot is given back before the completion is published: a client that
 * sees the completion and posts at once must find the slot free (its post would fail with
 * "the send queue is full" otherwise). */
static void complete(struct qp *qp, struct send_wqe *w, enum ibv_wc_status status)
{
	struct proto_cqe cqe = { .wr_id = w->wr_id, .status = status,
				 .opcode = wqe_is_send(w) ? IBV_WC_SEND : IBV_WC_RDMA_WRITE,
				 .byte_len = (uint32_t)w->length, .qp_num = qp->qpn };

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

/* Copies [offset, offset + n) of the request's gather list into dst, through each local
 * MR's page table, looking every MR up again in case it was deregistered since. */
static int gather(struct qp *qp, const struct send_wqe *w, uint64_t offset, uint8_t *dst,
		  size_t n)
{
	for (uint32_t i = 0; i < w->num_sge && n; i++) {
		const struct proto_sge *s = &w->sge[i];
		struct mr *mr;
		size_t piece;

		if (offset >= s->length) {
			offset -= s->length;
			continue;
		}
		piece = s->length - offset < n ? (size_t)(s->length - offset) : n;
		if (mr_lookup(qp->dev->mrs, s->lkey, qp->pd, 0, s->addr + offset, piece, &mr) != MR_OK ||
		    mr_copy_out(mr, s->addr + offset, dst, piece) < 0)
			return -EFAULT;
		dst += piece;
		n -= piece;
		offset = 0;
	}
	return 0;
}

/* Packet k of request w, with PSN psn: headers, payload gathered from the local MRs straight
 * into the frame, ICRC over both. */
static int send_packet(struct qp *qp, const struct send_wqe *w, uint32_t k, uint32_t psn)
{
	struct dev *dev = qp->dev;
	/* ibv_send_wr carries the immediate in network order, the rkey to invalidate in host
	 * order (the two share a union); wire_ext has both in host order */
	struct wire_ext ext = { .reth = { w->remote_addr, w->rkey, (uint32_t)w->length },
				.imm = ntohl(w->imm), .ieth = w->imm };
	struct wire_bth bth = { .opcode = packet_opcode(w, k), .pkey = 0xffff,
				.dest_qp = qp->attr.dest_qpn, .psn = psn };
	uint64_t offset = (uint64_t)k * qp->pmtu;
	uint8_t *frame;
	size_t n, hdr;
	icrc_state crc;

	if (k >= w->npkts)
		return -EFAULT;
	n = w->length - offset < qp->pmtu ? (size_t)(w->length - offset) : qp->pmtu;
	bth.ack_req = k + 1 == w->npkts || (psn % QP_ACKREQ_EVERY) == QP_ACKREQ_EVERY - 1;
	frame = net_tx_slot(dev);
	hdr = wire_put_headers(frame, DEV_FRAME_MAX, &qp->path, dev->ip_id++, &bth, &ext, n);
	if (!hdr || gather(qp, w, offset, frame + hdr, n) < 0)
		return -EFAULT;
	crc = icrc_update(wire_icrc_headers(frame), frame + hdr, n);
	net_tx_commit(dev, hdr + n + wire_put_trailer(frame + hdr + n, crc, n));
	return 0;
}

static void arm_timer(struct qp *qp)
{
	ev_tstamp t = 4.096e-6 * (double)(1ull << qp->attr.timeout);

	if (!qp->attr.timeout || !outstanding(qp))
		return;
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_set(&qp->retry_timer, t, 0);
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

void req_pump(struct qp *qp)
{
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
		if (!w->started) {
			w->started = true;
			w->first_psn = qp->snd_nxt;
			w->npkts = w->length ? (uint32_t)((w->length + qp->pmtu - 1) / qp->pmtu) : 1;
			qp->dev->cnt.rdma_sends++;
		}
		if (send_packet(qp, w, qp->send_pkt, qp->snd_nxt) < 0) {
			/* its local MR went away since it was checked: it fails in its turn */
			w->local_error = IBV_WC_LOC_PROT_ERR;
			blocked_by_local_error(qp, w);
			return;
		}
		qp->snd_nxt = (qp->snd_nxt + 1) & WIRE_PSN_MASK;
		if (wire_psn_diff(qp->snd_nxt, qp->snd_max) > 0)
			qp->snd_max = qp->snd_nxt;
		if (++qp->send_pkt == w->npkts) {
			qp->send_idx++;
			qp->send_pkt = 0;
		}
	}
	if (outstanding(qp) && !ev_is_active(&qp->retry_timer))
		arm_timer(qp);
}

/* Everything up to and including psn arrived: complete what that covers. */
static void ack_through(struct qp *qp, uint32_t psn)
{
	uint32_t next = (psn + 1) & WIRE_PSN_MASK;

	if (wire_psn_diff(next, qp->snd_una) <= 0)
		return;
	qp->snd_una = next;
	qp->retry_left = qp->attr.retry_cnt;
	qp->rnr_left = qp->attr.rnr_retry;
	while (qp->comp_idx != qp->fetch_idx) {
		struct send_wqe *w = wqe_at(qp, qp->comp_idx);

		if (!w->started || wire_psn_diff(w->first_psn + w->npkts - 1, psn) > 0)
			break;
		complete(qp, w, IBV_WC_SUCCESS);
	}
	if (wire_psn_diff(qp->snd_nxt, qp->snd_una) < 0)
		seek(qp, qp->snd_una);
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	arm_timer(qp);
}

static void retry_from(struct qp *qp, uint32_t psn)
{
	qp->dev->cnt.completer_retry_err++;
	if (qp->retry_left == 0) {
		qp->dev->cnt.retry_exceeded_err++;
		fail_head(qp, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	if (qp->attr.retry_cnt != 7)
		qp->retry_left--;
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

void req_on_ack(struct qp *qp, const struct wire_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	uint8_t syn = pkt->ext.aeth.syndrome;

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
		req_pump(qp);
		return;
	case WIRE_AETH_RNR_NAK:
		ack_through(qp, psn - 1);
		on_rnr_nak(qp, psn, syn & 0x1f);
		return;
	case WIRE_AETH_NAK:
		ack_through(qp, psn - 1);
		if ((syn & 0x1f) == 0) {
			qp->dev->cnt.rcvd_seq_err++;
			retry_from(qp, psn);
		} else {
			fail_head(qp, nak_status(syn & 0x1f));
		}
		return;
	default:
		qp->dev->cnt.drop_stale_ack++;
	}
}

void req_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct qp *qp = w->data;

	(void)loop;
	(void)revents;
	if (!outstanding(qp) || qp->state != IBV_QPS_RTS)
		return;
	qp->dev->cnt.timeouts++;
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
