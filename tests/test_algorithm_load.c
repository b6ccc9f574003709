/* Tests of algorithm_doc_load_file (synth/model/algorithm_load.c): an
 * Algorithm or a Result read from a file without the sends' DOM must give
 * what json_load_file + algorithm_from_json / result_from_json give, the
 * same algorithms and the same errors, whatever the layout of the text. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algorithm.h"
#include "check_main.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_algorithm_load_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *path_of(const char *name)
{
    static char p[2][128];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* An allgather on `ranks` ranks with n sends over more than one of the
 * loader's batches (4096), their values cycling through the ranges; timed
 * when asked.  Only the document's checks matter here, not a schedule. */
static cs_algorithm *many_sends(int ranks, long n, bool timed)
{
    cs_collective c;
    cs_error err;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "ring", ranks, 1, ranks - 1, &a, &err), CS_OK);
    collective_free(&c);
    snprintf(a->method, sizeof a->method, "test");
    for (long i = 0; i < n; i++) {
        int src = (int)(i % ranks), dst = (int)((i + 1) % ranks), step = (int)(i % (ranks - 1));
        if (timed)
            ck_assert_int_eq(algorithm_add_timed_send(a, i % ranks, src, dst, step, CS_OP_COPY,
                                                      (double)i * 0.5, (double)i * 0.5 + 1.25),
                             CS_OK);
        else
            ck_assert_int_eq(algorithm_add_send(a, i % ranks, src, dst, step,
                                                i % 7 == 3 ? CS_OP_REDUCE : CS_OP_COPY), CS_OK);
    }
    return a;
}

static void write_doc(const char *path, const json_t *doc, size_t flags)
{
    ck_assert_int_eq(json_dump_file(doc, path, flags), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* What the DOM route gives for the file: rc, the document (algorithm or
 * result, as JSON) or the error. */
typedef struct outcome {
    int rc;
    bool is_result;
    json_t *doc;
    cs_error err;
    int line;
} outcome;

static outcome by_dom(const char *path)
{
    outcome o = {0};
    json_error_t jerr;
    json_t *d = json_load_file(path, 0, &jerr);
    if (!d) {
        o.rc = CS_EINVAL;
        o.line = jerr.line;
        return o;
    }
    o.is_result = json_is_object(d) && json_object_get(d, "frontier");
    if (o.is_result) {
        cs_result *r = NULL;
        o.rc = result_from_json(d, &r, &o.err);
        if (o.rc == CS_OK)
            o.doc = result_to_json(r);
        result_free(r);
    } else {
        cs_algorithm *a = NULL;
        o.rc = algorithm_from_json(d, &a, &o.err);
        if (o.rc == CS_OK)
            o.doc = algorithm_to_json(a);
        algorithm_free(a);
    }
    json_decref(d);
    return o;
}

static outcome by_loader(const char *path)
{
    outcome o = {0};
    cs_algorithm *a = NULL;
    cs_result *r = NULL;
    json_error_t jerr;
    o.rc = algorithm_doc_load_file(path, &a, &r, &o.is_result, &jerr, &o.err);
    if (o.rc == CS_OK) {
        ck_assert_msg((a != NULL) != (r != NULL), "exactly one of alg and res");
        ck_assert(o.is_result == (r != NULL));
        o.doc = r ? result_to_json(r) : algorithm_to_json(a);
    } else {
        ck_assert_ptr_null(a);
        ck_assert_ptr_null(r);
        o.line = jerr.text[0] ? jerr.line : 0;
    }
    algorithm_free(a);
    result_free(r);
    return o;
}

/* Both routes agree on the file: same rc, same algorithms, same error. */
static void assert_same(const char *path, int want_rc)
{
    outcome d = by_dom(path), l = by_loader(path);
    ck_assert_msg(d.rc == want_rc, "%s: the DOM route gives %d (%s), the test wants %d", path,
                  d.rc, d.err.message, want_rc);
    ck_assert_msg(l.rc == d.rc, "%s: rc %d (%s), DOM %d (%s)", path, l.rc, l.err.message, d.rc,
                  d.err.message);
    if (d.rc == CS_OK) {
        ck_assert(l.is_result == d.is_result);
        ck_assert_msg(json_equal(l.doc, d.doc), "%s: the documents differ", path);
    } else if (d.line) {
        ck_assert_msg(l.line == d.line, "%s: syntax error at line %d, jansson says %d", path,
                      l.line, d.line);
    } else {
        ck_assert_str_eq(l.err.message, d.err.message);
        ck_assert_str_eq(l.err.field, d.err.field);
    }
    json_decref(d.doc);
    json_decref(l.doc);
}

START_TEST(algorithms_and_results_read_as_through_the_dom)
{
    cs_algorithm *a = many_sends(16, 10000, false);
    json_t *doc = algorithm_to_json(a);
    /* compact, indented, and with keys sorted ("sends" before "steps",
     * "ranks" after "chunks": the sends come before the frame is complete) */
    size_t layouts[] = {JSON_COMPACT, JSON_INDENT(2), JSON_SORT_KEYS | JSON_INDENT(1)};
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        write_doc(path_of("alg.json"), doc, layouts[k]);
        assert_same(path_of("alg.json"), CS_OK);
    }
    /* the loader's sends are the algorithm's, send by send */
    cs_algorithm *b = NULL;
    cs_result *r = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_doc_load_file(path_of("alg.json"), &b, &r, NULL, NULL, &err),
                     CS_OK);
    ck_assert_int_eq(b->nsends, 10000);
    for (long i = 0; i < a->nsends; i += 997) {
        cs_send x = algorithm_send(a, i), y = algorithm_send(b, i);
        ck_assert(x.chunk == y.chunk && x.src == y.src && x.dst == y.dst && x.step == y.step &&
                  x.op == y.op);
    }
    algorithm_free(b);
    json_decref(doc);

    /* a result of three (ordered by steps): one timed, one with no sends */
    cs_result *res = NULL;
    ck_assert_int_eq(result_new("test", &res, &err), CS_OK);
    ck_assert_int_eq(result_add(res, a), CS_OK);
    ck_assert_int_eq(result_add(res, many_sends(8, 5000, true)), CS_OK);
    ck_assert_int_eq(result_add(res, many_sends(4, 0, false)), CS_OK);
    doc = result_to_json(res);
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        write_doc(path_of("res.json"), doc, layouts[k]);
        assert_same(path_of("res.json"), CS_OK);
    }
    json_decref(doc);
    result_free(res);
}
END_TEST

