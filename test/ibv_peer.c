/* One end of an RC connection, written against <infiniband/verbs.h> and linked against
 * libibverbs alone, so the same binary runs on the kernel's rxe and, under rocemu-run, on
 * rocemu (test/interop.sh). The client WRITEs into the server's buffer and the server
 * checks each message byte for byte, with canary bytes after it left untouched: sizes 1,
 * 4095, 4096, 4097 and 1 MiB from a send PSN just below the 24-bit wrap; then a wrong rkey
 * and an address one byte past the buffer, each of which must complete with
 * IBV_WC_REM_ACCESS_ERR and leave the target unchanged (the QPs are connected afresh
 * after each); WRITE WITH IMMEDIATE, once with the receive posted late so that RNR NAKs
 * come first; SEND of 0, 1, 4097 bytes and 1 MiB, SEND WITH IMMEDIATE, and a SEND whose
 * receive is posted late, each checked on the receive (opcode, length, immediate) and
 * byte for byte with the canaries after it; empty SENDs (-r: 1000) the server answers at
 * once, each of which must complete, with -O before its answer arrives (the ACK first); a
 * READ of 16 MiB whose source MR the server deregisters while it streams, which must end
 * in IBV_WC_REM_ACCESS_ERR (rxe since 2022: the NAK names the READ's PSN, below the
 * responses already placed). The two ends talk over
 * TCP (port 18516) to exchange QP numbers, PSNs, GIDs, buffers and verdicts.
 *   ibv_peer [-l] [-H] [-P] [-x GID_INDEX] server
 *   ibv_peer [-l] [-H] [-P] [-O] [-x GID_INDEX] [-r ROUNDS] client SERVER_IPV4
 * -l (client): frames are being lost on the way. A refused WRITE may then end in
 * IBV_WC_RETRY_EXC_ERR instead: when its NAK is the frame lost, the responder, in the error
 * state since it sent it, answers no retry (rxe and rocemu alike), and the retries run out.
 * -H (client): the READ may be done before the deregistration takes effect, and succeed: a
 * fast responder may have sent every response already (rocemu to an emulated guest), or a
 * responder may keep the MR until the READ is done (rxe's ibv_dereg_mr can wait for it).
 * -P (client): this requester may predate rxe's 2022 fix (Linux 6.1's rxe does): it takes
 * the NAK for stale and ends the READ with IBV_WC_RETRY_EXC_ERR. Each says so when it
 * happens. Such a requester also keeps state of the READ through a RESET, so it makes a
 * new QP for the connection after the READ.
 * -O (client): nothing is lost or reordered on the way and this end completes in arrival
 * order (rocemu): each echoed SEND must complete before its answer.
 * One line per case, "ok NAME" or "FAIL NAME: why"; exit 0 when all passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/peer_link.h"

#define PORT 18516
#define MAX_MSG (1u << 20)
#define CANARY 64
#define BUF_BYTES (MAX_MSG + CANARY)
#define CANARY_BYTE 0xee
#define START_PSN 0xfffe00u     /* 1 MiB at MTU 1024 crosses the wrap */

struct peer_info {
	uint32_t qpn, psn, rkey, mtu;
	uint64_t addr;
	union ibv_gid gid;
};

enum verb { PREP = 1, CHECK, RECONNECT, DONE, POST_RECV, LATE_RECV, CHECK_IMM, CHECK_SEND,
	    CHECK_SEND_IMM, READ_SOURCE, READ_SOURCE_GONE, ECHO };

#define READ_BYTES (16u << 20)  /* streams for a while from or into an emulated guest */
/* Each reconnection moves both PSNs past every PSN the last connection may have used: the
 * QPs are reused, so a stale packet of the old connection still on its way (a READ
 * response of the 16 MiB READ, 16,384 PSNs at MTU 1024 and 65,536 at 256) must fall
 * outside the new one's window. With a step of 0x1000 one did not: rxe's completer took a
 * late READ response of PSN 0x2e0x as the acknowledgement of the next WRITE, which it then
 * completed with two of its four packets sent (make interop, 2026-11-26). */
#define RECONNECT_PSN_STEP 0x20000u

/* A receive's buffer: none (a WRITE WITH IMMEDIATE's) or the whole buffer (a SEND's). */
#define RECV_INTO_BUF 1u

