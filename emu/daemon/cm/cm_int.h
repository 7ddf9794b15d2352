/* Inside the CM: its objects, shared by conn.c (objects, sending, timers, events), recv.c
 * (what a peer's MAD does), wait.c (requests waiting for a listen) and api.c (what a
 * client asks). */
#ifndef ROCEMU_DAEMON_CM_INT_H
#define ROCEMU_DAEMON_CM_INT_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "emu/daemon/cm/cm.h"
#include "emu/daemon/transport/transport.h"
#include "wire/cm_mad.h"

/* rdma_cm's constants for RoCE (the captures' REQs and the kernel's cma.c and cm.c) */
#define CM_RESPONSE_TIMEOUT 20     /* 4.096 us * 2^20: about 4 s to answer a MAD */
#define CM_MAX_CM_RETRIES 15
#define CM_PACKET_LIFETIME 18      /* the path's; the ACK timeout is one more */
#define CM_CA_ACK_DELAY 15         /* the local CA ACK delay, rxe's */
/* The longest wait a peer may ask for, in the same 4.096 us * 2^t units (about 33 s, 8
 * times rdma_cm's own 20): its CM response timeout and an MRA's service timeout, and the
 * TimeWait its ACK timeout makes. The fields allow 31 (2.3 hours, as the kernel takes
 * them), which 16 sends make into days of a connection held. */
#define CM_MAX_PEER_TIMEOUT 23
#define CM_HASH_BUCKETS 1024

enum cm_state {
	CM_REQ_SENT, CM_REQ_RCVD, CM_REP_SENT, CM_REP_RCVD, CM_ESTABLISHED, CM_DREQ_SENT,
	CM_DREQ_RCVD, CM_TIMEWAIT,
	/* the UDP port space: a SIDR_REQ asks for a UD QP's number and Q_Key, one SIDR_REP
	 * answers; the connection ends with the answer */
	CM_SIDR_REQ_SENT, CM_SIDR_REQ_RCVD, CM_NSTATES
};

#define CM_UDP_QKEY 0x01234567u    /* rdma_cm's Q_Key for the UDP port space */

/* librdmacm's event numbers (enum rdma_cm_event_type), which the events carry */
enum cm_event_type {
	CM_EV_ADDR_RESOLVED, CM_EV_ADDR_ERROR, CM_EV_ROUTE_RESOLVED, CM_EV_ROUTE_ERROR,
	CM_EV_CONNECT_REQUEST, CM_EV_CONNECT_RESPONSE, CM_EV_CONNECT_ERROR, CM_EV_UNREACHABLE,
	CM_EV_REJECTED, CM_EV_ESTABLISHED, CM_EV_DISCONNECTED, CM_EV_DEVICE_REMOVAL,
	CM_EV_MULTICAST_JOIN, CM_EV_MULTICAST_ERROR, CM_EV_ADDR_CHANGE, CM_EV_TIMEWAIT_EXIT
};

/* events held for one client whose sockets are full, all its channels together (a client
 * may have 256 channels: a bound per channel would let it hold 2 million, about 700 MB) */
#define CM_CHANNEL_BACKLOG 8192

/* An event waiting for room in its channel's socket. */
struct cm_pending_event {
	struct proto_cm_event ev;
	STAILQ_ENTRY(cm_pending_event) link;
};

struct cm_channel {
	struct cm *cm;
	struct owner *own;
	uint32_t handle;
	int fd;
	/* events the socket had no room for, sent in order when it has (watcher) */
	STAILQ_HEAD(, cm_pending_event) backlog;
	uint32_t backlog_len;
	ev_io watcher;
	LIST_ENTRY(cm_channel) link;
};

/* conn.c: a channel's end */
void cm_channel_free(struct cm_channel *ch);

struct cm_listener {
	struct owner *own;
	uint32_t handle;
	struct cm_channel *ch;
	uint64_t cookie;
	uint64_t service_id;
	uint8_t gid[16];
	uint8_t any_family;
	uint32_t backlog;
	uint32_t pending;            /* connections in REQ_RCVD it was told of */
	bool listening;              /* false: the service ID is only held (bind_only) */
	bool reuseaddr;              /* held, and shared with other holds that are too */
	LIST_ENTRY(cm_listener) link;
};

