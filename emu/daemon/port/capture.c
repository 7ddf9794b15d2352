/* --pcap FILE: every RoCE frame the daemon sends and receives, in a libpcap savefile that
 * Wireshark opens. Flushed every second and at shutdown; when the file reaches its cap it
 * becomes FILE.1 (replacing any older one) and a new FILE starts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "emu/daemon/log.h"
#include "emu/daemon/port/port.h"

#define CAPTURE_SNAPLEN 65535
#define PCAP_FILE_HEADER 24
#define PCAP_RECORD_HEADER 16

static int capture_start_file(struct port *port)
{
	port->cap_dumper = pcap_dump_open(port->cap_pcap, port->cap_path);
	if (!port->cap_dumper) {
		log_warn("--pcap %s: %s", port->cap_path, pcap_geterr(port->cap_pcap));
		return -1;
	}
	port->cap_bytes = PCAP_FILE_HEADER;
	return 0;
}

static void capture_flush_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct port *port = w->data;

	(void)loop;
	(void)revents;
	if (port->cap_dumper)
		pcap_dump_flush(port->cap_dumper);
}

int capture_open(struct port *port, const char *path, uint64_t max_bytes, char *err,
		 size_t errlen)
{
	char cwd[2048] = "";

	/* Absolute, since the daemon changes to / when it detaches and rotation renames. */
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
		snprintf(err, errlen, "--pcap %s: cannot tell the current folder: %s", path,
			 strerror(errno));
		return -1;
	}
	if (snprintf(port->cap_path, sizeof(port->cap_path), "%s%s%s", cwd, *cwd ? "/" : "",
		     path) >= (int)sizeof(port->cap_path)) {
		snprintf(err, errlen, "--pcap %s: path too long", path);
		return -1;
	}
	port->cap_max = max_bytes;
	port->cap_pcap = pcap_open_dead(DLT_EN10MB, CAPTURE_SNAPLEN);
	if (!port->cap_pcap) {
		snprintf(err, errlen, "--pcap: out of memory");
		return -1;
	}
	if (capture_start_file(port) < 0) {
		snprintf(err, errlen, "--pcap %s: %s", path, pcap_geterr(port->cap_pcap));
		return -1;
	}
	ev_timer_init(&port->cap_timer, capture_flush_cb, 1.0, 1.0);
	port->cap_timer.data = port;
	ev_timer_start(port->loop, &port->cap_timer);
	return 0;
}

/* The cap is reached: FILE becomes FILE.1 and a new FILE starts. */
static void capture_rotate(struct port *port)
{
	char old[sizeof(port->cap_path) + 2];

	pcap_dump_close(port->cap_dumper);
	port->cap_dumper = NULL;
	snprintf(old, sizeof(old), "%s.1", port->cap_path);
	if (rename(port->cap_path, old) < 0)
		log_warn("--pcap: cannot rename %s to %s: %s", port->cap_path, old, strerror(errno));
	if (capture_start_file(port) < 0)
		log_warn("--pcap: recording stopped");
}

void capture_frame(struct port *port, const uint8_t *frame, size_t len)
{
	struct pcap_pkthdr h;

	if (!port->cap_dumper)
		return;
	if (port->cap_bytes + PCAP_RECORD_HEADER + len > port->cap_max &&
	    port->cap_bytes > PCAP_FILE_HEADER) {
		capture_rotate(port);
		if (!port->cap_dumper)
			return;
	}
	gettimeofday(&h.ts, NULL);
	h.caplen = h.len = (bpf_u_int32)len;
	pcap_dump((u_char *)port->cap_dumper, &h, frame);
	port->cap_bytes += PCAP_RECORD_HEADER + len;
}

void capture_close(struct port *port)
{
	if (port->cap_pcap)
		ev_timer_stop(port->loop, &port->cap_timer);
	if (port->cap_dumper)
		pcap_dump_close(port->cap_dumper);
	if (port->cap_pcap)
		pcap_close(port->cap_pcap);
	port->cap_dumper = NULL;
	port->cap_pcap = NULL;
}
