/* What rocemu does not do, answered the way verbs answers for a device without it:
 * EOPNOTSUPP, with the reason said once on stderr. Left to libibverbs, these calls would
 * reach the kernel with objects it never made. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>

#define NO_KERNEL "there is no kernel device to share objects through"

static struct ibv_dm *alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_alloc_dm", "rocemu has no device memory");
}

static struct ibv_mr *reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off,
				size_t len, unsigned int access)
{
	(void)pd, (void)dm, (void)off, (void)len, (void)access;
	return rv_unsupported_null("ibv_reg_dm_mr", "rocemu has no device memory");
}

static struct ibv_mr *alloc_null_mr(struct ibv_pd *pd)
{
	(void)pd;
	return rv_unsupported_null("ibv_alloc_null_mr", "every rocemu MR is real memory");
}

static int advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		     struct ibv_sge *sges, uint32_t n)
{
	(void)pd, (void)advice, (void)flags, (void)sges, (void)n;
	return rv_unsupported("ibv_advise_mr", "rocemu has no on-demand paging to prefetch for");
}

static struct ibv_flow *create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	(void)qp, (void)a;
	return rv_unsupported_null("ibv_create_flow", "rocemu has no flow steering");
}

static struct ibv_xrcd *open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_open_xrcd", "rocemu has no XRC transport");
}

static struct ibv_qp *open_qp(struct ibv_context *c, struct ibv_qp_open_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_open_qp", "rocemu has no XRC transport");
}

static struct ibv_wq *create_wq(struct ibv_context *c, struct ibv_wq_init_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_create_wq", "rocemu has no work queues or RSS");
}

static struct ibv_td *alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_alloc_td", "rocemu has no thread domains");
}

static struct ibv_pd *alloc_parent_domain(struct ibv_context *c,
					  struct ibv_parent_domain_init_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_alloc_parent_domain", "rocemu has no thread domains");
}

static int modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
{
	(void)cq, (void)a;
	return rv_unsupported("ibv_modify_cq", "rocemu has no CQ moderation");
}

static int modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *a)
{
	(void)qp, (void)a;
	return rv_unsupported("ibv_modify_qp_rate_limit", "rocemu has no per-QP rate limit");
}

static struct ibv_counters *create_counters(struct ibv_context *c,
					    struct ibv_counters_init_attr *a)
{
	(void)c, (void)a;
	return rv_unsupported_null("ibv_create_counters",
				   "use rocemuctl stats for the daemon's counters");
}

static int query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	(void)c, (void)v;
	return rv_unsupported("ibv_query_rt_values_ex", "rocemu has no device clock");
}

void rv_set_unsupported_ops(struct verbs_context *v)
{
	/* memory windows work (mem.c); they are context ops all the same */
	v->context.ops.alloc_mw = rv_alloc_mw;
	v->context.ops.bind_mw = rv_bind_mw;
	v->context.ops.dealloc_mw = rv_dealloc_mw;
	v->alloc_dm = alloc_dm;
	v->reg_dm_mr = reg_dm_mr;
	v->alloc_null_mr = alloc_null_mr;
	v->advise_mr = advise_mr;
	v->ibv_create_flow = create_flow;
	v->open_xrcd = open_xrcd;
	v->open_qp = open_qp;
	v->create_wq = create_wq;
	v->alloc_td = alloc_td;
	v->alloc_parent_domain = alloc_parent_domain;
	v->modify_cq = modify_cq;
	v->modify_qp_rate_limit = modify_qp_rate_limit;
	v->create_counters = create_counters;
	v->query_rt_values = query_rt_values;
}

/* The exported calls of the same kind. */

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
				 uint64_t iova, int fd, int access)
{
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
	return rv_unsupported_null("ibv_reg_dmabuf_mr", "rocemu registers host memory only");
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	return rv_unsupported_null("ibv_import_device", NO_KERNEL);
}

struct ibv_pd *ibv_import_pd(struct ibv_context *c, uint32_t handle)
{
	(void)c, (void)handle;
	return rv_unsupported_null("ibv_import_pd", NO_KERNEL);
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	(void)pd, (void)handle;
	return rv_unsupported_null("ibv_import_mr", NO_KERNEL);
}

struct ibv_dm *ibv_import_dm(struct ibv_context *c, uint32_t handle)
{
	(void)c, (void)handle;
	return rv_unsupported_null("ibv_import_dm", NO_KERNEL);
}

/* Nothing can have been imported. */
void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }
void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }
void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return rv_unsupported("ibv_set_ece", "rocemu has no enhanced connection options");
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return rv_unsupported("ibv_query_ece", "rocemu has no enhanced connection options");
}

/* As rxe's provider, which does not promise it either. */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *c, struct ibv_ah_attr *attr,
				uint8_t eth_mac[6], uint16_t *vid)
{
	(void)c, (void)attr, (void)eth_mac, (void)vid;
	return rv_unsupported("ibv_resolve_eth_l2_from_gid", "rocemud resolves neighbours "
			      "itself");
}
