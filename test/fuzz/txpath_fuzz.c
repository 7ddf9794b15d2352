/* libFuzzer harness for the way frames take between the transport and the socket: the TX
 * batch and its sendmmsg (emu/daemon/port/netpath.c, txmsg.c, the GSO frames of wire/gso.c) and
 * the fault stages of both directions (fault.c), driven with random fault specs, frame
 * sizes and flows, flush points, send failures, fault changes while frames are held, and
 * received frames whose delivery sends more frames (as a received ACK makes the requester
 * resend from inside the receive stage: the shape of a crash this harness was written for).
 *
 * sendmmsg is replaced (the link wraps it: -Wl,--wrap=sendmmsg) with a function that
 * takes every message apart again, cuts a GSO frame the way Linux does (wire_gso_split)
 * and checks each packet; on_frame, the receiver, checks each frame delivered to it. A
 * message to the UDP socket (udptx.c, where the packet socket refuses GSO) has its
 * packets' headers written as the kernel would: the socket's source port, ids 0 counting
 * up, TOS and TTL from its control messages.
 * After every input:
 *   - each packet sent or received parses and has a good ICRC unless a fault corrupted it,
 *     and a good one is byte for byte the frame committed under its serial (the PSN);
 *   - nothing is lost or made up: frames committed plus frames received, less those dropped,
 *     plus those duplicated, are the frames queued for sending plus the frames delivered;
 *     frames queued are frames that reached sendmmsg plus those a send error lost;
 *   - a plain (not GSO) frame carries the UDP checksum 0 that RoCEv2 sends;
 *   - a packet through the UDP socket is the frame committed, but for the id, source port
 *     and IPv4 checksum, and its ICRC holds for them.
 *
 * Input: a header of INPUT_HDR (fault spec, GSO mode, flows), then ops: a byte each and
 * the argument bytes the op reads (see run_op). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include "emu/daemon/log.h"
#include "emu/daemon/port/port.h"
#include "icrc/icrc.h"
#include "wire/wire.h"

#define MUST(cond)                                                                        \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "txpath_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                          \
		}                                                                         \
	} while (0)

#define INPUT_HDR   8
#define MAX_SERIALS 4096
#define MAX_OPS     3000
#define FLOWS       3
#define PEER_QPN    0x000123
#define WIRE_BTH_AT (WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN)
#define UDP_FD      1000     /* the UDP socket's descriptor, never opened */
#define UDP_PORT    40000

/* What a frame was built from: enough to build it again. */
struct committed {
	uint16_t payload_len;
	uint16_t ip_id;
	uint8_t flow;
	uint8_t responses;      /* frames the receiver sends back on its delivery */
	bool rx;
};

enum send_mode { SEND_OK, SEND_EINTR, SEND_ENOBUFS, SEND_EINVAL, SEND_PARTIAL, SEND_ENETDOWN,
		 SEND_MODES };

static struct port port;
static struct dev_counters cnt;
static struct committed frames[MAX_SERIALS];
static uint32_t serials;
static uint64_t committed_tx, injected_rx, delivered_rx, reached_socket, bad_frames;
static enum send_mode next_send;

/* ---- what capture.c and log.c give the daemon ---- */

void capture_frame(struct port *p, const uint8_t *frame, size_t len)
{
	(void)p;
	(void)frame;
	(void)len;
}

void log_info(const char *fmt, ...)
{
	(void)fmt;
}

void log_warn(const char *fmt, ...)
{
	(void)fmt;
}

void log_limited(const char *fmt, ...)
{
	(void)fmt;
}

/* ---- frames ---- */

static const struct wire_path *flow_path(unsigned flow)
{
	static const struct wire_path paths[FLOWS] = {
		{ .src_mac = { 2, 0, 0, 0, 0, 1 }, .dst_mac = { 2, 0, 0, 0, 0, 2 },
		  .src_ip = 0x010012c6u, .dst_ip = 0x020012c6u, .src_port = 49152, .ttl = 64 },
		{ .src_mac = { 2, 0, 0, 0, 0, 1 }, .dst_mac = { 2, 0, 0, 0, 0, 2 },
		  .src_ip = 0x010012c6u, .dst_ip = 0x020012c6u, .src_port = 49153, .ttl = 64 },
		{ .src_mac = { 2, 0, 0, 0, 0, 1 }, .dst_mac = { 2, 0, 0, 0, 0, 3 },
		  .src_ip = 0x010012c6u, .dst_ip = 0x030012c6u, .src_port = 49152, .ttl = 64 },
	};

	return &paths[flow % FLOWS];
}

