/* ibv_rereg_mr between two hosts, written against <infiniband/verbs.h> alone (built as
 * mw_peer is). The server registers buffer A with LOCAL_WRITE | REMOTE_WRITE and hands its
 * rkey to the client once; then, step by step, re-registers the MR while the client writes
 * into it with that same rkey (rocemu keeps an MR's keys across a re-registration, as
 * mlx5 does). A refused access ends its QP pair, so each refusal has its own:
 *   q0  a WRITE into A; CHANGE_TRANSLATION onto buffer B; a WRITE lands in B
 *   q1  a WRITE to A's old address is refused (out of the MR now)
 *   q2  CHANGE_PD to another PD: a WRITE is refused (the QP's PD is not the MR's)
 *   q3  CHANGE_PD back: a WRITE lands in B again
 *   q4  CHANGE_ACCESS to LOCAL_WRITE alone: a WRITE is refused
 *   q5  all three at once (back onto A, the first PD, LOCAL_WRITE | REMOTE_WRITE |
 *       REMOTE_READ): a WRITE and a READ of A
 * Every refusal must complete with IBV_WC_REM_ACCESS_ERR, and at the end A and B must hold
 * their canary everywhere but where the successful WRITEs went. Before the peer steps the
 * server checks the bad inputs and their return codes (man ibv_rereg_mr), and after them
 * that an MR with a memory window bound cannot be re-registered.
 *   rereg_peer [-x GID_INDEX] server
 *   rereg_peer [-x GID_INDEX] client SERVER_ADDRESS
 * One line per check, "ok NAME" or "FAIL NAME: why"; exit 0 when all passed. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/peer_link.h"

#define PORT 18523
#define NQP 6
#define PAGE 4096
#define BUF_LEN (4 * PAGE)
#define MSG 512                   /* every WRITE's length */
#define AT_A0 (1 * PAGE)          /* where the WRITEs land: in A before the move, */
#define AT_B0 (1 * PAGE + 100)    /* in B after it, */
#define AT_B3 (2 * PAGE + 7)      /* in B after CHANGE_PD back, */
#define AT_A5 (3 * PAGE + 1)      /* in A after the move back */
#define CANARY_A(i) ((uint8_t)((i) * 7 + 0x11))
#define CANARY_B(i) ((uint8_t)((i) * 3 + 0x5a))
#define FILL(step) ((uint8_t)(0xc0 + (step)))
#define DEADLINE_S 20
#define ACCESS_RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint32_t psn;
	uint32_t rkey;
	uint64_t a, b;                /* the server's two buffers */
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qps[NQP];
static struct ibv_mr *mr;
static uint8_t *buf, *buf_b;
static int sock = -1;

static void expect_wc(const char *name, uint64_t wr_id, enum ibv_wc_status status)
{
	struct ibv_wc wc;
	char why[160];

	if (!peer_next_wc(cq, DEADLINE_S, &wc)) {
		peer_report(name, false, "no completion");
		return;
	}
	snprintf(why, sizeof(why), "wr_id %llu status %s, expected %llu %s",
		 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
		 (unsigned long long)wr_id, ibv_wc_status_str(status));
	peer_report(name, wc.wr_id == wr_id && wc.status == status, why);
}

static uint8_t *page_buffer(void)
{
	uint8_t *p = aligned_alloc(PAGE, BUF_LEN);

	if (!p)
		peer_die("aligned_alloc");
	return p;
}

static void open_device(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };

	if (!list || !list[0])
		peer_die("no RDMA device");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 32, NULL, NULL, 0)))
		peer_die("device, PD or CQ");
	buf = page_buffer();
	qa.send_cq = qa.recv_cq = cq;
	for (int i = 0; i < NQP; i++)
		if (!(qps[i] = ibv_create_qp(pd, &qa)))
			peer_die("ibv_create_qp");
}

static void exchange(bool server, struct info *mine, struct info *theirs)
{
	if (ibv_query_gid(ctx, 1, peer_gid_index, &mine->gid))
		peer_die("ibv_query_gid");
	for (int i = 0; i < NQP; i++)
		mine->qpn[i] = qps[i]->qp_num;
	mine->psn = server ? 0x3000 : 0x4000;
	peer_xfer(sock, true, mine, sizeof(*mine));
	peer_xfer(sock, false, theirs, sizeof(*theirs));
	for (int i = 0; i < NQP; i++)
		peer_connect_rc(qps[i], &(struct peer_rc){ .dest_qpn = theirs->qpn[i],
							    .rq_psn = theirs->psn, .sq_psn = mine->psn,
							    .mtu = IBV_MTU_1024, .dgid = theirs->gid,
							    .gid_index = peer_gid_index });
}

static void sync_step(char step)
{
	char back;

	peer_xfer(sock, true, &step, 1);
	peer_xfer(sock, false, &back, 1);
}

/* ---- server ---- */

