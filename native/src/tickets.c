/*
 * tickets.c — query tickets of liborbitkv (orbitkv/client.h "Query
 * tickets"; abi.h "Query tickets"; spec "Channel ABI 5").
 *
 * A ticket is the client's record of one tracked query at the Manager: its
 * op id (c->next_op_id, strictly increasing per client, so a fresh ticket
 * never collides with an op id the session used before), its revision
 * (1 at submit, + 1 per revise that changes the view), whether it is live,
 * and the view it last sent, holding a reference on the hash batch.
 *
 * Life cycle: submit → live (Loading, or a PREPARE ticket) or retired
 * (terminal answer). A live ticket is polled, revised, claimed (PREPARE)
 * or cancelled until a terminal answer, OKV_EEXPIRED or a cancel retires
 * it; retired tickets are refused locally (OKV_EINVALID, "ticket retired")
 * so an unknown poll never reaches the Manager. okv_ticket_free cancels a
 * live ticket, drops the batch reference and frees it.
 *
 * Memory: a batch and a ticket are each one malloc; poll, claim, cancel and
 * revise allocate nothing. Batches and tickets are not thread-safe (one
 * client thread each, like the client).
 *
 * The messages themselves are built and checked by ops.c (okvi_query_call,
 * okvi_ticket_msg).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* An immutable batch of hashes shared by reference (client.h). */
struct okv_block_hashes {
	uint32_t refcount;
	uint32_t n;
	struct okv_block_hash hashes[];
};

/* One query ticket (client.h okv_ticket). */
struct okv_ticket {
	uint64_t op_id;
	uint32_t revision;
	int live;       /* the Manager may hold it: poll, revise, claim, cancel */
	int prepare;    /* OKV_QUERY_PREPARE: Candidates on a poll means ready */
	uint32_t n;     /* hashes of the view sent: the effective prefix length */
	struct okv_query_spec spec; /* spec.hashes holds a reference (or NULL) */
};

/* ---- batches ------------------------------------------------------------- */

int okv_block_hashes_new(const struct okv_block_hash *hashes, uint32_t n, okv_block_hashes **out)
{
	if (out)
		*out = NULL;
	if (!hashes || !out || n == 0)
		return -EINVAL;
	okv_block_hashes *b = malloc(sizeof(*b) + (size_t)n * sizeof(b->hashes[0]));
	if (!b)
		return -ENOMEM;
	b->refcount = 1;
	b->n = n;
	memcpy(b->hashes, hashes, (size_t)n * sizeof(b->hashes[0]));
	*out = b;
	return 0;
}

okv_block_hashes *okv_block_hashes_ref(okv_block_hashes *b)
{
	if (b)
		b->refcount++;
	return b;
}

void okv_block_hashes_unref(okv_block_hashes *b)
{
	if (b && --b->refcount == 0)
		free(b);
}

uint32_t okv_block_hashes_len(const okv_block_hashes *b)
{
	return b ? b->n : 0;
}

const struct okv_block_hash *okv_block_hashes_data(const okv_block_hashes *b)
{
	return b ? b->hashes : NULL;
}

/* ---- helpers -------------------------------------------------------------- */

/* The view spec asks: prefix_len 0 = the whole batch. Returns 0 with *n set,
 * or -EINVAL (no batch, prefix longer than the batch). */
static int view_len(okv_client *c, const struct okv_query_spec *spec, uint32_t *n)
{
	if (!spec || !spec->hashes) {
		if (c)
			okvi_set_error(c, "%s", "query spec without a hash batch");
		return -EINVAL;
	}
	uint32_t len = spec->hashes->n;
	if (spec->prefix_len > len) {
		if (c)
			okvi_set_error(c, "prefix_len %u exceeds the %u hashes of the batch", spec->prefix_len, len);
		return -EINVAL;
	}
	*n = spec->prefix_len ? spec->prefix_len : len;
	return 0;
}

/* Send spec under (op_id, revision). *sent (may be NULL) tells whether a
 * request line went out (every request takes a fresh request id), whatever
 * came back: refusals before sending leave the Manager's state alone. */
