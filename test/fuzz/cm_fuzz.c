/* libFuzzer harness for the daemon's CM state machine (emu/daemon/cm) with the receive path
 * in front of it: MADs from the input go through rx_frame() to the CM, between the steps
 * a client may take (hold a port, listen, connect, accept, reject, establish, disconnect,
 * destroy, going away) and the firing of connection timers and of a waiting REQ's. Every
 * input starts from a fresh CM over one device and QP built once. Checked: every frame the CM sends is a well-formed CM MAD
 * in a UD SEND_ONLY to QP 1 with a good ICRC, to the peer; the connections stay within
 * CM_MAX_CONNS; every event written to the channel is whole; and ASan and UBSan watch the
 * rest. Only the network and the log are replaced, below.
 *
 * Input: records of one op byte, then what the op takes:
 *   op % 8 == 0  a MAD: the next 256 bytes (fewer are padded with zeros); with bit 3 of op
 *                set, the comm IDs at the message's start are patched to a connection's
 *                local ID (chosen by the op's top bits) so the fuzzer reaches live state
 *   1            listen on port (op >> 3) & 15 (backlog 2), in the UDP port space when it
 *                is odd; with bit 7 set only hold the port (a REQ to it waits), and a
 *                listen on a port held turns the hold into the listener
 *   2            connect to the peer on port op >> 3, the same way (a SIDR_REQ for UDP)
 *   3..6         accept, reject, establish, disconnect the connection chosen by op >> 3
 *   7            a step chosen by op >> 3: fire a connection's timer, destroy one, or the
 *                client goes away (its channels, listeners and connections ended)
 *
 * CM_FUZZ_SEEDS=DIR ./cm_fuzz writes seed inputs (a passive and an active connection to
 * their end, a refused one, MADs built with cm_mad_build) into DIR and exits:
 * test/fuzz/corpus/cm_fuzz/ was grown from those. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/cm/cm_int.h"
#include "emu/daemon/log.h"
#include "wire/cm_mad.h"

#define DEV_IP   0x020012c6u        /* 198.18.0.2, network order on little endian */
#define PEER_IP  0x010012c6u        /* 198.18.0.1 */
#define MAX_OPS  64

#define MUST(cond)                                                                        \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "cm_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                          \
		}                                                                         \
	} while (0)

static const uint8_t peer_mac[6] = { 2, 0, 0, 0, 0, 1 };
static const uint8_t dev_mac[6] = { 2, 0, 0, 0, 0, 2 };
static uint8_t peer_gid[16] = { [10] = 0xff, [11] = 0xff, 198, 18, 0, 1 };
static struct dev dev;
static struct owner owner;
static struct qp *qp, *udqp;
static uint8_t *tx_frame;
static int events[2];

/* ---- what net.c and log.c give the daemon ---- */

uint8_t *net_tx_slot(struct port *port)
{
	(void)port;
	return tx_frame;
}

void net_tx_commit(struct port *port, size_t len)
{
	const uint32_t peer = PEER_IP;
	const uint8_t *mad;
	struct wire_pkt pkt;
	struct cm_mad m;

	MUST(len <= DEV_FRAME_MAX);
	MUST(wire_parse(tx_frame, len, &pkt) == WIRE_OK);
	MUST(wire_icrc_ok(tx_frame, &pkt));
	MUST(!memcmp(pkt.src_ip, &port->ipv4, 4) && !memcmp(pkt.dst_ip, &peer, 4));
	MUST(!memcmp(tx_frame, peer_mac, 6));
	MUST(cm_mad_in_frame(tx_frame, &pkt, &mad) == CM_MAD_OK);
	MUST(cm_mad_parse(mad, CM_MAD_LEN, &m) == CM_MAD_OK);
	port->cnt->sent_pkts++;
}

int neigh_resolve(struct neigh_wait *nw, const uint8_t gid[16], uint8_t mac[6])
{
	(void)nw;
	(void)gid;
	memcpy(mac, peer_mac, 6);
	return 0;
}

void net_flush(struct port *port)
{
	(void)port;
}

