/* RoCEv2 GIDs of IPv4 hosts: the IPv4-mapped IPv6 address ::ffff:a.b.c.d. */
#include "emu/lib/lib_int.h"

#include <string.h>

static const uint8_t v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool gid_is_ipv4(const union ibv_gid *gid)
{
	return memcmp(gid->raw, v4_prefix, sizeof(v4_prefix)) == 0;
}

void rocemu_gid_from_ipv4(union ibv_gid *gid, uint32_t ipv4)
{
	memcpy(gid->raw, v4_prefix, sizeof(v4_prefix));
	memcpy(gid->raw + sizeof(v4_prefix), &ipv4, sizeof(ipv4));
}

uint32_t rocemu_gid_to_ipv4(const union ibv_gid *gid)
{
	uint32_t ipv4;

	if (!gid_is_ipv4(gid))
		return 0;
	memcpy(&ipv4, gid->raw + sizeof(v4_prefix), sizeof(ipv4));
	return ipv4;
}
