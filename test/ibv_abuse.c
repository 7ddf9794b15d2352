/* A verbs program, written against <infiniband/verbs.h> and linked against libibverbs only,
 * that misuses the API; run under rocemu-run on one daemon (argv[1]: its IPv4 address),
 * it checks that each misuse is refused the way verbs refuses it, and that what should
 * work (loopback QPs, an iova other than the address, two threads on one QP and CQ) does.
 * One line per case: "ok NAME" or "FAIL NAME: why"; exit 0 when every case passed.
 * With --events it only prints each asynchronous event ("event NAME") until the device's
 * fatal one, for the test script to cause them: waiting in ibv_get_async_event, or with
 * --events-polled in poll() on async_fd, as an event loop does, taking an event only once
 * the fd says one is there. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF 65536
#define DEPTH 16

static struct ibv_device *device;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int failures;

static void report(const char *name, bool ok, const char *why)
{
	if (ok) {
		printf("ok %s\n", name);
	} else {
		printf("FAIL %s: %s\n", name, why);
		failures++;
	}
	fflush(stdout);
}

#define CHECK(name, cond) report(name, (cond), #cond)

struct end {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static struct ibv_qp *make_qp(struct ibv_cq *cq, uint32_t depth)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &a);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_LOCAL_WRITE,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/* RESET -> RTS towards remote_qpn on this same device, with short timers. */
static int connect_qp(struct ibv_qp *qp, uint32_t remote_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = remote_qpn,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } },
	};
	int err = to_init(qp);

	if (!err)
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 12, .retry_cnt = 1,
				  .rnr_retry = 1, .sq_psn = 0, .max_rd_atomic = 1 };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static bool make_end(struct end *e, uint32_t depth)
{
	e->cq = ibv_create_cq(ctx, 4 * (int)depth, NULL, NULL, 0);
	e->qp = e->cq ? make_qp(e->cq, depth) : NULL;
	e->buf = aligned_alloc(4096, BUF);
	e->mr = e->qp && e->buf ? ibv_reg_mr(pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_REMOTE_READ) : NULL;
	return e->mr != NULL;
}

static void free_end(struct end *e)
{
	ibv_destroy_qp(e->qp);
	ibv_destroy_cq(e->cq);
	ibv_dereg_mr(e->mr);
	free(e->buf);
}

/* One completion within ms, or status -1. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n == 1)
			return wc->status;
		if (n < 0)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	return -1;
}

static int post_write(struct ibv_qp *qp, uint64_t laddr, uint32_t lkey, uint32_t len,
		      uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};
	struct ibv_send_wr *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int port_gid_tbl_len(void)
{
	struct ibv_port_attr pa;

	return ibv_query_port(ctx, 1, &pa) ? -1 : pa.gid_tbl_len;
}

static void case_gid_table(void)
{
	struct ibv_gid_entry table[4], one;
	ssize_t n = ibv_query_gid_table(ctx, table, 4, 0);

	CHECK("gid: ibv_query_gid_table has one entry, RoCE v2, the daemon's GID",
	      n == 1 && table[0].gid_type == IBV_GID_TYPE_ROCE_V2 && table[0].port_num == 1 &&
	      table[0].gid_index == 0 && memcmp(&table[0].gid, &gid, sizeof(gid)) == 0);
	CHECK("gid: ibv_query_gid_ex index 0 is the same, index 1 (empty) ENODATA, past the "
	      "table EINVAL", ibv_query_gid_ex(ctx, 1, 0, &one, 0) == 0 &&
	      memcmp(&one, &table[0], sizeof(one)) == 0 &&
	      ibv_query_gid_ex(ctx, 1, 1, &one, 0) == ENODATA &&
	      ibv_query_gid_ex(ctx, 1, (uint32_t)port_gid_tbl_len(), &one, 0) == EINVAL);
}

static void case_unsupported(void)
{
	struct ibv_qp_init_attr ud = { .qp_type = IBV_QPT_UD, .cap = { 1, 1, 1, 1, 0 } };
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_ah_attr ah = { .is_global = 1, .port_num = 1, .grh.dgid = gid };
	struct ibv_xrcd_init_attr xrcd = { .comp_mask = IBV_XRCD_INIT_ATTR_OFLAGS };
	struct ibv_cq_init_attr_ex cq_ex = { .cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	struct ibv_alloc_dm_attr dm = { .length = 4096 };
	char buf[64];

	ud.send_cq = ud.recv_cq = cq;
	ud.qp_type = IBV_QPT_RAW_PACKET;
	errno = 0;
	CHECK("unsupported: ibv_create_qp(RAW_PACKET) is EOPNOTSUPP", !ibv_create_qp(pd, &ud) &&
	      errno == EOPNOTSUPP);
	ah.is_global = 0;
	errno = 0;
	CHECK("ud: ibv_create_ah without a GRH is EINVAL", !ibv_create_ah(pd, &ah) &&
	      errno == EINVAL);
	ah.is_global = 1;
	ah.grh.sgid_index = 1;
	errno = 0;
	CHECK("ud: ibv_create_ah from source GID 1 (there is only 0) is EINVAL",
	      !ibv_create_ah(pd, &ah) && errno == EINVAL);
	errno = 0;
	CHECK("mw: ibv_alloc_mw of a type neither 1 nor 2 is EINVAL",
	      !ibv_alloc_mw(pd, (enum ibv_mw_type)3) && errno == EINVAL);
	errno = 0;
	CHECK("unsupported: ibv_open_xrcd is EOPNOTSUPP", !ibv_open_xrcd(ctx, &xrcd) &&
	      errno == EOPNOTSUPP);
	errno = 0;
	CHECK("unsupported: ibv_alloc_dm is EOPNOTSUPP", !ibv_alloc_dm(ctx, &dm) &&
	      errno == EOPNOTSUPP);
	errno = 0;
	CHECK("unsupported: ibv_reg_mr(ON_DEMAND) is EOPNOTSUPP",
	      !ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE) &&
	      errno == EOPNOTSUPP);
	errno = 0;
	CHECK("unsupported: ibv_create_cq_ex with timestamps is EOPNOTSUPP",
	      !ibv_create_cq_ex(ctx, &cq_ex) && errno == EOPNOTSUPP);
	CHECK("ibv_attach_mcast without a QP is EINVAL", ibv_attach_mcast(NULL, &gid, 0) == EINVAL);
	ibv_destroy_cq(cq);
}

/* ---- UD, both QPs on this one device (the daemon loops the datagrams back) ---- */

#define QKEY 0x11111111u
#define UD_MAX 1024             /* a datagram's payload here: at most the port's MTU */
#define GRH 40

struct ud_end {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;           /* receives from offset 0, one slot of GRH + UD_MAX each */
};

static bool make_ud_end(struct ud_end *e)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_UD, .cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
						.max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qkey = QKEY };

	e->cq = ibv_create_cq(ctx, 4 * DEPTH, NULL, NULL, 0);
	a.send_cq = a.recv_cq = e->cq;
	e->qp = e->cq ? ibv_create_qp(pd, &a) : NULL;
	e->buf = aligned_alloc(4096, BUF);
	e->mr = e->qp && e->buf ? ibv_reg_mr(pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!e->mr || ibv_modify_qp(e->qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_QKEY))
		return false;
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	if (ibv_modify_qp(e->qp, &m, IBV_QP_STATE))
		return false;
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 7 };
	return ibv_modify_qp(e->qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
}

static void free_ud_end(struct ud_end *e)
{
	ibv_destroy_qp(e->qp);
	ibv_destroy_cq(e->cq);
	ibv_dereg_mr(e->mr);
	free(e->buf);
}

static int post_ud_recv(struct ud_end *e, unsigned slot, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + slot * (GRH + UD_MAX),
			       .length = len, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

/* A datagram of len bytes (pattern byte fill) from e to qpn through ah; the send's status. */
static int ud_send(struct ud_end *e, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
		   uint32_t len, uint8_t fill)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + BUF - 8192, .length = len,
			       .lkey = e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 99, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0xabcd0000u | fill),
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey },
	}, *bad;
	struct ibv_wc wc;

	memset(e->buf + BUF - 8192, fill, len);
	if (ibv_post_send(e->qp, &wr, &bad))
		return -2;
	return wait_wc(e->cq, &wc, 2000) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND ? 0 : -1;
}

