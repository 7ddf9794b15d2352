/* The frames' way between the transport and the sockets: the batch of frames built this
 * loop iteration and its one sendmmsg, and the fault stages on both directions.
 *
 * A delivery out of a fault stage can reach far: a received frame goes through the whole
 * transport and may send, a sent frame may fill the batch and flush it. So nothing here
 * frees or moves a frame that a caller up the stack still holds: a full batch is sent
 * without touching the fault stages, and a frame held back for reordering is released
 * only at the end of a batch, from the top of the loop. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/port/port.h"

/* Where corruption may flip bits: from the BTH on, so the receiver's ICRC must catch it. */
#define FAULT_FROM (WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN)

static void note_link_up(struct port *port)
{
	if (port->link_down) {
		port->link_down = false;
		log_info("%s is up again", port->ifname);
	}
}

static void note_send_error(struct port *port, unsigned frames_lost)
{
	if ((errno == ENETDOWN || errno == ENXIO) && !port->link_down) {
		port->link_down = true;
		port->cnt->link_downed++;
		log_warn("%s is down: frames are lost until it comes back", port->ifname);
	}
	port->cnt->send_err += frames_lost;
	log_limited("sending on %s: %s", port->ifname, strerror(errno));
}

/* The packet socket refused a GSO frame: runs go through UDP sockets from now on, or,
 * where those cannot be had, every packet alone. Returns the new number of messages. */
static unsigned gso_refused(struct port *port, unsigned m, unsigned msgs)
{
	unsigned f = port->tx_msg_first[m];

	txmsg_restore(port, m, msgs);
	port->tx_gso = false;
	if (!udptx_kernel_cuts(port))
		log_info("%s: the kernel refuses UDP GSO frames on packet sockets, and this "
			 "interface would pass a UDP socket's whole (tx-udp-segmentation), which a "
			 "packet socket of this kernel cannot receive: each packet goes alone",
			 port->ifname);
	else if (udptx_open(port) == 0)
		log_info("%s: the kernel refuses UDP GSO frames on packet sockets (Linux 6.2 takes "
			 "them): runs of one QP's packets go through UDP sockets instead",
			 port->ifname);
	else
		log_info("%s: the kernel refuses UDP GSO frames, and no UDP socket can send them "
			 "(%s): each packet goes alone", port->ifname, strerror(errno));
	udptx_prepare(port, f);
	return txmsg_build(port, m, f);
}

/* A UDP socket refused message m: its frames go by the packet socket instead. A refusal of
 * GSO itself (a device without checksum offload) holds for every send after it. */
static unsigned udp_refused(struct port *port, unsigned m)
{
	bool for_good = port->tx_msg_frames[m] > 1 &&
			(errno == EIO || errno == EINVAL || errno == EOPNOTSUPP);

	port->cnt->send_udp_refused++;
	if (for_good)
		log_info("%s: UDP sockets refuse GSO sends here (%s): each packet goes alone",
			 port->ifname, strerror(errno));
	else
		log_limited("%s: a UDP socket refused a send (%s): its packets went by the packet "
			    "socket", port->ifname, strerror(errno));
	return udptx_refused(port, m, for_good);
}

static bool frames_lost(int err)
{
	return err == ENOBUFS || err == EAGAIN || err == ENETDOWN || err == ENXIO;
}

/* --pcap: every frame as it left, a GSO frame's first packet with its own headers back */
static void capture_batch(struct port *port, unsigned msgs)
{
	if (!port->cap_dumper)
		return;
	txmsg_restore(port, 0, msgs);
	for (unsigned f = 0; f < port->tx_count; f++)
		capture_frame(port, port->tx_frames[f], port->tx_len[f]);
}

/* The frames built since the last call, in a sendmmsg for each run of messages to one
 * socket. ENOBUFS means the kernel's queue was full: the frames are lost like any dropped
 * packet and RC retransmits them. */
