/* Frames the wire and icrc suites build by hand, so their bytes are known independently of
 * wire_build(). */
#ifndef ROCEMU_TEST_FRAMES_H
#define ROCEMU_TEST_FRAMES_H

#include <stddef.h>
#include <stdint.h>

/* Writes an Ethernet frame: IPv4 (ihl_words 5..15, options zero) or IPv6, UDP to 4791, a BTH
 * with opcode (0x0a WRITE_ONLY carries a 16-byte RETH), payload_len bytes of pattern, pad,
 * and a trailer computed by a reference CRC (zlib over a masked copy). Returns the length. */
size_t frames_make(uint8_t *buf, int ip_version, unsigned ihl_words, uint8_t opcode,
		   size_t payload_len);

/* The reference ICRC of a frame made as above: zlib crc32 over a masked copy. */
uint32_t frames_reference_icrc(const uint8_t *frame, size_t len);

#endif
