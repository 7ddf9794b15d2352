/* DCQCN, the rate control RoCE NICs run per QP (Zhu et al., SIGCOMM 2015), as plain
 * arithmetic on one flow's state and the time: no loop, no sockets, so it is tested alone.
 *
 * The reaction point (the sender) starts unlimited. A CNP cuts its rate by alpha/2 (the
 * first one from the rate it was measured sending at: a daemon's real limit is its CPU,
 * far below a link's nominal speed, and halving from that would take many CNPs to
 * reach it) and
 * raises alpha (its estimate of how congested the path is); alpha decays while no CNP
 * comes. The rate climbs back in stages counted by a timer and a byte counter: halfway
 * to the rate before the cut (fast recovery), then by ai_rate (additive), then by
 * hai_rate times the stage (hyper). Back at the line rate the limiter lets go. */
#ifndef ROCEMU_DAEMON_DCQCN_H
#define ROCEMU_DAEMON_DCQCN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rates in bytes per second, times in seconds. */
struct dcqcn_params {
	bool enabled;
	double line_rate;         /* where the limiter lets go */
	double min_rate;          /* no cut goes below it */
	double ai_rate;           /* additive increase step */
	double hai_rate;          /* hyper increase step */
	double g;                 /* alpha's gain, 0 < g < 1 */
	double alpha_period;      /* alpha decays once per period without a CNP */
	double increase_period;   /* the timer that counts an increase stage */
	uint64_t byte_reset;      /* the bytes that count an increase stage */
	unsigned stages_fast;     /* stages of fast recovery before additive increase (F) */
	double reduce_period;     /* at most one cut per period, however many CNPs come */
	uint64_t burst;           /* bytes sent back to back at the limited rate */
	/* the notification point's side */
	double cnp_interval;      /* at most one CNP per QP per interval */
	unsigned mark_backlog;    /* receive ring slots waiting that mean congestion */
};

struct dcqcn_flow {
	bool limited;
	double rate;              /* current rate (R_C) */
	double target;            /* rate before the last cut (R_T) */
	double alpha;
	double alpha_at;          /* alpha last decayed or raised */
	double cut_at;            /* the last cut */
	double stage_at;          /* the increase timer's last stage */
	uint64_t stage_bytes;     /* bytes sent since the byte counter's last stage */
	unsigned timer_stages;
	unsigned byte_stages;
	double tokens;            /* bytes that may go now; below 0 after a packet larger */
	double tokens_at;
	uint64_t cuts;            /* CNPs that cut the rate */
	/* the rate the flow is seen sending at, limited or not */
	double meter_at;
	uint64_t meter_bytes;
	double measured;          /* bytes/s over the last whole meter period; 0: none yet */
};

/* The defaults, for a link of line_rate bytes per second. */
void dcqcn_defaults(struct dcqcn_params *p, double line_rate);
/* "off", or KEY=VALUE,... over the defaults already in p (rocemud(8) has the keys);
 * 0, or -1 with a message naming the bad part. */
int dcqcn_parse(const char *spec, struct dcqcn_params *p, char *err, size_t errlen);
void dcqcn_format(const struct dcqcn_params *p, char *buf, size_t len);

void dcqcn_reset(struct dcqcn_flow *f);
/* A CNP came at now: true when it cut the rate (not within reduce_period of the last). */
bool dcqcn_on_cnp(struct dcqcn_flow *f, const struct dcqcn_params *p, double now);
/* Runs alpha's decay and the increase timer up to now. */
void dcqcn_advance(struct dcqcn_flow *f, const struct dcqcn_params *p, double now);
/* How long until the flow may send (0: now). */
double dcqcn_wait(struct dcqcn_flow *f, const struct dcqcn_params *p, double now);
/* bytes went out at now: metered, and when limited taken from the tokens and counted
 * toward the byte stage. */
void dcqcn_on_sent(struct dcqcn_flow *f, const struct dcqcn_params *p, size_t bytes,
		   double now);

#endif
