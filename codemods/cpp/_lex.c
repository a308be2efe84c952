/* The compiled half of codemods.cpp.functions: comments and literals masked, then the brace walk.
 *
 * codemod_mask(src, n, out) writes into `out` (n bytes) the source with every
 * comment, and the inside of every string and character literal, turned into
 * spaces, newlines kept, so every offset stays. It reads the lexemes left to
 * right, the first that starts at a byte winning, in this order:
 *
 *   block comment   / * ... * /, or to the end of the source when unclosed;
 *   line comment    // to the first newline not spliced by a backslash (\ or \ CR before it);
 *   raw string      R"delim( ... )delim", delim up to 16 bytes but no ( ) \ " or white space, or to the end;
 *   string          " then escape pairs or bytes but " \ newline, then a closing " if there is one;
 *   character       the same with '.
 *
 * A string or character lexeme that is at least two bytes long and ends with
 * its own quote keeps both quotes (`extern "C"` stays `extern " "`); any other
 * lexeme (comments, raw strings, an unclosed literal) is blanked whole.
 * The brace walk (codemod_walk, below) reads its output. Built by the
 * package build (hatch_build.py) with gcc; loaded with ctypes (native.py).
 */
#include <stddef.h>
#include <string.h>

static int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static void blank(const unsigned char *src, unsigned char *out, size_t start, size_t end) {
    for (size_t i = start; i < end; i++) out[i] = src[i] == '\n' ? '\n' : ' ';
}

/* The end of the lexeme starting at `i`, or 0 when none starts there. */
static size_t lexeme_end(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c == '/' && i + 1 < n && s[i + 1] == '*') {
        for (size_t j = i + 2; j + 1 < n; j++)
            if (s[j] == '*' && s[j + 1] == '/') return j + 2;
        return n;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
        size_t j = i + 2;
        while (j < n) {
            if (s[j] == '\\' && j + 1 < n && s[j + 1] == '\n') j += 2;
            else if (s[j] == '\\' && j + 2 < n && s[j + 1] == '\r' && s[j + 2] == '\n') j += 3;
            else if (s[j] != '\n') j += 1;
            else break;
        }
        return j;
    }
    if (c == 'R' && i + 1 < n && s[i + 1] == '"') {
        size_t d = i + 2, k = d;
        while (k < n && k - d < 16 && s[k] != '(' && s[k] != '"' && s[k] != '\\' && !is_space(s[k])) k++;
        if (k < n && s[k] == '(') {
            size_t len = k - d;
            for (size_t j = k + 1; j < n; j++)
                if (s[j] == ')' && j + 1 + len < n && memcmp(s + j + 1, s + d, len) == 0 && s[j + 1 + len] == '"')
                    return j + len + 2;
            return n;
        }
        return 0;
    }
    if (c == '"' || c == '\'') {
        size_t j = i + 1;
        while (j < n) {
            if (s[j] == '\\' && j + 1 < n) j += 2;
            else if (s[j] != c && s[j] != '\\' && s[j] != '\n') j += 1;
            else break;
        }
        if (j < n && s[j] == c) j += 1;
        return j;
    }
    return 0;
}

void codemod_mask(const unsigned char *src, size_t n, unsigned char *out) {
    memcpy(out, src, n);
    size_t i = 0;
    while (i < n) {
        unsigned char c = src[i];
        if (c != '/' && c != 'R' && c != '"' && c != '\'') {
            i++;
            continue;
        }
        size_t end = lexeme_end(src, n, i);
        if (end == 0) {
            i++;
            continue;
        }
        if ((c == '"' || c == '\'') && end - i >= 2 && src[end - 1] == c) blank(src, out, i + 1, end - 1);
        else blank(src, out, i, end);
        i = end;
    }
}

/* codemod_mask_comments(src, n, out): only comments blanked, every literal kept (the dispatch rule reads
 * `asm("trap;")` from its string). Closed lexemes only, the first that starts at a byte winning:
 *
 *   block comment   / * ... * /, closed (an unclosed one is not a comment: the bytes after it are read on);
 *   line comment    // to the newline (a backslash before it does not carry it on);
 *   string          " then escape pairs or bytes but " \ newline, then the closing " (kept; unclosed: not one);
 *   character       the same with '.
 */
