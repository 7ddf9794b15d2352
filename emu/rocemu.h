/* librocemu: the verbs-shaped API applications use to drive rocemud, the emulated HCA.
 *
 * It reuses rdma-core's own types from <infiniband/verbs.h> (only the header: nothing links
 * libibverbs): IBV_ACCESS_* flags, struct ibv_qp_attr with enum ibv_qp_attr_mask, struct
 * ibv_send_wr / ibv_recv_wr / ibv_sge, struct ibv_wc with enum ibv_wc_status, enum ibv_mtu
 * and enum ibv_qp_state. Code written for verbs ports by renaming the calls.
 *
 * Control operations travel over the daemon's UNIX socket; work requests and completions
 * travel through rings shared with the daemon, with a wakeup pipe each way.
 *
 * Error convention: functions returning int give 0 or a positive errno value (as verbs
 * does); constructors return NULL and set errno. rocemu_last_error() may add the
 * daemon's explanation of the last failure on a context. None of the objects is
 * thread-safe: use one thread per context, or lock around calls. */
#ifndef ROCEMU_H
#define ROCEMU_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROCEMU_DEFAULT_SOCKET_DIR "/run/rocemu"

struct rocemu_context;
struct rocemu_pd;
struct rocemu_cq;
struct rocemu_srq;

struct rocemu_mr {
	struct rocemu_pd *pd;
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t handle;
};

/* A memory window (type 1 or 2). rkey is its key as allocated; a bind gives it the key
 * byte the binder chose (IBV_WR_BIND_MW's bind_mw.rkey), which the caller keeps. */
struct rocemu_mw {
	struct rocemu_pd *pd;
	int type;
	uint32_t rkey;
	uint32_t handle;
};

struct rocemu_qp {
	struct rocemu_context *context;
	struct rocemu_pd *pd;
	uint32_t qp_num;
	enum ibv_qp_state state;
	uint32_t handle;
};

struct rocemu_device_attr {
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint64_t max_mr_size;
	uint32_t max_sge;
	uint64_t pin_limit;      /* bytes this client may pin (0 = no limit of its own) */
	uint32_t max_qp_rd_atom; /* READs and atomics a QP may have outstanding, and serve */
	enum ibv_atomic_cap atomic_cap;
	uint32_t max_srq;        /* SRQs, CQs and QPs of one context together */
	uint32_t max_srq_wr;
	uint32_t max_inline_data;
};

#define ROCEMU_MAX_GIDS 8

struct rocemu_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;    /* the largest the link allows */
	enum ibv_mtu active_mtu; /* after the daemon's -m cap */
	union ibv_gid gid;       /* GID 0, as gids[0] */
	uint32_t ipv4;           /* network byte order: the first IPv4 address served, or 0 */
	char ifname[16];
	uint8_t mac[6];
	unsigned gid_count;      /* the port's GID table: every address the daemon serves, */
	union ibv_gid gids[ROCEMU_MAX_GIDS];  /* IPv4 ones as ::ffff:a.b.c.d, all RoCE v2 */
};

/* An address handle for UD sends. A send work request's wr.ud.ah points to ibv (the verbs
 * layer hands that out as the application's struct ibv_ah). */
struct rocemu_ah {
	struct ibv_ah ibv;
	struct rocemu_pd *pd;
	uint32_t handle;
};

struct rocemu_qp_init_attr {
	enum ibv_qp_type qp_type;  /* IBV_QPT_RC (also when 0), IBV_QPT_UC or IBV_QPT_UD */
	struct rocemu_cq *send_cq;
	struct rocemu_cq *recv_cq;
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	int sq_sig_all;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;  /* IBV_SEND_INLINE bytes per SEND or WRITE, at most 512 */
	struct rocemu_srq *srq;    /* receives come from it (max_recv_wr unused); NULL: its own */
	/* not NULL: the QP is taken to INIT in the same round trip, as rocemu_modify_qp(qp,
	 * init, init_mask) would take it (IBV_QP_STATE and INIT's attributes, no address); if
	 * the daemon refuses the change, no QP is made */
	const struct ibv_qp_attr *init;
	int init_mask;
};

