/* Writes one seed frame per known opcode (and a few layer variants) into a folder, built by
 * wire/ itself: the committed fuzz corpus starts from these, not from the shared captures. */
#include <stdio.h>
#include <string.h>

#include "test/frames.h"
#include "wire/cm_mad.h"
#include "wire/wire.h"

static int write_seed(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len) {
		perror(path);
		return -1;
	}
	return fclose(f);
}

/* One CM MAD of each message, as the 256 bytes and in its UD frame to QP 1; the REQ carries
 * a CMA header. */
static int write_cm_seeds(const char *dir, const struct wire_path *path)
{
	static const uint16_t attrs[] = { CM_ATTR_REQ, CM_ATTR_MRA, CM_ATTR_REJ, CM_ATTR_REP,
					  CM_ATTR_RTU, CM_ATTR_DREQ, CM_ATTR_DREP,
					  CM_ATTR_SIDR_REQ, CM_ATTR_SIDR_REP };
	const struct cm_cma_hdr cma = { .ip_version = 4, .src_port = 0xc32c,
					.src_ip = { 198, 18, 0, 1 }, .dst_ip = { 198, 18, 0, 2 } };
	uint8_t mad[CM_MAD_LEN], frame[512];
	char name[64];

	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		struct cm_mad m = { .hdr = { .tid = 0x200000001ull, .attr_id = attrs[i] } };
		size_t len;

		m.req.local_comm_id = 0x01020304;  /* every message starts with an ID */
		if (attrs[i] == CM_ATTR_REQ) {
			m.req.service_id = cm_service_id(CM_PS_TCP, 4420);
			m.req.path_mtu = 3;
			cm_cma_build(&cma, m.req.private_data);
		}
		if (cm_mad_build(&m, mad) != CM_MAD_LEN)
			return -1;
		snprintf(name, sizeof(name), "cm-%s", cm_attr_name(attrs[i]));
		if (write_seed(dir, name, mad, sizeof(mad)))
			return -1;
		len = cm_mad_frame(frame, sizeof(frame), path, 1, 0, mad);
		snprintf(name, sizeof(name), "cm-frame-%s", cm_attr_name(attrs[i]));
		if (!len || write_seed(dir, name, frame, len))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t buf[9000], payload[300];
	const struct wire_path path = { .src_mac = { 2, 0, 0, 0, 0, 1 }, .dst_mac = { 2, 0, 0, 0, 0, 2 },
					.src_ip = 0x010012c6, .dst_ip = 0x020012c6, .ttl = 64 };
	struct wire_ext ext = { .reth = { 0x7f0000001000ull, 0x1234, 300 }, .imm = 7,
				.aeth = { WIRE_SYN_ACK, 1 } };
	char name[64];
	size_t len;

	if (argc != 2) {
		fprintf(stderr, "usage: make_seeds DIR\n");
		return 2;
	}
	for (int op = 0; op < 256; op++) {
		const struct wire_opcode_info *info = wire_opcode_info((uint8_t)op);
		struct wire_bth bth = { .opcode = (uint8_t)op, .pkey = 0xffff, .dest_qp = 0x11,
					.ack_req = true, .psn = 5 };

		if (!info)
			continue;
		len = wire_build(buf, sizeof(buf), &path, 1, &bth, &ext, payload,
				 info->payload ? 299 : 0);
		snprintf(name, sizeof(name), "op%02x", op);
		if (!len || write_seed(argv[1], name, buf, len))
			return 1;
	}
	if (write_cm_seeds(argv[1], &path))
		return 1;
	len = frames_make(buf, 6, 5, 0x0a, 64);
	if (write_seed(argv[1], "ipv6", buf, len))
		return 1;
	len = frames_make(buf, 4, 9, 0x0a, 64);
	if (write_seed(argv[1], "ipv4-options", buf, len))
		return 1;
	memmove(buf + 16, buf + 12, len - 12);
	memcpy(buf + 12, "\x81\x00\x00\x05", 4);
	return write_seed(argv[1], "vlan", buf, len + 4) ? 1 : 0;
}
