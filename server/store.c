/*
 * store.c - the store's logic, written once over the engine interface
 * (store_engine.h): schema, result and artifact reads and writes, and the job
 * state machine queued -> running -> done | failed | cancelled.
 *
 * Every transition is a single conditional UPDATE (or an INSERT guarded by the
 * partial unique index), so two daemons racing on the same job cannot both
 * win: the loser's statement matches no row.  The one multi-statement
 * transaction is "store the result and mark the job done", so a job is never
 * done without its result.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_engine.h"

/* SQLite: result bodies larger than this live in files beside the database. */
#define STORE_FILE_MIN_BYTES (1u << 20)
#define CODEC_NAME "csrc1"

struct cs_store {
    db_engine *engine;
    char body_dir[4096];   /* SQLite: DB.bodies; "" for PostgreSQL */
};

static const char *const status_names[CS_JOB_STATUS_COUNT] = {"queued", "running", "done",
                                                              "failed", "cancelled"};

const char *job_status_name(cs_job_status s)
{
    return (unsigned)s < CS_JOB_STATUS_COUNT ? status_names[s] : "unknown";
}

int job_status_from_name(const char *name, cs_job_status *out)
{
    for (int i = 0; i < CS_JOB_STATUS_COUNT; i++)
        if (name && strcmp(name, status_names[i]) == 0) {
            *out = (cs_job_status)i;
            return CS_OK;
        }
    return CS_EINVAL;
}

void db_rows_free(db_rows *r)
{
    if (!r)
        return;
    free(r->lens);
    r->lens = NULL;
    if (!r->cells)
        return;
    for (int i = 0; i < r->nrows * r->ncols; i++)
        free(r->cells[i]);
    free(r->cells);
    r->cells = NULL;
    r->nrows = 0;
}

void store_job_clear(cs_store_job *j)
{
    free(j->request);
    free(j->progress);
    free(j->error);
    memset(j, 0, sizeof *j);
}

double store_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* BYTEA is PostgreSQL's byte string; SQLite stores the BLOBs bound to such a
 * column as they are (a type name it does not know has no conversions for
 * BLOBs). */
static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS results ("
    " key TEXT PRIMARY KEY, request TEXT NOT NULL, result TEXT NOT NULL,"
    " created DOUBLE PRECISION NOT NULL, codec TEXT, body BYTEA, file TEXT, bytes BIGINT);"
    "CREATE TABLE IF NOT EXISTS artifacts ("
    " key TEXT NOT NULL, format TEXT NOT NULL, variant TEXT NOT NULL, body TEXT NOT NULL,"
    " created DOUBLE PRECISION NOT NULL, encoding TEXT, zbody BYTEA,"
    " PRIMARY KEY (key, format, variant));"
    "CREATE TABLE IF NOT EXISTS jobs ("
    " id TEXT PRIMARY KEY, key TEXT NOT NULL, request TEXT NOT NULL, status TEXT NOT NULL,"
    " progress TEXT, error TEXT, owner TEXT, attempts INTEGER NOT NULL DEFAULT 0,"
    " cancel_requested INTEGER NOT NULL DEFAULT 0,"
    " time_limit_s DOUBLE PRECISION NOT NULL DEFAULT 0,"
    " created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL,"
    " heartbeat DOUBLE PRECISION);"
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_active_key ON jobs (key)"
    " WHERE status IN ('queued', 'running');"
    "CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, created);";

/* Stores created before the codec lack its columns: add them. */
static int migrate_schema(db_engine *e, db_conn *c, bool pg, cs_error *err)
{
    static const struct { const char *table, *column, *type; } cols[] = {
        {"results", "codec", "TEXT"},     {"results", "body", "BYTEA"},
        {"results", "file", "TEXT"},      {"results", "bytes", "BIGINT"},
        {"artifacts", "encoding", "TEXT"}, {"artifacts", "zbody", "BYTEA"}};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        const char *p[] = {cols[i].table, cols[i].column};
        db_rows rows;
        int rc = e->query(c,
                          pg ? "SELECT count(*) FROM information_schema.columns WHERE"
                               " table_name = $1 AND column_name = $2"
                               " AND table_schema = current_schema()"
                             : "SELECT count(*) FROM pragma_table_info($1) WHERE name = $2",
                          2, p, &rows, err);
        if (rc)
            return rc;
        bool have = rows.nrows > 0 && db_cell(&rows, 0, 0) && atol(db_cell(&rows, 0, 0)) > 0;
        db_rows_free(&rows);
        if (have)
            continue;
        char sql[200];
        snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s %s", cols[i].table,
                 cols[i].column, cols[i].type);
        if ((rc = e->exec_script(c, sql, err)))
            return rc;
    }
    return CS_OK;
}

