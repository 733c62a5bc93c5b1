/* ofi's plain-peer blobs (raw.c): fabric_pack makes a blob ad_parse reads
 * back as the triple's key and base; every truncation, extension and bad
 * length is -EBADMSG; an unknown provider word, an empty or oversized
 * address are refused at pack.  fabric_unpack reads the triple out of an
 * owner's blob, of the named provider only, never out of an engine
 * address; and out of a plain blob too.  rma_remote_from_fabric with
 * "ofi:tcp" round-trips through rma_remote_to_fabric.  An ofi:tcp instance
 * routes to plain tcp peers and to any-provider ones, not sockets ones. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "core/core.h"
#include "transport/transport.h"

static const struct rma__transport_ops *ofi;

static int pack(const char *spec, const void *addr, size_t al, uint64_t key,
		uint64_t base, uint8_t *b, size_t cap)
{
	struct rma__topts o;
	CHECK_RC(rma__tspec_parse(spec, strlen(spec), &o), 0);
	return ofi->fabric_pack(&o, addr, al, key, base, b, cap);
}

static int unpack(const char *spec, const void *blob, size_t len, uint8_t *a,
		  size_t cap, uint64_t *key, uint64_t *base)
{
	struct rma__topts o;
	CHECK_RC(rma__tspec_parse(spec, strlen(spec), &o), 0);
	return ofi->fabric_unpack(&o, blob, len, a, cap, key, base);
}

/* An owner's blob (ofi.c): version 1, flags, names, address, key, base. */
static size_t owner_blob(uint8_t *b, const char *prov, bool with_key)
{
	const char *fab = "127.0.0.1/32";
	size_t pl = strlen(prov), fl = strlen(fab), o = 6;
	b[0] = 1;
	b[1] = with_key;
	b[2] = (uint8_t)pl;
	b[3] = (uint8_t)fl;
	b[4] = 16;
	b[5] = 0;
	memcpy(b + o, prov, pl);
	memcpy(b + o + pl, fab, fl);
	o += pl + fl;
	for (int i = 0; i < 16; i++)
		b[o++] = (uint8_t)(0xb0 + i);
	if (with_key) {
		rma__put_le64(b + o, 0xfeedULL);
		rma__put_le64(b + o + 8, 0x7000ULL);
		o += 16;
	}
	return o;
}

