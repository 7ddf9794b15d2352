/* Frame builder. Every length field is final before the ICRC is computed: the ICRC covers
 * the IP total length and the UDP length, and rxe once broke interoperability by computing
 * it before setting them. */
#include "wire/wire.h"

#include <string.h>

#include "wire/bytes.h"

#define IPV4_DF 0x4000
#define IP_MAX 0xffff       /* IPv4 total length, IPv6 payload length */
#define IPPROTO_UDP_ 17

static size_t pad_for(size_t payload_len)
{
	return (0 - payload_len) & 3;
}

static uint8_t *put_eth(uint8_t *p, const struct wire_path *path)
{
	memcpy(p, path->dst_mac, 6);
	memcpy(p + 6, path->src_mac, 6);
	put16(p + 12, path->ipv6 ? WIRE_ETHERTYPE_IPV6 : WIRE_ETHERTYPE_IPV4);
	return p + WIRE_ETH_LEN;
}

static uint8_t *put_ipv4(uint8_t *ip, const struct wire_path *path, uint16_t ip_id,
			 size_t udp_len)
{
	ip[0] = 0x45;
	ip[1] = path->tos;
	put16(ip + 2, (uint16_t)(WIRE_IPV4_LEN + udp_len));
	put16(ip + 4, ip_id);
	put16(ip + 6, IPV4_DF);
	ip[8] = path->ttl;
	ip[9] = IPPROTO_UDP_;
	put16(ip + 10, 0);
	memcpy(ip + 12, &path->src_ip, 4);
	memcpy(ip + 16, &path->dst_ip, 4);
	put16(ip + 10, (uint16_t)~fold16(sum16(ip, WIRE_IPV4_LEN, 0)));
	return ip + WIRE_IPV4_LEN;
}

static uint8_t *put_ipv6(uint8_t *ip, const struct wire_path *path, size_t udp_len)
{
	put32(ip, 6u << 28 | (uint32_t)path->tos << 20 | (path->flow_label & 0xfffff));
	put16(ip + 4, (uint16_t)udp_len);
	ip[6] = IPPROTO_UDP_;
	ip[7] = path->ttl;
	memcpy(ip + 8, path->src_ip6, 16);
	memcpy(ip + 24, path->dst_ip6, 16);
	return ip + WIRE_IPV6_LEN;
}

static uint8_t *put_udp(uint8_t *udp, const struct wire_path *path, size_t udp_len)
{
	put16(udp, path->src_port);
	put16(udp + 2, WIRE_ROCE_PORT);
	put16(udp + 4, (uint16_t)udp_len);
	put16(udp + 6, 0); /* RoCEv2 senders leave the UDP checksum off */
	return udp + WIRE_UDP_LEN;
}

static uint8_t *put_bth(uint8_t *b, const struct wire_bth *bth, size_t pad)
{
	b[0] = bth->opcode;
	b[1] = (uint8_t)((bth->solicited ? 0x80 : 0) | (bth->mig_req ? 0x40 : 0) | pad << 4);
	put16(b + 2, bth->pkey);
	b[4] = (uint8_t)((bth->fecn ? 0x80 : 0) | (bth->becn ? 0x40 : 0));
	put24(b + 5, bth->dest_qp & 0xffffff);
	b[8] = bth->ack_req ? 0x80 : 0;
	put24(b + 9, bth->psn & WIRE_PSN_MASK);
	return b + WIRE_BTH_LEN;
}

static uint8_t *put_atomiceth(uint8_t *p, const struct wire_atomiceth *a)
{
	put64(p, a->va);
	put32(p + 8, a->rkey);
	put64(p + 12, a->swap_add);
	put64(p + 20, a->compare);
	return p + WIRE_ATOMICETH_LEN;
}

static uint8_t *put_deth(uint8_t *p, const struct wire_deth *d)
{
	put32(p, d->qkey);
	p[4] = 0;
	put24(p + 5, d->src_qp & 0xffffff);
	return p + WIRE_DETH_LEN;
}

static uint8_t *put_reth(uint8_t *p, const struct wire_reth *r)
{
	put64(p, r->va);
	put32(p + 8, r->rkey);
	put32(p + 12, r->length);
	return p + WIRE_RETH_LEN;
}

