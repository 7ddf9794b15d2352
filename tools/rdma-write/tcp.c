/* rdma-write's TCP connection to its peer: listen, accept and connect with deadlines, and
 * whole messages sent and received. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/rdma-write/rdma-write.h"

#define CONNECT_WINDOW_MS  5000            /* the server may start a little after us */
#define CONNECT_RETRY_MS   100

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
int send_msg(int fd, const void *buf, size_t len, const char *what)
{
	if (send_all(fd, buf, len) == 0)
		return 0;
	if (what)
		msg("sending %s: %s", what, strerror(errno));
	return -1;
}

/* Reads exactly len bytes within timeout_ms; what names the message for the errors. */
int recv_exact(int fd, void *buf, size_t len, int timeout_ms, const char *what)
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
int tcp_listen(uint16_t port)
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

int tcp_accept(int lfd, uint16_t port, int timeout_ms)
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
int tcp_connect(const char *host, uint16_t port)
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
