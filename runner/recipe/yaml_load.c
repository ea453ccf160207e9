/* YAML text to an em_node tree, with libyaml's event parser. Every node and key keeps its
 * file:line:col (1-based). Aliases become deep copies of their anchored node, merge keys (`<<`)
 * are resolved, and what YAML allows but a recipe should not have is rejected: duplicate keys,
 * non-scalar keys, several documents, an empty file. A tab in indentation gets its own message,
 * since libyaml only says "found character that cannot start any token". */
#include "runner/recipe/recipe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/regular_file.h"

/* Aliases are copies, so a few anchors can expand into a huge tree ("billion laughs"); and
 * nesting is read by recursion, so it is bounded too. */
enum { MAX_NODES = 1 << 20, MAX_DEPTH = 256 };

typedef struct anchor {
    char *name;
    em_node *node; /* a copy of the anchored node; NULL while that node is still being read */
} anchor;

typedef struct loader {
    yaml_parser_t parser;
    const char *file; /* interned */
    const char *text;
    size_t len;
    anchor *anchors;
    size_t n_anchors;
    size_t n_nodes;
    int depth; /* maps and lists open around the current node */
} loader;

static em_mark mark_of(const loader *ld, yaml_mark_t m) {
    return (em_mark){ld->file, (int)m.line + 1, (int)m.column + 1};
}

/* The line and column (in characters) of a byte offset into the text. */
static em_mark mark_at_offset(const loader *ld, size_t offset) {
    em_mark m = {ld->file, 1, 1};
    for (size_t i = 0; i < offset && i < ld->len; i++) {
        unsigned char c = (unsigned char)ld->text[i];
        if (c == '\n') {
            m.line++;
            m.col = 1;
        } else if ((c & 0xC0) != 0x80) {
            m.col++;
        }
    }
    return m;
}

/* When the line of a syntax error is indented with a tab, that tab is the real problem. */
static bool find_indent_tab(const loader *ld, size_t line, em_mark *where) {
    size_t i = 0;
    for (size_t l = 0; l < line && i < ld->len; i++)
        if (ld->text[i] == '\n') l++;
    for (size_t col = 0; i < ld->len && (ld->text[i] == ' ' || ld->text[i] == '\t'); i++, col++) {
        if (ld->text[i] == '\t') {
            *where = (em_mark){ld->file, (int)line + 1, (int)col + 1};
            return true;
        }
    }
    return false;
}

static em_status parser_error(const loader *ld) {
    const yaml_parser_t *p = &ld->parser;
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_READER_ERROR)
        return em_error_at(EM_EXIT_BAD_INPUT, mark_at_offset(ld, p->problem_offset), "%s", problem);
    if (p->error == YAML_MEMORY_ERROR) return em_error_new(EM_EXIT_FAILURE, "out of memory");
    em_mark tab;
    if (find_indent_tab(ld, p->problem_mark.line, &tab))
        return em_error_at(EM_EXIT_BAD_INPUT, tab, "tab character in indentation (use spaces)");
    em_mark at = mark_of(ld, p->problem_mark);
    if (p->context) {
        char where[1024];
        em_mark_format(mark_of(ld, p->context_mark), where, sizeof where);
        return em_error_at(EM_EXIT_BAD_INPUT, at, "%s (%s at %s)", problem, p->context, where);
    }
    return em_error_at(EM_EXIT_BAD_INPUT, at, "%s", problem);
}

static em_status next_event(loader *ld, yaml_event_t *ev) {
    if (!yaml_parser_parse(&ld->parser, ev)) return parser_error(ld);
    return NULL;
}

static size_t count_nodes(const em_node *n) {
    size_t total = 1;
    for (size_t i = 0; n->kind == EM_NODE_MAP && i < n->count; i++)
        total += count_nodes(n->entries[i].value);
    for (size_t i = 0; n->kind == EM_NODE_SEQ && i < n->count; i++)
        total += count_nodes(n->items[i]);
    return total;
}

