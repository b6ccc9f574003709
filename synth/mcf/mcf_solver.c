/*
 * mcf_solver.c - the model container and the solver front of the mcf method:
 * CLP (LP) or CBC (MILP) through their C APIs, in a forked child.
 *
 * Why a child: neither C API can be interrupted from another thread (CBC's
 * C interface has no event handler, CLP's only a message callback), and a
 * MILP can run for minutes.  The parent polls the cancel token and the
 * deadline every 20 ms while it reads the child's answer from a pipe; on
 * cancel it SIGKILLs the child and reaps it, so the solver's memory is gone
 * within milliseconds and nothing of CBC's state lives in the caller's
 * process.  The model is built in the parent (it is needed to read the
 * solution back) and inherited copy-on-write; the child converts it to
 * column form, solves, writes {status, objective, bound, has_x, x[ncols]}
 * and _exits.  The solver's own time limit is set to the caller's; the
 * parent kills the child 2 s past it in case the solver overruns.
 */
#include "mcf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Cbc_C_Interface.h>
#include <Clp_C_Interface.h>

/* ---- container ---------------------------------------------------------------- */

void mcf_lp_init(mcf_lp *m) { memset(m, 0, sizeof *m); }

void mcf_lp_free(mcf_lp *m)
{
    free(m->col_lb);
    free(m->col_ub);
    free(m->obj);
    free(m->is_int);
    free(m->row_lb);
    free(m->row_ub);
    free(m->t_row);
    free(m->t_col);
    free(m->t_val);
    memset(m, 0, sizeof *m);
}

static bool grow(void **p, size_t elem, int *cap_int, long *cap_long, long need)
{
    long cap = cap_int ? *cap_int : *cap_long;
    if (need <= cap)
        return true;
    long nc = cap ? cap * 2 : 1024;
    while (nc < need)
        nc *= 2;
    if (cap_int && nc > INT32_MAX)
        return false;
    void *q = realloc(*p, elem * (size_t)nc);
    if (!q)
        return false;
    *p = q;
    return true;
}

int mcf_lp_add_col(mcf_lp *m, double lb, double ub, double obj, bool integer)
{
    if (m->failed)
        return -1;
    if (m->ncols == m->cols_cap) {
        int cap = m->cols_cap;
        if (!grow((void **)&m->col_lb, sizeof(double), &cap, NULL, m->ncols + 1) ||
            !grow((void **)&m->col_ub, sizeof(double), &cap, NULL, m->ncols + 1) ||
            !grow((void **)&m->obj, sizeof(double), &cap, NULL, m->ncols + 1) ||
            !grow((void **)&m->is_int, 1, &cap, NULL, m->ncols + 1)) {
            m->failed = true;
            return -1;
        }
        m->cols_cap = cap ? cap * 2 : 1024;
        while (m->cols_cap < m->ncols + 1)
            m->cols_cap *= 2;
    }
    m->col_lb[m->ncols] = lb;
    m->col_ub[m->ncols] = ub;
    m->obj[m->ncols] = obj;
    m->is_int[m->ncols] = integer ? 1 : 0;
    return m->ncols++;
}

int mcf_lp_add_row(mcf_lp *m, double lb, double ub)
{
    if (m->failed)
        return -1;
    if (m->nrows == m->rows_cap) {
        int cap = m->rows_cap;
        if (!grow((void **)&m->row_lb, sizeof(double), &cap, NULL, m->nrows + 1) ||
            !grow((void **)&m->row_ub, sizeof(double), &cap, NULL, m->nrows + 1)) {
            m->failed = true;
            return -1;
        }
        m->rows_cap = cap ? cap * 2 : 1024;
        while (m->rows_cap < m->nrows + 1)
            m->rows_cap *= 2;
    }
    m->row_lb[m->nrows] = lb;
    m->row_ub[m->nrows] = ub;
    return m->nrows++;
}

void mcf_lp_add_coef(mcf_lp *m, int row, int col, double v)
{
    if (m->failed || row < 0 || col < 0)
        return;
    if (m->nnz == m->nnz_cap) {
        long cap = m->nnz_cap;
        if (!grow((void **)&m->t_row, sizeof(int), NULL, &cap, m->nnz + 1) ||
            !grow((void **)&m->t_col, sizeof(int), NULL, &cap, m->nnz + 1) ||
            !grow((void **)&m->t_val, sizeof(double), NULL, &cap, m->nnz + 1)) {
            m->failed = true;
            return;
        }
        m->nnz_cap = cap ? cap * 2 : 1024;
        while (m->nnz_cap < m->nnz + 1)
            m->nnz_cap *= 2;
    }
    m->t_row[m->nnz] = row;
    m->t_col[m->nnz] = col;
    m->t_val[m->nnz] = v;
    m->nnz++;
}

