/*
 * ops.c — the cache operations of liborbitkv (orbitkv/client.h "Cache
 * operations", docs/design.md §5.3): QueryBundle, Publish, Restore, RestorePoll
 * and Release over the session slot, and the messages of query tickets
 * (okvi_query_call, okvi_ticket_msg: encoding and result checks; the
 * ticket state lives in tickets.c).
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
 *
 * Publish is fenced (spec: "Publish requires a Cache Manager pidfd before
 * submission. Once submitted, the client waits beyond the ordinary IPC
 * timeout until it receives a reply or the Cache Manager process exits";
 * "Malformed descriptor acknowledgements use the same fence"): it waits
 * with okvi_call_desc_until_reply, a watchdog line reports the overrun,
 * and an ambiguous acknowledgement marks the buffer fenced (c->buf_fenced)
 * so no later publish or restore touches its pages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
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

/* A result that disagrees is OKV_EPROTO: the answer cannot be trusted, and
 * a lease id in it would be guesswork. */
int okvi_check_query_result(okv_client *c, const struct okv_msg *resp, const struct okvi_query_expect *w,
			    const struct okv_query_result *r)
{
	int known = w->flags != OKVI_FLAGS_UNKNOWN;
	/* WARMUP answers Ok without a lease; DISCOVER never leases. With the
	 * flags unknown (a raw op poll) either Ok shape is accepted. */
	int may_warm = !known || (w->flags & OKV_QUERY_WARMUP);
	int may_lease = !known || !(w->flags & (OKV_QUERY_WARMUP | OKV_QUERY_DISCOVER));
	int may_candidates = !known || (w->flags & (OKV_QUERY_DISCOVER | OKV_QUERY_PREPARE));
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
	else if (r->reserved1 != 0)
		what = "reserved1 (not zero)";
	else if (r->op_id != w->op_id)
		what = "op_id (differs from the op id sent)";
	else if (r->revision != w->revision)
		what = "revision (differs from the revision sent)";
	else if (r->hit_count > w->max_hits)
		what = "hit_count (more hits than hashes sent)";
	else if (r->ram_hits > w->max_hits)
		what = "ram_hits (more than hashes sent)";
	else if (resp->code == OKV_STATUS_OK && r->lease_id == 0 && !may_warm)
		what = "hit_count/lease_id (Ok needs at least one hit and a lease)";
	else if (resp->code == OKV_STATUS_OK && r->lease_id != 0 && !may_lease)
		what = "lease_id (a WARMUP or DISCOVER query is never leased)";
	else if (resp->code == OKV_STATUS_OK && r->lease_id != 0 && r->hit_count == 0)
		what = "hit_count/lease_id (Ok needs at least one hit and a lease)";
	else if (resp->code == OKV_STATUS_OK && r->lease_id != 0 && known && (w->flags & OKV_QUERY_RECOVERY) &&
		 (r->first != w->recovery_first || r->hit_count != w->recovery_count))
		what = "first/hit_count (a recovery lease is exactly the range asked)";
	else if (resp->code == OKV_STATUS_OK && r->lease_id != 0 && known && !(w->flags & OKV_QUERY_RECOVERY) &&
		 r->first != 0)
		what = "first (a prefix lease starts at chain position 0)";
	else if (resp->code == OKV_STATUS_MISS && (r->hit_count != 0 || r->lease_id != 0))
		what = "hit_count/lease_id (Miss carries no hit and no lease)";
	else if (resp->code == OKV_STATUS_CANDIDATES && r->lease_id != 0)
		what = "lease_id (Candidates carries no lease)";
	else if (resp->code == OKV_STATUS_CANDIDATES && !may_candidates)
		what = "status (Candidates answers only DISCOVER and PREPARE queries)";
	if (what) {
		okvi_set_error(c, "malformed query result: field %s", what);
		return OKV_EPROTO;
	}
	return 0;
}

