/* Completion channels. A channel's fd is an epoll set of the event pipes of the CQs bound
 * to it, so a program may poll/epoll the channel as on a NIC. The pipes signal every batch
 * of completions, armed or not: ibv_get_cq_event empties them and returns only a CQ whose
 * armed event is due; a program polling a nonblocking channel may thus see it readable and
 * get EAGAIN, which verbs allows. */
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

/* The first CQ of the channel whose armed event is due (it is disarmed), or NULL; err is
 * set when the daemon is gone. */
static struct rv_cq *due_cq(struct rv_channel *c, int *err)
{
	struct rv_cq *found = NULL, *cq;
	int rc;

	pthread_mutex_lock(&c->lock);
	LIST_FOREACH(cq, &c->cqs, link) {
		pthread_mutex_lock(&cq->lock);
		rc = rocemu_get_cq_event(cq->cq, 0);
		pthread_mutex_unlock(&cq->lock);
		if (rc == 0) {
			found = cq;
			break;
		}
		if (rc != ETIMEDOUT && rc != EINVAL)
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

/* Sleeps up to ms (-1: until a bound CQ's pipe has something), then empties those pipes
 * before the next look at the CQs, so a completion added after that look writes again: a
 * CQ that is not armed must not keep the channel readable, or a program that polls the
 * channel's fd would spin. 0, or EPIPE once the daemon is gone (its end of every pipe
 * hangs up). */
static int channel_sleep(struct rv_channel *c, int ms)
{
	struct epoll_event ev[8];
	uint64_t count;
	int n = epoll_wait(c->ch.fd, ev, 8, ms);

	if (n < 0)
		return errno == EINTR && !rv_interrupt_returns() ? 0 : errno;
	for (int i = 0; i < n; i++) {
		struct rv_cq *cq = ev[i].data.ptr;

		if (ev[i].events & (EPOLLHUP | EPOLLERR))
			return EPIPE;
		while (read(rocemu_cq_event_fd(cq->cq), &count, sizeof(count)) > 0)
			;
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
static struct rv_cq *spin_for_due(struct rv_channel *c, int64_t began, int *err)
{
	int64_t end = began + (int64_t)__atomic_load_n(&c->spin_ns, __ATOMIC_RELAXED);
	struct rv_cq *cq;

	do {
		cq = due_cq(c, err);
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
	struct rv_cq *cq;
	int err = 0;

	for (bool looked = false;; looked = true) {
		cq = looked || nonblocking ? due_cq(c, &err) : spin_for_due(c, began, &err);
		if (cq)
			break;
		if (err || (nonblocking && looked)) {
			errno = err ? err : EAGAIN;
			return -1;
		}
		err = channel_sleep(c, nonblocking ? 0 : -1);
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
