/* The waiting room: a REQ or SIDR_REQ to a service ID an id holds but has not listened on
 * yet waits CM_LISTEN_WAIT for that listen, and is refused as to nobody after. A program
 * that tells its peer the port between its bind and its listen (qperf 0.4.11) listens by
 * a request to this daemon, later than a system call would; to the peer, the wait is a
 * slower wire. */
#include <stdlib.h>

#include "emu/daemon/cm/cm_int.h"

static void free_waiting(struct cm_waiting_req *w)
{
	ev_timer_stop(w->cm->dev->loop, &w->timer);
	TAILQ_REMOVE(&w->cm->waiting, w, link);
	w->cm->nwaiting--;
	free(w);
}

static void waited_enough(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct cm_waiting_req *w = t->data;
	struct cm *cm = w->cm;
	struct cm_waiting_req copy = *w;

	(void)loop, (void)revents;
	free_waiting(w);
	cm_take_request(cm, &copy.mad, &copy.src, false);
}

bool cm_wait_for_listen(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
			uint64_t service_id)
{
	struct cm_waiting_req *w;

	if (!cm_find_service(cm, service_id, false) || cm->nwaiting >= CM_MAX_WAITING)
		return false;
	w = calloc(1, sizeof(*w));
	if (!w)
		return false;
	w->cm = cm;
	w->mad = *in;
	w->src = *src;
	ev_timer_init(&w->timer, waited_enough, CM_LISTEN_WAIT, 0);
	w->timer.data = w;
	ev_timer_start(cm->dev->loop, &w->timer);
	TAILQ_INSERT_TAIL(&cm->waiting, w, link);
	cm->nwaiting++;
	cm->dev->cnt.cm_req_waited++;
	return true;
}

static uint64_t request_service_id(const struct cm_mad *m)
{
	return m->hdr.attr_id == CM_ATTR_REQ ? m->req.service_id : m->sidr_req.service_id;
}

void cm_listening_now(struct cm *cm, uint64_t service_id)
{
	struct cm_waiting_req *w, *next, copy;

	/* (a request taken now never waits again: the list only loses w) */
	for (w = TAILQ_FIRST(&cm->waiting); w; w = next) {
		next = TAILQ_NEXT(w, link);
		if (request_service_id(&w->mad) != service_id)
			continue;
		copy = *w;
		free_waiting(w);
		cm_take_request(cm, &copy.mad, &copy.src, false);
	}
}

void cm_free_waiting(struct cm *cm)
{
	while (!TAILQ_EMPTY(&cm->waiting))
		free_waiting(TAILQ_FIRST(&cm->waiting));
}