/* The receive in slot holds a datagram of len bytes of fill from src_qp, after an IPv4
 * GRH area from and to this device's address. */
static bool ud_received(struct ud_end *e, const struct ibv_wc *wc, uint32_t src_qp,
			uint32_t len, uint8_t fill)
{
	const uint8_t *g = e->buf + wc->wr_id * (GRH + UD_MAX), *ip = g + 20;
	uint8_t zeros[20] = { 0 };

	/* sl: the packet type, as ConnectX gives it (UDP, IPv4), which UCX reads */
	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV ||
	    wc->byte_len != GRH + len || wc->src_qp != src_qp || wc->sl != 0xa ||
	    !(wc->wc_flags & IBV_WC_GRH) || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
	    ntohl(wc->imm_data) != (0xabcd0000u | fill))
		return false;
	if (memcmp(g, zeros, 20) || ip[0] != 0x45 || ip[9] != 17 ||
	    memcmp(ip + 12, &gid.raw[12], 4) || memcmp(ip + 16, &gid.raw[12], 4))
		return false;
	for (uint32_t i = 0; i < len; i++)
		if (g[GRH + i] != fill)
			return false;
	return true;
}

static void ud_refusals(struct ud_end *a)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = 8, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE },
			   *bad;
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_RTS, .dest_qp_num = 5 };

	CHECK("ud: an RDMA WRITE on a UD QP is EINVAL", ibv_post_send(a->qp, &wr, &bad) == EINVAL);
	wr.opcode = IBV_WR_SEND;
	CHECK("ud: a SEND without an address handle is EINVAL",
	      ibv_post_send(a->qp, &wr, &bad) == EINVAL);
	CHECK("ud: a destination QPN for a UD QP is EINVAL",
	      ibv_modify_qp(a->qp, &m, IBV_QP_STATE | IBV_QP_DEST_QPN) == EINVAL);
}

static void case_ud(void)
{
	struct ibv_ah_attr attr = { .is_global = 1, .port_num = 1,
				    .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } };
	struct ud_end a = { 0 }, b = { 0 };
	struct ibv_ah *ah, *back;
	struct ibv_wc wc;
	bool ok;

	ok = make_ud_end(&a) && make_ud_end(&b);
	CHECK("ud: two UD QPs through RESET, INIT (Q_Key), RTR and RTS", ok);
	ah = ok ? ibv_create_ah(pd, &attr) : NULL;
	CHECK("ud: an address handle to this device's own GID", ah != NULL);
	if (!ah)
		return;
	ud_refusals(&a);
	post_ud_recv(&b, 0, GRH + UD_MAX);
	CHECK("ud: a datagram of 1000 bytes completes on the sender",
	      ud_send(&a, ah, b.qp->qp_num, QKEY, 1000, 0x31) == 0);
	CHECK("ud: ... arrives after 40 bytes of GRH area (IPv4: 20 zeros, then the header), "
	      "with src_qp, the immediate, IBV_WC_GRH and sl 0xa (RoCE v2 over IPv4)",
	      wait_wc(b.cq, &wc, 2000) == IBV_WC_SUCCESS &&
	      ud_received(&b, &wc, a.qp->qp_num, 1000, 0x31));
	back = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)b.buf, 1);
	post_ud_recv(&a, 1, GRH + UD_MAX);
	CHECK("ud: ibv_create_ah_from_wc answers the sender",
	      back && ud_send(&b, back, wc.src_qp, QKEY, 3, 0x32) == 0 &&
	      wait_wc(a.cq, &wc, 2000) == IBV_WC_SUCCESS &&
	      ud_received(&a, &wc, b.qp->qp_num, 3, 0x32));
	/* each of these is dropped: the receive posted next takes the good one after them */
	ud_send(&a, ah, b.qp->qp_num, QKEY + 1, 8, 0x40);
	CHECK("ud: a datagram with the wrong Q_Key is not received",
	      wait_wc(b.cq, &wc, 200) == -1);
	CHECK("ud: a datagram longer than the MTU completes on the sender...",
	      ud_send(&a, ah, b.qp->qp_num, QKEY, 4097, 0x41) == 0);
	CHECK("ud: ... without being sent", wait_wc(b.cq, &wc, 200) == -1);
	post_ud_recv(&b, 2, GRH + 10);
	ud_send(&a, ah, b.qp->qp_num, QKEY, 11, 0x42);
	CHECK("ud: a datagram longer than the receive WQE is dropped",
	      wait_wc(b.cq, &wc, 200) == -1);
	CHECK("ud: ... and the WQE takes the next datagram that fits (Q_Key with the top bit: "
	      "the sending QP's own)",
	      ud_send(&a, ah, b.qp->qp_num, 0x80000000u, 10, 0x43) == 0 &&
	      wait_wc(b.cq, &wc, 2000) == IBV_WC_SUCCESS && wc.wr_id == 2 &&
	      ud_received(&b, &wc, a.qp->qp_num, 10, 0x43));
	CHECK("ud: ibv_destroy_ah", ibv_destroy_ah(ah) == 0 && (!back || !ibv_destroy_ah(back)));
	free_ud_end(&a);
	free_ud_end(&b);
}

/* ---- UC QPs through the extended API ---- */

#define UC_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)

static struct ibv_qp *make_uc_qp_ex(struct ibv_cq *cq, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC, .pd = pd,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = ops,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp_ex(ctx, &a);
}

/* RTR with the attributes given on top of UC's own; 0 or the errno. */
static int uc_to_rtr(struct ibv_qp *qp, uint32_t dest_qpn, int extra)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .dest_qp_num = dest_qpn, .rq_psn = 0x100,
		.path_mtu = IBV_MTU_1024, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } },
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | extra);
}

static int uc_to_rts(struct ibv_qp *qp, int extra)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x100, .timeout = 14,
				 .retry_cnt = 7, .max_rd_atomic = 1 };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | extra);
}

static bool uc_connect(struct ibv_qp *qp, uint32_t dest_qpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	return !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      IBV_QP_ACCESS_FLAGS) &&
	       uc_to_rtr(qp, dest_qpn, IBV_QP_MAX_DEST_RD_ATOMIC) == EINVAL &&
	       uc_to_rtr(qp, dest_qpn, IBV_QP_MIN_RNR_TIMER) == EINVAL &&
	       uc_to_rtr(qp, dest_qpn, 0) == 0 &&
	       uc_to_rts(qp, IBV_QP_TIMEOUT) == EINVAL &&
	       uc_to_rts(qp, IBV_QP_RETRY_CNT) == EINVAL &&
	       uc_to_rts(qp, IBV_QP_MAX_QP_RD_ATOMIC) == EINVAL && uc_to_rts(qp, 0) == 0;
}

