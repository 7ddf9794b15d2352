/* What the tests' verbs programs (ibv_peer, ud_peer, many_qp) share. Each is linked against
 * libibverbs alone, so the same binary runs on the kernel's rxe and, under rocemu-run, on
 * rocemu; their two ends talk over TCP to exchange QP numbers, GIDs and verdicts. */
#ifndef ROCEMU_TEST_PEER_LINK_H
#define ROCEMU_TEST_PEER_LINK_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The program's name in messages; each main sets it. */
extern const char *peer_prog;

/* "PROG: WHAT: the errno's text", and exit 2: the test could not be set up. */
_Noreturn void peer_die(const char *what);

/* n bytes to (out) or from the socket, whole, or peer_die. */
void peer_xfer(int sock, bool out, void *p, size_t n);

/* A TCP connection to host (IPv4 or IPv6), tried for 10 s while the server starts. */
int peer_tcp_connect(const char *host, uint16_t port);
/* The first connection to port, over IPv6 or IPv4. */
int peer_tcp_accept(uint16_t port);

/* One RC QP's way to its peer. */
struct peer_rc {
	uint32_t dest_qpn;
	uint32_t rq_psn;            /* the peer's first PSN */
	uint32_t sq_psn;            /* ours */
	enum ibv_mtu mtu;
	union ibv_gid dgid;
	int gid_index;
};

/* RESET, then INIT (remote write), RTR and RTS towards the peer: timeout 14 (67 ms),
 * retry_cnt and rnr_retry 7, one READ or atomic each way. */
void peer_connect_rc(struct ibv_qp *qp, const struct peer_rc *p);

/* The port's active MTU in bytes. */
uint32_t peer_port_mtu(struct ibv_context *ctx);

/* A UD QP through INIT (qkey), RTR and RTS (sq_psn), or peer_die. */
void peer_ud_to_rts(struct ibv_qp *qp, uint32_t qkey, uint32_t sq_psn);

/* Up to want completions of cq within ms; how many landed in wcs. */
int peer_collect(struct ibv_cq *cq, struct ibv_wc *wcs, int want, int ms);

/* A peer's checks (mw_peer, rereg_peer, flush_peer): one line each, "ok NAME" or "FAIL NAME: why";
 * peer_failures counts the failed ones. */
extern int peer_failures;
void peer_report(const char *name, bool ok, const char *why);

/* The next completion of cq, polled for at most deadline_s seconds; false when none came. */
bool peer_next_wc(struct ibv_cq *cq, int deadline_s, struct ibv_wc *wc);

/* A peer's main: "[-x GID_INDEX] server | client ADDRESS" (the index in peer_gid_index);
 * runs that side and returns the exit status: 0 when every check passed, 1 when one
 * failed, 2 for bad usage. */
extern int peer_gid_index;
int peer_main(int argc, char **argv, void (*server)(void), void (*client)(const char *address));

#endif
