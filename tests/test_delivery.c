/*
 * Integration tests of result delivery (server/delivery.c, encoding.c, the
 * store's encoded results): the real daemon on loopback, spoken to over HTTP.
 *
 * - every representation (JSON, ?size=, ?alg=, rank slices, summaries,
 *   MSCCL XML, CUDA) has an ETag and answers 304 to If-None-Match;
 * - gzip and zstd bodies decompress to exactly the identity body, for
 *   documents kept in memory and for streamed ones;
 * - one connection serves many requests (keep-alive), for cached and fresh
 *   answers alike;
 * - a result too large to keep in memory streams, and is the exact jansson
 *   dump of its own document; its rank slices hold exactly the sends of
 *   those ranks;
 * - a store written before the codec (JSON results) is read as it was and
 *   migrated;
 * - metrics say where each answer came from;
 * - the answers kept with a representation, shared by every request, are
 *   right for each coding, condition and origin under concurrent requests;
 * - refusals are remembered (same body, same key) and counted.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "check_main.h"
#include "daemon_check.h"
#include "server_harness.h"
#include "synthesize.h"
#include "verify.h"

static void start(cs_daemon *d, const char *data_dir, const char *const *extra)
{
    ck_assert_msg(daemon_start(d, NULL, data_dir, extra) == 0, "daemon did not start");
}

/* POSTs and waits; returns the result key. */
static void synthesize(const cs_daemon *d, const char *body, char key[65])
{
    http_resp r;
    ck_assert_int_eq(http_request(d, "POST", "/v1/synthesize", body, NULL, &r), 0);
    ck_assert_msg(r.status == 200, "POST %s: %ld %.300s", body, r.status, r.body);
    json_t *doc = resp_json(&r);
    snprintf(key, 65, "%s", json_string_value(json_object_get(doc, "key")));
    ck_assert_int_eq(strlen(key), 64);
    json_decref(doc);
    http_resp_free(&r);
}

static http_resp get(const cs_daemon *d, const char *path, const char *const *headers)
{
    http_resp r;
    ck_assert_int_eq(http_request(d, "GET", path, NULL, headers, &r), 0);
    return r;
}

