/*
 * ops.c — the cache operations of liborbitkv (orbitkv/client.h "Cache
 * operations", DESIGN.md §5.3): QueryBundle, Publish, Restore, RestorePoll
 * and Release over the session slot.
 *
 * Each operation writes its descriptor (abi.h okv_query_desc,
 * okv_publish_desc, okv_restore_desc, then its entries at offset 64) into
 * the slot's descriptor area and sends one request whose line names it
 * (okvi_call_desc). The release store of the request generation orders the
 * descriptor bytes before the Manager's acquire load; the Manager's release
 * store of the response generation orders the query result it writes over
 * the descriptor before our acquire load.
 *
 * No allocation and no system call beyond the channel's own on these paths.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"
#include "client_internal.h"

/* Header bytes before the entries of every descriptor. */
#define OKVI_DESC_HEADER 64u
/* Longest sleep of okv_restore_wait between polls (a lost eventfd
 * notification costs at most this). */
#define OKVI_RESTORE_WAIT_ROUND_MS 50u

_Static_assert(sizeof(struct okv_query_desc) == OKVI_DESC_HEADER, "query header");
_Static_assert(sizeof(struct okv_publish_desc) == OKVI_DESC_HEADER, "publish header");
_Static_assert(sizeof(struct okv_restore_desc) == OKVI_DESC_HEADER, "restore header");
_Static_assert(sizeof(struct okv_query_result) <= OKVI_DESC_HEADER, "result fits the header");

static uint32_t max_entries(const okv_client *c, size_t entry)
{
	if (!c || c->reply.desc_capacity < OKVI_DESC_HEADER)
		return 0;
	return (uint32_t)((c->reply.desc_capacity - OKVI_DESC_HEADER) / entry);
}

uint32_t okv_max_query_hashes(const okv_client *c)
{
	return max_entries(c, sizeof(struct okv_block_hash));
}

uint32_t okv_max_restore_entries(const okv_client *c)
{
	return max_entries(c, sizeof(struct okv_restore_entry));
}

uint32_t okv_max_publish_entries(const okv_client *c)
{
	return max_entries(c, sizeof(struct okv_publish_entry));
}

/* Check the okv_query_result the Manager wrote against the response line. */
static int check_query_result(okv_client *c, const struct okv_msg *resp, uint32_t n,
			      const struct okv_query_result *r)
{
	const char *what = NULL;
	if (r->magic != OKV_QUERY_RESULT_MAGIC)
		what = "magic";
	else if (r->schema != OKV_QUERY_SCHEMA)
		what = "schema";
	else if (r->status != resp->code)
		what = "status (differs from the response)";
	else if (r->hit_count != resp->arg0)
		what = "hit_count (differs from the response's arg0)";
	else if (r->lease_id != resp->arg1)
		what = "lease_id (differs from the response's arg1)";
	else if (r->hit_count > n)
		what = "hit_count (more hits than hashes sent)";
	else if (resp->code == OKV_STATUS_OK && (r->hit_count == 0 || r->lease_id == 0))
		what = "hit_count/lease_id (Ok needs at least one hit and a lease)";
	else if (resp->code == OKV_STATUS_MISS && (r->hit_count != 0 || r->lease_id != 0))
		what = "hit_count/lease_id (Miss carries no hit and no lease)";
	if (what) {
		okvi_set_error(c, "malformed query result: field %s", what);
		return OKV_EPROTO;
	}
	return 0;
}

