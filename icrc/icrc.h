/* icrc: the RoCEv2 Invariant CRC. Pure functions: no I/O, no allocation.
 *
 * The ICRC is CRC-32 (IEEE 802.3, as zlib's crc32) over 8 bytes of 0xFF, the IP header with
 * its variant fields set to ones, the UDP header with its checksum set to ones, the BTH with
 * byte 4 set to ones, and everything after the BTH up to the trailer. It travels least
 * significant byte first.
 *
 * The computation is split so a sender can fold headers and payload pieces without first
 * gathering them: icrc_begin() over the headers, icrc_update() over each following piece,
 * icrc_end() for the trailer value. */
#ifndef ROCEMU_ICRC_H
#define ROCEMU_ICRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ICRC_LEN 4
#define ICRC_BTH_LEN 12
#define ICRC_UDP_LEN 8

/* Running CRC state; opaque to callers beyond passing it along. */
typedef uint32_t icrc_state;

/* Starts an ICRC over the masked headers. l3 points to the IP header, ip_hdr_len bytes long
 * (IPv4 with options included; 40 for IPv6), followed directly by the UDP header and the
 * BTH. ip_version is 4 or 6. Returns the state after the BTH. */
icrc_state icrc_begin(const uint8_t *l3, size_t ip_hdr_len, int ip_version);
icrc_state icrc_update(icrc_state state, const void *data, size_t len);
uint32_t icrc_end(icrc_state state);

/* ICRC of a whole packet: l3 as above, l4_len = the UDP length (header through trailer).
 * l4_len must be at least ICRC_UDP_LEN + ICRC_BTH_LEN + ICRC_LEN. */
uint32_t icrc_compute(const uint8_t *l3, size_t ip_hdr_len, int ip_version, size_t l4_len);
/* True when the trailer (the last 4 bytes of the UDP payload) matches. */
bool icrc_verify(const uint8_t *l3, size_t ip_hdr_len, int ip_version, size_t l4_len);

/* Changing covered bytes in place without folding the packet again. icrc_patch() gives the
 * ICRC after len bytes changed by diff (the xor of their old and new values), carry_factor
 * being icrc_carry_factor() of the number of covered bytes after them (less than 512 MiB).
 * A packet whose ICRC was wrong keeps it wrong: nothing is vouched for that was not. */
uint32_t icrc_carry_factor(size_t bytes);
uint32_t icrc_patch(uint32_t icrc, const uint8_t *diff, size_t len, uint32_t carry_factor);

/* Trailer byte order: least significant byte first. */
void icrc_store(uint8_t *trailer, uint32_t icrc);
uint32_t icrc_load(const uint8_t *trailer);

#endif