void net_rx_catch_up(struct port *port)
{
	(void)port;
}

void log_info(const char *fmt, ...) { (void)fmt; }
void log_warn(const char *fmt, ...) { (void)fmt; }
void log_debug(const char *fmt, ...) { (void)fmt; }
void log_limited(const char *fmt, ...) { (void)fmt; }
void log_limited_debug(const char *fmt, ...) { (void)fmt; }

/* ---- the device and its QP, built once ---- */

static void setup(void)
{
	struct proto_create_qp req = { .max_send_wr = 4, .max_recv_wr = 4, .qp_type = IBV_QPT_RC,
				       .max_send_sge = 1, .max_recv_sge = 1 };
	struct port *p = &dev.port;
	int fds[2], err;

	dev.loop = ev_loop_new(EVFLAG_AUTO);
	MUST(dev.loop);
	p->cnt = &dev.cnt;
	p->ipv4 = DEV_IP;
	addr_gid(p->gids[0].raw, 4, (const uint8_t *)&p->ipv4);
	p->ngids = 1;
	memcpy(p->mac, dev_mac, 6);
	p->max_mtu = p->active_mtu = IBV_MTU_4096;
	p->hop_limit[0] = p->hop_limit[1] = 64;
	sched_init(&dev);
	owner = (struct owner){ .dev = &dev, .pid = getpid(), .uid = 1000, .async_fd = -1 };
	qp = qp_create(&owner, &req, fds, &err);
	MUST(qp);
	req.qp_type = IBV_QPT_UD;
	udqp = qp_create(&owner, &req, fds, &err);
	MUST(udqp);
	tx_frame = malloc(DEV_FRAME_MAX);
	MUST(tx_frame);
}

/* ---- one input ---- */

static uint32_t channel;

static void fresh_cm(void)
{
	MUST(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, events) == 0);
	dev.cm = cm_new(&dev);
	MUST(dev.cm);
	dev.tp.on_gsi = cm_on_frame;
	dev.tp.gsi_ctx = dev.cm;
	MUST(cm_channel_open(dev.cm, &owner, events[1], &channel) == 0);
}

/* Every event is whole; the channel is emptied so it never fills. */
static void drain_events(void)
{
	struct proto_cm_event ev;
	ssize_t n;

	while ((n = recv(events[0], &ev, sizeof(ev), 0)) > 0)
		MUST(n == sizeof(ev));
}

/* The n-th connection (n modulo their number), or NULL. */
static struct cm_conn *conn_at(unsigned n)
{
	struct cm_conn *c;
	unsigned count = dev.cm->nconns;

	if (!count)
		return NULL;
	n %= count;
	LIST_FOREACH(c, &dev.cm->conns, link)
		if (n-- == 0)
			return c;
	return NULL;
}

static void arrive(const uint8_t *mad)
{
	static uint8_t frame[DEV_FRAME_MAX];
	struct wire_path path = { .src_ip = PEER_IP, .dst_ip = DEV_IP, .src_port = 0xc000,
				  .ttl = 64 };
	size_t len;

	memcpy(path.src_mac, peer_mac, 6);
	memcpy(path.dst_mac, dev_mac, 6);
	len = cm_mad_frame(frame, sizeof(frame), &path, 1, 0, mad);
	MUST(len);
	rx_frame(&dev, frame, len);
}

static void mad_op(uint8_t op, const uint8_t **data, size_t *size)
{
	uint8_t mad[CM_MAD_LEN] = { 0 };
	size_t n = *size < CM_MAD_LEN ? *size : CM_MAD_LEN;
	struct cm_conn *c;

	memcpy(mad, *data, n);
	*data += n;
	*size -= n;
	c = (op & 8) ? conn_at(op >> 4) : NULL;
	if (c) {
		uint32_t ours = htonl(c->local_id), theirs = htonl(c->remote_id);

		/* a REQ names no comm ID of ours; the others name theirs, then ours */
		memcpy(mad + CM_MAD_HDR_LEN, &theirs, 4);
		memcpy(mad + CM_MAD_HDR_LEN + 4, &ours, 4);
	}
	arrive(mad);
}