/* Payload bytes: frame serial's start at byte serial % 256 of one fixed noise buffer (a
 * loop per byte would cost more than the code under test, once instrumented). */
static uint8_t noise[4096 + 256];

/* Frame serial as it was built: a WRITE MIDDLE with a payload, or an ACK without. */
static size_t build(uint8_t *buf, uint32_t serial)
{
	const struct committed *c = &frames[serial];
	struct wire_bth bth = { .opcode = c->payload_len ? WIRE_OP_RC_WRITE_MIDDLE : WIRE_OP_RC_ACK,
				.pkey = 0xffff, .dest_qp = PEER_QPN, .psn = serial };
	struct wire_ext ext = { .aeth = { .syndrome = WIRE_SYN_ACK, .msn = c->responses } };

	return wire_build(buf, DEV_FRAME_MAX, flow_path(c->flow), c->ip_id, &bth, &ext,
			  noise + (serial & 255), c->payload_len);
}

/* A frame that arrived (sent or received): corrupted, or exactly what was committed. Returns
 * its serial, or -1 for a corrupted one. */
static int64_t check_frame(const uint8_t *frame, size_t len, bool rx)
{
	uint8_t expect[DEV_FRAME_MAX];
	struct wire_pkt pkt;
	uint32_t serial;

	if (wire_parse(frame, len, &pkt) != WIRE_OK || !wire_icrc_ok(frame, &pkt)) {
		bad_frames++;
		return -1;
	}
	serial = pkt.bth.psn;
	MUST(serial < serials && frames[serial].rx == rx);
	MUST(build(expect, serial) == len);
	/* prepared for the UDP socket, then sent by the packet socket after all */
	if (!rx && pkt.udp_src_port == UDP_PORT)
		wire_gso_reflow(expect, len, (uint16_t)(frame[WIRE_ETH_LEN + 4] << 8 |
							 frame[WIRE_ETH_LEN + 5]),
				UDP_PORT, wire_gso_reflow_carry(len));
	/* the ICRC leaves out the BTH's reserved byte: a bit flipped there passes, as on a wire */
	MUST(!memcmp(expect, frame, WIRE_BTH_AT + 4) &&
	     !memcmp(expect + WIRE_BTH_AT + 5, frame + WIRE_BTH_AT + 5, len - WIRE_BTH_AT - 5));
	return serial;
}

static uint32_t new_serial(size_t payload_len, unsigned flow, unsigned responses, bool rx)
{
	frames[serials] = (struct committed){ .payload_len = (uint16_t)payload_len,
		.ip_id = rx ? 0 : port.ip_id++, .flow = (uint8_t)flow,
		.responses = (uint8_t)responses, .rx = rx };
	return serials++;
}

static void commit_tx(size_t payload_len, unsigned flow)
{
	uint8_t *slot;

	if (serials == MAX_SERIALS)
		return;
	slot = net_tx_slot(&port);
	net_tx_commit(&port, build(slot, new_serial(payload_len, flow, 0, false)));
	committed_tx++;
}

/* The transport, as far as this path sees it (port.on_frame): a received frame may make it
 * send. */
static void on_frame(void *ctx, const uint8_t *frame, size_t len)
{
	int64_t serial = check_frame(frame, len, true);

	MUST(ctx == &port);
	delivered_rx++;
	if (serial < 0)
		return;
	for (unsigned k = 0; k < frames[serial].responses; k++)
		commit_tx(k ? 1024 : 0, (unsigned)serial + k);
}

static void receive(unsigned responses, size_t payload_len)
{
	uint8_t buf[DEV_FRAME_MAX];

	if (serials == MAX_SERIALS)
		return;
	injected_rx++;
	net_rx_frame(&port, buf, build(buf, new_serial(payload_len, 0, responses, true)));
}

