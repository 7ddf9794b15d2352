/* The CM (emu/daemon/cm), driven as a peer and a client would drive it: the peer's MADs,
 * built with cm_mad_build() and framed with cm_mad_frame(), go to rx_frame() (which hands
 * QP 1's frames to the CM); the client's steps are the CM's own calls; what comes back is
 * read where each would read it: the frames sent (kept and ICRC-checked by
 * test/port_stub.c) and the events written to the channel's socket. No root, no clock: a
 * connection's timer is fired with ev_invoke().
 *
 * Covered: REJ 8 when nobody listens; the passive side REQ -> CONNECT_REQUEST -> REP ->
 * RTU -> ESTABLISHED -> DREQ -> DISCONNECTED -> DREP -> TimeWait -> TIMEWAIT_EXIT; the
 * active side REQ -> REP -> CONNECT_RESPONSE -> RTU; duplicate REQ and REP answered again;
 * the REQ resent on its timer 15 times, then UNREACHABLE; stale comm IDs counted (a DREQ
 * still answered); a listener's backlog; a consumer's REJ with private data; malformed
 * MADs, a wrong Q_Key and a bad ICRC counted; another client cannot touch a connection;
 * a client gone ends its connection with a DREQ. Hardening: REJs found as the kernel finds
 * them (a TIMEOUT by comm ID and CA GUID), one MRA per MAD, MADs from another GID dropped,
 * a peer's timeouts bounded, a client's connections and held events bounded. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/cm/cm_int.h"
#include "test/port_stub.h"
#include "wire/cm_mad.h"

#define PEER_QPN       0x00abcd
#define PEER_PSN       0x123456
#define PEER_COMM_ID   0x11223344u
#define PEER_TID       0x0000000a44332211ull
#define SERVICE_PORT   7471
#define SERVICE_ID     (0x01060000ull | SERVICE_PORT)
#define COOKIE         0xc00c1e

static const uint8_t dev_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };
static const uint8_t peer_gid[16] = { [10] = 0xff, [11] = 0xff, 198, 18, 0, 1 };
static uint8_t our_gid[16];

static struct dev dev;
static struct owner owner, stranger;
static struct cq *cq;
static struct qp *qp, *udqp;
static int events_fd;              /* the client's end of the channel */
static uint32_t channel;
static unsigned frames_read;
static struct wire_path peer_path; /* the peer's frames to us */
static uint16_t peer_ip_id;

static void setup(void)
{
	struct proto_create_qp req = { .max_send_wr = 4, .max_recv_wr = 4, .qp_type = IBV_QPT_RC,
				       .max_send_sge = 1, .max_recv_sge = 1 };
	struct port *p = &dev.port;
	int sv[2], fds[2], err;

	memset(&dev, 0, sizeof(dev));
	stub_reset();
	frames_read = 0;
	peer_ip_id = 1;
	dev.loop = ev_loop_new(EVFLAG_AUTO);
	p->cnt = &dev.cnt;
	p->ipv4 = htonl(0xc6120002);
	addr_gid(p->gids[0].raw, 4, (const uint8_t *)&p->ipv4);
	memcpy(our_gid, p->gids[0].raw, 16);
	p->ngids = 1;
	memcpy(p->mac, dev_mac, 6);
	p->max_mtu = p->active_mtu = IBV_MTU_4096;
	p->hop_limit[0] = p->hop_limit[1] = 64;
	sched_init(&dev);
	dev.cm = cm_new(&dev);
	ck_assert_ptr_nonnull(dev.cm);
	dev.tp.on_gsi = cm_on_frame;
	dev.tp.gsi_ctx = dev.cm;
	owner = (struct owner){ .dev = &dev, .pid = getpid(), .uid = 1000, .async_fd = -1 };
	stranger = (struct owner){ .dev = &dev, .pid = getpid() + 1, .uid = 1001,
				    .async_fd = -1 };
	cq = cq_create(&owner, 16, fds, &err);
	ck_assert_ptr_nonnull(cq);
	qp = qp_create(&owner, &req, fds, &err);
	ck_assert_ptr_nonnull(qp);
	qp->send_cq = qp->recv_cq = cq;
	req.qp_type = IBV_QPT_UD;
	udqp = qp_create(&owner, &req, fds, &err);
	ck_assert_ptr_nonnull(udqp);
	udqp->send_cq = udqp->recv_cq = cq;
	cq->users += 4;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
	events_fd = sv[0];
	ck_assert_int_eq(cm_channel_open(dev.cm, &owner, sv[1], &channel), 0);
	peer_path = (struct wire_path){ .src_ip = htonl(0xc6120001), .dst_ip = p->ipv4,
					.src_port = 0xc123, .ttl = 64 };
	memcpy(peer_path.src_mac, stub_peer_mac, 6);
	memcpy(peer_path.dst_mac, dev_mac, 6);
}

static void teardown(void)
{
	struct proto_cm_event ev;
	ssize_t n = recv(events_fd, &ev, sizeof(ev), 0);

	/* nothing waits (0: the CM closed the channel, its client gone) */
	ck_assert_msg(n <= 0, "an event was not read: %u", ev.event);
	ck_assert_msg(frames_read == stub_sent_count(), "%u frames sent, %u read",
		      stub_sent_count(), frames_read);
	cm_free(dev.cm);
	qp_destroy(qp);
	qp_destroy(udqp);
	cq_destroy(cq);
	ring_park_empty(&owner);
	close(events_fd);
	ev_loop_destroy(dev.loop);
}

/* ---- the peer ---- */

static void arrive_mad_bytes(const uint8_t mad[CM_MAD_LEN], uint32_t qkey, bool bad_icrc)
{
	static uint8_t frame[DEV_FRAME_MAX];
	struct wire_bth bth = { .opcode = WIRE_OP_UD_SEND_ONLY, .pkey = 0xffff, .dest_qp = 1,
				.psn = 7 };
	struct wire_ext ext = { .deth = { .qkey = qkey, .src_qp = 1 } };
	size_t len = wire_build(frame, sizeof(frame), &peer_path, peer_ip_id++, &bth, &ext, mad,
				CM_MAD_LEN);

	ck_assert_uint_gt(len, 0);
	if (bad_icrc)
		frame[len - 1] ^= 1;
	rx_frame(&dev, frame, len);
}

static void arrive(struct cm_mad m)
{
	uint8_t mad[CM_MAD_LEN];

	ck_assert_uint_eq(cm_mad_build(&m, mad), CM_MAD_LEN);
	arrive_mad_bytes(mad, CM_GSI_QKEY, false);
}

static struct cm_mad peer_req(uint32_t comm_id, uint64_t service_id)
{
	struct cm_mad m = { .hdr = { .attr_id = CM_ATTR_REQ, .tid = PEER_TID } };
	struct cm_cma_hdr cma = { .ip_version = 4, .src_port = 40000 };
	struct cm_req *r = &m.req;

	r->local_comm_id = comm_id;
	r->service_id = service_id;
	r->local_qpn = PEER_QPN;
	r->responder_resources = 2;
	r->initiator_depth = 3;
	r->remote_cm_response_timeout = 20;
	r->local_cm_response_timeout = 20;
	r->transport = CM_TRANSPORT_RC;
	r->starting_psn = PEER_PSN;
	r->retry_count = 6;
	r->rnr_retry_count = 5;
	r->pkey = 0xffff;
	r->path_mtu = IBV_MTU_1024;
	r->max_cm_retries = 15;
	r->primary.local_lid = r->primary.remote_lid = 0xffff;
	memcpy(r->primary.local_gid, peer_gid, 16);
	memcpy(r->primary.remote_gid, our_gid, 16);
	r->primary.hop_limit = 64;
	r->primary.local_ack_timeout = 19;
	memcpy(cma.src_ip, peer_gid + 12, 4);
	memcpy(cma.dst_ip, our_gid + 12, 4);
	cm_cma_build(&cma, r->private_data);
	memcpy(r->private_data + CM_CMA_HDR_LEN, "hello", 5);
	return m;
}

