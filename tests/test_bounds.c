/* Tests of collective_bounds: every expected value is derived by hand in the
 * comment beside it (or from the SCCL paper for DGX-1). */
#include <string.h>

#include "check_main.h"
#include "cluster_testutil.h"
#include "collective.h"
#include "topology_testutil.h"

/* Time limits stretch under valgrind (make valgrind sets VALGRIND=1). */
static double slow_factor(void)
{
    const char *v = getenv("VALGRIND");
    return v && strcmp(v, "1") == 0 ? 50.0 : 1.0;
}

/* Bounds of kind/root on t must be steps and num/den (reduced). */
static void expect(const cs_topology *t, cs_coll_kind kind, int root, int steps, long num,
                   long den)
{
    cs_collective c;
    collective_init(&c, kind, root);
    cs_bounds b;
    cs_error err = { 0 };
    int rc = collective_bounds(t, &c, &b, &err);
    ck_assert_msg(rc == CS_OK, "%s on %s: %s", collective_kind_name(kind), t->name, err.message);
    ck_assert_msg(b.steps == steps && b.rpc_num == num && b.rpc_den == den,
                  "%s on %s: steps %d rpc %ld/%ld, expected %d and %ld/%ld (%s)",
                  collective_kind_name(kind), t->name, b.steps, b.rpc_num, b.rpc_den, steps, num,
                  den, b.bandwidth_cut);
    ck_assert(b.rounds_per_chunk > (double)num / den - 1e-12 &&
              b.rounds_per_chunk < (double)num / den + 1e-12);
    ck_assert(strlen(b.bandwidth_cut) > 0);
}

/* SCCL: DGX-1 allgather needs 2 steps and 7/6 rounds per chunk (each GPU
 * receives 7 chunks per chunk over 6 NVLinks). */
START_TEST(dgx1_matches_sccl)
{
    cs_topology *t = test_topology("dgx1");
    expect(t, CS_COLL_ALLGATHER, -1, 2, 7, 6);
    expect(t, CS_COLL_REDUCESCATTER, -1, 2, 7, 6);
    /* allreduce = RS + AG: steps 4, (7/6 + 7/6) / 8 = 7/24 */
    expect(t, CS_COLL_ALLREDUCE, -1, 4, 7, 24);
    /* broadcast: root 0 sends over 6 lanes, every GPU receives over 6: 1/6 */
    expect(t, CS_COLL_BROADCAST, 0, 2, 1, 6);
    expect(t, CS_COLL_REDUCE, 0, 2, 1, 6);
    /* scatter/gather: the root sends 7 chunks per chunk over 6 lanes */
    expect(t, CS_COLL_SCATTER, 0, 2, 7, 6);
    expect(t, CS_COLL_GATHER, 0, 2, 7, 6);
    /* alltoall: a GPU receives 7 chunks per chunk over 6 lanes; the two groups
     * of 4 exchange 16 per chunk over the 6 cross links (0-4: 2, 1-5: 1, 2-6: 2,
     * 3-7: 1): 16/6 = 8/3 is larger */
    expect(t, CS_COLL_ALLTOALL, -1, 2, 8, 3);
    topology_free(t);
}
END_TEST

