/* The CM's objects and what leaves it: connections by comm ID, MADs out through the port
 * (kept and resent on the kernel's timeouts), the TimeWait, and events to the clients'
 * channel sockets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <unistd.h>

#include "emu/daemon/cm/cm_int.h"
#include "emu/daemon/log.h"

static const char *const state_names[CM_NSTATES] = {
	[CM_REQ_SENT] = "REQ_SENT", [CM_REQ_RCVD] = "REQ_RCVD", [CM_REP_SENT] = "REP_SENT",
	[CM_REP_RCVD] = "REP_RCVD", [CM_ESTABLISHED] = "ESTABLISHED",
	[CM_DREQ_SENT] = "DREQ_SENT", [CM_DREQ_RCVD] = "DREQ_RCVD", [CM_TIMEWAIT] = "TIMEWAIT",
	[CM_SIDR_REQ_SENT] = "SIDR_SENT", [CM_SIDR_REQ_RCVD] = "SIDR_RCVD",
};

const char *cm_state_name(enum cm_state s)
{
	return s < CM_NSTATES ? state_names[s] : "UNKNOWN";
}

static uint32_t random_u32(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v;
}

struct cm *cm_new(struct dev *dev)
{
	struct cm *cm = calloc(1, sizeof(*cm));
	const uint8_t *mac = dev->port.mac;
	uint8_t eui[8] = { mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5] };

	if (!cm)
		return NULL;
	cm->dev = dev;
	LIST_INIT(&cm->channels);
	LIST_INIT(&cm->listeners);
	LIST_INIT(&cm->conns);
	TAILQ_INIT(&cm->let_go);
	TAILQ_INIT(&cm->waiting);
	/* comm IDs run from a random point, scrambled, as the kernel's: a restarted daemon's
	 * IDs do not meet its old ones in a peer's TimeWait */
	cm->next_id = random_u32();
	cm->id_operand = random_u32();
	cm->tid_hi = random_u32() & 0xffff;
	cm->psn = random_u32() & WIRE_PSN_MASK;
	cm->next_handle = 1;
	/* the node GUID the verbs layer reports: the MAC as an EUI-64 */
	for (int i = 0; i < 8; i++)
		cm->ca_guid = cm->ca_guid << 8 | eui[i];
	return cm;
}

void cm_free(struct cm *cm)
{
	struct cm_channel *ch;

	if (!cm)
		return;
	cm_free_waiting(cm);
	while (!LIST_EMPTY(&cm->conns))
		conn_free(LIST_FIRST(&cm->conns));
	while (!LIST_EMPTY(&cm->listeners)) {
		struct cm_listener *l = LIST_FIRST(&cm->listeners);

		LIST_REMOVE(l, link);
		free(l);
	}
	while ((ch = LIST_FIRST(&cm->channels))) {
		LIST_REMOVE(ch, link);
		cm_channel_free(ch);
	}
	free(cm);
}

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);

struct cm_conn *conn_new(struct cm *cm)
{
	struct cm_conn *c;
	uint32_t id;

	/* TimeWait only guards against stray MADs for an ended connection: the oldest wait
	 * gives way to a new connection rather than refuse it (a client that connects faster
	 * than TimeWait ends would be refused; the kernel's cm has no bound here) */
	if (cm->nconns >= CM_MAX_CONNS && !TAILQ_EMPTY(&cm->let_go)) {
		cm->dev->cnt.cm_timewait_cut++;
		conn_free(TAILQ_FIRST(&cm->let_go));
	}
	if (cm->nconns >= CM_MAX_CONNS)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	/* 0 is no ID, and an ID in use (after 2^32 more) is skipped */
	do
		id = cm->next_id++ ^ cm->id_operand;
	while (!id || conn_find(cm, id));
	c->cm = cm;
	c->local_id = id;
	c->local_psn = random_u32() & WIRE_PSN_MASK;
	c->max_retries = CM_MAX_CM_RETRIES;
	ev_init(&c->timer, conn_timer_cb);
	c->timer.data = c;
	c->hnext = cm->by_id[id % CM_HASH_BUCKETS];
	cm->by_id[id % CM_HASH_BUCKETS] = c;
	LIST_INSERT_HEAD(&cm->conns, c, link);
	cm->nconns++;
	return c;
}