static void case_uc(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	uint8_t *buf = calloc(1, BUF);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *ex;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc;

	if (!cq || !mr) {
		report("uc: a CQ and an MR", false, "not created");
		return;
	}
	errno = 0;
	CHECK("uc: ibv_create_qp_ex(UC) with RDMA READ in send_ops_flags is EINVAL",
	      !make_uc_qp_ex(cq, UC_OPS | IBV_QP_EX_WITH_RDMA_READ) && errno == EINVAL);
	a = make_uc_qp_ex(cq, UC_OPS);
	b = make_uc_qp_ex(cq, UC_OPS);
	CHECK("uc: ibv_create_qp_ex(UC) with SEND and RDMA WRITE [WITH IMM]", a && b);
	if (!a || !b)
		return;
	CHECK("uc: INIT, RTR and RTS with UC's attributes; max_dest_rd_atomic, min_rnr_timer, "
	      "timeout, retry_cnt and max_rd_atomic are EINVAL",
	      uc_connect(a, b->qp_num) && uc_connect(b, a->qp_num));
	CHECK("uc: ibv_query_qp says UC, RTS",
	      !ibv_query_qp(a, &attr, IBV_QP_STATE, &init) && attr.qp_state == IBV_QPS_RTS &&
	      init.qp_type == IBV_QPT_UC);
	ex = ibv_qp_to_qp_ex(a);
	CHECK("uc: ibv_qp_to_qp_ex", ex != NULL);
	if (!ex)
		return;
	ibv_wr_start(ex);
	ex->wr_id = 1;
	ibv_wr_rdma_read(ex, mr->rkey, (uintptr_t)buf);
	ibv_wr_set_sge(ex, mr->lkey, (uintptr_t)buf + 1024, 8);
	CHECK("uc: ibv_wr_rdma_read then ibv_wr_complete is EINVAL", ibv_wr_complete(ex) == EINVAL);
	sge = (struct ibv_sge){ (uintptr_t)buf + 4096, 4096, mr->lkey };
	memset(buf, 0x5a, 3000);
	CHECK("uc: a receive posted", !ibv_post_recv(b, &rwr, &bad));
	ibv_wr_start(ex);
	ex->wr_id = 2;
	ex->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(ex, htonl(0x1234));
	ibv_wr_set_sge(ex, mr->lkey, (uintptr_t)buf, 3000);
	CHECK("uc: ibv_wr_send_imm of 3000 bytes (3 packets) posted", ibv_wr_complete(ex) == 0);
	CHECK("uc: ... completes on the sender",
	      wait_wc(cq, &wc, 2000) == IBV_WC_SUCCESS && wc.wr_id == 2 &&
	      wc.opcode == IBV_WC_SEND);
	CHECK("uc: ... arrives whole with its immediate",
	      wait_wc(cq, &wc, 2000) == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == 3000 &&
	      wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      wc.imm_data == htonl(0x1234) && !memcmp(buf, buf + 4096, 3000));
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
}

/* ---- a peer that never answers ARP ---- */

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct prober {
	volatile bool stop;
	unsigned answers;
	double slowest;         /* seconds */
};

/* Asks the daemon about the port over a context of its own until told to stop. */
static void *probe(void *arg)
{
	struct prober *p = arg;
	struct ibv_context *other = ibv_open_device(device);
	struct ibv_port_attr pa;

	while (other && !p->stop) {
		double t = now_s();

		if (ibv_query_port(other, 1, &pa))
			break;
		t = now_s() - t;
		p->slowest = t > p->slowest ? t : p->slowest;
		p->answers++;
		usleep(20000);
	}
	if (other)
		ibv_close_device(other);
	return NULL;
}

/* The RTR towards a silent address fails with EHOSTUNREACH after about a second, and all
 * the while the daemon answers others at once: it waits for the neighbour on a timer, not
 * in its loop (it once slept through that second). */
static void case_silent_peer(const char *silent)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp = cq ? make_qp(cq, 4) : NULL;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = 0x123,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .hop_limit = 64 } },
	};
	struct ibv_ah_attr ah = { .is_global = 1, .port_num = 1, .grh.hop_limit = 64 };
	struct ibv_qp_init_attr init;
	struct prober p = { 0 };
	pthread_t thread;
	double t;
	int err = -1;

	a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
	inet_pton(AF_INET, silent, &a.ah_attr.grh.dgid.raw[12]);
	ah.grh.dgid = a.ah_attr.grh.dgid;
	if (!qp || to_init(qp) || pthread_create(&thread, NULL, probe, &p)) {
		CHECK("silent peer: setup", false);
		return;
	}
	t = now_s();
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	t = now_s() - t;
	p.stop = true;
	pthread_join(thread, NULL);
	CHECK("silent peer: RTR towards it is EHOSTUNREACH after about a second",
	      err == EHOSTUNREACH && t > 0.5 && t < 5);
	CHECK("silent peer: meanwhile another context's calls are answered (none waits 0.5 s)",
	      p.answers >= 3 && p.slowest < 0.5);
	errno = 0;
	CHECK("silent peer: ibv_create_ah towards it is NULL with EHOSTUNREACH",
	      !ibv_create_ah(pd, &ah) && errno == EHOSTUNREACH);
	CHECK("silent peer: the QP stays in INIT", ibv_query_qp(qp, &a, IBV_QP_STATE, &init) == 0 &&
	      a.qp_state == IBV_QPS_INIT);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
}

static void case_bad_arguments(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp = cq ? make_qp(cq, 4) : NULL;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	char *buf = malloc(8192);
	union ibv_gid other_gid;
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_REMOTE_WRITE);
	CHECK("bad argument: REMOTE_WRITE without LOCAL_WRITE is EINVAL", !mr && errno == EINVAL);
	CHECK("bad argument: RESET -> RTS is EINVAL",
	      qp && ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL);
	CHECK("bad argument: destroying a CQ a QP uses is EBUSY", ibv_destroy_cq(cq) == EBUSY);
	mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK("bad argument: deallocating a PD with a QP and an MR is EBUSY", ibv_dealloc_pd(pd) == EBUSY);
	CHECK("bad argument: ibv_query_gid past the table fails, an empty index is the zero GID",
	      ibv_query_gid(ctx, 1, port_gid_tbl_len(), &other_gid) != 0 &&
	      ibv_query_gid(ctx, 1, 1, &other_gid) == 0 &&
	      !memcmp(&other_gid, &(union ibv_gid){ 0 }, sizeof(other_gid)));
	CHECK("bad argument: ibv_query_port port 2 fails",
	      ibv_query_port(ctx, 2, &(struct ibv_port_attr){ 0 }) != 0);
	ibv_dereg_mr(mr);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	free(buf);
}

/* Two QPs of this device connected to each other, and every local and remote key misuse. */
static void case_keys(void)
{
	struct end a, b;
	struct ibv_wc wc;
	struct ibv_send_wr *bad;
	struct ibv_send_wr tso = { .opcode = IBV_WR_TSO, .send_flags = IBV_SEND_SIGNALED };
	uint8_t before[BUF];
	int st;

	if (!make_end(&a, DEPTH) || !make_end(&b, DEPTH) || connect_qp(a.qp, b.qp->qp_num) ||
	    connect_qp(b.qp, a.qp->qp_num)) {
		report("keys: two QPs of one device connected", false, strerror(errno));
		return;
	}
	memset(a.buf, 0xa5, BUF);
	memset(b.buf, 0, BUF);
	st = post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 4096, (uintptr_t)b.buf, b.mr->rkey, 1);
	CHECK("keys: loopback WRITE completes", st == 0 && wait_wc(a.cq, &wc, 5000) == 0);
	CHECK("keys: loopback WRITE landed", b.buf[0] == 0xa5 && b.buf[4095] == 0xa5 &&
	      b.buf[4096] == 0);
	CHECK("keys: an unsupported opcode is refused at post",
	      ibv_post_send(a.qp, &tso, &bad) != 0 && bad == &tso);
	memcpy(before, b.buf, BUF);
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, (uintptr_t)b.buf, b.mr->rkey ^ 0x100, 2);
	st = wait_wc(a.cq, &wc, 5000);
	CHECK("keys: a bad rkey completes with IBV_WC_REM_ACCESS_ERR", st == IBV_WC_REM_ACCESS_ERR);
	CHECK("keys: ... and the target is unchanged", memcmp(before, b.buf, BUF) == 0);
	free_end(&a);
	free_end(&b);
	if (!make_end(&a, DEPTH) || !make_end(&b, DEPTH) || connect_qp(a.qp, b.qp->qp_num) ||
	    connect_qp(b.qp, a.qp->qp_num))
		return;
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey ^ 0x100, 64, (uintptr_t)b.buf, b.mr->rkey, 3);
	st = wait_wc(a.cq, &wc, 5000);
	CHECK("keys: a bad lkey completes with IBV_WC_LOC_PROT_ERR", st == IBV_WC_LOC_PROT_ERR);
	st = post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, (uintptr_t)b.buf, b.mr->rkey, 4);
	CHECK("keys: the next WRITE on the errored QP is flushed",
	      st != 0 || wait_wc(a.cq, &wc, 5000) == IBV_WC_WR_FLUSH_ERR);
	free_end(&a);
	free_end(&b);
}