static void client_op(uint8_t op)
{
	char err[PROTO_ERRMSG];
	struct cm_conn *c = conn_at(op >> 3);
	uint32_t conn = c ? c->local_id : op;
	uint32_t h;

	switch (op & 7) {
	case 1: {
		/* odd ports in the UDP space (SIDR), even ones in TCP's; with the top bit the
		 * port is only held (a bound id), and a listen turns a hold of its
		 * port into the listener */
		struct proto_cm_listen m = { .channel = channel, .backlog = 2,
					     .service_id = (op & 8 ? 0x01110000u : 0x01060000u) |
							   ((op >> 3) & 15),
					     .bind_only = op >> 7 };
		struct cm_listener *l;

		LIST_FOREACH(l, &dev.cm->listeners, link)
			if (!m.bind_only && !l->listening && l->service_id == m.service_id)
				m.bound = l->handle;
		cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err));
		break;
	}
	case 2: {
		struct proto_cm_connect m = { .channel = channel,
					      .qpn = op & 8 ? udqp->qpn : qp->qpn,
					      .service_id = (op & 8 ? 0x01110000u : 0x01060000u) |
							    (op >> 3),
					      .src_port = 40000, .retry_count = 7 };

		memcpy(m.sgid, dev.port.gids[0].raw, 16);
		memcpy(m.dgid, peer_gid, 16);
		cm_connect(dev.cm, &owner, &m, peer_mac, &h, err, sizeof(err));
		break;
	}
	case 3: {
		struct proto_cm_accept m = { .conn = conn, .channel = channel,
					     .qpn = c && c->state == CM_SIDR_REQ_RCVD ? udqp->qpn : qp->qpn,
					     .responder_resources = 1, .initiator_depth = 1 };

		cm_accept(dev.cm, &owner, &m, err, sizeof(err));
		break;
	}
	case 4: {
		struct proto_cm_reject m = { .conn = conn, .private_len = 3 };

		cm_reject(dev.cm, &owner, &m, err, sizeof(err));
		break;
	}
	case 5:
		cm_establish(dev.cm, &owner, conn, err, sizeof(err));
		break;
	case 6:
		cm_disconnect(dev.cm, &owner, conn, err, sizeof(err));
		break;
	default:
		if ((op >> 3) % 3 == 0 && c && ev_is_active(&c->timer))
			ev_invoke(dev.loop, &c->timer, EV_TIMER);
		else if ((op >> 3) % 3 == 0 && !TAILQ_EMPTY(&dev.cm->waiting))
			ev_invoke(dev.loop, &TAILQ_FIRST(&dev.cm->waiting)->timer, EV_TIMER);
		else if ((op >> 3) % 3 == 1)
			cm_destroy(dev.cm, &owner, conn);
		else if ((op >> 3) % 3 == 2)
			cm_owner_gone(dev.cm, &owner);
		break;
	}
}

/* ---- seeds: CM_FUZZ_SEEDS=DIR ./cm_fuzz writes them and exits ---- */

static size_t put_mad(uint8_t *out, uint8_t op, const struct cm_mad *m)
{
	out[0] = op;
	MUST(cm_mad_build(m, out + 1) == CM_MAD_LEN);
	return 1 + CM_MAD_LEN;
}

static size_t seed_req(uint8_t *out, uint16_t port)
{
	struct cm_mad m = { .hdr = { .attr_id = CM_ATTR_REQ, .tid = 0x1234 } };
	struct cm_cma_hdr cma = { .ip_version = 4, .src_port = 40000 };

	m.req.local_comm_id = 0x5555;
	m.req.service_id = 0x01060000u | port;
	m.req.local_qpn = 0xabcd;
	m.req.transport = CM_TRANSPORT_RC;
	m.req.path_mtu = IBV_MTU_1024;
	m.req.max_cm_retries = 15;
	m.req.remote_cm_response_timeout = m.req.local_cm_response_timeout = 20;
	memcpy(cma.src_ip, peer_gid + 12, 4);
	memcpy(cma.dst_ip, dev.port.gids[0].raw + 12, 4);
	cm_cma_build(&cma, m.req.private_data);
	return put_mad(out, 0, &m);
}

