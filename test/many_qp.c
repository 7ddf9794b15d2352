/* Many RC QPs in one process, written against <infiniband/verbs.h> and linked against
 * libibverbs alone (run under rocemu-run, or on rxe as it is). The client WRITEs one
 * message on every QP at once, all outstanding together, for each round; the server then
 * checks every QP's region byte for byte against that round's pattern, and the canary
 * bytes after each region, before the next round starts. The client prints the goodput
 * of the rounds (from the first post to the last completion of each, not the filling of
 * the buffers nor the checks).
 *   many_qp [-q QPS] [-s BYTES] [-n ROUNDS] [-p PORT] [-x GID_INDEX] server
 *   many_qp [-q QPS] [-s BYTES] [-n ROUNDS] [-l] [-r] [-p PORT] [-x GID_INDEX] client SERVER
 * -l (client): the rounds go back to back, every one with the last round's pattern, and
 * only the last is checked: a load that does not pause.
 * -r (client): RDMA READs instead: the server fills its regions with the round's pattern,
 * the client READs every QP's region at once and checks what arrived (canaries too).
 * SERVER may be IPv4 or IPv6. Exit 0 when every round arrived intact; 1 when one did
 * not; 2 on a setup error. */
#include <getopt.h>
#include <poll.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/peer_link.h"

#define CANARY 64
#define CANARY_BYTE 0xee
#define MAX_QPS 1024
#define WAIT_SECONDS 60

struct qp_info {
	uint32_t qpn, psn;
};

struct side_info {
	uint32_t qps, bytes, rounds, mtu, rkey, reads;
	uint64_t addr;
	union ibv_gid gid;
};

struct options {
	uint32_t qps, bytes, rounds;
	uint16_t port;
	int gid_index;
	bool client;
	bool last_only;              /* -l: rounds back to back, the last one checked */
	bool reads;                  /* -r: the client READs (the server says it from the client) */
	const char *server;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *channel;
static struct ibv_cq *cq;
static struct ibv_qp *qps[MAX_QPS];
static struct ibv_mr *mr;
static uint8_t *buf;
static size_t stride;                /* a region and its canary */
static int sock = -1;

static void xfer(bool out, void *p, size_t n)
{
	peer_xfer(sock, out, p, n);
}

static uint8_t pattern(uint32_t q, uint32_t round, size_t i)
{
	return (uint8_t)(((uint32_t)i * 2654435761u) >> 24 ^ q * 7 ^ round * 13 ^ 0x5a);
}

static uint8_t *region(uint32_t q)
{
	return buf + (size_t)q * stride;
}

static void setup(const struct options *o)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 1,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	size_t total;

	stride = ((size_t)o->bytes + CANARY + 63) & ~(size_t)63;
	total = stride * o->qps;
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (list)
		ibv_free_device_list(list);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	channel = pd ? ibv_create_comp_channel(ctx) : NULL;
	cq = channel ? ibv_create_cq(ctx, (int)o->qps * 2, NULL, channel, 0) : NULL;
	if (!cq || ibv_req_notify_cq(cq, 0))
		peer_die("device, PD, completion channel or CQ");
	a.send_cq = a.recv_cq = cq;
	for (uint32_t q = 0; q < o->qps; q++)
		if (!(qps[q] = ibv_create_qp(pd, &a)))
			peer_die("ibv_create_qp");
	buf = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	if (!buf)
		peer_die("buffer");
	memset(buf, CANARY_BYTE, total);
	mr = ibv_reg_mr(pd, buf, total, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						IBV_ACCESS_REMOTE_READ);
	if (!mr)
		peer_die("ibv_reg_mr");
}

/* The client says how many QPs, bytes and rounds; both send their side and their QPs,
 * connect each QP to its namesake, and say when they have. */
