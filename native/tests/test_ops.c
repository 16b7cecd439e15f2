/*
 * test_ops.c — tests of the cache API of liborbitkv: engine buffers (seals,
 * layout, registration), okv_max_* and the descriptor encoding of every
 * cache operation against a fake Manager. The namespace fingerprint is
 * tested in test_identity.c.
 *
 * The fake Manager is a thread that watches the request line of a slot
 * mapped in this process, records each request and its descriptor, and
 * answers as the test scripts it (okvi_post_response, the Manager's own
 * primitive). The client is built by hand around that slot (client_internal.h
 * exposes struct okv_client), so no bootstrap is needed; RegisterBuffers
 * replies are queued on a socketpair before the call, as test_lifecycle does.
 * Standalone: prints each failed check, exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "client_internal.h"
#include "lifecycle.h"
#include "proto/lifecycle.pb-c.h"
#include "check.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define EPOCH 0x0123456789abcdefull
#define TOKEN 0x5151ull
#define SLOT_BYTES (OKV_SLOT_DESC_OFFSET + OKV_DEFAULT_DESC_CAPACITY)

/* ---- buffers ------------------------------------------------------------ */

static void test_buffer_alloc(void)
{
	struct okv_buffer b;

	CHECK(okv_buffer_alloc(3, 128, 5, &b) == 0, "alloc 3 layers x 5 pages x 128 bytes");
	CHECK(b.base != NULL && b.bytes == 3 * 5 * 128 && b.layers == 3 && b.page_bytes == 128 &&
		      b.page_count == 5 && b.fd >= 0,
	      "buffer fields");
	int seals = fcntl(b.fd, F_GET_SEALS);
	CHECK(seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW),
	      "sealed against shrink and grow: 0x%x", seals);
	CHECK((seals & F_SEAL_WRITE) == 0, "not sealed against writes: 0x%x", seals);
	errno = 0;
	CHECK(ftruncate(b.fd, 128) < 0 && errno == EPERM, "shrinking fails with EPERM: %s", strerror(errno));
	errno = 0;
	CHECK(ftruncate(b.fd, 1 << 20) < 0 && errno == EPERM, "growing fails with EPERM: %s", strerror(errno));
	CHECK(fcntl(b.fd, F_GETFD) & FD_CLOEXEC, "memfd is close-on-exec");
	/* Layer-major layout: page p of layer l at (l * page_count + p) * page_bytes. */
	CHECK((uint8_t *)okv_buffer_page(&b, 0, 0) == (uint8_t *)b.base, "page 0 of layer 0");
	CHECK((uint8_t *)okv_buffer_page(&b, 2, 4) == (uint8_t *)b.base + (2 * 5 + 4) * 128, "page 4 of layer 2");
	memset(okv_buffer_page(&b, 2, 4), 0xAB, 128);
	{
		uint8_t x = 0;
		CHECK(pread(b.fd, &x, 1, (2 * 5 + 4) * 128 + 127) == 1 && x == 0xAB, "mapping is shared with the fd");
	}
	okv_buffer_free(&b);
	CHECK(b.base == NULL && b.bytes == 0 && b.layers == 0, "free zeroes the buffer");
	okv_buffer_free(&b); /* zeroed: no-op, must not close fd 0 */
	okv_buffer_free(NULL);

	CHECK(okv_buffer_alloc(0, 64, 1, &b) == -EINVAL && b.base == NULL, "zero layers");
	CHECK(okv_buffer_alloc(1, 0, 1, &b) == -EINVAL, "zero page bytes");
	CHECK(okv_buffer_alloc(1, 64, 0, &b) == -EINVAL, "zero pages");
	CHECK(okv_buffer_alloc(1, 96, 1, &b) == -EINVAL, "page bytes not a multiple of 64");
	CHECK(okv_buffer_alloc(4096, 1ull << 40, 1ull << 30, &b) == -EINVAL, "size overflow");
	CHECK(okv_buffer_alloc(1, 64, 1, NULL) == -EINVAL, "NULL out");
}

/* ---- fake Manager --------------------------------------------------------- */

/* What the fake Manager saw of one request. */
struct seen {
	struct okv_msg msg;
	uint8_t desc[64 + 24 * 16];
};

typedef void (*handler_fn)(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp);

static struct {
	struct okv_slot *slot;
	uint64_t start_gen; /* request generation before the thread started */
	pthread_t thr;
	int stop;
	handler_fn handler;
	int hold;           /* while set, the current request is not answered */
	struct seen seen[16];
	int nseen;
	int polls;          /* RestorePoll requests answered */
	int ready_after;    /* restore_ready: Loading until this many polls */
	int event_fd;       /* signalled by restore_ready when the copy ends */
} fm;

static void *fm_run(void *arg)
{
	(void)arg;
	uint64_t last = fm.start_gen;
	while (!__atomic_load_n(&fm.stop, __ATOMIC_SEQ_CST)) {
		uint64_t g = __atomic_load_n(&fm.slot->request.generation, __ATOMIC_ACQUIRE);
		if (g == last) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
			continue;
		}
		last = g;
		struct okv_msg rq;
		memcpy(&rq, &fm.slot->request, sizeof(rq));
		uint8_t *desc = (uint8_t *)fm.slot + OKV_SLOT_DESC_OFFSET;
		if (fm.nseen < 16) {
			struct seen *s = &fm.seen[fm.nseen++];
			s->msg = rq;
			memcpy(s->desc, desc, sizeof(s->desc));
		}
		struct okv_msg resp;
		memset(&resp, 0, sizeof(resp));
		resp.magic = OKV_MSG_MAGIC;
		resp.abi_version = OKV_ABI_VERSION;
		resp.request_id = rq.request_id;
		resp.epoch = rq.epoch;
		resp.generation = g + 1;
		/* A slow Manager: it has read the request and not answered yet. */
		while (__atomic_load_n(&fm.hold, __ATOMIC_SEQ_CST)) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
		fm.handler(&rq, desc, &resp);
		okvi_post_response(fm.slot, &resp);
	}
	return NULL;
}

static void *map_shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* A client around a slot in this process; *manager_sock is the Manager's end
 * of its bootstrap socket. */
static okv_client *fake_client(int *manager_sock)
{
	okv_client *c = calloc(1, sizeof(*c));
	int sv[2];

	if (!c || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		perror("fake client");
		exit(2);
	}
	c->sock = sv[0];
	*manager_sock = sv[1];
	c->slot_fd = c->doorbell_fd = -1;
	c->slot_bytes = SLOT_BYTES;
	c->slot = map_shared(SLOT_BYTES);
	c->db_bytes = sizeof(struct okv_doorbell);
	c->db = map_shared(c->db_bytes);
	c->event_fd = eventfd(0, EFD_CLOEXEC);
	c->pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (c->event_fd < 0 || c->pidfd < 0) {
		perror("eventfd/pidfd_open");
		exit(2);
	}
	c->reply.epoch = EPOCH;
	c->reply.client_token = TOKEN;
	c->reply.slot_index = 0;
	c->reply.desc_offset = OKV_SLOT_DESC_OFFSET;
	c->reply.desc_capacity = OKV_DEFAULT_DESC_CAPACITY;
	c->reply.initial_generation = 1;
	c->next_gen = 1;
	c->spin_ns = 20000;
	c->timeout_ms = 5000;
	return c;
}

static void fm_start(okv_client *c, handler_fn h)
{
	memset(&fm, 0, sizeof(fm));
	fm.slot = c->slot;
	fm.start_gen = c->slot->request.generation;
	fm.handler = h;
	fm.event_fd = c->event_fd;
	if (pthread_create(&fm.thr, NULL, fm_run, NULL) != 0) {
		perror("pthread_create");
		exit(2);
	}
}

