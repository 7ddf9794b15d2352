/* The private protocol between librocemu and rocemud (both sides of one build).
 *
 * Control: one request and one reply per SOCK_SEQPACKET message on the daemon's UNIX
 * socket; file descriptors travel as SCM_RIGHTS beside them. Every message starts with a
 * struct proto_hdr and has exactly the size of its op's struct.
 *
 * Data: each QP and CQ has a ring in a memfd the daemon creates and passes to the client.
 * Indices are free-running u32 counters; slot = index & (entries - 1). The producer writes
 * the entry, then stores its index with release order; the consumer loads the index with
 * acquire order, then reads. The client rings the QP's doorbell (a pipe) after posting;
 * the daemon signals the CQ's pipe after adding completions. The daemon trusts nothing
 * the client writes into a ring: indices and entries are checked before use. */
#ifndef ROCEMU_PROTO_H
#define ROCEMU_PROTO_H

#include <stdint.h>

#define PROTO_VERSION 25
/* 2048: the stats reply outgrew 1024 bytes with the CM's counters */
#define PROTO_MAX_MSG 2048
/* A device's limits are at least the kernel's rxe's, so programs sized for rxe make their
 * queues here too. A WQE's slot in its ring holds only what its queue was made for
 * (proto_swqe_stride, proto_rwqe_stride): a queue of 2^20 one-SGE WQEs is not 2^20 of
 * the largest. */
#define PROTO_MAX_SGE 32
#define PROTO_MAX_INLINE 512  /* bytes of IBV_SEND_INLINE data: the room of 32 SGEs */
#define PROTO_MAX_RING (1u << 20)  /* entries per SQ, RQ, SRQ or CQ */
#define PROTO_MAX_GIDS 8      /* addresses a daemon serves: its port's GID table */
/* Multicast, rxe's limits: groups a device receives, UD QPs attached to one group, and
 * attachments of every QP to every group together */
#define PROTO_MAX_MCAST_GRP 8192
#define PROTO_MAX_MCAST_QP_ATTACH 56
#define PROTO_MAX_TOTAL_MCAST_QP_ATTACH (PROTO_MAX_MCAST_GRP * PROTO_MAX_MCAST_QP_ATTACH)
#define PROTO_MCAST_QPN 0xffffffu  /* a multicast datagram's destination QP (IBA 9.2) */

enum proto_op {
	PROTO_HELLO = 1,
	PROTO_QUERY_PORT,
	PROTO_ALLOC_PD,
	PROTO_DEALLOC_PD,
	PROTO_REG_MR,        /* + 1 fd: the memfd holding the pages, or none when memfd_ino
			      * names the one the connection's last REG_MR with an fd gave */
	PROTO_DEREG_MR,
	PROTO_CREATE_CQ,     /* reply + 2 fds: ring memfd, notify pipe (read end) */
	PROTO_DESTROY_CQ,
	PROTO_CREATE_QP,     /* reply + 2 fds: ring memfd, doorbell pipe (write end) */
	PROTO_MODIFY_QP,
	PROTO_QUERY_QP,
	PROTO_DESTROY_QP,
	PROTO_STATS,         /* reply: proto_stats_reply */
	PROTO_SET_FAULT,     /* request: proto_fault (root or the daemon's user only) */
	PROTO_STATUS,        /* request: proto_handle; reply: proto_status_reply */
	PROTO_LIST,          /* request: proto_list; reply: proto_list_reply */
	PROTO_CREATE_SRQ,    /* reply + 2 fds: ring memfd, limit event pipe (read end) */
	PROTO_MODIFY_SRQ,
	PROTO_QUERY_SRQ,     /* request: proto_handle; reply: proto_query_srq_reply */
	PROTO_DESTROY_SRQ,
	PROTO_CREATE_AH,     /* request: proto_create_ah; reply: proto_handle_reply */
	PROTO_DESTROY_AH,
	PROTO_RESIZE_CQ,     /* request: proto_resize_cq; reply: proto_create_cq_reply + 1 fd:
			      * the new ring's memfd (the completions not yet polled moved in) */
	PROTO_ALLOC_MW,      /* request: proto_alloc_mw; reply: proto_alloc_mw_reply */
	PROTO_DEALLOC_MW,    /* request: proto_handle */
	/* RDMA CM (the daemon's CM layer); events go to a channel's socket, not in replies */
	PROTO_CM_CHANNEL,    /* request: proto_handle + 1 fd, the socket the daemon writes the
			      * channel's proto_cm_event messages to; reply: proto_handle_reply */
	PROTO_CM_CLOSE_CHANNEL, /* request: proto_handle */
	PROTO_CM_LISTEN,     /* request: proto_cm_listen; reply: proto_handle_reply */
	PROTO_CM_UNLISTEN,   /* request: proto_handle (the listener) */
	PROTO_CM_RESOLVE,    /* request: proto_cm_resolve: the neighbour of a GID is known (the
			      * reply may wait for it; the loop does not) */
	PROTO_CM_CONNECT,    /* request: proto_cm_connect (sends a REQ); reply:
			      * proto_handle_reply, the connection's handle (its local comm ID) */
	PROTO_CM_ACCEPT,     /* request: proto_cm_accept (sends a REP) */
	PROTO_CM_REJECT,     /* request: proto_cm_reject (sends a REJ, consumer defined) */
	PROTO_CM_ESTABLISH,  /* request: proto_handle (sends the RTU after a REP) */
	PROTO_CM_DISCONNECT, /* request: proto_handle (sends a DREQ, or the DREP a DREQ awaits) */
	PROTO_CM_DESTROY,    /* request: proto_handle: the client forgets the connection; the CM
			      * ends it as the kernel's does (REJ, DREQ or DREP) */
	PROTO_CM_MIGRATE,    /* request: proto_cm_migrate: a connection's or listener's events
			      * go to another of the client's channels */
	PROTO_ATTACH_MCAST,  /* request: proto_mcast: a UD QP receives the group's datagrams */
	PROTO_DETACH_MCAST,  /* request: proto_mcast */
	PROTO_REREG_MR,      /* request: proto_rereg_mr, + 1 fd (the memfd) exactly when the
			      * translation changes; reply: proto_reg_mr_reply */
	PROTO_BATCH,         /* request: proto_batch; reply: proto_batch_reply */
	PROTO_CREATE_QP_CQS, /* request: proto_create_qp_cqs; reply: proto_create_qp_cqs_reply
			      * + 6 fds: the QP's two as CREATE_QP's, then the receive CQ's and
			      * the send CQ's two each as CREATE_CQ's */
	PROTO_OP_COUNT
};

