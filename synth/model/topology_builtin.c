/*
 * topology_builtin.c - the named topology families ("ring:8", "dgx1",
 * "torus2d:8x8,gbps=25") of topology_builtin().
 *
 * Every family is a small generator over the public construction API, so a
 * builtin is validated and finalized exactly like a user's document.  Specs
 * have the form
 *
 *     family[:D1[xD2[xD3]]][,gbps=G][,alpha=A][,copy=1]
 *
 * The dimensions are the family's parameters; gbps/alpha override the link
 * bandwidth and latency of the synthetic families (defaults 50 GB/s and
 * 0.5 us, the TACOS defaults).  Machine models (dgx1, amd8, ...) carry the
 * numbers of the papers in topologies.md and accept alpha only.  copy=1
 * makes every switch of the family copy-capable (topology.h; "dgx2,copy=1"
 * is an NVSwitch with NVLS multicast); a family without switches refuses it.
 *
 * Links within a dimension are generated once per neighbour pair (a ring of
 * 2 gets one bidirectional link, not two), so no generator produces
 * duplicates and finalize never has to deduplicate.
 */
#include "topology.h"
#include "topology_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Builtins can be bigger than untrusted documents (benchmarks at scale). */
#define BUILTIN_MAX_RANKS (1 << 20)
/* The finalize limit on links. */
#define BUILTIN_MAX_LINKS CS_TOPOLOGY_MAX_LINKS

typedef struct {
    int ndims;
    long dims[3];
    double gbps;      /* valid when has_gbps */
    double alpha;     /* valid when has_alpha */
    bool has_gbps, has_alpha;
} spec_params;

typedef int (*builtin_fn)(const char *name, const spec_params *p, cs_topology **out,
                          cs_error *err);


/* ---- helpers -------------------------------------------------------------------- */

static int fail_build(cs_topology *t, int rc)
{
    topology_free(t);
    return rc;
}

static int finish(cs_topology *t, cs_topology **out, cs_error *err)
{
    int rc = topology_finalize(t, err);
    if (rc)
        return fail_build(t, rc);
    *out = t;
    return CS_OK;
}

static cs_topology *new_topology(const char *name, long ranks, cs_error *err)
{
    cs_topology *t = topology_new(name, (int)ranks);
    if (!t)
        cs_error_set(err, CS_ENOMEM, "topology", "out of memory");
    return t;
}

static double gbps_or(const spec_params *p, double d) { return p->has_gbps ? p->gbps : d; }
static double alpha_or(const spec_params *p, double d) { return p->has_alpha ? p->alpha : d; }

/* Links every rank to its +1 neighbour along one dimension of a grid; wrap
 * adds the link from the last to the first (only when the size is > 2). */
static int grid_dimension(cs_topology *t, const long *dims, int dim, bool wrap, int lanes,
                          double gbps, double alpha, cs_error *err)
{
    long stride = 1;
    for (int d = 0; d < dim; d++)
        stride *= dims[d];
    long k = dims[dim];
    for (long r = 0; r < t->ranks; r++) {
        long coord = (r / stride) % k;
        long next;
        if (coord + 1 < k)
            next = r + stride;
        else if (wrap && k > 2)
            next = r - (k - 1) * stride;
        else
            continue;
        int rc = topology_add_link(t, (int)r, (int)next, lanes, gbps, alpha, true, err);
        if (rc)
            return rc;
    }
    return CS_OK;
}

static int grid(const char *name, const spec_params *p, bool wrap, cs_topology **out,
                cs_error *err)
{
    long n = 1;
    for (int d = 0; d < p->ndims; d++)
        n *= p->dims[d];
    cs_topology *t = new_topology(name, n, err);
    if (!t)
        return CS_ENOMEM;
    int diameter = 0;
    for (int d = 0; d < p->ndims; d++) {
        int rc = grid_dimension(t, p->dims, d, wrap, 1, gbps_or(p, 50.0), alpha_or(p, 0.5),
                                err);
        if (rc)
            return fail_build(t, rc);
        diameter += (int)(wrap ? p->dims[d] / 2 : p->dims[d] - 1);
    }
    int rc = finish(t, out, err);
    if (rc == CS_OK)
        (*out)->diameter_cache = diameter;
    return rc;
}