/*
 * Turn the return code and response line of a QueryBundle, Poll or Claim
 * into the answer: Miss and Candidates (okvi_call_desc's "caller accepts")
 * become 0 with the result checked, Loading OKV_EPENDING with the hits so
 * far; anything else passes through.
 */
static int decode_answer(okv_client *c, int rc, const struct okv_msg *resp, const struct okvi_query_expect *w,
			 struct okv_query_answer *ans)
{
	if (rc == OKV_EINTERNAL && (resp->code == OKV_STATUS_MISS || resp->code == OKV_STATUS_CANDIDATES))
		rc = 0;
	if (rc == OKV_EPENDING) {
		if (resp->arg0 > w->max_hits) {
			okvi_set_error(c, "malformed Loading answer: %llu hits so far exceed the %u hashes of the view",
				       (unsigned long long)resp->arg0, w->max_hits);
			return OKV_EPROTO;
		}
		ans->status = OKV_STATUS_LOADING;
		ans->hit_count = (uint32_t)resp->arg0;
		return OKV_EPENDING;
	}
	if (rc)
		return rc;
	struct okv_query_result r;
	memcpy(&r, okvi_desc(c), sizeof(r));
	rc = okvi_check_query_result(c, resp, w, &r);
	if (rc)
		return rc;
	ans->status = r.status;
	ans->hit_count = r.hit_count;
	ans->ram_hits = r.ram_hits;
	ans->first = r.first;
	ans->lease_id = r.lease_id;
	ans->lease_bytes = r.lease_bytes;
	ans->block_bytes = r.block_bytes;
	return 0;
}

/* Zero *ans and *resp before a query message; resp->code 0xFFFF marks "no
 * response line arrived". */
static void answer_init(struct okv_query_answer *ans, struct okv_msg *resp, uint64_t op_id, uint32_t revision)
{
	memset(ans, 0, sizeof(*ans));
	ans->op_id = op_id;
	ans->revision = revision;
	memset(resp, 0, sizeof(*resp));
	resp->code = 0xFFFF;
}

int okvi_query_call(okv_client *c, const struct okvi_query_req *rq, struct okv_query_answer *ans,
		    struct okv_msg *resp)
{
	answer_init(ans, resp, rq->op_id, rq->revision);
	if (!c || (!rq->hashes && rq->n > 0))
		return -EINVAL;
	if (rq->n == 0) {
		okvi_set_error(c, "query of 0 hashes; want 1..%u", okv_max_query_hashes(c));
		return -EINVAL;
	}
	if (rq->n > okv_max_query_hashes(c)) {
		okvi_set_error(c, "query of %u hashes exceeds the limit %u of this session's descriptor area", rq->n,
			       okv_max_query_hashes(c));
		return OKV_E2BIG;
	}
	if (rq->flags > 0xFFFFu) {
		okvi_set_error(c, "query flags 0x%x do not fit the 16-bit descriptor field", rq->flags);
		return -EINVAL;
	}
	int rc = okvi_desc_acquire(c);
	if (rc)
		return rc;
	uint8_t *d = okvi_desc(c);
	struct okv_query_desc h = {
		.magic = OKV_QUERY_MAGIC,
		.schema = OKV_QUERY_SCHEMA,
		.flags = (uint16_t)rq->flags,
		.op_id = rq->op_id,
		.revision = rq->revision,
		.hash_count = rq->n,
		.request_id = rq->request_id,
		.group = rq->group,
		.recovery_first = rq->recovery_first,
		.recovery_count = rq->recovery_count,
		.ns = rq->ns,
	};
	memcpy(d, &h, sizeof(h));
	memcpy(d + OKVI_DESC_HEADER, rq->hashes, (size_t)rq->n * sizeof(*rq->hashes));
	rc = okvi_call_desc(c, OKV_CMD_QUERY_BUNDLE, 0, 0, OKVI_DESC_HEADER + rq->n * (uint32_t)sizeof(*rq->hashes),
			    resp);
	struct okvi_query_expect w = {
		.op_id = rq->op_id,
		.revision = rq->revision,
		.max_hits = rq->n,
		.flags = rq->flags,
		.recovery_first = rq->recovery_first,
		.recovery_count = rq->recovery_count,
	};
	return decode_answer(c, rc, resp, &w, ans);
}

