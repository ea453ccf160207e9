/* Loading a recipe with its `include:` files. An included path is relative to the directory of
 * the file that names it; included files may include others. The maps are deep-merged: files
 * listed later win over earlier ones, and the including file's own keys win over all of them.
 * A file that (indirectly) includes itself is an error showing the chain of files. Included files
 * must be regular files (util/regular_file.h), and one recipe may load at most
 * EM_INCLUDE_MAX_FILES included files holding at most EM_INCLUDE_MAX_BYTES together (a file
 * included twice counts twice), so includes that fan out (each file including the next twice)
 * stop with the chain instead of growing exponentially. */
#include "runner/recipe/recipe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/regular_file.h"

#define EM_INCLUDE_MAX_FILES 64
#define EM_INCLUDE_MAX_BYTES ((size_t)4 << 20)

/* What the includes of one recipe have loaded so far. */
typedef struct include_budget {
    int files;
    size_t bytes;
} include_budget;

/* The files being loaded, from the top recipe down to the current one. */
typedef struct include_chain {
    const char *path; /* as shown in messages */
    char *id;         /* the real path, to recognise one file reached by two names */
    const struct include_chain *up;
    include_budget *budget; /* shared by the whole chain */
} include_chain;

static char *file_id(const char *path) {
    char *real = realpath(path, NULL);
    return real ? real : em_xstrdup(path);
}

/* "top.yaml -> a.yaml -> ... -> path" (heap). */
static char *chain_text(const include_chain *chain, const char *path) {
    const include_chain *links[256];
    size_t n = 0;
    for (const include_chain *c = chain; c && n < 256; c = c->up) links[n++] = c;
    char *text = em_xstrdup("");
    for (size_t i = n; i-- > 0;) {
        char *longer = em_xasprintf("%s%s -> ", text, links[i]->path);
        free(text);
        text = longer;
    }
    char *full = em_xasprintf("%s%s", text, path);
    free(text);
    return full;
}

/* Counts one more included file of size bytes; an error naming the chain past the limits. */
static em_status spend(const include_chain *chain, const char *path, off_t size, em_mark at) {
    include_budget *b = chain->budget;
    b->files++;
    b->bytes += (size_t)size;
    if (b->files <= EM_INCLUDE_MAX_FILES && b->bytes <= EM_INCLUDE_MAX_BYTES) return NULL;
    char *text = chain_text(chain, path);
    em_status err =
        em_error_at(EM_EXIT_BAD_INPUT, at,
                    "includes load more than %d files or %zu bytes in all (each inclusion counts, "
                    "so a file included twice counts twice): %s",
                    EM_INCLUDE_MAX_FILES, EM_INCLUDE_MAX_BYTES, text);
    free(text);
    return err;
}

/* Moves every entry of over into base, merging maps key by key; over's values win. Frees over. */
static void deep_merge(em_node *base, em_node *over) {
    for (size_t i = 0; i < over->count; i++) {
        em_map_entry *e = &over->entries[i];
        em_node *old = em_node_get(base, e->key);
        if (old && old->kind == EM_NODE_MAP && e->value->kind == EM_NODE_MAP)
            deep_merge(old, e->value);
        else
            em_node_map_set(base, e->key, e->key_mark, e->value);
        e->value = NULL;
    }
    em_node_free(over);
}

static em_status load_recipe_file(const char *path, const include_chain *chain, em_node **out);

/* Loads the file one `include:` entry names and merges it into *merged (it wins over what is
 * there already). */
static em_status include_one(const em_node *entry, const include_chain *chain, em_node **merged) {
    if (entry->kind != EM_NODE_SCALAR || em_node_scalar_type(entry) != EM_SCALAR_STRING) {
        char *found = em_node_describe(entry);
        em_status err = em_error_at(EM_EXIT_BAD_INPUT, entry->mark,
                                    "include needs a file name, found %s", found);
        free(found);
        return err;
    }
    char *path = em_node_path(entry);
    char *id = file_id(path);
    em_status err = NULL;
    for (const include_chain *c = chain; c && !err; c = c->up)
        if (strcmp(c->id, id) == 0) {
            char *text = chain_text(chain, path);
            err = em_error_at(EM_EXIT_BAD_INPUT, entry->mark, "include cycle: %s", text);
            free(text);
        }
    struct stat st;
    if (!err && (stat(path, &st) != 0 || access(path, R_OK) != 0))
        err = em_error_at(EM_EXIT_BAD_INPUT, entry->mark, "cannot read included file '%s': %s",
                          path, strerror(errno));
    if (!err && !S_ISREG(st.st_mode))
        err = em_error_at(EM_EXIT_BAD_INPUT, entry->mark,
                          "cannot read included file '%s': it is %s, not a regular file", path,
                          em_file_kind(st.st_mode));
    if (!err) err = spend(chain, path, st.st_size, entry->mark);
    em_node *sub = NULL;
    if (!err) {
        include_chain link = {path, id, chain, chain->budget};
        err = load_recipe_file(path, &link, &sub);
    }
    free(path);
    free(id);
    if (err) return err;
    if (*merged)
        deep_merge(*merged, sub);
    else
        *merged = sub;
    return NULL;
}

/* Loads chain->path (path is the same string) with its includes merged in. */
static em_status load_recipe_file(const char *path, const include_chain *chain, em_node **out) {
    em_node *root = NULL;
    em_status err = em_yaml_load_file(path, &root);
    if (err) return err;
    if (root->kind != EM_NODE_MAP) {
        char *found = em_node_describe(root);
        err = em_error_at(EM_EXIT_BAD_INPUT, root->mark,
                          "the top level of a recipe must be a map of keys, found %s", found);
        free(found);
        em_node_free(root);
        return err;
    }
    const em_node *includes = em_node_get(root, "include");
    em_node *merged = NULL;
    if (includes && includes->kind == EM_NODE_SEQ) {
        for (size_t i = 0; i < includes->count && !err; i++)
            err = include_one(includes->items[i], chain, &merged);
    } else if (includes) {
        err = include_one(includes, chain, &merged);
    }
    if (err) {
        em_node_free(merged);
        em_node_free(root);
        return err;
    }
    em_node_map_remove(root, "include");
    if (merged) {
        merged->mark = root->mark;
        deep_merge(merged, root);
        root = merged;
    }
    *out = root;
    return NULL;
}

em_status em_recipe_load(const char *path, em_node **out) {
    *out = NULL;
    include_budget budget = {0};
    include_chain top = {path, file_id(path), NULL, &budget};
    em_status err = load_recipe_file(path, &top, out);
    free(top.id);
    return err;
}
