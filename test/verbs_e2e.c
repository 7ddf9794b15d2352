/* verbs_e2e: librocemu end to end against two running rocemud daemons, from one process
 * that holds a context on each, so no TCP is needed: each QP's connection data is at hand.
 *
 *   verbs_e2e CASE SOCK_A SOCK_B   run one case (A writes, B is the target); prints one
 *                                  line "CASE: OK|FAIL: what it saw"; exit 0 only when
 *                                  everything matched, 1 otherwise, 2 for bad usage
 *   verbs_e2e hold SOCK SIZE       register SIZE bytes (K, M, G suffixes), print "ready",
 *                                  then sleep until killed (the SIGKILL test)
 *
 * Every error case runs on a fresh QP pair (an error leaves both QPs in ERR), every wait
 * for a completion is bounded by WAIT_MS, and every object is destroyed on every path. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/rocemu.h"
#include "test/e2e.h"

/* rocemuctl's control-socket client, compiled in: a case reads the daemons' counters
 * exactly as `rocemuctl stats` does. */
#include "tools/ctl_client.c"

#define PROG "verbs_e2e"

#define WAIT_MS       10000   /* the longest wait for one completion */
#define QUIET_MS      200     /* how long "no further completion" is watched for */
#define CHILD_WAIT_MS 30000   /* the child's patience with the parent */
#define CQ_DEPTH      64
#define QP_DEPTH      16
#define QP_TIMEOUT    14      /* 4.096 us * 2^14 = 67 ms */
#define QP_RETRY_CNT  6       /* what most applications use: 7 retries for ever */
#define QP_RNR_RETRY  7
#define MIN_RNR_TIMER 12      /* 0.64 ms */
#define SLOW_RNR_TIMER 29     /* 245.76 ms: time enough to post a receive late */
#define SLOW_RNR_MS   245
#define LATE_RECV_MS  30      /* a late receive comes this long after the write */
#define PSN_A         0x1a2b3c
#define PSN_B         0x4d5e6f
#define PSN_WRAP      0xfffffe /* a 3-packet message from here crosses the 24-bit wrap */
#define REGION        65536
#define WRAP_LEN      (4u << 20) /* 1024 packets at MTU 4096, from 128 PSNs before the wrap */
#define WRAP_START    0xffff80
#define ORPHAN_WAIT_MS 30000
#define IMM_VALUE     0x12345678u
#define QP_RD_ATOMIC  4       /* READs outstanding each way */
#define INLINE_MAX    256     /* max_inline_data of every QP */

#define ACCESS_TARGET (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

enum seed { SEED_TARGET = 1, SEED_SOURCE, SEED_CANARY, SEED_OTHER };

/* The case this process runs: the name its line starts with. */
static const char *g_case = "?";

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

/* ---- buffers: mmap'ed (registration remaps their pages), filled with patterns ---- */

static uint8_t pat(size_t i, unsigned seed)
{
	return (uint8_t)(seed * 131 + i * 13 + (i >> 9));
}

static void fill_pat(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(i, seed);
}

/* The first i in [from, to) where p[i] is not pat(i, seed), or to. */
static size_t pat_mismatch(const uint8_t *p, size_t from, size_t to, unsigned seed)
{
	for (size_t i = from; i < to; i++)
		if (p[i] != pat(i, seed))
			return i;
	return to;
}

/* p[i] == pat(i, seed) for every i in [from, to). */
static bool expect_range(const uint8_t *p, size_t from, size_t to, unsigned seed,
			 const char *what)
{
	size_t bad = pat_mismatch(p, from, to, seed);

	if (bad == to)
		return true;
	e2e_mismatch("%s differs at offset %zu (0x%02x, expected 0x%02x)", what, bad, p[bad],
		     pat(bad, seed));
	return false;
}

static bool expect_pat(const uint8_t *p, size_t len, unsigned seed, const char *what)
{
	return expect_range(p, 0, len, seed, what);
}

struct node {
	const char *name;
	struct rocemu_context *ctx;
	struct rocemu_port_attr port;
	struct rocemu_pd *pd;
};

/* A mapped buffer and, once registered, the MR over all or part of it. */
struct region {
	struct node *n;
	uint8_t *p;
	size_t len;
	struct rocemu_mr *mr;
};

/* Reports a failed librocemu call with the daemon's words; returns -1 for callers. */
static int vfail(const struct node *n, const char *call, int err)
{
	const char *why = n && n->ctx ? rocemu_last_error(n->ctx) : "";

	e2e_error("%s on %s: %s%s%s%s", call, n ? n->name : "?", strerror(err), *why ? " (" : "",
		  why, *why ? ")" : "");
	return -1;
}

static int region_alloc(struct region *r, struct node *n, size_t len, unsigned seed)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	*r = (struct region){ .n = n };
	if (p == MAP_FAILED) {
		e2e_error("mmap %zu bytes: %s", len, strerror(errno));
		return -1;
	}
	r->p = p;
	r->len = len;
	fill_pat(r->p, len, seed);
	return 0;
}

static int region_reg(struct region *r, struct rocemu_pd *pd, size_t off, size_t len, int access)
{
	r->mr = rocemu_reg_mr(pd, r->p + off, len, access);
	return r->mr ? 0 : vfail(r->n, "rocemu_reg_mr", errno);
}

static int region_dereg(struct region *r)
{
	int err = r->mr ? rocemu_dereg_mr(r->mr) : 0;

	if (err)
		return vfail(r->n, "rocemu_dereg_mr", err);
	r->mr = NULL;
	return 0;
}

/* Memory the daemon may still write into (a failed deregistration) stays mapped. */
static void region_close(struct region *r)
{
	if (region_dereg(r) == 0 && r->p)
		munmap(r->p, r->len);
	r->p = NULL;
}

static int region_open(struct region *r, struct node *n, size_t len, unsigned seed, int access)
{
	if (region_alloc(r, n, len, seed) < 0)
		return -1;
	return region_reg(r, n->pd, 0, len, access);
}

/* ---- contexts, QPs and connections ---- */

static int node_open(struct node *n, const char *name, const char *sock)
{
	int err;

	n->name = name;
	if (!(n->ctx = rocemu_open(sock))) {
		e2e_error("rocemu_open(%s) for %s: %s", sock, name, strerror(errno));
		return -1;
	}
	if ((err = rocemu_query_port(n->ctx, &n->port)))
		return vfail(n, "rocemu_query_port", err);
	if (n->port.active_mtu < IBV_MTU_256 || n->port.active_mtu > IBV_MTU_4096) {
		e2e_mismatch("%s: active MTU %d is not an enum ibv_mtu", name, (int)n->port.active_mtu);
		return -1;
	}
	if (!(n->pd = rocemu_alloc_pd(n->ctx)))
		return vfail(n, "rocemu_alloc_pd", errno);
	return 0;
}

static void node_close(struct node *n)
{
	int err;

	if (n->pd && (err = rocemu_dealloc_pd(n->pd)))
		vfail(n, "rocemu_dealloc_pd", err);
	if (n->ctx && (err = rocemu_close(n->ctx)))
		vfail(n, "rocemu_close", err);
	n->pd = NULL;
	n->ctx = NULL;
}

struct env {
	const char *sock_a, *sock_b;
	struct node a, b;
	enum ibv_mtu mtu;     /* the smaller active MTU */
	uint32_t pmtu;        /* the same in bytes */
};

static int env_open(struct env *e)
{
	if (node_open(&e->a, "A", e->sock_a) < 0 || node_open(&e->b, "B", e->sock_b) < 0)
		return -1;
	e->mtu = e->a.port.active_mtu < e->b.port.active_mtu ? e->a.port.active_mtu
							     : e->b.port.active_mtu;
	e->pmtu = 128u << e->mtu;
	return 0;
}

static void env_close(struct env *e)
{
	node_close(&e->a);
	node_close(&e->b);
}

struct end {
	struct node *n;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;
};

struct conn {
	struct end a, b;
};

struct conn_opts {
	struct rocemu_pd *pd_b;   /* B's QP's PD; NULL: B's first PD */
	int access_b;             /* B's qp_access_flags */
	uint8_t rnr_retry;        /* A's */
	uint8_t min_rnr_timer;    /* B's: the delay its RNR NAKs ask for */
	uint32_t psn_a, psn_b;
	uint8_t rd_atomic_a;      /* A's max_rd_atomic */
	uint8_t rd_atomic_b;      /* B's max_dest_rd_atomic */
	uint8_t timeout_a;        /* A's retransmission timeout */
	struct rocemu_srq *srq_b; /* B's QP takes its receives from it */
};

static struct conn_opts default_opts(void)
{
	return (struct conn_opts){ .access_b = IBV_ACCESS_REMOTE_WRITE,
				   .rnr_retry = QP_RNR_RETRY, .min_rnr_timer = MIN_RNR_TIMER,
				   .psn_a = PSN_A, .psn_b = PSN_B, .rd_atomic_a = QP_RD_ATOMIC,
				   .rd_atomic_b = QP_RD_ATOMIC, .timeout_a = QP_TIMEOUT };
}

/* A CQ and an RC QP on it, sq_sig_all = 0: each WR says whether it is signaled. */
static int end_open(struct end *e, struct node *n, struct rocemu_pd *pd, struct rocemu_srq *srq)
{
	struct rocemu_qp_init_attr a = { .max_send_wr = QP_DEPTH, .max_recv_wr = QP_DEPTH,
					 .max_send_sge = 2, .max_recv_sge = 4,
					 .max_inline_data = INLINE_MAX,
					 .srq = srq };

	e->n = n;
	if (!(e->cq = rocemu_create_cq(n->ctx, CQ_DEPTH)))
		return vfail(n, "rocemu_create_cq", errno);
	a.send_cq = a.recv_cq = e->cq;
	if (!(e->qp = rocemu_create_qp(pd, &a)))
		return vfail(n, "rocemu_create_qp", errno);
	return 0;
}

static void end_close(struct end *e)
{
	int err;

	if (e->qp && (err = rocemu_destroy_qp(e->qp)))
		vfail(e->n, "rocemu_destroy_qp", err);
	if (e->cq && (err = rocemu_destroy_cq(e->cq)))
		vfail(e->n, "rocemu_destroy_cq", err);
	e->qp = NULL;
	e->cq = NULL;
}

static int modify(struct end *e, struct ibv_qp_attr *a, int mask, const char *call)
{
	int err = rocemu_modify_qp(e->qp, a, mask);

	return err ? vfail(e->n, call, err) : 0;
}

static int qp_init(struct end *e, int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .qp_access_flags = (unsigned)access,
				 .port_num = 1 };

	return modify(e, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, "rocemu_modify_qp(INIT)");
}

static int qp_rtr(struct end *e, const struct end *peer, enum ibv_mtu mtu, uint32_t rq_psn,
		  uint8_t min_rnr_timer, uint8_t rd_atomic)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = rq_psn,
		.min_rnr_timer = min_rnr_timer,
		.max_dest_rd_atomic = rd_atomic,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->n->port.gid, .hop_limit = 64 } },
	};

	return modify(e, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC,
		      "rocemu_modify_qp(RTR)");
}

static int qp_rts(struct end *e, uint32_t sq_psn, uint8_t rnr_retry, uint8_t rd_atomic,
		  uint8_t timeout)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = sq_psn,
				 .timeout = timeout, .retry_cnt = QP_RETRY_CNT,
				 .rnr_retry = rnr_retry, .max_rd_atomic = rd_atomic };

	return modify(e, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC, "rocemu_modify_qp(RTS)");
}

static void conn_close(struct conn *c)
{
	end_close(&c->a);
	end_close(&c->b);
}

/* A QP on A connected to a QP on B, both in RTS. */
static int conn_open(struct env *e, const struct conn_opts *o, struct conn *c)
{
	*c = (struct conn){ 0 };
	if (end_open(&c->a, &e->a, e->a.pd, NULL) < 0 ||
	    end_open(&c->b, &e->b, o->pd_b ? o->pd_b : e->b.pd, o->srq_b) < 0 ||
	    qp_init(&c->a, IBV_ACCESS_REMOTE_WRITE) < 0 || qp_init(&c->b, o->access_b) < 0 ||
	    qp_rtr(&c->a, &c->b, e->mtu, o->psn_b, MIN_RNR_TIMER, QP_RD_ATOMIC) < 0 ||
	    qp_rtr(&c->b, &c->a, e->mtu, o->psn_a, o->min_rnr_timer, o->rd_atomic_b) < 0 ||
	    qp_rts(&c->a, o->psn_a, o->rnr_retry, o->rd_atomic_a, o->timeout_a) < 0 ||
	    qp_rts(&c->b, o->psn_b, QP_RNR_RETRY, QP_RD_ATOMIC, QP_TIMEOUT) < 0) {
		conn_close(c);
		return -1;
	}
	return 0;
}

/* ---- posting and completions ---- */

static struct ibv_send_wr write_wr(uint64_t wr_id, struct ibv_sge *sge, int num_sge,
				   uint64_t raddr, uint32_t rkey)
{
	return (struct ibv_send_wr){ .wr_id = wr_id, .sg_list = sge, .num_sge = num_sge,
				     .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				     .wr.rdma = { .remote_addr = raddr, .rkey = rkey } };
}

static int post_wr(struct end *e, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int err = rocemu_post_send(e->qp, wr, &bad);

	return err ? vfail(e->n, "rocemu_post_send", err) : 0;
}

/* The next completion on e's CQ within WAIT_MS; -1 (reported) when none came. */
static int next_wc(struct end *e, struct ibv_wc *wc, const char *what)
{
	const int64_t deadline = e2e_now_ms() + WAIT_MS;

	for (;;) {
		int n = rocemu_poll_cq(e->cq, 1, wc), err;
		int64_t left = deadline - e2e_now_ms();

		if (n == 1)
			return 0;
		if (n < 0)
			return vfail(e->n, "rocemu_poll_cq", errno);
		err = left > 0 ? rocemu_wait_cq(e->cq, (int)left) : ETIMEDOUT;
		if (err == ETIMEDOUT) {
			e2e_timeout("no completion on %s within %d ms for %s", e->n->name,
				    WAIT_MS, what);
			return -1;
		}
		if (err)
			return vfail(e->n, "rocemu_wait_cq", err);
	}
}

/* The next completion is wr_id's with status want; notes "what -> STATUS". */
static bool expect_wc(struct end *e, uint64_t wr_id, enum ibv_wc_status want, const char *what,
		      struct ibv_wc *out)
{
	struct ibv_wc wc;

