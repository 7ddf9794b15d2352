/* rdma-write's data path (client): plan the depth and the source slots, post the writes,
 * reap their completions, beat the server's heartbeat and show progress. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "tools/rdma-write/rdma-write.h"

#define PEAK_MIN_NS        1000000ull      /* 1 ms */
#define VERIFY_SOURCE_CAP  (256ull << 20)  /* --verify: bytes of per-slot source buffers */
#define POST_BATCH         32
#define POLL_BATCH         64
#define PROGRESS_DELAY_NS  NS_PER_S        /* no progress line for runs under 1 s */
#define PROGRESS_EVERY_NS  (NS_PER_S / 4)  /* at most 4 updates a second */

/* With --verify each write in flight needs its own source slot (a slot is refilled only
 * after its previous write completed); the slots stay within VERIFY_SOURCE_CAP, which may
 * lower the depth. Without it, one buffer serves every write, as in perftest. */
void plan_depth(struct client *c, const struct options *o)
{
	uint64_t want = min_u64(o->tx_depth, o->iters), fit = VERIFY_SOURCE_CAP / o->size;

	c->slots = 1;
	c->depth = o->tx_depth;
	if (!o->verify)
		return;
	c->slots = c->depth = (uint32_t)(fit ? min_u64(want, fit) : 1);
	if (c->depth < want)
		msg("note: --verify lowers the depth to %u (its source slots stay within %llu MiB)",
		    c->depth, VERIFY_SOURCE_CAP >> 20);
}

void plan_writes(struct client *c)
{
	const struct options *o = c->s.o;
	/* Several heartbeats within the shorter of the two timeouts, so one late beat is not
	 * fatal to the server's patience. */
	uint64_t beat_ms = min_u64(1000, min_u64(o->timeout_ms, c->s.peer.timeout_ms) / 4);

	c->remote_va = c->s.peer.va + o->remote_offset;
	c->rkey = c->s.peer.rkey ^ o->rkey_xor;
	c->chunk = o->iters / 20 ? o->iters / 20 : 1;
	c->timeout_ns = (uint64_t)o->timeout_ms * NS_PER_MS;
	c->heartbeat_ns = (beat_ms ? beat_ms : 1) * NS_PER_MS;
	c->show_progress = !o->json && isatty(STDOUT_FILENO);
	if (o->aim_outside || o->rkey_xor_given)
		msg("on purpose: writing to VAddr 0x%016" PRIx64 " (offset %" PRId64
		    ") with RKey 0x%08x", c->remote_va, (int64_t)o->remote_offset, c->rkey);
}

static void clear_progress(struct client *c)
{
	if (!c->run.line_shown)
		return;
	printf("\r%79s\r", "");
	fflush(stdout);
	c->run.line_shown = false;
}

/* Ends the run; the caller prints why. Returns -1 for its caller to pass on. */
static int stop_run(struct client *c, enum abort_reason reason)
{
	clear_progress(c);
	c->run.result = RUN_ABORTED;
	c->run.reason = reason;
	return -1;
}

/* How many writes may be posted now: the iterations left, within the depth. */
static uint64_t room(const struct client *c)
{
	const struct run *r = &c->run;

	return min_u64(c->s.o->iters - r->posted, c->depth - (r->posted - r->completed));
}

static int post_batch(struct client *c)
{
	struct ibv_send_wr wrs[POST_BATCH], *bad = NULL;
	struct ibv_sge sges[POST_BATCH];
	struct run *r = &c->run;
	const size_t size = c->s.o->size;
	unsigned n = (unsigned)min_u64(room(c), POST_BATCH);
	int err;

	if (!n)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t k = r->posted + i;
		/* room() keeps at most slots writes in flight, so the write that last used
		 * this slot, k - slots, has completed. */
		uint8_t *src = c->s.ep.buf + (size_t)(k % c->slots) * size;

		if (c->s.o->verify)
			fill_pattern(src, size, k);
		sges[i] = (struct ibv_sge){
			.addr = (uintptr_t)src,
			.length = (uint32_t)size,
			.lkey = c->s.ep.mr->lkey,
		};
		wrs[i] = (struct ibv_send_wr){
			.wr_id = k,
			.next = i + 1 < n ? &wrs[i + 1] : NULL,
			.sg_list = &sges[i],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = c->remote_va, .rkey = c->rkey },
		};
	}
	if (!r->posted)
		r->t_start = r->t_activity = r->win_start = now_ns();
	err = rocemu_post_send(c->s.ep.qp, wrs, &bad);
	if (err) {
		for (unsigned i = 0; i < n; i++)   /* the ones before bad went out */
			if (bad == &wrs[i])
				r->posted += i;
		stop_run(c, ABORT_POST);
		return verbs_fail(c->s.ep.ctx, "rocemu_post_send", err);
	}
	r->posted += n;
	return 0;
}

/* Closes the peak window once it holds at least chunk completions and lasted at least
 * PEAK_MIN_NS: completions are reaped in batches, so a shorter window would time the poll
 * loop rather than the transfer. */
