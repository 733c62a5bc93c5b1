#include <errno.h>
#include <stdlib.h>

#include "core/keytab.h"

/* Deleted slots keep a tombstone so probe chains stay intact. */
#define TOMB ((void *)&tomb_marker)
static char tomb_marker;

static size_t slot(const struct rma__keytab *t, uint64_t key)
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
	t->keys = calloc(t->cap, sizeof *t->keys);
	t->vals = calloc(t->cap, sizeof *t->vals);
	if (!t->keys || !t->vals) {
		rma__keytab_fini(t);
		return -ENOMEM;
	}
	return 0;
}

void rma__keytab_fini(struct rma__keytab *t)
{
	free(t->keys);
	free(t->vals);
	t->keys = NULL;
	t->vals = NULL;
	t->cap = t->n = t->tomb = 0;
}

static int grow(struct rma__keytab *t)
{
	struct rma__keytab nt = *t;
	nt.cap = t->n * 4 > t->cap ? t->cap * 2 : t->cap; /* else just rehash */
	nt.n = nt.tomb = 0;
	nt.keys = calloc(nt.cap, sizeof *nt.keys);
	nt.vals = calloc(nt.cap, sizeof *nt.vals);
	if (!nt.keys || !nt.vals) {
		free(nt.keys);
		free(nt.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->cap; i++)
		if (t->keys[i] && t->vals[i] != TOMB)
			rma__keytab_put(&nt, t->keys[i], t->vals[i]);
	free(t->keys);
	free(t->vals);
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
	for (size_t i = slot(t, key);; i = (i + 1) & (t->cap - 1)) {
		if (t->keys[i] == 0 || t->vals[i] == TOMB) {
			if (t->vals[i] == TOMB)
				t->tomb--;
			t->keys[i] = key;
			t->vals[i] = val;
			t->n++;
			return 0;
		}
	}
}

static size_t find(const struct rma__keytab *t, uint64_t key)
{
	if (key == 0 || t->cap == 0)
		return (size_t)-1;
	for (size_t i = slot(t, key);; i = (i + 1) & (t->cap - 1)) {
		if (t->keys[i] == 0)
			return (size_t)-1;
		if (t->keys[i] == key && t->vals[i] != TOMB)
			return i;
	}
}

void *rma__keytab_get(const struct rma__keytab *t, uint64_t key)
{
	size_t i = find(t, key);
	return i == (size_t)-1 ? NULL : t->vals[i];
}

void *rma__keytab_del(struct rma__keytab *t, uint64_t key)
{
	size_t i = find(t, key);
	if (i == (size_t)-1)
		return NULL;
	void *v = t->vals[i];
	t->vals[i] = TOMB;
	t->n--;
	t->tomb++;
	return v;
}
