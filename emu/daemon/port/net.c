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

#include "emu/daemon/port/port.h"


/* The largest IB MTU whose biggest packet (IPv4, UDP, BTH, RETH, ImmDt, ICRC: 64 bytes
 * around the payload) fits the link MTU. */
enum ibv_mtu net_mtu_for_link(unsigned link_mtu)
{
	for (enum ibv_mtu m = IBV_MTU_4096; m > IBV_MTU_256; m--)
		if (net_mtu_bytes(m) + 64 <= link_mtu)
			return m;
	return IBV_MTU_256;
}

static int read_link(struct port *port, char *err, size_t errlen)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = -1;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", port->ifname);
	if (fd < 0 || ioctl(fd, SIOCGIFINDEX, &ifr) < 0)
		goto fail;
	port->ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		goto fail;
	port->link_mtu = (unsigned)ifr.ifr_mtu;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		goto fail;
	port->loopback = ifr.ifr_hwaddr.sa_family == ARPHRD_LOOPBACK;
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER && !port->loopback) {
		snprintf(err, errlen, "%s is not an Ethernet interface", port->ifname);
		close(fd);
		return -1;
	}
	memcpy(port->mac, ifr.ifr_hwaddr.sa_data, 6);
	rc = 0;
fail:
	if (rc < 0)
		snprintf(err, errlen, "cannot read interface %s: %s", port->ifname, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Frames to UDP 4791 of any address served, and of any multicast group (which the
 * transport drops unless a QP is attached to it): "udp dst port 4791 and (dst host A or
 * ... or dst net 224.0.0.0/4 or dst net ff00::/8)". */
static int open_rx(struct port *port, char *err, size_t errlen)
{
	char filter[128 + DEV_MAX_GIDS * (INET6_ADDRSTRLEN + 16)], ip[INET6_ADDRSTRLEN];
	size_t at = (size_t)snprintf(filter, sizeof(filter), "udp dst port %d and (",
				     WIRE_ROCE_PORT);

	for (unsigned i = 0; i < port->ngids; i++)
		at += (size_t)snprintf(filter + at, sizeof(filter) - at, "%sdst host %s",
				       i ? " or " : "", addr_str(port->gids[i].raw, ip, sizeof(ip)));
	snprintf(filter + at, sizeof(filter) - at, "%sdst net 224.0.0.0/4 or dst net ff00::/8)",
		 port->ngids ? " or " : "");
	if (rxring_open(port, filter, err, errlen) < 0)
		return -1;
	ev_io_init(&port->rx_watcher, net_rx_cb, port->rx.fd, EV_READ);
	port->rx_watcher.data = port;
	/* After the loop was held up (a burst of clients setting up, the CPU taken away),
	 * frames and an expired retransmission timer are due together: the frames go first,
	 * so an ACK that waited in the ring stops the timer instead of losing to it. */
	ev_set_priority(&port->rx_watcher, EV_MAXPRI);
	ev_io_start(port->loop, &port->rx_watcher);
	return 0;
}

/* Bound to the interface with protocol 0: a packet socket bound to an EtherType also
 * receives every frame of that type, a clone per frame queued to a socket nobody reads.
 * (Naming the interface in each message instead costs a device lookup per frame.) The
 * kernel reads each frame's EtherType from its Ethernet header. */
static int open_tx(struct port *port, char *err, size_t errlen)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_ifindex = port->ifindex };
	int one = 1;

	port->tx_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (port->tx_fd < 0 || bind(port->tx_fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		snprintf(err, errlen, "cannot open a raw socket on %s: %s%s", port->ifname,
			 strerror(errno), errno == EPERM ? " (run as root or give rocemud "
			 "CAP_NET_RAW)" : "");
		return -1;
	}
	port->tx_frames = calloc(DEV_TX_BATCH, DEV_FRAME_MAX);
	if (!port->tx_frames) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* On any link: where no peer on this host takes the GSO frame whole, the kernel (or
	 * the NIC) cuts it, and fills in the UDP checksums RoCE v2 senders leave 0; rxe takes
	 * them (make interop checks them on the tap) */
	if (!port->gso_off && port->rx.vnet)
		port->tx_vnet = setsockopt(port->tx_fd, SOL_PACKET, PACKET_VNET_HDR, &one,
					  sizeof(one)) == 0;
	port->tx_gso = port->tx_vnet;
	return 0;
}

/* With no socket on UDP 4791 the kernel would answer every RoCE packet with ICMP port
 * unreachable. A bound socket that is never read takes the packets instead: its small
 * buffer fills and the kernel drops the rest quietly. One per address served. */