static char *gunzip(const char *data, size_t len, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
    size_t cap = len * 8 + 1024, n = 0;
    char *out = malloc(cap);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    int rc;
    do {
        if (n == cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        z.next_out = (Bytef *)out + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        ck_assert_msg(rc == Z_OK || rc == Z_STREAM_END, "not a gzip stream (%d)", rc);
        n = cap - z.avail_out;
    } while (rc != Z_STREAM_END);
    inflateEnd(&z);
    *out_len = n;
    return out;
}

static char *unzstd(const char *data, size_t len, size_t *out_len)
{
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_initDStream(ds);
    size_t cap = len * 8 + 1024, n = 0;
    char *out = malloc(cap);
    ZSTD_inBuffer in = {data, len, 0};
    size_t r = 1;
    while (in.pos < in.size || r != 0) {
        if (n == cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        ZSTD_outBuffer o = {out + n, cap - n, 0};
        r = ZSTD_decompressStream(ds, &o, &in);
        ck_assert_msg(!ZSTD_isError(r), "not a zstd stream: %s", ZSTD_getErrorName(r));
        n += o.pos;
        if (o.pos == 0 && in.pos == in.size && r != 0)
            ck_abort_msg("truncated zstd stream");
    }
    ZSTD_freeDStream(ds);
    *out_len = n;
    return out;
}

/* The identity body, and the same path under each coding, decompressed. */
static void check_codings(const cs_daemon *d, const char *path)
{
    http_resp id = get(d, path, NULL);
    ck_assert_msg(id.status == 200, "%s: %ld", path, id.status);
    char buf[256];
    ck_assert_ptr_null(http_header(&id, "Content-Encoding", buf, sizeof buf));
    ck_assert_ptr_nonnull(http_header(&id, "Vary", buf, sizeof buf));
    ck_assert_str_eq(buf, "Accept-Encoding");
    const char *gz[] = {"Accept-Encoding: gzip", NULL};
    const char *zs[] = {"Accept-Encoding: gzip;q=0.5, zstd", NULL};
    for (int k = 0; k < 2; k++) {
        http_resp r = get(d, path, k ? zs : gz);
        ck_assert_int_eq(r.status, 200);
        ck_assert_ptr_nonnull(http_header(&r, "Content-Encoding", buf, sizeof buf));
        ck_assert_str_eq(buf, k ? "zstd" : "gzip");
        size_t n = 0;
        char *plain = k ? unzstd(r.body, r.len, &n) : gunzip(r.body, r.len, &n);
        ck_assert_msg(n == id.len && memcmp(plain, id.body, n) == 0,
                      "%s: %s body differs from identity (%zu vs %zu bytes)", path,
                      k ? "zstd" : "gzip", n, id.len);
        free(plain);
        /* each coding has its own ETag */
        char e1[128], e2[128];
        ck_assert_ptr_nonnull(http_header(&r, "ETag", e1, sizeof e1));
        ck_assert_ptr_nonnull(http_header(&id, "ETag", e2, sizeof e2));
        ck_assert_str_ne(e1, e2);
        http_resp_free(&r);
    }
    /* a coding refused with q=0 is not used */
    const char *no[] = {"Accept-Encoding: zstd;q=0, gzip;q=0", NULL};
    http_resp r = get(d, path, no);
    ck_assert_ptr_null(http_header(&r, "Content-Encoding", buf, sizeof buf));
    ck_assert(r.len == id.len && memcmp(r.body, id.body, id.len) == 0);
    http_resp_free(&r);
    http_resp_free(&id);
}

static void check_etag(const cs_daemon *d, const char *path, const char *other_path)
{
    http_resp r = get(d, path, NULL);
    ck_assert_msg(r.status == 200, "%s: %ld %.200s", path, r.status, r.body);
    char etag[128], other[128];
    ck_assert_ptr_nonnull(http_header(&r, "ETag", etag, sizeof etag));
    ck_assert_int_eq(etag[0], '"');
    http_resp_free(&r);
    char h[300];
    const char *hdr[] = {h, NULL};
    snprintf(h, sizeof h, "If-None-Match: %s", etag);
    r = get(d, path, hdr);
    ck_assert_msg(r.status == 304, "%s with its ETag: %ld", path, r.status);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_ptr_nonnull(http_header(&r, "ETag", other, sizeof other));
    ck_assert_str_eq(other, etag);
    http_resp_free(&r);
    /* in a list, weak, or "*" */
    snprintf(h, sizeof h, "If-None-Match: \"nope\", W/%s", etag);
    r = get(d, path, hdr);
    ck_assert_int_eq(r.status, 304);
    http_resp_free(&r);
    /* another representation's tag does not match */
    r = get(d, other_path, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(http_header(&r, "ETag", other, sizeof other));
    ck_assert_str_ne(other, etag);
    http_resp_free(&r);
    snprintf(h, sizeof h, "If-None-Match: %s", other);
    r = get(d, path, hdr);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
}

START_TEST(etags_codings_and_views)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    char key[65];
    synthesize(&d, "{\"topology\":\"dgx1\",\"collective\":\"allgather\",\"method\":\"smt\","
                   "\"options\":{\"wait_s\":120}}",
               key);
    const char *views[] = {"",
                           "?size=1048576",
                           "?alg=1",
                           "?rank=3",
                           "?ranks=2-5",
                           "?view=summary",
                           "?alg=0&rank=7",
                           "?format=msccl-xml",
                           "?format=msccl-xml&alg=1&runtime=msccl",
                           "?format=cuda"};
    size_t nv = sizeof views / sizeof views[0];
    for (size_t i = 0; i < nv; i++) {
        char path[300], other[300];
        snprintf(path, sizeof path, "/v1/results/%s%s", key, views[i]);
        snprintf(other, sizeof other, "/v1/results/%s%s", key, views[(i + 1) % nv]);
        check_etag(&d, path, other);
        check_codings(&d, path);
    }
    /* the views hold what they say */
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s?ranks=2-5", key);
    http_resp r = get(&d, path, NULL);
    json_t *doc = resp_json(&r);
    json_t *slice = json_object_get(json_object_get(doc, "slice"), "ranks");
    ck_assert_int_eq(json_integer_value(json_array_get(slice, 0)), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(slice, 1)), 5);
    json_t *fr = json_object_get(doc, "frontier");
    ck_assert_int_eq(json_array_size(fr), 2);
    size_t k;
    json_t *s;
    json_array_foreach(json_object_get(json_array_get(fr, 1), "sends"), k, s) {
        long src = json_integer_value(json_object_get(s, "src"));
        long dst = json_integer_value(json_object_get(s, "dst"));
        ck_assert((src >= 2 && src <= 5) || (dst >= 2 && dst <= 5));
    }
    json_decref(doc);
    http_resp_free(&r);
    snprintf(path, sizeof path, "/v1/results/%s?view=summary", key);
    r = get(&d, path, NULL);
    doc = resp_json(&r);
    json_t *a0 = json_array_get(json_object_get(doc, "frontier"), 0);
    ck_assert_ptr_null(json_object_get(a0, "sends"));
    ck_assert_int_gt(json_integer_value(json_object_get(a0, "nsends")), 0);
    json_decref(doc);
    http_resp_free(&r);
    /* a 304 needs the result to exist */
    const char *star[] = {"If-None-Match: *", NULL};
    char missing[100];
    snprintf(missing, sizeof missing, "/v1/results/%064d", 7);
    r = get(&d, missing, star);
    ck_assert_int_eq(r.status, 404);
    http_resp_free(&r);
    /* bad slices and views name their parameter */
    struct { const char *q; const char *field; } bad[] = {
        {"?rank=8", "rank"},          {"?ranks=3-2", "ranks"},     {"?ranks=1-99", "ranks"},
        {"?ranks=4", "ranks"},        {"?rank=-1", "rank"},        {"?rank=1&ranks=1-2", "ranks"},
        {"?view=tiny", "view"},       {"?view=summary&rank=1", "view"},
        {"?format=cuda&view=summary", "view"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "/v1/results/%s%s", key, bad[i].q);
        r = get(&d, path, NULL);
        ck_assert_msg(r.status == 400, "%s gave %ld", bad[i].q, r.status);
        doc = resp_json(&r);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "error"), "field")),
                         bad[i].field);
        json_decref(doc);
        http_resp_free(&r);
    }
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ---- keep-alive ------------------------------------------------------------------------ */

/* Reads one HTTP/1.1 response (Content-Length bodies) from fd into buf;
 * returns its status, or -1 when the connection closed. */
static int read_response(int fd, char *buf, size_t cap, bool *closes)
{
    size_t n = 0;
    char *end = NULL;
    while (!(end = memmem(buf, n, "\r\n\r\n", 4))) {
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k <= 0)
            return -1;
        n += (size_t)k;
        buf[n] = '\0';
    }
    size_t head = (size_t)(end + 4 - buf);
    const char *cl = strcasestr(buf, "Content-Length:");
    ck_assert_ptr_nonnull(cl);
    size_t body = (size_t)atol(cl + 15);
    *closes = strcasestr(buf, "Connection: close") != NULL;
    while (n < head + body) {
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k <= 0)
            return -1;
        n += (size_t)k;
    }
    ck_assert_uint_eq(n, head + body); /* nothing beyond: one request, one response */
    return atoi(buf + 9);
}

