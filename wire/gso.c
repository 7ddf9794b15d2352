/* UDP GSO frames of RoCEv2 packets: the headers of the first packet once, then the UDP
 * payloads of all of them. Linux cuts such a frame into packets that keep the first one's
 * headers except for the IPv4 id (counting up by one from the first), the IPv4 and UDP
 * lengths, and the checksums; every packet here is built, ICRC included, with the values
 * that cutting gives it back. */
#include <string.h>

#include "wire/bytes.h"
#include "wire/wire.h"

#define IPV4_NO_OPTIONS 0x45
#define IPV4_PROTO_UDP 17
#define IP_AT WIRE_ETH_LEN
#define UDP_AT (WIRE_ETH_LEN + WIRE_IPV4_LEN)

bool wire_gso_same_flow(const uint8_t *first, size_t first_len, const uint8_t *next,
			size_t next_len)
{
	return first_len >= WIRE_GSO_HDR_LEN && next_len > WIRE_GSO_HDR_LEN &&
	       next_len <= first_len && get16(first + 12) == WIRE_ETHERTYPE_IPV4 &&
	       first[IP_AT] == IPV4_NO_OPTIONS && first[IP_AT + 9] == IPV4_PROTO_UDP &&
	       !memcmp(first, next, IP_AT + 2) &&
	       !memcmp(first + IP_AT + 6, next + IP_AT + 6, 4) &&
	       !memcmp(first + IP_AT + 12, next + IP_AT + 12, 12);
}

bool wire_gso_can_follow(const uint8_t *first, size_t first_len, const uint8_t *next,
			 size_t next_len, unsigned k)
{
	return wire_gso_same_flow(first, first_len, next, next_len) &&
	       get16(next + IP_AT + 4) == (uint16_t)(get16(first + IP_AT + 4) + k);
}

/* The bytes patched run from the IPv4 id to the end of the UDP source port. */
#define REFLOW_FROM (IP_AT + 4)
#define REFLOW_TO (UDP_AT + 2)

uint32_t wire_gso_reflow_carry(size_t len)
{
	return icrc_carry_factor(len - REFLOW_TO - ICRC_LEN);
}

void wire_gso_reflow(uint8_t *frame, size_t len, uint16_t ip_id, uint16_t src_port,
		     uint32_t carry)
{
	uint8_t diff[REFLOW_TO - REFLOW_FROM] = { 0 };
	uint8_t *ip = frame + IP_AT, *trailer = frame + len - ICRC_LEN;

	put16(diff, get16(ip + 4) ^ ip_id);
	put16(diff + sizeof(diff) - 2, get16(frame + UDP_AT) ^ src_port);
	put16(ip + 4, ip_id);
	put16(frame + UDP_AT, src_port);
	put16(ip + 10, 0);
	put16(ip + 10, (uint16_t)~fold16(sum16(ip, WIRE_IPV4_LEN, 0)));
	icrc_store(trailer, icrc_patch(icrc_load(trailer), diff, sizeof(diff), carry));
}

static void set_lengths(uint8_t *first, size_t frame_len)
{
	uint8_t *ip = first + IP_AT;

	put16(ip + 2, (uint16_t)(frame_len - IP_AT));
	put16(first + UDP_AT + 4, (uint16_t)(frame_len - UDP_AT));
	put16(ip + 10, 0);
	put16(ip + 10, (uint16_t)~fold16(sum16(ip, WIRE_IPV4_LEN, 0)));
}

/* Like Linux's own UDP GSO packets, the first header describes the whole frame: IP input
 * trims a frame to its IPv4 total length, and a UDP socket can only cut a frame that
 * kept all its bytes. Cutting gives every packet its own lengths and checksums back; the
 * UDP checksum field holds the pseudo-header sum the kernel finishes for each (a veth or
 * lo passes the frame on without doing so; the ICRC ignores the field). */
void wire_gso_set_first(uint8_t *first, size_t total)
{
	uint32_t sum;

	set_lengths(first, total);
	sum = sum16(first + IP_AT + 12, 8, IPV4_PROTO_UDP + get16(first + UDP_AT + 4));
	put16(first + UDP_AT + 6, fold16(sum));
}

void wire_gso_restore_first(uint8_t *first, size_t first_len)
{
	set_lengths(first, first_len);
	put16(first + UDP_AT + 6, 0);
}

/* Each packet is rebuilt in place, its headers written over the end of the packet before
 * it, which deliver has had by then. */
