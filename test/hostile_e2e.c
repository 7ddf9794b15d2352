/* hostile_e2e: malformed and hostile RoCEv2 packets against one running rocemud, on the
 * wire.
 *
 *   hostile_e2e SOCKET PEER_IP SPOOF_IP [CASE...]
 *
 * The program plays the remote peer itself. On the daemon behind SOCKET it registers Memory
 * Regions in the middle of larger pattern-filled buffers (canaries on both sides), and
 * connects an RC QP (RTR) to PEER_IP, an address of the daemon's interface (lo) where no
 * daemon runs. It crafts frames with wire/ (wire_build, then byte mutations, the ICRC
 * recomputed with icrc/ wherever the case must reach a later check), sends them with an
 * AF_PACKET socket, and reads the daemon's answers (ACK/NAK to PEER_IP) with a second one.
 * SPOOF_IP is another local address, for packets from someone other than the QP's peer.
 *
 * For every case of the table below, in order, on a QP freshly taken through
 * RESET -> INIT -> RTR with a new expected PSN:
 *   - every counter of the daemon moved exactly as expected (each counter the case names by
 *     its number, every other one not at all; sent_pkts by the number of answers);
 *   - the answers are exactly the expected ACK/NAKs (syndrome and PSN), with a valid ICRC;
 *   - every byte of the watched buffers holds what it must: the canary pattern, or what the
 *     frames the case lets land wrote there; another process's MR is checked by its owner.
 * A barrier follows each case's frames: an ACK for a PSN never sent, to a second QP in RTS,
 * which only the drop_stale_ack counter (used by no case) counts. Once it is counted, the
 * daemon has handled every frame before it, since it handles frames in capture order.
 *
 * One line per case, "CASE: OK|FAIL: what was seen"; exit 0 when every case matched, 1
 * otherwise, 2 for bad usage or when the setup failed. Needs root (AF_PACKET). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/rocemu.h"
#include "icrc/icrc.h"
#include "test/e2e.h"
#include "wire/wire.h"

/* rocemuctl's control-socket client, compiled in: counters are read exactly as
 * `rocemuctl stats` reads them. */
#include "tools/ctl_client.c"

#define PAGE          4096u
#define MAIN_PAGES    16
#define MAIN_MR_OFF   (4 * PAGE + 100)  /* odd offsets: canaries share the MR's first and */
#define MAIN_MR_LEN   (6 * PAGE + 37)   /* last pages, so sub-page bounds are tested too */
#define AUX_PAGES     8
#define AUX_MR_LEN    PAGE              /* the read-only, other-PD and deregistered MRs */
#define LATE_MR_LEN   3000              /* deregistered in the middle of a message */
#define CHILD_PAGES   4
#define CHILD_MR_OFF  (PAGE + 100)
#define CHILD_MR_LEN  (2 * PAGE)
#define PMTU_ENUM     IBV_MTU_1024
#define PMTU          1024
#define PEER_QPN      0x0abcde          /* the fictitious peer's QP */
#define MIN_RNR_TIMER 14                /* RNR NAK syndrome 0x20 | 14 */
#define BARRIER_SQ_PSN 0x000100
#define MAX_PKTS      4
#define MAX_PAYLOAD   16384
#define FRAME_CAP     (MAX_PAYLOAD + 256)
#define WAIT_MS       3000              /* the longest wait for the barrier or an answer */
#define CHILD_WAIT_MS 120000
#define FIRST_PSN     0x5a1c3e
#define RECV_WR_ID    0x5ec5

enum seed { SEED_MAIN = 1, SEED_AUX, SEED_CHILD };

/* ---- the daemon's counters, by name ---- */

/* The counters of the stats reply, then its refusals by reason (refused_NAME), as one
 * list: a case names the reason its NAK must give, and every other one must stay still. */
#define CNT_ENUM(name, help) C_##name,
#define REFUSED_ENUM(name, help) C_refused_##name,
enum counter { PROTO_COUNTERS(CNT_ENUM) PROTO_REFUSALS(REFUSED_ENUM) C_COUNT };
#undef CNT_ENUM
#undef REFUSED_ENUM
#define CNT_NAME(name, help) #name,
#define REFUSED_NAME(name, help) "refused_" #name,
static const char *const counter_names[C_COUNT] = { PROTO_COUNTERS(CNT_NAME)
						    PROTO_REFUSALS(REFUSED_NAME) };
#undef CNT_NAME
#undef REFUSED_NAME
_Static_assert((int)C_refused_none == (int)PROTO_NCOUNTERS,
	       "PROTO_COUNTERS and the reply disagree");

/* ---- a case: the packets a peer sends, a mutation, and what must follow ---- */

enum {
	OP_FIRST = WIRE_OP_RC_WRITE_FIRST,
	OP_MIDDLE = WIRE_OP_RC_WRITE_MIDDLE,
	OP_LAST = WIRE_OP_RC_WRITE_LAST,
	OP_ONLY = WIRE_OP_RC_WRITE_ONLY,
	OP_ONLY_IMM = WIRE_OP_RC_WRITE_ONLY_IMM,
	OP_SEND = WIRE_OP_RC_SEND_ONLY,
	OP_SEND_FIRST = WIRE_OP_RC_SEND_FIRST,
	OP_SEND_MIDDLE = WIRE_OP_RC_SEND_MIDDLE,
	OP_SEND_LAST = WIRE_OP_RC_SEND_LAST,
	OP_READ = WIRE_OP_RC_READ_REQUEST,
	OP_FLUSH = WIRE_OP_RC_FLUSH,
	OP_CMP_SWAP = WIRE_OP_RC_COMPARE_SWAP,
	OP_FETCH_ADD = WIRE_OP_RC_FETCH_ADD,
	OP_ACK = WIRE_OP_RC_ACK,
	OP_READ_RESP = WIRE_OP_RC_READ_RESP_ONLY,
	OP_ATOMIC_ACK = WIRE_OP_RC_ATOMIC_ACK,
	OP_UC_ONLY = WIRE_OP_UC_BASE + WIRE_OP_RC_WRITE_ONLY,
	OP_UC_FIRST = WIRE_OP_UC_BASE + WIRE_OP_RC_WRITE_FIRST,
	OP_UC_SEND = WIRE_OP_UC_BASE + WIRE_OP_RC_SEND_ONLY,
	OP_UD_SEND = WIRE_OP_UD_SEND_ONLY,
	OP_CNP = WIRE_OP_CNP,
};

/* Memory the daemon knows about, as targets of a RETH. */
enum target { T_MR, T_RO, T_PD2, T_DEAD, T_LATE, T_CHILD, T_COUNT };
/* Where a RETH's VA points: a target's start (or the main MR's end) plus an offset, or an
 * absolute address. */
enum va_at { AT_MR, AT_MR_END, AT_RO, AT_PD2, AT_DEAD, AT_LATE, AT_CHILD, AT_ABS };
/* Which rkey a RETH carries. */
enum key_sel { KEY_MR, KEY_RO, KEY_PD2, KEY_DEAD, KEY_LATE, KEY_CHILD, KEY_BAD_BYTE,
	       KEY_BAD_BYTE_RO, KEY_NEXT_INDEX, KEY_ABS };

struct pkt {                 /* one request packet, as a well-behaved peer builds it */
	bool used;
	bool ack_req;
	uint8_t opcode;
	uint16_t len;            /* payload bytes */
	int32_t psn;             /* relative to the QP's expected PSN */
};

struct reth_sel {            /* the RETH of every FIRST/ONLY packet of the case */
	uint8_t at;              /* enum va_at */
	uint8_t key;             /* enum key_sel */
	uint64_t off;            /* added modulo 2^64 */
	uint32_t key_val;        /* KEY_ABS */
	uint32_t dma_len;
};

/* Not an AETH syndrome rocemu sends (NAK code 31 is reserved): the answer is a CNP. */
#define ANSWER_CNP 0xff
struct answer {              /* syndrome 0 ends the list: rocemu never answers with it */
	uint8_t syndrome;
	int32_t psn;             /* relative to the QP's expected PSN */
	bool msn_checked;        /* the AETH's MSN must be msn */
	uint32_t msn;
};

struct delta {               /* n 0 ends the list */
	uint8_t counter;         /* enum counter */
	uint16_t n;
};

struct env;
struct shot;
typedef void (*mutate_fn)(struct env *e, struct shot *s, long arg);

struct hcase {
	const char *name;
	struct pkt pkts[MAX_PKTS];
	struct reth_sel reth;
	mutate_fn mutate;        /* applied to the built frames; NULL: none */
	long arg;
	unsigned lands;          /* bit i: frame i's payload must land where its VA says */
	unsigned rcvd;           /* frames admitted to a QP (rcvd_pkts) */
	struct answer ans[3];
	struct delta d[5];       /* counters that move; every other one must not */
	uint8_t why;             /* enum proto_refusal: the reason its NAK must count */
	uint32_t psn;            /* the QP's expected PSN; 0: a fresh one */
	bool qp_no_write;        /* the QP itself lacks IBV_ACCESS_REMOTE_WRITE (and FLUSH's) */
	uint8_t flush_type;      /* a FLUSH's placement type; 0: WIRE_FLUSH_GLOBAL */
	bool to_rts;             /* to the barrier's QP: in RTS, with nothing outstanding */
	uint32_t recv_len;       /* a receive of so many bytes is posted at the RETH's VA, in
				  * the main MR; SEND payloads land from there */
	int (*between)(struct env *e); /* run once the first frame was handled, before the rest */
	bool (*verify)(struct env *e);
};

/* ---- what one case sends ---- */

struct frame {
	uint8_t *b;
	size_t len;
	uint64_t va;             /* where its payload would land */
	uint8_t *data;           /* its payload, as built */
	size_t data_len;
};

struct shot {
	struct frame f[MAX_PKTS];
	int n;
};

struct mrinfo {
	uint64_t va;
	uint64_t len;
	uint32_t rkey;
};

/* A buffer the daemon must not touch except where a case lets a write land. */
struct watched {
	const char *name;
	uint8_t *p;
	uint8_t *shadow;         /* what p must hold */
	size_t len;
};

struct child {
	pid_t pid;
	int up, down;            /* child -> parent, parent -> child */
	bool ok;
	char why[160];
};

/* What the child reports: first its MR, then on each request what its buffer holds. */
struct child_msg {
	int32_t ok;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	uint64_t changed_at;     /* the first changed offset of its whole buffer, or its size */
	uint64_t size;
	char why[160];
};

struct env {
	const char *sock;
	struct rocemu_context *ctx;
	struct rocemu_port_attr port;
	struct rocemu_pd *pd, *pd2;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;    /* the target of every case */
	struct rocemu_qp *bqp;   /* in RTS, for the barrier */
	struct rocemu_mr *mr, *ro_mr, *pd2_mr, *late_mr;
	struct mrinfo t[T_COUNT];
	struct watched w[2];
	struct child child;
	int ctl, tx, rx, guard;
	int ifindex;
	uint32_t self, peer, spoof; /* network byte order */
	uint32_t psn;            /* the case's expected PSN */
	uint32_t psn_seq;
	uint16_t ip_id;
	struct wire_path path;
	struct shot shot;
	struct frame barrier;
	uint64_t before[C_COUNT], after[C_COUNT];
};

static int vfail(struct env *e, const char *call, int err)
{
	const char *why = e->ctx ? rocemu_last_error(e->ctx) : "";

	e2e_error("%s: %s%s%s%s", call, strerror(err), *why ? " (" : "", why, *why ? ")" : "");
	return -1;
}

/* ---- patterns ---- */

static uint8_t canary(size_t i, unsigned seed)
{
	return (uint8_t)(seed * 131 + i * 13 + (i >> 9));
}

static void fill_canary(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = canary(i, seed);
}

/* Payload bytes unlike the canaries, different for every frame of every case. */
static void fill_payload(uint8_t *p, size_t len, unsigned seed)
{
	uint32_t x = seed * 2654435761u;

	for (size_t i = 0; i < len; i++) {
		x = x * 1664525u + 1013904223u;
		p[i] = (uint8_t)(x >> 24);
	}
}

static uint8_t *map_pages(size_t pages, unsigned seed)
{
	void *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	fill_canary(p, pages * PAGE, seed);
	return p;
}

