/* How the daemon uses and claims the CPU.
 *
 * After work it polls for a budget before it sleeps (adaptive polling, below), where the
 * CPUs have room for it. Its nice value weighs it against the programs it serves. Its
 * time slice decides how soon its wakeup preempts them and how far a yield between its
 * looks sets it back: Linux's EEVDF scheduler (6.6 and later) gives each task a virtual
 * deadline one slice, weighted by its priority, after it became eligible, and from 6.12 a
 * task may ask for its own slice (sched_attr.sched_runtime, kept between 0.1 and 100 ms;
 * --slice). Under --realtime it sleeps under SCHED_FIFO instead.
 *
 * sched_setattr is called through syscall(): Debian 12's glibc has no wrapper, and the
 * kernel's header for its struct cannot be included beside <sched.h>, so the struct's
 * first version is spelled out here. */
#include "emu/daemon/cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/transport/transport.h"

/* A wait longer than this was a sleep, not a look. */
#define SLEPT_S 50e-6
/* A yield that took this long gave the CPU to someone; POLL_CONTENDED_RUN of them in a
 * row, or one that took POLL_HELD_S (a program that spins without yielding kept the CPU
 * for its time slice), and polling on costs them the core. One long yield alone is no
 * such sign on a VM: its virtual CPU is taken away now and then, and stopping the polls
 * for it left two daemons on two CPUs asleep at nearly every hop of a ping-pong (a
 * median of 80 to 110 us a 64-byte WRITE against 20 to 26 us polling). */
#define POLL_CONTENDED_S 20e-6
#define POLL_CONTENDED_RUN 4
#define POLL_HELD_S 1e-3
/* After contended yields the loop sleeps at once for this long: polling is for a spare
 * core. */
#define POLL_OFF_S 50e-3
/* How often a poll about to start looks whether the machine has a core to spare, and how
 * many runnable tasks more than CPUs still let it poll: the programs at the two ends of a
 * ping-pong, each spinning on a CPU of its own beside the two daemons (ib_write_lat spins
 * on memory at both ends); on a single CPU, one. Asleep there, each daemon paid a
 * doorbell's wakeup per post: 42 us a hop against 31 us polling, medians on two CPUs
 * (docs/benchmarks.md). Verbs programs yield the CPU on an empty poll, and contended
 * yields stop the polls for POLL_OFF_S anyway. */
#define CPU_LOOK_S 10e-3
#define CPU_OVERCOMMIT 2

