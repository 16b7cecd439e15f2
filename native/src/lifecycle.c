/*
 * lifecycle.c — client side of the bootstrap hello and lifecycle frames
 * (docs/design.md §5.1). See lifecycle.h for the contract of each function; the
 * Go twin of the frame codec is gocore/lifecycle.
 */
#define _GNU_SOURCE
#include "lifecycle.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "proto/lifecycle.pb-c.h"

/* Control buffer for up to OKV_FRAME_MAX_FDS fds, aligned for cmsghdr. */
union okvi_cmsg_buf {
	char buf[CMSG_SPACE(sizeof(int) * OKV_FRAME_MAX_FDS)];
	struct cmsghdr align;
};

int okvi_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	if (err != NULL && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Whether rc is a -errno (every OKV_E* code lies below -1000). */
static bool okvi_is_errno(int rc)
{
	return rc < 0 && rc > OKV_EPROTO;
}

/* Copy src into a fixed field of dstlen bytes, truncating, NUL-terminated. */
static void okvi_copy_str(char *dst, size_t dstlen, const char *src)
{
	size_t n = src == NULL ? 0 : strnlen(src, dstlen - 1);
	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

static const char *const okvi_boot_status_names[] = {
	[OKV_BOOT_OK] = "OK",
	[OKV_BOOT_BAD_MAGIC] = "BAD_MAGIC",
	[OKV_BOOT_BAD_VERSION] = "BAD_VERSION",
	[OKV_BOOT_BAD_FIELD] = "BAD_FIELD",
	[OKV_BOOT_FULL] = "FULL",
	[OKV_BOOT_INTERNAL] = "INTERNAL",
};

int okvi_hello_encode(struct okv_hello *h, uint32_t pid, uint32_t role, const char *instance_id)
{
	size_t n = instance_id == NULL ? 0 : strnlen(instance_id, OKV_INSTANCE_ID_BYTES + 1);

	memset(h, 0, sizeof(*h));
	if (n > OKV_INSTANCE_ID_BYTES || role > OKV_ROLE_MAX)
		return -EINVAL;
	h->magic = OKV_BOOTSTRAP_MAGIC;
	h->protocol_version = OKV_BOOTSTRAP_VERSION;
	h->abi_version = OKV_ABI_VERSION;
	h->pid = pid;
	h->role = role;
	if (n > 0)
		memcpy(h->instance_id, instance_id, n);
	return 0;
}

int okvi_hello_reply_check(const void *buf, size_t n, struct okv_hello_reply *out, char *err, size_t errlen)
{
	struct okv_hello_reply r;

	if (n != sizeof(r))
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply length %zu differs from %zu", n, sizeof(r));
	memcpy(&r, buf, sizeof(r));
	*out = r;
	if (r.magic != OKV_BOOTSTRAP_MAGIC)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply magic 0x%08x differs from OKV_BOOTSTRAP_MAGIC 0x%08x",
				 r.magic, OKV_BOOTSTRAP_MAGIC);
	if (r.protocol_version != OKV_BOOTSTRAP_VERSION)
		return okvi_fail(err, errlen, OKV_EVERSION, "hello reply protocol_version %u differs from %u",
				 (unsigned)r.protocol_version, OKV_BOOTSTRAP_VERSION);
	if (r.status > OKV_BOOT_MAX)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply status %u exceeds limit %u", (unsigned)r.status,
				 OKV_BOOT_MAX);
	if (memchr(r.error, '\0', sizeof(r.error)) == NULL)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply error text not NUL-terminated within %zu bytes",
				 sizeof(r.error));
	if (r.status != OKV_BOOT_OK)
		return okvi_fail(err, errlen, OKV_EREFUSED, "hello refused (%s): %s", okvi_boot_status_names[r.status],
				 r.error);
	if (r.epoch == 0)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply epoch is 0; must be nonzero");
	if ((r.initial_generation & 1u) == 0)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply initial_generation %llu is even; must be odd",
				 (unsigned long long)r.initial_generation);
	if (r.desc_offset != OKV_SLOT_DESC_OFFSET)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply desc_offset %u differs from %u", r.desc_offset,
				 OKV_SLOT_DESC_OFFSET);
	if (r.desc_capacity == 0 || r.desc_capacity > OKVI_MAX_DESC_CAPACITY)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply desc_capacity %u outside 1..%u", r.desc_capacity,
				 OKVI_MAX_DESC_CAPACITY);
	if ((uint64_t)r.slot_bytes != (uint64_t)r.desc_offset + r.desc_capacity)
		return okvi_fail(err, errlen, OKV_EPROTO,
				 "hello reply slot_bytes %u differs from desc_offset + desc_capacity = %llu", r.slot_bytes,
				 (unsigned long long)r.desc_offset + r.desc_capacity);
	if (r.max_sessions > OKV_MAX_SESSIONS)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply max_sessions %u exceeds limit %u", r.max_sessions,
				 OKV_MAX_SESSIONS);
	if (r.slot_index >= r.max_sessions)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply slot_index %u not below max_sessions %u",
				 r.slot_index, r.max_sessions);
	if (r.slot_index == OKV_CONTROL_SLOT)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply slot_index %u is OKV_CONTROL_SLOT, reserved",
				 r.slot_index);
	if (r.max_frame_body != OKV_FRAME_MAX_BODY)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply max_frame_body %u differs from %u",
				 r.max_frame_body, OKV_FRAME_MAX_BODY);
	if (r.manager_pid == 0)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply manager_pid is 0; must be a process id");
	if (r.ext_bytes > OKV_BOOT_EXT_MAX_BYTES || r.ext_bytes % 8 != 0)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply ext_bytes %u: want a multiple of 8 up to %u",
				 (unsigned)r.ext_bytes, OKV_BOOT_EXT_MAX_BYTES);
	if (r.ext_fds > OKV_BOOT_EXT_MAX_FDS)
		return okvi_fail(err, errlen, OKV_EPROTO, "hello reply ext_fds %u exceeds limit %u", (unsigned)r.ext_fds,
				 OKV_BOOT_EXT_MAX_FDS);
	return 0;
}

