/* Events: read from a channel, named by cookie, and handled as librdmacm handles the
 * kernel's: a CONNECT_REQUEST makes the new id, a CONNECT_RESPONSE moves the QP to RTS and
 * answers with the RTU (the program sees ESTABLISHED), a REJECTED moves it to ERROR. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "emu/rdmacm/rdmacm.h"

struct rcm_event {
	struct rdma_cm_event ev;
	struct rcm_id *owner;        /* the id the event counts for (a request: its listener) */
	struct rcm_id *held_by;      /* the synchronous id whose id.event it is, or NULL */
	uint8_t private_data[PROTO_CM_PRIVATE_MAX];
};

static void set_conn_param(struct rcm_event *e, const struct proto_cm_event *pe)
{
	struct rdma_conn_param *p = &e->ev.param.conn;
	uint32_t len = pe->private_len < PROTO_CM_PRIVATE_MAX ? pe->private_len :
		       PROTO_CM_PRIVATE_MAX;

	memcpy(e->private_data, pe->private_data, len);
	p->private_data = len ? e->private_data : NULL;
	p->private_data_len = (uint8_t)len;
	p->responder_resources = pe->responder_resources;
	p->initiator_depth = pe->initiator_depth;
	p->flow_control = pe->flow_control;
	p->retry_count = pe->retry_count;
	p->rnr_retry_count = pe->rnr_retry_count;
	p->srq = pe->srq;
	p->qp_num = pe->peer_qpn;
}

/* rdma_ud_param's private data, the event's copy. */
static void set_ud_private(struct rcm_event *e, const struct proto_cm_event *pe)
{
	struct rdma_ud_param *p = &e->ev.param.ud;
	uint32_t len = pe->private_len < PROTO_CM_PRIVATE_MAX ? pe->private_len :
		       PROTO_CM_PRIVATE_MAX;

	memcpy(e->private_data, pe->private_data, len);
	p->private_data = len ? e->private_data : NULL;
	p->private_data_len = (uint8_t)len;
}

/* The UDP port space's events carry where the peer's UD QP is: an address vector, its
 * number and Q_Key. */
static void set_ud_param(struct rcm_event *e, const struct proto_cm_event *pe)
{
	struct rdma_ud_param *p = &e->ev.param.ud;

	set_ud_private(e, pe);
	p->ah_attr.is_global = 1;
	p->ah_attr.port_num = 1;
	memcpy(p->ah_attr.grh.dgid.raw, pe->qp.dest_gid, 16);
	p->ah_attr.grh.sgid_index = pe->qp.sgid_index;
	p->ah_attr.grh.hop_limit = pe->qp.hop_limit;
	p->ah_attr.grh.traffic_class = pe->qp.traffic_class;
	p->qp_num = pe->peer_qpn;
	p->qkey = pe->qp.qkey;
}

void rcm_fill_path(struct rcm_id *id)
{
	struct ibv_sa_path_rec *p = &id->path;

	memset(p, 0, sizeof(*p));
	rcm_addr_gid(&id->id.route.addr.src_addr, p->sgid.raw);
	rcm_addr_gid(&id->id.route.addr.dst_addr, p->dgid.raw);
	memcpy(&id->id.route.addr.addr.ibaddr.sgid, &p->sgid, 16);
	memcpy(&id->id.route.addr.addr.ibaddr.dgid, &p->dgid, 16);
	id->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
	p->pkey = htobe16(0xffff);
	p->dlid = p->slid = htobe16(0xffff);
	p->reversible = 1;   /* as librdmacm stores it: in host order, though the field is __be32 */
	p->numb_path = 1;
	p->mtu = id->dev ? (uint8_t)id->dev->rv->port.active_mtu : IBV_MTU_1024;
	p->mtu_selector = 2;
	p->rate_selector = 2;
	/* RDMA_OPTION_ID_ACK_TIMEOUT set before the route is resolved makes the route's
	 * lifetime, as the kernel's: the REQ's ACK timeout and the peer's come from it */
	p->packet_life_time = id->ack_timeout_set && id->ack_timeout ? id->ack_timeout - 1 : 18;
	p->packet_life_time_selector = 2;
	p->hop_limit = 64;
	p->traffic_class = id->tos;
	id->id.route.path_rec = p;
	id->id.route.num_paths = 1;
}