static int watch(struct watched *w, const char *name, size_t pages, unsigned seed)
{
	w->name = name;
	w->len = pages * PAGE;
	w->p = map_pages(pages, seed);
	w->shadow = malloc(w->len);
	if (!w->p || !w->shadow) {
		e2e_error("%s: no memory for %zu bytes", name, w->len);
		return -1;
	}
	memcpy(w->shadow, w->p, w->len);
	return 0;
}

/* Every byte of w as its shadow says; on a difference the shadow takes what is there, so
 * the next case is judged on its own. */
static bool watched_ok(struct watched *w)
{
	size_t first = 0, n = 0;

	for (size_t i = 0; i < w->len; i++)
		if (w->p[i] != w->shadow[i] && n++ == 0)
			first = i;
	if (!n)
		return true;
	e2e_mismatch("%s buffer: %zu byte(s) changed that must not have, the first at offset %zu "
		     "(0x%02x, expected 0x%02x)", w->name, n, first, w->p[first], w->shadow[first]);
	memcpy(w->shadow, w->p, w->len);
	return false;
}

/* ---- frames: byte helpers over a built IPv4 frame ---- */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void wr24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static uint8_t *ip_of(struct frame *f)
{
	return f->b + WIRE_ETH_LEN;
}

static size_t ihl_of(const struct frame *f)
{
	return (size_t)(f->b[WIRE_ETH_LEN] & 0x0f) * 4;
}

static uint8_t *udp_of(struct frame *f)
{
	return ip_of(f) + ihl_of(f);
}

static uint8_t *bth_of(struct frame *f)
{
	return udp_of(f) + WIRE_UDP_LEN;
}

static void ip_checksum(struct frame *f)
{
	uint8_t *ip = ip_of(f);
	uint32_t sum = 0;

	wr16(ip + 10, 0);
	for (size_t i = 0; i < ihl_of(f); i += 2)
		sum += rd16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	wr16(ip + 10, ~sum & 0xffff);
}

/* IP total length and UDP length for a datagram of ip_total bytes. */
static void set_lengths(struct frame *f, size_t ip_total)
{
	wr16(ip_of(f) + 2, (unsigned)ip_total);
	wr16(udp_of(f) + 4, (unsigned)(ip_total - ihl_of(f)));
	ip_checksum(f);
}

/* A valid ICRC where the UDP length says the datagram ends, so the daemon reaches the check
 * the case aims at instead of stopping at the ICRC. */
static void seal(struct frame *f)
{
	uint8_t *ip = ip_of(f);
	size_t ihl = ihl_of(f), udp_len = rd16(udp_of(f) + 4);

	icrc_store(ip + ihl + udp_len - ICRC_LEN, icrc_compute(ip, ihl, 4, udp_len));
}

/* ---- building a case's frames ---- */

static uint64_t reth_va(const struct env *e, const struct reth_sel *r)
{
	static const uint8_t target_of[] = { [AT_MR] = T_MR, [AT_MR_END] = T_MR,
		[AT_RO] = T_RO, [AT_PD2] = T_PD2, [AT_DEAD] = T_DEAD, [AT_LATE] = T_LATE,
		[AT_CHILD] = T_CHILD };
	const struct mrinfo *t;

	if (r->at == AT_ABS)
		return r->off;
	t = &e->t[target_of[r->at]];
	return t->va + (r->at == AT_MR_END ? t->len : 0) + r->off;
}

/* The next index with our key byte: stale for the MR registered there next, unless (one
 * run in 256) that MR's random key byte is ours too, when the rkey would be its own and
 * be checked as its: then a key byte that is neither. */
static uint32_t next_index_key(const struct env *e)
{
	uint32_t key = e->t[T_MR].rkey + 0x100;

	for (int i = 0; i < T_COUNT; i++)
		if (e->t[i].rkey == key)
			return key ^ 0x01;
	return key;
}

static uint32_t reth_key(const struct env *e, const struct reth_sel *r)
{
	static const uint8_t target_of[] = { [KEY_MR] = T_MR, [KEY_RO] = T_RO,
		[KEY_PD2] = T_PD2, [KEY_DEAD] = T_DEAD, [KEY_LATE] = T_LATE,
		[KEY_CHILD] = T_CHILD };

	switch (r->key) {
	case KEY_ABS: return r->key_val;
	case KEY_BAD_BYTE: return e->t[T_MR].rkey ^ 0x01;   /* same index, other key byte */
	case KEY_BAD_BYTE_RO: return e->t[T_RO].rkey ^ 0x01;
	case KEY_NEXT_INDEX: return next_index_key(e);
	default: return e->t[target_of[r->key]].rkey;
	}
}

/* Frame i of case c (index idx), as wire_build makes it; the payload of a MIDDLE/LAST
 * would land right after the previous packet's. */
static int put_pkt(struct env *e, const struct hcase *c, int idx, int i, uint64_t *va)
{
	const struct pkt *p = &c->pkts[i];
	const struct wire_opcode_info *op = wire_opcode_info(p->opcode);
	struct wire_bth bth = { .opcode = p->opcode, .pkey = 0xffff,
				.dest_qp = c->to_rts ? e->bqp->qp_num : e->qp->qp_num,
				.ack_req = p->ack_req,
				.psn = (e->psn + (uint32_t)p->psn) & WIRE_PSN_MASK };
	struct wire_ext ext = { .reth = { reth_va(e, &c->reth), reth_key(e, &c->reth),
					  c->reth.dma_len },
				.aeth = { .syndrome = WIRE_SYN_ACK } };

	/* a FLUSH asks for global visibility of its range unless the case says otherwise */
	ext.feth.placement = c->flush_type ? c->flush_type : WIRE_FLUSH_GLOBAL;
	ext.feth.selectivity = WIRE_FLUSH_RANGE;
	/* an atomic names its word as a READ or WRITE names its first byte */
	ext.atomic.va = ext.reth.va;
	ext.atomic.rkey = ext.reth.rkey;
	struct frame *f = &e->shot.f[i];

	if (op && (op->headers & WIRE_HDR_RETH))
		*va = ext.reth.va;
	f->va = *va;
	f->data_len = p->len;
	*va += p->len;
	fill_payload(f->data, p->len, (unsigned)(idx * MAX_PKTS + i + 1));
	f->len = wire_build(f->b, FRAME_CAP, &e->path, e->ip_id++, &bth, &ext, f->data, p->len);
	if (!f->len)
		e2e_error("wire_build refused packet %d (opcode 0x%02x, %u bytes)", i, p->opcode,
			  p->len);
	return f->len ? 0 : -1;
}

static int build_shot(struct env *e, const struct hcase *c, int idx)
{
	uint64_t va = c->recv_len ? reth_va(e, &c->reth) : 0;

	e->shot.n = 0;
	for (int i = 0; i < MAX_PKTS && c->pkts[i].used; i++) {
		if (put_pkt(e, c, idx, i, &va) < 0)
			return -1;
		e->shot.n++;
	}
	if (c->mutate)
		c->mutate(e, &e->shot, c->arg);
	return 0;
}

/* ---- mutations of the first frame (arg as each says) ---- */

enum cut { CUT_ETH, CUT_IP, CUT_UDP_PORT, CUT_UDP, CUT_BTH, CUT_RETH, CUT_PAYLOAD, CUT_PAD,
	   CUT_LAST_BYTE };
#define SEALED 0x100   /* m_end: the datagram keeps room for an ICRC, and a valid one */
#define STALE  0x100   /* m_options: the ICRC stays the one computed without options */

static size_t cut_at(const struct frame *f, long where)
{
	static const size_t fixed[] = {
		[CUT_ETH] = WIRE_ETH_LEN,
		[CUT_IP] = WIRE_ETH_LEN + WIRE_IPV4_LEN,
		[CUT_UDP_PORT] = WIRE_ETH_LEN + WIRE_IPV4_LEN + 4,
		[CUT_UDP] = WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN,
		[CUT_BTH] = WIRE_BASE_LEN,
		[CUT_RETH] = WIRE_BASE_LEN + WIRE_RETH_LEN,
	};

	switch (where) {
	case CUT_PAYLOAD: return fixed[CUT_RETH] + f->data_len;
	case CUT_PAD: return f->len - ICRC_LEN;
	case CUT_LAST_BYTE: return f->len - 1;
	default: return fixed[where];
	}
}

/* The frame ends at a header boundary; its IP and UDP lengths still promise the rest. */
static void m_cut(struct env *e, struct shot *s, long where)
{
	(void)e;
	s->f[0].len = cut_at(&s->f[0], where);
}

/* The datagram ends at a boundary and says so: IP and UDP lengths fit what is left. */
static void m_end(struct env *e, struct shot *s, long arg)
{
	struct frame *f = &s->f[0];
	bool sealed = arg & SEALED;

	(void)e;
	f->len = cut_at(f, arg & ~SEALED) + (sealed ? ICRC_LEN : 0);
	set_lengths(f, f->len - WIRE_ETH_LEN);
	if (sealed)
		seal(f);
}

/* The UDP length alone off by arg: it disagrees with the IP length. */
static void m_udp_len(struct env *e, struct shot *s, long arg)
{
	uint8_t *udp = udp_of(&s->f[0]);

	(void)e;
	wr16(udp + 4, (unsigned)(rd16(udp + 4) + arg));
}

/* IP and UDP lengths agree, but promise arg bytes more (or less) than the frame holds. */
static void m_ip_len(struct env *e, struct shot *s, long arg)
{
	struct frame *f = &s->f[0];

	(void)e;
	set_lengths(f, (size_t)(rd16(ip_of(f) + 2) + arg));
}

/* An IP total length of arg, the UDP length left alone. */
static void m_ip_total(struct env *e, struct shot *s, long arg)
{
	(void)e;
	wr16(ip_of(&s->f[0]) + 2, (unsigned)arg);
	ip_checksum(&s->f[0]);
}

/* arg bytes of Ethernet trailer after the datagram, as padding of short frames adds. */
static void m_trailer(struct env *e, struct shot *s, long arg)
{
	struct frame *f = &s->f[0];

	(void)e;
	memset(f->b + f->len, 0xa5, (size_t)arg);
	f->len += (size_t)arg;
}

/* The IPv4 flags and fragment offset field set to arg; the ICRC covers that field. */
static void m_frag(struct env *e, struct shot *s, long arg)
{
	(void)e;
	wr16(ip_of(&s->f[0]) + 6, (unsigned)arg);
	ip_checksum(&s->f[0]);
	seal(&s->f[0]);
}

/* arg & 0xff bytes of IPv4 options (Router Alert, then NOPs); the ICRC covers them unless
 * STALE, when it stays the one of the frame without them. */
static void m_options(struct env *e, struct shot *s, long arg)
{
	static const uint8_t router_alert[4] = { 0x94, 0x04, 0x00, 0x00 };
	struct frame *f = &s->f[0];
	size_t n = (size_t)(arg & 0xff), total = rd16(ip_of(f) + 2);
	uint8_t *opt = ip_of(f) + WIRE_IPV4_LEN;

	(void)e;
	memmove(opt + n, opt, f->len - WIRE_ETH_LEN - WIRE_IPV4_LEN);
	memset(opt, 0x01, n);
	memcpy(opt, router_alert, sizeof(router_alert));
	ip_of(f)[0] = (uint8_t)(0x40 | (WIRE_IPV4_LEN + n) / 4);
	f->len += n;
	set_lengths(f, total + n);
	if (!(arg & STALE))
		seal(f);
}

/* TOS (DSCP EF, ECN CE) and TTL changed on the way, as routers do: the ICRC masks both. */
static void m_tos_ttl(struct env *e, struct shot *s, long arg)
{
	(void)e;
	(void)arg;
	ip_of(&s->f[0])[1] = 0xba;       /* DSCP 46 and ECT(0): no congestion met */
	ip_of(&s->f[0])[8] = 1;
	ip_checksum(&s->f[0]);
}

/* A switch on the way met congestion and marked the packet Congestion Experienced. */
static void m_ecn_ce(struct env *e, struct shot *s, long arg)
{
	(void)e;
	(void)arg;
	ip_of(&s->f[0])[1] |= WIRE_ECN_CE;
	ip_checksum(&s->f[0]);
}

/* The IPv4 header checksum wrong: the ICRC masks it, and the header is otherwise intact. */
static void m_ip_csum(struct env *e, struct shot *s, long arg)
{
	(void)e;
	(void)arg;
	ip_of(&s->f[0])[10] ^= 0x5a;
}

