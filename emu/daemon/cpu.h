/* How the daemon uses and claims the CPU (cpu.c): its polling after work, its nice value,
 * its time slice, and under --realtime SCHED_FIFO while it sleeps, with a watchdog of its
 * own. main.c calls these at start and before each wait of its loop; they call the
 * kernel, the log and the transport's ring polling. */
#ifndef ROCEMU_DAEMON_CPU_H
#define ROCEMU_DAEMON_CPU_H

#include <stdint.h>

#include "emu/daemon/device.h"

/* --slice's bounds, the kernel's own: it clamps a slice asked for to them */
#define CPU_SLICE_MIN_US 100
#define CPU_SLICE_MAX_US 100000
/* --realtime's guard besides the kernel's RT throttling: a loop that ran this long without
 * sleeping goes on at --nice for RT_BACKOFF_MS. */
#define RT_RUN_MAX_MS 10
#define RT_BACKOFF_MS 100

struct cpu_claim {
	uint32_t poll_us;    /* --poll-budget or --busy-poll, 0: sleep at once */
	bool busy_poll;      /* --busy-poll: poll on though the CPU is wanted */
	int nice;            /* --nice */
	uint32_t slice_us;   /* --slice, 0: the kernel's */
	int rt_priority;     /* --realtime, 0: off */
};

/* What the kernel refuses is logged, and the daemon runs on as it was. */
void cpu_claim_start(struct dev *dev, const struct cpu_claim *claim);
/* Before each wait of the loop, with a poll budget: poll on or let it sleep. */
void cpu_poll_or_sleep(struct dev *dev);
/* Last before each wait. */
void cpu_before_wait(struct dev *dev);

#endif
