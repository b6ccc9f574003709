/*
 * Tests of copy-capable switches (topology.h "Copy-capable switches"):
 * the optional switches[].copy field and its node numbering, the node view,
 * the verifier's checks of schedules through a switch node (causality at the
 * switch, each port used once per copy), the simulator's timing of them,
 * mcf using in-switch copy where it helps (against bounds worked out here,
 * not read from the solver), and code generation refusing them.
 *
 * Units: every switch here has gbps 1 (1000 bytes/us) and alpha 0, and
 * chunks are 1000 bytes, so every send through a port takes 1 us: a send up
 * to the switch node and the copies down from it take 1 us each.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "daemon_check.h"
#include "mcf.h"
#include "msccl_xml.h"
#include "simulate.h"
#include "synthesize.h"
#include "verify.h"

/* P ranks on one switch "sw" (gbps 1, alpha 0), copy-capable or not; extra
 * is spliced into the document (e.g. a rank off the switch). */
static cs_topology *star(int P, bool copy, int ranks_total, const char *extra)
{
    char doc[2048], list[512] = "";
    int n = 0;
    for (int r = 0; r < P; r++)
        n += snprintf(list + n, sizeof list - (size_t)n, "%s%d", r ? "," : "", r);
    snprintf(doc, sizeof doc,
             "{\"name\":\"star%d%s\",\"ranks\":%d,%s\"switches\":[{\"name\":\"sw\",\"ranks\":[%s],"
             "\"gbps\":1,\"alpha_us\":0%s}]}",
             P, copy ? "c" : "", ranks_total, extra ? extra : "", list,
             copy ? ",\"copy\":true" : "");
    cs_topology *t = NULL;
    cs_error err;
    int rc = topology_parse(doc, strlen(doc), NULL, &t, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", doc, err.message);
    return t;
}

/* An empty broadcast (root 0) algorithm with `steps` steps on P ranks that
 * may name the one switch node (P). */
static cs_algorithm *bcast(int P, int steps)
{
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "star", P, 1, steps, &a, &err), CS_OK);
    a->switch_nodes = 1;
    snprintf(a->method, sizeof a->method, "test");
    return a;
}

/* A broadcast from 0 through the switch node: up in step 0 (or 0-1 us),
 * copies down to every other rank in step 1 (1-2 us). */
static cs_algorithm *bcast_through_switch(int P, bool timed)
{
    cs_algorithm *a = bcast(P, 2);
    if (timed) {
        a->timed_chunk_bytes = 1000;
        ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, P, 0, CS_OP_COPY, 0, 1), CS_OK);
        for (int r = 1; r < P; r++)
            ck_assert_int_eq(algorithm_add_timed_send(a, 0, P, r, 1, CS_OP_COPY, 1, 2), CS_OK);
    } else {
        ck_assert_int_eq(algorithm_add_send(a, 0, 0, P, 0, CS_OP_COPY), CS_OK);
        for (int r = 1; r < P; r++)
            ck_assert_int_eq(algorithm_add_send(a, 0, P, r, 1, CS_OP_COPY), CS_OK);
    }
    return a;
}

/* The verifier's report must be invalid and one reason must contain `what`. */
static void assert_invalid(const cs_topology *t, const cs_algorithm *a, const char *what)
{
    cs_verify_report rep;
    cs_error err;
    int rc = algorithm_verify_report(t, a, &rep, &err);
    ck_assert_int_eq(rc, CS_EVERIFY);
    bool found = false;
    for (int i = 0; i < rep.nreasons; i++)
        found |= strstr(rep.reasons[i], what) != NULL;
    ck_assert_msg(found, "no reason mentions \"%s\"; first: %s", what,
                  rep.nreasons ? rep.reasons[0] : "(none)");
}

static void assert_valid(const cs_topology *t, const cs_algorithm *a)
{
    cs_error err;
    int rc = algorithm_verify(t, a, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
}

START_TEST(copy_flag_is_optional_and_numbers_the_nodes)
{
    cs_topology *plain = star(4, false, 4, NULL), *copy = star(4, true, 4, NULL);
    ck_assert_int_eq(plain->nswitch_nodes, 0);
    ck_assert_int_eq(plain->switches[0].node, -1);
    ck_assert_int_eq(copy->nswitch_nodes, 1);
    ck_assert_int_eq(copy->switches[0].node, 4);
    ck_assert_int_eq(topology_switch_of_node(copy, 4), 0);
    ck_assert_int_eq(topology_switch_of_node(copy, 3), -1);
    /* the lowered form is the same: old documents mean what they meant */
    ck_assert_int_eq(plain->nlinks, copy->nlinks);
    ck_assert_int_eq(plain->nshared, copy->nshared);
    /* printed only when set */
    json_t *jp = topology_to_json(plain), *jc = topology_to_json(copy);
    char *p = json_dumps(jp, 0), *c = json_dumps(jc, 0);
    ck_assert_ptr_null(strstr(p, "copy"));
    ck_assert_ptr_nonnull(strstr(c, "\"copy\": true"));
    free(p);
    free(c);
    json_decref(jp);
    json_decref(jc);
    /* the node view: node 4 joined to every member inside its ports */
    cs_topology *nv = NULL;
    cs_error err;
    ck_assert_int_eq(topology_switch_nodes(copy, &nv, &err), CS_OK);
    ck_assert_int_eq(nv->ranks, 5);
    ck_assert_int_eq(nv->nlinks, copy->nlinks + 8);
    for (int r = 0; r < 4; r++) {
        int up = topology_find_link(nv, r, 4), down = topology_find_link(nv, 4, r);
        ck_assert_int_ge(up, 0);
        ck_assert_int_ge(down, 0);
        int in_sets = 0;
        for (int s = 0; s < nv->nshared; s++)
            for (int k = 0; k < nv->shared[s].nlinks; k++)
                in_sets += nv->shared[s].links[k] == up || nv->shared[s].links[k] == down;
        ck_assert_int_eq(in_sets, 2);   /* r's egress set and r's ingress set */
    }
    topology_free(nv);
    ck_assert_int_eq(topology_switch_nodes(plain, &nv, &err), CS_EINVAL);
    ck_assert_ptr_null(nv);
    /* builtins: copy=1 */
    cs_topology *d = NULL;
    ck_assert_int_eq(topology_builtin("dgx2,copy=1", &d, &err), CS_OK);
    ck_assert(d->switches[0].copy);
    ck_assert_int_eq(d->switches[0].node, 16);
    topology_free(d);
    ck_assert_int_eq(topology_builtin("ring:4,copy=1", &d, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "no switch"));
    /* a bad value is named */
    const char *bad = "{\"ranks\":2,\"switches\":[{\"ranks\":[0,1],\"copy\":1}]}";
    ck_assert_int_eq(topology_parse(bad, strlen(bad), NULL, &d, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "switches[0].copy");
    topology_free(plain);
    topology_free(copy);
}
END_TEST

START_TEST(verifier_accepts_copies_through_the_switch)
{
    cs_topology *t = star(8, true, 8, NULL), *plain = star(8, false, 8, NULL);
    for (int timed = 0; timed < 2; timed++) {
        cs_algorithm *a = bcast_through_switch(8, timed);
        assert_valid(t, a);
        /* without copy there is no switch node */
        assert_invalid(plain, a, "no copy-capable switch");
        /* 1 us up, 1 us down (the copies in parallel on 7 ports) */
        cs_sim_result sr;
        cs_error err;
        ck_assert_int_eq(simulate_algorithm(t, a, 1000, &sr, &err), CS_OK);
        ck_assert_double_eq_tol(sr.time_us, 2.0, 1e-9);
        sim_result_free(&sr);
        /* the document form keeps the nodes */
        json_t *doc = algorithm_to_json(a);
        ck_assert_int_eq(json_integer_value(json_object_get(doc, "switch_nodes")), 1);
        cs_algorithm *b = NULL;
        ck_assert_int_eq(algorithm_from_json(doc, &b, &err), CS_OK);
        json_decref(doc);
        ck_assert_int_eq(b->switch_nodes, 1);
        assert_valid(t, b);
        algorithm_free(b);
        algorithm_free(a);
    }
    topology_free(t);
    topology_free(plain);
}
END_TEST

START_TEST(verifier_rejects_a_chunk_leaving_before_it_arrived)
{
    cs_topology *t = star(4, true, 4, NULL);
    /* untimed: the copy leaves in the step the chunk goes up */
    cs_algorithm *a = bcast(4, 2);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 4, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 1, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 2, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 3, 1, CS_OP_COPY), CS_OK);
    assert_invalid(t, a, "switch sw (node 4) does not hold chunk 0 before step 1");
    algorithm_free(a);
    /* timed: a copy starts at 0.5 us, the chunk is at the switch from 1 us */
    a = bcast(4, 2);
    a->timed_chunk_bytes = 1000;
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 0, CS_OP_COPY, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 1, 1, CS_OP_COPY, 0.5, 1.5), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 2, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 3, 1, CS_OP_COPY, 1, 2), CS_OK);
    assert_invalid(t, a, "switch sw (node 4) only has chunk 0 from 1.000 us");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* The switch node is store-and-forward (docs/model.md): it may hold a chunk
 * and copy it on later, as a GPU may; what it cannot do is copy a chunk it
 * never received (above). */
