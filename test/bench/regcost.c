/* regcost: the benchmark's (scripts/bench.sh) measurements that need librocemu itself.
 *
 *   regcost reg SOCK [-g GIB] [-r REPS]
 *       the cost of registering a GIB (default 1) GiB MR against the daemon at SOCK, next
 *       to a bare mlock of as much: REPS (default 5) times each, every time in a new child
 *       process on a fresh anonymous mapping (a child has an arena of its own, so no rep
 *       finds pages an earlier one moved). Times rocemu_reg_mr and rocemu_dereg_mr, mlock
 *       and munlock, and rocemu_reg_mr of a buffer whose pages were written first. The
 *       mlock is the registration target's baseline: a fresh anonymous mapping locked by the process
 *       that mapped it. Prints one JSON object of medians in seconds, the median of each
 *       rep's reg / mlock (neighbouring runs, so a noisy moment hits both), every sample,
 *       and the huge page settings that decide both costs.
 *   regcost objs SOCK DAEMON_PID [-m MRS] [-q QPS]
 *       the daemon's own memory (VmRSS - VmLck of /proc/DAEMON_PID/status) before and
 *       while this client holds MRS (default 1000) one-page MRs and QPS (default 1000) QPs
 *       (max_send_wr 128, max_recv_wr 16, moved to INIT) on one CQ; prints JSON in KiB.
 *   regcost lat SOCK_A SOCK_B [-n COUNT] [-s SIZE] [-t SECONDS] [--busy]
 *       post-to-completion latency of SIZE-byte (default 64) RDMA WRITEs from a QP on A to
 *       an MR on B, one at a time, like ib_write_lat's post-to-completion view: COUNT
 *       (default 10000) after LAT_WARMUP unmeasured, or as many as fit in SECONDS. Blocking: poll the CQ once, then sleep in
 *       rocemu_wait_cq (what rdma-write does); --busy: spin on rocemu_poll_cq. Prints the
 *       median, p99, mean, min and max in microseconds as JSON.
 *   regcost ops SOCK_A SOCK_B [-n COUNT] [-s SIZE]
 *       READ and SEND next to WRITE, from a QP on A to one on B, waiting as rdma-write does: goodput of COUNT
 *       (default 200) RDMA WRITEs, READs and SENDs of SIZE (default 1 MiB) with OPS_DEPTH
 *       in flight, their ratios to the WRITEs', the rates of 8-byte FETCH_ADDs and of
 *       64-byte WRITEs with OPS_DEPTH in flight, and the median round trip of a 64-byte
 *       SEND answered by a 64-byte SEND, as JSON.
 *
 * Every failure prints what failed (with the daemon's explanation) and exits 1; bad
 * usage exits 2. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/rocemu.h"

#define PROG "regcost"

#define MAX_REPS     32
#define PAGE         4096
#define QP_SEND_WR   128      /* rdma-write's default --tx-depth */
#define QP_RECV_WR   16
#define OBJS_CQE     4096
#define LAT_WARMUP   200
#define LAT_WAIT_MS  5000
#define QP_TIMEOUT   14
#define QP_RETRY_CNT 7
#define PSN_A        0x10203
#define PSN_B        0x40506
#define NS_PER_S     1000000000ull
#define ACCESS_ALL   (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define OPS_DEPTH    8
#define RD_ATOMIC    16

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: " PROG " reg SOCK [-g GIB] [-r REPS]\n"
		"       " PROG " objs SOCK DAEMON_PID [-m MRS] [-q QPS]\n"
		"       " PROG " lat SOCK_A SOCK_B [-n COUNT] [-s SIZE] [-t SECONDS] [--busy]\n"
		"       " PROG " ops SOCK_A SOCK_B [-n COUNT] [-s SIZE]\n");
	exit(2);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* A failed librocemu call: err is its errno value, the daemon may have said more. */
static void vdie(struct rocemu_context *ctx, const char *call, int err)
	__attribute__((noreturn));
static void vdie(struct rocemu_context *ctx, const char *call, int err)
{
	const char *why = ctx ? rocemu_last_error(ctx) : "";

	die("%s: %s%s%s%s", call, strerror(err), *why ? " (" : "", why, *why ? ")" : "");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static unsigned long num_arg(const char *s, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, PROG ": '%s' is not a number from %lu to %lu\n", s, lo, hi);
		exit(2);
	}
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
	double s[MAX_REPS];

	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print_samples(const char *name, const double *v, unsigned n)
{
	printf("\"%s\":[", name);
	for (unsigned i = 0; i < n; i++)
		printf("%s%.4f", i ? "," : "", v[i]);
	printf("]");
}

