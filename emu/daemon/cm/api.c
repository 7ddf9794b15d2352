/* What a client asks of the CM: channels for its events, listeners, and the active and
 * passive sides' steps of a connection. Each checks that the object is the client's and in
 * a state for the step, as the kernel's cm.c refuses a step out of order (-EINVAL). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/cm/cm_int.h"

static struct cm_channel *find_channel(struct cm *cm, struct owner *own, uint32_t handle)
{
	struct cm_channel *ch;

	LIST_FOREACH(ch, &cm->channels, link)
		if (ch->handle == handle && ch->own == own)
			return ch;
	return NULL;
}

uint32_t cm_owner_channels(const struct cm *cm, const struct owner *own)
{
	const struct cm_channel *ch;
	uint32_t mine = 0;

	LIST_FOREACH(ch, &cm->channels, link)
		mine += ch->own == own;
	return mine;
}

int cm_channel_open(struct cm *cm, struct owner *own, int fd, uint32_t *handle)
{
	struct cm_channel *ch;

	if (cm->nchannels >= CM_MAX_CHANNELS || cm_owner_channels(cm, own) >= CM_MAX_OWNER_CHANNELS)
		return -EMFILE;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->cm = cm;
	ch->own = own;
	ch->fd = fd;
	STAILQ_INIT(&ch->backlog);
	ev_init(&ch->watcher, NULL);
	ch->handle = cm->next_handle++;
	LIST_INSERT_HEAD(&cm->channels, ch, link);
	cm->nchannels++;
	*handle = ch->handle;
	return 0;
}

/* Whatever used the channel tells nobody from now on. */
static void forget_channel(struct cm *cm, struct cm_channel *ch)
{
	struct cm_listener *l;
	struct cm_conn *c;

	LIST_FOREACH(l, &cm->listeners, link)
		if (l->ch == ch)
			l->ch = NULL;
	LIST_FOREACH(c, &cm->conns, link)
		if (c->ch == ch)
			c->ch = NULL;
	LIST_REMOVE(ch, link);
	cm->nchannels--;
	cm_channel_free(ch);
}

int cm_channel_close(struct cm *cm, struct owner *own, uint32_t handle)
{
	struct cm_channel *ch = find_channel(cm, own, handle);

	if (!ch)
		return -EINVAL;
	forget_channel(cm, ch);
	return 0;
}

static const uint8_t any_gid[16];

static bool gids_overlap(const struct cm_listener *l, const struct proto_cm_listen *m)
{
	bool l_any = !memcmp(l->gid, any_gid, 16), m_any = !memcmp(m->gid, any_gid, 16);

	if (!l_any && !m_any)
		return !memcmp(l->gid, m->gid, 16);
	if (l_any && m_any)
		return !l->any_family || !m->any_family || l->any_family == m->any_family;
	/* one listens on every address of a family the other's address may be of */
	{
		const uint8_t *gid = l_any ? m->gid : l->gid;
		uint8_t fam = l_any ? l->any_family : m->any_family;

		return !fam || fam == (addr_gid_is_ipv4(gid) ? 4 : 6);
	}
}

static struct cm_listener *find_own_listener(struct cm *cm, const struct owner *own,
					      uint32_t handle)
{
	struct cm_listener *l;

	LIST_FOREACH(l, &cm->listeners, link)
		if (l->handle == handle && l->own == own)
			return l;
	return NULL;
}

/* Who else holds or listens on the service ID at an address the request's overlaps, as
 * the kernel's rdma_cm checks a port at a bind and at a listen: holds that both asked for
 * REUSEADDR share it; a listener shares it with none. l: the request's own. */
static struct cm_listener *port_taken(struct cm *cm, const struct cm_listener *l,
				      const struct proto_cm_listen *m)
{
	bool reuse = m->bind_only && (m->hold_flags & PROTO_CM_HOLD_REUSEADDR);
	struct cm_listener *other;

	LIST_FOREACH(other, &cm->listeners, link)
		if (other != l && other->service_id == m->service_id &&
		    !(reuse && other->reuseaddr) && gids_overlap(other, m))
			return other;
	return NULL;
}

