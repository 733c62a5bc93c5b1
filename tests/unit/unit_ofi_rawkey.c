/* ofi's FI_MR_RAW keys (rawkey.c) without a provider that needs them: a fake
 * MR answers fi_mr_raw_attr and a fake domain fi_mr_map_raw and
 * fi_mr_unmap_key (all three go through fid.ops->control), counting maps
 * and unmaps and refusing to unmap a key it never gave.
 *
 *   record   the key record round-trips; every truncation, a zero length
 *            and one above OFI_RAW_KEY_MAX are -EBADMSG; put refuses them
 *   read     the owner's read gives the provider's bytes and base (the
 *            window's address where it leaves the base alone); a key
 *            longer than OFI_RAW_KEY_MAX (-FI_ETOOSMALL) is -EMSGSIZE
 *   table    answers are mapped with the bytes and base sent; revocation,
 *            eviction and clearing unmap each key once, a key still held
 *            by a chunk only when that chunk is reported; u64 keys on an
 *            FI_MR_RAW domain are mapped as their little-endian bytes
 *   blob     an open token's raw key (flag 4) decodes to rk.raw; forged
 *            lengths and truncations are -EBADMSG; no plain triple for it */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "core/core.h"
#include "transport/ofi/ofi.h"

static struct {
	size_t key_len;     /* the fake MR's raw key */
	uint64_t set_base;  /* nonzero: reported as the MR's base */
	int fail_map;       /* fi_mr_map_raw answers this */
	int maps, unmaps;
	uint64_t live[2 * OFI_KEYS_MAX];
	unsigned nlive;
	uint64_t next;
	uint8_t got[OFI_RAW_KEY_MAX];
	size_t got_len;
	uint64_t got_base;
} F;

static uint8_t key_byte(size_t i)
{
	return (uint8_t)(i * 7 + 1);
}

static int mr_control(struct fid *fid, int cmd, void *arg)
{
	struct fi_mr_raw_attr *a = arg;
	(void)fid;
	if (cmd != FI_GET_RAW_MR)
		return -FI_ENOSYS;
	if (*a->key_size < F.key_len) {
		*a->key_size = F.key_len;
		return -FI_ETOOSMALL;
	}
	for (size_t i = 0; i < F.key_len; i++)
		a->raw_key[i] = key_byte(i);
	*a->key_size = F.key_len;
	if (F.set_base)
		*a->base_addr = F.set_base;
	return 0;
}

static int dom_control(struct fid *fid, int cmd, void *arg)
{
	(void)fid;
	if (cmd == FI_MAP_RAW_MR) {
		struct fi_mr_map_raw *m = arg;
		if (F.fail_map)
			return F.fail_map;
		CHECK(m->key_size >= 1 && m->key_size <= OFI_RAW_KEY_MAX);
		memcpy(F.got, m->raw_key, m->key_size);
		F.got_len = m->key_size;
		F.got_base = m->base_addr;
		*m->key = 0x5000 + ++F.next;
		CHECK(F.nlive < RMA_ARRAY_SIZE(F.live));
		F.live[F.nlive++] = *m->key;
		F.maps++;
		return 0;
	}
	if (cmd == FI_UNMAP_KEY) {
		uint64_t k = *(uint64_t *)arg;
		for (unsigned i = 0; i < F.nlive; i++)
			if (F.live[i] == k) {
				F.live[i] = F.live[--F.nlive];
				F.unmaps++;
				return 0;
			}
		FAIL("unmap of key %#llx, not mapped (or unmapped twice)",
		     (unsigned long long)k);
	}
	return -FI_ENOSYS;
}

static struct fi_ops mr_ops = { .size = sizeof mr_ops, .control = mr_control };
static struct fi_ops dom_ops = { .size = sizeof dom_ops, .control = dom_control };