/* text_record copies record rec, a text extension named name, into dst
 * (room for max bytes and a NUL): it must come once, carry no fds, hold
 * 1..max bytes, all printable ASCII. Returns 0 or OKV_EPROTO naming the
 * record, the field and the limit. */
static int text_record(char *dst, const char *name, uint32_t max, const struct okv_boot_ext *h, const uint8_t *v,
		       int rec, char *err, size_t errlen)
{
	if (dst[0] != '\0')
		return okvi_fail(err, errlen, OKV_EPROTO, "extension record %d: %s repeated", rec, name);
	if (h->nfds != 0 || h->length == 0 || h->length > max)
		return okvi_fail(err, errlen, OKV_EPROTO,
				 "extension record %d: %s of %u bytes and %u fds: want 1..%u bytes, no fds", rec, name,
				 h->length, (unsigned)h->nfds, max);
	for (uint32_t i = 0; i < h->length; i++)
		if (v[i] < 0x20 || v[i] > 0x7e)
			return okvi_fail(err, errlen, OKV_EPROTO,
					 "extension record %d: %s byte %u is 0x%02x, want printable ASCII", rec, name, i,
					 v[i]);
	memcpy(dst, v, h->length);
	dst[h->length] = '\0';
	return 0;
}

int okvi_boot_exts_parse(const void *buf, size_t n, uint32_t nfds, struct okvi_boot_exts *out, char *err,
			 size_t errlen)
{
	const uint8_t *b = buf;
	size_t off = 0;
	uint32_t fds = 0;
	int rec = 0, rc;

	memset(out, 0, sizeof(*out));
	if (n > OKV_BOOT_EXT_MAX_BYTES || nfds > OKV_BOOT_EXT_MAX_FDS)
		return okvi_fail(err, errlen, OKV_EPROTO, "extension records: %zu bytes and %u fds, limits %u and %u", n,
				 nfds, OKV_BOOT_EXT_MAX_BYTES, OKV_BOOT_EXT_MAX_FDS);
	for (; off < n; rec++) {
		struct okv_boot_ext h;
		if (n - off < sizeof(h))
			return okvi_fail(err, errlen, OKV_EPROTO, "extension record %d: header needs %zu bytes, %zu left",
					 rec, sizeof(h), n - off);
		memcpy(&h, b + off, sizeof(h));
		off += sizeof(h);
		size_t padded = ((size_t)h.length + 7u) & ~(size_t)7u;
		if (h.length > n - off || padded > n - off)
			return okvi_fail(err, errlen, OKV_EPROTO,
					 "extension record %d: length %u (padded %zu) exceeds the %zu bytes left", rec,
					 h.length, padded, n - off);
		for (size_t i = h.length; i < padded; i++)
			if (b[off + i] != 0)
				return okvi_fail(err, errlen, OKV_EPROTO, "extension record %d: padding byte %zu is not zero",
						 rec, i - h.length);
		if (h.nfds > nfds - fds)
			return okvi_fail(err, errlen, OKV_EPROTO,
					 "extension record %d: nfds %u exceeds the %u of ext_fds left", rec,
					 (unsigned)h.nfds, nfds - fds);
		fds += h.nfds;
		const uint8_t *v = b + off;
		switch (h.type) {
		case OKV_BOOT_EXT_MANAGER_VERSION:
			if ((rc = text_record(out->manager_version, "manager_version", OKV_BOOT_EXT_VERSION_MAX, &h, v, rec, err, errlen)) != 0)
				return rc;
			break;
		case OKV_BOOT_EXT_IOX2_SERVICE | OKV_BOOT_EXT_REQUIRED:
			if ((rc = text_record(out->iox2_service, "iox2_service", OKV_BOOT_EXT_SERVICE_MAX, &h, v, rec, err, errlen)) != 0)
				return rc;
			break;
		case OKV_BOOT_EXT_IOX2_RUNTIME | OKV_BOOT_EXT_REQUIRED:
			if ((rc = text_record(out->iox2_runtime, "iox2_runtime", OKV_BOOT_EXT_RUNTIME_MAX, &h, v, rec, err, errlen)) != 0)
				return rc;
			break;
		default:
			if (h.type & OKV_BOOT_EXT_REQUIRED)
				return okvi_fail(err, errlen, OKV_EPROTO,
						 "extension record %d: type 0x%04x is required and unknown to this "
						 "liborbitkv; upgrade it together with the Manager",
						 rec, (unsigned)h.type);
			out->skipped++;
		}
		off += padded;
	}
	if (fds != nfds)
		return okvi_fail(err, errlen, OKV_EPROTO, "extension records own %u fds, ext_fds says %u", fds, nfds);
	return 0;
}

