/* The rocemu devices as the rdma_cm layer sees them: each opened once through the verbs
 * layer, with a default PD, as librdmacm opens every device it finds; the one whose daemon
 * serves an address. */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "emu/rdmacm/rdmacm.h"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rcm_device devices[RCM_MAX_DEVICES];
static int ndevices = -1;

static void open_all(void)
{
	struct ibv_device **list;
	int n = 0;

	ndevices = 0;
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && ndevices < RCM_MAX_DEVICES; i++) {
		struct ibv_context *verbs = ibv_open_device(list[i]);
		struct rcm_device *d = &devices[ndevices];

		if (!verbs)
			continue;
		d->verbs = verbs;
		d->rv = rv_ctx(verbs);
		d->pd = ibv_alloc_pd(verbs);
		if (!d->pd) {
			ibv_close_device(verbs);
			continue;
		}
		d->abi.verbs = verbs;
		d->abi.pd = d->pd;
		d->abi.port_cnt = 1;
		d->abi.max_qpsize = d->rv->attr.max_qp_wr;
		d->abi.max_initiator_depth = (uint8_t)d->rv->attr.max_qp_rd_atom;
		d->abi.max_responder_resources = (uint8_t)d->rv->attr.max_qp_rd_atom;
		ndevices++;
	}
	if (list)
		ibv_free_device_list(list);
}

/* Devices that appear later (a daemon started after the program) are not seen: librdmacm
 * also reads its device list once. */
int rcm_devices(struct rcm_device **devs)
{
	pthread_mutex_lock(&devices_lock);
	if (ndevices < 0)
		open_all();
	pthread_mutex_unlock(&devices_lock);
	*devs = devices;
	return ndevices;
}

struct rcm_device *rcm_device_of_gid(const uint8_t gid[16])
{
	struct rcm_device *devs;
	int n = rcm_devices(&devs);

	for (int i = 0; i < n; i++) {
		const struct rocemu_port_attr *p = &devs[i].rv->port;

		for (unsigned g = 0; g < p->gid_count && g < ROCEMU_MAX_GIDS; g++)
			if (!memcmp(p->gids[g].raw, gid, 16))
				return &devs[i];
	}
	return NULL;
}

struct rcm_device *rcm_device_of(const struct sockaddr *addr)
{
	uint8_t gid[16];

	rcm_addr_gid(addr, gid);
	return rcm_device_of_gid(gid);
}

int rcm_device_ifindex(struct rcm_device *d)
{
	if (!d->ifindex) {
		unsigned index = if_nametoindex(d->rv->port.ifname);

		d->ifindex = index ? (int)index : -1;
	}
	return d->ifindex > 0 ? d->ifindex : 0;
}

int rcm_request(struct rcm_device *d, void *req, size_t len, void *reply, size_t reply_len,
		int fd)
{
	int err;

	pthread_mutex_lock(&d->rv->lock);
	err = rocemu_cm_request(d->rv->rc, req, len, reply, reply_len, fd);
	pthread_mutex_unlock(&d->rv->lock);
	if (err)
		rv_fail(d->rv, err, "rdma_cm");
	return err;
}

void rcm_post(struct rcm_device *d, void *req, size_t len)
{
	int err;

	pthread_mutex_lock(&d->rv->lock);
	err = rocemu_cm_post(d->rv->rc, req, len);
	pthread_mutex_unlock(&d->rv->lock);
	if (err)
		rv_fail(d->rv, err, "rdma_cm");
}

uint32_t rcm_max_rd_atomic(const struct rcm_device *d)
{
	return d->rv->attr.max_qp_rd_atom;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct rcm_device *devs;
	int n = rcm_devices(&devs);
	struct ibv_context **list = calloc((size_t)n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = devs[i].verbs;
	if (num_devices)
		*num_devices = n;
	return list;
}

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
