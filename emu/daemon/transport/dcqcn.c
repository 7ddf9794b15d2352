/* DCQCN's arithmetic (see dcqcn.h). The defaults follow the paper's where they are about
 * the algorithm (g, F, the CNP interval), and are scaled to a software device where they
 * are about speed: a daemon moves hundreds of MB/s, not 100 Gb/s, so additive steps of a
 * few Mb/s would take seconds to give back what one CNP took. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/daemon/transport/dcqcn.h"

#define ALPHA_INITIAL 1.0
#define RELEASE_SHARE 0.99        /* this close to the line rate the limiter lets go */
#define MAX_STEPS 4096            /* periods caught up in one go: the rest change nothing */
/* The event loop's timers wake in whole milliseconds when nothing else happens: the bucket
 * holds at least this long's worth, or a paced QP could never reach its rate. */
#define TIMER_GRAIN 1.5e-3
#define METER_PERIOD 1e-3         /* a flow's sending rate is measured over this long */

void dcqcn_defaults(struct dcqcn_params *p, double line_rate)
{
	*p = (struct dcqcn_params){
		.enabled = true,
		.line_rate = line_rate,
		.min_rate = 10e6 / 8,
		.ai_rate = 40e6 / 8,
		.hai_rate = 400e6 / 8,
		.g = 1.0 / 256,
		.alpha_period = 55e-6,
		.increase_period = 100e-6,
		.byte_reset = 1 << 20,
		.stages_fast = 5,
		.reduce_period = 50e-6,
		.burst = 64 << 10,
		.cnp_interval = 50e-6,
		.mark_backlog = 256,
	};
}

void dcqcn_reset(struct dcqcn_flow *f)
{
	*f = (struct dcqcn_flow){ 0 };
}

static void increase(struct dcqcn_flow *f, const struct dcqcn_params *p)
{
	unsigned hi = f->timer_stages > f->byte_stages ? f->timer_stages : f->byte_stages;
	unsigned lo = f->timer_stages < f->byte_stages ? f->timer_stages : f->byte_stages;

	if (hi >= p->stages_fast && lo < p->stages_fast)
		f->target += p->ai_rate;
	else if (lo >= p->stages_fast)
		f->target += (double)(lo - p->stages_fast + 1) * p->hai_rate;
	if (f->target > p->line_rate)
		f->target = p->line_rate;
	f->rate = (f->rate + f->target) / 2;
	if (f->rate >= p->line_rate * RELEASE_SHARE)
		f->limited = false;
}

void dcqcn_advance(struct dcqcn_flow *f, const struct dcqcn_params *p, double now)
{
	unsigned n;

	if (!f->limited)
		return;
	for (n = 0; now - f->alpha_at >= p->alpha_period && n < MAX_STEPS; n++) {
		f->alpha *= 1 - p->g;
		f->alpha_at += p->alpha_period;
	}
	if (n == MAX_STEPS)
		f->alpha_at = now;
	for (n = 0; f->limited && now - f->stage_at >= p->increase_period && n < MAX_STEPS; n++) {
		f->stage_at += p->increase_period;
		f->timer_stages++;
		increase(f, p);
	}
	if (n == MAX_STEPS)
		f->stage_at = now;
}

bool dcqcn_on_cnp(struct dcqcn_flow *f, const struct dcqcn_params *p, double now)
{
	if (!f->limited) {
		double start = f->measured > 0 && f->measured < p->line_rate ? f->measured
									     : p->line_rate;

		f->limited = true;
		f->rate = start;
		f->alpha = ALPHA_INITIAL;
		f->alpha_at = f->stage_at = f->tokens_at = now;
		f->tokens = (double)p->burst;
		f->cut_at = now - 2 * p->reduce_period;
	}
	dcqcn_advance(f, p, now);
	f->alpha = (1 - p->g) * f->alpha + p->g;
	f->alpha_at = now;
	if (now - f->cut_at < p->reduce_period)
		return false;
	f->target = f->rate;
	f->rate *= 1 - f->alpha / 2;
	if (f->rate < p->min_rate)
		f->rate = p->min_rate;
	f->cut_at = now;
	f->stage_at = now;
	f->stage_bytes = 0;
	f->timer_stages = f->byte_stages = 0;
	f->cuts++;
	return true;
}

double dcqcn_wait(struct dcqcn_flow *f, const struct dcqcn_params *p, double now)
{
	if (!f->limited)
		return 0;
	dcqcn_advance(f, p, now);
	if (!f->limited)
		return 0;
	if (now > f->tokens_at) {
		double depth = f->rate * TIMER_GRAIN > (double)p->burst ?
			       f->rate * TIMER_GRAIN : (double)p->burst;

		f->tokens += f->rate * (now - f->tokens_at);
		if (f->tokens > depth)
			f->tokens = depth;
		f->tokens_at = now;
	}
	/* less than a byte short is none short: a wait that small would not move the clock */
	return f->tokens > -1 ? 0 : -f->tokens / f->rate;
}

/* A period with a pause of more than a period in it says nothing of the rate: it starts
 * again without a measure. */
static void meter(struct dcqcn_flow *f, size_t bytes, double now)
{
	double elapsed = now - f->meter_at;

	f->meter_bytes += bytes;
	if (elapsed < METER_PERIOD)
		return;
	if (elapsed < 2 * METER_PERIOD)
		f->measured = (double)f->meter_bytes / elapsed;
	f->meter_at = now;
	f->meter_bytes = 0;
}