static struct cm_mad peer_msg(uint16_t attr, uint32_t local, uint32_t remote)
{
	struct cm_mad m = { .hdr = { .attr_id = attr, .tid = PEER_TID } };

	/* RTU, DREP, DREQ, REP and REJ all start with the two comm IDs */
	m.rtu.local_comm_id = local;
	m.rtu.remote_comm_id = remote;
	return m;
}

/* ---- what comes back ---- */

static struct cm_mad next_mad(uint16_t attr)
{
	const struct stub_frame *f = stub_sent(frames_read++);
	const uint8_t *bytes;
	struct cm_mad m;

	memset(&m, 0, sizeof(m));     /* so two MADs compare whole, padding too */
	ck_assert_msg(f != NULL, "no frame sent (expected %s)", cm_attr_name(attr));
	ck_assert(f->well_formed);
	ck_assert_int_eq(cm_mad_in_frame(f->bytes, &f->pkt, &bytes), CM_MAD_OK);
	ck_assert_int_eq(f->pkt.bth.mig_req, 1);
	ck_assert_int_eq(cm_mad_parse(bytes, CM_MAD_LEN, &m), CM_MAD_OK);
	ck_assert_msg(m.hdr.attr_id == attr, "sent %s, expected %s", cm_attr_name(m.hdr.attr_id),
		      cm_attr_name(attr));
	return m;
}

static void expect_nothing_sent(void)
{
	ck_assert_uint_eq(stub_sent_count(), frames_read);
}

static struct proto_cm_event next_event(uint32_t type)
{
	struct proto_cm_event ev;

	ck_assert_int_eq(recv(events_fd, &ev, sizeof(ev), 0), (ssize_t)sizeof(ev));
	ck_assert_msg(ev.event == type, "event %u, expected %u", ev.event, type);
	return ev;
}

static void expect_no_event(void)
{
	struct proto_cm_event ev;

	ck_assert_int_lt(recv(events_fd, &ev, sizeof(ev), 0), 0);
}

static void fire_timer(uint32_t conn)
{
	struct cm_conn *c = conn_find(dev.cm, conn);

	ck_assert_ptr_nonnull(c);
	ck_assert(ev_is_active(&c->timer));
	ev_invoke(dev.loop, &c->timer, EV_TIMER);
}

static uint32_t listen_here(uint32_t backlog)
{
	struct proto_cm_listen m = { .channel = channel, .backlog = backlog, .cookie = COOKIE,
				     .service_id = SERVICE_ID, .any_family = 4 };
	char err[PROTO_ERRMSG];
	uint32_t h;

	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), 0);
	return h;
}

static void accept_conn(uint32_t conn)
{
	struct proto_cm_accept a = { .conn = conn, .channel = channel, .cookie = COOKIE + 1,
				     .qpn = qp->qpn, .responder_resources = 3,
				     .initiator_depth = 2, .rnr_retry_count = 7,
				     .private_len = 4, .private_data = "rep!" };
	char err[PROTO_ERRMSG] = "";

	ck_assert_msg(cm_accept(dev.cm, &owner, &a, err, sizeof(err)) == 0, "%s", err);
}

/* ---- tests ---- */

START_TEST(test_req_without_listener_gets_rej_8)
{
	struct cm_mad rej;

	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	rej = next_mad(CM_ATTR_REJ);
	ck_assert_uint_eq(rej.rej.reason, CM_REJ_INVALID_SERVICE_ID);
	ck_assert_uint_eq(rej.rej.message_rejected, CM_MSG_REQ);
	ck_assert_uint_eq(rej.rej.remote_comm_id, PEER_COMM_ID);
	ck_assert_uint_eq(rej.hdr.tid, PEER_TID);
	ck_assert_uint_eq(dev.cnt.cm_rej_no_listener, 1);
	ck_assert_uint_eq(dev.cm->nconns, 0);
}
END_TEST

static uint32_t hold_here(void)
{
	struct proto_cm_listen m = { .channel = channel, .cookie = COOKIE,
				     .service_id = SERVICE_ID, .any_family = 4, .bind_only = 1 };
	char err[PROTO_ERRMSG];
	uint32_t h;

	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), 0);
	return h;
}

/* A port held by a bound id (rdma_bind_addr) is nobody else's to listen on; a
 * REQ to it waits for its id's listen. */
START_TEST(test_a_held_port_waits_for_its_listen)
{
	struct proto_cm_listen m = { .channel = channel, .cookie = COOKIE,
				     .service_id = SERVICE_ID, .any_family = 4, .bind_only = 1 };
	uint32_t held = hold_here(), h;
	struct proto_cm_entry listed[2];
	char err[PROTO_ERRMSG];

	ck_assert_uint_eq(cm_list(dev.cm, 0, listed, 2, &h), 1);
	ck_assert_str_eq(listed[0].state, "BOUND");
	/* wildcards both: "not available", as the kernel's rdma_cm says */
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRNOTAVAIL);
	m.bind_only = 0;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRNOTAVAIL);
	ck_assert_str_eq(err, "service ID 0x1061d2f is held already");
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.cm_req_waited, 1);
	/* only its own client listens on it, once */
	m.bound = held;
	ck_assert_int_eq(cm_listen(dev.cm, &stranger, &m, &h, err, sizeof(err)), -EINVAL);
	m.backlog = 4;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), 0);
	ck_assert_uint_eq(h, held);
	ck_assert_uint_eq(next_event(CM_EV_CONNECT_REQUEST).cookie, COOKIE);
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EINVAL);
	ck_assert_uint_eq(dev.cm->nwaiting, 0);
	ck_assert_uint_eq(dev.cnt.cm_rej_no_listener, 0);
}
END_TEST

/* ... and is refused as to nobody when the listen does not come in time; no more than
 * CM_MAX_WAITING wait at once. */
START_TEST(test_a_held_port_nobody_listens_on_refuses)
{
	struct cm_waiting_req *w;

	hold_here();
	for (uint32_t i = 0; i <= CM_MAX_WAITING; i++)
		arrive(peer_req(PEER_COMM_ID + i, SERVICE_ID));
	ck_assert_uint_eq(next_mad(CM_ATTR_REJ).rej.remote_comm_id, PEER_COMM_ID + CM_MAX_WAITING);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cm->nwaiting, CM_MAX_WAITING);
	w = TAILQ_FIRST(&dev.cm->waiting);
	ck_assert(ev_is_active(&w->timer));
	ev_invoke(dev.loop, &w->timer, EV_TIMER);
	ck_assert_uint_eq(next_mad(CM_ATTR_REJ).rej.reason, CM_REJ_INVALID_SERVICE_ID);
	ck_assert_uint_eq(dev.cm->nwaiting, CM_MAX_WAITING - 1);
	ck_assert_uint_eq(dev.cnt.cm_rej_no_listener, 2);
}
END_TEST

/* Holds of one address and port that all asked for REUSEADDR share it until one listens;
 * the same address is "in use", and so is any port the library picked. */
START_TEST(test_reuseaddr_holds_share_a_port_until_one_listens)
{
	struct proto_cm_listen m = { .channel = channel, .cookie = COOKIE,
				     .service_id = SERVICE_ID, .bind_only = 1,
				     .hold_flags = PROTO_CM_HOLD_REUSEADDR };
	char err[PROTO_ERRMSG];
	uint32_t a, b, h;

	memcpy(m.gid, our_gid, 16);
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &b, err, sizeof(err)), 0);
	m.hold_flags = 0;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRINUSE);
	/* a listen shares with nobody: not while b holds the port, and then alone */
	m.bind_only = 0;
	m.bound = a;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRINUSE);
	ck_assert_int_eq(cm_unlisten(dev.cm, &owner, b), 0);
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), 0);
	m.bind_only = 1;
	m.bound = 0;
	m.hold_flags = PROTO_CM_HOLD_REUSEADDR;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRINUSE);
	memset(m.gid, 0, 16);
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRNOTAVAIL);
	m.hold_flags = PROTO_CM_HOLD_ANY_PORT;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -EADDRINUSE);
}
END_TEST

