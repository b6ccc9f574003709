/*
 * Tests of method hierarchical (hier.h) and its dispatch: composed
 * allgather, reducescatter and allreduce on small clusters pass the verifier
 * and never beat the cut bound; pipelining keeps the composed allgather near
 * the bound; auto picks hierarchical for clusters too large for SMT and says
 * so; what hierarchical cannot compose is refused with a message naming it,
 * and auto then runs a flat method.
 */
#include <math.h>
#include <string.h>

#include "baseline.h"
#include "bounds.h"
#include "check_main.h"
#include "cluster_testutil.h"
#include "hier.h"
#include "msccl_check.h"
#include "msccl_xml.h"
#include "simulate.h"
#include "synthesize.h"
#include "tacos.h"
#include "verify.h"
#include "iso.h"
#include "topology_testutil.h"


/* 3 nodes of 4 ranks on a ring of 100 GB/s links, NICs on local ranks 0 and 2
 * joined by one fabric switch at 10 GB/s: a custom grouped topology. */
static const char *ring_cluster =
    "{\"name\":\"rings\",\"ranks\":12,\"links\":["
    "{\"src\":0,\"dst\":1,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":1,\"dst\":2,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":2,\"dst\":3,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":3,\"dst\":0,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":4,\"dst\":5,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":5,\"dst\":6,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":6,\"dst\":7,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":7,\"dst\":4,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":8,\"dst\":9,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":9,\"dst\":10,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":10,\"dst\":11,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
    "{\"src\":11,\"dst\":8,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true}],"
    "\"switches\":[{\"name\":\"fabric\",\"ranks\":[0,2,4,6,8,10],\"gbps\":10,\"alpha_us\":2}],"
    "\"groups\":[[0,1,2,3],[4,5,6,7],[8,9,10,11]]}";

static cs_topology *load_text(const char *doc)
{
    cs_topology *t = NULL;
    cs_error err;
    int rc = topology_parse(doc, strlen(doc), NULL, &t, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    return t;
}

/* Synthesizes kind on t, checks every algorithm independently: verifier,
 * the bound at two sizes, method and reason. */
static void check_composed_root(const cs_topology *t, cs_coll_kind kind, int root)
{
    cs_collective c;
    collective_init(&c, kind, root);
    cs_result *res = NULL;
    cs_error err;
    int rc = hier_synthesize(t, &c, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s %s: %s", t->name, collective_kind_name(kind), err.message);
    ck_assert_str_eq(res->method, "hierarchical");
    ck_assert_int_ge(res->nalgs, 1);
    ck_assert_msg(strstr(res->reason, "nodes") && strstr(res->reason, "NIC"),
                  "reason says what was composed: %s", res->reason);
    cs_time_bound tb;
    ck_assert_int_eq(collective_time_bound(t, &c, &tb, &err), CS_OK);
    for (int i = 0; i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        ck_assert_int_eq(a->collective.kind, kind);
        ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s %s alg %d: %s", t->name,
                      collective_kind_name(kind), i, err.message);
        double sizes[] = {1 << 20, 1 << 30};
        for (int k = 0; k < 2; k++) {
            cs_bound_ratio br;
            ck_assert_int_eq(synth_ratio_to_bound(t, &tb, a, sizes[k], &br, &err), CS_OK);
            ck_assert_msg(br.ratio <= 1.0 + 1e-9 && br.ratio > 0,
                          "%s %s: ratio %g at %g bytes", t->name, collective_kind_name(kind),
                          br.ratio, sizes[k]);
        }
    }
    result_free(res);
}

static void check_composed(const cs_topology *t, cs_coll_kind kind)
{
    check_composed_root(t, kind, -1);
}

/* Broadcast and reduce from a root that is not a NIC (ndv2: NICs are local
 * 0 and 1; the ring cluster: 0 and 2) and from a NIC. */
START_TEST(test_rooted)
{
    const char *specs[] = {"dgxh100:4", "ndv2:3"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        cs_topology *t = test_topology(specs[i]);
        check_composed_root(t, CS_COLL_BROADCAST, 13);
        check_composed_root(t, CS_COLL_REDUCE, 13);
        check_composed_root(t, CS_COLL_BROADCAST, 0);
        topology_free(t);
    }
    cs_topology *t = load_text(ring_cluster);
    check_composed_root(t, CS_COLL_BROADCAST, 7);
    check_composed_root(t, CS_COLL_REDUCE, 5);
    topology_free(t);
}
END_TEST

START_TEST(test_builtin_clusters)
{
    const char *specs[] = {"dgxh100:2", "dgxh100:4", "dgxa100:3", "ndv2:2"};
    cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_ALLREDUCE,
                            CS_COLL_ALLTOALL};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        cs_topology *t = test_topology(specs[i]);
        for (int k = 0; k < 4; k++)
            check_composed(t, kinds[k]);
        topology_free(t);
    }
}
END_TEST

START_TEST(test_json_clusters)
{
    /* the H100-like cluster written as Topology JSON (switch per node, rails) */
    char *doc = cluster_topology_json(5, 4, 450.0, 50.0);
    cs_topology *t = load_text(doc);
    free(doc);
    check_composed(t, CS_COLL_ALLGATHER);
    check_composed(t, CS_COLL_ALLREDUCE);
    topology_free(t);
    /* rings inside, two NICs per node on one fabric switch */
    t = load_text(ring_cluster);
    check_composed(t, CS_COLL_ALLGATHER);
    check_composed(t, CS_COLL_REDUCESCATTER);
    check_composed(t, CS_COLL_ALLREDUCE);
    check_composed(t, CS_COLL_ALLTOALL);
    topology_free(t);
}
END_TEST

/* Phases pipeline: on 16 H100 nodes the rails carry 15 blocks per NIC in 16
 * slots and the NVSwitch forwarding takes ~80% of a slot, so phases run one
 * after the other would reach about half of the bound; overlapped, chunk by
 * chunk, the allgather stays within 25% of it. */
START_TEST(test_pipelined)
{
    cs_topology *t = test_topology("dgxh100:16");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(hier_synthesize(t, &c, NULL, &res, &err), CS_OK);
    cs_time_bound tb;
    ck_assert_int_eq(collective_time_bound(t, &c, &tb, &err), CS_OK);
    double best = 0;
    for (int i = 0; i < res->nalgs; i++) {
        cs_bound_ratio br;
        ck_assert_int_eq(synth_ratio_to_bound(t, &tb, res->algs[i], 1 << 30, &br, &err), CS_OK);
        if (br.ratio > best)
            best = br.ratio;
    }
    ck_assert_msg(best >= 0.75, "ratio_to_bound %.3f at 1 GiB", best);
    result_free(res);
    topology_free(t);
}
END_TEST

