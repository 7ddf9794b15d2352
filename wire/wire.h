/* wire: the RoCEv2 codec. Pure: no I/O, no allocation.
 *
 * wire_parse() turns captured bytes into a read-only view of their headers, or names the
 * first way they are malformed; it never reads past the captured length. wire_build() and
 * its pieces write frames (Ethernet / IPv4 / UDP 4791 / BTH / extension headers / payload /
 * pad / ICRC) with the ICRC computed last over the final headers.
 *
 * Error convention: the parser returns an enum wire_status (WIRE_OK = 0); builders return the
 * number of bytes written, or 0 when the request cannot be encoded. */
#ifndef ROCEMU_WIRE_H
#define ROCEMU_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "icrc/icrc.h"

#define WIRE_ROCE_PORT 4791
#define WIRE_ETH_LEN 14
#define WIRE_VLAN_LEN 4
#define WIRE_ETHERTYPE_IPV4 0x0800
#define WIRE_ETHERTYPE_IPV6 0x86dd
#define WIRE_ETHERTYPE_VLAN 0x8100
#define WIRE_IPV4_LEN 20
#define WIRE_IPV6_LEN 40
#define WIRE_UDP_LEN 8
#define WIRE_BTH_LEN 12
#define WIRE_RETH_LEN 16
#define WIRE_AETH_LEN 4
#define WIRE_IMMDT_LEN 4
#define WIRE_DETH_LEN 8
#define WIRE_ATOMICETH_LEN 28
#define WIRE_ATOMICACKETH_LEN 8
#define WIRE_IETH_LEN 4
#define WIRE_FETH_LEN 4
#define WIRE_CNP_LEN 16 /* reserved bytes a CNP carries after its BTH */
#define WIRE_ICRC_LEN ICRC_LEN
/* Ethernet + IPv4 + UDP + BTH: what every built IPv4 frame starts with (IPv6: 20 more). */
#define WIRE_BASE_LEN (WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN + WIRE_BTH_LEN)
#define WIRE_BASE6_LEN (WIRE_BASE_LEN - WIRE_IPV4_LEN + WIRE_IPV6_LEN)
#define WIRE_PSN_MASK 0xffffffu

/* Opcodes this codebase names (RC; UC is RC + 0x20). */
enum wire_opcode {
	WIRE_OP_RC_SEND_FIRST = 0x00,
	WIRE_OP_RC_SEND_MIDDLE = 0x01,
	WIRE_OP_RC_SEND_LAST = 0x02,
	WIRE_OP_RC_SEND_LAST_IMM = 0x03,
	WIRE_OP_RC_SEND_ONLY = 0x04,
	WIRE_OP_RC_SEND_ONLY_IMM = 0x05,
	WIRE_OP_RC_WRITE_FIRST = 0x06,
	WIRE_OP_RC_WRITE_MIDDLE = 0x07,
	WIRE_OP_RC_WRITE_LAST = 0x08,
	WIRE_OP_RC_WRITE_LAST_IMM = 0x09,
	WIRE_OP_RC_WRITE_ONLY = 0x0a,
	WIRE_OP_RC_WRITE_ONLY_IMM = 0x0b,
	WIRE_OP_RC_READ_REQUEST = 0x0c,
	WIRE_OP_RC_READ_RESP_FIRST = 0x0d,
	WIRE_OP_RC_READ_RESP_MIDDLE = 0x0e,
	WIRE_OP_RC_READ_RESP_LAST = 0x0f,
	WIRE_OP_RC_READ_RESP_ONLY = 0x10,
	WIRE_OP_RC_ACK = 0x11,
	WIRE_OP_RC_ATOMIC_ACK = 0x12,
	WIRE_OP_RC_COMPARE_SWAP = 0x13,
	WIRE_OP_RC_FETCH_ADD = 0x14,
	WIRE_OP_RC_SEND_LAST_INV = 0x16,
	WIRE_OP_RC_SEND_ONLY_INV = 0x17,
	WIRE_OP_RC_FLUSH = 0x1c,          /* FETH + RETH (IBA Memory Placement Extensions) */
	WIRE_OP_RC_ATOMIC_WRITE = 0x1d,   /* RETH + 8 bytes, written at once; answered with an
					   * empty READ RESPONSE ONLY */
	WIRE_OP_UC_BASE = 0x20,
	WIRE_OP_UD_SEND_ONLY = 0x64,
	WIRE_OP_UD_SEND_ONLY_IMM = 0x65,
	WIRE_OP_CNP = 0x81,
};

