/* cm_peer: an rdma_cm program for rdmacm.test.sh, built against librdmacm alone and run
 * under rocemu-run (or on the kernel's rdma_cm: it is a plain librdmacm program).
 *
 *   cm_peer reject-server PORT N        listens, rejects N requests with private data
 *   cm_peer reject-client ADDR PORT     connects; prints the event it gets instead
 *   cm_peer cycle-server PORT N         accepts N connections one after another, each
 *                                       with an RC QP, until its peer disconnects; prints
 *                                       where a cycle's time went
 *   cm_peer cycle-client ADDR PORT N    connects, sends one message, disconnects, N times;
 *                                       prints the rate, and where a cycle's time went
 *   cm_peer sync-client ADDR PORT       the same once with a synchronous id (no channel):
 *                                       rdma_disconnect returns with DISCONNECTED in
 *                                       id->event, as librdmacm's; PORT "-": the first line of
 *                                       the standard input, read once the library is up
 *   cm_peer parallel-resolve NOBODY HERE  one thread resolves an address nobody answers
 *                                       for; another's rdma_listen on HERE returns before
 *                                       that resolution ends
 *   cm_peer destroy-drops ADDR          an id destroyed with an event unread in the
 *                                       channel: the channel has nothing left to read
 *   cm_peer late-server PORT            takes a request without answering it, and expects
 *                                       it REJECTED (the peer gave up: reason 4, timeout)
 *   cm_peer give-up-client ADDR PORT    connects, and destroys its id before an answer
 *   cm_peer channels ADDR N             listens on ADDR with up to N ids, each on a channel
 *                                       of its own, until one fails; prints how many, then
 *                                       holds them 2 s
 *   cm_peer src-ports ADDR N            resolves ADDR N times with no source given; prints
 *                                       the source port each id was bound to
 *   cm_peer port-rules ADDR PORT        binds and listens on ADDR:PORT as the kernel's
 *                                       rules for a port tell apart (REUSEADDR, the
 *                                       wildcard); prints each step's result
 *   cm_peer disconnect-rules ADDR PORT  listens on ADDR:PORT and connects to it, and
 *                                       prints what rdma_disconnect answers in each
 *                                       state of a connection, at both ends
 *   cm_peer call-rules ADDR PORT        the same for calls out of their order or made
 *                                       twice, on an id in each state
 *   cm_peer event-rules ADDR PORT       the same for the events of a connection, a
 *                                       reject and a port nobody listens on: each
 *                                       event's status, private data and parameters
 *   cm_peer ud-rules ADDR PORT          the same for the UDP port space (SIDR): the
 *                                       request, the answer, a reject, nobody listening
 *   cm_peer qp-rules ADDR PORT          the same for what a connection leaves: the
 *                                       client's route, both QPs' attributes
 *   cm_peer ep-rules ADDR PORT          the same for synchronous ids (rdma_create_ep,
 *                                       rdma_get_request): each call's answer and the
 *                                       event it leaves in id->event
 *   cm_peer mcast-rules ADDR GROUP      the same for multicast joins and leaves in the
 *                                       UDP port space, and the join's event
 *   cm_peer late-listen MS              binds with no port, prints "bound PORT", listens
 *                                       MS ms later, and takes one connection
 *   cm_peer any-ports ADDR N            listens on ADDR with up to N ids bound with no
 *                                       port, until one fails; prints their ports, then
 *                                       what a listen on the first one's port again says
 *   cm_peer stale ADDR                  calls given an id or a channel already destroyed,
 *                                       or a pointer that never was one, each refused
 *                                       with EINVAL (rdma_destroy_event_channel of a
 *                                       channel destroyed already, or of a stray pointer:
 *                                       ignored); then a new id resolves ADDR. rocemu only:
 *                                       librdmacm follows such pointers
 * Exit 0 when every step gave the event expected; each failure is printed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REJECT_DATA "not today"
#define EVENT_TIMEOUT_MS 20000

static struct rdma_event_channel *channel;

static int die(const char *what)
{
	fprintf(stderr, "cm_peer: %s: %s\n", what, strerror(errno));
	return 1;
}

/* The next event, which must be of the type expected, or of the other one when that is
 * not RDMA_CM_EVENT_ADDR_RESOLVED (0), with its status 0; NULL otherwise. */
