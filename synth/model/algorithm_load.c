/*
 * algorithm_load.c - algorithm_doc_load_file: an Algorithm or a Result read
 * from a file without its DOM (see algorithm.h).
 *
 * Why: jansson keeps every send as an object with a hash table and five
 * values, about 0.8 KB, so a 1M-send result (the hook's 128 x DGX-1
 * allgather, 117 MB of text) is 1.7 GB as a DOM, where its columns
 * (algorithm.h) take a few MB.  `collsynth codegen` peaked at 1.86 GB on it,
 * the DOM being nearly all of it.
 *
 * How: two passes over the file.  The first copies the document into a
 * skeleton, every "sends" array of an algorithm (the document's own, or
 * frontier[i]'s in a result) written as "[]" and remembered as a file
 * offset and an element count; the skeleton is small and is parsed by
 * jansson as before.  The algorithms are then built from the skeleton
 * (algorithm_json_internal.h: the same validation as algorithm_from_json)
 * and each one's sends are read back from its offset, SEND_BATCH elements
 * at a time parsed by jansson as one small array, so every send goes
 * through the same checks as in a DOM.  Objects are unordered, so the
 * sends cannot be read in the first pass: they may come before "ranks".
 *
 * The scanner only follows structure (strings, brackets, keys); syntax is
 * jansson's to judge, on the skeleton and on each batch.  The skeleton keeps
 * the skipped arrays' newlines, so a line number jansson reports on it is
 * the file's; one in a batch is offset by the batch's first line.  Keys are
 * matched as written ("sends", "frontier"): one spelled with escapes is not
 * skipped, its array stays in the skeleton and is read from the DOM.  With
 * duplicate keys the last one counts, as in jansson.
 */
#include "algorithm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "algorithm_json_internal.h"

#define READ_BUF (1 << 20)
#define SEND_BATCH 4096
#define MAX_ROLES 64   /* deeper levels are never an algorithm's */

typedef struct reader {
    FILE *f;
    unsigned char *buf;
    size_t len, pos;
    off_t base;        /* file offset of buf[0] */
    long line;         /* 1-based line of the next character */
    bool failed;       /* a read error (not the end of the file) */
} reader;

static bool rd_fill(reader *r)
{
    r->base += (off_t)r->len;
    r->pos = 0;
    r->len = fread(r->buf, 1, READ_BUF, r->f);
    if (r->len == 0 && ferror(r->f))
        r->failed = true;
    return r->len > 0;
}

static inline int rd_get(reader *r)
{
    if (r->pos == r->len && !rd_fill(r))
        return EOF;
    int c = r->buf[r->pos++];
    if (c == '\n')
        r->line++;
    return c;
}

static int rd_seek(reader *r, off_t off, long line)
{
    if (fseeko(r->f, off, SEEK_SET) != 0)
        return -1;
    r->base = off;
    r->len = r->pos = 0;
    r->line = line;
    return 0;
}

/* Where the elements of an algorithm's "sends" are in the file. */
typedef struct sends_range {
    int index;        /* -1: the document's own; i: frontier[i] */
    off_t start;      /* offset just after '[' */
    long line;        /* line of that offset */
    long count;       /* elements (a hint: the second pass counts again) */
} sends_range;

typedef struct loader {
    const char *path;
    reader rd;
    cs_buf skeleton;
    sends_range *ranges;
    int nranges, cap;
    /* Skipped arrays no algorithm reads: those a duplicate key or a later
     * "frontier" replaced.  jansson judges the syntax of the whole file, so
     * these are parsed too (check_unread), their elements thrown away. */
    sends_range *unread;
    int nunread, unread_cap;
    json_error_t *jerr;
} loader;

static bool add_unread(loader *l, const sends_range *r)
{
    if (l->nunread == l->unread_cap) {
        int cap = l->unread_cap ? 2 * l->unread_cap : 8;
        sends_range *n = realloc(l->unread, (size_t)cap * sizeof *n);
        if (!n)
            return false;
        l->unread = n;
        l->unread_cap = cap;
    }
    l->unread[l->nunread++] = *r;
    return true;
}

