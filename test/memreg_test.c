/* Check suite for memreg: keys, the responder's memory checks, registration rules, pinned
 * memory, copies through the page table and the lifetimes of clients, PDs and MRs. */
#include "memreg/memreg.h"
#include "memreg/memreg_int.h" /* white-box: MR_INVALID and the table's cap */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC
#define ALL_ACCESS (LW | RW | RR | RA)

#define BUF_PAGES 8
#define CANARY 0xA5
#define SKIP_EXIT 77

static size_t ps;
static struct mr_table *table;
static struct mr_client *client;
static struct mr_pd *pd;
static char *buf; /* BUF_PAGES page-aligned anonymous pages */

static void *map_pages(size_t n)
{
	void *p = mmap(NULL, n * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	return p;
}

static void new_table(uint32_t max_regions, uint64_t max_pinned)
{
	table = mr_table_new(max_regions, max_pinned);
	ck_assert_ptr_nonnull(table);
	client = mr_client_new(table, 0);
	ck_assert_ptr_nonnull(client);
	pd = mr_pd_alloc(client);
	ck_assert_ptr_nonnull(pd);
}

/* For tests that need other table limits than the fixture's. */
static void replace_table(uint32_t max_regions, uint64_t max_pinned)
{
	mr_table_free(table);
	new_table(max_regions, max_pinned);
}

static void setup(void)
{
	ps = (size_t)sysconf(_SC_PAGESIZE);
	new_table(MR_MAX_REGIONS, 0);
	buf = map_pages(BUF_PAGES);
	memset(buf, CANARY, BUF_PAGES * ps);
}

static void teardown(void)
{
	mr_table_free(table);
	munmap(buf, BUF_PAGES * ps);
	table = NULL;
}

/* Registers addr with iova == addr, as ibv_reg_mr does; the test fails otherwise. */
static struct mr *reg(struct mr_pd *p, void *addr, size_t len, int access)
{
	struct mr *mr = NULL;

	ck_assert_int_eq(mr_reg(p, addr, len, (uintptr_t)addr, access, &mr), 0);
	ck_assert_ptr_nonnull(mr);
	return mr;
}

static int try_reg(void *addr, size_t len, uint64_t iova, int access)
{
	struct mr *mr = NULL;
	int err = mr_reg(pd, addr, len, iova, access, &mr);

	ck_assert(err != 0 || mr != NULL);
	return err;
}

static uint32_t key_of(const struct mr *mr)
{
	return mr_keys(mr).rkey;
}

static enum mr_check look(uint32_t key, const struct mr_pd *p, int access, uint64_t va,
			  uint64_t len)
{
	static char sentinel;
	struct mr *out = (struct mr *)&sentinel; /* must be replaced by the MR or NULL */
	enum mr_check check = mr_lookup(table, key, p, access, va, len, &out);

	if (check == MR_OK)
		ck_assert_ptr_nonnull(out);
	else
		ck_assert_ptr_null(out);
	return check;
}

/* A "Vm...: N kB" field of /proc/self/status, in KiB. */
static long status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t field_len = strlen(field);
	char line[256];
	long value = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, field_len) == 0 && line[field_len] == ':' &&
		    sscanf(line + field_len + 1, "%ld", &value) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(value, 0);
	return value;
}

static long vmlck_kib(void)
{
	return status_kib("VmLck");
}

static long kib(size_t pages)
{
	return (long)(pages * ps / 1024);
}

static void assert_nothing_registered(long vmlck_before)
{
	ck_assert_uint_eq(mr_table_region_count(table), 0);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 0);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 0);
	ck_assert_int_eq(vmlck_kib(), vmlck_before);
}

/* ---- keys ---- */

START_TEST(test_key_format)
{
	struct mr *mr = reg(pd, buf, ps, LW);
	struct mr_keys keys = mr_keys(mr);
	struct mr *out = NULL;

	ck_assert_uint_eq(keys.lkey, keys.rkey);
	ck_assert_uint_lt(keys.lkey >> 8, MR_MAX_REGIONS);
	ck_assert_ptr_eq(mr_table_slot(table, keys.lkey), mr);
	ck_assert_int_eq(mr_lookup(table, keys.rkey, pd, 0, (uintptr_t)buf, ps, &out), MR_OK);
	ck_assert_ptr_eq(out, mr);
	ck_assert_uint_eq(mr_table_region_count(table), 1);
}
END_TEST

START_TEST(test_indices_cyclic)
{
	struct mr *a = reg(pd, buf, ps, 0);
	struct mr *b = reg(pd, buf + ps, ps, 0);
	uint32_t ia = key_of(a) >> 8, ib = key_of(b) >> 8;
	struct mr *c;

	ck_assert_uint_ne(key_of(a), key_of(b));
	ck_assert_uint_eq(ib, (ia + 1) % MR_MAX_REGIONS);
	ck_assert_int_eq(mr_dereg(a), 0);
	c = reg(pd, buf, ps, 0);
	/* The freed index is not handed out again: the cursor moves on. */
	ck_assert_uint_ne(key_of(c) >> 8, ia);
	ck_assert_uint_eq(key_of(c) >> 8, (ib + 1) % MR_MAX_REGIONS);
}
END_TEST

START_TEST(test_key_bytes_random)
{
	bool seen[256] = { false };
	int distinct = 0;

	for (int i = 0; i < 64; i++) {
		struct mr *mr = reg(pd, buf, ps, 0);
		uint8_t byte = key_of(mr) & 0xff;

		distinct += !seen[byte];
		seen[byte] = true;
		mr_dereg(mr);
	}
	/* 64 uniform bytes give fewer than 16 distinct values with negligible probability. */
	ck_assert_int_ge(distinct, 16);
}
END_TEST

START_TEST(test_key_byte_mismatch)
{
	struct mr *mr = reg(pd, buf, ps, 0);

	ck_assert_int_eq(look(key_of(mr) ^ 0x01, pd, 0, (uintptr_t)buf, 1), MR_KEY_MISMATCH);
	ck_assert_int_eq(look(key_of(mr) ^ 0x80, pd, 0, (uintptr_t)buf, 1), MR_KEY_MISMATCH);
	ck_assert_int_eq(look(key_of(mr), pd, 0, (uintptr_t)buf, 1), MR_OK);
}
END_TEST

START_TEST(test_stale_key_no_region)
{
	struct mr *mr = reg(pd, buf, ps, RR);
	uint32_t key = key_of(mr);

	ck_assert_int_eq(mr_dereg(mr), 0);
	ck_assert_int_eq(look(key, pd, 0, (uintptr_t)buf, 1), MR_NO_REGION);
	ck_assert_ptr_null(mr_find_local(client, key));
}
END_TEST

START_TEST(test_index_beyond_table)
{
	ck_assert_int_eq(look(MR_MAX_REGIONS << 8, pd, 0, 0, 0), MR_NO_REGION);
	ck_assert_int_eq(look(UINT32_MAX, pd, 0, 0, 0), MR_NO_REGION);
}
END_TEST

/* A small table wraps quickly: once an old index comes back, the old key resolves only if
 * the new random key byte happens to equal the old one (then the keys are equal). */
START_TEST(test_index_reuse_after_wrap)
{
	replace_table(4, 0);
	for (int round = 0; round < 16; round++) {
		struct mr *old = reg(pd, buf, ps, 0), *mr;
		uint32_t old_key = key_of(old);
		int steps = 0;

		mr_dereg(old);
		do {
			mr = reg(pd, buf, ps, 0);
			if (key_of(mr) >> 8 == old_key >> 8)
				break;
			mr_dereg(mr);
		} while (++steps < 8);
		ck_assert_uint_eq(key_of(mr) >> 8, old_key >> 8);
		ck_assert_int_eq(steps, 3); /* every other index first */
		if (key_of(mr) != old_key)
			ck_assert_int_eq(look(old_key, pd, 0, 0, 0), MR_KEY_MISMATCH);
		else
			ck_assert_int_eq(look(old_key, pd, 0, 0, 0), MR_OK);
		mr_dereg(mr);
	}
}
END_TEST

START_TEST(test_table_full)
{
	long before = vmlck_kib();

	replace_table(2, 0);
	reg(pd, buf, ps, 0);
	reg(pd, buf + ps, ps, 0);
	ck_assert_int_eq(try_reg(buf + 2 * ps, ps, (uintptr_t)buf + 2 * ps, 0), -ENOSPC);
	ck_assert_uint_eq(mr_table_region_count(table), 2);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 2 * ps);
	ck_assert_int_eq(vmlck_kib(), before + kib(2));
}
END_TEST

START_TEST(test_table_new_limits)
{
	struct mr_table *t;

	errno = 0;
	ck_assert_ptr_null(mr_table_new(0, 0));
	ck_assert_int_eq(errno, EINVAL);
	t = mr_table_new(MR_MAX_REGIONS + 5, 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->max_regions, MR_MAX_REGIONS);
	mr_table_free(t);
}
END_TEST

/* ---- lookup checks ---- */

START_TEST(test_pd_mismatch_same_client)
{
	struct mr_pd *other = mr_pd_alloc(client);
	struct mr *mr = reg(pd, buf, ps, LW | RW);

	ck_assert_int_eq(look(key_of(mr), other, RW, (uintptr_t)buf, 1), MR_PD_MISMATCH);
	ck_assert_int_eq(look(key_of(mr), pd, RW, (uintptr_t)buf, 1), MR_OK);
}
END_TEST

START_TEST(test_pd_mismatch_other_client)
{
	struct mr_client *them = mr_client_new(table, 0);
	struct mr_pd *their_pd = mr_pd_alloc(them);
	struct mr *mr = reg(pd, buf, ps, LW | RW);

	ck_assert_int_eq(look(key_of(mr), their_pd, RW, (uintptr_t)buf, 1), MR_PD_MISMATCH);
	ck_assert_ptr_eq(mr_pd_client(their_pd), them);
}
END_TEST

START_TEST(test_null_pd_is_compared)
{
	struct mr *mr = reg(pd, buf, ps, 0);

	ck_assert_int_eq(look(key_of(mr), NULL, 0, (uintptr_t)buf, 1), MR_PD_MISMATCH);
}
END_TEST

START_TEST(test_access_denied)
{
	struct mr *mr = reg(pd, buf, ps, LW | RR);
	uint64_t va = (uintptr_t)buf;

	ck_assert_int_eq(look(key_of(mr), pd, RW, va, 8), MR_ACCESS);
	ck_assert_int_eq(look(key_of(mr), pd, RA, va, 8), MR_ACCESS);
	ck_assert_int_eq(look(key_of(mr), pd, RR | RW, va, 8), MR_ACCESS);
	ck_assert_int_eq(look(key_of(mr), pd, IBV_ACCESS_MW_BIND, va, 8), MR_ACCESS);
	ck_assert_int_eq(look(key_of(mr), pd, RR, va, 8), MR_OK);
	ck_assert_int_eq(look(key_of(mr), pd, LW, va, 8), MR_OK);
	ck_assert_int_eq(look(key_of(mr), pd, 0, va, 8), MR_OK);
}
END_TEST

