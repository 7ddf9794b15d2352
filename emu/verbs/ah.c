/* Address handles for UD QPs, and the two calls that make one from a received datagram:
 * its GRH area says who sent it, through which of our addresses. */
#include "emu/verbs/verbs_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define GRH_IPV4_OFFSET 20      /* an IPv4 datagram's header sits after 20 unused bytes */
#define ROUTE_HOP_LIMIT 0xff    /* what rdma-core puts in an AH made from a completion */

/* The flow label is taken as the kernel takes it: its 20 bits, the rest ignored (UCX puts
 * ~0 there on RoCE, and only the low 20 bits pick the UDP source port, on rxe as here). */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct rv_context *ctx = rv_ctx(pd->context);
	struct ibv_ah_attr a = *attr;
	struct rocemu_ah *ah;

	a.grh.flow_label &= 0xfffff;
	pthread_mutex_lock(&ctx->lock);
	ah = rocemu_create_ah(rv_pd(pd)->pd, &a);
	if (!ah)
		errno = rv_fail(ctx, errno, "ibv_create_ah");
	pthread_mutex_unlock(&ctx->lock);
	if (!ah)
		return NULL;
	ah->ibv.context = pd->context;
	ah->ibv.pd = pd;
	return &ah->ibv;
}

int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct rv_context *ctx = rv_ctx(ibah->context);
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_destroy_ah((struct rocemu_ah *)ibah);
	pthread_mutex_unlock(&ctx->lock);
	return err ? rv_fail(ctx, err, "ibv_destroy_ah") : 0;
}

/* Which of the port's GIDs is gid: the source GID index of a reply. */
static int own_gid_index(const struct rv_context *ctx, const union ibv_gid *gid)
{
	for (unsigned i = 0; i < ctx->port.gid_count; i++)
		if (!memcmp(gid, &ctx->port.gids[i], sizeof(*gid)))
			return (int)i;
	return -1;
}

static void v4_mapped(union ibv_gid *gid, const uint8_t addr[4])
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = gid->raw[11] = 0xff;
	memcpy(gid->raw + 12, addr, 4);
}

/* The reply's addresses and IP fields from the datagram's: its source is our destination,
 * its destination names our source GID. */
static int from_grh(struct rv_context *ctx, const uint8_t *grh, struct ibv_ah_attr *ah)
{
	const uint8_t *ip4 = grh + GRH_IPV4_OFFSET;
	union ibv_gid ours;
	int index;

	if (grh[0] >> 4 == 6) {
		uint32_t vtf = (uint32_t)grh[0] << 24 | (uint32_t)grh[1] << 16 |
			       (uint32_t)grh[2] << 8 | grh[3];

		memcpy(ah->grh.dgid.raw, grh + 8, 16);
		memcpy(ours.raw, grh + 24, 16);
		ah->grh.traffic_class = (uint8_t)(vtf >> 20);
		ah->grh.flow_label = vtf & 0xfffff;
	} else if (ip4[0] >> 4 == 4) {
		v4_mapped(&ah->grh.dgid, ip4 + 12);
		v4_mapped(&ours, ip4 + 16);
		ah->grh.traffic_class = ip4[1];
	} else {
		return rv_refuse(EINVAL, "ibv_init_ah_from_wc", "the GRH area holds neither an "
				 "IPv4 nor an IPv6 header");
	}
	index = own_gid_index(ctx, &ours);
	if (index < 0)
		return rv_refuse(EINVAL, "ibv_init_ah_from_wc", "the datagram was not sent to "
				 "one of this port's GIDs");
	ah->grh.sgid_index = (uint8_t)index;
	ah->grh.hop_limit = ROUTE_HOP_LIMIT;
	return 0;
}

int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port_num, struct ibv_wc *wc,
			struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->port_num = port_num;
	ah_attr->sl = wc->sl;
	ah_attr->is_global = 1;
	if (port_num != RV_PORT || !(wc->wc_flags & IBV_WC_GRH) || !grh)
		return rv_refuse(EINVAL, "ibv_init_ah_from_wc", "RoCE needs the completion's GRH "
				 "(IBV_WC_GRH) and port 1");
	return from_grh(rv_ctx(c), (const uint8_t *)grh, ah_attr);
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port_num)
{
	struct ibv_ah_attr attr;
	int err = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr);

	if (err) {
		errno = err;
		return NULL;
	}
	return ibv_create_ah(pd, &attr);
}
