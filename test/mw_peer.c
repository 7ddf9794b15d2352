/* Memory windows between two hosts, written against <infiniband/verbs.h> alone (built as
 * uc_peer is, so the same binary runs on rxe). The server registers one buffer with
 * LOCAL_WRITE | MW_BIND and no remote right at all, fills it with a canary, and opens
 * windows onto it for the client: a type 1 window bound with ibv_bind_mw (read and write),
 * a type 1 window for READ only, and type 2 windows bound with IBV_WR_BIND_MW on the QP
 * the client uses. Each case runs on its own QP pair, since a refused access ends both:
 *   q0  WRITE then READ back through the type 1 and a type 2 window (byte for byte); SEND
 *       WITH INVALIDATE of the type 2 window (the server's receive completes with
 *       IBV_WC_WITH_INV and the key); a WRITE through it then fails
 *   q1  a WRITE that runs 8 bytes past the type 1 window fails
 *   q2  a WRITE through the read-only window fails
 *   q3  a type 2 window bound on q0 used through q3 fails (it belongs to q0)
 *   q4  a type 2 window bound on q4 written, invalidated by the server with
 *       IBV_WR_LOCAL_INV, then a WRITE fails
 *   q5  the type 1 window emptied by a bind of length 0 (which gives it a new key too), then
 *       a READ with the key it had fails
 * Every refused access must complete with IBV_WC_REM_ACCESS_ERR, and at the end the
 * server's buffer must hold the canary everywhere but where the successful WRITEs went.
 * The MR cannot be deregistered while windows are bound to it; once they are gone it can.
 *   mw_peer [-x GID_INDEX] server
 *   mw_peer [-x GID_INDEX] client SERVER_ADDRESS
 * One line per check, "ok NAME" or "FAIL NAME: why"; exit 0 when all passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/peer_link.h"

#define PORT 18521
#define NQP 6
#define PAGE 4096
#define BUF_LEN (8 * PAGE)
#define WIN 1024                  /* every window's length */
#define W1 (1 * PAGE)             /* the windows' offsets in the server's buffer */
#define W2 (2 * PAGE)
#define WRO (3 * PAGE)
#define W4 (4 * PAGE)
#define CHECKED (6 * PAGE)        /* past it: where the SEND lands */
#define CANARY(i) ((uint8_t)((i) * 5 + 0x3c))
#define DEADLINE_S 20

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint32_t psn;
	uint32_t rkey1, rkey2, rkey_ro, rkey4;
	uint64_t addr;                /* the server's buffer */
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qps[NQP];
static struct ibv_mr *mr;
static uint8_t *buf;
static int sock = -1;

/* One completion with this wr_id, status and (on success) opcode. */
static void expect_wc(const char *name, uint64_t wr_id, enum ibv_wc_status status,
		      enum ibv_wc_opcode opcode, struct ibv_wc *out)
{
	struct ibv_wc wc;
	char why[160];

	if (!peer_next_wc(cq, DEADLINE_S, &wc)) {
		peer_report(name, false, "no completion");
		return;
	}
	snprintf(why, sizeof(why), "wr_id %llu status %s opcode %d, expected %llu %s %d",
		 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), (int)wc.opcode,
		 (unsigned long long)wr_id, ibv_wc_status_str(status), (int)opcode);
	peer_report(name, wc.wr_id == wr_id && wc.status == status &&
		     (status != IBV_WC_SUCCESS || wc.opcode == opcode), why);
	if (out)
		*out = wc;
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		peer_die("ibv_post_send");
}

static void open_device(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };

	if (!list || !list[0])
		peer_die("no RDMA device");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 64, NULL, NULL, 0)))
		peer_die("device, PD or CQ");
	buf = aligned_alloc(PAGE, BUF_LEN);
	if (!buf)
		peer_die("aligned_alloc");
	qa.send_cq = qa.recv_cq = cq;
	for (int i = 0; i < NQP; i++)
		if (!(qps[i] = ibv_create_qp(pd, &qa)))
			peer_die("ibv_create_qp");
}

static struct info exchange(bool server, struct info mine)
{
	struct info theirs;

	if (ibv_query_gid(ctx, 1, peer_gid_index, &mine.gid))
		peer_die("ibv_query_gid");
	for (int i = 0; i < NQP; i++)
		mine.qpn[i] = qps[i]->qp_num;
	mine.psn = server ? 0x1000 : 0x2000;
	peer_xfer(sock, true, &mine, sizeof(mine));
	peer_xfer(sock, false, &theirs, sizeof(theirs));
	for (int i = 0; i < NQP; i++)
		peer_connect_rc(qps[i], &(struct peer_rc){ .dest_qpn = theirs.qpn[i],
							    .rq_psn = theirs.psn, .sq_psn = mine.psn,
							    .mtu = IBV_MTU_1024, .dgid = theirs.gid,
							    .gid_index = peer_gid_index });
	return theirs;
}