START_TEST(verifier_accepts_a_switch_holding_a_chunk)
{
    cs_topology *t = star(4, true, 4, NULL);
    /* untimed: up in step 0, copies in steps 1 and 3 (held over step 2) */
    cs_algorithm *a = bcast(4, 4);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 4, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 1, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 2, 3, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 3, 3, CS_OP_COPY), CS_OK);
    assert_valid(t, a);
    algorithm_free(a);
    /* timed: at the switch from 1 us, copied at 1 us and again at 5 us */
    a = bcast(4, 2);
    a->timed_chunk_bytes = 1000;
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 0, CS_OP_COPY, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 1, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 2, 1, CS_OP_COPY, 5, 6), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 3, 1, CS_OP_COPY, 5, 6), CS_OK);
    assert_valid(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(verifier_rejects_ports_over_capacity)
{
    cs_topology *t = star(4, true, 4, NULL);
    /* rank 0's egress port carries the chunk up and a unicast in one step */
    cs_algorithm *a = bcast(4, 2);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 4, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 2, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 3, 1, CS_OP_COPY), CS_OK);
    assert_invalid(t, a, "the egress port of rank 0 on switch sw carries 2 chunks in step 0");
    algorithm_free(a);
    /* rank 3's ingress port: a copy from the switch and a unicast from 0 */
    a = bcast(4, 2);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 4, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 1, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 2, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 3, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 3, 1, CS_OP_COPY), CS_OK);
    assert_invalid(t, a, "the ingress port of rank 3 on switch sw carries 2 chunks in step 1");
    algorithm_free(a);
    /* timed: two copies into rank 1 at once at the full port rate */
    a = bcast(4, 3);
    a->timed_chunk_bytes = 1000;
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 0, CS_OP_COPY, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 1, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 1, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 2, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 3, 1, CS_OP_COPY, 1, 2), CS_OK);
    assert_invalid(t, a, "would carry 2 GB/s");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(verifier_rejects_what_a_switch_node_cannot_do)
{
    /* 5 ranks, the switch joins 0-3, rank 4 hangs off rank 3 */
    cs_topology *t = star(4, true, 5,
                          "\"links\":[{\"src\":3,\"dst\":4,\"gbps\":1,\"alpha_us\":0,"
                          "\"bidirectional\":true}],");
    ck_assert_int_eq(t->switches[0].node, 5);
    cs_algorithm *a = bcast(5, 3);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 5, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 5, 4, 1, CS_OP_COPY), CS_OK);   /* not a member */
    assert_invalid(t, a, "switch sw (node 5): the rank is not on this switch");
    algorithm_free(a);
    /* an algorithm that does not declare its switch nodes */
    a = bcast(5, 1);
    a->switch_nodes = 0;
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 5, 0, CS_OP_COPY), CS_OK);
    assert_invalid(t, a, "need the algorithm's switch_nodes");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* A combining algorithm of `kind` (root 1 when rooted) on 4 ranks that may
 * name the switch node 4. */
static cs_algorithm *combining(cs_coll_kind kind, int steps)
{
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? 1 : -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "star", 4, 1, steps, &a, &err), CS_OK);
    a->switch_nodes = 1;
    return a;
}

/* In-network reduction (SHARP, NVLS): members reduce into the node, which
 * combines what it receives and sends the sum on. */