static void test_record(void)
{
	uint8_t key[OFI_RAW_KEY_MAX + 1], b[OFI_RAWREC_HDR + OFI_RAW_KEY_MAX + 8];
	struct ofi_rawkey k = { .base = 0x1234, .bytes = key, .len = 37 }, o;
	int n;

	for (size_t i = 0; i < sizeof key; i++)
		key[i] = key_byte(i);
	n = rma__ofi_rawrec_put(b, sizeof b, &k);
	CHECK_EQ(n, OFI_RAWREC_HDR + 37);
	CHECK_EQ(rma__ofi_rawrec_size(b, OFI_RAWREC_HDR), n);
	CHECK_EQ(rma__ofi_rawrec_get(b, (size_t)n, &o), n);
	CHECK_EQ_U64(o.base, 0x1234);
	CHECK_EQ(o.len, 37);
	CHECK(o.bytes == b + OFI_RAWREC_HDR && !memcmp(o.bytes, key, 37));
	/* Trailing bytes are the caller's (the blob checks its own end). */
	CHECK_EQ(rma__ofi_rawrec_get(b, (size_t)n + 3, &o), n);
	for (int len = 0; len < n; len++)
		CHECKF(rma__ofi_rawrec_get(b, (size_t)len, &o) == -EBADMSG,
		       "truncated to %d accepted", len);
	for (int len = 0; len < OFI_RAWREC_HDR; len++)
		CHECK_RC(rma__ofi_rawrec_size(b, (size_t)len), -EBADMSG);

	/* The bound: OFI_RAW_KEY_MAX is taken, one more is not, even with
	 * every byte there; nor is 0 or a huge length. */
	k.len = OFI_RAW_KEY_MAX;
	n = rma__ofi_rawrec_put(b, sizeof b, &k);
	CHECK_EQ(n, OFI_RAWREC_HDR + OFI_RAW_KEY_MAX);
	CHECK_EQ(rma__ofi_rawrec_get(b, sizeof b, &o), n);
	rma__put_le16(b, OFI_RAW_KEY_MAX + 1);
	CHECK_RC(rma__ofi_rawrec_size(b, sizeof b), -EBADMSG);
	CHECK_RC(rma__ofi_rawrec_get(b, sizeof b, &o), -EBADMSG);
	rma__put_le16(b, 0xffff);
	CHECK_RC(rma__ofi_rawrec_get(b, sizeof b, &o), -EBADMSG);
	rma__put_le16(b, 0);
	CHECK_RC(rma__ofi_rawrec_size(b, sizeof b), -EBADMSG);

	k.len = OFI_RAW_KEY_MAX + 1;
	CHECK_RC(rma__ofi_rawrec_put(b, sizeof b, &k), -EINVAL);
	k.len = 0;
	CHECK_RC(rma__ofi_rawrec_put(b, sizeof b, &k), -EINVAL);
	k.len = 20;
	CHECK_RC(rma__ofi_rawrec_put(b, OFI_RAWREC_HDR + 19, &k), -ENOSPC);
}

static void test_read(void)
{
	struct fid_mr mr = { .fid = { .fclass = FI_CLASS_MR, .ops = &mr_ops } };
	uint8_t *bytes = NULL;
	size_t len = 0;
	uint64_t base = 0;

	F.key_len = 40;
	F.set_base = 0;
	CHECK_RC(rma__ofi_raw_read(&mr, 0xabc000, &bytes, &len, &base), 0);
	CHECK_EQ(len, 40);
	CHECK_EQ_U64(base, 0xabc000); /* left alone: the window's address */
	for (size_t i = 0; i < len; i++)
		CHECK_EQ(bytes[i], key_byte(i));
	free(bytes);

	F.set_base = 0x777;
	CHECK_RC(rma__ofi_raw_read(&mr, 0xabc000, &bytes, &len, &base), 0);
	CHECK_EQ_U64(base, 0x777);
	free(bytes);

	F.key_len = OFI_RAW_KEY_MAX;
	CHECK_RC(rma__ofi_raw_read(&mr, 1, &bytes, &len, &base), 0);
	CHECK_EQ(len, OFI_RAW_KEY_MAX);
	free(bytes);
	F.key_len = OFI_RAW_KEY_MAX + 1;
	CHECK_RC(rma__ofi_raw_read(&mr, 1, &bytes, &len, &base), -EMSGSIZE);
	F.key_len = 0;
	CHECK_RC(rma__ofi_raw_read(&mr, 1, &bytes, &len, &base), -EMSGSIZE);
	F.set_base = 0;
}