/* As the kernel's rdma_cm: a wildcard on either side is "not available", the same address
 * "in use"; a port the library picked is "in use", its sign to try the next. */
static int taken_errno(const struct proto_cm_listen *m, const struct cm_listener *other)
{
	bool wildcard = !memcmp(m->gid, any_gid, 16) || !memcmp(other->gid, any_gid, 16);

	return wildcard && !(m->hold_flags & PROTO_CM_HOLD_ANY_PORT) ? -EADDRNOTAVAIL :
								       -EADDRINUSE;
}

/* The listener a request makes, or the held service ID it turns into a listener. */
static int listener_for(struct cm *cm, struct owner *own, const struct proto_cm_listen *m,
			struct cm_listener **out, char *err, size_t errlen)
{
	struct cm_listener *l;
	unsigned mine = 0;

	if (m->bound) {
		*out = find_own_listener(cm, own, m->bound);
		if (*out && !(*out)->listening && !m->bind_only)
			return 0;
		snprintf(err, errlen, "no service ID held with handle %u", m->bound);
		return -EINVAL;
	}
	LIST_FOREACH(l, &cm->listeners, link)
		mine += l->own == own;
	if (mine >= CM_MAX_OWNER_LISTENERS) {
		snprintf(err, errlen, "this client holds %u service IDs, the most it may",
			 CM_MAX_OWNER_LISTENERS);
		return -ENOMEM;
	}
	*out = NULL;
	return 0;
}

int cm_listen(struct cm *cm, struct owner *own, const struct proto_cm_listen *m,
	      uint32_t *handle, char *err, size_t errlen)
{
	struct cm_channel *ch = find_channel(cm, own, m->channel);
	struct cm_listener *l, *other;
	int rc;

	if (!ch) {
		snprintf(err, errlen, "no CM channel %u", m->channel);
		return -EINVAL;
	}
	rc = listener_for(cm, own, m, &l, err, errlen);
	if (rc)
		return rc;
	if (memcmp(m->gid, any_gid, 16) && addr_find(&cm->dev->port, m->gid) < 0) {
		snprintf(err, errlen, "the address listened on is not this device's");
		return -EADDRNOTAVAIL;
	}
	other = port_taken(cm, l, m);
	if (other) {
		snprintf(err, errlen, "service ID 0x%llx is %s already",
			 (unsigned long long)m->service_id,
			 other->listening ? "listened on" : "held");
		return taken_errno(m, other);
	}
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		l->own = own;
		l->handle = cm->next_handle++;
		LIST_INSERT_HEAD(&cm->listeners, l, link);
	}
	l->ch = ch;
	l->cookie = m->cookie;
	l->service_id = m->service_id;
	memcpy(l->gid, m->gid, 16);
	l->any_family = m->any_family;
	l->backlog = m->backlog && m->backlog < CM_MAX_LISTEN_BACKLOG ? m->backlog :
		     CM_MAX_LISTEN_BACKLOG;
	l->listening = !m->bind_only;
	l->reuseaddr = m->bind_only && (m->hold_flags & PROTO_CM_HOLD_REUSEADDR);
	*handle = l->handle;
	if (l->listening)
		cm_listening_now(cm, l->service_id);
	return 0;
}

static void free_listener(struct cm *cm, struct cm_listener *l)
{
	struct cm_conn *c, *next;

	/* connection requests it was told of and nobody took: refused, as the kernel's
	 * listener destroys them */
	for (c = LIST_FIRST(&cm->conns); c; c = next) {
		next = LIST_NEXT(c, link);
		if (c->listener == l && !c->own && c->state == CM_SIDR_REQ_RCVD)
			conn_sidr_reply(c, CM_SIDR_REJECT, 0, NULL, 0);
		else if (c->listener == l && !c->own)
			conn_reject(c, CM_REJ_CONSUMER_DEFINED, CM_MSG_REQ, NULL, 0);
		else if (c->listener == l)
			conn_release_listener(c);
	}
	LIST_REMOVE(l, link);
	free(l);
}

