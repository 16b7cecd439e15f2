/*
 * dumpable.c — the engine process's dumpable attribute (docs/security.md
 * "Engine processes are not dumpable").
 *
 * An engine's KV buffers and session memfds are reachable, read-write,
 * through /proc/<engine>/fd by any process that passes the kernel's
 * PTRACE_MODE_READ check on the engine; for a dumpable process that is
 * every process of the same uid (Yama's ptrace_scope restricts attach
 * only, not /proc/<pid>/fd). A process that is not dumpable has its
 * /proc/<pid> entries owned by root, so only a holder of CAP_SYS_PTRACE
 * passes. liborbitkv therefore clears the attribute before it creates or
 * receives such an fd: in okv_connect and okv_buffer_alloc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "client_internal.h"

int okvi_drop_dumpable(char *err, size_t errlen)
{
	const char *v = getenv(OKVI_DUMPABLE_ENV);
	if (v && strcmp(v, "1") == 0)
		return 0;
	if (v && v[0] != '\0' && strcmp(v, "0") != 0) {
		if (err && errlen)
			snprintf(err, errlen,
				 "%s is \"%.32s\": want 0 or 1 (unset, empty or 0: liborbitkv makes this process "
				 "non-dumpable; 1: it leaves the attribute as it is)",
				 OKVI_DUMPABLE_ENV, v);
		return -EINVAL;
	}
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
		int e = errno;
		if (err && errlen)
			snprintf(err, errlen, "prctl(PR_SET_DUMPABLE, 0): %s", strerror(e));
		return -e;
	}
	return 0;
}
