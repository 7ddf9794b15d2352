/* rocemuctl: the control and inspection tool. Verbs are dispatched from one table. */
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu/proto.h"
#include "tools/ctl_client.h"
#include "tools/decode.h"

/* -s SOCKET, given before the verb */
static const char *socket_path;

struct verb {
	const char *name;
	const char *args;
	const char *help;
	int (*run)(int argc, char **argv);
};

static int cmd_decode(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct decode_summary sum;
	char err[512];
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (c != 'j') {
			fprintf(stderr, "usage: rocemuctl decode [--json] FILE.pcap\n");
			return c == 'h' ? 0 : 2;
		}
		json = true;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "rocemuctl decode: expected one pcap file\n"
				"usage: rocemuctl decode [--json] FILE.pcap\n");
		return 2;
	}
	if (decode_file(argv[optind], stdout, json, &sum, err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemuctl decode: %s\n", err);
		return 2;
	}
	/* JSON mode keeps stdout one packet object a line; the summary goes aside. */
	decode_print_summary(json ? stderr : stdout, &sum);
	return 0;
}

static const char *const counter_names[] = {
#define COUNTER_NAME(name, help) #name,
	PROTO_COUNTERS(COUNTER_NAME)
#undef COUNTER_NAME
};
static const char *const counter_help[] = {
#define COUNTER_HELP(name, help) help,
	PROTO_COUNTERS(COUNTER_HELP)
#undef COUNTER_HELP
};

/* Why the responder refused requests and why send requests failed, by reason: the
 * counters of the stats reply's tail, printed as refused_NAME and failed_NAME. */
static const char *const refusal_names[] = {
#define REASON_NAME(name, help) #name,
	PROTO_REFUSALS(REASON_NAME)
};
static const char *const refusal_help[] = {
#define REASON_HELP(name, help) help,
	PROTO_REFUSALS(REASON_HELP)
};
static const char *const failure_names[] = { PROTO_FAILURES(REASON_NAME) };
static const char *const failure_help[] = { PROTO_FAILURES(REASON_HELP) };
#undef REASON_NAME
#undef REASON_HELP

static const char *reason_name(const char *const *names, unsigned n, unsigned i)
{
	return i < n ? names[i] : "unknown";
}

/* A table of counters with their names and help, the first (none) left out. */
static void print_reasons(const char *prefix, const uint64_t *v, uint32_t n,
			  const char *const *names, const char *const *help, bool json)
{
	char name[64];

	for (uint32_t i = 1; i < n; i++) {
		snprintf(name, sizeof(name), "%s_%s", prefix, names[i]);
		if (json)
			printf(",\"%s\":%llu", name, (unsigned long long)v[i]);
		else
			printf("%-30s %14llu  %s\n", name, (unsigned long long)v[i], help[i]);
	}
}

static int print_stats(const struct proto_stats_reply *r, bool json)
{
	uint32_t n = r->ncounters < PROTO_NCOUNTERS ? r->ncounters : PROTO_NCOUNTERS;
	uint32_t nref = r->nrefusals < PROTO_NREFUSALS ? r->nrefusals : PROTO_NREFUSALS;
	uint32_t nfail = r->nfailures < PROTO_NFAILURES ? r->nfailures : PROTO_NFAILURES;

	if (json) {
		printf("{\"fault\":\"%.*s\"", (int)sizeof(r->fault), r->fault);
		for (uint32_t i = 0; i < n; i++)
			printf(",\"%s\":%llu", counter_names[i], (unsigned long long)r->counters[i]);
	} else {
		for (uint32_t i = 0; i < n; i++)
			printf("%-30s %14llu  %s\n", counter_names[i],
			       (unsigned long long)r->counters[i], counter_help[i]);
	}
	print_reasons("refused", r->refused, nref, refusal_names, refusal_help, json);
	print_reasons("failed", r->failed, nfail, failure_names, failure_help, json);
	if (json)
		printf("}\n");
	else
		printf("%-30s %14s  %.*s\n", "fault injection", "", (int)sizeof(r->fault), r->fault);
	return 0;
}

static int cmd_stats(int argc, char **argv)
{
	struct proto_handle req = { .hdr.op = PROTO_STATS };
	struct proto_stats_reply rep;
	bool json = argc == 2 && !strcmp(argv[1], "--json");
	char err[256];
	int fd;

	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: rocemuctl [-s SOCKET] stats [--json]\n");
		return 2;
	}
	fd = ctl_connect(socket_path, err, sizeof(err));
	if (fd < 0 || ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemuctl stats: %s\n", err);
		return 1;
	}
	close(fd);
	return print_stats(&rep, json);
}