int cm_unlisten(struct cm *cm, struct owner *own, uint32_t handle)
{
	struct cm_listener *l = find_own_listener(cm, own, handle);

	if (!l)
		return -EINVAL;
	free_listener(cm, l);
	return 0;
}

/* The connection, if it is the client's; a connection in REQ_RCVD is the client's whose
 * listener was told of it. */
static struct cm_conn *owned(struct cm *cm, struct owner *own, uint32_t id)
{
	struct cm_conn *c = conn_find(cm, id);

	if (!c)
		return NULL;
	if (c->own == own)
		return c;
	if (!c->own && (c->state == CM_REQ_RCVD || c->state == CM_SIDR_REQ_RCVD) && c->listener &&
	    c->listener->own == own)
		return c;
	return NULL;
}

/* The QP number is one of the client's QPs, of the type the port space connects (UD for
 * UDP's SIDR, RC otherwise). */
static int check_qpn(struct cm *cm, struct owner *own, uint32_t qpn, bool ud, char *err,
		     size_t errlen)
{
	struct qp *qp = qp_find(cm->dev, qpn);

	if (!qp || qp->owner != own) {
		snprintf(err, errlen, "QP 0x%x is not this client's", qpn);
		return -EINVAL;
	}
	if (qp->type != (ud ? IBV_QPT_UD : IBV_QPT_RC)) {
		snprintf(err, errlen, "QP 0x%x is not %s, as its port space wants", qpn,
			 ud ? "UD" : "RC");
		return -EINVAL;
	}
	return 0;
}

static bool is_udp_service(uint64_t service_id)
{
	return service_id >> 16 == CM_PS_UDP;
}

/* rdma_cm's SIDR_REQ for the UDP port space: the CMA header and the private data. */
static void send_sidr_req(struct cm_conn *c, const struct proto_cm_connect *m)
{
	struct cm_cma_hdr cma = { .ip_version = addr_gid_is_ipv4(m->dgid) ? 4 : 6,
				  .src_port = m->src_port };
	struct cm_mad mad;

	conn_mad_hdr(&mad, CM_ATTR_SIDR_REQ, c->tid);
	mad.sidr_req.request_id = c->local_id;
	mad.sidr_req.pkey = CM_GSI_PKEY;
	mad.sidr_req.service_id = m->service_id;
	memcpy(cma.src_ip, cma.ip_version == 4 ? m->sgid + 12 : m->sgid, cma.ip_version == 4 ? 4 : 16);
	memcpy(cma.dst_ip, cma.ip_version == 4 ? m->dgid + 12 : m->dgid, cma.ip_version == 4 ? 4 : 16);
	cm_cma_build(&cma, mad.sidr_req.private_data);
	memcpy(mad.sidr_req.private_data + CM_CMA_HDR_LEN, m->private_data,
	       m->private_len < PROTO_CM_REQ_PRIVATE ? m->private_len : PROTO_CM_REQ_PRIVATE);
	c->state = CM_SIDR_REQ_SENT;
	conn_send(c, &mad, true);
}

static uint8_t clamp(uint8_t v, uint8_t max)
{
	return v < max ? v : max;
}

