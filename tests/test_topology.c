/* Tests of the topology model: construction, validation errors (each naming
 * its field), finalize (sorting, indexes, switch lowering), JSON round trips,
 * clone, reverse, unwind, graph queries.  Expected numbers are derived by hand
 * in the comments next to them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "topology.h"

/* ---- helpers ------------------------------------------------------------------- */

/* Time limits stretch under valgrind (make valgrind sets VALGRIND=1). */
static double slow_factor(void)
{
    const char *v = getenv("VALGRIND");
    return v && strcmp(v, "1") == 0 ? 50.0 : 1.0;
}

static cs_topology *parse_ok(const char *text)
{
    cs_topology *t = NULL;
    cs_error err = { 0 };
    int rc = topology_parse(text, strlen(text), NULL, &t, &err);
    ck_assert_msg(rc == CS_OK, "parse failed: %s: %s", err.field, err.message);
    return t;
}

/* Parses text expecting failure with code and field; returns the message. */
static void parse_fails(const char *text, int code, const char *field, const char *needle)
{
    cs_topology *t = NULL;
    cs_error err = { 0 };
    int rc = topology_parse(text, strlen(text), NULL, &t, &err);
    ck_assert_msg(rc == code, "expected %d got %d (%s: %s) for %s", code, rc, err.field,
                  err.message, text);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(err.field, field);
    if (needle)
        ck_assert_msg(strstr(err.message, needle), "message \"%s\" lacks \"%s\"", err.message,
                      needle);
}

static cs_topology *builtin_ok(const char *spec)
{
    cs_topology *t = NULL;
    cs_error err = { 0 };
    int rc = topology_builtin(spec, &t, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", spec, err.message);
    return t;
}

/* Structural equality of two finalized topologies (names aside). */
static void assert_same(const cs_topology *a, const cs_topology *b)
{
    ck_assert_int_eq(a->ranks, b->ranks);
    ck_assert_int_eq(a->nlinks, b->nlinks);
    for (int i = 0; i < a->nlinks; i++) {
        ck_assert_int_eq(a->links[i].src, b->links[i].src);
        ck_assert_int_eq(a->links[i].dst, b->links[i].dst);
        ck_assert_int_eq(a->links[i].lanes, b->links[i].lanes);
        ck_assert_int_eq(a->links[i].switch_id, b->links[i].switch_id);
        ck_assert(fabs(a->links[i].gbps - b->links[i].gbps) < 1e-12);
        ck_assert(fabs(a->links[i].alpha_us - b->links[i].alpha_us) < 1e-12);
    }
    ck_assert_int_eq(a->nshared, b->nshared);
    for (int i = 0; i < a->nshared; i++) {
        ck_assert_int_eq(a->shared[i].nlinks, b->shared[i].nlinks);
        ck_assert_int_eq(a->shared[i].lanes, b->shared[i].lanes);
        ck_assert_int_eq(a->shared[i].switch_id, b->shared[i].switch_id);
        for (int j = 0; j < a->shared[i].nlinks; j++)
            ck_assert_int_eq(a->shared[i].links[j], b->shared[i].links[j]);
    }
    ck_assert_int_eq(a->nswitches, b->nswitches);
    for (int i = 0; i < a->nswitches; i++) {
        ck_assert_str_eq(a->switches[i].name, b->switches[i].name);
        ck_assert_int_eq(a->switches[i].nranks, b->switches[i].nranks);
        for (int j = 0; j < a->switches[i].nranks; j++)
            ck_assert_int_eq(a->switches[i].ranks[j], b->switches[i].ranks[j]);
    }
    ck_assert_int_eq(a->ngroups, b->ngroups);
    for (int i = 0; i < a->ngroups; i++) {
        ck_assert_int_eq(a->groups[i].nranks, b->groups[i].nranks);
        for (int j = 0; j < a->groups[i].nranks; j++)
            ck_assert_int_eq(a->groups[i].ranks[j], b->groups[i].ranks[j]);
    }
    for (int r = 0; r < a->ranks; r++)
        if (a->group_of || b->group_of)
            ck_assert_int_eq(a->group_of[r], b->group_of[r]);
}

static void assert_round_trip(const cs_topology *t)
{
    json_t *doc = topology_to_json(t);
    ck_assert_ptr_nonnull(doc);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(doc);
    cs_topology *back = parse_ok(text);
    free(text);
    assert_same(t, back);
    ck_assert_str_eq(t->name, back->name);
    topology_free(back);
}

/* ---- construction and finalize ---------------------------------------------------- */

START_TEST(build_sorts_links_and_indexes)
{
    cs_error err = { 0 };
    cs_topology *t = topology_new("tri", 3);
    /* added out of order: 2->0, 0->1 (+1->0), 1->2 */
    ck_assert_int_eq(topology_add_link(t, 2, 0, 1, 10.0, 1.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 0, 1, 3, 20.0, 0.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 2, 1, 30.0, 2.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    ck_assert(t->finalized);
    /* sorted: 0->1, 1->0, 1->2, 2->0 */
    ck_assert_int_eq(t->nlinks, 4);
    int expect[4][2] = { { 0, 1 }, { 1, 0 }, { 1, 2 }, { 2, 0 } };
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(t->links[i].src, expect[i][0]);
        ck_assert_int_eq(t->links[i].dst, expect[i][1]);
        ck_assert_int_eq(t->links[i].switch_id, -1);
    }
    ck_assert_int_eq(t->links[0].lanes, 3);
    ck_assert_int_eq(t->links[1].lanes, 3);
    /* out_begin: rank0 [0,1), rank1 [1,3), rank2 [3,4) */
    ck_assert_int_eq(t->out_begin[0], 0);
    ck_assert_int_eq(t->out_begin[1], 1);
    ck_assert_int_eq(t->out_begin[2], 3);
    ck_assert_int_eq(t->out_begin[3], 4);
    /* in-links: into 0: links 1 (1->0) and 3 (2->0); into 1: 0; into 2: 2 */
    ck_assert_int_eq(t->in_begin[1] - t->in_begin[0], 2);
    ck_assert_int_eq(t->in_links[t->in_begin[0]], 1);
    ck_assert_int_eq(t->in_links[t->in_begin[0] + 1], 3);
    ck_assert_int_eq(t->in_links[t->in_begin[1]], 0);
    ck_assert_int_eq(t->in_links[t->in_begin[2]], 2);
    ck_assert_int_eq(topology_find_link(t, 1, 2), 2);
    ck_assert_int_eq(topology_find_link(t, 0, 2), -1);
    ck_assert_int_eq(topology_find_link(t, 7, 2), -1);
    /* capacities: rank 1 sends 3 + 1 lanes; bytes/us = 3*20e3 + 1*30e3 */
    ck_assert_int_eq(topology_egress_lanes(t, 1), 4);
    ck_assert_int_eq(topology_ingress_lanes(t, 0), 4);
    ck_assert(fabs(topology_egress_bw(t, 1) - 90000.0) < 1e-6);
    ck_assert(fabs(topology_ingress_bw(t, 2) - 30000.0) < 1e-6);
    /* finalized topologies refuse more links */
    ck_assert_int_eq(topology_add_link(t, 0, 2, 1, 1, 1, false, &err), CS_EINVAL);
    topology_free(t);
}
END_TEST

START_TEST(add_link_checks_values)
{
    cs_error err = { 0 };
    cs_topology *t = topology_new("x", 2);
    ck_assert_int_eq(topology_add_link(t, 0, 2, 1, 1, 1, false, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "dst");
    ck_assert_int_eq(topology_add_link(t, 1, 1, 1, 1, 1, false, &err), CS_EINVAL);
    ck_assert_int_eq(topology_add_link(t, 0, 1, 0, 1, 1, false, &err), CS_EINVAL);
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 0, 1, false, &err), CS_EINVAL);
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1, -1, false, &err), CS_EINVAL);
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, NAN, 1, false, &err), CS_EINVAL);
    ck_assert_ptr_null(topology_new("none", 0));
    topology_free(t);
}
END_TEST

