/* The multicast groups the port receives. A group is in the table while a holder (the
 * transport, for the UD QPs attached to it) keeps it there, and for that time its Ethernet
 * address is a membership of the receive socket: the kernel adds it to the interface's
 * multicast filter as rxe's attach does (dev_mc_add), so a NIC that filters lets the frames
 * in. The kernel counts a socket's memberships of one address, so two groups that map to
 * one MAC (IPv4's 32 to 1) stay in the filter until both left.
 *
 * The IP-level join a switch's IGMP or MLD snooping needs is not made here: the kernel's
 * rdma_cm makes it at rdma_join_multicast, and so does rocemu's (emu/rdmacm/mcast.c). */
#include <errno.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "emu/daemon/port/port.h"

#define MCAST_BUCKETS 1024

struct mcast_entry {
	uint8_t gid[16];
	void *data;
	struct mcast_entry *next;
};

static unsigned bucket_of(const uint8_t gid[16])
{
	uint32_t h = 2166136261u;        /* FNV-1a over the group's address */

	for (int i = 0; i < 16; i++)
		h = (h ^ gid[i]) * 16777619u;
	return h % MCAST_BUCKETS;
}

/* PACKET_ADD_MEMBERSHIP or PACKET_DROP_MEMBERSHIP of the group's MAC; a port without its
 * receive ring (the transport's unit tests) keeps the table only. */
static int link_membership(struct port *port, const uint8_t gid[16], int op)
{
	struct packet_mreq mr = { .mr_ifindex = port->ifindex, .mr_type = PACKET_MR_MULTICAST,
				  .mr_alen = 6 };

	if (!port->rx.map)
		return 0;
	addr_multicast_mac(gid, mr.mr_address);
	return setsockopt(port->rx.fd, SOL_PACKET, op, &mr, sizeof(mr)) < 0 ? -errno : 0;
}

void *mcast_find(const struct port *port, const uint8_t gid[16])
{
	if (!port->mcast_buckets)
		return NULL;
	for (struct mcast_entry *e = port->mcast_buckets[bucket_of(gid)]; e; e = e->next)
		if (!memcmp(e->gid, gid, 16))
			return e->data;
	return NULL;
}

int mcast_add(struct port *port, const uint8_t gid[16], void *data)
{
	struct mcast_entry *e;
	unsigned b = bucket_of(gid);
	int rc;

	if (port->mcast_groups >= PROTO_MAX_MCAST_GRP)
		return -ENOMEM;
	if (!port->mcast_buckets &&
	    !(port->mcast_buckets = calloc(MCAST_BUCKETS, sizeof(*port->mcast_buckets))))
		return -ENOMEM;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	rc = link_membership(port, gid, PACKET_ADD_MEMBERSHIP);
	if (rc) {
		free(e);
		return rc;
	}
	memcpy(e->gid, gid, 16);
	e->data = data;
	e->next = port->mcast_buckets[b];
	port->mcast_buckets[b] = e;
	port->mcast_groups++;
	return 0;
}

void mcast_del(struct port *port, const uint8_t gid[16])
{
	struct mcast_entry **pos;

	if (!port->mcast_buckets)
		return;
	for (pos = &port->mcast_buckets[bucket_of(gid)]; *pos; pos = &(*pos)->next) {
		struct mcast_entry *e = *pos;

		if (memcmp(e->gid, gid, 16))
			continue;
		/* the kernel refuses a drop only for a membership it does not hold */
		(void)link_membership(port, gid, PACKET_DROP_MEMBERSHIP);
		*pos = e->next;
		free(e);
		port->mcast_groups--;
		return;
	}
}

void mcast_foreach(struct port *port, mcast_fn fn, void *ctx)
{
	if (!port->mcast_buckets)
		return;
	for (unsigned b = 0; b < MCAST_BUCKETS; b++) {
		struct mcast_entry *e = port->mcast_buckets[b], *next;

		for (; e; e = next) {
			next = e->next;     /* fn may take e out of the table */
			fn(ctx, e->gid, e->data);
		}
	}
}

/* Closing the socket drops its memberships; the holders' data is theirs to free first. */
void mcast_free(struct port *port)
{
	if (!port->mcast_buckets)
		return;
	for (unsigned b = 0; b < MCAST_BUCKETS; b++)
		while (port->mcast_buckets[b]) {
			struct mcast_entry *e = port->mcast_buckets[b];

			port->mcast_buckets[b] = e->next;
			free(e);
		}
	free(port->mcast_buckets);
	port->mcast_buckets = NULL;
	port->mcast_groups = 0;
}

/* Frames this daemon sends to a group some QP of its own is attached to: the wire does not
 * bring them back to the sender, so they are received from the loopback queue too, as a
 * multicast packet the kernel's IP output loops back reaches rxe on the sending host (there
 * only when the host joined the group at the IP level, as rdma_cm does). */
bool mcast_wants_copy(const struct port *port, const uint8_t *frame, size_t len)
{
	bool ipv6 = len > 13 && frame[12] == 0x86 && frame[13] == 0xdd;
	size_t dst_off = WIRE_ETH_LEN + (ipv6 ? 24 : 16);
	uint8_t gid[16];

	if (!port->mcast_groups || port->loopback || len < dst_off + (ipv6 ? 16 : 4) ||
	    !(frame[0] & 1))
		return false;
	addr_gid(gid, ipv6 ? 6 : 4, frame + dst_off);
	return mcast_find(port, gid) != NULL;
}