static void fm_stop(void)
{
	__atomic_store_n(&fm.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(fm.thr, NULL);
}

static void fm_script(handler_fn h)
{
	fm.handler = h; /* main thread only, between calls */
	fm.nseen = 0;
	fm.polls = 0;
}

static struct okv_namespace test_ns(void)
{
	struct okv_namespace ns;
	for (int i = 0; i < 16; i++)
		ns.bytes[i] = (uint8_t)(0x10 + i);
	return ns;
}

static struct okv_block_hash test_hash(uint32_t i)
{
	struct okv_block_hash h;
	for (int k = 0; k < 16; k++)
		h.bytes[k] = (uint8_t)(i * 31 + (uint32_t)k);
	return h;
}

/* ---- okv_max_* -------------------------------------------------------------- */

static void test_max_entries(void)
{
	int ms;
	okv_client *c = fake_client(&ms);

	CHECK(okv_max_query_hashes(c) == (OKV_DEFAULT_DESC_CAPACITY - 64) / 16, "query: %u", okv_max_query_hashes(c));
	CHECK(okv_max_restore_entries(c) == (OKV_DEFAULT_DESC_CAPACITY - 64) / 8, "restore: %u", okv_max_restore_entries(c));
	CHECK(okv_max_publish_entries(c) == (OKV_DEFAULT_DESC_CAPACITY - 64) / 24, "publish: %u", okv_max_publish_entries(c));
	c->reply.desc_capacity = 64 + 24 * 3 + 23;
	CHECK(okv_max_publish_entries(c) == 3 && okv_max_query_hashes(c) == 5 && okv_max_restore_entries(c) == 11,
	      "a small area rounds down");
	c->reply.desc_capacity = 63;
	CHECK(okv_max_query_hashes(c) == 0 && okv_max_publish_entries(c) == 0 && okv_max_restore_entries(c) == 0,
	      "an area below the header holds nothing");
	CHECK(okv_max_query_hashes(NULL) == 0 && okv_max_publish_entries(NULL) == 0 &&
		      okv_max_restore_entries(NULL) == 0,
	      "NULL client");
	c->broken = 1;
	okv_close(c);
	close(ms);
}

/* ---- query ---------------------------------------------------------------------- */

static void write_result(uint8_t *desc, uint16_t status, uint32_t hits, uint64_t lease)
{
	struct okv_query_result r = {
		.magic = OKV_QUERY_RESULT_MAGIC,
		.schema = OKV_QUERY_SCHEMA,
		.status = status,
		.hit_count = hits,
		.lease_id = lease,
		.lease_bytes = hits * 4096ull,
		.block_bytes = 4096,
	};
	memcpy(desc, &r, sizeof(r));
}

static void q_hit(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	write_result(desc, OKV_STATUS_OK, 2, 77);
	resp->code = OKV_STATUS_OK;
	resp->arg0 = 2;
	resp->arg1 = 77;
}

static void q_miss(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	write_result(desc, OKV_STATUS_MISS, 0, 0);
	resp->code = OKV_STATUS_MISS;
}

static void q_disagree(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	write_result(desc, OKV_STATUS_OK, 3, 77);
	resp->code = OKV_STATUS_OK;
	resp->arg0 = 2;
	resp->arg1 = 77;
}

static void q_bad_magic(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	q_hit(rq, desc, resp);
	memcpy(desc, "XXXX", 4);
}

static void q_too_many_hits(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	write_result(desc, OKV_STATUS_OK, 9, 5);
	resp->code = OKV_STATUS_OK;
	resp->arg0 = 9;
	resp->arg1 = 5;
}

static void invalid_count_3(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	(void)desc;
	resp->code = OKV_STATUS_INVALID;
	resp->arg0 = OKV_FIELD_COUNT;
	resp->arg1 = 3;
}

static void unadmitted(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	(void)desc;
	resp->code = OKV_STATUS_UNADMITTED;
}

static void test_query(void)
{
	int ms;
	okv_client *c = fake_client(&ms);
	struct okv_namespace ns = test_ns();
	struct okv_block_hash hashes[4];
	struct okv_lease l;
	int rc;

	for (uint32_t i = 0; i < 4; i++)
		hashes[i] = test_hash(i);
	fm_start(c, q_hit);

	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == 0, "query hit: %d %s", rc, okv_last_error(c));
	CHECK(l.hit_count == 2 && l.lease_id == 77 && l.lease_bytes == 8192 && l.block_bytes == 4096 &&
		      l.reserved == 0,
	      "lease: hits %u id %llu bytes %llu block %llu", l.hit_count, (unsigned long long)l.lease_id,
	      (unsigned long long)l.lease_bytes, (unsigned long long)l.block_bytes);
	CHECK(fm.nseen == 1, "one request");
	{
		const struct seen *s = &fm.seen[0];
		struct okv_query_desc h;
		memcpy(&h, s->desc, sizeof(h));
		CHECK(s->msg.code == OKV_CMD_QUERY_BUNDLE && s->msg.desc_offset == OKV_SLOT_DESC_OFFSET &&
			      s->msg.desc_length == 64 + 16 * 4 && s->msg.arg0 == 0 && s->msg.arg1 == 0,
		      "request line: code %u offset %u length %u", s->msg.code, s->msg.desc_offset,
		      s->msg.desc_length);
		CHECK(h.magic == OKV_QUERY_MAGIC && h.schema == OKV_QUERY_SCHEMA && h.flags == 0 && h.op_id == 0 &&
			      h.revision == 0 && h.hash_count == 4 && h.request_id == 0 && h.group == 0 &&
			      h.recovery_first == 0 && h.recovery_count == 0,
		      "query header");
		CHECK(memcmp(&h.ns, &ns, sizeof(ns)) == 0, "namespace at offset 48");
		CHECK(memcmp(s->desc + 64, hashes, sizeof(hashes)) == 0, "hashes at offset 64");
	}

	fm_script(q_miss);
	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == 0 && l.hit_count == 0 && l.lease_id == 0, "miss: %d hits %u lease %llu", rc, l.hit_count,
	      (unsigned long long)l.lease_id);

	fm_script(q_disagree);
	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "hit_count") != NULL && l.lease_id == 0,
	      "result disagrees with arg0: %d %s", rc, okv_last_error(c));
	fm_script(q_bad_magic);
	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "field magic") != NULL, "bad result magic: %d %s", rc,
	      okv_last_error(c));
	fm_script(q_too_many_hits);
	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "more hits than hashes") != NULL,
	      "more hits than hashes: %d %s", rc, okv_last_error(c));

	fm_script(invalid_count_3);
	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == OKV_EINVALID && strcmp(okv_last_error(c), "Manager refused the request: field count, entry 3") == 0,
	      "invalid: %d \"%s\"", rc, okv_last_error(c));
	fm_script(unadmitted);
	rc = okv_query(c, &ns, hashes, 4, &l);
	CHECK(rc == OKV_EUNADMITTED, "unadmitted query: %d", rc);

	/* Local checks send nothing. */
	fm_script(q_hit);
	CHECK(okv_query(c, &ns, hashes, 0, &l) == -EINVAL, "0 hashes");
	CHECK(okv_query(c, &ns, hashes, okv_max_query_hashes(c) + 1, &l) == OKV_E2BIG, "one hash too many");
	CHECK(okv_query(c, NULL, hashes, 1, &l) == -EINVAL, "NULL namespace");
	CHECK(okv_query(c, &ns, NULL, 1, &l) == -EINVAL, "NULL hashes");
	CHECK(okv_query(c, &ns, hashes, 1, NULL) == -EINVAL, "NULL lease");
	CHECK(okv_query(NULL, &ns, hashes, 1, &l) == -EINVAL, "NULL client");
	CHECK(fm.nseen == 0, "nothing sent for refused arguments: %d", fm.nseen);
	/* Exactly the limit fits (hashes beyond 4 are whatever the area holds). */
	c->reply.desc_capacity = 64 + 16 * 4;
	CHECK(okv_query(c, &ns, hashes, 4, &l) == 0 && fm.nseen == 1, "4 hashes fill a 128-byte area");
	CHECK(okv_query(c, &ns, hashes, 5, &l) == OKV_E2BIG, "5 do not");

	fm_stop();
	c->broken = 1;
	okv_close(c);
	close(ms);
}

/* ---- buffers registration and publish ---------------------------------------- */

/* Queue a RegisterBuffersReply on the Manager end. */
static void queue_register_reply(int ms, uint32_t regions, uint64_t total, uint32_t first_id)
{
	Orbitkv__Lifecycle__V1__RegisterBuffersReply r = ORBITKV__LIFECYCLE__V1__REGISTER_BUFFERS_REPLY__INIT;
	uint8_t buf[64];
	r.regions = regions;
	r.total_bytes = total;
	r.first_buffer_id = first_id;
	size_t n = orbitkv__lifecycle__v1__register_buffers_reply__pack(&r, buf);
	if (okvi_frame_send(ms, OKV_FRAME_REGISTER_BUFFERS | OKV_FRAME_REPLY, EPOCH, buf, (uint32_t)n, NULL, 0) != 0)
		exit(2);
}

/* Read the RegisterBuffers request the client sent; returns the unpacked
 * request (free it) and the fd that came with it in *fd (close it). */
static Orbitkv__Lifecycle__V1__RegisterBuffersRequest *read_register_request(int ms, int *fd)
{
	struct okv_frame_header h;
	uint8_t hb[sizeof(h)];
	char err[256] = "";
	size_t got;
	int nfds = 0;

	*fd = -1;
	int rc = okvi_recv_exact_fds(ms, hb, sizeof(hb), -1, &got, fd, 1, &nfds, err, sizeof(err));
	CHECK(rc == 0 && nfds == 1, "request header with one fd: %d nfds %d %s", rc, nfds, err);
	rc = okvi_frame_header_check(hb, sizeof(hb), EPOCH, &h, err, sizeof(err));
	CHECK(rc == 0 && h.code == OKV_FRAME_REGISTER_BUFFERS, "header: %d code %u %s", rc, h.code, err);
	uint8_t *body = malloc(h.length + 1);
	rc = okvi_recv_exact_fds(ms, body, h.length, -1, &got, NULL, 0, NULL, err, sizeof(err));
	CHECK(rc == 0, "body: %d %s", rc, err);
	Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q =
		orbitkv__lifecycle__v1__register_buffers_request__unpack(NULL, h.length, body);
	free(body);
	return q;
}

static void test_register_buffer(void)
{
	int ms, fd;
	okv_client *c = fake_client(&ms);
	struct okv_buffer b;
	uint32_t id = 99;
	int rc;

	CHECK(okv_buffer_alloc(3, 64, 8, &b) == 0, "alloc");
	queue_register_reply(ms, 1, b.bytes, 2);
	rc = okv_register_buffer(c, &b, &id);
	CHECK(rc == 0 && id == 2, "register: %d id %u %s", rc, id, okv_last_error(c));
	CHECK(c->buf_count > 2 && c->buf_layers[2] == 3 && c->buf_layers[0] == 0, "layers recorded by id");
	{
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		CHECK(q && q->client_token == TOKEN && q->n_regions == 1, "request token and one region");
		if (q && q->n_regions == 1) {
			const Orbitkv__Lifecycle__V1__BufferRegion *r = q->regions[0];
			CHECK(r->fd_index == 0 && r->offset == 0 && r->bytes == b.bytes && r->layers == 3 &&
				      r->page_bytes == 64 && r->page_count == 8,
			      "region fields");
		}
		struct stat st1, st2;
		CHECK(fd >= 0 && fstat(fd, &st1) == 0 && fstat(b.fd, &st2) == 0 && st1.st_ino == st2.st_ino,
		      "the buffer's memfd travelled");
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}

	/* An error frame: OKV_EAPPLICATION with "field: message". */
	{
		Orbitkv__Lifecycle__V1__Error e = ORBITKV__LIFECYCLE__V1__ERROR__INIT;
		uint8_t buf[256];
		e.status = OKV_STATUS_INVALID;
		e.field = "regions[0].layers";
		e.message = "5000, want 1..4096";
		size_t n = orbitkv__lifecycle__v1__error__pack(&e, buf);
		if (okvi_frame_send(ms, OKV_FRAME_ERROR, EPOCH, buf, (uint32_t)n, NULL, 0) != 0)
			exit(2);
	}
	rc = okv_register_buffer(c, &b, &id);
	CHECK(rc == OKV_EAPPLICATION && strcmp(okv_last_error(c), "regions[0].layers: 5000, want 1..4096") == 0,
	      "error frame: %d \"%s\"", rc, okv_last_error(c));
	{
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}

	/* A reply that does not match the request is a protocol error. */
	queue_register_reply(ms, 2, b.bytes, 3);
	rc = okv_register_buffer(c, &b, &id);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "counts 2 regions") != NULL, "two regions: %d %s", rc,
	      okv_last_error(c));
	{
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}
	queue_register_reply(ms, 1, b.bytes, OKVI_MAX_BUFFER_ID + 1);
	rc = okv_register_buffer(c, &b, &id);
	CHECK(rc == OKV_EPROTO, "buffer id beyond the client's table: %d %s", rc, okv_last_error(c));
	{
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}

	struct okv_buffer zero;
	memset(&zero, 0, sizeof(zero));
	CHECK(okv_register_buffer(c, &zero, &id) == -EINVAL, "a zeroed buffer is refused before sending");
	CHECK(okv_register_buffer(c, NULL, &id) == -EINVAL, "NULL buffer");
	CHECK(okv_register_buffer(c, &b, NULL) == -EINVAL, "NULL id");
	okv_buffer_free(&b);
	c->broken = 1;
	okv_close(c);
	close(ms);
}

