/* wire: opcode table, build/parse round trips, and one test per malformation; the
 * neighbour table's rtnetlink messages (rtnl.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/frames.h"
#include "test/testutil.h"
#include "wire/bytes.h"
#include "wire/rtnl.h"
#include "wire/wire.h"

#include <linux/if.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

static uint8_t frame[9000];

static const struct wire_path path = {
	.src_mac = { 2, 0, 0, 0, 0, 1 },
	.dst_mac = { 2, 0, 0, 0, 0, 2 },
	.src_ip = 0x010012c6, /* 198.18.0.1 in network order on a little-endian host */
	.dst_ip = 0x020012c6,
	.src_port = 0xc0de,
	.ttl = 64,
};

/* Parses a heap copy of exactly len bytes, so ASan catches any read past the capture. */
static enum wire_status parse_exact(const uint8_t *f, size_t len, struct wire_pkt *pkt)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum wire_status st;

	memcpy(copy, f, len);
	st = wire_parse(copy, len, pkt);
	free(copy);
	return st;
}

START_TEST(test_opcode_table_header_sizes)
{
	static const struct { uint8_t op; unsigned after_udp; bool payload; } rows[] = {
		{ 0x06, 28, true }, { 0x07, 12, true }, { 0x08, 12, true }, { 0x09, 16, true },
		{ 0x0a, 28, true }, { 0x0b, 32, true }, { 0x0c, 28, false }, { 0x11, 16, false },
		{ 0x12, 24, false }, { 0x13, 40, false }, { 0x0d, 16, true }, { 0x0e, 12, true },
		{ 0x26, 28, true }, { 0x2b, 32, true }, { 0x64, 20, true }, { 0x65, 24, true },
		{ 0x81, 28, false }, { 0x16, 16, true }, { 0x00, 12, true }, { 0x05, 16, true },
		{ 0x1d, 28, true }, { 0x1c, 32, false },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct wire_opcode_info *op = wire_opcode_info(rows[i].op);

		ck_assert_msg(op != NULL, "opcode 0x%02x", rows[i].op);
		ck_assert_uint_eq(WIRE_BTH_LEN + op->hdr_len, rows[i].after_udp);
		ck_assert_int_eq(op->payload, rows[i].payload);
	}
}
END_TEST

START_TEST(test_opcode_table_unknowns)
{
	static const uint8_t unknown[] = { 0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x2d, 0x40, 0x4a,
					   0x63, 0x66, 0x80, 0x82, 0xff };
	int known = 0;

	for (size_t i = 0; i < sizeof(unknown); i++)
		ck_assert_ptr_null(wire_opcode_info(unknown[i]));
	for (int op = 0; op < 256; op++)
		known += wire_opcode_info((uint8_t)op) != NULL;
	/* RC 0x00-0x14, 0x16-0x17, FLUSH 0x1c and ATOMIC WRITE 0x1d, UC 12, UD 2, CNP */
	ck_assert_int_eq(known, 25 + 12 + 2 + 1);
	ck_assert_str_eq(wire_opcode_info(0x1c)->name, "RC_FLUSH");
	ck_assert_str_eq(wire_opcode_info(0x1d)->name, "RC_RDMA_ATOMIC_WRITE");
	ck_assert_str_eq(wire_opcode_info(0x0a)->name, "RC_RDMA_WRITE_ONLY");
	ck_assert_int_eq(wire_opcode_info(0x27)->pos, WIRE_POS_MIDDLE);
	ck_assert_int_eq(wire_opcode_info(0x27)->transport, WIRE_UC);
}
END_TEST

static size_t build_write(uint8_t op, size_t payload_len, struct wire_ext *ext)
{
	struct wire_bth bth = { .opcode = op, .pkey = 0xffff, .dest_qp = 0x123456,
				.ack_req = true, .psn = 0xfffffe };
	static uint8_t payload[4200];

	for (size_t i = 0; i < payload_len; i++)
		payload[i] = (uint8_t)(i ^ 0x5a);
	return wire_build(frame, sizeof(frame), &path, 7, &bth, ext, payload, payload_len);
}

START_TEST(test_write_round_trip)
{
	static const uint8_t ops[] = { 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b };
	static const size_t sizes[] = { 0, 1, 2, 3, 4, 5, 1023, 1024, 4096 };
	struct wire_ext ext = { .reth = { 0xfffffffffffff000ull, 0xabcdef12, 0x80000000u },
				.imm = 0xdeadbeef };

	for (size_t o = 0; o < sizeof(ops); o++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct wire_pkt pkt;
			size_t len = build_write(ops[o], sizes[s], &ext);

			ck_assert_uint_gt(len, 0);
			ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
			ck_assert(wire_icrc_ok(frame, &pkt));
			ck_assert_uint_eq(frames_reference_icrc(frame, len), pkt.icrc);
			ck_assert_uint_eq(pkt.bth.opcode, ops[o]);
			ck_assert_uint_eq(pkt.bth.psn, 0xfffffe);
			ck_assert_uint_eq(pkt.bth.dest_qp, 0x123456);
			ck_assert(pkt.bth.ack_req);
			ck_assert_uint_eq(pkt.payload_len, sizes[s]);
			ck_assert_uint_eq(pkt.bth.pad, (4 - sizes[s] % 4) % 4);
			ck_assert_uint_eq(len % 2, 0);
			for (size_t i = 0; i < sizes[s]; i++)
				ck_assert_uint_eq(frame[pkt.payload_off + i], (uint8_t)(i ^ 0x5a));
			if (pkt.op->headers & WIRE_HDR_RETH) {
				ck_assert_uint_eq(pkt.ext.reth.va, 0xfffffffffffff000ull);
				ck_assert_uint_eq(pkt.ext.reth.rkey, 0xabcdef12);
				ck_assert_uint_eq(pkt.ext.reth.length, 0x80000000u);
			}
			if (pkt.op->headers & WIRE_HDR_IMMDT)
				ck_assert_uint_eq(pkt.ext.imm, 0xdeadbeef);
		}
}
END_TEST

