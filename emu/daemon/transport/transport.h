/* The transport: RoCEv2's RC, UC and UD service over the port. Per QP, the requester (req.c)
 * sends work requests as packets, the completer (comp.c) takes ACKs, NAKs and READ
 * responses and completes them, the responder (resp.c, with read.c and atomic.c) checks and
 * executes requests and answers them (reply.c); sched.c gives QPs their turns, cc.c and
 * dcqcn.c their rates, rto.c their timers. qp.c holds QPs and their state machine, cq.c and
 * srq.c the other queues, ring.c what each shares with its client.
 *
 * It may call the port (port/port.h), memreg/, wire/ and the log; it reaches control only
 * through what struct owner holds and dev->tp.find_ah, which main.c sets. Errors are
 * returned as negative errnos (or false), never logged below the QP's own limited lines;
 * what goes wrong on the wire becomes a NAK, a completion status or a counter. */
#ifndef ROCEMU_DAEMON_TRANSPORT_H
#define ROCEMU_DAEMON_TRANSPORT_H

#include <ev.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "emu/daemon/device.h"
#include "emu/daemon/limits.h"
#include "emu/daemon/port/port.h"
#include "emu/daemon/transport/dcqcn.h"
#include "emu/proto.h"
#include "memreg/memreg.h"
#include "wire/wire.h"

struct ah;

/* ring.c: a queue's shared memory and wakeup pipe (ends[0] reads, ends[1] writes); a
 * destroyed queue's wait in its owner's park for the next of the same kind and size */
enum ring_kind { RING_CQ, RING_SRQ, RING_QP };
struct ring_mem {
	void *map;
	size_t bytes;
	int memfd;
	int ends[2];
};
struct ring_park {
	struct parked_ring {
		enum ring_kind kind;
		struct ring_mem mem;
	} slot[PROTO_RING_PARK_SLOTS];
	unsigned n;
};

/* What the transport knows of the process behind its objects: control's struct client
 * begins with one. */
struct owner {
	struct dev *dev;
	pid_t pid;
	uid_t uid;
	struct neigh_wait neigh;     /* a QP's path waits here for its peer's MAC */
	struct ring_park park;       /* destroyed queues' rings, for its next ones */
	int async_fd;                /* write end of its event pipe (proto.h), or -1 */
	unsigned cm_conns;           /* the CM's connections charged to it (CM_MAX_OWNER_CONNS) */
};


struct srq {
	struct owner *owner;
	uint32_t handle;
	uint32_t entries;
	struct proto_ring_ctl *ctl;
	uint8_t *ring;               /* entries slots of stride bytes: proto_rwqe_stride */
	uint32_t stride;
	uint32_t max_sge;
	size_t ring_bytes;
	uint32_t cons;               /* WQEs taken */
	uint32_t limit;              /* armed when nonzero */
	int memfd;                   /* the ring's, kept for the next SRQ (ring.c) */
	int event_fd;                /* our (write) end of the limit event pipe */
	int client_end;              /* the read end, handed to the client */
	int users;                   /* QPs using it */
};