/* Runs one statement on a connection of its own. */
static int run1(cs_store *s, const char *sql, int n, const char *const *params, db_rows *rows,
                cs_error *err)
{
    db_conn *c = s->engine->acquire(s->engine, err);
    if (!c)
        return CS_EIO;
    int rc = s->engine->query(c, sql, n, params, rows, err);
    s->engine->release(s->engine, c);
    return rc;
}

/* Runs one statement that RETURNs the rows it touched; *hit tells whether
 * any came back. */
static int run1_hit(cs_store *s, const char *sql, int n, const char *const *params, bool *hit,
                    cs_error *err)
{
    db_rows rows;
    int rc = run1(s, sql, n, params, &rows, err);
    if (rc)
        return rc;
    *hit = rows.nrows > 0;
    db_rows_free(&rows);
    return CS_OK;
}

static void fmt_time(char *buf, size_t n, double t) { snprintf(buf, n, "%.6f", t); }

static int mkdir_p(const char *dir, cs_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return cs_error_set(err, CS_EINVAL, "data_dir", "data dir path too long");
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
                return cs_error_set(err, CS_EIO, "data_dir", "cannot create %s: %s", tmp,
                                    strerror(errno));
            *p = '/';
        }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return cs_error_set(err, CS_EIO, "data_dir", "cannot create %s: %s", tmp,
                            strerror(errno));
    return CS_OK;
}

int store_open(const char *url, const char *data_dir, int pool, cs_store **out, cs_error *err)
{
    *out = NULL;
    db_engine *e = NULL;
    int rc;
    char body_dir[4096] = "";
    bool pg = url && (strncmp(url, "postgresql://", 13) == 0 ||
                      strncmp(url, "postgres://", 11) == 0);
    if (pg) {
        rc = pg_engine_open(url, pool, &e, err);
    } else {
        char path[4096];
        if (url && *url) {
            const char *p = strncmp(url, "sqlite:", 7) == 0 ? url + 7 : url;
            if (strncmp(p, "//", 2) == 0)
                p += 2; /* sqlite:///abs/path */
            snprintf(path, sizeof path, "%s", p);
        } else {
            const char *dir = data_dir && *data_dir ? data_dir : ".";
            if ((rc = mkdir_p(dir, err)))
                return rc;
            snprintf(path, sizeof path, "%s/collsynth.db", dir);
        }
        rc = sqlite_engine_open(path, &e, err);
        if (!rc)
            snprintf(body_dir, sizeof body_dir, "%.4000s.bodies", path);
    }
    if (rc)
        return rc;
    cs_store *s = calloc(1, sizeof *s);
    if (!s) {
        e->close(e);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    s->engine = e;
    snprintf(s->body_dir, sizeof s->body_dir, "%s", body_dir);
    db_conn *c = e->acquire(e, err);
    if (!c) {
        store_close(s);
        return CS_EIO;
    }
    /* Daemons starting together must not race on CREATE ... IF NOT EXISTS
     * (PostgreSQL can fail one of them): serialize with an advisory lock. */
    if (pg)
        rc = e->exec_script(c, "SELECT pg_advisory_lock(74291633);", err);
    if (!rc)
        rc = e->exec_script(c, schema_sql, err);
    if (!rc)
        rc = migrate_schema(e, c, pg, err);
    if (pg) {
        cs_error e2;
        e->exec_script(c, "SELECT pg_advisory_unlock(74291633);", &e2);
    }
    e->release(e, c);
    if (rc) {
        store_close(s);
        return rc;
    }
    *out = s;
    return CS_OK;
}

void store_close(cs_store *s)
{
    if (!s)
        return;
    if (s->engine)
        s->engine->close(s->engine);
    free(s);
}

const char *store_engine(const cs_store *s) { return s->engine->name; }

int store_ping(cs_store *s, cs_error *err)
{
    db_rows rows;
    int rc = run1(s, "SELECT 1", 0, NULL, &rows, err);
    db_rows_free(&rows);
    return rc;
}

/* ---- results and artifacts ------------------------------------------------------- */

/* run1 for query_bin. */
static int run1_bin(cs_store *s, const char *sql, int n, const char *const *params,
                    const int *lengths, db_rows *rows, cs_error *err)
{
    db_conn *c = s->engine->acquire(s->engine, err);
    if (!c)
        return CS_EIO;
    int rc = s->engine->query_bin(c, sql, n, params, lengths, rows, err);
    s->engine->release(s->engine, c);
    return rc;
}

void store_result_row_clear(cs_result_row *r)
{
    free(r->request);
    free(r->header);
    blob_unref(r->body);
    memset(r, 0, sizeof *r);
}

static void unmap_blob(cs_blob *b) { munmap(b->data, (size_t)(uintptr_t)b->owner); }

/* Maps a body file: read-only and shared, so readers cost one copy in the
 * page cache and nothing on the heap. */
static int map_body(cs_store *s, const char *file, long long bytes, cs_blob **out,
                    cs_error *err)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", s->body_dir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cs_error_set(err, CS_EIO, "key", "stored result body %s: %s", path,
                            strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != bytes || bytes <= 0) {
        close(fd);
        return cs_error_set(err, CS_EIO, "key",
                            "stored result body %s has %lld bytes, its row says %lld", path,
                            (long long)st.st_size, bytes);
    }
    void *p = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return cs_error_set(err, CS_EIO, "key", "cannot map %s: %s", path, strerror(errno));
    /* a mapping costs the memory cache little: the kernel pages it in and out */
    *out = blob_wrap(p, (size_t)bytes, 4096, unmap_blob, (void *)(uintptr_t)bytes);
    if (!*out) {
        munmap(p, (size_t)bytes);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    return CS_OK;
}