static int submit_msg(okv_client *c, uint64_t op_id, uint32_t revision, const struct okv_query_spec *spec,
		      uint32_t n, struct okv_query_answer *ans, struct okv_msg *resp, int *sent)
{
	uint64_t before = c->next_request_id;
	struct okvi_query_req rq = {
		.ns = spec->ns,
		.hashes = spec->hashes->hashes,
		.n = n,
		.flags = spec->flags,
		.op_id = op_id,
		.revision = revision,
		.request_id = spec->request_id,
		.group = spec->group,
		.recovery_first = spec->recovery_first,
		.recovery_count = spec->recovery_count,
	};
	int rc = okvi_query_call(c, &rq, ans, resp);
	if (sent)
		*sent = c->next_request_id != before;
	return rc;
}

/* What a Poll or Claim of t must agree with. */
static struct okvi_query_expect ticket_expect(const okv_ticket *t)
{
	struct okvi_query_expect w = {
		.op_id = t->op_id,
		.revision = t->revision,
		.max_hits = t->n,
		.flags = t->spec.flags,
		.recovery_first = t->spec.recovery_first,
		.recovery_count = t->spec.recovery_count,
	};
	return w;
}

/* Whether an Invalid answer says the Manager no longer knows the op id. */
static int unknown_op(int rc, const struct okv_msg *resp)
{
	return rc == OKV_EINVALID && resp->code == OKV_STATUS_INVALID && resp->arg0 == OKV_FIELD_OP_ID;
}

/*
 * Apply the answer of a submit, revise or poll to t: terminal answers
 * (0) retire it, except Candidates of a PREPARE ticket, which means
 * "prepared: claim it" (OKV_EPENDING, still live); OKV_EEXPIRED and an
 * unknown op id retire it. Returns the code for the caller.
 * A PREPARE ticket answered Ok or Miss by a poll (the contract has Poll
 * report readiness only) is treated as terminal too: the answer, a lease
 * included, is handed to the caller rather than dropped, and the Manager
 * expires whatever it still keeps.
 */
static int apply_answer(okv_ticket *t, int rc, const struct okv_msg *resp, struct okv_query_answer *ans)
{
	if (rc == 0 && t->prepare && ans->status == OKV_STATUS_CANDIDATES)
		return OKV_EPENDING;
	/* Unadmitted from a poll or a revision is a settled answer the Manager
	 * delivered and retired (abi.h: a ticket that cannot be leased, e.g. a
	 * lease larger than the whole byte budget); a new ticket answered
	 * Unadmitted was never kept. */
	if (rc == 0 || rc == OKV_EEXPIRED || rc == OKV_EUNADMITTED || unknown_op(rc, resp))
		t->live = 0;
	return rc;
}

/* A retired ticket is refused here, without a message (abi.h: unknown polls
 * never submit work; a retired op id would only earn Invalid). */
static int refuse_retired(okv_client *c, const okv_ticket *t)
{
	okvi_set_error(c, "ticket retired: op id %llu revision %u is no longer live",
		       (unsigned long long)t->op_id, t->revision);
	return OKV_EINVALID;
}

/* Replace t's view by spec (taking a reference on its batch first, so the
 * same batch is never freed in between). */
static void adopt_spec(okv_ticket *t, const struct okv_query_spec *spec, uint32_t n)
{
	okv_block_hashes *old = t->spec.hashes;
	uint64_t request_id = t->spec.request_id, group = t->spec.group;
	t->spec = *spec;
	t->spec.hashes = okv_block_hashes_ref(spec->hashes);
	/* request_id and group are the ticket's for its whole life (abi.h: a
	 * revision that changes them is Invalid field request). */
	t->spec.request_id = request_id;
	t->spec.group = group;
	t->n = n;
	t->prepare = (spec->flags & OKV_QUERY_PREPARE) != 0;
	okv_block_hashes_unref(old);
}

/* ---- tickets ---------------------------------------------------------------- */

int okv_ticket_submit(okv_client *c, const struct okv_query_spec *spec, okv_ticket **out,
		      struct okv_query_answer *ans)
{
	okvi_clear_error(c);
	struct okv_query_answer scratch;
	struct okv_msg resp;
	uint32_t n;

