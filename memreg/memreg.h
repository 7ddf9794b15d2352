/* memreg: protection domains and Memory Regions for an emulated HCA serving many processes.
 *
 * A daemon-wide mr_table owns the key space (index << 8 | key byte) and the cap on pinned
 * bytes; each local process is an mr_client with its own PDs, MRs and pinned-byte budget.
 * Registration pins the pages (mlock) and builds a per-MR page table (the emulated MTT: one
 * host page pointer per page of the MR's iova span). Every access from the wire goes through
 * mr_lookup(), which performs all of the responder's memory checks.
 *
 * No networking here. Error convention: functions returning int give 0 or a negative errno;
 * constructors return NULL and set errno; mr_lookup() returns an enum mr_check. */
#ifndef ROCEMU_MEMREG_H
#define ROCEMU_MEMREG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MR_MAX_REGIONS (1u << 19)  /* per daemon, like rxe's max_mr */

struct mr_table;
struct mr_client;
struct mr_pd;
struct mr;

/* Outcome of a key lookup, one value per failed check, in the order they are made. */
enum mr_check {
	MR_OK = 0,
	MR_NO_REGION,    /* no MR registered at index key >> 8 */
	MR_KEY_MISMATCH, /* an MR is at that index but its key byte differs (stale key) */
	MR_PD_MISMATCH,  /* the MR belongs to another protection domain */
	MR_ACCESS,       /* the MR does not grant the requested access */
	MR_INVALID,      /* the MR is being torn down */
	MR_BOUNDS,       /* [va, va + len) is not inside the MR */
};

struct mr_keys {
	uint32_t lkey;
	uint32_t rkey;
};

/* max_regions is capped at MR_MAX_REGIONS (0 gives EINVAL); max_pinned_bytes 0 = no cap.
 * mr_table_free also frees every client, PD and MR still left. */
struct mr_table *mr_table_new(uint32_t max_regions, uint64_t max_pinned_bytes);
void mr_table_free(struct mr_table *table);
uint64_t mr_table_pinned_bytes(const struct mr_table *table);
uint32_t mr_table_region_count(const struct mr_table *table);

/* A client may pin at most pin_cap bytes (0 = no cap of its own, only the table's). */
struct mr_client *mr_client_new(struct mr_table *table, uint64_t pin_cap);
/* Destroys every PD and MR of the client and unpins them. */
void mr_client_free(struct mr_client *client);
uint64_t mr_client_pinned_bytes(const struct mr_client *client);

struct mr_pd *mr_pd_alloc(struct mr_client *client);
/* -EBUSY while MRs still use the PD. */
int mr_pd_dealloc(struct mr_pd *pd);
struct mr_client *mr_pd_client(const struct mr_pd *pd);

/* Registers len bytes of memory the daemon can reach at host address addr, seen by peers
 * at iova. access is a set of IBV_ACCESS_* flags; REMOTE_WRITE or REMOTE_ATOMIC without
 * LOCAL_WRITE, or unknown bits, give -EINVAL; len == 0 gives -EINVAL. mlock failure gives
 * -ENOMEM (RLIMIT_MEMLOCK) or -EPERM; exceeding the client's or the table's pin cap gives
 * -EDQUOT; no free index gives -ENOSPC. iova must have the same offset within a page as
 * addr (ibv_reg_mr registers iova == addr), else -EINVAL. The memory must stay mapped
 * until deregistration. */
int mr_reg(struct mr_pd *pd, void *addr, size_t len, uint64_t iova, int access,
	   struct mr **out);

/* Like mr_reg, but maps [offset, offset + len) of fd (e.g. a memfd shared with the client)
 * into the daemon first; the mapping is released with the MR. iova must have the same
 * offset within a page as offset. -EINVAL when the fd is not mappable or offset + len
 * overflows, -EOVERFLOW when the range is beyond the file's size, -EACCES when the fd cannot
 * be mapped writable (read-only or sealed against writes). */
int mr_reg_fd(struct mr_pd *pd, int fd, off_t offset, size_t len, uint64_t iova, int access,
	      struct mr **out);

/* Deregisters: the keys stop resolving at once, pages are unlocked and any fd mapping
 * unmapped. The MR's index is not handed out again until the allocator wraps around. */
int mr_dereg(struct mr *mr);

/* lkey == rkey, as in rxe: one key per MR; its access flags decide what a peer may do. */
struct mr_keys mr_keys(const struct mr *mr);
uint64_t mr_iova(const struct mr *mr);
uint64_t mr_length(const struct mr *mr);
int mr_access(const struct mr *mr);
struct mr_pd *mr_pd(const struct mr *mr);

/* The MR of this client with lkey, or NULL: for local (requester-side) use. */
struct mr *mr_find_local(struct mr_client *client, uint32_t lkey);

/* Resolves key for an access of len bytes at va, requiring every bit of `access`
 * (IBV_ACCESS_*; 0 for a local read) and the PD pd. Checks in enum order; the bounds check
 * is overflow-safe on any 64-bit va and len. len == 0 checks no bounds. */
enum mr_check mr_lookup(struct mr_table *table, uint32_t key, const struct mr_pd *pd,
			int access, uint64_t va, uint64_t len, struct mr **out);
const char *mr_check_name(enum mr_check check);

/* Copy through the page table, page by page. The range must have passed mr_lookup();
 * these re-check the bounds and return -ERANGE rather than touch memory outside the MR,
 * and -EFAULT (after copying what lay inside) should a page step ever fall outside it. */
int mr_copy_in(struct mr *mr, uint64_t va, const void *src, size_t len);
int mr_copy_out(const struct mr *mr, uint64_t va, void *dst, size_t len);

/* Host address of iova va and the number of contiguous bytes from there up to the end of
 * its page (or of the MR): lets the TX path checksum and send MR memory without a copy. */
void *mr_host_span(const struct mr *mr, uint64_t va, size_t *contiguous);

#endif
