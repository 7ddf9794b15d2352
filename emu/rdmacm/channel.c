/* Event channels: a local socket pair whose read end the program polls (poll, epoll and
 * O_NONBLOCK work on it as on any socket), and whose write end each daemon an id of the
 * channel talks to holds a copy of. No /dev/infiniband/rdma_cm is needed. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/rdmacm/rdmacm.h"

#define RCM_CHANNEL_BYTES (4 << 20)  /* room for the events of thousands of connections */

/* The channels not yet destroyed: a channel the program destroyed already, or a pointer
 * that was never one, is refused (EINVAL) or, to rdma_destroy_event_channel, ignored,
 * never followed. perftest 4.5's -R client, refused once, destroys its channel and then
 * uses and destroys it again. */
_Static_assert(offsetof(struct rcm_channel, ch) == 0,
	       "a channel's program pointer is the channel's own (the casts, listed())");
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, rcm_channel) live = LIST_HEAD_INITIALIZER(live);

/* Under live_lock. The pointer p is compared with the live ones, never read through. */
static struct rcm_channel *listed(const void *p)
{
	struct rcm_channel *c;

	LIST_FOREACH(c, &live, link)
		if ((const void *)&c->ch == p)
			break;
	return c;
}

bool rcm_channel_live(const struct rdma_event_channel *ch)
{
	bool found;

	pthread_mutex_lock(&live_lock);
	found = listed(ch) != NULL;
	pthread_mutex_unlock(&live_lock);
	return found;
}

/* Whether c was live, and is no more: of two threads destroying it, one goes on. */
static bool unlist(struct rcm_channel *c)
{
	bool found;

	pthread_mutex_lock(&live_lock);
	found = listed(c) != NULL;   /* (ch is c's first member) */
	if (found)
		LIST_REMOVE(c, link);
	pthread_mutex_unlock(&live_lock);
	return found;
}

struct rcm_channel *rcm_channel_new(void)
{
	struct rcm_channel *c = calloc(1, sizeof(*c));
	int sv[2], bytes = RCM_CHANNEL_BYTES;

	if (!c)
		return NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		free(c);
		return NULL;
	}
	/* the writers' sends fail rather than block when the program reads nothing: give
	 * them room (the forced size where allowed) */
	if (setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) < 0)
		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
	c->ch.fd = sv[0];
	c->wr = sv[1];
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_lock(&live_lock);
	LIST_INSERT_HEAD(&live, c, link);
	pthread_mutex_unlock(&live_lock);
	return c;
}

void rcm_channel_free(struct rcm_channel *c)
{
	struct rcm_device *devs;
	int n;

	if (!unlist(c))
		return;
	n = rcm_devices(&devs);
	for (int i = 0; i < n; i++) {
		struct proto_handle m = { .hdr.op = PROTO_CM_CLOSE_CHANNEL, .handle = c->handle[i] };

		if (c->handle[i])
			rcm_request(&devs[i], &m, sizeof(m), NULL, 0, -1);
	}
	close(c->ch.fd);
	close(c->wr);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int rcm_channel_at(struct rcm_channel *c, struct rcm_device *d, uint32_t *handle)
{
	struct rcm_device *devs;
	int idx, err = 0;

	rcm_devices(&devs);
	idx = (int)(d - devs);
	pthread_mutex_lock(&c->lock);
	if (!c->handle[idx]) {
		struct proto_handle m = { .hdr.op = PROTO_CM_CHANNEL };
		struct proto_handle_reply r;

		err = rcm_request(d, &m, sizeof(m), &r, sizeof(r), c->wr);
		if (!err)
			c->handle[idx] = r.handle;
	}
	*handle = c->handle[idx];
	pthread_mutex_unlock(&c->lock);
	return err;
}

int rcm_post_local(struct rcm_id *id, uint32_t event, int32_t status)
{
	struct proto_cm_event ev = { .event = event, .status = status, .cookie = id->cookie };

	if (send(id->chan->wr, &ev, sizeof(ev), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(ev))
		return errno;
	return 0;
}

void rcm_channel_move_events(struct rcm_channel *from, uint64_t cookie, struct rcm_channel *to)
{
	struct proto_cm_event pe, *kept = NULL;
	size_t nkept = 0;

	while (recv(from->ch.fd, &pe, sizeof(pe), MSG_DONTWAIT) == (ssize_t)sizeof(pe)) {
		if (pe.cookie == cookie) {
			if (to)
				(void)!send(to->wr, &pe, sizeof(pe), MSG_DONTWAIT | MSG_NOSIGNAL);
			continue;
		}
		struct proto_cm_event *grown = realloc(kept, (nkept + 1) * sizeof(*kept));

		if (!grown)
			break;
		kept = grown;
		kept[nkept++] = pe;
	}
	for (size_t i = 0; i < nkept; i++)
		(void)!send(from->wr, &kept[i], sizeof(kept[i]), MSG_DONTWAIT | MSG_NOSIGNAL);
	free(kept);
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct rcm_channel *c = rcm_channel_new();

	return c ? &c->ch : NULL;
}

/* (a channel destroyed already, or never made, is left alone: rcm_channel_free) */
void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	rcm_channel_free((struct rcm_channel *)channel);
}
