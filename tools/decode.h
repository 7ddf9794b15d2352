/* decode: print the RoCEv2 packets of a pcap file, one line (or JSON object) each. */
#ifndef ROCEMU_DECODE_H
#define ROCEMU_DECODE_H

#include <stdbool.h>
#include <stdio.h>

struct decode_summary {
	long frames;        /* every frame in the file */
	long roce;          /* RoCEv2 packets (UDP datagrams to port 4791, decodable or not) */
	long complete;      /* of those, the ones captured whole (ICRC checkable) */
	long other;         /* frames that are not RoCEv2 */
	long icrc_valid;
	long icrc_bad;      /* RoCEv2 packets whose trailer could be checked and was wrong */
	long malformed;     /* RoCEv2 packets that could not be decoded */
	long gso_frames;    /* frames that held a run of packets (a sender's UDP GSO) */
	long gso_packets;   /* the packets they held, each counted above as a packet */
	long per_opcode[256];
	long cm_mads;       /* UD SENDs to QP 1: CM MADs, decodable or not */
	long cm_malformed;  /* of those, the ones cm_mad_parse() refused */
	long per_cm_attr[32]; /* decoded CM MADs by attribute ID (REQ is 0x10) */
};

/* Decodes path into out (text lines, or one JSON object a line with json). Returns 0, or -1
 * with a message in err when the file cannot be read as an Ethernet pcap. */
int decode_file(const char *path, FILE *out, bool json, struct decode_summary *sum,
		char *err, size_t errlen);
void decode_print_summary(FILE *out, const struct decode_summary *sum);
/* "4(22) 6(2) ...": opcode (decimal) and count, ascending, as EXPECTED.tsv writes them. */
void decode_format_opcodes(const struct decode_summary *sum, char *buf, size_t len);

#endif
