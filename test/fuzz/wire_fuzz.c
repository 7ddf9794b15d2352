/* libFuzzer harness for the frame parser: any bytes must parse without reading past the
 * capture, and a frame that parses must keep its promises (offsets inside the capture,
 * payload and headers consistent with the UDP length). The same bytes taken as a GSO frame
 * must cut into packets inside the frame that carry all of its payload. The sources are included so the
 * harness builds with the fuzzer's own flags. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "icrc/icrc.h"
#include "wire/wire.h"

static void check_view(const uint8_t *copy, size_t size, const struct wire_pkt *pkt)
{
	size_t end = (size_t)pkt->l4_off + pkt->udp_len;

	assert(end <= size);
	assert(pkt->op != NULL);
	assert((size_t)pkt->payload_off + pkt->payload_len + pkt->bth.pad + WIRE_ICRC_LEN == end);
	assert(pkt->payload_off == pkt->l4_off + WIRE_UDP_LEN + WIRE_BTH_LEN + pkt->op->hdr_len);
	assert(pkt->payload_len == 0 || pkt->op->payload);
	(void)wire_icrc_ok(copy, pkt);
}

/* Each packet cut from a GSO frame lies inside the frame and parses as any frame does. */
struct gso_cut {
	const uint8_t *frame;
	size_t len;
	size_t hdr;              /* Ethernet (and VLAN), IPv4 and UDP headers */
	size_t payload;          /* UDP payload bytes delivered */
};

static void take_cut(void *ctx, const uint8_t *f, size_t len)
{
	struct gso_cut *cut = ctx;
	struct wire_pkt pkt;

	assert(f >= cut->frame && f + len <= cut->frame + cut->len);
	assert(len > cut->hdr);
	cut->payload += len - cut->hdr;
	if (wire_parse(f, len, &pkt) == WIRE_OK)
		check_view(f, len, &pkt);
}

/* The input's first byte, when there is one, picks a segment size. */
static void fuzz_gso_split(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	struct gso_cut cut = { .len = size };
	size_t seg = size ? (size_t)data[0] * 7 + 1 : 0;

	if (size < 2)
		return;
	copy = malloc(size);
	memcpy(copy, data, size);
	cut.frame = copy;
	cut.hdr = WIRE_GSO_HDR_LEN + (size >= 18 && copy[12] == 0x81 && copy[13] == 0 ?
				      WIRE_VLAN_LEN : 0);
	if (wire_gso_split(copy, size, seg, take_cut, &cut))
		assert(cut.payload == size - cut.hdr);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
	struct wire_pkt pkt;
	enum wire_status st;
	char name[48];

	memcpy(copy, data, size);
	st = wire_parse(copy, size, &pkt);
	assert((unsigned)st < WIRE_STATUS_COUNT);
	if (st == WIRE_OK)
		check_view(copy, size, &pkt);
	else if (pkt.layers & WIRE_HAVE_UDP)
		(void)wire_icrc_ok(copy, &pkt);
	if (pkt.layers & WIRE_HAVE_ALL)
		wire_syndrome_name(pkt.ext.aeth.syndrome, name, sizeof(name));
	free(copy);
	fuzz_gso_split(data, size);
	return 0;
}
