#include "tools/ctl_client.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/rocemu.h"

static int default_socket(char *path, size_t len, char *err, size_t errlen)
{
	DIR *d = opendir(ROCEMU_DEFAULT_SOCKET_DIR);
	struct dirent *e;
	int found = 0;

	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n <= 5 || strcmp(e->d_name + n - 5, ".sock"))
			continue;
		if (found++ == 0 &&
		    snprintf(path, len, "%s/%s", ROCEMU_DEFAULT_SOCKET_DIR, e->d_name) >= (int)len)
			found = 2; /* a name too long to connect to: make the user name the socket */
	}
	if (d)
		closedir(d);
	if (found == 1)
		return 0;
	snprintf(err, errlen, found ? "several daemons in %s: name one with -s SOCKET" :
		 "no rocemud socket in %s: start one with 'rocemud -i IFACE', or name its "
		 "socket with -s SOCKET", ROCEMU_DEFAULT_SOCKET_DIR);
	return -1;
}

int ctl_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .hdr.op = PROTO_HELLO, .version = PROTO_VERSION };
	struct proto_hello_reply rep;
	const char *env = getenv("ROCEMU_SOCKET");
	int fd;

	if (!path && env && *env)
		path = env;
	if (path)
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	else if (default_socket(sun.sun_path, sizeof(sun.sun_path), err, errlen) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		snprintf(err, errlen, "cannot reach rocemud at %s: %s (is it running? start it "
			 "with 'rocemud -i IFACE -s %s')", sun.sun_path, strerror(errno),
			 sun.sun_path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (ctl_call(fd, &hello, sizeof(hello), &rep, sizeof(rep), err, errlen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int ctl_call(int fd, const void *req, size_t req_len, void *rep, size_t rep_len, char *err,
	     size_t errlen)
{
	struct proto_reply *r = rep;
	ssize_t n;

	if (send(fd, req, req_len, MSG_NOSIGNAL) != (ssize_t)req_len ||
	    (n = recv(fd, rep, rep_len, 0)) < (ssize_t)sizeof(struct proto_reply)) {
		snprintf(err, errlen, "rocemud went away");
		return -EPIPE;
	}
	if (r->hdr.status < 0)
		snprintf(err, errlen, "%.*s", (int)sizeof(r->errmsg),
			 r->errmsg[0] ? r->errmsg : strerror(-r->hdr.status));
	return r->hdr.status;
}
