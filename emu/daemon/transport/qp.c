/* QPs: the verbs state machine for RC, UC and UD QPs, as ibv_modify_qp applies it, and their
 * creation (the daemon-wide QPN table, the rings shared with the client, the doorbell). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

#define DEFAULT_TIMEOUT 14   /* 4.096 us * 2^14 = 67 ms */
#define DEFAULT_RETRY 7

/* Verbs lets an RTS QP change only these on the fly; the rest would pull the path or the
 * PSNs out from under packets in flight. */
#define RTS_MODIFIABLE (IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | \
			IBV_QP_MIN_RNR_TIMER)

static bool transition_ok(enum ibv_qp_state from, enum ibv_qp_state to)
{
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return true;
	switch (from) {
	case IBV_QPS_RESET: return to == IBV_QPS_INIT;
	case IBV_QPS_INIT: return to == IBV_QPS_INIT || to == IBV_QPS_RTR;
	case IBV_QPS_RTR: return to == IBV_QPS_RTS;
	case IBV_QPS_RTS: return to == IBV_QPS_RTS;
	default: return false;
	}
}

/* What a UD QP may be given at all: it has no path, no peer and no PSN to expect (the
 * port and P_Key index are the verbs layer's, which knows rocemu has one of each). */
#define UD_ATTRS (IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_QKEY | IBV_QP_SQ_PSN)
#define RTS_MODIFIABLE_UD (IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_QKEY)
#define QKEY_PRIVILEGED 0x80000000u

/* What a UC QP may be given in each transition, as the kernel's table of transitions
 * (ib_modify_qp_is_ok) lists them, less the port and P_Key index (the verbs layer's) and
 * the alternate path (rocemu has none): UC has no READs, atomics, ACKs or retries, so
 * none of their attributes is taken. */
#define UC_ALWAYS (IBV_QP_STATE | IBV_QP_CUR_STATE)
#define UC_TO_RTR (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define RTS_MODIFIABLE_UC (UC_ALWAYS | IBV_QP_ACCESS_FLAGS)

static uint32_t uc_attrs(enum ibv_qp_state from, enum ibv_qp_state to)
{
	switch (to) {
	case IBV_QPS_INIT:
		return UC_ALWAYS | IBV_QP_ACCESS_FLAGS;
	case IBV_QPS_RTR:
		return UC_ALWAYS | IBV_QP_ACCESS_FLAGS | UC_TO_RTR;
	case IBV_QPS_RTS:
		return RTS_MODIFIABLE_UC | (from == IBV_QPS_RTR ? IBV_QP_SQ_PSN : 0);
	default:
		return UC_ALWAYS;   /* RESET and ERR take nothing else */
	}
}

/* Attributes each transition needs before the QP can work (a subset of verbs' list:
 * rocemu has one port and one P_Key; without max_rd_atomic and max_dest_rd_atomic a QP
 * neither issues nor serves READs). */
static uint32_t required_mask(const struct qp *qp, enum ibv_qp_state to)
{
	enum ibv_qp_state from = qp->state;

	if (qp->type == IBV_QPT_UD && from == IBV_QPS_RESET && to == IBV_QPS_INIT)
		return IBV_QP_QKEY;
	/* the kernel's table asks UC for its access flags here (RC may leave them 0) */
	if (qp->type == IBV_QPT_UC && from == IBV_QPS_RESET && to == IBV_QPS_INIT)
		return IBV_QP_ACCESS_FLAGS;
	if (qp->type != IBV_QPT_UD && from == IBV_QPS_INIT && to == IBV_QPS_RTR)
		return UC_TO_RTR;
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS)
		return IBV_QP_SQ_PSN;
	return 0;
}

uint16_t qp_flow_port(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn)
{
	uint32_t fl = flow_label & 0xfffff;

	if (!fl) {
		uint64_t v = (uint64_t)lqpn * rqpn;

		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xfffff);
	}
	return (uint16_t)(0xc000 | ((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)));
}

/* A Q_Key with the top bit set is the privileged kind (QP1's 0x80010000): only root may
 * give one to a QP, as IBA reserves them for the privileged. */
static int check_ud_attrs(struct qp *qp, uint32_t mask, const struct proto_qp_attr *a,
			  char *err, size_t errlen)
{
	if (mask & ~(uint32_t)UD_ATTRS) {
		snprintf(err, errlen, "UD QP 0x%06x takes only a state, Q_Key and SQ PSN "
			 "(attribute mask 0x%x is for connected QPs)", qp->qpn, mask & ~UD_ATTRS);
		return -EINVAL;
	}
	if ((mask & IBV_QP_QKEY) && (a->qkey & QKEY_PRIVILEGED) && qp->owner->uid != 0) {
		snprintf(err, errlen, "Q_Key 0x%08x is privileged (top bit set): root only",
			 a->qkey);
		return -EPERM;
	}
	return 0;
}

