/*
 * The request framing parser that stands between the socket and
 * libmicrohttpd's chunked-body parser (server/framing.c).  Every stream is
 * fed the way recv() feeds it to MHD - whole, in random pieces, and into
 * buffers too small for what the parser releases - and the bytes MHD would
 * read are compared with the canonical stream written out by hand here.
 * The daemon end to end (a 50 KB extension answered 400) is in
 * test_hardening.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "server_internal.h"

#define LIMIT 64
#define DRAIN 4096


static unsigned long long rng_state = 88172645463325252ull;
static unsigned rnd(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* Reads `in` as MHD reads a socket through recv(): each call offers a
 * buffer of `len` bytes (0: random 1..64), the held-back output comes
 * first, then at most what is left of the buffer is read from the stream
 * (`piece` bytes at most, 0: random) and filtered. */
static cs_buf mhd_reads(cs_framing *f, const char *in, size_t n, size_t len, size_t piece)
{
    cs_buf out = {0};
    size_t pos = 0;
    char buf[16384];
    for (int idle = 0; idle < 4;) {
        size_t l = len ? len : 1 + rnd(64);
        size_t got = framing_take_pending(f, buf, l);
        if (got < l && pos < n) {
            size_t k = piece ? piece : 1 + rnd(48);
            if (k > l - got)
                k = l - got;
            if (k > n - pos)
                k = n - pos;
            memcpy(buf + got, in + pos, k);
            pos += k;
            got += framing_filter(f, buf + got, k, l - got);
        }
        if (got)
            ck_assert(cs_buf_append(&out, buf, got));
        idle = (pos == n && got == 0) ? idle + 1 : 0;
    }
    if (!out.s)
        ck_assert(cs_buf_puts(&out, ""));
    return out;
}

/* The output of `in` fed whole, in 1-byte pieces into 1-byte buffers, and
 * in random pieces into random buffers, must be `want` every time. */
static void check_stream(const char *in, size_t n, const char *want, size_t want_n)
{
    size_t lens[] = {4096, 1, 2, 3, 0, 0, 0};
    size_t pieces[] = {0, 1, 1, 2, 0, 0, 0};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        cs_framing *f = framing_new(LIMIT, DRAIN);
        cs_buf out = mhd_reads(f, in, n, lens[i], i == 0 ? n : pieces[i]);
        ck_assert_msg(out.len == want_n && !memcmp(out.s, want, want_n),
                      "run %zu (len %zu): got %zu bytes [%.*s], want %zu [%.*s]", i, lens[i],
                      out.len, (int)out.len, out.s, want_n, (int)want_n, want);
        cs_buf_free(&out);
        framing_free(f);
    }
}

#define CHECK(in, want) check_stream(in, sizeof in - 1, want, sizeof want - 1)

START_TEST(heads_and_length_bodies_pass_unchanged)
{
    /* GETs, a Content-Length body holding what looks like chunk lines and a
     * request head, empty lines before a request line, bare LF line ends */
    static const char in[] =
        "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
        "POST /v1/synthesize HTTP/1.1\r\nContent-Length: 42\r\nX-Transfer-Encoding: chunked\r\n\r\n"
        "5;ext=aaaa\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        "\r\n\n"
        "GET /x HTTP/1.0\nHost: y\n\n"
        "PUT /a HTTP/1.1\r\ncontent-length:3\r\n\r\nabc";
    CHECK(in, in);
}
END_TEST

START_TEST(chunk_extensions_leading_zeros_and_trailers_are_dropped)
{
    static const char in[] =
        "POST /v1/synthesize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;name=value;other=\"quoted;\\r\"\r\nhello\r\n"
        "0000a;x\r\n0123456789\r\n"
        "00B\n01234567890\n"
        "000;last=1\r\nTrailer-One: 1\r\nTrailer-Two: 2\r\n\r\n"
        "GET /next HTTP/1.1\r\n\r\n";
    static const char want[] =
        "POST /v1/synthesize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n"
        "a\r\n0123456789\r\n"
        "B\n01234567890\n"
        "0\r\n\r\n"
        "GET /next HTTP/1.1\r\n\r\n";
    CHECK(in, want);
}
END_TEST