static int guard_one(struct port *port, const struct port_gid *g)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(WIRE_ROCE_PORT) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(WIRE_ROCE_PORT) };
	int small = 1, one = 1, fd = socket(g->ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr *sa = g->ipv6 ? (struct sockaddr *)&sin6 : (struct sockaddr *)&sin;

	memcpy(&sin.sin_addr, g->raw + 12, 4);
	memcpy(&sin6.sin6_addr, g->raw, 16);
	if (IN6_IS_ADDR_LINKLOCAL(&sin6.sin6_addr))
		sin6.sin6_scope_id = (uint32_t)port->ifindex;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    (g->ipv6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, sa, g->ipv6 ? sizeof(sin6) : sizeof(sin)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Who likely holds UDP 4791: the kernel's Soft-RoCE binds it on every address of its
 * network namespace as soon as its module is loaded, with or without an rxe device. */
static const char *port_holder_hint(int err)
{
	if (err != EADDRINUSE)
		return "";
	if (access("/sys/module/rdma_rxe", F_OK) == 0)
		return " (the kernel's rdma_rxe module holds it while it is loaded: delete its "
		       "devices with 'rdma link delete rxe0' and so on, then 'modprobe -r rdma_rxe')";
	return " (another rocemud, or another RoCE program, serves this address?)";
}

static int open_udp_guard(struct port *port, char *err, size_t errlen)
{
	char ip[INET6_ADDRSTRLEN];

	for (unsigned i = 0; i < port->ngids; i++) {
		port->udp_guard_fd[i] = guard_one(port, &port->gids[i]);
		if (port->udp_guard_fd[i] < 0) {
			int e = errno;

			snprintf(err, errlen, "cannot bind UDP port %d on %s: %s%s", WIRE_ROCE_PORT,
				 addr_str(port->gids[i].raw, ip, sizeof(ip)), strerror(e),
				 port_holder_hint(e));
			return -1;
		}
	}
	return 0;
}

int net_open(struct port *port, const char *ifname, const char *const *addrs, unsigned naddrs,
	     char *err, size_t errlen)
{
	port->tx_fd = port->rx.fd = port->link_fd = -1;
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++)
		port->udp_guard_fd[i] = port->udp_tx_fd[i] = -1;
	port->neigh_fd = neigh_socket_open();
	if (port->neigh_fd < 0) {
		snprintf(err, errlen, "cannot open an rtnetlink socket for the neighbour tables: %s",
			 strerror(errno));
		return -1;
	}
	snprintf(port->ifname, sizeof(port->ifname), "%s", ifname);
	if (strlen(ifname) >= sizeof(port->ifname)) {
		snprintf(err, errlen, "interface name %s is too long", ifname);
		return -1;
	}
	if (addr_serve(port, addrs, naddrs, err, errlen) || read_link(port, err, errlen) ||
	    open_rx(port, err, errlen) || open_tx(port, err, errlen) ||
	    open_udp_guard(port, err, errlen) || link_watch_open(port, err, errlen))
		return -1;
	port->max_mtu = port->active_mtu = net_mtu_for_link(port->link_mtu);
	port->ip_id = (uint16_t)getpid();
	addr_read_hop_limits(port);
	return 0;
}

void net_close(struct port *port)
{
	fault_stage_free(&port->fault_tx);
	fault_stage_free(&port->fault_rx);
	capture_close(port);
	if (port->rx.fd >= 0)
		ev_io_stop(port->loop, &port->rx_watcher);
	rxring_close(port);
	if (port->tx_fd >= 0)
		close(port->tx_fd);
	if (port->neigh_fd >= 0)
		close(port->neigh_fd);
	link_watch_close(port);
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++)
		if (port->udp_guard_fd[i] >= 0)
			close(port->udp_guard_fd[i]);
	udptx_close(port);
	free(port->tx_frames);
	loopq_free(port);
	mcast_free(port);
}

void net_read_ring_drops(struct port *port)
{
	rxring_read_drops(port);
}

static void rx_one(void *ctx, const uint8_t *frame, size_t len)
{
	struct port *port = ctx;

	capture_frame(port, frame, len);
	net_rx_frame(port, frame, len);
}

static void read_ring(struct port *port, unsigned slots)
{
	if (port->rx.map) {
		rxring_read(port, slots, rx_one);
		net_rx_batch_end(port);
	}
}

/* A bounded count: a sender that never pauses would otherwise starve every timer of this
 * loop. What is left keeps the descriptor readable for the next turn. */
void net_rx_read(struct port *port)
{
	read_ring(port, DEV_RX_BUDGET);
}

void net_rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	net_rx_read(w->data);
}

void net_rx_catch_up(struct port *port)
{
	read_ring(port, port->rx.slots);
}

bool net_link_up(struct port *port)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool up = false;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", port->ifname);
	if (fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	if (fd >= 0)
		close(fd);
	return up;
}

double net_line_rate(const struct port *port)
{
	char path[64 + IF_NAMESIZE];
	long mbit;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", port->ifname);
	mbit = addr_read_number(path, 0);
	return (mbit > 0 ? (double)mbit : 10000.0) * 1e6 / 8;
}
