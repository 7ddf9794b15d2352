/* libFuzzer harness for the daemon's whole receive path: wire_parse, the silent drops and
 * the ICRC check of rx.c, QP lookup, the responder's checks and its copy into a real MR
 * (resp.c, memreg/), the ACKs and NAKs it builds, and the completer taking ACKs for writes
 * the requester sent (req.c), all with the daemon's own sources compiled in. Only the
 * network (net.c) and the log (log.c) are replaced, below: frames the daemon "sends" land
 * in a scratch buffer and must decode as valid RoCEv2 with a good ICRC, to the RC QP's
 * peer, (a UC QP's CNP, the only thing a UC QP may answer with) to the UC QP's peer, or
 * (a CNP that a UD datagram earned) back to that datagram's sender.
 *
 * The memory: one page-aligned buffer of pattern bytes. A remote-write MR lies in its
 * middle, starting and ending inside pages, so its page spans hold canary bytes; a
 * read-only MR, an MR of another PD and a deregistered MR sit in other pages of the same
 * buffer. After every input, every byte of the buffer outside the remote-write MR must
 * still be the pattern, and the requester's source buffer must be untouched.
 *
 * Input: two flag bytes, then up to MAX_FRAMES records: a 2-byte little-endian length and
 * that many bytes of Ethernet frame. Length 0 fires the QP's retransmission timer, length
 * 1 its RNR timer (both consume no bytes), so the completer's paths are reachable without
 * a clock. The flags patch each frame towards what the responder accepts, so the fuzzer
 * gets past the cheap drops: IP and UDP lengths that agree with the frame's size (so
 * inserting or erasing bytes keeps it parseable), our QPN, our addresses, the PSN the QP
 * expects plus a signed delta taken from the frame's own low PSN byte, an rkey chosen
 * from a table by the frame's own rkey (keys are random per run, so inputs name them by
 * index), and the ICRC recomputed last over the final bytes. Every input starts from the
 * same state: the QP is taken through RESET, INIT and RTR (and RTS with three writes
 * posted, by flag) again, so a finding replays from its input alone.
 *
 * RX_FUZZ_SEEDS=DIR ./rx_fuzz writes the seed inputs (frames built with wire_build) into
 * DIR and exits: test/fuzz/corpus/rx_fuzz/ was grown from those and minimised with
 * -merge=1. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"
#include "icrc/icrc.h"
#include "memreg/memreg.h"
#include "wire/bytes.h"
#include "wire/wire.h"

#define PAGE        4096u
/* The rings of queues made for PROTO_MAX_SGE SGEs, as arrays of whole WQEs. */
#define SQ(q)       ((struct proto_swqe *)(q)->sq)
#define RQ(q)       ((struct proto_rwqe *)(q)->rq)
#define BUF_PAGES   8
#define MAIN_OFF    (2 * PAGE + 100)   /* inside page 2 ... */
#define MAIN_LEN    (3 * PAGE - 63)    /* ... to inside page 5 */
#define RO_OFF      (6 * PAGE + 8)
#define PD2_OFF     (6 * PAGE + 1024)
#define DEAD_OFF    (7 * PAGE + 16)
#define SMALL_LEN   512
#define SRC_PAGES   2
#define IOVA_BASE   0x100000000ull     /* iova = IOVA_BASE + offset in the buffer */
#define SRC_IOVA    0x200000000ull
#define DEV_IP      0x020012c6u        /* 198.18.0.2, network order on little endian */
#define PEER_IP     0x010012c6u        /* 198.18.0.1 */
#define PEER_GID    { [10] = 0xff, [11] = 0xff, 198, 18, 0, 1 }
#define PEER_QPN    0x00abcd
#define UC_PEER_QPN 0x00abce           /* the UC QP's peer, on the same host */
#define RQ_PSN      0xfffff0           /* near the 24-bit wrap, both ways */
#define SQ_PSN      0xffffe8
#define QP_DEPTH    16
#define CQ_DEPTH    256
#define MAX_FRAMES  16
#define PATTERN(i)  ((uint8_t)((i) * 7 + 3))
#define UD_QKEY     0x11111111u

enum flag {
	F_QPN = 1 << 0,   /* destination QPN := our QP */
	F_ADDR = 1 << 1,  /* source := the peer, destination := us */
	F_KEY = 1 << 2,   /* RETH or AtomicETH rkey := keys[rkey & 7] */
	F_PSN = 1 << 3,   /* PSN := expected + (int8_t)(psn & 0xff) */
	F_ICRC = 1 << 4,  /* ICRC recomputed */
	F_RECV = 1 << 5,  /* receive WQEs posted (WRITE WITH IMMEDIATE consumes them) */
	F_RTS = 1 << 6,   /* three RDMA WRITEs posted and the QP in RTS: ACKs complete them */
	F_MTU256 = 1 << 7 /* path MTU 256 instead of 1024 */
};

enum flag2 {
	G_FIX_LEN = 1 << 0, /* IPv4 total length and UDP length := the frame's */
	G_NO_RW = 1 << 1,   /* the QP grants no remote write */
	G_BAD_WQE = 1 << 2, /* the third posted write names an lkey that is not ours */
	G_RQ_LIE = 1 << 3,  /* the receive producer index lies beyond the ring */
	G_SRQ = 1 << 4,     /* the QP takes its receives from an SRQ (limit armed at 4) */
	G_UD = 1 << 5,      /* frames go to the UD QP (Q_Key UD_QKEY; F_RECV posts its receives) */
	G_UC = 1 << 6,      /* frames go to the UC QP, RC's SEND and WRITE opcodes turned into
			     * UC's; it takes the receives, the SRQ and the lie instead */
};

/* rkeys a frame may name by index under F_KEY. */
enum key_sel { K_MAIN, K_RO, K_PD2, K_DEAD, K_BAD_BYTE, K_NEXT_INDEX, K_SRC, K_ASIS };

#define MUST(cond)                                                                        \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "rx_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                          \
		}                                                                         \
	} while (0)

