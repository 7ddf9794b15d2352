#include "tools/decode.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/cm_mad.h"
#include "wire/wire.h"

static void format_ip(const struct wire_pkt *pkt, const uint8_t *addr, char *buf, size_t len)
{
	inet_ntop(pkt->ip_version == 4 ? AF_INET : AF_INET6, addr, buf, (socklen_t)len);
}

/* A CM MAD in a UD SEND to QP 1, as far as it decodes. */
struct cm_view {
	bool present;
	enum cm_mad_status st;
	struct cm_mad mad;
};

static void read_cm(const uint8_t *frame, const struct wire_pkt *pkt, struct cm_view *v)
{
	const uint8_t *mad;

	v->st = cm_mad_in_frame(frame, pkt, &mad);
	v->present = v->st != CM_MAD_NOT_GSI;
	if (v->st == CM_MAD_OK)
		v->st = cm_mad_parse(mad, CM_MAD_LEN, &v->mad);
}

/* One value of a CM message, labelled for the text line and for JSON. */
struct cm_item {
	const char *text;
	const char *json;
	uint64_t value;
	int hex_digits;     /* text: hex of this many digits; 0: decimal; -1: the name alone */
	const char *name;   /* the value's meaning, when it has a name */
};

#define CM_MAX_ITEMS 8

static const char *msg_code_name(uint8_t code)
{
	static const char *const names[] = { "REQ", "REP", "other" };

	return code < 3 ? names[code] : "reserved";
}

static int copy_items(const struct cm_item in[], int n, struct cm_item *out)
{
	memcpy(out, in, (size_t)n * sizeof(*in));
	return n;
}

/* What the line shows of each message: comm IDs, service ID, QPN, PSN, reasons by name. */
static int cm_items(const struct cm_mad *m, struct cm_item *it)
{
	switch (m->hdr.attr_id) {
	case CM_ATTR_REQ:
		return copy_items((const struct cm_item[]){
			{ "comm", "local_comm_id", m->req.local_comm_id, 8, NULL },
			{ "service", "service_id", m->req.service_id, 16, NULL },
			{ "qpn", "qpn", m->req.local_qpn, 6, NULL },
			{ "psn", "psn", m->req.starting_psn, 6, NULL } }, 4, it);
	case CM_ATTR_REP:
		return copy_items((const struct cm_item[]){
			{ "comm", "local_comm_id", m->rep.local_comm_id, 8, NULL },
			{ "remote", "remote_comm_id", m->rep.remote_comm_id, 8, NULL },
			{ "qpn", "qpn", m->rep.local_qpn, 6, NULL },
			{ "psn", "psn", m->rep.starting_psn, 6, NULL } }, 4, it);
	case CM_ATTR_REJ:
		return copy_items((const struct cm_item[]){
			{ "comm", "local_comm_id", m->rej.local_comm_id, 8, NULL },
			{ "remote", "remote_comm_id", m->rej.remote_comm_id, 8, NULL },
			{ "reason", "reason", m->rej.reason, 0, cm_rej_reason_name(m->rej.reason) },
			{ "of", "message_rejected", m->rej.message_rejected, -1,
			  msg_code_name(m->rej.message_rejected) } }, 4, it);
	case CM_ATTR_MRA:
		return copy_items((const struct cm_item[]){
			{ "comm", "local_comm_id", m->mra.local_comm_id, 8, NULL },
			{ "remote", "remote_comm_id", m->mra.remote_comm_id, 8, NULL },
			{ "of", "message_mraed", m->mra.message_mraed, -1,
			  msg_code_name(m->mra.message_mraed) },
			{ "timeout", "service_timeout", m->mra.service_timeout, 0, NULL } }, 4, it);
	case CM_ATTR_RTU:
	case CM_ATTR_DREP:
		return copy_items((const struct cm_item[]){
			{ "comm", "local_comm_id", m->rtu.local_comm_id, 8, NULL },
			{ "remote", "remote_comm_id", m->rtu.remote_comm_id, 8, NULL } }, 2, it);
	case CM_ATTR_DREQ:
		return copy_items((const struct cm_item[]){
			{ "comm", "local_comm_id", m->dreq.local_comm_id, 8, NULL },
			{ "remote", "remote_comm_id", m->dreq.remote_comm_id, 8, NULL },
			{ "qpn", "remote_qpn", m->dreq.remote_qpn, 6, NULL } }, 3, it);
	case CM_ATTR_SIDR_REQ:
		return copy_items((const struct cm_item[]){
			{ "request", "request_id", m->sidr_req.request_id, 8, NULL },
			{ "service", "service_id", m->sidr_req.service_id, 16, NULL } }, 2, it);
	case CM_ATTR_SIDR_REP:
		return copy_items((const struct cm_item[]){
			{ "request", "request_id", m->sidr_rep.request_id, 8, NULL },
			{ "status", "status", m->sidr_rep.status, 0,
			  cm_sidr_status_name(m->sidr_rep.status) },
			{ "qpn", "qpn", m->sidr_rep.qpn, 6, NULL },
			{ "qkey", "qkey", m->sidr_rep.qkey, 8, NULL } }, 4, it);
	default:
		return 0;
	}
}

