/* The pre-tokenizer regex engine: a recursive-descent parser that emits instructions with
 * relative jumps (so a repeated fragment is copied as it is), and a backtracking matcher with an
 * explicit stack. Lookaheads run as nested matches that keep no backtracking state. */
#include "stages/tokenizer/pre_regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "stages/tokenizer/pretokenizer.h"
#include "util/utf8.h"

enum op {
    OP_CHAR,
    OP_CLASS,
    OP_ANY,
    OP_SPLIT,
    OP_JMP,
    OP_BOL,
    OP_EOL,
    OP_WORDB,
    OP_NWORDB,
    OP_LOOK,
    OP_NLOOK,
    OP_MATCH
};

/* x, y: relative targets. SPLIT tries pc+x first, then pc+y; JMP goes to pc+x; LOOK/NLOOK run
 * the body at pc+1 (ending in MATCH) and continue at pc+y. CLASS: c is the class index. */
typedef struct inst {
    uint8_t op;
    uint32_t c;
    int32_t x, y;
} inst;

/* Class escapes inside [...] and as atoms. */
enum { C_SPACE = 1, C_NSPACE = 2, C_DIGIT = 4, C_NDIGIT = 8, C_WORD = 16, C_NWORD = 32 };

typedef struct cls {
    bool negate;
    uint8_t escapes;
    size_t first, count; /* ranges[first .. first+count) as lo, hi pairs */
} cls;

struct em_regex {
    bool collapsed;
    inst *code;
    size_t n, cap;
    cls *classes;
    size_t n_classes, cap_classes;
    uint32_t *ranges; /* pairs */
    size_t n_ranges, cap_ranges;
};

/* Collapsed units of the Unicode categories (llama.cpp's choice of bytes). */
enum {
    U_OTHER = 0xD0,
    U_NUMBER = 0xD1,
    U_LETTER = 0xD2,
    U_PUNCT = 0xD3,
    U_MARK = 0xD4,
    U_SYMBOL = 0xD5
};

uint32_t em_regex_unit(uint32_t cpt, bool collapsed) {
    if (cpt < 0x80) return cpt;
    if (em_is_white_space(cpt)) return 0x0B;
    if (!collapsed) return cpt;
    switch (utf8proc_category((utf8proc_int32_t)cpt)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return U_LETTER;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return U_NUMBER;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return U_PUNCT;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
        return U_MARK;
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
        return U_SYMBOL;
    default:
        return U_OTHER;
    }
}

/* What \p{X} stands for when collapsed: its unit and the ASCII characters of the category. */
typedef struct category {
    const char *name;
    uint32_t unit;
    const char *ascii; /* lo, hi pairs */
} category;

static const category CATEGORIES[] = {
    {"N", U_NUMBER, "09"},    {"L", U_LETTER, "AZaz"},
    {"Lu", U_LETTER, "AZaz"}, {"Ll", U_LETTER, "AZaz"},
    {"Lt", U_LETTER, "AZaz"}, {"Lm", U_LETTER, "AZaz"},
    {"Lo", U_LETTER, "AZaz"}, {"P", U_PUNCT, "!#%*,/:;?@[]__{{}}"},
    {"M", U_MARK, ""},        {"S", U_SYMBOL, "$$++<>^^``||"},
};
#define N_CATEGORIES (sizeof(CATEGORIES) / sizeof(CATEGORIES[0]))

bool em_regex_collapsed(const em_regex *re) {
    return re->collapsed;
}

/* ---- parsing ---- */

typedef struct parser {
    em_regex *re;
    const uint32_t *p; /* pattern codepoints */
    size_t n, i;
    const char *source;
    const char *pattern;
    em_status err;
} parser;

static void fail(parser *ps, const char *what) {
    if (!ps->err)
        ps->err =
            em_error_new(EM_EXIT_BAD_INPUT, "%s: regular expression '%s': %s at character %zu",
                         ps->source, ps->pattern, what, ps->i);
}

static size_t emit(em_regex *re, inst in) {
    if (re->n == re->cap) {
        re->cap = re->cap ? 2 * re->cap : 64;
        re->code = em_xrealloc(re->code, re->cap * sizeof(inst));
    }
    re->code[re->n] = in;
    return re->n++;
}

static void insert(em_regex *re, size_t at, const inst *ins, size_t k) {
    for (size_t j = 0; j < k; j++) emit(re, (inst){0});
    memmove(re->code + at + k, re->code + at, (re->n - k - at) * sizeof(inst));
    memcpy(re->code + at, ins, k * sizeof(inst));
}