static int cmd_fault(int argc, char **argv)
{
	struct proto_fault req = { .hdr.op = PROTO_SET_FAULT };
	struct proto_reply rep;
	char err[256];
	int fd;

	if (argc != 2 || strlen(argv[1]) >= sizeof(req.spec)) {
		fprintf(stderr, "usage: rocemuctl [-s SOCKET] fault off | "
				"drop=P,dup=P,corrupt=P,reorder=P,delay=USEC[,seed=N][,dir=rx|tx|both]\n");
		return 2;
	}
	snprintf(req.spec, sizeof(req.spec), "%s", argv[1]);
	fd = ctl_connect(socket_path, err, sizeof(err));
	if (fd < 0 || ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemuctl fault: %s\n", err);
		return 1;
	}
	close(fd);
	return 0;
}

/* status, clients, mr, qp: what ibv_devinfo and rdma resource show print for an HCA. */

static unsigned mtu_bytes(uint32_t mtu)
{
	return mtu >= 1 && mtu <= 5 ? 128u << mtu : 0;
}

static void access_names(uint32_t access, char *buf, size_t len)
{
	static const char *const names[] = { "LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ",
					     "REMOTE_ATOMIC" };
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < 4; i++)
		if (access & (1u << i))
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "|" : "",
						 names[i]);
	if (!used)
		snprintf(buf, len, "LOCAL_READ");
}

/* argv is VERB [--json]: the connected socket, or -1 after printing why. */
static int view_open(const char *verb, int argc, char **argv, bool *json)
{
	char err[256];
	int fd;

	*json = argc == 2 && !strcmp(argv[1], "--json");
	if (argc > 2 || (argc == 2 && !*json)) {
		fprintf(stderr, "usage: rocemuctl [-s SOCKET] %s [--json]\n", verb);
		return -2;
	}
	fd = ctl_connect(socket_path, err, sizeof(err));
	if (fd < 0)
		fprintf(stderr, "rocemuctl %s: %s\n", verb, err);
	return fd;
}

/* A GID as ibv_devinfo prints it: ::ffff:a.b.c.d for IPv4, the IPv6 address else. */
static const char *gid_text(const uint8_t gid[16], char *buf, size_t len)
{
	return inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
}

static void print_status(const struct proto_status_reply *r, bool json)
{
	char ip[INET_ADDRSTRLEN] = "none", gid[INET6_ADDRSTRLEN];
	const char *state = r->state == 4 ? "PORT_ACTIVE" : "PORT_DOWN";
	uint32_t ngids = r->ngids < PROTO_MAX_GIDS ? r->ngids : PROTO_MAX_GIDS;

	if (r->ipv4)
		inet_ntop(AF_INET, &r->ipv4, ip, sizeof(ip));
	if (json) {
		printf("{\"ifname\":\"%.16s\",\"state\":\"%s\",\"max_mtu\":%u,\"active_mtu\":%u,"
		       "\"gids\":[", r->ifname, state, mtu_bytes(r->max_mtu), mtu_bytes(r->active_mtu));
		for (uint32_t i = 0; i < ngids; i++)
			printf("%s\"%s\"", i ? "," : "", gid_text(r->gids[i], gid, sizeof(gid)));
		printf("],\"ipv4\":\"%s\",\"clients\":%u,\"qps\":%u,"
		       "\"mrs\":%u,\"pinned_bytes\":%" PRIu64 ",\"rcvd_pkts\":%" PRIu64 ","
		       "\"sent_pkts\":%" PRIu64 ",\"drops\":%" PRIu64 "}\n", ip, r->clients, r->qps,
		       r->mrs, r->pinned_bytes, r->rcvd_pkts, r->sent_pkts, r->drops);
		return;
	}
	printf("interface:      %.16s\nport:           1\nstate:          %s (%u)\n"
	       "max_mtu:        %u (%u)\nactive_mtu:     %u (%u)\nlink_layer:     Ethernet\n",
	       r->ifname, state, r->state, mtu_bytes(r->max_mtu), r->max_mtu,
	       mtu_bytes(r->active_mtu), r->active_mtu);
	for (uint32_t i = 0; i < ngids; i++)
		printf("GID[%u]:%*s%s (RoCE v2)\n", i, i < 10 ? 9 : 8, "",
		       gid_text(r->gids[i], gid, sizeof(gid)));
	printf("ipv4:           %s\n"
	       "clients:        %u\nqps:            %u\nmrs:            %u\n"
	       "pinned_bytes:   %" PRIu64 "\nrcvd_pkts:      %" PRIu64 "\n"
	       "sent_pkts:      %" PRIu64 "\ndrops:          %" PRIu64 "\n", ip, r->clients,
	       r->qps, r->mrs, r->pinned_bytes, r->rcvd_pkts, r->sent_pkts, r->drops);
}