/* More work requests than the send queue holds: the first that does not fit is bad_wr. */
/* Completions waiting in a CQ survive its resize, in order; a size they would not fit in is
 * EINVAL. The completions come from receives flushed by a QP moved to ERR. */
static void case_resize_cq(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp = cq ? make_qp(cq, 8) : NULL;
	struct ibv_qp_attr err_state = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[8];
	bool posted = qp && to_init(qp) == 0;
	int n = 0;

	for (uint64_t id = 1; posted && id <= 3; id++) {
		struct ibv_recv_wr wr = { .wr_id = id }, *bad;

		posted = ibv_post_recv(qp, &wr, &bad) == 0;
	}
	posted = posted && ibv_modify_qp(qp, &err_state, IBV_QP_STATE) == 0;
	for (int tries = 0; posted && tries < 100 && ibv_poll_cq(cq, 0, wc) == 0; tries++)
		usleep(1000);        /* let the daemon flush them (polling 0 takes none) */
	usleep(20000);
	CHECK("resize cq: 3 completions waiting, resizing to 2 is EINVAL",
	      posted && ibv_resize_cq(cq, 2) == EINVAL);
	CHECK("resize cq: to 64, the CQ reports at least 64",
	      posted && ibv_resize_cq(cq, 64) == 0 && cq->cqe >= 64);
	while (posted && n < 8) {
		int got = ibv_poll_cq(cq, 8 - n, wc + n);

		if (got <= 0)
			break;
		n += got;
	}
	CHECK("resize cq: the 3 flushed receives are still there, in order",
	      n == 3 && wc[0].wr_id == 1 && wc[1].wr_id == 2 && wc[2].wr_id == 3 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CHECK("resize cq: back down to 1 once empty", cq && ibv_resize_cq(cq, 1) == 0);
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
}

/* A QP made for max_sge SGEs each way on a and b (RC, connected to each other). */
static bool make_wide_pair(struct ibv_cq *cq, struct ibv_qp **a, struct ibv_qp **b, int sges)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = (uint32_t)sges,
			 .max_recv_sge = (uint32_t)sges },
	};

	*a = ibv_create_qp(pd, &init);
	*b = *a ? ibv_create_qp(pd, &init) : NULL;
	return *b && !connect_qp(*a, (*b)->qp_num) && !connect_qp(*b, (*a)->qp_num);
}

/* The bytes an SGE list names, one after the other, into to; returns their number. */
static uint32_t gathered(const struct ibv_sge *sge, int n, uint8_t *to)
{
	uint32_t len = 0;

	for (int i = 0; i < n; i++) {
		memcpy(to + len, (const void *)(uintptr_t)sge[i].addr, sge[i].length);
		len += sge[i].length;
	}
	return len;
}

/* A SEND gathered from sges pieces of e's buffer, scattered into sges other pieces of it
 * of the lengths in reverse order: the message must come out whole, in order. */
static bool wide_send(struct end *e, struct ibv_qp *a, struct ibv_qp *b, int sges)
{
	struct ibv_sge out[32], in[32];
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = in, .num_sge = sges }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = out, .num_sge = sges,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_wc wc[2];
	static uint8_t sent[32768], got[32768];
	uint32_t sent_len;

	for (int i = 0; i < sges; i++) {
		out[i] = (struct ibv_sge){ (uintptr_t)e->buf + 100 * (uint32_t)i, 7 + (uint32_t)i,
					   e->mr->lkey };
		in[sges - 1 - i] = (struct ibv_sge){ (uintptr_t)e->buf + 32768 + 64 * (uint32_t)i,
						     7 + (uint32_t)i, e->mr->lkey };
	}
	for (int i = 0; i < 32768; i++)
		e->buf[i] = (uint8_t)(i * 7 + 3);
	memset(e->buf + 32768, 0, 32768);
	if (ibv_post_recv(b, &rwr, &rbad) || ibv_post_send(a, &swr, &sbad) ||
	    wait_wc(e->cq, &wc[0], 2000) != IBV_WC_SUCCESS ||
	    wait_wc(e->cq, &wc[1], 2000) != IBV_WC_SUCCESS)
		return false;
	sent_len = gathered(out, sges, sent);
	return gathered(in, sges, got) == sent_len && memcmp(sent, got, sent_len) == 0 &&
	       (wc[0].byte_len == sent_len || wc[1].byte_len == sent_len);
}

/* Queues as large as rxe's (ROCEV2-MORE.md section 6): the device's limits can be used
 * whole, one past any of them is EINVAL, and a SEND of 32 SGEs into a receive of 32 lands
 * byte for byte. */
static void case_limits(void)
{
	struct ibv_device_attr da;
	struct ibv_qp_init_attr big;
	struct ibv_qp *qp, *a = NULL, *b = NULL;
	struct end e = { 0 };
	bool ok = ibv_query_device(ctx, &da) == 0;

	CHECK("limits: at least rxe's: 2^20 WRs a queue and an SRQ, 32 SGEs, 32767 CQEs",
	      ok && da.max_qp_wr >= 1 << 20 && da.max_srq_wr >= 1 << 20 && da.max_sge >= 32 &&
	      da.max_cqe >= 32767);
	e.cq = ibv_create_cq(ctx, da.max_cqe, NULL, NULL, 0);
	CHECK("limits: a CQ of max_cqe entries", e.cq != NULL);
	if (!e.cq)
		return;
	big = (struct ibv_qp_init_attr){
		.send_cq = e.cq, .recv_cq = e.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)da.max_qp_wr, .max_recv_wr = (uint32_t)da.max_qp_wr,
			 .max_send_sge = (uint32_t)da.max_sge, .max_recv_sge = (uint32_t)da.max_sge,
			 .max_inline_data = 512 },
	};
	qp = ibv_create_qp(pd, &big);
	CHECK("limits: an RC QP of max_qp_wr WRs and max_sge SGEs each way, 512 bytes inline",
	      qp && big.cap.max_send_wr >= (uint32_t)da.max_qp_wr &&
	      big.cap.max_send_sge >= 32 && big.cap.max_inline_data >= 512);
	if (qp)
		ibv_destroy_qp(qp);
	big.cap.max_send_wr = (uint32_t)da.max_qp_wr + 1;
	CHECK("limits: max_send_wr one past max_qp_wr is EINVAL",
	      !ibv_create_qp(pd, &big) && errno == EINVAL);
	big.cap.max_send_wr = 4;
	big.cap.max_inline_data = 513;
	CHECK("limits: 513 bytes inline is EINVAL", !ibv_create_qp(pd, &big) && errno == EINVAL);
	big.cap.max_inline_data = 0;
	big.cap.max_send_sge = (uint32_t)da.max_sge + 1;
	CHECK("limits: max_send_sge one past max_sge is EINVAL",
	      !ibv_create_qp(pd, &big) && errno == EINVAL);
	e.buf = aligned_alloc(4096, BUF);
	e.mr = e.buf ? ibv_reg_mr(pd, e.buf, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
	CHECK("limits: a SEND of 32 SGEs lands in a receive of 32, byte for byte",
	      e.mr && make_wide_pair(e.cq, &a, &b, 32) && wide_send(&e, a, b, 32));
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	e.qp = NULL;
	ibv_destroy_cq(e.cq);
	if (e.mr)
		ibv_dereg_mr(e.mr);
	free(e.buf);
}

