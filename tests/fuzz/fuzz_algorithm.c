/*
 * Fuzzes the algorithm loader of the CLI and codegen (`collsynth verify`,
 * `collsynth codegen`): algorithm_doc_load_file (synth/model/algorithm_load.c,
 * which reads the sends without a DOM) on arbitrary text, checked against
 * the DOM path (json_loadb + algorithm_from_json / result_from_json), then
 * every loaded algorithm through algorithm_verify on the topology it names
 * (a builtin of at most 64 ranks; else a ring of its ranks).  Properties:
 *  - no memory error or undefined behaviour, no leak;
 *  - the streaming loader and the DOM path accept the same documents, refuse
 *    the rest with the same code and field, and load the same sends;
 *  - a refusal has a message; verification answers CS_OK, CS_EVERIFY or
 *    CS_EINVAL with a message, and algorithm_verify_report agrees with it;
 *  - a valid algorithm printed (algorithm_to_json) loads back to the same
 *    sends and is still valid.
 */
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include "algorithm.h"
#include "fuzz_common.h"
#include "verify.h"

static bool same_time(double x, double y)
{
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

static void check_same(const cs_algorithm *a, const cs_algorithm *b, const char *what)
{
    FUZZ_CHECK(a->nsends == b->nsends && a->ranks == b->ranks && a->chunks == b->chunks &&
                   a->steps == b->steps && a->rounds == b->rounds &&
                   a->switch_nodes == b->switch_nodes &&
                   a->collective.kind == b->collective.kind && !strcmp(a->topology, b->topology),
               "%s: headers differ (%ld/%ld sends, %d/%d ranks, %d/%d steps)", what, a->nsends,
               b->nsends, a->ranks, b->ranks, a->steps, b->steps);
    for (int s = 0; s < a->steps; s++)
        FUZZ_CHECK(a->rounds_per_step[s] == b->rounds_per_step[s], "%s: rounds of step %d",
                   what, s);
    for (long i = 0; i < a->nsends; i++) {
        cs_send x = algorithm_send(a, i), y = algorithm_send(b, i);
        FUZZ_CHECK(x.chunk == y.chunk && x.src == y.src && x.dst == y.dst && x.step == y.step &&
                       x.op == y.op && same_time(x.start_us, y.start_us) &&
                       same_time(x.end_us, y.end_us),
                   "%s: send %ld differs", what, i);
    }
}

/* The topology to verify on: the builtin the algorithm names when it is a
 * small one, else a ring of its ranks (the verifier then mostly refuses
 * sends over missing links, which is a path worth running too). */
static cs_topology *topology_for(const cs_algorithm *a)
{
    cs_topology_parse_options opt = {.max_ranks = 64, .max_links = 5000};
    cs_topology *t = NULL;
    cs_error err;
    /* a letter first: topology_load takes it as a builtin name, never a file */
    if (((a->topology[0] >= 'a' && a->topology[0] <= 'z') ||
         (a->topology[0] >= 'A' && a->topology[0] <= 'Z')) &&
        topology_load(a->topology, &opt, &t, &err) == CS_OK)
        return t;
    int ranks = a->ranks >= 2 && a->ranks <= 64 ? a->ranks : 4;
    char name[32];
    snprintf(name, sizeof name, "ring:%d", ranks);
    if (topology_builtin(name, &t, &err) != CS_OK)
        abort();
    return t;
}

static void check_verify(const cs_algorithm *a)
{
    cs_topology *t = topology_for(a);
    cs_error err;
    cs_error_clear(&err);
    int rc = algorithm_verify(t, a, &err);
    FUZZ_CHECK(rc == CS_OK || rc == CS_EVERIFY || rc == CS_EINVAL,
               "verify returned %s: %s", cs_status_name(rc), err.message);
    FUZZ_CHECK(rc == CS_OK || err.message[0], "verify refused without a message");
    cs_verify_report rep;
    cs_error rerr;
    cs_error_clear(&rerr);
    int rrc = algorithm_verify_report(t, a, &rep, &rerr);
    FUZZ_CHECK(rrc == rc, "verify %s, verify_report %s", cs_status_name(rc),
               cs_status_name(rrc));
    if (rc == CS_EVERIFY)
        FUZZ_CHECK(!rep.ok && rep.nreasons >= 1 && rep.reasons[0][0], "report without reasons");
    if (rc == CS_OK) {
        FUZZ_CHECK(rep.ok && rep.nproblems == 0, "report not ok for a valid algorithm");
        json_t *doc = algorithm_to_json(a);
        FUZZ_CHECK(doc, "algorithm_to_json failed");
        cs_algorithm *back = NULL;
        FUZZ_CHECK(algorithm_from_json(doc, &back, &err) == CS_OK, "printed algorithm refused: %s",
                   err.message);
        check_same(a, back, "printed and loaded");
        FUZZ_CHECK(algorithm_verify(t, back, &err) == CS_OK, "printed algorithm not valid: %s",
                   err.message);
        algorithm_free(back);
        json_decref(doc);
    }
    topology_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    int fd = memfd_create("fuzz-algorithm", 0);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    cs_algorithm *alg = NULL;
    cs_result *res = NULL;
    bool is_result = false;
    json_error_t jerr;
    cs_error err;
    cs_error_clear(&err);
    int rc = algorithm_doc_load_file(path, &alg, &res, &is_result, &jerr, &err);
    close(fd);
    FUZZ_CHECK(rc != CS_EIO, "the loader could not read its file: %s", err.message);
    FUZZ_CHECK(rc == CS_OK || err.message[0] || jerr.text[0], "refused without a message");
    FUZZ_CHECK(rc != CS_OK || (!alg != !res && is_result == !!res),
               "loaded %p and %p, is_result %d", (void *)alg, (void *)res, is_result);

    /* the DOM path */
    json_error_t djerr;
    json_t *doc = json_loadb((const char *)data, size, 0, &djerr);
    cs_algorithm *dalg = NULL;
    cs_result *dres = NULL;
    cs_error derr;
    cs_error_clear(&derr);
    int drc = CS_EINVAL;
    if (doc) {
        if (json_is_object(doc) && json_object_get(doc, "frontier"))
            drc = result_from_json(doc, &dres, &derr);
        else
            drc = algorithm_from_json(doc, &dalg, &derr);
        json_decref(doc);
    }
    FUZZ_CHECK((rc == CS_OK) == (drc == CS_OK),
               "streaming loader %s (%s, field '%s'; json: %s), DOM %s (%s, field '%s'; json: "
               "%s)",
               cs_status_name(rc), err.message, err.field, jerr.text, cs_status_name(drc),
               derr.message, derr.field, doc ? "ok" : djerr.text);
    if (doc && rc != CS_OK && !jerr.text[0])
        FUZZ_CHECK(rc == drc && !strcmp(err.field, derr.field),
                   "refused differently: loader %s field '%s' (%s), DOM %s field '%s' (%s)",
                   cs_status_name(rc), err.field, err.message, cs_status_name(drc), derr.field,
                   derr.message);
    if (rc == CS_OK) {
        FUZZ_CHECK(!alg == !dalg, "an Algorithm for one loader, a Result for the other");
        if (alg) {
            check_same(alg, dalg, "loader and DOM");
            check_verify(alg);
        } else {
            FUZZ_CHECK(res->nalgs == dres->nalgs, "%d algorithms vs %d", res->nalgs,
                       dres->nalgs);
            for (int i = 0; i < res->nalgs; i++) {
                check_same(res->algs[i], dres->algs[i], "loader and DOM");
                if (i < 4)
                    check_verify(res->algs[i]);
            }
        }
    }
    algorithm_free(alg);
    algorithm_free(dalg);
    result_free(res);
    result_free(dres);
    return 0;
}
