/* What the kernel shows of an RDMA device in /sys and /dev, for rocemu's devices and this
 * process alone: a private directory (the tree) that paths.c redirects those paths to.
 *
 *   sys/class/infiniband/rocemuN -> ../../devices/virtual/infiniband/rocemuN
 *   sys/devices/virtual/infiniband/rocemuN/   node_guid node_type sys_image_guid fw_ver
 *       hca_type node_desc parent device/{numa_node,local_cpus}
 *       ports/1/{state,phys_state,link_layer,rate,lid,sm_lid,lid_mask_count,sm_sl,cap_mask,
 *                gids/N,gid_attrs/types/N,gid_attrs/ndevs/N,pkeys/0,hw_counters/NAME}
 *   sys/class/infiniband_verbs/abi_version, uverbsN -> ../../devices/virtual/...
 *   sys/devices/virtual/infiniband_verbs/uverbsN/{ibdev,abi_version,dev}
 *   dev/infiniband/uverbsN   (an empty file: paths.c shows it as the character device)
 *
 * Every value is printed as the kernel prints it (drivers/infiniband/core/sysfs.c, rxe's
 * names for the counters). The files that follow the daemon (the port's state, its GIDs and
 * their attributes, the counters) are asked of it each time one is opened; an empty GID
 * entry's type and netdev fail with ENODATA, as reading the kernel's do.
 *
 * The tree is made lazily: its directory at the first lookup of one of those paths, and
 * then, at each lookup, the entries the path walks through (following the links as the
 * kernel would), and a directory's entries when it is listed. ibv_devinfo, which looks for
 * a board_id file, costs a handful of system calls. Made entries are remembered (a set of
 * their paths' hashes) so that a path looked up again costs none.
 *
 * The tree lives in $TMPDIR (else /tmp) as rocemu-sysfs.XXXXXX, mode 0700, with a lock held
 * on its .lock while the process lives, and is removed at exit: a process that could not
 * remove its own (killed, or ended with _exit) leaves it unlocked, and the next tree made
 * removes it. */
#include "emu/verbs/verbs_int.h"
#include "emu/lib/lib_int.h"    /* rpc_call: the daemon's counters (PROTO_STATS) */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#undef ibv_get_device_list

#define TREE_PREFIX "rocemu-sysfs."
#define STALE_SECONDS 60        /* a tree without its lock file, older than this, is left over */
#define IBDEV_CLASS "/sys/class/infiniband"
#define UVERBS_CLASS "/sys/class/infiniband_verbs"
#define IBDEV_DIR "/sys/devices/virtual/infiniband"
#define UVERBS_DIR "/sys/devices/virtual/infiniband_verbs"
#define UVERBS_ABI 6            /* IB_USER_VERBS_ABI_VERSION: the class's abi_version */
#define RV_UVERBS_ABI 2         /* rxe's per-device uverbs ABI */
#define UVERBS_MAJOR 231
#define UVERBS_MINOR_BASE 192
#define MADE_SLOTS 4096         /* entries remembered as made (a device has about 70) */
#define MAX_LINKS 8

/* recursive: what the tree does under it does not come back here, but a lookup might */
static pthread_mutex_t tree_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static char tree_root[PATH_MAX];        /* "" until made */
static size_t tree_len;
static pid_t tree_owner;                /* the process that made it and removes it */
static int tree_lock_fd = -1;
static int tree_err;                    /* making it failed: not tried again */
static int tree_enabled = -1;
static uint64_t *made;                  /* hashes of the entries made; 0 = free */
static bool fix_modes;                  /* the umask takes more than 022: chmod what is made */

/* ---- the values ---- */

#define RV_COUNTER_INDEX(name, help) RV_CNT_##name,
enum { PROTO_COUNTERS(RV_COUNTER_INDEX) RV_NCOUNTERS };
#undef RV_COUNTER_INDEX

/* The daemon's counters that have a kernel driver's name: rxe's (all but ack_deferred,
 * which rocemu has no equivalent of) and mlx5's congestion ones. */