	if (out)
		*out = NULL;
	if (!ans)
		ans = &scratch;
	memset(ans, 0, sizeof(*ans));
	if (!c || !out)
		return -EINVAL;
	int rc = view_len(c, spec, &n);
	if (rc)
		return rc;
	if (c->next_op_id == 0 || c->next_op_id == UINT64_MAX) {
		/* 0 would be an untracked query; ids never go back (abi.h). */
		okvi_set_error(c, "%s", "this session used up its ticket op ids (2^64 - 1); reconnect");
		return -EOVERFLOW;
	}
	okv_ticket *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->op_id = c->next_op_id;
	t->revision = 1;
	t->live = 1;
	t->spec.request_id = spec->request_id;
	t->spec.group = spec->group;
	adopt_spec(t, spec, n);
	int sent;
	rc = submit_msg(c, t->op_id, t->revision, spec, n, ans, &resp, &sent);
	if (!sent) {
		/* Refused before anything was sent: the op id stays unused. */
		okv_ticket_free(NULL, t);
		return rc;
	}
	/* Sent (or maybe sent): the op id is spent whatever the answer. */
	c->next_op_id = t->op_id + 1;
	rc = apply_answer(t, rc, &resp, ans);
	if (rc == 0 || rc == OKV_EPENDING) {
		*out = t;
		return rc;
	}
	/* Unadmitted (nothing kept at the Manager), Invalid, or no answer: the
	 * caller gets no ticket. A ticket the Manager created for a request
	 * whose answer never came expires there on its own. */
	okv_ticket_free(NULL, t);
	return rc;
}

/* The start of every call on a live ticket (Poll, Revise, Claim, Cancel):
 * the last error cleared, *ans (or scratch) cleared, the arguments checked,
 * a retired ticket refused without a message. */
static int ticket_begin(okv_client *c, const okv_ticket *t, struct okv_query_answer **ans,
			struct okv_query_answer *scratch)
{
	okvi_clear_error(c);
	if (!*ans)
		*ans = scratch;
	memset(*ans, 0, sizeof(**ans));
	if (!c || !t)
		return -EINVAL;
	if (!t->live)
		return refuse_retired(c, t);
	return 0;
}

int okv_ticket_poll(okv_client *c, okv_ticket *t, struct okv_query_answer *ans)
{
	struct okv_query_answer scratch;
	struct okv_msg resp;
	int rc = ticket_begin(c, t, &ans, &scratch);
	if (rc)
		return rc;
	struct okvi_query_expect w = ticket_expect(t);
	rc = okvi_ticket_msg(c, OKV_CMD_POLL, &w, ans, &resp);
	return apply_answer(t, rc, &resp, ans);
}

int okv_ticket_revise(okv_client *c, okv_ticket *t, const struct okv_query_spec *spec,
		      struct okv_query_answer *ans)
{
	struct okv_query_answer scratch;
	struct okv_msg resp;
	uint32_t n;
	int rc = ticket_begin(c, t, &ans, &scratch);
	if (rc)
		return rc;
	rc = view_len(c, spec, &n);
	if (rc)
		return rc;
	/* The same view in constant time: batch identity and length, never a
	 * comparison of hashes. */
	const struct okv_query_spec *cur = &t->spec;
	if (spec->hashes == cur->hashes && n == t->n && spec->flags == cur->flags &&
	    memcmp(&spec->ns, &cur->ns, sizeof(spec->ns)) == 0 && spec->recovery_first == cur->recovery_first &&
	    spec->recovery_count == cur->recovery_count)
		return okv_ticket_poll(c, t, ans);
	if (t->revision == UINT32_MAX) {
		okvi_set_error(c, "ticket op id %llu has used every revision", (unsigned long long)t->op_id);
		return -EOVERFLOW;
	}
	/* request_id and group stay the ticket's (spec's are ignored). */
	struct okv_query_spec next = *spec;
	next.request_id = cur->request_id;
	next.group = cur->group;
	int sent;
	rc = submit_msg(c, t->op_id, t->revision + 1, &next, n, ans, &resp, &sent);
	if (!sent)
		return rc; /* nothing sent: the live revision is unchanged */
	/* The new revision is live once the Manager served it (an answer, a
	 * malformed one included), and also when no answer came: the Manager
	 * serves a slot's requests in order, so a late request still lands.
	 * Refusals (Invalid, Unadmitted, stale, unsupported, Internal) leave
	 * the live revision as it was. */
	if (rc == 0 || rc == OKV_EPENDING || rc == OKV_EEXPIRED || rc == OKV_EPROTO || resp.code == 0xFFFF) {
		t->revision++;
		adopt_spec(t, &next, n);
	}
	return apply_answer(t, rc, &resp, ans);
}