int okv_query(okv_client *c, const struct okv_namespace *ns, const struct okv_block_hash *hashes,
	      uint32_t n, struct okv_lease *out)
{
	struct okv_msg resp;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!c || !ns || !out || (!hashes && n > 0))
		return -EINVAL;
	if (n == 0) {
		okvi_set_error(c, "query of 0 hashes; want 1..%u", okv_max_query_hashes(c));
		return -EINVAL;
	}
	if (n > okv_max_query_hashes(c)) {
		okvi_set_error(c, "query of %u hashes exceeds the limit %u of this session's descriptor area", n,
			       okv_max_query_hashes(c));
		return OKV_E2BIG;
	}
	rc = okvi_desc_acquire(c);
	if (rc)
		return rc;
	uint8_t *d = okvi_desc(c);
	struct okv_query_desc h = {
		.magic = OKV_QUERY_MAGIC,
		.schema = OKV_QUERY_SCHEMA,
		.hash_count = n,
		.ns = *ns,
	};
	memcpy(d, &h, sizeof(h));
	memcpy(d + OKVI_DESC_HEADER, hashes, (size_t)n * sizeof(*hashes));
	memset(&resp, 0, sizeof(resp));
	rc = okvi_call_desc(c, OKV_CMD_QUERY_BUNDLE, 0, 0, OKVI_DESC_HEADER + n * (uint32_t)sizeof(*hashes), &resp);
	/* okvi_call_desc maps Miss to OKV_EINTERNAL with the status in resp.code;
	 * here Miss is an answer. */
	if (rc == OKV_EINTERNAL && resp.code == OKV_STATUS_MISS)
		rc = 0;
	if (rc)
		return rc;
	struct okv_query_result r;
	memcpy(&r, d, sizeof(r));
	rc = check_query_result(c, &resp, n, &r);
	if (rc)
		return rc;
	out->lease_id = r.lease_id;
	out->hit_count = r.hit_count;
	out->lease_bytes = r.lease_bytes;
	out->block_bytes = r.block_bytes;
	return 0;
}

int okv_publish(okv_client *c, const struct okv_namespace *ns, uint32_t buffer_id,
		const struct okv_block_hash *hashes, const uint32_t *pages, uint32_t n,
		struct okv_publish_result *out)
{
	struct okv_publish_result sum = { 0, 0 };
	int rc = 0;

	if (out)
		*out = sum;
	if (!c || !ns || ((!hashes || !pages) && n > 0))
		return -EINVAL;
	if (buffer_id >= c->buf_count || c->buf_layers[buffer_id] == 0) {
		okvi_set_error(c, "buffer_id %u was not registered on this client (okv_register_buffer)", buffer_id);
		return -EINVAL;
	}
	uint32_t per = okv_max_publish_entries(c);
	if (per == 0)
		return OKV_E2BIG;
	uint32_t layers = c->buf_layers[buffer_id];
	for (uint32_t first = 0; first < n; first += per) {
		uint32_t cnt = n - first < per ? n - first : per;
		rc = okvi_desc_acquire(c);
		if (rc)
			break;
		uint8_t *d = okvi_desc(c);
		struct okv_publish_desc h = {
			.magic = OKV_PUBLISH_MAGIC,
			.schema = OKV_PUBLISH_SCHEMA,
			.buffer_id = buffer_id,
			.count = cnt,
			.ns = *ns,
			.layer_first = 0,
			.layer_count = layers,
		};
		memcpy(d, &h, sizeof(h));
		struct okv_publish_entry *e = (struct okv_publish_entry *)(d + OKVI_DESC_HEADER);
		for (uint32_t i = 0; i < cnt; i++) {
			struct okv_publish_entry pe = { .hash = hashes[first + i], .page = pages[first + i] };
			memcpy(&e[i], &pe, sizeof(pe));
		}
		struct okv_msg resp;
		rc = okvi_call_desc(c, OKV_CMD_PUBLISH, 0, 0,
				    OKVI_DESC_HEADER + cnt * (uint32_t)sizeof(struct okv_publish_entry), &resp);
		if (rc)
			break;
		if (resp.arg0 > cnt || resp.arg1 > cnt - resp.arg0) {
			okvi_set_error(c, "publish reply stored %llu + present %llu exceeds the %u entries sent",
				       (unsigned long long)resp.arg0, (unsigned long long)resp.arg1, cnt);
			rc = OKV_EPROTO;
			break;
		}
		sum.stored += (uint32_t)resp.arg0;
		sum.present += (uint32_t)resp.arg1;
	}
	if (out)
		*out = sum;
	return rc;
}

