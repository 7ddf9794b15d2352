/* What rocemuctl reads: the counters (stats), the fault spec it sets, the device's status
 * and the lists of clients, MRs and QPs, a page at a time. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/cm/cm.h"
#include "emu/daemon/control/ctl.h"
#include "emu/daemon/log.h"

int op_stats(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_stats_reply *r = REP(proto_stats_reply);
	const struct dev_counters *cnt = &c->own.dev->cnt;
	uint32_t i = 0;

	(void)req;
	net_read_ring_drops(&c->own.dev->port);
#define COPY_COUNTER(name, help) r->counters[i++] = cnt->name;
	PROTO_COUNTERS(COPY_COUNTER)
#undef COPY_COUNTER
	r->ncounters = i;
	fault_format(&c->own.dev->port.fault, r->fault, sizeof(r->fault));
	r->nrefusals = PROTO_NREFUSALS;
	r->nfailures = PROTO_NFAILURES;
	memcpy(r->refused, c->own.dev->refused, sizeof(r->refused));
	memcpy(r->failed, c->own.dev->failed, sizeof(r->failed));
	return 0;
}

/* Faults change what every client sees: only root or the daemon's own user may set them. */
int op_set_fault(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_fault m = *REQ(proto_fault);

	if (c->own.uid != 0 && c->own.uid != geteuid()) {
		op_error(rep, "only root or the daemon's user may inject faults");
		return -EPERM;
	}
	m.spec[sizeof(m.spec) - 1] = '\0';
	if (net_set_fault(&c->own.dev->port, m.spec, rep->u.r.errmsg, sizeof(rep->u.r.errmsg)) < 0)
		return -EINVAL;
	log_info("client pid %d set faults: %s", (int)c->own.pid, m.spec);
	return 0;
}

int op_status(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	struct proto_status_reply *r = REP(proto_status_reply);
	const struct dev_counters *cnt = &c->own.dev->cnt;
	struct dev *dev = c->own.dev;
	struct client *i;

	(void)req;
	net_read_ring_drops(&dev->port);
	r->state = net_link_up(&dev->port) ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	r->max_mtu = dev->port.max_mtu;
	r->active_mtu = dev->port.active_mtu;
	r->ipv4 = dev->port.ipv4;
	snprintf(r->ifname, sizeof(r->ifname), "%s", dev->port.ifname);
	r->ngids = dev->port.ngids;
	for (unsigned g = 0; g < dev->port.ngids; g++)
		memcpy(r->gids[g], dev->port.gids[g].raw, 16);
	LIST_FOREACH(i, &dev->ctl.clients, link)
		r->clients++;
	r->qps = dev->tp.qp_count;
	r->mrs = mr_table_region_count(dev->mrs);
	r->pinned_bytes = mr_table_pinned_bytes(dev->mrs);
	r->rcvd_pkts = cnt->rcvd_pkts;
	r->sent_pkts = cnt->sent_pkts;
	r->drops = cnt->drop_malformed + cnt->drop_not_ours + cnt->drop_bad_icrc +
		   cnt->drop_unknown_qp + cnt->drop_transport + cnt->drop_qp_state +
		   cnt->drop_wrong_peer + cnt->drop_bad_pkey + cnt->drop_stale_ack +
		   cnt->drop_ring_full + cnt->drop_truncated + cnt->qkey_viol +
		   cnt->drop_ud_no_recv + cnt->drop_ud_too_long;
	return 0;
}

static void client_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "r");
	if (!f || !fgets(comm, (int)len, f))
		snprintf(comm, len, "?");
	if (f)
		fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
}

static uint32_t pd_handle(const struct client *c, const struct mr_pd *pd)
{
	for (uint32_t h = 1; h < c->pds.cap; h++)
		if (c->pds.items[h] == pd)
			return h;
	return 0;
}

static void fill_client(struct proto_list_reply *r, const struct client *c, void *item)
{
	struct proto_client_entry *e = &r->u.clients[r->count];

	(void)item;
	e->pid = (uint32_t)c->own.pid;
	e->uid = (uint32_t)c->own.uid;
	client_comm(c->own.pid, e->comm, sizeof(e->comm));
	e->pinned_bytes = mr_client_pinned_bytes(c->mrc);
	e->pds = c->pds.count;
	e->mrs = c->mrs.count;
	e->cqs = c->cqs.count;
	e->qps = c->qps.count;
}