static void add_range(em_regex *re, uint32_t lo, uint32_t hi) {
    if (re->n_ranges + 2 > re->cap_ranges) {
        re->cap_ranges = re->cap_ranges ? 2 * re->cap_ranges : 64;
        re->ranges = em_xrealloc(re->ranges, re->cap_ranges * sizeof(uint32_t));
    }
    re->ranges[re->n_ranges++] = lo;
    re->ranges[re->n_ranges++] = hi;
}

static size_t new_class(em_regex *re, bool negate) {
    if (re->n_classes == re->cap_classes) {
        re->cap_classes = re->cap_classes ? 2 * re->cap_classes : 16;
        re->classes = em_xrealloc(re->classes, re->cap_classes * sizeof(cls));
    }
    re->classes[re->n_classes] = (cls){negate, 0, re->n_ranges / 2, 0};
    return re->n_classes++;
}

static void class_range(em_regex *re, size_t c, uint32_t lo, uint32_t hi) {
    add_range(re, lo, hi);
    re->classes[c].count++;
}

static bool at(const parser *ps, uint32_t c) {
    return ps->i < ps->n && ps->p[ps->i] == c;
}

/* \p{X} at ps->i (after the backslash and 'p'): adds it to class c. */
static void category_escape(parser *ps, size_t c) {
    size_t start = ps->i;
    if (!at(ps, '{')) {
        fail(ps, "\\p without {");
        return;
    }
    while (ps->i < ps->n && ps->p[ps->i] != '}') ps->i++;
    if (ps->i == ps->n) {
        fail(ps, "\\p{ without }");
        return;
    }
    char name[8] = {0};
    size_t len = ps->i - start - 1;
    for (size_t k = 0; k < len && k < sizeof(name) - 1; k++) name[k] = (char)ps->p[start + 1 + k];
    ps->i++;
    for (size_t k = 0; k < N_CATEGORIES; k++) {
        if (len != strlen(CATEGORIES[k].name) || strcmp(name, CATEGORIES[k].name) != 0) continue;
        class_range(ps->re, c, CATEGORIES[k].unit, CATEGORIES[k].unit);
        for (const char *a = CATEGORIES[k].ascii; *a; a += 2)
            class_range(ps->re, c, (uint8_t)a[0], (uint8_t)a[1]);
        return;
    }
    fail(ps, "unsupported Unicode category");
}

/* The character of a single-character escape (after the backslash), or -1 for a class escape
 * (added to class c) or an error. */
static int64_t escape_char(parser *ps, size_t c, bool in_class) {
    if (ps->i >= ps->n) {
        fail(ps, "pattern ends with a backslash");
        return -1;
    }
    uint32_t e = ps->p[ps->i++];
    uint8_t flag = e == 's'   ? C_SPACE
                   : e == 'S' ? C_NSPACE
                   : e == 'd' ? C_DIGIT
                   : e == 'D' ? C_NDIGIT
                   : e == 'w' ? C_WORD
                   : e == 'W' ? C_NWORD
                              : 0;
    if (flag) {
        ps->re->classes[c].escapes |= flag;
        return -1;
    }
    if (e == 'p') {
        if (!ps->re->collapsed) fail(ps, "unsupported \\p category");
        category_escape(ps, c);
        return -1;
    }
    switch (e) {
    case 'r':
        return '\r';
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case '0':
        return 0;
    case 'b':
        if (in_class) return '\b';
        break;
    case 'x':
    case 'u': {
        size_t digits = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (size_t k = 0; k < digits; k++, ps->i++) {
            uint32_t h = ps->i < ps->n ? ps->p[ps->i] : 0;
            int d = h >= '0' && h <= '9'   ? (int)(h - '0')
                    : h >= 'a' && h <= 'f' ? (int)(h - 'a' + 10)
                    : h >= 'A' && h <= 'F' ? (int)(h - 'A' + 10)
                                           : -1;
            if (d < 0) {
                fail(ps, "bad hexadecimal escape");
                return -1;
            }
            v = v * 16 + (uint32_t)d;
        }
        return v;
    }
    default:
        break;
    }
    if ((e | 0x20) >= 'a' && (e | 0x20) <= 'z') {
        fail(ps, "unsupported escape");
        return -1;
    }
    return e; /* an escaped punctuation character stands for itself */
}

