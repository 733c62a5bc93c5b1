#include <errno.h>
#include <stdlib.h>

#include "core/keytab.h"

/* Deleted slots keep a tombstone so probe chains stay intact. */
#define TOMB ((void *)&tomb_marker)
static char tomb_marker;

static size_t home(const struct rma__keytab *t, uint64_t key)
{
	uint64_t h = (key ^ t->salt) * 0x9E3779B97F4A7C15ULL;
	h ^= h >> 29;
	return (size_t)h & (t->cap - 1);
}

int rma__keytab_init(struct rma__keytab *t, uint64_t salt)
{
	t->cap = 64;
	t->n = t->tomb = 0;
	t->salt = salt;
	t->slot = calloc(t->cap, sizeof *t->slot);
	if (!t->slot)
		return -ENOMEM;
	return 0;
}

void rma__keytab_fini(struct rma__keytab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = t->n = t->tomb = 0;
}

static int grow(struct rma__keytab *t)
{
	struct rma__keytab nt = *t;
	nt.cap = t->n * 4 > t->cap ? t->cap * 2 : t->cap; /* else just rehash */
	nt.n = nt.tomb = 0;
	nt.slot = calloc(nt.cap, sizeof *nt.slot);
	if (!nt.slot)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slot[i].key && t->slot[i].val != TOMB)
			rma__keytab_put(&nt, t->slot[i].key, t->slot[i].val);
	free(t->slot);
	*t = nt;
	return 0;
}

int rma__keytab_put(struct rma__keytab *t, uint64_t key, void *val)
{
	if (key == 0 || !val)
		return -EINVAL;
	if ((t->n + t->tomb + 1) * 2 > t->cap) {
		int rc = grow(t);
		if (rc)
			return rc;
	}
	if (rma__keytab_get(t, key))
		return -EEXIST;
	for (size_t i = home(t, key);; i = (i + 1) & (t->cap - 1)) {
		struct rma__kslot *sl = &t->slot[i];
		if (sl->key == 0 || sl->val == TOMB) {
			if (sl->val == TOMB)
				t->tomb--;
			sl->key = key;
			sl->val = val;
			t->n++;
			return 0;
		}
	}
}

static size_t find(const struct rma__keytab *t, uint64_t key)
{
	if (key == 0 || t->cap == 0)
		return (size_t)-1;
	for (size_t i = home(t, key);; i = (i + 1) & (t->cap - 1)) {
		if (t->slot[i].key == 0)
			return (size_t)-1;
		if (t->slot[i].key == key && t->slot[i].val != TOMB)
			return i;
	}
}

void *rma__keytab_get(const struct rma__keytab *t, uint64_t key)
{
	size_t i = find(t, key);
	return i == (size_t)-1 ? NULL : t->slot[i].val;
}

void *rma__keytab_del(struct rma__keytab *t, uint64_t key)
{
	size_t i = find(t, key);
	if (i == (size_t)-1)
		return NULL;
	void *v = t->slot[i].val;
	t->slot[i].val = TOMB;
	t->n--;
	t->tomb++;
	return v;
}

void rma__keytab_prefetch(const struct rma__keytab *t, uint64_t key)
{
	if (t->cap)
		__builtin_prefetch(&t->slot[home(t, key)]);
}
