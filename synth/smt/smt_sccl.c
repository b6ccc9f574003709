/*
 * smt_sccl.c - the SCCL paper's own encoding (section 3.4, constraints C1-C6),
 * kept as a measured baseline for bench/smt_bench.c: integer time[c][n],
 * Boolean snd[n][c][n'], integer rounds r_s, bandwidth as linear integer
 * arithmetic over if-then-else terms, Z3's default solver.  smt_encode.c's
 * order-encoded, pure-cardinality encoding replaces it in the library; this
 * file only exists so that the comparison is reproducible in the same run.
 */
#include "smt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void z3_quiet(Z3_context c, Z3_error_code e)
{
    (void)c;
    (void)e;
}

int smt_sccl_solve(const smt_problem *p, int S, int R, double time_limit_s, cs_algorithm **out,
                   smt_instance_stats *st, cs_error *err)
{
    *out = NULL;
    memset(st, 0, sizeof *st);
    double t0 = cs_now();
    int P = p->P, nl = p->nlinks;
    long G = p->G;
    Z3_config zc = Z3_mk_config();
    Z3_context ctx = Z3_mk_context(zc);
    Z3_del_config(zc);
    Z3_set_error_handler(ctx, z3_quiet);
    Z3_solver sol = Z3_mk_solver(ctx);
    Z3_solver_inc_ref(ctx, sol);
    {
        Z3_params prm = Z3_mk_params(ctx);
        Z3_params_inc_ref(ctx, prm);
        if (time_limit_s > 0)
            Z3_params_set_uint(ctx, prm, Z3_mk_string_symbol(ctx, "timeout"),
                               (unsigned)(time_limit_s * 1000));
        /* no SIGINT handler of Z3's own (smt_encode.c says why) */
        Z3_params_set_bool(ctx, prm, Z3_mk_string_symbol(ctx, "ctrl_c"), false);
        Z3_solver_set_params(ctx, sol, prm);
        Z3_params_dec_ref(ctx, prm);
    }
    Z3_sort I = Z3_mk_int_sort(ctx), B = Z3_mk_bool_sort(ctx);
    Z3_ast *time = malloc(sizeof(Z3_ast) * (size_t)(G * P));
    Z3_ast *snd = malloc(sizeof(Z3_ast) * (size_t)(G * nl));
    Z3_ast *r = malloc(sizeof(Z3_ast) * (size_t)S);
    Z3_ast *terms = malloc(sizeof(Z3_ast) * (size_t)(G * nl + S + P + 1));
    int rc = CS_OK;
    if (!time || !snd || !r || !terms) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    unsigned id = 0;
    Z3_ast zero = Z3_mk_int(ctx, 0, I), one = Z3_mk_int(ctx, 1, I);
    Z3_ast Sv = Z3_mk_int(ctx, S, I);
    for (long i = 0; i < G * P; i++) {
        time[i] = Z3_mk_const(ctx, Z3_mk_int_symbol(ctx, (int)id++), I);
        Z3_solver_assert(ctx, sol, Z3_mk_ge(ctx, time[i], zero));
        if (p->pre[i]) /* C1 */
            Z3_solver_assert(ctx, sol, Z3_mk_eq(ctx, time[i], zero));
        if (p->post[i]) /* C2 */
            Z3_solver_assert(ctx, sol, Z3_mk_le(ctx, time[i], Sv));
    }
    for (long i = 0; i < G * nl; i++)
        snd[i] = Z3_mk_const(ctx, Z3_mk_int_symbol(ctx, (int)id++), B);
    /* C3: (c, n) not in pre and time <= S -> exactly one incoming send */
    for (long g = 0; g < G; g++)
        for (int v = 0; v < P; v++) {
            if (p->pre[g * P + v])
                continue;
            int n = 0;
            for (int i = p->in_begin[v]; i < p->in_begin[v + 1]; i++)
                terms[n++] = snd[(long)p->in_links[i] * G + g];
            int *co = malloc(sizeof(int) * (size_t)(n + 1));
            for (int i = 0; i < n; i++)
                co[i] = 1;
            Z3_ast eq1 = Z3_mk_pbeq(ctx, (unsigned)n, terms, co, 1);
            free(co);
            Z3_solver_assert(ctx, sol,
                             Z3_mk_implies(ctx, Z3_mk_le(ctx, time[g * P + v], Sv), eq1));
        }
    /* C4: snd -> time[src] < time[dst] */
    for (int l = 0; l < nl; l++)
        for (long g = 0; g < G; g++)
            Z3_solver_assert(ctx, sol,
                             Z3_mk_implies(ctx, snd[(long)l * G + g],
                                           Z3_mk_lt(ctx, time[g * P + p->lsrc[l]],
                                                    time[g * P + p->ldst[l]])));
    /* C6: rounds */
    for (int s = 0; s < S; s++) {
        r[s] = Z3_mk_const(ctx, Z3_mk_int_symbol(ctx, (int)id++), I);
        Z3_solver_assert(ctx, sol, Z3_mk_ge(ctx, r[s], one));
    }
    Z3_solver_assert(ctx, sol, Z3_mk_eq(ctx, Z3_mk_add(ctx, (unsigned)S, r),
                                        Z3_mk_int(ctx, R, I)));
    /* C5: per set and step, sum of (snd and time[dst] = s) <= lanes * r_s */
    for (int s = 1; s <= S; s++) {
        Z3_ast sv = Z3_mk_int(ctx, s, I);
        for (int k = 0; k < p->nsets; k++) {
            int n = 0;
            for (int i = p->set_begin[k]; i < p->set_begin[k + 1]; i++) {
                int l = p->set_links[i];
                for (long g = 0; g < G; g++) {
                    Z3_ast both[2] = {snd[(long)l * G + g],
                                      Z3_mk_eq(ctx, time[g * P + p->ldst[l]], sv)};
                    terms[n++] = Z3_mk_ite(ctx, Z3_mk_and(ctx, 2, both), one, zero);
                }
            }
            Z3_ast lanes = Z3_mk_int(ctx, p->set_lanes[k], I);
            Z3_ast cap[2] = {lanes, r[s - 1]};
            Z3_solver_assert(ctx, sol, Z3_mk_le(ctx, Z3_mk_add(ctx, (unsigned)n, terms),
                                                Z3_mk_mul(ctx, 2, cap)));
        }
    }
    double t1 = cs_now();
    st->encode_s = t1 - t0;
    Z3_lbool res = Z3_solver_check(ctx, sol);
    double t2 = cs_now();
    st->z3_s = t2 - t1;
    if (res == Z3_L_FALSE) {
        rc = cs_error_set(err, CS_EUNSAT, "", "unsat");
    } else if (res == Z3_L_UNDEF) {
        rc = cs_error_set(err, CS_ETIMEOUT, "", "Z3: %s", Z3_solver_get_reason_unknown(ctx, sol));
    } else {
        Z3_model m = Z3_solver_get_model(ctx, sol);
        Z3_model_inc_ref(ctx, m);
        cs_algorithm *a = NULL;
        rc = algorithm_new(p->coll, p->topology_name, P, p->C, S, &a, err);
        for (int s = 0; s < S && rc == CS_OK; s++) {
            Z3_ast v;
            int x = 1;
            if (Z3_model_eval(ctx, m, r[s], true, &v))
                Z3_get_numeral_int(ctx, v, &x);
            a->rounds_per_step[s] = x;
        }
        if (rc == CS_OK)
            algorithm_update_rounds(a);
        for (int l = 0; l < nl && rc == CS_OK; l++)
            for (long g = 0; g < G && rc == CS_OK; g++) {
                Z3_ast v;
                if (!Z3_model_eval(ctx, m, snd[(long)l * G + g], true, &v) ||
                    Z3_get_bool_value(ctx, v) != Z3_L_TRUE)
                    continue;
                int td = 0;
                if (Z3_model_eval(ctx, m, time[g * P + p->ldst[l]], true, &v))
                    Z3_get_numeral_int(ctx, v, &td);
                if (td >= 1 && td <= S &&
                    algorithm_add_send(a, g, p->lsrc[l], p->ldst[l], td - 1, CS_OP_COPY))
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            }
        Z3_model_dec_ref(ctx, m);
        if (rc == CS_OK) {
            algorithm_sort_sends(a);
            *out = a;
        } else {
            algorithm_free(a);
        }
        st->extract_s = cs_now() - t2;
    }
done:
    free(time);
    free(snd);
    free(r);
    free(terms);
    Z3_solver_dec_ref(ctx, sol);
    Z3_del_context(ctx);
    return rc;
}