struct cm_conn {
	struct cm *cm;
	enum cm_state state;
	struct owner *own;           /* NULL once the client forgot it: the CM ends it */
	struct owner *charged;       /* the client it counts against, until that client goes */
	struct cm_channel *ch;
	uint64_t cookie;
	struct cm_listener *listener; /* REQ_RCVD: counted in its backlog */
	uint32_t local_id, remote_id;
	uint64_t remote_ca_guid;     /* the peer's, from its REQ or REP (a REJ TIMEOUT names it) */
	uint64_t tid;                /* the transaction the next answer belongs to */
	uint64_t service_id;
	uint32_t local_qpn, remote_qpn;
	uint32_t local_psn, remote_psn;
	uint8_t local_gid[16], peer_gid[16];
	uint8_t peer_mac[6];
	uint16_t local_port, peer_port;
	uint8_t mtu;                 /* enum ibv_mtu */
	uint8_t tos;
	uint8_t ack_timeout;
	uint32_t flow_label;         /* the path's, from the active side's route */
	/* what this side's QP takes: the kernel's cm_id fields */
	uint8_t responder_resources, initiator_depth, retry_count, rnr_retry_count;
	uint8_t peer_cm_timeout;     /* the peer's CM response timeout (REQ) */
	uint8_t max_retries, retries_left;
	bool mra_rcvd;               /* the MAD resent now was MRA'd already (once each) */
	ev_tstamp timeout;           /* between resends of last_mad */
	bool has_last;
	uint8_t last_mad[CM_MAD_LEN]; /* the MAD resent on a timeout or a duplicate */
	uint8_t last_attr;           /* ... and which (CM_ATTR_*), 0 for none */
	ev_timer timer;
	struct cm_conn *hnext;       /* the hash chain by local_id */
	struct cm_conn *rnext;       /* ... and by remote_id, once the peer named it */
	LIST_ENTRY(cm_conn) link;
	bool let_go;                 /* forgotten, in TimeWait: on cm->let_go */
	TAILQ_ENTRY(cm_conn) let_go_link;
};

/* Where a MAD came from and went to, to answer it. */
struct mad_src {
	uint8_t src_gid[16];         /* the peer's address */
	uint8_t dst_gid[16];         /* ours, the one it was sent to */
	uint8_t mac[6];
};

/* A REQ or SIDR_REQ to a service ID an id holds and does not listen on yet, waiting a
 * moment for the listen before it is refused (wait.c). */
#define CM_LISTEN_WAIT 0.2         /* seconds */
#define CM_MAX_WAITING 64          /* requests waiting at once */

struct cm_waiting_req {
	struct cm *cm;
	struct cm_mad mad;
	struct mad_src src;
	ev_timer timer;
	TAILQ_ENTRY(cm_waiting_req) link;
};

struct cm {
	struct dev *dev;
	LIST_HEAD(, cm_channel) channels;
	LIST_HEAD(, cm_listener) listeners;
	LIST_HEAD(, cm_conn) conns;
	TAILQ_HEAD(, cm_waiting_req) waiting;  /* oldest first */
	uint32_t nwaiting;
	/* forgotten connections in TimeWait, oldest first: a new connection may cut the
	 * oldest's wait short when the CM is full (they count against no client) */
	TAILQ_HEAD(, cm_conn) let_go;
	struct cm_conn *by_id[CM_HASH_BUCKETS];
	struct cm_conn *by_remote[CM_HASH_BUCKETS];
	uint32_t nconns, nchannels;
	uint32_t next_handle;
	uint32_t next_id, id_operand;
	uint32_t tid_hi;
	uint32_t psn;                /* QP 1's BTH PSN */
	uint64_t ca_guid;
};

