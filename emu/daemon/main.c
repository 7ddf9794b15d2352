/* rocemud: plays an RDMA HCA (RoCEv2) on one Ethernet interface. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "emu/daemon/cm/cm.h"
#include "emu/daemon/control/control.h"
#include "emu/daemon/cpu.h"
#include "emu/daemon/log.h"
#include "emu/rocemu.h"

#define PCAP_MAX_DEFAULT (64ull << 20)
/* How long the loop polls after work before it sleeps (--poll-budget), chosen by
 * measurement: docs/benchmarks.md, "Adaptive polling". */
#define POLL_BUDGET_DEFAULT_US 200
struct options {
	const char *ifname;
	const char *addrs[DEV_MAX_GIDS];
	unsigned naddrs;
	const char *socket;
	const char *group;
	int pmtu;
	const char *fault;
	const char *cc;
	uint64_t pin_total;
	const char *pcap;
	uint64_t pcap_max;
	struct cpu_claim cpu;        /* --poll-budget, --busy-poll, --nice, --slice, --realtime */
	bool no_ingress_drop;
	bool no_gso;
	bool foreground;
	bool verbose;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rocemud -i IFACE [-a ADDRESS]... [-s SOCKET] [-g GROUP] [-m PMTU] [-d] [-v]\n"
		"               [--pin-total BYTES] [--fault SPEC] [--pcap FILE [--pcap-max BYTES]]\n"
		"               [--poll-budget USEC] [--busy-poll USEC] [--no-ingress-drop]\n"
		"               [--no-gso] [--cc SPEC] [--nice N] [--slice USEC] [--realtime PRIO]\n"
		"  -i IFACE   the Ethernet interface to play the HCA on\n"
		"  -a ADDRESS an interface address to serve, IPv4 or IPv6; again for more (up to %d:\n"
		"             GIDs 0, 1, ... in this order; default: the first IPv4 address and\n"
		"             every global IPv6 one)\n"
		"  -s SOCKET  the control socket (default: %s/IFACE.sock)\n"
		"  -g GROUP   the socket's group: its members may use the daemon (mode 0660)\n"
		"  -m PMTU    cap the path MTU: 256, 512, 1024, 2048 or 4096\n"
		"  -d         stay in the foreground and log to stderr\n"
		"  -v         log debug messages\n"
		"  --pin-total BYTES  cap on the memory all clients together may pin (K, M, G;\n"
		"             default: half of the machine's memory)\n"
		"  --fault drop=P,dup=P,corrupt=P,reorder=P,delay=USEC[,seed=N][,dir=rx|tx|both]\n"
		"             inject faults into RoCE traffic (probabilities 0-1; off by default;\n"
		"             also at run time: rocemuctl fault)\n"
		"  --pcap FILE  record every RoCE frame sent and received (libpcap savefile)\n"
		"  --pcap-max BYTES  at this size FILE becomes FILE.1 and a new FILE starts\n"
		"             (K, M, G; default 64M)\n"
		"  --poll-budget USEC  after work (frames, posts), keep polling the packet ring\n"
		"             and the rings of the QPs that rang for USEC microseconds before\n"
		"             sleeping; their clients skip the doorbell meanwhile (default %d,\n"
		"             0: sleep at once)\n"
		"  --busy-poll USEC  the same with a long budget (up to a second): lower latency\n"
		"             for a CPU kept busy while traffic flows\n"
		"  --no-ingress-drop  do not add the nftables ingress rule that keeps RoCE frames\n"
		"             to this address out of the kernel's IP input\n"
		"  --no-gso   send every packet in a send of its own, also on veth and lo\n"
		"             (where runs of one QP's packets go as one UDP GSO frame)\n"
		"  --cc off|KEY=VALUE,...  congestion control (DCQCN, on by default): CNPs when\n"
		"             the receive ring backs up or a packet arrives ECN CE, each QP's send\n"
		"             rate cut on a CNP; keys line-rate, min-rate, ai-rate, hai-rate (bit/s,\n"
		"             K M G), g, alpha-us, increase-us, reduce-us, cnp-us, byte-reset,\n"
		"             burst, fast-stages, mark (ring slots); see rocemud(8)\n"
		"  --nice N   the daemon's scheduling priority, -20 to 19 (default -10: it plays\n"
		"             a NIC, which the programs it serves must not starve)\n"
		"  --slice USEC  ask Linux (6.12 and later) for a time slice of USEC microseconds,\n"
		"             %d to %d, so a wakeup of the daemon preempts a program spinning on\n"
		"             the CPU sooner (0: the kernel's own)\n"
		"  --realtime PRIO  sleep under SCHED_FIFO at PRIO (1-99; 0, the default: off), so\n"
		"             a frame or a doorbell preempts the programs that spin on the CPU;\n"
		"             the daemon polls and works at --nice, and drops the real-time\n"
		"             policy for %d ms whenever it runs %d ms without sleeping\n",
		DEV_MAX_GIDS, ROCEMU_DEFAULT_SOCKET_DIR, POLL_BUDGET_DEFAULT_US, CPU_SLICE_MIN_US,
		CPU_SLICE_MAX_US, RT_BACKOFF_MS,
		RT_RUN_MAX_MS);
}