void codemod_mask_comments(const unsigned char *src, size_t n, unsigned char *out) {
    memcpy(out, src, n);
    size_t i = 0, unclosed = n; /* no `* /` closes a comment opened at or after `unclosed` */
    while (i < n) {
        unsigned char c = src[i];
        if (c == '/' && i + 1 < n && src[i + 1] == '*') {
            size_t end = 0;
            for (size_t j = i + 2; i < unclosed && j + 1 < n; j++)
                if (src[j] == '*' && src[j + 1] == '/') {
                    end = j + 2;
                    break;
                }
            if (end) {
                blank(src, out, i, end);
                i = end;
            } else {
                unclosed = i < unclosed ? i : unclosed;
                i++;
            }
        } else if (c == '/' && i + 1 < n && src[i + 1] == '/') {
            const unsigned char *nl = memchr(src + i, '\n', n - i);
            size_t end = nl ? (size_t)(nl - src) : n;
            blank(src, out, i, end);
            i = end;
        } else if (c == '"' || c == '\'') {
            size_t j = i + 1;
            while (j < n) {
                if (src[j] == '\\' && j + 1 < n) j += 2;
                else if (src[j] != c && src[j] != '\\' && src[j] != '\n') j += 1;
                else break;
            }
            i = j < n && src[j] == c ? j + 1 : i + 1;
        } else {
            i++;
        }
    }
}

/* ------------------------------------------------------------------ the brace walk
 *
 * codemod_walk reads the masked source (codemod_mask's output) from the start,
 * as functions.py describes: the braces, and where declarations stand also
 * `(`, `)` and `;`, and the directive lines (a `#` first on its line). What a
 * `{` at a scope or class level opens, and whether a `{` in a body opens a
 * local class, the caller answers (classify, local_class: the head's text is
 * read with regular expressions in functions.py); the walk keeps the frames,
 * the #if states (an #if whose branches open or close braces differently is
 * read as its first branch) and the heads, names each offset by the innermost
 * function around it (names: the name number classify gave, 0 for none), and
 * reports each function body when it closes (define).
 */
#include <stdlib.h>

enum { SCOPE = 0, CLASS = 1, FUNCTION = 2, BLOCK = 3 };

typedef long long i64;
typedef i64 (*classify_fn)(i64 head, i64 brace); /* kind | name << 2 */
typedef i64 (*local_class_fn)(i64 brace);       /* 1: the `{` opens a class */
typedef void (*define_fn)(i64 name, i64 start, i64 body, i64 end);

typedef struct {
    int kind;
    i64 function, parens, head, head_id, name, start, body;
} Frame;

/* The frames form a tree kept whole (each node points to the one outside it), so the stack an #if saves is
 * one index, as Python's tuples shared it: ten thousand nested #if over nested braces cost no copies. */
typedef struct {
    Frame f;
    size_t parent, depth;
} Node;

typedef struct {
    size_t top;
    i64 parens, head, head_id;
} State;

typedef struct {
    State at_if, first;
    int has_first;
} Cond;

typedef struct {
    const unsigned char *code;
    size_t n;
    Node *nodes;
    size_t count, cap, top;
    i64 parens, head, head_id, heads;
    Cond *conds;
    size_t nconds, condcap;
    int opened_set;
    Frame opened;
    classify_fn classify;
    local_class_fn local_class;
    define_fn define;
} Walk;

static const Frame *top_frame(const Walk *w) { return &w->nodes[w->top].f; }

/* The array `items` (`*cap` items of `size` bytes, `count` of them used) with room for one more: doubled when
 * full (`first` to start with), maybe moved. NULL when out of memory (`items` is then left as it was). */
static void *room_for_one(void *items, size_t *cap, size_t count, size_t size, size_t first) {
    if (count < *cap) return items;
    size_t grown_cap = *cap ? *cap * 2 : first;
    void *grown = realloc(items, grown_cap * size);
    if (grown) *cap = grown_cap;
    return grown;
}

static int push_frame(Walk *w, Frame f) {
    Node *nodes = room_for_one(w->nodes, &w->cap, w->count, sizeof(Node), 64);
    if (!nodes) return -1;
    w->nodes = nodes;
    Node node = {f, w->top, w->count ? w->nodes[w->top].depth + 1 : 1};
    w->nodes[w->count] = node;
    w->top = w->count++;
    return 0;
}

static void new_head(Walk *w, i64 at) {
    w->head = at;
    w->heads += 1;
    w->head_id = w->heads;
}

static int at_scope(const Walk *w) { return top_frame(w)->kind <= CLASS; }

static void save(const Walk *w, State *s) {
    s->top = w->top;
    s->parens = w->parens;
    s->head = w->head;
    s->head_id = w->head_id;
}

static void restore(Walk *w, const State *s) {
    w->top = s->top;
    w->parens = s->parens;
    w->head = s->head;
    w->head_id = s->head_id;
}