bool wire_gso_split(uint8_t *frame, size_t len, size_t seg_bytes, wire_deliver_fn deliver,
		    void *ctx)
{
	uint8_t head[WIRE_GSO_HDR_LEN + WIRE_VLAN_LEN];
	size_t l3 = WIRE_ETH_LEN, hdr;
	uint16_t id;

	if (len >= WIRE_ETH_LEN + WIRE_VLAN_LEN && get16(frame + 12) == WIRE_ETHERTYPE_VLAN)
		l3 += WIRE_VLAN_LEN;
	hdr = l3 + WIRE_IPV4_LEN + WIRE_UDP_LEN;
	if (!seg_bytes || len <= hdr || get16(frame + l3 - 2) != WIRE_ETHERTYPE_IPV4 ||
	    frame[l3] != IPV4_NO_OPTIONS || frame[l3 + 9] != IPV4_PROTO_UDP)
		return false;
	memcpy(head, frame, hdr);
	id = get16(head + l3 + 4);
	for (size_t off = hdr; off < len; off += seg_bytes, id++) {
		size_t n = len - off < seg_bytes ? len - off : seg_bytes;
		uint8_t *seg = frame + off - hdr, *ip = seg + l3;

		memcpy(seg, head, hdr);
		put16(ip + 2, (uint16_t)(WIRE_IPV4_LEN + WIRE_UDP_LEN + n));
		put16(ip + 4, id);
		put16(ip + 10, 0);
		put16(ip + 10, (uint16_t)~fold16(sum16(ip, WIRE_IPV4_LEN, 0)));
		put16(ip + WIRE_IPV4_LEN + 4, (uint16_t)(WIRE_UDP_LEN + n));
		put16(ip + WIRE_IPV4_LEN + 6, 0);
		deliver(ctx, seg, hdr + n);
	}
	return true;
}

/* Guess i (from 0) at the pieces' bytes, as wire_gso_find_pieces() says; 0 past the last. */
static size_t gso_guess(const struct wire_pkt *first, unsigned i)
{
	static const size_t path_mtus[] = { 256, 512, 1024, 2048, 4096 };
	const unsigned n_mtus = sizeof(path_mtus) / sizeof(path_mtus[0]);
	size_t headers = (size_t)first->payload_off - first->l4_off - WIRE_UDP_LEN, payload;

	if (i < n_mtus)
		payload = path_mtus[i];
	else if (i == n_mtus)
		payload = first->op && (first->op->headers & WIRE_HDR_RETH) &&
				  first->ext.reth.length <= 4096 ? first->ext.reth.length : 4096;
	else if ((i - n_mtus - 1) * 4 <= 4096)
		payload = (size_t)(i - n_mtus - 1) * 4;
	else
		return 0;
	return headers + ((payload + 3) & ~(size_t)3) + WIRE_ICRC_LEN;
}

struct piece_check {
	wire_piece_ok_fn ok;
	unsigned n;
	bool all_ok;
};

static void check_piece(void *ctx, const uint8_t *piece, size_t len)
{
	struct piece_check *c = ctx;

	c->all_ok = c->all_ok && c->ok(piece, len);
	c->n++;
}

/* Whether frame cut at piece bytes (of its first piece only when first_only) passes. */
static bool cut_passes(const uint8_t *frame, size_t headers_end, size_t len, size_t piece,
		       bool first_only, uint8_t *scratch, struct piece_check *c)
{
	if (first_only)
		len = headers_end + piece;
	memcpy(scratch, frame, len);
	c->n = 0;
	c->all_ok = true;
	return wire_gso_split(scratch, len, piece, check_piece, c) && c->all_ok;
}

size_t wire_gso_find_pieces(const uint8_t *frame, size_t len, const struct wire_pkt *first,
			    wire_piece_ok_fn piece_ok, uint8_t *scratch, unsigned *pieces)
{
	size_t headers_end = (size_t)first->l4_off + WIRE_UDP_LEN, piece;
	struct piece_check c = { piece_ok, 0, true };

	if (first->ip_version != 4 || len <= headers_end)
		return 0;
	for (unsigned i = 0; (piece = gso_guess(first, i)) != 0; i++) {
		if (piece < len - headers_end &&
		    cut_passes(frame, headers_end, len, piece, true, scratch, &c) &&
		    cut_passes(frame, headers_end, len, piece, false, scratch, &c) && c.n > 1) {
			*pieces = c.n;
			return piece;
		}
	}
	return 0;
}
