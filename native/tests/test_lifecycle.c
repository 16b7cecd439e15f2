/*
 * test_lifecycle.c — tests of native/src/lifecycle.c and native/src/errors.c:
 * hello encode and reply checks, frame header checks (each bad field), frame
 * send/recv over a real AF_UNIX socketpair (fds, timeouts, truncation,
 * oversize bodies), the RegisterInstance / Health / Unregister round trips
 * against replies written by the test as the Manager, okv_socket_path and
 * okv_strerror. Standalone: prints each failed check, exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/lifecycle.h"
#include "../src/proto/lifecycle.pb-c.h"
#include "check.h"

#define EPOCH 0x1122334455667788ull

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		perror("socketpair");
		exit(2);
	}
}

static void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w <= 0) {
			perror("write");
			exit(2);
		}
		p += w;
		n -= (size_t)w;
	}
}

/* ------------------------------------------------------------------------ */

static void test_hello_encode(void)
{
	struct okv_hello h;
	char id65[66];

	CHECK(okvi_hello_encode(&h, 1234, OKV_ROLE_WORKER, "vllm-0/tp1") == 0, "valid hello");
	CHECK(h.magic == OKV_BOOTSTRAP_MAGIC && h.protocol_version == OKV_BOOTSTRAP_VERSION &&
		      h.abi_version == OKV_ABI_VERSION && h.pid == 1234 && h.role == OKV_ROLE_WORKER,
	      "header fields");
	CHECK(memcmp(h.instance_id, "vllm-0/tp1", 11) == 0 && h.instance_id[63] == 0, "id NUL-padded");
	CHECK(h.reserved[0] == 0 && h.reserved[1] == 0, "reserved zeroed");

	memset(id65, 'a', sizeof(id65));
	id65[64] = '\0';
	CHECK(okvi_hello_encode(&h, 1, 0, id65) == 0, "64-byte id accepted");
	CHECK(memcmp(h.instance_id, id65, 64) == 0, "64-byte id copied without NUL");
	id65[64] = 'a';
	id65[65] = '\0';
	CHECK(okvi_hello_encode(&h, 1, 0, id65) == -EINVAL, "65-byte id refused");
	CHECK(okvi_hello_encode(&h, 1, OKV_ROLE_MAX + 1, "x") == -EINVAL, "role above OKV_ROLE_MAX refused");
	CHECK(okvi_hello_encode(&h, 1, 0, NULL) == 0 && h.instance_id[0] == 0, "NULL id is empty");
}

static struct okv_hello_reply good_reply(void)
{
	struct okv_hello_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = OKV_BOOTSTRAP_MAGIC;
	r.protocol_version = OKV_BOOTSTRAP_VERSION;
	r.status = OKV_BOOT_OK;
	r.epoch = EPOCH;
	r.client_token = 99;
	r.initial_generation = 1;
	r.slot_index = 3;
	r.desc_offset = OKV_SLOT_DESC_OFFSET;
	r.desc_capacity = OKV_DEFAULT_DESC_CAPACITY;
	r.slot_bytes = OKV_SLOT_DESC_OFFSET + OKV_DEFAULT_DESC_CAPACITY;
	r.max_frame_body = OKV_FRAME_MAX_BODY;
	r.manager_pid = 42;
	r.max_sessions = 64;
	return r;
}

static void set_status_full(struct okv_hello_reply *r)
{
	r->status = OKV_BOOT_FULL;
	strcpy(r->error, "no free slot: 64 sessions of limit 64");
}
static void set_magic(struct okv_hello_reply *r) { r->magic = OKV_MSG_MAGIC; }
static void set_version(struct okv_hello_reply *r) { r->protocol_version = 1; }
static void set_status_unknown(struct okv_hello_reply *r) { r->status = OKV_BOOT_MAX + 1; }
static void set_error_unterminated(struct okv_hello_reply *r) { memset(r->error, 'x', sizeof(r->error)); }
static void set_refused_unterminated(struct okv_hello_reply *r)
{
	r->status = OKV_BOOT_INTERNAL;
	memset(r->error, 'x', sizeof(r->error));
}
static void set_epoch0(struct okv_hello_reply *r) { r->epoch = 0; }
static void set_gen_even(struct okv_hello_reply *r) { r->initial_generation = 2; }
static void set_desc_offset(struct okv_hello_reply *r)
{
	r->desc_offset = 8192;
	r->slot_bytes = 8192 + r->desc_capacity;
}
static void set_cap0(struct okv_hello_reply *r)
{
	r->desc_capacity = 0;
	r->slot_bytes = OKV_SLOT_DESC_OFFSET;
}
static void set_cap_big(struct okv_hello_reply *r)
{
	r->desc_capacity = OKVI_MAX_DESC_CAPACITY + 1;
	r->slot_bytes = OKV_SLOT_DESC_OFFSET + OKVI_MAX_DESC_CAPACITY + 1;
}
static void set_cap_max(struct okv_hello_reply *r)
{
	r->desc_capacity = OKVI_MAX_DESC_CAPACITY;
	r->slot_bytes = OKV_SLOT_DESC_OFFSET + OKVI_MAX_DESC_CAPACITY;
}
static void set_slot_bytes(struct okv_hello_reply *r) { r->slot_bytes += 1; }
static void set_slot_bytes_wrap(struct okv_hello_reply *r)
{
	/* desc_offset + desc_capacity computed in 32 bits would wrap to this. */
	r->desc_capacity = 0xFFFFFFFFu;
	r->slot_bytes = OKV_SLOT_DESC_OFFSET - 1;
}
static void set_max_sessions(struct okv_hello_reply *r) { r->max_sessions = OKV_MAX_SESSIONS + 1; }
static void set_slot_index(struct okv_hello_reply *r) { r->slot_index = r->max_sessions; }
static void set_control_slot(struct okv_hello_reply *r)
{
	r->max_sessions = OKV_MAX_SESSIONS;
	r->slot_index = OKV_CONTROL_SLOT;
}
static void set_max_frame(struct okv_hello_reply *r) { r->max_frame_body = 1024; }
static void set_pid0(struct okv_hello_reply *r) { r->manager_pid = 0; }
static void set_nothing(struct okv_hello_reply *r) { (void)r; }
static void set_ext_bytes_odd(struct okv_hello_reply *r) { r->ext_bytes = 12; }
static void set_ext_bytes_big(struct okv_hello_reply *r) { r->ext_bytes = OKV_BOOT_EXT_MAX_BYTES + 8; }
static void set_ext_fds_big(struct okv_hello_reply *r) { r->ext_fds = OKV_BOOT_EXT_MAX_FDS + 1; }
static void set_ext_max(struct okv_hello_reply *r)
{
	r->ext_bytes = OKV_BOOT_EXT_MAX_BYTES;
	r->ext_fds = OKV_BOOT_EXT_MAX_FDS;
}