/* Remote read is granted by its own flag only: write and atomic do not imply it. */
START_TEST(test_remote_read_denied)
{
	struct mr *mr = reg(pd, buf, ps, LW | RW | RA);
	uint64_t va = (uintptr_t)buf;

	ck_assert_int_eq(look(key_of(mr), pd, RR, va, 8), MR_ACCESS);
	ck_assert_int_eq(look(key_of(mr), pd, RR, va, 1), MR_ACCESS);
	ck_assert_int_eq(look(key_of(mr), pd, RW, va, 8), MR_OK);
	ck_assert_int_eq(look(key_of(mr), pd, RA, va, 8), MR_OK);
	mr = reg(pd, buf + ps, ps, 0);
	ck_assert_int_eq(look(key_of(mr), pd, RR, va + ps, ps), MR_ACCESS);
}
END_TEST

START_TEST(test_local_read_always_granted)
{
	struct mr *mr = reg(pd, buf, ps, 0);

	ck_assert_int_eq(look(key_of(mr), pd, 0, (uintptr_t)buf, ps), MR_OK);
	ck_assert_int_eq(look(key_of(mr), pd, LW, (uintptr_t)buf, ps), MR_ACCESS);
}
END_TEST

/* Each lookup fails several checks; the first in enum order must be reported. */
START_TEST(test_check_order)
{
	struct mr_pd *other = mr_pd_alloc(client);
	struct mr *mr = reg(pd, buf, ps, RR);
	uint32_t key = key_of(mr);
	uint64_t outside = (uintptr_t)buf + ps;

	ck_assert_int_eq(look(key ^ 1, other, RW, outside, 8), MR_KEY_MISMATCH);
	ck_assert_int_eq(look(key, other, RW, outside, 8), MR_PD_MISMATCH);
	ck_assert_int_eq(look(key, pd, RW, outside, 8), MR_ACCESS);
	mr_invalidate(mr);
	ck_assert_int_eq(look(key, pd, RW, outside, 8), MR_ACCESS);
	ck_assert_int_eq(look(key, pd, RR, outside, 8), MR_INVALID);
	ck_assert_int_eq(look(key, pd, RR, (uintptr_t)buf, 8), MR_INVALID);
	ck_assert_ptr_null(mr_find_local(client, key));
	mr_dereg(mr);
	mr = reg(pd, buf, ps, RR);
	ck_assert_int_eq(look(key_of(mr), pd, RR, outside, 8), MR_BOUNDS);
}
END_TEST

START_TEST(test_bounds_edges)
{
	size_t len = 2 * ps;
	struct mr *mr = reg(pd, buf, len, LW | RW);
	uint32_t key = key_of(mr);
	uint64_t start = (uintptr_t)buf;

	ck_assert_int_eq(look(key, pd, RW, start - 1, 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start - 1, 2), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start + len, 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start + 1, len), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start, len + 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start, len), MR_OK);
	ck_assert_int_eq(look(key, pd, RW, start + len - 1, 1), MR_OK);
	ck_assert_int_eq(look(key, pd, RW, start + 1, len - 1), MR_OK);
}
END_TEST

START_TEST(test_bounds_overflow)
{
	struct mr *mr = reg(pd, buf, 2 * ps, LW | RW);
	uint32_t key = key_of(mr);
	uint64_t start = (uintptr_t)buf;

	ck_assert_int_eq(look(key, pd, RW, UINT64_MAX - 4, 16), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, UINT64_MAX, 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start, UINT64_MAX), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start + 1, UINT64_MAX), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, start + ps, UINT64_MAX - ps + 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, 0, UINT64_MAX), MR_BOUNDS);
}
END_TEST

/* An MR whose iova span ends just below 2^64: sums there would wrap. */
START_TEST(test_bounds_top_of_iova_space)
{
	uint64_t iova = 0 - 2 * (uint64_t)ps;
	struct mr *mr = NULL;
	uint32_t key;
	char out[4];

	ck_assert_int_eq(mr_reg(pd, buf, ps, iova, LW | RW, &mr), 0);
	key = key_of(mr);
	ck_assert_int_eq(look(key, pd, RW, iova, ps), MR_OK);
	ck_assert_int_eq(look(key, pd, RW, iova + ps - 1, 2), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, iova + ps, 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, UINT64_MAX - 1, 16), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, iova, UINT64_MAX), MR_BOUNDS);
	ck_assert_int_eq(mr_copy_in(mr, iova + ps - 4, "abcd", 4), 0);
	ck_assert_int_eq(mr_copy_out(mr, iova + ps - 4, out, 4), 0);
	ck_assert_mem_eq(out, "abcd", 4);
	ck_assert_mem_eq(buf + ps - 4, "abcd", 4);
	ck_assert_int_eq(mr_copy_in(mr, iova + ps - 3, "abcd", 4), -ERANGE);
}
END_TEST

START_TEST(test_zero_length_checks_no_bounds)
{
	struct mr *mr = reg(pd, buf, ps, LW | RW);
	uint32_t key = key_of(mr);

	ck_assert_int_eq(look(key, pd, RW, 0, 0), MR_OK);
	ck_assert_int_eq(look(key, pd, RW, UINT64_MAX, 0), MR_OK);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf + ps, 0), MR_OK);
	/* The key, PD and access are still checked. */
	ck_assert_int_eq(look(key ^ 1, pd, RW, 0, 0), MR_KEY_MISMATCH);
	ck_assert_int_eq(look(key, pd, RA, 0, 0), MR_ACCESS);
}
END_TEST

START_TEST(test_check_names)
{
	for (int i = MR_OK; i <= MR_MW_UNBOUND; i++) {
		ck_assert_ptr_nonnull(mr_check_name(i));
		for (int j = MR_OK; j < i; j++)
			ck_assert_str_ne(mr_check_name(i), mr_check_name(j));
	}
	ck_assert_str_eq(mr_check_name(MR_MW_UNBOUND + 1), "unknown");
	ck_assert_str_eq(mr_check_name((enum mr_check)-1), "unknown");
}
END_TEST

START_TEST(test_find_local)
{
	struct mr_client *them = mr_client_new(table, 0);
	struct mr_pd *their_pd = mr_pd_alloc(them);
	struct mr *mine = reg(pd, buf, ps, 0);
	struct mr *theirs = reg(their_pd, buf + ps, ps, 0);

	ck_assert_ptr_eq(mr_find_local(client, key_of(mine)), mine);
	ck_assert_ptr_null(mr_find_local(client, key_of(theirs)));
	ck_assert_ptr_eq(mr_find_local(them, key_of(theirs)), theirs);
	ck_assert_ptr_null(mr_find_local(them, key_of(mine)));
	ck_assert_ptr_null(mr_find_local(client, key_of(mine) ^ 1));
	ck_assert_ptr_null(mr_find_local(client, UINT32_MAX));
}
END_TEST

/* ---- registration rules ---- */

START_TEST(test_reg_access_validation)
{
	static const int bad[] = {
		RW, RA, RW | RR, RA | RR, RW | RA, IBV_ACCESS_ZERO_BASED,
		IBV_ACCESS_ON_DEMAND, IBV_ACCESS_HUGETLB, IBV_ACCESS_RELAXED_ORDERING,
		LW | IBV_ACCESS_ZERO_BASED, LW | 1 << 30, -1,
	};
	static const int good[] = { 0, LW, RR, LW | RW, LW | RA, LW | RR, ALL_ACCESS,
				    IBV_ACCESS_MW_BIND, LW | IBV_ACCESS_MW_BIND };
	uint64_t iova = (uintptr_t)buf;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(try_reg(buf, ps, iova, bad[i]), -EINVAL);
	ck_assert_uint_eq(mr_table_region_count(table), 0);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct mr *mr = reg(pd, buf, ps, good[i]);

		ck_assert_int_eq(mr_access(mr), good[i]);
		mr_dereg(mr);
	}
}
END_TEST

START_TEST(test_reg_len_zero)
{
	long before = vmlck_kib();

	ck_assert_int_eq(try_reg(buf, 0, (uintptr_t)buf, LW), -EINVAL);
	assert_nothing_registered(before);
}
END_TEST

START_TEST(test_reg_iova_overflow)
{
	uint64_t last_page = 0 - (uint64_t)ps;
	long before = vmlck_kib();

	ck_assert_int_eq(try_reg(buf, ps, last_page, LW), -EINVAL);
	ck_assert_int_eq(try_reg(buf, 2 * ps, last_page - ps, LW), -EINVAL);
	ck_assert_int_eq(try_reg(buf, 2, UINT64_MAX, LW), -EINVAL);
	assert_nothing_registered(before);
}
END_TEST

START_TEST(test_reg_iova_offset_mismatch)
{
	long before = vmlck_kib();

	ck_assert_int_eq(try_reg(buf, ps, (uintptr_t)buf + 1, LW), -EINVAL);
	ck_assert_int_eq(try_reg(buf + 100, ps, 0x10000, LW), -EINVAL);
	assert_nothing_registered(before);
}
END_TEST

START_TEST(test_reg_iova_differs_from_addr)
{
	uint64_t iova = 0x40000000 + 100;
	struct mr *mr = NULL;
	size_t contiguous;

	ck_assert_int_eq(mr_reg(pd, buf + 100, ps, iova, LW, &mr), 0);
	ck_assert_uint_eq(mr_iova(mr), iova);
	ck_assert_uint_eq(mr_length(mr), ps);
	ck_assert_ptr_eq(mr_pd(mr), pd);
	ck_assert_ptr_eq(mr_host_span(mr, iova, &contiguous), buf + 100);
	ck_assert_uint_eq(contiguous, ps - 100);
	ck_assert_ptr_eq(mr_host_span(mr, iova + ps - 100, &contiguous), buf + ps);
	ck_assert_uint_eq(contiguous, 100);
	ck_assert_int_eq(look(key_of(mr), pd, 0, (uintptr_t)buf + 100, 1), MR_BOUNDS);
}
END_TEST

/* ---- pinned memory ---- */

START_TEST(test_pinned_counts_pages)
{
	struct mr *small, *straddling;

	small = reg(pd, buf, 100, 0);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), ps);
	straddling = reg(pd, buf + 2 * ps - 50, 100, 0);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 3 * ps);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 3 * ps);
	mr_dereg(small);
	mr_dereg(straddling);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 0);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 0);
}
END_TEST

