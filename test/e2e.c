#include "test/e2e.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_line[4096];
static size_t g_used;
static bool g_failed;

static void vnote(const char *prefix, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static void vnote(const char *prefix, const char *fmt, va_list ap)
{
	int n;

	if (g_used + 16 >= sizeof(g_line))
		return;
	n = snprintf(g_line + g_used, sizeof(g_line) - g_used, "%s%s", g_used ? "; " : "",
		     prefix);
	if (n > 0)
		g_used += (size_t)n;
	if (g_used < sizeof(g_line)) {
		n = vsnprintf(g_line + g_used, sizeof(g_line) - g_used, fmt, ap);
		if (n > 0)
			g_used += (size_t)n;
	}
	if (g_used >= sizeof(g_line))
		g_used = sizeof(g_line) - 1;
}

void e2e_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote("", fmt, ap);
	va_end(ap);
}

bool e2e_mismatch(const char *fmt, ...)
{
	va_list ap;

	g_failed = true;
	va_start(ap, fmt);
	vnote("MISMATCH: ", fmt, ap);
	va_end(ap);
	return false;
}

void e2e_error(const char *fmt, ...)
{
	va_list ap;

	g_failed = true;
	va_start(ap, fmt);
	vnote("ERROR: ", fmt, ap);
	va_end(ap);
}

void e2e_timeout(const char *fmt, ...)
{
	va_list ap;

	g_failed = true;
	va_start(ap, fmt);
	vnote("TIMEOUT: ", fmt, ap);
	va_end(ap);
}

bool e2e_case_failed(void)
{
	return g_failed;
}

const char *e2e_line(void)
{
	return g_line;
}

void e2e_reset(void)
{
	g_used = 0;
	g_line[0] = '\0';
	g_failed = false;
}

int e2e_report(const char *name, const char *quiet)
{
	int failed = g_failed ? 1 : 0;

	printf("%s: %s: %s\n", name, failed ? "FAIL" : "OK", g_used ? g_line : quiet);
	fflush(stdout);
	e2e_reset();
	return failed;
}

int64_t e2e_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int e2e_write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int e2e_read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = e2e_now_ms() + timeout_ms;
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - e2e_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) < 0) {
			if (left > 0 && errno == EINTR)
				continue;
			return -1;
		}
		if (!pfd.revents)
			continue;
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

bool e2e_timing_counter(const char *name)
{
	static const char *const timing[] = { "doorbells", "polled_posts", "cq_wakeups",
					      "poll_yielded", "rt_backoffs", "ctl_neigh_waits" };

	for (size_t i = 0; i < sizeof(timing) / sizeof(timing[0]); i++)
		if (strcmp(name, timing[i]) == 0)
			return true;
	return false;
}