static struct dev dev;
static struct owner owner;       /* the process the objects belong to */
static struct mr_client *mrc;
static struct mr_pd *pd, *pd2;
static struct cq *cq;
static struct qp *qp;
static struct qp *udqp;
static struct qp *ucqp;
static struct srq *srq;
static uint8_t *buf, *pristine, *src;
static uint8_t *tx_frame;            /* exactly DEV_FRAME_MAX: ASan sees any overrun */
static uint32_t keys[K_ASIS];
static uint64_t sent_frames;

/* ---- what net.c and log.c give the daemon ---- */

uint8_t *net_tx_slot(struct port *port)
{
	(void)port;
	return tx_frame;
}

/* The frame being received while rx_frame runs (NULL otherwise); during this input,
 * when the RC QP's peer last had a CNP, and each sender slot of the UD QP (cc.c's hash of
 * the datagram's source address and QP). */
static const uint8_t *receiving;
static size_t receiving_len;
static ev_tstamp rc_cnp_at, uc_cnp_at;
static ev_tstamp ud_cnp_at[QP_UD_CNP_SLOTS];

/* At most one CNP per sender and interval (the loop's clock moves only when the requester
 * arms its timer). */
static void check_cnp_interval(ev_tstamp *last)
{
	ev_tstamp now = ev_now(dev.loop);

	MUST(now - *last >= dev.tp.cc.cnp_interval);
	*last = now;
}

/* The frame being received, parsed into in, when it is a UD datagram (to whichever QP). */
static bool receiving_datagram(struct wire_pkt *in)
{
	return receiving && wire_parse(receiving, receiving_len, in) == WIRE_OK &&
	       in->op->transport == WIRE_UD;
}

/* A UD datagram's CNP goes back the way the datagram came: to its source address, its
 * Ethernet source and its DETH source QP, from the address it was sent to, and only while
 * that datagram is being received. */
static void check_datagram_cnp(const uint8_t *out, const struct wire_pkt *cnp,
			       const struct wire_pkt *in)
{
	MUST(in->bth.dest_qp == udqp->qpn);
	MUST(cnp->ip_version == 4 && in->ip_version == 4);
	MUST(!memcmp(out, receiving + 6, 6));            /* to the datagram's Ethernet source */
	MUST(!memcmp(cnp->dst_ip, in->src_ip, 4));
	MUST(!memcmp(cnp->src_ip, in->dst_ip, 4));
	MUST(cnp->bth.dest_qp == in->ext.deth.src_qp);
	check_cnp_interval(&ud_cnp_at[cc_sender_slot(in)]);
}

/* Everything the daemon sends is a well-formed packet from us with a good ICRC: RC packets
 * and RC CNPs to the RC QP's peer, a UC QP's CNPs to its peer (its responder answers
 * nothing, no ACK and no NAK), or a UD datagram's CNP back to its sender. */
void net_tx_commit(struct port *port, size_t len)
{
	const uint32_t peer = PEER_IP;
	struct wire_pkt pkt, in;

	MUST(len <= DEV_FRAME_MAX);
	MUST(wire_parse(tx_frame, len, &pkt) == WIRE_OK);
	MUST(wire_icrc_ok(tx_frame, &pkt));
	MUST(!memcmp(pkt.src_ip, &port->ipv4, 4));
	port->cnt->sent_pkts++;
	sent_frames++;
	if (pkt.op->kind == WIRE_KIND_CNP && receiving_datagram(&in)) {
		check_datagram_cnp(tx_frame, &pkt, &in);
		return;
	}
	if (pkt.op->kind == WIRE_KIND_CNP)
		check_cnp_interval(pkt.bth.dest_qp == UC_PEER_QPN ? &uc_cnp_at : &rc_cnp_at);
	MUST(!memcmp(pkt.dst_ip, &peer, 4));
	MUST(pkt.bth.dest_qp == PEER_QPN ||
	     (pkt.bth.dest_qp == UC_PEER_QPN && pkt.op->kind == WIRE_KIND_CNP));
	MUST(pkt.op->transport == WIRE_RC || pkt.op->kind == WIRE_KIND_CNP);
	MUST(pkt.op->kind == WIRE_KIND_ACK || pkt.op->kind == WIRE_KIND_CNP || pkt.op->kind == WIRE_KIND_WRITE ||
	     pkt.op->kind == WIRE_KIND_SEND || pkt.op->kind == WIRE_KIND_READ_REQ ||
	     pkt.op->kind == WIRE_KIND_READ_RESP || pkt.op->kind == WIRE_KIND_ATOMIC ||
	     pkt.op->kind == WIRE_KIND_ATOMIC_ACK);
	MUST(pkt.payload_len <= qp->pmtu);
	/* READ responses carry bytes of the readable MR only (its bytes differ from the
	 * canaries around it) */
	MUST(pkt.op->kind != WIRE_KIND_READ_RESP || pkt.payload_len < 8 ||
	     memmem(buf + MAIN_OFF, MAIN_LEN, tx_frame + pkt.payload_off, pkt.payload_len));
}

int neigh_resolve(struct neigh_wait *nw, const uint8_t gid[16], uint8_t mac[6])
{
	static const uint8_t peer_mac[6] = { 2, 0, 0, 0, 0, 1 };

	(void)nw;
	(void)gid;
	memcpy(mac, peer_mac, 6);
	return 0;
}

/* Every frame was checked as it was committed: nothing is batched. */
void net_flush(struct port *port)
{
	(void)port;
}

/* The harness delivers its frames itself: no ring to catch up with. */
void net_rx_catch_up(struct port *port)
{
	(void)port;
}

void log_info(const char *fmt, ...)
{
	(void)fmt;
}

void log_warn(const char *fmt, ...)
{
	(void)fmt;
}

void log_debug(const char *fmt, ...)
{
	(void)fmt;
}

void log_limited(const char *fmt, ...)
{
	(void)fmt;
}

void log_limited_debug(const char *fmt, ...)
{
	(void)fmt;
}

/* ---- the device, the memory and the QP, built once ---- */

static void *map_pages(size_t pages)
{
	void *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	MUST(p != MAP_FAILED);
	return p;
}