/* FLUSH: BTH, FETH, RETH, no payload. The FETH is rxe's: placement type in bits 3-0,
 * selectivity level in bits 5-4 of a big-endian word; reserved bits are ignored. */
START_TEST(test_flush_feth)
{
	struct wire_bth bth = { .opcode = WIRE_OP_RC_FLUSH, .pkey = 0xffff, .dest_qp = 0x123456,
				.ack_req = true, .psn = 77 };
	struct wire_ext ext = { .feth = { WIRE_FLUSH_GLOBAL | WIRE_FLUSH_PERSISTENT, WIRE_FLUSH_MR },
				.reth = { 0x7000, 0xabcdef12, 4096 } };
	struct wire_pkt pkt;
	size_t len = wire_build(frame, sizeof(frame), &path, 1, &bth, &ext, NULL, 0);
	size_t feth_off = WIRE_BASE_LEN;

	ck_assert_uint_eq(len, WIRE_BASE_LEN + WIRE_FETH_LEN + WIRE_RETH_LEN + WIRE_ICRC_LEN);
	ck_assert_uint_eq(get32(frame + feth_off), 0x13);
	ck_assert_uint_eq(get32(frame + feth_off + WIRE_FETH_LEN + 8), 0xabcdef12);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert(wire_icrc_ok(frame, &pkt));
	ck_assert_uint_eq(frames_reference_icrc(frame, len), pkt.icrc);
	ck_assert_int_eq(pkt.op->kind, WIRE_KIND_FLUSH);
	ck_assert_uint_eq(pkt.ext.feth.placement, 3);
	ck_assert_uint_eq(pkt.ext.feth.selectivity, WIRE_FLUSH_MR);
	ck_assert_uint_eq(pkt.ext.reth.va, 0x7000);
	ck_assert_uint_eq(pkt.ext.reth.rkey, 0xabcdef12);
	ck_assert_uint_eq(pkt.ext.reth.length, 4096);
	ck_assert_uint_eq(pkt.payload_len, 0);
	/* reserved bits set by a peer are not read as a level or a type */
	put32(frame + feth_off, 0xffffffc1u);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ext.feth.placement, WIRE_FLUSH_GLOBAL);
	ck_assert_uint_eq(pkt.ext.feth.selectivity, WIRE_FLUSH_RANGE);
	/* a FLUSH carries no payload: the builder refuses one */
	ck_assert_uint_eq(wire_build(frame, sizeof(frame), &path, 1, &bth, &ext,
				     (const uint8_t *)"abcd", 4), 0);
}
END_TEST

START_TEST(test_ack_and_nak)
{
	struct wire_bth bth = { .opcode = WIRE_OP_RC_ACK, .pkey = 0xffff, .dest_qp = 17,
				.psn = 42 };
	struct wire_ext ext = { .aeth = { WIRE_SYN_NAK_REM_ACCESS, 0x00abcd } };
	struct wire_pkt pkt;
	char name[48];
	size_t len = wire_build(frame, sizeof(frame), &path, 1, &bth, &ext, NULL, 0);

	ck_assert_uint_eq(len, WIRE_BASE_LEN + WIRE_AETH_LEN + WIRE_ICRC_LEN);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert(wire_icrc_ok(frame, &pkt));
	ck_assert_uint_eq(pkt.ext.aeth.syndrome, 0x62);
	ck_assert_uint_eq(pkt.ext.aeth.msn, 0xabcd);
	ck_assert_int_eq(wire_aeth_type(0x62), WIRE_AETH_NAK);
	ck_assert_int_eq(wire_aeth_type(WIRE_SYN_ACK), WIRE_AETH_ACK);
	ck_assert_str_eq(wire_syndrome_name(0x62, name, sizeof(name)), "NAK remote access error");
	ck_assert_str_eq(wire_syndrome_name(0x60, name, sizeof(name)), "NAK PSN sequence error");
	/* an ACK carries no payload */
	ck_assert_uint_eq(wire_build(frame, sizeof(frame), &path, 1, &bth, &ext, "x", 1), 0);
}
END_TEST

START_TEST(test_builder_refusals)
{
	struct wire_bth bth = { .opcode = 0x15 };
	struct wire_ext ext = { 0 };

	ck_assert_uint_eq(wire_build(frame, sizeof(frame), &path, 1, &bth, &ext, NULL, 0), 0);
	bth.opcode = WIRE_OP_RC_WRITE_ONLY;
	ck_assert_uint_eq(wire_build(frame, 40, &path, 1, &bth, &ext, NULL, 0), 0);
	ck_assert_uint_eq(wire_build(frame, 80, &path, 1, &bth, &ext, frame, 100), 0);
	ck_assert_uint_eq(wire_put_headers(frame, sizeof(frame), &path, 1, &bth, &ext, 70000), 0);
}
END_TEST

START_TEST(test_ipv4_header_fields)
{
	struct wire_ext ext = { 0 };
	size_t len = build_write(WIRE_OP_RC_WRITE_MIDDLE, 1024, &ext);
	const uint8_t *ip = frame + 14;
	uint32_t sum = 0;

	ck_assert_uint_eq(len, WIRE_BASE_LEN + 1024 + 4);
	ck_assert_uint_eq(ip[6] & 0x40, 0x40); /* DF */
	ck_assert_uint_eq((unsigned)(ip[2] << 8 | ip[3]), len - 14);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ck_assert_uint_eq(sum, 0xffff);
	ck_assert_uint_eq((unsigned)(frame[36] << 8 | frame[37]), 4791);
}
END_TEST

