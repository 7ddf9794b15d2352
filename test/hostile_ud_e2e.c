/* Hostile UD and IPv6 frames on the wire (hostile-ud.test.sh): the program runs in the
 * namespace of host a as the peer of rocemud on host b (daemon a is stopped, so a's
 * addresses are the program's), holds a UD QP and an RC QP on b through librocemu, and
 * sends them frames crafted with wire_build and then broken, through a packet socket on
 * a's veth. Each case must draw exactly its counter (or, for frames the receive filter
 * already keeps out, nothing at all), complete a receive only when it should, and change
 * no byte of b's memory outside what a valid datagram or WRITE may write. Two cases are
 * congestion control's: a CNP to the UD QP cuts its rate, and a datagram marked CE on the
 * way draws a CNP that must come back on a's veth to the address and QP it came from.
 *   hostile_ud_e2e SOCK_B IF_A ADDR_A ADDR6_A ADDR6_B   (run in host a's namespace)
 * One line per case ("NAME: OK|FAIL: ..."); exit 0 when every case matched. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/rocemu.h"
#include "icrc/icrc.h"
#include "test/e2e.h"
#include "wire/bytes.h"
#include "wire/wire.h"

#include "tools/ctl_client.c"

#define QKEY 0x2a2a0001u
#define SLOTS 16
#define SLOT (40 + 1024)
#define RC_OFF 32768              /* the RC QP's WRITE target within the MR */
#define MR_BYTES 65536
#define RC_QPN 0x00abcd           /* the fictitious RC peer's QP */
#define SRC_QPN 0x000777          /* the fictitious UD sender's QP, in every DETH */
#define RC_PSN 0x000100
#define FRAME_CAP 9100
#define NOTHING (-1)              /* a case whose frame the daemon's filter may keep out */

#define CNT_ENUM(name, help) C_##name,
enum counter { PROTO_COUNTERS(CNT_ENUM) C_COUNT };
#undef CNT_ENUM
#define CNT_NAME(name, help) #name,
static const char *const counter_names[C_COUNT] = { PROTO_COUNTERS(CNT_NAME) };
#undef CNT_NAME

struct env {
	struct rocemu_context *ctx;
	struct rocemu_port_attr port;
	struct rocemu_pd *pd;
	struct rocemu_cq *cq;
	struct rocemu_qp *ud, *rc;
	struct rocemu_mr *mr;
	uint8_t *buf, *pristine;
	int ctl, tx, rx, ifindex;
	unsigned next_slot;
	uint32_t rc_psn;
	struct wire_path v4, v6;      /* a -> b */
	uint64_t before[C_COUNT], after[C_COUNT];
};

struct frame {
	uint8_t b[FRAME_CAP];
	size_t len;
};

/* ---- the daemon ---- */

static int read_stats(struct env *e, uint64_t out[C_COUNT])
{
	struct proto_handle req = { .hdr.op = PROTO_STATS };
	struct proto_stats_reply rep;
	char err[256];

	if (ctl_call(e->ctl, &req, sizeof(req), &rep, sizeof(rep), err, sizeof(err)) < 0 ||
	    rep.ncounters != PROTO_NCOUNTERS) {
		e2e_error("stats: %s", err);
		return -1;
	}
	memcpy(out, rep.counters, sizeof(rep.counters));
	return 0;
}

static int post_recv(struct env *e)
{
	unsigned slot = e->next_slot++ % SLOTS;
	struct ibv_sge sge = { (uintptr_t)e->buf + slot * SLOT, SLOT, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return rocemu_post_recv(e->ud, &wr, &bad);
}

static int to_rts(struct env *e, struct rocemu_qp *qp, bool ud)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .qkey = QKEY,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int err = rocemu_modify_qp(qp, &a, IBV_QP_STATE | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));

	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
				  .dest_qp_num = RC_QPN, .rq_psn = RC_PSN,
				  .ah_attr = { .is_global = 1, .port_num = 1,
					       .grh = { .sgid_index = 1, .hop_limit = 64 } } };
	memcpy(a.ah_attr.grh.dgid.raw, e->v6.src_ip6, 16);
	if (!err)
		err = rocemu_modify_qp(qp, &a, ud ? IBV_QP_STATE : IBV_QP_STATE | IBV_QP_AV |
				       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 1 };
	if (!err)
		err = rocemu_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	if (err)
		e2e_error("QP to RTS: %s (%s)", strerror(err), rocemu_last_error(e->ctx));
	return err ? -1 : 0;
}