static const uint8_t unspecified[16];

/* The peer's GID is an address of the source GID's family, and not 0. */
static int check_av(const struct dev *dev, const struct proto_qp_attr *a, char *err,
		    size_t errlen)
{
	bool v4 = addr_gid_is_ipv4(a->dest_gid);

	if (a->sgid_index >= dev->port.ngids) {
		snprintf(err, errlen, "source GID index %u: the port has %u GIDs", a->sgid_index,
			 dev->port.ngids);
		return -1;
	}
	if (!memcmp(a->dest_gid, unspecified, 16) || (v4 && !memcmp(a->dest_gid + 12, unspecified, 4))) {
		snprintf(err, errlen, "the peer's GID is an unspecified address");
		return -1;
	}
	if (v4 != !dev->port.gids[a->sgid_index].ipv6) {
		snprintf(err, errlen, "the peer's GID is %s but source GID %u is %s: RoCEv2 "
			 "does not cross IP versions", v4 ? "IPv4" : "IPv6", a->sgid_index,
			 v4 ? "IPv6" : "IPv4");
		return -1;
	}
	return 0;
}

static int check_uc_attrs(const struct qp *qp, enum ibv_qp_state to, uint32_t mask,
			  char *err, size_t errlen)
{
	uint32_t extra = mask & ~uc_attrs(qp->state, to);

	if (extra) {
		snprintf(err, errlen, "UC QP 0x%06x %s -> %s does not take attribute mask 0x%x "
			 "(UC has no READs, atomics, ACKs or retries)", qp->qpn,
			 proto_qp_state_name(qp->state), proto_qp_state_name(to), extra);
		return -EINVAL;
	}
	return 0;
}

static int check_attrs(struct qp *qp, enum ibv_qp_state to, uint32_t mask,
		       const struct proto_qp_attr *a, char *err, size_t errlen)
{
	if (qp->type == IBV_QPT_UD)
		return check_ud_attrs(qp, mask, a, err, errlen);
	if (qp->type == IBV_QPT_UC && check_uc_attrs(qp, to, mask, err, errlen))
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > qp->dev->port.active_mtu)) {
		snprintf(err, errlen, "path MTU %u bytes exceeds the port's active MTU %u "
			 "(raise the interface MTU or lower the QP's path_mtu)",
			 net_mtu_bytes(a->path_mtu), net_mtu_bytes(qp->dev->port.active_mtu));
		return -EINVAL;
	}
	if ((mask & IBV_QP_DEST_QPN) && (a->dest_qpn == 0 || a->dest_qpn > 0xffffff)) {
		snprintf(err, errlen, "destination QPN 0x%x is not a valid QPN", a->dest_qpn);
		return -EINVAL;
	}
	if ((mask & IBV_QP_AV) && check_av(qp->dev, a, err, errlen))
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->access & ~(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE |
			   PROTO_ACCESS_FLUSH_GLOBAL | PROTO_ACCESS_FLUSH_PERSISTENT))) {
		snprintf(err, errlen, "unknown QP access flags 0x%x", a->access);
		return -EINVAL;
	}
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) {
		snprintf(err, errlen, "timeout %u is above 31", a->timeout);
		return -EINVAL;
	}
	if (((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > QP_MAX_RD_ATOMIC) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > QP_MAX_RD_ATOMIC)) {
		snprintf(err, errlen, "max_rd_atomic and max_dest_rd_atomic go up to %d",
			 QP_MAX_RD_ATOMIC);
		return -EINVAL;
	}
	if (((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) ||
	    ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)) {
		snprintf(err, errlen, "retry counts go from 0 to 7 (7 = retry forever)");
		return -EINVAL;
	}
	return 0;
}

