/*
 * Fuzzes the request parsing of POST /v1/synthesize: the body as the route
 * reads it (json_loadb with duplicate keys refused, server/routes.c), then
 * synth_request_from_json with the daemon's default limits, then what the
 * route computes from a parsed request before it queues a job (the
 * canonical text and key, whether it is trivial, the isomorphism key).
 * Nothing is synthesized.  Properties:
 *  - no memory error or undefined behaviour, no leak;
 *  - every refusal carries a message, a code the daemon answers with a 4xx
 *    (400, 413 or 422; never "internal"), and a field; for a JSON object the
 *    field is not empty and starts with a member of the request ("topology",
 *    "options.k", "collective.root", or an unknown member named as it came);
 *  - a parsed request's canonical text parses again to the same key and the
 *    same canonical text (the key is a function of what the request means);
 *  - the isomorphism labelling, when there is one, is a permutation of the
 *    ranks, and computing it twice gives the same key.
 */
#include "fuzz_common.h"
#include "iso.h"
#include "server_internal.h"
#include "synthesize.h"

/* Does the field path name `member` or something inside it ("options.k",
 * "topology.links[3].src")?  Unknown members are named as they came, so a
 * member's name may itself hold '.' or '['. */
static bool field_in(const char *field, const char *member)
{
    size_t k = strlen(member);
    return !strncmp(field, member, k) &&
           (field[k] == '\0' || field[k] == '.' || field[k] == '[');
}

/* The field names a member of the request (one it has, or one it lacks), or
 * is one cut short at cs_error's size (a prefix of a member's name). */
static bool names_a_member(const json_t *doc, const char *field)
{
    static const char *const members[] = {"topology", "collective", "method", "options", "v"};
    for (size_t i = 0; i < sizeof members / sizeof *members; i++)
        if (field_in(field, members[i]))
            return true;
    bool cut = strlen(field) == CS_ERROR_FIELD_MAX - 1;
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)doc, key, value)
        if (field_in(field, key) || (cut && !strncmp(key, field, strlen(field))))
            return true;
    return false;
}

static void check_refusal(const json_t *doc, int rc, const cs_error *err)
{
    FUZZ_CHECK(err->code == rc, "returned %d, error says %d", rc, err->code);
    FUZZ_CHECK(err->message[0], "refusal %d without a message (field '%s')", rc, err->field);
    int st = http_status_for(rc);
    FUZZ_CHECK(st == 400 || st == 413 || st == 422, "refusal %d answered %d: %s (field '%s')",
               rc, st, err->message, err->field);
    if (!json_is_object(doc))
        return;
    /* "" only for a member named "" (unknown members are named as they came) */
    FUZZ_CHECK(err->field[0] || json_object_get(doc, ""), "refusal without a field: %s",
               err->message);
    FUZZ_CHECK(names_a_member(doc, err->field),
               "field '%s' does not name a member of the request: %s", err->field,
               err->message);
}

static void check_parsed(const cs_synth_request *req, const cs_synth_limits *lim)
{
    FUZZ_CHECK(strlen(req->key) == 64, "key '%s'", req->key);
    FUZZ_CHECK(req->topology && req->topology->finalized && req->topology->ranks >= 1,
               "no finalized topology");
    FUZZ_CHECK(req->topology->ranks <= lim->max_ranks, "%d ranks past the limit %d",
               req->topology->ranks, lim->max_ranks);
    (void)synth_request_trivial(req);
    char *canon = synth_request_canonical_text(req);
    FUZZ_CHECK(canon, "no canonical text");
    cs_synth_request *again = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_parse(canon, strlen(canon), lim, &again, &err);
    FUZZ_CHECK(rc == CS_OK, "the canonical text is refused: %s (field '%s'): %s", err.message,
               err.field, canon);
    FUZZ_CHECK(!strcmp(again->key, req->key), "canonical text keys %s, request %s: %s",
               again->key, req->key, canon);
    char *canon2 = synth_request_canonical_text(again);
    FUZZ_CHECK(canon2 && !strcmp(canon, canon2), "canonical text not stable:\n%s\n%s", canon,
               canon2 ? canon2 : "(null)");
    free(canon2);
    synth_request_free(again);
    free(canon);

    /* the isomorphism key, as iso_cache_key computes it */
    if (req->topology->nswitch_nodes > 0)
        return;
    cs_iso_form f, g;
    cs_error_clear(&err);
    if (iso_canonicalize(req, NULL, &f, &err) != CS_OK) {
        FUZZ_CHECK(err.message[0], "iso refusal without a message");
        return;
    }
    FUZZ_CHECK(f.ranks == req->topology->ranks, "iso form of %d ranks for %d", f.ranks,
               req->topology->ranks);
    char *seen = calloc((size_t)f.ranks, 1);
    if (!seen)
        abort();
    for (int i = 0; i < f.ranks; i++) {
        int c = f.canon_of[i];
        FUZZ_CHECK(c >= 0 && c < f.ranks && !seen[c], "canon_of[%d] = %d is not a permutation",
                   i, c);
        seen[c] = 1;
    }
    free(seen);
    FUZZ_CHECK(iso_canonicalize(req, NULL, &g, &err) == CS_OK && !strcmp(f.key, g.key),
               "iso key not deterministic");
    iso_form_clear(&g);
    iso_form_clear(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return 0; /* the route's 400 "malformed JSON", field "body" */
    cs_synth_limits lim;
    synth_limits_default(&lim);
    cs_synth_request *req = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_from_json(doc, &lim, &req, &err);
    if (rc != CS_OK) {
        FUZZ_CHECK(!req, "refused with a request left");
        check_refusal(doc, rc, &err);
    } else {
        check_parsed(req, &lim);
        synth_request_free(req);
    }
    json_decref(doc);
    return 0;
}