/* A REQ's CMA header: addresses, the active side's port and, from an IP service ID, the
 * listener's. False when the private data holds none (a REQ not from rdma_cm). */
struct cma_view {
	struct cm_cma_hdr hdr;
	char src[INET6_ADDRSTRLEN];
	char dst[INET6_ADDRSTRLEN];
	uint16_t dst_port;
};

static bool read_cma(const struct cm_mad *m, struct cma_view *v)
{
	int af;
	uint16_t space;

	if (m->hdr.attr_id != CM_ATTR_REQ ||
	    !cm_cma_parse(m->req.private_data, sizeof(m->req.private_data), &v->hdr))
		return false;
	af = v->hdr.ip_version == 4 ? AF_INET : AF_INET6;
	inet_ntop(af, v->hdr.src_ip, v->src, sizeof(v->src));
	inet_ntop(af, v->hdr.dst_ip, v->dst, sizeof(v->dst));
	if (!cm_service_id_ip(m->req.service_id, &space, &v->dst_port))
		v->dst_port = 0;
	return true;
}

static void print_cm_text(FILE *out, const struct cm_view *v)
{
	struct cm_item items[CM_MAX_ITEMS];
	struct cma_view cma;
	int n;

	if (v->st != CM_MAD_OK) {
		fprintf(out, "  cm malformed: %s", cm_mad_status_name(v->st));
		return;
	}
	fprintf(out, "  cm %s", cm_attr_name(v->mad.hdr.attr_id));
	n = cm_items(&v->mad, items);
	for (int i = 0; i < n; i++) {
		if (items[i].hex_digits > 0)
			fprintf(out, " %s 0x%0*" PRIx64, items[i].text, items[i].hex_digits,
				items[i].value);
		else if (items[i].hex_digits == 0)
			fprintf(out, " %s %" PRIu64, items[i].text, items[i].value);
		else
			fprintf(out, " %s", items[i].text);
		if (items[i].name)
			fprintf(out, items[i].hex_digits < 0 ? " %s" : " (%s)", items[i].name);
	}
	if (read_cma(&v->mad, &cma))
		fprintf(out, " cma %s port %u -> %s port %u", cma.src, cma.hdr.src_port, cma.dst,
			cma.dst_port);
}

static void print_cm_json(FILE *out, const struct cm_view *v)
{
	struct cm_item items[CM_MAX_ITEMS];
	struct cma_view cma;
	int n;

	if (v->st != CM_MAD_OK) {
		fprintf(out, ",\"cm\":{\"error\":\"%s\"}", cm_mad_status_name(v->st));
		return;
	}
	fprintf(out, ",\"cm\":{\"attr\":\"%s\",\"tid\":%" PRIu64, cm_attr_name(v->mad.hdr.attr_id),
		v->mad.hdr.tid);
	n = cm_items(&v->mad, items);
	for (int i = 0; i < n; i++) {
		fprintf(out, ",\"%s\":%" PRIu64, items[i].json, items[i].value);
		if (items[i].name)
			fprintf(out, ",\"%s_name\":\"%s\"", items[i].json, items[i].name);
	}
	if (read_cma(&v->mad, &cma))
		fprintf(out, ",\"cma\":{\"ip_version\":%u,\"src\":\"%s\",\"dst\":\"%s\","
			"\"src_port\":%u,\"dst_port\":%u}", cma.hdr.ip_version, cma.src, cma.dst,
			cma.hdr.src_port, cma.dst_port);
	fputc('}', out);
}

/* A FLUSH's placement type (a set: "global", "persistent", both, or "none") and level. */
static const char *flush_placement_name(uint8_t placement)
{
	static const char *const names[4] = { "none", "global", "persistent",
					      "global+persistent" };

	return placement < 4 ? names[placement] : "reserved";
}

static const char *flush_level_name(uint8_t level)
{
	return level == WIRE_FLUSH_RANGE ? "range" : level == WIRE_FLUSH_MR ? "mr" : "reserved";
}

/* Which of the packets a GSO frame held a line shows: index from 1, of count (0: the frame
 * is one packet). */
struct gso_piece {
	unsigned index, count;
};

