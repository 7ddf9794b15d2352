/* Completion queues and extended CQs (their channels are in channel.c). */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/lib/lib_int.h"    /* cq_nap */

#define CQ_EX_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
		     IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
		     IBV_WC_EX_WITH_DLID_PATH_BITS)

/* Empty polls past this long in a row become naps of at most NAP_US on the CQ's wakeup. */
#define NAP_AFTER_NS 200000
#define NAP_US       50

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After an empty poll, outside the CQ's lock. It yields the CPU: programs spin on
 * ibv_poll_cq, and with more spinners than cores (two daemons and two perftest processes
 * on two) a spinner that never yields makes the daemons that would fill its CQ wait for
 * the scheduler's time slice. With a core to spare, sched_yield returns at once. Measured
 * here, ib_write_lat's p99 fell from 2 ms to 0.1 ms and ibv_rc_pingpong's iteration from
 * 267 to 185 us. A run of empty polls longer than any round trip (NAP_AFTER_NS) becomes
 * naps instead: the daemon writes the CQ's pipe the moment it adds a completion, so the
 * next poll finds it about a wakeup later, and a poll with nothing coming returns after
 * NAP_US; meanwhile the CPU is the daemons'. A CQ bound to a channel only yields: its
 * pipe wakes the channel's sleepers. */
static bool long_empty_run(struct rv_cq *cq)
{
	uint64_t now;

	if (cq->channel)
		return false;
	now = now_ns();
	if (!cq->empty_since_ns)
		cq->empty_since_ns = now;
	return now - cq->empty_since_ns >= NAP_AFTER_NS;
}

/* Under the CQ's lock: how the poll went. Then, outside it, after_empty_poll. */
static bool note_poll(struct rv_cq *cq, bool empty)
{
	if (!empty) {
		cq->empty_since_ns = 0;
		return false;
	}
	return long_empty_run(cq);
}

static void after_empty_poll(struct rv_cq *cq, bool nap)
{
	if (nap)
		cq_nap(cq->cq, NAP_US);
	else
		sched_yield();
}

int rv_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct rv_cq *cq = rv_cq(ibcq);
	bool nap;
	int n;

	pthread_mutex_lock(&cq->lock);
	n = rocemu_poll_cq(cq->cq, num, wc);
	nap = note_poll(cq, n == 0);
	pthread_mutex_unlock(&cq->lock);
	if (n == 0)
		after_empty_poll(cq, nap);
	return n;
}

/* A QP went to RESET: its completions not yet polled go (its receives stay when
 * keep_receives), from the ring and from the batch an extended poll took but has not
 * handed out. */
void rv_cq_forget_qp(struct ibv_cq *ibcq, uint32_t qp_num, bool keep_receives)
{
	struct rv_cq *cq = rv_cq(ibcq);
	int kept;

	pthread_mutex_lock(&cq->lock);
	kept = cq->batch_pos;
	rocemu_cq_forget_qp(cq->cq, qp_num, keep_receives);
	for (int i = cq->batch_pos; i < cq->batch_len; i++)
		if (cq->batch[i].qp_num != qp_num ||
		    (keep_receives && (cq->batch[i].opcode & IBV_WC_RECV)))
			cq->batch[kept++] = cq->batch[i];
	cq->batch_len = kept;
	pthread_mutex_unlock(&cq->lock);
}

int rv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct rv_cq *cq = rv_cq(ibcq);
	int err;

	pthread_mutex_lock(&cq->lock);
	err = rocemu_req_notify_cq(cq->cq, solicited_only);
	pthread_mutex_unlock(&cq->lock);
	return err;
}

/* Extended polling: completions come from the ring RV_CQ_BATCH at a time; the one being
 * read is batch[batch_pos]. A batch left unread after ibv_end_poll is served first by the
 * next ibv_start_poll. */
static struct ibv_wc *cur(struct ibv_cq_ex *ex)
{
	struct rv_cq *cq = (struct rv_cq *)ex;

	return &cq->batch[cq->batch_pos];
}

static int load_current(struct rv_cq *cq)
{
	cq->reading = false;
	if (cq->batch_pos >= cq->batch_len) {
		int n = rocemu_poll_cq(cq->cq, RV_CQ_BATCH, cq->batch);

		if (n < 0)
			return errno;
		cq->batch_len = n;
		cq->batch_pos = 0;
		if (n == 0)
			return ENOENT;
	}
	cq->reading = true;
	cq->ex.wr_id = cq->batch[cq->batch_pos].wr_id;
	cq->ex.status = cq->batch[cq->batch_pos].status;
	return 0;
}

static int start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct rv_cq *cq = (struct rv_cq *)ex;
	bool nap;
	int err;

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	err = load_current(cq);
	/* As providers do: the lock is held from a successful start to the end. */
	nap = note_poll(cq, err == ENOENT);
	if (err) {
		pthread_mutex_unlock(&cq->lock);
		if (err == ENOENT)
			after_empty_poll(cq, nap);   /* as an empty rv_poll_cq does */
	}
	return err;
}

static int next_poll(struct ibv_cq_ex *ex)
{
	struct rv_cq *cq = (struct rv_cq *)ex;

	cq->batch_pos++;
	return load_current(cq);
}

