/* Requesters take turns (see transport.h). A QP comes back to the tail of the queue after
 * its burst, so with n QPs busy each sends one burst in n; what is left when the turn's
 * budget runs out waits for the next turn, after the receive ring has been read again.
 *
 * The credit every RC requester draws on is counted from each QP's PSNs, recomputed
 * whenever they may have moved rather than adjusted step by step: a count that drifted
 * would stop every QP of the daemon for good. */
#include "emu/daemon/transport/transport.h"

static void serve_idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

static void unqueue(struct qp *qp)
{
	if (qp->req.sched == TURN_READY)
		TAILQ_REMOVE(&qp->dev->tp.ready, qp, req.ready_link);
	else if (qp->req.sched == TURN_CREDIT)
		TAILQ_REMOVE(&qp->dev->tp.credit_wait, qp, req.ready_link);
	qp->req.sched = TURN_NONE;
}

void sched_ready(struct qp *qp)
{
	struct dev *dev = qp->dev;

	if (qp->req.sched == TURN_READY)
		return;
	unqueue(qp);
	qp->req.sched = TURN_READY;
	TAILQ_INSERT_TAIL(&dev->tp.ready, qp, req.ready_link);
	if (!ev_is_active(&dev->tp.serve_idle)) {
		ev_idle_init(&dev->tp.serve_idle, serve_idle_cb);
		ev_idle_start(dev->loop, &dev->tp.serve_idle);
	}
}

void sched_init(struct dev *dev)
{
	STAILQ_INIT(&dev->tp.notify_list);
	TAILQ_INIT(&dev->tp.acks_due);
	TAILQ_INIT(&dev->tp.ready);
	TAILQ_INIT(&dev->tp.credit_wait);
	TAILQ_INIT(&dev->tp.polled);
}

bool sched_has_credit(struct qp *qp)
{
	struct dev *dev = qp->dev;

	if (dev->tp.inflight < DEV_MAX_INFLIGHT)
		return true;
	if (qp->req.sched == TURN_NONE) {
		qp->req.sched = TURN_CREDIT;
		TAILQ_INSERT_TAIL(&dev->tp.credit_wait, qp, req.ready_link);
		dev->cnt.credit_waits++;
	}
	return false;
}

/* Those held back go in turn once an ACK's worth of credit is back. */
static void wake_credit_waiters(struct dev *dev)
{
	struct qp *qp;

	if (dev->tp.inflight > DEV_CREDIT_WAKE)
		return;
	while ((qp = TAILQ_FIRST(&dev->tp.credit_wait)))
		sched_ready(qp);
}

/* A READ's PSNs are its responses, which the peer sends into our ring, not ours into its:
 * a QP waiting for them counts for at most QP_READ_CREDIT, so a large READ does not hold
 * every other QP back until it is answered. */
static uint32_t outstanding_psns(const struct qp *qp)
{
	uint32_t n, most = qp->req.rd_outstanding ? QP_READ_CREDIT : QP_MAX_INFLIGHT;

	if (qp->type != IBV_QPT_RC || (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD))
		return 0;
	n = (uint32_t)wire_psn_diff(qp->req.snd_max, qp->req.snd_una);
	return n < most ? n : most;
}

void sched_account(struct qp *qp)
{
	uint32_t now = outstanding_psns(qp);

	qp->dev->tp.requesters_out += (now > 0) - (qp->req.inflight_counted > 0);
	qp->dev->tp.inflight += now - qp->req.inflight_counted;
	qp->req.inflight_counted = now;
	wake_credit_waiters(qp->dev);
}

void sched_forget(struct qp *qp)
{
	unqueue(qp);
	qp->dev->tp.requesters_out -= qp->req.inflight_counted > 0;
	qp->dev->tp.inflight -= qp->req.inflight_counted;
	qp->req.inflight_counted = 0;
	wake_credit_waiters(qp->dev);
}

uint32_t sched_ack_interval(const struct dev *dev)
{
	uint32_t n = dev->tp.requesters_out > 1 ? dev->tp.requesters_out : 1;
	uint32_t interval = DEV_MAX_INFLIGHT / (2 * n);

	if (interval > QP_ACKREQ_EVERY)
		return QP_ACKREQ_EVERY;
	return interval ? interval : 1;
}

void sched_send(struct dev *dev)
{
	resp_send_due_acks(dev);
	sched_serve(dev);
	net_flush(&dev->port);
}

/* What the responder owes goes first: the peer is waiting for it. */
void sched_turn(struct qp *qp)
{
	reply_pump(qp);
	req_pump(qp);
}

void sched_serve(struct dev *dev)
{
	uint64_t until = dev->cnt.sent_pkts + DEV_SERVE_BUDGET;
	struct qp *qp;

	while ((qp = TAILQ_FIRST(&dev->tp.ready)) && dev->cnt.sent_pkts < until) {
		unqueue(qp);
		sched_turn(qp);
	}
	if (TAILQ_EMPTY(&dev->tp.ready))
		ev_idle_stop(dev->loop, &dev->tp.serve_idle);
}