struct proto_hdr {
	uint32_t op;
	int32_t status;      /* replies: 0 or a negative errno */
};

/* In a request's op: the sender reads no reply and goes on at once. The daemon answers a
 * failure with a line in its log and a count (ctl_unanswered_failed) instead. Only a
 * request whose reply says nothing but success (one a batch may hold) or a batch of them
 * may go so; any other is refused with a reply, as a malformed request is. The library
 * sends a destroy so when it has checked itself what the daemon would refuse, so that a
 * program tearing down its QPs and connections does not wait for each answer. */
#define PROTO_NO_REPLY 0x80000000u

/* Replies carry this much of the daemon's explanation of a failure. */
#define PROTO_ERRMSG 96

struct proto_reply {
	struct proto_hdr hdr;
	char errmsg[PROTO_ERRMSG];
};

struct proto_hello {
	struct proto_hdr hdr;
	uint32_t version;
	uint32_t pad;
};

/* PROTO_HELLO's reply carries one descriptor: the read end of the connection's event pipe.
 * The daemon writes a proto_async_event there for each asynchronous event it raises, as the
 * kernel queues them on a context's async fd: IBV_EVENT_CQ_ERR (a completion lost to a
 * full CQ, one per loss, as rxe raises them; handle: the CQ's), IBV_EVENT_PORT_ACTIVE and
 * IBV_EVENT_PORT_ERR (the link started or stopped running; handle: PROTO_PORT_NUM).
 * Nonblocking at both ends: while the pipe is full, further events are lost. */
struct proto_async_event {
	uint32_t type;       /* enum ibv_event_type */
	uint32_t handle;     /* the object's */
};

#define PROTO_PORT_NUM 1     /* a device's one port */

struct proto_hello_reply {
	struct proto_reply r;
	uint32_t version;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_sge;
	uint64_t max_mr_size;
	uint64_t pin_limit;
	uint32_t max_qp_rd_atom;  /* READs and atomics outstanding per QP, each way */
	uint32_t atomic_cap;      /* enum ibv_atomic_cap */
	uint32_t max_srq;         /* per connection, counted with its CQs and QPs */
	uint32_t max_srq_wr;
	uint32_t max_inline_data;
	uint32_t pad;
};

struct proto_port_reply {
	struct proto_reply r;
	uint32_t state;      /* enum ibv_port_state */
	uint32_t max_mtu;    /* enum ibv_mtu */
	uint32_t active_mtu;
	uint32_t ipv4;       /* network byte order: the first IPv4 address served, or 0 */
	char ifname[16];
	uint8_t mac[6];      /* the interface's: the verbs layer derives the node GUID */
	uint8_t pad[2];
	uint32_t ngids;
	uint32_t pad2;
	uint8_t gids[PROTO_MAX_GIDS][16];   /* RoCE v2 GIDs: ::ffff:a.b.c.d or IPv6 */
};

/* Requests that name one object: DEALLOC_PD, DEREG_MR, DESTROY_CQ, DESTROY_QP, QUERY_QP,
 * QUERY_PORT and ALLOC_PD (handle unused). */
struct proto_handle {
	struct proto_hdr hdr;
	uint32_t handle;
	uint32_t pad;
};

struct proto_handle_reply {
	struct proto_reply r;
	uint32_t handle;
	uint32_t pad;
};

struct proto_reg_mr {
	struct proto_hdr hdr;
	uint32_t pd;
	uint32_t access;     /* IBV_ACCESS_* */
	uint64_t iova;
	uint64_t length;
	uint64_t fd_offset;  /* where iova lies in the memfd */
	uint64_t memfd_ino;  /* without an fd: the inode of the memfd meant (-ESTALE when the
			      * daemon holds no such memfd for this connection) */
};

struct proto_reg_mr_reply {
	struct proto_reply r;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t pad;
};

/* ibv_rereg_mr: flags is a set of IBV_REREG_MR_CHANGE_*; pd, access and the translation
 * (iova, length, fd_offset, as in proto_reg_mr) are read only when their flag is set. */
struct proto_rereg_mr {
	struct proto_hdr hdr;
	uint32_t handle;     /* the MR */
	uint32_t flags;
	uint32_t pd;
	uint32_t access;
	uint64_t iova;
	uint64_t length;
	uint64_t fd_offset;
};

/* A memory window of a PD: type 1 or 2 (enum ibv_mw_type). Its rkey is the MW's key now;
 * a bind gives it the key byte the binder chose. */
struct proto_alloc_mw {
	struct proto_hdr hdr;
	uint32_t pd;
	uint32_t type;
};

struct proto_alloc_mw_reply {
	struct proto_reply r;
	uint32_t handle;
	uint32_t rkey;
};

struct proto_create_cq {
	struct proto_hdr hdr;
	uint32_t cqe;
	uint32_t pad;
};

struct proto_resize_cq {
	struct proto_hdr hdr;
	uint32_t handle;
	uint32_t cqe;
};

struct proto_create_cq_reply {
	struct proto_reply r;
	uint32_t handle;
	uint32_t entries;    /* a power of two >= cqe */
	uint64_t ring_bytes;
};

/* MODIFY_QP request, CREATE_QP's change to INIT and QUERY_QP reply body: the attributes
 * rocemu understands. */
struct proto_qp_attr {
	uint32_t state;      /* enum ibv_qp_state */
	uint32_t path_mtu;   /* enum ibv_mtu */
	uint32_t dest_qpn;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t access;     /* IBV_ACCESS_REMOTE_* the QP accepts */
	uint8_t dest_gid[16];        /* the peer: ::ffff:a.b.c.d or an IPv6 address */
	uint32_t flow_label;         /* picks the UDP source port; 0: from the QP numbers */
	uint8_t sgid_index;          /* the port's GID the QP sends from */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t min_rnr_timer;
	uint8_t max_rd_atomic;       /* READs and atomics this QP may have outstanding */
	uint8_t max_dest_rd_atomic;  /* ... and serve for its peer at once */
	uint8_t pad[3];
	uint32_t qkey;               /* UD: datagrams must carry it */
	uint32_t pad2;
};

