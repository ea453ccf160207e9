/* Command-line overrides of a loaded recipe: `a.b.c=VALUE` sets a value (parsed as YAML, so
 * `4096` is an integer and `[1, 2]` a list), creating the maps on the way; `~a.b.c` deletes a
 * key. Values from the command line carry the mark file "<command line>". */
#include "runner/recipe/recipe.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define COMMAND_LINE "<command line>"

static bool is_blank(const char *s) {
    for (; *s; s++)
        if (!isspace((unsigned char)*s)) return false;
    return true;
}

/* The override's value as a node: empty means null, anything else is parsed as YAML. */
static em_status parse_value(const char *arg, const char *value, em_node **out) {
    if (is_blank(value)) {
        *out = em_node_new_scalar("", false, (em_mark){em_intern(COMMAND_LINE), 1, 1});
        return NULL;
    }
    em_status err = em_yaml_parse(value, strlen(value), COMMAND_LINE, out);
    return em_error_prefix(err, "override '%s'", arg);
}

/* Splits a dotted path into its keys (at most `max`); false when a key is empty. */
static bool split_path(char *path, char **keys, size_t max, size_t *n) {
    *n = 0;
    for (char *p = path;;) {
        char *dot = strchr(p, '.');
        if (dot) *dot = '\0';
        if (!*p || *n == max) return false;
        keys[(*n)++] = p;
        if (!dot) return true;
        p = dot + 1;
    }
}

/* The path's first `n` keys joined by dots, for messages. */
static char *join_keys(char **keys, size_t n) {
    char *s = em_xstrdup(keys[0]);
    for (size_t i = 1; i < n; i++) {
        char *longer = em_xasprintf("%s.%s", s, keys[i]);
        free(s);
        s = longer;
    }
    return s;
}

static em_status not_a_map(const char *verb, const char *path, char **keys, size_t depth,
                           const em_node *node) {
    char *prefix = join_keys(keys, depth);
    char where[1024];
    em_mark_format(node->mark, where, sizeof where);
    em_status err = em_error_new(EM_EXIT_BAD_INPUT, "cannot %s '%s': '%s' is %s (at %s)", verb,
                                 path, prefix, em_node_type_name(node), where);
    free(prefix);
    return err;
}

/* Sets (value != NULL, which root then owns) or deletes (value == NULL) the key at path. */
static em_status apply(em_node *root, const char *path, em_node *value) {
    const char *verb = value ? "set" : "delete";
    char *copy = em_xstrdup(path);
    char *keys[256];
    size_t n = 0;
    em_status err = NULL;
    if (!split_path(copy, keys, sizeof keys / sizeof *keys, &n)) {
        err = em_error_new(EM_EXIT_BAD_INPUT, "cannot %s '%s': the path has an empty key", verb,
                           path);
        goto done;
    }
    const em_mark created = {em_intern(COMMAND_LINE), 0, 0};
    em_node *map = root;
    for (size_t i = 0; i + 1 < n; i++) {
        em_node *child = em_node_get(map, keys[i]);
        if (!child && !value) {
            err = em_error_new(EM_EXIT_BAD_INPUT, "cannot delete '%s': there is no such key", path);
            goto done;
        }
        if (!child || (value && em_node_is_null(child))) {
            /* the map does not exist yet (or is empty): create it */
            child = em_node_new_map(created);
            const em_map_entry *old = em_node_get_entry(map, keys[i]);
            em_node_map_set(map, keys[i], old ? old->key_mark : created, child);
        } else if (child->kind != EM_NODE_MAP) {
            err = not_a_map(verb, path, keys, i + 1, child);
            goto done;
        }
        map = child;
    }
    if (value) {
        const em_map_entry *old = em_node_get_entry(map, keys[n - 1]);
        em_node_map_set(map, keys[n - 1], old ? old->key_mark : value->mark, value);
        value = NULL;
    } else if (!em_node_map_remove(map, keys[n - 1])) {
        err = em_error_new(EM_EXIT_BAD_INPUT, "cannot delete '%s': there is no such key", path);
    }
done:
    em_node_free(value);
    free(copy);
    return err;
}

em_status em_recipe_apply_override(em_node *root, const char *arg) {
    if (arg[0] == '~') {
        const char *path = arg + 1;
        if (!*path)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "override '%s' has an empty path (use ~a.b to delete a.b)", arg);
        if (strchr(path, '='))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "override '%s': a deletion takes no value (use ~a.b, or a.b=VALUE)",
                                arg);
        return apply(root, path, NULL);
    }
    const char *eq = strchr(arg, '=');
    if (!eq)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "override '%s' has no '=' (use %s=VALUE, or ~%s to delete)", arg, arg,
                            arg);
    if (eq == arg)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "override '%s' has an empty path (use a.b=VALUE to set a.b)", arg);
    em_node *value = NULL;
    em_status err = parse_value(arg, eq + 1, &value);
    if (err) return err;
    char *path = em_xasprintf("%.*s", (int)(eq - arg), arg);
    err = apply(root, path, value);
    free(path);
    return err;
}
