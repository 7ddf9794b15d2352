/* The rdma_cm layer: librdmacm's calls (Debian 12, rdma-core 44) answered for programs under
 * rocemu-run, beside the verbs layer in the same preloaded library. The CM itself runs in
 * the daemon (emu/daemon/cm/); this layer keeps the ids and channels, talks to each
 * device's daemon through its verbs context, and moves the QPs through INIT, RTR and RTS
 * at the events, with the attributes the daemon's CM computes, as librdmacm does with the
 * kernel's rdma_init_qp_attr.
 *
 * An event channel is a local SOCK_SEQPACKET socket pair: the program polls the read end;
 * each daemon an id of the channel talks to holds a copy of the write end and writes its
 * events there, and this layer writes the ones it makes itself (address and route
 * resolved). Events name ids by a number (cookie), never a pointer, so an event for an id
 * destroyed meanwhile is dropped.
 *
 * It may call the verbs layer's calls (ibv_*) and its internals (verbs_int.h) and the
 * CM requests of librocemu. Calls return as librdmacm's: -1 with errno, or NULL with
 * errno. Nothing is printed unless ROCEMU_DEBUG=1 (through the verbs layer's report). */
#ifndef ROCEMU_RDMACM_H
#define ROCEMU_RDMACM_H

#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "emu/proto.h"
#include "emu/verbs/verbs_int.h"

#define RCM_MAX_DEVICES 8

struct rcm_mcast;
/* librdmacm calls two of its own functions directly, never through the PLT a preload
 * answers: rsockets' ucma_complete (which reads whether the id is synchronous) and
 * ucma_max_qpsize (the largest queue of the id's device). Both read the id and its device
 * as rdma-core's private struct cma_id_private and struct cma_device, whose first fields are
 * the same from rdma-core 35 to 50 (Debian 12 has 44); so an id and a device keep those
 * fields at the same offsets (rcm_id's sync and cma_dev, this struct's max_qpsize). */
struct rcm_cma_device_abi {
	void *ibv_device;
	void *entry_next, *entry_prev;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	void *xrcd;
	void *port;
	uint64_t guid;
	int port_cnt;
	int refcnt;
	int max_qpsize;
	uint8_t max_initiator_depth;
	uint8_t max_responder_resources;
};

/* An opened rocemu device, kept for the process's life as librdmacm keeps its devices. */
struct rcm_device {
	struct rcm_cma_device_abi abi;  /* what librdmacm's own calls read of it */
	struct ibv_context *verbs;
	struct rv_context *rv;
	struct ibv_pd *pd;           /* the ids' default PD (rdma_create_ep, a NULL pd) */
	int ifindex;                 /* rcm_device_ifindex's: 0 before a look, -1 none */
};

struct rcm_channel {
	struct rdma_event_channel ch;   /* ch.fd: the read end the program polls */
	int wr;                         /* the write end the daemons and we write events to */
	pthread_mutex_t lock;
	uint32_t handle[RCM_MAX_DEVICES]; /* each device's name for it, 0 until it has one */
	LIST_ENTRY(rcm_channel) link;   /* in the live channels (channel.c) */
};

/* How far an id has gone towards a connection: the kernel's rdma_cm allows each call only
 * in the state before it (an address resolved once, its route once, one request). */
enum rcm_stage {
	RCM_UNRESOLVED,
	RCM_ADDR_RESOLVED,
	RCM_ROUTE_RESOLVED,
	RCM_CONNECTING,              /* a request sent, or the one the id came from */
};