static void case_queue_depth(void)
{
	struct end a, b;
	struct ibv_sge sge;
	struct ibv_send_wr wr[64], *bad = NULL;
	struct ibv_wc wc[64];
	int err, done = 0;

	if (!make_end(&a, 4) || !make_end(&b, 4) || connect_qp(a.qp, b.qp->qp_num) ||
	    connect_qp(b.qp, a.qp->qp_num)) {
		report("depth: QPs of depth 4", false, strerror(errno));
		return;
	}
	sge = (struct ibv_sge){ .addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey };
	for (int i = 0; i < 64; i++)
		wr[i] = (struct ibv_send_wr){
			.wr_id = (uint64_t)i, .next = i < 63 ? &wr[i + 1] : NULL, .sg_list = &sge,
			.num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)b.buf, .rkey = b.mr->rkey },
		};
	err = ibv_post_send(a.qp, wr, &bad);
	CHECK("depth: posting 64 on a queue of 4 is ENOMEM with bad_wr inside the list",
	      err == ENOMEM && bad && bad > &wr[0] && bad <= &wr[63]);
	for (int tries = 0; tries < 5000 && done < bad - wr; tries++) {
		int n = ibv_poll_cq(a.cq, 64, wc);

		for (int i = 0; i < n; i++)
			done += wc[i].status == IBV_WC_SUCCESS;
		if (!n)
			usleep(1000);
	}
	CHECK("depth: every WRITE before bad_wr completes", done == bad - wr);
	free_end(&a);
	free_end(&b);
}

/* The peer is a child process, killed with SIGKILL: our WRITE runs out of retries. */
static void case_killed_peer(void)
{
	struct end a;
	struct ibv_wc wc;
	int to_parent[2], to_child[2];
	uint32_t qpn = 0;
	pid_t child;

	if (!make_end(&a, DEPTH) || pipe(to_parent) || pipe(to_child))
		{ report("killed peer: setup", false, strerror(errno)); return; }
	child = fork();
	if (child == 0) {
		close(to_parent[0]);
		close(to_child[1]);
	}
	if (child > 0) {        /* a child that dies early gives EOF, not a wait */
		close(to_parent[1]);
		close(to_child[0]);
	}
	if (child == 0) {
		struct ibv_device **list = ibv_get_device_list(NULL);
		struct ibv_context *c2 = list && list[0] ? ibv_open_device(list[0]) : NULL;
		struct end b;

		ctx = c2;
		pd = c2 ? ibv_alloc_pd(c2) : NULL;
		if (!pd || !make_end(&b, DEPTH))
			_exit(1);
		qpn = b.qp->qp_num;
		if (write(to_parent[1], &qpn, sizeof(qpn)) != sizeof(qpn) ||
		    read(to_child[0], &qpn, sizeof(qpn)) != sizeof(qpn) ||
		    connect_qp(b.qp, qpn))
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(to_parent[0], &qpn, sizeof(qpn)) != sizeof(qpn) || connect_qp(a.qp, qpn) ||
	    write(to_child[1], &a.qp->qp_num, sizeof(qpn)) != sizeof(qpn)) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		{ report("killed peer: connected to a child's QP", false, "setup failed"); return; }
	}
	usleep(200000);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	usleep(100000);
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, 0, 0, 9);
	CHECK("killed peer: the WRITE completes with IBV_WC_RETRY_EXC_ERR",
	      wait_wc(a.cq, &wc, 20000) == IBV_WC_RETRY_EXC_ERR);
	free_end(&a);
}

/* ibv_reg_mr_iova2: the peer addresses the buffer by its iova, not its address. */
static void case_iova(void)
{
	struct end a, b;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *target = aligned_alloc(4096, BUF);
	const uint64_t iova = 0x100000;

	if (!target || !make_end(&a, DEPTH) || !make_end(&b, DEPTH) ||
	    connect_qp(a.qp, b.qp->qp_num) || connect_qp(b.qp, a.qp->qp_num))
		{ report("iova: setup", false, strerror(errno)); return; }
	memset(target, 0, BUF);
	mr = ibv_reg_mr_iova2(pd, target, BUF, iova, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE);
	memset(a.buf, 0x3c, 256);
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 256, iova + 1024, mr ? mr->rkey : 0, 1);
	CHECK("iova: a WRITE to iova + 1024 completes", mr && wait_wc(a.cq, &wc, 5000) == 0);
	CHECK("iova: ... and lands at address + 1024", target[1024] == 0x3c &&
	      target[1279] == 0x3c && target[1023] == 0 && target[1280] == 0);
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 256, (uintptr_t)target, mr ? mr->rkey : 0, 2);
	CHECK("iova: a WRITE to the address itself is out of the MR",
	      wait_wc(a.cq, &wc, 5000) == IBV_WC_REM_ACCESS_ERR);
	ibv_dereg_mr(mr);
	free_end(&a);
	free_end(&b);
	free(target);
}

/* A poster thread and a poller thread on one QP and CQ. */
#define THREAD_WRITES 20000
struct threads {
	struct end a, b;
	int completed;
};

static void *poller(void *arg)
{
	struct threads *t = arg;
	struct ibv_wc wc[16];

	for (int idle = 0; t->completed < THREAD_WRITES && idle < 20000000; idle++) {
		int n = ibv_poll_cq(t->a.cq, 16, wc);

		for (int i = 0; i < n; i++)
			t->completed += wc[i].status == IBV_WC_SUCCESS;
		if (n)
			idle = 0;
	}
	return NULL;
}

static void case_threads(void)
{
	struct threads t = { .completed = 0 };
	pthread_t th;
	int posted = 0;

	if (!make_end(&t.a, 256) || !make_end(&t.b, 256) || connect_qp(t.a.qp, t.b.qp->qp_num) ||
	    connect_qp(t.b.qp, t.a.qp->qp_num))
		{ report("threads: setup", false, strerror(errno)); return; }
	pthread_create(&th, NULL, poller, &t);
	while (posted < THREAD_WRITES) {
		int inflight = posted - __atomic_load_n(&t.completed, __ATOMIC_RELAXED);

		if (inflight < 200 && post_write(t.a.qp, (uintptr_t)t.a.buf, t.a.mr->lkey, 64,
						 (uintptr_t)t.b.buf, t.b.mr->rkey, 0) == 0)
			posted++;
		else
			sched_yield();
	}
	pthread_join(th, NULL);
	CHECK("threads: 20,000 WRITEs posted by one thread, all completed in another",
	      t.completed == THREAD_WRITES);
	free_end(&t.a);
	free_end(&t.b);
}

/* An SRQ's limit reached, told through ibv_get_async_event. */
static void case_srq_limit(void)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq_attr limit = { .srq_limit = 4 };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 16, 0, 1, 0, 0 } };
	struct ibv_async_event ev = { .event_type = IBV_EVENT_COMM_EST };
	struct end a, b;
	struct ibv_srq *srq;
	struct ibv_wc wc;
	int flags = fcntl(ctx->async_fd, F_GETFL), got = -1;

	srq = ibv_create_srq(pd, &init);
	if (!srq || ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT) || !make_end(&a, DEPTH) ||
	    !make_end(&b, DEPTH))
		{ report("srq limit: setup", false, strerror(errno)); return; }
	qa.send_cq = qa.recv_cq = b.cq;
	qa.srq = srq;
	ibv_destroy_qp(b.qp);
	b.qp = ibv_create_qp(pd, &qa);
	if (!b.qp || connect_qp(a.qp, b.qp->qp_num) || connect_qp(b.qp, a.qp->qp_num))
		{ report("srq limit: a QP on the SRQ", false, strerror(errno)); return; }
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sge = { (uintptr_t)b.buf + 64 * (unsigned)i, 64, b.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;

		ibv_post_srq_recv(srq, &wr, &bad);
	}
	for (int i = 0; i < 5; i++) {
		struct ibv_sge sge = { (uintptr_t)a.buf, 64, a.mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		ibv_post_send(a.qp, &wr, &bad);
		wait_wc(a.cq, &wc, 5000);
	}
	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
	for (int tries = 0; tries < 500 && got != 0; tries++) {
		got = ibv_get_async_event(ctx, &ev);
		if (got)
			usleep(10000);
	}
	fcntl(ctx->async_fd, F_SETFL, flags);
	CHECK("srq limit: IBV_EVENT_SRQ_LIMIT_REACHED for the SRQ, 3 WQEs left of a limit of 4",
	      got == 0 && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq);
	if (got == 0)
		ibv_ack_async_event(&ev);
	free_end(&a);
	free_end(&b);
	CHECK("srq limit: the SRQ is destroyed once its QP is", ibv_destroy_srq(srq) == 0);
}