bool cm_owner_full(struct cm *cm, const struct owner *own)
{
	if (own->cm_conns < CM_MAX_OWNER_CONNS)
		return false;
	cm->dev->cnt.cm_rej_client_limit++;
	return true;
}

void conn_release_listener(struct cm_conn *c)
{
	if (c->listener) {
		c->listener->pending--;
		c->listener = NULL;
	}
}

void conn_charge(struct cm_conn *c, struct owner *own)
{
	if (c->charged)
		c->charged->cm_conns--;
	c->charged = own;
	if (own)
		own->cm_conns++;
}

/* A peer picks its comm IDs, so a chain may hold many: no worse than one list. */
static struct cm_conn **remote_chain(struct cm *cm, uint32_t remote_id)
{
	return &cm->by_remote[remote_id % CM_HASH_BUCKETS];
}

static void unhash_remote(struct cm_conn *c)
{
	struct cm_conn **p = remote_chain(c->cm, c->remote_id);

	while (*p && *p != c)
		p = &(*p)->rnext;
	if (*p)
		*p = c->rnext;
}

void conn_set_remote(struct cm_conn *c, uint32_t remote_id)
{
	struct cm_conn **head;

	if (c->remote_id)
		unhash_remote(c);
	c->remote_id = remote_id;
	if (!remote_id)
		return;
	head = remote_chain(c->cm, remote_id);
	c->rnext = *head;
	*head = c;
}

void conn_free(struct cm_conn *c)
{
	struct cm *cm = c->cm;
	struct cm_conn **p = &cm->by_id[c->local_id % CM_HASH_BUCKETS];

	while (*p && *p != c)
		p = &(*p)->hnext;
	if (*p)
		*p = c->hnext;
	conn_set_remote(c, 0);
	conn_charge(c, NULL);
	conn_release_listener(c);
	ev_timer_stop(cm->dev->loop, &c->timer);
	if (c->let_go)
		TAILQ_REMOVE(&cm->let_go, c, let_go_link);
	LIST_REMOVE(c, link);
	cm->nconns--;
	free(c);
}

struct cm_conn *conn_find(struct cm *cm, uint32_t local_id)
{
	struct cm_conn *c = cm->by_id[local_id % CM_HASH_BUCKETS];

	while (c && c->local_id != local_id)
		c = c->hnext;
	return c;
}

struct cm_conn *conn_find_remote(struct cm *cm, uint32_t remote_id, const uint8_t gid[16])
{
	struct cm_conn *c = *remote_chain(cm, remote_id);

	while (c && (c->remote_id != remote_id || memcmp(c->peer_gid, gid, 16)))
		c = c->rnext;
	return c;
}

struct cm_conn *conn_find_remote_guid(struct cm *cm, uint32_t remote_id, uint64_t guid)
{
	struct cm_conn *c = *remote_chain(cm, remote_id);

	while (c && (c->remote_id != remote_id || c->remote_ca_guid != guid))
		c = c->rnext;
	return c;
}

/* Linux's TIDs: the agent's number above, the comm ID below, byte-swapped as the captures
 * show (the kernel forms it from the big-endian ID on a little-endian host). */
uint64_t cm_new_tid(struct cm *cm, uint32_t local_id)
{
	return (uint64_t)cm->tid_hi << 32 | __builtin_bswap32(local_id);
}

void conn_mad_hdr(struct cm_mad *mad, uint16_t attr, uint64_t tid)
{
	memset(mad, 0, sizeof(*mad));
	mad->hdr.attr_id = attr;
	mad->hdr.tid = tid;
}

static void send_mad_bytes(struct cm *cm, const uint8_t sgid[16], const uint8_t dgid[16],
			   const uint8_t mac[6], uint8_t tos, const uint8_t mad[CM_MAD_LEN])
{
	struct dev *dev = cm->dev;
	struct wire_path path = { 0 };
	uint8_t *slot;
	size_t len;

	qp_path_between(&path, dev, sgid, dgid, mac);
	path.src_port = qp_flow_port(0, CM_GSI_QPN, CM_GSI_QPN);
	path.tos = tos;
	slot = net_tx_slot(&dev->port);
	len = cm_mad_frame(slot, DEV_FRAME_MAX, &path, dev->port.ip_id++, cm->psn, mad);
	if (!len)
		return;
	cm->psn = (cm->psn + 1) & WIRE_PSN_MASK;
	dev->cnt.cm_mads_sent++;
	net_tx_commit(&dev->port, len);
}

