/* decode: agreement with EXPECTED.tsv on every shared capture, and its JSON shape. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/testutil.h"
#include "tools/decode.h"

START_TEST(test_agrees_with_expected)
{
	const char *dir = testutil_captures_dir();
	struct testutil_expected rows[64];
	int n;

	if (!dir)
		return;
	n = testutil_read_expected(dir, rows, 64);
	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++) {
		struct decode_summary sum;
		char *path, err[512], ops[1024];
		FILE *sink = fopen("/dev/null", "w");

		ck_assert_int_gt(asprintf(&path, "%s/%s", dir, rows[i].file), 0);
		ck_assert_int_eq(decode_file(path, sink, i % 2, &sum, err, sizeof(err)), 0);
		fclose(sink);
		free(path);
		decode_format_opcodes(&sum, ops, sizeof(ops));
		ck_assert_msg(sum.complete == rows[i].packets, "%s: %ld packets, expected %ld",
			      rows[i].file, sum.complete, rows[i].packets);
		ck_assert_int_eq(sum.icrc_valid, rows[i].icrc_valid);
		ck_assert_msg(!strcmp(ops, rows[i].opcodes), "%s: opcodes '%s', expected '%s'",
			      rows[i].file, ops, rows[i].opcodes);
		ck_assert_int_eq(sum.frames, sum.roce + sum.other);
	}
}
END_TEST

static char *decode_to_string(const char *file, bool json, struct decode_summary *sum)
{
	const char *dir = testutil_captures_dir();
	char *path, *text = NULL, err[512];
	size_t size = 0;
	FILE *out;

	if (!dir)
		return NULL;
	ck_assert_int_gt(asprintf(&path, "%s/%s", dir, file), 0);
	out = open_memstream(&text, &size);
	ck_assert_int_eq(decode_file(path, out, json, sum, err, sizeof(err)), 0);
	fclose(out);
	free(path);
	return text;
}

START_TEST(test_json_objects)
{
	struct decode_summary sum;
	char *text = decode_to_string("magnate3_soft-roce__rdma-write-read__ibdump__read2.pcap",
				      true, &sum);
	char *write, *ack;

	if (!text)
		return;
	write = strstr(text, "\"opcode\":10,");
	ack = strstr(text, "\"opcode\":17,");
	ck_assert_ptr_nonnull(write);
	ck_assert_ptr_nonnull(ack);
	ck_assert_ptr_nonnull(strstr(write, "\"reth\":{\"va\":"));
	ck_assert_ptr_nonnull(strstr(ack, "\"aeth\":{\"syndrome\":"));
	ck_assert_ptr_nonnull(strstr(text, "\"opcode_name\":\"RC_RDMA_READ_REQUEST\""));
	for (char *line = text; *line; line = strchr(line, '\n') + 1) {
		ck_assert_int_eq(strncmp(line, "{\"frame\":", 9), 0);
		ck_assert_ptr_nonnull(strstr(line, "\"icrc_ok\":true"));
		ck_assert_ptr_nonnull(strstr(line, "\"ip_version\":4,\"src\":\""));
	}
	free(text);
}
END_TEST

START_TEST(test_undecodable_packets_name_the_reason)
{
	struct decode_summary sum;
	char *text = decode_to_string(
		"sniffer-mangled/magnate3_soft-roce__rdma-ping__dc__dc-small.pcap", true, &sum);

	if (!text)
		return;
	ck_assert_ptr_nonnull(strstr(text, "{\"frame\":1,\"error\":\"unknown opcode\"}"));
	ck_assert_int_eq(sum.malformed, 19);
	ck_assert_int_eq(sum.icrc_bad, 19);
	free(text);
}
END_TEST

START_TEST(test_text_lines)
{
	struct decode_summary sum;
	char *text = decode_to_string("scapy_uts_cnp_connectx4lx.pcap", false, &sum);

	if (!text)
		return;
	ck_assert_ptr_nonnull(strstr(text, "CNP"));
	ck_assert_ptr_nonnull(strstr(text, "icrc ok"));
	free(text);
}
END_TEST

START_TEST(test_missing_file)
{
	struct decode_summary sum;
	char err[512];

	ck_assert_int_eq(decode_file("/nonexistent.pcap", stdout, false, &sum, err, sizeof(err)),
			 -1);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent.pcap"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("decode");
	TCase *tc = tcase_create("decode");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_agrees_with_expected);
	tcase_add_test(tc, test_json_objects);
	tcase_add_test(tc, test_undecodable_packets_name_the_reason);
	tcase_add_test(tc, test_text_lines);
	tcase_add_test(tc, test_missing_file);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
