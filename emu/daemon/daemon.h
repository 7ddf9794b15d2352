/* rocemud internals: the emulated HCA composed from memreg/ and wire/, driven by libev.
 * One thread; every object below is touched only from the event loop. */
#ifndef ROCEMU_DAEMON_H
#define ROCEMU_DAEMON_H

#include <ev.h>
#include <infiniband/verbs.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "emu/daemon/transport/dcqcn.h"
#include "emu/daemon/port/fault.h"
#include "emu/proto.h"
#include "emu/rocemu.h"
#include "memreg/memreg.h"
#include "wire/wire.h"

#define DEV_MAX_QP 16384          /* QPN slots; qpn = generation << 14 | slot */
#define DEV_QP_SLOT_BITS 14
#define DEV_TX_BATCH 64
#define DEV_RX_BUDGET 256         /* frames per wakeup; the rest waits for the next turn */
#define DEV_FRAME_MAX (WIRE_BASE6_LEN + WIRE_RETH_LEN + WIRE_IMMDT_LEN + 4096 + 8)
#define UD_GRH_LEN 40             /* the receive buffer's first bytes on a UD QP */
#define CLIENT_MAX_AH 32767       /* address handles per connection (rxe's max_ah) */
#define DEV_MAX_GIDS PROTO_MAX_GIDS  /* addresses one daemon serves: its GID table */
/* The largest UDP GSO frame sent (headers once, then the segments' payloads): every
 * daemon's receive ring takes one whole, whatever its link MTU. */
#define NET_GSO_FRAME_MAX 16256
#define NET_GSO_MAX_SEGS 64
#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5   /* Linux 6.2; older headers lack it */
#endif
#define QP_MAX_INFLIGHT 128        /* unacknowledged PSNs a requester may have out */
#define QP_MAX_RD_ATOMIC 128       /* READs and atomics outstanding, each way (rxe's) */
#define QP_ACKREQ_EVERY 64
#define QP_BURST 16                /* packets a requester sends before the next QP's turn */
#define QP_UD_CNP_SLOTS 8          /* a UD QP's senders, hashed, each with its CNP interval */
/* Packets of waiting QPs sent per turn of the loop. A doorbell or a completion waits for
 * the turn in progress to end: at 256, a 64 B WRITE beside 31 streams took about a
 * millisecond a round trip, at 32 about 150 us, with the same goodput. */
#define DEV_SERVE_BUDGET 32
/* PSNs all RC requesters together may have unacknowledged (each counting for at most
 * QP_MAX_INFLIGHT): half a receive ring (rxring.c's 1024 frames), so no burst of ours
 * overflows a rocemu peer's ring, whatever the CPU does. What PFC is to a real fabric: the
 * lossless backstop under congestion control. */
#define DEV_MAX_INFLIGHT 512
#define DEV_CREDIT_WAKE (DEV_MAX_INFLIGHT - QP_ACKREQ_EVERY)

struct dev_counters {
#define COUNTER_FIELD(name, help) uint64_t name;
	PROTO_COUNTERS(COUNTER_FIELD)
#undef COUNTER_FIELD
};

struct client;
struct qp;

/* The receive ring (rxring.c) */
struct rx_ring {
	int fd;
	uint8_t *map;
	size_t map_bytes;
	size_t block_bytes;
	unsigned slot_bytes;
	unsigned slots_per_block;
	unsigned slots;
	unsigned head;               /* the next slot to look at */
	bool congested;              /* the frame being read has a backlog behind it (cc.c) */
	bool vnet;                   /* a virtio-net header comes before every frame */
};

struct srq {
	struct client *client;
	uint32_t handle;
	uint32_t entries;
	struct proto_ring_ctl *ctl;
	struct proto_rwqe *ring;
	size_t ring_bytes;
	uint32_t cons;               /* WQEs taken */
	uint32_t limit;              /* armed when nonzero */
	int event_fd;                /* our (write) end of the limit event pipe */
	int client_end;              /* the read end, handed to the client */
	int users;                   /* QPs using it */
};