/* A RegisterBuffers that times out leaves the lifecycle stream out of sync
 * (its late reply would be read as the next call's): later lifecycle calls
 * fail with OKV_ECLOSED instead of reading it. */
static void test_lifecycle_timeout_desyncs(void)
{
	int ms, fd;
	okv_client *c = fake_client(&ms);
	struct okv_buffer b;
	uint32_t id = 0;

	CHECK(okv_buffer_alloc(1, 64, 4, &b) == 0, "alloc");
	c->timeout_ms = 50; /* nothing queued: the reply never comes */
	int rc = okv_register_buffer(c, &b, &id);
	CHECK(rc == OKV_ETIMEDOUT, "register without a reply: %d, want OKV_ETIMEDOUT", rc);
	{
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}
	queue_register_reply(ms, 1, b.bytes, 7); /* the late reply */
	c->timeout_ms = 5000;
	rc = okv_register_buffer(c, &b, &id);
	CHECK(rc == OKV_ECLOSED && strstr(okv_last_error(c), "reconnect") != NULL,
	      "register after a timeout: %d \"%s\", want OKV_ECLOSED", rc, okv_last_error(c));
	struct okv_health h;
	CHECK(okv_health(c, &h) == OKV_ECLOSED, "health after a timeout refused too");
	okv_buffer_free(&b);
	c->broken = 1;
	okv_close(c);
	close(ms);
}

/* Publish: store all but the first entry of every chunk. */
static void p_ok(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	struct okv_publish_desc h;
	memcpy(&h, desc, sizeof(h));
	resp->code = OKV_STATUS_OK;
	resp->arg0 = h.count - 1;
	resp->arg1 = 1;
}

/* First chunk Ok, then Unadmitted. */
static void p_then_unadmitted(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	if (fm.nseen == 1)
		p_ok(rq, desc, resp);
	else
		resp->code = OKV_STATUS_UNADMITTED;
}

static void test_publish(void)
{
	int ms, fd;
	okv_client *c = fake_client(&ms);
	struct okv_namespace ns = test_ns();
	struct okv_block_hash hashes[7];
	uint32_t pages[7];
	struct okv_publish_result res;
	struct okv_buffer b;
	uint32_t id;
	int rc;

	for (uint32_t i = 0; i < 7; i++) {
		hashes[i] = test_hash(100 + i);
		pages[i] = 6 - i;
	}
	CHECK(okv_buffer_alloc(5, 64, 8, &b) == 0, "alloc");
	queue_register_reply(ms, 1, b.bytes, 1);
	CHECK(okv_register_buffer(c, &b, &id) == 0 && id == 1, "register");
	{
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}
	fm_start(c, p_ok);

	/* 7 entries in chunks of 3: 3 + 3 + 1. */
	c->reply.desc_capacity = 64 + 24 * 3;
	rc = okv_publish(c, &ns, 1, hashes, pages, 7, &res);
	CHECK(rc == 0 && res.stored == 2 + 2 + 0 && res.present == 3, "publish: %d stored %u present %u %s", rc,
	      res.stored, res.present, okv_last_error(c));
	CHECK(fm.nseen == 3, "three chunks: %d", fm.nseen);
	for (int k = 0; k < fm.nseen && k < 3; k++) {
		const struct seen *s = &fm.seen[k];
		uint32_t want = k < 2 ? 3 : 1;
		struct okv_publish_desc h;
		memcpy(&h, s->desc, sizeof(h));
		CHECK(s->msg.code == OKV_CMD_PUBLISH && s->msg.desc_offset == OKV_SLOT_DESC_OFFSET &&
			      s->msg.desc_length == 64 + 24 * want,
		      "chunk %d request line: length %u", k, s->msg.desc_length);
		CHECK(h.magic == OKV_PUBLISH_MAGIC && h.schema == OKV_PUBLISH_SCHEMA && h.flags == 0 &&
			      h.buffer_id == 1 && h.count == want && h.layer_first == 0 && h.layer_count == 5 &&
			      h.reserved[0] == 0 && h.reserved[1] == 0 && h.reserved[2] == 0 &&
			      memcmp(&h.ns, &ns, sizeof(ns)) == 0,
		      "chunk %d header: buffer %u count %u layers %u+%u", k, h.buffer_id, h.count, h.layer_first,
		      h.layer_count);
		for (uint32_t i = 0; i < want; i++) {
			struct okv_publish_entry e;
			uint32_t at = (uint32_t)k * 3 + i;
			memcpy(&e, s->desc + 64 + 24 * i, sizeof(e));
			CHECK(memcmp(&e.hash, &hashes[at], 16) == 0 && e.page == pages[at] && e.reserved == 0,
			      "chunk %d entry %u: page %u, want %u", k, i, e.page, pages[at]);
		}
	}

	fm_script(p_then_unadmitted);
	rc = okv_publish(c, &ns, 1, hashes, pages, 7, &res);
	CHECK(rc == OKV_EUNADMITTED && res.stored == 2 && res.present == 1 && fm.nseen == 2,
	      "unadmitted second chunk: %d stored %u present %u chunks %d", rc, res.stored, res.present, fm.nseen);
	fm_script(invalid_count_3);
	rc = okv_publish(c, &ns, 1, hashes, pages, 7, &res);
	CHECK(rc == OKV_EINVALID && res.stored == 0 && fm.nseen == 1, "invalid first chunk: %d", rc);
	fm_script(p_ok);
	CHECK(okv_publish(c, &ns, 0, hashes, pages, 1, &res) == -EINVAL &&
		      strstr(okv_last_error(c), "buffer_id 0 was not registered") != NULL,
	      "unknown buffer id 0: %s", okv_last_error(c));
	CHECK(okv_publish(c, &ns, 1000, hashes, pages, 1, &res) == -EINVAL, "unknown buffer id 1000");
	CHECK(okv_publish(c, &ns, 1, NULL, pages, 1, &res) == -EINVAL, "NULL hashes");
	CHECK(okv_publish(c, &ns, 1, hashes, NULL, 1, &res) == -EINVAL, "NULL pages");
	CHECK(okv_publish(c, &ns, 1, hashes, pages, 0, &res) == 0 && res.stored == 0, "0 entries: nothing to do");
	CHECK(fm.nseen == 0, "nothing sent: %d", fm.nseen);

	fm_stop();
	okv_buffer_free(&b);
	c->broken = 1;
	okv_close(c);
	close(ms);
}

/* ---- restore, poll, wait, release -------------------------------------------- */

static void r_ok(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)desc;
	resp->code = OKV_STATUS_OK;
	if (rq->code == OKV_CMD_RESTORE)
		resp->arg0 = 555;
}

static void poll_loading(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	(void)desc;
	fm.polls++;
	resp->code = OKV_STATUS_LOADING;
}

static void poll_internal(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	(void)desc;
	resp->code = OKV_STATUS_INTERNAL;
}

static void poll_unknown(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	(void)desc;
	resp->code = OKV_STATUS_INVALID;
	resp->arg0 = OKV_FIELD_OP_ID;
}

/* Loading for the first fm.ready_after polls; the poll that finds the copy
 * done answers Ok. The eventfd is written when the copy "ends", at the
 * ready_after-th poll, as the Manager's copy worker would. */
