/*
 * mcf_internal.h - private interface of the mcf method: a small in-memory
 * LP/MILP container and the solver front (mcf_solver.c) that runs CLP or CBC
 * on it in a forked child.  Include mcf.h from anywhere else.
 */
#ifndef CS_MCF_INTERNAL_H
#define CS_MCF_INTERNAL_H

#include <stdbool.h>
#include "cs_common.h"

/* A model built column by column, rows by triplets (row, col, value).
 * Always maximized. */
typedef struct mcf_lp {
    int ncols, nrows;
    int cols_cap, rows_cap;
    double *col_lb, *col_ub, *obj;
    char *is_int;
    double *row_lb, *row_ub;
    long nnz, nnz_cap;
    int *t_row, *t_col;
    double *t_val;
    bool failed;          /* an allocation failed: every later call is a no-op */
} mcf_lp;

void mcf_lp_init(mcf_lp *m);
void mcf_lp_free(mcf_lp *m);
/* Index of the new column/row, or -1 (m->failed set) when out of memory. */
int mcf_lp_add_col(mcf_lp *m, double lb, double ub, double obj, bool integer);
int mcf_lp_add_row(mcf_lp *m, double lb, double ub);
void mcf_lp_add_coef(mcf_lp *m, int row, int col, double v);

enum {
    MCF_OPTIMAL = 0,     /* proven optimal (within the gap for a MILP) */
    MCF_FEASIBLE = 1,    /* a limit stopped it with a solution */
    MCF_INFEASIBLE = 2,  /* proven: no solution */
    MCF_NOSOLUTION = 3   /* a limit stopped it without a solution */
};

typedef struct mcf_solve_opts {
    bool integer;          /* CBC with the integer flags; else CLP, integers relaxed */
    double time_limit_s;   /* <= 0: none */
    double gap;            /* MILP relative gap to stop at */
    const double *start;   /* MILP incumbent to start from (ncols values) or NULL */
    bool primal;           /* LP: primal simplex (a feasible start is at hand) */
    /* MILP: no CGL preprocessing.  CBC 2.10.8 (Debian's) can SIGSEGV in
     * CglPreProcess::postProcess when its time limit stops the search of a
     * preprocessed model (seen on A* rounds under load); short-limited
     * solves whose limit is routinely hit set this. */
    bool no_preprocess;
    /* MILP: called from the calling thread while CBC runs, with CBC's
     * incumbent objective (NAN before the first) and best bound, read from
     * its log (Cbc0010I / Cbc0012I lines on the child's stdout) */
    void (*on_progress)(void *ctx, double incumbent, double bound);
    void *progress_ctx;
    cs_cancel *cancel;
} mcf_solve_opts;

typedef struct mcf_solution {
    int status;            /* MCF_* */
    double objective;      /* of the solution returned (NAN without one) */
    double bound;          /* best bound (LP: the optimum) */
    double seconds;
    double *x;             /* ncols values when there is a solution, owned */
    int signal;            /* the signal that ended the solver process without an
                            * answer (a solver crash; CS_EINTERNAL), else 0 */
} mcf_solution;

/* CS_OK with sol filled (status says what was found); CS_ECANCELLED,
 * CS_ENOMEM, CS_EINTERNAL (the child died; sol->signal says by which signal
 * when it was one) otherwise. */
int mcf_solve(const mcf_lp *m, const mcf_solve_opts *o, mcf_solution *sol, cs_error *err);
void mcf_solution_free(mcf_solution *s);

#endif
