/* The CM: the IB Communication Manager on the GSI QP 1, as the kernel's cm.c runs it for
 * rdma_cm. It keeps listeners by service ID and the connections' state machine (REQ, REP,
 * RTU, REJ, DREQ, DREP, TimeWait; an MRA received stretches the wait), resends each MAD on
 * the kernel's timeouts up to its retries, and tells each client what happened through its
 * channels' sockets (struct proto_cm_event). The QPs are the client's: the CM only names
 * their numbers and computes the attributes a connection gives them.
 *
 * It may call the port (frames out, the GID table), the transport's qp_find() (a client
 * names only its own QPs) and the log. Control calls it; the receive path reaches it only
 * through dev->tp.on_gsi, which main.c sets. Calls return 0 or a negative errno, and fill
 * err on failure; what a peer's MAD gets wrong is counted (the cm_* counters), never
 * fatal. */
#ifndef ROCEMU_DAEMON_CM_H
#define ROCEMU_DAEMON_CM_H

#include <stddef.h>
#include <stdint.h>

#include "emu/daemon/device.h"
#include "emu/proto.h"
#include "wire/wire.h"

struct cm;
struct owner;

#define CM_MAX_CONNS 4096          /* connections in all, every state */
#define CM_MAX_LISTEN_BACKLOG 1024 /* the largest backlog a listener gets */
#define CM_MAX_CHANNELS 4096       /* channels in all */
#define CM_MAX_OWNER_CHANNELS 256  /* ... and of one client */
#define CM_MAX_OWNER_LISTENERS 256 /* listeners of one client */
/* connections one client may hold, every state, those it forgot and that still wind down
 * counted too (a REQ to its listener beyond it: REJ 3; its own connect: ENOMEM) */
#define CM_MAX_OWNER_CONNS 1024

struct cm *cm_new(struct dev *dev);
void cm_free(struct cm *cm);

/* A frame the receive path found to be a UD SEND to QP 1 (dev->tp.on_gsi). */
void cm_on_frame(void *cm, const uint8_t *frame, const struct wire_pkt *pkt);

/* Channels: the socket the CM writes a client's events to (the CM owns fd after 0). */
int cm_channel_open(struct cm *cm, struct owner *own, int fd, uint32_t *handle);
int cm_channel_close(struct cm *cm, struct owner *own, uint32_t handle);
uint32_t cm_owner_channels(const struct cm *cm, const struct owner *own);

int cm_listen(struct cm *cm, struct owner *own, const struct proto_cm_listen *m,
	      uint32_t *handle, char *err, size_t errlen);
int cm_unlisten(struct cm *cm, struct owner *own, uint32_t handle);

/* A REQ to dgid through mac (the neighbour control resolved). */
int cm_connect(struct cm *cm, struct owner *own, const struct proto_cm_connect *m,
	       const uint8_t mac[6], uint32_t *conn, char *err, size_t errlen);
int cm_accept(struct cm *cm, struct owner *own, const struct proto_cm_accept *m, char *err,
	      size_t errlen);
int cm_reject(struct cm *cm, struct owner *own, const struct proto_cm_reject *m, char *err,
	      size_t errlen);
int cm_establish(struct cm *cm, struct owner *own, uint32_t conn, char *err, size_t errlen);
int cm_disconnect(struct cm *cm, struct owner *own, uint32_t conn, char *err, size_t errlen);
int cm_destroy(struct cm *cm, struct owner *own, uint32_t conn);
/* The connection's (or listener's) events go to another of the client's channels. */
int cm_migrate(struct cm *cm, struct owner *own, const struct proto_cm_migrate *m);

/* The client is gone: its channels closed, its listeners removed, its connections ended
 * as cm_destroy() ends each. */
void cm_owner_gone(struct cm *cm, struct owner *own);

/* rocemuctl cm: listeners, then connections, from item start on; returns how many were
 * written (at most max), and *next the start of the next page, 0 at the end. */
uint32_t cm_list(const struct cm *cm, uint32_t start, struct proto_cm_entry *out,
		 uint32_t max, uint32_t *next);

#endif