int main(void)
{
	const char *why;
	uint8_t addr[16], b[256], c[256], got[64];
	struct rma__rkey rk;
	uint64_t key, base;

	ofi = rma__transport_by_name("ofi", 3);
	if (!ofi || ofi->probe(&why))
		SKIP("ofi not available");
	for (int i = 0; i < 16; i++)
		addr[i] = (uint8_t)(i * 17 + 3);

	int n = pack("ofi:tcp", addr, 16, 0x1234567890abcdefULL, 0x5000, b, sizeof b);
	CHECK(n > 0);
	memset(&rk, 0, sizeof rk);
	CHECK_RC(ofi->ad_parse(b, (size_t)n, 42, &rk), 0);
	CHECK_EQ_U64(rk.key, 0x1234567890abcdefULL); /* the triple's, not the core's */
	CHECK_EQ_U64(rk.base, 0x5000);
	for (int len = 0; len < n; len++)
		CHECKF(ofi->ad_parse(b, (size_t)len, 42, &rk) == -EBADMSG,
		       "truncated to %d accepted", len);
	CHECK_RC(ofi->ad_parse(b, (size_t)n + 1, 42, &rk), -EBADMSG);
	for (int i = 1; i < 4; i++) { /* each length byte, off by one */
		memcpy(c, b, (size_t)n);
		c[i]++;
		CHECKF(ofi->ad_parse(c, (size_t)n, 42, &rk) == -EBADMSG,
		       "length byte %d + 1 accepted", i);
		c[i] -= 2;
		CHECKF(ofi->ad_parse(c, (size_t)n, 42, &rk) == -EBADMSG,
		       "length byte %d - 1 accepted", i);
	}
	memcpy(c, b, (size_t)n);
	c[2] = 0, c[3] = 0; /* no address, the length otherwise right */
	memmove(c + 4 + 3, b + 4 + 3 + 16, 16);
	CHECK_RC(ofi->ad_parse(c, 4 + 3 + 16, 42, &rk), -EBADMSG);

	/* Refused at pack. */
	CHECK_RC(pack("ofi:tpc", addr, 16, 1, 0, b, sizeof b), -EINVAL);
	CHECK_RC(pack("ofi:tcp", addr, 0, 1, 0, b, sizeof b), -EINVAL);
	CHECK_RC(pack("ofi:tcp", b, 129, 1, 0, c, sizeof c), -ENAMETOOLONG);
	CHECK_RC(pack("ofi:tcp", addr, 16, 1, 0, c, 20), -ENOSPC);
	/* No provider word: any instance. */
	n = pack("ofi", addr, 16, 9, 0, b, sizeof b);
	CHECK(n > 0);
	CHECK_RC(unpack("ofi:sockets", b, (size_t)n, got, sizeof got, &key, &base), 16);

	/* The triple out of an owner's blob: its provider only. */
	size_t on = owner_blob(b, "tcp;ofi_rxm", true);
	CHECK_RC(unpack("ofi:tcp", b, on, got, sizeof got, &key, &base), 16);
	CHECK_EQ_U64(key, 0xfeed);
	CHECK_EQ_U64(base, 0x7000);
	CHECK_EQ(got[0], 0xb0);
	CHECK_EQ(got[15], 0xbf);
	CHECK_RC(unpack("ofi", b, on, got, sizeof got, &key, &base), 16);
	CHECK_RC(unpack("ofi:sockets", b, on, got, sizeof got, &key, &base),
		 RMA__DECLINE);
	CHECK_RC(unpack("ofi:tcp", b, on, got, 15, &key, &base), -ENOSPC);
	on = owner_blob(b, "tcpx", true); /* a name that only starts alike */
	CHECK_RC(unpack("ofi:tcp", b, on, got, sizeof got, &key, &base),
		 RMA__DECLINE);
	on = owner_blob(b, "tcp;ofi_rxm", false); /* an engine address */
	CHECK_RC(unpack("ofi:tcp", b, on, got, sizeof got, &key, &base),
		 RMA__DECLINE);
	b[0] = 2; /* not a blob we know */
	CHECK_RC(unpack("ofi:tcp", b, on, got, sizeof got, &key, &base), -EBADMSG);

	/* Through the public calls. */
	rma_remote *r;
	CHECK_RC(rma_remote_from_fabric("ofi:tcp", addr, 16, 77, 0x9000, 4096, &r), 0);
	CHECK_EQ_U64(rma_remote_length(r), 4096);
	CHECK_RC(rma_remote_to_fabric(r, "ofi:tcp", got, sizeof got, &key, &base), 16);
	CHECK(!memcmp(got, addr, 16));
	CHECK_EQ_U64(key, 77);
	CHECK_EQ_U64(base, 0x9000);
	CHECK_RC(rma_remote_to_fabric(r, "ofi:sockets", got, sizeof got, &key, &base),
		 -ENOENT);
	rma_remote_free(r);
	CHECK_RC(rma_remote_from_fabric("ofi:prov=nosuch", addr, 16, 1, 0, 0, &r),
		 -EINVAL);

	/* Routing: an instance reaches a plain peer of its own provider, or
	 * of any when the spec names none; never one of another provider. */
	struct rma_config cfg;
	rma_engine *e;
	struct rma_route_info ri;
	rma_config_init(&cfg);
	cfg.transports = "ofi:tcp";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	const char *specs[] = {"ofi:tcp", "ofi", "ofi:sockets"};
	for (int i = 0; i < 3; i++) {
		CHECK_RC(rma_remote_from_fabric(specs[i], addr, 16, 1, 0, 0, &r), 0);
		int rc = rma_peer_route(e, r, &ri);
		CHECKF(rc == (i < 2 ? 0 : -EHOSTUNREACH), "route to a %s peer: %d",
		       specs[i], rc);
		rma_remote_free(r);
	}
	rma_engine_destroy(e);
	return 0;
}
