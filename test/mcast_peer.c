/* UD multicast between two hosts, written against <infiniband/verbs.h> alone (the same
 * binary runs under rocemu-run and on the kernel's rxe). The server attaches two UD QPs to
 * a group; the client sends datagrams to the group (destination QP 0xFFFFFF) from one QP,
 * while a second QP of its own is attached too. Checked:
 *   - the attach rules as the kernel has them: attaching again is a success, an RC QP or a
 *     unicast address is EINVAL, a detach of a QP not attached is EINVAL, the 57th QP on a
 *     group is ENOMEM (ibv_query_device's max_mcast_qp_attach, 56), a QP still attached
 *     is not destroyed (EBUSY), and QPs detached and destroyed leave their groups;
 *   - both server QPs get every datagram, each checked (src_qp, immediate, byte_len, the
 *     GRH area from the client to the group, every payload byte), and so does the client's
 *     own attached QP (the sending host receives its group's datagrams too: rocemu's
 *     loopback; rxe's only where the host joined the group at the IP level);
 *   - a datagram with a wrong Q_Key reaches nobody (the test script counts qkey_viol);
 *   - a QP detached gets nothing more while the other still gets every datagram.
 *   mcast_peer [-x GID_INDEX] server GROUP
 *   mcast_peer [-x GID_INDEX] client GROUP SERVER_ADDRESS
 * GROUP is an IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) multicast address. One line per check,
 * "ok NAME" or "FAIL NAME: why"; exit 0 when all passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/peer_link.h"

#define PORT 18519
#define GRH 40
#define QKEY 0x1ee7c0deu
#define MCAST_QPN 0xffffffu
#define FIRST 8                 /* datagrams while both server QPs are attached */
#define SECOND 4                /* ... after one was detached */
#define RECVS (FIRST + SECOND + 2)
#define SLOT (GRH + 4096)
#define ROUTE_HOP_LIMIT 64

struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t mtu;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static uint8_t *buf;
static size_t buf_len;
static int gid_index;
static int sock = -1;
static int failures;
static union ibv_gid group;

static void report(const char *name, bool ok, const char *why)
{
	printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why);
	fflush(stdout);
	failures += !ok;
}

static void sync_peer(bool out)
{
	int token = 1;

	peer_xfer(sock, out, &token, sizeof(token));
}

static void parse_group(const char *s)
{
	struct in_addr a4;

	memset(&group, 0, sizeof(group));
	if (inet_pton(AF_INET, s, &a4) == 1) {
		group.raw[10] = group.raw[11] = 0xff;
		memcpy(group.raw + 12, &a4, 4);
	} else if (inet_pton(AF_INET6, s, group.raw) != 1) {
		fprintf(stderr, "mcast_peer: %s is not an IP address\n", s);
		exit(2);
	}
}

static void open_device(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	buf_len = ((size_t)(2 * RECVS + 1) * SLOT + 4095) & ~(size_t)4095;
	buf = aligned_alloc(4096, buf_len);
	mr = pd && buf ? ibv_reg_mr(pd, buf, buf_len, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		peer_die("device, PD or MR");
	ibv_free_device_list(list);
}

static struct ibv_cq *make_cq(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4 * RECVS, NULL, NULL, 0);

	if (!cq)
		peer_die("ibv_create_cq");
	return cq;
}