struct cq {
	struct client *client;
	uint32_t handle;
	uint32_t entries;
	struct proto_ring_ctl *ctl;
	struct proto_cqe *ring;
	size_t ring_bytes;
	int notify_fd;               /* our (write) end of the notification pipe */
	int client_end;              /* the read end, handed to the client */
	bool notify_pending;
	bool overflowed;
	int users;                   /* QPs using it */
	STAILQ_ENTRY(cq) notify_link;
};

/* A send work request, copied from the client's ring and checked once. Inline data is
 * not copied: it is payload, never checked, and is read from the ring's slot as it is
 * sent (at 256 bytes a request it was three quarters of a QP's memory). */
struct send_wqe {
	uint64_t wr_id;
	uint32_t opcode;             /* IBV_WR_* */
	bool signaled;
	bool inlined;                /* the data is in the ring slot's inline_data, not behind sge */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;
	uint32_t num_sge;
	struct proto_sge sge[PROTO_MAX_SGE];
	uint64_t length;
	uint64_t compare_add;        /* atomics */
	uint64_t swap;
	enum ibv_wc_status local_error; /* IBV_WC_SUCCESS unless the request was refused */
	bool fence;                  /* IBV_SEND_FENCE: waits for earlier READs */
	bool solicited;              /* IBV_SEND_SOLICITED: SE on the last packet */
	bool answered;               /* a READ's last response placed, an atomic's ACK taken */
	uint32_t read_placed;        /* a READ's responses placed, in order */
	bool started;                /* first_psn is assigned */
	uint32_t first_psn;
	uint32_t npkts;              /* set when the request starts, at the path MTU then */
};

/* A responder resource: what a READ (or atomic) was asked, kept so a duplicate request
 * can be answered again. */
struct rd_res {
	bool used;
	bool atomic;
	uint64_t orig;               /* an atomic's original value, for its replay */
	uint32_t first_psn;
	uint32_t last_psn;
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
};

/* A receive work request, copied from the client's ring when a message needs it. */
struct recv_wqe {
	struct proto_rwqe wqe;
	uint64_t length;             /* the SGEs' bytes together */
	uint64_t placed;             /* bytes scattered so far */
};

/* An address handle: the path of UD sends to one peer, its neighbour resolved when it was
 * created. The UDP source port is set per send, from both QP numbers unless the AH names
 * a flow label. */
struct ah {
	struct client *client;
	uint32_t handle;
	struct mr_pd *pd;
	struct wire_path path;
	uint32_t flow_label;
};

/* rto.c's state: the round-trip estimate and the timed PSN (seconds). */
struct rto {
	ev_tstamp srtt;              /* 0 until the first sample */
	ev_tstamp rttvar;
	ev_tstamp sent_at;           /* when timed_psn was first sent */
	uint32_t timed_psn;
	bool timing;
	uint8_t backoff;             /* consecutive expiries: the timer doubles for each */
};

struct qp {
	struct dev *dev;
	struct client *client;
	uint32_t handle;
	uint32_t qpn;
	enum ibv_qp_type type;       /* IBV_QPT_RC or IBV_QPT_UD */
	struct mr_pd *pd;
	struct cq *send_cq;
	struct cq *recv_cq;
	struct srq *srq;             /* NULL: the QP's own receive ring */
	enum ibv_qp_state state;
	bool sq_sig_all;
	struct proto_qp_attr attr;   /* as last modified */
	uint32_t pmtu;               /* bytes */
	uint8_t peer_mac[6];
	struct wire_path path;

	/* rings shared with the client */
	void *ring_map;
	size_t ring_bytes;
	struct proto_ring_ctl *sq_ctl;
	struct proto_swqe *sq;
	uint32_t sq_entries;
	struct proto_ring_ctl *rq_ctl;
	struct proto_rwqe *rq;
	uint32_t rq_entries;
	int doorbell_fd;             /* our (read) end of the doorbell pipe */
	int client_end;              /* the write end, handed to the client */
	ev_io doorbell;

