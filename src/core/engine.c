/* engine.c - engine lifetime, transports, shutdown, introspection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

int64_t rma__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t rma__coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const struct rma__engine_params *rma__engine_params(struct rma_engine *e)
{
	return &e->p;
}

/* One instance per spec in the list; with no list, one per compiled
 * transport that is usable here. */
static int start_one(struct rma_engine *e, const struct rma__topts *o,
		     const char *spec, size_t len, bool named)
{
	const struct rma__transport_ops *ops = o->ops;
	const char *why = "";
	struct rma__transport *t;
	int rc;

	if (e->ntr == RMA__MAX_TRANSPORTS) {
		rma__err("more than %d transport instances", RMA__MAX_TRANSPORTS);
		return -E2BIG;
	}
	rc = !named && ops->probe_default ? ops->probe_default(&why)
					  : ops->probe(&why);
	if (rc == 0) {
		rc = ops->init(e, o, &t);
		why = "cannot start";
	}
	if (rc) {
		/* Asked for by name, or the listen address given is its
		 * (start_transports): that is an error; else skip it. */
		if (named && !o->named) {
			rma__err("transport %s: %s, so nothing serves listen "
				 "address %s (%s)", ops->name, why, e->p.listen,
				 rma_strerror(rc));
			return rc;
		}
		if (named) {
			rma__err("transport %.*s: %s (%s)", (int)len, spec, why,
				 rma_strerror(rc));
			return rc;
		}
		rma__info("transport %s skipped: %s (%s)", ops->name, why,
			  rma_strerror(rc));
		return rc;
	}
	t->ops = ops;
	t->engine = e;
	t->index = (int)e->ntr;
	if (!t->level)
		t->level = ops->level;
	snprintf(t->spec, sizeof t->spec, "%.*s", (int)len, spec);
	if (t->poll_ns && (!e->poll_ns || t->poll_ns < e->poll_ns))
		e->poll_ns = t->poll_ns;
	e->tr[e->ntr++] = t;
	return 0;
}

static int start_transports(struct rma_engine *e)
{
	struct rma__topts o;
	const char *list = e->cfg.transports;
	int rc, first = 0;

	if (list) {
		if (!*list)
			return -EINVAL;
		/* Check every spec before starting any. */
		for (int pass = 0; pass < 2; pass++)
			for (const char *p = list; *p;) {
				const char *comma = strchr(p, ',');
				size_t len = comma ? (size_t)(comma - p) : strlen(p);
				if ((rc = rma__tspec_parse(p, len, &o)))
					return rc;
				o.named = true;
				if (pass && (rc = start_one(e, &o, p, len, true)))
					return rc;
				p += len + (comma ? 1 : 0);
			}
		return 0;
	}
	unsigned n;
	const struct rma__transport_ops *const *reg = rma__registry(&n);
	for (unsigned i = 0; i < n; i++) {
		/* A listen address the caller gave is served, or the engine
		 * fails: peers on other hosts would find no listener. */
		bool must = e->p.listen_given && (reg[i]->caps & RMA__CAP_LISTEN);
		memset(&o, 0, sizeof o);
		o.ops = reg[i];
		rc = start_one(e, &o, reg[i]->name, strlen(reg[i]->name), must);
		if (rc == -E2BIG)
			break;
		if (rc && must)
			return rc;
		if (rc && !first)
			first = rc;
	}
	return e->ntr ? 0 : first ? first : -EHOSTUNREACH;
}

static char *dup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void engine_free(struct rma_engine *e)
{
	for (unsigned i = 0; i < e->ntr; i++)
		e->tr[i]->ops->fini(e->tr[i]);
	/* No poller is left: release retired watches now. */
	while (e->grave) {
		struct rma__watch *w = e->grave;
		e->grave = w->gnext;
		if (w->release)
			w->release(w);
	}
	rma__keytab_fini(&e->grants);
	if (e->rc.r)
		rma__remote_unref(e->rc.r);
	free(e->ptab);
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	if (e->cq_fd >= 0)
		close(e->cq_fd);
	if (e->timer_fd >= 0)
		close(e->timer_fd);
	rma__timers_fini(e);
	free(e->ops);
	free(e->cq);
	free(e->transports_str);
	free(e->listen_str);
	free(e->advertise_str);
	free(e->secret_str);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->done_cv);
	pthread_cond_destroy(&e->pt_cv);
	pthread_mutex_destroy(&e->park_mu);
	free(e);
}

/* Timed waits use CLOCK_MONOTONIC, like every deadline in rma. */
static void cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

/* Only the progress thread consumes a wake-up: if a waiter polling the
 * same epoll set took it, the thread would sleep on with a stale timeout. */
static void wake_cb(struct rma__watch *w, uint32_t events)
{
	struct rma_engine *e = container_of(w, struct rma_engine, wake_watch);
	uint64_t v;
	if (!e->has_thread || !pthread_equal(pthread_self(), e->thread))
		return;
	if (read(w->fd, &v, sizeof v) < 0) {
		/* EAGAIN: already drained */
	}
}

