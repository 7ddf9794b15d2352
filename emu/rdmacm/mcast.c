/* Multicast on rdma_cm ids: rdma_join_multicast[_ex] and rdma_leave_multicast as librdmacm
 * and the kernel's rdma_cm do them for RoCE (cma.c: cma_iboe_join_multicast,
 * cma_make_mc_event; librdmacm: ucma_process_join):
 *   - the group's GID is its address as a RoCE v2 GID (cma_iboe_set_mgid): ::ffff:a.b.c.d
 *     for IPv4, the IPv6 address itself;
 *   - a full member joins the group at the IP level on the device's interface (IGMP; MLD
 *     for IPv6), so a switch that snoops sends the group's frames here; a send-only member
 *     does not. The membership is a socket of this process, held until the leave;
 *   - RDMA_CM_EVENT_MULTICAST_JOIN carries the address vector to the group (hop limit 64,
 *     the source address's GID index), QPN 0xFFFFFF and the Q_Key of the UDP port space,
 *     and when the program reads it the id's QP (a full member's) is attached to the group;
 *     a failed attach makes it RDMA_CM_EVENT_MULTICAST_ERROR, as librdmacm does;
 *   - leaving detaches the QP and drops the membership; rdma_destroy_id leaves every group.
 * One difference: the kernel refuses IPv6 groups on RoCE v2 (-ENOTSUPP); rocemu takes them
 * (docs/verbs.md). */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/rdmacm/rdmacm.h"

#define MCAST_HOP_LIMIT 64           /* IPV6_DEFAULT_HOPLIMIT, the kernel's for RoCE v2 */

struct rcm_mcast {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	void *context;
	union ibv_gid mgid;
	uint32_t serial;             /* the event's name for it */
	bool send_only;
	bool attached;               /* the id's QP, when its join event was read */
	int ip_fd;                   /* the IP-level membership, -1 for none */
	struct rcm_mcast *next;
};

static pthread_mutex_t mcast_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t next_serial = 1;

static int fail(int err)
{
	errno = err;
	return -1;
}

static bool is_multicast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* The index of the id's source address in its device's GID table (0 when not found). */
static uint8_t source_gid_index(const struct rcm_id *id)
{
	const struct rocemu_port_attr *p = &id->dev->rv->port;
	uint8_t gid[16];

	rcm_addr_gid(&id->id.route.addr.src_addr, gid);
	for (unsigned g = 0; g < p->gid_count && g < ROCEMU_MAX_GIDS; g++)
		if (!memcmp(p->gids[g].raw, gid, 16))
			return (uint8_t)g;
	return 0;
}

/* IP_ADD_MEMBERSHIP or IPV6_JOIN_GROUP on the daemon's interface: the kernel sends the
 * reports (IGMP, MLD) and answers the queries while the socket holds it. 0 or an errno. */
static int ip_join(struct rcm_mcast *mc, const struct rcm_id *id)
{
	unsigned ifindex = (unsigned)rcm_device_ifindex(id->dev);
	int fd, rc;

	if (!ifindex)
		return ENODEV;
	fd = socket(mc->addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (mc->addr.ss_family == AF_INET) {
		struct ip_mreqn m = { .imr_ifindex = (int)ifindex };

		m.imr_multiaddr = ((struct sockaddr_in *)&mc->addr)->sin_addr;
		m.imr_address = ((const struct sockaddr_in *)&id->id.route.addr.src_addr)->sin_addr;
		rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
	} else {
		struct ipv6_mreq m = { .ipv6mr_interface = ifindex };

		m.ipv6mr_multiaddr = ((struct sockaddr_in6 *)&mc->addr)->sin6_addr;
		rc = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m));
	}
	if (rc < 0) {
		rc = errno;
		close(fd);
		return rc;
	}
	mc->ip_fd = fd;
	return 0;
}

