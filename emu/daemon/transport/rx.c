/* The receive path: the silent drops of RoCEv2 in the order rxe makes them, then the packet goes to
 * the QP's responder (requests, RC and UC) or completer (ACKs). Every drop bumps a named
 * counter. */
#include <arpa/inet.h>
#include <string.h>

#include "emu/daemon/transport/transport.h"

#define PKEY_FULL_MASK 0x7fff
#define WIRE_GSI_QPN 1         /* the General Services Interface: the CM's MADs */

static bool is_response(const struct wire_opcode_info *op)
{
	return op->kind == WIRE_KIND_ACK || op->kind == WIRE_KIND_ATOMIC_ACK ||
	       op->kind == WIRE_KIND_READ_RESP;
}

/* Whether the QP is in a state that takes this packet at all. */
static bool qp_accepts(const struct qp *qp, bool response)
{
	if (response)
		return qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD;
	return qp_takes_requests(qp);
}

/* The wire transport of a QP's packets. */
static enum wire_transport qp_transport(const struct qp *qp)
{
	switch (qp->type) {
	case IBV_QPT_UD: return WIRE_UD;
	case IBV_QPT_UC: return WIRE_UC;
	default: return WIRE_RC;
	}
}

/* A connected QP (RC or UC) takes packets only from its peer, to the address it sends
 * from. */
static bool from_peer(const struct dev *dev, const struct qp *qp, const uint8_t src[16],
		      const uint8_t dst[16])
{
	return !memcmp(src, qp->attr.dest_gid, 16) &&
	       !memcmp(dst, dev->port.gids[qp->attr.sgid_index].raw, 16);
}

static struct qp *admit(struct dev *dev, const uint8_t *frame, const struct wire_pkt *pkt)
{
	uint8_t src[16], dst[16];
	struct qp *qp;

	addr_gid(src, pkt->ip_version, pkt->src_ip);
	addr_gid(dst, pkt->ip_version, pkt->dst_ip);
	if (addr_find(&dev->port, dst) < 0) {
		dev->cnt.drop_not_ours++;
		return NULL;
	}
	qp = pkt->bth.dest_qp ? qp_find(dev, pkt->bth.dest_qp) : NULL;
	if (!qp) {
		dev->cnt.drop_unknown_qp++;
		return NULL;
	}
	/* a CNP belongs to no transport: it slows any QP that sends */
	if (pkt->op->kind != WIRE_KIND_CNP &&
	    pkt->op->transport != qp_transport(qp)) {
		dev->cnt.drop_transport++;
		return NULL;
	}
	/* a CNP speaks to the QP as a sender: of requests in RTS, of READ responses from RTR */
	if (!qp_accepts(qp, is_response(pkt->op))) {
		dev->cnt.drop_qp_state++;
		return NULL;
	}
	/* a UD QP takes datagrams from anyone that knows its Q_Key (a CNP carries none), an
	 * RC or UC QP only from its peer (rxe checks both before the QP sees the packet) */
	if (qp->type == IBV_QPT_UD && pkt->op->kind != WIRE_KIND_CNP &&
	    pkt->ext.deth.qkey != qp->attr.qkey) {
		dev->cnt.qkey_viol++;
		return NULL;
	}
	if (qp->type != IBV_QPT_UD && !from_peer(dev, qp, src, dst)) {
		dev->cnt.drop_wrong_peer++;
		return NULL;
	}
	if ((pkt->bth.pkey & PKEY_FULL_MASK) != PKEY_FULL_MASK) {
		dev->cnt.drop_bad_pkey++;
		return NULL;
	}
	if (!wire_icrc_ok(frame, pkt)) {
		dev->cnt.drop_bad_icrc++;
		return NULL;
	}
	return qp;
}

/* QP 1 is the GSI's: its MADs go to the CM, once admitted as any packet (an address served,
 * the ICRC good). */
static void gsi_frame(struct dev *dev, const uint8_t *frame, const struct wire_pkt *pkt)
{
	uint8_t dst[16];

	addr_gid(dst, pkt->ip_version, pkt->dst_ip);
	if (addr_find(&dev->port, dst) < 0) {
		dev->cnt.drop_not_ours++;
		return;
	}
	if (!wire_icrc_ok(frame, pkt)) {
		dev->cnt.cm_drop_bad_icrc++;
		return;
	}
	dev->tp.on_gsi(dev->tp.gsi_ctx, frame, pkt);
}

void rx_frame(struct dev *dev, const uint8_t *frame, size_t len)
{
	struct wire_pkt pkt;
	enum wire_status st = wire_parse(frame, len, &pkt);
	struct qp *qp;

	if (st != WIRE_OK) {
		/* icrc-bad and malformed frames are counted, never acted on */
		dev->cnt.drop_malformed++;
		return;
	}
	if (pkt.bth.dest_qp == WIRE_GSI_QPN && dev->tp.on_gsi) {
		gsi_frame(dev, frame, &pkt);
		return;
	}
	if (pkt.bth.dest_qp == PROTO_MCAST_QPN) {
		uint8_t dst[16];

		addr_gid(dst, pkt.ip_version, pkt.dst_ip);
		attach_deliver(dev, frame, &pkt, dst);
		return;
	}
	qp = admit(dev, frame, &pkt);
	if (!qp)
		return;
	dev->cnt.rcvd_pkts++;
	if (pkt.op->kind == WIRE_KIND_CNP) {
		cc_on_cnp(qp);
		return;
	}
	if (qp->type == IBV_QPT_UD) {
		cc_on_datagram(qp, frame, &pkt);
		ud_on_datagram(qp, frame, &pkt);
		return;
	}
	/* data, not the ACKs that answer it: the ACKs' sender has no rate to cut */
	if (pkt.op->kind != WIRE_KIND_ACK && pkt.op->kind != WIRE_KIND_ATOMIC_ACK)
		cc_on_arrival(qp, &pkt);
	if (is_response(pkt.op)) {
		if (pkt.op->kind == WIRE_KIND_ACK)
			comp_on_ack(qp, &pkt);
		else if (pkt.op->kind == WIRE_KIND_READ_RESP)
			comp_on_read_response(qp, frame, &pkt);
		else if (pkt.op->kind == WIRE_KIND_ATOMIC_ACK)
			comp_on_atomic_ack(qp, &pkt);
		else
			dev->cnt.drop_transport++;
		return;
	}
	resp_on_request(qp, frame, &pkt);
}

