/* Completion queues: a ring the daemon fills and we drain, and a pipe the daemon writes
 * after making completions visible, only while we ask it to (PROTO_RING_WAKE in the
 * ring's cons_flags: a client that polls costs the daemon no write). Whoever sleeps sets
 * the flag, fences, then looks at the ring: the daemon publishes, fences, then reads the
 * flag, so one of the two sees the other and no wakeup is lost. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* A busy-polling application learns that the daemon died from poll_cq; asking the socket
 * costs a syscall, so only one empty poll in this many asks. */
#define CQ_LIVENESS_PERIOD 1024

void cq_release(struct rocemu_cq *cq)
{
	ctx_cq_gone(cq->ctx, cq->handle);
	LIST_REMOVE(cq, link);
	ring_unmap_park(cq->ctx, &cq->map);
	close(cq->notify_fd);
	free(cq);
}

/* The ring the daemon sent in memfd fd, mapped and placed; the memfd is closed once mapped:
 * the mapping keeps the memory, and the fd would only count against the client's limit. */
static int cq_map_ring(struct rocemu_context *ctx, const struct proto_create_cq_reply *r,
		       int fd, struct ring_mapping *map, struct ring *ring)
{
	int err = r->entries ? ring_map(ctx, fd, r->ring_bytes, map) : EPROTO;

	rpc_close_fds(&fd, 1);
	if (err)
		return err;
	err = ring_place(ring, map->addr, map->len, 0, r->entries, sizeof(struct proto_cqe));
	if (err)
		ring_unmap(map);
	return err;
}

/* fds[0] is the ring memfd, fds[1] the notify pipe. */
static int cq_setup(struct rocemu_context *ctx, struct rocemu_cq *cq,
		    const struct proto_create_cq_reply *r, int *fds)
{
	int err = cq_map_ring(ctx, r, fds[0], &cq->map, &cq->ring);

	fds[0] = -1;
	if (err)
		return err;
	err = rpc_set_nonblock(fds[1]);
	if (err) {
		ring_unmap(&cq->map);
		return err;
	}
	cq->ring.next = cq->ring.ctl->cons;
	cq->notify_fd = fds[1];
	return 0;
}

struct rocemu_cq *cq_adopt(struct rocemu_context *ctx, const struct proto_create_cq_reply *r,
			   int fds[2])
{
	struct rocemu_cq *cq = calloc(1, sizeof(*cq));
	int err = cq ? cq_setup(ctx, cq, r, fds) : ENOMEM;

	if (err) {
		rpc_close_fds(fds, 2);
		free(cq);
		errno = rpc_fail(ctx, err, "the daemon at %s sent an unusable CQ ring", ctx->path);
		return NULL;
	}
	fds[1] = -1;            /* the CQ's now */
	cq->ctx = ctx;
	cq->handle = r->handle;
	cq->spin_ns = WAIT_SPIN_MIN_NS;
	LIST_INSERT_HEAD(&ctx->cqs, cq, link);
	return cq;
}

struct rocemu_cq *rocemu_create_cq(struct rocemu_context *ctx, int cqe)
{
	struct proto_create_cq req = { .hdr.op = PROTO_CREATE_CQ, .cqe = (uint32_t)cqe };
	struct proto_create_cq_reply r;
	int fds[2] = { -1, -1 };
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r), .fds = fds, .nfds = 2 };
	struct rocemu_cq *cq;
	int err;

	if (!ctx || cqe <= 0) {
		errno = EINVAL;
		return NULL;
	}
	err = rpc_call(ctx, &in, &out);
	if (err) {
		errno = err;
		return NULL;
	}
	cq = cq_adopt(ctx, &r, fds);
	if (!cq) {
		err = errno;
		rpc_handle_op(ctx, PROTO_DESTROY_CQ, r.handle);
		errno = err;
	}
	return cq;
}

/* The daemon moved what we have not polled into a new ring: we go on from our own
 * consumer index there, and let go of the old mapping. */
static int cq_remap(struct rocemu_cq *cq, const struct proto_create_cq_reply *r, int fd)
{
	struct ring ring;
	struct ring_mapping map;
	int err = cq_map_ring(cq->ctx, r, fd, &map, &ring);

	if (err)
		return err;
	ring.next = cq->ring.next;
	ring_unmap(&cq->map);
	cq->map = map;
	cq->ring = ring;
	return 0;
}