/* Validation errors in any batch of sends, in any frontier algorithm, and in
 * the frame are the DOM route's, field paths included. */
START_TEST(errors_are_those_of_the_dom_route)
{
    cs_error err;
    cs_result *res = NULL;
    ck_assert_int_eq(result_new("test", &res, &err), CS_OK);
    /* frontier[0]: 8 ranks, timed; frontier[1]: 16 ranks (ordered by steps) */
    ck_assert_int_eq(result_add(res, many_sends(16, 9000, false)), CS_OK);
    ck_assert_int_eq(result_add(res, many_sends(8, 6000, true)), CS_OK);
    json_t *base = result_to_json(res);
    result_free(res);
    struct {
        int alg;
        long send;
        const char *key;
        json_t *value;      /* NULL: delete the key */
    } cases[] = {
        {1, 8999, "src", json_integer(99)},
        {1, 4097, "op", json_string("add")},
        {0, 4096, "dst", json_string("3")},
        {0, 5000, "start_us", NULL},   /* end without start */
        {1, 0, "chunk", NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *doc = json_deep_copy(base);
        json_t *send = json_array_get(json_object_get(json_array_get(json_object_get(doc,
                                                                                     "frontier"),
                                                                     (size_t)cases[k].alg),
                                                      "sends"),
                                      (size_t)cases[k].send);
        if (cases[k].value)
            json_object_set_new(send, cases[k].key, cases[k].value);
        else
            json_object_del(send, cases[k].key);
        char name[32];
        snprintf(name, sizeof name, "bad%zu.json", k);
        write_doc(path_of(name), doc, JSON_COMPACT);
        assert_same(path_of(name), CS_EINVAL);
        json_decref(doc);
    }
    /* timed on some sends only: the check after the last send */
    json_t *doc = json_deep_copy(base);
    json_t *alg1 = json_array_get(json_object_get(doc, "frontier"), 0);   /* the timed one */
    for (size_t i = 0; i < 6000; i += 2) {
        json_t *send = json_array_get(json_object_get(alg1, "sends"), i);
        json_object_del(send, "start_us");
        json_object_del(send, "end_us");
    }
    write_doc(path_of("bad.json"), doc, JSON_INDENT(2));
    assert_same(path_of("bad.json"), CS_EINVAL);
    /* the frame: an algorithm's, the result's, sends not an array, missing */
    json_object_set_new(alg1, "steps", json_integer(2));
    write_doc(path_of("bad.json"), doc, JSON_COMPACT);
    assert_same(path_of("bad.json"), CS_EINVAL);
    json_decref(doc);
    doc = json_deep_copy(base);
    json_object_set_new(doc, "bounds", json_integer(3));
    write_doc(path_of("bad.json"), doc, JSON_COMPACT);
    assert_same(path_of("bad.json"), CS_EINVAL);
    json_decref(doc);
    doc = json_deep_copy(json_array_get(json_object_get(base, "frontier"), 0));
    json_object_set_new(doc, "sends", json_object());
    write_doc(path_of("bad.json"), doc, JSON_COMPACT);
    assert_same(path_of("bad.json"), CS_EINVAL);
    json_object_del(doc, "sends");
    write_doc(path_of("bad.json"), doc, JSON_COMPACT);
    assert_same(path_of("bad.json"), CS_EINVAL);
    json_decref(doc);
    json_decref(base);
    /* not an object at all */
    write_text(path_of("bad.json"), "[1, 2]");
    assert_same(path_of("bad.json"), CS_EINVAL);
    cs_algorithm *a = NULL;
    cs_result *r = NULL;
    ck_assert_int_eq(algorithm_doc_load_file(path_of("missing.json"), &a, &r, NULL, NULL, &err),
                     CS_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "missing.json"));
}
END_TEST