static void test_hello_reply_check(void)
{
	static const struct {
		const char *name;
		void (*mutate)(struct okv_hello_reply *);
		int want;
		const char *want_err;
	} cases[] = {
		{ "a valid reply is accepted", set_nothing, 0, NULL },
		{ "a 64 MiB descriptor area is accepted", set_cap_max, 0, NULL },
		{ "a refusal returns the reply's text", set_status_full, OKV_EREFUSED,
		  "hello refused (FULL): no free slot: 64 sessions of limit 64" },
		{ "a wrong magic is a protocol error", set_magic, OKV_EPROTO, "magic 0x31564b4f differs" },
		{ "a wrong version is a version error", set_version, OKV_EVERSION, "protocol_version 1 differs from 3" },
		{ "an unknown status is a protocol error", set_status_unknown, OKV_EPROTO, "status 6 exceeds limit 5" },
		{ "an unterminated error text is a protocol error", set_error_unterminated, OKV_EPROTO,
		  "error text not NUL-terminated within 128 bytes" },
		{ "a refusal with unterminated text is a protocol error", set_refused_unterminated, OKV_EPROTO,
		  "error text not NUL-terminated" },
		{ "epoch zero is refused", set_epoch0, OKV_EPROTO, "epoch is 0" },
		{ "an even initial generation is refused", set_gen_even, OKV_EPROTO, "initial_generation 2 is even" },
		{ "another desc_offset is refused", set_desc_offset, OKV_EPROTO, "desc_offset 8192 differs from 4096" },
		{ "a zero desc_capacity is refused", set_cap0, OKV_EPROTO, "desc_capacity 0 outside 1..67108864" },
		{ "a desc_capacity over 64 MiB is refused", set_cap_big, OKV_EPROTO, "desc_capacity 67108865 outside" },
		{ "slot_bytes other than offset + capacity is refused", set_slot_bytes, OKV_EPROTO,
		  "slot_bytes 266241 differs from desc_offset + desc_capacity = 266240" },
		{ "slot_bytes matching a 32-bit wrap is refused", set_slot_bytes_wrap, OKV_EPROTO, "desc_capacity" },
		{ "max_sessions over OKV_MAX_SESSIONS is refused", set_max_sessions, OKV_EPROTO,
		  "max_sessions 4097 exceeds limit 4096" },
		{ "slot_index at max_sessions is refused", set_slot_index, OKV_EPROTO,
		  "slot_index 64 not below max_sessions 64" },
		{ "the control slot is refused", set_control_slot, OKV_EPROTO, "slot_index 4095 is OKV_CONTROL_SLOT" },
		{ "another max_frame_body is refused", set_max_frame, OKV_EPROTO,
		  "max_frame_body 1024 differs from 16777216" },
		{ "manager_pid zero is refused", set_pid0, OKV_EPROTO, "manager_pid is 0" },
		{ "the most extension bytes and fds are accepted", set_ext_max, 0, NULL },
		{ "ext_bytes not a multiple of 8 is refused", set_ext_bytes_odd, OKV_EPROTO,
		  "ext_bytes 12: want a multiple of 8 up to 4096" },
		{ "ext_bytes over the limit is refused", set_ext_bytes_big, OKV_EPROTO, "ext_bytes 4104" },
		{ "ext_fds over the limit is refused", set_ext_fds_big, OKV_EPROTO, "ext_fds 17 exceeds limit 16" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct okv_hello_reply r = good_reply(), out;
		char err[256] = "";
		unsigned char buf[sizeof(r) + 1];
		int rc;

		cases[i].mutate(&r);
		memcpy(buf + 1, &r, sizeof(r)); /* unaligned on purpose */
		rc = okvi_hello_reply_check(buf + 1, sizeof(r), &out, err, sizeof(err));
		CHECK(rc == cases[i].want, "%s: rc %d (%s), want %d", cases[i].name, rc, err, cases[i].want);
		CHECK(memcmp(&out, &r, sizeof(r)) == 0, "%s: *out is a copy of the reply", cases[i].name);
		if (cases[i].want_err != NULL)
			CHECK(strstr(err, cases[i].want_err) != NULL, "%s: err \"%s\" lacks \"%s\"", cases[i].name, err,
			      cases[i].want_err);
	}
	{
		struct okv_hello_reply r = good_reply(), out;
		char err[64];
		CHECK(okvi_hello_reply_check(&r, sizeof(r) - 1, &out, err, sizeof(err)) == OKV_EPROTO &&
			      strstr(err, "length 207 differs from 208") != NULL,
		      "short reply: %s", err);
		CHECK(okvi_hello_reply_check(&r, 0, &out, NULL, 0) == OKV_EPROTO, "empty reply, no err buffer");
		CHECK(okvi_hello_reply_check(&r, sizeof(r), &out, err, 8) == 0, "tiny err buffer unused on success");
		r.epoch = 0;
		CHECK(okvi_hello_reply_check(&r, sizeof(r), &out, err, 8) == OKV_EPROTO && strlen(err) == 7,
		      "tiny err buffer is truncated, NUL-terminated: \"%s\"", err);
	}
}

/* Append one extension record (abi.h struct okv_boot_ext) at b + *off. */
static void put_ext(unsigned char *b, size_t *off, uint16_t type, uint16_t nfds, const void *val, uint32_t len)
{
	struct okv_boot_ext h = { type, nfds, len };
	memcpy(b + *off, &h, sizeof(h));
	*off += sizeof(h);
	memcpy(b + *off, val, len);
	memset(b + *off + len, 0, ((len + 7u) & ~7u) - len);
	*off += (len + 7u) & ~7u;
}

static void test_boot_exts_parse(void)
{
	unsigned char b[OKV_BOOT_EXT_MAX_BYTES + 16];
	struct okvi_boot_exts out;
	char err[256];
	size_t n = 0;

	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 0, "v1.2.3-4-gabc", 13);
	put_ext(b, &n, 0x0777, 2, "future", 6); /* unknown, optional, owns two fds */
	CHECK(okvi_boot_exts_parse(b, n, 2, &out, err, sizeof(err)) == 0, "version + unknown optional: %s", err);
	CHECK(strcmp(out.manager_version, "v1.2.3-4-gabc") == 0 && out.skipped == 1, "version \"%s\", skipped %u",
	      out.manager_version, out.skipped);
	CHECK(okvi_boot_exts_parse(b, 0, 0, &out, err, sizeof(err)) == 0 && out.manager_version[0] == 0,
	      "no records: empty version");
	CHECK(okvi_boot_exts_parse(b, n, 3, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "records own 2 fds, ext_fds says 3") != NULL,
	      "fd count short: %s", err);
	CHECK(okvi_boot_exts_parse(b, n, 1, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "record 1: nfds 2 exceeds the 1 of ext_fds left") != NULL,
	      "fd count over: %s", err);
	CHECK(okvi_boot_exts_parse(b, n - 8, 2, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "record 1: length 6 (padded 8) exceeds the 0 bytes left") != NULL,
	      "truncated value: %s", err);
	CHECK(okvi_boot_exts_parse(b, 4, 0, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "record 0: header needs 8 bytes, 4 left") != NULL,
	      "truncated header: %s", err);
	b[8 + 13] = 1; /* a padding byte of record 0 */
	CHECK(okvi_boot_exts_parse(b, n, 2, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "record 0: padding byte 0 is not zero") != NULL,
	      "nonzero padding: %s", err);

	n = 0;
	put_ext(b, &n, 0x0777 | OKV_BOOT_EXT_REQUIRED, 0, "x", 1);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "type 0x8777 is required and unknown") != NULL,
	      "unknown required type: %s", err);
	n = 0;
	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 0, "a", 1);
	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 0, "b", 1);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO && strstr(err, "repeated") != NULL,
	      "version twice: %s", err);
	n = 0;
	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 1, "a", 1);
	CHECK(okvi_boot_exts_parse(b, n, 1, &out, err, sizeof(err)) == OKV_EPROTO && strstr(err, "no fds") != NULL,
	      "version with an fd: %s", err);
	n = 0;
	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 0, "a\nb", 3);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "byte 1 is 0x0a, want printable ASCII") != NULL,
	      "control byte in version: %s", err);
	char big[OKV_BOOT_EXT_VERSION_MAX + 1];
	memset(big, 'v', sizeof(big));
	n = 0;
	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 0, big, sizeof(big));
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO && strstr(err, "1..64 bytes") != NULL,
	      "65-byte version: %s", err);
	n = 0;
	put_ext(b, &n, OKV_BOOT_EXT_MANAGER_VERSION, 0, big, OKV_BOOT_EXT_VERSION_MAX);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == 0 &&
		      strlen(out.manager_version) == OKV_BOOT_EXT_VERSION_MAX,
	      "64-byte version: %s", err);
	CHECK(okvi_boot_exts_parse(b, OKV_BOOT_EXT_MAX_BYTES + 8, 0, &out, err, sizeof(err)) == OKV_EPROTO,
	      "records over 4096 bytes refused");

	/* The iceoryx2 service record: required, printable, 1..240 bytes. */
	const uint16_t svc = OKV_BOOT_EXT_IOX2_SERVICE | OKV_BOOT_EXT_REQUIRED;
	n = 0;
	put_ext(b, &n, svc, 0, "orbitkv/00000000000000ab/0123", 29);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == 0 &&
		      strcmp(out.iox2_service, "orbitkv/00000000000000ab/0123") == 0,
	      "iceoryx2 service record: %s (\"%s\")", err, out.iox2_service);
	put_ext(b, &n, svc, 0, "again", 5);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO && strstr(err, "iox2_service repeated"),
	      "service twice: %s", err);
	n = 0;
	put_ext(b, &n, svc, 0, "a b\t", 4);
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO &&
		      strstr(err, "iox2_service byte 3 is 0x09") != NULL,
	      "control byte in service: %s", err);
	char huge[OKV_BOOT_EXT_SERVICE_MAX + 1];
	memset(huge, 's', sizeof(huge));
	n = 0;
	put_ext(b, &n, svc, 0, huge, sizeof(huge));
	CHECK(okvi_boot_exts_parse(b, n, 0, &out, err, sizeof(err)) == OKV_EPROTO && strstr(err, "1..240 bytes") != NULL,
	      "241-byte service: %s", err);
	n = 0;
	put_ext(b, &n, svc, 1, "x", 1);
	CHECK(okvi_boot_exts_parse(b, n, 1, &out, err, sizeof(err)) == OKV_EPROTO && strstr(err, "no fds") != NULL,
	      "service with an fd: %s", err);
}

