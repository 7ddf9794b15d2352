/* The responder's packets leave in PSN order, as rxe's responder sends them: a READ's
 * responses go out in the QP's turns (QP_BURST at a time, at the QP's DCQCN rate), so a
 * READ of megabytes neither stops the loop while it is copied out nor floods the
 * requester's receive ring; an ACK, NAK or atomic response made while responses wait
 * queues behind them. A NAK that ends the QP ends it when it is sent: until then the
 * responder takes no further request (resp.c checks resp.stopped). */
#include <errno.h>
#include <stdlib.h>

#include "emu/daemon/transport/transport.h"

/* A well-behaved requester has at most max_dest_rd_atomic READs out, and ACKs coalesce at
 * the tail: READs and the ACKs between them fit with room to spare. */
#define REPLY_SLOTS (2 * QP_MAX_RD_ATOMIC + 16)

enum reply_kind { REPLY_READ, REPLY_ACK, REPLY_ATOMIC };

struct reply {
	uint8_t kind;
	uint8_t syndrome;            /* ACK */
	bool starts;                 /* READ: its first response is FIRST or ONLY */
	bool then_error;             /* once sent, the QP goes to the error state */
	uint32_t psn;                /* READ: the request's, which response 0 carries */
	uint32_t msn;
	uint32_t rkey;
	uint32_t len;                /* READ: bytes asked */
	uint32_t npkts, sent;        /* READ: responses in all, and sent */
	uint64_t va;                 /* READ */
	uint64_t orig;               /* ATOMIC */
};

struct reply_queue {
	struct reply slot[REPLY_SLOTS];
	uint32_t head, count;
};

bool reply_busy(const struct qp *qp)
{
	return qp->resp.replies && qp->resp.replies->count;
}

static struct reply *queue_tail(struct qp *qp)
{
	struct reply_queue *q = qp->resp.replies;

	return q && q->count ? &q->slot[(q->head + q->count - 1) % REPLY_SLOTS] : NULL;
}

static struct reply *queue_head(struct qp *qp)
{
	struct reply_queue *q = qp->resp.replies;

	return q && q->count ? &q->slot[q->head] : NULL;
}

/* Whether n more fit, the queue allocated if need be. */
static bool queue_room(struct qp *qp, uint32_t n)
{
	if (!qp->resp.replies && !(qp->resp.replies = calloc(1, sizeof(*qp->resp.replies))))
		return false;
	return qp->resp.replies->count + n <= REPLY_SLOTS;
}

static struct reply *queue_push(struct qp *qp)
{
	if (!queue_room(qp, 1))
		return NULL;
	qp->resp.replies->count++;
	return queue_tail(qp);
}

/* Room for an answer and the ACK that goes ahead of it. */
bool reply_reserve(struct qp *qp)
{
	return queue_room(qp, 2);
}

/* The ACK goes now, or after what waits. A plain ACK behind another replaces it: both say
 * how far the requests went, the later further. */
void reply_ack(struct qp *qp, uint32_t psn, uint8_t syndrome)
{
	struct reply *r = queue_tail(qp);

	if (!r) {
		tx_ack(qp, psn, syndrome, qp->resp.msn);
		return;
	}
	if (!(r->kind == REPLY_ACK && r->syndrome == WIRE_SYN_ACK && syndrome == WIRE_SYN_ACK &&
	      !r->then_error) && !(r = queue_push(qp))) {
		qp->dev->cnt.drop_reply_full++;
		return;
	}
	*r = (struct reply){ .kind = REPLY_ACK, .psn = psn, .syndrome = syndrome,
			     .msn = qp->resp.msn };
}

void reply_atomic(struct qp *qp, uint32_t psn, uint64_t orig)
{
	struct reply *r;

	if (!reply_busy(qp)) {
		tx_atomic_ack(qp, psn, orig, qp->resp.msn);
		return;
	}
	if (!(r = queue_push(qp))) {
		qp->dev->cnt.drop_reply_full++;
		return;
	}
	*r = (struct reply){ .kind = REPLY_ATOMIC, .psn = psn, .orig = orig, .msn = qp->resp.msn };
}

int reply_read(struct qp *qp, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len,
	       bool starts)
{
	struct reply *r = queue_push(qp);

	if (!r)
		return -ENOBUFS;
	*r = (struct reply){ .kind = REPLY_READ, .psn = psn, .rkey = rkey, .va = va, .len = len,
			     .starts = starts, .msn = qp->resp.msn, .npkts = qp_packets(qp, len) };
	sched_ready(qp);
	return 0;
}

