/* The compiled half of codemods.cpp.functions: comments and literals masked, one pass over the bytes.
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
 * Nothing else here: functions.py reads the braces and names the functions.
 * Built by the package build (hatch_build.py) with gcc; loaded with ctypes.
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
