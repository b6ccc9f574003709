/*
 * store_engine.h - what store.c needs from a database engine (private to the
 * store): connections, text-parameter queries and transactions.  store.c
 * holds every SQL statement and all the job logic once; the engines only move
 * text in and out, so SQLite and PostgreSQL behave alike by construction.
 *
 * SQL uses $1, $2, ... placeholders (PostgreSQL's; SQLite binds them by name).
 * Every parameter and cell is text or NULL; the schema's column types make
 * the database convert (numeric affinity in SQLite, inferred types in libpq).
 * The one exception is query_bin, for encoded results and compressed
 * artifacts: parameters with a length >= 0 are bytes (BYTEA in PostgreSQL, a
 * BLOB in SQLite), and the cells come back as bytes with their lengths (so a
 * binary query selects only text and BYTEA columns).
 */
#ifndef CS_STORE_ENGINE_H
#define CS_STORE_ENGINE_H

#include "store.h"

typedef struct db_rows {
    int nrows, ncols;
    char **cells;          /* nrows * ncols, row-major; NULL for SQL NULL */
    size_t *lens;          /* query_bin only: each cell's length (cells stay NUL-terminated) */
} db_rows;

void db_rows_free(db_rows *r);
static inline const char *db_cell(const db_rows *r, int row, int col)
{
    return r->cells[row * r->ncols + col];
}

typedef struct db_conn db_conn;

typedef struct db_engine {
    const char *name;          /* "sqlite", "postgresql" */
    bool skip_locked;          /* supports FOR UPDATE SKIP LOCKED */
    void *impl;
    /* Blocks until a connection is free; NULL (with err) if none can be had. */
    db_conn *(*acquire)(struct db_engine *e, cs_error *err);
    void (*release)(struct db_engine *e, db_conn *c);
    /* rows may be NULL when the statement returns nothing of interest. */
    int (*query)(db_conn *c, const char *sql, int nparams, const char *const *params,
                 db_rows *rows, cs_error *err);
    /* query with bytes: lengths[i] >= 0 marks parameter i as lengths[i] bytes
     * (lengths may be NULL: all text); cells come back as bytes, with lens. */
    int (*query_bin)(db_conn *c, const char *sql, int nparams, const char *const *params,
                     const int *lengths, db_rows *rows, cs_error *err);
    /* Runs a script of statements without parameters (schema). */
    int (*exec_script)(db_conn *c, const char *sql, cs_error *err);
    void (*close)(struct db_engine *e);
} db_engine;

int sqlite_engine_open(const char *path, db_engine **out, cs_error *err);
int pg_engine_open(const char *conninfo, int pool, db_engine **out, cs_error *err);

#endif