START_TEST(test_client_pin_cap)
{
	struct mr_client *capped = mr_client_new(table, 2 * ps);
	struct mr_pd *cpd = mr_pd_alloc(capped);
	struct mr *mr = NULL, *a;
	long before = vmlck_kib();

	a = reg(cpd, buf, 2 * ps, 0);
	ck_assert_int_eq(mr_reg(cpd, buf + 2 * ps, 1, (uintptr_t)buf + 2 * ps, 0, &mr), -EDQUOT);
	ck_assert_ptr_null(mr);
	ck_assert_uint_eq(mr_client_pinned_bytes(capped), 2 * ps);
	ck_assert_int_eq(vmlck_kib(), before + kib(2));
	/* Another client is not bound by this one's cap. */
	reg(pd, buf + 2 * ps, ps, 0);
	mr_dereg(a);
	ck_assert_uint_eq(mr_client_pinned_bytes(capped), 0);
	reg(cpd, buf + 4 * ps, 2 * ps, 0);
}
END_TEST

START_TEST(test_table_pin_cap)
{
	struct mr_client *a, *b;
	struct mr_pd *apd, *bpd;
	struct mr *mr = NULL;
	long before = vmlck_kib();

	replace_table(MR_MAX_REGIONS, 3 * ps);
	a = mr_client_new(table, 0);
	b = mr_client_new(table, 0);
	apd = mr_pd_alloc(a);
	bpd = mr_pd_alloc(b);
	reg(apd, buf, 2 * ps, 0);
	ck_assert_int_eq(mr_reg(bpd, buf + 2 * ps, 2 * ps, (uintptr_t)buf + 2 * ps, 0, &mr),
			 -EDQUOT);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 2 * ps);
	ck_assert_int_eq(vmlck_kib(), before + kib(2));
	reg(bpd, buf + 2 * ps, ps, 0);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 3 * ps);
	mr_client_free(a);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), ps);
	mr_client_free(b);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 0);
	ck_assert_int_eq(vmlck_kib(), before);
}
END_TEST

START_TEST(test_vmlck_follows_registration)
{
	long before = vmlck_kib();
	struct mr *mr = reg(pd, buf + ps, 4 * ps, LW);

	ck_assert_int_eq(vmlck_kib(), before + kib(4));
	mr_dereg(mr);
	ck_assert_int_eq(vmlck_kib(), before);
}
END_TEST

/* munlock() does not count: deregistering one of two MRs sharing pages must leave the
 * shared pages locked for the other. */
START_TEST(test_overlapping_mrs_keep_locks)
{
	long before = vmlck_kib();
	struct mr *a = reg(pd, buf, 3 * ps, 0);
	struct mr *b = reg(pd, buf + 2 * ps + 10, 2 * ps, 0);
	struct mr *inner = reg(pd, buf + ps, 10, 0);

	ck_assert_int_eq(vmlck_kib(), before + kib(5));
	mr_dereg(a);
	ck_assert_int_eq(vmlck_kib(), before + kib(4)); /* page 0 freed; 1 inner, 2-4 b */
	mr_dereg(b);
	ck_assert_int_eq(vmlck_kib(), before + kib(1));
	mr_dereg(inner);
	ck_assert_int_eq(vmlck_kib(), before);
}
END_TEST

/* mlock() of a range with a hole fails after locking what precedes the hole. */
START_TEST(test_mlock_failure_unmapped_hole)
{
	long before = vmlck_kib();
	struct mr *other = reg(pd, buf, ps, 0);

	ck_assert_int_eq(munmap(buf + 2 * ps, ps), 0);
	ck_assert_int_eq(try_reg(buf, 4 * ps, (uintptr_t)buf, LW), -ENOMEM);
	ck_assert_uint_eq(mr_table_region_count(table), 1);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), ps);
	ck_assert_int_eq(vmlck_kib(), before + kib(1)); /* the other MR's page stays locked */
	mr_dereg(other);
	assert_nothing_registered(before);
}
END_TEST

/* Takes CAP_IPC_LOCK away from this process: without it RLIMIT_MEMLOCK applies to root. */
static bool drop_ipc_lock(void)
{
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &head, data) != 0)
		return false;
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].inheritable &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	return syscall(SYS_capset, &head, data) == 0;
}

/* Whether RLIMIT_MEMLOCK of `limit` bytes now stops an mlock() of 4 pages. */
static bool memlock_limited(rlim_t limit)
{
	struct rlimit rl = { .rlim_cur = limit, .rlim_max = limit };

	if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return false;
	/* Raw syscalls: the sanitizers' mlock() does nothing (see memreg/pin.c). */
	if (syscall(SYS_mlock, buf + 4 * ps, 4 * ps) == 0) {
		syscall(SYS_munlock, buf + 4 * ps, 4 * ps);
		return false;
	}
	return true;
}

/* Runs in a child: registration under RLIMIT_MEMLOCK of `limit` bytes must fail with
 * `want` and leave nothing behind. Exits 0 on success, SKIP_EXIT when the limit cannot be
 * made to apply, else 1 after saying why. */
static void child_mlock_limit(rlim_t limit, int want)
{
	long before = vmlck_kib();
	int err;

	if (!drop_ipc_lock() || !memlock_limited(limit))
		_exit(SKIP_EXIT);
	err = try_reg(buf, 4 * ps, (uintptr_t)buf, LW);
	if (err != want || mr_table_region_count(table) || mr_table_pinned_bytes(table) ||
	    mr_client_pinned_bytes(client) || vmlck_kib() != before) {
		fprintf(stderr, "mlock limit %lu: got %d (want %d), %u MRs, %lu pinned\n",
			(unsigned long)limit, err, want, mr_table_region_count(table),
			(unsigned long)mr_table_pinned_bytes(table));
		_exit(1);
	}
	teardown();
	exit(0); /* exit(), not _exit(): LeakSanitizer checks at exit */
}

static void run_mlock_limit(rlim_t limit, int want)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child_mlock_limit(limit, want);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == SKIP_EXIT) {
		fprintf(stderr, "SKIP: cannot drop CAP_IPC_LOCK or lower RLIMIT_MEMLOCK here; "
				"mlock limit of %lu bytes not tested\n", (unsigned long)limit);
		return;
	}
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}

START_TEST(test_mlock_failure_rlimit)
{
	run_mlock_limit(ps, -ENOMEM);
}
END_TEST

START_TEST(test_mlock_failure_rlimit_zero)
{
	run_mlock_limit(0, -EPERM);
}
END_TEST

/* ---- copies ---- */

/* A 3-page MR starting 123 bytes into a page spans 4 host pages. */
#define COPY_OFF 123

static struct mr *copy_mr(void)
{
	return reg(pd, buf + ps + COPY_OFF, 3 * ps, LW | RW | RR);
}

static void assert_canaries_except(size_t from, size_t len)
{
	for (size_t i = 0; i < BUF_PAGES * ps; i++)
		if (i < from || i >= from + len)
			ck_assert_msg((uint8_t)buf[i] == CANARY, "byte %zu changed", i);
}

START_TEST(test_copy_in_across_pages)
{
	struct mr *mr = copy_mr();
	size_t len = ps + 20;
	/* Starts 10 bytes before the MR's first page boundary and crosses the second. */
	size_t at = ps - COPY_OFF - 10;
	uint64_t va = mr_iova(mr) + at;
	char *src = malloc(len), *back = malloc(len);

	for (size_t i = 0; i < len; i++)
		src[i] = (char)(i * 7 + 1);
	ck_assert_int_eq(mr_copy_in(mr, va, src, len), 0);
	ck_assert_mem_eq(buf + ps + COPY_OFF + at, src, len);
	assert_canaries_except(ps + COPY_OFF + at, len);
	ck_assert_int_eq(mr_copy_out(mr, va, back, len), 0);
	ck_assert_mem_eq(back, src, len);
	free(src);
	free(back);
}
END_TEST

START_TEST(test_copy_whole_mr)
{
	struct mr *mr = copy_mr();
	size_t len = 3 * ps;
	char *src = malloc(len), *back = malloc(len);

	for (size_t i = 0; i < len; i++)
		src[i] = (char)(i ^ (i >> 8));
	ck_assert_int_eq(mr_copy_in(mr, mr_iova(mr), src, len), 0);
	assert_canaries_except(ps + COPY_OFF, len);
	memset(back, 0, len);
	ck_assert_int_eq(mr_copy_out(mr, mr_iova(mr), back, len), 0);
	ck_assert_mem_eq(back, src, len);
	free(src);
	free(back);
}
END_TEST

/* ---- a program polling the end of its buffer (riostream's ping-pong) ---- */

/* Each round the copy lands a message whose last byte is the round's marker; the program,
 * spinning on that byte, writes its reply there at once, as riostream does before it
 * sends. The reply must survive the copy: a copy that stores a byte twice (glibc's memcpy
 * stores 64 bytes as the same 64 bytes twice) puts the marker back over it. The race is a
 * few nanoseconds wide, so a round that loses it is rare: many rounds, for a bounded time. */
#define POLL_ROUNDS 1000000
#define POLL_SECONDS 1.5

struct poller {
	volatile uint8_t *volatile last; /* the byte the program polls */
	volatile uint32_t round;     /* the round the program is to answer (0: stop) */
	volatile uint32_t answered;  /* the last round it answered */
};

static uint8_t marker_of(uint32_t round)
{
	return (uint8_t)(2 * round);
}

static void *poll_and_reply(void *arg)
{
	struct poller *p = arg;
	uint32_t seen = 0, r;

	while ((r = p->round) != 0) {
		if (r == seen || *p->last != marker_of(r))
			continue;
		*p->last = (uint8_t)(marker_of(r) + 1);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		p->answered = seen = r;
	}
	return NULL;
}

static double seconds_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

START_TEST(test_copy_in_stores_the_last_bytes_once)
{
	static const size_t sizes[] = { 64, 32, 16, 8, 128 };
	struct mr *mr = copy_mr();
	uint64_t va = mr_iova(mr) + 256;
	struct poller p = { .last = NULL };
	uint8_t msg[128];
	double until = seconds_now() + POLL_SECONDS;
	uint32_t lost = 0, rounds = 0;
	pthread_t t;

	memset(msg, 0x5a, sizeof(msg));
	for (uint32_t r = 1; r <= POLL_ROUNDS && seconds_now() < until; r++) {
		size_t len = sizes[r % 5];

		p.last = (volatile uint8_t *)buf + ps + COPY_OFF + 256 + len - 1;
		if (r == 1) {
			p.round = 1;
			ck_assert_int_eq(pthread_create(&t, NULL, poll_and_reply, &p), 0);
		}
		*p.last = 0xff;
		p.round = r;
		msg[len - 1] = marker_of(r);
		ck_assert_int_eq(mr_copy_in(mr, va, msg, len), 0);
		while (p.answered != r)
			;
		lost += *p.last != (uint8_t)(marker_of(r) + 1);
		rounds = r;
	}
	p.round = 0;
	pthread_join(t, NULL);
	ck_assert_msg(lost == 0, "%u of %u replies written over by the copy", lost, rounds);
	ck_assert_uint_gt(rounds, 1000);
}
END_TEST

