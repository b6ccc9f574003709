/* Tests of collective specs: kind names, JSON parsing and its errors, the
 * pre/post/source queries against the CONTRACT.md table, custom lookups,
 * copies and duals. */
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "collective.h"
#include "topology.h"

static int parse(const char *text, cs_collective *c, cs_error *err)
{
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    ck_assert_msg(doc != NULL, "bad test JSON: %s", text);
    int rc = collective_from_json(doc, c, err);
    json_decref(doc);
    return rc;
}

static void parse_fails(const char *text, const char *field, const char *needle)
{
    cs_collective c;
    cs_error err = { 0 };
    ck_assert_msg(parse(text, &c, &err) == CS_EINVAL, "accepted %s", text);
    ck_assert_str_eq(err.field, field);
    if (needle)
        ck_assert_msg(strstr(err.message, needle), "\"%s\" lacks \"%s\"", err.message, needle);
}

START_TEST(kind_names_match_contract)
{
    const char *names[] = { "allgather", "reducescatter", "allreduce", "broadcast", "reduce",
                            "gather", "scatter", "alltoall", "custom" };
    for (int k = 0; k < CS_COLL_KIND_COUNT; k++) {
        ck_assert_str_eq(collective_kind_name((cs_coll_kind)k), names[k]);
        cs_coll_kind back;
        ck_assert_int_eq(collective_kind_from_name(names[k], &back), CS_OK);
        ck_assert_int_eq(back, k);
    }
    cs_coll_kind x;
    ck_assert_int_eq(collective_kind_from_name("AllGather", &x), CS_EINVAL);
    ck_assert_int_eq(collective_kind_from_name(NULL, &x), CS_EINVAL);
    ck_assert(collective_kind_is_combining(CS_COLL_ALLREDUCE));
    ck_assert(collective_kind_is_combining(CS_COLL_REDUCE));
    ck_assert(collective_kind_is_combining(CS_COLL_REDUCESCATTER));
    ck_assert(!collective_kind_is_combining(CS_COLL_ALLGATHER));
    ck_assert(collective_kind_is_rooted(CS_COLL_BROADCAST));
    ck_assert(collective_kind_is_rooted(CS_COLL_GATHER));
    ck_assert(!collective_kind_is_rooted(CS_COLL_ALLTOALL));
    ck_assert(!collective_kind_is_rooted(CS_COLL_ALLREDUCE));
}
END_TEST

START_TEST(json_parse_and_print)
{
    cs_collective c;
    cs_error err = { 0 };
    ck_assert_int_eq(parse("{\"kind\": \"broadcast\", \"root\": 3}", &c, &err), CS_OK);
    ck_assert_int_eq(c.kind, CS_COLL_BROADCAST);
    ck_assert_int_eq(c.root, 3);
    ck_assert_int_eq(collective_validate(&c, 8, &err), CS_OK);
    ck_assert_int_eq(collective_validate(&c, 3, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "collective.root");
    json_t *j = collective_to_json(&c);
    ck_assert_str_eq(json_string_value(json_object_get(j, "kind")), "broadcast");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "root")), 3);
    json_decref(j);
    collective_free(&c);

    ck_assert_int_eq(parse("{\"kind\": \"allgather\"}", &c, &err), CS_OK);
    ck_assert_int_eq(c.root, -1);
    j = collective_to_json(&c);
    ck_assert_ptr_null(json_object_get(j, "root"));
    json_decref(j);
    collective_free(&c);

    /* custom round trip */
    const char *txt = "{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0], [1, 1]],"
                      " \"post\": [[0, 1], [1, 0]]}";
    ck_assert_int_eq(parse(txt, &c, &err), CS_OK);
    ck_assert_int_eq(c.custom_global_chunks, 2);
    ck_assert_int_eq(c.npre, 2);
    ck_assert_int_eq(c.npost, 2);
    j = collective_to_json(&c);
    char *s = json_dumps(j, JSON_COMPACT);
    ck_assert_str_eq(s, "{\"kind\":\"custom\",\"global_chunks\":2,\"pre\":[[0,0],[1,1]],"
                        "\"post\":[[0,1],[1,0]]}");
    free(s);
    json_decref(j);
    collective_free(&c);
}
END_TEST

