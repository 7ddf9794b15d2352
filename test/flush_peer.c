/* RDMA FLUSH between two hosts, as a program built against rdma-core's later headers posts
 * it: Debian 12's <infiniband/verbs.h> has no ibv_wr_flush, so this program spells what
 * the later header has (the names' values, and wr_flush as the member of struct
 * ibv_qp_ex after wr_atomic_write) and calls it there, as such a program's inline
 * ibv_wr_flush does. The server registers an MR with IBV_ACCESS_FLUSH_GLOBAL and one
 * without, and grants its QPs the FLUSH rights (not q4's). Each refusal has its QP pair:
 *   q0  a WRITE and a FLUSH of its range in one ibv_wr_start/ibv_wr_complete, then a
 *       FLUSH of the whole MR: IBV_WC_RDMA_WRITE, then IBV_WC_FLUSH twice; a FLUSH of a
 *       placement type that does not exist makes ibv_wr_complete fail, nothing posted
 *   q1  a FLUSH of the MR without IBV_ACCESS_FLUSH_GLOBAL: IBV_WC_REM_ACCESS_ERR
 *   q2  a persistent FLUSH (no rocemu MR is persistent): IBV_WC_REM_ACCESS_ERR
 *   q3  a FLUSH of a range past the MR's end: IBV_WC_REM_ACCESS_ERR
 *   q4  a FLUSH to a QP without the FLUSH rights: IBV_WC_REM_INV_REQ_ERR
 * The server checks that the WRITE's bytes are in place and nothing else changed, and that
 * an MR cannot be registered with IBV_ACCESS_FLUSH_PERSISTENT (EINVAL).
 *   flush_peer [-x GID_INDEX] server
 *   flush_peer [-x GID_INDEX] client SERVER_ADDRESS
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

/* What rdma-core's later verbs.h names (Debian 12's rdma-core 44 has none of them). */
#define WC_FLUSH 8                       /* IBV_WC_FLUSH */
#define QP_EX_WITH_FLUSH (1ull << 11)    /* IBV_QP_EX_WITH_FLUSH */
#define ACCESS_FLUSH_GLOBAL (1 << 8)     /* IBV_ACCESS_FLUSH_GLOBAL */
#define ACCESS_FLUSH_PERSISTENT (1 << 9) /* IBV_ACCESS_FLUSH_PERSISTENT */
#define FLUSH_GLOBAL 1                   /* IBV_FLUSH_GLOBAL */
#define FLUSH_PERSISTENT 2               /* IBV_FLUSH_PERSISTENT */
#define FLUSH_RANGE 0                    /* IBV_FLUSH_RANGE */
#define FLUSH_MR 1                       /* IBV_FLUSH_MR */

/* The later struct ibv_qp_ex: Debian 12's, then wr_flush. */
struct qp_ex_later {
	struct ibv_qp_ex base;
	void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, size_t len,
			 uint8_t type, uint8_t level);
};

#define PORT 18525
#define NQP 5
#define PAGE 4096
#define BUF_LEN (4 * PAGE)
#define PLAIN_OFF (3 * PAGE)          /* the MR without the FLUSH right: the last page */
#define MSG 512
#define AT (PAGE + 24)                /* where the WRITE lands */
#define CANARY(i) ((uint8_t)((i) * 11 + 0x29))
#define DEADLINE_S 20

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint32_t psn;
	uint32_t rkey, plain_rkey;
	uint64_t addr, len;           /* the flushable MR */
	uint64_t plain_addr;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qps[NQP];
static struct ibv_mr *mr;
static uint8_t *buf;
static int sock = -1;

static void expect_wc(const char *name, uint64_t wr_id, enum ibv_wc_status status,
		      int opcode, uint32_t byte_len)
{
	struct ibv_wc wc;
	char why[160];

	if (!peer_next_wc(cq, DEADLINE_S, &wc)) {
		peer_report(name, false, "no completion");
		return;
	}
	snprintf(why, sizeof(why), "wr_id %llu status %s opcode %d byte_len %u, expected %llu "
		 "%s %d %u", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
		 (int)wc.opcode, wc.byte_len, (unsigned long long)wr_id,
		 ibv_wc_status_str(status), opcode, byte_len);
	peer_report(name, wc.wr_id == wr_id && wc.status == status &&
		     (status != IBV_WC_SUCCESS || ((int)wc.opcode == opcode &&
						   wc.byte_len == byte_len)), why);
}