static void expect_rereg(const char *name, int flags, struct ibv_pd *p, void *addr,
			 size_t len, int access, int want_rc, int want_errno)
{
	char why[128];
	int rc;

	errno = 0;
	rc = ibv_rereg_mr(mr, flags, p, addr, len, access);
	snprintf(why, sizeof(why), "returned %d errno %s, expected %d %s", rc, strerror(errno),
		 want_rc, strerror(want_errno));
	peer_report(name, rc == want_rc && (want_rc == 0 || errno == want_errno), why);
}

/* Refused before or by the daemon, each leaving the MR as it was. */
static void server_bad_inputs(void)
{
	uint32_t lkey = mr->lkey, rkey = mr->rkey;

	expect_rereg("no flag: the command fails with EINVAL", 0, NULL, NULL, 0, 0,
		     IBV_REREG_MR_ERR_CMD, EINVAL);
	expect_rereg("an unknown flag: ERR_INPUT, EINVAL", IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL,
		     NULL, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL);
	expect_rereg("CHANGE_TRANSLATION without an address: ERR_INPUT, EINVAL",
		     IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, PAGE, 0,
		     IBV_REREG_MR_ERR_INPUT, EINVAL);
	expect_rereg("CHANGE_TRANSLATION of length 0: ERR_INPUT, EINVAL",
		     IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf_b, 0, 0,
		     IBV_REREG_MR_ERR_INPUT, EINVAL);
	expect_rereg("access without CHANGE_ACCESS: ERR_INPUT, EINVAL", IBV_REREG_MR_CHANGE_PD,
		     pd, NULL, 0, ACCESS_RW, IBV_REREG_MR_ERR_INPUT, EINVAL);
	expect_rereg("REMOTE_WRITE without LOCAL_WRITE: the command fails with EINVAL",
		     IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE,
		     IBV_REREG_MR_ERR_CMD, EINVAL);
	peer_report("the refusals left the keys, address and length",
	       mr->lkey == lkey && mr->rkey == rkey && mr->addr == buf && mr->length == BUF_LEN,
	       "the MR changed");
}

/* A window was checked against the MR when it was bound: no re-registration under it. */
static void server_window_busy(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	struct ibv_mw_bind b = { .wr_id = 50, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = { .mr = mr, .addr = (uintptr_t)buf, .length = 64,
						.mw_access_flags = IBV_ACCESS_REMOTE_READ } };

	expect_rereg("MW_BIND added", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		     ACCESS_RW | IBV_ACCESS_MW_BIND, 0, 0);
	if (!mw || ibv_bind_mw(qps[5], mw, &b))
		peer_die("ibv_alloc_mw or ibv_bind_mw");
	expect_wc("the window is bound", 50, IBV_WC_SUCCESS);
	expect_rereg("a bound window makes the MR busy", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		     ACCESS_RW, IBV_REREG_MR_ERR_CMD, EBUSY);
	if (ibv_dealloc_mw(mw))
		peer_die("ibv_dealloc_mw");
	expect_rereg("once the window is gone it is not", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
		     0, ACCESS_RW, 0, 0);
}

static bool within(size_t i, size_t at)
{
	return i >= at && i < at + MSG;
}

/* The first byte of A (or B) that is neither its canary nor a successful WRITE's, or
 * BUF_LEN. */
static size_t first_wrong(const uint8_t *p, bool is_a)
{
	for (size_t i = 0; i < BUF_LEN; i++) {
		uint8_t want = is_a ? CANARY_A(i) : CANARY_B(i);

		if (is_a && within(i, AT_A0))
			want = FILL(0);
		else if (is_a && within(i, AT_A5))
			want = FILL(5);
		else if (!is_a && within(i, AT_B0))
			want = FILL(1);
		else if (!is_a && within(i, AT_B3))
			want = FILL(3);
		if (p[i] != want)
			return i;
	}
	return BUF_LEN;
}

static void server_check_memory(void)
{
	size_t bad_a = first_wrong(buf, true), bad_b = first_wrong(buf_b, false);
	char why[64];

	snprintf(why, sizeof(why), "A's byte %zu is 0x%02x", bad_a, bad_a < BUF_LEN ? buf[bad_a] : 0);
	peer_report("A: the first WRITE, the last, nothing else", bad_a == BUF_LEN, why);
	snprintf(why, sizeof(why), "B's byte %zu is 0x%02x", bad_b,
		 bad_b < BUF_LEN ? buf_b[bad_b] : 0);
	peer_report("B: the WRITEs after the move, nothing else", bad_b == BUF_LEN, why);
}