	if (next_wc(e, &wc, what) < 0)
		return false;
	if (out)
		*out = wc;
	e2e_note("%s -> %s", what, rocemu_wc_status_str(wc.status));
	if (wc.status != want || wc.wr_id != wr_id) {
		e2e_mismatch("%s: expected %s for wr_id %llu, got %s for wr_id %llu", what,
			     rocemu_wc_status_str(want), (unsigned long long)wr_id, rocemu_wc_status_str(wc.status),
			     (unsigned long long)wc.wr_id);
		return false;
	}
	if (wc.qp_num != e->qp->qp_num) {
		e2e_mismatch("%s: completion names QP 0x%06x, not 0x%06x", what, wc.qp_num,
			     e->qp->qp_num);
		return false;
	}
	return true;
}

/* No further completion shows up within QUIET_MS. */
static bool expect_quiet(struct end *e, const char *what)
{
	struct ibv_wc wc;
	int err = rocemu_wait_cq(e->cq, QUIET_MS);

	if (err == ETIMEDOUT)
		return true;
	if (err) {
		vfail(e->n, "rocemu_wait_cq", err);
		return false;
	}
	if (rocemu_poll_cq(e->cq, 1, &wc) == 1)
		e2e_mismatch("%s: an extra completion, %s for wr_id %llu", what, rocemu_wc_status_str(wc.status),
			     (unsigned long long)wc.wr_id);
	return false;
}

static bool expect_state(struct end *e, enum ibv_qp_state want)
{
	struct ibv_qp_attr a;
	int err = rocemu_query_qp(e->qp, &a);

	if (err) {
		vfail(e->n, "rocemu_query_qp", err);
		return false;
	}
	if (a.qp_state == want)
		return true;
	e2e_mismatch("%s's QP is in %s, expected %s", e->n->name, state_name(a.qp_state),
		     state_name(want));
	return false;
}

/* After a completion with status st: a requester error leaves A's QP in ERR, and the
 * responder's QP too when it NAKed the request as invalid or an access error. */
static bool expect_states(struct conn *c, enum ibv_wc_status st)
{
	bool remote = st == IBV_WC_REM_ACCESS_ERR || st == IBV_WC_REM_INV_REQ_ERR ||
		      st == IBV_WC_REM_OP_ERR;

	if (st == IBV_WC_SUCCESS)
		return expect_state(&c->a, IBV_QPS_RTS) && expect_state(&c->b, IBV_QPS_RTS);
	return expect_state(&c->a, IBV_QPS_ERR) &&
	       expect_state(&c->b, remote ? IBV_QPS_ERR : IBV_QPS_RTS);
}

/* One RDMA WRITE of one SGE on a fresh QP pair, whose completion must be want. */
struct shot {
	const char *what;
	const void *src;
	uint32_t len;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	enum ibv_wc_status want;
};

static bool one_write(struct env *e, const struct conn_opts *o, const struct shot *s)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->src, .length = s->len, .lkey = s->lkey };
	struct ibv_send_wr wr = write_wr(1, &sge, 1, s->raddr, s->rkey);
	struct conn c;
	bool ok = false;

	if (conn_open(e, o, &c) < 0)
		return false;
	if (post_wr(&c.a, &wr) == 0)
		ok = expect_wc(&c.a, 1, s->want, s->what, NULL) && expect_states(&c, s->want);
	conn_close(&c);
	return ok;
}

/* ---- the cases ---- */

static void stale_rkey_writes(struct env *e, struct region *src, struct region *dst)
{
	const struct conn_opts o = default_opts();
	uint32_t old_rkey = dst->mr->rkey;
	struct shot s = { "old rkey after dereg", src->p, (uint32_t)src->len, src->mr->lkey,
			  (uintptr_t)dst->p, old_rkey, IBV_WC_REM_ACCESS_ERR };

	if (region_dereg(dst) < 0 || !one_write(e, &o, &s) ||
	    region_reg(dst, e->b.pd, 0, dst->len, ACCESS_TARGET) < 0)
		return;
	if (dst->mr->rkey == old_rkey)
		e2e_mismatch("the new registration got the old rkey 0x%08x back", old_rkey);
	s.what = "old rkey after a new registration";
	if (!one_write(e, &o, &s) || !expect_pat(dst->p, dst->len, SEED_TARGET, "target"))
		return;
	e2e_note("target unchanged");
	s.what = "new rkey";
	s.rkey = dst->mr->rkey;
	s.want = IBV_WC_SUCCESS;
	if (one_write(e, &o, &s) && expect_pat(dst->p, dst->len, SEED_SOURCE, "target"))
		e2e_note("byte-exact");
}

static void case_stale_rkey(struct env *e)
{
	struct region src = { 0 }, dst = { 0 };

	if (region_open(&src, &e->a, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, REGION, SEED_TARGET, ACCESS_TARGET) == 0)
		stale_rkey_writes(e, &src, &dst);
	region_close(&src);
	region_close(&dst);
}

/* A write A must see refused with want while B's target stays as it was. */
static void refused_write(struct env *e, const struct conn_opts *o, struct region *src,
			  struct region *dst, enum ibv_wc_status want, const char *what)
{
	const struct shot s = { what, src->p, (uint32_t)src->len, src->mr->lkey,
				(uintptr_t)dst->p, dst->mr->rkey, want };

	if (one_write(e, o, &s) && expect_pat(dst->p, dst->len, SEED_TARGET, "target"))
		e2e_note("target unchanged");
}

static void case_no_remote_write(struct env *e)
{
	const struct conn_opts o = default_opts();
	struct region src = { 0 }, dst = { 0 };

	if (region_open(&src, &e->a, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, REGION, SEED_TARGET, IBV_ACCESS_LOCAL_WRITE) == 0)
		refused_write(e, &o, &src, &dst, IBV_WC_REM_ACCESS_ERR,
			      "MR without remote write");
	region_close(&src);
	region_close(&dst);
}

static void other_pd_writes(struct env *e, struct rocemu_pd *pd2, struct region *src,
			    struct region *dst)
{
	struct conn_opts o = default_opts();
	const struct shot ok = { "the same write through a QP in PD2", src->p,
				 (uint32_t)src->len, src->mr->lkey, (uintptr_t)dst->p,
				 dst->mr->rkey, IBV_WC_SUCCESS };

	refused_write(e, &o, src, dst, IBV_WC_REM_ACCESS_ERR, "MR in PD2, QP in PD1");
	if (e2e_case_failed())
		return;
	o.pd_b = pd2;
	if (one_write(e, &o, &ok) && expect_pat(dst->p, dst->len, SEED_SOURCE, "target"))
		e2e_note("byte-exact");
}

static void case_other_pd(struct env *e)
{
	struct region src = { 0 }, dst = { .n = &e->b };
	struct rocemu_pd *pd2 = rocemu_alloc_pd(e->b.ctx);
	int err;

	if (!pd2)
		vfail(&e->b, "rocemu_alloc_pd", errno);
	else if (region_open(&src, &e->a, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
		 region_alloc(&dst, &e->b, REGION, SEED_TARGET) == 0 &&
		 region_reg(&dst, pd2, 0, REGION, ACCESS_TARGET) == 0)
		other_pd_writes(e, pd2, &src, &dst);
	region_close(&src);
	region_close(&dst);
	if (pd2 && (err = rocemu_dealloc_pd(pd2)))
		vfail(&e->b, "rocemu_dealloc_pd(PD2)", err);
}

static void case_qp_no_remote_write(struct env *e)
{
	struct conn_opts o = default_opts();
	struct region src = { 0 }, dst = { 0 };

	o.access_b = IBV_ACCESS_LOCAL_WRITE;
	if (region_open(&src, &e->a, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, REGION, SEED_TARGET, ACCESS_TARGET) == 0)
		refused_write(e, &o, &src, &dst, IBV_WC_REM_INV_REQ_ERR,
			      "QP without remote write");
	region_close(&src);
	region_close(&dst);
}

/* The lkey of an MR that a second context (another client of daemon A) registered. */
static void case_foreign_lkey(struct env *e)
{
	const struct conn_opts o = default_opts();
	struct node other = { 0 };
	struct region src = { 0 }, dst = { 0 };

	if (node_open(&other, "A (second client)", e->sock_a) == 0 &&
	    region_open(&src, &other, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, REGION, SEED_TARGET, ACCESS_TARGET) == 0)
		refused_write(e, &o, &src, &dst, IBV_WC_LOC_PROT_ERR,
			      "lkey of another client's MR");
	region_close(&src);
	region_close(&dst);
	node_close(&other);
}

/* Posts wr_ids first..first+n-1 as one chain; signaled[i] says which ask for a
 * completion; the one at bad_at (or none, -1) uses a wrong rkey. */
static int post_chain(struct end *a, struct region *src, struct region *dst, uint64_t first,
		      const bool *signaled, int n, int bad_at)
{
	struct ibv_sge sge = { (uintptr_t)src->p, (uint32_t)src->len, src->mr->lkey };
	struct ibv_send_wr wr[8];

	for (int i = 0; i < n; i++) {
		uint32_t rkey = i == bad_at ? dst->mr->rkey ^ 0x5 : dst->mr->rkey;

		wr[i] = write_wr(first + (uint64_t)i, &sge, 1, (uintptr_t)dst->p, rkey);
		wr[i].send_flags = signaled[i] ? IBV_SEND_SIGNALED : 0;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return post_wr(a, wr);
}

static bool expect_flushed(struct end *a, uint64_t first, int n, const char *when)
{
	char what[96];

	for (int i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "%s wr %llu", when, (unsigned long long)first + i);
		if (!expect_wc(a, first + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, what, NULL))
			return false;
	}
	return true;
}

/* A receive posted to a QP in ERROR completes at once, flushed: it rings the daemon,
 * which a receive to a QP in any other state need not. */
static bool receive_flushed(struct end *a, struct region *buf, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)buf->p, 64, buf->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;
	int err = rocemu_post_recv(a->qp, &wr, &bad);

	if (err)
		return e2e_mismatch("a receive posted after the error: %s", strerror(err));
	return expect_flushed(a, wr_id, 1, "a receive posted after the error:");
}

static void flush_writes(struct env *e, struct region *src, struct region *dst)
{
	const struct conn_opts o = default_opts();
	const bool chain[3] = { true, true, false }, later[3] = { true, false, true };
	struct conn c;

	if (conn_open(e, &o, &c) < 0)
		return;
	if (post_chain(&c.a, src, dst, 1, chain, 3, 0) == 0 &&
	    expect_wc(&c.a, 1, IBV_WC_REM_ACCESS_ERR, "wr 1 (bad rkey)", NULL) &&
	    expect_flushed(&c.a, 2, 2, "queued behind it:") &&
	    expect_states(&c, IBV_WC_REM_ACCESS_ERR) &&
	    post_chain(&c.a, src, dst, 4, later, 3, -1) == 0 &&
	    expect_flushed(&c.a, 4, 3, "posted after the error:") &&
	    receive_flushed(&c.a, src, 7) &&
	    expect_quiet(&c.a, "after the flushes") &&
	    expect_pat(dst->p, dst->len, SEED_TARGET, "target"))
		e2e_note("unsignaled ones flushed too, nothing more, target unchanged");
	conn_close(&c);
}

static void case_flush(struct env *e)
{
	struct region src = { 0 }, dst = { 0 };

	if (region_open(&src, &e->a, 4096, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, 4096, SEED_TARGET, ACCESS_TARGET) == 0)
		flush_writes(e, &src, &dst);
	region_close(&src);
	region_close(&dst);
}

/* Canaries on both sides of the MR, and the MR's contents, hold these. */
static bool canaries_intact(const struct region *buf, unsigned mr_seed, const char *when)
{
	char what[96];

	snprintf(what, sizeof(what), "canary before the MR %s", when);
	if (!expect_pat(buf->p, REGION, SEED_CANARY, what))
		return false;
	snprintf(what, sizeof(what), "canary after the MR %s", when);
	if (!expect_pat(buf->p + 2 * REGION, REGION, SEED_OTHER, what))
		return false;
	snprintf(what, sizeof(what), "MR contents %s", when);
	return expect_pat(buf->p + REGION, REGION, mr_seed, what);
}

static void canary_writes(struct env *e, struct region *src, struct region *buf)
{
	const struct conn_opts o = default_opts();
	const uint64_t mr_va = (uintptr_t)buf->p + REGION;
	const uint32_t rkey = buf->mr->rkey, lkey = src->mr->lkey;
	const struct shot shots[] = {
		{ "64 KiB into the MR", src->p, REGION, lkey, mr_va, rkey, IBV_WC_SUCCESS },
		{ "1 byte before it", src->p, 1, lkey, mr_va - 1, rkey, IBV_WC_REM_ACCESS_ERR },
		{ "1 byte after it", src->p, 1, lkey, mr_va + REGION, rkey, IBV_WC_REM_ACCESS_ERR },
		{ "2 bytes across its end", src->p, 2, lkey, mr_va + REGION - 1, rkey,
		  IBV_WC_REM_ACCESS_ERR },
	};

	if (!one_write(e, &o, &shots[0]) || !canaries_intact(buf, SEED_SOURCE, "after the write"))
		return;
	e2e_note("byte-exact");
	for (size_t i = 1; i < sizeof(shots) / sizeof(shots[0]); i++)
		if (!one_write(e, &o, &shots[i]))
			return;
	if (canaries_intact(buf, SEED_SOURCE, "after the refused writes"))
		e2e_note("canaries and MR contents unchanged");
}

