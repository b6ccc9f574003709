/*
 * Tests of iso.h: renumbered copies of a request (shuffled ranks, shuffled
 * node order) get the same iso key and a labelling that is an isomorphism;
 * requests that differ in anything but numbering (a link's lanes, a
 * switch's bandwidth, an alpha, the root, the method, an option) get
 * different keys; and a schedule relabelled through the keys passes the
 * verifier on the other numbering (and the unrelabelled one does not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "cluster_testutil.h"
#include "iso.h"
#include "synthesize.h"
#include "verify.h"

#include "../clients/slurm/cluster.h"

static unsigned rng_state = 12345;
static int rnd(int n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (int)((rng_state >> 8) % (unsigned)n);
}

static void shuffle(int *v, int n)
{
    for (int k = n - 1; k > 0; k--) {
        int j = rnd(k + 1), x = v[k];
        v[k] = v[j];
        v[j] = x;
    }
}

static cs_synth_request *request(json_t *topology, json_t *collective, const char *method,
                                 json_t *options)
{
    json_t *doc = json_pack("{s:o, s:o}", "topology", topology, "collective", collective);
    if (method)
        json_object_set_new(doc, "method", json_string(method));
    if (options)
        json_object_set_new(doc, "options", options);
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.max_links = 0;
    cs_synth_request *r = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_from_json(doc, &lim, &r, &err);
    json_decref(doc);
    ck_assert_msg(rc == CS_OK, "request: [%s] %s", err.field, err.message);
    return r;
}

static json_t *kind(const char *k) { return json_pack("{s:s}", "kind", k); }

/* A map that renumbers the cluster: groups in shuffled order, ranks shuffled
 * inside each (all ranks shuffled when there are no groups). */
static int *renumbering(const cs_topology *t)
{
    int *map = malloc(sizeof *map * (size_t)t->ranks);
    if (t->ngroups == 0) {
        for (int r = 0; r < t->ranks; r++)
            map[r] = r;
        shuffle(map, t->ranks);
        return map;
    }
    int *order = malloc(sizeof *order * (size_t)t->ngroups);
    for (int q = 0; q < t->ngroups; q++)
        order[q] = q;
    shuffle(order, t->ngroups);
    int next = 0;
    for (int i = 0; i < t->ngroups; i++) {
        const cs_group *g = &t->groups[order[i]];
        int *p = malloc(sizeof *p * (size_t)g->nranks);
        for (int k = 0; k < g->nranks; k++)
            p[k] = k;
        shuffle(p, g->nranks);
        for (int k = 0; k < g->nranks; k++)
            map[g->ranks[k]] = next + p[k];
        next += g->nranks;
        free(p);
    }
    free(order);
    return map;
}

/* The request r with ranks renamed by map (the root too). */
static cs_synth_request *renamed(const cs_synth_request *r, const int *map, const char *method)
{
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(iso_relabel_topology(r->topology, map, "other-allocation", &t, &err), CS_OK);
    json_t *c = json_pack("{s:s}", "kind", collective_kind_name(r->collective.kind));
    if (collective_kind_is_rooted(r->collective.kind))
        json_object_set_new(c, "root", json_integer(map[r->collective.root]));
    cs_synth_request *out = request(topology_to_json(t), c, method ? method : r->method,
                                    json_deep_copy(json_object_get(r->canonical, "options")));
    topology_free(t);
    return out;
}

static void form(const cs_synth_request *r, const cs_iso_options *opt, cs_iso_form *f)
{
    cs_error err;
    cs_error_clear(&err);
    ck_assert_msg(iso_canonicalize(r, opt, f, &err) == CS_OK, "%s", err.message);
}

/* map (a's rank -> b's rank) carries every physical link, switch and group
 * of a onto b's, attributes equal: it is an isomorphism. */