#define IMM 0x12345678u

#define ECHO_ROUNDS 1000        /* by default (-r) */
#define ECHO_RECEIVES 8         /* the server keeps this many posted */

/* What a failed CHECK found, so a rare failure tells its own story: the byte at the first
 * bad offset, how many bytes differ, and where the 64 bytes from there belong in the
 * message (an offset that is not theirs: a misplaced packet) or NO_ORIGIN. */
#define NO_ORIGIN 0xffffffffu
struct damage {
	uint32_t found, bad_bytes, origin;
};

struct msg {
	uint32_t verb;
	uint32_t size;
	uint32_t seed;
	uint32_t result;        /* server's answer: 0 OK, else 1 + the first bad offset */
	struct peer_info info;  /* RECONNECT; READ_SOURCE: addr and rkey of the READ's source */
	struct damage damage;   /* CHECK that failed: what the bytes were instead */
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static uint8_t *buf;
static int gid_index;
static int sock = -1;
static int failures;
static bool lossy;               /* -l */
static bool responder_holds;     /* -H */
static bool predates_fix;        /* -P */
static uint32_t echo_rounds = ECHO_ROUNDS; /* -r */
static bool wire_order;          /* -O */

static void xfer(bool out, void *p, size_t n)
{
	peer_xfer(sock, out, p, n);
}

static uint8_t pattern(uint32_t seed, uint32_t i)
{
	return (uint8_t)((i * 2654435761u) >> 24 ^ seed);
}

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq,
				      .cap = { .max_send_wr = 16, .max_recv_wr = 16,
					       .max_send_sge = 1, .max_recv_sge = 1 } };

	return ibv_create_qp(pd, &a);
}

static void setup(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (list)
		ibv_free_device_list(list);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	qp = cq ? new_qp() : NULL;
	buf = aligned_alloc(4096, (BUF_BYTES + 4096 + 4095) & ~(size_t)4095);
	mr = qp && buf ? ibv_reg_mr(pd, buf, BUF_BYTES, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!mr)
		peer_die("device, PD, CQ, QP or MR");
}

static struct peer_info local_info(uint32_t psn)
{
	struct ibv_port_attr port;
	struct peer_info me = { .qpn = qp->qp_num, .psn = psn, .rkey = mr->rkey,
				.addr = (uintptr_t)buf };

	if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, gid_index, &me.gid))
		peer_die("port or GID");
	me.mtu = port.active_mtu;
	return me;
}

/* Towards the peer, at the smaller of the two MTUs. */
static void connect_qp(const struct peer_info *me, const struct peer_info *peer)
{
	struct peer_rc rc = { .dest_qpn = peer->qpn, .rq_psn = peer->psn, .sq_psn = me->psn,
			      .mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu, .dgid = peer->gid,
			      .gid_index = gid_index };

	peer_connect_rc(qp, &rc);
}

/* Both ends send their info, then connect: the server answers the client's. */
static struct peer_info exchange_and_connect(uint32_t psn, bool client)
{
	struct peer_info me = local_info(psn), peer;

	if (client) {
		xfer(true, &me, sizeof(me));
		xfer(false, &peer, sizeof(peer));
	} else {
		xfer(false, &peer, sizeof(peer));
		xfer(true, &me, sizeof(me));
	}
	connect_qp(&me, &peer);
	return peer;
}

static void post_recv(uint32_t flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = BUF_BYTES, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge,
				  .num_sge = flags & RECV_INTO_BUF ? 1 : 0 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		peer_die("ibv_post_recv");
}

/* The next completion, within seconds; false when none came. */
static bool wait_completion(struct ibv_wc *wc, int seconds)
{
	time_t deadline = time(NULL) + seconds;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && time(NULL) < deadline)
		;
	return n == 1;
}

/* The receive a message consumed: its opcode, length and immediate (or none). */
static uint32_t check_recv_completion(enum ibv_wc_opcode opcode, uint32_t size, bool imm)
{
	struct ibv_wc wc;

	if (!wait_completion(&wc, 30) || wc.status != IBV_WC_SUCCESS || wc.opcode != opcode ||
	    wc.byte_len != size || !(wc.wc_flags & IBV_WC_WITH_IMM) != !imm || (imm && wc.imm_data != htonl(IMM)))
		return 0xffffffffu;
	return 0;
}

