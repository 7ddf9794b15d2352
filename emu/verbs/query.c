/* The device's attributes, its port, and its one GID and P_Key: what rxe reports wherever
 * rocemu has the same, the daemon's own limits elsewhere. */
#include "emu/verbs/verbs_int.h"
#include "emu/proto.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* verbs.h wraps it in a macro; here it is the exported function itself. */
#undef ibv_query_port

static void fill_device_attr(const struct rv_context *ctx, struct ibv_device_attr *a)
{
	const struct rocemu_device_attr *d = &ctx->attr;

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", RV_FW_VER);
	a->node_guid = ctx->dev->guid;
	a->sys_image_guid = ctx->dev->guid;
	a->max_mr_size = d->max_mr_size;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0xffffff;        /* rxe's: no vendor */
	a->max_qp = (int)d->max_qp;
	a->max_qp_wr = (int)d->max_qp_wr;
	/* rxe's flags for what rocemu does too: memory windows of type 1 and 2B */
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = (int)d->max_sge;
	a->max_sge_rd = (int)d->max_sge;
	a->max_cq = (int)d->max_srq;    /* one limit on CQs, QPs and SRQs of a context */
	a->max_cqe = (int)d->max_cqe;
	a->max_mr = (int)d->max_mr;
	a->max_mw = (int)d->max_mr;     /* MRs and MWs share the daemon's key space */
	a->max_pd = (int)d->max_srq;
	a->max_qp_rd_atom = (int)d->max_qp_rd_atom;
	a->max_qp_init_rd_atom = (int)d->max_qp_rd_atom;
	a->max_res_rd_atom = (int)(d->max_qp_rd_atom * d->max_qp);
	a->atomic_cap = d->atomic_cap;
	a->max_srq = (int)d->max_srq;
	a->max_srq_wr = (int)d->max_srq_wr;
	a->max_srq_sge = (int)d->max_sge;
	a->max_pkeys = 1;
	a->max_ah = 32767;              /* the daemon's limit per connection */
	a->max_mcast_grp = PROTO_MAX_MCAST_GRP;    /* rxe's, enforced by the daemon */
	a->max_mcast_qp_attach = PROTO_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = PROTO_MAX_TOTAL_MCAST_QP_ATTACH;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

int ibv_query_device(struct ibv_context *ibctx, struct ibv_device_attr *attr)
{
	fill_device_attr(rv_ctx(ibctx), attr);
	return 0;
}

int rv_query_device_ex(struct ibv_context *ibctx, const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex ex;

	if (in && in->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(ex.orig_attr))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	fill_device_attr(rv_ctx(ibctx), &ex.orig_attr);
	ex.phys_port_cnt_ex = ex.orig_attr.phys_port_cnt;
	/* the kernel's full set, as libibverbs copies it here: the flags above, and what
	 * rdma-core 45 names IB_UVERBS_DEVICE_FLUSH_GLOBAL and _ATOMIC_WRITE (no persistence:
	 * no rocemu memory is pmem) */
	ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags | RV_DEVICE_FLUSH_GLOBAL |
				 RV_DEVICE_ATOMIC_WRITE;
	memcpy(attr, &ex, attr_size < sizeof(ex) ? attr_size : sizeof(ex));
	return 0;
}

/* The MTUs and the state come from the daemon (which derives the MTU from the link as rxe
 * does); the rest is what rxe reports for every port. */
void rv_fill_port_attr(const struct rocemu_port_attr *port, struct ibv_port_attr *a)
{
	bool up = port->state == IBV_PORT_ACTIVE;

	memset(a, 0, sizeof(*a));
	a->state = port->state;
	a->max_mtu = port->max_mtu;
	a->active_mtu = port->active_mtu;
	a->gid_tbl_len = ROCEMU_MAX_GIDS;  /* the daemon's table; the entries past its GIDs are empty */
	a->port_cap_flags = 0;
	a->max_msg_sz = 1U << 31;
	a->pkey_tbl_len = 1;
	a->max_vl_num = 1;
	a->active_width = 1;            /* 1X */
	a->active_speed = 1;            /* SDR: what older rxe reports too */
	a->phys_state = up ? 5 : 3;     /* LinkUp, Disabled */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

/* The port is asked again each time: its state follows the link. */
static int refresh_port(struct rv_context *ctx)
{
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = rocemu_query_port(ctx->rc, &ctx->port);
	pthread_mutex_unlock(&ctx->lock);
	return err ? rv_fail(ctx, err, "ibv_query_port") : 0;
}

int rv_query_port(struct ibv_context *ibctx, uint8_t port, struct ibv_port_attr *attr,
		  size_t attr_len)
{
	struct rv_context *ctx = rv_ctx(ibctx);
	struct ibv_port_attr full;
	int err;

	if (port != RV_PORT)
		return EINVAL;
	err = refresh_port(ctx);
	if (err)
		return err;
	rv_fill_port_attr(&ctx->port, &full);
	memcpy(attr, &full, attr_len < sizeof(full) ? attr_len : sizeof(full));
	return 0;
}

/* The exported call takes the layout of rdma-core 1.1, which ends before the fields
 * added since (flags, port_cap_flags2): the program's struct may be that short. */
int ibv_query_port(struct ibv_context *ibctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	return rv_query_port(ibctx, port, (struct ibv_port_attr *)attr,
			     offsetof(struct ibv_port_attr, flags));
}

/* An index of the table whose GID is not there (the daemon serves fewer addresses) is
 * ENODATA, as for a kernel device's empty entry; past the table, EINVAL. */
static int gid_entry(struct rv_context *ctx, uint32_t port, uint32_t index,
		     struct ibv_gid_entry *e)
{
	if (port != RV_PORT || index >= ROCEMU_MAX_GIDS)
		return EINVAL;
	if (index >= ctx->port.gid_count)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	e->gid = ctx->port.gids[index];
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	return 0;
}

/* An empty entry reads as the zero GID, as libibverbs keeps it for every device. */
int ibv_query_gid(struct ibv_context *ibctx, uint8_t port, int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int err = index < 0 ? EINVAL : gid_entry(rv_ctx(ibctx), port, (uint32_t)index, &e);

	if (err == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (err) {
		errno = err;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *ibctx, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
int _ibv_query_gid_ex(struct ibv_context *ibctx, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	int err;

	if (flags || entry_size < sizeof(e))
		return EINVAL;
	err = gid_entry(rv_ctx(ibctx), port, index, &e);
	if (!err)
		*entry = e;
	return err;
}

ssize_t _ibv_query_gid_table(struct ibv_context *ibctx, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size);
ssize_t _ibv_query_gid_table(struct ibv_context *ibctx, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct rv_context *ctx = rv_ctx(ibctx);

	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < ctx->port.gid_count)
		return -EINVAL;
	for (uint32_t i = 0; i < ctx->port.gid_count; i++)
		gid_entry(ctx, RV_PORT, i, &entries[i]);
	return (ssize_t)ctx->port.gid_count;
}

/* libibverbs' private call that ibv_devinfo uses; its enum (driver.h, not installed) has
 * 0 for IB/RoCE v1 and 1 for RoCE v2. */
#define GID_TYPE_SYSFS_ROCE_V2 1
int ibv_query_gid_type(struct ibv_context *ibctx, uint8_t port, unsigned int index,
		       int *type);
int ibv_query_gid_type(struct ibv_context *ibctx, uint8_t port, unsigned int index,
		       int *type)
{
	struct ibv_gid_entry e;
	int err = gid_entry(rv_ctx(ibctx), port, index, &e);

	if (err) {
		errno = err;
		return -1;
	}
	*type = GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

int ibv_query_pkey(struct ibv_context *ibctx, uint8_t port, int index, __be16 *pkey)
{
	(void)ibctx;
	if (port != RV_PORT || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *ibctx, uint8_t port, __be16 pkey)
{
	(void)ibctx;
	return port == RV_PORT && (be16toh(pkey) & 0x7fff) == 0x7fff ? 0 : -EINVAL;
}