/* An inline body: the row's bytes, moved into a blob. */
static int read_body(cs_store *s, const char *key, cs_blob **out, cs_error *err)
{
    db_rows rows;
    const char *p[] = {key};
    int rc = run1_bin(s, "SELECT body FROM results WHERE key = $1", 1, p, NULL, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows == 0 || !rows.cells[0]) {
        db_rows_free(&rows);
        return cs_error_set(err, CS_EIO, "key", "result %s has no body", key);
    }
    *out = blob_adopt(rows.cells[0], rows.lens[0]);
    rows.cells[0] = NULL;
    db_rows_free(&rows);
    return *out ? CS_OK : cs_error_set(err, CS_ENOMEM, "", "out of memory");
}

int store_result_load(cs_store *s, const char *key, unsigned want, cs_result_row *out,
                      bool *found, cs_error *err)
{
    memset(out, 0, sizeof *out);
    *found = false;
    db_rows rows;
    const char *p[] = {key};
    int rc = run1(s,
                  (want & STORE_WANT_REQUEST)
                      ? "SELECT result, codec, file, bytes, request FROM results WHERE key = $1"
                      : "SELECT result, codec, file, bytes FROM results WHERE key = $1",
                  1, p, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows == 0) {
        db_rows_free(&rows);
        return CS_OK;
    }
    *found = true;
    out->header = rows.cells[0];
    rows.cells[0] = NULL;
    if (want & STORE_WANT_REQUEST) {
        out->request = rows.cells[4];
        rows.cells[4] = NULL;
    }
    const char *codec = db_cell(&rows, 0, 1), *file = db_cell(&rows, 0, 2);
    long long bytes = db_cell(&rows, 0, 3) ? atoll(db_cell(&rows, 0, 3)) : 0;
    out->legacy = codec == NULL;
    if (codec && strcmp(codec, CODEC_NAME) != 0)
        rc = cs_error_set(err, CS_EUNSUPPORTED, "key",
                          "result %s is stored as %s; this daemon reads " CODEC_NAME, key, codec);
    else if (!out->legacy && (want & STORE_WANT_BODY))
        rc = file ? map_body(s, file, bytes, &out->body, err) : read_body(s, key, &out->body, err);
    db_rows_free(&rows);
    if (rc)
        store_result_row_clear(out);
    return rc;
}

