/* The retransmission timer of an RC QP. The QP's configured timeout (4.096 us * 2^timeout)
 * is its floor; above it, an estimate from the ACKs actually seen decides, as TCP's does
 * (RFC 6298): one PSN at a time is timed from its first sending to the ACK that covers
 * it, never one that was sent again (Karn), and the timer is SRTT + 4 * RTTVAR. When many
 * QPs share the link, an ACK waits behind their packets for longer than a timeout meant
 * for an idle link, and a fixed timer fires while nothing was lost. Consecutive expiries
 * double the timer, up to RTO_MAX_BACKOFF doublings, so a retry_cnt of 7 at the default
 * timeout still fails a dead peer within seconds; the next round trip timed resets it. */
#include "emu/daemon/transport/transport.h"

#define RTO_MAX_BACKOFF 3
#define RTO_MIN_VAR 1e-3      /* the least 4 * RTTVAR counted: the loop's wakeup jitter */

static ev_tstamp floor_of(const struct qp *qp)
{
	return 4.096e-6 * (double)(1ull << qp->attr.timeout);
}

ev_tstamp rto_interval(const struct qp *qp)
{
	const struct rto *r = &qp->comp.rto;
	ev_tstamp t = floor_of(qp);

	if (r->srtt > 0) {
		ev_tstamp var = 4 * r->rttvar > RTO_MIN_VAR ? 4 * r->rttvar : RTO_MIN_VAR;

		if (r->srtt + var > t)
			t = r->srtt + var;
	}
	return t * (double)(1u << r->backoff);
}

void rto_reset(struct qp *qp)
{
	qp->comp.rto = (struct rto){ 0 };
}

void rto_on_first_send(struct qp *qp, uint32_t psn)
{
	struct rto *r = &qp->comp.rto;

	if (r->timing)
		return;
	r->timing = true;
	r->timed_psn = psn;
	r->sent_at = ev_now(qp->dev->loop);
}

static void take_sample(struct qp *qp, ev_tstamp rtt)
{
	struct rto *r = &qp->comp.rto;
	ev_tstamp err;

	if (r->srtt <= 0) {
		r->srtt = rtt;
		r->rttvar = rtt / 2;
		return;
	}
	err = r->srtt > rtt ? r->srtt - rtt : rtt - r->srtt;
	r->rttvar = 0.75 * r->rttvar + 0.25 * err;
	r->srtt = 0.875 * r->srtt + 0.125 * rtt;
}

/* The doubling stays until a PSN sent once is timed (RFC 6298 5.7): progress made by
 * resent packets says nothing of how long the first sending takes, and dropping the
 * doubling on it would let a timer below the round trip fire before every sample. */
void rto_on_progress(struct qp *qp, uint32_t next_unacked)
{
	struct rto *r = &qp->comp.rto;

	if (r->timing && wire_psn_diff(next_unacked, r->timed_psn) > 0) {
		take_sample(qp, ev_now(qp->dev->loop) - r->sent_at);
		r->timing = false;
		r->backoff = 0;
		qp->dev->cnt.rtt_samples++;
	}
}

void rto_on_resend(struct qp *qp)
{
	qp->comp.rto.timing = false;
}

void rto_on_expiry(struct qp *qp)
{
	if (qp->comp.rto.backoff < RTO_MAX_BACKOFF)
		qp->comp.rto.backoff++;
}
