/* decode: agreement with EXPECTED.tsv on every shared capture, and its JSON shape. */
#include <check.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/testutil.h"
#include "tools/decode.h"
#include "wire/cm_mad.h"
#include "wire/wire.h"

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

/* What rocemuctl decode prints for the capture at path, its summary after it when asked. */
static char *decode_path(const char *path, bool json, struct decode_summary *sum,
			 bool with_summary)
{
	char *text = NULL, err[512];
	size_t size = 0;
	FILE *out = open_memstream(&text, &size);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(decode_file(path, out, json, sum, err, sizeof(err)), 0);
	if (with_summary)
		decode_print_summary(out, sum);
	fclose(out);
	return text;
}

/* The same for one of ../shared/captures; NULL when they are absent. */
static char *decode_to_string(const char *file, bool json, struct decode_summary *sum)
{
	const char *dir = testutil_captures_dir();
	char *path, *text;

	if (!dir)
		return NULL;
	ck_assert_int_gt(asprintf(&path, "%s/%s", dir, file), 0);
	text = decode_path(path, json, sum, false);
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

/* The CM MADs a ConnectX sent for an NVMe-oF discovery: what rdma_cm set up, in the line. */
START_TEST(test_cm_mads_in_text)
{
	struct decode_summary sum;
	char *text = decode_to_string("magnate3_nvme__document__nvme-discover.pcap", false, &sum);

	if (!text)
		return;
	ck_assert_ptr_nonnull(strstr(text, "icrc ok  cm REQ comm 0x3eb0bde5 service "
				     "0x0000000001061144 qpn 0x0000dc psn 0x017c2d cma 2.2.2.1 "
				     "port 49964 -> 2.2.2.3 port 4420\n"));
	ck_assert_ptr_nonnull(strstr(text, "  cm REP comm 0xe8ac7105 remote 0x3eb0bde5 qpn "
				     "0x00008d psn 0xdc37af\n"));
	ck_assert_ptr_nonnull(strstr(text, "  cm RTU comm 0x3eb0bde5 remote 0xe8ac7105\n"));
	ck_assert_ptr_nonnull(strstr(text, "  cm DREQ comm 0x3eb0bde5 remote 0xe8ac7105 qpn "
				     "0x00008d\n"));
	ck_assert_ptr_nonnull(strstr(text, "  cm DREP comm 0xe8ac7105 remote 0x3eb0bde5\n"));
	ck_assert_int_eq(sum.cm_mads, 5);
	ck_assert_int_eq(sum.cm_malformed, 0);
	ck_assert_int_eq(sum.per_cm_attr[CM_ATTR_REQ], 1);
	ck_assert_int_eq(sum.per_cm_attr[CM_ATTR_DREP], 1);
	free(text);
}
END_TEST

START_TEST(test_cm_mads_in_json)
{
	struct decode_summary sum;
	char *text = decode_to_string("magnate3_soft-roce__rdma-write-read__ibdump__read2.pcap",
				      true, &sum);

	if (!text)
		return;
	ck_assert_ptr_nonnull(strstr(text, ",\"cm\":{\"attr\":\"REQ\",\"tid\":47940235123,"
				     "\"local_comm_id\":1945072937,\"service_id\":17182777,"
				     "\"qpn\":313,\"psn\":15746512,\"cma\":{\"ip_version\":4,"
				     "\"src\":\"172.17.242.47\",\"dst\":\"172.17.242.56\","
				     "\"src_port\":51198,\"dst_port\":12345}}}\n"));
	ck_assert_ptr_nonnull(strstr(text, ",\"cm\":{\"attr\":\"DREP\","));
	ck_assert_int_eq(sum.cm_mads, 5);
	free(text);
}
END_TEST

/* Frames no capture holds: a REJ, and MADs the codec refuses, written to a pcap of our own. */
static void dump_mad_frames(const char *path)
{
	static const struct wire_path wp = { .src_mac = { 2, 0, 0, 0, 0, 1 },
					     .dst_mac = { 2, 0, 0, 0, 0, 2 },
					     .src_ip = 0x010012c6, .dst_ip = 0x020012c6,
					     .src_port = 0xc0de, .ttl = 64 };
	struct cm_mad rej = { .hdr = { .tid = 1, .attr_id = CM_ATTR_REJ } };
	uint8_t mad[CM_MAD_LEN], frame[512];
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *d = pcap_dump_open(dead, path);
	struct pcap_pkthdr h = { 0 };

	ck_assert_ptr_nonnull(d);
	rej.rej.local_comm_id = 0x11111111;
	rej.rej.remote_comm_id = 0x22222222;
	rej.rej.reason = CM_REJ_INVALID_SERVICE_ID;
	rej.rej.message_rejected = CM_MSG_REQ;
	ck_assert_uint_eq(cm_mad_build(&rej, mad), CM_MAD_LEN);
	for (int i = 0; i < 3; i++) {
		if (i == 1)
			mad[17] = CM_ATTR_LAP;
		h.caplen = h.len = (bpf_u_int32)cm_mad_frame(frame, sizeof(frame), &wp, 1, 7, mad);
		if (i == 2)     /* the DETH's Q_Key, in an ICRC-covered byte: recompute nothing */
			frame[WIRE_BASE_LEN + 3] = 0x02;
		pcap_dump((u_char *)d, &h, frame);
	}
	pcap_dump_close(d);
	pcap_close(dead);
}

START_TEST(test_cm_rej_and_refusals_named)
{
	char path[] = "/tmp/rocemu-decode-cm.XXXXXX", *text;
	struct decode_summary sum;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	dump_mad_frames(path);
	text = decode_path(path, false, &sum, false);
	ck_assert_ptr_nonnull(strstr(text, "  cm REJ comm 0x11111111 remote 0x22222222 reason 8 "
				     "(invalid service ID) of REQ\n"));
	ck_assert_ptr_nonnull(strstr(text, "  cm malformed: unsupported attribute (LAP, APR, "
				     "ClassPortInfo)\n"));
	ck_assert_ptr_nonnull(strstr(text, "icrc BAD  cm malformed: Q_Key is not the GSI's "
				     "0x80010000\n"));
	ck_assert_int_eq(sum.cm_mads, 3);
	ck_assert_int_eq(sum.cm_malformed, 2);
	ck_assert_int_eq(sum.per_cm_attr[CM_ATTR_REJ], 1);
	free(text);
	text = decode_path(path, true, &sum, false);
	ck_assert_ptr_nonnull(strstr(text, "\"reason\":8,\"reason_name\":\"invalid service ID\","
				     "\"message_rejected\":0,\"message_rejected_name\":\"REQ\"}"));
	ck_assert_ptr_nonnull(strstr(text, ",\"cm\":{\"error\":\"unsupported attribute"));
	free(text);
	unlink(path);
}
END_TEST

/* Three packets of one QP as a sender's UDP GSO hands them to a veth, or to a virtio-net
 * with USO: one frame, the first packet's headers with the lengths of the whole, then the
 * UDP payloads of the other two (IPv4 ids 7, 8 and 9, as the kernel cuts them): the
 * middle and last of a long WRITE, or (small) three 64-byte WRITEs. spoil: the last one's
 * ICRC is wrong. */
static size_t gso_frame(uint8_t *frame, bool spoil, bool small)
{
	static const struct wire_path wp = { .src_mac = { 2, 0, 0, 0, 0, 1 },
					     .dst_mac = { 2, 0, 0, 0, 0, 2 },
					     .src_ip = 0x010012c6, .dst_ip = 0x020012c6,
					     .src_port = 0xc0de, .ttl = 64 };
	uint8_t one[2048], payload[1024];
	size_t at = 0;

	memset(payload, 0x5a, sizeof(payload));
	for (int i = 0; i < 3; i++) {
		struct wire_bth bth = { .opcode = small ? WIRE_OP_RC_WRITE_ONLY
						: i < 2 ? WIRE_OP_RC_WRITE_MIDDLE
							: WIRE_OP_RC_WRITE_LAST,
					.dest_qp = 0x12, .psn = 100 + (uint32_t)i };
		struct wire_ext ext = { .reth = { .va = 0x1000, .rkey = 0x77, .length = 64 } };
		size_t n = wire_build(one, sizeof(one), &wp, (uint16_t)(7 + i), &bth, &ext, payload,
				      small ? 64 : i < 2 ? 1024 : 300);

		ck_assert_uint_gt(n, WIRE_GSO_HDR_LEN);
		if (i == 0) {
			memcpy(frame, one, n);
			at = n;
		} else {
			memcpy(frame + at, one + WIRE_GSO_HDR_LEN, n - WIRE_GSO_HDR_LEN);
			at += n - WIRE_GSO_HDR_LEN;
		}
	}
	wire_gso_set_first(frame, at);
	if (spoil)
		frame[at - 1] ^= 1;
	return at;
}

/* A GSO frame is shown as the packets it holds, each with its ICRC checked; one whose
 * pieces do not all check stays one packet with a bad ICRC. */
START_TEST(test_gso_frames_shown_as_their_packets)
{
	char path[] = "/tmp/rocemu-decode-gso.XXXXXX", *text;
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, 65535);
	struct pcap_pkthdr h = { 0 };
	struct decode_summary sum;
	uint8_t frame[4096];
	pcap_dumper_t *d;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	d = pcap_dump_open(dead, path);
	ck_assert_ptr_nonnull(d);
	for (int spoil = 0; spoil < 2; spoil++) {
		h.caplen = h.len = (bpf_u_int32)gso_frame(frame, spoil, false);
		pcap_dump((u_char *)d, &h, frame);
	}
	h.caplen = h.len = (bpf_u_int32)gso_frame(frame, false, true);
	pcap_dump((u_char *)d, &h, frame);
	pcap_dump_close(d);
	pcap_close(dead);
	text = decode_path(path, false, &sum, true);
	ck_assert_ptr_nonnull(strstr(text, "psn 0x000064  payload 1024 pad 0 icrc ok  gso piece 1 of 3\n"));
	ck_assert_ptr_nonnull(strstr(text, "psn 0x000065  payload 1024 pad 0 icrc ok  gso piece 2 of 3\n"));
	ck_assert_ptr_nonnull(strstr(text, "psn 0x000066  payload 300 pad 0 icrc ok  gso piece 3 of 3\n"));
	ck_assert_ptr_nonnull(strstr(text, "len 64  payload 64 pad 0 icrc ok  gso piece 3 of 3\n"));
	ck_assert_ptr_nonnull(strstr(text, "GSO frames 2, holding 6 of the packets\n"));
	ck_assert_int_eq(sum.frames, 3);
	ck_assert_int_eq(sum.roce, 7);
	ck_assert_int_eq(sum.icrc_valid, 6);
	ck_assert_int_eq(sum.per_opcode[WIRE_OP_RC_WRITE_ONLY], 3);
	ck_assert_int_eq(sum.icrc_bad, 1);
	ck_assert_int_eq(sum.per_opcode[WIRE_OP_RC_WRITE_MIDDLE], 3);
	free(text);
	text = decode_path(path, true, &sum, false);
	ck_assert_ptr_nonnull(strstr(text, "\"psn\":102,"));
	ck_assert_ptr_nonnull(strstr(text, "\"icrc_ok\":true,\"gso_piece\":3,\"gso_pieces\":3}"));
	free(text);
	unlink(path);
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
	tcase_add_test(tc, test_cm_mads_in_text);
	tcase_add_test(tc, test_cm_mads_in_json);
	tcase_add_test(tc, test_cm_rej_and_refusals_named);
	tcase_add_test(tc, test_gso_frames_shown_as_their_packets);
	tcase_add_test(tc, test_missing_file);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