void cm_send_to(struct cm *cm, const uint8_t sgid[16], const uint8_t dgid[16],
		const uint8_t mac[6], const struct cm_mad *mad)
{
	uint8_t buf[CM_MAD_LEN];

	if (cm_mad_build(mad, buf))
		send_mad_bytes(cm, sgid, dgid, mac, 0, buf);
}

void conn_stop_timer(struct cm_conn *c)
{
	ev_timer_stop(c->cm->dev->loop, &c->timer);
}

void conn_send(struct cm_conn *c, const struct cm_mad *mad, bool resend)
{
	struct cm *cm = c->cm;

	if (!cm_mad_build(mad, c->last_mad))
		return;
	c->has_last = true;
	c->last_attr = (uint8_t)mad->hdr.attr_id;
	c->mra_rcvd = false;
	send_mad_bytes(cm, c->local_gid, c->peer_gid, c->peer_mac, c->tos, c->last_mad);
	conn_stop_timer(c);
	if (resend) {
		c->retries_left = c->max_retries;
		ev_timer_set(&c->timer, c->timeout, 0);
		ev_timer_start(cm->dev->loop, &c->timer);
	}
}

void conn_resend_last(struct cm_conn *c)
{
	if (c->has_last)
		send_mad_bytes(c->cm, c->local_gid, c->peer_gid, c->peer_mac, c->tos, c->last_mad);
}

/* Sends what waits, in order, until the socket is full again. */
static void channel_drain(struct cm_channel *ch)
{
	struct cm_pending_event *p;

	while ((p = STAILQ_FIRST(&ch->backlog))) {
		if (send(ch->fd, &p->ev, sizeof(p->ev), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
			return;
		STAILQ_REMOVE_HEAD(&ch->backlog, link);
		ch->backlog_len--;
		free(p);
	}
	ev_io_stop(ch->cm->dev->loop, &ch->watcher);
}

static void channel_writable_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	channel_drain(w->data);
}

static uint32_t owner_held(const struct cm *cm, const struct owner *own)
{
	const struct cm_channel *ch;
	uint32_t n = 0;

	LIST_FOREACH(ch, &cm->channels, link)
		if (ch->own == own)
			n += ch->backlog_len;
	return n;
}

/* A client slow to read keeps its events, in order, up to CM_CHANNEL_BACKLOG over all its
 * channels. */
static void channel_hold(struct cm *cm, struct cm_channel *ch, const struct proto_cm_event *ev)
{
	struct cm_pending_event *p = owner_held(cm, ch->own) < CM_CHANNEL_BACKLOG ?
				     malloc(sizeof(*p)) : NULL;

	if (!p) {
		cm->dev->cnt.cm_events_lost++;
		log_limited("CM: an event for client pid %d was lost: %u wait already",
			    ch->own ? (int)ch->own->pid : 0, owner_held(cm, ch->own));
		return;
	}
	p->ev = *ev;
	STAILQ_INSERT_TAIL(&ch->backlog, p, link);
	ch->backlog_len++;
	if (!ev_is_active(&ch->watcher)) {
		ev_io_init(&ch->watcher, channel_writable_cb, ch->fd, EV_WRITE);
		ch->watcher.data = ch;
		ev_io_start(cm->dev->loop, &ch->watcher);
	}
}

void cm_event_to(struct cm *cm, struct cm_channel *ch, struct proto_cm_event *ev)
{
	if (!ch)
		return;
	if (ch->backlog_len) {
		channel_hold(cm, ch, ev);
		return;
	}
	if (send(ch->fd, ev, sizeof(*ev), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*ev))
		return;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
		channel_hold(cm, ch, ev);
		return;
	}
	/* the client closed its end: nobody is left to tell */
	cm->dev->cnt.cm_events_lost++;
}

