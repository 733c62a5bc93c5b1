/*
 * verbs_cmocka.h - run one named case (argv[1]) or all of them: ctest lists
 * each case of the wrapped-verbs tests as its own test.  A name that
 * matches no case fails, so a renamed case cannot pass by running nothing.
 */
#ifndef RMA_VERBS_CMOCKA_H
#define RMA_VERBS_CMOCKA_H

#include <stdio.h>
#include <string.h>

static inline int rma_verbs_run(const struct CMUnitTest *t, size_t n,
				int argc, char **argv)
{
	if (argc > 1) {
		size_t i;
		for (i = 0; i < n && strcmp(t[i].name, argv[1]); i++)
			;
		if (i == n) {
			fprintf(stderr, "no case named %s\n", argv[1]);
			return 1;
		}
		cmocka_set_test_filter(argv[1]);
	}
	return _cmocka_run_group_tests("verbs", t, n, NULL, NULL) ? 1 : 0;
}

#endif