int store_result_exists(cs_store *s, const char *key, bool *found, cs_error *err)
{
    const char *p[] = {key};
    return run1_hit(s, "SELECT key FROM results WHERE key = $1", 1, p, found, err);
}

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

/* Writes a body file and makes it durable (file, then its directory) before
 * any row points at it.  The name is unique per write, so a second writer
 * of the same key never replaces the file the winning row names. */
static int write_body_file(cs_store *s, const char *key, const void *body, size_t len,
                           char *rel, size_t reln, cs_error *err)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%.2s", s->body_dir, key);
    int rc = mkdir_p(dir, err);
    if (rc)
        return rc;
    unsigned char r[6] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memcpy(r, &len, sizeof r < sizeof len ? sizeof r : sizeof len);
    snprintf(rel, reln, "%.2s/%s-%02x%02x%02x%02x%02x%02x.csrc", key, key, r[0], r[1], r[2],
             r[3], r[4], r[5]);
    char path[8400], tmp[8500];
    snprintf(path, sizeof path, "%s/%s", s->body_dir, rel);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return cs_error_set(err, CS_EIO, "", "cannot write %s: %s", tmp, strerror(errno));
    const char *p = body;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = cs_error_set(err, CS_EIO, "", "cannot write %s: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return rc;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        rc = cs_error_set(err, CS_EIO, "", "cannot sync %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return rc;
    }
    if (rename(tmp, path) != 0 || fsync_path(dir, O_RDONLY | O_DIRECTORY) != 0 ||
        fsync_path(s->body_dir, O_RDONLY | O_DIRECTORY) != 0) {
        rc = cs_error_set(err, CS_EIO, "", "cannot commit %s: %s", path, strerror(errno));
        unlink(tmp);
        return rc;
    }
    return CS_OK;
}

static void remove_body_file(cs_store *s, const char *rel)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", s->body_dir, rel);
    unlink(path);
}

/* Insert (or, migrate, update a legacy row) with the body in a file or in
 * the row; *won tells whether this call wrote the row. */
static int put_encoded(cs_store *s, const char *key, const char *request_json,
                       const char *header_json, const void *body, size_t len, bool migrate,
                       cs_error *err)
{
    if (len > (size_t)0x7fffffff && !s->body_dir[0])
        return cs_error_set(err, CS_ELIMIT, "", "an encoded result of %zu bytes is larger "
                                                "than a PostgreSQL row holds (2 GB)", len);
    char now[40], bytes[32], rel[200] = "";
    fmt_time(now, sizeof now, store_wall_time());
    snprintf(bytes, sizeof bytes, "%zu", len);
    bool in_file = s->body_dir[0] && len > STORE_FILE_MIN_BYTES;
    int rc;
    if (in_file && (rc = write_body_file(s, key, body, len, rel, sizeof rel, err)))
        return rc;
    const char *inline_body = in_file ? NULL : (const char *)body;
    const char *file = in_file ? rel : NULL;
    int blen = in_file ? -1 : (int)len;
    db_rows rows;
    if (migrate) {
        const char *p[] = {key, header_json, inline_body, file, bytes};
        const int lengths[] = {-1, -1, blen, -1, -1};
        rc = run1_bin(s,
                      "UPDATE results SET result = $2, codec = '" CODEC_NAME "', body = $3,"
                      " file = $4, bytes = CAST($5 AS BIGINT)"
                      " WHERE key = $1 AND codec IS NULL RETURNING key",
                      5, p, lengths, &rows, err);
    } else {
        const char *p[] = {key, request_json, header_json, now, inline_body, file, bytes};
        const int lengths[] = {-1, -1, -1, -1, blen, -1, -1};
        rc = run1_bin(s,
                      "INSERT INTO results (key, request, result, created, codec, body, file,"
                      " bytes) VALUES ($1, $2, $3, CAST($4 AS DOUBLE PRECISION), '" CODEC_NAME
                      "', $5, $6, CAST($7 AS BIGINT)) ON CONFLICT (key) DO NOTHING RETURNING key",
                      7, p, lengths, &rows, err);
    }
    bool won = rc == CS_OK && rows.nrows > 0;
    db_rows_free(&rows);
    if (in_file && !won)
        remove_body_file(s, rel); /* another writer (or no legacy row) won: keep its file */
    return rc;
}