static em_status add_nodes(loader *ld, size_t n, em_mark at) {
    ld->n_nodes += n;
    if (ld->n_nodes > MAX_NODES)
        return em_error_at(EM_EXIT_BAD_INPUT, at,
                           "too many nodes (aliases expand the document past %d nodes)", MAX_NODES);
    return NULL;
}

/* Anchors are looked up from the newest, so a redefined anchor shadows the older one. */
static anchor *find_anchor(loader *ld, const char *name) {
    for (size_t i = ld->n_anchors; i-- > 0;)
        if (strcmp(ld->anchors[i].name, name) == 0) return &ld->anchors[i];
    return NULL;
}

static size_t begin_anchor(loader *ld, const yaml_char_t *name) {
    ld->anchors = em_xrealloc(ld->anchors, (ld->n_anchors + 1) * sizeof *ld->anchors);
    ld->anchors[ld->n_anchors] = (anchor){em_xstrdup((const char *)name), NULL};
    return ld->n_anchors++;
}

static em_status check_tag(loader *ld, const yaml_char_t *tag, yaml_mark_t at, bool *is_str) {
    *is_str = false;
    if (!tag) return NULL;
    if (!strcmp((const char *)tag, "!") || !strcmp((const char *)tag, YAML_STR_TAG)) {
        *is_str = true;
        return NULL;
    }
    return em_error_at(EM_EXIT_BAD_INPUT, mark_of(ld, at),
                       "unsupported tag '%s' (only !!str is allowed)", (const char *)tag);
}

static em_status parse_node(loader *ld, const yaml_event_t *ev, em_node **out);

static em_status parse_seq(loader *ld, const yaml_event_t *start, em_node **out) {
    em_node *seq = em_node_new_seq(mark_of(ld, start->start_mark));
    for (;;) {
        yaml_event_t ev;
        em_status err = next_event(ld, &ev);
        if (err) {
            em_node_free(seq);
            return err;
        }
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        em_node *item = NULL;
        err = parse_node(ld, &ev, &item);
        yaml_event_delete(&ev);
        if (err) {
            em_node_free(seq);
            return err;
        }
        em_node_seq_append(seq, item);
    }
    *out = seq;
    return NULL;
}

static em_map_entry *entry_in(const em_node *map, const char *key) {
    return (em_map_entry *)em_node_get_entry(map, key);
}

/* Builds the final map: the explicit entries, with the merged maps' entries inserted where the
 * `<<` key stood. Explicit keys win over merged ones, and earlier merged maps over later ones.
 * Entries are moved out of `explicit` and `merges`. */
static em_node *apply_merges(em_node *explicit, size_t merge_pos, em_node **merges,
                             size_t n_merges) {
    em_node *map = em_node_new_map(explicit->mark);
    for (size_t i = 0; i <= explicit->count; i++) {
        for (size_t m = 0; i == merge_pos && m < n_merges; m++) {
            for (size_t j = 0; j < merges[m]->count; j++) {
                em_map_entry *e = &merges[m]->entries[j];
                if (entry_in(explicit, e->key) || entry_in(map, e->key)) continue;
                em_node_map_set(map, e->key, e->key_mark, e->value);
                e->value = NULL;
            }
        }
        if (i < explicit->count) {
            em_map_entry *e = &explicit->entries[i];
            em_node_map_set(map, e->key, e->key_mark, e->value);
            e->value = NULL;
        }
    }
    em_node_free(explicit);
    for (size_t m = 0; m < n_merges; m++) em_node_free(merges[m]);
    return map;
}

