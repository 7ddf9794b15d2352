/* Neighbours: a peer's MAC address from the kernel's table, which the kernel fills when
 * something sends to the peer. A peer not in the table yet is waited for on a timer of the
 * client that asked, not in the loop: other clients and the wire go on meanwhile. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/daemon.h"

#define LOOK_EVERY 0.01           /* seconds between looks at the table */
#define LOOKS 100                 /* a second for the peer to answer */
#define ASK_EVERY 25              /* looks between two datagrams that make the kernel ask */
#define DISCARD_PORT 9

/* The kernel's ARP table, as /proc/net/arp of this network namespace shows it. */
static bool arp_lookup(const struct dev *dev, uint32_t ipv4, uint8_t mac[6])
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
		    strcmp(ifname, dev->ifname) ||
		    sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
			continue;
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)m[i];
		found = true;
	}
	fclose(f);
	return found;
}

/* A datagram to the peer's discard port makes the kernel resolve its address. */
static void make_kernel_ask(uint32_t ipv4)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(DISCARD_PORT),
				   .sin_addr.s_addr = ipv4 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	(void)sendto(fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
}

static void look_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct client *c = w->data;
	struct neigh_wait *nw = &c->neigh;
	uint8_t mac[6];

	(void)revents;
	nw->tries++;
	if (!arp_lookup(c->dev, nw->ipv4, mac) && nw->tries < LOOKS) {
		if (nw->tries % ASK_EVERY == 0)
			make_kernel_ask(nw->ipv4);
		return;
	}
	ev_timer_stop(loop, w);
	nw->ended = true;
	ctl_resume(c);
}

int neigh_resolve(struct client *c, uint32_t ipv4, uint8_t mac[6])
{
	struct dev *dev = c->dev;
	struct neigh_wait *nw = &c->neigh;
	bool waited = nw->ended && nw->ipv4 == ipv4;

	nw->ended = false;
	if (dev->loopback) {
		memset(mac, 0, 6);
		return 0;
	}
	if (ipv4 == dev->ipv4) {        /* a QP of this daemon: loopq.c delivers it */
		memcpy(mac, dev->mac, 6);
		return 0;
	}
	if (arp_lookup(dev, ipv4, mac))
		return 0;
	if (waited)
		return -EHOSTUNREACH;
	nw->ipv4 = ipv4;
	nw->tries = 0;
	make_kernel_ask(ipv4);
	ev_timer_set(&nw->timer, LOOK_EVERY, LOOK_EVERY);
	ev_timer_start(dev->loop, &nw->timer);
	return -EINPROGRESS;
}

void neigh_init(struct client *c)
{
	ev_init(&c->neigh.timer, look_cb);
	c->neigh.timer.data = c;
}

void neigh_stop(struct client *c)
{
	ev_timer_stop(c->dev->loop, &c->neigh.timer);
}