static void parse_class(parser *ps) {
    bool negate = at(ps, '^');
    if (negate) ps->i++;
    size_t c = new_class(ps->re, negate);
    bool first = true;
    while (!ps->err && ps->i < ps->n && (first || ps->p[ps->i] != ']')) {
        first = false;
        int64_t lo = ps->p[ps->i++];
        if (lo == '\\') lo = escape_char(ps, c, true);
        if (lo < 0) continue;
        int64_t hi = lo;
        if (at(ps, '-') && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
            ps->i++;
            hi = ps->p[ps->i++];
            if (hi == '\\') hi = escape_char(ps, c, true);
            if (hi < lo) {
                fail(ps, "bad range in a class");
                return;
            }
        }
        class_range(ps->re, c, (uint32_t)lo, (uint32_t)hi);
    }
    if (!at(ps, ']')) {
        fail(ps, "unterminated class");
        return;
    }
    ps->i++;
    emit(ps->re, (inst){OP_CLASS, (uint32_t)c, 0, 0});
}

static void parse_alt(parser *ps);

/* Whether the fragment code[0..len) can finish without consuming a unit. */
static bool nullable(const inst *code, size_t len, size_t pc, int depth) {
    while (pc < len && depth < 64) {
        switch (code[pc].op) {
        case OP_CHAR:
        case OP_CLASS:
        case OP_ANY:
            return false;
        case OP_SPLIT:
            if (nullable(code, len, pc + (size_t)code[pc].y, depth + 1)) return true;
            pc += (size_t)code[pc].x;
            break;
        case OP_JMP:
            if (code[pc].x <= 0) return false;
            pc += (size_t)code[pc].x;
            break;
        case OP_LOOK:
        case OP_NLOOK:
            pc += (size_t)code[pc].y;
            break;
        default:
            pc++;
        }
    }
    return pc >= len;
}

/* Repeats the fragment code[start..n) min to max times (max < 0: unbounded). */
static void quantify(parser *ps, size_t start, long min, long max, bool greedy) {
    em_regex *re = ps->re;
    size_t len = re->n - start;
    if (max < 0 && nullable(re->code + start, len, 0, 0)) {
        fail(ps, "a repeated part that can match nothing");
        return;
    }
    if (max > 1024 || min > 1024) {
        fail(ps, "a repeat count over 1024");
        return;
    }
    inst *frag = em_xmalloc((len ? len : 1) * sizeof(inst));
    memcpy(frag, re->code + start, len * sizeof(inst));
    re->n = start;
    for (long k = 0; k < min; k++)
        for (size_t j = 0; j < len; j++) emit(re, frag[j]);
    int32_t l = (int32_t)len;
    if (max < 0) {
        emit(re, greedy ? (inst){OP_SPLIT, 0, 1, l + 2} : (inst){OP_SPLIT, 0, l + 2, 1});
        for (size_t j = 0; j < len; j++) emit(re, frag[j]);
        emit(re, (inst){OP_JMP, 0, -(l + 1), 0});
    } else {
        /* (?:F(?:F...)?)? built from the inside out */
        size_t s = re->n;
        for (long k = min; k < max; k++) {
            int32_t inner = (int32_t)(re->n - s);
            insert(re, s, frag, len);
            inst split = greedy ? (inst){OP_SPLIT, 0, 1, 1 + l + inner}
                                : (inst){OP_SPLIT, 0, 1 + l + inner, 1};
            insert(re, s, &split, 1);
        }
    }
    free(frag);
}

static bool parse_number(parser *ps, long *v) {
    size_t start = ps->i;
    *v = 0;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9' && *v < 100000)
        *v = *v * 10 + (long)(ps->p[ps->i++] - '0');
    return ps->i > start;
}

static void parse_quantifier(parser *ps, size_t start) {
    while (!ps->err && ps->i < ps->n) {
        uint32_t q = ps->p[ps->i];
        long min, max;
        if (q == '*')
            min = 0, max = -1;
        else if (q == '+')
            min = 1, max = -1;
        else if (q == '?')
            min = 0, max = 1;
        else if (q == '{') {
            ps->i++;
            if (!parse_number(ps, &min)) {
                fail(ps, "bad {} repeat");
                return;
            }
            max = min;
            if (at(ps, ',')) {
                ps->i++;
                if (!parse_number(ps, &max)) max = -1;
            }
            if (!at(ps, '}') || (max >= 0 && max < min)) {
                fail(ps, "bad {} repeat");
                return;
            }
        } else {
            return;
        }
        ps->i++;
        bool greedy = !at(ps, '?');
        if (!greedy) ps->i++;
        if (start == ps->re->n) {
            fail(ps, "nothing to repeat");
            return;
        }
        quantify(ps, start, min, max, greedy);
    }
}