struct rcm_id {
	struct rdma_cm_id id;        /* first: the program's pointer is ours */
	/* librdmacm's cma_id_private goes on so (see struct rcm_cma_device_abi) */
	struct rcm_cma_device_abi *cma_dev;  /* the bound device's, NULL before */
	void *abi_connect;
	size_t abi_connect_len;
	int abi_events_completed;
	int abi_connect_error;
	int sync;                    /* made without a channel: calls wait for their event */
	bool bound;                  /* to an address (rdma_bind_addr, or by resolving) */
	uint64_t cookie;
	struct rcm_channel *chan;
	struct rcm_device *dev;      /* bound to, NULL before */
	uint32_t listener[RCM_MAX_DEVICES]; /* each device's listener, or its port held */
	bool listening;              /* rdma_listen succeeded */
	enum rcm_stage stage;
	uint32_t conn;               /* the daemon's connection, 0 for none */
	bool disconnected;           /* DISCONNECTED was reported: the daemon keeps conn, in
				      * TimeWait, until the id forgets it */
	struct ibv_sa_path_rec path;
	/* rdma_conn_param's depths for this id (RDMA_MAX_*: the device's) */
	uint8_t responder_resources, initiator_depth;
	bool have_qp_attr;
	struct proto_qp_attr qp_attr;   /* the connection's, from the last event that gave it */
	uint8_t tos;
	uint8_t ack_timeout;         /* RDMA_OPTION_ID_ACK_TIMEOUT, for this id's QP alone */
	bool ack_timeout_set;
	int afonly;
	bool reuseaddr;              /* RDMA_OPTION_ID_REUSEADDR */
	struct ibv_qp_init_attr *ep_qp_attr; /* rdma_create_ep(passive): rdma_get_request's QP */
	/* events handed to the program and acked: rdma_destroy_id waits for the acks, as
	 * librdmacm's does (a program's event thread is done with the id then) */
	uint32_t events_reported, events_acked;
	pthread_cond_t acked;
	struct rcm_mcast *mcasts;    /* the groups joined (mcast.c) */
	LIST_ENTRY(rcm_id) link;
};

static inline struct rcm_id *rcm_id(struct rdma_cm_id *id)
{
	return (struct rcm_id *)id;
}

/* device.c: every rocemu device, opened once; the one serving an address */
int rcm_devices(struct rcm_device **devs);
struct rcm_device *rcm_device_of(const struct sockaddr *addr);
/* The index of d's daemon's interface here (looked up once), 0 when it has none. */
int rcm_device_ifindex(struct rcm_device *d);
struct rcm_device *rcm_device_of_gid(const uint8_t gid[16]);
/* A daemon request through the device's context (its lock held): 0 or an errno. */
int rcm_request(struct rcm_device *d, void *req, size_t len, void *reply, size_t reply_len,
		int fd);
/* One that cannot fail, sent with no reply wanted (PROTO_NO_REPLY) */
void rcm_post(struct rcm_device *d, void *req, size_t len);
uint32_t rcm_max_rd_atomic(const struct rcm_device *d);

/* addr.c: socket addresses and GIDs */
void rcm_addr_gid(const struct sockaddr *sa, uint8_t gid[16]);
void rcm_gid_addr(const uint8_t gid[16], uint16_t port, int family, struct sockaddr_storage *ss);
uint16_t rcm_port(const struct sockaddr *sa);
void rcm_set_port(struct sockaddr *sa, uint16_t port);
socklen_t rcm_addr_len(const struct sockaddr *sa);
bool rcm_addr_loopback(const struct sockaddr *sa);
/* The wildcard, or a loopback address (which the kernel's cma takes as the wildcard). */
bool rcm_addr_any(const struct sockaddr *sa);
uint16_t rcm_ephemeral_port(void);
void rcm_port_range(unsigned *lo, unsigned *hi);
uint16_t rcm_random_port(unsigned lo, unsigned hi);
/* The kernel's neighbour table holds a usable entry for dst on d's interface. */
bool rcm_neighbour_known(struct rcm_device *d, const struct sockaddr *dst);
/* The source address the kernel's routes pick for dst (no packet is sent). */
int rcm_route_source(const struct sockaddr *dst, struct sockaddr_storage *src);

