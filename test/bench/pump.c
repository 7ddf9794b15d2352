/* pump: the machine's own limits, for the benchmark (scripts/bench.sh) to hold rocemu
 * against. Two measurements:
 *
 *   pump rx -i IFACE [-t SECONDS]
 *       a PACKET_RX_RING (TPACKET_V3) receiver for frames of ethertype PUMP_ETHERTYPE on
 *       IFACE; counts frames and bytes until the sender has gone quiet (IDLE_MS after the
 *       last frame) or SECONDS pass (default 10); prints one JSON object: frames, bytes,
 *       seconds (first to last frame, by the kernel's receive timestamps), fps, gbps.
 *   pump tx -i IFACE -s SIZE [-t SECONDS] [-d MAC]
 *       sends SIZE-byte Ethernet frames (headers included, no FCS) to MAC (default the
 *       broadcast address) with sendmmsg, BATCH frames a call, for SECONDS (default 1);
 *       prints frames sent and the send rate as JSON.
 *
 *   pump udp-echo -b ADDR [-p PORT] [-t SECONDS] [--busy]
 *       answers every datagram with itself, until SECONDS of silence (default 10).
 *   pump udp-ping -c ADDR [-p PORT] [-n COUNT] [-s SIZE] [-t SECONDS] [--busy]
 *       COUNT (default 10000, after WARMUP unmeasured) SIZE-byte (default 64) round trips,
 *       one at a time, or as many as fit in SECONDS; prints the round-trip median, p99,
 *       mean, min and max in microseconds as JSON. Blocking send/recv, or with --busy
 *       recv(MSG_DONTWAIT) in a loop on both sides (which then needs a core each: on a
 *       busy machine a spinner waits for its peer's time slice, hence SECONDS).
 *
 *   pump udp-flood -c ADDR -s SIZE [-p PORT] [-t SECONDS] [--no-gso]
 *       one flow of SIZE-byte datagrams to ADDR for SECONDS (default 1), as fast as the
 *       kernel takes them: a run of them a call, as one UDP GSO send (UDP_SEGMENT) where
 *       the kernel allows it, with sendmmsg otherwise (or always, --no-gso); prints what
 *       it sent as JSON.
 *   pump udp-sink -b ADDR [-p PORT] [-t SECONDS]
 *       counts the datagrams that arrive, with UDP GRO where the kernel offers it, until
 *       IDLE_MS of silence after the first or SECONDS (default 10) without any; prints
 *       datagrams, bytes and seconds from the first read to the last, as JSON. With
 *       udp-flood, the rate at which one host's datagrams reach another's socket: for
 *       RoCEv2, one datagram a packet, the ceiling of any device at that packet size.
 *
 *   pump switch-ping [-n COUNT]
 *       COUNT (default 10000) one-byte round trips over a pair of pipes, all on the CPU it
 *       started on: first between two threads of this process, then between it and a
 *       child; prints each median in microseconds as JSON. Their difference is what two
 *       switches to another address space cost beyond two that keep it (a daemon's wakeup
 *       on a busy CPU is two such switches; a kernel's worker thread makes neither).
 *
 * Bad usage exits 2; a failed system call prints what failed and exits 1. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "pump"

#define PUMP_ETHERTYPE  0x88b5   /* IEEE local experimental: nobody else's frames */
#define BATCH           64       /* frames per sendmmsg */
#define MAX_FRAME       9014     /* MTU 9000 + Ethernet header */
#define MIN_FRAME       60
#define RING_BLOCK      (1u << 22)
#define RING_BLOCKS     64
#define RING_FRAME      2048     /* V3 packs frames; this only sizes tp_frame_nr */
#define RING_TOV_MS     8        /* a block is handed over at the latest after this */
#define IDLE_MS         300      /* rx: the sender is done after this much silence */
#define UDP_PORT        18999
#define PING_WARMUP     200
#define PING_TIMEOUT_MS 1000     /* one lost datagram: send the ping again */
#define NS_PER_S        1000000000ull
#define UDP_RUN_BYTES   65000    /* a UDP GSO send: under the 65,507-byte datagram limit */
#define SINK_RCVBUF     (16 << 20)

