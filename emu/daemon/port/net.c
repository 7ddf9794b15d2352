/* The interface: its address and MTU, the receive ring, AF_PACKET batched send, and keeping
 * the kernel from answering RoCE packets itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/ethernet.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "emu/daemon/daemon.h"


unsigned net_mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

/* The largest IB MTU whose biggest packet (IPv4, UDP, BTH, RETH, ImmDt, ICRC: 64 bytes
 * around the payload) fits the link MTU. */
enum ibv_mtu net_mtu_for_link(unsigned link_mtu)
{
	for (enum ibv_mtu m = IBV_MTU_4096; m > IBV_MTU_256; m--)
		if (net_mtu_bytes(m) + 64 <= link_mtu)
			return m;
	return IBV_MTU_256;
}

static int read_link(struct dev *dev, char *err, size_t errlen)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = -1;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev->ifname);
	if (fd < 0 || ioctl(fd, SIOCGIFINDEX, &ifr) < 0)
		goto fail;
	dev->ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		goto fail;
	dev->link_mtu = (unsigned)ifr.ifr_mtu;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		goto fail;
	dev->loopback = ifr.ifr_hwaddr.sa_family == ARPHRD_LOOPBACK;
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER && !dev->loopback) {
		snprintf(err, errlen, "%s is not an Ethernet interface", dev->ifname);
		close(fd);
		return -1;
	}
	memcpy(dev->mac, ifr.ifr_hwaddr.sa_data, 6);
	rc = 0;
fail:
	if (rc < 0)
		snprintf(err, errlen, "cannot read interface %s: %s", dev->ifname, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Frames to UDP 4791 of any address served: "udp dst port 4791 and (dst host A or ...)". */
static int open_rx(struct dev *dev, char *err, size_t errlen)
{
	char filter[64 + DEV_MAX_GIDS * (INET6_ADDRSTRLEN + 16)], ip[INET6_ADDRSTRLEN];
	size_t at = (size_t)snprintf(filter, sizeof(filter), "udp dst port %d and (",
				     WIRE_ROCE_PORT);

	for (unsigned i = 0; i < dev->ngids; i++)
		at += (size_t)snprintf(filter + at, sizeof(filter) - at, "%sdst host %s",
				       i ? " or " : "", addr_str(dev->gids[i].raw, ip, sizeof(ip)));
	snprintf(filter + at, sizeof(filter) - at, ")");
	if (rxring_open(dev, filter, err, errlen) < 0)
		return -1;
	ev_io_init(&dev->rx_watcher, net_rx_cb, dev->rx.fd, EV_READ);
	dev->rx_watcher.data = dev;
	/* After the loop was held up (a burst of clients setting up, the CPU taken away),
	 * frames and an expired retransmission timer are due together: the frames go first,
	 * so an ACK that waited in the ring stops the timer instead of losing to it. */
	ev_set_priority(&dev->rx_watcher, EV_MAXPRI);
	ev_io_start(dev->loop, &dev->rx_watcher);
	return 0;
}

/* GSO frames go where no wire follows: into a veth, whose peer gets the frame uncut, or
 * lo. On a real NIC, segmentation would fill in the UDP checksums RoCEv2 sends as 0. */
static bool link_keeps_gso_local(struct dev *dev)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr = { .ifr_data = (void *)&info };
	int fd;
	bool veth;

	if (dev->loopback)
		return true;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev->ifname);
	veth = ioctl(fd, SIOCETHTOOL, &ifr) == 0 && !strcmp(info.driver, "veth");
	close(fd);
	return veth;
}

/* Bound to the interface with protocol 0: a packet socket bound to an EtherType also
 * receives every frame of that type, a clone per frame queued to a socket nobody reads.
 * (Naming the interface in each message instead costs a device lookup per frame.) The
 * kernel reads each frame's EtherType from its Ethernet header. */
static int open_tx(struct dev *dev, char *err, size_t errlen)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_ifindex = dev->ifindex };
	int one = 1;

	dev->tx_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (dev->tx_fd < 0 || bind(dev->tx_fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		snprintf(err, errlen, "cannot open a raw socket on %s: %s%s", dev->ifname,
			 strerror(errno), errno == EPERM ? " (run as root or give rocemud "
			 "CAP_NET_RAW)" : "");
		return -1;
	}
	dev->tx_frames = calloc(DEV_TX_BATCH, DEV_FRAME_MAX);
	if (!dev->tx_frames) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!dev->gso_off && dev->rx.vnet && link_keeps_gso_local(dev))
		dev->tx_vnet = setsockopt(dev->tx_fd, SOL_PACKET, PACKET_VNET_HDR, &one,
					  sizeof(one)) == 0;
	dev->tx_gso = dev->tx_vnet;
	return 0;
}

