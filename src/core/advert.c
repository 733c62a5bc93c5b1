/*
 * advert.c - advertisements: what a peer needs to reach a window of a region.
 *
 * Bytes, little-endian (docs/design.md, "Advertisement format"):
 *   0  u32 magic "RMAa"   4 u8 version (2)   5 u8 access
 *   6  u8 entries         7 u8 0
 *   8  u64 engine id     16 u64 key         24 u64 length
 *   32 u16 core-field bytes, then core fields: u8 tag | u8 len | value
 *   .. entries: u8 transport wire id | u8 instance | u16 blob length | blob
 *   .. u32 crc32c of everything before it
 * Version 1 (still decoded): no core fields, entries without the instance
 * byte, one entry per transport.
 * Text: "rma1" followed by the bytes in base64url.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/base64url.h"

#define HDR 32
#define TEXT_PREFIX "rma1"
/* Core-field tags: unknown ones below CRITICAL are skipped, at or above it
 * refused (a field an old decoder must not ignore). */
#define TAG_CRITICAL 0x80

/* The entries of every instance that carries grant g (all, if NULL). */
static int pack_entries(struct rma_engine *e, const struct rma__grant *g,
			uint8_t *b, size_t o, size_t cap, bool instance_byte,
			unsigned *count)
{
	unsigned per_wire[256] = {0};
	size_t hdr = instance_byte ? 4 : 3;

	*count = 0;
	for (unsigned i = 0; i < e->ntr; i++) {
		struct rma__transport *t = e->tr[i];
		uint8_t inst = (uint8_t)per_wire[t->ops->wire_id]++;
		if (g && !(g->tmask & 1u << i))
			continue;
		if (cap - o < hdr)
			return -ENOSPC;
		int rc = t->ops->ad_pack(t, g, b + o + hdr, cap - o - hdr);
		if (rc < 0)
			return rc;
		b[o] = t->ops->wire_id;
		if (instance_byte)
			b[o + 1] = inst;
		rma__put_le16(b + o + hdr - 2, (uint16_t)rc);
		o += hdr + (size_t)rc;
		(*count)++;
	}
	return (int)o;
}

RMA_EXPORT int rma_advertise(rma_region *r, uint64_t off, uint64_t len,
			     unsigned access, void *buf, size_t cap)
{
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	struct rma__grant *g;
	unsigned count = 0;
	int rc;

	if (!r || (!buf && cap) || (access & ~(unsigned)RMA_ACCESS_REMOTE_RW))
		return -EINVAL;
	if (off > r->len || (len && len > r->len - off) || (!len && off == r->len))
		return -ERANGE;
	if (!len)
		len = r->len - off;
	if (!access)
		access = r->access;
	if (!access || (access & ~r->access))
		return -EACCES;

	struct rma_engine *e = r->e;
	pthread_mutex_lock(&e->mu);
	rc = rma__grant_for(r, off, len, access, &g);
	if (rc >= 0) {
		rma__put_le16(b + HDR, 0); /* no core fields yet */
		rc = pack_entries(e, g, b, HDR + 2, sizeof b - 4, true, &count);
	}
	if (rc >= 0) {
		size_t o = (size_t)rc;
		rma__put_le32(b, RMA__ADVERT_MAGIC);
		b[4] = RMA__ADVERT_VERSION;
		b[5] = (uint8_t)access;
		b[6] = (uint8_t)count;
		b[7] = 0;
		rma__put_le64(b + 8, e->p.engine_id);
		rma__put_le64(b + 16, g->key);
		rma__put_le64(b + 24, len);
		rma__put_le32(b + o, rma_crc32c(0, b, o));
		rc = (int)(o + 4);
	}
	pthread_mutex_unlock(&e->mu);
	if (rc < 0)
		return rc;
	if ((size_t)rc > cap)
		return -ENOSPC; /* nothing written */
	memcpy(buf, b, (size_t)rc);
	return rc;
}

RMA_EXPORT int rma_engine_address(rma_engine *e, void *buf, size_t cap)
{
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	unsigned count;
	int rc;

	if (!e || (!buf && cap))
		return -EINVAL;
	rma__put_le64(b, e->p.engine_id);
	pthread_mutex_lock(&e->mu);
	rc = pack_entries(e, NULL, b, 8, sizeof b, false, &count);
	pthread_mutex_unlock(&e->mu);
	if (rc < 0)
		return rc;
	if ((size_t)rc > cap)
		return -ENOSPC;
	memcpy(buf, b, (size_t)rc);
	return rc;
}

RMA_EXPORT int rma_advertise_text(rma_region *r, uint64_t off, uint64_t len,
				  unsigned access, char *text, size_t cap)
{
	uint8_t bytes[RMA_ADVERTISEMENT_MAX];
	char t[RMA_ADVERTISEMENT_TEXT_MAX];
	int n = rma_advertise(r, off, len, access, bytes, sizeof bytes);
	size_t w;

	if (n < 0)
		return n;
	if (!text && cap)
		return -EINVAL;
	memcpy(t, TEXT_PREFIX, sizeof TEXT_PREFIX - 1);
	w = rma__b64_encode(bytes, (size_t)n, t + sizeof TEXT_PREFIX - 1,
			    sizeof t - (sizeof TEXT_PREFIX - 1));
	if (!w)
		return -ENOSPC;
	w += sizeof TEXT_PREFIX - 1;
	if (w + 1 > cap)
		return -ENOSPC; /* nothing written */
	memcpy(text, t, w + 1);
	return (int)w;
}

