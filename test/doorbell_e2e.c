/* The wakeup handshakes under stress (test/doorbell.test.sh): a client skips its doorbell
 * while the daemon polls its rings, and the daemon writes a CQ's pipe only while the
 * client sleeps on it (proto.h, PROTO_RING_POLLED and PROTO_RING_WAKE). Small posts in
 * bursts with pauses around the daemon's poll budget, so that posts and sleeps race the
 * daemon's going to sleep; every completion must come (a lost doorbell or wakeup shows as
 * a wait that runs out: WAIT_MS, far beyond any round trip) in order, and every WRITE's
 * bytes must land.
 *   doorbell_e2e SOCK_A SOCK_B [ROUNDS]
 * One process holds a QP on each daemon, connected to each other (A's QP through INIT, RTR
 * and RTS in one batch, B's one change at a time). Exits 0 when every case matched, 1
 * otherwise. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/rocemu.h"
#include "test/e2e.h"

#define WAIT_MS   5000          /* a lost wakeup, not a slow machine */
#define SLOTS     512           /* 8-byte slots in B's buffer each WRITE fills one of */
#define MAX_BURST 4
#define ACCESS    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

struct side {
	struct rocemu_context *ctx;
	struct rocemu_pd *pd;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;
	struct rocemu_port_attr port;
	uint64_t *buf;
	struct rocemu_mr *mr;
};

/* Pauses in microseconds: none, shorter than the poll budgets the test runs with (100 us
 * and the default 200 us), around them, and longer, so the daemon is caught polling, going
 * to sleep, and asleep. */
static const unsigned pauses_us[] = { 0, 0, 0, 5, 20, 50, 90, 110, 150, 190, 210, 300, 1500 };

static uint32_t rnd_state = 12345;

static uint32_t rnd(uint32_t n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 16) % n;
}

static void pause_us(unsigned us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)us * 1000 };

	if (us)
		nanosleep(&ts, NULL);
}

static bool side_open(struct side *s, const char *sock)
{
	struct rocemu_qp_init_attr ia = { .max_send_wr = 16, .max_recv_wr = 16,
					  .max_send_sge = 1, .max_recv_sge = 1 };

	s->ctx = rocemu_open(sock);
	if (!s->ctx) {
		e2e_error("rocemu_open(%s): %s", sock, strerror(errno));
		return false;
	}
	s->pd = rocemu_alloc_pd(s->ctx);
	s->cq = s->pd ? rocemu_create_cq(s->ctx, 64) : NULL;
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = s->cq ? rocemu_create_qp(s->pd, &ia) : NULL;
	s->buf = calloc(SLOTS, sizeof(uint64_t));
	s->mr = s->qp && s->buf ? rocemu_reg_mr(s->pd, s->buf, SLOTS * sizeof(uint64_t), ACCESS)
				: NULL;
	if (!s->mr || rocemu_query_port(s->ctx, &s->port)) {
		e2e_error("setting up on %s: %s", sock, rocemu_last_error(s->ctx));
		return false;
	}
	return true;
}

/* Everything the context holds goes with it; the buffer after its MR. */
static void side_close(struct side *s)
{
	if (s->ctx)
		rocemu_close(s->ctx);
	free(s->buf);
}

/* with_batch: the three changes go as one batch (the RTR may wait for the neighbour, and
 * the batch must then go on from it), else one call each. */