/* Allreduce on 32 nodes: the frontier holds a composition with one chunk per
 * node (every rail message a whole chunk), with 8x fewer sends than the
 * chunk-per-rank one, and it is the faster at 1 MiB (latency paid per node
 * pair, not per rank pair). */
START_TEST(test_node_chunk_allreduce)
{
    cs_topology *t = test_topology("dgxh100:32");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(hier_synthesize(t, &c, NULL, &res, &err), CS_OK);
    const cs_algorithm *node = NULL, *rank = NULL;
    for (int i = 0; i < res->nalgs; i++) {
        if (res->algs[i]->chunks == 32)
            node = res->algs[i];
        if (res->algs[i]->chunks == t->ranks)
            rank = res->algs[i];
    }
    ck_assert_msg(node && rank, "frontier of %d lacks a composition", res->nalgs);
    ck_assert_int_lt(node->nsends * 4, rank->nsends);
    cs_sim_result a, b;
    ck_assert_int_eq(simulate_algorithm(t, node, 1 << 20, &a, &err), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, rank, 1 << 20, &b, &err), CS_OK);
    ck_assert_msg(a.time_us < b.time_us, "node chunks %.1f us, rank chunks %.1f us", a.time_us,
                  b.time_us);
    sim_result_free(&a);
    sim_result_free(&b);
    result_free(res);
    topology_free(t);
}
END_TEST

/* The NIC-tree forwards of a block are one runtime step per peer: lowered to
 * MSCCL XML, a 32-node allgather fits both runtimes' limits (64 steps per
 * thread block) with merged steps; unmerged, each rank would forward 31
 * blocks of 8 chunks to each peer and receive as many from it. */