static struct rocemu_context *open_dev(const char *sock, struct rocemu_pd **pd)
{
	struct rocemu_context *ctx = rocemu_open(sock);

	if (!ctx)
		die("rocemu_open(%s): %s", sock, strerror(errno));
	if (!(*pd = rocemu_alloc_pd(ctx)))
		vdie(ctx, "rocemu_alloc_pd", errno);
	return ctx;
}

/* ---- reg: registration against mlock ---- */

enum reg_kind { REG_MR, REG_MR_TOUCHED, REG_MLOCK };

struct reg_sample {
	double setup, teardown;   /* reg / dereg, or mlock / munlock, seconds */
};

/* One measurement in this (child) process. */
static struct reg_sample reg_once(const char *sock, size_t len, enum reg_kind kind)
{
	struct reg_sample s;
	struct rocemu_context *ctx = NULL;
	struct rocemu_pd *pd = NULL;
	struct rocemu_mr *mr;
	uint64_t t0, t1, t2;
	int err;
	void *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (buf == MAP_FAILED)
		die("mmap %zu bytes: %s", len, strerror(errno));
	if (kind == REG_MLOCK) {
		t0 = now_ns();
		if (mlock(buf, len) < 0)
			die("mlock %zu bytes: %s", len, strerror(errno));
		t1 = now_ns();
		if (munlock(buf, len) < 0)
			die("munlock: %s", strerror(errno));
		t2 = now_ns();
	} else {
		ctx = open_dev(sock, &pd);
		if (kind == REG_MR_TOUCHED)
			memset(buf, 0x5a, len);
		t0 = now_ns();
		if (!(mr = rocemu_reg_mr(pd, buf, len, ACCESS_ALL)))
			vdie(ctx, "rocemu_reg_mr", errno);
		t1 = now_ns();
		if ((err = rocemu_dereg_mr(mr)))
			vdie(ctx, "rocemu_dereg_mr", err);
		t2 = now_ns();
		rocemu_dealloc_pd(pd);
		rocemu_close(ctx);
	}
	munmap(buf, len);
	s.setup = (double)(t1 - t0) / NS_PER_S;
	s.teardown = (double)(t2 - t1) / NS_PER_S;
	return s;
}

static struct reg_sample reg_in_child(const char *sock, size_t len, enum reg_kind kind)
{
	struct reg_sample s;
	int fds[2], status;
	pid_t pid;

	if (pipe(fds) < 0)
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		s = reg_once(sock, len, kind);
		if (write(fds[1], &s, sizeof(s)) != (ssize_t)sizeof(s))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &s, sizeof(s)) != (ssize_t)sizeof(s))
		s.setup = s.teardown = -1;
	close(fds[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
	    s.setup < 0)
		die("a measurement failed (see above)");
	return s;
}

/* The selected value of a transparent_hugepage setting ("always [madvise] never"), or
 * "none" when the kernel has no such file. */
static void thp_setting(const char *name, char *out, size_t out_len)
{
	char path[128], line[128], *open_br, *close_br;
	FILE *f;

	snprintf(out, out_len, "none");
	snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/%s", name);
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(line, sizeof(line), f) && (open_br = strchr(line, '[')) &&
	    (close_br = strchr(open_br, ']')))
		snprintf(out, out_len, "%.*s", (int)(close_br - open_br - 1), open_br + 1);
	fclose(f);
}

