/* The transport whole (emu/daemon/transport), driven as a peer would drive it: frames
 * built with wire_build() go to rx_frame(), work requests go into the shared rings, and
 * what comes back is read where a peer and a client would read it: the frames sent (kept,
 * parsed and ICRC-checked by test/port_stub.c), the CQ ring, and the bytes of the MRs.
 * No root, no socket, no clock: timers are fired by calling their callbacks.
 *
 * Every test starts from a fresh device (the fixture): one RC QP in RTS with a 256-byte
 * path MTU, one UD QP, an SRQ, a CQ they share, and MRs over one buffer of pinned pages;
 * the UC tests add a UC QP in RTS, connected to the same peer.
 * When a test ends, the fixture checks that it read every frame sent and every completion,
 * and that every byte of the buffer is what the test expected (nothing written outside
 * what the test named).
 *
 * What each NAK and completion status rocemu produces is covered by:
 *
 *   AETH 0x1F ACK ...................... test_write_only_is_placed_and_acked (and most)
 *   RNR NAK 0x20|min_rnr_timer ......... test_rnr_nak_without_a_receive
 *   NAK 0x60 PSN sequence error ........ test_psn_sequence_error_naks_once_per_gap,
 *                                        test_responder_psn_wraps
 *   NAK 0x61 invalid request ........... test_refusal (loop: 19 causes),
 *                                        test_invalid_request_fails_the_held_receive
 *   NAK 0x62 remote access error ....... test_refusal (loop: 12 causes),
 *                                        test_access_error_fails_write_imm_receive,
 *                                        test_read_mr_gone_midway_naks_access (reply.c)
 *   NAK 0x63 remote operational error .. test_bad_receive_wqe_naks_remote_op (loop: 5)
 *
 *   IBV_WC_SUCCESS ..................... send: test_write_is_segmented_and_acked, ...;
 *                                        receive: test_send_only_fills_the_receive, ...
 *   IBV_WC_REM_INV_REQ_ERR ............. test_nak_ends_the_request (0x61); receive side:
 *                                        test_send_with_invalidate_fails_the_receive,
 *                                        test_invalid_request_fails_the_held_receive,
 *                                        test_ud_srq_receive_too_small,
 *                                        test_uc_srq_receive_completes_in_error
 *   IBV_WC_REM_ACCESS_ERR .............. test_nak_ends_the_request (0x62),
 *                                        test_read_refused_midway; receive side:
 *                                        test_access_error_fails_write_imm_receive,
 *                                        test_uc_srq_receive_completes_in_error
 *   IBV_WC_REM_OP_ERR .................. test_nak_ends_the_request (0x63, unknown code)
 *   IBV_WC_RNR_RETRY_EXC_ERR ........... test_rnr_retries_run_out
 *   IBV_WC_RETRY_EXC_ERR ............... test_sequence_nak_without_retries_left,
 *                                        test_timer_resends_then_gives_up
 *   IBV_WC_WR_FLUSH_ERR ................ send: test_nak_ends_the_request and the other
 *                                        failures; receive:
 *                                        test_bad_receive_wqe_naks_remote_op,
 *                                        test_send_with_invalidate_fails_the_receive,
 *                                        test_receive_rings_only_in_error
 *   IBV_WC_BAD_RESP_ERR ................ test_read_response_to_a_write_is_bad,
 *                                        test_atomic_ack_to_a_read_is_bad,
 *                                        test_read_response_of_wrong_size_is_bad
 *   IBV_WC_LOC_PROT_ERR ................ test_refused_at_fetch (bad lkey, READ into an MR
 *                                        without local write),
 *                                        test_read_response_into_vanished_mr,
 *                                        test_atomic_ack_into_vanished_mr,
 *                                        test_source_mr_gone_before_sending
 *   IBV_WC_LOC_LEN_ERR ................. test_refused_at_fetch (5 SGEs, short atomic,
 *                                        inline too long)
 *   IBV_WC_LOC_QP_OP_ERR ............... test_refused_at_fetch (unknown opcode, misaligned
 *                                        atomic), test_read_without_max_rd_atomic,
 *                                        test_ud_send_wrong_opcode,
 *                                        test_uc_requester_refuses_read; receive side:
 *                                        test_bad_receive_wqe_naks_remote_op,
 *                                        test_ud_receive_in_bad_mr_fails_the_qp,
 *                                        test_uc_receive_refusals
 *
 * Not reached from outside, so not tested: NAK 0x62 from a WRITE copy, READ or atomic that
 * fails after its memory check passed (only a race with deregistration could), and the
 * "SGE list ended" result of the SGE walks (every caller checks the length first).
 *
 * Only the transport's public API is used, and of struct qp only what its clients see:
 * qpn, pd, the CQs, srq, the rings, state, pmtu and the two timers. */
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/transport/transport.h"
#include "test/port_stub.h"
#include "wire/wire.h"

#define PAGE        4096u
#define BUF_PAGES   8
#define IOVA_BASE   0x100000000ull     /* an MR's iova: IOVA_BASE + its offset in buf */

/* The MRs, all over buf. The target takes every remote access and starts and ends inside
 * pages, so the bytes around it are canaries in the same pages. */
#define TARGET_OFF  (PAGE + 100)
#define TARGET_LEN  (2 * PAGE)
#define RECV_OFF    (4 * PAGE + 64)    /* receive buffers: local write only */
#define RECV_LEN    2048
#define RONLY_OFF   (5 * PAGE + 8)     /* remote read only: no write of any kind, no atomic */
#define RONLY_LEN   512
#define OTHER_OFF   (5 * PAGE + 1024)  /* everything allowed, but in another PD */
#define OTHER_LEN   512
#define SRC2_OFF    (5 * PAGE + 2048)  /* the requester's, local read only */
#define SRC2_LEN    1024
#define LOCAL_OFF   (6 * PAGE)         /* the requester's: gathered from, READ results in */
#define LOCAL_LEN   (2 * PAGE - 16)
#define DEAD_OFF    (3 * PAGE + 512)   /* registered, then deregistered */
#define DEAD_LEN    256

#define PEER_QPN    0x00abcd
#define UD_PEER_QPN 0x000077
#define UD_QKEY     0x11110000u
#define SGES        4                  /* what every queue here is made for */
#define IMM_VALUE   0x11223344u
#define REMOTE_VA   0x7f0000001000ull  /* where the requester's READs and WRITEs go */
#define REMOTE_RKEY 0x00123456u
#define AH_HANDLE   5
#define ATOMIC_OFF  4                  /* TARGET_OFF + 4 is 8-aligned */
#define PSN(x)      ((uint32_t)(x) & WIRE_PSN_MASK)

enum key_sel { K_TARGET, K_RECV, K_RONLY, K_OTHER, K_SRC2, K_LOCAL, K_DEAD, K_COUNT };

/* How the RC QP is connected: the fixture uses default_conn, a test may reconnect. */
struct conn {
	uint32_t access;
	enum ibv_mtu mtu;
	uint32_t rq_psn, sq_psn;
	uint8_t min_rnr_timer, max_dest_rd_atomic, max_rd_atomic;
	uint8_t timeout, retry_cnt, rnr_retry;
};

static const struct conn default_conn = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.mtu = IBV_MTU_256, .rq_psn = 0x1000, .sq_psn = 0x2000, .min_rnr_timer = 12,
	.max_dest_rd_atomic = 4, .max_rd_atomic = 2, .timeout = 14, .retry_cnt = 3,
	.rnr_retry = 3,
};

static const uint8_t peer_gid[16] = { [10] = 0xff, [11] = 0xff, 198, 18, 0, 1 };
static const uint8_t dev_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };

static struct dev dev;
static struct owner owner;
static struct mr_client *mrc;
static struct mr_pd *pd, *pd2;
static struct mr *mrs[K_COUNT];
static uint32_t keys[K_COUNT];
static struct cq *cq;
static struct qp *qp, *udqp;
static struct srq *srq;
static struct ah peer_ah;
static struct wire_path peer_path;     /* the peer's frames to us */
static struct conn cur;                /* the RC QP's connection now */
static uint8_t *buf;                   /* BUF_PAGES pinned pages under every MR */
static uint8_t *model;                 /* what buf must hold */
static uint8_t data[2 * PAGE];         /* payloads the peer sends */
static unsigned frames_read;           /* of stub_sent() */
static uint16_t peer_ip_id;

/* ---- the fixture ---- */

static uint64_t iova(size_t off)
{
	return IOVA_BASE + off;
}

static uint64_t target(size_t off)
{
	return iova(TARGET_OFF + off);
}

static uint32_t rq(uint32_t k)
{
	return PSN(cur.rq_psn + k);
}

static uint32_t sq(uint32_t k)
{
	return PSN(cur.sq_psn + k);
}

static void reg(enum key_sel k, struct mr_pd *in, size_t off, size_t len, int access)
{
	ck_assert_int_eq(mr_reg(in, buf + off, len, iova(off), access, &mrs[k]), 0);
	keys[k] = mr_keys(mrs[k]).rkey;
}

static void setup_memory(void)
{
	const int lw = IBV_ACCESS_LOCAL_WRITE;
	const int all = lw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;

	buf = mmap(NULL, BUF_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	ck_assert_ptr_ne(buf, MAP_FAILED);
	model = malloc(BUF_PAGES * PAGE);
	ck_assert_ptr_nonnull(model);
	for (size_t i = 0; i < BUF_PAGES * PAGE; i++)
		buf[i] = model[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)((i * 13 + 1) ^ (i >> 8));
	dev.mrs = mr_table_new(64, 0);
	ck_assert_ptr_nonnull(dev.mrs);
	mrc = mr_client_new(dev.mrs, 0);
	ck_assert_ptr_nonnull(mrc);
	pd = mr_pd_alloc(mrc);
	pd2 = mr_pd_alloc(mrc);
	ck_assert(pd && pd2);
	reg(K_TARGET, pd, TARGET_OFF, TARGET_LEN, all | PROTO_ACCESS_FLUSH_GLOBAL);
	reg(K_RECV, pd, RECV_OFF, RECV_LEN, lw);
	reg(K_RONLY, pd, RONLY_OFF, RONLY_LEN, IBV_ACCESS_REMOTE_READ);
	reg(K_OTHER, pd2, OTHER_OFF, OTHER_LEN, all);
	reg(K_SRC2, pd, SRC2_OFF, SRC2_LEN, 0);
	reg(K_LOCAL, pd, LOCAL_OFF, LOCAL_LEN, lw);
	reg(K_DEAD, pd, DEAD_OFF, DEAD_LEN, all);
	ck_assert_int_eq(mr_dereg(mrs[K_DEAD]), 0);
	mrs[K_DEAD] = NULL;
}

static void setup_port(void)
{
	struct port *p = &dev.port;

	p->cnt = &dev.cnt;
	p->ipv4 = htonl(0xc6120002);       /* 198.18.0.2 */
	addr_gid(p->gids[0].raw, 4, (const uint8_t *)&p->ipv4);
	p->ngids = 1;
	memcpy(p->mac, dev_mac, 6);
	p->link_mtu = 9000;
	p->max_mtu = p->active_mtu = IBV_MTU_4096;
	p->hop_limit[0] = p->hop_limit[1] = 64;
	snprintf(p->ifname, sizeof(p->ifname), "test0");
	peer_path = (struct wire_path){ .src_ip = htonl(0xc6120001), .dst_ip = p->ipv4,
					.src_port = 0xc123, .ttl = 64 };
	memcpy(peer_path.src_mac, stub_peer_mac, 6);
	memcpy(peer_path.dst_mac, dev_mac, 6);
}

/* control's table of address handles, as far as UD sends need it: one, to the peer */
static const struct ah *find_ah(struct owner *o, uint32_t handle)
{
	(void)o;
	return handle == AH_HANDLE ? &peer_ah : NULL;
}

/* The daemon keeps its own mapping of a ring: the client's end of it is closed here. */
/* What op_create_qp does after qp_create: the PD and CQs. */
static struct qp *new_qp(enum ibv_qp_type type)
{
	struct proto_create_qp req = { .max_send_wr = 16, .max_recv_wr = 16, .qp_type = type,
				       .max_send_sge = SGES, .max_recv_sge = SGES,
				       .max_inline_data = PROTO_MAX_INLINE };
	int fds[2], err;
	struct qp *q = qp_create(&owner, &req, fds, &err);

	ck_assert_ptr_nonnull(q);
	q->pd = pd;
	q->send_cq = q->recv_cq = cq;
	cq->users += 2;
	return q;
}

static void setup_queues(void)
{
	int fds[2], err;

	cq = cq_create(&owner, 64, fds, &err);
	ck_assert_ptr_nonnull(cq);
	srq = srq_create(&owner, &(struct proto_create_srq){ .max_wr = 8, .max_sge = SGES }, fds,
			 &err);
	ck_assert_ptr_nonnull(srq);
	qp = new_qp(IBV_QPT_RC);
	udqp = new_qp(IBV_QPT_UD);
	peer_ah = (struct ah){ .owner = &owner, .handle = AH_HANDLE, .pd = pd };
	qp_path_between(&peer_ah.path, &dev, dev.port.gids[0].raw, peer_gid, stub_peer_mac);
}

static void modify(struct qp *q, uint32_t mask, struct proto_qp_attr a)
{
	char err[PROTO_ERRMSG] = "";

	ck_assert_msg(qp_modify(q, mask, &a, err, sizeof(err)) == 0, "qp_modify: %s", err);
}

/* RESET, INIT, RTR, RTS: the RC QP connected to the peer as c says. */
static void connect_rc(const struct conn *c)
{
	struct proto_qp_attr rtr = { .state = IBV_QPS_RTR, .path_mtu = c->mtu,
				     .dest_qpn = PEER_QPN, .rq_psn = c->rq_psn,
				     .min_rnr_timer = c->min_rnr_timer,
				     .max_dest_rd_atomic = c->max_dest_rd_atomic };

	cur = *c;
	memcpy(rtr.dest_gid, peer_gid, 16);
	modify(qp, IBV_QP_STATE, (struct proto_qp_attr){ .state = IBV_QPS_RESET });
	modify(qp, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS,
	       (struct proto_qp_attr){ .state = IBV_QPS_INIT, .access = c->access });
	modify(qp, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	       IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC, rtr);
	modify(qp, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
	       (struct proto_qp_attr){ .state = IBV_QPS_RTS, .sq_psn = c->sq_psn,
				       .timeout = c->timeout, .retry_cnt = c->retry_cnt,
				       .rnr_retry = c->rnr_retry,
				       .max_rd_atomic = c->max_rd_atomic });
	ck_assert_uint_eq(qp->pmtu, 128u << c->mtu);
}

static void connect_ud(void)
{
	modify(udqp, IBV_QP_STATE | IBV_QP_QKEY,
	       (struct proto_qp_attr){ .state = IBV_QPS_INIT, .qkey = UD_QKEY });
	modify(udqp, IBV_QP_STATE, (struct proto_qp_attr){ .state = IBV_QPS_RTR });
	modify(udqp, IBV_QP_STATE | IBV_QP_SQ_PSN,
	       (struct proto_qp_attr){ .state = IBV_QPS_RTS, .sq_psn = 0x300 });
}

static void setup(void)
{
	memset(&dev, 0, sizeof(dev));
	stub_reset();
	frames_read = 0;
	peer_ip_id = 1;
	dev.loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(dev.loop);
	setup_port();
	sched_init(&dev);
	dcqcn_defaults(&dev.tp.cc, 1.25e9);
	dev.tp.find_ah = find_ah;
	owner = (struct owner){ .dev = &dev, .pid = getpid(), .uid = 1000, .async_fd = -1 };
	setup_memory();
	setup_queues();
	connect_rc(&default_conn);
	connect_ud();
}

/* The first byte where buf and model differ, or -1. */
static long memory_mismatch(void)
{
	for (size_t i = 0; i < BUF_PAGES * PAGE; i++)
		if (buf[i] != model[i])
			return (long)i;
	return -1;
}

/* Everything the test did not read is a failure, as is any byte it did not expect: the
 * state is looked at first, freed, and then judged, so a failure leaks nothing. */
static void teardown(void)
{
	long mismatch = memory_mismatch();
	unsigned frames_left = stub_sent_count() - frames_read;
	uint32_t cqes_left = cq->ctl->prod - cq->ctl->cons;
	uint8_t at = mismatch >= 0 ? buf[mismatch] : 0, want = mismatch >= 0 ? model[mismatch] : 0;

	ck_assert_int_eq(qp_destroy(qp), 0);
	ck_assert_int_eq(qp_destroy(udqp), 0);
	ck_assert_int_eq(srq_destroy(srq), 0);
	ck_assert_int_eq(cq_destroy(cq), 0);
	ring_park_empty(&owner);
	mr_table_free(dev.mrs);
	munmap(buf, BUF_PAGES * PAGE);
	free(model);
	ev_loop_destroy(dev.loop);
	ck_assert_msg(mismatch < 0, "buf[%ld] (page %ld + %ld) is 0x%02x, expected 0x%02x",
		      mismatch, mismatch / PAGE, mismatch % PAGE, at, want);
	ck_assert_msg(frames_left == 0, "%u frames sent that the test did not look at",
		      frames_left);
	ck_assert_msg(cqes_left == 0, "%u completions the test did not look at", cqes_left);
}

/* ---- the peer's side: frames in, frames out ---- */

/* A packet of the peer's. dest_qp 0 means the RC QP. */
struct pkt {
	uint8_t opcode;
	uint32_t psn;
	bool no_ack_req;              /* AckReq clear (most packets here ask for an ACK) */
	bool solicited;               /* SE set */
	struct wire_ext ext;
	const uint8_t *payload;
	size_t len;
	uint32_t dest_qp;
};

static size_t build(const struct pkt *p, uint8_t *frame, size_t cap)
{
	struct wire_bth bth = { .opcode = p->opcode, .pkey = 0xffff,
				.dest_qp = p->dest_qp ? p->dest_qp : qp->qpn,
				.ack_req = !p->no_ack_req, .solicited = p->solicited,
				.psn = PSN(p->psn) };
	size_t len = wire_build(frame, cap, &peer_path, peer_ip_id++, &bth, &p->ext, p->payload,
				p->len);

	ck_assert_uint_gt(len, 0);
	return len;
}

/* rx_frame() gets a heap copy of exactly the frame: ASan sees any read past its end. */
static void arrive_raw(const uint8_t *frame, size_t len)
{
	uint8_t *copy = malloc(len);

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, frame, len);
	rx_frame(&dev, copy, len);
	free(copy);
}

static void arrive(const struct pkt *p)
{
	uint8_t frame[DEV_FRAME_MAX];

	arrive_raw(frame, build(p, frame, sizeof(frame)));
}

/* What the loop does before it sleeps: the ACKs due, the QPs' turns (READ responses, the
 * requests an ACK let go), until a turn sends nothing more; then the CQs' wakeups. */
static void pump(void)
{
	for (int turn = 0; turn < 64; turn++) {
		unsigned before = stub_sent_count();

		sched_send(&dev);
		if (stub_sent_count() == before)
			break;
	}
	cq_flush_notify(&dev);
}

static void peer(const struct pkt *p)
{
	arrive(p);
	pump();
}

static void peer_write(uint8_t op, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t dma_len,
		       size_t data_off, size_t n)
{
	peer(&(struct pkt){ .opcode = op, .psn = psn, .ext.reth = { va, rkey, dma_len },
			    .ext.imm = IMM_VALUE, .payload = data + data_off, .len = n });
}

static void peer_send(uint8_t op, uint32_t psn, size_t data_off, size_t n)
{
	peer(&(struct pkt){ .opcode = op, .psn = psn, .ext.imm = IMM_VALUE, .ext.ieth = 0x4321,
			    .payload = data + data_off, .len = n });
}

static void peer_read(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len)
{
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_READ_REQUEST, .psn = psn,
			    .ext.reth = { va, rkey, len } });
}

static void peer_atomic(uint8_t op, uint32_t psn, uint64_t va, uint32_t rkey, uint64_t swap_add,
			uint64_t compare)
{
	peer(&(struct pkt){ .opcode = op, .psn = psn,
			    .ext.atomic = { va, rkey, swap_add, compare } });
}

/* ACKs, NAKs and responses to the RC QP's requests. */
static void peer_ack(uint32_t psn, uint8_t syndrome)
{
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_ACK, .psn = psn,
			    .ext.aeth = { syndrome, 0 } });
}

static void peer_read_response(uint8_t op, uint32_t psn, size_t data_off, size_t n)
{
	peer(&(struct pkt){ .opcode = op, .psn = psn, .ext.aeth = { WIRE_SYN_ACK, 0 },
			    .payload = data + data_off, .len = n });
}

static void peer_atomic_ack(uint32_t psn, uint64_t orig)
{
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_ATOMIC_ACK, .psn = psn,
			    .ext.aeth = { WIRE_SYN_ACK, 0 }, .ext.atomic_ack = orig });
}