static void fill_req(struct cm_conn *c, const struct proto_cm_connect *m, struct cm_mad *mad)
{
	struct cm_req *req = &mad->req;
	struct cm_cma_hdr cma = { .ip_version = addr_gid_is_ipv4(m->dgid) ? 4 : 6,
				  .src_port = m->src_port };

	conn_mad_hdr(mad, CM_ATTR_REQ, c->tid);
	req->local_comm_id = c->local_id;
	req->service_id = m->service_id;
	req->local_ca_guid = c->cm->ca_guid;
	req->local_qpn = m->qpn;
	req->responder_resources = c->responder_resources;
	req->initiator_depth = c->initiator_depth;
	req->remote_cm_response_timeout = CM_RESPONSE_TIMEOUT;
	req->transport = CM_TRANSPORT_RC;
	req->flow_control = m->flow_control;
	req->starting_psn = c->local_psn;
	req->local_cm_response_timeout = CM_RESPONSE_TIMEOUT;
	req->retry_count = c->retry_count;
	req->pkey = CM_GSI_PKEY;
	req->path_mtu = c->mtu;
	req->rnr_retry_count = clamp(m->rnr_retry_count, 7);
	req->max_cm_retries = CM_MAX_CM_RETRIES;
	req->srq = m->srq;
	req->primary.local_lid = 0xffff;
	req->primary.remote_lid = 0xffff;
	memcpy(req->primary.local_gid, m->sgid, 16);
	memcpy(req->primary.remote_gid, m->dgid, 16);
	req->primary.traffic_class = m->tos;
	req->primary.hop_limit = c->cm->dev->port.hop_limit[cma.ip_version == 6];
	req->primary.local_ack_timeout = c->ack_timeout;
	req->primary.flow_label = c->flow_label;
	if (cma.ip_version == 4) {
		memcpy(cma.src_ip, m->sgid + 12, 4);
		memcpy(cma.dst_ip, m->dgid + 12, 4);
	} else {
		memcpy(cma.src_ip, m->sgid, 16);
		memcpy(cma.dst_ip, m->dgid, 16);
	}
	cm_cma_build(&cma, req->private_data);
	memcpy(req->private_data + CM_CMA_HDR_LEN, m->private_data,
	       m->private_len < PROTO_CM_REQ_PRIVATE ? m->private_len : PROTO_CM_REQ_PRIVATE);
}

/* The REQ's local ACK timeout for a path's packet lifetime, as the kernel's cm works it
 * out: one more than the lifetime, and at least about the CA's own ACK delay (a round
 * trip is two lifetimes plus that delay, each a power of two). */
static uint8_t ack_timeout_of(uint8_t life)
{
	unsigned t = life + 1u;

	if (t >= CM_CA_ACK_DELAY)
		t += CM_CA_ACK_DELAY >= t - 1;
	else
		t = CM_CA_ACK_DELAY + (t >= CM_CA_ACK_DELAY - 1u);
	return t > 31 ? 31 : (uint8_t)t;
}