START_TEST(test_msccl_fits)
{
    cs_topology *t = test_topology("dgxh100:32");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(hier_synthesize(t, &c, NULL, &res, &err), CS_OK);
    cs_msccl_options o;
    msccl_options_default(&o);
    char *xml = NULL;
    size_t len = 0;
    int rc = msccl_xml_generate(res->algs[0], t, &o, &xml, &len, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    cs_msccl_check_stats st;
    rc = msccl_check_limits(xml, len, CS_MSCCL_RUNTIME_AUTO, &st, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_int_gt(st.merged_steps, 0);
    ck_assert_int_lt(st.max_steps, 64);
    free(xml);
    result_free(res);
    topology_free(t);
}
END_TEST

/* Where SMT finds nothing within its budget, shortest-path trees stand in,
 * the result still verifies, and the reason says so. */
START_TEST(test_smt_fallback)
{
    cs_topology *t = test_topology("ndv2:3");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_hier_options o;
    hier_options_default(&o);
    o.smt_time_limit_s = 1e-6;
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(hier_synthesize(t, &c, &o, &res, &err), CS_OK);
    ck_assert_msg(strstr(res->reason, "shortest-path trees"), "%s", res->reason);
    ck_assert_int_eq(algorithm_verify(t, res->algs[0], &err), CS_OK);
    result_free(res);
    topology_free(t);
}
END_TEST

/* Groups listed in another order and ranks numbered across nodes (node g
 * holds ranks g, g+3, g+6, g+9): the same structure under the groups' own
 * order, composed and verified. */
START_TEST(test_interleaved_ranks)
{
    json_t *links = json_array(), *sw = json_array(), *groups = json_array();
    for (int g = 0; g < 3; g++) {
        json_t *ranks = json_array();
        for (int i = 0; i < 4; i++)
            json_array_append_new(ranks, json_integer(g + 3 * i));
        for (int i = 0; i < 4; i++)
            json_array_append_new(links, json_pack("{s:i, s:i, s:i, s:f, s:f, s:b}", "src",
                                                   g + 3 * i, "dst", g + 3 * ((i + 1) % 4),
                                                   "lanes", 1, "gbps", 100.0, "alpha_us", 0.5,
                                                   "bidirectional", 1));
        json_array_insert_new(groups, 0, ranks);   /* groups in reverse order */
    }
    json_array_append_new(sw, json_pack("{s:s, s:[i,i,i,i,i,i], s:f, s:f}", "name", "fabric",
                                        "ranks", 0, 1, 2, 6, 7, 8, "gbps", 10.0, "alpha_us",
                                        2.0));
    json_t *doc = json_pack("{s:s, s:i, s:o, s:o, s:o}", "name", "interleaved", "ranks", 12,
                            "links", links, "switches", sw, "groups", groups);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    cs_topology *t = load_text(text);
    free(text);
    check_composed(t, CS_COLL_ALLGATHER);
    check_composed(t, CS_COLL_ALLREDUCE);
    topology_free(t);
}
END_TEST

/* Two node types (a 4-ring and a 4-line) in one cluster: refused, naming it. */
START_TEST(test_mixed_types_refused)
{
    const char *doc =
        "{\"name\":\"mixed\",\"ranks\":8,\"links\":["
        "{\"src\":0,\"dst\":1,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":1,\"dst\":2,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":2,\"dst\":3,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":3,\"dst\":0,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":4,\"dst\":5,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":5,\"dst\":6,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":6,\"dst\":7,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true}],"
        "\"switches\":[{\"name\":\"fabric\",\"ranks\":[0,4],\"gbps\":10,\"alpha_us\":2}],"
        "\"groups\":[[0,1,2,3],[4,5,6,7]]}";
    cs_topology *t = load_text(doc);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_error err;
    ck_assert_int_eq(hier_applicable(t, &c, &err), CS_EUNSUPPORTED);
    ck_assert_msg(strstr(err.message, "one node type"), "%s", err.message);
    /* not isomorphic either: the canonical order was tried and says so */
    ck_assert_msg(strstr(err.message, "up to renumbering"), "%s", err.message);
    topology_free(t);
}
END_TEST

static cs_result *run_request(const char *body, cs_synth_request **req_out);
static char *shuffled_in_nodes(const char *doc, unsigned seed);
static char *shuffled_nodes(const char *doc, unsigned seed, bool nodes_too);
static bool nodes_alike_as_listed(const cs_topology *t);
static double best_buffer_us(const cs_topology *t, const cs_result *res, double bytes);

/* The Slurm hook's ring fabric (NIC i of node k to NIC i of node k+1, both
 * ways): composed around the ring when asked; alltoall refused; auto keeps
 * the flat methods there. */
START_TEST(test_ring_fabric)
{
    json_t *links = json_array(), *groups = json_array();
    int N = 5;
    for (int n = 0; n < N; n++) {
        json_t *g = json_array();
        for (int i = 0; i < 4; i++) {
            json_array_append_new(g, json_integer(4 * n + i));
            json_array_append_new(links, json_pack("{s:i, s:i, s:i, s:f, s:f, s:b}", "src",
                                                   4 * n + i, "dst", 4 * n + (i + 1) % 4,
                                                   "lanes", 1, "gbps", 100.0, "alpha_us", 0.5,
                                                   "bidirectional", 1));
        }
        json_array_append_new(groups, g);
        for (int i = 0; i < 4; i += 2)
            json_array_append_new(links, json_pack("{s:i, s:i, s:i, s:f, s:f, s:b}", "src",
                                                   4 * n + i, "dst", 4 * ((n + 1) % N) + i,
                                                   "lanes", 1, "gbps", 10.0, "alpha_us", 2.0,
                                                   "bidirectional", 1));
    }
    json_t *doc = json_pack("{s:s, s:i, s:o, s:o}", "name", "ringfab", "ranks", 4 * N, "links",
                            links, "groups", groups);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    cs_topology *t = load_text(text);
    check_composed(t, CS_COLL_ALLGATHER);
    check_composed(t, CS_COLL_REDUCESCATTER);
    check_composed(t, CS_COLL_ALLREDUCE);
    check_composed_root(t, CS_COLL_BROADCAST, 5);
    check_composed_root(t, CS_COLL_REDUCE, 5);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(hier_synthesize(t, &c, NULL, &res, &err), CS_EUNSUPPORTED);
    ck_assert_msg(strstr(err.message, "switched"), "%s", err.message);
    ck_assert_int_eq(hier_auto_applicable(t, &c, &err), CS_EUNSUPPORTED);
    ck_assert_msg(strstr(err.message, "switched"), "%s", err.message);
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    ck_assert_int_eq(hier_applicable(t, &c, &err), CS_OK);
    ck_assert_int_eq(hier_auto_applicable(t, &c, &err), CS_OK);
    topology_free(t);
    /* numbered differently inside each node, and nodes listed out of ring
     * order: the canonical order does not line up nodes on a ring of
     * links (no fabric switch they attach to alike), the walk around the
     * ring does; composed like the original, in the same simulated time */
    double first_us[5] = {0};
    for (int nodes_too = 0; nodes_too < 2; nodes_too++) {
        char *shuf = shuffled_nodes(text, 3 + 8 * (unsigned)nodes_too, nodes_too);
        t = load_text(shuf);
        free(shuf);
        ck_assert_int_eq(hier_applicable(t, &c, &err), CS_OK);
        cs_topology *orig = load_text(text);
        cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_ALLREDUCE,
                                CS_COLL_BROADCAST, CS_COLL_REDUCE};
        for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
            bool rooted = collective_kind_is_rooted(kinds[q]);
            check_composed_root(t, kinds[q], rooted ? 5 : -1);
            cs_collective cc;
            cs_result *r1 = NULL, *r0 = NULL;
            /* the root: a NIC in both numberings (local 0 of its node) */
            collective_init(&cc, kinds[q], rooted ? t->groups[0].ranks[0] : -1);
            ck_assert_msg(hier_synthesize(t, &cc, NULL, &r1, &err) == CS_OK, "%s", err.message);
            ck_assert_msg(strstr(r1->reason, "renumbering"), "%s", r1->reason);
            collective_init(&cc, kinds[q], rooted ? 0 : -1);
            ck_assert_int_eq(hier_synthesize(orig, &cc, NULL, &r0, &err), CS_OK);
            double t1 = best_buffer_us(t, r1, 1 << 30), t0 = best_buffer_us(orig, r0, 1 << 30);
            /* every numbering the same (the walk starts from the canonical
             * labelling); against the groups' own order no slower (measured:
             * equal, broadcast/reduce 0.4% faster: the node type's labels
             * differ, so SMT's trees may; before the NIC segments went by
             * lanes, allgather was 4.5% slower) */
            if (nodes_too == 0)
                first_us[q] = t1;
            ck_assert_msg(fabs(t1 - first_us[q]) <= 1e-9 * t1, "%s: %.1f us, other numbering "
                          "%.1f us", collective_kind_name(kinds[q]), t1, first_us[q]);
            ck_assert_msg(t1 <= t0 * 1.001, "%s renumbered: %.1f us, as built: %.1f us",
                          collective_kind_name(kinds[q]), t1, t0);
            result_free(r1);
            result_free(r0);
        }
        topology_free(orig);
        topology_free(t);
    }
    /* a ring one way only (NIC j of node n to node n + 1), renumbered:
     * the walk follows the one link out */
    {
        json_t *l1 = json_array(), *g1 = json_array();
        for (int n = 0; n < N; n++) {
            json_t *g = json_array();
            for (int i = 0; i < 4; i++) {
                json_array_append_new(g, json_integer(4 * n + i));
                json_array_append_new(l1, json_pack("{s:i, s:i, s:i, s:f, s:f, s:b}", "src",
                                                    4 * n + i, "dst", 4 * n + (i + 1) % 4,
                                                    "lanes", 1, "gbps", 100.0, "alpha_us", 0.5,
                                                    "bidirectional", 1));
            }
            json_array_append_new(g1, g);
            for (int i = 0; i < 4; i += 2)
                json_array_append_new(l1, json_pack("{s:i, s:i, s:i, s:f, s:f, s:b}", "src",
                                                    4 * n + i, "dst", 4 * ((n + 1) % N) + i,
                                                    "lanes", 1, "gbps", 10.0, "alpha_us", 2.0,
                                                    "bidirectional", 0));
        }
        json_t *d1 = json_pack("{s:s, s:i, s:o, s:o}", "name", "oneway", "ranks", 4 * N,
                               "links", l1, "groups", g1);
        char *t1 = json_dumps(d1, JSON_COMPACT);
        json_decref(d1);
        char *sh = shuffled_nodes(t1, 9, true);
        cs_topology *u = load_text(sh);
        check_composed(u, CS_COLL_ALLGATHER);
        check_composed(u, CS_COLL_ALLREDUCE);
        check_composed_root(u, CS_COLL_BROADCAST, 6);
        cs_collective c1;
        collective_init(&c1, CS_COLL_ALLGATHER, -1);
        cs_result *r1 = NULL;
        ck_assert_int_eq(hier_synthesize(u, &c1, NULL, &r1, &err), CS_OK);
        ck_assert_msg(strstr(r1->reason, "renumbering") && strstr(r1->reason, "ring fabric") &&
                      !strstr(r1->reason, "both ways"), "%s", r1->reason);
        result_free(r1);
        topology_free(u);
        free(sh);
        free(t1);
    }
    /* auto on it (20 ranks: beyond smt) composes around the ring and says why */
    char body[4096];
    snprintf(body, sizeof body, "{\"topology\":%s,\"collective\":\"allgather\"}", text);
    free(text);
    cs_synth_request *req = NULL;
    cs_result *r = run_request(body, &req);
    ck_assert_str_eq(r->method, "hierarchical");
    ck_assert_msg(strstr(r->reason, "ring fabric") && strstr(r->reason, "balanced"), "%s",
                  r->reason);
    ck_assert_str_eq(json_string_value(json_object_get(r->stats, "fabric")), "ring");
    result_free(r);
    synth_request_free(req);
}
END_TEST

