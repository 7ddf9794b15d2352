/* The one opcode table: every other part of wire/ asks it which headers follow the BTH. */
#include "wire/wire.h"

#define HDR_BYTES(h)                                                                  \
	((((h) & WIRE_HDR_DETH) ? WIRE_DETH_LEN : 0) +                                \
	 (((h) & WIRE_HDR_RETH) ? WIRE_RETH_LEN : 0) +                                \
	 (((h) & WIRE_HDR_ATOMICETH) ? WIRE_ATOMICETH_LEN : 0) +                      \
	 (((h) & WIRE_HDR_AETH) ? WIRE_AETH_LEN : 0) +                                \
	 (((h) & WIRE_HDR_ATOMICACKETH) ? WIRE_ATOMICACKETH_LEN : 0) +                \
	 (((h) & WIRE_HDR_IMMDT) ? WIRE_IMMDT_LEN : 0) +                              \
	 (((h) & WIRE_HDR_IETH) ? WIRE_IETH_LEN : 0) +                                \
	 (((h) & WIRE_HDR_CNP) ? WIRE_CNP_LEN : 0) +                                  \
	 (((h) & WIRE_HDR_FETH) ? WIRE_FETH_LEN : 0))

#define OP(code, tr, nm, k, p, h, pl)                                                 \
	[code] = { .name = #tr "_" nm, .transport = WIRE_##tr, .kind = WIRE_KIND_##k,  \
		   .pos = p, .headers = (h), .hdr_len = HDR_BYTES(h), .payload = pl }

/* Operations RC and UC share, at the same offset from their transport's base. */
#define SEND_AND_WRITE(b, tr)                                                          \
	OP(b + 0x00, tr, "SEND_FIRST", SEND, WIRE_POS_FIRST, 0, true),                 \
	OP(b + 0x01, tr, "SEND_MIDDLE", SEND, WIRE_POS_MIDDLE, 0, true),               \
	OP(b + 0x02, tr, "SEND_LAST", SEND, WIRE_POS_LAST, 0, true),                   \
	OP(b + 0x03, tr, "SEND_LAST_WITH_IMMEDIATE", SEND, WIRE_POS_LAST,              \
	   WIRE_HDR_IMMDT, true),                                                      \
	OP(b + 0x04, tr, "SEND_ONLY", SEND, WIRE_POS_ONLY, 0, true),                   \
	OP(b + 0x05, tr, "SEND_ONLY_WITH_IMMEDIATE", SEND, WIRE_POS_ONLY,              \
	   WIRE_HDR_IMMDT, true),                                                      \
	OP(b + 0x06, tr, "RDMA_WRITE_FIRST", WRITE, WIRE_POS_FIRST, WIRE_HDR_RETH, true), \
	OP(b + 0x07, tr, "RDMA_WRITE_MIDDLE", WRITE, WIRE_POS_MIDDLE, 0, true),        \
	OP(b + 0x08, tr, "RDMA_WRITE_LAST", WRITE, WIRE_POS_LAST, 0, true),            \
	OP(b + 0x09, tr, "RDMA_WRITE_LAST_WITH_IMMEDIATE", WRITE, WIRE_POS_LAST,       \
	   WIRE_HDR_IMMDT, true),                                                      \
	OP(b + 0x0a, tr, "RDMA_WRITE_ONLY", WRITE, WIRE_POS_ONLY, WIRE_HDR_RETH, true), \
	OP(b + 0x0b, tr, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", WRITE, WIRE_POS_ONLY,       \
	   WIRE_HDR_RETH | WIRE_HDR_IMMDT, true)


static const struct wire_opcode_info opcodes[256] = {
	SEND_AND_WRITE(0x00, RC),
	OP(0x0c, RC, "RDMA_READ_REQUEST", READ_REQ, WIRE_POS_ONLY, WIRE_HDR_RETH, false),
	OP(0x0d, RC, "RDMA_READ_RESPONSE_FIRST", READ_RESP, WIRE_POS_FIRST, WIRE_HDR_AETH, true),
	OP(0x0e, RC, "RDMA_READ_RESPONSE_MIDDLE", READ_RESP, WIRE_POS_MIDDLE, 0, true),
	OP(0x0f, RC, "RDMA_READ_RESPONSE_LAST", READ_RESP, WIRE_POS_LAST, WIRE_HDR_AETH, true),
	OP(0x10, RC, "RDMA_READ_RESPONSE_ONLY", READ_RESP, WIRE_POS_ONLY, WIRE_HDR_AETH, true),
	OP(0x11, RC, "ACKNOWLEDGE", ACK, 0, WIRE_HDR_AETH, false),
	OP(0x12, RC, "ATOMIC_ACKNOWLEDGE", ATOMIC_ACK, 0, WIRE_HDR_AETH | WIRE_HDR_ATOMICACKETH,
	   false),
	OP(0x13, RC, "COMPARE_SWAP", ATOMIC, WIRE_POS_ONLY, WIRE_HDR_ATOMICETH, false),
	OP(0x14, RC, "FETCH_ADD", ATOMIC, WIRE_POS_ONLY, WIRE_HDR_ATOMICETH, false),
	OP(0x16, RC, "SEND_LAST_WITH_INVALIDATE", SEND, WIRE_POS_LAST, WIRE_HDR_IETH, true),
	OP(0x17, RC, "SEND_ONLY_WITH_INVALIDATE", SEND, WIRE_POS_ONLY, WIRE_HDR_IETH, true),
	OP(0x1c, RC, "FLUSH", FLUSH, WIRE_POS_ONLY, WIRE_HDR_FETH | WIRE_HDR_RETH, false),
	OP(0x1d, RC, "RDMA_ATOMIC_WRITE", ATOMIC_WRITE, WIRE_POS_ONLY, WIRE_HDR_RETH, true),
	SEND_AND_WRITE(0x20, UC),
	OP(0x64, UD, "SEND_ONLY", SEND, WIRE_POS_ONLY, WIRE_HDR_DETH, true),
	OP(0x65, UD, "SEND_ONLY_WITH_IMMEDIATE", SEND, WIRE_POS_ONLY,
	   WIRE_HDR_DETH | WIRE_HDR_IMMDT, true),
	[WIRE_OP_CNP] = { .name = "CNP", .transport = WIRE_CNP_T, .kind = WIRE_KIND_CNP,
			  .headers = WIRE_HDR_CNP, .hdr_len = WIRE_CNP_LEN },
};

const struct wire_opcode_info *wire_opcode_info(uint8_t opcode)
{
	return opcodes[opcode].name ? &opcodes[opcode] : NULL;
}