START_TEST(verifier_checks_reductions_in_the_switch)
{
    cs_topology *t = star(4, true, 4, NULL);
    /* reduce to rank 1: 0, 2, 3 into the node, the node into 1 */
    cs_algorithm *a = combining(CS_COLL_REDUCE, 2);
    for (int r = 0; r < 4; r++)
        if (r != 1)
            ck_assert_int_eq(algorithm_add_send(a, 0, r, 4, 0, CS_OP_REDUCE), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 1, 1, CS_OP_REDUCE), CS_OK);
    assert_valid(t, a);
    /* rank 0's contribution a second time, directly */
    ck_assert_int_eq(algorithm_set_steps(a, 3, NULL), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 1, 2, CS_OP_REDUCE), CS_OK);
    assert_invalid(t, a, "reduce counts the contribution of rank 0 twice");
    algorithm_free(a);
    /* one contribution missing: the node's sum lacks rank 3 */
    a = combining(CS_COLL_REDUCE, 2);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 4, 0, CS_OP_REDUCE), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 2, 4, 0, CS_OP_REDUCE), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 4, 1, 1, CS_OP_REDUCE), CS_OK);
    assert_invalid(t, a, "lacks the contribution of rank 3");
    algorithm_free(a);
    /* allreduce in two sends' time: every rank into the node, the sum copied
     * back to every rank (NVLS's reduce + multicast) */
    a = combining(CS_COLL_ALLREDUCE, 2);
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(algorithm_add_send(a, 0, r, 4, 0, CS_OP_REDUCE), CS_OK);
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(algorithm_add_send(a, 0, 4, r, 1, CS_OP_COPY), CS_OK);
    assert_valid(t, a);
    cs_sim_result sr;
    cs_error err;
    ck_assert_int_eq(simulate_algorithm(t, a, 1000, &sr, &err), CS_OK);
    ck_assert_double_eq_tol(sr.time_us, 2.0, 1e-9);
    sim_result_free(&sr);
    algorithm_free(a);
    /* inversion turns a broadcast through the node into a reduce through it */
    cs_algorithm *b = bcast_through_switch(4, false), *inv = NULL;
    ck_assert_int_eq(algorithm_invert(b, &inv, &err), CS_OK);
    ck_assert_int_eq(inv->switch_nodes, 1);
    ck_assert_int_eq(inv->collective.kind, CS_COLL_REDUCE);
    cs_topology *rev = NULL;
    ck_assert_int_eq(topology_reverse(t, &rev, &err), CS_OK);
    ck_assert(rev->switches[0].copy);
    assert_valid(rev, inv);
    topology_free(rev);
    algorithm_free(inv);
    algorithm_free(b);
    topology_free(t);
}
END_TEST

/* Cross-group traffic through a node: the copies into the other group
 * cross it (2 of 3 here), the upload and the copy within the group do not. */
START_TEST(cross_group_bytes_through_a_node)
{
    cs_topology *t = star(4, true, 4, "\"groups\":[[0,1],[2,3]],");
    cs_algorithm *a = bcast_through_switch(4, true);
    cs_sim_result sr;
    cs_error err;
    ck_assert_int_eq(simulate_algorithm(t, a, 1000, &sr, &err), CS_OK);
    ck_assert_double_eq_tol(sr.cross_group_bytes, 2000.0, 1e-9);
    ck_assert_double_eq_tol(sr.total_bytes, 4000.0, 1e-9);
    sim_result_free(&sr);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* Algorithms of ranks only verify and time the same with and without copy. */
START_TEST(old_schedules_unchanged_on_copy_switches)
{
    cs_topology *t = star(8, true, 8, NULL), *plain = star(8, false, 8, NULL);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_mcf_options o;
    mcf_options_default(&o);
    o.bytes = 1000;
    cs_result *r = NULL;
    cs_error err;
    ck_assert_int_eq(mcf_synthesize(plain, &c, &o, &r, &err), CS_OK);
    const cs_algorithm *a = r->algs[0];
    ck_assert_int_eq(a->switch_nodes, 0);
    assert_valid(t, a);
    cs_sim_result s1, s2;
    ck_assert_int_eq(simulate_algorithm(plain, a, 1000, &s1, &err), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, a, 1000, &s2, &err), CS_OK);
    ck_assert_double_eq(s1.time_us, s2.time_us);
    ck_assert_int_eq(s1.nlinks, s2.nlinks);
    sim_result_free(&s1);
    sim_result_free(&s2);
    result_free(r);
    topology_free(t);
    topology_free(plain);
}
END_TEST

static double mcf_time_chunks(const cs_topology *t, cs_coll_kind kind, int chunks,
                              cs_result **keep)
{
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? 0 : -1);
    cs_mcf_options o;
    mcf_options_default(&o);
    o.chunks = chunks;
    o.min_chunks = chunks;
    o.bytes = 1000.0 * chunks;   /* 1000-byte chunks: 1 us per port send */
    cs_result *r = NULL;
    cs_error err;
    int rc = mcf_synthesize(t, &c, &o, &r, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", t->name, err.message);
    const cs_algorithm *a = r->algs[0];
    assert_valid(t, a);
    cs_sim_result sr;
    ck_assert_int_eq(simulate_algorithm(t, a, o.bytes, &sr, &err), CS_OK);
    double time = sr.time_us;
    sim_result_free(&sr);
    if (keep)
        *keep = r;
    else
        result_free(r);
    return time;
}

static double mcf_time(const cs_topology *t, cs_coll_kind kind, cs_result **keep)
{
    return mcf_time_chunks(t, kind, 1, keep);
}

/* Broadcast on 8 ranks of one switch.  Without copy every holder sends at
 * most one chunk per us through its port, so the holders at most double
 * each us: 8 ranks need >= log2(8) = 3 us.  With copy, up (1 us) and seven
 * copies down (1 us) take 2 us, and no schedule is faster (a rank other
 * than the root gets the chunk through its port, >= 1 us, and only the root
 * is done at 1 us).  Allgather: every rank receives 7 chunks through its
 * one ingress port, >= 7 us either way; copy must not make it worse. */
