/* Frame parser: each layer checks its lengths against what was captured before it reads. */
#include "wire/wire.h"

#include <string.h>

#include "wire/bytes.h"

#define IPPROTO_UDP_ 17
#define IPV6_NH_FRAGMENT 44
#define IPV4_MF 0x2000
#define IPV4_OFFSET_MASK 0x1fff

struct cursor {
	const uint8_t *frame;
	size_t caplen;
};

static bool captured(const struct cursor *c, size_t off, size_t len)
{
	return off <= c->caplen && len <= c->caplen - off;
}

/* Finds the L3 header after Ethernet and at most one 802.1Q tag. */
static bool parse_l2(const struct cursor *c, struct wire_pkt *pkt, uint16_t *ethertype)
{
	size_t off = WIRE_ETH_LEN;

	if (!captured(c, 0, WIRE_ETH_LEN))
		return false;
	*ethertype = get16(c->frame + 12);
	if (*ethertype == WIRE_ETHERTYPE_VLAN) {
		if (!captured(c, WIRE_ETH_LEN, WIRE_VLAN_LEN))
			return false;
		pkt->vlan = true;
		pkt->vlan_tci = get16(c->frame + 14);
		*ethertype = get16(c->frame + 16);
		off += WIRE_VLAN_LEN;
	}
	pkt->l3_off = (uint16_t)off;
	return true;
}

/* Whether the UDP header at l4 is captured far enough to show destination port 4791. */
static bool to_roce_port(const struct cursor *c, size_t l4)
{
	return captured(c, l4, 4) && get16(c->frame + l4 + 2) == WIRE_ROCE_PORT;
}

static enum wire_status parse_ipv4(const struct cursor *c, struct wire_pkt *pkt,
				   size_t *ip_payload)
{
	const uint8_t *ip = c->frame + pkt->l3_off;
	size_t ihl, total;
	uint16_t frag;

	if (!captured(c, pkt->l3_off, WIRE_IPV4_LEN) || ip[0] >> 4 != 4 || ip[9] != IPPROTO_UDP_)
		return WIRE_NOT_ROCE;
	ihl = (size_t)(ip[0] & 0x0f) * 4;
	if (ihl < WIRE_IPV4_LEN)
		return WIRE_NOT_ROCE;
	pkt->ip_version = 4;
	pkt->ecn = ip[1] & WIRE_ECN_MASK;
	pkt->ip_hdr_len = (uint16_t)ihl;
	memcpy(pkt->src_ip, ip + 12, 4);
	memcpy(pkt->dst_ip, ip + 16, 4);
	frag = get16(ip + 6);
	if (frag & IPV4_OFFSET_MASK) {
		pkt->layers |= WIRE_HAVE_IP;
		return WIRE_FRAGMENT;
	}
	if (!to_roce_port(c, pkt->l3_off + ihl))
		return WIRE_NOT_ROCE;
	pkt->layers |= WIRE_HAVE_IP;
	if (frag & IPV4_MF)
		return WIRE_FRAGMENT;
	total = get16(ip + 2);
	if (total < ihl + WIRE_UDP_LEN)
		return WIRE_IP_LENGTH;
	if (!captured(c, pkt->l3_off, total))
		return WIRE_TRUNCATED;
	*ip_payload = total - ihl;
	return WIRE_OK;
}