static uint32_t reg(struct mr_pd *in, uint8_t *base, uint64_t iova_base, size_t off,
		    size_t len, int access, struct mr **out)
{
	struct mr *mr;

	MUST(mr_reg(in, base + off, len, iova_base + off, access, &mr) == 0);
	if (out)
		*out = mr;
	return mr_keys(mr).rkey;
}

static void setup_memory(void)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct mr *dead;

	buf = map_pages(BUF_PAGES);
	pristine = malloc(BUF_PAGES * PAGE);
	src = map_pages(SRC_PAGES);
	MUST(pristine != NULL);
	for (size_t i = 0; i < BUF_PAGES * PAGE; i++)
		buf[i] = pristine[i] = PATTERN(i) ^ (i >= MAIN_OFF && i < MAIN_OFF + MAIN_LEN ? 0xa5 : 0);
	memset(src, 0x5c, SRC_PAGES * PAGE);
	keys[K_MAIN] = reg(pd, buf, IOVA_BASE, MAIN_OFF, MAIN_LEN,
			   rw | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, NULL);
	/* no right at all: read locally only, so a SEND must not scatter into it (a receive
	 * SGE needs LOCAL_WRITE) nor a peer reach it; with LOCAL_WRITE, a SEND could land in
	 * it lawfully, which the canaries would have taken for a stray write */
	keys[K_RO] = reg(pd, buf, IOVA_BASE, RO_OFF, SMALL_LEN, 0, NULL);
	keys[K_PD2] = reg(pd2, buf, IOVA_BASE, PD2_OFF, SMALL_LEN, rw, NULL);
	keys[K_DEAD] = reg(pd, buf, IOVA_BASE, DEAD_OFF, SMALL_LEN, rw, &dead);
	MUST(mr_dereg(dead) == 0);
	keys[K_SRC] = reg(pd, src, SRC_IOVA, 0, SRC_PAGES * PAGE, IBV_ACCESS_LOCAL_WRITE,
			  NULL);
	keys[K_BAD_BYTE] = keys[K_MAIN] ^ 0x5a;
	keys[K_NEXT_INDEX] = keys[K_MAIN] + 0x100;
}

static void setup_objects(void)
{
	/* made for the largest WQEs: their slots are whole structs, as written below */
	struct proto_create_qp req = { .max_send_wr = QP_DEPTH, .max_recv_wr = QP_DEPTH,
				       .qp_type = IBV_QPT_RC, .max_send_sge = PROTO_MAX_SGE,
				       .max_recv_sge = PROTO_MAX_SGE };
	int fds[2], err;

	cq = cq_create(&owner, CQ_DEPTH, fds, &err);
	MUST(cq != NULL);
	MUST(fcntl(cq->client_end, F_SETFL, O_NONBLOCK) == 0);
	qp = qp_create(&owner, &req, fds, &err);
	MUST(qp != NULL && qp->sq_stride == sizeof(struct proto_swqe) &&
	     qp->rq_stride == sizeof(struct proto_rwqe));
	req.qp_type = IBV_QPT_UD;
	udqp = qp_create(&owner, &req, fds, &err);
	MUST(udqp != NULL);
	udqp->pd = pd;
	udqp->send_cq = udqp->recv_cq = cq;
	cq->users += 2;
	req.qp_type = IBV_QPT_UC;
	ucqp = qp_create(&owner, &req, fds, &err);
	MUST(ucqp != NULL);
	ucqp->pd = pd;
	ucqp->send_cq = ucqp->recv_cq = cq;
	cq->users += 2;
	srq = srq_create(&owner, &(struct proto_create_srq){ .max_wr = QP_DEPTH,
							     .max_sge = PROTO_MAX_SGE },
			 fds, &err);
	MUST(srq != NULL);
	MUST(fcntl(srq->client_end, F_SETFL, O_NONBLOCK) == 0);
	/* what op_create_qp does after qp_create */
	qp->pd = pd;
	qp->send_cq = qp->recv_cq = cq;
	cq->users += 2;
}

static void setup(void)
{
	tx_frame = malloc(DEV_FRAME_MAX);
	MUST(tx_frame != NULL);
	dev.loop = ev_loop_new(EVFLAG_AUTO);
	MUST(dev.loop != NULL);
	dev.port.cnt = &dev.cnt;
	dev.port.ipv4 = DEV_IP;
	addr_gid(dev.port.gids[0].raw, 4, (const uint8_t *)&dev.port.ipv4);
	dev.port.ngids = 1;
	memcpy(dev.port.mac, "\x02\0\0\0\0\x02", 6);
	dev.port.link_mtu = 9000;
	dev.port.max_mtu = dev.port.active_mtu = IBV_MTU_4096;
	snprintf(dev.port.ifname, sizeof(dev.port.ifname), "fuzz0");
	sched_init(&dev);
	dcqcn_defaults(&dev.tp.cc, 1.25e9);
	dev.mrs = mr_table_new(64, 0);
	MUST(dev.mrs != NULL);
	owner.dev = &dev;
	owner.pid = getpid();
	owner.async_fd = -1;
	mrc = mr_client_new(dev.mrs, 0);
	MUST(mrc != NULL);
	pd = mr_pd_alloc(mrc);
	pd2 = mr_pd_alloc(mrc);
	MUST(pd && pd2);
	MUST((size_t)sysconf(_SC_PAGESIZE) == PAGE);
	setup_memory();
	setup_objects();
}

/* ---- every input from the same state ---- */

static void modify_qp(struct qp *which, uint32_t mask, const struct proto_qp_attr *a)
{
	char err[PROTO_ERRMSG];

	MUST(qp_modify(which, mask, a, err, sizeof(err)) == 0);
}

static void modify(uint32_t mask, const struct proto_qp_attr *a)
{
	modify_qp(qp, mask, a);
}

/* Three RDMA WRITEs from the source MR, one of them with an immediate, a READ of 3000
 * bytes into the remote-write MR (its responses may change it), a SEND, a fenced WRITE and
 * a FETCH_ADD whose original value lands in the remote-write MR too. */