static void case_canaries(struct env *e)
{
	struct region src = { 0 }, buf = { 0 };

	if (region_open(&src, &e->a, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_alloc(&buf, &e->b, 3 * REGION, SEED_TARGET) == 0) {
		fill_pat(buf.p, REGION, SEED_CANARY);
		fill_pat(buf.p + 2 * REGION, REGION, SEED_OTHER);
		if (region_reg(&buf, e->b.pd, REGION, REGION, ACCESS_TARGET) == 0)
			canary_writes(e, &src, &buf);
	}
	region_close(&src);
	region_close(&buf);
}

/* B's target for the sparse case: SPARSE_PAGES pages of which only these were written
 * before registration, the others never touched; the MR leaves SPARSE_EDGE bytes of the
 * first and last page out; A's write covers the end of an untouched page, an untouched
 * page and the start of a written one. */
#define SPARSE_PAGES   16
#define SPARSE_EDGE    100
#define SPARSE_MSG_AT  (3 * page_size() + 100)
#define SPARSE_MSG_LEN (2 * page_size() + 200)

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static bool sparse_page_written(size_t page)
{
	return page == 0 || page == 5 || page == SPARSE_PAGES - 1;
}

/* Byte i of the sparse target, with A's message at [msg_at, msg_at + msg_len). */
static uint8_t sparse_byte(size_t i, size_t msg_at, size_t msg_len)
{
	if (i - msg_at < msg_len)
		return pat(i - msg_at, SEED_SOURCE);
	return sparse_page_written(i / page_size()) ? pat(i, SEED_TARGET) : 0;
}

static bool sparse_intact(const uint8_t *p, size_t msg_at, size_t msg_len, const char *when)
{
	for (size_t i = 0; i < SPARSE_PAGES * page_size(); i++) {
		if (p[i] != sparse_byte(i, msg_at, msg_len)) {
			e2e_mismatch("target byte %zu is 0x%02x %s, expected 0x%02x", i, p[i], when,
				     sparse_byte(i, msg_at, msg_len));
			return false;
		}
	}
	return true;
}

/* Registration keeps a buffer's bytes whether its pages were written or never touched,
 * and the daemon's WRITE lands in the application's own pages. */
static void sparse_write(struct env *e, struct region *src, struct region *dst)
{
	const struct conn_opts o = default_opts();
	const struct shot s = { "WRITE over untouched and written pages", src->p,
				(uint32_t)SPARSE_MSG_LEN, src->mr->lkey,
				(uintptr_t)dst->p + SPARSE_MSG_AT, dst->mr->rkey, IBV_WC_SUCCESS };

	if (!sparse_intact(dst->p, 0, 0, "after registration"))
		return;
	e2e_note("contents kept by registration");
	if (one_write(e, &o, &s) &&
	    sparse_intact(dst->p, SPARSE_MSG_AT, SPARSE_MSG_LEN, "after the write"))
		e2e_note("byte-exact, untouched pages still zero around it");
}

static void case_sparse_target(struct env *e)
{
	const size_t len = SPARSE_PAGES * page_size();
	struct region src = { 0 }, dst = { .n = &e->b, .len = len };
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		e2e_error("mmap %zu bytes: %s", len, strerror(errno));
		return;
	}
	dst.p = p;
	for (size_t i = 0; i < len; i++)
		if (sparse_page_written(i / page_size()))
			dst.p[i] = pat(i, SEED_TARGET);
	if (region_open(&src, &e->a, SPARSE_MSG_LEN, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_reg(&dst, e->b.pd, SPARSE_EDGE, len - 2 * SPARSE_EDGE, ACCESS_TARGET) == 0)
		sparse_write(e, &src, &dst);
	region_close(&src);
	region_close(&dst);
}

static int post_write_imm(struct end *a, struct region *src, uint32_t len, struct region *dst)
{
	struct ibv_sge sge = { (uintptr_t)src->p, len, src->mr->lkey };
	struct ibv_send_wr wr = write_wr(0x11, &sge, 1, (uintptr_t)dst->p, dst->mr->rkey);

	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(IMM_VALUE);
	return post_wr(a, &wr);
}

static bool check_recv_wc(const struct ibv_wc *wc, uint32_t len, uint32_t qpn)
{
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
	    wc->imm_data != htonl(IMM_VALUE) || wc->byte_len != len || wc->qp_num != qpn) {
		e2e_mismatch("B's completion: opcode %d flags 0x%x imm 0x%08x byte_len %u qp 0x%06x, "
			     "expected %d, WITH_IMM, 0x%08x, %u, 0x%06x", (int)wc->opcode,
			     (unsigned)wc->wc_flags, ntohl(wc->imm_data), wc->byte_len, wc->qp_num,
			     (int)IBV_WC_RECV_RDMA_WITH_IMM, IMM_VALUE, len, qpn);
		return false;
	}
	e2e_note("B: RECV_RDMA_WITH_IMM, imm 0x%08x, byte_len %u", ntohl(wc->imm_data), wc->byte_len);
	return true;
}

/* With a receive posted: A succeeds, B completes the receive with the immediate. */
static bool imm_with_recv(struct env *e, struct region *src, uint32_t len, struct region *dst)
{
	struct conn_opts o = default_opts();
	struct ibv_recv_wr rwr = { .wr_id = 0x77 }, *bad = NULL;
	struct ibv_wc wc;
	struct conn c;
	bool ok = false;
	int err;

	o.psn_a = PSN_WRAP;
	if (conn_open(e, &o, &c) < 0)
		return false;
	if ((err = rocemu_post_recv(c.b.qp, &rwr, &bad)))
		vfail(&e->b, "rocemu_post_recv", err);
	else if (post_write_imm(&c.a, src, len, dst) == 0 &&
		 expect_wc(&c.a, 0x11, IBV_WC_SUCCESS, "WRITE WITH IMM", &wc) &&
		 expect_wc(&c.b, 0x77, IBV_WC_SUCCESS, "B's receive", &wc))
		ok = check_recv_wc(&wc, len, c.b.qp->qp_num) &&
		     expect_pat(dst->p, len, SEED_SOURCE, "target") &&
		     expect_range(dst->p, len, dst->len, SEED_TARGET, "target past the message");
	conn_close(&c);
	return ok;
}

/* No receive posted and rnr_retry 0: the first RNR NAK ends the request. */
static void imm_without_recv(struct env *e, struct region *src, uint32_t len, struct region *dst)
{
	struct conn_opts o = default_opts();
	struct conn c;

	o.rnr_retry = 0;
	if (conn_open(e, &o, &c) < 0)
		return;
	if (post_write_imm(&c.a, src, len, dst) == 0 &&
	    expect_wc(&c.a, 0x11, IBV_WC_RNR_RETRY_EXC_ERR, "no receive posted, rnr_retry 0",
		      NULL) &&
	    expect_states(&c, IBV_WC_RNR_RETRY_EXC_ERR))
		expect_quiet(&c.b, "B after the RNR NAK");
	conn_close(&c);
}

static void case_write_imm(struct env *e)
{
	const uint32_t len = 3 * e->pmtu - 5;
	struct region src = { 0 }, dst = { 0 };

	e2e_note("%u bytes at MTU %u", len, e->pmtu);
	if (region_open(&src, &e->a, len, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, len + 4096, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    imm_with_recv(e, &src, len, &dst)) {
		e2e_note("byte-exact");
		imm_without_recv(e, &src, len, &dst);
	}
	region_close(&src);
	region_close(&dst);
}

/* Zero-length writes with a wrong rkey: no key is checked, nothing changes, the QPs
 * stay usable (a real write on the same pair still lands). */
static void zero_writes(struct env *e, struct region *src, struct region *dst)
{
	const struct conn_opts o = default_opts();
	struct ibv_sge empty = { (uintptr_t)src->p, 0, src->mr->lkey };
	struct ibv_sge real = { (uintptr_t)src->p, 16, src->mr->lkey };
	struct ibv_send_wr w1 = write_wr(1, NULL, 0, (uintptr_t)dst->p, dst->mr->rkey ^ 0x5);
	struct ibv_send_wr w2 = write_wr(2, &empty, 1, (uintptr_t)dst->p, 0xdeadbe00);
	struct ibv_send_wr w3 = write_wr(3, &real, 1, (uintptr_t)dst->p, dst->mr->rkey);
	struct conn c;

	if (conn_open(e, &o, &c) < 0)
		return;
	if (post_wr(&c.a, &w1) == 0 &&
	    expect_wc(&c.a, 1, IBV_WC_SUCCESS, "num_sge 0, bad rkey", NULL) &&
	    post_wr(&c.a, &w2) == 0 &&
	    expect_wc(&c.a, 2, IBV_WC_SUCCESS, "one sge of length 0, bad rkey", NULL) &&
	    expect_states(&c, IBV_WC_SUCCESS) &&
	    expect_pat(dst->p, dst->len, SEED_TARGET, "target")) {
		e2e_note("target unchanged");
		if (post_wr(&c.a, &w3) == 0 &&
		    expect_wc(&c.a, 3, IBV_WC_SUCCESS, "then 16 bytes, good rkey, same QPs",
			      NULL) &&
		    expect_pat(dst->p, 16, SEED_SOURCE, "target") &&
		    expect_range(dst->p, 16, dst->len, SEED_TARGET, "target past 16 bytes"))
			e2e_note("they landed, nothing else changed");
	}
	conn_close(&c);
}

static void case_zero_length(struct env *e)
{
	struct region src = { 0 }, dst = { 0 };

	if (region_open(&src, &e->a, 4096, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, 4096, SEED_TARGET, ACCESS_TARGET) == 0)
		zero_writes(e, &src, &dst);
	region_close(&src);
	region_close(&dst);
}

static int post_recv(struct end *e, uint64_t wr_id, struct ibv_sge *sge, int num_sge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = num_sge };
	struct ibv_recv_wr *bad = NULL;
	int err = rocemu_post_recv(e->qp, &wr, &bad);

	return err ? vfail(e->n, "rocemu_post_recv", err) : 0;
}

static struct ibv_send_wr send_wr(uint64_t wr_id, struct ibv_sge *sge, int num_sge,
				  enum ibv_wr_opcode opcode)
{
	return (struct ibv_send_wr){ .wr_id = wr_id, .sg_list = sge, .num_sge = num_sge,
				     .opcode = opcode, .send_flags = IBV_SEND_SIGNALED,
				     .imm_data = htonl(IMM_VALUE) };
}

/* 64 bytes by SEND (else WRITE WITH IMM, wr_id 0x11 both) that find no receive: the
 * receive comes LATE_RECV_MS later, within the RNR NAK's delay, so the one retry that
 * rnr_retry 1 allows finds it. */
/* A message of len bytes (a SEND of 64, else a WRITE WITH IMMEDIATE) whose receive B posts
 * LATE_RECV_MS after it: RNR NAKs delay it by the peer's timer, then it completes. */
static bool late_receive(struct conn *c, struct region *src, struct region *dst,
			 uint64_t recv_id, bool send, uint32_t len, const char *what)
{
	struct ibv_sge out = { (uintptr_t)src->p, 64, src->mr->lkey };
	struct ibv_sge in = { (uintptr_t)dst->p, 64, dst->mr->lkey };
	struct ibv_send_wr wr = send_wr(0x11, &out, 1, IBV_WR_SEND);
	int64_t start = e2e_now_ms(), took;

	if (send ? post_wr(&c->a, &wr) < 0 : post_write_imm(&c->a, src, len, dst) < 0)
		return false;
	poll(NULL, 0, LATE_RECV_MS);
	if (post_recv(&c->b, recv_id, &in, 1) < 0)
		return false;
	if (!expect_wc(&c->a, 0x11, IBV_WC_SUCCESS, what, NULL) ||
	    !expect_wc(&c->b, recv_id, IBV_WC_SUCCESS, "B's late receive", NULL))
		return false;
	took = e2e_now_ms() - start;
	if (took >= SLOW_RNR_MS * 3 / 4)
		return true;
	e2e_mismatch("%s completed in %lld ms: no RNR NAK delayed it", what, (long long)took);
	return false;
}

/* rnr_retry 1 allows one RNR retry per message: forward progress reloads the budget
 * (rxe's reset_retry_counters on every ACK that completes a request), so a message that
 * used its retry must not leave the next one without. Last, a WRITE WITH IMMEDIATE of
 * three packets and more: its RNR NAK comes in the middle of the message, at the last
 * packet (which takes the receive), and the requester resumes there, as rxe's does, the
 * bytes already placed standing. */
