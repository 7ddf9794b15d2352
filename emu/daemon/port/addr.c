/* The addresses a daemon serves, kept as RoCE v2 GIDs: the GID table clients see. An IPv4
 * address a.b.c.d is ::ffff:a.b.c.d; an IPv6 address is its own GID. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "emu/daemon/port/port.h"

static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

void addr_gid(uint8_t gid[16], int version, const uint8_t *ip)
{
	if (version == 6) {
		memcpy(gid, ip, 16);
		return;
	}
	memcpy(gid, v4_prefix, sizeof(v4_prefix));
	memcpy(gid + 12, ip, 4);
}

bool addr_gid_is_ipv4(const uint8_t gid[16])
{
	return !memcmp(gid, v4_prefix, sizeof(v4_prefix));
}

/* rdma_is_multicast_addr's test: IPv4 224.0.0.0/4 (mapped) or IPv6 ff00::/8. */
bool addr_gid_is_multicast(const uint8_t gid[16])
{
	return addr_gid_is_ipv4(gid) ? (gid[12] & 0xf0) == 0xe0 : gid[0] == 0xff;
}

/* The kernel's ip_eth_mc_map and ipv6_eth_mc_map: 01:00:5e and the group's low 23 bits,
 * 33:33 and its low 32 bits. */
void addr_multicast_mac(const uint8_t gid[16], uint8_t mac[6])
{
	if (addr_gid_is_ipv4(gid)) {
		mac[0] = 0x01, mac[1] = 0x00, mac[2] = 0x5e;
		mac[3] = gid[13] & 0x7f, mac[4] = gid[14], mac[5] = gid[15];
		return;
	}
	mac[0] = mac[1] = 0x33;
	memcpy(mac + 2, gid + 12, 4);
}

int addr_find(const struct port *port, const uint8_t gid[16])
{
	for (unsigned i = 0; i < port->ngids; i++)
		if (!memcmp(port->gids[i].raw, gid, 16))
			return (int)i;
	return -1;
}

const char *addr_str(const uint8_t gid[16], char *buf, size_t len)
{
	if (addr_gid_is_ipv4(gid))
		return inet_ntop(AF_INET, gid + 12, buf, (socklen_t)len);
	return inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
}

uint32_t addr_hash(const struct port *port)
{
	uint32_t h = 2166136261u;        /* FNV-1a */

	for (unsigned i = 0; i < port->ngids; i++)
		for (int b = 0; b < 16; b++)
			h = (h ^ port->gids[i].raw[b]) * 16777619u;
	return h;
}

static int add_gid(struct port *port, const uint8_t gid[16], char *err, size_t errlen)
{
	char s[INET6_ADDRSTRLEN];

	if (addr_find(port, gid) >= 0)
		return 0;
	if (port->ngids == DEV_MAX_GIDS) {
		snprintf(err, errlen, "%s: a daemon serves at most %d addresses",
			 addr_str(gid, s, sizeof(s)), DEV_MAX_GIDS);
		return -1;
	}
	memcpy(port->gids[port->ngids].raw, gid, 16);
	port->gids[port->ngids].ipv6 = !addr_gid_is_ipv4(gid);
	if (!port->gids[port->ngids].ipv6 && !port->ipv4)
		memcpy(&port->ipv4, gid + 12, 4);
	port->ngids++;
	return 0;
}

/* Whether the interface entry i holds want (a GID): its own address, or on a loopback
 * interface any IPv4 address of its subnet (all of 127.0.0.0/8 is local), so two daemons
 * can share lo on 127.0.0.1 and 127.0.0.2. */
static bool entry_holds(const struct ifaddrs *i, const uint8_t want[16])
{
	uint8_t have[16];

	if (i->ifa_addr->sa_family == AF_INET6) {
		return !addr_gid_is_ipv4(want) &&
		       !memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, want, 16);
	}
	if (!addr_gid_is_ipv4(want))
		return false;
	addr_gid(have, 4, (const uint8_t *)&((const struct sockaddr_in *)i->ifa_addr)->sin_addr);
	if (!memcmp(have, want, 16))
		return true;
	if (!(i->ifa_flags & IFF_LOOPBACK) || !i->ifa_netmask)
		return false;
	for (int b = 12; b < 16; b++) {
		uint8_t mask = ((const uint8_t *)&((const struct sockaddr_in *)i->ifa_netmask)->sin_addr)[b - 12];

		if ((have[b] & mask) != (want[b] & mask))
			return false;
	}
	return true;
}