/* A datagram to the UD QP; its frame is left in frame for the GRH check. */
static size_t peer_datagram(uint8_t op, uint32_t qkey, size_t data_off, size_t n,
			    uint8_t frame[DEV_FRAME_MAX])
{
	const struct pkt p = { .opcode = op, .dest_qp = udqp->qpn, .no_ack_req = true,
			       .ext.deth = { qkey, UD_PEER_QPN }, .ext.imm = IMM_VALUE,
			       .payload = data + data_off, .len = n };
	size_t len = build(&p, frame, DEV_FRAME_MAX);

	arrive_raw(frame, len);
	pump();
	return len;
}

/* The next frame the daemon sent: well formed, with a good ICRC, from us to the peer. */
static const struct stub_frame *next_sent(void)
{
	const struct stub_frame *f = stub_sent(frames_read);

	ck_assert_msg(f != NULL, "frame %u was not sent (%u were)", frames_read, stub_sent_count());
	frames_read++;
	ck_assert_msg(f->well_formed, "frame %u is malformed or its ICRC is bad", frames_read - 1);
	ck_assert_mem_eq(f->pkt.dst_ip, &peer_path.src_ip, 4);
	ck_assert_mem_eq(f->pkt.src_ip, &dev.port.ipv4, 4);
	ck_assert_mem_eq(f->bytes, stub_peer_mac, 6);
	return f;
}

static void expect_nothing_sent(void)
{
	ck_assert_uint_eq(stub_sent_count(), frames_read);
}

/* An RC packet to the peer QP, of this opcode and PSN. */
static const struct stub_frame *expect_packet(uint8_t opcode, uint32_t psn)
{
	const struct stub_frame *f = next_sent();

	ck_assert_msg(f->pkt.bth.opcode == opcode, "opcode 0x%02x, expected 0x%02x",
		      f->pkt.bth.opcode, opcode);
	ck_assert_uint_eq(f->pkt.bth.dest_qp, PEER_QPN);
	ck_assert_msg(f->pkt.bth.psn == PSN(psn), "PSN 0x%06x, expected 0x%06x", f->pkt.bth.psn,
		      PSN(psn));
	return f;
}

static void expect_payload(const struct stub_frame *f, const uint8_t *bytes, size_t n)
{
	ck_assert_uint_eq(f->pkt.payload_len, n);
	if (n)
		ck_assert_mem_eq(f->bytes + f->pkt.payload_off, bytes, n);
}

static void expect_aeth(const struct stub_frame *f, uint8_t syndrome, uint32_t msn)
{
	ck_assert_msg(f->pkt.ext.aeth.syndrome == syndrome, "syndrome 0x%02x, expected 0x%02x",
		      f->pkt.ext.aeth.syndrome, syndrome);
	ck_assert_uint_eq(f->pkt.ext.aeth.msn, msn);
}

static void expect_ack(uint32_t psn, uint8_t syndrome, uint32_t msn)
{
	expect_aeth(expect_packet(WIRE_OP_RC_ACK, psn), syndrome, msn);
}

/* A READ response: FIRST, LAST and ONLY carry an AETH, MIDDLE none. */
static void expect_read_response(uint8_t opcode, uint32_t psn, uint32_t msn,
				 const uint8_t *bytes, size_t n)
{
	const struct stub_frame *f = expect_packet(opcode, psn);

	if (opcode == WIRE_OP_RC_READ_RESP_MIDDLE)
		ck_assert(!(f->pkt.op->headers & WIRE_HDR_AETH));
	else
		expect_aeth(f, WIRE_SYN_ACK, msn);
	expect_payload(f, bytes, n);
}

static void expect_atomic_ack(uint32_t psn, uint32_t msn, uint64_t orig)
{
	const struct stub_frame *f = expect_packet(WIRE_OP_RC_ATOMIC_ACK, psn);

	expect_aeth(f, WIRE_SYN_ACK, msn);
	ck_assert_uint_eq(f->pkt.ext.atomic_ack, orig);
}

/* ---- the client's side: rings and memory ---- */

/* For messages (status_name() is libibverbs', which the daemon does not link). */
static const char *status_name(uint32_t status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "SUCCESS", [IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
		[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR", [IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
		[IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR", [IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
		[IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
		[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR", [IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
		[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
	};

	return status < sizeof(names) / sizeof(names[0]) && names[status] ? names[status] : "?";
}

static struct proto_cqe next_cqe(void)
{
	uint32_t prod = __atomic_load_n(&cq->ctl->prod, __ATOMIC_ACQUIRE);
	uint32_t cons = cq->ctl->cons;
	struct proto_cqe c;

	ck_assert_msg(prod != cons, "no completion");
	c = cq->ring[cons & (cq->entries - 1)];
	__atomic_store_n(&cq->ctl->cons, cons + 1, __ATOMIC_RELEASE);
	return c;
}

static struct proto_cqe expect_cqe(uint64_t wr_id, enum ibv_wc_status status,
				   enum ibv_wc_opcode opcode)
{
	struct proto_cqe c = next_cqe();

	ck_assert_uint_eq(c.wr_id, wr_id);
	ck_assert_msg(c.status == (uint32_t)status, "wr_id %llu: status %s, expected %s",
		      (unsigned long long)wr_id, status_name(c.status),
		      status_name(status));
	ck_assert_uint_eq(c.opcode, opcode);
	return c;
}

static void expect_no_cqe(void)
{
	ck_assert_uint_eq(cq->ctl->prod, cq->ctl->cons);
}

/* The test expects these bytes in buf (the daemon is to put them there). */
static void expect_bytes(size_t off, const void *src, size_t n)
{
	memcpy(model + off, src, n);
}

/* The application writes its own memory. */
static void poke(size_t off, const void *src, size_t n)
{
	memcpy(buf + off, src, n);
	memcpy(model + off, src, n);
}

static uint64_t word_at(size_t off)
{
	uint64_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

/* A slot holds only what its queue was made for (stride bytes). */
static void post_rwqe(struct proto_ring_ctl *ctl, uint8_t *ring, uint32_t entries,
		      uint32_t stride, struct proto_rwqe w)
{
	uint32_t prod = ctl->prod;

	memcpy(ring + (size_t)(prod & (entries - 1)) * stride, &w, stride);
	__atomic_store_n(&ctl->prod, prod + 1, __ATOMIC_RELEASE);
}

static void post_recv(struct qp *q, struct proto_rwqe w)
{
	post_rwqe(q->rq_ctl, q->rq, q->rq_entries, q->rq_stride, w);
}

static void post_srq(struct proto_rwqe w)
{
	post_rwqe(srq->ctl, srq->ring, srq->entries, srq->stride, w);
}

/* One SGE of len bytes at off in the receive MR. */
static struct proto_rwqe recv_wqe(uint64_t wr_id, size_t off, uint32_t len)
{
	return (struct proto_rwqe){ .wr_id = wr_id, .num_sge = 1,
				    .sge[0] = { iova(RECV_OFF + off), len, keys[K_RECV] } };
}

/* What create_qp with an SRQ does. */
static void attach_srq(struct qp *q)
{
	q->srq = srq;
	srq->users++;
}

static void post_send(struct qp *q, struct proto_swqe w)
{
	uint32_t prod = q->sq_ctl->prod;

	memcpy(q->sq + (size_t)(prod & (q->sq_entries - 1)) * q->sq_stride, &w, q->sq_stride);
	__atomic_store_n(&q->sq_ctl->prod, prod + 1, __ATOMIC_RELEASE);
}

/* The client rang the doorbell, and the loop turned. */
static void doorbell(struct qp *q)
{
	req_pump(q);
	pump();
}

/* A signaled request of len bytes at off in the local MR, to REMOTE_VA. */
static struct proto_swqe swqe(uint64_t wr_id, uint32_t opcode, size_t off, uint32_t len)
{
	return (struct proto_swqe){ .wr_id = wr_id, .opcode = opcode, .flags = IBV_SEND_SIGNALED,
				    .remote_addr = REMOTE_VA, .rkey = REMOTE_RKEY, .num_sge = 1,
				    .sge[0] = { iova(LOCAL_OFF + off), len, keys[K_LOCAL] } };
}

static void post_and_ring(struct proto_swqe w)
{
	post_send(qp, w);
	doorbell(qp);
}

/* The retransmission timer expires. libev stops a timer before calling it back, so the
 * callback finds it inactive, as from the loop. */
static void fire_retry_timer(void)
{
	ck_assert_msg(ev_is_active(&qp->retry_timer), "the retransmission timer is not armed");
	ev_timer_stop(dev.loop, &qp->retry_timer);
	comp_timer_cb(dev.loop, &qp->retry_timer, EV_TIMER);
	pump();
}

static void fire_rnr_timer(void)
{
	ck_assert_msg(ev_is_active(&qp->rnr_timer), "the RNR timer is not armed");
	ev_timer_stop(dev.loop, &qp->rnr_timer);
	req_rnr_cb(dev.loop, &qp->rnr_timer, EV_TIMER);
	pump();
}

/* How long until the timer fires, as armed (the loop's clock stands still in tests). */
static double remaining(ev_timer *t)
{
	return ev_timer_remaining(dev.loop, t);
}

static void reconnect(void (*change)(struct conn *c))
{
	struct conn c = default_conn;

	change(&c);
	connect_rc(&c);
}

/* ======== responder: what a peer's requests do ======== */

START_TEST(test_write_only_is_placed_and_acked)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(8), keys[K_TARGET], 100, 0, 100);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	expect_bytes(TARGET_OFF + 8, data, 100);
	ck_assert_uint_eq(dev.cnt.rdma_recvs, 1);
	ck_assert_uint_eq(dev.cnt.acks_sent, 1);
}
END_TEST

/* FIRST, MIDDLE, LAST across a page boundary of the MR; only the last asks for an ACK. */
START_TEST(test_write_first_middle_last)
{
	const size_t at = PAGE - 200;      /* the MR's page boundary lies inside the message */

	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_FIRST, .psn = rq(0), .no_ack_req = true,
			    .ext.reth = { target(at), keys[K_TARGET], 600 }, .payload = data,
			    .len = 256 });
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_MIDDLE, .psn = rq(1), .no_ack_req = true,
			    .payload = data + 256, .len = 256 });
	expect_nothing_sent();
	peer_write(WIRE_OP_RC_WRITE_LAST, rq(2), 0, 0, 0, 512, 88);
	expect_ack(rq(2), WIRE_SYN_ACK, 1);
	expect_bytes(TARGET_OFF + at, data, 600);
}
END_TEST

/* A WRITE of 0 bytes names no memory: its rkey is not looked at. */
START_TEST(test_zero_length_write_checks_no_key)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), 0, 0xdeadbeef, 0, 0, 0);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
}
END_TEST

START_TEST(test_write_with_imm_consumes_a_receive)
{
	struct proto_cqe c;

	post_recv(qp, recv_wqe(11, 0, 256));
	post_recv(qp, recv_wqe(12, 256, 256));
	peer_write(WIRE_OP_RC_WRITE_ONLY_IMM, rq(0), target(16), keys[K_TARGET], 64, 0, 64);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	c = expect_cqe(11, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert_uint_eq(c.byte_len, 64);
	ck_assert_uint_eq(c.imm, htonl(IMM_VALUE));
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
	ck_assert_uint_eq(c.qp_num, qp->qpn);
	ck_assert_uint_eq(c.src_qp, PEER_QPN);
	/* two packets: the receive is taken at the last; byte_len is the whole DMA length */
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_FIRST, .psn = rq(1), .no_ack_req = true,
			    .ext.reth = { target(100), keys[K_TARGET], 300 }, .payload = data + 64,
			    .len = 256 });
	expect_no_cqe();
	peer_write(WIRE_OP_RC_WRITE_LAST_IMM, rq(2), 0, 0, 0, 64 + 256, 44);
	expect_ack(rq(2), WIRE_SYN_ACK, 2);
	c = expect_cqe(12, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert_uint_eq(c.byte_len, 300);
	expect_bytes(TARGET_OFF + 16, data, 64);
	expect_bytes(TARGET_OFF + 100, data + 64, 300);
	/* the receive buffers are left alone: the data went to the RETH's address */
}
END_TEST

START_TEST(test_send_only_fills_the_receive)
{
	struct proto_cqe c;

	post_recv(qp, recv_wqe(21, 0, 128));
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 200, 100);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	c = expect_cqe(21, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.byte_len, 100);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH);
	ck_assert_uint_eq(c.src_qp, PEER_QPN);
	ck_assert_uint_eq(c.qp_num, qp->qpn);
	ck_assert_uint_eq(qp->rq_ctl->cons, 1);
	expect_bytes(RECV_OFF, data + 200, 100);
}
END_TEST

/* A CQ armed for solicited events only asks with PROTO_RING_WAKE_SOLICITED: an unsolicited
 * message's completion leaves its pipe unwritten and the request standing, so the
 * channel's fd stays quiet as a kernel device's; a solicited one takes the request and
 * writes once, the event; so does an unsuccessful one (a receive flushed). */
START_TEST(test_solicited_arming_waits_for_a_solicited_completion)
{
	const uint32_t asked = PROTO_RING_WAKE | PROTO_RING_WAKE_SOLICITED;
	uint64_t token;

	ck_assert_int_eq(fcntl(cq->client_end, F_SETFL, O_NONBLOCK), 0);
	__atomic_store_n(&cq->ctl->cons_flags, asked, __ATOMIC_RELAXED);
	post_recv(qp, recv_wqe(21, 0, 128));
	post_recv(qp, recv_wqe(22, 0, 128));
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 200, 100);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	expect_cqe(21, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_int_eq(read(cq->client_end, &token, sizeof(token)), -1);
	ck_assert_uint_eq(cq->ctl->cons_flags, asked);
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_ONLY, .psn = rq(1), .solicited = true,
			    .payload = data, .len = 10 });
	expect_ack(rq(1), WIRE_SYN_ACK, 2);
	ck_assert(expect_cqe(22, IBV_WC_SUCCESS, IBV_WC_RECV).solicited);
	expect_bytes(RECV_OFF, data + 200, 100);
	expect_bytes(RECV_OFF, data, 10);
	ck_assert_int_eq(read(cq->client_end, &token, sizeof(token)), (int)sizeof(token));
	ck_assert_int_eq(read(cq->client_end, &token, sizeof(token)), -1);
	ck_assert_uint_eq(cq->ctl->cons_flags, 0);

	__atomic_store_n(&cq->ctl->cons_flags, asked, __ATOMIC_RELAXED);
	post_recv(qp, recv_wqe(23, 0, 64));
	qp_to_error(qp);
	pump();
	ck_assert(!expect_cqe(23, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV).solicited);
	ck_assert_int_eq(read(cq->client_end, &token, sizeof(token)), (int)sizeof(token));
	ck_assert_uint_eq(cq->ctl->cons_flags, 0);
}
END_TEST

/* A full CQ loses the completion, and its client learns of each loss from an
 * IBV_EVENT_CQ_ERR in its event pipe, as rxe raises one for each. */
START_TEST(test_full_cq_raises_cq_err_per_lost_completion)
{
	struct proto_async_event ev[4];
	uint64_t lost = dev.cnt.cq_overflow;
	int ends[2], fds[2], err;
	struct cq *small;

	ck_assert_int_eq(pipe2(ends, O_NONBLOCK), 0);
	owner.async_fd = ends[1];
	small = cq_create(&owner, 1, fds, &err);
	ck_assert_ptr_nonnull(small);
	for (uint64_t i = 0; i < 3; i++)
		cq_push(small, &(struct proto_cqe){ .wr_id = i });
	ck_assert_uint_eq(small->ctl->prod, small->entries);
	ck_assert_uint_eq(dev.cnt.cq_overflow - lost, 3 - small->entries);
	ck_assert_int_eq(read(ends[0], ev, sizeof(ev)),
			 (int)((3 - small->entries) * sizeof(ev[0])));
	ck_assert_uint_eq(ev[0].type, IBV_EVENT_CQ_ERR);
	ck_assert_uint_eq(ev[0].handle, small->handle);
	owner.async_fd = -1;
	close(ends[0]);
	close(ends[1]);
	ck_assert_int_eq(cq_destroy(small), 0);
}
END_TEST

/* The receive's completion is visible before the loop sends the ACKs due; a client that
 * answers at once may ring while the loop is still awake, and its answer must not overtake
 * the ACK: the peer would see the answer arrive before its SEND completed. */
/* A destroyed queue's ring and pipe go to the owner's next queue of the same kind and size,
 * zeroed and drained; a queue of another size or kind gets new ones; the park keeps at most
 * PROTO_RING_PARK_SLOTS, and the owner's end frees them. */
START_TEST(test_rings_parked_for_the_next_queue)
{
	struct cq *a, *b, *many[PROTO_RING_PARK_SLOTS + 2];
	uint64_t reused = dev.cnt.rings_reused;
	int fds[2], err, memfd, client_end, unread = -1;
	struct qp *q;
	char byte = 1;

	a = cq_create(&owner, 4, fds, &err);
	ck_assert_ptr_nonnull(a);
	memfd = fds[0];
	client_end = fds[1];
	a->ctl->prod = 7;
	memset(a->ring, 0xab, a->ring_bytes - sizeof(*a->ctl));
	ck_assert_int_eq(write(a->notify_fd, &byte, 1), 1);
	ck_assert_int_eq(cq_destroy(a), 0);
	ck_assert_uint_eq(owner.park.n, 1);

	b = cq_create(&owner, 3, fds, &err);         /* 4 entries again: the same bytes */
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(fds[0], memfd);
	ck_assert_int_eq(fds[1], client_end);
	ck_assert_uint_eq(dev.cnt.rings_reused, reused + 1);
	ck_assert_uint_eq(b->ctl->prod, 0);
	for (size_t i = 0; i < b->ring_bytes - sizeof(*b->ctl); i++)
		ck_assert_uint_eq(((uint8_t *)b->ring)[i], 0);
	ck_assert_int_eq(ioctl(b->client_end, FIONREAD, &unread), 0);
	ck_assert_int_eq(unread, 0);
	ck_assert_int_eq(cq_destroy(b), 0);

	q = new_qp(IBV_QPT_RC);                       /* a QP never takes a CQ's ring */
	ck_assert_int_ne(q->memfd, memfd);
	ck_assert_uint_eq(dev.cnt.rings_reused, reused + 1);
	ck_assert_int_eq(qp_destroy(q), 0);

	for (unsigned i = 0; i < PROTO_RING_PARK_SLOTS + 2; i++)
		ck_assert_ptr_nonnull(many[i] = cq_create(&owner, 1024, fds, &err));
	for (unsigned i = 0; i < PROTO_RING_PARK_SLOTS + 2; i++)
		ck_assert_int_eq(cq_destroy(many[i]), 0);
	ck_assert_uint_eq(owner.park.n, PROTO_RING_PARK_SLOTS);
	ring_park_empty(&owner);
	ck_assert_uint_eq(owner.park.n, 0);
}
END_TEST

START_TEST(test_ack_goes_before_the_answer)
{
	post_recv(qp, recv_wqe(21, 0, 128));
	arrive(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_ONLY, .psn = rq(0), .payload = data,
			      .len = 8 });
	expect_nothing_sent();
	expect_cqe(21, IBV_WC_SUCCESS, IBV_WC_RECV);
	expect_bytes(RECV_OFF, data, 8);
	post_and_ring(swqe(1, IBV_WR_SEND, 0, 8));
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	expect_packet(WIRE_OP_RC_SEND_ONLY, sq(0));
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.acks_sent, 1);
}
END_TEST

/* 562 bytes in three packets, scattered over two SGEs: 300 in the first, 262 in the
 * second. */
START_TEST(test_send_multi_packet_over_two_sges)
{
	struct proto_rwqe w = { .wr_id = 22, .num_sge = 2,
				.sge = { { iova(RECV_OFF), 300, keys[K_RECV] },
					 { iova(RECV_OFF + 1024), 400, keys[K_RECV] } } };

	post_recv(qp, w);
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_FIRST, .psn = rq(0), .no_ack_req = true,
			    .payload = data, .len = 256 });
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_MIDDLE, .psn = rq(1), .no_ack_req = true,
			    .payload = data + 256, .len = 256 });
	expect_nothing_sent();
	expect_no_cqe();
	peer_send(WIRE_OP_RC_SEND_LAST, rq(2), 512, 50);
	expect_ack(rq(2), WIRE_SYN_ACK, 1);
	ck_assert_uint_eq(expect_cqe(22, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 562);
	expect_bytes(RECV_OFF, data, 300);
	expect_bytes(RECV_OFF + 1024, data + 300, 262);
}
END_TEST