static void exchange_and_connect(struct options *o, struct side_info *theirs)
{
	struct ibv_port_attr port;
	struct side_info mine = { .qps = o->qps, .bytes = o->bytes, .rounds = o->rounds,
				  .rkey = mr->rkey, .addr = (uintptr_t)buf, .reads = o->reads };
	static struct qp_info me[MAX_QPS], peer[MAX_QPS];

	if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, o->gid_index, &mine.gid))
		peer_die("port or GID");
	mine.mtu = port.active_mtu;
	for (uint32_t q = 0; q < o->qps; q++)
		me[q] = (struct qp_info){ .qpn = qps[q]->qp_num, .psn = (q * 40503u) & 0xffffff };
	xfer(o->client, o->client ? &mine : theirs, sizeof(mine));
	xfer(!o->client, o->client ? theirs : &mine, sizeof(mine));
	if (theirs->qps != o->qps || theirs->bytes != o->bytes)
		peer_die("the other end has another QP count or size");
	if (!o->client)
		o->reads = theirs->reads;
	xfer(o->client, o->client ? me : peer, sizeof(me[0]) * o->qps);
	xfer(!o->client, o->client ? peer : me, sizeof(me[0]) * o->qps);
	for (uint32_t q = 0; q < o->qps; q++) {
		struct peer_rc rc = { .dest_qpn = peer[q].qpn, .rq_psn = peer[q].psn,
				      .sq_psn = me[q].psn, .dgid = theirs->gid,
				      .mtu = mine.mtu < theirs->mtu ? mine.mtu : theirs->mtu,
				      .gid_index = o->gid_index };

		peer_connect_rc(qps[q], &rc);
	}
	/* neither side sends before the other's QPs are all in RTR: a WRITE to a QP still
	 * in INIT is dropped, and only the requester's timer would notice */
	xfer(o->client, &(uint8_t){ 1 }, 1);
	xfer(!o->client, &(uint8_t){ 0 }, 1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fill_round(const struct options *o, uint32_t round)
{
	for (uint32_t q = 0; q < o->qps; q++)
		for (size_t i = 0; i < o->bytes; i++)
			region(q)[i] = pattern(q, round, i);
}

/* Sleeps on the completion channel (a second at most), as a program that leaves the CPU
 * to others does: one that spun on its CQ would take a core from the daemons. */
static void wait_for_completion(void)
{
	struct pollfd p = { .fd = channel->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (poll(&p, 1, 1000) <= 0)
		return;
	if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx))
		peer_die("ibv_get_cq_event");
	ibv_ack_cq_events(ev_cq, 1);
	if (ibv_req_notify_cq(ev_cq, 0))
		peer_die("ibv_req_notify_cq");
}

/* Every QP's WRITE of its region (or READ of the server's into it), all posted before any
 * is waited for. */
static bool transfer_round(const struct options *o, const struct side_info *peer,
			   uint32_t round)
{
	double deadline = now_s() + WAIT_SECONDS;
	uint32_t done = 0;

	for (uint32_t q = 0; q < o->qps; q++) {
		struct ibv_sge sge = { (uintptr_t)region(q), o->bytes, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = q, .sg_list = &sge, .num_sge = 1,
					  .opcode = o->reads ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { peer->addr + (uint64_t)q * stride, peer->rkey } };
		struct ibv_send_wr *bad;

		if (ibv_post_send(qps[q], &wr, &bad))
			peer_die("ibv_post_send");
	}
	while (done < o->qps && now_s() < deadline) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(cq, 32, wc);

		if (n == 0) {
			wait_for_completion();
			continue;
		}
		if (n < 0)
			peer_die("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				printf("FAIL round %u: QP %lu's %s completed with %s\n", round,
				       (unsigned long)wc[i].wr_id, o->reads ? "READ" : "WRITE",
				       ibv_wc_status_str(wc[i].status));
				return false;
			}
		}
		done += (uint32_t)n;
	}
	if (done < o->qps)
		printf("FAIL round %u: %u of %u %ss completed in %d s\n", round, done, o->qps,
		       o->reads ? "READ" : "WRITE", WAIT_SECONDS);
	return done == o->qps;
}

/* 0, or 1 + the first bad offset of the first bad region (canary included). */
static uint32_t check_round(const struct options *o, uint32_t round, uint32_t *bad_q)
{
	for (uint32_t q = 0; q < o->qps; q++) {
		const uint8_t *r = region(q);

		*bad_q = q;
		for (size_t i = 0; i < o->bytes; i++)
			if (r[i] != pattern(q, round, i))
				return (uint32_t)i + 1;
		for (size_t i = o->bytes; i < stride; i++)
			if (r[i] != CANARY_BYTE)
				return (uint32_t)i + 1;
	}
	return 0;
}