int cm_connect(struct cm *cm, struct owner *own, const struct proto_cm_connect *m,
	       const uint8_t mac[6], uint32_t *conn, char *err, size_t errlen)
{
	struct cm_channel *ch = find_channel(cm, own, m->channel);
	uint8_t life = m->packet_life_time > 30 ? 30 : m->packet_life_time;
	struct cm_mad mad;
	struct cm_conn *c;
	int rc;

	if (!ch) {
		snprintf(err, errlen, "no CM channel %u", m->channel);
		return -EINVAL;
	}
	if (addr_find(&cm->dev->port, m->sgid) < 0 ||
	    addr_gid_is_ipv4(m->sgid) != addr_gid_is_ipv4(m->dgid)) {
		snprintf(err, errlen, "the source address is not this device's, or of another "
			 "IP version than the destination");
		return -EINVAL;
	}
	if (m->private_len > PROTO_CM_REQ_PRIVATE) {
		snprintf(err, errlen, "%u bytes of private data: a REQ carries %u",
			 m->private_len, PROTO_CM_REQ_PRIVATE);
		return -EINVAL;
	}
	rc = check_qpn(cm, own, m->qpn, is_udp_service(m->service_id), err, errlen);
	if (rc)
		return rc;
	if (cm_owner_full(cm, own)) {
		snprintf(err, errlen, "this client holds %u connections, the most it may",
			 CM_MAX_OWNER_CONNS);
		return -ENOMEM;
	}
	c = conn_new(cm);
	if (!c) {
		snprintf(err, errlen, "the CM holds %u connections, its most", CM_MAX_CONNS);
		return -ENOMEM;
	}
	c->own = own;
	conn_charge(c, own);
	c->ch = ch;
	c->cookie = m->cookie;
	c->state = CM_REQ_SENT;
	c->tid = cm_new_tid(cm, c->local_id);
	c->service_id = m->service_id;
	c->local_qpn = m->qpn;
	memcpy(c->local_gid, m->sgid, 16);
	memcpy(c->peer_gid, m->dgid, 16);
	memcpy(c->peer_mac, mac, 6);
	c->local_port = m->src_port;
	c->peer_port = (uint16_t)m->service_id;
	c->mtu = (uint8_t)cm->dev->port.active_mtu;
	c->tos = m->tos;
	c->ack_timeout = ack_timeout_of(life);
	c->flow_label = m->flow_label & 0xfffff;
	c->responder_resources = clamp(m->responder_resources, QP_MAX_RD_ATOMIC);
	c->initiator_depth = clamp(m->initiator_depth, QP_MAX_RD_ATOMIC);
	c->retry_count = clamp(m->retry_count, 7);
	c->rnr_retry_count = clamp(m->rnr_retry_count, 7);
	c->timeout = 2 * cm_time_s(life) + cm_time_s(CM_RESPONSE_TIMEOUT);
	*conn = c->local_id;
	if (is_udp_service(m->service_id)) {
		send_sidr_req(c, m);
		return 0;
	}
	fill_req(c, m, &mad);
	conn_send(c, &mad, true);
	return 0;
}

int cm_accept(struct cm *cm, struct owner *own, const struct proto_cm_accept *m, char *err,
	      size_t errlen)
{
	struct cm_conn *c = owned(cm, own, m->conn);
	struct cm_channel *ch = find_channel(cm, own, m->channel);
	struct cm_mad mad;
	int rc;

	if (c && c->state == CM_SIDR_REQ_RCVD && ch) {
		rc = check_qpn(cm, own, m->qpn, true, err, errlen);
		if (!rc)
			conn_sidr_reply(c, CM_SIDR_SUCCESS, m->qpn, m->private_data, m->private_len);
		return rc;
	}
	if (!c || c->state != CM_REQ_RCVD || !ch) {
		snprintf(err, errlen, "no connection request %u%s", m->conn,
			 ch ? "" : " or no such channel");
		return -EINVAL;
	}
	if (m->private_len > CM_REP_PRIVATE_LEN)
		return -EINVAL;
	rc = check_qpn(cm, own, m->qpn, false, err, errlen);
	if (rc)
		return rc;
	conn_release_listener(c);
	c->own = own;
	c->ch = ch;
	c->cookie = m->cookie;
	c->local_qpn = m->qpn;
	c->responder_resources = clamp(m->responder_resources, QP_MAX_RD_ATOMIC);
	c->initiator_depth = clamp(m->initiator_depth, QP_MAX_RD_ATOMIC);
	conn_mad_hdr(&mad, CM_ATTR_REP, c->tid);
	mad.rep.local_comm_id = c->local_id;
	mad.rep.remote_comm_id = c->remote_id;
	mad.rep.local_qpn = m->qpn;
	mad.rep.starting_psn = c->local_psn;
	mad.rep.responder_resources = c->responder_resources;
	mad.rep.initiator_depth = c->initiator_depth;
	mad.rep.target_ack_delay = CM_CA_ACK_DELAY;
	mad.rep.flow_control = m->flow_control;
	mad.rep.rnr_retry_count = clamp(m->rnr_retry_count, 7);
	mad.rep.srq = m->srq;
	mad.rep.local_ca_guid = cm->ca_guid;
	memcpy(mad.rep.private_data, m->private_data, m->private_len);
	c->state = CM_REP_SENT;
	conn_send(c, &mad, true);
	return 0;
}

