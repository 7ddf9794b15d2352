/* rdma-write: a perftest-style RDMA WRITE bandwidth test (cf. ib_write_bw) over rocemu.
 *
 * The server registers a buffer for remote write and waits for one client; the client
 * writes ITERS messages of SIZE bytes into it and prints perftest's table. A TCP connection
 * carries everything else, so both sides can end with a status that says whether the data
 * arrived as the client believes (--verify) or, after a deliberate failure
 * (--remote-offset, --rkey-xor), that nothing arrived at all.
 *
 * TCP messages, every field big-endian, fixed sizes (see the H_* and C_* offsets below):
 *   connection data, 60 bytes, once each way right after connecting;
 *   control, 48 bytes: READY (server: my QP accepts writes), PROGRESS (client heartbeat
 *   during the run, so the server's --timeout-ms bounds silence, not the run's length),
 *   DONE (client: result, writes completed, which pattern the buffer should hold),
 *   VERDICT (server: what it found in its buffer). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "emu/rocemu.h"

#define PEAK_MIN_NS 1000000ull /* 1 ms */
#define PROG "rdma-write"

#define DEFAULT_PORT       18515
#define DEFAULT_SIZE       65536
#define DEFAULT_ITERS      1000
#define DEFAULT_TX_DEPTH   128
#define DEFAULT_TIMEOUT_MS 30000
#define MAX_SIZE           (1ull << 31)   /* the largest RDMA message */
#define MAX_TX_DEPTH       65536
#define MAX_RECV_WR        16
#define CQ_SPARE           16
#define BUF_ALIGN          4096
#define VERIFY_SOURCE_CAP  (256ull << 20)  /* --verify: bytes of per-slot source buffers */
#define CONNECT_WINDOW_MS  5000            /* the server may start a little after us */
#define CONNECT_RETRY_MS   100
#define SERVER_FILL        0x5a            /* known contents, to tell "unchanged" */
#define POST_BATCH         32
#define POLL_BATCH         64
#define PROGRESS_DELAY_NS  NS_PER_S        /* no progress line for runs under 1 s */
#define PROGRESS_EVERY_NS  (NS_PER_S / 4)  /* at most 4 updates a second */
#define NS_PER_MS          UINT64_C(1000000)
#define NS_PER_S           UINT64_C(1000000000)
#define MIB                1048576.0       /* perftest's MB */

#define QP_TIMEOUT   14   /* 4.096 us * 2^14 = 67 ms */
#define QP_RETRY_CNT 7
#define QP_RNR_RETRY 7

/* ---- messages and small helpers ---- */

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Reports a failed librocemu call with the daemon's explanation; returns -1 for callers. */
static int verbs_fail(const struct rocemu_context *ctx, const char *call, int err)
{
	const char *detail = ctx ? rocemu_last_error(ctx) : NULL;
	const char *what = err ? strerror(err) : "failed";

	if (detail && *detail)
		msg("%s: %s (%s)", call, what, detail);
	else
		msg("%s: %s", call, what);
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Milliseconds until deadline, rounded up so a wait never ends just short of it; 0 once
 * it has passed. */
static int ms_left(uint64_t deadline)
{
	uint64_t now = now_ns(), ms;

	if (now >= deadline)
		return 0;
	ms = (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The --verify pattern of byte i of iteration k: changes with both, so a stale or shifted
 * message does not pass for the right one. */
static inline uint8_t pattern(uint64_t k, uint64_t i)
{
	return (uint8_t)(k * 167 + i * 13 + (i >> 9));
}

static void fill_pattern(uint8_t *p, size_t len, uint64_t k)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(k, i);
}

/* The first i where p[i] is not pattern(k, i), or len. */
static size_t find_pattern_mismatch(const uint8_t *p, size_t len, uint64_t k)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(k, i))
			return i;
	return len;
}

/* The first offset in [from, to) whose byte is not SERVER_FILL, or to. */
static size_t find_not_fill(const uint8_t *buf, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (buf[i] != SERVER_FILL)
			return i;
	return to;
}


static unsigned mtu_bytes(enum ibv_mtu mtu)
{
	return 128u << mtu;
}

static bool mtu_valid(uint32_t mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096;
}

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	while (bytes--) {
		p[bytes] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get_be(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- command line ---- */

struct options {
	bool server;
	bool verify;
	bool json;
	bool aim_outside;          /* --remote-offset given: writing outside is on purpose */
	bool rkey_xor_given;
	const char *socket_path;   /* NULL: the library's default */
	const char *host;          /* client: the server's IPv4 address or name */
	const char *start_file;    /* client: connected, wait for it before the first write */
	uint16_t port;
	size_t size;
	uint64_t iters;
	uint64_t remote_offset;    /* two's complement, added to the server's VA */
	uint32_t rkey_xor;
	uint32_t tx_depth;
	uint32_t mtu;              /* enum ibv_mtu, 0 when not given */
	int timeout_ms;
	uint8_t qp_timeout;        /* ibv_qp_attr.timeout: 4.096 us * 2^N */
	uint8_t retry_cnt;         /* 7: retry forever */
};

enum { PARSE_OK, PARSE_HELP, PARSE_ERROR };

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

static int parse_options(int argc, char **argv, struct options *o)
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

/* ---- TCP ---- */

/* Sends all of buf; -1 with errno set on failure. */
static int send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		/* MSG_NOSIGNAL: a peer that went away is an error to report, not SIGPIPE. */
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* send_all that names the message when it fails (what NULL: the caller reports). */
static int send_msg(int fd, const void *buf, size_t len, const char *what)
{
	if (send_all(fd, buf, len) == 0)
		return 0;
	if (what)
		msg("sending %s: %s", what, strerror(errno));
	return -1;
}

/* Reads exactly len bytes within timeout_ms; what names the message for the errors. */
static int recv_exact(int fd, void *buf, size_t len, int timeout_ms, const char *what)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = ms_left(deadline), r;
		ssize_t n;

		if (!left) {
			msg("timed out after %d ms waiting for %s", timeout_ms, what);
			return -1;
		}
		r = poll(&pfd, 1, left);
		if (r < 0 && errno != EINTR) {
			msg("poll while waiting for %s: %s", what, strerror(errno));
			return -1;
		}
		if (r <= 0)
			continue;
		n = recv(fd, p + got, len - got, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			msg("receiving %s: %s", what, strerror(errno));
			return -1;
		}
		if (n == 0) {
			msg("the peer closed the connection while we waited for %s", what);
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

/* Our messages are small and answered: Nagle would only delay them. */
static void set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* IPv6 and IPv4 clients alike (IPv4 alone where the kernel has no IPv6). */
static int tcp_listen(uint16_t port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct sockaddr_in6 addr6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				      .sin6_addr = IN6ADDR_ANY_INIT };
	int one = 1, zero = 0;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool v6 = fd >= 0 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) == 0;

	if (fd >= 0 && !v6)
		close(fd);
	if (!v6)
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		msg("socket: %s", strerror(errno));
		return -1;
	}
	/* A test run right after the previous one must not wait out TIME_WAIT. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, v6 ? (struct sockaddr *)&addr6 : (struct sockaddr *)&addr,
		 v6 ? sizeof(addr6) : sizeof(addr)) < 0 || listen(fd, 1) < 0) {
		msg("listening on TCP port %u: %s", port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int tcp_accept(int lfd, uint16_t port, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * NS_PER_MS;

	for (;;) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		int left = ms_left(deadline), r, fd;

		if (!left) {
			msg("timed out after %d ms waiting for a client on TCP port %u", timeout_ms,
			    port);
			return -1;
		}
		r = poll(&pfd, 1, left);
		if (r < 0 && errno != EINTR) {
			msg("poll on the listening socket: %s", strerror(errno));
			return -1;
		}
		if (r <= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			set_nodelay(fd);
			return fd;
		}
		if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
			msg("accept: %s", strerror(errno));
			return -1;
		}
	}
}

/* One non-blocking connect, bounded by deadline (a host that drops SYNs would otherwise
 * hold us for minutes). Returns a blocking socket, or -1 with *err set. */
static int connect_one(const struct addrinfo *ai, uint64_t deadline, int *err)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			ai->ai_protocol);
	socklen_t len = sizeof(*err);

	if (fd < 0) {
		*err = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int r;

		if (errno != EINPROGRESS) {
			*err = errno;
			goto fail;
		}
		while ((r = poll(&pfd, 1, ms_left(deadline))) < 0 && errno == EINTR)
			;
		if (r <= 0) {
			*err = r == 0 ? ETIMEDOUT : errno;
			goto fail;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) < 0 || *err)
			goto fail;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		*err = errno;
		goto fail;
	}
	set_nodelay(fd);
	return fd;
