/* rdma_cm ids: made and destroyed, bound to an address and so to the device serving it,
 * listening, resolving, and each step of a connection, with librdmacm's checks and errnos.
 * The connection itself is the daemon's (PROTO_CM_*). */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "emu/rdmacm/rdmacm.h"

/* rdma-core's struct cma_id_private as far as librdmacm's own calls read it */
struct cma_id_private_head {
	struct rdma_cm_id id;
	void *cma_dev;
	void *connect;
	size_t connect_len;
	int events_completed;
	int connect_error;
	int sync;
};
_Static_assert(offsetof(struct rcm_id, cma_dev) == offsetof(struct cma_id_private_head, cma_dev) &&
	       offsetof(struct rcm_id, sync) == offsetof(struct cma_id_private_head, sync),
	       "an id's sync and cma_dev sit where librdmacm's own calls read them");
_Static_assert(sizeof(void *) != 8 || offsetof(struct rcm_cma_device_abi, max_qpsize) == 72,
	       "a device's max_qpsize sits where ucma_max_qpsize reads it");

static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, rcm_id) ids = LIST_HEAD_INITIALIZER(ids);
static uint64_t next_cookie = 1;

static int fail(int err)
{
	errno = err;
	return -1;
}

struct rcm_id *rcm_id_new(struct rcm_channel *chan, void *context, enum rdma_port_space ps,
			  enum ibv_qp_type qp_type)
{
	struct rcm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	id->chan = chan;
	id->id.channel = &chan->ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qp_type;
	pthread_cond_init(&id->acked, NULL);
	id->responder_resources = RDMA_MAX_RESP_RES;
	id->initiator_depth = RDMA_MAX_INIT_DEPTH;
	pthread_mutex_lock(&ids_lock);
	id->cookie = next_cookie++;
	LIST_INSERT_HEAD(&ids, id, link);
	pthread_mutex_unlock(&ids_lock);
	return id;
}

bool rcm_id_live(const struct rdma_cm_id *cmid)
{
	struct rcm_id *id;

	if (!cmid)
		return false;
	pthread_mutex_lock(&ids_lock);
	LIST_FOREACH(id, &ids, link)
		if (&id->id == cmid)
			break;
	pthread_mutex_unlock(&ids_lock);
	return id != NULL;
}

void rcm_id_acked(struct rcm_id *id)
{
	pthread_mutex_lock(&ids_lock);
	id->events_acked++;
	pthread_cond_broadcast(&id->acked);
	pthread_mutex_unlock(&ids_lock);
}

/* Counted as reported under the same lock that finds it, so rdma_destroy_id on another
 * thread waits for this event's ack instead of freeing the id while it is handled. */
struct rcm_id *rcm_id_take_event(uint64_t cookie)
{
	struct rcm_id *id;

	pthread_mutex_lock(&ids_lock);
	LIST_FOREACH(id, &ids, link)
		if (id->cookie == cookie)
			break;
	if (id)
		id->events_reported++;
	pthread_mutex_unlock(&ids_lock);
	return id;
}

bool rcm_id_listening(const struct rcm_id *id)
{
	return id->listening;
}

struct rcm_id *rcm_id_of_conn(const struct rcm_device *d, uint32_t conn)
{
	struct rcm_id *id;

	pthread_mutex_lock(&ids_lock);
	LIST_FOREACH(id, &ids, link)
		if (id->conn == conn && (!d || id->dev == d))
			break;
	pthread_mutex_unlock(&ids_lock);
	return id;
}

void rcm_id_bind_device(struct rcm_id *id, struct rcm_device *d)
{
	id->dev = d;
	id->cma_dev = d ? &d->abi : NULL;
	id->id.verbs = d ? d->verbs : NULL;
	id->id.pd = d ? d->pd : NULL;
	id->id.port_num = d ? 1 : 0;
}

/* The QP type of a port space, as librdmacm gives it: UD for UDP, RC for TCP and IB; 0
 * for a space not served (IPoIB). */
