/* list.h - intrusive circular doubly linked lists: O(1) insert and remove. */
#ifndef RMA_LIST_H
#define RMA_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct rma__lnode {
	struct rma__lnode *prev, *next;
};

/* A head is a node pointing at itself when empty. */
static inline void rma__list_init(struct rma__lnode *h)
{
	h->prev = h->next = h;
}

static inline bool rma__list_empty(const struct rma__lnode *h)
{
	return h->next == h;
}

/* A node that is on no list has NULL links (zeroed or removed). */
static inline bool rma__list_linked(const struct rma__lnode *n)
{
	return n->next != NULL;
}

static inline void rma__list_add_tail(struct rma__lnode *h, struct rma__lnode *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void rma__list_del(struct rma__lnode *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
}

#define rma__list_first(h) ((h)->next == (h) ? NULL : (h)->next)

#endif