void dcqcn_on_sent(struct dcqcn_flow *f, const struct dcqcn_params *p, size_t bytes,
		   double now)
{
	meter(f, bytes, now);
	if (!f->limited)
		return;
	f->tokens -= (double)bytes;
	f->stage_bytes += bytes;
	if (f->stage_bytes >= p->byte_reset) {
		f->stage_bytes = 0;
		f->byte_stages++;
		dcqcn_advance(f, p, now);
		if (f->limited)
			increase(f, p);
	}
}

/* Rates are given in bits per second, with K, M or G (powers of 1000), as NICs give them. */
static bool parse_rate(const char *s, double *bytes_per_s)
{
	char *end;
	double v = strtod(s, &end);
	double unit = 1;

	if (end == s || v <= 0)
		return false;
	switch (*end) {
	case '\0': break;
	case 'K': case 'k': unit = 1e3; end++; break;
	case 'M': case 'm': unit = 1e6; end++; break;
	case 'G': case 'g': unit = 1e9; end++; break;
	default: return false;
	}
	if (*end || v * unit > 1e12)
		return false;
	*bytes_per_s = v * unit / 8;
	return true;
}

static bool parse_micros(const char *s, double *seconds)
{
	char *end;
	double us = strtod(s, &end);

	if (end == s || *end || !(us >= 1 && us <= 1e6))
		return false;
	*seconds = us * 1e-6;
	return true;
}

static bool parse_count(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *s == '-' || errno)
		return false;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	if (shift)
		end++;
	if (*end || v > (hi >> shift) || (v << shift) < lo)
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static bool parse_fraction(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v > 0 && v < 1))
		return false;
	*out = v;
	return true;
}

/* 0, -1 for a bad value, -2 for an unknown key. */
static int parse_pair(const char *key, const char *val, struct dcqcn_params *p)
{
	uint64_t n;
	bool ok;

	if (!strcmp(key, "line-rate"))
		ok = parse_rate(val, &p->line_rate);
	else if (!strcmp(key, "min-rate"))
		ok = parse_rate(val, &p->min_rate);
	else if (!strcmp(key, "ai-rate"))
		ok = parse_rate(val, &p->ai_rate);
	else if (!strcmp(key, "hai-rate"))
		ok = parse_rate(val, &p->hai_rate);
	else if (!strcmp(key, "g"))
		ok = parse_fraction(val, &p->g);
	else if (!strcmp(key, "alpha-us"))
		ok = parse_micros(val, &p->alpha_period);
	else if (!strcmp(key, "increase-us"))
		ok = parse_micros(val, &p->increase_period);
	else if (!strcmp(key, "reduce-us"))
		ok = parse_micros(val, &p->reduce_period);
	else if (!strcmp(key, "cnp-us"))
		ok = parse_micros(val, &p->cnp_interval);
	else if (!strcmp(key, "byte-reset"))
		ok = parse_count(val, 4096, 1ull << 34, &p->byte_reset);
	else if (!strcmp(key, "burst"))
		ok = parse_count(val, 4096, 1ull << 30, &p->burst);
	else if (!strcmp(key, "fast-stages")) {
		ok = parse_count(val, 1, 1000, &n);
		p->stages_fast = ok ? (unsigned)n : p->stages_fast;
	} else if (!strcmp(key, "mark")) {
		ok = parse_count(val, 1, 65535, &n);
		p->mark_backlog = ok ? (unsigned)n : p->mark_backlog;
	} else {
		return -2;
	}
	return ok ? 0 : -1;
}

int dcqcn_parse(const char *spec, struct dcqcn_params *p, char *err, size_t errlen)
{
	char buf[512], *save = NULL, *item;

	if (!strcmp(spec, "off")) {
		p->enabled = false;
		return 0;
	}
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "congestion control spec too long");
		return -1;
	}
	strcpy(buf, spec);
	p->enabled = true;
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		int rc;

		if (!strcmp(item, "on"))
			continue;
		if (!eq) {
			snprintf(err, errlen, "'%s': expected KEY=VALUE, on or off", item);
			return -1;
		}
		*eq = '\0';
		rc = parse_pair(item, eq + 1, p);
		if (rc == -2) {
			snprintf(err, errlen, "unknown key '%s' (line-rate, min-rate, ai-rate, "
				 "hai-rate, g, alpha-us, increase-us, reduce-us, cnp-us, byte-reset, "
				 "burst, fast-stages, mark)", item);
			return -1;
		}
		if (rc < 0) {
			snprintf(err, errlen, "%s=%s: rates are bits/s with K, M or G (up to 1T), "
				 "times 1 to 1000000 us, g between 0 and 1, byte counts 4K and up, "
				 "fast-stages 1-1000, mark 1-65535 ring slots", item, eq + 1);
			return -1;
		}
	}
	if (p->min_rate > p->line_rate) {
		snprintf(err, errlen, "min-rate is above line-rate");
		return -1;
	}
	return 0;
}

void dcqcn_format(const struct dcqcn_params *p, char *buf, size_t len)
{
	if (!p->enabled) {
		snprintf(buf, len, "off");
		return;
	}
	snprintf(buf, len, "line-rate=%gM,min-rate=%gM,ai-rate=%gM,hai-rate=%gM,g=%g,"
		 "alpha-us=%g,increase-us=%g,reduce-us=%g,cnp-us=%g,byte-reset=%llu,burst=%llu,"
		 "fast-stages=%u,mark=%u",
		 p->line_rate * 8 / 1e6, p->min_rate * 8 / 1e6, p->ai_rate * 8 / 1e6,
		 p->hai_rate * 8 / 1e6, p->g, p->alpha_period * 1e6, p->increase_period * 1e6,
		 p->reduce_period * 1e6, p->cnp_interval * 1e6, (unsigned long long)p->byte_reset,
		 (unsigned long long)p->burst, p->stages_fast, p->mark_backlog);
}