START_TEST(rings_lines_stars_fc)
{
    cs_topology *t = test_topology("ring:8");
    /* 7 chunks per chunk into one rank over 2 lanes; diameter 4 */
    expect(t, CS_COLL_ALLGATHER, -1, 4, 7, 2);
    expect(t, CS_COLL_BROADCAST, 0, 4, 1, 2);
    expect(t, CS_COLL_REDUCE, 0, 4, 1, 2);
    /* (7/2 + 7/2) / 8 = 7/8, steps 4 + 4 */
    expect(t, CS_COLL_ALLREDUCE, -1, 8, 7, 8);
    /* alltoall: half ring {0..3} receives 16 per chunk over 2 lanes = 8 */
    expect(t, CS_COLL_ALLTOALL, -1, 4, 8, 1);
    topology_free(t);

    t = test_topology("fc:8");
    expect(t, CS_COLL_ALLGATHER, -1, 1, 1, 1);      /* 7/7 */
    expect(t, CS_COLL_BROADCAST, 3, 1, 1, 7);
    topology_free(t);

    t = test_topology("line:4");
    /* the end rank receives 3 per chunk over 1 lane; diameter 3 */
    expect(t, CS_COLL_ALLGATHER, -1, 3, 3, 1);
    /* broadcast from 1: farthest rank 3 is 2 hops; every cut has 1 lane */
    expect(t, CS_COLL_BROADCAST, 1, 2, 1, 1);
    /* scatter from 0: {1,2,3} needs 3 per chunk through 1 lane */
    expect(t, CS_COLL_SCATTER, 0, 3, 3, 1);
    /* gather to 3: {0,1,2} must send 3 per chunk through 1 lane */
    expect(t, CS_COLL_GATHER, 3, 3, 3, 1);
    /* alltoall: {0,1} and {2,3} exchange 4 per chunk over 1 lane */
    expect(t, CS_COLL_ALLTOALL, -1, 3, 4, 1);
    topology_free(t);

    t = test_topology("star:4");
    /* a leaf receives 3 per chunk over 1 lane; leaf to leaf is 2 hops */
    expect(t, CS_COLL_ALLGATHER, -1, 2, 3, 1);
    /* scatter from the hub: each leaf gets 1 per chunk over its lane */
    expect(t, CS_COLL_SCATTER, 0, 1, 1, 1);
    /* gather to leaf 1: it receives 3 per chunk over 1 lane; 2 hops from 2 */
    expect(t, CS_COLL_GATHER, 1, 2, 3, 1);
    topology_free(t);

    /* unidirectional ring 0->1->2->3->0: 1 lane in, diameter 3 */
    t = test_topology("{\"ranks\": 4, \"links\": [{\"src\": 0, \"dst\": 1}, "
                      "{\"src\": 1, \"dst\": 2}, {\"src\": 2, \"dst\": 3}, "
                      "{\"src\": 3, \"dst\": 0}]}");
    expect(t, CS_COLL_ALLGATHER, -1, 3, 3, 1);
    /* gather to 0: farthest source is 1 (3 hops) */
    expect(t, CS_COLL_GATHER, 0, 3, 3, 1);
    topology_free(t);
}
END_TEST

/* Two 4-cliques joined by one link pair 3<->4: the bottleneck is a set, not
 * a rank, so only a real min-cut search finds it. */
START_TEST(dumbbell_needs_set_cuts)
{
    cs_topology *t = test_topology(
        "{\"ranks\": 8, \"links\": ["
        "{\"src\": 0, \"dst\": 1, \"bidirectional\": true}, {\"src\": 0, \"dst\": 2, \"bidirectional\": true},"
        "{\"src\": 0, \"dst\": 3, \"bidirectional\": true}, {\"src\": 1, \"dst\": 2, \"bidirectional\": true},"
        "{\"src\": 1, \"dst\": 3, \"bidirectional\": true}, {\"src\": 2, \"dst\": 3, \"bidirectional\": true},"
        "{\"src\": 4, \"dst\": 5, \"bidirectional\": true}, {\"src\": 4, \"dst\": 6, \"bidirectional\": true},"
        "{\"src\": 4, \"dst\": 7, \"bidirectional\": true}, {\"src\": 5, \"dst\": 6, \"bidirectional\": true},"
        "{\"src\": 5, \"dst\": 7, \"bidirectional\": true}, {\"src\": 6, \"dst\": 7, \"bidirectional\": true},"
        "{\"src\": 3, \"dst\": 4, \"bidirectional\": true}]}");
    /* allgather: {4..7} needs 4 per chunk over 1 lane = 4 (a rank alone: 7/3);
     * diameter 0-3-4-7 = 3 */
    expect(t, CS_COLL_ALLGATHER, -1, 3, 4, 1);
    /* alltoall: 4 x 4 = 16 per chunk over the 1 lane */
    expect(t, CS_COLL_ALLTOALL, -1, 3, 16, 1);
    /* broadcast from 0: 1 lane into the far clique */
    expect(t, CS_COLL_BROADCAST, 0, 3, 1, 1);
    /* scatter from 0: the far clique needs 4 per chunk over 1 lane */
    expect(t, CS_COLL_SCATTER, 0, 3, 4, 1);
    /* allreduce: (4 + 4) / 8 = 1 */
    expect(t, CS_COLL_ALLREDUCE, -1, 6, 1, 1);
    topology_free(t);
}
END_TEST