START_TEST(finalize_reports_duplicates_and_disconnection)
{
    cs_error err = { 0 };
    cs_topology *t = topology_new("dup", 2);
    topology_add_link(t, 0, 1, 1, 1, 1, true, &err);
    topology_add_link(t, 1, 0, 1, 1, 1, false, &err);
    ck_assert_int_eq(topology_finalize(t, &err), CS_EINVAL);
    ck_assert(strstr(err.message, "duplicate link 1->0"));
    topology_free(t);

    t = topology_new("oneway", 3);
    topology_add_link(t, 0, 1, 1, 1, 1, false, &err);
    topology_add_link(t, 1, 2, 1, 1, 1, false, &err);
    ck_assert_int_eq(topology_finalize(t, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "links");
    /* 0 reaches everyone, but nobody reaches 0: "rank 1 cannot reach rank 0" */
    ck_assert(strstr(err.message, "not connected"));
    ck_assert(strstr(err.message, "cannot reach rank 0"));
    topology_free(t);
}
END_TEST

/* A switch over ranks {0,1,2} with a physical link 0<->1: lowering adds the 4
 * ordered pairs without a physical link (0->2, 2->0, 1->2, 2->1), lanes 1, and
 * per attached rank an egress and an ingress set over its derived links. */
START_TEST(switch_lowering_adds_links_and_sets)
{
    cs_topology *t = parse_ok("{\"ranks\": 3, \"links\": [{\"src\": 0, \"dst\": 1, \"lanes\": 4,"
                              " \"gbps\": 100, \"alpha_us\": 0.1, \"bidirectional\": true}],"
                              " \"switches\": [{\"name\": \"nv\", \"ranks\": [0, 1, 2],"
                              " \"gbps\": 25, \"alpha_us\": 1.5}]}");
    ck_assert_int_eq(t->nlinks, 6);
    int derived = 0;
    for (int i = 0; i < t->nlinks; i++) {
        const cs_link *l = &t->links[i];
        bool phys = (l->src == 0 && l->dst == 1) || (l->src == 1 && l->dst == 0);
        ck_assert_int_eq(l->switch_id, phys ? -1 : 0);
        if (!phys) {
            derived++;
            ck_assert_int_eq(l->lanes, 1);
            ck_assert(l->gbps == 25.0 && l->alpha_us == 1.5);
        }
    }
    ck_assert_int_eq(derived, 4);
    /* egress sets: 0:{0->2} 1:{1->2} 2:{2->0,2->1}; ingress: 0:{2->0} 1:{2->1}
     * 2:{0->2,1->2}.  Single-link sets repeat the link's own 1 lane and are
     * omitted: 2 sets remain, egress before ingress. */
    ck_assert_int_eq(t->nshared, 2);
    for (int i = 0; i < t->nshared; i++) {
        ck_assert_int_eq(t->shared[i].lanes, 1);
        ck_assert_int_eq(t->shared[i].switch_id, 0);
        ck_assert_int_eq(t->shared[i].nlinks, 2);
    }
    ck_assert_int_eq(t->links[t->shared[0].links[0]].src, 2);
    ck_assert_int_eq(t->links[t->shared[0].links[1]].src, 2);
    ck_assert_int_eq(t->links[t->shared[1].links[0]].dst, 2);
    ck_assert_int_eq(t->links[t->shared[1].links[1]].dst, 2);
    /* rank 2: all its out-links are in its egress set -> 1 lane; rank 0: 4 + 1 */
    ck_assert_int_eq(topology_egress_lanes(t, 2), 1);
    ck_assert_int_eq(topology_ingress_lanes(t, 2), 1);
    ck_assert_int_eq(topology_egress_lanes(t, 0), 5);
    /* rank 2 bandwidth: two 25 GB/s links capped to one lane = 25e3 B/us */
    ck_assert(fabs(topology_egress_bw(t, 2) - 25000.0) < 1e-6);
    assert_round_trip(t);
    json_t *doc = topology_to_json(t);
    /* printed as a switch, not as derived links: one bidirectional link */
    ck_assert_int_eq(json_array_size(json_object_get(doc, "links")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "switches")), 1);
    ck_assert_ptr_null(json_object_get(doc, "shared"));
    json_decref(doc);
    topology_free(t);
}
END_TEST

