/* cm_mad: the IB Communication Manager's MADs, as RDMA CM sends them over RoCEv2. Pure: no
 * I/O, no allocation.
 *
 * A CM MAD is 256 bytes: the 24-byte MAD header, then one message (REQ, MRA, REJ, REP, RTU,
 * DREQ, DREP, SIDR_REQ, SIDR_REP) whose private data runs to the end. It travels as the whole
 * payload of a UD SEND_ONLY to QP 1 with the GSI Q_Key (cm_mad_frame(), cm_mad_in_frame()).
 * rdma_cm puts a 36-byte CMA header at the start of a REQ's private data (cm_cma_parse()).
 *
 * Error convention: the parsers return an enum cm_mad_status (CM_MAD_OK = 0), each failure
 * with a name for counters and logs; the builders return the bytes written, or 0 when the
 * message could not be parsed back (cm_mad_build() accepts exactly what cm_mad_parse()
 * returns). Values wider than their field are cut to its bits. */
#ifndef ROCEMU_CM_MAD_H
#define ROCEMU_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define CM_MAD_LEN 256
#define CM_MAD_HDR_LEN 24
#define CM_MAD_BASE_VERSION 1
#define CM_MAD_CLASS 0x07           /* management class: Communication Management */
#define CM_MAD_CLASS_VERSION 2
#define CM_MAD_METHOD_SEND 0x03     /* the only method the CM uses */
#define CM_GSI_QPN 1
#define CM_GSI_QKEY 0x80010000u
#define CM_GSI_PKEY 0xffff
#define CM_ARI_LEN 72               /* REJ's additional rejection information */
#define CM_SIDR_INFO_LEN 72         /* SIDR_REP's additional information */
#define CM_PATH_LEN 44              /* a REQ's path: LIDs, GIDs, flow, SL, ACK timeout */

/* Private data bytes each message carries (what is left of the 256). */
#define CM_REQ_PRIVATE_LEN 92
#define CM_MRA_PRIVATE_LEN 222
#define CM_REJ_PRIVATE_LEN 148
#define CM_REP_PRIVATE_LEN 196
#define CM_RTU_PRIVATE_LEN 224
#define CM_DREQ_PRIVATE_LEN 220
#define CM_DREP_PRIVATE_LEN 224
#define CM_SIDR_REQ_PRIVATE_LEN 216
#define CM_SIDR_REP_PRIVATE_LEN 136

enum cm_attr {
	CM_ATTR_CLASS_PORT_INFO = 0x0001,
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
	CM_ATTR_LAP = 0x0019,       /* path migration: rocemu has no alternate paths */
	CM_ATTR_APR = 0x001a,
};

/* "REQ", "REP", ... for any attribute ID, "unknown" for IDs the CM does not define. */
const char *cm_attr_name(uint16_t attr_id);

enum cm_mad_status {
	CM_MAD_OK = 0,
	CM_MAD_TRUNCATED,           /* shorter than 256 bytes */
	CM_MAD_TOO_LONG,            /* longer than 256 bytes */
	CM_MAD_NOT_GSI,             /* not a UD SEND_ONLY to QP 1 */
	CM_MAD_BAD_QKEY,            /* to QP 1 with a Q_Key other than 0x80010000 */
	CM_MAD_BAD_BASE_VERSION,    /* MAD base version is not 1 */
	CM_MAD_NOT_CM_CLASS,        /* management class is not 0x07 */
	CM_MAD_BAD_CLASS_VERSION,   /* CM class version is not 2 */
	CM_MAD_UNKNOWN_METHOD,      /* method is not Send */
	CM_MAD_UNKNOWN_ATTRIBUTE,   /* an attribute ID the CM does not define */
	CM_MAD_UNSUPPORTED_ATTRIBUTE, /* LAP, APR, ClassPortInfo: defined, not carried here */
	CM_MAD_BAD_TRANSPORT,       /* REQ transport neither RC, UC nor XRC */
	CM_MAD_BAD_MTU,             /* REQ path MTU code outside 1..5 (256..4096) */
	CM_MAD_BAD_MESSAGE_CODE,    /* REJ or MRA naming the reserved message code 3 */
	CM_MAD_BAD_INFO_LENGTH,     /* REJ ARI or SIDR_REP information longer than 72 bytes */
	CM_MAD_STATUS_COUNT
};
const char *cm_mad_status_name(enum cm_mad_status status);

/* The MAD header fields that vary; base version, class, class version and method are
 * implied (a parsed MAD has the CM's, a built one gets them). */
struct cm_mad_hdr {
	uint16_t status;
	uint16_t class_specific;
	uint64_t tid;
	uint16_t attr_id;           /* enum cm_attr */
	uint32_t attr_mod;
};

/* A REQ's primary path. In RoCE the GIDs are the IP addresses (IPv4 as ::ffff:a.b.c.d) and
 * the LIDs 0xffff. */
