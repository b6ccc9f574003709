/*
 * result_writer.c - the result's JSON document, written a piece at a time
 * (see result_codec.h).
 *
 * The document without sends is small: it is laid out once, at open, as a
 * list of pieces, text and "the sends of algorithm i" alternately.  Reading
 * walks the pieces; a sends piece formats a batch of sends at a time from a
 * codec cursor or from an algorithm in memory.  Memory stays at one batch
 * plus one decoded frame, whatever the size of the result.
 *
 * Equivalence with json_dumps(doc, JSON_COMPACT | CS_JSON_REAL): the text
 * pieces are jansson's own dumps of each member, joined the way jansson joins
 * them in compact mode ("," and ":" without spaces, members in insertion
 * order); sends are formatted as algorithm_to_json builds them (chunk, src,
 * dst, step, op, then start_us and end_us when both are finite), integers as
 * %lld and reals as jansson formats them (format_real below).  Tests compare
 * the two byte for byte.
 */
#include "result_codec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

#define DUMP_FLAGS (JSON_COMPACT | CS_JSON_REAL)
#define SEND_BATCH 1024

typedef struct piece {
    char *text;          /* NULL: the sends of algorithm alg */
    size_t len;
    int alg;
} piece;

struct cs_result_writer {
    piece *pieces;
    int npieces, cur;
    bool in_piece;               /* the current piece started */
    size_t text_pos;
    /* sends source */
    const cs_codec_view *view;   /* encoded */
    cs_send_cursor *cursor;
    const cs_result *res;        /* memory */
    const cs_algorithm *one;     /* memory, an algorithm's own document */
    long mem_next;
    int lo, hi;
    bool first_send;
    /* staged output */
    bytebuf stage;
    size_t stage_pos;
    cs_send batch[SEND_BATCH];
};

/* ---- text pieces ------------------------------------------------------------------------ */

typedef struct layout {
    bytebuf text;
    piece *pieces;
    int n, cap;
    bool oom;
} layout;

static void lay_text(layout *l, const char *s, size_t n)
{
    if (bytebuf_put(&l->text, s, n))
        l->oom = true;
}

static void lay_str(layout *l, const char *s) { lay_text(l, s, strlen(s)); }

static void lay_push(layout *l, char *text, size_t len, int alg)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        piece *p = realloc(l->pieces, sizeof *p * (size_t)cap);
        if (!p) {
            free(text);
            l->oom = true;
            return;
        }
        l->pieces = p;
        l->cap = cap;
    }
    l->pieces[l->n++] = (piece){text, len, alg};
}

/* Closes the pending text as a piece. */
static void lay_flush_text(layout *l)
{
    if (l->text.len == 0)
        return;
    char *t = malloc(l->text.len);
    if (!t) {
        l->oom = true;
        return;
    }
    memcpy(t, l->text.data, l->text.len);
    lay_push(l, t, l->text.len, -1);
    l->text.len = 0;
}

static void lay_json(layout *l, const json_t *v)
{
    char *s = json_dumps(v, DUMP_FLAGS | JSON_ENCODE_ANY);
    if (!s) {
        l->oom = true;
        return;
    }
    lay_str(l, s);
    free(s);
}

static void lay_key(layout *l, const char *key, bool first)
{
    if (!first)
        lay_str(l, ",");
    json_t *k = json_string(key);
    lay_json(l, k);
    json_decref(k);
    lay_str(l, ":");
}

static void lay_algorithm(layout *l, const json_t *alg, int index, bool summary, long nsends)
{
    lay_str(l, "{");
    const char *key;
    json_t *value;
    bool first = true;
    json_object_foreach((json_t *)alg, key, value) {
        if (!strcmp(key, "sends")) {
            if (summary) {
                char num[48];
                snprintf(num, sizeof num, "%snsends\":%ld", first ? "\"" : ",\"", nsends);
                lay_str(l, num);
            } else {
                lay_key(l, key, first);
                lay_str(l, "[");
                lay_flush_text(l);
                lay_push(l, NULL, 0, index);
                lay_str(l, "]");
            }
        } else {
            lay_key(l, key, first);
            lay_json(l, value);
        }
        first = false;
    }
    lay_str(l, "}");
}