START_TEST(shared_sets_and_switches)
{
    /* fc:3 with rank 0's two in-links in one 1-lane set: 2 per chunk over 1 lane */
    cs_topology *t = test_topology("{\"ranks\": 3, \"links\": ["
                                   "{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
                                   "{\"src\": 0, \"dst\": 2, \"bidirectional\": true},"
                                   "{\"src\": 1, \"dst\": 2, \"bidirectional\": true}],"
                                   " \"shared\": [{\"links\": [[1, 0], [2, 0]], \"lanes\": 1}]}");
    expect(t, CS_COLL_ALLGATHER, -1, 1, 2, 1);
    /* broadcast from 1: rank 0 gets at most 1 lane */
    expect(t, CS_COLL_BROADCAST, 1, 1, 1, 1);
    topology_free(t);

    /* dgx2: one chunk in per round per GPU: 15 per chunk; 1 step */
    t = test_topology("dgx2");
    expect(t, CS_COLL_ALLGATHER, -1, 1, 15, 1);
    expect(t, CS_COLL_BROADCAST, 0, 1, 1, 1);
    topology_free(t);

    /* ndv2:2: a server (8 GPUs) receives 8 per chunk through GPUs 0 and 1, one
     * switch lane each: 8/2 = 4 (a GPU alone: 15/7).  Steps: GPU 6 to GPU 14
     * goes 6-2-0-8-10-14 or similar: 5 hops. */
    t = test_topology("ndv2:2");
    expect(t, CS_COLL_ALLGATHER, -1, 5, 4, 1);
    topology_free(t);

    /* mesh2d:3x3: a corner receives 8 per chunk over 2 lanes = 4; diameter 4 */
    t = test_topology("mesh2d:3x3");
    expect(t, CS_COLL_ALLGATHER, -1, 4, 4, 1);
    topology_free(t);
}
END_TEST

START_TEST(custom_and_errors)
{
    cs_topology *t = test_topology("line:3");
    cs_collective c;
    cs_error err = { 0 };
    json_t *doc = json_loads("{\"kind\": \"custom\", \"global_chunks\": 1, \"pre\": [[0, 0]],"
                             " \"post\": [[0, 1], [0, 2]]}", 0, NULL);
    ck_assert_int_eq(collective_from_json(doc, &c, &err), CS_OK);
    json_decref(doc);
    cs_bounds b;
    /* not validated yet */
    ck_assert_int_eq(collective_bounds(t, &c, &b, &err), CS_EINVAL);
    ck_assert_int_eq(collective_validate(&c, 3, &err), CS_OK);
    ck_assert_int_eq(collective_bounds(t, &c, &b, &err), CS_OK);
    /* 0 -> 2 is 2 hops; each rank receives 1 chunk over 1 lane; 0 sends over 1 */
    ck_assert_int_eq(b.steps, 2);
    ck_assert_int_eq(b.rpc_num, 1);
    ck_assert_int_eq(b.rpc_den, 1);
    collective_free(&c);

    collective_init(&c, CS_COLL_BROADCAST, 3);
    ck_assert_int_eq(collective_bounds(t, &c, &b, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "collective.root");
    topology_free(t);
}
END_TEST

START_TEST(hundreds_of_ranks_are_fast)
{
    cs_topology *t = test_topology("torus2d:16x16");
    double t0 = cs_now();
    /* 255 per chunk over 4 lanes; diameter 8 + 8 */
    expect(t, CS_COLL_ALLGATHER, -1, 16, 255, 4);
    double secs = cs_now() - t0;
    ck_assert_msg(secs < 1.0 * slow_factor(), "torus2d:16x16 allgather bounds took %.2f s", secs);
    topology_free(t);

    /* above 4096 ranks: per-rank cuts and a double-sweep diameter */
    t = test_topology("mesh2d:100x100");
    t0 = cs_now();
    /* corner: 9999 per chunk over 2 lanes; diameter 99 + 99 */
    expect(t, CS_COLL_ALLGATHER, -1, 198, 9999, 2);
    ck_assert(cs_now() - t0 < 3.0 * slow_factor());
    topology_free(t);
}
END_TEST


/* The topology with its switches written out as what lowering makes of them:
 * every link (derived ones too) as a document link, every shared set (the
 * switch ports' egress and ingress sets too, in finalize's order) as a
 * document set.  Without switches the cut network is the lowered form, so
 * this is the reference the switch hubs of the cut network are checked
 * against. */
static cs_topology *explicit_lowering(const cs_topology *t)
{
    cs_topology *x = topology_new(t->name, t->ranks);
    cs_error err = { 0 };
    for (int l = 0; l < t->nlinks; l++) {
        const cs_link *k = &t->links[l];
        ck_assert_int_eq(topology_add_link(x, k->src, k->dst, k->lanes, k->gbps, k->alpha_us,
                                           false, &err), CS_OK);
    }
    for (int s = 0; s < t->nshared; s++) {
        const cs_shared *sh = &t->shared[s];
        int (*pairs)[2] = malloc(sizeof *pairs * (size_t)sh->nlinks);
        for (int j = 0; j < sh->nlinks; j++) {
            pairs[j][0] = t->links[sh->links[j]].src;
            pairs[j][1] = t->links[sh->links[j]].dst;
        }
        ck_assert_int_eq(topology_add_shared(x, (const int (*)[2])pairs, sh->nlinks, sh->lanes,
                                             &err), CS_OK);
        free(pairs);
    }
    for (int g = 0; g < t->ngroups; g++)
        ck_assert_int_eq(topology_add_group(x, t->groups[g].ranks, t->groups[g].nranks, &err),
                         CS_OK);
    ck_assert_msg(topology_finalize(x, &err) == CS_OK, "%s: %s", t->name, err.message);
    ck_assert_int_eq(x->nswitches, 0);
    ck_assert_int_eq(x->nlinks, t->nlinks);
    return x;
}

/* The kinds whose cuts search the topology itself (allgather, alltoall,
 * broadcast, scatter; rooted ones from rank 0 and from the last rank) have
 * the same bounds on t (switches: hub nodes in the cut network where exact)
 * as on its explicit lowering; so do they on the reversed topology, where
 * gather, reducescatter, reduce and allreduce search.  (The explicit
 * lowering is compared before reversal: reversing it would chain each link
 * through its ingress set before its egress set, a looser network than the
 * switch's own lowering.) */
static void expect_same_on(const cs_topology *t)
{
    cs_topology *x = explicit_lowering(t);
    static const cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_ALLTOALL, CS_COLL_BROADCAST,
                                         CS_COLL_SCATTER};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int root = 0; root < t->ranks; root += t->ranks - 1) {
            bool rooted = collective_kind_is_rooted(kinds[k]);
            cs_collective c;
            collective_init(&c, kinds[k], rooted ? root : -1);
            cs_bounds a, b;
            cs_error err = { 0 };
            ck_assert_int_eq(collective_bounds(t, &c, &a, &err), CS_OK);
            ck_assert_int_eq(collective_bounds(x, &c, &b, &err), CS_OK);
            ck_assert_msg(a.steps == b.steps && a.rpc_num == b.rpc_num && a.rpc_den == b.rpc_den,
                          "%s root %d on %s: steps %d rpc %ld/%ld (%s); lowered: %d, %ld/%ld (%s)",
                          collective_kind_name(kinds[k]), c.root, t->name, a.steps, a.rpc_num,
                          a.rpc_den, a.bandwidth_cut, b.steps, b.rpc_num, b.rpc_den,
                          b.bandwidth_cut);
            ck_assert_str_eq(a.bandwidth_cut, b.bandwidth_cut);
            collective_free(&c);
            if (!rooted || t->ranks < 2)
                break;
        }
    topology_free(x);
}