fail:
	close(fd);
	return -1;
}

/* Connects to host:port, retrying for CONNECT_WINDOW_MS so that a script may start the
 * server and the client together. */
static int tcp_connect(const char *host, uint16_t port)
{
	const struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	uint64_t deadline = now_ns() + CONNECT_WINDOW_MS * NS_PER_MS;
	const char *why = "no answer";
	char service[8];

	snprintf(service, sizeof(service), "%u", port);
	for (;;) {
		struct addrinfo *res;
		int gai = getaddrinfo(host, service, &hints, &res), fd = -1;

		if (gai == 0) {
			int err = ETIMEDOUT;

			for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
				fd = connect_one(ai, deadline, &err);
			freeaddrinfo(res);
			if (fd >= 0)
				return fd;
			why = strerror(err);
		} else if (gai == EAI_AGAIN) {
			why = gai_strerror(gai);
		} else {
			msg("cannot resolve '%s': %s", host, gai_strerror(gai));
			return -1;
		}
		if (ms_left(deadline) == 0)
			break;
		poll(NULL, 0, (int)min_u64(CONNECT_RETRY_MS, (uint64_t)ms_left(deadline)));
	}
	msg("cannot connect to %s port %u within %d s: %s", host, port,
	    CONNECT_WINDOW_MS / 1000, why);
	return -1;
}

/* ---- the TCP messages ---- */

#define HELLO_MAGIC  0x52574831u   /* "RWH1" */
#define CTL_MAGIC    0x52574331u   /* "RWC1" */
#define MSG_VERSION  1
#define HELLO_VERIFY 0x1

/* Connection data, sent once each way. */
enum hello_layout {
	H_MAGIC = 0,     /* u32 HELLO_MAGIC */
	H_VERSION = 4,   /* u16 MSG_VERSION */
	H_FLAGS = 6,     /* u16 HELLO_VERIFY */
	H_QPN = 8,       /* u32 */
	H_PSN = 12,      /* u32, 24 bits used */
	H_GID = 16,      /* 16 bytes, union ibv_gid as is (already network order) */
	H_VA = 32,       /* u64 address of the registered buffer */
	H_RKEY = 40,     /* u32 */
	H_MTU = 44,      /* u32 enum ibv_mtu this side proposes */
	H_SIZE = 48,     /* u64 server: buffer size; client: message size */
	H_TIMEOUT = 56,  /* u32 --timeout-ms: the client beats often enough for both */
	HELLO_LEN = 60,
};

/* Every later message. */
enum ctl_layout {
	C_MAGIC = 0,     /* u32 CTL_MAGIC */
	C_VERSION = 4,   /* u16 MSG_VERSION */
	C_TYPE = 6,      /* u16 enum ctl_type */
	C_CODE = 8,      /* u32 DONE: enum done_code; VERDICT: enum verdict_code */
	C_STATUS = 12,   /* u32 DONE: enum ibv_wc_status of the failed completion */
	C_FLAGS = 16,    /* u32 DONE: DONE_AIMED_OUTSIDE | DONE_KEY_ALTERED */
	C_RESERVED = 20, /* u32, 0 */
	C_COUNT = 24,    /* u64 DONE, PROGRESS: writes completed successfully */
	C_VALUE = 32,    /* u64 DONE: iteration whose pattern the buffer should hold;
			  * VERDICT: offset of the first unexpected byte */
	C_OFFSET = 40,   /* u64 DONE: the --remote-offset the client added */
	CTL_LEN = 48,
};

enum ctl_type { MSG_READY = 1, MSG_PROGRESS, MSG_DONE, MSG_VERDICT };
enum done_code { DONE_OK, DONE_WC_ERROR, DONE_ABORTED };
enum verdict_code {
	VERDICT_OK,               /* as expected (patterns checked with --verify) */
	VERDICT_MISMATCH,         /* --verify found a wrong byte */
	VERDICT_UNCHANGED,        /* failed client, nothing landed */
	VERDICT_CHANGED,          /* failed client, yet the buffer changed */
	VERDICT_UNCHECKED,        /* failed client after some writes had landed */
	VERDICT_WRONGLY_ACCEPTED, /* writes outside the buffer or with a wrong key completed */
};

#define DONE_AIMED_OUTSIDE 0x1
#define DONE_KEY_ALTERED   0x2

struct ctl_msg {
	uint16_t type;
	uint32_t code;
	uint32_t status;
	uint32_t flags;
	uint64_t count;
	uint64_t value;
	uint64_t offset;
};

struct conn_info {
	bool verify;
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	union ibv_gid gid;
	uint64_t va;
	uint64_t size;
	enum ibv_mtu mtu;
	uint32_t timeout_ms;
};