/* Whether code is a request, the reply of one, or the error code. */
static bool okvi_frame_code_known(uint16_t code)
{
	uint16_t req;

	if (code == OKV_FRAME_ERROR)
		return true;
	req = code & (uint16_t)~OKV_FRAME_REPLY;
	return req >= OKV_FRAME_REGISTER_INSTANCE && req <= OKV_FRAME_CODE_MAX;
}

int okvi_frame_header_check(const void *buf, size_t n, uint64_t epoch, struct okv_frame_header *out, char *err,
			    size_t errlen)
{
	struct okv_frame_header h;

	if (n != sizeof(h))
		return okvi_fail(err, errlen, OKV_EPROTO, "frame header length %zu differs from %zu", n, sizeof(h));
	memcpy(&h, buf, sizeof(h));
	*out = h;
	if (h.magic != OKV_FRAME_MAGIC)
		return okvi_fail(err, errlen, OKV_EPROTO, "frame magic 0x%08x differs from OKV_FRAME_MAGIC 0x%08x", h.magic,
				 OKV_FRAME_MAGIC);
	if (h.version != OKV_FRAME_VERSION)
		return okvi_fail(err, errlen, OKV_EVERSION, "frame version %u differs from protocol version %u",
				 (unsigned)h.version, OKV_FRAME_VERSION);
	if (!okvi_frame_code_known(h.code))
		return okvi_fail(err, errlen, OKV_EPROTO,
				 "frame code 0x%04x unknown (requests 1..%u, their replies |0x8000, error 0xffff)",
				 (unsigned)h.code, (unsigned)OKV_FRAME_CODE_MAX);
	if (h.epoch != epoch)
		return okvi_fail(err, errlen, OKV_EPROTO, "frame epoch %llu differs from session epoch %llu",
				 (unsigned long long)h.epoch, (unsigned long long)epoch);
	if (h.length > OKV_FRAME_MAX_BODY)
		return okvi_fail(err, errlen, OKV_EPROTO, "frame body length %u exceeds limit %u", h.length,
				 OKV_FRAME_MAX_BODY);
	if (h.reserved != 0)
		return okvi_fail(err, errlen, OKV_EPROTO, "frame reserved 0x%x must be zero", h.reserved);
	return 0;
}

/* Milliseconds of CLOCK_MONOTONIC: deadlines ignore wall-clock steps. */
static int64_t okvi_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until sock has one of events or deadline_ms (okvi_now_ms time; < 0 =
 * none) passes; EINTR retries with the time left. Returns 0, OKV_ETIMEDOUT
 * or -errno of poll(2). */