static struct rdma_cm_event *expect_either_on(struct rdma_event_channel *ch,
					      enum rdma_cm_event_type type,
					      enum rdma_cm_event_type other)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		die("rdma_get_cm_event");
		return NULL;
	}
	if ((ev->event != type && (other == 0 || ev->event != other)) || ev->status) {
		fprintf(stderr, "cm_peer: expected %s, got %s (status %d)\n", rdma_event_str(type),
			rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static struct rdma_cm_event *expect_either(enum rdma_cm_event_type type,
					   enum rdma_cm_event_type other)
{
	return expect_either_on(channel, type, other);
}

static struct rdma_cm_event *expect(enum rdma_cm_event_type type)
{
	return expect_either(type, 0);
}

/* The next event on ch, of the type expected (any status), acknowledged; its status in
 * *status, its id in *id when id is set. -1 and a message otherwise. */
static int take_on(struct rdma_event_channel *ch, enum rdma_cm_event_type type, int *status,
		   struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		return die("rdma_get_cm_event");
	if (ev->event != type) {
		fprintf(stderr, "cm_peer: expected %s, got %s (status %d)\n", rdma_event_str(type),
			rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -1;
	}
	*status = ev->status;
	if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

static int addr_of(const char *host, const char *port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	int rc = getaddrinfo(host, port, &hints, &ai);

	if (rc) {
		fprintf(stderr, "cm_peer: %s: %s\n", host ? host : "(any)", gai_strerror(rc));
		return -1;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

static struct rdma_cm_id *listen_on(const char *port)
{
	struct sockaddr_storage ss;
	struct rdma_cm_id *id;

	if (addr_of(NULL, port, &ss) || rdma_create_id(channel, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_bind_addr(id, (struct sockaddr *)&ss) || rdma_listen(id, 16)) {
		die("bind/listen");
		return NULL;
	}
	printf("listening\n");   /* the test starts the client when it sees this */
	fflush(stdout);
	return id;
}

static int reject_server(const char *port, int n)
{
	struct rdma_cm_id *listen = listen_on(port);

	if (!listen)
		return 1;
	for (int i = 0; i < n; i++) {
		struct rdma_cm_event *ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
		struct rdma_cm_id *id;

		if (!ev)
			return 1;
		id = ev->id;
		rdma_ack_cm_event(ev);
		if (rdma_reject(id, REJECT_DATA, sizeof(REJECT_DATA)))
			return die("rdma_reject");
		rdma_destroy_id(id);
	}
	rdma_destroy_id(listen);
	return 0;
}

/* The init attributes of the small QPs this program makes: a few WRs, one SGE each. */
static struct ibv_qp_init_attr small_qp(enum ibv_qp_type type)
{
	return (struct ibv_qp_init_attr){ .qp_type = type,
					  .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						   .max_send_sge = 1, .max_recv_sge = 1 } };
}

/* An id of port space ps resolved to ADDR:PORT, with a QP when qp is set (UD in the UDP
 * port space, RC otherwise). */
static struct rdma_cm_id *resolved_in(const char *addr, const char *port,
				      enum rdma_port_space ps, bool qp)
{
	struct ibv_qp_init_attr attr = small_qp(ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC);
	struct sockaddr_storage dst;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (addr_of(addr, port, &dst) || rdma_create_id(channel, &id, NULL, ps))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, EVENT_TIMEOUT_MS)) {
		die("rdma_resolve_addr");
		return NULL;
	}
	if (!(ev = expect(RDMA_CM_EVENT_ADDR_RESOLVED)))
		return NULL;
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, EVENT_TIMEOUT_MS)) {
		die("rdma_resolve_route");
		return NULL;
	}
	if (!(ev = expect(RDMA_CM_EVENT_ROUTE_RESOLVED)))
		return NULL;
	rdma_ack_cm_event(ev);
	if (qp && rdma_create_qp(id, NULL, &attr)) {
		die("rdma_create_qp");
		return NULL;
	}
	return id;
}

/* ... in the TCP port space */
static struct rdma_cm_id *resolved(const char *addr, const char *port, bool qp)
{
	return resolved_in(addr, port, RDMA_PS_TCP, qp);
}

static int reject_client(const char *addr, const char *port)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *id = resolved(addr, port, true);
	struct rdma_cm_event *ev;

	if (!id)
		return 1;
	if (rdma_connect(id, &param))
		return die("rdma_connect");
	if (rdma_get_cm_event(channel, &ev))
		return die("rdma_get_cm_event");
	printf("%s status %d private_data_len %u private_data '%.*s'\n",
	       rdma_event_str(ev->event), ev->status, ev->param.conn.private_data_len,
	       ev->param.conn.private_data ? (int)strnlen(ev->param.conn.private_data,
							  ev->param.conn.private_data_len) : 0,
	       ev->param.conn.private_data ? (const char *)ev->param.conn.private_data : "");
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

/* Where a cycle's time goes, summed over the cycles: each step ends where the next starts. */
enum cycle_step { STEP_RESOLVE, STEP_CONNECT, STEP_ESTABLISHED, STEP_SEND, STEP_DISCONNECT,
		  STEP_DISCONNECTED, STEP_DESTROY, STEP_COUNT };
static const char *const step_names[STEP_COUNT] = {
	"resolve+create_qp", "rdma_connect", "until ESTABLISHED", "SEND completed",
	"rdma_disconnect", "until DISCONNECTED", "destroy" };
/* ... and at the server's end */
enum server_step { SERVE_WAIT, SERVE_CREATE_QP, SERVE_REG_MR, SERVE_ACCEPT, SERVE_CONNECTED,
		   SERVE_TEARDOWN, SERVE_COUNT };
static const char *const serve_names[SERVE_COUNT] = {
	"until CONNECT_REQUEST", "rdma_create_qp", "ibv_reg_mr", "post_recv+rdma_accept",
	"until DISCONNECTED", "teardown" };

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Adds the time since *mark to step's sum, and moves the mark. */
static void step_done(double *sum, int step, double *mark)
{
	double now = seconds();

	sum[step] += now - *mark;
	*mark = now;
}

static void print_steps(const char *const *names, const double *sum, int count, int n)
{
	printf("ms a cycle:");
	for (int s = 0; s < count; s++)
		printf(" %s %.2f%s", names[s], sum[s] * 1e3 / n, s + 1 < count ? "," : "\n");
}

/* n connections taken on the listening id, each until its peer disconnects */
static int serve(struct rdma_cm_id *listen, int n)
{
	static char buf[64];
	double sum[SERVE_COUNT] = { 0 }, mark;

	mark = seconds();
	for (int i = 0; i < n; i++) {
		struct rdma_cm_event *ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
		struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
						 .rnr_retry_count = 7 };
		/* anew each time: rdma_create_qp writes the CQs it made back into it */
		struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
		struct ibv_recv_wr wr = { 0 }, *bad;
		struct ibv_sge sge;
		struct ibv_mr *mr;
		struct rdma_cm_id *id;

		if (!ev)
			return 1;
		id = ev->id;
		rdma_ack_cm_event(ev);
		step_done(sum, SERVE_WAIT, &mark);
		if (rdma_create_qp(id, NULL, &attr))
			return die("rdma_create_qp");
		step_done(sum, SERVE_CREATE_QP, &mark);
		mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		if (!mr)
			return die("ibv_reg_mr");
		step_done(sum, SERVE_REG_MR, &mark);
		sge = (struct ibv_sge){ (uintptr_t)buf, sizeof(buf), mr->lkey };
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(id->qp, &wr, &bad) || rdma_accept(id, &param))
			return die("post_recv/accept");
		step_done(sum, SERVE_ACCEPT, &mark);
		/* A DREQ that comes before the RTU (lost, or late in a slow guest) ends the
		 * connection without ESTABLISHED: the kernel's CM goes from REP_SENT to
		 * DREQ_RCVD and reports only DISCONNECTED (seen once with rxe in two guests). */
		if (!(ev = expect_either(RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_DISCONNECTED)))
			return 1;
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			rdma_ack_cm_event(ev);
			if (!(ev = expect(RDMA_CM_EVENT_DISCONNECTED)))
				return 1;
		}
		rdma_ack_cm_event(ev);
		step_done(sum, SERVE_CONNECTED, &mark);
		rdma_disconnect(id);
		rdma_destroy_qp(id);
		ibv_dereg_mr(mr);
		rdma_destroy_id(id);
		step_done(sum, SERVE_TEARDOWN, &mark);
	}
	rdma_destroy_id(listen);
	print_steps(serve_names, sum, SERVE_COUNT, n);
	return 0;
}

static int cycle_server(const char *port, int n)
{
	struct rdma_cm_id *listen = listen_on(port);

	if (!listen)
		return 1;
	return serve(listen, n);
}

/* Binds with no port, tells it, and listens only ms later (as qperf 0.4.11 does, slowly) */
static int late_listen(int ms)
{
	struct sockaddr_storage ss;
	struct rdma_cm_id *listen;

	if (addr_of(NULL, "0", &ss) || rdma_create_id(channel, &listen, NULL, RDMA_PS_TCP))
		return 1;
	if (rdma_bind_addr(listen, (struct sockaddr *)&ss))
		return die("rdma_bind_addr");
	printf("bound %u\n", ntohs(rdma_get_src_port(listen)));
	fflush(stdout);
	usleep((useconds_t)ms * 1000);
	if (rdma_listen(listen, 1))
		return die("rdma_listen");
	return serve(listen, 1);
}

static int send_one(struct rdma_cm_id *id)
{
	static char msg[16] = "hello";
	struct ibv_sge sge = { (uintptr_t)msg, sizeof(msg), 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(id->qp, &wr, &bad))
		return die("ibv_post_send");
	for (long spins = 0; (n = ibv_poll_cq(id->send_cq, 1, &wc)) == 0; spins++)
		if (spins > 200000000)
			break;
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "cm_peer: the SEND completed %s\n",
			n == 1 ? ibv_wc_status_str(wc.status) : "never");
		return 1;
	}
	return 0;
}