/* FECN, BECN and the reserved bits of BTH byte 4 set on the way: the ICRC masks them. */
static void m_bth_byte4(struct env *e, struct shot *s, long arg)
{
	(void)e;
	(void)arg;
	bth_of(&s->f[0])[4] = 0xff;
}

static void m_tver(struct env *e, struct shot *s, long arg)
{
	uint8_t *bth = bth_of(&s->f[0]);

	(void)e;
	bth[1] = (uint8_t)((bth[1] & 0xf0) | arg);
	seal(&s->f[0]);
}

/* An opcode wire/ does not know, so wire_build cannot make it: patched in afterwards. */
static void m_opcode(struct env *e, struct shot *s, long arg)
{
	(void)e;
	bth_of(&s->f[0])[0] = (uint8_t)arg;
	seal(&s->f[0]);
}

static void m_pkey(struct env *e, struct shot *s, long arg)
{
	(void)e;
	wr16(bth_of(&s->f[0]) + 2, (unsigned)arg);
	seal(&s->f[0]);
}

#define QPN_OTHER_GEN (-1)   /* m_dest_qp: our QP's slot with another generation */

static void m_dest_qp(struct env *e, struct shot *s, long arg)
{
	uint32_t qpn = arg == QPN_OTHER_GEN ? e->qp->qp_num ^ (1u << 14) : (uint32_t)arg;

	wr24(bth_of(&s->f[0]) + 5, qpn);
	seal(&s->f[0]);
}

enum { FROM_SPOOF, FROM_SELF };

static void m_src(struct env *e, struct shot *s, long arg)
{
	memcpy(ip_of(&s->f[0]) + 12, arg == FROM_SPOOF ? &e->spoof : &e->self, 4);
	ip_checksum(&s->f[0]);
	seal(&s->f[0]);
}

/* To another address of the host than the daemon's. */
static void m_dst(struct env *e, struct shot *s, long arg)
{
	(void)arg;
	memcpy(ip_of(&s->f[0]) + 16, &e->spoof, 4);
	ip_checksum(&s->f[0]);
	seal(&s->f[0]);
}

enum { ICRC_TRAILER, ICRC_PAYLOAD, ICRC_RETH_VA, ICRC_BYTE_ORDER };

/* A byte changed after the ICRC was computed (or the ICRC stored big-endian). */
static void m_icrc(struct env *e, struct shot *s, long arg)
{
	struct frame *f = &s->f[0];
	uint8_t *t = f->b + f->len - ICRC_LEN;

	(void)e;
	if (arg == ICRC_TRAILER)
		t[3] ^= 0x01;
	else if (arg == ICRC_PAYLOAD)
		f->b[cut_at(f, CUT_RETH)] ^= 0x80;
	else if (arg == ICRC_RETH_VA)
		bth_of(f)[WIRE_BTH_LEN] ^= 0x01;    /* the VA's top byte: 2^56 away */
	else
		icrc_store(t, __builtin_bswap32(icrc_load(t)));
}

enum { PAD_CNT_0, PAD_CNT_1, PAD_CNT_2, PAD_CNT_3, PAD_BYTES_MISSING, PAD_BYTES_NONZERO };

/* PadCnt set to arg (0-3); or the pad bytes left out (the body is then not a multiple of
 * 4); or the pad bytes not zero. The ICRC is made valid again in every case. */
static void m_pad(struct env *e, struct shot *s, long arg)
{
	struct frame *f = &s->f[0];
	uint8_t *bth = bth_of(f);
	size_t pad = (bth[1] >> 4) & 3, end = cut_at(f, CUT_PAYLOAD);

	(void)e;
	if (arg <= PAD_CNT_3) {
		bth[1] = (uint8_t)((bth[1] & 0xcf) | arg << 4);
	} else if (arg == PAD_BYTES_MISSING) {
		memmove(f->b + end, f->b + end + pad, ICRC_LEN);
		f->len -= pad;
		set_lengths(f, f->len - WIRE_ETH_LEN);
	} else {
		memset(f->b + end, 0xee, pad);
	}
	seal(f);
}

/* ---- the cases ---- */

#define P(op, rel, bytes)  { .used = true, .opcode = op, .psn = rel, .len = bytes }
#define PA(op, rel, bytes) { .used = true, .opcode = op, .psn = rel, .len = bytes, \
			     .ack_req = true }
#define R(where, o, k, n)  { .at = AT_##where, .off = (uint64_t)(o), .key = KEY_##k, \
			     .dma_len = n }
#define RK(where, o, k, n) { .at = AT_##where, .off = (uint64_t)(o), .key = KEY_ABS, \
			     .key_val = k, .dma_len = n }
#define RABS(va, k, n)     RK(ABS, va, k, n)
#define M(fn, a)           .mutate = fn, .arg = a

/* The frames most cases start from: a valid WRITE ONLY of 333 bytes (3 bytes of pad), or
 * of 332 bytes (no pad) where the frame is cut where the pad would be. */
#define ONLY333 .pkts = { PA(OP_ONLY, 0, 333) }, .reth = R(MR, 1000, MR, 333)
#define ONLY332 .pkts = { PA(OP_ONLY, 0, 332) }, .reth = R(MR, 1000, MR, 332)
/* A FIRST of a 3000-byte message, then more packets. */
#define FIRST3000(...) .pkts = { P(OP_FIRST, 0, PMTU), __VA_ARGS__ }, .reth = R(MR, 8, MR, 3000)

/* Outcomes. rcvd_pkts and the barrier's counters are added by run_case. */
#define IGNORED          .rcvd = 0
#define DROPPED(c)       .d = { { C_##c, 1 } }
/* No case completes a message before its NAK: the MSN is the fresh QP's 0. */
#define NAK_WITH(syn, rel, c, n) .ans = { { syn, rel, true, 0 } }, .d = { { C_##c, 1 } }, \
				 .rcvd = n
#define NAK_INV(rel, n)  NAK_WITH(WIRE_SYN_NAK_INV_REQ, rel, nak_inv_req_sent, n)
#define NAK_ACC(rel, n)  NAK_WITH(WIRE_SYN_NAK_REM_ACCESS, rel, nak_rem_access_sent, n)
#define NAK_SEQ(n)       .ans = { { WIRE_SYN_NAK_PSN_SEQ, 0 } }, .rcvd = n, \
			 .d = { { C_nak_seq_sent, 1 }, { C_out_of_seq_request, n } }
#define ACKED(rel, n)    .ans = { { WIRE_SYN_ACK, rel } }, .rcvd = n, \
			 .d = { { C_acks_sent, 1 }, { C_rdma_recvs, 1 } }
/* A duplicate is re-ACKed with the last PSN done (counted in acks_sent too). */
#define REACKED          .ans = { { WIRE_SYN_ACK, -1 } }, .rcvd = 1, \
			 .d = { { C_duplicate_request, 1 }, { C_acks_sent, 1 } }

static bool verify_child(struct env *e);
static bool verify_received(struct env *e);
static bool verify_receive_failed(struct env *e);
static int dereg_late(struct env *e);

/* The daemon sends one ACK for all the frames it reads in one wakeup: a case that counts
 * one ACK per frame lets the first frame be answered before the next one is sent. */
static int answered_first(struct env *e)
{
	(void)e;
	return 0;
}