static void die(const char *what) __attribute__((noreturn));
static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: " PROG " rx -i IFACE [-t SECONDS]\n"
		"       " PROG " tx -i IFACE -s SIZE [-t SECONDS] [-d MAC]\n"
		"       " PROG " udp-echo -b ADDR [-p PORT] [-t SECONDS] [--busy]\n"
		"       " PROG " udp-ping -c ADDR [-p PORT] [-n COUNT] [-s SIZE] [-t SECONDS]"
		" [--busy]\n"
		"       " PROG " udp-flood -c ADDR -s SIZE [-p PORT] [-t SECONDS] [--no-gso]\n"
		"       " PROG " udp-sink -b ADDR [-p PORT] [-t SECONDS]\n"
		"       " PROG " switch-ping [-n COUNT]\n");
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

struct opts {
	const char *iface;
	const char *addr;
	unsigned size;
	double seconds;
	bool seconds_given;
	unsigned port;
	unsigned count;
	bool busy;
	bool no_gso;
	uint8_t dst[ETH_ALEN];
};

static unsigned long parse_num(const char *s, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, PROG ": '%s' is not a number from %lu to %lu\n", s, lo, hi);
		exit(2);
	}
	return v;
}

static void parse_mac(const char *s, uint8_t mac[ETH_ALEN])
{
	unsigned b[ETH_ALEN];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) {
		fprintf(stderr, PROG ": '%s' is not a MAC address\n", s);
		exit(2);
	}
	for (int i = 0; i < ETH_ALEN; i++)
		mac[i] = (uint8_t)b[i];
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "busy", no_argument, NULL, 'B' },
		{ "no-gso", no_argument, NULL, 'G' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .size = 64, .seconds = 1, .port = UDP_PORT, .count = 10000 };
	memset(o->dst, 0xff, sizeof(o->dst));
	while ((c = getopt_long(argc, argv, "i:s:t:d:b:c:p:n:", longs, NULL)) != -1) {
		switch (c) {
		case 'i': o->iface = optarg; break;
		case 's': o->size = (unsigned)parse_num(optarg, 1, MAX_FRAME); break;
		case 't':
			o->seconds = atof(optarg);
			o->seconds_given = true;
			if (!(o->seconds > 0 && o->seconds < 3600))
				usage();
			break;
		case 'd': parse_mac(optarg, o->dst); break;
		case 'b':
		case 'c': o->addr = optarg; break;
		case 'p': o->port = (unsigned)parse_num(optarg, 1, 65535); break;
		case 'n': o->count = (unsigned)parse_num(optarg, 1, 100000000); break;
		case 'B': o->busy = true; break;
		case 'G': o->no_gso = true; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
}

/* ---- the frame pump ---- */

static int packet_socket(const char *iface, int *ifindex)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(PUMP_ETHERTYPE) };
	int fd = socket(AF_PACKET, SOCK_RAW, htons(PUMP_ETHERTYPE));

	if (fd < 0)
		die("socket(AF_PACKET)");
	sll.sll_ifindex = (int)if_nametoindex(iface);
	if (!sll.sll_ifindex) {
		fprintf(stderr, PROG ": no interface %s\n", iface);
		exit(1);
	}
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		die("bind(AF_PACKET)");
	*ifindex = sll.sll_ifindex;
	return fd;
}

static void print_rate(const char *mode, uint64_t frames, uint64_t bytes, double secs,
		       uint64_t extra, const char *extra_name)
{
	double fps = secs > 0 ? (double)frames / secs : 0;
	double gbps = secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;

	printf("{\"mode\":\"%s\",\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"seconds\":%.6f,"
	       "\"fps\":%.0f,\"gbps\":%.3f", mode, frames, bytes, secs, fps, gbps);
	if (extra_name)
		printf(",\"%s\":%" PRIu64, extra_name, extra);
	printf("}\n");
}