static int lay_document(const json_t *doc, const cs_json_view *jv, const long *nsends,
                        int nalgs, piece **out, int *nout, cs_error *err)
{
    layout l = {0};
    const json_t *fr = json_object_get(doc, "frontier");
    if (!json_is_array(fr) || (int)json_array_size(fr) != nalgs)
        return cs_error_set(err, CS_EINTERNAL, "", "the result document's frontier has %zu "
                                                   "algorithms, its sends %d",
                            json_array_size(fr), nalgs);
    if (jv->alg >= nalgs)
        return cs_error_set(err, CS_EINVAL, "alg", "alg must be < %d (frontier size)", nalgs);
    lay_str(&l, "{");
    const char *key;
    json_t *value;
    bool first = true;
    json_object_foreach((json_t *)doc, key, value) {
        lay_key(&l, key, first);
        first = false;
        if (value != fr) {
            lay_json(&l, value);
            continue;
        }
        lay_str(&l, "[");
        bool afirst = true;
        for (int i = 0; i < nalgs; i++) {
            if (jv->alg >= 0 && i != jv->alg)
                continue;
            if (!afirst)
                lay_str(&l, ",");
            afirst = false;
            lay_algorithm(&l, json_array_get(fr, (size_t)i), i, jv->summary, nsends[i]);
        }
        lay_str(&l, "]");
    }
    if (jv->extra && jv->extra[0]) {
        lay_str(&l, first ? "" : ",");
        lay_str(&l, jv->extra);
    }
    lay_str(&l, "}");
    lay_flush_text(&l);
    bytebuf_free(&l.text);
    if (l.oom) {
        for (int i = 0; i < l.n; i++)
            free(l.pieces[i].text);
        free(l.pieces);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory laying out the document");
    }
    *out = l.pieces;
    *nout = l.n;
    return CS_OK;
}

/* ---- opening ---------------------------------------------------------------------------- */

static int writer_new(const json_t *doc, const cs_json_view *jv, const long *nsends, int nalgs,
                      cs_result_writer **out, cs_error *err)
{
    cs_result_writer *w = calloc(1, sizeof *w);
    if (!w)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int rc = lay_document(doc, jv, nsends, nalgs, &w->pieces, &w->npieces, err);
    if (rc) {
        free(w);
        return rc;
    }
    w->lo = jv->rank_lo;
    w->hi = jv->rank_lo >= 0 ? jv->rank_hi : -1;
    *out = w;
    return CS_OK;
}

int result_writer_open_encoded(const cs_codec_view *v, const cs_json_view *jv,
                               cs_result_writer **out, cs_error *err)
{
    *out = NULL;
    size_t hlen;
    const char *h = result_codec_header(v, &hlen);
    json_error_t jerr;
    json_t *doc = json_loadb(h, hlen, 0, &jerr);
    if (!doc)
        return cs_error_set(err, CS_EIO, "", "stored result is damaged: its header is not JSON "
                                             "(%s)", jerr.text);
    int n = result_codec_nalgs(v);
    long *ns = calloc((size_t)(n ? n : 1), sizeof *ns);
    int rc = ns ? CS_OK : cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int i = 0; !rc && i < n; i++)
        ns[i] = result_codec_nsends(v, i);
    if (!rc)
        rc = writer_new(doc, jv, ns, n, out, err);
    free(ns);
    json_decref(doc);
    if (!rc)
        (*out)->view = v;
    return rc;
}

int result_writer_open_memory(const cs_result *res, const json_t *skeleton,
                              const cs_json_view *jv, cs_result_writer **out, cs_error *err)
{
    *out = NULL;
    long *ns = calloc((size_t)(res->nalgs ? res->nalgs : 1), sizeof *ns);
    if (!ns)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int i = 0; i < res->nalgs; i++)
        ns[i] = res->algs[i]->nsends;
    int rc = writer_new(skeleton, jv, ns, res->nalgs, out, err);
    free(ns);
    if (!rc)
        (*out)->res = res;
    return rc;
}

int result_writer_open_algorithm(const cs_algorithm *a, const json_t *skeleton,
                                 cs_result_writer **out, cs_error *err)
{
    *out = NULL;
    const json_t *sends = json_object_get(skeleton, "sends");
    if (!json_is_array(sends) || json_array_size(sends) != 0)
        return cs_error_set(err, CS_EINTERNAL, "", "the algorithm document without sends has "
                                                   "sends");
    cs_result_writer *w = calloc(1, sizeof *w);
    if (!w)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    layout l = {0};
    lay_algorithm(&l, skeleton, 0, false, a->nsends);
    lay_flush_text(&l);
    bytebuf_free(&l.text);
    if (l.oom) {
        for (int i = 0; i < l.n; i++)
            free(l.pieces[i].text);
        free(l.pieces);
        free(w);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory laying out the document");
    }
    w->pieces = l.pieces;
    w->npieces = l.n;
    w->lo = w->hi = -1;
    w->one = a;
    *out = w;
    return CS_OK;
}

