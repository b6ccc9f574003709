/*
 * store_pg.c - the PostgreSQL engine of the store: a fixed pool of libpq
 * connections (a PGconn is not thread-safe; each is used by one thread at a
 * time), handed out under a mutex.  A connection found broken is reset before
 * use, so a restarted database server costs one failed request, not a restart
 * of the daemon.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_engine.h"

struct db_conn {
    PGconn *pg;
    bool busy;
};

typedef struct pg_impl {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int n;
    db_conn *conns;
} pg_impl;

static db_conn *pg_acquire(db_engine *e, cs_error *err)
{
    pg_impl *p = e->impl;
    pthread_mutex_lock(&p->lock);
    db_conn *c = NULL;
    for (;;) {
        for (int i = 0; i < p->n; i++)
            if (!p->conns[i].busy) {
                c = &p->conns[i];
                break;
            }
        if (c)
            break;
        pthread_cond_wait(&p->freed, &p->lock);
    }
    c->busy = true;
    pthread_mutex_unlock(&p->lock);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        PQreset(c->pg);
        if (PQstatus(c->pg) != CONNECTION_OK) {
            cs_error_set(err, CS_EIO, "store", "postgresql: %s", PQerrorMessage(c->pg));
            pthread_mutex_lock(&p->lock);
            c->busy = false;
            pthread_cond_signal(&p->freed);
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
    }
    return c;
}

static void pg_release(db_engine *e, db_conn *c)
{
    pg_impl *p = e->impl;
    pthread_mutex_lock(&p->lock);
    c->busy = false;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

static void trim_newline(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

static int pg_query_any(db_conn *c, const char *sql, int nparams, const char *const *params,
                        const int *lengths, bool binary, db_rows *rows, cs_error *err)
{
    if (rows)
        memset(rows, 0, sizeof *rows);
    int formats[16];
    if (lengths && nparams > 16)
        return cs_error_set(err, CS_EINTERNAL, "", "postgresql: too many binary parameters");
    for (int i = 0; lengths && i < nparams; i++)
        formats[i] = lengths[i] >= 0;
    PGresult *res = PQexecParams(c->pg, sql, nparams, NULL, params, lengths,
                                 lengths ? formats : NULL, binary ? 1 : 0);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c->pg));
        trim_newline(msg);
        PQclear(res);
        return cs_error_set(err, CS_EIO, "", "postgresql: %s", msg);
    }
    if (rows && st == PGRES_TUPLES_OK) {
        int n = PQntuples(res), m = PQnfields(res);
        rows->nrows = n;
        rows->ncols = m;
        rows->cells = calloc((size_t)n * (size_t)m + 1, sizeof(char *));
        if (binary)
            rows->lens = calloc((size_t)n * (size_t)m + 1, sizeof(size_t));
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++) {
                if (PQgetisnull(res, i, j))
                    continue;
                if (!binary) {
                    rows->cells[i * m + j] = strdup(PQgetvalue(res, i, j));
                    continue;
                }
                size_t len = (size_t)PQgetlength(res, i, j);
                char *cell = malloc(len + 1);
                if (cell) {
                    memcpy(cell, PQgetvalue(res, i, j), len);
                    cell[len] = '\0';
                }
                rows->cells[i * m + j] = cell;
                if (rows->lens)
                    rows->lens[i * m + j] = len;
            }
    }
    PQclear(res);
    return CS_OK;
}

static int pg_query(db_conn *c, const char *sql, int nparams, const char *const *params,
                    db_rows *rows, cs_error *err)
{
    return pg_query_any(c, sql, nparams, params, NULL, false, rows, err);
}

static int pg_query_bin(db_conn *c, const char *sql, int nparams, const char *const *params,
                        const int *lengths, db_rows *rows, cs_error *err)
{
    return pg_query_any(c, sql, nparams, params, lengths, true, rows, err);
}

static int pg_exec_script(db_conn *c, const char *sql, cs_error *err)
{
    PGresult *res = PQexec(c->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc = CS_OK;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c->pg));
        trim_newline(msg);
        rc = cs_error_set(err, CS_EIO, "", "postgresql: %s", msg);
    }
    PQclear(res);
    return rc;
}

static void pg_close(db_engine *e)
{
    pg_impl *p = e->impl;
    for (int i = 0; i < p->n; i++)
        if (p->conns[i].pg)
            PQfinish(p->conns[i].pg);
    free(p->conns);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p);
    free(e);
}

static void quiet_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* NOTICEs ("relation already exists") are not errors */
}

int pg_engine_open(const char *conninfo, int pool, db_engine **out, cs_error *err)
{
    if (pool < 1)
        pool = 1;
    pg_impl *p = calloc(1, sizeof *p);
    db_engine *e = calloc(1, sizeof *e);
    if (!p || !e || !(p->conns = calloc((size_t)pool, sizeof *p->conns))) {
        free(p ? p->conns : NULL);
        free(p);
        free(e);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    p->n = pool;
    e->name = "postgresql";
    e->skip_locked = true;
    e->impl = p;
    e->acquire = pg_acquire;
    e->release = pg_release;
    e->query = pg_query;
    e->query_bin = pg_query_bin;
    e->exec_script = pg_exec_script;
    e->close = pg_close;
    for (int i = 0; i < pool; i++) {
        p->conns[i].pg = PQconnectdb(conninfo);
        if (PQstatus(p->conns[i].pg) != CONNECTION_OK) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s", PQerrorMessage(p->conns[i].pg));
            trim_newline(msg);
            pg_close(e);
            return cs_error_set(err, CS_EIO, "store", "cannot connect to postgresql: %s", msg);
        }
        PQsetNoticeProcessor(p->conns[i].pg, quiet_notice, NULL);
    }
    *out = e;
    return CS_OK;
}