struct endpoint {
	struct rocemu_context *ctx;
	struct rocemu_device_attr dev;
	struct rocemu_port_attr port;
	struct rocemu_pd *pd;
	struct rocemu_mr *mr;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;
	uint8_t *buf;
	size_t buf_len;
	uint32_t psn;
	enum ibv_mtu mtu;          /* this side's proposal: --mtu capped by the port */
	uint8_t sgid_index;        /* the GID of the TCP connection's address and family */
};

struct session {
	const struct options *o;
	struct endpoint ep;
	struct conn_info peer;
	enum ibv_mtu mtu;          /* agreed: the smaller proposal */
	int fd;
	FILE *info;                /* address lines and verdicts: stderr when stdout is JSON */
};

static int send_ctl(int fd, const struct ctl_msg *m, const char *what)
{
	uint8_t b[CTL_LEN] = { 0 };

	put_be(b + C_MAGIC, CTL_MAGIC, 4);
	put_be(b + C_VERSION, MSG_VERSION, 2);
	put_be(b + C_TYPE, m->type, 2);
	put_be(b + C_CODE, m->code, 4);
	put_be(b + C_STATUS, m->status, 4);
	put_be(b + C_FLAGS, m->flags, 4);
	put_be(b + C_COUNT, m->count, 8);
	put_be(b + C_VALUE, m->value, 8);
	put_be(b + C_OFFSET, m->offset, 8);
	return send_msg(fd, b, sizeof(b), what);
}

static int recv_ctl(int fd, struct ctl_msg *m, int timeout_ms, const char *what)
{
	uint8_t b[CTL_LEN];

	if (recv_exact(fd, b, sizeof(b), timeout_ms, what) < 0)
		return -1;
	if (get_be(b + C_MAGIC, 4) != CTL_MAGIC || get_be(b + C_VERSION, 2) != MSG_VERSION) {
		msg("while waiting for %s: not an " PROG " message of this version", what);
		return -1;
	}
	*m = (struct ctl_msg){
		.type = (uint16_t)get_be(b + C_TYPE, 2),
		.code = (uint32_t)get_be(b + C_CODE, 4),
		.status = (uint32_t)get_be(b + C_STATUS, 4),
		.flags = (uint32_t)get_be(b + C_FLAGS, 4),
		.count = get_be(b + C_COUNT, 8),
		.value = get_be(b + C_VALUE, 8),
		.offset = get_be(b + C_OFFSET, 8),
	};
	return 0;
}

static void encode_hello(const struct session *s, uint8_t *b)
{
	put_be(b + H_MAGIC, HELLO_MAGIC, 4);
	put_be(b + H_VERSION, MSG_VERSION, 2);
	put_be(b + H_FLAGS, s->o->verify ? HELLO_VERIFY : 0, 2);
	put_be(b + H_QPN, s->ep.qp->qp_num, 4);
	put_be(b + H_PSN, s->ep.psn, 4);
	memcpy(b + H_GID, s->ep.port.gids[s->ep.sgid_index].raw, 16);
	put_be(b + H_VA, (uintptr_t)s->ep.buf, 8);
	put_be(b + H_RKEY, s->ep.mr->rkey, 4);
	put_be(b + H_MTU, s->ep.mtu, 4);
	put_be(b + H_SIZE, s->o->size, 8);
	put_be(b + H_TIMEOUT, (uint32_t)s->o->timeout_ms, 4);
}

static int decode_hello(const uint8_t *b, struct conn_info *c)
{
	uint32_t mtu = (uint32_t)get_be(b + H_MTU, 4);

	if (get_be(b + H_MAGIC, 4) != HELLO_MAGIC || get_be(b + H_VERSION, 2) != MSG_VERSION) {
		msg("the peer is not an " PROG " speaking this version");
		return -1;
	}
	c->verify = get_be(b + H_FLAGS, 2) & HELLO_VERIFY;
	c->qpn = (uint32_t)get_be(b + H_QPN, 4);
	c->psn = (uint32_t)get_be(b + H_PSN, 4);
	memcpy(c->gid.raw, b + H_GID, sizeof(c->gid.raw));
	c->va = get_be(b + H_VA, 8);
	c->rkey = (uint32_t)get_be(b + H_RKEY, 4);
	c->size = get_be(b + H_SIZE, 8);
	c->timeout_ms = (uint32_t)get_be(b + H_TIMEOUT, 4);
	if (!c->qpn || c->qpn > 0xffffff || c->psn > 0xffffff || !mtu_valid(mtu) || !c->size ||
	    c->size > MAX_SIZE || !c->timeout_ms || c->timeout_ms > INT_MAX) {
		msg("the peer's connection data is out of range (QPN 0x%x PSN 0x%x MTU %u size %"
		    PRIu64 ")", c->qpn, c->psn, mtu, c->size);
		return -1;
	}
	c->mtu = (enum ibv_mtu)mtu;
	return 0;
}

static void print_address(FILE *f, const char *which, uint32_t qpn, uint32_t psn, uint32_t rkey,
			  uint64_t va)
{
	fprintf(f, "%s address: QPN 0x%06x PSN 0x%06x RKey 0x%08x VAddr 0x%016" PRIx64 "\n", which,
		qpn, psn, rkey, va);
}

/* Sends our connection data, reads the peer's and prints both. */
static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

/* The GID this side sends from: the one of the address the TCP connection uses, else the
 * port's first of its IP version (RoCEv2 does not cross versions), else GID 0. */
static void choose_gid(struct session *s)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	union ibv_gid want = { 0 };
	const struct rocemu_port_attr *port = &s->ep.port;
	int same_family = -1;

	s->ep.sgid_index = 0;
	if (getsockname(s->fd, (struct sockaddr *)&local, &len) < 0)
		return;
	if (local.ss_family == AF_INET6) {
		memcpy(want.raw, &((struct sockaddr_in6 *)&local)->sin6_addr, 16);
	} else {
		want.raw[10] = want.raw[11] = 0xff;
		memcpy(want.raw + 12, &((struct sockaddr_in *)&local)->sin_addr, 4);
	}
	for (unsigned i = 0; i < port->gid_count; i++) {
		if (!memcmp(&port->gids[i], &want, sizeof(want))) {
			s->ep.sgid_index = (uint8_t)i;
			return;
		}
		if (same_family < 0 && gid_is_v4(&port->gids[i]) == gid_is_v4(&want))
			same_family = (int)i;
	}
	if (same_family >= 0)
		s->ep.sgid_index = (uint8_t)same_family;
}