START_TEST(one_connection_serves_many_requests)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    char key[65];
    synthesize(&d, "{\"topology\":\"ring:6\",\"collective\":\"allgather\",\"method\":\"ring\","
                   "\"options\":{\"wait_s\":30}}",
               key);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d.port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    static char buf[1 << 20];
    const char *paths[] = {"/v1/results/%s", "/v1/results/%s", "/v1/results/%s?rank=2",
                           "/v1/results/%s?format=msccl-xml", "/v1/results/%s?format=msccl-xml",
                           "/v1/health", "/v1/results/%s?view=summary"};
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            char path[200], req[400];
            snprintf(path, sizeof path, paths[i], key);
            int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
            ck_assert_int_eq(send(fd, req, (size_t)n, 0), n);
            bool closes = true;
            int st = read_response(fd, buf, sizeof buf, &closes);
            ck_assert_msg(st == 200, "request %zu on the kept connection: %d", i, st);
            ck_assert_msg(!closes, "request %zu answered Connection: close", i);
        }
    /* a POST on the same connection too */
    const char *body = "{\"topology\":\"ring:6\",\"collective\":\"allgather\",\"method\":\"ring\"}";
    char req[600];
    int n = snprintf(req, sizeof req,
                     "POST /v1/synthesize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    ck_assert_int_eq(send(fd, req, (size_t)n, 0), n);
    bool closes = true;
    ck_assert_int_eq(read_response(fd, buf, sizeof buf, &closes), 200);
    ck_assert(!closes);
    close(fd);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ---- large results: streamed -------------------------------------------------------------- */

START_TEST(large_result_streams_exactly)
{
    cs_daemon d;
    /* a small cache: documents above 1 MiB stream instead of being kept */
    const char *extra[] = {"--cache-mb", "8", NULL};
    start(&d, NULL, extra);
    char key[65];
    synthesize(&d, "{\"topology\":\"mesh2d:12x12\",\"collective\":\"allgather\","
                   "\"method\":\"tacos\",\"options\":{\"wait_s\":120}}",
               key);
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s", key);
    http_resp r = get(&d, path, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_gt(r.len, 1 << 20);
    char buf[64];
    ck_assert_ptr_null(http_header(&r, "Content-Length", buf, sizeof buf)); /* chunked */
    /* it is jansson's own compact dump of the document it holds */
    json_t *doc = resp_json(&r);
    char *again = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
    ck_assert_msg(strlen(again) == r.len && memcmp(again, r.body, r.len) == 0,
                  "streamed document differs from its own dump");
    free(again);
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(result_from_json(doc, &res, &err), CS_OK);
    cs_topology *t = NULL;
    ck_assert_int_eq(topology_builtin("mesh2d:12x12", &t, &err), CS_OK);
    ck_assert_msg(algorithm_verify(t, res->algs[0], &err) == CS_OK, "%s", err.message);
    /* the POST answer and the job's result are the same document */
    http_resp p;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize",
                                  "{\"topology\":\"mesh2d:12x12\",\"collective\":\"allgather\","
                                  "\"method\":\"tacos\"}",
                                  NULL, &p),
                     0);
    ck_assert(p.len == r.len && memcmp(p.body, r.body, r.len) == 0);
    http_resp_free(&p);
    check_codings(&d, path);
    /* slices: every send of rank 77 and only those, in order */
    snprintf(path, sizeof path, "/v1/results/%s?rank=77", key);
    http_resp sr = get(&d, path, NULL);
    json_t *sdoc = resp_json(&sr);
    json_t *ssends = json_object_get(json_array_get(json_object_get(sdoc, "frontier"), 0), "sends");
    const cs_algorithm *a = res->algs[0];
    size_t j = 0;
    for (long i = 0; i < a->nsends; i++) {
        cs_send s = algorithm_send(a, i);
        if (s.src != 77 && s.dst != 77)
            continue;
        json_t *js = json_array_get(ssends, j++);
        ck_assert_ptr_nonnull(js);
        ck_assert_int_eq(json_integer_value(json_object_get(js, "chunk")), s.chunk);
        ck_assert_int_eq(json_integer_value(json_object_get(js, "src")), s.src);
        ck_assert_int_eq(json_integer_value(json_object_get(js, "dst")), s.dst);
    }
    ck_assert_uint_eq(j, json_array_size(ssends));
    json_decref(sdoc);
    http_resp_free(&sr);
    topology_free(t);
    result_free(res);
    json_decref(doc);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ---- stores written before the codec ------------------------------------------------------ */

static const char old_schema[] =
    "CREATE TABLE results (key TEXT PRIMARY KEY, request TEXT NOT NULL, result TEXT NOT NULL,"
    " created DOUBLE PRECISION NOT NULL);"
    "CREATE TABLE artifacts (key TEXT NOT NULL, format TEXT NOT NULL, variant TEXT NOT NULL,"
    " body TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, PRIMARY KEY (key, format, variant));";

START_TEST(old_store_reads_and_migrates)
{
    /* a store as the previous daemon left it: the whole JSON document per result */
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-old", dir, sizeof dir), 0);
    const char *reqtext = "{\"topology\":\"torus2d:3x3\",\"collective\":\"allgather\","
                          "\"method\":\"tacos\"}";
    cs_synth_request *req = NULL;
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(synth_request_parse(reqtext, strlen(reqtext), NULL, &req, &err), CS_OK);
    ck_assert_int_eq(synth_run(req, NULL, NULL, &res, &err), CS_OK);
    json_t *full = synth_result_to_json(req, res);
    char *old_text = json_dumps(full, JSON_COMPACT | CS_JSON_REAL);
    char *canon = synth_request_canonical_text(req);
    char dbpath[400];
    snprintf(dbpath, sizeof dbpath, "%s/collsynth.db", dir);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, old_schema, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "INSERT INTO results VALUES (?, ?, ?, 1.0)", -1, &st,
                                        NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, req->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, canon, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, old_text, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);

    cs_daemon d;
    start(&d, dir, NULL);
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s", req->key);
    http_resp r = get(&d, path, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(r.len == strlen(old_text) && memcmp(r.body, old_text, r.len) == 0,
                  "an old result reads differently");
    http_resp_free(&r);
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml", req->key);
    r = get(&d, path, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "<algo"));
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop_ex(&d, 30, true), 0);
    /* the row was rewritten in the new form ... */
    ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT codec, length(body) FROM results", -1, &st,
                                        NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "csrc1");
    ck_assert_int_gt(sqlite3_column_int(st, 1), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* ... and still reads the same after a restart */
    start(&d, dir, NULL);
    snprintf(path, sizeof path, "/v1/results/%s", req->key);
    r = get(&d, path, NULL);
    ck_assert(r.len == strlen(old_text) && memcmp(r.body, old_text, r.len) == 0);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
    remove_tree(dir);
    free(old_text);
    free(canon);
    json_decref(full);
    result_free(res);
    synth_request_free(req);
}
END_TEST