struct proto_create_qp {
	struct proto_hdr hdr;
	uint32_t pd;
	uint32_t send_cq;
	uint32_t recv_cq;
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t sq_sig_all;
	uint32_t srq;        /* the SRQ's handle, 0: the QP has its own receive queue */
	uint32_t qp_type;    /* IBV_QPT_RC, IBV_QPT_UC or IBV_QPT_UD */
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	/* nonzero: the QP goes to INIT at once, as a PROTO_MODIFY_QP with these would take it
	 * (IBV_QP_STATE and the attributes a RESET to INIT takes, no address); if that is
	 * refused, no QP is made */
	uint32_t init_mask;
	struct proto_qp_attr init;
};

/* An address handle: where a UD send goes (the QP number and Q_Key come with each
 * work request). The daemon resolves the neighbour when it is created. */
struct proto_create_ah {
	struct proto_hdr hdr;
	uint32_t pd;
	uint32_t flow_label;     /* 0: derived from the QP numbers, as rxe does */
	uint8_t dgid[16];
	uint8_t sgid_index;
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t pad[5];
};

/* A shared receive queue: a ring of proto_rwqe like a QP's RQ, and a pipe that gets a byte
 * when the WQEs left fall below srq_limit (then the limit is cleared, as verbs says). */
struct proto_create_srq {
	struct proto_hdr hdr;
	uint32_t pd;
	uint32_t max_wr;
	uint32_t srq_limit;  /* 0: not armed */
	uint32_t max_sge;
};

struct proto_create_srq_reply {
	struct proto_reply r;
	uint32_t handle;
	uint32_t entries;
	uint64_t ring_bytes;
};

struct proto_modify_srq {
	struct proto_hdr hdr;
	uint32_t handle;
	uint32_t attr_mask;  /* enum ibv_srq_attr_mask: IBV_SRQ_LIMIT only */
	uint32_t max_wr;
	uint32_t srq_limit;
};

struct proto_query_srq_reply {
	struct proto_reply r;
	uint32_t max_wr;
	uint32_t srq_limit;
};

struct proto_create_qp_reply {
	struct proto_reply r;
	uint32_t handle;
	uint32_t qpn;
	uint32_t sq_entries;
	uint32_t rq_entries;
	uint64_t ring_bytes;
	uint64_t rq_offset;  /* where the RQ ring starts in the memfd */
	/* what the queues were made for (at least what was asked): the slots' sizes follow */
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	uint32_t pad;
};

/* A QP and the two CQs it completes to, made in one round trip (rdma_create_qp's, for an
 * id given no CQs): as CREATE_CQ twice and CREATE_QP would make them; if one cannot be
 * made, none is. */
struct proto_create_qp_cqs {
	struct proto_create_qp qp;   /* its send_cq and recv_cq are those made here */
	uint32_t recv_cqe;
	uint32_t send_cqe;
};

struct proto_cq_made {
	uint32_t handle;
	uint32_t entries;
	uint64_t ring_bytes;
};

struct proto_create_qp_cqs_reply {
	struct proto_create_qp_reply qp;
	struct proto_cq_made recv_cq;
	struct proto_cq_made send_cq;
};

#define PROTO_MAX_REPLY_FDS 6

struct proto_mcast {
	struct proto_hdr hdr;
	uint32_t qp;
	uint32_t pad;
	uint8_t gid[16];             /* the group: ::ffff:224.0.0.0/100 or ff00::/8 */
};

struct proto_modify_qp {
	struct proto_hdr hdr;
	uint32_t handle;
	uint32_t attr_mask;  /* enum ibv_qp_attr_mask bits */
	struct proto_qp_attr attr;
};

struct proto_query_qp_reply {
	struct proto_reply r;
	struct proto_qp_attr attr;
};

/* RDMA CM. A connection's handle is its local comm ID; a listener's and a channel's are
 * the CM's own numbers. cookie is the library's name for its rdma_cm_id, returned in every
 * event about it. Addresses are GIDs (::ffff:a.b.c.d for IPv4); ports in host order. */
#define PROTO_CM_REQ_PRIVATE 56      /* a REQ's 92 bytes less the CMA header's 36 */
#define PROTO_CM_PRIVATE_MAX 224     /* the most any CM message carries (RTU, DREP) */

struct proto_cm_listen {
	struct proto_hdr hdr;
	uint32_t channel;
	uint32_t backlog;            /* CONNECT_REQUESTs not yet accepted or rejected */
	uint64_t cookie;
	uint64_t service_id;         /* port space << 16 | port */
	uint8_t gid[16];             /* the address listened on; all zeros: any */
	uint8_t any_family;          /* with a zero gid: 4 or 6 only (AFONLY), 0 both */
	/* 1: only hold the service ID (a bound id holds its port from the bind, as the
	 * kernel's); REQs to it wait for a listen that names the handle, or find nobody */
	uint8_t bind_only;
	uint8_t hold_flags;          /* with bind_only: PROTO_CM_HOLD_* */
	uint8_t pad;
	uint32_t bound;              /* the handle a bind_only request gave, now listened on */
};

/* Holds of a port that all asked for it may share it (REUSEADDR), until one listens. */
#define PROTO_CM_HOLD_REUSEADDR 1
/* The library picked the port (ephemeral) and tries the next when this one is taken,
 * which is then EADDRINUSE whatever the addresses. */
#define PROTO_CM_HOLD_ANY_PORT  2

struct proto_cm_resolve {
	struct proto_hdr hdr;
	uint8_t dgid[16];
	/* 1: answer at once, -EWOULDBLOCK when the neighbour is not known yet (the kernel is
	 * asked): the caller waits on a connection of its own, not one its threads share */
	uint8_t no_wait;
	uint8_t reserved[7];
};

