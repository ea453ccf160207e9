/* The clocks of clock.h, read with clock_gettime. */
#include "util/clock.h"

#include <time.h>

static double read_clock(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double em_clock_seconds(void) {
    return read_clock(CLOCK_MONOTONIC);
}

double em_clock_process_cpu_seconds(void) {
    return read_clock(CLOCK_PROCESS_CPUTIME_ID);
}

double em_clock_thread_cpu_seconds(void) {
    return read_clock(CLOCK_THREAD_CPUTIME_ID);
}