static void restore_ready(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	(void)rq;
	(void)desc;
	fm.polls++;
	if (fm.polls < fm.ready_after) {
		resp->code = OKV_STATUS_LOADING;
		return;
	}
	if (fm.polls == fm.ready_after) {
		uint64_t one = 1;
		if (write(fm.event_fd, &one, sizeof(one)) != sizeof(one))
			exit(2);
		resp->code = OKV_STATUS_LOADING;
		return;
	}
	resp->code = OKV_STATUS_OK;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void test_restore(void)
{
	int ms;
	okv_client *c = fake_client(&ms);
	struct okv_restore_entry ent[3] = { { 0, 7 }, { 1, 3 }, { 2, 0 } };
	uint64_t op = 1;
	int rc;

	fm_start(c, r_ok);
	rc = okv_restore(c, 77, 4, ent, 3, &op);
	CHECK(rc == 0 && op == 555, "restore: %d op %llu", rc, (unsigned long long)op);
	{
		const struct seen *s = &fm.seen[0];
		struct okv_restore_desc h;
		memcpy(&h, s->desc, sizeof(h));
		CHECK(s->msg.code == OKV_CMD_RESTORE && s->msg.desc_offset == OKV_SLOT_DESC_OFFSET &&
			      s->msg.desc_length == 64 + 8 * 3,
		      "request line: length %u", s->msg.desc_length);
		CHECK(h.magic == OKV_RESTORE_MAGIC && h.schema == OKV_RESTORE_SCHEMA && h.flags == 0 &&
			      h.buffer_id == 4 && h.count == 3 && h.lease_id == 77,
		      "restore header");
		int zero = 1;
		for (int i = 0; i < 5; i++)
			zero &= h.reserved[i] == 0;
		CHECK(zero, "reserved words are zero");
		CHECK(memcmp(s->desc + 64, ent, sizeof(ent)) == 0, "entries at offset 64");
	}
	CHECK(okv_restore(c, 77, 4, ent, 0, &op) == -EINVAL && op == 0, "0 entries");
	CHECK(okv_restore(c, 77, 4, ent, okv_max_restore_entries(c) + 1, &op) == OKV_E2BIG, "too many entries");
	CHECK(okv_restore(c, 77, 4, NULL, 1, &op) == -EINVAL, "NULL entries");
	CHECK(okv_restore(c, 77, 4, ent, 1, NULL) == -EINVAL, "NULL op id");

	/* Poll: each status maps to its code; the op id travels in arg0. */
	fm_script(r_ok);
	CHECK(okv_restore_poll(c, 555) == 0, "poll done");
	CHECK(fm.seen[0].msg.code == OKV_CMD_RESTORE_POLL && fm.seen[0].msg.arg0 == 555 &&
		      fm.seen[0].msg.desc_length == 0 && fm.seen[0].msg.desc_offset == 0,
	      "poll request line");
	fm_script(poll_loading);
	CHECK(okv_restore_poll(c, 555) == OKV_EPENDING, "poll loading");
	fm_script(poll_internal);
	CHECK(okv_restore_poll(c, 555) == OKV_EINTERNAL, "poll failed copy");
	fm_script(poll_unknown);
	rc = okv_restore_poll(c, 556);
	CHECK(rc == OKV_EINVALID && strstr(okv_last_error(c), "field op_id") != NULL, "poll unknown: %d %s", rc,
	      okv_last_error(c));

	/* Wait: wakes on the eventfd, polls again, returns 0. */
	fm_script(restore_ready);
	fm.ready_after = 3;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = okv_restore_wait(c, 555, 5000);
	CHECK(rc == 0 && fm.polls == 4, "wait: %d after %d polls", rc, fm.polls);
	CHECK(ms_since(&t0) < 1000, "wait took %.1f ms", ms_since(&t0));
	{
		uint64_t v;
		struct pollfd p = { .fd = c->event_fd, .events = POLLIN };
		CHECK(poll(&p, 1, 0) == 0 || read(c->event_fd, &v, sizeof(v)) < 0, "wait drained the eventfd");
	}
	/* Without a notification every round is at most 50 ms: the deadline. */
	fm_script(poll_loading);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = okv_restore_wait(c, 555, 120);
	double took = ms_since(&t0);
	CHECK(rc == OKV_ETIMEDOUT && took >= 115 && took < 2000, "wait timeout: %d after %.1f ms", rc, took);
	/* 0, 50, 100, 120 ms on an idle machine; fewer when it is loaded. */
	CHECK(fm.polls >= 2 && fm.polls <= 10, "polled %d times in 120 ms (rounds of 50 ms)", fm.polls);
	fm_script(poll_internal);
	CHECK(okv_restore_wait(c, 555, 1000) == OKV_EINTERNAL, "wait: failed copy");

	/* Release sends the lease id in arg0. */
	fm_script(r_ok);
	CHECK(okv_release(c, 77) == 0, "release");
	CHECK(fm.seen[0].msg.code == OKV_CMD_RELEASE && fm.seen[0].msg.arg0 == 77 && fm.seen[0].msg.desc_length == 0,
	      "release request line");
	fm_script(invalid_count_3);
	CHECK(okv_release(c, 78) == OKV_EINVALID, "release refused");

	/* A Manager that exits during a wait: its pidfd becomes readable. */
	{
		pid_t child = fork();
		if (child == 0)
			_exit(0);
		int pfd = (int)syscall(SYS_pidfd_open, child, 0);
		CHECK(pfd >= 0, "pidfd of the child");
		waitpid(child, NULL, 0);
		int mine = c->pidfd;
		c->pidfd = pfd;
		fm_script(poll_loading);
		rc = okv_restore_wait(c, 555, 2000);
		CHECK(rc == OKV_EMANAGER_DIED, "wait with a dead Manager: %d", rc);
		CHECK(okv_restore_poll(c, 555) == OKV_ECLOSED, "the client is closed afterwards");
		c->pidfd = mine;
		close(pfd);
	}
	fm_stop();
	okv_close(c);
	close(ms);
}

/* A descriptor request that timed out keeps the area until the Manager
 * answers it: the next operation must not rewrite it meanwhile. */
static void test_desc_busy_after_timeout(void)
{
	int ms;
	okv_client *c = fake_client(&ms);
	struct okv_namespace ns = test_ns();
	struct okv_block_hash h1[2] = { test_hash(1), test_hash(2) };
	struct okv_lease l;
	uint8_t before[64 + 32];
	int rc;

	fm_start(c, q_miss);
	c->timeout_ms = 60;
	__atomic_store_n(&fm.hold, 1, __ATOMIC_SEQ_CST);
	rc = okv_query(c, &ns, h1, 2, &l);
	CHECK(rc == OKV_ETIMEDOUT, "held query times out: %d", rc);
	memcpy(before, okvi_desc(c), sizeof(before));
	rc = okvi_desc_acquire(c);
	CHECK(rc == OKV_ETIMEDOUT && strstr(okv_last_error(c), "may still read the descriptor") != NULL,
	      "area busy while the Manager holds the request: %d %s", rc, okv_last_error(c));
	rc = okv_query(c, &ns, h1, 1, &l);
	CHECK(rc == OKV_ETIMEDOUT, "a second query cannot start: %d", rc);
	CHECK(memcmp(before, okvi_desc(c), sizeof(before)) == 0, "the descriptor was not rewritten");
	/* The Manager answers late: the area is free again. */
	__atomic_store_n(&fm.hold, 0, __ATOMIC_SEQ_CST);
	c->timeout_ms = 5000;
	for (int i = 0; i < 5000 && __atomic_load_n(&c->slot->response.generation, __ATOMIC_ACQUIRE) < 2; i++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	CHECK(okvi_desc_acquire(c) == 0 && c->desc_busy_gen == 0, "free once the late answer is posted");
	rc = okv_query(c, &ns, h1, 2, &l);
	CHECK(rc == 0 && l.hit_count == 0, "the next query works: %d %s", rc, okv_last_error(c));
	fm_stop();
	c->broken = 1;
	okv_close(c);
	close(ms);
}

/* ---- query tickets ----------------------------------------------------------- */

/* One scripted answer of the fake Manager (tk_handler pops them in order).
 * Ok, Miss and Candidates write an okv_query_result over the descriptor
 * echoing the request's op id and revision (plus op_adj/rev_adj, to forge
 * a wrong echo) with arg0 = hits and arg1 = lease; every other status (and
 * raw) posts arg0/arg1 as given without a result. */
struct tk_answer {
	uint16_t status;
	uint32_t hits;
	uint64_t lease;
	uint32_t ram;
	uint32_t first;
	uint64_t op_adj;
	uint32_t rev_adj;
	uint32_t result_hits_adj; /* added to the result's hit_count only */
	uint64_t arg0, arg1;
	int raw;
	int delay_ms;             /* answer this late */
};

static struct {
	struct tk_answer q[16];
	int n, next;
} tk;

static void tk_script(const struct tk_answer *a, int n)
{
	fm_script(fm.handler);
	if (n > 0)
		memcpy(tk.q, a, (size_t)n * sizeof(*a));
	tk.n = n;
	tk.next = 0;
}

#define TK_SCRIPT(...)                                                          \
	do {                                                                    \
		const struct tk_answer tk_a_[] = { __VA_ARGS__ };               \
		tk_script(tk_a_, (int)(sizeof(tk_a_) / sizeof(tk_a_[0])));      \
	} while (0)

static void tk_handler(const struct okv_msg *rq, uint8_t *desc, struct okv_msg *resp)
{
	if (tk.next >= tk.n) {
		resp->code = OKV_STATUS_INTERNAL; /* unscripted request */
		return;
	}
	const struct tk_answer *a = &tk.q[tk.next++];
	if (a->delay_ms) {
		struct timespec ts = { a->delay_ms / 1000, (long)(a->delay_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	uint64_t op;
	uint32_t rev;
	if (rq->code == OKV_CMD_QUERY_BUNDLE) {
		struct okv_query_desc h;
		memcpy(&h, desc, sizeof(h));
		op = h.op_id;
		rev = h.revision;
	} else {
		op = rq->arg0;
		rev = (uint32_t)rq->arg1;
	}
	resp->code = a->status;
	if (a->raw || (a->status != OKV_STATUS_OK && a->status != OKV_STATUS_MISS &&
		       a->status != OKV_STATUS_CANDIDATES)) {
		resp->arg0 = a->arg0;
		resp->arg1 = a->arg1;
		return;
	}
	struct okv_query_result r = {
		.magic = OKV_QUERY_RESULT_MAGIC,
		.schema = OKV_QUERY_SCHEMA,
		.status = a->status,
		.hit_count = a->hits + a->result_hits_adj,
		.ram_hits = a->ram,
		.lease_id = a->lease,
		.lease_bytes = a->lease ? a->hits * 4096ull : 0,
		.block_bytes = a->lease ? 4096 : 0,
		.op_id = op + a->op_adj,
		.revision = rev + a->rev_adj,
		.first = a->first,
	};
	memcpy(desc, &r, sizeof(r));
	resp->arg0 = a->hits;
	resp->arg1 = a->lease;
}

/* The query header the fake Manager saw in request k. */
static struct okv_query_desc seen_query(int k)
{
	struct okv_query_desc h;
	memcpy(&h, fm.seen[k].desc, sizeof(h));
	return h;
}

/* Whether request k was a Poll/Claim of (op, rev) with a zeroed 64-byte
 * descriptor. */
static int seen_ticket_msg(int k, uint16_t code, uint64_t op, uint32_t rev)
{
	static const uint8_t zero[64];
	const struct seen *s = &fm.seen[k];
	return s->msg.code == code && s->msg.arg0 == op && s->msg.arg1 == rev &&
	       s->msg.desc_offset == OKV_SLOT_DESC_OFFSET && s->msg.desc_length == 64 &&
	       memcmp(s->desc, zero, 64) == 0;
}

/* A client, a fake Manager running tk_handler and a batch of 6 hashes. */
static okv_client *tk_setup(int *ms, okv_block_hashes **batch, struct okv_block_hash hashes[6])
{
	okv_client *c = fake_client(ms);
	c->next_op_id = 1; /* as okv_connect sets it */
	for (uint32_t i = 0; i < 6; i++)
		hashes[i] = test_hash(200 + i);
	CHECK(okv_block_hashes_new(hashes, 6, batch) == 0, "batch of 6");
	fm_start(c, tk_handler);
	return c;
}

static void tk_teardown(okv_client *c, int ms, okv_block_hashes *batch)
{
	fm_stop();
	okv_block_hashes_unref(batch);
	c->broken = 1;
	okv_close(c);
	close(ms);
}

static void test_block_hashes(void)
{
	struct okv_block_hash h[3] = { test_hash(1), test_hash(2), test_hash(3) };
	okv_block_hashes *b = (okv_block_hashes *)&h; /* overwritten */

	CHECK(okv_block_hashes_new(h, 0, &b) == -EINVAL && b == NULL, "0 hashes");
	CHECK(okv_block_hashes_new(NULL, 1, &b) == -EINVAL, "NULL hashes");
	CHECK(okv_block_hashes_new(h, 1, NULL) == -EINVAL, "NULL out");
	CHECK(okv_block_hashes_new(h, 3, &b) == 0 && b != NULL, "new");
	h[1] = test_hash(9); /* the batch holds a copy */
	CHECK(okv_block_hashes_len(b) == 3, "len 3");
	{
		struct okv_block_hash want = test_hash(2);
		CHECK(memcmp(&okv_block_hashes_data(b)[1], &want, 16) == 0, "the batch copied the hashes");
	}
	CHECK(okv_block_hashes_ref(b) == b, "ref returns the batch");
	okv_block_hashes_unref(b); /* 2 → 1: still readable (ASan would catch a free) */
	CHECK(okv_block_hashes_len(b) == 3, "alive after one unref");
	okv_block_hashes_unref(b);
	okv_block_hashes_unref(NULL);
	CHECK(okv_block_hashes_len(NULL) == 0 && okv_block_hashes_data(NULL) == NULL, "NULL batch");
}

/* submit → Loading → poll Loading → poll Ok: the descriptor, the Poll line
 * and the answer; then a retired ticket sends nothing. */
static void test_ticket_submit_poll(void)
{
	int ms;
	okv_block_hashes *batch;
	struct okv_block_hash hashes[6];
	okv_client *c = tk_setup(&ms, &batch, hashes);
	struct okv_namespace ns = test_ns();
	struct okv_query_spec spec = { .ns = ns, .hashes = batch, .prefix_len = 4, .flags = OKV_QUERY_WAIT_FOR_FULL_PREFIX,
				       .request_id = 42, .group = 7 };
	struct okv_query_answer a;
	okv_ticket *t = NULL;
	int rc;

	TK_SCRIPT({ .status = OKV_STATUS_LOADING, .arg0 = 1 }, { .status = OKV_STATUS_LOADING, .arg0 = 2 },
		  { .status = OKV_STATUS_OK, .hits = 3, .lease = 99, .ram = 2 });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EPENDING && t != NULL, "submit answers Loading: %d %s", rc, okv_last_error(c));
	CHECK(a.status == OKV_STATUS_LOADING && a.hit_count == 1 && a.op_id == 1 && a.revision == 1 && a.lease_id == 0,
	      "Loading answer: status %u hits %u op %llu rev %u", a.status, a.hit_count, (unsigned long long)a.op_id,
	      a.revision);
	CHECK(okv_ticket_live(t) && okv_ticket_op_id(t) == 1 && okv_ticket_revision(t) == 1, "live ticket 1 rev 1");
	CHECK(c->next_op_id == 2, "op id counter moved: %llu", (unsigned long long)c->next_op_id);
	{
		struct okv_query_desc h = seen_query(0);
		const struct seen *s = &fm.seen[0];
		CHECK(s->msg.code == OKV_CMD_QUERY_BUNDLE && s->msg.desc_length == 64 + 16 * 4 && s->msg.arg0 == 0 &&
			      s->msg.arg1 == 0,
		      "QueryBundle line: length %u", s->msg.desc_length);
		CHECK(h.magic == OKV_QUERY_MAGIC && h.schema == OKV_QUERY_SCHEMA &&
			      h.flags == OKV_QUERY_WAIT_FOR_FULL_PREFIX && h.op_id == 1 && h.revision == 1 &&
			      h.hash_count == 4 && h.request_id == 42 && h.group == 7 && h.recovery_first == 0 &&
			      h.recovery_count == 0 && memcmp(&h.ns, &ns, 16) == 0,
		      "ticket header: op %llu rev %u count %u flags %u", (unsigned long long)h.op_id, h.revision,
		      h.hash_count, h.flags);
		CHECK(memcmp(s->desc + 64, hashes, 4 * 16) == 0, "the view's 4 hashes at offset 64");
	}
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EPENDING && a.status == OKV_STATUS_LOADING && a.hit_count == 2 && okv_ticket_live(t),
	      "poll Loading: %d hits %u", rc, a.hit_count);
	CHECK(seen_ticket_msg(1, OKV_CMD_POLL, 1, 1), "Poll line: arg0 op id, arg1 revision, zeroed 64-byte area");
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == 0, "poll Ok: %d %s", rc, okv_last_error(c));
	CHECK(a.status == OKV_STATUS_OK && a.hit_count == 3 && a.ram_hits == 2 && a.lease_id == 99 &&
		      a.lease_bytes == 3 * 4096 && a.block_bytes == 4096 && a.op_id == 1 && a.revision == 1 &&
		      a.first == 0,
	      "Ok answer: hits %u ram %u lease %llu", a.hit_count, a.ram_hits, (unsigned long long)a.lease_id);
	CHECK(!okv_ticket_live(t), "terminal answer retires the ticket");
	CHECK(fm.nseen == 3, "three requests: %d", fm.nseen);

	/* Retired: refused locally, nothing sent, also by revise/claim/cancel. */
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EINVALID && strstr(okv_last_error(c), "ticket retired") != NULL, "retired poll: %d %s", rc,
	      okv_last_error(c));
	spec.prefix_len = 5;
	CHECK(okv_ticket_revise(c, t, &spec, &a) == OKV_EINVALID, "retired revise");
	CHECK(okv_ticket_claim(c, t, &a) == OKV_EINVALID, "retired claim");
	CHECK(okv_ticket_cancel(c, t) == OKV_EINVALID, "retired cancel");
	okv_ticket_free(c, t); /* retired: no CancelQuery */
	CHECK(fm.nseen == 3, "a retired ticket sends nothing: %d requests", fm.nseen);

	/* A terminal submit (Miss) returns a retired ticket; the next op id is 2. */
	spec.prefix_len = 0;
	spec.flags = 0;
	TK_SCRIPT({ .status = OKV_STATUS_MISS });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == 0 && t && !okv_ticket_live(t) && a.status == OKV_STATUS_MISS && a.op_id == 2 &&
		      seen_query(0).hash_count == 6,
	      "terminal submit of the whole batch: %d op %llu", rc, (unsigned long long)a.op_id);
	okv_ticket_free(c, t);
	CHECK(fm.nseen == 1, "nothing sent by freeing a retired ticket");

	/* Unadmitted: no ticket, the op id is spent. */
	TK_SCRIPT({ .status = OKV_STATUS_UNADMITTED });
	t = (okv_ticket *)&a;
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EUNADMITTED && t == NULL, "unadmitted: %d, ticket %p", rc, (void *)t);
	TK_SCRIPT({ .status = OKV_STATUS_LOADING });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EPENDING && okv_ticket_op_id(t) == 4, "the next ticket is op 4: %llu",
	      (unsigned long long)okv_ticket_op_id(t));

	/* Local refusals send nothing and spend no op id. */
	fm_script(tk_handler);
	tk.n = 0;
	okv_ticket *u = NULL;
	spec.prefix_len = 7;
	CHECK(okv_ticket_submit(c, &spec, &u, &a) == -EINVAL && u == NULL, "prefix beyond the batch");
	spec.prefix_len = 0;
	spec.hashes = NULL;
	CHECK(okv_ticket_submit(c, &spec, &u, &a) == -EINVAL, "no batch");
	spec.hashes = batch;
	spec.flags = 1u << 16;
	CHECK(okv_ticket_submit(c, &spec, &u, &a) == -EINVAL && strstr(okv_last_error(c), "16-bit") != NULL,
	      "flags beyond 16 bits: %s", okv_last_error(c));
	spec.flags = 0;
	c->reply.desc_capacity = 64 + 16 * 5;
	CHECK(okv_ticket_submit(c, &spec, &u, &a) == OKV_E2BIG && u == NULL, "view longer than the area");
	c->reply.desc_capacity = OKV_DEFAULT_DESC_CAPACITY;
	CHECK(okv_ticket_submit(c, NULL, &u, &a) == -EINVAL && okv_ticket_submit(c, &spec, NULL, &a) == -EINVAL,
	      "NULL spec, NULL out");
	CHECK(fm.nseen == 0 && c->next_op_id == 5, "nothing sent, op id unspent: %d %llu", fm.nseen,
	      (unsigned long long)c->next_op_id);

	/* Freeing a live ticket cancels it (best effort). */
	TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1, .arg0 = 1 });
	okv_ticket_free(c, t);
	CHECK(fm.nseen == 1 && fm.seen[0].msg.code == OKV_CMD_CANCEL_QUERY && fm.seen[0].msg.arg0 == 4 &&
		      fm.seen[0].msg.arg1 == 1 && fm.seen[0].msg.desc_length == 0,
	      "free of a live ticket sends CancelQuery(4, 1)");
	tk_teardown(c, ms, batch);
}

