/* libFuzzer harness for the CM MAD parser. The input is taken twice: as a frame (a CM MAD
 * when it is a UD SEND_ONLY to QP 1, as the daemon will receive one) and as the MAD bytes
 * themselves. Any bytes must parse without reading past them and with a named status; a MAD
 * that parses must build to 256 bytes that parse to the same message and build to the same
 * bytes again (parse(build(parse(x))) is stable), and travel in a frame that gives it back. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "wire/cm_mad.h"
#include "wire/wire.h"

static void check_cma(const struct cm_mad *m)
{
	struct cm_cma_hdr h, back;
	uint8_t b[CM_CMA_HDR_LEN];
	uint16_t space, port;

	if (cm_service_id_ip(m->req.service_id, &space, &port))
		assert(cm_service_id(space, port) == m->req.service_id);
	if (!cm_cma_parse(m->req.private_data, sizeof(m->req.private_data), &h))
		return;
	cm_cma_build(&h, b);
	assert(cm_cma_parse(b, sizeof(b), &back));
	assert(back.ip_version == h.ip_version && back.src_port == h.src_port);
	assert(!memcmp(back.src_ip, h.src_ip, 16) && !memcmp(back.dst_ip, h.dst_ip, 16));
}

/* The rebuilt MAD, carried in a frame and found there again. */
static void check_frame(const uint8_t built[CM_MAD_LEN])
{
	static const struct wire_path path = { .src_mac = { 2, 0, 0, 0, 0, 1 },
					       .dst_mac = { 2, 0, 0, 0, 0, 2 },
					       .src_ip = 0x010012c6, .dst_ip = 0x020012c6,
					       .src_port = 0xc0de, .ttl = 64 };
	uint8_t frame[512];
	const uint8_t *in;
	struct wire_pkt pkt;
	size_t len = cm_mad_frame(frame, sizeof(frame), &path, 1, 5, built);

	assert(len == WIRE_BASE_LEN + WIRE_DETH_LEN + CM_MAD_LEN + WIRE_ICRC_LEN);
	assert(wire_parse(frame, len, &pkt) == WIRE_OK && wire_icrc_ok(frame, &pkt));
	assert(cm_mad_in_frame(frame, &pkt, &in) == CM_MAD_OK);
	assert(!memcmp(in, built, CM_MAD_LEN));
}

static void check_mad(const uint8_t *buf, size_t len)
{
	struct cm_mad m, again;
	uint8_t built[CM_MAD_LEN], rebuilt[CM_MAD_LEN];
	enum cm_mad_status st = cm_mad_parse(buf, len, &m);

	assert((unsigned)st < CM_MAD_STATUS_COUNT && cm_mad_status_name(st));
	if (st != CM_MAD_OK)
		return;
	assert(cm_attr_name(m.hdr.attr_id) && strcmp(cm_attr_name(m.hdr.attr_id), "unknown"));
	assert(cm_mad_build(&m, built) == CM_MAD_LEN);
	assert(cm_mad_parse(built, sizeof(built), &again) == CM_MAD_OK);
	assert(cm_mad_build(&again, rebuilt) == CM_MAD_LEN);
	assert(!memcmp(built, rebuilt, CM_MAD_LEN));
	/* the header up to the reserved field is rebuilt as it came */
	assert(!memcmp(built, buf, 18));
	if (m.hdr.attr_id == CM_ATTR_REQ)
		check_cma(&m);
	if (m.hdr.attr_id == CM_ATTR_REJ)
		assert(cm_rej_reason_name(m.rej.reason));
	if (m.hdr.attr_id == CM_ATTR_SIDR_REP)
		assert(cm_sidr_status_name(m.sidr_rep.status));
	check_frame(built);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
	const uint8_t *mad;
	struct wire_pkt pkt;
	enum cm_mad_status st;

	memcpy(copy, data, size);
	if (wire_parse(copy, size, &pkt) == WIRE_OK) {
		st = cm_mad_in_frame(copy, &pkt, &mad);
		assert((unsigned)st < CM_MAD_STATUS_COUNT);
		if (st == CM_MAD_OK)
			check_mad(mad, CM_MAD_LEN);
	}
	check_mad(copy, size);
	free(copy);
	return 0;
}