static void case_rnr_recover(struct env *e)
{
	struct conn_opts o = default_opts();
	struct region src = { 0 }, dst = { 0 };
	uint32_t long_len = 3 * e->pmtu + 100;
	struct conn c;

	o.rnr_retry = 1;
	o.min_rnr_timer = SLOW_RNR_TIMER;
	if (region_open(&src, &e->a, long_len, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, long_len + 4096, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    conn_open(e, &o, &c) == 0) {
		if (late_receive(&c, &src, &dst, 0x71, false, 64,
				 "1st message, receive late, rnr_retry 1") &&
		    late_receive(&c, &src, &dst, 0x72, false, 64,
				 "2nd message, receive late, rnr_retry 1") &&
		    late_receive(&c, &src, &dst, 0x73, true, 64,
				 "a SEND, receive late, rnr_retry 1") &&
		    late_receive(&c, &src, &dst, 0x74, false, long_len,
				 "a 4-packet WRITE WITH IMMEDIATE, receive late (RNR NAK at its "
				 "last packet)") &&
		    expect_pat(dst.p, long_len, SEED_SOURCE, "the 4-packet WRITE's target") &&
		    expect_range(dst.p, long_len, dst.len, SEED_TARGET, "the target after it"))
			e2e_note("each message got its own RNR retry, byte-exact");
		conn_close(&c);
	}
	region_close(&src);
	region_close(&dst);
}

/* ---- SEND and RECV ---- */

#define SEND_MAX   (1u << 20)
#define SEND_SLACK 64         /* receive space past each message, which must stay as it was */

/* [off, off + len) of r as n SGEs in order, of nearly equal lengths. */
static void split_sges(struct ibv_sge *sge, int n, const struct region *r, size_t off,
		       size_t len)
{
	for (int i = 0; i < n; i++) {
		size_t piece = len / (size_t)n + ((size_t)i < len % (size_t)n);

		sge[i] = (struct ibv_sge){ (uintptr_t)(r->p + off), (uint32_t)piece, r->mr->lkey };
		off += piece;
	}
}

/* As rxe fills in a receive completion: IBV_WC_GRH on every one, the immediate as sent. */
static bool check_send_recv_wc(const struct ibv_wc *wc, const struct conn *c, uint32_t len,
			       bool imm)
{
	unsigned flags = IBV_WC_GRH | (imm ? IBV_WC_WITH_IMM : 0);

	if (wc->opcode == IBV_WC_RECV && wc->byte_len == len && wc->wc_flags == flags &&
	    (!imm || wc->imm_data == htonl(IMM_VALUE)) && wc->src_qp == c->a.qp->qp_num)
		return true;
	return e2e_mismatch("B's completion: opcode %d byte_len %u flags 0x%x imm 0x%08x src_qp "
			    "0x%06x, expected %d, %u, 0x%x, 0x%08x, 0x%06x", (int)wc->opcode,
			    wc->byte_len, (unsigned)wc->wc_flags, ntohl(wc->imm_data), wc->src_qp,
			    (int)IBV_WC_RECV, len, flags, imm ? IMM_VALUE : 0, c->a.qp->qp_num);
}

/* len bytes from two SGEs on A into a receive of three SGEs on B with SEND_SLACK bytes to
 * spare: both completions as verbs says, the bytes where they belong, none past them. */
static bool one_send(struct conn *c, struct region *src, struct region *dst, uint32_t len,
		     bool imm)
{
	struct ibv_sge out[2], in[3];
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	char what[48];

	fill_pat(dst->p, dst->len, SEED_TARGET);
	split_sges(out, 2, src, 0, len);
	split_sges(in, 3, dst, 0, len + SEND_SLACK);
	wr = send_wr(len, out, 2, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND);
	snprintf(what, sizeof(what), "SEND%s of %u bytes", imm ? " WITH IMM" : "", len);
	if (post_recv(&c->b, 0x100000 + len, in, 3) < 0 || post_wr(&c->a, &wr) < 0 ||
	    !expect_wc(&c->a, len, IBV_WC_SUCCESS, what, &wc))
		return false;
	if (wc.opcode != IBV_WC_SEND || wc.byte_len != len)
		return e2e_mismatch("%s: A's completion has opcode %d, byte_len %u", what,
				    (int)wc.opcode, wc.byte_len);
	return expect_wc(&c->b, 0x100000 + len, IBV_WC_SUCCESS, "B's receive", &wc) &&
	       check_send_recv_wc(&wc, c, len, imm) &&
	       expect_pat(dst->p, len, SEED_SOURCE, "receive buffer") &&
	       expect_range(dst->p, len, dst->len, SEED_TARGET, "receive buffer past the message");
}

/* Sizes around the MTU and a long message, across the PSN wrap, one QP pair throughout. */
static void case_send_recv(struct env *e)
{
	const uint32_t sizes[] = { 0, 1, 4095, 4096, 4097, SEND_MAX };
	struct conn_opts o = default_opts();
	struct region src = { 0 }, dst = { 0 };
	struct conn c;
	bool ok = true;

	o.psn_a = PSN_WRAP;
	if (region_open(&src, &e->a, SEND_MAX, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, SEND_MAX + SEND_SLACK, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    conn_open(e, &o, &c) == 0) {
		for (size_t i = 0; ok && i < sizeof(sizes) / sizeof(sizes[0]); i++)
			ok = one_send(&c, &src, &dst, sizes[i], false);
		if (ok && one_send(&c, &src, &dst, 3 * e->pmtu - 5, true) &&
		    one_send(&c, &src, &dst, 0, true))
			e2e_note("byte-exact, nothing past the messages changed");
		conn_close(&c);
	}
	region_close(&src);
	region_close(&dst);
}

/* A request that B's receive cannot take, on a fresh QP pair: A's and B's completions
 * must be want_a and want_b, and B's QP in the error state. */
struct recv_shot {
	const char *what;
	enum ibv_wr_opcode opcode;
	uint32_t len;             /* from A */
	uint32_t recv_len;        /* B's one receive SGE, at dst */
	uint32_t recv_lkey;
	uint32_t rkey;            /* WRITE WITH IMM's target, SEND WITH INV's key */
	enum ibv_wc_status want_a, want_b;
};

static bool refused_receive(struct env *e, struct region *src, struct region *dst,
			    const struct recv_shot *s)
{
	struct ibv_sge out = { (uintptr_t)src->p, s->len, src->mr->lkey };
	struct ibv_sge in = { (uintptr_t)dst->p, s->recv_len, s->recv_lkey };
	struct ibv_send_wr wr = send_wr(1, &out, 1, s->opcode);
	struct conn_opts o = default_opts();
	char what[96];
	struct conn c;
	bool ok = false;

	wr.wr.rdma.remote_addr = (uintptr_t)dst->p;
	wr.wr.rdma.rkey = s->rkey;
	if (s->opcode == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = s->rkey;
	snprintf(what, sizeof(what), "B's receive after %s", s->what);
	if (conn_open(e, &o, &c) < 0)
		return false;
	if (post_recv(&c.b, 2, &in, 1) == 0 && post_wr(&c.a, &wr) == 0 &&
	    expect_wc(&c.a, 1, s->want_a, s->what, NULL) &&
	    expect_wc(&c.b, 2, s->want_b, what, NULL))
		ok = expect_state(&c.a, s->want_a == IBV_WC_SUCCESS ? IBV_QPS_RTS : IBV_QPS_ERR) &&
		     expect_state(&c.b, IBV_QPS_ERR);
	conn_close(&c);
	return ok;
}

/* Every way B's side refuses, with rxe's statuses on both sides; only SEND WITH INVALIDATE
 * places its data (before the invalidation fails), nothing else changes the buffer. */
static void case_send_errors(struct env *e)
{
	struct region src = { 0 }, dst = { 0 }, ro = { 0 };
	struct recv_shot shots[] = {
		{ "a 200-byte SEND into a 100-byte receive", IBV_WR_SEND, 200, 100, 0, 0,
		  IBV_WC_REM_OP_ERR, IBV_WC_LOC_QP_OP_ERR },
		{ "a SEND into a receive without LOCAL_WRITE", IBV_WR_SEND, 200, 256, 0, 0,
		  IBV_WC_REM_OP_ERR, IBV_WC_LOC_QP_OP_ERR },
		{ "a WRITE WITH IMM to a bad rkey", IBV_WR_RDMA_WRITE_WITH_IMM, 200, 0, 0, 0,
		  IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR },
		{ "a SEND WITH INVALIDATE", IBV_WR_SEND_WITH_INV, 200, 256, 0, 0,
		  IBV_WC_SUCCESS, IBV_WC_REM_INV_REQ_ERR },
	};
	bool ok = true;

	if (region_open(&src, &e->a, 4096, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) < 0 ||
	    region_open(&dst, &e->b, 4096, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_alloc(&ro, &e->b, 4096, SEED_OTHER) < 0 || region_reg(&ro, e->b.pd, 0, 4096, 0) < 0)
		goto out;
	shots[0].recv_lkey = shots[3].recv_lkey = dst.mr->lkey;
	shots[1].recv_lkey = ro.mr->lkey;
	shots[2].rkey = dst.mr->rkey ^ 0x80;
	shots[3].rkey = dst.mr->rkey;
	for (int i = 0; ok && i < 3; i++)
		ok = refused_receive(e, &src, &dst, &shots[i]) &&
		     expect_pat(dst.p, dst.len, SEED_TARGET, "B's buffer") &&
		     expect_pat(ro.p, ro.len, SEED_OTHER, "B's read-only buffer");
	if (ok && refused_receive(e, &src, &dst, &shots[3]) &&
	    expect_pat(dst.p, 200, SEED_SOURCE, "B's buffer") &&
	    expect_range(dst.p, 200, dst.len, SEED_TARGET, "B's buffer past the SEND"))
		e2e_note("nothing else written");
out:
	region_close(&src);
	region_close(&dst);
	region_close(&ro);
}

/* No receive posted and rnr_retry 0: the first RNR NAK ends the SEND. */
static void case_send_rnr(struct env *e)
{
	struct conn_opts o = default_opts();
	struct region src = { 0 };
	struct ibv_sge out;
	struct ibv_send_wr wr;
	struct conn c;

	o.rnr_retry = 0;
	if (region_open(&src, &e->a, 4096, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    conn_open(e, &o, &c) == 0) {
		out = (struct ibv_sge){ (uintptr_t)src.p, 64, src.mr->lkey };
		wr = send_wr(1, &out, 1, IBV_WR_SEND);
		if (post_wr(&c.a, &wr) == 0 &&
		    expect_wc(&c.a, 1, IBV_WC_RNR_RETRY_EXC_ERR, "SEND, no receive, rnr_retry 0",
			      NULL) &&
		    expect_states(&c, IBV_WC_RNR_RETRY_EXC_ERR))
			expect_quiet(&c.b, "B after the RNR NAK");
		conn_close(&c);
	}
	region_close(&src);
}

/* ---- RDMA READ ---- */

#define ACCESS_READABLE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)

static struct ibv_send_wr read_wr(uint64_t wr_id, struct ibv_sge *sge, int num_sge,
				  uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = write_wr(wr_id, sge, num_sge, raddr, rkey);

	wr.opcode = IBV_WR_RDMA_READ;
	return wr;
}

/* len bytes of B's MR at offset 0 read into three SGEs on A with SEND_SLACK to spare. */
static bool one_read(struct conn *c, struct region *dst, struct region *remote, uint32_t len)
{
	struct ibv_sge in[3];
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	char what[48];

	fill_pat(dst->p, dst->len, SEED_TARGET);
	split_sges(in, 3, dst, 0, len);
	wr = read_wr(len, in, 3, (uintptr_t)remote->p, remote->mr->rkey);
	snprintf(what, sizeof(what), "READ of %u bytes", len);
	if (post_wr(&c->a, &wr) < 0 || !expect_wc(&c->a, len, IBV_WC_SUCCESS, what, &wc))
		return false;
	if (wc.opcode != IBV_WC_RDMA_READ || wc.byte_len != len)
		return e2e_mismatch("%s: A's completion has opcode %d, byte_len %u", what,
				    (int)wc.opcode, wc.byte_len);
	return expect_pat(dst->p, len, SEED_OTHER, "READ's destination") &&
	       expect_range(dst->p, len, dst->len, SEED_TARGET, "destination past the READ");
}

#define MANY_READS 16
#define MANY_LEN   65536

/* MANY_READS READs of MANY_LEN posted at once (QP_RD_ATOMIC may be outstanding), each from
 * its own piece of B's MR into its own piece of A's buffer: all succeed, in order. */
static bool many_reads(struct conn *c, struct region *dst, struct region *remote)
{
	struct ibv_sge sge[MANY_READS];
	struct ibv_send_wr wr[MANY_READS];

	fill_pat(dst->p, dst->len, SEED_TARGET);
	for (int i = 0; i < MANY_READS; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)(dst->p + i * MANY_LEN), MANY_LEN,
					   dst->mr->lkey };
		wr[i] = read_wr(0x200 + (uint64_t)i, &sge[i], 1,
				(uintptr_t)(remote->p + i * MANY_LEN), remote->mr->rkey);
		wr[i].next = i + 1 < MANY_READS ? &wr[i + 1] : NULL;
	}
	if (post_wr(&c->a, wr) < 0)
		return false;
	for (int i = 0; i < MANY_READS; i++) {
		struct ibv_wc wc;

		if (next_wc(&c->a, &wc, "16 READs of 64 KiB") < 0)
			return false;
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 0x200 + (uint64_t)i)
			return e2e_mismatch("READ %d of 16: %s for wr_id 0x%llx", i,
					    rocemu_wc_status_str(wc.status),
					    (unsigned long long)wc.wr_id);
	}
	e2e_note("16 READs of 64 KiB, 4 outstanding -> IBV_WC_SUCCESS, in order");
	return expect_pat(dst->p, MANY_READS * MANY_LEN, SEED_OTHER, "the 16 READs' destination");
}

/* Sizes around the MTU and a long READ, across the PSN wrap, one QP pair throughout; then
 * 16 READs of 64 KiB posted at once with 4 allowed outstanding, completed in order. */
static void case_read(struct env *e)
{
	const uint32_t sizes[] = { 0, 1, 4095, 4096, 4097, SEND_MAX };
	struct conn_opts o = default_opts();
	struct region dst = { 0 }, remote = { 0 };
	struct conn c;
	bool ok = true;

	o.psn_a = PSN_WRAP;
	o.access_b |= IBV_ACCESS_REMOTE_READ;
	if (region_open(&dst, &e->a, SEND_MAX + SEND_SLACK, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    region_open(&remote, &e->b, SEND_MAX, SEED_OTHER, ACCESS_READABLE) == 0 &&
	    conn_open(e, &o, &c) == 0) {
		for (size_t i = 0; ok && i < sizeof(sizes) / sizeof(sizes[0]); i++)
			ok = one_read(&c, &dst, &remote, sizes[i]);
		if (ok && many_reads(&c, &dst, &remote))
			e2e_note("byte-exact, nothing past the READs changed");
		conn_close(&c);
	}
	region_close(&dst);
	region_close(&remote);
}

/* A READ from B's buffer into A's, then a fenced WRITE of A's buffer into B's second
 * buffer: the fence holds the WRITE until the READ's data is in, so B's second buffer gets
 * what the READ brought (without it, the WRITE would gather A's old bytes at once). */
static bool fenced_write(struct env *e, struct region *local, struct region *remote,
			 struct region *copy)
{
	struct conn_opts o = default_opts();
	struct ibv_sge sge = { (uintptr_t)local->p, 8192, local->mr->lkey };
	struct ibv_send_wr rd = read_wr(1, &sge, 1, (uintptr_t)remote->p, remote->mr->rkey);
	struct ibv_send_wr wr = write_wr(2, &sge, 1, (uintptr_t)copy->p, copy->mr->rkey);
	struct conn c;
	bool ok = false;

	o.access_b |= IBV_ACCESS_REMOTE_READ;
	wr.send_flags |= IBV_SEND_FENCE;
	rd.next = &wr;
	if (conn_open(e, &o, &c) < 0)
		return false;
	ok = post_wr(&c.a, &rd) == 0 &&
	     expect_wc(&c.a, 1, IBV_WC_SUCCESS, "READ then a fenced WRITE of what it read", NULL) &&
	     expect_wc(&c.a, 2, IBV_WC_SUCCESS, "the fenced WRITE", NULL) &&
	     expect_pat(copy->p, 8192, SEED_OTHER, "the fenced WRITE's target");
	conn_close(&c);
	return ok;
}

/* One request (wr_id 1) on a fresh QP pair that must end with want on A: both QPs in ERR
 * after a NAK. */
static bool refused_request(struct env *e, const struct conn_opts *o, const char *what,
			    struct ibv_send_wr *wr, enum ibv_wc_status want)
{
	struct conn c;
	bool ok;

	if (conn_open(e, o, &c) < 0)
		return false;
	ok = post_wr(&c.a, wr) == 0 && expect_wc(&c.a, 1, want, what, NULL) &&
	     expect_states(&c, want);
	conn_close(&c);
	return ok;
}

static bool refused_read(struct env *e, const struct conn_opts *o, const char *what,
			 struct ibv_sge *sge, uint64_t raddr, uint32_t rkey,
			 enum ibv_wc_status want)
{
	struct ibv_send_wr wr = read_wr(1, sge, 1, raddr, rkey);

	return refused_request(e, o, what, &wr, want);
}

/* Every way a READ is refused, with rxe's status; A's buffer never changes. */
static void case_read_errors(struct env *e)
{
	struct conn_opts o = default_opts(), no_qp_read = default_opts();
	struct conn_opts no_ord = default_opts(), no_ird = default_opts();
	struct region local = { 0 }, remote = { 0 }, wronly = { 0 }, ro = { 0 }, copy = { 0 };
	struct ibv_sge sge;

	o.access_b |= IBV_ACCESS_REMOTE_READ;
	no_ord = no_ird = o;
	no_ord.rd_atomic_a = 0;
	no_ird.rd_atomic_b = 0;
	if (region_open(&local, &e->a, 8192, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&remote, &e->b, 8192, SEED_OTHER, ACCESS_READABLE) < 0 ||
	    region_open(&copy, &e->b, 8192, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&wronly, &e->b, 8192, SEED_OTHER, ACCESS_TARGET) < 0 ||
	    region_alloc(&ro, &e->a, 4096, SEED_TARGET) < 0 || region_reg(&ro, e->a.pd, 0, 4096, 0) < 0)
		goto out;
	sge = (struct ibv_sge){ (uintptr_t)local.p, 64, local.mr->lkey };
	if (refused_read(e, &o, "READ of an MR without remote read", &sge,
			 (uintptr_t)wronly.p, wronly.mr->rkey, IBV_WC_REM_ACCESS_ERR) &&
	    refused_read(e, &o, "READ 1 byte past the MR's end", &sge,
			 (uintptr_t)remote.p + 8192 - 63, remote.mr->rkey, IBV_WC_REM_ACCESS_ERR) &&
	    refused_read(e, &no_qp_read, "READ to a QP without remote read", &sge,
			 (uintptr_t)remote.p, remote.mr->rkey, IBV_WC_REM_INV_REQ_ERR) &&
	    refused_read(e, &no_ird, "READ to a QP with max_dest_rd_atomic 0", &sge,
			 (uintptr_t)remote.p, remote.mr->rkey, IBV_WC_REM_INV_REQ_ERR) &&
	    refused_read(e, &no_ord, "READ on a QP with max_rd_atomic 0", &sge,
			 (uintptr_t)remote.p, remote.mr->rkey, IBV_WC_LOC_QP_OP_ERR) &&
	    expect_pat(local.p, local.len, SEED_TARGET, "A's buffer")) {
		sge = (struct ibv_sge){ (uintptr_t)ro.p, 64, ro.mr->lkey };
		if (refused_read(e, &o, "READ into a local MR without LOCAL_WRITE", &sge,
				 (uintptr_t)remote.p, remote.mr->rkey, IBV_WC_LOC_PROT_ERR) &&
		    expect_pat(ro.p, ro.len, SEED_TARGET, "A's read-only buffer") &&
		    fenced_write(e, &local, &remote, &copy))
			e2e_note("nothing written where it must not be");
	}
out:
	region_close(&local);
	region_close(&remote);
	region_close(&copy);
	region_close(&wronly);
	region_close(&ro);
}

/* ---- a remote error in the midst of a READ's responses ---- */

#define MIDWAY_LEN (64u << 20)   /* streams for tens of ms: time to pull the MR from under it */

#define CNT_ENUM(name, help) C_##name,
enum counter { PROTO_COUNTERS(CNT_ENUM) C_COUNT };
#undef CNT_ENUM

static int stats_of(const char *sock, uint64_t out[C_COUNT])
{
	struct proto_handle req = { .hdr.op = PROTO_STATS };
	struct proto_stats_reply rep;
	char err[256];
	int fd = ctl_connect(sock, err, sizeof(err)), rc;

	if (fd < 0) {
		e2e_error("stats of %s: %s", sock, err);
		return -1;
	}
	rc = ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), err, sizeof(err));
	close(fd);
	if (rc < 0 || rep.ncounters != C_COUNT) {
		e2e_error("stats of %s: %s", sock, rc < 0 ? err : "another counter layout");
		return -1;
	}
	memcpy(out, rep.counters, sizeof(rep.counters));
	return 0;
}

/* Waits (bounded) until the READ's first response is placed in dst; false when it was not,
 * or when the whole READ was done already. */
static bool read_under_way(struct end *a, const struct region *dst, uint32_t pmtu)
{
	const int64_t deadline = e2e_now_ms() + WAIT_MS;
	struct ibv_wc wc;

	/* looked at every 100 us: a spinning test would take the CPU the daemons need, and
	 * responses lost to a full ring would start a resend of their own */
	while (pat_mismatch(dst->p, 0, pmtu, SEED_OTHER) < pmtu && e2e_now_ms() < deadline)
		usleep(100);
	if (pat_mismatch(dst->p, 0, pmtu, SEED_OTHER) < pmtu)
		return e2e_mismatch("the READ's first response was not placed within %d ms",
				    WAIT_MS);
	if (rocemu_poll_cq(a->cq, 1, &wc) == 1)
		return e2e_mismatch("the READ completed (%s) before B's MR went away: too fast "
				    "for this case", rocemu_wc_status_str(wc.status));
	return true;
}

/* A's buffer holds whole responses of B's pattern, then its own to the end: nothing was
 * placed after the NAK. */
static bool placed_then_untouched(const struct region *dst, uint32_t pmtu)
{
	size_t placed = 0;

	while (placed < MIDWAY_LEN &&
	       pat_mismatch(dst->p, placed, placed + pmtu, SEED_OTHER) == placed + pmtu)
		placed += pmtu;
	e2e_note("%zu of %u bytes placed before the NAK", placed, MIDWAY_LEN);
	return expect_range(dst->p, placed, dst->len, SEED_TARGET, "A's buffer after them");
}

/* What A's daemon and B's counted over the case: no resend round, no timer expiry, and
 * not one packet to B's QP in the error state but the CNPs A's congestion control sent
 * it (A's receive ring backing up on a loaded machine: B's QP, gone to ERROR, drops
 * them as rxe does); unless responses were lost to A's full receive ring, which is a
 * loss to resend for like any other. */
static bool no_retry_counted(const uint64_t a0[C_COUNT], const uint64_t a1[C_COUNT],
			     const uint64_t b0[C_COUNT], const uint64_t b1[C_COUNT])
{
	uint64_t retries = a1[C_completer_retry_err] - a0[C_completer_retry_err];
	uint64_t expiries = a1[C_timeouts] - a0[C_timeouts];
	uint64_t dropped = b1[C_drop_qp_state] - b0[C_drop_qp_state];
	uint64_t naks = b1[C_nak_rem_access_sent] - b0[C_nak_rem_access_sent];
	uint64_t lost = a1[C_drop_ring_full] - a0[C_drop_ring_full];
	uint64_t cnps = a1[C_np_cnp_sent] - a0[C_np_cnp_sent];

	e2e_note("A: %llu retries, %llu expiries, %llu frames lost to its ring, %llu CNPs sent; "
		 "B: %llu access NAK, %llu dropped in ERR", (unsigned long long)retries,
		 (unsigned long long)expiries, (unsigned long long)lost, (unsigned long long)cnps,
		 (unsigned long long)naks, (unsigned long long)dropped);
	if (naks != 1)
		return e2e_mismatch("expected one NAK from B");
	if (!lost && (retries || expiries || dropped > cnps))
		return e2e_mismatch("expected no retry, no expiry, nothing dropped but CNPs");
	return true;
}

/* B deregisters its MR while A's READ of it streams: B NAKs (remote access) with the
 * READ's PSN, below the responses A already placed. A completes the READ with
 * IBV_WC_REM_ACCESS_ERR at once (rxe since 2022), without a resend into B's QP, which went
 * to the error state (a NAK taken for stale left the READ to fail with
 * IBV_WC_RETRY_EXC_ERR seconds later, or never with retry_cnt 7). */
static void case_read_refused(struct env *e)
{
	struct conn_opts o = default_opts();
	struct region dst = { 0 }, remote = { 0 };
	uint64_t a0[C_COUNT], a1[C_COUNT], b0[C_COUNT], b1[C_COUNT];
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct conn c;
	int64_t t0;

	o.access_b |= IBV_ACCESS_REMOTE_READ;
	if (region_open(&dst, &e->a, MIDWAY_LEN + SEND_SLACK, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&remote, &e->b, MIDWAY_LEN, SEED_OTHER, ACCESS_READABLE) < 0 ||
	    conn_open(e, &o, &c) < 0)
		goto out;
	sge = (struct ibv_sge){ (uintptr_t)dst.p, MIDWAY_LEN, dst.mr->lkey };
	wr = read_wr(1, &sge, 1, (uintptr_t)remote.p, remote.mr->rkey);
	if (stats_of(e->sock_a, a0) == 0 && stats_of(e->sock_b, b0) == 0 &&
	    post_wr(&c.a, &wr) == 0 && read_under_way(&c.a, &dst, e->pmtu) &&
	    region_dereg(&remote) == 0) {
		t0 = e2e_now_ms();
		if (expect_wc(&c.a, 1, IBV_WC_REM_ACCESS_ERR, "READ of 64 MiB, B's MR deregistered "
			      "under it", NULL)) {
			e2e_note("%lld ms after the deregistration", (long long)(e2e_now_ms() - t0));
			if (expect_states(&c, IBV_WC_REM_ACCESS_ERR) && expect_quiet(&c.a, "A") &&
			    placed_then_untouched(&dst, e->pmtu) && stats_of(e->sock_a, a1) == 0 &&
			    stats_of(e->sock_b, b1) == 0)
				no_retry_counted(a0, a1, b0, b1);
		}
	}
	conn_close(&c);
out:
	region_close(&dst);
	region_close(&remote);
}

/* ---- completion events ---- */

/* One SEND of 16 bytes from A, waited for on A; flags adds to IBV_SEND_SIGNALED. */
static bool send_flagged(struct conn *c, struct region *src, uint64_t wr_id, unsigned flags)
{
	struct ibv_sge out = { (uintptr_t)src->p, 16, src->mr->lkey };
	struct ibv_send_wr wr = send_wr(wr_id, &out, 1, IBV_WR_SEND);

	wr.send_flags |= flags;
	return post_wr(&c->a, &wr) == 0 &&
	       expect_wc(&c->a, wr_id, IBV_WC_SUCCESS, flags ? "a solicited SEND" : "a SEND", NULL);
}

/* B's CQ armed for solicited completions only sleeps through an ordinary SEND and wakes
 * for a solicited one; armed for any, it wakes for an ordinary one; not armed, asking for
 * an event is EINVAL. */
static void case_events(struct env *e)
{
	const struct conn_opts o = default_opts();
	struct region src = { 0 }, recv = { 0 };
	struct ibv_wc wc;
	struct conn c;
	int ev[4];

	if (region_open(&src, &e->a, 4096, SEED_SOURCE, ACCESS_TARGET) < 0 ||
	    region_open(&recv, &e->b, 4096, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    conn_open(e, &o, &c) < 0)
		goto out;
	for (int i = 0; i < 3; i++) {
		struct ibv_sge in = { (uintptr_t)recv.p, 4096, recv.mr->lkey };

		if (post_recv(&c.b, 10 + (uint64_t)i, &in, 1) < 0)
			goto close;
	}
	ev[0] = rocemu_get_cq_event(c.b.cq, 0);
	if (rocemu_req_notify_cq(c.b.cq, 1) != 0 || !send_flagged(&c, &src, 1, 0))
		goto close;
	ev[1] = rocemu_get_cq_event(c.b.cq, QUIET_MS);
	if (!send_flagged(&c, &src, 2, IBV_SEND_SOLICITED))
		goto close;
	ev[2] = rocemu_get_cq_event(c.b.cq, WAIT_MS);
	if (rocemu_req_notify_cq(c.b.cq, 0) != 0 || !send_flagged(&c, &src, 3, 0))
		goto close;
	ev[3] = rocemu_get_cq_event(c.b.cq, WAIT_MS);
	if (ev[0] != EINVAL || ev[1] != ETIMEDOUT || ev[2] != 0 || ev[3] != 0) {
		e2e_mismatch("events: not armed %d, solicited-only after a plain SEND %d, after a "
			     "solicited SEND %d, armed for any after a plain SEND %d (expected "
			     "EINVAL, ETIMEDOUT, 0, 0)", ev[0], ev[1], ev[2], ev[3]);
		goto close;
	}
	for (int i = 0; i < 3; i++)
		if (!expect_wc(&c.b, 10 + (uint64_t)i, IBV_WC_SUCCESS, "B's receive", &wc))
			goto close;
	e2e_note("solicited-only: no event for a plain SEND, one for a solicited SEND; any: "
		 "one for a plain SEND; not armed: EINVAL");
close:
	conn_close(&c);
out:
	region_close(&src);
	region_close(&recv);
}

/* ---- shared receive queues ---- */

#define SRQ_WQES   12
#define SRQ_SLICE  4096
#define SRQ_LIMIT  4

/* Message k (64 + k bytes, seed SEED_SOURCE + k) from A on c; B's completion must name
 * c's QP and SRQ WQE want, and that WQE's slice must hold the message. */
static bool srq_send(struct conn *c, struct region *src, struct region *slices, int k, int want)
{
	struct ibv_sge out = { (uintptr_t)src->p, 64 + (uint32_t)k, src->mr->lkey };
	struct ibv_send_wr wr = send_wr(0x300 + (uint64_t)k, &out, 1, IBV_WR_SEND);
	struct ibv_wc wc;

	fill_pat(src->p, 64 + (size_t)k, SEED_SOURCE + (unsigned)k);
	if (post_wr(&c->a, &wr) < 0 || next_wc(&c->a, &wc, "a SEND to the SRQ") < 0 ||
	    next_wc(&c->b, &wc, "B's receive from the SRQ") < 0)
		return false;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)want ||
	    wc.qp_num != c->b.qp->qp_num || wc.byte_len != 64 + (uint32_t)k)
		return e2e_mismatch("SEND %d: B's completion %s wr_id %llu qp 0x%06x byte_len %u, "
				    "expected WQE %d on QP 0x%06x", k,
				    rocemu_wc_status_str(wc.status), (unsigned long long)wc.wr_id,
				    wc.qp_num, wc.byte_len, want, c->b.qp->qp_num);
	return expect_pat(slices->p + (size_t)want * SRQ_SLICE, 64 + (size_t)k,
			  SEED_SOURCE + (unsigned)k, "the SRQ WQE's slice");
}