static int exchange(struct session *s)
{
	uint8_t out[HELLO_LEN] = { 0 }, in[HELLO_LEN];
	const char *theirs = s->o->server ? "the client's connection data"
					  : "the server's connection data";

	choose_gid(s);
	encode_hello(s, out);
	if (send_msg(s->fd, out, sizeof(out), "our connection data") < 0 ||
	    recv_exact(s->fd, in, sizeof(in), s->o->timeout_ms, theirs) < 0 ||
	    decode_hello(in, &s->peer) < 0)
		return -1;
	s->mtu = s->ep.mtu < s->peer.mtu ? s->ep.mtu : s->peer.mtu;
	print_address(s->info, "local", s->ep.qp->qp_num, s->ep.psn, s->ep.mr->rkey,
		      (uintptr_t)s->ep.buf);
	print_address(s->info, "remote", s->peer.qpn, s->peer.psn, s->peer.rkey, s->peer.va);
	return 0;
}

/* The client writes patterns only with --verify, and the server can only check them then:
 * one side alone would make the other's result meaningless. */
static bool verify_agrees(const struct session *s)
{
	if (s->o->verify == s->peer.verify)
		return true;
	msg("--verify must be given to both the server and the client (%s has it)",
	    s->o->verify ? "only this side" : "only the peer");
	return false;
}

/* ---- the emulated HCA ---- */

static uint32_t random_psn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint32_t)now_ns() ^ ((uint32_t)getpid() << 12);   /* entropy not ready yet */
	return v & 0xffffff;
}

static int open_device(struct endpoint *ep, const struct options *o)
{
	int err;

	ep->ctx = rocemu_open(o->socket_path);
	if (!ep->ctx) {
		if (!o->socket_path && errno == ENOTUNIQ)
			msg("rocemu_open: several rocemud sockets in %s: name one with -D SOCKET or "
			    "$ROCEMU_SOCKET", ROCEMU_DEFAULT_SOCKET_DIR);
		else
			msg("rocemu_open(%s): %s", o->socket_path ? o->socket_path : "default socket",
			    strerror(errno));
		return -1;
	}
	if ((err = rocemu_query_device(ep->ctx, &ep->dev)))
		return verbs_fail(ep->ctx, "rocemu_query_device", err);
	if ((err = rocemu_query_port(ep->ctx, &ep->port)))
		return verbs_fail(ep->ctx, "rocemu_query_port", err);
	if (!mtu_valid(ep->port.active_mtu)) {
		msg("rocemu_query_port: active MTU %d is not an enum ibv_mtu value",
		    (int)ep->port.active_mtu);
		return -1;
	}
	if (ep->port.state != IBV_PORT_ACTIVE)
		msg("warning: port %.16s is not active (state %d)", ep->port.ifname,
		    (int)ep->port.state);
	ep->mtu = ep->port.active_mtu;
	if (o->mtu && o->mtu > (uint32_t)ep->port.active_mtu)
		msg("warning: --mtu %u is above the port's active MTU; proposing %u",
		    mtu_bytes((enum ibv_mtu)o->mtu), mtu_bytes(ep->mtu));
	else if (o->mtu)
		ep->mtu = (enum ibv_mtu)o->mtu;
	return 0;
}

/* Page-aligned, filled before registration: registration keeps the contents, and the
 * server tells "unchanged" by this fill. */
static int alloc_buffer(struct endpoint *ep, size_t len, int fill)
{
	void *p;
	int err = posix_memalign(&p, BUF_ALIGN, len);

	if (err) {
		msg("cannot allocate %zu bytes: %s", len, strerror(err));
		return -1;
	}
	memset(p, fill, len);
	ep->buf = p;
	ep->buf_len = len;
	return 0;
}

static int create_objects(struct endpoint *ep, const struct options *o)
{
	/* Every WR is signalled, so tx-depth entries suffice; the spare is slack only. */
	uint32_t cqe = o->tx_depth + CQ_SPARE;
	struct rocemu_qp_init_attr qpa = {
		.max_send_wr = o->tx_depth,
		.max_recv_wr = MAX_RECV_WR,
		.max_send_sge = 1,
		.sq_sig_all = 0,
	};

	if (ep->dev.max_qp_wr && o->tx_depth > ep->dev.max_qp_wr) {
		msg("--tx-depth %u is above the device's max_qp_wr %u", o->tx_depth,
		    ep->dev.max_qp_wr);
		return -1;
	}
	if (ep->dev.max_cqe && cqe > ep->dev.max_cqe) {
		if (ep->dev.max_cqe < o->tx_depth) {
			msg("--tx-depth %u is above the device's max_cqe %u", o->tx_depth,
			    ep->dev.max_cqe);
			return -1;
		}
		cqe = ep->dev.max_cqe;
	}
	if (!(ep->pd = rocemu_alloc_pd(ep->ctx)))
		return verbs_fail(ep->ctx, "rocemu_alloc_pd", errno);
	ep->mr = rocemu_reg_mr(ep->pd, ep->buf, ep->buf_len,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ep->mr)
		return verbs_fail(ep->ctx, "rocemu_reg_mr", errno);
	if (!(ep->cq = rocemu_create_cq(ep->ctx, (int)cqe)))
		return verbs_fail(ep->ctx, "rocemu_create_cq", errno);
	qpa.send_cq = qpa.recv_cq = ep->cq;
	if (!(ep->qp = rocemu_create_qp(ep->pd, &qpa)))
		return verbs_fail(ep->ctx, "rocemu_create_qp", errno);
	return 0;
}

static int modify_qp(struct endpoint *ep, struct ibv_qp_attr *attr, int mask, const char *call)
{
	int err = rocemu_modify_qp(ep->qp, attr, mask);

	return err ? verbs_fail(ep->ctx, call, err) : 0;
}

/* Both sides accept remote writes, as perftest sets up its QPs. */
static int qp_to_init(struct endpoint *ep)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
		.port_num = 1,
	};

	return modify_qp(ep, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, "rocemu_modify_qp(INIT)");
}

static int qp_to_rtr(struct endpoint *ep, const struct conn_info *peer, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = { .dgid = peer->gid, .sgid_index = ep->sgid_index, .hop_limit = 64 },
		},
	};

	return modify_qp(ep, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN,
			 "rocemu_modify_qp(RTR)");
}

static int qp_to_rts(struct endpoint *ep, const struct options *o)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = ep->psn,
		.timeout = o->qp_timeout,
		.retry_cnt = o->retry_cnt,
		.rnr_retry = QP_RNR_RETRY,
	};

	return modify_qp(ep, &a,
			 IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY,
			 "rocemu_modify_qp(RTS)");
}

static int connect_qp(struct session *s)
{
	return qp_to_rtr(&s->ep, &s->peer, s->mtu) < 0 || qp_to_rts(&s->ep, s->o) < 0 ? -1 : 0;
}

/* Everything up to a QP in INIT, with a buffer of buf_len bytes of fill registered. */
static int setup_endpoint(struct endpoint *ep, const struct options *o, size_t buf_len, int fill)
{
	ep->psn = random_psn();
	if (open_device(ep, o) < 0 || alloc_buffer(ep, buf_len, fill) < 0 ||
	    create_objects(ep, o) < 0 || qp_to_init(ep) < 0)
		return -1;
	return 0;
}