void cm_channel_free(struct cm_channel *ch)
{
	struct cm_pending_event *p;

	ev_io_stop(ch->cm->dev->loop, &ch->watcher);
	while ((p = STAILQ_FIRST(&ch->backlog))) {
		STAILQ_REMOVE_HEAD(&ch->backlog, link);
		free(p);
	}
	close(ch->fd);
	free(ch);
}

void conn_event(struct cm_conn *c, struct proto_cm_event *ev)
{
	if (!c->own)
		return;
	ev->conn = c->local_id;
	ev->cookie = c->cookie;
	cm_event_to(c->cm, c->ch, ev);
}

void conn_qp_attr(const struct cm_conn *c, struct proto_qp_attr *a)
{
	struct port *port = &c->cm->dev->port;
	int gid_index = addr_find(port, c->local_gid);

	memset(a, 0, sizeof(*a));
	a->path_mtu = c->mtu;
	a->dest_qpn = c->remote_qpn;
	/* The starting PSN of a REQ or REP is the PSN its sender receives from, the one the
	 * peer sends with: Linux's cm.c keeps each side's own as its rq_psn and the peer's as
	 * its sq_psn (the other reading of IBA's words connects rocemu to rocemu, and every
	 * first packet to the kernel's rxe is NAKed as out of sequence). */
	a->rq_psn = c->local_psn;
	a->sq_psn = c->remote_psn;
	/* cm.c's INIT: remote writes always, reads and atomics when it serves any */
	a->access = IBV_ACCESS_REMOTE_WRITE;
	if (c->responder_resources)
		a->access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	memcpy(a->dest_gid, c->peer_gid, 16);
	a->sgid_index = gid_index < 0 ? 0 : (uint8_t)gid_index;
	a->traffic_class = c->tos;
	a->flow_label = c->flow_label;
	a->hop_limit = port->hop_limit[!addr_gid_is_ipv4(c->peer_gid)];
	a->timeout = c->ack_timeout;
	a->retry_cnt = c->retry_count;
	a->rnr_retry = c->rnr_retry_count;
	a->min_rnr_timer = 0;        /* the kernel's cm sets 0 */
	a->max_rd_atomic = c->initiator_depth;
	a->max_dest_rd_atomic = c->responder_resources;
}

void conn_reject(struct cm_conn *c, uint16_t reason, uint8_t msg, const void *priv, size_t len)
{
	struct cm_mad mad;

	conn_mad_hdr(&mad, CM_ATTR_REJ, c->tid);
	mad.rej.local_comm_id = c->local_id;
	mad.rej.remote_comm_id = c->remote_id;
	mad.rej.message_rejected = msg;
	mad.rej.reason = reason;
	if (reason == CM_REJ_TIMEOUT) {
		/* the kernel's ARI for a timeout: its CA GUID */
		for (int i = 0; i < 8; i++)
			mad.rej.ari[i] = (uint8_t)(c->cm->ca_guid >> (56 - 8 * i));
		mad.rej.ari_length = 8;
	}
	if (priv && len)
		memcpy(mad.rej.private_data, priv, len < CM_REJ_PRIVATE_LEN ? len : CM_REJ_PRIVATE_LEN);
	conn_send(c, &mad, false);
	c->cm->dev->cnt.cm_rej_sent++;
	conn_free(c);
}

void conn_sidr_reply(struct cm_conn *c, uint8_t status, uint32_t qpn, const void *priv,
		     size_t len)
{
	struct cm_mad mad;

	conn_mad_hdr(&mad, CM_ATTR_SIDR_REP, c->tid);
	mad.sidr_rep.request_id = c->remote_id;
	mad.sidr_rep.status = status;
	mad.sidr_rep.service_id = c->service_id;
	if (status == CM_SIDR_SUCCESS) {
		mad.sidr_rep.qpn = qpn;
		mad.sidr_rep.qkey = CM_UDP_QKEY;
	}
	if (priv && len)
		memcpy(mad.sidr_rep.private_data, priv,
		       len < CM_SIDR_REP_PRIVATE_LEN ? len : CM_SIDR_REP_PRIVATE_LEN);
	conn_send(c, &mad, false);
	conn_free(c);
}

