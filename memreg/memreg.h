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
struct mr_mw;

/* Outcome of a key lookup, one value per failed check, in the order they are made. */
enum mr_check {
	MR_OK = 0,
	MR_NO_REGION,    /* no MR registered at index key >> 8 */
	MR_KEY_MISMATCH, /* an MR is at that index but its key byte differs (stale key) */
	MR_PD_MISMATCH,  /* the MR belongs to another protection domain */
	MR_ACCESS,       /* the MR does not grant the requested access */
	MR_INVALID,      /* the MR is being torn down */
	MR_BOUNDS,       /* [va, va + len) is not inside the MR (or the MW) */
	/* memory windows only, after MR_PD_MISMATCH (the MW's PD) */
	MR_QP_MISMATCH,  /* a type 2 MW bound to another QP than the one asking */
	MR_MW_UNBOUND,   /* the MW is not bound to any memory (free, or bound with length 0) */
};

/* The FLUSH rights of newer rdma-core's verbs.h (IBV_ACCESS_FLUSH_GLOBAL, _PERSISTENT),
 * which Debian 12's lacks. An MR may grant global visibility; persistence it cannot, as
 * rxe refuses it for memory that is not persistent (pmem), and rocemu's never is. */
#define MR_ACCESS_FLUSH_GLOBAL (1 << 8)
#define MR_ACCESS_FLUSH_PERSISTENT (1 << 9)

struct mr_keys {
	uint32_t lkey;
	uint32_t rkey;
};

/* Memory windows (as rxe's): MWs take their index from the MRs' key space, so one key
 * names either; the key byte is the binder's. Type 1 is valid from allocation on and
 * bound to the PD; type 2 is free until a BIND_MW of a QP, then bound to that QP as well
 * until invalidated (LOCAL_INV, a SEND WITH INVALIDATE) or deallocated. */
enum mr_mw_type { MR_MW_TYPE_1 = 1, MR_MW_TYPE_2 = 2 };

/* A BIND_MW work request: mw_rkey names the MW as it is now, new_rkey gives the key byte
 * it takes, mr_lkey the MR it opens onto (unused with length 0). access is IBV_ACCESS_*
 * of the remote kind, IBV_ACCESS_ZERO_BASED allowed for type 2. */
struct mr_mw_bind {
	uint32_t mw_rkey;
	uint32_t new_rkey;
	uint32_t mr_lkey;
	int access;
	uint64_t addr;
	uint64_t length;
};

/* max_regions is capped at MR_MAX_REGIONS (0 gives EINVAL); max_pinned_bytes 0 = no cap.
 * mr_table_free also frees every client, PD and MR still left. */
struct mr_table *mr_table_new(uint32_t max_regions, uint64_t max_pinned_bytes);
void mr_table_free(struct mr_table *table);
uint64_t mr_table_pinned_bytes(const struct mr_table *table);
uint32_t mr_table_region_count(const struct mr_table *table);
/* Memory windows: they take keys from the same space, so MR_MAX_REGIONS bounds both. */
uint32_t mr_table_mw_count(const struct mr_table *table);

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
 * at iova. access is a set of IBV_ACCESS_* flags and MR_ACCESS_FLUSH_GLOBAL; REMOTE_WRITE
 * or REMOTE_ATOMIC without LOCAL_WRITE, MR_ACCESS_FLUSH_PERSISTENT, or unknown bits, give
 * -EINVAL; len == 0 gives -EINVAL. mlock failure gives -ENOMEM (RLIMIT_MEMLOCK) or
 * -EPERM; exceeding the client's or the table's pin cap gives -EDQUOT; no free index
 * gives -ENOSPC. iova must have the same offset within a page as addr (ibv_reg_mr
 * registers iova == addr), else -EINVAL. The memory must stay mapped until
 * deregistration. */
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
 * unmapped. The MR's index is not handed out again until the allocator wraps around.
 * -EINVAL while memory windows are bound to it, as on rxe (IBA 10.6.7.2.6). */
int mr_dereg(struct mr *mr);

/* What a re-registration changes (ibv_rereg_mr): flags is a set of IBV_REREG_MR_CHANGE_*,
 * and each other field is read only when its flag is set: pd (CHANGE_PD, another PD of
 * the MR's client), access (CHANGE_ACCESS, as mr_reg takes it), len and iova (CHANGE_
 * TRANSLATION, with the memory given to mr_rereg or mr_rereg_fd, as to mr_reg or
 * mr_reg_fd). */
