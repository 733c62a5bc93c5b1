/*
 * mr.c - registrations.  A region is registered for local use only where
 * the provider asks for descriptors (FI_MR_LOCAL); remote access is given
 * per grant, one MR each with that window's bounds and access, so a
 * read-only or sub-window token's key cannot write or reach beyond it.
 * Closing the MR is the revocation.  Where the provider sets FI_MR_RAW the
 * key is read as bytes (rawkey.c), never with fi_mr_key.
 */
#include <errno.h>
#include <stdlib.h>

#include "transport/ofi/ofi.h"

/* A key of our own where the provider takes requested keys: random, since
 * a duplicate on one domain fails (-FI_ENOKEY) and a counter is guessable. */
static uint64_t new_key(const struct ofi_tr *ot)
{
	uint64_t k = rma__random_u64();
	if (ot->key_size && ot->key_size < 8)
		k &= (1ULL << (8 * ot->key_size)) - 1;
	return k;
}

static int mr_reg(struct ofi_tr *ot, void *addr, size_t len, uint64_t access,
		  struct fid_mr **mr)
{
	int rc = -FI_ENOKEY;
	for (int i = 0; i < 8 && rc == -FI_ENOKEY; i++)
		rc = fi_mr_reg(ot->domain, addr, len, access, 0, new_key(ot), 0,
			       mr, NULL);
	if (rc) {
		rma__warn("ofi: fi_mr_reg of %zu bytes: %s", len, rma__fi.strerror(-rc));
		return rma__ofi_err(rc);
	}
	return 0;
}

int rma__ofi_mem_reg(struct rma__transport *t, struct rma_region *r)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	struct fid_mr *mr;
	if (!(ot->mr_mode & FI_MR_LOCAL))
		return 0; /* descriptors are NULL: nothing to register */
	int rc = mr_reg(ot, rma__region_addr(r), rma__region_len(r),
			FI_READ | FI_WRITE, &mr);
	if (rc)
		return rc;
	*rma__region_slot(r, t) = mr;
	return 0;
}

void rma__ofi_mem_dereg(struct rma__transport *t, struct rma_region *r)
{
	struct fid_mr **mr = (struct fid_mr **)rma__region_slot(r, t);
	if (*mr) {
		fi_close(&(*mr)->fid);
		*mr = NULL;
	}
}

int rma__ofi_grant_add(struct rma__transport *t, struct rma__grant *g)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	unsigned acc = rma__grant_access(g);
	uint64_t access = (acc & RMA_ACCESS_REMOTE_READ ? FI_REMOTE_READ : 0) |
			  (acc & RMA_ACCESS_REMOTE_WRITE ? FI_REMOTE_WRITE : 0);
	char *addr = rma__region_addr(rma__grant_region(g)) + rma__grant_off(g);
	struct ofi_grant *og;
	int rc;

	if (!access)
		return RMA__DECLINE;
	og = calloc(1, sizeof *og);
	if (!og)
		return -ENOMEM;
	rc = mr_reg(ot, addr, rma__grant_len(g), access, &og->mr);
	if (rc) {
		free(og);
		return rc;
	}
	if (ot->mr_mode & FI_MR_RAW) {
		og->key = FI_KEY_NOTAVAIL;
		rc = rma__ofi_raw_read(og->mr, (uint64_t)(uintptr_t)addr, &og->raw,
				       &og->raw_len, &og->raw_base);
	} else {
		og->key = fi_mr_key(og->mr);
		rc = og->key == FI_KEY_NOTAVAIL ? -EMSGSIZE : 0;
	}
	if (rc) { /* a key no peer could be given */
		fi_close(&og->mr->fid);
		free(og);
		return rc == -ENOMEM ? rc : RMA__DECLINE;
	}
	/* Remote addresses: the window's virtual address (FI_MR_VIRT_ADDR) or
	 * offsets from its start. */
	og->base = ot->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)addr : 0;
	og->core = rma__grant_key(g);
	og->next = ot->grants;
	ot->grants = og;
	*rma__grant_slot(g, t) = og;
	return 0;
}

void rma__ofi_grant_remove(struct rma__transport *t, struct rma__grant *g)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	struct ofi_grant **og = (struct ofi_grant **)rma__grant_slot(g, t);
	struct ofi_grant *gr = *og, **pp = &ot->grants;
	if (!gr)
		return;
	while (*pp && *pp != gr)
		pp = &(*pp)->next;
	if (*pp)
		*pp = gr->next;
	/* New requests are refused once the MR is closed; one the provider
	 * is already moving ends only with its peer's serving endpoint. */
	fi_close(&gr->mr->fid);
	rma__ofi_ctl_revoke(ot, gr->core);
	free(gr->raw);
	free(gr);
	*og = NULL;
}
