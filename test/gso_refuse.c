/* Preloaded into rocemud by gso.test.sh: sendmmsg refuses, with EINVAL, a message whose
 * virtio-net header asks for UDP GSO, as kernels before Linux 6.2 do. The messages before
 * it are sent, as the real sendmmsg would. */
#include <dlfcn.h>
#include <errno.h>
#include <linux/virtio_net.h>
#include <stdbool.h>
#include <sys/socket.h>

int sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags);

static bool asks_for_gso(const struct msghdr *h)
{
	const struct virtio_net_hdr *vh;

	if (!h->msg_iovlen || h->msg_iov[0].iov_len != sizeof(*vh))
		return false;
	vh = h->msg_iov[0].iov_base;
	return vh->gso_type != VIRTIO_NET_HDR_GSO_NONE;
}

int sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
	int (*real)(int, struct mmsghdr *, unsigned int, int) =
		(int (*)(int, struct mmsghdr *, unsigned int, int))dlsym(RTLD_NEXT, "sendmmsg");
	unsigned int ok = 0;

	while (ok < n && !asks_for_gso(&msgs[ok].msg_hdr))
		ok++;
	if (ok == 0 && n) {
		errno = EINVAL;
		return -1;
	}
	return real(fd, msgs, ok, flags);
}