	/* requester: WQEs [comp_idx, fetch_idx) are copied; [send_idx...) not all sent */
	struct send_wqe *wqes;       /* sq_entries, by ring slot */
	uint32_t fetch_idx;
	uint32_t send_idx;
	uint32_t send_pkt;           /* packet of wqes[send_idx] to send next */
	uint32_t comp_idx;
	uint32_t snd_nxt;            /* next PSN to send */
	uint32_t snd_una;            /* oldest unacknowledged PSN */
	uint32_t snd_max;            /* one past the highest PSN ever sent */
	uint8_t retry_left;
	uint8_t rnr_left;
	ev_timer retry_timer;
	struct rto rto;
	ev_timer rnr_timer;
	bool rnr_wait;
	uint32_t rd_outstanding;     /* READs started and not yet completed */
	bool resend_started;         /* a resend round began (sequence NAK, lost READ responses
				      * or timeout) and nothing was acknowledged since: further
				      * NAKs tell the same story and start no other */
	enum { TURN_NONE, TURN_READY, TURN_CREDIT } sched; /* on dev->ready or ->credit_wait */
	TAILQ_ENTRY(qp) ready_link;
	uint32_t inflight_counted;   /* its share of dev->inflight */
	uint32_t since_ackreq;       /* packets sent since the last that asked for an ACK */
	struct dcqcn_flow dcqcn;     /* its send rate, when congestion has cut it */
	ev_timer pace_timer;         /* the rate lets the next packet go */
	ev_tstamp cnp_at;            /* the last CNP to the peer (long ago after a reset) */
	ev_tstamp ud_cnp_at[QP_UD_CNP_SLOTS]; /* UD: the last CNP to each slot's senders */

	/* responder */
	uint32_t rcv_psn;            /* expected PSN */
	uint32_t msn;
	bool nak_seq_sent;           /* a sequence NAK went for rcv_psn, which has not come since */
	bool in_msg;                 /* a message's FIRST came, its LAST not yet */
	uint8_t msg_kind;            /* WIRE_KIND_SEND or _WRITE, while in_msg */
	uint64_t write_va;
	uint32_t write_rkey;
	uint64_t write_left;
	uint32_t write_len;
	uint32_t rq_cons;
	struct recv_wqe recv;        /* the receive WQE the message under way fills */
	bool recv_held;              /* recv is the head of the RQ, copied out */
	struct rd_res rd_res[QP_MAX_RD_ATOMIC]; /* the first max_dest_rd_atomic are used */
	uint32_t rd_res_next;
	bool ack_due;                /* an ACK through rcv_psn - 1 goes out before the loop sleeps */
	TAILQ_ENTRY(qp) ack_link;
	struct reply_queue *replies; /* what waits to go, in PSN order (reply.c; at first use) */
	bool resp_stopped;           /* a NAK that ends the QP waits in replies */

	LIST_ENTRY(qp) client_link;
};

struct handle_table {
	void **items;
	uint32_t cap;
	uint32_t count;
};

/* A client's wait for a neighbour the kernel's table does not have yet (neigh.c). */
struct neigh_wait {
	ev_timer timer;
	uint8_t gid[16];
	unsigned tries;
	bool ended;                  /* the wait for ipv4 ended: ask the table once more */
};

struct client {
	struct dev *dev;
	int fd;
	ev_io watcher;
	uint8_t *deferred;           /* a request answered once its neighbour is known */
	size_t deferred_len;
	struct neigh_wait neigh;
	pid_t pid;
	uid_t uid;
	struct mr_client *mrc;       /* shared by every connection of one process */
	uint64_t pin_cap;            /* that process's pinned-byte budget, 0 = none */
	struct handle_table pds, mrs, cqs, qps, srqs, ahs;
	LIST_ENTRY(client) link;
};

/* CQs plus QPs one connection may hold: each costs the daemon two descriptors. */
#define CLIENT_MAX_QUEUES 4096

#define LOOPQ_SLOTS 256

struct loopq {
	uint8_t (*frames)[DEV_FRAME_MAX];   /* allocated at the first frame */
	uint16_t len[LOOPQ_SLOTS];
	unsigned head, count;
	ev_idle idle;
};

/* One served address as a RoCE v2 GID: IPv4 as ::ffff:a.b.c.d, IPv6 as it is. */
struct dev_gid {
	uint8_t raw[16];
	bool ipv6;
};