static struct ibv_qp *make_qp(struct ibv_cq *cq, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = type,
				      .cap = { .max_send_wr = RECVS, .max_recv_wr = RECVS,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		peer_die("ibv_create_qp");
	return qp;
}

static struct ibv_qp *make_ud_qp(struct ibv_cq *cq)
{
	struct ibv_qp *qp = make_qp(cq, IBV_QPT_UD);

	peer_ud_to_rts(qp, QKEY, 0x321);
	return qp;
}

/* RECVS receives for the QP's slot range: slots [base, base + RECVS) of buf. */
static void post_recvs(struct ibv_qp *qp, uint64_t base)
{
	for (uint64_t s = base; s < base + RECVS; s++) {
		struct ibv_sge sge = { (uintptr_t)buf + s * SLOT, SLOT, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = s, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			peer_die("ibv_post_recv");
	}
}

static uint32_t datagram_len(unsigned n, uint32_t mtu)
{
	return n == 0 ? mtu : 1 + (n * 977) % mtu;
}

static uint8_t pattern(unsigned n, uint32_t at)
{
	return (uint8_t)(n * 29 + at);
}

/* The GRH area: from the sender to the group, with the sender's route's TTL. */
static bool grh_ok(const uint8_t *g, const union ibv_gid *src)
{
	static const uint8_t zeros[20];
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(src->raw, v4_prefix, 12))
		return !memcmp(g, zeros, 20) && g[20] == 0x45 && g[28] == ROUTE_HOP_LIMIT &&
		       g[29] == 17 && !memcmp(g + 32, src->raw + 12, 4) &&
		       !memcmp(g + 36, group.raw + 12, 4);
	return g[0] >> 4 == 6 && g[6] == 17 && !memcmp(g + 8, src->raw, 16) &&
	       !memcmp(g + 24, group.raw, 16);
}

/* One datagram against what was sent; why it is wrong, or NULL. next[i] is the number the
 * i-th QP of qpns expects next. */
static const char *check_datagram(const struct ibv_wc *wc, const uint32_t *qpns, int nqps,
				  unsigned *next, const struct info *sender)
{
	unsigned n = ntohl(wc->imm_data);
	const uint8_t *g = buf + wc->wr_id * SLOT;
	uint32_t len;
	int q = -1;

	for (int i = 0; i < nqps; i++)
		if (wc->qp_num == qpns[i])
			q = i;
	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV)
		return "a receive completed in error";
	if (q < 0)
		return "a QP that is not attached received";
	if (!(wc->wc_flags & IBV_WC_WITH_IMM) || n != next[q]++)
		return "datagrams missing or out of order on one QP";
	if (wc->src_qp != sender->qpn || !(wc->wc_flags & IBV_WC_GRH))
		return "src_qp is not the sender's QP, or no IBV_WC_GRH";
	len = datagram_len(n, sender->mtu);
	if (wc->byte_len != GRH + len)
		return "byte_len is not 40 + the datagram's length";
	if (!grh_ok(g, &sender->gid))
		return "the GRH area is not the sender's IP header to the group";
	for (uint32_t i = 0; i < len; i++)
		if (g[GRH + i] != pattern(n, i))
			return "a payload byte differs";
	return NULL;
}

/* Checks every completion of wcs; fills why with the first failure. */
static int check_all(const struct ibv_wc *wcs, int got, const uint32_t *qpns, int nqps,
		     unsigned *next, const struct info *sender, const char **why)
{
	int ok = 0;

	for (int i = 0; i < got && !*why; i++) {
		*why = check_datagram(&wcs[i], qpns, nqps, next, sender);
		ok += !*why;
	}
	return ok;
}

/* The errno of an attach or detach (0 for success). */
static int attach(struct ibv_qp *qp, const union ibv_gid *gid, bool on)
{
	return on ? ibv_attach_mcast(qp, gid, 0) : ibv_detach_mcast(qp, gid, 0);
}

