/*
 * native/bench/ping.c — the orbitkv_ping subject: okv_ping through
 * liborbitkv, timed by okvb_measure (pingpong.c).
 */
#include <errno.h>

#include "orbitkv/client.h"
#include "pingpong.h"

struct okvb_ping_ctx {
	okv_client *client;   /* borrowed */
	uint64_t value;       /* next value to send; the echo must equal it */
};

static int okvb_ping_once(void *ctx)
{
	struct okvb_ping_ctx *p = ctx;
	uint64_t echo = 0;
	int rc = okv_ping(p->client, p->value, &echo);
	if (rc != 0)
		return rc;
	if (echo != p->value)
		return -EPROTO;
	p->value++;
	return 0;
}

int okvb_ping_measure(struct okv_client *client, uint64_t first_value, uint64_t n,
		      uint64_t warmup, uint64_t period_ns, uint64_t *out)
{
	if (client == NULL)
		return -EINVAL;
	struct okvb_ping_ctx ctx = { .client = client, .value = first_value };
	return okvb_measure(okvb_ping_once, &ctx, n, warmup, period_ns, out);
}