/* ---- the socket ---- */

static void check_plain(const uint8_t *frame, size_t len)
{
	MUST(len > WIRE_GSO_HDR_LEN);
	MUST(frame[WIRE_ETH_LEN + WIRE_IPV4_LEN + 6] == 0 && frame[WIRE_ETH_LEN + WIRE_IPV4_LEN + 7] == 0);
	check_frame(frame, len, false);
	reached_socket++;
}

static void deliver_segment(void *ctx, const uint8_t *frame, size_t len)
{
	(void)ctx;
	check_plain(frame, len);
}

static const struct cmsghdr *cmsg_of(const struct msghdr *h, int level, int type)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR((struct msghdr *)h, c))
		if (c->cmsg_level == level && c->cmsg_type == type)
			return c;
	return NULL;
}

/* One packet of a UDP socket's send, with the headers the kernel writes. */
static void check_udp_packet(const struct sockaddr_in *to, int tos, int ttl, uint16_t id,
			     const struct iovec *payload)
{
	uint8_t frame[DEV_FRAME_MAX], expect[DEV_FRAME_MAX];
	uint8_t *ip = frame + WIRE_ETH_LEN, *udp = ip + WIRE_IPV4_LEN;
	size_t len = WIRE_GSO_HDR_LEN + payload->iov_len;
	struct wire_pkt pkt;
	int64_t serial;

	MUST(len <= sizeof(frame));
	memcpy(frame, flow_path(0)->dst_mac, 6);
	memcpy(frame + 6, flow_path(0)->src_mac, 6);
	frame[12] = 0x08;
	frame[13] = 0x00;
	memset(ip, 0, WIRE_IPV4_LEN + WIRE_UDP_LEN);
	ip[0] = 0x45;
	ip[1] = (uint8_t)tos;
	ip[2] = (uint8_t)((len - WIRE_ETH_LEN) >> 8);
	ip[3] = (uint8_t)(len - WIRE_ETH_LEN);
	ip[4] = (uint8_t)(id >> 8);
	ip[5] = (uint8_t)id;
	ip[6] = 0x40;                    /* DF */
	ip[8] = (uint8_t)ttl;
	ip[9] = 17;
	memcpy(ip + 12, &port.ipv4, 4);
	memcpy(ip + 16, &to->sin_addr, 4);
	udp[0] = UDP_PORT >> 8;
	udp[1] = UDP_PORT & 0xff;
	memcpy(udp + 2, &to->sin_port, 2);
	udp[4] = (uint8_t)((len - WIRE_ETH_LEN - WIRE_IPV4_LEN) >> 8);
	udp[5] = (uint8_t)(len - WIRE_ETH_LEN - WIRE_IPV4_LEN);
	memcpy(frame + WIRE_GSO_HDR_LEN, payload->iov_base, payload->iov_len);
	reached_socket++;
	if (wire_parse(frame, len, &pkt) != WIRE_OK || !wire_icrc_ok(frame, &pkt)) {
		bad_frames++;
		return;
	}
	serial = pkt.bth.psn;
	MUST(serial < serials && !frames[serial].rx);
	MUST(build(expect, (uint32_t)serial) == len);
	wire_gso_reflow(expect, len, id, UDP_PORT, wire_gso_reflow_carry(len));
	MUST(!memcmp(expect + WIRE_ETH_LEN, ip, 10) && !memcmp(expect + WIRE_ETH_LEN + 12, ip + 12, 8));
	MUST(!memcmp(expect + WIRE_GSO_HDR_LEN - 8, udp, 6));
	MUST(!memcmp(expect + WIRE_BTH_AT, frame + WIRE_BTH_AT, 4) &&
	     !memcmp(expect + WIRE_BTH_AT + 5, frame + WIRE_BTH_AT + 5, len - WIRE_BTH_AT - 5));
}

