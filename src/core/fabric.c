/*
 * fabric.c - plain fabric peers: programs that run no rma engine, only
 * libfabric, and hand out the triple (fabric address, key, remote address
 * of the window).  rma_remote_from_fabric makes a remote from one, as if
 * it had been advertised: one entry, whose blob the transport writes
 * (fabric_pack), under an engine id derived from the address, so that
 * every window at one address shares one peer.  rma_remote_to_fabric is
 * the reverse, for a plain initiator of an rma owner.
 */
#include <errno.h>
#include <string.h>

#include "core/core.h"

#define HDR 32

/* Fixed: the identity must be the same in every process and run, so that
 * it names the address and nothing else. */
static const uint8_t plain_salt[16] = "rma plain fabric";

static uint64_t plain_id(const struct rma__transport_ops *ops, const void *addr,
			 size_t addrlen, uint64_t tweak)
{
	uint8_t b[8 + 1 + 255];
	size_t n = 0;
	rma__put_le64(b, tweak);
	n += 8;
	b[n++] = ops->wire_id;
	memcpy(b + n, addr, addrlen);
	n += addrlen;
	uint64_t id = rma__siphash(plain_salt, b, n);
	return id ? id : 1; /* advertisements hold no zero */
}

RMA_EXPORT int rma_remote_from_fabric(const char *spec, const void *addr,
				      size_t addrlen, uint64_t rkey,
				      uint64_t remote_addr, uint64_t len,
				      rma_remote **out)
{
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	struct rma__topts o;
	rma_remote *r;
	int rc;

	if (!spec || !addr || !addrlen || !out)
		return -EINVAL;
	if (addrlen > 255)
		return -ENAMETOOLONG;
	rc = rma__tspec_parse(spec, strlen(spec), &o);
	if (rc)
		return rc;
	/* One entry: wire id | instance | u16 length | blob. */
	size_t o_ent = HDR + 2, o_blob = o_ent + 4;
	rc = o.ops->fabric_pack(&o, addr, addrlen, rkey, remote_addr, b + o_blob,
				sizeof b - o_blob - 4);
	if (rc < 0)
		return rc;
	size_t end = o_blob + (size_t)rc;
	uint64_t id = plain_id(o.ops, addr, addrlen, 0);
	rma__put_le32(b, RMA__ADVERT_MAGIC);
	b[4] = RMA__ADVERT_VERSION;
	b[5] = RMA_ACCESS_REMOTE_RW; /* the target's fabric checks access */
	b[6] = 1;
	b[7] = 0;
	rma__put_le64(b + 8, id);
	/* The core key is unused (the blob carries the fabric's) but never 0. */
	rma__put_le64(b + 16, plain_id(o.ops, addr, addrlen, rkey ^ remote_addr));
	rma__put_le64(b + 24, len ? len : UINT64_MAX);
	rma__put_le16(b + HDR, 0);
	b[o_ent] = o.ops->wire_id;
	b[o_ent + 1] = 0;
	rma__put_le16(b + o_ent + 2, (uint16_t)rc);
	rma__put_le32(b + end, rma_crc32c(0, b, end));
	rc = rma_remote_decode(b, end + 4, &r);
	if (rc)
		return rc;
	r->plain = true;
	*out = r;
	return 0;
}

RMA_EXPORT int rma_remote_to_fabric(const rma_remote *r, const char *spec,
				    void *addr, size_t cap, uint64_t *rkey,
				    uint64_t *remote_addr)
{
	struct rma__topts o;
	uint64_t k = 0, base = 0;
	int rc;

	if (!r || !spec || (!addr && cap) || !rkey || !remote_addr)
		return -EINVAL;
	rc = rma__tspec_parse(spec, strlen(spec), &o);
	if (rc)
		return rc;
	/* The first of its entries that matches the spec's options. */
	rc = -ENOENT;
	for (unsigned i = 0; i < r->nent; i++) {
		const struct rma__rentry *ent = &r->ent[i];
		if (ent->wire_id != o.ops->wire_id)
			continue;
		rc = o.ops->fabric_unpack(&o, ent->blob, ent->len, addr, cap, &k, &base);
		if (rc == RMA__DECLINE) {
			rc = -ENOENT;
			continue;
		}
		break;
	}
	if (rc < 0)
		return rc;
	*rkey = k;
	*remote_addr = base;
	return rc;
}