static int do_tx(const struct opts *o)
{
	static uint8_t frame[MAX_FRAME];
	struct mmsghdr msgs[BATCH];
	struct iovec iov = { frame, o->size };
	uint64_t sent = 0, refused = 0, t0, end;
	struct ethhdr *eh = (struct ethhdr *)frame;
	struct sockaddr_ll me;
	socklen_t len = sizeof(me);
	int ifindex, fd;

	if (!o->iface || o->size < MIN_FRAME)
		usage();
	fd = packet_socket(o->iface, &ifindex);
	if (getsockname(fd, (struct sockaddr *)&me, &len) < 0)
		die("getsockname");
	memcpy(eh->h_dest, o->dst, ETH_ALEN);
	memcpy(eh->h_source, me.sll_addr, ETH_ALEN);
	eh->h_proto = htons(PUMP_ETHERTYPE);
	for (unsigned i = sizeof(*eh); i < o->size; i++)
		frame[i] = (uint8_t)i;
	for (int i = 0; i < BATCH; i++)
		msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
	t0 = now_ns();
	end = t0 + (uint64_t)(o->seconds * NS_PER_S);
	for (uint64_t now = t0; now < end; now = now_ns()) {
		int n = sendmmsg(fd, msgs, BATCH, 0);

		if (n < 0) {
			if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
				refused++;
				continue;
			}
			die("sendmmsg");
		}
		sent += (uint64_t)n;
	}
	print_rate("tx", sent, sent * o->size, (double)(now_ns() - t0) / NS_PER_S, refused,
		   "refused_calls");
	close(fd);
	return 0;
}

struct rx_count {
	uint64_t frames, bytes;
	uint64_t first_ts, last_ts;   /* kernel receive timestamps, ns */
};

static void count_block(struct tpacket_block_desc *bd, struct rx_count *c)
{
	struct tpacket3_hdr *h =
		(struct tpacket3_hdr *)((uint8_t *)bd + bd->hdr.bh1.offset_to_first_pkt);

	for (uint32_t i = 0; i < bd->hdr.bh1.num_pkts; i++) {
		uint64_t ts = (uint64_t)h->tp_sec * NS_PER_S + h->tp_nsec;

		if (!c->frames)
			c->first_ts = ts;
		c->last_ts = ts;
		c->frames++;
		c->bytes += h->tp_len;
		h = (struct tpacket3_hdr *)((uint8_t *)h + h->tp_next_offset);
	}
}

static int do_rx(const struct opts *o)
{
	struct tpacket_req3 req = {
		.tp_block_size = RING_BLOCK,
		.tp_block_nr = RING_BLOCKS,
		.tp_frame_size = RING_FRAME,
		.tp_frame_nr = RING_BLOCK / RING_FRAME * RING_BLOCKS,
		.tp_retire_blk_tov = RING_TOV_MS,
	};
	int version = TPACKET_V3, ifindex, fd;
	struct rx_count c = { 0 };
	struct tpacket_stats_v3 st;
	socklen_t stlen = sizeof(st);
	uint64_t deadline, last_seen = 0;
	unsigned block = 0;
	uint8_t *ring;
	double secs;

	if (!o->iface)
		usage();
	fd = packet_socket(o->iface, &ifindex);
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0)
		die("PACKET_VERSION");
	if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0)
		die("PACKET_RX_RING");
	ring = mmap(NULL, (size_t)RING_BLOCK * RING_BLOCKS, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_LOCKED, fd, 0);
	if (ring == MAP_FAILED)
		die("mmap(ring)");
	printf("{\"mode\":\"rx-ready\"}\n");
	fflush(stdout);
	deadline = now_ns() + (uint64_t)((o->seconds_given ? o->seconds : 10) * NS_PER_S);
	for (;;) {
		struct tpacket_block_desc *bd =
			(struct tpacket_block_desc *)(ring + (size_t)block * RING_BLOCK);
		uint64_t now;

		if (bd->hdr.bh1.block_status & TP_STATUS_USER) {
			count_block(bd, &c);
			__atomic_store_n(&bd->hdr.bh1.block_status, TP_STATUS_KERNEL,
					 __ATOMIC_RELEASE);
			block = (block + 1) % RING_BLOCKS;
			last_seen = now_ns();
			continue;
		}
		now = now_ns();
		if (now >= deadline || (c.frames && now - last_seen > IDLE_MS * 1000000ull))
			break;
		struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLERR };
		if (poll(&pfd, 1, 50) < 0 && errno != EINTR)
			die("poll");
	}
	if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &stlen) < 0)
		die("PACKET_STATISTICS");
	/* n frames span n - 1 inter-arrival gaps */
	secs = c.frames > 1 ? (double)(c.last_ts - c.first_ts) / NS_PER_S : 0;
	print_rate("rx", c.frames > 1 ? c.frames - 1 : 0,
		   c.frames > 1 ? c.bytes * (c.frames - 1) / c.frames : 0, secs, st.tp_drops,
		   "ring_drops");
	munmap(ring, (size_t)RING_BLOCK * RING_BLOCKS);
	close(fd);
	return 0;
}