struct dev {
	struct ev_loop *loop;
	char ifname[IF_NAMESIZE];
	int ifindex;
	char ingress_table[40];      /* our nftables table, when the ingress drop is in place */
	uint8_t mac[6];
	struct dev_gid gids[DEV_MAX_GIDS];   /* the GID table, index as the clients see it */
	unsigned ngids;
	uint32_t ipv4;               /* the first IPv4 address served (network order), or 0 */
	uint8_t hop_limit[2];        /* TTL [0] and IPv6 hop limit [1] the kernel's routes give */
	unsigned link_mtu;
	bool loopback;
	bool link_down;              /* the last send failed with ENETDOWN */
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	uint16_t ip_id;

	struct rx_ring rx;
	ev_io rx_watcher;
	int tx_fd;
	bool tx_vnet;                /* every message sent starts with a virtio-net header */
	bool tx_gso;                 /* frames of one flow go out as UDP GSO frames */
	bool gso_off;                /* --no-gso */
	int udp_guard_fd[DEV_MAX_GIDS];
	int ctl_fd;
	ev_io ctl_watcher;
	ev_timer accept_pause;       /* out of descriptors: accept again a little later */
	char sock_path[108];
	ev_prepare flush_watcher;
	/* --busy-poll: after frames move, poll instead of sleeping for busy_window seconds */
	ev_idle busy_idle;
	ev_tstamp busy_window;
	ev_tstamp busy_since;        /* when frames last moved */
	uint64_t busy_frames;        /* frames sent + received when last looked */

	/* frames built this loop iteration, sent together before the loop sleeps */
	unsigned tx_count;
	uint16_t tx_len[DEV_TX_BATCH];
	struct mmsghdr tx_msgs[DEV_TX_BATCH];
	uint8_t tx_msg_first[DEV_TX_BATCH];   /* the first frame of each message */
	struct virtio_net_hdr tx_vnet_hdr[DEV_TX_BATCH];
	struct iovec tx_iov[2 * DEV_TX_BATCH];
	uint8_t (*tx_frames)[DEV_FRAME_MAX];
	STAILQ_HEAD(, cq) notify_list;
	TAILQ_HEAD(, qp) acks_due;
	TAILQ_HEAD(, qp) ready;      /* requesters with more to send, served in turn */
	TAILQ_HEAD(, qp) credit_wait; /* requesters held back by DEV_MAX_INFLIGHT */
	uint32_t inflight;           /* unacknowledged PSNs of every RC requester */
	uint32_t requesters_out;     /* RC requesters with PSNs unacknowledged */
	ev_idle serve_idle;          /* keeps the loop from sleeping while any is ready */
	struct dcqcn_params cc;

	struct mr_table *mrs;
	struct qp *qps[DEV_MAX_QP];
	uint32_t qp_cursor;
	uint32_t qp_generation;
	uint32_t qp_count;
	LIST_HEAD(, client) clients;
	struct dev_counters cnt;
	struct fault_cfg fault;
	struct loopq loopq;
	struct fault_stage fault_tx;
	struct fault_stage fault_rx;
	bool verbose;

	/* --pcap: the recording of every frame sent and received (capture.c) */
	pcap_t *cap_pcap;
	pcap_dumper_t *cap_dumper;
	char cap_path[4096];
	uint64_t cap_max;            /* bytes; at this size FILE becomes FILE.1 */
	uint64_t cap_bytes;          /* written to the current file */
	ev_timer cap_timer;          /* flushes every second */
};

/* addr.c: the addresses served, as GIDs. addr_serve() takes the -a options (none: the
 * interface's first IPv4 address and its global IPv6 ones); 0, or -1 with a message. */
int addr_serve(struct dev *dev, const char *const *addrs, unsigned naddrs, char *err,
	       size_t errlen);
/* The GID of an IP address of version 4 or 6 (4 or 16 bytes at ip). */
void addr_gid(uint8_t gid[16], int version, const uint8_t *ip);
bool addr_gid_is_ipv4(const uint8_t gid[16]);
/* The index of gid in the device's table, or -1. */
int addr_find(const struct dev *dev, const uint8_t gid[16]);
/* "10.0.0.1" or "fd00::1"; buf holds INET6_ADDRSTRLEN. */
const char *addr_str(const uint8_t gid[16], char *buf, size_t len);
/* A number that tells this device's addresses from another's. */
uint32_t addr_hash(const struct dev *dev);
/* The TTL and IPv6 hop limit the kernel gives this interface's packets (its sysctls), which
 * rxe's frames carry whatever an AV asks: read once into dev->hop_limit. */