START_TEST(test_ipv6_ud_round_trip)
{
	struct wire_path p6 = path;
	struct wire_bth bth = { .opcode = WIRE_OP_UD_SEND_ONLY_IMM, .pkey = 0xffff,
				.dest_qp = 0xabcdef, .psn = 7 };
	struct wire_ext ext = { .deth = { 0x11111111, 0x000123 }, .imm = 0x01020304 };
	const uint8_t *ip = frame + WIRE_ETH_LEN;
	struct wire_pkt pkt;
	size_t len;

	p6.ipv6 = true;
	for (int i = 0; i < 16; i++) {
		p6.src_ip6[i] = (uint8_t)(0xa0 + i);
		p6.dst_ip6[i] = (uint8_t)(0x20 + i);
	}
	p6.src_ip6[0] = 0xfd;
	p6.tos = 0x6a;
	p6.flow_label = 0xabcde;
	p6.ttl = 9;
	len = wire_build(frame, sizeof(frame), &p6, 0, &bth, &ext, "datagram", 8);
	ck_assert_uint_eq(len, WIRE_BASE6_LEN + WIRE_DETH_LEN + WIRE_IMMDT_LEN + 8 + 4);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ip_version, 6);
	ck_assert(wire_icrc_ok(frame, &pkt));
	ck_assert_uint_eq(frames_reference_icrc(frame, len), pkt.icrc);
	ck_assert_mem_eq(pkt.src_ip, p6.src_ip6, 16);
	ck_assert_mem_eq(pkt.dst_ip, p6.dst_ip6, 16);
	ck_assert_uint_eq(ip[0], 0x66);              /* version 6, traffic class 0x6a */
	ck_assert_uint_eq(ip[1], 0xaa);              /* ... and the flow label 0xabcde */
	ck_assert_uint_eq(ip[2] << 8 | ip[3], 0xbcde);
	ck_assert_uint_eq(ip[4] << 8 | ip[5], len - WIRE_ETH_LEN - WIRE_IPV6_LEN);
	ck_assert_uint_eq(ip[6], 17);
	ck_assert_uint_eq(ip[7], 9);
	ck_assert_uint_eq(pkt.ext.deth.qkey, 0x11111111);
	ck_assert_uint_eq(pkt.ext.deth.src_qp, 0x123);
	ck_assert_uint_eq(pkt.ext.imm, 0x01020304);
	ck_assert_mem_eq(frame + pkt.payload_off, "datagram", 8);
	/* the ICRC ignores traffic class, flow label and hop limit: a router may change them */
	frame[WIRE_ETH_LEN + 1] ^= 0x0f;
	frame[WIRE_ETH_LEN + 7] = 1;
	ck_assert(wire_icrc_ok(frame, &pkt));
	frame[WIRE_ETH_LEN + 8] ^= 1;
	ck_assert(!wire_icrc_ok(frame, &pkt));
	/* an IPv6 payload length counts the UDP datagram only: 65535 bytes of it still fit,
	 * 20 more than IPv4 allows */
	bth.opcode = WIRE_OP_RC_WRITE_MIDDLE;
	ck_assert_uint_gt(wire_put_headers(frame, sizeof(frame), &p6, 0, &bth, &ext, 65508), 0);
	ck_assert_uint_eq(wire_put_headers(frame, sizeof(frame), &p6, 0, &bth, &ext, 65509), 0);
	ck_assert_uint_eq(wire_put_headers(frame, sizeof(frame), &path, 0, &bth, &ext, 65489), 0);
}
END_TEST

/* A switch that meets congestion sets the ECN field to CE: the parser reports it in both
 * families, and the ICRC, which masks TOS and traffic class, still holds. */
START_TEST(test_ecn_congestion_experienced)
{
	struct wire_bth bth = { .opcode = WIRE_OP_RC_WRITE_MIDDLE, .pkey = 0xffff, .dest_qp = 9 };
	struct wire_ext ext = { 0 };
	struct wire_path p6 = path, p4 = path;
	struct wire_pkt pkt;
	size_t len;

	p4.tos = 0x28 | WIRE_ECN_ECT0;
	len = wire_build(frame, sizeof(frame), &p4, 1, &bth, &ext, "data", 4);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ecn, WIRE_ECN_ECT0);
	frame[WIRE_ETH_LEN + 1] |= WIRE_ECN_CE;
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ecn, WIRE_ECN_CE);
	ck_assert(wire_icrc_ok(frame, &pkt));

	p6.ipv6 = true;
	p6.tos = 0xb8 | WIRE_ECN_ECT0;
	len = wire_build(frame, sizeof(frame), &p6, 0, &bth, &ext, "data", 4);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ecn, WIRE_ECN_ECT0);
	frame[WIRE_ETH_LEN + 1] |= WIRE_ECN_CE << 4;  /* the traffic class's low bits */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ecn, WIRE_ECN_CE);
	ck_assert(wire_icrc_ok(frame, &pkt));
}
END_TEST

START_TEST(test_every_truncation_is_safe)
{
	struct wire_ext ext = { .reth = { 0x1000, 0x100, 64 } };
	size_t len = build_write(WIRE_OP_RC_WRITE_ONLY_IMM, 64, &ext);
	struct wire_pkt pkt;

	for (size_t cut = 0; cut < len; cut++) {
		enum wire_status st = parse_exact(frame, cut, &pkt);

		ck_assert_msg(st != WIRE_OK, "accepted a frame cut to %zu bytes", cut);
		ck_assert(!(pkt.layers & WIRE_HAVE_ALL));
		if (cut >= 14 + 20 + 4)
			ck_assert_int_eq(st, WIRE_TRUNCATED);
		else
			ck_assert_int_eq(st, WIRE_NOT_ROCE);
	}
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
}
END_TEST