static int okvi_wait(int sock, short events, int64_t deadline_ms)
{
	struct pollfd p = { .fd = sock, .events = events };

	for (;;) {
		int timeout = -1;
		int rc;

		if (deadline_ms >= 0) {
			int64_t left = deadline_ms - okvi_now_ms();
			/* A deadline already due still polls once, so timeout 0
			 * reads what is already there. */
			timeout = left <= 0 ? 0 : left > 0x7fffffff ? 0x7fffffff : (int)left;
		}
		rc = poll(&p, 1, timeout);
		if (rc > 0)
			return 0;
		if (rc == 0) {
			if (okvi_now_ms() >= deadline_ms)
				return OKV_ETIMEDOUT;
			continue; /* woke early: wait for the rest */
		}
		if (errno != EINTR)
			return -errno;
	}
}

int okvi_frame_send(int sock, uint16_t code, uint64_t epoch, const void *body, uint32_t len, const int *fds,
		    int nfds)
{
	return okvi_frame_send_until(sock, code, epoch, body, len, fds, nfds, -1);
}

int okvi_frame_send_until(int sock, uint16_t code, uint64_t epoch, const void *body, uint32_t len,
			  const int *fds, int nfds, int64_t deadline_ms)
{
	struct okv_frame_header h = {
		.magic = OKV_FRAME_MAGIC,
		.version = OKV_FRAME_VERSION,
		.code = code,
		.epoch = epoch,
		.length = len,
	};
	union okvi_cmsg_buf cbuf;
	const uint8_t *b = body;
	size_t total = sizeof(h) + (size_t)len;
	size_t sent = 0;

	if (len > OKV_FRAME_MAX_BODY || nfds < 0 || nfds > (int)OKV_FRAME_MAX_FDS || (body == NULL && len > 0) ||
	    (fds == NULL && nfds > 0))
		return -EINVAL;
	memset(&cbuf, 0, sizeof(cbuf));
	if (nfds > 0) {
		struct cmsghdr *c = &cbuf.align;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	while (sent < total) {
		struct iovec iov[2];
		struct msghdr m = { .msg_iov = iov };
		ssize_t w;

		if (sent < sizeof(h)) {
			iov[0].iov_base = (uint8_t *)&h + sent;
			iov[0].iov_len = sizeof(h) - sent;
			iov[1].iov_base = (void *)b;
			iov[1].iov_len = len;
			m.msg_iovlen = len > 0 ? 2 : 1;
		} else {
			iov[0].iov_base = (void *)(b + (sent - sizeof(h)));
			iov[0].iov_len = total - sent;
			m.msg_iovlen = 1;
		}
		/* The fds ride with the first byte only; once any byte went out,
		 * they went with it. */
		if (sent == 0 && nfds > 0) {
			m.msg_control = cbuf.buf;
			m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		}
		/* With a deadline never block in sendmsg itself: wait in poll(2). */
		w = sendmsg(sock, &m, MSG_NOSIGNAL | (deadline_ms >= 0 ? MSG_DONTWAIT : 0));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int rc = okvi_wait(sock, POLLOUT, deadline_ms);
				if (rc != 0)
					return rc;
				continue;
			}
			return -errno;
		}
		sent += (size_t)w;
	}
	return 0;
}

/*
 * Take the fds of m's SCM_RIGHTS control messages: keep up to keep_max of
 * them in keep[] (advancing *kept), close the rest. Returns how many were
 * closed (MSG_CTRUNC counts as one more: the kernel dropped some).
 */
static int okvi_take_rights(struct msghdr *m, int *keep, int keep_max, int *kept)
{
	int closed = (m->msg_flags & MSG_CTRUNC) ? 1 : 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < n; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
				if (keep && *kept < keep_max) {
					keep[(*kept)++] = fd;
				} else {
					close(fd);
					closed++;
				}
			}
		}
	}
	return closed;
}

int okvi_recv_exact_fds(int sock, void *buf, size_t n, int64_t deadline_ms, size_t *got, int *fds, int max_fds,
			int *nfds, char *err, size_t errlen)
{
	*got = 0;
	if (nfds)
		*nfds = 0;
	while (*got < n) {
		union okvi_cmsg_buf cbuf;
		struct iovec iov = { .iov_base = (uint8_t *)buf + *got, .iov_len = n - *got };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
				    .msg_controllen = sizeof(cbuf.buf) };
		ssize_t r;
		int closed;

		int rc = okvi_wait(sock, POLLIN, deadline_ms);
		if (rc != 0)
			return rc;
		r = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			return -errno;
		}
		closed = okvi_take_rights(&m, fds, max_fds, nfds);
		if (closed > 0 && max_fds == 0)
			return okvi_fail(err, errlen, OKV_EPROTO, "frame carried %d fds; frames to a client carry none",
					 closed);
		if (closed > 0)
			return okvi_fail(err, errlen, OKV_EPROTO,
					 "more fds than the %d this client takes with one message (%d%s beyond)", max_fds,
					 closed, (m.msg_flags & MSG_CTRUNC) ? " or more: the kernel dropped some" : "");
		if (r == 0)
			return 1;
		*got += (size_t)r;
	}
	return 0;
}

