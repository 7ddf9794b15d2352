/* Socket addresses as rdma_cm takes them, GIDs as the daemon does, and the picks the
 * kernel's rdma_cm makes: a source address by the routes, an ephemeral port. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "emu/rdmacm/rdmacm.h"
#include "wire/rtnl.h"

void rcm_addr_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

static bool gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(gid, prefix, 12);
}

/* family 0: the GID's own (IPv4-mapped: AF_INET) */
void rcm_gid_addr(const uint8_t gid[16], uint16_t port, int family, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!family)
		family = gid_is_v4(gid) ? AF_INET : AF_INET6;
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, gid + 12, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, gid, 16);
	}
}

uint16_t rcm_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

void rcm_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

socklen_t rcm_addr_len(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;
}

bool rcm_addr_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* The kernel's cma takes a loopback address as it takes the wildcard: binding to one ties
 * the id to no device, and a listener bound to one hears every address (libfabric's verbs
 * provider binds to "localhost" to probe for devices, and listens there). */
bool rcm_addr_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY) ||
		       rcm_addr_loopback(sa);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr) ||
		       rcm_addr_loopback(sa);
	return true;
}

/* The kernel's rdma_cm finds a neighbour in the same table first and waits only for one it
 * lacks; so here, and only a missing one is asked of the daemon (which looks again when it
 * connects). The kernel answers a get within the send. */
bool rcm_neighbour_known(struct rcm_device *d, const struct sockaddr *dst)
{
	static uint32_t seq;
	uint8_t req[RTNL_NEIGH_REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	char buf[RTNL_NEIGH_ANSWER_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	uint8_t gid[16], mac[6];
	uint32_t mine = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	bool v4 = dst->sa_family == AF_INET;
	size_t len;
	ssize_t n;
	int fd;

	int ifindex = rcm_device_ifindex(d);

	if (!ifindex)
		return false;
	rcm_addr_gid(dst, gid);
	len = rtnl_neigh_request(req, mine, dst->sa_family, ifindex, v4 ? gid + 12 : gid);
	if (!len)
		return false;
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return false;
	n = send(fd, req, len, 0) < 0 ? -1 : recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	close(fd);
	return n > 0 && rtnl_neigh_answer(buf, (size_t)n, mine, mac) == 1;
}

/* ip_local_port_range as the kernel has it now, or 32768-60999 (its default) when it cannot
 * be read; without stdio, whose buffer costs an fstat and an allocation at each bind. */
void rcm_port_range(unsigned *lo, unsigned *hi)
{
	char text[64], *end;
	int fd = open("/proc/sys/net/ipv4/ip_local_port_range", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	unsigned long a, b;

	if (fd >= 0)
		close(fd);
	*lo = 32768, *hi = 60999;
	if (n <= 0)
		return;
	text[n] = '\0';
	a = strtoul(text, &end, 10);
	b = strtoul(end, &end, 10);
	if (a <= b && b <= 65535 && end > text)
		*lo = (unsigned)a, *hi = (unsigned)b;
}

uint16_t rcm_random_port(unsigned lo, unsigned hi)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)getpid() * 2654435761u;
	return (uint16_t)(lo + r % (hi - lo + 1));
}

/* The kernel's rdma_cm picks a port of ip_local_port_range at random. */
uint16_t rcm_ephemeral_port(void)
{
	unsigned lo, hi;

	rcm_port_range(&lo, &hi);
	return rcm_random_port(lo, hi);
}

/* A UDP socket connected to dst: the kernel picks the source address its routes give,
 * without a packet leaving. */
int rcm_route_source(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage to;
	int err = 0;

	if (fd < 0)
		return errno;
	memcpy(&to, dst, rcm_addr_len(dst));
	rcm_set_port((struct sockaddr *)&to, 9);   /* connect() wants a port, any */
	if (connect(fd, (struct sockaddr *)&to, rcm_addr_len(dst)) < 0 ||
	    getsockname(fd, (struct sockaddr *)src, &len) < 0)
		err = errno;
	close(fd);
	return err;
}
