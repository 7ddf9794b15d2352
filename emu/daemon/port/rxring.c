/* The receive ring: a TPACKET_V2 ring on a packet socket bound to the interface, filtered
 * to RoCE frames for our address, with a virtio-net header in front of every frame. That
 * header is why the ring is our own and not libpcap's: it says when the kernel hands over
 * a UDP GSO frame (several RoCE packets that a sender on this host passed down in one go,
 * which veth and lo deliver uncut), and how long its segments are. Such a frame is cut
 * here into the packets segmentation would have made. libpcap still compiles the filter.
 * V2 and not V3: a V3 block waits for its timer (about 1 ms a round trip). */
#include <endian.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/port/port.h"
#include "wire/bytes.h"

#define RX_RING_FRAMES 1024
#define RX_RING_MAX_BYTES ((size_t)64 << 20)
#define ETH_MAX_HEADER 18        /* Ethernet header and one VLAN tag */
#define RX_SLOT_OVERHEAD 96      /* tpacket2_hdr, sockaddr_ll and the virtio-net header */
#define FILTER_SNAPLEN 262144    /* what the filter keeps of a frame: all of it */

/* Every slot holds a whole frame of the link or a GSO frame of NET_GSO_FRAME_MAX, whether
 * or not this daemon sends GSO frames itself: its peer may. */
static size_t slot_bytes(const struct port *port)
{
	size_t frame = port->link_mtu + ETH_MAX_HEADER;

	if (frame < NET_GSO_FRAME_MAX)
		frame = NET_GSO_FRAME_MAX;
	return TPACKET_ALIGN(frame + RX_SLOT_OVERHEAD);
}

static int ring_geometry(const struct port *port, struct tpacket_req *req)
{
	size_t slot = slot_bytes(port), block = 4096, per_block, blocks;

	while (block < slot)
		block <<= 1;
	per_block = block / slot;
	blocks = RX_RING_FRAMES / per_block;
	if (blocks * block > RX_RING_MAX_BYTES)
		blocks = RX_RING_MAX_BYTES / block;
	if (!blocks)
		return -1;
	*req = (struct tpacket_req){ .tp_block_size = (unsigned)block,
				     .tp_block_nr = (unsigned)blocks,
				     .tp_frame_size = (unsigned)slot,
				     .tp_frame_nr = (unsigned)(blocks * per_block) };
	return 0;
}

static int attach_filter(struct port *port, const char *filter, char *err, size_t errlen)
{
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, FILTER_SNAPLEN);
	struct bpf_program prog;
	struct sock_fprog fprog;
	int rc;

	if (!dead || pcap_compile(dead, &prog, filter, 1, PCAP_NETMASK_UNKNOWN) < 0) {
		snprintf(err, errlen, "cannot compile the filter '%s'%s%s", filter,
			 dead ? ": " : "", dead ? pcap_geterr(dead) : "");
		if (dead)
			pcap_close(dead);
		return -1;
	}
	pcap_close(dead);
	fprog.len = (unsigned short)prog.bf_len;
	fprog.filter = (struct sock_filter *)prog.bf_insns;
	rc = setsockopt(port->rx.fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof(fprog));
	pcap_freecode(&prog);
	if (rc < 0)
		snprintf(err, errlen, "cannot filter on %s: %s", port->ifname, strerror(errno));
	return rc;
}

