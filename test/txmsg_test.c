/* The send batch laid out as messages (port/txmsg.c, port/udptx.c), no socket opened:
 * runs of one flow through a UDP socket get the ids and source port its send will give
 * them, with ICRCs that still hold, and control messages for TOS, TTL and the segment
 * size; what a UDP socket cannot carry keeps the packet socket; GSO frames through the
 * packet socket keep counting ids from the frames' own. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>

#include "emu/daemon/port/port.h"
#include "test/testutil.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define PACKET_FD 5
#define UDP_FD 99
#define UDP_PORT 40000

static struct port port;
static uint16_t next_id = 1000;

static void setup(void)
{
	memset(&port, 0, sizeof(port));
	port.tx_frames = calloc(DEV_TX_BATCH, DEV_FRAME_MAX);
	ck_assert_ptr_nonnull(port.tx_frames);
	port.tx_fd = PACKET_FD;
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++)
		port.udp_tx_fd[i] = -1;
	addr_gid(port.gids[0].raw, 4, (const uint8_t[]){ 198, 18, 0, 1 });
	port.ngids = 1;
	port.udp_tx_fd[0] = UDP_FD;
	port.udp_tx_port[0] = UDP_PORT;
	port.tx_udp = true;
}

static void teardown(void)
{
	free(port.tx_frames);
}

/* A WRITE packet of payload bytes to dst (the last octet of 198.18.0.x), QP qpn */
static void add_frame(uint8_t dst, uint32_t qpn, size_t payload, uint8_t tos)
{
	struct wire_path path = { .src_mac = { 2, 0, 0, 0, 0, 1 }, .dst_mac = { 2, 0, 0, 0, 0, 2 },
				  .src_ip = htonl(0xc6120001), .dst_ip = htonl(0xc6120000 | dst),
				  .src_port = 0xc123, .tos = tos, .ttl = 33 };
	struct wire_bth bth = { .opcode = 0x07, .pkey = 0xffff, .dest_qp = qpn, .psn = next_id };
	struct wire_ext ext = { 0 };
	uint8_t data[1024];

	if (dst >= 224) {
		path.dst_ip = htonl((uint32_t)dst << 24 | 1);
		bth.opcode = 0x64;      /* UD SEND ONLY */
		ext.deth.qkey = 1;
	}
	memset(data, dst, sizeof(data));
	port.tx_len[port.tx_count] = (uint16_t)wire_build(port.tx_frames[port.tx_count],
							  DEV_FRAME_MAX, &path, next_id++, &bth,
							  &ext, data, payload);
	ck_assert_uint_gt(port.tx_len[port.tx_count], 0);
	port.tx_count++;
}

static unsigned lay_out(void)
{
	udptx_prepare(&port, 0);
	return txmsg_build(&port, 0, 0);
}

static const struct cmsghdr *find_cmsg(const struct msghdr *h, int level, int type)
{
	for (const struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR((struct msghdr *)h,
									     (struct cmsghdr *)c))
		if (c->cmsg_level == level && c->cmsg_type == type)
			return c;
	return NULL;
}

static void assert_frame_as_sent(unsigned f, uint16_t id)
{
	const uint8_t *fr = port.tx_frames[f];
	struct wire_pkt pkt;

	ck_assert_int_eq(wire_parse(fr, port.tx_len[f], &pkt), WIRE_OK);
	ck_assert(wire_icrc_ok(fr, &pkt));
	ck_assert_uint_eq(fr[WIRE_ETH_LEN + 4] << 8 | fr[WIRE_ETH_LEN + 5], id);
	ck_assert_uint_eq(pkt.udp_src_port, UDP_PORT);
}

START_TEST(test_runs_go_to_the_udp_socket_with_its_ids_and_port)
{
	add_frame(2, 0x11, 1024, 0x02);  /* flow A: three packets, the last shorter */
	add_frame(2, 0x11, 1024, 0x02);
	add_frame(2, 0x11, 500, 0x02);
	add_frame(3, 0x22, 64, 0x00);    /* flow B: two */
	add_frame(3, 0x22, 64, 0x00);
	add_frame(2, 0x11, 256, 0x02);   /* A again, alone */

	ck_assert_uint_eq(lay_out(), 3);
	for (unsigned m = 0; m < 3; m++)
		ck_assert_int_eq(port.tx_msg_fd[m], UDP_FD);
	ck_assert_uint_eq(txmsg_same_socket(&port, 0, 3), 3);
	ck_assert_uint_eq(port.tx_msg_frames[0], 3);
	ck_assert_uint_eq(port.tx_msg_frames[1], 2);
	ck_assert_uint_eq(port.tx_msg_frames[2], 1);
	ck_assert_uint_eq(txmsg_gso_count(&port, 0, 3), 2);
	for (unsigned f = 0; f < 3; f++)
		assert_frame_as_sent(f, (uint16_t)f);
	assert_frame_as_sent(3, 0);
	assert_frame_as_sent(4, 1);
	assert_frame_as_sent(5, 0);

	const struct msghdr *h = &port.tx_msgs[0].msg_hdr;
	const struct sockaddr_in *to = h->msg_name;
	const struct cmsghdr *c;

	ck_assert_uint_eq(h->msg_namelen, sizeof(*to));
	ck_assert_uint_eq(ntohl(to->sin_addr.s_addr), 0xc6120002);
	ck_assert_uint_eq(ntohs(to->sin_port), WIRE_ROCE_PORT);
	ck_assert_uint_eq(h->msg_iovlen, 3);
	ck_assert_ptr_eq(h->msg_iov[0].iov_base, port.tx_frames[0] + WIRE_GSO_HDR_LEN);
	ck_assert_uint_eq(h->msg_iov[2].iov_len, port.tx_len[2] - WIRE_GSO_HDR_LEN);
	c = find_cmsg(h, SOL_UDP, UDP_SEGMENT);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(*(const uint16_t *)CMSG_DATA(c), port.tx_len[0] - WIRE_GSO_HDR_LEN);
	c = find_cmsg(h, IPPROTO_IP, IP_TOS);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(*(const int *)CMSG_DATA(c), 0x02);
	c = find_cmsg(h, IPPROTO_IP, IP_TTL);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(*(const int *)CMSG_DATA(c), 33);
	/* one packet alone: no segment size */
	ck_assert_ptr_null(find_cmsg(&port.tx_msgs[2].msg_hdr, SOL_UDP, UDP_SEGMENT));
	ck_assert_ptr_nonnull(find_cmsg(&port.tx_msgs[2].msg_hdr, IPPROTO_IP, IP_TOS));
}
END_TEST