START_TEST(test_copy_out_of_range)
{
	struct mr *mr = copy_mr();
	uint64_t start = mr_iova(mr), len = mr_length(mr);
	char data[16] = "0123456789abcde";

	ck_assert_int_eq(mr_copy_in(mr, start + len - 5, data, 10), -ERANGE);
	ck_assert_int_eq(mr_copy_in(mr, start - 1, data, 2), -ERANGE);
	ck_assert_int_eq(mr_copy_in(mr, start + len, data, 1), -ERANGE);
	ck_assert_int_eq(mr_copy_in(mr, UINT64_MAX - 2, data, 10), -ERANGE);
	ck_assert_int_eq(mr_copy_in(mr, start, data, SIZE_MAX), -ERANGE);
	ck_assert_int_eq(mr_copy_out(mr, start + len - 5, data, 10), -ERANGE);
	ck_assert_int_eq(mr_copy_out(mr, start - 10, data, 11), -ERANGE);
	ck_assert_mem_eq(data, "0123456789abcde", 16);
	assert_canaries_except(0, 0);
	ck_assert_int_eq(mr_copy_in(mr, start + len - 5, data, 5), 0);
	ck_assert_int_eq(mr_copy_in(mr, UINT64_MAX, data, 0), 0);
	ck_assert_int_eq(mr_copy_out(mr, 0, data, 0), 0);
}
END_TEST

START_TEST(test_host_span)
{
	struct mr *mr = copy_mr();
	uint64_t start = mr_iova(mr), len = mr_length(mr);
	size_t contiguous = 0;

	ck_assert_ptr_eq(mr_host_span(mr, start, &contiguous), buf + ps + COPY_OFF);
	ck_assert_uint_eq(contiguous, ps - COPY_OFF);
	ck_assert_ptr_eq(mr_host_span(mr, start + ps - COPY_OFF, &contiguous), buf + 2 * ps);
	ck_assert_uint_eq(contiguous, ps);
	ck_assert_ptr_eq(mr_host_span(mr, start + len - 1, &contiguous),
			 buf + ps + COPY_OFF + len - 1);
	ck_assert_uint_eq(contiguous, 1);
	ck_assert_ptr_null(mr_host_span(mr, start - 1, &contiguous));
	ck_assert_ptr_null(mr_host_span(mr, start + len, &contiguous));
	ck_assert_ptr_null(mr_host_span(mr, UINT64_MAX, &contiguous));
	ck_assert_ptr_nonnull(mr_host_span(mr, start, NULL));
}
END_TEST

START_TEST(test_host_span_short_mr)
{
	struct mr *mr = reg(pd, buf + 10, 20, 0);
	size_t contiguous = 0;

	ck_assert_ptr_eq(mr_host_span(mr, (uintptr_t)buf + 15, &contiguous), buf + 15);
	ck_assert_uint_eq(contiguous, 15);
}
END_TEST

/* ---- fd registration ---- */

static int memfd_pages(size_t pages)
{
	int fd = memfd_create("memreg_test", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(pages * ps)), 0);
	return fd;
}

static int try_reg_fd(int fd, off_t offset, size_t len, uint64_t iova, int access)
{
	struct mr *mr = NULL;
	int err = mr_reg_fd(pd, fd, offset, len, iova, access, &mr);

	ck_assert(err != 0 || mr != NULL);
	return err;
}

START_TEST(test_reg_fd_shares_memory)
{
	int fd = memfd_pages(4);
	off_t offset = (off_t)ps + 100;
	uint64_t iova = 0x70000000 + 100;
	long before = vmlck_kib();
	struct mr *mr = NULL;
	char *view, back[6];

	ck_assert_int_eq(mr_reg_fd(pd, fd, offset, 2 * ps, iova, LW | RW, &mr), 0);
	ck_assert_int_eq(vmlck_kib(), before + kib(3));
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 3 * ps);
	view = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(view, MAP_FAILED);
	close(fd); /* the MR keeps its own mapping */
	ck_assert_int_eq(mr_copy_in(mr, iova + ps - 3, "hello", 6), 0);
	ck_assert_str_eq(view + offset + ps - 3, "hello");
	memcpy(view + offset, "world", 6);
	ck_assert_int_eq(mr_copy_out(mr, iova, back, 6), 0);
	ck_assert_str_eq(back, "world");
	ck_assert_int_eq(look(key_of(mr), pd, RW, iova, 2 * ps), MR_OK);
	mr_dereg(mr);
	ck_assert_int_eq(vmlck_kib(), before);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 0);
	munmap(view, 4 * ps);
}
END_TEST

START_TEST(test_reg_fd_to_end_of_file)
{
	int fd = memfd_pages(2);
	struct mr *mr = NULL;

	ck_assert_int_eq(mr_reg_fd(pd, fd, 10, 2 * ps - 10, 10, LW, &mr), 0);
	ck_assert_int_eq(mr_copy_in(mr, 2 * ps - 1, "z", 1), 0);
	mr_dereg(mr);
	close(fd);
}
END_TEST

START_TEST(test_reg_fd_beyond_file)
{
	int fd = memfd_pages(2);
	long before = vmlck_kib();

	ck_assert_int_eq(try_reg_fd(fd, (off_t)(3 * ps), ps, 0, LW), -EOVERFLOW);
	ck_assert_int_eq(try_reg_fd(fd, (off_t)(2 * ps), 1, 0, LW), -EOVERFLOW);
	ck_assert_int_eq(try_reg_fd(fd, 10, 2 * ps - 9, 10, LW), -EOVERFLOW);
	ck_assert_int_eq(try_reg_fd(fd, 0, 2 * ps + 1, 0, LW), -EOVERFLOW);
	assert_nothing_registered(before);
	close(fd);
}
END_TEST

START_TEST(test_reg_fd_bad_arguments)
{
	int fd = memfd_pages(2), pipefd[2];
	long before = vmlck_kib();

	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(try_reg_fd(pipefd[0], 0, ps, 0, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, -1, ps, 0, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, -(off_t)ps, ps, 0, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, (off_t)ps, SIZE_MAX - 10, 0, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, INT64_MAX - 5, 10, (INT64_MAX - 5) % ps, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, 0, 0, 0, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, 0, ps, 0, RW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(fd, 0, ps, 1, LW), -EINVAL); /* iova offset differs */
	ck_assert_int_eq(try_reg_fd(fd, 0, ps, UINT64_MAX, LW), -EINVAL);
	ck_assert_int_eq(try_reg_fd(-1, 0, ps, 0, LW), -EBADF);
	assert_nothing_registered(before);
	close(pipefd[0]);
	close(pipefd[1]);
	close(fd);
}
END_TEST

START_TEST(test_reg_fd_read_only)
{
	int fd = memfd_pages(1), ro;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(ro, 0);
	ck_assert_int_eq(try_reg_fd(ro, 0, ps, 0, LW), -EACCES);
	ck_assert_uint_eq(mr_table_region_count(table), 0);
	close(ro);
	close(fd);
}
END_TEST

/* The VmFlags line of the /proc/self/smaps entry of the mapping that starts at addr, or
 * "" when there is none. */
static void smaps_vmflags(const void *addr, char *out, size_t out_len)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in_entry = false;

	ck_assert_ptr_nonnull(f);
	*out = '\0';
	while (fgets(line, sizeof(line), f)) {
		uintptr_t start, end;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &start, &end) == 2)
			in_entry = start == (uintptr_t)addr;
		else if (in_entry && strncmp(line, "VmFlags:", 8) == 0)
			snprintf(out, out_len, "%.*s", (int)(out_len - 1), line + 8);
	}
	fclose(f);
}

/* The daemon asks for huge pages for the memory clients hand it, which the kernel grants
 * where shmem may have them on request: the mapping carries the "hg" flag. Not for a
 * registration smaller than any huge page, where the call would be spent for nothing. */
START_TEST(test_reg_fd_asks_for_huge_pages)
{
	size_t pages = ((size_t)2 << 20) / (size_t)ps;
	int fd = memfd_pages(pages);
	struct mr *mr = NULL;
	char flags[256];

	if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0) {
		fprintf(stderr, "SKIP: this kernel has no transparent huge pages\n");
		close(fd);
		return;
	}
	ck_assert_int_eq(mr_reg_fd(pd, fd, 0, pages * ps, 0, LW, &mr), 0);
	smaps_vmflags(mr_host_span(mr, 0, &(size_t){ 0 }), flags, sizeof(flags));
	ck_assert_msg(strstr(flags, " hg") != NULL, "VmFlags:%s", flags);
	mr_dereg(mr);
	ck_assert_int_eq(mr_reg_fd(pd, fd, 0, 4 * ps, 0, LW, &mr), 0);
	smaps_vmflags(mr_host_span(mr, 0, &(size_t){ 0 }), flags, sizeof(flags));
	ck_assert_msg(strstr(flags, " hg") == NULL, "VmFlags:%s", flags);
	mr_dereg(mr);
	close(fd);
}
END_TEST

/* Whether [addr, addr + len) is mapped in this process: msync says ENOMEM where not. */
static bool mapped(void *addr, size_t len)
{
	return msync(addr, len, MS_ASYNC) == 0;
}

static void *reg_fd_host(int fd, off_t offset, size_t len, uint64_t iova, struct mr **mr)
{
	ck_assert_int_eq(mr_reg_fd(pd, fd, offset, len, iova, LW | RW, mr), 0);
	return mr_host_span(*mr, iova, &(size_t){ 0 });
}

/* A deregistration unlocks the MR's mapping and keeps it; registering the same range of
 * the same file again takes it back and locks it anew, and it shows what the file holds
 * then: bytes written meanwhile, and zeros where a hole was punched. */
START_TEST(test_reg_fd_takes_back_a_kept_mapping)
{
	int fd = memfd_pages(4);
	off_t offset = (off_t)ps + 100;
	uint64_t iova = 0x70000000 + 100;
	long before = vmlck_kib();
	char *view = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	struct mr *mr;
	char *host, back[6];

	ck_assert_ptr_ne(view, MAP_FAILED);
	host = reg_fd_host(fd, offset, 2 * ps, iova, &mr);
	ck_assert_int_eq(mr_dereg(mr), 0);
	ck_assert_int_eq(vmlck_kib(), before);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 0);
	ck_assert(mapped(host - 100, 3 * ps));
	memcpy(view + offset, "again", 6);
	ck_assert_ptr_eq(reg_fd_host(fd, offset, 2 * ps, iova, &mr), host);
	ck_assert_int_eq(vmlck_kib(), before + kib(3));
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 3 * ps);
	ck_assert_int_eq(mr_copy_out(mr, iova, back, 6), 0);
	ck_assert_str_eq(back, "again");
	ck_assert_int_eq(mr_dereg(mr), 0);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
				   (off_t)(4 * ps)), 0);
	ck_assert_ptr_eq(reg_fd_host(fd, offset, 2 * ps, iova, &mr), host);
	ck_assert_int_eq(vmlck_kib(), before + kib(3));
	ck_assert_int_eq(mr_copy_out(mr, iova, back, 6), 0);
	ck_assert_mem_eq(back, "\0\0\0\0\0\0", 6);
	ck_assert_int_eq(mr_copy_in(mr, iova, "there", 6), 0);
	ck_assert_str_eq(view + offset, "there");
	mr_dereg(mr);
	munmap(view, 4 * ps);
	close(fd);
}
END_TEST