static int cmd_reg(int argc, char **argv)
{
	unsigned gib = 1, reps = 5;
	double reg[MAX_REPS], dereg[MAX_REPS], lock[MAX_REPS], unlock[MAX_REPS],
	       touched[MAX_REPS], ratio[MAX_REPS];
	char thp[32], shmem_thp[32];
	const char *sock;
	size_t len;
	int c;

	while ((c = getopt(argc, argv, "g:r:")) != -1) {
		switch (c) {
		case 'g': gib = (unsigned)num_arg(optarg, 1, 64); break;
		case 'r': reps = (unsigned)num_arg(optarg, 1, MAX_REPS); break;
		default: usage();
		}
	}
	if (argc - optind != 1)
		usage();
	sock = argv[optind];
	len = (size_t)gib << 30;
	/* interleaved, so a noisy moment of the machine hits both sides alike */
	for (unsigned i = 0; i < reps; i++) {
		struct reg_sample r = reg_in_child(sock, len, REG_MR);
		struct reg_sample m = reg_in_child(sock, len, REG_MLOCK);
		struct reg_sample t = reg_in_child(sock, len, REG_MR_TOUCHED);

		reg[i] = r.setup;
		dereg[i] = r.teardown;
		lock[i] = m.setup;
		unlock[i] = m.teardown;
		touched[i] = t.setup;
		ratio[i] = r.setup / m.setup;
	}
	thp_setting("enabled", thp, sizeof(thp));
	thp_setting("shmem_enabled", shmem_thp, sizeof(shmem_thp));
	printf("{\"gib\":%u,\"reps\":%u,\"reg_s\":%.4f,\"dereg_s\":%.4f,\"mlock_s\":%.4f,"
	       "\"munlock_s\":%.4f,\"reg_touched_s\":%.4f,\"reg_over_mlock\":%.3f,"
	       "\"thp\":\"%s\",\"shmem_thp\":\"%s\",", gib, reps, median(reg, reps),
	       median(dereg, reps), median(lock, reps), median(unlock, reps),
	       median(touched, reps), median(ratio, reps), thp, shmem_thp);
	print_samples("reg_samples", reg, reps);
	printf(",");
	print_samples("mlock_samples", lock, reps);
	printf(",");
	print_samples("reg_touched_samples", touched, reps);
	printf("}\n");
	return 0;
}

/* ---- objs: the daemon's memory with many MRs and QPs ---- */

struct proc_mem {
	long rss_kb, lck_kb;
};