int store_result_save(cs_store *s, const char *key, const char *request_json,
                      const char *header_json, const void *body, size_t len, cs_error *err)
{
    return put_encoded(s, key, request_json, header_json, body, len, false, err);
}

int store_result_migrate(cs_store *s, const char *key, const char *header_json,
                         const void *body, size_t len, cs_error *err)
{
    return put_encoded(s, key, NULL, header_json, body, len, true, err);
}

int store_result_put_json(cs_store *s, const char *key, const char *request_json,
                          const char *result_json, cs_error *err)
{
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    const char *p[] = {key, request_json, result_json, now};
    return run1(s,
                "INSERT INTO results (key, request, result, created) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (key) DO NOTHING",
                4, p, NULL, err);
}

long store_result_count(cs_store *s, cs_error *err)
{
    db_rows rows;
    if (run1(s, "SELECT count(*) FROM results", 0, NULL, &rows, err))
        return -1;
    long n = rows.nrows > 0 && db_cell(&rows, 0, 0) ? atol(db_cell(&rows, 0, 0)) : 0;
    db_rows_free(&rows);
    return n;
}

int store_artifact_get(cs_store *s, const char *key, const char *format, const char *variant,
                       cs_blob **body, bool *zstd, bool *found, cs_error *err)
{
    *found = false;
    *body = NULL;
    *zstd = false;
    db_rows rows;
    const char *p[] = {key, format, variant};
    int rc = run1_bin(s,
                      "SELECT encoding, zbody, body FROM artifacts"
                      " WHERE key = $1 AND format = $2 AND variant = $3",
                      3, p, NULL, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows > 0) {
        *zstd = db_cell(&rows, 0, 0) && strcmp(db_cell(&rows, 0, 0), "zstd") == 0;
        int col = *zstd ? 1 : 2;
        if (rows.cells[col]) {
            *body = blob_adopt(rows.cells[col], rows.lens[col]);
            rows.cells[col] = NULL;
            if (!*body)
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            *found = rc == CS_OK;
        }
    }
    db_rows_free(&rows);
    return rc;
}

int store_artifact_put(cs_store *s, const char *key, const char *format, const char *variant,
                       const void *zbody, size_t len, cs_error *err)
{
    if (len > (size_t)0x7fffffff)
        return cs_error_set(err, CS_ELIMIT, "", "a compressed document of %zu bytes is too "
                                                "large to store", len);
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    const char *p[] = {key, format, variant, zbody, now};
    const int lengths[] = {-1, -1, -1, (int)len, -1};
    db_rows rows;
    int rc = run1_bin(s,
                      "INSERT INTO artifacts (key, format, variant, body, created, encoding, zbody)"
                      " VALUES ($1, $2, $3, '', CAST($5 AS DOUBLE PRECISION), 'zstd', $4)"
                      " ON CONFLICT (key, format, variant) DO NOTHING",
                      5, p, lengths, &rows, err);
    db_rows_free(&rows);
    return rc;
}

/* ---- jobs ---------------------------------------------------------------------------- */