/* Multicast and addresses without a socket go by the packet socket, in order: the
 * messages alternate sockets and each send takes one run of them. */
START_TEST(test_what_a_udp_socket_cannot_carry_keeps_the_packet_socket)
{
	add_frame(2, 0x11, 1024, 0);
	add_frame(2, 0x11, 1024, 0);
	add_frame(239, 0xffffff, 64, 0);
	add_frame(2, 0x11, 1024, 0);

	ck_assert_uint_eq(lay_out(), 3);
	ck_assert_int_eq(port.tx_msg_fd[0], UDP_FD);
	ck_assert_int_eq(port.tx_msg_fd[1], PACKET_FD);
	ck_assert_int_eq(port.tx_msg_fd[2], UDP_FD);
	ck_assert_uint_eq(txmsg_same_socket(&port, 0, 3), 1);
	ck_assert_ptr_null(port.tx_msgs[1].msg_hdr.msg_name);
	ck_assert_ptr_null(port.tx_msgs[1].msg_hdr.msg_control);
	ck_assert_uint_eq(port.tx_msgs[1].msg_hdr.msg_iov[0].iov_len, port.tx_len[2]);
	assert_frame_as_sent(3, 0);

	/* a refused send: its frames by the packet socket from then on, as prepared */
	ck_assert_uint_eq(udptx_refused(&port, 0, false), 4);
	ck_assert_int_eq(port.tx_msg_fd[0], PACKET_FD);
	ck_assert_int_eq(port.tx_msg_fd[1], PACKET_FD);
	ck_assert_int_eq(port.tx_msg_fd[2], PACKET_FD);
	ck_assert_int_eq(port.tx_msg_fd[3], UDP_FD);
	assert_frame_as_sent(0, 0);
	assert_frame_as_sent(1, 1);
}
END_TEST

/* The kernel cuts a UDP socket's GSO frame before the interface, so a run through one may
 * be as long as a datagram, where one through the packet socket stops at a ring slot. */
START_TEST(test_udp_runs_may_be_longer_than_a_ring_slot)
{
	for (int i = 0; i < 40; i++)
		add_frame(2, 0x11, 1024, 0);
	ck_assert_uint_eq(lay_out(), 1);
	ck_assert_uint_eq(port.tx_msg_frames[0], 40);
	assert_frame_as_sent(39, 39);

	port.tx_udp = false;
	port.tx_gso = true;
	port.tx_count = 0;
	for (int i = 0; i < 40; i++)
		add_frame(2, 0x11, 1024, 0);
	ck_assert_uint_gt(lay_out(), 1);
	ck_assert_uint_le(port.tx_msg_frames[0] * (port.tx_len[0] - WIRE_GSO_HDR_LEN) +
			  WIRE_GSO_HDR_LEN, NET_GSO_FRAME_MAX);
}
END_TEST

START_TEST(test_without_udp_the_frames_stay_as_built)
{
	uint8_t before[DEV_FRAME_MAX];

	port.tx_udp = false;
	port.tx_gso = true;
	add_frame(2, 0x11, 1024, 0);
	add_frame(2, 0x11, 1024, 0);
	memcpy(before, port.tx_frames[1], port.tx_len[1]);
	ck_assert_uint_eq(lay_out(), 1);
	ck_assert_int_eq(port.tx_msg_fd[0], PACKET_FD);
	ck_assert_uint_eq(port.tx_msg_frames[0], 2);
	ck_assert_mem_eq(port.tx_frames[1], before, port.tx_len[1]);
	txmsg_restore(&port, 0, 1);
	port.tx_gso = false;
	ck_assert_uint_eq(txmsg_build(&port, 0, 0), 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("txmsg");
	TCase *tc = tcase_create("txmsg");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_runs_go_to_the_udp_socket_with_its_ids_and_port);
	tcase_add_test(tc, test_what_a_udp_socket_cannot_carry_keeps_the_packet_socket);
	tcase_add_test(tc, test_udp_runs_may_be_longer_than_a_ring_slot);
	tcase_add_test(tc, test_without_udp_the_frames_stay_as_built);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
