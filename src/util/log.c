#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rma.h"
#include "util/util.h"

static int log_level = RMA_LOG_WARN;
static rma_log_cb log_cb;
static void *log_arg;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

RMA_EXPORT void rma_set_log(int level, rma_log_cb cb, void *arg)
{
	pthread_mutex_lock(&log_mu);
	log_level = level;
	log_cb = cb;
	log_arg = arg;
	pthread_mutex_unlock(&log_mu);
}

/* RMA_LOG: the level only; a callback the application set stays. */
void rma__log_set_level(int level)
{
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int rma__log_enabled(int level)
{
	return level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void rma__log(int level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	char msg[512];
	va_list ap;

	if (!rma__log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_mu);
	if (log_cb)
		log_cb(log_arg, level, msg);
	else
		fprintf(stderr, "rma %s: %s\n",
			names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
	pthread_mutex_unlock(&log_mu);
}
