/* The messages of one sendmmsg: each frame alone, or, where the link keeps GSO frames
 * local (veth, lo), runs of frames of one flow as one UDP GSO frame: the first frame whole,
 * then only the UDP payloads of the rest, with a virtio-net header that tells the kernel
 * how to cut it. Every frame was built (ICRC included) with the IPv4 id and lengths that
 * segmentation gives it back: ids count up by one, as the frames' own do. */
#include <endian.h>
#include <string.h>

#include "emu/daemon/port/port.h"

/* How many frames from index first on go in one message. Only the last of a GSO frame may
 * be shorter than the first. */
static unsigned group_size(const struct port *port, unsigned first)
{
	const uint8_t *a = port->tx_frames[first];
	size_t a_len = port->tx_len[first], total = a_len;
	unsigned n = 1;

	if (!port->tx_gso)
		return 1;
	while (first + n < port->tx_count && n < NET_GSO_MAX_SEGS) {
		size_t b_len = port->tx_len[first + n];

		if (total + b_len - WIRE_GSO_HDR_LEN > NET_GSO_FRAME_MAX ||
		    !wire_gso_can_follow(a, a_len, port->tx_frames[first + n], b_len, n))
			break;
		total += b_len - WIRE_GSO_HDR_LEN;
		n++;
		if (b_len < a_len)
			break;
	}
	return n;
}

static void set_gso_header(struct virtio_net_hdr *vh, uint8_t *first, size_t first_len,
			   size_t total)
{
	wire_gso_set_first(first, total);
	*vh = (struct virtio_net_hdr){
		.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
		.gso_type = VIRTIO_NET_HDR_GSO_UDP_L4,
		.hdr_len = htole16(WIRE_GSO_HDR_LEN),
		.gso_size = htole16((uint16_t)(first_len - WIRE_GSO_HDR_LEN)),
		.csum_start = htole16(WIRE_ETH_LEN + WIRE_IPV4_LEN),
		.csum_offset = htole16(6),      /* the UDP checksum */
	};
}

static struct iovec *put_iov(struct iovec *iov, void *base, size_t len)
{
	*iov = (struct iovec){ .iov_base = base, .iov_len = len };
	return iov + 1;
}

/* Lays out frames first.. as messages m.. (their iovecs from the one message m starts at);
 * returns the number of messages in all. */
unsigned txmsg_build(struct port *port, unsigned m, unsigned first)
{
	struct iovec *iov = m ? port->tx_msgs[m].msg_hdr.msg_iov : port->tx_iov;

	for (unsigned f = first; f < port->tx_count; m++) {
		unsigned n = group_size(port, f);
		struct msghdr *h = &port->tx_msgs[m].msg_hdr;
		struct virtio_net_hdr *vh = &port->tx_vnet_hdr[m];

		h->msg_iov = iov;
		port->tx_msg_first[m] = (uint8_t)f;
		size_t total = port->tx_len[f];

		memset(vh, 0, sizeof(*vh));
		if (port->tx_vnet)
			iov = put_iov(iov, vh, sizeof(*vh));
		iov = put_iov(iov, port->tx_frames[f], port->tx_len[f]);
		for (unsigned k = 1; k < n; k++) {
			iov = put_iov(iov, port->tx_frames[f + k] + WIRE_GSO_HDR_LEN,
				      port->tx_len[f + k] - WIRE_GSO_HDR_LEN);
			total += port->tx_len[f + k] - WIRE_GSO_HDR_LEN;
		}
		if (n > 1)
			set_gso_header(vh, port->tx_frames[f], port->tx_len[f], total);
		h->msg_iovlen = (size_t)(iov - h->msg_iov);
		f += n;
	}
	return m;
}

/* The frames in message m and the ones after it. */
unsigned txmsg_frames_from(const struct port *port, unsigned m)
{
	return port->tx_count - port->tx_msg_first[m];
}

/* How many of messages [from, to) are GSO frames. */
unsigned txmsg_gso_count(const struct port *port, unsigned from, unsigned to)
{
	unsigned n = 0;

	for (unsigned m = from; m < to; m++)
		n += port->tx_vnet_hdr[m].gso_type != VIRTIO_NET_HDR_GSO_NONE;
	return n;
}

/* A kernel without UDP GSO on packet sockets (before Linux 6.2) refuses a GSO frame: from
 * then on every frame goes alone, with the lengths and UDP checksum 0 it was built with.
 * Returns the new number of messages. */
unsigned txmsg_without_gso(struct port *port, unsigned m, unsigned msgs)
{
	for (unsigned i = m; i < msgs; i++) {
		unsigned f = port->tx_msg_first[i];

		if (port->tx_vnet_hdr[i].gso_type != VIRTIO_NET_HDR_GSO_NONE)
			wire_gso_restore_first(port->tx_frames[f], port->tx_len[f]);
	}
	port->tx_gso = false;
	return txmsg_build(port, m, port->tx_msg_first[m]);
}