struct cq {
	struct owner *owner;
	uint32_t handle;
	uint32_t entries;
	struct proto_ring_ctl *ctl;
	struct proto_cqe *ring;
	size_t ring_bytes;
	int memfd;                   /* the ring's, kept for the next CQ (ring.c) */
	int notify_fd;               /* our (write) end of the notification pipe */
	int client_end;              /* the read end, handed to the client */
	bool notify_pending;
	bool solicited_pending;  /* a solicited or unsuccessful completion is among those
				  * notify_pending stands for */
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
	struct proto_sge *sge;       /* its slot's max_send_sge entries in qp->req.sges */
	uint64_t length;
	uint64_t compare_add;        /* atomics; BIND_MW: the window's length */
	uint64_t swap;
	uint32_t mw_rkey;            /* BIND_MW: the MW as it is now, the MR, the access */
	uint32_t mr_lkey;
	uint32_t mw_access;
	uint8_t flush_type;          /* FLUSH: PROTO_FLUSH_GLOBAL | _PERSISTENT, and the level */
	uint8_t flush_level;
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
	bool empty_answer;           /* a FLUSH or ATOMIC WRITE: an empty READ response */
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
	struct owner *owner;
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
	struct owner *owner;
	uint32_t handle;
	uint32_t qpn;
	enum ibv_qp_type type;       /* IBV_QPT_RC, IBV_QPT_UC or IBV_QPT_UD */
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
	uint8_t *sq;                 /* sq_entries slots of sq_stride bytes (proto.h) */
	uint32_t sq_entries;
	uint32_t sq_stride;
	uint32_t max_send_sge;       /* what a send slot has room for */
	uint32_t max_inline;
	struct proto_ring_ctl *rq_ctl;
	uint8_t *rq;                 /* rq_entries slots of rq_stride bytes */
	uint32_t rq_entries;
	uint32_t rq_stride;
	uint32_t max_recv_sge;
	int memfd;                   /* the ring's, kept for the next QP (ring.c) */
	int doorbell_fd;             /* our (read) end of the doorbell pipe */
	int client_end;              /* the write end, handed to the client */
	ev_io doorbell;
	/* poll.c: the rings' producer indices last looked at, and whether the loop polls
	 * them (on dev->tp.polled, its client skipping the doorbell) */
	struct {
		uint32_t sq_seen, rq_seen;
		bool adopted;
		TAILQ_ENTRY(qp) link;
	} poll;

	/* the retransmission and RNR timers (w->data is the QP) */
	ev_timer retry_timer;
	ev_timer rnr_timer;

	/* requester (req.c): WQEs [comp.idx, fetch_idx) are copied; [send_idx...) not all
	 * sent */
	struct qp_req {
		struct send_wqe *wqes;       /* sq_entries, by ring slot */
		struct proto_sge *sges;      /* max_send_sge for each of them */
		uint32_t fetch_idx;
		uint32_t send_idx;
		uint32_t send_pkt;           /* packet of wqes[send_idx] to send next */
		uint32_t snd_nxt;            /* next PSN to send */
		uint32_t snd_una;            /* oldest unacknowledged PSN */
		uint32_t snd_max;            /* one past the highest PSN ever sent */
		bool rnr_wait;
		uint32_t rd_outstanding;     /* READs and atomics started, not completed */
		uint32_t window;             /* PSNs it may have unacknowledged (limits.h) */
		/* its turns (sched.c): on dev->tp.ready or ->credit_wait */
		enum { TURN_NONE, TURN_READY, TURN_CREDIT } sched;
		TAILQ_ENTRY(qp) ready_link;
		uint32_t inflight_counted;   /* its share of dev->tp.inflight */
		uint32_t since_ackreq;       /* packets sent since the last that asked an ACK */
		/* its rate (cc.c) */
		struct dcqcn_flow dcqcn;     /* its send rate, when congestion has cut it */
		ev_timer pace_timer;         /* the rate lets the next packet go */
		ev_tstamp cnp_at;            /* the last CNP to the peer (long ago after reset) */
		ev_tstamp ud_cnp_at[QP_UD_CNP_SLOTS]; /* UD: the last CNP to each slot's senders */
	} req;

	/* completer (comp.c) */
	struct qp_comp {
		uint32_t idx;                /* the oldest WQE not completed */
		uint8_t retry_left;
		uint8_t rnr_left;
		struct rto rto;
		bool resend_started;         /* a resend round began (sequence NAK, lost READ
					      * responses or timeout) and nothing was
					      * acknowledged since: further NAKs tell the same
					      * story and start no other */
		enum proto_failure last_failure;
	} comp;