int okvi_ticket_msg(okv_client *c, uint16_t code, const struct okvi_query_expect *want,
		    struct okv_query_answer *ans, struct okv_msg *resp)
{
	int rc;

	answer_init(ans, resp, want->op_id, want->revision);
	if (!c)
		return -EINVAL;
	if (code == OKV_CMD_CANCEL_QUERY) {
		rc = okvi_call(c, code, want->op_id, want->revision, resp);
		if (rc == 0 && resp->arg0 != 1) {
			okvi_set_error(c, "malformed CancelQuery answer: Ok with arg0 %llu, want 1",
				       (unsigned long long)resp->arg0);
			return OKV_EPROTO;
		}
		return rc;
	}
	/* Poll and Claim: a zeroed 64-byte area the Manager answers into. */
	rc = okvi_desc_acquire(c);
	if (rc)
		return rc;
	memset(okvi_desc(c), 0, OKVI_DESC_HEADER);
	rc = okvi_call_desc(c, code, want->op_id, want->revision, OKVI_DESC_HEADER, resp);
	rc = decode_answer(c, rc, resp, want, ans);
	if (rc == 0 && code == OKV_CMD_CLAIM && ans->status == OKV_STATUS_CANDIDATES) {
		okvi_set_error(c, "malformed Claim answer: status Candidates (a claim answers Ok, Miss or Loading)");
		return OKV_EPROTO;
	}
	return rc;
}

int okv_query(okv_client *c, const struct okv_namespace *ns, const struct okv_block_hash *hashes,
	      uint32_t n, struct okv_lease *out)
{
	okvi_clear_error(c);
	struct okv_query_answer a;
	struct okv_msg resp;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!c || !ns || !out || (!hashes && n > 0))
		return -EINVAL;
	/* The untracked leased read: op id 0, revision 0, flags 0. */
	struct okvi_query_req rq = { .ns = *ns, .hashes = hashes, .n = n };
	int rc = okvi_query_call(c, &rq, &a, &resp);
	if (rc)
		return rc;
	out->lease_id = a.lease_id;
	out->hit_count = a.hit_count;
	out->lease_bytes = a.lease_bytes;
	out->block_bytes = a.block_bytes;
	return 0;
}

/* ---- publish ------------------------------------------------------------ */

/* What the publish watchdog reports. */
struct publish_watch {
	uint32_t blocks;
	uint32_t buffer_id;
};

/*
 * The publish watchdog (spec: "logs the first ordinary-deadline overrun and
 * repeats at most once per minute; it does not treat elapsed time as DMA
 * completion"): one line on stderr per call, written with one write(2) so
 * lines of several threads do not interleave.
 */
static void publish_overrun(okv_client *c, void *ctx, uint64_t waited_ns)
{
	const struct publish_watch *w = ctx;
	char line[200];
	int n = snprintf(line, sizeof(line),
			 "orbitkv: publish of %u blocks to buffer %u waiting %.1fs for the Manager (pid %u); "
			 "source pages stay pinned\n",
			 w->blocks, w->buffer_id, (double)waited_ns / 1e9, c->reply.manager_pid);
	if (n > 0) {
		size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
		ssize_t wr = write(STDERR_FILENO, line, len);
		(void)wr; /* best effort: a closed stderr must not change the wait */
	}
}

/* Fence buffer b after an ambiguous publish; okv_last_error keeps the cause
 * and says what the fence means. */
