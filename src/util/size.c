/* size.c - byte counts with binary units (size.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "util/size.h"

/* Shift for a binary unit letter, or -1 if it is not one. */
static int unit_shift(char c)
{
	switch (tolower((unsigned char)c)) {
	case 'k': return 10;
	case 'm': return 20;
	case 'g': return 30;
	case 't': return 40;
	default: return -1;
	}
}

int rma__parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end != '\0') {
		if ((shift = unit_shift(*end)) < 0)
			return -EINVAL;
		end++;
		if (*end == 'i' || *end == 'I') {
			end++;
			if (*end == 'B' || *end == 'b')
				end++;
		}
		if (*end != '\0')
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}