START_TEST(test_passive_connection_lives_and_ends)
{
	struct proto_cm_event ev;
	struct cm_mad rep, drep;
	uint32_t conn;

	listen_here(8);
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	ev = next_event(CM_EV_CONNECT_REQUEST);
	conn = ev.conn;
	ck_assert_uint_eq(ev.cookie, COOKIE);
	ck_assert_uint_eq(ev.peer_qpn, PEER_QPN);
	/* the peer's resources seen from here: its depth is what we serve */
	ck_assert_uint_eq(ev.responder_resources, 3);
	ck_assert_uint_eq(ev.initiator_depth, 2);
	ck_assert_uint_eq(ev.private_len, PROTO_CM_REQ_PRIVATE);
	ck_assert_int_eq(memcmp(ev.private_data, "hello", 5), 0);
	ck_assert_int_eq(memcmp(ev.peer_gid, peer_gid, 16), 0);
	ck_assert_uint_eq(ev.peer_port, 40000);
	ck_assert_uint_eq(ev.local_port, SERVICE_PORT);
	ck_assert_uint_eq(ev.qp.dest_qpn, PEER_QPN);
	/* the peer's REQ PSN is what this side sends with (Linux's cm.c), its own REP's
	 * what it receives with */
	ck_assert_uint_eq(ev.qp.sq_psn, PEER_PSN);
	ck_assert_uint_eq(ev.qp.path_mtu, IBV_MTU_1024);
	ck_assert_uint_eq(ev.qp.retry_cnt, 6);
	ck_assert_uint_eq(ev.qp.rnr_retry, 5);
	ck_assert_uint_eq(ev.qp.timeout, 19);
	ck_assert_uint_eq(ev.qp.min_rnr_timer, 0);
	expect_nothing_sent();
	/* a disconnect before the answer sends nothing and leaves the request to be answered,
	 * as the kernel's */
	ck_assert_int_eq(cm_disconnect(dev.cm, &owner, conn, (char[64]){ 0 }, 64), 0);
	expect_nothing_sent();

	accept_conn(conn);
	rep = next_mad(CM_ATTR_REP);
	ck_assert_uint_eq(rep.hdr.tid, PEER_TID);
	ck_assert_uint_eq(rep.rep.local_comm_id, conn);
	ck_assert_uint_eq(rep.rep.remote_comm_id, PEER_COMM_ID);
	ck_assert_uint_eq(rep.rep.local_qpn, qp->qpn);
	ck_assert_uint_eq(rep.rep.starting_psn, ev.qp.rq_psn);
	ck_assert_uint_eq(rep.rep.responder_resources, 3);
	ck_assert_int_eq(memcmp(rep.rep.private_data, "rep!", 4), 0);

	arrive(peer_msg(CM_ATTR_RTU, PEER_COMM_ID, conn));
	ev = next_event(CM_EV_ESTABLISHED);
	ck_assert_uint_eq(ev.cookie, COOKIE + 1);
	ck_assert_uint_eq(dev.cnt.cm_established, 1);

	{
		struct cm_mad dreq = peer_msg(CM_ATTR_DREQ, PEER_COMM_ID, conn);

		dreq.hdr.tid = PEER_TID + 1;
		dreq.dreq.remote_qpn = qp->qpn;
		arrive(dreq);
	}
	next_event(CM_EV_DISCONNECTED);
	ck_assert_int_eq(cm_disconnect(dev.cm, &owner, conn, (char[64]){ 0 }, 64), 0);
	drep = next_mad(CM_ATTR_DREP);
	ck_assert_uint_eq(drep.hdr.tid, PEER_TID + 1);
	ck_assert_uint_eq(drep.drep.remote_comm_id, PEER_COMM_ID);
	/* a second disconnect, as the kernel's: nothing is due in TimeWait, and that is no
	 * error */
	ck_assert_int_eq(cm_disconnect(dev.cm, &owner, conn, (char[64]){ 0 }, 64), 0);
	expect_nothing_sent();
	/* the same REQ again while in TimeWait is stale */
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	ck_assert_uint_eq(next_mad(CM_ATTR_REJ).rej.reason, CM_REJ_STALE_CONN);
	/* its DREQ again (our DREP was lost): answered again, and TimeWait still runs out
	 * (fire_timer checks the timer is running) */
	{
		struct cm_mad dreq = peer_msg(CM_ATTR_DREQ, PEER_COMM_ID, conn);

		dreq.hdr.tid = PEER_TID + 1;
		dreq.dreq.remote_qpn = qp->qpn;
		arrive(dreq);
	}
	ck_assert_uint_eq(next_mad(CM_ATTR_DREP).drep.remote_comm_id, PEER_COMM_ID);
	expect_no_event();
	fire_timer(conn);
	next_event(CM_EV_TIMEWAIT_EXIT);
	ck_assert_int_eq(cm_destroy(dev.cm, &owner, conn), 0);
	ck_assert_uint_eq(dev.cm->nconns, 0);
	expect_nothing_sent();
}
END_TEST

START_TEST(test_duplicate_req_is_answered_again)
{
	struct proto_cm_event ev;
	struct cm_mad rep, again;

	listen_here(8);
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	ev = next_event(CM_EV_CONNECT_REQUEST);
	/* before the answer: nothing to resend, and no second request */
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	expect_nothing_sent();
	expect_no_event();
	accept_conn(ev.conn);
	rep = next_mad(CM_ATTR_REP);
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	again = next_mad(CM_ATTR_REP);
	ck_assert_int_eq(memcmp(&rep.rep, &again.rep, sizeof(rep.rep)), 0);
	ck_assert_uint_eq(dev.cnt.cm_dup_req, 2);
	ck_assert_uint_eq(dev.cm->nconns, 1);
}
END_TEST

#define FLOW_LABEL 0x12345

/* A connection from here whose route has the packet lifetime given. */
static uint32_t connect_with_lifetime(uint8_t life)
{
	struct proto_cm_connect m = { .channel = channel, .qpn = qp->qpn, .cookie = COOKIE,
				      .service_id = SERVICE_ID, .src_port = 50000,
				      .responder_resources = 4, .initiator_depth = 4,
				      .retry_count = 9, .rnr_retry_count = 7, .private_len = 3,
				      .private_data = "abc", .packet_life_time = life,
				      .flow_label = FLOW_LABEL };
	char err[PROTO_ERRMSG] = "";
	uint32_t conn;

	memcpy(m.sgid, our_gid, 16);
	memcpy(m.dgid, peer_gid, 16);
	ck_assert_msg(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err, sizeof(err)) == 0,
		      "%s", err);
	return conn;
}

static uint32_t connect_out(void)
{
	return connect_with_lifetime(18);
}

/* The REQ's ACK timeout comes from the route's packet lifetime as the kernel's cm works it
 * out, with rxe's CA ACK delay of 15: RDMA_OPTION_ID_ACK_TIMEOUT 14 set before the route
 * (a lifetime of 13) asks the peer for 16, as rxe asked in the interop guest. */
START_TEST(test_req_ack_timeout_from_lifetime)
{
	static const uint8_t life[] = { 18, 13, 0, 30 }, asked[] = { 19, 16, 15, 31 };

	for (unsigned i = 0; i < sizeof(life); i++) {
		uint32_t conn = connect_with_lifetime(life[i]);

		ck_assert_uint_eq(next_mad(CM_ATTR_REQ).req.primary.local_ack_timeout, asked[i]);
		ck_assert_int_eq(cm_destroy(dev.cm, &owner, conn), 0);
		next_mad(CM_ATTR_REJ);
	}
}
END_TEST