static void print_text(FILE *out, long frame, const struct wire_pkt *pkt, const char *src,
		       const char *dst, bool icrc_ok, const struct cm_view *cm,
		       struct gso_piece piece)
{
	const struct wire_bth *bth = &pkt->bth;
	const unsigned headers = pkt->op->headers;
	char syn[48];

	fprintf(out, "%6ld  %s -> %s  %-36s qp 0x%06x psn 0x%06x%s", frame, src, dst,
		pkt->op->name, bth->dest_qp, bth->psn, bth->ack_req ? " ackreq" : "");
	if (headers & WIRE_HDR_DETH)
		fprintf(out, "  deth qkey 0x%08x src_qp 0x%06x", pkt->ext.deth.qkey,
			pkt->ext.deth.src_qp);
	if (headers & WIRE_HDR_FETH)
		fprintf(out, "  feth %s level %s", flush_placement_name(pkt->ext.feth.placement),
			flush_level_name(pkt->ext.feth.selectivity));
	if (headers & WIRE_HDR_RETH)
		fprintf(out, "  reth va 0x%016" PRIx64 " rkey 0x%08x len %u", pkt->ext.reth.va,
			pkt->ext.reth.rkey, pkt->ext.reth.length);
	if (headers & WIRE_HDR_AETH)
		fprintf(out, "  aeth %s msn %u",
			wire_syndrome_name(pkt->ext.aeth.syndrome, syn, sizeof(syn)),
			pkt->ext.aeth.msn);
	if (headers & WIRE_HDR_IMMDT)
		fprintf(out, "  imm 0x%08x", pkt->ext.imm);
	fprintf(out, "  payload %u pad %u icrc %s", pkt->payload_len, bth->pad,
		icrc_ok ? "ok" : "BAD");
	if (piece.count)
		fprintf(out, "  gso piece %u of %u", piece.index, piece.count);
	if (cm->present)
		print_cm_text(out, cm);
	fputc('\n', out);
}

static void print_json(FILE *out, long frame, const struct wire_pkt *pkt, const char *src,
		       const char *dst, bool icrc_ok, const struct cm_view *cm,
		       struct gso_piece piece)
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
	if (headers & WIRE_HDR_FETH)
		fprintf(out, ",\"feth\":{\"placement\":%u,\"selectivity\":%u}",
			pkt->ext.feth.placement, pkt->ext.feth.selectivity);
	if (headers & WIRE_HDR_RETH)
		fprintf(out, ",\"reth\":{\"va\":%" PRIu64 ",\"rkey\":%u,\"length\":%u}",
			pkt->ext.reth.va, pkt->ext.reth.rkey, pkt->ext.reth.length);
	if (headers & WIRE_HDR_AETH)
		fprintf(out, ",\"aeth\":{\"syndrome\":%u,\"msn\":%u}", pkt->ext.aeth.syndrome,
			pkt->ext.aeth.msn);
	if (headers & WIRE_HDR_IMMDT)
		fprintf(out, ",\"imm\":%u", pkt->ext.imm);
	if (piece.count)
		fprintf(out, ",\"gso_piece\":%u,\"gso_pieces\":%u", piece.index, piece.count);
	if (cm->present)
		print_cm_json(out, cm);
	fputs("}\n", out);
}

static void print_error(FILE *out, bool json, long frame, enum wire_status st)
{
	if (json)
		fprintf(out, "{\"frame\":%ld,\"error\":\"%s\"}\n", frame, wire_status_name(st));
	else
		fprintf(out, "%6ld  malformed RoCEv2 packet: %s\n", frame, wire_status_name(st));
}