/* Only the very range of the very file: another offset, length or file maps anew. */
START_TEST(test_reg_fd_kept_mapping_only_for_its_range)
{
	int fd = memfd_pages(8), other = memfd_pages(8);
	struct mr *mr, *mr2;
	char *host;

	host = reg_fd_host(fd, (off_t)ps, ps, ps, &mr);
	mr_dereg(mr);
	ck_assert_ptr_ne(reg_fd_host(fd, (off_t)(2 * ps), ps, 2 * ps, &mr), host);
	ck_assert_ptr_ne(reg_fd_host(fd, (off_t)ps, 2 * ps, ps, &mr2), host);
	mr_dereg(mr2);
	mr_dereg(mr);
	ck_assert_ptr_ne(reg_fd_host(other, (off_t)ps, ps, ps, &mr2), host);
	ck_assert_ptr_eq(reg_fd_host(fd, (off_t)ps, ps, ps, &mr), host);
	mr_dereg(mr);
	mr_dereg(mr2);
	close(fd);
	close(other);
}
END_TEST

/* A client keeps MR_MAP_KEPT mappings, the latest, none larger than MR_MAP_KEPT_MAX_BYTES,
 * and none once it is gone. */
START_TEST(test_kept_mappings_are_bounded)
{
	size_t big = ((size_t)1 << 20) / ps + 1;
	int fd = memfd_pages(big);
	char *host[9], *large;
	struct mr *mr;

	for (unsigned i = 0; i < 9; i++) {
		host[i] = reg_fd_host(fd, (off_t)(i * ps), ps, i * ps, &mr);
		mr_dereg(mr);
	}
	ck_assert(!mapped(host[0], ps));
	for (unsigned i = 1; i < 9; i++)
		ck_assert(mapped(host[i], ps));
	large = reg_fd_host(fd, 0, big * ps, 0, &mr);
	mr_dereg(mr);
	ck_assert(!mapped(large, big * ps));
	mr_client_free(client);
	client = NULL;
	for (unsigned i = 1; i < 9; i++)
		ck_assert(!mapped(host[i], ps));
	close(fd);
}
END_TEST

/* ---- lifetimes ---- */

START_TEST(test_client_free_releases_all)
{
	struct mr_client *them = mr_client_new(table, 0);
	struct mr_pd *pd2 = mr_pd_alloc(them), *pd3 = mr_pd_alloc(them);
	long before = vmlck_kib();
	struct mr *survivor = reg(pd, buf + 6 * ps, ps, RR);
	uint32_t keys[4];
	int fd = memfd_pages(1);
	struct mr *fd_mr = NULL;

	keys[0] = key_of(reg(pd2, buf, ps, RR));
	keys[1] = key_of(reg(pd2, buf + ps, 2 * ps, RR));
	keys[2] = key_of(reg(pd3, buf + 3 * ps, 100, RR));
	ck_assert_int_eq(mr_reg_fd(pd3, fd, 0, ps, 0, RR, &fd_mr), 0);
	keys[3] = key_of(fd_mr);
	close(fd);
	ck_assert_uint_eq(mr_client_pinned_bytes(them), 5 * ps);
	ck_assert_int_eq(vmlck_kib(), before + kib(6));
	mr_client_free(them);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(look(keys[i], pd2, RR, 0, 0), MR_NO_REGION);
	ck_assert_uint_eq(mr_table_region_count(table), 1);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), ps);
	ck_assert_int_eq(vmlck_kib(), before + kib(1));
	ck_assert_int_eq(look(key_of(survivor), pd, RR, (uintptr_t)buf + 6 * ps, ps), MR_OK);
}
END_TEST

START_TEST(test_pd_dealloc_busy)
{
	struct mr_pd *p = mr_pd_alloc(client);
	struct mr *mr = reg(p, buf, ps, 0);

	ck_assert_int_eq(mr_pd_dealloc(p), -EBUSY);
	ck_assert_int_eq(look(key_of(mr), p, 0, 0, 0), MR_OK);
	mr_dereg(mr);
	ck_assert_int_eq(mr_pd_dealloc(p), 0);
	ck_assert_int_eq(mr_pd_dealloc(pd), 0);
}
END_TEST

START_TEST(test_table_free_releases_all)
{
	long before = vmlck_kib();
	struct mr_client *them = mr_client_new(table, 0);

	reg(pd, buf, 2 * ps, 0);
	reg(mr_pd_alloc(them), buf + 2 * ps, ps, 0);
	mr_pd_alloc(them);
	ck_assert_int_eq(vmlck_kib(), before + kib(3));
	mr_table_free(table);
	table = NULL;
	ck_assert_int_eq(vmlck_kib(), before);
}
END_TEST

/* 1000 one-page MRs: the daemon's own memory (beyond the 1000 pinned pages) stays small. */
START_TEST(test_thousand_mrs_memory)
{
	enum { COUNT = 1000 };
	char *pages = map_pages(COUNT);
	long before = status_kib("VmRSS");
	long own_kib;

	for (int i = 0; i < COUNT; i++)
		reg(pd, pages + (size_t)i * ps, ps, LW | RW);
	ck_assert_uint_eq(mr_table_region_count(table), COUNT);
	own_kib = status_kib("VmRSS") - before - kib(COUNT);
	ck_assert_int_lt(own_kib, 64 * 1024);
	mr_client_free(client);
	ck_assert_uint_eq(mr_table_region_count(table), 0);
	munmap(pages, COUNT * ps);
}
END_TEST

/* ---- copy.c behind a bounds check one byte too generous ---- */

/* The copy loops must stop, with an error, at a step that would move nothing, even if the
 * range check before them were wrong: copy.c is compiled a second time here, its exported
 * names changed, with such a check. Without the stop, a copy that runs one byte past the
 * MR's end spins for ever on 0-byte steps (Check's timeout fails the test). */
static bool range_one_past_end(const struct mr *mr, uint64_t va, uint64_t len)
{
	return mr_range_ok(mr, va, len - 1);
}
#define mr_range_ok range_one_past_end
#define mr_copy_in loose_copy_in
#define mr_copy_out loose_copy_out
#define mr_host_span loose_host_span
int loose_copy_in(struct mr *mr, uint64_t va, const void *src, size_t len);
int loose_copy_out(const struct mr *mr, uint64_t va, void *dst, size_t len);
void *loose_host_span(const struct mr *mr, uint64_t va, size_t *contiguous);
#include "memreg/copy.c"
#undef mr_range_ok
#undef mr_copy_in
#undef mr_copy_out
#undef mr_host_span

START_TEST(test_copy_step_of_nothing_fails)
{
	struct mr *mr = copy_mr();
	uint64_t end = mr_iova(mr) + mr_length(mr);
	char data[8] = "0123456", back[8] = "abcdefg";

	/* the MR ends inside a page, then at a page boundary (where a page walk would index
	 * one page past its table) */
	ck_assert_int_eq(loose_copy_in(mr, end - 4, data, 5), -EFAULT);
	ck_assert_mem_eq(buf + ps + COPY_OFF + 3 * ps - 4, data, 4);
	assert_canaries_except(ps + COPY_OFF + 3 * ps - 4, 4);
	ck_assert_int_eq(loose_copy_out(mr, end - 4, back, 5), -EFAULT);
	ck_assert_mem_eq(back, data, 4);
	ck_assert_int_eq(back[4], 'e');
	mr = reg(pd, buf + 5 * ps, ps, LW);
	end = mr_iova(mr) + mr_length(mr);
	ck_assert_int_eq(loose_copy_in(mr, end - 1, data, 2), -EFAULT);
	ck_assert_int_eq((uint8_t)buf[6 * ps], CANARY);
	ck_assert_int_eq(loose_copy_out(mr, end, back, 1), -EFAULT);
	ck_assert_int_eq(loose_copy_in(mr, end - 8, data, 8), 0);
}
END_TEST

static TCase *add_tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	suite_add_tcase(s, tc);
	return tc;
}

static void add_keys_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "keys");

	tcase_add_test(tc, test_key_format);
	tcase_add_test(tc, test_indices_cyclic);
	tcase_add_test(tc, test_key_bytes_random);
	tcase_add_test(tc, test_key_byte_mismatch);
	tcase_add_test(tc, test_stale_key_no_region);
	tcase_add_test(tc, test_index_beyond_table);
	tcase_add_test(tc, test_index_reuse_after_wrap);
	tcase_add_test(tc, test_table_full);
	tcase_add_test(tc, test_table_new_limits);
}

static void add_lookup_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "lookup");

	tcase_add_test(tc, test_pd_mismatch_same_client);
	tcase_add_test(tc, test_pd_mismatch_other_client);
	tcase_add_test(tc, test_null_pd_is_compared);
	tcase_add_test(tc, test_access_denied);
	tcase_add_test(tc, test_remote_read_denied);
	tcase_add_test(tc, test_local_read_always_granted);
	tcase_add_test(tc, test_check_order);
	tcase_add_test(tc, test_bounds_edges);
	tcase_add_test(tc, test_bounds_overflow);
	tcase_add_test(tc, test_bounds_top_of_iova_space);
	tcase_add_test(tc, test_zero_length_checks_no_bounds);
	tcase_add_test(tc, test_check_names);
	tcase_add_test(tc, test_find_local);
}

static void add_register_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "register");

	tcase_add_test(tc, test_reg_access_validation);
	tcase_add_test(tc, test_reg_len_zero);
	tcase_add_test(tc, test_reg_iova_overflow);
	tcase_add_test(tc, test_reg_iova_offset_mismatch);
	tcase_add_test(tc, test_reg_iova_differs_from_addr);
}

static void add_pin_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "pin");

	tcase_add_test(tc, test_pinned_counts_pages);
	tcase_add_test(tc, test_client_pin_cap);
	tcase_add_test(tc, test_table_pin_cap);
	tcase_add_test(tc, test_vmlck_follows_registration);
	tcase_add_test(tc, test_overlapping_mrs_keep_locks);
	tcase_add_test(tc, test_mlock_failure_unmapped_hole);
	tcase_add_test(tc, test_mlock_failure_rlimit);
	tcase_add_test(tc, test_mlock_failure_rlimit_zero);
}

static void add_copy_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "copy");

	tcase_add_test(tc, test_copy_in_across_pages);
	tcase_add_test(tc, test_copy_whole_mr);
	tcase_add_test(tc, test_copy_in_stores_the_last_bytes_once);
	tcase_add_test(tc, test_copy_out_of_range);
	tcase_add_test(tc, test_host_span);
	tcase_add_test(tc, test_host_span_short_mr);
	tcase_add_test(tc, test_copy_step_of_nothing_fails);
}