static void put_ext(uint8_t *p, unsigned headers, const struct wire_ext *ext)
{
	if (headers & WIRE_HDR_DETH)
		p = put_deth(p, &ext->deth);
	if (headers & WIRE_HDR_FETH) {
		put32(p, (uint32_t)(ext->feth.selectivity & 0x03) << 4 | (ext->feth.placement & 0x0f));
		p += WIRE_FETH_LEN;
	}
	if (headers & WIRE_HDR_RETH)
		p = put_reth(p, &ext->reth);
	if (headers & WIRE_HDR_ATOMICETH)
		p = put_atomiceth(p, &ext->atomic);
	if (headers & WIRE_HDR_AETH) {
		p[0] = ext->aeth.syndrome;
		put24(p + 1, ext->aeth.msn & 0xffffff);
		p += WIRE_AETH_LEN;
	}
	if (headers & WIRE_HDR_ATOMICACKETH) {
		put64(p, ext->atomic_ack);
		p += WIRE_ATOMICACKETH_LEN;
	}
	if (headers & WIRE_HDR_IMMDT) {
		put32(p, ext->imm);
		p += WIRE_IMMDT_LEN;
	}
	if (headers & WIRE_HDR_IETH)
		put32(p, ext->ieth);
	if (headers & WIRE_HDR_CNP)
		memset(p, 0, WIRE_CNP_LEN);
}

size_t wire_put_headers(uint8_t *buf, size_t cap, const struct wire_path *path,
			uint16_t ip_id, const struct wire_bth *bth, const struct wire_ext *ext,
			size_t payload_len)
{
	const struct wire_opcode_info *op = wire_opcode_info(bth->opcode);
	size_t pad = pad_for(payload_len);
	size_t ip_len = path->ipv6 ? WIRE_IPV6_LEN : WIRE_IPV4_LEN;
	size_t hdr_len, udp_len;
	uint8_t *p;

	if (!op || (payload_len && !op->payload))
		return 0;
	hdr_len = WIRE_BASE_LEN - WIRE_IPV4_LEN + ip_len + op->hdr_len;
	if (payload_len > IP_MAX || cap < hdr_len)
		return 0;
	udp_len = WIRE_UDP_LEN + WIRE_BTH_LEN + op->hdr_len + payload_len + pad + WIRE_ICRC_LEN;
	/* IPv6's length field leaves its own header out, IPv4's counts it */
	if (udp_len + (path->ipv6 ? 0 : WIRE_IPV4_LEN) > IP_MAX)
		return 0;
	p = put_eth(buf, path);
	p = path->ipv6 ? put_ipv6(p, path, udp_len) : put_ipv4(p, path, ip_id, udp_len);
	p = put_udp(p, path, udp_len);
	p = put_bth(p, bth, pad);
	put_ext(p, op->headers, ext);
	return hdr_len;
}

icrc_state wire_icrc_headers(const uint8_t *buf)
{
	bool ipv6 = get16(buf + 12) == WIRE_ETHERTYPE_IPV6;
	size_t ip_len = ipv6 ? WIRE_IPV6_LEN : WIRE_IPV4_LEN;
	size_t bth_off = WIRE_ETH_LEN + ip_len + WIRE_UDP_LEN;
	const struct wire_opcode_info *op = wire_opcode_info(buf[bth_off]);
	icrc_state s = icrc_begin(buf + WIRE_ETH_LEN, ip_len, ipv6 ? 6 : 4);

	return op ? icrc_update(s, buf + bth_off + WIRE_BTH_LEN, op->hdr_len) : s;
}

size_t wire_put_trailer(uint8_t *trailer, icrc_state state, size_t payload_len)
{
	static const uint8_t zeros[4];
	size_t pad = pad_for(payload_len);

	memset(trailer, 0, pad);
	state = icrc_update(state, zeros, pad);
	icrc_store(trailer + pad, icrc_end(state));
	return pad + WIRE_ICRC_LEN;
}

size_t wire_build(uint8_t *buf, size_t cap, const struct wire_path *path, uint16_t ip_id,
		  const struct wire_bth *bth, const struct wire_ext *ext,
		  const void *payload, size_t payload_len)
{
	size_t hdr = wire_put_headers(buf, cap, path, ip_id, bth, ext, payload_len);
	size_t tail = pad_for(payload_len) + WIRE_ICRC_LEN;
	icrc_state s;

	if (!hdr || cap - hdr < payload_len || cap - hdr - payload_len < tail)
		return 0;
	if (payload_len)
		memcpy(buf + hdr, payload, payload_len);
	s = icrc_update(wire_icrc_headers(buf), buf + hdr, payload_len);
	return hdr + payload_len + wire_put_trailer(buf + hdr + payload_len, s, payload_len);
}
