/* librocemu internals shared by the library's files (and by its test for white-box checks).
 *
 * A context owns every object made through it, on one list per kind, so rocemu_close can
 * release whatever the application did not destroy. Public structs (rocemu_mr, rocemu_qp)
 * are embedded in private ones and recovered with to_mr() / to_qp(). */
#ifndef ROCEMU_LIB_INT_H
#define ROCEMU_LIB_INT_H

#include "emu/proto.h"
#include "emu/rocemu.h"

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/un.h>

#define LIB_ERRMSG 256

struct mr_priv;
struct mw_priv;
struct qp_priv;
struct ah_priv;

/* A ring's mapping, and which of the daemon's memfds it maps (ring.c). */
struct ring_mapping {
	void *addr;
	size_t len;
	dev_t dev;
	ino_t ino;
};

/* Mappings of destroyed queues' rings, kept for the context's next queues (ring.c). */
struct ring_park {
	struct ring_mapping slot[PROTO_RING_PARK_SLOTS];
	unsigned n;
};

/* A CQ destroyed while events may still wait in the event pipe: the next `queued` events
 * read were written before the daemon destroyed it, and one about its handle among them is
 * about it, not about a new CQ given the handle since (context.c). */
struct gone_cq {
	uint32_t handle;
	uint32_t queued;
};
#define GONE_CQS_MAX 16

struct rocemu_context {
	int sock;
	int event_fd;           /* the read end of the daemon's event pipe (proto.h) */
	bool dead;              /* the daemon went away or broke the protocol: every call
				 * that needs it fails with EPIPE from now on */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char last_error[LIB_ERRMSG];
	struct rocemu_device_attr device;
	LIST_HEAD(, rocemu_pd) pds;
	LIST_HEAD(, mr_priv) mrs;
	LIST_HEAD(, mw_priv) mws;
	LIST_HEAD(, rocemu_cq) cqs;
	LIST_HEAD(, qp_priv) qps;
	LIST_HEAD(, rocemu_srq) srqs;
	LIST_HEAD(, ah_priv) ahs;
	uint64_t memfd_held;    /* the inode of the arena the daemon holds for this connection
				 * (a REG_MR handed it over), 0 for none; read and written
				 * atomically, and a stale value costs only a retry */
	struct ring_park park;
	struct gone_cq gone_cqs[GONE_CQS_MAX];  /* oldest first */
	unsigned n_gone_cqs;
};

struct ah_priv {
	struct rocemu_ah pub;
	LIST_ENTRY(ah_priv) link;
};

struct rocemu_pd {
	struct rocemu_context *ctx;
	uint32_t handle;
	LIST_ENTRY(rocemu_pd) link;
};

struct mr_priv {
	struct rocemu_mr pub;
	struct rocemu_context *ctx;
	LIST_ENTRY(mr_priv) link;
};

struct mw_priv {
	struct rocemu_mw pub;
	struct rocemu_context *ctx;
	LIST_ENTRY(mw_priv) link;
};

/* A ring shared with the daemon: the control block and the entries that follow it. */
struct ring {
	struct proto_ring_ctl *ctl;
	void *entries;
	uint32_t count;         /* a power of two, or 0 for a ring that takes nothing */
	uint32_t stride;        /* bytes per entry */
	uint32_t next;          /* our side's private copy of the index we own */
};

struct rocemu_cq {
	struct rocemu_context *ctx;
	uint32_t handle;
	struct ring_mapping map;
	struct ring ring;       /* the daemon produces, we consume */
	int notify_fd;
	unsigned idle_polls;    /* empty polls so far: every so many, ask if the daemon lives */
	bool armed;             /* rocemu_req_notify_cq asked for an event, not yet answered */
	unsigned qp_uses;       /* QPs sending or receiving through it (one using it both ways
				 * counts twice): the daemon refuses its destroy until none */
	void *user;             /* rocemu_cq_set_user's */
	uint64_t spin_ns;       /* how long the next wait polls before it sleeps */
	LIST_ENTRY(rocemu_cq) link;
};