static enum ibv_qp_type ps_qp_type(enum rdma_port_space ps)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		return IBV_QPT_RC;
	case RDMA_PS_UDP:
		return IBV_QPT_UD;
	default:
		return 0;
	}
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	struct rcm_channel *chan = (struct rcm_channel *)channel;
	bool sync = !channel;
	struct rcm_id *new;

	if (!id || (channel && !rcm_channel_live(channel)))
		return fail(EINVAL);
	/* IPoIB's port space is not served */
	if (!ps_qp_type(ps))
		return fail(EPROTONOSUPPORT);
	if (sync) {
		chan = rcm_channel_new();
		if (!chan)
			return -1;
	}
	new = rcm_id_new(chan, context, ps, ps_qp_type(ps));
	if (!new) {
		if (sync)
			rcm_channel_free(chan);
		return fail(ENOMEM);
	}
	new->sync = sync;
	*id = &new->id;
	return 0;
}

static void unlisten(struct rcm_id *id)
{
	struct rcm_device *devs;
	int n = rcm_devices(&devs);

	for (int i = 0; i < n; i++) {
		struct proto_handle m = { .hdr.op = PROTO_CM_UNLISTEN, .handle = id->listener[i] };

		if (id->listener[i])
			rcm_request(&devs[i], &m, sizeof(m), NULL, 0, -1);
		id->listener[i] = 0;
	}
	id->listening = false;
}

static void forget_conn(struct rcm_id *id)
{
	struct proto_handle m = { .hdr.op = PROTO_CM_DESTROY, .handle = id->conn };

	/* Once disconnected, the daemon holds the connection until this destroy, which cannot
	 * fail then and need not be waited for (events of it still on their way are dropped,
	 * rcm_id_take_event). Before, the daemon may have ended it already (a REJ, a lost
	 * peer): a failure is no news then, but not one for the daemon's log. */
	if (id->conn && id->dev && id->disconnected)
		rcm_post(id->dev, &m, sizeof(m));
	else if (id->conn && id->dev)
		rcm_request(id->dev, &m, sizeof(m), NULL, 0, -1);
	id->conn = 0;
}

int rdma_destroy_id(struct rdma_cm_id *cmid)
{
	struct rcm_id *id = rcm_id(cmid);

	if (!rcm_id_live(cmid))
		return fail(EINVAL);
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	pthread_mutex_lock(&ids_lock);
	LIST_REMOVE(id, link);
	while (id->events_acked != id->events_reported)
		pthread_cond_wait(&id->acked, &ids_lock);
	pthread_mutex_unlock(&ids_lock);
	rcm_mcast_leave_all(id);
	unlisten(id);
	forget_conn(id);
	/* its events already in a channel others share go: nobody may be woken for them */
	if (!id->sync)
		rcm_channel_move_events(id->chan, id->cookie, NULL);
	pthread_cond_destroy(&id->acked);
	if (id->sync)
		rcm_channel_free(id->chan);
	free(id->ep_qp_attr);
	free(id);
	return 0;
}

static uint64_t service_id(const struct rcm_id *id, uint16_t port)
{
	return (uint64_t)id->id.ps << 16 | port;
}

/* The request that listens on the id's address and port at one device (or holds them). */
static int listen_request(struct rcm_id *id, struct rcm_device *d, struct proto_cm_listen *m)
{
	const struct sockaddr *src = &id->id.route.addr.src_addr;
	int err = rcm_channel_at(id->chan, d, &m->channel);

	if (err)
		return err;
	m->hdr.op = PROTO_CM_LISTEN;
	m->cookie = id->cookie;
	m->service_id = service_id(id, rcm_port(src));
	if (!rcm_addr_any(src))
		rcm_addr_gid(src, m->gid);
	else if (src->sa_family == AF_INET || id->afonly)
		m->any_family = src->sa_family == AF_INET ? 4 : 6;
	return 0;
}

/* The id's port held at each of its devices, or at none (flags: PROTO_CM_HOLD_*). This
 * also opens the devices and makes the id's channel known to their daemons, so that a
 * later rdma_listen is one request: the kernel's listen is one system call, and qperf
 * 0.4.11 tells its client the port between its bind and its listen. */