void addr_read_hop_limits(struct dev *dev);
/* The integer a /proc or /sys file about the interface holds, or otherwise. */
long addr_read_number(const char *path, long otherwise);

/* net.c: the interface and frame I/O */
int net_open(struct dev *dev, const char *ifname, const char *const *addrs, unsigned naddrs,
	     char *err, size_t errlen);
void net_close(struct dev *dev);
void net_read_ring_drops(struct dev *dev);
void net_rx_cb(struct ev_loop *loop, ev_io *w, int revents);
/* One turn's worth of the receive ring (what net_rx_cb does). */
void net_rx_read(struct dev *dev);
/* Reads every frame the ring holds now, however many: a timer about to act on a silence
 * first hears what already arrived. */
void net_rx_catch_up(struct dev *dev);
enum ibv_mtu net_mtu_for_link(unsigned link_mtu);
bool net_link_up(struct dev *dev);
/* The link's speed in bytes per second as the kernel reports it; 10 Gb/s when it reports
 * none (lo) */
double net_line_rate(const struct dev *dev);

unsigned net_mtu_bytes(enum ibv_mtu mtu);

/* txmsg.c: the frames of one flush as sendmmsg messages, GSO frames where allowed */
unsigned txmsg_build(struct dev *dev, unsigned m, unsigned first);
unsigned txmsg_frames_from(const struct dev *dev, unsigned m);
unsigned txmsg_gso_count(const struct dev *dev, unsigned from, unsigned to);
unsigned txmsg_without_gso(struct dev *dev, unsigned m, unsigned msgs);

/* rxring.c: the receive ring; deliver gets each RoCE frame, GSO frames already cut */
int rxring_open(struct dev *dev, const char *filter, char *err, size_t errlen);
void rxring_close(struct dev *dev);
void rxring_read(struct dev *dev, unsigned budget, wire_deliver_fn deliver);
void rxring_read_drops(struct dev *dev);

/* ingress.c: an nftables rule that keeps RoCE frames out of the kernel's IP input; 0, or -1
 * with a message (the guard socket still keeps the kernel quiet) */
int ingress_drop_add(struct dev *dev, char *err, size_t errlen);
int ingress_drop_remove(struct dev *dev, char *err, size_t errlen);

/* netpath.c: the TX batch and the fault stages. A frame is built in net_tx_slot() and
 * handed over with net_tx_commit(); net_flush() sends the batch before the loop waits. */
uint8_t *net_tx_slot(struct dev *dev);
void net_tx_commit(struct dev *dev, size_t len);
void net_flush(struct dev *dev);
/* A received frame, through the receive fault stage; net_rx_batch_end() after a batch. */
void net_rx_frame(struct dev *dev, const uint8_t *frame, size_t len);
void net_rx_batch_end(struct dev *dev);
/* Applies a fault spec ("off" clears it); 0, or -1 with a message. */
int net_set_fault(struct dev *dev, const char *spec, char *err, size_t errlen);

/* loopq.c: frames from one QP of this daemon to another, received at the next turn of
 * the loop instead of crossing the wire */
bool loopq_wants(const struct dev *dev, const uint8_t *frame, size_t len);
void loopq_push(struct dev *dev, const uint8_t *frame, size_t len);
void loopq_init(struct dev *dev);
void loopq_free(struct dev *dev);

/* capture.c: --pcap recording; capture_frame does nothing when it is off */
int capture_open(struct dev *dev, const char *path, uint64_t max_bytes, char *err,
		 size_t errlen);
void capture_frame(struct dev *dev, const uint8_t *frame, size_t len);
void capture_close(struct dev *dev);

/* handles.c */
int handle_add(struct handle_table *t, void *item, uint32_t *handle);
void *handle_get(const struct handle_table *t, uint32_t handle);
void handle_del(struct handle_table *t, uint32_t handle);
void handle_free(struct handle_table *t);