void mcf_solution_free(mcf_solution *s)
{
    if (s) {
        free(s->x);
        s->x = NULL;
    }
}

/* ---- the child -------------------------------------------------------------------- */

typedef struct answer_head {
    int32_t status;
    int32_t has_x;
    double objective;
    double bound;
} answer_head;

static bool write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Column-major arrays from the triplets (counting sort by column). */
static int to_columns(const mcf_lp *m, CoinBigIndex **start, int **index, double **value)
{
    *start = calloc((size_t)m->ncols + 1, sizeof **start);
    *index = malloc(sizeof **index * (size_t)(m->nnz ? m->nnz : 1));
    *value = malloc(sizeof **value * (size_t)(m->nnz ? m->nnz : 1));
    if (!*start || !*index || !*value)
        return -1;
    for (long i = 0; i < m->nnz; i++)
        (*start)[m->t_col[i] + 1]++;
    for (int j = 0; j < m->ncols; j++)
        (*start)[j + 1] += (*start)[j];
    CoinBigIndex *fill = malloc(sizeof *fill * (size_t)(m->ncols ? m->ncols : 1));
    if (!fill)
        return -1;
    memcpy(fill, *start, sizeof *fill * (size_t)m->ncols);
    for (long i = 0; i < m->nnz; i++) {
        CoinBigIndex at = fill[m->t_col[i]]++;
        (*index)[at] = m->t_row[i];
        (*value)[at] = m->t_val[i];
    }
    free(fill);
    /* Entries of one (row, column) are summed: a model reduced by symmetry
     * writes a row's coefficient once per link of a class (CLP and CBC want
     * each entry once).  Columns are short: insertion sort by row. */
    CoinBigIndex out = 0, begin = 0;
    for (int j = 0; j < m->ncols; j++) {
        CoinBigIndex end = (*start)[j + 1];
        for (CoinBigIndex a = begin + 1; a < end; a++) {
            int r = (*index)[a];
            double v = (*value)[a];
            CoinBigIndex b = a;
            while (b > begin && (*index)[b - 1] > r) {
                (*index)[b] = (*index)[b - 1];
                (*value)[b] = (*value)[b - 1];
                b--;
            }
            (*index)[b] = r;
            (*value)[b] = v;
        }
        (*start)[j] = out;
        for (CoinBigIndex a = begin; a < end; a++) {
            if (out > (*start)[j] && (*index)[out - 1] == (*index)[a]) {
                (*value)[out - 1] += (*value)[a];
                continue;
            }
            (*index)[out] = (*index)[a];
            (*value)[out] = (*value)[a];
            out++;
        }
        begin = end;
    }
    (*start)[m->ncols] = out;
    return 0;
}

