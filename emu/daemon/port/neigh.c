/* Neighbours: a peer's MAC address from the kernel's tables (ARP for IPv4, neighbour
 * discovery for IPv6), asked over rtnetlink one entry at a time, which the kernel fills
 * when something sends to the peer. A peer not in the table yet is waited for on a timer
 * of the client that asked, not in the loop: other clients and the wire go on meanwhile. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/port/port.h"
#include "wire/rtnl.h"

#define LOOK_EVERY 0.01           /* seconds between looks at the table */
#define LOOKS 100                 /* a second for the peer to answer */
#define ASK_EVERY 25              /* looks between two datagrams that make the kernel ask */
#define DISCARD_PORT 9

int neigh_socket_open(void)
{
	return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
}

/* The kernel's neighbour entry for the GID's address on our interface (ARP for IPv4,
 * neighbour discovery for IPv6), asked for alone over rtnetlink: the kernel answers within
 * the send, so the reply is read without waiting; a missing entry is an error reply. */
static bool table_lookup(const struct port *port, const uint8_t gid[16], uint8_t mac[6])
{
	static uint32_t seq;
	bool v4 = addr_gid_is_ipv4(gid);
	uint8_t req[RTNL_NEIGH_REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	char buf[RTNL_NEIGH_ANSWER_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	size_t len = rtnl_neigh_request(req, ++seq, v4 ? AF_INET : AF_INET6, port->ifindex,
					v4 ? gid + 12 : gid);
	ssize_t n;

	if (send(port->neigh_fd, req, len, 0) < 0)
		return false;
	/* an answer to an earlier ask that went unread is skipped by its sequence number */
	while ((n = recv(port->neigh_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		int found = rtnl_neigh_answer(buf, (size_t)n, seq, mac);

		if (found >= 0)
			return found == 1;
	}
	return false;
}

/* A datagram to the peer's discard port makes the kernel resolve its address. */
static void make_kernel_ask(const struct port *port, const uint8_t gid[16])
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(DISCARD_PORT) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(DISCARD_PORT) };
	bool ipv6 = !addr_gid_is_ipv4(gid);
	int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	memcpy(&sin.sin_addr, gid + 12, 4);
	memcpy(&sin6.sin6_addr, gid, 16);
	if (IN6_IS_ADDR_LINKLOCAL(&sin6.sin6_addr))
		sin6.sin6_scope_id = (uint32_t)port->ifindex;
	(void)sendto(fd, "", 0, MSG_DONTWAIT, ipv6 ? (struct sockaddr *)&sin6 : (struct sockaddr *)&sin,
		     ipv6 ? sizeof(sin6) : sizeof(sin));
	close(fd);
}

static void look_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct neigh_wait *nw = w->data;
	uint8_t mac[6];

	(void)revents;
	nw->tries++;
	if (!table_lookup(nw->port, nw->gid, mac) && nw->tries < LOOKS) {
		if (nw->tries % ASK_EVERY == 0)
			make_kernel_ask(nw->port, nw->gid);
		return;
	}
	ev_timer_stop(loop, w);
	nw->ended = true;
	nw->port->on_neigh_ready(nw->owner);
}

int neigh_resolve(struct neigh_wait *nw, const uint8_t gid[16], uint8_t mac[6])
{
	struct port *port = nw->port;
	bool waited = nw->ended && !memcmp(nw->gid, gid, 16);

	nw->ended = false;
	if (port->loopback) {
		memset(mac, 0, 6);
		return 0;
	}
	if (addr_gid_is_multicast(gid)) {  /* a group: the kernel's mapping, no neighbour */
		addr_multicast_mac(gid, mac);
		return 0;
	}
	if (addr_find(port, gid) >= 0) {   /* a QP of this daemon: loopq.c delivers it */
		memcpy(mac, port->mac, 6);
		return 0;
	}
	if (table_lookup(port, gid, mac))
		return 0;
	if (waited)
		return -EHOSTUNREACH;
	memcpy(nw->gid, gid, 16);
	nw->tries = 0;
	make_kernel_ask(port, gid);
	ev_timer_set(&nw->timer, LOOK_EVERY, LOOK_EVERY);
	ev_timer_start(port->loop, &nw->timer);
	return -EINPROGRESS;
}

void neigh_init(struct neigh_wait *nw, struct port *port, void *owner)
{
	nw->port = port;
	nw->owner = owner;
	ev_init(&nw->timer, look_cb);
	nw->timer.data = nw;
}

void neigh_stop(struct neigh_wait *nw)
{
	ev_timer_stop(nw->port->loop, &nw->timer);
}