/* What the SRQ and its QPs refuse: post_recv on a QP of the SRQ, destroying it while QPs
 * use it, a size change. */
static bool srq_refusals(struct conn *c, struct rocemu_srq *srq)
{
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *bad = NULL;
	struct ibv_srq_attr attr = { .max_wr = 64 };
	int e1 = rocemu_post_recv(c->b.qp, &rwr, &bad);
	int e2 = rocemu_destroy_srq(srq);
	int e3 = rocemu_modify_srq(srq, &attr, IBV_SRQ_MAX_WR);

	if (e1 != EINVAL || e2 != EBUSY || e3 != EINVAL)
		return e2e_mismatch("post_recv on a QP of the SRQ: %d, destroy while used: %d, "
				    "resize: %d (expected EINVAL, EBUSY, EINVAL)", e1, e2, e3);
	e2e_note("post_recv on its QP -> EINVAL, destroy while used -> EBUSY, resize -> EINVAL");
	return true;
}

/* Two QPs on B share an SRQ of SRQ_WQES receives: SENDs on either take them in posting
 * order; the limit event fires once fewer than SRQ_LIMIT are left, and not before; once
 * it is empty, a SEND is refused with RNR. */
static bool srq_pair(struct env *e, struct rocemu_srq *srq, struct region *src,
		     struct region *slices)
{
	struct conn_opts o = default_opts();
	struct conn c[2];
	struct ibv_srq_attr attr = { .srq_limit = SRQ_LIMIT };
	struct ibv_sge sge = { (uintptr_t)src->p, 8, src->mr->lkey };
	struct ibv_send_wr wr = send_wr(0x3ff, &sge, 1, IBV_WR_SEND);
	bool ok = false;
	int k = 0;

