/*
 * xml_reader.c - the strict XML subset reader (see xml_reader.h).
 *
 * A recursive-descent reader over a length-delimited buffer: it never reads
 * past len, never trusts a NUL, and stops at the first problem with a message
 * that names the line.  Depth is bounded, so hostile input cannot exhaust the
 * stack.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xml_reader.h"

typedef struct reader {
    const char *s;
    size_t len, pos;
    int line;
    cs_error *err;
} reader;

static int fail(reader *r, const char *what)
{
    return cs_error_set(r->err, CS_EINVAL, "xml", "line %d: %s", r->line, what);
}

static int peek(const reader *r, size_t ahead)
{
    return r->pos + ahead < r->len ? (unsigned char)r->s[r->pos + ahead] : -1;
}

static void advance(reader *r, size_t n)
{
    for (size_t k = 0; k < n && r->pos < r->len; k++)
        if (r->s[r->pos++] == '\n')
            r->line++;
}

static bool starts(const reader *r, const char *lit)
{
    size_t n = strlen(lit);
    return r->pos + n <= r->len && memcmp(r->s + r->pos, lit, n) == 0;
}

static void skip_space(reader *r)
{
    while (r->pos < r->len && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' ||
                               r->s[r->pos] == '\n' || r->s[r->pos] == '\r'))
        advance(r, 1);
}

/* Skips whitespace and comments; fails on an unterminated comment. */
static int skip_misc(reader *r)
{
    for (;;) {
        skip_space(r);
        if (!starts(r, "<!--"))
            return CS_OK;
        int line = r->line;
        advance(r, 4);
        while (r->pos < r->len && !starts(r, "-->"))
            advance(r, 1);
        if (r->pos >= r->len) {
            r->line = line;
            return fail(r, "unterminated comment");
        }
        advance(r, 3);
    }
}

static bool name_start(int c) { return c >= 0 && (isalpha(c) || c == '_' || c == ':'); }
static bool name_char(int c) { return c >= 0 && (isalnum(c) || c == '_' || c == ':' || c == '-' || c == '.'); }

static int read_name(reader *r, char **out)
{
    if (!name_start(peek(r, 0)))
        return fail(r, "expected a name");
    size_t b = r->pos;
    while (name_char(peek(r, 0)))
        advance(r, 1);
    size_t n = r->pos - b;
    if (n > 256)
        return fail(r, "name longer than 256 characters");
    *out = malloc(n + 1);
    if (!*out)
        return cs_error_set(r->err, CS_ENOMEM, "", "out of memory");
    memcpy(*out, r->s + b, n);
    (*out)[n] = 0;
    return CS_OK;
}

static int read_value(reader *r, char **out)
{
    int q = peek(r, 0);
    if (q != '"' && q != '\'')
        return fail(r, "attribute value must be in quotes");
    advance(r, 1);
    size_t b = r->pos;
    while (r->pos < r->len && r->s[r->pos] != q) {
        if (r->s[r->pos] == '<')
            return fail(r, "'<' inside an attribute value");
        advance(r, 1);
    }
    if (r->pos >= r->len)
        return fail(r, "unterminated attribute value");
    size_t n = r->pos - b;
    advance(r, 1);
    char *v = malloc(n + 1);
    if (!v)
        return cs_error_set(r->err, CS_ENOMEM, "", "out of memory");
    size_t o = 0;
    for (size_t k = 0; k < n;) {
        const char *c = r->s + b + k;
        if (*c != '&') {
            v[o++] = *c;
            k++;
            continue;
        }
        static const struct { const char *ent; char ch; } ents[] = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        bool done = false;
        for (size_t e = 0; e < sizeof ents / sizeof ents[0] && !done; e++) {
            size_t el = strlen(ents[e].ent);
            if (k + el <= n && memcmp(c, ents[e].ent, el) == 0) {
                v[o++] = ents[e].ch;
                k += el;
                done = true;
            }
        }
        if (!done && k + 3 < n && c[1] == '#') {
            size_t m = k + 2;
            long cp = 0;
            bool hex = r->s[b + m] == 'x';
            if (hex)
                m++;
            size_t digits = 0;
            while (m < n && r->s[b + m] != ';' && digits < 8) {
                int d = (unsigned char)r->s[b + m];
                int val = isdigit(d) ? d - '0' : (hex && isxdigit(d)) ? (tolower(d) - 'a' + 10) : -1;
                if (val < 0)
                    break;
                cp = cp * (hex ? 16 : 10) + val;
                m++;
                digits++;
            }
            if (m < n && r->s[b + m] == ';' && digits > 0 && cp > 0 && cp < 128) {
                v[o++] = (char)cp;
                k = m + 1;
                done = true;
            }
        }
        if (!done) {
            free(v);
            return fail(r, "unknown entity in attribute value");
        }
    }
    v[o] = 0;
    *out = v;
    return CS_OK;
}

void xmlr_free(xmlr_node *n)
{
    if (!n)
        return;
    for (int k = 0; k < n->nattrs; k++) {
        free(n->attrs[k].name);
        free(n->attrs[k].value);
    }
    free(n->attrs);
    for (int k = 0; k < n->nchildren; k++)
        xmlr_free(n->children[k]);
    free(n->children);
    free(n->name);
    free(n);
}

const char *xmlr_attr_get(const xmlr_node *n, const char *name)
{
    for (int k = 0; k < n->nattrs; k++)
        if (strcmp(n->attrs[k].name, name) == 0)
            return n->attrs[k].value;
    return NULL;
}

static int read_element(reader *r, int depth, xmlr_node **out);

