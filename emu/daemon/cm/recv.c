/* What a peer's CM MAD does, state by state, as the kernel's cm.c answers: a REQ makes a
 * connection for a listener (REJ 8 when nobody listens), a REP or RTU moves one on, a REJ
 * or a DREQ ends one; a duplicate is answered again, a MAD for a comm ID unknown here or
 * in another state is counted and dropped. */
#include <errno.h>
#include <string.h>

#include "emu/daemon/cm/cm_int.h"
#include "emu/daemon/log.h"

/* A MAD for a connection counts only from the connection's peer: another host naming its
 * comm IDs (guessed, or seen) is counted and dropped. */
static bool from_peer(struct cm *cm, const struct cm_conn *c, const struct mad_src *src)
{
	if (!memcmp(c->peer_gid, src->src_gid, 16))
		return true;
	cm->dev->cnt.cm_drop_wrong_peer++;
	return false;
}

struct cm_listener *cm_find_service(struct cm *cm, uint64_t service_id, bool listening)
{
	struct cm_listener *l;

	LIST_FOREACH(l, &cm->listeners, link)
		if (l->listening == listening && l->service_id == service_id)
			return l;
	return NULL;
}

static const uint8_t zero_gid[16];

static bool listener_takes(const struct cm_listener *l, const struct cm_cma_hdr *cma,
			   const uint8_t dst_gid[16])
{
	if (memcmp(l->gid, zero_gid, 16))
		return !memcmp(l->gid, dst_gid, 16);
	return !l->any_family || l->any_family == cma->ip_version;
}

/* The listener for the REQ: the service ID's, on the address the REQ came to (or on any
 * of the CMA header's IP version). */
static struct cm_listener *find_listener(struct cm *cm, const struct cm_req *req,
					 const struct cm_cma_hdr *cma, const uint8_t dst_gid[16])
{
	struct cm_listener *l;

	LIST_FOREACH(l, &cm->listeners, link)
		if (l->listening && l->service_id == req->service_id &&
		    listener_takes(l, cma, dst_gid))
			return l;
	return NULL;
}

/* A REJ to a REQ that made no connection. */
static void reject_req(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
		       uint16_t reason)
{
	struct cm_mad mad;

	conn_mad_hdr(&mad, CM_ATTR_REJ, in->hdr.tid);
	mad.rej.remote_comm_id = in->req.local_comm_id;
	mad.rej.message_rejected = CM_MSG_REQ;
	mad.rej.reason = reason;
	cm_send_to(cm, src->dst_gid, src->src_gid, src->mac, &mad);
	cm->dev->cnt.cm_rej_sent++;
}

/* A peer may name up to 255 READs in flight; a QP here takes QP_MAX_RD_ATOMIC. */
static uint8_t rd_atomic(uint8_t v)
{
	return v < QP_MAX_RD_ATOMIC ? v : QP_MAX_RD_ATOMIC;
}

static void fill_from_req(struct cm_conn *c, const struct cm_mad *in, const struct mad_src *src,
			  const struct cm_cma_hdr *cma)
{
	const struct cm_req *req = &in->req;
	struct port *port = &c->cm->dev->port;

	c->state = CM_REQ_RCVD;
	c->tid = in->hdr.tid;
	conn_set_remote(c, req->local_comm_id);
	c->remote_ca_guid = req->local_ca_guid;
	c->service_id = req->service_id;
	c->remote_qpn = req->local_qpn;
	c->remote_psn = req->starting_psn;
	memcpy(c->local_gid, src->dst_gid, 16);
	memcpy(c->peer_gid, src->src_gid, 16);
	memcpy(c->peer_mac, src->mac, 6);
	c->local_port = (uint16_t)req->service_id;
	c->peer_port = cma->src_port;
	c->mtu = req->path_mtu < port->active_mtu ? req->path_mtu : (uint8_t)port->active_mtu;
	c->tos = req->primary.traffic_class;
	c->ack_timeout = req->primary.local_ack_timeout;
	c->flow_label = req->primary.flow_label & 0xfffff;
	/* from the passive side: the peer's depth is what we serve, and the reverse */
	c->responder_resources = rd_atomic(req->initiator_depth);
	c->initiator_depth = rd_atomic(req->responder_resources);
	c->retry_count = req->retry_count;
	c->rnr_retry_count = req->rnr_retry_count;
	c->peer_cm_timeout = cm_clamp_u8(req->local_cm_response_timeout, CM_MAX_PEER_TIMEOUT);
	c->max_retries = cm_clamp_u8(req->max_cm_retries, CM_MAX_CM_RETRIES);
	c->timeout = 2 * cm_time_s(CM_PACKET_LIFETIME) + cm_time_s(c->peer_cm_timeout);
}