struct cm_path {
	uint16_t local_lid;
	uint16_t remote_lid;
	uint8_t local_gid[16];
	uint8_t remote_gid[16];
	uint32_t flow_label;        /* 20 bits */
	uint8_t packet_rate;        /* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl;                 /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout;  /* 5 bits */
};

/* REQ transport service types (with ext_transport 1, type 3 is XRC). */
enum cm_transport { CM_TRANSPORT_RC = 0, CM_TRANSPORT_UC = 1, CM_TRANSPORT_RD = 2,
		    CM_TRANSPORT_EXT = 3 };
#define CM_EXT_TRANSPORT_XRC 1

struct cm_req {
	uint32_t local_comm_id;
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn;         /* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn;        /* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn;       /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits: 4.096 us * 2^t */
	uint8_t transport;          /* 2 bits, enum cm_transport */
	bool flow_control;
	uint32_t starting_psn;      /* 24 bits */
	uint8_t local_cm_response_timeout; /* 5 bits */
	uint8_t retry_count;        /* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu;           /* 4 bits: 1..5 = 256..4096 */
	bool rdc_exists;
	uint8_t rnr_retry_count;    /* 3 bits */
	uint8_t max_cm_retries;     /* 4 bits */
	bool srq;
	uint8_t ext_transport;      /* 3 bits */
	struct cm_path primary;
	uint8_t alternate[CM_PATH_LEN]; /* as on the wire: rocemu has no path migration */
	uint8_t private_data[CM_REQ_PRIVATE_LEN];
};

/* Which message an MRA acknowledges, or a REJ rejects. */
enum cm_msg_code { CM_MSG_REQ = 0, CM_MSG_REP = 1, CM_MSG_OTHER = 2 };

struct cm_mra {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t message_mraed;      /* 2 bits, enum cm_msg_code */
	uint8_t service_timeout;    /* 5 bits */
	uint8_t private_data[CM_MRA_PRIVATE_LEN];
};

/* REJ reasons (IBA table 109), the ones rdma_cm sends named in cm_rej_reason_name(). */
enum cm_rej_reason {
	CM_REJ_NO_QP = 1,
	CM_REJ_NO_EEC = 2,
	CM_REJ_NO_RESOURCES = 3,
	CM_REJ_TIMEOUT = 4,
	CM_REJ_UNSUPPORTED = 5,
	CM_REJ_INVALID_COMM_ID = 6,
	CM_REJ_INVALID_COMM_INSTANCE = 7,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	CM_REJ_STALE_CONN = 10,
	CM_REJ_RDC_NOT_EXIST = 11,
	CM_REJ_INVALID_GID = 12,
	CM_REJ_INVALID_LID = 13,
	CM_REJ_INVALID_SL = 14,
	CM_REJ_INVALID_TRAFFIC_CLASS = 15,
	CM_REJ_INVALID_HOP_LIMIT = 16,
	CM_REJ_INVALID_PACKET_RATE = 17,
	CM_REJ_INVALID_ALT_GID = 18,
	CM_REJ_INVALID_ALT_LID = 19,
	CM_REJ_INVALID_ALT_SL = 20,
	CM_REJ_INVALID_ALT_TRAFFIC_CLASS = 21,
	CM_REJ_INVALID_ALT_HOP_LIMIT = 22,
	CM_REJ_INVALID_ALT_PACKET_RATE = 23,
	CM_REJ_PORT_CM_REDIRECT = 24,
	CM_REJ_PORT_REDIRECT = 25,
	CM_REJ_INVALID_MTU = 26,
	CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	CM_REJ_CONSUMER_DEFINED = 28,
	CM_REJ_INVALID_RNR_RETRY = 29,
	CM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	CM_REJ_INVALID_CLASS_VERSION = 31,
	CM_REJ_INVALID_FLOW_LABEL = 32,
	CM_REJ_INVALID_ALT_FLOW_LABEL = 33,
	CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
};
/* "invalid service ID", ...; "unknown reason" for codes IBA does not define. */
const char *cm_rej_reason_name(uint16_t reason);

struct cm_rej {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t message_rejected;   /* 2 bits, enum cm_msg_code */
	uint8_t ari_length;         /* 7 bits, at most CM_ARI_LEN */
	uint16_t reason;            /* enum cm_rej_reason */
	uint8_t ari[CM_ARI_LEN];
	uint8_t private_data[CM_REJ_PRIVATE_LEN];
};

struct cm_rep {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;         /* 24 bits */
	uint32_t local_eecn;        /* 24 bits */
	uint32_t starting_psn;      /* 24 bits */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t target_ack_delay;   /* 5 bits */
	uint8_t failover_accepted;  /* 2 bits */
	bool flow_control;
	uint8_t rnr_retry_count;    /* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t private_data[CM_REP_PRIVATE_LEN];
};

/* RTU and DREP: the two comm IDs and private data. */
struct cm_rtu {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t private_data[CM_RTU_PRIVATE_LEN];
};

struct cm_dreq {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t remote_qpn;        /* 24 bits: the QP the receiver is to disconnect */
	uint8_t private_data[CM_DREQ_PRIVATE_LEN];
};

struct cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t private_data[CM_SIDR_REQ_PRIVATE_LEN];
};