/* The peer's address from its GID: dotted for IPv4-mapped, IPv6 else. */
static const char *peer_text(const uint8_t gid[16], char *buf, size_t len)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(gid, v4_prefix, sizeof(v4_prefix)))
		return inet_ntop(AF_INET, gid + 12, buf, (socklen_t)len);
	return inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
}

static int cmd_status(int argc, char **argv)
{
	struct proto_handle req = { .hdr.op = PROTO_STATUS };
	struct proto_status_reply rep;
	char err[256];
	bool json;
	int fd = view_open("status", argc, argv, &json);

	if (fd < 0)
		return fd == -2 ? 2 : 1;
	if (ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemuctl status: %s\n", err);
		close(fd);
		return 1;
	}
	close(fd);
	print_status(&rep, json);
	return 0;
}

static void print_client(const struct proto_list_reply *r, uint32_t i, bool json)
{
	const struct proto_client_entry *e = &r->u.clients[i];

	printf(json ? "{\"pid\":%u,\"uid\":%u,\"comm\":\"%.16s\",\"pinned_bytes\":%" PRIu64 ","
		      "\"pds\":%u,\"mrs\":%u,\"cqs\":%u,\"qps\":%u}" :
		      "pid %u uid %u comm %.16s pinned_bytes %" PRIu64 " pds %u mrs %u cqs %u qps %u\n",
	       e->pid, e->uid, e->comm, e->pinned_bytes, e->pds, e->mrs, e->cqs, e->qps);
}

static void print_mr(const struct proto_list_reply *r, uint32_t i, bool json)
{
	const struct proto_mr_entry *e = &r->u.mrs[i];
	char access[80];

	access_names(e->access, access, sizeof(access));
	printf(json ? "{\"pid\":%u,\"pd\":%u,\"lkey\":%u,\"rkey\":%u,\"iova\":%" PRIu64 ","
		      "\"length\":%" PRIu64 ",\"access\":\"%s\"}" :
		      "pid %u pd %u lkey 0x%x rkey 0x%x iova 0x%" PRIx64 " length %" PRIu64
		      " access %s\n",
	       e->pid, e->pd, e->lkey, e->rkey, e->iova, e->length, access);
}

static void print_qp(const struct proto_list_reply *r, uint32_t i, bool json)
{
	const struct proto_qp_entry *e = &r->u.qps[i];
	char ip[INET6_ADDRSTRLEN];

	peer_text(e->dest_gid, ip, sizeof(ip));
	printf(json ? "{\"pid\":%u,\"qpn\":%u,\"state\":\"%s\",\"peer\":\"%s\","
		      "\"dest_qpn\":%u,\"sq_psn\":%u,\"rq_psn\":%u,\"path_mtu\":%u,"
		      "\"srtt_us\":%u,\"rto_us\":%u,\"rate_mbps\":%u,"
		      "\"last_refused\":\"%s\",\"last_failed\":\"%s\",\"sq_posted\":%u,"
		      "\"sq_taken\":%u,\"sq_done\":%u,\"rq_posted\":%u,\"rq_taken\":%u}" :
		      "pid %u qpn %u state %s peer %s dest_qpn %u sq_psn %u rq_psn %u path_mtu %u"
		      " srtt_us %u rto_us %u rate_mbps %u last_refused %s last_failed %s"
		      " sq_posted %u sq_taken %u sq_done %u rq_posted %u rq_taken %u\n",
	       e->pid, e->qpn, proto_qp_state_name(e->state), ip, e->dest_qpn, e->sq_psn, e->rq_psn,
	       mtu_bytes(e->path_mtu), e->srtt_us, e->rto_us, e->rate_mbps,
	       reason_name(refusal_names, PROTO_NREFUSALS, e->last_refusal),
	       reason_name(failure_names, PROTO_NFAILURES, e->last_failure), e->sq_posted,
	       e->sq_taken, e->sq_done, e->rq_posted, e->rq_taken);
}

/* A CM listener ("LISTEN"), a port an id holds before it listens ("BOUND"), each with its
 * address (all zeros for any), or a connection. */
