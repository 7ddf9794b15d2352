/* librdmacm's convenience calls: rdma_getaddrinfo, the endpoint calls that make a
 * synchronous id with its QP (rdma_create_ep, rdma_get_request), and what rocemu does not
 * do yet (multicast, ECE), refused here so no call reaches the real librdmacm with one of
 * our ids. */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "emu/rdmacm/rdmacm.h"

static int fail(int err)
{
	errno = err;
	return -1;
}

static struct sockaddr *copy_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

/* As librdmacm's: with neither node nor service, the answer is made of the hints (the
 * destination a program already has, libfabric's verbs provider among them); a source the
 * hints give is taken when the lookup gave none. */
int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	struct addrinfo ai_hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	struct rdma_addrinfo *r;
	int ret;

	if (!res || (!node && !service && !hints))
		return fail(EINVAL);
	if (hints) {
		ai_hints.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_PASSIVE)
			ai_hints.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			ai_hints.ai_flags |= AI_NUMERICHOST;
	}
	if (node || service) {
		ret = getaddrinfo(node, service, &ai_hints, &ai);
		if (ret)
			return ret;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		freeaddrinfo(ai);
		return EAI_MEMORY;
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = hints ? hints->ai_family : 0;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type :
			r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	if (ai) {
		struct sockaddr **addr = r->ai_flags & RAI_PASSIVE ? &r->ai_src_addr : &r->ai_dst_addr;
		socklen_t *len = r->ai_flags & RAI_PASSIVE ? &r->ai_src_len : &r->ai_dst_len;

		r->ai_family = ai->ai_family;
		*addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
		*len = ai->ai_addrlen;
		freeaddrinfo(ai);
	} else if (hints->ai_dst_addr && hints->ai_dst_len) {
		r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
		r->ai_dst_len = hints->ai_dst_len;
	}
	if (!r->ai_src_len && hints && hints->ai_src_addr && hints->ai_src_len) {
		r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
	}
	if (!r->ai_family && (r->ai_dst_addr || r->ai_src_addr))
		r->ai_family = (r->ai_dst_addr ? r->ai_dst_addr : r->ai_src_addr)->sa_family;
	if ((r->ai_src_len && !r->ai_src_addr) || (r->ai_dst_len && !r->ai_dst_addr)) {
		rdma_freeaddrinfo(r);
		return EAI_MEMORY;
	}
	*res = r;
	return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cmid;
	struct rcm_id *id;
	int err;

	if (!out || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cmid, NULL, res->ai_port_space))
		return -1;
	id = rcm_id(cmid);
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cmid, res->ai_src_addr))
			goto err;
		if (qp_init_attr) {
			id->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!id->ep_qp_attr) {
				errno = ENOMEM;
				goto err;
			}
			*id->ep_qp_attr = *qp_init_attr;
		}
		if (pd)
			cmid->pd = pd;
		*out = cmid;
		return 0;
	}
	if (rdma_resolve_addr(cmid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
	    rdma_resolve_route(cmid, 2000))
		goto err;
	if (qp_init_attr && rdma_create_qp(cmid, pd, qp_init_attr))
		goto err;
	*out = cmid;
	return 0;
err:
	err = errno;
	rdma_destroy_id(cmid);
	return fail(err);
}

void rdma_destroy_ep(struct rdma_cm_id *cmid)
{
	if (!rcm_id_live(cmid))
		return;
	if (cmid->qp)
		rdma_destroy_qp(cmid);
	if (cmid->srq)
		rdma_destroy_srq(cmid);
	rdma_destroy_id(cmid);
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct rcm_id *l = rcm_id(listen);
	struct rdma_cm_event *ev;
	int err;

	if (!rcm_id_live(listen) || !out || !l->sync)
		return fail(EINVAL);
	err = rcm_read_event(l->chan, &ev);
	if (err)
		return fail(err);
	if (ev->status || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		err = ev->status < 0 ? -ev->status : EINVAL;
		rdma_ack_cm_event(ev);
		return fail(err);
	}
	if (l->ep_qp_attr) {
		struct ibv_qp_init_attr attr = *l->ep_qp_attr;

		if (rdma_create_qp(ev->id, listen->pd, &attr)) {
			err = errno;
			rdma_reject(ev->id, NULL, 0);
			rdma_destroy_id(ev->id);
			rdma_ack_cm_event(ev);
			return fail(err);
		}
	}
	*out = ev->id;
	rcm_event_hold(rcm_id(ev->id), ev);
	return 0;
}

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id; (void)ece;
	return fail(rv_unsupported("rdma_set_local_ece", "ECE is not negotiated"));
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id; (void)ece;
	return fail(rv_unsupported("rdma_get_remote_ece", "ECE is not negotiated"));
}

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}