static void apply_attrs(struct qp *qp, uint32_t mask, const struct proto_qp_attr *a)
{
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.access = a->access;
	if (mask & IBV_QP_PATH_MTU) {
		qp->attr.path_mtu = a->path_mtu;
		qp->pmtu = net_mtu_bytes(a->path_mtu);
	}
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qpn = a->dest_qpn;
	if (mask & IBV_QP_AV) {
		memcpy(qp->attr.dest_gid, a->dest_gid, 16);
		qp->attr.sgid_index = a->sgid_index;
		qp->attr.traffic_class = a->traffic_class;
		qp->attr.hop_limit = a->hop_limit;
		qp->attr.flow_label = a->flow_label & 0xfffff;
	}
	if (mask & IBV_QP_RQ_PSN) {
		qp->attr.rq_psn = a->rq_psn & WIRE_PSN_MASK;
		qp->resp.rcv_psn = qp->attr.rq_psn;
	}
	if (mask & IBV_QP_SQ_PSN) {
		qp->attr.sq_psn = a->sq_psn & WIRE_PSN_MASK;
		qp->req.snd_nxt = qp->req.snd_una = qp->req.snd_max = qp->attr.sq_psn;
		rto_reset(qp);
	}
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->attr.rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = a->qkey;
	/* rounded up to a power of two, as rxe does */
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = (uint8_t)(a->max_rd_atomic ?
						   pow2_at_least(a->max_rd_atomic) : 0);
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = (uint8_t)(a->max_dest_rd_atomic ?
							pow2_at_least(a->max_dest_rd_atomic) : 0);
}

/* The peer's MAC address into qp->peer_mac, before anything of the QP changes: a request
 * that waits for it (-EINPROGRESS) is handled again from the start. */
static int resolve_peer(struct qp *qp, const uint8_t gid[16], char *err, size_t errlen)
{
	char ip[INET6_ADDRSTRLEN];
	int rc = neigh_resolve(&qp->owner->neigh, gid, qp->peer_mac);

	if (rc == -EHOSTUNREACH)
		snprintf(err, errlen, "no neighbour %s on %s: is the peer up and on this link?",
			 addr_str(gid, ip, sizeof(ip)), qp->dev->port.ifname);
	return rc;
}

void qp_path_between(struct wire_path *p, const struct dev *dev, const uint8_t *sgid,
		     const uint8_t *dgid, const uint8_t mac[6])
{
	memcpy(p->src_mac, dev->port.mac, 6);
	memcpy(p->dst_mac, mac, 6);
	p->ipv6 = !addr_gid_is_ipv4(dgid);
	memcpy(&p->src_ip, sgid + 12, 4);
	memcpy(&p->dst_ip, dgid + 12, 4);
	memcpy(p->src_ip6, sgid, 16);
	memcpy(p->dst_ip6, dgid, 16);
	p->ttl = dev->port.hop_limit[p->ipv6];
}

/* As rxe: the AV's traffic class is the TOS, and the flow label only picks the UDP source
 * port (rxe sends IPv6 flow label 0). */
static void connect_path(struct qp *qp)
{
	struct dev *dev = qp->dev;

	qp_path_between(&qp->path, dev, dev->port.gids[qp->attr.sgid_index].raw,
			qp->attr.dest_gid, qp->peer_mac);
	qp->path.src_port = qp_flow_port(qp->attr.flow_label, qp->qpn, qp->attr.dest_qpn);
	qp->path.tos = cc_tos(dev, qp->attr.traffic_class);
}

/* RESET: all state forgotten, and whatever sits in the rings is discarded unanswered. */
void qp_reset(struct qp *qp)
{
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_stop(qp->dev->loop, &qp->rnr_timer);
	qp->req.send_pkt = 0;
	qp->sq_ctl->cons = __atomic_load_n(&qp->sq_ctl->prod, __ATOMIC_ACQUIRE);
	qp->req.fetch_idx = qp->req.send_idx = qp->comp.idx = qp->sq_ctl->cons;
	qp->resp.rq_cons = qp->rq_ctl->cons = __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_ACQUIRE);
	qp->resp.in_msg = qp->resp.nak_seq_sent = qp->req.rnr_wait = qp->comp.resend_started = false;
	qp->resp.uc_dropping = false;
	rq_forget(qp);
	rq_lazy(qp, true);
	memset(qp->resp.rd_res, 0, sizeof(qp->resp.rd_res));
	qp->resp.rd_res_next = qp->req.rd_outstanding = qp->req.since_ackreq = 0;
	qp->req.window = QP_MAX_INFLIGHT;
	qp->resp.msn = 0;
	qp->resp.last_refusal = PROTO_REFUSED_none;
	qp->comp.last_failure = PROTO_FAILED_none;
	rto_reset(qp);
	cc_qp_reset(qp);
	sched_forget(qp);
	reply_clear(qp);
	memset(&qp->attr, 0, sizeof(qp->attr));
	/* only RC waits for answers: a UC or UD QP reports no timeout or retries it lacks */
	if (qp->type == IBV_QPT_RC) {
		qp->attr.timeout = DEFAULT_TIMEOUT;
		qp->attr.retry_cnt = qp->attr.rnr_retry = DEFAULT_RETRY;
	}
}