/* The source of the READ case: registered on READ_SOURCE, deregistered (while the READ
 * streams) on READ_SOURCE_GONE. */
static void read_source(struct msg *m)
{
	static struct ibv_mr *src;
	static uint8_t *bytes;

	if (m->verb == READ_SOURCE && !src) {
		bytes = bytes ? bytes : aligned_alloc(4096, READ_BYTES);
		src = bytes ? ibv_reg_mr(pd, bytes, READ_BYTES, IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_REMOTE_READ) : NULL;
		if (!src)
			peer_die("the READ's source MR");
		memset(bytes, 0x5a, READ_BYTES);
		m->info.addr = (uintptr_t)bytes;
		m->info.rkey = src->rkey;
	} else if (m->verb == READ_SOURCE_GONE && src) {
		m->result = (uint32_t)ibv_dereg_mr(src);
		src = NULL;
	}
}

static void post_empty_send(void)
{
	struct ibv_send_wr wr = { .wr_id = 9, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		peer_die("ibv_post_send");
}

/* ECHO: each empty SEND of the client's is answered with one as soon as it is received. */
static void echo(uint32_t rounds, uint32_t posted)
{
	uint32_t received = 0, answered = 0;
	time_t deadline = time(NULL) + 60;
	struct ibv_wc wc;

	while ((received < rounds || answered < rounds) && time(NULL) < deadline) {
		if (ibv_poll_cq(cq, 1, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS)
			return;
		if (wc.opcode == IBV_WC_SEND) {
			answered++;
			continue;
		}
		received++;
		if (posted < rounds) {
			post_recv(0);
			posted++;
		}
		post_empty_send();
	}
}

static uint8_t expected(uint32_t size, uint32_t seed, uint32_t i)
{
	return seed == 0 || i >= size ? CANARY_BYTE : pattern(seed, i);
}

/* Where in a message of size the bytes at buf[at] (up to 64 of them) belong, NO_ORIGIN
 * when nowhere. */
static uint32_t origin_of(uint32_t size, uint32_t seed, uint32_t at, uint32_t span)
{
	uint32_t n = span - at < 64 ? span - at : 64;

	for (uint32_t from = 0; seed && n && from + n <= size; from++) {
		uint32_t k = 0;

		while (k < n && buf[at + k] == pattern(seed, from + k))
			k++;
		if (k == n)
			return from;
	}
	return NO_ORIGIN;
}

/* 0 when buf holds the message and the canary after it, else 1 + the first bad offset and
 * what was found in *d. */
static uint32_t check_bytes(uint32_t size, uint32_t seed, struct damage *d)
{
	uint32_t span = size + CANARY, first = 0;

	*d = (struct damage){ .origin = NO_ORIGIN };
	for (uint32_t i = 0; i < span; i++) {
		if (buf[i] == expected(size, seed, i))
			continue;
		if (!d->bad_bytes++)
			first = i + 1;
	}
	if (first) {
		d->found = buf[first - 1];
		d->origin = origin_of(size, seed, first - 1, span);
	}
	return first;
}

static void serve(void)
{
	struct msg m;
	uint32_t psn = START_PSN + 0x80;

	exchange_and_connect(psn, false);
	for (;;) {
		xfer(false, &m, sizeof(m));
		m.result = 0;
		if (m.verb == DONE)
			return;
		if (m.verb == RECONNECT) {
			psn += RECONNECT_PSN_STEP;
			exchange_and_connect(psn & 0xffffff, false);
			continue;
		}
		if (m.verb == PREP)
			memset(buf, CANARY_BYTE, (size_t)m.size + CANARY);
		if (m.verb == POST_RECV)
			post_recv(m.seed);
		for (uint32_t i = 0; m.verb == ECHO && i < m.size && i < ECHO_RECEIVES; i++)
			post_recv(0);
		if (m.verb == READ_SOURCE || m.verb == READ_SOURCE_GONE)
			read_source(&m);
		if (m.verb == CHECK_IMM)
			m.result = check_recv_completion(IBV_WC_RECV_RDMA_WITH_IMM, m.size, true);
		if (m.verb == CHECK_SEND || m.verb == CHECK_SEND_IMM)
			m.result = check_recv_completion(IBV_WC_RECV, m.size, m.verb == CHECK_SEND_IMM);
		if (m.verb == CHECK_IMM || m.verb == CHECK_SEND || m.verb == CHECK_SEND_IMM)
			m.verb = CHECK;         /* and the bytes, below */
		if (m.verb == CHECK && !m.result)
			m.result = check_bytes(m.size, m.seed, &m.damage);
		xfer(true, &m, sizeof(m));
		if (m.verb == ECHO)
			echo(m.size, m.size < ECHO_RECEIVES ? m.size : ECHO_RECEIVES);
		if (m.verb == LATE_RECV) {     /* the message meets RNR NAKs until this */
			usleep(300000);
			post_recv(m.seed);
		}
	}
}

/* The server's answer; with damage, what a failed CHECK found. */
static uint32_t ask_for(enum verb verb, uint32_t size, uint32_t seed, struct damage *damage)
{
	struct msg m = { .verb = verb, .size = size, .seed = seed };

	xfer(true, &m, sizeof(m));
	xfer(false, &m, sizeof(m));
	if (damage)
		*damage = m.damage;
	return m.result;
}

static uint32_t ask(enum verb verb, uint32_t size, uint32_t seed)
{
	return ask_for(verb, size, seed, NULL);
}

/* "byte N differs on the server" and what was there instead. */
static void describe_damage(char *why, size_t len, uint32_t bad, const struct damage *d)
{
	char origin[48] = "";

	if (d->origin != NO_ORIGIN)
		snprintf(origin, sizeof(origin), "; they belong at offset %u", d->origin);
	snprintf(why, len, "byte %u differs on the server: 0x%02x%s, %u bytes differ%s", bad - 1,
		 d->found, d->found == CANARY_BYTE ? " (the canary)" : "", d->bad_bytes, origin);
}

static enum ibv_wc_status post_and_wait(enum ibv_wr_opcode op, uint32_t size, uint64_t raddr,
					 uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = size, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(IMM),
				  .wr.rdma = { .remote_addr = raddr, .rkey = rkey } }, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad))
		return IBV_WC_GENERAL_ERR;
	return wait_completion(&wc, 60) ? wc.status : IBV_WC_RESP_TIMEOUT_ERR;
}

