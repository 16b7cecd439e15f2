/*
 * native/bench/discover.c — the discovery subjects of `orbitkv-bench
 * discover`, timed by okvb_measure (pingpong.c): okv_discover_local from
 * the mapped index, the round-trip QueryBundle discovery (a ticket with
 * OKV_QUERY_DISCOVER: metadata only, no lease), and an empty call (the
 * timer's own cost, which every sample includes).
 */
#include <errno.h>
#include <string.h>

#include "orbitkv/client.h"
#include "pingpong.h"

struct okvb_disc_ctx {
	okv_client *client;                  /* borrowed */
	struct okv_namespace ns;
	const struct okv_block_hash *hashes; /* borrowed, n of them */
	size_t n;
	okv_block_hashes *batch;             /* owned (round trip only) */
	uint32_t want;                       /* the count every answer must give */
	uint64_t request_id;
};

static int okvb_disc_local_once(void *ctx)
{
	struct okvb_disc_ctx *d = ctx;
	uint32_t count = 0;
	int rc = okv_discover_local(d->client, &d->ns, d->hashes, d->n, &count);
	if (rc != 0)
		return rc;
	return count == d->want ? 0 : -EPROTO;
}

static int okvb_disc_rtt_once(void *ctx)
{
	struct okvb_disc_ctx *d = ctx;
	struct okv_query_spec spec;
	struct okv_query_answer ans;
	okv_ticket *t = NULL;
	int rc;

	memset(&spec, 0, sizeof(spec));
	spec.ns = d->ns;
	spec.hashes = d->batch;
	spec.flags = OKV_QUERY_DISCOVER;
	spec.request_id = ++d->request_id;
	rc = okv_ticket_submit(d->client, &spec, &t, &ans);
	okv_ticket_free(d->client, t); /* retired with its answer: no message */
	if (rc != 0)
		return rc;
	return ans.hit_count == d->want ? 0 : -EPROTO;
}

static int okvb_disc_empty_once(void *ctx)
{
	(void)ctx;
	return 0;
}

int okvb_discover_measure(okv_client *client, const struct okv_namespace *ns, const struct okv_block_hash *hashes,
			  size_t n, uint32_t want, int mode, uint64_t iters, uint64_t warmup, uint64_t period_ns,
			  uint64_t *out)
{
	struct okvb_disc_ctx d = { .client = client, .hashes = hashes, .n = n, .want = want };
	int rc;

	if (client == NULL || ns == NULL || (n > 0 && hashes == NULL) || n > UINT32_MAX)
		return -EINVAL;
	d.ns = *ns;
	switch (mode) {
	case 0:
		return okvb_measure(okvb_disc_local_once, &d, iters, warmup, period_ns, out);
	case 1:
		rc = okv_block_hashes_new(hashes, (uint32_t)n, &d.batch);
		if (rc != 0)
			return rc;
		rc = okvb_measure(okvb_disc_rtt_once, &d, iters, warmup, period_ns, out);
		okv_block_hashes_unref(d.batch);
		return rc;
	case 2:
		return okvb_measure(okvb_disc_empty_once, &d, iters, warmup, period_ns, out);
	}
	return -EINVAL;
}