START_TEST(json_errors_name_fields)
{
    parse_fails("[]", "collective", NULL);
    parse_fails("{}", "collective.kind", "required");
    parse_fails("{\"kind\": 3}", "collective.kind", "string");
    parse_fails("{\"kind\": \"allgathr\"}", "collective.kind",
                "accepted: allgather, reducescatter, allreduce, broadcast, reduce, gather, "
                "scatter, alltoall, custom");
    parse_fails("{\"kind\": \"broadcast\"}", "collective.root", "required");
    parse_fails("{\"kind\": \"gather\", \"root\": -1}", "collective.root", "non-negative");
    parse_fails("{\"kind\": \"scatter\", \"root\": \"0\"}", "collective.root", "non-negative");
    parse_fails("{\"kind\": \"reduce\", \"root\": 1.5}", "collective.root", "non-negative");
    parse_fails("{\"kind\": \"reduce\", \"root\": 99999999999}", "collective.root", NULL);
    parse_fails("{\"kind\": \"allgather\", \"root\": 0}", "collective.root", "no root");
    parse_fails("{\"kind\": \"allgather\", \"chunks\": 2}", "collective.chunks", "unknown key");
    parse_fails("{\"kind\": \"allgather\", \"pre\": []}", "collective.pre", "only kind custom");
    parse_fails("{\"kind\": \"custom\", \"pre\": [], \"post\": []}", "collective.global_chunks",
                "required");
    parse_fails("{\"kind\": \"custom\", \"global_chunks\": 0, \"pre\": [], \"post\": []}",
                "collective.global_chunks", NULL);
    parse_fails("{\"kind\": \"custom\", \"global_chunks\": 2, \"post\": []}", "collective.pre",
                "required");
    parse_fails("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0], [2, 0]],"
                " \"post\": []}", "collective.pre[1]", "chunk 2 out of range");
    parse_fails("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0]],"
                " \"post\": [[0]]}", "collective.post[0]", "pair");
    parse_fails("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, -1]],"
                " \"post\": []}", "collective.pre[0]", "rank");

    /* ranges that need the rank count */
    cs_collective c;
    cs_error err = { 0 };
    ck_assert_int_eq(parse("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0], [1, 4]],"
                           " \"post\": [[0, 1]]}", &c, &err), CS_OK);
    ck_assert_int_eq(collective_validate(&c, 4, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "collective.pre[1]");
    collective_free(&c);
    ck_assert_int_eq(parse("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0]],"
                           " \"post\": [[0, 1], [1, 1]]}", &c, &err), CS_OK);
    ck_assert_int_eq(collective_validate(&c, 2, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "collective.post[1]");
    ck_assert(strstr(err.message, "chunk 1"));
    collective_free(&c);
}
END_TEST

/* The CONTRACT.md table with P = 4, C = 2. */
START_TEST(builtin_pre_post_follow_contract)
{
    const int P = 4, C = 2;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 8);
    for (long g = 0; g < 8; g++)
        for (int r = 0; r < P; r++) {
            ck_assert(collective_pre(&c, P, C, g, r) == (r == g % 4));
            ck_assert(collective_post(&c, P, C, g, r));
        }
    ck_assert_int_eq(collective_source(&c, P, C, 6), 2);

    collective_init(&c, CS_COLL_GATHER, 1);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 8);
    ck_assert(collective_pre(&c, P, C, 7, 3) && !collective_pre(&c, P, C, 7, 1));
    ck_assert(collective_post(&c, P, C, 7, 1) && !collective_post(&c, P, C, 7, 3));

    collective_init(&c, CS_COLL_SCATTER, 1);
    ck_assert(collective_pre(&c, P, C, 6, 1) && !collective_pre(&c, P, C, 6, 2));
    ck_assert(collective_post(&c, P, C, 6, 2) && !collective_post(&c, P, C, 6, 1));
    ck_assert_int_eq(collective_source(&c, P, C, 6), 1);

    collective_init(&c, CS_COLL_BROADCAST, 2);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 2);
    ck_assert(collective_pre(&c, P, C, 1, 2) && !collective_pre(&c, P, C, 1, 0));
    ck_assert(collective_post(&c, P, C, 1, 0));

    /* alltoall: G = 32; chunk 13 starts at 13 % 4 = 1, ends at (13/4) % 4 = 3 */
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 32);
    ck_assert(collective_pre(&c, P, C, 13, 1) && !collective_pre(&c, P, C, 13, 3));
    ck_assert(collective_post(&c, P, C, 13, 3) && !collective_post(&c, P, C, 13, 1));
    ck_assert_int_eq(collective_source(&c, P, C, 13), 1);
    /* chunk 29: starts at 1, (29/4) % 4 = 7 % 4 = 3 */
    ck_assert(collective_post(&c, P, C, 29, 3));

    collective_init(&c, CS_COLL_REDUCESCATTER, -1);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 8);
    ck_assert(collective_pre(&c, P, C, 5, 0) && collective_pre(&c, P, C, 5, 3));
    ck_assert(collective_post(&c, P, C, 5, 1) && !collective_post(&c, P, C, 5, 2));
    ck_assert_int_eq(collective_source(&c, P, C, 5), -1);

    collective_init(&c, CS_COLL_REDUCE, 3);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 2);
    ck_assert(collective_post(&c, P, C, 0, 3) && !collective_post(&c, P, C, 0, 0));

    collective_init(&c, CS_COLL_ALLREDUCE, 5);
    ck_assert_int_eq(c.root, -1);
    ck_assert_int_eq(collective_global_chunks(&c, P, C), 2);
    ck_assert(collective_pre(&c, P, C, 1, 2) && collective_post(&c, P, C, 1, 0));

    /* huge P stays O(1) and in long arithmetic: alltoall G = 40000^2 * 2 */
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    ck_assert(collective_global_chunks(&c, 40000, 2) == 3200000000L);
    ck_assert(collective_post(&c, 40000, 2, 3199999999L, 39999));
}
END_TEST

