/* OpenMP's wait policy, passive by default (see wait_policy.c). */
#ifndef EVALMESH_CLI_WAIT_POLICY_H
#define EVALMESH_CLI_WAIT_POLICY_H

/* Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set: sets OMP_WAIT_POLICY=passive and executes the
 * program again with argv (returns only if that fails). Call first thing in main. */
void em_default_wait_policy(char **argv);

#endif
