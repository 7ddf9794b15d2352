/* Control: the daemon's socket and its clients, each a connection of a process using
 * librocemu. Requests create, modify and destroy PDs, MRs, CQs, SRQs, QPs and AHs (ops.c),
 * named by per-connection handles (handles.c); views and counters go to rocemuctl.
 *
 * It may call the transport, the port, memreg/ and the log. A request handler returns 0 or
 * a negative errno and says why in its reply; nothing a client sends stops the daemon. */
#ifndef ROCEMU_DAEMON_CONTROL_H
#define ROCEMU_DAEMON_CONTROL_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "emu/daemon/device.h"
#include "emu/daemon/port/port.h"
#include "emu/daemon/transport/transport.h"
#include "emu/proto.h"
#include "memreg/memreg.h"

struct handle_table {
	void **items;
	uint32_t cap;
	uint32_t count;
};

struct client {
	struct owner own;            /* what the transport's objects see of it */
	int fd;
	ev_io watcher;
	uint8_t *deferred;           /* a request answered once its neighbour is known */
	size_t deferred_len;
	uint32_t batch_next;         /* the deferred batch's request to go on from */
	struct mr_client *mrc;       /* shared by every connection of one process */
	int memfd;                   /* the last memfd a REG_MR handed over, or -1 */
	uint64_t memfd_ino;
	uint64_t pin_cap;            /* that process's pinned-byte budget, 0 = none */
	struct handle_table pds, mrs, mws, cqs, qps, srqs, ahs;
	LIST_ENTRY(client) link;
};

static inline struct client *client_of(struct owner *own)
{
	return (struct client *)((char *)own - offsetof(struct client, own));
}

/* handles.c */
int handle_add(struct handle_table *t, void *item, uint32_t *handle);
void *handle_get(const struct handle_table *t, uint32_t handle);
void handle_del(struct handle_table *t, uint32_t handle);
void handle_free(struct handle_table *t);

/* ctl.c: the control socket and clients */
/* group: NULL, or the group whose members may connect (the socket is 0660) */
int ctl_open(struct dev *dev, const char *path, const char *group, char *err, size_t errlen);
void ctl_close(struct dev *dev);
void ctl_client_destroy(struct client *c);
/* The port's link started or stopped running: every client is told, as a kernel device
 * raises IBV_EVENT_PORT_ACTIVE or IBV_EVENT_PORT_ERR (the port's on_link hook; ctx is the
 * device). */
void ctl_link_changed(void *ctx, bool running);
/* Handles a client's deferred request again (its neighbour wait ended). */
void ctl_resume(struct client *c);

/* ah.c: address handles; ah_create fills err and returns NULL with *rc set on failure */
struct ah *ah_create(struct client *c, const struct proto_create_ah *m, int *rc, char *err,
		     size_t errlen);
void ah_destroy(struct ah *ah);
bool ah_pd_has_any(struct client *c, const struct mr_pd *pd);
/* The AH a UD work request names (main.c hands it to the transport as dev->tp.find_ah). */
const struct ah *ah_find(struct owner *own, uint32_t handle);

#endif