/* Connects to the daemon's socket: path, else $ROCEMU_SOCKET, else the only socket in
 * ROCEMU_DEFAULT_SOCKET_DIR. */
struct rocemu_context *rocemu_open(const char *path);
/* Closing the socket makes the daemon destroy everything the client owned; the PDs, MRs,
 * CQs and QPs still held are freed here and must not be used afterwards. */
int rocemu_close(struct rocemu_context *ctx);
const char *rocemu_socket_path(const struct rocemu_context *ctx);
/* The daemon's words on the last failed call of this context ("" when none). */
const char *rocemu_last_error(const struct rocemu_context *ctx);
/* The socket to the daemon, only to watch with poll/epoll for POLLRDHUP (the daemon went
 * away); never read, write or close it. */
int rocemu_context_fd(const struct rocemu_context *ctx);
/* The pipe where the daemon queues the context's asynchronous events (readable while one
 * is queued, nonblocking); rocemu_take_async_event takes one without waiting: 0, EAGAIN
 * when none is queued, or EPIPE once the daemon is gone. An event about an object the
 * context has since destroyed comes with that object NULL, even when a new one has taken
 * its handle meanwhile. */
struct rocemu_async_event {
	enum ibv_event_type type;
	struct rocemu_cq *cq;    /* IBV_EVENT_CQ_ERR: a completion was lost to the full CQ */
	uint8_t port_num;        /* IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR: the link
				  * started or stopped running */
};
int rocemu_async_event_fd(const struct rocemu_context *ctx);
int rocemu_take_async_event(struct rocemu_context *ctx, struct rocemu_async_event *event);

int rocemu_query_device(struct rocemu_context *ctx, struct rocemu_device_attr *attr);
int rocemu_query_port(struct rocemu_context *ctx, struct rocemu_port_attr *attr);

struct rocemu_pd *rocemu_alloc_pd(struct rocemu_context *ctx);
int rocemu_dealloc_pd(struct rocemu_pd *pd);

/* Registers [addr, addr + length) for the IBV_ACCESS_* flags in access; iova = addr. The
 * pages spanning the buffer are moved in place onto memory shared with the daemon (the
 * contents are kept, the addresses do not change), so the daemon writes incoming data
 * straight into the application's buffer. See the README for the caveats. */
struct rocemu_mr *rocemu_reg_mr(struct rocemu_pd *pd, void *addr, size_t length, int access);
/* The same, with peers addressing the buffer at iova instead of addr (ibv_reg_mr_iova2):
 * iova must lie at the same offset within a page as addr. */
struct rocemu_mr *rocemu_reg_mr_iova(struct rocemu_pd *pd, void *addr, size_t length,
				     uint64_t iova, int access);
/* EINVAL while memory windows are bound to the MR, as on rxe. */
int rocemu_dereg_mr(struct rocemu_mr *mr);
/* ibv_rereg_mr: flags is a set of IBV_REREG_MR_CHANGE_*, and pd (of the MR's context),
 * [addr, addr + length) (peers address it at addr) and access are read only for their
 * flag. The MR keeps its keys; 0, or an errno: EINVAL for no flag, a bad PD, access or
 * range, EOPNOTSUPP for unknown flags, EBUSY while memory windows are bound to it, the
 * errors of rocemu_reg_mr for the new memory. On failure the MR is as it was. */
int rocemu_rereg_mr(struct rocemu_mr *mr, int flags, struct rocemu_pd *pd, void *addr,
		    size_t length, int access);

/* Memory windows of type 1 or 2 (IBV_MW_TYPE_*; another type: EINVAL). They are bound and
 * invalidated by work requests on a QP: IBV_WR_BIND_MW (bind_mw.mw->rkey names the window
 * as it is now, bind_mw.rkey gives its new key, bind_info.mr->lkey the MR, which needs
 * IBV_ACCESS_MW_BIND) and IBV_WR_LOCAL_INV (invalidate_rkey, type 2 only). A bound
 * window may be deallocated; its MR can be deregistered once no window is bound to it. */
struct rocemu_mw *rocemu_alloc_mw(struct rocemu_pd *pd, int type);
int rocemu_dealloc_mw(struct rocemu_mw *mw);