/* Extension headers that may follow the BTH, listed in their wire order. */
enum wire_hdr {
	WIRE_HDR_DETH = 1 << 0,
	WIRE_HDR_RETH = 1 << 1,
	WIRE_HDR_ATOMICETH = 1 << 2,
	WIRE_HDR_AETH = 1 << 3,
	WIRE_HDR_ATOMICACKETH = 1 << 4,
	WIRE_HDR_IMMDT = 1 << 5,
	WIRE_HDR_IETH = 1 << 6,
	WIRE_HDR_CNP = 1 << 7,
	WIRE_HDR_FETH = 1 << 8,  /* before the RETH */
};

enum wire_transport { WIRE_RC, WIRE_UC, WIRE_UD, WIRE_CNP_T };

/* What an opcode does, and where it sits in a multi-packet message. */
enum wire_kind {
	WIRE_KIND_SEND, WIRE_KIND_WRITE, WIRE_KIND_READ_REQ, WIRE_KIND_READ_RESP,
	WIRE_KIND_ACK, WIRE_KIND_ATOMIC, WIRE_KIND_ATOMIC_ACK, WIRE_KIND_CNP,
	WIRE_KIND_ATOMIC_WRITE, WIRE_KIND_FLUSH,
};
enum wire_pos { WIRE_POS_FIRST = 1, WIRE_POS_LAST = 2, WIRE_POS_ONLY = 3, WIRE_POS_MIDDLE = 4 };

struct wire_opcode_info {
	const char *name;   /* "RC RDMA_WRITE_FIRST", ... */
	uint8_t transport;  /* enum wire_transport */
	uint8_t kind;       /* enum wire_kind */
	uint8_t pos;        /* enum wire_pos, 0 when not part of a message */
	uint16_t headers;   /* enum wire_hdr bits */
	uint8_t hdr_len;    /* bytes of those headers */
	bool payload;       /* may carry a payload */
};

/* The opcode's table entry, or NULL for an opcode rocemu does not know. */
const struct wire_opcode_info *wire_opcode_info(uint8_t opcode);

enum wire_status {
	WIRE_OK = 0,
	WIRE_NOT_ROCE,        /* not an IPv4/IPv6 UDP datagram to port 4791 */
	WIRE_FRAGMENT,        /* an IP fragment */
	WIRE_TRUNCATED,       /* captured shorter than its IP length (snap length) */
	WIRE_IP_LENGTH,       /* IP length too short for the IP and UDP headers */
	WIRE_UDP_LENGTH,      /* UDP length disagrees with the IP length or captured bytes */
	WIRE_SHORT_BTH,       /* too short for BTH + ICRC */
	WIRE_TVER,            /* BTH transport version is not 0 */
	WIRE_UNKNOWN_OPCODE,
	WIRE_SHORT_HEADERS,   /* too short for the opcode's extension headers + ICRC */
	WIRE_BAD_PAD,         /* pad count larger than the payload, or length not 4-aligned */
	WIRE_UNEXPECTED_PAYLOAD, /* payload on an opcode that carries none */
	WIRE_STATUS_COUNT
};
const char *wire_status_name(enum wire_status status);

/* The two ECN bits of the IPv4 TOS or IPv6 traffic class (RFC 3168). */
enum wire_ecn { WIRE_ECN_NOT_ECT = 0, WIRE_ECN_ECT1 = 1, WIRE_ECN_ECT0 = 2, WIRE_ECN_CE = 3 };
#define WIRE_ECN_MASK 3
#define WIRE_TOS_CNP 0xc2  /* DSCP 48 and ECT(0): what a ConnectX-4 Lx puts on its CNPs */

struct wire_bth {
	uint8_t opcode;
	bool solicited;
	bool mig_req;
	uint8_t pad;        /* PadCnt; the builder computes it */
	uint8_t tver;
	uint16_t pkey;
	bool fecn;
	bool becn;
	uint32_t dest_qp;   /* 24 bits */
	bool ack_req;
	uint32_t psn;       /* 24 bits */
};

struct wire_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t length;
};

struct wire_aeth {
	uint8_t syndrome;
	uint32_t msn;       /* 24 bits */
};

struct wire_deth {
	uint32_t qkey;
	uint32_t src_qp;
};

/* FLUSH's FETH: the placement type in bits 3-0 (a set of WIRE_FLUSH_GLOBAL, _PERSISTENT,
 * rdma-core's IBV_FLUSH_*), the selectivity level in bits 5-4 (WIRE_FLUSH_RANGE: the
 * RETH's range; WIRE_FLUSH_MR: the whole MR), the rest reserved (ignored when read). */