int cm_reject(struct cm *cm, struct owner *own, const struct proto_cm_reject *m, char *err,
	      size_t errlen)
{
	struct cm_conn *c = owned(cm, own, m->conn);

	if (c && c->state == CM_SIDR_REQ_RCVD && m->private_len <= CM_REJ_PRIVATE_LEN) {
		conn_sidr_reply(c, CM_SIDR_REJECT, 0, m->private_data, m->private_len);
		return 0;
	}
	if (!c || (c->state != CM_REQ_RCVD && c->state != CM_REP_RCVD)) {
		snprintf(err, errlen, "no connection %u to reject", m->conn);
		return -EINVAL;
	}
	if (m->private_len > CM_REJ_PRIVATE_LEN)
		return -EINVAL;
	conn_reject(c, CM_REJ_CONSUMER_DEFINED,
		    c->state == CM_REQ_RCVD ? CM_MSG_REQ : CM_MSG_REP, m->private_data,
		    m->private_len);
	return 0;
}

int cm_establish(struct cm *cm, struct owner *own, uint32_t id, char *err, size_t errlen)
{
	struct cm_conn *c = owned(cm, own, id);
	struct cm_mad mad;

	if (!c || c->state != CM_REP_RCVD) {
		snprintf(err, errlen, "connection %u has no REP to answer", id);
		return -EINVAL;
	}
	conn_mad_hdr(&mad, CM_ATTR_RTU, c->tid);
	mad.rtu.local_comm_id = c->local_id;
	mad.rtu.remote_comm_id = c->remote_id;
	c->state = CM_ESTABLISHED;
	cm->dev->cnt.cm_established++;
	conn_send(c, &mad, false);
	return 0;
}

int cm_disconnect(struct cm *cm, struct owner *own, uint32_t id, char *err, size_t errlen)
{
	struct cm_conn *c = owned(cm, own, id);

	if (!c) {
		snprintf(err, errlen, "no connection %u", id);
		return -EINVAL;
	}
	switch (c->state) {
	case CM_REP_SENT:
	case CM_ESTABLISHED:
		conn_send_dreq(c);
		return 0;
	case CM_DREQ_RCVD:
		conn_send_drep(c);
		conn_enter_timewait(c);
		return 0;
	case CM_REP_RCVD:
		conn_reject(c, CM_REJ_CONSUMER_DEFINED, CM_MSG_REP, NULL, 0);
		return 0;
	default:
		/* as the kernel's rdma_disconnect: a DREQ needs ESTABLISHED and a DREP a DREQ
		 * received; in any other state nothing is sent, and that is no error */
		return 0;
	}
}

/* The client forgets the connection; the CM ends it as the kernel's cm_destroy_id. */
static void end_conn(struct cm_conn *c)
{
	c->own = NULL;
	c->ch = NULL;
	switch (c->state) {
	case CM_REQ_SENT:
		/* as the kernel's cm_destroy_id: TIMEOUT, our CA GUID as the ARI, the message
		 * "other" (the REJ names no comm ID of the peer's, which the REQ never got) */
		conn_reject(c, CM_REJ_TIMEOUT, CM_MSG_OTHER, NULL, 0);
		return;
	case CM_REQ_RCVD:
		conn_reject(c, CM_REJ_CONSUMER_DEFINED, CM_MSG_REQ, NULL, 0);
		return;
	case CM_REP_SENT:
	case CM_REP_RCVD:
		conn_reject(c, CM_REJ_CONSUMER_DEFINED, CM_MSG_REP, NULL, 0);
		return;
	case CM_ESTABLISHED:
		conn_send_dreq(c);
		return;
	case CM_DREQ_RCVD:
		conn_send_drep(c);
		conn_enter_timewait(c);
		return;
	case CM_TIMEWAIT:
		if (ev_is_active(&c->timer))
			conn_let_go(c);
		else
			conn_free(c);
		return;
	case CM_SIDR_REQ_RCVD:
		conn_sidr_reply(c, CM_SIDR_REJECT, 0, NULL, 0);
		return;
	case CM_SIDR_REQ_SENT:
		conn_free(c);
		return;
	default:
		return;
	}
}