static int read_children(reader *r, int depth, xmlr_node *n)
{
    char msg[400];
    for (;;) {
        int rc = skip_misc(r);
        if (rc != CS_OK)
            return rc;
        if (r->pos >= r->len) {
            snprintf(msg, sizeof msg, "element <%.200s> opened on line %d is not closed", n->name,
                     n->line);
            return fail(r, msg);
        }
        if (peek(r, 0) != '<')
            return fail(r, "unexpected text between elements");
        if (peek(r, 1) == '/') {
            advance(r, 2);
            char *name;
            if ((rc = read_name(r, &name)) != CS_OK)
                return rc;
            bool same = strcmp(name, n->name) == 0;
            if (!same) {
                snprintf(msg, sizeof msg, "closing tag </%.100s> does not match <%.100s> (line %d)",
                         name, n->name, n->line);
                free(name);
                return fail(r, msg);
            }
            free(name);
            skip_space(r);
            if (peek(r, 0) != '>')
                return fail(r, "expected '>' after the closing tag name");
            advance(r, 1);
            return CS_OK;
        }
        if (peek(r, 1) == '!' || peek(r, 1) == '?')
            return fail(r, "declarations, CDATA and processing instructions are not accepted here");
        xmlr_node *child;
        if ((rc = read_element(r, depth + 1, &child)) != CS_OK)
            return rc;
        if (n->nchildren == n->capchildren) {
            int cap = n->capchildren ? n->capchildren * 2 : 8;
            xmlr_node **c = realloc(n->children, (size_t)cap * sizeof *c);
            if (!c) {
                xmlr_free(child);
                return cs_error_set(r->err, CS_ENOMEM, "", "out of memory");
            }
            n->children = c;
            n->capchildren = cap;
        }
        n->children[n->nchildren++] = child;
    }
}

static int read_element(reader *r, int depth, xmlr_node **out)
{
    *out = NULL;
    if (depth > XMLR_MAX_DEPTH)
        return fail(r, "elements nested too deeply");
    if (peek(r, 0) != '<')
        return fail(r, "expected '<'");
    xmlr_node *n = calloc(1, sizeof *n);
    if (!n)
        return cs_error_set(r->err, CS_ENOMEM, "", "out of memory");
    n->line = r->line;
    advance(r, 1);
    int rc = read_name(r, &n->name);
    int capattrs = 0;
    while (rc == CS_OK) {
        size_t before = r->pos;
        skip_space(r);
        int c = peek(r, 0);
        if (c == '/' || c == '>')
            break;
        if (c < 0) {
            rc = fail(r, "unexpected end of input inside a tag");
            break;
        }
        if (r->pos == before) {
            rc = fail(r, "expected whitespace before an attribute");
            break;
        }
        char *name = NULL, *value = NULL;
        if ((rc = read_name(r, &name)) != CS_OK)
            break;
        skip_space(r);
        if (peek(r, 0) != '=') {
            free(name);
            rc = fail(r, "expected '=' after an attribute name");
            break;
        }
        advance(r, 1);
        skip_space(r);
        if ((rc = read_value(r, &value)) != CS_OK) {
            free(name);
            break;
        }
        if (xmlr_attr_get(n, name)) {
            char msg[300];
            snprintf(msg, sizeof msg, "duplicate attribute \"%.200s\"", name);
            free(name);
            free(value);
            rc = fail(r, msg);
            break;
        }
        if (n->nattrs == capattrs) {
            capattrs = capattrs ? capattrs * 2 : 8;
            xmlr_attr *a = realloc(n->attrs, (size_t)capattrs * sizeof *a);
            if (!a) {
                free(name);
                free(value);
                rc = cs_error_set(r->err, CS_ENOMEM, "", "out of memory");
                break;
            }
            n->attrs = a;
        }
        n->attrs[n->nattrs++] = (xmlr_attr){name, value};
    }
    if (rc == CS_OK) {
        if (peek(r, 0) == '/') {
            advance(r, 1);
            if (peek(r, 0) != '>')
                rc = fail(r, "expected '>' after '/'");
            else
                advance(r, 1);
        } else {
            advance(r, 1); /* '>' */
            rc = read_children(r, depth, n);
        }
    }
    if (rc != CS_OK) {
        xmlr_free(n);
        return rc;
    }
    *out = n;
    return CS_OK;
}

int xmlr_parse(const char *text, size_t len, xmlr_node **root, cs_error *err)
{
    reader r = {text, len, 0, 1, err};
    *root = NULL;
    if (!text)
        return cs_error_set(err, CS_EINVAL, "xml", "no document");
    if (starts(&r, "\xEF\xBB\xBF"))
        advance(&r, 3);
    skip_space(&r);
    if (starts(&r, "<?xml")) {
        while (r.pos < r.len && !starts(&r, "?>"))
            advance(&r, 1);
        if (r.pos >= r.len)
            return fail(&r, "unterminated XML declaration");
        advance(&r, 2);
    }
    int rc = skip_misc(&r);
    if (rc != CS_OK)
        return rc;
    if (r.pos >= r.len)
        return fail(&r, "empty document: no root element");
    if (peek(&r, 0) != '<' || peek(&r, 1) == '/' || peek(&r, 1) == '!' || peek(&r, 1) == '?')
        return fail(&r, "expected the root element");
    xmlr_node *n;
    if ((rc = read_element(&r, 0, &n)) != CS_OK)
        return rc;
    if ((rc = skip_misc(&r)) != CS_OK) {
        xmlr_free(n);
        return rc;
    }
    if (r.pos < r.len) {
        xmlr_free(n);
        return fail(&r, "content after the root element");
    }
    *root = n;
    return CS_OK;
}