static void fill_mr(struct proto_list_reply *r, const struct client *c, void *item)
{
	struct proto_mr_entry *e = &r->u.mrs[r->count];
	const struct mr *mr = item;
	struct mr_keys keys = mr_keys(mr);

	e->pid = (uint32_t)c->own.pid;
	e->pd = pd_handle(c, mr_pd(mr));
	e->lkey = keys.lkey;
	e->rkey = keys.rkey;
	e->iova = mr_iova(mr);
	e->length = mr_length(mr);
	e->access = (uint32_t)mr_access(mr);
}

static void fill_qp(struct proto_list_reply *r, const struct client *c, void *item)
{
	struct proto_qp_entry *e = &r->u.qps[r->count];
	const struct qp *qp = item;

	e->pid = (uint32_t)c->own.pid;
	e->qpn = qp->qpn;
	e->state = qp->state;
	memcpy(e->dest_gid, qp->attr.dest_gid, 16);
	e->dest_qpn = qp->attr.dest_qpn;
	e->sq_psn = qp->req.snd_nxt;
	e->rq_psn = qp->resp.rcv_psn;
	e->path_mtu = qp->attr.path_mtu;
	e->srtt_us = (uint32_t)(qp->comp.rto.srtt * 1e6);
	e->rto_us = qp->type == IBV_QPT_RC ? (uint32_t)(rto_interval(qp) * 1e6) : 0;
	e->rate_mbps = qp->req.dcqcn.limited ? cc_rate_mbps(qp) : 0;
	e->last_refusal = (uint16_t)qp->resp.last_refusal;
	e->last_failure = (uint16_t)qp->comp.last_failure;
	e->sq_posted = __atomic_load_n(&qp->sq_ctl->prod, __ATOMIC_RELAXED);
	e->sq_taken = qp->req.fetch_idx;
	e->sq_done = qp->comp.idx;
	e->rq_posted = qp->rq_ctl ? __atomic_load_n(&qp->rq_ctl->prod, __ATOMIC_RELAXED) : 0;
	e->rq_taken = qp->rq_ctl ? qp->resp.rq_cons : 0;
}

typedef void (*fill_fn)(struct proto_list_reply *r, const struct client *c, void *item);

/* Visits item number n of a walk; false once the page is full (next is then set). */
static bool list_visit(struct proto_list_reply *r, uint32_t start, uint32_t max, uint32_t *n,
		       const struct client *c, void *item, fill_fn fill)
{
	if ((*n)++ < start)
		return true;
	if (r->count == max) {
		r->next = *n - 1;
		return false;
	}
	fill(r, c, item);
	r->count++;
	return true;
}

static void list_walk(struct dev *dev, struct proto_list_reply *r, uint32_t start)
{
	static const struct { fill_fn fill; size_t table; uint32_t max; } kinds[] = {
		[PROTO_LIST_CLIENTS] = { fill_client, 0, PROTO_LIST_MAX(clients) },
		[PROTO_LIST_MRS] = { fill_mr, offsetof(struct client, mrs), PROTO_LIST_MAX(mrs) },
		[PROTO_LIST_QPS] = { fill_qp, offsetof(struct client, qps), PROTO_LIST_MAX(qps) },
	};
	uint32_t n = 0;
	struct client *c;

	LIST_FOREACH(c, &dev->ctl.clients, link) {
		const struct handle_table *t;

		if (r->kind == PROTO_LIST_CLIENTS) {
			if (!list_visit(r, start, kinds[r->kind].max, &n, c, NULL, kinds[r->kind].fill))
				return;
			continue;
		}
		t = (const struct handle_table *)((const char *)c + kinds[r->kind].table);
		for (uint32_t h = 1; h < t->cap; h++)
			if (t->items[h] && !list_visit(r, start, kinds[r->kind].max, &n, c,
						       t->items[h], kinds[r->kind].fill))
				return;
	}
}

/* Any client may list: it is what rdma resource show tells any user of an HCA. */
int op_list(struct client *c, const struct ctl_request *req, struct ctl_reply *rep)
{
	const struct proto_list *m = REQ(proto_list);
	struct proto_list_reply *r = REP(proto_list_reply);

	if (m->kind < PROTO_LIST_CLIENTS || m->kind > PROTO_LIST_CM) {
		op_error(rep, "no list of kind %u", m->kind);
		return -EINVAL;
	}
	r->kind = m->kind;
	if (m->kind == PROTO_LIST_CM) {
		r->count = cm_list(c->own.dev->cm, m->start, r->u.cms, PROTO_LIST_MAX(cms), &r->next);
		return 0;
	}
	list_walk(c->own.dev, r, m->start);
	return 0;
}
