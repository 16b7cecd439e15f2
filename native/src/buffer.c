/*
 * buffer.c — engine KV buffers of the host backend (orbitkv/client.h
 * "Engine buffers"): allocation as a sealed memfd and registration with the
 * Manager (RegisterBuffers lifecycle frame, docs/design.md §5.1).
 *
 * The memfd is sealed against shrink and grow before it is mapped or sent:
 * the Manager maps the same pages for its copy workers, and a shrink would
 * turn their copies into SIGBUS. Registration records the buffer's layer
 * count in the client, by buffer id, because a Publish descriptor must name
 * the buffer's full layer set (abi.h struct okv_publish_desc).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client_internal.h"
#include "lifecycle.h"

int okv_buffer_alloc(uint32_t layers, uint64_t page_bytes, uint64_t page_count, struct okv_buffer *out)
{
	uint64_t per_layer, bytes;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (layers == 0 || page_bytes == 0 || page_count == 0 || page_bytes % 64 != 0)
		return -EINVAL;
	/* ftruncate takes an off_t and mmap a size_t: stay below both. */
	if (__builtin_mul_overflow(page_bytes, page_count, &per_layer) ||
	    __builtin_mul_overflow(per_layer, (uint64_t)layers, &bytes) || bytes > (uint64_t)INT64_MAX ||
	    bytes > (uint64_t)SIZE_MAX)
		return -EINVAL;
	/* Before the memfd exists: nothing of it is ever open through /proc. */
	int rc = okvi_drop_dumpable(NULL, 0);
	if (rc)
		return rc;
	int fd = memfd_create("orbitkv-kv-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* MAP_POPULATE pre-faults: the engine's first writes and the Manager's
	 * first copies do not take page faults. */
	void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		close(fd);
		return rc;
	}
	out->base = p;
	out->bytes = bytes;
	out->fd = fd;
	out->layers = layers;
	out->page_bytes = page_bytes;
	out->page_count = page_count;
	return 0;
}

void okv_buffer_free(struct okv_buffer *b)
{
	/* A zeroed buffer has fd 0 (stdin): base tells a live buffer apart. */
	if (!b || !b->base)
		return;
	munmap(b->base, (size_t)b->bytes);
	if (b->fd >= 0)
		close(b->fd);
	memset(b, 0, sizeof(*b));
}

/* Remember that buffer `id` has `layers` layers (c->buf_layers grows). */
static int record_buffer(okv_client *c, uint32_t id, uint32_t layers)
{
	if (id >= c->buf_count) {
		uint32_t n = c->buf_count ? c->buf_count : 8;
		while (n <= id)
			n *= 2;
		uint32_t *t = realloc(c->buf_layers, (size_t)n * sizeof(*t));
		if (!t)
			return -ENOMEM;
		memset(t + c->buf_count, 0, (size_t)(n - c->buf_count) * sizeof(*t));
		c->buf_layers = t;
		c->buf_count = n;
	}
	c->buf_layers[id] = layers;
	return 0;
}

/* registered finishes a RegisterBuffers call that returned rc and, on
 * success, the Manager's buffer id: it marks the lifecycle stream broken
 * when rc may leave a reply unread, checks id against the client's limit,
 * records the buffer's layers and stores id in *buffer_id. */
static int registered(okv_client *c, int rc, uint32_t id, uint32_t layers, uint32_t *buffer_id)
{
	if (rc) {
		/* A timeout or an I/O error may leave a reply unread, and the next
		 * call would take it for its own; an error frame or a complete
		 * but wrong reply leaves the stream in sync. */
		if (okvi_lifecycle_desynced(rc))
			c->lc_broken = 1;
		return rc;
	}
	if (id > OKVI_MAX_BUFFER_ID) {
		okvi_set_error(c, "register buffers reply first_buffer_id %u exceeds the client limit %u", id,
			       OKVI_MAX_BUFFER_ID);
		return OKV_EPROTO;
	}
	rc = record_buffer(c, id, layers);
	if (rc) {
		okvi_set_error(c, "recording buffer %u: out of memory", id);
		return rc;
	}
	*buffer_id = id;
	return 0;
}

int okv_register_buffer(okv_client *c, const struct okv_buffer *b, uint32_t *buffer_id)
{
	okvi_clear_error(c);
	uint32_t id = 0;
	int rc;

	if (!c || !b || !buffer_id)
		return -EINVAL;
	if (c->sock < 0)
		return OKV_ECLOSED;
	if (!b->base || b->fd < 0 || b->layers == 0 || b->page_bytes == 0 || b->page_count == 0) {
		okvi_set_error(c, "buffer is not allocated (okv_buffer_alloc) or was freed");
		return -EINVAL;
	}
	if (c->lc_broken) {
		okvi_set_error(c, "%s", "an earlier lifecycle call timed out or failed mid-frame; reconnect");
		return OKV_ECLOSED;
	}
	rc = okvi_register_buffer(c->sock, c->reply.epoch, c->reply.client_token, b, (int)c->timeout_ms, &id,
				  c->last_error, sizeof(c->last_error));
	return registered(c, rc, id, b->layers, buffer_id);
}

int okv_register_cuda_buffer(okv_client *c, const struct okv_cuda_region *r, uint32_t *buffer_id)
{
	okvi_clear_error(c);
	uint32_t id = 0;
	int rc;

	if (!c || !r || !buffer_id)
		return -EINVAL;
	if (c->sock < 0)
		return OKV_ECLOSED;
	if (r->layers == 0 || r->page_bytes == 0 || r->page_count == 0 || r->bytes == 0) {
		okvi_set_error(c, "CUDA region with a zero dimension (layers %u, page_bytes %llu, page_count %llu, bytes %llu)",
			       r->layers, (unsigned long long)r->page_bytes, (unsigned long long)r->page_count,
			       (unsigned long long)r->bytes);
		return -EINVAL;
	}
	if (r->handle_kind != OKV_CUDA_HANDLE_IPC && (r->handle_kind != OKV_CUDA_HANDLE_VMM_FD || r->vmm_fd < 0)) {
		okvi_set_error(c, "CUDA region handle_kind %u (want OKV_CUDA_HANDLE_IPC, or OKV_CUDA_HANDLE_VMM_FD with an fd)",
			       r->handle_kind);
		return -EINVAL;
	}
	if (c->lc_broken) {
		okvi_set_error(c, "%s", "an earlier lifecycle call timed out or failed mid-frame; reconnect");
		return OKV_ECLOSED;
	}
	rc = okvi_register_cuda_buffer(c->sock, c->reply.epoch, c->reply.client_token, r, (int)c->timeout_ms, &id,
				       c->last_error, sizeof(c->last_error));
	return registered(c, rc, id, r->layers, buffer_id);
}

_Static_assert(sizeof(struct okv_cuda_region) == 136, "okv_cuda_region size (python/orbitkv/_abi.py)");
_Static_assert(offsetof(struct okv_cuda_region, ipc_handle) == 24, "okv_cuda_region.ipc_handle");
_Static_assert(offsetof(struct okv_cuda_region, vmm_fd) == 88, "okv_cuda_region.vmm_fd");
_Static_assert(offsetof(struct okv_cuda_region, page_count) == 128, "okv_cuda_region.page_count");