static const struct hcase cases[] = {
	/* What must work, byte-exact and nowhere else. */
	{ "valid WRITE ONLY", ONLY333, .lands = 1, ACKED(0, 1) },
	{ "valid FIRST/MIDDLE/LAST", .pkts = { P(OP_FIRST, 0, PMTU), P(OP_MIDDLE, 1, PMTU),
	  PA(OP_LAST, 2, 500) }, .reth = R(MR, 5, MR, 2 * PMTU + 500), .lands = 7,
	  ACKED(2, 3) },
	{ "valid FIRST/MIDDLE/LAST across the PSN wrap", .psn = 0xfffffe,
	  .pkts = { P(OP_FIRST, 0, PMTU), P(OP_MIDDLE, 1, PMTU), PA(OP_LAST, 2, 1) },
	  .reth = R(MR, 3 * PMTU, MR, 2 * PMTU + 1), .lands = 7, ACKED(2, 3) },
	{ "valid WRITE ONLY without AckReq", .pkts = { P(OP_ONLY, 0, 333) },
	  .reth = R(MR, 1000, MR, 333), .lands = 1, .rcvd = 1, .d = { { C_rdma_recvs, 1 } } },
	{ "zero-length WRITE, garbage VA and rkey (no key is checked)",
	  .pkts = { PA(OP_ONLY, 0, 0) }, .reth = RABS(0xdead0000beef0000, 0x12345678, 0),
	  ACKED(0, 1) },
	{ "WRITE of the MR's first 333 bytes", .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, 0, MR, 333), .lands = 1, ACKED(0, 1) },
	{ "WRITE of the MR's last 333 bytes", .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR_END, -333, MR, 333), .lands = 1, ACKED(0, 1) },
	{ "Ethernet trailer after the datagram (ignored)", ONLY333, M(m_trailer, 18),
	  .lands = 1, ACKED(0, 1) },
	{ "IPv4 options, 4 bytes, under the ICRC (accepted)", ONLY333, M(m_options, 4),
	  .lands = 1, ACKED(0, 1) },
	{ "IPv4 options, 40 bytes, under the ICRC (accepted)", ONLY333, M(m_options, 40),
	  .lands = 1, ACKED(0, 1) },
	{ "TOS and TTL changed after the ICRC (masked)", ONLY333, M(m_tos_ttl, 0),
	  .lands = 1, ACKED(0, 1) },
	{ "marked ECN CE on the way: written, ACKed, and a CNP to the sending QP", ONLY333,
	  M(m_ecn_ce, 0), .lands = 1, .rcvd = 1,
	  .ans = { { ANSWER_CNP, 0 }, { WIRE_SYN_ACK, 0 } },
	  .d = { { C_acks_sent, 1 }, { C_rdma_recvs, 1 }, { C_np_ecn_marked_roce_packets, 1 },
		 { C_np_cnp_sent, 1 } } },
	{ "bad IPv4 header checksum (masked by the ICRC, accepted)", ONLY333,
	  M(m_ip_csum, 0), .lands = 1, ACKED(0, 1) },
	{ "BTH FECN/BECN/reserved byte set after the ICRC (masked)", ONLY333,
	  M(m_bth_byte4, 0), .lands = 1, ACKED(0, 1) },
	{ "P_Key 0x7fff, limited member of the default partition", ONLY333,
	  M(m_pkey, 0x7fff), .lands = 1, ACKED(0, 1) },
	{ "1-byte payload with non-zero pad bytes: only the byte lands",
	  .pkts = { PA(OP_ONLY, 0, 1) }, .reth = R(MR, 2000, MR, 1),
	  M(m_pad, PAD_BYTES_NONZERO), .lands = 1, ACKED(0, 1) },

	/* Truncated at every header boundary, IP and UDP lengths as sent. The BPF filter
	 * ("udp dst port 4791 and dst host ...") cannot see a UDP port in the first two. */
	{ "cut after Ethernet", ONLY333, M(m_cut, CUT_ETH), IGNORED },
	{ "cut after IPv4", ONLY333, M(m_cut, CUT_IP), IGNORED },
	{ "cut inside UDP, after the ports", ONLY333, M(m_cut, CUT_UDP_PORT),
	  DROPPED(drop_malformed) },
	{ "cut after UDP", ONLY333, M(m_cut, CUT_UDP), DROPPED(drop_malformed) },
	{ "cut after BTH", ONLY333, M(m_cut, CUT_BTH), DROPPED(drop_malformed) },
	{ "cut after RETH", ONLY333, M(m_cut, CUT_RETH), DROPPED(drop_malformed) },
	{ "cut after the payload", ONLY333, M(m_cut, CUT_PAYLOAD), DROPPED(drop_malformed) },
	{ "cut after the pad (no ICRC)", ONLY333, M(m_cut, CUT_PAD), DROPPED(drop_malformed) },
	{ "cut 1 byte short", ONLY333, M(m_cut, CUT_LAST_BYTE), DROPPED(drop_malformed) },

	/* The datagram ends at each boundary and its lengths say so. */
	{ "datagram of a UDP header only", ONLY332, M(m_end, CUT_UDP),
	  DROPPED(drop_malformed) },
	{ "datagram ending after BTH", ONLY332, M(m_end, CUT_BTH), DROPPED(drop_malformed) },
	{ "datagram of BTH + ICRC, no RETH", ONLY332, M(m_end, CUT_BTH | SEALED),
	  DROPPED(drop_malformed) },
	{ "datagram ending after RETH", ONLY332, M(m_end, CUT_RETH), DROPPED(drop_malformed) },
	{ "datagram of BTH + RETH + ICRC, no payload (RETH says 332)",
	  .why = PROTO_REFUSED_write_length, ONLY332,
	  M(m_end, CUT_RETH | SEALED), NAK_INV(0, 1) },
	{ "datagram ending before the ICRC (last 4 payload bytes read as ICRC)", ONLY332,
	  M(m_end, CUT_PAD), DROPPED(drop_bad_icrc) },

	/* Lengths that disagree. */
	{ "UDP length 4 more than the IP length", ONLY333, M(m_udp_len, 4),
	  DROPPED(drop_malformed) },
	{ "UDP length 4 less than the IP length", ONLY333, M(m_udp_len, -4),
	  DROPPED(drop_malformed) },
	{ "IP and UDP lengths 8 beyond the frame", ONLY333, M(m_ip_len, 8),
	  DROPPED(drop_malformed) },
	{ "IP and UDP lengths 8 short of the frame (ICRC not where they say)", ONLY333,
	  M(m_ip_len, -8), DROPPED(drop_bad_icrc) },
	{ "IP total length 24, below IP + UDP headers", ONLY333, M(m_ip_total, 24),
	  DROPPED(drop_malformed) },

	/* IP fragments: pcap's "udp dst port" matches only fragment offset 0. */
	{ "IP fragment: MF set, offset 0", ONLY333, M(m_frag, 0x2000), DROPPED(drop_malformed) },
	{ "IP fragment: offset 1480, MF clear", ONLY333, M(m_frag, 185), IGNORED },
	{ "IP fragment: MF set and offset 1480", ONLY333, M(m_frag, 0x2000 | 185), IGNORED },
	{ "IPv4 options outside the ICRC", ONLY333, M(m_options, 4 | STALE),
	  DROPPED(drop_bad_icrc) },

	/* BTH. */
	{ "TVer 1", ONLY333, M(m_tver, 1), DROPPED(drop_malformed) },
	{ "TVer 15", ONLY333, M(m_tver, 15), DROPPED(drop_malformed) },
	{ "unknown opcode 0x15", ONLY333, M(m_opcode, 0x15), DROPPED(drop_malformed) },
	{ "unknown opcode 0xff", ONLY333, M(m_opcode, 0xff), DROPPED(drop_malformed) },
	{ "UC RDMA WRITE ONLY to an RC QP", .pkts = { PA(OP_UC_ONLY, 0, 333) },
	  .reth = R(MR, 1000, MR, 333), DROPPED(drop_transport) },
	{ "UC RDMA WRITE FIRST to an RC QP", .pkts = { P(OP_UC_FIRST, 0, PMTU) },
	  .reth = R(MR, 0, MR, 3000), DROPPED(drop_transport) },
	{ "UC SEND ONLY to an RC QP", .pkts = { PA(OP_UC_SEND, 0, 64) },
	  DROPPED(drop_transport) },
	{ "UD SEND ONLY to an RC QP", .pkts = { P(OP_UD_SEND, 0, 64) },
	  DROPPED(drop_transport) },
	{ "CNP to an RC QP in RTR (its READ responses slow down), nothing answered",
	  .pkts = { P(OP_CNP, 0, 0) }, .rcvd = 1,
	  .d = { { C_rp_cnp_handled, 1 }, { C_rp_rate_cuts, 1 } } },
	{ "CNP to an RC QP in RTS: its send rate is cut, nothing answered",
	  .pkts = { P(OP_CNP, 0, 0) }, .to_rts = true, .rcvd = 1,
	  .d = { { C_rp_cnp_handled, 1 }, { C_rp_rate_cuts, 1 } } },
	{ "RC SEND ONLY, no receive posted (RNR NAK)",
	  .why = PROTO_REFUSED_no_receive, .pkts = { PA(OP_SEND, 0, 64) },
	  NAK_WITH(0x20 | MIN_RNR_TIMER, 0, send_rnr_err, 1) },
	{ "RC RDMA READ REQUEST to a QP without remote read",
	  .why = PROTO_REFUSED_no_remote_read, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(RO, 0, RO, 64), .qp_no_write = true, NAK_INV(0, 1) },
	{ "RC COMPARE SWAP to a QP without remote atomic",
	  .why = PROTO_REFUSED_no_remote_atomic, .pkts = { PA(OP_CMP_SWAP, 0, 0) },
	  .reth = R(RO, 0, RO, 8), .qp_no_write = true, NAK_INV(0, 1) },

	/* READs and atomics that must not read or change a byte: the MR without remote write
	 * (RO) is the one with remote read and remote atomic, 8-byte aligned. */
	{ "READ of an MR without remote read",
	  .why = PROTO_REFUSED_rkey_no_access, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(MR, 0, MR, 64), NAK_ACC(0, 1) },
	{ "READ 1 byte past the MR's end",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(RO, AUX_MR_LEN - 63, RO, 64), NAK_ACC(0, 1) },
	{ "READ straddling the MR's start",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(RO, -8, RO, 64), NAK_ACC(0, 1) },
	{ "READ whose VA + length wraps 2^64",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(ABS, 0xfffffffffffffff0ull, RO, 64), NAK_ACC(0, 1) },
	{ "READ with the rkey's key byte wrong",
	  .why = PROTO_REFUSED_rkey_stale, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(RO, 0, BAD_BYTE_RO, 64), NAK_ACC(0, 1) },
	{ "READ of an MR in another PD",
	  .why = PROTO_REFUSED_rkey_other_pd, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(PD2, 0, PD2, 64), NAK_ACC(0, 1) },
	{ "READ of a deregistered MR",
	  .why = PROTO_REFUSED_rkey_unknown, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(DEAD, 0, DEAD, 64), NAK_ACC(0, 1) },
	{ "READ of another process's MR",
	  .why = PROTO_REFUSED_rkey_other_pd, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(CHILD, 0, CHILD, 64), NAK_ACC(0, 1) },
	/* refused whole at the request: no response goes out before the NAK */
	{ "READ of 2 PMTU starting PMTU - 1 bytes before the MR's end",
	  .why = PROTO_REFUSED_rkey_bounds,
	  .pkts = { PA(OP_READ, 0, 0) }, .reth = R(RO, AUX_MR_LEN - (PMTU - 1), RO, 2 * PMTU),
	  NAK_ACC(0, 1) },
	{ "READ longer than 2^31", .why = PROTO_REFUSED_length_dma, .pkts = { PA(OP_READ, 0, 0) },
	  .reth = R(RO, 0, RO, 0x80000001u), NAK_INV(0, 1) },
	/* FLUSH (rxe 6.2's opcode 0x1c): the QP's right for the placement type, then the MR's */
	{ "FLUSH to a QP without IBV_ACCESS_FLUSH_GLOBAL",
	  .why = PROTO_REFUSED_no_flush_access, .pkts = { PA(OP_FLUSH, 0, 0) },
	  .reth = R(MR, 0, MR, 64), .qp_no_write = true, NAK_INV(0, 1) },
	{ "FLUSH of an MR without IBV_ACCESS_FLUSH_GLOBAL",
	  .why = PROTO_REFUSED_rkey_no_access, .pkts = { PA(OP_FLUSH, 0, 0) },
	  .reth = R(MR, 0, MR, 64), NAK_ACC(0, 1) },
	{ "FLUSH persistent (no rocemu MR is persistent)",
	  .why = PROTO_REFUSED_rkey_no_access, .pkts = { PA(OP_FLUSH, 0, 0) },
	  .reth = R(RO, 0, RO, 8), .flush_type = WIRE_FLUSH_PERSISTENT, NAK_ACC(0, 1) },
	{ "FETCH_ADD on an MR without remote atomic",
	  .why = PROTO_REFUSED_rkey_no_access, .pkts = { PA(OP_FETCH_ADD, 0, 0) },
	  .reth = R(MR, 0, MR, 8), NAK_ACC(0, 1) },
	{ "FETCH_ADD 4 bytes before the MR's end",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_FETCH_ADD, 0, 0) },
	  .reth = R(RO, AUX_MR_LEN - 4, RO, 8), NAK_ACC(0, 1) },
	{ "COMPARE SWAP misaligned",
	  .why = PROTO_REFUSED_atomic_unaligned, .pkts = { PA(OP_CMP_SWAP, 0, 0) },
	  .reth = R(RO, 4, RO, 8), NAK_INV(0, 1) },
	{ "COMPARE SWAP in another PD",
	  .why = PROTO_REFUSED_rkey_other_pd, .pkts = { PA(OP_CMP_SWAP, 0, 0) },
	  .reth = R(PD2, 0, PD2, 8), NAK_ACC(0, 1) },
	{ "RC ACKNOWLEDGE to a QP in RTR", .pkts = { P(OP_ACK, 0, 0) },
	  DROPPED(drop_qp_state) },
	{ "READ RESPONSE ONLY for no READ (a QP in RTS with nothing outstanding)",
	  .pkts = { P(OP_READ_RESP, 0, 64) }, .to_rts = true, .rcvd = 1,
	  DROPPED(drop_stale_ack) },
	{ "ATOMIC ACKNOWLEDGE for no atomic (a QP in RTS with nothing outstanding)",
	  .pkts = { P(OP_ATOMIC_ACK, 0, 0) }, .to_rts = true, .rcvd = 1,
	  DROPPED(drop_stale_ack) },
	{ "RC READ RESPONSE ONLY to a QP in RTR", .pkts = { P(OP_READ_RESP, 0, 64) },
	  DROPPED(drop_qp_state) },
	{ "wrong P_Key 0x1234", ONLY333, M(m_pkey, 0x1234), DROPPED(drop_bad_pkey) },
	{ "P_Key 0xffff with the low bits wrong (0xfffe)", ONLY333, M(m_pkey, 0xfffe),
	  DROPPED(drop_bad_pkey) },

	/* Addressing. */
	{ "destination QP: our slot, another generation", ONLY333,
	  M(m_dest_qp, QPN_OTHER_GEN), DROPPED(drop_unknown_qp) },
	{ "destination QP 0", ONLY333, M(m_dest_qp, 0), DROPPED(drop_unknown_qp) },
	/* QP 1 is the CM's: an RC SEND there is no MAD it takes */
	{ "destination QP 1 (GSI)", ONLY333, M(m_dest_qp, 1), DROPPED(cm_drop_malformed) },
	/* the multicast QPN: looked up as a group by its destination, as rxe does whatever the
	 * address, and this unicast one is none */
	{ "destination QP 0xffffff", ONLY333, M(m_dest_qp, 0xffffff),
	  DROPPED(drop_mcast_no_group) },
	{ "spoofed source: another address than the QP's peer", ONLY333,
	  M(m_src, FROM_SPOOF), DROPPED(drop_wrong_peer) },
	{ "spoofed source: the daemon's own address", ONLY333, M(m_src, FROM_SELF),
	  DROPPED(drop_wrong_peer) },
	{ "to another local address (not the daemon's)", ONLY333, M(m_dst, 0), IGNORED },

	/* ICRC. */
	{ "ICRC bit flipped", ONLY333, M(m_icrc, ICRC_TRAILER), DROPPED(drop_bad_icrc) },
	{ "payload bit flipped after the ICRC", ONLY333, M(m_icrc, ICRC_PAYLOAD),
	  DROPPED(drop_bad_icrc) },
	{ "RETH VA moved out of the MR after the ICRC", ONLY333, M(m_icrc, ICRC_RETH_VA),
	  DROPPED(drop_bad_icrc) },
	{ "ICRC stored big-endian", ONLY333, M(m_icrc, ICRC_BYTE_ORDER),
	  DROPPED(drop_bad_icrc) },

	/* PadCnt against the payload. */
	{ "PadCnt 3 on an empty payload", .pkts = { PA(OP_ONLY, 0, 0) },
	  .reth = R(MR, 0, MR, 0), M(m_pad, PAD_CNT_3), DROPPED(drop_malformed) },
	{ "pad bytes missing (body not a multiple of 4)", ONLY333,
	  M(m_pad, PAD_BYTES_MISSING), DROPPED(drop_malformed) },
	{ "PadCnt 0 with 3 pad bytes (payload 336, RETH 333)",
	  .why = PROTO_REFUSED_write_length, ONLY333, M(m_pad, PAD_CNT_0),
	  NAK_INV(0, 1) },
	{ "PadCnt 3 on a 4-byte payload (payload 1, RETH 4)",
	  .why = PROTO_REFUSED_write_length, .pkts = { PA(OP_ONLY, 0, 4) },
	  .reth = R(MR, 1000, MR, 4), M(m_pad, PAD_CNT_3), NAK_INV(0, 1) },

	/* Packet lengths for their place in the message (PMTU 1024). */
	{ "ONLY of PMTU + 4 bytes",
	  .why = PROTO_REFUSED_length_only, .pkts = { PA(OP_ONLY, 0, PMTU + 4) },
	  .reth = R(MR, 0, MR, PMTU + 4), NAK_INV(0, 1) },
	{ "ONLY of 16 KiB", .why = PROTO_REFUSED_length_only, .pkts = { PA(OP_ONLY, 0, 16384) },
	  .reth = R(MR, 0, MR, 16384), NAK_INV(0, 1) },
	{ "FIRST shorter than PMTU",
	  .why = PROTO_REFUSED_length_not_pmtu, .pkts = { P(OP_FIRST, 0, PMTU - 4) },
	  .reth = R(MR, 0, MR, 3000), NAK_INV(0, 1) },
	{ "FIRST longer than PMTU",
	  .why = PROTO_REFUSED_length_not_pmtu, .pkts = { P(OP_FIRST, 0, PMTU + 4) },
	  .reth = R(MR, 0, MR, 3000), NAK_INV(0, 1) },
	{ "MIDDLE shorter than PMTU",
	  .why = PROTO_REFUSED_length_not_pmtu, FIRST3000(P(OP_MIDDLE, 1, PMTU - 4)), .lands = 1,
	  NAK_INV(1, 2) },
	{ "MIDDLE longer than PMTU",
	  .why = PROTO_REFUSED_length_not_pmtu, FIRST3000(P(OP_MIDDLE, 1, PMTU + 4)), .lands = 1,
	  NAK_INV(1, 2) },
	{ "LAST with no payload",
	  .why = PROTO_REFUSED_length_last, .pkts = { P(OP_FIRST, 0, PMTU), PA(OP_LAST, 1, 0) },
	  .reth = R(MR, 0, MR, 2 * PMTU), .lands = 1, NAK_INV(1, 2) },
	{ "LAST longer than PMTU",
	  .why = PROTO_REFUSED_length_last,
	  .pkts = { P(OP_FIRST, 0, PMTU), PA(OP_LAST, 1, PMTU + 4) },
	  .reth = R(MR, 0, MR, 2 * PMTU + 4), .lands = 1, NAK_INV(1, 2) },
	{ "FIRST whose RETH length fits in it, then a LAST (the FIRST lands, as on rxe)",
	  .why = PROTO_REFUSED_write_length,
	  .pkts = { P(OP_FIRST, 0, PMTU), PA(OP_LAST, 1, 4) },
	  .reth = R(MR, 0, MR, PMTU), .lands = 1, NAK_INV(1, 2) },
	{ "MIDDLE carrying the message's last bytes, then a LAST",
	  .why = PROTO_REFUSED_write_length,
	  .pkts = { P(OP_FIRST, 0, PMTU), P(OP_MIDDLE, 1, PMTU), PA(OP_LAST, 2, 4) },
	  .reth = R(MR, 0, MR, 2 * PMTU), .lands = 3, NAK_INV(2, 3) },
	{ "MIDDLE without FIRST",
	  .why = PROTO_REFUSED_opcode_sequence, .pkts = { P(OP_MIDDLE, 0, PMTU) }, NAK_INV(0, 1) },
	{ "LAST without FIRST",
	  .why = PROTO_REFUSED_opcode_sequence, .pkts = { PA(OP_LAST, 0, 100) }, NAK_INV(0, 1) },
	{ "SEND MIDDLE without FIRST",
	  .why = PROTO_REFUSED_opcode_sequence,
	  .pkts = { P(OP_SEND_MIDDLE, 0, PMTU) }, NAK_INV(0, 1) },
	{ "SEND LAST without FIRST",
	  .why = PROTO_REFUSED_opcode_sequence,
	  .pkts = { PA(OP_SEND_LAST, 0, 100) }, NAK_INV(0, 1) },
	/* The receive the SEND ONLY completed is the application's again: nothing more may
	 * land in the rest of it. */
	{ "SEND MIDDLE after a SEND ONLY filled part of a larger receive",
	  .why = PROTO_REFUSED_opcode_sequence,
	  .pkts = { PA(OP_SEND, 0, 100), P(OP_SEND_MIDDLE, 1, PMTU) },
	  .reth = R(MR, 4096, MR, 0), .recv_len = 3 * PMTU, .lands = 1, .rcvd = 2,
	  .ans = { { WIRE_SYN_ACK, 0, true, 1 }, { WIRE_SYN_NAK_INV_REQ, 1, true, 1 } },
	  .d = { { C_acks_sent, 1 }, { C_rdma_recvs, 1 }, { C_nak_inv_req_sent, 1 } },
	  .verify = verify_received },
	{ "SEND LAST after a SEND ONLY filled part of a larger receive",
	  .why = PROTO_REFUSED_opcode_sequence,
	  .pkts = { PA(OP_SEND, 0, 100), PA(OP_SEND_LAST, 1, 100) },
	  .reth = R(MR, 4096, MR, 0), .recv_len = 3 * PMTU, .lands = 1, .rcvd = 2,
	  .ans = { { WIRE_SYN_ACK, 0, true, 1 }, { WIRE_SYN_NAK_INV_REQ, 1, true, 1 } },
	  .d = { { C_acks_sent, 1 }, { C_rdma_recvs, 1 }, { C_nak_inv_req_sent, 1 } },
	  .verify = verify_received },
	{ "SEND MIDDLE inside a WRITE message",
	  .why = PROTO_REFUSED_opcode_sequence, FIRST3000(P(OP_SEND_MIDDLE, 1, PMTU)),
	  .lands = 1, NAK_INV(1, 2) },
	{ "SEND LAST inside a WRITE message",
	  .why = PROTO_REFUSED_opcode_sequence, FIRST3000(PA(OP_SEND_LAST, 1, 100)), .lands = 1,
	  NAK_INV(1, 2) },
	{ "WRITE MIDDLE inside a SEND message (its receive completes in error)",
	  .why = PROTO_REFUSED_opcode_sequence,
	  .pkts = { P(OP_SEND_FIRST, 0, PMTU), P(OP_MIDDLE, 1, PMTU) },
	  .reth = R(MR, 4096, MR, 0), .recv_len = 3 * PMTU, .lands = 1, NAK_INV(1, 2),
	  .verify = verify_receive_failed },
	{ "FIRST while a message is open",
	  .why = PROTO_REFUSED_opcode_sequence, FIRST3000(P(OP_FIRST, 1, PMTU)), .lands = 1,
	  NAK_INV(1, 2) },
	{ "ONLY while a message is open",
	  .why = PROTO_REFUSED_opcode_sequence, FIRST3000(PA(OP_ONLY, 1, 100)), .lands = 1,
	  NAK_INV(1, 2) },
	{ "message shorter than its RETH length",
	  .why = PROTO_REFUSED_write_length, FIRST3000(PA(OP_LAST, 1, 100)),
	  .lands = 1, NAK_INV(1, 2) },
	{ "message longer than its RETH length", .why = PROTO_REFUSED_write_length,
	  .pkts = { P(OP_FIRST, 0, PMTU), P(OP_MIDDLE, 1, PMTU) },
	  .reth = R(MR, 0, MR, PMTU + 476), .lands = 1, NAK_INV(1, 2) },
	{ "ONLY payload 333 > RETH 100, at the MR's last 100 bytes",
	  .why = PROTO_REFUSED_write_length,
	  .pkts = { PA(OP_ONLY, 0, 333) }, .reth = R(MR_END, -100, MR, 100), NAK_INV(0, 1) },
	{ "ONLY payload 100 < RETH 333",
	  .why = PROTO_REFUSED_write_length, .pkts = { PA(OP_ONLY, 0, 100) },
	  .reth = R(MR, 1000, MR, 333), NAK_INV(0, 1) },

	/* RETH. */
	{ "RETH length 0 with an 8-byte payload",
	  .why = PROTO_REFUSED_write_length, .pkts = { PA(OP_ONLY, 0, 8) },
	  .reth = R(MR, 1000, MR, 0), NAK_INV(0, 1) },
	{ "RETH length 2^31 + 1 (FIRST)",
	  .why = PROTO_REFUSED_length_dma, .pkts = { P(OP_FIRST, 0, PMTU) },
	  .reth = R(MR, 0, MR, 0x80000001u), NAK_INV(0, 1) },
	{ "RETH length 0xffffffff (ONLY)",
	  .why = PROTO_REFUSED_length_dma, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, 0, MR, 0xffffffffu), NAK_INV(0, 1) },
	{ "RETH length 2^31 exactly: allowed, but not inside the MR",
	  .why = PROTO_REFUSED_rkey_bounds,
	  .pkts = { P(OP_FIRST, 0, PMTU) }, .reth = R(MR, 0, MR, 0x80000000u),
	  NAK_ACC(0, 1) },
	{ "VA + length overflowing 64 bits (VA 2^64 - 100)",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(ABS, -100, MR, 333), NAK_ACC(0, 1) },
	{ "VA 2^64 - 1, length 1", .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 1) },
	  .reth = R(ABS, -1, MR, 1), NAK_ACC(0, 1) },
	{ "VA 1 byte below the MR",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, -1, MR, 333), NAK_ACC(0, 1) },
	{ "VA entirely below the MR, ending at its start",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, -333, MR, 333), NAK_ACC(0, 1) },
	{ "1 byte past the MR's end",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR_END, -332, MR, 333), NAK_ACC(0, 1) },
	{ "VA at the MR's end, length 1",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 1) },
	  .reth = R(MR_END, 0, MR, 1), NAK_ACC(0, 1) },
	{ "multi-packet message 1 byte past the MR's end (refused at FIRST)",
	  .why = PROTO_REFUSED_rkey_bounds,
	  .pkts = { P(OP_FIRST, 0, PMTU), PA(OP_LAST, 1, PMTU) },
	  .reth = R(MR_END, -(2 * PMTU) + 1, MR, 2 * PMTU),
	  .ans = { { WIRE_SYN_NAK_REM_ACCESS, 0 } }, .rcvd = 1,
	  .d = { { C_nak_rem_access_sent, 1 }, { C_drop_qp_state, 1 } } },

	/* Keys. */
	{ "rkey of a deregistered MR",
	  .why = PROTO_REFUSED_rkey_unknown, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(DEAD, 0, DEAD, 333), NAK_ACC(0, 1) },
	{ "MR deregistered between FIRST and LAST (checked on every packet)",
	  .why = PROTO_REFUSED_rkey_unknown,
	  .pkts = { P(OP_FIRST, 0, PMTU), PA(OP_LAST, 1, PMTU) },
	  .reth = R(LATE, 0, LATE, 2 * PMTU), .between = dereg_late, .lands = 1,
	  NAK_ACC(1, 2) },
	{ "rkey 0xffffffff (index beyond the key table)",
	  .why = PROTO_REFUSED_rkey_unknown, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = RK(MR, 0, 0xffffffffu, 333), NAK_ACC(0, 1) },
	{ "rkey with a valid index and a wrong key byte",
	  .why = PROTO_REFUSED_rkey_stale, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, 0, BAD_BYTE, 333), NAK_ACC(0, 1) },
	{ "rkey with the next index and our key byte",
	  .why = PROTO_REFUSED_rkey_stale, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, 0, NEXT_INDEX, 333), NAK_ACC(0, 1) },
	{ "rkey of an MR in another PD of this process",
	  .why = PROTO_REFUSED_rkey_other_pd, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(PD2, 0, PD2, 333), NAK_ACC(0, 1) },
	{ "rkey of an MR of another process",
	  .why = PROTO_REFUSED_rkey_other_pd, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(CHILD, 100, CHILD, 333), NAK_ACC(0, 1), .verify = verify_child },
	{ "rkey of an MR without remote write",
	  .why = PROTO_REFUSED_rkey_no_access, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(RO, 0, RO, 333), NAK_ACC(0, 1) },
	{ "rkey of the MR, VA inside another MR",
	  .why = PROTO_REFUSED_rkey_bounds, .pkts = { PA(OP_ONLY, 0, 333) },
	  .reth = R(RO, 0, MR, 333), NAK_ACC(0, 1) },
	{ "QP without remote write",
	  .why = PROTO_REFUSED_no_remote_write, ONLY333, .qp_no_write = true, NAK_INV(0, 1) },

	/* PSNs. */
	{ "PSN far ahead twice (one NAK), then the expected PSN",
	  .pkts = { PA(OP_ONLY, 0x100000, 333), PA(OP_ONLY, 0x100001, 333), PA(OP_ONLY, 0, 333) },
	  .reth = R(MR, 1000, MR, 333), .lands = 4, .rcvd = 3,
	  .ans = { { WIRE_SYN_NAK_PSN_SEQ, 0 }, { WIRE_SYN_ACK, 0 } },
	  .d = { { C_out_of_seq_request, 2 }, { C_nak_seq_sent, 1 }, { C_acks_sent, 1 },
		 { C_rdma_recvs, 1 } } },
	{ "PSN 1 ahead", .pkts = { PA(OP_ONLY, 1, 333) }, .reth = R(MR, 1000, MR, 333),
	  NAK_SEQ(1) },
	{ "PSN far behind", .pkts = { PA(OP_ONLY, -0x100000, 333) },
	  .reth = R(MR, 1000, MR, 333), REACKED },
	{ "PSN 2^23 - 1 ahead, the farthest still ahead",
	  .pkts = { PA(OP_ONLY, 0x7fffff, 333) }, .reth = R(MR, 1000, MR, 333), NAK_SEQ(1) },
	{ "PSN 2^23 away: behind, by 24-bit serial arithmetic",
	  .pkts = { PA(OP_ONLY, 0x800000, 333) }, .reth = R(MR, 1000, MR, 333), REACKED },
	{ "PSN 1 behind", .pkts = { PA(OP_ONLY, -1, 333) }, .reth = R(MR, 1000, MR, 333),
	  REACKED },
	{ "the same PSN twice, other data: executed once",
	  .pkts = { PA(OP_ONLY, 0, 333), PA(OP_ONLY, 0, 333) }, .reth = R(MR, 1000, MR, 333),
	  .between = answered_first, .lands = 1, .rcvd = 2, .ans = { { WIRE_SYN_ACK, 0 }, { WIRE_SYN_ACK, 0 } },
	  .d = { { C_acks_sent, 2 }, { C_rdma_recvs, 1 }, { C_duplicate_request, 1 } } },

	/* QP state. */
	{ "WRITE ONLY with immediate, no receive posted (RNR NAK)", .why = PROTO_REFUSED_no_receive,
	  .pkts = { PA(OP_ONLY_IMM, 0, 64) }, .reth = R(MR, 1000, MR, 64),
	  NAK_WITH(0x20 | MIN_RNR_TIMER, 0, send_rnr_err, 1) },
	{ "after an invalid request the QP takes nothing", .why = PROTO_REFUSED_opcode_sequence,
	  .pkts = { P(OP_MIDDLE, 0, PMTU), PA(OP_ONLY, 1, 333) }, .reth = R(MR, 0, MR, 333),
	  .ans = { { WIRE_SYN_NAK_INV_REQ, 0 } }, .rcvd = 1,
	  .d = { { C_nak_inv_req_sent, 1 }, { C_drop_qp_state, 1 } } },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* ---- another process: a child with its own context, PD and MR on the same daemon ---- */