static void put_header(unsigned char *b, uint32_t magic, uint16_t version, uint16_t code, uint64_t epoch,
		       uint32_t length, uint32_t reserved)
{
	struct okv_frame_header h = { magic, version, code, epoch, length, reserved };
	memcpy(b, &h, sizeof(h));
}

static void test_frame_header_check(void)
{
	static const struct {
		const char *name;
		uint32_t magic;
		uint16_t version, code;
		uint64_t epoch;
		uint32_t length, reserved;
		int want;
		const char *want_err;
	} cases[] = {
		{ "a RegisterInstance request is valid", OKV_FRAME_MAGIC, 2, 1, EPOCH, 10, 0, 0, NULL },
		{ "an Unregister request is valid", OKV_FRAME_MAGIC, 2, 5, EPOCH, 0, 0, 0, NULL },
		{ "a Health reply is valid", OKV_FRAME_MAGIC, 2, 0x8003, EPOCH, 0, 0, 0, NULL },
		{ "an error frame is valid", OKV_FRAME_MAGIC, 2, 0xFFFF, EPOCH, 5, 0, 0, NULL },
		{ "a 16 MiB body is valid", OKV_FRAME_MAGIC, 2, 2, EPOCH, OKV_FRAME_MAX_BODY, 0, 0, NULL },
		{ "a wrong magic is refused", OKV_BOOTSTRAP_MAGIC, 2, 1, EPOCH, 0, 0, OKV_EPROTO,
		  "frame magic 0x42564b4f differs from OKV_FRAME_MAGIC 0x46564b4f" },
		{ "a wrong version is a version error", OKV_FRAME_MAGIC, 1, 1, EPOCH, 0, 0, OKV_EVERSION,
		  "frame version 1 differs from protocol version 2" },
		{ "code 0 is refused", OKV_FRAME_MAGIC, 2, 0, EPOCH, 0, 0, OKV_EPROTO, "frame code 0x0000 unknown" },
		{ "code 7 is refused", OKV_FRAME_MAGIC, 2, 7, EPOCH, 0, 0, OKV_EPROTO, "frame code 0x0007 unknown" },
		{ "the bare reply flag is refused", OKV_FRAME_MAGIC, 2, 0x8000, EPOCH, 0, 0, OKV_EPROTO,
		  "frame code 0x8000 unknown" },
		{ "a reply to code 7 is refused", OKV_FRAME_MAGIC, 2, 0x8007, EPOCH, 0, 0, OKV_EPROTO,
		  "frame code 0x8007 unknown" },
		{ "another epoch is refused", OKV_FRAME_MAGIC, 2, 1, EPOCH + 1, 0, 0, OKV_EPROTO,
		  "frame epoch 1234605616436508553 differs from session epoch 1234605616436508552" },
		{ "a body over 16 MiB is refused", OKV_FRAME_MAGIC, 2, 2, EPOCH, OKV_FRAME_MAX_BODY + 1, 0, OKV_EPROTO,
		  "frame body length 16777217 exceeds limit 16777216" },
		{ "a nonzero reserved is refused", OKV_FRAME_MAGIC, 2, 1, EPOCH, 0, 7, OKV_EPROTO,
		  "frame reserved 0x7 must be zero" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char buf[25];
		struct okv_frame_header out;
		char err[256] = "";
		int rc;

		put_header(buf + 1, cases[i].magic, cases[i].version, cases[i].code, cases[i].epoch, cases[i].length,
			   cases[i].reserved);
		rc = okvi_frame_header_check(buf + 1, 24, EPOCH, &out, err, sizeof(err));
		CHECK(rc == cases[i].want, "%s: rc %d (%s), want %d", cases[i].name, rc, err, cases[i].want);
		CHECK(out.code == cases[i].code && out.length == cases[i].length && out.epoch == cases[i].epoch,
		      "%s: *out copies the header", cases[i].name);
		if (cases[i].want_err != NULL)
			CHECK(strstr(err, cases[i].want_err) != NULL, "%s: err \"%s\" lacks \"%s\"", cases[i].name, err,
			      cases[i].want_err);
	}
	{
		unsigned char buf[25] = { 0 };
		struct okv_frame_header out;
		char err[64];
		put_header(buf, OKV_FRAME_MAGIC, 2, 1, EPOCH, 0, 0);
		CHECK(okvi_frame_header_check(buf, 23, EPOCH, &out, err, sizeof(err)) == OKV_EPROTO &&
			      strstr(err, "length 23 differs from 24") != NULL,
		      "short header: %s", err);
		CHECK(okvi_frame_header_check(buf, 25, EPOCH, &out, err, sizeof(err)) == OKV_EPROTO, "long header");
	}
}

/* ------------------------------------------------------------------------ */

static void test_send_recv(void)
{
	int sv[2];
	struct okv_frame_header h;
	uint8_t *body = (uint8_t *)1;
	char err[256] = "";
	int rc;

	pair(sv);
	CHECK(okvi_frame_send(sv[0], OKV_FRAME_HEALTH | OKV_FRAME_REPLY, EPOCH, "hello", 5, NULL, 0) == 0, "send");
	rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
	CHECK(rc == 0, "recv: %d %s", rc, err);
	if (rc == 0) {
		CHECK(h.code == 0x8003 && h.length == 5 && h.epoch == EPOCH && h.magic == OKV_FRAME_MAGIC,
		      "header round trips");
		CHECK(memcmp(body, "hello", 5) == 0, "body round trips");
		free(body);
	}

	/* Empty body: still a non-NULL buffer to free. */
	CHECK(okvi_frame_send(sv[0], OKV_FRAME_UNREGISTER | OKV_FRAME_REPLY, EPOCH, NULL, 0, NULL, 0) == 0,
	      "send empty");
	rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
	CHECK(rc == 0 && h.length == 0 && body != NULL, "recv empty: %d %s", rc, err);
	if (rc == 0)
		free(body);

	/* Argument checks. */
	CHECK(okvi_frame_send(sv[0], 1, EPOCH, NULL, 1, NULL, 0) == -EINVAL, "NULL body with length");
	CHECK(okvi_frame_send(sv[0], 1, EPOCH, "x", OKV_FRAME_MAX_BODY + 1, NULL, 0) == -EINVAL, "oversize body");
	CHECK(okvi_frame_send(sv[0], 1, EPOCH, NULL, 0, sv, (int)OKV_FRAME_MAX_FDS + 1) == -EINVAL, "65 fds");
	CHECK(okvi_frame_send(sv[0], 1, EPOCH, NULL, 0, NULL, 1) == -EINVAL, "NULL fds");

	/* Timeout: nothing to read. */
	{
		struct timespec a, b;
		long ms;
		clock_gettime(CLOCK_MONOTONIC, &a);
		rc = okvi_frame_recv(sv[1], EPOCH, 50, &h, &body, err, sizeof(err));
		clock_gettime(CLOCK_MONOTONIC, &b);
		ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
		CHECK(rc == OKV_ETIMEDOUT && body == NULL, "empty socket times out: %d", rc);
		CHECK(ms >= 49 && ms < 2000, "timeout took %ld ms, want about 50", ms);
	}

	/* Oversize length: refused without reading the body. */
	{
		unsigned char hb[24], sentinel[8];
		put_header(hb, OKV_FRAME_MAGIC, 2, 3, EPOCH, OKV_FRAME_MAX_BODY + 1, 0);
		write_all(sv[0], hb, sizeof(hb));
		write_all(sv[0], "SENTINEL", 8);
		rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
		CHECK(rc == OKV_EPROTO && strstr(err, "exceeds limit 16777216") != NULL, "oversize: %d %s", rc, err);
		CHECK(read(sv[1], sentinel, 8) == 8 && memcmp(sentinel, "SENTINEL", 8) == 0,
		      "bytes after an oversize header stay unread");
	}

	/* Another epoch. */
	CHECK(okvi_frame_send(sv[0], 3, EPOCH + 1, NULL, 0, NULL, 0) == 0, "send stale");
	rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
	CHECK(rc == OKV_EPROTO && strstr(err, "differs from session epoch") != NULL, "stale epoch: %d %s", rc, err);

	/* Truncated body, then truncated header, then a clean close. */
	{
		unsigned char hb[24];
		put_header(hb, OKV_FRAME_MAGIC, 2, 3, EPOCH, 100, 0);
		write_all(sv[0], hb, sizeof(hb));
		write_all(sv[0], "0123456789", 10);
		shutdown(sv[0], SHUT_WR);
		rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
		CHECK(rc == OKV_EPROTO && strstr(err, "frame body ends after 10 of 100 bytes") != NULL,
		      "truncated body: %d %s", rc, err);
		CHECK(body == NULL, "no body after an error");
		rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
		CHECK(rc == OKV_ECLOSED, "closed socket: %d %s", rc, err);
	}
	close(sv[0]);
	close(sv[1]);

	pair(sv);
	{
		unsigned char hb[24];
		put_header(hb, OKV_FRAME_MAGIC, 2, 3, EPOCH, 0, 0);
		write_all(sv[0], hb, 9);
		close(sv[0]);
		rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
		CHECK(rc == OKV_EPROTO && strstr(err, "frame header ends after 9 of 24 bytes") != NULL,
		      "truncated header: %d %s", rc, err);
	}
	close(sv[1]);

	/* Peer gone: MSG_NOSIGNAL turns SIGPIPE into -EPIPE. */
	pair(sv);
	close(sv[1]);
	CHECK(okvi_frame_send(sv[0], 3, EPOCH, "x", 1, NULL, 0) == -EPIPE, "send to a closed peer is -EPIPE");
	close(sv[0]);
}

/* A body larger than the socket buffer: the sender (a child process, with a
 * blocking or a non-blocking socket) must loop over partial writes. */
static void test_large_frame(void)
{
	const uint32_t len = 3u << 20;

	for (int nonblock = 0; nonblock <= 1; nonblock++) {
		int sv[2], status = 0, rc;
		struct okv_frame_header h;
		uint8_t *body;
		char err[256] = "";
		pid_t pid;

		pair(sv);
		pid = fork();
		if (pid < 0)
			exit(2);
		if (pid == 0) {
			uint8_t *b = malloc(len);
			close(sv[1]);
			for (uint32_t i = 0; i < len; i++)
				b[i] = (uint8_t)(i * 7u);
			if (nonblock)
				fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
			rc = okvi_frame_send(sv[0], OKV_FRAME_REGISTER_BUFFERS, EPOCH, b, len, NULL, 0);
			free(b);
			_exit(rc == 0 ? 0 : 1);
		}
		close(sv[0]);
		rc = okvi_frame_recv(sv[1], EPOCH, 10000, &h, &body, err, sizeof(err));
		CHECK(rc == 0 && h.length == len, "large frame (nonblock %d): %d %s", nonblock, rc, err);
		if (rc == 0) {
			uint32_t bad = 0;
			for (uint32_t i = 0; i < len; i++)
				bad += body[i] != (uint8_t)(i * 7u);
			CHECK(bad == 0, "large body (nonblock %d): %u bytes differ", nonblock, bad);
			free(body);
		}
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "sender (nonblock %d) succeeded", nonblock);
		close(sv[1]);
	}
}