START_TEST(framing_follows_libmicrohttpds_header_rules)
{
    /* the value must be exactly "chunked" (any case); only the first
     * Transfer-Encoding counts, and it wins over Content-Length */
    static const char upper[] =
        "POST / HTTP/1.1\r\nTRANSFER-ENCODING:   ChUnKeD\r\nTransfer-Encoding: gzip\r\n"
        "Content-Length: 3\r\n\r\n3;e\r\nabc\r\n0\r\n\r\n";
    static const char upper_want[] =
        "POST / HTTP/1.1\r\nTRANSFER-ENCODING:   ChUnKeD\r\nTransfer-Encoding: gzip\r\n"
        "Content-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    CHECK(upper, upper_want);
    /* other codings, a blank before the colon (another header name for
     * MHD), a folded value: left alone, byte for byte, from there on */
    static const char gzip[] =
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3;e\r\nabc\r\n0\r\n\r\n";
    CHECK(gzip, gzip);
    static const char blank[] =
        "POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n3;e\r\nabc\r\n0\r\n\r\n";
    CHECK(blank, blank);
    static const char folded[] =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n  ,gzip\r\n\r\n3;e\r\nabc\r\n0\r\n\r\n";
    CHECK(folded, folded);
    /* a bad Content-Length: MHD refuses and closes; nothing is touched */
    static const char badlen[] =
        "POST / HTTP/1.1\r\nContent-Length: 3x\r\n\r\n3;e\r\nabc\r\n0\r\n\r\n";
    CHECK(badlen, badlen);
}
END_TEST

