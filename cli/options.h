/* Option parsing shared by main() and the commands: getopt_long with one set of conventions and
 * one wording for mistakes. "--name VALUE" and "--name=VALUE", "-x VALUE" and "-xVALUE"; options
 * and operands in any order (once the options are done the operands are argv[optind..argc-1]);
 * "--" ends the options. main() starts every command's parse afresh. */
#ifndef EVALMESH_OPTIONS_H
#define EVALMESH_OPTIONS_H

#include <getopt.h>
#include <stddef.h>

/* The next option of argv: its short letter or its long option's `val`; -1 once the options are
 * done; '?' after logging why argv is wrong (an unknown option, with the closest known one as a
 * "did you mean", a missing value or a value given to a flag). `command` names the command in
 * the message ("run" gives "evalmesh run: ..."), NULL for the global options. shortopts as for
 * getopt_long ("+" first stops at the first operand). */
int em_cli_option(const char *command, int argc, char **argv, const char *shortopts,
                  const struct option *longopts);

/* " (did you mean 'PREFIXNAME'?)" with the known name closest to word, or "" when none is close. */
void em_cli_hint(char *hint, size_t size, const char *prefix, const char *word,
                 const char *const *known, size_t count);

/* Logs "evalmesh COMMAND: unexpected argument 'ARG' (see evalmesh COMMAND --help)" and returns
 * the bad-input exit status, for operands a command does not take. */
int em_cli_unexpected(const char *command, const char *arg);

#endif