START_TEST(test_send_with_imm)
{
	struct proto_cqe c;

	post_recv(qp, recv_wqe(31, 0, 64));
	post_recv(qp, recv_wqe(32, 512, 512));
	peer_send(WIRE_OP_RC_SEND_ONLY_IMM, rq(0), 0, 40);
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_FIRST, .psn = rq(1), .no_ack_req = true,
			    .payload = data + 40, .len = 256 });
	peer_send(WIRE_OP_RC_SEND_LAST_IMM, rq(2), 296, 4);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	expect_ack(rq(2), WIRE_SYN_ACK, 2);
	c = expect_cqe(31, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
	ck_assert_uint_eq(c.imm, htonl(IMM_VALUE));
	ck_assert_uint_eq(c.byte_len, 40);
	c = expect_cqe(32, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
	ck_assert_uint_eq(c.byte_len, 260);
	expect_bytes(RECV_OFF, data, 40);
	expect_bytes(RECV_OFF + 512, data + 40, 260);
}
END_TEST

/* rocemu has no memory windows, the only keys a SEND may invalidate: as rxe, the data is
 * placed, the packet still ACKed (the MSN not counting it), the receive fails and the QP
 * goes to the error state. */
START_TEST(test_send_with_invalidate_fails_the_receive)
{
	struct proto_cqe c;

	post_recv(qp, recv_wqe(41, 0, 64));
	post_recv(qp, recv_wqe(42, 64, 64));
	peer_send(WIRE_OP_RC_SEND_ONLY_INV, rq(0), 0, 32);
	expect_ack(rq(0), WIRE_SYN_ACK, 0);
	c = expect_cqe(41, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH | IBV_WC_WITH_INV);
	ck_assert_uint_eq(c.imm, 0x4321);        /* the rkey, host order (invalidated_rkey) */
	ck_assert_uint_eq(c.byte_len, 32);
	expect_cqe(42, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	expect_bytes(RECV_OFF, data, 32);
}
END_TEST

START_TEST(test_read_only_response)
{
	peer_read(rq(0), target(40), keys[K_TARGET], 100);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 1, buf + TARGET_OFF + 40, 100);
	/* the READ took one PSN: the next request is expected right after it */
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(1), target(0), keys[K_TARGET], 8, 0, 8);
	expect_ack(rq(1), WIRE_SYN_ACK, 2);
	expect_bytes(TARGET_OFF, data, 8);
}
END_TEST

/* 600 bytes from across a page boundary: FIRST, MIDDLE, LAST, PSNs p, p+1, p+2. */
START_TEST(test_read_multi_packet_responses)
{
	const uint8_t *src = buf + TARGET_OFF + PAGE - 200;

	peer_read(rq(0), target(PAGE - 200), keys[K_TARGET], 600);
	expect_read_response(WIRE_OP_RC_READ_RESP_FIRST, rq(0), 1, src, 256);
	expect_read_response(WIRE_OP_RC_READ_RESP_MIDDLE, rq(1), 1, src + 256, 256);
	expect_read_response(WIRE_OP_RC_READ_RESP_LAST, rq(2), 1, src + 512, 88);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(3), target(0), keys[K_TARGET], 8, 0, 8);
	expect_ack(rq(3), WIRE_SYN_ACK, 2);
	expect_bytes(TARGET_OFF, data, 8);
}
END_TEST

/* A READ of 0 bytes names no memory: one empty READ RESPONSE ONLY. */
START_TEST(test_zero_length_read)
{
	peer_read(rq(0), 0, 0xdeadbeef, 0);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 1, data, 0);
}
END_TEST

START_TEST(test_atomic_compare_swap)
{
	const uint64_t v = 0x0102030405060708ull, swap = 0xa0a0a0a0b0b0b0b0ull;

	poke(TARGET_OFF + ATOMIC_OFF, &v, 8);
	peer_atomic(WIRE_OP_RC_COMPARE_SWAP, rq(0), target(ATOMIC_OFF), keys[K_TARGET], swap, v);
	expect_atomic_ack(rq(0), 1, v);
	ck_assert_uint_eq(word_at(TARGET_OFF + ATOMIC_OFF), swap);
	/* compare no longer equal: the original comes back, the memory stays */
	peer_atomic(WIRE_OP_RC_COMPARE_SWAP, rq(1), target(ATOMIC_OFF), keys[K_TARGET], 7, v);
	expect_atomic_ack(rq(1), 2, swap);
	expect_bytes(TARGET_OFF + ATOMIC_OFF, &swap, 8);
}
END_TEST

/* FETCH_ADD adds modulo 2^64. */
START_TEST(test_atomic_fetch_add)
{
	const uint64_t v = UINT64_MAX - 1, sum = 3;

	poke(TARGET_OFF + ATOMIC_OFF + 8, &v, 8);
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(0), target(ATOMIC_OFF + 8), keys[K_TARGET], 5, 0);
	expect_atomic_ack(rq(0), 1, v);
	expect_bytes(TARGET_OFF + ATOMIC_OFF + 8, &sum, 8);
}
END_TEST

/* A duplicate WRITE is ACKed again (through the last PSN taken) and not executed again:
 * its different payload never reaches memory. */
START_TEST(test_duplicate_write_is_acked_not_executed)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(0), keys[K_TARGET], 64, 0, 64);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(0), keys[K_TARGET], 64, 500, 64);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	ck_assert_uint_eq(dev.cnt.duplicate_request, 1);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(1), target(64), keys[K_TARGET], 8, 0, 8);
	expect_ack(rq(1), WIRE_SYN_ACK, 2);
	expect_bytes(TARGET_OFF, data, 64);
	expect_bytes(TARGET_OFF + 64, data, 8);
}
END_TEST

/* A duplicate READ is answered again, from its own PSN: whole, or from a response in the
 * middle; one asking for more than the original did is dropped. */
START_TEST(test_duplicate_read_is_answered_again)
{
	const uint8_t *src = buf + TARGET_OFF + 1000;

	peer_read(rq(0), target(1000), keys[K_TARGET], 600);
	for (int round = 0; round < 2; round++) {
		expect_read_response(WIRE_OP_RC_READ_RESP_FIRST, rq(0), 1, src, 256);
		expect_read_response(WIRE_OP_RC_READ_RESP_MIDDLE, rq(1), 1, src + 256, 256);
		expect_read_response(WIRE_OP_RC_READ_RESP_LAST, rq(2), 1, src + 512, 88);
		if (round == 0)
			peer_read(rq(0), target(1000), keys[K_TARGET], 600);
	}
	peer_read(rq(1), target(1256), keys[K_TARGET], 344);
	expect_read_response(WIRE_OP_RC_READ_RESP_MIDDLE, rq(1), 1, src + 256, 256);
	expect_read_response(WIRE_OP_RC_READ_RESP_LAST, rq(2), 1, src + 512, 88);
	peer_read(rq(1), target(1256), keys[K_TARGET], 400);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.duplicate_request, 3);
}
END_TEST

/* A duplicate atomic is answered with the original value saved when it ran, and does not
 * run again. */
START_TEST(test_duplicate_atomic_returns_saved_value)
{
	const uint64_t v = 1000, after = 1000 + 2 * 7;

	poke(TARGET_OFF + ATOMIC_OFF, &v, 8);
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(0), target(ATOMIC_OFF), keys[K_TARGET], 7, 0);
	expect_atomic_ack(rq(0), 1, v);
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(1), target(ATOMIC_OFF), keys[K_TARGET], 7, 0);
	expect_atomic_ack(rq(1), 2, v + 7);
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(0), target(ATOMIC_OFF), keys[K_TARGET], 7, 0);
	expect_atomic_ack(rq(0), 2, v);
	expect_bytes(TARGET_OFF + ATOMIC_OFF, &after, 8);
	ck_assert_uint_eq(dev.cnt.duplicate_request, 1);
}
END_TEST

/* Ahead of the expected PSN: one NAK 0x60 carrying the expected PSN, then silence until
 * that PSN comes (ACKed although it did not ask); a new gap draws a new NAK. */
START_TEST(test_psn_sequence_error_naks_once_per_gap)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(2), target(0), keys[K_TARGET], 8, 0, 8);
	expect_ack(rq(0), WIRE_SYN_NAK_PSN_SEQ, 0);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(3), target(0), keys[K_TARGET], 8, 0, 8);
	expect_nothing_sent();
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_ONLY, .psn = rq(0), .no_ack_req = true,
			    .ext.reth = { target(16), keys[K_TARGET], 8 }, .payload = data + 16,
			    .len = 8 });
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(5), target(0), keys[K_TARGET], 8, 0, 8);
	expect_ack(rq(1), WIRE_SYN_NAK_PSN_SEQ, 1);
	ck_assert_uint_eq(dev.cnt.out_of_seq_request, 3);
	ck_assert_uint_eq(dev.cnt.nak_seq_sent, 2);
	ck_assert_int_eq(qp->state, IBV_QPS_RTS);
	expect_bytes(TARGET_OFF + 16, data + 16, 8);
}
END_TEST

/* No receive posted: an RNR NAK (0x20 | min_rnr_timer) for the SEND's PSN, which stays
 * expected; once a receive is posted the resent SEND goes in. */
START_TEST(test_rnr_nak_without_a_receive)
{
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 0, 16);
	expect_ack(rq(0), 0x20 | 12, 0);
	peer_write(WIRE_OP_RC_WRITE_ONLY_IMM, rq(0), target(0), keys[K_TARGET], 16, 0, 16);
	expect_ack(rq(0), 0x20 | 12, 0);
	ck_assert_uint_eq(dev.cnt.send_rnr_err, 2);
	ck_assert_int_eq(qp->state, IBV_QPS_RTS);
	post_recv(qp, recv_wqe(51, 0, 64));
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 0, 16);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	ck_assert_uint_eq(expect_cqe(51, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 16);
	expect_bytes(RECV_OFF, data, 16);
}
END_TEST

static void near_wrap(struct conn *c)
{
	c->rq_psn = 0xfffffe;
	c->sq_psn = 0xffffff;
}

/* A message across PSN 0xffffff -> 0, then a duplicate from before the wrap, a READ and a
 * gap after it. */
START_TEST(test_responder_psn_wraps)
{
	reconnect(near_wrap);
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_FIRST, .psn = 0xfffffe, .no_ack_req = true,
			    .ext.reth = { target(0), keys[K_TARGET], 600 }, .payload = data,
			    .len = 256 });
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_MIDDLE, .psn = 0xffffff, .no_ack_req = true,
			    .payload = data + 256, .len = 256 });
	peer_write(WIRE_OP_RC_WRITE_LAST, 0, 0, 0, 0, 512, 88);
	expect_ack(0, WIRE_SYN_ACK, 1);
	peer_write(WIRE_OP_RC_WRITE_MIDDLE, 0xffffff, 0, 0, 0, 256, 256);
	expect_ack(0, WIRE_SYN_ACK, 1);
	peer_read(1, target(0), keys[K_TARGET], 16);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, 1, 2, data, 16);
	peer_write(WIRE_OP_RC_WRITE_ONLY, 3, target(0), keys[K_TARGET], 8, 0, 8);
	expect_ack(2, WIRE_SYN_NAK_PSN_SEQ, 2);
	expect_bytes(TARGET_OFF, data, 600);
}
END_TEST

/* ---- refusals that end the QP: NAK 0x61 and 0x62, one cause each ---- */

static void no_remote_write(struct conn *c)
{
	c->access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
}

static void no_remote_read(struct conn *c)
{
	c->access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
}

static void no_remote_atomic(struct conn *c)
{
	c->access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}

static void no_responder_resources(struct conn *c)
{
	c->max_dest_rd_atomic = 0;
}

static void write_first_256(uint32_t dma_len)
{
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_WRITE_FIRST, .psn = rq(0), .no_ack_req = true,
			    .ext.reth = { target(0), keys[K_TARGET], dma_len }, .payload = data,
			    .len = 256 });
	expect_bytes(TARGET_OFF, data, 256);
}

static void write_to(uint64_t va, uint32_t rkey, uint32_t n)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), va, rkey, n, 0, n);
}

static void send_middle_alone(void)
{
	peer_send(WIRE_OP_RC_SEND_MIDDLE, rq(0), 0, 256);
}

static void write_last_alone(void)
{
	peer_write(WIRE_OP_RC_WRITE_LAST, rq(0), 0, 0, 0, 0, 16);
}

static void write_only_inside_a_write(void)
{
	write_first_256(600);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(1), target(0), keys[K_TARGET], 16, 0, 16);
}

static void send_middle_inside_a_write(void)
{
	write_first_256(600);
	peer_send(WIRE_OP_RC_SEND_MIDDLE, rq(1), 0, 256);
}

static void write_only_over_pmtu(void)
{
	write_to(target(0), keys[K_TARGET], 300);
}

static void write_first_under_pmtu(void)
{
	peer_write(WIRE_OP_RC_WRITE_FIRST, rq(0), target(0), keys[K_TARGET], 600, 0, 200);
}

static void write_middle_under_pmtu(void)
{
	write_first_256(800);
	peer_write(WIRE_OP_RC_WRITE_MIDDLE, rq(1), 0, 0, 0, 256, 100);
}

static void write_last_empty(void)
{
	write_first_256(512);
	peer_write(WIRE_OP_RC_WRITE_LAST, rq(1), 0, 0, 0, 256, 0);
}

static void write_last_short_of_dma_len(void)
{
	write_first_256(600);
	peer_write(WIRE_OP_RC_WRITE_LAST, rq(1), 0, 0, 0, 256, 100);
}

static void write_only_short_of_dma_len(void)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(0), keys[K_TARGET], 100, 0, 50);
}

static void write_first_over_dma_len(void)
{
	peer_write(WIRE_OP_RC_WRITE_FIRST, rq(0), target(0), keys[K_TARGET], 100, 0, 256);
}

/* A FIRST that carries the whole DMA length is taken, as rxe takes it (check_rkey: resid
 * <= mtu and payload == resid) and ROCEV2.md's rule says; no LAST can follow it, and the
 * one that comes is refused. */
static void write_first_holding_all(void)
{
	write_first_256(256);
	peer_write(WIRE_OP_RC_WRITE_LAST, rq(1), 0, 0, 0, 256, 1);
}

static void write_dma_len_over_2g(void)
{
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(0), keys[K_TARGET], 0x80000001u, 0, 16);
}

static void write_to_qp_without_remote_write(void)
{
	reconnect(no_remote_write);
	write_to(target(0), keys[K_TARGET], 16);
}

static void read_from_qp_without_remote_read(void)
{
	reconnect(no_remote_read);
	peer_read(rq(0), target(0), keys[K_TARGET], 16);
}

static void atomic_to_qp_without_remote_atomic(void)
{
	reconnect(no_remote_atomic);
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(0), target(ATOMIC_OFF), keys[K_TARGET], 1, 0);
}

static void read_without_responder_resources(void)
{
	reconnect(no_responder_resources);
	peer_read(rq(0), target(0), keys[K_TARGET], 16);
}

static void atomic_misaligned(void)
{
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(0), target(ATOMIC_OFF + 4), keys[K_TARGET], 1, 0);
}

/* The client's receive producer index lies more than a ring ahead. */
static void send_with_lying_receive_index(void)
{
	__atomic_store_n(&qp->rq_ctl->prod, qp->rq_ctl->cons + qp->rq_entries + 1,
			 __ATOMIC_RELEASE);
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 0, 16);
	ck_assert(stub_logged("receive ring index"));
}

static void write_key_byte_wrong(void)
{
	write_to(target(0), keys[K_TARGET] ^ 0x01, 16);
}

static void write_key_deregistered(void)
{
	write_to(iova(DEAD_OFF), keys[K_DEAD], 16);
}

static void write_mr_without_remote_write(void)
{
	write_to(iova(RONLY_OFF), keys[K_RONLY], 16);
}

static void write_past_the_end(void)
{
	write_to(target(TARGET_LEN - 8), keys[K_TARGET], 16);
}

static void write_below_the_start(void)
{
	write_to(target(0) - 4, keys[K_TARGET], 16);
}

static void write_mr_of_another_pd(void)
{
	write_to(iova(OTHER_OFF), keys[K_OTHER], 16);
}

/* Every packet's memory is checked: the MR went away between FIRST and LAST. */
static void write_last_after_deregistration(void)
{
	write_first_256(300);
	ck_assert_int_eq(mr_dereg(mrs[K_TARGET]), 0);
	mrs[K_TARGET] = NULL;
	peer_write(WIRE_OP_RC_WRITE_LAST, rq(1), 0, 0, 0, 256, 44);
}

static void read_past_the_end(void)
{
	peer_read(rq(0), target(TARGET_LEN - 100), keys[K_TARGET], 101);
}

static void read_mr_without_remote_read(void)
{
	peer_read(rq(0), iova(LOCAL_OFF), keys[K_LOCAL], 16);
}

static void read_mr_of_another_pd(void)
{
	peer_read(rq(0), iova(OTHER_OFF), keys[K_OTHER], 16);
}

static void atomic_mr_without_remote_atomic(void)
{
	peer_atomic(WIRE_OP_RC_COMPARE_SWAP, rq(0), iova(RONLY_OFF), keys[K_RONLY], 1, 0);
}

static void atomic_key_wrong(void)
{
	peer_atomic(WIRE_OP_RC_COMPARE_SWAP, rq(0), target(ATOMIC_OFF), keys[K_TARGET] ^ 0x80, 1,
		    0);
}

/* The completer counted exactly one failure, for reason, and keeps it as the QP's last. */
static void expect_failed(const char *what, enum proto_failure reason)
{
	for (int i = 0; i < PROTO_NFAILURES; i++)
		ck_assert_msg(dev.failed[i] == (i == (int)reason), "%s: failure %d counted %llu, "
			      "expected reason %d", what, i, (unsigned long long)dev.failed[i],
			      (int)reason);
	ck_assert_int_eq(qp->comp.last_failure, reason);
}

/* The responder counted exactly one refusal, for reason, and keeps it as the QP's last. */
static void expect_refused(const char *what, enum proto_refusal reason)
{
	for (int i = 0; i < PROTO_NREFUSALS; i++)
		ck_assert_msg(dev.refused[i] == (i == (int)reason), "%s: refusal %d counted %llu, "
			      "expected reason %d", what, i, (unsigned long long)dev.refused[i],
			      (int)reason);
	ck_assert_int_eq(qp->resp.last_refusal, reason);
}

struct refusal {
	const char *why;
	void (*provoke)(void);
	uint8_t syndrome;
	uint32_t nak_at;             /* the PSN NAKed: rq(nak_at) */
	enum proto_refusal reason;   /* the only refusal counted, and the QP's last */
};

static const struct refusal refusals[] = {
	{ "SEND MIDDLE without FIRST", send_middle_alone,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_opcode_sequence },
	{ "WRITE LAST without FIRST", write_last_alone,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_opcode_sequence },
	{ "WRITE ONLY inside a WRITE", write_only_inside_a_write,
	  WIRE_SYN_NAK_INV_REQ, 1, PROTO_REFUSED_opcode_sequence },
	{ "SEND MIDDLE inside a WRITE", send_middle_inside_a_write,
	  WIRE_SYN_NAK_INV_REQ, 1, PROTO_REFUSED_opcode_sequence },
	{ "WRITE ONLY over the PMTU", write_only_over_pmtu,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_length_only },
	{ "WRITE FIRST under the PMTU", write_first_under_pmtu,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_length_not_pmtu },
	{ "WRITE MIDDLE under the PMTU", write_middle_under_pmtu,
	  WIRE_SYN_NAK_INV_REQ, 1, PROTO_REFUSED_length_not_pmtu },
	{ "WRITE LAST empty", write_last_empty,
	  WIRE_SYN_NAK_INV_REQ, 1, PROTO_REFUSED_length_last },
	{ "WRITE LAST short of the DMA length", write_last_short_of_dma_len,
	  WIRE_SYN_NAK_INV_REQ, 1, PROTO_REFUSED_write_length },
	{ "WRITE ONLY short of the DMA length", write_only_short_of_dma_len,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_write_length },
	{ "WRITE FIRST over the DMA length", write_first_over_dma_len,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_write_length },
	{ "WRITE LAST after a FIRST that held the whole DMA length", write_first_holding_all,
	  WIRE_SYN_NAK_INV_REQ, 1, PROTO_REFUSED_write_length },
	{ "DMA length over 2^31", write_dma_len_over_2g,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_length_dma },
	{ "QP without remote write", write_to_qp_without_remote_write,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_no_remote_write },
	{ "QP without remote read", read_from_qp_without_remote_read,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_no_remote_read },
	{ "QP without remote atomic", atomic_to_qp_without_remote_atomic,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_no_remote_atomic },
	{ "READ without responder resources", read_without_responder_resources,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_no_rd_resources },
	{ "atomic not 8-aligned", atomic_misaligned,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_atomic_unaligned },
	{ "receive index beyond the ring", send_with_lying_receive_index,
	  WIRE_SYN_NAK_INV_REQ, 0, PROTO_REFUSED_receive_ring_index },
	{ "WRITE rkey's key byte wrong", write_key_byte_wrong,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_stale },
	{ "WRITE rkey deregistered", write_key_deregistered,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_unknown },
	{ "WRITE to an MR without remote write", write_mr_without_remote_write,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_no_access },
	{ "WRITE past the MR's end", write_past_the_end,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_bounds },
	{ "WRITE below the MR's start", write_below_the_start,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_bounds },
	{ "WRITE to another PD's MR", write_mr_of_another_pd,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_other_pd },
	{ "WRITE LAST after the MR went", write_last_after_deregistration,
	  WIRE_SYN_NAK_REM_ACCESS, 1, PROTO_REFUSED_rkey_unknown },
	{ "READ past the MR's end", read_past_the_end,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_bounds },
	{ "READ of an MR without remote read", read_mr_without_remote_read,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_no_access },
	{ "READ of another PD's MR", read_mr_of_another_pd,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_other_pd },
	{ "atomic on an MR without remote atomic", atomic_mr_without_remote_atomic,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_no_access },
	{ "atomic rkey wrong", atomic_key_wrong,
	  WIRE_SYN_NAK_REM_ACCESS, 0, PROTO_REFUSED_rkey_stale },
};

