/* `evalmesh supported`: what this build can run, read from the tables themselves (architectures,
 * tensor types, pre-tokenizers, forward devices, collective backends, stage kinds), so the list
 * cannot drift from the code. `--markdown` prints the README's table of it; a test checks that
 * the README holds exactly that output. */
#include <stdio.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/comm/backend_table.h"
#include "runner/stage.h"
#include "util/error.h"
#include "stages/kernels/forward_backend.h"
#include "stages/model/architectures.h"
#include "stages/formats/ggml_types.h"
#include "stages/tokenizer/pre_table.h"

static const char usage[] =
    "usage: evalmesh supported [--markdown]\n"
    "\n"
    "Lists what this build runs: model architectures (GGUF and Hugging Face names), tensor\n"
    "types, tokenizer pre-tokenizers (tokenizer.ggml.pre), forward devices, collective\n"
    "backends and stage kinds, each read from its table. --markdown prints the table the\n"
    "README shows.\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad arguments.\n";

/* One line of the list: "what: items" or, with markdown, "| what | items |". */
typedef struct list {
    bool markdown;
    bool open;
    size_t items;
} list;

static void list_begin(list *l, const char *what) {
    printf(l->markdown ? "| %s | " : "%s: ", what);
    l->open = true;
    l->items = 0;
}

static void list_item(list *l, const char *item) {
    printf(l->markdown ? "%s`%s`" : "%s%s", l->items++ ? ", " : "", item);
}

static void list_end(list *l) {
    printf(l->markdown ? " |\n" : "\n");
    l->open = false;
}

/* "a b c" (space-separated names) as items. */
static void list_words(list *l, const char *words) {
    char word[64];
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        if (n > 0 && n < sizeof word) {
            memcpy(word, p, n);
            word[n] = 0;
            list_item(l, word);
        }
        p += n;
        p += strspn(p, " ");
    }
}

static void print_architectures(list *l) {
    /* em_architecture_names() is ", "-separated */
    char names[1024];
    snprintf(names, sizeof names, "%s", em_architecture_names());
    list_begin(l, "architectures (GGUF `general.architecture`)");
    for (char *save, *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save))
        list_item(l, name);
    list_end(l);
    snprintf(names, sizeof names, "%s", em_architecture_hf_names());
    list_begin(l, "architectures (Hugging Face `model_type`)");
    for (char *save, *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save))
        list_item(l, name);
    list_end(l);
}

static void print_tensor_types(list *l) {
    list_begin(l, "tensor types computed with");
    for (uint32_t id = 0; id < 256; id++) {
        const em_ggml_type_info *t = em_ggml_type_info_get(id);
        if (t && t->to_float) list_item(l, t->name);
    }
    list_end(l);
    list_begin(l, "tensor types read but not computed with");
    for (uint32_t id = 0; id < 256; id++) {
        const em_ggml_type_info *t = em_ggml_type_info_get(id);
        if (t && !t->to_float) list_item(l, t->name);
    }
    list_end(l);
}

static void print_pre_tokenizers(list *l) {
    size_t count;
    const em_pre_name *names = em_pre_names(&count);
    list_begin(l, "pre-tokenizers (`tokenizer.ggml.pre`)");
    for (size_t i = 0; i < count; i++)
        if (!names[i].unsupported) list_item(l, names[i].name);
    list_end(l);
    list_begin(l, "pre-tokenizers known but refused");
    for (size_t i = 0; i < count; i++)
        if (names[i].unsupported) list_item(l, names[i].name);
    list_end(l);
}

static void print_runtime(list *l) {
    list_begin(l, "forward devices (`device:`)");
    list_words(l, em_forward_backend_names());
    list_end(l);
    size_t count;
    const em_backend_row *rows = em_backend_rows(&count);
    list_begin(l, "collective backends (`backend:`)");
    for (size_t i = 0; i < count; i++) list_item(l, rows[i].name);
    list_end(l);
    list_begin(l, "stage kinds (`kind:`)");
    for (const em_stage_kind *const *k = em_stage_kinds; *k; k++) list_item(l, (*k)->name);
    list_end(l);
}

static int supported_main(int argc, char **argv) {
    enum { OPT_MARKDOWN = 256 };
    static const struct option options[] = {{"markdown", no_argument, NULL, OPT_MARKDOWN},
                                            {NULL, 0, NULL, 0}};
    list l = {0};
    int c;
    while ((c = em_cli_option("supported", argc, argv, "", options)) != -1) {
        if (c != OPT_MARKDOWN) return EM_EXIT_BAD_INPUT;
        l.markdown = true;
    }
    if (optind < argc) return em_cli_unexpected("supported", argv[optind]);
    if (l.markdown) printf("| what | supported |\n|---|---|\n");
    print_architectures(&l);
    print_tensor_types(&l);
    print_pre_tokenizers(&l);
    print_runtime(&l);
    return EM_EXIT_OK;
}

const em_command em_command_supported = {
    .name = "supported",
    .summary = "list the architectures, tensor types, pre-tokenizers and backends this build runs",
    .usage = usage,
    .main = supported_main,
};