/* Simulated microseconds of the best algorithm of res on t at `bytes`. */
static double best_time_us(const cs_topology *t, const cs_result *res, double bytes)
{
    double best = INFINITY;
    for (int i = 0; i < res->nalgs; i++) {
        cs_sim_result sim;
        cs_error err;
        ck_assert_int_eq(simulate_algorithm(t, res->algs[i], bytes * res->algs[i]->chunks, &sim,
                                            &err), CS_OK);
        best = sim.time_us < best ? sim.time_us : best;
        sim_result_free(&sim);
    }
    return best;
}

/* The hook's 8 DGX-1 nodes on its ring fabric: with the NIC trees balanced
 * to the node's lanes the composition around the ring is as fast as flat
 * TACOS for allgather and reducescatter and no slower for allreduce (what
 * lets auto pick it there); before, two trees on a 1-lane NVLink held
 * allgather to 0.56 of TACOS's speed. */
START_TEST(test_ring_matches_tacos)
{
    char msg[256];
    json_t *doc = NULL;
    json_t *name = cluster_hook_dgx1("lab", 8, 1, "ring", 12.5, &doc, msg, sizeof msg);
    ck_assert_msg(name != NULL, "%s", msg);
    json_decref(name);
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
    json_decref(doc);
    cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_ALLREDUCE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], -1);
        ck_assert_int_eq(hier_auto_applicable(t, &c, &err), CS_OK);
        cs_result *h = NULL, *f = NULL;
        ck_assert_msg(hier_synthesize(t, &c, NULL, &h, &err) == CS_OK, "%s", err.message);
        ck_assert_msg(strstr(h->reason, "ring fabric"), "%s", h->reason);
        cs_tacos_options to;
        tacos_options_default(&to);
        to.keep_sends = true;
        ck_assert_msg(tacos_synthesize(t, &c, &to, &f, &err) == CS_OK, "%s", err.message);
        for (int i = 0; i < h->nalgs; i++)
            ck_assert_msg(algorithm_verify(t, h->algs[i], &err) == CS_OK, "%s", err.message);
        double sizes[] = {1 << 20, 1 << 30};
        for (int z = 0; z < 2; z++) {
            double th = best_time_us(t, h, sizes[z]), tf = best_time_us(t, f, sizes[z]);
            ck_assert_msg(th <= tf * 1.005, "%s at %g bytes: hierarchical %.1f us, tacos %.1f us",
                          collective_kind_name(kinds[k]), sizes[z], th, tf);
        }
        result_free(h);
        result_free(f);
    }
    topology_free(t);
}
END_TEST

/* The frontier's best simulated time with the whole buffer (the rank
 * share L of the cost model) = bytes, as ratio_to_bound takes it. */
static double best_buffer_us(const cs_topology *t, const cs_result *res, double bytes)
{
    double best = INFINITY;
    for (int i = 0; i < res->nalgs; i++) {
        cs_sim_result sim;
        cs_error err;
        ck_assert_int_eq(simulate_algorithm(t, res->algs[i], bytes, &sim, &err), CS_OK);
        best = sim.time_us < best ? sim.time_us : best;
        sim_result_free(&sim);
    }
    return best;
}

/* The hook's 8 DGX-1 nodes on its ring fabric, broadcast and reduce from a
 * NIC (0) and from a rank that is not one (5): half the data all the way
 * round each way, pipelined, fed by k root trees balanced to the node's
 * lanes.  At 1 GiB the frontier's best reaches 0.77 of the in-cut bound
 * (measured; the one-way chains reached 0.33, and the root's single tree
 * with every chunk at its tree step 0.65); here >= 0.74, and at least 5x
 * the ring baseline's and 20x flat TACOS's speed on the same instance. */
START_TEST(test_ring_broadcast_both_ways)
{
    char msg[256];
    json_t *doc = NULL;
    json_t *name = cluster_hook_dgx1("lab", 8, 1, "ring", 12.5, &doc, msg, sizeof msg);
    ck_assert_msg(name != NULL, "%s", msg);
    json_decref(name);
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
    json_decref(doc);
    cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_REDUCE};
    int roots[] = {0, 5};
    for (size_t k = 0; k < 2; k++)
        for (size_t q = 0; q < 2; q++) {
            cs_collective c;
            collective_init(&c, kinds[k], roots[q]);
            cs_result *h = NULL, *f = NULL;
            ck_assert_msg(hier_synthesize(t, &c, NULL, &h, &err) == CS_OK, "%s", err.message);
            ck_assert_msg(strstr(h->reason, "both ways"), "%s", h->reason);
            for (int i = 0; i < h->nalgs; i++)
                ck_assert_msg(algorithm_verify(t, h->algs[i], &err) == CS_OK, "%s [%d]: %s",
                              collective_kind_name(kinds[k]), i, err.message);
            cs_time_bound tb;
            ck_assert_int_eq(collective_time_bound(t, &c, &tb, &err), CS_OK);
            double th = best_buffer_us(t, h, 1 << 30);
            double bound = time_bound_us(&tb, 1 << 30, 1);
            ck_assert_msg(bound / th >= 0.74, "%s root %d: %.3f of the bound (%.1f us)",
                          collective_kind_name(kinds[k]), roots[q], bound / th, th);
            /* the latency end (BC_STAGGER, BC_MIX): measured 0.437 of the
             * bound at 1 MiB from root 0 (51.4 us against 22.5), 0.329
             * before them */
            double ts = best_buffer_us(t, h, 1 << 20), bs = time_bound_us(&tb, 1 << 20, 1);
            ck_assert_msg(bs / ts >= 0.42, "%s root %d at 1 MiB: %.3f of the bound (%.1f us)",
                          collective_kind_name(kinds[k]), roots[q], bs / ts, ts);
            cs_tacos_options to;
            tacos_options_default(&to);
            to.keep_sends = true;
            ck_assert_msg(tacos_synthesize(t, &c, &to, &f, &err) == CS_OK, "%s", err.message);
            double tf = best_buffer_us(t, f, 1 << 30);
            ck_assert_msg(tf >= 20 * th, "tacos %.1f us, hierarchical %.1f us", tf, th);
            cs_algorithm *ring = NULL;
            ck_assert_msg(baseline_generate("ring", t, &c, NULL, &ring, &err) == CS_OK, "%s",
                          err.message);
            cs_sim_result sr;
            ck_assert_int_eq(simulate_algorithm(t, ring, 1 << 30, &sr, &err), CS_OK);
            ck_assert_msg(sr.time_us >= 5 * th, "ring baseline %.1f us, hierarchical %.1f us",
                          sr.time_us, th);
            sim_result_free(&sr);
            algorithm_free(ring);
            result_free(h);
            result_free(f);
        }
    topology_free(t);
}
END_TEST

