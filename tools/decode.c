#include "tools/decode.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/wire.h"

static void format_ip(const struct wire_pkt *pkt, const uint8_t *addr, char *buf, size_t len)
{
	inet_ntop(pkt->ip_version == 4 ? AF_INET : AF_INET6, addr, buf, (socklen_t)len);
}

static void print_text(FILE *out, long frame, const struct wire_pkt *pkt, const char *src,
		       const char *dst, bool icrc_ok)
{
	const struct wire_bth *bth = &pkt->bth;
	const unsigned headers = pkt->op->headers;
	char syn[48];

	fprintf(out, "%6ld  %s -> %s  %-36s qp 0x%06x psn 0x%06x%s", frame, src, dst,
		pkt->op->name, bth->dest_qp, bth->psn, bth->ack_req ? " ackreq" : "");
	if (headers & WIRE_HDR_DETH)
		fprintf(out, "  deth qkey 0x%08x src_qp 0x%06x", pkt->ext.deth.qkey,
			pkt->ext.deth.src_qp);
	if (headers & WIRE_HDR_RETH)
		fprintf(out, "  reth va 0x%016" PRIx64 " rkey 0x%08x len %u", pkt->ext.reth.va,
			pkt->ext.reth.rkey, pkt->ext.reth.length);
	if (headers & WIRE_HDR_AETH)
		fprintf(out, "  aeth %s msn %u",
			wire_syndrome_name(pkt->ext.aeth.syndrome, syn, sizeof(syn)),
			pkt->ext.aeth.msn);
	if (headers & WIRE_HDR_IMMDT)
		fprintf(out, "  imm 0x%08x", pkt->ext.imm);
	fprintf(out, "  payload %u pad %u icrc %s\n", pkt->payload_len, bth->pad,
		icrc_ok ? "ok" : "BAD");
}

static void print_json(FILE *out, long frame, const struct wire_pkt *pkt, const char *src,
		       const char *dst, bool icrc_ok)
{
	const struct wire_bth *bth = &pkt->bth;
	const unsigned headers = pkt->op->headers;

	fprintf(out, "{\"frame\":%ld,\"ip_version\":%u,\"src\":\"%s\",\"dst\":\"%s\","
		"\"opcode\":%u,\"opcode_name\":\"%s\",\"dest_qp\":%u,\"psn\":%u,"
		"\"ack_req\":%s,\"pad\":%u,\"payload_len\":%u,\"icrc_ok\":%s",
		frame, pkt->ip_version, src, dst, bth->opcode, pkt->op->name, bth->dest_qp,
		bth->psn, bth->ack_req ? "true" : "false", bth->pad, pkt->payload_len,
		icrc_ok ? "true" : "false");
	if (headers & WIRE_HDR_DETH)
		fprintf(out, ",\"deth\":{\"qkey\":%u,\"src_qp\":%u}", pkt->ext.deth.qkey,
			pkt->ext.deth.src_qp);
	if (headers & WIRE_HDR_RETH)
		fprintf(out, ",\"reth\":{\"va\":%" PRIu64 ",\"rkey\":%u,\"length\":%u}",
			pkt->ext.reth.va, pkt->ext.reth.rkey, pkt->ext.reth.length);
	if (headers & WIRE_HDR_AETH)
		fprintf(out, ",\"aeth\":{\"syndrome\":%u,\"msn\":%u}", pkt->ext.aeth.syndrome,
			pkt->ext.aeth.msn);
	if (headers & WIRE_HDR_IMMDT)
		fprintf(out, ",\"imm\":%u", pkt->ext.imm);
	fputs("}\n", out);
}

static void print_error(FILE *out, bool json, long frame, enum wire_status st)
{
	if (json)
		fprintf(out, "{\"frame\":%ld,\"error\":\"%s\"}\n", frame, wire_status_name(st));
	else
		fprintf(out, "%6ld  malformed RoCEv2 packet: %s\n", frame, wire_status_name(st));
}

static void count(struct decode_summary *sum, const struct wire_pkt *pkt, enum wire_status st,
		  bool icrc_ok)
{
	sum->roce++;
	if (pkt->layers & WIRE_HAVE_BTH)
		sum->per_opcode[pkt->bth.opcode]++;
	if (pkt->layers & WIRE_HAVE_UDP)
		sum->complete++;
	if (icrc_ok)
		sum->icrc_valid++;
	else if (pkt->layers & WIRE_HAVE_UDP)
		sum->icrc_bad++;
	if (st != WIRE_OK)
		sum->malformed++;
}

static void decode_frame(FILE *out, bool json, long frame, const uint8_t *data, size_t caplen,
			 struct decode_summary *sum)
{
	struct wire_pkt pkt;
	enum wire_status st = wire_parse(data, caplen, &pkt);
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	bool icrc_ok;

	if (st == WIRE_NOT_ROCE) {
		sum->other++;
		return;
	}
	icrc_ok = wire_icrc_ok(data, &pkt);
	count(sum, &pkt, st, icrc_ok);
	if (st != WIRE_OK) {
		print_error(out, json, frame, st);
		return;
	}
	format_ip(&pkt, pkt.src_ip, src, sizeof(src));
	format_ip(&pkt, pkt.dst_ip, dst, sizeof(dst));
	(json ? print_json : print_text)(out, frame, &pkt, src, dst, icrc_ok);
}

int decode_file(const char *path, FILE *out, bool json, struct decode_summary *sum,
		char *err, size_t errlen)
{
	char perr[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *hdr;
	const u_char *data;
	pcap_t *p;
	int rc;

	memset(sum, 0, sizeof(*sum));
	p = pcap_open_offline(path, perr);
	if (!p) {
		snprintf(err, errlen, "cannot read %s: %s", path, perr);
		return -1;
	}
	if (pcap_datalink(p) != DLT_EN10MB) {
		snprintf(err, errlen, "%s: link type %s is not Ethernet", path,
			 pcap_datalink_val_to_name(pcap_datalink(p)));
		pcap_close(p);
		return -1;
	}
	while ((rc = pcap_next_ex(p, &hdr, &data)) == 1)
		decode_frame(out, json, ++sum->frames, data, hdr->caplen, sum);
	if (rc == PCAP_ERROR)
		snprintf(err, errlen, "%s: %s after frame %ld", path, pcap_geterr(p), sum->frames);
	pcap_close(p);
	return rc == PCAP_ERROR ? -1 : 0;
}

void decode_format_opcodes(const struct decode_summary *sum, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int op = 0; op < 256 && used < len; op++) {
		if (!sum->per_opcode[op])
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%d(%ld)", used ? " " : "", op,
					 sum->per_opcode[op]);
	}
}

void decode_print_summary(FILE *out, const struct decode_summary *sum)
{
	char ops[1024];

	decode_format_opcodes(sum, ops, sizeof(ops));
	fprintf(out, "frames %ld, RoCEv2 packets %ld (captured whole %ld, other frames %ld), "
		"ICRC valid %ld, bad ICRC %ld, malformed %ld\n", sum->frames, sum->roce,
		sum->complete, sum->other, sum->icrc_valid, sum->icrc_bad, sum->malformed);
	fprintf(out, "opcodes: %s\n", sum->roce ? ops : "none");
	for (int op = 0; op < 256; op++) {
		const struct wire_opcode_info *info = wire_opcode_info((uint8_t)op);

		if (sum->per_opcode[op])
			fprintf(out, "  0x%02x %-36s %ld\n", op, info ? info->name : "(unknown)",
				sum->per_opcode[op]);
	}
}
