/* How OpenMP's threads wait at a barrier: a short spin, then sleep, unless the user chose. Threads
 * that spin long at every barrier (libgomp's default when cores are not oversubscribed: 300,000
 * rounds) keep a core busy between the forward's parallel products; when anything else runs on
 * the node, a spinning thread holds the core the thread it waits for needs, and a decoding step
 * passes hundreds of barriers. SmolLM2 Q4_1, 2 threads on a 2-core machine, 128 tokens:
 *     waits                      idle machine   beside one busy process
 *     libgomp's default (spin)   1.35 s         about 30 s
 *     OMP_WAIT_POLICY=passive    1.89 s         3.25 s
 *     GOMP_SPINCOUNT=1000        1.44 s         3.40 s
 * so evalmesh sets GOMP_SPINCOUNT=1000. libgomp reads its variables once, when it is loaded,
 * before main (and glibc sets up the environment after the executable's earliest hook), so
 * evalmesh sets the variable and executes itself again, once, first thing in main.
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment keeps the user's choice. */
#include "cli/wait_policy.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

void em_default_wait_policy(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    /* the executable's own path, so that the process keeps its name (ps, pkill, Slurm) */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || (size_t)n >= sizeof self - 1) return; /* no /proc: libgomp keeps its default */
    self[n] = 0;
    if (setenv("GOMP_SPINCOUNT", EM_DEFAULT_SPINCOUNT, 1) != 0) return;
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT"); /* not executed again: say what libgomp read */
}