static void parse_atom(parser *ps) {
    em_regex *re = ps->re;
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case '(': {
        uint8_t look = 0;
        if (at(ps, '?')) {
            ps->i++;
            uint32_t k = ps->i < ps->n ? ps->p[ps->i++] : 0;
            if (k == '=')
                look = OP_LOOK;
            else if (k == '!')
                look = OP_NLOOK;
            else if (k != ':') {
                fail(ps, "unsupported group");
                return;
            }
        }
        size_t start = re->n;
        parse_alt(ps);
        if (!at(ps, ')')) {
            fail(ps, "unbalanced (");
            return;
        }
        ps->i++;
        if (look) {
            emit(re, (inst){OP_MATCH, 0, 0, 0});
            inst in = {look, 0, 0, (int32_t)(re->n - start + 1)};
            insert(re, start, &in, 1);
        }
        return;
    }
    case '[':
        return parse_class(ps);
    case '.':
        emit(re, (inst){OP_ANY, 0, 0, 0});
        return;
    case '^':
        emit(re, (inst){OP_BOL, 0, 0, 0});
        return;
    case '$':
        emit(re, (inst){OP_EOL, 0, 0, 0});
        return;
    case '\\': {
        if (at(ps, 'b') || at(ps, 'B')) {
            emit(re, (inst){ps->p[ps->i++] == 'b' ? OP_WORDB : OP_NWORDB, 0, 0, 0});
            return;
        }
        size_t k = new_class(re, false);
        int64_t e = escape_char(ps, k, false);
        if (e >= 0) {
            re->n_classes--; /* a plain character after all */
            emit(re, (inst){OP_CHAR, (uint32_t)e, 0, 0});
        } else {
            emit(re, (inst){OP_CLASS, (uint32_t)k, 0, 0});
        }
        return;
    }
    case ')':
    case '|':
    case '*':
    case '+':
    case '?':
        ps->i--;
        {
            fail(ps, "unexpected character");
            return;
        }
    default:
        emit(re, (inst){OP_CHAR, c, 0, 0});
    }
}

static void parse_seq(parser *ps) {
    while (!ps->err && ps->i < ps->n && !at(ps, '|') && !at(ps, ')')) {
        size_t start = ps->re->n;
        parse_atom(ps);
        if (!ps->err) parse_quantifier(ps, start);
    }
}

static void parse_alt(parser *ps) {
    size_t start = ps->re->n;
    parse_seq(ps);
    if (ps->err || !at(ps, '|')) return;
    ps->i++;
    size_t mid = ps->re->n;
    parse_alt(ps);
    /* SPLIT a, b ; a ; JMP end ; b */
    int32_t b_len = (int32_t)(ps->re->n - mid);
    inst jmp = {OP_JMP, 0, b_len + 1, 0};
    insert(ps->re, mid, &jmp, 1);
    inst split = {OP_SPLIT, 0, 1, (int32_t)(mid - start) + 2};
    insert(ps->re, start, &split, 1);
}

em_status em_regex_compile(const char *pattern, const char *source, em_regex **out) {
    *out = NULL;
    size_t len = strlen(pattern);
    if (em_utf8_invalid_offset(pattern, len) != len)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: regular expression is not valid UTF-8", source);
    em_regex *re = em_xcalloc(1, sizeof(em_regex));
    for (size_t k = 0; k < N_CATEGORIES && !re->collapsed; k++) {
        char name[16];
        snprintf(name, sizeof name, "\\p{%s}", CATEGORIES[k].name);
        re->collapsed = strstr(pattern, name) != NULL;
    }
    uint32_t *cpts = em_xmalloc((len + 1) * sizeof(uint32_t));
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        int k;
        cpts[n] = em_utf8_decode(pattern + i, &k);
        i += (size_t)k;
    }
    parser ps = {re, cpts, n, 0, source, pattern, NULL};
    for (size_t i = 0; i < n && re->collapsed; i++) {
        if (cpts[i] < 0x80) continue;
        ps.i = i;
        fail(&ps, "a Unicode category together with a non-ASCII character (llama.cpp refuses it)");
        break;
    }
    if (!ps.err) parse_alt(&ps);
    if (!ps.err && ps.i < n) fail(&ps, "unbalanced )");
    emit(re, (inst){OP_MATCH, 0, 0, 0});
    free(cpts);
    if (ps.err) {
        em_regex_free(re);
        return ps.err;
    }
    *out = re;
    return NULL;
}

void em_regex_free(em_regex *re) {
    if (!re) return;
    free(re->code);
    free(re->classes);
    free(re->ranges);
    free(re);
}

