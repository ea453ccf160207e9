/* The CLI seam. Each command is one file in cli/commands/ that fills one em_command named
 * em_command_<file name> (the registry is generated from the file names). main.c handles the
 * global options (--version, --help, --log-level) and dispatches to the command by name. */
#ifndef EVALMESH_COMMAND_H
#define EVALMESH_COMMAND_H

typedef struct em_command {
    const char *name;    /* as typed: "run", "check-env", ... */
    const char *summary; /* one line for `evalmesh --help` */
    const char *usage;   /* full text for `evalmesh NAME --help` */
    /* argv[0] is the command name. Returns the process exit status (see util/error.h). */
    int (*main)(int argc, char **argv);
} em_command;

/* The registry generated from the files cli/commands/<name>.c: NULL-terminated, sorted by file
 * name. */
extern const em_command *const em_commands[];

#endif