int rocemu_resize_cq(struct rocemu_cq *cq, int cqe)
{
	struct proto_resize_cq req = { .hdr.op = PROTO_RESIZE_CQ };
	struct proto_create_cq_reply r;
	int fd = -1;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r), .fds = &fd, .nfds = 1 };
	int err;

	if (!cq || cqe <= 0)
		return EINVAL;
	req.handle = cq->handle;
	req.cqe = (uint32_t)cqe;
	/* the consumer index the daemon copies from must be ours now */
	ring_store(&cq->ring.ctl->cons, cq->ring.next);
	err = rpc_call(cq->ctx, &in, &out);
	if (!err && (err = cq_remap(cq, &r, fd)))
		rpc_fail(cq->ctx, err, "the daemon at %s sent an unusable CQ ring", cq->ctx->path);
	return err;
}

int rocemu_destroy_cq(struct rocemu_cq *cq)
{
	int err;

	if (!cq)
		return EINVAL;
	err = rpc_handle_op(cq->ctx, PROTO_DESTROY_CQ, cq->handle);
	if (!err)
		cq_release(cq);
	return err;
}

/* Asks the daemon to write the pipe for the completions it adds from now on (a wait for
 * completions; arming asks in rocemu_req_notify_cq). It clears the flag when it writes:
 * every sleep sets it again, before its last look. */