static void update_peak(struct client *c, uint64_t now)
{
	struct run *r = &c->run;
	uint64_t done = r->completed - r->win_count;
	double bps;

	if (done < c->chunk || now - r->win_start < PEAK_MIN_NS)
		return;
	bps = (double)done * (double)c->s.o->size * NS_PER_S / (double)(now - r->win_start);
	if (bps > r->peak_bps)
		r->peak_bps = bps;
	r->win_start = now;
	r->win_count = r->completed;
}

/* Reaps up to POLL_BATCH completions; returns how many, or -1 when the run is over. */
static int poll_batch(struct client *c)
{
	struct ibv_wc wc[POLL_BATCH];
	struct run *r = &c->run;
	int n = rocemu_poll_cq(c->s.ep.cq, POLL_BATCH, wc);

	if (n < 0) {
		int err = errno;

		stop_run(c, ABORT_DAEMON);
		msg("rocemu_poll_cq: %s", strerror(err));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			clear_progress(c);
			r->result = RUN_WC_ERROR;
			r->bad_wc = wc[i];
			return -1;
		}
		/* RC completes in posting order; anything else is an emulator bug. */
		if (wc[i].wr_id != r->completed) {
			stop_run(c, ABORT_ORDER);
			msg("completion out of order: wr_id %" PRIu64 ", expected %" PRIu64,
			    (uint64_t)wc[i].wr_id, r->completed);
			return -1;
		}
		r->completed++;
	}
	if (n > 0) {
		r->t_activity = r->t_end = now_ns();
		update_peak(c, r->t_end);
	}
	return n;
}

static void show_progress(struct client *c, uint64_t now)
{
	const struct run *r = &c->run;
	double secs = (double)(now - r->t_start) / NS_PER_S;
	double bytes = (double)r->completed * (double)c->s.o->size;

	if (r->completed)
		printf("\r %.1f MiB written, %.2f MB/sec, %.0f s left    ", bytes / MIB,
		       bytes / secs / MIB,
		       (double)(c->s.o->iters - r->completed) * secs / (double)r->completed);
	else
		printf("\r waiting for the first completion    ");
	fflush(stdout);
	c->run.line_shown = true;
	c->run.t_line = now;
}

/* The periodic chores of the run: the server's heartbeat, the terminal's progress line. */
static int tick(struct client *c, uint64_t now)
{
	struct run *r = &c->run;

	if (now - r->t_heartbeat >= c->heartbeat_ns) {
		struct ctl_msg beat = { .type = MSG_PROGRESS, .count = r->completed };

		if (send_ctl(c->s.fd, &beat, NULL) < 0) {
			int err = errno;

			stop_run(c, ABORT_SERVER);
			msg("lost the server: %s", strerror(err));
			return -1;
		}
		r->t_heartbeat = now;
	}
	if (c->show_progress && now - r->t_start >= PROGRESS_DELAY_NS &&
	    now - r->t_line >= PROGRESS_EVERY_NS)
		show_progress(c, now);
	return 0;
}

/* Sleeps on the CQ until a completion, the next heartbeat or progress line, or the
 * timeout, which counts from the last completion. */
static int wait_completions(struct client *c, uint64_t now)
{
	struct run *r = &c->run;
	uint64_t deadline = r->t_activity + c->timeout_ns;
	uint64_t wake = min_u64(deadline, r->t_heartbeat + c->heartbeat_ns);
	int err;

	if (now >= deadline) {
		stop_run(c, ABORT_TIMEOUT);
		msg("timed out after %d ms waiting for completions (%" PRIu64 " posted, %" PRIu64
		    " of %" PRIu64 " completed)", c->s.o->timeout_ms, r->posted, r->completed,
		    c->s.o->iters);
		return -1;
	}
	if (c->show_progress)
		wake = min_u64(wake, now + PROGRESS_EVERY_NS);
	err = rocemu_wait_cq(c->s.ep.cq, ms_left(wake));
	if (!err || err == ETIMEDOUT)
		return 0;   /* the loop polls, beats or times out */
	stop_run(c, ABORT_DAEMON);
	if (err == EPIPE)
		msg("rocemu_wait_cq: the daemon went away");
	else
		verbs_fail(c->s.ep.ctx, "rocemu_wait_cq", err);
	return -1;
}

void run_writes(struct client *c)
{
	struct run *r = &c->run;
	const uint64_t iters = c->s.o->iters;

	c->ran = true;
	r->t_start = r->t_end = r->t_activity = r->t_heartbeat = r->t_line = r->win_start =
		now_ns();
	while (r->completed < iters) {
		uint64_t now;
		int n = 0;

		if (post_batch(c) < 0 || (n = poll_batch(c)) < 0)
			break;
		if (r->completed == iters)
			break;
		now = now_ns();
		if (tick(c, now) < 0)
			break;
		/* Nothing reaped and nothing to post: sleep on the CQ rather than spin. */
		if (n == 0 && !room(c) && wait_completions(c, now) < 0)
			break;
	}
	clear_progress(c);
}
