/* Graceful stop on signals (see stop.h). */
#include "util/stop.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first signal, 0 before. Lock-free atomics are safe in a handler, and the handler may run
 * on any thread: a signal handled on another thread sees the first one's store. */
static atomic_int requested;

static void on_signal(int sig) {
    int none = 0;
    /* recorded before anything is written, so whoever reads the acknowledgement and interrupts
     * again reaches the branch that exits */
    bool first = atomic_compare_exchange_strong(&requested, &none, sig);
    if (sig == SIGINT && !first) {
        static const char msg[] = "evalmesh: second interrupt, exiting now\n";
        ssize_t n = write(2, msg, sizeof msg - 1);
        (void)n;
        _exit(130);
    }
    if (sig == SIGINT) { /* at a terminal: say what happens now, and how to exit at once */
        static const char msg[] = "evalmesh: interrupt: stopping after the current window "
                                  "(interrupt again to exit at once)\n";
        ssize_t n = write(2, msg, sizeof msg - 1);
        (void)n;
    }
}

/* The signal EVALMESH_STOP_SIGNAL names (SIGUSR1 when unset), 0 for "none", -1 when unknown. */
static int stop_signal_env(void) {
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                 {"QUIT", SIGQUIT}, {"ALRM", SIGALRM}, {"none", 0}};
    const char *v = getenv("EVALMESH_STOP_SIGNAL");
    if (!v || !*v) return SIGUSR1;
    if (strncmp(v, "SIG", 3) == 0) v += 3;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(names[i].name, v) == 0) return names[i].sig;
    return -1;
}

em_status em_stop_install(void) {
    int extra = stop_signal_env();
    if (extra < 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "EVALMESH_STOP_SIGNAL '%s' is not USR1, USR2, HUP, QUIT, ALRM or none",
                            getenv("EVALMESH_STOP_SIGNAL"));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (extra) sigaction(extra, &sa, NULL);
    return NULL;
}

int em_stop_signal(void) {
    return atomic_load(&requested);
}
