/*
 * stub.c - the ofi transport in a build without libfabric: listed, so
 * `rma info` can say why it is missing, but never started.
 */
#include <errno.h>

#include "transport/transport.h"

static int ofi_probe(const char **why)
{
	*why = "built without libfabric (RMA_OFI=OFF, or pkg-config found no "
	       "libfabric: install libfabric-dev and reconfigure)";
	return -EOPNOTSUPP;
}

static const struct rma__topt_desc ofi_options[] = {
	{"prov", "tcp|sockets|shm|efa|verbs"},
	{"node", "tcp/sockets: the address to bind"},
	{NULL, NULL},
};

const struct rma__transport_ops rma__ofi_ops = {
	.name = "ofi",
	.level = RMA_LEVEL_TCP,
	.wire_id = 3,
	.options = ofi_options,
	.probe = ofi_probe,
};
