/* The link's state as the kernel tells it: an rtnetlink socket subscribed to link changes
 * (RTMGRP_LINK). When our interface turns running (up, with carrier) or stops, the port's
 * on_link hook hears it at once, so the device can tell its clients as a kernel device
 * raises IBV_EVENT_PORT_ACTIVE and IBV_EVENT_PORT_ERR. */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/port/port.h"
#include "wire/rtnl.h"

static void link_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct port *port = w->data;
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	bool running = port->link_running, told;
	ssize_t n;

	(void)loop;
	(void)revents;
	while ((n = recv(port->link_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		rtnl_link_state(buf, (size_t)n, port->ifindex, &running);
	/* messages lost to a full socket buffer: the kernel's word is asked instead */
	if (n < 0 && errno == ENOBUFS)
		running = net_link_up(port);
	told = running != port->link_running;
	port->link_running = running;
	if (told && port->on_link)
		port->on_link(port->link_ctx, running);
}

int link_watch_open(struct port *port, char *err, size_t errlen)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };

	port->link_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
	if (port->link_fd < 0 || bind(port->link_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(err, errlen, "cannot watch the link's state over rtnetlink: %s",
			 strerror(errno));
		return -1;
	}
	port->link_running = net_link_up(port);
	ev_io_init(&port->link_watcher, link_cb, port->link_fd, EV_READ);
	port->link_watcher.data = port;
	ev_io_start(port->loop, &port->link_watcher);
	return 0;
}

void link_watch_close(struct port *port)
{
	if (port->link_fd < 0)
		return;
	ev_io_stop(port->loop, &port->link_watcher);
	close(port->link_fd);
	port->link_fd = -1;
}
