/* getopt_long with evalmesh's messages (see options.h). */
#include "cli/options.h"

#include <stdio.h>
#include <string.h>

#include "runner/recipe/schema.h"
#include "util/error.h"
#include "util/log.h"

/* "evalmesh run" or "evalmesh", and where to read more. */
static void command_names(const char *command, char *who, size_t size, char *help,
                          size_t help_size) {
    snprintf(who, size, "evalmesh%s%s", command ? " " : "", command ? command : "");
    snprintf(help, help_size, "%s --help", who);
}

/* The long option spelled `name` (without "--" and "=VALUE"), or NULL. */
static const struct option *find_long(const struct option *longopts, const char *name, size_t len) {
    for (const struct option *o = longopts; o && o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
    return NULL;
}

void em_cli_hint(char *hint, size_t size, const char *prefix, const char *word,
                 const char *const *known, size_t count) {
    const char *close = em_did_you_mean(word, known, count);
    if (close)
        snprintf(hint, size, " (did you mean '%s%s'?)", prefix, close);
    else
        hint[0] = 0;
}

/* An unknown "--name[=VALUE]": the closest long option as a hint. */
static void unknown_long(const char *who, const char *help, const char *text,
                         const struct option *longopts) {
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(text + 2, "="), text + 2);
    const char *names[64];
    size_t count = 0;
    for (const struct option *o = longopts; o && o->name && count < 64; o++)
        names[count++] = o->name;
    char hint[160];
    em_cli_hint(hint, sizeof hint, "--", name, names, count);
    em_log_error("%s: unknown option '--%s'%s (see %s)", who, name, hint, help);
}

int em_cli_option(const char *command, int argc, char **argv, const char *shortopts,
                  const struct option *longopts) {
    /* ':' after an optional '+' makes getopt_long tell a missing value (':') from an unknown
     * option ('?'); opterr = 0 keeps its own messages out. */
    char spec[128];
    int in_order = shortopts[0] == '+';
    snprintf(spec, sizeof spec, "%s:%s", in_order ? "+" : "", shortopts + in_order);
    opterr = 0;
    int c = getopt_long(argc, argv, spec, longopts, NULL);
    if (c != '?' && c != ':') return c;

    char who[64], help[80];
    command_names(command, who, sizeof who, help, sizeof help);
    const char *text = argv[optind - 1 < argc ? optind - 1 : argc - 1];
    int is_long = strncmp(text, "--", 2) == 0;
    if (c == ':') {
        if (is_long)
            em_log_error("%s: option '%s' needs a value (see %s)", who, text, help);
        else
            em_log_error("%s: option '-%c' needs a value (see %s)", who, optopt, help);
    } else if (is_long) {
        size_t len = strcspn(text + 2, "=");
        const struct option *o = find_long(longopts, text + 2, len);
        if (o && text[2 + len] == '=')
            em_log_error("%s: option '--%s' takes no value (see %s)", who, o->name, help);
        else
            unknown_long(who, help, text, longopts);
    } else {
        em_log_error("%s: unknown option '-%c' (see %s)", who, optopt ? optopt : '?', help);
    }
    return '?';
}

int em_cli_unexpected(const char *command, const char *arg) {
    em_log_error("evalmesh %s: unexpected argument '%s' (see evalmesh %s --help)", command, arg,
                 command);
    return EM_EXIT_BAD_INPUT;
}