START_TEST(malformed_chunk_lines_reach_libmicrohttpd_as_they_came)
{
    /* a blank after the digits, no digits, a CR not before LF, no CRLF
     * after the data: MHD answers its own 400 to each */
    static const char sp[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "5 ;e\r\nhello\r\n0\r\n\r\n";
    CHECK(sp, sp);
    static const char nodigit[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  ";e\r\nhello\r\n0\r\n\r\n";
    CHECK(nodigit, nodigit);
    static const char cr[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "5\rx\r\nhello\r\n0\r\n\r\n";
    CHECK(cr, cr);
    static const char nocrlf[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "2;e\r\nhelloX;e\r\n";
    static const char nocrlf_want[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      "2\r\nhelloX;e\r\n";
    CHECK(nocrlf, nocrlf_want);
}
END_TEST

/* A request over the limit: MHD sees the chunks before the line that went
 * over, then the body's end; the refusal belongs to that request only. */
START_TEST(over_the_limit_the_body_ends_and_the_request_is_refused)
{
    char in[1024], want[1024];
    char ext[LIMIT + 2];
    memset(ext, 'x', sizeof ext - 1);
    ext[sizeof ext - 1] = '\0';
    int n = snprintf(in, sizeof in,
                     "GET /first HTTP/1.1\r\n\r\n"
                     "POST /second HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n4;%s\r\ndefg\r\n2\r\nhi\r\n0\r\nT: 1\r\n\r\n"
                     "GET /third HTTP/1.1\r\n\r\n",
                     ext);
    int w = snprintf(want, sizeof want,
                     "GET /first HTTP/1.1\r\n\r\n"
                     "POST /second HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n0\r\n\r\n"
                     "GET /third HTTP/1.1\r\n\r\n");
    check_stream(in, (size_t)n, want, (size_t)w);

    cs_framing *f = framing_new(LIMIT, DRAIN);
    cs_buf out = mhd_reads(f, in, (size_t)n, 0, 0);
    cs_buf_free(&out);
    int status = 0;
    bool close = true;
    char msg[256];
    /* the handler numbers requests as MHD hands them over */
    unsigned long long first = framing_request_begins(f);
    ck_assert(!framing_take_refusal(f, first, &status, &close, msg, sizeof msg));
    unsigned long long second = framing_request_begins(f);
    ck_assert(framing_take_refusal(f, second, &status, &close, msg, sizeof msg));
    ck_assert_int_eq(status, 400);
    ck_assert(!close); /* the body was read to its end: the connection goes on */
    ck_assert_msg(strstr(msg, "64 bytes") && strstr(msg, "chunk extensions"), "%s", msg);
    ck_assert(!framing_take_refusal(f, second, &status, &close, msg, sizeof msg)); /* once */
    unsigned long long third = framing_request_begins(f);
    ck_assert(!framing_take_refusal(f, third, &status, &close, msg, sizeof msg));
    framing_free(f);
}
END_TEST

START_TEST(small_extensions_add_up_and_trailers_count)
{
    /* 20 chunks with a 4-byte extension each: 80 > 64 dropped bytes */
    cs_buf in = {0}, want = {0};
    const char *head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    ck_assert(cs_buf_puts(&in, head));
    ck_assert(cs_buf_puts(&want, head));
    for (int i = 0; i < 20; i++) {
        ck_assert(cs_buf_puts(&in, "1;abc\r\nz\r\n"));
        if ((i + 1) * 4 <= LIMIT)
            ck_assert(cs_buf_puts(&want, "1\r\nz\r\n"));
    }
    ck_assert(cs_buf_puts(&in, "0\r\n\r\n"));
    ck_assert(cs_buf_puts(&want, "0\r\n\r\n"));
    check_stream(in.s, in.len, want.s, want.len);
    cs_buf_free(&in);
    cs_buf_free(&want);

    /* trailer fields over the limit: the last chunk went out already */
    char trailer[512];
    char value[LIMIT + 8];
    memset(value, 'v', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    int n = snprintf(trailer, sizeof trailer,
                     "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "2\r\nok\r\n0\r\nX-T: %s\r\n\r\n",
                     value);
    static const char twant[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                "2\r\nok\r\n0\r\n\r\n";
    check_stream(trailer, (size_t)n, twant, sizeof twant - 1);
    cs_framing *f = framing_new(LIMIT, DRAIN);
    cs_buf out = mhd_reads(f, trailer, (size_t)n, 0, 0);
    cs_buf_free(&out);
    int status;
    bool close;
    char msg[256];
    ck_assert(framing_take_refusal(f, framing_request_begins(f), &status, &close, msg,
                                   sizeof msg));
    ck_assert_int_eq(status, 400);
    framing_free(f);
}
END_TEST

/* Past the drain cap MHD gets the body's end at once, the rest of the
 * connection is thrown away, and the answer closes it. */
START_TEST(past_the_drain_cap_the_connection_closes)
{
    cs_buf in = {0};
    const char *head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;";
    ck_assert(cs_buf_puts(&in, head));
    for (int i = 0; i < DRAIN / 8 + LIMIT; i++)
        ck_assert(cs_buf_puts(&in, "xxxxxxxx"));
    ck_assert(cs_buf_puts(&in, "\r\nz\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n"));
    static const char want[] =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    check_stream(in.s, in.len, want, sizeof want - 1);
    cs_framing *f = framing_new(LIMIT, DRAIN);
    cs_buf out = mhd_reads(f, in.s, in.len, 0, 0);
    cs_buf_free(&out);
    int status;
    bool close = false;
    char msg[256];
    ck_assert(framing_take_refusal(f, framing_request_begins(f), &status, &close, msg,
                                   sizeof msg));
    ck_assert_int_eq(status, 400);
    ck_assert(close);
    framing_free(f);
    cs_buf_free(&in);

    /* a size beyond 64 bits: MHD's 413, and the body's end cannot be found */
    static const char big[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "4\r\nabcd\r\n10000000000000000\r\nxx";
    static const char big_want[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "4\r\nabcd\r\n0\r\n\r\n";
    CHECK(big, big_want);
    f = framing_new(LIMIT, DRAIN);
    out = mhd_reads(f, big, sizeof big - 1, 0, 0);
    cs_buf_free(&out);
    ck_assert(framing_take_refusal(f, framing_request_begins(f), &status, &close, msg,
                                   sizeof msg));
    ck_assert_int_eq(status, 413);
    ck_assert(close);
    framing_free(f);
}
END_TEST

/* Random chunked bodies with random extensions under the limit: MHD always
 * reads the same stream with the extensions taken out. */
START_TEST(random_chunked_streams)
{
    for (int round = 0; round < 300; round++) {
        cs_buf in = {0}, want = {0};
        int requests = 1 + (int)rnd(3);
        for (int q = 0; q < requests; q++) {
            const char *head = rnd(2) ? "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      : "POST /b HTTP/1.1\ntransfer-encoding:chunked\n\n";
            ck_assert(cs_buf_puts(&in, head));
            ck_assert(cs_buf_puts(&want, head));
            int chunks = (int)rnd(4);
            size_t budget = LIMIT;
            for (int c = 0; c <= chunks; c++) {
                size_t size = c == chunks ? 0 : 1 + rnd(40);
                size_t zeros = rnd(3);
                size_t ext = rnd(6);
                if (zeros + (ext ? ext + 1 : 0) > budget)
                    zeros = 0, ext = 0;
                budget -= zeros + (ext ? ext + 1 : 0);
                const char *eol = rnd(2) ? "\r\n" : "\n";
                char line[128];
                int k = 0;
                for (size_t z = 0; z < zeros; z++)
                    line[k++] = '0';
                k += snprintf(line + k, sizeof line - (size_t)k, "%zx", size);
                if (ext) {
                    line[k++] = ';';
                    for (size_t e = 0; e < ext; e++)
                        line[k++] = "ab=\"\r;"[rnd(6)];
                }
                /* a CR that ends the extension makes the LF a CRLF */
                bool crlf = !strcmp(eol, "\r\n") || (ext && line[k - 1] == '\r');
                k += snprintf(line + k, sizeof line - (size_t)k, "%s", eol);
                ck_assert(cs_buf_append(&in, line, (size_t)k));
                char canon[32];
                int ck = snprintf(canon, sizeof canon, "%zx%s", size, crlf ? "\r\n" : "\n");
                ck_assert(cs_buf_append(&want, canon, (size_t)ck));
                if (size) {
                    char data[64];
                    for (size_t d = 0; d < size; d++)
                        data[d] = "0;\r\nxyz"[rnd(7)];
                    ck_assert(cs_buf_append(&in, data, size));
                    ck_assert(cs_buf_append(&want, data, size));
                    ck_assert(cs_buf_puts(&in, eol));
                    ck_assert(cs_buf_puts(&want, eol));
                }
            }
            const char *end = rnd(2) ? "\r\n" : "\n";
            ck_assert(cs_buf_puts(&in, end));
            ck_assert(cs_buf_puts(&want, end));
        }
        check_stream(in.s, in.len, want.s, want.len);
        cs_buf_free(&in);
        cs_buf_free(&want);
    }
}
END_TEST

/* The daemon's own limit: a 30,000-byte extension is dropped whole, in
 * reads of any size, and the request goes on. */
START_TEST(long_extension_under_the_daemons_limit)
{
    cs_buf in = {0};
    const char *head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;e=";
    ck_assert(cs_buf_puts(&in, head));
    for (int i = 0; i < 3000; i++)
        ck_assert(cs_buf_puts(&in, "0123456789"));
    ck_assert(cs_buf_puts(&in, "\r\nhello\r\n0\r\n\r\n"));
    static const char want[] =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    size_t lens[] = {4096, 16384, 1, 7};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        cs_framing *f = framing_new(FRAMING_DROP_LIMIT, 1 << 20);
        cs_buf out = mhd_reads(f, in.s, in.len, lens[i], lens[i] > 64 ? 65536 : 1);
        ck_assert_msg(out.len == sizeof want - 1 && !memcmp(out.s, want, out.len),
                      "len %zu: got %zu bytes [%.*s]", lens[i], out.len, (int)out.len, out.s);
        int status;
        bool close;
        char msg[256];
        ck_assert(!framing_take_refusal(f, framing_request_begins(f), &status, &close, msg,
                                        sizeof msg));
        cs_buf_free(&out);
        framing_free(f);
    }
    cs_buf_free(&in);
}
END_TEST

/* Any byte stream, however it is split into reads: the same bytes reach
 * MHD, and never more than a few bytes beyond what came in. */
START_TEST(any_stream_split_anywhere_reads_the_same)
{
    static const char *tokens[] = {
        "POST / HTTP/1.1\r\n", "GET / HTTP/1.1\r\n", "Transfer-Encoding: chunked\r\n",
        "transfer-encoding:chunked\n", "Content-Length: 3\r\n", "Content-Length: 0\r\n",
        "\r\n", "\n", "\r", ";", "0", "00", "5", "a", "F", "x", ":", " ", "\t", "=",
        "\"", "abc", "0\r\n\r\n", "3;e=1\r\n", "ffffffffffffffffff",
    };
    size_t ntok = sizeof tokens / sizeof *tokens;
    for (int round = 0; round < 2000; round++) {
        cs_buf in = {0};
        int k = 1 + (int)rnd(60);
        for (int i = 0; i < k; i++) {
            const char *t = tokens[rnd((unsigned)ntok)];
            ck_assert(cs_buf_puts(&in, t));
        }
        cs_framing *f = framing_new(LIMIT, DRAIN);
        cs_buf whole = mhd_reads(f, in.s, in.len, 4096, in.len);
        framing_free(f);
        ck_assert_uint_le(whole.len, in.len + 8);
        for (int split = 0; split < 3; split++) {
            f = framing_new(LIMIT, DRAIN);
            cs_buf part = mhd_reads(f, in.s, in.len, split == 0 ? 1 : 0, split == 0 ? 1 : 0);
            ck_assert_msg(part.len == whole.len && !memcmp(part.s, whole.s, whole.len),
                          "round %d split %d: [%.*s] vs [%.*s] from [%.*s]", round, split,
                          (int)part.len, part.s, (int)whole.len, whole.s, (int)in.len, in.s);
            cs_buf_free(&part);
            framing_free(f);
        }
        cs_buf_free(&whole);
        cs_buf_free(&in);
    }
}
END_TEST

/* MHD takes a short read for a drained socket and waits for the next epoll
 * edge: recv() on a filtered socket may return less than asked only when
 * the kernel holds nothing more, however much of what it read was dropped. */
START_TEST(short_reads_only_when_the_socket_is_drained)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    ck_assert(framing_attach(sv[0], FRAMING_DROP_LIMIT, 1 << 20));
    cs_buf in = {0};
    ck_assert(cs_buf_puts(&in, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;e="));
    for (int i = 0; i < 3000; i++)
        ck_assert(cs_buf_puts(&in, "0123456789"));
    ck_assert(cs_buf_puts(&in, "\r\nhello\r\n0\r\n\r\n"));
    ck_assert_int_eq(write(sv[1], in.s, in.len), (ssize_t)in.len);
    cs_buf out = {0};
    char buf[16384];
    for (;;) {
        size_t len = out.len == 0 ? sizeof buf : 100;
        ssize_t got = recv(sv[0], buf, len, 0);
        if (got < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            break;
        }
        ck_assert(cs_buf_append(&out, buf, (size_t)got));
        if ((size_t)got < len) {
            char peek;
            ck_assert_int_eq(recvfrom(sv[0], &peek, 1, MSG_PEEK | MSG_DONTWAIT, NULL, NULL), -1);
            ck_assert_int_eq(errno, EAGAIN);
            break;
        }
    }
    static const char want[] =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    ck_assert_uint_eq(out.len, sizeof want - 1);
    ck_assert(!memcmp(out.s, want, out.len));
    /* a socket that is not registered reads as the kernel has it */
    framing_detach(sv[0]);
    ck_assert_int_eq(write(sv[1], "5;e\r\n", 5), 5);
    ck_assert_int_eq(recv(sv[0], buf, sizeof buf, 0), 5);
    ck_assert(!memcmp(buf, "5;e\r\n", 5));
    close(sv[0]);
    close(sv[1]);
    cs_buf_free(&in);
    cs_buf_free(&out);
}
END_TEST

/* Two refused requests in one pipelined stream: the parser refuses the
 * second before the handler has taken the first one's refusal.  The first
 * must still be refused (its body reached MHD cut short: answering it as if
 * it were whole would act on a body the client did not send), and the
 * second must not reach MHD as a whole request either. */
START_TEST(pipelined_refusals_are_not_lost)
{
    char ext[LIMIT + 2];
    memset(ext, 'x', sizeof ext - 1);
    ext[sizeof ext - 1] = '\0';
    char in[1024];
    int n = snprintf(in, sizeof in,
                     "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n4;%s\r\ndefg\r\n0\r\n\r\n"
                     "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "2\r\nhi\r\n4;%s\r\nwxyz\r\n0\r\n\r\n"
                     "GET /c HTTP/1.1\r\n\r\n",
                     ext, ext);
    /* the second request's body reaches MHD with a chunk line it calls
     * malformed (MHD answers its own 400 and closes); nothing after it */
    static const char want[] = "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "3\r\nabc\r\n0\r\n\r\n"
                               "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "2\r\nhi\r\nx\r\n";
    check_stream(in, (size_t)n, want, sizeof want - 1);
    cs_framing *f = framing_new(LIMIT, DRAIN);
    cs_buf out = mhd_reads(f, in, (size_t)n, 4096, (size_t)n); /* all of it in one read */
    cs_buf_free(&out);
    int status = 0;
    bool close = false;
    char msg[256];
    ck_assert(framing_take_refusal(f, framing_request_begins(f), &status, &close, msg,
                                   sizeof msg));
    ck_assert_int_eq(status, 400);
    framing_free(f);

    /* a refusal the handler never took (MHD answered that request another
     * way) does not stand in the way of a later one */
    const char *b_body = strstr(in, "2\r\nhi");
    size_t first = (size_t)(b_body - in);
    f = framing_new(LIMIT, DRAIN);
    out = mhd_reads(f, in, first, 4096, first); /* /a and /b's head */
    cs_buf_free(&out);
    framing_request_begins(f); /* /a, answered without looking */
    unsigned long long b = framing_request_begins(f);
    out = mhd_reads(f, b_body, (size_t)n - first, 4096, (size_t)n - first);
    static const char b_want[] = "2\r\nhi\r\n0\r\n\r\nGET /c HTTP/1.1\r\n\r\n";
    ck_assert_msg(out.len == sizeof b_want - 1 && !memcmp(out.s, b_want, out.len), "[%.*s]",
                  (int)out.len, out.s);
    cs_buf_free(&out);
    ck_assert(framing_take_refusal(f, b, &status, &close, msg, sizeof msg));
    ck_assert_int_eq(status, 400);
    framing_free(f);
}
END_TEST

/* Once a connection is given up on (past the drain cap), one recv() call
 * returns what MHD needs (the body's end) and reads nothing more: a client
 * that keeps sending must not hold the worker thread in a loop of reads
 * that are all thrown away. */
START_TEST(given_up_connection_is_not_read_on)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    ck_assert(framing_attach(sv[0], LIMIT, DRAIN));
    cs_buf in = {0};
    ck_assert(cs_buf_puts(&in, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;"));
    while (in.len < 96 * 1024)
        ck_assert(cs_buf_puts(&in, "xxxxxxxxxxxxxxxx"));
    ck_assert_int_eq(write(sv[1], in.s, in.len), (ssize_t)in.len);
    char buf[16384];
    ssize_t got = recv(sv[0], buf, sizeof buf, 0);
    static const char want[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    ck_assert_int_eq(got, (ssize_t)(sizeof want - 1));
    ck_assert(!memcmp(buf, want, sizeof want - 1));
    /* most of what the client sent is still in the kernel, unread */
    int queued = 0;
    ck_assert_int_eq(ioctl(sv[0], FIONREAD, &queued), 0);
    ck_assert_int_gt(queued, 64 * 1024);
    errno = 0;
    ck_assert_int_eq(recv(sv[0], buf, sizeof buf, 0), -1);
    ck_assert_int_eq(errno, EAGAIN);
    framing_detach(sv[0]);
    close(sv[0]);
    close(sv[1]);
    cs_buf_free(&in);
}
END_TEST

/* The handler refused a request and reads no more of its body (past the
 * drain cap): the parser gives MHD the body's end at the next chunk-size
 * line - after the chunk in progress, never inside it - and then nothing. */
START_TEST(the_handler_can_end_a_chunked_body)
{
    static const char head[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    static const char rest[] = "5;e=1\r\nhello\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    size_t hn = sizeof head - 1, rn = sizeof rest - 1;
    /* asked at every point of the body: MHD sees whole chunks, then the end
     * (a chunk whose size line is not complete yet is not begun) */
    for (size_t cut = 0; cut <= 14; cut++) {
        cs_framing *f = framing_new(LIMIT, DRAIN);
        cs_buf in = {0};
        ck_assert(cs_buf_append(&in, head, hn));
        ck_assert(cs_buf_append(&in, rest, cut));
        cs_buf a = mhd_reads(f, in.s, in.len, 4096, in.len);
        unsigned long long seq = framing_request_begins(f);
        ck_assert(framing_end_body(f, seq));
        cs_buf b = mhd_reads(f, rest + cut, rn - cut, 4096, rn - cut);
        ck_assert(cs_buf_append(&a, b.s, b.len));
        const char *want = cut < 7 ? "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                                    : "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      "5\r\nhello\r\n0\r\n\r\n";
        ck_assert_msg(a.len == strlen(want) && !memcmp(a.s, want, a.len), "cut %zu: [%.*s]", cut,
                      (int)a.len, a.s);
        cs_buf_free(&a);
        cs_buf_free(&b);
        cs_buf_free(&in);
        framing_free(f);
    }
    /* a chunk with more than the drain cap to come, a Content-Length body,
     * a connection left to MHD: the parser cannot end them */
    const char *cannot[] = {
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffff\r\nabc",
        "POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc",
    };
    for (size_t i = 0; i < sizeof cannot / sizeof *cannot; i++) {
        cs_framing *f = framing_new(LIMIT, DRAIN);
        cs_buf a = mhd_reads(f, cannot[i], strlen(cannot[i]), 4096, strlen(cannot[i]));
        ck_assert_msg(!framing_end_body(f, framing_request_begins(f)), "%s", cannot[i]);
        cs_buf_free(&a);
        framing_free(f);
    }
}
END_TEST

/* On a socket: the body's end comes at the next read even when the client
 * sends nothing more, and what it did send after is not read. */
START_TEST(an_ended_body_needs_no_more_input)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    ck_assert(framing_attach(sv[0], LIMIT, DRAIN));
    static const char in[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n";
    ck_assert_int_eq(write(sv[1], in, sizeof in - 1), (ssize_t)(sizeof in - 1));
    char buf[256];
    ck_assert_int_eq(recv(sv[0], buf, sizeof buf, 0), (ssize_t)(sizeof in - 1));
    cs_framing *f = framing_of(sv[0]);
    ck_assert(framing_end_body(f, framing_request_begins(f)));
    ck_assert_int_eq(recv(sv[0], buf, sizeof buf, 0), 5);
    ck_assert(!memcmp(buf, "0\r\n\r\n", 5));
    ck_assert_int_eq(write(sv[1], "3\r\nabc\r\n", 8), 8);
    errno = 0;
    ck_assert_int_eq(recv(sv[0], buf, sizeof buf, 0), -1);
    ck_assert_int_eq(errno, EAGAIN);
    int queued = 0;
    ck_assert_int_eq(ioctl(sv[0], FIONREAD, &queued), 0);
    ck_assert_int_eq(queued, 8);
    framing_detach(sv[0]);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

static Suite *framing_suite(void)
{
    Suite *s = suite_create("framing");
    TCase *tc = tcase_create("parser");
    tcase_add_test(tc, heads_and_length_bodies_pass_unchanged);
    tcase_add_test(tc, chunk_extensions_leading_zeros_and_trailers_are_dropped);
    tcase_add_test(tc, framing_follows_libmicrohttpds_header_rules);
    tcase_add_test(tc, malformed_chunk_lines_reach_libmicrohttpd_as_they_came);
    tcase_add_test(tc, over_the_limit_the_body_ends_and_the_request_is_refused);
    tcase_add_test(tc, small_extensions_add_up_and_trailers_count);
    tcase_add_test(tc, past_the_drain_cap_the_connection_closes);
    tcase_add_test(tc, random_chunked_streams);
    tcase_add_test(tc, long_extension_under_the_daemons_limit);
    tcase_add_test(tc, any_stream_split_anywhere_reads_the_same);
    tcase_add_test(tc, short_reads_only_when_the_socket_is_drained);
    tcase_add_test(tc, pipelined_refusals_are_not_lost);
    tcase_add_test(tc, given_up_connection_is_not_read_on);
    tcase_add_test(tc, the_handler_can_end_a_chunked_body);
    tcase_add_test(tc, an_ended_body_needs_no_more_input);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(framing_suite)