/* fds travel with the first header byte and reach the peer in order. */
static void test_send_fds(void)
{
	int sv[2], pipes[3][2], fds[3];
	unsigned char hb[24 + 4];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 3)];
		struct cmsghdr align;
	} c;
	struct iovec iov = { hb, sizeof(hb) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
	struct okv_frame_header h;
	char err[256] = "";
	int before, rc;
	uint8_t *body;

	pair(sv);
	for (int i = 0; i < 3; i++) {
		if (pipe2(pipes[i], O_CLOEXEC) != 0)
			exit(2);
		fds[i] = pipes[i][1];
	}
	CHECK(okvi_frame_send(sv[0], OKV_FRAME_REGISTER_BUFFERS, EPOCH, "body", 4, fds, 3) == 0, "send with 3 fds");
	CHECK(recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) == (ssize_t)sizeof(hb), "raw recv");
	CHECK(okvi_frame_header_check(hb, 24, EPOCH, &h, err, sizeof(err)) == 0 && h.length == 4 &&
		      memcmp(hb + 24, "body", 4) == 0,
	      "frame with fds is well formed: %s", err);
	{
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		CHECK(cm != NULL && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
			      cm->cmsg_len == CMSG_LEN(sizeof(int) * 3),
		      "one SCM_RIGHTS with 3 fds");
		if (cm != NULL && cm->cmsg_len == CMSG_LEN(sizeof(int) * 3)) {
			int got[3];
			memcpy(got, CMSG_DATA(cm), sizeof(got));
			for (int i = 0; i < 3; i++) {
				char ch = 0;
				CHECK(write(got[i], &"abc"[i], 1) == 1, "write through received fd %d", i);
				CHECK(read(pipes[i][0], &ch, 1) == 1 && ch == "abc"[i], "fd %d is pipe %d", i, i);
				close(got[i]);
			}
		}
	}

	/* okvi_frame_recv refuses fds on a frame to the client and closes them. */
	before = count_fds();
	CHECK(okvi_frame_send(sv[0], OKV_FRAME_HEALTH | OKV_FRAME_REPLY, EPOCH, NULL, 0, fds, 3) == 0, "send again");
	rc = okvi_frame_recv(sv[1], EPOCH, 1000, &h, &body, err, sizeof(err));
	CHECK(rc == OKV_EPROTO && strstr(err, "frame carried 3 fds") != NULL, "fds refused: %d %s", rc, err);
	CHECK(count_fds() == before, "received fds closed: %d fds before, %d after", before, count_fds());

	for (int i = 0; i < 3; i++) {
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	close(sv[0]);
	close(sv[1]);
}