int okv_restore(okv_client *c, uint64_t lease_id, uint32_t buffer_id,
		const struct okv_restore_entry *entries, uint32_t n, uint64_t *op_id)
{
	struct okv_msg resp;
	int rc;

	if (op_id)
		*op_id = 0;
	if (!c || !op_id || (!entries && n > 0))
		return -EINVAL;
	if (n == 0) {
		okvi_set_error(c, "restore of 0 entries; want 1..%u", okv_max_restore_entries(c));
		return -EINVAL;
	}
	if (n > okv_max_restore_entries(c)) {
		okvi_set_error(c, "restore of %u entries exceeds the limit %u of this session's descriptor area", n,
			       okv_max_restore_entries(c));
		return OKV_E2BIG;
	}
	rc = okvi_desc_acquire(c);
	if (rc)
		return rc;
	uint8_t *d = okvi_desc(c);
	struct okv_restore_desc h = {
		.magic = OKV_RESTORE_MAGIC,
		.schema = OKV_RESTORE_SCHEMA,
		.buffer_id = buffer_id,
		.count = n,
		.lease_id = lease_id,
	};
	memcpy(d, &h, sizeof(h));
	memcpy(d + OKVI_DESC_HEADER, entries, (size_t)n * sizeof(*entries));
	rc = okvi_call_desc(c, OKV_CMD_RESTORE, 0, 0, OKVI_DESC_HEADER + n * (uint32_t)sizeof(*entries), &resp);
	if (rc)
		return rc;
	*op_id = resp.arg0;
	return 0;
}

int okv_restore_poll(okv_client *c, uint64_t op_id)
{
	struct okv_msg resp;
	return okvi_call(c, OKV_CMD_RESTORE_POLL, op_id, 0, &resp);
}

int okv_restore_wait(okv_client *c, uint64_t op_id, uint32_t timeout_ms)
{
	if (!c)
		return -EINVAL;
	if (timeout_ms > OKV_MAX_TIMEOUT_MS)
		timeout_ms = OKV_MAX_TIMEOUT_MS;
	uint64_t deadline = okvi_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		int rc = okv_restore_poll(c, op_id);
		if (rc != OKV_EPENDING)
			return rc;
		uint64_t now = okvi_now_ns();
		if (now >= deadline) {
			okvi_set_error(c, "restore %llu still copying after %u ms", (unsigned long long)op_id,
				       timeout_ms);
			return OKV_ETIMEDOUT;
		}
		/* Round up so a sub-millisecond remainder does not spin. */
		uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
		int wait_ms = (int)(left_ms < OKVI_RESTORE_WAIT_ROUND_MS ? left_ms : OKVI_RESTORE_WAIT_ROUND_MS);
		struct pollfd p[2] = {
			{ .fd = c->event_fd, .events = POLLIN },
			{ .fd = c->pidfd, .events = POLLIN },
		};
		int n = poll(p, 2, wait_ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		if (p[1].revents & POLLIN) {
			c->broken = 1;
			okvi_set_error(c, "the Manager exited while restore %llu was copying",
				       (unsigned long long)op_id);
			return OKV_EMANAGER_DIED;
		}
		if (p[0].revents & POLLIN) {
			/* Reset the counter; the next poll tells which restore ended
			 * (one eventfd serves every restore of the session). */
			uint64_t v;
			if (read(c->event_fd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
				return -errno;
		}
	}
}

int okv_release(okv_client *c, uint64_t lease_id)
{
	struct okv_msg resp;
	return okvi_call(c, OKV_CMD_RELEASE, lease_id, 0, &resp);
}
