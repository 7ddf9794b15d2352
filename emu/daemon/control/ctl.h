/* The control socket's request handlers (ops.c), called from the dispatch table in ctl.c.
 * A handler returns 0 or a negative errno, fills rep (and rep->fds) on success, and says
 * why in op_error() on failure. */
#ifndef ROCEMU_DAEMON_CTL_H
#define ROCEMU_DAEMON_CTL_H

#include "emu/daemon/control/control.h"

struct ctl_reply {
	union {
		struct proto_reply r;
		uint8_t bytes[PROTO_MAX_MSG];
	} u;
	size_t len;
	int fds[PROTO_MAX_REPLY_FDS];
	int nfds;
	bool fds_given;   /* the fds are the client's alone: ours are closed once sent */
};

struct ctl_request {
	const uint8_t *msg;
	int fd;           /* the one descriptor that came with it, or -1 */
};

/* The request's message and the reply's, as the type the operation takes and gives. */
#define REQ(type) ((const struct type *)req->msg)
#define REP(type) ((struct type *)rep->u.bytes)

void op_error(struct ctl_reply *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Descriptors the daemon may still open: its soft RLIMIT_NOFILE less those open now. The
 * last FD_RESERVE go only to clients that hold few (queues, CM channels): one greedy client
 * cannot lock every other out. */
#define FD_RESERVE 32
long ctl_free_descriptors(void);

int op_hello(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_query_port(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_alloc_pd(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_dealloc_pd(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_reg_mr(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_dereg_mr(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_rereg_mr(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_alloc_mw(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_dealloc_mw(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_create_cq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_destroy_cq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_resize_cq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_create_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_create_qp_cqs(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_modify_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_query_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_destroy_qp(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_create_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_modify_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_query_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_destroy_srq(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_create_ah(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_destroy_ah(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_attach_mcast(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_detach_mcast(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
/* cm_ops.c: RDMA CM */
int op_cm_channel(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_close_channel(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_listen(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_unlisten(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_resolve(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_connect(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_accept(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_reject(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_establish(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_disconnect(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_destroy(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_cm_migrate(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
/* views.c */
int op_stats(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_set_fault(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
/* the views of rocemuctl status, clients, mr and qp */
int op_status(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);
int op_list(struct client *c, const struct ctl_request *req, struct ctl_reply *rep);

#endif
