/* The port below the transport in unit tests: net_tx_slot()/net_tx_commit() keep each frame
 * sent, parsed and its ICRC checked, instead of sending it; nothing is batched, nothing is
 * received but what the test hands to rx_frame(), every peer has one MAC, and the log
 * keeps its last lines instead of writing them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "emu/daemon/log.h"
#include "emu/daemon/port/port.h"
#include "test/port_stub.h"

const uint8_t stub_peer_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };

static struct stub_frame sent[STUB_MAX_FRAMES];
static unsigned sent_count;
static uint8_t slot[DEV_FRAME_MAX];  /* exactly a frame: ASan sees a build that overruns */
static char log_lines[STUB_LOG_LINES][256];  /* a ring: the last lines logged */
static unsigned log_count;

void stub_reset(void)
{
	sent_count = 0;
	log_count = 0;
}

unsigned stub_sent_count(void)
{
	return sent_count;
}

const struct stub_frame *stub_sent(unsigned i)
{
	return i < sent_count && i < STUB_MAX_FRAMES ? &sent[i] : NULL;
}

const char *stub_last_log(void)
{
	return log_count ? log_lines[(log_count - 1) % STUB_LOG_LINES] : "";
}

bool stub_logged(const char *needle)
{
	unsigned kept = log_count < STUB_LOG_LINES ? log_count : STUB_LOG_LINES;

	for (unsigned i = 0; i < kept; i++)
		if (strstr(log_lines[(log_count - 1 - i) % STUB_LOG_LINES], needle))
			return true;
	return false;
}

/* ---- port/port.h, as far as the transport uses it ---- */

uint8_t *net_tx_slot(struct port *port)
{
	(void)port;
	return slot;
}

/* The frame is kept as it would have gone; a malformed one is kept too, marked, so the
 * test that caused it fails on reading it rather than on a count. */
void net_tx_commit(struct port *port, size_t len)
{
	struct stub_frame *f = sent_count < STUB_MAX_FRAMES ? &sent[sent_count] : NULL;

	port->cnt->sent_pkts++;
	sent_count++;
	if (!f)
		return;
	f->len = len <= DEV_FRAME_MAX ? len : DEV_FRAME_MAX;
	memcpy(f->bytes, slot, f->len);
	f->well_formed = len <= DEV_FRAME_MAX &&
			 wire_parse(f->bytes, f->len, &f->pkt) == WIRE_OK &&
			 wire_icrc_ok(f->bytes, &f->pkt);
}

void net_flush(struct port *port)
{
	(void)port;
}

/* Frames arrive only when the test delivers them: no ring to read before a timer acts. */
void net_rx_catch_up(struct port *port)
{
	(void)port;
}

int neigh_resolve(struct neigh_wait *nw, const uint8_t gid[16], uint8_t mac[6])
{
	(void)nw;
	(void)gid;
	memcpy(mac, stub_peer_mac, 6);
	return 0;
}

/* ---- log.h ---- */

__attribute__((format(printf, 1, 0))) static void keep(const char *fmt, va_list ap)
{
	vsnprintf(log_lines[log_count++ % STUB_LOG_LINES], sizeof(log_lines[0]), fmt, ap);
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	keep(fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	keep(fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	keep(fmt, ap);
	va_end(ap);
}

void log_limited(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	keep(fmt, ap);
	va_end(ap);
}

void log_limited_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	keep(fmt, ap);
	va_end(ap);
}