static struct ofi_key *answered(struct ofi_keys *t, struct fid_domain *d,
				uint64_t core, const struct ofi_rawkey *raw)
{
	struct ofi_key *k;
	CHECK_RC(rma__ofi_keys_add(t, d, core, &k), 0);
	CHECK_EQ(k->state, 0);
	rma__ofi_keys_set(k, d, 0, 0, 0, 0x9000, raw);
	return k;
}

static void test_table(void)
{
	struct fid_domain dom = { .fid = { .fclass = FI_CLASS_DOMAIN,
					   .ops = &dom_ops } };
	struct ofi_keys t = { 0 };
	uint8_t key[OFI_RAW_KEY_MAX];
	struct ofi_rawkey raw = { .base = 0x4242, .bytes = key, .len = 24 };
	struct ofi_key *k;
	struct ofi_map *held;

	for (size_t i = 0; i < sizeof key; i++)
		key[i] = key_byte(i + 3);

	/* An answer is mapped with what the owner sent. */
	k = answered(&t, &dom, 1, &raw);
	CHECK_EQ(F.maps, 1);
	CHECK_EQ(k->state, 1);
	CHECK(k->map);
	CHECK_EQ_U64(k->fkey, k->map->key);
	CHECK_EQ_U64(k->base, 0x9000);
	CHECK_EQ(F.got_len, 24);
	CHECK_EQ_U64(F.got_base, 0x4242);
	CHECK(!memcmp(F.got, key, 24));
	answered(&t, &dom, 2, &raw);
	answered(&t, &dom, 3, &raw);
	CHECK_EQ(F.maps, 3);
	CHECK(rma__ofi_keys_find(&t, 2) && rma__ofi_keys_find(&t, 2)->core == 2);
	CHECK(!rma__ofi_keys_find(&t, 4));

	/* Revocation unmaps at once when no chunk holds the key. */
	k = rma__ofi_keys_find(&t, 1);
	rma__ofi_keys_set(k, &dom, 0, -EKEYREJECTED, 0, 0, NULL);
	CHECK_EQ(k->state, -EKEYREJECTED);
	CHECK(!k->map);
	CHECK_EQ(F.unmaps, 1);

	/* A chunk posted with key 2 holds it past its revocation. */
	k = rma__ofi_keys_find(&t, 2);
	held = k->map;
	held->refs++;
	rma__ofi_keys_set(k, &dom, 0, -EKEYREJECTED, 0, 0, NULL);
	CHECK_EQ(F.unmaps, 1);
	rma__ofi_map_put(&dom, held);
	CHECK_EQ(F.unmaps, 2);

	/* Held but not dropped: reporting the chunk keeps the mapping. */
	k = rma__ofi_keys_find(&t, 3);
	k->map->refs++;
	rma__ofi_map_put(&dom, k->map);
	CHECK_EQ(F.unmaps, 2);
	CHECK_EQ(k->state, 1);

	/* Eviction: a full table forgets settled keys (refused or known),
	 * never those still asked; each mapping goes once, a held one when
	 * its chunk is reported. */
	for (uint64_t c = 10; t.n < OFI_KEYS_MAX - 1; c++)
		answered(&t, &dom, c, &raw);
	CHECK_RC(rma__ofi_keys_add(&t, &dom, 5, &k), 0); /* asked, unanswered */
	CHECK_EQ(t.n, OFI_KEYS_MAX);
	int maps = F.maps;
	held = rma__ofi_keys_find(&t, 3)->map;
	held->refs++;
	CHECK_RC(rma__ofi_keys_add(&t, &dom, 6, &k), 0);
	CHECK_EQ(t.n, 2);
	CHECK(rma__ofi_keys_find(&t, 5) && rma__ofi_keys_find(&t, 6));
	CHECK_EQ(F.unmaps, maps - 1); /* all but the held one */
	rma__ofi_map_put(&dom, held);
	CHECK_EQ(F.unmaps, maps);

	/* Full of unanswered keys: nothing to forget. */
	for (uint64_t c = 100000; t.n < OFI_KEYS_MAX; c++)
		CHECK_RC(rma__ofi_keys_add(&t, &dom, c, &k), 0);
	CHECK_RC(rma__ofi_keys_add(&t, &dom, 7, &k), -EAGAIN);
	rma__ofi_keys_clear(&t, &dom);
	CHECK_EQ(F.maps, F.unmaps);

	/* The peer goes: clearing unmaps every key, a held one later. */
	answered(&t, &dom, 1, &raw);
	answered(&t, &dom, 2, &raw);
	held = rma__ofi_keys_find(&t, 2)->map;
	held->refs++;
	rma__ofi_keys_clear(&t, &dom);
	CHECK_EQ(F.unmaps, F.maps - 1);
	rma__ofi_map_put(&dom, held);
	CHECK_EQ(F.unmaps, F.maps);

	/* A second answer replaces the mapping, unmapping the old one. */
	k = answered(&t, &dom, 1, &raw);
	rma__ofi_keys_set(k, &dom, 0, 0, 0, 0x9000, &raw);
	CHECK_EQ(F.unmaps, F.maps - 1);

	/* u64 keys: used as they are, unless the domain is FI_MR_RAW. */
	maps = F.maps;
	rma__ofi_keys_set(k, &dom, 0, 0, 0x0102030405060708ULL, 0x10, NULL);
	CHECK_EQ(k->state, 1);
	CHECK(!k->map);
	CHECK_EQ_U64(k->fkey, 0x0102030405060708ULL);
	CHECK_EQ(F.maps, maps);
	rma__ofi_keys_set(k, &dom, 8, 0, 0x0102030405060708ULL, 0x10, NULL);
	CHECK_EQ(k->state, 1);
	CHECK(k->map);
	CHECK_EQ_U64(k->fkey, k->map->key);
	CHECK_EQ(F.got_len, 8);
	CHECK_EQ(F.got[0], 0x08);
	CHECK_EQ(F.got[7], 0x01);
	CHECK_EQ_U64(F.got_base, 0x10);
	rma__ofi_keys_set(k, &dom, 4, 0, 0x0102030405060708ULL, 0x10, NULL);
	CHECK_EQ(F.got_len, 4);
	CHECK_EQ(F.got[3], 0x05);
	maps = F.maps;
	rma__ofi_keys_set(k, &dom, 16, 0, 0x0102030405060708ULL, 0x10, NULL);
	CHECK_EQ(k->state, -EOPNOTSUPP); /* 8 bytes cannot be the whole key */
	CHECK(!k->map);
	CHECK_EQ(F.maps, maps);

	/* A failed mapping refuses the key with its error. */
	F.fail_map = -FI_EINVAL;
	rma__ofi_keys_set(k, &dom, 0, 0, 0, 0, &raw);
	CHECK_EQ(k->state, -EINVAL);
	CHECK(!k->map);
	F.fail_map = 0;

	rma__ofi_keys_clear(&t, &dom);
	CHECK_EQ(F.maps, F.unmaps);
	CHECK_EQ(F.nlive, 0);
}