static const struct {
	const char *name;
	unsigned index;
} hw_counters[] = {
	{ "sent_pkts", RV_CNT_sent_pkts },
	{ "rcvd_pkts", RV_CNT_rcvd_pkts },
	{ "duplicate_request", RV_CNT_duplicate_request },
	{ "out_of_seq_request", RV_CNT_out_of_seq_request },
	{ "rcvd_rnr_err", RV_CNT_rcvd_rnr_err },
	{ "send_rnr_err", RV_CNT_send_rnr_err },
	{ "rcvd_seq_err", RV_CNT_rcvd_seq_err },
	{ "retry_exceeded_err", RV_CNT_retry_exceeded_err },
	{ "retry_rnr_exceeded_err", RV_CNT_retry_rnr_exceeded_err },
	{ "completer_retry_err", RV_CNT_completer_retry_err },
	{ "send_err", RV_CNT_send_err },
	{ "link_downed", RV_CNT_link_downed },
	{ "rdma_sends", RV_CNT_rdma_sends },
	{ "rdma_recvs", RV_CNT_rdma_recvs },
	{ "np_ecn_marked_roce_packets", RV_CNT_np_ecn_marked_roce_packets },
	{ "np_cnp_sent", RV_CNT_np_cnp_sent },
	{ "rp_cnp_handled", RV_CNT_rp_cnp_handled },
	{ "rp_cnp_ignored", RV_CNT_rp_cnp_ignored },
};
#define N_HW_COUNTERS (sizeof(hw_counters) / sizeof(hw_counters[0]))

/* A device directory's entries, directories (a trailing '/') before what they hold; the
 * GID table's and the counters' entries are added to them (dev_entries()). */
static const char *const fixed_entries[] = {
	"node_type", "node_guid", "sys_image_guid", "fw_ver", "hca_type", "node_desc", "parent",
	"device/", "device/numa_node", "device/local_cpus", "ports/", "ports/1/",
	"ports/1/state", "ports/1/phys_state", "ports/1/link_layer", "ports/1/rate",
	"ports/1/lid", "ports/1/sm_lid", "ports/1/lid_mask_count", "ports/1/sm_sl",
	"ports/1/cap_mask", "ports/1/pkeys/", "ports/1/pkeys/0", "ports/1/gids/",
	"ports/1/gid_attrs/", "ports/1/gid_attrs/types/", "ports/1/gid_attrs/ndevs/",
	"ports/1/hw_counters/",
};
#define MAX_ENTRIES (sizeof(fixed_entries) / sizeof(fixed_entries[0]) + \
		     3 * ROCEMU_MAX_GIDS + N_HW_COUNTERS)
static char dev_entry_names[MAX_ENTRIES][48];
static unsigned n_dev_entries;
static pthread_once_t dev_entries_once = PTHREAD_ONCE_INIT;

static void make_dev_entries(void)
{
	static const char *const gid_dirs[] = { "gids", "gid_attrs/types", "gid_attrs/ndevs" };

	for (size_t i = 0; i < sizeof(fixed_entries) / sizeof(fixed_entries[0]); i++)
		snprintf(dev_entry_names[n_dev_entries++], 48, "%s", fixed_entries[i]);
	for (size_t k = 0; k < 3; k++)
		for (unsigned i = 0; i < ROCEMU_MAX_GIDS; i++)
			snprintf(dev_entry_names[n_dev_entries++], 48, "ports/1/%s/%u",
				 gid_dirs[k], i);
	for (size_t i = 0; i < N_HW_COUNTERS; i++)
		snprintf(dev_entry_names[n_dev_entries++], 48, "ports/1/hw_counters/%s",
			 hw_counters[i].name);
}

/* The entry rel (as "ports/1/state") of a device directory: 'd' a directory, 'f' a file,
 * 0 none. */
static char dev_entry(const char *rel)
{
	size_t len = strlen(rel);

	pthread_once(&dev_entries_once, make_dev_entries);
	for (unsigned i = 0; i < n_dev_entries; i++) {
		const char *e = dev_entry_names[i];

		if (strncmp(e, rel, len) == 0 && (e[len] == '\0' || (e[len] == '/' && !e[len + 1])))
			return e[len] ? 'd' : 'f';
	}
	return 0;
}

/* What the daemon said, as much as a file needs. */
struct live {
	int port_err, counters_err;
	struct rocemu_port_attr port;
	uint64_t counters[RV_NCOUNTERS];
};

static bool is_live(const char *rel)
{
	return strcmp(rel, "ports/1/state") == 0 || strcmp(rel, "ports/1/phys_state") == 0 ||
	       strncmp(rel, "ports/1/gids/", 13) == 0 ||
	       strncmp(rel, "ports/1/gid_attrs/", 18) == 0 ||
	       strncmp(rel, "ports/1/hw_counters/", 20) == 0;
}

static bool needs_counters(const char *rel)
{
	return strncmp(rel, "ports/1/hw_counters/", 20) == 0;
}

static int query_counters(struct rocemu_context *rc, uint64_t *counters)
{
	struct proto_handle req = { .hdr.op = PROTO_STATS };
	struct proto_stats_reply rep;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &rep, .len = sizeof(rep) };
	int err = rpc_call(rc, &in, &out);

	if (err)
		return err;
	if (rep.ncounters < RV_NCOUNTERS)
		return EPROTO;
	memcpy(counters, rep.counters, sizeof(uint64_t) * RV_NCOUNTERS);
	return 0;
}

