/* Address handles: a UD peer's path, checked and resolved once when the handle is made, so
 * every datagram sent through it only copies it. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/daemon/daemon.h"

#define DEFAULT_HOP_LIMIT 64

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

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
	if (m->sgid_index != 0) {
		snprintf(err, errlen, "source GID index %u: this port has GID 0 only",
			 m->sgid_index);
		return -EINVAL;
	}
	if (memcmp(m->dgid, v4_mapped_prefix, sizeof(v4_mapped_prefix)) ||
	    !memcmp(m->dgid + 12, "\0\0\0\0", 4)) {
		snprintf(err, errlen, "destination GID is not an IPv4-mapped address "
			 "(::ffff:a.b.c.d); IPv6 GIDs are not served yet");
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
	char ip[INET_ADDRSTRLEN];
	uint32_t ipv4;
	int rc;

	memcpy(&ipv4, m->dgid + 12, 4);
	rc = neigh_resolve(c, ipv4, mac);
	if (rc == -EHOSTUNREACH) {
		inet_ntop(AF_INET, &ipv4, ip, sizeof(ip));
		snprintf(err, errlen, "no neighbour %s on %s: is the peer up and on this link?",
			 ip, c->dev->ifname);
	}
	return rc;
}

static void fill_path(struct dev *dev, const struct proto_create_ah *m, const uint8_t mac[6],
		      struct ah *ah)
{
	struct wire_path *p = &ah->path;

	memcpy(&p->dst_ip, m->dgid + 12, 4);
	memcpy(p->dst_mac, mac, 6);
	memcpy(p->src_mac, dev->mac, 6);
	p->src_ip = dev->ipv4;
	p->tos = m->traffic_class;
	p->ttl = m->hop_limit ? m->hop_limit : DEFAULT_HOP_LIMIT;
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
	ah->client = c;
	ah->pd = handle_get(&c->pds, m->pd);
	fill_path(c->dev, m, mac, ah);
	*rc = handle_add(&c->ahs, ah, &ah->handle);
	if (*rc) {
		free(ah);
		return NULL;
	}
	return ah;
}

void ah_destroy(struct ah *ah)
{
	handle_del(&ah->client->ahs, ah->handle);
	free(ah);
}

bool pd_has_ahs(struct client *c, const struct mr_pd *pd)
{
	for (uint32_t h = 1; h < c->ahs.cap; h++) {
		const struct ah *ah = c->ahs.items[h];

		if (ah && ah->pd == pd)
			return true;
	}
	return false;
}