static int contains_word(const unsigned char *s, size_t start, size_t end, const char *word) {
    size_t len = strlen(word);
    for (size_t i = start; i + len <= end; i++)
        if (memcmp(s + i, word, len) == 0) return 1;
    return 0;
}

/* Whether a `{` in a body may open a local class: only a head naming class, struct or union is asked about. */
static int local_class(Walk *w, size_t brace) {
    size_t start = brace;
    while (start > 0) {
        unsigned char c = w->code[start - 1];
        if (c == ';' || c == '{' || c == '}') break;
        start--;
    }
    if (!contains_word(w->code, start, brace, "class") && !contains_word(w->code, start, brace, "struct") &&
        !contains_word(w->code, start, brace, "union"))
        return 0;
    return w->local_class((i64)brace) == 1;
}

static int open_brace(Walk *w, size_t at) {
    Frame outer = *top_frame(w);
    int kind;
    i64 name = 0;
    if (outer.kind <= CLASS && w->parens == 0) {
        i64 answer = w->classify(w->head, (i64)at);
        if (answer < 0) answer = BLOCK; /* the callback failed: the caller raises what it raised */
        kind = (int)(answer & 3);
        name = answer >> 2;
    } else if (outer.kind == FUNCTION || outer.kind == BLOCK) {
        kind = local_class(w, at) ? CLASS : BLOCK;
    } else {
        kind = BLOCK;
    }
    Frame f = {kind, kind == FUNCTION ? name : outer.function, w->parens, w->head, w->head_id, name, w->head, (i64)at};
    if (push_frame(w, f) < 0) return -1;
    w->parens = 0;
    new_head(w, (i64)at + 1);
    w->opened = f;
    w->opened_set = 1;
    return 0;
}

static void close_brace(Walk *w, size_t at) {
    if (w->nodes[w->top].depth == 1) return; /* a stray `}`: file scope stays */
    Frame f = w->nodes[w->top].f;
    w->top = w->nodes[w->top].parent;
    w->parens = f.parens;
    if (f.kind == FUNCTION) w->define(f.name, f.start, f.body, (i64)at + 1);
    if (f.kind == BLOCK && at_scope(w)) {
        w->head = f.head; /* `= {...}`, `a{x}` in an initializer list: the head goes on */
        w->head_id = f.head_id;
    } else {
        new_head(w, (i64)at + 1);
    }
}

static size_t spliced_end(const unsigned char *s, size_t n, size_t pos) {
    for (;;) {
        const unsigned char *nl = memchr(s + pos, '\n', n - pos);
        if (!nl) return n;
        size_t newline = (size_t)(nl - s);
        size_t end = newline; /* one past the byte before the newline */
        if (end > pos && s[end - 1] == '\r') end--;
        if (end > pos && s[end - 1] == '\\') {
            pos = newline + 1;
            continue;
        }
        return newline + 1;
    }
}

static int keyword_is(const unsigned char *k, size_t len, const char *word) {
    return len == strlen(word) && memcmp(k, word, len) == 0;
}

static int is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static i64 directive(Walk *w, size_t at) {
    const unsigned char *s = w->code;
    size_t i = at + 1;
    while (i < w->n && (s[i] == ' ' || s[i] == '\t')) i++;
    size_t k = i;
    while (k < w->n && is_word(s[k])) k++;
    const unsigned char *word = s + i;
    size_t len = k - i;
    size_t end = spliced_end(s, w->n, at);
    if (keyword_is(word, len, "if") || keyword_is(word, len, "ifdef") || keyword_is(word, len, "ifndef")) {
        Cond *conds = room_for_one(w->conds, &w->condcap, w->nconds, sizeof(Cond), 16);
        if (!conds) return -1;
        w->conds = conds;
        Cond *c = &w->conds[w->nconds];
        save(w, &c->at_if);
        c->has_first = 0;
        w->nconds++;
    } else if ((keyword_is(word, len, "elif") || keyword_is(word, len, "else") || keyword_is(word, len, "elifdef") ||
                keyword_is(word, len, "elifndef")) && w->nconds) {
        Cond *c = &w->conds[w->nconds - 1];
        if (!c->has_first) {
            save(w, &c->first);
            c->has_first = 1;
        }
        restore(w, &c->at_if);
    } else if (keyword_is(word, len, "endif") && w->nconds) {
        Cond *c = &w->conds[--w->nconds];
        if (c->has_first) restore(w, &c->first);
    }
    return (i64)end;
}