struct mr_rereg {
	int flags;
	struct mr_pd *pd;
	int access;
	size_t len;
	uint64_t iova;
};

/* Re-registers mr in place: its keys stay (as mlx5's do), so a peer's rkey and the local
 * work requests' lkey keep naming it, and every later access is checked against what it
 * is now. A new translation is pinned before the old one is released, and the pages of
 * the old one that no other MR holds are unlocked (an fd mapping unmapped). All or
 * nothing: on failure mr is as it was. -EINVAL for no flags, a PD of another client, an
 * access or translation mr_reg would refuse; -EOPNOTSUPP for unknown flags (as the
 * kernel); -EBUSY while memory windows are bound to mr (a window was checked against the
 * MR's PD, access and range when it was bound); the pinning errors of mr_reg. addr is
 * read only with CHANGE_TRANSLATION. */
int mr_rereg(struct mr *mr, const struct mr_rereg *req, void *addr);
/* The same, the new memory being [offset, offset + req->len) of fd, as mr_reg_fd maps it. */
int mr_rereg_fd(struct mr *mr, const struct mr_rereg *req, int fd, off_t offset);

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

/* -EINVAL for a type other than 1 or 2, -ENOSPC when the key space is full. */
int mr_mw_alloc(struct mr_pd *pd, int type, struct mr_mw **out);
/* Unbinds (its MR may be deregistered again) and frees; its key stops resolving. */
void mr_mw_dealloc(struct mr_mw *mw);
uint32_t mr_mw_rkey(const struct mr_mw *mw);
int mr_mw_type(const struct mr_mw *mw);
/* Whether mr can be deregistered: not while MWs are bound to it (rxe: -EINVAL). */
int mr_dereg_check(const struct mr *mr);

/* Executes a BIND_MW posted on QP qp (an opaque token, compared only) of PD qp_pd, as
 * rxe's checks have it: 0, or -EINVAL when the MW or the MR is not the client's with those
 * keys, the MW is not in the state its type binds from, the PDs differ, a type 2 bind has
 * no length, the MR lacks IBV_ACCESS_MW_BIND (or LOCAL_WRITE for a writable window), or
 * the window is not inside the MR; -EOPNOTSUPP for access bits no MW takes. */
int mr_mw_bind(struct mr_client *client, const struct mr_pd *qp_pd, const void *qp,
	       const struct mr_mw_bind *bind);
/* Invalidates the type 2 MW rkey names (a SEND WITH INVALIDATE arriving at qp, or a
 * LOCAL_INV of a QP of pd: qp NULL): -EINVAL when no MW of PD pd has that key, it is of
 * type 1, or (type 2B, qp given) it is bound to another QP. An MR's key cannot be invalidated: rocemu has no fast-registration MRs. */
int mr_mw_invalidate(struct mr_table *table, uint32_t rkey, const struct mr_pd *pd,
		     const void *qp);
/* QP qp is going away: the type 2 MWs bound to it stay bound (their MR stays busy) but no
 * QP can reach them any more, until invalidated or deallocated. */
void mr_mw_forget_qp(struct mr_client *client, const void *qp);

/* The responder's lookup of rkey, an MR's or an MW's, for an access of len bytes at va by
 * QP qp of PD pd. For an MW: the MW's checks (key, PD, QP, bound, access, its bounds), then
 * its MR still valid and holding the range; *out is the MR and *mr_va the address in the
 * MR's iova space (va moved by a zero-based MW's start). For an MR, as mr_lookup. */
enum mr_check mr_lookup_remote(struct mr_table *table, uint32_t key, const struct mr_pd *pd,
			       const void *qp, int access, uint64_t va, uint64_t len,
			       struct mr **out, uint64_t *mr_va);

/* Copy through the page table, page by page. The range must have passed mr_lookup();
 * these re-check the bounds and return -ERANGE rather than touch memory outside the MR,
 * and -EFAULT (after copying what lay inside) should a page step ever fall outside it.
 * mr_copy_in() stores the last bytes last, each once and in order: the owner may be
 * polling them (copy.c). */
int mr_copy_in(struct mr *mr, uint64_t va, const void *src, size_t len);
int mr_copy_out(const struct mr *mr, uint64_t va, void *dst, size_t len);

/* Host address of iova va and the number of contiguous bytes from there up to the end of
 * its page (or of the MR): lets the TX path checksum and send MR memory without a copy. */
void *mr_host_span(const struct mr *mr, uint64_t va, size_t *contiguous);

#endif
