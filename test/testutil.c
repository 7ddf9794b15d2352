#include "test/testutil.h"

#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *testutil_captures_dir(void)
{
	const char *dir = getenv("ROCEMU_CAPTURES");
	struct stat st;

	if (!dir || !*dir)
		dir = "../shared/captures";
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return dir;
	fprintf(stderr, "SKIP: no captures at %s (set ROCEMU_CAPTURES); capture tests skipped\n",
		dir);
	return NULL;
}

long testutil_each_frame(const char *path, testutil_frame_fn fn, void *arg)
{
	char err[PCAP_ERRBUF_SIZE];
	pcap_t *p = pcap_open_offline(path, err);
	struct pcap_pkthdr *hdr;
	const u_char *data;
	long frames = 0;

	if (!p)
		return -1;
	while (pcap_next_ex(p, &hdr, &data) == 1) {
		fn(data, hdr->caplen, arg);
		frames++;
	}
	pcap_close(p);
	return frames;
}

int testutil_read_expected(const char *dir, struct testutil_expected *rows, int max)
{
	char path[512], line[1024];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/EXPECTED.tsv", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (n < max && fgets(line, sizeof(line), f)) {
		struct testutil_expected *r = &rows[n];

		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\n")] = '\0';
		r->opcodes[0] = '\0';
		if (sscanf(line, "%255[^\t]\t%ld\t%ld\t%511[^\n]", r->file, &r->packets,
			   &r->icrc_valid, r->opcodes) < 3)
			continue;
		n++;
	}
	fclose(f);
	return n;
}