/* Undoes whatever setup_endpoint got to; -1 if any step failed. */
static int teardown(struct endpoint *ep)
{
	bool registered = ep->mr != NULL;
	int rc = 0, err;

	if (ep->qp && (err = rocemu_destroy_qp(ep->qp)))
		rc = verbs_fail(ep->ctx, "rocemu_destroy_qp", err);
	if (ep->cq && (err = rocemu_destroy_cq(ep->cq)))
		rc = verbs_fail(ep->ctx, "rocemu_destroy_cq", err);
	if (ep->mr) {
		if ((err = rocemu_dereg_mr(ep->mr)))
			rc = verbs_fail(ep->ctx, "rocemu_dereg_mr", err);
		else
			registered = false;
	}
	if (ep->pd && (err = rocemu_dealloc_pd(ep->pd)))
		rc = verbs_fail(ep->ctx, "rocemu_dealloc_pd", err);
	/* Memory the daemon may still write into is not handed back to malloc. */
	if (!registered)
		free(ep->buf);
	if (ep->ctx && (err = rocemu_close(ep->ctx))) {
		msg("rocemu_close: %s", strerror(err));
		rc = -1;
	}
	return rc;
}

static int close_session(struct session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	return teardown(&s->ep);
}

/* ---- client ---- */

enum run_result { RUN_OK, RUN_WC_ERROR, RUN_ABORTED };

enum abort_reason {
	ABORT_NONE,
	ABORT_SETUP,     /* before the first write: size refused, QP not connected */
	ABORT_TIMEOUT,
	ABORT_DAEMON,
	ABORT_POST,
	ABORT_ORDER,
	ABORT_SERVER,
};

/* For --json: fixed words, so the object needs no escaping. */
static const char *const abort_names[] = {
	[ABORT_NONE] = "none",
	[ABORT_SETUP] = "setup failed",
	[ABORT_TIMEOUT] = "completion timeout",
	[ABORT_DAEMON] = "daemon gone",
	[ABORT_POST] = "post failed",
	[ABORT_ORDER] = "completion out of order",
	[ABORT_SERVER] = "lost the server",
};

struct run {
	enum run_result result;
	enum abort_reason reason;
	struct ibv_wc bad_wc;         /* RUN_WC_ERROR: the first failed completion */
	uint64_t posted;
	uint64_t completed;
	uint64_t t_start;             /* the first post */
	uint64_t t_end;               /* the last successful completion */
	uint64_t t_activity;          /* the last completion: --timeout-ms counts from here */
	uint64_t t_heartbeat;         /* the last PROGRESS sent */
	uint64_t t_line;              /* the last progress line */
	uint64_t win_start;           /* the open window of the peak measurement */
	uint64_t win_count;
	double peak_bps;
	bool line_shown;
};

struct client {
	struct session s;
	struct run run;
	bool ran;                     /* the data path started */
	uint64_t remote_va;           /* the server's VA + --remote-offset */
	uint32_t rkey;                /* the server's rkey ^ --rkey-xor */
	uint32_t depth;               /* writes in flight */
	uint32_t slots;               /* source slots of SIZE: depth with --verify, else 1 */
	uint64_t chunk;               /* completions per peak window */
	uint64_t timeout_ns;
	uint64_t heartbeat_ns;
	bool show_progress;
};

/* With --verify each write in flight needs its own source slot (a slot is refilled only
 * after its previous write completed); the slots stay within VERIFY_SOURCE_CAP, which may
 * lower the depth. Without it, one buffer serves every write, as in perftest. */
static void plan_depth(struct client *c, const struct options *o)
{
	uint64_t want = min_u64(o->tx_depth, o->iters), fit = VERIFY_SOURCE_CAP / o->size;

	c->slots = 1;
	c->depth = o->tx_depth;
	if (!o->verify)
		return;
	c->slots = c->depth = (uint32_t)(fit ? min_u64(want, fit) : 1);
	if (c->depth < want)
		msg("note: --verify lowers the depth to %u (its source slots stay within %llu MiB)",
		    c->depth, VERIFY_SOURCE_CAP >> 20);
}

static void plan_writes(struct client *c)
{
	const struct options *o = c->s.o;
	/* Several heartbeats within the shorter of the two timeouts, so one late beat is not
	 * fatal to the server's patience. */
	uint64_t beat_ms = min_u64(1000, min_u64(o->timeout_ms, c->s.peer.timeout_ms) / 4);

	c->remote_va = c->s.peer.va + o->remote_offset;
	c->rkey = c->s.peer.rkey ^ o->rkey_xor;
	c->chunk = o->iters / 20 ? o->iters / 20 : 1;
	c->timeout_ns = (uint64_t)o->timeout_ms * NS_PER_MS;
	c->heartbeat_ns = (beat_ms ? beat_ms : 1) * NS_PER_MS;
	c->show_progress = !o->json && isatty(STDOUT_FILENO);
	if (o->aim_outside || o->rkey_xor_given)
		msg("on purpose: writing to VAddr 0x%016" PRIx64 " (offset %" PRId64
		    ") with RKey 0x%08x", c->remote_va, (int64_t)o->remote_offset, c->rkey);
}

static void clear_progress(struct client *c)
{
	if (!c->run.line_shown)
		return;
	printf("\r%79s\r", "");
	fflush(stdout);
	c->run.line_shown = false;
}

/* Ends the run; the caller prints why. Returns -1 for its caller to pass on. */
static int stop_run(struct client *c, enum abort_reason reason)
{
	clear_progress(c);
	c->run.result = RUN_ABORTED;
	c->run.reason = reason;
	return -1;
}

/* How many writes may be posted now: the iterations left, within the depth. */
static uint64_t room(const struct client *c)
{
	const struct run *r = &c->run;

	return min_u64(c->s.o->iters - r->posted, c->depth - (r->posted - r->completed));
}

static int post_batch(struct client *c)
{
	struct ibv_send_wr wrs[POST_BATCH], *bad = NULL;
	struct ibv_sge sges[POST_BATCH];
	struct run *r = &c->run;
	const size_t size = c->s.o->size;
	unsigned n = (unsigned)min_u64(room(c), POST_BATCH);
	int err;

	if (!n)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t k = r->posted + i;
		/* room() keeps at most slots writes in flight, so the write that last used
		 * this slot, k - slots, has completed. */
		uint8_t *src = c->s.ep.buf + (size_t)(k % c->slots) * size;

		if (c->s.o->verify)
			fill_pattern(src, size, k);
		sges[i] = (struct ibv_sge){
			.addr = (uintptr_t)src,
			.length = (uint32_t)size,
			.lkey = c->s.ep.mr->lkey,
		};
		wrs[i] = (struct ibv_send_wr){
			.wr_id = k,
			.next = i + 1 < n ? &wrs[i + 1] : NULL,
			.sg_list = &sges[i],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = c->remote_va, .rkey = c->rkey },
		};
	}
	if (!r->posted)
		r->t_start = r->t_activity = r->win_start = now_ns();
	err = rocemu_post_send(c->s.ep.qp, wrs, &bad);
	if (err) {
		for (unsigned i = 0; i < n; i++)   /* the ones before bad went out */
			if (bad == &wrs[i])
				r->posted += i;
		stop_run(c, ABORT_POST);
		return verbs_fail(c->s.ep.ctx, "rocemu_post_send", err);
	}
	r->posted += n;
	return 0;
}