/* An open token's ofi entry: flags 1|4, key FI_KEY_NOTAVAIL, a record. */
static size_t raw_blob(uint8_t *b, size_t keylen, uint8_t flags)
{
	const char *prov = "ucx", *fab = "ucx";
	uint8_t key[OFI_RAW_KEY_MAX];
	size_t o = 6, al = 16;

	for (size_t i = 0; i < keylen; i++)
		key[i] = key_byte(i);
	b[0] = 1;
	b[1] = flags;
	b[2] = 3;
	b[3] = 3;
	rma__put_le16(b + 4, (uint16_t)al);
	memcpy(b + o, prov, 3);
	memcpy(b + o + 3, fab, 3);
	o += 6;
	for (size_t i = 0; i < al; i++)
		b[o++] = (uint8_t)(0xa0 + i);
	if (flags & 2) {
		const uint8_t ctl[8] = { 7, 4, 0x39, 0x30, 127, 0, 0, 1 };
		memcpy(b + o, ctl, sizeof ctl);
		o += sizeof ctl;
	}
	rma__put_le64(b + o, FI_KEY_NOTAVAIL);
	rma__put_le64(b + o + 8, 0x7000);
	o += 16;
	struct ofi_rawkey k = { .base = 0x7000, .bytes = key, .len = keylen };
	o += (size_t)rma__ofi_rawrec_put(b + o, 1024, &k);
	return o;
}