/* neigh.c: peers' MAC addresses from the kernel's neighbour table. neigh_resolve() answers
 * at once from the table (and for this device's own address, or on lo); when the table
 * does not have the address yet, it makes the kernel ask and returns -EINPROGRESS: the
 * client's request is deferred and handled again when the address appears or a second has
 * passed, and then the same call returns 0, or -EHOSTUNREACH. The loop never waits. */
int neigh_resolve(struct client *c, const uint8_t gid[16], uint8_t mac[6]);
void neigh_init(struct client *c);
void neigh_stop(struct client *c);

/* ctl.c: the control socket and clients */
/* group: NULL, or the group whose members may connect (the socket is 0660) */
int ctl_open(struct dev *dev, const char *path, const char *group, char *err, size_t errlen);
void ctl_close(struct dev *dev);
void client_destroy(struct client *c);
/* Handles a client's deferred request again (its neighbour wait ended). */
void ctl_resume(struct client *c);

/* objects.c: CQs and QPs and their rings */
struct cq *cq_create(struct client *c, uint32_t cqe, int fds[2], int *err);
int cq_destroy(struct cq *cq);
struct srq *srq_create(struct client *c, uint32_t max_wr, uint32_t limit, int fds[2],
		       int *err);
int srq_destroy(struct srq *srq);
void cq_push(struct cq *cq, const struct proto_cqe *cqe);
void cq_flush_notify(struct dev *dev);
struct qp *qp_create(struct client *c, const struct proto_create_qp *req, int fds[2],
		     int *err);
int qp_destroy(struct qp *qp);
struct qp *dev_find_qp(struct dev *dev, uint32_t qpn);

/* ah.c: address handles; ah_create fills err and returns NULL with *rc set on failure */
struct ah *ah_create(struct client *c, const struct proto_create_ah *m, int *rc, char *err,
		     size_t errlen);
void ah_destroy(struct ah *ah);
bool pd_has_ahs(struct client *c, const struct mr_pd *pd);

/* qp.c: the verbs state machine */
void qp_reset(struct qp *qp);
/* rxe's UDP source port: from a flow label, or when it is 0 from both QP numbers */
uint16_t qp_flow_port(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn);
/* The MACs and addresses of a path from sgid (one of dev's) to dgid; IP fields apart. */
void path_between(struct wire_path *p, const struct dev *dev, const uint8_t *sgid,
		  const uint8_t *dgid, const uint8_t mac[6]);
int qp_modify(struct qp *qp, uint32_t mask, const struct proto_qp_attr *attr,
	      char *err, size_t errlen);
void qp_to_error(struct qp *qp);

static inline uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* The packets a message of len bytes takes at the QP's path MTU (one when empty). */
static inline uint32_t qp_packets(const struct qp *qp, uint64_t len)
{
	return len ? (uint32_t)((len + qp->pmtu - 1) / qp->pmtu) : 1;
}

/* The states in which a QP takes requests, and so answers them. */
static inline bool qp_takes_requests(const struct qp *qp)
{
	return qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD;
}

/* req.c: requester and completer */
void req_doorbell_cb(struct ev_loop *loop, ev_io *w, int revents);
void req_pump(struct qp *qp);
void req_on_ack(struct qp *qp, const struct wire_pkt *pkt);
void req_on_read_response(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt);
void req_on_atomic_ack(struct qp *qp, const struct wire_pkt *pkt);
void req_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
void req_rnr_cb(struct ev_loop *loop, ev_timer *w, int revents);
void req_flush(struct qp *qp);

/* sched.c: requesters take turns. A QP that sent QP_BURST packets and has more to send is
 * queued; sched_serve() gives each queued QP a burst in turn, DEV_SERVE_BUDGET packets a
 * turn of the loop, so one QP's megabytes do not hold back another's few bytes.
 * sched_has_credit() is false (and queues the QP until ACKs free some) while all QPs
 * together have DEV_MAX_INFLIGHT PSNs out; sched_account() brings the QP's share up to
 * date after its PSNs or its state moved; sched_forget() takes it off every queue and
 * gives its share back. */
