/* The ofi advertisement blob: a good one decodes to its key and base; every
 * truncation, extension, bad length byte, unknown flag or version is
 * -EBADMSG.  ad_parse runs on untrusted bytes without an engine. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "transport/transport.h"

/* u8 version | u8 flags | u8 prov len | u8 fabric len | u16 addr len |
 * prov | fabric | addr | u64 key | u64 base */
static size_t good(uint8_t *b)
{
	const char *prov = "tcp;ofi_rxm", *fab = "127.0.0.1/32";
	size_t pl = strlen(prov), fl = strlen(fab), al = 16, o = 6;
	b[0] = 1;
	b[1] = 1;
	b[2] = (uint8_t)pl;
	b[3] = (uint8_t)fl;
	b[4] = (uint8_t)al;
	b[5] = 0;
	memcpy(b + o, prov, pl);
	memcpy(b + o + pl, fab, fl);
	o += pl + fl;
	for (size_t i = 0; i < al; i++)
		b[o++] = (uint8_t)(0xa0 + i);
	for (int i = 0; i < 8; i++)
		b[o++] = (uint8_t)(0x11 * (i + 1)); /* key */
	for (int i = 0; i < 8; i++)
		b[o++] = (uint8_t)(i == 1 ? 0x10 : 0); /* base 0x1000 */
	return o;
}

int main(void)
{
	const struct rma__transport_ops *ofi = rma__transport_by_name("ofi", 3);
	const char *why;
	uint8_t b[256], c[256];
	struct rma__rkey rk;

	if (!ofi || ofi->probe(&why))
		SKIP("ofi not available");
	size_t n = good(b);
	memset(&rk, 0, sizeof rk);
	CHECK_RC(ofi->ad_parse(b, n, 42, &rk), 0);
	CHECK_EQ_U64(rk.key, 0x8877665544332211ULL);
	CHECK_EQ_U64(rk.base, 0x1000);

	/* The engine address (no grant part): the core key stands. */
	memcpy(c, b, n);
	c[1] = 0;
	CHECK_RC(ofi->ad_parse(c, n - 16, 42, &rk), 0);
	CHECK_EQ_U64(rk.key, 42);
	CHECK_EQ_U64(rk.base, 0);

	for (size_t len = 0; len < n; len++)
		CHECK_RC(ofi->ad_parse(b, len, 42, &rk), -EBADMSG);
	CHECK_RC(ofi->ad_parse(b, n + 1, 42, &rk), -EBADMSG);
	for (size_t i = 0; i < 6; i++) {
		for (unsigned d = 1; d < 256; d += 37) {
			memcpy(c, b, n);
			c[i] = (uint8_t)(c[i] + d);
			CHECKF(ofi->ad_parse(c, n, 42, &rk) == -EBADMSG,
			       "header byte %zu + %u accepted", i, d);
		}
	}
	memcpy(c, b, n);
	c[2] = 0; /* no provider name */
	CHECK_RC(ofi->ad_parse(c, n, 42, &rk), -EBADMSG);

	/* What rma's owners write: a control address (flag 2), no fabric key:
	 * the core key stands.  Its length byte must be 7 or 19 and fit. */
	size_t m = n - 16;
	memcpy(c, b, m);
	c[1] = 2;
	const uint8_t ctl[8] = { 7, 4, 0x39, 0x30, 127, 0, 0, 1 };
	memcpy(c + m, ctl, sizeof ctl);
	m += sizeof ctl;
	CHECK_RC(ofi->ad_parse(c, m, 42, &rk), 0);
	CHECK_EQ_U64(rk.key, 42);
	CHECK_EQ_U64(rk.base, 0);
	for (size_t len = 0; len < m; len++)
		CHECK_RC(ofi->ad_parse(c, len, 42, &rk), -EBADMSG);
	CHECK_RC(ofi->ad_parse(c, m + 1, 42, &rk), -EBADMSG);
	for (unsigned bad = 0; bad < 256; bad++) {
		if (bad == 7)
			continue;
		c[m - 8] = (uint8_t)bad;
		CHECKF(ofi->ad_parse(c, m, 42, &rk) == -EBADMSG,
		       "control address length %u accepted", bad);
	}

	/* A control address length byte that runs past the blob's end, the
	 * blob's last byte before an unmapped page: refused without reading
	 * beyond it (a read there faults). */
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *map = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(map != MAP_FAILED);
	CHECK(mprotect(map + pg, (size_t)pg, PROT_NONE) == 0);
	const uint8_t over[] = { 1, 7, 1, 1, 1, 0, 'p', 'f', 0xaa, 19 };
	uint8_t *end = map + pg - sizeof over;
	memcpy(end, over, sizeof over);
	CHECK_RC(ofi->ad_parse(end, sizeof over, 42, &rk), -EBADMSG);
	munmap(map, 2 * (size_t)pg);
	return 0;
}