/* Closes the peak window once it holds at least chunk completions and lasted at least
 * PEAK_MIN_NS: completions are reaped in batches, so a shorter window would time the poll
 * loop rather than the transfer. */
static void update_peak(struct client *c, uint64_t now)
{
	struct run *r = &c->run;
	uint64_t done = r->completed - r->win_count;
	double bps;

	if (done < c->chunk || now - r->win_start < PEAK_MIN_NS)
		return;
	bps = (double)done * (double)c->s.o->size * NS_PER_S / (double)(now - r->win_start);
	if (bps > r->peak_bps)
		r->peak_bps = bps;
	r->win_start = now;
	r->win_count = r->completed;
}

/* Reaps up to POLL_BATCH completions; returns how many, or -1 when the run is over. */
static int poll_batch(struct client *c)
{
	struct ibv_wc wc[POLL_BATCH];
	struct run *r = &c->run;
	int n = rocemu_poll_cq(c->s.ep.cq, POLL_BATCH, wc);

	if (n < 0) {
		int err = errno;

		stop_run(c, ABORT_DAEMON);
		msg("rocemu_poll_cq: %s", strerror(err));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			clear_progress(c);
			r->result = RUN_WC_ERROR;
			r->bad_wc = wc[i];
			return -1;
		}
		/* RC completes in posting order; anything else is an emulator bug. */
		if (wc[i].wr_id != r->completed) {
			stop_run(c, ABORT_ORDER);
			msg("completion out of order: wr_id %" PRIu64 ", expected %" PRIu64,
			    (uint64_t)wc[i].wr_id, r->completed);
			return -1;
		}
		r->completed++;
	}
	if (n > 0) {
		r->t_activity = r->t_end = now_ns();
		update_peak(c, r->t_end);
	}
	return n;
}

static void show_progress(struct client *c, uint64_t now)
{
	const struct run *r = &c->run;
	double secs = (double)(now - r->t_start) / NS_PER_S;
	double bytes = (double)r->completed * (double)c->s.o->size;

	if (r->completed)
		printf("\r %.1f MiB written, %.2f MB/sec, %.0f s left    ", bytes / MIB,
		       bytes / secs / MIB,
		       (double)(c->s.o->iters - r->completed) * secs / (double)r->completed);
	else
		printf("\r waiting for the first completion    ");
	fflush(stdout);
	c->run.line_shown = true;
	c->run.t_line = now;
}

/* The periodic chores of the run: the server's heartbeat, the terminal's progress line. */
static int tick(struct client *c, uint64_t now)
{
	struct run *r = &c->run;

	if (now - r->t_heartbeat >= c->heartbeat_ns) {
		struct ctl_msg beat = { .type = MSG_PROGRESS, .count = r->completed };

		if (send_ctl(c->s.fd, &beat, NULL) < 0) {
			int err = errno;

			stop_run(c, ABORT_SERVER);
			msg("lost the server: %s", strerror(err));
			return -1;
		}
		r->t_heartbeat = now;
	}
	if (c->show_progress && now - r->t_start >= PROGRESS_DELAY_NS &&
	    now - r->t_line >= PROGRESS_EVERY_NS)
		show_progress(c, now);
	return 0;
}

/* Sleeps on the CQ until a completion, the next heartbeat or progress line, or the
 * timeout, which counts from the last completion. */
static int wait_completions(struct client *c, uint64_t now)
{
	struct run *r = &c->run;
	uint64_t deadline = r->t_activity + c->timeout_ns;
	uint64_t wake = min_u64(deadline, r->t_heartbeat + c->heartbeat_ns);
	int err;

	if (now >= deadline) {
		stop_run(c, ABORT_TIMEOUT);
		msg("timed out after %d ms waiting for completions (%" PRIu64 " posted, %" PRIu64
		    " of %" PRIu64 " completed)", c->s.o->timeout_ms, r->posted, r->completed,
		    c->s.o->iters);
		return -1;
	}
	if (c->show_progress)
		wake = min_u64(wake, now + PROGRESS_EVERY_NS);
	err = rocemu_wait_cq(c->s.ep.cq, ms_left(wake));
	if (!err || err == ETIMEDOUT)
		return 0;   /* the loop polls, beats or times out */
	stop_run(c, ABORT_DAEMON);
	if (err == EPIPE)
		msg("rocemu_wait_cq: the daemon went away");
	else
		verbs_fail(c->s.ep.ctx, "rocemu_wait_cq", err);
	return -1;
}

static void run_writes(struct client *c)
{
	struct run *r = &c->run;
	const uint64_t iters = c->s.o->iters;

	c->ran = true;
	r->t_start = r->t_end = r->t_activity = r->t_heartbeat = r->t_line = r->win_start =
		now_ns();
	while (r->completed < iters) {
		uint64_t now;
		int n = 0;

		if (post_batch(c) < 0 || (n = poll_batch(c)) < 0)
			break;
		if (r->completed == iters)
			break;
		now = now_ns();
		if (tick(c, now) < 0)
			break;
		/* Nothing reaped and nothing to post: sleep on the CQ rather than spin. */
		if (n == 0 && !room(c) && wait_completions(c, now) < 0)
			break;
	}
	clear_progress(c);
}

struct stats {
	double seconds;
	double peak_mbps;
	double avg_mbps;
	double mpps;
};

/* perftest's figures: MB is 2^20 bytes, time runs from the first post to the last
 * completion (of a failed run: the last successful one, so waiting out a timeout does not
 * dilute the rates of what did complete). */
static struct stats compute_stats(const struct client *c)
{
	const struct run *r = &c->run;
	struct stats st = { 0 };
	double bps;

	if (!r->completed || r->t_end <= r->t_start)
		return st;
	st.seconds = (double)(r->t_end - r->t_start) / NS_PER_S;
	bps = (double)r->completed * (double)c->s.o->size / st.seconds;
	st.avg_mbps = bps / MIB;
	/* The whole run is a window of at least chunk completions too. */
	st.peak_mbps = (r->peak_bps > bps ? r->peak_bps : bps) / MIB;
	st.mpps = (double)r->completed / st.seconds / 1e6;
	return st;
}