static size_t seed_msg(uint8_t *out, uint16_t attr)
{
	struct cm_mad m = { .hdr = { .attr_id = attr, .tid = 0x1234 } };

	if (attr == CM_ATTR_REJ)
		m.rej.reason = CM_REJ_CONSUMER_DEFINED;
	/* patched to the first connection's comm IDs */
	return put_mad(out, 8, &m);
}

static void write_seed(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	MUST(f && fwrite(b, 1, n, f) == n);
	fclose(f);
}

static void write_seeds(const char *dir)
{
	static uint8_t b[8 * (1 + CM_MAD_LEN)];
	size_t n;

	/* the passive side: listen on 9, REQ, accept, RTU, DREQ, disconnect, timer */
	n = 0;
	b[n++] = 1 | 9 << 3;
	n += seed_req(b + n, 9);
	b[n++] = 3;
	n += seed_msg(b + n, CM_ATTR_RTU);
	n += seed_msg(b + n, CM_ATTR_DREQ);
	b[n++] = 6;
	b[n++] = 7;
	write_seed(dir, "passive", b, n);
	/* the active side: connect, REP, establish, disconnect, DREP, timer */
	n = 0;
	b[n++] = 2 | 9 << 3;
	n += seed_msg(b + n, CM_ATTR_REP);
	b[n++] = 5;
	b[n++] = 6;
	n += seed_msg(b + n, CM_ATTR_DREP);
	b[n++] = 7;
	write_seed(dir, "active", b, n);
	/* SIDR: listen on UDP port 9, a SIDR_REQ, accept; a connect to UDP port 9, its REP */
	{
		struct cm_mad m = { .hdr = { .attr_id = CM_ATTR_SIDR_REQ, .tid = 7 } };
		struct cm_cma_hdr cma = { .ip_version = 4, .src_port = 40000 };

		n = 0;
		b[n++] = 1 | 9 << 3;
		m.sidr_req.request_id = 0x77;
		m.sidr_req.service_id = 0x01110009u;
		memcpy(cma.src_ip, peer_gid + 12, 4);
		memcpy(cma.dst_ip, dev.port.gids[0].raw + 12, 4);
		cm_cma_build(&cma, m.sidr_req.private_data);
		n += put_mad(b + n, 0, &m);
		b[n++] = 3;
		b[n++] = 2 | 9 << 3;
		memset(&m, 0, sizeof(m));
		m.hdr.attr_id = CM_ATTR_SIDR_REP;
		m.sidr_rep.qkey = CM_UDP_QKEY;
		n += put_mad(b + n, 0, &m);
		write_seed(dir, "sidr", b, n);
	}
	/* a port held, a REQ to it that waits, the listen that takes it, accept; and a REQ
	 * to a port held that nobody listens on, refused when its wait ends */
	n = 0;
	b[n++] = 1 | 9 << 3 | 0x80;
	n += seed_req(b + n, 9);
	b[n++] = 1 | 9 << 3;
	b[n++] = 3;
	write_seed(dir, "held-listened", b, n);
	n = 0;
	b[n++] = 1 | 9 << 3 | 0x80;
	n += seed_req(b + n, 9);
	b[n++] = 7;
	write_seed(dir, "held-refused", b, n);
	/* a REQ to nobody, and a REJ to our REQ */
	n = seed_req(b, 9);
	b[n++] = 2 | 3 << 3;
	n += seed_msg(b + n, CM_ATTR_REJ);
	write_seed(dir, "refused", b, n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("CM_FUZZ_SEEDS");

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
	fresh_cm();
	for (int n = 0; n < MAX_OPS && size > 0; n++) {
		uint8_t op = data[0];

		data++;
		size--;
		if ((op & 7) == 0)
			mad_op(op, &data, &size);
		else
			client_op(op);
		drain_events();
		MUST(dev.cm->nconns <= CM_MAX_CONNS);
	}
	cm_free(dev.cm);
	dev.cm = NULL;
	close(events[0]);
	return 0;
}
