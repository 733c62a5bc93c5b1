#ifndef RMA_KEYTAB_H
#define RMA_KEYTAB_H
#include <stddef.h>
#include <stdint.h>
/* Open-addressing map from random 64-bit keys to pointers.  Slots are
 * chosen by a salted hash so probe timing says nothing about other keys.
 * Key 0 is reserved (never issued). */
struct rma__keytab {
	/* A key beside its value: a lookup in a table too big for the cache
	 * misses once, not twice. */
	struct rma__kslot {
		uint64_t key;
		void *val;
	} *slot;
	size_t cap; /* power of two */
	size_t n, tomb;
	uint64_t salt;
};
int rma__keytab_init(struct rma__keytab *t, uint64_t salt);
void rma__keytab_fini(struct rma__keytab *t);
int rma__keytab_put(struct rma__keytab *t, uint64_t key, void *val); /* -EEXIST, -ENOMEM */
void *rma__keytab_get(const struct rma__keytab *t, uint64_t key);
void *rma__keytab_del(struct rma__keytab *t, uint64_t key);
/* Start loading key's first slot into the cache (a hint; checks nothing). */
void rma__keytab_prefetch(const struct rma__keytab *t, uint64_t key);
#endif