static void print_table(const struct client *c, const struct stats *st)
{
	static const char rule[] = "-----------------------------------------------------------"
				   "----------------------------";

	printf("%s\n", rule);
	printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]"
	       "   MsgRate[Mpps]\n");
	printf(" %-10zu %-14" PRIu64 " %-18.2f %-20.2f %.6f\n", c->s.o->size, c->run.completed,
	       st->peak_mbps, st->avg_mbps, st->mpps);
	printf("%s\n", rule);
}

static void print_json(const struct client *c, const struct stats *st, const char *verify)
{
	const struct run *r = &c->run;

	printf("{\"bytes\":%zu,\"iterations\":%" PRIu64 ",\"bw_peak_mbps\":%.2f,"
	       "\"bw_avg_mbps\":%.2f,\"msg_rate_mpps\":%.6f,\"seconds\":%.6f,\"mtu\":%u,"
	       "\"verify\":\"%s\"", c->s.o->size, r->completed, st->peak_mbps, st->avg_mbps,
	       st->mpps, st->seconds, mtu_bytes(c->s.mtu), verify);
	if (r->result == RUN_WC_ERROR)
		printf(",\"status\":\"%s\"", rocemu_wc_status_str(r->bad_wc.status));
	else if (r->result == RUN_ABORTED)
		printf(",\"error\":\"%s\"", abort_names[r->reason]);
	printf("}\n");
}

/* What the server found, in the client's words. */
static void print_verdict(const struct client *c, const struct ctl_msg *v)
{
	FILE *f = c->s.info;

	switch (v->code) {
	case VERDICT_OK:
		if (c->s.o->verify)
			fprintf(f, "verify: OK\n");
		break;
	case VERDICT_MISMATCH:
		fprintf(f, "verify: FAILED at offset %" PRIu64 "\n", v->value);
		break;
	case VERDICT_UNCHANGED:
		fprintf(f, "server: buffer unchanged\n");
		break;
	case VERDICT_CHANGED:
		fprintf(f, "server: buffer CHANGED at offset %" PRIu64 "\n", v->value);
		break;
	case VERDICT_UNCHECKED:
		fprintf(f, "server: buffer not checked (writes had landed before the failure)\n");
		break;
	case VERDICT_WRONGLY_ACCEPTED:
		msg("the server says writes outside its buffer or with a wrong rkey completed");
		break;
	default:
		msg("unknown verdict %u from the server", v->code);
	}
}

/* Prints the result; the exit status is 0 only for a run that completed and that the
 * server found as expected. */
static int report(struct client *c, const struct ctl_msg *verdict)
{
	const struct options *o = c->s.o;
	const struct run *r = &c->run;
	const struct stats st = compute_stats(c);
	bool ok = r->result == RUN_OK && verdict && verdict->code == VERDICT_OK;

	if (r->result == RUN_WC_ERROR)
		fprintf(stderr, "completion error: %s (wr_id %" PRIu64 ", vendor_err %u)\n",
			rocemu_wc_status_str(r->bad_wc.status), (uint64_t)r->bad_wc.wr_id,
			r->bad_wc.vendor_err);
	if (c->ran && o->json)
		print_json(c, &st, !o->verify ? "off" : ok ? "OK" : "FAILED");
	else if (c->ran && r->result == RUN_OK)
		print_table(c, &st);
	if (verdict)
		print_verdict(c, verdict);
	else if (o->verify && r->result == RUN_OK)
		fprintf(c->s.info, "verify: FAILED (no verdict from the server)\n");
	return ok ? 0 : 1;
}

/* Tells the server how the run ended and reads its verdict on the buffer. */
static bool trade_result(struct client *c, struct ctl_msg *verdict)
{
	const struct options *o = c->s.o;
	const struct run *r = &c->run;
	const struct ctl_msg done = {
		.type = MSG_DONE,
		.code = r->result == RUN_OK ? DONE_OK
			: r->result == RUN_WC_ERROR ? DONE_WC_ERROR : DONE_ABORTED,
		.status = r->result == RUN_WC_ERROR ? (uint32_t)r->bad_wc.status : 0,
		.flags = (o->aim_outside ? DONE_AIMED_OUTSIDE : 0) |
			 (o->rkey_xor ? DONE_KEY_ALTERED : 0),
		.count = r->completed,
		/* Completions arrive in order, so the last one names the data in place. */
		.value = r->completed ? r->completed - 1 : 0,
		.offset = o->remote_offset,
	};

	if (send_ctl(c->s.fd, &done, "the result") < 0)
		return false;
	do {   /* a READY we did not wait for (setup failed) may come first */
		if (recv_ctl(c->s.fd, verdict, o->timeout_ms, "the server's verdict") < 0)
			return false;
	} while (verdict->type == MSG_READY);
	if (verdict->type != MSG_VERDICT) {
		msg("expected the server's verdict, got message type %u", verdict->type);
		return false;
	}
	return true;
}

enum prepare_result { PREP_OK, PREP_FAILED, PREP_SERVER_LOST };

/* From the exchanged connection data to the moment the server's QP accepts writes. */
static enum prepare_result prepare(struct client *c)
{
	struct session *s = &c->s;
	const struct options *o = s->o;
	struct ctl_msg ready;

	if (!o->aim_outside && o->size > s->peer.size) {
		msg("-s %zu is larger than the server's buffer of %" PRIu64 " bytes (use a smaller "
		    "size, or --remote-offset to aim outside on purpose)", o->size, s->peer.size);
		return PREP_FAILED;
	}
	if (connect_qp(s) < 0)
		return PREP_FAILED;
	/* Writes sent before the server's QP is in RTR would be dropped and retried. */
	if (recv_ctl(s->fd, &ready, o->timeout_ms, "the server to get ready") < 0)
		return PREP_SERVER_LOST;
	if (ready.type != MSG_READY) {
		msg("expected READY from the server, got message type %u", ready.type);
		return PREP_SERVER_LOST;
	}
	plan_writes(c);
	return PREP_OK;
}

/* --start-file: polled every millisecond, so many clients start within one of each other.
 * The server hears nothing meanwhile; the wait is bounded by the timeout it was told. */
static bool wait_for_start(const struct options *o)
{
	uint64_t deadline = now_ns() + (uint64_t)o->timeout_ms * NS_PER_MS;

	while (access(o->start_file, F_OK) != 0) {
		if (now_ns() >= deadline) {
			msg("%s did not appear within %d ms", o->start_file, o->timeout_ms);
			return false;
		}
		usleep(1000);
	}
	return true;
}