static enum ibv_mtu mtu_from_bytes(int bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return 0;
	}
}

static bool parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;

	if (end == s || *s == '-')
		return false;
	switch (*end) {
	case '\0': break;
	case 'K': case 'k': shift = 10; break;
	case 'M': case 'm': shift = 20; break;
	case 'G': case 'g': shift = 30; break;
	default: return false;
	}
	if ((shift && end[1]) || v == 0 || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static int parse_usec(const char *opt, const char *arg, unsigned long min, uint32_t *us)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (end == arg || *end || *arg == '-' || v < min || v > 1000000) {
		fprintf(stderr, "rocemud: %s %s: microseconds, %lu to 1000000\n", opt, arg, min);
		return -1;
	}
	*us = (uint32_t)v;
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "fault", required_argument, NULL, 'F' },
		{ "cc", required_argument, NULL, 'c' },
		{ "nice", required_argument, NULL, 'n' },
		{ "realtime", required_argument, NULL, 'R' },
		{ "slice", required_argument, NULL, 'S' },
		{ "pin-total", required_argument, NULL, 'P' },
		{ "pcap", required_argument, NULL, 'C' },
		{ "pcap-max", required_argument, NULL, 'M' },
		{ "busy-poll", required_argument, NULL, 'B' },
		{ "poll-budget", required_argument, NULL, 'b' },
		{ "no-ingress-drop", no_argument, NULL, 'N' },
		{ "no-gso", no_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "i:a:s:g:m:dvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'g': o->group = optarg; break;
		case 'F': o->fault = optarg; break;
		case 'c': o->cc = optarg; break;
		case 'n': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (end == optarg || *end || v < -20 || v > 19) {
				fprintf(stderr, "rocemud: --nice %s: a priority from -20 to 19\n",
					optarg);
				return -1;
			}
			o->cpu.nice = (int)v;
			break;
		}
		case 'R': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (end == optarg || *end || v < 0 || v > 99) {
				fprintf(stderr, "rocemud: --realtime %s: a SCHED_FIFO priority from 1 "
						"to 99, or 0 for none\n", optarg);
				return -1;
			}
			o->cpu.rt_priority = (int)v;
			break;
		}
		case 'S': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || *optarg == '-' || (v && v < CPU_SLICE_MIN_US) ||
			    v > CPU_SLICE_MAX_US) {
				fprintf(stderr, "rocemud: --slice %s: microseconds, %d to %d, or 0 "
						"for the kernel's own\n", optarg, CPU_SLICE_MIN_US,
					CPU_SLICE_MAX_US);
				return -1;
			}
			o->cpu.slice_us = (uint32_t)v;
			break;
		}
		case 'C': o->pcap = optarg; break;
		case 'N': o->no_ingress_drop = true; break;
		case 'G': o->no_gso = true; break;
		case 'B':
			if (parse_usec("--busy-poll", optarg, 1, &o->cpu.poll_us) < 0)
				return -1;
			o->cpu.busy_poll = true;
			break;
		case 'b':
			if (parse_usec("--poll-budget", optarg, 0, &o->cpu.poll_us) < 0)
				return -1;
			o->cpu.busy_poll = false;
			break;
		case 'M':
			if (!parse_bytes(optarg, &o->pcap_max) || o->pcap_max < 4096) {
				fprintf(stderr, "rocemud: --pcap-max %s: a number of bytes of at "
						"least 4096, with K, M or G\n", optarg);
				return -1;
			}
			break;
		case 'P':
			if (!parse_bytes(optarg, &o->pin_total)) {
				fprintf(stderr, "rocemud: --pin-total %s: a number of bytes, with K, M "
						"or G\n", optarg);
				return -1;
			}
			break;
		case 'i': o->ifname = optarg; break;
		case 'a':
			if (o->naddrs == DEV_MAX_GIDS) {
				fprintf(stderr, "rocemud: -a %s: at most %d addresses\n", optarg,
					DEV_MAX_GIDS);
				return -1;
			}
			o->addrs[o->naddrs++] = optarg;
			break;
		case 's': o->socket = optarg; break;
		case 'm':
			o->pmtu = atoi(optarg);
			if (!mtu_from_bytes(o->pmtu)) {
				fprintf(stderr, "rocemud: -m %s: the path MTU is one of 256, 512, "
						"1024, 2048, 4096\n", optarg);
				return -1;
			}
			break;
		case 'd': o->foreground = true; break;
		case 'v': o->verbose = true; break;
		case 'h': usage(stdout); exit(0);
		default: return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "rocemud: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (o->pcap_max && !o->pcap) {
		fprintf(stderr, "rocemud: --pcap-max needs --pcap FILE\n");
		return -1;
	}
	if (!o->ifname) {
		fprintf(stderr, "rocemud: -i IFACE is required\n");
		return -1;
	}
	return 0;
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	log_info("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct dev *dev = w->data;

	(void)loop;
	(void)revents;
	/* what waits on us first: clients on their completions, peers on their ACKs */
	cq_flush_notify(dev);
	sched_send(dev);
	if (dev->poll_budget > 0)
		cpu_poll_or_sleep(dev);
	/* and the completions sending just made (UC, UD and local requests, failures): the
	 * loop may sleep next, and a client asleep on one of them would sleep on with it */
	cq_flush_notify(dev);
	cpu_before_wait(dev);
}

