/* rocemuctl: the control and inspection tool. Verbs are dispatched from one table. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tools/decode.h"

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

static const struct verb verbs[] = {
	{ "decode", "[--json] FILE.pcap",
	  "print every RoCEv2 packet of a capture and check its ICRC", cmd_decode },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: rocemuctl VERB [ARGS]\n\nverbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(out, "  %-7s %-22s %s\n", verbs[i].name, verbs[i].args, verbs[i].help);
}

int main(int argc, char **argv)
{
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