/* The new id a CONNECT_REQUEST brings, bound to the device it came to. */
static struct rcm_id *request_id(struct rcm_id *listen, const struct proto_cm_event *pe)
{
	struct rcm_channel *chan = listen->chan;
	int family = pe->ip_version == 6 ? AF_INET6 : AF_INET;
	struct rcm_id *id;

	if (listen->sync) {
		chan = rcm_channel_new();
		if (!chan)
			return NULL;
	}
	id = rcm_id_new(chan, listen->id.context, listen->id.ps, listen->id.qp_type);
	if (!id) {
		if (listen->sync)
			rcm_channel_free(chan);
		return NULL;
	}
	id->sync = listen->sync;
	rcm_id_bind_device(id, rcm_device_of_gid(pe->local_gid) ?: listen->dev);
	id->conn = pe->conn;
	id->stage = RCM_CONNECTING;
	id->qp_attr = pe->qp;
	id->have_qp_attr = true;
	id->responder_resources = pe->responder_resources;
	id->initiator_depth = pe->initiator_depth;
	id->tos = listen->tos;
	rcm_gid_addr(pe->local_gid, pe->local_port, family, &id->id.route.addr.src_storage);
	id->bound = true;
	rcm_gid_addr(pe->peer_gid, pe->peer_port, family, &id->id.route.addr.dst_storage);
	rcm_fill_path(id);
	if (id->id.qp_type != IBV_QPT_UD) {
		/* the route the REQ gave, as the kernel's passive id has it: the lifetime one
		 * less than the REQ's ACK timeout, its traffic class and flow label */
		id->path.packet_life_time = pe->qp.timeout ? pe->qp.timeout - 1 : 0;
		id->path.traffic_class = pe->qp.traffic_class;
		id->path.flow_label = htobe32(pe->qp.flow_label);
	}
	return id;
}

/* librdmacm's answer to a REP when the id has a QP: RTR, RTS, then the RTU. */
static int complete_connect(struct rcm_id *id)
{
	struct proto_handle m = { .hdr.op = PROTO_CM_ESTABLISH, .handle = id->conn };

	return rcm_qp_ready_then(id, RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH, &m, sizeof(m));
}

/* 0: e holds the event for the program; EAGAIN: nothing for it (read the next). */
static int handle(struct rcm_id *id, const struct proto_cm_event *pe, struct rcm_event *e)
{
	e->ev.id = &id->id;
	e->ev.event = pe->event;
	e->ev.status = pe->status;
	switch (pe->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		struct rcm_id *child = request_id(id, pe);

		if (!child) {
			struct proto_handle m = { .hdr.op = PROTO_CM_DESTROY, .handle = pe->conn };

			if (id->dev)
				rcm_request(id->dev, &m, sizeof(m), NULL, 0, -1);
			return EAGAIN;
		}
		e->ev.id = &child->id;
		e->ev.listen_id = &id->id;
		if (id->id.qp_type == IBV_QPT_UD) {
			set_ud_param(e, pe);
			e->ev.param.ud.qkey = 0;   /* a SIDR_REQ carries none: the kernel's says 0 */
		} else {
			set_conn_param(e, pe);
		}
		return 0;
	}
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* the answer may come before rdma_connect, on another thread, has stored the
		 * connection's number */
		id->conn = pe->conn;
		id->qp_attr = pe->qp;
		id->have_qp_attr = true;
		set_conn_param(e, pe);
		if (id->id.qp) {
			int err = complete_connect(id);

			e->ev.event = err ? RDMA_CM_EVENT_CONNECT_ERROR : RDMA_CM_EVENT_ESTABLISHED;
			e->ev.status = -err;
		}
		return 0;
	case RDMA_CM_EVENT_REJECTED:
		if (rcm_id_listening(id)) {
			/* to a listener: a request it was told of, given up by the peer */
			struct rcm_id *child = rcm_id_of_conn(id->dev, pe->conn);

			/* (a synchronous one has its own channel: its answer finds the request
			 * gone, EINVAL) */
			if (!child || child->sync) {
				if (child)
					child->conn = 0;
				return EAGAIN;
			}
			id = child;
			e->ev.id = &child->id;
		}
		rcm_qp_error(id);
		id->conn = 0;
		set_conn_param(e, pe);
		return 0;
	case RDMA_CM_EVENT_UNREACHABLE:
		id->conn = 0;
		/* a SIDR_REP's refusal: its private data, as the kernel's, and nothing else */
		if (id->id.qp_type == IBV_QPT_UD)
			set_ud_private(e, pe);
		return 0;
	case RDMA_CM_EVENT_DISCONNECTED:
		id->disconnected = true;
		if (pe->private_len)
			set_conn_param(e, pe);
		return 0;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		return rcm_mcast_event(id, pe, &e->ev);
	case RDMA_CM_EVENT_ESTABLISHED:
		if (id->id.qp_type != IBV_QPT_UD) {
			set_conn_param(e, pe);
			return 0;
		}
		/* a SIDR exchange is over with its answer */
		id->conn = 0;
		set_ud_param(e, pe);
		return 0;
	default:
		if (pe->private_len)
			set_conn_param(e, pe);
		return 0;
	}
}