/* The NAK carries the refused packet's PSN and the MSN so far; the QP goes to the error
 * state and takes nothing more. */
START_TEST(test_refusal)
{
	const struct refusal *r = &refusals[_i];
	uint64_t counted;

	r->provoke();
	expect_ack(rq(r->nak_at), r->syndrome, 0);
	ck_assert_msg(qp->state == IBV_QPS_ERR, "%s: QP state %d", r->why, qp->state);
	counted = r->syndrome == WIRE_SYN_NAK_INV_REQ ? dev.cnt.nak_inv_req_sent
						      : dev.cnt.nak_rem_access_sent;
	ck_assert_msg(counted == 1, "%s: counted %llu", r->why, (unsigned long long)counted);
	expect_refused(r->why, r->reason);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(r->nak_at + 1), target(0), keys[K_TARGET], 8, 0, 8);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.drop_qp_state, 1);
}
END_TEST

/* A message that holds a receive and is refused completes it with the error first; the
 * receives behind it are flushed. */
START_TEST(test_invalid_request_fails_the_held_receive)
{
	post_recv(qp, recv_wqe(61, 0, 512));
	post_recv(qp, recv_wqe(62, 512, 512));
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_FIRST, .psn = rq(0), .no_ack_req = true,
			    .payload = data, .len = 256 });
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(1), 0, 16);
	expect_ack(rq(1), WIRE_SYN_NAK_INV_REQ, 0);
	ck_assert_uint_eq(expect_cqe(61, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV).byte_len, 256);
	expect_cqe(62, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	expect_bytes(RECV_OFF, data, 256);
}
END_TEST

/* Receives need no doorbell until the QP is in ERROR: the flag says so to the client, and
 * in ERROR a receive posted and rung completes at once, flushed; RESET takes the flag
 * back up. */
START_TEST(test_receive_rings_only_in_error)
{
	ck_assert(qp->rq_ctl->cons_flags & PROTO_RING_LAZY);
	ck_assert(!(qp->sq_ctl->cons_flags & PROTO_RING_LAZY));
	post_recv(qp, recv_wqe(63, 0, 64));
	qp_to_error(qp);
	pump();
	expect_cqe(63, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	ck_assert(!(qp->rq_ctl->cons_flags & PROTO_RING_LAZY));
	post_recv(qp, recv_wqe(64, 0, 64));
	post_recv(qp, recv_wqe(65, 64, 64));
	poll_doorbell(qp);
	pump();
	expect_cqe(64, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	expect_cqe(65, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	expect_no_cqe();
	qp_reset(qp);
	ck_assert(qp->rq_ctl->cons_flags & PROTO_RING_LAZY);
}
END_TEST

/* A WRITE WITH IMMEDIATE takes its receive before the rkey is checked. */
START_TEST(test_access_error_fails_write_imm_receive)
{
	post_recv(qp, recv_wqe(63, 0, 64));
	peer_write(WIRE_OP_RC_WRITE_ONLY_IMM, rq(0), target(0), keys[K_TARGET] ^ 1, 16, 0, 16);
	expect_ack(rq(0), WIRE_SYN_NAK_REM_ACCESS, 0);
	expect_cqe(63, IBV_WC_REM_ACCESS_ERR, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

/* A READ's responses look the MR up again as they go: it went away after the first turn
 * sent 16 of 17, and the 17th becomes NAK 0x62 for the READ's PSN. */
START_TEST(test_read_mr_gone_midway_naks_access)
{
	const uint32_t len = 16 * 256 + 10;

	arrive(&(struct pkt){ .opcode = WIRE_OP_RC_READ_REQUEST, .psn = rq(0),
			      .ext.reth = { target(0), keys[K_TARGET], len } });
	expect_nothing_sent();
	sched_turn(qp);
	for (uint32_t k = 0; k < 16; k++)
		expect_read_response(k ? WIRE_OP_RC_READ_RESP_MIDDLE : WIRE_OP_RC_READ_RESP_FIRST,
				     rq(k), 1, buf + TARGET_OFF + k * 256, 256);
	expect_nothing_sent();
	ck_assert_int_eq(mr_dereg(mrs[K_TARGET]), 0);
	mrs[K_TARGET] = NULL;
	pump();
	expect_ack(rq(0), WIRE_SYN_NAK_REM_ACCESS, 1);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	ck_assert_uint_eq(dev.cnt.nak_rem_access_sent, 1);
}
END_TEST

/* Receive WQEs a SEND cannot use: the SEND gets NAK 0x63 (the sender's
 * IBV_WC_REM_OP_ERR), the receive IBV_WC_LOC_QP_OP_ERR, as rxe's "malformed WQE". */
static struct proto_rwqe bad_receive(int i)
{
	struct proto_rwqe w = recv_wqe(71, 0, 256);

	switch (i) {
	case 0:                                   /* more SGEs than a WQE has */
		w.num_sge = PROTO_MAX_SGE + 1;
		break;
	case 1:                                   /* shorter than the 64-byte SEND */
		w.sge[0].length = 32;
		break;
	case 2:                                   /* lkey's key byte wrong */
		w.sge[0].lkey ^= 1;
		break;
	case 3:                                   /* an MR without local write */
		w.sge[0] = (struct proto_sge){ iova(RONLY_OFF), 256, keys[K_RONLY] };
		break;
	default:                                  /* past its MR's end */
		w.sge[0].addr = iova(RECV_OFF + RECV_LEN - 16);
	}
	return w;
}

START_TEST(test_bad_receive_wqe_naks_remote_op)
{
	struct proto_rwqe bad = bad_receive(_i);

	post_recv(qp, bad);
	post_recv(qp, recv_wqe(72, 512, 256));
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 0, 64);
	expect_ack(rq(0), WIRE_SYN_NAK_REM_OP, 0);
	ck_assert_uint_eq(expect_cqe(71, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV).byte_len, 0);
	expect_cqe(72, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	ck_assert_uint_eq(dev.cnt.nak_rem_op_sent, 1);
}
END_TEST

/* A QP on the SRQ takes its receives from there. */
START_TEST(test_send_through_srq)
{
	attach_srq(qp);
	post_srq(recv_wqe(81, 0, 128));
	peer_send(WIRE_OP_RC_SEND_ONLY, rq(0), 0, 100);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	ck_assert_uint_eq(expect_cqe(81, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 100);
	ck_assert_uint_eq(srq->ctl->cons, 1);
	expect_bytes(RECV_OFF, data, 100);
}
END_TEST

/* ======== requester and completer: the RC QP's own work requests ======== */

START_TEST(test_write_is_segmented_and_acked)
{
	const uint8_t *src = buf + LOCAL_OFF;
	const struct stub_frame *f;
	struct proto_cqe c;

	post_and_ring(swqe(1, IBV_WR_RDMA_WRITE, 0, 600));
	f = expect_packet(WIRE_OP_RC_WRITE_FIRST, sq(0));
	ck_assert_uint_eq(f->pkt.ext.reth.va, REMOTE_VA);
	ck_assert_uint_eq(f->pkt.ext.reth.rkey, REMOTE_RKEY);
	ck_assert_uint_eq(f->pkt.ext.reth.length, 600);
	ck_assert(!f->pkt.bth.ack_req);
	expect_payload(f, src, 256);
	f = expect_packet(WIRE_OP_RC_WRITE_MIDDLE, sq(1));
	expect_payload(f, src + 256, 256);
	f = expect_packet(WIRE_OP_RC_WRITE_LAST, sq(2));
	ck_assert(f->pkt.bth.ack_req);
	expect_payload(f, src + 512, 88);
	expect_no_cqe();
	/* timeout 14: 4.096 us * 2^14 */
	ck_assert_double_eq_tol(remaining(&qp->retry_timer), 4.096e-6 * (1 << 14), 1e-6);
	peer_ack(sq(2), WIRE_SYN_ACK);
	c = expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ck_assert_uint_eq(c.byte_len, 600);
	ck_assert_uint_eq(c.qp_num, qp->qpn);
	ck_assert_uint_eq(qp->sq_ctl->cons, 1);
	ck_assert(!ev_is_active(&qp->retry_timer));
	ck_assert_uint_eq(dev.cnt.rdma_sends, 1);
}
END_TEST

/* One ACK completes every request up to its PSN; an unsignaled one completes without a
 * CQE but frees its slot; an ACK for a PSN never sent is dropped. */
START_TEST(test_ack_completes_what_it_covers)
{
	struct proto_swqe quiet = swqe(2, IBV_WR_RDMA_WRITE, 100, 10);

	quiet.flags = 0;
	post_send(qp, swqe(1, IBV_WR_RDMA_WRITE, 0, 10));
	post_send(qp, quiet);
	post_send(qp, swqe(3, IBV_WR_SEND, 200, 10));
	doorbell(qp);
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(0));
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(1));
	expect_packet(WIRE_OP_RC_SEND_ONLY, sq(2));
	peer_ack(sq(5), WIRE_SYN_ACK);
	expect_no_cqe();
	ck_assert_uint_eq(dev.cnt.drop_stale_ack, 1);
	peer_ack(sq(2), WIRE_SYN_ACK);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ck_assert_uint_eq(expect_cqe(3, IBV_WC_SUCCESS, IBV_WC_SEND).byte_len, 10);
	ck_assert_uint_eq(qp->sq_ctl->cons, 3);
}
END_TEST

/* SEND WITH IMMEDIATE carries the immediate (network order in the WQE, as verbs), SEND
 * WITH INVALIDATE the rkey, an inline SEND its bytes from the ring. */
START_TEST(test_send_variants)
{
	struct proto_swqe imm = swqe(1, IBV_WR_SEND_WITH_IMM, 0, 100), inv, inl;
	const struct stub_frame *f;

	imm.imm = htonl(0xabcdef01);
	inv = swqe(2, IBV_WR_SEND_WITH_INV, 0, 8);
	inv.imm = 0x5678;
	inl = (struct proto_swqe){ .wr_id = 3, .opcode = IBV_WR_SEND,
				   .flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .inline_len = 20 };
	memcpy(inl.inline_data, data, 20);
	post_send(qp, imm);
	post_send(qp, inv);
	post_send(qp, inl);
	doorbell(qp);
	f = expect_packet(WIRE_OP_RC_SEND_ONLY_IMM, sq(0));
	ck_assert_uint_eq(f->pkt.ext.imm, 0xabcdef01);
	expect_payload(f, buf + LOCAL_OFF, 100);
	f = expect_packet(WIRE_OP_RC_SEND_ONLY_INV, sq(1));
	ck_assert_uint_eq(f->pkt.ext.ieth, 0x5678);
	expect_payload(expect_packet(WIRE_OP_RC_SEND_ONLY, sq(2)), data, 20);
	peer_ack(sq(2), WIRE_SYN_ACK);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_SEND);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_SEND);
	ck_assert_uint_eq(expect_cqe(3, IBV_WC_SUCCESS, IBV_WC_SEND).byte_len, 20);
}
END_TEST

/* One READ request covers the PSNs of its three responses, whose data lands in the
 * local MR; the next request starts after them. */
START_TEST(test_read_request_and_responses)
{
	const struct stub_frame *f;

	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 1000, 600));
	f = expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	ck_assert_uint_eq(f->pkt.ext.reth.va, REMOTE_VA);
	ck_assert_uint_eq(f->pkt.ext.reth.length, 600);
	ck_assert(f->pkt.bth.ack_req);
	peer_read_response(WIRE_OP_RC_READ_RESP_FIRST, sq(0), 0, 256);
	peer_read_response(WIRE_OP_RC_READ_RESP_MIDDLE, sq(1), 256, 256);
	expect_no_cqe();
	peer_read_response(WIRE_OP_RC_READ_RESP_LAST, sq(2), 512, 88);
	ck_assert_uint_eq(expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ).byte_len, 600);
	expect_bytes(LOCAL_OFF + 1000, data, 600);
	post_and_ring(swqe(2, IBV_WR_RDMA_WRITE, 0, 8));
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(3));
	peer_ack(sq(3), WIRE_SYN_ACK);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}
END_TEST

/* The operands go big-endian on the wire (wire_parse gives them back in host order); the
 * original value comes back into the local SGE as a host u64. */
START_TEST(test_atomic_requests_and_acks)
{
	struct proto_swqe cas = swqe(1, IBV_WR_ATOMIC_CMP_AND_SWP, 64, 8);
	struct proto_swqe add = swqe(2, IBV_WR_ATOMIC_FETCH_AND_ADD, 72, 8);
	const uint64_t orig1 = 0x1122334455667788ull, orig2 = 42;
	const struct stub_frame *f;

	cas.compare_add = 0x10;
	cas.swap = 0x20;
	add.compare_add = 0x30;
	post_send(qp, cas);
	post_send(qp, add);
	doorbell(qp);
	f = expect_packet(WIRE_OP_RC_COMPARE_SWAP, sq(0));
	ck_assert_uint_eq(f->pkt.ext.atomic.va, REMOTE_VA);
	ck_assert_uint_eq(f->pkt.ext.atomic.rkey, REMOTE_RKEY);
	ck_assert_uint_eq(f->pkt.ext.atomic.swap_add, 0x20);
	ck_assert_uint_eq(f->pkt.ext.atomic.compare, 0x10);
	f = expect_packet(WIRE_OP_RC_FETCH_ADD, sq(1));
	ck_assert_uint_eq(f->pkt.ext.atomic.swap_add, 0x30);
	ck_assert_uint_eq(f->pkt.ext.atomic.compare, 0);
	peer_atomic_ack(sq(0), orig1);
	ck_assert_uint_eq(expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP).byte_len, 8);
	peer_atomic_ack(sq(1), orig2);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	expect_bytes(LOCAL_OFF + 64, &orig1, 8);
	expect_bytes(LOCAL_OFF + 72, &orig2, 8);
}
END_TEST

static const struct {
	uint8_t syndrome;
	enum ibv_wc_status status;
	enum proto_failure reason;
} nak_statuses[] = {
	{ WIRE_SYN_NAK_INV_REQ, IBV_WC_REM_INV_REQ_ERR, PROTO_FAILED_nak_invalid_request },
	{ WIRE_SYN_NAK_REM_ACCESS, IBV_WC_REM_ACCESS_ERR, PROTO_FAILED_nak_remote_access },
	{ WIRE_SYN_NAK_REM_OP, IBV_WC_REM_OP_ERR, PROTO_FAILED_nak_remote_operational },
	/* a NAK code IBA reserves */
	{ 0x60 | 0x04, IBV_WC_REM_OP_ERR, PROTO_FAILED_nak_remote_operational },
};

/* A NAK other than a sequence error fails the request it names, flushes the one behind
 * it, stops the timer and ends the QP. */
START_TEST(test_nak_ends_the_request)
{
	post_send(qp, swqe(1, IBV_WR_RDMA_WRITE, 0, 10));
	post_send(qp, swqe(2, IBV_WR_SEND, 0, 10));
	doorbell(qp);
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(0));
	expect_packet(WIRE_OP_RC_SEND_ONLY, sq(1));
	peer_ack(sq(0), nak_statuses[_i].syndrome);
	expect_cqe(1, nak_statuses[_i].status, IBV_WC_RDMA_WRITE);
	expect_failed("NAK", nak_statuses[_i].reason);
	expect_cqe(2, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	ck_assert(!ev_is_active(&qp->retry_timer));
	expect_nothing_sent();
}
END_TEST

/* Two requests of 10 bytes, wr_id 1 and 2, posted and sent as one packet each. */
static void send_two(enum ibv_wr_opcode opcode, uint8_t wire_opcode)
{
	post_send(qp, swqe(1, opcode, 0, 10));
	post_send(qp, swqe(2, opcode, 0, 10));
	doorbell(qp);
	expect_packet(wire_opcode, sq(0));
	expect_packet(wire_opcode, sq(1));
}

/* A NAK for the second request: the first, before it, completed. */
START_TEST(test_nak_of_the_second_completes_the_first)
{
	send_two(IBV_WR_RDMA_WRITE, WIRE_OP_RC_WRITE_ONLY);
	peer_ack(sq(1), WIRE_SYN_NAK_REM_ACCESS);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_cqe(2, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	expect_failed("NAK of the second", PROTO_FAILED_nak_remote_access);
}
END_TEST

/* Go-back-N: a sequence NAK for the second of three completes the first and resends from
 * the PSN it names, the same packets again; a second NAK while that resend goes on starts
 * no other. */
START_TEST(test_sequence_nak_goes_back_n)
{
	for (uint64_t i = 0; i < 3; i++)
		post_send(qp, swqe(i + 1, IBV_WR_RDMA_WRITE, 100 * i, 10));
	doorbell(qp);
	for (uint32_t k = 0; k < 3; k++)
		expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(k));
	peer_ack(sq(1), WIRE_SYN_NAK_PSN_SEQ);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_payload(expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(1)), buf + LOCAL_OFF + 100, 10);
	expect_payload(expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(2)), buf + LOCAL_OFF + 200, 10);
	peer_ack(sq(1), WIRE_SYN_NAK_PSN_SEQ);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.rcvd_seq_err, 2);
	ck_assert_uint_eq(dev.cnt.rcvd_seq_err_in_resend, 1);
	ck_assert_uint_eq(dev.cnt.completer_retry_err, 1);
	peer_ack(sq(2), WIRE_SYN_ACK);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_cqe(3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}
END_TEST

/* A WRITE of 128 packets (four SGEs over the local MR, 32,704 bytes at the 256-byte MTU). */
#define BIG_PKTS 128
static struct proto_swqe big_write(uint64_t wr_id)
{
	struct proto_swqe w = swqe(wr_id, IBV_WR_RDMA_WRITE, 0, LOCAL_LEN);

	w.num_sge = 4;
	for (int i = 1; i < 4; i++)
		w.sge[i] = w.sge[0];
	return w;
}

/* The frames sent so far, forgotten unread (the stub keeps only STUB_MAX_FRAMES). */
static void forget_sent(void)
{
	stub_reset();
	frames_read = 0;
}

/* How many frames the daemon sent since the last look, the first and last PSNs among
 * them checked (k-th of the send queue's); then they are forgotten. */
static unsigned sent_since(uint32_t first, uint32_t last)
{
	unsigned n = stub_sent_count();

	ck_assert_uint_eq(stub_sent(0)->pkt.bth.psn, sq(first));
	if (n <= STUB_MAX_FRAMES)
		ck_assert_uint_eq(stub_sent(n - 1)->pkt.bth.psn, sq(last));
	forget_sent();
	return n;
}

/* The requester's window: 512 PSNs out while nothing is lost; a resend round halves it
 * (256 resent from the loss, not everything that was out); the PSNs an ACK covers grow it
 * back, and the rest goes. */