static void set16(size_t off, unsigned v)
{
	frame[off] = (uint8_t)(v >> 8);
	frame[off + 1] = (uint8_t)v;
}

START_TEST(test_malformations)
{
	struct wire_ext ext = { .reth = { 0x1000, 0x100, 5 } };
	struct wire_pkt pkt;
	size_t len;

	len = build_write(WIRE_OP_RC_WRITE_ONLY, 5, &ext);
	set16(38, 8 + 12 + 16 + 8 + 4 + 4); /* UDP length larger than the IP payload */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_UDP_LENGTH);
	set16(38, 8 + 12 + 16); /* smaller */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_UDP_LENGTH);
	set16(38, 16); /* too small for BTH + ICRC, consistent with IP */
	set16(16, 20 + 16);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_SHORT_BTH);
	set16(16, 20 + 4); /* IP length shorter than IP + UDP headers */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_IP_LENGTH);

	len = build_write(WIRE_OP_RC_WRITE_ONLY, 5, &ext);
	frame[20] |= 0x20; /* More Fragments */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_FRAGMENT);
	frame[20] = 0x00;
	frame[21] = 0x10; /* fragment offset */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_FRAGMENT);

	len = build_write(WIRE_OP_RC_WRITE_ONLY, 5, &ext);
	frame[43] |= 0x01; /* TVer */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_TVER);
	frame[43] &= 0xf0;
	frame[42] = 0x15;
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_UNKNOWN_OPCODE);
	ck_assert(pkt.layers & WIRE_HAVE_BTH);

	len = build_write(WIRE_OP_RC_WRITE_ONLY, 0, &ext);
	frame[43] = 0x10; /* pad 1 with no payload */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_BAD_PAD);

	len = build_write(WIRE_OP_RC_WRITE_ONLY, 8, &ext);
	frame[42] = WIRE_OP_RC_ACK; /* 8 + 12 bytes after an AETH: payload on an ACK */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_UNEXPECTED_PAYLOAD);
	frame[42] = WIRE_OP_RC_WRITE_MIDDLE + 0x20; /* UC WRITE_MIDDLE: fine */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	frame[42] = 0x13; /* COMPARE_SWAP needs 28 bytes, 24 follow */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_SHORT_HEADERS);
}
END_TEST

START_TEST(test_unaligned_body_is_bad_pad)
{
	struct wire_ext ext = { .reth = { 0x1000, 0x100, 4 } };
	struct wire_pkt pkt;
	size_t len = build_write(WIRE_OP_RC_WRITE_ONLY, 4, &ext);

	/* one byte less of payload, lengths adjusted, ICRC ignored: 3 bytes, pad 0 */
	set16(16, (unsigned)(len - 14 - 1));
	set16(38, (unsigned)(len - 34 - 1));
	ck_assert_int_eq(parse_exact(frame, len - 1, &pkt), WIRE_BAD_PAD);
}
END_TEST

START_TEST(test_other_frames_are_not_roce)
{
	struct wire_ext ext = { 0 };
	struct wire_pkt pkt;
	size_t len = build_write(WIRE_OP_RC_WRITE_MIDDLE, 8, &ext);

	set16(36, 4792);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_NOT_ROCE);
	set16(36, 4791);
	frame[23] = 6; /* TCP */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_NOT_ROCE);
	frame[23] = 17;
	set16(12, 0x0806); /* ARP */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_NOT_ROCE);
	set16(12, 0x0800);
	frame[14] = 0x44; /* IHL 4 */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_NOT_ROCE);
}
END_TEST

START_TEST(test_vlan_ipv6_and_options)
{
	struct wire_pkt pkt;
	size_t len;

	len = frames_make(frame, 6, 5, 0x0a, 21);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ip_version, 6);
	ck_assert_uint_eq(pkt.payload_len, 21);
	ck_assert_uint_eq(pkt.dst_ip[15], 2);
	ck_assert(wire_icrc_ok(frame, &pkt));

	len = frames_make(frame, 4, 8, 0x0a, 10);
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_OK);
	ck_assert_uint_eq(pkt.ip_hdr_len, 32);
	ck_assert(wire_icrc_ok(frame, &pkt));

	/* insert an 802.1Q tag after the MAC addresses */
	len = frames_make(frame, 4, 5, 0x0a, 10);
	memmove(frame + 16, frame + 12, len - 12);
	frame[12] = 0x81;
	frame[13] = 0x00;
	frame[14] = 0x20;
	frame[15] = 0x07;
	ck_assert_int_eq(parse_exact(frame, len + 4, &pkt), WIRE_OK);
	ck_assert(pkt.vlan);
	ck_assert_uint_eq(pkt.vlan_tci, 0x2007);
	ck_assert(wire_icrc_ok(frame, &pkt));

	len = frames_make(frame, 6, 5, 0x0a, 21);
	frame[14 + 6] = 44; /* fragment header */
	ck_assert_int_eq(parse_exact(frame, len, &pkt), WIRE_FRAGMENT);
}
END_TEST

START_TEST(test_ethernet_padding_is_ignored)
{
	struct wire_bth bth = { .opcode = WIRE_OP_RC_ACK, .dest_qp = 1 };
	struct wire_ext ext = { .aeth = { WIRE_SYN_ACK, 1 } };
	struct wire_pkt pkt;
	size_t len = wire_build(frame, sizeof(frame), &path, 1, &bth, &ext, NULL, 0);

	memset(frame + len, 0, 64);
	ck_assert_int_eq(parse_exact(frame, len + 6, &pkt), WIRE_OK);
	ck_assert(wire_icrc_ok(frame, &pkt));
}
END_TEST