static int one_cycle(const char *addr, const char *port, double *sum)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	double mark = seconds();
	struct rdma_cm_id *id = resolved(addr, port, true);
	struct rdma_cm_event *ev;

	if (!id)
		return 1;
	step_done(sum, STEP_RESOLVE, &mark);
	if (rdma_connect(id, &param))
		return die("rdma_connect");
	step_done(sum, STEP_CONNECT, &mark);
	if (!(ev = expect(RDMA_CM_EVENT_ESTABLISHED)))
		return 1;
	rdma_ack_cm_event(ev);
	step_done(sum, STEP_ESTABLISHED, &mark);
	if (send_one(id))
		return 1;
	step_done(sum, STEP_SEND, &mark);
	if (rdma_disconnect(id))
		return die("rdma_disconnect");
	step_done(sum, STEP_DISCONNECT, &mark);
	if (!(ev = expect(RDMA_CM_EVENT_DISCONNECTED)))
		return 1;
	rdma_ack_cm_event(ev);
	step_done(sum, STEP_DISCONNECTED, &mark);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	step_done(sum, STEP_DESTROY, &mark);
	return 0;
}

static int cycle_client(const char *addr, const char *port, int n)
{
	double sum[STEP_COUNT] = { 0 }, start = seconds(), took;

	for (int i = 0; i < n; i++)
		if (one_cycle(addr, port, sum))
			return 1;
	took = seconds() - start;
	printf("%d connections (connect, one SEND, disconnect) in %.2f s: %.0f per second\n", n,
	       took, n / took);
	print_steps(step_names, sum, STEP_COUNT, n);
	return 0;
}


static int sync_client(const char *addr, const char *port)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct sockaddr_storage dst;
	struct rdma_cm_id *id;
	int got;

	char line[16];

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return die("rdma_create_id (synchronous)");
	/* "-": the port is the first line of the standard input, read with the library
	 * ready, so the REQ follows it at once */
	if (!strcmp(port, "-") && !fgets(line, sizeof(line), stdin))
		return die("no port on the standard input");
	if (addr_of(addr, strcmp(port, "-") ? port : strtok(line, "\n"), &dst))
		return 1;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    rdma_resolve_route(id, 2000))
		return die("rdma_resolve_addr/route");
	if (rdma_create_qp(id, NULL, &attr))
		return die("rdma_create_qp");
	if (rdma_connect(id, &param))
		return die("rdma_connect");
	if (send_one(id))
		return 1;
	if (rdma_disconnect(id))
		return die("rdma_disconnect");
	got = id->event ? (int)id->event->event : -1;
	if (got != RDMA_CM_EVENT_DISCONNECTED) {
		fprintf(stderr, "cm_peer: after rdma_disconnect id->event is %s\n",
			got < 0 ? "NULL" : rdma_event_str(got));
		return 1;
	}
	printf("rdma_disconnect on a synchronous id returned with %s in id->event\n",
	       rdma_event_str(got));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

static volatile int resolving, resolved_already;

static void *resolve_nobody(void *arg)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(channel, &id, NULL, RDMA_PS_TCP)) {
		die("rdma_create_id");
		return NULL;
	}
	resolving = 1;
	if (rdma_resolve_addr(id, NULL, arg, 2000))
		die("rdma_resolve_addr");
	resolved_already = 1;
	return id;
}