/* Invalid JSON is refused with jansson's line, inside the sends (a later
 * batch) as in the frame; a truncated file and a trailing comma too. */
START_TEST(syntax_errors_name_the_files_line)
{
    cs_algorithm *a = many_sends(16, 9000, false);
    json_t *doc = algorithm_to_json(a);
    algorithm_free(a);
    char *text = json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    /* a ':' turned into ';' in send 6000 (the second batch): find its line */
    char *p = text;
    for (int k = 0; k <= 6000; k++)
        p = strstr(p + 1, "\"chunk\":");
    p[7] = ';';
    write_text(path_of("syn.json"), text);
    assert_same(path_of("syn.json"), CS_EINVAL);
    outcome o = by_loader(path_of("syn.json"));
    ck_assert_int_gt(o.line, 6000 * 7);   /* seven lines per indented send */
    p[7] = ':';
    /* in the frame, after the sends */
    char *steps = strstr(text, "\"steps\":");
    ck_assert_ptr_nonnull(steps);
    steps[7] = ' ';
    write_text(path_of("syn.json"), text);
    assert_same(path_of("syn.json"), CS_EINVAL);
    steps[7] = ':';
    /* a trailing comma in the sends, after a full batch and after a few */
    char *end = strstr(text, "\n  ],");
    ck_assert_ptr_nonnull(end);
    size_t n = strlen(text);
    char *with_comma = malloc(n + 2);
    size_t cut = (size_t)(end - text);
    memcpy(with_comma, text, cut);
    with_comma[cut] = ',';
    memcpy(with_comma + cut + 1, end, n - cut + 1);
    write_text(path_of("syn.json"), with_comma);
    assert_same(path_of("syn.json"), CS_EINVAL);
    free(with_comma);
    /* cut inside the sends: refused (the line differs from jansson's, which
     * reports the end of the file; this one names the sends' first line) */
    text[n / 2] = '\0';
    write_text(path_of("syn.json"), text);
    o = by_loader(path_of("syn.json"));
    ck_assert_int_eq(o.rc, CS_EINVAL);
    ck_assert_int_gt(o.line, 0);
    ck_assert_ptr_nonnull(strstr(o.err.message, "sends"));
    free(text);
    write_text(path_of("syn.json"), "");
    assert_same(path_of("syn.json"), CS_EINVAL);
}
END_TEST

/* What the scanner must not be fooled by: brackets and quotes in strings,
 * a key written with an escape, a duplicate key (the last one counts, as in
 * jansson), a "frontier" twice, input from a pipe. */