START_TEST(test_window_halves_at_a_loss_and_grows_back)
{
	const uint32_t half = QP_MAX_INFLIGHT / 2, all = 5 * BIG_PKTS;

	for (uint64_t i = 0; i < 5; i++)
		post_send(qp, big_write(i + 1));
	doorbell(qp);
	ck_assert_uint_eq(sent_since(0, QP_MAX_INFLIGHT - 1), QP_MAX_INFLIGHT);
	ck_assert_uint_eq(qp->req.window, QP_MAX_INFLIGHT);

	peer_ack(sq(100), WIRE_SYN_NAK_PSN_SEQ);
	ck_assert_uint_eq(qp->req.window, half);
	ck_assert_uint_eq(sent_since(100, 100 + half - 1), half);
	expect_no_cqe();

	peer_ack(sq(100 + half - 1), WIRE_SYN_ACK);
	ck_assert_uint_eq(qp->req.window, QP_MAX_INFLIGHT);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ck_assert_uint_eq(sent_since(100 + half, all - 1), all - 100 - half);

	peer_ack(sq(all - 1), WIRE_SYN_ACK);
	for (uint64_t i = 3; i <= 5; i++)
		expect_cqe(i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ck_assert_uint_eq(dev.cnt.completer_retry_err, 1);
}
END_TEST

/* Each round halves it again, down to QP_MIN_WINDOW (each ACK here gives one PSN back). */
START_TEST(test_window_floor)
{
	post_send(qp, big_write(1));
	doorbell(qp);
	ck_assert_uint_eq(sent_since(0, BIG_PKTS - 1), BIG_PKTS);
	for (uint32_t round = 0; round < 8; round++) {
		peer_ack(sq(round), WIRE_SYN_NAK_PSN_SEQ);
		peer_ack(sq(round), WIRE_SYN_ACK);   /* the round ends: the next loss is new */
		forget_sent();
	}
	ck_assert_uint_eq(dev.cnt.completer_retry_err, 8);
	ck_assert_uint_eq(qp->req.window, QP_MIN_WINDOW + 1);
	peer_ack(sq(BIG_PKTS - 1), WIRE_SYN_ACK);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	forget_sent();
}
END_TEST

static void no_retries(struct conn *c)
{
	c->retry_cnt = 0;
}

START_TEST(test_sequence_nak_without_retries_left)
{
	reconnect(no_retries);
	send_two(IBV_WR_RDMA_WRITE, WIRE_OP_RC_WRITE_ONLY);
	peer_ack(sq(0), WIRE_SYN_NAK_PSN_SEQ);
	expect_cqe(1, IBV_WC_RETRY_EXC_ERR, IBV_WC_RDMA_WRITE);
	expect_failed("IBV_WC_RETRY_EXC_ERR", PROTO_FAILED_retry_exceeded);
	expect_cqe(2, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.retry_exceeded_err, 1);
}
END_TEST

static void two_retries(struct conn *c)
{
	c->retry_cnt = 2;
}

/* Each expiry resends everything unacknowledged and doubles the timer; the third, with
 * retry_cnt 2 spent, fails the request. */
START_TEST(test_timer_resends_then_gives_up)
{
	reconnect(two_retries);
	post_and_ring(swqe(1, IBV_WR_RDMA_WRITE, 0, 300));
	expect_packet(WIRE_OP_RC_WRITE_FIRST, sq(0));
	expect_packet(WIRE_OP_RC_WRITE_LAST, sq(1));
	for (int round = 0; round < 2; round++) {
		fire_retry_timer();
		/* each expiry in a row doubles the interval */
		ck_assert_double_eq_tol(remaining(&qp->retry_timer),
					4.096e-6 * (1 << 14) * (2 << round), 1e-6);
		expect_payload(expect_packet(WIRE_OP_RC_WRITE_FIRST, sq(0)), buf + LOCAL_OFF, 256);
		expect_payload(expect_packet(WIRE_OP_RC_WRITE_LAST, sq(1)), buf + LOCAL_OFF + 256,
			       44);
		expect_no_cqe();
	}
	fire_retry_timer();
	expect_nothing_sent();
	expect_cqe(1, IBV_WC_RETRY_EXC_ERR, IBV_WC_RDMA_WRITE);
	expect_failed("IBV_WC_RETRY_EXC_ERR", PROTO_FAILED_retry_exceeded);
	ck_assert_uint_eq(dev.cnt.timeouts, 3);
	ck_assert_uint_eq(dev.cnt.retry_exceeded_err, 1);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

/* An RNR NAK holds the requester for the time its code names; then it resends from the
 * PSN named. */
START_TEST(test_rnr_nak_waits_for_its_timer)
{
	post_and_ring(swqe(1, IBV_WR_SEND, 0, 10));
	expect_packet(WIRE_OP_RC_SEND_ONLY, sq(0));
	peer_ack(sq(0), 0x20 | 14);
	expect_nothing_sent();
	ck_assert(!ev_is_active(&qp->retry_timer));
	ck_assert_double_eq_tol(remaining(&qp->rnr_timer), 1.28e-3, 1e-6);   /* IBA's code 14 */
	post_and_ring(swqe(2, IBV_WR_SEND, 0, 10));
	expect_nothing_sent();
	fire_rnr_timer();
	expect_packet(WIRE_OP_RC_SEND_ONLY, sq(0));
	expect_packet(WIRE_OP_RC_SEND_ONLY, sq(1));
	peer_ack(sq(1), WIRE_SYN_ACK);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_SEND);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_SEND);
	ck_assert_uint_eq(dev.cnt.rcvd_rnr_err, 1);
}
END_TEST

static void no_rnr_retries(struct conn *c)
{
	c->rnr_retry = 0;
}

START_TEST(test_rnr_retries_run_out)
{
	reconnect(no_rnr_retries);
	send_two(IBV_WR_SEND, WIRE_OP_RC_SEND_ONLY);
	peer_ack(sq(0), 0x20 | 1);
	expect_cqe(1, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_SEND);
	expect_failed("IBV_WC_RNR_RETRY_EXC_ERR", PROTO_FAILED_rnr_retry_exceeded);
	expect_cqe(2, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
	ck_assert(!ev_is_active(&qp->rnr_timer));
	ck_assert_uint_eq(dev.cnt.retry_rnr_exceeded_err, 1);
}
END_TEST

START_TEST(test_read_response_to_a_write_is_bad)
{
	post_and_ring(swqe(1, IBV_WR_RDMA_WRITE, 0, 10));
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(0));
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 10);
	expect_cqe(1, IBV_WC_BAD_RESP_ERR, IBV_WC_RDMA_WRITE);
	expect_failed("IBV_WC_BAD_RESP_ERR", PROTO_FAILED_response_unexpected);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

START_TEST(test_atomic_ack_to_a_read_is_bad)
{
	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 0, 8));
	expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	peer_atomic_ack(sq(0), 5);
	expect_cqe(1, IBV_WC_BAD_RESP_ERR, IBV_WC_RDMA_READ);
	expect_failed("IBV_WC_BAD_RESP_ERR", PROTO_FAILED_response_unexpected);
}
END_TEST

/* A READ of 600 bytes: its FIRST response must hold a whole PMTU. */
START_TEST(test_read_response_of_wrong_size_is_bad)
{
	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 0, 600));
	expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	peer_read_response(WIRE_OP_RC_READ_RESP_FIRST, sq(0), 0, 100);
	expect_cqe(1, IBV_WC_BAD_RESP_ERR, IBV_WC_RDMA_READ);
	expect_failed("IBV_WC_BAD_RESP_ERR", PROTO_FAILED_response_unexpected);
}
END_TEST

/* The responder refuses the rest of a READ after its first response (its MR went away):
 * the READ completes with the NAK's error. */
START_TEST(test_read_refused_midway)
{
	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 0, 600));
	expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	peer_read_response(WIRE_OP_RC_READ_RESP_FIRST, sq(0), 0, 256);
	peer_ack(sq(0), WIRE_SYN_NAK_REM_ACCESS);
	expect_cqe(1, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ);
	expect_failed("IBV_WC_REM_ACCESS_ERR", PROTO_FAILED_nak_remote_access);
	expect_bytes(LOCAL_OFF, data, 256);
}
END_TEST

/* The local MR a READ's data goes to went away after it was posted. */
START_TEST(test_read_response_into_vanished_mr)
{
	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 0, 16));
	expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	ck_assert_int_eq(mr_dereg(mrs[K_LOCAL]), 0);
	mrs[K_LOCAL] = NULL;
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 16);
	expect_cqe(1, IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_READ);
	expect_failed("IBV_WC_LOC_PROT_ERR", PROTO_FAILED_response_placement);
}
END_TEST

START_TEST(test_atomic_ack_into_vanished_mr)
{
	post_and_ring(swqe(1, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 8));
	expect_packet(WIRE_OP_RC_FETCH_ADD, sq(0));
	ck_assert_int_eq(mr_dereg(mrs[K_LOCAL]), 0);
	mrs[K_LOCAL] = NULL;
	peer_atomic_ack(sq(0), 9);
	expect_cqe(1, IBV_WC_LOC_PROT_ERR, IBV_WC_FETCH_ADD);
	expect_failed("IBV_WC_LOC_PROT_ERR", PROTO_FAILED_response_placement);
}
END_TEST

/* A fenced WRITE waits for the READ before it; its source MR goes away meanwhile, so
 * when its turn comes it cannot be sent. */
START_TEST(test_source_mr_gone_before_sending)
{
	struct proto_swqe w = swqe(2, IBV_WR_RDMA_WRITE, 0, 16);

	w.flags |= IBV_SEND_FENCE;
	w.sge[0] = (struct proto_sge){ iova(SRC2_OFF), 16, keys[K_SRC2] };
	post_send(qp, swqe(1, IBV_WR_RDMA_READ, 0, 16));
	post_send(qp, w);
	doorbell(qp);
	expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	expect_nothing_sent();
	ck_assert_int_eq(mr_dereg(mrs[K_SRC2]), 0);
	mrs[K_SRC2] = NULL;
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 16);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	expect_nothing_sent();
	expect_cqe(2, IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_WRITE);
	expect_failed("source MR gone", PROTO_FAILED_local_lkey);
	expect_bytes(LOCAL_OFF, data, 16);
}
END_TEST

/* Work requests refused as they are copied from the ring: nothing is sent, the request
 * fails with the local error, the one behind it is flushed. */
struct refused_wqe {
	const char *why;
	enum ibv_wc_status status;
	enum proto_failure reason;
};

static const struct refused_wqe refused_wqes[] = {
	{ "lkey's key byte wrong", IBV_WC_LOC_PROT_ERR, PROTO_FAILED_local_lkey },
	{ "READ into an MR without local write", IBV_WC_LOC_PROT_ERR, PROTO_FAILED_local_lkey },
	{ "five SGEs", IBV_WC_LOC_LEN_ERR, PROTO_FAILED_local_length },
	{ "atomic into 4 bytes", IBV_WC_LOC_LEN_ERR, PROTO_FAILED_local_length },
	{ "inline data over the limit", IBV_WC_LOC_LEN_ERR, PROTO_FAILED_local_length },
	{ "unknown opcode", IBV_WC_LOC_QP_OP_ERR, PROTO_FAILED_local_opcode },
	{ "atomic not 8-aligned", IBV_WC_LOC_QP_OP_ERR, PROTO_FAILED_local_opcode },
};

static struct proto_swqe refused_wqe(int i)
{
	struct proto_swqe w = swqe(1, IBV_WR_RDMA_WRITE, 0, 16);

	switch (i) {
	case 0:
		w.sge[0].lkey ^= 1;
		break;
	case 1:
		w = swqe(1, IBV_WR_RDMA_READ, 0, 16);
		w.sge[0] = (struct proto_sge){ iova(SRC2_OFF), 16, keys[K_SRC2] };
		break;
	case 2:
		w.num_sge = PROTO_MAX_SGE + 1;
		break;
	case 3:
		w = swqe(1, IBV_WR_ATOMIC_CMP_AND_SWP, 0, 4);
		break;
	case 4:
		w.flags |= IBV_SEND_INLINE;
		w.inline_len = PROTO_MAX_INLINE + 1;
		break;
	case 5:
		w.opcode = 99;
		break;
	default:
		w = swqe(1, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 8);
		w.remote_addr += 4;
	}
	return w;
}

START_TEST(test_refused_at_fetch)
{
	struct proto_swqe w = refused_wqe(_i);
	struct proto_cqe c;

	post_send(qp, w);
	post_send(qp, swqe(2, IBV_WR_SEND, 0, 16));
	doorbell(qp);
	expect_nothing_sent();
	c = next_cqe();
	ck_assert_uint_eq(c.wr_id, 1);
	ck_assert_msg(c.status == (uint32_t)refused_wqes[_i].status, "%s: %s",
		      refused_wqes[_i].why, status_name(c.status));
	expect_failed(refused_wqes[_i].why, refused_wqes[_i].reason);
	expect_cqe(2, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

/* A refused request completes in order: after the WRITE before it is ACKed. */
START_TEST(test_refused_request_completes_in_order)
{
	struct proto_swqe bad = swqe(2, IBV_WR_RDMA_WRITE, 0, 16);

	bad.sge[0].lkey ^= 1;
	post_send(qp, swqe(1, IBV_WR_RDMA_WRITE, 0, 16));
	post_send(qp, bad);
	doorbell(qp);
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(0));
	expect_nothing_sent();
	expect_no_cqe();
	peer_ack(sq(0), WIRE_SYN_ACK);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_cqe(2, IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_WRITE);
	expect_failed("refused in order", PROTO_FAILED_local_lkey);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

static void no_initiator_depth(struct conn *c)
{
	c->max_rd_atomic = 0;
}

/* A QP given no max_rd_atomic could never issue a READ: refused, not left waiting. */
START_TEST(test_read_without_max_rd_atomic)
{
	reconnect(no_initiator_depth);
	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 0, 16));
	expect_nothing_sent();
	expect_cqe(1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RDMA_READ);
}
END_TEST

/* A send producer index beyond the ring is a client bug: the QP ends, nothing is sent or
 * flushed (the ring's contents cannot be trusted), and the daemon says why. */
START_TEST(test_lying_send_index_ends_the_qp)
{
	__atomic_store_n(&qp->sq_ctl->prod, qp->sq_ctl->cons + qp->sq_entries + 1,
			 __ATOMIC_RELEASE);
	doorbell(qp);
	expect_nothing_sent();
	expect_no_cqe();
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	ck_assert(stub_logged("send ring index"));
}
END_TEST

/* The requester's PSNs wrap from 0xffffff to 0 within a message. */
START_TEST(test_requester_psn_wraps)
{
	reconnect(near_wrap);
	post_and_ring(swqe(1, IBV_WR_RDMA_WRITE, 0, 600));
	expect_packet(WIRE_OP_RC_WRITE_FIRST, 0xffffff);
	expect_packet(WIRE_OP_RC_WRITE_MIDDLE, 0);
	expect_packet(WIRE_OP_RC_WRITE_LAST, 1);
	peer_ack(0, WIRE_SYN_ACK);
	expect_no_cqe();
	peer_ack(1, WIRE_SYN_ACK);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}
END_TEST

/* ======== UD ======== */

/* A datagram lands after the 40 bytes of GRH area: 20 zero bytes and the IPv4 header. */
START_TEST(test_ud_send_only_lands_after_grh)
{
	static const uint8_t zeros[20];
	uint8_t frame[DEV_FRAME_MAX];
	struct proto_cqe c;

	post_recv(udqp, recv_wqe(91, 0, 200));
	post_recv(udqp, recv_wqe(92, 256, 200));
	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY, 0, 100, frame);
	c = expect_cqe(91, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.byte_len, 40 + 100);
	ck_assert_uint_eq(c.src_qp, UD_PEER_QPN);
	ck_assert_uint_eq(c.qp_num, udqp->qpn);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH);
	expect_bytes(RECV_OFF, zeros, 20);
	expect_bytes(RECV_OFF + 20, frame + WIRE_ETH_LEN, WIRE_IPV4_LEN);
	expect_bytes(RECV_OFF + 40, data, 100);
	peer_datagram(WIRE_OP_UD_SEND_ONLY_IMM, UD_QKEY, 100, 60, frame);
	c = expect_cqe(92, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
	ck_assert_uint_eq(c.imm, htonl(IMM_VALUE));
	expect_bytes(RECV_OFF + 256, zeros, 20);
	expect_bytes(RECV_OFF + 256 + 20, frame + WIRE_ETH_LEN, WIRE_IPV4_LEN);
	expect_bytes(RECV_OFF + 256 + 40, data + 100, 60);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.rdma_recvs, 2);
}
END_TEST

START_TEST(test_ud_wrong_qkey_is_dropped)
{
	uint8_t frame[DEV_FRAME_MAX];

	post_recv(udqp, recv_wqe(93, 0, 200));
	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY ^ 1, 0, 100, frame);
	expect_no_cqe();
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.qkey_viol, 1);
	ck_assert_uint_eq(dev.cnt.rcvd_pkts, 0);
}
END_TEST

START_TEST(test_ud_without_receive_is_dropped)
{
	uint8_t frame[DEV_FRAME_MAX];

	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY, 0, 100, frame);
	expect_no_cqe();
	ck_assert_uint_eq(dev.cnt.drop_ud_no_recv, 1);
}
END_TEST

/* A receive too small for 40 + the payload: the datagram is dropped, the receive stays
 * for the next one, which fits. */
START_TEST(test_ud_receive_too_small_stays_posted)
{
	uint8_t frame[DEV_FRAME_MAX];

	post_recv(udqp, recv_wqe(94, 0, 90));
	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY, 0, 100, frame);
	expect_no_cqe();
	ck_assert_uint_eq(dev.cnt.drop_ud_too_long, 1);
	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY, 0, 50, frame);
	ck_assert_uint_eq(expect_cqe(94, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 90);
	expect_bytes(RECV_OFF + 20, frame + WIRE_ETH_LEN, WIRE_IPV4_LEN);
	memset(model + RECV_OFF, 0, 20);
	expect_bytes(RECV_OFF + 40, data, 50);
}
END_TEST

/* From an SRQ the receive was consumed when taken: it completes in error instead. */
START_TEST(test_ud_srq_receive_too_small)
{
	uint8_t frame[DEV_FRAME_MAX];

	attach_srq(udqp);
	post_srq(recv_wqe(95, 0, 90));
	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY, 0, 100, frame);
	expect_cqe(95, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV);
	ck_assert_uint_eq(dev.cnt.drop_ud_too_long, 1);
}
END_TEST

/* A receive whose SGE fails its check is the client's fault: the QP ends. */
START_TEST(test_ud_receive_in_bad_mr_fails_the_qp)
{
	uint8_t frame[DEV_FRAME_MAX];
	struct proto_rwqe bad = recv_wqe(96, 0, 200);

	bad.sge[0] = (struct proto_sge){ iova(OTHER_OFF), 200, keys[K_OTHER] };
	post_recv(udqp, bad);
	post_recv(udqp, recv_wqe(97, 0, 200));
	peer_datagram(WIRE_OP_UD_SEND_ONLY, UD_QKEY, 0, 100, frame);
	expect_cqe(96, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV);
	expect_cqe(97, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	ck_assert_int_eq(udqp->state, IBV_QPS_ERR);
}
END_TEST

static struct proto_swqe ud_swqe(uint64_t wr_id, uint32_t opcode, uint32_t len)
{
	struct proto_swqe w = swqe(wr_id, opcode, 0, len);

	w.ah = AH_HANDLE;
	w.remote_qpn = UD_PEER_QPN;
	w.remote_qkey = UD_QKEY;
	return w;
}

/* A datagram goes to the address handle's peer with a DETH naming our QP, and completes
 * as it leaves. */
START_TEST(test_ud_send)
{
	const struct stub_frame *f;

	post_send(udqp, ud_swqe(1, IBV_WR_SEND, 100));
	doorbell(udqp);
	f = next_sent();
	ck_assert_uint_eq(f->pkt.bth.opcode, WIRE_OP_UD_SEND_ONLY);
	ck_assert_uint_eq(f->pkt.bth.dest_qp, UD_PEER_QPN);
	ck_assert_uint_eq(f->pkt.ext.deth.qkey, UD_QKEY);
	ck_assert_uint_eq(f->pkt.ext.deth.src_qp, udqp->qpn);
	expect_payload(f, buf + LOCAL_OFF, 100);
	ck_assert_uint_eq(expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_SEND).byte_len, 100);
}
END_TEST

START_TEST(test_ud_send_wrong_opcode)
{
	post_send(udqp, ud_swqe(1, IBV_WR_RDMA_WRITE, 100));
	doorbell(udqp);
	expect_nothing_sent();
	expect_cqe(1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND);
	ck_assert_int_eq(udqp->state, IBV_QPS_ERR);
}
END_TEST

/* ======== UD multicast (attach.c) ======== */

#define GROUP_IPV4 0xef010203u   /* 239.1.2.3 */

static void group_gid(uint8_t gid[16], uint32_t ipv4)
{
	uint32_t be = htonl(ipv4);

	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &be, 4);
}

/* A UD QP of the test's in RTS with qkey. */
static struct qp *ud_qp_with(uint32_t qkey)
{
	struct qp *q = new_qp(IBV_QPT_UD);
	char err[PROTO_ERRMSG];

	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE | IBV_QP_QKEY,
				   &(struct proto_qp_attr){ .state = IBV_QPS_INIT, .qkey = qkey },
				   err, sizeof(err)), 0);
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE,
				   &(struct proto_qp_attr){ .state = IBV_QPS_RTR }, err,
				   sizeof(err)), 0);
	return q;
}

static int attach(struct qp *q, uint32_t group)
{
	uint8_t gid[16];
	char err[PROTO_ERRMSG];

	group_gid(gid, group);
	return attach_qp(q, gid, err, sizeof(err));
}

static int detach(struct qp *q, uint32_t group)
{
	uint8_t gid[16];
	char err[PROTO_ERRMSG];

	group_gid(gid, group);
	return attach_detach(q, gid, err, sizeof(err));
}