START_TEST(test_psn_serial_arithmetic)
{
	ck_assert_int_eq(wire_psn_diff(5, 5), 0);
	ck_assert_int_eq(wire_psn_diff(0, 0xffffff), 1);
	ck_assert_int_eq(wire_psn_diff(0xffffff, 0), -1);
	ck_assert_int_eq(wire_psn_diff(0x7fffff, 0), 0x7fffff);
	ck_assert_int_eq(wire_psn_diff(0x800000, 0), -0x800000);
	ck_assert_int_eq(wire_psn_diff(3, 0xfffffe), 5);
}
END_TEST

START_TEST(test_status_names_are_distinct)
{
	for (int a = 0; a < WIRE_STATUS_COUNT; a++)
		for (int b = a + 1; b < WIRE_STATUS_COUNT; b++)
			ck_assert_str_ne(wire_status_name(a), wire_status_name(b));
	ck_assert_str_eq(wire_status_name(WIRE_STATUS_COUNT), "unknown status");
}
END_TEST

/* Three WRITE packets of one flow (MIDDLE, MIDDLE, LAST: the same headers), ids 100-102,
 * the last shorter, as a sender builds them; the GSO frame carries the first whole and the
 * others' UDP payloads. */
#define GSO_PKTS 3
static uint8_t gso_pkt[GSO_PKTS][600];
static size_t gso_len[GSO_PKTS];
static unsigned gso_got;

static size_t build_gso_frame(uint8_t *gso)
{
	static const size_t payload[GSO_PKTS] = { 512, 512, 200 };
	static const uint8_t op[GSO_PKTS] = { 0x07, 0x07, 0x08 };  /* MIDDLE, MIDDLE, LAST */
	struct wire_ext ext = { 0 };
	size_t len = 0;

	for (int i = 0; i < GSO_PKTS; i++) {
		struct wire_bth bth = { .opcode = op[i], .pkey = 0xffff, .dest_qp = 0x123456,
					.psn = 10u + (unsigned)i };
		uint8_t data[512];

		memset(data, 0x30 + i, sizeof(data));
		gso_len[i] = wire_build(gso_pkt[i], sizeof(gso_pkt[i]), &path, (uint16_t)(100 + i),
					&bth, &ext, data, payload[i]);
		ck_assert_uint_gt(gso_len[i], 0);
		if (i == 0) {
			memcpy(gso, gso_pkt[0], gso_len[0]);
			len = gso_len[0];
		} else {
			memcpy(gso + len, gso_pkt[i] + WIRE_GSO_HDR_LEN, gso_len[i] - WIRE_GSO_HDR_LEN);
			len += gso_len[i] - WIRE_GSO_HDR_LEN;
		}
	}
	return len;
}

static void take_segment(void *ctx, const uint8_t *f, size_t len)
{
	struct wire_pkt pkt;

	(void)ctx;
	ck_assert_uint_lt(gso_got, GSO_PKTS);
	ck_assert_uint_eq(len, gso_len[gso_got]);
	ck_assert_mem_eq(f, gso_pkt[gso_got], len);
	ck_assert_int_eq(wire_parse(f, len, &pkt), WIRE_OK);
	ck_assert(wire_icrc_ok(f, &pkt));
	gso_got++;
}

START_TEST(test_gso_frame_cuts_into_the_packets_sent)
{
	size_t len = build_gso_frame(frame);

	gso_got = 0;
	ck_assert(wire_gso_split(frame, len, gso_len[0] - WIRE_GSO_HDR_LEN, take_segment, NULL));
	ck_assert_uint_eq(gso_got, GSO_PKTS);
	/* as rocemud sends it: the first header describes the whole frame */
	len = build_gso_frame(frame);
	wire_gso_set_first(frame, len);
	gso_got = 0;
	ck_assert(wire_gso_split(frame, len, gso_len[0] - WIRE_GSO_HDR_LEN, take_segment, NULL));
	ck_assert_uint_eq(gso_got, GSO_PKTS);
}
END_TEST

START_TEST(test_gso_grouping_rules)
{
	uint8_t other[600];

	build_gso_frame(frame);
	ck_assert(wire_gso_can_follow(gso_pkt[0], gso_len[0], gso_pkt[1], gso_len[1], 1));
	ck_assert(wire_gso_can_follow(gso_pkt[0], gso_len[0], gso_pkt[2], gso_len[2], 2));
	ck_assert(!wire_gso_can_follow(gso_pkt[0], gso_len[0], gso_pkt[2], gso_len[2], 1));
	ck_assert(!wire_gso_can_follow(gso_pkt[2], gso_len[2], gso_pkt[1], gso_len[1], 1));
	ck_assert(!wire_gso_can_follow(gso_pkt[0], gso_len[0], gso_pkt[1], gso_len[1] + 1, 1));
	memcpy(other, gso_pkt[1], gso_len[1]);
	other[WIRE_ETH_LEN + 19] ^= 1;             /* another destination address */
	ck_assert(!wire_gso_can_follow(gso_pkt[0], gso_len[0], other, gso_len[1], 1));
	memcpy(other, gso_pkt[1], gso_len[1]);
	other[WIRE_ETH_LEN + WIRE_IPV4_LEN + 1] ^= 1; /* another source port */
	ck_assert(!wire_gso_can_follow(gso_pkt[0], gso_len[0], other, gso_len[1], 1));
	memcpy(other, gso_pkt[0], gso_len[0]);
	wire_gso_set_first(gso_pkt[0], 3000);
	ck_assert(gso_pkt[0][WIRE_ETH_LEN + WIRE_IPV4_LEN + 6] |
		  gso_pkt[0][WIRE_ETH_LEN + WIRE_IPV4_LEN + 7]);
	ck_assert_uint_eq(gso_pkt[0][WIRE_ETH_LEN + 2] << 8 | gso_pkt[0][WIRE_ETH_LEN + 3],
			  3000 - WIRE_ETH_LEN);
	ck_assert_uint_eq(gso_pkt[0][WIRE_ETH_LEN + WIRE_IPV4_LEN + 4] << 8 |
			  gso_pkt[0][WIRE_ETH_LEN + WIRE_IPV4_LEN + 5],
			  3000 - WIRE_ETH_LEN - WIRE_IPV4_LEN);
	wire_gso_restore_first(gso_pkt[0], gso_len[0]);
	ck_assert_mem_eq(gso_pkt[0], other, gso_len[0]);
}
END_TEST