static void print_cm(const struct proto_list_reply *r, uint32_t i, bool json)
{
	const struct proto_cm_entry *e = &r->u.cms[i];
	static const uint8_t any[16];
	char ip[INET6_ADDRSTRLEN];
	bool conn = strncmp(e->state, "LISTEN", 6) && strncmp(e->state, "BOUND", 5);

	if (!memcmp(e->peer_gid, any, sizeof(any)))
		snprintf(ip, sizeof(ip), "*");
	else
		peer_text(e->peer_gid, ip, sizeof(ip));
	printf(json ? "{\"pid\":%u,\"state\":\"%.12s\",\"local_comm_id\":%u,"
		      "\"remote_comm_id\":%u,\"qpn\":%u,\"remote_qpn\":%u,"
		      "\"service_id\":\"0x%016" PRIx64 "\",\"%s\":\"%s\"}" :
		      "pid %u state %.12s local_comm_id 0x%08x remote_comm_id 0x%08x qpn %u "
		      "remote_qpn %u service_id 0x%016" PRIx64 " %s %s\n",
	       e->pid, e->state, e->local_comm_id, e->remote_comm_id, e->local_qpn, e->remote_qpn,
	       e->service_id, conn ? "peer" : "address", ip);
}

typedef void (*print_entry_fn)(const struct proto_list_reply *r, uint32_t i, bool json);

/* Every page of one list, printed as it comes: a JSON array, or one line per entry. */
static int list_all(int fd, uint32_t kind, print_entry_fn print, bool json, char *err,
		    size_t errlen)
{
	struct proto_list req = { .hdr.op = PROTO_LIST, .kind = kind };
	struct proto_list_reply rep;
	bool first = true;

	if (json)
		printf("[");
	do {
		if (ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), err, errlen) < 0)
			return -1;
		for (uint32_t i = 0; i < rep.count; i++) {
			if (json && !first)
				printf(",");
			print(&rep, i, json);
			first = false;
		}
		req.start = rep.next;
	} while (rep.next);
	if (json)
		printf("]\n");
	return 0;
}

static int cmd_list(const char *verb, uint32_t kind, print_entry_fn print, int argc,
		    char **argv)
{
	char err[256];
	bool json;
	int fd = view_open(verb, argc, argv, &json);

	if (fd < 0)
		return fd == -2 ? 2 : 1;
	if (list_all(fd, kind, print, json, err, sizeof(err)) < 0) {
		fprintf(stderr, "rocemuctl %s: %s\n", verb, err);
		close(fd);
		return 1;
	}
	close(fd);
	return 0;
}

static int cmd_clients(int argc, char **argv)
{
	return cmd_list("clients", PROTO_LIST_CLIENTS, print_client, argc, argv);
}

static int cmd_mr(int argc, char **argv)
{
	return cmd_list("mr", PROTO_LIST_MRS, print_mr, argc, argv);
}

static int cmd_qp(int argc, char **argv)
{
	return cmd_list("qp", PROTO_LIST_QPS, print_qp, argc, argv);
}

static int cmd_cm(int argc, char **argv)
{
	return cmd_list("cm", PROTO_LIST_CM, print_cm, argc, argv);
}

static const struct verb verbs[] = {
	{ "status", "[--json]", "the port: state, MTU, GID table, address, totals",
	  cmd_status },
	{ "clients", "[--json]", "connected processes: pid, uid, command, pinned bytes",
	  cmd_clients },
	{ "mr", "[--json]", "memory regions: owner, PD, lkey, rkey, iova, length, access",
	  cmd_mr },
	{ "qp", "[--json]", "queue pairs: owner, QPN, state, peer, PSNs, path MTU", cmd_qp },
	{ "cm", "[--json]", "RDMA CM listeners and connections: state, comm IDs, QPNs, peer",
	  cmd_cm },
	{ "stats", "[--json]", "the device's counters (rxe's hw_counters names first)",
	  cmd_stats },
	{ "fault", "SPEC | off", "inject faults at run time (see rocemud --fault)", cmd_fault },
	{ "decode", "[--json] FILE.pcap",
	  "print every RoCEv2 packet of a capture and check its ICRC", cmd_decode },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: rocemuctl [-s SOCKET] VERB [ARGS]\n\nverbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(out, "  %-7s %-22s %s\n", verbs[i].name, verbs[i].args, verbs[i].help);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "-s")) {
		socket_path = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].run(argc - 1, argv + 1);
	fprintf(stderr, "rocemuctl: unknown verb '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