static int parallel_resolve(const char *nobody, const char *here)
{
	struct sockaddr_storage dst, src;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *r;
	pthread_t t;
	int before;

	if (addr_of(nobody, "7", &dst) || addr_of(here, "0", &src))
		return 1;
	if (pthread_create(&t, NULL, resolve_nobody, &dst))
		return die("pthread_create");
	while (!resolving)
		usleep(1000);
	usleep(200000);               /* well into its wait for the neighbour */
	if (rdma_create_id(channel, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&src) || rdma_listen(l, 1))
		return die("rdma_listen");
	before = !resolved_already;
	pthread_join(t, (void **)&r);
	if (!r || rdma_get_cm_event(channel, &ev))
		return die("the resolution's event");
	printf("rdma_listen returned %s the other thread's resolution ended (%s, %d)\n",
	       before ? "before" : "after", rdma_event_str(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(r);
	rdma_destroy_id(l);
	return before ? 0 : 1;
}

static int destroy_drops(const char *addr)
{
	struct sockaddr_storage dst;
	struct pollfd pfd = { .events = POLLIN };
	struct rdma_cm_id *id;
	int n;

	if (addr_of(addr, "7", &dst))
		return 1;
	if (rdma_create_id(channel, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		return die("rdma_resolve_addr");
	usleep(100000);               /* ADDR_RESOLVED is in the channel, unread */
	rdma_destroy_id(id);
	pfd.fd = channel->fd;
	n = poll(&pfd, 1, 100);
	printf("after rdma_destroy_id the channel has %s to read\n", n ? "something" : "nothing");
	return n ? 1 : 0;
}

static int late_server(const char *port)
{
	struct rdma_cm_id *listen = listen_on(port), *child;
	struct rdma_cm_event *ev = NULL;

	if (!listen)
		return 1;
	if (!(ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST)))
		return 1;
	child = ev->id;
	rdma_ack_cm_event(ev);
	if (rdma_get_cm_event(channel, &ev))
		return die("rdma_get_cm_event");
	printf("the request not answered: %s status %d on %s\n", rdma_event_str(ev->event),
	       ev->status, ev->id == child ? "its id" : "another id");
	if (ev->event != RDMA_CM_EVENT_REJECTED || ev->id != child) {
		rdma_ack_cm_event(ev);
		return 1;
	}
	rdma_ack_cm_event(ev);
	if (!rdma_accept(child, &(struct rdma_conn_param){ .qp_num = 1 }) || errno != EINVAL)
		return die("rdma_accept of a request given up (EINVAL expected)");
	rdma_destroy_id(child);
	rdma_destroy_id(listen);
	return 0;
}

static int give_up_client(const char *addr, const char *port)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *id = resolved(addr, port, true);

	if (!id)
		return 1;
	if (rdma_connect(id, &param))
		return die("rdma_connect");
	usleep(300000);               /* the REQ is there, and not answered */
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

static int channels(const char *addr, int n)
{
	struct sockaddr_storage ss;
	int i;

	if (addr_of(addr, "0", &ss))
		return 1;
	for (i = 0; i < n; i++) {
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct rdma_cm_id *id;

		if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			break;
		if (rdma_bind_addr(id, (struct sockaddr *)&ss) || rdma_listen(id, 1))
			break;
	}
	printf("%d listeners on channels of their own, then: %s\n", i,
	       i < n ? strerror(errno) : "none refused");
	fflush(stdout);
	sleep(2);
	return 0;
}

/* Whether call (its result rc) was refused with EINVAL; says so either way. */
static bool refused(const char *call, int rc)
{
	bool ok = rc == -1 && errno == EINVAL;

	printf("%s: %s\n", call, ok ? "EINVAL" : rc ? strerror(errno) : "accepted");
	return ok;
}

/* perftest 4.5's -R client, refused once, goes on through the ids and the channel it has
 * just destroyed: a library that followed them would read freed memory. */
static int stale(const char *addr)
{
	struct rdma_cm_id *gone, *stray = (struct rdma_cm_id *)(uintptr_t)0x9d, *id;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct sockaddr_storage dst;
	struct rdma_cm_event *ev;
	bool ok = true;

	if (addr_of(addr, "7", &dst) || !ch)
		return 1;
	if (rdma_create_id(ch, &gone, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(gone, NULL, (struct sockaddr *)&dst, 2000))
		return die("rdma_resolve_addr");
	rdma_destroy_id(gone);
	ok &= refused("rdma_resolve_addr of a destroyed id",
		      rdma_resolve_addr(gone, NULL, (struct sockaddr *)&dst, 2000));
	ok &= refused("rdma_bind_addr of a destroyed id",
		      rdma_bind_addr(gone, (struct sockaddr *)&dst));
	ok &= refused("rdma_connect of a destroyed id", rdma_connect(gone, &param));
	ok &= refused("rdma_destroy_id of a destroyed id", rdma_destroy_id(gone));
	ok &= refused("rdma_resolve_addr of a stray pointer",
		      rdma_resolve_addr(stray, NULL, (struct sockaddr *)&dst, 2000));
	ok &= refused("rdma_listen of a stray pointer", rdma_listen(stray, 1));
	if (rdma_get_src_port(stray)) {
		printf("rdma_get_src_port of a stray pointer: not 0\n");
		ok = false;
	}
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel((struct rdma_event_channel *)stray);
	ok &= refused("rdma_get_cm_event on a stray pointer",
		      rdma_get_cm_event((struct rdma_event_channel *)stray, &ev));
	ok &= refused("rdma_create_id on a destroyed channel",
		      rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
	ok &= refused("rdma_get_cm_event on a destroyed channel", rdma_get_cm_event(ch, &ev));
	if (rdma_create_id(channel, &id, NULL, RDMA_PS_TCP))
		return die("rdma_create_id");
	ok &= refused("rdma_migrate_id to a destroyed channel", rdma_migrate_id(id, ch));
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    !(ev = expect(RDMA_CM_EVENT_ADDR_RESOLVED)))
		return die("a new id's rdma_resolve_addr afterwards");
	printf("afterwards a new id resolves %s\n", addr);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	return ok ? 0 : 1;
}

/* An id bound to addr:port (REUSEADDR first when reuse); the bind's errno, or 0 */
static int bound_id(const char *addr, const char *port, bool reuse, struct rdma_cm_id **id)
{
	struct sockaddr_storage ss;
	int on = 1;

	if (addr_of(addr, port, &ss) || rdma_create_id(channel, id, NULL, RDMA_PS_TCP))
		return EINVAL;
	if (reuse && rdma_set_option(*id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on,
				     sizeof(on)))
		return errno;
	return rdma_bind_addr(*id, (struct sockaddr *)&ss) ? errno : 0;
}

static const char *result(int err)
{
	return err ? strerror(err) : "ok";
}

/* The kernel's rules for a port, step by step: one bind of an address and port; another
 * of the same; of the wildcard and the port; two binds with REUSEADDR; a listen on one
 * while the other holds the port, and alone; a bind with REUSEADDR of a port listened on;
 * REUSEADDR set on a listener. */
static int port_rules(const char *addr, const char *port)
{
	struct rdma_cm_id *a, *b, *c;
	int on = 1, off = 0;

	printf("bind: %s", result(bound_id(addr, port, false, &a)));
	printf("; again: %s", result(bound_id(addr, port, false, &b)));
	rdma_destroy_id(b);
	printf("; the wildcard: %s", result(bound_id(NULL, port, false, &b)));
	rdma_destroy_id(b);
	rdma_destroy_id(a);
	printf("; REUSEADDR twice: %s", result(bound_id(addr, port, true, &a)));
	printf(", %s", result(bound_id(addr, port, true, &b)));
	printf("; listen beside: %s", result(rdma_listen(a, 1) ? errno : 0));
	rdma_destroy_id(b);
	printf("; alone: %s", result(rdma_listen(a, 1) ? errno : 0));
	printf("; REUSEADDR beside a listener: %s", result(bound_id(addr, port, true, &c)));
	rdma_destroy_id(c);
	printf("; REUSEADDR set on a listener: %s",
	       result(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on,
				      sizeof(on)) ? errno : 0));
	printf(", cleared: %s\n",
	       result(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &off,
				      sizeof(off)) ? errno : 0));
	rdma_destroy_id(a);
	return 0;
}

/* A listener on addr:port in port space ps, whose requests' events come on ch. */
static struct rdma_cm_id *listener_on(struct rdma_event_channel *ch, const char *addr,
				      const char *port, enum rdma_port_space ps)
{
	struct sockaddr_storage ss;
	struct rdma_cm_id *id;

	if (!ch || addr_of(addr, port, &ss) || rdma_create_id(ch, &id, NULL, ps) ||
	    rdma_bind_addr(id, (struct sockaddr *)&ss) || rdma_listen(id, 4)) {
		die("listen");
		return NULL;
	}
	return id;
}

/* Both ends disconnect, the client first; each waits for its DISCONNECTED. */
static int disconnect_both(struct rdma_cm_id *client, struct rdma_cm_id *child,
			   struct rdma_event_channel *srv)
{
	int status;

	rdma_disconnect(client);
	if (take_on(srv, RDMA_CM_EVENT_DISCONNECTED, &status, NULL))
		return -1;
	rdma_disconnect(child);
	return take_on(channel, RDMA_CM_EVENT_DISCONNECTED, &status, NULL);
}

static const char *disconnected(struct rdma_cm_id *id)
{
	return result(rdma_disconnect(id) ? errno : 0);
}

static void destroy_with_qp(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* A request from a new id with a QP to addr:port, connected; its id, NULL on failure. */
static struct rdma_cm_id *requested(const char *addr, const char *port)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *id = resolved(addr, port, true);

	if (id && rdma_connect(id, &param)) {
		die("rdma_connect");
		return NULL;
	}
	return id;
}

/* rdma_disconnect's answer in each state a connection of the TCP port space passes
 * through, step by step: an id never connected; a listener, on an address and on the
 * wildcard; an id rejected by a port nobody listens on; a request not yet answered, then
 * rejected, and the id it rejected; both ends of a connection, in turn, and then again.
 * The clients' events come on the program's channel, the listener's on one of its own,
 * so the two never interleave. */
static int disconnect_rules(const char *addr, const char *port)
{
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_event_channel *srv = rdma_create_event_channel();
	struct rdma_cm_id *listen, *any, *client, *child;
	struct sockaddr_in wildcard = { .sin_family = AF_INET };
	char nobody[12];
	int status;

	if (!(listen = listener_on(srv, addr, port, RDMA_PS_TCP)))
		return 1;
	if (!(client = resolved(addr, port, true)))
		return 1;
	printf("never connected: %s", disconnected(client));
	destroy_with_qp(client);
	printf("; a listener: %s", disconnected(listen));
	if (rdma_create_id(srv, &any, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(any, (struct sockaddr *)&wildcard) || rdma_listen(any, 1))
		return die("listen on the wildcard");
	printf(", on the wildcard: %s", disconnected(any));
	rdma_destroy_id(any);

	snprintf(nobody, sizeof(nobody), "%d", atoi(port) + 1);
	if (!(client = requested(addr, nobody)) ||
	    take_on(channel, RDMA_CM_EVENT_REJECTED, &status, NULL))
		return 1;
	printf("; rejected as nobody listens (reason %d): %s", status, disconnected(client));
	destroy_with_qp(client);

	if (!(client = requested(addr, port)) ||
	    take_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &status, &child))
		return 1;
	printf("; a request not answered: %s", disconnected(child));
	if (rdma_reject(child, NULL, 0))
		return die("rdma_reject");
	printf(", rejected: %s", disconnected(child));
	if (take_on(channel, RDMA_CM_EVENT_REJECTED, &status, NULL))
		return 1;
	printf("; the id it rejected: %s", disconnected(client));
	rdma_destroy_id(child);
	destroy_with_qp(client);

	if (!(client = requested(addr, port)) ||
	    take_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &status, &child))
		return 1;
	if (rdma_create_qp(child, NULL, &attr) || rdma_accept(child, &param))
		return die("rdma_accept");
	if (take_on(channel, RDMA_CM_EVENT_ESTABLISHED, &status, NULL) ||
	    take_on(srv, RDMA_CM_EVENT_ESTABLISHED, &status, NULL))
		return 1;
	printf("; connected: %s", disconnected(client));
	if (take_on(srv, RDMA_CM_EVENT_DISCONNECTED, &status, NULL))
		return 1;
	printf(", the other end: %s", disconnected(child));
	if (take_on(channel, RDMA_CM_EVENT_DISCONNECTED, &status, NULL))
		return 1;
	printf("; again: %s", disconnected(client));
	printf(", the other end: %s\n", disconnected(child));
	destroy_with_qp(child);
	destroy_with_qp(client);
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(srv);
	return 0;
}

static const char *answer(int rc)
{
	return result(rc ? errno : 0);
}

/* Calls out of their order, or made twice, step by step: on a new id; bound, then
 * listening; with its address and route resolved; connecting; a request before and after
 * its answer; both ends of a connection. */
static int call_rules(const char *addr, const char *port)
{
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_event_channel *srv = rdma_create_event_channel();
	struct rdma_cm_id *id, *client, *child;
	struct sockaddr_storage ss;
	int status, tos = 8;

	setvbuf(stdout, NULL, _IONBF, 0);   /* each answer out before the next call */
	if (!srv || addr_of(addr, port, &ss) || rdma_create_id(srv, &id, NULL, RDMA_PS_TCP))
		return die("rdma_create_id");
	/* (librdmacm follows the device of an id that has none in rdma_resolve_route,
	 * rdma_connect and rdma_accept: not asked here) */
	printf("a new id: reject %s", answer(rdma_reject(id, NULL, 0)));
	printf(", an unknown option %s",
	       answer(rdma_set_option(id, RDMA_OPTION_ID, 99, &tos, sizeof(tos))));
	printf(", an unknown level %s",
	       answer(rdma_set_option(id, 99, RDMA_OPTION_ID_TOS, &tos, sizeof(tos))));
	printf(", a TOS of one byte %s",
	       answer(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1)));
	printf(", of four %s",
	       answer(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos))));
	printf("; bound: %s", answer(rdma_bind_addr(id, (struct sockaddr *)&ss)));
	printf(", again %s", answer(rdma_bind_addr(id, (struct sockaddr *)&ss)));
	printf(", connect %s", answer(rdma_connect(id, &param)));
	printf("; listening: %s", answer(rdma_listen(id, 2)));
	printf(", again %s", answer(rdma_listen(id, 4)));
	printf(", resolve_addr %s", answer(rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, 1000)));
	printf(", connect %s", answer(rdma_connect(id, &param)));
	printf(", bind %s", answer(rdma_bind_addr(id, (struct sockaddr *)&ss)));

	if (!(client = resolved(addr, port, true)))
		return 1;
	printf("; resolved: resolve_addr again %s",
	       answer(rdma_resolve_addr(client, NULL, (struct sockaddr *)&ss, 1000)));
	printf(", resolve_route again %s", answer(rdma_resolve_route(client, 1000)));
	printf(", listen %s", answer(rdma_listen(client, 1)));
	printf(", a second QP %s", answer(rdma_create_qp(client, NULL, &attr)));
	printf(", accept %s", answer(rdma_accept(client, &param)));
	printf("; connecting: %s", answer(rdma_connect(client, &param)));
	printf(", again %s", answer(rdma_connect(client, &param)));
	if (take_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &status, &child))
		return 1;
	printf("; a request: connect %s", answer(rdma_connect(child, &param)));
	printf(", listen %s", answer(rdma_listen(child, 1)));
	if (rdma_create_qp(child, NULL, &attr))
		return die("rdma_create_qp");
	printf(", accept %s", answer(rdma_accept(child, &param)));
	printf(", again %s", answer(rdma_accept(child, &param)));
	if (take_on(channel, RDMA_CM_EVENT_ESTABLISHED, &status, NULL) ||
	    take_on(srv, RDMA_CM_EVENT_ESTABLISHED, &status, NULL))
		return 1;
	printf("; connected: reject %s", answer(rdma_reject(child, NULL, 0)));
	printf(", accept %s", answer(rdma_accept(child, &param)));
	printf(", connect %s", answer(rdma_connect(client, &param)));
	printf(", the client's reject %s\n", answer(rdma_reject(client, NULL, 0)));
	if (disconnect_both(client, child, srv))
		return 1;
	destroy_with_qp(child);
	destroy_with_qp(client);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(srv);
	return 0;
}

