/*
 * advert.c - advertisements: what a peer needs to reach a window of a region.
 *
 * Bytes, little-endian:
 *   0  u32 magic "RMAa"   4 u8 version   5 u8 access   6 u8 entries  7 u8 0
 *   8  u64 engine id     16 u64 key     24 u64 length
 *   32 entries: u8 transport wire id, u16 blob length, blob
 *   .. u32 crc32c of everything before it
 * Text: "rma1" followed by the bytes in base64url.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/base64url.h"

#define HDR 32
#define TEXT_PREFIX "rma1"

int rma__grant_for(struct rma_region *r, uint64_t off, uint64_t len,
		   unsigned access, struct rma__grant **out);

RMA_EXPORT int rma_advertise(rma_region *r, uint64_t off, uint64_t len,
			     unsigned access, void *buf, size_t cap)
{
	struct rma__grant *g;
	uint8_t *b = buf;
	size_t o = HDR;
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
	if (cap < HDR + 4)
		return -ENOSPC;

	struct rma_engine *e = r->e;
	pthread_mutex_lock(&e->mu);
	rc = rma__grant_for(r, off, len, access, &g);
	for (unsigned i = 0; i < e->ntr && rc >= 0; i++) {
		struct rma__transport *t = e->tr[i];
		if (cap - o < 3 + 4) {
			rc = -ENOSPC;
			break;
		}
		rc = t->ops->ad_pack(t, r, g->key, off, len, b + o + 3,
				     cap - o - 3 - 4);
		if (rc >= 0) {
			b[o] = t->ops->wire_id;
			rma__put_le16(b + o + 1, (uint16_t)rc);
			o += 3 + (size_t)rc;
		}
	}
	if (rc >= 0) {
		rma__put_le32(b, RMA__ADVERT_MAGIC);
		b[4] = RMA__ADVERT_VERSION;
		b[5] = (uint8_t)access;
		b[6] = (uint8_t)e->ntr;
		b[7] = 0;
		rma__put_le64(b + 8, e->p.engine_id);
		rma__put_le64(b + 16, g->key);
		rma__put_le64(b + 24, len);
		rma__put_le32(b + o, rma_crc32c(0, b, o));
		o += 4;
	}
	pthread_mutex_unlock(&e->mu);
	return rc < 0 ? rc : (int)o;
}

RMA_EXPORT int rma_advertise_text(rma_region *r, uint64_t off, uint64_t len,
				  unsigned access, char *text, size_t cap)
{
	uint8_t bytes[RMA_ADVERTISEMENT_MAX];
	int n = rma_advertise(r, off, len, access, bytes, sizeof bytes);
	size_t w;

	if (n < 0)
		return n;
	if (!text || cap < sizeof TEXT_PREFIX)
		return -ENOSPC;
	memcpy(text, TEXT_PREFIX, sizeof TEXT_PREFIX - 1);
	w = rma__b64_encode(bytes, (size_t)n, text + sizeof TEXT_PREFIX - 1,
			    cap - (sizeof TEXT_PREFIX - 1));
	if (!w)
		return -ENOSPC;
	return (int)(w + sizeof TEXT_PREFIX - 1);
}

RMA_EXPORT int rma_remote_decode(const void *buf, size_t len, rma_remote **out)
{
	const uint8_t *b = buf;
	rma_remote *r;
	size_t o = HDR;

	if (!buf || !out)
		return -EINVAL;
	if (len < HDR + 4 || len > RMA_ADVERTISEMENT_MAX)
		return -EBADMSG;
	if (rma__le32(b + len - 4) != rma_crc32c(0, b, len - 4) ||
	    rma__le32(b) != RMA__ADVERT_MAGIC || b[4] != RMA__ADVERT_VERSION ||
	    !b[5] || (b[5] & ~RMA_ACCESS_REMOTE_RW) || !b[6] ||
	    b[6] > RMA__MAX_TRANSPORTS || b[7] || !rma__le64(b + 8) ||
	    !rma__le64(b + 16) || !rma__le64(b + 24))
		return -EBADMSG;

	r = calloc(1, sizeof *r + len);
	if (!r)
		return -ENOMEM;
	memcpy(r->raw, b, len);
	r->rawlen = len;
	r->access = b[5];
	r->engine_id = rma__le64(b + 8);
	r->key = rma__le64(b + 16);
	r->len = rma__le64(b + 24);
	uint8_t seen[32] = {0}; /* wire ids met so far, known or not */
	for (unsigned i = 0; i < b[6]; i++) {
		struct rma__rentry *ent = &r->ent[r->nent];
		const struct rma__transport_ops *ops;

		if (len - 4 - o < 3)
			goto bad;
		ent->wire_id = b[o];
		ent->len = rma__le16(b + o + 1);
		o += 3;
		if (ent->len > len - 4 - o)
			goto bad;
		ent->blob = r->raw + o;
		o += ent->len;
		if (seen[ent->wire_id / 8] & (1u << (ent->wire_id % 8)))
			goto bad;
		seen[ent->wire_id / 8] |= (uint8_t)(1u << (ent->wire_id % 8));
		/* Transports this build lacks are skipped, not refused: a
		 * newer peer may offer more than we know. */
		ops = rma__transport_by_wire(ent->wire_id);
		if (!ops)
			continue;
		if (ops->ad_parse(ent->blob, ent->len, r->key, &ent->rk))
			goto bad;
		r->nent++;
	}
	if (o != len - 4)
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

RMA_EXPORT void rma_remote_free(rma_remote *r)
{
	free(r);
}

RMA_EXPORT uint64_t rma_remote_length(const rma_remote *r)
{
	return r ? r->len : 0;
}

RMA_EXPORT unsigned rma_remote_access(const rma_remote *r)
{
	return r ? r->access : 0;
}
