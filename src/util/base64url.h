#ifndef RMA_BASE64URL_H
#define RMA_BASE64URL_H
#include <stddef.h>
/* base64url without padding.  encode returns the strlen written (with a NUL
 * after it) or 0 if cap is too small; decode returns the byte count, or
 * -EBADMSG on a bad character or length, -ENOSPC if cap is too small. */
size_t rma__b64_encode(const void *in, size_t n, char *out, size_t cap);
int rma__b64_decode(const char *in, size_t n, void *out, size_t cap);
#endif