/* ---- metrics ------------------------------------------------------------------------------ */

START_TEST(metrics_count_what_happened)
{
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-metrics", dir, sizeof dir), 0);
    cs_daemon d;
    start(&d, dir, NULL);
    char key[65];
    synthesize(&d, "{\"topology\":\"ring:5\",\"collective\":\"allgather\",\"method\":\"ring\","
                   "\"options\":{\"wait_s\":30}}",
               key);
    const char *mem = "collsynth_representations_total{source=\"memory\"}";
    const char *sto = "collsynth_representations_total{source=\"store\"}";
    const char *gen = "collsynth_representations_total{source=\"generated\"}";
    double g0 = metrics_value(&d, gen), m0 = metrics_value(&d, mem);
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml", key);
    http_resp r = get(&d, path, NULL);
    http_resp_free(&r);
    ck_assert_int_eq(metrics_value(&d, gen), g0 + 1);
    ck_assert_int_eq(metrics_value(&d, "collsynth_codegen_total"), 1);
    for (int i = 0; i < 3; i++) {
        r = get(&d, path, NULL);
        ck_assert_int_eq(r.status, 200);
        http_resp_free(&r);
    }
    ck_assert_int_eq(metrics_value(&d, gen), g0 + 1);
    ck_assert_int_eq(metrics_value(&d, mem), m0 + 3);
    ck_assert_int_eq(metrics_value(&d, "collsynth_codegen_total"), 1);
    ck_assert_int_eq(daemon_stop_ex(&d, 30, true), 0);
    /* after a restart the document comes from the store, not a new generation */
    start(&d, dir, NULL);
    r = get(&d, path, NULL);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    ck_assert_int_eq(metrics_value(&d, sto), 1);
    ck_assert_int_eq(metrics_value(&d, gen), 0);
    ck_assert_int_eq(metrics_value(&d, "collsynth_codegen_total"), 0);
    /* memory hits count results found in memory only */
    double mh = metrics_value(&d, "collsynth_cache_memory_hits_total");
    snprintf(path, sizeof path, "/v1/results/%s", key);
    r = get(&d, path, NULL);
    http_resp_free(&r);
    ck_assert_int_eq(metrics_value(&d, "collsynth_cache_memory_hits_total"), mh + 1);
    ck_assert_int_eq(daemon_stop(&d), 0);
    remove_tree(dir);
}
END_TEST

/* ---- kept answers ------------------------------------------------------------------------ */

/* A representation kept in memory is answered with one response made when it
 * was kept (server/delivery.c, rep_answers), shared by every request and
 * connection.  Hammered from several connections at once with every coding
 * and with conditional requests, each answer must still be the right one:
 * its coding's bytes and ETag, 304 with that ETag when it matches; CORS
 * headers only for the request whose Origin asked (a shared response must
 * not carry them); the metrics count each hit. */
