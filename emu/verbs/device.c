/* Devices and contexts: one verbs device per reachable rocemud, named after the interface
 * it serves (rocemu_eth0), with rxe's identity (node GUID the EUI-64 of the MAC, transport
 * InfiniBand, link layer Ethernet, one port, one RoCE v2 GID: the daemon's IPv4 address).
 *
 * Which daemons: $ROCEMU_SOCKET alone when set (rocemu-run -D sets it), else every *.sock
 * in ROCEMU_DEFAULT_SOCKET_DIR that answers. Devices are never freed: libibverbs keeps
 * them alive while contexts use them, and a program may list again at any time. */
#include "emu/verbs/verbs_int.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* verbs.h wraps these two in macros; here they are the exported functions themselves. */
#undef ibv_get_device_list
#undef ibv_query_port

#define SOCK_SUFFIX ".sock"
#define RV_FW_VER "0.1"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rv_device *devices;

/* As rxe: the EUI-64 of the interface's MAC. */
static __be64 guid_from_mac(const uint8_t mac[6])
{
	uint8_t eui[8] = { mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5] };
	__be64 guid;

	memcpy(&guid, eui, sizeof(guid));
	return guid;
}

static bool name_taken(const char *name)
{
	for (struct rv_device *d = devices; d; d = d->next)
		if (strcmp(d->ibdev.name, name) == 0)
			return true;
	return false;
}

static void name_device(struct rv_device *d, const char *ifname)
{
	char name[IBV_SYSFS_NAME_MAX];

	snprintf(name, sizeof(name), "rocemu_%s", ifname);
	for (unsigned n = 1; name_taken(name) && n < 1000; n++)
		snprintf(name, sizeof(name), "rocemu_%.40s_%u", ifname, n);
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "%s", name);
}

/* The device for the daemon at path, made on first sight; NULL when it does not answer. */
static struct rv_device *device_at(const char *path)
{
	struct rocemu_port_attr port;
	struct rocemu_context *rc;
	struct rv_device *d;
	int err;

	for (d = devices; d; d = d->next)
		if (strcmp(d->socket, path) == 0)
			return d;
	rc = rocemu_open(path);
	if (!rc)
		return NULL;
	err = rocemu_query_port(rc, &port);
	rocemu_close(rc);
	d = err ? NULL : calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	snprintf(d->socket, sizeof(d->socket), "%s", path);
	d->guid = guid_from_mac(port.mac);
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	name_device(d, port.ifname);
	d->next = devices;
	devices = d;
	return d;
}

static bool is_socket_name(const char *name)
{
	size_t len = strlen(name), suffix = strlen(SOCK_SUFFIX);

	return len > suffix && strcmp(name + len - suffix, SOCK_SUFFIX) == 0;
}

/* Appends the device at path to list (room for one more is there). */
static void add_device(struct ibv_device **list, int *n, const char *path)
{
	struct rv_device *d = device_at(path);

	if (d)
		list[(*n)++] = &d->ibdev;
}

static int scan_dir(struct ibv_device ***list, int *n)
{
	DIR *dir = opendir(ROCEMU_DEFAULT_SOCKET_DIR);
	struct dirent *e;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int cap = 4;

	*list = calloc((size_t)cap + 1, sizeof(**list));
	if (!*list) {
		if (dir)
			closedir(dir);
		return ENOMEM;
	}
	while (dir && (e = readdir(dir)) != NULL) {
		if (!is_socket_name(e->d_name) ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", ROCEMU_DEFAULT_SOCKET_DIR,
				     e->d_name) >= sizeof(path))
			continue;
		if (*n == cap) {
			struct ibv_device **grown = realloc(*list, ((size_t)cap * 2 + 1) *
							    sizeof(**list));
			if (!grown)
				break;
			*list = grown;
			cap *= 2;
		}
		add_device(*list, n, path);
		(*list)[*n] = NULL;
	}
	if (dir)
		closedir(dir);
	return 0;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	const char *env = getenv("ROCEMU_SOCKET");
	struct ibv_device **list;
	int n = 0, err = 0;

	pthread_mutex_lock(&devices_lock);
	if (env && env[0]) {
		list = calloc(2, sizeof(*list));
		if (list)
			add_device(list, &n, env);
		else
			err = ENOMEM;
	} else {
		err = scan_dir(&list, &n);
	}
	pthread_mutex_unlock(&devices_lock);
	if (err) {
		errno = err;
		return NULL;
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	return ((struct rv_device *)device)->guid;
}

int ibv_get_device_index(struct ibv_device *device)
{
	int index = 0;

	pthread_mutex_lock(&devices_lock);
	for (struct rv_device *d = devices; d && &d->ibdev != device; d = d->next)
		index++;
	pthread_mutex_unlock(&devices_lock);
	return index;
}

