/*
 * check.h — the assertions of the C tests (native/tests/test_*.c).
 *
 * CHECK(cond, fmt, ...) counts a check and, when cond is false, prints the
 * file, line, condition and the formatted detail and counts a failure; the
 * test continues so one run reports every failure. Both counters are
 * updated atomically: some tests check from several threads. A test's main
 * returns nonzero when `failures` is nonzero.
 */
#ifndef ORBITKV_TESTS_CHECK_H
#define ORBITKV_TESTS_CHECK_H

#include <dirent.h>
#include <stdio.h>

static int failures;
static int checks;

#define CHECK(cond, ...)                                                            \
	do {                                                                        \
		__atomic_fetch_add(&checks, 1, __ATOMIC_SEQ_CST);                   \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, \
				#cond);                                             \
			fprintf(stderr, __VA_ARGS__);                               \
			fputc('\n', stderr);                                        \
			__atomic_fetch_add(&failures, 1, __ATOMIC_SEQ_CST);         \
		}                                                                   \
	} while (0)

/** Open file descriptors of this process (entries of /proc/self/fd, counting
 *  the directory's own), or -1; tests compare it before and after to find
 *  leaks. */
static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

#endif /* ORBITKV_TESTS_CHECK_H */
