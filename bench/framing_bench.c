/*
 * framing_bench.c - what the chunked-body framing parser (server/framing.c)
 * costs the bytes it reads (docs/BENCHMARKS.md, "Chunked-body framing
 * parser").
 *
 *   framing_bench [RUNS]   for each stream: ns per request (or per MiB) through
 *                          framing_filter, as recv() runs it (16 KiB reads),
 *                          and memcpy of the same bytes in the same run as
 *                          the baseline; medians of RUNS (5)
 *
 * Streams: a wrk-style GET of /v1/health; a curl POST with a 1 KiB JSON body
 * (Content-Length); a 1 MiB chunked body in 16 KiB chunks, without and with a
 * 100-byte extension on every chunk (what gets dropped).
 *
 * Prints "key value" lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_internal.h"
#include "../tests/bench_stats.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct stream {
    const char *name;
    char *bytes;
    size_t n;
    size_t requests; /* requests in `bytes` */
} stream;

static void append(stream *s, const char *p, size_t n)
{
    s->bytes = realloc(s->bytes, s->n + n);
    if (!s->bytes)
        abort();
    memcpy(s->bytes + s->n, p, n);
    s->n += n;
}

static void append_str(stream *s, const char *p) { append(s, p, strlen(p)); }

/* `copies` requests of one kind, back to back on a connection. */
static stream make_get(size_t copies)
{
    stream s = {.name = "get_health", .requests = copies};
    for (size_t i = 0; i < copies; i++)
        append_str(&s, "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:8470\r\n\r\n");
    return s;
}

static stream make_post(size_t copies)
{
    stream s = {.name = "post_1k_json", .requests = copies};
    char body[1024];
    memset(body, ' ', sizeof body);
    memcpy(body, "{\"topology\":\"dgx1\",\"collective\":\"allgather\"}", 44);
    for (size_t i = 0; i < copies; i++) {
        append_str(&s, "POST /v1/synthesize HTTP/1.1\r\nHost: 127.0.0.1:8470\r\n"
                       "User-Agent: curl/7.88.1\r\nAccept: */*\r\n"
                       "Content-Type: application/json\r\nContent-Length: 1024\r\n\r\n");
        append(&s, body, sizeof body);
    }
    return s;
}

static stream make_chunked(const char *name, size_t ext)
{
    stream s = {.name = name, .requests = 1};
    append_str(&s, "POST /v1/synthesize HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    char data[16384];
    memset(data, 'x', sizeof data);
    char extension[128];
    memset(extension, 'e', sizeof extension);
    for (int c = 0; c < 64; c++) {
        append_str(&s, "4000");
        if (ext) {
            append_str(&s, ";");
            append(&s, extension, ext - 1);
        }
        append_str(&s, "\r\n");
        append(&s, data, sizeof data);
        append_str(&s, "\r\n");
    }
    append_str(&s, "0\r\n\r\n");
    return s;
}

/* Seconds to run `s` through the parser in 16 KiB reads, as recv() does,
 * `reps` times; or through memcpy when `baseline`. */
static double run(const stream *s, int reps, bool baseline, char *buf)
{
    double t0 = now_s();
    size_t sink = 0;
    for (int r = 0; r < reps; r++) {
        cs_framing *f = framing_new(FRAMING_DROP_LIMIT, 1u << 26);
        for (size_t pos = 0; pos < s->n;) {
            size_t k = s->n - pos < 16384 ? s->n - pos : 16384;
            memcpy(buf, s->bytes + pos, k);
            pos += k;
            sink += baseline ? k : framing_filter(f, buf, k, 16384);
        }
        framing_free(f);
    }
    double t = now_s() - t0;
    if (sink == 42) /* keep the loop */
        puts("");
    return t;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 100)
        runs = 5;
    stream streams[] = {make_get(1000), make_post(200), make_chunked("chunked_1mib", 0),
                        make_chunked("chunked_1mib_ext100", 100)};
    char *buf = malloc(16384);
    for (size_t i = 0; i < sizeof streams / sizeof *streams; i++) {
        const stream *s = &streams[i];
        int reps = s->requests > 1 ? 200 : 100;
        double parse[100], copy[100];
        for (int k = 0; k < runs; k++) {
            copy[k] = run(s, reps, true, buf);
            parse[k] = run(s, reps, false, buf);
        }
        double p = bench_median(parse, runs), c = bench_median(copy, runs);
        double units = s->requests > 1 ? (double)s->requests * reps : (double)s->n * reps / 1048576.0;
        const char *unit = s->requests > 1 ? "ns_per_request" : "ns_per_mib";
        printf("%s_bytes %zu\n", s->name, s->n / s->requests);
        printf("%s_parser_%s %.1f\n", s->name, unit, p / units * 1e9);
        printf("%s_memcpy_%s %.1f\n", s->name, unit, c / units * 1e9);
        printf("%s_parser_over_memcpy %.2f\n", s->name, p / c);
        free(s->bytes);
    }
    free(buf);
    return 0;
}