struct proto_cm_connect {
	struct proto_hdr hdr;
	uint32_t channel;
	uint32_t qpn;                /* one of this client's QPs */
	uint64_t cookie;
	uint64_t service_id;
	uint8_t sgid[16];            /* the source address: one of the daemon's */
	uint8_t dgid[16];
	uint16_t src_port;           /* the active side's rdma_cm port (the CMA header's) */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t srq;
	uint8_t tos;
	uint8_t private_len;
	uint8_t packet_life_time;    /* the route's: the REQ's ACK timeout comes from it */
	uint8_t pad;
	uint32_t flow_label;         /* the route's (20 bits): the REQ's and both QPs' */
	uint8_t private_data[PROTO_CM_REQ_PRIVATE];
};

struct proto_cm_accept {
	struct proto_hdr hdr;
	uint32_t conn;
	uint32_t channel;            /* the new id's channel */
	uint64_t cookie;             /* the new id */
	uint32_t qpn;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t srq;
	uint8_t private_len;
	uint8_t pad[6];
	uint8_t private_data[196];   /* a REP's */
};

/* Requests run one after another in one round trip, each as if sent alone, until one
 * fails: what would otherwise be a sleep and a wakeup of the client and the daemon apiece
 * (rdma_accept's INIT, RTR and RTS and then the REP, say). A request may be batched when it
 * carries no descriptor and its reply is a bare proto_reply; a batch holds no batch. The
 * requests lie back to back in body, each at an 8-byte boundary. */
#define PROTO_BATCH_MAX 4
#define PROTO_BATCH_BODY 1024
struct proto_batch {
	struct proto_hdr hdr;
	uint32_t count;
	uint32_t len[PROTO_BATCH_MAX];
	uint32_t pad;
	uint8_t body[PROTO_BATCH_BODY];
};

/* Sent whole whether the batch succeeded or not: hdr.status and errmsg are those of the
 * request that failed, done the number that ran before it. */
struct proto_batch_reply {
	struct proto_reply r;
	uint32_t done;
	uint32_t pad;
};

struct proto_cm_migrate {
	struct proto_hdr hdr;
	uint32_t handle;             /* a connection, or with listener set a listener */
	uint32_t channel;
	uint32_t listener;
	uint32_t pad;
};

struct proto_cm_reject {
	struct proto_hdr hdr;
	uint32_t conn;
	uint8_t private_len;
	uint8_t pad[3];
	uint8_t private_data[148];   /* a REJ's */
};

/* The QP attributes a connection gives, as the kernel's rdma_init_qp_attr: the RTR and
 * RTS fields of proto_qp_attr filled, the state left to the caller. */

/* One event, as the CM writes it to a channel's socket (SOCK_SEQPACKET, one a message).
 * event and status are librdmacm's (enum rdma_cm_event_type; a REJ's reason, or a
 * negative errno). */
struct proto_cm_event {
	uint32_t event;
	int32_t status;
	uint64_t cookie;             /* CONNECT_REQUEST: the listener's */
	uint32_t conn;
	uint32_t peer_qpn;
	uint8_t responder_resources; /* as the receiver sees them (the peer's swapped) */
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t srq;
	uint8_t ip_version;          /* CONNECT_REQUEST: the CMA header's */
	uint8_t pad;
	uint16_t local_port;         /* CONNECT_REQUEST: the listener's port */
	uint16_t peer_port;          /* ... and the active side's */
	uint8_t local_gid[16];
	uint8_t peer_gid[16];
	uint32_t private_len;
	uint8_t private_data[PROTO_CM_PRIVATE_MAX];
	struct proto_qp_attr qp;     /* CONNECT_REQUEST, CONNECT_RESPONSE: RTR and RTS */
};

/* A QP state (enum ibv_qp_state) as verbs and rdma-core print it. */
static inline const char *proto_qp_state_name(uint32_t state)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "UNKNOWN";
}