int store_job_submit(cs_store *s, const char *new_id, const char *key, const char *request_json,
                     double time_limit_s, long max_queued, cs_submit *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    for (int attempt = 0; attempt < 5; attempt++) {
        bool found;
        int rc = store_result_exists(s, key, &found, err);
        if (rc)
            return rc;
        if (found) {
            out->outcome = CS_SUBMIT_CACHED;
            return CS_OK;
        }
        db_rows rows;
        const char *pk[] = {key};
        rc = run1(s, "SELECT id FROM jobs WHERE key = $1 AND status IN ('queued', 'running')", 1,
                  pk, &rows, err);
        if (rc)
            return rc;
        if (rows.nrows > 0) {
            snprintf(out->job_id, sizeof out->job_id, "%s", db_cell(&rows, 0, 0));
            db_rows_free(&rows);
            out->outcome = CS_SUBMIT_JOINED;
            return CS_OK;
        }
        db_rows_free(&rows);
        if (max_queued > 0) {
            rc = run1(s, "SELECT count(*) FROM jobs WHERE status = 'queued'", 0, NULL, &rows, err);
            if (rc)
                return rc;
            long queued = rows.nrows > 0 ? atol(db_cell(&rows, 0, 0)) : 0;
            db_rows_free(&rows);
            if (queued >= max_queued) {
                out->outcome = CS_SUBMIT_FULL;
                return CS_OK;
            }
        }
        char now[40], tl[40];
        fmt_time(now, sizeof now, store_wall_time());
        snprintf(tl, sizeof tl, "%.3f", time_limit_s);
        const char *pi[] = {new_id, key, request_json, tl, now};
        bool inserted;
        rc = run1_hit(s,
                      "INSERT INTO jobs (id, key, request, status, time_limit_s, created, updated)"
                      " VALUES ($1, $2, $3, 'queued', $4, $5, $5)"
                      " ON CONFLICT (key) WHERE status IN ('queued', 'running') DO NOTHING"
                      " RETURNING id",
                      5, pi, &inserted, err);
        if (rc)
            return rc;
        if (inserted) {
            snprintf(out->job_id, sizeof out->job_id, "%s", new_id);
            out->outcome = CS_SUBMIT_CREATED;
            return CS_OK;
        }
        /* Lost a race with another submitter: look again. */
    }
    return cs_error_set(err, CS_EIO, "", "could not submit the job: the store kept changing");
}

static void fill_job(const db_rows *r, int row, cs_store_job *j)
{
    /* columns: id, key, status, request, progress, error, owner, attempts,
     * cancel_requested, time_limit_s, created, updated, heartbeat */
    memset(j, 0, sizeof *j);
    snprintf(j->id, sizeof j->id, "%s", db_cell(r, row, 0) ? db_cell(r, row, 0) : "");
    snprintf(j->key, sizeof j->key, "%s", db_cell(r, row, 1) ? db_cell(r, row, 1) : "");
    if (job_status_from_name(db_cell(r, row, 2), &j->status) != CS_OK)
        j->status = CS_JOB_FAILED;
    j->request = db_cell(r, row, 3) ? strdup(db_cell(r, row, 3)) : NULL;
    j->progress = db_cell(r, row, 4) ? strdup(db_cell(r, row, 4)) : NULL;
    j->error = db_cell(r, row, 5) ? strdup(db_cell(r, row, 5)) : NULL;
    snprintf(j->owner, sizeof j->owner, "%s", db_cell(r, row, 6) ? db_cell(r, row, 6) : "");
    j->attempts = db_cell(r, row, 7) ? atoi(db_cell(r, row, 7)) : 0;
    j->cancel_requested = db_cell(r, row, 8) && atoi(db_cell(r, row, 8)) != 0;
    j->time_limit_s = db_cell(r, row, 9) ? strtod(db_cell(r, row, 9), NULL) : 0;
    j->created = db_cell(r, row, 10) ? strtod(db_cell(r, row, 10), NULL) : 0;
    j->updated = db_cell(r, row, 11) ? strtod(db_cell(r, row, 11), NULL) : 0;
    j->heartbeat = db_cell(r, row, 12) ? strtod(db_cell(r, row, 12), NULL) : 0;
}

#define JOB_COLUMNS                                                                          \
    "id, key, status, request, progress, error, owner, attempts, cancel_requested,"         \
    " time_limit_s, created, updated, heartbeat"

int store_job_claim(cs_store *s, const char *owner, cs_store_job *out, bool *claimed,
                    cs_error *err)
{
    *claimed = false;
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    const char *p[] = {owner, now};
    const char *sql =
        s->engine->skip_locked
            ? "UPDATE jobs SET status = 'running', owner = $1, heartbeat = $2, updated = $2,"
              " attempts = attempts + 1"
              " WHERE status = 'queued' AND id = (SELECT id FROM jobs WHERE status = 'queued'"
              " ORDER BY created, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
              " RETURNING " JOB_COLUMNS
            : "UPDATE jobs SET status = 'running', owner = $1, heartbeat = $2, updated = $2,"
              " attempts = attempts + 1"
              " WHERE status = 'queued' AND id = (SELECT id FROM jobs WHERE status = 'queued'"
              " ORDER BY created, id LIMIT 1)"
              " RETURNING " JOB_COLUMNS;
    db_rows rows;
    int rc = run1(s, sql, 2, p, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows > 0) {
        fill_job(&rows, 0, out);
        *claimed = true;
    }
    db_rows_free(&rows);
    return CS_OK;
}

