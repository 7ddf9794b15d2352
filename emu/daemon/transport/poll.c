/* Polled rings: while the daemon's loop polls instead of sleeping (after work, for its poll
 * budget), the send and receive rings of the QPs that rang lately are looked at directly,
 * and their clients skip the doorbell (PROTO_RING_POLLED in the ring's cons_flags). Before
 * the loop sleeps it takes the flag back, fences, and looks once more: a client posts,
 * fences, then reads the flag (proto.h), so a post is either seen here or rings. */

#include "emu/daemon/transport/transport.h"

/* (the receive ring's PROTO_RING_LAZY is rq.c's and stays as it is) */
static void set_polled(struct qp *qp, bool polled)
{
	if (polled) {
		__atomic_fetch_or(&qp->sq_ctl->cons_flags, PROTO_RING_POLLED, __ATOMIC_RELAXED);
		__atomic_fetch_or(&qp->rq_ctl->cons_flags, PROTO_RING_POLLED, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_and(&qp->sq_ctl->cons_flags, ~PROTO_RING_POLLED, __ATOMIC_RELAXED);
		__atomic_fetch_and(&qp->rq_ctl->cons_flags, ~PROTO_RING_POLLED, __ATOMIC_RELAXED);
	}
}

/* Whether the client posted to either ring since we last looked. The receive ring is
 * looked at as the doorbell did: a QP in ERROR flushes what is posted to it. */
static bool posted_since(struct qp *qp)
{
	uint32_t sq = __atomic_load_n(&qp->sq_ctl->prod, __ATOMIC_ACQUIRE);
	uint32_t rq = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);
	bool news = sq != qp->poll.sq_seen || rq != qp->poll.rq_seen;

	qp->poll.sq_seen = sq;
	qp->poll.rq_seen = rq;
	return news;
}

/* What the QP's rings hold is taken now: sends go out, and in ERROR receives complete
 * as flushed (they ring then: PROTO_RING_LAZY). */
static void take_posts(struct qp *qp)
{
	req_pump(qp);
	if (qp->state == IBV_QPS_ERR)
		rq_flush(qp);
}

/* A doorbell rang (or a post was found). */
void poll_doorbell(struct qp *qp)
{
	posted_since(qp);
	take_posts(qp);
}

/* A QP whose doorbell woke the loop: while the loop polls, its client need not ring. */
void poll_adopt(struct qp *qp)
{
	struct dev_transport *tp = &qp->dev->tp;

	if (qp->poll.adopted || !tp->poll_rings)
		return;
	qp->poll.adopted = true;
	TAILQ_INSERT_TAIL(&tp->polled, qp, poll.link);
	set_polled(qp, true);
}

void poll_forget(struct qp *qp)
{
	if (!qp->poll.adopted)
		return;
	qp->poll.adopted = false;
	TAILQ_REMOVE(&qp->dev->tp.polled, qp, poll.link);
	set_polled(qp, false);
}

/* One look at every adopted QP's rings; how many had posts (taken now). */
unsigned poll_rings(struct dev *dev)
{
	struct qp *qp, *next;
	unsigned found = 0;

	for (qp = TAILQ_FIRST(&dev->tp.polled); qp; qp = next) {
		next = TAILQ_NEXT(qp, poll.link);
		if (posted_since(qp)) {
			dev->cnt.polled_posts++;
			found++;
			take_posts(qp);
		}
	}
	return found;
}

/* Before the loop sleeps: every client rings again from now on, and what one posted while
 * it still saw the flag is taken here. How many had posts: the loop must not sleep then. */
unsigned poll_release(struct dev *dev)
{
	struct qp *qp;
	unsigned found = 0;

	if (TAILQ_EMPTY(&dev->tp.polled))
		return 0;
	TAILQ_FOREACH(qp, &dev->tp.polled, poll.link)
		set_polled(qp, false);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	while ((qp = TAILQ_FIRST(&dev->tp.polled))) {
		TAILQ_REMOVE(&dev->tp.polled, qp, poll.link);
		qp->poll.adopted = false;
		if (posted_since(qp)) {
			dev->cnt.polled_posts++;
			found++;
			take_posts(qp);
		}
	}
	return found;
}
