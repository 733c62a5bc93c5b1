/*
 * release_fail.c - an LD_PRELOAD shim for the rma tool: rma_region_release
 * does its work and then reports -EIO, a failure the library has no way to
 * give on demand.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>

#include "rma.h"

int rma_region_release(rma_region *r)
{
	int (*real)(rma_region *) =
		(int (*)(rma_region *))dlsym(RTLD_NEXT, "rma_region_release");

	if (real)
		real(r);
	return -EIO;
}