START_TEST(odd_but_valid_documents)
{
    cs_algorithm *a = many_sends(8, 5000, false);
    snprintf(a->method, sizeof a->method, "a]\\\"[{}sends");
    json_t *doc = algorithm_to_json(a);
    algorithm_free(a);
    write_doc(path_of("odd1.json"), doc, JSON_COMPACT);
    assert_same(path_of("odd1.json"), CS_OK);
    char *text = json_dumps(doc, JSON_COMPACT);
    /* "sends" with an escape: the DOM reads it */
    char *key = strstr(text, "\"sends\":");
    ck_assert_ptr_nonnull(key);
    size_t n = strlen(text), at = (size_t)(key - text);
    char *esc = malloc(n + 8);
    memcpy(esc, text, at);
    strcpy(esc + at, "\"\\u0073ends\":");
    strcat(esc, key + 8);
    write_text(path_of("odd2.json"), esc);
    assert_same(path_of("odd2.json"), CS_OK);
    free(esc);
    /* two "sends": the second (empty) one counts; then the other way round */
    char *dup = malloc(n + 32);
    snprintf(dup, n + 32, "%.*s,\"sends\":[]}", (int)(n - 1), text);
    write_text(path_of("odd3.json"), dup);
    assert_same(path_of("odd3.json"), CS_OK);
    snprintf(dup, n + 32, "{\"sends\":[{\"chunk\":1}],%s", text + 1);
    write_text(path_of("odd4.json"), dup);
    assert_same(path_of("odd4.json"), CS_OK);
    free(dup);
    /* a result whose "frontier" comes twice: the last one counts */
    char *res = malloc(3 * n + 64);
    snprintf(res, 3 * n + 64, "{\"method\":\"x\",\"frontier\":[%s,%s],\"frontier\":[%s]}", text,
             text, text);
    write_text(path_of("odd5.json"), res);
    assert_same(path_of("odd5.json"), CS_OK);
    /* from a pipe */
    write_doc(path_of("odd6.json"), doc, JSON_INDENT(2));
    const char *fifo = path_of("fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        FILE *f = fopen(fifo, "w");
        if (!f)
            _exit(1);
        fputs(text, f);
        fclose(f);
        _exit(0);
    }
    cs_algorithm *b = NULL;
    cs_result *r = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_doc_load_file(fifo, &b, &r, NULL, NULL, &err), CS_OK);
    int status;
    waitpid(pid, &status, 0);
    json_t *back = algorithm_to_json(b);
    ck_assert(json_equal(back, doc));
    json_decref(back);
    algorithm_free(b);
    free(res);
    free(text);
    json_decref(doc);
}
END_TEST

/* jansson judges the syntax of the whole file, so the loader must too, also
 * in the arrays it skips and nothing reads back: a "sends" a later one
 * replaces, the algorithms of a "frontier" a later one replaces, a Result's
 * own "sends".  And "[,]" is not an empty array.  Found by
 * tests/fuzz/fuzz_algorithm (each loaded before as if valid). */
START_TEST(syntax_errors_in_arrays_nothing_reads)
{
    static const char frame[] =
        "\"ranks\":2,\"topology\":\"line:2\",\"chunks\":1,\"steps\":1,"
        "\"rounds_per_step\":[1],\"collective\":{\"kind\":\"broadcast\",\"root\":0}";
    char doc[1024];
    snprintf(doc, sizeof doc, "{\"sends\":[{\"ch\"}],%s,\"sends\":[]}", frame);
    write_text(path_of("bad1.json"), doc);
    assert_same(path_of("bad1.json"), CS_EINVAL);
    snprintf(doc, sizeof doc, "{%s,\"sends\":[,]}", frame);
    write_text(path_of("bad2.json"), doc);
    assert_same(path_of("bad2.json"), CS_EINVAL);
    snprintf(doc, sizeof doc,
             "{\"method\":\"x\",\"frontier\":[{%s,\"sends\":[{\"chunk\" 0}]}],"
             "\"frontier\":[{%s,\"sends\":[]}]}",
             frame, frame);
    write_text(path_of("bad3.json"), doc);
    assert_same(path_of("bad3.json"), CS_EINVAL);
    snprintf(doc, sizeof doc, "{\"method\":\"x\",\"sends\":[{]},\"frontier\":[{%s,\"sends\":[]}]}",
             frame);
    write_text(path_of("bad4.json"), doc);
    assert_same(path_of("bad4.json"), CS_EINVAL);
    /* the same documents with valid skipped arrays still load */
    snprintf(doc, sizeof doc, "{\"sends\":[{\"chunk\":0}],%s,\"sends\":[]}", frame);
    write_text(path_of("ok1.json"), doc);
    assert_same(path_of("ok1.json"), CS_OK);
    snprintf(doc, sizeof doc, "{\"method\":\"x\",\"sends\":[[],{}],\"frontier\":[{%s,\"sends\":[]}]}",
             frame);
    write_text(path_of("ok2.json"), doc);
    assert_same(path_of("ok2.json"), CS_OK);
}
END_TEST

