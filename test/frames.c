#include "test/frames.h"

#include <string.h>
#include <zlib.h>

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static size_t l3_len(const uint8_t *frame)
{
	const uint8_t *ip = frame + 14;

	return (ip[0] >> 4) == 4 ? (size_t)(ip[0] & 0x0f) * 4 : 40;
}

uint32_t frames_reference_icrc(const uint8_t *frame, size_t len)
{
	uint8_t copy[8 + 65536];    /* any IP datagram: a GSO frame's are up to 64 KiB */
	const size_t ihl = l3_len(frame);
	uint8_t *ip = copy + 8;
	uint8_t *udp = ip + ihl;
	size_t body = len - 14 - 4; /* from the IP header up to the trailer */

	if (len < 14 + 4 || body > sizeof(copy) - 8)
		return 0;
	memset(copy, 0xff, 8);
	memcpy(ip, frame + 14, body);
	if ((ip[0] >> 4) == 4) {
		ip[1] = 0xff;
		ip[8] = 0xff;
		ip[10] = ip[11] = 0xff;
	} else {
		ip[0] = 0x6f;
		ip[1] = ip[2] = ip[3] = 0xff;
		ip[7] = 0xff;
	}
	udp[6] = udp[7] = 0xff;
	udp[8 + 4] = 0xff;
	return (uint32_t)crc32(0, copy, (uInt)(8 + body));
}

static size_t put_ip(uint8_t *ip, int ip_version, unsigned ihl_words, size_t l4_len)
{
	if (ip_version == 4) {
		size_t ihl = ihl_words * 4;

		memset(ip, 0, ihl);
		ip[0] = (uint8_t)(0x40 | ihl_words);
		ip[1] = 0x02;
		put16(ip + 2, (unsigned)(ihl + l4_len));
		put16(ip + 4, 0x1234);
		put16(ip + 6, 0x4000);
		ip[8] = 64;
		ip[9] = 17;
		put16(ip + 10, 0xbeef);
		memcpy(ip + 12, "\xc6\x12\x00\x01\xc6\x12\x00\x02", 8);
		return ihl;
	}
	memset(ip, 0, 40);
	memcpy(ip, "\x60\x12\x34\x56", 4);
	put16(ip + 4, (unsigned)l4_len);
	ip[6] = 17;
	ip[7] = 64;
	ip[8] = 0xfd;
	ip[23] = 1;
	ip[24] = 0xfd;
	ip[39] = 2;
	return 40;
}

size_t frames_make(uint8_t *buf, int ip_version, unsigned ihl_words, uint8_t opcode,
		   size_t payload_len)
{
	size_t ext = opcode == 0x0a ? 16 : 0;
	size_t pad = (0 - payload_len) & 3;
	size_t l4_len = 8 + 12 + ext + payload_len + pad + 4;
	uint8_t *p, *bth;
	uint32_t icrc;
	size_t len;

	memcpy(buf, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01", 12);
	put16(buf + 12, ip_version == 4 ? 0x0800 : 0x86dd);
	p = buf + 14 + put_ip(buf + 14, ip_version, ihl_words, l4_len);
	put16(p, 0xc123);
	put16(p + 2, 4791);
	put16(p + 4, (unsigned)l4_len);
	put16(p + 6, 0x5555);
	bth = p + 8;
	memset(bth, 0, 12);
	bth[0] = opcode;
	bth[1] = (uint8_t)(pad << 4);
	put16(bth + 2, 0xffff);
	bth[4] = 0x80;
	bth[7] = 0x11;
	bth[8] = 0x80;
	bth[11] = 0x05;
	p = bth + 12;
	for (size_t i = 0; i < ext + payload_len; i++)
		*p++ = (uint8_t)(i * 7 + 3);
	memset(p, 0, pad);
	p += pad;
	len = (size_t)(p - buf) + 4;
	icrc = frames_reference_icrc(buf, len);
	p[0] = (uint8_t)icrc;
	p[1] = (uint8_t)(icrc >> 8);
	p[2] = (uint8_t)(icrc >> 16);
	p[3] = (uint8_t)(icrc >> 24);
	return len;
}