/* IPv6 extension headers other than a fragment header are not walked: RoCEv2 sends none. */
static enum wire_status parse_ipv6(const struct cursor *c, struct wire_pkt *pkt,
				   size_t *ip_payload)
{
	const uint8_t *ip = c->frame + pkt->l3_off;
	size_t payload;

	if (!captured(c, pkt->l3_off, WIRE_IPV6_LEN) || ip[0] >> 4 != 6)
		return WIRE_NOT_ROCE;
	pkt->ip_version = 6;
	pkt->ecn = (ip[1] >> 4) & WIRE_ECN_MASK;  /* the traffic class spans bytes 0 and 1 */
	pkt->ip_hdr_len = WIRE_IPV6_LEN;
	memcpy(pkt->src_ip, ip + 8, 16);
	memcpy(pkt->dst_ip, ip + 24, 16);
	if (ip[6] == IPV6_NH_FRAGMENT) {
		pkt->layers |= WIRE_HAVE_IP;
		return WIRE_FRAGMENT;
	}
	if (ip[6] != IPPROTO_UDP_ || !to_roce_port(c, pkt->l3_off + WIRE_IPV6_LEN))
		return WIRE_NOT_ROCE;
	pkt->layers |= WIRE_HAVE_IP;
	payload = get16(ip + 4);
	if (payload < WIRE_UDP_LEN)
		return WIRE_IP_LENGTH;
	if (!captured(c, pkt->l3_off + WIRE_IPV6_LEN, payload))
		return WIRE_TRUNCATED;
	*ip_payload = payload;
	return WIRE_OK;
}

static enum wire_status parse_udp(const struct cursor *c, struct wire_pkt *pkt,
				  size_t ip_payload)
{
	const uint8_t *udp;

	pkt->l4_off = (uint16_t)(pkt->l3_off + pkt->ip_hdr_len);
	udp = c->frame + pkt->l4_off;
	pkt->udp_src_port = get16(udp);
	pkt->udp_len = get16(udp + 4);
	if (pkt->udp_len != ip_payload)
		return WIRE_UDP_LENGTH;
	if (pkt->udp_len < WIRE_UDP_LEN + WIRE_BTH_LEN + WIRE_ICRC_LEN)
		return WIRE_SHORT_BTH;
	pkt->layers |= WIRE_HAVE_UDP;
	pkt->icrc = icrc_load(udp + pkt->udp_len - WIRE_ICRC_LEN);
	return WIRE_OK;
}

static void read_bth(const uint8_t *b, struct wire_bth *bth)
{
	bth->opcode = b[0];
	bth->solicited = b[1] & 0x80;
	bth->mig_req = b[1] & 0x40;
	bth->pad = (b[1] >> 4) & 0x03;
	bth->tver = b[1] & 0x0f;
	bth->pkey = get16(b + 2);
	bth->fecn = b[4] & 0x80;
	bth->becn = b[4] & 0x40;
	bth->dest_qp = get24(b + 5);
	bth->ack_req = b[8] & 0x80;
	bth->psn = get24(b + 9);
}

static void read_atomiceth(const uint8_t *p, struct wire_atomiceth *a)
{
	a->va = get64(p);
	a->rkey = get32(p + 8);
	a->swap_add = get64(p + 12);
	a->compare = get64(p + 20);
}

/* Reads the extension headers the opcode's table entry names, in wire order. */
static void read_ext(const uint8_t *p, unsigned headers, struct wire_ext *ext)
{
	if (headers & WIRE_HDR_DETH) {
		ext->deth.qkey = get32(p);
		ext->deth.src_qp = get24(p + 5);
		p += WIRE_DETH_LEN;
	}
	if (headers & WIRE_HDR_FETH) {
		ext->feth.placement = p[3] & 0x0f;
		ext->feth.selectivity = (p[3] >> 4) & 0x03;
		p += WIRE_FETH_LEN;
	}
	if (headers & WIRE_HDR_RETH) {
		ext->reth.va = get64(p);
		ext->reth.rkey = get32(p + 8);
		ext->reth.length = get32(p + 12);
		p += WIRE_RETH_LEN;
	}
	if (headers & WIRE_HDR_ATOMICETH) {
		read_atomiceth(p, &ext->atomic);
		p += WIRE_ATOMICETH_LEN;
	}
	if (headers & WIRE_HDR_AETH) {
		ext->aeth.syndrome = p[0];
		ext->aeth.msn = get24(p + 1);
		p += WIRE_AETH_LEN;
	}
	if (headers & WIRE_HDR_ATOMICACKETH) {
		ext->atomic_ack = get64(p);
		p += WIRE_ATOMICACKETH_LEN;
	}
	if (headers & WIRE_HDR_IMMDT) {
		ext->imm = get32(p);
		p += WIRE_IMMDT_LEN;
	}
	if (headers & WIRE_HDR_IETH)
		ext->ieth = get32(p);
}