static void expect_same_as_lowered(const cs_topology *t)
{
    expect_same_on(t);
    cs_topology *rev = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_reverse(t, &rev, &err), CS_OK);
    expect_same_on(rev);
    topology_free(rev);
}

/* A switch stands in the cut network as one hub node when that cuts every
 * rank partition at the capacity of its lowering (members >= 4 x the most
 * physical links a member has to other members; bounds.c).  The bounds and
 * the cuts found must be the lowered form's, both where the hub is used and
 * where the lowering stays. */
START_TEST(switch_hubs_match_the_lowering)
{
    /* hubs: no physical links among members (dgx2, dgxh100), 1 per member
     * on 4 members (ndv2:2's switch: GPUs 0-1 of each server are NVLinked),
     * the Slurm hook's DGX-1 cluster (NICs 0, 2, 4, 6: 2 NVLinks to other
     * NICs each, 8 or 16 NICs on the fabric switch) */
    const char *specs[] = {"dgx2", "dgxh100:2", "ndv2:2", "ndv2:3", "switch2d:4x3", "rfs3d:2x2x4"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        cs_topology *t = test_topology(specs[i]);
        expect_same_as_lowered(t);
        topology_free(t);
    }
    for (int nodes = 2; nodes <= 4; nodes += 2) {
        char msg[256];
        json_t *doc = NULL;
        json_t *name = cluster_hook_dgx1("lab", nodes, 1, "switch", 12.5, &doc, msg, sizeof msg);
        ck_assert_msg(name != NULL, "%s", msg);
        json_decref(name);
        cs_topology *t = NULL;
        cs_error err = { 0 };
        ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
        json_decref(doc);
        expect_same_as_lowered(t);
        topology_free(t);
    }
    /* the lowering stays: 2 members NVLinked (ndv2:1); 5 members on a
     * physical ring (2 links to members each: 5 < 8); and 8 on that ring,
     * the smallest switch a hub stands for with 2 links per member; ranks
     * on two switches; a chain of 3 ranks outside */
    cs_topology *t = test_topology("ndv2:1");
    expect_same_as_lowered(t);
    topology_free(t);
    /* every pair of members already linked: the switch derives nothing, where
     * a hub would add a lane per port (allgather: 3 chunks in over 3 lanes,
     * not 4) */
    t = test_topology("{\"ranks\": 4, \"links\": ["
             "{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
             "{\"src\": 0, \"dst\": 2, \"bidirectional\": true},"
             "{\"src\": 0, \"dst\": 3, \"bidirectional\": true},"
             "{\"src\": 1, \"dst\": 2, \"bidirectional\": true},"
             "{\"src\": 1, \"dst\": 3, \"bidirectional\": true},"
             "{\"src\": 2, \"dst\": 3, \"bidirectional\": true}],"
             " \"switches\": [{\"ranks\": [0, 1, 2, 3], \"gbps\": 50}]}");
    expect(t, CS_COLL_ALLGATHER, -1, 1, 1, 1);
    expect_same_as_lowered(t);
    topology_free(t);
    for (int n = 5; n <= 8; n += 3) {
        char doc[2048];
        int used = snprintf(doc, sizeof doc, "{\"ranks\": %d, \"links\": [", n + 3);
        for (int r = 0; r < n; r++)
            used += snprintf(doc + used, sizeof doc - (size_t)used,
                             "{\"src\": %d, \"dst\": %d, \"lanes\": %d, \"bidirectional\": true},",
                             r, (r + 1) % n, 1 + r % 3);
        used += snprintf(doc + used, sizeof doc - (size_t)used,
                         "{\"src\": 0, \"dst\": %d, \"bidirectional\": true},"
                         "{\"src\": %d, \"dst\": %d, \"bidirectional\": true},"
                         "{\"src\": %d, \"dst\": %d, \"lanes\": 2, \"bidirectional\": true}],"
                         " \"switches\": [{\"ranks\": [", n, n, n + 1, n + 1, n + 2);
        for (int r = 0; r < n; r++)
            used += snprintf(doc + used, sizeof doc - (size_t)used, "%s%d", r ? ", " : "", r);
        snprintf(doc + used, sizeof doc - (size_t)used,
                 "], \"gbps\": 50}, {\"ranks\": [1, %d, %d], \"gbps\": 20}]}", n + 1, n + 2);
        t = test_topology(doc);
        expect_same_as_lowered(t);
        topology_free(t);
    }
}
END_TEST