static enum ibv_wc_status write_and_wait(uint32_t size, uint64_t raddr, uint32_t rkey)
{
	return post_and_wait(IBV_WR_RDMA_WRITE, size, raddr, rkey);
}

static void report(const char *name, bool ok, const char *why)
{
	printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why);
	fflush(stdout);
	failures += !ok;
}

static void case_size(const struct peer_info *peer, uint32_t size, uint32_t seed)
{
	char name[80], why[160];
	struct damage damage;
	enum ibv_wc_status st;
	uint32_t bad;

	for (uint32_t i = 0; i < size; i++)
		buf[i] = pattern(seed, i);
	ask(PREP, size, 0);
	st = write_and_wait(size, peer->addr, peer->rkey);
	bad = st == IBV_WC_SUCCESS ? ask_for(CHECK, size, seed, &damage) : 0;
	snprintf(name, sizeof(name), "WRITE of %u bytes: byte-exact, the %d bytes after it untouched",
		 size, CANARY);
	snprintf(why, sizeof(why), "%s", st != IBV_WC_SUCCESS ? ibv_wc_status_str(st) : "");
	if (st == IBV_WC_SUCCESS && bad)
		describe_damage(why, sizeof(why), bad, &damage);
	report(name, st == IBV_WC_SUCCESS && !bad, why);
}

/* A message that consumes a receive: its send completion st, and the server's verdict bad
 * (0, 0xffffffff for a wrong receive completion, else 1 + the first bad offset). */
static void report_delivery(const char *name, enum ibv_wc_status st, uint32_t bad)
{
	report(name, st == IBV_WC_SUCCESS && !bad,
	       st != IBV_WC_SUCCESS ? ibv_wc_status_str(st) :
	       bad == 0xffffffffu ? "the receive completion is wrong" : "the bytes differ");
}