RMA_EXPORT int rma_engine_create(const struct rma_config *cfg, rma_engine **out)
{
	struct rma_engine *e;
	int rc;

	if (!out)
		return -EINVAL;
	e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	e->epfd = e->wake_fd = e->cq_fd = e->timer_fd = -1;
	{
		/* Adaptive: held briefly by two or three threads at once; a
		 * short spin beats a futex sleep and wake-up. */
		pthread_mutexattr_t ma;
		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
		pthread_mutex_init(&e->mu, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	cond_init(&e->done_cv);
	cond_init(&e->pt_cv);
	pthread_mutex_init(&e->park_mu, NULL);

	rc = rma__config_resolve(cfg, &e->cfg);
	if (rc)
		goto fail;
	e->p.listen_given = e->cfg.listen != rma__listen_default;
	/* Own the strings: the caller's need not outlive this call. */
	e->transports_str = dup_opt(e->cfg.transports);
	e->listen_str = dup_opt(e->cfg.listen);
	e->advertise_str = dup_opt(e->cfg.advertise);
	e->cfg.advertise = e->advertise_str;
	e->secret_str = dup_opt(e->cfg.secret);
	e->cfg.transports = e->transports_str;
	e->cfg.listen = e->listen_str;
	e->cfg.secret = e->secret_str;
	e->flags = e->cfg.flags;
	e->spin_ns = rma__spin_next((int64_t)e->cfg.spin_us * 1000, 0);

	e->p.listen = e->cfg.listen;
	e->p.advertise = e->cfg.advertise;
	e->p.secret = e->cfg.secret;
	e->p.queue_depth = e->cfg.queue_depth;
	e->p.stripes = e->cfg.stripes;
	e->p.max_msg_size = e->cfg.max_msg_size;
	e->p.manual = (e->flags & RMA_ENGINE_MANUAL_PROGRESS) != 0;
	e->p.engine_id = rma__random_u64();
	rc = -EIO;
	if (!e->p.engine_id)
		goto fail;

	rc = rma__keytab_init(&e->grants, rma__random_u64());
	if (rc)
		goto fail;
	rc = rma__ops_init(e);
	if (rc)
		goto fail;
	e->ptab_cap = 16; /* the peer table; doubles as peers come */
	e->ptab = calloc(e->ptab_cap, sizeof *e->ptab);
	rc = -ENOMEM;
	if (!e->ptab)
		goto fail;
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	rc = -errno;
	if (e->epfd < 0 || e->wake_fd < 0)
		goto fail;
	e->wake_watch.fd = e->wake_fd;
	e->wake_watch.cb = wake_cb;
	rc = rma__watch_add(e, &e->wake_watch, EPOLLIN);
	if (!rc)
		rc = rma__cq_init(e);
	if (!rc)
		rc = rma__progress_init(e);
	if (rc)
		goto fail;

	rc = start_transports(e);
	if (rc)
		goto fail;
	if (!(e->flags & RMA_ENGINE_MANUAL_PROGRESS)) {
		rc = rma__progress_start(e);
		if (rc)
			goto fail;
	}
	*out = e;
	return 0;
fail:
	engine_free(e);
	return rc;
}

/* No live user ops (zombies may remain)? */
static int idle(void *arg)
{
	return ((struct rma_engine *)arg)->live == 0;
}

RMA_EXPORT int rma_engine_shutdown(rma_engine *e, int drain_ms)
{
	uint32_t left;

	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	e->shut = true;
	if (drain_ms != 0)
		rma__wait_until(e, idle, e, drain_ms < 0 ? 0
				: rma__now_ns() + (int64_t)drain_ms * 1000000);
	left = e->live;
	/* Dropping every peer cancels whatever is left, zombies included. */
	while (e->peers)
		rma__peer_destroy(e, e->peers, -ECANCELED);
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);
	/* Cancelling was asked for (0), or the drain ran out of time. */
	return drain_ms == 0 ? (int)RMA_MIN(left, INT32_MAX)
	       : left ? -ETIMEDOUT : 0;
}

RMA_EXPORT void rma_engine_destroy(rma_engine *e)
{
	if (!e)
		return;
	rma_engine_shutdown(e, 0);
	rma__progress_stop(e);
	pthread_mutex_lock(&e->mu);
	rma__region_free_all(e);
	rma__regcache_fini(e);
	pthread_mutex_unlock(&e->mu);
	engine_free(e);
}

RMA_EXPORT int rma_transports(struct rma_transport_info *out, size_t max)
{
	unsigned n;
	const struct rma__transport_ops *const *reg = rma__registry(&n);
	for (unsigned i = 0; i < n && i < max; i++) {
		const char *why = "available";
		out[i].name = reg[i]->name;
		out[i].level = reg[i]->level;
		out[i].available = reg[i]->probe(&why) == 0;
		out[i].detail = why;
		out[i].options = rma__registry_help(i);
	}
	return (int)n;
}

RMA_EXPORT int rma_transport_raw(rma_engine *e, const char *name, void *out,
				 size_t cap)
{
	int rc = -ENOENT;
	if (!e || !name)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	for (unsigned i = 0; i < e->ntr; i++)
		if (!strcmp(e->tr[i]->ops->name, name))
			rc = e->tr[i]->ops->raw(e->tr[i], out, cap);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* Absolute deadline for timeout_ms (0 = the engine's default, < 0 = none);
 * 0 means none. */
int rma__deadline(struct rma_engine *e, int timeout_ms, int64_t *deadline)
{
	if (timeout_ms == 0)
		timeout_ms = e->cfg.timeout_ms;
	*deadline = timeout_ms < 0 ? 0
				   : rma__now_ns() + (int64_t)timeout_ms * 1000000;
	return 0;
}

int64_t rma__when_deadline(struct rma_engine *e, struct rma__when *w)
{
	if (!w->known)
		rma__deadline(e, w->timeout_ms, &w->deadline);
	w->known = true;
	return w->deadline;
}