/* Two switches on ranks {0,1,2} and {1,2,3} both join the pair 1,2: it gets
 * one link per direction, from the first switch (as TACOS' unwinding keeps
 * the first), not one per switch: links stay unique per (src, dst).  Links:
 * switch s: 0->1 1->0 0->2 2->0 1->2 2->1 (6); switch t: 1->3 3->1 2->3 3->2
 * (4, the pair 1,2 left out); 10 in all.  Found by tests/fuzz/fuzz_topology. */
START_TEST(switches_sharing_a_pair_join_it_once)
{
    cs_topology *t = parse_ok("{\"ranks\": 4, \"switches\": ["
                              "{\"name\": \"s\", \"ranks\": [0, 1, 2], \"gbps\": 10, \"alpha_us\": 1},"
                              "{\"name\": \"t\", \"ranks\": [1, 2, 3], \"gbps\": 20, \"alpha_us\": 2,"
                              " \"copy\": true}]}");
    ck_assert_int_eq(t->nlinks, 10);
    for (int i = 1; i < t->nlinks; i++)
        ck_assert_msg(t->links[i - 1].src < t->links[i].src ||
                          (t->links[i - 1].src == t->links[i].src &&
                           t->links[i - 1].dst < t->links[i].dst),
                      "links %d and %d: %d->%d, %d->%d", i - 1, i, t->links[i - 1].src,
                      t->links[i - 1].dst, t->links[i].src, t->links[i].dst);
    int l12 = topology_find_link(t, 1, 2), l21 = topology_find_link(t, 2, 1);
    ck_assert(l12 >= 0 && l21 >= 0);
    ck_assert_int_eq(t->links[l12].switch_id, 0);
    ck_assert(t->links[l12].gbps == 10.0 && t->links[l21].alpha_us == 1.0);
    ck_assert_int_eq(t->links[topology_find_link(t, 1, 3)].switch_id, 1);
    /* switch t's port sets hold only its own links */
    for (int k = 0; k < t->nshared; k++)
        for (int i = 0; i < t->shared[k].nlinks; i++)
            ck_assert_int_eq(t->links[t->shared[k].links[i]].switch_id, t->shared[k].switch_id);
    /* the copy-capable switch's node view, and the document, agree */
    cs_topology *v = NULL;
    cs_error err;
    ck_assert_int_eq(topology_switch_nodes(t, &v, &err), CS_OK);
    for (int i = 1; i < v->nlinks; i++)
        ck_assert(v->links[i - 1].src < v->links[i].src ||
                  (v->links[i - 1].src == v->links[i].src && v->links[i - 1].dst < v->links[i].dst));
    topology_free(v);
    assert_round_trip(t);
    topology_free(t);
}
END_TEST

START_TEST(shared_sets_resolve_and_cap)
{
    /* star around 1 (PCIe-like): one set over 0->1, 2->1 with 1 lane */
    cs_topology *t = parse_ok("{\"ranks\": 3, \"links\": ["
                              "{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
                              "{\"src\": 2, \"dst\": 1, \"bidirectional\": true}],"
                              " \"shared\": [{\"links\": [[2, 1], [0, 1]], \"lanes\": 1}]}");
    ck_assert_int_eq(t->nshared, 1);
    ck_assert_int_eq(t->shared[0].nlinks, 2);
    ck_assert_int_eq(t->shared[0].switch_id, -1);
    /* indices sorted: 0->1 is link 0, 2->1 is link 3 (0->1,1->0,1->2,2->1) */
    ck_assert_int_eq(t->shared[0].links[0], 0);
    ck_assert_int_eq(t->shared[0].links[1], 3);
    ck_assert_int_eq(topology_ingress_lanes(t, 1), 1);
    ck_assert_int_eq(topology_egress_lanes(t, 1), 2);
    /* defaults: gbps 50, alpha 0.5, lanes 1 */
    ck_assert(t->links[0].gbps == 50.0 && t->links[0].alpha_us == 0.5);
    ck_assert_int_eq(t->links[0].lanes, 1);
    assert_round_trip(t);
    topology_free(t);
}
END_TEST

/* ---- validation errors name their field -------------------------------------------- */