/* WRITE WITH IMMEDIATE: the bytes, and the receive it consumes (opcode, immediate,
 * length). With late, the receive is posted 0.3 s after the WRITE: RNR NAKs until then. */
static void case_imm(const struct peer_info *peer, uint32_t size, bool late)
{
	char name[120];
	enum ibv_wc_status st;
	uint32_t bad;

	for (uint32_t i = 0; i < size; i++)
		buf[i] = pattern(7, i);
	ask(PREP, size, 0);
	ask(late ? LATE_RECV : POST_RECV, 0, 0);        /* a receive without a buffer */
	st = post_and_wait(IBV_WR_RDMA_WRITE_WITH_IMM, size, peer->addr, peer->rkey);
	bad = st == IBV_WC_SUCCESS ? ask(CHECK_IMM, size, 7) : 0;
	snprintf(name, sizeof(name), "WRITE WITH IMMEDIATE of %u bytes%s: bytes, immediate and "
		 "length on the receive", size, late ? ", receive posted late (RNR)" : "");
	report_delivery(name, st, bad);
}

/* SEND [WITH IMMEDIATE] into a receive of the server's whole buffer: the receive's opcode,
 * length and immediate, the bytes, the canaries after them. With late, the receive is
 * posted 0.3 s after the SEND: RNR NAKs until then. */
static void case_send(uint32_t size, bool imm, bool late)
{
	char name[160];
	enum ibv_wc_status st;
	uint32_t bad, seed = 11 + size % 7;

	for (uint32_t i = 0; i < size; i++)
		buf[i] = pattern(seed, i);
	ask(PREP, size, 0);
	ask(late ? LATE_RECV : POST_RECV, 0, RECV_INTO_BUF);
	st = post_and_wait(imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, size, 0, 0);
	bad = st == IBV_WC_SUCCESS ? ask(imm ? CHECK_SEND_IMM : CHECK_SEND, size, seed) : 0;
	snprintf(name, sizeof(name), "SEND%s of %u bytes%s: the receive's opcode, length%s, the "
		 "bytes and the %d after them", imm ? " WITH IMMEDIATE" : "", size,
		 late ? ", receive posted late (RNR)" : "", imm ? " and immediate" : "", CANARY);
	report_delivery(name, st, bad);
}

/* echo_rounds empty SENDs, each answered by the server with one as soon as it is received:
 * each SEND and each answer must complete. The responder's ACK of a SEND leaves before
 * anything its host sends afterwards, so with -O (nothing lost or reordered on the way,
 * and this end completes in the order packets arrive, as rocemu does; rxe's completer and
 * responder are tasks of their own) each round's SEND completion must come first on this
 * single CQ. (rocemu once sent the ACK after an answer posted quickly enough, and
 * perftest's latency tests with -e lost step with their peer.) */
static void case_echo(void)
{
	uint32_t rounds = 0, overtaken = 0;
	char why[96] = "", name[96];
	struct ibv_wc wc;

	ask(ECHO, echo_rounds, 0);
	for (; rounds < echo_rounds; rounds++) {
		bool sent = false, answered = false;

		post_recv(0);
		post_empty_send();
		while (!answered && wait_completion(&wc, 10) && wc.status == IBV_WC_SUCCESS) {
			overtaken += wc.opcode == IBV_WC_RECV && !sent;
			sent |= wc.opcode == IBV_WC_SEND;
			answered |= wc.opcode == IBV_WC_RECV;
		}
		if (!answered) {
			snprintf(why, sizeof(why), "round %u: no answer (%s)", rounds,
				 ibv_wc_status_str(wc.status));
			break;
		}
		if (!sent && !(wait_completion(&wc, 10) && wc.opcode == IBV_WC_SEND &&
			       wc.status == IBV_WC_SUCCESS)) {
			snprintf(why, sizeof(why), "round %u: the SEND did not complete", rounds);
			break;
		}
	}
	if (!why[0] && overtaken && wire_order)
		snprintf(why, sizeof(why), "%u of %u answers completed before the SEND they "
			 "answer", overtaken, rounds);
	printf("# %u round trips, %u answers ahead of the SEND's completion\n", rounds,
	       overtaken);
	snprintf(name, sizeof(name), wire_order ? "%u SENDs answered at once: each SEND "
		 "completes before its answer arrives" : "%u SENDs answered at once: each SEND "
		 "and each answer completes", echo_rounds);
	report(name, !why[0], why);
}