static void set_ops(struct rv_context *ctx)
{
	struct verbs_context *v = &ctx->vctx;

	v->context.ops.poll_cq = rv_poll_cq;
	v->context.ops.req_notify_cq = rv_req_notify_cq;
	v->context.ops.post_send = rv_post_send;
	v->context.ops.post_recv = rv_post_recv;
	v->context.ops.post_srq_recv = rv_post_srq_recv;
	v->query_port = rv_query_port;
	v->query_device_ex = rv_query_device_ex;
	v->create_cq_ex = rv_create_cq_ex;
	v->create_qp_ex = rv_create_qp_ex;
	v->create_srq_ex = rv_create_srq_ex;
	rv_set_unsupported_ops(v);
	v->sz = sizeof(*v);
	v->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
}

static int context_connect(struct rv_context *ctx, struct rv_device *dev)
{
	int err;

	ctx->rc = rocemu_open(dev->socket);
	if (!ctx->rc)
		return errno;
	err = rocemu_query_device(ctx->rc, &ctx->attr);
	if (!err)
		err = rocemu_query_port(ctx->rc, &ctx->port);
	if (!err)
		err = rv_async_init(ctx);
	if (err)
		rocemu_close(ctx->rc);
	return err;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct rv_device *dev = (struct rv_device *)device;
	struct rv_context *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx)
		return NULL;
	err = context_connect(ctx, dev);
	if (err) {
		free(ctx);
		rv_warn("cannot open %s (the daemon at %s): %s", dev->ibdev.name, dev->socket,
			strerror(err));
		errno = err;
		return NULL;
	}
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	ctx->dev = dev;
	ctx->vctx.context.device = device;
	ctx->vctx.context.cmd_fd = -1;
	ctx->vctx.context.async_fd = ctx->async_ep;
	ctx->vctx.context.num_comp_vectors = 1;
	set_ops(ctx);
	return &ctx->vctx.context;
}

/* The daemon frees whatever the program did not destroy when the socket closes. */
int ibv_close_device(struct ibv_context *ibctx)
{
	struct rv_context *ctx = rv_ctx(ibctx);

	rocemu_close(ctx->rc);
	close(ctx->async_ep);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
	return 0;
}

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
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = (int)d->max_sge;
	a->max_sge_rd = (int)d->max_sge;
	a->max_cq = (int)d->max_srq;    /* one limit on CQs, QPs and SRQs of a context */
	a->max_cqe = (int)d->max_cqe;
	a->max_mr = (int)d->max_mr;
	a->max_pd = (int)d->max_srq;
	a->max_qp_rd_atom = (int)d->max_qp_rd_atom;
	a->max_qp_init_rd_atom = (int)d->max_qp_rd_atom;
	a->max_res_rd_atom = (int)(d->max_qp_rd_atom * d->max_qp);
	a->atomic_cap = d->atomic_cap;
	a->max_srq = (int)d->max_srq;
	a->max_srq_wr = (int)d->max_srq_wr;
	a->max_srq_sge = (int)d->max_sge;
	a->max_pkeys = 1;
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
	memcpy(attr, &ex, attr_size < sizeof(ex) ? attr_size : sizeof(ex));
	return 0;
}

/* The MTUs and the state come from the daemon (which derives the MTU from the link as rxe
 * does); the rest is what rxe reports for every port. */
static void fill_port_attr(const struct rv_context *ctx, struct ibv_port_attr *a)
{
	bool up = ctx->port.state == IBV_PORT_ACTIVE;

	memset(a, 0, sizeof(*a));
	a->state = ctx->port.state;
	a->max_mtu = ctx->port.max_mtu;
	a->active_mtu = ctx->port.active_mtu;
	a->gid_tbl_len = RV_GID_TBL_LEN;
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
	fill_port_attr(ctx, &full);
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

static int gid_entry(struct rv_context *ctx, uint32_t port, uint32_t index,
		     struct ibv_gid_entry *e)
{
	if (port != RV_PORT || index >= RV_GID_TBL_LEN)
		return EINVAL;
	memset(e, 0, sizeof(*e));
	e->gid = ctx->port.gid;
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	return 0;
}

int ibv_query_gid(struct ibv_context *ibctx, uint8_t port, int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;

	if (index < 0 || gid_entry(rv_ctx(ibctx), port, (uint32_t)index, &e)) {
		errno = EINVAL;
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
	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < RV_GID_TBL_LEN)
		return -EINVAL;
	gid_entry(rv_ctx(ibctx), RV_PORT, 0, entries);
	return RV_GID_TBL_LEN;
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

	if (gid_entry(rv_ctx(ibctx), port, index, &e)) {
		errno = EINVAL;
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
