/* The control requests of RDMA CM: each is checked here for what the client may name, then
 * handed to the CM (cm/cm.h). A connect whose peer's MAC address the kernel does not know
 * yet waits for it as an address handle does (-EINPROGRESS: the request is made again). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/daemon/cm/cm.h"
#include "emu/daemon/control/ctl.h"

static int fail(struct ctl_reply *rep, int rc, const char *err)
{
	if (rc < 0 && err[0])
		op_error(rep, "%s", err);
	else if (rc < 0)
		op_error(rep, "%s", strerror(-rc));
	return rc;
}

/* The channel's descriptor must be a socket the daemon can write messages to. */
static bool is_seqpacket(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

#define FEW_CHANNELS 4

/* The daemon keeps a copy of the channel's socket (close-on-exec, as every descriptor it
 * holds: it spawns nft); a client that holds a few channels already may not take the last
 * FD_RESERVE descriptors. */
int op_cm_channel(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	uint32_t handle;
	int fd, rc;

	if (!is_seqpacket(req->fd)) {
		op_error(rep, "a CM channel is a SOCK_SEQPACKET socket");
		return -EINVAL;
	}
	if (cm_owner_channels(c->own.dev->cm, &c->own) >= FEW_CHANNELS &&
	    ctl_free_descriptors() < FD_RESERVE) {
		op_error(rep, "rocemud is short of file descriptors (raise its LimitNOFILE); "
			 "this client holds %u CM channels", cm_owner_channels(c->own.dev->cm, &c->own));
		return -EMFILE;
	}
	fd = fcntl(req->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return fail(rep, -errno, "");
	rc = cm_channel_open(c->own.dev->cm, &c->own, fd, &handle);
	if (rc) {
		close(fd);
		return fail(rep, rc, "");
	}
	REP(proto_handle_reply)->handle = handle;
	return 0;
}

int op_cm_close_channel(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	return fail(rep, cm_channel_close(c->own.dev->cm, &c->own, REQ(proto_handle)->handle),
		    "no such CM channel");
}

int op_cm_listen(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	char err[PROTO_ERRMSG] = "";
	uint32_t handle;
	int rc = cm_listen(c->own.dev->cm, &c->own, REQ(proto_cm_listen), &handle, err,
			   sizeof(err));

	if (rc)
		return fail(rep, rc, err);
	REP(proto_handle_reply)->handle = handle;
	return 0;
}

int op_cm_unlisten(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	return fail(rep, cm_unlisten(c->own.dev->cm, &c->own, REQ(proto_handle)->handle),
		    "no such listener");
}

/* A peer address worth asking the neighbour table about: specified, and of an IP version
 * the daemon serves (sgid, when given, must be one of its addresses, of the same version). */
static int check_peer(struct client *c, const uint8_t *sgid, const uint8_t dgid[16],
		      struct ctl_reply *rep)
{
	static const uint8_t unspecified[16];
	struct port *port = &c->own.dev->port;
	bool v4 = addr_gid_is_ipv4(dgid);
	bool served = false;

	if (!memcmp(dgid, unspecified, 16) || (v4 && !memcmp(dgid + 12, unspecified, 4))) {
		op_error(rep, "the destination is an unspecified address");
		return -EINVAL;
	}
	for (unsigned i = 0; i < port->ngids; i++)
		served |= port->gids[i].ipv6 != v4;
	if (!served || (sgid && (addr_find(port, sgid) < 0 || addr_gid_is_ipv4(sgid) != v4))) {
		op_error(rep, "the source is not an address of this device of the destination's "
			 "IP version");
		return -EINVAL;
	}
	return 0;
}

static void no_neighbour(struct client *c, const uint8_t gid[16], struct ctl_reply *rep)
{
	char ip[INET6_ADDRSTRLEN];

	op_error(rep, "no neighbour %s on %s", addr_str(gid, ip, sizeof(ip)),
		 c->own.dev->port.ifname);
}

/* The peer's MAC address, waited for without stopping the loop. */
static int resolve(struct client *c, const uint8_t gid[16], uint8_t mac[6], struct ctl_reply *rep)
{
	int rc = neigh_resolve(&c->own.neigh, gid, mac);

	if (rc == -EHOSTUNREACH)
		no_neighbour(c, gid, rep);
	return rc;
}

int op_cm_resolve(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_cm_resolve *m = REQ(proto_cm_resolve);
	uint8_t mac[6];
	int rc = check_peer(c, NULL, m->dgid, rep);

	if (rc)
		return rc;
	if (!m->no_wait)
		return resolve(c, m->dgid, mac, rep);
	rc = neigh_resolve(&c->own.neigh, m->dgid, mac);
	if (rc == -EINPROGRESS) {
		/* the kernel was asked; this connection waits for nothing */
		neigh_stop(&c->own.neigh);
		op_error(rep, "the neighbour is not known yet");
		return -EWOULDBLOCK;
	}
	if (rc == -EHOSTUNREACH)
		no_neighbour(c, m->dgid, rep);
	return rc;
}

int op_cm_connect(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_cm_connect *m = REQ(proto_cm_connect);
	char err[PROTO_ERRMSG] = "";
	uint8_t mac[6];
	uint32_t conn;
	int rc = check_peer(c, m->sgid, m->dgid, rep);

	if (!rc)
		rc = resolve(c, m->dgid, mac, rep);
	if (rc)
		return rc;
	rc = cm_connect(c->own.dev->cm, &c->own, m, mac, &conn, err, sizeof(err));
	if (rc)
		return fail(rep, rc, err);
	REP(proto_handle_reply)->handle = conn;
	return 0;
}

int op_cm_accept(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	char err[PROTO_ERRMSG] = "";

	return fail(rep, cm_accept(c->own.dev->cm, &c->own, REQ(proto_cm_accept), err,
				   sizeof(err)), err);
}

int op_cm_reject(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	char err[PROTO_ERRMSG] = "";

	return fail(rep, cm_reject(c->own.dev->cm, &c->own, REQ(proto_cm_reject), err,
				   sizeof(err)), err);
}

int op_cm_establish(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	char err[PROTO_ERRMSG] = "";

	return fail(rep, cm_establish(c->own.dev->cm, &c->own, REQ(proto_handle)->handle, err,
				      sizeof(err)), err);
}

int op_cm_disconnect(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	char err[PROTO_ERRMSG] = "";

	return fail(rep, cm_disconnect(c->own.dev->cm, &c->own, REQ(proto_handle)->handle, err,
				       sizeof(err)), err);
}

int op_cm_destroy(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	return fail(rep, cm_destroy(c->own.dev->cm, &c->own, REQ(proto_handle)->handle),
		    "no such connection");
}

int op_cm_migrate(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	return fail(rep, cm_migrate(c->own.dev->cm, &c->own, REQ(proto_cm_migrate)),
		    "no such connection, listener or channel");
}