static void server(void)
{
	struct ibv_pd *other_pd;
	struct info mine = { 0 }, theirs;
	uint32_t rkey;
	char step, done = 'k';

	open_device();
	buf_b = page_buffer();
	for (size_t i = 0; i < BUF_LEN; i++) {
		buf[i] = CANARY_A(i);
		buf_b[i] = CANARY_B(i);
	}
	mr = ibv_reg_mr(pd, buf, BUF_LEN, ACCESS_RW);
	other_pd = ibv_alloc_pd(ctx);
	if (!mr || !other_pd)
		peer_die("ibv_reg_mr or ibv_alloc_pd");
	rkey = mr->rkey;
	server_bad_inputs();
	sock = peer_tcp_accept(PORT);
	mine = (struct info){ .rkey = mr->rkey, .a = (uintptr_t)buf, .b = (uintptr_t)buf_b };
	exchange(true, &mine, &theirs);
	for (;;) {
		peer_xfer(sock, false, &step, 1);
		if (step == 'E')
			break;
		if (step == 'T') {
			expect_rereg("CHANGE_TRANSLATION onto B", IBV_REREG_MR_CHANGE_TRANSLATION,
				     NULL, buf_b, BUF_LEN, 0, 0, 0);
			peer_report("the MR now shows B, the rkey kept",
			       mr->addr == buf_b && mr->length == BUF_LEN && mr->rkey == rkey,
			       "addr, length or rkey");
		} else if (step == 'P') {
			expect_rereg("CHANGE_PD to another PD", IBV_REREG_MR_CHANGE_PD, other_pd,
				     NULL, 0, 0, 0, 0);
			peer_report("the MR shows the new PD", mr->pd == other_pd, "mr->pd");
		} else if (step == 'p') {
			expect_rereg("CHANGE_PD back", IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0, 0, 0);
		} else if (step == 'A') {
			expect_rereg("CHANGE_ACCESS to LOCAL_WRITE alone",
				     IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				     IBV_ACCESS_LOCAL_WRITE, 0, 0);
		} else if (step == 'C') {
			expect_rereg("all three at once, back onto A",
				     IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
				     IBV_REREG_MR_CHANGE_ACCESS, pd, buf, BUF_LEN,
				     ACCESS_RW | IBV_ACCESS_REMOTE_READ, 0, 0);
		}
		peer_xfer(sock, true, &done, 1);
	}
	server_check_memory();
	server_window_busy();
	peer_report("the MR deregisters", ibv_dereg_mr(mr) == 0, strerror(errno));
	peer_report("so does the other PD", ibv_dealloc_pd(other_pd) == 0, strerror(errno));
	peer_xfer(sock, true, &done, 1);
}

/* ---- client ---- */

static void rdma(const char *name, int qp, enum ibv_wr_opcode op, uint64_t addr, uint32_t rkey,
		 uint8_t fill, enum ibv_wc_status want)
{
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)qp + 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge, .num_sge = 1 };
	struct ibv_send_wr *bad;

	memset(buf, fill, MSG);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qps[qp], &wr, &bad))
		peer_die("ibv_post_send");
	expect_wc(name, wr.wr_id, want);
}

static void client(const char *host)
{
	struct info s, mine = { 0 };
	bool same = true;

	open_device();
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		peer_die("ibv_reg_mr");
	sock = peer_tcp_connect(host, PORT);
	exchange(false, &mine, &s);

	rdma("a WRITE into A", 0, IBV_WR_RDMA_WRITE, s.a + AT_A0, s.rkey, FILL(0), IBV_WC_SUCCESS);
	sync_step('T');
	rdma("after the move, a WRITE with the same rkey lands in B", 0, IBV_WR_RDMA_WRITE,
	     s.b + AT_B0, s.rkey, FILL(1), IBV_WC_SUCCESS);
	rdma("a WRITE to A's old address is refused", 1, IBV_WR_RDMA_WRITE, s.a + AT_A0, s.rkey,
	     FILL(9), IBV_WC_REM_ACCESS_ERR);
	sync_step('P');
	rdma("with the MR in another PD a WRITE is refused", 2, IBV_WR_RDMA_WRITE, s.b + AT_B0,
	     s.rkey, FILL(9), IBV_WC_REM_ACCESS_ERR);
	sync_step('p');
	rdma("back in the QP's PD a WRITE lands", 3, IBV_WR_RDMA_WRITE, s.b + AT_B3, s.rkey,
	     FILL(3), IBV_WC_SUCCESS);
	sync_step('A');
	rdma("without REMOTE_WRITE a WRITE is refused", 4, IBV_WR_RDMA_WRITE, s.b + AT_B3,
	     s.rkey, FILL(9), IBV_WC_REM_ACCESS_ERR);
	sync_step('C');
	rdma("after all three at once a WRITE lands in A", 5, IBV_WR_RDMA_WRITE, s.a + AT_A5,
	     s.rkey, FILL(5), IBV_WC_SUCCESS);
	memset(buf + PAGE, 0, MSG);
	{
		struct ibv_sge sge = { (uintptr_t)buf + PAGE, MSG, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 77, .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		wr.wr.rdma.remote_addr = s.a + AT_A5;
		wr.wr.rdma.rkey = s.rkey;
		if (ibv_post_send(qps[5], &wr, &bad))
			peer_die("ibv_post_send");
		expect_wc("and a READ (REMOTE_READ granted) brings it back", 77, IBV_WC_SUCCESS);
		for (size_t i = 0; i < MSG; i++)
			same &= buf[PAGE + i] == FILL(5);
		peer_report("the READ's bytes are the WRITE's", same, "bytes differ");
	}
	sync_step('E');
}

int main(int argc, char **argv)
{
	peer_prog = "rereg_peer";
	return peer_main(argc, argv, server, client);
}
