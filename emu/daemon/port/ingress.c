/* An nftables ingress rule that drops RoCE frames to our address before the kernel's IP
 * input sees them. The packet sockets (our receive ring) are offered each frame before the
 * ingress hook runs, so we still receive everything; the kernel no longer routes each frame,
 * looks up the guard socket and queues a copy there. On a veth the receiver's kernel work is
 * charged to the sender, so both daemons gain (about 6-8% CPU per 64-byte WRITE here).
 *
 * The rule is optional: without nft, or without CAP_NET_ADMIN, the guard UDP socket alone
 * keeps the kernel from answering with ICMP port unreachable. One table per interface and
 * address, replaced when it is found left over from a daemon that was killed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/daemon/port/port.h"
#include "wire/wire.h"

#define NFT_TIMEOUT_NS 5000000000L
#define NFT_POLL_NS 1000000L

extern char **environ;

/* nft quotes names in double quotes and knows no escape inside them. */
static bool quotable(const char *name)
{
	return !strpbrk(name, "\"\\\n");
}

static int text_fd(const char *name, const char *text)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	size_t len = text ? strlen(text) : 0;

	if (fd < 0)
		return -1;
	if ((len && write(fd, text, len) != (ssize_t)len) || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The first line nft wrote to stderr, or a description of how it ended. */
static void describe_failure(int err_fd, int status, char *err, size_t errlen)
{
	char line[160];
	ssize_t n = pread(err_fd, line, sizeof(line) - 1, 0);

	if (n > 0) {
		line[n] = '\0';
		line[strcspn(line, "\n")] = '\0';
		snprintf(err, errlen, "nft: %s", line);
	} else if (WIFEXITED(status)) {
		snprintf(err, errlen, "nft exited with status %d", WEXITSTATUS(status));
	} else {
		snprintf(err, errlen, "nft was killed by signal %d", WTERMSIG(status));
	}
}

/* nft talks to the kernel over netlink and normally ends in milliseconds; a daemon must
 * not hang at start or stop if it does not. */
static int await_nft(pid_t pid, int *status, char *err, size_t errlen)
{
	const struct timespec tick = { .tv_nsec = NFT_POLL_NS };

	for (long waited = 0; waited < NFT_TIMEOUT_NS; waited += NFT_POLL_NS) {
		pid_t got = waitpid(pid, status, WNOHANG);

		if (got == pid)
			return 0;
		if (got < 0 && errno != EINTR) {
			snprintf(err, errlen, "waiting for nft: %s", strerror(errno));
			return -1;
		}
		nanosleep(&tick, NULL);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	snprintf(err, errlen, "nft did not finish in %d s and was killed",
		 (int)(NFT_TIMEOUT_NS / 1000000000L));
	return -1;
}

/* Runs `nft -f -` on SCRIPT: 0, or -1 with ERR saying why. */
static int run_nft(const char *script, char *err, size_t errlen)
{
	char *argv[] = { "nft", "-f", "-", NULL };
	posix_spawn_file_actions_t fa;
	int in_fd = text_fd("rocemu-nft-in", script), err_fd = text_fd("rocemu-nft-err", NULL);
	int rc = -1, status;
	pid_t pid;

	if (in_fd < 0 || err_fd < 0 || posix_spawn_file_actions_init(&fa) != 0) {
		snprintf(err, errlen, "cannot prepare to run nft: %s", strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, err_fd, STDERR_FILENO);
	errno = posix_spawnp(&pid, "nft", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (errno) {
		snprintf(err, errlen, "cannot run nft: %s", strerror(errno));
		goto out;
	}
	if (await_nft(pid, &status, err, errlen) < 0)
		goto out;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	else
		describe_failure(err_fd, status, err, errlen);
out:
	if (in_fd >= 0)
		close(in_fd);
	if (err_fd >= 0)
		close(err_fd);
	return rc;
}

/* One rule per address served: "ip daddr A udp dport 4791 drop" or "ip6 daddr A ...". */
static void put_rules(const struct port *port, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	size_t at = 0;

	out[0] = '\0';
	for (unsigned i = 0; i < port->ngids && at < len; i++)
		at += (size_t)snprintf(out + at, len - at, "    %s daddr %s udp dport %d drop\n",
				       port->gids[i].ipv6 ? "ip6" : "ip",
				       addr_str(port->gids[i].raw, ip, sizeof(ip)), WIRE_ROCE_PORT);
}

int ingress_drop_add(struct port *port, char *err, size_t errlen)
{
	char name[sizeof(port->ingress_table)];
	char rules[DEV_MAX_GIDS * (INET6_ADDRSTRLEN + 40)], script[512 + sizeof(rules)];

	if (!quotable(port->ifname)) {
		snprintf(err, errlen, "interface name %s cannot be quoted for nft", port->ifname);
		return -1;
	}
	put_rules(port, rules, sizeof(rules));
	snprintf(name, sizeof(name), "rocemu_if%d_%08x", port->ifindex, addr_hash(port));
	/* add + delete first: one transaction replaces a table a killed daemon left. */
	snprintf(script, sizeof(script),
		 "add table netdev %s\n"
		 "delete table netdev %s\n"
		 "table netdev %s {\n"
		 "  chain ingress {\n"
		 "    type filter hook ingress device \"%s\" priority 0; policy accept;\n"
		 "%s"
		 "  }\n"
		 "}\n",
		 name, name, name, port->ifname, rules);
	if (run_nft(script, err, errlen) < 0)
		return -1;
	snprintf(port->ingress_table, sizeof(port->ingress_table), "%s", name);
	return 0;
}

int ingress_drop_remove(struct port *port, char *err, size_t errlen)
{
	char script[128];
	int rc;

	if (!port->ingress_table[0])
		return 0;
	snprintf(script, sizeof(script), "delete table netdev %s\n", port->ingress_table);
	rc = run_nft(script, err, errlen);
	if (rc < 0) {
		size_t used = strlen(err);

		snprintf(err + used, errlen - used, " (table netdev %s)", port->ingress_table);
	}
	port->ingress_table[0] = '\0';
	return rc;
}
