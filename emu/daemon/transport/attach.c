/* UD multicast: QPs attached to groups (ibv_attach_mcast), and the datagrams to a group
 * handed to each of them. A group's QPs are the port's data for it (port/mcast.c), which
 * keeps the group joined at the link layer while any QP is attached.
 *
 * As rxe (rxe_mcast.c, rxe_recv.c): at most PROTO_MAX_MCAST_GRP groups, each with at most
 * PROTO_MAX_MCAST_QP_ATTACH QPs, and PROTO_MAX_TOTAL_MCAST_QP_ATTACH attachments in all,
 * ENOMEM past any of them; attaching again is a success that changes nothing, detaching
 * what is not attached is EINVAL. A datagram to a group goes to every QP attached, each with
 * the checks of a unicast datagram (state, Q_Key), the sender's own QP too when it is
 * attached: rxe's receive path does not tell it apart. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/daemon/transport/transport.h"

struct mcast_group {
	uint32_t nqps;
	struct qp *qps[PROTO_MAX_MCAST_QP_ATTACH];
};

static int find_member(const struct mcast_group *g, const struct qp *qp)
{
	for (uint32_t i = 0; i < g->nqps; i++)
		if (g->qps[i] == qp)
			return (int)i;
	return -1;
}

/* The group of gid, made (and joined) when it is new; NULL with *rc set. */
static struct mcast_group *group_for(struct dev *dev, const uint8_t gid[16], int *rc)
{
	struct mcast_group *g = mcast_find(&dev->port, gid);

	if (g)
		return g;
	g = calloc(1, sizeof(*g));
	if (!g) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = mcast_add(&dev->port, gid, g);
	if (*rc) {
		free(g);
		return NULL;
	}
	return g;
}

static int check_attach(const struct qp *qp, const uint8_t gid[16], char *err, size_t errlen)
{
	char s[INET6_ADDRSTRLEN];

	if (qp->type != IBV_QPT_UD) {
		snprintf(err, errlen, "QP 0x%06x is not a UD QP: only UD QPs join groups",
			 qp->qpn);
		return -EINVAL;
	}
	if (!addr_gid_is_multicast(gid)) {
		snprintf(err, errlen, "%s is not a multicast address",
			 addr_str(gid, s, sizeof(s)));
		return -EINVAL;
	}
	return 0;
}

int attach_qp(struct qp *qp, const uint8_t gid[16], char *err, size_t errlen)
{
	struct dev *dev = qp->dev;
	struct mcast_group *g;
	int rc = check_attach(qp, gid, err, errlen);

	if (rc)
		return rc;
	g = mcast_find(&dev->port, gid);
	if (g && find_member(g, qp) >= 0)
		return 0;
	if (dev->tp.mcast_attached >= PROTO_MAX_TOTAL_MCAST_QP_ATTACH) {
		snprintf(err, errlen, "the device holds %u multicast attachments, the most it may",
			 PROTO_MAX_TOTAL_MCAST_QP_ATTACH);
		return -ENOMEM;
	}
	if (g && g->nqps >= PROTO_MAX_MCAST_QP_ATTACH) {
		snprintf(err, errlen, "the group has %u QPs attached, the most it may",
			 PROTO_MAX_MCAST_QP_ATTACH);
		return -ENOMEM;
	}
	if (!g && !(g = group_for(dev, gid, &rc))) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "the device receives %u multicast groups, the most it "
				 "may (or out of memory)", PROTO_MAX_MCAST_GRP);
		else
			snprintf(err, errlen, "cannot receive the group's frames on %s: %s",
				 dev->port.ifname, strerror(-rc));
		return rc;
	}
	g->qps[g->nqps++] = qp;
	qp->mcast_groups++;
	dev->tp.mcast_attached++;
	return 0;
}

static void remove_member(struct dev *dev, const uint8_t gid[16], struct mcast_group *g, int i)
{
	struct qp *qp = g->qps[i];

	g->qps[i] = g->qps[--g->nqps];
	qp->mcast_groups--;
	dev->tp.mcast_attached--;
	if (g->nqps == 0) {
		mcast_del(&dev->port, gid);
		free(g);
	}
}

int attach_detach(struct qp *qp, const uint8_t gid[16], char *err, size_t errlen)
{
	struct mcast_group *g = mcast_find(&qp->dev->port, gid);
	int i = g ? find_member(g, qp) : -1;
	char s[INET6_ADDRSTRLEN];

	if (i < 0) {
		snprintf(err, errlen, "QP 0x%06x is not attached to %s", qp->qpn,
			 addr_str(gid, s, sizeof(s)));
		return -EINVAL;
	}
	remove_member(qp->dev, gid, g, i);
	return 0;
}

static void detach_from(void *ctx, const uint8_t gid[16], void *data)
{
	struct qp *qp = ctx;
	int i = find_member(data, qp);

	if (i >= 0)
		remove_member(qp->dev, gid, data, i);
}

/* A QP destroyed with its client leaves its groups, as the kernel detaches a dying
 * process's QPs (a program's own destroy of an attached QP is refused, EBUSY). */
void attach_detach_all(struct qp *qp)
{
	if (qp->mcast_groups)
		mcast_foreach(&qp->dev->port, detach_from, qp);
}

/* One attached QP's copy, with what rx.c checks of a unicast datagram's QP. */
static void deliver_copy(struct qp *qp, const uint8_t *frame, const struct wire_pkt *pkt)
{
	struct dev *dev = qp->dev;

	dev->cnt.mcast_copies++;
	if (!qp_takes_requests(qp)) {
		dev->cnt.drop_qp_state++;
		return;
	}
	if (pkt->ext.deth.qkey != qp->attr.qkey) {
		dev->cnt.qkey_viol++;
		return;
	}
	ud_on_datagram(qp, frame, pkt);
}

/* The datagram is checked once (P_Key, opcode, ICRC), then copied to each QP; the list is
 * copied first, since nothing a QP does with its copy may change whom the others get. */
void attach_deliver(struct dev *dev, const uint8_t *frame, const struct wire_pkt *pkt,
		    const uint8_t dgid[16])
{
	const struct mcast_group *g = mcast_find(&dev->port, dgid);
	struct qp *qps[PROTO_MAX_MCAST_QP_ATTACH];
	uint32_t n;

	if (!g) {
		dev->cnt.drop_mcast_no_group++;
		return;
	}
	if (pkt->op->transport != WIRE_UD || pkt->op->kind == WIRE_KIND_CNP) {
		dev->cnt.drop_transport++;
		return;
	}
	if ((pkt->bth.pkey & 0x7fff) != 0x7fff) {
		dev->cnt.drop_bad_pkey++;
		return;
	}
	if (!wire_icrc_ok(frame, pkt)) {
		dev->cnt.drop_bad_icrc++;
		return;
	}
	dev->cnt.rcvd_pkts++;
	dev->cnt.mcast_rcvd++;
	n = g->nqps;
	memcpy(qps, g->qps, n * sizeof(qps[0]));
	for (uint32_t i = 0; i < n; i++)
		deliver_copy(qps[i], frame, pkt);
}
