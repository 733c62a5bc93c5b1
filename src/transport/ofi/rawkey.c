/*
 * rawkey.c - FI_MR_RAW keys, and the initiator's table of grant keys.
 *
 * A provider that sets FI_MR_RAW (keys longer than 64 bits, or keys that
 * need setting up at the initiator) gives the owner a grant MR's key as
 * bytes (fi_mr_raw_attr, never fi_mr_key); each initiator turns them into
 * the u64 it posts with (fi_mr_map_raw), even bytes that would fit in 64
 * bits, and frees that (fi_mr_unmap_key) when done with it, before the
 * domain closes.  The bytes travel as one record, in a KEYS message
 * (ctl.c) and in an open token (ofi.c, flag 4):
 *
 *   u16 key length (1..OFI_RAW_KEY_MAX) | u64 base | key bytes
 *
 * base is what fi_mr_raw_attr left in its base argument (preset to the
 * window's address: some providers leave it), handed to fi_mr_map_raw as
 * is.  A mapping is held by every chunk posted with it and unmapped once it
 * is dropped (revocation, table eviction, the peer going) and the last of
 * those chunks is reported: the provider may use it until then.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ofi/ofi.h"

int rma__ofi_rawrec_size(const uint8_t *b, size_t len)
{
	if (len < OFI_RAWREC_HDR)
		return -EBADMSG;
	size_t kl = rma__le16(b);
	if (!kl || kl > OFI_RAW_KEY_MAX)
		return -EBADMSG;
	return (int)(OFI_RAWREC_HDR + kl);
}

int rma__ofi_rawrec_get(const uint8_t *b, size_t len, struct ofi_rawkey *out)
{
	int n = rma__ofi_rawrec_size(b, len);
	if (n < 0 || (size_t)n > len)
		return -EBADMSG;
	out->len = rma__le16(b);
	out->base = rma__le64(b + 2);
	out->bytes = b + OFI_RAWREC_HDR;
	return n;
}

int rma__ofi_rawrec_put(uint8_t *b, size_t cap, const struct ofi_rawkey *k)
{
	if (!k->len || k->len > OFI_RAW_KEY_MAX)
		return -EINVAL;
	if (cap < OFI_RAWREC_HDR + k->len)
		return -ENOSPC;
	rma__put_le16(b, (uint16_t)k->len);
	rma__put_le64(b + 2, k->base);
	memcpy(b + OFI_RAWREC_HDR, k->bytes, k->len);
	return (int)(OFI_RAWREC_HDR + k->len);
}

int rma__ofi_raw_read(struct fid_mr *mr, uint64_t addr, uint8_t **bytes,
		      size_t *len, uint64_t *base)
{
	uint8_t buf[OFI_RAW_KEY_MAX];
	size_t n = sizeof buf;
	uint64_t b = addr;
	int rc = fi_mr_raw_attr(mr, &b, buf, &n, 0);

	if (rc == -FI_ETOOSMALL || (!rc && n > sizeof buf)) {
		rma__warn("ofi: a raw key of %zu bytes, more than %d", n,
			  OFI_RAW_KEY_MAX);
		return -EMSGSIZE;
	}
	if (rc) {
		rma__warn("ofi: fi_mr_raw_attr: %s", rma__fi.strerror(-rc));
		return rma__ofi_err(rc);
	}
	if (!n)
		return -EMSGSIZE; /* nothing a peer could map */
	*bytes = malloc(n);
	if (!*bytes)
		return -ENOMEM;
	memcpy(*bytes, buf, n);
	*len = n;
	*base = b;
	return 0;
}

int rma__ofi_map_new(struct fid_domain *d, const struct ofi_rawkey *k,
		     struct ofi_map **out)
{
	uint8_t buf[OFI_RAW_KEY_MAX]; /* fi_mr_map_raw takes a mutable one */
	struct ofi_map *m;
	int rc;

	if (!k->len || k->len > OFI_RAW_KEY_MAX)
		return -EINVAL;
	m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	memcpy(buf, k->bytes, k->len);
	rc = fi_mr_map_raw(d, k->base, buf, k->len, &m->key, 0);
	if (rc) {
		rma__warn("ofi: fi_mr_map_raw of a %zu-byte key: %s", k->len,
			  rma__fi.strerror(-rc));
		free(m);
		return rma__ofi_err(rc);
	}
	*out = m;
	return 0;
}

static void unmap(struct fid_domain *d, struct ofi_map *m)
{
	int rc = fi_mr_unmap_key(d, m->key);
	if (rc)
		rma__warn("ofi: fi_mr_unmap_key: %s", rma__fi.strerror(-rc));
	free(m);
}

void rma__ofi_map_drop(struct fid_domain *d, struct ofi_map *m)
{
	if (!m)
		return;
	m->dropped = true;
	if (!m->refs)
		unmap(d, m);
}

void rma__ofi_map_put(struct fid_domain *d, struct ofi_map *m)
{
	if (--m->refs == 0 && m->dropped)
		unmap(d, m);
}

struct ofi_key *rma__ofi_keys_find(struct ofi_keys *t, uint64_t core)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i].core == core)
			return &t->v[i];
	return NULL;
}

int rma__ofi_keys_add(struct ofi_keys *t, struct fid_domain *d, uint64_t core,
		      struct ofi_key **out)
{
	if (t->n == OFI_KEYS_MAX) {
		/* Full: forget the settled ones; they are asked for again. */
		unsigned j = 0;
		for (unsigned i = 0; i < t->n; i++) {
			if (t->v[i].state == 0)
				t->v[j++] = t->v[i];
			else
				rma__ofi_map_drop(d, t->v[i].map);
		}
		t->n = j;
		if (j == OFI_KEYS_MAX)
			return -EAGAIN;
	}
	if (t->n == t->cap) {
		unsigned cap = t->cap ? 2 * t->cap : 8;
		struct ofi_key *n = realloc(t->v, cap * sizeof *n);
		if (!n)
			return -ENOMEM;
		t->v = n;
		t->cap = cap;
	}
	t->v[t->n] = (struct ofi_key){ .core = core };
	*out = &t->v[t->n++];
	return 0;
}

void rma__ofi_keys_set(struct ofi_key *k, struct fid_domain *d, size_t raw_u64,
		       int status, uint64_t fkey, uint64_t base,
		       const struct ofi_rawkey *raw)
{
	struct ofi_rawkey mine;
	uint8_t le[8];
	int rc;

	/* Whatever it was, the old mapping is no longer what k names. */
	rma__ofi_map_drop(d, k->map);
	k->map = NULL;
	k->fkey = 0;
	k->base = base;
	if (status) {
		k->state = status;
		return;
	}
	if (!raw && raw_u64) {
		/* This domain needs every key mapped, a u64 one too. */
		if (raw_u64 > 8) {
			k->state = -EOPNOTSUPP;
			return;
		}
		rma__put_le64(le, fkey);
		mine = (struct ofi_rawkey){ .base = base, .bytes = le,
					    .len = raw_u64 };
		raw = &mine;
	}
	if (raw) {
		rc = rma__ofi_map_new(d, raw, &k->map);
		if (rc) {
			k->state = rc;
			return;
		}
		fkey = k->map->key;
	}
	k->fkey = fkey;
	k->state = 1;
}

void rma__ofi_keys_clear(struct ofi_keys *t, struct fid_domain *d)
{
	for (unsigned i = 0; i < t->n; i++)
		rma__ofi_map_drop(d, t->v[i].map);
	free(t->v);
	t->v = NULL;
	t->n = t->cap = 0;
}
