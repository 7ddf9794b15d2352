/* Checks the ICRC of every RoCEv2 frame of a pcap file with the tests' reference CRC
 * (frames.c: zlib's crc32 over a masked copy), which shares no code with icrc/: what
 * rocemud wrote and what `rocemuctl decode` accepted is checked by a second hand. A frame
 * a sender's UDP GSO left whole (a run of one QP's packets, each with its ICRC) counts
 * as its packets when wire_gso_find_pieces() (wire/'s GSO code: the cut as Linux cuts,
 * no CRC in it) finds the size at which every piece checks.
 *   pcap_icrc FILE...   prints "FILE: N frames (V IPv4, S IPv6), every ICRC valid", and
 *                       how many were GSO frames holding how many packets; exit 1 naming
 *                       the first frame whose trailer differs */
#include <pcap/pcap.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "test/frames.h"
#include "wire/wire.h"

#define ETH_LEN 14
#define ROCE_PORT 4791

/* The frame's length without Ethernet padding, from its IP header; 0 when it is not an
 * untagged IPv4 or IPv6 UDP datagram to 4791 captured whole. */
static size_t roce_length(const uint8_t *f, size_t caplen, int *version)
{
	size_t l3_len, ihl;
	uint16_t type;

	if (caplen < ETH_LEN + 40)
		return 0;
	type = (uint16_t)(f[12] << 8 | f[13]);
	if (type == 0x0800 && f[ETH_LEN] >> 4 == 4 && f[ETH_LEN + 9] == 17) {
		ihl = (size_t)(f[ETH_LEN] & 15) * 4;
		l3_len = (size_t)(f[ETH_LEN + 2] << 8 | f[ETH_LEN + 3]);
		*version = 4;
	} else if (type == 0x86dd && f[ETH_LEN] >> 4 == 6 && f[ETH_LEN + 6] == 17) {
		ihl = 40;
		l3_len = 40 + (size_t)(f[ETH_LEN + 4] << 8 | f[ETH_LEN + 5]);
		*version = 6;
	} else {
		return 0;
	}
	if (ETH_LEN + l3_len > caplen || l3_len < ihl + 8 + 12 + 4 ||
	    (f[ETH_LEN + ihl + 2] << 8 | f[ETH_LEN + ihl + 3]) != ROCE_PORT)
		return 0;
	return ETH_LEN + l3_len;
}

static bool trailer_ok(const uint8_t *f, size_t len)
{
	uint32_t got = (uint32_t)f[len - 4] | (uint32_t)f[len - 3] << 8 |
		       (uint32_t)f[len - 2] << 16 | (uint32_t)f[len - 1] << 24;

	return frames_reference_icrc(f, len) == got;
}

static bool piece_ok(const uint8_t *f, size_t len)
{
	return len > ETH_LEN + 4 && trailer_ok(f, len);
}

/* The packets a GSO frame of len bytes holds, every one's ICRC right; 0 when it is not
 * one (or a piece is wrong). */
static unsigned gso_packets(const uint8_t *f, size_t len)
{
	static uint8_t copy[ETH_LEN + 4 + 65536];
	struct wire_pkt pkt;
	unsigned n = 0;

	if (len > sizeof(copy) || wire_parse(f, len, &pkt) != WIRE_OK ||
	    !wire_gso_find_pieces(f, len, &pkt, piece_ok, copy, &n))
		return 0;
	return n;
}

static int check_file(const char *file)
{
	char err[PCAP_ERRBUF_SIZE];
	pcap_t *p = pcap_open_offline(file, err);
	struct pcap_pkthdr *h;
	const uint8_t *f;
	long n = 0, v4 = 0, v6 = 0, frame = 0, gso_frames = 0, gso_held = 0;
	int rc;

	if (!p) {
		fprintf(stderr, "pcap_icrc: %s: %s\n", file, err);
		return 1;
	}
	while ((rc = pcap_next_ex(p, &h, &f)) == 1) {
		int version = 0;
		size_t len = roce_length(f, h->caplen, &version);
		unsigned held = 1;

		frame++;
		if (!len)
			continue;
		if (!trailer_ok(f, len) && !(held = gso_packets(f, len))) {
			printf("%s: frame %ld: ICRC 0x%02x%02x%02x%02x, the reference CRC says 0x%08x\n",
			       file, frame, f[len - 1], f[len - 2], f[len - 3], f[len - 4],
			       frames_reference_icrc(f, len));
			pcap_close(p);
			return 1;
		}
		if (held > 1) {
			gso_frames++;
			gso_held += held;
		}
		n++;
		v4 += version == 4;
		v6 += version == 6;
	}
	pcap_close(p);
	printf("%s: %ld frames (%ld IPv4, %ld IPv6), every ICRC valid", file, n, v4, v6);
	if (gso_frames)
		printf(" (%ld of them GSO frames holding %ld packets)", gso_frames, gso_held);
	putchar('\n');
	return n ? 0 : 1;
}

int main(int argc, char **argv)
{
	int status = argc < 2;

	for (int i = 1; i < argc; i++)
		status |= check_file(argv[i]);
	return status;
}
