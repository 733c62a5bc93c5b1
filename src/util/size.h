/* Byte counts with binary units, read alike by the library's transport
 * options and the rma tool (which compiles size.c in: it links only the
 * public API). */
#ifndef RMA_UTIL_SIZE_H
#define RMA_UTIL_SIZE_H

#include <stdint.h>

/* Decimal digits with an optional binary unit K, M, G, T (also Ki/KiB,
 * Mi/MiB, ...), any case: "4096", "64K", "1MiB".  "MB" is refused rather
 * than guessed at (10^6 or 2^20?).  0, or -EINVAL / -ERANGE. */
int rma__parse_size(const char *s, uint64_t *out);

#endif