void sched_ready(struct qp *qp);
bool sched_has_credit(struct qp *qp);
void sched_account(struct qp *qp);
void sched_forget(struct qp *qp);
void sched_serve(struct dev *dev);
/* A QP's turn: the responses it owes (reply.c), then its requests. */
void sched_turn(struct qp *qp);
/* What the daemon owes goes out: the ACKs due, a turn of the waiting QPs, the batch. */
void sched_send(struct dev *dev);
/* How many packets a requester may send before one asks for an ACK: fewer when many
 * share the credit, so the packets that asked hold more of it than those that did not
 * and some ACK always comes back to free it. */
uint32_t sched_ack_interval(const struct dev *dev);

/* cc.c: congestion control. cc_on_arrival() is the notification point's look at a data
 * packet an RC QP took (a CNP to its sender when it met congestion), cc_on_datagram() the
 * same for a UD QP's datagram (the CNP to the address and QP it came from); cc_on_cnp()
 * the reaction point's CNP; cc_may_send() false means the QP's rate holds the next packet
 * back and its pace timer will pump it; cc_on_sent() counts the bytes that went. */
uint8_t cc_tos(const struct dev *dev, uint8_t traffic_class);
void cc_on_arrival(struct qp *qp, const struct wire_pkt *pkt);
void cc_on_datagram(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt);
void cc_on_cnp(struct qp *qp);
bool cc_may_send(struct qp *qp);
void cc_on_sent(struct qp *qp, size_t bytes);
void cc_pace_cb(struct ev_loop *loop, ev_timer *w, int revents);
void cc_qp_reset(struct qp *qp);
uint32_t cc_rate_mbps(const struct qp *qp);

/* rto.c: the retransmission timer's interval (the QP's timeout its floor, a round-trip
 * estimate above it, doubled per consecutive expiry) and what moves it: a PSN sent for the
 * first time (timed when none is), progress (the oldest unacknowledged PSN moved to
 * next_unacked), a resend or an RNR wait (the timed PSN no longer tells a round trip) and
 * an expiry. */
ev_tstamp rto_interval(const struct qp *qp);
void rto_reset(struct qp *qp);
void rto_on_first_send(struct qp *qp, uint32_t psn);
void rto_on_progress(struct qp *qp, uint32_t next_unacked);
void rto_on_resend(struct qp *qp);
void rto_on_expiry(struct qp *qp);

/* ud.c: UD QPs. ud_pump() sends every datagram posted (each completes as it leaves);
 * ud_on_datagram() places one received SEND ONLY [WITH IMMEDIATE] after its GRH area. */
void ud_pump(struct qp *qp);
void ud_on_datagram(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt);

/* resp.c: responder */
void resp_on_request(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt);
void resp_send_due_acks(struct dev *dev);
void resp_cancel_ack(struct qp *qp);

/* sgl.c: copies through a work request's SGEs, each piece checked against its MR first
 * (gather: any local MR of the QP's PD; scatter: one with LOCAL_WRITE); 0, -EFAULT for a
 * piece that fails, -ERANGE when the list ends first. */
int sgl_gather(struct qp *qp, const struct proto_sge *sge, uint32_t num_sge, uint64_t offset,
	       uint8_t *dst, size_t n);
int sgl_scatter(struct qp *qp, const struct proto_sge *sge, uint32_t num_sge, uint64_t offset,
		const uint8_t *src, size_t n);

/* rq.c: the receive queue. rq_take() copies out the head WQE (0; -EAGAIN when none is
 * posted, -EPROTO when the client's index lies, -EINVAL for a malformed WQE, which stays
 * held so it completes in error); rq_scatter() places the next n bytes of a SEND (0;
 * -EPROTO with no WQE held, -ERANGE past the WQE's end, -EFAULT for an SGE that fails its
 * lkey, PD, LOCAL_WRITE or bounds check); rq_complete() fills in wr_id, qp_num, src_qp,
 * pops the WQE, forgets it and posts the completion; rq_flush() flushes every WQE left;
 * rq_forget() drops the held WQE without completing it (RESET). */
int rq_take(struct qp *qp);
int rq_scatter(struct qp *qp, const uint8_t *data, size_t n);
void rq_complete(struct qp *qp, struct proto_cqe *cqe);
void rq_flush(struct qp *qp);
void rq_forget(struct qp *qp);