static void end_poll(struct ibv_cq_ex *ex)
{
	struct rv_cq *cq = (struct rv_cq *)ex;

	if (cq->reading)
		cq->batch_pos++;        /* the one read last is done */
	cq->reading = false;
	pthread_mutex_unlock(&cq->lock);
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *ex) { return cur(ex)->opcode; }
static uint32_t read_vendor_err(struct ibv_cq_ex *ex) { return cur(ex)->vendor_err; }
static uint32_t read_byte_len(struct ibv_cq_ex *ex) { return cur(ex)->byte_len; }
static __be32 read_imm_data(struct ibv_cq_ex *ex) { return cur(ex)->imm_data; }
static uint32_t read_qp_num(struct ibv_cq_ex *ex) { return cur(ex)->qp_num; }
static uint32_t read_src_qp(struct ibv_cq_ex *ex) { return cur(ex)->src_qp; }
static unsigned int read_wc_flags(struct ibv_cq_ex *ex) { return cur(ex)->wc_flags; }
static uint32_t read_slid(struct ibv_cq_ex *ex) { return cur(ex)->slid; }
static uint8_t read_sl(struct ibv_cq_ex *ex) { return cur(ex)->sl; }
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *ex) { return cur(ex)->dlid_path_bits; }

static void set_cq_ex_ops(struct ibv_cq_ex *ex)
{
	ex->start_poll = start_poll;
	ex->next_poll = next_poll;
	ex->end_poll = end_poll;
	ex->read_opcode = read_opcode;
	ex->read_vendor_err = read_vendor_err;
	ex->read_byte_len = read_byte_len;
	ex->read_imm_data = read_imm_data;
	ex->read_qp_num = read_qp_num;
	ex->read_src_qp = read_src_qp;
	ex->read_wc_flags = read_wc_flags;
	ex->read_slid = read_slid;
	ex->read_sl = read_sl;
	ex->read_dlid_path_bits = read_dlid_path_bits;
}

/* The verbs CQ of a CQ made (under ctx's lock); NULL and errno when it cannot be bound to
 * its channel, and then rcq is the caller's still. */
struct rv_cq *rv_cq_wrap(struct rv_context *ctx, struct rocemu_cq *rcq, int cqe,
			 struct ibv_comp_channel *ch, void *cq_context)
{
	struct rv_cq *cq = calloc(1, sizeof(*cq));
	int err = cq ? 0 : ENOMEM;

	if (cq) {
		cq->cq = rcq;
		rocemu_cq_set_user(rcq, cq);
		if (ch)
			err = rv_channel_bind((struct rv_channel *)ch, cq);
	}
	if (err) {
		free(cq);
		errno = rv_fail(ctx, err, "ibv_create_cq");
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	pthread_mutex_init(&cq->ex.mutex, NULL);
	pthread_cond_init(&cq->ex.cond, NULL);
	cq->ex.context = &ctx->vctx.context;
	cq->ex.channel = ch;
	cq->ex.cq_context = cq_context;
	cq->ex.cqe = cqe;
	set_cq_ex_ops(&cq->ex);
	return cq;
}

static struct rv_cq *cq_create(struct rv_context *ctx, int cqe, struct ibv_comp_channel *ch,
			       void *cq_context)
{
	struct rocemu_cq *rcq;
	struct rv_cq *cq = NULL;

	pthread_mutex_lock(&ctx->lock);
	rcq = rocemu_create_cq(ctx->rc, cqe);
	if (!rcq)
		errno = rv_fail(ctx, errno, "ibv_create_cq");
	else if (!(cq = rv_cq_wrap(ctx, rcq, cqe, ch, cq_context)))
		rocemu_destroy_cq(rcq);
	pthread_mutex_unlock(&ctx->lock);
	return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ibctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct rv_cq *cq;

	if (comp_vector != 0) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(rv_ctx(ibctx), cqe, channel, cq_context);
	return cq ? (struct ibv_cq *)&cq->ex : NULL;
}

struct ibv_cq_ex *rv_create_cq_ex(struct ibv_context *ibctx, struct ibv_cq_init_attr_ex *a)
{
	struct rv_cq *cq;

	if (a->wc_flags & ~(uint64_t)CQ_EX_FLAGS)
		return rv_unsupported_null("ibv_create_cq_ex with completion timestamps, CVLAN, "
					   "flow tag or tag matching", "rocemu reports the "
					   "fields of struct ibv_wc only");
	if (a->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS ||
	    (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS && a->flags))
		return rv_unsupported_null("ibv_create_cq_ex with flags or a parent domain",
					   "rocemu CQs are always single-threaded-safe "
					   "through their own lock");
	if (a->comp_vector != 0) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(rv_ctx(ibctx), (int)a->cqe, a->channel, a->cq_context);
	if (!cq)
		return NULL;
	cq->wc_flags = a->wc_flags;
	return &cq->ex;
}

void rv_cq_free(struct rv_cq *cq)
{
	pthread_mutex_destroy(&cq->lock);
	free(cq);
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct rv_context *ctx = rv_ctx(ibcq->context);
	struct rv_cq *cq = rv_cq(ibcq);
	int err;

	pthread_mutex_lock(&ctx->lock);
	rv_channel_unbind(cq);
	err = rocemu_destroy_cq(cq->cq);
	if (err && cq->channel)
		rv_channel_bind(cq->channel, cq);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return rv_fail(ctx, err, "ibv_destroy_cq");
	rv_cq_free(cq);
	return 0;
}

/* Under the CQ's lock: no thread polls the old ring while the daemon moves it. */
int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct rv_cq *cq = rv_cq(ibcq);
	int err;

	pthread_mutex_lock(&cq->lock);
	err = rocemu_resize_cq(cq->cq, cqe);
	if (!err)
		cq->ex.cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return err ? rv_fail(rv_ctx(ibcq->context), err, "ibv_resize_cq") : 0;
}