struct child_res {
	struct rocemu_context *ctx;
	struct rocemu_pd *pd;
	struct rocemu_mr *mr;
	uint8_t *p;
};

/* Which step failed, or NULL when the child has its MR. */
static const char *child_open(const char *sock, struct child_res *r)
{
	if (!(r->ctx = rocemu_open(sock)))
		return "rocemu_open";
	if (!(r->pd = rocemu_alloc_pd(r->ctx)))
		return "rocemu_alloc_pd";
	if (!(r->p = map_pages(CHILD_PAGES, SEED_CHILD)))
		return "mmap";
	r->mr = rocemu_reg_mr(r->pd, r->p + CHILD_MR_OFF, CHILD_MR_LEN,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	return r->mr ? NULL : "rocemu_reg_mr";
}

static void child_offer(const char *sock, struct child_res *r, struct child_msg *m)
{
	const char *failed_call = child_open(sock, r);

	if (failed_call) {
		snprintf(m->why, sizeof(m->why), "%s: %s %s", failed_call, strerror(errno),
			 r->ctx ? rocemu_last_error(r->ctx) : "");
		return;
	}
	m->ok = 1;
	m->rkey = r->mr->rkey;
	m->addr = (uintptr_t)(r->p + CHILD_MR_OFF);
	m->len = CHILD_MR_LEN;
}

/* The child: offers its MR, then answers each 'c' with what its whole buffer holds. */
static int child_main(const char *sock, int up, int down)
{
	struct child_msg m = { .size = CHILD_PAGES * PAGE };
	struct child_res r = { 0 };
	char cmd;

	child_offer(sock, &r, &m);
	if (e2e_write_full(up, &m, sizeof(m)) == 0)
		while (m.ok && e2e_read_full(down, &cmd, 1, CHILD_WAIT_MS) == 0 && cmd == 'c') {
			m.changed_at = m.size;
			for (size_t i = 0; i < m.size && m.changed_at == m.size; i++)
				if (r.p[i] != canary(i, SEED_CHILD))
					m.changed_at = i;
			if (e2e_write_full(up, &m, sizeof(m)) < 0)
				break;
		}
	if (r.mr)
		rocemu_dereg_mr(r.mr);
	if (r.pd)
		rocemu_dealloc_pd(r.pd);
	if (r.ctx)
		rocemu_close(r.ctx);
	return m.ok ? 0 : 1;
}

/* Forked before the parent opens anything, so the child starts its own arena. */
static int child_start(struct env *e)
{
	int up[2], down[2];

	if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0) {
		e2e_error("pipe2: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	e->child.pid = fork();
	if (e->child.pid == 0) {
		close(up[0]);
		close(down[1]);
		_exit(child_main(e->sock, up[1], down[0]));
	}
	close(up[1]);
	close(down[0]);
	e->child.up = up[0];
	e->child.down = down[1];
	if (e->child.pid < 0) {
		e2e_error("fork: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The child's MR becomes target T_CHILD; without one, only its case fails. */
static void child_hello(struct env *e)
{
	struct child_msg m;

	if (e2e_read_full(e->child.up, &m, sizeof(m), WAIT_MS) < 0) {
		snprintf(e->child.why, sizeof(e->child.why), "no word from it within %d ms",
			 WAIT_MS);
		return;
	}
	memcpy(e->child.why, m.why, sizeof(e->child.why));
	e->child.why[sizeof(e->child.why) - 1] = '\0';
	if (!m.ok)
		return;
	e->child.ok = true;
	e->t[T_CHILD] = (struct mrinfo){ m.addr, m.len, m.rkey };
}

static bool verify_child(struct env *e)
{
	struct child_msg m;

	if (!e->child.ok) {
		e2e_error("the other process has no MR: %s", e->child.why);
		return false;
	}
	if (e2e_write_full(e->child.down, "c", 1) < 0 ||
	    e2e_read_full(e->child.up, &m, sizeof(m), WAIT_MS) < 0) {
		e2e_error("no verdict from the other process within %d ms", WAIT_MS);
		return false;
	}
	if (m.changed_at != m.size) {
		e2e_mismatch("the other process's buffer changed at offset %llu",
			     (unsigned long long)m.changed_at);
		return false;
	}
	e2e_note("the other process's buffer unchanged");
	return true;
}

/* EOF on its pipe ends the child; it must exit 0 within WAIT_MS. */
static void child_stop(struct env *e)
{
	int status = 0;

	if (e->child.down >= 0)
		close(e->child.down);
	if (e->child.up >= 0)
		close(e->child.up);
	e->child.down = e->child.up = -1;
	if (e->child.pid <= 0)
		return;
	for (int i = 0; waitpid(e->child.pid, &status, WNOHANG) != e->child.pid; i++) {
		if (i == WAIT_MS / 10) {
			kill(e->child.pid, SIGKILL);
			waitpid(e->child.pid, &status, 0);
			e2e_error("the child did not exit within %d ms; killed it", WAIT_MS);
			return;
		}
		poll(NULL, 0, 10);
	}
	if (e->child.ok && (!WIFEXITED(status) || WEXITSTATUS(status)))
		e2e_error("the child ended with status 0x%x", (unsigned)status);
}

/* ---- the daemon: counters, QPs, memory ---- */

static int read_stats(struct env *e, uint64_t out[C_COUNT])
{
	struct proto_handle req = { .hdr.op = PROTO_STATS };
	struct proto_stats_reply rep;
	char err[256];

	if (ctl_call(e->ctl, &req, sizeof(req), &rep, sizeof(rep), err, sizeof(err)) < 0) {
		e2e_error("stats: %s", err);
		return -1;
	}
	if (rep.ncounters != PROTO_NCOUNTERS || rep.nrefusals != PROTO_NREFUSALS) {
		e2e_error("stats: %u counters and %u refusals, this build knows %d and %d",
			  rep.ncounters, rep.nrefusals, PROTO_NCOUNTERS, PROTO_NREFUSALS);
		return -1;
	}
	memcpy(out, rep.counters, sizeof(rep.counters));
	memcpy(out + C_refused_none, rep.refused, sizeof(rep.refused));
	return 0;
}

static int modify(struct env *e, struct rocemu_qp *qp, struct ibv_qp_attr *a, int mask,
		  const char *what)
{
	int err = rocemu_modify_qp(qp, a, mask);

	return err ? vfail(e, what, err) : 0;
}

/* RESET -> INIT -> RTR towards the peer, with a new expected PSN: whatever a case left
 * behind (an error state, an open message, a NAK episode) is forgotten. */
static int qp_connect(struct env *e, struct rocemu_qp *qp, uint32_t dest_qpn, uint32_t rq_psn,
		      unsigned access)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .qp_access_flags = access,
				    .port_num = 1 };
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = PMTU_ENUM, .dest_qp_num = dest_qpn,
		.rq_psn = rq_psn, .min_rnr_timer = MIN_RNR_TIMER, .max_dest_rd_atomic = 4,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .hop_limit = 64 } },
	};

	rocemu_gid_from_ipv4(&rtr.ah_attr.grh.dgid, e->peer);
	if (modify(e, qp, &reset, IBV_QP_STATE, "modify_qp(RESET)") < 0 ||
	    modify(e, qp, &init, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, "modify_qp(INIT)") < 0)
		return -1;
	return modify(e, qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER |
			  IBV_QP_MAX_DEST_RD_ATOMIC, "modify_qp(RTR)");
}

