/*
 * synthesize_bound.c - the time bound in results: `bounds.time` (bounds.h)
 * and, per frontier algorithm, its simulated time against the bound at one
 * size (CONTRACT.md section 4, `ratio_to_bound` and `bound_bytes`).
 *
 * The size is the request's tacos `bytes` option (the per-rank share L of
 * the cost model) where the method takes one (tacos, auto: it is in their
 * canonical request), else its default 64 MiB, whichever method ran: either
 * way a cached result's ratios match its key.  The bound
 * itself holds at every size (A + B L and D): clients evaluate it anywhere;
 * only the simulated time needs a simulation, which costs about as much as
 * verifying the algorithm (O(sends log lanes)).
 */
#include "synthesize.h"

#include <string.h>

#include "bounds.h"
#include "simulate.h"

double synth_bound_bytes(const cs_synth_request *r)
{
    if (r && r->method_kind == CS_SYNTH_MCF && r->mcf.bytes > 0)
        return r->mcf.bytes;
    return r && r->tacos.bytes > 0 ? r->tacos.bytes : CS_BOUND_DEFAULT_BYTES;
}

int synth_ratio_to_bound(const cs_topology *t, const cs_time_bound *tb, const cs_algorithm *a,
                         double bytes, cs_bound_ratio *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    cs_sim_result sr;
    int rc = simulate_algorithm_time(t, a, bytes, &sr, err);   /* ideal_us is not read */
    if (rc)
        return rc;
    out->simulated_us = sr.time_us;
    out->scheduled_us = sr.scheduled_size ? sr.scheduled_us : 0.0;
    sim_result_free(&sr);
    out->bound_us = time_bound_us(tb, bytes, a->chunks);
    out->ratio = out->simulated_us > 0 ? out->bound_us / out->simulated_us : 1.0;
    return CS_OK;
}

int synth_annotate_time_bound(json_t *doc, const cs_topology *t, const cs_collective *c,
                              const cs_result *res, double bytes, cs_error *err)
{
    cs_time_bound tb;
    int rc = collective_time_bound(t, c, &tb, err);
    if (rc)
        return rc;
    json_t *bounds = json_object_get(doc, "bounds");
    if (!json_is_object(bounds)) {
        bounds = json_object();
        if (!bounds || json_object_set_new(doc, "bounds", bounds))
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    json_t *time = time_bound_to_json(&tb);
    if (!time || json_object_set_new(bounds, "time", time))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    json_t *frontier = json_object_get(doc, "frontier");
    for (int i = 0; i < res->nalgs && i < (int)json_array_size(frontier); i++) {
        json_t *ja = json_array_get(frontier, i);
        cs_bound_ratio br;
        cs_error serr;
        cs_error_clear(&serr);
        /* an algorithm the simulator refuses (too large) keeps no ratio */
        if (synth_ratio_to_bound(t, &tb, res->algs[i], bytes, &br, &serr) != CS_OK)
            continue;
        int bad = json_object_set_new(ja, "ratio_to_bound", json_real(br.ratio));
        bad |= json_object_set_new(ja, "bound_bytes", json_real(bytes));
        bad |= json_object_set_new(ja, "bound_us", json_real(br.bound_us));
        bad |= json_object_set_new(ja, "simulated_us", json_real(br.simulated_us));
        /* a timed schedule at its own size: what it claims beside what it
         * runs in (simulate.h: as soon as it can, <= the claim) */
        if (br.scheduled_us > 0)
            bad |= json_object_set_new(ja, "scheduled_us", json_real(br.scheduled_us));
        if (bad)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    return CS_OK;
}

void synth_annotate_mcf_bound(json_t *doc, const cs_result *res)
{
    json_t *lp = res && res->stats ? json_object_get(res->stats, "mcf_lp") : NULL;
    json_t *bounds = json_object_get(doc, "bounds");
    if (!json_is_object(lp) || !json_is_object(bounds))
        return;
    json_object_set_new(bounds, "mcf_lp", json_deep_copy(lp));
}