/* A frame handed to a UDP socket: the socket's id and source port, and an ICRC that still
 * holds (or still fails, when the frame was corrupted on purpose); the frames still ride
 * together. */
START_TEST(test_gso_reflow_for_a_udp_socket)
{
	struct wire_pkt pkt;

	build_gso_frame(frame);
	for (int i = 0; i < GSO_PKTS; i++) {
		uint8_t *f = gso_pkt[i];

		wire_gso_reflow(f, gso_len[i], (uint16_t)i, 40000, wire_gso_reflow_carry(gso_len[i]));
		ck_assert_int_eq(wire_parse(f, gso_len[i], &pkt), WIRE_OK);
		ck_assert(wire_icrc_ok(f, &pkt));
		ck_assert_uint_eq(f[WIRE_ETH_LEN + 4] << 8 | f[WIRE_ETH_LEN + 5], (unsigned)i);
		ck_assert_uint_eq(f[WIRE_ETH_LEN + WIRE_IPV4_LEN] << 8 |
				  f[WIRE_ETH_LEN + WIRE_IPV4_LEN + 1], 40000);
		ck_assert_uint_eq(fold16(sum16(f + WIRE_ETH_LEN, WIRE_IPV4_LEN, 0)), 0xffff);
	}
	ck_assert(wire_gso_same_flow(gso_pkt[0], gso_len[0], gso_pkt[2], gso_len[2]));
	ck_assert(wire_gso_can_follow(gso_pkt[0], gso_len[0], gso_pkt[2], gso_len[2], 2));

	gso_pkt[1][gso_len[1] - 10] ^= 0x40;           /* a payload bit flipped in transit */
	wire_gso_reflow(gso_pkt[1], gso_len[1], 7, 40001, wire_gso_reflow_carry(gso_len[1]));
	ck_assert_int_eq(wire_parse(gso_pkt[1], gso_len[1], &pkt), WIRE_OK);
	ck_assert(!wire_icrc_ok(gso_pkt[1], &pkt));
	gso_pkt[1][gso_len[1] - 10] ^= 0x40;
	ck_assert(wire_icrc_ok(gso_pkt[1], &pkt));
}
END_TEST

START_TEST(test_gso_split_refusals)
{
	size_t len = build_gso_frame(frame);

	gso_got = 0;
	ck_assert(!wire_gso_split(frame, len, 0, take_segment, NULL));
	ck_assert(!wire_gso_split(frame, WIRE_GSO_HDR_LEN, 100, take_segment, NULL));
	frame[WIRE_ETH_LEN + 9] = 6;                    /* TCP */
	ck_assert(!wire_gso_split(frame, len, 100, take_segment, NULL));
	frame[WIRE_ETH_LEN + 9] = 17;
	frame[WIRE_ETH_LEN] = 0x46;                     /* IPv4 options */
	ck_assert(!wire_gso_split(frame, len, 100, take_segment, NULL));
	ck_assert_uint_eq(gso_got, 0);
}
END_TEST

/* What real RoCE NICs sent (the shared captures), rebuilt by wire_build() from what
 * wire_parse() read of it: for every IPv4 RC or UD packet with a good ICRC, every byte from
 * the Ethernet header to the ICRC must come out the same (the NICs all set DF, as
 * wire_build does). A ConnectX-4 Lx's CNP is among them: rocemud's CNPs are built the same
 * way (cc.c), with the DSCP, ECN and BECN that NIC set. */
struct rebuilt {
	long same, skipped, ipv6;
	unsigned opcodes[256];
};

/* The path a parsed frame was sent on, every IP field the builder sets taken from it. */
static struct wire_path path_of(const uint8_t *f, const struct wire_pkt *pkt)
{
	const uint8_t *ip = f + pkt->l3_off;
	struct wire_path wp = { .src_port = pkt->udp_src_port, .ipv6 = pkt->ip_version == 6 };

	memcpy(wp.dst_mac, f, 6);
	memcpy(wp.src_mac, f + 6, 6);
	if (wp.ipv6) {
		wp.tos = (uint8_t)((ip[0] << 4 | ip[1] >> 4) & 0xff);
		wp.flow_label = (uint32_t)(ip[1] & 0x0f) << 16 | (uint32_t)ip[2] << 8 | ip[3];
		wp.ttl = ip[7];
		memcpy(wp.src_ip6, pkt->src_ip, 16);
		memcpy(wp.dst_ip6, pkt->dst_ip, 16);
	} else {
		wp.tos = ip[1];
		wp.ttl = ip[8];
		memcpy(&wp.src_ip, pkt->src_ip, 4);
		memcpy(&wp.dst_ip, pkt->dst_ip, 4);
	}
	return wp;
}

