/* See peer_link.h. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test/peer_link.h"

const char *peer_prog = "peer";

void peer_die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", peer_prog, what, errno ? strerror(errno) : "failed");
	exit(2);
}

void peer_xfer(int sock, bool out, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r = out ? write(sock, b, n) : read(sock, b, n);

		if (r <= 0)
			peer_die(out ? "tcp write" : "tcp read (the other end is gone)");
		b += r;
		n -= (size_t)r;
	}
}

int peer_tcp_connect(const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char service[8];
	int one = 1, s = -1;

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &res))
		peer_die(host);
	for (int tries = 0; tries < 100 && s < 0; tries++) {
		s = socket(res->ai_family, SOCK_STREAM, 0);
		if (s >= 0 && connect(s, res->ai_addr, res->ai_addrlen) == 0)
			break;
		if (s >= 0)
			close(s);
		s = -1;
		usleep(100000);
	}
	freeaddrinfo(res);
	if (s < 0)
		peer_die("connect");
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return s;
}

int peer_tcp_accept(uint16_t port)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				     .sin6_addr = IN6ADDR_ANY_INIT };
	int one = 1, zero = 0, s, l = socket(AF_INET6, SOCK_STREAM, 0);

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) ||
	    bind(l, (struct sockaddr *)&sin6, sizeof(sin6)) || listen(l, 1))
		peer_die("listen");
	s = accept(l, NULL, NULL);
	if (s < 0)
		peer_die("accept");
	close(l);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return s;
}

void peer_connect_rc(struct ibv_qp *qp, const struct peer_rc *p)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		peer_die("to RESET");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
				  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		peer_die("to INIT");
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .dest_qp_num = p->dest_qpn, .rq_psn = p->rq_psn,
		.path_mtu = p->mtu, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = p->dgid, .sgid_index = (uint8_t)p->gid_index,
				      .hop_limit = 64 } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		peer_die("to RTR");
	/* retry_cnt 6: at 7 rxe (and rocemu, as rxe) retries without end, so a request whose
	 * NAK was lost would wait forever on a responder that answers no more */
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = p->sq_psn, .timeout = 14,
				  .retry_cnt = 6, .rnr_retry = 7, .max_rd_atomic = 1 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		peer_die("to RTS");
}

uint32_t peer_port_mtu(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa))
		peer_die("ibv_query_port");
	return 128u << pa.active_mtu;
}

void peer_ud_to_rts(struct ibv_qp *qp, uint32_t qkey, uint32_t sq_psn)
{
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey };

	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		peer_die("UD QP to INIT");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE))
		peer_die("UD QP to RTR");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = sq_psn };
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN))
		peer_die("UD QP to RTS");
}

int peer_collect(struct ibv_cq *cq, struct ibv_wc *wcs, int want, int ms)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = ibv_poll_cq(cq, want - got, wcs + got);

		if (n < 0)
			peer_die("ibv_poll_cq");
		got += n;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (got < want &&
		 (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	return got;
}

int peer_failures;
int peer_gid_index;

void peer_report(const char *name, bool ok, const char *why)
{
	printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why);
	fflush(stdout);
	peer_failures += !ok;
}

bool peer_next_wc(struct ibv_cq *cq, int deadline_s, struct ibv_wc *wc)
{
	time_t end = time(NULL) + deadline_s;

	while (time(NULL) < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			peer_die("ibv_poll_cq");
		if (n == 1)
			return true;
		usleep(100);
	}
	return false;
}

int peer_main(int argc, char **argv, void (*server)(void), void (*client)(const char *address))
{
	int opt;

	while ((opt = getopt(argc, argv, "x:")) != -1) {
		if (opt != 'x')
			goto usage;
		peer_gid_index = atoi(optarg);
	}
	if (optind < argc && strcmp(argv[optind], "server") == 0)
		server();
	else if (optind + 1 < argc && strcmp(argv[optind], "client") == 0)
		client(argv[optind + 1]);
	else
		goto usage;
	return peer_failures ? 1 : 0;
usage:
	fprintf(stderr, "usage: %s [-x GID_INDEX] server | client ADDRESS\n", peer_prog);
	return 2;
}
