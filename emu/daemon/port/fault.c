#include "emu/daemon/port/fault.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/daemon/port/port.h"

struct held_frame {
	struct held_frame *next;
	ev_tstamp due;
	size_t len;
	uint8_t data[];
};

static bool parse_prob(const char *val, double *out)
{
	char *end;
	double p = strtod(val, &end);

	if (end == val || *end || !(p >= 0 && p <= 1))
		return false;
	*out = p;
	return true;
}

static int parse_pair(const char *key, const char *val, struct fault_cfg *cfg)
{
	char *end;

	if (!strcmp(key, "drop"))
		return parse_prob(val, &cfg->drop) ? 0 : -1;
	if (!strcmp(key, "dup"))
		return parse_prob(val, &cfg->dup) ? 0 : -1;
	if (!strcmp(key, "corrupt"))
		return parse_prob(val, &cfg->corrupt) ? 0 : -1;
	if (!strcmp(key, "reorder"))
		return parse_prob(val, &cfg->reorder) ? 0 : -1;
	if (!strcmp(key, "delay")) {
		unsigned long us = strtoul(val, &end, 10);

		if (end == val || *end || us > 10000000)
			return -1;
		cfg->delay_us = (uint32_t)us;
		return 0;
	}
	if (!strcmp(key, "seed")) {
		cfg->seed = strtoull(val, &end, 0);
		cfg->seeded = true;
		return end == val || *end ? -1 : 0;
	}
	if (!strcmp(key, "dir")) {
		cfg->rx = !strcmp(val, "rx") || !strcmp(val, "both");
		cfg->tx = !strcmp(val, "tx") || !strcmp(val, "both");
		return cfg->rx || cfg->tx ? 0 : -1;
	}
	return -2;
}

int fault_parse(const char *spec, struct fault_cfg *cfg, char *err, size_t errlen)
{
	char buf[256], *save = NULL, *item;

	memset(cfg, 0, sizeof(*cfg));
	cfg->rx = cfg->tx = true;
	if (!strcmp(spec, "off") || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "fault spec too long");
		return -1;
	}
	strcpy(buf, spec);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		int rc;

		if (!eq) {
			snprintf(err, errlen, "fault '%s': expected KEY=VALUE", item);
			return -1;
		}
		*eq = '\0';
		rc = parse_pair(item, eq + 1, cfg);
		if (rc == -2) {
			snprintf(err, errlen, "unknown fault '%s' (drop, dup, corrupt, reorder, delay, "
				 "seed, dir)", item);
			return -1;
		}
		if (rc < 0) {
			snprintf(err, errlen, "fault %s=%s: probabilities go from 0 to 1, delay is in "
				 "microseconds (at most 10 s), dir is rx, tx or both", item, eq + 1);
			return -1;
		}
	}
	return 0;
}

bool fault_active(const struct fault_cfg *cfg)
{
	return cfg->drop > 0 || cfg->dup > 0 || cfg->corrupt > 0 || cfg->reorder > 0 ||
	       cfg->delay_us > 0;
}

void fault_format(const struct fault_cfg *cfg, char *buf, size_t len)
{
	if (!fault_active(cfg)) {
		snprintf(buf, len, "off");
		return;
	}
	snprintf(buf, len, "drop=%g,dup=%g,corrupt=%g,reorder=%g,delay=%u,seed=%llu,dir=%s",
		 cfg->drop, cfg->dup, cfg->corrupt, cfg->reorder, cfg->delay_us,
		 (unsigned long long)cfg->seed, cfg->rx && cfg->tx ? "both" : cfg->rx ? "rx" : "tx");
}

/* xorshift64*: fast, and the same seed gives the same faults. */
static uint64_t next_random(struct fault_stage *st)
{
	st->rng ^= st->rng >> 12;
	st->rng ^= st->rng << 25;
	st->rng ^= st->rng >> 27;
	return st->rng * 0x2545f4914f6cdd1dull;
}

static bool chance(struct fault_stage *st, double p)
{
	return p > 0 && (double)(next_random(st) >> 11) * 0x1.0p-53 < p;
}

static struct held_frame *hold(const uint8_t *frame, size_t len)
{
	struct held_frame *h = malloc(sizeof(*h) + len);

	if (h) {
		h->next = NULL;
		h->len = len;
		memcpy(h->data, frame, len);
	}
	return h;
}

/* The delayed frames due by until, oldest first. Each leaves the queue before it is
 * delivered: a delivery may append to it. */
