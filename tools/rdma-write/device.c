/* rdma-write's use of the emulated HCA: open the device, register the buffer, create the
 * CQ and QP, move the QP through its states, and tear it all down. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tools/rdma-write/rdma-write.h"

#define MAX_RECV_WR        16
#define CQ_SPARE           16
#define BUF_ALIGN          4096

static uint32_t random_psn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint32_t)now_ns() ^ ((uint32_t)getpid() << 12);   /* entropy not ready yet */
	return v & 0xffffff;
}

static int open_device(struct endpoint *ep, const struct options *o)
{
	int err;

	ep->ctx = rocemu_open(o->socket_path);
	if (!ep->ctx) {
		if (!o->socket_path && errno == ENOTUNIQ)
			msg("rocemu_open: several rocemud sockets in %s: name one with -D SOCKET or "
			    "$ROCEMU_SOCKET", ROCEMU_DEFAULT_SOCKET_DIR);
		else
			msg("rocemu_open(%s): %s", o->socket_path ? o->socket_path : "default socket",
			    strerror(errno));
		return -1;
	}
	if ((err = rocemu_query_device(ep->ctx, &ep->dev)))
		return verbs_fail(ep->ctx, "rocemu_query_device", err);
	if ((err = rocemu_query_port(ep->ctx, &ep->port)))
		return verbs_fail(ep->ctx, "rocemu_query_port", err);
	if (!mtu_valid(ep->port.active_mtu)) {
		msg("rocemu_query_port: active MTU %d is not an enum ibv_mtu value",
		    (int)ep->port.active_mtu);
		return -1;
	}
	if (ep->port.state != IBV_PORT_ACTIVE)
		msg("warning: port %.16s is not active (state %d)", ep->port.ifname,
		    (int)ep->port.state);
	ep->mtu = ep->port.active_mtu;
	if (o->mtu && o->mtu > (uint32_t)ep->port.active_mtu)
		msg("warning: --mtu %u is above the port's active MTU; proposing %u",
		    mtu_bytes((enum ibv_mtu)o->mtu), mtu_bytes(ep->mtu));
	else if (o->mtu)
		ep->mtu = (enum ibv_mtu)o->mtu;
	return 0;
}

/* Page-aligned, filled before registration: registration keeps the contents, and the
 * server tells "unchanged" by this fill. */
static int alloc_buffer(struct endpoint *ep, size_t len, int fill)
{
	void *p;
	int err = posix_memalign(&p, BUF_ALIGN, len);

	if (err) {
		msg("cannot allocate %zu bytes: %s", len, strerror(err));
		return -1;
	}
	memset(p, fill, len);
	ep->buf = p;
	ep->buf_len = len;
	return 0;
}

static int create_objects(struct endpoint *ep, const struct options *o)
{
	/* Every WR is signalled, so tx-depth entries suffice; the spare is slack only. */
	uint32_t cqe = o->tx_depth + CQ_SPARE;
	struct rocemu_qp_init_attr qpa = {
		.max_send_wr = o->tx_depth,
		.max_recv_wr = MAX_RECV_WR,
		.max_send_sge = 1,
		.max_recv_sge = 1,
		.sq_sig_all = 0,
	};

	if (ep->dev.max_qp_wr && o->tx_depth > ep->dev.max_qp_wr) {
		msg("--tx-depth %u is above the device's max_qp_wr %u", o->tx_depth,
		    ep->dev.max_qp_wr);
		return -1;
	}
	if (ep->dev.max_cqe && cqe > ep->dev.max_cqe) {
		if (ep->dev.max_cqe < o->tx_depth) {
			msg("--tx-depth %u is above the device's max_cqe %u", o->tx_depth,
			    ep->dev.max_cqe);
			return -1;
		}
		cqe = ep->dev.max_cqe;
	}
	if (!(ep->pd = rocemu_alloc_pd(ep->ctx)))
		return verbs_fail(ep->ctx, "rocemu_alloc_pd", errno);
	ep->mr = rocemu_reg_mr(ep->pd, ep->buf, ep->buf_len,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ep->mr)
		return verbs_fail(ep->ctx, "rocemu_reg_mr", errno);
	if (!(ep->cq = rocemu_create_cq(ep->ctx, (int)cqe)))
		return verbs_fail(ep->ctx, "rocemu_create_cq", errno);
	qpa.send_cq = qpa.recv_cq = ep->cq;
	if (!(ep->qp = rocemu_create_qp(ep->pd, &qpa)))
		return verbs_fail(ep->ctx, "rocemu_create_qp", errno);
	return 0;
}

static int modify_qp(struct endpoint *ep, struct ibv_qp_attr *attr, int mask, const char *call)
{
	int err = rocemu_modify_qp(ep->qp, attr, mask);

	return err ? verbs_fail(ep->ctx, call, err) : 0;
}

/* Both sides accept remote writes, as perftest sets up its QPs. */
static int qp_to_init(struct endpoint *ep)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
		.port_num = 1,
	};

	return modify_qp(ep, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, "rocemu_modify_qp(INIT)");
}

static int qp_to_rtr(struct endpoint *ep, const struct conn_info *peer, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = { .dgid = peer->gid, .sgid_index = ep->sgid_index, .hop_limit = 64 },
		},
	};

	return modify_qp(ep, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN,
			 "rocemu_modify_qp(RTR)");
}

static int qp_to_rts(struct endpoint *ep, const struct options *o)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = ep->psn,
		.timeout = o->qp_timeout,
		.retry_cnt = o->retry_cnt,
		.rnr_retry = QP_RNR_RETRY,
	};

	return modify_qp(ep, &a,
			 IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY,
			 "rocemu_modify_qp(RTS)");
}

int connect_qp(struct session *s)
{
	return qp_to_rtr(&s->ep, &s->peer, s->mtu) < 0 || qp_to_rts(&s->ep, s->o) < 0 ? -1 : 0;
}

/* Everything up to a QP in INIT, with a buffer of buf_len bytes of fill registered. */
int setup_endpoint(struct endpoint *ep, const struct options *o, size_t buf_len, int fill)
{
	ep->psn = random_psn();
	if (open_device(ep, o) < 0 || alloc_buffer(ep, buf_len, fill) < 0 ||
	    create_objects(ep, o) < 0 || qp_to_init(ep) < 0)
		return -1;
	return 0;
}

/* Undoes whatever setup_endpoint got to; -1 if any step failed. */
static int teardown(struct endpoint *ep)
{
	bool registered = ep->mr != NULL;
	int rc = 0, err;

	if (ep->qp && (err = rocemu_destroy_qp(ep->qp)))
		rc = verbs_fail(ep->ctx, "rocemu_destroy_qp", err);
	if (ep->cq && (err = rocemu_destroy_cq(ep->cq)))
		rc = verbs_fail(ep->ctx, "rocemu_destroy_cq", err);
	if (ep->mr) {
		if ((err = rocemu_dereg_mr(ep->mr)))
			rc = verbs_fail(ep->ctx, "rocemu_dereg_mr", err);
		else
			registered = false;
	}
	if (ep->pd && (err = rocemu_dealloc_pd(ep->pd)))
		rc = verbs_fail(ep->ctx, "rocemu_dealloc_pd", err);
	/* Memory the daemon may still write into is not handed back to malloc. */
	if (!registered)
		free(ep->buf);
	if (ep->ctx && (err = rocemu_close(ep->ctx))) {
		msg("rocemu_close: %s", strerror(err));
		rc = -1;
	}
	return rc;
}

int close_session(struct session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	return teardown(&s->ep);
}