/* One byte each way: the client names a step, the server answers when it is done. */
static void sync_step(char step)
{
	char back;

	peer_xfer(sock, true, &step, 1);
	peer_xfer(sock, false, &back, 1);
}

static char wait_step(void)
{
	char step;

	peer_xfer(sock, false, &step, 1);
	return step;
}

static void step_done(void)
{
	char ok = 'k';

	peer_xfer(sock, true, &ok, 1);
}

/* ---- server ---- */

static struct ibv_mw *alloc_mw(enum ibv_mw_type type)
{
	struct ibv_mw *mw = ibv_alloc_mw(pd, type);

	if (!mw)
		peer_die("ibv_alloc_mw");
	return mw;
}

static uint32_t bind_type1(struct ibv_qp *qp, struct ibv_mw *mw, size_t off, size_t len,
			   unsigned access)
{
	struct ibv_mw_bind b = { .wr_id = 100 + off, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = { .mr = mr, .addr = (uintptr_t)buf + off,
						.length = len, .mw_access_flags = access } };

	if (ibv_bind_mw(qp, mw, &b))
		peer_die("ibv_bind_mw");
	expect_wc("type 1 bind completes", b.wr_id, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
	return mw->rkey;
}

static uint32_t bind_type2(struct ibv_qp *qp, struct ibv_mw *mw, size_t off)
{
	struct ibv_send_wr wr = { .wr_id = 200 + off, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)buf + off, .length = WIN,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	post(qp, &wr);
	expect_wc("type 2 bind completes", wr.wr_id, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
	return wr.bind_mw.rkey;
}

static void server_check_memory(void)
{
	size_t bad = BUF_LEN;
	char why[96];

	for (size_t i = 0; i < CHECKED && bad == BUF_LEN; i++) {
		bool written = (i >= W1 && i < W1 + WIN) || (i >= W2 && i < W2 + WIN) ||
			       (i >= W4 && i < W4 + WIN);
		uint8_t want = written ? (uint8_t)~CANARY(i) : CANARY(i);

		if (buf[i] != want)
			bad = i;
	}
	snprintf(why, sizeof(why), "byte %zu is 0x%02x", bad, bad < BUF_LEN ? buf[bad] : 0);
	peer_report("server memory: the windows written, nothing else", bad == BUF_LEN, why);
}

static void server(void)
{
	struct ibv_mw *mw1, *mw2, *mw_ro, *mw4;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct info mine = { 0 };
	struct ibv_wc wc;
	char step;

	open_device();
	for (size_t i = 0; i < BUF_LEN; i++)
		buf[i] = CANARY(i);
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mr)
		peer_die("ibv_reg_mr with MW_BIND");
	/* SEND WITH INVALIDATE's bytes land past the buffer's checked part */
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf + 6 * PAGE, .length = 64, .lkey = mr->lkey };
	mw1 = alloc_mw(IBV_MW_TYPE_1);
	mw_ro = alloc_mw(IBV_MW_TYPE_1);
	mw2 = alloc_mw(IBV_MW_TYPE_2);
	mw4 = alloc_mw(IBV_MW_TYPE_2);
	sock = peer_tcp_accept(PORT);
	mine.addr = (uintptr_t)buf;
	exchange(true, mine);
	if (ibv_post_recv(qps[0], &rwr, &rbad))
		peer_die("ibv_post_recv");
	mine.rkey1 = bind_type1(qps[0], mw1, W1, WIN,
				IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	mine.rkey_ro = bind_type1(qps[0], mw_ro, WRO, WIN, IBV_ACCESS_REMOTE_READ);
	mine.rkey2 = bind_type2(qps[0], mw2, W2);
	mine.rkey4 = bind_type2(qps[4], mw4, W4);
	peer_report("the MR cannot be deregistered with windows bound", ibv_dereg_mr(mr) != 0,
	       "ibv_dereg_mr succeeded");
	peer_xfer(sock, true, &mine, sizeof(mine));
	while ((step = wait_step()) != 'E') {
		if (step == 'S') {
			expect_wc("SEND WITH INVALIDATE received", 7, IBV_WC_SUCCESS, IBV_WC_RECV,
				  &wc);
			peer_report("the receive says WITH_INV and names the window",
			       (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == mine.rkey2,
			       "wc_flags or invalidated_rkey");
		} else if (step == 'I') {
			struct ibv_send_wr inv = { .wr_id = 300, .opcode = IBV_WR_LOCAL_INV,
						   .send_flags = IBV_SEND_SIGNALED,
						   .invalidate_rkey = mine.rkey4 };

			post(qps[4], &inv);
			expect_wc("LOCAL_INV completes", 300, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV,
				  NULL);
		} else if (step == 'U') {
			bind_type1(qps[5], mw1, 0, 0, 0);
		}
		step_done();
	}
	server_check_memory();
	if (ibv_dealloc_mw(mw1) || ibv_dealloc_mw(mw2) || ibv_dealloc_mw(mw_ro) ||
	    ibv_dealloc_mw(mw4))
		peer_die("ibv_dealloc_mw");
	peer_report("the MR deregisters once the windows are gone", ibv_dereg_mr(mr) == 0,
	       strerror(errno));
	step_done();
}

/* ---- client ---- */

static struct ibv_send_wr rdma(uint64_t wr_id, enum ibv_wr_opcode op, uint64_t addr,
			       uint32_t rkey, struct ibv_sge *sge)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				  .sg_list = sge, .num_sge = 1 };

	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return wr;
}