/* Rooted collectives at small sizes on the hook's 16 and 32 DGX-1 ring
 * nodes: at 1 MiB the staggered shape (each NIC's chunks split the ring at
 * consecutive points, farthest first on every link) holds the frontier's
 * best point.  Measured 0.485 and 0.545 of the bound (71.2 and 107.3 us);
 * before it the best was 0.326 and 0.417 (HALVES at 16 chunks per NIC).
 * Every point verifies; TACOS and the ring baseline are several times
 * slower at this size (measured 432.8 / 307.2 us on 8 nodes). */
START_TEST(test_ring_rooted_small)
{
    int nodes[] = {16, 32};
    double floors[] = {0.46, 0.52};
    for (size_t q = 0; q < 2; q++) {
        char msg[256];
        json_t *doc = NULL;
        json_t *name = cluster_hook_dgx1("lab", nodes[q], 1, "ring", 12.5, &doc, msg, sizeof msg);
        ck_assert_msg(name != NULL, "%s", msg);
        json_decref(name);
        cs_topology *t = NULL;
        cs_error err;
        ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
        json_decref(doc);
        cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_REDUCE};
        for (size_t k = 0; k < 2; k++) {
            cs_collective c;
            collective_init(&c, kinds[k], 0);
            cs_result *h = NULL;
            ck_assert_msg(hier_synthesize(t, &c, NULL, &h, &err) == CS_OK, "%s", err.message);
            for (int i = 0; i < h->nalgs; i++)
                ck_assert_msg(algorithm_verify(t, h->algs[i], &err) == CS_OK, "%s [%d]: %s",
                              collective_kind_name(kinds[k]), i, err.message);
            cs_time_bound tb;
            ck_assert_int_eq(collective_time_bound(t, &c, &tb, &err), CS_OK);
            double ts = best_buffer_us(t, h, 1 << 20), bs = time_bound_us(&tb, 1 << 20, 1);
            ck_assert_msg(bs / ts >= floors[q], "%d nodes %s at 1 MiB: %.3f of the bound (%.1f us)",
                          nodes[q], collective_kind_name(kinds[k]), bs / ts, ts);
            cs_algorithm *ring = NULL;
            ck_assert_msg(baseline_generate("ring", t, &c, NULL, &ring, &err) == CS_OK, "%s",
                          err.message);
            cs_sim_result sr;
            ck_assert_int_eq(simulate_algorithm(t, ring, 1 << 20, &sr, &err), CS_OK);
            ck_assert_msg(sr.time_us >= 3 * ts, "ring baseline %.1f us, hierarchical %.1f us",
                          sr.time_us, ts);
            sim_result_free(&sr);
            algorithm_free(ring);
            result_free(h);
        }
        topology_free(t);
    }
}
END_TEST

/* The hook's 8 DGX-1 nodes on its ring fabric, numbered like an
 * allocation (nodes out of ring order, GPUs shuffled inside each): the
 * walk around the ring matches the nodes up, and every collective takes
 * the same simulated time as on the cluster as built. */
START_TEST(test_ring_renumbered_hook)
{
    char msg[256];
    json_t *doc = NULL;
    json_t *name = cluster_hook_dgx1("lab", 8, 1, "ring", 12.5, &doc, msg, sizeof msg);
    ck_assert_msg(name != NULL, "%s", msg);
    json_decref(name);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    char *shuf = shuffled_nodes(text, 5, true);
    cs_topology *t = load_text(text), *u = load_text(shuf);
    ck_assert_msg(!nodes_alike_as_listed(u), "the shuffle left the nodes alike");
    cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_ALLREDUCE,
                            CS_COLL_BROADCAST, CS_COLL_REDUCE};
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
        bool rooted = collective_kind_is_rooted(kinds[q]);
        cs_collective c;
        cs_result *r0 = NULL, *r1 = NULL;
        cs_error err;
        collective_init(&c, kinds[q], rooted ? 0 : -1);
        ck_assert_int_eq(hier_synthesize(t, &c, NULL, &r0, &err), CS_OK);
        /* the root: local 0 of its node (a NIC) in both */
        collective_init(&c, kinds[q], rooted ? u->groups[0].ranks[0] : -1);
        ck_assert_msg(hier_synthesize(u, &c, NULL, &r1, &err) == CS_OK, "%s: %s",
                      collective_kind_name(kinds[q]), err.message);
        ck_assert_msg(strstr(r1->reason, "renumbering") && strstr(r1->reason, "ring fabric"),
                      "%s", r1->reason);
        for (int i = 0; i < r1->nalgs; i++)
            ck_assert_msg(algorithm_verify(u, r1->algs[i], &err) == CS_OK, "%s", err.message);
        double sizes[] = {1 << 20, 1 << 30};
        for (int z = 0; z < 2; z++) {
            double t0 = best_buffer_us(t, r0, sizes[z]), t1 = best_buffer_us(u, r1, sizes[z]);
            ck_assert_msg(fabs(t1 - t0) <= 1e-6 * t0, "%s at %g: renumbered %.1f us, as built "
                          "%.1f us", collective_kind_name(kinds[q]), sizes[z], t1, t0);
        }
        result_free(r0);
        result_free(r1);
    }
    topology_free(t);
    topology_free(u);
    free(text);
    free(shuf);
}
END_TEST