static void rebuild_one(const uint8_t *f, size_t caplen, void *arg)
{
	struct rebuilt *r = arg;
	static uint8_t out[16384];
	struct wire_pkt pkt;
	struct wire_path wp;
	size_t len, udp_end, at = 0;
	uint16_t ip_id;

	if (wire_parse(f, caplen, &pkt) != WIRE_OK || pkt.vlan ||
	    (pkt.ip_version == 4 && pkt.ip_hdr_len != WIRE_IPV4_LEN) || !wire_icrc_ok(f, &pkt)) {
		r->skipped++;
		return;
	}
	wp = path_of(f, &pkt);
	ip_id = wp.ipv6 ? 0 : (uint16_t)(f[WIRE_ETH_LEN + 4] << 8 | f[WIRE_ETH_LEN + 5]);
	len = wire_build(out, sizeof(out), &wp, ip_id, &pkt.bth, &pkt.ext, f + pkt.payload_off,
			 pkt.payload_len);
	udp_end = pkt.l4_off + pkt.udp_len;
	/* the reserved bits beside FECN and BECN are the NIC's to set (the ICRC skips the byte) */
	out[pkt.l4_off + WIRE_UDP_LEN + 4] |= f[pkt.l4_off + WIRE_UDP_LEN + 4] & 0x3f;
	ck_assert_msg(len == udp_end, "opcode 0x%02x: rebuilt %zu bytes, the NIC sent %zu",
		      pkt.bth.opcode, len, udp_end);
	while (at < len && out[at] == f[at])
		at++;
	ck_assert_msg(at == len, "opcode 0x%02x differs from the NIC's frame at byte %zu "
		      "(0x%02x, the NIC 0x%02x)", pkt.bth.opcode, at, out[at], f[at]);
	r->same++;
	r->ipv6 += wp.ipv6;
	r->opcodes[pkt.bth.opcode]++;
}

START_TEST(test_builder_matches_real_nics)
{
	const char *dir = testutil_captures_dir();
	struct testutil_expected rows[64];
	struct rebuilt r = { 0 };
	int n;

	if (!dir)
		return;
	n = testutil_read_expected(dir, rows, 64);
	for (int i = 0; i < n; i++) {
		char *file;

		ck_assert_int_gt(asprintf(&file, "%s/%s", dir, rows[i].file), 0);
		ck_assert_int_ge(testutil_each_frame(file, rebuild_one, &r), 0);
		free(file);
	}
	ck_assert_int_gt(r.same, 0);
	/* every kind rocemu sends was seen: SEND, WRITE, READ request and response, ACK */
	ck_assert(r.opcodes[WIRE_OP_RC_SEND_ONLY] && r.opcodes[WIRE_OP_RC_WRITE_ONLY] &&
		  r.opcodes[WIRE_OP_RC_READ_REQUEST] && r.opcodes[WIRE_OP_RC_READ_RESP_ONLY] &&
		  r.opcodes[WIRE_OP_RC_ACK] && r.opcodes[WIRE_OP_CNP]);
	fprintf(stderr, "rebuilt %ld captured packets byte for byte, ICRC included; %ld frames "
		"were not RoCE with a good ICRC; %ld IPv6, %ld UD, %u CNP\n", r.same, r.skipped,
		r.ipv6, (long)r.opcodes[WIRE_OP_UD_SEND_ONLY] + r.opcodes[WIRE_OP_UD_SEND_ONLY_IMM],
		r.opcodes[WIRE_OP_CNP]);
}
END_TEST

/* The get asks for one entry: its family, interface and address, nothing else. */
START_TEST(test_rtnl_neigh_request)
{
	uint8_t buf[RTNL_NEIGH_REQ_MAX] __attribute__((aligned(4)));
	const uint8_t v4[4] = { 198, 18, 0, 2 }, v6[16] = { 0xfe, 0x80, [15] = 7 };
	const struct nlmsghdr *nh = (const struct nlmsghdr *)buf;
	const struct ndmsg *nd = NLMSG_DATA(nh);
	const struct rtattr *a = (const struct rtattr *)((const char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	size_t len = rtnl_neigh_request(buf, 77, AF_INET, 5, v4);

	ck_assert_uint_eq(len, nh->nlmsg_len);
	ck_assert_uint_eq(nh->nlmsg_type, RTM_GETNEIGH);
	ck_assert_uint_eq(nh->nlmsg_flags, NLM_F_REQUEST);
	ck_assert_uint_eq(nh->nlmsg_seq, 77);
	ck_assert_uint_eq(nd->ndm_family, AF_INET);
	ck_assert_int_eq(nd->ndm_ifindex, 5);
	ck_assert_uint_eq(a->rta_type, NDA_DST);
	ck_assert_uint_eq(RTA_PAYLOAD(a), 4);
	ck_assert_mem_eq(RTA_DATA(a), v4, 4);
	len = rtnl_neigh_request(buf, 78, AF_INET6, 5, v6);
	ck_assert_uint_eq(RTA_PAYLOAD(a), 16);
	ck_assert_mem_eq(RTA_DATA(a), v6, 16);
	ck_assert_uint_eq(len, NLMSG_LENGTH(sizeof(*nd)) + RTA_LENGTH(16));
	ck_assert_uint_eq(rtnl_neigh_request(buf, 79, AF_UNIX, 5, v4), 0);
}
END_TEST

/* An answer as the kernel writes it: an RTM_NEWNEIGH in state with lladdr, or an error. */
static size_t neigh_answer(void *buf, uint32_t seq, uint16_t type, uint16_t state,
			   const uint8_t *mac)
{
	struct nlmsghdr *nh = buf;
	struct ndmsg *nd = NLMSG_DATA(nh);
	struct rtattr *a = (struct rtattr *)((char *)nd + NLMSG_ALIGN(sizeof(*nd)));

	memset(buf, 0, 128);
	*nh = (struct nlmsghdr){ .nlmsg_type = type, .nlmsg_seq = seq,
				 .nlmsg_len = NLMSG_LENGTH(sizeof(*nd)) };
	nd->ndm_state = state;
	if (mac) {
		a->rta_type = NDA_LLADDR;
		a->rta_len = RTA_LENGTH(6);
		memcpy(RTA_DATA(a), mac, 6);
		nh->nlmsg_len += RTA_LENGTH(6);
	}
	return NLMSG_ALIGN(nh->nlmsg_len);
}

START_TEST(test_rtnl_neigh_answer)
{
	uint8_t buf[512] __attribute__((aligned(4))), mac[6] = { 0 };
	const uint8_t peer[6] = { 2, 0, 0, 0, 0, 9 };
	size_t n;

	n = neigh_answer(buf, 5, RTM_NEWNEIGH, NUD_REACHABLE, peer);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 1);
	ck_assert_mem_eq(mac, peer, 6);
	n = neigh_answer(buf, 5, RTM_NEWNEIGH, NUD_STALE, peer);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 1);
	n = neigh_answer(buf, 5, RTM_NEWNEIGH, NUD_INCOMPLETE, peer);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 0);
	n = neigh_answer(buf, 5, RTM_NEWNEIGH, NUD_FAILED, NULL);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 0);
	n = neigh_answer(buf, 5, RTM_NEWNEIGH, NUD_REACHABLE, NULL);   /* no lladdr */
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 0);
	n = neigh_answer(buf, 5, NLMSG_ERROR, 0, NULL);               /* no such entry */
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 0);
	/* an answer to an earlier get first, then ours */
	n = neigh_answer(buf, 4, RTM_NEWNEIGH, NUD_FAILED, NULL);
	n += neigh_answer(buf + n, 5, RTM_NEWNEIGH, NUD_PERMANENT, peer);
	memset(mac, 0, 6);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), 1);
	ck_assert_mem_eq(mac, peer, 6);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 6, mac), -1);
	ck_assert_int_eq(rtnl_neigh_answer(buf, 3, 5, mac), -1);     /* less than a header */
	/* ours cut short by the buffer, and a length shorter than its own header */
	n = neigh_answer(buf, 5, RTM_NEWNEIGH, NUD_REACHABLE, peer);
	ck_assert_int_eq(rtnl_neigh_answer(buf, n - 4, 5, mac), -1);
	((struct nlmsghdr *)buf)->nlmsg_len = sizeof(struct nlmsghdr) - 1;
	ck_assert_int_eq(rtnl_neigh_answer(buf, n, 5, mac), -1);
}
END_TEST

