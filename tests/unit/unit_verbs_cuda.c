/*
 * unit_verbs_cuda.c - GPU memory registration through dma-buf, checked by
 * what it asks of the CUDA driver and of libibverbs.  dlopen/dlsym are
 * replaced at link time, so the "driver" is this file: device memory is a
 * made-up address range cut into 2 MiB allocations.  No GPU is needed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "verbs_cmocka.h"

#include "transport/verbs/cuda.h"
#include "util/cuda.h"

#define GBASE 0x7e0000000000ull
#define ALLOC (2ull << 20)
#define GEND (GBASE + 8 * ALLOC)
static void *const CTX = (void *)0x1234;

void rma__log(int level, const char *fmt, ...) {}

static bool driver_loaded, has_handle = true;
static int dlopen_flags, pushes, pops, handle_fail;
static unsigned long long h_base, h_size;
static int h_type, h_fd;

/* Pinned host memory the driver knows: it answers, with type HOST. */
#define HBASE 0x10000000ull

static int f_ptr_attr(void *data, int attr, unsigned long long p)
{
	if (p >= HBASE && p < HBASE + ALLOC && attr == 2) {
		*(unsigned *)data = 1; /* CU_MEMORYTYPE_HOST */
		return 0;
	}
	if (p < GBASE || p >= GEND)
		return 1; /* CUDA_ERROR_INVALID_VALUE: not ours */
	if (attr == 2)
		*(unsigned *)data = 2;
	else if (attr == 1)
		*(void **)data = CTX;
	return 0;
}
static int f_addr_range(unsigned long long *base, size_t *size, unsigned long long p)
{
	if (p < GBASE || p >= GEND)
		return 1;
	*base = GBASE + (p - GBASE) / ALLOC * ALLOC;
	*size = ALLOC;
	return 0;
}
static int f_handle(void *h, unsigned long long p, size_t size, int type,
		    unsigned long long flags)
{
	int fds[2];
	if (handle_fail)
		return 801; /* CUDA_ERROR_NOT_SUPPORTED */
	h_base = p;
	h_size = size;
	h_type = type;
	if (pipe(fds))
		return 1;
	close(fds[1]);
	h_fd = fds[0];
	*(int *)h = fds[0];
	return 0;
}
static int f_push(void *ctx) { assert_ptr_equal(ctx, CTX); pushes++; return 0; }
static int f_pop(void **ctx) { pops++; return 0; }
static int f_unused(void) { return 1; } /* the staging calls: not used here */

void *__wrap_dlopen(const char *name, int flags)
{
	dlopen_flags = flags;
	return driver_loaded ? (void *)&driver_loaded : NULL;
}
void *__wrap_dlsym(void *h, const char *name)
{
	if (!strcmp(name, "cuPointerGetAttribute")) return (void *)f_ptr_attr;
	if (!strcmp(name, "cuMemGetAddressRange_v2")) return (void *)f_addr_range;
	if (!strcmp(name, "cuMemGetHandleForAddressRange"))
		return has_handle ? (void *)f_handle : NULL;
	if (!strcmp(name, "cuCtxPushCurrent_v2")) return (void *)f_push;
	if (!strcmp(name, "cuCtxPopCurrent_v2")) return (void *)f_pop;
	if (!strcmp(name, "cuMemcpyDtoH_v2") || !strcmp(name, "cuMemcpyHtoD_v2") ||
	    !strcmp(name, "cuMemHostAlloc") || !strcmp(name, "cuMemFreeHost"))
		return (void *)f_unused;
	return NULL;
}

static struct ibv_mr fake_mr;
static uint64_t r_off, r_iova;
static size_t r_len;
static int r_fd, r_access, r_calls;
struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len,
					uint64_t iova, int fd, int access)
{
	r_calls++;
	r_off = off;
	r_len = len;
	r_iova = iova;
	r_fd = fd;
	r_access = access;
	/* The fd must be open while the MR is made. */
	assert_true(fcntl(fd, F_GETFD) >= 0);
	return &fake_mr;
}