static int hold_port(struct rcm_id *id, uint8_t flags)
{
	struct rcm_device *devs;
	int n = rcm_devices(&devs), err = 0;

	if (id->reuseaddr)
		flags |= PROTO_CM_HOLD_REUSEADDR;
	for (int i = 0; i < n && !err; i++) {
		struct proto_cm_listen m = { .bind_only = 1, .hold_flags = flags };
		struct proto_handle_reply r;

		if (id->dev && id->dev != &devs[i])
			continue;
		err = listen_request(id, &devs[i], &m);
		if (!err)
			err = rcm_request(&devs[i], &m, sizeof(m), &r, sizeof(r), -1);
		if (!err)
			id->listener[i] = r.handle;
	}
	if (err)
		unlisten(id);
	return err;
}

/* An id bound to port 0 holds one no other id at its devices holds, as the kernel's
 * rdma_cm gives one: from a random port of ip_local_port_range on, the first free. */
static int hold_any_port(struct rcm_id *id)
{
	struct sockaddr *src = &id->id.route.addr.src_addr;
	unsigned lo, hi, port;

	rcm_port_range(&lo, &hi);
	port = rcm_random_port(lo, hi);
	for (unsigned tried = 0; tried <= hi - lo; tried++) {
		int err;

		rcm_set_port(src, (uint16_t)port);
		err = hold_port(id, PROTO_CM_HOLD_ANY_PORT);
		if (err != EADDRINUSE)
			return err;
		port = port == hi ? lo : port + 1;
	}
	return EADDRNOTAVAIL;
}