/* The next event on ch, printed as the program sees it: its type and status, the private
 * data's length and first bytes, and rdma_conn_param's fields, or for the UDP port space
 * rdma_ud_param's Q_Key (its QP number and address handle are the device's own); its id
 * in *id when id is set. -1 when it is not of the type expected. */
static int show_on(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
		   struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	const struct rdma_conn_param *p;
	const struct rdma_ud_param *ud;
	bool udp;
	int ok;

	if (rdma_get_cm_event(ch, &ev))
		return die("rdma_get_cm_event");
	p = &ev->param.conn;
	ud = &ev->param.ud;
	udp = ev->id->ps == RDMA_PS_UDP;
	printf("%s status %d, private %u", rdma_event_str(ev->event), ev->status,
	       udp ? ud->private_data_len : p->private_data_len);
	if (udp && ud->private_data && ud->private_data_len)
		printf(" '%.5s'", (const char *)ud->private_data);
	else if (!udp && p->private_data && p->private_data_len)
		printf(" '%.5s'", (const char *)p->private_data);
	if (udp)
		printf(", qkey %#x", ud->qkey);
	else
		printf(", depths %u/%u, retries %u/%u, flow control %u, srq %u",
		       p->responder_resources, p->initiator_depth, p->retry_count,
		       p->rnr_retry_count, p->flow_control, p->srq);
	ok = ev->event == type;
	if (ok && id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

/* The server rejects client's request with private data; the client's event shown (of the
 * type expected), and client destroyed. */
static int show_rejected(struct rdma_cm_id *client, struct rdma_event_channel *srv,
			 enum rdma_cm_event_type type)
{
	struct rdma_cm_id *child;
	int status;

	if (take_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &status, &child))
		return -1;
	if (rdma_reject(child, "nope", 5))
		return die("rdma_reject");
	printf("; rejected: ");
	if (show_on(channel, type, NULL))
		return -1;
	rdma_destroy_id(child);
	destroy_with_qp(client);
	return 0;
}

/* The events of a connection as the program sees them, each printed (show_on): the
 * request, ESTABLISHED at both ends, DISCONNECTED at both; a consumer's reject with
 * private data; a port nobody listens on. */
static int event_rules(const char *addr, const char *port)
{
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct rdma_conn_param ask = { .private_data = "hello", .private_data_len = 6,
				       .responder_resources = 2, .initiator_depth = 3,
				       .retry_count = 5, .rnr_retry_count = 6, .flow_control = 1 };
	struct rdma_conn_param answer = { .private_data = "world", .private_data_len = 6,
					  .responder_resources = 3, .initiator_depth = 2,
					  .rnr_retry_count = 4 };
	struct rdma_event_channel *srv = rdma_create_event_channel();
	struct rdma_cm_id *listen, *client, *child;
	char nobody[12];

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!(listen = listener_on(srv, addr, port, RDMA_PS_TCP)))
		return 1;
	if (!(client = resolved(addr, port, true)) || rdma_connect(client, &ask))
		return die("rdma_connect");
	printf("the request: ");
	if (show_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &child))
		return 1;
	if (rdma_create_qp(child, NULL, &attr) || rdma_accept(child, &answer))
		return die("rdma_accept");
	printf("; the client: ");
	if (show_on(channel, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return 1;
	printf("; the server: ");
	if (show_on(srv, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return 1;
	rdma_disconnect(client);
	printf("; the DREQ: ");
	if (show_on(srv, RDMA_CM_EVENT_DISCONNECTED, NULL))
		return 1;
	rdma_disconnect(child);
	printf("; the DREP: ");
	if (show_on(channel, RDMA_CM_EVENT_DISCONNECTED, NULL))
		return 1;
	destroy_with_qp(child);
	destroy_with_qp(client);

	if (!(client = resolved(addr, port, true)) || rdma_connect(client, &ask))
		return die("rdma_connect");
	if (show_rejected(client, srv, RDMA_CM_EVENT_REJECTED))
		return 1;

	snprintf(nobody, sizeof(nobody), "%d", atoi(port) + 1);
	if (!(client = requested(addr, nobody)))
		return 1;
	printf("; nobody listening: ");
	if (show_on(channel, RDMA_CM_EVENT_REJECTED, NULL))
		return 1;
	printf("\n");
	destroy_with_qp(client);
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(srv);
	return 0;
}

/* The UDP port space's SIDR exchange as the program sees it: the request and the answer
 * (show_ud_on), rdma_disconnect at both ends afterwards; a reject with private data; a
 * port nobody listens on. */
static int ud_rules(const char *addr, const char *port)
{
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_UD);
	struct rdma_conn_param ask = { .private_data = "hello", .private_data_len = 6 };
	struct rdma_conn_param answer = { .private_data = "world", .private_data_len = 6 };
	struct rdma_event_channel *srv = rdma_create_event_channel();
	struct rdma_cm_id *listen, *client, *child;
	char nobody[12];

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!(listen = listener_on(srv, addr, port, RDMA_PS_UDP)))
		return 1;
	if (!(client = resolved_in(addr, port, RDMA_PS_UDP, true)) || rdma_connect(client, &ask))
		return die("rdma_connect");
	printf("the request: ");
	if (show_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &child))
		return 1;
	if (rdma_create_qp(child, NULL, &attr) || rdma_accept(child, &answer))
		return die("rdma_accept");
	printf("; the answer: ");
	if (show_on(channel, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return 1;
	printf("; rdma_disconnect: %s", disconnected(client));
	printf(", the other end: %s", disconnected(child));
	destroy_with_qp(child);
	destroy_with_qp(client);

	if (!(client = resolved_in(addr, port, RDMA_PS_UDP, true)) || rdma_connect(client, &ask))
		return die("rdma_connect");
	if (show_rejected(client, srv, RDMA_CM_EVENT_UNREACHABLE))
		return 1;

	snprintf(nobody, sizeof(nobody), "%d", atoi(port) + 1);
	if (!(client = resolved_in(addr, nobody, RDMA_PS_UDP, true)) || rdma_connect(client, &ask))
		return die("rdma_connect");
	printf("; nobody listening: ");
	if (show_on(channel, RDMA_CM_EVENT_UNREACHABLE, NULL))
		return 1;
	printf("\n");
	destroy_with_qp(client);
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(srv);
	return 0;
}

/* A flow label as the route's (label), named so: the ports it comes from are random. */
static void show_flow_label(uint32_t fl, uint32_t label)
{
	if (fl == label)
		printf(", flow_label the route's");
	else
		printf(", flow_label %u against the route's %u", fl, label);
}

/* The QP as rdma_cm left it: the attributes a connection sets (not the PSNs, chosen at
 * random, nor the GID index, the device's own table's); label, the route's flow label. */
static int show_qp(struct rdma_cm_id *id, uint32_t label)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;

	if (ibv_query_qp(id->qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
			 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ACCESS_FLAGS |
			 IBV_QP_AV | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &init))
		return die("ibv_query_qp");
	printf("state %d, mtu %d, timeout %u, retries %u/%u, min_rnr_timer %u, rd_atomic %u/%u,"
	       " access %#x, pkey_index %u, port %u, global %u, hop_limit %u, traffic_class %u,"
	       " sl %u", a.qp_state, a.path_mtu, a.timeout, a.retry_cnt, a.rnr_retry,
	       a.min_rnr_timer, a.max_rd_atomic, a.max_dest_rd_atomic, a.qp_access_flags,
	       a.pkey_index, a.port_num, a.ah_attr.is_global, a.ah_attr.grh.hop_limit,
	       a.ah_attr.grh.traffic_class, a.ah_attr.sl);
	show_flow_label(a.ah_attr.grh.flow_label, label);
	return 0;
}

/* The route of the id a request made (child), as its REQ gave it, and its addresses
 * against the client's (both ends of a connection to itself). */
static void show_request_route(struct rdma_cm_id *child, struct rdma_cm_id *client,
			       uint32_t label)
{
	struct ibv_sa_path_rec *path = child->route.path_rec;

	printf("; the server's route: %d path(s), port %u", child->route.num_paths,
	       child->port_num);
	if (path) {
		printf(", mtu %u, packet life %u, hop_limit %u, traffic_class %u, pkey %#x,"
		       " reversible %u", path->mtu, path->packet_life_time, path->hop_limit,
		       path->traffic_class, ntohs(path->pkey), path->reversible);
		show_flow_label(ntohl(path->flow_label), label);
	}
	printf(", its ports %s", rdma_get_src_port(child) == rdma_get_dst_port(client) &&
	       rdma_get_dst_port(child) == rdma_get_src_port(client) ? "the client's crossed" :
	       "not the client's");
	printf(", the client's device %s",
	       child->verbs && child->verbs->device == client->verbs->device ? "yes" : "no");
}

/* What a connection leaves behind: the client's route and both QPs, each field printed,
 * the client having set RDMA_OPTION_ID_TOS and RDMA_OPTION_ID_ACK_TIMEOUT first, and the
 * ACK timeout again between its connect and the REP's event (librdmacm applies it as it
 * reads the REP, so the QP takes the later one). */
static int qp_rules(const char *addr, const char *port)
{
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct rdma_conn_param ask = { .responder_resources = 2, .initiator_depth = 3,
				       .retry_count = 5, .rnr_retry_count = 6 };
	struct rdma_conn_param answer = { .responder_resources = 3, .initiator_depth = 2,
					  .rnr_retry_count = 4 };
	struct rdma_event_channel *srv = rdma_create_event_channel();
	struct rdma_cm_id *listen, *client, *child;
	struct sockaddr_storage dst;
	struct ibv_sa_path_rec *path;
	uint8_t tos = 32, ack_timeout = 14, late_ack_timeout = 12;
	uint32_t label = 0;
	int status;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!(listen = listener_on(srv, addr, port, RDMA_PS_TCP)))
		return 1;
	if (addr_of(addr, port, &dst) || rdma_create_id(channel, &client, NULL, RDMA_PS_TCP) ||
	    rdma_set_option(client, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)) ||
	    rdma_set_option(client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			    sizeof(ack_timeout)) ||
	    rdma_resolve_addr(client, NULL, (struct sockaddr *)&dst, EVENT_TIMEOUT_MS) ||
	    take_on(channel, RDMA_CM_EVENT_ADDR_RESOLVED, &status, NULL) ||
	    rdma_resolve_route(client, EVENT_TIMEOUT_MS) ||
	    take_on(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, &status, NULL) ||
	    rdma_create_qp(client, NULL, &attr))
		return die("the client's id");
	/* (not its LIDs: RoCE has none, and the kernel's hold bytes of other fields) */
	path = client->route.path_rec;
	printf("the route: %d path(s), port %u", client->route.num_paths, client->port_num);
	if (path) {
		label = ntohl(path->flow_label);
		printf(", mtu %u, rate %u, packet life %u, hop_limit %u, traffic_class %u, sl %u,"
		       " pkey %#x, reversible %u (as stored), selectors %u/%u/%u, raw_traffic %u,"
		       " numb_path %u", path->mtu, path->rate, path->packet_life_time,
		       path->hop_limit, path->traffic_class, path->sl, ntohs(path->pkey),
		       path->reversible, path->mtu_selector, path->rate_selector,
		       path->packet_life_time_selector, path->raw_traffic, path->numb_path);
		/* a RoCEv2 route's, from the two ports */
		show_flow_label(label, (ntohs(rdma_get_src_port(client)) * 31u +
					ntohs(rdma_get_dst_port(client))) & 0xfffff);
	}
	if (rdma_connect(client, &ask) ||
	    rdma_set_option(client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &late_ack_timeout,
			    sizeof(late_ack_timeout)) ||
	    take_on(srv, RDMA_CM_EVENT_CONNECT_REQUEST, &status, &child) ||
	    rdma_create_qp(child, NULL, &attr) || rdma_accept(child, &answer) ||
	    take_on(channel, RDMA_CM_EVENT_ESTABLISHED, &status, NULL) ||
	    take_on(srv, RDMA_CM_EVENT_ESTABLISHED, &status, NULL))
		return die("the connection");
	printf("; the client's QP: ");
	if (show_qp(client, label))
		return 1;
	printf("; the server's: ");
	if (show_qp(child, label))
		return 1;
	show_request_route(child, client, label);
	printf("\n");
	if (disconnect_both(client, child, srv))
		return 1;
	destroy_with_qp(child);
	destroy_with_qp(client);
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(srv);
	return 0;
}