static cs_result *run_request(const char *body, cs_synth_request **req_out)
{
    cs_synth_request *req = NULL;
    cs_error err;
    int rc = synth_request_parse(body, strlen(body), NULL, &req, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", body, err.message);
    cs_result *res = NULL;
    rc = synth_run(req, NULL, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", body, err.message);
    *req_out = req;
    return res;
}

START_TEST(test_auto_picks_hierarchical)
{
    const char *bodies[] = {
        "{\"topology\":\"dgxh100:4\",\"collective\":\"allgather\"}",
        "{\"topology\":\"ndv2:4\",\"collective\":\"allreduce\"}",
        "{\"topology\":\"dgxa100:3\",\"collective\":\"reducescatter\",\"method\":\"auto\"}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        cs_synth_request *req = NULL;
        cs_result *res = run_request(bodies[i], &req);
        ck_assert_str_eq(res->method, "hierarchical");
        ck_assert_msg(strncmp(res->reason, "auto:", 5) == 0 &&
                          strstr(res->reason, "hierarchical"),
                      "reason: %s", res->reason);
        json_t *doc = synth_result_to_json(req, res);
        json_t *a0 = json_array_get(json_object_get(doc, "frontier"), 0);
        ck_assert_msg(json_object_get(json_object_get(doc, "bounds"), "time") != NULL,
                      "bounds.time present");
        ck_assert_msg(json_is_number(json_object_get(a0, "ratio_to_bound")),
                      "ratio_to_bound present");
        json_decref(doc);
        result_free(res);
        synth_request_free(req);
    }
    /* explicit method, and SMT-sized clusters stay with SMT under auto */
    cs_synth_request *req = NULL;
    cs_result *res = run_request(
        "{\"topology\":\"dgxh100:2\",\"collective\":\"allgather\",\"method\":\"hierarchical\"}",
        &req);
    ck_assert_str_eq(res->method, "hierarchical");
    ck_assert_msg(strstr(res->reason, "method hierarchical requested"), "%s", res->reason);
    result_free(res);
    synth_request_free(req);
}
END_TEST

/* Scatter and gather: the root's node tree to a NIC, one fabric hop (or
 * around the ring), the NIC's tree in the destination node; gather is the
 * scatter of the reversed topology mirrored.  Every algorithm verified, from
 * a NIC root and from a root that is not a NIC, on switched fabrics (rails,
 * the hook's fabric switch) and the ring cluster; on the hook's 8 DGX-1
 * nodes faster than flat TACOS (whose one-chunk-at-a-time trees from the
 * root reach about a quarter of the bound there); and auto takes it. */
START_TEST(test_scatter_gather)
{
    const char *specs[] = {"dgxh100:4", "ndv2:3"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        cs_topology *t = test_topology(specs[i]);
        check_composed_root(t, CS_COLL_SCATTER, 0);
        check_composed_root(t, CS_COLL_SCATTER, 13);
        check_composed_root(t, CS_COLL_GATHER, 0);
        check_composed_root(t, CS_COLL_GATHER, 13);
        topology_free(t);
    }
    cs_topology *t = load_text(ring_cluster);
    check_composed_root(t, CS_COLL_SCATTER, 7);
    check_composed_root(t, CS_COLL_GATHER, 5);
    topology_free(t);

    char msg[256];
    json_t *doc = NULL;
    json_t *name = cluster_hook_dgx1("lab", 8, 1, "switch", 12.5, &doc, msg, sizeof msg);
    ck_assert_msg(name != NULL, "%s", msg);
    json_decref(name);
    cs_error err;
    ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
    json_decref(doc);
    cs_coll_kind kinds[] = {CS_COLL_SCATTER, CS_COLL_GATHER};
    for (int k = 0; k < 2; k++) {
        check_composed_root(t, kinds[k], 3);
        cs_collective c;
        collective_init(&c, kinds[k], 3);
        cs_result *h = NULL, *f = NULL;
        ck_assert_msg(hier_synthesize(t, &c, NULL, &h, &err) == CS_OK, "%s", err.message);
        cs_tacos_options to;
        tacos_options_default(&to);
        to.keep_sends = true;
        ck_assert_msg(tacos_synthesize(t, &c, &to, &f, &err) == CS_OK, "%s", err.message);
        double sizes[] = {1 << 20, 1 << 30};
        for (int z = 0; z < 2; z++) {
            double th = best_time_us(t, h, sizes[z]), tf = best_time_us(t, f, sizes[z]);
            ck_assert_msg(th < tf, "%s at %g bytes: hierarchical %.1f us, tacos %.1f us",
                          collective_kind_name(kinds[k]), sizes[z], th, tf);
        }
        result_free(h);
        result_free(f);
    }
    topology_free(t);

    const char *bodies[] = {
        "{\"topology\":\"dgxh100:4\",\"collective\":{\"kind\":\"scatter\",\"root\":5}}",
        "{\"topology\":\"dgxh100:4\",\"collective\":{\"kind\":\"gather\",\"root\":5}}",
    };
    for (int b = 0; b < 2; b++) {
        cs_synth_request *req = NULL;
        cs_result *r = run_request(bodies[b], &req);
        ck_assert_str_eq(r->method, "hierarchical");
        ck_assert_msg(strstr(r->reason, b ? "gather" : "scatter"), "%s", r->reason);
        result_free(r);
        synth_request_free(req);
    }
}
END_TEST

/* Scatter and gather on the hook's 128 DGX-1 nodes: some frontier point
 * lowers within both runtimes' limits (the node blocks: dealt by rank, the
 * root's link to a NIC would need 255 steps of a thread block). */
START_TEST(test_scatter_gather_msccl_fit)
{
    char msg[256];
    json_t *doc = NULL;
    json_t *name = cluster_hook_dgx1("lab", 128, 1, "switch", 12.5, &doc, msg, sizeof msg);
    ck_assert_msg(name != NULL, "%s", msg);
    json_decref(name);
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
    json_decref(doc);
    cs_coll_kind kinds[] = {CS_COLL_SCATTER, CS_COLL_GATHER};
    for (int k = 0; k < 2; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], 0);
        cs_result *res = NULL;
        ck_assert_msg(hier_synthesize(t, &c, NULL, &res, &err) == CS_OK, "%s", err.message);
        ck_assert_int_eq(res->nalgs, 2);
        int fits = 0;
        for (int i = 0; i < res->nalgs; i++) {
            ck_assert_msg(algorithm_verify(t, res->algs[i], &err) == CS_OK, "%s", err.message);
            cs_msccl_options o;
            msccl_options_default(&o);
            char *xml = NULL;
            size_t len = 0;
            cs_msccl_check_stats st;
            if (msccl_xml_generate(res->algs[i], t, &o, &xml, &len, &err) == CS_OK &&
                msccl_check_limits(xml, len, CS_MSCCL_RUNTIME_AUTO, &st, &err) == CS_OK)
                fits++;
            free(xml);
        }
        ck_assert_msg(fits >= 1, "%s: no frontier point fits the runtimes (%s)",
                      collective_kind_name(kinds[k]), err.message);
        result_free(res);
    }
    topology_free(t);
}
END_TEST