int qp_modify(struct qp *qp, uint32_t mask, const struct proto_qp_attr *a, char *err,
	      size_t errlen)
{
	enum ibv_qp_state to = (mask & IBV_QP_STATE) ? a->state : qp->state;
	uint32_t rts_modifiable = qp->type == IBV_QPT_UD ? RTS_MODIFIABLE_UD
				  : qp->type == IBV_QPT_UC ? RTS_MODIFIABLE_UC : RTS_MODIFIABLE;
	uint32_t missing;
	bool connecting;
	int rc;

	if (to > IBV_QPS_ERR || !transition_ok(qp->state, to)) {
		snprintf(err, errlen, "QP 0x%06x cannot go from %s to %s", qp->qpn,
			 proto_qp_state_name(qp->state), proto_qp_state_name(to));
		return -EINVAL;
	}
	if (qp->state == IBV_QPS_RTS && to == IBV_QPS_RTS && (mask & ~rts_modifiable)) {
		snprintf(err, errlen, "QP 0x%06x in RTS can change only its %s (mask 0x%x)", qp->qpn,
			 qp->type == IBV_QPT_UD ? "Q_Key"
			 : qp->type == IBV_QPT_UC ? "access flags" : "access flags and min_rnr_timer",
			 mask & ~rts_modifiable);
		return -EINVAL;
	}
	missing = required_mask(qp, to) & ~mask;
	if (missing) {
		snprintf(err, errlen, "QP 0x%06x %s -> %s needs attribute mask 0x%x too", qp->qpn,
			 proto_qp_state_name(qp->state), proto_qp_state_name(to), missing);
		return -EINVAL;
	}
	rc = check_attrs(qp, to, mask, a, err, errlen);
	if (rc)
		return rc;
	if (to == IBV_QPS_RESET) {
		qp_reset(qp);
		qp->state = to;
		return 0;
	}
	if (to == IBV_QPS_ERR) {
		qp_to_error(qp);
		return 0;
	}
	connecting = qp->type != IBV_QPT_UD && to == IBV_QPS_RTR && qp->state != IBV_QPS_RTR;
	if (connecting && (rc = resolve_peer(qp, a->dest_gid, err, errlen)))
		return rc;
	apply_attrs(qp, mask, a);
	if (qp->type == IBV_QPT_UD)
		qp->pmtu = net_mtu_bytes(qp->dev->port.active_mtu);
	if (connecting)
		connect_path(qp);
	if (to == IBV_QPS_RTS && qp->state == IBV_QPS_RTR) {
		qp->comp.retry_left = qp->attr.retry_cnt;
		qp->comp.rnr_left = qp->attr.rnr_retry;
	}
	qp->state = to;
	sched_account(qp);
	if (to == IBV_QPS_RTS)
		req_pump(qp);
	return 0;
}

/* Verbs semantics: everything outstanding completes with IBV_WC_WR_FLUSH_ERR, and so does
 * everything posted later. */
void qp_to_error(struct qp *qp)
{
	ev_timer_stop(qp->dev->loop, &qp->retry_timer);
	ev_timer_stop(qp->dev->loop, &qp->rnr_timer);
	ev_timer_stop(qp->dev->loop, &qp->req.pace_timer);
	sched_forget(qp);
	reply_clear(qp);
	qp->state = IBV_QPS_ERR;
	rq_lazy(qp, false);
	req_flush(qp);
	rq_flush(qp);
}

/* ---- creation and destruction: the QPN table, the rings, the doorbell ---- */

static int qp_alloc_qpn(struct dev *dev, struct qp *qp)
{
	for (uint32_t tries = 0; tries < DEV_MAX_QP; tries++) {
		uint32_t slot = dev->tp.qp_cursor++ % DEV_MAX_QP;

		if (slot < 2 || dev->tp.qps[slot])
			continue;
		if (slot == 2)
			dev->tp.qp_generation++;
		qp->qpn = ((dev->tp.qp_generation & 0x3ff) << DEV_QP_SLOT_BITS) | slot;
		dev->tp.qps[slot] = qp;
		dev->tp.qp_count++;
		return 0;
	}
	return -ENOSPC;
}

struct qp *qp_find(struct dev *dev, uint32_t qpn)
{
	struct qp *qp = dev->tp.qps[qpn & (DEV_MAX_QP - 1)];

	return qp && qp->qpn == qpn ? qp : NULL;
}