	/* responder (resp.c, read.c, atomic.c, reply.c, rq.c) */
	struct qp_resp {
		uint32_t rcv_psn;            /* expected PSN */
		uint32_t msn;
		bool nak_seq_sent;           /* a sequence NAK went for rcv_psn, not come since */
		bool in_msg;                 /* a message's FIRST came, its LAST not yet */
		bool uc_dropping;            /* UC: the message under way is dropped, up to
					      * the next FIRST or ONLY */
		uint8_t msg_kind;            /* WIRE_KIND_SEND or _WRITE, while in_msg */
		uint64_t write_va;
		uint64_t write_mr_va;        /* where write_va lies in the MR (an MW moves it) */
		uint32_t write_rkey;
		uint64_t write_left;
		uint32_t write_len;
		uint32_t rq_cons;
		struct recv_wqe recv;        /* the receive WQE the message under way fills */
		bool recv_held;              /* recv is the head of the RQ, copied out */
		struct rd_res rd_res[QP_MAX_RD_ATOMIC]; /* the first max_dest_rd_atomic used */
		uint32_t rd_res_next;
		bool ack_due;                /* an ACK through rcv_psn - 1 goes before the loop sleeps */
		TAILQ_ENTRY(qp) ack_link;
		struct reply_queue *replies; /* what waits to go, in PSN order (reply.c) */
		bool stopped;                /* a NAK that ends the QP waits in replies */
		enum proto_refusal last_refusal;
	} resp;

	uint32_t mcast_groups;       /* UD: the multicast groups it is attached to (attach.c) */
	LIST_ENTRY(qp) client_link;
};

/* ring.c: a zeroed shared mapping of bytes in a new memfd (*fd gets it), and a wakeup
 * pipe (0 reads, 1 writes), both ends non-blocking; 0 or a negative errno.
 * ring_take: a zeroed ring and an empty pipe for a new queue of the owner's, parked or
 * new; ring_give: a destroyed queue's, parked or freed; ring_park_empty frees the park. */
void *ring_alloc(const char *name, size_t bytes, int *fd);
int ring_channel_open(int ends[2]);
int ring_take(struct owner *o, enum ring_kind kind, size_t bytes, struct ring_mem *m);
void ring_give(struct owner *o, enum ring_kind kind, struct ring_mem *m);
void ring_park_empty(struct owner *o);

/* cq.c, srq.c and qp.c: the queues and their rings; qp_find() looks a QPN up */
struct cq *cq_create(struct owner *o, uint32_t cqe, int fds[2], int *err);
int cq_destroy(struct cq *cq);
/* A new ring of at least cqe entries, the completions not yet polled moved into it (0 and
 * its memfd in *fd; -EINVAL when they would not fit) */
int cq_resize(struct cq *cq, uint32_t cqe, int *fd);
struct srq *srq_create(struct owner *o, const struct proto_create_srq *req, int fds[2],
		       int *err);
int srq_destroy(struct srq *srq);
void cq_push(struct cq *cq, const struct proto_cqe *cqe);
void cq_flush_notify(struct dev *dev);
/* An asynchronous event (enum ibv_event_type) about the owner's object handle, written to
 * its event pipe (proto_async_event); lost, and counted, when the pipe is full. */
void owner_async_event(struct owner *own, uint32_t type, uint32_t handle);
struct qp *qp_create(struct owner *o, const struct proto_create_qp *req, int fds[2],
		     int *err);
int qp_destroy(struct qp *qp);
struct qp *qp_find(struct dev *dev, uint32_t qpn);

/* qp.c: the verbs state machine */
void qp_reset(struct qp *qp);
/* rxe's UDP source port: from a flow label, or when it is 0 from both QP numbers */
uint16_t qp_flow_port(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn);
/* The MACs and addresses of a path from sgid (one of dev's) to dgid; IP fields apart. */
void qp_path_between(struct wire_path *p, const struct dev *dev, const uint8_t *sgid,
		     const uint8_t *dgid, const uint8_t mac[6]);
int qp_modify(struct qp *qp, uint32_t mask, const struct proto_qp_attr *attr,
	      char *err, size_t errlen);
void qp_to_error(struct qp *qp);

static inline uint32_t qp_packets(const struct qp *qp, uint64_t len)
{
	return len ? (uint32_t)((len + qp->pmtu - 1) / qp->pmtu) : 1;
}

/* The states in which a QP takes requests, and so answers them. */
static inline bool qp_takes_requests(const struct qp *qp)
{
	return qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD;
}

/* A send slot of the shared ring: only its sq_stride bytes are the WQE's. */
static inline const struct proto_swqe *sq_slot(const struct qp *qp, uint32_t idx)
{
	return (const struct proto_swqe *)(qp->sq +
					   (size_t)(idx & (qp->sq_entries - 1)) * qp->sq_stride);
}