/* Asks the daemon for the port, and for the counters when counters is set. */
static void query_live(const struct rv_device *d, struct live *l, bool counters)
{
	struct rocemu_context *rc = rocemu_open(d->socket);

	memset(l, 0, sizeof(*l));
	if (!rc) {
		l->port_err = l->counters_err = errno ? errno : ENODEV;
		return;
	}
	l->port_err = rocemu_query_port(rc, &l->port);
	if (counters)
		l->counters_err = query_counters(rc, l->counters);
	else
		l->counters_err = ENODEV;
	rocemu_close(rc);
}

static const char *port_state_name(unsigned state)
{
	static const char *const names[] = { "NOP", "DOWN", "INIT", "ARMED", "ACTIVE",
					     "ACTIVE_DEFER" };

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "UNKNOWN";
}

static const char *phys_state_name(unsigned state)
{
	static const char *const names[] = { "<unknown>", "Sleep", "Polling", "Disabled",
		"PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test" };

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "<unknown>";
}

/* As the kernel's rate file: "2.5 Gb/sec (1X SDR)". */
static int print_rate(char *buf, size_t len, const struct ibv_port_attr *a)
{
	static const struct { uint8_t speed; int rate; const char *name; } speeds[] = {
		{ 2, 50, " DDR" }, { 4, 100, " QDR" }, { 8, 100, " FDR10" }, { 16, 140, " FDR" },
		{ 32, 250, " EDR" }, { 64, 500, " HDR" }, { 128, 1000, " NDR" },
	};
	int width = a->active_width == 2 ? 4 : a->active_width == 4 ? 8 :
		    a->active_width == 8 ? 12 : a->active_width == 16 ? 2 : 1;
	int rate = 25;
	const char *speed = " SDR";

	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (a->active_speed == speeds[i].speed) {
			rate = speeds[i].rate;
			speed = speeds[i].name;
		}
	rate *= width;
	return snprintf(buf, len, "%d%s Gb/sec (%dX%s)\n", rate / 10, rate % 10 ? ".5" : "",
			width, speed);
}

static int print_guid(char *buf, size_t len, __be64 guid)
{
	uint8_t b[8];

	memcpy(b, &guid, sizeof(b));
	return snprintf(buf, len, "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", b[0], b[1], b[2],
			b[3], b[4], b[5], b[6], b[7]);
}