/* ---- UDP ping-pong ---- */

static int udp_socket(const struct opts *o, struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		die("socket(UDP)");
	*sin = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
	if (!o->addr || inet_pton(AF_INET, o->addr, &sin->sin_addr) != 1) {
		fprintf(stderr, PROG ": need an IPv4 address\n");
		exit(2);
	}
	return fd;
}

/* One datagram: blocking (bounded by SO_RCVTIMEO) or spinning on MSG_DONTWAIT until
 * deadline. Returns its length, or -1 on timeout. */
static ssize_t udp_recv(int fd, void *buf, size_t len, bool busy, uint64_t deadline,
			struct sockaddr_in *from)
{
	socklen_t fl = sizeof(*from);

	for (;;) {
		ssize_t n = recvfrom(fd, buf, len, busy ? MSG_DONTWAIT : 0, (struct sockaddr *)from,
				     from ? &fl : NULL);

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno == ECONNREFUSED)   /* the echo server is not up yet: send again */
			return -1;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			die("recvfrom");
		if (!busy || now_ns() >= deadline)
			return -1;
	}
}

static void set_rcvtimeo(int fd, unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		die("SO_RCVTIMEO");
}

/* How long a listener waits for its first datagram: SECONDS, 10 unless given. */
static unsigned listen_ms(const struct opts *o)
{
	return (unsigned)((o->seconds_given ? o->seconds : 10) * 1000);
}

/* A UDP socket bound to -b ADDR -p PORT, whose reads give up after listen_ms(). */
static int udp_listener(const struct opts *o)
{
	struct sockaddr_in sin;
	int one = 1, fd = udp_socket(o, &sin);

	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("SO_REUSEADDR");
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("bind(UDP)");
	set_rcvtimeo(fd, listen_ms(o));
	return fd;
}

static int do_echo(const struct opts *o)
{
	struct sockaddr_in from;
	uint8_t buf[65536];
	unsigned idle_ms = listen_ms(o);
	int fd = udp_listener(o);

	printf("{\"mode\":\"echo-ready\"}\n");
	fflush(stdout);
	for (;;) {
		ssize_t n = udp_recv(fd, buf, sizeof(buf), o->busy,
				     now_ns() + (uint64_t)idle_ms * 1000000ull, &from);

		if (n < 0)
			break;   /* silence: the pinger is done */
		if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, sizeof(from)) < 0)
			die("sendto");
	}
	close(fd);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int do_ping(const struct opts *o)
{
	struct sockaddr_in sin;
	uint8_t buf[65536] = { 0 }, in[65536];
	unsigned total = o->count + PING_WARMUP, lost = 0, done = 0;
	uint64_t *rtt = calloc(o->count, sizeof(*rtt)), sum = 0;
	int fd = udp_socket(o, &sin);

	if (!rtt)
		die("calloc");
	if (o->size > 65000)
		usage();
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect(UDP)");
	set_rcvtimeo(fd, PING_TIMEOUT_MS);
	uint64_t end = o->seconds_given ? now_ns() + (uint64_t)(o->seconds * NS_PER_S) : UINT64_MAX;
	for (unsigned i = 0; i < total;) {
		uint64_t t0 = now_ns();
		ssize_t n;

		if (t0 >= end && done)
			break;

		memcpy(buf, &i, sizeof(i));
		if (send(fd, buf, o->size, 0) < 0) {
			if (errno == ECONNREFUSED) {   /* the echo server is not up yet */
				usleep(10000);
				continue;
			}
			die("send");
		}
		do
			n = udp_recv(fd, in, sizeof(in), o->busy,
				     t0 + PING_TIMEOUT_MS * 1000000ull, NULL);
		while (n >= (ssize_t)sizeof(i) && memcmp(in, &i, sizeof(i)));  /* a stale echo */
		if (n < 0) {
			if (errno == ECONNREFUSED)
				usleep(10000);
			if (++lost > 100) {
				fprintf(stderr, PROG ": no echo from %s:%u\n", o->addr, o->port);
				return 1;
			}
			continue;
		}
		if (i >= PING_WARMUP)
			rtt[done++] = now_ns() - t0;
		i++;
	}
	qsort(rtt, done, sizeof(*rtt), cmp_u64);
	for (unsigned i = 0; i < done; i++)
		sum += rtt[i];
	printf("{\"mode\":\"udp-ping\",\"busy\":%s,\"size\":%u,\"count\":%u,\"lost\":%u,"
	       "\"median_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f,\"min_us\":%.2f,"
	       "\"max_us\":%.2f}\n", o->busy ? "true" : "false", o->size, done, lost,
	       rtt[done / 2] / 1e3, rtt[(size_t)((done - 1) * 0.99)] / 1e3,
	       (double)sum / done / 1e3, rtt[0] / 1e3, rtt[done - 1] / 1e3);
	free(rtt);
	close(fd);
	return 0;
}