START_TEST(test_active_connection_and_duplicate_rep)
{
	uint32_t conn = connect_out();
	struct cm_mad req = next_mad(CM_ATTR_REQ), rep;
	struct proto_cm_event ev;
	struct cm_cma_hdr cma;

	ck_assert_uint_eq(req.req.local_comm_id, conn);
	ck_assert_uint_eq(req.hdr.tid & 0xffffffff, __builtin_bswap32(conn));
	ck_assert_uint_eq(req.req.service_id, SERVICE_ID);
	ck_assert_uint_eq(req.req.local_qpn, qp->qpn);
	ck_assert_uint_eq(req.req.retry_count, 7);           /* 9, capped as rdma_cm caps */
	ck_assert_uint_eq(req.req.max_cm_retries, 15);
	ck_assert_uint_eq(req.req.local_cm_response_timeout, 20);
	ck_assert_uint_eq(req.req.remote_cm_response_timeout, 20);
	ck_assert_uint_eq(req.req.primary.local_ack_timeout, 19);
	ck_assert_uint_eq(req.req.primary.flow_label, FLOW_LABEL);
	ck_assert_uint_eq(req.req.primary.local_lid, 0xffff);
	ck_assert_uint_eq(req.req.pkey, 0xffff);
	ck_assert_uint_eq(req.req.path_mtu, IBV_MTU_4096);
	ck_assert(cm_cma_parse(req.req.private_data, CM_REQ_PRIVATE_LEN, &cma));
	ck_assert_uint_eq(cma.src_port, 50000);
	ck_assert_int_eq(memcmp(cma.dst_ip, peer_gid + 12, 4), 0);
	ck_assert_int_eq(memcmp(req.req.private_data + CM_CMA_HDR_LEN, "abc", 3), 0);

	rep = peer_msg(CM_ATTR_REP, PEER_COMM_ID, conn);
	rep.hdr.tid = req.hdr.tid;
	rep.rep.local_qpn = PEER_QPN;
	rep.rep.starting_psn = PEER_PSN;
	rep.rep.responder_resources = 1;
	rep.rep.initiator_depth = 2;
	rep.rep.rnr_retry_count = 3;
	arrive(rep);
	ev = next_event(CM_EV_CONNECT_RESPONSE);
	ck_assert_uint_eq(ev.qp.dest_qpn, PEER_QPN);
	ck_assert_uint_eq(ev.qp.sq_psn, PEER_PSN);
	ck_assert_uint_eq(ev.qp.rq_psn, req.req.starting_psn);
	ck_assert_uint_eq(ev.qp.max_dest_rd_atomic, 2);
	ck_assert_uint_eq(ev.qp.max_rd_atomic, 1);
	ck_assert_uint_eq(ev.qp.rnr_retry, 3);
	ck_assert_uint_eq(ev.qp.timeout, 19);
	ck_assert_uint_eq(ev.qp.flow_label, FLOW_LABEL);
	ck_assert_uint_eq(ev.private_len, CM_REP_PRIVATE_LEN);

	ck_assert_int_eq(cm_establish(dev.cm, &owner, conn, (char[64]){ 0 }, 64), 0);
	ck_assert_uint_eq(next_mad(CM_ATTR_RTU).hdr.tid, req.hdr.tid);
	arrive(rep);                 /* our RTU was lost */
	next_mad(CM_ATTR_RTU);
	ck_assert_uint_eq(dev.cnt.cm_dup_rep, 1);
	expect_no_event();
}
END_TEST

START_TEST(test_req_resent_then_unreachable)
{
	uint32_t conn = connect_out();
	struct cm_mad first = next_mad(CM_ATTR_REQ);
	struct proto_cm_event ev;

	for (int i = 0; i < CM_MAX_CM_RETRIES; i++) {
		struct cm_mad again;

		fire_timer(conn);
		again = next_mad(CM_ATTR_REQ);
		ck_assert_int_eq(memcmp(&again.req, &first.req, sizeof(first.req)), 0);
	}
	ck_assert_uint_eq(dev.cnt.cm_resent, CM_MAX_CM_RETRIES);
	fire_timer(conn);
	ev = next_event(CM_EV_UNREACHABLE);
	ck_assert_int_eq(ev.status, -ETIMEDOUT);
	ck_assert_uint_eq(dev.cnt.cm_timeouts, 1);
	ck_assert_ptr_null(conn_find(dev.cm, conn));
	expect_nothing_sent();
}
END_TEST

START_TEST(test_stale_comm_ids_are_counted)
{
	struct cm_mad dreq = peer_msg(CM_ATTR_DREQ, PEER_COMM_ID, 0x5151);
	struct cm_mad drep;

	arrive(peer_msg(CM_ATTR_RTU, PEER_COMM_ID, 0x5151));
	arrive(peer_msg(CM_ATTR_DREP, PEER_COMM_ID, 0x5151));
	arrive(peer_msg(CM_ATTR_REP, PEER_COMM_ID, 0x5151));
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cnt.cm_drop_stale, 3);
	/* a DREQ for a connection gone is still answered, so the peer stops asking */
	arrive(dreq);
	drep = next_mad(CM_ATTR_DREP);
	ck_assert_uint_eq(drep.drep.remote_comm_id, PEER_COMM_ID);
	ck_assert_uint_eq(dev.cnt.cm_drop_stale, 4);
	expect_no_event();
}
END_TEST

START_TEST(test_backlog_bounds_pending_requests)
{
	listen_here(2);
	for (uint32_t i = 0; i < 3; i++)
		arrive(peer_req(PEER_COMM_ID + i, SERVICE_ID));
	next_event(CM_EV_CONNECT_REQUEST);
	next_event(CM_EV_CONNECT_REQUEST);
	expect_no_event();
	ck_assert_uint_eq(next_mad(CM_ATTR_REJ).rej.reason, CM_REJ_CONSUMER_DEFINED);
	ck_assert_uint_eq(dev.cnt.cm_rej_backlog, 1);
	ck_assert_uint_eq(dev.cm->nconns, 2);
}
END_TEST

START_TEST(test_consumer_reject_carries_private_data)
{
	struct proto_cm_reject r = { .private_len = 5, .private_data = "nope!" };
	struct cm_mad rej;

	listen_here(8);
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	r.conn = next_event(CM_EV_CONNECT_REQUEST).conn;
	ck_assert_int_eq(cm_reject(dev.cm, &owner, &r, (char[64]){ 0 }, 64), 0);
	rej = next_mad(CM_ATTR_REJ);
	ck_assert_uint_eq(rej.rej.reason, CM_REJ_CONSUMER_DEFINED);
	ck_assert_uint_eq(rej.rej.remote_comm_id, PEER_COMM_ID);
	ck_assert_int_eq(memcmp(rej.rej.private_data, "nope!", 5), 0);
	ck_assert_uint_eq(dev.cm->nconns, 0);
}
END_TEST

START_TEST(test_malformed_mads_are_counted)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_mad req = peer_req(PEER_COMM_ID, SERVICE_ID);

	listen_here(8);
	ck_assert_uint_eq(cm_mad_build(&req, mad), CM_MAD_LEN);
	mad[2] = 1;                             /* class version 1 */
	arrive_mad_bytes(mad, CM_GSI_QKEY, false);
	ck_assert_uint_eq(cm_mad_build(&req, mad), CM_MAD_LEN);
	mad[16] = 0x00, mad[17] = 0x99;         /* an attribute the CM does not define */
	arrive_mad_bytes(mad, CM_GSI_QKEY, false);
	ck_assert_uint_eq(cm_mad_build(&req, mad), CM_MAD_LEN);
	arrive_mad_bytes(mad, 0x1234, false);   /* not the GSI's Q_Key */
	ck_assert_uint_eq(dev.cnt.cm_drop_malformed, 3);
	arrive_mad_bytes(mad, CM_GSI_QKEY, true);
	ck_assert_uint_eq(dev.cnt.cm_drop_bad_icrc, 1);
	expect_nothing_sent();
	expect_no_event();
	ck_assert_uint_eq(dev.cnt.cm_mads_rcvd, 0);
}
END_TEST

