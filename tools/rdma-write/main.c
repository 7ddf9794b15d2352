/* rdma-write: a perftest-style RDMA WRITE bandwidth test (cf. ib_write_bw) over rocemu.
 * main(): the command line, then the server or the client. */
#include <signal.h>
#include <stdio.h>

#include "tools/rdma-write/rdma-write.h"

/* The server registers a buffer for remote write and waits for one client; the client
 * writes ITERS messages of SIZE bytes into it and prints perftest's table. A TCP connection
 * carries everything else, so both sides can end with a status that says whether the data
 * arrived as the client believes (--verify) or, after a deliberate failure
 * (--remote-offset, --rkey-xor), that nothing arrived at all. */

int main(int argc, char **argv)
{
	struct options o;

	switch (parse_options(argc, argv, &o)) {
	case PARSE_HELP:
		return 0;
	case PARSE_ERROR:
		return 2;
	}
	/* A daemon or peer that goes away must show up as EPIPE, not kill us silently. */
	signal(SIGPIPE, SIG_IGN);
	/* Scripts read our lines through pipes while we wait on the peer. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return o.server ? run_server(&o) : run_client(&o);
}