static int setup(void **state)
{
	rma__cuda_forget();
	driver_loaded = true;
	has_handle = true;
	handle_fail = 0;
	pushes = pops = r_calls = 0;
	dlopen_flags = 0;
	return 0;
}

static void test_no_driver_loaded(void **state)
{
	struct ibv_mr *mr = NULL;
	driver_loaded = false;
	assert_false(rma__verbs_cuda_is_device((void *)(uintptr_t)GBASE));
	/* Only a driver the process already loaded is used. */
	assert_true(dlopen_flags & RTLD_NOLOAD);
	assert_int_equal(rma__verbs_cuda_reg(NULL, (void *)(uintptr_t)GBASE, 64,
					     0, &mr), -ENOSYS);
	assert_int_equal(r_calls, 0);
}

static void test_host_memory_is_not_device(void **state)
{
	char buf[64] = {0};
	assert_false(rma__verbs_cuda_is_device(buf));
	assert_false(rma__verbs_cuda_is_device((void *)(uintptr_t)HBASE));
	assert_true(rma__verbs_cuda_is_device((void *)(uintptr_t)(GBASE + 100)));
}

static void test_dmabuf_registration(void **state)
{
	struct ibv_mr *mr = NULL;
	/* 1 MiB starting 1.5 MiB into allocation 1: crosses into 2. */
	uint64_t p = GBASE + ALLOC + ALLOC / 2 + ALLOC / 4;
	size_t len = ALLOC / 2;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

	assert_int_equal(rma__verbs_cuda_reg(NULL, (void *)(uintptr_t)p, len,
					     access, &mr), 0);
	assert_ptr_equal(mr, &fake_mr);
	/* The dma-buf covers both whole allocations... */
	assert_int_equal(h_base, GBASE + ALLOC);
	assert_int_equal(h_size, 2 * ALLOC);
	assert_int_equal(h_type, 1); /* DMA_BUF_FD */
	/* ...the MR exactly the range, at its virtual address. */
	assert_int_equal(r_fd, h_fd);
	assert_int_equal(r_off, p - (GBASE + ALLOC));
	assert_int_equal(r_len, len);
	assert_int_equal(r_iova, p);
	assert_int_equal(r_access, access);
	/* The fd is closed after (the MR keeps the buffer), the context
	 * pushed and popped. */
	assert_int_equal(fcntl(h_fd, F_GETFD), -1);
	assert_int_equal(pushes, 1);
	assert_int_equal(pops, 1);
}

static void test_no_dmabuf_export(void **state)
{
	struct ibv_mr *mr = NULL;
	handle_fail = 1;
	assert_int_equal(rma__verbs_cuda_reg(NULL, (void *)(uintptr_t)GBASE, 64,
					     0, &mr), -EOPNOTSUPP);
	assert_int_equal(r_calls, 0);
	assert_int_equal(pops, pushes);
	rma__cuda_forget();
	has_handle = false; /* a driver too old to have the call */
	assert_int_equal(rma__verbs_cuda_reg(NULL, (void *)(uintptr_t)GBASE, 64,
					     0, &mr), -EOPNOTSUPP);
}

static void test_not_device_memory(void **state)
{
	struct ibv_mr *mr = NULL;
	char buf[64] = {0};
	assert_int_equal(rma__verbs_cuda_reg(NULL, buf, sizeof buf, 0, &mr), -EFAULT);
	assert_int_equal(r_calls, 0);
	assert_int_equal(pushes, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_no_driver_loaded, setup),
		cmocka_unit_test_setup(test_host_memory_is_not_device, setup),
		cmocka_unit_test_setup(test_dmabuf_registration, setup),
		cmocka_unit_test_setup(test_no_dmabuf_export, setup),
		cmocka_unit_test_setup(test_not_device_memory, setup),
	};
	return rma_verbs_run(tests, sizeof tests / sizeof tests[0], argc, argv);
}