/* conn.c */
const char *cm_state_name(enum cm_state s);
struct cm_conn *conn_new(struct cm *cm);
void conn_free(struct cm_conn *c);
struct cm_conn *conn_find(struct cm *cm, uint32_t local_id);
struct cm_conn *conn_find_remote(struct cm *cm, uint32_t remote_id, const uint8_t gid[16]);
/* The peer's comm ID, as its REQ, REP or SIDR_REQ gives it (conn_find_remote finds it). */
void conn_set_remote(struct cm_conn *c, uint32_t remote_id);
/* The first connection whose peer's comm ID is remote_id and whose CA GUID is guid. */
struct cm_conn *conn_find_remote_guid(struct cm *cm, uint32_t remote_id, uint64_t guid);
/* The connection counts against own from now (NULL: against nobody). */
void conn_charge(struct cm_conn *c, struct owner *own);
/* Sends the MAD (kept for resends when resend is true, with its timer and retries). */
void conn_send(struct cm_conn *c, const struct cm_mad *mad, bool resend);
/* A reply that belongs to no connection: to the frame's sender, from the address it came to. */
void cm_send_to(struct cm *cm, const uint8_t sgid[16], const uint8_t dgid[16],
		const uint8_t mac[6], const struct cm_mad *mad);
void conn_stop_timer(struct cm_conn *c);
/* The last MAD kept, sent again (a duplicate asked for it). */
void conn_resend_last(struct cm_conn *c);
void conn_enter_timewait(struct cm_conn *c);
/* The client forgot the connection in TimeWait: it counts against no client from now, and
 * a new connection may end its wait early when the CM is full. */
void conn_let_go(struct cm_conn *c);
/* The event, to the connection's channel; ev's conn and cookie are filled in. */
void conn_event(struct cm_conn *c, struct proto_cm_event *ev);
void cm_event_to(struct cm *cm, struct cm_channel *ch, struct proto_cm_event *ev);
/* The attributes the connection gives its QP (rdma_init_qp_attr's RTR and RTS). */
void conn_qp_attr(const struct cm_conn *c, struct proto_qp_attr *a);
void conn_mad_hdr(struct cm_mad *mad, uint16_t attr, uint64_t tid);
uint64_t cm_new_tid(struct cm *cm, uint32_t local_id);
/* A REJ for the connection (its last answer), the connection then freed. */
void conn_reject(struct cm_conn *c, uint16_t reason, uint8_t msg, const void *priv,
		 size_t len);
void conn_send_dreq(struct cm_conn *c);
void conn_send_drep(struct cm_conn *c);
void conn_repeat_drep(struct cm_conn *c);  /* in TimeWait: the timer keeps running */
void conn_release_listener(struct cm_conn *c);
/* Whether the client holds CM_MAX_OWNER_CONNS connections already (counted, refused). */
bool cm_owner_full(struct cm *cm, const struct owner *own);
/* The SIDR_REP of a SIDR_REQ received (status CM_SIDR_*); the connection then freed. */
void conn_sidr_reply(struct cm_conn *c, uint8_t status, uint32_t qpn, const void *priv,
		     size_t len);

/* recv.c: a listener on the service ID (listening), or an id only holding it (not) */
struct cm_listener *cm_find_service(struct cm *cm, uint64_t service_id, bool listening);
/* recv.c: a REQ or SIDR_REQ taken (may_wait: it may wait for its listener's listen) */
void cm_take_request(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
		     bool may_wait);

/* wait.c: whether the request waits for a listen (else it is refused now); the requests
 * waiting for a listen on service_id taken again; every one freed */
bool cm_wait_for_listen(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
			uint64_t service_id);
void cm_listening_now(struct cm *cm, uint64_t service_id);
void cm_free_waiting(struct cm *cm);

static inline uint8_t cm_clamp_u8(uint8_t v, uint8_t max)
{
	return v < max ? v : max;
}

static inline ev_tstamp cm_time_s(uint8_t iba_time)
{
	/* 4.096 us * 2^t, as the kernel's cm_convert_to_ms rounds it: 2^(t-8) ms */
	return (iba_time > 8 ? (double)(1u << (iba_time - 8)) : 1.0) / 1000.0;
}

#endif
