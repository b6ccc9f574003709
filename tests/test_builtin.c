/* Tests of the builtin topology families: rank counts, link counts and
 * degrees, each derived by hand in the comments (not read off the code). */
#include <string.h>

#include "check_main.h"
#include "topology.h"

/* Time limits stretch under valgrind (make valgrind sets VALGRIND=1). */
static double slow_factor(void)
{
    const char *v = getenv("VALGRIND");
    return v && strcmp(v, "1") == 0 ? 50.0 : 1.0;
}

static cs_topology *build(const char *spec)
{
    cs_topology *t = NULL;
    cs_error err = { 0 };
    int rc = topology_builtin(spec, &t, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", spec, err.message);
    ck_assert(t->finalized);
    return t;
}

static int out_degree(const cs_topology *t, int r) { return t->out_begin[r + 1] - t->out_begin[r]; }
static int in_degree(const cs_topology *t, int r) { return t->in_begin[r + 1] - t->in_begin[r]; }

/* Checks ranks, directed links, and that every rank has out-degree = in-degree = deg
 * (deg < 0: skip). */
static cs_topology *check_counts(const char *spec, int ranks, int links, int deg)
{
    cs_topology *t = build(spec);
    ck_assert_msg(t->ranks == ranks, "%s: ranks %d, expected %d", spec, t->ranks, ranks);
    ck_assert_msg(t->nlinks == links, "%s: links %d, expected %d", spec, t->nlinks, links);
    if (deg >= 0)
        for (int r = 0; r < t->ranks; r++) {
            ck_assert_msg(out_degree(t, r) == deg, "%s: rank %d out-degree %d", spec, r,
                          out_degree(t, r));
            ck_assert_int_eq(in_degree(t, r), deg);
        }
    return t;
}

START_TEST(table_lists_every_family_and_examples_build)
{
    int n = 0;
    const cs_builtin_info *list = topology_builtin_list(&n);
    ck_assert_int_eq(n, 19);
    const char *want[] = { "ring", "line", "star", "fc", "mesh2d", "mesh3d", "torus2d", "torus3d",
                           "hypercube", "dgx1", "dgx2", "ndv2", "dgxa100", "dgxh100", "dragonfly",
                           "switch2d", "rfs3d", "amd8", "amd8fc" };
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(list[i].family, want[i]);
        ck_assert(strncmp(list[i].syntax, list[i].family, strlen(list[i].family)) == 0);
        ck_assert(strlen(list[i].description) > 10);
        cs_topology *t = build(list[i].example);
        ck_assert_str_eq(t->name, list[i].example);
        topology_free(t);
    }
}
END_TEST

START_TEST(synthetic_families)
{
    cs_topology *t;
    /* ring:N: N bidirectional neighbour pairs = 2N directed links, degree 2 */
    t = check_counts("ring:8", 8, 16, 2);
    ck_assert_int_ge(topology_find_link(t, 7, 0), 0);
    ck_assert(t->links[0].gbps == 50.0 && t->links[0].alpha_us == 0.5);
    topology_free(t);
    /* ring:2 is a single pair */
    topology_free(check_counts("ring:2", 2, 2, 1));
    /* line:N: N-1 pairs; ends degree 1, middle 2 */
    t = check_counts("line:5", 5, 8, -1);
    ck_assert_int_eq(out_degree(t, 0), 1);
    ck_assert_int_eq(out_degree(t, 2), 2);
    ck_assert_int_eq(topology_find_link(t, 4, 0), -1);
    topology_free(t);
    /* star:N: hub 0 with N-1 spokes */
    t = check_counts("star:6", 6, 10, -1);
    ck_assert_int_eq(out_degree(t, 0), 5);
    ck_assert_int_eq(out_degree(t, 3), 1);
    topology_free(t);
    /* fc:N: N(N-1) */
    topology_free(check_counts("fc:8", 8, 56, 7));
    /* mesh2d:AxB: (A-1)B + A(B-1) pairs: 3x4 -> 8 + 9 = 17 pairs, 34 links.
     * rank = x + 3y: corner 0 degree 2, edge 1 (x=1,y=0) degree 3, inner 4 (1,1) degree 4 */
    t = check_counts("mesh2d:3x4", 12, 34, -1);
    ck_assert_int_eq(out_degree(t, 0), 2);
    ck_assert_int_eq(out_degree(t, 1), 3);
    ck_assert_int_eq(out_degree(t, 4), 4);
    ck_assert_int_ge(topology_find_link(t, 1, 4), 0);
    topology_free(t);
    /* mesh3d:2x3x4: 1*3*4 + 2*2*4 + 2*3*3 = 12 + 16 + 18 = 46 pairs */
    topology_free(check_counts("mesh3d:2x3x4", 24, 92, -1));
    /* torus2d:4x4: 2 pairs per rank, 4 links out, 64 links */
    topology_free(check_counts("torus2d:4x4", 16, 64, 4));
    /* torus2d:2x4: the side of 2 has one pair per row (4), the side of 4 wraps (2*4 = 8):
     * 12 pairs, 24 links, degree 3 */
    topology_free(check_counts("torus2d:2x4", 8, 24, 3));
    /* torus3d:3x3x3: 3 pairs per rank: 81 pairs, degree 6 */
    topology_free(check_counts("torus3d:3x3x3", 27, 162, 6));
    /* hypercube:4: 16 ranks, degree 4, 64 links; 5 = 0101 links to 4, 7, 1, 13 */
    t = check_counts("hypercube:4", 16, 64, 4);
    ck_assert_int_ge(topology_find_link(t, 5, 13), 0);
    ck_assert_int_eq(topology_find_link(t, 5, 6), -1);
    topology_free(t);
    /* parameters */
    t = build("torus2d:4x4,gbps=16,alpha=0.15");
    for (int i = 0; i < t->nlinks; i++)
        ck_assert(t->links[i].gbps == 16.0 && t->links[i].alpha_us == 0.15);
    topology_free(t);
}
END_TEST