/* A WRITE the responder must refuse; the connection is made afresh afterwards. */
static void case_refused(struct peer_info *peer, const char *what, uint64_t raddr, uint32_t rkey,
			 uint32_t *psn)
{
	char name[160];
	enum ibv_wc_status st;
	uint32_t bad;
	bool nak_lost;

	ask(PREP, MAX_MSG, 0);          /* the whole buffer, canaries to its end */
	st = write_and_wait(64, raddr, rkey);
	bad = ask(CHECK, MAX_MSG, 0);
	nak_lost = lossy && st == IBV_WC_RETRY_EXC_ERR;
	snprintf(name, sizeof(name), "%s: %s, the target unchanged", what,
		 nak_lost ? "IBV_WC_RETRY_EXC_ERR (the NAK was lost)" : "IBV_WC_REM_ACCESS_ERR");
	report(name, (st == IBV_WC_REM_ACCESS_ERR || nak_lost) && !bad,
	       st != IBV_WC_REM_ACCESS_ERR && !nak_lost ? ibv_wc_status_str(st) :
							   "the target changed");
	xfer(true, &(struct msg){ .verb = RECONNECT }, sizeof(struct msg));
	*psn += RECONNECT_PSN_STEP;
	*peer = exchange_and_connect(*psn & 0xffffff, true);
}

/* The server's READ source goes away while a READ of all of it streams: the READ must end
 * with IBV_WC_REM_ACCESS_ERR, not with a resend into the server's QP in the error state
 * (IBV_WC_RETRY_EXC_ERR), nor hang; -H and -P allow what Linux 6.1's rxe does. Without -H
 * a READ that was done before the deregistration took effect (the server slow to run on
 * a busy machine) proves nothing either way, so the case runs again, up to READ_TRIES
 * times. The connection is made afresh after each. */
#define READ_TRIES 3

struct read_outcome {
	bool done;              /* a completion came within the time */
	enum ibv_wc_status status;
	double ms;              /* from the deregistration's request to the completion */
	bool dereg_failed;
};

static struct read_outcome read_while_deregistered(void)
{
	struct msg m = { .verb = READ_SOURCE };
	static uint8_t *dst;
	struct ibv_mr *dst_mr;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	struct timespec t0, t1;
	struct read_outcome out;

	dst = dst ? dst : aligned_alloc(4096, READ_BYTES);
	dst_mr = dst ? ibv_reg_mr(pd, dst, READ_BYTES, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!dst_mr)
		peer_die("the READ's destination MR");
	xfer(true, &m, sizeof(m));
	xfer(false, &m, sizeof(m));
	sge = (struct ibv_sge){ (uintptr_t)dst, READ_BYTES, dst_mr->lkey };
	wr.sg_list = &sge;
	wr.wr.rdma.remote_addr = m.info.addr;
	wr.wr.rdma.rkey = m.info.rkey;
	if (ibv_post_send(qp, &wr, &bad))
		peer_die("ibv_post_send (READ)");
	m = (struct msg){ .verb = READ_SOURCE_GONE };
	xfer(true, &m, sizeof(m));
	xfer(false, &m, sizeof(m));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	out.done = wait_completion(&wc, 60);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	out.status = wc.status;
	out.ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	out.dereg_failed = m.result != 0;
	ibv_dereg_mr(dst_mr);
	return out;
}

static void describe_read(const struct read_outcome *o, char *why, size_t room)
{
	if (o->dereg_failed)
		snprintf(why, room, "the server's ibv_dereg_mr failed");
	else if (!o->done)
		snprintf(why, room, "no completion within 60 s");
	else
		snprintf(why, room, "%s %.0f ms after the deregistration%s",
			 ibv_wc_status_str(o->status), o->ms,
			 o->status == IBV_WC_SUCCESS ? " (the READ was done before the deregistration "
						       "took effect)" :
			 o->status == IBV_WC_RETRY_EXC_ERR ? " (the NAK taken for stale: a "
							     "requester before rxe's 2022 fix)" : "");
}