static void take_udp_message(const struct msghdr *h)
{
	const struct cmsghdr *seg = cmsg_of(h, SOL_UDP, UDP_SEGMENT), *tos = cmsg_of(h, IPPROTO_IP, IP_TOS);
	const struct cmsghdr *ttl = cmsg_of(h, IPPROTO_IP, IP_TTL);

	MUST(h->msg_name && h->msg_namelen == sizeof(struct sockaddr_in) && tos && ttl);
	MUST(seg ? h->msg_iovlen > 1 && h->msg_iovlen <= NET_GSO_MAX_SEGS : h->msg_iovlen == 1);
	for (size_t k = 0; k < h->msg_iovlen; k++) {
		MUST(!seg || h->msg_iov[k].iov_len <= *(const uint16_t *)CMSG_DATA(seg));
		MUST(!seg || k + 1 == h->msg_iovlen ||
		     h->msg_iov[k].iov_len == *(const uint16_t *)CMSG_DATA(seg));
		check_udp_packet(h->msg_name, *(const int *)CMSG_DATA(tos),
				 *(const int *)CMSG_DATA(ttl), (uint16_t)k, &h->msg_iov[k]);
	}
}

static void take_message(const struct msghdr *h)
{
	static uint8_t buf[NET_GSO_FRAME_MAX + DEV_FRAME_MAX];
	struct virtio_net_hdr vh = { 0 };
	size_t len = 0, i = 0;

	if (port.tx_vnet) {
		MUST(h->msg_iovlen >= 2 && h->msg_iov[0].iov_len == sizeof(vh));
		memcpy(&vh, h->msg_iov[0].iov_base, sizeof(vh));
		i = 1;
	}
	for (; i < h->msg_iovlen; i++) {
		MUST(len + h->msg_iov[i].iov_len <= sizeof(buf));
		memcpy(buf + len, h->msg_iov[i].iov_base, h->msg_iov[i].iov_len);
		len += h->msg_iov[i].iov_len;
	}
	if (vh.gso_type == VIRTIO_NET_HDR_GSO_NONE) {
		MUST(port.tx_vnet ? h->msg_iovlen == 2 : h->msg_iovlen == 1);
		check_plain(buf, len);
		return;
	}
	MUST(port.tx_gso && vh.gso_type == VIRTIO_NET_HDR_GSO_UDP_L4);
	MUST(vh.hdr_len == WIRE_GSO_HDR_LEN && vh.csum_start == WIRE_ETH_LEN + WIRE_IPV4_LEN);
	MUST(len <= NET_GSO_FRAME_MAX && h->msg_iovlen - 1 <= NET_GSO_MAX_SEGS);
	MUST(wire_gso_split(buf, len, vh.gso_size, deliver_segment, NULL));
}

/* netpath.c's sendmmsg, by the link's --wrap. */
int __wrap_sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags);
int __wrap_sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
	static const int errnos[SEND_MODES] = { 0, EINTR, ENOBUFS, EINVAL, 0, ENETDOWN };
	enum send_mode mode = next_send;

	(void)flags;
	MUST(n > 0 && n <= DEV_TX_BATCH);
	MUST(fd == port.tx_fd || fd == UDP_FD);
	next_send = SEND_OK;
	if (errnos[mode]) {
		errno = errnos[mode];
		return -1;
	}
	if (mode == SEND_PARTIAL)
		n = 1;
	for (unsigned m = 0; m < n; m++) {
		if (fd == UDP_FD)
			take_udp_message(&msgs[m].msg_hdr);
		else
			take_message(&msgs[m].msg_hdr);
	}
	return (int)n;
}

/* ---- the input ---- */

static double prob(uint8_t b)
{
	return b < 128 ? 0 : (b - 127) / 256.0;
}

static void set_fault(const uint8_t *b)
{
	static const char *const dirs[] = { "both", "rx", "tx", "both" };
	char spec[200], err[200];

	snprintf(spec, sizeof(spec), "drop=%g,dup=%g,corrupt=%g,reorder=%g,delay=%u,seed=%u,dir=%s",
		 prob(b[0]), prob(b[1]), prob(b[2]), prob(b[3]), b[4] & 0x80 ? (b[4] & 3u) : 0u,
		 b[5], dirs[b[4] >> 5 & 3]);
	MUST(net_set_fault(&port, spec, err, sizeof(err)) == 0);
}

