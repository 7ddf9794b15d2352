/* CM MAD codec. Offsets below count from the end of the 24-byte MAD header, as IBA's
 * tables 106 to 120 do; a bit field's shift counts from its byte's least significant bit. */
#include "wire/cm_mad.h"

#include <string.h>

#include "wire/bytes.h"

#define MTU_MIN 1   /* 256 */
#define MTU_MAX 5   /* 4096 */

struct cm_msg {
	const char *name;
	void (*read)(const uint8_t *d, struct cm_mad *m);
	void (*write)(const struct cm_mad *m, uint8_t *d);
};

static uint8_t field(uint8_t byte, unsigned shift, unsigned bits)
{
	return (uint8_t)((byte >> shift) & ((1u << bits) - 1));
}

static uint8_t pack(unsigned value, unsigned shift, unsigned bits)
{
	return (uint8_t)((value & ((1u << bits) - 1)) << shift);
}

static void read_path(const uint8_t *p, struct cm_path *path)
{
	path->local_lid = get16(p);
	path->remote_lid = get16(p + 2);
	memcpy(path->local_gid, p + 4, 16);
	memcpy(path->remote_gid, p + 20, 16);
	path->flow_label = get32(p + 36) >> 12;
	path->packet_rate = field(p[39], 0, 6);
	path->traffic_class = p[40];
	path->hop_limit = p[41];
	path->sl = field(p[42], 4, 4);
	path->subnet_local = field(p[42], 3, 1);
	path->local_ack_timeout = field(p[43], 3, 5);
}

static void write_path(const struct cm_path *path, uint8_t *p)
{
	put16(p, path->local_lid);
	put16(p + 2, path->remote_lid);
	memcpy(p + 4, path->local_gid, 16);
	memcpy(p + 20, path->remote_gid, 16);
	put32(p + 36, (path->flow_label & 0xfffff) << 12 | (path->packet_rate & 0x3fu));
	p[40] = path->traffic_class;
	p[41] = path->hop_limit;
	p[42] = pack(path->sl, 4, 4) | pack(path->subnet_local, 3, 1);
	p[43] = pack(path->local_ack_timeout, 3, 5);
}

static void read_req(const uint8_t *d, struct cm_mad *m)
{
	struct cm_req *r = &m->req;

	r->local_comm_id = get32(d);
	r->service_id = get64(d + 8);
	r->local_ca_guid = get64(d + 16);
	r->local_qkey = get32(d + 28);
	r->local_qpn = get24(d + 32);
	r->responder_resources = d[35];
	r->local_eecn = get24(d + 36);
	r->initiator_depth = d[39];
	r->remote_eecn = get24(d + 40);
	r->remote_cm_response_timeout = field(d[43], 3, 5);
	r->transport = field(d[43], 1, 2);
	r->flow_control = field(d[43], 0, 1);
	r->starting_psn = get24(d + 44);
	r->local_cm_response_timeout = field(d[47], 3, 5);
	r->retry_count = field(d[47], 0, 3);
	r->pkey = get16(d + 48);
	r->path_mtu = field(d[50], 4, 4);
	r->rdc_exists = field(d[50], 3, 1);
	r->rnr_retry_count = field(d[50], 0, 3);
	r->max_cm_retries = field(d[51], 4, 4);
	r->srq = field(d[51], 3, 1);
	r->ext_transport = field(d[51], 0, 3);
	read_path(d + 52, &r->primary);
	memcpy(r->alternate, d + 96, CM_PATH_LEN);
	memcpy(r->private_data, d + 140, CM_REQ_PRIVATE_LEN);
}

static void write_req(const struct cm_mad *m, uint8_t *d)
{
	const struct cm_req *r = &m->req;

	put32(d, r->local_comm_id);
	put64(d + 8, r->service_id);
	put64(d + 16, r->local_ca_guid);
	put32(d + 28, r->local_qkey);
	put24(d + 32, r->local_qpn);
	d[35] = r->responder_resources;
	put24(d + 36, r->local_eecn);
	d[39] = r->initiator_depth;
	put24(d + 40, r->remote_eecn);
	d[43] = pack(r->remote_cm_response_timeout, 3, 5) | pack(r->transport, 1, 2) |
		pack(r->flow_control, 0, 1);
	put24(d + 44, r->starting_psn);
	d[47] = pack(r->local_cm_response_timeout, 3, 5) | pack(r->retry_count, 0, 3);
	put16(d + 48, r->pkey);
	d[50] = pack(r->path_mtu, 4, 4) | pack(r->rdc_exists, 3, 1) |
		pack(r->rnr_retry_count, 0, 3);
	d[51] = pack(r->max_cm_retries, 4, 4) | pack(r->srq, 3, 1) | pack(r->ext_transport, 0, 3);
	write_path(&r->primary, d + 52);
	memcpy(d + 96, r->alternate, CM_PATH_LEN);
	memcpy(d + 140, r->private_data, CM_REQ_PRIVATE_LEN);
}