static void assert_isomorphism(const cs_topology *a, const cs_topology *b, const int *map)
{
    ck_assert_int_eq(a->ranks, b->ranks);
    int na = 0, nb = 0;
    for (int i = 0; i < a->nlinks; i++) {
        const cs_link *l = &a->links[i];
        if (l->switch_id >= 0)
            continue;
        na++;
        int j = topology_find_link(b, map[l->src], map[l->dst]);
        ck_assert_msg(j >= 0 && b->links[j].switch_id < 0, "link %d->%d has no image", l->src,
                      l->dst);
        ck_assert_int_eq(b->links[j].lanes, l->lanes);
        ck_assert(b->links[j].gbps == l->gbps && b->links[j].alpha_us == l->alpha_us);
    }
    for (int i = 0; i < b->nlinks; i++)
        nb += b->links[i].switch_id < 0;
    ck_assert_int_eq(na, nb);
    ck_assert_int_eq(a->nswitches, b->nswitches);
    for (int s = 0; s < a->nswitches; s++) {
        /* some switch of b holds exactly the images of s's ranks */
        bool found = false;
        for (int s2 = 0; s2 < b->nswitches && !found; s2++) {
            const cs_switch *x = &a->switches[s], *y = &b->switches[s2];
            if (x->nranks != y->nranks || x->gbps != y->gbps || x->alpha_us != y->alpha_us)
                continue;
            int hit = 0;
            for (int k = 0; k < x->nranks; k++)
                for (int m = 0; m < y->nranks; m++)
                    hit += y->ranks[m] == map[x->ranks[k]];
            found = hit == x->nranks;
        }
        ck_assert_msg(found, "switch %s has no image", a->switches[s].name);
    }
    for (int q = 0; q < a->ngroups; q++) {
        int g0 = b->group_of[map[a->groups[q].ranks[0]]];
        for (int k = 0; k < a->groups[q].nranks; k++)
            ck_assert_int_eq(b->group_of[map[a->groups[q].ranks[k]]], g0);
    }
}

static void check_renumbered_same_key(json_t *topology, const char *coll, const char *expect_scheme)
{
    cs_synth_request *a = request(topology, kind(coll), NULL, NULL);
    int *map = renumbering(a->topology);
    cs_synth_request *b = renamed(a, map, NULL);
    ck_assert_str_ne(a->key, b->key); /* today's key sees the numbering */
    cs_iso_form fa, fb;
    form(a, NULL, &fa);
    form(b, NULL, &fb);
    ck_assert_str_eq(fa.scheme, expect_scheme);
    ck_assert_msg(strcmp(fa.key, fb.key) == 0, "%s: renumbered copy got another iso key",
                  a->topology->name);
    int *m = malloc(sizeof *m * (size_t)a->topology->ranks);
    cs_error err;
    ck_assert_int_eq(iso_compose(&fa, &fb, m, &err), CS_OK);
    assert_isomorphism(a->topology, b->topology, m);
    /* bliss on the whole graph agrees that they are isomorphic */
    cs_iso_options direct = {.two_level_min_ranks = -1};
    cs_iso_form da, db;
    form(a, &direct, &da);
    form(b, &direct, &db);
    ck_assert_str_eq(da.scheme, "direct");
    ck_assert_str_eq(da.key, db.key);
    iso_form_clear(&da);
    iso_form_clear(&db);
    free(m);
    free(map);
    iso_form_clear(&fa);
    iso_form_clear(&fb);
    synth_request_free(a);
    synth_request_free(b);
}