/* Collects the maps a `<<` value names: one map, or a list of maps. Takes value. */
static em_status add_merge_sources(em_node *value, em_node ***merges, size_t *n_merges) {
    bool ok = value->kind == EM_NODE_MAP || value->kind == EM_NODE_SEQ;
    for (size_t i = 0; value->kind == EM_NODE_SEQ && i < value->count; i++)
        ok = ok && value->items[i]->kind == EM_NODE_MAP;
    if (!ok) {
        char *found = em_node_describe(value);
        em_status err =
            em_error_at(EM_EXIT_BAD_INPUT, value->mark,
                        "merge key '<<' needs a map or a list of maps, found %s", found);
        free(found);
        em_node_free(value);
        return err;
    }
    if (value->kind == EM_NODE_MAP) {
        *merges = em_xrealloc(*merges, (*n_merges + 1) * sizeof **merges);
        (*merges)[(*n_merges)++] = value;
        return NULL;
    }
    *merges = em_xrealloc(*merges, (*n_merges + value->count) * sizeof **merges);
    for (size_t i = 0; i < value->count; i++) (*merges)[(*n_merges)++] = value->items[i];
    value->count = 0;
    em_node_free(value);
    return NULL;
}

static em_status parse_map(loader *ld, const yaml_event_t *start, em_node **out) {
    em_node *map = em_node_new_map(mark_of(ld, start->start_mark));
    em_node **merges = NULL;
    size_t n_merges = 0, merge_pos = 0;
    bool seen_merge = false;
    em_mark merge_mark = {0};
    em_status err = NULL;
    for (;;) {
        yaml_event_t ev;
        if ((err = next_event(ld, &ev))) break;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        em_node *key = NULL, *value = NULL;
        err = parse_node(ld, &ev, &key);
        bool plain_key = ev.type == YAML_SCALAR_EVENT && ev.data.scalar.plain_implicit;
        yaml_event_delete(&ev);
        if (err) break;
        if (key->kind != EM_NODE_SCALAR || !key->text[0]) {
            err = em_error_at(
                EM_EXIT_BAD_INPUT, key->mark, "a key must be a non-empty scalar, found %s",
                key->kind == EM_NODE_SCALAR ? "an empty one" : em_node_type_name(key));
            em_node_free(key);
            break;
        }
        const em_map_entry *first = entry_in(map, key->text);
        bool is_merge = plain_key && strcmp(key->text, "<<") == 0;
        if (first || (is_merge && seen_merge)) {
            char where[1024];
            em_mark_format(first ? first->key_mark : merge_mark, where, sizeof where);
            err = em_error_at(EM_EXIT_BAD_INPUT, key->mark,
                              "duplicate key '%s' (first defined at %s)", key->text, where);
            em_node_free(key);
            break;
        }
        if ((err = next_event(ld, &ev))) {
            em_node_free(key);
            break;
        }
        err = parse_node(ld, &ev, &value);
        yaml_event_delete(&ev);
        if (err) {
            em_node_free(key);
            break;
        }
        if (is_merge) {
            seen_merge = true;
            merge_mark = key->mark;
            merge_pos = map->count;
            err = add_merge_sources(value, &merges, &n_merges);
        } else {
            em_node_map_set(map, key->text, key->mark, value);
        }
        em_node_free(key);
        if (err) break;
    }
    if (err) {
        for (size_t m = 0; m < n_merges; m++) em_node_free(merges[m]);
        free(merges);
        em_node_free(map);
        return err;
    }
    *out = n_merges ? apply_merges(map, merge_pos, merges, n_merges) : map;
    free(merges);
    return NULL;
}