static void check_rules(struct ibv_cq *cq, struct ibv_qp *member, const union ibv_gid *own)
{
	struct ibv_device_attr da;
	struct ibv_qp *rc = make_qp(cq, IBV_QPT_RC), *other = make_ud_qp(cq), *qps[64];
	union ibv_gid second = group;
	int max, n = 0, rc_err, rc_last;

	second.raw[15] ^= 1;
	report("attaching a QP again to its group succeeds", attach(member, &group, true) == 0,
	       "it failed");
	report("an RC QP cannot attach: EINVAL", attach(rc, &group, true) == EINVAL,
	       "not EINVAL");
	report("a unicast address is no group: EINVAL", attach(other, own, true) == EINVAL,
	       "not EINVAL");
	report("detaching a QP not attached: EINVAL", attach(other, &group, false) == EINVAL,
	       "not EINVAL");
	if (ibv_query_device(ctx, &da))
		peer_die("ibv_query_device");
	max = da.max_mcast_qp_attach;
	report("ibv_query_device: max_mcast_qp_attach 56, max_mcast_grp 8192",
	       max == 56 && da.max_mcast_grp == 8192 &&
	       da.max_total_mcast_qp_attach == 56 * 8192, "other limits");
	rc_err = 0;
	for (; n < max && n < 63 && !rc_err; n++) {
		qps[n] = make_ud_qp(cq);
		rc_err = attach(qps[n], &second, true);
	}
	qps[n] = make_ud_qp(cq);
	rc_last = attach(qps[n], &second, true);
	report("56 QPs attach to one group, the 57th is ENOMEM", !rc_err && rc_last == ENOMEM,
	       rc_err ? strerror(rc_err) : "the 57th was not ENOMEM");
	report("a QP still attached is not destroyed: EBUSY, as the kernel's uverbs",
	       ibv_destroy_qp(qps[0]) == EBUSY, "not EBUSY");
	for (int i = 0; i <= n; i++) {
		attach(qps[i], &second, false);     /* the 57th was never attached: EINVAL */
		ibv_destroy_qp(qps[i]);
	}
	report("QPs detached and destroyed left the group: another attaches and detaches",
	       attach(other, &second, true) == 0 && attach(other, &second, false) == 0,
	       "attach or detach failed");
	ibv_destroy_qp(rc);
	ibv_destroy_qp(other);
}

static void serve(void)
{
	static struct ibv_wc wcs[2 * RECVS];
	struct ibv_cq *cq = make_cq();
	struct ibv_qp *r[2] = { make_ud_qp(cq), make_ud_qp(cq) };
	uint32_t qpns[2] = { r[0]->qp_num, r[1]->qp_num };
	unsigned next[2] = { 0, 0 };
	struct info self = { .mtu = peer_port_mtu(ctx) }, client;
	const char *why = NULL;
	int got;

	if (ibv_query_gid(ctx, 1, gid_index, &self.gid))
		peer_die("ibv_query_gid");
	post_recvs(r[0], 0);
	post_recvs(r[1], RECVS);
	report("two UD QPs attach to the group",
	       attach(r[0], &group, true) == 0 && attach(r[1], &group, true) == 0, "failed");
	check_rules(cq, r[0], &self.gid);
	sock = peer_tcp_accept(PORT);
	peer_xfer(sock, true, &self, sizeof(self));
	peer_xfer(sock, false, &client, sizeof(client));
	client.mtu = client.mtu < self.mtu ? client.mtu : self.mtu;
	sync_peer(true);                 /* attached: the client may send */
	got = peer_collect(cq, wcs, 2 * FIRST, 10000);
	check_all(wcs, got, qpns, 2, next, &client, &why);
	report("both attached QPs got each of 8 datagrams, checked byte for byte with the GRH "
	       "area, src_qp and immediate", got == 2 * FIRST && !why && next[0] == FIRST &&
	       next[1] == FIRST, why ? why : "datagrams missing");
	sync_peer(false);                /* the client sent the one with a wrong Q_Key */
	report("a datagram with a wrong Q_Key reached neither QP",
	       peer_collect(cq, wcs, 1, 500) == 0, "it was received");
	report("the second QP detaches", attach(r[1], &group, false) == 0, "failed");
	sync_peer(true);
	got = peer_collect(cq, wcs, SECOND, 3000);
	got += peer_collect(cq, wcs + got, 1, 300);
	why = NULL;
	check_all(wcs, got, qpns, 1, next, &client, &why);
	report("after the detach only the first QP gets the next 4 datagrams",
	       got == SECOND && !why && next[0] == FIRST + SECOND,
	       why ? why : "a datagram is missing, or one reached the detached QP");
	sync_peer(true);
	attach(r[0], &group, false);
	ibv_destroy_qp(r[0]);
	ibv_destroy_qp(r[1]);
	ibv_destroy_cq(cq);
}