/* Copies send slot idx out of the ring, so the client cannot change it between the checks
 * and the use. Past the slot's room *out holds nothing of the WQE: sq_wqe_fits says
 * whether the WQE stays within it. */
static inline void sq_copy(const struct qp *qp, uint32_t idx, struct proto_swqe *out)
{
	memcpy(out, sq_slot(qp, idx), qp->sq_stride);
}

static inline bool sq_wqe_fits(const struct qp *qp, const struct proto_swqe *in, bool inlined)
{
	return inlined ? in->inline_len <= qp->max_inline : in->num_sge <= qp->max_send_sge;
}

/* The send queue's WQEs, as requester and completer see them */
/* The send WQE copied from ring index idx. */
static inline struct send_wqe *wqe_at(struct qp *qp, uint32_t idx)
{
	return &qp->req.wqes[idx & (qp->sq_entries - 1)];
}

/* Whether the requester has PSNs unacknowledged. */
static inline bool req_outstanding(const struct qp *qp)
{
	return qp->req.snd_max != qp->req.snd_una;
}

static inline bool wqe_is_send(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM ||
	       w->opcode == IBV_WR_SEND_WITH_INV;
}

static inline bool wqe_is_write(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static inline bool wqe_is_read(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ;
}

static inline bool wqe_is_atomic(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static inline bool wqe_is_flush(const struct send_wqe *w)
{
	return w->opcode == PROTO_WR_FLUSH;
}

/* BIND_MW and LOCAL_INV: executed by the requester, nothing on the wire (rxe's local ops). */
static inline bool wqe_is_local(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV;
}

/* READs and atomics are answered with data, a FLUSH with an empty READ response (its
 * answer says the memory is placed): only such an answer completes them. */
static inline bool wqe_wants_response(const struct send_wqe *w)
{
	return wqe_is_read(w) || wqe_is_atomic(w) || wqe_is_flush(w);
}

/* What counts against max_rd_atomic: those, and an ATOMIC WRITE, which the responder keeps
 * a resource for too (its empty READ response completes it, as an ACK covering it does). */
static inline bool wqe_takes_rd_credit(const struct send_wqe *w)
{
	return wqe_wants_response(w) || w->opcode == IBV_WR_ATOMIC_WRITE;
}

static inline bool wqe_has_imm(const struct send_wqe *w)
{
	return w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}


/* The PSN after w's last. */
static inline uint32_t wqe_end_psn(const struct send_wqe *w)
{
	return (w->first_psn + w->npkts) & WIRE_PSN_MASK;
}

/* The responder's lookup of an rkey, an MR's or a memory window's, for this QP: *mr_va is
 * where va lies in the MR's iova space (a zero-based window moves it). */
static inline enum mr_check resp_lookup(struct qp *qp, uint32_t rkey, int access, uint64_t va,
					 uint64_t len, struct mr **mr, uint64_t *mr_va)
{
	return mr_lookup_remote(qp->dev->mrs, rkey, qp->pd, qp, access, va, len, mr, mr_va);
}

/* poll.c: the rings the loop polls while it does not sleep. poll_doorbell() takes what a
 * QP's rings hold (its doorbell rang); poll_adopt() lets its client skip the doorbell while
 * tp.poll_rings is on; poll_rings() looks at every adopted QP once, poll_release() hands
 * them back to their doorbells before the loop sleeps (both take what they find, and say
 * how many QPs had posts); poll_forget() before a QP goes. */
void poll_doorbell(struct qp *qp);
void poll_adopt(struct qp *qp);
void poll_forget(struct qp *qp);
unsigned poll_rings(struct dev *dev);
unsigned poll_release(struct dev *dev);

/* req.c: the requester. req_pump() sends what the QP may send now; req_seek() puts the
 * send cursor on a PSN (the resend starts there); req_arm_timer() (re)starts the
 * retransmission timer while PSNs are outstanding; req_flush() completes every WQE left
 * with IBV_WC_WR_FLUSH_ERR. */
void req_doorbell_cb(struct ev_loop *loop, ev_io *w, int revents);
void req_pump(struct qp *qp);
void req_seek(struct qp *qp, uint32_t psn);
void req_arm_timer(struct qp *qp);
void req_rnr_cb(struct ev_loop *loop, ev_timer *w, int revents);
void req_flush(struct qp *qp);

/* comp.c: the completer. comp_on_ack() takes an ACK or NAK, comp_on_read_response() a READ
 * response, comp_on_atomic_ack() an ATOMIC ACKNOWLEDGE; comp_timer_cb() is the
 * retransmission timer. comp_complete() completes one WQE with status (a CQE when it is
 * signaled or failed); comp_fail_head() fails the oldest for a reason (its status
 * follows from it) and moves the QP to ERROR. */
void comp_on_ack(struct qp *qp, const struct wire_pkt *pkt);
void comp_on_read_response(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt);
void comp_on_atomic_ack(struct qp *qp, const struct wire_pkt *pkt);
void comp_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
void comp_complete(struct qp *qp, struct send_wqe *w, enum ibv_wc_status status);
void comp_fail_head(struct qp *qp, enum proto_failure why);
/* UC: every request whose packets have all left completes successfully. */
void comp_on_sent(struct qp *qp);

/* sched.c: requesters take turns. A QP that sent QP_BURST packets and has more to send is
 * queued; sched_serve() gives each queued QP a burst in turn, DEV_SERVE_BUDGET packets a
 * turn of the loop, so one QP's megabytes do not hold back another's few bytes.
 * sched_has_credit() is false (and queues the QP until ACKs free some) while all QPs
 * together have DEV_MAX_INFLIGHT PSNs out; sched_account() brings the QP's share up to
 * date after its PSNs or its state moved; sched_forget() takes it off every queue and
 * gives its share back. */
/* The device's queues the loop's turns serve, empty: completions to notify, ACKs due,
 * requesters ready and held back by the credit. */
void sched_init(struct dev *dev);
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
/* The slot of a UD datagram's sender (its source address and QP, hashed) whose CNP
 * interval it shares. */
unsigned cc_sender_slot(const struct wire_pkt *pkt);

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

/* attach.c: UD multicast. attach_qp() attaches a UD QP to a group (0; -EINVAL for another
 * QP type or an address that is not multicast; -ENOMEM past a limit; the port's refusal),
 * attach_detach() takes it off (-EINVAL when it was not attached), attach_detach_all() off
 * every group (destroy); err says why. attach_deliver() hands a datagram to dgid's QPs
 * (rx.c, for destination QP PROTO_MCAST_QPN). */
int attach_qp(struct qp *qp, const uint8_t gid[16], char *err, size_t errlen);
int attach_detach(struct qp *qp, const uint8_t gid[16], char *err, size_t errlen);
void attach_detach_all(struct qp *qp);
void attach_deliver(struct dev *dev, const uint8_t *frame, const struct wire_pkt *pkt,
		    const uint8_t dgid[16]);

/* resp.c: responder */
void resp_on_request(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt);
void resp_send_due_acks(struct dev *dev);
/* The QP's due ACK, now: before a request of the same QP, so that the peer completes what
 * we acknowledge before it sees what our client sends in answer to it. */
void resp_ack_before_request(struct qp *qp);
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
 * rq_forget() drops the held WQE without completing it (RESET); rq_lazy() tells the client
 * whether its receives need a doorbell (only in ERROR: proto.h's PROTO_RING_LAZY). */
int rq_take(struct qp *qp);
int rq_scatter(struct qp *qp, const uint8_t *data, size_t n);
void rq_complete(struct qp *qp, struct proto_cqe *cqe);
void rq_flush(struct qp *qp);
void rq_forget(struct qp *qp);
void rq_lazy(struct qp *qp, bool lazy);
/* UC: the held WQE's message was dropped; it stays held, whole, for the next message. */
void rq_rewind(struct qp *qp);

/* rx.c: the receive path. rx_frame() takes every frame the port delivers: the silent
 * drops in the order rxe makes them, then the QP's responder, completer or UD receive. */
void rx_frame(struct dev *dev, const uint8_t *frame, size_t len);

/* tx.c: what leaves a QP. A packet with n bytes of payload goes in two steps: tx_begin()
 * writes its headers into the port's next send slot and says where the payload goes
 * (false when it cannot be encoded), the caller copies the payload there, and tx_end()
 * adds pad and ICRC and hands it over. tx_ack() sends an ACK or NAK with the MSN given,
 * tx_atomic_ack() an ATOMIC ACKNOWLEDGE; tx_read_response() sends one READ response, its
 * bytes looked up again (-EFAULT when the MR no longer holds them). */
struct tx_pkt {
	uint8_t *frame;
	uint8_t *payload;
};
bool tx_begin(struct qp *qp, const struct wire_bth *bth, const struct wire_ext *ext, size_t n,
	      struct tx_pkt *p);
bool tx_begin_on(struct dev *dev, const struct wire_path *path, const struct wire_bth *bth,
		 const struct wire_ext *ext, size_t n, struct tx_pkt *p);
void tx_end(struct qp *qp, const struct tx_pkt *p, size_t n);
void tx_ack(struct qp *qp, uint32_t psn, uint8_t syndrome, uint32_t msn);
void tx_atomic_ack(struct qp *qp, uint32_t psn, uint64_t orig, uint32_t msn);
int tx_read_response(struct qp *qp, uint32_t psn, uint32_t msn, uint32_t rkey, uint64_t va,
		     size_t n, uint8_t opcode);

/* reply.c: the responder's packets in PSN order. reply_reserve() makes room for an answer
 * and the ACK ahead of it (false when there is none). reply_read() queues a READ's responses
 * (sent in the QP's turns by reply_pump(), at its rate); reply_ack() and reply_atomic()
 * send at once, or queue behind responses that wait. reply_fail_after() ends the QP once
 * what is queued has gone (at once when nothing is); reply_will_send() says whether a
 * queued READ is still to send the response with that PSN; reply_rewind() takes the READ
 * being sent back to a response a duplicate asks for again. */
struct reply_queue;
bool reply_busy(const struct qp *qp);
bool reply_reserve(struct qp *qp);
void reply_ack(struct qp *qp, uint32_t psn, uint8_t syndrome);
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
 * the responses asked for are still queued). */
int read_execute(struct qp *qp, const struct wire_pkt *pkt);
void read_replay(struct qp *qp, const struct wire_pkt *pkt);
uint8_t read_response_opcode(uint32_t k, uint32_t n, bool starts);

/* atomic.c: the responder's atomics. atomic_execute() performs a checked COMPARE_SWAP or
 * FETCH_ADD once and answers it (0, or -EFAULT when the memory stopped resolving);
 * atomic_replay() answers a duplicate with the saved original value, or drops it. */
int atomic_execute(struct qp *qp, const struct wire_pkt *pkt);
void atomic_replay(struct qp *qp, const struct wire_pkt *pkt);
/* ATOMIC WRITE: the 8 bytes at data stored at once into va of mr (checked, aligned), as
 * the word's owner and every other QP see it; -EFAULT when they no longer resolve. */
int atomic_write_execute(struct mr *mr, uint64_t va, const uint8_t *data);

/* flush.c: the responder's RDMA FLUSH, as rxe (6.2 on) does it, and the empty READ
 * response that answers it and an ATOMIC WRITE. flush_execute() makes what was placed
 * visible and answers; empty_answer() answers a request executed (both: 0, or -ENOBUFS
 * when the answer found no room); empty_answer_replay() answers a duplicate of either
 * again, or drops it. */
int flush_execute(struct qp *qp, const struct wire_pkt *pkt);
int empty_answer(struct qp *qp, const struct wire_pkt *pkt);
void empty_answer_replay(struct qp *qp, const struct wire_pkt *pkt);

/* The next responder resource: the oldest is reused, as on rxe. */
static inline struct rd_res *rd_res_take(struct qp *qp)
{
	return &qp->resp.rd_res[qp->resp.rd_res_next++ & (qp->attr.max_dest_rd_atomic - 1u)];
}


#endif
