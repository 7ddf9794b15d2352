/* rdma-write's server: wait for one client, let it write into the buffer, then judge what
 * the buffer holds against what the client reports. */
#include <inttypes.h>
#include <unistd.h>

#include "tools/rdma-write/rdma-write.h"

/* Reads heartbeats until the client's result; the timeout bounds each silence. */
static int wait_done(struct session *s, struct ctl_msg *done)
{
	do {
		if (recv_ctl(s->fd, done, s->o->timeout_ms, "the client's progress or result") < 0)
			return -1;
	} while (done->type == MSG_PROGRESS);
	if (done->type != MSG_DONE || done->code > DONE_ABORTED ||
	    (done->code == DONE_OK && (!done->count || done->value >= done->count))) {
		msg("malformed message from the client (type %u, result %u)", done->type,
		    done->code);
		return -1;
	}
	return 0;
}

static struct ctl_msg verdict_at(enum verdict_code code, uint64_t offset)
{
	return (struct ctl_msg){ .type = MSG_VERDICT, .code = code, .value = offset };
}

/* Compares the buffer with what the client's result says it should hold. */
static struct ctl_msg judge_buffer(const struct session *s, const struct ctl_msg *done)
{
	const uint8_t *buf = s->ep.buf;
	const size_t len = s->ep.buf_len;
	const uint64_t size = s->peer.size, off = done->offset;
	size_t bad;

	if (done->code != DONE_OK) {
		/* Only a client that completed no write can promise nothing landed. */
		if (done->count)
			return verdict_at(VERDICT_UNCHECKED, 0);
		bad = find_not_fill(buf, 0, len);
		return verdict_at(bad == len ? VERDICT_UNCHANGED : VERDICT_CHANGED, bad);
	}
	/* Overflow-safe: offset and size come from the peer. */
	if (off > len || size > len - off || (done->flags & DONE_KEY_ALTERED))
		return verdict_at(VERDICT_WRONGLY_ACCEPTED, off);
	if (!s->o->verify)
		return verdict_at(VERDICT_OK, 0);
	bad = find_pattern_mismatch(buf + off, size, done->value);
	if (bad < size)
		return verdict_at(VERDICT_MISMATCH, off + bad);
	/* Around the message the fill must remain: a write that landed elsewhere shows here. */
	if ((bad = find_not_fill(buf, 0, off)) < off ||
	    (bad = find_not_fill(buf, off + size, len)) < len)
		return verdict_at(VERDICT_MISMATCH, bad);
	return verdict_at(VERDICT_OK, 0);
}

/* Prints what the client reported and what the buffer holds; true when that matches. */
static bool report_server(const struct session *s, const struct ctl_msg *done,
			  const struct ctl_msg *v)
{
	if (done->code == DONE_WC_ERROR)
		printf("client failed: completion error %s after %" PRIu64 " successful writes\n",
		       rocemu_wc_status_str(done->status), done->count);
	else if (done->code == DONE_ABORTED)
		printf("client failed: it gave up after %" PRIu64 " successful writes\n",
		       done->count);
	switch (v->code) {
	case VERDICT_OK:
		if (s->o->verify)
			printf("verify: OK\n");
		else
			printf("client done: %" PRIu64 " writes of %" PRIu64 " bytes\n",
			       done->count, s->peer.size);
		return true;
	case VERDICT_MISMATCH:
		printf("verify: FAILED at offset %" PRIu64 "\n", v->value);
		return false;
	case VERDICT_UNCHANGED:
		printf("buffer unchanged\n");
		return true;
	case VERDICT_CHANGED:
		printf("buffer CHANGED at offset %" PRIu64 "\n", v->value);
		return false;
	case VERDICT_UNCHECKED:
		printf("buffer not checked: writes had landed before the client failed\n");
		return false;
	default:
		msg("the client's writes completed although they %s",
		    done->flags & DONE_KEY_ALTERED ? "used a wrong rkey"
						   : "aimed outside this buffer");
		return false;
	}
}

static int server_session(struct session *s)
{
	const struct ctl_msg ready = { .type = MSG_READY };
	struct ctl_msg done, verdict;
	bool ok;

	if (!verify_agrees(s))
		return 2;
	if (connect_qp(s) < 0 || send_ctl(s->fd, &ready, "READY") < 0 || wait_done(s, &done) < 0)
		return 1;
	verdict = judge_buffer(s, &done);
	ok = report_server(s, &done, &verdict);
	if (send_ctl(s->fd, &verdict, "the verdict") < 0)
		return 1;
	return ok ? 0 : 1;
}

static int accept_client(const struct options *o)
{
	int lfd = tcp_listen(o->port), fd;

	if (lfd < 0)
		return -1;
	printf("waiting for a client on TCP port %u\n", o->port);
	fd = tcp_accept(lfd, o->port, o->timeout_ms);
	close(lfd);
	return fd;
}

int run_server(const struct options *o)
{
	struct session s = { .o = o, .fd = -1, .info = stdout };
	int rc = 1;

	if (setup_endpoint(&s.ep, o, o->size, SERVER_FILL) == 0 &&
	    (s.fd = accept_client(o)) >= 0 && exchange(&s) == 0)
		rc = server_session(&s);
	if (close_session(&s) < 0 && rc == 0)
		rc = 1;
	return rc;
}
