#include <errno.h>
#include <string.h>

#include "rma.h"
#include "util/util.h"

/* One table: what each errno means when rma returns it. */
static const struct {
	int err;
	const char *msg;
} table[] = {
	{0, "success"},
	{EKEYREJECTED, "remote key refused (forged, or its region was released)"},
	{ERANGE, "offset or length outside the advertised window"},
	{EACCES, "access denied (region access flags, or shared secret refused)"},
	{EBADMSG, "malformed advertisement"},
	{EPROTO, "protocol error: peer sent invalid data"},
	{ETIMEDOUT, "operation timed out"},
	{ECANCELED, "operation cancelled"},
	{ESHUTDOWN, "engine is shut down"},
	{ECONNREFUSED, "connection refused: no rma engine at that address"},
	{ECONNRESET, "connection to peer lost"},
	{ESTALE, "advertisement belongs to a different engine instance (peer restarted?)"},
	{EMSGSIZE, "buffer sizes do not fit (read_into: local smaller than remote; write_from: remote smaller than local)"},
	{EHOSTUNREACH, "peer unreachable: no transport in common"},
	{EAGAIN, "queue full, poll completions and retry"},
	{EINVAL, "invalid argument"},
	{ENOMEM, "out of memory"},
	{EOPNOTSUPP, "operation not supported by this transport"},
	{ENOENT, "no such peer or transport"},
	{ENOSPC, "buffer too small"},
	{ENOTCONN, "peer not connected"},
	{EBUSY, "resource busy"},
	{EADDRINUSE, "listen address already in use"},
	{EADDRNOTAVAIL, "listen address not available: no interface here has it"},
	{EKEYEXPIRED, "advertisement expired"},
	{E2BIG, "too many transport instances"},
};

RMA_EXPORT const char *rma_strerror(int err)
{
	if (err < 0)
		err = -err;
	for (size_t i = 0; i < RMA_ARRAY_SIZE(table); i++)
		if (table[i].err == err)
			return table[i].msg;
	return strerror(err);
}

RMA_EXPORT const char *rma_version(void)
{
	return "0.1.0";
}
