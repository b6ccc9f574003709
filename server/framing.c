/*
 * framing.c - request framing in front of libmicrohttpd's chunked-body
 * parser: over-long chunk-size lines get the daemon's 400, not MHD's 500.
 *
 * libmicrohttpd 0.9.75 keeps a chunk-size line ("5;name=value\r\n") whole in
 * the connection's read buffer (about 32 KB) before it parses it.  A longer
 * line - a huge chunk extension, thousands of leading zeros, a huge trailer
 * field - fills the buffer, and MHD answers its own HTML 500 without ever
 * calling the daemon: a 5xx for a client's fault, with no JSON error and no
 * line in our log.  MHD has no option and no hook between the socket and that
 * parser; a relay in front of it (a socketpair per connection) would cost
 * every request a second trip through the kernel.
 *
 * So the daemon sits where MHD reads: it defines recv(), which the dynamic
 * linker binds libmicrohttpd's calls to (the executable comes first in the
 * symbol lookup order; framing_active() checks that it did).  A socket is
 * filtered only while MHD holds it as one of our connections: registered when
 * MHD reports the connection started, unregistered when MHD reports it
 * closed, which MHD does before it closes the socket.  Every other recv() in
 * the process (libpq's, a test's client) goes straight to the kernel.
 *
 * A filtered stream runs through a streaming HTTP/1.1 framing parser that
 * follows MHD 0.9.75's own rules (lines end at LF, an optional CR before it;
 * empty lines before a request line are skipped; the first Transfer-Encoding
 * header decides, and only the exact value "chunked" makes a chunked body;
 * else the first Content-Length) and rewrites chunked request bodies only:
 *   - a chunk-size line reaches MHD as its significant hex digits and its
 *     line end: extensions (RFC 9112 7.1.1: a recipient ignores those it does
 *     not understand, and the daemon understands none) and leading zeros are
 *     dropped, and so are trailer fields (the daemon reads none; RFC 9110
 *     6.5.1 lets a recipient discard them);
 *   - what was dropped counts against a budget per request
 *     (FRAMING_DROP_LIMIT, about what MHD's buffer held before).  RFC 9112
 *     asks a server to limit extensions and answer a 4xx past the limit:
 *     past it the rest of the body is read and thrown away (up to the drain
 *     cap, so the client reads the answer instead of a reset), MHD sees the
 *     body end right there, and the access handler answers 400 with our JSON
 *     error (framing_take_refusal).
 * Request heads, Content-Length bodies and chunk data pass unchanged, in
 * place (no copy while nothing was dropped).  Where a stream does not look
 * the way both parsers would agree on - a folded Transfer-Encoding or
 * Content-Length header, a transfer coding other than chunked, a malformed
 * chunk line - the parser stops rewriting that connection for good and MHD
 * sees the raw bytes, as it did before (and answers its own 400 or 413 where
 * the syntax is wrong).
 *
 * State: one cs_framing per connection, touched only by the MHD worker
 * thread that owns the connection (recv, the access handler and the
 * connection notifications all run there).  The fd -> state table is the
 * daemon's one piece of process-wide state: recv() has no context argument.
 * It is sized once from RLIMIT_NOFILE; a descriptor beyond it is not
 * filtered (MHD then behaves as before).
 */
#undef _FORTIFY_SOURCE /* we define recv(); glibc's fortified inline would clash */
#include "server_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

enum framing_state {
    F_HEAD,        /* in the request head (request line, header lines) */
    F_BODY,        /* a Content-Length body: `remaining` bytes pass */
    F_SIZE,        /* chunk-size digits */
    F_SIZE_CR,     /* a CR after the digits: LF must follow */
    F_EXT,         /* a chunk extension, dropped up to LF */
    F_DATA,        /* chunk data: `remaining` bytes pass */
    F_DATA_END,    /* the CRLF (or LF) after chunk data */
    F_DATA_END_CR, /* ... its CR seen */
    F_TRAILER,     /* trailer lines, dropped; an empty line ends the body */
    F_PASS,        /* not rewriting this connection any more */
    F_CLOSED,      /* given up on (past the drain cap, ...): everything is thrown away */
};

/* Where a head line is: its name (compared as it comes against the two
 * framing headers), the blanks after the colon, the value, or skipping to
 * the LF (a line that cannot matter). */
enum head_phase { H_NAME, H_BLANKS, H_VALUE, H_SKIP };

