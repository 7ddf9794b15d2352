/* libFuzzer harness for the frame parser: any bytes must parse without reading past the
 * capture, and a frame that parses must keep its promises (offsets inside the capture,
 * payload and headers consistent with the UDP length). The sources are included so the
 * harness builds with the fuzzer's own flags. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "icrc/icrc.c"
#include "wire/build.c"
#include "wire/opcode.c"
#include "wire/parse.c"
#include "wire/syndrome.c"

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
	return 0;
}
