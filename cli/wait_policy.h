/* How OpenMP's threads wait: a short spin, then sleep, by default (see wait_policy.c). */
#ifndef EVALMESH_CLI_WAIT_POLICY_H
#define EVALMESH_CLI_WAIT_POLICY_H

#define EM_DEFAULT_SPINCOUNT "1000"

/* Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set: sets GOMP_SPINCOUNT to EM_DEFAULT_SPINCOUNT
 * and executes the program again with argv (returns only if that fails). Call first thing in
 * main. */
void em_default_wait_policy(char **argv);

#endif