int store_job_heartbeat(cs_store *s, const char *id, const char *owner, const char *progress,
                        bool *cancel_requested, bool *still_owner, cs_error *err)
{
    *cancel_requested = false;
    *still_owner = false;
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    const char *p[] = {id, owner, now, progress};
    db_rows rows;
    int rc = run1(s,
                  "UPDATE jobs SET heartbeat = $3, updated = $3, progress = COALESCE($4, progress)"
                  " WHERE id = $1 AND owner = $2 AND status = 'running'"
                  " RETURNING cancel_requested",
                  4, p, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows > 0) {
        *still_owner = true;
        *cancel_requested = db_cell(&rows, 0, 0) && atoi(db_cell(&rows, 0, 0)) != 0;
    }
    db_rows_free(&rows);
    return CS_OK;
}

int store_job_finish(cs_store *s, const char *id, const char *owner, cs_job_status status,
                     const char *key, const char *request_json, const char *result_json,
                     const char *error_json, cs_error *err)
{
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    if (status == CS_JOB_DONE) {
        if (!key || !request_json)
            return cs_error_set(err, CS_EINTERNAL, "", "a done job needs its result");
        db_conn *c = s->engine->acquire(s->engine, err);
        if (!c)
            return CS_EIO;
        db_engine *e = s->engine;
        int rc = e->query(c, e->skip_locked ? "BEGIN" : "BEGIN IMMEDIATE", 0, NULL, NULL, err);
        if (!rc && result_json) {
            const char *pr[] = {key, request_json, result_json, now};
            rc = e->query(c,
                          "INSERT INTO results (key, request, result, created)"
                          " VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING",
                          4, pr, NULL, err);
        } else if (!rc) {
            /* saved beforehand (store_result_save): done needs it there */
            db_rows rows;
            const char *pk[] = {key};
            rc = e->query(c, "SELECT key FROM results WHERE key = $1", 1, pk, &rows, err);
            if (!rc && rows.nrows == 0)
                rc = cs_error_set(err, CS_EINTERNAL, "", "job %s done without a stored result",
                                  id);
            db_rows_free(&rows);
        }
        if (!rc) {
            /* Done wins over any state but a finished one: even if the job was
             * reaped meanwhile, its result is good. */
            const char *pj[] = {id, now};
            rc = e->query(c,
                          "UPDATE jobs SET status = 'done', error = NULL, updated = $2"
                          " WHERE id = $1 AND status IN ('queued', 'running')",
                          2, pj, NULL, err);
        }
        if (!rc)
            rc = e->query(c, "COMMIT", 0, NULL, NULL, err);
        if (rc) {
            cs_error e2;
            e->query(c, "ROLLBACK", 0, NULL, NULL, &e2);
        }
        e->release(e, c);
        return rc;
    }
    if (status == CS_JOB_QUEUED) {
        const char *p[] = {id, owner, now};
        return run1(s,
                    "UPDATE jobs SET status = 'queued', owner = NULL, heartbeat = NULL,"
                    " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                    " updated = $3 WHERE id = $1 AND owner = $2 AND status = 'running'",
                    3, p, NULL, err);
    }
    if (status != CS_JOB_FAILED && status != CS_JOB_CANCELLED)
        return cs_error_set(err, CS_EINTERNAL, "", "cannot finish a job as %s",
                            job_status_name(status));
    const char *p[] = {id, owner, job_status_name(status), error_json, now};
    return run1(s,
                "UPDATE jobs SET status = $3, error = $4, updated = $5"
                " WHERE id = $1 AND owner = $2 AND status = 'running'",
                5, p, NULL, err);
}

int store_job_get(cs_store *s, const char *id, cs_store_job *out, bool *found, cs_error *err)
{
    *found = false;
    db_rows rows;
    const char *p[] = {id};
    int rc = run1(s, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = $1", 1, p, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows > 0) {
        fill_job(&rows, 0, out);
        *found = true;
    }
    db_rows_free(&rows);
    return CS_OK;
}