/* The barrier's QP: in RTS with nothing sent, so any ACK to it is stale. */
static int barrier_qp(struct env *e)
{
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = BARRIER_SQ_PSN,
				   .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };

	if (qp_connect(e, e->bqp, PEER_QPN + 1, 0, 0) < 0)
		return -1;
	return modify(e, e->bqp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY, "modify_qp(RTS)");
}

static int reg(struct env *e, struct rocemu_pd *pd, uint8_t *p, size_t len, int access,
	       enum target t, struct rocemu_mr **out)
{
	*out = rocemu_reg_mr(pd, p, len, access);
	if (!*out)
		return vfail(e, "rocemu_reg_mr", errno);
	e->t[t] = (struct mrinfo){ (uintptr_t)p, len, (*out)->rkey };
	return 0;
}

/* The main MR in the middle of a 16-page buffer; in an 8-page one, an MR without remote
 * write, one in a second PD, one deregistered at once (its rkey must stay dead), and one
 * a case deregisters in the middle of a message. */
static int setup_memory(struct env *e)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct rocemu_mr *dead;
	uint8_t *aux;
	int err;

	if (watch(&e->w[0], "main", MAIN_PAGES, SEED_MAIN) < 0 ||
	    watch(&e->w[1], "aux", AUX_PAGES, SEED_AUX) < 0)
		return -1;
	aux = e->w[1].p;
	if (reg(e, e->pd, e->w[0].p + MAIN_MR_OFF, MAIN_MR_LEN, rw, T_MR, &e->mr) < 0 ||
	    reg(e, e->pd, aux + PAGE + 8, AUX_MR_LEN,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, T_RO,
		&e->ro_mr) < 0 ||
	    reg(e, e->pd2, aux + 3 * PAGE + 9, AUX_MR_LEN, rw, T_PD2, &e->pd2_mr) < 0 ||
	    reg(e, e->pd, aux + 5 * PAGE + 11, AUX_MR_LEN, rw, T_DEAD, &dead) < 0 ||
	    reg(e, e->pd, aux + 7 * PAGE + 13, LATE_MR_LEN, rw, T_LATE, &e->late_mr) < 0)
		return -1;
	if ((err = rocemu_dereg_mr(dead)))
		return vfail(e, "rocemu_dereg_mr", err);
	return 0;
}

