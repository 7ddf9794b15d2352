/* rocemud's log: to syslog, or to stderr in the foreground. Only main.c and the layers'
 * edges log; the libraries below return errors instead. */
#ifndef ROCEMU_DAEMON_LOG_H
#define ROCEMU_DAEMON_LOG_H

#include <stdbool.h>

void log_init(bool to_stderr, bool verbose);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* At most a few lines a second for anything a remote peer or a client can trigger. */
void log_limited(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same at debug level (-v): what a peer's packets make the transport refuse. */
void log_limited_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