/* A datagram from the peer to the IPv4 address to (a group, or not), destination QP
 * dest_qp; corrupt flips a payload bit after the ICRC was computed. */
static void datagram_to(uint32_t to, uint32_t dest_qp, uint8_t op, uint32_t qkey, size_t n,
			bool corrupt)
{
	struct wire_path path = peer_path;
	struct wire_bth bth = { .opcode = op, .pkey = 0xffff, .dest_qp = dest_qp, .psn = 7 };
	struct wire_ext ext = { .deth = { qkey, UD_PEER_QPN } };
	uint8_t frame[DEV_FRAME_MAX];
	size_t len;

	path.dst_ip = htonl(to);
	len = wire_build(frame, sizeof(frame), &path, peer_ip_id++, &bth, &ext, data, n);
	ck_assert_uint_gt(len, 0);
	if (corrupt)
		frame[len - 8] ^= 1;
	arrive_raw(frame, len);
	pump();
}

START_TEST(test_mcast_attach_rules)
{
	uint8_t unicast[16];
	char err[PROTO_ERRMSG];

	ck_assert_int_eq(attach(qp, GROUP_IPV4), -EINVAL);           /* an RC QP */
	group_gid(unicast, 0xc6120002u);
	ck_assert_int_eq(attach_qp(udqp, unicast, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(attach(udqp, GROUP_IPV4), 0);
	ck_assert_int_eq(attach(udqp, GROUP_IPV4), 0);                /* again: nothing new */
	ck_assert_uint_eq(dev.tp.mcast_attached, 1);
	ck_assert_uint_eq(dev.port.mcast_groups, 1);
	ck_assert_int_eq(detach(udqp, GROUP_IPV4 + 1), -EINVAL);     /* not attached there */
	ck_assert_int_eq(detach(udqp, GROUP_IPV4), 0);
	ck_assert_int_eq(detach(udqp, GROUP_IPV4), -EINVAL);
	ck_assert_uint_eq(dev.tp.mcast_attached, 0);
	ck_assert_uint_eq(dev.port.mcast_groups, 0);
}
END_TEST

/* Each QP attached gets its own copy, with its own Q_Key check. */
START_TEST(test_mcast_datagram_to_each_attached_qp)
{
	struct qp *other = ud_qp_with(UD_QKEY), *wrong_key = ud_qp_with(UD_QKEY ^ 1);
	struct proto_cqe a, b;

	ck_assert_int_eq(attach(udqp, GROUP_IPV4), 0);
	ck_assert_int_eq(attach(other, GROUP_IPV4), 0);
	ck_assert_int_eq(attach(wrong_key, GROUP_IPV4), 0);
	post_recv(udqp, recv_wqe(101, 0, 200));
	post_recv(other, recv_wqe(102, 256, 200));
	post_recv(wrong_key, recv_wqe(103, 512, 200));
	datagram_to(GROUP_IPV4, PROTO_MCAST_QPN, WIRE_OP_UD_SEND_ONLY, UD_QKEY, 64, false);
	a = next_cqe();
	b = next_cqe();
	expect_no_cqe();
	ck_assert_uint_eq(a.wr_id + b.wr_id, 101 + 102);
	ck_assert_uint_eq(a.status, IBV_WC_SUCCESS);
	ck_assert_uint_eq(b.status, IBV_WC_SUCCESS);
	ck_assert_uint_eq(a.qp_num + b.qp_num, udqp->qpn + other->qpn);
	ck_assert_uint_eq(a.src_qp, UD_PEER_QPN);
	ck_assert_uint_eq(a.byte_len, 40 + 64);
	expect_bytes(RECV_OFF + 40, data, 64);
	expect_bytes(RECV_OFF + 256 + 40, data, 64);
	/* the GRH areas: the peer's IPv4 header to the group */
	memcpy(model + RECV_OFF, buf + RECV_OFF, 40);
	memcpy(model + RECV_OFF + 256, buf + RECV_OFF + 256, 40);
	ck_assert_mem_eq(buf + RECV_OFF + 20 + 16, &(uint32_t){ htonl(GROUP_IPV4) }, 4);
	ck_assert_uint_eq(dev.cnt.mcast_rcvd, 1);
	ck_assert_uint_eq(dev.cnt.mcast_copies, 3);
	ck_assert_uint_eq(dev.cnt.qkey_viol, 1);
	expect_nothing_sent();
	/* destroyed, the QPs leave: the group goes when the last does */
	ck_assert_int_eq(qp_destroy(other), 0);
	ck_assert_int_eq(qp_destroy(wrong_key), 0);
	ck_assert_uint_eq(dev.tp.mcast_attached, 1);
	ck_assert_int_eq(detach(udqp, GROUP_IPV4), 0);
	ck_assert_uint_eq(dev.port.mcast_groups, 0);
}
END_TEST

/* What reaches no QP: a group nobody is attached to, QPN 0xFFFFFF to a unicast address, an
 * RC opcode, a bad ICRC, a QP detached. Nothing is written, each drop counted. */
START_TEST(test_mcast_drops)
{
	post_recv(udqp, recv_wqe(104, 0, 200));
	datagram_to(GROUP_IPV4, PROTO_MCAST_QPN, WIRE_OP_UD_SEND_ONLY, UD_QKEY, 32, false);
	ck_assert_uint_eq(dev.cnt.drop_mcast_no_group, 1);
	ck_assert_int_eq(attach(udqp, GROUP_IPV4), 0);
	datagram_to(ntohl(dev.port.ipv4), PROTO_MCAST_QPN, WIRE_OP_UD_SEND_ONLY, UD_QKEY, 32,
		    false);
	ck_assert_uint_eq(dev.cnt.drop_mcast_no_group, 2);
	datagram_to(GROUP_IPV4, PROTO_MCAST_QPN, WIRE_OP_RC_SEND_ONLY, UD_QKEY, 32, false);
	ck_assert_uint_eq(dev.cnt.drop_transport, 1);
	datagram_to(GROUP_IPV4, PROTO_MCAST_QPN, WIRE_OP_UD_SEND_ONLY, UD_QKEY, 32, true);
	ck_assert_uint_eq(dev.cnt.drop_bad_icrc, 1);
	ck_assert_int_eq(detach(udqp, GROUP_IPV4), 0);
	datagram_to(GROUP_IPV4, PROTO_MCAST_QPN, WIRE_OP_UD_SEND_ONLY, UD_QKEY, 32, false);
	ck_assert_uint_eq(dev.cnt.drop_mcast_no_group, 3);
	ck_assert_uint_eq(dev.cnt.mcast_rcvd, 0);
	expect_no_cqe();
	expect_nothing_sent();
	/* the receive is still there for a unicast datagram */
	datagram_to(ntohl(dev.port.ipv4), udqp->qpn, WIRE_OP_UD_SEND_ONLY, UD_QKEY, 16, false);
	expect_cqe(104, IBV_WC_SUCCESS, IBV_WC_RECV);
	memcpy(model + RECV_OFF, buf + RECV_OFF, 40);
	expect_bytes(RECV_OFF + 40, data, 16);
}
END_TEST

/* rxe's limits: 56 QPs a group, ENOMEM for the 57th. */
START_TEST(test_mcast_group_limit)
{
	struct qp *qps[PROTO_MAX_MCAST_QP_ATTACH];

	ck_assert_int_eq(attach(udqp, GROUP_IPV4), 0);
	for (int i = 0; i < PROTO_MAX_MCAST_QP_ATTACH - 1; i++) {
		qps[i] = ud_qp_with(UD_QKEY);
		ck_assert_int_eq(attach(qps[i], GROUP_IPV4), 0);
	}
	qps[PROTO_MAX_MCAST_QP_ATTACH - 1] = ud_qp_with(UD_QKEY);
	ck_assert_int_eq(attach(qps[PROTO_MAX_MCAST_QP_ATTACH - 1], GROUP_IPV4), -ENOMEM);
	ck_assert_int_eq(attach(qps[PROTO_MAX_MCAST_QP_ATTACH - 1], GROUP_IPV4 + 1), 0);
	ck_assert_uint_eq(dev.port.mcast_groups, 2);
	for (int i = 0; i < PROTO_MAX_MCAST_QP_ATTACH; i++)
		ck_assert_int_eq(qp_destroy(qps[i]), 0);
	ck_assert_uint_eq(dev.port.mcast_groups, 1);
	ck_assert_uint_eq(dev.tp.mcast_attached, 1);
}
END_TEST

/* ======== UC: no ACK, no NAK, no resend ======== */

#define UC_RQ_PSN   0x500
#define UC_SQ_PSN   0x600
#define UC(op)      ((uint8_t)(WIRE_OP_UC_BASE + (op)))
#define UC_TO_RTR_MASK (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)

static struct qp *ucqp;

/* RESET, INIT, RTR, RTS with the attributes UC takes (the kernel's table for UC). */
static void connect_uc(uint32_t access)
{
	struct proto_qp_attr rtr = { .state = IBV_QPS_RTR, .path_mtu = IBV_MTU_256,
				     .dest_qpn = PEER_QPN, .rq_psn = UC_RQ_PSN };

	memcpy(rtr.dest_gid, peer_gid, 16);
	modify(ucqp, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS,
	       (struct proto_qp_attr){ .state = IBV_QPS_INIT, .access = access });
	modify(ucqp, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	       rtr);
	modify(ucqp, IBV_QP_STATE | IBV_QP_SQ_PSN,
	       (struct proto_qp_attr){ .state = IBV_QPS_RTS, .sq_psn = UC_SQ_PSN });
}

static void uc_setup(void)
{
	setup();
	ucqp = new_qp(IBV_QPT_UC);
	connect_uc(IBV_ACCESS_REMOTE_WRITE);
}

static void uc_teardown(void)
{
	ck_assert_int_eq(qp_destroy(ucqp), 0);
	teardown();
}

static uint32_t urq(uint32_t k)
{
	return PSN(UC_RQ_PSN + k);
}

/* A packet of the peer's UC QP. AckReq is set on a message's last packet, as rxe 6.1 sets
 * it: the responder must not answer it. */
static void uc_peer(uint8_t op, uint32_t psn, struct wire_reth reth, size_t data_off, size_t n)
{
	const struct wire_opcode_info *info = wire_opcode_info(op);
	bool last = info->pos == WIRE_POS_LAST || info->pos == WIRE_POS_ONLY;

	peer(&(struct pkt){ .opcode = op, .psn = psn, .no_ack_req = !last, .ext.reth = reth,
			    .ext.imm = IMM_VALUE, .payload = data + data_off, .len = n,
			    .dest_qp = ucqp->qpn });
}

static void uc_send(uint8_t op, uint32_t psn, size_t data_off, size_t n)
{
	uc_peer(op, psn, (struct wire_reth){ 0 }, data_off, n);
}

/* UC counted exactly these refusals (reason: count), and nothing else. */
static void expect_uc_refused(enum proto_refusal a, uint64_t na, enum proto_refusal b,
			      uint64_t nb)
{
	for (int i = 1; i < PROTO_NREFUSALS; i++) {
		uint64_t want = (i == (int)a ? na : 0) + (i == (int)b ? nb : 0);

		ck_assert_msg(dev.refused[i] == want, "refusal %d counted %llu, expected %llu", i,
			      (unsigned long long)dev.refused[i], (unsigned long long)want);
	}
}

/* A SEND in three packets fills one receive, a WRITE WITH IMMEDIATE in three lands at its
 * RETH and takes the next; no ACK goes back, though the last packets ask for one. */
START_TEST(test_uc_message_split_across_packets)
{
	struct proto_cqe c;

	post_recv(ucqp, recv_wqe(31, 0, 700));
	post_recv(ucqp, recv_wqe(32, 700, 16));
	uc_send(UC(WIRE_OP_RC_SEND_FIRST), urq(0), 0, 256);
	uc_send(UC(WIRE_OP_RC_SEND_MIDDLE), urq(1), 256, 256);
	expect_no_cqe();
	uc_send(UC(WIRE_OP_RC_SEND_LAST), urq(2), 512, 88);
	c = expect_cqe(31, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.byte_len, 600);
	ck_assert_uint_eq(c.qp_num, ucqp->qpn);
	ck_assert_uint_eq(c.src_qp, PEER_QPN);
	expect_bytes(RECV_OFF, data, 600);
	uc_peer(UC(WIRE_OP_RC_WRITE_FIRST), urq(3),
		(struct wire_reth){ target(40), keys[K_TARGET], 520 }, 1000, 256);
	uc_peer(UC(WIRE_OP_RC_WRITE_MIDDLE), urq(4), (struct wire_reth){ 0 }, 1256, 256);
	expect_no_cqe();
	uc_peer(UC(WIRE_OP_RC_WRITE_LAST_IMM), urq(5), (struct wire_reth){ 0 }, 1512, 8);
	c = expect_cqe(32, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert_uint_eq(c.byte_len, 520);
	ck_assert_uint_eq(c.imm, htonl(IMM_VALUE));
	expect_bytes(TARGET_OFF + 40, data + 1000, 520);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.acks_sent, 0);
	ck_assert_uint_eq(dev.cnt.rdma_recvs, 2);
	expect_uc_refused(0, 0, 0, 0);
}
END_TEST

/* A lost MIDDLE: the LAST after the gap is dropped, the receive is not completed, and the
 * next message starts it again from its first byte. A lost LAST: the next FIRST ends the
 * message it finds unfinished and takes its receive. A WRITE that lost a packet keeps
 * what it placed before the gap (UC promises nothing more) and completes nothing. */
START_TEST(test_uc_psn_gap_drops_the_message)
{
	post_recv(ucqp, recv_wqe(41, 0, 600));
	uc_send(UC(WIRE_OP_RC_SEND_FIRST), urq(0), 0, 256);
	/* urq(1), a MIDDLE, is lost */
	uc_send(UC(WIRE_OP_RC_SEND_LAST), urq(2), 512, 88);
	expect_no_cqe();
	expect_uc_refused(PROTO_REFUSED_uc_message_dropped, 1, 0, 0);
	ck_assert_uint_eq(dev.cnt.out_of_seq_request, 1);
	ck_assert_uint_eq(ucqp->rq_ctl->cons, 0);
	ck_assert_uint_eq(dev.cnt.rdma_recvs, 0);
	/* the same receive takes the next message, from its first byte */
	uc_send(UC(WIRE_OP_RC_SEND_ONLY), urq(3), 1000, 100);
	ck_assert_uint_eq(expect_cqe(41, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 100);
	expect_bytes(RECV_OFF, data, 256);
	expect_bytes(RECV_OFF, data + 1000, 100);

	post_recv(ucqp, recv_wqe(42, 0, 600));
	uc_send(UC(WIRE_OP_RC_SEND_FIRST), urq(4), 0, 256);
	uc_send(UC(WIRE_OP_RC_SEND_MIDDLE), urq(5), 256, 256);
	/* urq(6), the LAST, is lost; the next message comes whole */
	uc_send(UC(WIRE_OP_RC_SEND_FIRST), urq(7), 1100, 256);
	uc_send(UC(WIRE_OP_RC_SEND_LAST_IMM), urq(8), 1356, 44);
	ck_assert_uint_eq(expect_cqe(42, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 300);
	expect_bytes(RECV_OFF, data, 512);
	expect_bytes(RECV_OFF, data + 1100, 300);

	uc_peer(UC(WIRE_OP_RC_WRITE_FIRST), urq(9),
		(struct wire_reth){ target(0), keys[K_TARGET], 600 }, 0, 256);
	/* urq(10) is lost: the MIDDLE after it and the LAST are dropped */
	uc_peer(UC(WIRE_OP_RC_WRITE_LAST), urq(11), (struct wire_reth){ 0 }, 512, 88);
	uc_peer(UC(WIRE_OP_RC_WRITE_ONLY), urq(12),
		(struct wire_reth){ target(1000), keys[K_TARGET], 10 }, 700, 10);
	expect_bytes(TARGET_OFF, data, 256);
	expect_bytes(TARGET_OFF + 1000, data + 700, 10);
	expect_uc_refused(PROTO_REFUSED_uc_message_dropped, 2, 0, 0);
	/* every packet that came ahead of the expected PSN: the two dropped and the three
	 * FIRST or ONLY that started a message after a gap */
	ck_assert_uint_eq(dev.cnt.out_of_seq_request, 5);
	ck_assert_uint_eq(dev.cnt.rdma_recvs, 3);
	expect_nothing_sent();
	ck_assert_int_eq(ucqp->state, IBV_QPS_RTS);
}
END_TEST

/* A WRITE to a bad rkey is dropped without a NAK, with the rest of its message; the QP
 * stays in RTS (rxe's class D for UC). A WRITE WITH IMMEDIATE so refused leaves its
 * receive posted for the next message. */
START_TEST(test_uc_bad_rkey_drops_silently)
{
	uc_peer(UC(WIRE_OP_RC_WRITE_ONLY), urq(0),
		(struct wire_reth){ iova(OTHER_OFF), keys[K_OTHER], 64 }, 0, 64);
	expect_uc_refused(PROTO_REFUSED_rkey_other_pd, 1, 0, 0);
	uc_peer(UC(WIRE_OP_RC_WRITE_FIRST), urq(1),
		(struct wire_reth){ target(TARGET_LEN - 300), keys[K_TARGET], 600 }, 0, 256);
	expect_uc_refused(PROTO_REFUSED_rkey_other_pd, 1, PROTO_REFUSED_rkey_bounds, 1);
	uc_peer(UC(WIRE_OP_RC_WRITE_MIDDLE), urq(2), (struct wire_reth){ 0 }, 256, 256);
	uc_peer(UC(WIRE_OP_RC_WRITE_LAST), urq(3), (struct wire_reth){ 0 }, 512, 88);
	ck_assert_uint_eq(dev.refused[PROTO_REFUSED_uc_message_dropped], 2);
	ck_assert_int_eq(ucqp->resp.last_refusal, PROTO_REFUSED_uc_message_dropped);

	post_recv(ucqp, recv_wqe(51, 0, 64));
	uc_peer(UC(WIRE_OP_RC_WRITE_ONLY_IMM), urq(4),
		(struct wire_reth){ target(0), keys[K_TARGET] ^ 0x80, 8 }, 0, 8);
	expect_no_cqe();
	ck_assert_uint_eq(dev.refused[PROTO_REFUSED_rkey_stale], 1);
	uc_send(UC(WIRE_OP_RC_SEND_ONLY_IMM), urq(5), 64, 32);
	ck_assert_uint_eq(expect_cqe(51, IBV_WC_SUCCESS, IBV_WC_RECV).byte_len, 32);
	expect_bytes(RECV_OFF, data + 64, 32);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.nak_rem_access_sent, 0);
	ck_assert_int_eq(ucqp->state, IBV_QPS_RTS);
}
END_TEST

/* From an SRQ the receive left the queue when taken: a refused WRITE WITH IMMEDIATE
 * completes it with the error (rxe's class E for UC), and the QP goes on. */
START_TEST(test_uc_srq_receive_completes_in_error)
{
	attach_srq(ucqp);
	post_srq(recv_wqe(52, 0, 64));
	post_srq(recv_wqe(53, 64, 64));
	uc_peer(UC(WIRE_OP_RC_WRITE_ONLY_IMM), urq(0),
		(struct wire_reth){ iova(RONLY_OFF), keys[K_RONLY], 8 }, 0, 8);
	expect_cqe(52, IBV_WC_REM_ACCESS_ERR, IBV_WC_RECV_RDMA_WITH_IMM);
	expect_uc_refused(PROTO_REFUSED_rkey_no_access, 1, 0, 0);
	uc_send(UC(WIRE_OP_RC_SEND_ONLY), urq(1), 0, 300);   /* longer than the path MTU */
	expect_cqe(53, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV);
	expect_uc_refused(PROTO_REFUSED_rkey_no_access, 1, PROTO_REFUSED_length_only, 1);
	expect_nothing_sent();
	ck_assert_int_eq(ucqp->state, IBV_QPS_RTS);
}
END_TEST

/* No receive posted: the SEND is dropped (no RNR NAK), and the next one finds one. A
 * receive whose SGE fails its check ends the QP, without a NAK. */
START_TEST(test_uc_receive_refusals)
{
	struct proto_rwqe bad = recv_wqe(62, 0, 200);

	uc_send(UC(WIRE_OP_RC_SEND_FIRST), urq(0), 0, 256);
	uc_send(UC(WIRE_OP_RC_SEND_LAST), urq(1), 256, 10);
	expect_uc_refused(PROTO_REFUSED_no_receive, 1, PROTO_REFUSED_uc_message_dropped, 1);
	ck_assert_uint_eq(dev.cnt.send_rnr_err, 0);
	post_recv(ucqp, recv_wqe(61, 0, 100));
	uc_send(UC(WIRE_OP_RC_SEND_ONLY), urq(2), 0, 100);
	expect_cqe(61, IBV_WC_SUCCESS, IBV_WC_RECV);
	expect_bytes(RECV_OFF, data, 100);
	bad.sge[0] = (struct proto_sge){ iova(OTHER_OFF), 200, keys[K_OTHER] };
	post_recv(ucqp, bad);
	post_recv(ucqp, recv_wqe(63, 0, 200));
	uc_send(UC(WIRE_OP_RC_SEND_ONLY), urq(3), 0, 100);
	expect_cqe(62, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV);
	expect_cqe(63, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	ck_assert_int_eq(ucqp->state, IBV_QPS_ERR);
	expect_nothing_sent();
}
END_TEST

/* The requester: RC's layout at UC's opcodes, AckReq clear on every packet, the RETH on
 * the FIRST, the immediate on the last, and each request complete as its last packet
 * leaves, with no timer to wait for an ACK. */
START_TEST(test_uc_requester_sends_unacknowledged)
{
	const uint8_t *src = buf + LOCAL_OFF;
	const struct stub_frame *f;
	struct proto_swqe imm = swqe(2, IBV_WR_SEND_WITH_IMM, 600, 100);

	imm.imm = htonl(IMM_VALUE);
	post_send(ucqp, swqe(1, IBV_WR_RDMA_WRITE, 0, 600));
	post_send(ucqp, imm);
	doorbell(ucqp);
	f = expect_packet(UC(WIRE_OP_RC_WRITE_FIRST), UC_SQ_PSN);
	ck_assert_uint_eq(f->pkt.ext.reth.va, REMOTE_VA);
	ck_assert_uint_eq(f->pkt.ext.reth.rkey, REMOTE_RKEY);
	ck_assert_uint_eq(f->pkt.ext.reth.length, 600);
	ck_assert(!f->pkt.bth.ack_req);
	expect_payload(f, src, 256);
	f = expect_packet(UC(WIRE_OP_RC_WRITE_MIDDLE), UC_SQ_PSN + 1);
	ck_assert(!f->pkt.bth.ack_req);
	expect_payload(f, src + 256, 256);
	f = expect_packet(UC(WIRE_OP_RC_WRITE_LAST), UC_SQ_PSN + 2);
	ck_assert(!f->pkt.bth.ack_req);
	expect_payload(f, src + 512, 88);
	f = expect_packet(UC(WIRE_OP_RC_SEND_ONLY_IMM), UC_SQ_PSN + 3);
	ck_assert(!f->pkt.bth.ack_req);
	ck_assert_uint_eq(f->pkt.ext.imm, IMM_VALUE);
	expect_payload(f, src + 600, 100);
	ck_assert_uint_eq(expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE).byte_len, 600);
	ck_assert_uint_eq(expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_SEND).byte_len, 100);
	ck_assert_uint_eq(ucqp->sq_ctl->cons, 2);
	ck_assert(!ev_is_active(&ucqp->retry_timer));
	ck_assert_uint_eq(dev.tp.inflight, 0);
	ck_assert_uint_eq(dev.cnt.rdma_sends, 2);
}
END_TEST

/* UC has no READ, atomic or SEND WITH INVALIDATE: refused when fetched, the QP ends. */
START_TEST(test_uc_requester_refuses_read)
{
	static const uint32_t opcodes[] = { IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD,
					    IBV_WR_SEND_WITH_INV };
	uint32_t op = opcodes[_i];
	enum ibv_wc_opcode wc = op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
				: op == IBV_WR_SEND_WITH_INV ? IBV_WC_SEND : IBV_WC_FETCH_ADD;

	post_send(ucqp, swqe(1, op, 0, 8));
	doorbell(ucqp);
	expect_nothing_sent();
	expect_cqe(1, IBV_WC_LOC_QP_OP_ERR, wc);
	ck_assert_int_eq(ucqp->state, IBV_QPS_ERR);
	ck_assert_uint_eq(dev.failed[PROTO_FAILED_local_opcode], 1);
}
END_TEST

/* The attributes of each transition, as the kernel's table has them for UC. */
START_TEST(test_uc_modify_takes_uc_attributes_only)
{
	struct proto_qp_attr rtr = { .state = IBV_QPS_RTR, .path_mtu = IBV_MTU_256,
				     .dest_qpn = PEER_QPN, .max_dest_rd_atomic = 1 };
	char err[PROTO_ERRMSG] = "";
	struct qp *q = new_qp(IBV_QPT_UC);

	memcpy(rtr.dest_gid, peer_gid, 16);
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE, &(struct proto_qp_attr){
					   .state = IBV_QPS_INIT }, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY,
				   &(struct proto_qp_attr){ .state = IBV_QPS_INIT }, err,
				   sizeof(err)), -EINVAL);
	modify(q, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS,
	       (struct proto_qp_attr){ .state = IBV_QPS_INIT });
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE | UC_TO_RTR_MASK | IBV_QP_MAX_DEST_RD_ATOMIC,
				   &rtr, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "UC QP"), "%s", err);
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE | UC_TO_RTR_MASK | IBV_QP_MIN_RNR_TIMER, &rtr,
				   err, sizeof(err)), -EINVAL);
	modify(q, IBV_QP_STATE | UC_TO_RTR_MASK, rtr);
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT,
				   &(struct proto_qp_attr){ .state = IBV_QPS_RTS }, err,
				   sizeof(err)), -EINVAL);
	ck_assert_int_eq(qp_modify(q, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
				   &(struct proto_qp_attr){ .state = IBV_QPS_RTS }, err,
				   sizeof(err)), -EINVAL);
	modify(q, IBV_QP_STATE | IBV_QP_SQ_PSN, (struct proto_qp_attr){ .state = IBV_QPS_RTS });
	ck_assert_int_eq(q->state, IBV_QPS_RTS);
	/* nor does it report a timeout or retries it does not have */
	ck_assert_int_eq(q->attr.max_dest_rd_atomic, 0);
	ck_assert_int_eq(q->attr.timeout, 0);
	ck_assert_int_eq(q->attr.retry_cnt, 0);
	ck_assert_int_eq(qp_destroy(q), 0);
}
END_TEST