/* Device counters, rxe's hw_counters names first, then rocemu's own. X(name, help) */
#define PROTO_COUNTERS(X)                                                                \
	X(sent_pkts, "RoCE packets sent")                                                \
	X(rcvd_pkts, "RoCE packets received and accepted for a QP")                      \
	X(duplicate_request, "duplicate request packets (re-ACKed, not executed again)")  \
	X(out_of_seq_request, "request packets ahead of the expected PSN")              \
	X(rcvd_rnr_err, "RNR NAKs received")                                             \
	X(send_rnr_err, "RNR NAKs sent (SEND or WRITE WITH IMM without a receive WQE)")  \
	X(rcvd_seq_err, "PSN sequence error NAKs received")                              \
	X(rcvd_seq_err_in_resend, "... of them while a resend was under way (no new retry)") \
	X(retry_exceeded_err, "work requests failed after retry_cnt retransmissions")     \
	X(retry_rnr_exceeded_err, "work requests failed after rnr_retry RNR retries")     \
	X(completer_retry_err, "resend rounds started (timeout, sequence NAK, lost READ responses)") \
	X(send_err, "frames the kernel refused to send")                                 \
	X(link_downed, "times the link was seen going down")                             \
	X(rdma_sends, "RDMA WRITE and SEND messages sent")                              \
	X(rdma_recvs, "RDMA WRITE and SEND messages received")                          \
	X(drop_malformed, "dropped: malformed RoCEv2 packet (see rocemuctl decode)")     \
	X(drop_not_ours, "dropped: destination IP is not this device")                   \
	X(drop_bad_icrc, "dropped: ICRC mismatch")                                       \
	X(drop_unknown_qp, "dropped: destination QP 0 or unknown")                       \
	X(drop_transport, "dropped: opcode not of the QP's transport, or unsupported")   \
	X(drop_qp_state, "dropped: QP not in a state to receive")                         \
	X(drop_wrong_peer, "dropped: source IP is not the QP's peer")                    \
	X(drop_bad_pkey, "dropped: P_Key mismatch")                                      \
	X(drop_stale_ack, "dropped: ACK or NAK for a PSN not outstanding")               \
	X(drop_ring_full, "dropped by the kernel: the receive ring was full")            \
	X(drop_truncated, "dropped: frame larger than a receive ring slot")              \
	X(loopback_pkts, "packets from one QP of this daemon to another (not on the wire)") \
	X(drop_loopback_full, "dropped: the loopback queue between local QPs was full")  \
	X(sent_gso_frames, "GSO frames sent (several packets of one QP in one send)")     \
	X(send_udp_refused, "sends a UDP socket refused, their packets sent by the packet socket") \
	X(rcvd_gso_frames, "GSO frames received and cut into their packets")             \
	X(nak_seq_sent, "PSN sequence error NAKs sent")                                  \
	X(nak_inv_req_sent, "invalid request NAKs sent")                                 \
	X(nak_rem_access_sent, "remote access error NAKs sent (rkey, PD, access, bounds)") \
	X(nak_rem_op_sent, "remote operational error NAKs sent (a receive WQE unfit for a SEND)") \
	X(acks_sent, "ACKs sent")                                                        \
	X(timeouts, "retransmission timer expiries")                                     \
	X(rtt_samples, "round trips timed for the retransmission timer (ACKed PSNs)")     \
	X(np_ecn_marked_roce_packets, "data packets received marked ECN CE by the network") \
	X(np_ring_marked_packets, "data packets received while the receive ring was backed up") \
	X(np_cnp_sent, "CNPs sent to a peer QP whose packets met congestion")           \
	X(rp_cnp_handled, "CNPs received for a rate-controlled QP")                      \
	X(rp_cnp_ignored, "CNPs received with congestion control off")                   \
	X(rp_rate_cuts, "send rate cuts (at most one per reduce period)")                \
	X(rp_paced_waits, "times a QP's send rate held its next packet back")            \
	X(credit_waits, "times a QP waited for the daemon's unacknowledged-packet limit")  \
	X(drop_reply_full, "dropped: READ, atomic or ACK with the QP's responses queue full") \
	X(cq_overflow, "completions lost to a full CQ")                                  \
	X(async_events_lost, "asynchronous events lost to a client's full event pipe")   \
	X(doorbells, "doorbells that woke the daemon (a client's post while it slept)")   \
	X(polled_posts, "posts the daemon found polling, the client's doorbell skipped")  \
	X(cq_wakeups, "completion wakeups written to a client asleep on its CQ")         \
	X(ctl_neigh_waits, "control requests (or batches) held until a neighbour resolved") \
	X(ctl_unanswered_failed, "control requests sent with no reply wanted that failed (logged)") \
	X(rings_reused, "queues given a destroyed queue's ring and pipe, not new ones")     \
	X(poll_yielded, "polls ended early: a yield found the CPU wanted by others")      \
	X(rt_backoffs, "--realtime: SCHED_FIFO dropped after running 10 ms without sleeping") \
	X(qkey_viol, "dropped: UD datagram whose Q_Key is not the QP's")                \
	X(drop_ud_no_recv, "dropped: UD datagram with no receive WQE posted")            \
	X(drop_ud_too_long, "dropped: UD datagram longer than the MTU or its receive WQE") \
	X(ud_send_too_long, "UD sends longer than the port MTU: not sent (IBA C10-93.1.1)") \
	X(mcast_rcvd, "multicast datagrams received for a group with QPs attached")      \
	X(mcast_copies, "... their copies placed or refused by each attached QP's checks") \
	X(drop_mcast_no_group, "dropped: multicast datagram to a group no QP is attached to") \
	X(fault_dropped, "injected: frames dropped")                                     \
	X(fault_duplicated, "injected: frames duplicated")                               \
	X(fault_corrupted, "injected: frames with a bit flipped after the ICRC")         \
	X(fault_reordered, "injected: frames held back behind the next one")             \
	X(fault_delayed, "injected: frames delayed")                                     \
	X(cm_mads_sent, "CM MADs sent (REQ, REP, RTU, REJ, DREQ, DREP, MRA)")            \
	X(cm_mads_rcvd, "CM MADs received whole and parsed")                             \
	X(cm_resent, "CM MADs sent again after their timeout")                           \
	X(cm_drop_malformed, "CM: dropped a MAD that does not parse, or one the CM does not take") \
	X(cm_drop_bad_icrc, "CM: dropped a MAD to QP 1 with an ICRC mismatch")           \
	X(cm_drop_stale, "CM: dropped a MAD for a comm ID unknown or in another state")   \
	X(cm_dup_req, "CM: duplicate REQs (answered again when answered)")               \
	X(cm_dup_rep, "CM: duplicate REPs (the RTU sent again)")                         \
	X(cm_rej_no_listener, "CM: REQs rejected with reason 8: nobody listens on the service ID") \
	X(cm_req_waited, "CM: requests to a port held and not listened on yet, kept a moment for the listen") \
	X(cm_rej_backlog, "CM: REQs rejected: the listener's backlog is full")           \
	X(cm_rej_too_many, "CM: REQs rejected: the daemon holds its most connections")   \
	X(cm_rej_sent, "CM: REJs sent, every reason")                                    \
	X(cm_rej_rcvd, "CM: REJs received")                                              \
	X(cm_timeouts, "CM: connections given up after their MAD's retries (unreachable)") \
	X(cm_established, "CM: connections established")                                \
	X(cm_events_lost, "CM: events lost: a client's channel closed, or too many waiting for it to read") \
	X(cm_rej_client_limit, "CM: connections refused: the client holds its most (REQs: REJ 3)") \
	X(cm_drop_wrong_peer, "CM: dropped a MAD for a connection, sent from another GID than its peer's") \
	X(cm_mra_ignored, "CM: MRAs ignored: the MAD waited for was MRA'd already")      \
	X(cm_timewait_cut, "CM: TimeWaits ended early: the CM was full and a new connection took the place")

#define PROTO_COUNT_ONE(name, help) +1
enum { PROTO_NCOUNTERS = 0 PROTO_COUNTERS(PROTO_COUNT_ONE) };

/* Why the responder refused a request, one name per check, in rxe's order of checks: each
 * NAK it sends (and each SEND WITH INVALIDATE it fails) has one, and so does each packet a
 * UC QP drops (silently: UC sends no NAK). X(name, help) */
