/* UD between two hosts, written against <infiniband/verbs.h> alone so the same binary runs
 * on rocemu (under rocemu-run) and on the kernel's rxe. The server makes 16 UD QPs; the
 * client sends datagrams to all 16 from one QP, through an address handle per peer (each
 * with its own flow label, so each flow has its own UDP source port), 8 rounds of sizes
 * from 1 byte to the port's MTU. The server checks every datagram: which QP took it, the
 * source QPN, byte_len, the immediate, the 40-byte GRH area (IPv4: 20 zero bytes then the
 * IPv4 header; IPv6: the IPv6 header) with both addresses, and every payload byte. Two
 * datagrams must not arrive at all: one with a wrong Q_Key and one for which no receive is
 * posted. Then each of the 16 answers the client through ibv_create_ah_from_wc. The ends
 * talk over TCP port 18517 (IPv4 or IPv6) to exchange QP numbers, GIDs and verdicts.
 *   ud_peer [-x GID_INDEX] server
 *   ud_peer [-x GID_INDEX] client SERVER_ADDRESS
 * One line per check, "ok NAME" or "FAIL NAME: why"; exit 0 when all passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/peer_link.h"

#define PORT 18517
#define PEERS 16
#define ROUNDS 8
#define GRH 40
#define ROUTE_HOP_LIMIT 64
#define AH_HOP_LIMIT 7
#define QKEY 0x1ee7c0deu
#define SLOT (GRH + 4096)            /* one receive: GRH area and the largest datagram */
#define RECVS_PER_QP (ROUNDS + 1)    /* the wrong Q_Key leaves one over on its QP */
#define REPLY_IMM 0xbeef0000u

struct info {
	union ibv_gid gid;
	uint32_t qpn[PEERS];
	uint32_t mtu;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static uint8_t *buf;
static size_t buf_len;
static int gid_index;
static int sock = -1;
static int failures;

static void report(const char *name, bool ok, const char *why)
{
	printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why);
	fflush(stdout);
	failures += !ok;
}

static void xfer(bool out, void *p, size_t n)
{
	peer_xfer(sock, out, p, n);
}

static void open_device(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 4 * PEERS * RECVS_PER_QP, NULL, NULL, 0) : NULL;
	/* aligned_alloc wants a multiple of the alignment */
	buf_len = ((size_t)PEERS * RECVS_PER_QP * SLOT + 2 * SLOT + 4095) & ~(size_t)4095;
	buf = aligned_alloc(4096, buf_len);
	mr = cq && buf ? ibv_reg_mr(pd, buf, buf_len, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		peer_die("device, PD, CQ or MR");
	ibv_free_device_list(list);
}

static struct ibv_qp *make_ud_qp(uint32_t depth)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				      .cap = { .max_send_wr = depth, .max_recv_wr = depth,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		peer_die("ibv_create_qp");
	peer_ud_to_rts(qp, QKEY, 0x123);
	return qp;
}

static void post_recv(struct ibv_qp *qp, uint64_t slot)
{
	struct ibv_sge sge = { (uintptr_t)buf + slot * SLOT, SLOT, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		peer_die("ibv_post_recv");
}

static uint32_t datagram_len(unsigned peer, unsigned round, uint32_t mtu)
{
	return round == 0 ? mtu : 1 + (round * 131 + peer * 977) % mtu;
}

static uint8_t pattern(unsigned peer, unsigned round, uint32_t at)
{
	return (uint8_t)(peer * 31 + round * 7 + at);
}

/* Posts one datagram from the last slot of buf and waits for its send completion. */
static bool send_datagram(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
			  uint32_t len, uint32_t imm, unsigned peer, unsigned round)
{
	uint8_t *src = buf + buf_len - SLOT;
	struct ibv_sge sge = { (uintptr_t)src, len, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1ull << 40, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(imm),
				  .wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey } };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	time_t start = time(NULL);

	for (uint32_t i = 0; i < len; i++)
		src[i] = pattern(peer, round, i);
	if (ibv_post_send(qp, &wr, &bad))
		peer_die("ibv_post_send");
	while (time(NULL) - start < 10) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			peer_die("ibv_poll_cq");
		if (n && wc.wr_id == wr.wr_id)
			return wc.status == IBV_WC_SUCCESS;
		if (n)
			fprintf(stderr, "ud_peer: unexpected completion %llu while sending\n",
				(unsigned long long)wc.wr_id);
	}
	return false;
}

/* The GRH area as rxe writes it: IPv4 (v4-mapped GIDs) 20 zero bytes and the IPv4 header,
 * else the IPv6 header; from src to dst either way, with the TTL or hop limit of the
 * sender's route (the kernel's default, 64, on the test hosts), not the AH's (AH_HOP_LIMIT):
 * the kernel replaces a user AH's hop limit with the route's, and rxe sends that. */