static void child_solve(const mcf_lp *m, const mcf_solve_opts *o, int fd)
{
    answer_head h = {MCF_NOSOLUTION, 0, NAN, NAN};
    CoinBigIndex *start = NULL;
    int *index = NULL;
    double *value = NULL;
    const double *x = NULL;
    double *xcopy = NULL;
    if (to_columns(m, &start, &index, &value) != 0) {
        h.status = -1;
        write_all(fd, &h, sizeof h);
        return;
    }
    if (!o->integer) {
        Clp_Simplex *s = Clp_newModel();
        Clp_setLogLevel(s, 0);
        Clp_loadProblem(s, m->ncols, m->nrows, start, index, value, m->col_lb, m->col_ub,
                        m->obj, m->row_lb, m->row_ub);
        Clp_setOptimizationDirection(s, -1.0);
        if (o->time_limit_s > 0)
            Clp_setMaximumSeconds(s, o->time_limit_s);
        if (o->primal)
            Clp_initialPrimalSolve(s);
        else
            Clp_initialSolve(s);
        int st = Clp_status(s);
        if (st == 0) {
            h.status = MCF_OPTIMAL;
            h.objective = h.bound = Clp_objectiveValue(s);
            x = Clp_primalColumnSolution(s);
        } else if (st == 1) {
            h.status = MCF_INFEASIBLE;
        } else {
            h.status = MCF_NOSOLUTION;
        }
        h.has_x = x != NULL;
        if (x) {
            xcopy = malloc(sizeof *xcopy * (size_t)(m->ncols ? m->ncols : 1));
            if (xcopy)
                memcpy(xcopy, x, sizeof *xcopy * (size_t)m->ncols);
            else
                h.has_x = 0;
        }
        Clp_deleteModel(s);
    } else {
        Cbc_Model *s = Cbc_newModel();
        Cbc_loadProblem(s, m->ncols, m->nrows, start, index, value, m->col_lb, m->col_ub,
                        m->obj, m->row_lb, m->row_ub);
        for (int j = 0; j < m->ncols; j++)
            if (m->is_int[j])
                Cbc_setInteger(s, j);
        Cbc_setObjSense(s, -1.0);
        Cbc_setLogLevel(s, o->on_progress ? 1 : 0);
        if (o->time_limit_s > 0)
            Cbc_setMaximumSeconds(s, o->time_limit_s);
        if (o->gap > 0)
            Cbc_setAllowableFractionGap(s, o->gap);
        if (o->no_preprocess)
            Cbc_setParameter(s, "preprocess", "off");
        if (o->start) {
            int *idx = malloc(sizeof *idx * (size_t)(m->ncols ? m->ncols : 1));
            double *val = malloc(sizeof *val * (size_t)(m->ncols ? m->ncols : 1));
            int n = 0;
            if (idx && val) {
                for (int j = 0; j < m->ncols; j++)
                    if (m->is_int[j] && o->start[j] != 0.0) {
                        idx[n] = j;
                        val[n++] = o->start[j];
                    }
                Cbc_setMIPStartI(s, n, idx, val);
            }
            free(idx);
            free(val);
        }
        Cbc_solve(s);
        x = Cbc_bestSolution(s);
        if (x) {
            h.has_x = 1;
            h.objective = Cbc_getObjValue(s);
            h.status = Cbc_isProvenOptimal(s) ? MCF_OPTIMAL : MCF_FEASIBLE;
            xcopy = malloc(sizeof *xcopy * (size_t)(m->ncols ? m->ncols : 1));
            if (xcopy)
                memcpy(xcopy, x, sizeof *xcopy * (size_t)m->ncols);
            else
                h.has_x = 0;
        } else {
            h.status = Cbc_isProvenInfeasible(s) ? MCF_INFEASIBLE : MCF_NOSOLUTION;
        }
        h.bound = Cbc_getBestPossibleObjValue(s);
        Cbc_deleteModel(s);
    }
    free(start);
    free(index);
    free(value);
    if (write_all(fd, &h, sizeof h) && h.has_x)
        write_all(fd, xcopy, sizeof(double) * (size_t)m->ncols);
    free(xcopy);
}

/* ---- the parent -------------------------------------------------------------------- */

/* One line of CBC's log: its incumbent (Cbc0012I "Integer solution of X
 * found", Cbc0004I, Cbc0010I "... X best solution, best possible Y") and
 * bound, in the caller's sense (CBC logs the minimized negation of our
 * maximized objective). */
static void log_line(const char *line, double *incumbent, const mcf_solve_opts *o)
{
    double x, y;
    long a, b;
    const char *p;
    if ((p = strstr(line, "Integer solution of ")) && sscanf(p, "Integer solution of %lf", &x) == 1) {
        *incumbent = -x;
        o->on_progress(o->progress_ctx, *incumbent, NAN);
    } else if ((p = strstr(line, "After ")) &&
               sscanf(p, "After %ld nodes, %ld on tree, %lf best solution, best possible %lf", &a,
                      &b, &x, &y) == 4) {
        if (fabs(x) < 1e40)
            *incumbent = -x;
        o->on_progress(o->progress_ctx, *incumbent, -y);
    }
}

#define KILL_GRACE_S 2.0
#define POLL_MS 20