/* channel.c */
struct rcm_channel *rcm_channel_new(void);
/* Each channel is freed once: one destroyed already is left alone. */
void rcm_channel_free(struct rcm_channel *c);
/* Whether ch is a channel of this layer not yet destroyed (the pointer is compared, never
 * followed). */
bool rcm_channel_live(const struct rdma_event_channel *ch);
/* The channel's handle at the device's daemon, registered at first use: 0 or an errno. */
int rcm_channel_at(struct rcm_channel *c, struct rcm_device *d, uint32_t *handle);
/* The events of the id named by cookie already written to from go to to, in order (the
 * kernel moves them so at rdma_migrate_id), or nowhere when to is NULL (rdma_destroy_id);
 * the others are written back behind any that arrived meanwhile. */
void rcm_channel_move_events(struct rcm_channel *from, uint64_t cookie, struct rcm_channel *to);
/* An event this layer makes (address or route resolution). */
int rcm_post_local(struct rcm_id *id, uint32_t event, int32_t status);
/* event.c: a synchronous id holds ev in id.event until the next call acks it */
void rcm_event_hold(struct rcm_id *id, struct rdma_cm_event *ev);

/* id.c: the id registry */
struct rcm_id *rcm_id_new(struct rcm_channel *chan, void *context, enum rdma_port_space ps,
			  enum ibv_qp_type qp_type);
/* The id an event names, counted as reported (0 when it is gone); rcm_id_acked counts the
 * event's ack, or undoes the count of one never handed out. */
struct rcm_id *rcm_id_take_event(uint64_t cookie);
void rcm_id_acked(struct rcm_id *id);
/* Whether cmid is an id of this layer not yet destroyed: every call given an id asks
 * first, so a program's stale or stray pointer gets EINVAL instead of being followed
 * (the pointer is compared, never read through). */
bool rcm_id_live(const struct rdma_cm_id *cmid);
void rcm_id_bind_device(struct rcm_id *id, struct rcm_device *d);
/* The id holding the daemon's connection conn on device d (any device for NULL: a request
 * a wildcard listener was told of), or NULL; as an event's id, valid until the program
 * destroys it. */
struct rcm_id *rcm_id_of_conn(const struct rcm_device *d, uint32_t conn);
bool rcm_id_listening(const struct rcm_id *id);
/* A sync id's call waits for its next event (librdmacm's ucma_complete), held in id.event:
 * 0, or the errno librdmacm gives its failure; rcm_wait wants it of the type expected. */
int rcm_complete(struct rcm_id *id);
int rcm_wait(struct rcm_id *id, enum rdma_cm_event_type expected);
/* The id's QP through INIT, RTR and RTS with the connection's attributes and then req
 * (the REP, or the RTU) to the id's daemon; to ERROR, and then req (the DREQ or DREP),
 * which goes though the QP could not be moved. Each in one round trip where it can (see
 * rv_modify_qp_then); 0 or an errno. An id without a QP sends req alone. */
int rcm_qp_ready_then(struct rcm_id *id, uint8_t responder_resources, uint8_t initiator_depth,
		      void *req, size_t len);
int rcm_qp_error(struct rcm_id *id);
int rcm_qp_error_then(struct rcm_id *id, void *req, size_t len);

/* mcast.c: a MULTICAST_JOIN event read (0; EAGAIN: the group was left meanwhile), the
 * id's QP detached from its groups (rdma_destroy_qp), and every group left
 * (rdma_destroy_id) */
int rcm_mcast_event(struct rcm_id *id, const struct proto_cm_event *pe, struct rdma_cm_event *ev);
void rcm_mcast_detach_qp(struct rcm_id *id);
void rcm_mcast_leave_all(struct rcm_id *id);

/* event.c: the id's route as librdmacm reports it (one path, the port's MTU) */
void rcm_fill_path(struct rcm_id *id);
/* event.c: an event read from the channel, handled as librdmacm handles it */
int rcm_read_event(struct rcm_channel *chan, struct rdma_cm_event **out);

#endif
