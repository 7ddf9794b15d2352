/* UC between two hosts, written against <infiniband/verbs.h> alone (built as ud_peer is).
 * The client sends MESSAGES messages over one UC QP, SEND WITH IMMEDIATE and RDMA WRITE
 * WITH IMMEDIATE in turn, of sizes from 1 byte to 8 packets at a 1024-byte path MTU, the
 * immediate naming the message. Every send must complete successfully, lost or not: UC
 * acknowledges nothing. The server checks every receive completion: its status, that it
 * names a message not seen before, its opcode and byte_len, every byte placed (a SEND's in
 * its receive buffer, a WRITE's at the message's slot of the target MR), and that the
 * receives complete in the order posted: a message that lost a packet consumes none.
 * Without -l every message must arrive; with -l (the test drops packets on the way) some
 * must be lost and some arrive, and the QP must still be in RTS. Then the client, asleep
 * on its completion channel, must be woken by a 1 MiB WRITE's completion. Nothing waits
 * for longer than DEADLINE_S, so a loss can never hang it.
 *   uc_peer [-x GID_INDEX] [-l] server
 *   uc_peer [-x GID_INDEX] [-l] client SERVER_ADDRESS
 * One line per check, "ok NAME" or "FAIL NAME: why"; exit 0 when all passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "test/peer_link.h"

#define PORT 18519
#define MESSAGES 200
#define SLOT 8192
#define SEND_DEPTH 32
#define QUIET_MS 1000            /* the server stops waiting this long after the last */
#define DEADLINE_S 30
#define BIG_WRITE (1u << 20)     /* many packets: the daemon's scheduler sends the last */
/* A 1 MiB WRITE takes milliseconds; a wakeup left to the daemon's next turn for some other
 * reason (its capture's flush, once a second) comes up to a second later. */
#define WAKE_MS 500

struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
};

static const uint32_t sizes[] = { 1, 700, 1024, 1500, 4000, SLOT };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *channel;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static uint8_t *buf;                  /* client: the messages; server: receives, then target */
static int gid_index;
static bool lossy;
static int sock = -1;
static int failures;

static void report(const char *name, bool ok, const char *why)
{
	printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why);
	fflush(stdout);
	failures += !ok;
}

static uint32_t size_of(uint32_t msg)
{
	return sizes[msg % (sizeof(sizes) / sizeof(sizes[0]))];
}

static bool is_write(uint32_t msg)
{
	return msg & 1;
}

static uint8_t pattern(uint32_t msg, uint32_t at)
{
	return (uint8_t)(msg * 31 + at * 7 + 1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void open_device(size_t bytes)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_UC,
					 .cap = { SEND_DEPTH, MESSAGES, 1, 1, 0 } };

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		peer_die("no RDMA device");
	ibv_free_device_list(list);
	buf = aligned_alloc(4096, bytes);
	if (!buf)
		peer_die("memory");
	memset(buf, 0, bytes);
	pd = ibv_alloc_pd(ctx);
	channel = pd ? ibv_create_comp_channel(ctx) : NULL;
	if (!channel || fcntl(channel->fd, F_SETFL, O_NONBLOCK))
		peer_die("ibv_create_comp_channel");
	cq = ibv_create_cq(ctx, MESSAGES + SEND_DEPTH, NULL, channel, 0);
	mr = cq ? ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE) : NULL;
	init.send_cq = init.recv_cq = cq;
	qp = mr ? ibv_create_qp(pd, &init) : NULL;
	if (!qp)
		peer_die("ibv_create_qp(UC)");
}

static struct info my_info(uint32_t psn)
{
	struct info in = { .qpn = qp->qp_num, .psn = psn, .rkey = mr->rkey,
			   .addr = (uintptr_t)buf };

	if (ibv_query_gid(ctx, 1, gid_index, &in.gid))
		peer_die("ibv_query_gid");
	return in;
}

/* RESET to RTS with UC's attributes: no READ, atomic, ACK or retry ones. */
static void connect_uc(const struct info *peer, uint32_t sq_psn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		peer_die("to INIT");
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .dest_qp_num = peer->qpn, .rq_psn = peer->psn,
		.path_mtu = IBV_MTU_1024,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->gid, .sgid_index = (uint8_t)gid_index,
				      .hop_limit = 64 } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN))
		peer_die("to RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = sq_psn };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		peer_die("to RTS");
}

/* ---- client ---- */

