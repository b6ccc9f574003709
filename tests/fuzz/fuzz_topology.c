/*
 * Fuzzes Topology JSON loading (synth/model/topology_json.c, topology.c):
 * topology_parse on arbitrary text, switches[].copy included.  Properties:
 *  - no memory error or undefined behaviour, no leak;
 *  - a refusal has a message, is "invalid" or "limit", and for a JSON
 *    object names a field that starts with a member of the document;
 *  - a parsed topology holds what topology.h promises after finalize: links
 *    sorted by (src, dst) without duplicates or self-loops, ranks in range,
 *    lanes >= 1, gbps > 0, alpha >= 0, the in/out indexes consistent,
 *    shared sets of valid sorted link indices, copy-capable switches
 *    numbered ranks + j in switches[] order;
 *  - its printed document (topology_to_json, as text) parses back to the
 *    same topology, link for link and switch for switch;
 *  - with copy-capable switches: the node view has one extra rank per such
 *    switch, topology_switch_of_node finds each, and topology_with_switch_copy
 *    turns every switch copy-capable or none without changing the links.
 */
#include <math.h>

#include "fuzz_common.h"
#include "topology.h"

/* Does the field path name `member` or something inside it ("links[3].src")?
 * Unknown members are named as they came: a name may hold '.' or '['. */
static bool field_in(const char *field, const char *member)
{
    size_t k = strlen(member);
    return !strncmp(field, member, k) &&
           (field[k] == '\0' || field[k] == '.' || field[k] == '[');
}

/* The field names a member of the document (one it has or lacks), or is one
 * cut short at cs_error's size. */
static bool names_a_member(const json_t *doc, const char *field)
{
    static const char *const members[] = {"name", "ranks", "links", "shared", "switches",
                                          "groups"};
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
    FUZZ_CHECK(rc == CS_EINVAL || rc == CS_ELIMIT, "refused with %s: %s", cs_status_name(rc),
               err->message);
    FUZZ_CHECK(err->message[0], "refusal without a message (field '%s')", err->field);
    if (!json_is_object(doc))
        return;
    /* "" only for a member named "" (unknown members are named as they came) */
    FUZZ_CHECK(err->field[0] || json_object_get(doc, ""), "refusal without a field: %s",
               err->message);
    FUZZ_CHECK(names_a_member(doc, err->field),
               "field '%s' names no member of the document: %s", err->field, err->message);
}