int store_job_cancel(cs_store *s, const char *id, cs_job_status *status_after, bool *found,
                     cs_error *err)
{
    *found = false;
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    const char *errjson =
        "{\"code\":\"cancelled\",\"message\":\"cancelled by a client\",\"field\":\"\"}";
    const char *p[] = {id, now, errjson};
    bool hit;
    int rc = run1_hit(s,
                      "UPDATE jobs SET status = 'cancelled', error = $3, updated = $2"
                      " WHERE id = $1 AND status = 'queued' RETURNING id",
                      3, p, &hit, err);
    if (rc)
        return rc;
    if (hit) {
        *found = true;
        *status_after = CS_JOB_CANCELLED;
        return CS_OK;
    }
    rc = run1_hit(s,
                  "UPDATE jobs SET cancel_requested = 1, updated = $2"
                  " WHERE id = $1 AND status = 'running' RETURNING id",
                  2, p, &hit, err);
    if (rc)
        return rc;
    if (hit) {
        *found = true;
        *status_after = CS_JOB_RUNNING;
        return CS_OK;
    }
    cs_store_job j;
    rc = store_job_get(s, id, &j, found, err);
    if (rc == CS_OK && *found) {
        *status_after = j.status;
        store_job_clear(&j);
    }
    return rc;
}

int store_job_reap(cs_store *s, double lease_s, int max_attempts, int *requeued, int *failed,
                   cs_error *err)
{
    *requeued = *failed = 0;
    double now = store_wall_time();
    char cutoff[40], nows[40], maxa[24];
    fmt_time(cutoff, sizeof cutoff, lease_s < 0 ? now + 1e9 : now - lease_s);
    fmt_time(nows, sizeof nows, now);
    snprintf(maxa, sizeof maxa, "%d", max_attempts);
    db_rows rows;
    const char *pc[] = {cutoff, nows,
                        "{\"code\":\"cancelled\",\"message\":\"cancelled by a client (the "
                        "daemon running it stopped)\",\"field\":\"\"}"};
    int rc = run1(s,
                  "UPDATE jobs SET status = 'cancelled', owner = NULL, error = $3, updated = $2"
                  " WHERE status = 'running' AND (heartbeat IS NULL OR heartbeat < $1)"
                  " AND cancel_requested = 1 RETURNING id",
                  3, pc, &rows, err);
    if (rc)
        return rc;
    db_rows_free(&rows);
    char msg[256];
    snprintf(msg, sizeof msg,
             "{\"code\":\"interrupted\",\"message\":\"interrupted: the daemon running it stopped"
             " %d times\",\"field\":\"\"}",
             max_attempts);
    const char *pf[] = {cutoff, maxa, msg, nows};
    rc = run1(s,
              "UPDATE jobs SET status = 'failed', owner = NULL, error = $3, updated = $4"
              " WHERE status = 'running' AND (heartbeat IS NULL OR heartbeat < $1)"
              " AND attempts >= $2 RETURNING id",
              4, pf, &rows, err);
    if (rc)
        return rc;
    *failed = rows.nrows;
    db_rows_free(&rows);
    const char *pq[] = {cutoff, nows};
    rc = run1(s,
              "UPDATE jobs SET status = 'queued', owner = NULL, heartbeat = NULL, updated = $2"
              " WHERE status = 'running' AND (heartbeat IS NULL OR heartbeat < $1) RETURNING id",
              2, pq, &rows, err);
    if (rc)
        return rc;
    *requeued = rows.nrows;
    db_rows_free(&rows);
    return CS_OK;
}

int store_job_counts(cs_store *s, long counts[CS_JOB_STATUS_COUNT], cs_error *err)
{
    for (int i = 0; i < CS_JOB_STATUS_COUNT; i++)
        counts[i] = 0;
    db_rows rows;
    int rc = run1(s, "SELECT status, count(*) FROM jobs GROUP BY status", 0, NULL, &rows, err);
    if (rc)
        return rc;
    for (int i = 0; i < rows.nrows; i++) {
        cs_job_status st;
        if (job_status_from_name(db_cell(&rows, i, 0), &st) == CS_OK)
            counts[st] = atol(db_cell(&rows, i, 1));
    }
    db_rows_free(&rows);
    return CS_OK;
}
