/* The port: rocemud's Ethernet side. It owns the interface, the addresses served (the GID
 * table), the packet sockets, the receive ring, the transmit batch, the loopback queue, the
 * fault stages, the capture and neighbour resolution; it knows frames, never QPs.
 *
 * It calls nothing above it: a received frame goes to on_frame, and a neighbour wait that
 * ended to on_neigh_ready, both set by main.c. It may call wire/, icrc/ and the log.
 * Functions that can fail return 0, or -1 with a message in err (opening things), or a
 * negative errno (neigh_resolve); the rest cannot fail. */
#ifndef ROCEMU_DAEMON_PORT_H
#define ROCEMU_DAEMON_PORT_H

#include <ev.h>
#include <infiniband/verbs.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "emu/daemon/limits.h"
#include "emu/daemon/port/fault.h"
#include "wire/wire.h"

#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5   /* Linux 6.2; older headers lack it */
#endif

/* The receive ring (rxring.c) */
struct rx_ring {
	int fd;
	uint8_t *map;
	size_t map_bytes;
	size_t block_bytes;
	unsigned slot_bytes;
	unsigned slots_per_block;
	unsigned slots;
	unsigned head;               /* the next slot to look at */
	bool congested;              /* the frame being read has a backlog behind it (cc.c) */
	bool vnet;                   /* a virtio-net header comes before every frame */
};

struct loopq {
	uint8_t (*frames)[DEV_FRAME_MAX];   /* allocated at the first frame */
	uint16_t len[LOOPQ_SLOTS];
	unsigned head, count;
	ev_idle idle;
};

/* One served address as a RoCE v2 GID: IPv4 as ::ffff:a.b.c.d, IPv6 as it is. */
struct port_gid {
	uint8_t raw[16];
	bool ipv6;
};

/* A wait for a neighbour the kernel's table does not have yet (neigh.c), one per client:
 * owner is handed to on_neigh_ready when it ends. */
struct neigh_wait {
	ev_timer timer;
	struct port *port;
	void *owner;
	uint8_t gid[16];
	unsigned tries;
	bool ended;                  /* the wait for ipv4 ended: ask the table once more */
};

typedef void (*port_frame_fn)(void *ctx, const uint8_t *frame, size_t len);
struct mcast_entry;
typedef void (*mcast_fn)(void *ctx, const uint8_t gid[16], void *data);

struct port {
	struct ev_loop *loop;
	struct dev_counters *cnt;    /* the device's, which the port's counters are part of */
	port_frame_fn on_frame;      /* every frame received or looped back, after the faults */
	void *frame_ctx;
	void (*on_neigh_ready)(void *owner);
	unsigned ce_mark_backlog;    /* receive ring slots waiting that mean congestion */

	char ifname[IF_NAMESIZE];
	int ifindex;
	char ingress_table[40];      /* our nftables table, when the ingress drop is in place */
	uint8_t mac[6];
	struct port_gid gids[DEV_MAX_GIDS];  /* the GID table, index as the clients see it */
	unsigned ngids;
	uint32_t ipv4;               /* the first IPv4 address served (network order), or 0 */
	uint8_t hop_limit[2];        /* TTL [0] and IPv6 hop limit [1] the kernel's routes give */
	unsigned link_mtu;
	bool loopback;
	bool link_down;              /* the last send failed with ENETDOWN */
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	uint16_t ip_id;

	struct rx_ring rx;
	ev_io rx_watcher;
	int tx_fd;
	int neigh_fd;                /* rtnetlink, for the neighbour table (neigh.c) */
	int link_fd;                 /* rtnetlink, told of link changes (link.c) */
	ev_io link_watcher;
	bool link_running;           /* up and with carrier, as last told */
	void (*on_link)(void *ctx, bool running);   /* told when that changes */
	void *link_ctx;
	bool tx_vnet;                /* every message sent starts with a virtio-net header */
	bool tx_gso;                 /* frames of one flow go out as UDP GSO frames */
	bool gso_off;                /* --no-gso */
	/* udptx.c: frames go through UDP sockets where the packet socket refuses GSO frames;
	 * one per IPv4 address served (-1 for none), bound to the source port it sends from */
	bool tx_udp;
	int udp_tx_fd[DEV_MAX_GIDS];
	uint16_t udp_tx_port[DEV_MAX_GIDS];
	int udp_guard_fd[DEV_MAX_GIDS];