static int client_session(struct client *c)
{
	struct ctl_msg verdict;

	if (!verify_agrees(&c->s))
		return 2;
	switch (prepare(c)) {
	case PREP_OK:
		if (c->s.o->start_file && !wait_for_start(c->s.o)) {
			c->run.result = RUN_ABORTED;
			c->run.reason = ABORT_SETUP;
			break;
		}
		run_writes(c);
		break;
	case PREP_FAILED:
		c->run.result = RUN_ABORTED;
		c->run.reason = ABORT_SETUP;
		break;
	case PREP_SERVER_LOST:
		return 1;
	}
	if (c->run.result == RUN_ABORTED && c->run.reason == ABORT_SERVER)
		return report(c, NULL);
	return report(c, trade_result(c, &verdict) ? &verdict : NULL);
}

static int run_client(const struct options *o)
{
	struct client c = {
		.s = { .o = o, .fd = -1, .info = o->json ? stderr : stdout },
	};
	int rc = 1;

	plan_depth(&c, o);
	if (setup_endpoint(&c.s.ep, o, (size_t)c.slots * o->size, 0) == 0 &&
	    (c.s.fd = tcp_connect(o->host, o->port)) >= 0 && exchange(&c.s) == 0)
		rc = client_session(&c);
	if (close_session(&c.s) < 0 && rc == 0)
		rc = 1;
	return rc;
}

/* ---- server ---- */

/* Reads heartbeats until the client's result; the timeout bounds each silence. */
static int wait_done(struct session *s, struct ctl_msg *done)
{
	do {
		if (recv_ctl(s->fd, done, s->o->timeout_ms, "the client's progress or result") < 0)
			return -1;
	} while (done->type == MSG_PROGRESS);
	if (done->type != MSG_DONE || done->code > DONE_ABORTED ||
	    (done->code == DONE_OK && (!done->count || done->value >= done->count))) {
		msg("malformed message from the client (type %u, result %u)", done->type,
		    done->code);
		return -1;
	}
	return 0;
}

static struct ctl_msg verdict_at(enum verdict_code code, uint64_t offset)
{
	return (struct ctl_msg){ .type = MSG_VERDICT, .code = code, .value = offset };
}

/* Compares the buffer with what the client's result says it should hold. */
static struct ctl_msg judge_buffer(const struct session *s, const struct ctl_msg *done)
{
	const uint8_t *buf = s->ep.buf;
	const size_t len = s->ep.buf_len;
	const uint64_t size = s->peer.size, off = done->offset;
	size_t bad;

	if (done->code != DONE_OK) {
		/* Only a client that completed no write can promise nothing landed. */
		if (done->count)
			return verdict_at(VERDICT_UNCHECKED, 0);
		bad = find_not_fill(buf, 0, len);
		return verdict_at(bad == len ? VERDICT_UNCHANGED : VERDICT_CHANGED, bad);
	}
	/* Overflow-safe: offset and size come from the peer. */
	if (off > len || size > len - off || (done->flags & DONE_KEY_ALTERED))
		return verdict_at(VERDICT_WRONGLY_ACCEPTED, off);
	if (!s->o->verify)
		return verdict_at(VERDICT_OK, 0);
	bad = find_pattern_mismatch(buf + off, size, done->value);
	if (bad < size)
		return verdict_at(VERDICT_MISMATCH, off + bad);
	/* Around the message the fill must remain: a write that landed elsewhere shows here. */
	if ((bad = find_not_fill(buf, 0, off)) < off ||
	    (bad = find_not_fill(buf, off + size, len)) < len)
		return verdict_at(VERDICT_MISMATCH, bad);
	return verdict_at(VERDICT_OK, 0);
}

/* Prints what the client reported and what the buffer holds; true when that matches. */
static bool report_server(const struct session *s, const struct ctl_msg *done,
			  const struct ctl_msg *v)
{
	if (done->code == DONE_WC_ERROR)
		printf("client failed: completion error %s after %" PRIu64 " successful writes\n",
		       rocemu_wc_status_str(done->status), done->count);
	else if (done->code == DONE_ABORTED)
		printf("client failed: it gave up after %" PRIu64 " successful writes\n",
		       done->count);
	switch (v->code) {
	case VERDICT_OK:
		if (s->o->verify)
			printf("verify: OK\n");
		else
			printf("client done: %" PRIu64 " writes of %" PRIu64 " bytes\n",
			       done->count, s->peer.size);
		return true;
	case VERDICT_MISMATCH:
		printf("verify: FAILED at offset %" PRIu64 "\n", v->value);
		return false;
	case VERDICT_UNCHANGED:
		printf("buffer unchanged\n");
		return true;
	case VERDICT_CHANGED:
		printf("buffer CHANGED at offset %" PRIu64 "\n", v->value);
		return false;
	case VERDICT_UNCHECKED:
		printf("buffer not checked: writes had landed before the client failed\n");
		return false;
	default:
		msg("the client's writes completed although they %s",
		    done->flags & DONE_KEY_ALTERED ? "used a wrong rkey"
						   : "aimed outside this buffer");
		return false;
	}
}

static int server_session(struct session *s)
{
	const struct ctl_msg ready = { .type = MSG_READY };
	struct ctl_msg done, verdict;
	bool ok;

	if (!verify_agrees(s))
		return 2;
	if (connect_qp(s) < 0 || send_ctl(s->fd, &ready, "READY") < 0 || wait_done(s, &done) < 0)
		return 1;
	verdict = judge_buffer(s, &done);
	ok = report_server(s, &done, &verdict);
	if (send_ctl(s->fd, &verdict, "the verdict") < 0)
		return 1;
	return ok ? 0 : 1;
}

static int accept_client(const struct options *o)
{
	int lfd = tcp_listen(o->port), fd;

	if (lfd < 0)
		return -1;
	printf("waiting for a client on TCP port %u\n", o->port);
	fd = tcp_accept(lfd, o->port, o->timeout_ms);
	close(lfd);
	return fd;
}

static int run_server(const struct options *o)
{
	struct session s = { .o = o, .fd = -1, .info = stdout };
	int rc = 1;

	if (setup_endpoint(&s.ep, o, o->size, SERVER_FILL) == 0 &&
	    (s.fd = accept_client(o)) >= 0 && exchange(&s) == 0)
		rc = server_session(&s);
	if (close_session(&s) < 0 && rc == 0)
		rc = 1;
	return rc;
}

int main(int argc, char **argv)
{
	struct options o;

	switch (parse_options(argc, argv, &o)) {
	case PARSE_HELP:
		return 0;
	case PARSE_ERROR:
		return 2;
	}
	/* A daemon or peer that goes away must show up as EPIPE, not kill us silently. */
	signal(SIGPIPE, SIG_IGN);
	/* Scripts read our lines through pipes while we wait on the peer. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return o.server ? run_server(&o) : run_client(&o);
}
