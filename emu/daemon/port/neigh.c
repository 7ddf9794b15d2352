/* Neighbours: a peer's MAC address from the kernel's tables (ARP for IPv4, neighbour
 * discovery for IPv6), which the kernel fills when something sends to the peer. A peer not in the table yet is waited for on a timer of the
 * client that asked, not in the loop: other clients and the wire go on meanwhile. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/port/port.h"

#define LOOK_EVERY 0.01           /* seconds between looks at the table */
#define LOOKS 100                 /* a second for the peer to answer */
#define ASK_EVERY 25              /* looks between two datagrams that make the kernel ask */
#define DISCARD_PORT 9

/* The kernel's ARP table, as /proc/net/arp of this network namespace shows it. */
static bool arp_lookup(const struct port *port, uint32_t ipv4, uint8_t mac[6])
{
	char line[256], ip[64], hw[64], ifname[64];
	unsigned type, flags;
	FILE *f = fopen("/proc/net/arp", "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		struct in_addr a;
		unsigned m[6];

		if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %63s", ip, &type, &flags, hw, ifname) != 5 ||
		    inet_pton(AF_INET, ip, &a) != 1 || a.s_addr != ipv4 || !(flags & ATF_COM) ||
		    strcmp(ifname, port->ifname) ||
		    sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
			continue;
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)m[i];
		found = true;
	}
	fclose(f);
	return found;
}

#define NUD_USABLE (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT)

/* One RTM_NEWNEIGH of the dump: true with mac filled when it is ip6 on our interface. */
static bool neigh_matches(const struct port *port, const struct nlmsghdr *nh,
			  const uint8_t ip6[16], uint8_t mac[6])
{
	const struct ndmsg *nd = NLMSG_DATA(nh);
	int len = (int)nh->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*nd));
	const uint8_t *lladdr = NULL;
	bool dst = false;

	if (nh->nlmsg_type != RTM_NEWNEIGH || len < 0 || nd->ndm_family != AF_INET6 ||
	    nd->ndm_ifindex != port->ifindex || !(nd->ndm_state & NUD_USABLE))
		return false;
	for (const struct rtattr *a = (const struct rtattr *)((const char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	     RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == 16)
			dst = !memcmp(RTA_DATA(a), ip6, 16);
		else if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6)
			lladdr = RTA_DATA(a);
	}
	if (!dst || !lladdr)
		return false;
	memcpy(mac, lladdr, 6);
	return true;
}

/* The kernel's IPv6 neighbour table, asked over rtnetlink (no /proc file shows it). */
static bool nd_lookup(const struct port *port, const uint8_t ip6[16], uint8_t mac[6])
{
	struct { struct nlmsghdr nh; struct ndmsg nd; } req = {
		.nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg)), .nlmsg_type = RTM_GETNEIGH,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.nd = { .ndm_family = AF_INET6, .ndm_ifindex = port->ifindex },
	};
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	bool found = false, done = false;

	if (fd < 0 || send(fd, &req, req.nh.nlmsg_len, 0) < 0)
		goto out;
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		int left = (int)n;

		if (n <= 0)
			break;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, left);
		     nh = NLMSG_NEXT(nh, left)) {
			done = nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR;
			if (done)
				break;
			found = found || neigh_matches(port, nh, ip6, mac);
		}
	}
out:
	if (fd >= 0)
		close(fd);
	return found;
}

static bool table_lookup(const struct port *port, const uint8_t gid[16], uint8_t mac[6])
{
	uint32_t ipv4;

	if (!addr_gid_is_ipv4(gid))
		return nd_lookup(port, gid, mac);
	memcpy(&ipv4, gid + 12, 4);
	return arp_lookup(port, ipv4, mac);
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
