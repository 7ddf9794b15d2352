/* rdma-write's client output: perftest's figures as a table or one JSON object, and the
 * server's verdict in the client's words. */
#include <inttypes.h>

#include "tools/rdma-write/rdma-write.h"

/* For --json: fixed words, so the object needs no escaping. */
static const char *const abort_names[] = {
	[ABORT_NONE] = "none",
	[ABORT_SETUP] = "setup failed",
	[ABORT_TIMEOUT] = "completion timeout",
	[ABORT_DAEMON] = "daemon gone",
	[ABORT_POST] = "post failed",
	[ABORT_ORDER] = "completion out of order",
	[ABORT_SERVER] = "lost the server",
};

struct stats {
	double seconds;
	double peak_mbps;
	double avg_mbps;
	double mpps;
};

/* perftest's figures: MB is 2^20 bytes, time runs from the first post to the last
 * completion (of a failed run: the last successful one, so waiting out a timeout does not
 * dilute the rates of what did complete). */
static struct stats compute_stats(const struct client *c)
{
	const struct run *r = &c->run;
	struct stats st = { 0 };
	double bps;

	if (!r->completed || r->t_end <= r->t_start)
		return st;
	st.seconds = (double)(r->t_end - r->t_start) / NS_PER_S;
	bps = (double)r->completed * (double)c->s.o->size / st.seconds;
	st.avg_mbps = bps / MIB;
	/* The whole run is a window of at least chunk completions too. */
	st.peak_mbps = (r->peak_bps > bps ? r->peak_bps : bps) / MIB;
	st.mpps = (double)r->completed / st.seconds / 1e6;
	return st;
}

static void print_table(const struct client *c, const struct stats *st)
{
	static const char rule[] = "-----------------------------------------------------------"
				   "----------------------------";

	printf("%s\n", rule);
	printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]"
	       "   MsgRate[Mpps]\n");
	printf(" %-10zu %-14" PRIu64 " %-18.2f %-20.2f %.6f\n", c->s.o->size, c->run.completed,
	       st->peak_mbps, st->avg_mbps, st->mpps);
	printf("%s\n", rule);
}

static void print_json(const struct client *c, const struct stats *st, const char *verify)
{
	const struct run *r = &c->run;

	printf("{\"bytes\":%zu,\"iterations\":%" PRIu64 ",\"bw_peak_mbps\":%.2f,"
	       "\"bw_avg_mbps\":%.2f,\"msg_rate_mpps\":%.6f,\"seconds\":%.6f,\"mtu\":%u,"
	       "\"verify\":\"%s\"", c->s.o->size, r->completed, st->peak_mbps, st->avg_mbps,
	       st->mpps, st->seconds, mtu_bytes(c->s.mtu), verify);
	if (r->result == RUN_WC_ERROR)
		printf(",\"status\":\"%s\"", rocemu_wc_status_str(r->bad_wc.status));
	else if (r->result == RUN_ABORTED)
		printf(",\"error\":\"%s\"", abort_names[r->reason]);
	printf("}\n");
}

/* What the server found, in the client's words. */
static void print_verdict(const struct client *c, const struct ctl_msg *v)
{
	FILE *f = c->s.info;

	switch (v->code) {
	case VERDICT_OK:
		if (c->s.o->verify)
			fprintf(f, "verify: OK\n");
		break;
	case VERDICT_MISMATCH:
		fprintf(f, "verify: FAILED at offset %" PRIu64 "\n", v->value);
		break;
	case VERDICT_UNCHANGED:
		fprintf(f, "server: buffer unchanged\n");
		break;
	case VERDICT_CHANGED:
		fprintf(f, "server: buffer CHANGED at offset %" PRIu64 "\n", v->value);
		break;
	case VERDICT_UNCHECKED:
		fprintf(f, "server: buffer not checked (writes had landed before the failure)\n");
		break;
	case VERDICT_WRONGLY_ACCEPTED:
		msg("the server says writes outside its buffer or with a wrong rkey completed");
		break;
	default:
		msg("unknown verdict %u from the server", v->code);
	}
}

/* Prints the result; the exit status is 0 only for a run that completed and that the
 * server found as expected. */
int report(struct client *c, const struct ctl_msg *verdict)
{
	const struct options *o = c->s.o;
	const struct run *r = &c->run;
	const struct stats st = compute_stats(c);
	bool ok = r->result == RUN_OK && verdict && verdict->code == VERDICT_OK;

	if (r->result == RUN_WC_ERROR)
		fprintf(stderr, "completion error: %s (wr_id %" PRIu64 ", vendor_err %u)\n",
			rocemu_wc_status_str(r->bad_wc.status), (uint64_t)r->bad_wc.wr_id,
			r->bad_wc.vendor_err);
	if (c->ran && o->json)
		print_json(c, &st, !o->verify ? "off" : ok ? "OK" : "FAILED");
	else if (c->ran && r->result == RUN_OK)
		print_table(c, &st);
	if (verdict)
		print_verdict(c, verdict);
	else if (o->verify && r->result == RUN_OK)
		fprintf(c->s.info, "verify: FAILED (no verdict from the server)\n");
	return ok ? 0 : 1;
}
