/* Scatter/gather lists of local memory: a work request's SGEs, each piece checked right
 * before it is copied (the lkey resolves to an MR of the QP's PD that grants the access and
 * holds the piece), so an MR deregistered since the request was posted is never touched. */
#include <errno.h>

#include "emu/daemon/transport/transport.h"

/* Calls copy for each piece of [offset, offset + n) of the list; 0, or -EFAULT. */
static int walk(struct qp *qp, const struct proto_sge *sge, uint32_t num_sge, uint64_t offset,
		uint8_t *buf, size_t n, int access, bool in)
{
	for (uint32_t i = 0; i < num_sge && n; i++) {
		const struct proto_sge *s = &sge[i];
		struct mr *mr;
		size_t piece;
		int rc;

		if (offset >= s->length) {
			offset -= s->length;
			continue;
		}
		piece = s->length - offset < n ? (size_t)(s->length - offset) : n;
		if (mr_lookup(qp->dev->mrs, s->lkey, qp->pd, access, s->addr + offset, piece,
			      &mr) != MR_OK)
			return -EFAULT;
		rc = in ? mr_copy_in(mr, s->addr + offset, buf, piece)
			: mr_copy_out(mr, s->addr + offset, buf, piece);
		if (rc < 0)
			return -EFAULT;
		buf += piece;
		n -= piece;
		offset = 0;
	}
	return n ? -ERANGE : 0;
}

int sgl_gather(struct qp *qp, const struct proto_sge *sge, uint32_t num_sge, uint64_t offset,
	       uint8_t *dst, size_t n)
{
	return walk(qp, sge, num_sge, offset, dst, n, 0, false);
}

int sgl_scatter(struct qp *qp, const struct proto_sge *sge, uint32_t num_sge, uint64_t offset,
		const uint8_t *src, size_t n)
{
	return walk(qp, sge, num_sge, offset, (uint8_t *)src, n, IBV_ACCESS_LOCAL_WRITE, true);
}