/* ------------------------------------------------------------------------ */

/* Write a reply frame with a packed protobuf-c body on the Manager side. */
static void manager_reply(int sock, uint16_t code, uint64_t epoch, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(n + 1);
	protobuf_c_message_pack(msg, buf);
	if (okvi_frame_send(sock, code, epoch, buf, (uint32_t)n, NULL, 0) != 0)
		exit(2);
	free(buf);
}

/* Read the request the client wrote; returns its body (free it) or NULL. */
static uint8_t *manager_request(int sock, struct okv_frame_header *h)
{
	uint8_t *body;
	char err[256];
	int rc = okvi_frame_recv(sock, EPOCH, 1000, h, &body, err, sizeof(err));
	CHECK(rc == 0, "manager reads the request: %d %s", rc, err);
	return rc == 0 ? body : NULL;
}

static void test_register_instance(void)
{
	int sv[2];
	char err[256] = "";
	struct okv_frame_header h;
	uint8_t *body;
	char longid[258];
	int rc;

	pair(sv);
	{
		Orbitkv__Lifecycle__V1__RegisterInstanceReply r = ORBITKV__LIFECYCLE__V1__REGISTER_INSTANCE_REPLY__INIT;
		r.slot_index = 3;
		manager_reply(sv[1], OKV_FRAME_REGISTER_INSTANCE | OKV_FRAME_REPLY, EPOCH, &r.base);
	}
	rc = okvi_register_instance(sv[0], EPOCH, 0xabc, "vllm-0/tp1", 1000, err, sizeof(err));
	CHECK(rc == 0, "register instance: %d %s", rc, err);
	body = manager_request(sv[1], &h);
	if (body != NULL) {
		Orbitkv__Lifecycle__V1__RegisterInstanceRequest *q =
			orbitkv__lifecycle__v1__register_instance_request__unpack(NULL, h.length, body);
		CHECK(h.code == OKV_FRAME_REGISTER_INSTANCE, "request code %u", h.code);
		CHECK(q != NULL && q->client_token == 0xabc && strcmp(q->instance_id, "vllm-0/tp1") == 0,
		      "request carries token and instance id");
		if (q != NULL)
			orbitkv__lifecycle__v1__register_instance_request__free_unpacked(q, NULL);
		free(body);
	}

	/* An error frame becomes OKV_EAPPLICATION with "field: message". */
	{
		Orbitkv__Lifecycle__V1__Error e = ORBITKV__LIFECYCLE__V1__ERROR__INIT;
		e.status = OKV_STATUS_INVALID;
		e.field = "instance_id";
		e.message = "already registered as vllm-0/tp1";
		manager_reply(sv[1], OKV_FRAME_ERROR, EPOCH, &e.base);
	}
	rc = okvi_register_instance(sv[0], EPOCH, 0xabc, "vllm-0/tp1", 1000, err, sizeof(err));
	CHECK(rc == OKV_EAPPLICATION && strcmp(err, "instance_id: already registered as vllm-0/tp1") == 0,
	      "error frame: %d \"%s\"", rc, err);
	free(manager_request(sv[1], &h));

	/* A reply with another code is a protocol error. */
	{
		Orbitkv__Lifecycle__V1__HealthReply r = ORBITKV__LIFECYCLE__V1__HEALTH_REPLY__INIT;
		manager_reply(sv[1], OKV_FRAME_HEALTH | OKV_FRAME_REPLY, EPOCH, &r.base);
	}
	rc = okvi_register_instance(sv[0], EPOCH, 1, "x", 1000, err, sizeof(err));
	CHECK(rc == OKV_EPROTO && strstr(err, "reply code 0x8003 differs from expected 0x8001") != NULL,
	      "wrong reply code: %d %s", rc, err);
	free(manager_request(sv[1], &h));

	/* An undecodable reply body is a protocol error. */
	if (okvi_frame_send(sv[1], OKV_FRAME_REGISTER_INSTANCE | OKV_FRAME_REPLY, EPOCH, "\x08", 1, NULL, 0) != 0)
		exit(2);
	rc = okvi_register_instance(sv[0], EPOCH, 1, "x", 1000, err, sizeof(err));
	CHECK(rc == OKV_EPROTO && strstr(err, "is not a valid") != NULL, "truncated varint body: %d %s", rc, err);
	free(manager_request(sv[1], &h));

	/* Argument checks happen before anything is sent. */
	memset(longid, 'i', sizeof(longid));
	longid[257] = '\0';
	CHECK(okvi_register_instance(sv[0], EPOCH, 1, longid, 1000, err, sizeof(err)) == -EINVAL &&
		      strstr(err, "exceeds limit 256") != NULL,
	      "257-byte instance id: %s", err);
	CHECK(okvi_register_instance(sv[0], EPOCH, 1, NULL, 1000, err, sizeof(err)) == -EINVAL, "NULL instance id");

	/* No reply within the deadline. */
	rc = okvi_register_instance(sv[0], EPOCH, 1, "x", 30, err, sizeof(err));
	CHECK(rc == OKV_ETIMEDOUT, "no reply: %d %s", rc, err);
	free(manager_request(sv[1], &h));
	close(sv[0]);
	close(sv[1]);
}