static void add_fd_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "fd");

	tcase_add_test(tc, test_reg_fd_shares_memory);
	tcase_add_test(tc, test_reg_fd_to_end_of_file);
	tcase_add_test(tc, test_reg_fd_beyond_file);
	tcase_add_test(tc, test_reg_fd_bad_arguments);
	tcase_add_test(tc, test_reg_fd_read_only);
	tcase_add_test(tc, test_reg_fd_asks_for_huge_pages);
	tcase_add_test(tc, test_reg_fd_takes_back_a_kept_mapping);
	tcase_add_test(tc, test_reg_fd_kept_mapping_only_for_its_range);
	tcase_add_test(tc, test_kept_mappings_are_bounded);
}

static void add_lifetime_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "lifetime");

	tcase_add_test(tc, test_client_free_releases_all);
	tcase_add_test(tc, test_pd_dealloc_busy);
	tcase_add_test(tc, test_table_free_releases_all);
	tcase_add_test(tc, test_thousand_mrs_memory);
}

/* ---- memory windows ---- */

#define BIND IBV_ACCESS_MW_BIND
#define QP_A ((const void *)&qp_tokens[0])
#define QP_B ((const void *)&qp_tokens[1])
static const char qp_tokens[2];

static struct mr_mw *alloc_mw(int type)
{
	struct mr_mw *mw = NULL;

	ck_assert_int_eq(mr_mw_alloc(pd, type, &mw), 0);
	ck_assert_ptr_nonnull(mw);
	return mw;
}

/* A bind of mw over [addr, addr + len) of mr with the next key byte; returns the new rkey
 * (or 0 when the bind failed, err set). */
static uint32_t bind_mw(struct mr_mw *mw, const struct mr *mr, uint64_t addr, uint64_t len,
			int access, const void *qp, int *err)
{
	uint32_t rkey = mr_mw_rkey(mw);
	struct mr_mw_bind b = { .mw_rkey = rkey, .new_rkey = (rkey & ~0xffu) | ((rkey + 1) & 0xff),
				.mr_lkey = mr ? mr_keys(mr).lkey : 0, .access = access,
				.addr = addr, .length = len };

	*err = mr_mw_bind(client, pd, qp, &b);
	if (*err)
		return 0;
	ck_assert_uint_eq(mr_mw_rkey(mw), b.new_rkey);
	return b.new_rkey;
}

static uint32_t bind_ok(struct mr_mw *mw, const struct mr *mr, uint64_t addr, uint64_t len,
			int access, const void *qp)
{
	int err;
	uint32_t rkey = bind_mw(mw, mr, addr, len, access, qp, &err);

	ck_assert_int_eq(err, 0);
	return rkey;
}

static enum mr_check look_remote(uint32_t key, const void *qp, int access, uint64_t va,
				 uint64_t len, uint64_t *mr_va)
{
	struct mr *out = NULL;
	uint64_t at = 0;
	enum mr_check check = mr_lookup_remote(table, key, pd, qp, access, va, len, &out, &at);

	ck_assert(check == MR_OK ? out != NULL : out == NULL);
	if (mr_va)
		*mr_va = at;
	return check;
}

START_TEST(test_mw_keys_share_mr_space)
{
	struct mr *mr = reg(pd, buf, ps, LW | BIND);
	struct mr_mw *mw1 = alloc_mw(MR_MW_TYPE_1), *mw2 = alloc_mw(MR_MW_TYPE_2);
	struct mr_mw *bad = NULL;

	ck_assert_uint_ne(mr_mw_rkey(mw1) >> 8, key_of(mr) >> 8);
	ck_assert_uint_ne(mr_mw_rkey(mw2) >> 8, mr_mw_rkey(mw1) >> 8);
	ck_assert_uint_eq(mr_table_region_count(table), 1);
	ck_assert_uint_eq(mr_table_mw_count(table), 2);
	ck_assert_int_eq(mr_mw_alloc(pd, 3, &bad), -EINVAL);
	ck_assert_int_eq(mr_mw_alloc(pd, 0, &bad), -EINVAL);
	ck_assert_ptr_null(bad);
	/* an MW's key is no MR's: lkey lookups do not find it */
	ck_assert_ptr_null(mr_find_local(client, mr_mw_rkey(mw1)));
	ck_assert_int_eq(look(mr_mw_rkey(mw1), pd, 0, 0, 0), MR_NO_REGION);
	mr_mw_dealloc(mw1);
	mr_mw_dealloc(mw2);
	ck_assert_uint_eq(mr_table_region_count(table), 1);
	ck_assert_uint_eq(mr_table_mw_count(table), 0);
}
END_TEST

/* Windows and regions fill one key space. */
START_TEST(test_mw_table_full)
{
	struct mr_mw *mw = NULL;

	replace_table(2, 0);
	reg(pd, buf, ps, 0);
	alloc_mw(MR_MW_TYPE_2);
	ck_assert_int_eq(mr_mw_alloc(pd, MR_MW_TYPE_1, &mw), -ENOSPC);
	ck_assert_int_eq(try_reg(buf + ps, ps, (uintptr_t)buf + ps, 0), -ENOSPC);
	ck_assert_uint_eq(mr_table_region_count(table), 1);
	ck_assert_uint_eq(mr_table_mw_count(table), 1);
}
END_TEST

START_TEST(test_mw_type1_bind_and_lookup)
{
	struct mr *mr = reg(pd, buf, 4 * ps, LW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_1);
	uint64_t base = (uintptr_t)buf + ps, va = 0;
	uint32_t old = mr_mw_rkey(mw);
	uint32_t rkey;

	/* valid from allocation, but with nothing in it */
	ck_assert_int_eq(look_remote(old, QP_A, RW, base, 8, NULL), MR_MW_UNBOUND);
	rkey = bind_ok(mw, mr, base, ps, RW | RR, QP_A);
	ck_assert_uint_eq(rkey >> 8, old >> 8);
	ck_assert_uint_ne(rkey, old);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base, ps, &va), MR_OK);
	ck_assert_uint_eq(va, base);
	/* type 1 belongs to the PD: any QP of it reaches it */
	ck_assert_int_eq(look_remote(rkey, QP_B, RR, base + ps - 8, 8, NULL), MR_OK);
	ck_assert_int_eq(look_remote(old, QP_A, RW, base, 8, NULL), MR_KEY_MISMATCH);
	ck_assert_int_eq(look_remote(rkey, QP_A, RA, base, 8, NULL), MR_ACCESS);
	/* the window's bounds, not the MR's */
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base - 8, 8, NULL), MR_BOUNDS);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base + ps - 4, 8, NULL), MR_BOUNDS);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base, UINT64_MAX, NULL), MR_BOUNDS);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, UINT64_MAX - 3, 8, NULL), MR_BOUNDS);
	ck_assert_int_eq(mr_lookup_remote(table, rkey, NULL, QP_A, RW, base, 8, NULL, &va),
			 MR_PD_MISMATCH);
	/* rebinding with length 0 empties it; the old key is stale */
	ck_assert_int_eq(mr_dereg(mr), -EINVAL);
	rkey = bind_ok(mw, NULL, 0, 0, 0, QP_A);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base, 8, NULL), MR_MW_UNBOUND);
	ck_assert_int_eq(mr_dereg(mr), 0);
	mr_mw_dealloc(mw);
}
END_TEST