static void post_writes(uint8_t flags2)
{
	static const struct { uint32_t opcode, len; uint64_t raddr; uint32_t flags; } w[] = {
		{ IBV_WR_RDMA_WRITE, 3000, 0x300000000ull, 0 },
		{ IBV_WR_RDMA_WRITE, 0, 0x300001000ull, 0 },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, 200, 0x300002000ull, 0 },
		{ IBV_WR_RDMA_READ, 3000, 0x300003000ull, 0 },
		{ IBV_WR_SEND, 300, 0, 0 },
		{ IBV_WR_RDMA_WRITE, 100, 0x300004000ull, IBV_SEND_FENCE },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 0x300005000ull, 0 },
	};
	uint32_t prod = qp->sq_ctl->prod;

	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++, prod++) {
		struct proto_swqe *s = &SQ(qp)[prod & (qp->sq_entries - 1)];
		bool read = w[i].opcode == IBV_WR_RDMA_READ ||
			    w[i].opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

		*s = (struct proto_swqe){ .wr_id = 100 + i, .opcode = w[i].opcode,
					  .flags = IBV_SEND_SIGNALED | w[i].flags,
					  .remote_addr = w[i].raddr, .rkey = 0x1234, .num_sge = 1,
					  .sge[0] = { SRC_IOVA + 8 * i, w[i].len, keys[K_SRC] } };
		if (read)
			s->sge[0] = (struct proto_sge){ IOVA_BASE + MAIN_OFF + 64, w[i].len,
							keys[K_MAIN] };
	}
	if (flags2 & G_BAD_WQE)
		SQ(qp)[(prod - 1) & (qp->sq_entries - 1)].sge[0].lkey = keys[K_BAD_BYTE];
	__atomic_store_n(&qp->sq_ctl->prod, prod, __ATOMIC_RELEASE);
}

/* Receives into two pieces of the remote-write MR (into the QP's ring, or the SRQ's); every
 * third names the MR without LOCAL_WRITE, which a SEND must not scatter into. */
static void post_receives(struct proto_ring_ctl *ctl, struct proto_rwqe *ring, uint32_t entries)
{
	uint32_t prod = ctl->prod;

	for (uint32_t i = 0; i < entries; i++, prod++)
		ring[prod & (entries - 1)] = (struct proto_rwqe){
			.wr_id = 1000 + i, .num_sge = 2,
			.sge = { { IOVA_BASE + MAIN_OFF + 16, 700, keys[K_MAIN] },
				 { i % 3 == 2 ? IOVA_BASE + RO_OFF : IOVA_BASE + MAIN_OFF + 2000,
				   i % 3 == 2 ? SMALL_LEN : 4000,
				   i % 3 == 2 ? keys[K_RO] : keys[K_MAIN] } } };
	__atomic_store_n(&ctl->prod, prod, __ATOMIC_RELEASE);
}

/* Receives of the UD QP, all in the remote-write MR (40 bytes of GRH area, then the
 * datagram); every third names an MR of another PD, which the daemon must refuse. */
static void post_ud_receives(void)
{
	uint32_t prod = udqp->rq_ctl->prod;

	for (uint32_t i = 0; i < udqp->rq_entries; i++, prod++)
		RQ(udqp)[prod & (udqp->rq_entries - 1)] = (struct proto_rwqe){
			.wr_id = 2000 + i, .num_sge = 2,
			.sge = { { IOVA_BASE + MAIN_OFF + 16, 700, keys[K_MAIN] },
				 { IOVA_BASE + (i % 3 == 2 ? PD2_OFF : MAIN_OFF + 2000),
				   i % 3 == 2 ? SMALL_LEN : 4000,
				   i % 3 == 2 ? keys[K_PD2] : keys[K_MAIN] } } };
	__atomic_store_n(&udqp->rq_ctl->prod, prod, __ATOMIC_RELEASE);
}

static void reset_ud_qp(uint8_t flags)
{
	struct proto_qp_attr a = { .state = IBV_QPS_RESET };

	modify_qp(udqp, IBV_QP_STATE, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_INIT, .qkey = UD_QKEY };
	modify_qp(udqp, IBV_QP_STATE | IBV_QP_QKEY, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_RTR };
	modify_qp(udqp, IBV_QP_STATE, &a);
	if (flags & F_RECV)
		post_ud_receives();
	a = (struct proto_qp_attr){ .state = IBV_QPS_RTS, .sq_psn = SQ_PSN };
	modify_qp(udqp, IBV_QP_STATE | IBV_QP_SQ_PSN, &a);
}

/* The UC QP connected to its peer as the RC QP is, with UC's attributes only. */
static void reset_uc_qp(uint8_t flags, uint8_t flags2)
{
	struct proto_qp_attr a = { .state = IBV_QPS_RESET };

	modify_qp(ucqp, IBV_QP_STATE, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_INIT,
				    .access = (flags2 & G_NO_RW) ? 0 : IBV_ACCESS_REMOTE_WRITE };
	modify_qp(ucqp, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_RTR, .dest_gid = PEER_GID,
				    .path_mtu = (flags & F_MTU256) ? IBV_MTU_256 : IBV_MTU_1024,
				    .dest_qpn = UC_PEER_QPN, .rq_psn = RQ_PSN };
	modify_qp(ucqp, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		  IBV_QP_RQ_PSN, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_RTS, .sq_psn = SQ_PSN };
	modify_qp(ucqp, IBV_QP_STATE | IBV_QP_SQ_PSN, &a);
}

/* The SRQ emptied of what an earlier input left, its limit event read, and armed again. */
static void reset_srq(uint8_t flags2)
{
	uint64_t events;

	srq->ctl->prod = srq->ctl->cons = srq->cons;
	srq->limit = (flags2 & G_SRQ) ? 4 : 0;
	while (read(srq->client_end, &events, sizeof(events)) > 0)
		;
}