START_TEST(mcf_copies_in_the_switch_where_it_helps)
{
    cs_topology *t = star(8, true, 8, NULL), *plain = star(8, false, 8, NULL);
    cs_result *r = NULL;
    double with = mcf_time(t, CS_COLL_BROADCAST, &r), without = mcf_time(plain,
                                                                          CS_COLL_BROADCAST, NULL);
    ck_assert_double_eq_tol(with, 2.0, 1e-6);
    ck_assert_double_ge(without, 3.0 - 1e-6);
    ck_assert_int_eq(r->algs[0]->switch_nodes, 1);
    long copies = 0;
    for (long i = 0; i < r->algs[0]->nsends; i++)
        copies += algorithm_send_src(r->algs[0], i) == 8;
    ck_assert_int_eq(copies, 7);
    /* code generation refuses it, naming the switch and why */
    cs_msccl_options mo;
    msccl_options_default(&mo);
    char *xml = NULL;
    cs_error err;
    ck_assert_int_eq(msccl_xml_generate(r->algs[0], t, &mo, &xml, NULL, &err), CS_EUNSUPPORTED);
    ck_assert_ptr_null(xml);
    ck_assert_ptr_nonnull(strstr(err.message, "copy-capable switch sw (node 8)"));
    ck_assert_ptr_nonnull(strstr(err.message, "cannot express in-switch multicast"));
    result_free(r);

    /* 4 chunks: the root's port sends each chunk up once (4 us) and the
     * last one still has to come down (1 us): >= 5 us, and the pipeline
     * up/down meets it.  Without copy every holder sends one chunk per us
     * through its port and the holders at most double each us (1, 2, 4, 8),
     * so by 5 us at most 1 + 2 + 4 + 8 + 8 = 23 of the 7 x 4 = 28 receptions
     * can have happened: >= 6 us. */
    cs_result *r4 = NULL;
    double with4 = mcf_time_chunks(t, CS_COLL_BROADCAST, 4, &r4);
    /* proved optimal (the source-egress floor meets the greedy: no LP) */
    ck_assert(r4->complete);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r4->stats, "status")),
                                 "optimal"));
    result_free(r4);
    double without4 = mcf_time_chunks(plain, CS_COLL_BROADCAST, 4, NULL);
    ck_assert_double_eq_tol(with4, 5.0, 1e-6);
    ck_assert_double_ge(without4, 6.0 - 1e-6);

    double ag_with = mcf_time(t, CS_COLL_ALLGATHER, NULL);
    double ag_without = mcf_time(plain, CS_COLL_ALLGATHER, NULL);
    ck_assert_double_ge(ag_with, 7.0 - 1e-6);
    ck_assert_double_le(ag_with, ag_without + 1e-6);
    /* 2 chunks: 14 chunks through each ingress port, >= 14 us either way.
     * The copy form's greedy used to take node links in its plain-order
     * seeds too, ending later than the hyper-edge form (and then spending
     * the MILP's 30 s improve budget); its even seeds are now the hyper-edge
     * greedy, so the copy form is never worse. */
    double t0 = cs_now();
    double ag2_with = mcf_time_chunks(t, CS_COLL_ALLGATHER, 2, NULL);
    double ag2_without = mcf_time_chunks(plain, CS_COLL_ALLGATHER, 2, NULL);
    ck_assert_double_ge(ag2_with, 14.0 - 1e-6);
    ck_assert_double_le(ag2_with, ag2_without + 1e-6);
    ck_assert_double_lt(cs_now() - t0, 10.0);
    topology_free(t);
    topology_free(plain);
}
END_TEST


/* mcf reports what its schedules buffer in the switch nodes (the node is
 * store-and-forward): stats.switch_hold_us, the longest time from a chunk's
 * first arrival at a node to its last copy out of it, recomputed here from
 * the sends, and the peak chunks one node holds with their bytes.  The
 * 1-chunk broadcast on star8 (2 us: up in 0-1, every copy in 1-2) can only
 * meet its 2 us if nothing waits in the switch. */
static double max_hold(const cs_algorithm *a)
{
    double worst = 0;
    int P = a->ranks;
    for (long i = 0; i < a->nsends; i++) {
        if (algorithm_send_src(a, i) < P)
            continue;
        double first = INFINITY;
        for (long k = 0; k < a->nsends; k++)
            if (algorithm_send_dst(a, k) == algorithm_send_src(a, i) &&
                algorithm_send_chunk(a, k) == algorithm_send_chunk(a, i) &&
                algorithm_send_end_us(a, k) < first)
                first = algorithm_send_end_us(a, k);
        if (algorithm_send_start_us(a, i) - first > worst)
            worst = algorithm_send_start_us(a, i) - first;
    }
    return worst;
}

START_TEST(mcf_reports_what_the_switch_buffers)
{
    cs_topology *t = star(8, true, 8, NULL);
    cs_result *r = NULL;
    ck_assert_double_eq_tol(mcf_time(t, CS_COLL_BROADCAST, &r), 2.0, 1e-6);
    ck_assert_double_eq_tol(json_number_value(json_object_get(r->stats, "switch_hold_us")), 0,
                            1e-9);
    ck_assert_int_eq(json_integer_value(json_object_get(r->stats, "switch_buffer_chunks")), 0);
    result_free(r);
    /* allgather of 2 chunks (the greedy's schedule: a 2 s limit keeps the
     * MILP's improve budget out of the test): whatever it holds, the figures
     * are the sends' */
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_mcf_options o;
    mcf_options_default(&o);
    o.chunks = o.min_chunks = 2;
    o.bytes = 2000;
    o.time_limit_s = 2;
    cs_error err;
    int rc = mcf_synthesize(t, &c, &o, &r, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    const cs_algorithm *a = r->algs[0];
    assert_valid(t, a);
    double hold = json_number_value(json_object_get(r->stats, "switch_hold_us"));
    ck_assert_double_eq_tol(hold, max_hold(a), 1e-6);
    long chunks = json_integer_value(json_object_get(r->stats, "switch_buffer_chunks"));
    ck_assert_int_eq(chunks > 0, hold > 1e-6);
    ck_assert_double_eq_tol(json_number_value(json_object_get(r->stats, "switch_buffer_bytes")),
                            chunks * a->timed_chunk_bytes, 1e-6);
    result_free(r);
    topology_free(t);
}
END_TEST

/* Every send up to a switch node is copied on by the node afterwards (no
 * dead ends loading a port), and a schedule that uses no node says so
 * (switch_nodes 0) and has code.  switch2d:4x2 allgather: mcf's greedy
 * used to send chunks up that no node forwarded, which made the whole
 * schedule one that code generation refuses. */
START_TEST(mcf_leaves_no_dead_ends_in_the_switch)
{
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_builtin("switch2d:4x2,copy=1", &t, &err), CS_OK);
    cs_result *r = NULL;
    mcf_time(t, CS_COLL_ALLGATHER, &r);
    const cs_algorithm *a = r->algs[0];
    int P = a->ranks;
    bool via_node = false;
    for (long i = 0; i < a->nsends; i++) {
        int dst = algorithm_send_dst(a, i);
        via_node |= dst >= P || algorithm_send_src(a, i) >= P;
        if (dst < P)
            continue;
        bool forwarded = false;
        for (long k = 0; k < a->nsends; k++)
            forwarded |= algorithm_send_src(a, k) == dst &&
                         algorithm_send_chunk(a, k) == algorithm_send_chunk(a, i) &&
                         algorithm_send_start_us(a, k) >= algorithm_send_end_us(a, i) - 1e-6;
        ck_assert_msg(forwarded, "send %ld (chunk %ld, %d->%d) is never copied on", i,
                      algorithm_send_chunk(a, i), algorithm_send_src(a, i), dst);
    }
    ck_assert_int_eq(a->switch_nodes > 0, via_node);
    if (!via_node) {
        cs_msccl_options mo;
        msccl_options_default(&mo);
        char *xml = NULL;
        int rc = msccl_xml_generate(a, t, &mo, &xml, NULL, &err);
        ck_assert_msg(rc == CS_OK, "%s", err.message);
        free(xml);
    }
    result_free(r);
    topology_free(t);
}
END_TEST