/* One SEND from a to b, received (on b's RQ or its SRQ) and acknowledged; b's receive
 * completion is left unpolled. */
static bool send_one_unpolled(struct end *a, struct end *b, struct ibv_srq *srq)
{
	struct ibv_sge rs = { (uintptr_t)b->buf, 64, b->mr->lkey }, ss = { (uintptr_t)a->buf, 64,
									   a->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_wc wc;

	if (srq ? ibv_post_srq_recv(srq, &rwr, &rbad) : ibv_post_recv(b->qp, &rwr, &rbad))
		return false;
	return ibv_post_send(a->qp, &swr, &sbad) == 0 && wait_wc(a->cq, &wc, 5000) == 0;
}

static int to_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* A QP modified to RESET drops its completions not yet polled, as libmlx5 does, except a
 * QP with an SRQ its receives' (their WQEs left the SRQ: the completion is all that gives
 * the buffer back). */
static void case_reset_forgets(void)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 16, 0, 1, 0, 0 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &init);
	struct end a, b;
	struct ibv_wc wc;

	if (!srq || !make_end(&a, DEPTH) || !make_end(&b, DEPTH) ||
	    connect_qp(a.qp, b.qp->qp_num) || connect_qp(b.qp, a.qp->qp_num))
		{ report("reset: setup", false, strerror(errno)); return; }
	CHECK("reset: a QP's unpolled receive completion is gone after RESET",
	      send_one_unpolled(&a, &b, NULL) && to_reset(b.qp) == 0 &&
	      ibv_poll_cq(b.cq, 1, &wc) == 0);
	qa.send_cq = qa.recv_cq = b.cq;
	qa.srq = srq;
	ibv_destroy_qp(b.qp);
	b.qp = ibv_create_qp(pd, &qa);
	if (!b.qp || to_reset(a.qp) || connect_qp(a.qp, b.qp->qp_num) ||
	    connect_qp(b.qp, a.qp->qp_num))
		{ report("reset: a QP on an SRQ", false, strerror(errno)); return; }
	CHECK("reset: a QP on an SRQ keeps its unpolled receive completion through RESET",
	      send_one_unpolled(&a, &b, srq) && to_reset(b.qp) == 0 &&
	      wait_wc(b.cq, &wc, 1000) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.wr_id == 7);
	free_end(&a);
	free_end(&b);
	ibv_destroy_srq(srq);
}

/* After ibv_fork_init (case_async), a child does not get registered pages; once the MR is
 * gone it does again. */
static int child_reads(volatile const uint8_t *p)
{
	int status;
	pid_t child = fork();

	if (child == 0) {
		/* a preloaded sanitizer would report the fault and exit instead */
		sigaction(SIGSEGV, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
		_exit(p[0] == 0x5a ? 0 : 3);
	}
	waitpid(child, &status, 0);
	return status;
}

/* The page, still backed by memory shared with the daemon, is the child's own copy. */
static int child_writes(uint8_t *p)
{
	int status;
	pid_t child = fork();

	if (child == 0) {
		memset(p, 0x77, 4096);
		free(malloc(100000));   /* the child's heap is its own too */
		_exit(p[4095] == 0x77 ? 0 : 3);
	}
	waitpid(child, &status, 0);
	return status;
}

static void case_fork(void)
{
	uint8_t *buf = aligned_alloc(4096, 3 * 4096);
	struct ibv_mr *mr;
	int status;

	memset(buf, 0x5a, 3 * 4096);
	mr = ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	status = child_reads(buf + 4096);
	CHECK("fork: a child cannot touch a registered page (SIGSEGV)",
	      mr && WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
	CHECK("fork: ... but the pages beside it", child_reads(buf) == 0 &&
	      child_reads(buf + 8192) == 0);
	ibv_dereg_mr(mr);
	status = child_reads(buf + 4096);
	CHECK("fork: after ibv_dereg_mr a child reads the page again",
	      WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK("fork: a child writing to a once-registered page writes its own copy",
	      child_writes(buf + 4096) == 0 && buf[4096] == 0x5a && buf[8191] == 0x5a);
	free(buf);
}

/* --events: the port's state changes and the daemon's end, as the test script causes them;
 * polled: each taken only once poll() says async_fd has one, without blocking in the call. */
static int watch_events(bool polled)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	if (polled)
		fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (polled && poll(&p, 1, -1) < 0) {
			printf("FAIL events: poll: %s\n", strerror(errno));
			return 1;
		}
		if (ibv_get_async_event(ctx, &ev)) {
			if (polled && errno == EAGAIN)
				continue;
			printf("FAIL events: ibv_get_async_event: %s\n", strerror(errno));
			return 1;
		}
		printf("event %s\n", ibv_event_type_str(ev.event_type));
		fflush(stdout);
		ibv_ack_async_event(&ev);
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			return 0;
	}
}

/* e's QP and CQ made again with the CQ on ch; false (and a FAIL for what) if they cannot be */
static bool end_on_channel(struct end *e, struct end *peer, struct ibv_comp_channel *ch,
			   const char *what)
{
	ibv_destroy_qp(e->qp);
	ibv_destroy_cq(e->cq);
	e->cq = ibv_create_cq(ctx, 4 * DEPTH, NULL, ch, 0);
	e->qp = e->cq ? make_qp(e->cq, DEPTH) : NULL;
	if (e->qp && !connect_qp(e->qp, peer->qp->qp_num) && !connect_qp(peer->qp, e->qp->qp_num))
		return true;
	report(what, false, strerror(errno));
	return false;
}

/* A channel and two connected ends, on's CQ on the channel; NULL (and a FAIL for what's
 * setup) if they cannot be made. */
static struct ibv_comp_channel *ends_on_channel(struct end *on, struct end *other,
						const char *what)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	char name[64];

	snprintf(name, sizeof(name), "%s: setup", what);
	if (!ch || !make_end(on, DEPTH) || !make_end(other, DEPTH)) {
		report(name, false, strerror(errno));
		return NULL;
	}
	snprintf(name, sizeof(name), "%s: QPs", what);
	return end_on_channel(on, other, ch, name) ? ch : NULL;
}

/* A channel with two CQs, one armed: completions on the other must not leave the channel
 * readable (a program polling its fd would spin), nor wake a nonblocking get. */
static void case_channel(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *armed = ch ? ibv_create_cq(ctx, 4, NULL, ch, 0) : NULL;
	struct end a, b;
	struct ibv_cq *got_cq = NULL;
	struct ibv_wc wc;
	void *got_ctx;
	int flags;

	if (!armed || !make_end(&a, DEPTH) || !make_end(&b, DEPTH))
		{ report("channel: setup", false, strerror(errno)); return; }
	/* a's CQ joins the channel too */
	if (!end_on_channel(&a, &b, ch, "channel: QPs"))
		return;
	ibv_req_notify_cq(armed, 0);
	flags = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK);
	for (int i = 0; i < 8; i++) {
		post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, (uintptr_t)b.buf, b.mr->rkey, 1);
		wait_wc(a.cq, &wc, 5000);
	}
	errno = 0;
	CHECK("channel: completions on an unarmed CQ give EAGAIN, not an event",
	      ibv_get_cq_event(ch, &got_cq, &got_ctx) == -1 && errno == EAGAIN);
	CHECK("channel: ... and leave the channel's fd not readable",
	      poll(&(struct pollfd){ .fd = ch->fd, .events = POLLIN }, 1, 0) == 0);
	fcntl(ch->fd, F_SETFL, flags);
	free_end(&a);
	free_end(&b);
	CHECK("channel: destroying a channel with a CQ on it is EBUSY",
	      ibv_destroy_comp_channel(ch) == EBUSY);
	ibv_destroy_cq(armed);
	CHECK("channel: destroyed once its CQs are", ibv_destroy_comp_channel(ch) == 0);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* ibv_get_cq_event on a blocking channel, given up after ms by a signal whose handler
 * lacks SA_RESTART (the call then fails with EINTR, as read() of a kernel channel does):
 * whether it returned an event of cq. */
