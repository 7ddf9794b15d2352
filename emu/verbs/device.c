/* Devices: one verbs device per reachable rocemud, named after the interface it serves
 * (rocemu_eth0), with rxe's identity (node GUID the EUI-64 of the MAC, transport
 * InfiniBand; context.c and query.c give the rest).
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

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rv_device *devices;

/* As rxe: the EUI-64 of the interface's MAC. */
static __be64 guid_from_mac(const uint8_t mac[6])
{
	uint8_t eui[8] = { mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5] };
	__be64 guid;

	memcpy(&guid, eui, sizeof(guid));
	return guid;
}

static bool name_taken(const char *name)
{
	for (struct rv_device *d = devices; d; d = d->next)
		if (strcmp(d->ibdev.name, name) == 0)
			return true;
	return false;
}

static void name_device(struct rv_device *d, const char *ifname)
{
	char name[IBV_SYSFS_NAME_MAX];

	snprintf(name, sizeof(name), "rocemu_%s", ifname);
	for (unsigned n = 1; name_taken(name) && n < 1000; n++)
		snprintf(name, sizeof(name), "rocemu_%.40s_%u", ifname, n);
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "%s", name);
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
	d->guid = guid_from_mac(port.mac);
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	name_device(d, port.ifname);
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

static int scan_dir(struct ibv_device ***list, int *n)
{
	DIR *dir = opendir(ROCEMU_DEFAULT_SOCKET_DIR);
	struct dirent *e;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int cap = 4;

	*list = calloc((size_t)cap + 1, sizeof(**list));
	if (!*list) {
		if (dir)
			closedir(dir);
		return ENOMEM;
	}
	while (dir && (e = readdir(dir)) != NULL) {
		if (!is_socket_name(e->d_name) ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", ROCEMU_DEFAULT_SOCKET_DIR,
				     e->d_name) >= sizeof(path))
			continue;
		if (*n == cap) {
			struct ibv_device **grown = realloc(*list, ((size_t)cap * 2 + 1) *
							    sizeof(**list));
			if (!grown)
				break;
			*list = grown;
			cap *= 2;
		}
		add_device(*list, n, path);
		(*list)[*n] = NULL;
	}
	if (dir)
		closedir(dir);
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

int ibv_get_device_index(struct ibv_device *device)
{
	int index = 0;

	pthread_mutex_lock(&devices_lock);
	for (struct rv_device *d = devices; d && &d->ibdev != device; d = d->next)
		index++;
	pthread_mutex_unlock(&devices_lock);
	return index;
}
