/* icrc: agreement with a zlib reference, the shared captures, masked fields, bit flips. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icrc/icrc.h"
#include "test/frames.h"
#include "test/testutil.h"
#include "wire/wire.h"

static uint8_t frame[9000];

static bool frame_verifies(const uint8_t *f, size_t len)
{
	const uint8_t *ip = f + 14;
	int version = ip[0] >> 4;
	size_t ihl = version == 4 ? (size_t)(ip[0] & 0x0f) * 4 : 40;

	return icrc_verify(ip, ihl, version, len - 14 - ihl);
}

START_TEST(test_matches_reference_ipv4_and_ipv6)
{
	static const size_t sizes[] = { 0, 1, 3, 4, 5, 63, 256, 1024, 4096 };

	for (int v = 4; v <= 6; v += 2)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t len = frames_make(frame, v, 5, 0x0a, sizes[i]);

			ck_assert_msg(frame_verifies(frame, len), "IPv%d payload %zu", v, sizes[i]);
		}
}
END_TEST

START_TEST(test_ipv4_options_are_covered)
{
	size_t len = frames_make(frame, 4, 7, 0x0a, 100);

	ck_assert(frame_verifies(frame, len));
	frame[14 + 21] ^= 0x01; /* an option byte */
	ck_assert(!frame_verifies(frame, len));
}
END_TEST

START_TEST(test_pieces_equal_whole)
{
	size_t len = frames_make(frame, 4, 5, 0x0a, 1000);
	const uint8_t *ip = frame + 14;
	size_t l4_len = len - 14 - 20;
	uint32_t whole = icrc_compute(ip, 20, 4, l4_len);
	const uint8_t *rest = ip + 20 + 8 + 12;
	size_t rest_len = l4_len - 8 - 12 - 4;

	for (size_t cut = 0; cut <= rest_len; cut += 37) {
		icrc_state s = icrc_begin(ip, 20, 4);

		s = icrc_update(s, rest, cut);
		s = icrc_update(s, rest + cut, rest_len - cut);
		ck_assert_uint_eq(icrc_end(s), whole);
	}
}
END_TEST

START_TEST(test_trailer_is_little_endian)
{
	uint8_t t[4];

	icrc_store(t, 0x11223344);
	ck_assert_int_eq(memcmp(t, "\x44\x33\x22\x11", 4), 0);
	ck_assert_uint_eq(icrc_load(t), 0x11223344);
}
END_TEST

/* Each masked field, changed alone, leaves the ICRC valid. */
START_TEST(test_masked_fields_keep_icrc)
{
	static const struct { int v; size_t off; uint8_t xor; } masked[] = {
		{ 4, 14 + 1, 0xff },      /* TOS */
		{ 4, 14 + 8, 0x3f },      /* TTL */
		{ 4, 14 + 10, 0xa5 },     /* IP checksum */
		{ 4, 14 + 11, 0x5a },
		{ 4, 34 + 6, 0xff },      /* UDP checksum */
		{ 4, 34 + 7, 0x01 },
		{ 4, 42 + 4, 0xc0 },      /* FECN, BECN */
		{ 4, 42 + 4, 0x3f },      /* BTH reserved bits */
		{ 6, 14 + 0, 0x0f },      /* traffic class (high nibble part) */
		{ 6, 14 + 1, 0xff },      /* traffic class, flow label */
		{ 6, 14 + 3, 0x81 },      /* flow label */
		{ 6, 14 + 7, 0x40 },      /* hop limit */
		{ 6, 54 + 6, 0x12 },      /* UDP checksum */
		{ 6, 62 + 4, 0x80 },      /* FECN */
	};

	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
		size_t len = frames_make(frame, masked[i].v, 5, 0x0a, 33);

		frame[masked[i].off] ^= masked[i].xor;
		ck_assert_msg(frame_verifies(frame, len), "masked byte %zu of IPv%d", masked[i].off,
			      masked[i].v);
	}
}
END_TEST

/* How many bytes the ICRC covers after the byte at ip_offset of an IPv4 packet (no
 * options); none of the bytes patched below is masked. */
static size_t covered_after(size_t l4_len, size_t ip_offset)
{
	size_t covered = 8 + 20 + l4_len - ICRC_LEN;

	return covered - (8 + ip_offset) - 1;
}

/* Changing any bytes and patching gives the ICRC a full pass gives, at every length; a
 * broken ICRC stays broken by the same bits. */