START_TEST(test_another_client_cannot_touch_a_connection)
{
	struct proto_cm_accept a = { .channel = channel, .qpn = qp->qpn };
	char err[PROTO_ERRMSG];
	uint32_t conn;

	listen_here(8);
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	conn = next_event(CM_EV_CONNECT_REQUEST).conn;
	a.conn = conn;
	ck_assert_int_eq(cm_accept(dev.cm, &stranger, &a, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cm_disconnect(dev.cm, &stranger, conn, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cm_destroy(dev.cm, &stranger, conn), -EINVAL);
	/* nor name another's QP in its own answer */
	ck_assert_int_eq(cm_channel_open(dev.cm, &stranger, dup(events_fd), &a.channel), 0);
	ck_assert_int_eq(cm_accept(dev.cm, &owner, &(struct proto_cm_accept){
		.conn = conn, .channel = channel, .qpn = 0x123 }, err, sizeof(err)), -EINVAL);
	expect_nothing_sent();
	ck_assert_uint_eq(dev.cm->nconns, 1);
}
END_TEST

START_TEST(test_client_gone_ends_its_connection)
{
	uint32_t conn;
	struct cm_mad rep;

	conn = connect_out();
	rep = peer_msg(CM_ATTR_REP, PEER_COMM_ID, conn);
	rep.rep.local_qpn = PEER_QPN;
	rep.hdr.tid = next_mad(CM_ATTR_REQ).hdr.tid;
	arrive(rep);
	next_event(CM_EV_CONNECT_RESPONSE);
	ck_assert_int_eq(cm_establish(dev.cm, &owner, conn, (char[64]){ 0 }, 64), 0);
	next_mad(CM_ATTR_RTU);
	cm_owner_gone(dev.cm, &owner);
	ck_assert_uint_eq(next_mad(CM_ATTR_DREQ).dreq.remote_qpn, PEER_QPN);
	/* its DREP ends the connection through TimeWait, with nobody left to tell */
	arrive(peer_msg(CM_ATTR_DREP, PEER_COMM_ID, conn));
	fire_timer(conn);
	ck_assert_uint_eq(dev.cm->nconns, 0);
	ck_assert_uint_eq(dev.cm->nchannels, 0);
}
END_TEST

/* 10,000 REQs at one listener: its backlog's worth are told of, the rest refused, and the
 * listener's own connection still goes through. */
START_TEST(test_req_flood_is_bounded)
{
	struct proto_cm_event ev;
	unsigned rejs = 0;

	listen_here(16);
	for (uint32_t i = 0; i < 10000; i++)
		arrive(peer_req(0x70000000u + i, SERVICE_ID));
	for (int i = 0; i < 16; i++)
		ev = next_event(CM_EV_CONNECT_REQUEST);
	expect_no_event();
	ck_assert_uint_eq(dev.cm->nconns, 16);
	ck_assert_uint_eq(dev.cnt.cm_rej_backlog, 10000 - 16);
	ck_assert_uint_eq(stub_sent_count(), 10000 - 16);
	while (frames_read < STUB_MAX_FRAMES)
		rejs += next_mad(CM_ATTR_REJ).rej.reason == CM_REJ_CONSUMER_DEFINED;
	ck_assert_uint_eq(rejs, STUB_MAX_FRAMES);
	stub_reset();
	frames_read = 0;
	/* one answered makes room for one more */
	accept_conn(ev.conn);
	next_mad(CM_ATTR_REP);
	arrive(peer_req(0x7fff0000u, SERVICE_ID));
	next_event(CM_EV_CONNECT_REQUEST);
	expect_nothing_sent();
}
END_TEST

#define UDP_SERVICE_ID (0x01110000ull | SERVICE_PORT)

static struct cm_mad peer_sidr_req(void)
{
	struct cm_mad m = { .hdr = { .attr_id = CM_ATTR_SIDR_REQ, .tid = PEER_TID } };
	struct cm_cma_hdr cma = { .ip_version = 4, .src_port = 40001 };

	m.sidr_req.request_id = PEER_COMM_ID;
	m.sidr_req.pkey = 0xffff;
	m.sidr_req.service_id = UDP_SERVICE_ID;
	memcpy(cma.src_ip, peer_gid + 12, 4);
	memcpy(cma.dst_ip, our_gid + 12, 4);
	cm_cma_build(&cma, m.sidr_req.private_data);
	memcpy(m.sidr_req.private_data + CM_CMA_HDR_LEN, "udp?", 4);
	return m;
}

START_TEST(test_sidr_passive)
{
	struct proto_cm_listen l = { .channel = channel, .backlog = 4, .cookie = COOKIE,
				     .service_id = UDP_SERVICE_ID, .any_family = 4 };
	struct proto_cm_event ev;
	struct cm_mad rep;
	char err[PROTO_ERRMSG] = "";
	uint32_t h;

	/* nobody listening: "unsupported", as the kernel's cm answers */
	arrive(peer_sidr_req());
	rep = next_mad(CM_ATTR_SIDR_REP);
	ck_assert_uint_eq(rep.sidr_rep.status, CM_SIDR_UNSUPPORTED);
	ck_assert_uint_eq(rep.sidr_rep.request_id, PEER_COMM_ID);
	ck_assert_uint_eq(rep.hdr.tid, PEER_TID);

	ck_assert_int_eq(cm_listen(dev.cm, &owner, &l, &h, err, sizeof(err)), 0);
	arrive(peer_sidr_req());
	ev = next_event(CM_EV_CONNECT_REQUEST);
	ck_assert_uint_eq(ev.peer_port, 40001);
	ck_assert_uint_eq(ev.private_len, CM_SIDR_REQ_PRIVATE_LEN - CM_CMA_HDR_LEN);
	ck_assert_int_eq(memcmp(ev.private_data, "udp?", 4), 0);
	arrive(peer_sidr_req());            /* a duplicate waits for the same answer */
	expect_no_event();
	expect_nothing_sent();
	/* an RC QP is not what the UDP port space answers with */
	ck_assert_int_eq(cm_accept(dev.cm, &owner, &(struct proto_cm_accept){
		.conn = ev.conn, .channel = channel, .qpn = qp->qpn }, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cm_accept(dev.cm, &owner, &(struct proto_cm_accept){
		.conn = ev.conn, .channel = channel, .qpn = udqp->qpn, .private_len = 3,
		.private_data = "ok!" }, err, sizeof(err)), 0);
	rep = next_mad(CM_ATTR_SIDR_REP);
	ck_assert_uint_eq(rep.sidr_rep.status, CM_SIDR_SUCCESS);
	ck_assert_uint_eq(rep.sidr_rep.qpn, udqp->qpn);
	ck_assert_uint_eq(rep.sidr_rep.qkey, CM_UDP_QKEY);
	ck_assert_uint_eq(rep.sidr_rep.service_id, UDP_SERVICE_ID);
	ck_assert_int_eq(memcmp(rep.sidr_rep.private_data, "ok!", 3), 0);
	ck_assert_uint_eq(dev.cm->nconns, 0);
}
END_TEST

START_TEST(test_sidr_active)
{
	struct proto_cm_connect m = { .channel = channel, .qpn = udqp->qpn, .cookie = COOKIE,
				      .service_id = UDP_SERVICE_ID, .src_port = 50001 };
	struct cm_mad req, rep = { .hdr = { .attr_id = CM_ATTR_SIDR_REP } };
	struct proto_cm_event ev;
	struct cm_cma_hdr cma;
	char err[PROTO_ERRMSG] = "";
	uint32_t conn;

	memcpy(m.sgid, our_gid, 16);
	memcpy(m.dgid, peer_gid, 16);
	ck_assert_int_eq(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err, sizeof(err)), 0);
	req = next_mad(CM_ATTR_SIDR_REQ);
	ck_assert_uint_eq(req.sidr_req.request_id, conn);
	ck_assert_uint_eq(req.sidr_req.service_id, UDP_SERVICE_ID);
	ck_assert(cm_cma_parse(req.sidr_req.private_data, CM_SIDR_REQ_PRIVATE_LEN, &cma));
	ck_assert_uint_eq(cma.src_port, 50001);
	fire_timer(conn);                   /* unanswered: sent again */
	next_mad(CM_ATTR_SIDR_REQ);
	rep.hdr.tid = req.hdr.tid;
	rep.sidr_rep.request_id = conn;
	rep.sidr_rep.qpn = PEER_QPN;
	rep.sidr_rep.qkey = CM_UDP_QKEY;
	rep.sidr_rep.service_id = UDP_SERVICE_ID;
	arrive(rep);
	ev = next_event(CM_EV_ESTABLISHED);
	ck_assert_uint_eq(ev.peer_qpn, PEER_QPN);
	ck_assert_uint_eq(ev.qp.qkey, CM_UDP_QKEY);
	ck_assert_int_eq(memcmp(ev.qp.dest_gid, peer_gid, 16), 0);
	ck_assert_uint_eq(dev.cm->nconns, 0);
	arrive(rep);                        /* late: nothing left to answer */
	ck_assert_uint_eq(dev.cnt.cm_drop_stale, 1);
}
END_TEST

/* A client slow to read: what its socket has no room for waits in the daemon, and comes
 * once the socket drains, none lost. */
START_TEST(test_slow_client_keeps_its_events)
{
	struct proto_cm_listen m = { .backlog = 1000, .cookie = COOKIE,
				     .service_id = SERVICE_ID, .any_family = 4 };
	char err[PROTO_ERRMSG];
	int sv[2], small = 4096;
	unsigned got = 0;
	uint32_t h;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(cm_channel_open(dev.cm, &owner, sv[1], &m.channel), 0);
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < 500; i++)
		arrive(peer_req(0x60000000u + i, SERVICE_ID));
	ck_assert_uint_gt(LIST_FIRST(&dev.cm->channels)->backlog_len, 400);
	for (int spins = 0; got < 500 && spins < 100000; spins++) {
		struct proto_cm_event ev;

		if (recv(sv[0], &ev, sizeof(ev), 0) == (ssize_t)sizeof(ev)) {
			ck_assert_uint_eq(ev.event, CM_EV_CONNECT_REQUEST);
			got++;
		} else {
			ev_run(dev.loop, EVRUN_NOWAIT);
		}
	}
	ck_assert_uint_eq(got, 500);
	ck_assert_uint_eq(dev.cnt.cm_events_lost, 0);
	close(sv[0]);
}
END_TEST

START_TEST(test_a_client_is_bounded)
{
	struct proto_cm_listen m = { .channel = channel, .backlog = 1 };
	char err[PROTO_ERRMSG];
	uint32_t h;
	int fd;

	for (unsigned i = 1; i < CM_MAX_OWNER_CHANNELS; i++) {
		fd = dup(events_fd);
		ck_assert_int_eq(cm_channel_open(dev.cm, &owner, fd, &h), 0);
	}
	fd = dup(events_fd);
	ck_assert_int_eq(cm_channel_open(dev.cm, &owner, fd, &h), -EMFILE);
	close(fd);
	for (unsigned i = 0; i < CM_MAX_OWNER_LISTENERS; i++) {
		m.service_id = 0x01060000u | i;
		ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), 0);
	}
	m.service_id = 0x0106ffffu;
	ck_assert_int_eq(cm_listen(dev.cm, &owner, &m, &h, err, sizeof(err)), -ENOMEM);
	/* another client has its own budget, but not another's channel, nor a service ID
	 * another listens on */
	m.service_id = 0x01060000u;
	ck_assert_int_eq(cm_listen(dev.cm, &stranger, &(struct proto_cm_listen){ 0 }, &h, err,
				   sizeof(err)), -EINVAL);
	fd = dup(events_fd);
	ck_assert_int_eq(cm_channel_open(dev.cm, &stranger, fd, &m.channel), 0);
	ck_assert_int_eq(cm_listen(dev.cm, &stranger, &m, &h, err, sizeof(err)), -EADDRNOTAVAIL);
}
END_TEST