static struct proc_mem proc_mem(long pid)
{
	struct proc_mem m = { -1, -1 };
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if (!(f = fopen(path, "re")))
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", &m.rss_kb);
		sscanf(line, "VmLck: %ld", &m.lck_kb);
	}
	fclose(f);
	if (m.rss_kb < 0 || m.lck_kb < 0)
		die("%s has no VmRSS or VmLck", path);
	return m;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int cmd_objs(int argc, char **argv)
{
	unsigned nmr = 1000, nqp = 1000;
	struct rocemu_device_attr dev;
	struct rocemu_context *ctx;
	struct rocemu_pd *pd;
	struct rocemu_cq *cq;
	struct proc_mem before, after;
	uint8_t *pages;
	long pid;
	int c, err;

	while ((c = getopt(argc, argv, "m:q:")) != -1) {
		switch (c) {
		case 'm': nmr = (unsigned)num_arg(optarg, 0, 100000); break;
		case 'q': nqp = (unsigned)num_arg(optarg, 0, 100000); break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	pid = (long)num_arg(argv[optind + 1], 1, 1ul << 30);
	raise_nofile();
	before = proc_mem(pid);
	ctx = open_dev(argv[optind], &pd);
	if ((err = rocemu_query_device(ctx, &dev)))
		vdie(ctx, "rocemu_query_device", err);
	if (nqp > dev.max_qp || nmr > dev.max_mr || QP_SEND_WR > dev.max_qp_wr)
		die("the device allows %u QPs, %u MRs and %u WRs a queue", dev.max_qp, dev.max_mr,
		    dev.max_qp_wr);
	pages = mmap(NULL, (size_t)(nmr ? nmr : 1) * PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pages == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	for (unsigned i = 0; i < nmr; i++)
		if (!rocemu_reg_mr(pd, pages + (size_t)i * PAGE, PAGE, ACCESS_ALL))
			vdie(ctx, "rocemu_reg_mr", errno);
	if (!(cq = rocemu_create_cq(ctx, OBJS_CQE)))
		vdie(ctx, "rocemu_create_cq", errno);
	for (unsigned i = 0; i < nqp; i++) {
		struct rocemu_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
						  .max_send_wr = QP_SEND_WR,
						  .max_recv_wr = QP_RECV_WR, .max_send_sge = 1,
						  .max_recv_sge = 1 };
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
		struct rocemu_qp *qp = rocemu_create_qp(pd, &ia);

		if (!qp)
			vdie(ctx, "rocemu_create_qp", errno);
		if ((err = rocemu_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS)))
			vdie(ctx, "rocemu_modify_qp(INIT)", err);
	}
	after = proc_mem(pid);
	printf("{\"mrs\":%u,\"qps\":%u,\"send_wr\":%u,\"recv_wr\":%u,\"cqe\":%u,"
	       "\"rss_kb_before\":%ld,\"lck_kb_before\":%ld,\"own_kb_before\":%ld,"
	       "\"rss_kb\":%ld,\"lck_kb\":%ld,\"own_kb\":%ld}\n", nmr, nqp, QP_SEND_WR,
	       QP_RECV_WR, OBJS_CQE, before.rss_kb, before.lck_kb,
	       before.rss_kb - before.lck_kb, after.rss_kb, after.lck_kb,
	       after.rss_kb - after.lck_kb);
	rocemu_close(ctx);   /* the daemon destroys everything this client held */
	return 0;
}

/* ---- lat: post-to-completion latency ---- */

struct end {
	struct rocemu_context *ctx;
	struct rocemu_pd *pd;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;
	struct rocemu_port_attr port;
	uint8_t *buf;
	struct rocemu_mr *mr;
};

static void end_open(struct end *e, const char *sock, size_t size)
{
	struct rocemu_qp_init_attr ia = { .max_send_wr = 16, .max_recv_wr = 16,
					  .max_send_sge = 1, .max_recv_sge = 1 };
	size_t len = (size + PAGE - 1) / PAGE * PAGE;
	int err;

	e->ctx = open_dev(sock, &e->pd);
	if ((err = rocemu_query_port(e->ctx, &e->port)))
		vdie(e->ctx, "rocemu_query_port", err);
	if (!(e->cq = rocemu_create_cq(e->ctx, 64)))
		vdie(e->ctx, "rocemu_create_cq", errno);
	ia.send_cq = ia.recv_cq = e->cq;
	if (!(e->qp = rocemu_create_qp(e->pd, &ia)))
		vdie(e->ctx, "rocemu_create_qp", errno);
	e->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->buf == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	memset(e->buf, 0x11, len);
	if (!(e->mr = rocemu_reg_mr(e->pd, e->buf, len, ACCESS_ALL)))
		vdie(e->ctx, "rocemu_reg_mr", errno);
}

static void end_connect(struct end *e, const struct end *peer, enum ibv_mtu mtu,
			uint32_t sq_psn, uint32_t rq_psn)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						       IBV_ACCESS_REMOTE_READ |
						       IBV_ACCESS_REMOTE_ATOMIC };
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = peer->qp->qp_num,
		.rq_psn = rq_psn, .min_rnr_timer = 12, .max_dest_rd_atomic = RD_ATOMIC,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->port.gid, .hop_limit = 64 } },
	};
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = sq_psn,
				   .timeout = QP_TIMEOUT, .retry_cnt = QP_RETRY_CNT,
				   .rnr_retry = 7, .max_rd_atomic = RD_ATOMIC };
	int err;

	if ((err = rocemu_modify_qp(e->qp, &init, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS)))
		vdie(e->ctx, "rocemu_modify_qp(INIT)", err);
	if ((err = rocemu_modify_qp(e->qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						 IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC)))
		vdie(e->ctx, "rocemu_modify_qp(RTR)", err);
	if ((err = rocemu_modify_qp(e->qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						 IBV_QP_MAX_QP_RD_ATOMIC)))
		vdie(e->ctx, "rocemu_modify_qp(RTS)", err);
}