static bool grh_ok(const uint8_t *g, const union ibv_gid *src, const union ibv_gid *dst)
{
	static const uint8_t zeros[20];
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(src->raw, v4_prefix, 12))
		return !memcmp(g, zeros, 20) && g[20] == 0x45 && g[28] == ROUTE_HOP_LIMIT &&
		       g[29] == 17 &&
		       !memcmp(g + 32, src->raw + 12, 4) && !memcmp(g + 36, dst->raw + 12, 4);
	return g[0] >> 4 == 6 && g[6] == 17 && g[7] == ROUTE_HOP_LIMIT &&
	       !memcmp(g + 8, src->raw, 16) &&
	       !memcmp(g + 24, dst->raw, 16);
}

static int peer_of(const struct info *self, uint32_t qpn)
{
	for (int p = 0; p < PEERS; p++)
		if (self->qpn[p] == qpn)
			return p;
	return -1;
}

/* One received datagram against what the client sent; why it is wrong, or NULL. */
static const char *check_datagram(const struct info *self, const struct info *client,
				  const struct ibv_wc *wc, unsigned *rounds)
{
	uint32_t imm = ntohl(wc->imm_data);
	int p = peer_of(self, wc->qp_num);
	unsigned round = imm & 0xffff;
	const uint8_t *g = buf + wc->wr_id * SLOT;
	uint32_t len;

	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV)
		return "a receive completed in error";
	if (p < 0 || (int)(imm >> 16) != p || !(wc->wc_flags & IBV_WC_WITH_IMM))
		return "the immediate names another QP than the one that took it";
	if (round != rounds[p]++)
		return "rounds out of order on one QP";
	if (wc->src_qp != client->qpn[0] || !(wc->wc_flags & IBV_WC_GRH))
		return "src_qp is not the client's QP, or no IBV_WC_GRH";
	len = datagram_len((unsigned)p, round, self->mtu);
	if (wc->byte_len != GRH + len)
		return "byte_len is not 40 + the datagram's length";
	if (!grh_ok(g, &client->gid, &self->gid))
		return "the GRH area does not hold the sender's IP header";
	for (uint32_t i = 0; i < len; i++)
		if (g[GRH + i] != pattern((unsigned)p, round, i))
			return "a payload byte differs";
	return NULL;
}

static void serve(void)
{
	static struct ibv_wc wcs[PEERS * RECVS_PER_QP + 4];
	struct ibv_qp *qps[PEERS];
	struct ibv_wc last[PEERS];
	unsigned rounds[PEERS] = { 0 };
	struct info self = { .mtu = peer_port_mtu(ctx) }, client;
	const char *why = NULL;
	int got, want = PEERS * ROUNDS, ok = 0;

	if (ibv_query_gid(ctx, 1, gid_index, &self.gid))
		peer_die("ibv_query_gid");
	for (int p = 0; p < PEERS; p++) {
		qps[p] = make_ud_qp(RECVS_PER_QP);
		self.qpn[p] = qps[p]->qp_num;
		for (int r = 0; r < (p == PEERS - 1 ? ROUNDS : RECVS_PER_QP); r++)
			post_recv(qps[p], (uint64_t)p * RECVS_PER_QP + (uint64_t)r);
	}
	sock = peer_tcp_accept(PORT);
	xfer(true, &self, sizeof(self));
	xfer(false, &client, sizeof(client));
	if (client.mtu < self.mtu)      /* the client sends at the smaller of the two */
		self.mtu = client.mtu;
	got = peer_collect(cq, wcs, want, 20000);
	for (int i = 0; i < got && !why; i++) {
		why = check_datagram(&self, &client, &wcs[i], rounds);
		last[peer_of(&self, wcs[i].qp_num) & (PEERS - 1)] = wcs[i];
		ok += !why;
	}
	report("server: 8 datagrams on each of 16 QPs, each checked byte for byte with its GRH "
	       "area, src_qp and immediate", got == want && !why,
	       why ? why : "fewer datagrams arrived than were sent");
	xfer(false, &ok, sizeof(ok));   /* the client has sent the two that must not arrive */
	report("server: the datagram with a wrong Q_Key and the one with no receive posted "
	       "did not arrive", peer_collect(cq, wcs, 1, 500) == 0, "one of them was received");
	for (int p = 0; p < PEERS; p++) {
		struct ibv_ah *ah = ibv_create_ah_from_wc(pd, &last[p],
							   (struct ibv_grh *)(buf + last[p].wr_id * SLOT), 1);

		if (!ah || !send_datagram(qps[p], ah, last[p].src_qp, QKEY, 64,
					  REPLY_IMM | (uint32_t)p, (unsigned)p, 99))
			why = "ibv_create_ah_from_wc or the reply failed";
		if (ah)
			ibv_destroy_ah(ah);
	}
	report("server: each QP answered through ibv_create_ah_from_wc", !why, why ? why : "");
	xfer(false, &ok, sizeof(ok));
	for (int p = 0; p < PEERS; p++)
		ibv_destroy_qp(qps[p]);
}