/* A document saved by a Windows editor starts with a UTF-8 byte-order mark;
 * cs_read_file (the other JSON loaders) drops it, and this loader refused
 * it ("'[' or '{' expected near '<BOM>'"): `collsynth verify` / `codegen`
 * on such a file failed while `topo show` on a topology took it.  The mark
 * is dropped here too, from a file and from a pipe; a syntax error after it
 * still names the file's line, and a mark elsewhere is still an error. */
static void load_expecting(const char *path, const json_t *want, bool want_result)
{
    cs_algorithm *a = NULL;
    cs_result *r = NULL;
    bool is_result = false;
    cs_error err;
    int rc = algorithm_doc_load_file(path, &a, &r, &is_result, NULL, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", path, err.message);
    ck_assert(is_result == want_result);
    json_t *back = r ? result_to_json(r) : algorithm_to_json(a);
    ck_assert_msg(json_equal(back, want), "%s: not the document written", path);
    json_decref(back);
    algorithm_free(a);
    result_free(r);
}

static void write_with_bom(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("\xEF\xBB\xBF", f);
    fputs(text, f);
    fclose(f);
}

START_TEST(a_leading_byte_order_mark_is_dropped)
{
    cs_algorithm *a = many_sends(8, 5000, false);
    json_t *doc = algorithm_to_json(a);
    char *text = json_dumps(doc, JSON_INDENT(1));
    write_with_bom(path_of("alg.json"), text);
    load_expecting(path_of("alg.json"), doc, false);
    /* a Result, whose sends are read back from their file offsets */
    char *res = malloc(2 * strlen(text) + 64);
    sprintf(res, "{\"method\":\"x\",\"frontier\":[%s,%s]}", text, text);
    write_with_bom(path_of("res.json"), res);
    cs_result *want = NULL;
    cs_error err;
    json_t *rdoc = json_loads(res, 0, NULL);
    ck_assert_int_eq(result_from_json(rdoc, &want, &err), CS_OK);
    json_t *want_doc = result_to_json(want);
    load_expecting(path_of("res.json"), want_doc, true);
    /* from a pipe (read into memory first) */
    const char *fifo = path_of("fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        FILE *f = fopen(fifo, "w");
        if (!f)
            _exit(1);
        fputs("\xEF\xBB\xBF", f);
        fputs(text, f);
        fclose(f);
        _exit(0);
    }
    load_expecting(fifo, doc, false);
    int status;
    waitpid(pid, &status, 0);
    /* a syntax error after the mark is on the file's line */
    write_with_bom(path_of("bad.json"), "{\n\"ranks\": 2,\n\"chunks\" 1}");
    cs_algorithm *b = NULL;
    cs_result *r = NULL;
    json_error_t jerr;
    ck_assert_int_eq(algorithm_doc_load_file(path_of("bad.json"), &b, &r, NULL, &jerr, &err),
                     CS_EINVAL);
    ck_assert_int_eq(jerr.line, 3);
    ck_assert_msg(strstr(err.message, "line 3") != NULL, "%s", err.message);
    /* only a leading mark: one inside the document is not blank */
    write_text(path_of("mid.json"), "\n\xEF\xBB\xBF{}");
    ck_assert_int_eq(algorithm_doc_load_file(path_of("mid.json"), &b, &r, NULL, &jerr, &err),
                     CS_EINVAL);
    json_decref(want_doc);
    result_free(want);
    json_decref(rdoc);
    free(res);
    free(text);
    json_decref(doc);
    algorithm_free(a);
}
END_TEST

static Suite *algorithm_load_suite(void)
{
    Suite *s = suite_create("algorithm_load");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, algorithms_and_results_read_as_through_the_dom);
    tcase_add_test(tc, errors_are_those_of_the_dom_route);
    tcase_add_test(tc, syntax_errors_name_the_files_line);
    tcase_add_test(tc, odd_but_valid_documents);
    tcase_add_test(tc, syntax_errors_in_arrays_nothing_reads);
    tcase_add_test(tc, a_leading_byte_order_mark_is_dropped);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(algorithm_load_suite)