static void reset_qp(uint8_t flags, uint8_t flags2)
{
	struct proto_qp_attr a = { .state = IBV_QPS_RESET };
	/* the connected QP the frames go to: it takes the receives */
	struct qp *rcv = (flags2 & G_UC) ? ucqp : qp;

	modify(IBV_QP_STATE, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_INIT,
				    .access = (flags2 & G_NO_RW) ? 0 : IBV_ACCESS_REMOTE_WRITE |
								      IBV_ACCESS_REMOTE_READ |
								      IBV_ACCESS_REMOTE_ATOMIC };
	modify(IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &a);
	a = (struct proto_qp_attr){ .state = IBV_QPS_RTR, .dest_gid = PEER_GID,
				    .path_mtu = (flags & F_MTU256) ? IBV_MTU_256 : IBV_MTU_1024,
				    .dest_qpn = PEER_QPN, .rq_psn = RQ_PSN, .min_rnr_timer = 3,
				    .max_dest_rd_atomic = 2 };
	modify(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	       IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC, &a);
	reset_ud_qp((flags2 & G_UD) ? flags : 0);
	reset_uc_qp(flags, flags2);
	qp->srq = ucqp->srq = NULL;
	rcv->srq = (flags2 & G_SRQ) ? srq : NULL;
	reset_srq(flags2);
	if ((flags & F_RECV) && rcv->srq)
		post_receives(srq->ctl, (struct proto_rwqe *)srq->ring, srq->entries);
	else if ((flags & F_RECV) && !(flags2 & G_UD))
		post_receives(rcv->rq_ctl, RQ(rcv), rcv->rq_entries);
	if ((flags2 & G_RQ_LIE) && rcv->srq)
		__atomic_store_n(&srq->ctl->prod, srq->cons + srq->entries + 1, __ATOMIC_RELEASE);
	else if (flags2 & G_RQ_LIE)
		__atomic_store_n(&rcv->rq_ctl->prod, rcv->resp.rq_cons + rcv->rq_entries + 1,
				 __ATOMIC_RELEASE);
	if (!(flags & F_RTS))
		return;
	post_writes(flags2);
	a = (struct proto_qp_attr){ .state = IBV_QPS_RTS, .sq_psn = SQ_PSN, .timeout = 10,
				    .retry_cnt = 2, .rnr_retry = 2, .max_rd_atomic = 1 };
	modify(IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC, &a);
}

/* The client's side of the CQ: wakeups read, completions consumed. */
static void drain_cq(void)
{
	uint64_t wakeups;

	cq_flush_notify(&dev);
	while (read(cq->client_end, &wakeups, sizeof(wakeups)) > 0)
		;
	__atomic_store_n(&cq->ctl->cons, cq->ctl->prod, __ATOMIC_RELEASE);
}

/* ---- patching a frame towards the responder ---- */

static void patch_lengths(uint8_t *f, size_t len, const struct wire_pkt *pkt)
{
	size_t total = len - pkt->l3_off;

	if (total > 0xffff || total < (size_t)pkt->ip_hdr_len + WIRE_UDP_LEN)
		return;
	put16(f + pkt->l3_off + 2, (uint16_t)total);
	put16(f + pkt->l3_off + pkt->ip_hdr_len + 4, (uint16_t)(total - pkt->ip_hdr_len));
}

static void patch_addrs(uint8_t *f, const struct wire_pkt *pkt)
{
	uint32_t peer = PEER_IP;

	memcpy(f + pkt->l3_off + 12, &peer, 4);
	memcpy(f + pkt->l3_off + 16, &dev.port.ipv4, 4);
}

static void patch_bth(uint8_t *f, const struct wire_pkt *pkt, uint8_t flags, uint8_t flags2)
{
	uint8_t *bth = f + pkt->l4_off + WIRE_UDP_LEN;
	bool uc = (flags2 & G_UC) && !(flags2 & G_UD);
	const struct wire_opcode_info *op;
	bool ack;

	/* UC's SEND and WRITE opcodes are RC's + 0x20, in the same layout */
	if (uc && bth[0] <= WIRE_OP_RC_WRITE_ONLY_IMM)
		bth[0] += WIRE_OP_UC_BASE;
	op = wire_opcode_info(bth[0]);
	ack = op && (op->kind == WIRE_KIND_ACK || op->kind == WIRE_KIND_READ_RESP ||
		     op->kind == WIRE_KIND_ATOMIC_ACK);
	if (flags & F_QPN)
		put24(bth + 5, (flags2 & G_UD) ? udqp->qpn : uc ? ucqp->qpn : qp->qpn);
	if (flags & F_PSN)
		put24(bth + 9, ((ack ? qp->req.snd_una : uc ? ucqp->resp.rcv_psn : qp->resp.rcv_psn) +
				(uint32_t)(int8_t)bth[11]) & WIRE_PSN_MASK);
}

static void patch_rkey(uint8_t *f, const struct wire_pkt *pkt)
{
	uint8_t *reth = f + pkt->payload_off - pkt->op->hdr_len;
	uint8_t *rkey = reth + ((pkt->op->headers & WIRE_HDR_DETH) ? WIRE_DETH_LEN : 0) +
			((pkt->op->headers & WIRE_HDR_FETH) ? WIRE_FETH_LEN : 0) + 8;
	uint32_t sel = get32(rkey) & 7;

	if (sel != K_ASIS)
		put32(rkey, keys[sel]);
}

static void patch(uint8_t *f, size_t len, uint8_t flags, uint8_t flags2)
{
	struct wire_pkt pkt;

	(void)wire_parse(f, len, &pkt);
	if ((flags2 & G_FIX_LEN) && (pkt.layers & WIRE_HAVE_IP) && pkt.ip_version == 4) {
		patch_lengths(f, len, &pkt);
		(void)wire_parse(f, len, &pkt);
	}
	if ((flags & F_ADDR) && (pkt.layers & WIRE_HAVE_IP) && pkt.ip_version == 4)
		patch_addrs(f, &pkt);
	if (pkt.layers & WIRE_HAVE_BTH)
		patch_bth(f, &pkt, flags, flags2);
	if ((flags & F_KEY) && (pkt.layers & WIRE_HAVE_ALL) &&
	    (pkt.op->headers & (WIRE_HDR_RETH | WIRE_HDR_ATOMICETH)))
		patch_rkey(f, &pkt);
	/* a DETH's Q_Key: an even one becomes the UD QP's, an odd one stays wrong */
	if ((flags & F_KEY) && (pkt.layers & WIRE_HAVE_ALL) && (pkt.op->headers & WIRE_HDR_DETH) &&
	    !(get32(f + pkt.payload_off - pkt.op->hdr_len) & 1))
		put32(f + pkt.payload_off - pkt.op->hdr_len, UD_QKEY);
	if ((flags & F_ICRC) && (pkt.layers & WIRE_HAVE_UDP))
		icrc_store(f + pkt.l4_off + pkt.udp_len - WIRE_ICRC_LEN,
			   icrc_compute(f + pkt.l3_off, pkt.ip_hdr_len, pkt.ip_version,
					pkt.udp_len));
}