/* The kernel's struct sched_attr as Linux 3.14 defined it (SCHED_ATTR_SIZE_VER0) */
struct sched_attr_v0 {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

/* Idle watchers keep libev from sleeping: while one is active the loop polls its
 * descriptors without blocking, so a frame is seen without a wakeup. Each turn yields the
 * CPU: with more spinners than cores (two daemons and a busy-polling client on two) a
 * spinner that never yields makes the others wait for the scheduler's time slice,
 * measured here as 2 ms per 64-byte WRITE instead of 35 us. */
static void on_poll_idle(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct dev *dev = w->data;
	ev_tstamp before = ev_time(), took;

	(void)revents;
	sched_yield();
	took = ev_time() - before;
	/* --busy-poll was asked to keep a CPU busy, and does */
	if (dev->poll_always)
		return;
	if (took <= POLL_CONTENDED_S) {
		dev->poll_contended = 0;
		return;
	}
	if (took < POLL_HELD_S && ++dev->poll_contended < POLL_CONTENDED_RUN)
		return;
	/* others want this CPU: a poll on a shared core only delays them (and us, behind
	 * them), so the loop sleeps, and a wakeup finds it sooner */
	dev->poll_contended = 0;
	dev->cnt.poll_yielded++;
	dev->poll_until = ev_now(loop);
	dev->poll_off_until = ev_now(loop) + POLL_OFF_S;
}

/* Whether the CPUs have room for one more spinner: the tasks runnable now (this daemon
 * among them, /proc/loadavg's fourth field) no more than the CPUs and the spinning programs
 * they may hold beside the daemons (CPU_OVERCOMMIT, at most one a CPU). A
 * daemon that polls beside a program spinning on the same CPU is not woken when its frame
 * comes: it waits for the program's time slice (4 ms, measured), where a sleeping daemon's
 * wakeup preempts the program at once; but a sleeping daemon on a VM whose CPU went idle
 * pays for waking that virtual CPU (a median of 25 to 60 us per 64-byte WRITE instead of
 * 10, measured on this VM when nothing else ran). */
static bool cpu_to_spare(struct dev *dev)
{
	char buf[128];
	ssize_t n;
	unsigned long running, spinners;

	if (dev->loadavg_fd < 0)
		return true;
	n = pread(dev->loadavg_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	if (sscanf(buf, "%*s %*s %*s %lu/", &running) != 1)
		return true;
	spinners = dev->ncpus < CPU_OVERCOMMIT ? dev->ncpus : CPU_OVERCOMMIT;
	return running <= dev->ncpus + spinners;
}

static bool may_poll(struct ev_loop *loop, struct dev *dev)
{
	if (dev->poll_always || ev_is_active(&dev->poll_idle))
		return true;
	if (ev_now(loop) - dev->cpu_looked > CPU_LOOK_S) {
		dev->cpu_looked = ev_now(loop);
		dev->cpu_spare = cpu_to_spare(dev);
	}
	return dev->cpu_spare;
}

static uint64_t work_done(const struct dev *dev)
{
	return dev->cnt.sent_pkts + dev->cnt.rcvd_pkts + dev->cnt.doorbells +
	       dev->cnt.polled_posts;
}

/* Adaptive polling (the idea of NAPI's busy-poll budget and of hybrid polling): after
 * work the loop polls the packet ring and the rings of the QPs that rang, for poll_budget
 * seconds since the last work, before it sleeps; so the hops of a ping-pong find the
 * daemon awake, and its clients post without a doorbell meanwhile. Idle, it sleeps. */
void cpu_poll_or_sleep(struct dev *dev)
{
	struct ev_loop *loop = dev->loop;
	ev_tstamp now = ev_now(loop);
	/* what posts taken here built (frames, completions) goes out at the next turn's
	 * prepare: the loop must turn once more before it sleeps */
	bool took = poll_rings(dev) > 0;

	if (work_done(dev) != dev->poll_work && now >= dev->poll_off_until &&
	    may_poll(loop, dev)) {
		dev->poll_work = work_done(dev);
		dev->poll_until = now + dev->poll_budget;
	}
	if (took || now < dev->poll_until) {
		ev_idle_start(loop, &dev->poll_idle);
		return;
	}
	ev_idle_stop(loop, &dev->poll_idle);
	/* a post that came as the flags went: taken, and out at the next turn */
	if (poll_release(dev))
		ev_idle_start(loop, &dev->poll_idle);
}

/* The flag to reset the policy on fork is kept in both directions: a process without
 * CAP_SYS_NICE (the unit's drop-in gives --realtime an RLIMIT_RTPRIO instead) may not
 * clear it, so leaving SCHED_FIFO without it fails. */
static int set_policy(const struct dev *dev, uint32_t policy, int rt_priority,
		      uint64_t slice_ns)
{
	struct sched_attr_v0 attr = {
		.size = sizeof(attr),
		.sched_policy = policy,
		.sched_flags = SCHED_FLAG_RESET_ON_FORK,
		.sched_nice = dev->nice,
		.sched_priority = (uint32_t)rt_priority,
		.sched_runtime = policy == SCHED_NORMAL ? slice_ns : 0,
	};

	return syscall(SYS_sched_setattr, 0, &attr, 0) < 0 ? -errno : 0;
}

/* The slice the kernel now gives the daemon, or 0 where it reports none (before 6.12). */
static uint64_t slice_now_ns(void)
{
	struct sched_attr_v0 attr;

	memset(&attr, 0, sizeof(attr));
	if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) < 0)
		return 0;
	return attr.sched_runtime;
}

/* On two cores shared with dozens of busy programs, a daemon at their priority waits
 * tens of milliseconds for the CPU, and its peer's retransmission timer runs out though
 * nothing was lost. Without the privilege to raise it, it stays as it was. */
static void take_priority(int nice)
{
	if (setpriority(PRIO_PROCESS, 0, nice) < 0)
		log_warn("cannot set the scheduling priority to %d (%s): it stays at %d", nice,
			 strerror(errno), getpriority(PRIO_PROCESS, 0));
}

/* A kernel older than 6.12 takes sched_runtime for SCHED_OTHER without a word and does
 * nothing with it: only reading the slice back tells. */
