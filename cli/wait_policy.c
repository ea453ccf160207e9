/* OpenMP's wait policy: passive unless the user chose one. Threads that spin at every barrier
 * (libgomp's default when cores are not oversubscribed) keep a core busy between the forward's
 * parallel products; when anything else runs on the node, a spinning thread holds the core the
 * thread it waits for needs. A decoding step passes hundreds of barriers: SmolLM2 Q4_1, 2 threads
 * on a 2-core machine with one other busy process, gave 4 tokens/s spinning against 72 passive
 * (llama.cpp's own pool 21). Passive threads sleep in the kernel instead and cost a wake-up per
 * barrier. libgomp reads OMP_WAIT_POLICY once, when it is loaded, before main (and glibc sets up
 * the environment after the executable's earliest hook), so evalmesh sets the variable and
 * executes itself again, once, first thing in main. OMP_WAIT_POLICY=active (or GOMP_SPINCOUNT) in
 * the environment keeps the user's choice. */
#include "cli/wait_policy.h"

#include <stdlib.h>
#include <unistd.h>

void em_default_wait_policy(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* not executed again (no /proc): libgomp keeps the default it read */
}