static void fence_buffer(okv_client *c, uint32_t b)
{
	char cause[sizeof(c->last_error)];
	snprintf(cause, sizeof(cause), "%s", c->last_error[0] ? c->last_error : "no clean answer");
	c->buf_fenced[b / 8] |= (uint8_t)(1u << (b % 8));
	okvi_set_error(c,
		       "publish acknowledgement is ambiguous (%.150s): pages of buffer %u may still be read by the "
		       "Manager; they stay pinned until it exits",
		       cause, b);
}

/* Refuse an operation on a fenced buffer without sending. */
static int refuse_fenced(okv_client *c, uint32_t b)
{
	okvi_set_error(c,
		       "pages of buffer %u may still be read by the Manager (an earlier publish ended ambiguously); "
		       "they stay pinned until it exits",
		       b);
	return OKV_EFENCED;
}

int okv_publish(okv_client *c, const struct okv_namespace *ns, uint32_t buffer_id,
		const struct okv_block_hash *hashes, const uint32_t *pages, uint32_t n,
		struct okv_publish_result *out)
{
	return okv_publish_records(c, ns, buffer_id, hashes, pages, NULL, n, out);
}

/* check_records refuses, before anything is sent, a record the Manager
 * would refuse (abi.h okv_block_record), naming it. */
static int check_records(okv_client *c, const struct okv_block_info *records, uint32_t n)
{
	for (uint32_t i = 0; records && i < n; i++) {
		const struct okv_block_info *r = &records[i];
		if (r->token_count == 0 || r->token_count > OKV_RECORD_MAX_TOKENS || !r->tokens) {
			okvi_set_error(c, "block record %u: token_count %u, want 1..%u with tokens", i, r->token_count,
				       OKV_RECORD_MAX_TOKENS);
			return -EINVAL;
		}
		if (!r->has_parent && r->parent_hash != 0) {
			okvi_set_error(c, "block record %u: parent_hash set but has_parent is 0", i);
			return -EINVAL;
		}
	}
	return 0;
}

/* chunk_entries is how many entries from first on fit one descriptor of
 * capacity bytes, with their records when there are any. */
static uint32_t chunk_entries(const struct okv_block_info *records, uint32_t first, uint32_t n, uint32_t capacity,
			      uint32_t per)
{
	if (!records)
		return n - first < per ? n - first : per;
	uint64_t used = OKVI_DESC_HEADER;
	uint32_t cnt = 0;
	for (uint32_t i = first; i < n; i++) {
		uint64_t more = sizeof(struct okv_publish_entry) + okv_block_record_bytes(records[i].token_count);
		if (used + more > capacity)
			break;
		used += more;
		cnt++;
	}
	return cnt;
}

/* put_records writes the block records of entries [first, +cnt) at d and
 * returns their bytes. */
static uint32_t put_records(uint8_t *d, const struct okv_block_info *records, uint32_t first, uint32_t cnt)
{
	uint32_t off = 0;
	for (uint32_t i = first; i < first + cnt; i++) {
		const struct okv_block_info *r = &records[i];
		struct okv_block_record h = {
			.engine_hash = r->engine_hash,
			.parent_hash = r->has_parent ? r->parent_hash : 0,
			.flags = r->has_parent ? OKV_RECORD_PARENT : 0,
			.token_count = r->token_count,
		};
		uint32_t size = okv_block_record_bytes(r->token_count);
		memset(d + off, 0, size);
		memcpy(d + off, &h, sizeof(h));
		memcpy(d + off + sizeof(h), r->tokens, 4u * (size_t)r->token_count);
		off += size;
	}
	return off;
}

