/* Helpers shared by the Check suites: where the shared captures are, and reading them. */
#ifndef ROCEMU_TESTUTIL_H
#define ROCEMU_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* The captures folder (ROCEMU_CAPTURES, else ../shared/captures from the repo root), or
 * NULL after printing why the capture tests are skipped. */
const char *testutil_captures_dir(void);

typedef void (*testutil_frame_fn)(const uint8_t *frame, size_t caplen, void *arg);

/* Calls fn for every frame of an Ethernet pcap file; returns the number of frames, or -1
 * when the file cannot be read. */
long testutil_each_frame(const char *path, testutil_frame_fn fn, void *arg);

/* One row of EXPECTED.tsv. */
struct testutil_expected {
	char file[256];
	long packets;
	long icrc_valid;
	char opcodes[512]; /* "4(22) 6(2) ..." as written in the file */
};

/* Reads EXPECTED.tsv of dir into rows (at most max); returns the count or -1. */
int testutil_read_expected(const char *dir, struct testutil_expected *rows, int max);

#endif