/* ---- matching ---- */

struct em_regex_frame {
    size_t pc, sp;
};

void em_regex_stack_free(em_regex_stack *st) {
    free(st->frames);
    *st = (em_regex_stack){0};
}

static void push(em_regex_stack *st, size_t pc, size_t sp) {
    if (st->count == st->capacity) {
        st->capacity = st->capacity ? 2 * st->capacity : 256;
        st->frames = em_xrealloc(st->frames, st->capacity * sizeof(struct em_regex_frame));
    }
    st->frames[st->count++] = (struct em_regex_frame){pc, sp};
}

/* std::regex's classes: ASCII only. */
static bool is_space(uint32_t u) {
    return u == ' ' || (u >= '\t' && u <= '\r');
}
static bool is_digit(uint32_t u) {
    return u >= '0' && u <= '9';
}
static bool is_word(uint32_t u) {
    return is_digit(u) || (u | 0x20) - 'a' < 26 || u == '_';
}

static bool class_has(const em_regex *re, const cls *k, uint32_t u) {
    bool in = false;
    uint8_t e = k->escapes;
    if (e && (((e & C_SPACE) && is_space(u)) || ((e & C_NSPACE) && !is_space(u)) ||
              ((e & C_DIGIT) && is_digit(u)) || ((e & C_NDIGIT) && !is_digit(u)) ||
              ((e & C_WORD) && is_word(u)) || ((e & C_NWORD) && !is_word(u))))
        in = true;
    const uint32_t *r = re->ranges + 2 * k->first;
    for (size_t j = 0; j < k->count && !in; j++)
        if (u >= r[2 * j] && u <= r[2 * j + 1]) in = true;
    return in != k->negate;
}

/* Runs from pc at sp; returns the end of the match, or -1. */
static long run(const em_regex *re, size_t pc, size_t sp, const uint32_t *s, size_t n,
                size_t origin, bool not_null, em_regex_stack *st) {
    size_t base = st->count;
    for (;;) {
        const inst *in = &re->code[pc];
        bool ok = true;
        switch (in->op) {
        case OP_CHAR:
            ok = sp < n && s[sp] == in->c;
            pc++, sp++;
            break;
        case OP_CLASS:
            ok = sp < n && class_has(re, &re->classes[in->c], s[sp]);
            pc++, sp++;
            break;
        case OP_ANY:
            ok = sp < n && s[sp] != '\n' && s[sp] != '\r' && s[sp] != 0x2028 && s[sp] != 0x2029;
            pc++, sp++;
            break;
        case OP_SPLIT:
            push(st, (size_t)((long)pc + in->y), sp);
            pc = (size_t)((long)pc + in->x);
            break;
        case OP_JMP:
            pc = (size_t)((long)pc + in->x);
            break;
        case OP_BOL:
            ok = sp == 0;
            pc++;
            break;
        case OP_EOL:
            ok = sp == n;
            pc++;
            break;
        case OP_WORDB:
        case OP_NWORDB: {
            bool before = sp > 0 && is_word(s[sp - 1]), after = sp < n && is_word(s[sp]);
            ok = (before != after) == (in->op == OP_WORDB);
            pc++;
            break;
        }
        case OP_LOOK:
        case OP_NLOOK: {
            long r = run(re, pc + 1, sp, s, n, sp, false, st);
            ok = (r >= 0) == (in->op == OP_LOOK);
            pc += (size_t)in->y;
            break;
        }
        case OP_MATCH:
            if (!(not_null && sp == origin)) {
                st->count = base;
                return (long)sp;
            }
            ok = false;
            break;
        }
        if (ok) continue;
        if (st->count == base) return -1;
        st->count--;
        pc = st->frames[st->count].pc;
        sp = st->frames[st->count].sp;
    }
}

void em_regex_split(const em_regex *re, const uint32_t *units, size_t n, size_t base,
                    em_regex_stack *st, em_piece_ends *out) {
    size_t pos = 0;
    bool after_empty = false;
    while (pos <= n) {
        long end = -1;
        size_t start = pos;
        for (; start <= n; start++) {
            end = run(re, 0, start, units, n, start, after_empty && start == pos, st);
            if (end >= 0) break;
        }
        if (end < 0) break;
        if (start > pos) em_piece_ends_push(out, base + start);
        em_piece_ends_push(out, base + (size_t)end);
        after_empty = (size_t)end == start;
        pos = (size_t)end;
    }
    if (n > 0) em_piece_ends_push(out, base + n);
}
