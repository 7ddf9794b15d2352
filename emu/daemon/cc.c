/* Congestion control as RoCE NICs do it, both roles of it.
 *
 * The notification point (any QP that takes data): a packet that arrives marked
 * Congestion Experienced by a switch, or while this daemon's own receive ring is backed
 * up past the mark (the queue that overflows here is ours, not a switch's), earns its
 * sender a CNP, at most one per QP per cnp interval.
 *
 * The reaction point (the requester): a CNP for an RC QP from its peer cuts that QP's
 * rate (dcqcn.c), and the requester sends no faster than the rate, through a token
 * bucket, waiting on a timer when it runs dry. Packets go out ECT(0) so a real network's
 * switches can mark them instead of dropping them. rxe neither marks nor answers CNPs:
 * it ignores ours, and ours cost it nothing. */
#include <math.h>

#include "emu/daemon/daemon.h"

/* ECT(0) on our packets unless the application chose ECN bits of its own. */
uint8_t cc_tos(const struct dev *dev, uint8_t traffic_class)
{
	if (!dev->cc.enabled || (traffic_class & WIRE_ECN_MASK))
		return traffic_class;
	return traffic_class | WIRE_ECN_ECT0;
}

static void send_cnp(struct qp *qp)
{
	struct dev *dev = qp->dev;
	struct wire_path path = qp->path;
	struct wire_bth bth = { .opcode = WIRE_OP_CNP, .pkey = 0xffff, .becn = true,
				.dest_qp = qp->attr.dest_qpn };
	struct wire_ext ext = { 0 };
	uint8_t *frame = net_tx_slot(dev);
	size_t len;

	path.tos = WIRE_TOS_CNP;
	len = wire_build(frame, DEV_FRAME_MAX, &path, dev->ip_id++, &bth, &ext, NULL, 0);
	if (!len)
		return;
	net_tx_commit(dev, len);
	dev->cnt.np_cnp_sent++;
}

void cc_on_arrival(struct qp *qp, const struct wire_pkt *pkt)
{
	struct dev *dev = qp->dev;
	bool ce = pkt->ecn == WIRE_ECN_CE;
	ev_tstamp now;

	if (ce)
		dev->cnt.np_ecn_marked_roce_packets++;
	if (dev->rx.congested)
		dev->cnt.np_ring_marked_packets++;
	if (!dev->cc.enabled || !(ce || dev->rx.congested))
		return;
	now = ev_now(dev->loop);
	if (now - qp->cnp_at < dev->cc.cnp_interval)
		return;
	qp->cnp_at = now;
	send_cnp(qp);
}

void cc_on_cnp(struct qp *qp)
{
	struct dev *dev = qp->dev;

	if (!dev->cc.enabled) {
		dev->cnt.rp_cnp_ignored++;
		return;
	}
	dev->cnt.rp_cnp_handled++;
	if (dcqcn_on_cnp(&qp->dcqcn, &dev->cc, ev_now(dev->loop)))
		dev->cnt.rp_rate_cuts++;
}

bool cc_may_send(struct qp *qp)
{
	struct dev *dev = qp->dev;
	double wait;

	if (!qp->dcqcn.limited)
		return true;
	wait = dcqcn_wait(&qp->dcqcn, &dev->cc, ev_now(dev->loop));
	if (wait <= 0)
		return true;
	if (!ev_is_active(&qp->pace_timer)) {
		dev->cnt.rp_paced_waits++;
		ev_timer_set(&qp->pace_timer, wait, 0);
		ev_timer_start(dev->loop, &qp->pace_timer);
	}
	return false;
}

void cc_on_sent(struct qp *qp, size_t bytes)
{
	if (qp->dev->cc.enabled)
		dcqcn_on_sent(&qp->dcqcn, &qp->dev->cc, bytes, ev_now(qp->dev->loop));
}

void cc_pace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	sched_turn(w->data);
}

void cc_qp_reset(struct qp *qp)
{
	ev_timer_stop(qp->dev->loop, &qp->pace_timer);
	dcqcn_reset(&qp->dcqcn);
	qp->cnp_at = -HUGE_VAL;
}

/* At least 1: 0 in rocemuctl's view says unlimited. */
uint32_t cc_rate_mbps(const struct qp *qp)
{
	uint32_t mbps = (uint32_t)(qp->dcqcn.rate * 8 / 1e6);

	return mbps ? mbps : 1;
}