START_TEST(machine_models)
{
    cs_topology *t;
    /* dgx1: 32 directed links, 4 neighbours, 6 NVLinks each, 25 GB/s, 0.7 us */
    t = check_counts("dgx1", 8, 32, 4);
    for (int r = 0; r < 8; r++)
        ck_assert_int_eq(topology_egress_lanes(t, r), 6);
    ck_assert_int_eq(t->links[topology_find_link(t, 0, 1)].lanes, 2);
    ck_assert_int_eq(t->links[topology_find_link(t, 0, 2)].lanes, 1);
    ck_assert(t->links[0].gbps == 25.0 && t->links[0].alpha_us == 0.7);
    ck_assert_int_eq(t->ngroups, 2);
    topology_free(t);
    /* dgx2: one switch of 16: 16*15 derived links, 2 sets per rank, 1 lane in/out */
    t = check_counts("dgx2", 16, 240, 15);
    ck_assert_int_eq(t->nswitches, 1);
    ck_assert_int_eq(t->nshared, 32);
    for (int r = 0; r < 16; r++) {
        ck_assert_int_eq(topology_egress_lanes(t, r), 1);
        ck_assert_int_eq(topology_ingress_lanes(t, r), 1);
    }
    topology_free(t);
    /* ndv2:2: 2 x 32 NVLink links + a switch over {0,1,8,9}: 4*3 ordered pairs
     * minus the 4 joined by NVLink (0<->1, 8<->9) = 8 derived; 4 ranks x 2 sets */
    t = check_counts("ndv2:2", 16, 72, -1);
    ck_assert_int_eq(t->nshared, 8);
    ck_assert_int_eq(t->ngroups, 2);
    ck_assert_int_eq(t->group_of[9], 1);
    int k = topology_find_link(t, 0, 8);
    ck_assert_int_ge(k, 0);
    ck_assert_int_eq(t->links[k].switch_id, 0);
    ck_assert(t->links[k].gbps == 12.5);
    ck_assert_int_eq(topology_find_link(t, 2, 10), -1);
    /* rank 0: 6 NVLink lanes + 1 through the switch */
    ck_assert_int_eq(topology_egress_lanes(t, 0), 7);
    topology_free(t);
    /* ndv2:1 is a DGX-1 with one group */
    t = check_counts("ndv2:1", 8, 32, 4);
    ck_assert_int_eq(t->nswitches, 0);
    topology_free(t);
    /* dgxa100: one NVSwitch of 8 (as dgx2): 8*7 derived links of 300 GB/s (12
     * NVLinks x 25 GB/s per direction), 2 sets per rank, 1 lane in and out */
    t = check_counts("dgxa100", 8, 56, 7);
    ck_assert_int_eq(t->nswitches, 1);
    ck_assert_int_eq(t->nshared, 16);
    ck_assert_int_eq(topology_egress_lanes(t, 3), 1);
    ck_assert_int_eq(topology_ingress_lanes(t, 3), 1);
    ck_assert(t->links[topology_find_link(t, 3, 4)].gbps == 300.0);
    ck_assert(topology_egress_bw(t, 3) == 300e3);
    topology_free(t);
    /* dgxa100:2: 2 NVSwitches (2 x 56) + 8 rails x 2*1 derived = 128 links; a
     * rail of 2 gives each port a single derived link, so no set for it: 2 x 8
     * x 2 = 32 sets, all from the NVSwitches.  A GPU sends 1 chunk per round
     * into its NVSwitch and 1 through its NIC (25 GB/s, HDR 200 Gb/s). */
    t = check_counts("dgxa100:2", 16, 128, 8);
    ck_assert_int_eq(t->nswitches, 10);
    ck_assert_int_eq(t->nshared, 32);
    ck_assert_int_eq(topology_egress_lanes(t, 0), 2);
    ck_assert(topology_egress_bw(t, 0) == 325e3);
    ck_assert(t->links[topology_find_link(t, 0, 8)].gbps == 25.0);
    ck_assert_int_eq(topology_find_link(t, 0, 9), -1);   /* other rail: via the NVSwitch */
    ck_assert_int_eq(t->ngroups, 2);
    topology_free(t);
    /* dgxh100:4: 4 x 56 + 8 rails x 4*3 = 224 + 96 = 320; 450 GB/s ports (18 x
     * 25), 50 GB/s NICs (NDR 400 Gb/s); 1 lane into each switch: 2 in all */
    t = check_counts("dgxh100:4", 32, 320, 10);
    ck_assert_int_eq(t->links[topology_find_link(t, 0, 1)].lanes, 1);
    ck_assert(t->links[topology_find_link(t, 0, 1)].gbps == 450.0);
    ck_assert(t->links[topology_find_link(t, 0, 8)].gbps == 50.0);
    ck_assert_int_eq(topology_egress_lanes(t, 0), 2);
    ck_assert(topology_egress_bw(t, 0) == 500e3);
    topology_free(t);
    /* dragonfly:4x5: 4 groups x 5*4 local + 4*3 global = 80 + 12 = 92.  Group 0
     * meets groups 1, 2, 3 on routers 0, 1, 2: ranks 0..2 have degree 5, 3..4 have 4. */
    t = check_counts("dragonfly:4x5", 20, 92, -1);
    ck_assert_int_eq(out_degree(t, 0), 5);
    ck_assert_int_eq(out_degree(t, 2), 5);
    ck_assert_int_eq(out_degree(t, 3), 4);
    ck_assert_int_eq(t->ngroups, 4);
    /* first global link: group 0 router 0 <-> group 1 router 0 (rank 5), 200 GB/s */
    k = topology_find_link(t, 0, 5);
    ck_assert_int_ge(k, 0);
    ck_assert(t->links[k].gbps == 200.0);
    ck_assert(t->links[topology_find_link(t, 0, 1)].gbps == 400.0);
    topology_free(t);
    /* switch2d:8x4: 4 up switches of 8 (56 each) + 8 out switches of 4 (12 each)
     * = 224 + 96 = 320 links; every rank is on 2 switches: 4 sets; degree 7 + 3 */
    t = check_counts("switch2d:8x4", 32, 320, 10);
    ck_assert_int_eq(t->nswitches, 12);
    ck_assert_int_eq(t->nshared, 128);
    ck_assert_int_eq(t->ngroups, 4);
    ck_assert_int_eq(topology_egress_lanes(t, 0), 2);
    ck_assert(t->links[topology_find_link(t, 0, 1)].gbps == 300.0);
    ck_assert(t->links[topology_find_link(t, 0, 8)].gbps == 25.0);
    topology_free(t);
    /* rfs3d:2x4x8: ring of 2 (1 pair per (b,c): 32 pairs), FC of 4 (6 pairs per
     * (a,c): 96 pairs), 8 switches of 8 (56 each): 64 + 192 + 448 = 704;
     * degree 1 + 3 + 7 = 11 */
    t = check_counts("rfs3d:2x4x8", 64, 704, 11);
    ck_assert_int_eq(t->nswitches, 8);
    ck_assert_int_eq(t->ngroups, 8);
    ck_assert(t->links[topology_find_link(t, 0, 1)].gbps == 200.0);
    ck_assert(t->links[topology_find_link(t, 0, 2)].gbps == 100.0);
    ck_assert(t->links[topology_find_link(t, 0, 8)].gbps == 50.0);
    topology_free(t);
    /* amd8: one ring of 8; GPUs 1 and 5 bridge islands {0,2,3,5} and {1,4,6,7} */
    t = check_counts("amd8", 8, 16, 2);
    ck_assert_int_ge(topology_find_link(t, 1, 0), 0);
    ck_assert_int_ge(topology_find_link(t, 5, 3), 0);
    ck_assert_int_ge(topology_find_link(t, 5, 4), 0);
    ck_assert_int_ge(topology_find_link(t, 1, 7), 0);
    topology_free(t);
    /* amd8fc: all pairs, 5 or 6 lanes; rank 0: 5+6+6+5+6+5+5 = 38 */
    t = check_counts("amd8fc", 8, 56, 7);
    ck_assert_int_eq(topology_egress_lanes(t, 0), 38);
    for (int i = 0; i < t->nlinks; i++)
        ck_assert(t->links[i].lanes == 5 || t->links[i].lanes == 6);
    topology_free(t);
}
END_TEST

