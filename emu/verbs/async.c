/* Asynchronous events: the context's async_fd is an epoll set of the daemon's socket
 * (its hang-up is IBV_EVENT_DEVICE_FATAL), its event pipe (IBV_EVENT_CQ_ERR, and
 * IBV_EVENT_PORT_ACTIVE or IBV_EVENT_PORT_ERR when the link starts or stops running) and
 * the SRQs' limit fds (SRQ_LIMIT_REACHED). The port's state at open is remembered, so a
 * change the daemon queued before the program saw the port is not reported again. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* The event pipe's mark in the set (the socket's is NULL, an SRQ's the SRQ) */
static char event_pipe_mark;

int rv_async_init(struct rv_context *ctx)
{
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = NULL };
	struct epoll_event pipe_ev = { .events = EPOLLIN, .data.ptr = &event_pipe_mark };

	ctx->async_ep = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->async_ep < 0)
		return errno;
	if (epoll_ctl(ctx->async_ep, EPOLL_CTL_ADD, rocemu_context_fd(ctx->rc), &ev) ||
	    epoll_ctl(ctx->async_ep, EPOLL_CTL_ADD, rocemu_async_event_fd(ctx->rc), &pipe_ev)) {
		int err = errno;

		close(ctx->async_ep);
		return err;
	}
	ctx->event_port_state = ctx->port.state;
	return 0;
}

void rv_async_watch_srq(struct rv_context *ctx, struct rv_srq *srq)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = srq };

	epoll_ctl(ctx->async_ep, EPOLL_CTL_ADD, rocemu_srq_event_fd(srq->srq), &ev);
}

void rv_async_unwatch_srq(struct rv_context *ctx, struct rv_srq *srq)
{
	epoll_ctl(ctx->async_ep, EPOLL_CTL_DEL, rocemu_srq_event_fd(srq->srq), NULL);
}

/* A port event the daemon queued, unless the port was already in that state. */
static bool port_event(struct rv_context *ctx, const struct rocemu_async_event *ev,
		       struct ibv_async_event *event)
{
	enum ibv_port_state state = ev->type == IBV_EVENT_PORT_ACTIVE ? IBV_PORT_ACTIVE :
									IBV_PORT_DOWN;

	if (state == ctx->event_port_state)
		return false;
	ctx->event_port_state = state;
	event->event_type = ev->type;
	event->element.port_num = ev->port_num;
	return true;
}

/* One event the daemon queued, if any is about an object still here. */
static bool queued_event(struct rv_context *ctx, struct ibv_async_event *event)
{
	struct rocemu_async_event ev;
	bool found = false;

	pthread_mutex_lock(&ctx->lock);
	while (!found && rocemu_take_async_event(ctx->rc, &ev) == 0) {
		if (ev.type == IBV_EVENT_PORT_ACTIVE || ev.type == IBV_EVENT_PORT_ERR) {
			found = port_event(ctx, &ev, event);
		} else if (ev.type == IBV_EVENT_CQ_ERR && ev.cq) {
			struct rv_cq *cq = rocemu_cq_user(ev.cq);

			event->event_type = IBV_EVENT_CQ_ERR;
			event->element.cq = (struct ibv_cq *)&cq->ex;
			found = true;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return found;
}

/* What one readied member of the set has to tell, if anything. */
static bool ready_event(struct rv_context *ctx, const struct epoll_event *ev,
			struct ibv_async_event *event)
{
	struct rv_srq *srq = ev->data.ptr;

	if (ev->data.ptr == &event_pipe_mark) {
		/* the daemon is gone: the socket's hang-up tells it */
		if (ev->events & (EPOLLHUP | EPOLLERR))
			epoll_ctl(ctx->async_ep, EPOLL_CTL_DEL, rocemu_async_event_fd(ctx->rc), NULL);
		return queued_event(ctx, event);
	}
	if (!srq) {
		/* Told once; the socket stays hung up, so it leaves the set. */
		epoll_ctl(ctx->async_ep, EPOLL_CTL_DEL, rocemu_context_fd(ctx->rc), NULL);
		if (ctx->fatal_sent)
			return false;
		ctx->fatal_sent = true;
		event->event_type = IBV_EVENT_DEVICE_FATAL;
		return true;
	}
	if (rocemu_get_srq_event(srq->srq, 0) != 0)
		return false;
	event->event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
	event->element.srq = &srq->ibsrq;
	return true;
}

int ibv_get_async_event(struct ibv_context *ibctx, struct ibv_async_event *event)
{
	struct rv_context *ctx = rv_ctx(ibctx);
	bool nonblocking = fcntl(ctx->async_ep, F_GETFL) & O_NONBLOCK;
	struct epoll_event ev;
	int n;

	memset(event, 0, sizeof(*event));
	for (;;) {
		n = epoll_wait(ctx->async_ep, &ev, 1, nonblocking ? 0 : -1);
		if (n < 0 && (errno != EINTR || rv_interrupt_returns()))
			return -1;
		if (n > 0 && ready_event(ctx, &ev, event))
			return 0;
		if (n == 0 && nonblocking) {
			errno = EAGAIN;
			return -1;
		}
	}
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *mutex = NULL;
	pthread_cond_t *cond = NULL;
	uint32_t *count = NULL;

	switch (event->event_type) {
	case IBV_EVENT_SRQ_LIMIT_REACHED:
	case IBV_EVENT_SRQ_ERR:
		mutex = &event->element.srq->mutex;
		cond = &event->element.srq->cond;
		count = &event->element.srq->events_completed;
		break;
	case IBV_EVENT_CQ_ERR:
		mutex = &event->element.cq->mutex;
		cond = &event->element.cq->cond;
		count = &event->element.cq->async_events_completed;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		mutex = &event->element.qp->mutex;
		cond = &event->element.qp->cond;
		count = &event->element.qp->events_completed;
		break;
	default:
		return;
	}
	pthread_mutex_lock(mutex);
	(*count)++;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(mutex);
}