static void reconnect_after_read(struct peer_info *peer, uint32_t *psn)
{
	/* Linux 6.1's rxe keeps its completer's place in a READ's responses through a RESET
	 * (rxe_qp_reset leaves comp.opcode): the next connection's first ACK then takes its
	 * completer to its error path, which completes the WRITE under way as a success
	 * before its last packets are acknowledged, and warns in the kernel's log
	 * (rxe_completer). A responder that ACKs a resend at once (rocemu, under
	 * reordering) makes that visible, so such a requester goes on with a new QP. */
	if (predates_fix) {
		if (ibv_destroy_qp(qp) || !(qp = new_qp()))
			peer_die("a new QP after the READ");
	}
	xfer(true, &(struct msg){ .verb = RECONNECT }, sizeof(struct msg));
	*psn += RECONNECT_PSN_STEP;
	*peer = exchange_and_connect(*psn & 0xffffff, true);
}

static void case_read_refused(struct peer_info *peer, uint32_t *psn)
{
	struct read_outcome o;
	char why[200];
	bool ok;

	for (int attempt = 1;; attempt++) {
		o = read_while_deregistered();
		describe_read(&o, why, sizeof(why));
		printf("# READ of %u bytes, source deregistered under it: %s\n", READ_BYTES, why);
		reconnect_after_read(peer, psn);
		if (!o.done || o.dereg_failed || o.status != IBV_WC_SUCCESS || responder_holds ||
		    attempt == READ_TRIES)
			break;
		printf("# ... which shows nothing of the refusal: again (try %d of %d)\n",
		       attempt + 1, READ_TRIES);
	}
	ok = o.done && !o.dereg_failed &&
	     (o.status == IBV_WC_REM_ACCESS_ERR ||
	      (responder_holds && o.status == IBV_WC_SUCCESS) ||
	      /* under loss the NAK itself may be the frame lost (see -l) */
	      ((lossy || predates_fix) && o.status == IBV_WC_RETRY_EXC_ERR));
	report("READ of 16 MiB whose source MR is deregistered while it streams", ok, why);
}

static void run_client(void)
{
	static const uint32_t sizes[] = { 1, 4095, 4096, 4097, MAX_MSG, 4096 };
	uint32_t psn = START_PSN;
	struct peer_info peer = exchange_and_connect(psn, true);

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		case_size(&peer, sizes[i], i + 1);
	case_imm(&peer, 4097, false);
	case_imm(&peer, 64, true);
	case_send(0, false, false);
	case_send(1, false, false);
	case_send(4097, false, false);
	case_send(MAX_MSG, false, false);
	case_send(4097, true, false);
	case_send(64, false, true);
	case_echo();
	case_refused(&peer, "a wrong rkey", peer.addr, peer.rkey ^ 0x80, &psn);
	case_refused(&peer, "one byte past the MR", peer.addr + BUF_BYTES - 63, peer.rkey, &psn);
	case_read_refused(&peer, &psn);
	case_size(&peer, 4096, 99);
	xfer(true, &(struct msg){ .verb = DONE }, sizeof(struct msg));
}

int main(int argc, char **argv)
{
	int i, c;

	while ((c = getopt(argc, argv, "lHPOx:r:")) != -1) {
		if (c == 'l')
			lossy = true;
		else if (c == 'H')
			responder_holds = true;
		else if (c == 'P')
			predates_fix = true;
		else if (c == 'x')
			gid_index = atoi(optarg);
		else if (c == 'O')
			wire_order = true;
		else if (c == 'r')
			echo_rounds = (uint32_t)strtoul(optarg, NULL, 0);
		else
			optind = argc;   /* the usage below */
	}
	i = optind;
	if (i >= argc || (strcmp(argv[i], "server") && (strcmp(argv[i], "client") || i + 1 >= argc))) {
		fprintf(stderr, "usage: ibv_peer [-l] [-H] [-P] [-O] [-x GID_INDEX] [-r ROUNDS] "
			"server | client SERVER_IPV4\n");
		return 2;
	}
	peer_prog = "ibv_peer";
	setup();
	if (strcmp(argv[i], "server") == 0) {
		sock = peer_tcp_accept(PORT);
		serve();
	} else {
		sock = peer_tcp_connect(argv[i + 1], PORT);
		run_client();
	}
	return failures ? 1 : 0;
}