static int qp_map_rings(struct qp *qp, const struct proto_create_qp *req)
{
	size_t sq_bytes, rq_bytes;
	struct ring_mem m;
	int err;

	uint32_t room = proto_swqe_room(req->max_send_sge, req->max_inline_data);

	qp->sq_entries = pow2_at_least(req->max_send_wr ? req->max_send_wr : 1);
	qp->rq_entries = pow2_at_least(req->max_recv_wr ? req->max_recv_wr : 1);
	qp->max_send_sge = room / sizeof(struct proto_sge);
	qp->max_inline = room;
	qp->max_recv_sge = req->max_recv_sge;
	qp->sq_stride = proto_swqe_stride(room);
	qp->rq_stride = proto_rwqe_stride(qp->max_recv_sge);
	sq_bytes = proto_ring_bytes(qp->sq_entries, qp->sq_stride);
	rq_bytes = proto_ring_bytes(qp->rq_entries, qp->rq_stride);
	qp->ring_bytes = sq_bytes + rq_bytes;
	qp->req.wqes = calloc(qp->sq_entries, sizeof(*qp->req.wqes));
	qp->req.sges = calloc((size_t)qp->sq_entries * (qp->max_send_sge ? qp->max_send_sge : 1),
			      sizeof(*qp->req.sges));
	if (!qp->req.wqes || !qp->req.sges)
		return -ENOMEM;
	err = ring_take(qp->owner, RING_QP, qp->ring_bytes, &m);
	if (err)
		return err;
	qp->ring_map = m.map;
	qp->memfd = m.memfd;
	qp->doorbell_fd = m.ends[0];
	qp->client_end = m.ends[1];
	qp->sq_ctl = qp->ring_map;
	qp->sq = (uint8_t *)(qp->sq_ctl + 1);
	qp->rq_ctl = (struct proto_ring_ctl *)((char *)qp->ring_map + sq_bytes);
	qp->rq = (uint8_t *)(qp->rq_ctl + 1);
	return 0;
}

static void qp_free(struct qp *qp)
{
	if (qp->ring_map)
		ring_give(qp->owner, RING_QP, &(struct ring_mem){ .map = qp->ring_map,
				.bytes = qp->ring_bytes, .memfd = qp->memfd,
				.ends = { qp->doorbell_fd, qp->client_end } });
	free(qp->req.wqes);
	free(qp->req.sges);
	reply_free(qp);
	free(qp);
}

struct qp *qp_create(struct owner *o, const struct proto_create_qp *req, int fds[2],
		     int *err)
{
	struct qp *qp = calloc(1, sizeof(*qp));

	if (!qp) {
		*err = -ENOMEM;
		return NULL;
	}
	qp->dev = o->dev;
	qp->owner = o;
	qp->type = (enum ibv_qp_type)req->qp_type;

	*err = qp_map_rings(qp, req);
	if (!*err)
		*err = qp_alloc_qpn(o->dev, qp);
	if (*err) {
		qp_free(qp);
		return NULL;
	}
	qp->state = IBV_QPS_RESET;
	qp->sq_sig_all = req->sq_sig_all;
	ev_io_init(&qp->doorbell, req_doorbell_cb, qp->doorbell_fd, EV_READ);
	qp->doorbell.data = qp;
	ev_io_start(o->dev->loop, &qp->doorbell);
	ev_init(&qp->retry_timer, comp_timer_cb);
	qp->retry_timer.data = qp;
	ev_init(&qp->rnr_timer, req_rnr_cb);
	qp->rnr_timer.data = qp;
	ev_init(&qp->req.pace_timer, cc_pace_cb);
	qp->req.pace_timer.data = qp;
	qp_reset(qp);
	fds[0] = qp->memfd;
	fds[1] = qp->client_end;
	return qp;
}

int qp_destroy(struct qp *qp)
{
	struct dev *dev = qp->dev;

	ev_io_stop(dev->loop, &qp->doorbell);
	poll_forget(qp);
	ev_timer_stop(dev->loop, &qp->retry_timer);
	ev_timer_stop(dev->loop, &qp->rnr_timer);
	ev_timer_stop(dev->loop, &qp->req.pace_timer);
	sched_forget(qp);
	resp_cancel_ack(qp);
	attach_detach_all(qp);
	/* the type 2 windows bound on it must not match a QP made later at its address */
	if (qp->pd)
		mr_mw_forget_qp(mr_pd_client(qp->pd), qp);
	dev->tp.qps[qp->qpn & (DEV_MAX_QP - 1)] = NULL;
	dev->tp.qp_count--;
	qp->send_cq->users--;
	qp->recv_cq->users--;
	if (qp->srq)
		qp->srq->users--;
	qp_free(qp);
	return 0;
}