/* ---- hardening: REJ matching, MRAs, the peer's GID, the peer's timeouts ---- */

#define PEER_CA_GUID 0x0002c9fffe123456ull

static struct cm_mad peer_rej_timeout(uint64_t guid)
{
	struct cm_mad m = peer_msg(CM_ATTR_REJ, PEER_COMM_ID, 0);

	/* as the kernel's cm_destroy_id sends it from REQ_SENT: it knows no comm ID of ours */
	m.rej.message_rejected = CM_MSG_OTHER;
	m.rej.reason = CM_REJ_TIMEOUT;
	m.rej.ari_length = 8;
	for (int i = 0; i < 8; i++)
		m.rej.ari[i] = (uint8_t)(guid >> (56 - 8 * i));
	return m;
}

/* The peer gives up on its REQ before we answer: its REJ TIMEOUT names only its own comm
 * ID and CA GUID, and still finds the request (the kernel's cm_acquire_rejected_id), which
 * the listener's client hears REJECTED. */
START_TEST(test_rej_timeout_finds_a_request_received)
{
	struct cm_mad req = peer_req(PEER_COMM_ID, SERVICE_ID);
	struct proto_cm_accept a = { .channel = channel, .qpn = qp->qpn };
	char err[PROTO_ERRMSG];

	req.req.local_ca_guid = PEER_CA_GUID;
	listen_here(1);
	arrive(req);
	a.conn = next_event(CM_EV_CONNECT_REQUEST).conn;
	arrive(peer_rej_timeout(PEER_CA_GUID + 1));      /* another CA's: not this one */
	ck_assert_uint_eq(dev.cm->nconns, 1);
	ck_assert_uint_eq(dev.cnt.cm_drop_stale, 1);
	arrive(peer_rej_timeout(PEER_CA_GUID));
	ck_assert_uint_eq(dev.cm->nconns, 0);
	ck_assert_uint_eq(dev.cnt.cm_rej_rcvd, 2);
	/* the listener's client hears it of the request it was told of */
	{
		struct proto_cm_event ev = next_event(CM_EV_REJECTED);

		ck_assert_uint_eq(ev.conn, a.conn);
		ck_assert_uint_eq(ev.cookie, COOKIE);
		ck_assert_int_eq(ev.status, CM_REJ_TIMEOUT);
	}
	ck_assert_int_eq(cm_accept(dev.cm, &owner, &a, err, sizeof(err)), -EINVAL);
	/* its place in the backlog is free again */
	arrive(peer_req(PEER_COMM_ID + 1, SERVICE_ID));
	next_event(CM_EV_CONNECT_REQUEST);
	expect_nothing_sent();
}
END_TEST

/* ... and after our REP: the client hears REJECTED with the reason. */
START_TEST(test_rej_timeout_finds_a_rep_sent)
{
	struct cm_mad req = peer_req(PEER_COMM_ID, SERVICE_ID);
	struct proto_cm_event ev;

	req.req.local_ca_guid = PEER_CA_GUID;
	listen_here(1);
	arrive(req);
	accept_conn(next_event(CM_EV_CONNECT_REQUEST).conn);
	next_mad(CM_ATTR_REP);
	arrive(peer_rej_timeout(PEER_CA_GUID));
	ev = next_event(CM_EV_REJECTED);
	ck_assert_int_eq(ev.status, CM_REJ_TIMEOUT);
	ck_assert_uint_eq(dev.cm->nconns, 0);
}
END_TEST

/* A client that destroys a connection still in REQ_SENT sends what the kernel sends:
 * TIMEOUT, message "other", its CA GUID as the ARI. */
START_TEST(test_rej_timeout_sent_as_the_kernel_sends_it)
{
	uint32_t conn = connect_out();
	struct cm_mad rej;
	uint64_t guid = 0;

	next_mad(CM_ATTR_REQ);
	ck_assert_int_eq(cm_destroy(dev.cm, &owner, conn), 0);
	rej = next_mad(CM_ATTR_REJ);
	ck_assert_uint_eq(rej.rej.reason, CM_REJ_TIMEOUT);
	ck_assert_uint_eq(rej.rej.message_rejected, CM_MSG_OTHER);
	ck_assert_uint_eq(rej.rej.local_comm_id, conn);
	ck_assert_uint_eq(rej.rej.remote_comm_id, 0);
	for (int i = 0; i < 8; i++)
		guid = guid << 8 | rej.rej.ari[i];
	ck_assert_uint_eq(guid, dev.cm->ca_guid);
}
END_TEST

static ev_tstamp timer_left(uint32_t conn)
{
	struct cm_conn *c = conn_find(dev.cm, conn);

	ck_assert_ptr_nonnull(c);
	ck_assert(ev_is_active(&c->timer));
	return ev_timer_remaining(dev.loop, &c->timer);
}

/* An MRA stretches the wait for the MAD it names once, by at most CM_MAX_PEER_TIMEOUT: a
 * peer sending MRAs again and again (or one asking for 2^31 * 4.096 us) cannot keep the
 * connection for hours. */