START_TEST(renumbered_builtins_share_the_key)
{
    /* dgx2: 16 ranks on one switch and nothing else, all twins (the
     * labelling reduces them to one vertex); dgxh100:2 has none */
    const char *specs[] = {"dgx1", "torus2d:4x4", "hypercube:4", "line:8", "ring:9", "amd8fc",
                           "ndv2:2", "dgx2", "dgxh100:2", "star:12", "fc:8", "mesh2d:3x5"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        for (int rep = 0; rep < 3; rep++)
            check_renumbered_same_key(json_string(specs[i]), "allgather", "direct");
}
END_TEST

/* The Slurm hook's topology for n DGX-1 nodes (NICs 0,2,4,6) on a fabric. */
static json_t *hook_cluster(int n, const char *fabric, double gbps)
{
    char msg[256];
    json_t *topo = cluster_hook_dgx1("lab", n, 1, fabric, gbps, NULL, msg, sizeof msg);
    ck_assert_msg(topo != NULL, "%s", msg);
    return topo;
}

/* Two node types: n DGX-1 nodes and n 4-rank rings (NIC 0), interleaved in
 * the node list, on a fabric switch. */
static json_t *mixed_cluster(int n)
{
    json_t *cluster = json_pack(
        "{s:s, s:{s:{s:s, s:[iiii]}, s:{s:s, s:[i]}}, s:[{s:s, s:s}, {s:s, s:s}],"
        " s:{s:s, s:f, s:f}}",
        "name", "mixed", "node_types", "dgx1", "topology", "dgx1", "nics", 0, 2, 4, 6, "quad",
        "topology", "ring:4", "nics", 0, "nodes", "names", "gpu*", "type", "dgx1", "names",
        "edge*", "type", "quad", "fabric", "kind", "switch", "gbps", 12.5, "alpha_us", 3.0);
    char **names = malloc(sizeof *names * 2 * (size_t)n);
    for (int k = 0; k < 2 * n; k++) {
        names[k] = malloc(16);
        snprintf(names[k], 16, "%s%03d", k % 2 ? "edge" : "gpu", k);
    }
    json_t *topo = NULL, *expanded = NULL;
    char msg[256];
    ck_assert_msg(cluster_build_topology(cluster, names, 2 * n, cluster_fetch_builtin_local, NULL, &topo,
                                         &expanded, msg, sizeof msg) == 0, "%s", msg);
    hostlist_free(names, 2 * n);
    json_decref(cluster);
    json_decref(expanded);
    return topo;
}

START_TEST(renumbered_clusters_share_the_key)
{
    for (int rep = 0; rep < 3; rep++) {
        char *doc = cluster_topology_json(16, 8, 450.0, 50.0);
        check_renumbered_same_key(json_loads(doc, 0, NULL), "allreduce", "two-level");
        free(doc);
        check_renumbered_same_key(hook_cluster(16, "switch", 12.5), "allgather", "two-level");
        check_renumbered_same_key(hook_cluster(12, "ring", 12.5), "allgather", "two-level");
        check_renumbered_same_key(json_string("dgxh100:16"), "reducescatter", "two-level");
        check_renumbered_same_key(mixed_cluster(8), "allgather", "two-level");
        check_renumbered_same_key(json_string("ndv2:16"), "allreduce", "two-level");
    }
}
END_TEST

static void key_of(json_t *topology, json_t *coll, const char *method, json_t *options,
                   char out[65])
{
    cs_synth_request *r = request(topology, coll, method, options);
    cs_iso_form f;
    form(r, NULL, &f);
    snprintf(out, 65, "%s", f.key);
    iso_form_clear(&f);
    synth_request_free(r);
}

/* dgx1 with the lanes of link 0<->1 set to `lanes` (it has 2). */
static json_t *dgx1_with_lanes(int lanes)
{
    json_t *d = cluster_fetch_builtin_local(NULL, "dgx1", NULL, 0);
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(d, "links"), i, l)
        if (json_integer_value(json_object_get(l, "src")) == 0 &&
            json_integer_value(json_object_get(l, "dst")) == 1)
            json_object_set_new(l, "lanes", json_integer(lanes));
    return d;
}