/* Whether psn is one of the responses a queued READ has still to send: a duplicate of it
 * is answered by those. */
bool reply_will_send(const struct qp *qp, uint32_t psn)
{
	const struct reply_queue *q = qp->resp.replies;

	for (uint32_t i = 0; q && i < q->count; i++) {
		const struct reply *r = &q->slot[(q->head + i) % REPLY_SLOTS];

		if (r->kind == REPLY_READ && wire_psn_diff(psn, r->psn + r->sent) >= 0 &&
		    wire_psn_diff(psn, r->psn + r->npkts - 1) <= 0)
			return true;
	}
	return false;
}

/* A duplicate READ for responses its READ has already sent (one of them was lost: the
 * requester asks again from the first it misses) takes that READ back to them, rather
 * than waiting behind the rest of it. True when one did. */
bool reply_rewind(struct qp *qp, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len)
{
	struct reply *r = queue_head(qp);
	uint32_t k = r ? (uint32_t)wire_psn_diff(psn, r->psn) : 0;

	if (!r || r->kind != REPLY_READ || wire_psn_diff(psn, r->psn) < 0 || k >= r->sent ||
	    rkey != r->rkey || va != r->va + (uint64_t)k * qp->pmtu ||
	    len != r->len - k * qp->pmtu)
		return false;
	r->sent = k;
	return true;
}

/* What is queued now is the QP's last word (the NAK just made, usually): the QP goes to
 * the error state once it is sent, and takes no request until then. */
void reply_fail_after(struct qp *qp)
{
	struct reply *r = queue_tail(qp);

	if (!r) {
		qp_to_error(qp);
		return;
	}
	r->then_error = true;
	qp->resp.stopped = true;
}

void reply_clear(struct qp *qp)
{
	if (qp->resp.replies)
		qp->resp.replies->head = qp->resp.replies->count = 0;
	qp->resp.stopped = false;
}

void reply_free(struct qp *qp)
{
	free(qp->resp.replies);
	qp->resp.replies = NULL;
}

static void queue_pop(struct qp *qp)
{
	struct reply_queue *q = qp->resp.replies;

	q->head = (q->head + 1) % REPLY_SLOTS;
	q->count--;
}

/* One response of READ r; false when its MR no longer holds the bytes. */
static bool send_read_response(struct qp *qp, struct reply *r)
{
	uint64_t off = (uint64_t)r->sent * qp->pmtu;
	size_t n = r->len - off < qp->pmtu ? (size_t)(r->len - off) : qp->pmtu;

	if (tx_read_response(qp, r->psn + r->sent, r->msn, r->rkey, r->va + off, n,
			       read_response_opcode(r->sent, r->npkts, r->starts)) < 0)
		return false;
	cc_on_sent(qp, n + WIRE_BASE_LEN);
	r->sent++;
	return true;
}

/* Sends the next packet of the head. Returns false when the QP went to the error state. */
static bool send_head(struct qp *qp, struct reply *r)
{
	bool end = r->then_error;

	switch (r->kind) {
	case REPLY_READ:
		if (!send_read_response(qp, r)) {
			/* the MR went away mid-READ: what was sent stands, the rest is refused */
			qp->dev->cnt.nak_rem_access_sent++;
			tx_ack(qp, r->psn, WIRE_SYN_NAK_REM_ACCESS, r->msn);
			qp_to_error(qp);
			return false;
		}
		if (r->sent < r->npkts)
			return true;
		break;
	case REPLY_ATOMIC:
		tx_atomic_ack(qp, r->psn, r->orig, r->msn);
		break;
	default:
		tx_ack(qp, r->psn, r->syndrome, r->msn);
	}
	queue_pop(qp);
	if (end)
		qp_to_error(qp);
	return !end;
}

/* The QP's turn: up to QP_BURST packets of what waits, as its rate allows. */
void reply_pump(struct qp *qp)
{
	unsigned burst = QP_BURST;

	while (reply_busy(qp) && qp_takes_requests(qp)) {
		struct reply *r = queue_head(qp);

		if (r->kind == REPLY_READ && !cc_may_send(qp))
			return;
		if (burst-- == 0) {
			sched_ready(qp);
			return;
		}
		if (!send_head(qp, r))
			return;
	}
}