struct rocemu_cq *rocemu_create_cq(struct rocemu_context *ctx, int cqe);
int rocemu_destroy_cq(struct rocemu_cq *cq);
/* Gives the CQ a ring of at least cqe entries (1 to 4096); the completions not yet polled
 * stay, in order. 0, or EINVAL when more wait than cqe. Not while another thread polls. */
int rocemu_resize_cq(struct rocemu_cq *cq, int cqe);
/* Up to num completions into wc; returns how many (0 when empty), or -1 with errno set
 * when the daemon is gone. */
int rocemu_poll_cq(struct rocemu_cq *cq, int num, struct ibv_wc *wc);
/* Drops the completions of QP qp_num that are not polled yet (a QP modified to RESET, as
 * libmlx5 cleans its CQs then), its receives' too unless keep_receives (a QP with an SRQ:
 * the daemon took their WQEs from the SRQ, and only the completion gives them back); the
 * caller keeps other pollers of cq away meanwhile. Returns how many were dropped. */
uint32_t rocemu_cq_forget_qp(struct rocemu_cq *cq, uint32_t qp_num, bool keep_receives);
/* Sleeps until the CQ has a completion or timeout_ms passes (-1: no limit); 0 when there
 * is one, ETIMEDOUT, or EPIPE when the daemon went away. */
int rocemu_wait_cq(struct rocemu_cq *cq, int timeout_ms);
/* Verbs' completion events: rocemu_req_notify_cq arms the CQ for the next completion added
 * (solicited_only: the next receive of a message sent with IBV_SEND_SOLICITED), and the
 * daemon queues one event when it comes, as a kernel device does. rocemu_get_cq_event
 * takes one, waiting up to timeout_ms (-1: no limit): 0, ETIMEDOUT, EINVAL when none is
 * queued and the CQ is not armed, or EPIPE. */
int rocemu_req_notify_cq(struct rocemu_cq *cq, int solicited_only);
int rocemu_get_cq_event(struct rocemu_cq *cq, int timeout_ms);
/* A pipe that holds the CQ's queued events, a write each (and that hangs up when the
 * daemon goes away): poll/epoll it for POLLIN to sleep on several CQs at once; it is
 * readable exactly when an event is queued. rocemu_cq_take_event takes one, waiting up to
 * timeout_ms for it (-1: no limit): 0, EAGAIN when none came, or EPIPE. A CQ nobody armed
 * or waits on costs the daemon no write. Never close it. */
int rocemu_cq_event_fd(const struct rocemu_cq *cq);
/* A pointer of the caller's kept with the CQ (NULL until set). */
void rocemu_cq_set_user(struct rocemu_cq *cq, void *user);
void *rocemu_cq_user(const struct rocemu_cq *cq);
int rocemu_cq_take_event(struct rocemu_cq *cq, int timeout_ms);
/* Whether the daemon has answered the CQ's arming: its event is queued or about to be,
 * so a wait for it need not sleep (a look at shared memory, no system call). */
bool rocemu_cq_event_coming(const struct rocemu_cq *cq);

/* On success attr's max_send_wr and max_recv_wr hold the queues' sizes: at least what was
 * asked (a power of two), as ibv_create_qp reports them in cap. */
struct rocemu_qp *rocemu_create_qp(struct rocemu_pd *pd, struct rocemu_qp_init_attr *attr);
/* The same with the two CQs it completes to, made in the same round trip with send_cqe and
 * recv_cqe entries: attr's send_cq and recv_cq are set to them (what it had there is not
 * read). All three or none are made. */
struct rocemu_qp *rocemu_create_qp_cqs(struct rocemu_pd *pd, struct rocemu_qp_init_attr *attr,
				       int send_cqe, int recv_cqe);
/* As ibv_modify_qp: for an RC or UC QP attr->ah_attr.grh names the peer (dgid: an
 * IPv4-mapped or IPv6 GID of the same family as the port's GID sgid_index; traffic_class; a
 * nonzero flow_label picks the UDP source port); a UC QP takes only the attributes the
 * kernel's table gives UC (IBV_QP_ACCESS_FLAGS needed on the way to INIT; nothing of READs,
 * atomics, ACKs or retries); a UD QP takes IBV_QP_QKEY (needed on the way to INIT) and
 * IBV_QP_SQ_PSN only. */