static bool send_one(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_ah *ah, uint32_t qkey,
		     unsigned n, uint32_t mtu)
{
	uint8_t *src = buf + buf_len - SLOT;
	uint32_t len = datagram_len(n, mtu);
	struct ibv_sge sge = { (uintptr_t)src, len, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1ull << 40, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(n),
				  .wr.ud = { .ah = ah, .remote_qpn = MCAST_QPN, .remote_qkey = qkey } };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	for (uint32_t i = 0; i < len; i++)
		src[i] = pattern(n, i);
	if (ibv_post_send(qp, &wr, &bad))
		peer_die("ibv_post_send");
	return peer_collect(cq, &wc, 1, 5000) == 1 && wc.status == IBV_WC_SUCCESS;
}

static bool send_range(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_ah *ah, unsigned from,
		       unsigned to, uint32_t mtu)
{
	for (unsigned n = from; n < to; n++)
		if (!send_one(qp, cq, ah, QKEY, n, mtu))
			return false;
	return true;
}

static void client(const char *host)
{
	static struct ibv_wc wcs[2 * RECVS];
	struct ibv_cq *scq = make_cq(), *lcq = make_cq();
	struct ibv_qp *sender = make_ud_qp(scq), *local = make_ud_qp(lcq);
	struct info self = { .mtu = peer_port_mtu(ctx) }, server;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = group, .sgid_index = (uint8_t)gid_index,
					   .hop_limit = 64 } };
	struct ibv_ah *ah;
	unsigned next = 0;
	const char *why = NULL;
	int got;

	if (ibv_query_gid(ctx, 1, gid_index, &self.gid))
		peer_die("ibv_query_gid");
	self.qpn = sender->qp_num;
	post_recvs(local, 0);
	report("the client's second QP attaches to the group", attach(local, &group, true) == 0,
	       "failed");
	ah = ibv_create_ah(pd, &aa);
	if (!ah)
		peer_die("ibv_create_ah to the group");
	sock = peer_tcp_connect(host, PORT);
	peer_xfer(sock, false, &server, sizeof(server));
	peer_xfer(sock, true, &self, sizeof(self));
	self.mtu = server.mtu < self.mtu ? server.mtu : self.mtu;
	sync_peer(false);
	report("8 datagrams to the group, QPN 0xFFFFFF", send_range(sender, scq, ah, 0, FIRST,
								    self.mtu), "a send failed");
	report("a datagram to the group with a wrong Q_Key completes on the sender",
	       send_one(sender, scq, ah, QKEY ^ 1, 99, self.mtu), "it failed");
	sync_peer(true);
	sync_peer(false);                /* the server detached one QP */
	report("4 more datagrams to the group", send_range(sender, scq, ah, FIRST,
							   FIRST + SECOND, self.mtu), "failed");
	got = peer_collect(lcq, wcs, FIRST + SECOND, 3000);
	got += peer_collect(lcq, wcs + got, 1, 300);
	check_all(wcs, got, &local->qp_num, 1, &next, &self, &why);
	report("the sending host's attached QP got all 12, the wrong Q_Key's not",
	       got == FIRST + SECOND && !why, why ? why : "a datagram is missing or extra");
	sync_peer(false);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(sender);
	attach(local, &group, false);
	ibv_destroy_qp(local);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(lcq);
}

int main(int argc, char **argv)
{
	int i = 1;

	if (argc > 2 && !strcmp(argv[1], "-x")) {
		gid_index = atoi(argv[2]);
		i = 3;
	}
	if (!(argc == i + 2 && !strcmp(argv[i], "server")) &&
	    !(argc == i + 3 && !strcmp(argv[i], "client"))) {
		fprintf(stderr, "usage: mcast_peer [-x GID_INDEX] server GROUP | "
			"client GROUP SERVER_ADDRESS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	peer_prog = "mcast_peer";
	parse_group(argv[i + 1]);
	open_device();
	if (!strcmp(argv[i], "server"))
		serve();
	else
		client(argv[i + 2]);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return failures ? 1 : 0;
}
