/*
 * store_sqlite.c - the SQLite engine of the store: one connection behind a
 * mutex (SQLite has a single writer anyway, and the daemon's hot reads are
 * served from its memory cache, so one connection is not the bottleneck).
 *
 * Durability: journal_mode=WAL with synchronous=FULL.  With WAL, NORMAL
 * already survives a process crash (SIGKILL: the WAL frames are in the OS page
 * cache when COMMIT returns), but a power loss can roll back the last commits;
 * FULL fsyncs the WAL on every commit, so "acknowledged" means "on disk".  Our
 * write rate (job transitions, one result per synthesis, progress every
 * second per running job) makes the fsync cost irrelevant.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_engine.h"

struct db_conn {
    sqlite3 *db;
};

typedef struct sqlite_impl {
    pthread_mutex_t lock;
    db_conn conn;
} sqlite_impl;

static db_conn *sq_acquire(db_engine *e, cs_error *err)
{
    (void)err;
    sqlite_impl *s = e->impl;
    pthread_mutex_lock(&s->lock);
    return &s->conn;
}

static void sq_release(db_engine *e, db_conn *c)
{
    (void)c;
    sqlite_impl *s = e->impl;
    pthread_mutex_unlock(&s->lock);
}

static int sq_query_any(db_conn *c, const char *sql, int nparams, const char *const *params,
                        const int *lengths, bool binary, db_rows *rows, cs_error *err)
{
    sqlite3_stmt *st = NULL;
    if (rows)
        memset(rows, 0, sizeof *rows);
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK)
        return cs_error_set(err, CS_EIO, "", "sqlite: %s", sqlite3_errmsg(c->db));
    for (int i = 0; i < nparams; i++) {
        char name[16];
        snprintf(name, sizeof name, "$%d", i + 1);
        int idx = sqlite3_bind_parameter_index(st, name);
        if (idx == 0)
            continue;
        int rc = !params[i]                      ? sqlite3_bind_null(st, idx)
                 : lengths && lengths[i] >= 0   ? sqlite3_bind_blob(st, idx, params[i], lengths[i],
                                                                   SQLITE_STATIC)
                                                : sqlite3_bind_text(st, idx, params[i], -1,
                                                                    SQLITE_TRANSIENT);
        if (rc != SQLITE_OK) {
            sqlite3_finalize(st);
            return cs_error_set(err, CS_EIO, "", "sqlite bind: %s", sqlite3_errmsg(c->db));
        }
    }
    int ncols = sqlite3_column_count(st);
    int cap = 0, n = 0;
    char **cells = NULL;
    size_t *lens = NULL;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!rows)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            size_t m = (size_t)cap * (size_t)(ncols ? ncols : 1);
            char **nc = realloc(cells, sizeof(char *) * m);
            if (nc)
                cells = nc;
            size_t *nl = binary ? realloc(lens, sizeof(size_t) * m) : NULL;
            if (nl)
                lens = nl;
            if (!nc || (binary && !nl)) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
        for (int j = 0; j < ncols; j++) {
            char *cell = NULL;
            size_t len = 0;
            if (binary && sqlite3_column_type(st, j) != SQLITE_NULL) {
                const void *b = sqlite3_column_blob(st, j);
                len = (size_t)sqlite3_column_bytes(st, j);
                if ((cell = malloc(len + 1))) {
                    if (len)
                        memcpy(cell, b, len);
                    cell[len] = '\0';
                }
            } else {
                const unsigned char *t = sqlite3_column_text(st, j);
                cell = t ? strdup((const char *)t) : NULL;
            }
            cells[n * ncols + j] = cell;
            if (binary)
                lens[n * ncols + j] = len;
        }
        n++;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        int ret = cs_error_set(err, CS_EIO, "", "sqlite: %s", sqlite3_errmsg(c->db));
        sqlite3_finalize(st);
        db_rows tmp = {n, ncols, cells, lens};
        db_rows_free(&tmp);
        return ret;
    }
    sqlite3_finalize(st);
    if (rows) {
        rows->nrows = n;
        rows->ncols = ncols;
        rows->cells = cells;
        rows->lens = lens;
    } else {
        free(lens);
    }
    return CS_OK;
}

static int sq_query(db_conn *c, const char *sql, int nparams, const char *const *params,
                    db_rows *rows, cs_error *err)
{
    return sq_query_any(c, sql, nparams, params, NULL, false, rows, err);
}

static int sq_query_bin(db_conn *c, const char *sql, int nparams, const char *const *params,
                        const int *lengths, db_rows *rows, cs_error *err)
{
    return sq_query_any(c, sql, nparams, params, lengths, true, rows, err);
}

static int sq_exec_script(db_conn *c, const char *sql, cs_error *err)
{
    char *msg = NULL;
    if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int rc = cs_error_set(err, CS_EIO, "", "sqlite: %s", msg ? msg : "error");
        sqlite3_free(msg);
        return rc;
    }
    return CS_OK;
}

static void sq_close(db_engine *e)
{
    sqlite_impl *s = e->impl;
    if (s->conn.db) {
        /* a clean close checkpoints the WAL into the database file */
        sqlite3_close(s->conn.db);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
    free(e);
}

int sqlite_engine_open(const char *path, db_engine **out, cs_error *err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        /* "unable to open database file" alone does not say why: the
         * system's errno does (Permission denied, Not a directory, ...) */
        int sys = db ? sqlite3_system_errno(db) : 0;
        int rc = cs_error_set(err, CS_EIO, "store", "cannot open sqlite database %s: %s%s%s%s",
                              path, db ? sqlite3_errmsg(db) : "out of memory",
                              sys ? " (" : "", sys ? strerror(sys) : "", sys ? ")" : "");
        sqlite3_close(db);
        return rc;
    }
    sqlite3_busy_timeout(db, 10000);
    char *msg = NULL;
    if (sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "PRAGMA foreign_keys=ON;",
                     NULL, NULL, &msg) != SQLITE_OK) {
        int rc = cs_error_set(err, CS_EIO, "store", "sqlite %s: %s", path, msg ? msg : "error");
        sqlite3_free(msg);
        sqlite3_close(db);
        return rc;
    }
    sqlite_impl *s = calloc(1, sizeof *s);
    db_engine *e = calloc(1, sizeof *e);
    if (!s || !e) {
        free(s);
        free(e);
        sqlite3_close(db);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    pthread_mutex_init(&s->lock, NULL);
    s->conn.db = db;
    e->name = "sqlite";
    e->skip_locked = false;
    e->impl = s;
    e->acquire = sq_acquire;
    e->release = sq_release;
    e->query = sq_query;
    e->query_bin = sq_query_bin;
    e->exec_script = sq_exec_script;
    e->close = sq_close;
    *out = e;
    return CS_OK;
}
