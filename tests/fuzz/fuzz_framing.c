/*
 * Fuzzes the request framing parser in front of libmicrohttpd
 * (server/framing.c) the way recv() drives it.  Properties:
 *  - no memory error or undefined behaviour (ASan, UBSan);
 *  - the bytes MHD reads do not depend on how the stream is split into
 *    reads, nor on the buffer sizes MHD offers (whole, 1 byte at a time,
 *    random pieces into random buffers, and through the daemon's own recv()
 *    on a socket the stream arrives on in random pieces), and neither do the
 *    refusals;
 *  - the output is never more than FRAMING_SLACK bytes longer than the input
 *    (the filter only drops, except for the body end it writes once);
 *  - a refusal has a status of 400 or 413 and a message;
 *  - a stream of request heads and Content-Length bodies only (no chunked
 *    body) passes byte for byte, and is never refused.
 * The first input byte picks the mode (raw stream, or heads and
 * Content-Length bodies built from the rest) and the parser's limits.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "server_internal.h"

#define FRAMING_SLACK 8

/* MHD's reads through recv(), as tests/test_framing.c's mhd_reads: each call
 * offers `len` bytes (0: random 1..64); the held-back output comes first,
 * then at most the rest of the buffer is read from the stream (`piece`
 * bytes at most, 0: random 1..48) and filtered in place. */
static fuzz_buf mhd_reads(cs_framing *f, const char *in, size_t n, size_t len, size_t piece,
                          fuzz_rng *rng)
{
    fuzz_buf out = {0};
    size_t pos = 0;
    size_t bufcap = len ? len : 64;
    char *buf = malloc(bufcap);
    if (!buf)
        abort();
    for (int idle = 0; idle < 4;) {
        size_t l = len ? len : 1 + fuzz_next(rng, 64);
        size_t got = framing_take_pending(f, buf, l);
        FUZZ_CHECK(got <= l, "pending gave %zu bytes for a %zu-byte buffer", got, l);
        if (got < l && pos < n) {
            size_t k = piece ? piece : 1 + fuzz_next(rng, 48);
            if (k > l - got)
                k = l - got;
            if (k > n - pos)
                k = n - pos;
            memcpy(buf + got, in + pos, k);
            pos += k;
            size_t o = framing_filter(f, buf + got, k, l - got);
            FUZZ_CHECK(o <= l - got, "filter wrote %zu bytes into %zu", o, l - got);
            got += o;
        }
        fuzz_buf_add(&out, buf, got);
        idle = (pos == n && got == 0) ? idle + 1 : 0;
    }
    free(buf);
    if (!out.p)
        fuzz_buf_add(&out, "", 0);
    return out;
}

/* The same through the daemon's own recv() on a socket the parser is
 * attached to: the stream arrives in random pieces, and after each piece
 * MHD reads with random buffer sizes until the socket is drained (a short
 * read or EAGAIN), as it does on an epoll edge. */
static fuzz_buf socket_reads(const char *in, size_t n, uint64_t limit, uint64_t drain,
                             fuzz_rng *rng, cs_framing **state, int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0 ||
        !framing_attach(sv[0], limit, drain))
        abort();
    *state = framing_of(sv[0]);
    fuzz_buf out = {0};
    fuzz_buf_add(&out, "", 0);
    char buf[64];
    size_t pos = 0;
    for (;;) {
        if (pos < n) {
            size_t k = 1 + fuzz_next(rng, 96);
            if (k > n - pos)
                k = n - pos;
            FUZZ_CHECK(write(sv[1], in + pos, k) == (ssize_t)k, "socket write");
            pos += k;
        }
        bool drained_empty = false;
        for (;;) {
            size_t len = 1 + fuzz_next(rng, sizeof buf);
            ssize_t got = recv(sv[0], buf, len, 0);
            if (got < 0) {
                FUZZ_CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "recv: errno %d", errno);
                drained_empty = true;
                break;
            }
            FUZZ_CHECK(got > 0 && (size_t)got <= len, "recv returned %zd for %zu", got, len);
            fuzz_buf_add(&out, buf, (size_t)got);
            if ((size_t)got < len)
                break;
        }
        if (pos == n && drained_empty)
            break;
    }
    return out;
}