static int map_ring(struct port *port, char *err, size_t errlen)
{
	struct tpacket_req req;
	int version = TPACKET_V2;

	if (ring_geometry(port, &req) < 0) {
		snprintf(err, errlen, "%s: MTU %u is too large for a receive ring", port->ifname,
			 port->link_mtu);
		return -1;
	}
	if (setsockopt(port->rx.fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0 ||
	    setsockopt(port->rx.fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0) {
		snprintf(err, errlen, "cannot set up a receive ring on %s: %s", port->ifname,
			 strerror(errno));
		return -1;
	}
	port->rx.map_bytes = (size_t)req.tp_block_size * req.tp_block_nr;
	port->rx.map = mmap(NULL, port->rx.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			   port->rx.fd, 0);
	if (port->rx.map == MAP_FAILED) {
		port->rx.map = NULL;
		snprintf(err, errlen, "cannot map the receive ring: %s", strerror(errno));
		return -1;
	}
	port->rx.slot_bytes = req.tp_frame_size;
	port->rx.slots_per_block = req.tp_block_size / req.tp_frame_size;
	port->rx.block_bytes = req.tp_block_size;
	port->rx.slots = req.tp_frame_nr;
	return 0;
}

/* The socket joins the interface's receive path only at bind, once the filter is in
 * place: no frame of another kind reaches the ring. Our own frames are not offered to it
 * (Linux 4.20; older kernels mark them PACKET_OUTGOING and they are skipped). */
int rxring_open(struct port *port, const char *filter, char *err, size_t errlen)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = port->ifindex };
	int one = 1;

	port->rx.fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (port->rx.fd < 0) {
		snprintf(err, errlen, "cannot capture on %s: %s%s", port->ifname, strerror(errno),
			 errno == EPERM ? " (raw sockets need root or CAP_NET_RAW)" : "");
		return -1;
	}
	port->rx.vnet = setsockopt(port->rx.fd, SOL_PACKET, PACKET_VNET_HDR, &one,
				  sizeof(one)) == 0;
	(void)setsockopt(port->rx.fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (map_ring(port, err, errlen) < 0 || attach_filter(port, filter, err, errlen) < 0)
		return -1;
	if (bind(port->rx.fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		snprintf(err, errlen, "cannot capture on %s: %s", port->ifname, strerror(errno));
		return -1;
	}
	return 0;
}

void rxring_close(struct port *port)
{
	if (port->rx.map)
		munmap(port->rx.map, port->rx.map_bytes);
	if (port->rx.fd >= 0)
		close(port->rx.fd);
	port->rx.map = NULL;
	port->rx.fd = -1;
}

/* The kernel counts the frames it found no free slot for, and clears its count on read. */
void rxring_read_drops(struct port *port)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (port->rx.fd >= 0 &&
	    getsockopt(port->rx.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		port->cnt->drop_ring_full += st.tp_drops;
}

static struct tpacket2_hdr *slot_at(const struct rx_ring *r, unsigned i)
{
	return (struct tpacket2_hdr *)(r->map + (size_t)(i / r->slots_per_block) * r->block_bytes +
				       (size_t)(i % r->slots_per_block) * r->slot_bytes);
}

/* The kernel keeps a VLAN tag beside the frame; put it back where a wire has it (the
 * slot has room in front of the frame). */
static uint8_t *restore_vlan(const struct tpacket2_hdr *h, uint8_t *frame, size_t *len)
{
	uint16_t tpid = (h->tp_status & TP_STATUS_VLAN_TPID_VALID) && h->tp_vlan_tpid ?
			h->tp_vlan_tpid : WIRE_ETHERTYPE_VLAN;

	memmove(frame - WIRE_VLAN_LEN, frame, 12);
	frame -= WIRE_VLAN_LEN;
	put16(frame + 12, tpid);
	put16(frame + 14, h->tp_vlan_tci);
	*len += WIRE_VLAN_LEN;
	return frame;
}

static void take_slot(struct port *port, struct tpacket2_hdr *h, wire_deliver_fn deliver)
{
	const struct sockaddr_ll *sll =
		(const struct sockaddr_ll *)((uint8_t *)h + TPACKET_ALIGN(sizeof(*h)));
	uint8_t *frame = (uint8_t *)h + h->tp_mac;
	size_t len = h->tp_snaplen;
	struct virtio_net_hdr vh = { 0 };

	if (sll->sll_pkttype == PACKET_OUTGOING)
		return;
	if (h->tp_len > h->tp_snaplen) {
		port->cnt->drop_truncated++;
		return;
	}
	if (port->rx.vnet)
		memcpy(&vh, frame - sizeof(vh), sizeof(vh));
	if (h->tp_status & TP_STATUS_VLAN_VALID)
		frame = restore_vlan(h, frame, &len);
	if ((vh.gso_type & ~VIRTIO_NET_HDR_GSO_ECN) == VIRTIO_NET_HDR_GSO_UDP_L4) {
		if (wire_gso_split(frame, len, le16toh(vh.gso_size), deliver, port))
			port->cnt->rcvd_gso_frames++;
		else
			port->cnt->drop_malformed++;
	} else if (vh.gso_type != VIRTIO_NET_HDR_GSO_NONE) {
		port->cnt->drop_malformed++;      /* TCP or UFO: not RoCE */
	} else {
		deliver(port, frame, len);
	}
}

static bool slot_filled(const struct rx_ring *r, unsigned i)
{
	return __atomic_load_n(&slot_at(r, i % r->slots)->tp_status, __ATOMIC_ACQUIRE) &
	       TP_STATUS_USER;
}

/* At most budget slots, in ring order; each goes back to the kernel once handled. While a
 * frame is delivered, rx.congested says whether mark_backlog more wait behind it. */
void rxring_read(struct port *port, unsigned budget, wire_deliver_fn deliver)
{
	struct rx_ring *r = &port->rx;
	unsigned mark = port->ce_mark_backlog < r->slots ? port->ce_mark_backlog : r->slots - 1;

	while (budget--) {
		struct tpacket2_hdr *h = slot_at(r, r->head);

		if (!slot_filled(r, r->head))
			break;
		r->congested = slot_filled(r, r->head + mark);
		take_slot(port, h, deliver);
		__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		r->head = (r->head + 1) % r->slots;
	}
	r->congested = false;
}