/* For WRITEs the server checks each round it is told of; for READs it fills it. */
static int serve(const struct options *o)
{
	uint32_t round, verdict[2] = { 0, 0 };

	for (;;) {
		xfer(false, &round, sizeof(round));
		if (round == UINT32_MAX)
			return 0;
		if (o->reads)
			fill_round(o, round);
		else
			verdict[0] = check_round(o, round, &verdict[1]);
		xfer(true, verdict, sizeof(verdict));
	}
}

/* The round's pattern in place before it moves: here for WRITEs, on the server for READs. */
static void prepare_round(const struct options *o, uint32_t round)
{
	uint32_t verdict[2];

	if (!o->reads) {
		fill_round(o, round);
		return;
	}
	xfer(true, &round, sizeof(round));
	xfer(false, verdict, sizeof(verdict));
}

/* The server checks a round of WRITEs; the client itself a round of READs. */
static uint32_t judge_round(const struct options *o, uint32_t round, uint32_t *bad_q)
{
	uint32_t verdict[2];

	if (o->reads)
		return check_round(o, round, bad_q);
	xfer(true, &round, sizeof(round));
	xfer(false, verdict, sizeof(verdict));
	*bad_q = verdict[1];
	return verdict[0];
}

static int run_client(const struct options *o, const struct side_info *peer)
{
	double spent = 0;
	int failed = 0;

	for (uint32_t round = 0; round < o->rounds && !failed; round++) {
		uint32_t bad, bad_q;
		double t0;

		/* -l checks the last round only: its pattern, filled once, is every round's */
		if (!o->last_only || round == 0)
			prepare_round(o, o->last_only ? o->rounds - 1 : round);
		t0 = now_s();
		if (!transfer_round(o, peer, round)) {
			failed = 1;
			break;
		}
		spent += now_s() - t0;
		if (o->last_only && round + 1 < o->rounds)
			continue;
		bad = judge_round(o, round, &bad_q);
		if (bad) {
			printf("FAIL round %u: QP %u's region differs at byte %u%s\n", round, bad_q,
			       bad - 1, bad - 1 >= o->bytes ? " (the canary after it)" : "");
			failed = 1;
		}
	}
	xfer(true, &(uint32_t){ UINT32_MAX }, sizeof(uint32_t));
	if (!failed)
		printf("ok %u QPs x %u rounds x %u bytes %s byte-exact%s, goodput %.1f MB/s\n",
		       o->qps, o->rounds, o->bytes, o->reads ? "read" : "written",
		       o->last_only ? " (the last round checked)" : "",
		       (double)o->qps * o->rounds * o->bytes / 1e6 / (spent > 0 ? spent : 1e-9));
	return failed;
}

static int usage(void)
{
	fprintf(stderr, "usage: many_qp [-q QPS] [-s BYTES] [-n ROUNDS] [-l] [-r] [-p PORT] "
			"[-x GID_INDEX] server | client SERVER\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct options o = { .qps = 128, .bytes = 256 << 10, .rounds = 4, .port = 18518 };
	struct side_info peer;
	int c;

	while ((c = getopt(argc, argv, "q:s:n:p:x:lr")) != -1) {
		long v = optarg ? strtol(optarg, NULL, 0) : 0;

		switch (c) {
		case 'l': o.last_only = true; break;
		case 'r': o.reads = true; break;
		case 'q': o.qps = (uint32_t)v; break;
		case 's': o.bytes = (uint32_t)v; break;
		case 'n': o.rounds = (uint32_t)v; break;
		case 'p': o.port = (uint16_t)v; break;
		case 'x': o.gid_index = (int)v; break;
		default: return usage();
		}
	}
	if (o.qps < 1 || o.qps > MAX_QPS || o.bytes < 1 || o.bytes > (64u << 20) || o.rounds < 1)
		return usage();
	if (optind < argc && !strcmp(argv[optind], "client") && optind + 1 < argc) {
		o.client = true;
		o.server = argv[optind + 1];
	} else if (optind >= argc || strcmp(argv[optind], "server")) {
		return usage();
	}
	peer_prog = "many_qp";
	setup(&o);
	sock = o.client ? peer_tcp_connect(o.server, o.port) : peer_tcp_accept(o.port);
	exchange_and_connect(&o, &peer);
	return o.client ? run_client(&o, &peer) : serve(&o);
}