static int open_daemon(struct env *e, const char *sock)
{
	e->ctx = rocemu_open(sock);
	if (!e->ctx || rocemu_query_port(e->ctx, &e->port) || e->port.gid_count < 2) {
		e2e_error("daemon at %s: %s (it must serve an IPv4 and an IPv6 address)", sock,
			  e->ctx ? rocemu_last_error(e->ctx) : strerror(errno));
		return -1;
	}
	return 0;
}

static int setup_objects(struct env *e)
{
	struct rocemu_qp_init_attr qa = { .max_send_wr = 4, .max_recv_wr = SLOTS,
					  .max_send_sge = 1, .max_recv_sge = 1 };

	e->pd = rocemu_alloc_pd(e->ctx);
	e->cq = e->pd ? rocemu_create_cq(e->ctx, 64) : NULL;
	e->buf = aligned_alloc(4096, MR_BYTES);
	e->pristine = malloc(MR_BYTES);
	if (!e->cq || !e->buf || !e->pristine)
		return -1;
	for (size_t i = 0; i < MR_BYTES; i++)
		e->buf[i] = e->pristine[i] = (uint8_t)(i * 13 + 5);
	e->mr = rocemu_reg_mr(e->pd, e->buf, MR_BYTES, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE);
	qa.send_cq = qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_UD;
	e->ud = e->mr ? rocemu_create_qp(e->pd, &qa) : NULL;
	qa.qp_type = IBV_QPT_RC;
	e->rc = e->ud ? rocemu_create_qp(e->pd, &qa) : NULL;
	if (!e->rc || to_rts(e, e->ud, true) || to_rts(e, e->rc, false))
		return -1;
	for (int i = 0; i < SLOTS; i++)
		if (post_recv(e))
			return -1;
	e->rc_psn = RC_PSN;
	return 0;
}

