/* rdma-write's command line: the options, their parsers, the usage text and which role
 * may take which option. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/rdma-write/rdma-write.h"

#define DEFAULT_PORT       18515
#define DEFAULT_SIZE       65536
#define DEFAULT_ITERS      1000
#define DEFAULT_TX_DEPTH   128
#define DEFAULT_TIMEOUT_MS 30000
#define MAX_TX_DEPTH       65536

enum long_only_option {
	OPT_SERVER = 256,
	OPT_VERIFY,
	OPT_JSON,
	OPT_REMOTE_OFFSET,
	OPT_RKEY_XOR,
	OPT_TX_DEPTH,
	OPT_MTU,
	OPT_TIMEOUT_MS,
	OPT_RETRY_CNT,
	OPT_START_FILE,
};

static const struct option long_options[] = {
	{ "server", no_argument, NULL, OPT_SERVER },
	{ "socket", required_argument, NULL, 'D' },
	{ "port", required_argument, NULL, 'p' },
	{ "size", required_argument, NULL, 's' },
	{ "iters", required_argument, NULL, 'n' },
	{ "verify", no_argument, NULL, OPT_VERIFY },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "remote-offset", required_argument, NULL, OPT_REMOTE_OFFSET },
	{ "rkey-xor", required_argument, NULL, OPT_RKEY_XOR },
	{ "tx-depth", required_argument, NULL, OPT_TX_DEPTH },
	{ "mtu", required_argument, NULL, OPT_MTU },
	{ "timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS },
	{ "qp-timeout", required_argument, NULL, 'u' },
	{ "retry-cnt", required_argument, NULL, OPT_RETRY_CNT },
	{ "start-file", required_argument, NULL, OPT_START_FILE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " --server [-D SOCKET] [-p PORT] [-s SIZE] [--verify] [OPTIONS]\n"
		"       " PROG " [-D SOCKET] [-p PORT] [-s SIZE] [-n ITERS] [--verify] [--json]"
		" [OPTIONS] SERVER\n"
		"\n"
		"  --server              wait for one client and let it write into a SIZE buffer\n"
		"  -D, --socket PATH     the daemon's socket (default: $ROCEMU_SOCKET, else the\n"
		"                        only socket in " ROCEMU_DEFAULT_SOCKET_DIR ")\n"
		"  -p, --port PORT       TCP port of the connection exchange (default %d)\n"
		"  -s, --size SIZE       message size; the server's buffer size (default %d);\n"
		"                        K, M, G suffixes (powers of 1024); 1 to 2G\n"
		"  -n, --iters N         messages to write (client; default %d)\n"
		"  --verify              client writes a pattern per iteration, server checks the\n"
		"                        last one; give it to both sides\n"
		"  --json                print one JSON object instead of the table (client)\n"
		"  --tx-depth N          work requests in flight (default %d)\n"
		"  --mtu BYTES           256, 512, 1024, 2048 or 4096 (default: the smaller\n"
		"                        active MTU of the two ends)\n"
		"  --timeout-ms MS       give up when the peer or the completions are silent\n"
		"                        this long (default %d)\n"
		"  -u, --qp-timeout N    the QP's retransmission timeout, 4.096 us * 2^N\n"
		"                        (default 14, as perftest)\n"
		"  --retry-cnt N         retransmissions before IBV_WC_RETRY_EXC_ERR\n"
		"                        (0 to 7, 7 = forever; default 7)\n"
		"  --remote-offset N     write at the server's address + N, on purpose outside\n"
		"                        its buffer (client; signed, decimal or 0x hex)\n"
		"  --rkey-xor X          use the server's rkey XOR X, on purpose a wrong key\n"
		"                        (client; decimal or 0x hex)\n"
		"  --start-file PATH     connect, then wait until PATH exists before the first\n"
		"                        write, --timeout-ms at most: clients started one by one\n"
		"                        write together (client)\n"
		"  -h, --help            this help\n"
		"\n"
		"Exit status: 0 on success, 1 when the run or the check failed, 2 for bad usage.\n"
		"The server's success is a buffer holding what the client reports: the last\n"
		"pattern (--verify), or its original contents after the client failed.\n",
		DEFAULT_PORT, DEFAULT_SIZE, DEFAULT_ITERS, DEFAULT_TX_DEPTH, DEFAULT_TIMEOUT_MS);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n\n", stderr);
	usage(stderr);
	return PARSE_ERROR;
}

/* Decimal, or hex after 0x; digits only (strtoull alone would accept blanks and signs). */
static bool parse_u64(const char *s, uint64_t *out)
{
	int base = 10;
	unsigned long long v;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s)
		return false;
	for (const char *p = s; *p; p++)
		if (base == 16 ? !isxdigit((unsigned char)*p) : !isdigit((unsigned char)*p))
			return false;
	errno = 0;
	v = strtoull(s, NULL, base);
	if (errno)
		return false;
	*out = v;
	return true;
}

static bool parse_u64_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	return parse_u64(s, out) && *out >= lo && *out <= hi;
}