	memset(c, 0, sizeof(c));
	o.srq_b = srq;
	o.rnr_retry = 0;
	if (conn_open(e, &o, &c[0]) < 0 || conn_open(e, &o, &c[1]) < 0 ||
	    !srq_refusals(&c[0], srq))
		goto out;
	if (rocemu_modify_srq(srq, &attr, IBV_SRQ_LIMIT) != 0) {
		vfail(&e->b, "rocemu_modify_srq", EINVAL);
		goto out;
	}
	for (; k < SRQ_WQES - SRQ_LIMIT; k++)
		if (!srq_send(&c[k % 2], src, slices, k, k))
			goto out;
	if (rocemu_get_srq_event(srq, 0) != ETIMEDOUT) {
		e2e_mismatch("the limit event fired with %d WQEs left", SRQ_WQES - k);
		goto out;
	}
	if (!srq_send(&c[k % 2], src, slices, k, k) || rocemu_get_srq_event(srq, WAIT_MS) != 0 ||
	    rocemu_query_srq(srq, &attr) != 0 || attr.srq_limit != 0) {
		e2e_mismatch("no limit event (or the limit not cleared) with %d WQEs left of %d",
			     SRQ_WQES - k - 1, SRQ_WQES);
		goto out;
	}
	e2e_note("%d SENDs on two QPs took the SRQ's WQEs in order; the limit event fired at "
		 "%d left, not before", k + 1, SRQ_WQES - k - 1);
	for (k++; k < SRQ_WQES; k++)
		if (!srq_send(&c[k % 2], src, slices, k, k))
			goto out;
	ok = post_wr(&c[0].a, &wr) == 0 &&
	     expect_wc(&c[0].a, 0x3ff, IBV_WC_RNR_RETRY_EXC_ERR, "a SEND to the empty SRQ", NULL);
out:
	conn_close(&c[0]);
	conn_close(&c[1]);
	return ok;
}

static void case_srq(struct env *e)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct region src = { 0 }, slices = { 0 };
	struct rocemu_srq *srq = NULL;
	int err;

	if (region_open(&src, &e->a, 4096, SEED_SOURCE, ACCESS_TARGET) < 0 ||
	    region_open(&slices, &e->b, SRQ_WQES * SRQ_SLICE, SEED_TARGET, ACCESS_TARGET) < 0)
		goto out;
	if (!(srq = rocemu_create_srq(e->b.pd, &init))) {
		vfail(&e->b, "rocemu_create_srq", errno);
		goto out;
	}
	for (int i = 0; i < SRQ_WQES; i++) {
		struct ibv_sge sge = { (uintptr_t)(slices.p + i * SRQ_SLICE), SRQ_SLICE,
				       slices.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad = NULL;

		if ((err = rocemu_post_srq_recv(srq, &rwr, &bad))) {
			vfail(&e->b, "rocemu_post_srq_recv", err);
			goto out;
		}
	}
	if (srq_pair(e, srq, &src, &slices))
		e2e_note("done");
out:
	if (srq && (err = rocemu_destroy_srq(srq)))
		vfail(&e->b, "rocemu_destroy_srq", err);
	region_close(&src);
	region_close(&slices);
}

/* ---- inline data ---- */

#define INLINE_ROUNDS 4

/* INLINE_ROUNDS times a send queue full of unsignaled inline WRITEs but the last, each
 * buffer overwritten as soon as it is posted. The daemon sends inline data from the ring's
 * slot, so under injected loss the resends too must carry what was posted. */
static bool inline_queues(struct conn *c, struct region *dst)
{
	uint8_t chunk[INLINE_MAX];
	struct ibv_sge sge = { (uintptr_t)chunk, INLINE_MAX, 0 };
	size_t n = 0;

	for (unsigned round = 0; round < INLINE_ROUNDS; round++) {
		for (unsigned i = 0; i < QP_DEPTH; i++, n++) {
			struct ibv_send_wr wr = write_wr(10 + n, &sge, 1,
							 (uintptr_t)dst->p + n * INLINE_MAX,
							 dst->mr->rkey);

			for (size_t j = 0; j < INLINE_MAX; j++)
				chunk[j] = pat(n * INLINE_MAX + j, SEED_SOURCE);
			wr.send_flags = IBV_SEND_INLINE | (i + 1 == QP_DEPTH ? IBV_SEND_SIGNALED : 0);
			if (post_wr(&c->a, &wr) < 0)
				return false;
			memset(chunk, 0, sizeof(chunk));
		}
		if (!expect_wc(&c->a, 10 + n - 1, IBV_WC_SUCCESS, "a send queue of inline WRITEs",
			       NULL))
			return false;
	}
	return expect_pat(dst->p, n * INLINE_MAX, SEED_SOURCE, "the inline WRITEs' target") &&
	       expect_range(dst->p, n * INLINE_MAX, dst->len, SEED_TARGET, "past them");
}

/* A SEND and a WRITE with IBV_SEND_INLINE from unregistered memory (lkey 0), whose buffer
 * is overwritten right after posting: the peer gets what it held at post time; then
 * queues of them (inline_queues). One byte more than max_inline_data is refused at post. */
static void case_inline(struct env *e)
{
	const struct conn_opts o = default_opts();
	uint8_t data[INLINE_MAX + 1];
	struct region dst = { 0 }, recv = { 0 }, queued = { 0 };
	struct ibv_sge sge = { (uintptr_t)data, 200, 0 };
	struct ibv_send_wr send = send_wr(1, &sge, 1, IBV_WR_SEND), wr, *bad = NULL;
	struct ibv_sge in = { 0 };
	struct conn c;
	int err;

	fill_pat(data, sizeof(data), SEED_SOURCE);
	send.send_flags |= IBV_SEND_INLINE;
	if (region_open(&dst, &e->b, 4096, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&recv, &e->b, 4096, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&queued, &e->b, (INLINE_ROUNDS * QP_DEPTH + 1) * INLINE_MAX, SEED_TARGET,
			ACCESS_TARGET) < 0 ||
	    conn_open(e, &o, &c) < 0)
		goto out;
	in = (struct ibv_sge){ (uintptr_t)recv.p, 4096, recv.mr->lkey };
	if (post_recv(&c.b, 2, &in, 1) < 0 || post_wr(&c.a, &send) < 0)
		goto close;
	memset(data, 0, sizeof(data));
	if (!expect_wc(&c.a, 1, IBV_WC_SUCCESS, "SEND of 200 bytes inline", NULL) ||
	    !expect_wc(&c.b, 2, IBV_WC_SUCCESS, "B's receive", NULL) ||
	    !expect_pat(recv.p, 200, SEED_SOURCE, "B's receive buffer"))
		goto close;
	fill_pat(data, sizeof(data), SEED_SOURCE);
	sge.length = INLINE_MAX;
	wr = write_wr(3, &sge, 1, (uintptr_t)dst.p, dst.mr->rkey);
	wr.send_flags |= IBV_SEND_INLINE;
	if (post_wr(&c.a, &wr) < 0)
		goto close;
	memset(data, 0, sizeof(data));
	if (!expect_wc(&c.a, 3, IBV_WC_SUCCESS, "WRITE of 256 bytes inline", NULL) ||
	    !expect_pat(dst.p, INLINE_MAX, SEED_SOURCE, "WRITE's target") ||
	    !expect_range(dst.p, INLINE_MAX, dst.len, SEED_TARGET, "past the WRITE") ||
	    !inline_queues(&c, &queued))
		goto close;
	sge.length = INLINE_MAX + 1;
	err = rocemu_post_send(c.a.qp, &wr, &bad);
	if (err == EINVAL)
		e2e_note("257 bytes inline -> EINVAL at post; the data was taken at post time");
	else
		e2e_mismatch("257 bytes inline: post_send gave %d, expected EINVAL", err);
close:
	conn_close(&c);
out:
	region_close(&dst);
	region_close(&recv);
	region_close(&queued);
}

/* ---- atomics ---- */

#define ACCESS_ATOMIC  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
#define ADDS_PER_QP    5000
#define ADD_STEP       3
#define COUNTER_START  0x1122334455667788ull
#define ADDS_IN_FLIGHT 8

static struct ibv_send_wr atomic_wr(uint64_t wr_id, struct ibv_sge *sge,
				    enum ibv_wr_opcode opcode, uint64_t raddr, uint32_t rkey,
				    uint64_t compare_add, uint64_t swap)
{
	return (struct ibv_send_wr){ .wr_id = wr_id, .sg_list = sge, .num_sge = 1,
				     .opcode = opcode, .send_flags = IBV_SEND_SIGNALED,
				     .wr.atomic = { raddr, compare_add, swap, rkey } };
}

/* One atomic on c, waited for: the original value it brought back, or false. */
static bool one_atomic(struct conn *c, struct region *local, enum ibv_wr_opcode opcode,
		       uint64_t raddr, uint32_t rkey, uint64_t compare_add, uint64_t swap,
		       uint64_t *orig)
{
	struct ibv_sge sge = { (uintptr_t)local->p, 8, local->mr->lkey };
	struct ibv_send_wr wr = atomic_wr(9, &sge, opcode, raddr, rkey, compare_add, swap);
	enum ibv_wc_opcode want = opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP
								       : IBV_WC_FETCH_ADD;
	struct ibv_wc wc;

	if (post_wr(&c->a, &wr) < 0 || next_wc(&c->a, &wc, "an atomic") < 0)
		return false;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != want || wc.byte_len != 8)
		return e2e_mismatch("atomic: %s, opcode %d, byte_len %u",
				    rocemu_wc_status_str(wc.status), (int)wc.opcode, wc.byte_len);
	memcpy(orig, local->p, 8);
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The counter moved by exactly the adds, and the originals the adds saw are exactly the
 * values it went through, each once: every add was executed once, none twice. */
static bool expect_sum(const struct region *counter, uint64_t start, const struct region *local)
{
	uint64_t end, *seen = malloc(2 * ADDS_PER_QP * sizeof(*seen));
	bool ok = true;

	if (!seen)
		return e2e_mismatch("out of memory");
	memcpy(&end, counter->p, 8);
	memcpy(seen, local[0].p, ADDS_PER_QP * 8);
	memcpy(seen + ADDS_PER_QP, local[1].p, ADDS_PER_QP * 8);
	qsort(seen, 2 * ADDS_PER_QP, sizeof(*seen), cmp_u64);
	for (uint64_t i = 0; ok && i < 2 * ADDS_PER_QP; i++)
		ok = seen[i] == start + i * ADD_STEP;
	if (end != start + 2 * ADDS_PER_QP * ADD_STEP || !ok) {
		free(seen);
		return e2e_mismatch("counter 0x%llx -> 0x%llx after %d FETCH_ADDs of %d (expected "
				    "0x%llx), originals %s", (unsigned long long)start,
				    (unsigned long long)end, 2 * ADDS_PER_QP, ADD_STEP,
				    (unsigned long long)(start + 2 * ADDS_PER_QP * ADD_STEP),
				    ok ? "each once" : "not each value once");
	}
	free(seen);
	e2e_note("%d FETCH_ADDs from two QPs: the counter moved by exactly %d, every original "
		 "value seen once", 2 * ADDS_PER_QP, 2 * ADDS_PER_QP * ADD_STEP);
	return true;
}

/* ADDS_PER_QP FETCH_ADDs from each of two QPs into one counter on B, ADDS_IN_FLIGHT at a
 * time on each: the counter ends exactly ADD_STEP times their number higher, whatever the
 * network did, and the original values the two saw are all different. */
