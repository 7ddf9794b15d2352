/* What the files of rdma-write (tools/rdma-write/) share: the options, the TCP messages,
 * the endpoint, session and client state, and the functions each file offers the others. */
#ifndef ROCEMU_RDMA_WRITE_H
#define ROCEMU_RDMA_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "emu/rocemu.h"

#define PROG "rdma-write"

#define MAX_SIZE           (1ull << 31)   /* the largest RDMA message */
#define SERVER_FILL        0x5a            /* known contents, to tell "unchanged" */
#define NS_PER_MS          UINT64_C(1000000)
#define NS_PER_S           UINT64_C(1000000000)
#define MIB                1048576.0       /* perftest's MB */

#define QP_TIMEOUT   14   /* 4.096 us * 2^14 = 67 ms */
#define QP_RETRY_CNT 7
#define QP_RNR_RETRY 7

/* ---- messages and small helpers (util.c) ---- */

/* "rdma-write: " and the message on stderr. */
void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reports a failed librocemu call with the daemon's explanation; returns -1 for callers. */
int verbs_fail(const struct rocemu_context *ctx, const char *call, int err);
uint64_t now_ns(void);
/* Milliseconds until deadline, rounded up so a wait never ends just short of it; 0 once
 * it has passed. */
int ms_left(uint64_t deadline);
uint64_t min_u64(uint64_t a, uint64_t b);
/* The --verify pattern of iteration k into p. */
void fill_pattern(uint8_t *p, size_t len, uint64_t k);
/* The first i where p[i] is not pattern(k, i), or len. */
size_t find_pattern_mismatch(const uint8_t *p, size_t len, uint64_t k);
/* The first offset in [from, to) whose byte is not SERVER_FILL, or to. */
size_t find_not_fill(const uint8_t *buf, size_t from, size_t to);
unsigned mtu_bytes(enum ibv_mtu mtu);
bool mtu_valid(uint32_t mtu);

/* ---- command line (options.c) ---- */

struct options {
	bool server;
	bool verify;
	bool json;
	bool aim_outside;          /* --remote-offset given: writing outside is on purpose */
	bool rkey_xor_given;
	const char *socket_path;   /* NULL: the library's default */
	const char *host;          /* client: the server's IPv4 address or name */
	const char *start_file;    /* client: connected, wait for it before the first write */
	uint16_t port;
	size_t size;
	uint64_t iters;
	uint64_t remote_offset;    /* two's complement, added to the server's VA */
	uint32_t rkey_xor;
	uint32_t tx_depth;
	uint32_t mtu;              /* enum ibv_mtu, 0 when not given */
	int timeout_ms;
	uint8_t qp_timeout;        /* ibv_qp_attr.timeout: 4.096 us * 2^N */
	uint8_t retry_cnt;         /* 7: retry forever */
};

enum { PARSE_OK, PARSE_HELP, PARSE_ERROR };

/* Fills *o from argv: PARSE_OK, or PARSE_HELP (usage printed) or PARSE_ERROR (message and
 * usage printed on stderr). */
int parse_options(int argc, char **argv, struct options *o);

/* ---- TCP (tcp.c); every function prints its own errors ---- */

/* send_all that names the message when it fails (what NULL: the caller reports). */
int send_msg(int fd, const void *buf, size_t len, const char *what);
/* Reads exactly len bytes within timeout_ms; what names the message for the errors. */
int recv_exact(int fd, void *buf, size_t len, int timeout_ms, const char *what);
/* IPv6 and IPv4 clients alike (IPv4 alone where the kernel has no IPv6). */
int tcp_listen(uint16_t port);
int tcp_accept(int lfd, uint16_t port, int timeout_ms);
/* Connects to host:port, retrying for a few seconds so that a script may start the
 * server and the client together. */
int tcp_connect(const char *host, uint16_t port);

/* ---- the TCP messages (exchange.c) ---- */

enum ctl_type { MSG_READY = 1, MSG_PROGRESS, MSG_DONE, MSG_VERDICT };
enum done_code { DONE_OK, DONE_WC_ERROR, DONE_ABORTED };
enum verdict_code {
	VERDICT_OK,               /* as expected (patterns checked with --verify) */
	VERDICT_MISMATCH,         /* --verify found a wrong byte */
	VERDICT_UNCHANGED,        /* failed client, nothing landed */
	VERDICT_CHANGED,          /* failed client, yet the buffer changed */
	VERDICT_UNCHECKED,        /* failed client after some writes had landed */
	VERDICT_WRONGLY_ACCEPTED, /* writes outside the buffer or with a wrong key completed */
};

