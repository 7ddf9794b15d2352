/* What the verbs layer tells the user. A failing call sets errno and returns, as on a
 * kernel device, and says nothing: a program's stderr is its own (libfabric, for one,
 * probes limits by creating QPs that fail). With ROCEMU_DEBUG=1 the daemon's reason for
 * each failure goes to stderr, one line each, and each unsupported feature is named once. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMED 64

static bool quiet(void)
{
	const char *d = getenv("ROCEMU_DEBUG");

	return !d || !d[0] || strcmp(d, "0") == 0;
}

void rv_warn(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (quiet())
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rocemu: %s\n", line);   /* one write: threads do not interleave */
}

int rv_fail(struct rv_context *ctx, int err, const char *what)
{
	const char *why = ctx && ctx->rc ? rocemu_last_error(ctx->rc) : "";

	rv_warn("%s failed: %s%s%s", what, strerror(err), why[0] ? ": " : "", why);
	return err;
}

int rv_refuse(int err, const char *what, const char *why)
{
	rv_warn("%s: %s", what, why);
	return err;
}

/* Names already reported, compared by address: every caller passes a string literal. */
static const char *named[MAX_NAMED];
static unsigned nnamed;
static pthread_mutex_t named_lock = PTHREAD_MUTEX_INITIALIZER;

static bool first_time(const char *what)
{
	bool first = true;

	pthread_mutex_lock(&named_lock);
	for (unsigned i = 0; i < nnamed && first; i++)
		first = named[i] != what;
	if (first && nnamed < MAX_NAMED)
		named[nnamed++] = what;
	pthread_mutex_unlock(&named_lock);
	return first;
}

int rv_unsupported(const char *what, const char *why)
{
	if (first_time(what))
		rv_warn("%s: not supported: %s", what, why);
	return EOPNOTSUPP;
}

void *rv_unsupported_null(const char *what, const char *why)
{
	errno = rv_unsupported(what, why);
	return NULL;
}