START_TEST(different_requests_get_different_keys)
{
    char k1[65], k2[65];
    key_of(dgx1_with_lanes(2), kind("allgather"), NULL, NULL, k1);
    key_of(json_string("dgx1"), kind("allgather"), NULL, NULL, k2);
    ck_assert_str_eq(k1, k2); /* the builtin is what it expands to */
    key_of(dgx1_with_lanes(1), kind("allgather"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);
    key_of(dgx1_with_lanes(3), kind("allgather"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);

    /* the cluster with slower rails, or a slower node switch */
    char *a = cluster_topology_json(16, 8, 450.0, 50.0);
    char *b = cluster_topology_json(16, 8, 450.0, 25.0);
    char *c = cluster_topology_json(16, 8, 300.0, 50.0);
    key_of(json_loads(a, 0, NULL), kind("allreduce"), NULL, NULL, k1);
    key_of(json_loads(b, 0, NULL), kind("allreduce"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);
    key_of(json_loads(c, 0, NULL), kind("allreduce"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);
    /* one node of sixteen with a slower switch is another cluster too */
    json_t *d = json_loads(a, 0, NULL);
    json_object_set_new(json_array_get(json_object_get(d, "switches"), 5), "gbps",
                        json_real(400.0));
    key_of(d, kind("allreduce"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);
    free(a);
    free(b);
    free(c);
    /* the fabric's alpha */
    key_of(hook_cluster(8, "switch", 12.5), kind("allgather"), NULL, NULL, k1);
    key_of(hook_cluster(8, "switch", 25.0), kind("allgather"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);

    /* collective, method and options */
    key_of(json_string("ring:8"), kind("allgather"), NULL, NULL, k1);
    key_of(json_string("ring:8"), kind("allreduce"), NULL, NULL, k2);
    ck_assert_str_ne(k1, k2);
    key_of(json_string("ring:8"), kind("allgather"), "tacos", NULL, k2);
    ck_assert_str_ne(k1, k2);
    key_of(json_string("ring:8"), kind("allgather"), "tacos", json_pack("{s:i}", "chunks", 2),
           k1);
    ck_assert_str_ne(k1, k2);
}
END_TEST

START_TEST(roots_follow_the_symmetry_of_the_topology)
{
    char k0[65], k[65];
    /* a ring is vertex-transitive: every root is the same request */
    key_of(json_string("ring:8"), json_pack("{s:s, s:i}", "kind", "broadcast", "root", 0), NULL,
           NULL, k0);
    key_of(json_string("ring:8"), json_pack("{s:s, s:i}", "kind", "broadcast", "root", 5), NULL,
           NULL, k);
    ck_assert_str_eq(k0, k);
    /* a line is not: its ends are alike (reflection), its middle is not */
    key_of(json_string("line:8"), json_pack("{s:s, s:i}", "kind", "broadcast", "root", 0), NULL,
           NULL, k0);
    key_of(json_string("line:8"), json_pack("{s:s, s:i}", "kind", "broadcast", "root", 7), NULL,
           NULL, k);
    ck_assert_str_eq(k0, k);
    key_of(json_string("line:8"), json_pack("{s:s, s:i}", "kind", "broadcast", "root", 3), NULL,
           NULL, k);
    ck_assert_str_ne(k0, k);
    /* custom collectives: a chunk from rank 0 to rank 2 on line:4 is the
     * chunk from rank 3 to rank 1, not the one from rank 1 to rank 3 */
    json_t *c1 = json_pack("{s:s, s:i, s:[[ii]], s:[[ii]]}", "kind", "custom", "global_chunks",
                           1, "pre", 0, 0, "post", 0, 2);
    json_t *c2 = json_pack("{s:s, s:i, s:[[ii]], s:[[ii]]}", "kind", "custom", "global_chunks",
                           1, "pre", 0, 3, "post", 0, 1);
    json_t *c3 = json_pack("{s:s, s:i, s:[[ii]], s:[[ii]]}", "kind", "custom", "global_chunks",
                           1, "pre", 0, 1, "post", 0, 3);
    key_of(json_string("line:4"), c1, "tacos", NULL, k0);
    key_of(json_string("line:4"), c2, "tacos", NULL, k);
    ck_assert_str_eq(k0, k);
    key_of(json_string("line:4"), c3, "tacos", NULL, k);
    ck_assert_str_ne(k0, k);
}
END_TEST

/* Synthesizes a, relabels its result to b through the iso keys, verifies
 * on b: valid; the schedule as it was (not relabelled) is not. */
static void check_relabelled_valid(cs_synth_request *a, cs_synth_request *b, bool raw_invalid)
{
    cs_iso_form fa, fb;
    form(a, NULL, &fa);
    form(b, NULL, &fb);
    ck_assert_str_eq(fa.key, fb.key);
    int *map = malloc(sizeof *map * (size_t)a->topology->ranks);
    cs_error err;
    cs_error_clear(&err);
    ck_assert_int_eq(iso_compose(&fa, &fb, map, &err), CS_OK);
    cs_result *res = NULL, *rel = NULL;
    ck_assert_msg(synth_run(a, NULL, NULL, &res, &err) == CS_OK, "synth: %s", err.message);
    ck_assert_int_gt(res->nalgs, 0);
    ck_assert_int_eq(iso_relabel_result(res, map, &b->collective, b->topology->name, &rel, &err),
                     CS_OK);
    ck_assert_int_eq(rel->nalgs, res->nalgs);
    bool some_raw_invalid = false;
    for (int i = 0; i < rel->nalgs; i++) {
        ck_assert_int_eq(rel->algs[i]->nsends, res->algs[i]->nsends);
        ck_assert_int_eq(rel->algs[i]->steps, res->algs[i]->steps);
        ck_assert_msg(algorithm_verify(b->topology, rel->algs[i], &err) == CS_OK,
                      "%s %s: relabelled schedule invalid: %s", b->topology->name,
                      collective_kind_name(b->collective.kind), err.message);
        /* the original on the other numbering, with the other root */
        cs_algorithm *raw = NULL;
        ck_assert_int_eq(algorithm_clone(res->algs[i], &raw, &err), CS_OK);
        collective_free(&raw->collective);
        ck_assert_int_eq(collective_copy(&raw->collective, &b->collective, &err), CS_OK);
        some_raw_invalid |= algorithm_verify(b->topology, raw, &err) != CS_OK;
        algorithm_free(raw);
    }
    if (raw_invalid)
        ck_assert_msg(some_raw_invalid, "the renumbering did not matter: a weak test");
    result_free(res);
    result_free(rel);
    free(map);
    iso_form_clear(&fa);
    iso_form_clear(&fb);
}

START_TEST(relabelled_schedules_stay_valid)
{
    static const struct {
        const char *topo, *coll, *method;
        int root;
    } cases[] = {
        {"dgx1", "allgather", "tacos", -1},     {"dgx1", "reducescatter", "tacos", -1},
        {"dgx1", "allreduce", "tacos", -1},     {"dgx1", "alltoall", "direct", -1},
        {"dgx1", "broadcast", "binomial-tree", 2}, {"dgx1", "gather", "binomial-tree", 5},
        {"dgx1", "scatter", "binomial-tree", 1}, {"torus2d:4x4", "allgather", "tacos", -1},
        {"dgxh100:4", "allreduce", "tacos", -1}, {"dgx1", "reduce", "binomial-tree", 6},
        {"torus2d:4x4", "alltoall", "direct", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *c = kind(cases[i].coll);
        if (cases[i].root >= 0)
            json_object_set_new(c, "root", json_integer(cases[i].root));
        cs_synth_request *a = request(json_string(cases[i].topo), c, cases[i].method, NULL);
        int *map = renumbering(a->topology);
        cs_synth_request *b = renamed(a, map, NULL);
        check_relabelled_valid(a, b, strcmp(cases[i].topo, "dgxh100:4") != 0);
        free(map);
        synth_request_free(a);
        synth_request_free(b);
    }
    /* a custom collective: chunk numbers stay, their ranks move */
    json_t *cc = json_pack("{s:s, s:i, s:[[ii][ii][ii]], s:[[ii][ii][ii][ii]]}", "kind",
                           "custom", "global_chunks", 3, "pre", 0, 0, 1, 3, 2, 5, "post", 0, 7,
                           1, 4, 2, 0, 2, 6);
    cs_synth_request *ca = request(json_string("dgx1"), cc, "tacos", NULL);
    int cmap[8] = {5, 2, 7, 0, 3, 6, 1, 4};
    cs_topology *ct = NULL;
    cs_error cerr;
    ck_assert_int_eq(iso_relabel_topology(ca->topology, cmap, "dgx1-other", &ct, &cerr), CS_OK);
    json_t *cc2 = json_pack("{s:s, s:i, s:[[ii][ii][ii]], s:[[ii][ii][ii][ii]]}", "kind",
                            "custom", "global_chunks", 3, "pre", 0, cmap[0], 1, cmap[3], 2,
                            cmap[5], "post", 0, cmap[7], 1, cmap[4], 2, cmap[0], 2, cmap[6]);
    cs_synth_request *cb = request(topology_to_json(ct), cc2, "tacos", NULL);
    topology_free(ct);
    check_relabelled_valid(ca, cb, true);
    synth_request_free(ca);
    synth_request_free(cb);

    /* the hook's 16-node cluster, renumbered */
    cs_synth_request *a = request(hook_cluster(16, "switch", 12.5), kind("allgather"), "tacos",
                                  NULL);
    int *map = renumbering(a->topology);
    cs_synth_request *b = renamed(a, map, NULL);
    check_relabelled_valid(a, b, true);
    free(map);
    synth_request_free(a);
    synth_request_free(b);
}
END_TEST

/* Random clusters: G nodes of one or two types (a cycle with random chords),
 * joined by a ring between their first ranks plus random links and a
 * switch (mode 0), by a twisted one-way fabric from every rank (mode 1), or
 * from every other rank (mode 2, so orbits inside nodes matter).  A random
 * renumbering of all ranks gets the same key under both schemes; raising
 * one link's lanes changes it. */
static cs_topology *random_cluster(int trial, int lanes_bump)
{
    rng_state = 1000u + (unsigned)trial * 7919u;
    int G = 8 + rnd(12), s = 3 + rnd(5), P = G * s, mode = trial % 3, tw = rnd(s);
    int types = 1 + rnd(2);
    cs_topology *t = topology_new("random-cluster", P);
    cs_error err;
    int chords[2][64][2], nch[2] = {0, 0};
    for (int ty = 0; ty < types; ty++)
        for (int a = 0; a < s; a++)
            for (int b = a + 2; b < s; b++)
                if (!(a == 0 && b == s - 1) && nch[ty] < 64 && mode == 0 && rnd(3) == 0) {
                    chords[ty][nch[ty]][0] = a;
                    chords[ty][nch[ty]++][1] = b;
                }
    int bumped = 0;
    for (int q = 0; q < G; q++) {
        int ty = q % types, g[16];
        for (int k = 0; k < s; k++) {
            int lanes = 1 + (k % 2) + (lanes_bump && q == G / 2 && k == 0 && !bumped++);
            ck_assert_int_eq(topology_add_link(t, q * s + k, q * s + (k + 1) % s, lanes, 50.0,
                                               0.5, true, &err), CS_OK);
        }
        for (int c = 0; c < nch[ty]; c++)
            ck_assert_int_eq(topology_add_link(t, q * s + chords[ty][c][0],
                                               q * s + chords[ty][c][1], 1, 25.0, 0.5, true,
                                               &err), CS_OK);
        for (int k = 0; k < s; k++)
            g[k] = q * s + k;
        ck_assert_int_eq(topology_add_group(t, g, s, &err), CS_OK);
    }
    if (mode == 0) {
        for (int q = 0; q < G; q++)
            ck_assert_int_eq(topology_add_link(t, q * s, ((q + 1) % G) * s, 1, 12.5, 2.0, true,
                                               &err), CS_OK);
        int extra = rnd(G);
        for (int e = 0; e < extra; e++) {
            int a = rnd(P), b = rnd(P);
            if (a / s != b / s && topology_find_link(t, a, b) < 0 && topology_find_link(t, b, a) < 0)
                topology_add_link(t, a, b, 1, 25.0, 1.0, rnd(2), &err);
        }
        int sw[64], m = 0;
        for (int q = 0; q < G && m < 64; q++)
            if (rnd(2))
                sw[m++] = q * s + s - 1;
        if (m >= 2)
            ck_assert_int_eq(topology_add_switch(t, "extra", sw, m, 10.0, 1.0, &err), CS_OK);
    } else {
        for (int q = 0; q < G; q++)
            for (int i = 0; i < s; i++)
                if (mode == 1 || i % 2 == 0)
                    ck_assert_int_eq(topology_add_link(t, q * s + i, ((q + 1) % G) * s +
                                                       (i + tw) % s, 1, 12.5, 2.0, false, &err),
                                     CS_OK);
    }
    if (topology_finalize(t, &err) != CS_OK) {
        topology_free(t);
        return NULL; /* not strongly connected: skipped */
    }
    return t;
}

START_TEST(random_clusters_renumbered_share_the_key)
{
    int tried = 0;
    for (int trial = 0; trial < 45; trial++) {
        cs_topology *t = random_cluster(trial, 0);
        if (!t)
            continue;
        tried++;
        cs_topology *bumped = random_cluster(trial, 1);
        int *map = malloc(sizeof *map * (size_t)t->ranks);
        for (int r = 0; r < t->ranks; r++)
            map[r] = r;
        shuffle(map, t->ranks);
        cs_topology *u = NULL;
        cs_error err;
        ck_assert_int_eq(iso_relabel_topology(t, map, "renumbered", &u, &err), CS_OK);
        cs_synth_request *a = request(topology_to_json(t), kind("allgather"), "tacos", NULL);
        cs_synth_request *b = request(topology_to_json(u), kind("allgather"), "tacos", NULL);
        cs_synth_request *c = request(topology_to_json(bumped), kind("allgather"), "tacos", NULL);
        cs_iso_options schemes[2] = {{.two_level_min_ranks = 1}, {.two_level_min_ranks = -1}};
        for (int k = 0; k < 2; k++) {
            cs_iso_form fa, fb, fc;
            form(a, &schemes[k], &fa);
            form(b, &schemes[k], &fb);
            form(c, &schemes[k], &fc);
            ck_assert_str_eq(fa.scheme, k ? "direct" : "two-level");
            ck_assert_msg(!strcmp(fa.key, fb.key), "trial %d, %s: renumbered copy missed", trial,
                          fa.scheme);
            ck_assert_msg(strcmp(fa.key, fc.key) != 0, "trial %d: lanes ignored", trial);
            int *m = malloc(sizeof *m * (size_t)t->ranks);
            ck_assert_int_eq(iso_compose(&fa, &fb, m, &err), CS_OK);
            assert_isomorphism(a->topology, b->topology, m);
            free(m);
            iso_form_clear(&fa);
            iso_form_clear(&fb);
            iso_form_clear(&fc);
        }
        synth_request_free(a);
        synth_request_free(b);
        synth_request_free(c);
        topology_free(t);
        topology_free(u);
        topology_free(bumped);
        free(map);
    }
    ck_assert_int_ge(tried, 20);
}
END_TEST

/* A cluster renumbered inside its nodes, renumbered again by the topology's
 * canonical labelling: every node is a block of consecutive ranks and every
 * node has the same links in its local numbering, and the same local ranks
 * on the fabric, as a method that recognizes node types needs. */
START_TEST(canonical_numbering_makes_nodes_alike)
{
    cs_topology *t = NULL, *u = NULL, *v = NULL;
    cs_error err;
    cs_topology_parse_options po = {0};
    json_t *doc = hook_cluster(16, "switch", 12.5);
    ck_assert_int_eq(topology_from_json(doc, &po, &t, &err), CS_OK);
    json_decref(doc);
    int *map = renumbering(t);
    ck_assert_int_eq(iso_relabel_topology(t, map, "renumbered", &u, &err), CS_OK);
    int *canon = malloc(sizeof *canon * (size_t)u->ranks);
    char scheme[16];
    ck_assert_int_eq(iso_topology_labelling(u, NULL, canon, scheme, &err), CS_OK);
    ck_assert_str_eq(scheme, "two-level");
    ck_assert_int_eq(iso_relabel_topology(u, canon, "canonical", &v, &err), CS_OK);
    bool scrambled = false;
    int n = 8, G = v->ngroups;
    ck_assert_int_eq(G, 16);
    for (int q = 0; q < G; q++) {
        int lo = v->groups[q].ranks[0];
        for (int k = 0; k < n; k++)
            ck_assert_int_eq(v->group_of[lo - lo % n + k], q); /* a block */
    }
    /* local link signature of each node: lanes of (i -> j) for i, j < 8 */
    int sig[16][8][8];
    bool fabric[16][8];
    memset(sig, 0, sizeof sig);
    memset(fabric, 0, sizeof fabric);
    for (int i = 0; i < v->nlinks; i++) {
        const cs_link *l = &v->links[i];
        if (l->switch_id < 0 && l->src / n == l->dst / n)
            sig[l->src / n][l->src % n][l->dst % n] = l->lanes;
    }
    for (int s = 0; s < v->nswitches; s++)
        for (int k = 0; k < v->switches[s].nranks; k++)
            fabric[v->switches[s].ranks[k] / n][v->switches[s].ranks[k] % n] = true;
    for (int q = 1; q < G; q++) {
        ck_assert_msg(!memcmp(sig[q], sig[0], sizeof sig[0]), "node %d numbered differently", q);
        ck_assert(!memcmp(fabric[q], fabric[0], sizeof fabric[0]));
    }
    /* while in u, numbered as the renumbering left them, they were not */
    memset(sig, 0, sizeof sig);
    for (int i = 0; i < u->nlinks; i++) {
        const cs_link *l = &u->links[i];
        if (l->switch_id < 0 && l->src / n == l->dst / n)
            sig[l->src / n][l->src % n][l->dst % n] = l->lanes;
    }
    for (int q = 1; q < G && !scrambled; q++)
        scrambled = memcmp(sig[q], sig[0], sizeof sig[0]) != 0;
    ck_assert(scrambled);
    free(canon);
    free(map);
    topology_free(t);
    topology_free(u);
    topology_free(v);
}
END_TEST

START_TEST(labellings_round_trip_as_text)
{
    int v[5] = {3, 0, 4, 1, 2};
    char *text = iso_labelling_to_text(v, 5);
    ck_assert_str_eq(text, "3,0,4,1,2");
    int *back = NULL;
    cs_error err;
    ck_assert_int_eq(iso_labelling_from_text(text, 5, &back, &err), CS_OK);
    ck_assert_mem_eq(back, v, sizeof v);
    free(back);
    free(text);
    ck_assert_int_eq(iso_labelling_from_text("3,0,4,1,1", 5, &back, &err), CS_EINVAL);
    ck_assert_int_eq(iso_labelling_from_text("3,0,4,1", 5, &back, &err), CS_EINVAL);
    ck_assert_int_eq(iso_labelling_from_text("3,0,4,1,2,5", 5, &back, &err), CS_EINVAL);
    ck_assert_int_eq(iso_labelling_from_text("3,0,x,1,2", 5, &back, &err), CS_EINVAL);
    ck_assert_ptr_null(back);
}
END_TEST

START_TEST(chunks_follow_their_owners)
{
    int map[4] = {2, 0, 3, 1};
    /* allgather: chunk g of rank g%4 */
    ck_assert_int_eq(iso_map_chunk(CS_COLL_ALLGATHER, 4, map, 1), 0);
    ck_assert_int_eq(iso_map_chunk(CS_COLL_ALLGATHER, 4, map, 4 + 2), 4 + 3);
    /* alltoall: g = c*16 + dst*4 + src */
    ck_assert_int_eq(iso_map_chunk(CS_COLL_ALLTOALL, 4, map, 16 + 1 * 4 + 3), 16 + 0 * 4 + 1);
    ck_assert_int_eq(iso_map_chunk(CS_COLL_ALLREDUCE, 4, map, 3), 3);
}
END_TEST

static Suite *iso_suite(void)
{
    Suite *s = suite_create("iso");
    TCase *tc = tcase_create("iso");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, renumbered_builtins_share_the_key);
    tcase_add_test(tc, renumbered_clusters_share_the_key);
    tcase_add_test(tc, different_requests_get_different_keys);
    tcase_add_test(tc, roots_follow_the_symmetry_of_the_topology);
    tcase_add_test(tc, relabelled_schedules_stay_valid);
    tcase_add_test(tc, random_clusters_renumbered_share_the_key);
    tcase_add_test(tc, canonical_numbering_makes_nodes_alike);
    tcase_add_test(tc, labellings_round_trip_as_text);
    tcase_add_test(tc, chunks_follow_their_owners);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(iso_suite)