static bool get_event_within(struct ibv_comp_channel *ch, struct ibv_cq *cq, unsigned ms)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval t = { .it_value = { .tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000 } };
	struct itimerval off = { 0 };
	struct ibv_cq *got = NULL;
	void *got_ctx;
	int rc;

	sigaction(SIGALRM, &sa, &old);
	setitimer(ITIMER_REAL, &t, NULL);
	rc = ibv_get_cq_event(ch, &got, &got_ctx);
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	if (rc == 0)
		ibv_ack_cq_events(got, 1);
	return rc == 0 && got == cq;
}

static bool fd_readable(int fd, int ms)
{
	return poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, ms) == 1;
}

/* An event loop as tgtd's iSER driver runs it: poll the channel's fd, then a blocking
 * ibv_get_cq_event, re-arm, drain the CQ. The fd is readable exactly when an event is
 * queued, as a kernel channel's is: after the drain it stays quiet, so the next blocking
 * get is never called for nothing (rocemu's fd stayed readable there, and tgtd hung). */
static void case_channel_loop(void)
{
	struct end a, b;
	struct ibv_comp_channel *ch = ends_on_channel(&a, &b, "channel loop");
	struct ibv_wc wc;
	int got = 0, quiet = 0;

	if (!ch)
		return;
	ibv_req_notify_cq(a.cq, 0);
	for (int round = 0; round < 20; round++) {
		post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, (uintptr_t)b.buf, b.mr->rkey,
			   round);
		if (!fd_readable(ch->fd, 5000) || !get_event_within(ch, a.cq, 2000))
			break;
		ibv_req_notify_cq(a.cq, 0);
		while (ibv_poll_cq(a.cq, 1, &wc) == 1)
			got += wc.status == IBV_WC_SUCCESS;
		quiet += !fd_readable(ch->fd, 0);
	}
	CHECK("channel loop: 20 events, each readable on the fd and taken by a blocking get",
	      got == 20);
	CHECK("channel loop: ... and the fd quiet after each was taken and the CQ drained",
	      quiet == 20);
	free_end(&a);
	free_end(&b);
	ibv_destroy_comp_channel(ch);
}

static bool send_flagged(struct end *a, struct end *b, unsigned flags)
{
	struct ibv_sge rs = { (uintptr_t)b->buf, 64, b->mr->lkey }, ss = { (uintptr_t)a->buf, 64,
									   a->mr->lkey };
	struct ibv_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED | flags }, *sbad;
	struct ibv_wc wc;

	return ibv_post_recv(b->qp, &rwr, &rbad) == 0 && ibv_post_send(a->qp, &swr, &sbad) == 0 &&
	       wait_wc(a->cq, &wc, 5000) == 0;
}

/* A CQ armed for solicited events only: a message sent without IBV_SEND_SOLICITED leaves
 * the channel's fd quiet; a solicited one makes it readable, and the event is there. */
static void case_channel_solicited(void)
{
	struct end a, b;
	struct ibv_comp_channel *ch = ends_on_channel(&b, &a, "channel solicited");
	bool quiet, readable;

	if (!ch)
		return;
	ibv_req_notify_cq(b.cq, 1);
	quiet = send_flagged(&a, &b, 0) && !fd_readable(ch->fd, 200);
	readable = send_flagged(&a, &b, IBV_SEND_SOLICITED) && fd_readable(ch->fd, 5000);
	CHECK("channel solicited: an unsolicited message leaves the fd quiet", quiet);
	CHECK("channel solicited: a solicited one makes it readable, with its event",
	      readable && get_event_within(ch, b.cq, 2000));
	free_end(&a);
	free_end(&b);
	ibv_destroy_comp_channel(ch);
}

/* A CQ armed, then resized (the daemon gives it a new ring): the arming holds, so the next
 * completion is an event on the channel, as a kernel CQ's arming survives ibv_resize_cq. */
static void case_channel_resize(void)
{
	struct end a, b;
	struct ibv_comp_channel *ch = ends_on_channel(&a, &b, "channel resize");
	struct ibv_wc wc;
	bool resized, evented;

	if (!ch)
		return;
	ibv_req_notify_cq(a.cq, 0);
	resized = ibv_resize_cq(a.cq, 16 * DEPTH) == 0 && a.cq->cqe >= 16 * DEPTH;
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, (uintptr_t)b.buf, b.mr->rkey, 1);
	evented = fd_readable(ch->fd, 5000) && get_event_within(ch, a.cq, 2000);
	CHECK("channel resize: an armed CQ resized to more entries", resized);
	CHECK("channel resize: ... stays armed: its next completion is an event on the channel",
	      evented && ibv_poll_cq(a.cq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
	free_end(&a);
	free_end(&b);
	ibv_destroy_comp_channel(ch);
}

/* A CQ too small for its completions: each one lost is an IBV_EVENT_CQ_ERR on the
 * context's async_fd, about that CQ, as rxe raises them (7 for 8 WRITEs into its CQ of
 * one entry); the completions it kept are still there. */
static void case_cq_overflow(void)
{
	struct ibv_cq *tiny = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	struct ibv_qp *x = tiny ? make_qp(tiny, DEPTH) : NULL, *y = tiny ? make_qp(tiny, DEPTH) : NULL;
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;
	int flags = fcntl(ctx->async_fd, F_GETFL), events = 0, kept = 0, others = 0;
	struct ibv_async_event ev;
	struct ibv_wc wc;

	if (!mr || !x || !y || connect_qp(x, y->qp_num) || connect_qp(y, x->qp_num))
		{ report("cq overflow: setup", false, strerror(errno)); return; }
	for (int i = 0; i < 8; i++)
		post_write(x, (uintptr_t)buf, mr->lkey, 8, (uintptr_t)buf + 64, mr->rkey, i);
	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
	while (fd_readable(ctx->async_fd, events ? 500 : 5000) && ibv_get_async_event(ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny)
			events++;
		else
			others++;
		ibv_ack_async_event(&ev);
	}
	fcntl(ctx->async_fd, F_SETFL, flags);
	while (ibv_poll_cq(tiny, 1, &wc) == 1)
		kept++;
	CHECK("cq overflow: each lost completion an IBV_EVENT_CQ_ERR about the CQ",
	      events > 0 && others == 0 && events + kept == 8);
	ibv_destroy_qp(x);
	ibv_destroy_qp(y);
	CHECK("cq overflow: the CQ is destroyed once its events are acknowledged",
	      ibv_destroy_cq(tiny) == 0);
	ibv_dereg_mr(mr);
	free(buf);
}

/* An extended CQ read with ibv_start_poll / ibv_next_poll / ibv_end_poll, once stopped
 * after the first completion: every completion is read once, in order, with its fields. */
static void case_cq_ex(void)
{
	struct ibv_cq_init_attr_ex attr = { .cqe = 32, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
							    IBV_WC_EX_WITH_QP_NUM };
	struct ibv_cq_ex *cq_ex = ibv_create_cq_ex(ctx, &attr);
	struct ibv_poll_cq_attr poll = { 0 };
	struct end a, b;
	uint64_t seen[8];
	int n = 0, err, tries = 0;
	bool fields_ok = true;

	if (!cq_ex || !make_end(&a, DEPTH) || !make_end(&b, DEPTH))
		{ report("cq_ex: setup", false, strerror(errno)); return; }
	ibv_destroy_qp(a.qp);
	a.qp = make_qp(ibv_cq_ex_to_cq(cq_ex), DEPTH);
	if (!a.qp || connect_qp(a.qp, b.qp->qp_num) || connect_qp(b.qp, a.qp->qp_num))
		{ report("cq_ex: QPs", false, strerror(errno)); return; }
	for (int i = 0; i < 5; i++)
		post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 100, (uintptr_t)b.buf, b.mr->rkey,
			   (uint64_t)i);
	while (n < 5 && tries++ < 5000) {
		err = ibv_start_poll(cq_ex, &poll);
		if (err == ENOENT) {
			usleep(1000);
			continue;
		}
		/* the first round reads one and stops; later ones read all there is */
		do {
			fields_ok &= cq_ex->status == IBV_WC_SUCCESS &&
				     ibv_wc_read_opcode(cq_ex) == IBV_WC_RDMA_WRITE &&
				     ibv_wc_read_qp_num(cq_ex) == a.qp->qp_num;
			seen[n++] = cq_ex->wr_id;
		} while (n > 1 && n < 8 && ibv_next_poll(cq_ex) == 0);
		ibv_end_poll(cq_ex);
	}
	CHECK("cq_ex: five WRITEs read through start/next/end_poll, once each, in order",
	      n == 5 && seen[0] == 0 && seen[1] == 1 && seen[2] == 2 && seen[3] == 3 &&
	      seen[4] == 4);
	CHECK("cq_ex: each with status, opcode and QP number", fields_ok);
	free_end(&a);
	free_end(&b);
	CHECK("cq_ex: destroyed once its QP is", ibv_destroy_cq(ibv_cq_ex_to_cq(cq_ex)) == 0);
}