int okv_publish_records(okv_client *c, const struct okv_namespace *ns, uint32_t buffer_id,
			const struct okv_block_hash *hashes, const uint32_t *pages,
			const struct okv_block_info *records, uint32_t n, struct okv_publish_result *out)
{
	okvi_clear_error(c);
	struct okv_publish_result sum = { 0, 0 };
	int rc = 0;

	if (out)
		*out = sum;
	if (!c || !ns || ((!hashes || !pages) && n > 0))
		return -EINVAL;
	if (c->pidfd < 0) {
		okvi_set_error(c, "%s",
			       "publish needs a pidfd of the Manager: the client waits for the copy however long it "
			       "takes, until the reply or the Manager's exit");
		return OKV_ECLOSED;
	}
	if (buffer_id >= c->buf_count || c->buf_layers[buffer_id] == 0) {
		okvi_set_error(c, "buffer_id %u was not registered on this client (okv_register_buffer)", buffer_id);
		return -EINVAL;
	}
	if (okvi_buffer_fenced(c, buffer_id))
		return refuse_fenced(c, buffer_id);
	uint32_t per = okv_max_publish_entries(c);
	if (per == 0)
		return OKV_E2BIG;
	rc = check_records(c, records, n);
	if (rc)
		return rc;
	uint32_t layers = c->buf_layers[buffer_id];
	for (uint32_t first = 0, cnt; first < n; first += cnt) {
		cnt = chunk_entries(records, first, n, c->reply.desc_capacity, per);
		if (cnt == 0) {
			okvi_set_error(c, "block record %u does not fit this session's %u-byte descriptor area", first,
				       c->reply.desc_capacity);
			rc = OKV_E2BIG;
			break;
		}
		rc = okvi_desc_acquire(c);
		if (rc)
			break; /* nothing sent: a clean failure */
		uint8_t *d = okvi_desc(c);
		struct okv_publish_desc h = {
			.magic = OKV_PUBLISH_MAGIC,
			.schema = OKV_PUBLISH_SCHEMA,
			.flags = records ? OKV_PUBLISH_RECORDS : 0,
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
		uint32_t length = OKVI_DESC_HEADER + cnt * (uint32_t)sizeof(struct okv_publish_entry);
		if (records)
			length += put_records(d + length, records, first, cnt);
		struct okv_msg resp;
		memset(&resp, 0, sizeof(resp));
		resp.code = 0xFFFF;
		struct publish_watch watch = { .blocks = cnt, .buffer_id = buffer_id };
		rc = okvi_call_desc_until_reply(c, OKV_CMD_PUBLISH, 0, 0, length, &resp, publish_overrun, &watch);
		if (rc == 0 && (resp.arg0 > cnt || resp.arg1 > cnt - resp.arg0)) {
			okvi_set_error(c, "publish reply stored %llu + present %llu exceeds the %u entries sent",
				       (unsigned long long)resp.arg0, (unsigned long long)resp.arg1, cnt);
			rc = OKV_EPROTO;
		}
		/* Ambiguous: a malformed acknowledgement (bad line or counts), or
		 * a status a Publish never gets (Loading would mean the copy is
		 * still running; Miss, Candidates are query answers). Every other
		 * well-formed status is the Manager's clean answer: it is done
		 * with the pages. OKV_EMANAGER_DIED is clean too: its mappings
		 * died with it. */
		if (rc == OKV_EPROTO || rc == OKV_EPENDING ||
		    (rc == OKV_EINTERNAL && (resp.code == OKV_STATUS_MISS || resp.code == OKV_STATUS_CANDIDATES))) {
			fence_buffer(c, buffer_id);
			rc = OKV_EFENCED;
		}
		if (rc)
			break;
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
	okvi_clear_error(c);
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
	if (okvi_buffer_fenced(c, buffer_id))
		return refuse_fenced(c, buffer_id);
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
	okvi_clear_error(c);
	struct okv_msg resp;
	return okvi_call(c, OKV_CMD_RESTORE_POLL, op_id, 0, &resp);
}

int okv_restore_wait(okv_client *c, uint64_t op_id, uint32_t timeout_ms)
{
	okvi_clear_error(c);
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
	okvi_clear_error(c);
	struct okv_msg resp;
	return okvi_call(c, OKV_CMD_RELEASE, lease_id, 0, &resp);
}
