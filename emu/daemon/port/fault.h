/* Built-in fault injection: what netem would do, for kernels and CI runners without it.
 * One stage per direction takes each frame and delivers it (or not, or twice, or later,
 * or after the next one, or with one bit flipped) to the next step of its path. */
#ifndef ROCEMU_DAEMON_FAULT_H
#define ROCEMU_DAEMON_FAULT_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dev_counters;

struct fault_cfg {
	double drop, dup, corrupt, reorder; /* probabilities, 0 to 1 */
	uint32_t delay_us;
	uint64_t seed;
	bool seeded;
	bool rx, tx;
};

typedef void (*fault_deliver_fn)(void *ctx, const uint8_t *frame, size_t len);

struct held_frame;

struct fault_stage {
	const struct fault_cfg *cfg;
	uint64_t rng;
	uint64_t salt;
	fault_deliver_fn deliver;
	void *ctx;
	struct dev_counters *cnt;
	struct held_frame *behind;        /* a frame waiting to go after the next one */
	struct held_frame *delayed_head;  /* frames waiting for their time, oldest first */
	struct held_frame *delayed_tail;
	struct ev_loop *loop;
	ev_timer timer;
};

/* "drop=P,dup=P,corrupt=P,reorder=P,delay=USEC[,seed=N][,dir=rx|tx|both]" or "off".
 * Returns 0, or -1 with a message naming the bad part. */
int fault_parse(const char *spec, struct fault_cfg *cfg, char *err, size_t errlen);
void fault_format(const struct fault_cfg *cfg, char *buf, size_t len);
bool fault_active(const struct fault_cfg *cfg);

/* salt tells stages apart (direction, address): two daemons given one seed must not make
 * the same choices, or a receiver would flip back the very bit its sender flipped. */
void fault_stage_init(struct fault_stage *st, struct ev_loop *loop, const struct fault_cfg *cfg,
		      struct dev_counters *cnt, fault_deliver_fn deliver, void *ctx,
		      uint64_t salt);
void fault_stage_reseed(struct fault_stage *st);
/* Passes one frame through the stage; corrupt flips a bit at or after from_offset. The
 * frame is read only before its first delivery, and a delivery may do anything the
 * stage's user does (flush the batch that holds frame, deliver into the other stage,
 * call fault_release_held): frames longer than DEV_FRAME_MAX are never corrupted or
 * duplicated. */
void fault_apply(struct fault_stage *st, const uint8_t *frame, size_t len, size_t from_offset);
/* Delivers the frame held back for reordering, if any: the stage's user calls it when no
 * next frame is coming soon (the end of a batch). */
void fault_release_held(struct fault_stage *st);
/* Delivers everything held, delayed frames too, now: before the stage is changed. */
void fault_drain(struct fault_stage *st);
/* Frees what is still held, undelivered (shutdown). */
void fault_stage_free(struct fault_stage *st);

#endif