START_TEST(json_errors_name_fields)
{
    const char *L = "{\"src\": 0, \"dst\": 1, \"bidirectional\": true}";
    char doc[1024];
    parse_fails("[1]", CS_EINVAL, "", "object");
    parse_fails("{\"ranks\": 2, ", CS_EINVAL, "", "invalid JSON");
    parse_fails("{\"links\": []}", CS_EINVAL, "ranks", "required");
    parse_fails("{\"ranks\": \"8\"}", CS_EINVAL, "ranks", "integer");
    parse_fails("{\"ranks\": 0}", CS_EINVAL, "ranks", "minimum");
    parse_fails("{\"ranks\": 99999999999999}", CS_ELIMIT, "ranks", "maximum");
    parse_fails("{\"ranks\": 2, \"colour\": 1}", CS_EINVAL, "colour", "unknown key");
    parse_fails("{\"ranks\": 2, \"name\": 3}", CS_EINVAL, "name", "string");
    parse_fails("{\"ranks\": 2, \"links\": {}}", CS_EINVAL, "links", "array");
    parse_fails("{\"ranks\": 2, \"links\": [3]}", CS_EINVAL, "links[0]", "object");
    snprintf(doc, sizeof doc, "{\"ranks\": 4, \"links\": [%s, %s, {\"src\": 9, \"dst\": 1}]}", L, L);
    /* links[1] duplicates links[0] is found later; links[2] has a bad src first */
    parse_fails(doc, CS_EINVAL, "links[2].src", "out of range");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": -1}]}", CS_EINVAL,
                "links[0].dst", "out of range");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0.5, \"dst\": 1}]}", CS_EINVAL,
                "links[0].src", "integer");
    parse_fails("{\"ranks\": 2, \"links\": [{\"dst\": 1}]}", CS_EINVAL, "links[0].src",
                "missing");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 1, \"dst\": 1}]}", CS_EINVAL,
                "links[0].dst", "self-loop");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"lanes\": 0}]}",
                CS_EINVAL, "links[0].lanes", "lanes 0");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"lanes\": "
                "12345678901234567}]}", CS_EINVAL, "links[0].lanes", "between 1");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"lanes\": 2.0}]}",
                CS_EINVAL, "links[0].lanes", "integer");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"gbps\": 0}]}", CS_EINVAL,
                "links[0].gbps", "> 0");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"gbps\": -3.5}]}",
                CS_EINVAL, "links[0].gbps", "> 0");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"gbps\": \"fast\"}]}",
                CS_EINVAL, "links[0].gbps", "number");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"alpha_us\": -0.1}]}",
                CS_EINVAL, "links[0].alpha_us", ">= 0");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"bidirectional\": 1}]}",
                CS_EINVAL, "links[0].bidirectional", "true or false");
    parse_fails("{\"ranks\": 2, \"links\": [{\"src\": 0, \"dst\": 1, \"speed\": 1}]}",
                CS_EINVAL, "links[0].speed", "unknown key \"speed\"");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s, {\"src\": 1, \"dst\": 0}]}", L);
    parse_fails(doc, CS_EINVAL, "links[1]", "duplicate link 1->0 (also given by links[0])");
    parse_fails("{\"ranks\": 3, \"links\": [{\"src\": 0, \"dst\": 1, \"bidirectional\": true}]}",
                CS_EINVAL, "links", "rank 0 cannot reach rank 2");
    /* shared sets */
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"shared\": [{\"links\": [[0, 1]],"
             " \"lanes\": 0}]}", L);
    parse_fails(doc, CS_EINVAL, "shared[0].lanes", "minimum");
    snprintf(doc, sizeof doc, "{\"ranks\": 3, \"links\": [%s, {\"src\": 1, \"dst\": 2, "
             "\"bidirectional\": true}], \"shared\": [{\"links\": [[0, 1]]}, {\"links\": [[0, 1],"
             " [0, 2]]}]}", L);
    parse_fails(doc, CS_EINVAL, "shared[1].links[1]", "no link 0->2");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"shared\": [{\"links\": [[0, 5]]}]}",
             L);
    parse_fails(doc, CS_EINVAL, "shared[0].links[0]", "out of range");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"shared\": [{\"links\": [[0]]}]}", L);
    parse_fails(doc, CS_EINVAL, "shared[0].links[0]", "pair");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"shared\": [{\"links\": [[0, 1]],"
             " \"cap\": 1}]}", L);
    parse_fails(doc, CS_EINVAL, "shared[0].cap", "unknown key");
    /* switches and groups */
    parse_fails("{\"ranks\": 2, \"switches\": [{\"ranks\": [0, 2]}]}", CS_EINVAL,
                "switches[0].ranks[1]", "out of range");
    parse_fails("{\"ranks\": 2, \"switches\": [{\"ranks\": [0, 0]}]}", CS_EINVAL,
                "switches[0].ranks[1]", "twice");
    parse_fails("{\"ranks\": 2, \"switches\": [{\"ranks\": [0]}]}", CS_EINVAL,
                "switches[0].ranks", "at least 2");
    parse_fails("{\"ranks\": 2, \"switches\": [{\"ranks\": [0, 1], \"gbps\": -1}]}", CS_EINVAL,
                "switches[0].gbps", "> 0");
    parse_fails("{\"ranks\": 2, \"switches\": [{\"ranks\": [0, 1], \"ports\": 2}]}", CS_EINVAL,
                "switches[0].ports", "unknown key");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"groups\": [[0], [1, 7]]}", L);
    parse_fails(doc, CS_EINVAL, "groups[1][1]", "out of range");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"groups\": [[0, 1], [1]]}", L);
    parse_fails(doc, CS_EINVAL, "groups[1][0]", "already in groups[0]");
    snprintf(doc, sizeof doc, "{\"ranks\": 2, \"links\": [%s], \"groups\": [0]}", L);
    parse_fails(doc, CS_EINVAL, "groups[0]", "array");
}
END_TEST