/* algorithm_switch_hold (verify.h) on hand-made timed schedules: a copy that
 * leaves as its chunk arrives waits 0; one that leaves later waits the gap;
 * a copy before any arrival is refused. */
START_TEST(switch_hold_measures_what_a_node_waits)
{
    cs_topology *t = star(4, true, 4, NULL);
    cs_error err;
    cs_switch_hold h;
    cs_algorithm *a = bcast_through_switch(4, true);
    assert_valid(t, a);
    ck_assert_int_eq(algorithm_switch_hold(t, a, &h, &err), CS_OK);
    ck_assert_int_eq(h.copies, 3);
    ck_assert_int_eq(h.held_copies, 0);
    ck_assert_double_eq_tol(h.max_hold_us, 0, 1e-12);
    ck_assert_int_eq(h.peak_chunks, 0);
    algorithm_free(a);
    /* at the switch from 1 us, copied at 1 us and again at 5 us: two copies
     * waited 4 us, one chunk held */
    a = bcast(4, 2);
    a->timed_chunk_bytes = 1000;
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 0, CS_OP_COPY, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 1, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 2, 1, CS_OP_COPY, 5, 6), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 3, 1, CS_OP_COPY, 5, 6), CS_OK);
    assert_valid(t, a);
    ck_assert_int_eq(algorithm_switch_hold(t, a, &h, &err), CS_OK);
    ck_assert_int_eq(h.copies, 3);
    ck_assert_int_eq(h.held_copies, 2);
    ck_assert_double_eq_tol(h.max_hold_us, 4.0, 1e-9);
    ck_assert_int_eq(h.peak_chunks, 1);
    algorithm_free(a);
    /* a second upload at 5 us: the copies at 5 us leave as it arrives */
    a = bcast(4, 3);
    a->timed_chunk_bytes = 1000;
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 0, CS_OP_COPY, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 1, 1, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 1, CS_OP_COPY, 4, 5), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 2, 2, CS_OP_COPY, 5, 6), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 3, 2, CS_OP_COPY, 5, 6), CS_OK);
    assert_valid(t, a);
    ck_assert_int_eq(algorithm_switch_hold(t, a, &h, &err), CS_OK);
    ck_assert_int_eq(h.held_copies, 0);
    algorithm_free(a);
    /* a copy out of the node before the chunk reached it */
    a = bcast(4, 2);
    a->timed_chunk_bytes = 1000;
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 4, 0, CS_OP_COPY, 1, 2), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 4, 1, 1, CS_OP_COPY, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_switch_hold(t, a, &h, &err), CS_EVERIFY);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* options.zero_buffer: TE-CCL's switch without a buffer.  mcf's schedules
 * through the nodes are checked by the verifier's algorithm_switch_hold,
 * not by mcf's own figures: no copy waits at a node.  The instances take
 * each path that makes a schedule: the greedy (dgx2 broadcast, 8 chunks:
 * its pipeline meets the egress floor; 4 ranks below), and the MILP
 * (dgxa100:2 broadcast, 2 chunks). */
START_TEST(mcf_zero_buffer_switches_hold_nothing)
{
    struct {
        const char *topo;
        cs_coll_kind kind;
        int chunks;
        double bytes;
    } cases[] = {
        {"dgx2,copy=1", CS_COLL_BROADCAST, 8, 64.0 * 1024 * 1024},
        {"dgxa100:2,copy=1", CS_COLL_BROADCAST, 2, 64.0 * 1024 * 1024},
        {NULL, CS_COLL_CUSTOM, 1, 1000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cs_topology *t = NULL;
        cs_error err;
        cs_collective c;
        if (cases[i].topo) {
            ck_assert_int_eq(topology_builtin(cases[i].topo, &t, &err), CS_OK);
            collective_init(&c, cases[i].kind,
                            collective_kind_is_rooted(cases[i].kind) ? 0 : -1);
        } else {
            /* 4 ranks on a copy switch (1000 B/us, no alpha): chunk 0 at rank 0
             * for ranks 2 and 3; chunks 1, 2, 3 at rank 3 for rank 0, rank 1,
             * and ranks 0, 1, 2.  Rank 3's port sends each of its three
             * chunks at least once: >= 3 us, and 3 us is reached without
             * holding (the store-and-forward greedy holds chunk 0 in the
             * switch 1 us here; zero-buffer sends it 0 -> 2 directly). */
            t = star(4, true, 4, NULL);
            const char *doc = "{\"kind\":\"custom\",\"global_chunks\":4,"
                              "\"pre\":[[0,0],[1,3],[2,3],[3,3]],"
                              "\"post\":[[0,2],[0,3],[1,0],[2,1],[3,0],[3,1],[3,2]]}";
            json_error_t je;
            json_t *j = json_loads(doc, 0, &je);
            ck_assert_ptr_nonnull(j);
            ck_assert_int_eq(collective_from_json(j, &c, &err), CS_OK);
            json_decref(j);
            ck_assert_int_eq(collective_validate(&c, 4, &err), CS_OK);
        }
        cs_mcf_options o;
        mcf_options_default(&o);
        o.chunks = o.min_chunks = cases[i].chunks;
        o.bytes = cases[i].bytes;
        o.time_limit_s = 60;
        o.zero_buffer = 1;
        cs_result *r = NULL;
        int rc = mcf_synthesize(t, &c, &o, &r, &err);
        ck_assert_msg(rc == CS_OK, "%s: %s", t->name, err.message);
        const cs_algorithm *a = r->algs[0];
        assert_valid(t, a);
        cs_switch_hold h;
        ck_assert_int_eq(algorithm_switch_hold(t, a, &h, &err), CS_OK);
        ck_assert_msg(h.copies > 0, "%s: no copy through the switch", t->name);
        ck_assert_msg(h.held_copies == 0, "%s: %ld copies wait, up to %.4g us", t->name,
                      h.held_copies, h.max_hold_us);
        ck_assert(json_is_true(json_object_get(r->stats, "switch_zero_buffer")));
        cs_sim_result sr;
        ck_assert_int_eq(simulate_algorithm(t, a, o.bytes, &sr, &err), CS_OK);
        if (!cases[i].topo)
            ck_assert_double_eq_tol(sr.time_us, 3.0, 1e-6);
        sim_result_free(&sr);
        result_free(r);
        collective_free(&c);
        topology_free(t);
    }
}
END_TEST

/* The other methods ignore the flag: they use unicast through the switch,
 * which a copy-capable switch still allows, so they find the same schedule
 * on star8 with and without copy, and it verifies on both. */
START_TEST(other_methods_ignore_the_flag)
{
    static const char *methods[] = {"tacos", "smt", "ring", "auto"};
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        double times[2];
        for (int copy = 0; copy < 2; copy++) {
            char body[1024];
            snprintf(body, sizeof body,
                     "{\"topology\":{\"name\":\"s\",\"ranks\":8,\"switches\":[{\"name\":"
                     "\"sw\",\"ranks\":[0,1,2,3,4,5,6,7],\"gbps\":1,\"alpha_us\":0,"
                     "\"copy\":%s}]},\"collective\":\"allgather\",\"method\":\"%s\","
                     "\"options\":{\"time_limit_s\":60}}",
                     copy ? "true" : "false", methods[m]);
            cs_synth_request *req = NULL;
            cs_error err;
            int rc = synth_request_parse(body, strlen(body), NULL, &req, &err);
            ck_assert_msg(rc == CS_OK, "%s: %s", methods[m], err.message);
            cs_result *res = NULL;
            rc = synth_run(req, NULL, NULL, &res, &err);
            ck_assert_msg(rc == CS_OK, "%s copy=%d: %s", methods[m], copy, err.message);
            ck_assert_int_ge(res->nalgs, 1);
            const cs_algorithm *a = res->algs[res->nalgs - 1];
            ck_assert_int_eq(a->switch_nodes, 0);
            assert_valid(req->topology, a);
            cs_sim_result sr;
            ck_assert_int_eq(simulate_algorithm(req->topology, a, 8000, &sr, &err), CS_OK);
            times[copy] = sr.time_us;
            sim_result_free(&sr);
            result_free(res);
            synth_request_free(req);
        }
        ck_assert_msg(times[0] == times[1], "%s: %g us without copy, %g with", methods[m],
                      times[0], times[1]);
    }
}
END_TEST