/* The default cap on pinned memory: enough for any test, short of locking the host up. */
static uint64_t half_of_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 2 : 0;
}

/* Each CQ and QP costs two descriptors: take the hard limit, not the usual soft 1024. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void log_gids(const struct dev *dev)
{
	char ip[INET6_ADDRSTRLEN];

	for (unsigned i = 0; i < dev->port.ngids; i++)
		log_info("GID %u: %s (%s)", i, addr_str(dev->port.gids[i].raw, ip, sizeof(ip)),
			 dev->port.gids[i].ipv6 ? "IPv6" : "IPv4");
}

static void on_frame(void *dev, const uint8_t *frame, size_t len)
{
	rx_frame(dev, frame, len);
}

static void on_neigh_ready(void *client)
{
	ctl_resume(client);
}

/* The layers call upward only through these, so port/ knows no QP and transport/ no
 * client. */
static void join_layers(struct dev *dev)
{
	dev->port.loop = dev->loop;
	dev->port.cnt = &dev->cnt;
	dev->port.on_frame = on_frame;
	dev->port.frame_ctx = dev;
	dev->port.on_neigh_ready = on_neigh_ready;
	dev->tp.find_ah = ah_find;
}

/* The CM on QP 1 takes the frames the receive path diverts to it; it needs the port open
 * (its CA GUID is the interface's MAC). */
static int join_cm(struct dev *dev)
{
	dev->cm = cm_new(dev);
	if (!dev->cm)
		return -1;
	dev->tp.on_gsi = cm_on_frame;
	dev->tp.gsi_ctx = dev->cm;
	return 0;
}