START_TEST(test_mra_stretches_the_wait_once)
{
	uint32_t conn = connect_out();
	struct cm_mad mra = peer_msg(CM_ATTR_MRA, PEER_COMM_ID, conn);
	ev_tstamp base = conn_find(dev.cm, conn)->timeout, left;

	next_mad(CM_ATTR_REQ);
	mra.mra.message_mraed = CM_MSG_REQ;
	mra.mra.service_timeout = 31;
	arrive(mra);
	left = timer_left(conn);
	ck_assert_msg(left > base + cm_time_s(CM_MAX_PEER_TIMEOUT) - 1 &&
		      left < base + cm_time_s(CM_MAX_PEER_TIMEOUT) + 1, "MRA wait %.1f s", left);
	fire_timer(conn);                  /* the REQ again, on its own timeout */
	next_mad(CM_ATTR_REQ);
	arrive(mra);
	ck_assert_uint_eq(dev.cnt.cm_mra_ignored, 1);
	left = timer_left(conn);
	ck_assert_msg(left < base + 1, "a second MRA stretched the wait to %.1f s", left);
}
END_TEST

/* MADs for a connection from another host than its peer: counted and dropped, whatever
 * comm IDs they name. */
START_TEST(test_mads_from_another_gid_are_dropped)
{
	struct cm_mad dreq;
	uint32_t conn;

	listen_here(8);
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	conn = next_event(CM_EV_CONNECT_REQUEST).conn;
	accept_conn(conn);
	next_mad(CM_ATTR_REP);
	peer_path.src_ip = htonl(0xc6120063);      /* 198.18.0.99 */
	arrive(peer_msg(CM_ATTR_RTU, PEER_COMM_ID, conn));
	dreq = peer_msg(CM_ATTR_DREQ, PEER_COMM_ID, conn);
	dreq.dreq.remote_qpn = qp->qpn;
	arrive(dreq);
	{
		struct cm_mad rej = peer_msg(CM_ATTR_REJ, PEER_COMM_ID, conn);

		rej.rej.message_rejected = CM_MSG_REP;
		arrive(rej);
	}
	ck_assert_uint_eq(dev.cnt.cm_drop_wrong_peer, 3);
	expect_no_event();
	expect_nothing_sent();
	peer_path.src_ip = htonl(0xc6120001);
	arrive(peer_msg(CM_ATTR_RTU, PEER_COMM_ID, conn));
	next_event(CM_EV_ESTABLISHED);
}
END_TEST

/* A REP_SENT connection: the peer's RTU establishes it, its DREQ disconnects it, and our
 * DREP (the client's rdma_disconnect) takes it to TimeWait. */
static void rtu_then_peer_disconnects(uint32_t conn, uint32_t peer_comm_id)
{
	struct cm_mad dreq;

	arrive(peer_msg(CM_ATTR_RTU, peer_comm_id, conn));
	next_event(CM_EV_ESTABLISHED);
	dreq = peer_msg(CM_ATTR_DREQ, peer_comm_id, conn);
	dreq.dreq.remote_qpn = qp->qpn;
	arrive(dreq);
	next_event(CM_EV_DISCONNECTED);
	ck_assert_int_eq(cm_disconnect(dev.cm, &owner, conn, (char[64]){ 0 }, 64), 0);
	next_mad(CM_ATTR_DREP);
}

/* A REQ asking for the longest timeouts the fields hold (31: 2.3 hours each) gets
 * CM_MAX_PEER_TIMEOUT's: the REP's resends and the TimeWait stay within about 35 s. */
START_TEST(test_peer_timeouts_are_clamped)
{
	struct cm_mad req = peer_req(PEER_COMM_ID, SERVICE_ID);
	ev_tstamp bound = 2 * cm_time_s(CM_PACKET_LIFETIME) + cm_time_s(CM_MAX_PEER_TIMEOUT);
	ev_tstamp left;
	uint32_t conn;

	req.req.local_cm_response_timeout = 31;
	req.req.primary.local_ack_timeout = 31;
	listen_here(8);
	arrive(req);
	conn = next_event(CM_EV_CONNECT_REQUEST).conn;
	accept_conn(conn);
	next_mad(CM_ATTR_REP);
	left = timer_left(conn);
	ck_assert_msg(left <= bound + 0.01, "the REP is resent after %.0f s", left);
	rtu_then_peer_disconnects(conn, PEER_COMM_ID);
	left = timer_left(conn);
	ck_assert_msg(left <= cm_time_s(CM_MAX_PEER_TIMEOUT) + 0.01, "TimeWait %.0f s", left);
	/* the QP keeps the peer's ACK timeout: only the CM's own waits are bounded */
	ck_assert_uint_eq(conn_find(dev.cm, conn)->ack_timeout, 31);
}
END_TEST

/* One client holds at most CM_MAX_OWNER_CONNS connections: its next connect is ENOMEM, a
 * REQ to its listener REJ 3, each counted; another client still connects. */
START_TEST(test_a_client_holds_a_bounded_number_of_connections)
{
	struct proto_cm_connect m = { .qpn = 0, .cookie = COOKIE, .service_id = SERVICE_ID };
	char err[PROTO_ERRMSG];
	uint32_t conn, first = connect_out();

	for (unsigned i = 1; i < CM_MAX_OWNER_CONNS; i++)
		connect_out();
	ck_assert_uint_eq(dev.cm->nconns, CM_MAX_OWNER_CONNS);
	m.channel = channel;
	m.qpn = qp->qpn;
	memcpy(m.sgid, our_gid, 16);
	memcpy(m.dgid, peer_gid, 16);
	ck_assert_int_eq(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err, sizeof(err)),
			 -ENOMEM);
	ck_assert_uint_eq(dev.cnt.cm_rej_client_limit, 1);
	listen_here(8);
	stub_reset();
	frames_read = 0;
	arrive(peer_req(PEER_COMM_ID, SERVICE_ID));
	ck_assert_uint_eq(next_mad(CM_ATTR_REJ).rej.reason, CM_REJ_NO_RESOURCES);
	ck_assert_uint_eq(dev.cnt.cm_rej_client_limit, 2);
	expect_no_event();
	/* a connection it ends (REJ to its REQ, freed) gives its place back */
	ck_assert_int_eq(cm_destroy(dev.cm, &owner, first), 0);
	ck_assert_ptr_null(conn_find(dev.cm, first));
	next_mad(CM_ATTR_REJ);
	ck_assert_int_eq(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err, sizeof(err)), 0);
	next_mad(CM_ATTR_REQ);
	ck_assert_int_eq(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err, sizeof(err)),
			 -ENOMEM);
	ck_assert_uint_eq(dev.cnt.cm_rej_client_limit, 3);
	/* another client has its own budget */
	{
		int fd = dup(events_fd);
		uint32_t ch;
		struct qp *sqp;
		struct proto_create_qp req = { .max_send_wr = 4, .max_recv_wr = 4,
					       .qp_type = IBV_QPT_RC, .max_send_sge = 1,
					       .max_recv_sge = 1 };
		int fds[2], e;

		ck_assert_int_eq(cm_channel_open(dev.cm, &stranger, fd, &ch), 0);
		sqp = qp_create(&stranger, &req, fds, &e);
		ck_assert_ptr_nonnull(sqp);
		sqp->send_cq = sqp->recv_cq = cq;
		cq->users += 2;
		m.channel = ch;
		m.qpn = sqp->qpn;
		ck_assert_int_eq(cm_connect(dev.cm, &stranger, &m, stub_peer_mac, &conn, err,
					    sizeof(err)), 0);
		next_mad(CM_ATTR_REQ);
		cm_owner_gone(dev.cm, &stranger);
		next_mad(CM_ATTR_REJ);
		qp_destroy(sqp);
	}
}
END_TEST

