/* DCQCN's arithmetic (emu/daemon/dcqcn.c) against the algorithm as published: the cut on a
 * CNP, alpha's rise and decay, the stages of recovery, the release at line rate, the token
 * bucket, and the parser's refusals. Times are given, never read from a clock. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "emu/daemon/transport/dcqcn.h"

#define MB 1e6
#define LINE (1250 * MB)        /* 10 Gb/s in bytes per second */

static struct dcqcn_params params;
static struct dcqcn_flow flow;

static void setup(void)
{
	dcqcn_defaults(&params, LINE);
	dcqcn_reset(&flow);
}

/* Sends at rate bytes/s in 4 KiB packets from t0 for secs: the meter sees it. */
static double send_for(double t0, double secs, double rate)
{
	double t = t0, step = 4096 / rate;

	for (; t < t0 + secs; t += step)
		dcqcn_on_sent(&flow, &params, 4096, t);
	return t;
}

START_TEST(test_first_cnp_halves_the_measured_rate)
{
	double t = send_for(1.0, 3e-3, 100 * MB);

	ck_assert(!flow.limited);
	ck_assert(dcqcn_on_cnp(&flow, &params, t));
	ck_assert(flow.limited);
	ck_assert_uint_eq(flow.cuts, 1);
	/* alpha starts at 1, and the CNP raised it by g from there: the cut is by about half */
	ck_assert_double_eq_tol(flow.target, 100 * MB, 2 * MB);
	ck_assert_double_eq_tol(flow.rate, 100 * MB * (1 - flow.alpha / 2), 1 * MB);
	ck_assert_double_eq_tol(flow.alpha, 1.0, 1e-9);
}
END_TEST

START_TEST(test_no_measure_starts_from_line_rate)
{
	ck_assert(dcqcn_on_cnp(&flow, &params, 5.0));
	ck_assert_double_eq_tol(flow.target, LINE, 1);
	ck_assert_double_eq_tol(flow.rate, LINE / 2, 1);
}
END_TEST

START_TEST(test_one_cut_per_reduce_period)
{
	double rate;

	ck_assert(dcqcn_on_cnp(&flow, &params, 5.0));
	rate = flow.rate;
	/* a CNP within the period raises alpha but does not cut again */
	ck_assert(!dcqcn_on_cnp(&flow, &params, 5.0 + params.reduce_period / 2));
	ck_assert_double_eq(flow.rate, rate);
	ck_assert(dcqcn_on_cnp(&flow, &params, 5.0 + params.reduce_period * 1.01));
	ck_assert_double_lt(flow.rate, rate);
	ck_assert_uint_eq(flow.cuts, 2);
}
END_TEST

START_TEST(test_alpha_decays_without_cnps)
{
	double a0, t = 5.0;

	dcqcn_on_cnp(&flow, &params, t);
	a0 = flow.alpha;
	dcqcn_advance(&flow, &params, t + 10 * params.alpha_period + 1e-9);
	ck_assert_double_eq_tol(flow.alpha, a0 * pow(1 - params.g, 10), 1e-9);
	/* and a CNP raises it: alpha = (1 - g) alpha + g */
	a0 = flow.alpha;
	dcqcn_on_cnp(&flow, &params, t + 10 * params.alpha_period + 2e-9);
	ck_assert_double_eq_tol(flow.alpha, (1 - params.g) * a0 + params.g, 1e-9);
}
END_TEST

START_TEST(test_fast_recovery_then_additive_then_hyper)
{
	double t = 5.0, target, rate;

	dcqcn_on_cnp(&flow, &params, t);
	target = flow.target;
	/* fast recovery: halfway to the target each timer stage, the target unchanged */
	for (unsigned i = 1; i < params.stages_fast; i++) {
		rate = flow.rate;
		dcqcn_advance(&flow, &params, t + i * params.increase_period + 1e-9);
		ck_assert_double_eq_tol(flow.rate, (rate + target) / 2, 1);
		ck_assert_double_eq(flow.target, target);
	}
	/* a cut far below line rate so the climb can be watched */
	dcqcn_reset(&flow);
	t = send_for(t, 3e-3, 100 * MB);
	dcqcn_on_cnp(&flow, &params, t);
	target = flow.target;
	dcqcn_advance(&flow, &params, t + params.stages_fast * params.increase_period + 1e-9);
	ck_assert_uint_eq(flow.timer_stages, params.stages_fast);
	/* the timer's stage F is additive: the target moved by ai_rate */
	ck_assert_double_eq_tol(flow.target, target + params.ai_rate, 1);
	/* the byte counter at F as well: hyper increase, by hai_rate per stage past F */
	target = flow.target;
	flow.byte_stages = params.stages_fast;
	rate = flow.rate;
	dcqcn_on_sent(&flow, &params, params.byte_reset, t + params.stages_fast *
		      params.increase_period + 2e-9);
	ck_assert_uint_eq(flow.byte_stages, params.stages_fast + 1);
	ck_assert_double_eq_tol(flow.target, target + params.hai_rate, 1);
	ck_assert_double_eq_tol(flow.rate, (rate + flow.target) / 2, 1);
}
END_TEST

