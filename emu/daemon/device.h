/* The emulated HCA as one object: the port under it, the transport's device-wide state,
 * the control socket's, the MR table and the counters. main.c owns the one instance; every
 * object is touched only from its event loop. */
#ifndef ROCEMU_DAEMON_DEVICE_H
#define ROCEMU_DAEMON_DEVICE_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "emu/daemon/limits.h"
#include "emu/daemon/port/port.h"
#include "emu/daemon/transport/dcqcn.h"
#include "memreg/memreg.h"

struct ah;
struct client;
struct cm;
struct cq;
struct owner;
struct qp;

/* The transport's state shared by every QP (transport/). */
struct dev_transport {
	struct qp *qps[DEV_MAX_QP];
	uint32_t qp_cursor;
	uint32_t qp_generation;
	uint32_t qp_count;
	STAILQ_HEAD(, cq) notify_list;
	TAILQ_HEAD(, qp) acks_due;
	TAILQ_HEAD(, qp) ready;      /* requesters with more to send, served in turn */
	TAILQ_HEAD(, qp) credit_wait; /* requesters held back by DEV_MAX_INFLIGHT */
	uint32_t inflight;           /* unacknowledged PSNs of every RC requester */
	uint32_t requesters_out;     /* RC requesters with PSNs unacknowledged */
	uint32_t mcast_attached;     /* attachments of UD QPs to multicast groups (attach.c) */
	ev_idle serve_idle;          /* keeps the loop from sleeping while any is ready */
	TAILQ_HEAD(, qp) polled;     /* QPs whose rings the loop polls (poll.c) */
	bool poll_rings;             /* the loop polls after work (cpu.c): adopt QPs that ring */
	struct dcqcn_params cc;
	/* The address handle a UD work request names, or NULL: control's table, reached
	 * through main.c. */
	const struct ah *(*find_ah)(struct owner *owner, uint32_t handle);
	/* A frame to the GSI QP 1 (a CM MAD, admitted: to an address served, ICRC good): the
	 * CM's, reached through main.c so the transport calls nothing above it. */
	void (*on_gsi)(void *ctx, const uint8_t *frame, const struct wire_pkt *pkt);
	void *gsi_ctx;
};

/* The control socket and its clients (control/). */
struct dev_control {
	int fd;
	ev_io watcher;
	ev_timer accept_pause;       /* out of descriptors: accept again a little later */
	char sock_path[108];
	LIST_HEAD(, client) clients;
};

struct dev {
	struct ev_loop *loop;
	struct port port;
	struct dev_transport tp;
	struct dev_control ctl;
	struct mr_table *mrs;
	struct cm *cm;                       /* the CM on QP 1 (cm/), which control calls */
	struct dev_counters cnt;
	uint64_t refused[PROTO_NREFUSALS];   /* requests the responders refused, by reason */
	uint64_t failed[PROTO_NFAILURES];    /* send requests the completers failed, by reason */

	/* main.c's: the batch goes out before the loop sleeps; cpu.c's: after work the loop
	 * polls instead of sleeping for poll_budget seconds (--poll-budget, --busy-poll) */
	ev_prepare flush_watcher;
	ev_idle poll_idle;
	ev_tstamp poll_budget;
	ev_tstamp poll_until;        /* when the loop may sleep, if no work comes first */
	uint64_t poll_work;          /* frames, doorbells and polled posts when last looked */
	ev_tstamp poll_off_until;    /* no polling before: a yield found the CPU contended */
	unsigned poll_contended;     /* contended yields in a row so far */
	bool poll_always;            /* --busy-poll: contended or not */
	int loadavg_fd;              /* /proc/loadavg: how many tasks are runnable */
	unsigned long ncpus;
	ev_tstamp cpu_looked;        /* when it was last read */
	bool cpu_spare;              /* then: no more runnable tasks than CPUs */
	/* --realtime: the SCHED_FIFO priority (0: off), whether the daemon holds it now, and
	 * the watchdog's clock (ev_check after each wait) */
	ev_check wake_watcher;
	ev_timer rt_restore;         /* the end of a step down */
	int rt_priority;
	bool rt_now;
	uint64_t slice_ns;           /* --slice as the kernel took it, 0: its own (cpu.c) */
	int nice;                    /* --nice as the kernel took it: each policy change keeps it */
	ev_tstamp wait_began;        /* when the loop last went into its wait */
	ev_tstamp awake_since;       /* when it last came out of a sleep */
	ev_tstamp rt_off_until;      /* stepped down from SCHED_FIFO until then */
};

#endif
