/* The heartbeat hook (see heartbeat.h). */
#include "util/heartbeat.h"

#include <stddef.h>

static em_heartbeat_fn hook;
static void *hook_arg;

void em_heartbeat_set(em_heartbeat_fn fn, void *arg) {
    hook = fn;
    hook_arg = arg;
}

void em_heartbeat(void) {
    if (hook) hook(hook_arg);
}