typedef struct hammer {
    const cs_daemon *d;
    const char *path;
    const char *id_body;
    size_t id_len;
    const char *etags[3];        /* identity, gzip, zstd */
    int ok, not_modified, bad;
    char why[300];
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    static const char *const codings[3] = {NULL, "Accept-Encoding: gzip",
                                           "Accept-Encoding: zstd"};
    for (int i = 0; i < 60 && !h->bad; i++) {
        int c = i % 3;
        bool conditional = (i / 3) % 2 == 1;
        char inm[200];
        snprintf(inm, sizeof inm, "If-None-Match: %s", h->etags[c]);
        const char *hdr[3] = {NULL, NULL, NULL};
        int n = 0;
        if (codings[c])
            hdr[n++] = codings[c];
        if (conditional)
            hdr[n++] = inm;
        http_resp r;
        if (http_request(h->d, "GET", h->path, NULL, hdr, &r) != 0) {
            h->bad++;
            snprintf(h->why, sizeof h->why, "request %d failed", i);
            break;
        }
        char etag[128] = "", enc[64] = "";
        http_header(&r, "ETag", etag, sizeof etag);
        bool has_enc = http_header(&r, "Content-Encoding", enc, sizeof enc) != NULL;
        if (strcmp(etag, h->etags[c]) != 0) {
            h->bad++;
            snprintf(h->why, sizeof h->why, "coding %d: ETag %s, expected %s", c, etag,
                     h->etags[c]);
        } else if (conditional) {
            if (r.status != 304 || r.len != 0) {
                h->bad++;
                snprintf(h->why, sizeof h->why, "conditional coding %d: %ld, %zu bytes", c,
                         r.status, r.len);
            } else {
                h->not_modified++;
            }
        } else {
            size_t pn = r.len;
            char *plain = c == 1 ? gunzip(r.body, r.len, &pn)
                        : c == 2 ? unzstd(r.body, r.len, &pn)
                                 : NULL;
            const char *body = plain ? plain : r.body;
            bool enc_ok = c == 0 ? !has_enc : has_enc && !strcmp(enc, c == 1 ? "gzip" : "zstd");
            if (r.status != 200 || !enc_ok || pn != h->id_len || memcmp(body, h->id_body, pn)) {
                h->bad++;
                snprintf(h->why, sizeof h->why, "coding %d: %ld, encoding '%s', %zu bytes", c,
                         r.status, enc, pn);
            } else {
                h->ok++;
            }
            free(plain);
        }
        http_resp_free(&r);
    }
    return NULL;
}

START_TEST(kept_answers_are_shared_but_right)
{
    cs_daemon d;
    const char *extra[] = {"--cors-origins", "http://a.example", NULL};
    start(&d, NULL, extra);
    char key[65];
    synthesize(&d, "{\"topology\":\"dgx1\",\"collective\":\"allgather\","
                   "\"options\":{\"wait_s\":120}}",
               key);
    const char *kinds[] = {"", "?format=msccl-xml"};
    for (int k = 0; k < 2; k++) {
        char path[300];
        snprintf(path, sizeof path, "/v1/results/%s%s", key, kinds[k]);
        /* first answers: each coding made and kept */
        static const char *const acc[3] = {NULL, "Accept-Encoding: gzip",
                                           "Accept-Encoding: zstd"};
        http_resp first[3];
        char etags[3][128];
        for (int c = 0; c < 3; c++) {
            const char *hdr[] = {acc[c], NULL};
            first[c] = get(&d, path, hdr);
            ck_assert_int_eq(first[c].status, 200);
            ck_assert_ptr_nonnull(http_header(&first[c], "ETag", etags[c], sizeof etags[c]));
        }
        ck_assert_str_ne(etags[0], etags[1]);
        ck_assert_str_ne(etags[1], etags[2]);
        double mem0 = metrics_value(&d, "collsynth_representations_total{source=\"memory\"}");
        double nm0 = metrics_value(&d, "collsynth_not_modified_total");
        double hits0 = metrics_value(&d, "collsynth_cache_hits_total");
        enum { T = 4 };
        hammer h[T];
        pthread_t th[T];
        for (int t = 0; t < T; t++) {
            h[t] = (hammer){.d = &d, .path = path, .id_body = first[0].body,
                            .id_len = first[0].len,
                            .etags = {etags[0], etags[1], etags[2]}};
            ck_assert_int_eq(pthread_create(&th[t], NULL, hammer_main, &h[t]), 0);
        }
        int ok = 0, nm = 0;
        for (int t = 0; t < T; t++) {
            pthread_join(th[t], NULL);
            ck_assert_msg(h[t].bad == 0, "%s: %s", kinds[k], h[t].why);
            ok += h[t].ok;
            nm += h[t].not_modified;
        }
        ck_assert_int_eq(ok, T * 30);
        ck_assert_int_eq(nm, T * 30);
        /* every 200 came from memory, every 304 was counted, each once */
        ck_assert_int_eq(metrics_value(&d, "collsynth_representations_total{source=\"memory\"}"),
                         mem0 + ok);
        ck_assert_int_eq(metrics_value(&d, "collsynth_not_modified_total"), nm0 + nm);
        ck_assert_int_eq(metrics_value(&d, "collsynth_cache_hits_total"), hits0 + ok + nm);
        /* CORS: only the request with a listed Origin gets the header, before
         * and after, on the same kept representation */
        for (int i = 0; i < 3; i++) {
            const char *with[] = {"Origin: http://a.example", NULL};
            http_resp r = get(&d, path, i == 1 ? with : NULL);
            char buf[128];
            ck_assert_int_eq(r.status, 200);
            ck_assert(r.len == first[0].len && !memcmp(r.body, first[0].body, r.len));
            const char *acao = http_header(&r, "Access-Control-Allow-Origin", buf, sizeof buf);
            if (i == 1) {
                ck_assert_ptr_nonnull(acao);
                ck_assert_str_eq(buf, "http://a.example");
                ck_assert_ptr_nonnull(http_header(&r, "ETag", buf, sizeof buf));
                ck_assert_str_eq(buf, etags[0]);
            } else {
                ck_assert_ptr_null(acao);
            }
            http_resp_free(&r);
        }
        for (int c = 0; c < 3; c++)
            http_resp_free(&first[c]);
    }
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ---- refusals -------------------------------------------------------------------------- */

START_TEST(refusals_are_remembered)
{
    cs_daemon d;
    /* 1 MB per result: 8192 sends of 128 bytes */
    const char *extra[] = {"--max-result-mb", "1", NULL};
    start(&d, NULL, extra);
    const char *big = "{\"topology\":\"torus2d:16x16\",\"collective\":\"allgather\"}";
    const char *remembered = "collsynth_refusals_remembered_total";
    for (int i = 0; i < 3; i++) {
        json_t *doc = NULL;
        http_resp r;
        ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", big, NULL, &r), 0);
        ck_assert_int_eq(r.status, 413);
        doc = resp_json(&r);
        const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"),
                                                            "message"));
        ck_assert_ptr_nonnull(strstr(msg, "cannot fit"));
        ck_assert_ptr_nonnull(strstr(msg, "65280 sends"));
        json_decref(doc);
        http_resp_free(&r);
        ck_assert_int_eq(metrics_value(&d, remembered), i);
    }
    /* another spelling of the same request is parsed, and refused the same way */
    http_resp r;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize",
                                  "{\"collective\":{\"kind\":\"allgather\"},"
                                  "\"topology\":\"torus2d:16x16\"}",
                                  NULL, &r),
                     0);
    ck_assert_int_eq(r.status, 413);
    http_resp_free(&r);
    ck_assert_int_eq(metrics_value(&d, remembered), 2);
    /* the same request with another wait is the same request: refused from memory */
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize",
                                  "{\"topology\":\"torus2d:16x16\",\"collective\":\"allgather\","
                                  "\"options\":{\"wait_s\":2.5}}",
                                  NULL, &r),
                     0);
    ck_assert_int_eq(r.status, 413);
    http_resp_free(&r);
    ck_assert_int_eq(metrics_value(&d, remembered), 3);
    /* malformed bodies are remembered too; good ones are not refused */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", "{\"topology\":", NULL, &r), 0);
        ck_assert_int_eq(r.status, 400);
        http_resp_free(&r);
    }
    ck_assert_int_eq(metrics_value(&d, remembered), 4);
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize",
                                  "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                  "\"method\":\"ring\",\"options\":{\"wait_s\":30}}",
                                  NULL, &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* A synthesis that fails for a reason that does not change is refused at
 * once next time, by key, without a second job. */
