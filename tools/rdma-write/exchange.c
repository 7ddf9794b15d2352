/* rdma-write's TCP messages: the connection data each side sends once, the control
 * messages after it, and the exchange that agrees on the GID and the MTU. */
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "tools/rdma-write/rdma-write.h"

/* TCP messages, every field big-endian, fixed sizes (see the H_* and C_* offsets below):
 *   connection data, 60 bytes, once each way right after connecting;
 *   control, 48 bytes: READY (server: my QP accepts writes), PROGRESS (client heartbeat
 *   during the run, so the server's --timeout-ms bounds silence, not the run's length),
 *   DONE (client: result, writes completed, which pattern the buffer should hold),
 *   VERDICT (server: what it found in its buffer). */

#define HELLO_MAGIC  0x52574831u   /* "RWH1" */
#define CTL_MAGIC    0x52574331u   /* "RWC1" */
#define MSG_VERSION  1
#define HELLO_VERIFY 0x1

/* Connection data, sent once each way. */
enum hello_layout {
	H_MAGIC = 0,     /* u32 HELLO_MAGIC */
	H_VERSION = 4,   /* u16 MSG_VERSION */
	H_FLAGS = 6,     /* u16 HELLO_VERIFY */
	H_QPN = 8,       /* u32 */
	H_PSN = 12,      /* u32, 24 bits used */
	H_GID = 16,      /* 16 bytes, union ibv_gid as is (already network order) */
	H_VA = 32,       /* u64 address of the registered buffer */
	H_RKEY = 40,     /* u32 */
	H_MTU = 44,      /* u32 enum ibv_mtu this side proposes */
	H_SIZE = 48,     /* u64 server: buffer size; client: message size */
	H_TIMEOUT = 56,  /* u32 --timeout-ms: the client beats often enough for both */
	HELLO_LEN = 60,
};