static void count_cm(struct decode_summary *sum, const struct cm_view *cm)
{
	if (!cm->present)
		return;
	sum->cm_mads++;
	if (cm->st != CM_MAD_OK)
		sum->cm_malformed++;
	else if (cm->mad.hdr.attr_id < sizeof(sum->per_cm_attr) / sizeof(sum->per_cm_attr[0]))
		sum->per_cm_attr[cm->mad.hdr.attr_id]++;
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

/* One RoCEv2 packet, parsed: a frame, or a piece of one. */
static void show_packet(FILE *out, bool json, long frame, const uint8_t *data,
			const struct wire_pkt *pkt, enum wire_status st, bool icrc_ok,
			struct decode_summary *sum, struct gso_piece piece)
{
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	struct cm_view cm;

	count(sum, pkt, st, icrc_ok);
	if (st != WIRE_OK) {
		print_error(out, json, frame, st);
		return;
	}
	format_ip(pkt, pkt->src_ip, src, sizeof(src));
	format_ip(pkt, pkt->dst_ip, dst, sizeof(dst));
	read_cm(data, pkt, &cm);
	count_cm(sum, &cm);
	(json ? print_json : print_text)(out, frame, pkt, src, dst, icrc_ok, &cm, piece);
}

struct gso_run {
	FILE *out;
	bool json;
	long frame;
	struct decode_summary *sum;
	struct gso_piece piece;
};

static bool piece_ok(const uint8_t *data, size_t len)
{
	struct wire_pkt pkt;

	return wire_parse(data, len, &pkt) == WIRE_OK && wire_icrc_ok(data, &pkt);
}

static void show_piece(void *ctx, const uint8_t *data, size_t len)
{
	struct gso_run *run = ctx;
	struct wire_pkt pkt;
	enum wire_status st = wire_parse(data, len, &pkt);

	run->piece.index++;
	show_packet(run->out, run->json, run->frame, data, &pkt, st, wire_icrc_ok(data, &pkt),
		    run->sum, run->piece);
}

/* A frame that a sender's UDP GSO left whole (captured on the sending host, or between
 * guests whose virtio-net carries it whole): one IPv4 frame whose UDP payload is a run of
 * packets, each with its own ICRC, shown as those packets when wire_gso_find_pieces()
 * finds the size that cuts it into pieces with valid ICRCs. False, and nothing shown,
 * when it does not. */
static bool show_gso_frame(FILE *out, bool json, long frame, const uint8_t *data,
			   const struct wire_pkt *pkt, struct decode_summary *sum)
{
	static uint8_t copy[WIRE_ETH_LEN + WIRE_VLAN_LEN + 65536];
	size_t len = (size_t)pkt->l4_off + pkt->udp_len, piece;
	struct gso_run run = { out, json, frame, sum, { 0, 0 } };

	if (len > sizeof(copy) ||
	    !(piece = wire_gso_find_pieces(data, len, pkt, piece_ok, copy, &run.piece.count)))
		return false;
	memcpy(copy, data, len);
	wire_gso_split(copy, len, piece, show_piece, &run);
	sum->gso_frames++;
	sum->gso_packets += run.piece.count;
	return true;
}

static void decode_frame(FILE *out, bool json, long frame, const uint8_t *data, size_t caplen,
			 struct decode_summary *sum)
{
	struct wire_pkt pkt;
	enum wire_status st = wire_parse(data, caplen, &pkt);
	bool icrc_ok;

	if (st == WIRE_NOT_ROCE) {
		sum->other++;
		return;
	}
	icrc_ok = wire_icrc_ok(data, &pkt);
	if (st == WIRE_OK && !icrc_ok && (pkt.layers & WIRE_HAVE_UDP) &&
	    show_gso_frame(out, json, frame, data, &pkt, sum))
		return;
	show_packet(out, json, frame, data, &pkt, st, icrc_ok, sum, (struct gso_piece){ 0, 0 });
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

/* "CM MADs 5 (REQ 1, REP 1, ...), malformed 0" */
static void print_cm_summary(FILE *out, const struct decode_summary *sum)
{
	const char *sep = "";

	fprintf(out, "CM MADs %ld (", sum->cm_mads);
	for (unsigned a = 0; a < sizeof(sum->per_cm_attr) / sizeof(sum->per_cm_attr[0]); a++) {
		if (!sum->per_cm_attr[a])
			continue;
		fprintf(out, "%s%s %ld", sep, cm_attr_name((uint16_t)a), sum->per_cm_attr[a]);
		sep = ", ";
	}
	fprintf(out, "), malformed %ld\n", sum->cm_malformed);
}

void decode_print_summary(FILE *out, const struct decode_summary *sum)
{
	char ops[1024];

	decode_format_opcodes(sum, ops, sizeof(ops));
	fprintf(out, "frames %ld, RoCEv2 packets %ld (captured whole %ld, other frames %ld), "
		"ICRC valid %ld, bad ICRC %ld, malformed %ld\n", sum->frames, sum->roce,
		sum->complete, sum->other, sum->icrc_valid, sum->icrc_bad, sum->malformed);
	if (sum->gso_frames)
		fprintf(out, "GSO frames %ld, holding %ld of the packets\n", sum->gso_frames,
			sum->gso_packets);
	fprintf(out, "opcodes: %s\n", sum->roce ? ops : "none");
	for (int op = 0; op < 256; op++) {
		const struct wire_opcode_info *info = wire_opcode_info((uint8_t)op);

		if (sum->per_opcode[op])
			fprintf(out, "  0x%02x %-36s %ld\n", op, info ? info->name : "(unknown)",
				sum->per_opcode[op]);
	}
	if (sum->cm_mads)
		print_cm_summary(out, sum);
}