static enum wire_status parse_transport(const struct cursor *c, struct wire_pkt *pkt)
{
	size_t bth_off = pkt->l4_off + WIRE_UDP_LEN;
	size_t after_bth = pkt->udp_len - WIRE_UDP_LEN - WIRE_BTH_LEN - WIRE_ICRC_LEN;
	const struct wire_opcode_info *op;
	size_t body;

	read_bth(c->frame + bth_off, &pkt->bth);
	pkt->layers |= WIRE_HAVE_BTH;
	if (pkt->bth.tver != 0)
		return WIRE_TVER;
	op = wire_opcode_info(pkt->bth.opcode);
	if (!op)
		return WIRE_UNKNOWN_OPCODE;
	pkt->op = op;
	if (after_bth < op->hdr_len)
		return WIRE_SHORT_HEADERS;
	body = after_bth - op->hdr_len; /* payload + pad */
	if (body % 4 != 0 || pkt->bth.pad > body)
		return WIRE_BAD_PAD;
	if (body && !op->payload)
		return WIRE_UNEXPECTED_PAYLOAD;
	read_ext(c->frame + bth_off + WIRE_BTH_LEN, op->headers, &pkt->ext);
	pkt->payload_off = (uint16_t)(bth_off + WIRE_BTH_LEN + op->hdr_len);
	pkt->payload_len = (uint16_t)(body - pkt->bth.pad);
	pkt->layers |= WIRE_HAVE_ALL;
	return WIRE_OK;
}

enum wire_status wire_parse(const uint8_t *frame, size_t caplen, struct wire_pkt *pkt)
{
	struct cursor c = { frame, caplen };
	enum wire_status st;
	uint16_t ethertype;
	size_t ip_payload = 0;

	memset(pkt, 0, sizeof(*pkt));
	if (!parse_l2(&c, pkt, &ethertype))
		return WIRE_NOT_ROCE;
	if (ethertype == WIRE_ETHERTYPE_IPV4)
		st = parse_ipv4(&c, pkt, &ip_payload);
	else if (ethertype == WIRE_ETHERTYPE_IPV6)
		st = parse_ipv6(&c, pkt, &ip_payload);
	else
		st = WIRE_NOT_ROCE;
	if (st == WIRE_OK)
		st = parse_udp(&c, pkt, ip_payload);
	if (st == WIRE_OK)
		st = parse_transport(&c, pkt);
	return st;
}

bool wire_icrc_ok(const uint8_t *frame, const struct wire_pkt *pkt)
{
	if (!(pkt->layers & WIRE_HAVE_UDP))
		return false;
	return icrc_verify(frame + pkt->l3_off, pkt->ip_hdr_len, pkt->ip_version, pkt->udp_len);
}

static const char *const status_names[WIRE_STATUS_COUNT] = {
	[WIRE_OK] = "ok",
	[WIRE_NOT_ROCE] = "not a RoCEv2 packet",
	[WIRE_FRAGMENT] = "IP fragment",
	[WIRE_TRUNCATED] = "captured shorter than its IP length",
	[WIRE_IP_LENGTH] = "IP length too short for its headers",
	[WIRE_UDP_LENGTH] = "UDP length disagrees with the IP length",
	[WIRE_SHORT_BTH] = "too short for BTH and ICRC",
	[WIRE_TVER] = "BTH transport version is not 0",
	[WIRE_UNKNOWN_OPCODE] = "unknown opcode",
	[WIRE_SHORT_HEADERS] = "too short for the opcode's headers",
	[WIRE_BAD_PAD] = "pad count inconsistent with the payload",
	[WIRE_UNEXPECTED_PAYLOAD] = "payload on an opcode that carries none",
};

const char *wire_status_name(enum wire_status status)
{
	if ((unsigned)status >= WIRE_STATUS_COUNT)
		return "unknown status";
	return status_names[status];
}