/* Every later message. */
enum ctl_layout {
	C_MAGIC = 0,     /* u32 CTL_MAGIC */
	C_VERSION = 4,   /* u16 MSG_VERSION */
	C_TYPE = 6,      /* u16 enum ctl_type */
	C_CODE = 8,      /* u32 DONE: enum done_code; VERDICT: enum verdict_code */
	C_STATUS = 12,   /* u32 DONE: enum ibv_wc_status of the failed completion */
	C_FLAGS = 16,    /* u32 DONE: DONE_AIMED_OUTSIDE | DONE_KEY_ALTERED */
	C_RESERVED = 20, /* u32, 0 */
	C_COUNT = 24,    /* u64 DONE, PROGRESS: writes completed successfully */
	C_VALUE = 32,    /* u64 DONE: iteration whose pattern the buffer should hold;
			  * VERDICT: offset of the first unexpected byte */
	C_OFFSET = 40,   /* u64 DONE: the --remote-offset the client added */
	CTL_LEN = 48,
};

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	while (bytes--) {
		p[bytes] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get_be(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

int send_ctl(int fd, const struct ctl_msg *m, const char *what)
{
	uint8_t b[CTL_LEN] = { 0 };

	put_be(b + C_MAGIC, CTL_MAGIC, 4);
	put_be(b + C_VERSION, MSG_VERSION, 2);
	put_be(b + C_TYPE, m->type, 2);
	put_be(b + C_CODE, m->code, 4);
	put_be(b + C_STATUS, m->status, 4);
	put_be(b + C_FLAGS, m->flags, 4);
	put_be(b + C_COUNT, m->count, 8);
	put_be(b + C_VALUE, m->value, 8);
	put_be(b + C_OFFSET, m->offset, 8);
	return send_msg(fd, b, sizeof(b), what);
}

int recv_ctl(int fd, struct ctl_msg *m, int timeout_ms, const char *what)
{
	uint8_t b[CTL_LEN];

	if (recv_exact(fd, b, sizeof(b), timeout_ms, what) < 0)
		return -1;
	if (get_be(b + C_MAGIC, 4) != CTL_MAGIC || get_be(b + C_VERSION, 2) != MSG_VERSION) {
		msg("while waiting for %s: not an " PROG " message of this version", what);
		return -1;
	}
	*m = (struct ctl_msg){
		.type = (uint16_t)get_be(b + C_TYPE, 2),
		.code = (uint32_t)get_be(b + C_CODE, 4),
		.status = (uint32_t)get_be(b + C_STATUS, 4),
		.flags = (uint32_t)get_be(b + C_FLAGS, 4),
		.count = get_be(b + C_COUNT, 8),
		.value = get_be(b + C_VALUE, 8),
		.offset = get_be(b + C_OFFSET, 8),
	};
	return 0;
}

static void encode_hello(const struct session *s, uint8_t *b)
{
	put_be(b + H_MAGIC, HELLO_MAGIC, 4);
	put_be(b + H_VERSION, MSG_VERSION, 2);
	put_be(b + H_FLAGS, s->o->verify ? HELLO_VERIFY : 0, 2);
	put_be(b + H_QPN, s->ep.qp->qp_num, 4);
	put_be(b + H_PSN, s->ep.psn, 4);
	memcpy(b + H_GID, s->ep.port.gids[s->ep.sgid_index].raw, 16);
	put_be(b + H_VA, (uintptr_t)s->ep.buf, 8);
	put_be(b + H_RKEY, s->ep.mr->rkey, 4);
	put_be(b + H_MTU, s->ep.mtu, 4);
	put_be(b + H_SIZE, s->o->size, 8);
	put_be(b + H_TIMEOUT, (uint32_t)s->o->timeout_ms, 4);
}

static int decode_hello(const uint8_t *b, struct conn_info *c)
{
	uint32_t mtu = (uint32_t)get_be(b + H_MTU, 4);

	if (get_be(b + H_MAGIC, 4) != HELLO_MAGIC || get_be(b + H_VERSION, 2) != MSG_VERSION) {
		msg("the peer is not an " PROG " speaking this version");
		return -1;
	}
	c->verify = get_be(b + H_FLAGS, 2) & HELLO_VERIFY;
	c->qpn = (uint32_t)get_be(b + H_QPN, 4);
	c->psn = (uint32_t)get_be(b + H_PSN, 4);
	memcpy(c->gid.raw, b + H_GID, sizeof(c->gid.raw));
	c->va = get_be(b + H_VA, 8);
	c->rkey = (uint32_t)get_be(b + H_RKEY, 4);
	c->size = get_be(b + H_SIZE, 8);
	c->timeout_ms = (uint32_t)get_be(b + H_TIMEOUT, 4);
	if (!c->qpn || c->qpn > 0xffffff || c->psn > 0xffffff || !mtu_valid(mtu) || !c->size ||
	    c->size > MAX_SIZE || !c->timeout_ms || c->timeout_ms > INT_MAX) {
		msg("the peer's connection data is out of range (QPN 0x%x PSN 0x%x MTU %u size %"
		    PRIu64 ")", c->qpn, c->psn, mtu, c->size);
		return -1;
	}
	c->mtu = (enum ibv_mtu)mtu;
	return 0;
}

static void print_address(FILE *f, const char *which, uint32_t qpn, uint32_t psn, uint32_t rkey,
			  uint64_t va)
{
	fprintf(f, "%s address: QPN 0x%06x PSN 0x%06x RKey 0x%08x VAddr 0x%016" PRIx64 "\n", which,
		qpn, psn, rkey, va);
}

static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

/* The GID this side sends from: the one of the address the TCP connection uses, else the
 * port's first of its IP version (RoCEv2 does not cross versions), else GID 0. */
static void choose_gid(struct session *s)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	union ibv_gid want = { 0 };
	const struct rocemu_port_attr *port = &s->ep.port;
	int same_family = -1;

	s->ep.sgid_index = 0;
	if (getsockname(s->fd, (struct sockaddr *)&local, &len) < 0)
		return;
	if (local.ss_family == AF_INET6) {
		memcpy(want.raw, &((struct sockaddr_in6 *)&local)->sin6_addr, 16);
	} else {
		want.raw[10] = want.raw[11] = 0xff;
		memcpy(want.raw + 12, &((struct sockaddr_in *)&local)->sin_addr, 4);
	}
	for (unsigned i = 0; i < port->gid_count; i++) {
		if (!memcmp(&port->gids[i], &want, sizeof(want))) {
			s->ep.sgid_index = (uint8_t)i;
			return;
		}
		if (same_family < 0 && gid_is_v4(&port->gids[i]) == gid_is_v4(&want))
			same_family = (int)i;
	}
	if (same_family >= 0)
		s->ep.sgid_index = (uint8_t)same_family;
}

/* Sends our connection data, reads the peer's and prints both. */
int exchange(struct session *s)
{
	uint8_t out[HELLO_LEN] = { 0 }, in[HELLO_LEN];
	const char *theirs = s->o->server ? "the client's connection data"
					  : "the server's connection data";

	choose_gid(s);
	encode_hello(s, out);
	if (send_msg(s->fd, out, sizeof(out), "our connection data") < 0 ||
	    recv_exact(s->fd, in, sizeof(in), s->o->timeout_ms, theirs) < 0 ||
	    decode_hello(in, &s->peer) < 0)
		return -1;
	s->mtu = s->ep.mtu < s->peer.mtu ? s->ep.mtu : s->peer.mtu;
	print_address(s->info, "local", s->ep.qp->qp_num, s->ep.psn, s->ep.mr->rkey,
		      (uintptr_t)s->ep.buf);
	print_address(s->info, "remote", s->peer.qpn, s->peer.psn, s->peer.rkey, s->peer.va);
	return 0;
}

/* The client writes patterns only with --verify, and the server can only check them then:
 * one side alone would make the other's result meaningless. */
bool verify_agrees(const struct session *s)
{
	if (s->o->verify == s->peer.verify)
		return true;
	msg("--verify must be given to both the server and the client (%s has it)",
	    s->o->verify ? "only this side" : "only the peer");
	return false;
}