/* The fabric switch of the hook's 128-node cluster (512 ports, 261,632
 * derived links) is one node of the cut network: the allgather bound (a node
 * receives 1016 chunks per chunk over its 4 NIC lanes) is searched over every
 * rank, well within a second. */
START_TEST(fabric_switch_bound_is_fast)
{
    char msg[256];
    json_t *doc = NULL;
    json_t *name = cluster_hook_dgx1("lab", 128, 1, "switch", 12.5, &doc, msg, sizeof msg);
    ck_assert_msg(name != NULL, "%s", msg);
    json_decref(name);
    cs_topology *t = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_from_json(doc, NULL, &t, &err), CS_OK);
    json_decref(doc);
    double t0 = cs_now();
    /* steps: a non-NIC GPU to a non-NIC GPU of another node is GPU-NIC,
     * NIC-NIC, NIC-GPU = 3 hops */
    expect(t, CS_COLL_ALLGATHER, -1, 3, 254, 1);
    double secs = cs_now() - t0;
    ck_assert_msg(secs < 1.0 * slow_factor(), "hook 128 x DGX-1 allgather bounds took %.2f s",
                  secs);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_bounds b;
    ck_assert_int_eq(collective_bounds(t, &c, &b, &err), CS_OK);
    /* every rank was tried: no sampling note */
    ck_assert_msg(strstr(b.bandwidth_cut, "sampled") == NULL, "%s", b.bandwidth_cut);
    topology_free(t);
}
END_TEST

static Suite *bounds_suite(void)
{
    Suite *s = suite_create("bounds");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dgx1_matches_sccl);
    tcase_add_test(tc, rings_lines_stars_fc);
    tcase_add_test(tc, dumbbell_needs_set_cuts);
    tcase_add_test(tc, shared_sets_and_switches);
    tcase_add_test(tc, custom_and_errors);
    tcase_add_test(tc, hundreds_of_ranks_are_fast);
    tcase_add_test(tc, switch_hubs_match_the_lowering);
    tcase_add_test(tc, fabric_switch_bound_is_fast);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(bounds_suite)
