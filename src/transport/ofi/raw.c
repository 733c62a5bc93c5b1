/*
 * raw.c - plain libfabric peers: programs that run no rma engine and hand
 * out (or take) the triple fabric address, key, remote address.
 *
 * A plain peer's blob is made here, never sent: rma_remote_from_fabric
 * asks for it and decodes it at once.  It names the provider by the
 * spec's word ("tcp"), not by the provider and fabric names an rma owner
 * advertises, which a plain program does not hand out:
 *
 *   u8 0x80 | u8 provider word length (0: any) | u16 address length |
 *   provider word | address | u64 key | u64 base
 *
 * The reverse, fabric_unpack, reads the triple out of an owner's blob
 * (not of one whose key is FI_MR_RAW bytes: a triple's key is a u64).
 */
#include <errno.h>
#include <string.h>

#include "transport/ofi/ofi.h"

#define PLAIN_TAG 0x80 /* an owner's blob starts with its version, 1 */
#define PLAIN_HDR 4

bool rma__ofi_plain(const void *blob, size_t len)
{
	return len >= 1 && ((const uint8_t *)blob)[0] == PLAIN_TAG;
}

int rma__ofi_plain_parse(const void *blob, size_t len, const char **prov,
			 size_t *prov_len, const uint8_t **addr, size_t *addr_len,
			 uint64_t *key, uint64_t *base)
{
	const uint8_t *b = blob;
	if (len < PLAIN_HDR || b[0] != PLAIN_TAG)
		return -EBADMSG;
	size_t pl = b[1], al = rma__le16(b + 2);
	if (!al || al > OFI_ADDR_MAX || pl >= OFI_NAME_MAX ||
	    len != PLAIN_HDR + pl + al + 16)
		return -EBADMSG;
	*prov = (const char *)b + PLAIN_HDR;
	*prov_len = pl;
	*addr = b + PLAIN_HDR + pl;
	*addr_len = al;
	*key = rma__le64(*addr + al);
	*base = rma__le64(*addr + al + 8);
	return 0;
}

int rma__ofi_plain_reachable(const struct ofi_tr *ot, const void *blob,
			     size_t len)
{
	const char *prov;
	const uint8_t *addr;
	size_t pl, al;
	uint64_t key, base;
	if (rma__ofi_plain_parse(blob, len, &prov, &pl, &addr, &al, &key, &base))
		return RMA__DECLINE;
	/* The spec's word against this instance's: a tcp;ofi_rxm endpoint
	 * cannot talk to a sockets one. */
	if (pl && (pl != strlen(ot->prov) || memcmp(prov, ot->prov, pl)))
		return RMA__DECLINE;
	return 0;
}

int rma__ofi_fabric_pack(const struct rma__topts *o, const void *addr,
			 size_t addrlen, uint64_t key, uint64_t base, void *buf,
			 size_t cap)
{
	const char *prov = rma__topt(o, "prov");
	size_t pl = prov ? strlen(prov) : 0;
	uint8_t *b = buf;

	if (prov && !rma__ofi_prov_known(prov)) {
		rma__err("ofi: unknown provider '%s' (tcp, sockets, shm, efa, "
			 "verbs)", prov);
		return -EINVAL;
	}
	if (!addrlen)
		return -EINVAL;
	if (addrlen > OFI_ADDR_MAX)
		return -ENAMETOOLONG;
	size_t need = PLAIN_HDR + pl + addrlen + 16;
	if (cap < need)
		return -ENOSPC;
	b[0] = PLAIN_TAG;
	b[1] = (uint8_t)pl;
	rma__put_le16(b + 2, (uint16_t)addrlen);
	if (pl)
		memcpy(b + PLAIN_HDR, prov, pl);
	memcpy(b + PLAIN_HDR + pl, addr, addrlen);
	rma__put_le64(b + PLAIN_HDR + pl + addrlen, key);
	rma__put_le64(b + PLAIN_HDR + pl + addrlen + 8, base);
	return (int)need;
}

/* Does an owner's provider name ("tcp;ofi_rxm") belong to word ("tcp")? */
static bool prov_is(const char *name, size_t n, const char *word)
{
	size_t w = strlen(word);
	return n >= w && !memcmp(name, word, w) && (n == w || name[w] == ';');
}

int rma__ofi_fabric_unpack(const struct rma__topts *o, const void *blob,
			   size_t len, void *addr, size_t cap, uint64_t *key,
			   uint64_t *base)
{
	const char *want = rma__topt(o, "prov"), *prov, *fab;
	const uint8_t *a;
	size_t pl, fl, al;
	bool has_key = true;

	if (rma__ofi_plain(blob, len)) {
		if (rma__ofi_plain_parse(blob, len, &prov, &pl, &a, &al, key, base))
			return -EBADMSG;
		if (want && pl && (pl != strlen(want) || memcmp(prov, want, pl)))
			return RMA__DECLINE;
	} else {
		if (rma__ofi_blob_parse(blob, len, &prov, &pl, &fab, &fl, &a, &al,
					key, base, &has_key))
			return -EBADMSG;
		if (want && !prov_is(prov, pl, want))
			return RMA__DECLINE;
	}
	if (!has_key) /* an engine address: no window to name */
		return RMA__DECLINE;
	const uint8_t *rec;
	size_t rl;
	if (!rma__ofi_plain(blob, len) && rma__ofi_blob_raw(blob, len, &rec, &rl) == 0)
		return RMA__DECLINE; /* FI_MR_RAW key bytes: no u64 key to give */
	if (al > cap)
		return -ENOSPC;
	memcpy(addr, a, al);
	return (int)al;
}