/* One completion: spinning, or polling once and then sleeping as rdma-write does. */
static void await_one(struct end *a, bool busy, uint64_t k)
{
	struct ibv_wc wc;
	int n, err;

	for (;;) {
		n = rocemu_poll_cq(a->cq, 1, &wc);
		if (n < 0)
			vdie(a->ctx, "rocemu_poll_cq", errno);
		if (n == 1)
			break;
		if (!busy && (err = rocemu_wait_cq(a->cq, LAT_WAIT_MS)))
			vdie(a->ctx, "rocemu_wait_cq", err);
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != k)
		die("write %" PRIu64 ": completion status %d, wr_id %" PRIu64, k, (int)wc.status,
		    (uint64_t)wc.wr_id);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static int cmd_lat(int argc, char **argv)
{
	static const struct option longs[] = { { "busy", no_argument, NULL, 'B' },
					       { NULL, 0, NULL, 0 } };
	unsigned count = 10000, size = 64, done = 0, seconds = 0;
	bool busy = false;
	struct end a = { 0 }, b = { 0 };
	enum ibv_mtu mtu;
	uint64_t *lat, sum = 0, end = UINT64_MAX;
	int c;

	while ((c = getopt_long(argc, argv, "n:s:t:", longs, NULL)) != -1) {
		switch (c) {
		case 'n': count = (unsigned)num_arg(optarg, 1, 10000000); break;
		case 't': seconds = (unsigned)num_arg(optarg, 1, 3600); break;
		case 's': size = (unsigned)num_arg(optarg, 1, 1u << 20); break;
		case 'B': busy = true; break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	if (!(lat = calloc(count, sizeof(*lat))))
		die("calloc: %s", strerror(errno));
	end_open(&a, argv[optind], size);
	end_open(&b, argv[optind + 1], size);
	mtu = a.port.active_mtu < b.port.active_mtu ? a.port.active_mtu : b.port.active_mtu;
	end_connect(&a, &b, mtu, PSN_A, PSN_B);
	end_connect(&b, &a, mtu, PSN_B, PSN_A);
	if (seconds)
		end = now_ns() + seconds * NS_PER_S;
	for (uint64_t k = 0; k < count + LAT_WARMUP && !(done && now_ns() >= end); k++) {
		struct ibv_sge sge = { .addr = (uintptr_t)a.buf, .length = size,
				       .lkey = a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { .remote_addr = (uintptr_t)b.buf,
						       .rkey = b.mr->rkey } },
				  *bad;
		uint64_t t0 = now_ns();
		int err = rocemu_post_send(a.qp, &wr, &bad);

		if (err)
			vdie(a.ctx, "rocemu_post_send", err);
		await_one(&a, busy, k);
		if (k >= LAT_WARMUP)
			lat[done++] = now_ns() - t0;
	}
	qsort(lat, done, sizeof(*lat), cmp_u64);
	for (unsigned i = 0; i < done; i++)
		sum += lat[i];
	printf("{\"mode\":\"write-lat\",\"busy\":%s,\"size\":%u,\"count\":%u,\"mtu\":%u,"
	       "\"median_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f,\"min_us\":%.2f,"
	       "\"max_us\":%.2f}\n", busy ? "true" : "false", size, done, 128u << mtu,
	       lat[done / 2] / 1e3, lat[(size_t)((done - 1) * 0.99)] / 1e3,
	       (double)sum / done / 1e3, lat[0] / 1e3, lat[done - 1] / 1e3);
	free(lat);
	rocemu_close(a.ctx);
	rocemu_close(b.ctx);
	return 0;
}

/* ---- ops: READ, SEND and atomics next to WRITE ---- */

/* One completion on e's CQ, polling once and then sleeping on it (two daemons and this
 * client share the machine's cores: a spinning client would take the daemons' time); its
 * status must be success. */
static struct ibv_wc await_ok(struct end *e, const char *what)
{
	struct ibv_wc wc;
	int n, err;

	while ((n = rocemu_poll_cq(e->cq, 1, &wc)) == 0)
		if ((err = rocemu_wait_cq(e->cq, LAT_WAIT_MS)))
			vdie(e->ctx, "rocemu_wait_cq", err);
	if (n < 0)
		vdie(e->ctx, "rocemu_poll_cq", errno);
	if (wc.status != IBV_WC_SUCCESS)
		die("%s: completion status %d", what, (int)wc.status);
	return wc;
}

static void post_recv_at(struct end *e, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, (uint32_t)len, e->mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = rocemu_post_recv(e->qp, &wr, &bad);

	if (err)
		vdie(e->ctx, "rocemu_post_recv", err);
}

static void post_op(struct end *a, const struct end *b, enum ibv_wr_opcode op, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)a->buf, (uint32_t)len, a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int err;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)b->buf;
		wr.wr.atomic.rkey = b->mr->rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)b->buf;
		wr.wr.rdma.rkey = b->mr->rkey;
	}
	if ((err = rocemu_post_send(a->qp, &wr, &bad)))
		vdie(a->ctx, "rocemu_post_send", err);
}

/* count operations of len bytes, OPS_DEPTH in flight: seconds from the first post to the
 * last completion. B keeps a receive posted per SEND in flight. */
