/* rocemuctl: the control and inspection tool. Verbs are dispatched from one table. */
#include <getopt.h>
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

static int print_stats(const struct proto_stats_reply *r, bool json)
{
	uint32_t n = r->ncounters < PROTO_NCOUNTERS ? r->ncounters : PROTO_NCOUNTERS;

	if (json) {
		printf("{\"fault\":\"%.*s\"", (int)sizeof(r->fault), r->fault);
		for (uint32_t i = 0; i < n; i++)
			printf(",\"%s\":%llu", counter_names[i], (unsigned long long)r->counters[i]);
		printf("}\n");
		return 0;
	}
	for (uint32_t i = 0; i < n; i++)
		printf("%-24s %14llu  %s\n", counter_names[i], (unsigned long long)r->counters[i],
		       counter_help[i]);
	printf("%-24s %14s  %.*s\n", "fault injection", "", (int)sizeof(r->fault), r->fault);
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

static const struct verb verbs[] = {
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