static bool counted_adds(struct env *e, struct region *counter)
{
	struct conn_opts o = default_opts();
	struct region local[2] = { { 0 }, { 0 } };
	struct conn c[2];
	uint64_t posted[2] = { 0, 0 }, done[2] = { 0, 0 }, start;
	bool ok = false;

	o.access_b = IBV_ACCESS_REMOTE_ATOMIC;
	o.timeout_a = 10;
	memset(c, 0, sizeof(c));
	memcpy(&start, counter->p, 8);
	if (region_open(&local[0], &e->a, ADDS_PER_QP * 8, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&local[1], &e->a, ADDS_PER_QP * 8, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    conn_open(e, &o, &c[0]) < 0 || conn_open(e, &o, &c[1]) < 0)
		goto out;
	while (done[0] + done[1] < 2 * ADDS_PER_QP) {
		for (int q = 0; q < 2; q++) {
			struct ibv_wc wc;

			while (posted[q] < ADDS_PER_QP && posted[q] - done[q] < ADDS_IN_FLIGHT) {
				struct ibv_sge sge = { (uintptr_t)(local[q].p + posted[q] * 8), 8,
						       local[q].mr->lkey };
				struct ibv_send_wr wr = atomic_wr(posted[q], &sge,
								  IBV_WR_ATOMIC_FETCH_AND_ADD,
								  (uintptr_t)counter->p,
								  counter->mr->rkey, ADD_STEP, 0);

				if (post_wr(&c[q].a, &wr) < 0)
					goto out;
				posted[q]++;
			}
			if (done[q] == posted[q] || next_wc(&c[q].a, &wc, "a FETCH_ADD") < 0)
				continue;
			if (wc.status != IBV_WC_SUCCESS || wc.wr_id != done[q]) {
				e2e_mismatch("FETCH_ADD %llu on QP %d: %s for wr_id %llu",
					     (unsigned long long)done[q], q,
					     rocemu_wc_status_str(wc.status),
					     (unsigned long long)wc.wr_id);
				goto out;
			}
			done[q]++;
		}
	}
	ok = expect_sum(counter, start, local);
out:
	conn_close(&c[0]);
	conn_close(&c[1]);
	region_close(&local[0]);
	region_close(&local[1]);
	return ok;
}

/* CMP_SWAP that matches and one that does not, then a FETCH_ADD: each brings back the
 * value before it, and only the matching swap changes the word. */
static bool swap_and_add(struct env *e, struct region *local, struct region *counter)
{
	const uint64_t swap = 0x0102030405060708ull;
	struct conn_opts o = default_opts();
	uint64_t orig[3], now;
	struct conn c;
	bool ok;

	o.access_b = IBV_ACCESS_REMOTE_ATOMIC;
	memcpy(counter->p, &(uint64_t){ COUNTER_START }, 8);
	if (conn_open(e, &o, &c) < 0)
		return false;
	ok = one_atomic(&c, local, IBV_WR_ATOMIC_CMP_AND_SWP, (uintptr_t)counter->p,
			counter->mr->rkey, COUNTER_START, swap, &orig[0]) &&
	     one_atomic(&c, local, IBV_WR_ATOMIC_CMP_AND_SWP, (uintptr_t)counter->p,
			counter->mr->rkey, COUNTER_START, 77, &orig[1]) &&
	     one_atomic(&c, local, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)counter->p,
			counter->mr->rkey, 5, 0, &orig[2]);
	conn_close(&c);
	memcpy(&now, counter->p, 8);
	if (ok && (orig[0] != COUNTER_START || orig[1] != swap || orig[2] != swap ||
		   now != swap + 5))
		return e2e_mismatch("originals 0x%llx 0x%llx 0x%llx, word 0x%llx",
				    (unsigned long long)orig[0], (unsigned long long)orig[1],
				    (unsigned long long)orig[2], (unsigned long long)now);
	if (ok)
		e2e_note("CMP_SWAP matching, CMP_SWAP not matching, FETCH_ADD: originals and word "
			 "as verbs says");
	return ok;
}

/* Every way an atomic is refused: by the library (misaligned, no room for the original),
 * by the peer with rxe's status; the word never changes. */
static bool refused_atomics(struct env *e, struct region *local, struct region *counter,
			    struct region *plain)
{
	struct conn_opts o = default_opts(), no_qp = default_opts();
	struct ibv_sge sge = { (uintptr_t)local->p, 8, local->mr->lkey };
	struct ibv_sge short_sge = { (uintptr_t)local->p, 4, local->mr->lkey };
	struct ibv_send_wr bad_align = atomic_wr(1, &sge, IBV_WR_ATOMIC_FETCH_AND_ADD,
						 (uintptr_t)counter->p + 4, counter->mr->rkey, 1, 0);
	struct ibv_send_wr bad_len = atomic_wr(1, &short_sge, IBV_WR_ATOMIC_FETCH_AND_ADD,
					       (uintptr_t)counter->p, counter->mr->rkey, 1, 0);
	struct ibv_send_wr no_atomic_mr = atomic_wr(1, &sge, IBV_WR_ATOMIC_FETCH_AND_ADD,
						    (uintptr_t)plain->p, plain->mr->rkey, 1, 0);
	struct ibv_send_wr past_end = atomic_wr(1, &sge, IBV_WR_ATOMIC_CMP_AND_SWP,
						(uintptr_t)counter->p + counter->len,
						counter->mr->rkey, 0, 1);
	struct ibv_send_wr ok_wr = atomic_wr(1, &sge, IBV_WR_ATOMIC_FETCH_AND_ADD,
					     (uintptr_t)counter->p, counter->mr->rkey, 1, 0);
	struct ibv_send_wr *bad = NULL;
	struct conn c;
	uint64_t before;
	int err1 = 0, err2 = 0;

	o.access_b = IBV_ACCESS_REMOTE_ATOMIC;
	memcpy(&before, counter->p, 8);
	if (conn_open(e, &o, &c) < 0)
		return false;
	err1 = rocemu_post_send(c.a.qp, &bad_align, &bad);
	err2 = rocemu_post_send(c.a.qp, &bad_len, &bad);
	conn_close(&c);
	if (err1 != EINVAL || err2 != EINVAL)
		return e2e_mismatch("post_send of a misaligned atomic: %d, of a 4-byte SGE: %d "
				    "(expected EINVAL)", err1, err2);
	e2e_note("misaligned and 4-byte atomics -> EINVAL at post_send");
	return refused_request(e, &o, "FETCH_ADD to an MR without remote atomic", &no_atomic_mr,
			       IBV_WC_REM_ACCESS_ERR) &&
	       refused_request(e, &o, "CMP_SWAP just past the MR", &past_end,
			       IBV_WC_REM_ACCESS_ERR) &&
	       refused_request(e, &no_qp, "FETCH_ADD to a QP without remote atomic", &ok_wr,
			       IBV_WC_REM_INV_REQ_ERR) &&
	       (memcmp(counter->p, &before, 8) == 0 ||
		e2e_mismatch("the word changed under refused atomics"));
}

#define LOCK_ROUNDS 100

/* A writer of the spin lock test: its QP, its own 8-byte buffer and where it stands. */
struct lock_writer {
	struct conn c;
	struct region *local;
	uint64_t id;
	int step;                 /* 0 take the lock, 1 read, 2 write, 3 release */
	int rounds;
};

/* One blocking request of a writer on its QP; the original value for an atomic. */
static bool writer_request(struct lock_writer *w, struct ibv_send_wr *wr, uint64_t *value)
{
	struct ibv_wc wc;

	if (post_wr(&w->c.a, wr) < 0 || next_wc(&w->c.a, &wc, "a lock step") < 0)
		return false;
	if (wc.status != IBV_WC_SUCCESS)
		return e2e_mismatch("writer %llu, step %d: %s", (unsigned long long)w->id, w->step,
				    rocemu_wc_status_str(wc.status));
	memcpy(value, w->local->p, 8);
	return true;
}

/* The writer's next step: take the lock (CMP_SWAP 0 -> id, again until it gets it), read
 * the shared word, write it back plus one, release (CMP_SWAP id -> 0, which must find id). */
static bool writer_step(struct lock_writer *w, struct region *shared)
{
	struct ibv_sge sge = { (uintptr_t)w->local->p, 8, w->local->mr->lkey };
	uint64_t lock = (uintptr_t)shared->p, word = lock + 64, value = 0;
	struct ibv_send_wr wr;

	switch (w->step) {
	case 0:
		wr = atomic_wr(1, &sge, IBV_WR_ATOMIC_CMP_AND_SWP, lock, shared->mr->rkey, 0, w->id);
		break;
	case 1:
		wr = read_wr(1, &sge, 1, word, shared->mr->rkey);
		break;
	case 2:
		value = *(uint64_t *)w->local->p + 1;
		memcpy(w->local->p, &value, 8);
		wr = write_wr(1, &sge, 1, word, shared->mr->rkey);
		break;
	default:
		wr = atomic_wr(1, &sge, IBV_WR_ATOMIC_CMP_AND_SWP, lock, shared->mr->rkey, w->id, 0);
		break;
	}
	if (!writer_request(w, &wr, &value))
		return false;
	if (w->step == 3 && value != w->id)
		return e2e_mismatch("writer %llu released a lock held by %llu",
				    (unsigned long long)w->id, (unsigned long long)value);
	if (w->step == 0 && value != 0)
		return true;          /* the other one holds it: try again */
	w->step = (w->step + 1) % 4;
	w->rounds += w->step == 0;
	return true;
}

/* Two writers on two QPs take turns a step at a time, each incrementing a shared word
 * LOCK_ROUNDS times under a CMP_SWAP spin lock with READ and WRITE: no increment is lost. */
static bool spin_lock(struct env *e, struct region *shared)
{
	struct conn_opts o = default_opts();
	struct region local[2] = { { 0 }, { 0 } };
	struct lock_writer w[2];
	uint64_t word;
	bool ok = false;

	memset(w, 0, sizeof(w));
	memset(shared->p, 0, 128);
	o.access_b = IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	o.timeout_a = 10;
	for (int i = 0; i < 2; i++) {
		w[i].local = &local[i];
		w[i].id = 0xa0 + (uint64_t)i;
		if (region_open(&local[i], &e->a, 4096, SEED_TARGET, ACCESS_TARGET) < 0 ||
		    conn_open(e, &o, &w[i].c) < 0)
			goto out;
	}
	while (w[0].rounds < LOCK_ROUNDS || w[1].rounds < LOCK_ROUNDS)
		for (int i = 0; i < 2; i++)
			if (w[i].rounds < LOCK_ROUNDS && !writer_step(&w[i], shared))
				goto out;
	memcpy(&word, shared->p + 64, 8);
	ok = word == 2 * LOCK_ROUNDS ||
	     e2e_mismatch("the shared word is %llu after %d locked increments",
			  (unsigned long long)word, 2 * LOCK_ROUNDS);
	if (ok)
		e2e_note("two writers under a CMP_SWAP spin lock: %d increments, none lost",
			 2 * LOCK_ROUNDS);
out:
	for (int i = 0; i < 2; i++) {
		conn_close(&w[i].c);
		region_close(&local[i]);
	}
	return ok;
}

static void case_atomics(struct env *e)
{
	struct region local = { 0 }, counter = { 0 }, shared = { 0 };

	if (region_open(&local, &e->a, 4096, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    region_open(&counter, &e->b, 4096, SEED_OTHER, ACCESS_ATOMIC) == 0 &&
	    region_open(&shared, &e->b, 4096, SEED_OTHER,
			ACCESS_ATOMIC | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE) == 0 &&
	    swap_and_add(e, &local, &counter) && counted_adds(e, &counter) &&
	    spin_lock(e, &shared))
		e2e_note("done");
	region_close(&local);
	region_close(&counter);
	region_close(&shared);
}

static void case_atomic_errors(struct env *e)
{
	struct region local = { 0 }, counter = { 0 }, plain = { 0 };

	if (region_open(&local, &e->a, 4096, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    region_open(&counter, &e->b, 4096, SEED_OTHER, ACCESS_ATOMIC) == 0 &&
	    region_open(&plain, &e->b, 4096, SEED_OTHER, ACCESS_TARGET) == 0 &&
	    refused_atomics(e, &local, &counter, &plain) &&
	    expect_pat(plain.p, plain.len, SEED_OTHER, "the MR without remote atomic"))
		e2e_note("nothing changed");
	region_close(&local);
	region_close(&counter);
	region_close(&plain);
}

/* ---- mixed streams and big messages ---- */

#define MIXED_ROUNDS 8
#define MIXED_LEN    10000

/* Rounds of WRITE, READ (of what the WRITE put there), SEND and FETCH_ADD posted at once on
 * one QP: every completion in posting order, each with its own opcode, and the bytes
 * where each operation put them. */
static void case_mixed(struct env *e)
{
	static const enum ibv_wc_opcode want[4] = { IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
						    IBV_WC_SEND, IBV_WC_FETCH_ADD };
	struct conn_opts o = default_opts();
	struct region src = { 0 }, back = { 0 }, dst = { 0 }, recv = { 0 }, word = { 0 };
	struct ibv_send_wr wr[4 * MIXED_ROUNDS];
	struct ibv_sge sge[4 * MIXED_ROUNDS];
	struct conn c;
	uint64_t counter = 0;
	int n = 0;

	o.access_b |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (region_open(&src, &e->a, MIXED_LEN, SEED_SOURCE, ACCESS_TARGET) < 0 ||
	    region_open(&back, &e->a, MIXED_ROUNDS * MIXED_LEN, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&dst, &e->b, MIXED_LEN, SEED_TARGET, ACCESS_READABLE | ACCESS_TARGET) < 0 ||
	    region_open(&recv, &e->b, MIXED_ROUNDS * MIXED_LEN, SEED_TARGET, ACCESS_TARGET) < 0 ||
	    region_open(&word, &e->b, 4096, SEED_OTHER, ACCESS_ATOMIC) < 0 ||
	    conn_open(e, &o, &c) < 0)
		goto out;
	memset(word.p, 0, 8);
	for (int r = 0; r < MIXED_ROUNDS; r++) {
		struct ibv_sge in = { (uintptr_t)(recv.p + r * MIXED_LEN), MIXED_LEN, recv.mr->lkey };

		if (post_recv(&c.b, (uint64_t)r, &in, 1) < 0)
			goto close;
		sge[n] = (struct ibv_sge){ (uintptr_t)src.p, MIXED_LEN, src.mr->lkey };
		wr[n] = write_wr((uint64_t)n, &sge[n], 1, (uintptr_t)dst.p, dst.mr->rkey);
		n++;
		sge[n] = (struct ibv_sge){ (uintptr_t)(back.p + r * MIXED_LEN), MIXED_LEN,
					   back.mr->lkey };
		wr[n] = read_wr((uint64_t)n, &sge[n], 1, (uintptr_t)dst.p, dst.mr->rkey);
		n++;
		sge[n] = (struct ibv_sge){ (uintptr_t)src.p, MIXED_LEN, src.mr->lkey };
		wr[n] = send_wr((uint64_t)n, &sge[n], 1, IBV_WR_SEND);
		n++;
		sge[n] = (struct ibv_sge){ (uintptr_t)(back.p + r * MIXED_LEN), 8, back.mr->lkey };
		wr[n] = atomic_wr((uint64_t)n, &sge[n], IBV_WR_ATOMIC_FETCH_AND_ADD,
				  (uintptr_t)word.p, word.mr->rkey, 1, 0);
		n++;
	}
	for (int i = 0; i < n; i++)
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	for (int i = 0; i < n; i += QP_DEPTH) {
		struct ibv_send_wr *last = &wr[i + QP_DEPTH - 1 < n ? i + QP_DEPTH - 1 : n - 1];
		struct ibv_send_wr *rest = last->next;

		last->next = NULL;
		if (post_wr(&c.a, &wr[i]) < 0)
			goto close;
		last->next = rest;
		for (int k = i; k <= last - wr; k++) {
			struct ibv_wc wc;

			if (next_wc(&c.a, &wc, "the mixed stream") < 0)
				goto close;
			if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)k ||
			    wc.opcode != want[k % 4]) {
				e2e_mismatch("request %d: %s, wr_id %llu, opcode %d (expected opcode "
					     "%d)", k, rocemu_wc_status_str(wc.status),
					     (unsigned long long)wc.wr_id, (int)wc.opcode,
					     (int)want[k % 4]);
				goto close;
			}
			if (k % 4 == 3) {
				memcpy(&counter, back.p + (k / 4) * MIXED_LEN, 8);
				if (counter != (uint64_t)(k / 4)) {
					e2e_mismatch("FETCH_ADD %d saw %llu", k / 4,
						     (unsigned long long)counter);
					goto close;
				}
			}
		}
	}
	for (int r = 0; r < MIXED_ROUNDS; r++) {
		struct ibv_wc wc;

		if (!expect_wc(&c.b, (uint64_t)r, IBV_WC_SUCCESS, r ? "and the next" : "B's receives",
			       &wc) ||
		    !expect_pat(recv.p + r * MIXED_LEN, MIXED_LEN, SEED_SOURCE, "a SEND's receive") ||
		    !expect_range(back.p + r * MIXED_LEN, 8, MIXED_LEN, SEED_SOURCE,
				  "a READ's destination after the FETCH_ADD's 8 bytes"))
			goto close;
	}
	e2e_note("%d rounds of WRITE, READ, SEND and FETCH_ADD on one QP completed in order, "
		 "each where it belongs", MIXED_ROUNDS);
close:
	conn_close(&c);
out:
	region_close(&src);
	region_close(&back);
	region_close(&dst);
	region_close(&recv);
	region_close(&word);
}