/* Receive exactly n bytes that carry no fds (a frame to a client). */
static int okvi_recv_exact(int sock, void *buf, size_t n, int64_t deadline_ms, size_t *got, char *err, size_t errlen)
{
	return okvi_recv_exact_fds(sock, buf, n, deadline_ms, got, NULL, 0, NULL, err, errlen);
}

/* Close the n fds of fds[] (an error after they were received). */
static void okvi_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* okvi_frame_recv taking up to max_fds fds that ride with the header into
 * fds[] (*nfds of them; closed again on any error). */
static int okvi_frame_recv_fds(int sock, uint64_t epoch, int timeout_ms, struct okv_frame_header *h, uint8_t **body,
			       int *fds, int max_fds, int *nfds, char *err, size_t errlen)
{
	uint8_t hb[sizeof(struct okv_frame_header)];
	int64_t deadline = timeout_ms < 0 ? -1 : okvi_now_ms() + timeout_ms;
	uint8_t *b;
	size_t got;
	int rc;
	int kept = 0;

	*body = NULL;
	if (nfds)
		*nfds = 0;
	rc = okvi_recv_exact_fds(sock, hb, sizeof(hb), deadline, &got, fds, max_fds, &kept, err, errlen);
	if (rc != 0 || (rc = okvi_frame_header_check(hb, sizeof(hb), epoch, h, err, errlen)) != 0) {
		okvi_close_fds(fds, kept);
		kept = 0;
	}
	if (rc == 1 && got == 0)
		return okvi_fail(err, errlen, OKV_ECLOSED, "bootstrap socket closed by the Manager");
	if (rc == 1)
		return okvi_fail(err, errlen, OKV_EPROTO, "frame header ends after %zu of %zu bytes", got, sizeof(hb));
	if (rc == OKV_ETIMEDOUT)
		return okvi_fail(err, errlen, rc, "no frame header within %d ms", timeout_ms);
	if (okvi_is_errno(rc))
		return okvi_fail(err, errlen, rc, "receiving frame header: %s", okv_strerror(rc));
	if (rc != 0)
		return rc; /* OKV_EPROTO with err written */
	/* length <= OKV_FRAME_MAX_BODY was checked above, before allocating. */
	b = malloc(h->length > 0 ? h->length : 1);
	if (b == NULL) {
		okvi_close_fds(fds, kept);
		return okvi_fail(err, errlen, -ENOMEM, "allocating a frame body of %u bytes", h->length);
	}
	rc = okvi_recv_exact(sock, b, h->length, deadline, &got, err, errlen);
	if (rc == 1)
		rc = okvi_fail(err, errlen, OKV_EPROTO, "frame body ends after %zu of %u bytes", got, h->length);
	else if (rc == OKV_ETIMEDOUT)
		rc = okvi_fail(err, errlen, rc, "frame body incomplete (%zu of %u bytes) after %d ms", got, h->length,
			       timeout_ms);
	else if (okvi_is_errno(rc))
		rc = okvi_fail(err, errlen, rc, "receiving frame body: %s", okv_strerror(rc));
	if (rc != 0) {
		free(b);
		okvi_close_fds(fds, kept);
		return rc;
	}
	*body = b;
	if (nfds)
		*nfds = kept;
	return 0;
}

int okvi_frame_recv(int sock, uint64_t epoch, int timeout_ms, struct okv_frame_header *h, uint8_t **body, char *err,
		    size_t errlen)
{
	return okvi_frame_recv_fds(sock, epoch, timeout_ms, h, body, NULL, 0, NULL, err, errlen);
}

/* One request/reply round trip, nfds fds riding with the request. On success *reply is the unpacked reply
 * (free with protobuf_c_message_free_unpacked). An error frame becomes
 * OKV_EAPPLICATION with "field: message" in err. */
static int okvi_frame_call_fds(int sock, uint64_t epoch, uint16_t code, const ProtobufCMessage *req, const int *fds,
			       int nfds, int timeout_ms, const ProtobufCMessageDescriptor *reply_desc,
			       ProtobufCMessage **reply, int *rfds, int max_rfds, int *nrfds, char *err, size_t errlen);

static int okvi_frame_call(int sock, uint64_t epoch, uint16_t code, const ProtobufCMessage *req, const int *fds,
			   int nfds, int timeout_ms, const ProtobufCMessageDescriptor *reply_desc,
			   ProtobufCMessage **reply, char *err, size_t errlen)
{
	return okvi_frame_call_fds(sock, epoch, code, req, fds, nfds, timeout_ms, reply_desc, reply, NULL, 0, NULL, err,
				   errlen);
}