START_TEST(test_patch_equals_recompute)
{
	static const size_t sizes[] = { 0, 1, 3, 64, 1000, 4096, 8000 };
	static const size_t offsets[] = { 4, 5, 12, 19, 20, 21, 23, 40, 60 };

	srand(7);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
			size_t len = frames_make(frame, 4, 5, 0x0a, sizes[i]);
			uint8_t *ip = frame + 14, diff[3];
			size_t l4_len = len - 14 - 20, at = offsets[o];
			size_t n = at + 3 <= 20 + 8 + 12 + sizes[i] ? 3 : 1;

			if (at >= 20 + 8 + 12 + sizes[i])
				continue;   /* past the covered bytes */

			for (size_t k = 0; k < n; k++) {
				diff[k] = (uint8_t)(rand() | 1);
				ip[at + k] ^= diff[k];
			}
			uint32_t patched = icrc_patch(icrc_load(ip + 20 + l4_len - ICRC_LEN), diff, n,
						      icrc_carry_factor(covered_after(l4_len, at + n - 1)));
			ck_assert_msg(patched == icrc_compute(ip, 20, 4, l4_len), "size %zu at %zu n %zu", sizes[i], at, n);

			icrc_store(ip + 20 + l4_len - ICRC_LEN, patched ^ 0x10);
			ip[at] ^= diff[0];
			patched = icrc_patch(patched ^ 0x10, diff, 1,
					     icrc_carry_factor(covered_after(l4_len, at)));
			ck_assert_uint_eq(patched ^ 0x10, icrc_compute(ip, 20, 4, l4_len));
		}
}
END_TEST

START_TEST(test_carry_factor_of_nothing_is_one)
{
	uint8_t diff[2] = { 0x12, 0x34 };
	size_t len = frames_make(frame, 4, 5, 0x0a, 0);
	uint8_t *ip = frame + 14;
	size_t l4_len = len - 14 - 20;
	uint32_t before = icrc_load(ip + 20 + l4_len - ICRC_LEN);

	/* the last two covered bytes: nothing after them to carry past */
	ip[20 + l4_len - ICRC_LEN - 2] ^= diff[0];
	ip[20 + l4_len - ICRC_LEN - 1] ^= diff[1];
	ck_assert_uint_eq(icrc_patch(before, diff, 2, icrc_carry_factor(0)),
			  icrc_compute(ip, 20, 4, l4_len));
}
END_TEST

static bool bit_is_masked(int v, size_t byte, int bit)
{
	size_t udp = v == 4 ? 34 : 54;

	if (byte == udp + 6 || byte == udp + 7 || byte == udp + 8 + 4)
		return true;
	if (v == 4)
		return byte == 15 || byte == 22 || byte == 24 || byte == 25;
	return (byte == 14 && bit < 4) || (byte >= 15 && byte <= 17) || byte == 21;
}

/* Every bit the ICRC covers (IP header through trailer; Ethernet is the FCS's job) is
 * protected: flipping any one of them is detected. */
START_TEST(test_every_single_bit_flip_detected)
{
	for (int v = 4; v <= 6; v += 2) {
		size_t len = frames_make(frame, v, 5, 0x0a, 61);

		for (size_t byte = 14; byte < len; byte++)
			for (int bit = 0; bit < 8; bit++) {
				if (bit_is_masked(v, byte, bit))
					continue;
				frame[byte] ^= (uint8_t)(1u << bit);
				ck_assert_msg(!frame_verifies(frame, len), "IPv%d byte %zu bit %d",
					      v, byte, bit);
				frame[byte] ^= (uint8_t)(1u << bit);
			}
	}
}
END_TEST

struct capture_count {
	long complete;
	long valid;
};

static void count_frame(const uint8_t *f, size_t caplen, void *arg)
{
	struct capture_count *c = arg;
	struct wire_pkt pkt;

	wire_parse(f, caplen, &pkt);
	if (!(pkt.layers & WIRE_HAVE_UDP))
		return;
	c->complete++;
	if (wire_icrc_ok(f, &pkt))
		c->valid++;
}

START_TEST(test_shared_captures)
{
	const char *dir = testutil_captures_dir();
	struct testutil_expected rows[64];
	int n;

	if (!dir)
		return;
	n = testutil_read_expected(dir, rows, 64);
	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++) {
		struct capture_count c = { 0, 0 };
		char *path;
		bool mangled = strncmp(rows[i].file, "sniffer-mangled/", 16) == 0;

		ck_assert_int_gt(asprintf(&path, "%s/%s", dir, rows[i].file), 0);
		ck_assert_int_ge(testutil_each_frame(path, count_frame, &c), 0);
		free(path);
		ck_assert_int_eq(c.complete, rows[i].packets);
		ck_assert_msg(c.valid == rows[i].icrc_valid, "%s: %ld valid, expected %ld",
			      rows[i].file, c.valid, rows[i].icrc_valid);
		ck_assert_int_eq(c.valid, mangled ? 0 : c.complete);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("icrc");
	TCase *tc = tcase_create("icrc");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_matches_reference_ipv4_and_ipv6);
	tcase_add_test(tc, test_ipv4_options_are_covered);
	tcase_add_test(tc, test_pieces_equal_whole);
	tcase_add_test(tc, test_trailer_is_little_endian);
	tcase_add_test(tc, test_masked_fields_keep_icrc);
	tcase_add_test(tc, test_every_single_bit_flip_detected);
	tcase_add_test(tc, test_shared_captures);
	tcase_add_test(tc, test_patch_equals_recompute);
	tcase_add_test(tc, test_carry_factor_of_nothing_is_one);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