static bool side_connect(struct side *s, const struct side *peer, bool with_batch)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = ACCESS };
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = 7, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->port.gid, .hop_limit = 64 } },
	};
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = 7, .timeout = 14,
				   .retry_cnt = 7, .rnr_retry = 7 };
	struct ibv_qp_attr *attr[3] = { &init, &rtr, &rts };
	const int mask[3] = {
		IBV_QP_STATE | IBV_QP_ACCESS_FLAGS,
		IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC,
		IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
	};
	struct rocemu_batch *b = with_batch ? rocemu_batch_new(s->ctx) : NULL;
	unsigned done = 0;
	int err = with_batch && !b ? ENOMEM : 0;

	for (int i = 0; i < 3 && !err; i++)
		err = b ? rocemu_batch_modify_qp(b, s->qp, attr[i], mask[i]) :
		      rocemu_modify_qp(s->qp, attr[i], mask[i]);
	if (b && !err) {
		err = rocemu_batch_run(b, &done);
		if (!err && done != 3)
			err = EPROTO;
	}
	rocemu_batch_free(b);
	if (err || s->qp->state != IBV_QPS_RTS) {
		e2e_error("connecting%s: %s (%u of 3 changes ran, state %d)",
			  with_batch ? " with one batch" : "", err ? rocemu_last_error(s->ctx) : "",
			  done, s->qp->state);
		return false;
	}
	return true;
}

enum wait_kind { WAIT_SPIN, WAIT_SLEEP, WAIT_EVENT, WAIT_KINDS };
static const char *const wait_names[] = { "spin", "rocemu_wait_cq", "completion event" };

/* The next completion of cq, waited for as kind says; false when none came in WAIT_MS. */
static bool next_completion(struct side *s, enum wait_kind kind, struct ibv_wc *wc)
{
	int64_t deadline = e2e_now_ms() + WAIT_MS;
	int n, err = 0;

	if (kind == WAIT_EVENT && (err = rocemu_req_notify_cq(s->cq, 0)))
		return e2e_mismatch("rocemu_req_notify_cq: %d", err);
	while ((n = rocemu_poll_cq(s->cq, 1, wc)) == 0) {
		int left = (int)(deadline - e2e_now_ms());

		if (left <= 0)
			return false;
		if (kind == WAIT_SLEEP)
			err = rocemu_wait_cq(s->cq, left);
		else if (kind == WAIT_EVENT) {
			err = rocemu_get_cq_event(s->cq, left);
			if (!err)
				err = rocemu_req_notify_cq(s->cq, 0);
		}
		if (err == ETIMEDOUT)
			return false;
		if (err)
			return e2e_mismatch("%s: %d", wait_names[kind], err);
	}
	return n == 1 || e2e_mismatch("rocemu_poll_cq: %d (%s)", n, strerror(errno));
}

static bool post_write(struct side *a, const struct side *b, uint64_t seq)
{
	uint64_t *src = &a->buf[seq % SLOTS];
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = seq, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)&b->buf[seq % SLOTS], .rkey = b->mr->rkey },
	}, *bad;
	int err;

	*src = seq;
	err = rocemu_post_send(a->qp, &wr, &bad);
	return !err || e2e_mismatch("rocemu_post_send of WRITE %" PRIu64 ": %d", seq, err);
}

/* Bursts of 1 to MAX_BURST WRITEs, each burst's completions waited for in one of the three
 * ways, a random pause between bursts. */
static bool writes(struct side *a, struct side *b, unsigned rounds)
{
	uint64_t seq = 0, waited[WAIT_KINDS] = { 0 };
	struct ibv_wc wc;

	for (unsigned r = 0; r < rounds; r++) {
		unsigned burst = 1 + rnd(MAX_BURST);
		enum wait_kind kind = (enum wait_kind)rnd(WAIT_KINDS);
		uint64_t first = seq;

		for (unsigned i = 0; i < burst; i++)
			if (!post_write(a, b, seq++))
				return false;
		for (uint64_t want = first; want != seq; want++) {
			if (!next_completion(a, kind, &wc)) {
				e2e_timeout("round %u: WRITE %" PRIu64 " not completed in %d ms "
					    "(waiting by %s)", r, want, WAIT_MS, wait_names[kind]);
				return false;
			}
			if (wc.status != IBV_WC_SUCCESS || wc.wr_id != want)
				return e2e_mismatch("round %u: completion of %" PRIu64 ": status %d, "
						    "wr_id %" PRIu64, r, want, (int)wc.status,
						    (uint64_t)wc.wr_id);
		}
		waited[kind] += burst;
		pause_us(pauses_us[rnd(sizeof(pauses_us) / sizeof(pauses_us[0]))]);
	}
	for (uint64_t k = seq > SLOTS ? seq - SLOTS : 0; k < seq; k++)
		if (b->buf[k % SLOTS] != k)
			return e2e_mismatch("slot %" PRIu64 " holds %" PRIu64 ", not WRITE %" PRIu64,
					    k % SLOTS, b->buf[k % SLOTS], k);
	e2e_note("%" PRIu64 " WRITEs completed in order, bytes landed (%" PRIu64 " spun for, %"
		 PRIu64 " slept for, %" PRIu64 " by event)", seq, waited[WAIT_SPIN],
		 waited[WAIT_SLEEP], waited[WAIT_EVENT]);
	return true;
}