static void open_device(bool server)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | QP_EX_WITH_FLUSH,
	};

	if (!list || !list[0])
		peer_die("no RDMA device");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 32, NULL, NULL, 0)))
		peer_die("device, PD or CQ");
	buf = aligned_alloc(PAGE, BUF_LEN);
	if (!buf)
		peer_die("aligned_alloc");
	qa.pd = pd;
	qa.send_cq = qa.recv_cq = cq;
	for (int i = 0; i < NQP; i++)
		if (!(qps[i] = server ? ibv_create_qp(pd, &(struct ibv_qp_init_attr){
						.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
						.cap = qa.cap })
				      : ibv_create_qp_ex(ctx, &qa)))
			peer_die("ibv_create_qp with IBV_QP_EX_WITH_FLUSH");
}

static void exchange(bool server, struct info *mine, struct info *theirs)
{
	if (ibv_query_gid(ctx, 1, peer_gid_index, &mine->gid))
		peer_die("ibv_query_gid");
	for (int i = 0; i < NQP; i++)
		mine->qpn[i] = qps[i]->qp_num;
	mine->psn = server ? 0x5000 : 0x6000;
	peer_xfer(sock, true, mine, sizeof(*mine));
	peer_xfer(sock, false, theirs, sizeof(*theirs));
	for (int i = 0; i < NQP; i++)
		peer_connect_rc(qps[i], &(struct peer_rc){ .dest_qpn = theirs->qpn[i],
							    .rq_psn = theirs->psn, .sq_psn = mine->psn,
							    .mtu = IBV_MTU_1024, .dgid = theirs->gid,
							    .gid_index = peer_gid_index });
}

/* ---- server ---- */

/* The QP's FLUSH rights, given in RTS (rxe checks them on every FLUSH). */
static void grant_flush(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | ACCESS_FLUSH_GLOBAL | ACCESS_FLUSH_PERSISTENT };

	if (ibv_modify_qp(qp, &a, IBV_QP_ACCESS_FLAGS))
		peer_die("ibv_modify_qp(IBV_QP_ACCESS_FLAGS with the FLUSH rights)");
}

static void server_check_memory(void)
{
	size_t bad = BUF_LEN;
	char why[64];

	for (size_t i = 0; i < BUF_LEN && bad == BUF_LEN; i++) {
		uint8_t want = i >= AT && i < AT + MSG ? (uint8_t)~CANARY(i) : CANARY(i);

		if (buf[i] != want)
			bad = i;
	}
	snprintf(why, sizeof(why), "byte %zu is 0x%02x", bad, bad < BUF_LEN ? buf[bad] : 0);
	peer_report("server memory: the WRITE's bytes, nothing else", bad == BUF_LEN, why);
}

static void server(void)
{
	struct info mine, theirs;
	struct ibv_mr *plain, *persistent;
	char step;

	open_device(true);
	for (size_t i = 0; i < BUF_LEN; i++)
		buf[i] = CANARY(i);
	mr = ibv_reg_mr(pd, buf, PLAIN_OFF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			ACCESS_FLUSH_GLOBAL);
	plain = ibv_reg_mr(pd, buf + PLAIN_OFF, PAGE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr || !plain)
		peer_die("ibv_reg_mr with IBV_ACCESS_FLUSH_GLOBAL");
	errno = 0;
	persistent = ibv_reg_mr(pd, buf, PAGE, IBV_ACCESS_LOCAL_WRITE | ACCESS_FLUSH_PERSISTENT);
	peer_report("an MR cannot be persistent: EINVAL", !persistent && errno == EINVAL,
	       persistent ? "registered" : strerror(errno));
	sock = peer_tcp_accept(PORT);
	mine = (struct info){ .rkey = mr->rkey, .plain_rkey = plain->rkey,
			      .addr = (uintptr_t)buf, .len = PLAIN_OFF,
			      .plain_addr = (uintptr_t)buf + PLAIN_OFF };
	exchange(true, &mine, &theirs);
	for (int i = 0; i < NQP - 1; i++)
		grant_flush(qps[i]);
	peer_xfer(sock, true, &(char){ 'k' }, 1);
	peer_xfer(sock, false, &step, 1);
	server_check_memory();
	peer_report("the MRs deregister", !ibv_dereg_mr(mr) && !ibv_dereg_mr(plain), strerror(errno));
	peer_xfer(sock, true, &(char){ 'k' }, 1);
}

