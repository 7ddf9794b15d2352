/* memreg internals shared by the module's files (and by its test for white-box checks).
 *
 * Everything here runs on the daemon's one thread: nothing locks, and an MR is fully
 * built before it is published in the index array and fully unpublished before it is torn
 * down. */
#ifndef ROCEMU_MEMREG_INT_H
#define ROCEMU_MEMREG_INT_H

#include "memreg/memreg.h"

#include <stdbool.h>
#include <sys/queue.h>
#include <sys/types.h>

struct mr_table {
	struct mr **slots;      /* index -> MR, NULL when free; calloc'ed, so untouched pages
				 * of a large table cost no memory */
	struct mr_mw **mw_slots; /* index -> MW: an index holds an MR or an MW, never both */
	uint32_t max_regions;
	uint32_t region_count;  /* keys in use: MRs and MWs */
	uint32_t mw_count;      /* of them MWs */
	uint32_t next_index;    /* the allocator's cursor: one past the last index handed out */
	size_t page_size;
	uint64_t max_pinned;    /* 0 = no cap */
	uint64_t pinned;
	uint8_t random[64];     /* getrandom() output not yet used for key bytes */
	unsigned random_left;
	LIST_HEAD(, mr) mrs;    /* every published MR: the munlock overlap scan walks it */
	LIST_HEAD(, mr_client) clients;
};

/* How many released mappings a client keeps (mapcache.c), and the largest kept. */
#define MR_MAP_KEPT 8
#define MR_MAP_KEPT_MAX_BYTES ((size_t)1 << 20)

/* A mapping of a file the daemon made for an MR: [offset, offset + len) of the file
 * (dev, ino) at addr; addr NULL for an MR of the caller's own memory. */
struct mr_map {
	void *addr;
	size_t len;
	dev_t dev;
	ino_t ino;
	off_t offset;
};

struct mr_client {
	struct mr_table *table;
	uint64_t pin_cap;       /* 0 = only the table's cap applies */
	uint64_t pinned;
	struct mr_map kept[MR_MAP_KEPT]; /* released mappings, unlocked (mapcache.c) */
	unsigned kept_next;     /* the slot the next one takes, the oldest's */
	LIST_ENTRY(mr_client) link;
	LIST_HEAD(, mr_pd) pds;
};

struct mr_pd {
	struct mr_client *client;
	LIST_ENTRY(mr_pd) link;
	LIST_HEAD(, mr) mrs;
	LIST_HEAD(, mr_mw) mws;
};

struct mr {
	struct mr_pd *pd;
	uint32_t key;           /* both lkey and rkey */
	int access;
	bool valid;             /* cleared first thing on teardown */
	uint64_t iova;
	uint64_t length;
	size_t page_offset;     /* iova and host address share it */
	size_t npages;
	void **pages;           /* host address of each page of the iova span: the MTT */
	uintptr_t lock_start;   /* the page-rounded host span we mlock'ed and charged */
	size_t lock_len;
	struct mr_map map;      /* mr_reg_fd's mapping (lock_start, lock_len), else addr NULL */
	uint32_t num_mw;        /* MWs bound to it: it cannot be deregistered until 0 */
	LIST_ENTRY(mr) table_link;
	LIST_ENTRY(mr) pd_link;
};

enum mr_mw_state { MW_STATE_VALID, MW_STATE_FREE };

struct mr_mw {
	struct mr_pd *pd;
	uint32_t rkey;
	int type;               /* enum mr_mw_type */
	enum mr_mw_state state;
	int access;
	uint64_t addr;          /* a zero-based window's start in the MR; else its first iova */
	uint64_t length;
	struct mr *mr;          /* the MR it opens onto, NULL while length is 0 */
	const void *qp;         /* type 2 while valid: the QP it was bound on */
	LIST_ENTRY(mr_mw) pd_link;
};

/* table.c: the key space. */
int mr_table_reserve_key(struct mr_table *table, uint32_t *key);
void mr_table_publish(struct mr_table *table, struct mr *mr);
void mr_table_unpublish(struct mr_table *table, struct mr *mr);
struct mr *mr_table_slot(const struct mr_table *table, uint32_t key);
void mr_table_publish_mw(struct mr_table *table, struct mr_mw *mw);
void mr_table_unpublish_mw(struct mr_table *table, struct mr_mw *mw);
struct mr_mw *mr_table_mw_slot(const struct mr_table *table, uint32_t key);

/* window.c: a PD's MWs go with it. */
void mr_mw_destroy(struct mr_mw *mw);

/* pin.c: pinned-byte budgets and the page locks behind them. */
int mr_pin_check(const struct mr_client *client, uint64_t bytes);
void mr_pin_charge(struct mr_client *client, uint64_t bytes);
void mr_pin_uncharge(struct mr_client *client, uint64_t bytes);
int mr_pin_lock(const struct mr_table *table, uintptr_t start, size_t len);
void mr_pin_unlock(const struct mr_table *table, uintptr_t start, size_t len);

/* mapcache.c: a released mapping is kept, unlocked, for the next registration of the
 * same range of the same file. mr_map_take gives it back (NULL when none is kept). */
void *mr_map_take(struct mr_client *client, const struct mr_map *want);
void mr_map_release(struct mr_client *client, const struct mr_map *map);
void mr_map_forget_all(struct mr_client *client);

/* region.c: registration shared by mr_reg and mr_reg_fd, and teardown shared by mr_dereg,
 * mr_client_free and mr_table_free. map, when not NULL, is the mapping made for the MR:
 * it must be exactly the page-rounded span of [addr, addr + len), and is released with
 * it. */
int mr_check_args(uint64_t iova, size_t len, int access);
int mr_register(struct mr_pd *pd, uintptr_t addr, size_t len, uint64_t iova, int access,
		const struct mr_map *map, struct mr **out);
/* mr_rereg's work once the new memory is in reach at addr (map as for mr_register). */
int mr_rereg_at(struct mr *mr, const struct mr_rereg *req, uintptr_t addr,
		const struct mr_map *map);
void mr_invalidate(struct mr *mr);
void mr_destroy(struct mr *mr);

/* Whether [va, va + len) lies inside the MR, for any 64-bit va and len (len > 0). */
static inline bool mr_range_ok(const struct mr *mr, uint64_t va, uint64_t len)
{
	return va >= mr->iova && len <= mr->length && va - mr->iova <= mr->length - len;
}

#endif