START_TEST(bad_names_and_parameters)
{
    const char *bad[] = { "", "torus", "ring", "ring:", "ring:0", "ring:1", "ring:x", "ring:8x8",
                          "mesh2d:4", "mesh2d:4x", "mesh3d:2x2", "hypercube:0", "hypercube:40",
                          "dgx1:2", "ring:8,speed=3", "ring:8,gbps=-1", "ring:8,gbps=",
                          "dgx1,gbps=3", "ring:-3", "ring:8,alpha", "fc:99999999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cs_topology *t = NULL;
        cs_error err = { 0 };
        int rc = topology_builtin(bad[i], &t, &err);
        ck_assert_msg(rc == CS_EINVAL, "%s: rc %d", bad[i], rc);
        ck_assert_ptr_null(t);
        ck_assert_str_eq(err.field, "topology");
        ck_assert_msg(strstr(err.message, "torus2d:AxB"), "%s: message lists forms: %s", bad[i],
                      err.message);
    }
    cs_topology *t = NULL;
    cs_error err = { 0 };
    ck_assert_int_eq(topology_builtin("mesh2d:2000x2000", &t, &err), CS_ELIMIT);
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(mesh_200x200_under_a_second)
{
    double t0 = cs_now();
    cs_topology *t = build("mesh2d:200x200");
    double secs = cs_now() - t0;
    ck_assert_int_eq(t->ranks, 40000);
    ck_assert_msg(secs < 1.0 * slow_factor(), "took %.3f s", secs);
    topology_free(t);
}
END_TEST


/* The closed-form diameters regular builtins record must match all-pairs BFS. */
START_TEST(recorded_diameter_matches_bfs)
{
    const char *specs[] = { "ring:9", "ring:2", "line:6", "mesh2d:5x7", "torus2d:4x5",
                            "torus3d:3x4x2", "mesh3d:2x3x4", "hypercube:4" };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        cs_topology *t = NULL;
        cs_error err;
        ck_assert_int_eq(topology_builtin(specs[i], &t, &err), CS_OK);
        int recorded = -1;
        ck_assert_int_eq(topology_diameter(t, &recorded, &err), CS_OK);
        int *dist = malloc(sizeof(int) * (size_t)t->ranks);
        int bfs_max = 0;
        for (int s = 0; s < t->ranks; s++) {
            ck_assert_int_eq(topology_shortest_hops(t, s, dist, &err), CS_OK);
            for (int r = 0; r < t->ranks; r++)
                if (dist[r] > bfs_max)
                    bfs_max = dist[r];
        }
        free(dist);
        ck_assert_msg(recorded == bfs_max, "%s: recorded diameter %d, BFS %d", specs[i],
                      recorded, bfs_max);
        topology_free(t);
    }
}
END_TEST

static Suite *builtin_suite(void)
{
    Suite *s = suite_create("builtin");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, table_lists_every_family_and_examples_build);
    tcase_add_test(tc, synthetic_families);
    tcase_add_test(tc, machine_models);
    tcase_add_test(tc, bad_names_and_parameters);
    tcase_add_test(tc, mesh_200x200_under_a_second);
    tcase_add_test(tc, recorded_diameter_matches_bfs);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(builtin_suite)