static void take_slice(struct dev *dev, uint32_t slice_us)
{
	uint64_t want = (uint64_t)slice_us * 1000;
	int err = set_policy(dev, SCHED_NORMAL, 0, want);

	if (err < 0) {
		log_warn("cannot ask for a time slice of %u us (%s): the kernel's stays", slice_us,
			 strerror(-err));
		return;
	}
	if (slice_now_ns() != want) {
		log_info("this kernel takes no time slice from a process (Linux 6.12 and later "
			 "do): --slice %u is off", slice_us);
		return;
	}
	dev->slice_ns = want;
	log_info("time slice %u us (--slice)", slice_us);
}

/* --realtime: SCHED_FIFO while the loop sleeps and does its first turn after a wakeup,
 * the usual policy (at --nice, with --slice) while it polls, where a yield must let
 * others run. Forked helpers (nft) start under the usual policy. */
static void take_policy(struct dev *dev, bool fifo)
{
	int err;

	if (fifo == dev->rt_now)
		return;
	err = set_policy(dev, fifo ? SCHED_FIFO : SCHED_NORMAL, fifo ? dev->rt_priority : 0,
			 dev->slice_ns);
	if (err < 0) {
		log_warn("cannot %s SCHED_FIFO at priority %d (%s): --realtime is off",
			 fifo ? "take" : "leave", dev->rt_priority, strerror(-err));
		dev->rt_priority = 0;
		return;
	}
	dev->rt_now = fifo;
}

/* After the loop's wait: how long it has run without sleeping. Under SCHED_FIFO past
 * RT_RUN_MAX_MS it steps down for RT_BACKOFF_MS, so a flood of work cannot keep the
 * programs it serves off the CPU (the kernel's RT throttling would, only after 950 ms). */
static void on_check(struct ev_loop *loop, ev_check *w, int revents)
{
	struct dev *dev = w->data;
	ev_tstamp now = ev_now(loop);   /* libev read the clock as the wait ended */

	(void)revents;
	if (now - dev->wait_began > SLEPT_S)
		dev->awake_since = now;
	else if (dev->rt_now && now - dev->awake_since > RT_RUN_MAX_MS * 1e-3) {
		dev->cnt.rt_backoffs++;
		take_policy(dev, false);
		dev->rt_off_until = now + RT_BACKOFF_MS * 1e-3;
		/* a turn of the loop then, to take the policy back though nothing happens */
		ev_timer_set(&dev->rt_restore, RT_BACKOFF_MS * 1e-3, 0);
		ev_timer_start(loop, &dev->rt_restore);
	}
}

static void on_rt_restore(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

void cpu_claim_start(struct dev *dev, const struct cpu_claim *claim)
{
	ev_idle_init(&dev->poll_idle, on_poll_idle);
	dev->poll_idle.data = dev;
	dev->poll_budget = claim->poll_us * 1e-6;
	dev->tp.poll_rings = claim->poll_us > 0;
	dev->poll_always = claim->busy_poll;
	dev->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	dev->ncpus = (unsigned long)sysconf(_SC_NPROCESSORS_ONLN);
	if (claim->busy_poll)
		log_info("busy-polling for %u us after traffic", claim->poll_us);
	else if (claim->poll_us)
		log_info("polling for %u us after work before sleeping", claim->poll_us);
	take_priority(claim->nice);
	dev->nice = getpriority(PRIO_PROCESS, 0);
	if (claim->slice_us)
		take_slice(dev, claim->slice_us);
	dev->rt_priority = claim->rt_priority;
	if (!claim->rt_priority)
		return;
	/* the watchdog's clock reads, two a turn of the loop, are paid only under --realtime:
	 * on a guest whose clock is not read in user space (HPET) each is a system call */
	ev_check_init(&dev->wake_watcher, on_check);
	dev->wake_watcher.data = dev;
	ev_check_start(dev->loop, &dev->wake_watcher);
	ev_init(&dev->rt_restore, on_rt_restore);
	dev->awake_since = ev_time();
	log_info("sleeping under SCHED_FIFO at priority %d (--realtime)", claim->rt_priority);
}

/* Under --realtime the loop sleeps under SCHED_FIFO, unless it polls or steps down. */
void cpu_before_wait(struct dev *dev)
{
	if (!dev->rt_priority)
		return;
	take_policy(dev, !ev_is_active(&dev->poll_idle) && ev_time() >= dev->rt_off_until);
	dev->wait_began = ev_time();
}