#define PROTO_REFUSALS(X)                                                                \
	X(none, "nothing refused")                                                       \
	X(opcode_sequence, "invalid request: MIDDLE or LAST without its FIRST, or a FIRST inside a message") \
	X(no_remote_write, "invalid request: a WRITE to a QP without IBV_ACCESS_REMOTE_WRITE") \
	X(no_remote_read, "invalid request: a READ to a QP without IBV_ACCESS_REMOTE_READ") \
	X(no_remote_atomic, "invalid request: an atomic to a QP without IBV_ACCESS_REMOTE_ATOMIC") \
	X(no_flush_access, "invalid request: a FLUSH of a placement type the QP's IBV_ACCESS_FLUSH_* do not grant") \
	X(flush_level, "invalid request: a FLUSH's selectivity level is neither range (0) nor whole MR (1)") \
	X(opcode_unsupported, "invalid request: an opcode the responder does not take")   \
	X(no_rd_resources, "invalid request: a READ, atomic or FLUSH to a QP with max_dest_rd_atomic 0") \
	X(no_receive, "RNR NAK: a SEND or WRITE WITH IMMEDIATE found no receive WQE posted") \
	X(receive_ring_index, "invalid request: the client's receive ring index lies")   \
	X(receive_malformed, "remote operational error: the receive WQE is malformed")   \
	X(length_only, "invalid request: an ONLY packet longer than the path MTU")        \
	X(length_not_pmtu, "invalid request: a FIRST or MIDDLE packet not of the path MTU") \
	X(length_last, "invalid request: a LAST packet empty or longer than the path MTU") \
	X(length_dma, "invalid request: a RETH length over 2 GiB")                        \
	X(rkey_unknown, "remote access error: no MR at the rkey's index")                \
	X(rkey_stale, "remote access error: the rkey's key byte is not the MR's (deregistered)") \
	X(rkey_other_pd, "remote access error: the MR belongs to another PD than the QP's") \
	X(rkey_no_access, "remote access error: the MR does not grant the access asked")   \
	X(rkey_mr_invalid, "remote access error: the MR is being torn down")             \
	X(rkey_bounds, "remote access error: the range is not inside the MR (or the MW)") \
	X(rkey_other_qp, "remote access error: a type 2 MW bound to another QP than this one") \
	X(rkey_mw_unbound, "remote access error: the MW is not bound (free, or bound with length 0)") \
	X(atomic_unaligned, "invalid request: an atomic's address not 8-byte aligned")    \
	X(write_length, "invalid request: a WRITE's payload does not match its RETH length") \
	X(write_copy, "remote access error: the MR refused the WRITE's bytes")           \
	X(receive_too_small, "remote operational error: a SEND longer than its receive WQE") \
	X(receive_sge, "remote operational error: a receive SGE failed its lkey, PD or bounds") \
	X(receive_not_held, "remote operational error: a SEND's bytes with no receive WQE held") \
	X(read_memory, "remote access error: a READ's memory stopped resolving")          \
	X(atomic_memory, "remote access error: an atomic's word stopped resolving")       \
	X(send_invalidate, "SEND WITH INVALIDATE: the rkey is no type 2 MW of this QP's PD bound to it (completed in error)") \
	X(uc_message_dropped, "UC: a MIDDLE or LAST whose message lost a packet (PSN gap) or was refused")

/* Why a send work request completed in error (the first of the QP's failures; the work
 * requests behind it are flushed). X(name, help) */
#define PROTO_FAILURES(X)                                                                \
	X(none, "nothing failed")                                                        \
	X(local_opcode, "IBV_WC_LOC_QP_OP_ERR: an opcode this QP cannot send, an unaligned atomic, or a LOCAL_INV refused") \
	X(mw_bind, "IBV_WC_MW_BIND_ERR: a BIND_MW whose MW, MR, PDs, state, access or bounds do not allow it") \
	X(local_length, "IBV_WC_LOC_LEN_ERR: too many SGEs, too long, or an atomic's buffer short") \
	X(local_lkey, "IBV_WC_LOC_PROT_ERR: an SGE failed its lkey, PD, access or bounds")  \
	X(nak_invalid_request, "IBV_WC_REM_INV_REQ_ERR: the responder NAKed an invalid request") \
	X(nak_remote_access, "IBV_WC_REM_ACCESS_ERR: the responder NAKed a remote access error") \
	X(nak_remote_operational, "IBV_WC_REM_OP_ERR: the responder NAKed an operational error") \
	X(retry_exceeded, "IBV_WC_RETRY_EXC_ERR: retry_cnt resend rounds without progress") \
	X(rnr_retry_exceeded, "IBV_WC_RNR_RETRY_EXC_ERR: rnr_retry RNR NAKs in a row")     \
	X(response_unexpected, "IBV_WC_BAD_RESP_ERR: a response of the wrong kind, place or length") \
	X(response_placement, "IBV_WC_LOC_PROT_ERR: a READ response or atomic value failed its SGEs")

#define PROTO_REFUSAL_ENUM(name, help) PROTO_REFUSED_##name,
enum proto_refusal { PROTO_REFUSALS(PROTO_REFUSAL_ENUM) PROTO_NREFUSALS };
#undef PROTO_REFUSAL_ENUM
#define PROTO_FAILURE_ENUM(name, help) PROTO_FAILED_##name,
enum proto_failure { PROTO_FAILURES(PROTO_FAILURE_ENUM) PROTO_NFAILURES };
#undef PROTO_FAILURE_ENUM

struct proto_stats_reply {
	struct proto_reply r;
	uint32_t ncounters;
	uint32_t pad;
	uint64_t counters[PROTO_NCOUNTERS]; /* in PROTO_COUNTERS order */
	char fault[128];                    /* the fault spec in force, "off" when none */
	uint32_t nrefusals;
	uint32_t nfailures;
	uint64_t refused[PROTO_NREFUSALS];  /* requests refused, by reason */
	uint64_t failed[PROTO_NFAILURES];   /* send work requests failed, by reason */
};
_Static_assert(sizeof(struct proto_stats_reply) <= PROTO_MAX_MSG, "stats reply too large");
_Static_assert(sizeof(struct proto_batch) <= PROTO_MAX_MSG, "batch too large");
/* rdma_accept's batch: three QP changes and the REP */
_Static_assert(3 * ((sizeof(struct proto_modify_qp) + 7) & ~7ul) +
	       sizeof(struct proto_cm_accept) <= PROTO_BATCH_BODY, "batch body too small");