struct rocemu_srq {
	struct rocemu_context *ctx;
	uint32_t handle;
	struct ring_mapping map;
	struct ring ring;       /* we produce, the daemon consumes */
	uint32_t max_sge;
	int event_fd;
	LIST_ENTRY(rocemu_srq) link;
};

struct qp_priv {
	struct rocemu_qp pub;
	struct ring_mapping map;
	struct ring sq;         /* we produce, the daemon consumes */
	struct ring rq;
	int doorbell_fd;
	uint32_t max_send_sge;  /* what the rings' slots have room for */
	uint32_t max_recv_sge;
	uint32_t max_inline;
	bool has_srq;           /* its receives come from an SRQ */
	bool ud;                /* a UD QP: SENDs only, each to an address handle */
	bool uc;                /* a UC QP: SENDs and RDMA WRITEs only */
	struct rocemu_cq *send_cq;
	struct rocemu_cq *recv_cq;
	LIST_ENTRY(qp_priv) link;
};

static inline struct mr_priv *to_mr(struct rocemu_mr *mr)
{
	return (struct mr_priv *)((char *)mr - offsetof(struct mr_priv, pub));
}

static inline struct ah_priv *to_ah(struct rocemu_ah *ah)
{
	return (struct ah_priv *)((char *)ah - offsetof(struct ah_priv, pub));
}

static inline struct qp_priv *to_qp(struct rocemu_qp *qp)
{
	return (struct qp_priv *)((char *)qp - offsetof(struct qp_priv, pub));
}

/* context.c */
/* The one *.sock socket in dir, written to out; 0, or ENOENT when there is none, ENOTUNIQ
 * when there are several, or the error of reading dir. */
int ctx_find_socket(const char *dir, char *out, size_t out_len);
/* CQ handle was destroyed: events about it still in the event pipe are dropped when read. */
void ctx_cq_gone(struct rocemu_context *ctx, uint32_t handle);

/* rpc.c: one request, one reply. Return 0 or a positive errno; on failure the context's
 * last error says why. */
struct rpc_msg {
	void *buf;
	size_t len;
	int *fds;               /* request: fds to send; reply: where received fds go */
	unsigned nfds;
};

int rpc_call(struct rocemu_context *ctx, const struct rpc_msg *req, struct rpc_msg *reply);
/* The same, with the reply copied when the op failed too, if it came whole (a batch's). */
int rpc_call_whole(struct rocemu_context *ctx, const struct rpc_msg *req, struct rpc_msg *reply);
/* A request with no fds sent with PROTO_NO_REPLY: 0 once sent, the daemon's answer to a
 * failure being a line in its log. Only for a request the caller knows will not fail. */