START_TEST(failed_keys_are_remembered)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    /* SMT proves this instance impossible (below the allgather bounds) */
    const char *body = "{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                       "\"options\":{\"steps\":1,\"rounds\":1,\"chunks\":1,\"wait_s\":60}}";
    http_resp r;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", body, NULL, &r), 0);
    ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
    http_resp_free(&r);
    double started = metrics_value(&d, "collsynth_syntheses_total{outcome=\"started\"}");
    ck_assert_int_eq(started, 1);
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", body, NULL, &r), 0);
    ck_assert_int_eq(r.status, 422);
    json_t *doc = resp_json(&r);
    ck_assert_int_eq(strlen(json_string_value(json_object_get(doc, "key"))), 64);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "error"), "message"));
    json_decref(doc);
    http_resp_free(&r);
    ck_assert_int_eq(metrics_value(&d, "collsynth_syntheses_total{outcome=\"started\"}"), 1);
    ck_assert_int_eq(metrics_value(&d, "collsynth_refusals_remembered_total"), 1);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* A document the code generator refuses (a runtime that lacks the
 * collective) is refused again from memory, without generating. */
/* MSCCL slices (?rank=, ?ranks=) are cut from the whole document: each is
 * the whole document's header, exactly its ranks' <gpu> elements and the
 * closing tag, whichever is asked first; the slices of all ranks put
 * together are the whole document; ETags per slice; a bad rank is 400. */
static void split_doc(const char *doc, size_t len, size_t *head, size_t *tail)
{
    const char *g = strstr(doc, "<gpu");
    ck_assert_ptr_nonnull(g);
    while (g > doc && g[-1] == ' ')
        g--;
    *head = (size_t)(g - doc);
    const char *end = NULL;
    for (const char *p = strstr(doc, "</algo>"); p; p = strstr(p + 1, "</algo>"))
        end = p;
    ck_assert_ptr_nonnull(end);
    *tail = (size_t)(end - doc);
    ck_assert_uint_le(*tail, len);
}

/* The first slices of a fresh key arrive together (every node's hook at
 * once): the whole document is generated once, by the first request; the
 * others wait for it (parked, then run again) and get their slices cut from
 * it, byte for byte their part of the whole document. */
typedef struct slice_get {
    const cs_daemon *d;
    char path[400];
    http_resp r;
    int rc;
} slice_get;

static void *slice_get_main(void *arg)
{
    slice_get *g = arg;
    g->rc = http_request(g->d, "GET", g->path, NULL, NULL, &g->r);
    return NULL;
}

