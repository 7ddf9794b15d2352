/* Congestion control as RoCE NICs do it, both roles of it.
 *
 * The notification point (any QP that takes data): a packet that arrives marked
 * Congestion Experienced by a switch, or while this daemon's own receive ring is backed
 * up past the mark (the queue that overflows here is ours, not a switch's), earns its
 * sender a CNP, at most one per sender per cnp interval: an RC QP's sender is its peer;
 * a UD QP's are whoever sends it datagrams, told apart by address and QP number (a few
 * slots per QP, so two senders may now and then share one interval).
 *
 * The reaction point (the sender): a CNP for an RC or UD QP cuts that QP's rate
 * (dcqcn.c), and it sends no faster than the rate, through a token bucket, waiting on a
 * timer when it runs dry; a UD QP's rate covers all its datagrams, whatever their
 * address handles, as NICs that run DCQCN on UD do. Packets go out ECT(0) so a real
 * network's switches can mark them instead of dropping them. rxe neither marks nor
 * answers CNPs: it ignores ours, and ours cost it nothing. */
#include <math.h>

#include "emu/daemon/transport/transport.h"

#define ETH_SOURCE_MAC 6         /* its offset: after the destination MAC */

/* ECT(0) on our packets unless the application chose an ECN codepoint of its own. CE is
 * not one a sender may choose (RFC 3168): it comes with a traffic class copied from a
 * marked packet (ibv_create_ah_from_wc takes the TOS of the datagram answered), and sent
 * on it would earn CNPs from a congestion that never was. */
uint8_t cc_tos(const struct dev *dev, uint8_t traffic_class)
{
	uint8_t ecn = traffic_class & WIRE_ECN_MASK;

	if (ecn == WIRE_ECN_CE)
		ecn = WIRE_ECN_NOT_ECT;
	if (dev->tp.cc.enabled && ecn == WIRE_ECN_NOT_ECT)
		ecn = WIRE_ECN_ECT0;
	return (uint8_t)((traffic_class & ~WIRE_ECN_MASK) | ecn);
}

static void send_cnp(struct dev *dev, struct wire_path path, uint32_t dest_qpn)
{
	struct wire_bth bth = { .opcode = WIRE_OP_CNP, .pkey = 0xffff, .becn = true,
				.dest_qp = dest_qpn };
	struct wire_ext ext = { 0 };
	uint8_t *frame = net_tx_slot(&dev->port);
	size_t len;

	path.tos = WIRE_TOS_CNP;
	len = wire_build(frame, DEV_FRAME_MAX, &path, dev->port.ip_id++, &bth, &ext, NULL, 0);
	if (!len)
		return;
	net_tx_commit(&dev->port, len);
	dev->cnt.np_cnp_sent++;
}

/* Counts what the packet met; true when its sender has a CNP coming. */
static bool congestion_met(struct dev *dev, const struct wire_pkt *pkt)
{
	bool ce = pkt->ecn == WIRE_ECN_CE;

	if (ce)
		dev->cnt.np_ecn_marked_roce_packets++;
	if (dev->port.rx.congested)
		dev->cnt.np_ring_marked_packets++;
	return dev->tp.cc.enabled && (ce || dev->port.rx.congested);
}

/* Whether the interval since the last CNP to that sender (*last) has run out. */
static bool cnp_due(const struct dev *dev, ev_tstamp *last)
{
	ev_tstamp now = ev_now(dev->loop);

	if (now - *last < dev->tp.cc.cnp_interval)
		return false;
	*last = now;
	return true;
}

void cc_on_arrival(struct qp *qp, const struct wire_pkt *pkt)
{
	if (congestion_met(qp->dev, pkt) && cnp_due(qp->dev, &qp->req.cnp_at))
		send_cnp(qp->dev, qp->path, qp->attr.dest_qpn);
}

/* The CNP goes back the way the datagram came: to its source address and Ethernet
 * source (the sender, or the router before it), from the address it was sent to. */
static void datagram_return_path(const struct qp *qp, const uint8_t *frame,
				 const struct wire_pkt *pkt, struct wire_path *path)
{
	uint8_t ours[16], theirs[16];

	addr_gid(ours, pkt->ip_version, pkt->dst_ip);
	addr_gid(theirs, pkt->ip_version, pkt->src_ip);
	*path = (struct wire_path){ 0 };     /* IPv6 flow label 0, as on every rxe frame */
	qp_path_between(path, qp->dev, ours, theirs, frame + ETH_SOURCE_MAC);
	path->src_port = qp_flow_port(0, qp->qpn, pkt->ext.deth.src_qp);
}

unsigned cc_sender_slot(const struct wire_pkt *pkt)
{
	uint32_t h = pkt->ext.deth.src_qp * 0x9e3779b1u;

	for (unsigned i = 0; i < (pkt->ip_version == 6 ? 16u : 4u); i++)
		h = (h ^ pkt->src_ip[i]) * 0x01000193u;
	return h % QP_UD_CNP_SLOTS;
}

void cc_on_datagram(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	struct wire_path path;

	if (!congestion_met(qp->dev, pkt) ||
	    !cnp_due(qp->dev, &qp->req.ud_cnp_at[cc_sender_slot(pkt)]))
		return;
	datagram_return_path(qp, frame, pkt, &path);
	send_cnp(qp->dev, path, pkt->ext.deth.src_qp);
}

void cc_on_cnp(struct qp *qp)
{
	struct dev *dev = qp->dev;

	if (!dev->tp.cc.enabled) {
		dev->cnt.rp_cnp_ignored++;
		return;
	}
	dev->cnt.rp_cnp_handled++;
	if (dcqcn_on_cnp(&qp->req.dcqcn, &dev->tp.cc, ev_now(dev->loop)))
		dev->cnt.rp_rate_cuts++;
}

bool cc_may_send(struct qp *qp)
{
	struct dev *dev = qp->dev;
	double wait;

	if (!qp->req.dcqcn.limited)
		return true;
	wait = dcqcn_wait(&qp->req.dcqcn, &dev->tp.cc, ev_now(dev->loop));
	if (wait <= 0)
		return true;
	if (!ev_is_active(&qp->req.pace_timer)) {
		dev->cnt.rp_paced_waits++;
		ev_timer_set(&qp->req.pace_timer, wait, 0);
		ev_timer_start(dev->loop, &qp->req.pace_timer);
	}
	return false;
}

void cc_on_sent(struct qp *qp, size_t bytes)
{
	if (qp->dev->tp.cc.enabled)
		dcqcn_on_sent(&qp->req.dcqcn, &qp->dev->tp.cc, bytes, ev_now(qp->dev->loop));
}

void cc_pace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	sched_turn(w->data);
}

void cc_qp_reset(struct qp *qp)
{
	ev_timer_stop(qp->dev->loop, &qp->req.pace_timer);
	dcqcn_reset(&qp->req.dcqcn);
	qp->req.cnp_at = -HUGE_VAL;
	for (unsigned i = 0; i < QP_UD_CNP_SLOTS; i++)
		qp->req.ud_cnp_at[i] = -HUGE_VAL;
}

/* At least 1: 0 in rocemuctl's view says unlimited. */
uint32_t cc_rate_mbps(const struct qp *qp)
{
	uint32_t mbps = (uint32_t)(qp->req.dcqcn.rate * 8 / 1e6);

	return mbps ? mbps : 1;
}
