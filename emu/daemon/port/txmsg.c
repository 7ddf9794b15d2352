/* The messages of one sendmmsg: each frame alone, or, where the link keeps GSO frames
 * local (veth, lo), runs of frames of one flow as one UDP GSO frame: the first frame whole,
 * then only the UDP payloads of the rest, with a virtio-net header that tells the kernel
 * how to cut it. Every frame was built (ICRC included) with the IPv4 id and lengths that
 * segmentation gives it back: ids count up by one, as the frames' own do. Frames a UDP
 * socket carries (udptx.c) make messages of their own. */
#include <endian.h>
#include <string.h>

#include "emu/daemon/port/port.h"

/* How many frames from index first on make one GSO frame: those of first's flow, with ids
 * counting up unless a UDP socket's send is to set them (any_ids). Only the last may be
 * shorter than the first. */
unsigned txmsg_run_length(const struct port *port, unsigned first, bool any_ids)
{
	const uint8_t *a = port->tx_frames[first];
	size_t a_len = port->tx_len[first], total = a_len;
	size_t most = port->tx_via[first] >= 0 ? NET_UDP_GSO_FRAME_MAX : NET_GSO_FRAME_MAX;
	unsigned n = 1;

	while (first + n < port->tx_count && n < NET_GSO_MAX_SEGS) {
		const uint8_t *b = port->tx_frames[first + n];
		size_t b_len = port->tx_len[first + n];

		if (total + b_len - WIRE_GSO_HDR_LEN > most ||
		    port->tx_via[first + n] != port->tx_via[first] ||
		    !(any_ids ? wire_gso_same_flow(a, a_len, b, b_len) :
				wire_gso_can_follow(a, a_len, b, b_len, n)))
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

static struct iovec *packet_message(struct port *port, unsigned m, unsigned f, unsigned n,
				    struct iovec *iov)
{
	struct msghdr *h = &port->tx_msgs[m].msg_hdr;
	struct virtio_net_hdr *vh = &port->tx_vnet_hdr[m];
	size_t total = port->tx_len[f];

	h->msg_name = NULL;
	h->msg_namelen = 0;
	h->msg_control = NULL;
	h->msg_controllen = 0;
	port->tx_msg_fd[m] = port->tx_fd;
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
	return iov;
}

/* Lays out frames first.. as messages m.. (their iovecs from the one message m starts at);
 * returns the number of messages in all. */
unsigned txmsg_build(struct port *port, unsigned m, unsigned first)
{
	struct iovec *iov = m ? port->tx_msgs[m].msg_hdr.msg_iov : port->tx_iov;

	for (unsigned f = first; f < port->tx_count; m++) {
		bool udp = port->tx_via[f] >= 0;
		unsigned n = udp || port->tx_gso ? txmsg_run_length(port, f, false) : 1;
		struct msghdr *h = &port->tx_msgs[m].msg_hdr;

		h->msg_iov = iov;
		port->tx_msg_first[m] = (uint8_t)f;
		port->tx_msg_frames[m] = (uint8_t)n;
		iov = udp ? udptx_message(port, m, f, n, iov) : packet_message(port, m, f, n, iov);
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
		n += port->tx_msg_frames[m] > 1;
	return n;
}

/* The messages from m on that go by the same socket as m. */
unsigned txmsg_same_socket(const struct port *port, unsigned m, unsigned msgs)
{
	unsigned n = 1;

	while (m + n < msgs && port->tx_msg_fd[m + n] == port->tx_msg_fd[m])
		n++;
	return n;
}

/* The first frames of messages [m, msgs) as they were built, after their GSO headers. */
void txmsg_restore(struct port *port, unsigned m, unsigned msgs)
{
	for (unsigned i = m; i < msgs; i++) {
		unsigned f = port->tx_msg_first[i];

		if (port->tx_msg_fd[i] == port->tx_fd && port->tx_msg_frames[i] > 1)
			wire_gso_restore_first(port->tx_frames[f], port->tx_len[f]);
	}
}