/* auto: broadcast on copy-capable switches goes to mcf (the only method
 * that copies in the switch), and says so. */
START_TEST(auto_uses_mcf_for_broadcast_on_copy_switches)
{
    const char *body =
        "{\"topology\":{\"name\":\"s\",\"ranks\":8,\"switches\":[{\"name\":\"sw\","
        "\"ranks\":[0,1,2,3,4,5,6,7],\"gbps\":1,\"alpha_us\":0,\"copy\":true}]},"
        "\"collective\":{\"kind\":\"broadcast\",\"root\":0}}";
    cs_synth_request *req = NULL;
    cs_error err;
    ck_assert_int_eq(synth_request_parse(body, strlen(body), NULL, &req, &err), CS_OK);
    cs_result *res = NULL;
    int rc = synth_run(req, NULL, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_str_eq(res->method, "mcf");
    ck_assert_ptr_nonnull(strstr(res->reason, "copy-capable"));
    ck_assert_int_eq(res->algs[0]->switch_nodes, 1);
    assert_valid(req->topology, res->algs[0]);
    result_free(res);
    synth_request_free(req);
}
END_TEST

/* The smallest T with sum_{j<T} min(2^j, P) >= (P - 1) C: a broadcast of C
 * chunks on P ranks joined only by one switch, without copy, needs T send
 * times (each holder sends one chunk per send time through its port, so the
 * holders of a chunk at most double; worked out in switch_copy_bench.c). */
static int unicast_floor_sends(int P, int C)
{
    long need = (long)(P - 1) * C, done = 0;
    int T = 0;
    while (done < need) {
        done += T < 30 && (1L << T) < P ? (1L << T) : P;
        T++;
    }
    return T;
}

static cs_synth_request *parse_ok(const char *body)
{
    cs_synth_request *req = NULL;
    cs_error err;
    int rc = synth_request_parse(body, strlen(body), NULL, &req, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s (%s)", body, err.message, err.field);
    return req;
}

#define STAR8(copy)                                                                              \
    "{\"topology\":{\"name\":\"s\",\"ranks\":8,\"switches\":[{\"name\":\"sw\","                  \
    "\"ranks\":[0,1,2,3,4,5,6,7],\"gbps\":1,\"alpha_us\":0" copy "}]},"                          \
    "\"collective\":{\"kind\":\"broadcast\",\"root\":0}"

/* A request that will be lowered to code (options.codegen) gets a schedule
 * without copies in the switch, from auto and from mcf, that verifies on
 * the copy-capable topology as written and generates MSCCL XML; the reason
 * says why.  Without the option the multicast form stays. */
START_TEST(codegen_requests_get_unicast_through_copy_switches)
{
    cs_error err;
    cs_synth_request *req = parse_ok(STAR8(",\"copy\":true") ",\"options\":{\"codegen\":"
                                     "\"msccl-xml\",\"tacos\":{\"bytes\":1000}}}");
    ck_assert_ptr_nonnull(req->instance);
    ck_assert_int_eq(synth_request_instance(req)->nswitch_nodes, 0);
    ck_assert_int_eq(req->topology->nswitch_nodes, 1);
    cs_result *res = NULL;
    int rc = synth_run(req, NULL, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_str_eq(res->method, "mcf");
    ck_assert_msg(strstr(res->reason, "options.codegen") && strstr(res->reason, "unicast"),
                  "%s", res->reason);
    const cs_algorithm *a = res->algs[0];
    ck_assert_int_eq(a->switch_nodes, 0);
    for (long i = 0; i < a->nsends; i++) {
        ck_assert_int_lt(algorithm_send_src(a, i), 8);
        ck_assert_int_lt(algorithm_send_dst(a, i), 8);
    }
    assert_valid(req->topology, a);
    /* unicast: no faster than the unicast floor of its chunking (1000 bytes
     * in C chunks: a send takes 1/C us) */
    cs_sim_result sr;
    ck_assert_int_eq(simulate_algorithm(req->topology, a, 1000, &sr, &err), CS_OK);
    ck_assert_double_ge(sr.time_us, unicast_floor_sends(8, a->chunks) / (double)a->chunks - 1e-6);
    sim_result_free(&sr);
    cs_msccl_options mo;
    msccl_options_default(&mo);
    char *xml = NULL;
    rc = msccl_xml_generate(a, req->topology, &mo, &xml, NULL, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(xml, "<algo"));
    free(xml);
    result_free(res);

    /* the key: a different request from the one without codegen, the same
     * for cuda, and the one synth_request_key_with_codegen names */
    cs_synth_request *plain = parse_ok(STAR8(",\"copy\":true")
                                       ",\"options\":{\"tacos\":{\"bytes\":1000}}}");
    cs_synth_request *cuda = parse_ok(STAR8(",\"copy\":true") ",\"options\":{\"codegen\":"
                                      "\"cuda\",\"tacos\":{\"bytes\":1000}}}");
    ck_assert_str_ne(plain->key, req->key);
    ck_assert_str_eq(cuda->key, req->key);
    char *text = synth_request_canonical_text(plain);
    char key2[65];
    ck_assert_int_eq(synth_request_key_with_codegen(text, strlen(text), NULL, key2, &err), CS_OK);
    free(text);
    ck_assert_str_eq(key2, req->key);
    /* the canonical request parses to itself */
    text = synth_request_canonical_text(req);
    cs_synth_request *again = parse_ok(text);
    free(text);
    ck_assert_str_eq(again->key, req->key);
    ck_assert_ptr_nonnull(again->instance);
    synth_request_free(again);

    /* without codegen: the switch copies (the multicast form stays) */
    rc = synth_run(plain, NULL, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_int_eq(res->algs[0]->switch_nodes, 1);
    ck_assert_ptr_null(strstr(res->reason, "options.codegen"));
    result_free(res);
    synth_request_free(plain);
    synth_request_free(cuda);
    synth_request_free(req);

    /* method mcf with codegen: the same instance */
    req = parse_ok(STAR8(",\"copy\":true") ",\"method\":\"mcf\",\"options\":{\"codegen\":"
                   "\"msccl-xml\",\"chunks\":2,\"bytes\":1000}}");
    rc = synth_run(req, NULL, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_int_eq(res->algs[0]->switch_nodes, 0);
    ck_assert_ptr_nonnull(strstr(res->reason, "options.codegen"));
    assert_valid(req->topology, res->algs[0]);
    result_free(res);
    synth_request_free(req);
}
END_TEST

/* Where codegen cannot change the answer (no copy-capable switch, or a
 * method that never copies) it is not part of the key; bad values are
 * refused naming the field. */
START_TEST(codegen_option_keys_and_errors)
{
    cs_synth_request *a = parse_ok(STAR8("") "}");
    cs_synth_request *b = parse_ok(STAR8("") ",\"options\":{\"codegen\":\"msccl-xml\"}}");
    ck_assert_str_eq(a->key, b->key);
    ck_assert_ptr_null(b->instance);
    char *text = synth_request_canonical_text(a);
    char key2[65];
    cs_error err;
    ck_assert_int_eq(synth_request_key_with_codegen(text, strlen(text), NULL, key2, &err), CS_OK);
    free(text);
    ck_assert_str_eq(key2, a->key);
    synth_request_free(a);
    synth_request_free(b);
    a = parse_ok(STAR8(",\"copy\":true") ",\"method\":\"tacos\"}");
    b = parse_ok(STAR8(",\"copy\":true") ",\"method\":\"tacos\",\"options\":{\"codegen\":"
                 "\"cuda\"}}");
    ck_assert_str_eq(a->key, b->key);
    synth_request_free(a);
    synth_request_free(b);
    a = parse_ok(STAR8(",\"copy\":true") ",\"options\":{\"codegen\":\"none\"}}");
    b = parse_ok(STAR8(",\"copy\":true") "}");
    ck_assert_str_eq(a->key, b->key);
    synth_request_free(a);
    synth_request_free(b);
    const char *bad[] = {STAR8("") ",\"options\":{\"codegen\":\"xml\"}}",
                         STAR8("") ",\"options\":{\"codegen\":true}}"};
    for (int i = 0; i < 2; i++) {
        cs_synth_request *r = NULL;
        ck_assert_int_eq(synth_request_parse(bad[i], strlen(bad[i]), NULL, &r, &err), CS_EINVAL);
        ck_assert_str_eq(err.field, "options.codegen");
        ck_assert_ptr_nonnull(strstr(err.message, "msccl-xml"));
    }
}
END_TEST

/* The CLI: `solve --format msccl-xml` implies --codegen, so a broadcast on a
 * copy-capable switch prints code (it printed the refusal before), and
 * `--codegen` alone gives the unicast result document. */
/* The CLI end to end: `solve --zero-buffer` on the 4-rank demand, then
 * `verify --json` reports the switch nodes' waiting (verify.h
 * algorithm_switch_hold): none with --zero-buffer. */
START_TEST(cli_zero_buffer_and_verify_report_switch_waits)
{
    char topo[] = "/tmp/collsynth-zb-topo-XXXXXX", coll[] = "/tmp/collsynth-zb-coll-XXXXXX",
         res[] = "/tmp/collsynth-zb-res-XXXXXX";
    const char *docs[2] = {"{\"name\":\"star4c\",\"ranks\":4,\"switches\":[{\"name\":\"sw\","
                           "\"ranks\":[0,1,2,3],\"gbps\":1,\"alpha_us\":0,\"copy\":true}]}",
                           "{\"kind\":\"custom\",\"global_chunks\":4,"
                           "\"pre\":[[0,0],[1,3],[2,3],[3,3]],"
                           "\"post\":[[0,2],[0,3],[1,0],[2,1],[3,0],[3,1],[3,2]]}"};
    char *paths[3] = {topo, coll, res};
    for (int i = 0; i < 3; i++) {
        int fd = mkstemp(paths[i]);
        ck_assert_int_ge(fd, 0);
        if (i < 2)
            ck_assert_int_eq(write(fd, docs[i], strlen(docs[i])), (long)strlen(docs[i]));
        close(fd);
    }
    char cmd[768], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s/collsynth solve %s %s --method mcf --size 1000 --zero-buffer "
             "-o %s", cs_test_build_dir(), topo, coll, res);
    int code = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(code == 0, "exit %d: %s", code, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/collsynth verify %s %s --json", cs_test_build_dir(), topo, res);
    code = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(code == 0, "exit %d: %s", code, err);
    json_t *doc = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    json_t *hold = json_object_get(json_array_get(json_object_get(doc, "algorithms"), 0),
                                   "switch_hold");
    ck_assert_ptr_nonnull(hold);
    ck_assert_int_gt(json_integer_value(json_object_get(hold, "copies")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(hold, "held_copies")), 0);
    json_decref(doc);
    free(out);
    free(err);
    for (int i = 0; i < 3; i++)
        unlink(paths[i]);
}
END_TEST

START_TEST(cli_solve_format_gives_code_on_copy_switches)
{
    char path[] = "/tmp/collsynth-star4c-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *doc = "{\"name\":\"star4c\",\"ranks\":4,\"switches\":[{\"name\":\"sw\","
                      "\"ranks\":[0,1,2,3],\"gbps\":1,\"alpha_us\":0,\"copy\":true}]}";
    ck_assert_int_eq(write(fd, doc, strlen(doc)), (long)strlen(doc));
    close(fd);
    char cmd[512], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s/collsynth solve %s broadcast --size 1000 --format msccl-xml",
             cs_test_build_dir(), path);
    int code = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(code == 0, "exit %d: %s", code, err);
    ck_assert_ptr_nonnull(strstr(out, "<algo"));
    ck_assert_ptr_nonnull(strstr(out, "ngpus=\"4\""));
    ck_assert_ptr_nonnull(strstr(err, "options.codegen"));
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/collsynth solve %s broadcast --size 1000 --codegen msccl-xml "
             "--json", cs_test_build_dir(), path);
    code = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(code == 0, "exit %d: %s", code, err);
    json_t *res = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(res);
    json_t *alg = json_array_get(json_object_get(res, "frontier"), 0);
    ck_assert_ptr_nonnull(alg);
    ck_assert_ptr_null(json_object_get(alg, "switch_nodes"));
    json_decref(res);
    free(out);
    free(err);
    unlink(path);
}
END_TEST

/* Through the daemon: the schedule is stored and served as JSON (its
 * switch-node sends intact), code generation is refused with the reason,
 * and the daemon keeps answering. */
START_TEST(daemon_serves_and_refuses_codegen_cleanly)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    const char *body =
        "{\"topology\":{\"name\":\"star4c\",\"ranks\":4,\"switches\":[{\"name\":\"sw\","
        "\"ranks\":[0,1,2,3],\"gbps\":1,\"alpha_us\":0,\"copy\":true}]},"
        "\"collective\":{\"kind\":\"broadcast\",\"root\":0},\"method\":\"mcf\","
        "\"options\":{\"wait_s\":30,\"bytes\":1000}}";
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&d, body, &doc), 200);
    json_t *alg = json_array_get(json_object_get(doc, "frontier"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(alg, "switch_nodes")), 1);
    char key[80], path[160];
    snprintf(key, sizeof key, "%s", json_str(doc, "key"));
    json_decref(doc);
    /* stored form: read back from the store */
    snprintf(path, sizeof path, "/v1/results/%s", key);
    long status = 0;
    doc = get_json(&d, path, &status);
    ck_assert_int_eq(status, 200);
    alg = json_array_get(json_object_get(doc, "frontier"), 0);
    json_t *sends = json_object_get(alg, "sends");
    int up = 0, down = 0;
    for (size_t i = 0; i < json_array_size(sends); i++) {
        json_t *x = json_array_get(sends, i);
        up += json_integer_value(json_object_get(x, "dst")) == 4;
        down += json_integer_value(json_object_get(x, "src")) == 4;
    }
    ck_assert_int_eq(up, 1);
    ck_assert_int_eq(down, 3);
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml", key);
    doc = get_json(&d, path, &status);
    ck_assert_int_ge(status, 400);
    ck_assert_int_lt(status, 500);
    const char *msg = json_str(json_object_get(doc, "error"), "message");
    ck_assert_ptr_nonnull(strstr(msg, "copy-capable switch sw (node 4)"));
    ck_assert_ptr_nonnull(strstr(msg, "in-switch multicast"));
    /* it names the request that has code, and that request's key */
    ck_assert_ptr_nonnull(strstr(msg, "\"codegen\": \"msccl-xml\""));
    const char *k2 = strstr(msg, "has key ");
    ck_assert_ptr_nonnull(k2);
    char key2[65];
    snprintf(key2, sizeof key2, "%.64s", k2 + 8);
    json_decref(doc);
    /* ... which is what POSTing it gives, and that result has code */
    const char *body2 =
        "{\"topology\":{\"name\":\"star4c\",\"ranks\":4,\"switches\":[{\"name\":\"sw\","
        "\"ranks\":[0,1,2,3],\"gbps\":1,\"alpha_us\":0,\"copy\":true}]},"
        "\"collective\":{\"kind\":\"broadcast\",\"root\":0},\"method\":\"mcf\","
        "\"options\":{\"wait_s\":30,\"bytes\":1000,\"codegen\":\"msccl-xml\"}}";
    ck_assert_int_eq(post_synthesize(&d, body2, &doc), 200);
    ck_assert_str_eq(json_str(doc, "key"), key2);
    alg = json_array_get(json_object_get(doc, "frontier"), 0);
    ck_assert_ptr_null(json_object_get(alg, "switch_nodes"));
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml", key2);
    http_resp hr;
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &hr), 0);
    ck_assert_int_eq(hr.status, 200);
    ck_assert_ptr_nonnull(strstr(hr.body, "<algo"));
    http_resp_free(&hr);
    doc = get_json(&d, "/v1/health", &status);
    ck_assert_int_eq(status, 200);
    json_decref(doc);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