static void cq_want_wakeup(struct rocemu_cq *cq)
{
	__atomic_store_n(&cq->ring.ctl->cons_flags, PROTO_RING_WAKE, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static uint32_t cq_ready(const struct rocemu_cq *cq)
{
	return ring_load(&cq->ring.ctl->prod) - cq->ring.next;
}

/* ConnectX reports a RoCE v2 datagram's packet type in wc.sl (bit 3: UDP; 2: IPv4, 1:
 * IPv6), and UCX's UD transport reads it to find the address in the GRH area: with rxe's 0
 * it takes every datagram for IPv6 and drops those that came over IPv4. */
static uint8_t roce_packet_type(uint32_t ip_version)
{
	return ip_version == 4 ? 0x8 | 0x2 : ip_version == 6 ? 0x8 | 0x1 : 0;
}

static void cqe_to_wc(const struct proto_cqe *e, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = e->wr_id;
	wc->status = (enum ibv_wc_status)e->status;
	wc->opcode = (enum ibv_wc_opcode)e->opcode;
	wc->byte_len = e->byte_len;
	wc->imm_data = e->imm;
	wc->qp_num = e->qp_num;
	wc->wc_flags = e->wc_flags;
	wc->vendor_err = e->vendor_err;
	wc->src_qp = e->src_qp;
	wc->sl = roce_packet_type(e->ip_version);
}

/* An empty ring: 0, or -1 with EPIPE once the daemon is known to be gone. */
static int cq_empty(struct rocemu_cq *cq)
{
	if (cq->idle_polls++ % CQ_LIVENESS_PERIOD == 0)
		rpc_alive(cq->ctx);
	if (!cq->ctx->dead)
		return 0;
	rpc_gone(cq->ctx);
	errno = EPIPE;
	return -1;
}

int rocemu_poll_cq(struct rocemu_cq *cq, int num, struct ibv_wc *wc)
{
	const struct proto_cqe *entries;
	uint32_t n;

	if (!cq || num < 0 || (num > 0 && !wc)) {
		errno = EINVAL;
		return -1;
	}
	n = cq_ready(cq);
	if (n == 0)
		return cq_empty(cq);
	if (n > (uint32_t)num)
		n = (uint32_t)num;
	entries = cq->ring.entries;
	for (uint32_t i = 0; i < n; i++)
		cqe_to_wc(&entries[(cq->ring.next + i) & (cq->ring.count - 1)], &wc[i]);
	cq->ring.next += n;
	/* Release: the slots are read before the daemon may reuse them. */
	ring_store(&cq->ring.ctl->cons, cq->ring.next);
	return (int)n;
}

/* The survivors move toward the producer's end and the consumer index skips the slots
 * freed, as libmlx5 cleans a CQ: the daemon writes only beyond what it has published, so
 * it is never in the way. */
uint32_t rocemu_cq_forget_qp(struct rocemu_cq *cq, uint32_t qp_num, bool keep_receives)
{
	struct proto_cqe *entries = cq->ring.entries;
	uint32_t mask = cq->ring.count - 1, dropped = 0;
	uint32_t i = ring_load(&cq->ring.ctl->prod);

	while (i != cq->ring.next) {
		const struct proto_cqe *e = &entries[--i & mask];

		if (e->qp_num == qp_num && !(keep_receives && (e->opcode & IBV_WC_RECV)))
			dropped++;
		else if (dropped)
			entries[(i + dropped) & mask] = entries[i & mask];
	}
	cq->ring.next += dropped;
	ring_store(&cq->ring.ctl->cons, cq->ring.next);
	return dropped;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Hybrid polling: a wait looks at the ring before it sleeps, so a completion due within a
 * round trip is taken without a sleep and a wakeup, which cost tens of microseconds on a
 * VM whose CPU went idle (docs/benchmarks.md). Each look yields the CPU: the daemon that
 * will add the completion may be waiting for this one (a spin that did not yield made
 * --busy-poll's round trip 42 us instead of 9).
 *
 * How long it looks follows the waits it serves, as the kernel's hybrid polling sleeps for
 * a share of the mean completion time: up at once to twice a wait it missed that ended
 * within WAIT_SPIN_MAX_NS (lib_int.h), so a one-at-a-time exchange whose round trip is
 * longer than the first look stops paying a sleep each time; down slowly after shorter
 * waits; down to the floor after longer ones (a server between requests), where a look
 * cannot save the sleep, so an idle program polls WAIT_SPIN_MIN_NS a wait. Measured on a
 * 2-CPU VM where waking an idle CPU costs about 20 us, a 64-byte WRITE's post to
 * completion with the client asleep: a median of 52.7 us over 20 runs with a fixed 30 us
 * look, 18.1 us with this one. */
uint64_t wait_spin_next(uint64_t spin_ns, uint64_t waited_ns)
{
	uint64_t want = waited_ns <= WAIT_SPIN_MAX_NS ? 2 * waited_ns : WAIT_SPIN_MIN_NS;

	if (want < WAIT_SPIN_MIN_NS)
		want = WAIT_SPIN_MIN_NS;
	if (want > WAIT_SPIN_MAX_NS)
		want = WAIT_SPIN_MAX_NS;
	/* up at once, down slowly: a look cut shorter than the waits' tail pays the sleep
	 * and the wakeup for every wait in the tail */
	return want > spin_ns ? want : (7 * spin_ns + want) / 8;
}

static bool spin_for(const struct rocemu_cq *cq, uint64_t began,
		     bool (*ready)(const struct rocemu_cq *))
{
	uint64_t end = began + __atomic_load_n(&cq->spin_ns, __ATOMIC_RELAXED);

	do {
		if (ready(cq))
			return true;
		sched_yield();
	} while (now_ns() < end);
	return false;
}

/* After a wait that found what it waited for; a look that could not wait teaches nothing.
 * (Threads waiting on one CQ at once may each learn: the last one's lesson stands.) */
static void learn_wait(struct rocemu_cq *cq, uint64_t began, int timeout_ms)
{
	uint64_t spin = __atomic_load_n(&cq->spin_ns, __ATOMIC_RELAXED);

	if (timeout_ms != 0)
		__atomic_store_n(&cq->spin_ns, wait_spin_next(spin, now_ns() - began),
				 __ATOMIC_RELAXED);
}

static bool has_completions(const struct rocemu_cq *cq)
{
	return cq_ready(cq) != 0;
}

/* Sleeps until the notify pipe or the socket has something, or ms passes: 0 (look again),
 * ETIMEDOUT, or an errno. The write that woke it is read when take_write. */
static int cq_sleep(struct rocemu_cq *cq, int ms, bool take_write)
{
	struct pollfd p[2] = {
		{ .fd = cq->notify_fd, .events = POLLIN },
		{ .fd = cq->ctx->sock, .events = POLLRDHUP },
	};
	uint64_t count;
	int n = poll(p, 2, ms);

	if (n < 0)
		return errno == EINTR ? 0 : errno;
	if (n == 0)
		return ETIMEDOUT;
	if (p[1].revents & RPC_HANGUP)
		rpc_gone(cq->ctx);
	if (p[0].revents & POLLNVAL)
		return EBADF;
	if ((p[0].revents & POLLIN) && take_write)
		while (read(cq->notify_fd, &count, sizeof(count)) < 0 && errno == EINTR)
			;
	return 0;
}

static int ms_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	return left > 0 ? (int)left : 0;
}

void cq_nap(struct rocemu_cq *cq, unsigned usec)
{
	struct pollfd p = { .fd = cq->notify_fd, .events = POLLIN };
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)usec * 1000 };
	uint64_t count;

	cq_want_wakeup(cq);
	if (cq_ready(cq) || cq->ctx->dead)
		return;
	if (ppoll(&p, 1, &ts, NULL) > 0 && (p.revents & POLLIN))
		while (read(cq->notify_fd, &count, sizeof(count)) < 0 && errno == EINTR)
			;
}

/* Completion events, queued as a kernel device queues them: arming asks the daemon for
 * one write (PROTO_RING_WAKE, and PROTO_RING_WAKE_SOLICITED when armed for solicited
 * completions only), which the daemon takes and answers when it adds a completion the
 * arming waits for. Each write in the pipe is one event: it stays there, as an event
 * stays queued, whether or not the program has polled its completions since, and taking
 * an event reads one. So the pipe, and a channel's fd, are readable exactly when an event
 * is there to take, and a program that polls the fd and then blocks in ibv_get_cq_event
 * never blocks there (tgtd's iSER driver does so). */
int rocemu_req_notify_cq(struct rocemu_cq *cq, int solicited_only)
{
	uint32_t ask = PROTO_RING_WAKE | (solicited_only ? PROTO_RING_WAKE_SOLICITED : 0);

	if (!cq)
		return EINVAL;
	if (cq->ctx->dead)
		return rpc_gone(cq->ctx);
	cq->armed = true;
	__atomic_store_n(&cq->ring.ctl->cons_flags, ask, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/* The daemon took the arming's request: its write is in the pipe or on its way. */
static bool arming_answered(const struct rocemu_cq *cq)
{
	return cq->armed &&
	       !(__atomic_load_n(&cq->ring.ctl->cons_flags, __ATOMIC_ACQUIRE) & PROTO_RING_WAKE);
}

bool rocemu_cq_event_coming(const struct rocemu_cq *cq)
{
	return cq && arming_answered(cq);
}

int rocemu_cq_take_event(struct rocemu_cq *cq, int timeout_ms)
{
	uint64_t token;
	ssize_t n;

	if (!cq)
		return EINVAL;
	for (;;) {
		/* an answered arming is no longer armed, whichever queued write we read */
		bool answered = arming_answered(cq);

		n = read(cq->notify_fd, &token, sizeof(token));
		if (n == (ssize_t)sizeof(token)) {
			if (answered)
				cq->armed = false;
			return 0;
		}
		if (n == 0)
			return rpc_gone(cq->ctx);
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errno;
		if (timeout_ms == 0 ||
		    poll(&(struct pollfd){ .fd = cq->notify_fd, .events = POLLIN }, 1,
			 timeout_ms) <= 0)
			return EAGAIN;
	}
}

int rocemu_get_cq_event(struct rocemu_cq *cq, int timeout_ms)
{
	uint64_t began = now_ns();
	int64_t deadline;
	int err = 0;

	if (!cq)
		return EINVAL;
	if (rocemu_cq_take_event(cq, 0) == 0)
		return 0;
	if (!cq->armed)
		return EINVAL;
	deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	if (timeout_ms != 0 && spin_for(cq, began, arming_answered) &&
	    rocemu_cq_take_event(cq, EVENT_WRITE_WAIT_MS) == 0) {
		learn_wait(cq, began, timeout_ms);
		return 0;
	}
	for (bool slept = false;; slept = true) {
		if (rocemu_cq_take_event(cq, 0) == 0) {
			learn_wait(cq, began, timeout_ms);
			return 0;
		}
		if (cq->ctx->dead)
			return rpc_gone(cq->ctx);
		if (err || (slept && deadline >= 0 && now_ms() >= deadline))
			return err ? err : ETIMEDOUT;
		err = cq_sleep(cq, ms_left(deadline), false);
		if (err == ETIMEDOUT)
			err = 0;
	}
}

void rocemu_cq_set_user(struct rocemu_cq *cq, void *user)
{
	cq->user = user;
}

void *rocemu_cq_user(const struct rocemu_cq *cq)
{
	return cq->user;
}

int rocemu_cq_event_fd(const struct rocemu_cq *cq)
{
	return cq ? cq->notify_fd : -1;
}

int rocemu_wait_cq(struct rocemu_cq *cq, int timeout_ms)
{
	uint64_t began = now_ns();
	int64_t deadline;
	int err;

	if (!cq)
		return EINVAL;
	deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	if (timeout_ms != 0 && spin_for(cq, began, has_completions)) {
		learn_wait(cq, began, timeout_ms);
		return 0;
	}
	do {
		cq_want_wakeup(cq);
		if (cq_ready(cq)) {
			learn_wait(cq, began, timeout_ms);
			return 0;
		}
		if (cq->ctx->dead)
			return rpc_gone(cq->ctx);
		err = cq_sleep(cq, ms_left(deadline), true);
	} while (!err && (deadline < 0 || now_ms() < deadline));
	/* What happened during the last sleep still counts: a completion, or a hang-up. */
	if (cq_ready(cq)) {
		learn_wait(cq, began, timeout_ms);
		return 0;
	}
	if (cq->ctx->dead)
		return rpc_gone(cq->ctx);
	return err ? err : ETIMEDOUT;
}