static void test_health_unregister(void)
{
	int sv[2];
	char err[256] = "";
	struct okv_health out;
	struct okv_frame_header h;
	uint8_t sid[OKV_SERVICE_ID_BYTES];
	int rc;

	for (unsigned i = 0; i < sizeof(sid); i++)
		sid[i] = (uint8_t)(0xA0 + i);
	pair(sv);
	{
		Orbitkv__Lifecycle__V1__HealthReply r = ORBITKV__LIFECYCLE__V1__HEALTH_REPLY__INIT;
		r.status = "serving";
		r.epoch = EPOCH;
		r.service_id.data = sid;
		r.service_id.len = sizeof(sid);
		r.sessions = 2;
		r.uptime_ns = 123456789;
		r.version = "v0.2.0-this-version-string-is-longer-than-32-bytes";
		r.poll_mode = "adaptive";
		r.requests = 77;
		r.manager_pid = 4321;
		r.blocks = 11;
		r.ram_used_bytes = 12;
		r.ram_capacity_bytes = 13;
		r.leases = 14;
		r.pins = 15;
		r.reserved_bytes = 16;
		r.operations = 17;
		r.evictions = 18;
		manager_reply(sv[1], OKV_FRAME_HEALTH | OKV_FRAME_REPLY, EPOCH, &r.base);
	}
	rc = okvi_health(sv[0], EPOCH, 1000, &out, err, sizeof(err));
	CHECK(rc == 0, "health: %d %s", rc, err);
	CHECK(strcmp(out.status, "serving") == 0 && strcmp(out.poll_mode, "adaptive") == 0, "health strings");
	CHECK(strcmp(out.version, "v0.2.0-this-version-string-is-l") == 0, "long version truncated to 31 bytes: %s",
	      out.version);
	CHECK(out.epoch == EPOCH && out.sessions == 2 && out.uptime_ns == 123456789 && out.requests == 77 &&
		      out.manager_pid == 4321 && memcmp(out.service_id, sid, sizeof(sid)) == 0,
	      "health numbers");
	CHECK(out.blocks == 11 && out.ram_used_bytes == 12 && out.ram_capacity_bytes == 13 && out.leases == 14 &&
		      out.pins == 15 && out.reserved_bytes == 16 && out.operations == 17 && out.evictions == 18,
	      "health cache counters");
	free(manager_request(sv[1], &h));
	CHECK(h.code == OKV_FRAME_HEALTH && h.length == 0, "health request is code 3 with an empty body");

	{
		Orbitkv__Lifecycle__V1__HealthReply r = ORBITKV__LIFECYCLE__V1__HEALTH_REPLY__INIT;
		r.epoch = EPOCH + 1;
		r.service_id.data = sid;
		r.service_id.len = sizeof(sid);
		manager_reply(sv[1], OKV_FRAME_HEALTH | OKV_FRAME_REPLY, EPOCH, &r.base);
	}
	rc = okvi_health(sv[0], EPOCH, 1000, &out, err, sizeof(err));
	CHECK(rc == OKV_EPROTO && strstr(err, "health reply epoch") != NULL, "health epoch mismatch: %d %s", rc, err);
	free(manager_request(sv[1], &h));

	{
		Orbitkv__Lifecycle__V1__HealthReply r = ORBITKV__LIFECYCLE__V1__HEALTH_REPLY__INIT;
		r.epoch = EPOCH;
		r.service_id.data = sid;
		r.service_id.len = 15;
		manager_reply(sv[1], OKV_FRAME_HEALTH | OKV_FRAME_REPLY, EPOCH, &r.base);
	}
	rc = okvi_health(sv[0], EPOCH, 1000, &out, err, sizeof(err));
	CHECK(rc == OKV_EPROTO && strstr(err, "service_id length 15 differs from 16") != NULL,
	      "short service id: %d %s", rc, err);
	free(manager_request(sv[1], &h));

	{
		Orbitkv__Lifecycle__V1__UnregisterReply r = ORBITKV__LIFECYCLE__V1__UNREGISTER_REPLY__INIT;
		manager_reply(sv[1], OKV_FRAME_UNREGISTER | OKV_FRAME_REPLY, EPOCH, &r.base);
	}
	CHECK(okvi_unregister(sv[0], EPOCH, 0x55, 1000) == 0, "unregister");
	{
		uint8_t *body = manager_request(sv[1], &h);
		if (body != NULL) {
			Orbitkv__Lifecycle__V1__UnregisterRequest *q =
				orbitkv__lifecycle__v1__unregister_request__unpack(NULL, h.length, body);
			CHECK(h.code == OKV_FRAME_UNREGISTER && q != NULL && q->client_token == 0x55,
			      "unregister carries the token");
			if (q != NULL)
				orbitkv__lifecycle__v1__unregister_request__free_unpacked(q, NULL);
			free(body);
		}
	}
	/* The Manager closes after Unregister; a later call cannot send (-EPIPE). */
	close(sv[1]);
	CHECK(okvi_unregister(sv[0], EPOCH, 0x55, 1000) == -EPIPE, "unregister after close is -EPIPE");
	close(sv[0]);
}

