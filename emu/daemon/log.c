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

static void vlog(int prio, const char *fmt, va_list ap)
{
	if (use_stderr) {
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

void log_limited(const char *fmt, ...)
{
	static time_t window;
	static unsigned in_window, suppressed;
	time_t now = time(NULL);
	va_list ap;

	if (now != window) {
		if (suppressed)
			log_warn("(%u similar messages suppressed)", suppressed);
		window = now;
		in_window = suppressed = 0;
	}
	if (++in_window > 5) {
		suppressed++;
		return;
	}
	va_start(ap, fmt);
	vlog(LOG_WARNING, fmt, ap);
	va_end(ap);
}
