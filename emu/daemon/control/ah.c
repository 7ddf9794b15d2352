/* Address handles: a UD peer's path, checked and resolved once when the handle is made, so
 * every datagram sent through it only copies it. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/daemon/control/control.h"

static const uint8_t unspecified[16];

static int check_request(struct client *c, const struct proto_create_ah *m, char *err,
			 size_t errlen)
{
	if (!handle_get(&c->pds, m->pd)) {
		snprintf(err, errlen, "no PD %u", m->pd);
		return -EINVAL;
	}
	if (c->ahs.count >= CLIENT_MAX_AH) {
		snprintf(err, errlen, "this connection holds %u address handles, the most it may",
			 CLIENT_MAX_AH);
		return -ENOMEM;
	}
	if (m->sgid_index >= c->own.dev->port.ngids) {
		snprintf(err, errlen, "source GID index %u: the port has %u GIDs", m->sgid_index,
			 c->own.dev->port.ngids);
		return -EINVAL;
	}
	if (!memcmp(m->dgid, unspecified, 16) ||
	    (addr_gid_is_ipv4(m->dgid) && !memcmp(m->dgid + 12, unspecified, 4))) {
		snprintf(err, errlen, "the destination GID is an unspecified address");
		return -EINVAL;
	}
	if (addr_gid_is_ipv4(m->dgid) == c->own.dev->port.gids[m->sgid_index].ipv6) {
		snprintf(err, errlen, "the destination GID is %s but source GID %u is not: "
			 "RoCEv2 does not cross IP versions",
			 addr_gid_is_ipv4(m->dgid) ? "IPv4" : "IPv6", m->sgid_index);
		return -EINVAL;
	}
	if (m->flow_label > 0xfffff) {
		snprintf(err, errlen, "flow label 0x%x is wider than 20 bits", m->flow_label);
		return -EINVAL;
	}
	return 0;
}

/* The peer's MAC address; a request that waits for it (-EINPROGRESS) is made again. */
static int resolve_peer(struct client *c, const struct proto_create_ah *m, uint8_t mac[6],
			char *err, size_t errlen)
{
	char ip[INET6_ADDRSTRLEN];
	int rc = neigh_resolve(&c->own.neigh, m->dgid, mac);

	if (rc == -EHOSTUNREACH)
		snprintf(err, errlen, "no neighbour %s on %s: is the peer up and on this link?",
			 addr_str(m->dgid, ip, sizeof(ip)), c->own.dev->port.ifname);
	return rc;
}

/* The IPv6 header's flow label stays 0, as rxe sends it; the AH's picks the source port.
 * The AH's hop limit is not used: the kernel replaces a user AH's with the route's, so
 * rxe's datagrams carry the route's TTL whatever the program asked. */
static void fill_path(struct dev *dev, const struct proto_create_ah *m, const uint8_t mac[6],
		      struct ah *ah)
{
	struct wire_path *p = &ah->path;

	qp_path_between(p, dev, dev->port.gids[m->sgid_index].raw, m->dgid, mac);
	p->tos = cc_tos(dev, m->traffic_class);
	ah->flow_label = m->flow_label;
}

struct ah *ah_create(struct client *c, const struct proto_create_ah *m, int *rc, char *err,
		     size_t errlen)
{
	uint8_t mac[6];
	struct ah *ah;

	*rc = check_request(c, m, err, errlen);
	if (!*rc)
		*rc = resolve_peer(c, m, mac, err, errlen);
	if (*rc)
		return NULL;
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		*rc = -ENOMEM;
		return NULL;
	}
	ah->owner = &c->own;
	ah->pd = handle_get(&c->pds, m->pd);
	fill_path(c->own.dev, m, mac, ah);
	*rc = handle_add(&c->ahs, ah, &ah->handle);
	if (*rc) {
		free(ah);
		return NULL;
	}
	return ah;
}

void ah_destroy(struct ah *ah)
{
	handle_del(&client_of(ah->owner)->ahs, ah->handle);
	free(ah);
}

bool ah_pd_has_any(struct client *c, const struct mr_pd *pd)
{
	for (uint32_t h = 1; h < c->ahs.cap; h++) {
		const struct ah *ah = c->ahs.items[h];

		if (ah && ah->pd == pd)
			return true;
	}
	return false;
}

const struct ah *ah_find(struct owner *own, uint32_t handle)
{
	return handle_get(&client_of(own)->ahs, handle);
}