START_TEST(parse_limits_ranks_and_links)
{
    cs_topology *t = NULL;
    cs_error err = { 0 };
    const char *doc = "{\"ranks\": 3, \"links\": [{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
                      " {\"src\": 1, \"dst\": 2, \"bidirectional\": true}]}";
    cs_topology_parse_options opt = { .max_ranks = 2 };
    ck_assert_int_eq(topology_parse(doc, strlen(doc), &opt, &t, &err), CS_ELIMIT);
    ck_assert_str_eq(err.field, "ranks");
    opt = (cs_topology_parse_options){ .max_links = 3 };
    ck_assert_int_eq(topology_parse(doc, strlen(doc), &opt, &t, &err), CS_ELIMIT);
    ck_assert_str_eq(err.field, "links[1]");
    opt = (cs_topology_parse_options){ .max_links = 4 };
    ck_assert_int_eq(topology_parse(doc, strlen(doc), &opt, &t, &err), CS_OK);
    topology_free(t);
    /* the default limit */
    char big[128];
    snprintf(big, sizeof big, "{\"ranks\": %d}", CS_TOPOLOGY_DEFAULT_MAX_RANKS + 1);
    ck_assert_int_eq(topology_parse(big, strlen(big), NULL, &t, &err), CS_ELIMIT);
    /* builtins through topology_load obey the limit too */
    opt = (cs_topology_parse_options){ .max_ranks = 8 };
    ck_assert_int_eq(topology_load("ring:16", &opt, &t, &err), CS_ELIMIT);
    ck_assert_str_eq(err.field, "topology");
    ck_assert_ptr_null(t);
    ck_assert_int_eq(topology_load("dgx2", &opt, &t, &err), CS_ELIMIT);
    ck_assert_ptr_null(t);
    /* a huge builtin is refused before it is built */
    double t0 = cs_now();
    ck_assert_int_eq(topology_load("mesh2d:1000x1000", NULL, &t, &err), CS_ELIMIT);
    ck_assert(cs_now() - t0 < 0.1 * slow_factor());
    ck_assert_int_eq(topology_load("ring:8", &opt, &t, &err), CS_OK);
    topology_free(t);
}
END_TEST


/* A switch of n ranks is n(n-1) links once lowered: a 16 KB document with one
 * 2,895-rank switch would be 8.4M links (hundreds of MB, seconds of CPU).
 * The parser must refuse it from the counts, before building anything: the
 * peak RSS of a child that parses it stays far below what the links need. */
static long parse_peak_rss_kb(const char *doc, const cs_topology_parse_options *opt, int *rc,
                              char *field, size_t fn)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        cs_topology *t = NULL;
        cs_error err = { 0 };
        int r = topology_parse(doc, strlen(doc), opt, &t, &err);
        topology_free(t);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        char out[256];
        int n = snprintf(out, sizeof out, "%d %ld %s", r, ru.ru_maxrss, err.field);
        ssize_t w = write(pfd[1], out, (size_t)n);
        (void)w;
        _exit(0);
    }
    close(pfd[1]);
    char in[256] = "";
    ssize_t n = read(pfd[0], in, sizeof in - 1);
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_int_gt(n, 0);
    in[n] = '\0';
    long kb = 0;
    char f[128] = "";
    ck_assert_int_ge(sscanf(in, "%d %ld %127s", rc, &kb, f), 2);
    snprintf(field, fn, "%s", f);
    return kb;
}

START_TEST(switch_expansion_checked_before_building)
{
    enum { N = 2895 };
    char *doc = malloc(16 * N + 128);
    size_t used = (size_t)sprintf(doc, "{\"ranks\": %d, \"switches\": [{\"ranks\": [", N);
    for (int i = 0; i < N; i++)
        used += (size_t)sprintf(doc + used, "%s%d", i ? "," : "", i);
    sprintf(doc + used, "]}]}");
    cs_topology_parse_options opt = { .max_ranks = 4096, .max_links = 1000000 };
    int rc = 0;
    char field[128];
    long kb = parse_peak_rss_kb(doc, &opt, &rc, field, sizeof field);
    ck_assert_int_eq(rc, CS_ELIMIT);
    ck_assert_str_eq(field, "switches[0]");
    ck_assert_msg(kb < 64 * 1024, "parsing a refused switch peaked at %ld KB", kb);
    /* two switches that each fit but together do not: the sum is checked */
    used = (size_t)sprintf(doc, "{\"ranks\": 1600, \"links\": [{\"src\": 0, \"dst\": 800, "
                                "\"bidirectional\": true}], \"switches\": [{\"ranks\": [");
    for (int i = 0; i < 800; i++)
        used += (size_t)sprintf(doc + used, "%s%d", i ? "," : "", i);
    used += (size_t)sprintf(doc + used, "]}, {\"ranks\": [");
    for (int i = 800; i < 1600; i++)
        used += (size_t)sprintf(doc + used, "%s%d", i > 800 ? "," : "", i);
    sprintf(doc + used, "]}]}");
    cs_topology *t = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_parse(doc, strlen(doc), &opt, &t, &err), CS_ELIMIT);
    ck_assert_str_eq(err.field, "switches[1]");
    ck_assert_ptr_null(t);
    /* under the limit it still builds */
    opt.max_links = 2000000;
    ck_assert_int_eq(topology_parse(doc, strlen(doc), &opt, &t, &err), CS_OK);
    ck_assert_int_eq(t->nlinks, 2 * 800 * 799 + 2);
    topology_free(t);
    free(doc);
}
END_TEST

/* ---- JSON: DGX-1 and round trips ----------------------------------------------------- */