/* Reads the node that starts with event ev (the caller deletes ev). */
static em_status parse_node(loader *ld, const yaml_event_t *ev, em_node **out) {
    em_mark at = mark_of(ld, ev->start_mark);
    em_status err;
    bool is_str;
    if (ev->type == YAML_ALIAS_EVENT) {
        const char *name = (const char *)ev->data.alias.anchor;
        anchor *a = find_anchor(ld, name);
        if (!a) return em_error_at(EM_EXIT_BAD_INPUT, at, "unknown alias '*%s'", name);
        if (!a->node)
            return em_error_at(EM_EXIT_BAD_INPUT, at, "alias '*%s' is inside the node it refers to",
                               name);
        if ((err = add_nodes(ld, count_nodes(a->node), at))) return err;
        *out = em_node_clone(a->node);
        return NULL;
    }
    if ((err = add_nodes(ld, 1, at))) return err;
    const yaml_char_t *anchor_name = NULL;
    if (ev->type == YAML_SCALAR_EVENT) {
        if ((err = check_tag(ld, ev->data.scalar.tag, ev->start_mark, &is_str))) return err;
        bool quoted = is_str || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        *out = em_node_new_scalar((const char *)ev->data.scalar.value, quoted, at);
        anchor_name = ev->data.scalar.anchor;
        if (anchor_name) {
            size_t slot = begin_anchor(ld, anchor_name);
            ld->anchors[slot].node = em_node_clone(*out);
        }
        return NULL;
    }
    size_t slot = 0;
    if (ld->depth >= MAX_DEPTH)
        return em_error_at(EM_EXIT_BAD_INPUT, at, "maps and lists nested more than %d deep",
                           MAX_DEPTH);
    ld->depth++;
    if (ev->type == YAML_SEQUENCE_START_EVENT) {
        if ((err = check_tag(ld, ev->data.sequence_start.tag, ev->start_mark, &is_str))) return err;
        anchor_name = ev->data.sequence_start.anchor;
        if (anchor_name) slot = begin_anchor(ld, anchor_name);
        err = parse_seq(ld, ev, out);
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        if ((err = check_tag(ld, ev->data.mapping_start.tag, ev->start_mark, &is_str))) return err;
        anchor_name = ev->data.mapping_start.anchor;
        if (anchor_name) slot = begin_anchor(ld, anchor_name);
        err = parse_map(ld, ev, out);
    } else {
        err = em_error_at(EM_EXIT_FAILURE, at, "unexpected YAML event %d", (int)ev->type);
    }
    ld->depth--;
    if (err) return err;
    if (anchor_name) ld->anchors[slot].node = em_node_clone(*out);
    return NULL;
}

static em_status parse_document(loader *ld, em_node **out) {
    yaml_event_t ev;
    em_status err = next_event(ld, &ev); /* stream start */
    if (err) return err;
    yaml_event_delete(&ev);
    if ((err = next_event(ld, &ev))) return err;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        return em_error_at(EM_EXIT_BAD_INPUT, (em_mark){ld->file, 0, 0}, "empty recipe");
    }
    yaml_event_delete(&ev); /* document start */
    if ((err = next_event(ld, &ev))) return err;
    err = parse_node(ld, &ev, out);
    yaml_event_delete(&ev);
    if (err) return err;
    if (!(err = next_event(ld, &ev))) { /* document end */
        yaml_event_delete(&ev);
        err = next_event(ld, &ev);
    }
    if (!err && ev.type == YAML_DOCUMENT_START_EVENT)
        err = em_error_at(EM_EXIT_BAD_INPUT, mark_of(ld, ev.start_mark),
                          "a second YAML document (a recipe is one document; remove the '---')");
    if (!err) yaml_event_delete(&ev);
    if (err) {
        em_node_free(*out);
        *out = NULL;
    }
    return err;
}

em_status em_yaml_parse(const char *text, size_t len, const char *name, em_node **out) {
    loader ld = {.file = em_intern(name ? name : "<input>"), .text = text, .len = len};
    *out = NULL;
    if (!yaml_parser_initialize(&ld.parser)) return em_error_new(EM_EXIT_FAILURE, "out of memory");
    yaml_parser_set_input_string(&ld.parser, (const unsigned char *)text, len);
    em_status err = parse_document(&ld, out);
    yaml_parser_delete(&ld.parser);
    for (size_t i = 0; i < ld.n_anchors; i++) {
        free(ld.anchors[i].name);
        em_node_free(ld.anchors[i].node);
    }
    free(ld.anchors);
    return err;
}

em_status em_yaml_load_file(const char *path, em_node **out) {
    *out = NULL;
    char *text;
    size_t len;
    em_status err = em_read_regular_file(path, EM_RECIPE_MAX_BYTES, "a recipe", &text, &len);
    if (err) return err;
    err = em_yaml_parse(text, len, path, out);
    free(text);
    return err;
}
