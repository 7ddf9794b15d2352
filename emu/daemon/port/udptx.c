/* Runs of frames through UDP sockets, where the packet socket refuses UDP GSO frames
 * (Linux before 6.2, Debian 12's 6.1 among them). A UDP socket with UDP_SEGMENT takes a
 * run of one flow's packets in one send and one trip through the kernel, which cuts it
 * (or the NIC does) and hands the device the packets in one batch: one notification of a
 * virtio-net device for the run instead of one a packet, the dearest step in a guest.
 *
 * The kernel writes the headers itself, so each frame is first given what its send will
 * give it: the socket's source port, and the IPv4 id of an unconnected socket that sets
 * DF, 0 for the first packet of a send and counting up through a GSO frame. Its ICRC is
 * patched to match (wire_gso_reflow()), so a frame is as right, or as deliberately wrong,
 * as it was built. TOS and TTL go with each send; the kernel fills in UDP checksums,
 * which rxe accepts (make interop checks it). One socket per IPv4 address served, bound
 * to it and to the interface; IPv6, multicast and other frames keep the packet socket.
 *
 * Only where the kernel cuts the GSO frame before the interface: a veth or lo (or a VLAN
 * or bridge on one) takes it whole (tx-udp-segmentation) and hands it so to the peer, and
 * a packet socket of those kernels cannot receive a UDP GSO frame (virtio_net_hdr has no
 * word for it before 6.2): a rocemud on the same host would lose every one. A virtio-net
 * NIC of those kernels cannot segment UDP, so the kernel does. */
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "emu/daemon/port/port.h"
#include "wire/bytes.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define IP_AT WIRE_ETH_LEN
#define UDP_AT (WIRE_ETH_LEN + WIRE_IPV4_LEN)
#define UDPTX_SNDBUF (4 << 20)

static int open_one(struct port *port, const struct port_gid *g, uint16_t *src_port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int pmtu = IP_PMTUDISC_DO, small = 1, big = UDPTX_SNDBUF;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memcpy(&sin.sin_addr, g->raw + 12, 4);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, port->ifname, strlen(port->ifname)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	*src_port = ntohs(sin.sin_port);
	return fd;
}

/* The interface's feature named name: 1 on, 0 off or unknown to the kernel, -1 when the
 * kernel would not say (ETHTOOL_GFEATURES). *offered: whether the device can turn it on. */
static int feature_state(int fd, const char *ifname, const char *name, bool *offered)
{
	/* room for the one count the kernel appends to the header (its data[]) */
	uint64_t sset_room[(sizeof(struct ethtool_sset_info) + sizeof(uint32_t) + 7) / 8] = { 0 };
	struct ethtool_sset_info *sset = (void *)sset_room;
	struct ifreq ifr = { .ifr_data = (void *)sset };
	struct ethtool_gstrings *names = NULL;
	struct ethtool_gfeatures *feats = NULL;
	int state = -1;
	uint32_t n;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	sset->cmd = ETHTOOL_GSSET_INFO;
	sset->sset_mask = 1ull << ETH_SS_FEATURES;
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0 || !sset->sset_mask)
		return -1;
	n = sset->data[0];
	names = calloc(1, sizeof(*names) + (size_t)n * ETH_GSTRING_LEN);
	feats = calloc(1, sizeof(*feats) + (n + 31) / 32 * sizeof(feats->features[0]));
	if (!names || !feats)
		goto out;
	*names = (struct ethtool_gstrings){ .cmd = ETHTOOL_GSTRINGS, .string_set = ETH_SS_FEATURES,
					    .len = n };
	ifr.ifr_data = (void *)names;
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0)
		goto out;
	feats->cmd = ETHTOOL_GFEATURES;
	feats->size = (n + 31) / 32;
	ifr.ifr_data = (void *)feats;
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0)
		goto out;
	state = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!strncmp((const char *)names->data + (size_t)i * ETH_GSTRING_LEN, name,
			     ETH_GSTRING_LEN)) {
			state = !!(feats->features[i / 32].active & (1u << (i % 32)));
			*offered = !!(feats->features[i / 32].available & (1u << (i % 32)));
		}
out:
	free(names);
	free(feats);
	return state;
}

static int segmentation_state(const struct port *port, bool *offered)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int state;

	*offered = false;
	if (fd < 0)
		return -1;
	state = feature_state(fd, port->ifname, "tx-udp-segmentation", offered);
	close(fd);
	return state;
}

bool udptx_kernel_cuts(const struct port *port)
{
	bool offered;

	return segmentation_state(port, &offered) == 0;
}

bool udptx_segmentation_off(const struct port *port)
{
	bool offered;

	return segmentation_state(port, &offered) == 0 && offered;
}

