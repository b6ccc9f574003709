/* Tests of the baselines: the full matrix (every builtin topology x every
 * collective x roots x every applicable baseline verifies), the structure of
 * the classic algorithms where it can be derived by hand, routing properties,
 * non-power-of-two rank counts, errors, and scale. */
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "check_main.h"
#include "verify.h"
#include "topology_testutil.h"

/* One small instance per builtin family.  Every family of
 * topology_builtin_list must appear here (checked), so a new family is not
 * silently left out of the matrix. */
static const char *matrix_specs[][2] = {
    {"ring", "ring:8"},           {"line", "line:5"},           {"star", "star:6"},
    {"fc", "fc:8"},               {"mesh2d", "mesh2d:3x4"},     {"mesh3d", "mesh3d:2x2x3"},
    {"torus2d", "torus2d:4x4"},   {"torus3d", "torus3d:2x3x2"}, {"hypercube", "hypercube:3"},
    {"dgx1", "dgx1"},             {"dgx2", "dgx2"},             {"ndv2", "ndv2:2"},
    {"dgxa100", "dgxa100:2"},     {"dgxh100", "dgxh100"},       {"dragonfly", "dragonfly:3x4"},
    {"switch2d", "switch2d:4x2"}, {"rfs3d", "rfs3d:2x2x4"},     {"amd8", "amd8"},
    {"amd8fc", "amd8fc"},
};
#define NSPECS ((int)(sizeof matrix_specs / sizeof matrix_specs[0]))

static int try_gen(const char *name, const cs_topology *t, cs_coll_kind kind, int root,
                   int chunks, cs_algorithm **a, cs_error *err)
{
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? root : -1);
    cs_baseline_options opt = {chunks};
    int rc = baseline_generate(name, t, &c, &opt, a, err);
    collective_free(&c);
    return rc;
}

static cs_algorithm *gen(const char *name, const cs_topology *t, cs_coll_kind kind, int root,
                         int chunks)
{
    cs_algorithm *a = NULL;
    cs_error err;
    int rc = try_gen(name, t, kind, root, chunks, &a, &err);
    ck_assert_msg(rc == CS_OK, "%s %s root %d on %s: %s", name, collective_kind_name(kind), root,
                  t->name, err.message);
    return a;
}

/* Recursive-doubling allreduce exchanges between r xor 2^k (after folding
 * excess even ranks r < 2e into r+1); it needs those links.  Derived here
 * from the definition, independently of the generator. */
static bool rd_allreduce_applicable(const cs_topology *t)
{
    int p = t->ranks, m = 0;
    while ((1 << (m + 1)) <= p)
        m++;
    int pp = 1 << m, e = p - pp;
    for (int q = 0; q < e; q++)
        if (topology_find_link(t, 2 * q, 2 * q + 1) < 0 ||
            topology_find_link(t, 2 * q + 1, 2 * q) < 0)
            return false;
    for (int k = 0; k < m; k++)
        for (int q = 0; q < pp; q++) {
            int a = q < e ? 2 * q + 1 : q + e;
            int z = q ^ (1 << k);
            int b = z < e ? 2 * z + 1 : z + e;
            if (topology_find_link(t, a, b) < 0)
                return false;
        }
    return true;
}

/* The tree property routing guarantees: no (chunk, rank) is received twice
 * (copies), and no rank sends one chunk's partial twice (reduce-only
 * algorithms).  Checked with a sort, independent of the builder. */
