/* The verbs layer's internals: rdma-core's objects (struct ibv_context, ibv_pd, ...) wrapped
 * around librocemu's, so that a program compiled against <infiniband/verbs.h> and linked
 * against libibverbs.so.1 drives rocemud when this library is preloaded (rocemu-run).
 *
 * Every verbs object a program sees is the first member of one of ours (the context is the
 * last member of a struct verbs_context, as libibverbs' inline helpers require), so the
 * calls recover ours with a cast from the pointer they are given.
 *
 * Locking follows what libibverbs promises: calls on one context may come from several
 * threads. librocemu objects are not thread-safe, so every call that talks to the daemon
 * holds its context's lock, posting holds the queue's lock, polling the CQ's. */
#ifndef ROCEMU_VERBS_INT_H
#define ROCEMU_VERBS_INT_H

#include "emu/rocemu.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/un.h>

#define RV_PORT 1
#define RV_FW_VER "0.1"
#define RV_CQ_BATCH 16          /* completions one extended-CQ poll takes from the ring */

#define RV_DEV_PREFIX "rocemu"    /* devices are rocemu0, rocemu1, ... (device.c) */

struct rv_device {
	struct ibv_device ibdev;
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char ifname[16];                /* the daemon's interface */
	unsigned index;                 /* N of rocemuN and uverbsN */
	__be64 guid;
	struct rv_device *next;
};

struct rv_context {
	pthread_mutex_t lock;           /* one daemon call at a time */
	struct rocemu_context *rc;
	struct rv_device *dev;
	struct rocemu_device_attr attr;
	struct rocemu_port_attr port;
	int async_ep;                   /* = async_fd: the daemon's socket and the SRQs' fds */
	bool fatal_sent;                /* IBV_EVENT_DEVICE_FATAL was reported */
	enum ibv_port_state event_port_state;  /* the last one an async event told of */
	struct verbs_context vctx;      /* last: libibverbs finds the ops in front of it */
};

struct rv_pd {
	struct ibv_pd ibpd;
	struct rocemu_pd *pd;
};

struct rv_mr {
	struct ibv_mr ibmr;
	struct rocemu_mr *mr;
};

struct rv_channel {
	struct ibv_comp_channel ch;     /* ch.fd is an epoll set of its CQs' event fds */
	pthread_mutex_t lock;
	LIST_HEAD(, rv_cq) cqs;
	uint64_t spin_ns;               /* how long a blocking wait looks before it sleeps */
};

struct rv_cq {
	struct ibv_cq_ex ex;            /* begins as a struct ibv_cq does */
	struct rocemu_cq *cq;
	pthread_mutex_t lock;
	struct rv_channel *channel;
	uint64_t wc_flags;              /* what the extended CQ was asked to report */
	struct ibv_wc batch[RV_CQ_BATCH];
	int batch_len, batch_pos;       /* extended polling: taken from the ring, not yet read */
	bool reading;                   /* batch[batch_pos] is the one being read */
	uint64_t empty_since_ns;        /* the run of empty polls began then (0: none) */
	LIST_ENTRY(rv_cq) link;         /* on its channel */
};

struct rv_mw {
	struct ibv_mw ibmw;
	struct rocemu_mw *mw;
};

struct rv_srq {
	struct ibv_srq ibsrq;
	struct rocemu_srq *srq;
	pthread_mutex_t lock;
};

/* One work request being built with the ibv_wr_* calls. */
struct rv_wr_slot {
	struct ibv_send_wr wr;
	struct ibv_sge sge[4];
	uint8_t inline_data[256];
	bool is_flush;                  /* wr.opcode PROTO_WR_FLUSH: posted from flush */
	struct rocemu_flush_wr flush;
};

/* Bits of ibv_device_attr_ex.device_cap_flags_ex that Debian 12's headers do not name. */
#define RV_DEVICE_FLUSH_GLOBAL (1ull << 38)
#define RV_DEVICE_ATOMIC_WRITE (1ull << 40)

/* The ibv_wr_flush of rdma-core's later struct ibv_qp_ex, the member after wr_atomic_write. */
typedef void (*rv_wr_flush_fn)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr,
			       size_t len, uint8_t type, uint8_t level);