/* Writes the inverted canary of the window at off, reads it back into the second page of
 * the client's buffer and compares. */
static void write_read_window(const char *what, struct ibv_qp *qp, const struct info *s,
			      size_t off, uint32_t rkey)
{
	struct ibv_sge src = { (uintptr_t)buf, WIN, mr->lkey };
	struct ibv_sge dst = { (uintptr_t)buf + PAGE, WIN, mr->lkey };
	struct ibv_send_wr w = rdma(1, IBV_WR_RDMA_WRITE, s->addr + off, rkey, &src);
	struct ibv_send_wr r = rdma(2, IBV_WR_RDMA_READ, s->addr + off, rkey, &dst);
	char name[96];

	for (size_t i = 0; i < WIN; i++)
		buf[i] = (uint8_t)~CANARY(off + i);
	memset(buf + PAGE, 0, WIN);
	snprintf(name, sizeof(name), "%s: WRITE", what);
	post(qp, &w);
	expect_wc(name, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
	snprintf(name, sizeof(name), "%s: READ", what);
	post(qp, &r);
	expect_wc(name, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL);
	snprintf(name, sizeof(name), "%s: the READ brings back what was written", what);
	peer_report(name, memcmp(buf, buf + PAGE, WIN) == 0, "bytes differ");
}

static void refused(const char *name, struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t addr,
		    uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)buf + 2 * PAGE, len, mr->lkey };
	struct ibv_send_wr wr = rdma(9, op, addr, rkey, &sge);

	memset(buf + 2 * PAGE, 0xee, len);
	post(qp, &wr);
	expect_wc(name, 9, IBV_WC_REM_ACCESS_ERR, op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
									 : IBV_WC_RDMA_WRITE, NULL);
}

static void client(const char *host)
{
	struct info s;
	struct ibv_sge sge;
	struct ibv_send_wr inv = { .wr_id = 5, .opcode = IBV_WR_SEND_WITH_INV,
				   .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge, .num_sge = 1 };

	open_device();
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		peer_die("ibv_reg_mr");
	sock = peer_tcp_connect(host, PORT);
	exchange(false, (struct info){ 0 });
	peer_xfer(sock, false, &s, sizeof(s));

	write_read_window("type 1 window", qps[0], &s, W1, s.rkey1);
	write_read_window("type 2 window", qps[0], &s, W2, s.rkey2);
	write_read_window("type 2 window of q4", qps[4], &s, W4, s.rkey4);
	refused("a WRITE 8 bytes past the type 1 window", qps[1], IBV_WR_RDMA_WRITE,
		s.addr + W1 + WIN - 8, s.rkey1, 16);
	refused("a WRITE through the read-only window", qps[2], IBV_WR_RDMA_WRITE,
		s.addr + WRO, s.rkey_ro, 8);
	refused("a type 2 window of another QP", qps[3], IBV_WR_RDMA_WRITE, s.addr + W2, s.rkey2, 8);

	sge = (struct ibv_sge){ (uintptr_t)buf, 16, mr->lkey };
	inv.invalidate_rkey = s.rkey2;
	post(qps[0], &inv);
	expect_wc("SEND WITH INVALIDATE completes", 5, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	sync_step('S');
	refused("a WRITE through the invalidated type 2 window", qps[0], IBV_WR_RDMA_WRITE,
		s.addr + W2, s.rkey2, 8);

	sync_step('I');
	refused("a WRITE after LOCAL_INV", qps[4], IBV_WR_RDMA_WRITE, s.addr + W4, s.rkey4, 8);
	sync_step('U');
	refused("a READ of the emptied type 1 window", qps[5], IBV_WR_RDMA_READ, s.addr + W1,
		s.rkey1, 8);
	/* the server answers once it checked its memory and deregistered */
	sync_step('E');
}

int main(int argc, char **argv)
{
	peer_prog = "mw_peer";
	return peer_main(argc, argv, server, client);
}