/* Revise: the same view is a poll; a changed view bumps the revision and
 * resends with the ticket's request id and group. */
static void test_ticket_revise(void)
{
	int ms;
	okv_block_hashes *batch, *twin;
	struct okv_block_hash hashes[6];
	okv_client *c = tk_setup(&ms, &batch, hashes);
	struct okv_query_spec spec = { .ns = test_ns(), .hashes = batch, .prefix_len = 3, .request_id = 42, .group = 7 };
	struct okv_query_answer a;
	okv_ticket *t = NULL;
	int rc;

	CHECK(okv_block_hashes_new(hashes, 6, &twin) == 0, "a second batch with the same hashes");
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_LOADING, .arg0 = 1 },
		  { .status = OKV_STATUS_LOADING, .arg0 = 1 }, { .status = OKV_STATUS_LOADING },
		  { .status = OKV_STATUS_LOADING },
		  { .status = OKV_STATUS_INVALID, .arg0 = OKV_FIELD_REVISION },
		  { .status = OKV_STATUS_OK, .hits = 2, .lease = 5, .ram = 2 });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EPENDING, "submit: %d", rc);

	/* The same batch, length, flags, namespace and range: a poll. */
	struct okv_query_spec same = spec;
	same.prefix_len = 0 + 3;
	same.request_id = 1000; /* ignored anyway */
	rc = okv_ticket_revise(c, t, &same, &a);
	CHECK(rc == OKV_EPENDING && okv_ticket_revision(t) == 1 && seen_ticket_msg(1, OKV_CMD_POLL, 1, 1),
	      "same view is a poll: %d rev %u code %u", rc, okv_ticket_revision(t), fm.seen[1].msg.code);

	/* A longer prefix: revision 2, same op id, the ticket's request id. */
	struct okv_query_spec longer = spec;
	longer.prefix_len = 5;
	longer.request_id = 43;
	longer.group = 8;
	rc = okv_ticket_revise(c, t, &longer, &a);
	{
		struct okv_query_desc h = seen_query(2);
		CHECK(rc == OKV_EPENDING && okv_ticket_revision(t) == 2 && a.revision == 2 &&
			      fm.seen[2].msg.code == OKV_CMD_QUERY_BUNDLE && h.op_id == 1 && h.revision == 2 &&
			      h.hash_count == 5 && h.request_id == 42 && h.group == 7 &&
			      fm.seen[2].msg.desc_length == 64 + 16 * 5,
		      "longer prefix: %d rev %u count %u request %llu group %llu", rc, okv_ticket_revision(t),
		      h.hash_count, (unsigned long long)h.request_id, (unsigned long long)h.group);
	}
	/* Identity, not contents: another batch with the same hashes resends. */
	struct okv_query_spec other = longer;
	other.hashes = twin;
	rc = okv_ticket_revise(c, t, &other, &a);
	CHECK(rc == OKV_EPENDING && okv_ticket_revision(t) == 3 && fm.seen[3].msg.code == OKV_CMD_QUERY_BUNDLE,
	      "another batch pointer is a new revision: rev %u", okv_ticket_revision(t));
	okv_block_hashes_unref(twin); /* the ticket holds its own reference */
	/* Different flags: a new revision. */
	other.flags = OKV_QUERY_WAIT_FOR_FULL_PREFIX;
	rc = okv_ticket_revise(c, t, &other, &a);
	CHECK(rc == OKV_EPENDING && okv_ticket_revision(t) == 4 && seen_query(4).flags == OKV_QUERY_WAIT_FOR_FULL_PREFIX &&
		      memcmp(fm.seen[4].desc + 64, hashes, 5 * 16) == 0,
	      "new flags: rev %u", okv_ticket_revision(t));
	/* Refused: the live revision stays. */
	other.prefix_len = 6;
	rc = okv_ticket_revise(c, t, &other, &a);
	CHECK(rc == OKV_EINVALID && okv_ticket_revision(t) == 4 && okv_ticket_live(t) &&
		      strstr(okv_last_error(c), "field revision") != NULL,
	      "refused revision keeps revision 4: %d rev %u %s", rc, okv_ticket_revision(t), okv_last_error(c));
	/* The next poll asks revision 4 and checks hits against its view of 5. */
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == 0 && a.revision == 4 && a.hit_count == 2 && seen_ticket_msg(6, OKV_CMD_POLL, 1, 4) && !okv_ticket_live(t),
	      "poll of revision 4: %d %s", rc, okv_last_error(c));
	okv_ticket_free(c, t);

	/* Expiry: Timeout is OKV_EEXPIRED (not OKV_ETIMEDOUT) and retires. */
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_TIMEOUT });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EPENDING, "submit: %d", rc);
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EEXPIRED && !okv_ticket_live(t) && strstr(okv_last_error(c), "expired") != NULL,
	      "expired: %d %s", rc, okv_last_error(c));
	CHECK(okv_ticket_revise(c, t, &longer, &a) == OKV_EINVALID && fm.nseen == 2, "expired ticket sends nothing");
	okv_ticket_free(c, t);

	/* An Invalid op id (retired at the Manager) retires it here too. */
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_INVALID, .arg0 = OKV_FIELD_OP_ID });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EINVALID && !okv_ticket_live(t), "unknown op id retires: %d", rc);
	okv_ticket_free(c, t);
	tk_teardown(c, ms, batch);
}

