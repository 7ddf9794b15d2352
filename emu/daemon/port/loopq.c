/* Frames a QP sends to another QP of this same daemon (two QPs of one device connected to
 * each other, as test suites and many programs do on rxe and NICs). The wire would not
 * bring them back: a packet socket does not receive what it sends, and no host delivers a
 * frame to the interface that sent it. So after the fault stage they wait in a queue of
 * their own and are received at the next turn of the loop, as if they had crossed a wire.
 * On a loopback interface the kernel does bring them back, and the queue is not used. */
#include <stdlib.h>
#include <string.h>

#include "emu/daemon/port/port.h"

#define DST_IPV4_OFFSET (WIRE_ETH_LEN + 16)
#define DST_IPV6_OFFSET (WIRE_ETH_LEN + 24)

/* Frames this daemon builds: untagged, IPv4 without options or IPv6. */
bool loopq_wants(const struct port *port, const uint8_t *frame, size_t len)
{
	bool ipv6 = len > 13 && frame[12] == 0x86 && frame[13] == 0xdd;
	uint8_t gid[16];

	if (port->loopback || len < (ipv6 ? DST_IPV6_OFFSET + 16 : DST_IPV4_OFFSET + 4))
		return false;
	addr_gid(gid, ipv6 ? 6 : 4, frame + (ipv6 ? DST_IPV6_OFFSET : DST_IPV4_OFFSET));
	return addr_find(port, gid) >= 0;
}

/* Full, the frame is lost as a full receive ring loses it, and RC sends it again. */
void loopq_push(struct port *port, const uint8_t *frame, size_t len)
{
	struct loopq *q = &port->loopq;
	unsigned tail;

	if (!q->frames && !(q->frames = calloc(LOOPQ_SLOTS, DEV_FRAME_MAX))) {
		port->cnt->drop_loopback_full++;
		return;
	}
	if (q->count == LOOPQ_SLOTS || len > DEV_FRAME_MAX) {
		port->cnt->drop_loopback_full++;
		return;
	}
	tail = (q->head + q->count) % LOOPQ_SLOTS;
	memcpy(q->frames[tail], frame, len);
	q->len[tail] = (uint16_t)len;
	q->count++;
	port->cnt->loopback_pkts++;
	ev_idle_start(port->loop, &q->idle);
}

/* The frames queued before this turn; what they make the transport send to itself waits
 * for the next one. A frame stays counted until it is received, so a push meanwhile
 * cannot take its slot. */
static void on_loopq_idle(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct port *port = w->data;
	struct loopq *q = &port->loopq;

	(void)revents;
	for (unsigned n = q->count; n > 0; n--) {
		net_rx_frame(port, q->frames[q->head], q->len[q->head]);
		q->head = (q->head + 1) % LOOPQ_SLOTS;
		q->count--;
	}
	net_rx_batch_end(port);
	if (q->count == 0)
		ev_idle_stop(loop, w);
}

/* Highest priority: libev runs an idle watcher only when nothing of its priority or above
 * is pending, and a busy receive ring must not starve the loopback. */
void loopq_init(struct port *port)
{
	ev_idle_init(&port->loopq.idle, on_loopq_idle);
	ev_set_priority(&port->loopq.idle, EV_MAXPRI);
	port->loopq.idle.data = port;
}

void loopq_free(struct port *port)
{
	ev_idle_stop(port->loop, &port->loopq.idle);
	free(port->loopq.frames);
	port->loopq.frames = NULL;
	port->loopq.count = 0;
}