/* An address handle per peer, all to the server's GID, each with a flow label of its own. */
static void make_ahs(const struct info *server, struct ibv_ah **ahs)
{
	for (int p = 0; p < PEERS; p++) {
		struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
					 .grh = { .dgid = server->gid, .sgid_index = (uint8_t)gid_index,
						  .hop_limit = AH_HOP_LIMIT, .flow_label = (uint32_t)p + 1 } };

		ahs[p] = ibv_create_ah(pd, &a);
		if (!ahs[p])
			peer_die("ibv_create_ah");
	}
}

static bool send_all(struct ibv_qp *qp, struct ibv_ah **ahs, const struct info *server)
{
	for (unsigned r = 0; r < ROUNDS; r++)
		for (unsigned p = 0; p < PEERS; p++)
			if (!send_datagram(qp, ahs[p], server->qpn[p], QKEY,
					   datagram_len(p, r, server->mtu), p << 16 | r, p, r))
				return false;
	return true;
}

static void client(const char *host)
{
	static struct ibv_wc wcs[PEERS + 1];
	struct ibv_qp *qp = make_ud_qp(PEERS * RECVS_PER_QP);
	struct ibv_ah *ahs[PEERS];
	struct info self = { .mtu = peer_port_mtu(ctx) }, server;
	bool seen[PEERS] = { false };
	int got, ok = 1, good = 0;

	if (ibv_query_gid(ctx, 1, gid_index, &self.gid))
		peer_die("ibv_query_gid");
	self.qpn[0] = qp->qp_num;
	for (int p = 0; p < PEERS; p++)
		post_recv(qp, (uint64_t)p);
	sock = peer_tcp_connect(host, PORT);
	xfer(false, &server, sizeof(server));
	xfer(true, &self, sizeof(self));
	if (server.mtu > self.mtu)
		server.mtu = self.mtu;
	make_ahs(&server, ahs);
	report("client: 128 datagrams to 16 QPs from one QP through 16 address handles",
	       send_all(qp, ahs, &server), "a send completed in error");
	report("client: a datagram with a wrong Q_Key completes on the sender",
	       send_datagram(qp, ahs[3], server.qpn[3], QKEY ^ 1, 16, 3u << 16 | 77, 3, 77), "");
	report("client: a datagram for a QP with no receive left completes on the sender",
	       send_datagram(qp, ahs[PEERS - 1], server.qpn[PEERS - 1], QKEY, 16,
			     (PEERS - 1u) << 16 | 78, PEERS - 1, 78), "");
	xfer(true, &ok, sizeof(ok));
	got = peer_collect(cq, wcs, PEERS, 10000);
	for (int i = 0; i < got; i++) {
		int p = (int)(ntohl(wcs[i].imm_data) & 0xffff);

		if (wcs[i].status == IBV_WC_SUCCESS && p < PEERS && !seen[p] &&
		    wcs[i].src_qp == server.qpn[p] && wcs[i].byte_len == GRH + 64 &&
		    grh_ok(buf + wcs[i].wr_id * SLOT, &server.gid, &self.gid))
			seen[p] = true, good++;
	}
	report("client: an answer from each of the 16 QPs, from its QPN, with the GRH area",
	       got == PEERS && good == PEERS, "an answer is missing or wrong");
	xfer(true, &ok, sizeof(ok));
	for (int p = 0; p < PEERS; p++)
		ibv_destroy_ah(ahs[p]);
	ibv_destroy_qp(qp);
}

int main(int argc, char **argv)
{
	int i = 1;

	if (argc > 2 && !strcmp(argv[1], "-x")) {
		gid_index = atoi(argv[2]);
		i = 3;
	}
	if (!(argc == i + 1 && !strcmp(argv[i], "server")) &&
	    !(argc == i + 2 && !strcmp(argv[i], "client"))) {
		fprintf(stderr, "usage: ud_peer [-x GID_INDEX] server | client SERVER_ADDRESS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	peer_prog = "ud_peer";
	open_device();
	if (!strcmp(argv[i], "server"))
		serve();
	else
		client(argv[i + 1]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return failures ? 1 : 0;
}