struct wire_feth {
	uint8_t placement;
	uint8_t selectivity;
};
enum { WIRE_FLUSH_GLOBAL = 1, WIRE_FLUSH_PERSISTENT = 2 };
enum { WIRE_FLUSH_RANGE = 0, WIRE_FLUSH_MR = 1 };

struct wire_atomiceth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};

/* Extension headers of one packet; the opcode's table entry says which are present. */
struct wire_ext {
	struct wire_deth deth;
	struct wire_reth reth;
	struct wire_atomiceth atomic;
	struct wire_aeth aeth;
	uint64_t atomic_ack;
	uint32_t imm;       /* ImmDt, host order */
	uint32_t ieth;      /* invalidated rkey */
	struct wire_feth feth;
};

/* How far wire_parse() got: the layers below are valid when their bit is set. */
enum wire_layers {
	WIRE_HAVE_IP = 1 << 0,   /* ip_version, addresses, l3_off, ip_hdr_len */
	WIRE_HAVE_UDP = 1 << 1,  /* a whole UDP datagram to 4791 was captured: ICRC checkable */
	WIRE_HAVE_BTH = 1 << 2,
	WIRE_HAVE_ALL = 1 << 3,  /* op, ext, payload */
};

struct wire_pkt {
	uint8_t layers;          /* enum wire_layers */
	bool vlan;
	uint16_t vlan_tci;
	uint8_t ip_version;      /* 4 or 6 */
	uint8_t ecn;             /* the IP header's ECN field: enum wire_ecn */
	uint8_t src_ip[16];      /* IPv4 uses the first 4 bytes, network order */
	uint8_t dst_ip[16];
	uint16_t l3_off;
	uint16_t ip_hdr_len;
	uint16_t l4_off;         /* UDP header */
	uint16_t udp_src_port;
	uint16_t udp_len;        /* UDP header through ICRC */
	struct wire_bth bth;
	const struct wire_opcode_info *op;
	struct wire_ext ext;
	uint16_t payload_off;
	uint16_t payload_len;    /* without pad */
	uint32_t icrc;           /* the trailer as received */
};

/* Parses an Ethernet frame of caplen captured bytes. On any status, pkt->layers says which
 * fields were filled. */
enum wire_status wire_parse(const uint8_t *frame, size_t caplen, struct wire_pkt *pkt);

/* Whether the trailer matches the packet; needs WIRE_HAVE_UDP. */
bool wire_icrc_ok(const uint8_t *frame, const struct wire_pkt *pkt);

/* One direction of a path: what Ethernet, IP and UDP need to carry a packet. */
struct wire_path {
	uint8_t src_mac[6];
	uint8_t dst_mac[6];
	bool ipv6;               /* IPv6 addresses below instead of IPv4 */
	uint32_t src_ip;         /* IPv4, network byte order */
	uint32_t dst_ip;
	uint8_t src_ip6[16];
	uint8_t dst_ip6[16];
	uint32_t flow_label;     /* IPv6 only, 20 bits */
	uint16_t src_port;       /* UDP source port, host order */
	uint8_t tos;             /* IPv4 TOS, IPv6 traffic class */
	uint8_t ttl;             /* IPv4 TTL, IPv6 hop limit */
};

/* Writes Ethernet, IP, UDP, BTH and the opcode's extension headers for a packet that will
 * carry payload_len bytes, sizing every length field (and PadCnt) for it; ip_id is the IPv4
 * identification (IPv6 has none). Returns the header length, or 0 when the opcode is
 * unknown, the payload is not allowed for it, or the packet would not fit in an IP datagram
 * or in cap. */
size_t wire_put_headers(uint8_t *buf, size_t cap, const struct wire_path *path,
			uint16_t ip_id, const struct wire_bth *bth, const struct wire_ext *ext,
			size_t payload_len);

/* The ICRC state over the headers just written (buf as given to wire_put_headers; the
 * EtherType says which IP). Fold the payload with icrc_update(), then call
 * wire_put_trailer(). */
icrc_state wire_icrc_headers(const uint8_t *buf);

/* Writes the pad (zeros) and the ICRC after payload_len payload bytes; returns the bytes
 * written (pad + 4). */
size_t wire_put_trailer(uint8_t *trailer, icrc_state state, size_t payload_len);

/* A whole frame in one buffer: headers, a copy of the payload, pad, ICRC. Returns the frame
 * length, or 0 as wire_put_headers. */
size_t wire_build(uint8_t *buf, size_t cap, const struct wire_path *path, uint16_t ip_id,
		  const struct wire_bth *bth, const struct wire_ext *ext,
		  const void *payload, size_t payload_len);