typedef struct refusals {
    int n;
    int status[64];
    bool close[64];
    char msg[64][256];
} refusals;

/* The refusals of the first 64 requests, as the access handler takes them. */
static void take_refusals(cs_framing *f, refusals *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 64; i++) {
        unsigned long long seq = framing_request_begins(f);
        if (framing_take_refusal(f, seq, &r->status[i], &r->close[i], r->msg[i],
                                 sizeof r->msg[i])) {
            FUZZ_CHECK(r->status[i] == 400 || r->status[i] == 413, "status %d",
                       r->status[i]);
            FUZZ_CHECK(r->msg[i][0] != '\0', "refusal %d without a message", i);
            r->n++;
        }
    }
}

static const uint64_t drop_limits[] = {0, 1, 16, 64, FRAMING_DROP_LIMIT};
static const uint64_t drain_caps[] = {0, 64, 4096, 1 << 20};

/* Runs `in` whole and split several ways; returns the whole output (caller
 * frees) and its refusals. */
static fuzz_buf check_splits(const char *in, size_t n, uint64_t limit, uint64_t drain,
                             fuzz_rng *rng, refusals *whole_ref)
{
    cs_framing *f = framing_new(limit, drain);
    if (!f)
        abort();
    fuzz_buf whole = mhd_reads(f, in, n, n + 64, n ? n : 1, rng);
    take_refusals(f, whole_ref);
    framing_free(f);
    FUZZ_CHECK(whole.n <= n + FRAMING_SLACK, "%zu bytes out of %zu in", whole.n, n);

    static const size_t lens[] = {1, 2, 0, 0, 7};
    static const size_t pieces[] = {1, 1, 0, 1, 0};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        f = framing_new(limit, drain);
        if (!f)
            abort();
        fuzz_buf part = mhd_reads(f, in, n, lens[i], pieces[i], rng);
        FUZZ_CHECK(part.n == whole.n && !memcmp(part.p, whole.p, whole.n),
                   "split %zu: %zu bytes [%.*s] vs whole %zu [%.*s]", i, part.n,
                   (int)part.n, part.p, whole.n, (int)whole.n, whole.p);
        refusals r;
        take_refusals(f, &r);
        FUZZ_CHECK(r.n == whole_ref->n, "split %zu: %d refusals vs %d", i, r.n, whole_ref->n);
        for (int k = 0; k < 64; k++)
            FUZZ_CHECK(r.status[k] == whole_ref->status[k] &&
                           r.close[k] == whole_ref->close[k] &&
                           !strcmp(r.msg[k], whole_ref->msg[k]),
                       "split %zu: request %d refused differently (%d %s vs %d %s)", i, k,
                       r.status[k], r.msg[k], whole_ref->status[k], whole_ref->msg[k]);
        free(part.p);
        framing_free(f);
    }
    /* the daemon's recv() on a socket */
    int sv[2];
    cs_framing *sf = NULL;
    fuzz_buf sock = socket_reads(in, n, limit, drain, rng, &sf, sv);
    FUZZ_CHECK(sock.n == whole.n && !memcmp(sock.p, whole.p, whole.n),
               "recv() on a socket: %zu bytes [%.*s] vs whole %zu [%.*s]", sock.n, (int)sock.n,
               sock.p, whole.n, (int)whole.n, whole.p);
    refusals r;
    take_refusals(sf, &r);
    FUZZ_CHECK(r.n == whole_ref->n, "recv() on a socket: %d refusals vs %d", r.n, whole_ref->n);
    framing_detach(sv[0]);
    close(sv[0]);
    close(sv[1]);
    free(sock.p);
    return whole;
}

/* ---- heads and Content-Length bodies ---------------------------------------- */

typedef struct cursor {
    const uint8_t *p;
    size_t n, i;
} cursor;

static unsigned take(cursor *c, unsigned n)
{
    if (c->i >= c->n)
        return 0;
    return n ? c->p[c->i++] % n : c->p[c->i++];
}