int okv_ticket_claim(okv_client *c, okv_ticket *t, struct okv_query_answer *ans)
{
	struct okv_query_answer scratch;
	struct okv_msg resp;
	int rc = ticket_begin(c, t, &ans, &scratch);
	if (rc)
		return rc;
	if (!t->prepare) {
		/* Refused here, and the ticket stays live: sent, this Claim would
		 * come back Unadmitted, which retires the ticket below while the
		 * Manager keeps it live (an orphan). */
		okvi_set_error(c, "ticket %llu is not a preparation (OKV_QUERY_PREPARE): poll it instead of claiming",
			       (unsigned long long)t->op_id);
		return -EINVAL;
	}
	struct okvi_query_expect w = ticket_expect(t);
	rc = okvi_ticket_msg(c, OKV_CMD_CLAIM, &w, ans, &resp);
	/* Ok or Miss consume the preparation; Unadmitted means the Manager has
	 * nothing to claim for this revision (retired or expired): either way
	 * the ticket is done. */
	if (rc == 0 || rc == OKV_EUNADMITTED || rc == OKV_EEXPIRED || unknown_op(rc, &resp))
		t->live = 0;
	return rc;
}

int okv_ticket_cancel(okv_client *c, okv_ticket *t)
{
	struct okv_query_answer scratch, *ans = NULL;
	struct okv_msg resp;
	int rc = ticket_begin(c, t, &ans, &scratch);
	if (rc)
		return rc;
	struct okvi_query_expect w = ticket_expect(t);
	rc = okvi_ticket_msg(c, OKV_CMD_CANCEL_QUERY, &w, ans, &resp);
	if (rc == 0 || rc == OKV_EEXPIRED || unknown_op(rc, &resp))
		t->live = 0;
	return rc;
}

void okv_ticket_free(okv_client *c, okv_ticket *t)
{
	if (!t)
		return;
	if (c && t->live)
		(void)okv_ticket_cancel(c, t); /* best effort: it expires at the Manager anyway */
	okv_block_hashes_unref(t->spec.hashes);
	free(t);
}

uint64_t okv_ticket_op_id(const okv_ticket *t)
{
	return t ? t->op_id : 0;
}

uint32_t okv_ticket_revision(const okv_ticket *t)
{
	return t ? t->revision : 0;
}

int okv_ticket_live(const okv_ticket *t)
{
	return t ? t->live : 0;
}

/* ---- raw messages ------------------------------------------------------------ */

int okv_op_submit(okv_client *c, uint64_t op_id, uint32_t revision, const struct okv_query_spec *spec,
		  struct okv_query_answer *ans)
{
	okvi_clear_error(c);
	struct okv_query_answer scratch;
	struct okv_msg resp;
	uint32_t n;

	if (!ans)
		ans = &scratch;
	memset(ans, 0, sizeof(*ans));
	if (!c)
		return -EINVAL;
	int rc = view_len(c, spec, &n);
	if (rc)
		return rc;
	/* Keep the ticket API's op ids fresh past any id sent here. */
	if (op_id >= c->next_op_id)
		c->next_op_id = op_id == UINT64_MAX ? UINT64_MAX : op_id + 1; /* UINT64_MAX: ids used up */
	return submit_msg(c, op_id, revision, spec, n, ans, &resp, NULL);
}

/* Poll or Claim of a raw op id: the view and flags are unknown, so the
 * result is bounded by the largest view a session can send. */
static int raw_msg(okv_client *c, uint16_t code, uint64_t op_id, uint32_t revision, struct okv_query_answer *ans)
{
	struct okv_query_answer scratch;
	struct okv_msg resp;

	if (!ans)
		ans = &scratch;
	memset(ans, 0, sizeof(*ans));
	if (!c)
		return -EINVAL;
	struct okvi_query_expect w = {
		.op_id = op_id,
		.revision = revision,
		.max_hits = okv_max_query_hashes(c),
		.flags = OKVI_FLAGS_UNKNOWN,
	};
	return okvi_ticket_msg(c, code, &w, ans, &resp);
}

int okv_op_poll(okv_client *c, uint64_t op_id, uint32_t revision, struct okv_query_answer *ans)
{
	okvi_clear_error(c);
	return raw_msg(c, OKV_CMD_POLL, op_id, revision, ans);
}

int okv_op_claim(okv_client *c, uint64_t op_id, uint32_t revision, struct okv_query_answer *ans)
{
	okvi_clear_error(c);
	return raw_msg(c, OKV_CMD_CLAIM, op_id, revision, ans);
}

int okv_op_cancel(okv_client *c, uint64_t op_id, uint32_t revision)
{
	okvi_clear_error(c);
	return raw_msg(c, OKV_CMD_CANCEL_QUERY, op_id, revision, NULL);
}