/* RC packets to a UC QP are another transport's: dropped before the responder. */
START_TEST(test_uc_takes_no_rc_packets)
{
	post_recv(ucqp, recv_wqe(71, 0, 64));
	uc_send(WIRE_OP_RC_SEND_ONLY, urq(0), 0, 10);
	ck_assert_uint_eq(dev.cnt.drop_transport, 1);
	expect_nothing_sent();
	uc_send(UC(WIRE_OP_RC_SEND_ONLY), urq(0), 0, 10);
	expect_cqe(71, IBV_WC_SUCCESS, IBV_WC_RECV);
	expect_bytes(RECV_OFF, data, 10);
}
END_TEST

/* ======== the suite ======== */

static TCase *add_tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	suite_add_tcase(s, tc);
	return tc;
}

static void add_responder_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "responder");

	tcase_add_test(tc, test_write_only_is_placed_and_acked);
	tcase_add_test(tc, test_write_first_middle_last);
	tcase_add_test(tc, test_zero_length_write_checks_no_key);
	tcase_add_test(tc, test_write_with_imm_consumes_a_receive);
	tcase_add_test(tc, test_send_only_fills_the_receive);
	tcase_add_test(tc, test_solicited_arming_waits_for_a_solicited_completion);
	tcase_add_test(tc, test_full_cq_raises_cq_err_per_lost_completion);
	tcase_add_test(tc, test_ack_goes_before_the_answer);
	tcase_add_test(tc, test_rings_parked_for_the_next_queue);
	tcase_add_test(tc, test_send_multi_packet_over_two_sges);
	tcase_add_test(tc, test_send_with_imm);
	tcase_add_test(tc, test_send_with_invalidate_fails_the_receive);
	tcase_add_test(tc, test_read_only_response);
	tcase_add_test(tc, test_read_multi_packet_responses);
	tcase_add_test(tc, test_zero_length_read);
	tcase_add_test(tc, test_atomic_compare_swap);
	tcase_add_test(tc, test_atomic_fetch_add);
	tcase_add_test(tc, test_duplicate_write_is_acked_not_executed);
	tcase_add_test(tc, test_duplicate_read_is_answered_again);
	tcase_add_test(tc, test_duplicate_atomic_returns_saved_value);
	tcase_add_test(tc, test_psn_sequence_error_naks_once_per_gap);
	tcase_add_test(tc, test_rnr_nak_without_a_receive);
	tcase_add_test(tc, test_responder_psn_wraps);
	tcase_add_test(tc, test_send_through_srq);
}

static void add_refusal_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "refusals");

	tcase_add_loop_test(tc, test_refusal, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
	tcase_add_test(tc, test_invalid_request_fails_the_held_receive);
	tcase_add_test(tc, test_receive_rings_only_in_error);
	tcase_add_test(tc, test_access_error_fails_write_imm_receive);
	tcase_add_test(tc, test_read_mr_gone_midway_naks_access);
	tcase_add_loop_test(tc, test_bad_receive_wqe_naks_remote_op, 0, 5);
}

static void add_requester_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "requester");

	tcase_add_test(tc, test_write_is_segmented_and_acked);
	tcase_add_test(tc, test_ack_completes_what_it_covers);
	tcase_add_test(tc, test_send_variants);
	tcase_add_test(tc, test_read_request_and_responses);
	tcase_add_test(tc, test_atomic_requests_and_acks);
	tcase_add_test(tc, test_sequence_nak_goes_back_n);
	tcase_add_test(tc, test_window_halves_at_a_loss_and_grows_back);
	tcase_add_test(tc, test_window_floor);
	tcase_add_test(tc, test_rnr_nak_waits_for_its_timer);
	tcase_add_test(tc, test_requester_psn_wraps);
}

static void add_completer_error_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "completer errors");

	tcase_add_loop_test(tc, test_nak_ends_the_request, 0,
			    (int)(sizeof(nak_statuses) / sizeof(nak_statuses[0])));
	tcase_add_test(tc, test_nak_of_the_second_completes_the_first);
	tcase_add_test(tc, test_sequence_nak_without_retries_left);
	tcase_add_test(tc, test_timer_resends_then_gives_up);
	tcase_add_test(tc, test_rnr_retries_run_out);
	tcase_add_test(tc, test_read_response_to_a_write_is_bad);
	tcase_add_test(tc, test_atomic_ack_to_a_read_is_bad);
	tcase_add_test(tc, test_read_response_of_wrong_size_is_bad);
	tcase_add_test(tc, test_read_refused_midway);
	tcase_add_test(tc, test_read_response_into_vanished_mr);
	tcase_add_test(tc, test_atomic_ack_into_vanished_mr);
	tcase_add_test(tc, test_source_mr_gone_before_sending);
	tcase_add_loop_test(tc, test_refused_at_fetch, 0,
			    (int)(sizeof(refused_wqes) / sizeof(refused_wqes[0])));
	tcase_add_test(tc, test_refused_request_completes_in_order);
	tcase_add_test(tc, test_read_without_max_rd_atomic);
	tcase_add_test(tc, test_lying_send_index_ends_the_qp);
}

static void add_ud_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "ud");

	tcase_add_test(tc, test_ud_send_only_lands_after_grh);
	tcase_add_test(tc, test_ud_wrong_qkey_is_dropped);
	tcase_add_test(tc, test_ud_without_receive_is_dropped);
	tcase_add_test(tc, test_ud_receive_too_small_stays_posted);
	tcase_add_test(tc, test_ud_srq_receive_too_small);
	tcase_add_test(tc, test_ud_receive_in_bad_mr_fails_the_qp);
	tcase_add_test(tc, test_ud_send);
	tcase_add_test(tc, test_ud_send_wrong_opcode);
	tcase_add_test(tc, test_mcast_attach_rules);
	tcase_add_test(tc, test_mcast_datagram_to_each_attached_qp);
	tcase_add_test(tc, test_mcast_drops);
	tcase_add_test(tc, test_mcast_group_limit);
}

static void add_uc_tests(Suite *s)
{
	TCase *tc = tcase_create("uc");

	tcase_add_checked_fixture(tc, uc_setup, uc_teardown);
	suite_add_tcase(s, tc);
	tcase_add_test(tc, test_uc_message_split_across_packets);
	tcase_add_test(tc, test_uc_psn_gap_drops_the_message);
	tcase_add_test(tc, test_uc_bad_rkey_drops_silently);
	tcase_add_test(tc, test_uc_srq_receive_completes_in_error);
	tcase_add_test(tc, test_uc_receive_refusals);
	tcase_add_test(tc, test_uc_requester_sends_unacknowledged);
	tcase_add_loop_test(tc, test_uc_requester_refuses_read, 0, 3);
	tcase_add_test(tc, test_uc_modify_takes_uc_attributes_only);
	tcase_add_test(tc, test_uc_takes_no_rc_packets);
}

/* ---- memory windows ---- */

#define MW_ACCESS_WR (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define MW_OFF  256                    /* the window: [target(MW_OFF), +MW_LEN) */
#define MW_LEN  512

static struct mr *bindable;            /* the target's bytes again, with MW_BIND */

static void reg_bindable(void)
{
	ck_assert_int_eq(mr_reg(pd, buf + TARGET_OFF, TARGET_LEN, target(0),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, &bindable), 0);
}

static struct mr_mw *new_mw(int type)
{
	struct mr_mw *mw;

	ck_assert_int_eq(mr_mw_alloc(pd, type, &mw), 0);
	return mw;
}

/* A BIND_MW work request over [addr, addr + len) of mr, with the next key byte. */
static struct proto_swqe bind_wqe(uint64_t wr_id, const struct mr_mw *mw, const struct mr *mr,
				  uint64_t addr, uint64_t len, uint32_t access)
{
	uint32_t rkey = mr_mw_rkey(mw);

	return (struct proto_swqe){ .wr_id = wr_id, .opcode = IBV_WR_BIND_MW,
				    .flags = IBV_SEND_SIGNALED, .remote_addr = addr,
				    .compare_add = len, .rkey = (rkey & ~0xffu) | ((rkey + 1) & 0xff),
				    .mw_rkey = rkey, .mr_lkey = mr ? mr_keys(mr).lkey : 0,
				    .mw_access = access };
}

static struct proto_swqe local_inv_wqe(uint64_t wr_id, uint32_t rkey)
{
	return (struct proto_swqe){ .wr_id = wr_id, .opcode = IBV_WR_LOCAL_INV,
				    .flags = IBV_SEND_SIGNALED, .imm = rkey };
}

/* Binds mw on the RC QP (nothing goes on the wire) and returns its new rkey. */
static uint32_t bind_on_qp(struct mr_mw *mw, uint64_t addr, uint64_t len, uint32_t access)
{
	post_and_ring(bind_wqe(70, mw, bindable, addr, len, access));
	expect_cqe(70, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	expect_nothing_sent();
	return mr_mw_rkey(mw);
}

/* A remote WRITE and READ through a type 2 window bound on this QP; the MR itself grants
 * no remote access at all. */
START_TEST(test_mw_type2_write_and_read)
{
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_2);
	rkey = bind_on_qp(mw, target(MW_OFF), MW_LEN, MW_ACCESS_WR);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(MW_OFF + 8), rkey, 100, 0, 100);
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	expect_bytes(TARGET_OFF + MW_OFF + 8, data, 100);
	peer_read(rq(1), target(MW_OFF + MW_LEN - 64), rkey, 64);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(1), 2,
			     buf + TARGET_OFF + MW_OFF + MW_LEN - 64, 64);
	/* the MR is busy while the window is bound */
	ck_assert_int_eq(mr_dereg(bindable), -EINVAL);
	mr_mw_dealloc(mw);
	ck_assert_int_eq(mr_dereg(bindable), 0);
}
END_TEST

/* Inside the MR but past the window: refused, nothing written, the QP in error. */
START_TEST(test_mw_write_past_the_window)
{
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_2);
	rkey = bind_on_qp(mw, target(MW_OFF), MW_LEN, MW_ACCESS_WR);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(MW_OFF + MW_LEN - 8), rkey, 16, 0, 16);
	expect_ack(rq(0), WIRE_SYN_NAK_REM_ACCESS, 0);
	expect_refused("past the window", PROTO_REFUSED_rkey_bounds);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	mr_mw_dealloc(mw);
	mr_dereg(bindable);
}
END_TEST

/* A window bound for READ only refuses a WRITE; an atomic needs its own right too. */
START_TEST(test_mw_access_is_the_window_s)
{
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_1);
	post_and_ring(bind_wqe(71, mw, bindable, target(MW_OFF), MW_LEN, IBV_ACCESS_REMOTE_READ));
	expect_cqe(71, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	rkey = mr_mw_rkey(mw);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(MW_OFF), rkey, 8, 0, 8);
	expect_ack(rq(0), WIRE_SYN_NAK_REM_ACCESS, 0);
	expect_refused("write to a read-only window", PROTO_REFUSED_rkey_no_access);
	mr_mw_dealloc(mw);
	mr_dereg(bindable);
}
END_TEST

/* LOCAL_INV closes a type 2 window: the next WRITE is refused as unbound. */
START_TEST(test_mw_local_invalidate)
{
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_2);
	rkey = bind_on_qp(mw, target(MW_OFF), MW_LEN, MW_ACCESS_WR);
	post_and_ring(local_inv_wqe(72, rkey));
	expect_cqe(72, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	ck_assert_int_eq(mr_dereg(bindable), 0);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(MW_OFF), rkey, 8, 0, 8);
	expect_ack(rq(0), WIRE_SYN_NAK_REM_ACCESS, 0);
	expect_refused("an invalidated window", PROTO_REFUSED_rkey_mw_unbound);
	mr_mw_dealloc(mw);
}
END_TEST

/* A local operation completes in order: after the WRITE posted before it is ACKed. */
START_TEST(test_mw_local_op_completes_in_order)
{
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_2);
	rkey = bind_on_qp(mw, target(MW_OFF), MW_LEN, MW_ACCESS_WR);
	post_send(qp, swqe(73, IBV_WR_RDMA_WRITE, 0, 16));
	post_and_ring(local_inv_wqe(74, rkey));
	expect_packet(WIRE_OP_RC_WRITE_ONLY, sq(0));
	expect_no_cqe();
	/* executed in its turn all the same: the window is closed already */
	ck_assert_int_eq(mr_dereg(bindable), 0);
	peer_ack(sq(0), WIRE_SYN_ACK);
	expect_cqe(73, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_cqe(74, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	mr_mw_dealloc(mw);
}
END_TEST

/* A bind the MR does not allow fails with IBV_WC_MW_BIND_ERR and ends the QP; so does a
 * LOCAL_INV of a type 1 window, with IBV_WC_LOC_QP_OP_ERR. */
START_TEST(test_mw_bind_and_invalidate_errors)
{
	struct mr_mw *mw = new_mw(_i ? MR_MW_TYPE_1 : MR_MW_TYPE_2);

	if (_i == 0) {
		/* K_TARGET has every remote right but not MW_BIND */
		post_and_ring(bind_wqe(75, mw, mrs[K_TARGET], target(0), 64, MW_ACCESS_WR));
		expect_cqe(75, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
		expect_failed("bind without MW_BIND", PROTO_FAILED_mw_bind);
	} else {
		post_and_ring(local_inv_wqe(75, mr_mw_rkey(mw)));
		expect_cqe(75, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV);
		expect_failed("LOCAL_INV of type 1", PROTO_FAILED_local_opcode);
	}
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
	expect_nothing_sent();
	mr_mw_dealloc(mw);
}
END_TEST

/* SEND WITH INVALIDATE of the window bound on this QP: placed, completed with the key,
 * and the window closed. */
START_TEST(test_mw_send_with_invalidate)
{
	struct mr_mw *mw;
	struct proto_cqe c;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_2);
	rkey = bind_on_qp(mw, target(MW_OFF), MW_LEN, MW_ACCESS_WR);
	post_recv(qp, recv_wqe(43, 0, 64));
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_SEND_ONLY_INV, .psn = rq(0), .ext.ieth = rkey,
			    .payload = data, .len = 32 });
	expect_ack(rq(0), WIRE_SYN_ACK, 1);
	c = expect_cqe(43, IBV_WC_SUCCESS, IBV_WC_RECV);
	ck_assert_uint_eq(c.wc_flags, IBV_WC_GRH | IBV_WC_WITH_INV);
	ck_assert_uint_eq(c.imm, rkey);
	expect_bytes(RECV_OFF, data, 32);
	ck_assert_int_eq(mr_dereg(bindable), 0);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(1), target(MW_OFF), rkey, 8, 0, 8);
	expect_ack(rq(1), WIRE_SYN_NAK_REM_ACCESS, 1);
	expect_refused("after SEND WITH INVALIDATE", PROTO_REFUSED_rkey_mw_unbound);
	mr_mw_dealloc(mw);
}
END_TEST

/* A type 2 window bound on another QP is not this QP's: refused for access, and a SEND
 * WITH INVALIDATE naming it fails the receive (rxe's class J) and leaves it bound. */