static void read_mra(const uint8_t *d, struct cm_mad *m)
{
	m->mra.local_comm_id = get32(d);
	m->mra.remote_comm_id = get32(d + 4);
	m->mra.message_mraed = field(d[8], 6, 2);
	m->mra.service_timeout = field(d[9], 3, 5);
	memcpy(m->mra.private_data, d + 10, CM_MRA_PRIVATE_LEN);
}

static void write_mra(const struct cm_mad *m, uint8_t *d)
{
	put32(d, m->mra.local_comm_id);
	put32(d + 4, m->mra.remote_comm_id);
	d[8] = pack(m->mra.message_mraed, 6, 2);
	d[9] = pack(m->mra.service_timeout, 3, 5);
	memcpy(d + 10, m->mra.private_data, CM_MRA_PRIVATE_LEN);
}

static void read_rej(const uint8_t *d, struct cm_mad *m)
{
	m->rej.local_comm_id = get32(d);
	m->rej.remote_comm_id = get32(d + 4);
	m->rej.message_rejected = field(d[8], 6, 2);
	m->rej.ari_length = field(d[9], 1, 7);
	m->rej.reason = get16(d + 10);
	memcpy(m->rej.ari, d + 12, CM_ARI_LEN);
	memcpy(m->rej.private_data, d + 84, CM_REJ_PRIVATE_LEN);
}

static void write_rej(const struct cm_mad *m, uint8_t *d)
{
	put32(d, m->rej.local_comm_id);
	put32(d + 4, m->rej.remote_comm_id);
	d[8] = pack(m->rej.message_rejected, 6, 2);
	d[9] = pack(m->rej.ari_length, 1, 7);
	put16(d + 10, m->rej.reason);
	memcpy(d + 12, m->rej.ari, CM_ARI_LEN);
	memcpy(d + 84, m->rej.private_data, CM_REJ_PRIVATE_LEN);
}

static void read_rep(const uint8_t *d, struct cm_mad *m)
{
	struct cm_rep *r = &m->rep;

	r->local_comm_id = get32(d);
	r->remote_comm_id = get32(d + 4);
	r->local_qkey = get32(d + 8);
	r->local_qpn = get24(d + 12);
	r->local_eecn = get24(d + 16);
	r->starting_psn = get24(d + 20);
	r->responder_resources = d[24];
	r->initiator_depth = d[25];
	r->target_ack_delay = field(d[26], 3, 5);
	r->failover_accepted = field(d[26], 1, 2);
	r->flow_control = field(d[26], 0, 1);
	r->rnr_retry_count = field(d[27], 5, 3);
	r->srq = field(d[27], 4, 1);
	r->local_ca_guid = get64(d + 28);
	memcpy(r->private_data, d + 36, CM_REP_PRIVATE_LEN);
}

static void write_rep(const struct cm_mad *m, uint8_t *d)
{
	const struct cm_rep *r = &m->rep;

	put32(d, r->local_comm_id);
	put32(d + 4, r->remote_comm_id);
	put32(d + 8, r->local_qkey);
	put24(d + 12, r->local_qpn);
	put24(d + 16, r->local_eecn);
	put24(d + 20, r->starting_psn);
	d[24] = r->responder_resources;
	d[25] = r->initiator_depth;
	d[26] = pack(r->target_ack_delay, 3, 5) | pack(r->failover_accepted, 1, 2) |
		pack(r->flow_control, 0, 1);
	d[27] = pack(r->rnr_retry_count, 5, 3) | pack(r->srq, 4, 1);
	put64(d + 28, r->local_ca_guid);
	memcpy(d + 36, r->private_data, CM_REP_PRIVATE_LEN);
}

/* RTU and DREP share their layout. */
static void read_ids_only(const uint8_t *d, struct cm_rtu *r)
{
	r->local_comm_id = get32(d);
	r->remote_comm_id = get32(d + 4);
	memcpy(r->private_data, d + 8, CM_RTU_PRIVATE_LEN);
}