static void tell_connect_request(struct cm_conn *c, const struct cm_listener *l,
				 const struct cm_req *req, const struct cm_cma_hdr *cma)
{
	struct proto_cm_event ev = { .event = CM_EV_CONNECT_REQUEST };

	ev.conn = c->local_id;
	ev.cookie = l->cookie;
	ev.peer_qpn = c->remote_qpn;
	ev.responder_resources = c->responder_resources;
	ev.initiator_depth = c->initiator_depth;
	ev.retry_count = req->retry_count;
	ev.rnr_retry_count = req->rnr_retry_count;
	ev.flow_control = req->flow_control;
	ev.srq = req->srq;
	ev.ip_version = cma->ip_version;
	ev.local_port = c->local_port;
	ev.peer_port = c->peer_port;
	addr_gid(ev.local_gid, cma->ip_version, cma->dst_ip);
	addr_gid(ev.peer_gid, cma->ip_version, cma->src_ip);
	ev.private_len = PROTO_CM_REQ_PRIVATE;
	memcpy(ev.private_data, req->private_data + CM_CMA_HDR_LEN, PROTO_CM_REQ_PRIVATE);
	conn_qp_attr(c, &ev.qp);
	cm_event_to(c->cm, l->ch, &ev);
}

/* A REQ already seen: the answer sent is sent again; one still to come is left to come. A
 * REQ for a connection in TimeWait is stale, as the kernel's cm answers it (REJ 10). */
static void duplicate_req(struct cm_conn *c, const struct cm_mad *in, const struct mad_src *src)
{
	struct cm_mad mad;

	c->cm->dev->cnt.cm_dup_req++;
	if (c->state == CM_REP_SENT && c->last_attr == CM_ATTR_REP) {
		conn_resend_last(c);
		return;
	}
	if (c->state != CM_TIMEWAIT)
		return;
	conn_mad_hdr(&mad, CM_ATTR_REJ, in->hdr.tid);
	mad.rej.local_comm_id = c->local_id;
	mad.rej.remote_comm_id = in->req.local_comm_id;
	mad.rej.message_rejected = CM_MSG_REQ;
	mad.rej.reason = CM_REJ_STALE_CONN;
	cm_send_to(c->cm, src->dst_gid, src->src_gid, src->mac, &mad);
	c->cm->dev->cnt.cm_rej_sent++;
}