START_TEST(dgx1_json_equals_builtin)
{
    cs_topology *file = NULL, *b = builtin_ok("dgx1");
    cs_error err = { 0 };
    int rc = topology_load("../shared/reference/dgx1.json", NULL, &file, &err);
    if (rc == CS_EIO)
        rc = topology_load("/work/shared/reference/dgx1.json", NULL, &file, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_str_eq(file->name, "dgx1");
    assert_same(file, b);
    /* facts of the SCCL paper: 6 NVLinks per GPU, two groups of 4 */
    for (int r = 0; r < 8; r++) {
        ck_assert_int_eq(topology_egress_lanes(b, r), 6);
        ck_assert_int_eq(topology_ingress_lanes(b, r), 6);
    }
    ck_assert_int_eq(b->group_of[3], 0);
    ck_assert_int_eq(b->group_of[4], 1);
    topology_free(file);
    topology_free(b);
}
END_TEST

START_TEST(round_trips)
{
    const char *specs[] = { "dgx1", "ring:5", "dgx2", "ndv2:2", "switch2d:4x3", "rfs3d:2x3x2",
                            "dragonfly:3x4", "amd8fc", "ring:6,gbps=12.5,alpha=0.15" };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        cs_topology *t = builtin_ok(specs[i]);
        assert_round_trip(t);
        cs_topology *c = NULL;
        cs_error err = { 0 };
        ck_assert_int_eq(topology_clone(t, &c, &err), CS_OK);
        assert_same(t, c);
        topology_free(c);
        topology_free(t);
    }
    /* a JSON document given as text to topology_load */
    cs_topology *t = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_load("  {\"name\": \"pair\", \"ranks\": 2, \"links\": [{\"src\": 0,"
                                   " \"dst\": 1, \"lanes\": 2, \"bidirectional\": true}]}",
                                   NULL, &t, &err), CS_OK);
    ck_assert_str_eq(t->name, "pair");
    ck_assert_int_eq(t->nlinks, 2);
    topology_free(t);
    ck_assert_int_eq(topology_load("/nonexistent/topo.json", NULL, &t, &err), CS_EIO);
    ck_assert_int_eq(topology_load("nosuchfamily:3", NULL, &t, &err), CS_EINVAL);
}
END_TEST

/* ---- reverse and unwind -------------------------------------------------------------- */

START_TEST(reverse_flips_links_sets_and_switches)
{
    cs_topology *t = parse_ok("{\"ranks\": 3, \"links\": [{\"src\": 0, \"dst\": 1, \"lanes\": 2},"
                              " {\"src\": 1, \"dst\": 2, \"lanes\": 3}, {\"src\": 2, \"dst\": 0}],"
                              " \"shared\": [{\"links\": [[0, 1], [1, 2]], \"lanes\": 2}],"
                              " \"groups\": [[0, 1], [2]]}");
    cs_topology *r = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_reverse(t, &r, &err), CS_OK);
    /* 1->0 (2 lanes), 2->1 (3), 0->2 (1) */
    ck_assert_int_eq(r->nlinks, 3);
    ck_assert_int_eq(r->links[topology_find_link(r, 1, 0)].lanes, 2);
    ck_assert_int_eq(r->links[topology_find_link(r, 2, 1)].lanes, 3);
    ck_assert_int_eq(r->links[topology_find_link(r, 0, 2)].lanes, 1);
    ck_assert_int_eq(topology_find_link(r, 0, 1), -1);
    ck_assert_int_eq(r->nshared, 1);
    ck_assert_int_eq(r->shared[0].nlinks, 2);
    ck_assert_int_eq(r->shared[0].links[0], topology_find_link(r, 1, 0));
    ck_assert_int_eq(r->shared[0].links[1], topology_find_link(r, 2, 1));
    ck_assert_int_eq(r->ngroups, 2);
    /* reversing twice gives the original back */
    cs_topology *rr = NULL;
    ck_assert_int_eq(topology_reverse(r, &rr, &err), CS_OK);
    assert_same(t, rr);
    topology_free(rr);
    topology_free(r);
    topology_free(t);

    /* a switch keeps its lowering: egress sets become ingress sets */
    t = builtin_ok("dgx2");
    ck_assert_int_eq(topology_reverse(t, &r, &err), CS_OK);
    ck_assert_int_eq(r->nlinks, 240);
    ck_assert_int_eq(r->nshared, 32);
    ck_assert_int_eq(topology_egress_lanes(r, 5), 1);
    topology_free(r);
    topology_free(t);
}
END_TEST

START_TEST(unwind_switch_degree)
{
    /* 4 ranks on one switch of 40 GB/s, degree 2: rank i -> i+1, i+2 (mod 4),
     * 8 links of 20 GB/s, no shared sets, no switches. */
    cs_topology *t = parse_ok("{\"ranks\": 4, \"switches\": [{\"ranks\": [0, 1, 2, 3],"
                              " \"gbps\": 40, \"alpha_us\": 0.25}]}");
    ck_assert_int_eq(t->nlinks, 12);
    cs_topology *u = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_unwind_switches(t, 2, &u, &err), CS_OK);
    ck_assert_int_eq(u->nswitches, 0);
    ck_assert_int_eq(u->nshared, 0);
    ck_assert_int_eq(u->nlinks, 8);
    for (int i = 0; i < 4; i++) {
        for (int d = 1; d <= 2; d++) {
            int k = topology_find_link(u, i, (i + d) % 4);
            ck_assert_int_ge(k, 0);
            ck_assert(u->links[k].gbps == 20.0 && u->links[k].alpha_us == 0.25);
            ck_assert_int_eq(u->links[k].switch_id, -1);
        }
        ck_assert_int_eq(topology_find_link(u, i, (i + 3) % 4), -1);
    }
    topology_free(u);
    /* degree 1 is a unidirectional ring */
    ck_assert_int_eq(topology_unwind_switches(t, 1, &u, &err), CS_OK);
    ck_assert_int_eq(u->nlinks, 4);
    topology_free(u);
    ck_assert_int_eq(topology_unwind_switches(t, 4, &u, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "degree");
    ck_assert_int_eq(topology_unwind_switches(t, 0, &u, &err), CS_EINVAL);
    topology_free(t);

    /* physical links survive; switch2d:2x2 has 2 up switches and 2 out switches
     * of 2 ranks: degree 1 gives each pair both directions: 8 links */
    t = builtin_ok("switch2d:2x2");
    ck_assert_int_eq(topology_unwind_switches(t, 1, &u, &err), CS_OK);
    ck_assert_int_eq(u->nlinks, 8);
    ck_assert_int_eq(u->ngroups, 2);
    ck_assert(u->links[topology_find_link(u, 0, 1)].gbps == 300.0);
    ck_assert(u->links[topology_find_link(u, 0, 2)].gbps == 25.0);
    topology_free(u);
    topology_free(t);
}
END_TEST