START_TEST(test_refusals)
{
    cs_topology *t = test_topology("dgxh100:2");
    cs_collective c;
    cs_result *res = NULL;
    cs_error err;
    /* custom collectives have no composition */
    json_t *cdoc = json_loads("{\"kind\": \"custom\", \"global_chunks\": 1, \"pre\": [[0, 0]],"
                              " \"post\": [[0, 9]]}", 0, NULL);
    ck_assert_int_eq(collective_from_json(cdoc, &c, &err), CS_OK);
    json_decref(cdoc);
    ck_assert_int_eq(collective_validate(&c, 16, &err), CS_OK);
    ck_assert_int_eq(hier_synthesize(t, &c, NULL, &res, &err), CS_EUNSUPPORTED);
    ck_assert_ptr_null(res);
    ck_assert_msg(strstr(err.message, "custom"), "%s", err.message);
    ck_assert_int_eq(hier_applicable(t, &c, &err), CS_EUNSUPPORTED);
    collective_free(&c);
    topology_free(t);

    /* no nodes */
    t = test_topology("torus2d:4x4");
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    ck_assert_int_eq(hier_applicable(t, &c, &err), CS_EUNSUPPORTED);
    ck_assert_msg(strstr(err.message, "groups"), "%s", err.message);
    topology_free(t);

    /* the hook's ring fabric is not switched */
    const char *ring_fabric =
        "{\"name\":\"rf\",\"ranks\":6,\"links\":["
        "{\"src\":0,\"dst\":1,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":2,\"dst\":3,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":4,\"dst\":5,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"
        "{\"src\":0,\"dst\":2,\"lanes\":1,\"gbps\":10,\"alpha_us\":2,\"bidirectional\":true},"
        "{\"src\":2,\"dst\":4,\"lanes\":1,\"gbps\":10,\"alpha_us\":2,\"bidirectional\":true}],"
        "\"groups\":[[0,1],[2,3],[4,5]]}";
    t = load_text(ring_fabric);
    ck_assert_int_eq(hier_applicable(t, &c, &err), CS_EUNSUPPORTED);
    ck_assert_msg(strstr(err.message, "switched fabric") || strstr(err.message, "NIC"), "%s",
                  err.message);
    topology_free(t);

    /* the service refuses method hierarchical for what it cannot compose */
    const char *body =
        "{\"topology\":\"dgxh100:2\",\"collective\":{\"kind\":\"custom\",\"global_chunks\":1,"
        "\"pre\":[[0,0]],\"post\":[[0,9]]},\"method\":\"hierarchical\"}";
    cs_synth_request *req = NULL;
    ck_assert_int_eq(synth_request_parse(body, strlen(body), NULL, &req, &err), CS_EUNSUPPORTED);
    ck_assert_msg(strstr(err.message, "custom"), "%s", err.message);
    ck_assert_str_eq(err.field, "collective.kind");
}
END_TEST

/* ---- nodes numbered differently inside (Slurm allocations, relabelled documents) ---------- */

/* The Slurm hook's topology for n DGX-1 nodes (NICs 0,2,4,6) on one fabric
 * switch, as the hook writes it. */
static char *hook_cluster_text(int n)
{
    char msg[256];
    json_t *topo = cluster_hook_dgx1("lab", n, 1, "switch", 12.5, NULL, msg, sizeof msg);
    ck_assert_msg(topo != NULL, "%s", msg);
    char *text = json_dumps(topo, JSON_COMPACT);
    json_decref(topo);
    return text;
}

static int cmp_json_int(const void *a, const void *b)
{
    json_int_t x = json_integer_value(*(json_t *const *)a);
    json_int_t y = json_integer_value(*(json_t *const *)b);
    return (x > y) - (x < y);
}

/* t's Topology JSON with the ranks of every node permuted among themselves
 * (each node its own random order: its GPUs, NICs included, sit at other
 * local positions than in the other nodes), each group's list then written
 * in ascending rank order, as a daemon's canonical request writes it, so the
 * groups' order says nothing about which GPU is which. */
static char *shuffled_in_nodes(const char *doc, unsigned seed)
{
    return shuffled_nodes(doc, seed, false);
}

/* shuffled_in_nodes, and with nodes_too node g's ranks also become node
 * (3g + 1) mod N's (N not a multiple of 3), so the groups' order is not
 * the fabric's */
static char *shuffled_nodes(const char *doc, unsigned seed, bool nodes_too)
{
    cs_topology *t = load_text(doc);
    int *map = malloc(sizeof *map * (size_t)t->ranks);
    for (int r = 0; r < t->ranks; r++)
        map[r] = r;
    for (int g = 0; g < t->ngroups; g++) {
        const cs_group *gr = &t->groups[g];
        int p[64];
        for (int i = 0; i < gr->nranks; i++)
            p[i] = i;
        for (int i = gr->nranks - 1; i > 0; i--) {
            seed = seed * 1103515245u + 12345u;
            int j = (int)((seed >> 8) % (unsigned)(i + 1)), x = p[i];
            p[i] = p[j];
            p[j] = x;
        }
        const cs_group *to = nodes_too ? &t->groups[(3 * g + 1) % t->ngroups] : gr;
        for (int i = 0; i < gr->nranks; i++)
            map[gr->ranks[i]] = to->ranks[p[i]];
    }
    cs_topology *u = NULL;
    cs_error err;
    ck_assert_int_eq(iso_relabel_topology(t, map, "shuffled", &u, &err), CS_OK);
    json_t *j = topology_to_json(u);
    json_t *groups = json_object_get(j, "groups");
    for (size_t g = 0; g < json_array_size(groups); g++) {
        json_t *ranks = json_array_get(groups, g);
        if (json_is_object(ranks))
            ranks = json_object_get(ranks, "ranks");
        size_t n = json_array_size(ranks);
        json_t **v = malloc(sizeof *v * n);
        for (size_t i = 0; i < n; i++)
            v[i] = json_incref(json_array_get(ranks, i));
        qsort(v, n, sizeof *v, cmp_json_int);
        json_array_clear(ranks);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(ranks, v[i]);
        free(v);
    }
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    topology_free(t);
    topology_free(u);
    free(map);
    return text;
}

/* Whether the groups' own order shows every node alike: local link lanes
 * (i -> j), local NIC positions (ranks with a link out of their node), and
 * local NIC i of every node joined to local NIC i of node 0 (one rail). */
