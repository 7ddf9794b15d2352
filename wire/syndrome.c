#include "wire/wire.h"

#include <stdio.h>

static const char *nak_name(uint8_t code)
{
	switch (code) {
	case 0: return "PSN sequence error";
	case 1: return "invalid request";
	case 2: return "remote access error";
	case 3: return "remote operational error";
	case 4: return "invalid RD request";
	default: return "reserved code";
	}
}

const char *wire_syndrome_name(uint8_t syndrome, char *buf, size_t len)
{
	uint8_t low = syndrome & 0x1f;

	switch (wire_aeth_type(syndrome)) {
	case WIRE_AETH_ACK:
		snprintf(buf, len, "ACK (credits %u)", low);
		break;
	case WIRE_AETH_RNR_NAK:
		snprintf(buf, len, "RNR NAK (timer %u)", low);
		break;
	case WIRE_AETH_NAK:
		snprintf(buf, len, "NAK %s", nak_name(low));
		break;
	default:
		snprintf(buf, len, "reserved 0x%02x", syndrome);
		break;
	}
	return buf;
}
