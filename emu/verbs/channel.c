/* Completion channels. A channel's fd is an epoll set of the event pipes of the CQs bound
 * to it, so a program may poll/epoll the channel as on a NIC: each pipe holds its CQ's
 * queued events, a write each (rocemu_req_notify_cq), so the fd is readable exactly when
 * an event is there to take, and ibv_get_cq_event takes one. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "emu/lib/lib_int.h"    /* wait_spin_next */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ibctx)
{
	struct rv_channel *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->spin_ns = WAIT_SPIN_MIN_NS;
	c->ch.fd = epoll_create1(EPOLL_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	c->ch.context = ibctx;
	pthread_mutex_init(&c->lock, NULL);
	LIST_INIT(&c->cqs);
	return &c->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct rv_channel *c = (struct rv_channel *)ch;

	if (!LIST_EMPTY(&c->cqs))
		return EBUSY;
	close(c->ch.fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

int rv_channel_bind(struct rv_channel *c, struct rv_cq *cq)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = cq };

	if (epoll_ctl(c->ch.fd, EPOLL_CTL_ADD, rocemu_cq_event_fd(cq->cq), &ev))
		return errno;
	pthread_mutex_lock(&c->lock);
	LIST_INSERT_HEAD(&c->cqs, cq, link);
	c->ch.refcnt++;
	pthread_mutex_unlock(&c->lock);
	cq->channel = c;
	return 0;
}

void rv_channel_unbind(struct rv_cq *cq)
{
	struct rv_channel *c = cq->channel;

	if (!c)
		return;
	epoll_ctl(c->ch.fd, EPOLL_CTL_DEL, rocemu_cq_event_fd(cq->cq), NULL);
	pthread_mutex_lock(&c->lock);
	LIST_REMOVE(cq, link);
	c->ch.refcnt--;
	pthread_mutex_unlock(&c->lock);
}

/* The first CQ of the channel whose arming the daemon has answered, its event taken
 * (waiting the moment it takes the daemon to write it), or NULL; *err is set when the
 * daemon is gone. A look at shared memory per CQ, no system call. */
static struct rv_cq *answered_cq(struct rv_channel *c, int *err)
{
	struct rv_cq *found = NULL, *cq;
	int rc;

	pthread_mutex_lock(&c->lock);
	LIST_FOREACH(cq, &c->cqs, link) {
		if (!rocemu_cq_event_coming(cq->cq))
			continue;
		pthread_mutex_lock(&cq->lock);
		rc = rocemu_cq_take_event(cq->cq, EVENT_WRITE_WAIT_MS);
		pthread_mutex_unlock(&cq->lock);
		if (rc == 0) {
			found = cq;
			break;
		}
		if (rc != EAGAIN)
			*err = rc;
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

/* The kernel's ibv_get_cq_event and ibv_get_async_event block in read(), which a signal
 * whose handler lacks SA_RESTART interrupts with EINTR and any other signal does not;
 * programs count on it (qperf's server leaves its last wait for a completion when its
 * timer's SIGALRM says the test is over). The waits here are epoll_wait, which every
 * handled signal interrupts, and which signal it was is not told: so EINTR is given back
 * when some handler of this process lacks SA_RESTART, and the wait goes on when every one
 * has it (or none is installed). The signals a fault raises in the faulting thread are
 * left out: they do not interrupt a wait, and sanitizers and UCX handle them. */
static bool raised_by_faults(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
	       sig == SIGTRAP || sig == SIGSYS;
}

bool rv_interrupt_returns(void)
{
	struct sigaction sa;

	for (int sig = 1; sig < NSIG; sig++) {
		if (raised_by_faults(sig) || sigaction(sig, NULL, &sa) != 0 ||
		    sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return true;
	}
	return false;
}

/* Waits up to ms (-1: no limit) for a queued event and takes it: *found is its CQ (other
 * CQs' events stay queued for the next call). 0 (*found may be NULL: nothing came, or
 * another thread took it), or EPIPE once the daemon is gone (its end of every pipe hangs
 * up). */
static int take_queued(struct rv_channel *c, int ms, struct rv_cq **found)
{
	struct epoll_event ev[8];
	int n = epoll_wait(c->ch.fd, ev, 8, ms), rc;

	if (n < 0)
		return errno == EINTR && !rv_interrupt_returns() ? 0 : errno;
	for (int i = 0; i < n; i++) {
		struct rv_cq *cq = ev[i].data.ptr;

		if (ev[i].events & (EPOLLHUP | EPOLLERR))
			return EPIPE;
		pthread_mutex_lock(&cq->lock);
		rc = rocemu_cq_take_event(cq->cq, 0);
		pthread_mutex_unlock(&cq->lock);
		if (rc == 0) {
			*found = cq;
			return 0;
		}
		if (rc != EAGAIN)
			return rc;
	}
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Hybrid polling, as rocemu_wait_cq: a blocking ibv_get_cq_event looks for a while before
 * its first sleep, so an event due within a round trip costs no sleep and wakeup; how long
 * follows the channel's waits (wait_spin_next). */
static struct rv_cq *spin_for_answer(struct rv_channel *c, int64_t began, int *err)
{
	int64_t end = began + (int64_t)__atomic_load_n(&c->spin_ns, __ATOMIC_RELAXED);
	struct rv_cq *cq;

	do {
		cq = answered_cq(c, err);
		if (cq || *err)
			return cq;
		sched_yield();      /* the daemon that will add it may be waiting for this CPU */
	} while (now_ns() < end);
	return NULL;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq_out, void **cq_context)
{
	struct rv_channel *c = (struct rv_channel *)ch;
	bool nonblocking = fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK;
	int64_t began = now_ns();
	struct rv_cq *cq = NULL;
	int err = take_queued(c, 0, &cq);

	if (!cq && !err && !nonblocking)
		cq = spin_for_answer(c, began, &err);
	while (!cq && !err && !nonblocking)
		err = take_queued(c, -1, &cq);
	if (!cq) {
		errno = err ? err : EAGAIN;
		return -1;
	}
	if (!nonblocking)   /* (threads on one channel: the last one's lesson stands) */
		__atomic_store_n(&c->spin_ns,
				 wait_spin_next(__atomic_load_n(&c->spin_ns, __ATOMIC_RELAXED),
						(uint64_t)(now_ns() - began)),
				 __ATOMIC_RELAXED);
	*cq_out = (struct ibv_cq *)&cq->ex;
	*cq_context = cq->ex.cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	pthread_mutex_lock(&ibcq->mutex);
	ibcq->comp_events_completed += nevents;
	pthread_cond_signal(&ibcq->cond);
	pthread_mutex_unlock(&ibcq->mutex);
}