/* What a synchronous id holds in id->event after a call: librdmacm's calls on such an id
 * wait for their event and keep it there until the next call. */
static const char *held(const struct rdma_cm_id *id)
{
	return id->event ? rdma_event_str(id->event->event) : "nothing";
}

struct ep_client {
	const char *addr, *port;
	char out[512];
};

/* The active end of ep-rules, on a thread of its own: its line in c->out. */
static void *ep_client(void *arg)
{
	struct ep_client *c = arg;
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct rdma_cm_id *id;
	int n;

	if (rdma_getaddrinfo(c->addr, c->port, &hints, &res)) {
		snprintf(c->out, sizeof(c->out), "rdma_getaddrinfo: %s", strerror(errno));
		return NULL;
	}
	if (rdma_create_ep(&id, res, NULL, &attr)) {
		snprintf(c->out, sizeof(c->out), "rdma_create_ep: %s", strerror(errno));
		rdma_freeaddrinfo(res);
		return NULL;
	}
	rdma_freeaddrinfo(res);
	n = snprintf(c->out, sizeof(c->out), "the client's endpoint: %s held, a QP %s", held(id),
		     id->qp ? "made" : "not made");
	n += snprintf(c->out + n, sizeof(c->out) - n, "; connect %s", answer(rdma_connect(id, NULL)));
	n += snprintf(c->out + n, sizeof(c->out) - n, ", %s held", held(id));
	n += snprintf(c->out + n, sizeof(c->out) - n, "; disconnect %s", answer(rdma_disconnect(id)));
	snprintf(c->out + n, sizeof(c->out) - n, ", %s held", held(id));
	rdma_destroy_ep(id);
	return NULL;
}

