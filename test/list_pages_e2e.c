/* list_pages_e2e: fills one rocemud with more clients, MRs and QPs than one PROTO_LIST page
 * holds, so that rocemuctl clients, mr and qp must walk several pages; the test compares
 * what they list with what this program says it made.
 *
 *   list_pages_e2e pages               print "page clients N mrs N qps N": the entries one
 *                                      PROTO_LIST reply holds of each kind
 *   list_pages_e2e SOCK MRS QPS CONTEXTS
 *       open CONTEXTS connections (clients); connection i allocates i + 1 PDs, so that each
 *       client's entry differs from its siblings' by its pds count; on the first, register
 *       MRS one-page MRs and create QPS RC QPs. Prints one line per object, in the fields
 *       rocemuctl's text views use to name it:
 *         client PID PDS
 *         mr PID LKEY RKEY IOVA        (keys and iova as 0x%x, like rocemuctl mr)
 *         qp PID QPN
 *       then "ready", and sleeps until killed. Exit 1 with a message when a call fails, 2
 *       for bad usage.
 * Nothing is destroyed on the way out: the daemon frees a client's objects when its
 * connection closes, which is how the holder is meant to end (killed). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/rocemu.h"

#define PROG "list_pages_e2e"

#define CQ_DEPTH 16
#define QP_DEPTH 4
#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static int call_failed(struct rocemu_context *ctx, const char *call, int err)
{
	const char *why = ctx ? rocemu_last_error(ctx) : "";

	fprintf(stderr, PROG ": %s: %s%s%s\n", call, strerror(err), why[0] ? ": " : "", why);
	return 1;
}

static int parse_count(const char *arg, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v > 100000)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Context i gets i + 1 PDs; returns the first PD, or NULL after a message. */
static struct rocemu_pd *open_client(const char *sock, unsigned i, struct rocemu_context **ctx)
{
	struct rocemu_pd *first = NULL;

	*ctx = rocemu_open(sock);
	if (!*ctx) {
		call_failed(NULL, "rocemu_open", errno);
		return NULL;
	}
	for (unsigned n = 0; n <= i; n++) {
		struct rocemu_pd *pd = rocemu_alloc_pd(*ctx);

		if (!pd) {
			call_failed(*ctx, "rocemu_alloc_pd", errno);
			return NULL;
		}
		if (!first)
			first = pd;
	}
	printf("client %d %u\n", (int)getpid(), i + 1);
	return first;
}

static int register_mrs(struct rocemu_context *ctx, struct rocemu_pd *pd, unsigned count)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *buf;

	if (!count)
		return 0;
	buf = mmap(NULL, page * count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return call_failed(NULL, "mmap", errno);
	for (unsigned i = 0; i < count; i++) {
		struct rocemu_mr *mr = rocemu_reg_mr(pd, buf + i * page, page, MR_ACCESS);

		if (!mr)
			return call_failed(ctx, "rocemu_reg_mr", errno);
		printf("mr %d 0x%x 0x%x 0x%" PRIxPTR "\n", (int)getpid(), mr->lkey, mr->rkey,
		       (uintptr_t)mr->addr);
	}
	return 0;
}

static int create_qps(struct rocemu_context *ctx, struct rocemu_pd *pd, unsigned count)
{
	struct rocemu_cq *cq;

	if (!count)
		return 0;
	cq = rocemu_create_cq(ctx, CQ_DEPTH);
	if (!cq)
		return call_failed(ctx, "rocemu_create_cq", errno);
	for (unsigned i = 0; i < count; i++) {
		struct rocemu_qp_init_attr a = {
			.send_cq = cq, .recv_cq = cq, .max_send_wr = QP_DEPTH,
			.max_recv_wr = QP_DEPTH, .max_send_sge = 1, .max_recv_sge = 1,
		};
		struct rocemu_qp *qp = rocemu_create_qp(pd, &a);

		if (!qp)
			return call_failed(ctx, "rocemu_create_qp", errno);
		printf("qp %d %u\n", (int)getpid(), qp->qp_num);
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: " PROG " pages\n"
			"       " PROG " SOCK MRS QPS CONTEXTS\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct rocemu_context *first_ctx = NULL;
	struct rocemu_pd *first_pd = NULL;
	unsigned mrs, qps, contexts;

	if (argc == 2 && !strcmp(argv[1], "pages")) {
		printf("page clients %zu mrs %zu qps %zu\n", PROTO_LIST_MAX(clients),
		       PROTO_LIST_MAX(mrs), PROTO_LIST_MAX(qps));
		return 0;
	}
	if (argc != 5 || parse_count(argv[2], &mrs) || parse_count(argv[3], &qps) ||
	    parse_count(argv[4], &contexts) || contexts == 0)
		return usage();
	for (unsigned i = 0; i < contexts; i++) {
		struct rocemu_context *ctx;
		struct rocemu_pd *pd = open_client(argv[1], i, &ctx);

		if (!pd)
			return 1;
		if (i == 0) {
			first_ctx = ctx;
			first_pd = pd;
		}
	}
	if (register_mrs(first_ctx, first_pd, mrs) || create_qps(first_ctx, first_pd, qps))
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