/* okvi_frame_call whose reply may carry up to max_rfds fds into rfds[]
 * (*nrfds of them, owned by the caller on success; closed on any error). */
static int okvi_frame_call_fds(int sock, uint64_t epoch, uint16_t code, const ProtobufCMessage *req, const int *fds,
			       int nfds, int timeout_ms, const ProtobufCMessageDescriptor *reply_desc,
			       ProtobufCMessage **reply, int *rfds, int max_rfds, int *nrfds, char *err, size_t errlen)
{
	int kept = 0;
	size_t n = protobuf_c_message_get_packed_size(req);
	struct okv_frame_header h;
	uint8_t *buf;
	int rc;

	*reply = NULL;
	if (n > OKV_FRAME_MAX_BODY)
		return okvi_fail(err, errlen, -EINVAL, "frame body length %zu exceeds limit %u", n, OKV_FRAME_MAX_BODY);
	buf = malloc(n > 0 ? n : 1);
	if (buf == NULL)
		return okvi_fail(err, errlen, -ENOMEM, "allocating a frame body of %zu bytes", n);
	protobuf_c_message_pack(req, buf);
	rc = okvi_frame_send_until(sock, code, epoch, buf, (uint32_t)n, fds, nfds,
				   timeout_ms < 0 ? -1 : okvi_now_ms() + timeout_ms);
	free(buf);
	if (rc != 0)
		return okvi_fail(err, errlen, rc, "sending frame code %u: %s", (unsigned)code, okv_strerror(rc));
	rc = okvi_frame_recv_fds(sock, epoch, timeout_ms, &h, &buf, rfds, max_rfds, &kept, err, errlen);
	if (rc != 0)
		return rc;
	if (h.code != (uint16_t)(code | OKV_FRAME_REPLY)) {
		okvi_close_fds(rfds, kept); /* only a reply carries fds */
		kept = 0;
	}
	if (h.code == OKV_FRAME_ERROR) {
		Orbitkv__Lifecycle__V1__Error *e = orbitkv__lifecycle__v1__error__unpack(NULL, h.length, buf);
		free(buf);
		if (e == NULL)
			return okvi_fail(err, errlen, OKV_EPROTO, "error frame body (%u bytes) is not a lifecycle Error",
					 h.length);
		rc = okvi_fail(err, errlen, OKV_EAPPLICATION, "%s: %s", e->field, e->message);
		orbitkv__lifecycle__v1__error__free_unpacked(e, NULL);
		return rc;
	}
	if (h.code != (uint16_t)(code | OKV_FRAME_REPLY)) {
		free(buf);
		return okvi_fail(err, errlen, OKV_EPROTO, "reply code 0x%04x differs from expected 0x%04x",
				 (unsigned)h.code, (unsigned)(code | OKV_FRAME_REPLY));
	}
	*reply = protobuf_c_message_unpack(reply_desc, NULL, h.length, buf);
	free(buf);
	if (*reply == NULL) {
		okvi_close_fds(rfds, kept);
		return okvi_fail(err, errlen, OKV_EPROTO, "reply body (%u bytes) is not a valid %s", h.length,
				 reply_desc->name);
	}
	if (nrfds)
		*nrfds = kept;
	return 0;
}