int rocemu_modify_qp(struct rocemu_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int rocemu_query_qp(struct rocemu_qp *qp, struct ibv_qp_attr *attr);
int rocemu_destroy_qp(struct rocemu_qp *qp);
/* As ibv_attach_mcast and ibv_detach_mcast (RoCE has no LIDs): a UD QP receives every
 * datagram sent to the group gid (::ffff:224.0.0.0/100 or ff00::/8) until it is detached or
 * destroyed. EINVAL for another QP type, an address that is not multicast or a detach of
 * a group not attached; ENOMEM past the device's limits (rxe's: proto.h). */
int rocemu_attach_mcast(struct rocemu_qp *qp, const union ibv_gid *gid);
int rocemu_detach_mcast(struct rocemu_qp *qp, const union ibv_gid *gid);

/* RDMA WRITE, WRITE WITH IMMEDIATE, SEND and SEND WITH IMMEDIATE work requests
 * (IBV_WR_RDMA_WRITE[_WITH_IMM], IBV_WR_SEND[_WITH_IMM]); on an RC QP also READs, atomics
 * and SEND WITH INVALIDATE. A UC send completes as its last packet leaves, unacknowledged.
 * On a UD QP only the SENDs, each
 * with wr.ud: ah (&rocemu_ah->ibv), remote_qpn and remote_qkey (top bit set: the QP's own
 * Q_Key); a datagram longer than the port's active MTU completes without being sent, and
 * a receive buffer gets 40 bytes of GRH area before the payload. */
int rocemu_post_send(struct rocemu_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
/* RDMA FLUSH (rdma-core's later ibv_wr_flush; ibv_send_wr has no room for it): on an RC
 * QP, asks the peer to make what was placed in [remote_addr, remote_addr + length) of
 * rkey's MR (level IBV_FLUSH_RANGE, 0) or in the whole MR (IBV_FLUSH_MR, 1) visible at
 * the placement type asked (IBV_FLUSH_GLOBAL 1, IBV_FLUSH_PERSISTENT 2, or both; the
 * names are later rdma-core's, the values in proto.h). It counts against max_rd_atomic
 * as a READ does and completes as IBV_WC_FLUSH (8);
 * a peer whose QP or MR does not grant the type fails it (IBV_WC_REM_INV_REQ_ERR,
 * IBV_WC_REM_ACCESS_ERR). EINVAL for another type or level, a length over 2^31 or a QP
 * that is not RC; otherwise as rocemu_post_send. */
struct rocemu_flush_wr {
	uint64_t wr_id;
	unsigned int send_flags;     /* IBV_SEND_SIGNALED, IBV_SEND_FENCE */
	uint32_t rkey;
	uint64_t remote_addr;
	uint64_t length;
	uint8_t type;
	uint8_t level;
};
int rocemu_post_flush(struct rocemu_qp *qp, const struct rocemu_flush_wr *wr);
/* Receive work requests: an incoming SEND is scattered through the SGEs of the next one
 * (lkeys of MRs with IBV_ACCESS_LOCAL_WRITE); WRITE WITH IMMEDIATE consumes one too. */
int rocemu_post_recv(struct rocemu_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* Shared receive queues, as ibv_create_srq and friends: attr->attr.max_wr WQEs (rounded up
 * to a power of two, written back), up to 4 SGEs each, and srq_limit (0: not armed). When
 * the WQEs left fall below an armed limit, the limit is cleared and the SRQ's event fd
 * becomes readable: rocemu_get_srq_event() waits up to timeout_ms (-1: forever) for that
 * (verbs' IBV_EVENT_SRQ_LIMIT_REACHED) and returns 0, or ETIMEDOUT. Only IBV_SRQ_LIMIT
 * can be modified. A QP created with an SRQ takes its receives from it, in posting order,
 * whichever QP a SEND arrives on; rocemu_post_recv() on such a QP fails with EINVAL. */
struct rocemu_srq *rocemu_create_srq(struct rocemu_pd *pd, struct ibv_srq_init_attr *attr);
int rocemu_modify_srq(struct rocemu_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
int rocemu_query_srq(struct rocemu_srq *srq, struct ibv_srq_attr *attr);
int rocemu_destroy_srq(struct rocemu_srq *srq);
int rocemu_post_srq_recv(struct rocemu_srq *srq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad);
int rocemu_srq_event_fd(const struct rocemu_srq *srq);
int rocemu_get_srq_event(struct rocemu_srq *srq, int timeout_ms);

/* Address handles for UD sends: attr->is_global with grh.dgid the peer's GID (IPv4-mapped
 * or IPv6, the family of the port's GID grh.sgid_index); traffic_class goes into the IP
 * header, a nonzero flow_label picks the UDP source port. hop_limit is not used: as on
 * rxe, the TTL is the route's. The daemon resolves the peer's MAC address here. */
struct rocemu_ah *rocemu_create_ah(struct rocemu_pd *pd, const struct ibv_ah_attr *attr);
int rocemu_destroy_ah(struct rocemu_ah *ah);

/* "IBV_WC_REM_ACCESS_ERR" and so on: the status's name as the enum spells it (verbs'
 * ibv_wc_status_str gives prose instead); "IBV_WC_(unknown)" for other values. */
const char *rocemu_wc_status_str(enum ibv_wc_status status);

/* The IPv4-mapped GID of an IPv4 address (network byte order), and back (0 if not one). */
void rocemu_gid_from_ipv4(union ibv_gid *gid, uint32_t ipv4);
uint32_t rocemu_gid_to_ipv4(const union ibv_gid *gid);

/* RDMA CM (the verbs layer's rdma_cm calls): one request of emu/proto.h's PROTO_CM_* ops,
 * with fd (or -1) beside it, and its reply of reply_len bytes (NULL: a bare reply). 0 or an
 * errno, as every call here. */
int rocemu_cm_request(struct rocemu_context *ctx, void *req, size_t req_len, void *reply,
		      size_t reply_len, int fd);
/* The same for a request with a bare reply that the caller knows cannot fail (a
 * connection's PROTO_CM_DESTROY), sent with no reply wanted: 0 once it is on its way. */
int rocemu_cm_post(struct rocemu_context *ctx, void *req, size_t req_len);

/* A batch: up to four requests the daemon runs one after another in one round trip,
 * stopping at the first that fails, where each alone would cost the client and the daemon
 * a sleep and a wakeup. rocemu_batch_add takes one request of emu/proto.h whose reply is a
 * bare proto_reply and which carries no descriptor (ENOSPC past four or the body's room);
 * rocemu_batch_modify_qp a QP change as rocemu_modify_qp would make it, of a QP of the
 * batch's context; rocemu_batch_destroy_qp/_cq a destruction as rocemu_destroy_qp/_cq.
 * rocemu_batch_run returns 0 or the failed request's errno, and says in *done how many ran
 * before it; the QPs they changed have their state updated, the QPs and CQs they destroyed
 * are freed (those after the failure are kept, as after a failed rocemu_destroy_*).
 * rocemu_batch_post sends instead a batch the daemon will surely run whole, with no reply
 * wanted, and takes its effects at once: destroys only, of QPs in ERROR or RESET and not
 * UD, and of CQs no QP uses once the batch's QPs are gone; EAGAIN, nothing sent, for any
 * other batch (run it). A batch runs or is posted once. */
#define ROCEMU_BATCH_MAX 4
struct rocemu_batch;
struct rocemu_batch *rocemu_batch_new(struct rocemu_context *ctx);
int rocemu_batch_add(struct rocemu_batch *b, const void *req, size_t len);
int rocemu_batch_modify_qp(struct rocemu_batch *b, struct rocemu_qp *qp,
			   const struct ibv_qp_attr *attr, int attr_mask);
int rocemu_batch_destroy_qp(struct rocemu_batch *b, struct rocemu_qp *qp);
int rocemu_batch_destroy_cq(struct rocemu_batch *b, struct rocemu_cq *cq);
int rocemu_batch_run(struct rocemu_batch *b, unsigned *done);
int rocemu_batch_post(struct rocemu_batch *b);
void rocemu_batch_free(struct rocemu_batch *b);

#ifdef __cplusplus
}
#endif

#endif