/* PREPARE: poll reports readiness (Candidates, still live), Claim takes it. */
static void test_ticket_claim(void)
{
	int ms;
	okv_block_hashes *batch;
	struct okv_block_hash hashes[6];
	okv_client *c = tk_setup(&ms, &batch, hashes);
	struct okv_query_spec spec = { .ns = test_ns(), .hashes = batch, .flags = OKV_QUERY_PREPARE };
	struct okv_query_answer a;
	okv_ticket *t = NULL;
	int rc;

	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_CANDIDATES, .hits = 4, .ram = 4 },
		  { .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_OK, .hits = 4, .lease = 55, .ram = 4 });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit PREPARE");
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EPENDING && a.status == OKV_STATUS_CANDIDATES && a.hit_count == 4 && okv_ticket_live(t),
	      "prepared: %d status %u hits %u", rc, a.status, a.hit_count);
	rc = okv_ticket_claim(c, t, &a);
	CHECK(rc == OKV_EPENDING && a.status == OKV_STATUS_LOADING && okv_ticket_live(t) &&
		      seen_ticket_msg(2, OKV_CMD_CLAIM, 1, 1),
	      "claim while preparing: %d", rc);
	rc = okv_ticket_claim(c, t, &a);
	CHECK(rc == 0 && a.status == OKV_STATUS_OK && a.lease_id == 55 && a.hit_count == 4 && !okv_ticket_live(t),
	      "claim Ok: %d lease %llu %s", rc, (unsigned long long)a.lease_id, okv_last_error(c));
	okv_ticket_free(c, t);

	/* A claim of a ticket that is not a preparation is refused locally: the
	 * Manager would answer Unadmitted and keep it live (never orphan it). */
	{
		struct okv_query_spec plain = spec;
		plain.flags = 0;
		TK_SCRIPT({ .status = OKV_STATUS_LOADING });
		CHECK(okv_ticket_submit(c, &plain, &t, &a) == OKV_EPENDING, "submit plain");
		rc = okv_ticket_claim(c, t, &a);
		CHECK(rc == -EINVAL && okv_ticket_live(t) && strstr(okv_last_error(c), "not a preparation") != NULL,
		      "claim of a plain ticket: %d %s", rc, okv_last_error(c));
		TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1, .arg0 = 1 });
		okv_ticket_free(c, t); /* still live: cancelled */
	}

	/* Unadmitted claim (expired, revised): retired. */
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_UNADMITTED });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	rc = okv_ticket_claim(c, t, &a);
	CHECK(rc == OKV_EUNADMITTED && !okv_ticket_live(t), "unadmitted claim retires: %d", rc);
	okv_ticket_free(c, t);

	/* A claim answered Candidates is malformed. */
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_CANDIDATES, .hits = 1 });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	rc = okv_ticket_claim(c, t, &a);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "Claim") != NULL, "claim Candidates: %d %s", rc,
	      okv_last_error(c));
	TK_SCRIPT({ .status = OKV_STATUS_MISS });
	rc = okv_ticket_claim(c, t, &a);
	CHECK(rc == 0 && a.status == OKV_STATUS_MISS && !okv_ticket_live(t), "claim Miss: %d", rc);
	okv_ticket_free(c, t);

	/* Cancel: Ok (arg0 1) retires; Timeout is OKV_EEXPIRED and retires;
	 * Ok with arg0 ≠ 1 is malformed. */
	spec.flags = 0;
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_OK, .raw = 1, .arg0 = 1 });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	rc = okv_ticket_cancel(c, t);
	CHECK(rc == 0 && !okv_ticket_live(t) && fm.seen[1].msg.code == OKV_CMD_CANCEL_QUERY &&
		      fm.seen[1].msg.arg0 == okv_ticket_op_id(t) && fm.seen[1].msg.arg1 == 1 &&
		      fm.seen[1].msg.desc_length == 0,
	      "cancel: %d", rc);
	CHECK(okv_ticket_cancel(c, t) == OKV_EINVALID && fm.nseen == 2, "second cancel refused locally");
	okv_ticket_free(c, t);
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_TIMEOUT });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	CHECK(okv_ticket_cancel(c, t) == OKV_EEXPIRED && !okv_ticket_live(t), "cancel of an expired ticket");
	okv_ticket_free(c, t);
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_OK, .raw = 1, .arg0 = 0 },
		  { .status = OKV_STATUS_OK, .raw = 1, .arg0 = 1 });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	rc = okv_ticket_cancel(c, t);
	CHECK(rc == OKV_EPROTO && okv_ticket_live(t), "cancel Ok arg0 0 is malformed: %d", rc);
	okv_ticket_free(c, t); /* live: cancels again */
	CHECK(fm.nseen == 3, "free cancelled the still-live ticket: %d", fm.nseen);
	tk_teardown(c, ms, batch);
}