/* Synchronous ids, as rdma_server and rdma_client make them (rdma_create_ep,
 * rdma_get_request): each call's answer and the event it leaves in id->event, at the
 * passive end and then the active one. */
static int ep_rules(const char *addr, const char *port)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP },
			     *res;
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_RC);
	struct ep_client c = { .addr = addr, .port = port };
	struct rdma_cm_id *listen, *id;
	pthread_t client;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		return die("rdma_getaddrinfo");
	if (rdma_create_ep(&listen, res, NULL, &attr))
		return die("rdma_create_ep");
	rdma_freeaddrinfo(res);
	printf("the listener's endpoint: %s held", held(listen));
	printf("; listen %s", answer(rdma_listen(listen, 4)));
	if (pthread_create(&client, NULL, ep_client, &c))
		return die("pthread_create");
	printf("; get_request %s", answer(rdma_get_request(listen, &id)));
	printf(", %s held by the new id, a QP %s", held(id), id->qp ? "made" : "not made");
	printf("; accept %s", answer(rdma_accept(id, NULL)));
	printf(", %s held", held(id));
	printf("; disconnect %s", answer(rdma_disconnect(id)));
	printf(", %s held", held(id));
	pthread_join(client, NULL);
	printf("; %s\n", c.out);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen);
	return 0;
}

static int sockaddr_of(const char *host, struct sockaddr_storage *ss)
{
	return addr_of(host, "0", ss);
}