int rpc_post(struct rocemu_context *ctx, void *req, size_t req_len);
/* The common case: a request with no fds and a bare proto_reply back. */
int rpc_simple(struct rocemu_context *ctx, void *req, size_t req_len);
/* A proto_handle request for op with a bare proto_reply back (the destroy calls). */
int rpc_handle_op(struct rocemu_context *ctx, uint32_t op, uint32_t handle);
/* Records a failure of the library's own making in the context; returns err. */
int rpc_fail(struct rocemu_context *ctx, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Asks the socket, without blocking, whether the daemon is still there; false (and the
 * context marked dead) when it went away. */
bool rpc_alive(struct rocemu_context *ctx);
/* The socket events that mean the daemon hung up. Only these count: POLLIN could be a
 * reply that another thread is waiting for. */
#define RPC_HANGUP (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)
/* Marks the daemon as gone and says so in the last error; returns EPIPE. */
int rpc_gone(struct rocemu_context *ctx);
/* Closes the fds that are >= 0 and sets them to -1. */
void rpc_close_fds(int *fds, unsigned n);
/* Makes a pipe the daemon sent nonblocking; returns 0 or an errno. */
int rpc_set_nonblock(int fd);

/* qp.c: a MODIFY_QP request for qp, checked as rocemu_modify_qp checks it. */
int qp_modify_request(struct rocemu_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
		      struct proto_modify_qp *req);

/* arena.c */
/* Moves the pages of [addr, addr + len) that are not there yet onto the arena; returns 0
 * or a positive errno, the arena's fd in *fd and its inode in *ino (when not NULL). */
int arena_adopt(void *addr, size_t len, int *fd, uint64_t *ino);

/* ring.c */
/* Maps bytes of the daemon's ring memfd shared read-write, or takes the mapping a
 * destroyed queue of the context left of that same memfd; 0 or a positive errno. */
int ring_map(struct rocemu_context *ctx, int fd, uint64_t bytes, struct ring_mapping *m);
/* A destroyed queue's mapping, kept for the next queue where there is room. */
void ring_unmap_park(struct rocemu_context *ctx, struct ring_mapping *m);
/* A mapping that will not be wanted again (a refused ring, a resized CQ's old one). */
void ring_unmap(struct ring_mapping *m);
/* At the context's close: every kept mapping goes. */
void ring_park_empty(struct rocemu_context *ctx);
/* Fills r for a ring of count entries of entry_size at offset off of a map of map_len
 * bytes; EPROTO when it does not fit or count is no power of two within the limit. */
int ring_place(struct ring *r, void *map, size_t map_len, uint64_t off, uint32_t count,
	       size_t entry_size);
/* The entry of ring index idx. */
static inline void *ring_slot(const struct ring *r, uint32_t idx)
{
	return (char *)r->entries + (size_t)(idx & (r->count - 1)) * r->stride;
}
static inline uint32_t ring_load(const uint32_t *index)
{
	return __atomic_load_n(index, __ATOMIC_ACQUIRE);
}

static inline void ring_store(uint32_t *index, uint32_t value)
{
	__atomic_store_n(index, value, __ATOMIC_RELEASE);
}


/* cq.c, for the verbs layer: sleeps at most usec on the CQ's wakeup, back at once when a
 * completion is there or comes, or the daemon hangs up. It empties the CQ's pipe: not for
 * a CQ bound to a completion channel, whose sleepers that pipe wakes. */
/* How long a take waits for the write of an event whose request the daemon has taken: it
 * comes within a loop of the daemon's, short of a dead daemon, which hangs the pipe up. */
#define EVENT_WRITE_WAIT_MS 1000
void cq_nap(struct rocemu_cq *cq, unsigned usec);

/* cq.c, for the verbs layer's channels too: hybrid polling, a wait's look at the ring before
 * it sleeps. Its length starts at WAIT_SPIN_MIN_NS and follows the waits it serves:
 * wait_spin_next gives the next length after a wait that found its completion after
 * waited_ns. */
#define WAIT_SPIN_MIN_NS 30000
#define WAIT_SPIN_MAX_NS 200000
uint64_t wait_spin_next(uint64_t spin_ns, uint64_t waited_ns);

/* gid.c: true for ::ffff:a.b.c.d. */
bool gid_is_ipv4(const union ibv_gid *gid);

/* cq.c: the CQ the daemon made and described in r, its ring's memfd and pipe in fds (both
 * taken, kept or closed); NULL (errno set) when they are unusable: the daemon's CQ is then
 * the caller's to destroy. */
struct rocemu_cq *cq_adopt(struct rocemu_context *ctx, const struct proto_create_cq_reply *r,
			   int fds[2]);

/* cq.c and qp.c: local teardown, once the daemon no longer holds the object. */
void cq_release(struct rocemu_cq *cq);
void qp_release(struct qp_priv *qp);
void srq_release(struct rocemu_srq *srq);
void ah_release(struct ah_priv *ah);

#endif