static Suite *switch_copy_suite(void)
{
    Suite *s = suite_create("switch_copy");
    TCase *tc = tcase_create("switch_copy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, copy_flag_is_optional_and_numbers_the_nodes);
    tcase_add_test(tc, verifier_accepts_copies_through_the_switch);
    tcase_add_test(tc, verifier_rejects_a_chunk_leaving_before_it_arrived);
    tcase_add_test(tc, verifier_accepts_a_switch_holding_a_chunk);
    tcase_add_test(tc, verifier_rejects_ports_over_capacity);
    tcase_add_test(tc, verifier_rejects_what_a_switch_node_cannot_do);
    tcase_add_test(tc, verifier_checks_reductions_in_the_switch);
    tcase_add_test(tc, cross_group_bytes_through_a_node);
    tcase_add_test(tc, old_schedules_unchanged_on_copy_switches);
    tcase_add_test(tc, mcf_copies_in_the_switch_where_it_helps);
    tcase_add_test(tc, mcf_leaves_no_dead_ends_in_the_switch);
    tcase_add_test(tc, mcf_reports_what_the_switch_buffers);
    tcase_add_test(tc, switch_hold_measures_what_a_node_waits);
    tcase_add_test(tc, mcf_zero_buffer_switches_hold_nothing);
    tcase_add_test(tc, other_methods_ignore_the_flag);
    tcase_add_test(tc, auto_uses_mcf_for_broadcast_on_copy_switches);
    tcase_add_test(tc, codegen_requests_get_unicast_through_copy_switches);
    tcase_add_test(tc, codegen_option_keys_and_errors);
    tcase_add_test(tc, cli_solve_format_gives_code_on_copy_switches);
    tcase_add_test(tc, cli_zero_buffer_and_verify_report_switch_waits);
    tcase_add_test(tc, daemon_serves_and_refuses_codegen_cleanly);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(switch_copy_suite)