/* ---- graph queries ------------------------------------------------------------------------ */

START_TEST(torus_hops_and_paths)
{
    /* torus2d:4x4, rank = x + 4y.  From 0: distance = min(x,4-x) + min(y,4-y). */
    cs_topology *t = builtin_ok("torus2d:4x4");
    cs_error err = { 0 };
    int dist[16];
    ck_assert_int_eq(topology_shortest_hops(t, 0, dist, &err), CS_OK);
    for (int r = 0; r < 16; r++) {
        int x = r % 4, y = r / 4;
        int dx = x < 4 - x ? x : 4 - x, dy = y < 4 - y ? y : 4 - y;
        ck_assert_int_eq(dist[r], dx + dy);
    }
    int d = 0;
    ck_assert_int_eq(topology_diameter(t, &d, &err), CS_OK);
    ck_assert_int_eq(d, 4);
    /* 0 -> 10 (x=2, y=2): 4 hops; ties go to the lowest next rank: the path
     * is 0 -> 1 -> 2 -> 6 -> 10 (BFS reaches 2 first via 1, and 6 via 2). */
    int path[16], n = 0;
    ck_assert_int_eq(topology_shortest_path(t, 0, 10, path, &n, &err), CS_OK);
    ck_assert_int_eq(n, 4);
    int expect[5] = { 0, 1, 2, 6, 10 };
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(t->links[path[i]].src, expect[i]);
        ck_assert_int_eq(t->links[path[i]].dst, expect[i + 1]);
    }
    /* 0 -> 3 wraps around: 1 hop */
    ck_assert_int_eq(topology_shortest_path(t, 0, 3, path, &n, &err), CS_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(topology_shortest_path(t, 0, 0, path, &n, &err), CS_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(topology_shortest_path(t, 0, 16, path, &n, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "dst");
    topology_free(t);

    /* line:5 diameter 4 */
    t = builtin_ok("line:5");
    ck_assert_int_eq(topology_diameter(t, &d, &err), CS_OK);
    ck_assert_int_eq(d, 4);
    topology_free(t);
}
END_TEST

/* topology_diameter walks each switch as one hop between its members instead
 * of its n(n-1) derived links: on topologies with switches (and physical
 * links among members, one-way links, ranks on two switches) it must equal
 * the largest distance topology_shortest_hops finds over the derived links.
 * Built from JSON so no builtin's closed-form diameter is cached. */
START_TEST(diameter_with_switches_is_all_pairs_bfs)
{
    const char *specs[] = {
        "dgx2", "ndv2:3", "dgxh100:3", "switch2d:4x3", "rfs3d:2x2x4",
        /* a switch over a physical ring, a second switch sharing rank 1, a
         * one-way tail 6 -> 7 -> 8 back into the switch through rank 8 */
        "{\"ranks\": 9, \"links\": [{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
        " {\"src\": 1, \"dst\": 2, \"bidirectional\": true},"
        " {\"src\": 2, \"dst\": 3, \"bidirectional\": true},"
        " {\"src\": 3, \"dst\": 0, \"bidirectional\": true},"
        " {\"src\": 5, \"dst\": 6, \"bidirectional\": true},"
        " {\"src\": 6, \"dst\": 7}, {\"src\": 7, \"dst\": 8}, {\"src\": 8, \"dst\": 6}],"
        " \"switches\": [{\"ranks\": [0, 1, 2, 3], \"gbps\": 50},"
        " {\"ranks\": [1, 4, 5, 8], \"gbps\": 20}]}"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        cs_topology *b = NULL, *t = NULL;
        cs_error err = { 0 };
        ck_assert_msg(topology_load(specs[i], NULL, &b, &err) == CS_OK, "%s: %s", specs[i],
                      err.message);
        json_t *doc = topology_to_json(b);
        ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
        json_decref(doc);
        topology_free(b);
        ck_assert_int_gt(t->nswitches, 0);
        int *dist = malloc(sizeof(int) * (size_t)t->ranks), want = 0;
        for (int s = 0; s < t->ranks; s++) {
            ck_assert_int_eq(topology_shortest_hops(t, s, dist, &err), CS_OK);
            for (int r = 0; r < t->ranks; r++)
                want = dist[r] > want ? dist[r] : want;
        }
        int d = -1;
        ck_assert_int_eq(topology_diameter(t, &d, &err), CS_OK);
        ck_assert_msg(d == want, "%s: diameter %d, all-pairs BFS %d", specs[i], d, want);
        /* the walker itself, both ways: forward against BFS over every link,
         * backward against BFS on the reversed topology */
        cs_hops *h = topology_hops_new(t);
        ck_assert_ptr_nonnull(h);
        cs_topology *rev = NULL;
        ck_assert_int_eq(topology_reverse(t, &rev, &err), CS_OK);
        int *hd = malloc(sizeof(int) * (size_t)t->ranks);
        for (int src = 0; src < t->ranks; src++)
            for (int back = 0; back < 2; back++) {
                ck_assert_int_eq(topology_shortest_hops(back ? rev : t, src, dist, &err), CS_OK);
                int far = topology_hops_from(h, src, back, hd), want_far = 0;
                for (int r = 0; r < t->ranks; r++) {
                    ck_assert_msg(hd[r] == dist[r], "%s: %s rank %d to %d: %d hops, BFS %d",
                                  specs[i], back ? "into" : "from", src, r, hd[r], dist[r]);
                    want_far = dist[r] > want_far ? dist[r] : want_far;
                }
                ck_assert_int_eq(far, want_far);
            }
        free(hd);
        free(dist);
        topology_free(rev);
        topology_hops_free(h);
        topology_free(t);
    }
}
END_TEST

START_TEST(large_mesh_builds_fast)
{
    double t0 = cs_now();
    cs_topology *t = builtin_ok("mesh2d:200x200");
    double secs = cs_now() - t0;
    ck_assert_int_eq(t->ranks, 40000);
    /* 2 * (199*200 + 200*199) directed links */
    ck_assert_int_eq(t->nlinks, 2 * (199 * 200 * 2));
    ck_assert_msg(secs < 1.0 * slow_factor(), "mesh2d:200x200 took %.3f s", secs);
    int dist[1];
    (void)dist;
    topology_free(t);
}
END_TEST

/* Mutated documents (fixed seed) must parse or fail cleanly with a message:
 * never crash, never leak (run under ASan/valgrind by make test-asan). */
START_TEST(mutated_documents_fail_cleanly)
{
    const char *seeds[] = {
        "{\"name\": \"m\", \"ranks\": 4, \"links\": [{\"src\": 0, \"dst\": 1, \"lanes\": 2, "
        "\"gbps\": 25.0, \"alpha_us\": 0.7, \"bidirectional\": true}, {\"src\": 1, \"dst\": 2, "
        "\"bidirectional\": true}, {\"src\": 2, \"dst\": 3, \"bidirectional\": true}], "
        "\"shared\": [{\"links\": [[0, 1], [2, 1]], \"lanes\": 1}], \"groups\": [[0, 1], [2, 3]]}",
        "{\"ranks\": 4, \"switches\": [{\"name\": \"s\", \"ranks\": [0, 1, 2, 3], \"gbps\": 50, "
        "\"alpha_us\": 0.5}], \"groups\": [[0, 1, 2, 3]]}",
    };
    const char *replacements[] = { "-1", "0", "4", "99999999999999999999", "1e308", "-1e308", "null",
                                   "\"x\"", "[]", "{}", "true", "2.5", "[[0,0]]", "" };
    unsigned seed = 12345;
    int ok = 0, failed = 0;
    for (int iter = 0; iter < 3000; iter++) {
        const char *base = seeds[iter % 2];
        size_t len = strlen(base);
        char buf[1024];
        seed = seed * 1103515245u + 12345u;
        size_t pos = (seed >> 8) % len;
        seed = seed * 1103515245u + 12345u;
        size_t cut = 1 + (seed >> 8) % 6;
        seed = seed * 1103515245u + 12345u;
        const char *rep = replacements[(seed >> 8) % (sizeof replacements / sizeof *replacements)];
        if (pos + cut > len)
            cut = len - pos;
        int n = snprintf(buf, sizeof buf, "%.*s%s%s", (int)pos, base, rep, base + pos + cut);
        ck_assert(n > 0 && (size_t)n < sizeof buf);
        cs_topology *t = NULL;
        cs_error err = { 0 };
        int rc = topology_parse(buf, strlen(buf), NULL, &t, &err);
        if (rc == CS_OK) {
            ck_assert(t && t->finalized);
            ok++;
            topology_free(t);
        } else {
            ck_assert_ptr_null(t);
            ck_assert_msg(err.message[0] != '\0', "no message for %s", buf);
            ck_assert(rc == CS_EINVAL || rc == CS_ELIMIT);
            failed++;
        }
    }
    ck_assert_int_gt(failed, 1000);
    ck_assert_int_gt(ok, 10);
}
END_TEST

static Suite *topology_suite(void)
{
    Suite *s = suite_create("topology");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, build_sorts_links_and_indexes);
    tcase_add_test(tc, add_link_checks_values);
    tcase_add_test(tc, finalize_reports_duplicates_and_disconnection);
    tcase_add_test(tc, switch_lowering_adds_links_and_sets);
    tcase_add_test(tc, switches_sharing_a_pair_join_it_once);
    tcase_add_test(tc, shared_sets_resolve_and_cap);
    tcase_add_test(tc, json_errors_name_fields);
    tcase_add_test(tc, parse_limits_ranks_and_links);
    tcase_add_test(tc, switch_expansion_checked_before_building);
    tcase_add_test(tc, dgx1_json_equals_builtin);
    tcase_add_test(tc, round_trips);
    tcase_add_test(tc, reverse_flips_links_sets_and_switches);
    tcase_add_test(tc, unwind_switch_degree);
    tcase_add_test(tc, torus_hops_and_paths);
    tcase_add_test(tc, diameter_with_switches_is_all_pairs_bfs);
    tcase_add_test(tc, large_mesh_builds_fast);
    tcase_add_test(tc, mutated_documents_fail_cleanly);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(topology_suite)