void result_writer_free(cs_result_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->npieces; i++)
        free(w->pieces[i].text);
    free(w->pieces);
    send_cursor_free(w->cursor);
    bytebuf_free(&w->stage);
    free(w);
}

/* ---- formatting sends ------------------------------------------------------------------- */

/* Fast path of format_real for 1e-4 <= |v| < 1e15, where %.15g prints fixed
 * notation: the 15 significant digits are round(|v| * 10^(14-X)) with X the
 * decimal exponent.  That product is below 2^53, so one multiplication by an
 * exact power of ten is off by at most 1/16 and rounds to the right integer
 * unless its fraction is within 0.07 of one half: then (and when X was
 * misjudged next to a power of ten) this returns 0 and printf decides. */
static size_t format_real_fast(char *buf, double v)
{
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                   1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};
    double a = fabs(v);
    if (!(a >= 1e-4 && a < 1e15))
        return 0;
    int X = 14;
    while (X > -4 && a < (X >= 0 ? pow10[X] : 1.0 / pow10[-X]))
        X--;
    double prod = a * pow10[14 - X];
    double fl = floor(prod), frac = prod - fl;
    if (fabs(frac - 0.5) < 0.07)
        return 0;
    long long n = (long long)fl + (frac > 0.5);
    if (n < 100000000000000LL || n > 999999999999999LL)
        return 0;
    char d[16];
    for (int k = 14; k >= 0; k--) {
        d[k] = (char)('0' + n % 10);
        n /= 10;
    }
    int nd = 15;
    while (nd > 1 && d[nd - 1] == '0')
        nd--;
    char *p = buf;
    if (v < 0)
        *p++ = '-';
    if (X >= 0) {
        int ip = X + 1;
        memcpy(p, d, (size_t)ip);
        p += ip;
        *p++ = '.';
        if (nd > ip) {
            memcpy(p, d + ip, (size_t)(nd - ip));
            p += nd - ip;
        } else {
            *p++ = '0';
        }
    } else {
        *p++ = '0';
        *p++ = '.';
        for (int k = 0; k < -X - 1; k++)
            *p++ = '0';
        memcpy(p, d, (size_t)nd);
        p += nd;
    }
    return (size_t)(p - buf);
}

/* jansson's real format: %.15g, ".0" added when there is neither '.' nor 'e',
 * the exponent without '+' or leading zeros. */
static size_t format_real(char *buf, double v)
{
    size_t fast = format_real_fast(buf, v);
    if (fast)
        return fast;
    int n = snprintf(buf, 40, "%.15g", v);
    if (n < 0)
        return 0;
    size_t len = (size_t)n;
    if (!memchr(buf, '.', len) && !memchr(buf, 'e', len)) {
        buf[len++] = '.';
        buf[len++] = '0';
        buf[len] = '\0';
    }
    char *e = memchr(buf, 'e', len);
    if (e) {
        char *start = e + 1, *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, len - (size_t)(end - buf) + 1);
            len -= (size_t)(end - start);
        }
    }
    return len;
}

static char *put_int(char *p, long long v)
{
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = tmp[--n];
    return p;
}

#define PUT_LIT(p, s)                                                                          \
    do {                                                                                       \
        memcpy(p, s, sizeof(s) - 1);                                                           \
        p += sizeof(s) - 1;                                                                    \
    } while (0)

/* Appends the sends to the stage, each preceded by "," but the first. */
static int stage_sends(cs_result_writer *w, const cs_send *s, size_t n)
{
    if (bytebuf_reserve(&w->stage, n * 200))
        return CS_ENOMEM;
    char *p = (char *)w->stage.data + w->stage.len;
    for (size_t i = 0; i < n; i++) {
        if (!w->first_send)
            *p++ = ',';
        w->first_send = false;
        PUT_LIT(p, "{\"chunk\":");
        p = put_int(p, s[i].chunk);
        PUT_LIT(p, ",\"src\":");
        p = put_int(p, s[i].src);
        PUT_LIT(p, ",\"dst\":");
        p = put_int(p, s[i].dst);
        PUT_LIT(p, ",\"step\":");
        p = put_int(p, s[i].step);
        if (s[i].op == CS_OP_REDUCE)
            PUT_LIT(p, ",\"op\":\"reduce\"");
        else
            PUT_LIT(p, ",\"op\":\"copy\"");
        if (isfinite(s[i].start_us) && isfinite(s[i].end_us)) {
            PUT_LIT(p, ",\"start_us\":");
            p += format_real(p, s[i].start_us);
            PUT_LIT(p, ",\"end_us\":");
            p += format_real(p, s[i].end_us);
        }
        *p++ = '}';
    }
    w->stage.len = (size_t)((unsigned char *)p - w->stage.data);
    return CS_OK;
}