#define PROTO_FAULT_SPEC 128
struct proto_fault {
	struct proto_hdr hdr;
	char spec[PROTO_FAULT_SPEC];        /* NUL-terminated */
};

/* STATUS: the port as ibv_devinfo shows it, and a summary of the device. */
struct proto_status_reply {
	struct proto_reply r;
	uint32_t state;      /* enum ibv_port_state */
	uint32_t max_mtu;    /* enum ibv_mtu */
	uint32_t active_mtu;
	uint32_t ipv4;       /* network byte order: the first IPv4 address served, or 0 */
	char ifname[16];
	uint32_t ngids;
	uint8_t gids[PROTO_MAX_GIDS][16];
	uint32_t clients;
	uint32_t qps;
	uint32_t mrs;
	uint32_t pad;
	uint64_t pinned_bytes;
	uint64_t rcvd_pkts;
	uint64_t sent_pkts;
	uint64_t drops;      /* every drop_* counter */
};

/* LIST: one page of the daemon's clients, MRs or QPs, from item number start on. */
enum proto_list_kind { PROTO_LIST_CLIENTS = 1, PROTO_LIST_MRS, PROTO_LIST_QPS, PROTO_LIST_CM };

struct proto_list {
	struct proto_hdr hdr;
	uint32_t kind;
	uint32_t start;
};

struct proto_client_entry {
	uint32_t pid;
	uint32_t uid;
	char comm[16];       /* /proc/PID/comm */
	uint64_t pinned_bytes; /* the process's */
	uint32_t pds, mrs, cqs, qps;
};

struct proto_mr_entry {
	uint32_t pid;
	uint32_t pd;         /* the owner's PD handle */
	uint32_t lkey;
	uint32_t rkey;
	uint64_t iova;
	uint64_t length;
	uint32_t access;     /* IBV_ACCESS_* */
	uint32_t pad;
};

struct proto_qp_entry {
	uint32_t pid;
	uint32_t qpn;
	uint32_t state;      /* enum ibv_qp_state */
	uint8_t dest_gid[16];
	uint32_t dest_qpn;
	uint32_t sq_psn;     /* next PSN to send */
	uint32_t rq_psn;     /* expected PSN */
	uint32_t path_mtu;   /* enum ibv_mtu */
	uint32_t srtt_us;    /* the smoothed round trip the timer learned, 0 before one */
	uint32_t rto_us;     /* the retransmission timer's interval now */
	uint32_t rate_mbps;  /* the send rate congestion control allows, 0 when unlimited */
	uint16_t last_refusal;  /* enum proto_refusal: why its responder last refused */
	uint16_t last_failure;  /* enum proto_failure: why its last send request failed */
	/* its rings, counted since it was made (they wrap at 2^32): work requests the client
	 * posted, the daemon took and (send queue) completed; 0 for a receive queue an SRQ
	 * stands in for */
	uint32_t sq_posted, sq_taken, sq_done;
	uint32_t rq_posted, rq_taken;
};

/* A CM connection or listener (state "LISTEN"). */
struct proto_cm_entry {
	uint32_t pid;        /* 0: its client is gone, the CM ends it */
	char state[12];
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t local_qpn;
	uint32_t remote_qpn;
	uint64_t service_id;
	uint8_t peer_gid[16];
};

#define PROTO_LIST_BYTES 768
struct proto_list_reply {
	struct proto_reply r;
	uint32_t kind;
	uint32_t count;      /* entries in this page */
	uint32_t next;       /* start of the next page, 0 when this is the last */
	uint32_t pad;
	union {
		struct proto_client_entry clients[PROTO_LIST_BYTES / sizeof(struct proto_client_entry)];
		struct proto_mr_entry mrs[PROTO_LIST_BYTES / sizeof(struct proto_mr_entry)];
		struct proto_qp_entry qps[PROTO_LIST_BYTES / sizeof(struct proto_qp_entry)];
		struct proto_cm_entry cms[PROTO_LIST_BYTES / sizeof(struct proto_cm_entry)];
	} u;
};
#define PROTO_LIST_MAX(member) (sizeof(((struct proto_list_reply *)0)->u.member) / \
				sizeof(((struct proto_list_reply *)0)->u.member[0]))

/* Rings kept for the next queue: the daemon gives a client's new CQ, SRQ or QP the memfd
 * of one of that client's destroyed queues of the same kind and size, zeroed; it keeps at
 * most PROTO_RING_PARK_SLOTS of them a client, each at most PROTO_RING_PARK_MAX_BYTES, and
 * the library keeps its mappings of them within the same bounds. */
#define PROTO_RING_PARK_SLOTS     8
#define PROTO_RING_PARK_MAX_BYTES (256u << 10)

/* Ring control block: each index on its own cache line, written by one side only. The
 * consumer's line also holds what it tells the producer about wakeups (cons_flags):
 *   PROTO_RING_POLLED  the consumer polls this ring now: the producer may skip its write
 *                      to the channel (a send or receive queue: no doorbell needed);
 *   PROTO_RING_WAKE    the consumer sleeps (or is about to) on the channel: the producer
 *                      must write to it (a CQ: wake the client);
 *   PROTO_RING_LAZY    a QP's receive ring only, set unless the QP is in ERROR: the
 *                      daemon takes a receive when a message arrives for it, so a post
 *                      needs no doorbell; in ERROR every post must ring, to be flushed;
 *   PROTO_RING_WAKE_SOLICITED  with PROTO_RING_WAKE, a CQ armed for solicited events
 *                      only: the write waits for a solicited completion, so a channel's
 *                      fd turns readable only for an event, as on a kernel device.
 * Either side stores its index or flag, then a full fence, then loads the other's: of two
 * racing sides at least one sees the other's store, so no wakeup is lost. */