static int add_fc(cs_topology *t, const int *ranks, int n, int lanes, double gbps, double alpha,
                  cs_error *err)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int rc = topology_add_link(t, ranks[i], ranks[j], lanes, gbps, alpha, true, err);
            if (rc)
                return rc;
        }
    return CS_OK;
}

/* Groups of `size` consecutive ranks. */
static int consecutive_groups(cs_topology *t, int size, cs_error *err)
{
    int *r = malloc(sizeof(int) * (size_t)size);
    if (!r)
        return cs_error_set(err, CS_ENOMEM, "groups", "out of memory");
    for (int g = 0; g < t->ranks / size; g++) {
        for (int i = 0; i < size; i++)
            r[i] = g * size + i;
        int rc = topology_add_group(t, r, size, err);
        if (rc) {
            free(r);
            return rc;
        }
    }
    free(r);
    return CS_OK;
}

/* ---- synthetic families --------------------------------------------------------- */

static int build_ring(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    return grid(name, p, true, out, err);
}

static int build_line(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    return grid(name, p, false, out, err);
}

static int build_torus(const char *name, const spec_params *p, cs_topology **out,
                       cs_error *err)
{
    return grid(name, p, true, out, err);
}

static int build_mesh(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    return grid(name, p, false, out, err);
}

static int build_star(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    cs_topology *t = new_topology(name, p->dims[0], err);
    if (!t)
        return CS_ENOMEM;
    for (int r = 1; r < t->ranks; r++) {
        int rc = topology_add_link(t, 0, r, 1, gbps_or(p, 50.0), alpha_or(p, 0.5), true, err);
        if (rc)
            return fail_build(t, rc);
    }
    return finish(t, out, err);
}

static int build_fc(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    cs_topology *t = new_topology(name, p->dims[0], err);
    if (!t)
        return CS_ENOMEM;
    for (int a = 0; a < t->ranks; a++)
        for (int b = a + 1; b < t->ranks; b++) {
            int rc = topology_add_link(t, a, b, 1, gbps_or(p, 50.0), alpha_or(p, 0.5), true, err);
            if (rc)
                return fail_build(t, rc);
        }
    return finish(t, out, err);
}

static int build_hypercube(const char *name, const spec_params *p, cs_topology **out,
                           cs_error *err)
{
    int d = (int)p->dims[0];
    cs_topology *t = new_topology(name, 1L << d, err);
    if (!t)
        return CS_ENOMEM;
    for (int r = 0; r < t->ranks; r++)
        for (int b = 0; b < d; b++)
            if (!(r & (1 << b))) {
                int rc = topology_add_link(t, r, r | (1 << b), 1, gbps_or(p, 50.0),
                                           alpha_or(p, 0.5), true, err);
                if (rc)
                    return fail_build(t, rc);
            }
    int rc = finish(t, out, err);
    if (rc == CS_OK)
        (*out)->diameter_cache = d;
    return rc;
}

/* ---- machine models -------------------------------------------------------------- */

/* DGX-1 (../shared/reference/dgx1.json): NVLinks per directed pair, as lanes. */
static const int dgx1_links[][3] = {
    { 0, 1, 2 }, { 0, 2, 1 }, { 0, 3, 1 }, { 0, 4, 2 }, { 1, 0, 2 }, { 1, 2, 1 }, { 1, 3, 2 },
    { 1, 5, 1 }, { 2, 0, 1 }, { 2, 1, 1 }, { 2, 3, 2 }, { 2, 6, 2 }, { 3, 0, 1 }, { 3, 1, 2 },
    { 3, 2, 2 }, { 3, 7, 1 }, { 4, 0, 2 }, { 4, 5, 2 }, { 4, 6, 1 }, { 4, 7, 1 }, { 5, 1, 1 },
    { 5, 4, 2 }, { 5, 6, 1 }, { 5, 7, 2 }, { 6, 2, 2 }, { 6, 4, 1 }, { 6, 5, 1 }, { 6, 7, 2 },
    { 7, 3, 1 }, { 7, 4, 1 }, { 7, 5, 2 }, { 7, 6, 2 },
};

#define DGX1_GBPS 25.0
#define DGX1_ALPHA 0.7