/* Results that disagree with the request are OKV_EPROTO naming the field. */
static void test_ticket_malformed(void)
{
	int ms;
	okv_block_hashes *batch;
	struct okv_block_hash hashes[6];
	okv_client *c = tk_setup(&ms, &batch, hashes);
	struct okv_query_spec spec = { .ns = test_ns(), .hashes = batch, .prefix_len = 4 };
	struct okv_query_answer a;
	okv_ticket *t = NULL;
	int rc;

	static const struct {
		const char *name;
		uint32_t flags;
		struct tk_answer answer;
		const char *field;
	} cases[] = {
		{ "wrong op id", 0, { .status = OKV_STATUS_OK, .hits = 1, .lease = 3, .op_adj = 1 }, "op_id" },
		{ "wrong revision", 0, { .status = OKV_STATUS_MISS, .rev_adj = 1 }, "revision" },
		{ "more hits than hashes", 0, { .status = OKV_STATUS_OK, .hits = 5, .lease = 3 }, "more hits than hashes" },
		{ "ram hits beyond the view", 0, { .status = OKV_STATUS_CANDIDATES, .hits = 1, .ram = 5 }, "ram_hits" },
		{ "result hits differ from arg0", 0, { .status = OKV_STATUS_OK, .hits = 1, .lease = 3, .result_hits_adj = 1 },
		  "hit_count (differs from the response's arg0)" },
		{ "Ok without a lease", 0, { .status = OKV_STATUS_OK, .hits = 2 }, "Ok needs at least one hit" },
		{ "Candidates to a plain query", 0, { .status = OKV_STATUS_CANDIDATES, .hits = 2 }, "Candidates answers only" },
		{ "Candidates with a lease", OKV_QUERY_DISCOVER, { .status = OKV_STATUS_CANDIDATES, .hits = 2, .lease = 9 },
		  "Candidates carries no lease" },
		{ "WARMUP leased", OKV_QUERY_WARMUP, { .status = OKV_STATUS_OK, .hits = 2, .lease = 9 }, "never leased" },
		{ "prefix lease not at position 0", 0, { .status = OKV_STATUS_OK, .hits = 2, .lease = 9, .first = 1 },
		  "first" },
		{ "Loading with more hits than hashes", 0, { .status = OKV_STATUS_LOADING, .arg0 = 5 }, "exceed the 4 hashes" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		spec.flags = cases[i].flags;
		tk_script(&cases[i].answer, 1);
		t = (okv_ticket *)&a;
		rc = okv_ticket_submit(c, &spec, &t, &a);
		CHECK(rc == OKV_EPROTO && t == NULL && strstr(okv_last_error(c), cases[i].field) != NULL,
		      "%s: %d \"%s\", want OKV_EPROTO naming %s", cases[i].name, rc, okv_last_error(c), cases[i].field);
	}

	/* Accepted shapes: WARMUP Ok without a lease (0 = skipped), DISCOVER
	 * Candidates, a recovery lease of exactly the range. */
	spec.flags = OKV_QUERY_WARMUP;
	TK_SCRIPT({ .status = OKV_STATUS_OK, .hits = 0 });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == 0 && a.status == OKV_STATUS_OK && a.lease_id == 0 && !okv_ticket_live(t), "WARMUP skipped: %d %s",
	      rc, okv_last_error(c));
	okv_ticket_free(c, t);
	spec.flags = OKV_QUERY_DISCOVER;
	TK_SCRIPT({ .status = OKV_STATUS_CANDIDATES, .hits = 3, .ram = 1 });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == 0 && a.status == OKV_STATUS_CANDIDATES && a.hit_count == 3 && a.ram_hits == 1 && !okv_ticket_live(t),
	      "DISCOVER: %d %s", rc, okv_last_error(c));
	okv_ticket_free(c, t);
	spec.flags = OKV_QUERY_RECOVERY;
	spec.recovery_first = 1;
	spec.recovery_count = 2;
	TK_SCRIPT({ .status = OKV_STATUS_OK, .hits = 2, .lease = 8, .first = 1 });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == 0 && a.first == 1 && a.hit_count == 2 && a.lease_id == 8 && seen_query(0).recovery_first == 1 &&
		      seen_query(0).recovery_count == 2 && seen_query(0).flags == OKV_QUERY_RECOVERY,
	      "recovery lease: %d %s", rc, okv_last_error(c));
	okv_ticket_free(c, t);
	TK_SCRIPT({ .status = OKV_STATUS_OK, .hits = 2, .lease = 8, .first = 0 });
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "recovery lease") != NULL, "recovery lease elsewhere: %d %s",
	      rc, okv_last_error(c));

	/* A poll result is checked against the ticket's view (4 hashes). */
	spec.flags = 0;
	spec.recovery_first = spec.recovery_count = 0;
	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_OK, .hits = 5, .lease = 3 },
		  { .status = OKV_STATUS_OK, .hits = 4, .lease = 3, .rev_adj = 1 });
	CHECK(okv_ticket_submit(c, &spec, &t, &a) == OKV_EPENDING, "submit");
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "more hits than hashes") != NULL && okv_ticket_live(t),
	      "poll with 5 hits of a 4-hash view: %d %s", rc, okv_last_error(c));
	rc = okv_ticket_poll(c, t, &a);
	CHECK(rc == OKV_EPROTO && strstr(okv_last_error(c), "revision") != NULL, "poll answering another revision: %d %s",
	      rc, okv_last_error(c));
	TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1, .arg0 = 1 });
	okv_ticket_free(c, t); /* still live after malformed answers: cancelled */
	CHECK(fm.nseen == 1 && fm.seen[0].msg.code == OKV_CMD_CANCEL_QUERY && fm.seen[0].msg.arg1 == 1,
	      "free cancels the live ticket");
	tk_teardown(c, ms, batch);
}

/* Raw ops send exactly what they are given; okv_op_submit moves the op id
 * counter past its op id. */
static void test_op_raw(void)
{
	int ms;
	okv_block_hashes *batch;
	struct okv_block_hash hashes[6];
	okv_client *c = tk_setup(&ms, &batch, hashes);
	struct okv_query_spec spec = { .ns = test_ns(), .hashes = batch, .prefix_len = 2, .request_id = 5 };
	struct okv_query_answer a;
	okv_ticket *t = NULL;
	int rc;

	TK_SCRIPT({ .status = OKV_STATUS_LOADING }, { .status = OKV_STATUS_INVALID, .arg0 = OKV_FIELD_REVISION },
		  { .status = OKV_STATUS_OK, .hits = 2, .lease = 4 }, { .status = OKV_STATUS_INVALID, .arg0 = OKV_FIELD_OP_ID },
		  { .status = OKV_STATUS_TIMEOUT }, { .status = OKV_STATUS_LOADING });
	rc = okv_op_submit(c, 10, 3, &spec, &a);
	CHECK(rc == OKV_EPENDING && a.op_id == 10 && a.revision == 3 && seen_query(0).op_id == 10 &&
		      seen_query(0).revision == 3 && seen_query(0).hash_count == 2,
	      "raw submit (10, 3): %d", rc);
	CHECK(c->next_op_id == 11, "counter past 10: %llu", (unsigned long long)c->next_op_id);
	rc = okv_op_poll(c, 10, 2, &a);
	CHECK(rc == OKV_EINVALID && seen_ticket_msg(1, OKV_CMD_POLL, 10, 2) &&
		      strstr(okv_last_error(c), "field revision") != NULL,
	      "old revision: %d %s", rc, okv_last_error(c));
	rc = okv_op_claim(c, 10, 3, NULL);
	CHECK(rc == 0 && seen_ticket_msg(2, OKV_CMD_CLAIM, 10, 3), "raw claim: %d %s", rc, okv_last_error(c));
	rc = okv_op_cancel(c, 10, 3);
	CHECK(rc == OKV_EINVALID && strstr(okv_last_error(c), "field op_id") != NULL &&
		      fm.seen[3].msg.code == OKV_CMD_CANCEL_QUERY,
	      "raw cancel of a retired op: %d", rc);
	rc = okv_op_poll(c, 9, 1, &a);
	CHECK(rc == OKV_EEXPIRED, "raw poll of an expired op: %d", rc);
	rc = okv_ticket_submit(c, &spec, &t, &a);
	CHECK(rc == OKV_EPENDING && okv_ticket_op_id(t) == 11, "the next ticket is op 11: %llu",
	      (unsigned long long)okv_ticket_op_id(t));
	okv_op_submit(c, 5, 1, &spec, NULL); /* unscripted: Internal */
	CHECK(c->next_op_id == 12, "a lower raw op id does not move the counter back");
	TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1, .arg0 = 1 });
	okv_ticket_free(c, t);
	CHECK(okv_op_poll(NULL, 1, 1, &a) == -EINVAL && okv_op_submit(c, 1, 1, NULL, &a) == -EINVAL, "NULL arguments");
	tk_teardown(c, ms, batch);
}

/* ---- publish fence -------------------------------------------------------------- */

/* Register buffers 1 and 2 (5 layers x 8 pages) on c. */
static void register_two(okv_client *c, int ms, struct okv_buffer *b)
{
	for (uint32_t k = 0; k < 2; k++) {
		int fd;
		uint32_t id;
		CHECK(okv_buffer_alloc(5, 64, 8, &b[k]) == 0, "alloc");
		queue_register_reply(ms, 1, b[k].bytes, k + 1);
		CHECK(okv_register_buffer(c, &b[k], &id) == 0 && id == k + 1, "register %u", k + 1);
		Orbitkv__Lifecycle__V1__RegisterBuffersRequest *q = read_register_request(ms, &fd);
		if (q)
			orbitkv__lifecycle__v1__register_buffers_request__free_unpacked(q, NULL);
		if (fd >= 0)
			close(fd);
	}
}