static void run_loop(void)
{
	ev_now_update(port.loop);
	ev_run(port.loop, EVRUN_NOWAIT);
}

/* One op: returns the bytes it used (at least 1). */
static size_t run_op(const uint8_t *d, size_t size)
{
	static size_t last_len;
	static unsigned last_flow;
	uint8_t op = d[0];
	size_t arg = size > 2 ? (d[1] | (size_t)d[2] << 8) : 0;

	switch (op % 8) {
	case 0: /* a frame to send: payload length, flow */
		last_len = arg % 4097;
		last_flow = op >> 3;
		commit_tx(last_len, last_flow);
		return 3;
	case 1: /* frames like the last one, as a message's packets are */
		for (unsigned k = 0; k <= op >> 3; k++)
			commit_tx(last_len, last_flow);
		return 1;
	case 2: /* a frame received, and the frames its delivery sends */
		receive(op >> 3 & 7, arg % 2049);
		return 3;
	case 3: /* the loop is about to wait */
		net_flush(&port);
		run_loop();
		return 1;
	case 4:
		net_rx_batch_end(&port);
		return 1;
	case 5: /* how the next sendmmsg ends */
		next_send = (enum send_mode)((op >> 3) % SEND_MODES);
		return 1;
	case 6: /* rocemuctl fault, while frames may be held */
		if (size < 7)
			return size;
		set_fault(d + 1);
		return 7;
	default: /* delayed frames fall due */
		run_loop();
		return 1;
	}
}

static void settle_and_check(void)
{
	char err[200];
	const struct dev_counters *c = &cnt;

	MUST(net_set_fault(&port, "off", err, sizeof(err)) == 0);
	MUST(!port.fault_tx.behind && !port.fault_rx.behind && !port.fault_tx.delayed_head &&
	     !port.fault_rx.delayed_head);
	next_send = SEND_OK;
	net_flush(&port);
	MUST(port.tx_count == 0);
	MUST(committed_tx + injected_rx - c->fault_dropped + c->fault_duplicated ==
	     c->sent_pkts + delivered_rx);
	MUST(c->sent_pkts == reached_socket + c->send_err);
	MUST(bad_frames <= c->fault_corrupted + c->fault_duplicated);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	for (size_t i = 0; i < sizeof(noise); i++)
		noise[i] = (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
	port.loop = ev_loop_new(EVFLAG_AUTO);
	port.cnt = &cnt;
	port.on_frame = on_frame;
	port.frame_ctx = &port;
	port.tx_frames = calloc(DEV_TX_BATCH, DEV_FRAME_MAX);
	port.tx_fd = -1;
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++)
		port.udp_tx_fd[i] = port.udp_guard_fd[i] = -1;
	port.ipv4 = 0x010012c6u;
	addr_gid(port.gids[0].raw, 4, (const uint8_t *)&port.ipv4);
	port.ngids = 1;
	snprintf(port.ifname, sizeof(port.ifname), "fuzz0");
	MUST(port.loop && port.tx_frames);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < INPUT_HDR)
		return 0;
	memset(&cnt, 0, sizeof(cnt));
	serials = 0;
	committed_tx = injected_rx = delivered_rx = reached_socket = bad_frames = 0;
	next_send = SEND_OK;
	port.ip_id = (uint16_t)(data[6] << 8 | data[7]);
	port.tx_vnet = data[4] & 1;
	port.tx_gso = port.tx_vnet && (data[4] & 2);
	/* a packet socket that refused GSO: runs through the UDP socket */
	port.tx_udp = !port.tx_gso && (data[4] & 4);
	port.udp_tx_fd[0] = port.tx_udp ? UDP_FD : -1;
	port.udp_tx_port[0] = UDP_PORT;
	set_fault(data);
	data += INPUT_HDR;
	size -= INPUT_HDR;
	for (unsigned n = 0; n < MAX_OPS && size; n++) {
		size_t used = run_op(data, size);

		used = used < size ? used : size;
		data += used;
		size -= used;
	}
	settle_and_check();
	return 0;
}