static void write_ids_only(const struct cm_rtu *r, uint8_t *d)
{
	put32(d, r->local_comm_id);
	put32(d + 4, r->remote_comm_id);
	memcpy(d + 8, r->private_data, CM_RTU_PRIVATE_LEN);
}

static void read_rtu(const uint8_t *d, struct cm_mad *m)
{
	read_ids_only(d, &m->rtu);
}

static void write_rtu(const struct cm_mad *m, uint8_t *d)
{
	write_ids_only(&m->rtu, d);
}

static void read_drep(const uint8_t *d, struct cm_mad *m)
{
	read_ids_only(d, &m->drep);
}

static void write_drep(const struct cm_mad *m, uint8_t *d)
{
	write_ids_only(&m->drep, d);
}

static void read_dreq(const uint8_t *d, struct cm_mad *m)
{
	m->dreq.local_comm_id = get32(d);
	m->dreq.remote_comm_id = get32(d + 4);
	m->dreq.remote_qpn = get24(d + 8);
	memcpy(m->dreq.private_data, d + 12, CM_DREQ_PRIVATE_LEN);
}

static void write_dreq(const struct cm_mad *m, uint8_t *d)
{
	put32(d, m->dreq.local_comm_id);
	put32(d + 4, m->dreq.remote_comm_id);
	put24(d + 8, m->dreq.remote_qpn);
	memcpy(d + 12, m->dreq.private_data, CM_DREQ_PRIVATE_LEN);
}

static void read_sidr_req(const uint8_t *d, struct cm_mad *m)
{
	m->sidr_req.request_id = get32(d);
	m->sidr_req.pkey = get16(d + 4);
	m->sidr_req.service_id = get64(d + 8);
	memcpy(m->sidr_req.private_data, d + 16, CM_SIDR_REQ_PRIVATE_LEN);
}

static void write_sidr_req(const struct cm_mad *m, uint8_t *d)
{
	put32(d, m->sidr_req.request_id);
	put16(d + 4, m->sidr_req.pkey);
	put64(d + 8, m->sidr_req.service_id);
	memcpy(d + 16, m->sidr_req.private_data, CM_SIDR_REQ_PRIVATE_LEN);
}

static void read_sidr_rep(const uint8_t *d, struct cm_mad *m)
{
	struct cm_sidr_rep *r = &m->sidr_rep;

	r->request_id = get32(d);
	r->status = d[4];
	r->info_length = d[5];
	r->qpn = get24(d + 8);
	r->service_id = get64(d + 12);
	r->qkey = get32(d + 20);
	memcpy(r->info, d + 24, CM_SIDR_INFO_LEN);
	memcpy(r->private_data, d + 96, CM_SIDR_REP_PRIVATE_LEN);
}

static void write_sidr_rep(const struct cm_mad *m, uint8_t *d)
{
	const struct cm_sidr_rep *r = &m->sidr_rep;

	put32(d, r->request_id);
	d[4] = r->status;
	d[5] = r->info_length;
	put24(d + 8, r->qpn);
	put64(d + 12, r->service_id);
	put32(d + 20, r->qkey);
	memcpy(d + 24, r->info, CM_SIDR_INFO_LEN);
	memcpy(d + 96, r->private_data, CM_SIDR_REP_PRIVATE_LEN);
}

/* The messages this codec carries, by attribute ID from REQ (0x10) on. */
static const struct cm_msg messages[] = {
	{ "REQ", read_req, write_req },
	{ "MRA", read_mra, write_mra },
	{ "REJ", read_rej, write_rej },
	{ "REP", read_rep, write_rep },
	{ "RTU", read_rtu, write_rtu },
	{ "DREQ", read_dreq, write_dreq },
	{ "DREP", read_drep, write_drep },
	{ "SIDR_REQ", read_sidr_req, write_sidr_req },
	{ "SIDR_REP", read_sidr_rep, write_sidr_rep },
};
#define N_MESSAGES (sizeof(messages) / sizeof(messages[0]))

static const struct cm_msg *message(uint16_t attr_id)
{
	unsigned i = (unsigned)attr_id - CM_ATTR_REQ;

	return i < N_MESSAGES ? &messages[i] : NULL;
}

const char *cm_attr_name(uint16_t attr_id)
{
	const struct cm_msg *msg = message(attr_id);

	if (msg)
		return msg->name;
	switch (attr_id) {
	case CM_ATTR_CLASS_PORT_INFO: return "ClassPortInfo";
	case CM_ATTR_LAP: return "LAP";
	case CM_ATTR_APR: return "APR";
	default: return "unknown";
	}
}

