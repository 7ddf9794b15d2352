/* The port as the transport sees it, for unit tests (test/port_stub.c): no socket, no
 * neighbour table, no log. Every frame the transport sends is kept, in order, with what
 * wire_parse() made of it, for the test to read back; the log keeps its last lines. */
#ifndef ROCEMU_TEST_PORT_STUB_H
#define ROCEMU_TEST_PORT_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emu/daemon/limits.h"
#include "wire/wire.h"

#define STUB_MAX_FRAMES 256

struct stub_frame {
	uint8_t bytes[DEV_FRAME_MAX];
	size_t len;
	struct wire_pkt pkt;         /* valid when well_formed */
	bool well_formed;            /* parsed as WIRE_OK with a good ICRC */
};

/* The MAC neigh_resolve() gives every peer. */
extern const uint8_t stub_peer_mac[6];

/* Forgets every frame sent and the last log line. */
void stub_reset(void);
/* Frames sent since the reset (counting any beyond STUB_MAX_FRAMES). */
unsigned stub_sent_count(void);
/* Frame i of those kept, or NULL. */
const struct stub_frame *stub_sent(unsigned i);
/* The last line logged at any level, "" when none. */
const char *stub_last_log(void);
/* Whether one of the last STUB_LOG_LINES lines logged holds needle. */
#define STUB_LOG_LINES 16
bool stub_logged(const char *needle);

#endif