static void check_invariants(const cs_topology *t)
{
    FUZZ_CHECK(t->finalized && t->ranks >= 1, "ranks %d finalized %d", t->ranks, t->finalized);
    for (int i = 0; i < t->nlinks; i++) {
        const cs_link *l = &t->links[i];
        FUZZ_CHECK(l->src >= 0 && l->src < t->ranks && l->dst >= 0 && l->dst < t->ranks &&
                       l->src != l->dst,
                   "link %d: %d->%d of %d ranks", i, l->src, l->dst, t->ranks);
        FUZZ_CHECK(l->lanes >= 1 && isfinite(l->gbps) && l->gbps > 0 &&
                       isfinite(l->alpha_us) && l->alpha_us >= 0,
                   "link %d: lanes %d gbps %g alpha %g", i, l->lanes, l->gbps, l->alpha_us);
        FUZZ_CHECK(l->switch_id >= -1 && l->switch_id < t->nswitches, "link %d switch %d", i,
                   l->switch_id);
        if (i)
            FUZZ_CHECK(t->links[i - 1].src < l->src ||
                           (t->links[i - 1].src == l->src && t->links[i - 1].dst < l->dst),
                       "links %d (%d->%d), %d (%d->%d) out of order or duplicate (node view %d, copy %d)", i - 1, t->links[i - 1].src, t->links[i - 1].dst, i, l->src, l->dst, t->node_view, t->nswitch_nodes);
    }
    FUZZ_CHECK(t->out_begin[0] == 0 && t->out_begin[t->ranks] == t->nlinks, "out_begin ends");
    FUZZ_CHECK(t->in_begin[0] == 0 && t->in_begin[t->ranks] == t->nlinks, "in_begin ends");
    for (int r = 0; r < t->ranks; r++) {
        for (int i = t->out_begin[r]; i < t->out_begin[r + 1]; i++)
            FUZZ_CHECK(t->links[i].src == r, "out link %d of %d", i, r);
        for (int i = t->in_begin[r]; i < t->in_begin[r + 1]; i++) {
            int li = t->in_links[i];
            FUZZ_CHECK(li >= 0 && li < t->nlinks && t->links[li].dst == r, "in link %d of %d",
                       li, r);
            FUZZ_CHECK(topology_find_link(t, t->links[li].src, r) == li, "find_link");
        }
    }
    for (int s = 0; s < t->nshared; s++) {
        const cs_shared *sh = &t->shared[s];
        FUZZ_CHECK(sh->lanes >= 1 && sh->nlinks >= 1, "shared %d: lanes %d links %d", s,
                   sh->lanes, sh->nlinks);
        for (int k = 0; k < sh->nlinks; k++) {
            FUZZ_CHECK(sh->links[k] >= 0 && sh->links[k] < t->nlinks, "shared %d link %d", s,
                       sh->links[k]);
            if (k)
                FUZZ_CHECK(sh->links[k - 1] < sh->links[k], "shared %d not sorted", s);
        }
    }
    int copies = 0;
    /* in a node view the switch nodes are the last ranks */
    int first_node = t->node_view ? t->ranks - t->nswitch_nodes : t->ranks;
    for (int s = 0; s < t->nswitches; s++) {
        const cs_switch *sw = &t->switches[s];
        for (int k = 0; k < sw->nranks; k++)
            FUZZ_CHECK(sw->ranks[k] >= 0 && sw->ranks[k] < t->ranks, "switch %d rank %d", s,
                       sw->ranks[k]);
        if (sw->copy) {
            FUZZ_CHECK(sw->node == first_node + copies, "switch %d node %d, want %d", s,
                       sw->node, first_node + copies);
            FUZZ_CHECK(topology_switch_of_node(t, sw->node) == s, "switch_of_node(%d)",
                       sw->node);
            copies++;
        } else {
            FUZZ_CHECK(sw->node == -1, "switch %d without copy has node %d", s, sw->node);
        }
    }
    FUZZ_CHECK(t->nswitch_nodes == copies, "nswitch_nodes %d, %d copy-capable switches",
               t->nswitch_nodes, copies);
    for (int g = 0; g < t->ngroups; g++)
        for (int k = 0; k < t->groups[g].nranks; k++)
            FUZZ_CHECK(t->groups[g].ranks[k] >= 0 && t->groups[g].ranks[k] < t->ranks,
                       "group %d rank %d", g, t->groups[g].ranks[k]);
}