/* ---- one input ---- */

static void one_frame(const uint8_t *data, size_t len, uint8_t flags, uint8_t flags2)
{
	uint8_t *f = malloc(len ? len : 1); /* exact size: ASan sees any overread */

	MUST(f != NULL);
	memcpy(f, data, len);
	patch(f, len, flags, flags2);
	receiving = f;
	receiving_len = len;
	rx_frame(&dev, f, len);
	receiving = NULL;
	/* the loop's turns, until what was queued (READ responses above all) has gone */
	for (int turn = 0; turn < 64; turn++) {
		sched_send(&dev);
		if (TAILQ_EMPTY(&dev.tp.ready))
			break;
	}
	free(f);
}

/* Nothing outside the remote-write MR changed; the MR itself is restored for the next. */
static void check_canaries(void)
{
	MUST(!memcmp(buf, pristine, MAIN_OFF));
	MUST(!memcmp(buf + MAIN_OFF + MAIN_LEN, pristine + MAIN_OFF + MAIN_LEN,
		     BUF_PAGES * PAGE - MAIN_OFF - MAIN_LEN));
	for (size_t i = 0; i < SRC_PAGES * PAGE; i++)
		MUST(src[i] == 0x5c);
	memcpy(buf + MAIN_OFF, pristine + MAIN_OFF, MAIN_LEN);
}

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("RX_FUZZ_SEEDS");

	(void)argc;
	(void)argv;
	setup();
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t flags, flags2;

	if (size < 2)
		return 0;
	flags = data[0];
	flags2 = data[1];
	data += 2;
	size -= 2;
	reset_qp(flags, flags2);
	rc_cnp_at = uc_cnp_at = -HUGE_VAL;
	for (unsigned i = 0; i < QP_UD_CNP_SLOTS; i++)
		ud_cnp_at[i] = -HUGE_VAL;
	for (int n = 0; n < MAX_FRAMES && size >= 2; n++) {
		size_t len = data[0] | (size_t)data[1] << 8;

		data += 2;
		size -= 2;
		if (len == 0) {
			comp_timer_cb(dev.loop, &qp->retry_timer, 0);
		} else if (len == 1) {
			req_rnr_cb(dev.loop, &qp->rnr_timer, 0);
		} else {
			len = len < size ? len : size;
			one_frame(data, len, flags, flags2);
			data += len;
			size -= len;
		}
		drain_cq();
	}
	check_canaries();
	return 0;
}

/* ---- seeds: frames a peer would send, built by wire/ ---- */

struct seed_frame {
	uint8_t opcode;
	int8_t psn;          /* relative to what the QP expects next (F_PSN): rcv_psn, or
			      * snd_una for ACKs */
	uint8_t key;         /* enum key_sel (F_KEY) */
	uint64_t va;         /* offset from the main MR's start */
	uint32_t dma_len;
	uint16_t len;        /* payload bytes; 0 and 1 with opcode 0 are the timer events */
	uint8_t syndrome;    /* ACKs */
	bool timer;
	uint8_t ecn;         /* the IP header's ECN field: WIRE_ECN_CE earns its sender a CNP */
};

struct seed {
	const char *name;
	uint8_t flags, flags2;
	struct seed_frame f[6];
};

#define ALL (F_QPN | F_ADDR | F_KEY | F_PSN | F_ICRC)
#define FIX G_FIX_LEN
#define MAIN_IOVA (IOVA_BASE + MAIN_OFF)