#define DONE_AIMED_OUTSIDE 0x1
#define DONE_KEY_ALTERED   0x2

struct ctl_msg {
	uint16_t type;
	uint32_t code;
	uint32_t status;
	uint32_t flags;
	uint64_t count;
	uint64_t value;
	uint64_t offset;
};

struct conn_info {
	bool verify;
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	union ibv_gid gid;
	uint64_t va;
	uint64_t size;
	enum ibv_mtu mtu;
	uint32_t timeout_ms;
};

struct endpoint {
	struct rocemu_context *ctx;
	struct rocemu_device_attr dev;
	struct rocemu_port_attr port;
	struct rocemu_pd *pd;
	struct rocemu_mr *mr;
	struct rocemu_cq *cq;
	struct rocemu_qp *qp;
	uint8_t *buf;
	size_t buf_len;
	uint32_t psn;
	enum ibv_mtu mtu;          /* this side's proposal: --mtu capped by the port */
	uint8_t sgid_index;        /* the GID of the TCP connection's address and family */
};

struct session {
	const struct options *o;
	struct endpoint ep;
	struct conn_info peer;
	enum ibv_mtu mtu;          /* agreed: the smaller proposal */
	int fd;
	FILE *info;                /* address lines and verdicts: stderr when stdout is JSON */
};

int send_ctl(int fd, const struct ctl_msg *m, const char *what);
int recv_ctl(int fd, struct ctl_msg *m, int timeout_ms, const char *what);
/* Sends our connection data, reads the peer's and prints both. */
int exchange(struct session *s);
/* False, with a message, unless both sides were given --verify or neither was. */
bool verify_agrees(const struct session *s);

/* ---- the emulated HCA (device.c) ---- */

/* The QP from INIT through RTR to RTS, towards s->peer. */
int connect_qp(struct session *s);
/* Everything up to a QP in INIT, with a buffer of buf_len bytes of fill registered. */
int setup_endpoint(struct endpoint *ep, const struct options *o, size_t buf_len, int fill);
/* Closes the TCP connection and undoes setup_endpoint; -1 if any step failed. */
int close_session(struct session *s);

/* ---- client (client.c, datapath.c, report.c) ---- */

enum run_result { RUN_OK, RUN_WC_ERROR, RUN_ABORTED };

enum abort_reason {
	ABORT_NONE,
	ABORT_SETUP,     /* before the first write: size refused, QP not connected */
	ABORT_TIMEOUT,
	ABORT_DAEMON,
	ABORT_POST,
	ABORT_ORDER,
	ABORT_SERVER,
};

struct run {
	enum run_result result;
	enum abort_reason reason;
	struct ibv_wc bad_wc;         /* RUN_WC_ERROR: the first failed completion */
	uint64_t posted;
	uint64_t completed;
	uint64_t t_start;             /* the first post */
	uint64_t t_end;               /* the last successful completion */
	uint64_t t_activity;          /* the last completion: --timeout-ms counts from here */
	uint64_t t_heartbeat;         /* the last PROGRESS sent */
	uint64_t t_line;              /* the last progress line */
	uint64_t win_start;           /* the open window of the peak measurement */
	uint64_t win_count;
	double peak_bps;
	bool line_shown;
};

struct client {
	struct session s;
	struct run run;
	bool ran;                     /* the data path started */
	uint64_t remote_va;           /* the server's VA + --remote-offset */
	uint32_t rkey;                /* the server's rkey ^ --rkey-xor */
	uint32_t depth;               /* writes in flight */
	uint32_t slots;               /* source slots of SIZE: depth with --verify, else 1 */
	uint64_t chunk;               /* completions per peak window */
	uint64_t timeout_ns;
	uint64_t heartbeat_ns;
	bool show_progress;
};

/* The writes in flight and the source slots, before the endpoint is set up. */
void plan_depth(struct client *c, const struct options *o);
/* Where and how the writes go, once the server's connection data is known. */
void plan_writes(struct client *c);
/* The data path: posts and reaps the writes until the last completes or the run fails. */
void run_writes(struct client *c);
/* Prints the result; the exit status is 0 only for a run that completed and that the
 * server found as expected. */
int report(struct client *c, const struct ctl_msg *verdict);
/* The client's whole life; returns the exit status. */
int run_client(const struct options *o);

/* ---- server (server.c) ---- */

/* The server's whole life; returns the exit status. */
int run_server(const struct options *o);

#endif