START_TEST(custom_lookup_copy_and_source)
{
    cs_collective c, d;
    cs_error err = { 0 };
    /* chunk 0 at rank 0 -> ranks 1, 2; chunk 1 at ranks 1 and 2 -> rank 0 */
    ck_assert_int_eq(parse("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0], [1, 1],"
                           " [1, 2]], \"post\": [[0, 1], [0, 2], [1, 0]]}", &c, &err), CS_OK);
    ck_assert_int_eq(collective_validate(&c, 3, &err), CS_OK);
    ck_assert_int_eq(collective_global_chunks(&c, 3, 7), 2);
    ck_assert(collective_pre(&c, 3, 1, 0, 0) && !collective_pre(&c, 3, 1, 0, 1));
    ck_assert(collective_post(&c, 3, 1, 0, 2) && !collective_post(&c, 3, 1, 0, 0));
    ck_assert(collective_pre(&c, 3, 1, 1, 2));
    ck_assert_int_eq(collective_source(&c, 3, 1, 0), 0);
    ck_assert_int_eq(collective_source(&c, 3, 1, 1), -1);
    ck_assert(!collective_pre(&c, 3, 1, 5, 0));    /* out of range: false, no crash */
    ck_assert_int_eq(collective_copy(&d, &c, &err), CS_OK);
    collective_free(&c);
    ck_assert(collective_post(&d, 3, 1, 1, 0));
    ck_assert_int_eq(d.npre, 3);
    collective_free(&d);
}
END_TEST

START_TEST(duals)
{
    cs_collective c, d;
    cs_error err = { 0 };
    collective_init(&c, CS_COLL_REDUCESCATTER, -1);
    ck_assert_int_eq(collective_dual(&c, &d, &err), CS_OK);
    ck_assert_int_eq(d.kind, CS_COLL_ALLGATHER);
    collective_init(&c, CS_COLL_REDUCE, 2);
    ck_assert_int_eq(collective_dual(&c, &d, &err), CS_OK);
    ck_assert_int_eq(d.kind, CS_COLL_BROADCAST);
    ck_assert_int_eq(d.root, 2);
    collective_init(&c, CS_COLL_GATHER, 1);
    ck_assert_int_eq(collective_dual(&c, &d, &err), CS_OK);
    ck_assert_int_eq(d.kind, CS_COLL_SCATTER);
    ck_assert_int_eq(d.root, 1);
    collective_init(&c, CS_COLL_SCATTER, 1);
    ck_assert_int_eq(collective_dual(&c, &d, &err), CS_OK);
    ck_assert_int_eq(d.kind, CS_COLL_GATHER);
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    ck_assert_int_eq(collective_dual(&c, &d, &err), CS_EUNSUPPORTED);
    collective_init(&c, CS_COLL_CUSTOM, -1);
    ck_assert_int_eq(collective_dual(&c, &d, &err), CS_EUNSUPPORTED);
}
END_TEST


/* Issue 12: a misspelt kind (from the service or a file) suggests the
 * nearest one; a word that is nothing like one gets none. */
START_TEST(misspelt_kinds_suggest_the_nearest)
{
    ck_assert_str_eq(collective_kind_suggest("allgathr"), "allgather");
    ck_assert_str_eq(collective_kind_suggest("AllReduce"), "allreduce");
    ck_assert_str_eq(collective_kind_suggest("reducescater"), "reducescatter");
    ck_assert_str_eq(collective_kind_suggest("scattre"), "scatter");   /* a transposition */
    ck_assert_ptr_null(collective_kind_suggest("sort"));
    ck_assert_ptr_null(collective_kind_suggest(""));
    json_t *doc = json_pack("{s:s}", "kind", "alltoal");
    cs_collective c;
    cs_error err;
    ck_assert_int_eq(collective_from_json(doc, &c, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "did you mean \"alltoall\"?"), "%s", err.message);
    json_decref(doc);
    cs_topology *t = NULL;
    ck_assert_int_eq(topology_builtin("hypercbe:3", &t, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "did you mean 'hypercube:3'?"), "%s", err.message);
    ck_assert_int_eq(topology_builtin("dgx", &t, &err), CS_EINVAL);  /* dgx1 or dgx2 */
    ck_assert_msg(strstr(err.message, "did you mean 'dgx"), "%s", err.message);
    ck_assert_int_eq(topology_builtin("butterfly:4", &t, &err), CS_EINVAL);
    ck_assert_ptr_null(strstr(err.message, "did you mean"));
}
END_TEST

static Suite *collective_suite(void)
{
    Suite *s = suite_create("collective");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, kind_names_match_contract);
    tcase_add_test(tc, json_parse_and_print);
    tcase_add_test(tc, json_errors_name_fields);
    tcase_add_test(tc, builtin_pre_post_follow_contract);
    tcase_add_test(tc, custom_lookup_copy_and_source);
    tcase_add_test(tc, duals);
    tcase_add_test(tc, misspelt_kinds_suggest_the_nearest);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(collective_suite)