START_TEST(concurrent_first_slices_generate_once)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    char key[65];
    /* 256 ranks: a whole document takes some 0.2 s, long enough to overlap */
    synthesize(&d, "{\"topology\":\"dgxh100:32\",\"collective\":\"allgather\","
                   "\"options\":{\"wait_s\":120}}",
               key);
    double gen0 = metrics_value(&d, "collsynth_codegen_total");
    enum { N = 8 };
    slice_get g[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        g[i] = (slice_get){.d = &d};
        snprintf(g[i].path, sizeof g[i].path,
                 "/v1/results/%s?format=msccl-xml&runtime=msccl&ranks=%d-%d", key, 8 * i,
                 8 * i + 7);
        ck_assert_int_eq(pthread_create(&th[i], NULL, slice_get_main, &g[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(metrics_value(&d, "collsynth_codegen_total"), gen0 + 1);
    fprintf(stderr, "concurrent_first_slices_generate_once: %d requests, 1 generation, %g waited\n",
            N, metrics_value(&d, "collsynth_codegen_waits_total"));
    char path[400];
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=msccl", key);
    http_resp whole = get(&d, path, NULL);
    ck_assert_int_eq(whole.status, 200);
    size_t head, tail;
    split_doc(whole.body, whole.len, &head, &tail);
    size_t at = head;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(g[i].rc, 0);
        ck_assert_msg(g[i].r.status == 200, "%s: %ld %.200s", g[i].path, g[i].r.status,
                      g[i].r.body);
        size_t h, t;
        split_doc(g[i].r.body, g[i].r.len, &h, &t);
        ck_assert_uint_eq(h, head);
        ck_assert(!memcmp(g[i].r.body, whole.body, head));
        ck_assert_str_eq(g[i].r.body + t, whole.body + tail);
        /* ranks 8i..8i+7 follow each other in the whole document */
        ck_assert_msg(at + (t - h) <= tail && !memcmp(whole.body + at, g[i].r.body + h, t - h),
                      "slice %d is not its part of the whole document", i);
        at += t - h;
        http_resp_free(&g[i].r);
    }
    /* the generation is still one, and no request is left waiting */
    ck_assert_int_eq(metrics_value(&d, "collsynth_codegen_total"), gen0 + 1);
    http_resp_free(&whole);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(msccl_slices_are_cut_from_the_whole_document)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    char key[65];
    synthesize(&d, "{\"topology\":\"dgx1\",\"collective\":\"allreduce\",\"method\":\"smt\","
                   "\"options\":{\"wait_s\":120}}",
               key);
    const char *runtimes[] = {"msccl", "msccl-executor"};
    for (int k = 0; k < 2; k++) {
        char path[400];
        /* slices first: the whole document is generated for the first one */
        char *part[8];
        size_t plen[8];
        http_resp sl[8];
        for (int r = 0; r < 8; r++) {
            snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s&rank=%d", key,
                     runtimes[k], 7 - r);
            sl[7 - r] = get(&d, path, NULL);
            ck_assert_msg(sl[7 - r].status == 200, "%s: %ld %.300s", path, sl[7 - r].status,
                          sl[7 - r].body);
        }
        snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s", key,
                 runtimes[k]);
        http_resp whole = get(&d, path, NULL);
        ck_assert_int_eq(whole.status, 200);
        size_t head, tail;
        split_doc(whole.body, whole.len, &head, &tail);
        size_t at = head;
        for (int r = 0; r < 8; r++) {
            size_t h, t;
            split_doc(sl[r].body, sl[r].len, &h, &t);
            ck_assert_uint_eq(h, head);
            ck_assert_msg(!memcmp(sl[r].body, whole.body, head), "rank %d: another header", r);
            ck_assert_str_eq(sl[r].body + t, whole.body + tail);
            part[r] = sl[r].body + h;
            plen[r] = t - h;
            char id[32];
            snprintf(id, sizeof id, "<gpu id=\"%d\"", r);
            ck_assert_msg(!strncmp(part[r] + strspn(part[r], " "), id, strlen(id)),
                          "rank %d's slice: %.60s", r, part[r]);
            const char *next = strstr(part[r] + strspn(part[r], " ") + 1, "<gpu ");
            ck_assert_msg(next == NULL || next >= sl[r].body + t,
                          "rank %d's slice holds another <gpu>", r);
            ck_assert_msg(at + plen[r] <= tail && !memcmp(whole.body + at, part[r], plen[r]),
                          "rank %d's <gpu> is not the whole document's", r);
            at += plen[r];
        }
        ck_assert_uint_eq(at, tail);
        /* one node's worth: ranks 2-5 */
        snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s&ranks=2-5", key,
                 runtimes[k]);
        http_resp mid = get(&d, path, NULL);
        ck_assert_int_eq(mid.status, 200);
        size_t want = head + plen[2] + plen[3] + plen[4] + plen[5] + (whole.len - tail);
        ck_assert_uint_eq(mid.len, want);
        ck_assert(!memcmp(mid.body + head, part[2], plen[2]));
        ck_assert(!memcmp(mid.body + head + plen[2] + plen[3] + plen[4], part[5], plen[5]));
        http_resp_free(&mid);
        char other[400];
        snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s&rank=3", key,
                 runtimes[k]);
        snprintf(other, sizeof other, "/v1/results/%s?format=msccl-xml&runtime=%s&rank=4", key,
                 runtimes[k]);
        check_etag(&d, path, other);
        check_codings(&d, path);
        for (int r = 0; r < 8; r++)
            http_resp_free(&sl[r]);
        http_resp_free(&whole);
    }
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&rank=8", key);
    http_resp r = get(&d, path, NULL);
    ck_assert_int_eq(r.status, 400);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ?gpu_sms=N (format=msccl-xml): the target GPU's SMs cap a rank's thread
 * blocks at 2N.  A document that fits is the same bytes as without it (but
 * its own representation: another ETag); one that does not is a 422 naming
 * the SMs, with field "runtime" like every runtime limit (the Slurm hook
 * skips such an entry); a bad value is a 400 naming gpu_sms. */