#define PROTO_RING_POLLED 1u
#define PROTO_RING_WAKE   2u
#define PROTO_RING_LAZY   4u
#define PROTO_RING_WAKE_SOLICITED 8u
struct proto_ring_ctl {
	uint32_t prod;
	uint8_t pad0[60];
	uint32_t cons;
	uint32_t cons_flags;
	uint8_t pad1[56];
};

struct proto_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* A send work request, as the client library writes it. */
/* RDMA FLUSH (IBA Memory Placement Extensions, rxe since Linux 6.2): Debian 12's
 * <infiniband/verbs.h> (rdma-core 44) has none of its names, so they are spelled here with
 * the values of rdma-core's later verbs.h. */
#define PROTO_WR_FLUSH 14                     /* IBV_WR_FLUSH */
#define PROTO_WC_FLUSH 8                      /* IBV_WC_FLUSH */
#define PROTO_QP_EX_WITH_FLUSH (1u << 11)     /* IBV_QP_EX_WITH_FLUSH */
#define PROTO_ACCESS_FLUSH_GLOBAL (1 << 8)    /* IBV_ACCESS_FLUSH_GLOBAL */
#define PROTO_ACCESS_FLUSH_PERSISTENT (1 << 9) /* IBV_ACCESS_FLUSH_PERSISTENT */
#define PROTO_FLUSH_GLOBAL 1                  /* IBV_FLUSH_GLOBAL: placement types */
#define PROTO_FLUSH_PERSISTENT 2              /* IBV_FLUSH_PERSISTENT */
#define PROTO_FLUSH_RANGE 0                   /* IBV_FLUSH_RANGE: selectivity levels */
#define PROTO_FLUSH_MR 1                      /* IBV_FLUSH_MR */

struct proto_swqe {
	uint64_t wr_id;
	uint32_t opcode;     /* IBV_WR_RDMA_WRITE[_WITH_IMM], IBV_WR_SEND[_WITH_IMM|_INV],
			      * IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, _FETCH_AND_ADD,
			      * IBV_WR_LOCAL_INV (the rkey in imm, host order, as for _INV),
			      * IBV_WR_BIND_MW (remote_addr and compare_add: the window's address
			      * and length; rkey: its new key; mw_rkey, mr_lkey, mw_access),
			      * PROTO_WR_FLUSH (remote_addr, rkey, flush_len, flush_type,
			      * flush_level; no SGE) */
	uint32_t flags;      /* IBV_SEND_SIGNALED, _FENCE, _INLINE, _SOLICITED */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;        /* network byte order, as ibv_send_wr */
	uint32_t num_sge;
	uint32_t inline_len;  /* IBV_SEND_INLINE: the bytes in inline_data, sge unused */
	uint64_t compare_add; /* atomics: the compare value, or what to add */
	uint64_t swap;
	union {
		struct {
			uint32_t ah; /* UD: the address handle, the QP and the Q_Key it goes to */
			uint32_t remote_qpn;
			uint32_t remote_qkey;
			uint32_t pad;
		};
		struct {
			uint32_t mw_rkey;   /* BIND_MW: the MW, by its key now */
			uint32_t mr_lkey;   /* the MR it opens onto */
			uint32_t mw_access; /* IBV_ACCESS_* of the window */
			uint32_t pad2;
		};
		struct {
			uint32_t flush_len;   /* FLUSH: the range's bytes (level range) */
			uint32_t flush_type;  /* PROTO_FLUSH_GLOBAL | PROTO_FLUSH_PERSISTENT */
			uint32_t flush_level; /* PROTO_FLUSH_RANGE or PROTO_FLUSH_MR */
			uint32_t pad3;
		};
	};
	union {
		struct proto_sge sge[PROTO_MAX_SGE];
		uint8_t inline_data[PROTO_MAX_INLINE];
	};
};

/* A receive work request: where an incoming SEND is scattered. */
struct proto_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct proto_sge sge[PROTO_MAX_SGE];
};

struct proto_cqe {
	uint64_t wr_id;
	uint32_t status;     /* enum ibv_wc_status */
	uint32_t opcode;     /* enum ibv_wc_opcode */
	uint32_t byte_len;
	uint32_t imm;        /* network byte order */
	uint32_t qp_num;
	uint32_t wc_flags;   /* IBV_WC_WITH_IMM, IBV_WC_WITH_INV (imm: the rkey invalidated,
			      * host order), IBV_WC_GRH */
	uint32_t vendor_err;
	uint32_t src_qp;     /* receive completions: the sending QP */
	uint32_t solicited;  /* the message asked for a solicited event (BTH SE) */
	uint32_t ip_version; /* a UD receive: its datagram's, 4 or 6; else 0 */
};

/* The size of a send WQE's slot in a ring made for max_sge SGEs and max_inline bytes of
 * inline data: the fixed fields, then room for the larger of the two (they share it, as
 * rxe sizes its WQEs), in whole SGEs. The QP then takes room / 16 SGEs and room bytes
 * inline; a WQE uses only the part of sge[] or inline_data[] its slot has room for. */
static inline uint32_t proto_swqe_room(uint32_t max_sge, uint32_t max_inline)
{
	uint32_t room = max_sge * (uint32_t)sizeof(struct proto_sge);

	if (max_inline > room)
		room = max_inline;
	return (room + sizeof(struct proto_sge) - 1) & ~(uint32_t)(sizeof(struct proto_sge) - 1);
}

static inline uint32_t proto_swqe_stride(uint32_t room)
{
	return (uint32_t)__builtin_offsetof(struct proto_swqe, sge) + room;
}

static inline uint32_t proto_rwqe_stride(uint32_t max_sge)
{
	return (uint32_t)__builtin_offsetof(struct proto_rwqe, sge) +
	       max_sge * (uint32_t)sizeof(struct proto_sge);
}

/* Ring memfd layouts. QP: ctl, SQ entries, then (at rq_offset) ctl, RQ entries.
 * CQ: ctl, CQ entries. */
static inline uint64_t proto_ring_bytes(uint32_t entries, uint64_t entry_size)
{
	uint64_t bytes = sizeof(struct proto_ring_ctl) + entries * entry_size;

	return (bytes + 4095) & ~(uint64_t)4095;
}

#endif