#define NAME_TE "transfer-encoding"
#define NAME_CL "content-length"
#define VALUE_CAP 24   /* longer values are neither "chunked" nor a length */
#define DIGITS_CAP 16  /* significant hex digits of a 64-bit chunk size */
#define PENDING_CAP 64 /* held-back output: digits, a line end, a terminator */

struct cs_framing {
    unsigned char state;
    /* head */
    unsigned char phase;       /* head_phase */
    bool request_line_seen;    /* empty lines before it are skipped */
    bool line_has_content;     /* a byte other than a final CR */
    bool line_cr;              /* the last byte of the line so far was CR */
    bool line_is_header;       /* not the request line */
    unsigned char candidates;  /* bit 0: may still be TE, bit 1: CL */
    unsigned name_len;
    unsigned char header;      /* 0, 1 = the first TE header, 2 = the first CL */
    unsigned char last_header; /* the header the previous line was */
    bool headers_seen;         /* a header line came after the request line */
    bool te_seen, cl_seen, folded;
    char value[VALUE_CAP];
    unsigned value_len;        /* may exceed VALUE_CAP: then it matches nothing */
    char te[VALUE_CAP], cl[VALUE_CAP];
    unsigned te_len, cl_len;
    /* body */
    uint64_t remaining;
    char digits[DIGITS_CAP];
    unsigned ndigits;
    bool zero_seen;            /* a '0' before the first significant digit */
    bool last_chunk_sent;      /* "0" + line end reached MHD */
    uint64_t dropped;          /* this request's dropped bytes */
    bool discard;              /* refused: the rest of the body is thrown away */
    bool end_body;             /* the handler wants the body's end (framing_end_body) */
    uint64_t drained;
    uint64_t drop_limit, drain_cap;
    /* output that did not fit where it was made */
    char pending[PENDING_CAP];
    unsigned npending;
    /* requests seen by this parser and by the access handler, in order */
    unsigned long long seq_parsed, seq_handled;
    unsigned long long refusal_seq;
    int refusal_status;
    bool refusal_close;
    char refusal[200];
};

/* ---- the parser ---------------------------------------------------------------------- */

/* One filter call's buffer: input is read at `in`, output written at `out`
 * (out <= in always: the filter works in place), `cap` bytes may be written
 * in all (beyond the input, when held-back output is released). */
typedef struct filter_run {
    cs_framing *f;
    char *buf;
    size_t in, n, out, cap;
} filter_run;

static void emit(filter_run *r, char c)
{
    cs_framing *f = r->f;
    /* the slot at `out` is free once the byte there was read (out < in) */
    if (f->npending == 0 && r->out < r->in) {
        r->buf[r->out++] = c;
        return;
    }
    if (f->npending < PENDING_CAP)
        f->pending[f->npending++] = c;
    /* (cannot fill: at most digits + a line end are held at once) */
}

static void emit_str(filter_run *r, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        emit(r, s[i]);
}

/* Moves held-back output into the buffer while slots are free (up to `limit`). */
static void release_pending(filter_run *r, size_t limit)
{
    cs_framing *f = r->f;
    size_t k = 0;
    while (k < f->npending && r->out < limit)
        r->buf[r->out++] = f->pending[k++];
    if (k) {
        memmove(f->pending, f->pending + k, f->npending - k);
        f->npending -= (unsigned)k;
    }
}