static int setup_verbs(struct env *e)
{
	struct rocemu_qp_init_attr qa = { .max_send_wr = 16, .max_recv_wr = 16,
					  .max_send_sge = 1, .max_recv_sge = 1 };
	int err;

	if (!(e->ctx = rocemu_open(e->sock))) {
		e2e_error("rocemu_open(%s): %s", e->sock, strerror(errno));
		return -1;
	}
	if ((err = rocemu_query_port(e->ctx, &e->port)))
		return vfail(e, "rocemu_query_port", err);
	if (e->port.active_mtu < PMTU_ENUM) {
		e2e_error("the port's active MTU is below the %d bytes the cases assume", PMTU);
		return -1;
	}
	e->self = e->port.ipv4;
	if (!(e->pd = rocemu_alloc_pd(e->ctx)) || !(e->pd2 = rocemu_alloc_pd(e->ctx)))
		return vfail(e, "rocemu_alloc_pd", errno);
	if (!(e->cq = rocemu_create_cq(e->ctx, 64)))
		return vfail(e, "rocemu_create_cq", errno);
	qa.send_cq = qa.recv_cq = e->cq;
	if (!(e->qp = rocemu_create_qp(e->pd, &qa)) || !(e->bqp = rocemu_create_qp(e->pd, &qa)))
		return vfail(e, "rocemu_create_qp", errno);
	return setup_memory(e);
}

/* ---- raw sockets on the daemon's interface ---- */

static int open_tx(struct env *e)
{
	e->tx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);   /* protocol 0: sends only */
	if (e->tx >= 0)
		return 0;
	e2e_error("AF_PACKET socket: %s (needs root or CAP_NET_RAW)", strerror(errno));
	return -1;
}

static int send_frame(struct env *e, const struct frame *f)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
				   .sll_ifindex = e->ifindex, .sll_halen = 6 };

	if (sendto(e->tx, f->b, f->len, 0, (struct sockaddr *)&sll, sizeof(sll)) ==
	    (ssize_t)f->len)
		return 0;
	e2e_error("sending a %zu-byte frame on %s: %s", f->len, e->port.ifname, strerror(errno));
	return -1;
}

/* Receives only the daemon's answers: IPv4 UDP to port 4791 from the daemon to the peer.
 * The filter is attached before the bind, so nothing else is ever queued. */
static int open_rx(struct env *e)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                 /* EtherType */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 10),
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),                 /* IP protocol */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 8),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 26),                 /* source */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(e->self), 0, 6),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 30),                 /* destination */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(e->peer), 0, 4),
		BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),                /* X = IP header length */
		BPF_STMT(BPF_LD | BPF_H | BPF_IND, 16),                 /* UDP destination port */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WIRE_ROCE_PORT, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0x40000),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
				   .sll_ifindex = e->ifindex };

	e->rx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (e->rx < 0 || setsockopt(e->rx, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
	    bind(e->rx, (struct sockaddr *)&sll, sizeof(sll))) {
		e2e_error("receive socket on %s: %s", e->port.ifname, strerror(errno));
		return -1;
	}
	return 0;
}

/* As rocemud does for itself: a bound UDP socket, never read, keeps the kernel from
 * answering the daemon's ACKs to the peer address with ICMP port unreachable. */
static int open_guard(struct env *e)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(WIRE_ROCE_PORT),
				   .sin_addr.s_addr = e->peer };
	int small = 1;

	e->guard = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (e->guard < 0 || setsockopt(e->guard, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) ||
	    bind(e->guard, (struct sockaddr *)&sin, sizeof(sin))) {
		e2e_error("binding UDP %d on the peer address: %s (is a daemon serving it?)",
			  WIRE_ROCE_PORT, strerror(errno));
		return -1;
	}
	return 0;
}

/* The next answer within ms (0: only one already there): 1, 0 when none, -1 on error.
 * On lo every frame passes twice, going out and coming in; only the second counts. */
static int recv_answer(struct env *e, int ms, uint8_t *buf, size_t cap, size_t *len)
{
	const int64_t deadline = e2e_now_ms() + ms;

	for (;;) {
		struct sockaddr_ll from;
		socklen_t fromlen = sizeof(from);
		struct pollfd pfd = { .fd = e->rx, .events = POLLIN };
		ssize_t n = recvfrom(e->rx, buf, cap, 0, (struct sockaddr *)&from, &fromlen);
		int64_t left;

		if (n >= 0 && from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (n >= 0) {
			*len = (size_t)n;
			return 1;
		}
		if (errno != EAGAIN && errno != EINTR) {
			e2e_error("receiving answers: %s", strerror(errno));
			return -1;
		}
		left = deadline - e2e_now_ms();
		if (left <= 0)
			return 0;
		poll(&pfd, 1, (int)left);
	}
}

/* ---- setup and teardown ---- */

static int alloc_frames(struct env *e)
{
	for (int i = 0; i < MAX_PKTS; i++) {
		e->shot.f[i].b = malloc(FRAME_CAP);
		e->shot.f[i].data = malloc(MAX_PAYLOAD);
		if (!e->shot.f[i].b || !e->shot.f[i].data)
			return -1;
	}
	e->barrier.b = malloc(FRAME_CAP);
	return e->barrier.b ? 0 : -1;
}

/* The barrier: an ACK from the peer for a PSN the barrier QP never sent. */
static int build_barrier(struct env *e)
{
	struct wire_bth bth = { .opcode = WIRE_OP_RC_ACK, .pkey = 0xffff,
				.dest_qp = e->bqp->qp_num, .psn = BARRIER_SQ_PSN + 0x1000 };
	struct wire_ext ext = { .aeth = { .syndrome = WIRE_SYN_ACK } };

	e->barrier.len = wire_build(e->barrier.b, FRAME_CAP, &e->path, 0, &bth, &ext, NULL, 0);
	return e->barrier.len ? 0 : -1;
}

static int setup(struct env *e)
{
	char err[256];

	if (alloc_frames(e) < 0) {
		e2e_error("no memory for frames");
		return -1;
	}
	if (setup_verbs(e) < 0)
		return -1;
	if (!(e->ifindex = (int)if_nametoindex(e->port.ifname))) {
		e2e_error("interface %s: %s", e->port.ifname, strerror(errno));
		return -1;
	}
	if ((e->ctl = ctl_connect(e->sock, err, sizeof(err))) < 0) {
		e2e_error("%s", err);
		return -1;
	}
	e->path = (struct wire_path){ .src_ip = e->peer, .dst_ip = e->self, .src_port = 0xd00d,
				      .ttl = 64 };   /* MACs: all zero, as on lo */
	if (open_tx(e) < 0 || open_rx(e) < 0 || open_guard(e) < 0 || barrier_qp(e) < 0)
		return -1;
	if (build_barrier(e) < 0) {
		e2e_error("wire_build refused the barrier");
		return -1;
	}
	child_hello(e);
	return 0;
}

static void destroy(struct env *e, int err, const char *what)
{
	if (err)
		vfail(e, what, err);
}

static void teardown(struct env *e)
{
	if (e->qp)
		destroy(e, rocemu_destroy_qp(e->qp), "rocemu_destroy_qp");
	if (e->bqp)
		destroy(e, rocemu_destroy_qp(e->bqp), "rocemu_destroy_qp");
	if (e->cq)
		destroy(e, rocemu_destroy_cq(e->cq), "rocemu_destroy_cq");
	if (e->mr)
		destroy(e, rocemu_dereg_mr(e->mr), "rocemu_dereg_mr");
	if (e->ro_mr)
		destroy(e, rocemu_dereg_mr(e->ro_mr), "rocemu_dereg_mr");
	if (e->pd2_mr)
		destroy(e, rocemu_dereg_mr(e->pd2_mr), "rocemu_dereg_mr");
	if (e->late_mr)
		destroy(e, rocemu_dereg_mr(e->late_mr), "rocemu_dereg_mr");
	if (e->pd)
		destroy(e, rocemu_dealloc_pd(e->pd), "rocemu_dealloc_pd");
	if (e->pd2)
		destroy(e, rocemu_dealloc_pd(e->pd2), "rocemu_dealloc_pd");
	if (e->ctx)
		destroy(e, rocemu_close(e->ctx), "rocemu_close");
	for (size_t i = 0; i < 4; i++) {
		int fd = i == 0 ? e->ctl : i == 1 ? e->tx : i == 2 ? e->rx : e->guard;

		if (fd >= 0)
			close(fd);
	}
	child_stop(e);
}

/* ---- one case ---- */

static int n_answers(const struct hcase *c)
{
	int n = 0;

	while (n < 3 && c->ans[n].syndrome)
		n++;
	return n;
}

static const char *psn_name(const struct env *e, uint32_t psn, char *buf, size_t len)
{
	int32_t d = wire_psn_diff(psn, e->psn);

	if (d)
		snprintf(buf, len, "PSN P%+d (0x%06x)", (int)d, psn);
	else
		snprintf(buf, len, "PSN P (0x%06x)", psn);
	return buf;
}

/* Stragglers of the previous case would be mistaken for this one's answers. */
static void drain_strays(struct env *e)
{
	static uint8_t buf[FRAME_CAP];
	size_t len;

	while (recv_answer(e, 0, buf, sizeof(buf), &len) == 1)
		e2e_mismatch("an answer arrived before this case's frames were sent (%zu bytes)", len);
}

/* Frames [from, to) of the case, then the barrier. */
static int send_frames(struct env *e, int from, int to)
{
	for (int i = from; i < to; i++)
		if (send_frame(e, &e->shot.f[i]) < 0)
			return -1;
	return send_frame(e, &e->barrier);
}

/* Once the nth barrier of the case is counted, every frame before it has been handled. */
static int wait_barrier(struct env *e, unsigned nth)
{
	const int64_t deadline = e2e_now_ms() + WAIT_MS;

	for (;;) {
		if (read_stats(e, e->after) < 0)
			return -1;
		if (e->after[C_drop_stale_ack] - e->before[C_drop_stale_ack] >= nth)
			return 0;
		if (e2e_now_ms() > deadline) {
			e2e_error("the barrier was not counted within %d ms", WAIT_MS);
			return -1;
		}
		poll(NULL, 0, 1);
	}
}

static unsigned n_barriers(const struct hcase *c)
{
	return c->between ? 2 : 1;
}

static void expected_deltas(const struct hcase *c, uint64_t want[C_COUNT])
{
	memset(want, 0, sizeof(uint64_t) * C_COUNT);
	for (size_t i = 0; i < sizeof(c->d) / sizeof(c->d[0]) && c->d[i].n; i++)
		want[c->d[i].counter] += c->d[i].n;
	if (c->why)
		want[C_refused_none + c->why]++;
	want[C_rcvd_pkts] += c->rcvd + n_barriers(c);  /* barriers are admitted, */
	want[C_drop_stale_ack] += n_barriers(c);       /* then dropped as stale */
	want[C_sent_pkts] += (uint64_t)n_answers(c);
}

/* Every counter moved exactly as expected; notes those the case moved (not the barrier's
 * share, nor sent_pkts, which the answers already show). */
static void check_counters(struct env *e, const struct hcase *c, const uint64_t want[C_COUNT])
{
	char moved[1024] = "";
	size_t used = 0;

	for (int i = 0; i < C_COUNT; i++) {
		uint64_t got = e->after[i] - e->before[i];
		bool barrier = i == C_rcvd_pkts || i == C_drop_stale_ack;
		int64_t own = (int64_t)got - (barrier ? n_barriers(c) : 0);

		if (e2e_timing_counter(counter_names[i]))
			continue;
		if (got != want[i])
			e2e_mismatch("%s moved by %llu, expected %llu", counter_names[i],
				     (unsigned long long)got, (unsigned long long)want[i]);
		if (own && i != C_sent_pkts && used < sizeof(moved))
			used += (size_t)snprintf(moved + used, sizeof(moved) - used, "%s%s %+lld",
						 used ? ", " : "", counter_names[i],
						 (long long)own);
	}
	e2e_note("%s", used ? moved : "no counter moved");
}

/* A CNP as a ConnectX-4 Lx sends one: BECN set, PSN 0, DSCP 48 and ECT(0), to the QP
 * whose packet met the congestion. */
static void check_cnp(struct env *e, const uint8_t *buf, const struct wire_pkt *pkt,
		      const struct answer *want)
{
	(void)e;
	e2e_note("CNP");
	if (!want || want->syndrome != ANSWER_CNP)
		e2e_mismatch("a CNP where none was expected");
	if (!wire_icrc_ok(buf, pkt))
		e2e_mismatch("the CNP's ICRC is wrong");
	if (pkt->bth.dest_qp != PEER_QPN || !pkt->bth.becn || pkt->bth.psn || pkt->bth.ack_req)
		e2e_mismatch("CNP to QP 0x%06x, BECN %d, PSN %u, AckReq %d: expected the peer's "
			     "0x%06x, BECN 1, PSN 0, AckReq 0", pkt->bth.dest_qp, pkt->bth.becn,
			     pkt->bth.psn, pkt->bth.ack_req, PEER_QPN);
	if (buf[pkt->l3_off + 1] != WIRE_TOS_CNP)
		e2e_mismatch("the CNP's TOS is 0x%02x, not 0x%02x", buf[pkt->l3_off + 1],
			     WIRE_TOS_CNP);
}

static void check_answer(struct env *e, const uint8_t *buf, size_t len,
			 const struct answer *want)
{
	struct wire_pkt pkt;
	enum wire_status st = wire_parse(buf, len, &pkt);
	char name[48], got_psn[40], want_psn[40];

	if (st == WIRE_OK && pkt.bth.opcode == WIRE_OP_CNP) {
		check_cnp(e, buf, &pkt, want);
		return;
	}
	if (st != WIRE_OK || pkt.bth.opcode != WIRE_OP_RC_ACK) {
		e2e_mismatch("an answer that is not an ACKNOWLEDGE (%s, opcode 0x%02x)",
			     wire_status_name(st), pkt.bth.opcode);
		return;
	}
	e2e_note("%s at %s", wire_syndrome_name(pkt.ext.aeth.syndrome, name, sizeof(name)),
		 psn_name(e, pkt.bth.psn, got_psn, sizeof(got_psn)));
	if (!wire_icrc_ok(buf, &pkt))
		e2e_mismatch("the answer's ICRC is wrong");
	if (pkt.bth.dest_qp != PEER_QPN)
		e2e_mismatch("the answer is for QP 0x%06x, not the peer's 0x%06x", pkt.bth.dest_qp,
			     PEER_QPN);
	if (!want)
		e2e_mismatch("one answer more than expected");
	else if (pkt.ext.aeth.syndrome != want->syndrome ||
		 pkt.bth.psn != ((e->psn + (uint32_t)want->psn) & WIRE_PSN_MASK))
		e2e_mismatch("expected syndrome 0x%02x at %s", want->syndrome,
			     psn_name(e, (e->psn + (uint32_t)want->psn) & WIRE_PSN_MASK, want_psn,
				  sizeof(want_psn)));
	else if (want->msn_checked && pkt.ext.aeth.msn != want->msn)
		e2e_mismatch("MSN %u, expected %u", pkt.ext.aeth.msn, want->msn);
}

/* The expected answers in order, each within WAIT_MS, then none more already there. The
 * counters (sent_pkts) catch an extra answer that would come later still. */
static void check_answers(struct env *e, const struct hcase *c)
{
	static uint8_t buf[FRAME_CAP];
	int want = n_answers(c);
	size_t len;

	for (int i = 0; i < want + 4; i++) {
		int got = recv_answer(e, i < want ? WAIT_MS : 0, buf, sizeof(buf), &len);

		if (got < 0)
			return;
		if (got == 0) {
			if (i < want)
				e2e_mismatch("answer %d of %d did not come within %d ms", i + 1, want,
					     WAIT_MS);
			else if (i == 0)
				e2e_note("no answer");
			return;
		}
		check_answer(e, buf, len, i < want ? &c->ans[i] : NULL);
	}
}

/* The watched buffer holding [va, va + len), or NULL. */
static struct watched *holder(struct env *e, uint64_t va, size_t len)
{
	for (size_t i = 0; i < sizeof(e->w) / sizeof(e->w[0]); i++) {
		uint64_t start = (uintptr_t)e->w[i].p;

		if (va >= start && len <= e->w[i].len && va - start <= e->w[i].len - len)
			return &e->w[i];
	}
	return NULL;
}

/* What the frames the case lets land write, into the shadows; returns the bytes. */
static size_t land(struct env *e, const struct hcase *c)
{
	size_t bytes = 0;

	for (int i = 0; i < e->shot.n; i++) {
		const struct frame *f = &e->shot.f[i];
		struct watched *w;

		if (!(c->lands >> i & 1) || !f->data_len)
			continue;
		if (!(w = holder(e, f->va, f->data_len))) {
			e2e_error("the table lets frame %d land outside the watched buffers", i);
			continue;
		}
		memcpy(w->shadow + (f->va - (uintptr_t)w->p), f->data, f->data_len);
		bytes += f->data_len;
	}
	return bytes;
}

static void check_memory(struct env *e, size_t landed)
{
	bool ok = true;

	for (size_t i = 0; i < sizeof(e->w) / sizeof(e->w[0]); i++)
		ok = watched_ok(&e->w[i]) && ok;
	if (ok && landed)
		e2e_note("%zu byte(s) landed byte-exact, nothing else changed", landed);
	else if (ok)
		e2e_note("buffers unchanged");
}

static uint32_t fresh_psn(struct env *e)
{
	e->psn_seq = e->psn_seq * 1103515245u + 12345u;
	return (e->psn_seq >> 5) & WIRE_PSN_MASK;
}

/* The stale ACKs the case's own frames make (the barrier counts them too). */
static unsigned own_stale(const struct hcase *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(c->d) / sizeof(c->d[0]) && c->d[i].n; i++)
		n += c->d[i].counter == C_drop_stale_ack ? c->d[i].n : 0;
	return n;
}