static const struct seed seeds[] = {
	{ "write-only", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_MAIN, 0, 100, 100, 0, 0 } } },
	{ "write-3pkt", ALL, FIX, { { WIRE_OP_RC_WRITE_FIRST, 0, K_MAIN, 8, 2548, 1024, 0, 0 },
				    { WIRE_OP_RC_WRITE_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
				    { WIRE_OP_RC_WRITE_LAST, 0, 0, 0, 0, 500, 0, 0 } } },
	{ "write-imm", ALL | F_RECV, FIX,
	  { { WIRE_OP_RC_WRITE_ONLY_IMM, 0, K_MAIN, 4, 64, 64, 0, 0 } } },
	{ "write-imm-rnr", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY_IMM, 0, K_MAIN, 4, 64, 64, 0, 0 } } },
	{ "write-imm-rq-lie", ALL | F_RECV, FIX | G_RQ_LIE,
	  { { WIRE_OP_RC_WRITE_ONLY_IMM, 0, K_MAIN, 4, 64, 64, 0, 0 } } },
	{ "qp-no-remote-write", ALL, FIX | G_NO_RW,
	  { { WIRE_OP_RC_WRITE_ONLY, 0, K_MAIN, 0, 16, 16, 0, 0 } } },
	{ "only-over-pmtu", ALL | F_MTU256, FIX,
	  { { WIRE_OP_RC_WRITE_ONLY, 0, K_MAIN, 0, 300, 300, 0, 0 } } },
	{ "first-short", ALL, FIX, { { WIRE_OP_RC_WRITE_FIRST, 0, K_MAIN, 0, 2000, 500, 0, 0 } } },
	{ "last-empty", ALL, FIX, { { WIRE_OP_RC_WRITE_FIRST, 0, K_MAIN, 0, 2048, 1024, 0, 0 },
				    { WIRE_OP_RC_WRITE_LAST, 0, 0, 0, 0, 0, 0, 0 } } },
	{ "read-only-mr", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_RO, 0, 16, 16, 0, 0 } } },
	{ "other-pd", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_PD2, 0, 16, 16, 0, 0 } } },
	{ "stale-key", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_DEAD, 0, 16, 16, 0, 0 } } },
	{ "bad-key-byte", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_BAD_BYTE, 0, 16, 16, 0, 0 } } },
	{ "past-end", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_MAIN, MAIN_LEN - 8, 16, 16, 0, 0 } } },
	{ "below-start", ALL, FIX,
	  { { WIRE_OP_RC_WRITE_ONLY, 0, K_MAIN, (uint64_t)-4, 16, 16, 0, 0 } } },
	{ "psn-ahead", ALL, FIX, { { WIRE_OP_RC_WRITE_ONLY, 5, K_MAIN, 0, 16, 16, 0, 0 },
				   { WIRE_OP_RC_WRITE_ONLY, -3, K_MAIN, 0, 16, 16, 0, 0 } } },
	{ "middle-alone", ALL, FIX, { { WIRE_OP_RC_WRITE_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 } } },
	{ "send", ALL, FIX, { { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 32, 0, 0 } } },
	{ "send-recv", ALL | F_RECV, FIX,
	  { { WIRE_OP_RC_SEND_FIRST, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_LAST_IMM, 0, 0, 0, 0, 100, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 32, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY_INV, 0, 0, 0, 0, 8, 0, 0 } } },
	{ "send-srq", ALL | F_RECV, FIX | G_SRQ,
	  { { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 32, 0, 0 },
	    { WIRE_OP_RC_SEND_FIRST, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_LAST, 0, 0, 0, 0, 100, 0, 0 },
	    { WIRE_OP_RC_WRITE_ONLY_IMM, 0, K_MAIN, 4, 64, 64, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 16, 0, 0 } } },
	{ "send-srq-lie", ALL | F_RECV, FIX | G_SRQ | G_RQ_LIE,
	  { { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 32, 0, 0 } } },
	{ "send-too-long", ALL | F_RECV, FIX,
	  { { WIRE_OP_RC_SEND_FIRST, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_LAST, 0, 0, 0, 0, 512, 0, 0 } } },
	{ "read", ALL, FIX, { { WIRE_OP_RC_READ_REQUEST, 0, K_MAIN, 0, 64, 0, 0, 0 } } },
	{ "read-3pkt-dup", ALL, FIX,
	  { { WIRE_OP_RC_READ_REQUEST, 0, K_MAIN, 8, 2500, 0, 0, 0 },
	    { WIRE_OP_RC_READ_REQUEST, -2, K_MAIN, 1032, 1476, 0, 0, 0 },
	    { WIRE_OP_RC_READ_REQUEST, 0, K_RO, 0, 16, 0, 0, 0 } } },
	{ "read-responses", ALL | F_RTS, FIX,
	  { { WIRE_OP_RC_ACK, 4, 0, 0, 0, 0, WIRE_SYN_ACK, 0 },
	    { WIRE_OP_RC_READ_RESP_FIRST, 0, 0, 0, 0, 1024, WIRE_SYN_ACK, 0 },
	    { WIRE_OP_RC_READ_RESP_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_READ_RESP_LAST, 0, 0, 0, 0, 952, WIRE_SYN_ACK, 0 },
	    { WIRE_OP_RC_ACK, 1, 0, 0, 0, 0, WIRE_SYN_ACK, 0 },
	    { WIRE_OP_RC_ATOMIC_ACK, 0, 0, 0, 0, 0, WIRE_SYN_ACK, 0 } } },
	{ "atomic", ALL, FIX, { { 0x13, 0, K_MAIN, 0, 8, 0, 0, 0 }, { 0x14, 0, K_MAIN, 0, 8, 0, 0, 0 } } },
	/* MAIN_OFF is 4 past a multiple of 8: offset 4 is aligned */
	{ "atomic-aligned-dup", ALL, FIX,
	  { { WIRE_OP_RC_FETCH_ADD, 0, K_MAIN, 4, 8, 0, 0, 0 },
	    { WIRE_OP_RC_COMPARE_SWAP, 0, K_MAIN, 12, 8, 0, 0, 0 },
	    { WIRE_OP_RC_FETCH_ADD, -2, K_MAIN, 4, 8, 0, 0, 0 },
	    { WIRE_OP_RC_FETCH_ADD, 0, K_RO, 0, 8, 0, 0, 0 } } },
	{ "acks", ALL | F_RTS, FIX, { { WIRE_OP_RC_ACK, 2, 0, 0, 0, 0, WIRE_SYN_ACK, 0 },
				      { WIRE_OP_RC_ACK, 0, 0, 0, 0, 0, WIRE_SYN_NAK_PSN_SEQ, 0 },
				      { WIRE_OP_RC_ACK, 1, 0, 0, 0, 0, WIRE_SYN_ACK, 0 } } },
	{ "acks-bad-wqe", ALL | F_RTS, FIX | G_BAD_WQE,
	  { { WIRE_OP_RC_ACK, 2, 0, 0, 0, 0, WIRE_SYN_ACK, 0 },
	    { WIRE_OP_RC_ACK, 0, 0, 0, 0, 0, WIRE_SYN_ACK, 0 } } },
	{ "rnr-nak", ALL | F_RTS, FIX, { { WIRE_OP_RC_ACK, 0, 0, 0, 0, 0, 0x20 | 3, 0 },
					 { 0, 0, 0, 0, 0, 1, 0, true },
					 { WIRE_OP_RC_ACK, 4, 0, 0, 0, 0, WIRE_SYN_ACK, 0 } } },
	{ "nak-access", ALL | F_RTS, FIX,
	  { { WIRE_OP_RC_ACK, 1, 0, 0, 0, 0, WIRE_SYN_NAK_REM_ACCESS, 0 } } },
	{ "nak-inv", ALL | F_RTS, FIX, { { WIRE_OP_RC_ACK, 0, 0, 0, 0, 0, WIRE_SYN_NAK_INV_REQ, 0 } } },
	{ "nak-rem-op", ALL | F_RTS, FIX,
	  { { WIRE_OP_RC_ACK, 0, 0, 0, 0, 0, WIRE_SYN_NAK_REM_OP, 0 } } },
	{ "read-response", ALL | F_RTS, FIX, { { 0x10, 0, 0, 0, 0, 64, WIRE_SYN_ACK, 0 } } },
	{ "timeouts", ALL | F_RTS | F_MTU256, FIX, { { 0, 0, 0, 0, 0, 0, 0, true },
						     { 0, 0, 0, 0, 0, 0, 0, true },
						     { 0, 0, 0, 0, 0, 0, 0, true } } },
	{ "bad-icrc", ALL & ~F_ICRC, FIX, { { WIRE_OP_RC_WRITE_ONLY, 0, K_MAIN, 0, 16, 16, 0, 0 } } },
	/* UD: key 0 is the QP's Q_Key, 1 a wrong one, 2 the QP's from another sender QP; the
	 * third receive names another PD */
	{ "ud-send", ALL | F_RECV, FIX | G_UD,
	  { { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 100, 0, 0 },
	    { WIRE_OP_UD_SEND_ONLY_IMM, 0, 0, 0, 0, 4096, 0, 0 },
	    { WIRE_OP_UD_SEND_ONLY, 0, 1, 0, 0, 8, 0, 0 },
	    { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 600, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 8, 0, 0 } } },
	/* marked CE on the way: the first two earn their two senders a CNP each, the third
	 * comes within the first sender's interval */
	{ "ud-send-ce", ALL | F_RECV, FIX | G_UD,
	  { { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 100, 0, 0, WIRE_ECN_CE },
	    { WIRE_OP_UD_SEND_ONLY, 0, 2, 0, 0, 100, 0, 0, WIRE_ECN_CE },
	    { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 100, 0, 0, WIRE_ECN_CE } } },
	{ "ud-no-recv", ALL, FIX | G_UD, { { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 64, 0, 0 } } },
	/* UC: the opcodes are RC's, turned into UC's by G_UC; a gap drops the rest of its
	 * message, a refusal drops it silently */
	{ "uc-send-write", ALL | F_RECV, FIX | G_UC,
	  { { WIRE_OP_RC_SEND_FIRST, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_LAST_IMM, 0, 0, 0, 0, 100, 0, 0 },
	    { WIRE_OP_RC_WRITE_FIRST, 0, K_MAIN, 8, 2548, 1024, 0, 0 },
	    { WIRE_OP_RC_WRITE_MIDDLE, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_WRITE_LAST_IMM, 0, 0, 0, 0, 500, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 32, 0, 0 } } },
	{ "uc-gap", ALL | F_RECV, FIX | G_UC,
	  { { WIRE_OP_RC_SEND_FIRST, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_LAST, 1, 0, 0, 0, 100, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 2, 0, 0, 0, 64, 0, 0 },
	    { WIRE_OP_RC_WRITE_FIRST, 0, K_MAIN, 0, 2048, 1024, 0, 0 },
	    { WIRE_OP_RC_WRITE_ONLY, 3, K_MAIN, 0, 16, 16, 0, 0 },
	    { WIRE_OP_RC_WRITE_LAST, 0, 0, 0, 0, 1024, 0, 0 } } },
	{ "uc-refused", ALL | F_RECV, FIX | G_UC | G_SRQ,
	  { { WIRE_OP_RC_WRITE_ONLY_IMM, 0, K_RO, 0, 16, 16, 0, 0 },
	    { WIRE_OP_RC_WRITE_FIRST, 0, K_MAIN, MAIN_LEN - 8, 2048, 1024, 0, 0 },
	    { WIRE_OP_RC_WRITE_LAST, 0, 0, 0, 0, 1024, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 1500, 0, 0 },
	    { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 8, 0, 0 } } },
	{ "uc-no-recv", ALL, FIX | G_UC, { { WIRE_OP_RC_SEND_ONLY, 0, 0, 0, 0, 64, 0, 0 },
					   { WIRE_OP_RC_READ_REQUEST, 0, K_MAIN, 0, 64, 0, 0, 0 } } },
	{ "ud-too-long", ALL | F_RECV, FIX | G_UD,
	  { { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 4096, 0, 0 },
	    { WIRE_OP_UD_SEND_ONLY, 0, 0, 0, 0, 4100, 0, 0 } } },
};