struct rv_qp {
	struct ibv_qp_ex ex;            /* begins as a struct ibv_qp does */
	/* Where a program built with rdma-core's later headers finds ibv_wr_flush: right
	 * after Debian 12's struct ibv_qp_ex ends (qp_ex.c checks the layout). */
	rv_wr_flush_fn wr_flush;
	struct rocemu_qp *qp;
	pthread_mutex_t send_lock, recv_lock;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	bool has_ex;                    /* created with send_ops_flags: ibv_wr_* work */
	struct rv_wr_slot *slots;       /* between ibv_wr_start and ibv_wr_complete */
	unsigned nslots, slots_cap;
	int build_err;                  /* the first bad ibv_wr_* call since ibv_wr_start */
};

static inline struct rv_context *rv_ctx(struct ibv_context *ibctx)
{
	return (struct rv_context *)((char *)ibctx - offsetof(struct rv_context, vctx.context));
}

static inline struct rv_pd *rv_pd(struct ibv_pd *pd) { return (struct rv_pd *)pd; }
static inline struct rv_cq *rv_cq(struct ibv_cq *cq) { return (struct rv_cq *)cq; }
static inline struct rv_qp *rv_qp(struct ibv_qp *qp) { return (struct rv_qp *)qp; }
static inline struct rv_srq *rv_srq(struct ibv_srq *srq) { return (struct rv_srq *)srq; }

/* report.c: what reaches the user on stderr ("rocemu: ..."), with ROCEMU_DEBUG=1 only. */
/* A failed daemon call: its errno, with what was asked and the daemon's reason. */
int rv_fail(struct rv_context *ctx, int err, const char *what);
/* One line, "rocemu: " first. */
void rv_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A call refused here, before the daemon: err, with why. */
int rv_refuse(int err, const char *what, const char *why);
/* Something rocemu does not do: EOPNOTSUPP, said once per what. */
int rv_unsupported(const char *what, const char *why);
/* The same for constructors: NULL with errno = EOPNOTSUPP. */
void *rv_unsupported_null(const char *what, const char *why);

/* device.c: the device named name (len bytes of it: rocemuN or uverbsN), or NULL. */
struct rv_device *rv_device_named(const char *name, size_t len);

/* query.c */
/* The port as ibv_query_port reports it, from the daemon's answer (sysfs.c shows the same). */
void rv_fill_port_attr(const struct rocemu_port_attr *port, struct ibv_port_attr *a);
int rv_query_device_ex(struct ibv_context *ibctx, const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *attr, size_t attr_size);
int rv_query_port(struct ibv_context *ibctx, uint8_t port, struct ibv_port_attr *attr,
		  size_t attr_len);

/* channel.c: a CQ made with a channel is bound to it; 0 or an errno */
/* After a wait here was interrupted by a signal: whether the kernel's read() of its
 * descriptor would have returned EINTR rather than gone on (see channel.c). */
bool rv_interrupt_returns(void);
int rv_channel_bind(struct rv_channel *c, struct rv_cq *cq);
void rv_channel_unbind(struct rv_cq *cq);

/* cq.c */
int rv_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
int rv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void rv_cq_forget_qp(struct ibv_cq *cq, uint32_t qp_num, bool keep_receives);
/* frees the wrapper of a CQ the daemon has destroyed */
void rv_cq_free(struct rv_cq *cq);
struct rv_cq *rv_cq_wrap(struct rv_context *ctx, struct rocemu_cq *rcq, int cqe,
			 struct ibv_comp_channel *ch, void *cq_context);
struct ibv_cq_ex *rv_create_cq_ex(struct ibv_context *ibctx, struct ibv_cq_init_attr_ex *a);

/* qp.c */
int rv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int rv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_qp *rv_create_qp_ex(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *a);
/* QP changes, each as ibv_modify_qp makes it, and then req (a request of emu/proto.h with a
 * bare reply, or NULL) in one round trip to the QP's daemon, stopping at the first that
 * fails: 0 or its errno, reported as ibv_modify_qp's or as what's; *ran (when not NULL)
 * gets how many ran before it. */