static bool nodes_alike_as_listed(const cs_topology *t)
{
    int m = t->groups[0].nranks;
    for (int g = 1; g < t->ngroups; g++)
        for (int i = 0; i < m; i++) {
            int a0 = t->groups[0].ranks[i], ag = t->groups[g].ranks[i];
            bool out0 = false, outg = false;
            for (int l = t->out_begin[a0]; l < t->out_begin[a0 + 1]; l++)
                out0 = out0 || t->group_of[t->links[l].dst] != 0;
            for (int l = t->out_begin[ag]; l < t->out_begin[ag + 1]; l++)
                outg = outg || t->group_of[t->links[l].dst] != g;
            if (out0 != outg || (out0 && topology_find_link(t, a0, ag) < 0))
                return false;
            for (int k = 0; k < m; k++) {
                int l0 = topology_find_link(t, a0, t->groups[0].ranks[k]);
                int lg = topology_find_link(t, ag, t->groups[g].ranks[k]);
                if ((l0 < 0) != (lg < 0) || (l0 >= 0 && t->links[l0].lanes != t->links[lg].lanes))
                    return false;
            }
        }
    return true;
}

/* auto on the topology document for kind: method hierarchical, every
 * algorithm verified here again on the caller's topology; the frontier's
 * best simulated time at `bytes` and best ratio to the bound at 1 GiB. */
static void auto_hier(const char *doc, const char *kind, bool renumbered, double bytes,
                      double *best_us, double *best_ratio)
{
    char *body = malloc(strlen(doc) + 128);
    sprintf(body, "{\"topology\":%s,\"collective\":\"%s\"}", doc, kind);
    cs_synth_request *req = NULL;
    cs_result *res = run_request(body, &req);
    free(body);
    ck_assert_str_eq(res->method, "hierarchical");
    ck_assert_msg(strncmp(res->reason, "auto:", 5) == 0, "%s", res->reason);
    ck_assert_msg((strstr(res->reason, "renumbering") != NULL) == renumbered, "reason: %s",
                  res->reason);
    const cs_topology *t = req->topology;
    cs_time_bound tb;
    cs_error err;
    ck_assert_int_eq(collective_time_bound(t, &req->collective, &tb, &err), CS_OK);
    *best_us = INFINITY;
    *best_ratio = 0;
    for (int i = 0; i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s alg %d: %s", t->name, i,
                      err.message);
        cs_sim_result sr;
        ck_assert_int_eq(simulate_algorithm(t, a, bytes, &sr, &err), CS_OK);
        if (sr.time_us < *best_us)
            *best_us = sr.time_us;
        sim_result_free(&sr);
        cs_bound_ratio br;
        ck_assert_int_eq(synth_ratio_to_bound(t, &tb, a, 1 << 30, &br, &err), CS_OK);
        ck_assert(br.ratio > 0 && br.ratio <= 1.0 + 1e-9);
        if (br.ratio > *best_ratio)
            *best_ratio = br.ratio;
    }
    result_free(res);
    synth_request_free(req);
}

/* A Slurm allocation numbers each node's GPUs its own way: the hook's
 * DGX-1 cluster (8 nodes, one fabric switch) and dgxh100:4 (rails: the
 * NIC of rail r is a different local rank in every node) with every node
 * shuffled inside are the same clusters, so auto must still compose them
 * hierarchically, say the nodes were matched up to renumbering, and reach
 * the same simulated time and ratio to the bound as the unshuffled ones. */
START_TEST(test_renumbered_nodes)
{
    char *hook = hook_cluster_text(8);
    cs_topology *h = test_topology("dgxh100:4");
    json_t *hj = topology_to_json(h);
    char *h100 = json_dumps(hj, JSON_COMPACT);
    json_decref(hj);
    topology_free(h);
    const char *docs[] = {hook, h100};
    const char *kinds[] = {"allgather", "allreduce"};
    for (int d = 0; d < 2; d++) {
        char *shuf = shuffled_in_nodes(docs[d], 7u + (unsigned)d);
        cs_topology *u = load_text(shuf);
        ck_assert_msg(!nodes_alike_as_listed(u), "doc %d: the shuffle left the nodes alike: %.300s", d, shuf);
        topology_free(u);
        for (int k = 0; k < 2; k++) {
            double us0, r0, us1, r1;
            auto_hier(docs[d], kinds[k], false, 1 << 20, &us0, &r0);
            auto_hier(shuf, kinds[k], true, 1 << 20, &us1, &r1);
            ck_assert_msg(fabs(us1 - us0) <= 1e-6 * us0 && fabs(r1 - r0) <= 1e-9,
                          "doc %d %s: shuffled %.3f us ratio %.4f, as built %.3f us ratio %.4f",
                          d, kinds[k], us1, r1, us0, r0);
        }
        /* method hierarchical asked for explicitly is accepted too */
        char *body = malloc(strlen(shuf) + 128);
        sprintf(body, "{\"topology\":%s,\"collective\":\"allgather\",\"method\":"
                      "\"hierarchical\"}", shuf);
        cs_synth_request *req = NULL;
        cs_result *res = run_request(body, &req);
        ck_assert_str_eq(res->method, "hierarchical");
        ck_assert_msg(strstr(res->reason, "renumbering"), "%s", res->reason);
        result_free(res);
        synth_request_free(req);
        free(body);
        free(shuf);
    }
    free(hook);
    free(h100);
}
END_TEST

static Suite *hier_suite(void)
{
    Suite *s = suite_create("hier");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_builtin_clusters);
    tcase_add_test(tc, test_json_clusters);
    tcase_add_test(tc, test_rooted);
    tcase_add_test(tc, test_smt_fallback);
    tcase_add_test(tc, test_interleaved_ranks);
    tcase_add_test(tc, test_mixed_types_refused);
    tcase_add_test(tc, test_ring_fabric);
    tcase_add_test(tc, test_ring_matches_tacos);
    tcase_add_test(tc, test_ring_broadcast_both_ways);
    tcase_add_test(tc, test_ring_rooted_small);
    tcase_add_test(tc, test_ring_renumbered_hook);
    tcase_add_test(tc, test_scatter_gather);
    tcase_add_test(tc, test_scatter_gather_msccl_fit);
    tcase_add_test(tc, test_pipelined);
    tcase_add_test(tc, test_node_chunk_allreduce);
    tcase_add_test(tc, test_msccl_fits);
    tcase_add_test(tc, test_auto_picks_hierarchical);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_renumbered_nodes);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(hier_suite)