static int add_range(loader *l, int index, off_t start, long line)
{
    for (int i = 0; i < l->nranges; i++)
        if (l->ranges[i].index == index) {   /* a duplicate key: the last one counts */
            if (!add_unread(l, &l->ranges[i]))
                return -1;
            l->ranges[i].start = start;
            l->ranges[i].line = line;
            return i;
        }
    if (l->nranges == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        sends_range *n = realloc(l->ranges, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        l->ranges = n;
        l->cap = cap;
    }
    l->ranges[l->nranges] = (sends_range){index, start, line, 0};
    return l->nranges++;
}

static const sends_range *find_range(const loader *l, int index)
{
    for (int i = 0; i < l->nranges; i++)
        if (l->ranges[i].index == index)
            return &l->ranges[i];
    return NULL;
}

static int syntax_error(loader *l, long line, const char *msg, cs_error *err)
{
    if (l->jerr) {
        memset(l->jerr, 0, sizeof *l->jerr);
        l->jerr->line = (int)line;
        snprintf(l->jerr->text, sizeof l->jerr->text, "%s", msg);
    }
    return cs_error_set(err, CS_EINVAL, "", "%s: line %ld: %s", l->path, line, msg);
}

static int read_error(loader *l, cs_error *err)
{
    return cs_error_set(err, CS_EIO, "", "error reading %s: %s", l->path, strerror(errno));
}

/* Past the '[' of an array: reads to its closing ']', counting the
 * elements and copying only the newlines to out (NULL: nothing).  False at
 * the end of the file. */
static bool skip_array(reader *r, cs_buf *out, long *count, bool *oom)
{
    int depth = 0;
    long commas = 0;
    bool any = false, in_str = false;
    for (;;) {
        int c = rd_get(r);
        if (c == EOF)
            return false;
        if (c == '\n' && out && !cs_buf_putc(out, '\n')) {
            *oom = true;
            return false;
        }
        if (in_str) {
            if (c == '\\') {
                int d = rd_get(r);
                if (d == EOF)
                    return false;
                if (d == '\n' && out && !cs_buf_putc(out, '\n')) {
                    *oom = true;
                    return false;
                }
            } else if (c == '"') {
                in_str = false;
            }
            continue;
        }
        switch (c) {
        case '"':
            in_str = true;
            any = true;
            break;
        case '[':
        case '{':
            depth++;
            any = true;
            break;
        case ']':
        case '}':
            if (depth-- == 0) {
                *count = any ? commas + 1 : 0;
                return true;
            }
            break;
        case ',':
            if (depth == 0)
                commas++;
            any = true;    /* "[,]" is not empty: jansson refuses it */
            break;
        case ' ':
        case '\t':
        case '\r':
        case '\n':
            break;
        default:
            any = true;
        }
    }
}

enum role { ROLE_OTHER, ROLE_TOP, ROLE_FRONTIER, ROLE_ALG };
enum key { KEY_OTHER, KEY_SENDS, KEY_FRONTIER };

/* First pass: the skeleton and the ranges. */
static int scan(loader *l, cs_error *err)
{
    reader *r = &l->rd;
    cs_buf *sk = &l->skeleton;
    unsigned char role[MAX_ROLES], key[MAX_ROLES], expect_key[MAX_ROLES], is_obj[MAX_ROLES];
    int elems[MAX_ROLES];          /* commas seen, for the frontier array */
    int depth = 0;
    char keybuf[16];
    int keylen = -1;               /* >= 0 while reading a key */
    bool in_str = false;
    for (;;) {
        int c = rd_get(r);
        if (c == EOF)
            break;
        if (!cs_buf_putc(sk, (char)c))
            goto oom;
        if (in_str) {
            if (c == '\\') {
                int d = rd_get(r);
                if (d == EOF)
                    break;
                if (!cs_buf_putc(sk, (char)d))
                    goto oom;
                keylen = -1;       /* an escaped key is not one of ours */
            } else if (c == '"') {
                in_str = false;
                if (keylen >= 0 && depth > 0 && depth <= MAX_ROLES) {
                    key[depth - 1] = keylen == 5 && memcmp(keybuf, "sends", 5) == 0
                                         ? KEY_SENDS
                                     : keylen == 8 && memcmp(keybuf, "frontier", 8) == 0
                                         ? KEY_FRONTIER
                                         : KEY_OTHER;
                }
                keylen = -1;
            } else if (keylen >= 0) {
                if (keylen < (int)sizeof keybuf)
                    keybuf[keylen++] = (char)c;
                else
                    keylen = -1;
            }
            continue;
        }
        bool known = depth > 0 && depth <= MAX_ROLES;
        int top = depth - 1;
        switch (c) {
        case '"':
            in_str = true;
            if (known && expect_key[top]) {
                keylen = 0;
                key[top] = KEY_OTHER;
            }
            break;
        case ':':
            if (known)
                expect_key[top] = 0;
            break;
        case ',':
            if (known) {
                expect_key[top] = is_obj[top];
                elems[top]++;
            }
            break;
        case '{':
        case '[': {
            enum role nr = ROLE_OTHER;
            if (depth == 0 && c == '{') {
                nr = ROLE_TOP;
            } else if (known && !expect_key[top]) {
                if (role[top] == ROLE_TOP && key[top] == KEY_FRONTIER && c == '[') {
                    nr = ROLE_FRONTIER;
                    int kept = 0;   /* a later "frontier" replaces an earlier one */
                    for (int i = 0; i < l->nranges; i++)
                        if (l->ranges[i].index < 0)
                            l->ranges[kept++] = l->ranges[i];
                        else if (!add_unread(l, &l->ranges[i]))
                            goto oom;
                    l->nranges = kept;
                } else if (role[top] == ROLE_FRONTIER && c == '{') {
                    nr = ROLE_ALG;
                } else if ((role[top] == ROLE_TOP || role[top] == ROLE_ALG) &&
                           key[top] == KEY_SENDS && c == '[') {
                    int index = role[top] == ROLE_TOP ? -1 : elems[top - 1];
                    int k = add_range(l, index, r->base + (off_t)r->pos, r->line);
                    if (k < 0)
                        goto oom;
                    bool oom = false;
                    long count = 0;
                    if (!skip_array(r, sk, &count, &oom)) {
                        if (oom)
                            goto oom;
                        if (r->failed)
                            return read_error(l, err);
                        return syntax_error(l, l->ranges[k].line,
                                            "the file ends inside this sends array", err);
                    }
                    l->ranges[k].count = count;
                    if (!cs_buf_putc(sk, ']'))
                        goto oom;
                    key[top] = KEY_OTHER;
                    break;
                }
            }
            depth++;
            if (depth <= MAX_ROLES) {
                role[depth - 1] = (unsigned char)nr;
                key[depth - 1] = KEY_OTHER;
                expect_key[depth - 1] = c == '{';
                is_obj[depth - 1] = c == '{';
                elems[depth - 1] = 0;
            }
            break;
        }
        case ']':
        case '}':
            if (depth > 0)
                depth--;
            break;
        default:
            break;
        }
    }
    if (r->failed)
        return read_error(l, err);
    return CS_OK;
oom:
    return cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", l->path);
}

enum { BATCH_OK, BATCH_EMPTY, BATCH_EOF, BATCH_OOM };

/* Copies the next elements of a sends array, up to SEND_BATCH of them or to
 * the array's closing ']' (then *done), into out as one JSON array text.
 * BATCH_EMPTY: nothing but blanks before the ']'. */
static int read_batch(reader *r, cs_buf *out, bool *done)
{
    cs_buf_reset(out);
    if (!cs_buf_putc(out, '['))
        return BATCH_OOM;
    long n = 0;
    int depth = 0;
    bool in_str = false, any = false;
    for (;;) {
        int c = rd_get(r);
        if (c == EOF)
            return BATCH_EOF;
        if (in_str) {
            if (!cs_buf_putc(out, (char)c))
                return BATCH_OOM;
            if (c == '\\') {
                int d = rd_get(r);
                if (d == EOF)
                    return BATCH_EOF;
                if (!cs_buf_putc(out, (char)d))
                    return BATCH_OOM;
            } else if (c == '"') {
                in_str = false;
            }
            continue;
        }
        if (depth == 0 && (c == ']' || c == ',')) {
            if (c == ']') {
                *done = true;
                break;
            }
            if (++n == SEND_BATCH)
                break;
        }
        if (c == '"')
            in_str = true;
        else if (c == '[' || c == '{')
            depth++;
        else if (c == ']' || c == '}')
            depth--;
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
            any = true;
        if (!cs_buf_putc(out, (char)c))
            return BATCH_OOM;
    }
    if (!cs_buf_putc(out, ']'))
        return BATCH_OOM;
    return any ? BATCH_OK : BATCH_EMPTY;
}

/* Second pass, per algorithm: its sends, a batch at a time. */
static int sends_from_file(void *ctx, int index, const json_t *doc, cs_algorithm *a,
                           cs_error *err)
{
    loader *l = ctx;
    const sends_range *range = find_range(l, index);
    if (!range) {
        /* not skipped (a key with escapes): the skeleton's DOM holds them */
        const json_t *js = json_object_get(doc, "sends");
        size_t n = json_array_size(js);
        if (algorithm_reserve_sends(a, (long)n) != CS_OK)
            return cs_error_set(err, CS_ENOMEM, "sends", "out of memory for %zu sends", n);
        for (size_t i = 0; i < n; i++) {
            int rc = algorithm_send_from_json(a, json_array_get(js, i), (long)i, err);
            if (rc != CS_OK)
                return rc;
        }
        return CS_OK;
    }
    if (range->count == 0)
        return CS_OK;
    if (algorithm_reserve_sends(a, range->count) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "sends", "out of memory for %ld sends",
                            range->count);
    reader *r = &l->rd;
    if (rd_seek(r, range->start, range->line) != 0)
        return cs_error_set(err, CS_EIO, "", "cannot seek in %s: %s", l->path, strerror(errno));
    cs_buf batch = {0};
    long next = 0;      /* index of the batch's first send */
    int rc = CS_OK;
    bool done = false;
    while (!done && rc == CS_OK) {
        long first_line = r->line;
        int got = read_batch(r, &batch, &done);
        if (got == BATCH_OOM) {
            rc = cs_error_set(err, CS_ENOMEM, "sends", "out of memory");
        } else if (got == BATCH_EOF) {
            rc = r->failed ? read_error(l, err)
                           : syntax_error(l, range->line, "the file ends inside this sends array "
                                          "(did it change while it was read?)", err);
        } else if (got == BATCH_EMPTY && next > 0) {
            rc = syntax_error(l, first_line, "',' before ']' in a sends array", err);
        } else {
            json_error_t jerr;
            json_t *arr = json_loadb(batch.s, batch.len, 0, &jerr);
            if (!arr) {
                rc = syntax_error(l, first_line + jerr.line - 1, jerr.text, err);
                break;
            }
            size_t n = json_array_size(arr);
            for (size_t i = 0; i < n && rc == CS_OK; i++)
                rc = algorithm_send_from_json(a, json_array_get(arr, i), next + (long)i, err);
            next += (long)n;
            json_decref(arr);
        }
    }
    cs_buf_free(&batch);
    return rc;
}

static int cmp_range_start(const void *a, const void *b)
{
    const sends_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The syntax of the skipped arrays nothing reads (l->unread, in file order,
 * so the first error is the one jansson would name): each is parsed a batch
 * at a time like the sends, and thrown away. */
static int check_unread(loader *l, cs_error *err)
{
    qsort(l->unread, (size_t)l->nunread, sizeof *l->unread, cmp_range_start);
    reader *r = &l->rd;
    cs_buf batch = {0};
    int rc = CS_OK;
    for (int i = 0; i < l->nunread && rc == CS_OK; i++) {
        const sends_range *range = &l->unread[i];
        if (rd_seek(r, range->start, range->line) != 0) {
            rc = cs_error_set(err, CS_EIO, "", "cannot seek in %s: %s", l->path,
                              strerror(errno));
            break;
        }
        bool done = false;
        long elements = 0;
        while (!done && rc == CS_OK) {
            long first_line = r->line;
            int got = read_batch(r, &batch, &done);
            if (got == BATCH_OOM) {
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", l->path);
            } else if (got == BATCH_EOF) {
                rc = r->failed ? read_error(l, err)
                               : syntax_error(l, range->line, "the file ends inside this "
                                              "array (did it change while it was read?)", err);
            } else if (got == BATCH_EMPTY && elements > 0) {
                rc = syntax_error(l, first_line, "',' before ']' in an array", err);
            } else if (got == BATCH_OK) {
                json_error_t je;
                json_t *arr = json_loadb(batch.s, batch.len, 0, &je);
                if (!arr) {
                    rc = syntax_error(l, first_line + je.line - 1, je.text, err);
                    break;
                }
                elements += (long)json_array_size(arr);
                json_decref(arr);
            }
        }
    }
    cs_buf_free(&batch);
    return rc;
}

int algorithm_doc_load_file(const char *path, cs_algorithm **alg, cs_result **res,
                            bool *is_result, json_error_t *jerr, cs_error *err)
{
    *alg = NULL;
    *res = NULL;
    if (is_result)
        *is_result = false;
    if (jerr)
        memset(jerr, 0, sizeof *jerr);
    loader l = {.path = path, .jerr = jerr};
    l.rd.line = 1;
    l.rd.f = fopen(path, "rb");
    if (!l.rd.f)
        return cs_error_set(err, CS_EIO, "", "cannot open %s: %s", path, strerror(errno));
    /* the second pass seeks back: a pipe is read into memory first */
    char *mem = NULL;
    if (fseeko(l.rd.f, 0, SEEK_SET) != 0) {
        cs_buf in = {0};
        for (size_t got = 1; got > 0 && cs_buf_reserve(&in, 1 << 16); in.len += got)
            got = fread(in.s + in.len, 1, in.cap - in.len - 1, l.rd.f);
        bool failed = ferror(l.rd.f);
        fclose(l.rd.f);
        l.rd.f = NULL;
        /* fmemopen refuses a size of 0: an empty file is one blank */
        if (!in.failed && in.len == 0)
            cs_buf_putc(&in, ' ');
        size_t len = 0;
        mem = cs_buf_take(&in, &len);
        if (!mem)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", path);
        if (failed) {
            free(mem);
            return cs_error_set(err, CS_EIO, "", "error reading %s", path);
        }
        l.rd.f = fmemopen(mem, len, "rb");
        if (!l.rd.f) {
            free(mem);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", path);
        }
    }
    int rc = CS_OK;
    json_t *doc = NULL;
    /* a leading UTF-8 byte-order mark (a Windows editor's) is dropped, as
     * cs_read_file drops it for the other JSON inputs: the scan starts past
     * it, and every offset stays the file's */
    char head[3];
    size_t bom = cs_utf8_bom_len(head, fread(head, 1, sizeof head, l.rd.f));
    if (fseeko(l.rd.f, (off_t)bom, SEEK_SET) != 0) {
        rc = cs_error_set(err, CS_EIO, "", "cannot seek in %s: %s", path, strerror(errno));
        goto out;
    }
    l.rd.base = (off_t)bom;
    l.rd.buf = malloc(READ_BUF);
    if (!l.rd.buf) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", path);
        goto out;
    }
    if ((rc = scan(&l, err)) != CS_OK)
        goto out;
    json_error_t je;
    doc = json_loadb(l.skeleton.s ? l.skeleton.s : "", l.skeleton.len, 0, &je);
    if (!doc) {
        rc = syntax_error(&l, je.line, je.text, err);
        goto out;
    }
    cs_buf_free(&l.skeleton);
    bool result = json_is_object(doc) && json_object_get(doc, "frontier");
    if (is_result)
        *is_result = result;
    /* a Result's own "sends" (not an algorithm's) is read by nothing either */
    for (int i = 0; result && i < l.nranges; i++)
        if (l.ranges[i].index < 0 && !add_unread(&l, &l.ranges[i])) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", path);
            goto out;
        }
    if (l.nunread && (rc = check_unread(&l, err)) != CS_OK)
        goto out;
    if (result)
        rc = result_from_json_with(doc, sends_from_file, &l, res, err);
    else
        rc = algorithm_from_json_with(doc, -1, sends_from_file, &l, alg, err);
out:
    json_decref(doc);
    cs_buf_free(&l.skeleton);
    free(l.ranges);
    free(l.unread);
    free(l.rd.buf);
    fclose(l.rd.f);
    free(mem);
    return rc;
}