static bool req_transport_ok(const struct cm_req *r)
{
	return r->transport == CM_TRANSPORT_RC || r->transport == CM_TRANSPORT_UC ||
	       (r->transport == CM_TRANSPORT_EXT && r->ext_transport == CM_EXT_TRANSPORT_XRC);
}

/* The checks of a decoded message's values, shared by the parser and the builder. */
static enum cm_mad_status check_message(const struct cm_mad *m)
{
	switch (m->hdr.attr_id) {
	case CM_ATTR_REQ:
		if (!req_transport_ok(&m->req))
			return CM_MAD_BAD_TRANSPORT;
		if (m->req.path_mtu < MTU_MIN || m->req.path_mtu > MTU_MAX)
			return CM_MAD_BAD_MTU;
		return CM_MAD_OK;
	case CM_ATTR_MRA:
		return m->mra.message_mraed > CM_MSG_OTHER ? CM_MAD_BAD_MESSAGE_CODE : CM_MAD_OK;
	case CM_ATTR_REJ:
		if (m->rej.message_rejected > CM_MSG_OTHER)
			return CM_MAD_BAD_MESSAGE_CODE;
		return m->rej.ari_length > CM_ARI_LEN ? CM_MAD_BAD_INFO_LENGTH : CM_MAD_OK;
	case CM_ATTR_SIDR_REP:
		return m->sidr_rep.info_length > CM_SIDR_INFO_LEN ? CM_MAD_BAD_INFO_LENGTH
								  : CM_MAD_OK;
	default:
		return message(m->hdr.attr_id) ? CM_MAD_OK : CM_MAD_UNKNOWN_ATTRIBUTE;
	}
}

static enum cm_mad_status check_attribute(uint16_t attr_id)
{
	if (message(attr_id))
		return CM_MAD_OK;
	if (attr_id == CM_ATTR_CLASS_PORT_INFO || attr_id == CM_ATTR_LAP ||
	    attr_id == CM_ATTR_APR)
		return CM_MAD_UNSUPPORTED_ATTRIBUTE;
	return CM_MAD_UNKNOWN_ATTRIBUTE;
}

/* The header's fixed fields, cheapest and most telling first. */
static enum cm_mad_status check_header(const uint8_t *b)
{
	if (b[0] != CM_MAD_BASE_VERSION)
		return CM_MAD_BAD_BASE_VERSION;
	if (b[1] != CM_MAD_CLASS)
		return CM_MAD_NOT_CM_CLASS;
	if (b[2] != CM_MAD_CLASS_VERSION)
		return CM_MAD_BAD_CLASS_VERSION;
	if (b[3] != CM_MAD_METHOD_SEND)
		return CM_MAD_UNKNOWN_METHOD;
	return CM_MAD_OK;
}

enum cm_mad_status cm_mad_parse(const uint8_t *buf, size_t len, struct cm_mad *out)
{
	enum cm_mad_status st;

	if (len < CM_MAD_LEN)
		return CM_MAD_TRUNCATED;
	if (len > CM_MAD_LEN)
		return CM_MAD_TOO_LONG;
	st = check_header(buf);
	if (st != CM_MAD_OK)
		return st;
	out->hdr.status = get16(buf + 4);
	out->hdr.class_specific = get16(buf + 6);
	out->hdr.tid = get64(buf + 8);
	out->hdr.attr_id = get16(buf + 16);
	out->hdr.attr_mod = get32(buf + 20);
	st = check_attribute(out->hdr.attr_id);
	if (st != CM_MAD_OK)
		return st;
	message(out->hdr.attr_id)->read(buf + CM_MAD_HDR_LEN, out);
	return check_message(out);
}

size_t cm_mad_build(const struct cm_mad *mad, uint8_t buf[CM_MAD_LEN])
{
	if (check_message(mad) != CM_MAD_OK)
		return 0;
	memset(buf, 0, CM_MAD_LEN);
	buf[0] = CM_MAD_BASE_VERSION;
	buf[1] = CM_MAD_CLASS;
	buf[2] = CM_MAD_CLASS_VERSION;
	buf[3] = CM_MAD_METHOD_SEND;
	put16(buf + 4, mad->hdr.status);
	put16(buf + 6, mad->hdr.class_specific);
	put64(buf + 8, mad->hdr.tid);
	put16(buf + 16, mad->hdr.attr_id);
	put32(buf + 20, mad->hdr.attr_mod);
	message(mad->hdr.attr_id)->write(mad, buf + CM_MAD_HDR_LEN);
	return CM_MAD_LEN;
}