static bool is_ip(const struct ifaddrs *i)
{
	return i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
			       i->ifa_addr->sa_family == AF_INET6);
}

/* What serving with no -a means: the first IPv4 address and every global IPv6 one. */
static int add_defaults(struct port *port, const struct ifaddrs *ifa, const char *ifname,
			char *err, size_t errlen)
{
	bool have_v4 = false;
	uint8_t gid[16];

	for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (strcmp(i->ifa_name, ifname) || !is_ip(i))
			continue;
		if (i->ifa_addr->sa_family == AF_INET && !have_v4) {
			addr_gid(gid, 4, (const uint8_t *)&((const struct sockaddr_in *)i->ifa_addr)->sin_addr);
			have_v4 = true;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const struct in6_addr *a = &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;

			if (IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_LOOPBACK(a))
				continue;
			addr_gid(gid, 6, a->s6_addr);
		} else {
			continue;
		}
		if (add_gid(port, gid, err, errlen) < 0)
			return -1;
	}
	return 0;
}

static int add_named(struct port *port, const struct ifaddrs *ifa, const char *ifname,
		     const char *text, char *err, size_t errlen)
{
	uint8_t gid[16], ip[16];
	bool held = false;

	if (inet_pton(AF_INET, text, ip) == 1) {
		addr_gid(gid, 4, ip);
	} else if (inet_pton(AF_INET6, text, ip) == 1 && !addr_gid_is_ipv4(ip)) {
		addr_gid(gid, 6, ip);
	} else {
		snprintf(err, errlen, "-a %s is neither an IPv4 nor an IPv6 address (IPv4-mapped "
			 "ones as IPv4)", text);
		return -1;
	}
	for (const struct ifaddrs *i = ifa; i && !held; i = i->ifa_next)
		held = !strcmp(i->ifa_name, ifname) && is_ip(i) && entry_holds(i, gid);
	if (!held) {
		snprintf(err, errlen, "interface %s has no address %s (see ip addr show %s)",
			 ifname, text, ifname);
		return -1;
	}
	return add_gid(port, gid, err, errlen);
}

long addr_read_number(const char *path, long otherwise)
{
	FILE *f = fopen(path, "re");
	long v;

	if (!f)
		return otherwise;
	if (fscanf(f, "%ld", &v) != 1)
		v = otherwise;
	fclose(f);
	return v;
}

/* A sysctl's value in 1..255, or 64 (the kernel's default) when it cannot be read. */
static uint8_t read_hop_sysctl(const char *path)
{
	long v = addr_read_number(path, 0);

	return v >= 1 && v <= 255 ? (uint8_t)v : 64;
}

void addr_read_hop_limits(struct port *port)
{
	char path[96];

	port->hop_limit[0] = read_hop_sysctl("/proc/sys/net/ipv4/ip_default_ttl");
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/hop_limit", port->ifname);
	port->hop_limit[1] = read_hop_sysctl(path);
}

int addr_serve(struct port *port, const char *const *addrs, unsigned naddrs, char *err,
	       size_t errlen)
{
	struct ifaddrs *ifa;
	int rc = 0;

	if (getifaddrs(&ifa) < 0) {
		snprintf(err, errlen, "cannot list interfaces: %s", strerror(errno));
		return -1;
	}
	for (unsigned i = 0; i < naddrs && !rc; i++)
		rc = add_named(port, ifa, port->ifname, addrs[i], err, errlen);
	if (!rc && !naddrs)
		rc = add_defaults(port, ifa, port->ifname, err, errlen);
	freeifaddrs(ifa);
	if (!rc && !port->ngids) {
		if (!if_nametoindex(port->ifname))
			snprintf(err, errlen, "no interface %s (see ip link)", port->ifname);
		else
			snprintf(err, errlen, "interface %s has no IPv4 or global IPv6 address; add "
				 "one with ip addr add ADDRESS/N dev %s", port->ifname, port->ifname);
		rc = -1;
	}
	return rc;
}