static void case_async(void)
{
	struct ibv_async_event ev;
	int flags = fcntl(ctx->async_fd, F_GETFL);

	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
	errno = 0;
	CHECK("async: nothing pending gives EAGAIN on a nonblocking async_fd",
	      ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN);
	fcntl(ctx->async_fd, F_SETFL, flags);
	CHECK("fork: ibv_is_fork_initialized says rocemu does not need it",
	      ibv_is_fork_initialized() == IBV_FORK_UNNEEDED && ibv_fork_init() == 0);
}

/* Memory windows through the verbs calls, on two QPs of this device: what the device says,
 * the refusals made at the call, a bind the MR does not allow (IBV_WC_MW_BIND_ERR), the MR
 * kept while a window is bound, and a WRITE through a window past its end refused with the
 * target unchanged. */
static void case_mw(void)
{
	struct ibv_device_attr attr;
	struct end a, b;
	struct ibv_mr *bindable;
	struct ibv_mw *mw1, *mw2;
	struct ibv_wc wc;
	uint8_t before[BUF];
	struct ibv_mw_bind bind = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED };
	int st;

	CHECK("mw: the device reports memory windows of type 1 and 2B",
	      ibv_query_device(ctx, &attr) == 0 && (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	      (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && attr.max_mw > 0);
	if (!make_end(&a, DEPTH) || !make_end(&b, DEPTH) || connect_qp(a.qp, b.qp->qp_num) ||
	    connect_qp(b.qp, a.qp->qp_num)) {
		report("mw: two QPs of one device connected", false, strerror(errno));
		return;
	}
	bindable = ibv_reg_mr(pd, b.buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK("mw: an MR with MW_BIND and a window of each type", bindable && mw1 && mw2);
	if (!bindable || !mw1 || !mw2)
		goto out;
	CHECK("mw: a window's key is no MR's", mw1->rkey >> 8 != bindable->rkey >> 8 &&
	      mw2->rkey >> 8 != mw1->rkey >> 8);
	bind.bind_info = (struct ibv_mw_bind_info){ .mr = bindable, .addr = (uintptr_t)b.buf,
						    .length = 4096,
						    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK("mw: ibv_bind_mw of a type 2 window is EINVAL",
	      ibv_bind_mw(b.qp, mw2, &bind) == EINVAL);
	bind.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	CHECK("mw: a zero-based type 1 window is EINVAL", ibv_bind_mw(b.qp, mw1, &bind) == EINVAL);
	bind.bind_info.mw_access_flags &= ~(unsigned)IBV_ACCESS_ZERO_BASED;
	CHECK("mw: ibv_bind_mw posts", ibv_bind_mw(b.qp, mw1, &bind) == 0);
	st = wait_wc(b.cq, &wc, 5000);
	CHECK("mw: ... and completes as IBV_WC_BIND_MW", st == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 1);
	errno = 0;
	CHECK("mw: the MR cannot be deregistered while the window is bound",
	      ibv_dereg_mr(bindable) == EINVAL);
	memset(a.buf, 0x5a, 64);
	memcpy(before, b.buf, BUF);
	post_write(a.qp, (uintptr_t)a.buf, a.mr->lkey, 64, (uintptr_t)b.buf + 4096 - 32,
		   mw1->rkey, 2);
	st = wait_wc(a.cq, &wc, 5000);
	CHECK("mw: a WRITE past the window is IBV_WC_REM_ACCESS_ERR", st == IBV_WC_REM_ACCESS_ERR);
	CHECK("mw: ... and the target is unchanged", memcmp(before, b.buf, BUF) == 0);
	/* a.qp and b.qp are in error now: the next bind goes on a fresh QP */
	free_end(&a);
	if (!make_end(&a, DEPTH) || connect_qp(a.qp, a.qp->qp_num))
		goto out;
	bind.bind_info.mr = a.mr;   /* no MW_BIND */
	bind.wr_id = 3;
	CHECK("mw: a bind to an MR without MW_BIND posts", ibv_bind_mw(a.qp, mw1, &bind) == 0);
	st = wait_wc(a.cq, &wc, 5000);
	CHECK("mw: ... and completes with IBV_WC_MW_BIND_ERR", st == IBV_WC_MW_BIND_ERR);
	CHECK("mw: ibv_dealloc_mw of a bound window", ibv_dealloc_mw(mw1) == 0);
	mw1 = NULL;
	CHECK("mw: the MR deregisters once its window is gone", ibv_dereg_mr(bindable) == 0);
	bindable = NULL;
out:
	if (mw1)
		ibv_dealloc_mw(mw1);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (bindable)
		ibv_dereg_mr(bindable);
	free_end(&a);
	free_end(&b);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct in_addr addr;

	bool polled = argc == 3 && strcmp(argv[1], "--events-polled") == 0;
	bool events = polled || (argc == 3 && strcmp(argv[1], "--events") == 0);
	const char *silent = !events && argc == 3 ? argv[2] : NULL;
	struct in_addr unused;

	if ((argc != 2 && argc != 3) || inet_pton(AF_INET, argv[events ? 2 : 1], &addr) != 1 ||
	    (silent && inet_pton(AF_INET, silent, &unused) != 1)) {
		fprintf(stderr, "usage: ibv_abuse IPV4 [SILENT_IPV4]   (the address of the daemon's "
			"device; one on its link that nobody answers)\n"
			"       ibv_abuse --events[-polled] IPV4\n");
		return 2;
	}
	list = ibv_get_device_list(NULL);
	device = list ? list[0] : NULL;
	ctx = device ? ibv_open_device(device) : NULL;
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd || ibv_query_gid(ctx, 1, 0, &gid)) {
		printf("FAIL setup: no device, context or PD: %s\n", strerror(errno));
		return 1;
	}
	if (events)
		return watch_events(polled);
	CHECK("setup: GID 0 is the daemon's address, IPv4-mapped",
	      memcmp(&gid.raw[12], &addr, 4) == 0 && gid.raw[10] == 0xff && gid.raw[11] == 0xff);
	case_gid_table();
	case_unsupported();
	case_bad_arguments();
	case_ud();
	case_uc();
	case_keys();
	case_mw();
	case_queue_depth();
	case_limits();
	case_resize_cq();
	case_iova();
	case_threads();
	case_async();
	case_srq_limit();
	case_reset_forgets();
	case_channel();
	case_channel_loop();
	case_channel_resize();
	case_channel_solicited();
	case_cq_overflow();
	case_cq_ex();
	case_fork();
	case_killed_peer();
	if (silent)
		case_silent_peer(silent);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