/* rx.c: the receive path, and the sending helpers requester and responder share. A packet
 * of a QP with n bytes of payload goes in two steps: tx_begin() writes its headers into
 * the next send slot and says where the payload goes (false when it cannot be encoded),
 * the caller copies the payload there, and tx_end() adds pad and ICRC and hands it over. */
struct tx_pkt {
	uint8_t *frame;
	uint8_t *payload;
};
void dev_rx_frame(struct dev *dev, const uint8_t *frame, size_t len);
/* rx.c: an ACK or NAK built and sent at once, with the MSN given */
void ack_send_now(struct qp *qp, uint32_t psn, uint8_t syndrome, uint32_t msn);
bool tx_begin(struct qp *qp, const struct wire_bth *bth, const struct wire_ext *ext, size_t n,
	      struct tx_pkt *p);
bool tx_begin_on(struct dev *dev, const struct wire_path *path, const struct wire_bth *bth,
		 const struct wire_ext *ext, size_t n, struct tx_pkt *p);
void tx_end(struct qp *qp, const struct tx_pkt *p, size_t n);

/* reply.c: the responder's packets in PSN order. reply_reserve() makes room for an answer
 * and the ACK ahead of it (false when there is none). reply_read() queues a READ's responses
 * (sent in the QP's turns by reply_pump(), at its rate); send_ack() and reply_atomic()
 * send at once, or queue behind responses that wait. reply_fail_after() ends the QP once
 * what is queued has gone (at once when nothing is); reply_will_send() says whether a
 * queued READ is still to send the response with that PSN; reply_rewind() takes the READ
 * being sent back to a response a duplicate asks for again. */
struct reply_queue;
bool reply_busy(const struct qp *qp);
bool reply_reserve(struct qp *qp);
void send_ack(struct qp *qp, uint32_t psn, uint8_t syndrome);
void reply_atomic(struct qp *qp, uint32_t psn, uint64_t orig);
int reply_read(struct qp *qp, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len,
	       bool starts);
bool reply_will_send(const struct qp *qp, uint32_t psn);
bool reply_rewind(struct qp *qp, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len);
void reply_fail_after(struct qp *qp);
void reply_pump(struct qp *qp);
void reply_clear(struct qp *qp);
void reply_free(struct qp *qp);

/* read.c: the responder's READ side. read_execute() takes a responder resource for a new
 * READ and queues its responses (0; -ENOBUFS only without reply_reserve()); read_replay()
 * answers a duplicate READ again from its resource (nothing when none holds it, or when
 * the responses asked for are still queued). read_send_response() sends one response,
 * its bytes looked up again (-EFAULT when the MR no longer holds them). */
int read_execute(struct qp *qp, const struct wire_pkt *pkt);
void read_replay(struct qp *qp, const struct wire_pkt *pkt);
uint8_t read_response_opcode(uint32_t k, uint32_t n, bool starts);
int read_send_response(struct qp *qp, uint32_t psn, uint32_t msn, uint32_t rkey, uint64_t va,
		       size_t n, uint8_t opcode);

/* atomic.c: the responder's atomics. atomic_execute() performs a checked COMPARE_SWAP or
 * FETCH_ADD once and answers it (0, or -EFAULT when the memory stopped resolving);
 * atomic_replay() answers a duplicate with the saved original value, or drops it;
 * atomic_ack_send_now() builds and sends an ATOMIC ACKNOWLEDGE. */
int atomic_execute(struct qp *qp, const struct wire_pkt *pkt);
void atomic_replay(struct qp *qp, const struct wire_pkt *pkt);
void atomic_ack_send_now(struct qp *qp, uint32_t psn, uint64_t orig, uint32_t msn);

/* The next responder resource: the oldest is reused, as on rxe. */
static inline struct rd_res *rd_res_take(struct qp *qp)
{
	return &qp->rd_res[qp->rd_res_next++ & (qp->attr.max_dest_rd_atomic - 1u)];
}

/* log.c */
void log_init(bool to_stderr, bool verbose);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* At most a few lines a second for anything a remote peer or a client can trigger. */
void log_limited(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
