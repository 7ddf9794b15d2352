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

/* CRC-32 is linear: the CRC of a message changed in place moves by the CRC, with no initial
 * or final inversion, of the bits that changed, carried past the bytes after them. Carrying
 * a remainder past n bytes multiplies it by x^(8n) mod P. Polynomials here are kept as
 * CRC-32 keeps its register: the top bit is x^0, the bottom bit x^31. */
#define POLY_REFLECTED 0xedb88320u
#define POLY_ONE 0x80000000u

static uint32_t poly_mulmod(uint32_t a, uint32_t b)
{
	uint32_t product = 0;

	for (uint32_t bit = POLY_ONE; bit; bit >>= 1) {
		if (a & bit)
			product ^= b;
		b = b & 1 ? (b >> 1) ^ POLY_REFLECTED : b >> 1;
	}
	return product;
}

/* x^(2^k) mod P, each the square of the one before, from x^1 */
static const uint32_t x_pow_2k[32] = {
	0x40000000, 0x20000000, 0x08000000, 0x00800000,
	0x00008000, 0xedb88320, 0xb1e6b092, 0xa06a2517,
	0xed627dae, 0x88d14467, 0xd7bbfe6a, 0xec447f11,
	0x8e7ea170, 0x6427800e, 0x4d47bae0, 0x09fe548f,
	0x83852d0f, 0x30362f1a, 0x7b5a9cc3, 0x31fec169,
	0x9fec022a, 0x6c8dedc4, 0x15d6874d, 0x5fde7a4e,
	0xbad90e37, 0x2e4e5eef, 0x4eaba214, 0xa8a472c0,
	0x429a969e, 0x148d302a, 0xc40ba6d0, 0xc4e22c3c,
};

uint32_t icrc_carry_factor(size_t bytes)
{
	uint32_t factor = POLY_ONE;
	uint32_t bits = (uint32_t)bytes * 8;

	for (unsigned k = 0; bits; k++, bits >>= 1)
		if (bits & 1)
			factor = poly_mulmod(factor, x_pow_2k[k]);
	return factor;
}

uint32_t icrc_patch(uint32_t icrc, const uint8_t *diff, size_t len, uint32_t carry_factor)
{
	uint32_t rem = 0;

	for (size_t i = 0; i < len; i++) {
		rem ^= diff[i];
		for (int b = 0; b < 8; b++)
			rem = rem & 1 ? (rem >> 1) ^ POLY_REFLECTED : rem >> 1;
	}
	return icrc ^ poly_mulmod(rem, carry_factor);
}

uint32_t icrc_load(const uint8_t *trailer)
{
	return trailer[0] | (uint32_t)trailer[1] << 8 | (uint32_t)trailer[2] << 16 |
	       (uint32_t)trailer[3] << 24;
}