START_TEST(test_mw_type2_of_another_qp)
{
	struct qp *other = new_qp(IBV_QPT_RC);
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	mw = new_mw(MR_MW_TYPE_2);
	rkey = bind_on_qp(mw, target(MW_OFF), MW_LEN, MW_ACCESS_WR);
	ck_assert_int_eq(mr_mw_invalidate(dev.mrs, rkey, pd, other), -EINVAL);
	ck_assert_int_eq(qp_destroy(other), 0);
	/* the QP it was bound on goes away: no QP reaches the window any more */
	mr_mw_forget_qp(mrc, qp);
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(0), target(MW_OFF), rkey, 8, 0, 8);
	expect_ack(rq(0), WIRE_SYN_NAK_REM_ACCESS, 0);
	expect_refused("a window of another QP", PROTO_REFUSED_rkey_other_qp);
	mr_mw_dealloc(mw);
	mr_dereg(bindable);
}
END_TEST

/* A zero-based window: the peer's addresses are offsets from the window's start. */
START_TEST(test_mw_zero_based_read_and_atomic)
{
	struct mr_mw *mw;
	uint32_t rkey;

	reg_bindable();
	ck_assert_int_eq(mr_dereg(bindable), 0);
	ck_assert_int_eq(mr_reg(pd, buf + TARGET_OFF, TARGET_LEN, target(0),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, &bindable), 0);
	mw = new_mw(MR_MW_TYPE_2);
	/* bound at an address of the MR, as verbs programs do; the peer counts from 0 */
	rkey = bind_on_qp(mw, target(MW_OFF + ATOMIC_OFF), MW_LEN, IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED);
	peer_read(rq(0), 0, rkey, 32);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 1,
			     buf + TARGET_OFF + MW_OFF + ATOMIC_OFF, 32);
	peer_atomic(WIRE_OP_RC_FETCH_ADD, rq(1), 8, rkey, 1, 0);
	expect_atomic_ack(rq(1), 2, word_at(TARGET_OFF + MW_OFF + ATOMIC_OFF + 8) - 1);
	{
		uint64_t v = word_at(TARGET_OFF + MW_OFF + ATOMIC_OFF + 8);

		expect_bytes(TARGET_OFF + MW_OFF + ATOMIC_OFF + 8, &v, sizeof(v));
	}
	peer_read(rq(2), MW_LEN - 8, rkey, 16);
	expect_ack(rq(2), WIRE_SYN_NAK_REM_ACCESS, 2);
	expect_refused("a READ past the zero-based window", PROTO_REFUSED_rkey_bounds);
	mr_mw_dealloc(mw);
	mr_dereg(bindable);
}
END_TEST

static void add_mw_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "mw");

	tcase_add_test(tc, test_mw_type2_write_and_read);
	tcase_add_test(tc, test_mw_write_past_the_window);
	tcase_add_test(tc, test_mw_access_is_the_window_s);
	tcase_add_test(tc, test_mw_local_invalidate);
	tcase_add_test(tc, test_mw_local_op_completes_in_order);
	tcase_add_loop_test(tc, test_mw_bind_and_invalidate_errors, 0, 2);
	tcase_add_test(tc, test_mw_send_with_invalidate);
	tcase_add_test(tc, test_mw_type2_of_another_qp);
	tcase_add_test(tc, test_mw_zero_based_read_and_atomic);
}

/* ---- ATOMIC WRITE ---- */

static void peer_atomic_write(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t dma_len,
			      size_t n)
{
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_ATOMIC_WRITE, .psn = psn,
			    .ext.reth = { va, rkey, dma_len }, .payload = data, .len = n });
}

/* 8 bytes at an aligned address, ACKed; a duplicate is ACKed again, not executed. */
/* Answered as rxe (6.2 on) answers it, with an empty READ RESPONSE ONLY; a duplicate gets
 * the answer again from its responder resource and is not written a second time. */
START_TEST(test_atomic_write_is_placed_and_answered)
{
	uint8_t after[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	peer_atomic_write(rq(0), target(ATOMIC_OFF), keys[K_TARGET], 8, 8);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 1, data, 0);
	expect_bytes(TARGET_OFF + ATOMIC_OFF, data, 8);
	poke(TARGET_OFF + ATOMIC_OFF, after, sizeof(after));
	peer_atomic_write(rq(0), target(ATOMIC_OFF), keys[K_TARGET], 8, 8);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 1, data, 0);
	expect_bytes(TARGET_OFF + ATOMIC_OFF, after, 8);
	ck_assert_uint_eq(dev.cnt.duplicate_request, 1);
}
END_TEST

/* rxe's checks, each refused with the target unchanged: the QP's remote write, the rkey's,
 * the length (8, the payload's), the alignment. */
START_TEST(test_atomic_write_refusals)
{
	static const struct {
		size_t off;                /* in buf */
		enum key_sel key;
		uint32_t dma_len, n;
		uint8_t syndrome;
		enum proto_refusal why;
	} cases[] = {
		{ RONLY_OFF, K_RONLY, 8, 8, WIRE_SYN_NAK_REM_ACCESS, PROTO_REFUSED_rkey_no_access },
		{ TARGET_OFF + ATOMIC_OFF, K_TARGET, 16, 16, WIRE_SYN_NAK_INV_REQ,
		  PROTO_REFUSED_write_length },
		{ TARGET_OFF + ATOMIC_OFF, K_TARGET, 8, 4, WIRE_SYN_NAK_INV_REQ,
		  PROTO_REFUSED_write_length },
		{ TARGET_OFF + ATOMIC_OFF + 4, K_TARGET, 8, 8, WIRE_SYN_NAK_INV_REQ,
		  PROTO_REFUSED_atomic_unaligned },
		{ TARGET_OFF + TARGET_LEN - 4, K_TARGET, 8, 8, WIRE_SYN_NAK_REM_ACCESS,
		  PROTO_REFUSED_rkey_bounds },
	};

	peer_atomic_write(rq(0), iova(cases[_i].off), keys[cases[_i].key], cases[_i].dma_len,
			  cases[_i].n);
	expect_ack(rq(0), cases[_i].syndrome, 0);
	expect_refused("ATOMIC WRITE", cases[_i].why);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

static void no_remote_write_conn(struct conn *c)
{
	c->access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
}

START_TEST(test_atomic_write_needs_remote_write)
{
	reconnect(no_remote_write_conn);
	peer_atomic_write(rq(0), target(ATOMIC_OFF), keys[K_TARGET], 8, 8);
	expect_ack(rq(0), WIRE_SYN_NAK_INV_REQ, 0);
	expect_refused("ATOMIC WRITE to a QP without remote write", PROTO_REFUSED_no_remote_write);
}
END_TEST

/* The requester: one packet, RETH and the 8 bytes of compare_add; complete on its ACK. */
START_TEST(test_atomic_write_requester)
{
	struct proto_swqe w = swqe(80, IBV_WR_ATOMIC_WRITE, 0, 0);
	const struct stub_frame *f;
	uint64_t value = 0x0102030405060708ull;

	w.num_sge = 0;
	w.compare_add = value;
	post_and_ring(w);
	f = expect_packet(WIRE_OP_RC_ATOMIC_WRITE, sq(0));
	ck_assert_uint_eq(f->pkt.ext.reth.length, 8);
	ck_assert_uint_eq(f->pkt.ext.reth.va, REMOTE_VA);
	ck_assert_uint_eq(f->pkt.ext.reth.rkey, REMOTE_RKEY);
	ck_assert(f->pkt.bth.ack_req);
	expect_payload(f, (const uint8_t *)&value, 8);
	expect_no_cqe();
	peer_ack(sq(0), WIRE_SYN_ACK);
	ck_assert_uint_eq(expect_cqe(80, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE).byte_len, 8);
	/* an unaligned one is refused before it is sent */
	w.wr_id = 81;
	w.remote_addr = REMOTE_VA + 4;
	post_and_ring(w);
	expect_nothing_sent();
	expect_cqe(81, IBV_WC_LOC_QP_OP_ERR, IBV_WC_ATOMIC_WRITE);
	expect_failed("unaligned ATOMIC WRITE", PROTO_FAILED_local_opcode);
}
END_TEST

static void one_initiator_depth(struct conn *c)
{
	c->max_rd_atomic = 1;
}

/* The responder keeps a resource for an ATOMIC WRITE, as for a READ: with max_rd_atomic 1
 * it waits for the READ before it, else it would take the READ's resource, and a lost
 * READ response could never be asked for again. With no max_rd_atomic it is refused, as a
 * READ is. */
START_TEST(test_atomic_write_counts_against_max_rd_atomic)
{
	struct proto_swqe w = swqe(2, IBV_WR_ATOMIC_WRITE, 0, 0);

	w.num_sge = 0;
	reconnect(one_initiator_depth);
	post_and_ring(swqe(1, IBV_WR_RDMA_READ, 0, 16));
	expect_packet(WIRE_OP_RC_READ_REQUEST, sq(0));
	post_and_ring(w);
	expect_nothing_sent();
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 16);
	expect_cqe(1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	expect_bytes(LOCAL_OFF, data, 16);
	expect_packet(WIRE_OP_RC_ATOMIC_WRITE, sq(1));
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(1), 0, 0);
	expect_cqe(2, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE);
}
END_TEST

START_TEST(test_atomic_write_without_max_rd_atomic)
{
	struct proto_swqe w = swqe(3, IBV_WR_ATOMIC_WRITE, 0, 0);

	w.num_sge = 0;
	reconnect(no_initiator_depth);
	post_and_ring(w);
	expect_nothing_sent();
	expect_cqe(3, IBV_WC_LOC_QP_OP_ERR, IBV_WC_ATOMIC_WRITE);
}
END_TEST

static void add_atomic_write_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "atomic_write");

	tcase_add_test(tc, test_atomic_write_is_placed_and_answered);
	tcase_add_loop_test(tc, test_atomic_write_refusals, 0, 5);
	tcase_add_test(tc, test_atomic_write_needs_remote_write);
	tcase_add_test(tc, test_atomic_write_requester);
	tcase_add_test(tc, test_atomic_write_counts_against_max_rd_atomic);
	tcase_add_test(tc, test_atomic_write_without_max_rd_atomic);
}

/* ---- FLUSH ---- */

static void peer_flush(uint32_t psn, uint8_t type, uint8_t level, uint64_t va, uint32_t rkey,
		       uint32_t len)
{
	peer(&(struct pkt){ .opcode = WIRE_OP_RC_FLUSH, .psn = psn, .ext.feth = { type, level },
			    .ext.reth = { va, rkey, len } });
}

static void flush_conn(struct conn *c)
{
	c->access |= PROTO_ACCESS_FLUSH_GLOBAL | PROTO_ACCESS_FLUSH_PERSISTENT;
}

/* Each level answered as rxe answers it, with an empty READ RESPONSE ONLY of its PSN; a
 * duplicate is answered again from its responder resource, not executed again. Nothing
 * in the memory changes. */
START_TEST(test_flush_is_answered_with_an_empty_read_response)
{
	reconnect(flush_conn);
	peer_flush(rq(0), WIRE_FLUSH_GLOBAL, WIRE_FLUSH_RANGE, target(8), keys[K_TARGET], 100);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 1, data, 0);
	/* the whole MR: the RETH's address and length are not looked at */
	peer_flush(rq(1), WIRE_FLUSH_GLOBAL, WIRE_FLUSH_MR, 0, keys[K_TARGET], 0x7fffffff);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(1), 2, data, 0);
	peer_flush(rq(0), WIRE_FLUSH_GLOBAL, WIRE_FLUSH_RANGE, target(8), keys[K_TARGET], 100);
	expect_read_response(WIRE_OP_RC_READ_RESP_ONLY, rq(0), 2, data, 0);
	ck_assert_uint_eq(dev.cnt.duplicate_request, 1);
	/* and the QP goes on: a WRITE after it is placed */
	peer_write(WIRE_OP_RC_WRITE_ONLY, rq(2), target(0), keys[K_TARGET], 8, 0, 8);
	expect_ack(rq(2), WIRE_SYN_ACK, 3);
	expect_bytes(TARGET_OFF, data, 8);
	for (int i = 0; i < PROTO_NREFUSALS; i++)
		ck_assert_uint_eq(dev.refused[i], 0);
}
END_TEST

/* rxe's checks, each NAKed, the QP ended and memory unchanged: the MR's rights for the
 * placement type (global: an MR without it; persistent: no rocemu MR has it), the range
 * at level range, the key; and rocemu's own, a level rxe has no name for. */
START_TEST(test_flush_refusals)
{
	static const struct {
		size_t off;
		enum key_sel key;
		uint8_t type, level;
		uint32_t len;
		uint8_t syndrome;
		enum proto_refusal why;
	} cases[] = {
		{ RONLY_OFF, K_RONLY, WIRE_FLUSH_GLOBAL, WIRE_FLUSH_RANGE, 8,
		  WIRE_SYN_NAK_REM_ACCESS, PROTO_REFUSED_rkey_no_access },
		{ TARGET_OFF, K_TARGET, WIRE_FLUSH_PERSISTENT, WIRE_FLUSH_MR, 8,
		  WIRE_SYN_NAK_REM_ACCESS, PROTO_REFUSED_rkey_no_access },
		{ TARGET_OFF + TARGET_LEN - 4, K_TARGET, WIRE_FLUSH_GLOBAL, WIRE_FLUSH_RANGE, 8,
		  WIRE_SYN_NAK_REM_ACCESS, PROTO_REFUSED_rkey_bounds },
		{ DEAD_OFF, K_DEAD, WIRE_FLUSH_GLOBAL, WIRE_FLUSH_MR, 0,
		  WIRE_SYN_NAK_REM_ACCESS, PROTO_REFUSED_rkey_unknown },
		{ OTHER_OFF, K_OTHER, WIRE_FLUSH_GLOBAL, WIRE_FLUSH_MR, 0,
		  WIRE_SYN_NAK_REM_ACCESS, PROTO_REFUSED_rkey_other_pd },
		{ TARGET_OFF, K_TARGET, WIRE_FLUSH_GLOBAL, 2, 8,
		  WIRE_SYN_NAK_INV_REQ, PROTO_REFUSED_flush_level },
	};

	reconnect(flush_conn);
	peer_flush(rq(0), cases[_i].type, cases[_i].level, iova(cases[_i].off),
		   keys[cases[_i].key], cases[_i].len);
	expect_ack(rq(0), cases[_i].syndrome, 0);
	expect_refused("FLUSH", cases[_i].why);
	ck_assert_int_eq(qp->state, IBV_QPS_ERR);
}
END_TEST

/* The QP's own rights come first: the fixture's QP grants no FLUSH (and the MR's right
 * does not stand in for it); a QP with global only refuses a persistent FLUSH. */
START_TEST(test_flush_needs_the_qp_s_right)
{
	peer_flush(rq(0), WIRE_FLUSH_GLOBAL, WIRE_FLUSH_RANGE, target(0), keys[K_TARGET], 8);
	expect_ack(rq(0), WIRE_SYN_NAK_INV_REQ, 0);
	expect_refused("FLUSH to a QP without FLUSH_GLOBAL", PROTO_REFUSED_no_flush_access);
}
END_TEST

static void flush_global_conn(struct conn *c)
{
	c->access |= PROTO_ACCESS_FLUSH_GLOBAL;
}

START_TEST(test_flush_persistent_needs_the_qp_s_right)
{
	reconnect(flush_global_conn);
	peer_flush(rq(0), WIRE_FLUSH_GLOBAL | WIRE_FLUSH_PERSISTENT, WIRE_FLUSH_MR, 0,
		   keys[K_TARGET], 0);
	expect_ack(rq(0), WIRE_SYN_NAK_INV_REQ, 0);
	expect_refused("persistent FLUSH to a QP with FLUSH_GLOBAL only",
		       PROTO_REFUSED_no_flush_access);
}
END_TEST

static struct proto_swqe flush_swqe(uint64_t wr_id, uint32_t type, uint32_t level,
				    uint32_t len)
{
	struct proto_swqe w = swqe(wr_id, PROTO_WR_FLUSH, 0, 0);

	w.num_sge = 0;
	w.flush_type = type;
	w.flush_level = level;
	w.flush_len = len;
	return w;
}

/* The requester: FETH and RETH, AckReq, no payload; complete on the empty READ RESPONSE
 * ONLY as IBV_WC_FLUSH with the range's length; a NAK fails it. */
START_TEST(test_flush_requester)
{
	const struct stub_frame *f;

	post_and_ring(flush_swqe(90, PROTO_FLUSH_GLOBAL, PROTO_FLUSH_RANGE, 4096));
	f = expect_packet(WIRE_OP_RC_FLUSH, sq(0));
	ck_assert_uint_eq(f->pkt.ext.feth.placement, WIRE_FLUSH_GLOBAL);
	ck_assert_uint_eq(f->pkt.ext.feth.selectivity, WIRE_FLUSH_RANGE);
	ck_assert_uint_eq(f->pkt.ext.reth.va, REMOTE_VA);
	ck_assert_uint_eq(f->pkt.ext.reth.rkey, REMOTE_RKEY);
	ck_assert_uint_eq(f->pkt.ext.reth.length, 4096);
	ck_assert(f->pkt.bth.ack_req);
	ck_assert_uint_eq(f->pkt.payload_len, 0);
	/* an ACK of its PSN says its answer was lost: it is asked again */
	peer_ack(sq(0), WIRE_SYN_ACK);
	expect_no_cqe();
	expect_packet(WIRE_OP_RC_FLUSH, sq(0));
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 0);
	ck_assert_uint_eq(expect_cqe(90, IBV_WC_SUCCESS, PROTO_WC_FLUSH).byte_len, 4096);
	post_and_ring(flush_swqe(91, PROTO_FLUSH_GLOBAL, PROTO_FLUSH_MR, 0));
	f = expect_packet(WIRE_OP_RC_FLUSH, sq(1));
	ck_assert_uint_eq(f->pkt.ext.feth.selectivity, WIRE_FLUSH_MR);
	peer_ack(sq(1), WIRE_SYN_NAK_REM_ACCESS);
	expect_cqe(91, IBV_WC_REM_ACCESS_ERR, PROTO_WC_FLUSH);
	expect_failed("FLUSH refused by the peer", PROTO_FAILED_nak_remote_access);
}
END_TEST

/* An answer with bytes in it is none a FLUSH can take. */
START_TEST(test_flush_answered_with_data_is_bad)
{
	post_and_ring(flush_swqe(92, PROTO_FLUSH_GLOBAL, PROTO_FLUSH_RANGE, 64));
	expect_packet(WIRE_OP_RC_FLUSH, sq(0));
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 8);
	expect_cqe(92, IBV_WC_BAD_RESP_ERR, PROTO_WC_FLUSH);
	expect_failed("FLUSH answered with data", PROTO_FAILED_response_unexpected);
}
END_TEST

/* Refused before it is sent: a type or level that does not exist. */
START_TEST(test_flush_requester_refusals)
{
	post_and_ring(flush_swqe(93, 4, PROTO_FLUSH_RANGE, 64));
	expect_nothing_sent();
	expect_cqe(93, IBV_WC_LOC_QP_OP_ERR, PROTO_WC_FLUSH);
	expect_failed("FLUSH of an unknown type", PROTO_FAILED_local_opcode);
}
END_TEST

/* rxe (6.2 on) answers an ATOMIC WRITE with an empty READ RESPONSE ONLY: taken as its ACK. */
START_TEST(test_atomic_write_answered_as_rxe_answers)
{
	struct proto_swqe w = swqe(94, IBV_WR_ATOMIC_WRITE, 0, 0);

	w.num_sge = 0;
	post_and_ring(w);
	expect_packet(WIRE_OP_RC_ATOMIC_WRITE, sq(0));
	peer_read_response(WIRE_OP_RC_READ_RESP_ONLY, sq(0), 0, 0);
	ck_assert_uint_eq(expect_cqe(94, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE).byte_len, 8);
}
END_TEST

static void add_flush_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "flush");

	tcase_add_test(tc, test_flush_is_answered_with_an_empty_read_response);
	tcase_add_loop_test(tc, test_flush_refusals, 0, 6);
	tcase_add_test(tc, test_flush_needs_the_qp_s_right);
	tcase_add_test(tc, test_flush_persistent_needs_the_qp_s_right);
	tcase_add_test(tc, test_flush_requester);
	tcase_add_test(tc, test_flush_answered_with_data_is_bad);
	tcase_add_test(tc, test_flush_requester_refusals);
	tcase_add_test(tc, test_atomic_write_answered_as_rxe_answers);
}

int main(void)
{
	Suite *s = suite_create("transport");
	SRunner *sr;
	int failed;

	add_responder_tests(s);
	add_refusal_tests(s);
	add_requester_tests(s);
	add_completer_error_tests(s);
	add_ud_tests(s);
	add_uc_tests(s);
	add_mw_tests(s);
	add_atomic_write_tests(s);
	add_flush_tests(s);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