static int dev_start(struct dev *dev, const struct options *o)
{
	char err[256], path[108];

	dev->port.gso_off = o->no_gso;
	dev->port.on_link = ctl_link_changed;
	dev->port.link_ctx = dev;
	if (net_open(&dev->port, o->ifname, o->addrs, o->naddrs, err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemud: %s\n", err);
		return -1;
	}
	if (join_cm(dev) < 0) {
		fprintf(stderr, "rocemud: cannot create the CM: %s\n", strerror(errno));
		return -1;
	}
	dcqcn_defaults(&dev->tp.cc, net_line_rate(&dev->port));
	if (o->cc && dcqcn_parse(o->cc, &dev->tp.cc, err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemud: --cc: %s\n", err);
		return -1;
	}
	dev->port.ce_mark_backlog = dev->tp.cc.mark_backlog;
	if (net_set_fault(&dev->port, o->fault ? o->fault : "off", err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemud: --fault: %s\n", err);
		return -1;
	}
	if (o->pcap && capture_open(&dev->port, o->pcap, o->pcap_max ? o->pcap_max : PCAP_MAX_DEFAULT,
				    err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemud: %s\n", err);
		return -1;
	}
	if (o->pmtu && mtu_from_bytes(o->pmtu) < dev->port.active_mtu)
		dev->port.active_mtu = mtu_from_bytes(o->pmtu);
	dev->mrs = mr_table_new(MR_MAX_REGIONS, o->pin_total ? o->pin_total : half_of_memory());
	if (!dev->mrs) {
		fprintf(stderr, "rocemud: cannot create the MR table: %s\n", strerror(errno));
		return -1;
	}
	if (o->socket)
		snprintf(path, sizeof(path), "%s", o->socket);
	else
		snprintf(path, sizeof(path), "%s/%s.sock", ROCEMU_DEFAULT_SOCKET_DIR, o->ifname);
	if (ctl_open(dev, path, o->group, err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemud: %s\n", err);
		return -1;
	}
	return 0;
}

static void start_ingress_drop(struct dev *dev)
{
	char err[256];

	if (ingress_drop_add(&dev->port, err, sizeof(err)) == 0)
		log_info("RoCE frames to this address are dropped at ingress after capture "
			 "(nftables table netdev %s)", dev->port.ingress_table);
	else
		log_info("no ingress drop (%s): the kernel's IP input sees every RoCE frame, and "
			 "the UDP socket on port %d keeps it quiet", err, WIRE_ROCE_PORT);
}

static void dev_stop(struct dev *dev)
{
	char err[256];

	if (ingress_drop_remove(&dev->port, err, sizeof(err)) < 0)
		log_warn("removing the ingress drop: %s", err);
	while (!LIST_EMPTY(&dev->ctl.clients))
		ctl_client_destroy(LIST_FIRST(&dev->ctl.clients));
	ctl_close(dev);
	cm_free(dev->cm);
	dev->cm = NULL;
	net_close(&dev->port);
	if (dev->mrs)
		mr_table_free(dev->mrs);
}

int main(int argc, char **argv)
{
	static struct dev dev;
	struct options o = { .cpu = { .nice = -10, .poll_us = POLL_BUDGET_DEFAULT_US } };
	ev_signal sigint, sigterm;
	int status = 1;

	if (parse_options(argc, argv, &o) < 0) {
		usage(stderr);
		return 2;
	}
	log_init(true, o.verbose);
	dev.loop = EV_DEFAULT;
	join_layers(&dev);
	LIST_INIT(&dev.ctl.clients);
	sched_init(&dev);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	if (dev_start(&dev, &o) < 0)
		goto out;
	if (!o.foreground) {
		if (daemon(0, 0) < 0) {
			fprintf(stderr, "rocemud: cannot detach: %s\n", strerror(errno));
			goto out;
		}
		log_init(false, o.verbose);
	}
	log_gids(&dev);
	log_info("rocemud on %s, MTU %u, socket %s", dev.port.ifname, net_mtu_bytes(dev.port.active_mtu),
		 dev.ctl.sock_path);
	log_info("%s", dev.port.tx_gso ? "packets of one QP go out as UDP GSO frames" :
		 o.no_gso ? "no GSO (--no-gso): every packet is a send of its own" :
		 "no GSO: the kernel lacks virtio-net headers on packet sockets");
	/* off by default on virtio-net, where on it carries a run whole to a VM or host peer */
	if (dev.port.tx_gso && udptx_segmentation_off(&dev.port))
		log_info("%s can cut UDP GSO frames itself, but its tx-udp-segmentation is off: "
			 "'ethtool -K %s tx-udp-segmentation on' lets runs cross the link whole",
			 dev.port.ifname, dev.port.ifname);
	if (!o.no_ingress_drop)
		start_ingress_drop(&dev);
	if (fault_active(&dev.port.fault)) {
		char spec[256];

		fault_format(&dev.port.fault, spec, sizeof(spec));
		log_info("injecting faults: %s", spec);
	}
	{
		char spec[512];

		dcqcn_format(&dev.tp.cc, spec, sizeof(spec));
		log_info("congestion control: %s", spec);
	}
	ev_signal_init(&sigint, on_signal, SIGINT);
	ev_signal_init(&sigterm, on_signal, SIGTERM);
	ev_signal_start(dev.loop, &sigint);
	ev_signal_start(dev.loop, &sigterm);
	ev_prepare_init(&dev.flush_watcher, on_prepare);
	dev.flush_watcher.data = &dev;
	ev_prepare_start(dev.loop, &dev.flush_watcher);
	cpu_claim_start(&dev, &o.cpu);
	loopq_init(&dev.port);
	ev_run(dev.loop, 0);
	status = 0;
out:
	dev_stop(&dev);
	return status;
}
