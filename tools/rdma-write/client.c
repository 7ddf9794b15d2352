/* rdma-write's client session: connect, check the setup agrees with the server's, run the
 * writes, trade the result for the server's verdict. */
#include <inttypes.h>
#include <unistd.h>

#include "tools/rdma-write/rdma-write.h"

/* Tells the server how the run ended and reads its verdict on the buffer. */
static bool trade_result(struct client *c, struct ctl_msg *verdict)
{
	const struct options *o = c->s.o;
	const struct run *r = &c->run;
	const struct ctl_msg done = {
		.type = MSG_DONE,
		.code = r->result == RUN_OK ? DONE_OK
			: r->result == RUN_WC_ERROR ? DONE_WC_ERROR : DONE_ABORTED,
		.status = r->result == RUN_WC_ERROR ? (uint32_t)r->bad_wc.status : 0,
		.flags = (o->aim_outside ? DONE_AIMED_OUTSIDE : 0) |
			 (o->rkey_xor ? DONE_KEY_ALTERED : 0),
		.count = r->completed,
		/* Completions arrive in order, so the last one names the data in place. */
		.value = r->completed ? r->completed - 1 : 0,
		.offset = o->remote_offset,
	};

	if (send_ctl(c->s.fd, &done, "the result") < 0)
		return false;
	do {   /* a READY we did not wait for (setup failed) may come first */
		if (recv_ctl(c->s.fd, verdict, o->timeout_ms, "the server's verdict") < 0)
			return false;
	} while (verdict->type == MSG_READY);
	if (verdict->type != MSG_VERDICT) {
		msg("expected the server's verdict, got message type %u", verdict->type);
		return false;
	}
	return true;
}

enum prepare_result { PREP_OK, PREP_FAILED, PREP_SERVER_LOST };

/* From the exchanged connection data to the moment the server's QP accepts writes. */
static enum prepare_result prepare(struct client *c)
{
	struct session *s = &c->s;
	const struct options *o = s->o;
	struct ctl_msg ready;

	if (!o->aim_outside && o->size > s->peer.size) {
		msg("-s %zu is larger than the server's buffer of %" PRIu64 " bytes (use a smaller "
		    "size, or --remote-offset to aim outside on purpose)", o->size, s->peer.size);
		return PREP_FAILED;
	}
	if (connect_qp(s) < 0)
		return PREP_FAILED;
	/* Writes sent before the server's QP is in RTR would be dropped and retried. */
	if (recv_ctl(s->fd, &ready, o->timeout_ms, "the server to get ready") < 0)
		return PREP_SERVER_LOST;
	if (ready.type != MSG_READY) {
		msg("expected READY from the server, got message type %u", ready.type);
		return PREP_SERVER_LOST;
	}
	plan_writes(c);
	return PREP_OK;
}

/* --start-file: polled every millisecond, so many clients start within one of each other.
 * The server hears nothing meanwhile; the wait is bounded by the timeout it was told. */
static bool wait_for_start(const struct options *o)
{
	uint64_t deadline = now_ns() + (uint64_t)o->timeout_ms * NS_PER_MS;

	while (access(o->start_file, F_OK) != 0) {
		if (now_ns() >= deadline) {
			msg("%s did not appear within %d ms", o->start_file, o->timeout_ms);
			return false;
		}
		usleep(1000);
	}
	return true;
}

static int client_session(struct client *c)
{
	struct ctl_msg verdict;

	if (!verify_agrees(&c->s))
		return 2;
	switch (prepare(c)) {
	case PREP_OK:
		if (c->s.o->start_file && !wait_for_start(c->s.o)) {
			c->run.result = RUN_ABORTED;
			c->run.reason = ABORT_SETUP;
			break;
		}
		run_writes(c);
		break;
	case PREP_FAILED:
		c->run.result = RUN_ABORTED;
		c->run.reason = ABORT_SETUP;
		break;
	case PREP_SERVER_LOST:
		return 1;
	}
	if (c->run.result == RUN_ABORTED && c->run.reason == ABORT_SERVER)
		return report(c, NULL);
	return report(c, trade_result(c, &verdict) ? &verdict : NULL);
}

int run_client(const struct options *o)
{
	struct client c = {
		.s = { .o = o, .fd = -1, .info = o->json ? stderr : stdout },
	};
	int rc = 1;

	plan_depth(&c, o);
	if (setup_endpoint(&c.s.ep, o, (size_t)c.slots * o->size, 0) == 0 &&
	    (c.s.fd = tcp_connect(o->host, o->port)) >= 0 && exchange(&c.s) == 0)
		rc = client_session(&c);
	if (close_session(&c.s) < 0 && rc == 0)
		rc = 1;
	return rc;
}