/* Stages the next batch of algorithm alg's sends; *done when none are left. */
static int next_batch(cs_result_writer *w, int alg, bool *done, cs_error *err)
{
    size_t n = 0;
    if (w->view) {
        if (!w->cursor) {
            int rc = send_cursor_open(w->view, alg, w->lo, w->hi, &w->cursor, err);
            if (rc)
                return rc;
        }
        int rc = send_cursor_next(w->cursor, w->batch, SEND_BATCH, &n, err);
        if (rc)
            return rc;
    } else {
        const cs_algorithm *a = w->one ? w->one : w->res->algs[alg];
        while (n < SEND_BATCH && w->mem_next < a->nsends) {
            cs_send s = algorithm_send(a, w->mem_next++);
            if (w->lo >= 0 && !((s.src >= w->lo && s.src <= w->hi) ||
                                (s.dst >= w->lo && s.dst <= w->hi)))
                continue;
            w->batch[n++] = s;
        }
    }
    *done = n == 0;
    if (n && stage_sends(w, w->batch, n))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory writing sends");
    return CS_OK;
}

/* Fills the stage with more output; false at the end of the document. */
static int refill(cs_result_writer *w, bool *more, cs_error *err)
{
    w->stage.len = 0;
    w->stage_pos = 0;
    while (w->cur < w->npieces) {
        piece *p = &w->pieces[w->cur];
        if (p->text) {
            if (bytebuf_put(&w->stage, p->text, p->len))
                return cs_error_set(err, CS_ENOMEM, "", "out of memory");
            w->cur++;
            *more = true;
            return CS_OK;
        }
        if (!w->in_piece) {
            w->in_piece = true;
            w->first_send = true;
            w->mem_next = 0;
        }
        bool done = false;
        int rc = next_batch(w, p->alg, &done, err);
        if (rc)
            return rc;
        if (!done) {
            *more = true;
            return CS_OK;
        }
        send_cursor_free(w->cursor);
        w->cursor = NULL;
        w->in_piece = false;
        w->cur++;
    }
    *more = false;
    return CS_OK;
}

long result_writer_read(cs_result_writer *w, char *buf, size_t cap, cs_error *err)
{
    size_t got = 0;
    while (got < cap) {
        if (w->stage_pos == w->stage.len) {
            bool more = false;
            int rc = refill(w, &more, err);
            if (rc)
                return rc;
            if (!more)
                break;
        }
        size_t k = w->stage.len - w->stage_pos;
        if (k > cap - got)
            k = cap - got;
        memcpy(buf + got, w->stage.data + w->stage_pos, k);
        w->stage_pos += k;
        got += k;
    }
    return (long)got;
}

int result_writer_to_file(cs_result_writer *w, FILE *f, cs_error *err)
{
    enum { BUF = 1 << 16 };
    char *buf = malloc(BUF);
    if (!buf)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    long n;
    int rc = CS_OK;
    while ((n = result_writer_read(w, buf, BUF, err)) > 0)
        if (fwrite(buf, 1, (size_t)n, f) != (size_t)n) {
            rc = cs_error_set(err, CS_EIO, "", "cannot write the result document");
            break;
        }
    if (n < 0)
        rc = (int)n;
    free(buf);
    return rc;
}

int result_writer_dump(cs_result_writer *w, char **out, size_t *len, cs_error *err)
{
    *out = NULL;
    bytebuf all = {0};
    char buf[1 << 14];
    long n;
    while ((n = result_writer_read(w, buf, sizeof buf, err)) > 0)
        if (bytebuf_put(&all, buf, (size_t)n)) {
            bytebuf_free(&all);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
    if (n < 0 || bytebuf_put(&all, "", 1)) {
        bytebuf_free(&all);
        return n < 0 ? (int)n : cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    *out = (char *)all.data;
    *len = all.len - 1;
    return CS_OK;
}