/* %pI6: eight groups of four hex digits. */
static int print_gid(char *buf, size_t len, const union ibv_gid *gid)
{
	const uint8_t *r = gid->raw;

	return snprintf(buf, len, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
			"%02x%02x:%02x%02x\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
			r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

/* The kernel's cpumap: 32-bit hex words, the highest first, separated by commas. */
static int print_all_cpus(char *buf, size_t len)
{
	int ncpu = get_nprocs_conf(), pos = 0;

	if (ncpu < 1)
		ncpu = 1;
	for (int top = (ncpu - 1) / 32 * 32; top >= 0 && (size_t)pos < len; top -= 32) {
		int bits = ncpu - top < 32 ? ncpu - top : 32;
		uint32_t word = bits == 32 ? 0xffffffffu : (1u << bits) - 1;

		if (pos == 0)
			pos = snprintf(buf, len, "%0*x", (bits + 3) / 4, word);
		else
			pos += snprintf(buf + pos, len - (size_t)pos, ",%08x", word);
	}
	return pos + snprintf(buf + pos, len > (size_t)pos ? len - (size_t)pos : 0, "\n");
}

/* A file of the interface's parent device (a NIC's numa_node), or -1. */
static int copy_netdev_file(const struct rv_device *d, const char *name, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/class/net/%s/device/%s", d->ifname, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0 || buf[n - 1] != '\n')
		return -1;
	buf[n] = '\0';
	return (int)n;
}

static int gid_index(const char *s, unsigned *index)
{
	char *end;
	unsigned long v;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	v = strtoul(s, &end, 10);
	if (*end || v >= ROCEMU_MAX_GIDS)
		return -1;
	*index = (unsigned)v;
	return 0;
}

/* The contents of a device's file rel (as ports/1/state), in buf: its length, or a negative
 * errno (-ENODATA for an empty GID entry's attributes, -ENOENT for no such file). l holds
 * the daemon's answer for the files that follow it (is_live), and may be NULL for others. */
static int render(const struct rv_device *d, const char *rel, const struct live *l, char *buf,
		  size_t len)
{
	struct ibv_port_attr a;
	unsigned i;

	if (strcmp(rel, "node_type") == 0)
		return snprintf(buf, len, "1: CA\n");
	if (strcmp(rel, "node_guid") == 0 || strcmp(rel, "sys_image_guid") == 0)
		return print_guid(buf, len, d->guid);
	if (strcmp(rel, "fw_ver") == 0)
		return snprintf(buf, len, "%s\n", RV_FW_VER);
	if (strcmp(rel, "hca_type") == 0 || strcmp(rel, "node_desc") == 0)
		return snprintf(buf, len, "rocemu\n");
	if (strcmp(rel, "parent") == 0)
		return snprintf(buf, len, "%s\n", d->ifname);
	if (strcmp(rel, "device/numa_node") == 0) {
		int n = copy_netdev_file(d, "numa_node", buf, len);

		return n > 0 ? n : snprintf(buf, len, "-1\n");
	}
	if (strcmp(rel, "device/local_cpus") == 0) {
		int n = copy_netdev_file(d, "local_cpus", buf, len);

		return n > 0 ? n : print_all_cpus(buf, len);
	}
	if (strncmp(rel, "ports/1/", 8) != 0)
		return -ENOENT;
	rel += 8;
	if (strcmp(rel, "link_layer") == 0)
		return snprintf(buf, len, "Ethernet\n");
	if (strcmp(rel, "lid") == 0 || strcmp(rel, "sm_lid") == 0)
		return snprintf(buf, len, "0x0\n");
	if (strcmp(rel, "lid_mask_count") == 0 || strcmp(rel, "sm_sl") == 0)
		return snprintf(buf, len, "0\n");
	if (strcmp(rel, "pkeys/0") == 0)
		return snprintf(buf, len, "0x%04x\n", 0xffff);
	if (strncmp(rel, "hw_counters/", 12) == 0) {
		for (i = 0; i < N_HW_COUNTERS; i++)
			if (strcmp(rel + 12, hw_counters[i].name) == 0)
				break;
		if (i == N_HW_COUNTERS)
			return -ENOENT;
		if (!l || l->counters_err)
			return -ENODEV;
		return snprintf(buf, len, "%" PRIu64 "\n", l->counters[hw_counters[i].index]);
	}
	if (strcmp(rel, "rate") == 0 || strcmp(rel, "cap_mask") == 0) {
		struct rocemu_port_attr any = { .state = IBV_PORT_ACTIVE };

		rv_fill_port_attr(&any, &a);    /* neither follows the daemon */
		return rel[0] == 'r' ? print_rate(buf, len, &a) :
				       snprintf(buf, len, "0x%08x\n", a.port_cap_flags);
	}
	/* the rest is the port's: what ibv_query_port says */
	if (!l || l->port_err)
		return -ENODEV;
	rv_fill_port_attr(&l->port, &a);
	if (strcmp(rel, "state") == 0)
		return snprintf(buf, len, "%u: %s\n", a.state, port_state_name(a.state));
	if (strcmp(rel, "phys_state") == 0)
		return snprintf(buf, len, "%u: %s\n", a.phys_state, phys_state_name(a.phys_state));
	if (strncmp(rel, "gids/", 5) == 0 && gid_index(rel + 5, &i) == 0) {
		union ibv_gid zero = { .raw = { 0 } };

		return print_gid(buf, len, i < l->port.gid_count ? &l->port.gids[i] : &zero);
	}
	if (strncmp(rel, "gid_attrs/types/", 16) == 0 && gid_index(rel + 16, &i) == 0)
		return i < l->port.gid_count ? snprintf(buf, len, "RoCE v2\n") : -ENODATA;
	if (strncmp(rel, "gid_attrs/ndevs/", 16) == 0 && gid_index(rel + 16, &i) == 0)
		return i < l->port.gid_count ? snprintf(buf, len, "%s\n", l->port.ifname) :
					       -ENODATA;
	return -ENOENT;
}

/* ---- the entries ---- */

enum kind { K_NONE, K_DIR, K_FILE, K_LINK, K_DEVNODE };

/* What a path of the kernel's names: its kind, and what to put there. */
struct node {
	enum kind kind;
	struct rv_device *dev;          /* a device directory's file: the device and ... */
	const char *rel;                /* ... the file under it */
	char text[96];                  /* a link's target; another file's contents */
};

/* The device named name (len bytes: rocemuN or uverbsN); the devices are listed when it is
 * not known yet (a program that never listed them). */
static struct rv_device *device(const char *name, size_t len)
{
	struct rv_device *d = rv_device_named(name, len);
	struct ibv_device **list;

	if (d || len == 0)
		return d;
	list = ibv_get_device_list(NULL);
	if (list)
		ibv_free_device_list(list);
	return rv_device_named(name, len);
}

static bool is(const char *path, const char *dir, const char **rest)
{
	size_t n = strlen(dir);

	if (strncmp(path, dir, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return false;
	*rest = path[n] ? path + n + 1 : path + n;
	return true;
}

/* The device whose ibdev name (or, by_dev_name, uverbs name) is rest's first component;
 * *slash gets what follows it, NULL when nothing does. */
static struct rv_device *named_device(const char *rest, bool by_dev_name, const char **slash)
{
	size_t len;
	struct rv_device *d;
	const char *name;

	*slash = strchr(rest, '/');
	len = *slash ? (size_t)(*slash - rest) : strlen(rest);
	d = device(rest, len);
	name = d ? (by_dev_name ? d->ibdev.dev_name : d->ibdev.name) : NULL;
	return name && strlen(name) == len && !strncmp(name, rest, len) ? d : NULL;
}

/* The node at path, a canonical path of the kernel's (no "." or "..", no double slash). */
static void describe(const char *path, struct node *n)
{
	const char *rest, *slash;
	struct rv_device *d;

	memset(n, 0, sizeof(*n));
	if (!strcmp(path, "/sys") || !strcmp(path, "/sys/class") || !strcmp(path, "/sys/devices") ||
	    !strcmp(path, "/sys/devices/virtual") || !strcmp(path, "/dev")) {
		n->kind = K_DIR;
	} else if (is(path, IBDEV_CLASS, &rest) || is(path, UVERBS_CLASS, &rest)) {
		bool verbs = path[sizeof(IBDEV_CLASS) - 1] == '_';

		if (!rest[0]) {
			n->kind = K_DIR;
		} else if (verbs && !strcmp(rest, "abi_version")) {
			n->kind = K_FILE;
			snprintf(n->text, sizeof(n->text), "%d\n", UVERBS_ABI);
		} else if (!strchr(rest, '/') && (d = device(rest, strlen(rest))) != NULL &&
			   !strcmp(verbs ? d->ibdev.dev_name : d->ibdev.name, rest)) {
			n->kind = K_LINK;
			snprintf(n->text, sizeof(n->text), "../../devices/virtual/%s/%s",
				 verbs ? "infiniband_verbs" : "infiniband", rest);
		}
	} else if (is(path, IBDEV_DIR, &rest)) {
		if (!rest[0]) {
			n->kind = K_DIR;
			return;
		}
		d = named_device(rest, false, &slash);
		if (!d)
			return;
		if (!slash) {
			n->kind = K_DIR;
			return;
		}
		switch (dev_entry(slash + 1)) {
		case 'd': n->kind = K_DIR; break;
		case 'f': n->kind = K_FILE; n->dev = d; n->rel = slash + 1; break;
		default: break;
		}
	} else if (is(path, UVERBS_DIR, &rest)) {
		if (!rest[0]) {
			n->kind = K_DIR;
			return;
		}
		d = named_device(rest, true, &slash);
		if (!d)
			return;
		if (!slash) {
			n->kind = K_DIR;
		} else if (!strcmp(slash, "/ibdev")) {
			n->kind = K_FILE;
			snprintf(n->text, sizeof(n->text), "%s\n", d->ibdev.name);
		} else if (!strcmp(slash, "/abi_version")) {
			n->kind = K_FILE;
			snprintf(n->text, sizeof(n->text), "%d\n", RV_UVERBS_ABI);
		} else if (!strcmp(slash, "/dev")) {
			n->kind = K_FILE;
			snprintf(n->text, sizeof(n->text), "%d:%u\n", UVERBS_MAJOR,
				 UVERBS_MINOR_BASE + d->index);
		}
	} else if (is(path, "/dev/infiniband", &rest)) {
		if (!rest[0])
			n->kind = K_DIR;
		else if (!strchr(rest, '/') && (d = device(rest, strlen(rest))) != NULL &&
			 !strcmp(d->ibdev.dev_name, rest))
			n->kind = K_DEVNODE;
	}
}

/* The names in the directory at path (canonical), each passed to fn. */
static void list_dir(const char *path, void (*fn)(const char *dir, const char *name))
{
	const char *rest;
	struct ibv_device **list;
	int n = 0;

	if (is(path, IBDEV_DIR, &rest) && rest[0]) {
		const char *sub = strchr(rest, '/');
		size_t sublen = sub ? strlen(sub + 1) : 0;

		pthread_once(&dev_entries_once, make_dev_entries);
		for (unsigned i = 0; i < n_dev_entries; i++) {
			const char *e = dev_entry_names[i], *name = e;
			char one[48];

			if (sub) {      /* entries under rest's sub-directory */
				if (strncmp(e, sub + 1, sublen) != 0 || e[sublen] != '/')
					continue;
				name = e + sublen + 1;
			}
			snprintf(one, sizeof(one), "%s", name);
			if (!one[0] || (strchr(one, '/') && strchr(one, '/')[1]))
				continue;       /* deeper, or the directory itself */
			if (strchr(one, '/'))
				*strchr(one, '/') = '\0';
			fn(path, one);
		}
		return;
	}
	if (is(path, UVERBS_DIR, &rest) && rest[0]) {
		fn(path, "ibdev");
		fn(path, "abi_version");
		fn(path, "dev");
		return;
	}
	if (!strcmp(path, UVERBS_CLASS))
		fn(path, "abi_version");
	if (!strcmp(path, IBDEV_CLASS) || !strcmp(path, UVERBS_CLASS) ||
	    !strcmp(path, IBDEV_DIR) || !strcmp(path, UVERBS_DIR) ||
	    !strcmp(path, "/dev/infiniband")) {
		bool ib = !strcmp(path, IBDEV_CLASS) || !strcmp(path, IBDEV_DIR);

		list = ibv_get_device_list(&n);
		for (int i = 0; list && i < n; i++)
			fn(path, ib ? list[i]->name : list[i]->dev_name);
		if (list)
			ibv_free_device_list(list);
	}
}

/* ---- the tree ---- */

static bool enabled(void)
{
	if (tree_enabled < 0) {
		const char *e = getenv("ROCEMU_SYSFS");

		tree_enabled = !(e && strcmp(e, "0") == 0);
	}
	return tree_enabled;
}

/* root + path into out; -1 when too long. */
static int tree_path(char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int tree_path(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (tree_len >= len)
		return -1;
	memcpy(out, tree_root, tree_len);
	va_start(ap, fmt);
	n = vsnprintf(out + tree_len, len - tree_len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len - tree_len ? -1 : 0;
}

static uint64_t path_hash(const char *path)
{
	uint64_t h = 14695981039346656037ull;

	while (*path)
		h = (h ^ (uint8_t)*path++) * 1099511628211ull;
	return h ? h : 1;
}

/* Whether path's entry was made; with add, it is now. */
static bool made_entry(const char *path, bool add)
{
	uint64_t h = path_hash(path);

	if (!made)
		return false;
	for (unsigned i = 0, slot = (unsigned)h % MADE_SLOTS; i < MADE_SLOTS;
	     i++, slot = (slot + 1) % MADE_SLOTS) {
		if (made[slot] == h)
			return true;
		if (!made[slot]) {
			if (add)
				made[slot] = h;
			return false;
		}
	}
	return false;           /* full: made again each time, which is harmless */
}

/* Writes a file of the tree through a new file renamed over it, so that a reader never
 * sees it half written. */
static int replace_file(const char *path, const char *data, size_t len)
{
	char tmp[PATH_MAX];
	int fd, err = 0;

	if (tree_path(tmp, sizeof(tmp), "/.new.%d", (int)gettid()) < 0)
		return ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0)
		return errno;
	if ((fix_modes && fchmod(fd, 0444) != 0) || (len && write(fd, data, len) != (ssize_t)len))
		err = errno ? errno : EIO;
	if (close(fd) != 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) != 0)
		err = errno;
	if (err)
		unlink(tmp);
	return err;
}

/* Makes the entry n describes at path (canonical) in the tree, unless it is there. A file
 * that follows the daemon is made empty: opening it fills it. */
static void make_entry(const char *path, const struct node *n)
{
	char full[PATH_MAX], buf[512];
	int fd, len = 0;

	if (made_entry(path, false) || tree_path(full, sizeof(full), "%s", path) < 0)
		return;
	switch (n->kind) {
	case K_DIR:
		if (mkdir(full, 0755) == 0) {
			if (fix_modes)
				chmod(full, 0755);
		} else if (errno != EEXIST) {
			return;
		}
		break;
	case K_LINK:
		if (symlink(n->text, full) != 0 && errno != EEXIST)
			return;
		break;
	case K_FILE:
	case K_DEVNODE:
		fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
		if (fd < 0) {
			if (errno != EEXIST)
				return;
			break;
		}
		if (n->kind == K_DEVNODE || fix_modes)
			fchmod(fd, n->kind == K_DEVNODE ? 0666 : 0444);
		if (n->kind == K_FILE && !n->dev)
			len = (int)strlen(n->text);
		else if (n->kind == K_FILE && !is_live(n->rel))
			len = render(n->dev, n->rel, NULL, buf, sizeof(buf));
		if (len > 0 && write(fd, n->dev ? buf : n->text,
				     (size_t)len < sizeof(buf) ? (size_t)len : sizeof(buf) - 1) < 0)
			len = -1;
		close(fd);
		break;
	default:
		return;
	}
	made_entry(path, true);
}

static void make_listed(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct node n;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return;
	describe(path, &n);
	make_entry(path, &n);
}

/* The daemon's answer for a file that follows it, written into the tree: 0, or the errno
 * reading the kernel's file would give. */
static int refresh(const char *path, const struct node *n)
{
	char full[PATH_MAX], buf[512];
	struct live l;
	int len;

	query_live(n->dev, &l, needs_counters(n->rel));
	len = render(n->dev, n->rel, &l, buf, sizeof(buf));
	if (len == -ENODATA || len == -ENODEV)
		return -len;
	if (len < 0 || tree_path(full, sizeof(full), "%s", path) < 0)
		return 0;
	replace_file(full, buf, (size_t)len < sizeof(buf) ? (size_t)len : sizeof(buf) - 1);
	return 0;
}

/* Walks path as the kernel would resolve it, following links; with make, each entry on
 * the way is made in the tree. The last entry is described in last and its canonical path
 * left in canon. 0, or the errno of a path that does not resolve (ENOENT, ENOTDIR). */
static int walk(const char *path, char *canon, struct node *last, bool make)
{
	char todo[PATH_MAX], next[PATH_MAX];
	size_t clen = 0;
	int links = 0;

	if (strlen(path) >= sizeof(todo))
		return ENAMETOOLONG;
	strcpy(todo, path);
	canon[0] = '\0';
	memset(last, 0, sizeof(*last));
	last->kind = K_DIR;     /* "/" */
	for (char *p = todo; *p;) {
		char *c = p, *end = strchr(p, '/');
		size_t n;

		if (end)
			*end = '\0';
		p = end ? end + 1 : p + strlen(p);
		n = strlen(c);
		if (n == 0 || !strcmp(c, "."))
			continue;
		if (last->kind != K_DIR)
			return ENOTDIR;
		if (!strcmp(c, "..")) {
			char *s = strrchr(canon, '/');

			clen = s ? (size_t)(s - canon) : 0;
			canon[clen] = '\0';
			describe(clen ? canon : "/", last);
			if (!clen)
				last->kind = K_DIR;
			continue;
		}
		if (clen + 1 + n >= PATH_MAX)
			return ENAMETOOLONG;
		canon[clen++] = '/';
		memcpy(canon + clen, c, n + 1);
		clen += n;
		describe(canon, last);
		if (last->kind == K_NONE)
			return ENOENT;
		if (make)
			make_entry(canon, last);
		if (last->kind == K_LINK) {
			/* go on from the link's directory with its target, then what is left */
			if (++links > MAX_LINKS)
				return ELOOP;
			clen -= n + 1;
			canon[clen] = '\0';
			if ((size_t)snprintf(next, sizeof(next), "%s/%s", last->text, p) >=
			    sizeof(next))
				return ENAMETOOLONG;
			strcpy(todo, next);
			p = todo;
			last->kind = K_DIR;
		}
	}
	if (!canon[0])
		strcpy(canon, "/");
	return 0;
}

static int make_tree(void);

int rv_sysfs_prepare(const char *path, enum rv_sysfs_use use)
{
	char canon[PATH_MAX];
	struct node n;
	int err, saved = errno;

	if (!enabled())
		return 0;
	pthread_mutex_lock(&tree_lock);
	/* first without making anything: a path that is not there needs no tree */
	err = walk(path, canon, &n, false);
	if (!err && !tree_root[0] && !tree_err) {
		tree_err = make_tree();
		if (tree_err)
			rv_warn("cannot make the device's /sys and /dev files: %s",
				strerror(tree_err));
	}
	if (!err && tree_root[0] && tree_owner == getpid() &&
	    !(err = walk(path, canon, &n, true))) {
		if (n.kind == K_DIR && use != RV_SYSFS_LOOKUP)
			list_dir(canon, make_listed);
		else if (n.kind == K_FILE && n.dev && use == RV_SYSFS_READ && is_live(n.rel))
			err = refresh(canon, &n);
	}
	pthread_mutex_unlock(&tree_lock);
	errno = saved;
	return err;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void remove_tree(const char *root)
{
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* The trees of this user's processes that are gone: their lock is free. */
static void sweep(const char *parent)
{
	DIR *dir = opendir(parent);
	struct dirent *e;
	char path[PATH_MAX];
	struct stat st;

	while (dir && (e = readdir(dir)) != NULL) {
		int fd;

		if (strncmp(e->d_name, TREE_PREFIX, strlen(TREE_PREFIX)) != 0 ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", parent, e->d_name) >=
		    sizeof(path) - 8 ||
		    lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		strcat(path, "/.lock");
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		path[strlen(path) - 6] = '\0';
		if (fd < 0) {
			if (errno == ENOENT && time(NULL) - st.st_mtime > STALE_SECONDS)
				remove_tree(path);
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			remove_tree(path);
		close(fd);
	}
	if (dir)
		closedir(dir);
}

/* Where trees are made: $TMPDIR, else /tmp. */
static const char *tree_parent(void)
{
	const char *tmp = getenv("TMPDIR");

	return tmp && tmp[0] == '/' && strlen(tmp) <= PATH_MAX / 4 ? tmp : "/tmp";
}

const char *rv_sysfs_foreign(const char *path)
{
	const char *tmp = tree_parent(), *p;
	size_t len = strlen(tmp);

	while (len > 1 && tmp[len - 1] == '/')
		len--;
	if (strncmp(path, tmp, len) != 0 || path[len] != '/' ||
	    strncmp(path + len + 1, TREE_PREFIX, strlen(TREE_PREFIX)) != 0)
		return NULL;
	p = strchr(path + len + 1, '/');
	return p && p[1] ? p : NULL;
}

/* Whether the umask takes more than 022, which would leave entries of other modes than the
 * kernel's (what makes them asks for those); read without changing it. */
static bool umask_strict(void)
{
	char buf[1024];
	const char *u;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	u = strstr(buf, "\nUmask:");
	return !u || (strtoul(u + 7, NULL, 8) & ~(unsigned long)022) != 0;
}

/* The tree's directory and its lock; its entries come as they are looked up. */
static int make_tree(void)
{
	const char *tmp = tree_parent();
	/* getcwd and realpath give canonical paths, which paths.c maps back by the tree's
	 * prefix: a TMPDIR with a trailing slash or a symbolic link in it must not keep them
	 * apart (resolved before the tree has a name, so nothing is mapped here yet) */
	char *canonical = realpath(tmp, NULL);
	char path[PATH_MAX], lock[PATH_MAX];
	bool named;
	int err = 0;

	if (canonical)
		tmp = canonical;
	sweep(tmp);
	fix_modes = umask_strict();
	made = calloc(MADE_SLOTS, sizeof(*made));
	named = (size_t)snprintf(tree_root, sizeof(tree_root), "%s/%sXXXXXX", tmp, TREE_PREFIX) <
		sizeof(tree_root);
	free(canonical);
	if (!made) {
		tree_root[0] = '\0';
		return ENOMEM;
	}
	if (!named || !mkdtemp(tree_root)) {
		err = named ? errno : ENAMETOOLONG;
		tree_root[0] = '\0';
		free(made);
		made = NULL;
		return err;
	}
	tree_len = strlen(tree_root);
	tree_owner = getpid();
	/* locked before it takes its name: a sweep never finds it free while this one lives */
	if (tree_path(path, sizeof(path), "/.lock.new") == 0)
		tree_lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (tree_lock_fd < 0 || flock(tree_lock_fd, LOCK_EX) != 0)
		err = errno;
	else if (tree_path(lock, sizeof(lock), "/.lock") < 0 || rename(path, lock) != 0)
		err = errno ? errno : ENAMETOOLONG;
	if (!err)
		return 0;
	remove_tree(tree_root);
	if (tree_lock_fd >= 0)
		close(tree_lock_fd);
	tree_lock_fd = -1;
	tree_root[0] = '\0';
	tree_len = 0;
	free(made);
	made = NULL;
	return err;
}

const char *rv_sysfs_root(size_t *len)
{
	const char *root;

	if (!enabled())
		return NULL;
	pthread_mutex_lock(&tree_lock);
	root = tree_root[0] && tree_owner == getpid() ? tree_root : NULL;
	*len = tree_len;
	pthread_mutex_unlock(&tree_lock);
	return root;
}

/* A child of fork makes a tree of its own when it needs one: the parent's goes with it. */
static void fork_child(void)
{
	pthread_mutexattr_t attr;

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&tree_lock, &attr);
	pthread_mutexattr_destroy(&attr);
	if (tree_lock_fd >= 0)
		close(tree_lock_fd);    /* the parent's descriptor still holds the lock */
	tree_lock_fd = -1;
	tree_root[0] = '\0';
	tree_len = 0;
	tree_err = 0;
	free(made);
	made = NULL;
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&tree_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&tree_lock);
}

__attribute__((constructor)) static void tree_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void tree_fini(void)
{
	if (tree_root[0] && tree_owner == getpid()) {
		remove_tree(tree_root);
		tree_root[0] = '\0';
	}
}
