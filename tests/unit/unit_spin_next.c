/*
 * How long the progress loop spins after activity (rma__spin_next): the
 * base spin_us, stretched to twice the gap work came at when that gap is
 * just past the base (a peer whose round trips grew past it must not find
 * us asleep each time), never past 10 x base, and the base again for a
 * gap that is idleness.  No spin stays no spin.
 */
#include "check.h"
#include "core/core.h"

int main(void)
{
	const int64_t us = 1000, base = 200 * us;

	/* Work at gaps within the base: the base. */
	CHECK_EQ(rma__spin_next(base, 0), base);
	CHECK_EQ(rma__spin_next(base, 15 * us), base);
	CHECK_EQ(rma__spin_next(base, base), base);
	/* Just past it (a slow mode's 0.6 ms round trips): twice the gap. */
	CHECK_EQ(rma__spin_next(base, 201 * us), 402 * us);
	CHECK_EQ(rma__spin_next(base, 600 * us), 1200 * us);
	/* Stretched at most to 10 x base. */
	CHECK_EQ(rma__spin_next(base, 1500 * us), 2000 * us);
	CHECK_EQ(rma__spin_next(base, 2000 * us), 2000 * us);
	/* A longer gap is idleness: the base. */
	CHECK_EQ(rma__spin_next(base, 2001 * us), base);
	CHECK_EQ(rma__spin_next(base, INT64_MAX / 2), base);
	/* spin_us RMA_NONE (no spinning) or 0: none, whatever the gap. */
	CHECK_EQ(rma__spin_next(0, 600 * us), 0);
	CHECK_EQ(rma__spin_next(-1000, 600 * us), 0);
	printf("ok\n");
	return 0;
}