/* UC has no READ and no atomics: both are refused when posted, and nothing is queued. */
static void check_refused_opcodes(void)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_READ,
						  IBV_WR_ATOMIC_FETCH_AND_ADD };
	struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };

	for (unsigned i = 0; i < 2; i++) {
		struct ibv_send_wr wr = { .opcode = ops[i], .sg_list = &sge, .num_sge = 1,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { (uintptr_t)buf, mr->rkey } }, *bad = NULL;
		int rc = ibv_post_send(qp, &wr, &bad);
		char why[64];

		snprintf(why, sizeof(why), "ibv_post_send returned %d, bad %s", rc,
			 bad == &wr ? "set" : "not set");
		report(i ? "FETCH_ADD on a UC QP is EINVAL at post" :
			   "RDMA READ on a UC QP is EINVAL at post", rc == EINVAL && bad == &wr, why);
	}
}

static void post_message(uint32_t msg, const struct info *server)
{
	struct ibv_sge sge = { (uintptr_t)(buf + (size_t)msg * SLOT), size_of(msg), mr->lkey };
	struct ibv_send_wr wr = { .wr_id = msg, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(msg) }, *bad;

	wr.opcode = is_write(msg) ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND_WITH_IMM;
	/* the server's MR: MESSAGES receive slots, then a slot per message for WRITEs */
	wr.wr.rdma.remote_addr = server->addr + ((size_t)MESSAGES + msg) * SLOT;
	wr.wr.rdma.rkey = server->rkey;
	errno = ibv_post_send(qp, &wr, &bad);
	if (errno)
		peer_die("ibv_post_send");
}

/* Every message is posted, at most SEND_DEPTH at a time, and every one must complete
 * successfully and in order: a UC send completes as it leaves, lost on the way or not. */
static uint32_t send_all(const struct info *server)
{
	uint32_t posted = 0, done = 0, bad = 0;
	double deadline = now() + DEADLINE_S;
	struct ibv_wc wc;
	char why[96];

	while (done < MESSAGES && now() < deadline) {
		while (posted < MESSAGES && posted - done < SEND_DEPTH)
			post_message(posted++, server);
		while (ibv_poll_cq(cq, 1, &wc) == 1) {
			bad += wc.status != IBV_WC_SUCCESS || wc.wr_id != done ||
			       wc.opcode != (is_write(done) ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
			done++;
		}
	}
	snprintf(why, sizeof(why), "%u of %u completed, %u of them wrong", done, MESSAGES, bad);
	report("every UC send completes successfully, in order", done == MESSAGES && !bad, why);
	return done;
}

/* Waits up to WAKE_MS, asleep on the channel, for the armed CQ's event. */
static bool event_within_deadline(void)
{
	struct pollfd p = { .fd = channel->fd, .events = POLLIN };
	double deadline = now() + WAKE_MS / 1e3;
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (now() < deadline) {
		if (poll(&p, 1, (int)((deadline - now()) * 1e3) + 1) < 0 && errno != EINTR)
			return false;
		if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0) {
			ibv_ack_cq_events(ev_cq, 1);
			return ev_cq == cq;
		}
	}
	return false;
}

/* A UC message of many packets completes as its last packet leaves, which the daemon
 * sends from its scheduler rather than from the doorbell: a client asleep on its channel
 * must be woken for it though nothing else happens (nothing answers UC; the server is
 * done) to turn the daemon's loop again. The daemon once slept on with the wakeup. */
