/* rtnl: the kernel's neighbour table (ARP, IPv6 neighbour discovery) and its links' state
 * as rtnetlink bytes. Pure like the rest of wire/: the caller owns the NETLINK_ROUTE
 * sockets; these only write the request for one entry, read what the kernel answered to
 * it, and read the link changes it tells a socket subscribed to them. */
#ifndef ROCEMU_WIRE_RTNL_H
#define ROCEMU_WIRE_RTNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room enough for the request and for the kernel's answer to it. */
#define RTNL_NEIGH_REQ_MAX 64
#define RTNL_NEIGH_ANSWER_MAX 1024

/* RTM_GETNEIGH for the entry of addr (4 bytes for AF_INET, 16 for AF_INET6) on interface
 * ifindex, numbered seq: its length in buf (at least RTNL_NEIGH_REQ_MAX bytes), 0 for
 * another family. */
size_t rtnl_neigh_request(void *buf, uint32_t seq, int family, int ifindex, const uint8_t *addr);

/* Of the messages in buf (len bytes, aligned as a struct nlmsghdr), the one answering seq: 1 when it gives a link-layer
 * address the kernel would send to (reachable, stale, being checked or permanent: mac gets
 * it), 0 when it says there is none or none usable (an error answer, an incomplete or
 * failed entry), -1 when no message answers seq. */
int rtnl_neigh_answer(const void *buf, size_t len, uint32_t seq, uint8_t mac[6]);

/* Of the link messages in buf (len bytes, aligned as a struct nlmsghdr), the last about
 * interface ifindex: 1 and *running (up and with carrier: IFF_UP and IFF_RUNNING; false
 * for a link deleted), or 0 when none is about it. */
int rtnl_link_state(const void *buf, size_t len, int ifindex, bool *running);

#endif