/* A link message as the kernel tells it to a socket subscribed to RTMGRP_LINK. */
static size_t link_message(void *buf, uint16_t type, int ifindex, unsigned flags)
{
	struct nlmsghdr *nh = buf;
	struct ifinfomsg *ifi = NLMSG_DATA(nh);

	memset(buf, 0, NLMSG_SPACE(sizeof(*ifi)));
	*nh = (struct nlmsghdr){ .nlmsg_type = type, .nlmsg_len = NLMSG_LENGTH(sizeof(*ifi)) };
	ifi->ifi_index = ifindex;
	ifi->ifi_flags = flags;
	return NLMSG_ALIGN(nh->nlmsg_len);
}

START_TEST(test_rtnl_link_state)
{
	uint8_t buf[512] __attribute__((aligned(4)));
	bool running = false;
	size_t n;

	n = link_message(buf, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
	ck_assert_int_eq(rtnl_link_state(buf, n, 7, &running), 1);
	ck_assert(running);
	ck_assert_int_eq(rtnl_link_state(buf, n, 8, &running), 0);   /* another link's */
	n = link_message(buf, RTM_NEWLINK, 7, IFF_UP);                 /* no carrier */
	ck_assert_int_eq(rtnl_link_state(buf, n, 7, &running), 1);
	ck_assert(!running);
	/* down, then up again in one read: the last one counts */
	n = link_message(buf, RTM_NEWLINK, 7, 0);
	n += link_message(buf + n, RTM_NEWLINK, 9, 0);
	n += link_message(buf + n, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
	ck_assert_int_eq(rtnl_link_state(buf, n, 7, &running), 1);
	ck_assert(running);
	n = link_message(buf, RTM_DELLINK, 7, IFF_UP | IFF_RUNNING);
	ck_assert_int_eq(rtnl_link_state(buf, n, 7, &running), 1);
	ck_assert(!running);
	n = link_message(buf, RTM_NEWADDR, 7, IFF_UP | IFF_RUNNING);   /* not a link message */
	ck_assert_int_eq(rtnl_link_state(buf, n, 7, &running), 0);
	ck_assert_int_eq(rtnl_link_state(buf, 3, 7, &running), 0);     /* less than a header */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("wire");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_opcode_table_header_sizes);
	tcase_add_test(tc, test_opcode_table_unknowns);
	tcase_add_test(tc, test_write_round_trip);
	tcase_add_test(tc, test_flush_feth);
	tcase_add_test(tc, test_ack_and_nak);
	tcase_add_test(tc, test_builder_refusals);
	tcase_add_test(tc, test_ipv4_header_fields);
	tcase_add_test(tc, test_ipv6_ud_round_trip);
	tcase_add_test(tc, test_ecn_congestion_experienced);
	tcase_add_test(tc, test_every_truncation_is_safe);
	tcase_add_test(tc, test_malformations);
	tcase_add_test(tc, test_unaligned_body_is_bad_pad);
	tcase_add_test(tc, test_other_frames_are_not_roce);
	tcase_add_test(tc, test_vlan_ipv6_and_options);
	tcase_add_test(tc, test_ethernet_padding_is_ignored);
	tcase_add_test(tc, test_psn_serial_arithmetic);
	tcase_add_test(tc, test_status_names_are_distinct);
	tcase_add_test(tc, test_gso_frame_cuts_into_the_packets_sent);
	tcase_add_test(tc, test_gso_grouping_rules);
	tcase_add_test(tc, test_gso_split_refusals);
	tcase_add_test(tc, test_gso_reflow_for_a_udp_socket);
	tcase_add_test(tc, test_builder_matches_real_nics);
	tcase_add_test(tc, test_rtnl_neigh_request);
	tcase_add_test(tc, test_rtnl_neigh_answer);
	tcase_add_test(tc, test_rtnl_link_state);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