enum cm_sidr_status { CM_SIDR_SUCCESS = 0, CM_SIDR_UNSUPPORTED = 1, CM_SIDR_REJECT = 2,
		      CM_SIDR_NO_QP = 3, CM_SIDR_REDIRECT = 4, CM_SIDR_UNSUPPORTED_VERSION = 5 };
/* "success", "no QP", ...; "unknown status" beyond the table. */
const char *cm_sidr_status_name(uint8_t status);

struct cm_sidr_rep {
	uint32_t request_id;
	uint8_t status;             /* enum cm_sidr_status */
	uint8_t info_length;        /* at most CM_SIDR_INFO_LEN */
	uint32_t qpn;               /* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t info[CM_SIDR_INFO_LEN];
	uint8_t private_data[CM_SIDR_REP_PRIVATE_LEN];
};

/* One CM MAD; hdr.attr_id says which member of the union holds the message. */
struct cm_mad {
	struct cm_mad_hdr hdr;
	union {
		struct cm_req req;
		struct cm_mra mra;
		struct cm_rej rej;
		struct cm_rep rep;
		struct cm_rtu rtu;
		struct cm_rtu drep;
		struct cm_dreq dreq;
		struct cm_sidr_req sidr_req;
		struct cm_sidr_rep sidr_rep;
	};
};

/* Reads a MAD of len bytes (exactly CM_MAD_LEN) into out, or names the first way it is not
 * a CM message this codec carries. Reserved bits are ignored. On a refusal out holds what
 * was read before it: out->hdr once the fixed header fields passed, the message too when
 * only its values were refused (so a REQ with a bad transport can still be answered with a
 * REJ to its comm ID). */
enum cm_mad_status cm_mad_parse(const uint8_t *buf, size_t len, struct cm_mad *out);

/* Writes the 256 bytes of mad (reserved bits zero). Returns CM_MAD_LEN, or 0 when mad is not
 * a message cm_mad_parse() would accept back (an attribute other than the nine, a bad
 * transport, MTU, message code or information length). */
size_t cm_mad_build(const struct cm_mad *mad, uint8_t buf[CM_MAD_LEN]);

/* The UD packet that carries a CM MAD: a 256-byte UD SEND_ONLY from QP 1 to QP 1, Q_Key
 * 0x80010000, P_Key 0xffff, MigReq set as RoCE NICs send it. Returns the frame length,
 * or 0 as wire_build(). */
size_t cm_mad_frame(uint8_t *buf, size_t cap, const struct wire_path *path, uint16_t ip_id,
		    uint32_t psn, const uint8_t mad[CM_MAD_LEN]);

/* Whether a frame wire_parse() read whole (WIRE_OK) carries a CM MAD: a UD SEND_ONLY to QP 1
 * with the GSI Q_Key and a 256-byte payload, which *mad then points at. Any source QP is
 * accepted: replies go back to it. */
enum cm_mad_status cm_mad_in_frame(const uint8_t *frame, const struct wire_pkt *pkt,
				   const uint8_t **mad);

/* The CMA header rdma_cm puts at the start of a REQ's private data. */
#define CM_CMA_HDR_LEN 36
#define CM_CMA_VERSION 0x00

struct cm_cma_hdr {
	uint8_t ip_version;         /* 4 or 6 */
	uint16_t src_port;          /* the active side's rdma_cm port, not a UDP port */
	uint8_t src_ip[16];         /* IPv4: the first 4 bytes, as in struct wire_pkt */
	uint8_t dst_ip[16];
};

/* Reads the CMA header from private data of len bytes; false when it is too short, of
 * another CMA version, or names an IP version other than 4 and 6. */
bool cm_cma_parse(const uint8_t *private_data, size_t len, struct cm_cma_hdr *out);

/* Writes the CMA header (IPv4 addresses in the last 4 bytes of their 16, zeros before). */
void cm_cma_build(const struct cm_cma_hdr *hdr, uint8_t out[CM_CMA_HDR_LEN]);

/* rdma_cm's service IDs: port space << 16 | port (TCP port 4420: 0x0000000001061144). */
enum cm_port_space { CM_PS_IPOIB = 0x0002, CM_PS_IB = 0x013f, CM_PS_TCP = 0x0106,
		     CM_PS_UDP = 0x0111 };

static inline uint64_t cm_service_id(enum cm_port_space space, uint16_t port)
{
	return (uint64_t)space << 16 | port;
}

/* Whether service_id is an rdma_cm IP service ID (one of the four port spaces); its space
 * and port when it is. */
bool cm_service_id_ip(uint64_t service_id, uint16_t *space, uint16_t *port);

#endif
