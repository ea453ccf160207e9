/* The clocks evalmesh measures durations with, in seconds as doubles: a monotonic clock for
 * elapsed time and deadlines (never steps back when the system time is set), and CPU-time clocks
 * for benchmarks on shared machines. Wall-clock time of day is not here: it is only written into
 * logs, results and heartbeats, where it is read as a date. */
#ifndef EVALMESH_CLOCK_H
#define EVALMESH_CLOCK_H

/* Seconds from CLOCK_MONOTONIC: only differences between two readings mean anything. */
double em_clock_seconds(void);
/* CPU seconds used by all threads of this process. */
double em_clock_process_cpu_seconds(void);
/* CPU seconds used by the calling thread. */
double em_clock_thread_cpu_seconds(void);

#endif
