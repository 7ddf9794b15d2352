/* The control socket as rocemuctl uses it: connect, say hello, one request at a time. */
#ifndef ROCEMU_CTL_CLIENT_H
#define ROCEMU_CTL_CLIENT_H

#include <stddef.h>

/* The socket to use: path, else $ROCEMU_SOCKET, else the only one in /run/rocemu. Returns
 * a connected fd, or -1 with a message naming the socket and how to start rocemud. */
int ctl_connect(const char *path, char *err, size_t errlen);
/* Sends req (req_len bytes), receives at most rep_len bytes; returns the daemon's status
 * (0 or a negative errno), with its explanation in err, or -EPIPE when it went away. */
int ctl_call(int fd, const void *req, size_t req_len, void *rep, size_t rep_len, char *err,
	     size_t errlen);

#endif