size_t cm_mad_frame(uint8_t *buf, size_t cap, const struct wire_path *path, uint16_t ip_id,
		    uint32_t psn, const uint8_t mad[CM_MAD_LEN])
{
	const struct wire_bth bth = { .opcode = WIRE_OP_UD_SEND_ONLY, .mig_req = true,
				      .pkey = CM_GSI_PKEY, .dest_qp = CM_GSI_QPN, .psn = psn };
	const struct wire_ext ext = { .deth = { .qkey = CM_GSI_QKEY, .src_qp = CM_GSI_QPN } };

	return wire_build(buf, cap, path, ip_id, &bth, &ext, mad, CM_MAD_LEN);
}

enum cm_mad_status cm_mad_in_frame(const uint8_t *frame, const struct wire_pkt *pkt,
				   const uint8_t **mad)
{
	if (!(pkt->layers & WIRE_HAVE_ALL) || pkt->bth.opcode != WIRE_OP_UD_SEND_ONLY ||
	    pkt->bth.dest_qp != CM_GSI_QPN)
		return CM_MAD_NOT_GSI;
	if (pkt->ext.deth.qkey != CM_GSI_QKEY)
		return CM_MAD_BAD_QKEY;
	if (pkt->payload_len < CM_MAD_LEN)
		return CM_MAD_TRUNCATED;
	if (pkt->payload_len > CM_MAD_LEN)
		return CM_MAD_TOO_LONG;
	*mad = frame + pkt->payload_off;
	return CM_MAD_OK;
}

bool cm_cma_parse(const uint8_t *private_data, size_t len, struct cm_cma_hdr *out)
{
	const uint8_t *p = private_data;
	size_t addr_len;

	if (len < CM_CMA_HDR_LEN || p[0] != CM_CMA_VERSION)
		return false;
	out->ip_version = p[1] >> 4;
	if (out->ip_version != 4 && out->ip_version != 6)
		return false;
	out->src_port = get16(p + 2);
	memset(out->src_ip, 0, 16);
	memset(out->dst_ip, 0, 16);
	/* IPv4 sits in the last 4 bytes of its 16, as rdma_cm's union lays it out */
	addr_len = out->ip_version == 4 ? 4 : 16;
	memcpy(out->src_ip, p + 4 + 16 - addr_len, addr_len);
	memcpy(out->dst_ip, p + 20 + 16 - addr_len, addr_len);
	return true;
}

void cm_cma_build(const struct cm_cma_hdr *hdr, uint8_t out[CM_CMA_HDR_LEN])
{
	size_t addr_len = hdr->ip_version == 4 ? 4 : 16;

	memset(out, 0, CM_CMA_HDR_LEN);
	out[0] = CM_CMA_VERSION;
	out[1] = pack(hdr->ip_version, 4, 4);
	put16(out + 2, hdr->src_port);
	memcpy(out + 4 + 16 - addr_len, hdr->src_ip, addr_len);
	memcpy(out + 20 + 16 - addr_len, hdr->dst_ip, addr_len);
}

bool cm_service_id_ip(uint64_t service_id, uint16_t *space, uint16_t *port)
{
	uint16_t ps = (uint16_t)(service_id >> 16);

	if (service_id >> 32 ||
	    (ps != CM_PS_TCP && ps != CM_PS_UDP && ps != CM_PS_IB && ps != CM_PS_IPOIB))
		return false;
	*space = ps;
	*port = (uint16_t)service_id;
	return true;
}

static const char *const status_names[CM_MAD_STATUS_COUNT] = {
	[CM_MAD_OK] = "ok",
	[CM_MAD_TRUNCATED] = "MAD shorter than 256 bytes",
	[CM_MAD_TOO_LONG] = "MAD longer than 256 bytes",
	[CM_MAD_NOT_GSI] = "not a UD SEND_ONLY to QP 1",
	[CM_MAD_BAD_QKEY] = "Q_Key is not the GSI's 0x80010000",
	[CM_MAD_BAD_BASE_VERSION] = "MAD base version is not 1",
	[CM_MAD_NOT_CM_CLASS] = "not the CM management class",
	[CM_MAD_BAD_CLASS_VERSION] = "CM class version is not 2",
	[CM_MAD_UNKNOWN_METHOD] = "method is not Send",
	[CM_MAD_UNKNOWN_ATTRIBUTE] = "unknown attribute",
	[CM_MAD_UNSUPPORTED_ATTRIBUTE] = "unsupported attribute (LAP, APR, ClassPortInfo)",
	[CM_MAD_BAD_TRANSPORT] = "REQ transport is not RC, UC or XRC",
	[CM_MAD_BAD_MTU] = "REQ path MTU is not 256 to 4096",
	[CM_MAD_BAD_MESSAGE_CODE] = "REJ or MRA names a reserved message",
	[CM_MAD_BAD_INFO_LENGTH] = "information length over 72 bytes",
};