/* Decimal digits with an optional K, M or G (powers of 1024). */
static bool parse_size(const char *s, uint64_t *out)
{
	size_t digits = strspn(s, "0123456789");
	unsigned shift = 0;
	unsigned long long v;

	if (!digits)
		return false;
	switch (s[digits]) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	default: return false;
	}
	if (shift && s[digits + 1])
		return false;
	errno = 0;
	v = strtoull(s, NULL, 10);
	if (errno || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* A signed or unsigned 64-bit value; negatives are kept in two's complement, which is
 * what adding them to a VA needs. */
static bool parse_offset(const char *s, uint64_t *out)
{
	bool negative = *s == '-';
	uint64_t magnitude;

	if (*s == '-' || *s == '+')
		s++;
	if (!parse_u64(s, &magnitude))
		return false;
	if (negative && magnitude > (uint64_t)INT64_MAX + 1)
		return false;
	*out = negative ? 0 - magnitude : magnitude;
	return true;
}

static bool parse_mtu(const char *s, uint32_t *out)
{
	uint64_t bytes;

	if (!parse_u64(s, &bytes))
		return false;
	for (uint32_t m = IBV_MTU_256; m <= IBV_MTU_4096; m++) {
		if (bytes == mtu_bytes(m)) {
			*out = m;
			return true;
		}
	}
	return false;
}

static int parse_one(int c, const char *arg, struct options *o)
{
	uint64_t v;

	switch (c) {
	case OPT_SERVER: o->server = true; break;
	case OPT_VERIFY: o->verify = true; break;
	case OPT_JSON: o->json = true; break;
	case 'D': o->socket_path = arg; break;
	case 'p':
		if (!parse_u64_range(arg, 1, 65535, &v))
			return usage_error("invalid port '%s' (1 to 65535)", arg);
		o->port = (uint16_t)v;
		break;
	case 's':
		if (!parse_size(arg, &v) || v < 1 || v > MAX_SIZE)
			return usage_error("invalid size '%s' (1 to 2G, suffixes K, M, G)", arg);
		o->size = (size_t)v;
		break;
	case 'n':
		if (!parse_u64_range(arg, 1, UINT64_MAX, &o->iters))
			return usage_error("invalid iteration count '%s' (at least 1)", arg);
		break;
	case OPT_REMOTE_OFFSET:
		if (!parse_offset(arg, &o->remote_offset))
			return usage_error("invalid --remote-offset '%s' "
					   "(64-bit, decimal or 0x hex)", arg);
		o->aim_outside = true;
		break;
	case OPT_RKEY_XOR:
		if (!parse_u64_range(arg, 0, UINT32_MAX, &v))
			return usage_error("invalid --rkey-xor '%s' (32-bit, decimal or 0x hex)",
					   arg);
		o->rkey_xor = (uint32_t)v;
		o->rkey_xor_given = true;
		break;
	case 'u':
		if (!parse_u64_range(arg, 0, 31, &v))
			return usage_error("invalid --qp-timeout '%s' (0 to 31: 4.096 us * 2^N, "
					   "0 = wait forever)", arg);
		o->qp_timeout = (uint8_t)v;
		break;
	case OPT_START_FILE:
		o->start_file = arg;
		break;
	case OPT_RETRY_CNT:
		if (!parse_u64_range(arg, 0, 7, &v))
			return usage_error("invalid --retry-cnt '%s' (0 to 7, 7 = forever)", arg);
		o->retry_cnt = (uint8_t)v;
		break;
	case OPT_TX_DEPTH:
		if (!parse_u64_range(arg, 1, MAX_TX_DEPTH, &v))
			return usage_error("invalid --tx-depth '%s' (1 to %d)", arg, MAX_TX_DEPTH);
		o->tx_depth = (uint32_t)v;
		break;
	case OPT_MTU:
		if (!parse_mtu(arg, &o->mtu))
			return usage_error("invalid --mtu '%s' (256, 512, 1024, 2048 or 4096)",
					   arg);
		break;
	case OPT_TIMEOUT_MS:
		if (!parse_u64_range(arg, 1, INT_MAX, &v))
			return usage_error("invalid --timeout-ms '%s' (1 to %d)", arg, INT_MAX);
		o->timeout_ms = (int)v;
		break;
	case 'h':
		usage(stdout);
		return PARSE_HELP;
	default:   /* getopt has named the bad option already */
		return usage_error("bad arguments");
	}
	return PARSE_OK;
}

/* Options that only make sense for one role are refused for the other, so a mistake in a
 * script shows instead of being ignored. -n is accepted (and unused) on the server, as
 * perftest accepts it. */
static int check_roles(int argc, char **argv, struct options *o)
{
	if (o->server) {
		if (optind < argc)
			return usage_error("--server takes no SERVER argument ('%s')",
					   argv[optind]);
		if (o->json || o->aim_outside || o->rkey_xor_given || o->start_file)
			return usage_error("--json, --remote-offset, --rkey-xor and --start-file "
					   "are client options");
		return PARSE_OK;
	}
	if (optind != argc - 1)
		return usage_error(optind < argc ? "expected one SERVER argument"
						 : "missing SERVER (or --server)");
	o->host = argv[optind];
	return PARSE_OK;
}

int parse_options(int argc, char **argv, struct options *o)
{
	int c, r;

	*o = (struct options){
		.port = DEFAULT_PORT,
		.size = DEFAULT_SIZE,
		.iters = DEFAULT_ITERS,
		.tx_depth = DEFAULT_TX_DEPTH,
		.qp_timeout = QP_TIMEOUT,
		.retry_cnt = QP_RETRY_CNT,
		.timeout_ms = DEFAULT_TIMEOUT_MS,
	};
	while ((c = getopt_long(argc, argv, "D:p:s:n:u:h", long_options, NULL)) != -1)
		if ((r = parse_one(c, optarg, o)) != PARSE_OK)
			return r;
	return check_roles(argc, argv, o);
}