/* Multicast in the UDP port space, step by step (group, an IPv4 multicast address): a join
 * on an id not bound; on an id bound to addr, with a UD QP, and its MULTICAST_JOIN event
 * (the Q_Key, the QP number and the address handle it gives); the same group again; a
 * leave, twice; a join on an id of the TCP port space. (Not a unicast address, which the
 * kernel's 6.1 takes as a group and rocemu refuses.) */
static int mcast_rules(const char *addr, const char *group)
{
	struct ibv_qp_init_attr attr = small_qp(IBV_QPT_UD);
	struct sockaddr_storage here, mc;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id, *tcp;
	char gid[INET6_ADDRSTRLEN];

	setvbuf(stdout, NULL, _IONBF, 0);
	if (sockaddr_of(addr, &here) || sockaddr_of(group, &mc) ||
	    rdma_create_id(channel, &id, NULL, RDMA_PS_UDP))
		return die("rdma_create_id");
	printf("not bound: join %s", answer(rdma_join_multicast(id, (struct sockaddr *)&mc, NULL)));
	if (rdma_bind_addr(id, (struct sockaddr *)&here) || rdma_create_qp(id, NULL, &attr))
		return die("bind, create_qp");
	printf("; bound: join %s", answer(rdma_join_multicast(id, (struct sockaddr *)&mc, NULL)));
	if (rdma_get_cm_event(channel, &ev))
		return die("rdma_get_cm_event");
	inet_ntop(AF_INET6, ev->param.ud.ah_attr.grh.dgid.raw, gid, sizeof(gid));
	printf(", %s status %d, qkey %#x, qp_num %#x, private %u, global %u, dgid %s,"
	       " hop_limit %u, sl %u", rdma_event_str(ev->event), ev->status, ev->param.ud.qkey,
	       ev->param.ud.qp_num, ev->param.ud.private_data_len,
	       ev->param.ud.ah_attr.is_global, gid, ev->param.ud.ah_attr.grh.hop_limit,
	       ev->param.ud.ah_attr.sl);
	rdma_ack_cm_event(ev);
	printf("; again %s", answer(rdma_join_multicast(id, (struct sockaddr *)&mc, NULL)));
	printf("; leave %s", answer(rdma_leave_multicast(id, (struct sockaddr *)&mc)));
	printf(", again %s", answer(rdma_leave_multicast(id, (struct sockaddr *)&mc)));
	if (rdma_create_id(channel, &tcp, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(tcp, (struct sockaddr *)&here))
		return die("a TCP id");
	printf("; the TCP port space: join %s\n",
	       answer(rdma_join_multicast(tcp, (struct sockaddr *)&mc, NULL)));
	rdma_destroy_id(tcp);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

/* Listeners on ids bound to addr with no port, until a bind or a listen fails; then a
 * listen on the first one's port, named. */
static int any_ports(const char *addr, int n)
{
	struct sockaddr_storage ss;
	struct rdma_cm_id *id;
	uint16_t first = 0;
	int i;

	if (addr_of(addr, "0", &ss))
		return 1;
	for (i = 0; i < n; i++) {
		if (rdma_create_id(channel, &id, NULL, RDMA_PS_TCP))
			return die("rdma_create_id");
		if (rdma_bind_addr(id, (struct sockaddr *)&ss) || rdma_listen(id, 1))
			break;
		printf("%s%u", i ? " " : "", ntohs(rdma_get_src_port(id)));
		first = first ? first : ntohs(rdma_get_src_port(id));
	}
	printf(", then: %s\n", i < n ? strerror(errno) : "none failed");
	rdma_destroy_id(id);
	if (!first || rdma_create_id(channel, &id, NULL, RDMA_PS_TCP))
		return 1;
	((struct sockaddr_in *)&ss)->sin_port = htons(first);
	if (rdma_bind_addr(id, (struct sockaddr *)&ss) || rdma_listen(id, 1))
		printf("port %u listened on again: %s\n", first, strerror(errno));
	rdma_destroy_id(id);
	return 0;
}

static int src_ports(const char *addr, int n)
{
	for (int i = 0; i < n; i++) {
		struct rdma_cm_id *id = resolved(addr, "7471", false);

		if (!id)
			return 1;
		printf("%s%u", i ? " " : "", ntohs(rdma_get_src_port(id)));
		rdma_destroy_id(id);
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 2;

	channel = rdma_create_event_channel();
	if (!channel)
		return die("rdma_create_event_channel");
	if (argc == 4 && !strcmp(argv[1], "reject-server"))
		rc = reject_server(argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "reject-client"))
		rc = reject_client(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "cycle-server"))
		rc = cycle_server(argv[2], atoi(argv[3]));
	else if (argc == 5 && !strcmp(argv[1], "cycle-client"))
		rc = cycle_client(argv[2], argv[3], atoi(argv[4]));
	else if (argc == 4 && !strcmp(argv[1], "sync-client"))
		rc = sync_client(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "parallel-resolve"))
		rc = parallel_resolve(argv[2], argv[3]);
	else if (argc == 3 && !strcmp(argv[1], "destroy-drops"))
		rc = destroy_drops(argv[2]);
	else if (argc == 3 && !strcmp(argv[1], "late-server"))
		rc = late_server(argv[2]);
	else if (argc == 4 && !strcmp(argv[1], "give-up-client"))
		rc = give_up_client(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "port-rules"))
		rc = port_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "disconnect-rules"))
		rc = disconnect_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "call-rules"))
		rc = call_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "event-rules"))
		rc = event_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "ud-rules"))
		rc = ud_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "qp-rules"))
		rc = qp_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "ep-rules"))
		rc = ep_rules(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "mcast-rules"))
		rc = mcast_rules(argv[2], argv[3]);
	else if (argc == 3 && !strcmp(argv[1], "late-listen"))
		rc = late_listen(atoi(argv[2]));
	else if (argc == 4 && !strcmp(argv[1], "any-ports"))
		rc = any_ports(argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "channels"))
		rc = channels(argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "src-ports"))
		rc = src_ports(argv[2], atoi(argv[3]));
	else if (argc == 3 && !strcmp(argv[1], "stale"))
		rc = stale(argv[2]);
	else
		fprintf(stderr, "usage: cm_peer reject-server PORT N | reject-client ADDR PORT |\n"
			"               cycle-server PORT N | cycle-client ADDR PORT N |\n"
			"               sync-client ADDR PORT | parallel-resolve NOBODY HERE |\n"
			"               destroy-drops ADDR | late-server PORT |\n"
			"               give-up-client ADDR PORT | channels ADDR N |\n"
			"               src-ports ADDR N | any-ports ADDR N | late-listen MS |\n"
			"               port-rules ADDR PORT | disconnect-rules ADDR PORT |\n"
			"               call-rules ADDR PORT | event-rules ADDR PORT |\n"
			"               ud-rules ADDR PORT | qp-rules ADDR PORT |\n"
			"               ep-rules ADDR PORT | mcast-rules ADDR GROUP |\n"
			"               stale ADDR\n");
	rdma_destroy_event_channel(channel);
	return rc;
}