/* A passive connection through to TimeWait, then forgotten by its client. */
static uint32_t passive_to_forgotten_timewait(uint32_t peer_comm_id)
{
	uint32_t conn;

	arrive(peer_req(peer_comm_id, SERVICE_ID));
	conn = next_event(CM_EV_CONNECT_REQUEST).conn;
	accept_conn(conn);
	next_mad(CM_ATTR_REP);
	rtu_then_peer_disconnects(conn, peer_comm_id);
	ck_assert_int_eq(cm_destroy(dev.cm, &owner, conn), 0);
	return conn;
}

/* Connections a client forgot in TimeWait count against no client: a client that ends
 * connections faster than TimeWait does is not refused (the kernel's cm refuses none). */
START_TEST(test_forgotten_timewait_counts_against_no_client)
{
	uint32_t tw[2];

	listen_here(8);
	for (unsigned i = 0; i < 2; i++)
		tw[i] = passive_to_forgotten_timewait(PEER_COMM_ID + i);
	for (unsigned i = 0; i < CM_MAX_OWNER_CONNS; i++)
		connect_out();
	ck_assert_uint_eq(dev.cm->nconns, CM_MAX_OWNER_CONNS + 2);
	stub_reset();                /* (the REQs, more than the stub keeps) */
	frames_read = 0;
	ck_assert_uint_eq(dev.cnt.cm_rej_client_limit, 0);
	/* still in TimeWait: a late DREQ is answered again */
	{
		struct cm_mad dreq = peer_msg(CM_ATTR_DREQ, PEER_COMM_ID, tw[0]);

		dreq.dreq.remote_qpn = qp->qpn;
		arrive(dreq);
		next_mad(CM_ATTR_DREP);
	}
	fire_timer(tw[1]);
	ck_assert_ptr_null(conn_find(dev.cm, tw[1]));
	ck_assert_uint_eq(dev.cm->nconns, CM_MAX_OWNER_CONNS + 1);
	expect_no_event();
}
END_TEST

/* A CM full of forgotten TimeWaits: a new connection takes the oldest's place, counted;
 * a CM full of anything else still refuses it. */
START_TEST(test_full_cm_cuts_the_oldest_timewait)
{
	struct proto_cm_connect m = { .channel = channel, .qpn = 0, .cookie = COOKIE,
				      .service_id = SERVICE_ID };
	char err[PROTO_ERRMSG];
	uint32_t oldest = 0, next_oldest = 0, conn;

	for (unsigned i = 0; i < CM_MAX_CONNS; i++) {
		struct cm_conn *c = conn_new(dev.cm);

		ck_assert_ptr_nonnull(c);
		c->state = CM_TIMEWAIT;
		conn_let_go(c);
		oldest = i == 0 ? c->local_id : oldest;
		next_oldest = i == 1 ? c->local_id : next_oldest;
	}
	conn = connect_out();
	next_mad(CM_ATTR_REQ);
	ck_assert_ptr_null(conn_find(dev.cm, oldest));
	ck_assert_ptr_nonnull(conn_find(dev.cm, next_oldest));
	ck_assert_ptr_nonnull(conn_find(dev.cm, conn));
	ck_assert_uint_eq(dev.cm->nconns, CM_MAX_CONNS);
	ck_assert_uint_eq(dev.cnt.cm_timewait_cut, 1);

	/* the rest given to a client instead: nothing to cut */
	for (struct cm_conn *c = LIST_FIRST(&dev.cm->conns); c; c = LIST_NEXT(c, link))
		if (c->let_go) {
			TAILQ_REMOVE(&dev.cm->let_go, c, let_go_link);
			c->let_go = false;
			c->charged = &stranger;
		}
	m.qpn = qp->qpn;
	memcpy(m.sgid, our_gid, 16);
	memcpy(m.dgid, peer_gid, 16);
	ck_assert_int_eq(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err, sizeof(err)),
			 -ENOMEM);
	ck_assert_uint_eq(dev.cnt.cm_timewait_cut, 1);
	cm_owner_gone(dev.cm, &owner);
	while (frames_read < stub_sent_count())
		next_mad(CM_ATTR_REJ);
}
END_TEST

/* The events held for a client slow to read are bounded over all its channels together:
 * two channels nobody reads hold CM_CHANNEL_BACKLOG between them, the rest are lost and
 * counted. */
START_TEST(test_held_events_are_bounded_per_client)
{
	struct proto_cm_connect m = { .qpn = qp->qpn, .cookie = COOKIE, .service_id = SERVICE_ID };
	char err[PROTO_ERRMSG];
	uint32_t ch[2], held = 0, made = 0;
	int sv[2][2], small = 4096;
	struct cm_channel *c;

	memcpy(m.sgid, our_gid, 16);
	memcpy(m.dgid, peer_gid, 16);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv[i]), 0);
		ck_assert_int_eq(setsockopt(sv[i][1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
				 0);
		ck_assert_int_eq(cm_channel_open(dev.cm, &owner, sv[i][1], &ch[i]), 0);
	}
	/* each connection refused by the peer is one REJECTED event */
	for (uint32_t i = 0; i < CM_CHANNEL_BACKLOG + 2000; i++) {
		struct cm_mad rej;
		uint32_t conn;

		m.channel = ch[i % 2];
		ck_assert_int_eq(cm_connect(dev.cm, &owner, &m, stub_peer_mac, &conn, err,
					    sizeof(err)), 0);
		rej = peer_msg(CM_ATTR_REJ, PEER_COMM_ID, conn);
		rej.rej.reason = CM_REJ_CONSUMER_DEFINED;
		arrive(rej);
		made++;
	}
	LIST_FOREACH(c, &dev.cm->channels, link)
		if (c->handle == ch[0] || c->handle == ch[1])
			held += c->backlog_len;
	ck_assert_uint_eq(held, CM_CHANNEL_BACKLOG);
	ck_assert_uint_gt(dev.cnt.cm_events_lost, 0);
	ck_assert_uint_le(held + dev.cnt.cm_events_lost, made);
	stub_reset();
	frames_read = 0;
	close(sv[0][0]);
	close(sv[1][0]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cm");
	TCase *tc = tcase_create("cm");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_req_without_listener_gets_rej_8);
	tcase_add_test(tc, test_a_held_port_waits_for_its_listen);
	tcase_add_test(tc, test_a_held_port_nobody_listens_on_refuses);
	tcase_add_test(tc, test_reuseaddr_holds_share_a_port_until_one_listens);
	tcase_add_test(tc, test_passive_connection_lives_and_ends);
	tcase_add_test(tc, test_duplicate_req_is_answered_again);
	tcase_add_test(tc, test_active_connection_and_duplicate_rep);
	tcase_add_test(tc, test_req_ack_timeout_from_lifetime);
	tcase_add_test(tc, test_req_resent_then_unreachable);
	tcase_add_test(tc, test_stale_comm_ids_are_counted);
	tcase_add_test(tc, test_backlog_bounds_pending_requests);
	tcase_add_test(tc, test_consumer_reject_carries_private_data);
	tcase_add_test(tc, test_malformed_mads_are_counted);
	tcase_add_test(tc, test_another_client_cannot_touch_a_connection);
	tcase_add_test(tc, test_client_gone_ends_its_connection);
	tcase_add_test(tc, test_a_client_is_bounded);
	tcase_add_test(tc, test_req_flood_is_bounded);
	tcase_add_test(tc, test_sidr_passive);
	tcase_add_test(tc, test_slow_client_keeps_its_events);
	tcase_add_test(tc, test_sidr_active);
	tcase_add_test(tc, test_rej_timeout_finds_a_request_received);
	tcase_add_test(tc, test_rej_timeout_finds_a_rep_sent);
	tcase_add_test(tc, test_rej_timeout_sent_as_the_kernel_sends_it);
	tcase_add_test(tc, test_mra_stretches_the_wait_once);
	tcase_add_test(tc, test_mads_from_another_gid_are_dropped);
	tcase_add_test(tc, test_peer_timeouts_are_clamped);
	tcase_add_test(tc, test_a_client_holds_a_bounded_number_of_connections);
	tcase_add_test(tc, test_held_events_are_bounded_per_client);
	tcase_add_test(tc, test_forgotten_timewait_counts_against_no_client);
	tcase_add_test(tc, test_full_cm_cuts_the_oldest_timewait);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