static void on_req(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
		   bool may_wait)
{
	struct cm_cma_hdr cma;
	struct cm_listener *l;
	struct cm_conn *c = conn_find_remote(cm, in->req.local_comm_id, src->src_gid);
	bool service_known;

	if (c) {
		duplicate_req(c, in, src);
		return;
	}
	/* rdma_cm's listeners are found by service ID, then by the CMA header's address:
	 * a REQ without one, or to another address, is refused as the kernel's cma refuses
	 * it (its handler fails: consumer defined) */
	service_known = cm_find_service(cm, in->req.service_id, true) != NULL;
	l = NULL;
	if (cm_cma_parse(in->req.private_data, sizeof(in->req.private_data), &cma))
		l = find_listener(cm, &in->req, &cma, src->dst_gid);
	if (!l && !service_known && may_wait &&
	    cm_wait_for_listen(cm, in, src, in->req.service_id))
		return;
	if (!l) {
		cm->dev->cnt.cm_rej_no_listener++;
		reject_req(cm, in, src, service_known ? CM_REJ_CONSUMER_DEFINED :
			   CM_REJ_INVALID_SERVICE_ID);
		return;
	}
	if (in->req.transport != CM_TRANSPORT_RC) {
		reject_req(cm, in, src, CM_REJ_INVALID_TRANSPORT_TYPE);
		return;
	}
	/* the kernel's ucma refuses a REQ beyond the backlog from its handler: consumer
	 * defined */
	if (l->pending >= l->backlog) {
		cm->dev->cnt.cm_rej_backlog++;
		reject_req(cm, in, src, CM_REJ_CONSUMER_DEFINED);
		return;
	}
	if (cm_owner_full(cm, l->own)) {
		reject_req(cm, in, src, CM_REJ_NO_RESOURCES);
		return;
	}
	c = conn_new(cm);
	if (!c) {
		cm->dev->cnt.cm_rej_too_many++;
		reject_req(cm, in, src, CM_REJ_NO_RESOURCES);
		return;
	}
	fill_from_req(c, in, src, &cma);
	c->listener = l;
	conn_charge(c, l->own);
	l->pending++;
	tell_connect_request(c, l, &in->req, &cma);
}

static void on_rep(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	const struct cm_rep *rep = &in->rep;
	struct cm_conn *c = conn_find(cm, rep->remote_comm_id);
	struct proto_cm_event ev = { .event = CM_EV_CONNECT_RESPONSE };

	if (c && !from_peer(cm, c, src))
		return;
	if (c && (c->state == CM_REP_RCVD || c->state == CM_ESTABLISHED) &&
	    c->remote_id == rep->local_comm_id) {
		/* our RTU was lost: the REP comes again, and so does the RTU */
		cm->dev->cnt.cm_dup_rep++;
		if (c->state == CM_ESTABLISHED && c->last_attr == CM_ATTR_RTU)
			conn_resend_last(c);
		return;
	}
	if (!c || c->state != CM_REQ_SENT) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	conn_stop_timer(c);
	c->state = CM_REP_RCVD;
	conn_set_remote(c, rep->local_comm_id);
	c->remote_ca_guid = rep->local_ca_guid;
	c->remote_qpn = rep->local_qpn;
	c->remote_psn = rep->starting_psn;
	c->responder_resources = rd_atomic(rep->initiator_depth);
	c->initiator_depth = rd_atomic(rep->responder_resources);
	c->rnr_retry_count = rep->rnr_retry_count;
	ev.peer_qpn = c->remote_qpn;
	ev.responder_resources = c->responder_resources;
	ev.initiator_depth = c->initiator_depth;
	ev.rnr_retry_count = rep->rnr_retry_count;
	ev.flow_control = rep->flow_control;
	ev.srq = rep->srq;
	ev.private_len = CM_REP_PRIVATE_LEN;
	memcpy(ev.private_data, rep->private_data, CM_REP_PRIVATE_LEN);
	conn_qp_attr(c, &ev.qp);
	conn_event(c, &ev);
}

static void on_rtu(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	struct cm_conn *c = conn_find(cm, in->rtu.remote_comm_id);
	struct proto_cm_event ev = { .event = CM_EV_ESTABLISHED };

	if (c && !from_peer(cm, c, src))
		return;
	if (!c || c->state != CM_REP_SENT || c->remote_id != in->rtu.local_comm_id) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	conn_stop_timer(c);
	c->state = CM_ESTABLISHED;
	cm->dev->cnt.cm_established++;
	conn_event(c, &ev);
}

/* The connection a REJ is for, found as the kernel's cm_acquire_rejected_id finds it: a
 * TIMEOUT names the sender's comm ID and, in its ARI, its CA GUID (it may never have
 * learnt ours: a REQ it gave up on); a REJ of a REQ names our comm ID, and we know none
 * of the peer's yet; any other names both. */
static struct cm_conn *rejected_conn(struct cm *cm, const struct cm_rej *rej)
{
	struct cm_conn *c;

