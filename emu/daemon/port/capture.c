/* --pcap FILE: every RoCE frame the daemon sends and receives, in a libpcap savefile that
 * Wireshark opens. Flushed every second and at shutdown; when the file reaches its cap it
 * becomes FILE.1 (replacing any older one) and a new FILE starts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "emu/daemon/daemon.h"

#define CAPTURE_SNAPLEN 65535
#define PCAP_FILE_HEADER 24
#define PCAP_RECORD_HEADER 16

static int capture_start_file(struct dev *dev)
{
	dev->cap_dumper = pcap_dump_open(dev->cap_pcap, dev->cap_path);
	if (!dev->cap_dumper) {
		log_warn("--pcap %s: %s", dev->cap_path, pcap_geterr(dev->cap_pcap));
		return -1;
	}
	dev->cap_bytes = PCAP_FILE_HEADER;
	return 0;
}

static void capture_flush_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dev *dev = w->data;

	(void)loop;
	(void)revents;
	if (dev->cap_dumper)
		pcap_dump_flush(dev->cap_dumper);
}

int capture_open(struct dev *dev, const char *path, uint64_t max_bytes, char *err,
		 size_t errlen)
{
	char cwd[2048] = "";

	/* Absolute, since the daemon changes to / when it detaches and rotation renames. */
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
		snprintf(err, errlen, "--pcap %s: cannot tell the current folder: %s", path,
			 strerror(errno));
		return -1;
	}
	if (snprintf(dev->cap_path, sizeof(dev->cap_path), "%s%s%s", cwd, *cwd ? "/" : "",
		     path) >= (int)sizeof(dev->cap_path)) {
		snprintf(err, errlen, "--pcap %s: path too long", path);
		return -1;
	}
	dev->cap_max = max_bytes;
	dev->cap_pcap = pcap_open_dead(DLT_EN10MB, CAPTURE_SNAPLEN);
	if (!dev->cap_pcap) {
		snprintf(err, errlen, "--pcap: out of memory");
		return -1;
	}
	if (capture_start_file(dev) < 0) {
		snprintf(err, errlen, "--pcap %s: %s", path, pcap_geterr(dev->cap_pcap));
		return -1;
	}
	ev_timer_init(&dev->cap_timer, capture_flush_cb, 1.0, 1.0);
	dev->cap_timer.data = dev;
	ev_timer_start(dev->loop, &dev->cap_timer);
	return 0;
}

/* The cap is reached: FILE becomes FILE.1 and a new FILE starts. */
static void capture_rotate(struct dev *dev)
{
	char old[sizeof(dev->cap_path) + 2];

	pcap_dump_close(dev->cap_dumper);
	dev->cap_dumper = NULL;
	snprintf(old, sizeof(old), "%s.1", dev->cap_path);
	if (rename(dev->cap_path, old) < 0)
		log_warn("--pcap: cannot rename %s to %s: %s", dev->cap_path, old, strerror(errno));
	if (capture_start_file(dev) < 0)
		log_warn("--pcap: recording stopped");
}

void capture_frame(struct dev *dev, const uint8_t *frame, size_t len)
{
	struct pcap_pkthdr h;

	if (!dev->cap_dumper)
		return;
	if (dev->cap_bytes + PCAP_RECORD_HEADER + len > dev->cap_max &&
	    dev->cap_bytes > PCAP_FILE_HEADER) {
		capture_rotate(dev);
		if (!dev->cap_dumper)
			return;
	}
	gettimeofday(&h.ts, NULL);
	h.caplen = h.len = (bpf_u_int32)len;
	pcap_dump((u_char *)dev->cap_dumper, &h, frame);
	dev->cap_bytes += PCAP_RECORD_HEADER + len;
}

void capture_close(struct dev *dev)
{
	if (dev->cap_pcap)
		ev_timer_stop(dev->loop, &dev->cap_timer);
	if (dev->cap_dumper)
		pcap_dump_close(dev->cap_dumper);
	if (dev->cap_pcap)
		pcap_close(dev->cap_pcap);
	dev->cap_dumper = NULL;
	dev->cap_pcap = NULL;
}
