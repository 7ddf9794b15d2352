/* Many RC QPs in one process, written against <infiniband/verbs.h> and linked against
 * libibverbs alone (run under rocemu-run, or on rxe as it is). The client WRITEs one
 * message on every QP at once, all outstanding together, for each round; the server then
 * checks every QP's region byte for byte against that round's pattern, and the canary
 * bytes after each region, before the next round starts. The client prints the goodput
 * of the rounds (the time the WRITEs took, not the checks).
 *   many_qp [-q QPS] [-s BYTES] [-n ROUNDS] [-p PORT] [-x GID_INDEX] server
 *   many_qp [-q QPS] [-s BYTES] [-n ROUNDS] [-p PORT] [-x GID_INDEX] client SERVER_IPV4
 * Exit 0 when every round arrived intact; 1 when one did not; 2 on a setup error. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CANARY 64
#define CANARY_BYTE 0xee
#define MAX_QPS 1024
#define WAIT_SECONDS 60

struct qp_info {
	uint32_t qpn, psn;
};

struct side_info {
	uint32_t qps, bytes, rounds, mtu, rkey, pad;
	uint64_t addr;
	union ibv_gid gid;
};

struct options {
	uint32_t qps, bytes, rounds;
	uint16_t port;
	int gid_index;
	bool client;
	const char *server;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qps[MAX_QPS];
static struct ibv_mr *mr;
static uint8_t *buf;
static size_t stride;                /* a region and its canary */
static int sock = -1;

static void die(const char *what)
{
	fprintf(stderr, "many_qp: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(2);
}

static void xfer(bool out, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r = out ? write(sock, b, n) : read(sock, b, n);

		if (r <= 0)
			die(out ? "tcp write" : "tcp read (the other end is gone)");
		b += r;
		n -= (size_t)r;
	}
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
	cq = pd ? ibv_create_cq(ctx, (int)o->qps * 2, NULL, NULL, 0) : NULL;
	if (!cq)
		die("device, PD or CQ");
	a.send_cq = a.recv_cq = cq;
	for (uint32_t q = 0; q < o->qps; q++)
		if (!(qps[q] = ibv_create_qp(pd, &a)))
			die("ibv_create_qp");
	buf = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	if (!buf)
		die("buffer");
	memset(buf, CANARY_BYTE, total);
	mr = ibv_reg_mr(pd, buf, total, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");
}

static void to_rts(struct ibv_qp *qp, const struct qp_info *me, const struct qp_info *peer,
		   const struct side_info *mine, const struct side_info *theirs, int gid_index)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("to INIT");
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .dest_qp_num = peer->qpn, .rq_psn = peer->psn,
		.path_mtu = mine->mtu < theirs->mtu ? mine->mtu : theirs->mtu,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = theirs->gid, .sgid_index = (uint8_t)gid_index,
				      .hop_limit = 64 } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("to RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = me->psn, .timeout = 14,
				  .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("to RTS");
}

/* The client says how many QPs, bytes and rounds; both send their side and their QPs,
 * and connect each QP to its namesake. */
static void exchange_and_connect(struct options *o, struct side_info *theirs)
{
	struct ibv_port_attr port;
	struct side_info mine = { .qps = o->qps, .bytes = o->bytes, .rounds = o->rounds,
				  .rkey = mr->rkey, .addr = (uintptr_t)buf };
	static struct qp_info me[MAX_QPS], peer[MAX_QPS];

	if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, o->gid_index, &mine.gid))
		die("port or GID");
	mine.mtu = port.active_mtu;
	for (uint32_t q = 0; q < o->qps; q++)
		me[q] = (struct qp_info){ .qpn = qps[q]->qp_num, .psn = (q * 40503u) & 0xffffff };
	xfer(o->client, o->client ? &mine : theirs, sizeof(mine));
	xfer(!o->client, o->client ? theirs : &mine, sizeof(mine));
	if (theirs->qps != o->qps || theirs->bytes != o->bytes)
		die("the other end has another QP count or size");
	xfer(o->client, o->client ? me : peer, sizeof(me[0]) * o->qps);
	xfer(!o->client, o->client ? peer : me, sizeof(me[0]) * o->qps);
	for (uint32_t q = 0; q < o->qps; q++)
		to_rts(qps[q], &me[q], &peer[q], &mine, theirs, o->gid_index);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every QP's WRITE of its region, all posted before any is waited for. */