/* All frames then a barrier; or, for a case with something to do in between, the first
 * frame, a barrier, that thing, the rest, a second barrier. */
static int send_case(struct env *e, const struct hcase *c)
{
	int split = c->between ? 1 : e->shot.n;

	if (send_frames(e, 0, split) < 0 || wait_barrier(e, 1 + own_stale(c)) < 0)
		return -1;
	if (!c->between)
		return 0;
	if (c->between(e) < 0 || send_frames(e, split, e->shot.n) < 0)
		return -1;
	return wait_barrier(e, 2);
}

/* The case's receive, when it has one (the RESET before it discarded any earlier one). */
static int post_receive(struct env *e, const struct hcase *c)
{
	struct ibv_sge sge = { reth_va(e, &c->reth), c->recv_len, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = RECV_WR_ID, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err;

	if (!c->recv_len)
		return 0;
	err = rocemu_post_recv(e->qp, &wr, &bad);
	return err ? vfail(e, "rocemu_post_recv", err) : 0;
}

/* The one completion of the case's receive, with status want, within WAIT_MS. */
static bool receive_completed(struct env *e, enum ibv_wc_status want, struct ibv_wc *wc)
{
	const int64_t deadline = e2e_now_ms() + WAIT_MS;
	int n;

	while ((n = rocemu_poll_cq(e->cq, 1, wc)) == 0 && e2e_now_ms() < deadline)
		poll(NULL, 0, 1);
	if (n != 1)
		return e2e_mismatch("no completion of the receive within %d ms", WAIT_MS);
	e2e_note("receive completed: %s, %u bytes", rocemu_wc_status_str(wc->status), wc->byte_len);
	if (wc->wr_id != RECV_WR_ID || wc->status != want)
		return e2e_mismatch("wr_id %llu, status %s: expected %llu, %s",
				    (unsigned long long)wc->wr_id, rocemu_wc_status_str(wc->status),
				    (unsigned long long)RECV_WR_ID, rocemu_wc_status_str(want));
	if (rocemu_poll_cq(e->cq, 1, wc) != 0)
		return e2e_mismatch("a second completion");
	return true;
}

/* The first frame's SEND completed the receive, with its bytes. */
static bool verify_received(struct env *e)
{
	struct ibv_wc wc;

	if (!receive_completed(e, IBV_WC_SUCCESS, &wc))
		return false;
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != e->shot.f[0].data_len)
		return e2e_mismatch("opcode %d, %u bytes: expected IBV_WC_RECV, %zu", wc.opcode,
				    wc.byte_len, e->shot.f[0].data_len);
	return true;
}

/* The message the receive was for ended in an invalid request. */
static bool verify_receive_failed(struct env *e)
{
	struct ibv_wc wc;

	return receive_completed(e, IBV_WC_REM_INV_REQ_ERR, &wc);
}

/* The application deregisters its MR while a message into it is half done. */
static int dereg_late(struct env *e)
{
	int err;

	if (!e->late_mr) {
		e2e_error("the MR to deregister is gone already (the case can run once per process)");
		return -1;
	}
	err = rocemu_dereg_mr(e->late_mr);
	if (err)
		return vfail(e, "rocemu_dereg_mr", err);
	e->late_mr = NULL;
	return 0;
}

static bool run_case(struct env *e, const struct hcase *c, int idx)
{
	unsigned access = c->qp_no_write ? 0 : IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						 IBV_ACCESS_REMOTE_ATOMIC |
						 PROTO_ACCESS_FLUSH_GLOBAL |
						 PROTO_ACCESS_FLUSH_PERSISTENT;
	uint64_t want[C_COUNT];

	e2e_reset();
	drain_strays(e);
	e->psn = c->psn ? c->psn : fresh_psn(e);
	if (qp_connect(e, e->qp, PEER_QPN, e->psn, access) == 0 && post_receive(e, c) == 0 &&
	    build_shot(e, c, idx) == 0 && read_stats(e, e->before) == 0 &&
	    send_case(e, c) == 0) {
		expected_deltas(c, want);
		check_counters(e, c, want);
		check_answers(e, c);
		check_memory(e, land(e, c));
		if (c->verify)
			c->verify(e);
	}
	return e2e_report(c->name, "") == 0;
}

static bool selected(const char *name, int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return argc == 0;
}

int main(int argc, char **argv)
{
	static struct env env = { .ctl = -1, .tx = -1, .rx = -1, .guard = -1,
				  .psn_seq = FIRST_PSN, .child = { .up = -1, .down = -1 } };
	const int64_t t0 = e2e_now_ms();
	int ran = 0, failed = 0, teardown_failed = 0;

	if (argc < 4 || inet_pton(AF_INET, argv[2], &env.peer) != 1 ||
	    inet_pton(AF_INET, argv[3], &env.spoof) != 1) {
		fprintf(stderr, "usage: hostile_e2e SOCKET PEER_IPV4 SPOOF_IPV4 [CASE...]\n");
		return 2;
	}
	env.sock = argv[1];
	if (child_start(&env) < 0 || setup(&env) < 0) {
		printf("setup: FAIL: %s\n", e2e_line());
		teardown(&env);
		return 2;
	}
	for (size_t i = 0; i < NCASES; i++)
		if (selected(cases[i].name, argc - 4, argv + 4)) {
			ran++;
			failed += !run_case(&env, &cases[i], (int)i);
		}
	e2e_reset();
	teardown(&env);
	if (e2e_case_failed())
		teardown_failed = e2e_report("teardown", "");
	printf("hostile: %d of %d cases matched in %.1f s\n", ran - failed, ran,
	       (double)(e2e_now_ms() - t0) / 1000);
	return failed || teardown_failed || !ran ? 1 : 0;
}