/* Take the event at `at`; the offset to search on from (-1: out of memory). */
static i64 step(Walk *w, size_t at) {
    switch (w->code[at]) {
        case '{': return open_brace(w, at) < 0 ? -1 : (i64)at + 1;
        case '}': close_brace(w, at); return (i64)at + 1;
        case ';': if (w->parens == 0) new_head(w, (i64)at + 1); return (i64)at + 1;
        case '(': w->parens += 1; return (i64)at + 1;
        case ')': if (w->parens > 0) w->parens -= 1; return (i64)at + 1;
        default: return directive(w, at);
    }
}

/* The next event at or after `pos`: a brace, `(`, `)` or `;` when `scope`, or a `#` first on its line; n if none. */
static size_t next_event(const unsigned char *s, size_t n, size_t pos, int scope) {
    int line_start = pos == 0 || s[pos - 1] == '\n';
    for (size_t i = pos; i < n; i++) {
        unsigned char c = s[i];
        if (c == '{' || c == '}') return i;
        if (scope && (c == '(' || c == ')' || c == ';')) return i;
        if (c == '#' && line_start) return i;
        if (c == '\n') line_start = 1;
        else if (c != ' ' && c != '\t') line_start = 0;
    }
    return n;
}

static int is_blank(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* The first byte of code at or after `head` (blanks and directive lines skipped), at most `limit`. */
static size_t first_code(const unsigned char *s, size_t n, size_t head, size_t limit) {
    size_t pos = head;
    while (pos < limit) {
        unsigned char c = s[pos];
        if (is_blank(c)) {
            pos++;
        } else if (c == '#') {
            size_t start = pos;
            while (start > 0 && s[start - 1] != '\n') start--;
            int only_blanks = 1;
            for (size_t j = start; j < pos; j++)
                if (s[j] != ' ' && s[j] != '\t') only_blanks = 0;
            if (!only_blanks) return pos;
            pos = spliced_end(s, n, pos);
        } else {
            return pos;
        }
    }
    return limit;
}

typedef struct {
    size_t index;
    i64 head_id;
} Pending;

/* Walk `code` (n bytes, masked) until `until`; offsets sorted ascending; names[i]: the name number of the
 * function around offsets[i] (0: none). 0 when done, -1 when out of memory (a callback's failure is the
 * caller's to raise: native.walk). */
int codemod_walk(const unsigned char *code, size_t n, const i64 *offsets, size_t noff, size_t until,
                 classify_fn classify, local_class_fn local_class_cb, define_fn define, i64 *names) {
    Walk w;
    memset(&w, 0, sizeof w);
    w.code = code;
    w.n = n;
    w.classify = classify;
    w.local_class = local_class_cb;
    w.define = define;
    int status = 0;
    Pending *pending = NULL;
    size_t npending = 0, pendcap = 0;
    Frame file = {SCOPE, 0, 0, 0, 0, 0, 0, 0};
    if (push_frame(&w, file) < 0) return -1;
    size_t k = 0, pos = 0;
    for (;;) {
        int scope = at_scope(&w);
        size_t at = next_event(code, n, pos, scope);
        while (k < noff && offsets[k] < (i64)at) { /* the state before the event */
            names[k] = top_frame(&w)->function;
            if (scope) {
                Pending *grown = room_for_one(pending, &pendcap, npending, sizeof(Pending), 16);
                if (!grown) {
                    status = -1;
                    goto done;
                }
                pending = grown;
                pending[npending].index = k;
                pending[npending].head_id = w.head_id;
                npending++;
            }
            k++;
        }
        if (at >= n || (at >= until && npending == 0)) break;
        i64 head_id = w.head_id, head = w.head;
        w.opened_set = 0;
        i64 next = step(&w, at);
        if (next < 0) { status = -1; goto done; }
        pos = (size_t)next;
        if (npending && w.head_id != head_id) {
            int ended = !w.opened_set || w.opened.kind != BLOCK; /* a `;`, a `}`, or the head's own `{` */
            if (w.opened_set && w.opened.kind == FUNCTION) {
                size_t first = first_code(code, n, (size_t)head, at);
                for (size_t p = 0; p < npending; p++)
                    if (pending[p].head_id == head_id && offsets[pending[p].index] > (i64)first)
                        names[pending[p].index] = w.opened.name;
            }
            size_t kept = 0;
            for (size_t p = 0; p < npending; p++) {
                i64 h = pending[p].head_id;
                int live = h == w.head_id;
                for (size_t f = w.top; !live; f = w.nodes[f].parent) {
                    live = w.nodes[f].f.head_id == h;
                    if (w.nodes[f].depth == 1) break;
                }
                if (live && !(ended && h == head_id)) pending[kept++] = pending[p];
            }
            npending = kept;
        }
    }
done:
    free(pending);
    free(w.conds);
    free(w.nodes);
    return status;
}