static size_t put_seed_frame(uint8_t *out, const struct seed_frame *s)
{
	static const uint8_t payload[8192];
	const struct wire_path path = { .src_mac = { 2, 0, 0, 0, 0, 1 },
					.dst_mac = { 2, 0, 0, 0, 0, 2 }, .src_ip = PEER_IP,
					.dst_ip = DEV_IP, .src_port = 0xc001, .ttl = 64,
					.tos = s->ecn };
	struct wire_bth bth = { .opcode = s->opcode, .pkey = 0xffff, .dest_qp = qp->qpn,
				.ack_req = true, .psn = (uint8_t)s->psn };
	struct wire_ext ext = { .reth = { MAIN_IOVA + s->va, s->key, s->dma_len },
				.atomic = { MAIN_IOVA + s->va, s->key, 5, 0 },
				.aeth = { s->syndrome, 0 }, .imm = 0x1234,
				.deth = { s->key == 1 ? 0xbad1 : 0, PEER_QPN + (s->key == 2) } };
	size_t len;

	if (s->timer) {
		out[0] = (uint8_t)s->len;
		out[1] = 0;
		return 2;
	}
	len = wire_build(out + 2, DEV_FRAME_MAX, &path, 1, &bth, &ext, payload, s->len);
	MUST(len > 0);
	out[0] = (uint8_t)len;
	out[1] = (uint8_t)(len >> 8);
	return len + 2;
}

static void write_seeds(const char *dir)
{
	static uint8_t in[MAX_FRAMES * (DEV_FRAME_MAX + 2) + 2];

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		const struct seed *s = &seeds[i];
		char path[512];
		size_t len = 2;
		FILE *f;

		in[0] = s->flags;
		in[1] = s->flags2;
		/* an unused slot is all zero; SEND FIRST is opcode 0, but never empty */
		for (size_t k = 0; k < 6 && (s->f[k].opcode || s->f[k].timer || s->f[k].len); k++)
			len += put_seed_frame(in + len, &s->f[k]);
		snprintf(path, sizeof(path), "%s/seed-%s", dir, s->name);
		f = fopen(path, "wb");
		MUST(f && fwrite(in, 1, len, f) == len && fclose(f) == 0);
	}
}