static bool refuse(filter_run *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records why this request is refused, for the access handler.  One
 * refusal waits at a time: when an earlier request's refusal is still
 * waiting (pipelined requests: the parser runs ahead of the handler),
 * overwriting it would let that request's cut-short body be answered as if
 * it were whole.  This one is then left to MHD instead: it gets a chunk
 * line it calls malformed (at a chunk-size line or a trailer line, where
 * every refusal is made, MHD answers its own 400 and closes), and nothing
 * after it.  Returns false then (the connection is closed for good). */
static bool refuse(filter_run *r, int status, const char *fmt, ...)
{
    cs_framing *f = r->f;
    if (f->refusal_status && f->refusal_seq == f->seq_parsed)
        return true; /* this request's first reason stands */
    if (f->refusal_status) {
        emit_str(r, "x\r\n", 3);
        f->state = F_CLOSED;
        return false;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->refusal, sizeof f->refusal, fmt, ap);
    va_end(ap);
    f->refusal_status = status;
    f->refusal_close = false;
    f->refusal_seq = f->seq_parsed;
    return true;
}

/* The body MHD sees ends here: the last chunk (unless it went out already)
 * and the empty trailer section. */
static void emit_body_end(filter_run *r)
{
    if (!r->f->last_chunk_sent)
        emit_str(r, "0\r\n", 3);
    emit_str(r, "\r\n", 2);
}

static void count_dropped(filter_run *r, uint64_t n)
{
    cs_framing *f = r->f;
    f->dropped += n;
    if (!f->discard && f->dropped > f->drop_limit) {
        f->discard = true;
        refuse(r, 400,
               "chunked body: chunk extensions, leading zeros and trailer fields add up to more "
               "than %llu bytes (the limit for one request; RFC 9112 7.1.1)",
               (unsigned long long)f->drop_limit);
    }
}

/* MHD is given the body's end now, and the stream after it is thrown away:
 * the connection closes after the answer. */
static void give_up_body(filter_run *r)
{
    r->f->refusal_close = true;
    emit_body_end(r);
    r->f->state = F_CLOSED;
}

/* A refused body is thrown away up to the drain cap (so that the client
 * reads the answer instead of a reset); past it, give up. */
static void count_drained(filter_run *r, uint64_t n)
{
    cs_framing *f = r->f;
    f->drained += n;
    if (f->drained > f->drain_cap)
        give_up_body(r);
}

static void head_reset(cs_framing *f)
{
    f->request_line_seen = false;
    f->headers_seen = false;
    f->te_seen = f->cl_seen = f->folded = false;
    f->te_len = f->cl_len = 0;
    f->last_header = 0;
}

static void line_reset(cs_framing *f)
{
    f->phase = H_NAME;
    f->line_has_content = false;
    f->line_cr = false;
    f->candidates = 3;
    f->name_len = 0;
    f->header = 0;
    f->value_len = 0;
}

static void chunk_line_reset(cs_framing *f)
{
    f->ndigits = 0;
    f->zero_seen = false;
    f->line_cr = false;
}

/* Parses a Content-Length value as MHD does: decimal digits only, at least
 * one, no overflow. */
static bool parse_length(const char *v, unsigned n, uint64_t *out)
{
    if (n == 0 || n > VALUE_CAP)
        return false;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        unsigned d = (unsigned)(v[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *out = x;
    return true;
}

/* The head is complete: how the body is framed, as MHD will see it. */
static void head_done(cs_framing *f)
{
    enum framing_state next = F_HEAD;
    uint64_t len = 0;
    if (f->folded)
        next = F_PASS; /* MHD joins folded lines: leave such a request alone */
    else if (f->te_seen)
        next = f->te_len == 7 && !strncasecmp(f->te, "chunked", 7) ? F_SIZE : F_PASS;
    else if (f->cl_seen)
        next = !parse_length(f->cl, f->cl_len, &len) ? F_PASS : len ? F_BODY : F_HEAD;
    head_reset(f);
    line_reset(f);
    f->dropped = 0;
    f->drained = 0;
    f->discard = false;
    f->end_body = false;
    f->last_chunk_sent = false;
    f->remaining = len;
    chunk_line_reset(f);
    f->state = (unsigned char)next;
}

/* A head line ended (at its LF). */
static void head_line_done(cs_framing *f)
{
    if (!f->line_has_content) {
        if (f->request_line_seen)
            head_done(f);
        else
            line_reset(f); /* an empty line before the request line: skipped */
        return;
    }
    if (f->line_is_header) {
        unsigned v = f->value_len;
        if (v > 0 && f->line_cr)
            v--; /* the CR of the CRLF is not part of the value */
        if (f->header == 1) {
            f->te_seen = true;
            f->te_len = v;
            memcpy(f->te, f->value, v < VALUE_CAP ? v : VALUE_CAP);
        } else if (f->header == 2) {
            f->cl_seen = true;
            f->cl_len = v;
            memcpy(f->cl, f->value, v < VALUE_CAP ? v : VALUE_CAP);
        }
        f->headers_seen = true;
        f->last_header = f->header;
    }
    f->request_line_seen = true;
    line_reset(f);
}

/* The first byte of a head line that has content. */
static void head_line_begins(cs_framing *f, char c)
{
    f->line_has_content = true;
    if (!f->request_line_seen) {
        f->line_is_header = false;
        f->seq_parsed++;
        f->phase = H_SKIP;
        return;
    }
    f->line_is_header = true;
    if (f->headers_seen && (c == ' ' || c == '\t')) {
        /* a folded line continues the previous header's value */
        if (f->last_header)
            f->folded = true;
        f->phase = H_SKIP;
        return;
    }
}

/* Name bytes: narrow the candidates; at the colon decide what the line is. */
static void head_name_byte(cs_framing *f, char c)
{
    if (c == ':') {
        if ((f->candidates & 1) && f->name_len == sizeof NAME_TE - 1 && !f->te_seen)
            f->header = 1;
        else if ((f->candidates & 2) && f->name_len == sizeof NAME_CL - 1 && !f->cl_seen)
            f->header = 2;
        f->phase = f->header ? H_BLANKS : H_SKIP;
        return;
    }
    char l = (char)tolower((unsigned char)c);
    if (f->name_len >= sizeof NAME_TE - 1 || l != NAME_TE[f->name_len])
        f->candidates &= (unsigned char)~1u;
    if (f->name_len >= sizeof NAME_CL - 1 || l != NAME_CL[f->name_len])
        f->candidates &= (unsigned char)~2u;
    f->name_len++;
    if (!f->candidates)
        f->phase = H_SKIP; /* not a framing header: skip to the LF */
}

/* A byte of a head line that has content, by where in the line it is. */
static void head_phase_byte(cs_framing *f, char c)
{
    switch (f->phase) {
    case H_NAME:
        head_name_byte(f, c);
        break;
    case H_BLANKS:
        if (c == ' ' || c == '\t')
            break;
        f->phase = H_VALUE;
        /* fall through */
    case H_VALUE:
        if (f->value_len < VALUE_CAP)
            f->value[f->value_len] = c;
        f->value_len++;
        break;
    default:
        break;
    }
}

/* Pass-through bytes (heads, a Content-Length body, chunk data, a connection
 * left alone): in place, moved only when something before them was dropped,
 * and queued behind held-back output when there is some. */
static void pass_bytes(filter_run *r, size_t k)
{
    cs_framing *f = r->f;
    size_t gap = r->in - r->out;
    size_t p = f->npending;
    if (p <= gap) {
        memcpy(r->buf + r->out, f->pending, p);
        r->out += p;
        f->npending = 0;
        if (r->out != r->in)
            memmove(r->buf + r->out, r->buf + r->in, k);
        r->out += k;
        r->in += k;
        return;
    }
    /* more is held than the gap takes: the output is pending ++ input, of
     * which the last d bytes stay held */
    size_t d = p - gap;
    char tail[PENDING_CAP];
    if (k >= d) {
        memcpy(tail, r->buf + r->in + k - d, d);
        memmove(r->buf + r->out + p, r->buf + r->in, k - d);
        memcpy(r->buf + r->out, f->pending, p);
    } else {
        size_t keep = d - k; /* the last `keep` held bytes, then the input */
        memcpy(tail, f->pending + p - keep, keep);
        memcpy(tail + keep, r->buf + r->in, k);
        memcpy(r->buf + r->out, f->pending, p - keep);
    }
    memcpy(f->pending, tail, d);
    f->npending = (unsigned)d;
    r->in += k;
    r->out = r->in;
}

static void head_bytes(filter_run *r)
{
    cs_framing *f = r->f;
    while (r->in < r->n && f->state == F_HEAD) {
        char *p = r->buf + r->in;
        size_t avail = r->n - r->in;
        if (f->phase == H_SKIP && f->line_has_content) {
            /* the rest of a line that cannot matter: up to its LF at once */
            char *lf = memchr(p, '\n', avail);
            size_t k = lf ? (size_t)(lf - p) : avail;
            if (k > 0)
                f->line_cr = p[k - 1] == '\r';
            pass_bytes(r, lf ? k + 1 : k);
            if (lf)
                head_line_done(f);
            continue;
        }
        char c = *p;
        pass_bytes(r, 1);
        if (c == '\n') {
            head_line_done(f);
            continue;
        }
        if (!f->line_has_content) {
            if (c == '\r' && !f->line_cr) {
                f->line_cr = true; /* an empty line's CR, or the line's first byte */
                continue;
            }
            bool cr_first = f->line_cr;
            head_line_begins(f, cr_first ? '\r' : c);
            if (cr_first)
                head_phase_byte(f, '\r');
        }
        head_phase_byte(f, c);
        f->line_cr = c == '\r';
    }
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static uint64_t digits_value(const cs_framing *f)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < f->ndigits; i++) {
        char c = f->digits[i];
        unsigned d = c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
        x = x << 4 | d;
    }
    return x;
}

/* Gives up on a chunk line MHD will call malformed: MHD gets the line as it
 * came (less leading zeros, which change nothing), then every later byte
 * unchanged, and answers its own 400. */
static void chunk_line_malformed(filter_run *r, const char *tail, size_t ntail)
{
    cs_framing *f = r->f;
    if (f->discard) {
        give_up_body(r); /* refused already; the body's end cannot be found */
        return;
    }
    if (f->zero_seen && f->ndigits == 0)
        emit(r, '0');
    emit_str(r, f->digits, f->ndigits);
    emit_str(r, tail, ntail);
    f->state = F_PASS;
}

/* The chunk-size line ended: MHD gets its digits and line end. */
static void chunk_line_done(filter_run *r, bool crlf)
{
    cs_framing *f = r->f;
    uint64_t size = digits_value(f);
    if (!f->discard) {
        if (f->ndigits == 0)
            emit(r, '0');
        emit_str(r, f->digits, f->ndigits);
        emit_str(r, crlf ? "\r\n" : "\n", crlf ? 2 : 1);
        if (size == 0)
            f->last_chunk_sent = true;
    }
    chunk_line_reset(f);
    if (size == 0) {
        f->state = F_TRAILER;
        line_reset(f);
    } else {
        f->remaining = size;
        f->state = F_DATA;
    }
}

/* MHD is at the start of a chunk-size line (nothing of the line went out):
 * the body's end can be given there. */
static bool at_chunk_line(const cs_framing *f)
{
    return f->state == F_SIZE || f->state == F_SIZE_CR || f->state == F_EXT;
}

static void chunk_bytes(filter_run *r)
{
    cs_framing *f = r->f;
    while (r->in < r->n) {
        if (f->end_body && at_chunk_line(f)) {
            give_up_body(r);
            return;
        }
        switch (f->state) {
        case F_DATA: {
            size_t avail = r->n - r->in;
            size_t k = f->remaining < avail ? (size_t)f->remaining : avail;
            f->remaining -= k;
            if (!f->remaining)
                f->state = F_DATA_END;
            if (f->discard) {
                r->in += k;
                count_drained(r, k);
                if (f->state == F_CLOSED)
                    return;
            } else {
                pass_bytes(r, k);
            }
            continue;
        }
        case F_SIZE:
        case F_SIZE_CR:
        case F_EXT:
        case F_DATA_END:
        case F_DATA_END_CR:
        case F_TRAILER:
            break;
        default:
            return;
        }
        char c = r->buf[r->in++];
        if (f->discard) {
            count_drained(r, 1);
            if (f->state == F_CLOSED)
                return;
        }
        switch (f->state) {
        case F_SIZE:
            if (c == '0' && f->ndigits == 0) {
                if (f->zero_seen)
                    count_dropped(r, 1);
                f->zero_seen = true;
            } else if (is_hex(c)) {
                if (f->ndigits == DIGITS_CAP) {
                    /* more than 64 bits: MHD would answer 413; the body's end
                     * cannot be found past it */
                    if (refuse(r, 413, "chunked body: a chunk size of more than %d hex "
                               "digits (2^64 bytes or more)", DIGITS_CAP)) {
                        f->discard = true;
                        give_up_body(r);
                    }
                    return;
                }
                f->digits[f->ndigits++] = c;
            } else if (f->ndigits == 0 && !f->zero_seen) {
                chunk_line_malformed(r, &c, 1); /* no digits at all */
            } else if (c == ';') {
                f->state = F_EXT;
                count_dropped(r, 1);
            } else if (c == '\r') {
                f->state = F_SIZE_CR;
            } else if (c == '\n') {
                chunk_line_done(r, false);
            } else {
                chunk_line_malformed(r, &c, 1);
            }
            break;
        case F_SIZE_CR:
            if (c == '\n') {
                chunk_line_done(r, true);
            } else {
                char tail[2] = {'\r', c};
                chunk_line_malformed(r, tail, 2);
            }
            break;
        case F_EXT:
            if (c == '\n') {
                chunk_line_done(r, f->line_cr);
                break;
            }
            /* a CR counts once it turns out not to end the line */
            if (f->line_cr)
                count_dropped(r, 1);
            f->line_cr = c == '\r';
            if (!f->line_cr)
                count_dropped(r, 1);
            break;
        case F_DATA_END:
        case F_DATA_END_CR:
            if (c == '\n' || (c == '\r' && f->state == F_DATA_END)) {
                if (!f->discard)
                    emit(r, c);
                f->state = c == '\n' ? F_SIZE : F_DATA_END_CR;
            } else if (f->discard) {
                chunk_line_malformed(r, NULL, 0);
            } else {
                emit(r, c); /* MHD: malformed */
                f->state = F_PASS;
            }
            break;
        case F_TRAILER:
            if (c == '\n') {
                if (!f->line_has_content) {
                    /* the empty line: the body ends */
                    if (f->discard)
                        emit_body_end(r);
                    else
                        emit_str(r, f->line_cr ? "\r\n" : "\n", f->line_cr ? 2 : 1);
                    f->state = F_HEAD;
                    f->discard = false;
                    line_reset(f);
                } else {
                    line_reset(f); /* a trailer field, dropped */
                }
            } else if (c == '\r' && !f->line_has_content && !f->line_cr) {
                f->line_cr = true;
            } else {
                if (!f->line_has_content && f->line_cr)
                    count_dropped(r, 1); /* the CR that began it */
                f->line_has_content = true;
                f->line_cr = c == '\r';
                count_dropped(r, 1);
            }
            break;
        default:
            return;
        }
        if (f->npending)
            release_pending(r, r->in);
    }
}

size_t framing_filter(cs_framing *f, char *buf, size_t n, size_t cap)
{
    filter_run r = {.f = f, .buf = buf, .in = 0, .n = n, .out = 0, .cap = cap};
    while (r.in < r.n) {
        switch (f->state) {
        case F_HEAD:
            head_bytes(&r);
            break;
        case F_BODY: {
            size_t avail = r.n - r.in;
            size_t k = f->remaining < avail ? (size_t)f->remaining : avail;
            pass_bytes(&r, k);
            f->remaining -= k;
            if (!f->remaining) {
                f->state = F_HEAD;
                line_reset(f);
            }
            break;
        }
        case F_PASS:
            pass_bytes(&r, r.n - r.in);
            break;
        case F_CLOSED:
            r.in = r.n;
            break;
        default:
            chunk_bytes(&r);
            break;
        }
    }
    release_pending(&r, r.cap);
    return r.out;
}

/* ---- connections ---------------------------------------------------------------------- */

cs_framing *framing_new(uint64_t drop_limit, uint64_t drain_cap)
{
    cs_framing *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->drop_limit = drop_limit;
    f->drain_cap = drain_cap;
    f->state = F_HEAD;
    head_reset(f);
    line_reset(f);
    return f;
}

void framing_free(cs_framing *f) { free(f); }

size_t framing_take_pending(cs_framing *f, char *buf, size_t cap)
{
    size_t k = f->npending < cap ? f->npending : cap;
    memcpy(buf, f->pending, k);
    memmove(f->pending, f->pending + k, f->npending - k);
    f->npending -= (unsigned)k;
    return k;
}

unsigned long long framing_request_begins(cs_framing *f)
{
    if (!f)
        return 0;
    /* a refusal for a request the handler is past was never taken (MHD
     * answered that request another way): it must not hold up a later one */
    if (f->refusal_status && f->refusal_seq <= f->seq_handled)
        f->refusal_status = 0;
    return ++f->seq_handled;
}

bool framing_take_refusal(cs_framing *f, unsigned long long seq, int *status, bool *close,
                          char *msg, size_t cap)
{
    if (!f || !f->refusal_status || f->refusal_seq != seq)
        return false;
    *status = f->refusal_status;
    *close = f->refusal_close;
    snprintf(msg, cap, "%s", f->refusal);
    f->refusal_status = 0;
    return true;
}

bool framing_end_body(cs_framing *f, unsigned long long seq)
{
    if (!f || f->seq_parsed < seq)
        return false; /* a request this parser did not follow (F_PASS) */
    if (f->seq_parsed > seq || f->state == F_HEAD || f->state == F_CLOSED ||
        f->state == F_TRAILER)
        return true; /* MHD has the body's end, or gets it with the trailer's end */
    if (f->state == F_PASS || f->state == F_BODY ||
        (f->state == F_DATA && f->remaining > f->drain_cap))
        return false;
    f->end_body = true; /* at the next chunk-size line (framing_end_due, chunk_bytes) */
    return true;
}

/* A body end the handler asked for, when MHD is at a chunk-size line now:
 * into the held-back output, before anything more is read. */
static void framing_end_due(cs_framing *f)
{
    if (f->end_body && at_chunk_line(f)) {
        filter_run r = {.f = f};
        give_up_body(&r);
    }
}

/* ---- the descriptor table and recv() ---------------------------------------------------- */

static struct {
    pthread_once_t once;
    cs_framing *_Atomic *slots;
    _Atomic size_t n;          /* published after slots: a reader sees both */
} table = {.once = PTHREAD_ONCE_INIT};

static void table_init(void)
{
    struct rlimit rl;
    size_t n = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = (size_t)rl.rlim_cur;
    if (n > ((size_t)1 << 22))
        n = (size_t)1 << 22;
    /* lives as long as the process: a recv() may look at it any time */
    table.slots = calloc(n, sizeof *table.slots);
    atomic_store_explicit(&table.n, table.slots ? n : 0, memory_order_release);
}

cs_framing *framing_of(int fd)
{
    if (fd < 0 || (size_t)fd >= atomic_load_explicit(&table.n, memory_order_acquire))
        return NULL;
    return atomic_load_explicit(&table.slots[fd], memory_order_acquire);
}

bool framing_attach(int fd, uint64_t drop_limit, uint64_t drain_cap)
{
    pthread_once(&table.once, table_init);
    if (fd < 0 || (size_t)fd >= atomic_load(&table.n))
        return false;
    cs_framing *f = framing_new(drop_limit, drain_cap);
    if (!f)
        return false;
    /* a leftover would mean MHD closed a socket without telling: replace it */
    cs_framing *old = atomic_exchange_explicit(&table.slots[fd], f, memory_order_acq_rel);
    framing_free(old);
    return true;
}

void framing_detach(int fd)
{
    if (fd < 0 || (size_t)fd >= atomic_load(&table.n))
        return;
    framing_free(atomic_exchange_explicit(&table.slots[fd], NULL, memory_order_acq_rel));
}

/* libmicrohttpd's reads.  Only registered sockets are filtered; flags other
 * than 0 (MHD passes none) and every other descriptor go to the kernel.
 *
 * MHD takes a short read for a drained socket (it then waits for the next
 * epoll edge), so a filtered read returns less than `len` only when the
 * kernel had no more: while dropped bytes leave room, it reads again. */
ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    cs_framing *f = flags == 0 && len > 0 ? framing_of(fd) : NULL;
    if (!f)
        return recvfrom(fd, buf, len, flags, NULL, NULL);
    char *b = buf;
    framing_end_due(f);
    size_t out = framing_take_pending(f, b, len);
    if (f->state == F_CLOSED) {
        /* MHD has the body's end and closes after its answer: what the client
         * still sends is never read (reading it all here could go on for as
         * long as a client keeps sending, on a thread other connections share) */
        if (out > 0)
            return (ssize_t)out;
        errno = EAGAIN;
        return -1;
    }
    while (out < len) {
        size_t want = len - out;
        ssize_t got = recvfrom(fd, b + out, want, 0, NULL, NULL);
        if (got <= 0)
            return out > 0 ? (ssize_t)out : got; /* errno is recvfrom's */
        out += f->state == F_PASS ? (size_t)got : framing_filter(f, b + out, (size_t)got, want);
        if (f->state == F_CLOSED) {
            /* given up on in this read: MHD has the body's end, and the rest
             * is not read (as above) */
            if (out > 0)
                return (ssize_t)out;
            errno = EAGAIN;
            return -1;
        }
        if ((size_t)got < want) {
            if (out > 0)
                return (ssize_t)out;
            errno = EAGAIN; /* all of it dropped, and nothing more is there */
            return -1;
        }
    }
    return (ssize_t)out;
}

bool framing_active(void)
{
    /* our recv() is the one libmicrohttpd resolved to only if the
     * executable exports it first in the global scope */
    void *bound = dlsym(RTLD_DEFAULT, "recv");
    return bound == (void *)recv;
}