/* ------------------------------------------------------------------------ */

/* Same cases as TestSocketPath in gocore/lifecycle/socketpath_test.go. */
static void test_socket_path(void)
{
	char long_host[108], ok107[140], bad108[140], want107[140];
	static const struct {
		const char *addr, *want;
		int rc;
	} cases[] = {
		{ "127.0.0.1:7470", "/tmp/orbitkv-127.0.0.1-7470.sock", 0 },
		{ "localhost:1", "/tmp/orbitkv-localhost-1.sock", 0 },
		{ "[::1]:7470", "/tmp/orbitkv-::1-7470.sock", 0 },
		{ "10.0.0.1:65535", "/tmp/orbitkv-10.0.0.1-65535.sock", 0 },
		{ "h:0", "/tmp/orbitkv-h-0.sock", 0 },
		{ "h:007470", "/tmp/orbitkv-h-7470.sock", 0 },
		{ "127.0.0.1", NULL, -EINVAL },
		{ "127.0.0.1:", NULL, -EINVAL },
		{ "127.0.0.1:http", NULL, -EINVAL },
		{ "127.0.0.1:+80", NULL, -EINVAL },
		{ "127.0.0.1:65536", NULL, -EINVAL },
		{ "h:99999999999999999999", NULL, -EINVAL },
		{ ":7470", NULL, -EINVAL },
		{ "[]:7470", NULL, -EINVAL },
		{ "a/b:7470", NULL, -EINVAL },
		{ "../../etc:7470", NULL, -EINVAL },
		{ "::1:7470", NULL, -EINVAL },
		{ "[::1:7470", NULL, -EINVAL },
		{ "[::1]", NULL, -EINVAL },
		{ "[::1]x:7470", NULL, -EINVAL },
		{ "a]:7470", NULL, -EINVAL },
		{ "", NULL, -EINVAL },
	};
	char buf[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = okv_socket_path(cases[i].addr, buf, sizeof(buf));
		if (cases[i].want != NULL)
			CHECK(rc == (int)strlen(cases[i].want) && strcmp(buf, cases[i].want) == 0,
			      "\"%s\" -> %d \"%s\", want \"%s\"", cases[i].addr, rc, rc >= 0 ? buf : "", cases[i].want);
		else
			CHECK(rc == cases[i].rc, "\"%s\" -> %d, want %d", cases[i].addr, rc, cases[i].rc);
	}
	/* 107 bytes fit sun_path with its NUL; 108 do not. */
	{
		size_t hl = 107 - strlen("/tmp/orbitkv--7470.sock");
		memset(long_host, 'h', hl);
		long_host[hl] = '\0';
		snprintf(ok107, sizeof(ok107), "%s:7470", long_host);
		snprintf(want107, sizeof(want107), "/tmp/orbitkv-%s-7470.sock", long_host);
		snprintf(bad108, sizeof(bad108), "%sx:7470", long_host);
		CHECK(okv_socket_path(ok107, buf, sizeof(buf)) == 107 && strcmp(buf, want107) == 0, "107-byte path");
		CHECK(okv_socket_path(bad108, buf, sizeof(buf)) == -ENAMETOOLONG, "108-byte path");
	}
	CHECK(okv_socket_path("127.0.0.1:7470", buf, 32) == -ENAMETOOLONG, "buffer of 32 bytes too small");
	CHECK(okv_socket_path("127.0.0.1:7470", buf, 33) == 32, "buffer of 33 bytes fits 32 + NUL");
	CHECK(okv_socket_path(NULL, buf, sizeof(buf)) == -EINVAL, "NULL address");
	CHECK(okv_socket_path("h:1", NULL, 0) == -EINVAL, "NULL buffer");
}

