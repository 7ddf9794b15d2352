/* Completion queues: a ring of CQEs the daemon produces and the client consumes, and a
 * notification pipe written at most once per turn of the loop. */

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

struct cq *cq_create(struct owner *o, uint32_t cqe, int fds[2], int *err)
{
	struct cq *cq = calloc(1, sizeof(*cq));
	struct ring_mem m;

	if (!cq) {
		*err = -ENOMEM;
		return NULL;
	}
	cq->owner = o;
	cq->entries = pow2_at_least(cqe < 1 ? 1 : cqe);
	cq->ring_bytes = proto_ring_bytes(cq->entries, sizeof(struct proto_cqe));
	*err = ring_take(o, RING_CQ, cq->ring_bytes, &m);
	if (*err) {
		free(cq);
		return NULL;
	}
	cq->ctl = m.map;
	cq->ring = (struct proto_cqe *)(cq->ctl + 1);
	cq->memfd = m.memfd;
	cq->notify_fd = m.ends[1];
	cq->client_end = m.ends[0];
	fds[0] = m.memfd;
	fds[1] = m.ends[0];
	return cq;
}

/* A ring of cqe entries or more in a new memfd (*fd), holding the completions the client
 * has not polled at the indices they had: the client goes on from its consumer index. */
int cq_resize(struct cq *cq, uint32_t cqe, int *fd)
{
	uint32_t prod = cq->ctl->prod, cons = __atomic_load_n(&cq->ctl->cons, __ATOMIC_ACQUIRE);
	uint32_t entries = pow2_at_least(cqe < 1 ? 1 : cqe);
	size_t bytes = proto_ring_bytes(entries, sizeof(struct proto_cqe));
	struct proto_ring_ctl *ctl;
	struct proto_cqe *ring;

	if (prod - cons > cq->entries || prod - cons > entries)
		return -EINVAL;          /* a lying consumer, or more waiting than would fit */
	ctl = ring_alloc("rocemu-cq", bytes, fd);
	if (!ctl)
		return -errno;
	ring = (struct proto_cqe *)(ctl + 1);
	for (uint32_t i = cons; i != prod; i++)
		ring[i & (entries - 1)] = cq->ring[i & (cq->entries - 1)];
	ctl->prod = prod;
	ctl->cons = cons;
	/* a client asleep on the CQ asked to be woken: the new ring says so too */
	ctl->cons_flags = __atomic_load_n(&cq->ctl->cons_flags, __ATOMIC_RELAXED);
	munmap(cq->ctl, cq->ring_bytes);
	close(cq->memfd);
	cq->memfd = *fd;
	cq->ctl = ctl;
	cq->ring = ring;
	cq->entries = entries;
	cq->ring_bytes = bytes;
	cq->overflowed = false;
	return 0;
}

int cq_destroy(struct cq *cq)
{
	if (cq->users)
		return -EBUSY;
	if (cq->notify_pending)
		STAILQ_REMOVE(&cq->owner->dev->tp.notify_list, cq, cq, notify_link);
	ring_give(cq->owner, RING_CQ, &(struct ring_mem){ .map = cq->ctl, .bytes = cq->ring_bytes,
			.memfd = cq->memfd, .ends = { cq->client_end, cq->notify_fd } });
	free(cq);
	return 0;
}

void owner_async_event(struct owner *own, uint32_t type, uint32_t handle)
{
	struct proto_async_event ev = { .type = type, .handle = handle };

	if (own->async_fd >= 0 && write(own->async_fd, &ev, sizeof(ev)) != (ssize_t)sizeof(ev))
		own->dev->cnt.async_events_lost++;
}

/* The client owns the consumer index: it is trusted only as far as it stays between what
 * was produced and one ring behind it. A CQ whose consumer lies counts as full; each
 * completion lost is an IBV_EVENT_CQ_ERR, as rxe raises one for each. */
void cq_push(struct cq *cq, const struct proto_cqe *cqe)
{
	uint32_t prod = cq->ctl->prod;
	uint32_t cons = __atomic_load_n(&cq->ctl->cons, __ATOMIC_ACQUIRE);

	if (prod - cons >= cq->entries) {
		cq->owner->dev->cnt.cq_overflow++;
		if (!cq->overflowed)
			log_limited("client pid %d: CQ %u overflowed; completions lost",
				    (int)cq->owner->pid, cq->handle);
		cq->overflowed = true;
		owner_async_event(cq->owner, IBV_EVENT_CQ_ERR, cq->handle);
		return;
	}
	cq->ring[prod & (cq->entries - 1)] = *cqe;
	__atomic_store_n(&cq->ctl->prod, prod + 1, __ATOMIC_RELEASE);
	/* an unsuccessful completion answers a solicited arming too, as ibv_req_notify_cq(3)
	 * defines "solicited" (rxe counts only its flushed receives) */
	cq->solicited_pending |= cqe->solicited || cqe->status != IBV_WC_SUCCESS;
	if (!cq->notify_pending) {
		cq->notify_pending = true;
		STAILQ_INSERT_TAIL(&cq->owner->dev->tp.notify_list, cq, notify_link);
	}
}

/* Whether the client asked for a write (proto.h: PROTO_RING_WAKE, and for a CQ armed for
 * solicited events only PROTO_RING_WAKE_SOLICITED, which a solicited completion answers)
 * and we took the request: the flags change to nothing only if the client did not change
 * them meanwhile, so a request is answered by one write, and only by a completion it
 * waits for. */
static bool take_wakeup(struct cq *cq)
{
	uint32_t flags = __atomic_load_n(&cq->ctl->cons_flags, __ATOMIC_RELAXED);

	while (flags & PROTO_RING_WAKE) {
		if ((flags & PROTO_RING_WAKE_SOLICITED) && !cq->solicited_pending)
			return false;
		if (__atomic_compare_exchange_n(&cq->ctl->cons_flags, &flags, 0, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/* At most one wakeup write per CQ per loop iteration, however many completions it got,
 * and none to a client that polls: only one that asked is woken, and the flag is taken,
 * so a client asleep gets one write per sleep. The fence orders the indices cq_push
 * published before the flags are read. */
void cq_flush_notify(struct dev *dev)
{
	struct cq *cq;
	uint64_t one = 1;

	if (STAILQ_EMPTY(&dev->tp.notify_list))
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* a full pipe (EAGAIN) already holds a wakeup the client has not read */
	while ((cq = STAILQ_FIRST(&dev->tp.notify_list))) {
		STAILQ_REMOVE_HEAD(&dev->tp.notify_list, notify_link);
		cq->notify_pending = false;
		if (take_wakeup(cq)) {
			dev->cnt.cq_wakeups++;
			(void)!write(cq->notify_fd, &one, sizeof(one));
		}
		cq->solicited_pending = false;
	}
}