const char *cm_mad_status_name(enum cm_mad_status status)
{
	if ((unsigned)status >= CM_MAD_STATUS_COUNT)
		return "unknown status";
	return status_names[status];
}

static const char *const rej_reason_names[] = {
	[CM_REJ_NO_QP] = "no QP",
	[CM_REJ_NO_EEC] = "no EEC",
	[CM_REJ_NO_RESOURCES] = "no resources",
	[CM_REJ_TIMEOUT] = "timeout",
	[CM_REJ_UNSUPPORTED] = "unsupported request",
	[CM_REJ_INVALID_COMM_ID] = "invalid comm ID",
	[CM_REJ_INVALID_COMM_INSTANCE] = "invalid comm instance",
	[CM_REJ_INVALID_SERVICE_ID] = "invalid service ID",
	[CM_REJ_INVALID_TRANSPORT_TYPE] = "invalid transport type",
	[CM_REJ_STALE_CONN] = "stale connection",
	[CM_REJ_RDC_NOT_EXIST] = "RDC does not exist",
	[CM_REJ_INVALID_GID] = "invalid GID",
	[CM_REJ_INVALID_LID] = "invalid LID",
	[CM_REJ_INVALID_SL] = "invalid SL",
	[CM_REJ_INVALID_TRAFFIC_CLASS] = "invalid traffic class",
	[CM_REJ_INVALID_HOP_LIMIT] = "invalid hop limit",
	[CM_REJ_INVALID_PACKET_RATE] = "invalid packet rate",
	[CM_REJ_INVALID_ALT_GID] = "invalid alternate GID",
	[CM_REJ_INVALID_ALT_LID] = "invalid alternate LID",
	[CM_REJ_INVALID_ALT_SL] = "invalid alternate SL",
	[CM_REJ_INVALID_ALT_TRAFFIC_CLASS] = "invalid alternate traffic class",
	[CM_REJ_INVALID_ALT_HOP_LIMIT] = "invalid alternate hop limit",
	[CM_REJ_INVALID_ALT_PACKET_RATE] = "invalid alternate packet rate",
	[CM_REJ_PORT_CM_REDIRECT] = "port CM redirect",
	[CM_REJ_PORT_REDIRECT] = "port redirect",
	[CM_REJ_INVALID_MTU] = "invalid MTU",
	[CM_REJ_INSUFFICIENT_RESP_RESOURCES] = "insufficient responder resources",
	[CM_REJ_CONSUMER_DEFINED] = "consumer defined",
	[CM_REJ_INVALID_RNR_RETRY] = "invalid RNR retry",
	[CM_REJ_DUPLICATE_LOCAL_COMM_ID] = "duplicate local comm ID",
	[CM_REJ_INVALID_CLASS_VERSION] = "invalid class version",
	[CM_REJ_INVALID_FLOW_LABEL] = "invalid flow label",
	[CM_REJ_INVALID_ALT_FLOW_LABEL] = "invalid alternate flow label",
	[CM_REJ_VENDOR_OPTION_NOT_SUPPORTED] = "vendor option not supported",
};

const char *cm_rej_reason_name(uint16_t reason)
{
	if (reason >= sizeof(rej_reason_names) / sizeof(rej_reason_names[0]) ||
	    !rej_reason_names[reason])
		return "unknown reason";
	return rej_reason_names[reason];
}

static const char *const sidr_status_names[] = {
	[CM_SIDR_SUCCESS] = "success",
	[CM_SIDR_UNSUPPORTED] = "service ID not supported",
	[CM_SIDR_REJECT] = "rejected",
	[CM_SIDR_NO_QP] = "no QP",
	[CM_SIDR_REDIRECT] = "redirect",
	[CM_SIDR_UNSUPPORTED_VERSION] = "unsupported version",
};

const char *cm_sidr_status_name(uint8_t status)
{
	if (status >= sizeof(sidr_status_names) / sizeof(sidr_status_names[0]))
		return "unknown status";
	return sidr_status_names[status];
}