struct rv_qp_change {
	struct ibv_qp_attr attr;
	int mask;
};
int rv_modify_qp_then(struct ibv_qp *qp, const struct rv_qp_change *changes, unsigned n,
		      void *req, size_t len, const char *what, unsigned *ran);
/* As ibv_create_qp_ex and then ibv_modify_qp to INIT with init, in one round trip (the
 * change may carry no address); NULL and errno if either is refused, and then no QP is
 * left. */
struct ibv_qp *rv_create_qp_in_init(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
				    const struct rv_qp_change *init);
/* The same with the QP's two CQs made in the same round trip (rdma_create_qp's, for an id
 * given none): a's send_cq and recv_cq are set to them, each bound to its channel (or
 * none) with cq_context. All or nothing. */
struct rv_new_cq {
	int cqe;
	struct ibv_comp_channel *channel;
};
struct ibv_qp *rv_create_qp_cqs_in_init(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
					const struct rv_qp_change *init, struct rv_new_cq send,
					struct rv_new_cq recv, void *cq_context);

/* qp_ex.c: the ibv_wr_* function table of a QP created with send_ops_flags. */
/* 0, or EOPNOTSUPP when send_ops_flags asks for an operation rocemu does not do. */
int rv_qp_ex_check_ops(uint64_t send_ops_flags);
void rv_qp_ex_init(struct rv_qp *qp);
void rv_qp_ex_free(struct rv_qp *qp);
/* ibv_destroy_qp and then ibv_destroy_cq of each of n CQs, in one round trip when all
 * belong to the QP's context; stops at the first that fails. */
int rv_destroy_qp_and_cqs(struct ibv_qp *qp, struct ibv_cq *const *cqs, unsigned n);

/* fork.c: after ibv_fork_init, registered pages are kept out of children */
void rv_fork_track(const void *addr, size_t length);
void rv_fork_untrack(const void *addr, size_t length);

/* srq.c */
int rv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_srq *rv_create_srq_ex(struct ibv_context *ibctx, struct ibv_srq_init_attr_ex *a);

/* async.c */
int rv_async_init(struct rv_context *ctx);
void rv_async_watch_srq(struct rv_context *ctx, struct rv_srq *srq);
void rv_async_unwatch_srq(struct rv_context *ctx, struct rv_srq *srq);

/* sysfs.c: the device's files under /sys and /dev as the kernel shows a device's, made for
 * this process alone in a private directory (the tree) that paths.c redirects lookups to. */
/* The tree's top directory, or NULL when this process has none (yet, or the tree is
 * switched off with ROCEMU_SYSFS=0); len gets its length. */
const char *rv_sysfs_root(size_t *len);
enum rv_sysfs_use {
	RV_SYSFS_LOOKUP,        /* stat, access, readlink, realpath, opening to write */
	RV_SYSFS_READ,          /* opening to read: a file that follows the daemon is asked */
	RV_SYSFS_LIST,          /* opendir: the directory's entries are made */
};
/* Makes what path (as the program names it, e.g. /sys/class/infiniband/rocemu0/node_guid)
 * walks through in the tree, following its links (the tree itself at the first path that
 * is there); a directory opened gets its entries. 0; ENOENT or ENOTDIR for a path that is
 * not there (nothing is made); for RV_SYSFS_READ, the errno that reading the kernel's file
 * would give (ENODATA, ENODEV). */
int rv_sysfs_prepare(const char *path, enum rv_sysfs_use use);
/* The kernel's path that path stands for when it lies in a tree, any process's (a child
 * that starts in its parent's tree moves to its own); NULL when it does not. */
const char *rv_sysfs_foreign(const char *path);

/* mem.c: memory windows, set as context ops by rv_set_unsupported_ops */
struct ibv_mw *rv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int rv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
int rv_dealloc_mw(struct ibv_mw *mw);

/* unsupported.c: the context ops for what rocemu does not do (and memory windows'). */
void rv_set_unsupported_ops(struct verbs_context *vctx);

#endif