int mcf_solve(const mcf_lp *m, const mcf_solve_opts *o, mcf_solution *sol, cs_error *err)
{
    memset(sol, 0, sizeof *sol);
    sol->objective = sol->bound = NAN;
    sol->status = MCF_NOSOLUTION;
    if (m->failed)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory building the model");
    if (cs_cancel_requested(o->cancel))
        return cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
    double t0 = cs_now();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return cs_error_set(err, CS_EINTERNAL, "", "pipe for the solver: %s", strerror(errno));
    int lfds[2] = {-1, -1};
    if (o->integer && o->on_progress && pipe2(lfds, O_CLOEXEC) != 0)
        lfds[0] = lfds[1] = -1; /* no progress, still a solve */
    pid_t parent = getpid();
    /* unwritten stdio buffers would be written twice if the solver in the
     * child flushes them */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        if (lfds[0] >= 0) {
            close(lfds[0]);
            close(lfds[1]);
        }
        return cs_error_set(err, CS_EINTERNAL, "", "fork for the solver: %s", strerror(errno));
    }
    if (pid == 0) {
        /* the solver dies with its caller */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(fds[0]);
        /* the solvers' own chatter goes nowhere, except CBC's log when the
         * caller follows its progress: a line-buffered stdout into a pipe */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
            close(devnull);
        }
        if (lfds[1] >= 0) {
            close(lfds[0]);
            dup2(lfds[1], STDOUT_FILENO);
            close(lfds[1]);
            setvbuf(stdout, NULL, _IOLBF, 0);
        }
        child_solve(m, o, fds[1]);
        close(fds[1]);
        /* End without any exit-time machinery: the child holds a copy of the
         * caller's heap, whose other threads do not exist here, and a leak
         * checker (valgrind) would report the caller's blocks as lost. */
        raise(SIGKILL);
        _exit(0);
    }
    close(fds[1]);
    if (lfds[1] >= 0)
        close(lfds[1]);
    char line[512];
    size_t nline = 0;
    double incumbent = NAN;
    size_t want = sizeof(answer_head), have = 0;
    size_t full = sizeof(answer_head) + sizeof(double) * (size_t)m->ncols;
    char *buf = malloc(full);
    int rc = CS_OK;
    bool killed = false, cancelled = false;
    if (!buf) {
        kill(pid, SIGKILL);
        killed = true;
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the solution");
    }
    double deadline = o->time_limit_s > 0 ? t0 + o->time_limit_s + KILL_GRACE_S : INFINITY;
    while (!killed) {
        if (cs_cancel_requested(o->cancel)) {
            kill(pid, SIGKILL);
            killed = cancelled = true;
            break;
        }
        if (cs_now() > deadline) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        struct pollfd pfd[2] = {{fds[0], POLLIN, 0}, {lfds[0], POLLIN, 0}};
        int pr = poll(pfd, lfds[0] >= 0 ? 2 : 1, POLL_MS);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        if (lfds[0] >= 0 && (pfd[1].revents & (POLLIN | POLLHUP))) {
            char chunk[1024];
            ssize_t n = read(lfds[0], chunk, sizeof chunk);
            if (n <= 0) {
                close(lfds[0]);
                lfds[0] = -1;
            }
            for (ssize_t i = 0; i < n; i++) {
                if (chunk[i] != '\n') {
                    if (nline + 1 < sizeof line)
                        line[nline++] = chunk[i];
                    continue;
                }
                line[nline] = '\0';
                nline = 0;
                log_line(line, &incumbent, o);
            }
        }
        if (!(pfd[0].revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t r = read(fds[0], buf + have, full - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        if (have >= sizeof(answer_head)) {
            answer_head h;
            memcpy(&h, buf, sizeof h);
            want = h.has_x ? full : sizeof h;
        }
        if (have >= want && have >= sizeof(answer_head))
            break;
    }
    close(fds[0]);
    if (lfds[0] >= 0)
        close(lfds[0]);
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
        ;
    sol->seconds = cs_now() - t0;
    if (rc != CS_OK) {
        free(buf);
        return rc;
    }
    if (cancelled) {
        free(buf);
        return cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
    }
    if (killed) {
        free(buf);
        sol->status = MCF_NOSOLUTION;
        return CS_OK; /* the time limit ran out without an answer */
    }
    if (have < sizeof(answer_head)) {
        free(buf);
        if (WIFSIGNALED(wst)) {
            sol->signal = WTERMSIG(wst);
            return cs_error_set(err, CS_EINTERNAL, "",
                                "the %s solver process crashed without an answer (signal %d, %s)",
                                o->integer ? "CBC" : "CLP", sol->signal,
                                strsignal(sol->signal));
        }
        return cs_error_set(err, CS_EINTERNAL, "",
                            "the %s solver process ended without an answer (status %d)",
                            o->integer ? "CBC" : "CLP", wst);
    }
    answer_head h;
    memcpy(&h, buf, sizeof h);
    if (h.status < 0) {
        free(buf);
        return cs_error_set(err, CS_ENOMEM, "", "the solver process ran out of memory");
    }
    sol->status = h.status;
    sol->objective = h.objective;
    sol->bound = h.bound;
    if (h.has_x) {
        if (have < full) {
            free(buf);
            return cs_error_set(err, CS_EINTERNAL, "", "the solver's answer was cut short");
        }
        sol->x = malloc(sizeof(double) * (size_t)(m->ncols ? m->ncols : 1));
        if (!sol->x) {
            free(buf);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory for the solution");
        }
        memcpy(sol->x, buf + sizeof h, sizeof(double) * (size_t)m->ncols);
    } else if (sol->status == MCF_OPTIMAL || sol->status == MCF_FEASIBLE) {
        sol->status = MCF_NOSOLUTION;
    }
    free(buf);
    return CS_OK;
}