/* Every writer closed: another thread destroyed the channel while this one waits on it.
 * librdmacm's reader would stay blocked in its read until the process ends, and programs
 * count on it (rping's event thread waits so while its main thread tears down and exits):
 * so does this one, or says EAGAIN when the program made the channel non-blocking. */
static int channel_closed(struct rcm_channel *chan)
{
	int flags = fcntl(chan->ch.fd, F_GETFL);

	/* (the descriptor may be closed already: the channel is gone either way) */
	if (flags >= 0 && (flags & O_NONBLOCK))
		return EAGAIN;
	for (;;)
		pause();
}

int rcm_read_event(struct rcm_channel *chan, struct rdma_cm_event **out)
{
	struct proto_cm_event pe;
	struct rcm_event *e;

	for (;;) {
		ssize_t n = recv(chan->ch.fd, &pe, sizeof(pe), 0);
		struct rcm_id *id;
		int err;

		if (n < 0)
			return errno;
		if (n == 0)
			return channel_closed(chan);
		if (n != sizeof(pe))
			continue;
		id = rcm_id_take_event(pe.cookie);
		if (!id)
			continue;  /* its id was destroyed meanwhile */
		e = calloc(1, sizeof(*e));
		err = e ? handle(id, &pe, e) : ENOMEM;
		if (err) {
			rcm_id_acked(id);  /* never reported after all */
			free(e);
			if (err == EAGAIN)
				continue;
			return err;
		}
		e->owner = id;
		*out = &e->ev;
		return 0;
	}
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	int err;

	if (!rcm_channel_live(channel) || !event) {
		errno = EINVAL;
		return -1;
	}
	err = rcm_read_event((struct rcm_channel *)channel, event);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

void rcm_event_hold(struct rcm_id *id, struct rdma_cm_event *ev)
{
	id->id.event = ev;
	((struct rcm_event *)ev)->held_by = id;
}

/* event->id may be a child the program destroyed before acking its CONNECT_REQUEST: only
 * the id that holds the event (a synchronous one) and its owner are looked at. */
int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct rcm_event *e = (struct rcm_event *)event;

	if (!event) {
		errno = EINVAL;
		return -1;
	}
	if (e->held_by && e->held_by->id.event == event)
		e->held_by->id.event = NULL;
	rcm_id_acked(e->owner);
	free(e);
	return 0;
}

static const char *const event_names[] = {
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
	"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
	"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED",
	"RDMA_CM_EVENT_DEVICE_REMOVAL", "RDMA_CM_EVENT_MULTICAST_JOIN",
	"RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	return (unsigned)event < sizeof(event_names) / sizeof(event_names[0]) ?
	       event_names[event] : "UNKNOWN EVENT";
}