/* Core fields of a v2 advertisement: known tags checked, unknown ones
 * skipped unless critical. */
static int parse_core_fields(const uint8_t *f, size_t n, rma_remote *r)
{
	for (size_t o = 0; o < n;) {
		if (n - o < 2 || f[o + 1] > n - o - 2)
			return -EBADMSG;
		uint8_t tag = f[o], len = f[o + 1];
		const uint8_t *v = f + o + 2;
		switch (tag) {
		case 1: /* expiry: wall-clock ns; not used after it */
			if (len != 8 || !rma__le64(v))
				return -EBADMSG;
			r->expires = (int64_t)rma__le64(v);
			break;
		default:
			if (tag >= TAG_CRITICAL)
				return -EBADMSG;
		}
		o += 2 + (size_t)len;
	}
	return 0;
}

RMA_EXPORT int rma_remote_decode(const void *buf, size_t len, rma_remote **out)
{
	const uint8_t *b = buf;
	rma_remote *r;
	size_t o = HDR, end;
	unsigned version, maxent;

	if (!buf || !out)
		return -EINVAL;
	if (len < HDR + 4 || len > RMA_ADVERTISEMENT_MAX)
		return -EBADMSG;
	version = b[4];
	maxent = version == 1 ? RMA__MAX_TRANSPORTS : RMA__MAX_ENTRIES;
	if (rma__le32(b + len - 4) != rma_crc32c(0, b, len - 4) ||
	    rma__le32(b) != RMA__ADVERT_MAGIC || (version != 1 && version != 2) ||
	    !b[5] || (b[5] & ~RMA_ACCESS_REMOTE_RW) || !b[6] ||
	    b[6] > maxent || b[7] || !rma__le64(b + 8) ||
	    !rma__le64(b + 16) || !rma__le64(b + 24))
		return -EBADMSG;

	r = calloc(1, sizeof *r + len);
	if (!r)
		return -ENOMEM;
	memcpy(r->raw, b, len);
	r->rawlen = len;
	r->refs = 1;
	r->access = b[5];
	r->engine_id = rma__le64(b + 8);
	r->key = rma__le64(b + 16);
	r->len = rma__le64(b + 24);
	end = len - 4;
	if (version == 2) {
		if (end - o < 2)
			goto bad;
		size_t n = rma__le16(b + o);
		o += 2;
		if (n > end - o || parse_core_fields(b + o, n, r))
			goto bad;
		o += n;
	}
	size_t hdr = version == 1 ? 3 : 4;
	uint8_t seen[256][32]; /* (wire id, instance) pairs met so far */
	memset(seen, 0, sizeof seen);
	for (unsigned i = 0; i < b[6]; i++) {
		struct rma__rentry *ent = &r->ent[r->nent];
		const struct rma__transport_ops *ops;

		if (end - o < hdr)
			goto bad;
		ent->wire_id = b[o];
		ent->instance = version == 1 ? 0 : b[o + 1];
		ent->len = rma__le16(b + o + hdr - 2);
		o += hdr;
		if (ent->len > end - o)
			goto bad;
		ent->blob = r->raw + o;
		o += ent->len;
		uint8_t *bits = seen[ent->wire_id];
		if (bits[ent->instance / 8] & (1u << (ent->instance % 8)))
			goto bad;
		bits[ent->instance / 8] |= (uint8_t)(1u << (ent->instance % 8));
		/* Transports this build lacks are skipped, not refused: a
		 * newer peer may offer more than we know. */
		ops = rma__transport_by_wire(ent->wire_id);
		if (!ops)
			continue;
		if (ops->ad_parse(ent->blob, ent->len, r->key, &ent->rk))
			goto bad;
		r->nent++;
	}
	if (o != end)
		goto bad;
	*out = r;
	return 0;
bad:
	free(r);
	return -EBADMSG;
}

RMA_EXPORT int rma_remote_parse(const char *text, rma_remote **out)
{
	uint8_t bytes[RMA_ADVERTISEMENT_MAX];
	size_t n;
	int len;

	if (!text || !out)
		return -EINVAL;
	n = strlen(text);
	if (n < sizeof TEXT_PREFIX || strncmp(text, TEXT_PREFIX, sizeof TEXT_PREFIX - 1))
		return -EBADMSG;
	len = rma__b64_decode(text + sizeof TEXT_PREFIX - 1,
			      n - (sizeof TEXT_PREFIX - 1), bytes, sizeof bytes);
	if (len < 0)
		return -EBADMSG;
	return rma_remote_decode(bytes, (size_t)len, out);
}

void rma__remote_ref(rma_remote *r)
{
	__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
}

void rma__remote_unref(rma_remote *r)
{
	if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(r);
}

/* Ops still using it keep it alive: it goes with the last of them. */
RMA_EXPORT void rma_remote_free(rma_remote *r)
{
	if (r)
		rma__remote_unref(r);
}

RMA_EXPORT uint64_t rma_remote_length(const rma_remote *r)
{
	return r ? r->len : 0;
}

RMA_EXPORT unsigned rma_remote_access(const rma_remote *r)
{
	return r ? r->access : 0;
}