int rdma_bind_addr(struct rdma_cm_id *cmid, struct sockaddr *addr)
{
	struct rcm_id *id = rcm_id(cmid);
	struct sockaddr *src;
	struct sockaddr_storage was;
	int err;

	if (!rcm_id_live(cmid) || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return fail(EINVAL);
	src = &cmid->route.addr.src_addr;
	/* bound already (the family alone may be set: rsockets set it at rsocket()) */
	if (id->bound)
		return fail(EINVAL);
	if (!rcm_addr_any(addr)) {
		struct rcm_device *d = rcm_device_of(addr);

		if (!d)
			return fail(EADDRNOTAVAIL);
		rcm_id_bind_device(id, d);
	}
	was = cmid->route.addr.src_storage;
	memcpy(&cmid->route.addr.src_storage, addr, rcm_addr_len(addr));
	/* the port is held from here, as the kernel's: another bind of it fails now */
	err = rcm_port(src) ? hold_port(id, 0) : hold_any_port(id);
	if (err) {
		cmid->route.addr.src_storage = was;
		rcm_id_bind_device(id, NULL);
		return fail(err);
	}
	id->bound = true;
	return 0;
}

static int listen_on(struct rcm_id *id, struct rcm_device *d, int idx, int backlog)
{
	struct proto_cm_listen m = { .bound = id->listener[idx] };
	struct proto_handle_reply r;
	int err = listen_request(id, d, &m);

	if (err)
		return err;
	m.backlog = backlog > 0 ? (uint32_t)backlog : 0;
	err = rcm_request(d, &m, sizeof(m), &r, sizeof(r), -1);
	if (!err)
		id->listener[idx] = r.handle;
	return err;
}

int rdma_listen(struct rdma_cm_id *cmid, int backlog)
{
	struct rcm_id *id = rcm_id(cmid);
	struct rcm_device *devs;
	int n, err = 0, listening = 0;

	if (!rcm_id_live(cmid) || id->listening || id->stage != RCM_UNRESOLVED)
		return fail(EINVAL);
	if (!id->bound) {
		/* any address of the family the id was given, else IPv4's, as the kernel binds */
		struct sockaddr_storage any = { .ss_family = AF_INET };

		if (cmid->route.addr.src_addr.sa_family == AF_INET6)
			any.ss_family = AF_INET6;
		if (rdma_bind_addr(cmid, (struct sockaddr *)&any))
			return -1;
	}
	n = rcm_devices(&devs);
	for (int i = 0; i < n && !err; i++) {
		if (id->dev && id->dev != &devs[i])
			continue;
		err = listen_on(id, &devs[i], i, backlog);
		listening += !err;
	}
	if (err) {
		unlisten(id);
		return fail(err);
	}
	id->listening = listening > 0;
	return listening ? 0 : fail(ENODEV);
}

/* The peer's MAC known to the daemon: asked on the device's connection, which every
 * thread's calls share, only for a look the daemon answers at once; a neighbour still to be
 * resolved (about a second when nobody answers) is waited for on a connection of this
 * call's own, so other threads' calls go on meanwhile. */
static int resolve_neighbour(struct rcm_device *d, const struct sockaddr *dst)
{
	struct proto_cm_resolve m = { .hdr.op = PROTO_CM_RESOLVE, .no_wait = 1 };
	struct rocemu_context *own;
	int err;

	/* an address of the device itself has no neighbour to resolve (the daemon delivers
	 * to its own QPs), and a neighbour in the kernel's table is resolved: the daemon
	 * would say so, and is not asked */
	if (rcm_device_of(dst) == d || rcm_neighbour_known(d, dst))
		return 0;
	rcm_addr_gid(dst, m.dgid);
	pthread_mutex_lock(&d->rv->lock);
	err = rocemu_cm_request(d->rv->rc, &m, sizeof(m), NULL, 0, -1);
	pthread_mutex_unlock(&d->rv->lock);
	if (err == EWOULDBLOCK) {
		m.no_wait = 0;
		own = rocemu_open(d->rv->dev->socket);
		err = own ? rocemu_cm_request(own, &m, sizeof(m), NULL, 0, -1) : errno;
		if (own)
			rocemu_close(own);
	}
	if (err)
		rv_fail(d->rv, err, "rdma_resolve_addr");
	return err;
}

/* src: the first address of dst's family that a device here serves; unchanged if none. */
static void first_served(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	struct sockaddr_storage a;
	struct rcm_device *devs;
	int n = rcm_devices(&devs);

	for (int i = 0; i < n; i++) {
		const struct rocemu_port_attr *p = &devs[i].rv->port;

		for (unsigned g = 0; g < p->gid_count && g < ROCEMU_MAX_GIDS; g++) {
			rcm_gid_addr(p->gids[g].raw, 0, 0, &a);
			if (a.ss_family == dst->sa_family) {
				*src = a;
				return;
			}
		}
	}
}

/* The source the kernel's routes give for dst, unless no device here serves it. The
 * routes give 127.0.0.1 for all of 127/8, and the kernel's cma binds a loopback
 * destination to a local device from the device's own GID: so dst itself when a device
 * here serves it (a program connecting to its own device on lo), else for a loopback dst
 * a device's first address of its family (to another daemon on lo). Anything else stays
 * as routed, and is refused: no device serves it. */
static int route_source(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	int err = rcm_route_source(dst, src);

	if (err || rcm_device_of((struct sockaddr *)src))
		return err;
	if (rcm_device_of(dst)) {
		memcpy(src, dst, rcm_addr_len(dst));
		rcm_set_port((struct sockaddr *)src, 0);
	} else if (rcm_addr_loopback(dst)) {
		first_served(dst, src);
	}
	return 0;
}

/* The address is resolved when the daemon serving the source knows the peer's MAC: the
 * daemon waits for the kernel's neighbour table, never blocking its loop. */
int rdma_resolve_addr(struct rdma_cm_id *cmid, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms)
{
	struct rcm_id *id = rcm_id(cmid);
	const struct sockaddr *given;
	struct sockaddr_storage src;
	struct rcm_device *d;
	uint16_t port;
	int err;

	(void)timeout_ms;
	if (!rcm_id_live(cmid) || !dst_addr || (dst_addr->sa_family != AF_INET &&
				   dst_addr->sa_family != AF_INET6))
		return fail(EINVAL);
	if (id->listening || id->stage != RCM_UNRESOLVED)
		return fail(EINVAL);
	/* as the kernel's: src_addr counts only for an id not bound yet */
	given = id->bound ? &cmid->route.addr.src_addr :
		src_addr && src_addr->sa_family ? src_addr : NULL;
	if (given && !rcm_addr_any(given))
		memcpy(&src, given, rcm_addr_len(given));
	else if ((err = route_source(dst_addr, &src)))
		return fail(err);
	if (src.ss_family != dst_addr->sa_family)
		return fail(EINVAL);
	d = rcm_device_of((struct sockaddr *)&src);
	if (!d)
		return fail(EADDRNOTAVAIL);
	port = given ? rcm_port(given) : 0;
	rcm_set_port((struct sockaddr *)&src, port ? port : rcm_ephemeral_port());
	memcpy(&cmid->route.addr.src_storage, &src, sizeof(src));
	memcpy(&cmid->route.addr.dst_storage, dst_addr, rcm_addr_len(dst_addr));
	id->bound = true;
	rcm_id_bind_device(id, d);
	err = resolve_neighbour(d, dst_addr);
	/* a neighbour that never answered is a timeout, as the kernel's addr.c reports it */
	if (err == EHOSTUNREACH)
		err = ETIMEDOUT;
	/* (after ADDR_ERROR the address may be resolved again, as the kernel's id goes back
	 * to bound) */
	if (!err)
		id->stage = RCM_ADDR_RESOLVED;
	err = rcm_post_local(id, err ? RDMA_CM_EVENT_ADDR_ERROR : RDMA_CM_EVENT_ADDR_RESOLVED,
			     err ? -err : 0);
	if (err)
		return fail(err);
	return id->sync && rcm_wait(id, RDMA_CM_EVENT_ADDR_RESOLVED) ? -1 : 0;
}

/* The route's flow label, as the kernel's rdma_cm gives a RoCEv2 one: an IPv6 source's own
 * label, else a hash of the two ports; it picks the connection's UDP source port. */
static uint32_t roce_flow_label(const struct sockaddr *src, const struct sockaddr *dst)
{
	const struct sockaddr_in6 *src6 = (const struct sockaddr_in6 *)src;
	uint32_t label = src->sa_family == AF_INET6 ? be32toh(src6->sin6_flowinfo) & 0xfffff : 0;

	return label ? label : (rcm_port(src) * 31u + rcm_port(dst)) & 0xfffff;
}

int rdma_resolve_route(struct rdma_cm_id *cmid, int timeout_ms)
{
	struct rcm_id *id = rcm_id(cmid);
	int err;

	(void)timeout_ms;
	if (!rcm_id_live(cmid) || !id->dev || id->stage != RCM_ADDR_RESOLVED)
		return fail(EINVAL);
	rcm_fill_path(id);
	id->path.flow_label = htobe32(roce_flow_label(&cmid->route.addr.src_addr,
						      &cmid->route.addr.dst_addr));
	err = rcm_post_local(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	if (err)
		return fail(err);
	id->stage = RCM_ROUTE_RESOLVED;
	return id->sync && rcm_wait(id, RDMA_CM_EVENT_ROUTE_RESOLVED) ? -1 : 0;
}

/* librdmacm's checks of the depths asked: above the device's is EINVAL, RDMA_MAX_*
 * the device's. */
static int take_depths(struct rcm_id *id, const struct rdma_conn_param *p)
{
	uint32_t max = rcm_max_rd_atomic(id->dev);

	if (!p)
		return 0;
	if ((p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > max) ||
	    (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > max))
		return EINVAL;
	if (p->responder_resources != RDMA_MAX_RESP_RES)
		id->responder_resources = p->responder_resources;
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH)
		id->initiator_depth = p->initiator_depth;
	return 0;
}

static uint8_t depth(const struct rcm_id *id, uint8_t v)
{
	uint32_t max = rcm_max_rd_atomic(id->dev);

	return v == RDMA_MAX_RESP_RES || v > max ? (uint8_t)(max > 255 ? 255 : max) : v;
}

int rdma_connect(struct rdma_cm_id *cmid, struct rdma_conn_param *p)
{
	struct rcm_id *id = rcm_id(cmid);
	struct proto_cm_connect m = { .hdr.op = PROTO_CM_CONNECT };
	struct proto_handle_reply r;
	int err;

	if (!rcm_id_live(cmid) || !id->dev || id->stage != RCM_ROUTE_RESOLVED)
		return fail(EINVAL);
	err = take_depths(id, p);
	if (!err && p && p->private_data_len > PROTO_CM_REQ_PRIVATE)
		err = EINVAL;
	if (!err && !cmid->qp && !p)
		err = EINVAL;
	if (!err)
		err = rcm_channel_at(id->chan, id->dev, &m.channel);
	if (err)
		return fail(err);
	m.cookie = id->cookie;
	m.qpn = cmid->qp ? cmid->qp->qp_num : p->qp_num;
	m.service_id = service_id(id, rcm_port(&cmid->route.addr.dst_addr));
	rcm_addr_gid(&cmid->route.addr.src_addr, m.sgid);
	rcm_addr_gid(&cmid->route.addr.dst_addr, m.dgid);
	m.src_port = rcm_port(&cmid->route.addr.src_addr);
	m.responder_resources = depth(id, id->responder_resources);
	m.initiator_depth = depth(id, id->initiator_depth);
	m.retry_count = p ? p->retry_count : 7;
	m.rnr_retry_count = p ? p->rnr_retry_count : 7;
	m.flow_control = p ? p->flow_control : 1;
	m.srq = cmid->srq || (p && p->srq);
	m.tos = id->tos;
	m.packet_life_time = id->path.packet_life_time;
	m.flow_label = be32toh(id->path.flow_label);
	if (p && p->private_data_len) {
		m.private_len = p->private_data_len;
		memcpy(m.private_data, p->private_data, p->private_data_len);
	}
	err = rcm_request(id->dev, &m, sizeof(m), &r, sizeof(r), -1);
	if (err)
		return fail(err);
	id->conn = r.handle;
	id->stage = RCM_CONNECTING;
	id->disconnected = false;
	return id->sync && rcm_wait(id, RDMA_CM_EVENT_ESTABLISHED) ? -1 : 0;
}

/* The UDP port space's answer (a SIDR_REP): the UD QP's number; nothing to wait for. */
static int accept_ud(struct rcm_id *id, const struct rdma_conn_param *p)
{
	struct proto_cm_accept m = { .hdr.op = PROTO_CM_ACCEPT };
	int err = rcm_channel_at(id->chan, id->dev, &m.channel);

	if (err)
		return fail(err);
	m.conn = id->conn;
	m.cookie = id->cookie;
	m.qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
	if (p && p->private_data_len) {
		m.private_len = p->private_data_len;
		memcpy(m.private_data, p->private_data, p->private_data_len);
	}
	err = rcm_request(id->dev, &m, sizeof(m), NULL, 0, -1);
	if (err)
		return fail(err);
	id->conn = 0;   /* a SIDR exchange ends with its answer */
	return 0;
}

int rdma_accept(struct rdma_cm_id *cmid, struct rdma_conn_param *p)
{
	struct rcm_id *id = rcm_id(cmid);
	struct proto_cm_accept m = { .hdr.op = PROTO_CM_ACCEPT };
	uint8_t resp, init;
	int err;

	if (!rcm_id_live(cmid) || !id->conn || !id->dev || (!cmid->qp && !p))
		return fail(EINVAL);
	if (p && p->private_data_len > sizeof(m.private_data))
		return fail(EINVAL);
	resp = id->responder_resources;
	init = id->initiator_depth;
	if (p) {
		uint32_t max = rcm_max_rd_atomic(id->dev);

		if ((p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > max) ||
		    (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > max))
			return fail(EINVAL);
		if (p->responder_resources != RDMA_MAX_RESP_RES)
			resp = p->responder_resources;
		/* no deeper than the peer serves */
		if (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth < init)
			init = p->initiator_depth;
	}
	resp = depth(id, resp);
	init = depth(id, init);
	if (cmid->qp_type == IBV_QPT_UD)
		return accept_ud(id, p);
	err = rcm_channel_at(id->chan, id->dev, &m.channel);
	if (err)
		return fail(err);
	m.conn = id->conn;
	m.cookie = id->cookie;
	m.qpn = cmid->qp ? cmid->qp->qp_num : p->qp_num;
	m.responder_resources = resp;
	m.initiator_depth = init;
	m.rnr_retry_count = p ? p->rnr_retry_count : 7;
	m.flow_control = p ? p->flow_control : 1;
	m.srq = cmid->srq || (p && p->srq);
	if (p && p->private_data_len) {
		m.private_len = p->private_data_len;
		memcpy(m.private_data, p->private_data, p->private_data_len);
	}
	err = rcm_qp_ready_then(id, resp, init, &m, sizeof(m));
	if (err)
		return fail(err);
	return id->sync && rcm_wait(id, RDMA_CM_EVENT_ESTABLISHED) ? -1 : 0;
}

int rdma_reject(struct rdma_cm_id *cmid, const void *private_data, uint8_t private_data_len)
{
	struct rcm_id *id = rcm_id(cmid);
	struct proto_cm_reject m = { .hdr.op = PROTO_CM_REJECT };
	int err;

	if (!rcm_id_live(cmid) || !id->conn || !id->dev || private_data_len > sizeof(m.private_data))
		return fail(EINVAL);
	m.conn = id->conn;
	m.private_len = private_data_len;
	if (private_data && private_data_len)
		memcpy(m.private_data, private_data, private_data_len);
	err = rcm_request(id->dev, &m, sizeof(m), NULL, 0, -1);
	if (err)
		return fail(err);
	id->conn = 0;
	return 0;
}

int rdma_establish(struct rdma_cm_id *cmid)
{
	struct rcm_id *id = rcm_id(cmid);
	struct proto_handle m = { .hdr.op = PROTO_CM_ESTABLISH };
	int err;

	if (!rcm_id_live(cmid) || !id->conn || !id->dev)
		return fail(EINVAL);
	m.handle = id->conn;
	err = rcm_request(id->dev, &m, sizeof(m), NULL, 0, -1);
	return err ? fail(err) : 0;
}

/* Whether the kernel's id would hold an IB CM id, which rdma_disconnect answers: from its
 * request or the request it came from, or its listen on a device, until it is destroyed. */
static bool holds_cm_id(const struct rcm_id *id)
{
	return id->stage == RCM_CONNECTING || (id->listening && id->dev);
}

int rdma_disconnect(struct rdma_cm_id *cmid)
{
	struct rcm_id *id = rcm_id(cmid);
	struct proto_handle m = { .hdr.op = PROTO_CM_DISCONNECT };
	int err;

	if (!rcm_id_live(cmid) || !id->dev || !holds_cm_id(id))
		return fail(EINVAL);
	if (!id->conn) {
		/* A listener, or a connection the daemon ended (a REJ, a lost peer, a SIDR
		 * answer): the kernel's rdma_disconnect moves the QP to ERROR, finds neither a
		 * DREQ nor a DREP to send, and returns 0. librdmacm's synchronous id would then
		 * wait for an event that cannot come; this one returns. */
		err = rcm_qp_error(id);
		return err ? fail(err) : 0;
	}
	m.handle = id->conn;
	err = rcm_qp_error_then(id, &m, sizeof(m));
	if (err)
		return fail(err);
	/* a synchronous id waits for its next event, as librdmacm's: the DISCONNECTED its DREQ
	 * brings, or the one already waiting when the peer disconnected first; id->event
	 * holds it */
	return id->sync && rcm_complete(id) ? -1 : 0;
}

/* The first packet on the QP before the RTU: the connection counts as established. The
 * daemon's RTU (or the REP's retries) settle it on its own, so there is nothing to do. */
int rdma_notify(struct rdma_cm_id *cmid, enum ibv_event_type event)
{
	if (!rcm_id_live(cmid))
		return fail(EINVAL);
	if (event != IBV_EVENT_COMM_EST)
		return fail(EINVAL);
	return 0;
}

/* The daemon sends the id's events to the new channel from now on. */
static int migrate_at_daemons(struct rcm_id *id, struct rcm_channel *to)
{
	struct rcm_device *devs;
	int n = rcm_devices(&devs), err = 0;

	for (int i = 0; i < n && !err; i++) {
		struct proto_cm_migrate m = { .hdr.op = PROTO_CM_MIGRATE, .handle = id->listener[i],
					      .listener = 1 };

		if (!id->listener[i])
			continue;
		err = rcm_channel_at(to, &devs[i], &m.channel);
		if (!err)
			err = rcm_request(&devs[i], &m, sizeof(m), NULL, 0, -1);
	}
	if (!err && id->conn && id->dev) {
		struct proto_cm_migrate m = { .hdr.op = PROTO_CM_MIGRATE, .handle = id->conn };

		err = rcm_channel_at(to, id->dev, &m.channel);
		if (!err)
			err = rcm_request(id->dev, &m, sizeof(m), NULL, 0, -1);
		/* a request not accepted yet moves when it is accepted */
		if (err == EINVAL)
			err = 0;
	}
	return err;
}

int rdma_migrate_id(struct rdma_cm_id *cmid, struct rdma_event_channel *channel)
{
	struct rcm_id *id = rcm_id(cmid);
	struct rcm_channel *to = (struct rcm_channel *)channel;
	bool sync = !channel;
	int err;

	if (!rcm_id_live(cmid) || (channel && !rcm_channel_live(channel)))
		return fail(EINVAL);
	if (sync) {
		to = rcm_channel_new();
		if (!to)
			return -1;
	}
	err = migrate_at_daemons(id, to);
	if (err) {
		if (sync)
			rcm_channel_free(to);
		return fail(err);
	}
	/* those the program holds it acks as before */
	rcm_channel_move_events(id->chan, id->cookie, to);
	if (id->sync)
		rcm_channel_free(id->chan);
	id->chan = to;
	id->sync = sync;
	cmid->channel = &to->ch;
	return 0;
}

int rdma_set_option(struct rdma_cm_id *cmid, int level, int optname, void *optval,
		    size_t optlen)
{
	struct rcm_id *id = rcm_id(cmid);

	if (!rcm_id_live(cmid) || !optval)
		return fail(EINVAL);
	if (level != RDMA_OPTION_ID)
		return fail(ENOSYS);
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return fail(EINVAL);
		id->tos = *(uint8_t *)optval;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		/* as the kernel's: set before a bind, or set (not cleared) before a listen; it
		 * counts at the bind (a port is never held through TimeWait here) */
		if (optlen != sizeof(int) || (*(int *)optval ? id->listening : id->bound))
			return fail(EINVAL);
		id->reuseaddr = *(int *)optval != 0;
		return 0;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int))
			return fail(EINVAL);
		id->afonly = *(int *)optval;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			return fail(EINVAL);
		id->ack_timeout = *(uint8_t *)optval;
		id->ack_timeout_set = true;
		return 0;
	default:
		return fail(ENOSYS);
	}
}

__be16 rdma_get_src_port(struct rdma_cm_id *cmid)
{
	return rcm_id_live(cmid) ? htons(rcm_port(&cmid->route.addr.src_addr)) : 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *cmid)
{
	return rcm_id_live(cmid) ? htons(rcm_port(&cmid->route.addr.dst_addr)) : 0;
}

int rcm_complete(struct rcm_id *id)
{
	struct rdma_cm_event *ev;
	int err;

	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	err = rcm_read_event(id->chan, &ev);
	if (err)
		return (errno = err);
	rcm_event_hold(id, ev);
	if (ev->status) {
		err = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED :
		      ev->status < 0 ? -ev->status : ev->status;
		return (errno = err);
	}
	return 0;
}

int rcm_wait(struct rcm_id *id, enum rdma_cm_event_type expected)
{
	int err = rcm_complete(id);

	if (err)
		return err;
	if (id->id.event->event != expected)
		return (errno = EINVAL);
	return 0;
}