	/* frames built this loop iteration, sent together before the loop sleeps */
	unsigned tx_count;
	uint16_t tx_len[DEV_TX_BATCH];
	struct mmsghdr tx_msgs[DEV_TX_BATCH];
	int8_t tx_via[DEV_TX_BATCH];          /* the UDP socket (its address's index) or -1 */
	uint8_t tx_msg_first[DEV_TX_BATCH];   /* the first frame of each message */
	uint8_t tx_msg_frames[DEV_TX_BATCH];  /* and how many it carries */
	int tx_msg_fd[DEV_TX_BATCH];          /* the socket it goes to */
	struct virtio_net_hdr tx_vnet_hdr[DEV_TX_BATCH];
	struct sockaddr_in tx_dst[DEV_TX_BATCH];
	struct {
		_Alignas(struct cmsghdr) uint8_t buf[CMSG_SPACE(sizeof(uint16_t)) +
						     2 * CMSG_SPACE(sizeof(int))];
	} tx_cmsg[DEV_TX_BATCH];
	struct iovec tx_iov[2 * DEV_TX_BATCH];
	uint8_t (*tx_frames)[DEV_FRAME_MAX];

	/* the multicast groups received (mcast.c): MCAST_BUCKETS chains, allocated at the
	 * first */
	struct mcast_entry **mcast_buckets;
	unsigned mcast_groups;

	struct fault_cfg fault;
	struct loopq loopq;
	struct fault_stage fault_tx;
	struct fault_stage fault_rx;

	/* --pcap: the recording of every frame sent and received (capture.c) */
	pcap_t *cap_pcap;
	pcap_dumper_t *cap_dumper;
	char cap_path[4096];
	uint64_t cap_max;            /* bytes; at this size FILE becomes FILE.1 */
	uint64_t cap_bytes;          /* written to the current file */
	ev_timer cap_timer;          /* flushes every second */
};

/* addr.c: the addresses served, as GIDs. addr_serve() takes the -a options (none: the
 * interface's first IPv4 address and its global IPv6 ones); 0, or -1 with a message. */
int addr_serve(struct port *port, const char *const *addrs, unsigned naddrs, char *err,
	       size_t errlen);
/* The GID of an IP address of version 4 or 6 (4 or 16 bytes at ip). */
void addr_gid(uint8_t gid[16], int version, const uint8_t *ip);
bool addr_gid_is_ipv4(const uint8_t gid[16]);
/* An IPv4 (mapped) or IPv6 multicast address, and the Ethernet address the kernel maps it to. */
bool addr_gid_is_multicast(const uint8_t gid[16]);
void addr_multicast_mac(const uint8_t gid[16], uint8_t mac[6]);
/* The index of gid in the port's table, or -1. */
int addr_find(const struct port *port, const uint8_t gid[16]);
/* "10.0.0.1" or "fd00::1"; buf holds INET6_ADDRSTRLEN. */
const char *addr_str(const uint8_t gid[16], char *buf, size_t len);
/* A number that tells this port's addresses from another's. */
uint32_t addr_hash(const struct port *port);
/* The TTL and IPv6 hop limit the kernel gives this interface's packets (its sysctls), which
 * rxe's frames carry whatever an AV asks: read once into port->hop_limit. */
void addr_read_hop_limits(struct port *port);
/* The integer a /proc or /sys file about the interface holds, or otherwise. */
long addr_read_number(const char *path, long otherwise);

/* net.c: the interface and frame I/O */
int net_open(struct port *port, const char *ifname, const char *const *addrs, unsigned naddrs,
	     char *err, size_t errlen);
void net_close(struct port *port);
void net_read_ring_drops(struct port *port);
void net_rx_cb(struct ev_loop *loop, ev_io *w, int revents);
/* One turn's worth of the receive ring (what net_rx_cb does). */
void net_rx_read(struct port *port);
/* Reads every frame the ring holds now, however many: a timer about to act on a silence
 * first hears what already arrived. */
void net_rx_catch_up(struct port *port);
enum ibv_mtu net_mtu_for_link(unsigned link_mtu);
bool net_link_up(struct port *port);
/* The link's speed in bytes per second as the kernel reports it; 10 Gb/s when it reports
 * none (lo) */
double net_line_rate(const struct port *port);
/* The bytes of an IB MTU (0 for none): pure, so the transport's tests need no port for it */
static inline unsigned net_mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

/* link.c: the kernel tells the port when its link starts or stops running (on_link) */
int link_watch_open(struct port *port, char *err, size_t errlen);
void link_watch_close(struct port *port);

/* netpath.c: the TX batch and the fault stages. A frame is built in net_tx_slot() and
 * handed over with net_tx_commit(); net_flush() sends the batch before the loop waits. */
uint8_t *net_tx_slot(struct port *port);
void net_tx_commit(struct port *port, size_t len);
void net_flush(struct port *port);
/* A received frame, through the receive fault stage; net_rx_batch_end() after a batch. */
void net_rx_frame(struct port *port, const uint8_t *frame, size_t len);
void net_rx_batch_end(struct port *port);
/* Applies a fault spec ("off" clears it); 0, or -1 with a message. */
int net_set_fault(struct port *port, const char *spec, char *err, size_t errlen);