int cm_destroy(struct cm *cm, struct owner *own, uint32_t id)
{
	struct cm_conn *c = owned(cm, own, id);

	if (!c)
		return -EINVAL;
	end_conn(c);
	return 0;
}

int cm_migrate(struct cm *cm, struct owner *own, const struct proto_cm_migrate *m)
{
	struct cm_channel *ch = find_channel(cm, own, m->channel);
	struct cm_listener *l;
	struct cm_conn *c;

	if (!ch)
		return -EINVAL;
	if (m->listener) {
		l = find_own_listener(cm, own, m->handle);
		if (!l)
			return -EINVAL;
		l->ch = ch;
		return 0;
	}
	c = owned(cm, own, m->handle);
	if (!c || !c->own)
		return -EINVAL;   /* a request not yet answered is its listener's */
	c->ch = ch;
	return 0;
}

void cm_owner_gone(struct cm *cm, struct owner *own)
{
	struct cm_listener *l, *lnext;
	struct cm_channel *ch, *chnext;
	struct cm_conn *c, *next;

	for (c = LIST_FIRST(&cm->conns); c; c = next) {
		next = LIST_NEXT(c, link);
		if (c->own == own)
			end_conn(c);
	}
	/* (what winds down after it counts against nobody: the owner is freed) */
	LIST_FOREACH(c, &cm->conns, link)
		if (c->charged == own)
			conn_charge(c, NULL);
	for (l = LIST_FIRST(&cm->listeners); l; l = lnext) {
		lnext = LIST_NEXT(l, link);
		if (l->own == own)
			free_listener(cm, l);
	}
	for (ch = LIST_FIRST(&cm->channels); ch; ch = chnext) {
		chnext = LIST_NEXT(ch, link);
		if (ch->own == own)
			forget_channel(cm, ch);
	}
}

uint32_t cm_list(const struct cm *cm, uint32_t start, struct proto_cm_entry *out,
		 uint32_t max, uint32_t *next)
{
	const struct cm_listener *l;
	const struct cm_conn *c;
	uint32_t i = 0, n = 0;

	*next = 0;
	LIST_FOREACH(l, &cm->listeners, link) {
		if (i++ < start)
			continue;
		if (n == max) {
			*next = i - 1;
			return n;
		}
		memset(&out[n], 0, sizeof(out[n]));
		out[n].pid = (uint32_t)l->own->pid;
		snprintf(out[n].state, sizeof(out[n].state), l->listening ? "LISTEN" : "BOUND");
		out[n].service_id = l->service_id;
		memcpy(out[n].peer_gid, l->gid, 16);
		n++;
	}
	LIST_FOREACH(c, &cm->conns, link) {
		if (i++ < start)
			continue;
		if (n == max) {
			*next = i - 1;
			return n;
		}
		memset(&out[n], 0, sizeof(out[n]));
		out[n].pid = c->own ? (uint32_t)c->own->pid :
			     c->listener ? (uint32_t)c->listener->own->pid : 0;
		snprintf(out[n].state, sizeof(out[n].state), "%s", cm_state_name(c->state));
		out[n].local_comm_id = c->local_id;
		out[n].remote_comm_id = c->remote_id;
		out[n].local_qpn = c->local_qpn;
		out[n].remote_qpn = c->remote_qpn;
		out[n].service_id = c->service_id;
		memcpy(out[n].peer_gid, c->peer_gid, 16);
		n++;
	}
	return n;
}