/* The paths from a to b: MACs of both veths, the addresses given. */
static int setup_paths(struct env *e, const char *ifname, const char *a4, const char *a6,
		       const char *b6)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr) < 0 ||
	    !(e->ifindex = (int)if_nametoindex(ifname))) {
		e2e_error("interface %s: %s", ifname, strerror(errno));
		return -1;
	}
	close(fd);
	e->v4 = (struct wire_path){ .src_port = 0xd00d, .ttl = 64 };
	memcpy(e->v4.src_mac, ifr.ifr_hwaddr.sa_data, 6);
	memcpy(e->v4.dst_mac, e->port.mac, 6);
	memcpy(&e->v4.dst_ip, e->port.gids[0].raw + 12, 4);
	e->v6 = e->v4;
	e->v6.ipv6 = true;
	if (inet_pton(AF_INET, a4, &e->v4.src_ip) != 1 || inet_pton(AF_INET6, a6, e->v6.src_ip6) != 1 ||
	    inet_pton(AF_INET6, b6, e->v6.dst_ip6) != 1) {
		e2e_error("bad address among %s %s %s", a4, a6, b6);
		return -1;
	}
	e->tx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	sll.sll_ifindex = e->ifindex;
	if (e->tx < 0 || bind(e->tx, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		e2e_error("packet socket on %s: %s", ifname, strerror(errno));
		return -1;
	}
	/* what daemon b sends to a: its CNPs */
	e->rx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
	sll.sll_protocol = htons(ETH_P_ALL);
	if (e->rx < 0 || bind(e->rx, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		e2e_error("capturing packet socket on %s: %s", ifname, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- frames ---- */

static uint8_t payload_byte(size_t i)
{
	return (uint8_t)(i * 7 + 1);
}

static void build(struct frame *f, const struct wire_path *p, uint8_t opcode, uint32_t qpn,
		  uint32_t qkey, size_t n)
{
	static uint8_t data[FRAME_CAP];
	struct wire_bth bth = { .opcode = opcode, .pkey = 0xffff, .dest_qp = qpn, .psn = 5 };
	struct wire_ext ext = { .deth = { qkey, SRC_QPN }, .imm = 0xfeedf00d,
				.reth = { 0, 0, (uint32_t)n } };

	for (size_t i = 0; i < n; i++)
		data[i] = payload_byte(i);
	f->len = wire_build(f->b, sizeof(f->b), p, 0x4242, &bth, &ext, data, n);
}

/* A WRITE ONLY into the RC target at the PSN the RC QP expects. */
static void build_write(struct env *e, struct frame *f, const struct wire_path *p, size_t n)
{
	static uint8_t data[1024];
	struct wire_bth bth = { .opcode = WIRE_OP_RC_WRITE_ONLY, .pkey = 0xffff,
				.dest_qp = e->rc->qp_num, .psn = e->rc_psn, .ack_req = true };
	struct wire_ext ext = { .reth = { (uintptr_t)e->buf + RC_OFF, e->mr->rkey, (uint32_t)n } };

	for (size_t i = 0; i < n; i++)
		data[i] = payload_byte(i + 3);
	f->len = wire_build(f->b, sizeof(f->b), p, 0x4343, &bth, &ext, data, n);
}

static bool is_ipv6(const struct frame *f)
{
	return f->b[12] == 0x86 && f->b[13] == 0xdd;
}

/* The ICRC again over the frame as it now is (its UDP length says how far). */
static void reseal(struct frame *f)
{
	size_t ip_len = is_ipv6(f) ? WIRE_IPV6_LEN : WIRE_IPV4_LEN;
	uint8_t *udp = f->b + WIRE_ETH_LEN + ip_len;
	size_t udp_len = (size_t)(udp[4] << 8 | udp[5]);

	if (WIRE_ETH_LEN + ip_len + udp_len > f->len || udp_len < 8 + 12 + 4)
		return;
	icrc_store(udp + udp_len - 4, icrc_compute(f->b + WIRE_ETH_LEN, ip_len, is_ipv6(f) ? 6 : 4,
						    udp_len));
}

static void m_none(struct env *e, struct frame *f) { (void)e, (void)f; }

static void m_deth_short(struct env *e, struct frame *f)
{
	/* IPv6 and UDP lengths that end 4 bytes into the DETH, then the ICRC */
	size_t udp_len = 8 + 12 + 4 + 4;
	uint8_t *ip = f->b + WIRE_ETH_LEN, *udp = ip + WIRE_IPV6_LEN;

	(void)e;
	ip[4] = 0, ip[5] = (uint8_t)udp_len;
	udp[4] = 0, udp[5] = (uint8_t)udp_len;
	f->len = WIRE_ETH_LEN + WIRE_IPV6_LEN + udp_len;
	reseal(f);
}

/* A hop-by-hop options header (8 bytes, PadN) between the IPv6 header and UDP. */
static void m_hop_by_hop(struct env *e, struct frame *f)
{
	uint8_t *ip = f->b + WIRE_ETH_LEN, *after = ip + WIRE_IPV6_LEN;
	size_t plen = (size_t)(ip[4] << 8 | ip[5]) + 8;

	(void)e;
	memmove(after + 8, after, f->len - WIRE_ETH_LEN - WIRE_IPV6_LEN);
	after[0] = 17, after[1] = 0, after[2] = 1, after[3] = 4;
	memset(after + 4, 0, 4);
	ip[6] = 0;
	ip[4] = (uint8_t)(plen >> 8), ip[5] = (uint8_t)plen;
	f->len += 8;
}

static void m_next_tcp(struct env *e, struct frame *f)
{
	(void)e;
	f->b[WIRE_ETH_LEN + 6] = 6;
}

static void m_plen_long(struct env *e, struct frame *f)
{
	(void)e;
	f->b[WIRE_ETH_LEN + 5] += 64;
}

static void m_plen_short(struct env *e, struct frame *f)
{
	(void)e;
	f->b[WIRE_ETH_LEN + 5] -= 4;
}

static void m_not_ours(struct env *e, struct frame *f)
{
	(void)e;
	f->b[WIRE_ETH_LEN + 24 + 15] ^= 0x40;
	reseal(f);
}

static void m_bad_icrc(struct env *e, struct frame *f)
{
	(void)e;
	f->b[f->len - 1] ^= 0x01;
}

/* What a router may change: traffic class, flow label, hop limit; the ICRC masks them. */
static void m_masked_fields(struct env *e, struct frame *f)
{
	uint8_t *ip = f->b + WIRE_ETH_LEN;

	(void)e;
	ip[0] = 0x6b, ip[1] = 0xc1, ip[2] = 0x23, ip[3] = 0x45, ip[7] = 3;
}

static void m_spoof6(struct env *e, struct frame *f)
{
	(void)e;
	f->b[WIRE_ETH_LEN + 8 + 15] ^= 0x05;
	reseal(f);
}

/* ECN CE in the IPv6 traffic class, as a switch marks it (the ICRC masks the field). */
static void m_ce(struct env *e, struct frame *f)
{
	(void)e;
	f->b[WIRE_ETH_LEN + 1] |= WIRE_ECN_CE << 4;
}

/* ---- cases ---- */

enum target { T_UD, T_RC };
enum outcome { O_DROPPED, O_RECEIVED, O_WRITTEN };

struct hcase {
	const char *name;
	bool ipv6;
	enum target to;
	uint8_t opcode;
	uint32_t qkey;
	size_t len;
	void (*mutate)(struct env *e, struct frame *f);
	int counter;              /* the one counter that must rise by 1, or NOTHING */
	enum outcome outcome;
	bool accepted;            /* the QP took it (rcvd_pkts), then refused it */
};

/* Congestion control's cases: more counters that rise by 1 (C_COUNT ends the list), and
 * whether a CNP comes back to a's address and SRC_QPN. */
struct cc_case {
	struct hcase c;
	int also[4];
	bool cnp_back;
};

#define UDO WIRE_OP_UD_SEND_ONLY
#define UDI WIRE_OP_UD_SEND_ONLY_IMM
static const struct hcase cases[] = {
	{ "ud ipv6: control, a datagram lands after the IPv6 header", true, T_UD, UDI, QKEY, 300,
	  m_none, C_rcvd_pkts, O_RECEIVED, false },
	{ "ud ipv4: control, after 20 zero bytes and the IPv4 header", false, T_UD, UDI, QKEY, 1,
	  m_none, C_rcvd_pkts, O_RECEIVED, false },
	{ "ud ipv6: traffic class, flow label and hop limit changed on the way (ICRC masks them)",
	  true, T_UD, UDO, QKEY, 64, m_masked_fields, C_rcvd_pkts, O_RECEIVED, false },
	{ "ud: Q_Key with the privileged bit", true, T_UD, UDO, QKEY | 0x80000000u, 16, m_none,
	  C_qkey_viol, O_DROPPED, false },
	{ "ud: wrong Q_Key", false, T_UD, UDI, QKEY + 1, 16, m_none, C_qkey_viol, O_DROPPED, false },
	{ "ud: DETH cut short (IP and UDP lengths say so)", true, T_UD, UDO, QKEY, 16, m_deth_short,
	  C_drop_malformed, O_DROPPED, false },
	{ "ud: a datagram longer than the MTU", true, T_UD, UDO, QKEY, 4100, m_none,
	  C_drop_ud_too_long, O_DROPPED, true },
	{ "ud: a UD opcode to the RC QP", true, T_RC, UDO, QKEY, 16, m_none, C_drop_transport,
	  O_DROPPED, false },
	{ "ud: an RC SEND to the UD QP", true, T_UD, WIRE_OP_RC_SEND_ONLY, QKEY, 16, m_none,
	  C_drop_transport, O_DROPPED, false },
	{ "ipv6: a hop-by-hop options header before UDP", true, T_UD, UDO, QKEY, 16, m_hop_by_hop,
	  NOTHING, O_DROPPED, false },
	{ "ipv6: next header TCP", true, T_UD, UDO, QKEY, 16, m_next_tcp, NOTHING, O_DROPPED, false },
	{ "ipv6: payload length 64 beyond the frame", true, T_UD, UDO, QKEY, 16, m_plen_long,
	  NOTHING, O_DROPPED, false },
	{ "ipv6: payload length short of the UDP length", true, T_UD, UDO, QKEY, 16, m_plen_short,
	  C_drop_malformed, O_DROPPED, false },
	{ "ipv6: to an address the daemon does not serve", true, T_UD, UDO, QKEY, 16, m_not_ours,
	  NOTHING, O_DROPPED, false },
	{ "ipv6: a bit flipped after the ICRC", true, T_UD, UDO, QKEY, 16, m_bad_icrc,
	  C_drop_bad_icrc, O_DROPPED, false },
	{ "rc ipv6: a WRITE from a spoofed IPv6 source", true, T_RC, WIRE_OP_RC_WRITE_ONLY, 0, 64,
	  m_spoof6, C_drop_wrong_peer, O_DROPPED, false },
	{ "rc ipv6: a WRITE from the peer's IPv4 address to the IPv6 QP", false, T_RC,
	  WIRE_OP_RC_WRITE_ONLY, 0, 64, m_none, C_drop_wrong_peer, O_DROPPED, false },
	{ "rc ipv6: control, a WRITE from the peer lands", true, T_RC, WIRE_OP_RC_WRITE_ONLY, 0, 64,
	  m_none, C_rcvd_pkts, O_WRITTEN, false },
};
static const int no_more[] = { C_COUNT };
static const struct cc_case cc_cases[] = {
	{ { "ud: a CNP to the UD QP cuts its send rate, nothing answered", true, T_UD,
	    WIRE_OP_CNP, 0, 0, m_none, C_rcvd_pkts, O_DROPPED, false },
	  { C_rp_cnp_handled, C_rp_rate_cuts, C_COUNT }, false },
	{ { "ud ipv6: a datagram marked CE on the way lands, and a CNP goes back to its sender",
	    true, T_UD, UDO, QKEY, 64, m_ce, C_rcvd_pkts, O_RECEIVED, false },
	  { C_np_ecn_marked_roce_packets, C_np_cnp_sent, C_sent_pkts, C_COUNT }, true },
};

/* The counters after the frame, once they stop moving (at most 400 ms for a frame that
 * moves none: the receive filter may keep it out). */
static int settle(struct env *e)
{
	int64_t start = e2e_now_ms();

	do {
		poll(NULL, 0, 20);
		if (read_stats(e, e->after) < 0)
			return -1;
		if (memcmp(e->before, e->after, sizeof(e->after))) {
			poll(NULL, 0, 30);
			return read_stats(e, e->after);
		}
	} while (e2e_now_ms() - start < 400);
	return 0;
}

/* Exactly the expected counter rose by one (received and accepted frames also count in
 * rcvd_pkts, ACKs in acks_sent and sent_pkts); nothing else moved. */
static void check_counters(struct env *e, const struct hcase *c, const int *also_rising)
{
	for (int i = 0; i < C_COUNT; i++) {
		uint64_t d = e->after[i] - e->before[i];
		bool also = false, expected;

		if (e2e_timing_counter(counter_names[i]))
			continue;
		for (const int *k = also_rising; *k != C_COUNT; k++)
			also |= i == *k;
		expected = i == c->counter || also || (c->accepted && i == C_rcvd_pkts) ||
			   (c->outcome != O_DROPPED && (i == C_rdma_recvs)) ||
			   (c->outcome == O_WRITTEN && (i == C_acks_sent || i == C_sent_pkts));
		if ((i == c->counter || also) && d != 1)
			e2e_mismatch("%s +%llu, wanted +1", counter_names[i], (unsigned long long)d);
		else if (!expected && d && !(c->counter == NOTHING && i == C_drop_malformed))
			e2e_mismatch("%s moved by %llu", counter_names[i], (unsigned long long)d);
	}
}

/* The receive: its GRH area is the frame's IP header as rxe lays it out, then the payload. */
static void check_received(struct env *e, const struct hcase *c, const struct frame *f)
{
	struct ibv_wc wc;
	uint8_t grh[40] = { 0 };
	const uint8_t *slot;
	int64_t start = e2e_now_ms();
	int n;

	while ((n = rocemu_poll_cq(e->cq, 1, &wc)) == 0 && e2e_now_ms() - start < 1000)
		poll(NULL, 0, 5);
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		e2e_mismatch("no successful receive completion");
		return;
	}
	slot = e->buf + wc.wr_id * SLOT;
	if (c->ipv6)
		memcpy(grh, f->b + WIRE_ETH_LEN, 40);
	else
		memcpy(grh + 20, f->b + WIRE_ETH_LEN, 20);
	if (wc.byte_len != 40 + c->len || wc.src_qp != SRC_QPN || !(wc.wc_flags & IBV_WC_GRH))
		e2e_mismatch("byte_len %u, src_qp 0x%x", wc.byte_len, wc.src_qp);
	else if (memcmp(slot, grh, 40))
		e2e_mismatch("the GRH area is not the %s header as received", c->ipv6 ? "IPv6" : "IPv4");
	for (size_t i = 0; i < c->len; i++)
		if (slot[40 + i] != payload_byte(i)) {
			e2e_mismatch("payload byte %zu differs", i);
			break;
		}
	memcpy(e->pristine + wc.wr_id * SLOT, slot, SLOT);
	e2e_note("%u bytes with their GRH area", wc.byte_len);
	post_recv(e);
}

/* The IPv6 header's traffic class and flow label, as one word. */
static uint32_t ipv6_class_and_flow(const uint8_t *frame)
{
	return get32(frame + WIRE_ETH_LEN) & 0x0fffffffu;
}

/* Frames daemon b sent to a since the capture socket was last drained: one must be a CNP
 * (BTH opcode 0x81, BECN, DSCP 48 with ECT(0), flow label 0, as every CNP of rocemu's)
 * from b's address to a's, for the QP that sent the datagram. */
static void check_cnp_back(struct env *e, const struct hcase *c)
{
	static uint8_t frame[FRAME_CAP];
	int64_t start = e2e_now_ms();

	while (e2e_now_ms() - start < 500) {
		struct wire_pkt pkt;
		ssize_t n = recv(e->rx, frame, sizeof(frame), 0);
		const struct wire_path *p = c->ipv6 ? &e->v6 : &e->v4;

		if (n < 0) {
			poll(NULL, 0, 5);
			continue;
		}
		if (wire_parse(frame, (size_t)n, &pkt) != WIRE_OK || pkt.op->kind != WIRE_KIND_CNP)
			continue;
		if (pkt.bth.dest_qp != SRC_QPN || !pkt.bth.becn || pkt.ip_version != 6 ||
		    memcmp(pkt.dst_ip, p->src_ip6, 16) || memcmp(pkt.src_ip, p->dst_ip6, 16) ||
		    memcmp(frame, p->src_mac, 6))
			e2e_mismatch("a CNP, but not to QP 0x%06x at a's MAC and address (QP 0x%06x)",
				     SRC_QPN, pkt.bth.dest_qp);
		else if (ipv6_class_and_flow(frame) != (uint32_t)WIRE_TOS_CNP << 20)
			e2e_mismatch("a CNP with traffic class and flow label 0x%07x, not 0x%07x",
				     ipv6_class_and_flow(frame), (uint32_t)WIRE_TOS_CNP << 20);
		else
			e2e_note("a CNP back to QP 0x%06x at a's address", SRC_QPN);
		return;
	}
	e2e_mismatch("no CNP came back on a's veth");
}

static void drain_capture(struct env *e)
{
	static uint8_t frame[FRAME_CAP];

	while (recv(e->rx, frame, sizeof(frame), 0) >= 0)
		;
}

static void check_memory(struct env *e, const struct hcase *c)
{
	struct ibv_wc wc;

	if (c->outcome == O_WRITTEN) {
		for (size_t i = 0; i < c->len; i++)
			if (e->buf[RC_OFF + i] != payload_byte(i + 3)) {
				e2e_mismatch("the WRITE did not land");
				break;
			}
		memcpy(e->pristine + RC_OFF, e->buf + RC_OFF, c->len);
		e->rc_psn++;
		e2e_note("%zu bytes written where the RETH says, ACKed", c->len);
	}
	if (c->outcome == O_DROPPED && rocemu_poll_cq(e->cq, 1, &wc) != 0)
		e2e_mismatch("a completion for a frame that should be dropped");
	for (size_t i = 0; i < MR_BYTES; i++)
		if (e->buf[i] != e->pristine[i]) {
			e2e_mismatch("byte %zu of the MR changed", i);
			break;
		}
}

static int run_case(struct env *e, const struct hcase *c, const int *also_rising,
		    bool cnp_back)
{
	static struct frame f;
	const struct wire_path *p = c->ipv6 ? &e->v6 : &e->v4;
	uint32_t qpn = c->to == T_UD ? e->ud->qp_num : e->rc->qp_num;

	if (c->opcode == WIRE_OP_RC_WRITE_ONLY)
		build_write(e, &f, p, c->len);
	else
		build(&f, p, c->opcode, qpn, c->qkey, c->len);
	if (!f.len) {
		e2e_error("wire_build refused the frame");
		return e2e_report(c->name, "");
	}
	c->mutate(e, &f);
	drain_capture(e);
	if (read_stats(e, e->before) < 0 ||
	    send(e->tx, f.b, f.len < 60 ? 60 : f.len, 0) < 0 || settle(e) < 0) {
		e2e_error("sending or counting: %s", strerror(errno));
		return e2e_report(c->name, "");
	}
	check_counters(e, c, also_rising);
	if (cnp_back)
		check_cnp_back(e, c);
	if (c->outcome == O_RECEIVED)
		check_received(e, c, &f);
	check_memory(e, c);
	return e2e_report(c->name, c->counter == NOTHING ? "nothing received, nothing written" :
			  c->outcome != O_DROPPED ? "" :
			  *also_rising != C_COUNT ? "taken and counted, nothing written" :
			  "dropped and counted, nothing written");
}

int main(int argc, char **argv)
{
	struct env e = { .ctl = -1, .tx = -1, .rx = -1 };
	char err[256];
	int failed = 0;

	if (argc != 6) {
		fprintf(stderr, "usage: hostile_ud_e2e SOCK_B IF_A ADDR_A ADDR6_A ADDR6_B\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (open_daemon(&e, argv[1]) < 0 || setup_paths(&e, argv[2], argv[3], argv[4], argv[5]) < 0 ||
	    setup_objects(&e) < 0) {
		e2e_report("setup", "");
		return 1;
	}
	if ((e.ctl = ctl_connect(argv[1], err, sizeof(err))) < 0) {
		e2e_error("%s", err);
		e2e_report("setup", "");
		return 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		failed += run_case(&e, &cases[i], no_more, false);
	for (size_t i = 0; i < sizeof(cc_cases) / sizeof(cc_cases[0]); i++)
		failed += run_case(&e, &cc_cases[i].c, cc_cases[i].also, cc_cases[i].cnp_back);
	rocemu_close(e.ctx);
	close(e.ctl);
	close(e.tx);
	close(e.rx);
	free(e.buf);
	free(e.pristine);
	return failed ? 1 : 0;
}
