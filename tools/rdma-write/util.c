/* rdma-write's small helpers: messages on stderr, the clock, the --verify pattern and
 * the MTU enum. */
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "tools/rdma-write/rdma-write.h"

void msg(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Reports a failed librocemu call with the daemon's explanation; returns -1 for callers. */
int verbs_fail(const struct rocemu_context *ctx, const char *call, int err)
{
	const char *detail = ctx ? rocemu_last_error(ctx) : NULL;
	const char *what = err ? strerror(err) : "failed";

	if (detail && *detail)
		msg("%s: %s (%s)", call, what, detail);
	else
		msg("%s: %s", call, what);
	return -1;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Milliseconds until deadline, rounded up so a wait never ends just short of it; 0 once
 * it has passed. */
int ms_left(uint64_t deadline)
{
	uint64_t now = now_ns(), ms;

	if (now >= deadline)
		return 0;
	ms = (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The --verify pattern of byte i of iteration k: changes with both, so a stale or shifted
 * message does not pass for the right one. */
static inline uint8_t pattern(uint64_t k, uint64_t i)
{
	return (uint8_t)(k * 167 + i * 13 + (i >> 9));
}

void fill_pattern(uint8_t *p, size_t len, uint64_t k)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(k, i);
}

/* The first i where p[i] is not pattern(k, i), or len. */
size_t find_pattern_mismatch(const uint8_t *p, size_t len, uint64_t k)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(k, i))
			return i;
	return len;
}

/* The first offset in [from, to) whose byte is not SERVER_FILL, or to. */
size_t find_not_fill(const uint8_t *buf, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (buf[i] != SERVER_FILL)
			return i;
	return to;
}

unsigned mtu_bytes(enum ibv_mtu mtu)
{
	return 128u << mtu;
}

bool mtu_valid(uint32_t mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096;
}