/* UDP GSO frames (gso.c): one frame that carries a run of packets of one flow, the first
 * whole and then only the UDP payloads of the others. */
#define WIRE_GSO_HDR_LEN (WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN)
typedef void (*wire_deliver_fn)(void *ctx, const uint8_t *frame, size_t len);

/* Whether the frame next can be packet k (from 0) of the GSO frame that first starts:
 * IPv4 without options, UDP, the same MACs, addresses, ports, TOS, flags and TTL, the IPv4
 * id k above first's, and no longer than first (only the last packet may be shorter). */
bool wire_gso_can_follow(const uint8_t *first, size_t first_len, const uint8_t *next,
			 size_t next_len, unsigned k);
/* The same, whatever the ids: for a GSO frame sent through a UDP socket, which sets them. */
bool wire_gso_same_flow(const uint8_t *first, size_t first_len, const uint8_t *next,
			size_t next_len);

/* A frame sent through a UDP socket leaves with the socket's source port and the IPv4 id
 * the kernel picks (0 for the first packet of a send that sets DF on an unconnected
 * socket, counting up for the rest of a GSO frame). wire_gso_reflow() gives a built IPv4
 * frame those values, its IPv4 checksum and its ICRC patched for them: an ICRC that was
 * wrong (corrupted on purpose) stays wrong. carry is wire_gso_reflow_carry(len), the same
 * for every frame of one length. */
uint32_t wire_gso_reflow_carry(size_t len);
void wire_gso_reflow(uint8_t *frame, size_t len, uint16_t ip_id, uint16_t src_port,
		     uint32_t carry);

/* The first frame's headers as a GSO frame of total bytes needs them: IPv4 and UDP lengths
 * of the whole frame, the IPv4 checksum for them, and in the UDP checksum field the
 * pseudo-header sum the kernel finishes for each packet. wire_gso_restore_first() puts
 * back the first packet's own lengths (first_len bytes) and RoCEv2's UDP checksum 0. */
void wire_gso_set_first(uint8_t *first, size_t total);
void wire_gso_restore_first(uint8_t *first, size_t first_len);

/* Cuts a received GSO frame of len bytes into its packets of seg_bytes of UDP payload (the
 * last may be shorter), in place, and hands each to deliver as Linux would have made it:
 * the IPv4 id counting up, its own lengths and IPv4 checksum, the UDP checksum 0. False,
 * and nothing delivered, when the frame is not IPv4/UDP without options (one VLAN tag is
 * allowed) or holds no payload. */
bool wire_gso_split(uint8_t *frame, size_t len, size_t seg_bytes, wire_deliver_fn deliver,
		    void *ctx);

/* A captured GSO frame (a capture does not keep the size of its packets): the UDP payload
 * bytes of each packet, the first at which cutting the frame (len bytes, its whole parsed
 * as first) as wire_gso_split() does gives at least two pieces that all pass piece_ok.
 * The guesses, in order: the first packet's headers and ICRC around a payload of one of
 * IBA's path MTUs (a long message), of its RETH's length (short WRITEs), then of every
 * multiple of 4 up to 4096 (short SENDs); the first piece alone is tried before the
 * whole. scratch holds len bytes; *pieces is how many. 0 when no guess passes. */
typedef bool (*wire_piece_ok_fn)(const uint8_t *piece, size_t len);
size_t wire_gso_find_pieces(const uint8_t *frame, size_t len, const struct wire_pkt *first,
			    wire_piece_ok_fn piece_ok, uint8_t *scratch, unsigned *pieces);

/* The AETH syndrome's meaning. */
enum wire_aeth_type { WIRE_AETH_ACK = 0, WIRE_AETH_RNR_NAK = 1, WIRE_AETH_RESERVED = 2,
		      WIRE_AETH_NAK = 3 };
#define WIRE_SYN_ACK 0x1f               /* ACK with unlimited credits */
#define WIRE_SYN_NAK_PSN_SEQ 0x60
#define WIRE_SYN_NAK_INV_REQ 0x61
#define WIRE_SYN_NAK_REM_ACCESS 0x62
#define WIRE_SYN_NAK_REM_OP 0x63
static inline enum wire_aeth_type wire_aeth_type(uint8_t syndrome)
{
	return (enum wire_aeth_type)(syndrome >> 5);
}
/* "ACK", "NAK PSN sequence error", "RNR NAK" ...; buf must hold 48 bytes. */
const char *wire_syndrome_name(uint8_t syndrome, char *buf, size_t len);

/* 24-bit PSN serial arithmetic: negative when a precedes b, 0 when equal. */
static inline int32_t wire_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

#endif