static void test_blob(void)
{
	const struct rma__transport_ops *ofi = rma__transport_by_name("ofi", 3);
	uint8_t b[1024], c[1024], addr[128];
	struct rma__rkey rk;
	struct rma__topts o;
	uint64_t key, base;
	size_t n = raw_blob(b, 33, 1 | 4);

	memset(&rk, 0, sizeof rk);
	CHECK_RC(ofi->ad_parse(b, n, 42, &rk), 0);
	CHECK_EQ_U64(rk.key, 42); /* the table's index: the core key */
	CHECK_EQ_U64(rk.base, 0x7000);
	CHECK(rk.raw == b + n - (OFI_RAWREC_HDR + 33));
	CHECK_EQ(rk.raw_len, OFI_RAWREC_HDR + 33);
	for (size_t len = 0; len < n; len++)
		CHECKF(ofi->ad_parse(b, len, 42, &rk) == -EBADMSG,
		       "truncated to %zu accepted", len);
	CHECK_RC(ofi->ad_parse(b, n + 1, 42, &rk), -EBADMSG);

	/* Forged record lengths: longer than the bytes, above the bound
	 * (bytes there), zero. */
	size_t rec = n - (OFI_RAWREC_HDR + 33);
	memcpy(c, b, n);
	rma__put_le16(c + rec, 34);
	CHECK_RC(ofi->ad_parse(c, n, 42, &rk), -EBADMSG);
	n = raw_blob(b, OFI_RAW_KEY_MAX, 1 | 4);
	CHECK_RC(ofi->ad_parse(b, n, 42, &rk), 0);
	memcpy(c, b, n);
	c[n] = 0;
	rma__put_le16(c + n - (OFI_RAWREC_HDR + OFI_RAW_KEY_MAX), OFI_RAW_KEY_MAX + 1);
	CHECK_RC(ofi->ad_parse(c, n + 1, 42, &rk), -EBADMSG);
	rma__put_le16(c + n - (OFI_RAWREC_HDR + OFI_RAW_KEY_MAX), 0);
	CHECK_RC(ofi->ad_parse(c, n, 42, &rk), -EBADMSG);

	/* Flag 4 needs flag 1: a well-formed record right after the address
	 * (no key and base) is still refused. */
	n = raw_blob(b, 33, 1 | 4);
	rec = n - (OFI_RAWREC_HDR + 33);
	memcpy(c, b, rec - 16);
	memcpy(c + rec - 16, b + rec, n - rec);
	c[1] = 4;
	CHECK_RC(ofi->ad_parse(c, n - 16, 42, &rk), -EBADMSG);
	c[1] = 1 | 4; /* the same bytes as a key and base: too short */
	CHECK_RC(ofi->ad_parse(c, n - 16, 42, &rk), -EBADMSG);

	/* With a control address the key comes over it: rk.raw unused. */
	n = raw_blob(b, 33, 1 | 2 | 4);
	rk.raw = b;
	CHECK_RC(ofi->ad_parse(b, n, 42, &rk), 0);
	CHECK_EQ_U64(rk.key, 42);
	CHECK(!rk.raw);

	/* A plain initiator's triple has a u64 key: none for key bytes. */
	CHECK_RC(rma__tspec_parse("ofi", 3, &o), 0);
	CHECK_RC(ofi->fabric_unpack(&o, b, n, addr, sizeof addr, &key, &base),
		 RMA__DECLINE);
	n = raw_blob(b, 33, 1 | 2 | 4);
	CHECK_RC(rma__ofi_blob_raw(b, n, &(const uint8_t *){ NULL },
				   &(size_t){ 0 }), 0);
}

int main(void)
{
	const char *why;
	if (!rma__transport_by_name("ofi", 3))
		SKIP("ofi not built");
	/* The code under test runs after ofi's probe, which loads libfabric
	 * (installed, in a build with ofi: failing to load it is a failure). */
	CHECKF(rma__fi_load(&why) == 0, "%s", why);
	test_record();
	test_read();
	test_table();
	test_blob();
	return 0;
}