int okvi_register_instance(int sock, uint64_t epoch, uint64_t token, const char *instance_id, int timeout_ms,
			   char *err, size_t errlen)
{
	Orbitkv__Lifecycle__V1__RegisterInstanceRequest req = ORBITKV__LIFECYCLE__V1__REGISTER_INSTANCE_REQUEST__INIT;
	ProtobufCMessage *reply;
	int rc;

	if (instance_id == NULL)
		return okvi_fail(err, errlen, -EINVAL, "instance_id is NULL");
	if (strnlen(instance_id, OKVI_MAX_FRAME_INSTANCE_ID + 1) > OKVI_MAX_FRAME_INSTANCE_ID)
		return okvi_fail(err, errlen, -EINVAL, "instance_id length exceeds limit %u", OKVI_MAX_FRAME_INSTANCE_ID);
	req.client_token = token;
	req.instance_id = (char *)instance_id;
	rc = okvi_frame_call(sock, epoch, OKV_FRAME_REGISTER_INSTANCE, &req.base, NULL, 0, timeout_ms,
		       &orbitkv__lifecycle__v1__register_instance_reply__descriptor, &reply, err, errlen);
	if (rc == 0)
		protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

int okvi_health(int sock, uint64_t epoch, int timeout_ms, struct okv_health *out, char *err, size_t errlen)
{
	Orbitkv__Lifecycle__V1__HealthRequest req = ORBITKV__LIFECYCLE__V1__HEALTH_REQUEST__INIT;
	Orbitkv__Lifecycle__V1__HealthReply *r;
	ProtobufCMessage *reply;
	int rc;

	rc = okvi_frame_call(sock, epoch, OKV_FRAME_HEALTH, &req.base, NULL, 0, timeout_ms,
		       &orbitkv__lifecycle__v1__health_reply__descriptor, &reply, err, errlen);
	if (rc != 0)
		return rc;
	r = (Orbitkv__Lifecycle__V1__HealthReply *)reply;
	if (r->epoch != epoch) {
		rc = okvi_fail(err, errlen, OKV_EPROTO, "health reply epoch %llu differs from session epoch %llu",
			       (unsigned long long)r->epoch, (unsigned long long)epoch);
	} else if (r->service_id.len != OKV_SERVICE_ID_BYTES) {
		rc = okvi_fail(err, errlen, OKV_EPROTO, "health reply service_id length %zu differs from %u",
			       r->service_id.len, OKV_SERVICE_ID_BYTES);
	} else {
		memset(out, 0, sizeof(*out));
		okvi_copy_str(out->status, sizeof(out->status), r->status);
		okvi_copy_str(out->poll_mode, sizeof(out->poll_mode), r->poll_mode);
		okvi_copy_str(out->version, sizeof(out->version), r->version);
		out->epoch = r->epoch;
		memcpy(out->service_id, r->service_id.data, OKV_SERVICE_ID_BYTES);
		out->sessions = r->sessions;
		out->manager_pid = r->manager_pid;
		out->uptime_ns = r->uptime_ns;
		out->requests = r->requests;
		out->blocks = r->blocks;
		out->ram_used_bytes = r->ram_used_bytes;
		out->ram_capacity_bytes = r->ram_capacity_bytes;
		out->leases = r->leases;
		out->pins = r->pins;
		out->reserved_bytes = r->reserved_bytes;
		out->operations = r->operations;
		out->evictions = r->evictions;
		out->tickets = r->tickets;
		out->lookups = r->lookups;
		out->distinct_lookups = r->distinct_lookups;
	}
	protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

int okvi_register_buffer(int sock, uint64_t epoch, uint64_t token, const struct okv_buffer *b, int timeout_ms,
			 uint32_t *first_id, char *err, size_t errlen)
{
	Orbitkv__Lifecycle__V1__RegisterBuffersRequest req = ORBITKV__LIFECYCLE__V1__REGISTER_BUFFERS_REQUEST__INIT;
	Orbitkv__Lifecycle__V1__BufferRegion region = ORBITKV__LIFECYCLE__V1__BUFFER_REGION__INIT;
	Orbitkv__Lifecycle__V1__BufferRegion *regions[1] = { &region };
	Orbitkv__Lifecycle__V1__RegisterBuffersReply *r;
	ProtobufCMessage *reply;
	int rc;

	region.fd_index = 0;
	region.offset = 0;
	region.bytes = b->bytes;
	region.layers = b->layers;
	region.page_bytes = b->page_bytes;
	region.page_count = b->page_count;
	req.client_token = token;
	req.n_regions = 1;
	req.regions = regions;
	rc = okvi_frame_call(sock, epoch, OKV_FRAME_REGISTER_BUFFERS, &req.base, &b->fd, 1, timeout_ms,
			     &orbitkv__lifecycle__v1__register_buffers_reply__descriptor, &reply, err, errlen);
	if (rc != 0)
		return rc;
	r = (Orbitkv__Lifecycle__V1__RegisterBuffersReply *)reply;
	if (r->regions != 1)
		rc = okvi_fail(err, errlen, OKV_EPROTO, "register buffers reply counts %u regions; 1 was sent",
			       r->regions);
	else if (r->total_bytes != b->bytes)
		rc = okvi_fail(err, errlen, OKV_EPROTO, "register buffers reply total_bytes %llu differs from %llu sent",
			       (unsigned long long)r->total_bytes, (unsigned long long)b->bytes);
	else
		*first_id = r->first_buffer_id;
	protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

int okvi_register_cuda_buffer(int sock, uint64_t epoch, uint64_t token, const struct okv_cuda_region *cr,
			      int timeout_ms, uint32_t *first_id, char *err, size_t errlen)
{
	Orbitkv__Lifecycle__V1__RegisterBuffersRequest req = ORBITKV__LIFECYCLE__V1__REGISTER_BUFFERS_REQUEST__INIT;
	Orbitkv__Lifecycle__V1__BufferRegion region = ORBITKV__LIFECYCLE__V1__BUFFER_REGION__INIT;
	Orbitkv__Lifecycle__V1__BufferRegion *regions[1] = { &region };
	Orbitkv__Lifecycle__V1__RegisterBuffersReply *r;
	ProtobufCMessage *reply;
	int fd = cr->vmm_fd, nfd = 0;
	int rc;

	region.offset = cr->offset;
	region.bytes = cr->bytes;
	region.layers = cr->layers;
	region.page_bytes = cr->page_bytes;
	region.page_count = cr->page_count;
	region.device_uuid.data = (uint8_t *)cr->device_uuid;
	region.device_uuid.len = sizeof(cr->device_uuid);
	if (cr->handle_kind == OKV_CUDA_HANDLE_IPC) {
		region.handle_kind = ORBITKV__LIFECYCLE__V1__BUFFER_HANDLE_KIND__BUFFER_HANDLE_CUDA_IPC;
		region.cuda_ipc_handle.data = (uint8_t *)cr->ipc_handle;
		region.cuda_ipc_handle.len = sizeof(cr->ipc_handle);
	} else {
		region.handle_kind = ORBITKV__LIFECYCLE__V1__BUFFER_HANDLE_KIND__BUFFER_HANDLE_CUDA_VMM_FD;
		region.fd_index = 0;
		region.alloc_bytes = cr->alloc_bytes;
		nfd = 1;
	}
	req.client_token = token;
	req.n_regions = 1;
	req.regions = regions;
	rc = okvi_frame_call(sock, epoch, OKV_FRAME_REGISTER_BUFFERS, &req.base, nfd ? &fd : NULL, nfd, timeout_ms,
			     &orbitkv__lifecycle__v1__register_buffers_reply__descriptor, &reply, err, errlen);
	if (rc != 0)
		return rc;
	r = (Orbitkv__Lifecycle__V1__RegisterBuffersReply *)reply;
	if (r->regions != 1 || r->total_bytes != cr->bytes)
		rc = okvi_fail(err, errlen, OKV_EPROTO, "register buffers reply counts %u regions of %llu bytes; 1 of %llu was sent",
			       r->regions, (unsigned long long)r->total_bytes, (unsigned long long)cr->bytes);
	else
		*first_id = r->first_buffer_id;
	protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

int okvi_unregister(int sock, uint64_t epoch, uint64_t token, int timeout_ms)
{
	Orbitkv__Lifecycle__V1__UnregisterRequest req = ORBITKV__LIFECYCLE__V1__UNREGISTER_REQUEST__INIT;
	ProtobufCMessage *reply;
	int rc;

	req.client_token = token;
	rc = okvi_frame_call(sock, epoch, OKV_FRAME_UNREGISTER, &req.base, NULL, 0, timeout_ms,
		       &orbitkv__lifecycle__v1__unregister_reply__descriptor, &reply, NULL, 0);
	if (rc == 0)
		protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

int okvi_map_discovery(int sock, uint64_t epoch, uint64_t token, const struct okv_namespace *ns, int timeout_ms,
		       int *fd, uint64_t *bytes, uint64_t *buckets, char *err, size_t errlen)
{
	Orbitkv__Lifecycle__V1__MapDiscoveryRequest req = ORBITKV__LIFECYCLE__V1__MAP_DISCOVERY_REQUEST__INIT;
	Orbitkv__Lifecycle__V1__MapDiscoveryReply *r;
	ProtobufCMessage *reply;
	int rfds[2];
	int n = 0;
	int rc;

	*fd = -1;
	req.client_token = token;
	req.namespace_.data = (uint8_t *)ns->bytes;
	req.namespace_.len = sizeof(ns->bytes);
	rc = okvi_frame_call_fds(sock, epoch, OKV_FRAME_MAP_DISCOVERY, &req.base, NULL, 0, timeout_ms,
				 &orbitkv__lifecycle__v1__map_discovery_reply__descriptor, &reply, rfds, 2, &n, err,
				 errlen);
	if (rc != 0)
		return rc;
	r = (Orbitkv__Lifecycle__V1__MapDiscoveryReply *)reply;
	if (n != 1) {
		okvi_close_fds(rfds, n);
		rc = okvi_fail(err, errlen, OKV_EPROTO, "map discovery reply carried %d fds; want 1", n);
	} else {
		*fd = rfds[0];
		*bytes = r->bytes;
		*buckets = r->buckets;
	}
	protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}
