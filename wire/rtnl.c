/* The neighbour table's rtnetlink messages (rtnl.h). */
#include "wire/rtnl.h"

#include <limits.h>
#include <linux/if.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

#define NUD_USABLE (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT)

struct neigh_req {
	struct nlmsghdr nh;
	struct ndmsg nd;
	struct rtattr dst;
	uint8_t addr[16];
};

_Static_assert(sizeof(struct neigh_req) <= RTNL_NEIGH_REQ_MAX, "request room");

size_t rtnl_neigh_request(void *buf, uint32_t seq, int family, int ifindex, const uint8_t *addr)
{
	size_t alen = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
	struct neigh_req req = {
		.nh = { .nlmsg_type = RTM_GETNEIGH, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = seq },
		.nd = { .ndm_family = (uint8_t)family, .ndm_ifindex = ifindex },
		.dst = { .rta_type = NDA_DST, .rta_len = (unsigned short)RTA_LENGTH(alen) },
	};

	if (!alen)
		return 0;
	memcpy(req.addr, addr, alen);
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.nd)) + RTA_LENGTH(alen);
	memcpy(buf, &req, req.nh.nlmsg_len);
	return req.nh.nlmsg_len;
}

/* An RTM_NEWNEIGH answer: its link-layer address, if the entry's state is usable. */
static int usable_lladdr(const struct nlmsghdr *nh, uint8_t mac[6])
{
	const struct ndmsg *nd = NLMSG_DATA(nh);
	int len = (int)nh->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*nd));

	if (nh->nlmsg_type != RTM_NEWNEIGH || len < 0 || !(nd->ndm_state & NUD_USABLE))
		return 0;
	for (const struct rtattr *a = (const struct rtattr *)((const char *)nd +
							       NLMSG_ALIGN(sizeof(*nd)));
	     RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
			memcpy(mac, RTA_DATA(a), 6);
			return 1;
		}
	}
	return 0;
}

/* Whether a whole message starts at nh with left bytes to go: NLMSG_OK's test, written
 * out so that its length is compared unsigned with unsigned (the macro mixes the two). */
static bool message_fits(const struct nlmsghdr *nh, int left)
{
	return left >= (int)sizeof(*nh) && nh->nlmsg_len >= sizeof(*nh) &&
	       nh->nlmsg_len <= (unsigned int)left;
}

int rtnl_neigh_answer(const void *buf, size_t len, uint32_t seq, uint8_t mac[6])
{
	int left = len > INT_MAX ? INT_MAX : (int)len;

	for (const struct nlmsghdr *nh = buf; message_fits(nh, left); nh = NLMSG_NEXT(nh, left))
		if (nh->nlmsg_seq == seq)
			return usable_lladdr(nh, mac);
	return -1;
}

int rtnl_link_state(const void *buf, size_t len, int ifindex, bool *running)
{
	int left = len > INT_MAX ? INT_MAX : (int)len, found = 0;

	for (const struct nlmsghdr *nh = buf; message_fits(nh, left); nh = NLMSG_NEXT(nh, left)) {
		const struct ifinfomsg *ifi = NLMSG_DATA(nh);

		if ((nh->nlmsg_type != RTM_NEWLINK && nh->nlmsg_type != RTM_DELLINK) ||
		    nh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)) || ifi->ifi_index != ifindex)
			continue;
		*running = nh->nlmsg_type == RTM_NEWLINK && (ifi->ifi_flags & IFF_UP) &&
			   (ifi->ifi_flags & IFF_RUNNING);
		found = 1;
	}
	return found;
}