static double run_ops(struct end *a, struct end *b, enum ibv_wr_opcode op, size_t len,
		      unsigned count)
{
	unsigned posted = 0, done = 0, received = 0;
	uint64_t t0 = now_ns();

	if (op == IBV_WR_SEND)
		for (unsigned i = 0; i < OPS_DEPTH; i++)
			post_recv_at(b, len);
	while (done < count) {
		while (posted < count && posted - done < OPS_DEPTH) {
			post_op(a, b, op, len);
			posted++;
		}
		await_ok(a, "an operation");
		done++;
		if (op != IBV_WR_SEND)
			continue;
		while (received < done) {
			await_ok(b, "B's receive");
			received++;
			post_recv_at(b, len);
		}
	}
	return (double)(now_ns() - t0) / NS_PER_S;
}

/* The median round trip of a 64-byte SEND from A answered by one from B, both polled. */
static double send_rtt_us(struct end *a, struct end *b, unsigned count)
{
	uint64_t *rtt = calloc(count, sizeof(*rtt)), median;

	if (!rtt)
		die("calloc: %s", strerror(errno));
	post_recv_at(a, 64);
	post_recv_at(b, 64);
	for (unsigned k = 0; k < count + LAT_WARMUP; k++) {
		uint64_t t0 = now_ns();

		post_op(a, b, IBV_WR_SEND, 64);
		await_ok(b, "B's receive");
		post_recv_at(b, 64);
		post_op(b, a, IBV_WR_SEND, 64);
		/* A's send completion and its receive, in either order */
		await_ok(a, "A's completions");
		await_ok(a, "A's completions");
		post_recv_at(a, 64);
		await_ok(b, "B's send");
		if (k >= LAT_WARMUP)
			rtt[k - LAT_WARMUP] = now_ns() - t0;
	}
	qsort(rtt, count, sizeof(*rtt), cmp_u64);
	median = rtt[count / 2];
	free(rtt);
	return median / 1e3;
}

static int cmd_ops(int argc, char **argv)
{
	unsigned count = 200, size = 1u << 20;
	struct end a = { 0 }, b = { 0 };
	double wr, rd, sd, fa, w64;
	enum ibv_mtu mtu;
	int c;

	while ((c = getopt(argc, argv, "n:s:")) != -1) {
		switch (c) {
		case 'n': count = (unsigned)num_arg(optarg, 1, 1000000); break;
		case 's': size = (unsigned)num_arg(optarg, 1, 1u << 30); break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	end_open(&a, argv[optind], size);
	end_open(&b, argv[optind + 1], size);
	mtu = a.port.active_mtu < b.port.active_mtu ? a.port.active_mtu : b.port.active_mtu;
	end_connect(&a, &b, mtu, PSN_A, PSN_B);
	end_connect(&b, &a, mtu, PSN_B, PSN_A);
	wr = run_ops(&a, &b, IBV_WR_RDMA_WRITE, size, count);
	rd = run_ops(&a, &b, IBV_WR_RDMA_READ, size, count);
	sd = run_ops(&a, &b, IBV_WR_SEND, size, count);
	fa = run_ops(&a, &b, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 20000);
	w64 = run_ops(&a, &b, IBV_WR_RDMA_WRITE, 64, 20000);
	printf("{\"mode\":\"ops\",\"size\":%u,\"count\":%u,\"mtu\":%u,\"write_mbps\":%.1f,"
	       "\"read_mbps\":%.1f,\"send_mbps\":%.1f,\"read_vs_write\":%.3f,"
	       "\"send_vs_write\":%.3f,\"fetch_add_per_s\":%.0f,\"write64_per_s\":%.0f,"
	       "\"fetch_add_vs_write64\":%.3f,\"send_rtt_median_us\":%.2f}\n",
	       size, count, 128u << mtu, (double)size * count / wr / (1 << 20),
	       (double)size * count / rd / (1 << 20), (double)size * count / sd / (1 << 20),
	       wr / rd, wr / sd, 20000 / fa, 20000 / w64, w64 / fa, send_rtt_us(&a, &b, 2000));
	rocemu_close(a.ctx);
	rocemu_close(b.ctx);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int, char **);
	} cmds[] = { { "reg", cmd_reg }, { "objs", cmd_objs }, { "lat", cmd_lat },
		     { "ops", cmd_ops } };

	if (argc < 2)
		usage();
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 1, argv + 1);
	usage();
}