static void check_same(const cs_topology *a, const cs_topology *b)
{
    FUZZ_CHECK(a->ranks == b->ranks && a->nlinks == b->nlinks && a->nshared == b->nshared &&
                   a->nswitches == b->nswitches && a->ngroups == b->ngroups &&
                   a->nswitch_nodes == b->nswitch_nodes && !strcmp(a->name, b->name),
               "reparsed: ranks %d/%d links %d/%d shared %d/%d switches %d/%d groups %d/%d "
               "nodes %d/%d name %s/%s",
               a->ranks, b->ranks, a->nlinks, b->nlinks, a->nshared, b->nshared, a->nswitches,
               b->nswitches, a->ngroups, b->ngroups, a->nswitch_nodes, b->nswitch_nodes, a->name,
               b->name);
    for (int i = 0; i < a->nlinks; i++) {
        const cs_link *x = &a->links[i], *y = &b->links[i];
        FUZZ_CHECK(x->src == y->src && x->dst == y->dst && x->lanes == y->lanes &&
                       x->gbps == y->gbps && x->alpha_us == y->alpha_us &&
                       x->switch_id == y->switch_id,
                   "reparsed link %d: %d->%d lanes %d gbps %.17g alpha %.17g sw %d vs %d->%d "
                   "lanes %d gbps %.17g alpha %.17g sw %d",
                   i, x->src, x->dst, x->lanes, x->gbps, x->alpha_us, x->switch_id, y->src,
                   y->dst, y->lanes, y->gbps, y->alpha_us, y->switch_id);
    }
    for (int s = 0; s < a->nshared; s++)
        FUZZ_CHECK(a->shared[s].lanes == b->shared[s].lanes &&
                       a->shared[s].nlinks == b->shared[s].nlinks &&
                       !memcmp(a->shared[s].links, b->shared[s].links,
                               sizeof(int) * (size_t)a->shared[s].nlinks),
                   "reparsed shared set %d differs", s);
    for (int s = 0; s < a->nswitches; s++) {
        const cs_switch *x = &a->switches[s], *y = &b->switches[s];
        FUZZ_CHECK(!strcmp(x->name, y->name) && x->nranks == y->nranks &&
                       !memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->nranks) &&
                       x->gbps == y->gbps && x->alpha_us == y->alpha_us && x->copy == y->copy &&
                       x->node == y->node,
                   "reparsed switch %d differs", s);
    }
    for (int g = 0; g < a->ngroups; g++)
        FUZZ_CHECK(a->groups[g].nranks == b->groups[g].nranks &&
                       !memcmp(a->groups[g].ranks, b->groups[g].ranks,
                               sizeof(int) * (size_t)a->groups[g].nranks),
                   "reparsed group %d differs", g);
}

static void check_copy_views(const cs_topology *t)
{
    cs_error err;
    cs_topology *v = NULL;
    if (t->nswitch_nodes > 0) {
        FUZZ_CHECK(topology_switch_nodes(t, &v, &err) == CS_OK, "node view: %s", err.message);
        FUZZ_CHECK(v->ranks == t->ranks + t->nswitch_nodes && v->node_view,
                   "node view has %d ranks for %d + %d", v->ranks, t->ranks, t->nswitch_nodes);
        check_invariants(v);
        topology_free(v);
    } else {
        FUZZ_CHECK(topology_switch_nodes(t, &v, &err) == CS_EINVAL && err.message[0],
                   "node view without copy-capable switches");
    }
    if (t->nswitches == 0)
        return;
    for (int copy = 0; copy < 2; copy++) {
        cs_topology *u = NULL;
        FUZZ_CHECK(topology_with_switch_copy(t, copy, NULL, &u, &err) == CS_OK,
                   "with_switch_copy(%d): %s", copy, err.message);
        check_invariants(u);
        FUZZ_CHECK(u->nswitch_nodes == (copy ? t->nswitches : 0) && u->nlinks == t->nlinks,
                   "with_switch_copy(%d): %d nodes, %d links (was %d)", copy, u->nswitch_nodes,
                   u->nlinks, t->nlinks);
        topology_free(u);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    /* small limits keep each run fast; the daemon's own are larger */
    cs_topology_parse_options opt = {.max_ranks = 256, .max_links = 20000};
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, 0, &jerr);
    if (!doc)
        return 0;
    cs_topology *t = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = topology_from_json(doc, &opt, &t, &err);
    if (rc != CS_OK) {
        FUZZ_CHECK(!t, "refused with a topology left");
        check_refusal(doc, rc, &err);
        json_decref(doc);
        return 0;
    }
    json_decref(doc);
    check_invariants(t);
    json_t *printed = topology_to_json(t);
    FUZZ_CHECK(printed, "topology_to_json failed");
    char *text = json_dumps(printed, JSON_COMPACT);
    json_decref(printed);
    FUZZ_CHECK(text, "printed document does not dump");
    cs_topology *back = NULL;
    FUZZ_CHECK(topology_parse(text, strlen(text), &opt, &back, &err) == CS_OK,
               "the printed document is refused: %s (field '%s'): %s", err.message, err.field,
               text);
    free(text);
    check_same(t, back);
    topology_free(back);
    check_copy_views(t);
    topology_free(t);
    return 0;
}