/* With no socket on UDP 4791 the kernel would answer every RoCE packet with ICMP port
 * unreachable. A bound socket that is never read takes the packets instead: its small
 * buffer fills and the kernel drops the rest quietly. One per address served. */
static int guard_one(struct dev *dev, const struct dev_gid *g)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(WIRE_ROCE_PORT) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(WIRE_ROCE_PORT) };
	int small = 1, one = 1, fd = socket(g->ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr *sa = g->ipv6 ? (struct sockaddr *)&sin6 : (struct sockaddr *)&sin;

	memcpy(&sin.sin_addr, g->raw + 12, 4);
	memcpy(&sin6.sin6_addr, g->raw, 16);
	if (IN6_IS_ADDR_LINKLOCAL(&sin6.sin6_addr))
		sin6.sin6_scope_id = (uint32_t)dev->ifindex;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    (g->ipv6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, sa, g->ipv6 ? sizeof(sin6) : sizeof(sin)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int open_udp_guard(struct dev *dev, char *err, size_t errlen)
{
	char ip[INET6_ADDRSTRLEN];

	for (unsigned i = 0; i < dev->ngids; i++) {
		dev->udp_guard_fd[i] = guard_one(dev, &dev->gids[i]);
		if (dev->udp_guard_fd[i] < 0) {
			snprintf(err, errlen, "cannot bind UDP port %d on %s: %s%s", WIRE_ROCE_PORT,
				 addr_str(dev->gids[i].raw, ip, sizeof(ip)), strerror(errno),
				 errno == EADDRINUSE ? " (another rocemud serves this address?)" : "");
			return -1;
		}
	}
	return 0;
}

int net_open(struct dev *dev, const char *ifname, const char *const *addrs, unsigned naddrs,
	     char *err, size_t errlen)
{
	dev->tx_fd = dev->rx.fd = -1;
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++)
		dev->udp_guard_fd[i] = -1;
	snprintf(dev->ifname, sizeof(dev->ifname), "%s", ifname);
	if (strlen(ifname) >= sizeof(dev->ifname)) {
		snprintf(err, errlen, "interface name %s is too long", ifname);
		return -1;
	}
	if (addr_serve(dev, addrs, naddrs, err, errlen) || read_link(dev, err, errlen) ||
	    open_rx(dev, err, errlen) || open_tx(dev, err, errlen) ||
	    open_udp_guard(dev, err, errlen))
		return -1;
	dev->max_mtu = dev->active_mtu = net_mtu_for_link(dev->link_mtu);
	dev->ip_id = (uint16_t)getpid();
	addr_read_hop_limits(dev);
	return 0;
}

void net_close(struct dev *dev)
{
	fault_stage_free(&dev->fault_tx);
	fault_stage_free(&dev->fault_rx);
	capture_close(dev);
	if (dev->rx.fd >= 0)
		ev_io_stop(dev->loop, &dev->rx_watcher);
	rxring_close(dev);
	if (dev->tx_fd >= 0)
		close(dev->tx_fd);
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++)
		if (dev->udp_guard_fd[i] >= 0)
			close(dev->udp_guard_fd[i]);
	free(dev->tx_frames);
	loopq_free(dev);
}

void net_read_ring_drops(struct dev *dev)
{
	rxring_read_drops(dev);
}

static void rx_one(void *ctx, const uint8_t *frame, size_t len)
{
	struct dev *dev = ctx;

	capture_frame(dev, frame, len);
	net_rx_frame(dev, frame, len);
}

static void read_ring(struct dev *dev, unsigned slots)
{
	if (dev->rx.map) {
		rxring_read(dev, slots, rx_one);
		net_rx_batch_end(dev);
	}
}

/* A bounded count: a sender that never pauses would otherwise starve every timer of this
 * loop. What is left keeps the descriptor readable for the next turn. */
void net_rx_read(struct dev *dev)
{
	read_ring(dev, DEV_RX_BUDGET);
}

void net_rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	net_rx_read(w->data);
}

void net_rx_catch_up(struct dev *dev)
{
	read_ring(dev, dev->rx.slots);
}

bool net_link_up(struct dev *dev)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool up = false;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev->ifname);
	if (fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	if (fd >= 0)
		close(fd);
	return up;
}

double net_line_rate(const struct dev *dev)
{
	char path[64 + IF_NAMESIZE];
	long mbit;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", dev->ifname);
	mbit = addr_read_number(path, 0);
	return (mbit > 0 ? (double)mbit : 10000.0) * 1e6 / 8;
}