static int add_dgx1_server(cs_topology *t, int base, double alpha, cs_error *err)
{
    for (size_t i = 0; i < sizeof dgx1_links / sizeof dgx1_links[0]; i++) {
        int rc = topology_add_link(t, base + dgx1_links[i][0], base + dgx1_links[i][1],
                                   dgx1_links[i][2], DGX1_GBPS, alpha, false, err);
        if (rc)
            return rc;
    }
    return CS_OK;
}

static int build_dgx1(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    cs_topology *t = new_topology(name, 8, err);
    if (!t)
        return CS_ENOMEM;
    int rc = add_dgx1_server(t, 0, alpha_or(p, DGX1_ALPHA), err);
    if (rc == CS_OK)
        rc = consecutive_groups(t, 4, err);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* NDv2: DGX-1-like servers; GPUs 0 and 1 of each reach one scale-out switch at
 * 12.5 GB/s (TE-CCL Figure 14: TACCL wires GPU 0 of a chassis to GPU 1 of the
 * others).  Groups are servers. */
static int build_ndv2(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    int servers = p->ndims ? (int)p->dims[0] : 1;
    cs_topology *t = new_topology(name, 8L * servers, err);
    if (!t)
        return CS_ENOMEM;
    double alpha = alpha_or(p, DGX1_ALPHA);
    int rc = CS_OK;
    for (int s = 0; s < servers && rc == CS_OK; s++)
        rc = add_dgx1_server(t, 8 * s, alpha, err);
    if (rc == CS_OK && servers > 1) {
        int *sw = malloc(sizeof(int) * 2 * (size_t)servers);
        if (!sw)
            return fail_build(t, cs_error_set(err, CS_ENOMEM, "topology", "out of memory"));
        for (int s = 0; s < servers; s++) {
            sw[2 * s] = 8 * s;
            sw[2 * s + 1] = 8 * s + 1;
        }
        rc = topology_add_switch(t, "ib", sw, 2 * servers, 12.5, alpha_or(p, 1.0), err);
        free(sw);
    }
    if (rc == CS_OK)
        rc = consecutive_groups(t, 8, err);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

static int build_dgx2(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    cs_topology *t = new_topology(name, 16, err);
    if (!t)
        return CS_ENOMEM;
    int r[16];
    for (int i = 0; i < 16; i++)
        r[i] = i;
    /* 6 NVLinks of 25 GB/s per GPU into the NVSwitch fabric. */
    int rc = topology_add_switch(t, "nvswitch", r, 16, 150.0, alpha_or(p, 0.7), err);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* DGX A100 / H100 nodes (docs/model.md, "DGX nodes"): the 8 GPUs of a node
 * on one NVSwitch whose port is the GPU's whole NVLink bandwidth per
 * direction (A100: 12 NVLinks x 25 GB/s = 300 GB/s; H100: 18 x 25 = 450),
 * as dgx2 models its NVSwitch.  N nodes: GPU i of every node has its own NIC
 * (A100: ConnectX-6 HDR 200 Gb/s = 25 GB/s; H100: ConnectX-7 NDR 400 Gb/s =
 * 50 GB/s) on rail switch i, a non-blocking fabric per rail; traffic between
 * rails goes through the NVSwitch (as NCCL's PXN does).  Groups = nodes. */
#define NVSWITCH_ALPHA 0.7
#define RAIL_ALPHA 2.0

static int build_nvswitch_nodes(const char *name, const spec_params *p, double nvlink_gbps,
                                double nic_gbps, cs_topology **out, cs_error *err)
{
    int nodes = p->ndims ? (int)p->dims[0] : 1;
    cs_topology *t = new_topology(name, 8L * nodes, err);
    if (!t)
        return CS_ENOMEM;
    int rc = CS_OK;
    for (int n = 0; n < nodes && rc == CS_OK; n++) {
        int r[8];
        char sw[32];
        for (int i = 0; i < 8; i++)
            r[i] = 8 * n + i;
        snprintf(sw, sizeof sw, "nvswitch%d", n);
        rc = topology_add_switch(t, sw, r, 8, nvlink_gbps, alpha_or(p, NVSWITCH_ALPHA), err);
    }
    if (nodes > 1 && rc == CS_OK) {
        int *rail = malloc(sizeof(int) * (size_t)nodes);
        if (!rail)
            return fail_build(t, cs_error_set(err, CS_ENOMEM, "topology", "out of memory"));
        for (int i = 0; i < 8 && rc == CS_OK; i++) {
            char sw[32];
            snprintf(sw, sizeof sw, "rail%d", i);
            for (int n = 0; n < nodes; n++)
                rail[n] = 8 * n + i;
            rc = topology_add_switch(t, sw, rail, nodes, nic_gbps, alpha_or(p, RAIL_ALPHA), err);
        }
        free(rail);
    }
    if (rc == CS_OK)
        rc = consecutive_groups(t, 8, err);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

static int build_dgxa100(const char *name, const spec_params *p, cs_topology **out,
                         cs_error *err)
{
    return build_nvswitch_nodes(name, p, 300.0, 25.0, out, err);
}

static int build_dgxh100(const char *name, const spec_params *p, cs_topology **out,
                         cs_error *err)
{
    return build_nvswitch_nodes(name, p, 450.0, 50.0, out, err);
}

/* Dragonfly GxR: G groups of R fully connected routers (one rank each); one
 * global link per pair of groups, the k-th global link of a group on its
 * router k mod R. */
static int build_dragonfly(const char *name, const spec_params *p, cs_topology **out,
                           cs_error *err)
{
    int G = (int)p->dims[0], R = (int)p->dims[1];
    cs_topology *t = new_topology(name, (long)G * R, err);
    if (!t)
        return CS_ENOMEM;
    double alpha = alpha_or(p, 0.5);
    int *r = malloc(sizeof(int) * (size_t)R);
    int *used = calloc((size_t)G, sizeof(int));
    int rc = (!r || !used) ? cs_error_set(err, CS_ENOMEM, "topology", "out of memory") : CS_OK;
    for (int g = 0; g < G && rc == CS_OK; g++) {
        for (int i = 0; i < R; i++)
            r[i] = g * R + i;
        rc = add_fc(t, r, R, 1, 400.0, alpha, err);
        if (rc == CS_OK)
            rc = topology_add_group(t, r, R, err);
    }
    for (int a = 0; a < G && rc == CS_OK; a++)
        for (int b = a + 1; b < G && rc == CS_OK; b++) {
            int ra = a * R + used[a]++ % R, rb = b * R + used[b]++ % R;
            rc = topology_add_link(t, ra, rb, 1, 200.0, alpha, true, err);
        }
    free(r);
    free(used);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* TACOS 2D Switch AxB: rank n*A + i is GPU i of node n; a scale-up switch per
 * node (300 GB/s) and a scale-out switch per GPU index (25 GB/s). */
static int build_switch2d(const char *name, const spec_params *p, cs_topology **out,
                          cs_error *err)
{
    int A = (int)p->dims[0], B = (int)p->dims[1];
    cs_topology *t = new_topology(name, (long)A * B, err);
    if (!t)
        return CS_ENOMEM;
    double alpha = alpha_or(p, 0.5);
    int *r = malloc(sizeof(int) * (size_t)(A > B ? A : B));
    int rc = r ? CS_OK : cs_error_set(err, CS_ENOMEM, "topology", "out of memory");
    for (int n = 0; n < B && rc == CS_OK; n++) {
        char sw[32];
        snprintf(sw, sizeof sw, "up%d", n);
        for (int i = 0; i < A; i++)
            r[i] = n * A + i;
        if (A > 1)
            rc = topology_add_switch(t, sw, r, A, 300.0, alpha, err);
        if (rc == CS_OK)
            rc = topology_add_group(t, r, A, err);
    }
    for (int i = 0; i < A && rc == CS_OK && B > 1; i++) {
        char sw[32];
        snprintf(sw, sizeof sw, "out%d", i);
        for (int n = 0; n < B; n++)
            r[n] = n * A + i;
        rc = topology_add_switch(t, sw, r, B, 25.0, alpha, err);
    }
    free(r);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* TACOS 3D Ring-FC-Switch AxBxC: rank a + A*(b + B*c); rings of A (200 GB/s),
 * fully connected B (100 GB/s), switches of C (50 GB/s); a node (group) is the
 * A*B ranks with the same c. */
static int build_rfs3d(const char *name, const spec_params *p, cs_topology **out,
                       cs_error *err)
{
    int A = (int)p->dims[0], B = (int)p->dims[1], C = (int)p->dims[2];
    cs_topology *t = new_topology(name, (long)A * B * C, err);
    if (!t)
        return CS_ENOMEM;
    double alpha = alpha_or(p, 0.5);
    int rc = grid_dimension(t, p->dims, 0, true, 1, 200.0, alpha, err);
    int big = A * B > C ? A * B : C;
    int *r = malloc(sizeof(int) * (size_t)big);
    if (!r && rc == CS_OK)
        rc = cs_error_set(err, CS_ENOMEM, "topology", "out of memory");
    for (int c = 0; c < C && rc == CS_OK; c++)
        for (int a = 0; a < A && rc == CS_OK; a++) {
            for (int b = 0; b < B; b++)
                r[b] = a + A * (b + B * c);
            rc = add_fc(t, r, B, 1, 100.0, alpha, err);
        }
    for (int b = 0; b < B && rc == CS_OK && C > 1; b++)
        for (int a = 0; a < A && rc == CS_OK; a++) {
            char sw[32];
            snprintf(sw, sizeof sw, "sw%d.%d", a, b);
            for (int c = 0; c < C; c++)
                r[c] = a + A * (b + B * c);
            rc = topology_add_switch(t, sw, r, C, 50.0, alpha, err);
        }
    if (rc == CS_OK)
        rc = consecutive_groups(t, A * B, err);
    free(r);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* AMD Gigabyte Z52 as SCCL models it (section 5.2.2): the xGMI islands
 * {0,2,3,5} and {1,4,6,7} joined over PCIe by GPUs 1 (socket of 0,2,3) and 5
 * (socket of 4,6,7) into one bidirectional ring, 1 chunk per round per link,
 * at the measured PCIe 4.0 bandwidth (~27 GB/s) for xGMI and PCIe alike. */
static int build_amd8(const char *name, const spec_params *p, cs_topology **out, cs_error *err)
{
    static const int ring[8] = { 0, 2, 3, 5, 4, 6, 7, 1 };
    cs_topology *t = new_topology(name, 8, err);
    if (!t)
        return CS_ENOMEM;
    int rc = CS_OK;
    for (int i = 0; i < 8 && rc == CS_OK; i++)
        rc = topology_add_link(t, ring[i], ring[(i + 1) % 8], 1, 27.0, alpha_or(p, 0.5), true,
                               err);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* The SCCL tool's fully connected AMD8 (sccl/topologies/amd.py): lanes per pair. */
static int build_amd8fc(const char *name, const spec_params *p, cs_topology **out,
                        cs_error *err)
{
    static const int lanes[8][8] = {
        { 0, 5, 6, 6, 5, 6, 5, 5 }, { 5, 0, 5, 5, 6, 5, 6, 6 }, { 6, 5, 0, 6, 5, 6, 5, 5 },
        { 6, 5, 6, 0, 5, 6, 5, 5 }, { 5, 6, 5, 5, 0, 5, 6, 6 }, { 6, 5, 6, 6, 5, 0, 5, 5 },
        { 5, 6, 5, 5, 6, 5, 0, 6 }, { 5, 6, 5, 5, 6, 5, 6, 0 },
    };
    cs_topology *t = new_topology(name, 8, err);
    if (!t)
        return CS_ENOMEM;
    int rc = CS_OK;
    /* ~33 GB/s of xGMI per GPU pair split over its lanes. */
    for (int a = 0; a < 8 && rc == CS_OK; a++)
        for (int b = 0; b < 8 && rc == CS_OK; b++)
            if (a != b)
                rc = topology_add_link(t, a, b, lanes[a][b], 5.5, alpha_or(p, 0.5), false, err);
    if (rc)
        return fail_build(t, rc);
    return finish(t, out, err);
}

/* ---- the table ------------------------------------------------------------------- */

/* Two parallel tables: the public descriptions and how to build each family. */
static const cs_builtin_info infos[] = {
    { "ring", "ring:N", "ring:8", "N ranks on a bidirectional ring" },
    { "line", "line:N", "line:8", "N ranks on a bidirectional chain (no wraparound)" },
    { "star", "star:N", "star:8", "rank 0 linked to each of ranks 1..N-1" },
    { "fc", "fc:N", "fc:8", "N ranks, every pair linked" },
    { "mesh2d", "mesh2d:AxB", "mesh2d:4x4", "A x B 2D mesh" },
    { "mesh3d", "mesh3d:AxBxC", "mesh3d:4x4x4", "A x B x C 3D mesh (TACOS' 3D hypercube)" },
    { "torus2d", "torus2d:AxB", "torus2d:4x4", "A x B 2D torus (wraparound when a side > 2)" },
    { "torus3d", "torus3d:AxBxC", "torus3d:4x4x4", "A x B x C 3D torus" },
    { "hypercube", "hypercube:D", "hypercube:3", "binary hypercube, 2^D ranks, D links each" },
    { "dgx1", "dgx1", "dgx1",
      "NVIDIA DGX-1: 8 V100, NVLinks as lanes at 25 GB/s, alpha 0.7 us, 2 groups of 4" },
    { "dgx2", "dgx2", "dgx2", "NVIDIA DGX-2: 16 GPUs on an NVSwitch (hub and spoke, 150 GB/s)" },
    { "ndv2", "ndv2:N", "ndv2:2",
      "N DGX-1-like servers; GPUs 0 and 1 of each on a 12.5 GB/s switch; groups = servers" },
    { "dgxa100", "dgxa100[:N]", "dgxa100:2",
      "N DGX A100 nodes: 8 GPUs on an NVSwitch (300 GB/s ports); a 25 GB/s NIC per GPU on "
      "rail switches" },
    { "dgxh100", "dgxh100[:N]", "dgxh100:2",
      "N DGX H100 nodes: 8 GPUs on an NVSwitch (450 GB/s ports); a 50 GB/s NIC per GPU on "
      "rail switches" },
    { "dragonfly", "dragonfly:GxR", "dragonfly:4x5",
      "G groups of R fully connected routers (400 GB/s), one global link per group pair "
      "(200 GB/s)" },
    { "switch2d", "switch2d:AxB", "switch2d:8x4",
      "TACOS 2D Switch: B nodes of A ranks on a 300 GB/s switch, rails at 25 GB/s" },
    { "rfs3d", "rfs3d:AxBxC", "rfs3d:2x4x8",
      "TACOS 3D Ring-FC-Switch: ring of A (200 GB/s), FC of B (100), switch of C (50)" },
    { "amd8", "amd8", "amd8",
      "AMD Gigabyte Z52 (SCCL): ring over xGMI islands bridged by GPUs 1 and 5" },
    { "amd8fc", "amd8fc", "amd8fc", "AMD 8-GPU fully connected, 5 or 6 lanes per pair" },
};

typedef struct {
    int min_dims, max_dims;  /* accepted dimension counts (0 = no ':' part) */
    bool synthetic;          /* accepts gbps= */
    bool hypercube;          /* the one parameter is a dimension, not a rank count */
    builtin_fn build;
} builtin_impl;

static const builtin_impl impls[] = {
    { 1, 1, true, false, build_ring },      { 1, 1, true, false, build_line },
    { 1, 1, true, false, build_star },      { 1, 1, true, false, build_fc },
    { 2, 2, true, false, build_mesh },      { 3, 3, true, false, build_mesh },
    { 2, 2, true, false, build_torus },     { 3, 3, true, false, build_torus },
    { 1, 1, true, true, build_hypercube },  { 0, 0, false, false, build_dgx1 },
    { 0, 0, false, false, build_dgx2 },     { 1, 1, false, false, build_ndv2 },
    { 0, 1, false, false, build_dgxa100 },  { 0, 1, false, false, build_dgxh100 },
    { 2, 2, false, false, build_dragonfly }, { 2, 2, false, false, build_switch2d },
    { 3, 3, false, false, build_rfs3d },    { 0, 0, false, false, build_amd8 },
    { 0, 0, false, false, build_amd8fc },
};

_Static_assert(sizeof infos / sizeof infos[0] == sizeof impls / sizeof impls[0],
               "builtin tables out of step");

#define NBUILTINS ((int)(sizeof infos / sizeof infos[0]))

const cs_builtin_info *topology_builtin_list(int *count)
{
    if (count)
        *count = NBUILTINS;
    return infos;
}

static int invalid(cs_error *err, const char *spec, const char *why)
{
    char forms[1024];
    size_t used = 0;
    for (int i = 0; i < NBUILTINS && used < sizeof forms; i++)
        used += (size_t)snprintf(forms + used, sizeof forms - used, "%s%s", i ? ", " : "",
                                 infos[i].syntax);
    return cs_error_set(err, CS_EINVAL, "topology",
                        "%s: %s (accepted: %s; synthetic families also take ,gbps=G,alpha=A; "
                        "families with switches ,copy=1)",
                        spec, why, forms);
}

/* Parses a positive decimal integer from [s, end). */
static bool parse_long(const char *s, const char *end, long *out)
{
    if (s == end || end - s > 9)
        return false;
    long v = 0;
    for (const char *c = s; c < end; c++) {
        if (*c < '0' || *c > '9')
            return false;
        v = v * 10 + (*c - '0');
    }
    *out = v;
    return true;
}

static bool parse_double(const char *s, const char *end, double *out)
{
    char buf[64];
    if (s == end || (size_t)(end - s) >= sizeof buf)
        return false;
    memcpy(buf, s, (size_t)(end - s));
    buf[end - s] = '\0';
    char *stop;
    errno = 0;
    double v = strtod(buf, &stop);
    if (*stop || errno || v != v)
        return false;
    *out = v;
    return true;
}

int topology_builtin(const char *spec, cs_topology **out, cs_error *err)
{
    return cs_topology_builtin_limited(spec, BUILTIN_MAX_RANKS, out, err);
}

int cs_topology_builtin_limited(const char *spec, long max_ranks, cs_topology **out,
                                cs_error *err)
{
    *out = NULL;
    if (!spec || !spec[0])
        return invalid(err, "\"\"", "empty topology name");
    if (strlen(spec) >= CS_NAME_MAX)
        return invalid(err, "name", "too long");
    const char *end = spec + strlen(spec);
    const char *comma = strchr(spec, ',');
    const char *head_end = comma ? comma : end;
    const char *colon = memchr(spec, ':', (size_t)(head_end - spec));
    const char *fam_end = colon ? colon : head_end;
    int which = -1;
    for (int i = 0; i < NBUILTINS; i++)
        if (strlen(infos[i].family) == (size_t)(fam_end - spec) &&
            memcmp(infos[i].family, spec, (size_t)(fam_end - spec)) == 0)
            which = i;
    if (which < 0) {
        /* a typo in the family: suggest the nearest one, with the caller's
         * own parameters ("rign:4" -> "ring:4") */
        const char *fams[NBUILTINS];
        for (int i = 0; i < NBUILTINS; i++)
            fams[i] = infos[i].family;
        const char *near = cs_nearest_name(spec, (size_t)(fam_end - spec), fams, NBUILTINS);
        if (!near)
            return invalid(err, spec, "unknown topology");
        char why[CS_NAME_MAX + 64];
        snprintf(why, sizeof why, "unknown topology; did you mean '%s%s'?", near, fam_end);
        return invalid(err, spec, why);
    }
    const builtin_impl *im = &impls[which];
    spec_params p = { 0 };
    if (colon) {
        const char *s = colon + 1;
        while (true) {
            const char *x = memchr(s, 'x', (size_t)(head_end - s));
            const char *e = x ? x : head_end;
            if (p.ndims == 3 || !parse_long(s, e, &p.dims[p.ndims]))
                return invalid(err, spec, "bad dimensions");
            p.ndims++;
            if (!x)
                break;
            s = x + 1;
        }
    }
    if (p.ndims < im->min_dims || p.ndims > im->max_dims) {
        char why[96];
        snprintf(why, sizeof why, "expected the form %s", infos[which].syntax);
        return invalid(err, spec, why);
    }
    bool copy = false;   /* copy=1: every switch copy-capable (any family with switches) */
    for (const char *o = comma; o; ) {
        const char *s = o + 1;
        const char *next = strchr(s, ',');
        const char *e = next ? next : end;
        const char *eq = memchr(s, '=', (size_t)(e - s));
        if (!eq)
            return invalid(err, spec, "options are key=value");
        size_t klen = (size_t)(eq - s);
        double v;
        if (!parse_double(eq + 1, e, &v))
            return invalid(err, spec, "option values must be numbers");
        if (klen == 4 && memcmp(s, "gbps", 4) == 0 && im->synthetic) {
            if (!(v > 0) || v > 1e9)
                return invalid(err, spec, "gbps must be > 0");
            p.gbps = v;
            p.has_gbps = true;
        } else if (klen == 4 && memcmp(s, "copy", 4) == 0) {
            if (v != 0 && v != 1)
                return invalid(err, spec, "copy must be 0 or 1");
            copy = v == 1;
        } else if (klen == 5 && memcmp(s, "alpha", 5) == 0) {
            if (!(v >= 0) || v > 1e9)
                return invalid(err, spec, "alpha must be >= 0");
            p.alpha = v;
            p.has_alpha = true;
        } else {
            return invalid(err, spec, im->synthetic ? "unknown option (gbps=, alpha=, copy=)"
                                                    : "unknown option (this family takes alpha= "
                                                      "and copy= only)");
        }
        o = next;
    }
    /* node-count families (ndv2, dgxa100, dgxh100) have 8 ranks per node */
    bool per_node = im->build == build_ndv2 || im->build == build_dgxa100 ||
                    im->build == build_dgxh100;
    long ranks = per_node ? 8 : 1;
    for (int d = 0; d < p.ndims; d++) {
        if (p.dims[d] < 1)
            return invalid(err, spec, "dimensions must be >= 1");
        if (im->hypercube) {
            if (p.dims[d] > 20)
                return invalid(err, spec, "hypercube dimension must be 1..20");
            ranks = 1L << p.dims[d];
        } else {
            ranks *= p.dims[d];
            if (ranks > BUILTIN_MAX_RANKS)
                return cs_error_set(err, CS_ELIMIT, "topology", "%s: more than %d ranks", spec,
                                    BUILTIN_MAX_RANKS);
        }
    }
    if (max_ranks > BUILTIN_MAX_RANKS)
        max_ranks = BUILTIN_MAX_RANKS;
    /* families whose link count grows quadratically: refuse before building */
    double d0 = p.dims[0], d1 = p.ndims > 1 ? p.dims[1] : 1, d2 = p.ndims > 2 ? p.dims[2] : 1;
    double links = 0;
    if (im->build == build_fc)
        links = d0 * (d0 - 1);
    else if (im->build == build_dragonfly)
        links = d0 * d1 * (d1 - 1) + d0 * (d0 - 1);
    else if (im->build == build_switch2d)
        links = d1 * d0 * (d0 - 1) + d0 * d1 * (d1 - 1);
    else if (im->build == build_rfs3d)
        links = d0 * d1 * d2 * (d1 + d2);
    else if (per_node && p.ndims == 1)
        links = 8 * d0 * (d0 + 7);
    if (links > BUILTIN_MAX_LINKS)
        return cs_error_set(err, CS_ELIMIT, "topology", "%s would have about %.0f links, more "
                            "than %d", spec, links, BUILTIN_MAX_LINKS);
    if (ranks > max_ranks)
        return cs_error_set(err, CS_ELIMIT, "topology", "%s has %ld ranks, more than the limit %ld",
                            spec, ranks, max_ranks);
    if (im->min_dims > 0 && ranks < 2)
        return invalid(err, spec, "needs at least 2 ranks");
    int rc = im->build(spec, &p, out, err);
    if (rc == CS_OK && copy) {
        cs_topology *c = NULL;
        if ((*out)->nswitches == 0)
            rc = invalid(err, spec, "copy=1 makes switches copy-capable, and this family has "
                         "no switch");
        else
            rc = topology_with_switch_copy(*out, true, NULL, &c, err);
        topology_free(*out);
        *out = c;
    }
    if (rc == CS_OK && (*out)->ranks > max_ranks) {   /* fixed-size models */
        rc = cs_error_set(err, CS_ELIMIT, "topology", "%s has %d ranks, more than the limit %ld",
                          spec, (*out)->ranks, max_ranks);
        topology_free(*out);
        *out = NULL;
    }
    return rc;
}
