/* What leaves a QP: every packet is built in the port's next send slot, headers first
 * (tx_begin), then its payload in place, then pad and ICRC (tx_end), so no payload is
 * copied twice. ACKs, ATOMIC ACKNOWLEDGEs and READ responses are built here whole. */
#include <string.h>

#include "emu/daemon/transport/transport.h"

bool tx_begin_on(struct dev *dev, const struct wire_path *path, const struct wire_bth *bth,
		 const struct wire_ext *ext, size_t n, struct tx_pkt *p)
{
	size_t hdr;

	p->frame = net_tx_slot(&dev->port);
	hdr = wire_put_headers(p->frame, DEV_FRAME_MAX, path, dev->port.ip_id++, bth, ext, n);
	p->payload = p->frame + hdr;
	return hdr != 0;
}

bool tx_begin(struct qp *qp, const struct wire_bth *bth, const struct wire_ext *ext, size_t n,
	      struct tx_pkt *p)
{
	return tx_begin_on(qp->dev, &qp->path, bth, ext, n, p);
}

void tx_end(struct qp *qp, const struct tx_pkt *p, size_t n)
{
	icrc_state crc = icrc_update(wire_icrc_headers(p->frame), p->payload, n);

	net_tx_commit(&qp->dev->port, (size_t)(p->payload - p->frame) + n +
				 wire_put_trailer(p->payload + n, crc, n));
}

void tx_ack(struct qp *qp, uint32_t psn, uint8_t syndrome, uint32_t msn)
{
	struct dev *dev = qp->dev;
	struct wire_bth bth = { .opcode = WIRE_OP_RC_ACK, .pkey = 0xffff,
				.dest_qp = qp->attr.dest_qpn, .psn = psn & WIRE_PSN_MASK };
	struct wire_ext ext = { .aeth = { .syndrome = syndrome, .msn = msn } };
	uint8_t *frame = net_tx_slot(&dev->port);
	size_t len = wire_build(frame, DEV_FRAME_MAX, &qp->path, dev->port.ip_id++, &bth, &ext,
				NULL, 0);

	if (len)
		net_tx_commit(&dev->port, len);
}

void tx_atomic_ack(struct qp *qp, uint32_t psn, uint64_t orig, uint32_t msn)
{
	struct wire_bth bth = { .opcode = WIRE_OP_RC_ATOMIC_ACK, .pkey = 0xffff,
				.dest_qp = qp->attr.dest_qpn, .psn = psn & WIRE_PSN_MASK };
	struct wire_ext ext = { .aeth = { .syndrome = WIRE_SYN_ACK, .msn = msn },
				.atomic_ack = orig };
	struct tx_pkt p;

	if (tx_begin(qp, &bth, &ext, 0, &p))
		tx_end(qp, &p, 0);
}

int tx_read_response(struct qp *qp, uint32_t psn, uint32_t msn, uint32_t rkey, uint64_t va,
		     size_t n, uint8_t opcode)
{
	struct wire_bth bth = { .opcode = opcode, .pkey = 0xffff, .dest_qp = qp->attr.dest_qpn,
				.psn = psn & WIRE_PSN_MASK };
	struct wire_ext ext = { .aeth = { .syndrome = WIRE_SYN_ACK, .msn = msn } };
	struct mr *mr = NULL;
	struct tx_pkt p;
	uint64_t at = va;

	if (n && resp_lookup(qp, rkey, IBV_ACCESS_REMOTE_READ, va, n, &mr, &at) != MR_OK)
		return -EFAULT;
	if (!tx_begin(qp, &bth, &ext, n, &p) || (n && mr_copy_out(mr, at, p.payload, n) < 0))
		return -EFAULT;
	tx_end(qp, &p, n);
	return 0;
}