static void eol(fuzz_buf *b, cursor *c) { fuzz_buf_puts(b, take(c, 2) ? "\r\n" : "\n"); }

static bool name_is(const char *name, const char *want)
{
    return strcasecmp(name, want) == 0;
}

/* A stream of complete requests whose heads have no Transfer-Encoding and
 * whose bodies are framed by Content-Length, from the cursor's bytes. */
static fuzz_buf heads_and_bodies(cursor *c)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"};
    static const char token[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!#$%&'*+^`|~";
    fuzz_buf b = {0};
    fuzz_buf_add(&b, "", 0);
    while (c->i < c->n) {
        unsigned empties = take(c, 3);
        for (unsigned e = 0; e < empties; e++)
            eol(&b, c);
        fuzz_buf_puts(&b, methods[take(c, 6)]);
        fuzz_buf_puts(&b, " /");
        unsigned plen = take(c, 12);
        for (unsigned k = 0; k < plen; k++) {
            char ch = (char)(0x21 + take(c, 0x5e)); /* visible ASCII */
            fuzz_buf_add(&b, &ch, 1);
        }
        fuzz_buf_puts(&b, take(c, 4) ? " HTTP/1.1" : " HTTP/1.0");
        eol(&b, c);
        unsigned body = take(c, 4) ? take(c, 0) % 80 : 0;
        bool has_cl = body > 0 || take(c, 2);
        unsigned headers = take(c, 5);
        unsigned cl_at = has_cl ? take(c, headers + 1) : 99;
        for (unsigned h = 0; h <= headers; h++) {
            if (h == cl_at) {
                static const char *const spellings[] = {"Content-Length", "content-length",
                                                        "CONTENT-LENGTH", "cOnTeNt-LeNgTh"};
                char line[96];
                unsigned zeros = take(c, 3);
                snprintf(line, sizeof line, "%s:%s%.*s%u", spellings[take(c, 4)],
                         take(c, 2) ? " " : take(c, 2) ? "\t " : "", (int)zeros, "000", body);
                fuzz_buf_puts(&b, line);
                eol(&b, c);
            }
            if (h == headers)
                break;
            char name[16];
            unsigned nlen = 1 + take(c, 15);
            for (unsigned k = 0; k < nlen; k++)
                name[k] = token[take(c, sizeof token - 1)];
            name[nlen] = '\0';
            if (name_is(name, "transfer-encoding") || name_is(name, "content-length"))
                name[0] = 'x';
            fuzz_buf_puts(&b, name);
            fuzz_buf_puts(&b, ":");
            unsigned vlen = take(c, 20);
            for (unsigned k = 0; k < vlen; k++) {
                char ch = (char)take(c, 0);
                if (ch == '\r' || ch == '\n' || ch == '\0')
                    ch = ' ';
                fuzz_buf_add(&b, &ch, 1);
            }
            eol(&b, c);
        }
        eol(&b, c);
        for (unsigned k = 0; k < body; k++) {
            char ch = (char)take(c, 0);
            fuzz_buf_add(&b, &ch, 1);
        }
    }
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    uint8_t mode = data[0];
    uint64_t limit = drop_limits[(mode >> 1) % 5];
    uint64_t drain = drain_caps[(mode >> 4) % 4];
    fuzz_rng rng = fuzz_rng_from(data, size);
    refusals ref;
    if (mode & 1) {
        cursor c = {data + 1, size - 1, 0};
        fuzz_buf in = heads_and_bodies(&c);
        fuzz_buf out = check_splits(in.p, in.n, limit, drain, &rng, &ref);
        FUZZ_CHECK(out.n == in.n && !memcmp(out.p, in.p, in.n),
                   "heads and Content-Length bodies changed: [%.*s] -> [%.*s]", (int)in.n, in.p,
                   (int)out.n, out.p);
        FUZZ_CHECK(ref.n == 0, "a stream without chunked bodies refused: %s", ref.msg[0]);
        free(out.p);
        free(in.p);
        return 0;
    }
    fuzz_buf out = check_splits((const char *)data + 1, size - 1, limit, drain, &rng, &ref);
    free(out.p);
    return 0;
}
