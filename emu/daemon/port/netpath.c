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

#include "emu/daemon/daemon.h"

/* Where corruption may flip bits: from the BTH on, so the receiver's ICRC must catch it. */
#define FAULT_FROM (WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN)

static void note_link_up(struct dev *dev)
{
	if (dev->link_down) {
		dev->link_down = false;
		log_info("%s is up again", dev->ifname);
	}
}

static void note_send_error(struct dev *dev, unsigned frames_lost)
{
	if ((errno == ENETDOWN || errno == ENXIO) && !dev->link_down) {
		dev->link_down = true;
		dev->cnt.link_downed++;
		log_warn("%s is down: frames are lost until it comes back", dev->ifname);
	}
	dev->cnt.send_err += frames_lost;
	log_limited("sending on %s: %s", dev->ifname, strerror(errno));
}

/* One sendmmsg for the frames built since the last one. ENOBUFS means the kernel's queue
 * was full: the frames are lost like any dropped packet and RC retransmits them. */
static void send_batch(struct dev *dev)
{
	unsigned done = 0, msgs = txmsg_build(dev, 0, 0);

	while (done < msgs) {
		int n = sendmmsg(dev->tx_fd, dev->tx_msgs + done, msgs - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && dev->tx_gso &&
		    txmsg_gso_count(dev, done, msgs)) {
			log_info("%s: the kernel refuses UDP GSO frames; each packet goes alone",
				 dev->ifname);
			msgs = txmsg_without_gso(dev, done, msgs);
			continue;
		}
		if (n < 0) {
			note_send_error(dev, txmsg_frames_from(dev, done));
			break;
		}
		note_link_up(dev);
		dev->cnt.sent_gso_frames += txmsg_gso_count(dev, done, done + (unsigned)n);
		done += (unsigned)n;
	}
	dev->tx_count = 0;
}

uint8_t *net_tx_slot(struct dev *dev)
{
	if (dev->tx_count == DEV_TX_BATCH)
		send_batch(dev);
	return dev->tx_frames[dev->tx_count];
}

static void tx_enqueue(void *ctx, const uint8_t *frame, size_t len)
{
	struct dev *dev = ctx;
	uint8_t *slot = net_tx_slot(dev);

	if (loopq_wants(dev, frame, len)) {
		capture_frame(dev, frame, len);
		dev->cnt.sent_pkts++;
		loopq_push(dev, frame, len);
		return;
	}
	if (slot != frame)
		memcpy(slot, frame, len);
	capture_frame(dev, slot, len);
	dev->tx_len[dev->tx_count] = (uint16_t)len;
	dev->tx_count++;
	dev->cnt.sent_pkts++;
}

void net_tx_commit(struct dev *dev, size_t len)
{
	uint8_t *frame = dev->tx_frames[dev->tx_count];

	if (dev->fault.tx && fault_active(&dev->fault))
		fault_apply(&dev->fault_tx, frame, len, FAULT_FROM);
	else
		tx_enqueue(dev, frame, len);
}

/* The loop is about to wait: a frame held back for reordering has no successor coming, so
 * it goes now, and then the whole batch. */
void net_flush(struct dev *dev)
{
	fault_release_held(&dev->fault_tx);
	send_batch(dev);
}

static void rx_deliver(void *ctx, const uint8_t *frame, size_t len)
{
	dev_rx_frame(ctx, frame, len);
}

void net_rx_frame(struct dev *dev, const uint8_t *frame, size_t len)
{
	if (dev->fault.rx && fault_active(&dev->fault))
		fault_apply(&dev->fault_rx, frame, len, FAULT_FROM);
	else
		dev_rx_frame(dev, frame, len);
}

void net_rx_batch_end(struct dev *dev)
{
	fault_release_held(&dev->fault_rx);
}

/* What the old stages hold is delivered first, under the old spec (a frame received may
 * send one, so the receive side drains first): changing faults loses no frame. */
int net_set_fault(struct dev *dev, const char *spec, char *err, size_t errlen)
{
	struct fault_cfg cfg;

	if (fault_parse(spec, &cfg, err, errlen) < 0)
		return -1;
	if (!cfg.seeded)
		cfg.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	fault_drain(&dev->fault_rx);
	fault_drain(&dev->fault_tx);
	fault_stage_free(&dev->fault_tx);
	fault_stage_free(&dev->fault_rx);
	dev->fault = cfg;
	fault_stage_init(&dev->fault_tx, dev->loop, &dev->fault, &dev->cnt, tx_enqueue, dev,
			 (uint64_t)addr_hash(dev) << 1);
	fault_stage_init(&dev->fault_rx, dev->loop, &dev->fault, &dev->cnt, rx_deliver, dev,
			 (uint64_t)addr_hash(dev) << 1 | 1);
	return 0;
}