START_TEST(test_mw_bind_refusals)
{
	struct mr *nobind = reg(pd, buf, ps, LW | RW);
	struct mr *ro = reg(pd, buf + ps, ps, BIND);
	struct mr *mr = reg(pd, buf + 2 * ps, 2 * ps, LW | BIND);
	struct mr_pd *pd2 = mr_pd_alloc(client);
	struct mr *other_pd = NULL;
	struct mr_mw *mw1 = alloc_mw(MR_MW_TYPE_1), *mw2 = alloc_mw(MR_MW_TYPE_2);
	uint64_t base = (uintptr_t)buf + 2 * ps;
	uint32_t before1 = mr_mw_rkey(mw1), before2 = mr_mw_rkey(mw2);
	struct mr_mw_bind b;
	int err;

	ck_assert_int_eq(mr_reg(pd2, buf, ps, (uintptr_t)buf, LW | BIND, &other_pd), 0);
	/* the MR must allow binding, and local write for a writable window */
	bind_mw(mw1, nobind, (uintptr_t)buf, 8, RR, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	bind_mw(mw1, ro, (uintptr_t)buf + ps, 8, RW, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_uint_ne(bind_ok(mw1, ro, (uintptr_t)buf + ps, 8, RR, QP_A), 0);
	bind_ok(mw1, NULL, 0, 0, 0, QP_A);
	/* inside the MR, by VA */
	bind_mw(mw1, mr, base - 1, 8, RR, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	bind_mw(mw1, mr, base + 2 * ps - 4, 8, RR, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	bind_mw(mw1, mr, base, UINT64_MAX, RR, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	/* type 1 is never zero-based; no access bit an MW does not take */
	bind_mw(mw1, mr, base, 8, RR | IBV_ACCESS_ZERO_BASED, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	bind_mw(mw1, mr, base, 8, RR | IBV_ACCESS_ON_DEMAND, QP_A, &err);
	ck_assert_int_eq(err, -EOPNOTSUPP);
	/* an MR of another PD; a QP of another PD */
	bind_mw(mw1, other_pd, (uintptr_t)buf, 8, RR, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	b = (struct mr_mw_bind){ .mw_rkey = mr_mw_rkey(mw1), .new_rkey = mr_mw_rkey(mw1),
				 .mr_lkey = mr_keys(mr).lkey, .access = RR, .addr = base,
				 .length = 8 };
	ck_assert_int_eq(mr_mw_bind(client, pd2, QP_A, &b), -EINVAL);
	/* a key that is not the MW's now, an lkey that is no MR */
	b.mw_rkey ^= 1;
	ck_assert_int_eq(mr_mw_bind(client, pd, QP_A, &b), -EINVAL);
	b.mw_rkey ^= 1;
	b.mr_lkey ^= 1;
	ck_assert_int_eq(mr_mw_bind(client, pd, QP_A, &b), -EINVAL);
	/* type 2: never with length 0 */
	bind_mw(mw2, NULL, 0, 0, 0, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_uint_eq(mr_mw_rkey(mw2), before2);
	(void)before1;
	mr_mw_dealloc(mw1);
	mr_mw_dealloc(mw2);
	mr_dereg(other_pd);
	ck_assert_int_eq(mr_pd_dealloc(pd2), 0);
}
END_TEST

START_TEST(test_mw_type2_qp_and_invalidate)
{
	struct mr *mr = reg(pd, buf, 2 * ps, LW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_2);
	uint64_t base = (uintptr_t)buf;
	uint32_t free_key = mr_mw_rkey(mw), rkey;
	int err;

	ck_assert_int_eq(look_remote(free_key, QP_A, RW, base, 8, NULL), MR_MW_UNBOUND);
	rkey = bind_ok(mw, mr, base, ps, RW, QP_A);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base, ps, NULL), MR_OK);
	ck_assert_int_eq(look_remote(rkey, QP_B, RW, base, 8, NULL), MR_QP_MISMATCH);
	/* bound: not again until invalidated */
	bind_mw(mw, mr, base, 8, RW, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_int_eq(mr_dereg(mr), -EINVAL);
	/* only by its QP, its PD and its key */
	ck_assert_int_eq(mr_mw_invalidate(table, rkey, pd, QP_B), -EINVAL);
	ck_assert_int_eq(mr_mw_invalidate(table, rkey ^ 1, pd, QP_A), -EINVAL);
	ck_assert_int_eq(mr_mw_invalidate(table, rkey, NULL, QP_A), -EINVAL);
	ck_assert_int_eq(mr_mw_invalidate(table, key_of(mr), pd, QP_A), -EINVAL);
	ck_assert_int_eq(mr_mw_invalidate(table, rkey, pd, QP_A), 0);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, base, 8, NULL), MR_MW_UNBOUND);
	ck_assert_int_eq(mr_dereg(mr), 0);
	mr_mw_dealloc(mw);
}
END_TEST

START_TEST(test_mw_type1_cannot_be_invalidated)
{
	struct mr *mr = reg(pd, buf, ps, LW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_1);
	uint32_t rkey = bind_ok(mw, mr, (uintptr_t)buf, ps, RR, QP_A);

	ck_assert_int_eq(mr_mw_invalidate(table, rkey, pd, QP_A), -EINVAL);
	ck_assert_int_eq(look_remote(rkey, QP_A, RR, (uintptr_t)buf, 8, NULL), MR_OK);
	mr_mw_dealloc(mw);
	ck_assert_int_eq(look_remote(rkey, QP_A, RR, (uintptr_t)buf, 8, NULL), MR_NO_REGION);
	ck_assert_int_eq(mr_dereg(mr), 0);
}
END_TEST

START_TEST(test_mw_zero_based)
{
	struct mr *mr = reg(pd, buf, 4 * ps, LW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_2);
	uint64_t va = 0;
	/* bound at an address of the MR, as verbs programs give it; the peer counts from 0 */
	uint32_t rkey = bind_ok(mw, mr, (uintptr_t)buf + ps, 2 * ps, RW | IBV_ACCESS_ZERO_BASED,
				QP_A);
	int err;

	/* offsets from the window's start, which lies ps into the MR */
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, 0, 2 * ps, &va), MR_OK);
	ck_assert_uint_eq(va, (uintptr_t)buf + ps);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, 2 * ps - 8, 8, &va), MR_OK);
	ck_assert_uint_eq(va, (uintptr_t)buf + 3 * ps - 8);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, 2 * ps - 4, 8, NULL), MR_BOUNDS);
	ck_assert_int_eq(mr_mw_invalidate(table, rkey, pd, QP_A), 0);
	/* longer than the MR, or running past its end: refused at the bind */
	bind_mw(mw, mr, (uintptr_t)buf, 5 * ps, RW | IBV_ACCESS_ZERO_BASED, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	bind_mw(mw, mr, (uintptr_t)buf + 3 * ps, 2 * ps, RW | IBV_ACCESS_ZERO_BASED, QP_A, &err);
	ck_assert_int_eq(err, -EINVAL);
	rkey = bind_ok(mw, mr, (uintptr_t)buf + 3 * ps, ps, RW | IBV_ACCESS_ZERO_BASED, QP_A);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, 0, 8, NULL), MR_OK);
	ck_assert_int_eq(look_remote(rkey, QP_A, RW, ps - 4, 8, NULL), MR_BOUNDS);
	mr_mw_dealloc(mw);
	ck_assert_int_eq(mr_dereg(mr), 0);
}
END_TEST

START_TEST(test_mw_dealloc_bound_and_forget_qp)
{
	struct mr *mr = reg(pd, buf, ps, LW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_2);
	uint32_t rkey = bind_ok(mw, mr, (uintptr_t)buf, ps, RR, QP_A);

	mr_mw_forget_qp(client, QP_A);
	ck_assert_int_eq(look_remote(rkey, QP_A, RR, (uintptr_t)buf, 8, NULL), MR_QP_MISMATCH);
	ck_assert_int_eq(mr_dereg(mr), -EINVAL);
	ck_assert_int_eq(mr_pd_dealloc(pd), -EBUSY);
	mr_mw_dealloc(mw);
	ck_assert_int_eq(look_remote(rkey, QP_A, RR, (uintptr_t)buf, 8, NULL), MR_NO_REGION);
	ck_assert_int_eq(mr_dereg(mr), 0);
}
END_TEST

START_TEST(test_mw_client_free_with_bound)
{
	struct mr *mr = reg(pd, buf, ps, LW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_1);
	long before = vmlck_kib();

	bind_ok(mw, mr, (uintptr_t)buf, ps, RR, QP_A);
	mr_client_free(client);
	client = NULL;
	ck_assert_uint_eq(mr_table_region_count(table), 0);
	ck_assert_uint_eq(mr_table_mw_count(table), 0);
	ck_assert_uint_eq(mr_table_pinned_bytes(table), 0);
	ck_assert_int_eq(vmlck_kib(), before - kib(1));
	client = mr_client_new(table, 0);
	pd = mr_pd_alloc(client);
}
END_TEST

static void add_mw_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "mw");

	tcase_add_test(tc, test_mw_keys_share_mr_space);
	tcase_add_test(tc, test_mw_table_full);
	tcase_add_test(tc, test_mw_type1_bind_and_lookup);
	tcase_add_test(tc, test_mw_bind_refusals);
	tcase_add_test(tc, test_mw_type2_qp_and_invalidate);
	tcase_add_test(tc, test_mw_type1_cannot_be_invalidated);
	tcase_add_test(tc, test_mw_zero_based);
	tcase_add_test(tc, test_mw_dealloc_bound_and_forget_qp);
	tcase_add_test(tc, test_mw_client_free_with_bound);
}

/* ---- re-registration ---- */

#define MOVE IBV_REREG_MR_CHANGE_TRANSLATION
#define NEW_PD IBV_REREG_MR_CHANGE_PD
#define NEW_ACCESS IBV_REREG_MR_CHANGE_ACCESS

/* A re-registration of mr onto [addr, addr + len) with iova == addr, as ibv_rereg_mr. */
static int rereg(struct mr *mr, int flags, struct mr_pd *p, int access, void *addr,
		 size_t len)
{
	struct mr_rereg req = { .flags = flags, .pd = p, .access = access, .len = len,
				.iova = (uintptr_t)addr };

	return mr_rereg(mr, &req, addr);
}

/* What a failed re-registration must leave: mr as registered over [addr, addr + len). */
static void assert_unchanged(struct mr *mr, uint32_t key, void *addr, size_t len, int access,
			     long vmlck)
{
	ck_assert_uint_eq(key_of(mr), key);
	ck_assert_uint_eq(mr_iova(mr), (uintptr_t)addr);
	ck_assert_uint_eq(mr_length(mr), len);
	ck_assert_int_eq(mr_access(mr), access);
	ck_assert_ptr_eq(mr_pd(mr), pd);
	ck_assert_int_eq(look(key, pd, access & ~LW, (uintptr_t)addr, len), MR_OK);
	ck_assert_int_eq(vmlck_kib(), vmlck);
}

START_TEST(test_rereg_translation)
{
	long before = vmlck_kib();
	struct mr *mr = reg(pd, buf, 2 * ps, LW | RW);
	uint32_t key = key_of(mr);
	char back[6];

	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + 4 * ps + 8, ps), 0);
	ck_assert_uint_eq(key_of(mr), key); /* keys stay, as mlx5's */
	ck_assert_uint_eq(mr_iova(mr), (uintptr_t)buf + 4 * ps + 8);
	ck_assert_uint_eq(mr_length(mr), ps);
	ck_assert_int_eq(mr_access(mr), LW | RW);
	ck_assert_int_eq(vmlck_kib(), before + kib(2)); /* old 2 pages out, new 2 in */
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 2 * ps);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf, 1), MR_BOUNDS);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf + 4 * ps + 8, ps), MR_OK);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf + 4 * ps + 8, ps + 1), MR_BOUNDS);
	ck_assert_int_eq(mr_copy_in(mr, (uintptr_t)buf + 5 * ps, "hello", 6), 0);
	ck_assert_str_eq(buf + 5 * ps, "hello");
	ck_assert_int_eq(mr_copy_out(mr, (uintptr_t)buf + 5 * ps, back, 6), 0);
	ck_assert_str_eq(back, "hello");
	for (size_t i = 0; i < 4 * ps; i++)
		ck_assert_int_eq((uint8_t)buf[i], CANARY);
	mr_dereg(mr);
	ck_assert_int_eq(vmlck_kib(), before);
	ck_assert_uint_eq(mr_client_pinned_bytes(client), 0);
}
END_TEST

/* The pages the old and the new span share stay locked, and so do those another MR holds. */
START_TEST(test_rereg_translation_keeps_shared_locks)
{
	long before = vmlck_kib();
	struct mr *mr = reg(pd, buf, 3 * ps, LW);
	struct mr *other = reg(pd, buf, 10, 0);

	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + ps, 3 * ps), 0);
	ck_assert_int_eq(vmlck_kib(), before + kib(4)); /* page 0 (other), 1-3 (mr) */
	mr_dereg(other);
	ck_assert_int_eq(vmlck_kib(), before + kib(3));
	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + 3 * ps, ps), 0);
	ck_assert_int_eq(vmlck_kib(), before + kib(1));
	mr_dereg(mr);
	ck_assert_int_eq(vmlck_kib(), before);
}
END_TEST

START_TEST(test_rereg_pd)
{
	struct mr_pd *other_pd = mr_pd_alloc(client);
	struct mr *mr = reg(pd, buf, ps, LW | RW);
	uint32_t key = key_of(mr);

	ck_assert_int_eq(rereg(mr, NEW_PD, other_pd, 0, NULL, 0), 0);
	ck_assert_ptr_eq(mr_pd(mr), other_pd);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf, 1), MR_PD_MISMATCH);
	ck_assert_int_eq(look(key, other_pd, RW, (uintptr_t)buf, 1), MR_OK);
	ck_assert_ptr_eq(mr_find_local(client, key), mr);
	/* the MR moved: its old PD is free, its new one busy */
	ck_assert_int_eq(mr_pd_dealloc(other_pd), -EBUSY);
	ck_assert_int_eq(rereg(mr, NEW_PD, pd, 0, NULL, 0), 0);
	ck_assert_int_eq(mr_pd_dealloc(other_pd), 0);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf, 1), MR_OK);
}
END_TEST