/* ---- client ---- */

static void flush(struct ibv_qp *qp, uint64_t wr_id, uint32_t rkey, uint64_t addr, size_t len,
		  uint8_t type, uint8_t level)
{
	struct qp_ex_later *ex = (struct qp_ex_later *)ibv_qp_to_qp_ex(qp);

	ex->base.wr_id = wr_id;
	ex->base.wr_flags = IBV_SEND_SIGNALED;
	ex->wr_flush(&ex->base, rkey, addr, len, type, level);
}

static void post_flush(const char *name, int q, uint32_t rkey, uint64_t addr, size_t len,
		       uint8_t type, uint8_t level, enum ibv_wc_status want)
{
	struct ibv_qp_ex *ex = ibv_qp_to_qp_ex(qps[q]);
	int err;

	ibv_wr_start(ex);
	flush(qps[q], 10 + (uint64_t)q, rkey, addr, len, type, level);
	err = ibv_wr_complete(ex);
	if (err) {
		errno = err;
		peer_die("ibv_wr_complete of a FLUSH");
	}
	expect_wc(name, 10 + (uint64_t)q, want, WC_FLUSH, (uint32_t)len);
}

static void client(const char *host)
{
	struct info s, mine = { 0 };
	struct ibv_qp_ex *ex;
	struct ibv_wc wc;
	char step;
	int err;

	open_device(false);
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		peer_die("ibv_reg_mr");
	for (size_t i = 0; i < MSG; i++)
		buf[i] = (uint8_t)~CANARY(AT + i);
	sock = peer_tcp_connect(host, PORT);
	exchange(false, &mine, &s);
	peer_xfer(sock, false, &step, 1);

	ex = ibv_qp_to_qp_ex(qps[0]);
	ibv_wr_start(ex);
	ex->wr_id = 1;
	ex->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ex, s.rkey, s.addr + AT);
	ibv_wr_set_sge(ex, mr->lkey, (uintptr_t)buf, MSG);
	flush(qps[0], 2, s.rkey, s.addr + AT, MSG, FLUSH_GLOBAL, FLUSH_RANGE);
	err = ibv_wr_complete(ex);
	peer_report("a WRITE and a FLUSH posted in one list", err == 0, strerror(err));
	expect_wc("the WRITE completes", 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, MSG);
	expect_wc("the FLUSH of its range completes as IBV_WC_FLUSH", 2, IBV_WC_SUCCESS,
		  WC_FLUSH, MSG);
	post_flush("a FLUSH of the whole MR completes", 0, s.rkey, s.addr, 0, FLUSH_GLOBAL,
		   FLUSH_MR, IBV_WC_SUCCESS);
	ibv_wr_start(ex);
	flush(qps[0], 3, s.rkey, s.addr, 8, 4, FLUSH_RANGE);
	err = ibv_wr_complete(ex);
	peer_report("a FLUSH of placement type 4: ibv_wr_complete says EINVAL", err == EINVAL,
	       strerror(err));
	peer_report("and nothing was posted", ibv_poll_cq(cq, 1, &wc) == 0, "a completion came");

	post_flush("a FLUSH of an MR without IBV_ACCESS_FLUSH_GLOBAL is refused", 1,
		   s.plain_rkey, s.plain_addr, 8, FLUSH_GLOBAL, FLUSH_RANGE, IBV_WC_REM_ACCESS_ERR);
	post_flush("a persistent FLUSH is refused", 2, s.rkey, s.addr, 8, FLUSH_PERSISTENT,
		   FLUSH_RANGE, IBV_WC_REM_ACCESS_ERR);
	post_flush("a FLUSH past the MR's end is refused", 3, s.rkey, s.addr + s.len - 4, 8,
		   FLUSH_GLOBAL, FLUSH_RANGE, IBV_WC_REM_ACCESS_ERR);
	post_flush("a FLUSH to a QP without the FLUSH rights is refused", 4, s.rkey, s.addr, 8,
		   FLUSH_GLOBAL, FLUSH_RANGE, IBV_WC_REM_INV_REQ_ERR);
	peer_xfer(sock, true, &(char){ 'E' }, 1);
	peer_xfer(sock, false, &step, 1);
}

int main(int argc, char **argv)
{
	peer_prog = "flush_peer";
	return peer_main(argc, argv, server, client);
}