static bool write_round(const struct options *o, const struct side_info *peer, uint32_t round)
{
	double deadline = now_s() + WAIT_SECONDS;
	uint32_t done = 0;

	for (uint32_t q = 0; q < o->qps; q++) {
		struct ibv_sge sge = { (uintptr_t)region(q), o->bytes, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = q, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { peer->addr + (uint64_t)q * stride, peer->rkey } };
		struct ibv_send_wr *bad;

		for (size_t i = 0; i < o->bytes; i++)
			region(q)[i] = pattern(q, round, i);
		if (ibv_post_send(qps[q], &wr, &bad))
			die("ibv_post_send");
	}
	while (done < o->qps && now_s() < deadline) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(cq, 32, wc);

		if (n < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				printf("FAIL round %u: QP %lu's WRITE completed with %s\n", round,
				       (unsigned long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
				return false;
			}
		}
		done += (uint32_t)n;
	}
	if (done < o->qps)
		printf("FAIL round %u: %u of %u WRITEs completed in %d s\n", round, done, o->qps,
		       WAIT_SECONDS);
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

static int serve(const struct options *o)
{
	uint32_t round, verdict[2];

	for (;;) {
		xfer(false, &round, sizeof(round));
		if (round == UINT32_MAX)
			return 0;
		verdict[0] = check_round(o, round, &verdict[1]);
		xfer(true, verdict, sizeof(verdict));
	}
}

static int run_client(const struct options *o, const struct side_info *peer)
{
	double spent = 0;
	int failed = 0;

	for (uint32_t round = 0; round < o->rounds && !failed; round++) {
		uint32_t verdict[2];
		double t0 = now_s();

		if (!write_round(o, peer, round)) {
			failed = 1;
			break;
		}
		spent += now_s() - t0;
		xfer(true, &round, sizeof(round));
		xfer(false, verdict, sizeof(verdict));
		if (verdict[0]) {
			printf("FAIL round %u: QP %u's region differs at byte %u%s\n", round,
			       verdict[1], verdict[0] - 1,
			       verdict[0] - 1 >= o->bytes ? " (the canary after it)" : "");
			failed = 1;
		}
	}
	xfer(true, &(uint32_t){ UINT32_MAX }, sizeof(uint32_t));
	if (!failed)
		printf("ok %u QPs x %u rounds x %u bytes byte-exact, goodput %.1f MB/s\n", o->qps,
		       o->rounds, o->bytes,
		       (double)o->qps * o->rounds * o->bytes / 1e6 / (spent > 0 ? spent : 1e-9));
	return failed;
}

static int tcp_connect_or_accept(const struct options *o)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(o->port) };
	int one = 1, l, s;

	if (o->client) {
		if (inet_pton(AF_INET, o->server, &a.sin_addr) != 1) {
			errno = EINVAL;
			die(o->server);
		}
		for (int tries = 0; tries < 100; tries++) {
			s = socket(AF_INET, SOCK_STREAM, 0);
			if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
				return s;
			close(s);
			usleep(200000);
		}
		die("connect");
	}
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		die("listen");
	s = accept(l, NULL, NULL);
	close(l);
	if (s < 0)
		die("accept");
	return s;
}

static int usage(void)
{
	fprintf(stderr, "usage: many_qp [-q QPS] [-s BYTES] [-n ROUNDS] [-p PORT] [-x GID_INDEX] "
			"server | client SERVER_IPV4\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct options o = { .qps = 128, .bytes = 256 << 10, .rounds = 4, .port = 18517 };
	struct side_info peer;
	int c;

	while ((c = getopt(argc, argv, "q:s:n:p:x:")) != -1) {
		long v = strtol(optarg, NULL, 0);

		switch (c) {
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
	setup(&o);
	sock = tcp_connect_or_accept(&o);
	exchange_and_connect(&o, &peer);
	return o.client ? run_client(&o, &peer) : serve(&o);
}