static void test_strerror(void)
{
	static const int codes[] = { OKV_EPROTO,	    OKV_EVERSION,     OKV_EREFUSED,   OKV_ESTALE_SESSION,
				     OKV_ESTALE_GENERATION, OKV_EINVALID,     OKV_ETIMEDOUT,  OKV_EMANAGER_DIED,
				     OKV_ECLOSED,	    OKV_EINTERNAL,    OKV_EUNSUPPORTED, OKV_EAPPLICATION,
				     OKV_EPENDING,	    OKV_EUNADMITTED,  OKV_E2BIG,	OKV_EEXPIRED,
				     OKV_EFENCED,	    OKV_EPEER,	      OKV_EDISCOVER_BUSY };
	size_t n = sizeof(codes) / sizeof(codes[0]);

	CHECK(n == (size_t)(OKV_EPROTO - OKV_EDISCOVER_BUSY + 1), "every OKV_E* code is listed");
	for (size_t i = 0; i < n; i++) {
		const char *s = okv_strerror(codes[i]);
		CHECK(s != NULL && s[0] != '\0' && strcmp(s, "unknown error") != 0, "okv_strerror(%d) = \"%s\"",
		      codes[i], s ? s : "(null)");
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(s, okv_strerror(codes[j])) != 0, "codes %d and %d share \"%s\"", codes[i], codes[j],
			      s);
	}
	CHECK(strcmp(okv_strerror(0), "success") == 0, "0 is success");
	CHECK(strcmp(okv_strerror(-EINVAL), "Invalid argument") == 0, "-EINVAL: %s", okv_strerror(-EINVAL));
	CHECK(strcmp(okv_strerror(-ENAMETOOLONG), "File name too long") == 0, "-ENAMETOOLONG");
	CHECK(strcmp(okv_strerror(-EPIPE), "Broken pipe") == 0, "-EPIPE");
	CHECK(strcmp(okv_strerror(EINVAL), "unknown error") == 0, "positive codes are unknown");
	CHECK(strcmp(okv_strerror(-1000), "unknown error") == 0, "-1000 is unknown");
	CHECK(strcmp(okv_strerror(OKV_EDISCOVER_BUSY - 1), "unknown error") == 0, "below OKV_EDISCOVER_BUSY is unknown");
	CHECK(strcmp(okv_strerror(-4095), "unknown error") == 0, "unassigned errno is unknown");
	CHECK(strcmp(okv_strerror(-2147483647 - 1), "unknown error") == 0, "INT_MIN is unknown");
}

/* A peer that stopped reading: a bounded send gives up at its deadline. */
static void test_send_deadline(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	int small = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	static char body[1 << 20];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int64_t now_ms = (int64_t)t0.tv_sec * 1000 + t0.tv_nsec / 1000000;
	int rc = okvi_frame_send_until(sv[0], OKV_FRAME_HEALTH, 1, body, sizeof(body), NULL, 0, now_ms + 100);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CHECK(rc == OKV_ETIMEDOUT, "send to a peer that never reads: rc %d, want OKV_ETIMEDOUT\n", rc);
	CHECK(ms >= 90 && ms < 2000, "bounded send took %.1f ms, want about 100\n", ms);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	int before = count_fds();

	test_hello_encode();
	test_hello_reply_check();
	test_boot_exts_parse();
	test_frame_header_check();
	test_send_recv();
	test_send_fds();
	test_send_deadline();
	test_large_frame();
	test_register_instance();
	test_health_unregister();
	test_socket_path();
	test_strerror();
	CHECK(count_fds() == before, "no fd leaked: %d open before, %d after", before, count_fds());
	if (failures != 0) {
		fprintf(stderr, "test_lifecycle: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_lifecycle: all %d checks passed\n", checks);
	return 0;
}