/* ingress.c: an nftables rule that keeps RoCE frames out of the kernel's IP input; 0, or -1
 * with a message (the guard socket still keeps the kernel quiet) */
int ingress_drop_add(struct port *port, char *err, size_t errlen);
int ingress_drop_remove(struct port *port, char *err, size_t errlen);

/* capture.c: --pcap recording; capture_frame does nothing when it is off */
int capture_open(struct port *port, const char *path, uint64_t max_bytes, char *err,
		 size_t errlen);
void capture_frame(struct port *port, const uint8_t *frame, size_t len);
void capture_close(struct port *port);

/* neigh.c: peers' MAC addresses from the kernel's neighbour table. neigh_resolve() answers
 * at once from the table (and for this port's own address, a multicast group, or on lo);
 * when the table does not have the address yet, it makes the kernel ask and returns
 * -EINPROGRESS: the caller's request is deferred and handled again when on_neigh_ready is
 * called for the wait's owner (the address appeared or a second passed), and then the
 * same call returns 0, or -EHOSTUNREACH. The loop never waits. */
void neigh_init(struct neigh_wait *nw, struct port *port, void *owner);
/* the rtnetlink socket a port asks on, or -1 */
int neigh_socket_open(void);
int neigh_resolve(struct neigh_wait *nw, const uint8_t gid[16], uint8_t mac[6]);
void neigh_stop(struct neigh_wait *nw);

/* mcast.c: the multicast groups the port receives, at most PROTO_MAX_MCAST_GRP. A group
 * added is joined at the link layer (the interface's multicast filter) until it is deleted;
 * data is its holder's (the transport's QPs attached to it). mcast_add: 0, -ENOMEM (the
 * table is full, or no memory), or the kernel's refusal of the membership. mcast_foreach
 * calls fn for every group; fn may delete the one it is given. */
int mcast_add(struct port *port, const uint8_t gid[16], void *data);
void mcast_del(struct port *port, const uint8_t gid[16]);
void *mcast_find(const struct port *port, const uint8_t gid[16]);
void mcast_foreach(struct port *port, mcast_fn fn, void *ctx);
void mcast_free(struct port *port);

/* Used only inside port/ */

/* txmsg.c: the frames of one flush as sendmmsg messages, GSO frames where allowed */
unsigned txmsg_run_length(const struct port *port, unsigned first, bool any_ids);
unsigned txmsg_build(struct port *port, unsigned m, unsigned first);
unsigned txmsg_frames_from(const struct port *port, unsigned m);
unsigned txmsg_gso_count(const struct port *port, unsigned from, unsigned to);
unsigned txmsg_same_socket(const struct port *port, unsigned m, unsigned msgs);
void txmsg_restore(struct port *port, unsigned m, unsigned msgs);

/* udptx.c: runs of frames through UDP sockets with UDP_SEGMENT, where the kernel cuts them
 * before the interface (udptx_kernel_cuts). udptx_open: 0, or -1 and errno. udptx_prepare
 * marks the frames from first on that a UDP socket carries and gives them the id and
 * source port its send will (every frame -1 when tx_udp is off). udptx_segmentation_off:
 * the device could cut UDP GSO frames itself but is told not to. */
bool udptx_kernel_cuts(const struct port *port);
bool udptx_segmentation_off(const struct port *port);
int udptx_open(struct port *port);
void udptx_close(struct port *port);
void udptx_prepare(struct port *port, unsigned first);
struct iovec *udptx_message(struct port *port, unsigned m, unsigned f, unsigned n,
			    struct iovec *iov);
unsigned udptx_refused(struct port *port, unsigned m, bool for_good);

/* rxring.c: the receive ring; deliver gets each RoCE frame, GSO frames already cut */
int rxring_open(struct port *port, const char *filter, char *err, size_t errlen);
void rxring_close(struct port *port);
void rxring_read(struct port *port, unsigned budget, wire_deliver_fn deliver);
void rxring_read_drops(struct port *port);

/* loopq.c: frames from one QP of this daemon to another, received at the next turn of
 * the loop instead of crossing the wire */
bool loopq_wants(const struct port *port, const uint8_t *frame, size_t len);
void loopq_push(struct port *port, const uint8_t *frame, size_t len);
void loopq_init(struct port *port);
void loopq_free(struct port *port);

/* mcast.c: a frame sent to a group a QP of this daemon is attached to, which the loopback
 * queue receives too (it also goes on the wire) */
bool mcast_wants_copy(const struct port *port, const uint8_t *frame, size_t len);

#endif