static int post_join(const struct rcm_id *id, const struct rcm_mcast *mc)
{
	struct proto_cm_event ev = { .event = RDMA_CM_EVENT_MULTICAST_JOIN, .cookie = id->cookie,
				     .conn = mc->serial, .peer_qpn = PROTO_MCAST_QPN };

	if (send(id->chan->wr, &ev, sizeof(ev), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(ev))
		return errno;
	return 0;
}

static int check_join(const struct rcm_id *id, const struct sockaddr *addr)
{
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return EINVAL;
	/* the kernel's: an address bound or resolved, a UD id */
	if (!id->dev || id->id.qp_type != IBV_QPT_UD)
		return EINVAL;
	if (!is_multicast(addr) || addr->sa_family != id->id.route.addr.src_addr.sa_family)
		return EINVAL;
	return 0;
}

static void unlink_mcast(struct rcm_id *id, struct rcm_mcast *mc)
{
	for (struct rcm_mcast **pos = &id->mcasts; *pos; pos = &(*pos)->next)
		if (*pos == mc) {
			*pos = mc->next;
			return;
		}
}

static void free_mcast(struct rcm_mcast *mc)
{
	if (mc->ip_fd >= 0)
		close(mc->ip_fd);
	free(mc);
}

static int join(struct rcm_id *id, const struct sockaddr *addr, bool send_only, void *context)
{
	struct rcm_mcast *mc;
	int err = check_join(id, addr);

	if (err)
		return fail(err);
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return fail(ENOMEM);
	mc->addrlen = rcm_addr_len(addr);
	memcpy(&mc->addr, addr, mc->addrlen);
	mc->context = context;
	mc->send_only = send_only;
	mc->ip_fd = -1;
	rcm_addr_gid(addr, mc->mgid.raw);
	err = send_only ? 0 : ip_join(mc, id);
	pthread_mutex_lock(&mcast_lock);
	mc->serial = next_serial++;
	if (!err)
		err = post_join(id, mc);
	if (!err) {
		mc->next = id->mcasts;
		id->mcasts = mc;
	}
	pthread_mutex_unlock(&mcast_lock);
	if (err) {
		free_mcast(mc);
		return fail(err);
	}
	return id->sync && rcm_wait(id, RDMA_CM_EVENT_MULTICAST_JOIN) ? -1 : 0;
}

int rdma_join_multicast(struct rdma_cm_id *cmid, struct sockaddr *addr, void *context)
{
	if (!rcm_id_live(cmid))
		return fail(EINVAL);
	return join(rcm_id(cmid), addr, false, context);
}

int rdma_join_multicast_ex(struct rdma_cm_id *cmid, struct rdma_cm_join_mc_attr_ex *attr,
			   void *context)
{
	if (!rcm_id_live(cmid) || !attr)
		return fail(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return fail(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return fail(EINVAL);
	return join(rcm_id(cmid), attr->addr,
		    attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

static void leave(struct rcm_id *id, struct rcm_mcast *mc)
{
	if (mc->attached && id->id.qp)
		ibv_detach_mcast(id->id.qp, &mc->mgid, 0);
	free_mcast(mc);
}

int rdma_leave_multicast(struct rdma_cm_id *cmid, struct sockaddr *addr)
{
	struct rcm_id *id = rcm_id(cmid);
	struct rcm_mcast *mc;
	socklen_t len;

	if (!rcm_id_live(cmid) || !addr || !(len = rcm_addr_len(addr)))
		return fail(EINVAL);
	pthread_mutex_lock(&mcast_lock);
	for (mc = id->mcasts; mc; mc = mc->next)
		if (mc->addrlen == len && !memcmp(&mc->addr, addr, len))
			break;
	if (mc)
		unlink_mcast(id, mc);
	pthread_mutex_unlock(&mcast_lock);
	if (!mc)
		return fail(EADDRNOTAVAIL);
	leave(id, mc);
	return 0;
}

/* The id's QP leaves the groups it was attached to (it is about to be destroyed, which a
 * QP still attached may not be); the groups stay joined, for a QP made after. */
void rcm_mcast_detach_qp(struct rcm_id *id)
{
	pthread_mutex_lock(&mcast_lock);
	for (struct rcm_mcast *mc = id->mcasts; mc; mc = mc->next)
		if (mc->attached && id->id.qp) {
			ibv_detach_mcast(id->id.qp, &mc->mgid, 0);
			mc->attached = false;
		}
	pthread_mutex_unlock(&mcast_lock);
}

void rcm_mcast_leave_all(struct rcm_id *id)
{
	struct rcm_mcast *mc;

	pthread_mutex_lock(&mcast_lock);
	mc = id->mcasts;
	id->mcasts = NULL;
	pthread_mutex_unlock(&mcast_lock);
	while (mc) {
		struct rcm_mcast *next = mc->next;

		leave(id, mc);
		mc = next;
	}
}

static void fill_ud_param(const struct rcm_id *id, const struct rcm_mcast *mc,
			  struct rdma_ud_param *p)
{
	memset(p, 0, sizeof(*p));
	p->private_data = mc->context;
	p->ah_attr.is_global = 1;
	p->ah_attr.port_num = 1;
	p->ah_attr.grh.dgid = mc->mgid;
	p->ah_attr.grh.sgid_index = source_gid_index(id);
	p->ah_attr.grh.hop_limit = MCAST_HOP_LIMIT;
	p->qp_num = PROTO_MCAST_QPN;
	p->qkey = RDMA_UDP_QKEY;
}

int rcm_mcast_event(struct rcm_id *id, const struct proto_cm_event *pe, struct rdma_cm_event *ev)
{
	struct rcm_mcast *mc;
	int err = 0;

	pthread_mutex_lock(&mcast_lock);
	for (mc = id->mcasts; mc && mc->serial != pe->conn; mc = mc->next)
		;
	if (!mc) {
		pthread_mutex_unlock(&mcast_lock);
		return EAGAIN;       /* left before the program read its join */
	}
	fill_ud_param(id, mc, &ev->param.ud);
	if (id->id.qp && !mc->send_only && !mc->attached) {
		err = ibv_attach_mcast(id->id.qp, &mc->mgid, 0);
		mc->attached = !err;
	}
	pthread_mutex_unlock(&mcast_lock);
	if (err) {
		/* as librdmacm's: -1, and the reason in errno */
		ev->event = RDMA_CM_EVENT_MULTICAST_ERROR;
		ev->status = -1;
		errno = err;
	}
	return 0;
}