static int cmp_pair(const void *a, const void *b)
{
    const long *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

static void check_single_receive(const cs_algorithm *a)
{
    long n = 0;
    long *pairs = malloc((size_t)(a->nsends + 1) * 2 * sizeof *pairs);
    for (long i = 0; i < a->nsends; i++) {
        if (algorithm_send_op(a, i) != CS_OP_COPY)
            continue;
        pairs[2 * n] = algorithm_send_chunk(a, i);
        pairs[2 * n + 1] = algorithm_send_dst(a, i);
        n++;
    }
    qsort(pairs, (size_t)n, 2 * sizeof *pairs, cmp_pair);
    for (long i = 1; i < n; i++)
        ck_assert_msg(pairs[2 * i] != pairs[2 * i - 2] || pairs[2 * i + 1] != pairs[2 * i - 1],
                      "%s %s on %s: chunk %ld received twice by rank %ld", a->method,
                      collective_kind_name(a->collective.kind), a->topology, pairs[2 * i],
                      pairs[2 * i + 1]);
    free(pairs);
}

START_TEST(matrix_every_builtin_collective_baseline_verifies)
{
    int nfam = 0;
    const cs_builtin_info *fams = topology_builtin_list(&nfam);
    for (int f = 0; f < nfam; f++) {
        bool listed = false;
        for (int i = 0; i < NSPECS; i++)
            listed |= strcmp(matrix_specs[i][0], fams[f].family) == 0;
        ck_assert_msg(listed, "builtin family %s missing from the baseline matrix",
                      fams[f].family);
    }
    int nb = 0;
    const cs_baseline_info *bl = baseline_list(&nb);
    ck_assert_int_eq(nb, 9);
    long generated = 0;
    for (int i = 0; i < NSPECS; i++) {
        cs_topology *t = test_topology(matrix_specs[i][1]);
        for (int kind = 0; kind < CS_COLL_CUSTOM; kind++) {
            bool rooted = collective_kind_is_rooted(kind);
            int roots[2] = {0, t->ranks - 1};
            for (int ri = 0; ri < (rooted ? 2 : 1); ri++) {
                bool any = false;
                for (int b = 0; b < nb; b++) {
                    if (!baseline_supports(bl[b].name, kind))
                        continue;
                    any = true;
                    cs_algorithm *a = NULL;
                    cs_error err;
                    int rc = try_gen(bl[b].name, t, kind, roots[ri], 0, &a, &err);
                    if (strcmp(bl[b].name, "recursive-doubling") == 0 &&
                        kind == CS_COLL_ALLREDUCE && !rd_allreduce_applicable(t)) {
                        ck_assert_int_eq(rc, CS_EUNSUPPORTED);
                        ck_assert_ptr_nonnull(strstr(err.message, "direct link"));
                        continue;
                    }
                    ck_assert_msg(rc == CS_OK, "%s %s root %d on %s: %s", bl[b].name,
                                  collective_kind_name(kind), roots[ri], t->name, err.message);
                    cs_verify_report rep;
                    ck_assert_int_eq(algorithm_verify_report(t, a, &rep, NULL), CS_OK);
                    ck_assert_msg(rep.ok, "%s %s on %s: %s", bl[b].name,
                                  collective_kind_name(kind), t->name, rep.reasons[0]);
                    ck_assert_str_eq(a->method, bl[b].name);
                    ck_assert_int_eq(a->ranks, t->ranks);
                    ck_assert_int_eq(a->collective.kind, kind);
                    if (rooted)
                        ck_assert_int_eq(a->collective.root, roots[ri]);
                    if (kind != CS_COLL_ALLREDUCE)
                        check_single_receive(a);
                    algorithm_free(a);
                    generated++;
                }
                ck_assert_msg(any, "no baseline for %s", collective_kind_name(kind));
            }
        }
        topology_free(t);
    }
    ck_assert_int_gt(generated, 19 * 30);
}
END_TEST

START_TEST(non_power_of_two_recursive_and_bine)
{
    const char *specs[] = {"fc:3", "fc:5", "fc:6", "fc:7", "ring:5", "ring:6", "line:7",
                           "mesh2d:3x3", "torus2d:3x5", "star:5"};
    const char *names[] = {"recursive-doubling", "recursive-halving", "bine-butterfly",
                           "bine-tree", "binomial-tree", "double-binary-tree"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        cs_topology *t = test_topology(specs[i]);
        for (size_t n = 0; n < sizeof names / sizeof *names; n++)
            for (int kind = 0; kind < CS_COLL_CUSTOM; kind++) {
                if (!baseline_supports(names[n], kind))
                    continue;
                cs_algorithm *a = NULL;
                cs_error err;
                int rc = try_gen(names[n], t, kind, t->ranks / 2, 0, &a, &err);
                if (rc == CS_EUNSUPPORTED && strcmp(names[n], "recursive-doubling") == 0 &&
                    !rd_allreduce_applicable(t))
                    continue;
                ck_assert_msg(rc == CS_OK, "%s %s on %s: %s", names[n],
                              collective_kind_name(kind), t->name, err.message);
                ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
                algorithm_free(a);
            }
        topology_free(t);
    }
}
END_TEST

/* Ring allgather on ring:8: P-1 steps, every rank forwards to its successor,
 * each step every link carries one chunk: 8 * 7 sends, rounds = steps. */
START_TEST(ring_allgather_on_ring_is_the_textbook_ring)
{
    cs_topology *t = test_topology("ring:8");
    cs_algorithm *a = gen("ring", t, CS_COLL_ALLGATHER, 0, 0);
    ck_assert_int_eq(a->chunks, 1);
    ck_assert_int_eq(a->steps, 7);
    ck_assert_int_eq(a->rounds, 7);
    ck_assert_int_eq(a->nsends, 56);
    for (long i = 0; i < a->nsends; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        ck_assert_int_eq(s->dst, (s->src + 1) % 8);
        /* chunk g leaves g at step 0 and is at g + s after step s - 1 */
        ck_assert_int_eq(s->src, (int)((s->chunk + s->step) % 8));
    }
    algorithm_free(a);
    /* allreduce = RS + AG: 2(P-1) steps, P chunks, bandwidth 2(P-1)/P */
    a = gen("ring", t, CS_COLL_ALLREDUCE, 0, 0);
    ck_assert_int_eq(a->chunks, 8);
    ck_assert_int_eq(a->steps, 14);
    ck_assert_int_eq(a->rounds, 14);
    long reduces = 0;
    for (long i = 0; i < a->nsends; i++) {
        ck_assert_int_eq(algorithm_send_dst(a, i), (algorithm_send_src(a, i) + 1) % 8);
        reduces += algorithm_send_op(a, i) == CS_OP_REDUCE;
        ck_assert_int_eq(algorithm_send_op(a, i) == CS_OP_REDUCE, algorithm_send_step(a, i) < 7);
    }
    ck_assert_int_eq(reduces, 56);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* Routing: on line:4 the ring's closing send 3 -> 0 has no link and goes over
 * 3-2-1-0; the forwarders already hold those chunks or receive them once. */
START_TEST(routing_over_missing_links)
{
    cs_topology *t = test_topology("line:4");
    cs_algorithm *a = gen("ring", t, CS_COLL_ALLGATHER, 0, 0);
    for (long i = 0; i < a->nsends; i++)
        ck_assert_int_eq(abs(algorithm_send_src(a, i) - algorithm_send_dst(a, i)), 1);
    /* every rank receives each of the 3 other chunks exactly once */
    ck_assert_int_eq(a->nsends, 12);
    check_single_receive(a);
    algorithm_free(a);
    /* reduce-scatter on a line: only reduces, each partial sent once */
    a = gen("ring", t, CS_COLL_REDUCESCATTER, 0, 0);
    ck_assert_int_eq(a->nsends, 12);
    for (long i = 0; i < a->nsends; i++) {
        ck_assert_int_eq(algorithm_send_op(a, i), CS_OP_REDUCE);
        ck_assert_int_eq(abs(algorithm_send_src(a, i) - algorithm_send_dst(a, i)), 1);
    }
    algorithm_free(a);
    /* a reduce to rank 3 over the star's hub keeps the hub's contribution */
    cs_topology *s = test_topology("star:5");
    a = gen("binomial-tree", s, CS_COLL_REDUCE, 3, 0);
    ck_assert_int_eq(algorithm_verify(s, a, NULL), CS_OK);
    algorithm_free(a);
    topology_free(s);
    topology_free(t);
}
END_TEST

START_TEST(direct_alltoall_and_binomial_shapes)
{
    cs_topology *t = test_topology("fc:4");
    cs_algorithm *a = gen("direct", t, CS_COLL_ALLTOALL, 0, 0);
    ck_assert_int_eq(a->steps, 1);
    ck_assert_int_eq(a->nsends, 12);
    for (long i = 0; i < a->nsends; i++) {
        ck_assert_int_eq(algorithm_send_src(a, i), (int)(algorithm_send_chunk(a, i) % 4));
        ck_assert_int_eq(algorithm_send_dst(a, i), (int)((algorithm_send_chunk(a, i) / 4) % 4));
    }
    algorithm_free(a);
    topology_free(t);
    /* binomial broadcast on fc:8 from root 2: 3 steps, 7 sends, the root
     * first sends to virtual rank 4 = rank 6 */
    t = test_topology("fc:8");
    a = gen("binomial-tree", t, CS_COLL_BROADCAST, 2, 0);
    ck_assert_int_eq(a->steps, 3);
    ck_assert_int_eq(a->nsends, 7);
    for (long i = 0; i < a->nsends; i++)
        if (algorithm_send_step(a, i) == 0) {
            ck_assert_int_eq(algorithm_send_src(a, i), 2);
            ck_assert_int_eq(algorithm_send_dst(a, i), 6);
        }
    algorithm_free(a);
    /* recursive doubling allgather on fc:8: step k partner r ^ 2^k */
    a = gen("recursive-doubling", t, CS_COLL_ALLGATHER, 0, 0);
    ck_assert_int_eq(a->steps, 3);
    for (long i = 0; i < a->nsends; i++)
        ck_assert_int_eq(algorithm_send_dst(a, i), algorithm_send_src(a, i) ^ (1 << algorithm_send_step(a, i)));
    algorithm_free(a);
    /* recursive halving reduce-scatter: distance halving, partner r ^ 4 first */
    a = gen("recursive-halving", t, CS_COLL_REDUCESCATTER, 0, 0);
    ck_assert_int_eq(a->steps, 3);
    for (long i = 0; i < a->nsends; i++)
        ck_assert_int_eq(algorithm_send_dst(a, i), algorithm_send_src(a, i) ^ (4 >> algorithm_send_step(a, i)));
    ck_assert_int_eq(a->nsends, 4 * 8 + 2 * 8 + 8);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* NCCL's double binary tree on 8 ranks: tree 0 is 0->4, 4->{2,6}, 2->{1,3},
 * 6->{5,7}; tree 1 its mirror.  Every rank is a leaf in at most one tree. */
START_TEST(double_binary_tree_shape)
{
    cs_topology *t = test_topology("fc:8");
    cs_algorithm *a = gen("double-binary-tree", t, CS_COLL_BROADCAST, 0, 2);
    int sends_from[2][8] = {{0}};
    for (long i = 0; i < a->nsends; i++)
        sends_from[algorithm_send_chunk(a, i)][algorithm_send_src(a, i)]++;
    /* chunk 0 (tree 0) inner nodes 0,4,2,6; chunk 1 (tree 1, mirrored, fed
     * by 0 -> 7) inner nodes 0,7,3,5,1 */
    const int inner0[8] = {1, 0, 1, 0, 1, 0, 1, 0};
    const int inner1[8] = {1, 1, 0, 1, 0, 1, 0, 1};
    for (int r = 0; r < 8; r++) {
        ck_assert_int_eq(sends_from[0][r] > 0, inner0[r]);
        ck_assert_int_eq(sends_from[1][r] > 0, inner1[r]);
        ck_assert(sends_from[0][r] > 0 || sends_from[1][r] > 0);
    }
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* DGX-1 has edge-disjoint NVLink rings: the rings baseline uses several and
 * needs no routing (every send on a link, one hop per ring step). */
START_TEST(rings_on_dgx1_use_several_rings)
{
    cs_topology *t = test_topology("dgx1");
    cs_algorithm *a = gen("rings", t, CS_COLL_ALLGATHER, 0, 0);
    /* 6 NVLinks per GPU bound the rings by 6, and DGX-1's links decompose
     * into 6 directed Hamiltonian rings (NCCL's) */
    ck_assert_int_eq(a->chunks, 6);
    ck_assert_int_eq(a->steps, 7);
    ck_assert_int_eq(a->nsends, 8L * 7 * a->chunks);
    /* with C = rings, every step moves one chunk per ring per rank: the
     * rounds equal the steps when the rings are link-disjoint by lanes */
    ck_assert_int_eq(a->rounds, 7);
    algorithm_free(a);
    a = gen("rings", t, CS_COLL_ALLREDUCE, 0, 0);
    ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(errors_are_clear)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(try_gen("no-such", t, CS_COLL_ALLGATHER, 0, 0, &a, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "no-such"));
    ck_assert_ptr_null(a);
    ck_assert_int_eq(try_gen("recursive-doubling", t, CS_COLL_BROADCAST, 0, 0, &a, &err),
                     CS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "broadcast"));
    ck_assert_int_eq(try_gen("ring", t, CS_COLL_ALLREDUCE, 0, 6, &a, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "chunks");
    ck_assert_int_eq(try_gen("ring", t, CS_COLL_BROADCAST, 9, 0, &a, &err), CS_EINVAL);
    ck_assert_int_eq(try_gen("ring", t, CS_COLL_BROADCAST, 0, -1, &a, &err), CS_EINVAL);
    /* recursive-doubling allreduce on a ring of 8 needs 0 <-> 2 */
    cs_topology *r8 = test_topology("ring:8");
    ck_assert_int_eq(try_gen("recursive-doubling", r8, CS_COLL_ALLREDUCE, 0, 0, &a, &err),
                     CS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "recursive-halving"));
    topology_free(r8);
    /* 1024 ranks x 4096 chunks cannot fit: refused at once, naming chunks */
    cs_topology *big = test_topology("torus2d:32x32");
    double t0 = cs_now();
    ck_assert_int_eq(try_gen("ring", big, CS_COLL_ALLGATHER, 0, 4096, &a, &err), CS_ELIMIT);
    ck_assert_str_eq(err.field, "chunks");
    ck_assert_int_eq(try_gen("direct", big, CS_COLL_ALLTOALL, 0, 0, &a, &err), CS_ELIMIT);
    ck_assert(cs_now() - t0 < 2.0);
    topology_free(big);
    cs_collective custom;
    memset(&custom, 0, sizeof custom);
    custom.kind = CS_COLL_CUSTOM;
    ck_assert(!baseline_supports("direct", CS_COLL_CUSTOM));
    ck_assert(!baseline_exists("nope"));
    ck_assert(baseline_exists("bine-tree"));
    topology_free(t);
}
END_TEST

START_TEST(chunks_option_scales_the_schedule)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = gen("ring", t, CS_COLL_BROADCAST, 1, 6);
    ck_assert_int_eq(a->chunks, 6);
    ck_assert_int_eq(a->global_chunks, 6);
    /* pipelined: 6 chunks over 3 hops = 6 + 3 - 1 steps */
    ck_assert_int_eq(a->steps, 8);
    algorithm_free(a);
    a = gen("ring", t, CS_COLL_ALLREDUCE, 0, 8);
    ck_assert_int_eq(a->chunks, 8);
    ck_assert_int_eq(a->nsends, 2L * 3 * 8);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* 1024 ranks: ring allgather and Bine reduce-scatter on a 32x32 torus
 * (16x16 under valgrind, which tests/run.sh signals with VALGRIND=1). */
START_TEST(large_mesh_in_reasonable_time)
{
    const char *vg = getenv("VALGRIND");
    bool slow = vg && strcmp(vg, "1") == 0;
    cs_topology *t = test_topology(slow ? "torus2d:16x16" : "torus2d:32x32");
    long p = t->ranks;
    double t0 = cs_now();
    cs_algorithm *a = gen("ring", t, CS_COLL_ALLGATHER, 0, 0);
    /* every rank receives every other rank's chunk exactly once */
    ck_assert_int_eq(a->nsends, p * (p - 1));
    algorithm_free(a);
    a = gen("binomial-tree", t, CS_COLL_BROADCAST, 17, 0);
    ck_assert_int_eq(a->nsends, p - 1);
    algorithm_free(a);
    a = gen("bine-butterfly", t, CS_COLL_REDUCESCATTER, 0, 0);
    ck_assert_int_eq(a->nsends, p * (p - 1));
    algorithm_free(a);
    double secs = cs_now() - t0;
    if (!slow)
        ck_assert_msg(secs < 30, "took %.1f s", secs);
    topology_free(t);
}
END_TEST

static Suite *baseline_suite(void)
{
    Suite *s = suite_create("baseline");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matrix_every_builtin_collective_baseline_verifies);
    tcase_add_test(tc, non_power_of_two_recursive_and_bine);
    tcase_add_test(tc, ring_allgather_on_ring_is_the_textbook_ring);
    tcase_add_test(tc, routing_over_missing_links);
    tcase_add_test(tc, direct_alltoall_and_binomial_shapes);
    tcase_add_test(tc, double_binary_tree_shape);
    tcase_add_test(tc, rings_on_dgx1_use_several_rings);
    tcase_add_test(tc, errors_are_clear);
    tcase_add_test(tc, chunks_option_scales_the_schedule);
    suite_add_tcase(s, tc);
    /* separate case so the rest can run alone (CK_RUN_CASE=core, valgrind) */
    TCase *scale = tcase_create("scale");
    tcase_set_timeout(scale, 120);
    tcase_add_test(scale, large_mesh_in_reasonable_time);
    suite_add_tcase(s, scale);
    return s;
}

CS_CHECK_MAIN(baseline_suite)