START_TEST(test_released_at_line_rate)
{
	dcqcn_on_cnp(&flow, &params, 5.0);
	ck_assert(flow.limited);
	dcqcn_advance(&flow, &params, 6.0);
	ck_assert(!flow.limited);
	ck_assert_double_eq(dcqcn_wait(&flow, &params, 6.0), 0);
}
END_TEST

START_TEST(test_min_rate_floor)
{
	double t = 5.0;

	for (int i = 0; i < 200; i++, t += params.reduce_period)
		dcqcn_on_cnp(&flow, &params, t);
	ck_assert_double_eq(flow.rate, params.min_rate);
}
END_TEST

START_TEST(test_bucket_paces_at_the_rate)
{
	double t = 5.0, wait, sent = 0;

	dcqcn_on_cnp(&flow, &params, t);
	params.increase_period = 10.0;   /* hold the rate still while it is measured */
	params.byte_reset = 1ull << 40;
	ck_assert_double_eq(dcqcn_wait(&flow, &params, t), 0);
	/* the bucket's depth goes at once; after it the rate sets the gaps */
	while (dcqcn_wait(&flow, &params, t) == 0 && sent < 1e9) {
		dcqcn_on_sent(&flow, &params, 4096, t);
		sent += 4096;
	}
	ck_assert_double_ge(sent, (double)params.burst);
	wait = dcqcn_wait(&flow, &params, t);
	ck_assert_double_eq_tol(wait, -flow.tokens / flow.rate, 1e-12);
	ck_assert_double_gt(dcqcn_wait(&flow, &params, t + wait / 2), 0);
	ck_assert_double_eq(dcqcn_wait(&flow, &params, t + wait + 1e-9), 0);
	/* one second of packets sent as soon as allowed comes to the rate, give or take a
	 * bucket */
	sent = 0;
	for (double end = t + 1; t < end;) {
		wait = dcqcn_wait(&flow, &params, t);
		if (wait > 0) {
			t += wait;
			continue;
		}
		dcqcn_on_sent(&flow, &params, 4096, t);
		sent += 4096;
	}
	ck_assert_double_eq_tol(sent, flow.rate, flow.rate * 0.01 + 2.0 * (double)params.burst);
}
END_TEST

START_TEST(test_parse)
{
	char err[256];

	ck_assert_int_eq(dcqcn_parse("off", &params, err, sizeof(err)), 0);
	ck_assert(!params.enabled);
	ck_assert_int_eq(dcqcn_parse("line-rate=1G,ai-rate=8M,g=0.5,cnp-us=100,mark=64,"
				     "byte-reset=2M,burst=16K,fast-stages=3", &params, err,
				     sizeof(err)), 0);
	ck_assert(params.enabled);
	ck_assert_double_eq_tol(params.line_rate, 125 * MB, 1);
	ck_assert_double_eq_tol(params.ai_rate, 1 * MB, 1);
	ck_assert_double_eq(params.g, 0.5);
	ck_assert_double_eq_tol(params.cnp_interval, 100e-6, 1e-12);
	ck_assert_uint_eq(params.mark_backlog, 64);
	ck_assert_uint_eq(params.byte_reset, 2 << 20);
	ck_assert_uint_eq(params.burst, 16 << 10);
	ck_assert_uint_eq(params.stages_fast, 3);
	ck_assert_int_eq(dcqcn_parse("bogus=1", &params, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "bogus"));
	ck_assert_int_eq(dcqcn_parse("g=1", &params, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "g=1"));
	ck_assert_int_eq(dcqcn_parse("ai-rate=5X", &params, err, sizeof(err)), -1);
	ck_assert_int_eq(dcqcn_parse("alpha-us=0", &params, err, sizeof(err)), -1);
	ck_assert_int_eq(dcqcn_parse("mark=0", &params, err, sizeof(err)), -1);
	ck_assert_int_eq(dcqcn_parse("burst=-4K", &params, err, sizeof(err)), -1);
	ck_assert_int_eq(dcqcn_parse("line", &params, err, sizeof(err)), -1);
	ck_assert_int_eq(dcqcn_parse("line-rate=1M,min-rate=2M", &params, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "min-rate"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dcqcn");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_first_cnp_halves_the_measured_rate);
	tcase_add_test(tc, test_no_measure_starts_from_line_rate);
	tcase_add_test(tc, test_one_cut_per_reduce_period);
	tcase_add_test(tc, test_alpha_decays_without_cnps);
	tcase_add_test(tc, test_fast_recovery_then_additive_then_hyper);
	tcase_add_test(tc, test_released_at_line_rate);
	tcase_add_test(tc, test_min_rate_floor);
	tcase_add_test(tc, test_bucket_paces_at_the_rate);
	tcase_add_test(tc, test_parse);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
