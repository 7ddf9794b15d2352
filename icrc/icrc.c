#include "icrc/icrc.h"

#include <isa-l/crc.h>
#include <string.h>

/* Largest masked header block: 8 (LRH) + 60 (IPv4 with options) + 8 (UDP) + 12 (BTH). */
#define MASKED_MAX (8 + 60 + ICRC_UDP_LEN + ICRC_BTH_LEN)

static void mask_ipv4(uint8_t *ip)
{
	ip[1] = 0xff;             /* TOS */
	ip[8] = 0xff;             /* TTL */
	ip[10] = ip[11] = 0xff;   /* header checksum */
}

static void mask_ipv6(uint8_t *ip)
{
	ip[0] |= 0x0f;            /* traffic class and flow label: all but the version */
	ip[1] = ip[2] = ip[3] = 0xff;
	ip[7] = 0xff;             /* hop limit */
}

icrc_state icrc_begin(const uint8_t *l3, size_t ip_hdr_len, int ip_version)
{
	uint8_t buf[MASKED_MAX];
	size_t n = ip_hdr_len + ICRC_UDP_LEN + ICRC_BTH_LEN;
	uint8_t *ip = buf + 8;
	uint8_t *udp = ip + ip_hdr_len;

	if (ip_hdr_len > 60)
		return 0;
	memset(buf, 0xff, 8);
	memcpy(ip, l3, n);
	if (ip_version == 4)
		mask_ipv4(ip);
	else
		mask_ipv6(ip);
	udp[6] = udp[7] = 0xff;      /* UDP checksum */
	udp[ICRC_UDP_LEN + 4] = 0xff; /* BTH FECN, BECN and reserved bits */
	return crc32_gzip_refl(0, buf, 8 + n);
}

icrc_state icrc_update(icrc_state state, const void *data, size_t len)
{
	return crc32_gzip_refl(state, data, len);
}

uint32_t icrc_end(icrc_state state)
{
	return state;
}

uint32_t icrc_compute(const uint8_t *l3, size_t ip_hdr_len, int ip_version, size_t l4_len)
{
	size_t hdrs = ICRC_UDP_LEN + ICRC_BTH_LEN;
	icrc_state s = icrc_begin(l3, ip_hdr_len, ip_version);

	return icrc_end(icrc_update(s, l3 + ip_hdr_len + hdrs, l4_len - hdrs - ICRC_LEN));
}

bool icrc_verify(const uint8_t *l3, size_t ip_hdr_len, int ip_version, size_t l4_len)
{
	const uint8_t *trailer = l3 + ip_hdr_len + l4_len - ICRC_LEN;

	return icrc_compute(l3, ip_hdr_len, ip_version, l4_len) == icrc_load(trailer);
}

void icrc_store(uint8_t *trailer, uint32_t icrc)
{
	trailer[0] = icrc & 0xff;
	trailer[1] = (icrc >> 8) & 0xff;
	trailer[2] = (icrc >> 16) & 0xff;
	trailer[3] = icrc >> 24;
}

uint32_t icrc_load(const uint8_t *trailer)
{
	return trailer[0] | (uint32_t)trailer[1] << 8 | (uint32_t)trailer[2] << 16 |
	       (uint32_t)trailer[3] << 24;
}