void conn_send_dreq(struct cm_conn *c)
{
	struct cm_mad mad;

	c->tid = cm_new_tid(c->cm, c->local_id);
	conn_mad_hdr(&mad, CM_ATTR_DREQ, c->tid);
	mad.dreq.local_comm_id = c->local_id;
	mad.dreq.remote_comm_id = c->remote_id;
	mad.dreq.remote_qpn = c->remote_qpn;
	c->state = CM_DREQ_SENT;
	conn_send(c, &mad, true);
}

static void drep_mad(const struct cm_conn *c, struct cm_mad *mad)
{
	conn_mad_hdr(mad, CM_ATTR_DREP, c->tid);
	mad->drep.local_comm_id = c->local_id;
	mad->drep.remote_comm_id = c->remote_id;
}

void conn_send_drep(struct cm_conn *c)
{
	struct cm_mad mad;

	drep_mad(c, &mad);
	conn_send(c, &mad, false);
}

/* A DREQ again during TimeWait (the peer lost our DREP) is answered again, and the
 * TimeWait timer, which alone frees the connection, keeps running: conn_send would stop
 * it, and a peer repeating its DREQ could keep every connection it had for ever. */
void conn_repeat_drep(struct cm_conn *c)
{
	struct cm_mad mad;

	drep_mad(c, &mad);
	if (cm_mad_build(&mad, c->last_mad))
		send_mad_bytes(c->cm, c->local_gid, c->peer_gid, c->peer_mac, c->tos, c->last_mad);
}

/* TimeWait: the comm ID stays known (a late DREQ is answered again) for the ACK timeout,
 * as the kernel's cm_enter_timewait waits, at most CM_MAX_PEER_TIMEOUT's (the peer's REQ
 * names it). */
void conn_enter_timewait(struct cm_conn *c)
{
	c->state = CM_TIMEWAIT;
	conn_stop_timer(c);
	ev_timer_set(&c->timer, cm_time_s(cm_clamp_u8(c->ack_timeout, CM_MAX_PEER_TIMEOUT)), 0);
	ev_timer_start(c->cm->dev->loop, &c->timer);
	if (!c->own)
		conn_let_go(c);
}

void conn_let_go(struct cm_conn *c)
{
	if (c->let_go)
		return;
	c->let_go = true;
	conn_charge(c, NULL);
	TAILQ_INSERT_TAIL(&c->cm->let_go, c, let_go_link);
}

/* The MAD's retries ran out: what the kernel's cm reports for each state. */
static void conn_give_up(struct cm_conn *c)
{
	struct proto_cm_event ev = { 0 };

	switch (c->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
		c->cm->dev->cnt.cm_timeouts++;
		ev.event = CM_EV_UNREACHABLE;
		ev.status = -ETIMEDOUT;
		conn_event(c, &ev);
		conn_free(c);
		return;
	case CM_DREQ_SENT:
		c->cm->dev->cnt.cm_timeouts++;
		ev.event = CM_EV_DISCONNECTED;
		ev.status = -ETIMEDOUT;
		conn_event(c, &ev);
		conn_enter_timewait(c);
		return;
	default:
		return;
	}
}

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cm_conn *c = w->data;
	struct proto_cm_event ev = { 0 };

	(void)revents;
	ev_timer_stop(loop, w);      /* (it has: stopping says so when the test fires it) */
	if (c->state == CM_TIMEWAIT) {
		ev.event = CM_EV_TIMEWAIT_EXIT;
		conn_event(c, &ev);
		if (!c->own) {
			conn_free(c);
			return;
		}
		/* the client still holds the connection: it goes when the client forgets it */
		return;
	}
	if (!c->has_last || !c->retries_left) {
		conn_give_up(c);
		return;
	}
	c->retries_left--;
	c->cm->dev->cnt.cm_resent++;
	send_mad_bytes(c->cm, c->local_gid, c->peer_gid, c->peer_mac, c->tos, c->last_mad);
	ev_timer_set(&c->timer, c->timeout, 0);
	ev_timer_start(c->cm->dev->loop, &c->timer);
}