static void test_publish_fence(void)
{
	int ms;
	okv_client *c = fake_client(&ms);
	struct okv_namespace ns = test_ns();
	struct okv_block_hash hashes[3] = { test_hash(1), test_hash(2), test_hash(3) };
	uint32_t pages[3] = { 0, 1, 2 };
	struct okv_restore_entry ent = { 0, 0 };
	struct okv_publish_result res;
	struct okv_buffer b[2];
	uint64_t op;
	int rc;

	register_two(c, ms, b);
	fm_start(c, tk_handler);

	/* Counts beyond the entries sent: a malformed acknowledgement. */
	TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1, .arg0 = 2, .arg1 = 2 });
	rc = okv_publish(c, &ns, 1, hashes, pages, 3, &res);
	CHECK(rc == OKV_EFENCED && strstr(okv_last_error(c), "exceeds the 3 entries") != NULL &&
		      strstr(okv_last_error(c), "pages of buffer 1") != NULL && res.stored == 0,
	      "malformed acknowledgement fences: %d \"%s\"", rc, okv_last_error(c));
	CHECK(okvi_buffer_fenced(c, 1) && !okvi_buffer_fenced(c, 2) && !c->broken, "buffer 1 fenced, 2 not");
	/* Later calls naming buffer 1 are refused without a message. */
	tk_script(NULL, 0);
	rc = okv_publish(c, &ns, 1, hashes, pages, 3, &res);
	CHECK(rc == OKV_EFENCED && strstr(okv_last_error(c), "stay pinned until it exits") != NULL, "publish again: %d %s",
	      rc, okv_last_error(c));
	rc = okv_restore(c, 77, 1, &ent, 1, &op);
	CHECK(rc == OKV_EFENCED && op == 0, "restore into the fenced buffer: %d", rc);
	CHECK(fm.nseen == 0, "nothing sent for the fenced buffer: %d", fm.nseen);

	/* A clean refusal does not fence; statuses a Publish never gets do. */
	TK_SCRIPT({ .status = OKV_STATUS_UNADMITTED }, { .status = OKV_STATUS_INTERNAL },
		  { .status = OKV_STATUS_OK, .raw = 1, .arg0 = 3 });
	CHECK(okv_publish(c, &ns, 2, hashes, pages, 3, &res) == OKV_EUNADMITTED && !okvi_buffer_fenced(c, 2),
	      "Unadmitted: clean");
	CHECK(okv_publish(c, &ns, 2, hashes, pages, 3, &res) == OKV_EINTERNAL && !okvi_buffer_fenced(c, 2),
	      "Internal: clean");
	CHECK(okv_publish(c, &ns, 2, hashes, pages, 3, &res) == 0 && res.stored == 3, "buffer 2 still publishes");
	TK_SCRIPT({ .status = OKV_STATUS_LOADING });
	rc = okv_publish(c, &ns, 2, hashes, pages, 3, &res);
	CHECK(rc == OKV_EFENCED && okvi_buffer_fenced(c, 2), "Loading to a publish fences: %d %s", rc, okv_last_error(c));

	/* Without a pidfd nothing is sent. */
	memset(c->buf_fenced, 0, sizeof(c->buf_fenced));
	tk_script(NULL, 0);
	int pidfd = c->pidfd;
	c->pidfd = -1;
	rc = okv_publish(c, &ns, 2, hashes, pages, 3, &res);
	CHECK(rc == OKV_ECLOSED && strstr(okv_last_error(c), "pidfd") != NULL && fm.nseen == 0, "no pidfd: %d %s", rc,
	      okv_last_error(c));
	c->pidfd = pidfd;

	/* A reply after twice the timeout is waited for; the watchdog writes
	 * one line on stderr (the next would come a minute later). */
	c->timeout_ms = 100;
	c->reply.manager_pid = 4242;
	TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1, .arg0 = 2, .arg1 = 1, .delay_ms = 250 });
	char log[1024] = "";
	{
		fflush(stderr);
		int saved = dup(STDERR_FILENO);
		int cap = memfd_create("stderr", MFD_CLOEXEC);
		if (saved < 0 || cap < 0 || dup2(cap, STDERR_FILENO) < 0) {
			perror("capture stderr");
			exit(2);
		}
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = okv_publish(c, &ns, 2, hashes, pages, 3, &res);
		double took = ms_since(&t0);
		dup2(saved, STDERR_FILENO);
		close(saved);
		ssize_t got = pread(cap, log, sizeof(log) - 1, 0);
		log[got > 0 ? got : 0] = '\0';
		close(cap);
		CHECK(rc == 0 && res.stored == 2 && res.present == 1, "late reply accepted: %d %s", rc, okv_last_error(c));
		CHECK(took >= 240, "waited %.1f ms for the reply", took);
	}
	static const char head[] = "orbitkv: publish of 3 blocks to buffer 2 waiting ";
	CHECK(strncmp(log, head, sizeof(head) - 1) == 0 &&
		      strstr(log, "s for the Manager (pid 4242); source pages stay pinned\n") != NULL,
	      "watchdog line: \"%s\"", log);
	{
		int lines = 0;
		for (const char *p = log; *p; p++)
			lines += *p == '\n';
		CHECK(lines == 1, "one watchdog line, got %d", lines);
	}
	CHECK(c->desc_busy_gen == 0 && !c->broken && !okvi_buffer_fenced(c, 2), "a late clean reply leaves no fence");

	/* The Manager exits while the publish waits: OKV_EMANAGER_DIED, no
	 * fence (its mappings died with it), the session is over. */
	{
		pid_t child = fork();
		if (child == 0)
			_exit(0);
		int pfd = (int)syscall(SYS_pidfd_open, child, 0);
		waitpid(child, NULL, 0);
		c->pidfd = pfd;
		__atomic_store_n(&fm.hold, 1, __ATOMIC_SEQ_CST);
		TK_SCRIPT({ .status = OKV_STATUS_OK, .raw = 1 });
		rc = okv_publish(c, &ns, 2, hashes, pages, 3, &res);
		CHECK(rc == OKV_EMANAGER_DIED && c->broken && !okvi_buffer_fenced(c, 2), "Manager died: %d", rc);
		__atomic_store_n(&fm.hold, 0, __ATOMIC_SEQ_CST);
		c->pidfd = pidfd;
		close(pfd);
	}
	fm_stop();
	okv_buffer_free(&b[0]);
	okv_buffer_free(&b[1]);
	okv_close(c);
	close(ms);
}

static void test_closed_client(void)
{
	int ms;
	okv_client *c = fake_client(&ms);
	struct okv_namespace ns = test_ns();
	struct okv_block_hash h = test_hash(0);
	struct okv_restore_entry e = { 0, 0 };
	struct okv_lease l;
	uint64_t op;

	c->broken = 1;
	CHECK(okv_query(c, &ns, &h, 1, &l) == OKV_ECLOSED, "query");
	CHECK(okv_restore(c, 1, 0, &e, 1, &op) == OKV_ECLOSED, "restore");
	CHECK(okv_restore_poll(c, 1) == OKV_ECLOSED, "poll");
	CHECK(okv_restore_wait(c, 1, 10) == OKV_ECLOSED, "wait");
	CHECK(okv_release(c, 1) == OKV_ECLOSED, "release");
	CHECK(okv_restore_wait(NULL, 1, 10) == -EINVAL, "wait NULL");
	okv_close(c);
	close(ms);
}

static void test_strerror_new_codes(void)
{
	static const int codes[] = { OKV_EPENDING, OKV_EUNADMITTED, OKV_E2BIG, OKV_EEXPIRED, OKV_EFENCED };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		CHECK(strcmp(okv_strerror(codes[i]), "unknown error") != 0, "okv_strerror(%d) = %s", codes[i],
		      okv_strerror(codes[i]));
	static const struct {
		uint64_t field;
		const char *name;
	} names[] = {
		{ OKV_FIELD_DESC_MAGIC, "desc_magic" }, { OKV_FIELD_DESC_SCHEMA, "desc_schema" },
		{ OKV_FIELD_DESC_FLAGS, "desc_flags" }, { OKV_FIELD_DESC_RESERVED, "desc_reserved" },
		{ OKV_FIELD_COUNT, "count" },		{ OKV_FIELD_BUFFER_ID, "buffer_id" },
		{ OKV_FIELD_PAGE, "page" },		{ OKV_FIELD_LAYERS, "layers" },
		{ OKV_FIELD_LEASE_ID, "lease_id" },	{ OKV_FIELD_BLOCK, "block" },
		{ OKV_FIELD_BLOCK_BYTES, "block_bytes" }, { OKV_FIELD_OP_ID, "op_id" },
		{ OKV_FIELD_NAMESPACE, "namespace" },	{ OKV_FIELD_REVISION, "revision" },
		{ OKV_FIELD_REQUEST, "request" },	{ OKV_FIELD_RECOVERY_RANGE, "recovery_range" },
		{ OKV_FIELD_RECORD, "record" },
		{ OKV_FIELD_MAX + 1, "unknown" },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(strcmp(okvi_field_name(names[i].field), names[i].name) == 0, "field %llu: %s, want %s",
		      (unsigned long long)names[i].field, okvi_field_name(names[i].field), names[i].name);
}

int main(void)
{
	int before = count_fds();

	test_buffer_alloc();
	test_max_entries();
	test_query();
	test_register_buffer();
	test_lifecycle_timeout_desyncs();
	test_publish();
	test_restore();
	test_desc_busy_after_timeout();
	test_block_hashes();
	test_ticket_submit_poll();
	test_ticket_revise();
	test_ticket_claim();
	test_ticket_malformed();
	test_op_raw();
	test_publish_fence();
	test_closed_client();
	test_strerror_new_codes();
	CHECK(count_fds() == before, "no fd leaked: %d open before, %d after", before, count_fds());
	if (failures != 0) {
		fprintf(stderr, "test_ops: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_ops: all %d checks passed\n", checks);
	return 0;
}
