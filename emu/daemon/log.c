/* Logging: stderr in the foreground (-d), syslog otherwise. */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

#include "emu/daemon/log.h"

static bool use_stderr;
static bool debug_on;

void log_init(bool to_stderr, bool verbose)
{
	use_stderr = to_stderr;
	debug_on = verbose;
	if (!to_stderr)
		openlog("rocemud", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* A trace (-v) is read beside a capture and beside the other daemon's trace, so each of its
 * lines starts with the wall-clock time, as tcpdump prints it. */
static void print_time(void)
{
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	localtime_r(&now.tv_sec, &tm);
	fprintf(stderr, "%02d:%02d:%02d.%06ld ", tm.tm_hour, tm.tm_min, tm.tm_sec,
		now.tv_nsec / 1000);
}

static void vlog(int prio, const char *fmt, va_list ap)
{
	if (use_stderr) {
		if (debug_on)
			print_time();
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(prio, fmt, ap);
	}
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_INFO, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_WARNING, fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!debug_on)
		return;
	va_start(ap, fmt);
	vlog(LOG_DEBUG, fmt, ap);
	va_end(ap);
}

/* A few lines a second of one kind; how many more were left out is said once a new second
 * begins. */
struct limiter {
	time_t window;
	unsigned in_window, suppressed;
};

static bool limiter_admits(struct limiter *l, int prio)
{
	time_t now = time(NULL);

	if (now != l->window) {
		if (l->suppressed) {
			if (prio == LOG_DEBUG)
				log_debug("(%u similar messages suppressed)", l->suppressed);
			else
				log_warn("(%u similar messages suppressed)", l->suppressed);
		}
		l->window = now;
		l->in_window = l->suppressed = 0;
	}
	if (++l->in_window > 5) {
		l->suppressed++;
		return false;
	}
	return true;
}

void log_limited(const char *fmt, ...)
{
	static struct limiter warnings;
	va_list ap;

	if (!limiter_admits(&warnings, LOG_WARNING))
		return;
	va_start(ap, fmt);
	vlog(LOG_WARNING, fmt, ap);
	va_end(ap);
}

void log_limited_debug(const char *fmt, ...)
{
	static struct limiter debug;
	va_list ap;

	if (!debug_on || !limiter_admits(&debug, LOG_DEBUG))
		return;
	va_start(ap, fmt);
	vlog(LOG_DEBUG, fmt, ap);
	va_end(ap);
}
