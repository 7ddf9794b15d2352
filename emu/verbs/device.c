/* Devices: one verbs device per reachable rocemud, named as rxe's are, short: rocemu0,
 * rocemu1, ... in the order of the daemons' socket paths (so every process that sees the
 * same daemons gives them the same names; one named with $ROCEMU_SOCKET is rocemu0). A
 * name stays under 16 bytes, which UCX needs of its memory domains' names. The device has
 * rxe's identity (node GUID the EUI-64 of the MAC, transport InfiniBand; context.c and
 * query.c give the rest) and the kernel's paths: /dev/infiniband/uverbsN and
 * /sys/class/infiniband/rocemuN, which sysfs.c and paths.c show the program.
 *
 * Which daemons: $ROCEMU_SOCKET alone when set (rocemu-run -D sets it), else every *.sock
 * in ROCEMU_DEFAULT_SOCKET_DIR that answers. Devices are never freed: libibverbs keeps
 * them alive while contexts use them, and a program may list again at any time. */
#include "emu/verbs/verbs_int.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* verbs.h wraps it in a macro; here it is the exported function itself. */
#undef ibv_get_device_list

#define SOCK_SUFFIX ".sock"

typedef char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rv_device *devices;      /* newest first */
static unsigned ndevices;

/* As rxe: the EUI-64 of the interface's MAC. */
static __be64 guid_from_mac(const uint8_t mac[6])
{
	uint8_t eui[8] = { mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5] };
	__be64 guid;

	memcpy(&guid, eui, sizeof(guid));
	return guid;
}

/* rocemuN and uverbsN, with the paths libibverbs gives a kernel device. */
static void name_device(struct rv_device *d, unsigned index)
{
	d->index = index;
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s%u", RV_DEV_PREFIX, index);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%u", index);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "/sys/class/infiniband/%s",
		 d->ibdev.name);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
		 "/sys/class/infiniband_verbs/%s", d->ibdev.dev_name);
}

/* The device for the daemon at path, made on first sight; NULL when it does not answer. */
static struct rv_device *device_at(const char *path)
{
	struct rocemu_port_attr port;
	struct rocemu_context *rc;
	struct rv_device *d;
	int err;

	for (d = devices; d; d = d->next)
		if (strcmp(d->socket, path) == 0)
			return d;
	rc = rocemu_open(path);
	if (!rc)
		return NULL;
	err = rocemu_query_port(rc, &port);
	rocemu_close(rc);
	d = err ? NULL : calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	snprintf(d->socket, sizeof(d->socket), "%s", path);
	snprintf(d->ifname, sizeof(d->ifname), "%s", port.ifname);
	d->guid = guid_from_mac(port.mac);
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	name_device(d, ndevices++);
	d->next = devices;
	devices = d;
	return d;
}

static bool is_socket_name(const char *name)
{
	size_t len = strlen(name), suffix = strlen(SOCK_SUFFIX);

	return len > suffix && strcmp(name + len - suffix, SOCK_SUFFIX) == 0;
}

/* Appends the device at path to list (room for one more is there). */
static void add_device(struct ibv_device **list, int *n, const char *path)
{
	struct rv_device *d = device_at(path);

	if (d)
		list[(*n)++] = &d->ibdev;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(const sock_path *)a, *(const sock_path *)b);
}

/* The sockets of the directory, in the order of their paths. */
static int list_sockets(sock_path **paths, unsigned *count)
{
	DIR *dir = opendir(ROCEMU_DEFAULT_SOCKET_DIR);
	struct dirent *e;
	unsigned cap = 0;

	*paths = NULL;
	*count = 0;
	while (dir && (e = readdir(dir)) != NULL) {
		if (!is_socket_name(e->d_name))
			continue;
		if (*count == cap) {
			sock_path *grown = realloc(*paths, (cap * 2 + 4) * sizeof(**paths));

			if (!grown)
				break;
			*paths = grown;
			cap = cap * 2 + 4;
		}
		if ((size_t)snprintf((*paths)[*count], sizeof(**paths), "%s/%s",
				     ROCEMU_DEFAULT_SOCKET_DIR, e->d_name) < sizeof(**paths))
			(*count)++;
	}
	if (dir)
		closedir(dir);
	if (*count)
		qsort(*paths, *count, sizeof(**paths), by_path);
	return 0;
}

static int scan_dir(struct ibv_device ***list, int *n)
{
	sock_path *paths;
	unsigned count;

	list_sockets(&paths, &count);
	*list = calloc((size_t)count + 1, sizeof(**list));
	if (!*list) {
		free(paths);
		return ENOMEM;
	}
	for (unsigned i = 0; i < count; i++)
		add_device(*list, n, paths[i]);
	free(paths);
	return 0;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	const char *env = getenv("ROCEMU_SOCKET");
	struct ibv_device **list;
	int n = 0, err = 0;

	pthread_mutex_lock(&devices_lock);
	if (env && env[0]) {
		list = calloc(2, sizeof(*list));
		if (list)
			add_device(list, &n, env);
		else
			err = ENOMEM;
	} else {
		err = scan_dir(&list, &n);
	}
	pthread_mutex_unlock(&devices_lock);
	if (err) {
		errno = err;
		return NULL;
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	return ((struct rv_device *)device)->guid;
}

struct rv_device *rv_device_named(const char *name, size_t len)
{
	struct rv_device *d;

	pthread_mutex_lock(&devices_lock);
	for (d = devices; d; d = d->next)
		if ((strlen(d->ibdev.name) == len && memcmp(d->ibdev.name, name, len) == 0) ||
		    (strlen(d->ibdev.dev_name) == len && memcmp(d->ibdev.dev_name, name, len) == 0))
			break;
	pthread_mutex_unlock(&devices_lock);
	return d;
}

int ibv_get_device_index(struct ibv_device *device)
{
	return (int)((struct rv_device *)device)->index;
}