	if (rej->reason == CM_REJ_TIMEOUT) {
		uint64_t guid = 0;

		for (int i = 0; i < 8; i++)
			guid = guid << 8 | rej->ari[i];
		return rej->local_comm_id ? conn_find_remote_guid(cm, rej->local_comm_id, guid) :
					    NULL;
	}
	c = conn_find(cm, rej->remote_comm_id);
	if (!c)
		return NULL;
	if (rej->message_rejected == CM_MSG_REQ)
		return c->remote_id == 0 ? c : NULL;
	return c->remote_id == rej->local_comm_id ? c : NULL;
}

static void on_rej(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	const struct cm_rej *rej = &in->rej;
	struct cm_conn *c = rejected_conn(cm, rej);
	struct proto_cm_event ev = { .event = CM_EV_REJECTED };

	cm->dev->cnt.cm_rej_rcvd++;
	if (c && !from_peer(cm, c, src))
		return;
	if (!c) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	switch (c->state) {
	case CM_REQ_RCVD:
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
		ev.status = rej->reason;
		ev.private_len = CM_REJ_PRIVATE_LEN;
		memcpy(ev.private_data, rej->private_data, CM_REJ_PRIVATE_LEN);
		if (c->state == CM_REQ_RCVD && c->listener) {
			/* the peer gave up before we answered: the request the listener's client
			 * was told of is REJECTED, as the kernel's cma tells the new id (its
			 * answer then finds no request: EINVAL) */
			ev.conn = c->local_id;
			ev.cookie = c->listener->cookie;
			cm_event_to(cm, c->listener->ch, &ev);
		} else {
			conn_event(c, &ev);
		}
		conn_free(c);
		return;
	default:
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
}

static void on_mra(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	struct cm_conn *c = conn_find(cm, in->mra.remote_comm_id);

	if (c && !from_peer(cm, c, src))
		return;
	if (!c || !((c->state == CM_REQ_SENT && in->mra.message_mraed == CM_MSG_REQ) ||
		    (c->state == CM_REP_SENT && in->mra.message_mraed == CM_MSG_REP))) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	/* the peer needs longer: one wait of its service timeout (bounded) more for the MAD
	 * sent, as the kernel's cm takes one MRA per message (MRA_REQ_RCVD, MRA_REP_RCVD) and
	 * counts the others as duplicates: a peer repeating MRAs cannot keep it for ever */
	if (c->mra_rcvd) {
		cm->dev->cnt.cm_mra_ignored++;
		return;
	}
	c->mra_rcvd = true;
	conn_stop_timer(c);
	ev_timer_set(&c->timer,
		     c->timeout + cm_time_s(cm_clamp_u8(in->mra.service_timeout, CM_MAX_PEER_TIMEOUT)),
		     0);
	ev_timer_start(cm->dev->loop, &c->timer);
}

/* A DREQ for a connection unknown here is still answered (the kernel does), so a peer
 * whose DREP was lost stops asking. */
static void drep_unknown(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	struct cm_mad mad;

	conn_mad_hdr(&mad, CM_ATTR_DREP, in->hdr.tid);
	mad.drep.local_comm_id = in->dreq.remote_comm_id;
	mad.drep.remote_comm_id = in->dreq.local_comm_id;
	cm_send_to(cm, src->dst_gid, src->src_gid, src->mac, &mad);
}

static void on_dreq(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	struct cm_conn *c = conn_find(cm, in->dreq.remote_comm_id);
	struct proto_cm_event ev = { .event = CM_EV_DISCONNECTED };

	if (c && !from_peer(cm, c, src))
		return;
	if (!c || c->remote_id != in->dreq.local_comm_id) {
		cm->dev->cnt.cm_drop_stale++;
		drep_unknown(cm, in, src);
		return;
	}
	if (c->local_qpn != in->dreq.remote_qpn) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	c->tid = in->hdr.tid;
	switch (c->state) {
	case CM_REP_SENT:
	case CM_ESTABLISHED:
		if (c->state == CM_REP_SENT)
			cm->dev->cnt.cm_established++;
		conn_stop_timer(c);
		c->state = CM_DREQ_RCVD;
		conn_event(c, &ev);
		if (!c->own) {
			conn_send_drep(c);
			conn_enter_timewait(c);
		}
		return;
	case CM_DREQ_SENT:
		/* both ends disconnect at once: answer, and wait for our own answer */
		conn_send_drep(c);
		c->has_last = false;
		conn_enter_timewait(c);
		conn_event(c, &ev);
		return;
	case CM_TIMEWAIT:
		conn_repeat_drep(c);
		return;
	case CM_DREQ_RCVD:
		return;
	default:
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
}

static void on_drep(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	struct cm_conn *c = conn_find(cm, in->drep.remote_comm_id);
	struct proto_cm_event ev = { .event = CM_EV_DISCONNECTED };

	if (c && !from_peer(cm, c, src))
		return;
	if (!c || c->state != CM_DREQ_SENT || c->remote_id != in->drep.local_comm_id) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	conn_enter_timewait(c);
	conn_event(c, &ev);
}

/* A SIDR_REQ: a UD QP's number asked of the listener on the service ID (UDP port space).
 * Nobody listening is answered "unsupported", as the kernel's cm answers it. */
static void on_sidr_req(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
			bool may_wait)
{
	const struct cm_sidr_req *req = &in->sidr_req;
	struct proto_cm_event ev = { .event = CM_EV_CONNECT_REQUEST };
	struct cm_cma_hdr cma;
	struct cm_listener *l = NULL;
	struct cm_conn *c = conn_find_remote(cm, req->request_id, src->src_gid);
	struct cm_req as_req = { .service_id = req->service_id };

	if (c) {
		cm->dev->cnt.cm_dup_req++;   /* answered when its listener answers */
		return;
	}
	if (cm_cma_parse(req->private_data, sizeof(req->private_data), &cma))
		l = find_listener(cm, &as_req, &cma, src->dst_gid);
	if (!l && may_wait && !cm_find_service(cm, req->service_id, true) &&
	    cm_wait_for_listen(cm, in, src, req->service_id))
		return;
	if (l && l->pending < l->backlog && !cm_owner_full(cm, l->own)) {
		c = conn_new(cm);
		if (!c)
			cm->dev->cnt.cm_rej_too_many++;
	}
	if (!c) {
		struct cm_mad mad;

		if (!l)
			cm->dev->cnt.cm_rej_no_listener++;
		else if (l->pending >= l->backlog)
			cm->dev->cnt.cm_rej_backlog++;
		conn_mad_hdr(&mad, CM_ATTR_SIDR_REP, in->hdr.tid);
		mad.sidr_rep.request_id = req->request_id;
		mad.sidr_rep.status = l ? CM_SIDR_REJECT : CM_SIDR_UNSUPPORTED;
		mad.sidr_rep.service_id = req->service_id;
		cm_send_to(cm, src->dst_gid, src->src_gid, src->mac, &mad);
		cm->dev->cnt.cm_rej_sent++;
		return;
	}
	c->state = CM_SIDR_REQ_RCVD;
	conn_charge(c, l->own);
	c->tid = in->hdr.tid;
	conn_set_remote(c, req->request_id);
	c->service_id = req->service_id;
	memcpy(c->local_gid, src->dst_gid, 16);
	memcpy(c->peer_gid, src->src_gid, 16);
	memcpy(c->peer_mac, src->mac, 6);
	c->local_port = (uint16_t)req->service_id;
	c->peer_port = cma.src_port;
	c->mtu = (uint8_t)cm->dev->port.active_mtu;
	c->listener = l;
	l->pending++;
	ev.conn = c->local_id;
	ev.cookie = l->cookie;
	ev.ip_version = cma.ip_version;
	ev.local_port = c->local_port;
	ev.peer_port = c->peer_port;
	addr_gid(ev.local_gid, cma.ip_version, cma.dst_ip);
	addr_gid(ev.peer_gid, cma.ip_version, cma.src_ip);
	ev.private_len = CM_SIDR_REQ_PRIVATE_LEN - CM_CMA_HDR_LEN;
	memcpy(ev.private_data, req->private_data + CM_CMA_HDR_LEN, ev.private_len);
	conn_qp_attr(c, &ev.qp);
	ev.qp.qkey = CM_UDP_QKEY;
	cm_event_to(cm, l->ch, &ev);
}

/* The answer to our SIDR_REQ: the peer's UD QP (ESTABLISHED), or UNREACHABLE with the
 * status as the kernel's cma reports it. */
static void on_sidr_rep(struct cm *cm, const struct cm_mad *in, const struct mad_src *src)
{
	const struct cm_sidr_rep *rep = &in->sidr_rep;
	struct cm_conn *c = conn_find(cm, rep->request_id);
	struct proto_cm_event ev = { .event = CM_EV_ESTABLISHED };

	if (c && !from_peer(cm, c, src))
		return;
	if (!c || c->state != CM_SIDR_REQ_SENT) {
		cm->dev->cnt.cm_drop_stale++;
		return;
	}
	if (rep->status != CM_SIDR_SUCCESS) {
		ev.event = CM_EV_UNREACHABLE;
		ev.status = rep->status;
	} else if (rep->qkey != CM_UDP_QKEY) {
		ev.event = CM_EV_UNREACHABLE;
		ev.status = -EINVAL;
	}
	c->remote_qpn = rep->qpn;
	ev.peer_qpn = rep->qpn;
	ev.private_len = CM_SIDR_REP_PRIVATE_LEN;
	memcpy(ev.private_data, rep->private_data, CM_SIDR_REP_PRIVATE_LEN);
	conn_qp_attr(c, &ev.qp);
	ev.qp.qkey = rep->qkey;
	if (ev.event == CM_EV_ESTABLISHED)
		cm->dev->cnt.cm_established++;
	conn_event(c, &ev);
	conn_free(c);
}

void cm_take_request(struct cm *cm, const struct cm_mad *in, const struct mad_src *src,
		     bool may_wait)
{
	if (in->hdr.attr_id == CM_ATTR_REQ)
		on_req(cm, in, src, may_wait);
	else
		on_sidr_req(cm, in, src, may_wait);
}

void cm_on_frame(void *ctx, const uint8_t *frame, const struct wire_pkt *pkt)
{
	struct cm *cm = ctx;
	struct mad_src src;
	const uint8_t *bytes;
	struct cm_mad mad;
	enum cm_mad_status st = cm_mad_in_frame(frame, pkt, &bytes);

	if (st == CM_MAD_OK)
		st = cm_mad_parse(bytes, CM_MAD_LEN, &mad);
	if (st != CM_MAD_OK) {
		cm->dev->cnt.cm_drop_malformed++;
		log_limited_debug("CM: MAD dropped: %s", cm_mad_status_name(st));
		return;
	}
	cm->dev->cnt.cm_mads_rcvd++;
	addr_gid(src.src_gid, pkt->ip_version, pkt->src_ip);
	addr_gid(src.dst_gid, pkt->ip_version, pkt->dst_ip);
	memcpy(src.mac, frame + 6, 6);
	switch (mad.hdr.attr_id) {
	case CM_ATTR_REQ: cm_take_request(cm, &mad, &src, true); break;
	case CM_ATTR_REP: on_rep(cm, &mad, &src); break;
	case CM_ATTR_RTU: on_rtu(cm, &mad, &src); break;
	case CM_ATTR_REJ: on_rej(cm, &mad, &src); break;
	case CM_ATTR_MRA: on_mra(cm, &mad, &src); break;
	case CM_ATTR_DREQ: on_dreq(cm, &mad, &src); break;
	case CM_ATTR_DREP: on_drep(cm, &mad, &src); break;
	case CM_ATTR_SIDR_REQ: cm_take_request(cm, &mad, &src, true); break;
	case CM_ATTR_SIDR_REP: on_sidr_rep(cm, &mad, &src); break;
	default:
		cm->dev->cnt.cm_drop_malformed++;
		break;
	}
}