static void deliver_delayed(struct fault_stage *st, ev_tstamp until)
{
	struct held_frame *h;

	while ((h = st->delayed_head) && h->due <= until) {
		st->delayed_head = h->next;
		if (!st->delayed_head)
			st->delayed_tail = NULL;
		st->deliver(st->ctx, h->data, h->len);
		free(h);
	}
}

static void delay_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fault_stage *st = w->data;
	ev_tstamp now = ev_now(loop);

	(void)revents;
	deliver_delayed(st, now);
	if (st->delayed_head && !ev_is_active(w)) {
		ev_timer_set(w, st->delayed_head->due - now, 0);
		ev_timer_start(loop, w);
	}
}

void fault_stage_init(struct fault_stage *st, struct ev_loop *loop, const struct fault_cfg *cfg,
		      struct dev_counters *cnt, fault_deliver_fn deliver, void *ctx,
		      uint64_t salt)
{
	memset(st, 0, sizeof(*st));
	st->salt = salt;
	st->cfg = cfg;
	st->loop = loop;
	st->cnt = cnt;
	st->deliver = deliver;
	st->ctx = ctx;
	ev_init(&st->timer, delay_cb);
	st->timer.data = st;
	fault_stage_reseed(st);
}

void fault_stage_reseed(struct fault_stage *st)
{
	/* splitmix64 of seed and salt: never zero, and unrelated for nearby inputs */
	uint64_t z = st->cfg->seed + st->salt * 0x9e3779b97f4a7c15ull + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	st->rng = (z ^ (z >> 31)) | 1;
}

/* The last step of a frame that survived drop, corruption and reordering. */
static void pass_on(struct fault_stage *st, const uint8_t *frame, size_t len)
{
	struct held_frame *h;

	if (!st->cfg->delay_us) {
		st->deliver(st->ctx, frame, len);
		return;
	}
	h = hold(frame, len);
	if (!h)
		return;
	st->cnt->fault_delayed++;
	h->due = ev_now(st->loop) + st->cfg->delay_us * 1e-6;
	if (st->delayed_tail)
		st->delayed_tail->next = h;
	else
		st->delayed_head = h;
	st->delayed_tail = h;
	if (!ev_is_active(&st->timer)) {
		ev_timer_set(&st->timer, st->cfg->delay_us * 1e-6, 0);
		ev_timer_start(st->loop, &st->timer);
	}
}

/* A delivery may flush the batch the caller's frame sits in, or release what this stage
 * holds: so every decision is made, the held frame taken out of the stage and a second copy
 * made, before the first delivery, and frame is not read after it. */
void fault_apply(struct fault_stage *st, const uint8_t *frame, size_t len, size_t from_offset)
{
	const struct fault_cfg *cfg = st->cfg;
	uint8_t copy[DEV_FRAME_MAX];
	struct held_frame *behind = st->behind;
	bool twice;

	if (chance(st, cfg->drop)) {
		st->cnt->fault_dropped++;
		return;
	}
	if (len > from_offset && len <= sizeof(copy) && chance(st, cfg->corrupt)) {
		size_t bit = next_random(st) % ((len - from_offset) * 8);

		memcpy(copy, frame, len);
		copy[from_offset + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		frame = copy;
		st->cnt->fault_corrupted++;
	}
	if (!behind && chance(st, cfg->reorder)) {
		st->behind = hold(frame, len);
		if (st->behind)
			return;
	}
	twice = chance(st, cfg->dup) && len <= sizeof(copy);
	if (twice && frame != copy) {
		memcpy(copy, frame, len);
		frame = copy;
	}
	st->behind = NULL;
	pass_on(st, frame, len);
	if (twice) {
		st->cnt->fault_duplicated++;
		pass_on(st, frame, len);
	}
	if (behind) {
		st->cnt->fault_reordered++;
		pass_on(st, behind->data, behind->len);
		free(behind);
	}
}

void fault_release_held(struct fault_stage *st)
{
	struct held_frame *behind = st->behind;

	if (behind) {
		st->behind = NULL;
		pass_on(st, behind->data, behind->len);
		free(behind);
	}
}

void fault_drain(struct fault_stage *st)
{
	fault_release_held(st);
	deliver_delayed(st, INFINITY);
	if (st->loop)
		ev_timer_stop(st->loop, &st->timer);
}

void fault_stage_free(struct fault_stage *st)
{
	struct held_frame *h;

	free(st->behind);
	st->behind = NULL;
	while ((h = st->delayed_head)) {
		st->delayed_head = h->next;
		free(h);
	}
	st->delayed_tail = NULL;
	if (st->loop)
		ev_timer_stop(st->loop, &st->timer);
}
