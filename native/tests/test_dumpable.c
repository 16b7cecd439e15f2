/*
 * test_dumpable.c — liborbitkv makes its process non-dumpable
 * (native/src/dumpable.c; docs/security.md "Engine processes are not
 * dumpable"): okv_buffer_alloc clears the attribute before the memfd
 * exists; ORBITKV_DUMPABLE=1 leaves it; another value fails okv_buffer_alloc
 * and okv_connect_err (naming the variable) without touching it. The
 * attribute as /proc enforces it against a second process of the same uid
 * is tested in python/tests/test_dumpable.py. Standalone: prints each
 * failed check, exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "orbitkv/client.h"
#include "check.h"

static int dumpable(void)
{
	return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

static void alloc_with(const char *env, int want_rc, int want_dumpable)
{
	if (env)
		setenv("ORBITKV_DUMPABLE", env, 1);
	else
		unsetenv("ORBITKV_DUMPABLE");
	CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0 && dumpable() == 1, "making the process dumpable first");
	struct okv_buffer b;
	int rc = okv_buffer_alloc(1, 4096, 2, &b);
	CHECK(rc == want_rc, "ORBITKV_DUMPABLE=%s: okv_buffer_alloc returned %d, want %d", env ? env : "(unset)", rc,
	      want_rc);
	CHECK(dumpable() == want_dumpable, "ORBITKV_DUMPABLE=%s: PR_GET_DUMPABLE %d after okv_buffer_alloc, want %d",
	      env ? env : "(unset)", dumpable(), want_dumpable);
	if (rc == 0)
		okv_buffer_free(&b);
	else
		CHECK(b.fd == -1, "a refused okv_buffer_alloc leaves fd -1, got %d", b.fd);
}

int main(void)
{
	alloc_with(NULL, 0, 0);
	alloc_with("", 0, 0);
	alloc_with("0", 0, 0);
	alloc_with("1", 0, 1);
	alloc_with("yes", -EINVAL, 1);
	alloc_with("10", -EINVAL, 1);

	/* okv_connect_err refuses the value before it connects anywhere. */
	setenv("ORBITKV_DUMPABLE", "yes", 1);
	struct okv_connect_options o = { .socket_path = "/nonexistent/orbitkv.sock" };
	okv_client *c = NULL;
	char err[512];
	int rc = okv_connect_err(&o, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && c == NULL, "okv_connect_err with ORBITKV_DUMPABLE=yes returned %d, want -EINVAL", rc);
	CHECK(strstr(err, "ORBITKV_DUMPABLE is \"yes\"") && strstr(err, "want 0 or 1"), "error text: %s", err);
	CHECK(dumpable() == 1, "a refused connect left PR_GET_DUMPABLE %d", dumpable());

	/* Unset: the connect clears the attribute first, then fails to connect. */
	unsetenv("ORBITKV_DUMPABLE");
	rc = okv_connect_err(&o, &c, err, sizeof(err));
	CHECK(rc == -ENOENT, "okv_connect_err to a missing socket returned %d, want -ENOENT", rc);
	CHECK(dumpable() == 0, "okv_connect left PR_GET_DUMPABLE %d, want 0", dumpable());

	printf("test_dumpable: %d checks, %d failures\n", checks, failures);
	return failures != 0;
}