static void check_sleeper_woken(const struct info *server)
{
	struct ibv_sge sge = { (uintptr_t)buf, BIG_WRITE, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = MESSAGES, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;
	char why[64];
	bool woken;

	wr.wr.rdma.remote_addr = server->addr + (size_t)MESSAGES * SLOT;
	wr.wr.rdma.rkey = server->rkey;
	if (ibv_req_notify_cq(cq, 0))
		peer_die("ibv_req_notify_cq");
	errno = ibv_post_send(qp, &wr, &bad);
	if (errno)
		peer_die("ibv_post_send");
	woken = event_within_deadline();
	snprintf(why, sizeof(why), woken ? "woken, but no successful completion" :
		 "no completion event within %d ms", WAKE_MS);
	report("a 1 MiB WRITE's completion wakes the client asleep on its channel at once",
	       woken && ibv_poll_cq(cq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	       wc.wr_id == MESSAGES, why);
}

static void client(const char *host)
{
	struct info server, mine;
	uint32_t sent, got;
	uint8_t ready;

	open_device((size_t)MESSAGES * SLOT);
	for (uint32_t m = 0; m < MESSAGES; m++)
		for (uint32_t i = 0; i < size_of(m); i++)
			buf[(size_t)m * SLOT + i] = pattern(m, i);
	check_refused_opcodes();
	sock = peer_tcp_connect(host, PORT);
	peer_xfer(sock, false, &server, sizeof(server));   /* the server speaks first */
	mine = my_info(0x123456);
	peer_xfer(sock, true, &mine, sizeof(mine));
	connect_uc(&server, 0x123456);
	peer_xfer(sock, false, &ready, 1);
	sent = send_all(&server);
	peer_xfer(sock, true, &sent, sizeof(sent));
	peer_xfer(sock, false, &got, sizeof(got));
	printf("client: %u messages sent, the server took %u\n", sent, got);
	check_sleeper_woken(&server);
}

/* ---- server ---- */

static void post_receives(void)
{
	for (uint32_t r = 0; r < MESSAGES; r++) {
		struct ibv_sge sge = { (uintptr_t)(buf + (size_t)r * SLOT), SLOT, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = r, .sg_list = &sge, .num_sge = 1 }, *bad;

		errno = ibv_post_recv(qp, &wr, &bad);
		if (errno)
			peer_die("ibv_post_recv");
	}
}

/* What is wrong with one receive completion, or NULL. seen marks the messages taken. */
static const char *check_completion(const struct ibv_wc *wc, uint32_t nth, bool *seen)
{
	uint32_t msg = ntohl(wc->imm_data);
	const uint8_t *at;

	if (wc->status != IBV_WC_SUCCESS)
		return "status not IBV_WC_SUCCESS";
	if (!(wc->wc_flags & IBV_WC_WITH_IMM) || msg >= MESSAGES || seen[msg])
		return "no immediate, or one naming no message or one already taken";
	seen[msg] = true;
	if (wc->wr_id != nth)
		return "receives completed out of the order posted";
	if (wc->opcode != (is_write(msg) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV))
		return "opcode not the message's";
	if (wc->byte_len != size_of(msg))
		return "byte_len not the message's size";
	at = buf + (is_write(msg) ? (size_t)MESSAGES + msg : wc->wr_id) * SLOT;
	for (uint32_t i = 0; i < size_of(msg); i++)
		if (at[i] != pattern(msg, i))
			return "a byte differs from what was sent";
	return NULL;
}

/* Takes completions until the client has said it is done and none came for QUIET_MS. */
static uint32_t receive_all(uint32_t *wrong, const char **why)
{
	static bool seen[MESSAGES];
	double deadline = now() + DEADLINE_S, last = now();
	uint32_t got = 0, sent = 0;
	bool told = false;
	struct ibv_wc wc;

	*wrong = 0;
	while (now() < deadline && (!told || now() - last < QUIET_MS / 1000.0)) {
		if (ibv_poll_cq(cq, 1, &wc) == 1) {
			const char *bad = check_completion(&wc, got, seen);

			if (bad && !(*wrong)++)
				*why = bad;
			got++;
			last = now();
			continue;
		}
		if (!told) {
			struct timeval tv = { 0, 0 };
			fd_set fds;

			FD_ZERO(&fds);
			FD_SET(sock, &fds);
			if (select(sock + 1, &fds, NULL, NULL, &tv) == 1) {
				peer_xfer(sock, false, &sent, sizeof(sent));
				told = true;
				last = now();
			}
		}
		usleep(100);
	}
	return got;
}

static void server(void)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct info client_info, mine;
	uint32_t got, wrong;
	const char *why = "";
	char text[128];
	uint8_t ready = 1;

	open_device((size_t)2 * MESSAGES * SLOT);
	sock = peer_tcp_accept(PORT);
	mine = my_info(0x654321);
	peer_xfer(sock, true, &mine, sizeof(mine));
	peer_xfer(sock, false, &client_info, sizeof(client_info));
	connect_uc(&client_info, 0x654321);
	post_receives();              /* a QP in RESET takes none */
	peer_xfer(sock, true, &ready, 1);
	got = receive_all(&wrong, &why);
	snprintf(text, sizeof(text), "%u of %u completions wrong, the first: %s", wrong, got, why);
	report("every message taken is whole and exact, receives in order", wrong == 0, text);
	snprintf(text, sizeof(text), "%u of %u messages arrived", got, MESSAGES);
	if (lossy)
		report("some messages lost, the others taken", got > 0 && got < MESSAGES, text);
	else
		report("every message arrived", got == MESSAGES, text);
	printf("server: %s\n", text);
	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
		peer_die("ibv_query_qp");
	report("the UC QP is still in RTS", attr.qp_state == IBV_QPS_RTS &&
	       init.qp_type == IBV_QPT_UC, "it is not, or not a UC QP");
	peer_xfer(sock, true, &got, sizeof(got));
}

int main(int argc, char **argv)
{
	int opt;

	peer_prog = "uc_peer";
	while ((opt = getopt(argc, argv, "x:l")) != -1) {
		if (opt == 'x')
			gid_index = atoi(optarg);
		else if (opt == 'l')
			lossy = true;
		else
			return 2;
	}
	if (optind < argc && !strcmp(argv[optind], "server"))
		server();
	else if (optind + 1 < argc && !strcmp(argv[optind], "client"))
		client(argv[optind + 1]);
	else {
		fprintf(stderr, "usage: uc_peer [-x GID_INDEX] [-l] server | client ADDRESS\n");
		return 2;
	}
	return failures ? 1 : 0;
}