static bool post_recv(struct side *b, uint64_t seq)
{
	struct ibv_sge sge = { .addr = (uintptr_t)&b->buf[seq % SLOTS], .length = 8,
			       .lkey = b->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = seq, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = rocemu_post_recv(b->qp, &wr, &bad);

	return !err || e2e_mismatch("rocemu_post_recv %" PRIu64 ": %d", seq, err);
}

static bool post_send(struct side *a, uint64_t seq)
{
	uint64_t *src = &a->buf[seq % SLOTS];
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = seq, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	int err;

	*src = seq;
	err = rocemu_post_send(a->qp, &wr, &bad);
	return !err || e2e_mismatch("rocemu_post_send of SEND %" PRIu64 ": %d", seq, err);
}

static bool await(struct side *s, enum wait_kind kind, uint64_t seq, enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	if (!next_completion(s, kind, &wc)) {
		e2e_timeout("%s %" PRIu64 " not completed in %d ms (waiting by %s)",
			    op == IBV_WC_RECV ? "receive" : "SEND", seq, WAIT_MS, wait_names[kind]);
		return false;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != seq || wc.opcode != op)
		return e2e_mismatch("completion of %" PRIu64 ": status %d, wr_id %" PRIu64
				    ", opcode %d", seq, (int)wc.status, (uint64_t)wc.wr_id,
				    (int)wc.opcode);
	return true;
}

/* A receive posted (no doorbell: B's daemon takes it when the SEND comes), then after a
 * pause a SEND to it; both sides wait for their completion, each in its own random way. */
static bool sends(struct side *a, struct side *b, unsigned rounds)
{
	for (uint64_t seq = 0; seq < rounds; seq++) {
		if (!post_recv(b, seq))
			return false;
		pause_us(pauses_us[rnd(sizeof(pauses_us) / sizeof(pauses_us[0]))]);
		if (!post_send(a, seq) ||
		    !await(a, (enum wait_kind)rnd(WAIT_KINDS), seq, IBV_WC_SEND) ||
		    !await(b, (enum wait_kind)rnd(WAIT_KINDS), seq, IBV_WC_RECV))
			return false;
		if (b->buf[seq % SLOTS] != seq)
			return e2e_mismatch("receive %" PRIu64 " holds %" PRIu64, seq,
					    b->buf[seq % SLOTS]);
	}
	e2e_note("%u SENDs received and completed on both sides", rounds);
	return true;
}

int main(int argc, char **argv)
{
	struct side a = { 0 }, b = { 0 };
	unsigned rounds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 4000;
	int failed = 0;

	if (argc < 3 || rounds == 0) {
		fprintf(stderr, "usage: doorbell_e2e SOCK_A SOCK_B [ROUNDS]\n");
		return 2;
	}
	if (!side_open(&a, argv[1]) || !side_open(&b, argv[2]) || !side_connect(&a, &b, true) ||
	    !side_connect(&b, &a, false)) {
		failed = e2e_report("setup", NULL) | 1;
	} else {
		writes(&a, &b, rounds);
		failed |= e2e_report("writes", NULL);
		sends(&a, &b, rounds / 4);
		failed |= e2e_report("sends", NULL);
	}
	side_close(&a);
	side_close(&b);
	return failed;
}