int udptx_open(struct port *port)
{
	for (unsigned i = 0; i < port->ngids; i++) {
		if (port->gids[i].ipv6)
			continue;
		port->udp_tx_fd[i] = open_one(port, &port->gids[i], &port->udp_tx_port[i]);
		if (port->udp_tx_fd[i] < 0) {
			int e = errno;

			udptx_close(port);
			errno = e;
			return -1;
		}
	}
	port->tx_udp = true;
	return 0;
}

void udptx_close(struct port *port)
{
	for (unsigned i = 0; i < DEV_MAX_GIDS; i++) {
		if (port->udp_tx_fd[i] >= 0)
			close(port->udp_tx_fd[i]);
		port->udp_tx_fd[i] = -1;
	}
	port->tx_udp = false;
}

/* The socket that carries a frame: IPv4 unicast UDP from an address served. */
static int socket_for(const struct port *port, const uint8_t *frame, size_t len)
{
	const uint8_t *ip = frame + IP_AT;
	uint8_t gid[16];
	int i;

	if (len <= WIRE_GSO_HDR_LEN || get16(frame + 12) != WIRE_ETHERTYPE_IPV4 ||
	    ip[0] != 0x45 || ip[9] != 17 || ip[16] >= 224)
		return -1;
	addr_gid(gid, 4, ip + 12);
	i = addr_find(port, gid);
	return i >= 0 && port->udp_tx_fd[i] >= 0 ? i : -1;
}

void udptx_prepare(struct port *port, unsigned first)
{
	size_t carry_len = 0;
	uint32_t carry = 0;

	if (!port->tx_udp) {
		memset(port->tx_via + first, -1, port->tx_count - first);
		return;
	}
	for (unsigned f = first; f < port->tx_count; f++)
		port->tx_via[f] = (int8_t)socket_for(port, port->tx_frames[f], port->tx_len[f]);
	for (unsigned f = first, n; f < port->tx_count; f += n) {
		int via = port->tx_via[f];

		n = via < 0 ? 1 : txmsg_run_length(port, f, true);
		for (unsigned k = 0; via >= 0 && k < n; k++) {
			size_t len = port->tx_len[f + k];

			if (len != carry_len) {
				carry = wire_gso_reflow_carry(len);
				carry_len = len;
			}
			wire_gso_reflow(port->tx_frames[f + k], len, (uint16_t)k,
					port->udp_tx_port[via], carry);
		}
	}
}

static struct cmsghdr *put_cmsg(struct cmsghdr *c, int level, int type, const void *data,
				size_t len)
{
	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(len);
	memcpy(CMSG_DATA(c), data, len);
	return (struct cmsghdr *)((uint8_t *)c + CMSG_SPACE(len));
}

/* Message m: n prepared frames from f, as a UDP socket's send of their payloads. */
struct iovec *udptx_message(struct port *port, unsigned m, unsigned f, unsigned n,
			    struct iovec *iov)
{
	struct msghdr *h = &port->tx_msgs[m].msg_hdr;
	const uint8_t *first = port->tx_frames[f], *ip = first + IP_AT;
	struct sockaddr_in *dst = &port->tx_dst[m];
	struct cmsghdr *c = (struct cmsghdr *)port->tx_cmsg[m].buf;
	int tos = ip[1], ttl = ip[8];
	uint16_t seg = (uint16_t)(port->tx_len[f] - WIRE_GSO_HDR_LEN);

	*dst = (struct sockaddr_in){ .sin_family = AF_INET };
	memcpy(&dst->sin_addr, ip + 16, 4);
	memcpy(&dst->sin_port, first + UDP_AT + 2, 2);
	h->msg_name = dst;
	h->msg_namelen = sizeof(*dst);
	h->msg_control = c;
	c = put_cmsg(c, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	c = put_cmsg(c, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
	if (n > 1)
		c = put_cmsg(c, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg));
	h->msg_controllen = (size_t)((uint8_t *)c - port->tx_cmsg[m].buf);
	port->tx_msg_fd[m] = port->udp_tx_fd[port->tx_via[f]];
	for (unsigned k = 0; k < n; k++) {
		*iov++ = (struct iovec){ .iov_base = port->tx_frames[f + k] + WIRE_GSO_HDR_LEN,
					 .iov_len = port->tx_len[f + k] - WIRE_GSO_HDR_LEN };
	}
	return iov;
}

/* A send the kernel refused: messages from m on go by the packet socket, the frames as
 * prepared (each a valid frame with the id and port given). Only for message m's frames,
 * or, when the refusal means the kernel cannot take GSO through UDP sockets either, for
 * every frame from then on. Returns the new number of messages. */
unsigned udptx_refused(struct port *port, unsigned m, bool for_good)
{
	unsigned f = port->tx_msg_first[m], end = f + port->tx_msg_frames[m];

	if (for_good) {
		udptx_close(port);
		end = port->tx_count;
	}
	for (unsigned i = f; i < end; i++)
		port->tx_via[i] = -1;
	return txmsg_build(port, m, f);
}
