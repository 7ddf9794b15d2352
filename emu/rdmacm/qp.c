/* An id's QP: made on the id's device (its default PD and new CQs when none are given, as
 * librdmacm makes them), taken to INIT at once and to RTR and RTS at the connection's
 * events with the attributes the daemon's CM gave, as librdmacm does with the kernel's
 * rdma_init_qp_attr. */
#include <errno.h>
#include <string.h>

#include "emu/rdmacm/rdmacm.h"

static int fail(int err)
{
	errno = err;
	return -1;
}

/* ibv_modify_qp answers with the errno itself, as libibverbs documents it, and need not
 * set errno (the verbs layer's does not) */
static int modify(struct rcm_id *id, struct ibv_qp_attr *a, int mask)
{
	int err = ibv_modify_qp(id->id.qp, a, mask);

	return err < 0 ? errno : err;
}

static void init_change(const struct rcm_id *id, bool with_access, struct rv_qp_change *c)
{
	memset(c, 0, sizeof(*c));
	c->attr.qp_state = IBV_QPS_INIT;
	c->attr.port_num = 1;
	/* before a connection the kernel's cma gives no remote access; the CM's INIT does */
	if (with_access && id->have_qp_attr)
		c->attr.qp_access_flags = id->qp_attr.access;
	c->mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

static void fill_ah(const struct rcm_id *id, struct ibv_ah_attr *ah)
{
	const struct proto_qp_attr *q = &id->qp_attr;

	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	memcpy(ah->grh.dgid.raw, q->dest_gid, 16);
	ah->grh.sgid_index = q->sgid_index;
	ah->grh.hop_limit = q->hop_limit;
	ah->grh.traffic_class = q->traffic_class;
	ah->grh.flow_label = q->flow_label;
}

/* (the connection's attributes must be known) */
static void rtr_change(const struct rcm_id *id, uint8_t responder_resources,
		       struct rv_qp_change *c)
{
	const struct proto_qp_attr *q = &id->qp_attr;
	struct ibv_qp_attr *a = &c->attr;

	memset(c, 0, sizeof(*c));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = q->path_mtu;
	a->dest_qp_num = q->dest_qpn;
	a->rq_psn = q->rq_psn;
	a->max_dest_rd_atomic = responder_resources == RDMA_MAX_RESP_RES ? q->max_dest_rd_atomic :
				responder_resources;
	a->min_rnr_timer = q->min_rnr_timer;
	fill_ah(id, &a->ah_attr);
	c->mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

static void rts_change(const struct rcm_id *id, uint8_t initiator_depth, struct rv_qp_change *c)
{
	const struct proto_qp_attr *q = &id->qp_attr;
	struct ibv_qp_attr *a = &c->attr;

	memset(c, 0, sizeof(*c));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = q->sq_psn;
	a->timeout = id->ack_timeout_set ? id->ack_timeout : q->timeout;
	a->retry_cnt = q->retry_cnt;
	a->rnr_retry = q->rnr_retry;
	a->max_rd_atomic = initiator_depth == RDMA_MAX_INIT_DEPTH ? q->max_rd_atomic :
			   initiator_depth;
	c->mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
}

/* The QP's changes and then req to the id's daemon: one round trip when the QP was made on
 * the id's device context (rdma_create_qp's, nearly always), else a call each. */
static int changes_then(struct rcm_id *id, struct rv_qp_change *c, unsigned n, void *req,
			size_t len, unsigned *ran)
{
	int err = 0;
	unsigned i;

	if (rv_ctx(id->id.qp->context) == id->dev->rv)
		return rv_modify_qp_then(id->id.qp, c, n, req, len, "rdma_cm", ran);
	for (i = 0; i < n && !err; i++)
		err = modify(id, &c[i].attr, c[i].mask);
	*ran = err ? i - 1 : n;
	return err || !req ? err : rcm_request(id->dev, req, len, NULL, 0, -1);
}

int rcm_qp_ready_then(struct rcm_id *id, uint8_t responder_resources, uint8_t initiator_depth,
		      void *req, size_t len)
{
	struct rv_qp_change c[3];
	unsigned ran;

	if (!id->id.qp)
		return rcm_request(id->dev, req, len, NULL, 0, -1);
	if (!id->have_qp_attr)
		return EINVAL;
	init_change(id, true, &c[0]);
	rtr_change(id, responder_resources, &c[1]);
	rts_change(id, initiator_depth, &c[2]);
	return changes_then(id, c, 3, req, len, &ran);
}

int rcm_qp_error(struct rcm_id *id)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	return id->id.qp ? modify(id, &a, IBV_QP_STATE) : 0;
}

int rcm_qp_error_then(struct rcm_id *id, void *req, size_t len)
{
	struct rv_qp_change c = { .attr.qp_state = IBV_QPS_ERR, .mask = IBV_QP_STATE };
	unsigned ran = 0;
	int err;

	if (!id->id.qp)
		return rcm_request(id->dev, req, len, NULL, 0, -1);
	err = changes_then(id, &c, 1, req, len, &ran);
	/* the request goes whether the QP could be moved or not */
	return err && ran == 0 ? rcm_request(id->dev, req, len, NULL, 0, -1) : err;
}

/* A UD QP goes to RTS at once, with rdma_cm's Q_Key for the UDP port space, as librdmacm
 * takes it. */
static void ud_changes(struct rv_qp_change c[3])
{
	memset(c, 0, 3 * sizeof(*c));
	c[0].attr.qp_state = IBV_QPS_INIT;
	c[0].attr.port_num = 1;
	c[0].attr.qkey = RDMA_UDP_QKEY;
	c[0].mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	c[1].attr.qp_state = IBV_QPS_RTR;
	c[1].mask = IBV_QP_STATE;
	c[2].attr.qp_state = IBV_QPS_RTS;
	c[2].mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
}

static int ud_ready(struct rcm_id *id)
{
	struct rv_qp_change c[3];
	unsigned ran;

	ud_changes(c);
	return changes_then(id, c, 3, NULL, 0, &ran);
}

/* librdmacm makes the CQs a QP is created without, each with its completion channel. */
static int make_cqs(struct rcm_id *id, uint32_t send_size, uint32_t recv_size)
{
	struct rdma_cm_id *c = &id->id;

	if (recv_size) {
		c->recv_cq_channel = ibv_create_comp_channel(c->verbs);
		c->recv_cq = c->recv_cq_channel ? ibv_create_cq(c->verbs, (int)recv_size, c,
								 c->recv_cq_channel, 0) : NULL;
		if (!c->recv_cq)
			return errno ? errno : ENOMEM;
	}
	if (send_size) {
		c->send_cq_channel = ibv_create_comp_channel(c->verbs);
		c->send_cq = c->send_cq_channel ? ibv_create_cq(c->verbs, (int)send_size, c,
								 c->send_cq_channel, 0) : NULL;
		if (!c->send_cq)
			return errno ? errno : ENOMEM;
	}
	return 0;
}

/* The id's CQs, in cqs: a program may give the id one CQ for both (rsockets do), and
 * each is destroyed once. */
static unsigned id_cqs(const struct rdma_cm_id *c, struct ibv_cq *cqs[2])
{
	unsigned n = 0;

	if (c->recv_cq)
		cqs[n++] = c->recv_cq;
	if (c->send_cq && c->send_cq != c->recv_cq)
		cqs[n++] = c->send_cq;
	return n;
}

static void forget_cqs(struct rdma_cm_id *c)
{
	if (c->recv_cq_channel)
		ibv_destroy_comp_channel(c->recv_cq_channel);
	if (c->send_cq_channel && c->send_cq_channel != c->recv_cq_channel)
		ibv_destroy_comp_channel(c->send_cq_channel);
	c->recv_cq = c->send_cq = NULL;
	c->recv_cq_channel = c->send_cq_channel = NULL;
}

static void free_cqs(struct rdma_cm_id *c)
{
	struct ibv_cq *cqs[2];
	unsigned n = id_cqs(c, cqs);

	for (unsigned i = 0; i < n; i++)
		ibv_destroy_cq(cqs[i]);
	forget_cqs(c);
}

/* The QP in INIT and the two CQs librdmacm would make for it, each with its channel, in one
 * round trip (three otherwise: a context switch each, the dearest part of a connection in
 * an emulated guest). */
static struct ibv_qp *qp_with_cqs(struct rcm_id *id, struct ibv_qp_init_attr_ex *init,
				  const struct rv_qp_change *to_init)
{
	struct rdma_cm_id *c = &id->id;
	struct ibv_comp_channel *send_ch = ibv_create_comp_channel(c->verbs);
	struct ibv_comp_channel *recv_ch = send_ch ? ibv_create_comp_channel(c->verbs) : NULL;
	struct ibv_qp *qp = recv_ch ? rv_create_qp_cqs_in_init(c->verbs, init, to_init,
		(struct rv_new_cq){ (int)init->cap.max_send_wr, send_ch },
		(struct rv_new_cq){ (int)init->cap.max_recv_wr, recv_ch }, c) : NULL;
	int err = errno;

	if (!qp) {
		if (recv_ch)
			ibv_destroy_comp_channel(recv_ch);
		if (send_ch)
			ibv_destroy_comp_channel(send_ch);
		errno = err;
		return NULL;
	}
	c->send_cq_channel = send_ch;
	c->recv_cq_channel = recv_ch;
	c->send_cq = init->send_cq;
	c->recv_cq = init->recv_cq;
	return qp;
}

int rdma_create_qp_ex(struct rdma_cm_id *cmid, struct ibv_qp_init_attr_ex *attr)
{
	struct rcm_id *id = rcm_id(cmid);
	struct ibv_qp_init_attr_ex init;
	struct rv_qp_change to_init;
	struct ibv_qp *qp;
	bool cqs_with_qp;
	int err;

	if (!rcm_id_live(cmid) || !attr || !cmid->verbs || cmid->qp)
		return fail(EINVAL);
	/* a type left 0 is the id's, as librdmacm takes it from rdma_getaddrinfo's answer */
	if (!attr->qp_type)
		attr->qp_type = cmid->qp_type;
	/* the TCP port space connects RC QPs, the UDP one UD QPs */
	if (attr->qp_type != cmid->qp_type)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd)
		attr->pd = cmid->pd;
	if (!attr->pd || attr->pd->context != cmid->verbs)
		return fail(EINVAL);
	cqs_with_qp = !attr->send_cq && !attr->recv_cq && attr->cap.max_send_wr &&
		      attr->cap.max_recv_wr && attr->qp_type != IBV_QPT_UD;
	err = cqs_with_qp ? 0 : make_cqs(id, attr->send_cq ? 0 : attr->cap.max_send_wr,
					 attr->recv_cq ? 0 : attr->cap.max_recv_wr);
	if (err) {
		free_cqs(cmid);
		return fail(err);
	}
	memset(&init, 0, sizeof(init));
	init.qp_context = attr->qp_context;
	init.send_cq = attr->send_cq ? attr->send_cq : cmid->send_cq;
	init.recv_cq = attr->recv_cq ? attr->recv_cq : cmid->recv_cq;
	init.srq = attr->srq ? attr->srq : cmid->srq;
	init.cap = attr->cap;
	init.qp_type = attr->qp_type;
	init.sq_sig_all = attr->sq_sig_all;
	init.comp_mask = IBV_QP_INIT_ATTR_PD;
	init.pd = attr->pd;
	/* a connected QP is made in INIT, in one round trip; a UD QP goes on to RTS below */
	init_change(id, id->have_qp_attr, &to_init);
	qp = cqs_with_qp ? qp_with_cqs(id, &init, &to_init) :
	     attr->qp_type == IBV_QPT_UD ? rv_create_qp_ex(cmid->verbs, &init) :
	     rv_create_qp_in_init(cmid->verbs, &init, &to_init);
	if (!qp) {
		err = errno;
		free_cqs(cmid);
		return fail(err);
	}
	attr->cap = rv_qp(qp)->cap;
	attr->send_cq = init.send_cq;
	attr->recv_cq = init.recv_cq;
	cmid->qp = qp;
	cmid->pd = qp->pd;  /* rdma_reg_msgs and the like register on the QP's PD */
	err = qp->qp_type == IBV_QPT_UD ? ud_ready(id) : 0;
	if (err) {
		ibv_destroy_qp(qp);
		cmid->qp = NULL;
		free_cqs(cmid);
		return fail(err);
	}
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *cmid, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	int rc;

	if (!attr)
		return fail(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	rc = rdma_create_qp_ex(cmid, &ex);
	if (!rc) {
		attr->cap = ex.cap;
		attr->send_cq = ex.send_cq;
		attr->recv_cq = ex.recv_cq;
	}
	return rc;
}

void rdma_destroy_qp(struct rdma_cm_id *cmid)
{
	struct ibv_cq *cqs[2];

	if (!rcm_id_live(cmid) || !cmid->qp)
		return;
	rcm_mcast_detach_qp(rcm_id(cmid));
	/* librdmacm goes on past a failure, and so do we: the QP and CQs in one round trip */
	rv_destroy_qp_and_cqs(cmid->qp, cqs, id_cqs(cmid, cqs));
	cmid->qp = NULL;
	forget_cqs(cmid);
}

/* As the kernel's rdma_init_qp_attr: the state asked, with what the connection gives it. */
int rdma_init_qp_attr(struct rdma_cm_id *cmid, struct ibv_qp_attr *a, int *mask)
{
	struct rcm_id *id = rcm_id(cmid);
	struct rv_qp_change c[3];

	if (!rcm_id_live(cmid) || !a || !mask)
		return fail(EINVAL);
	if (a->qp_state != IBV_QPS_INIT && !id->have_qp_attr)
		return fail(EINVAL);
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		if (cmid->qp_type == IBV_QPT_UD)
			ud_changes(c);
		else
			init_change(id, true, &c[0]);
		break;
	case IBV_QPS_RTR:
		rtr_change(id, RDMA_MAX_RESP_RES, &c[0]);
		break;
	case IBV_QPS_RTS:
		rts_change(id, RDMA_MAX_INIT_DEPTH, &c[0]);
		break;
	default:
		return fail(EINVAL);
	}
	*a = c[0].attr;
	*mask = c[0].mask;
	return 0;
}

int rdma_create_srq_ex(struct rdma_cm_id *cmid, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr init;
	struct ibv_srq *srq;

	if (!rcm_id_live(cmid) || !attr || !cmid->verbs || cmid->srq)
		return fail(EINVAL);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
		return fail(EOPNOTSUPP);
	memset(&init, 0, sizeof(init));
	init.srq_context = attr->srq_context;
	init.attr = attr->attr;
	srq = ibv_create_srq((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd :
			     cmid->pd, &init);
	if (!srq)
		return -1;
	attr->attr = init.attr;
	cmid->srq = srq;
	return 0;
}

int rdma_create_srq(struct rdma_cm_id *cmid, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int rc;

	if (!attr)
		return fail(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	ex.pd = pd;
	rc = rdma_create_srq_ex(cmid, &ex);
	if (!rc)
		attr->attr = ex.attr;
	return rc;
}

void rdma_destroy_srq(struct rdma_cm_id *cmid)
{
	if (!rcm_id_live(cmid) || !cmid->srq)
		return;
	ibv_destroy_srq(cmid->srq);
	cmid->srq = NULL;
}