/* ---- a flow of datagrams, and its sink ---- */

/* A run of n datagrams of o->size bytes in one call: one UDP GSO send, or sendmmsg. Returns
 * how many the kernel took (0 when it had no room), or -1 when GSO was refused. */
static int flood_run(int fd, const struct opts *o, uint8_t *buf, unsigned n, bool gso)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	int sent;

	if (gso) {
		if (send(fd, buf, (size_t)o->size * n, 0) >= 0)
			return (int)n;
		if (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP)
			return -1;
	} else {
		for (unsigned i = 0; i < n; i++) {
			iov[i] = (struct iovec){ buf, o->size };
			msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
		}
		sent = sendmmsg(fd, msgs, n, 0);
		if (sent >= 0)
			return sent;
	}
	/* no room, or the sink not up yet (the ICMP port unreachable of an earlier datagram) */
	if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR || errno == ECONNREFUSED)
		return 0;
	die(gso ? "send(UDP GSO)" : "sendmmsg(UDP)");
}

static int do_flood(const struct opts *o)
{
	static uint8_t buf[UDP_RUN_BYTES];
	struct sockaddr_in sin;
	unsigned run = UDP_RUN_BYTES / o->size;
	int fd = udp_socket(o, &sin), seg = (int)o->size;
	bool gso = !o->no_gso && setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof(seg)) == 0;
	uint64_t sent = 0, refused = 0, t0, end, now;

	if (run > BATCH)
		run = BATCH;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect(UDP)");
	memset(buf, 0x5a, sizeof(buf));
	t0 = now_ns();
	end = t0 + (uint64_t)(o->seconds * NS_PER_S);
	for (now = t0; now < end; now = now_ns()) {
		int n = flood_run(fd, o, buf, run, gso);

		if (n < 0) {
			gso = false;   /* the kernel cuts no GSO send for this route */
			continue;
		}
		if (n == 0)
			refused++;
		sent += (uint64_t)n;
	}
	printf("{\"mode\":\"udp-flood\",\"size\":%u,\"datagrams\":%" PRIu64 ",\"seconds\":%.6f,"
	       "\"gso\":%s,\"refused_calls\":%" PRIu64 "}\n", o->size, sent,
	       (double)(now - t0) / NS_PER_S, gso ? "true" : "false", refused);
	close(fd);
	return 0;
}

/* The datagrams one read brought: a GRO read says its segments' size in a control message. */
static uint64_t datagrams_in(struct msghdr *m, ssize_t len)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		int seg;

		if (c->cmsg_level != IPPROTO_UDP || c->cmsg_type != UDP_GRO)
			continue;
		memcpy(&seg, CMSG_DATA(c), sizeof(seg));
		if (seg > 0)
			return ((uint64_t)len + (uint64_t)seg - 1) / (uint64_t)seg;
	}
	return 1;
}