START_TEST(gpu_sms_limits_msccl_documents)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    char key[65];
    synthesize(&d, "{\"topology\":\"dgx1\",\"collective\":\"allgather\",\"method\":\"ring\","
                   "\"options\":{\"wait_s\":60}}",
               key);
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=msccl", key);
    http_resp plain = get(&d, path, NULL);
    ck_assert_msg(plain.status == 200, "%ld %s", plain.status, plain.body);
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=msccl&gpu_sms=80", key);
    http_resp v100 = get(&d, path, NULL);
    ck_assert_msg(v100.status == 200, "%ld %s", v100.status, v100.body);
    ck_assert_uint_eq(v100.len, plain.len);
    ck_assert(memcmp(v100.body, plain.body, plain.len) == 0);
    char e1[128], e2[128];
    ck_assert_ptr_nonnull(http_header(&plain, "ETag", e1, sizeof e1));
    ck_assert_ptr_nonnull(http_header(&v100, "ETag", e2, sizeof e2));
    ck_assert_str_ne(e1, e2);
    http_resp_free(&v100);
    http_resp_free(&plain);
    /* one SM: 2 blocks, fewer than a DGX-1 ring rank's peers' blocks */
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&gpu_sms=1&ranks=0-3", key);
    http_resp r = get(&d, path, NULL);
    ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
    json_t *doc = resp_json(&r);
    json_t *e = json_object_get(doc, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "field")), "runtime");
    const char *msg = json_string_value(json_object_get(e, "message"));
    ck_assert_msg(strstr(msg, "gpu_sms=1") && strstr(msg, "at most 2"), "%s", msg);
    json_decref(doc);
    http_resp_free(&r);
    const char *bad[] = {"?format=msccl-xml&gpu_sms=0", "?format=msccl-xml&gpu_sms=8x",
                         "?format=msccl-xml&gpu_sms=5000", "?format=json&gpu_sms=80",
                         "?format=cuda&gpu_sms=80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "/v1/results/%s%s", key, bad[i]);
        r = get(&d, path, NULL);
        ck_assert_msg(r.status == 400, "%s gave %ld", bad[i], r.status);
        doc = resp_json(&r);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "error"), "field")),
                         "gpu_sms");
        json_decref(doc);
        http_resp_free(&r);
    }
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(code_refusals_are_remembered)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    char key[65];
    synthesize(&d, "{\"topology\":\"ring:3\",\"method\":\"smt\",\"collective\":{\"kind\":\"custom\","
                   "\"global_chunks\":2,\"pre\":[[0,0],[1,1]],\"post\":[[0,1],[1,0]]},"
                   "\"options\":{\"wait_s\":60}}",
               key);
    char path[300];
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=msccl-executor", key);
    for (int i = 0; i < 3; i++) {
        http_resp r = get(&d, path, NULL);
        ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
        json_t *doc = resp_json(&r);
        ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "error"), "message"));
        json_decref(doc);
        http_resp_free(&r);
        ck_assert_int_eq(metrics_value(&d, "collsynth_refusals_remembered_total"), i);
    }
    /* the other runtime has a name for it */
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=msccl", key);
    http_resp r = get(&d, path, NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* A job's document carries the result, whole or as a summary. */
START_TEST(job_document_carries_the_result)
{
    cs_daemon d;
    start(&d, NULL, NULL);
    http_resp r;
    json_t *doc = NULL;
    char id[40], key[65];
    /* 202, or 200 when the ring job was done before the answer */
    submit_job_checked(&d, "{\"topology\":\"ring:7\",\"collective\":\"allgather\","
                           "\"method\":\"ring\"}", id, key);
    char path[200];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    for (int i = 0; i < 200; i++) {
        r = get(&d, path, NULL);
        doc = resp_json(&r);
        bool done = !strcmp(json_string_value(json_object_get(doc, "status")), "done");
        if (done)
            break;
        json_decref(doc);
        doc = NULL;
        http_resp_free(&r);
        usleep(50000);
    }
    ck_assert_ptr_nonnull(doc);
    json_t *res = json_object_get(doc, "result");
    ck_assert_str_eq(json_string_value(json_object_get(res, "key")), key);
    /* the embedded result is the stored document, byte for byte */
    char rpath[200];
    snprintf(rpath, sizeof rpath, "/v1/results/%s", key);
    http_resp rr = get(&d, rpath, NULL);
    char *emb = json_dumps(res, JSON_COMPACT | CS_JSON_REAL);
    ck_assert_str_eq(emb, rr.body);
    free(emb);
    http_resp_free(&rr);
    json_decref(doc);
    http_resp_free(&r);
    snprintf(path, sizeof path, "/v1/jobs/%s?view=summary", id);
    r = get(&d, path, NULL);
    doc = resp_json(&r);
    json_t *a0 = json_array_get(json_object_get(json_object_get(doc, "result"), "frontier"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(a0, "nsends")), 42);
    ck_assert_ptr_null(json_object_get(a0, "sends"));
    json_decref(doc);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

static Suite *delivery_suite(void)
{
    Suite *s = suite_create("delivery");
    TCase *tc = tcase_create("delivery");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, etags_codings_and_views);
    tcase_add_test(tc, one_connection_serves_many_requests);
    tcase_add_test(tc, large_result_streams_exactly);
    tcase_add_test(tc, old_store_reads_and_migrates);
    tcase_add_test(tc, metrics_count_what_happened);
    tcase_add_test(tc, kept_answers_are_shared_but_right);
    tcase_add_test(tc, refusals_are_remembered);
    tcase_add_test(tc, failed_keys_are_remembered);
    tcase_add_test(tc, job_document_carries_the_result);
    tcase_add_test(tc, code_refusals_are_remembered);
    tcase_add_test(tc, gpu_sms_limits_msccl_documents);
    tcase_add_test(tc, msccl_slices_are_cut_from_the_whole_document);
    tcase_add_test(tc, concurrent_first_slices_generate_once);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(delivery_suite)