#define BIG_LEN (64u << 20)

/* A 64 MiB SEND and a 64 MiB READ, each from two SGEs into three. */
static void case_big(struct env *e)
{
	struct conn_opts o = default_opts();
	struct region a = { 0 }, b = { 0 };
	struct ibv_sge out[2], in[3];
	struct ibv_send_wr wr;
	struct conn c;

	o.access_b |= IBV_ACCESS_REMOTE_READ;
	o.timeout_a = 10;
	if (region_open(&a, &e->a, BIG_LEN, SEED_SOURCE, ACCESS_TARGET) < 0 ||
	    region_open(&b, &e->b, BIG_LEN, SEED_TARGET, ACCESS_READABLE | ACCESS_TARGET) < 0 ||
	    conn_open(e, &o, &c) < 0)
		goto out;
	split_sges(out, 2, &a, 0, BIG_LEN);
	split_sges(in, 3, &b, 0, BIG_LEN);
	wr = send_wr(1, out, 2, IBV_WR_SEND);
	if (post_recv(&c.b, 2, in, 3) < 0 || post_wr(&c.a, &wr) < 0 ||
	    !expect_wc(&c.a, 1, IBV_WC_SUCCESS, "a 64 MiB SEND", NULL) ||
	    !expect_wc(&c.b, 2, IBV_WC_SUCCESS, "B's receive", NULL) ||
	    !expect_pat(b.p, BIG_LEN, SEED_SOURCE, "B's receive buffer"))
		goto close;
	fill_pat(b.p, BIG_LEN, SEED_OTHER);
	split_sges(in, 3, &a, 0, BIG_LEN);
	wr = read_wr(3, in, 3, (uintptr_t)b.p, b.mr->rkey);
	if (post_wr(&c.a, &wr) == 0 &&
	    expect_wc(&c.a, 3, IBV_WC_SUCCESS, "a 64 MiB READ", NULL) &&
	    expect_pat(a.p, BIG_LEN, SEED_OTHER, "the READ's destination"))
		e2e_note("byte-exact");
close:
	conn_close(&c);
out:
	region_close(&a);
	region_close(&b);
}

/* ---- other-process: a forked child owns the target MR ---- */

/* What the child tells the parent: first its MR (ok = 1) or why it has none, then what
 * its buffer holds once the parent has tried to write into it. */
struct child_msg {
	int32_t ok;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	uint64_t changed_at;      /* the first changed offset, or len */
	char why[256];
};

static void child_offer(const char *sock_b, struct node *b, struct region *r,
			struct child_msg *m)
{
	if (node_open(b, "B (child)", sock_b) == 0 &&
	    region_open(r, b, REGION, SEED_TARGET, ACCESS_TARGET) == 0)
		*m = (struct child_msg){ .ok = 1, .rkey = r->mr->rkey, .addr = (uintptr_t)r->p,
					 .len = r->len };
	snprintf(m->why, sizeof(m->why), "%.*s", (int)sizeof(m->why) - 1, e2e_line());
}

/* The child: its own context on B, opened after the fork. */
static int child_main(const char *sock_b, int out, int in)
{
	struct node b = { 0 };
	struct region r = { 0 };
	struct child_msg m = { 0 };
	char go;

	child_offer(sock_b, &b, &r, &m);
	if (e2e_write_full(out, &m, sizeof(m)) == 0 && m.ok &&
	    e2e_read_full(in, &go, 1, CHILD_WAIT_MS) == 0) {
		m.changed_at = pat_mismatch(r.p, 0, r.len, SEED_TARGET);
		e2e_write_full(out, &m, sizeof(m));
	}
	region_close(&r);
	node_close(&b);
	return e2e_case_failed() ? 1 : 0;
}

/* The parent aims at the child's MR through its own QP on B: a PD of another client. */
static void parent_writes(struct env *e, int in, int out)
{
	const struct conn_opts o = default_opts();
	struct region src = { 0 };
	struct child_msg m = { 0 };

	if (e2e_read_full(in, &m, sizeof(m), WAIT_MS) < 0) {
		e2e_timeout("no word from the child within %d ms", WAIT_MS);
		return;
	}
	if (!m.ok || m.len != REGION) {
		e2e_error("the child has no MR to offer: %.*s", (int)sizeof(m.why) - 1, m.why);
		return;
	}
	if (region_open(&src, &e->a, REGION, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0)
		one_write(e, &o, &(struct shot){ "write into the child's MR", src.p, REGION,
						 src.mr->lkey, m.addr, m.rkey,
						 IBV_WC_REM_ACCESS_ERR });
	region_close(&src);
	if (e2e_write_full(out, "g", 1) < 0 || e2e_read_full(in, &m, sizeof(m), WAIT_MS) < 0)
		e2e_timeout("no verdict from the child within %d ms", WAIT_MS);
	else if (m.changed_at != m.len)
		e2e_mismatch("the child's buffer changed at offset %llu",
			     (unsigned long long)m.changed_at);
	else
		e2e_note("child's buffer unchanged");
}

/* Waits (bounded) for the child; kills it if it does not end in time. */
static void reap(pid_t pid)
{
	int status = 0;

	for (int i = 0; i < WAIT_MS / 50; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (i + 1 == WAIT_MS / 50) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			e2e_timeout("the child did not exit within %d ms; killed it", WAIT_MS);
			return;
		}
		poll(NULL, 0, 50);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		e2e_mismatch("the child ended with status 0x%x", (unsigned)status);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void case_other_process(struct env *e)
{
	int up[2] = { -1, -1 }, down[2] = { -1, -1 };
	pid_t pid = -1;

	if (pipe2(up, O_CLOEXEC) == 0 && pipe2(down, O_CLOEXEC) == 0) {
		fflush(NULL);
		pid = fork();
	}
	if (pid == 0) {
		close_fd(&up[0]);
		close_fd(&down[1]);
		_exit(child_main(e->sock_b, up[1], down[0]));
	}
	if (pid < 0)
		e2e_error("pipe or fork: %s", strerror(errno));
	close_fd(&up[1]);
	close_fd(&down[0]);
	if (pid > 0 && env_open(e) == 0)
		parent_writes(e, up[0], down[1]);
	close_fd(&down[1]);   /* a child still waiting for the go-ahead sees EOF */
	close_fd(&up[0]);
	if (pid > 0)
		reap(pid);
}

/* A long message whose PSNs cross 0xffffff -> 0; the shell may inject loss meanwhile, so
 * retransmissions cross it too. */
static void case_psn_wrap(struct env *e)
{
	struct conn_opts o = default_opts();
	struct region src = { 0 }, dst = { 0 };

	o.psn_a = WRAP_START;
	if (region_open(&src, &e->a, WRAP_LEN, SEED_SOURCE, IBV_ACCESS_LOCAL_WRITE) == 0 &&
	    region_open(&dst, &e->b, WRAP_LEN, SEED_TARGET, ACCESS_TARGET) == 0 &&
	    one_write(e, &o, &(struct shot){ "4 MiB from PSN 0xffff80 across the wrap", src.p,
					     WRAP_LEN, src.mr->lkey, (uintptr_t)dst.p,
					     dst.mr->rkey, IBV_WC_SUCCESS }) &&
	    expect_pat(dst.p, WRAP_LEN, SEED_SOURCE, "target"))
		e2e_note("byte-exact");
	region_close(&src);
	region_close(&dst);
}

/* ---- orphan: a client whose daemon goes away under it ---- */

/* Opens SOCK with a PD and a CQ, says "ready", waits for a line on stdin (the shell stops
 * the daemon meanwhile), then expects every call to fail with EPIPE, not hang or crash. */
static int orphan(const char *sock)
{
	struct node n = { 0 };
	struct rocemu_cq *cq;
	struct pollfd in = { .fd = 0, .events = POLLIN };
	char line[16];
	int err;

	g_case = "orphan";
	if (node_open(&n, "the daemon", sock) < 0 || !(cq = rocemu_create_cq(n.ctx, 4)))
		return e2e_report(g_case, "");
	printf("ready\n");
	fflush(stdout);
	if (poll(&in, 1, ORPHAN_WAIT_MS) != 1 || !fgets(line, sizeof(line), stdin)) {
		e2e_timeout("no go-ahead on stdin within %d ms", ORPHAN_WAIT_MS);
		return e2e_report(g_case, "");
	}
	err = rocemu_alloc_pd(n.ctx) ? 0 : errno;
	if (err == EPIPE)
		e2e_note("alloc_pd: EPIPE (%s)", rocemu_last_error(n.ctx));
	else
		e2e_mismatch("alloc_pd after the daemon went away: %s", err ? strerror(err) : "succeeded");
	err = rocemu_wait_cq(cq, 2000);
	if (err == EPIPE)
		e2e_note("wait_cq: EPIPE");
	else
		e2e_mismatch("wait_cq after the daemon went away: %s", err ? strerror(err) : "returned 0");
	rocemu_close(n.ctx);
	n.ctx = NULL;
	return e2e_report(g_case, "");
}

/* ---- hold: pinned memory for the SIGKILL test ---- */

static bool parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return false;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	default: return false;
	}
	if ((shift && end[1]) || v == 0 || v > (SIZE_MAX >> shift))
		return false;
	*out = (size_t)v << shift;
	return true;
}

/* Registers size bytes (the fill touches every page), says "ready" and waits to be
 * killed. Returns only on failure. */
static int hold(const char *sock, const char *size_arg)
{
	struct node n = { 0 };
	struct region r = { 0 };
	size_t size;

	g_case = "hold";
	if (!parse_size(size_arg, &size)) {
		fprintf(stderr, PROG ": hold: bad size '%s' (bytes, K, M or G)\n", size_arg);
		return 2;
	}
	if (node_open(&n, "the daemon", sock) == 0 &&
	    region_open(&r, &n, size, SEED_TARGET, ACCESS_TARGET) == 0) {
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	region_close(&r);
	node_close(&n);
	return e2e_report(g_case, "");
}

/* ---- main ---- */

static const struct test_case {
	const char *name;
	void (*run)(struct env *e);
	bool opens_env;   /* the case opens the contexts itself (after forking) */
} cases[] = {
	{ "stale-rkey", case_stale_rkey, false },
	{ "no-remote-write", case_no_remote_write, false },
	{ "other-pd", case_other_pd, false },
	{ "other-process", case_other_process, true },
	{ "qp-no-remote-write", case_qp_no_remote_write, false },
	{ "foreign-lkey", case_foreign_lkey, false },
	{ "flush", case_flush, false },
	{ "canaries", case_canaries, false },
	{ "sparse-target", case_sparse_target, false },
	{ "write-imm", case_write_imm, false },
	{ "zero-length", case_zero_length, false },
	{ "rnr-recover", case_rnr_recover, false },
	{ "psn-wrap", case_psn_wrap, false },
	{ "send-recv", case_send_recv, false },
	{ "send-errors", case_send_errors, false },
	{ "send-rnr", case_send_rnr, false },
	{ "read", case_read, false },
	{ "read-errors", case_read_errors, false },
	{ "read-refused", case_read_refused, false },
	{ "inline", case_inline, false },
	{ "srq", case_srq, false },
	{ "events", case_events, false },
	{ "mixed", case_mixed, false },
	{ "big", case_big, false },
	{ "atomics", case_atomics, false },
	{ "atomic-errors", case_atomic_errors, false },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " CASE SOCK_A SOCK_B\n"
		   "       " PROG " hold SOCK SIZE\n"
		   "       " PROG " orphan SOCK\n"
		   "CASE is one of:");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(f, " %s", cases[i].name);
	fprintf(f, "\n");
}

static int run_case(const struct test_case *tc, const char *sock_a, const char *sock_b)
{
	struct env e = { .sock_a = sock_a, .sock_b = sock_b };

	g_case = tc->name;
	if (tc->opens_env || env_open(&e) == 0)
		tc->run(&e);
	env_close(&e);
	return e2e_report(g_case, "");
}

int main(int argc, char **argv)
{
	/* A daemon that goes away must show up as an error, not kill us silently. */
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && strcmp(argv[1], "hold") == 0)
		return hold(argv[2], argv[3]);
	if (argc == 3 && strcmp(argv[1], "orphan") == 0)
		return orphan(argv[2]);
	for (size_t i = 0; argc == 4 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(argv[1], cases[i].name) == 0)
			return run_case(&cases[i], argv[2], argv[3]);
	usage(stderr);
	return 2;
}
