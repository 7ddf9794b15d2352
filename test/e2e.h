/* What the end-to-end programs (test/NAME_e2e.c) share: the one line each case prints, the
 * clock their waits are measured by, and the pipes to the children they fork.
 *
 * A case's line gathers what it saw: notes joined by "; ", and failures, which add
 * "KIND: what" and mark the case failed. e2e_report prints "NAME: OK|FAIL: line", the way
 * the shell tests read it, and starts the next case afresh. */
#ifndef ROCEMU_TEST_E2E_H
#define ROCEMU_TEST_E2E_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Adds what was seen to the case's line. */
void e2e_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Not what the case expects ("MISMATCH: "); returns false, so checks can end with
 * `return e2e_mismatch(...)`. */
bool e2e_mismatch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A call that should have worked did not ("ERROR: "). */
void e2e_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A wait ran out ("TIMEOUT: "). */
void e2e_timeout(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

bool e2e_case_failed(void);
/* The case's line so far ("" when nothing was noted). */
const char *e2e_line(void);
/* Forgets the case's line and verdict. */
void e2e_reset(void);
/* Prints "NAME: OK|FAIL: line", with quiet in place of a line that is empty, then
 * e2e_reset(); returns 1 when the case failed, 0 when it matched. */
int e2e_report(const char *name, const char *quiet);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t e2e_now_ms(void);

/* Whether the daemon's counter of this name follows its own scheduling (a doorbell that
 * woke it, a post found polling, a wakeup written): it moves with timing, not with what a
 * frame did, so the cases' exact counter checks leave it out. */
bool e2e_timing_counter(const char *name);

/* The pipes between a program and the child it forks: all of len bytes, or -1 (an error or
 * EOF; for e2e_read_full also timeout_ms gone by). */
int e2e_write_full(int fd, const void *buf, size_t len);
int e2e_read_full(int fd, void *buf, size_t len, int timeout_ms);

#endif