static void send_batch(struct port *port)
{
	unsigned done = 0, msgs;

	udptx_prepare(port, 0);
	msgs = txmsg_build(port, 0, 0);
	while (done < msgs) {
		int fd = port->tx_msg_fd[done];
		int n = sendmmsg(fd, port->tx_msgs + done, txmsg_same_socket(port, done, msgs), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && fd == port->tx_fd && port->tx_gso &&
		    port->tx_msg_frames[done] > 1) {
			msgs = gso_refused(port, done, msgs);
			continue;
		}
		if (n < 0 && fd != port->tx_fd && !frames_lost(errno)) {
			msgs = udp_refused(port, done);
			continue;
		}
		if (n < 0) {
			note_send_error(port, txmsg_frames_from(port, done));
			break;
		}
		note_link_up(port);
		port->cnt->sent_gso_frames += txmsg_gso_count(port, done, done + (unsigned)n);
		done += (unsigned)n;
	}
	capture_batch(port, msgs);
	port->tx_count = 0;
}

uint8_t *net_tx_slot(struct port *port)
{
	if (port->tx_count == DEV_TX_BATCH)
		send_batch(port);
	return port->tx_frames[port->tx_count];
}

static void tx_enqueue(void *ctx, const uint8_t *frame, size_t len)
{
	struct port *port = ctx;
	uint8_t *slot = net_tx_slot(port);

	if (loopq_wants(port, frame, len)) {
		capture_frame(port, frame, len);
		port->cnt->sent_pkts++;
		loopq_push(port, frame, len);
		return;
	}
	if (mcast_wants_copy(port, frame, len))
		loopq_push(port, frame, len);
	if (slot != frame)
		memcpy(slot, frame, len);
	port->tx_len[port->tx_count] = (uint16_t)len;
	port->tx_count++;
	port->cnt->sent_pkts++;
}

void net_tx_commit(struct port *port, size_t len)
{
	uint8_t *frame = port->tx_frames[port->tx_count];

	if (port->fault.tx && fault_active(&port->fault))
		fault_apply(&port->fault_tx, frame, len, FAULT_FROM);
	else
		tx_enqueue(port, frame, len);
}

/* The loop is about to wait: a frame held back for reordering has no successor coming, so
 * it goes now, and then the whole batch. */
void net_flush(struct port *port)
{
	fault_release_held(&port->fault_tx);
	send_batch(port);
}

static void rx_deliver(void *ctx, const uint8_t *frame, size_t len)
{
	struct port *port = ctx;

	port->on_frame(port->frame_ctx, frame, len);
}

void net_rx_frame(struct port *port, const uint8_t *frame, size_t len)
{
	if (port->fault.rx && fault_active(&port->fault))
		fault_apply(&port->fault_rx, frame, len, FAULT_FROM);
	else
		port->on_frame(port->frame_ctx, frame, len);
}

void net_rx_batch_end(struct port *port)
{
	fault_release_held(&port->fault_rx);
}

/* What the old stages hold is delivered first, under the old spec (a frame received may
 * send one, so the receive side drains first): changing faults loses no frame. */
int net_set_fault(struct port *port, const char *spec, char *err, size_t errlen)
{
	struct fault_cfg cfg;

	if (fault_parse(spec, &cfg, err, errlen) < 0)
		return -1;
	if (!cfg.seeded)
		cfg.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	fault_drain(&port->fault_rx);
	fault_drain(&port->fault_tx);
	fault_stage_free(&port->fault_tx);
	fault_stage_free(&port->fault_rx);
	port->fault = cfg;
	fault_stage_init(&port->fault_tx, port->loop, &port->fault, port->cnt, tx_enqueue, port,
			 (uint64_t)addr_hash(port) << 1);
	fault_stage_init(&port->fault_rx, port->loop, &port->fault, port->cnt, rx_deliver, port,
			 (uint64_t)addr_hash(port) << 1 | 1);
	return 0;
}