START_TEST(test_rereg_access)
{
	struct mr *mr = reg(pd, buf, ps, LW);
	uint32_t key = key_of(mr);

	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf, 1), MR_ACCESS);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS, NULL, LW | RW | RR, NULL, 0), 0);
	ck_assert_int_eq(look(key, pd, RW | RR, (uintptr_t)buf, 1), MR_OK);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS, NULL, LW, NULL, 0), 0);
	ck_assert_int_eq(look(key, pd, RW, (uintptr_t)buf, 1), MR_ACCESS);
	ck_assert_int_eq(look(key, pd, RR, (uintptr_t)buf, 1), MR_ACCESS);
	ck_assert_int_eq(look(key, pd, LW, (uintptr_t)buf, 1), MR_OK);
}
END_TEST

START_TEST(test_rereg_all_at_once)
{
	struct mr_pd *other_pd = mr_pd_alloc(client);
	long before = vmlck_kib();
	struct mr *mr = reg(pd, buf, ps, LW);
	uint32_t key = key_of(mr);

	ck_assert_int_eq(rereg(mr, MOVE | NEW_PD | NEW_ACCESS, other_pd, LW | RR,
			       buf + 2 * ps, 2 * ps), 0);
	ck_assert_uint_eq(key_of(mr), key);
	ck_assert_int_eq(look(key, other_pd, RR, (uintptr_t)buf + 2 * ps, 2 * ps), MR_OK);
	ck_assert_int_eq(look(key, pd, RR, (uintptr_t)buf + 2 * ps, 1), MR_PD_MISMATCH);
	ck_assert_int_eq(look(key, other_pd, RR, (uintptr_t)buf, 1), MR_BOUNDS);
	ck_assert_int_eq(vmlck_kib(), before + kib(2));
}
END_TEST

/* Every refusal leaves the MR exactly as it was: keys, range, access, PD, locks. */
START_TEST(test_rereg_refusals)
{
	struct mr_client *stranger = mr_client_new(table, 0);
	struct mr_pd *stranger_pd = mr_pd_alloc(stranger);
	struct mr *mr = reg(pd, buf, 2 * ps, LW | RW);
	uint32_t key = key_of(mr);
	struct mr_rereg odd = { .flags = MOVE, .len = ps, .iova = (uintptr_t)buf + 4 * ps + 1 };
	long vmlck = vmlck_kib();

	ck_assert_int_eq(rereg(mr, 0, NULL, 0, NULL, 0), -EINVAL);
	ck_assert_int_eq(rereg(mr, 8, NULL, 0, NULL, 0), -EOPNOTSUPP);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS | 16, NULL, LW, NULL, 0), -EOPNOTSUPP);
	ck_assert_int_eq(rereg(mr, NEW_PD, stranger_pd, 0, NULL, 0), -EINVAL);
	ck_assert_int_eq(rereg(mr, NEW_PD, NULL, 0, NULL, 0), -EINVAL);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS, NULL, RW, NULL, 0), -EINVAL);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS, NULL, LW | IBV_ACCESS_ON_DEMAND, NULL, 0),
			 -EINVAL);
	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + 4 * ps, 0), -EINVAL);
	ck_assert_int_eq(mr_rereg(mr, &odd, buf + 4 * ps), -EINVAL);
	/* a bad part spoils the whole: the good PD change is not made either */
	ck_assert_int_eq(rereg(mr, MOVE | NEW_PD, pd, 0, buf + 4 * ps, 0), -EINVAL);
	assert_unchanged(mr, key, buf, 2 * ps, LW | RW, vmlck);
}
END_TEST

START_TEST(test_rereg_pin_cap)
{
	struct mr_client *capped = mr_client_new(table, 3 * ps);
	struct mr_pd *cpd = mr_pd_alloc(capped);
	struct mr *mr = reg(cpd, buf, 2 * ps, LW);
	long vmlck = vmlck_kib();

	/* 3 pages fit once the old 2 are given back, 4 do not */
	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + 4 * ps, 4 * ps), -EDQUOT);
	ck_assert_int_eq(vmlck_kib(), vmlck);
	ck_assert_uint_eq(mr_length(mr), 2 * ps);
	ck_assert_uint_eq(mr_client_pinned_bytes(capped), 2 * ps);
	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + 4 * ps, 3 * ps), 0);
	ck_assert_uint_eq(mr_client_pinned_bytes(capped), 3 * ps);
	ck_assert_int_eq(vmlck_kib(), vmlck + kib(1));
}
END_TEST

/* mlock() failing on a hole in the new span: the old translation stays, pinned. */
START_TEST(test_rereg_mlock_failure_keeps_old)
{
	char *hole = map_pages(3);
	struct mr *mr = reg(pd, buf, ps, LW | RW);
	uint32_t key = key_of(mr);
	long vmlck = vmlck_kib();

	ck_assert_int_eq(munmap(hole + ps, ps), 0);
	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, hole, 3 * ps), -ENOMEM);
	assert_unchanged(mr, key, buf, ps, LW | RW, vmlck);
	munmap(hole, ps);
	munmap(hole + 2 * ps, ps);
}
END_TEST

/* A bound window was checked against the MR's PD, access and range: no change under it. */
START_TEST(test_rereg_busy_with_window)
{
	struct mr *mr = reg(pd, buf, 2 * ps, LW | RW | BIND);
	struct mr_mw *mw = alloc_mw(MR_MW_TYPE_1);
	uint32_t key = key_of(mr);
	long vmlck = vmlck_kib();

	bind_ok(mw, mr, (uintptr_t)buf, ps, RW, QP_A);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS, NULL, LW, NULL, 0), -EBUSY);
	ck_assert_int_eq(rereg(mr, MOVE, NULL, 0, buf + 4 * ps, ps), -EBUSY);
	assert_unchanged(mr, key, buf, 2 * ps, LW | RW | BIND, vmlck);
	mr_mw_dealloc(mw);
	ck_assert_int_eq(rereg(mr, NEW_ACCESS, NULL, LW, NULL, 0), 0);
}
END_TEST

START_TEST(test_rereg_fd)
{
	int fd_a = memfd_pages(2), fd_b = memfd_pages(4);
	uint64_t iova = 0x40000000;
	long before = vmlck_kib();
	struct mr_rereg req = { .flags = MOVE, .len = 2 * ps, .iova = iova + ps };
	struct mr_rereg access_only = { .flags = NEW_ACCESS, .access = LW };
	struct mr *mr = NULL;
	char *view;

	ck_assert_int_eq(mr_reg_fd(pd, fd_a, 0, 2 * ps, iova, LW | RW, &mr), 0);
	ck_assert_int_eq(mr_rereg_fd(mr, &req, fd_b, (off_t)ps), 0);
	ck_assert_int_eq(vmlck_kib(), before + kib(2));
	view = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd_b, 0);
	ck_assert_ptr_ne(view, MAP_FAILED);
	ck_assert_int_eq(mr_copy_in(mr, iova + ps, "moved", 6), 0);
	ck_assert_str_eq(view + ps, "moved");
	ck_assert_int_eq(look(key_of(mr), pd, RW, iova, 1), MR_BOUNDS);
	/* beyond fd_b's end: refused, the mapping of fd_b kept */
	req.len = 4 * ps;
	ck_assert_int_eq(mr_rereg_fd(mr, &req, fd_b, (off_t)ps), -EOVERFLOW);
	ck_assert_int_eq(mr_copy_out(mr, iova + ps, view, 6), 0);
	ck_assert_int_eq(mr_rereg_fd(mr, &access_only, -1, 0), 0);
	ck_assert_int_eq(look(key_of(mr), pd, RW, iova + ps, 1), MR_ACCESS);
	mr_dereg(mr);
	ck_assert_int_eq(vmlck_kib(), before);
	munmap(view, 4 * ps);
	close(fd_a);
	close(fd_b);
}
END_TEST

/* FLUSH rights: global visibility an MR may grant (and a lookup asks for), persistence
 * not: no rocemu memory is persistent, as rxe refuses it for memory that is not pmem. */
START_TEST(test_flush_access)
{
	struct mr *plain = reg(pd, buf, ps, LW | RW);
	struct mr *flushable = reg(pd, buf + ps, ps, LW | RW | MR_ACCESS_FLUSH_GLOBAL);
	long vmlck = vmlck_kib();

	ck_assert_int_eq(look(key_of(flushable), pd, MR_ACCESS_FLUSH_GLOBAL, (uintptr_t)buf + ps,
			      ps), MR_OK);
	ck_assert_int_eq(look(key_of(plain), pd, MR_ACCESS_FLUSH_GLOBAL, (uintptr_t)buf, 1),
			 MR_ACCESS);
	ck_assert_int_eq(look(key_of(flushable), pd, MR_ACCESS_FLUSH_PERSISTENT,
			      (uintptr_t)buf + ps, 1), MR_ACCESS);
	ck_assert_int_eq(try_reg(buf + 2 * ps, ps, (uintptr_t)buf + 2 * ps,
				 LW | MR_ACCESS_FLUSH_PERSISTENT), -EINVAL);
	ck_assert_int_eq(rereg(plain, NEW_ACCESS, NULL, LW | MR_ACCESS_FLUSH_PERSISTENT, NULL, 0),
			 -EINVAL);
	ck_assert_int_eq(vmlck_kib(), vmlck);
	ck_assert_int_eq(rereg(plain, NEW_ACCESS, NULL, LW | MR_ACCESS_FLUSH_GLOBAL, NULL, 0), 0);
	ck_assert_int_eq(look(key_of(plain), pd, MR_ACCESS_FLUSH_GLOBAL, (uintptr_t)buf, 1), MR_OK);
}
END_TEST

static void add_rereg_tests(Suite *s)
{
	TCase *tc = add_tcase(s, "rereg");

	tcase_add_test(tc, test_rereg_translation);
	tcase_add_test(tc, test_rereg_translation_keeps_shared_locks);
	tcase_add_test(tc, test_rereg_pd);
	tcase_add_test(tc, test_rereg_access);
	tcase_add_test(tc, test_rereg_all_at_once);
	tcase_add_test(tc, test_rereg_refusals);
	tcase_add_test(tc, test_rereg_pin_cap);
	tcase_add_test(tc, test_rereg_mlock_failure_keeps_old);
	tcase_add_test(tc, test_rereg_busy_with_window);
	tcase_add_test(tc, test_rereg_fd);
	tcase_add_test(tc, test_flush_access);
}

static Suite *memreg_suite(void)
{
	Suite *s = suite_create("memreg");

	add_keys_tests(s);
	add_lookup_tests(s);
	add_register_tests(s);
	add_pin_tests(s);
	add_copy_tests(s);
	add_fd_tests(s);
	add_lifetime_tests(s);
	add_mw_tests(s);
	add_rereg_tests(s);
	return s;
}

int main(void)
{
	SRunner *runner = srunner_create(memreg_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