static int do_sink(const struct opts *o)
{
	static uint8_t buf[65536];
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { buf, sizeof(buf) };
	uint64_t count = 0, bytes = 0, first_count = 0, first_bytes = 0, first = 0, last = 0;
	int one = 1, rcvbuf = SINK_RCVBUF, fd = udp_listener(o);
	bool gro = setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	double secs;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	printf("{\"mode\":\"sink-ready\"}\n");
	fflush(stdout);
	for (;;) {
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };
		ssize_t n = recvmsg(fd, &m, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;   /* silence: the flood is over, or never came */
			die("recvmsg");
		}
		last = now_ns();
		if (!count) {
			first = last;
			set_rcvtimeo(fd, IDLE_MS);
			first_count = datagrams_in(&m, n);
			first_bytes = (uint64_t)n;
		}
		count += datagrams_in(&m, n);
		bytes += (uint64_t)n;
	}
	/* from the end of the first read to the last: what came in between is the rate's */
	secs = (double)(last - first) / NS_PER_S;
	printf("{\"mode\":\"udp-sink\",\"datagrams\":%" PRIu64 ",\"bytes\":%" PRIu64
	       ",\"seconds\":%.6f,\"gro\":%s}\n", count - first_count, bytes - first_bytes, secs,
	       gro ? "true" : "false");
	close(fd);
	return 0;
}

/* ---- what a switch costs ---- */

struct pipe_pair {
	int to_echo[2], back[2];
	unsigned count;
};

static void *echo_bytes(void *arg)
{
	struct pipe_pair *p = arg;
	char c;

	for (unsigned i = 0; i < p->count; i++)
		if (read(p->to_echo[0], &c, 1) != 1 || write(p->back[1], &c, 1) != 1)
			break;
	return NULL;
}

/* The median of p->count round trips to the echo, in microseconds. */
static double pipe_round_trips(struct pipe_pair *p, uint64_t *rtt)
{
	char c = 'x';

	for (unsigned i = 0; i < p->count; i++) {
		uint64_t t0 = now_ns();

		if (write(p->to_echo[1], &c, 1) != 1 || read(p->back[0], &c, 1) != 1)
			die("the pipe to the echo");
		rtt[i] = now_ns() - t0;
	}
	qsort(rtt, p->count, sizeof(*rtt), cmp_u64);
	return rtt[p->count / 2] / 1e3;
}

static void pipes_open(struct pipe_pair *p)
{
	if (pipe(p->to_echo) < 0 || pipe(p->back) < 0)
		die("pipe");
}

static void pipes_close(struct pipe_pair *p)
{
	close(p->to_echo[0]);
	close(p->to_echo[1]);
	close(p->back[0]);
	close(p->back[1]);
}

static int do_switch_ping(const struct opts *o)
{
	struct pipe_pair p = { .count = o->count };
	uint64_t *rtt = calloc(o->count, sizeof(*rtt));
	double threads, processes;
	cpu_set_t one_cpu;
	pthread_t echo;
	pid_t child;
	int status;

	if (!rtt)
		die("calloc");
	/* one CPU: each round trip is two switches on it, not a wakeup of another (the
	 * thread and the child inherit the mask) */
	CPU_ZERO(&one_cpu);
	CPU_SET(sched_getcpu(), &one_cpu);
	if (sched_setaffinity(0, sizeof(one_cpu), &one_cpu) < 0)
		die("sched_setaffinity");
	pipes_open(&p);
	errno = pthread_create(&echo, NULL, echo_bytes, &p);
	if (errno)
		die("pthread_create");
	threads = pipe_round_trips(&p, rtt);
	pthread_join(echo, NULL);
	pipes_close(&p);
	pipes_open(&p);
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		echo_bytes(&p);
		_exit(0);
	}
	processes = pipe_round_trips(&p, rtt);
	if (waitpid(child, &status, 0) < 0)
		die("waitpid");
	pipes_close(&p);
	free(rtt);
	printf("{\"mode\":\"switch-ping\",\"count\":%u,\"threads_us\":%.2f,"
	       "\"processes_us\":%.2f}\n", o->count, threads, processes);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(const struct opts *);
	} cmds[] = {
		{ "tx", do_tx },	       { "rx", do_rx },		{ "udp-echo", do_echo },
		{ "udp-ping", do_ping },       { "udp-flood", do_flood }, { "udp-sink", do_sink },
		{ "switch-ping", do_switch_ping },
	};
	struct opts o;

	if (argc < 2)
		usage();
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		parse_opts(argc - 1, argv + 1, &o);
		return cmds[i].run(&o);
	}
	usage();
}
