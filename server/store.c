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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
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
    char path[4096];     /* SQLite: the database file; "" for PostgreSQL */
    int lock_fd;         /* store_lock_exclusive's lock file, -1 when none */
    cs_store_observer observe;
    void *observe_ctx;
    /* The latest failed write (store_write_failure): a full disk fails the
     * large writes (results) while small ones and reads, and so store_ping,
     * may still succeed. */
    pthread_mutex_t wlock;
    double write_fail_at;
    unsigned long write_failures;
    char write_error[CS_ERROR_MESSAGE_MAX];
};

/* Records a failed write (statements, commits, body files). */
static void note_write(cs_store *s, int rc, const cs_error *err)
{
    if (rc == CS_OK)
        return;
    pthread_mutex_lock(&s->wlock);
    s->write_fail_at = cs_now();
    s->write_failures++;
    snprintf(s->write_error, sizeof s->write_error, "%s",
             err && err->message[0] ? err->message : "write failed");
    pthread_mutex_unlock(&s->wlock);
}

bool store_write_failure(cs_store *s, double *ago_s, char *msg, size_t n)
{
    pthread_mutex_lock(&s->wlock);
    bool any = s->write_failures > 0;
    if (any) {
        if (ago_s)
            *ago_s = cs_now() - s->write_fail_at;
        if (msg && n)
            snprintf(msg, n, "%s", s->write_error);
    }
    pthread_mutex_unlock(&s->wlock);
    return any;
}

void store_set_observer(cs_store *s, cs_store_observer fn, void *ctx)
{
    s->observe = fn;
    s->observe_ctx = ctx;
}

/* Reports a statement to the observer: reads are SELECTs, COMMIT ends a
 * transaction, everything else writes. */
static void observed(cs_store *s, const char *sql, double t0, int rc, const cs_error *err)
{
    int op = !strncmp(sql, "SELECT", 6) ? 0 : !strncmp(sql, "COMMIT", 6) ? 2 : 1;
    if (op != 0)
        note_write(s, rc, err);
    if (!s->observe)
        return;
    s->observe(s->observe_ctx, op, cs_now() - t0, rc == CS_OK);
}

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

/* Job handles (one per submission that created or joined a job) and the
 * jobs' waiter count.  Kept apart from schema_sql: a store made before them
 * gets the column by migrate_jobs(). */
static const char handles_sql[] =
    "CREATE TABLE IF NOT EXISTS job_handles ("
    " id TEXT PRIMARY KEY, job_id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,"
    " detached INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS job_handles_by_job ON job_handles (job_id);";

/* The results list reads summaries from here (filled when results are
 * stored), never the result documents. */
static const char lists_sql[] =
    "CREATE TABLE IF NOT EXISTS result_index ("
    " key TEXT PRIMARY KEY, topology TEXT NOT NULL, collective TEXT NOT NULL,"
    " root INTEGER NOT NULL DEFAULT -1, method TEXT NOT NULL, ranks INTEGER NOT NULL,"
    " nalgs INTEGER NOT NULL, created_us BIGINT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS result_index_by_created ON result_index (created_us, key);";

/* The isomorphism index (store.h).  Its own statement, run at every open:
 * stores made before it simply get the table. */
static const char iso_sql[] =
    "CREATE TABLE IF NOT EXISTS iso_index ("
    " iso_key TEXT NOT NULL, key TEXT NOT NULL, labelling TEXT NOT NULL,"
    " created DOUBLE PRECISION NOT NULL, PRIMARY KEY (iso_key, key));";

/* Newest first by microseconds: computed in SQL, so a cursor names a row
 * exactly (REAL columns do not survive a round trip through text). */
#define JOB_CREATED_US "CAST(created * 1000000 AS BIGINT)"

static int migrate_jobs(db_engine *e, db_conn *c, cs_error *err)
{
    int rc = e->exec_script(c, handles_sql, err);
    if (!rc)
        rc = e->exec_script(c, lists_sql, err);
    if (rc)
        return rc;
    cs_error probe;
    if (e->query(c, "SELECT waiters FROM jobs LIMIT 0", 0, NULL, NULL, &probe) != CS_OK)
        rc = e->exec_script(c, "ALTER TABLE jobs ADD COLUMN waiters INTEGER NOT NULL DEFAULT 0;",
                            err);
    if (!rc && e->query(c, "SELECT method FROM jobs LIMIT 0", 0, NULL, NULL, &probe) != CS_OK)
        rc = e->exec_script(c,
                            "ALTER TABLE jobs ADD COLUMN topology TEXT;"
                            "ALTER TABLE jobs ADD COLUMN collective TEXT;"
                            "ALTER TABLE jobs ADD COLUMN root INTEGER;"
                            "ALTER TABLE jobs ADD COLUMN method TEXT;"
                            "ALTER TABLE jobs ADD COLUMN ranks INTEGER;",
                            err);
    if (!rc)
        rc = e->exec_script(c, "CREATE INDEX IF NOT EXISTS jobs_by_created_us ON jobs"
                               " ((" JOB_CREATED_US "), id);",
                            err);
    return rc;
}

void store_new_id(char out[40])
{
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        /* never expected; fall back to time and address entropy */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x = (unsigned long long)ts.tv_nsec ^
                               ((unsigned long long)ts.tv_sec << 20) ^
                               (unsigned long long)(size_t)out;
        for (int i = 0; i < 16; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            r[i] = (unsigned char)(x >> 56);
        }
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[32] = '\0';
}

/* Runs one statement on a connection of its own. */
static int run1(cs_store *s, const char *sql, int n, const char *const *params, db_rows *rows,
                cs_error *err)
{
    double t0 = cs_now();
    db_conn *c = s->engine->acquire(s->engine, err);
    if (!c) {
        observed(s, sql, t0, CS_EIO, err);
        return CS_EIO;
    }
    int rc = s->engine->query(c, sql, n, params, rows, err);
    s->engine->release(s->engine, c);
    observed(s, sql, t0, rc, err);
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
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        return cs_error_set(err, CS_EIO, "data_dir", "%s is not a directory", tmp);
    return CS_OK;
}

int store_open(const char *url, const char *data_dir, int pool, cs_store **out, cs_error *err)
{
    *out = NULL;
    db_engine *e = NULL;
    int rc;
    char body_dir[4096] = "";
    char path[4096] = "";
    bool pg = url && (strncmp(url, "postgresql://", 13) == 0 ||
                      strncmp(url, "postgres://", 11) == 0);
    if (pg) {
        rc = pg_engine_open(url, pool, &e, err);
    } else {
        if (url && *url) {
            /* "mysql://...", "postgresq://..." (a typo): never a file name to
             * create in the working directory */
            const char *scheme_end = strstr(url, "://");
            if (scheme_end && strncmp(url, "sqlite:", 7) != 0)
                return cs_error_set(err, CS_EINVAL, "store",
                                    "unknown store '%.*s://...' (sqlite:PATH, a path, or "
                                    "postgresql://user@host:port/db)",
                                    (int)(scheme_end - url), url);
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
    pthread_mutex_init(&s->wlock, NULL);
    snprintf(s->body_dir, sizeof s->body_dir, "%s", body_dir);
    s->lock_fd = -1;
    snprintf(s->path, sizeof s->path, "%s", path);
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
    if (!rc)
        rc = migrate_jobs(e, c, err);
    if (!rc)
        rc = e->exec_script(c, iso_sql, err);
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
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the lock; the file stays for the next owner */
    pthread_mutex_destroy(&s->wlock);
    free(s);
}

int store_lock_exclusive(cs_store *s, const char *owner, bool *exclusive, cs_error *err)
{
    *exclusive = false;
    if (!s->path[0])
        return CS_OK; /* PostgreSQL: a fleet shares it, leases decide */
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s.lock", s->path);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return cs_error_set(err, CS_EIO, "store", "cannot open the lock file %s: %s", lock_path,
                            strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[160] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return cs_error_set(err, CS_EIO, "store",
                                "the SQLite store %s is in use by another collsynthd (%s); "
                                "one daemon per SQLite store (a fleet shares PostgreSQL)",
                                s->path, holder[0] ? holder : "unknown");
        return cs_error_set(err, CS_EIO, "store", "cannot lock %s: %s", lock_path, strerror(e));
    }
    /* Who holds it, for the message a second daemon prints. */
    char who[160];
    int n = snprintf(who, sizeof who, "pid %d, instance %s\n", (int)getpid(), owner);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, who, (size_t)n, 0) != n) {
        /* the lock holds without the note; the refusal then says "unknown" */
    }
    s->lock_fd = fd;
    *exclusive = true;
    return CS_OK;
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
    double t0 = cs_now();
    db_conn *c = s->engine->acquire(s->engine, err);
    if (!c) {
        observed(s, sql, t0, CS_EIO, err);
        return CS_EIO;
    }
    int rc = s->engine->query_bin(c, sql, n, params, lengths, rows, err);
    s->engine->release(s->engine, c);
    observed(s, sql, t0, rc, err);
    return rc;
}

void store_result_clear(cs_stored_result *r)
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

int store_result_load(cs_store *s, const char *key, unsigned want, cs_stored_result *out,
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
        store_result_clear(out);
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
static int write_body_file_(cs_store *s, const char *key, const void *body, size_t len,
                            char *rel, size_t reln, cs_error *err);

/* write_body_file_ with its outcome recorded (a full disk fails these first:
 * they are the largest writes). */
static int write_body_file(cs_store *s, const char *key, const void *body, size_t len,
                           char *rel, size_t reln, cs_error *err)
{
    int rc = write_body_file_(s, key, body, len, rel, reln, err);
    note_write(s, rc, err);
    return rc;
}

static int write_body_file_(cs_store *s, const char *key, const void *body, size_t len,
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

/* A transaction on a connection of its own: SQLite takes the write lock at
 * BEGIN (so two writers cannot deadlock upgrading), PostgreSQL locks rows as
 * its UPDATEs touch them. */
static db_conn *txn_begin(cs_store *s, cs_error *err)
{
    db_conn *c = s->engine->acquire(s->engine, err);
    if (!c)
        return NULL;
    if (s->engine->query(c, s->engine->skip_locked ? "BEGIN" : "BEGIN IMMEDIATE", 0, NULL, NULL,
                         err) != CS_OK) {
        s->engine->release(s->engine, c);
        return NULL;
    }
    return c;
}

/* Commits when rc is CS_OK (and commit is true), else rolls back; returns rc,
 * or the commit's error. */
static int txn_end(cs_store *s, db_conn *c, int rc, bool commit, cs_error *err)
{
    if (rc == CS_OK && commit) {
        double t0 = cs_now();
        rc = s->engine->query(c, "COMMIT", 0, NULL, NULL, err);
        observed(s, "COMMIT", t0, rc, err);
    }
    if (rc != CS_OK || !commit) {
        cs_error e2;
        s->engine->query(c, "ROLLBACK", 0, NULL, NULL, &e2);
    }
    s->engine->release(s->engine, c);
    return rc;
}

/* One statement in a transaction; *hit says whether it returned a row, and
 * the first row's cells are copied into cells[0..n) when given. */
static int txn_q(cs_store *s, db_conn *c, const char *sql, int np, const char *const *params,
                 bool *hit, char cells[][64], int ncells, cs_error *err)
{
    db_rows rows;
    double t0 = cs_now();
    int rc = s->engine->query(c, sql, np, params, &rows, err);
    observed(s, sql, t0, rc, err);
    if (rc)
        return rc;
    if (hit)
        *hit = rows.nrows > 0;
    for (int i = 0; i < ncells && rows.nrows > 0 && i < rows.ncols; i++)
        snprintf(cells[i], 64, "%s", db_cell(&rows, 0, i) ? db_cell(&rows, 0, i) : "");
    db_rows_free(&rows);
    return CS_OK;
}

int store_job_submit(cs_store *s, const char *new_id, const char *key, const char *request_json,
                     const cs_summary *summary, double time_limit_s, long max_queued,
                     cs_submit *out, cs_error *err)
{
    char ranks[16] = "", root[16] = "";
    if (summary) {
        snprintf(ranks, sizeof ranks, "%d", summary->ranks);
        snprintf(root, sizeof root, "%d", summary->root);
    }
    memset(out, 0, sizeof *out);
    store_new_id(out->handle_id);
    for (int attempt = 0; attempt < 5; attempt++) {
        bool found;
        int rc = store_result_exists(s, key, &found, err);
        if (rc)
            return rc;
        if (found) {
            out->outcome = CS_SUBMIT_CACHED;
            out->handle_id[0] = '\0';
            return CS_OK;
        }
        char now[40], tl[40];
        fmt_time(now, sizeof now, store_wall_time());
        snprintf(tl, sizeof tl, "%.3f", time_limit_s);
        db_conn *c = txn_begin(s, err);
        if (!c)
            return CS_EIO;
        /* join: one more waiter; an "abandoned" cancel is withdrawn (the row
         * lock orders this against a concurrent detach) */
        const char *pj[] = {key, now};
        char job[1][64] = {""};
        bool joined = false;
        rc = txn_q(s, c,
                   "UPDATE jobs SET waiters = waiters + 1, updated = $2,"
                   " cancel_requested = CASE WHEN cancel_requested = 2 THEN 0"
                   " ELSE cancel_requested END"
                   " WHERE key = $1 AND status IN ('queued', 'running') RETURNING id",
                   2, pj, &joined, job, 1, err);
        /* Not joined: the job of the key may have finished between the check
         * above and the UPDATE.  Its result and its 'done' commit together, so
         * looking again inside this transaction sees the result whenever the
         * UPDATE no longer saw the job (a new job here would only redo it). */
        bool cached = false;
        if (!rc && !joined) {
            const char *pk[] = {key};
            rc = txn_q(s, c, "SELECT key FROM results WHERE key = $1", 1, pk, &cached, NULL, 0,
                       err);
            if (!rc && cached) {
                txn_end(s, c, CS_OK, false, err);
                out->outcome = CS_SUBMIT_CACHED;
                out->handle_id[0] = '\0';
                return CS_OK;
            }
        }
        bool inserted = false;
        if (!rc && !joined && max_queued > 0) {
            char n[1][64] = {"0"};
            rc = txn_q(s, c, "SELECT count(*) FROM jobs WHERE status = 'queued'", 0, NULL, NULL,
                       n, 1, err);
            if (!rc && atol(n[0]) >= max_queued) {
                txn_end(s, c, rc, false, err);
                out->outcome = CS_SUBMIT_FULL;
                out->handle_id[0] = '\0';
                return CS_OK;
            }
        }
        if (!rc && !joined) {
            const char *pi[] = {new_id, key, request_json, tl, now,
                                summary ? summary->topology : NULL,
                                summary ? summary->collective : NULL, summary ? root : NULL,
                                summary ? summary->method : NULL, summary ? ranks : NULL};
            rc = txn_q(s, c,
                       "INSERT INTO jobs (id, key, request, status, time_limit_s, created,"
                       " updated, waiters, topology, collective, root, method, ranks)"
                       " VALUES ($1, $2, $3, 'queued', $4, $5, $5, 1, $6, $7, $8, $9, $10)"
                       " ON CONFLICT (key) WHERE status IN ('queued', 'running') DO NOTHING"
                       " RETURNING id",
                       10, pi, &inserted, NULL, 0, err);
            if (inserted)
                snprintf(job[0], sizeof job[0], "%s", new_id);
        }
        if (!rc && (joined || inserted)) {
            const char *ph[] = {out->handle_id, job[0], now};
            rc = txn_q(s, c, "INSERT INTO job_handles (id, job_id, created) VALUES ($1, $2, $3)",
                       3, ph, NULL, NULL, 0, err);
        }
        rc = txn_end(s, c, rc, joined || inserted, err);
        if (rc)
            return rc;
        if (joined || inserted) {
            snprintf(out->job_id, sizeof out->job_id, "%.39s", job[0]);
            out->outcome = joined ? CS_SUBMIT_JOINED : CS_SUBMIT_CREATED;
            return CS_OK;
        }
        /* Lost a race: the job of the key finished, or another submitter
         * created it, between our statements.  Look again. */
    }
    return cs_error_set(err, CS_EIO, "", "could not submit the job: the store kept changing");
}

static void fill_job(const db_rows *r, int row, cs_store_job *j)
{
    /* columns: JOB_COLUMNS, then (store_job_get) the handle and its detached flag */
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
    j->cancel_requested = db_cell(r, row, 8) ? atoi(db_cell(r, row, 8)) : 0;
    j->time_limit_s = db_cell(r, row, 9) ? strtod(db_cell(r, row, 9), NULL) : 0;
    j->created = db_cell(r, row, 10) ? strtod(db_cell(r, row, 10), NULL) : 0;
    j->updated = db_cell(r, row, 11) ? strtod(db_cell(r, row, 11), NULL) : 0;
    j->heartbeat = db_cell(r, row, 12) ? strtod(db_cell(r, row, 12), NULL) : 0;
    j->waiters = db_cell(r, row, 13) ? atoi(db_cell(r, row, 13)) : 0;
    if (r->ncols > 15) {
        snprintf(j->handle, sizeof j->handle, "%s", db_cell(r, row, 14) ? db_cell(r, row, 14) : "");
        j->detached = db_cell(r, row, 15) && atoi(db_cell(r, row, 15)) != 0;
    }
}

#define JOB_COLS(p)                                                                           \
    p "id, " p "key, " p "status, " p "request, " p "progress, " p "error, " p "owner, "       \
    p "attempts, " p "cancel_requested, " p "time_limit_s, " p "created, " p "updated, "      \
    p "heartbeat, " p "waiters"
#define JOB_COLUMNS JOB_COLS("")

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
                        int *cancel_requested, bool *still_owner, cs_error *err)
{
    *cancel_requested = CS_CANCEL_NONE;
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
        *cancel_requested = db_cell(&rows, 0, 0) ? atoi(db_cell(&rows, 0, 0)) : 0;
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
        /* through txn_q/txn_end, so a refused statement is observed and
         * recorded (store_write_failure: /v1/health) like every other write */
        db_conn *c = txn_begin(s, err);
        if (!c)
            return CS_EIO;
        int rc;
        if (result_json) {
            const char *pr[] = {key, request_json, result_json, now};
            rc = txn_q(s, c,
                       "INSERT INTO results (key, request, result, created)"
                       " VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING",
                       4, pr, NULL, NULL, 0, err);
        } else {
            /* saved beforehand (store_result_save): done needs it there */
            const char *pk[] = {key};
            bool stored = false;
            rc = txn_q(s, c, "SELECT key FROM results WHERE key = $1", 1, pk, &stored, NULL, 0,
                       err);
            if (!rc && !stored)
                rc = cs_error_set(err, CS_EINTERNAL, "", "job %s done without a stored result",
                                  id);
        }
        if (!rc) {
            /* Done wins over any state but a finished one: even if the job was
             * reaped meanwhile, its result is good. */
            const char *pj[] = {id, now};
            rc = txn_q(s, c,
                       "UPDATE jobs SET status = 'done', error = NULL, updated = $2"
                       " WHERE id = $1 AND status IN ('queued', 'running')",
                       2, pj, NULL, NULL, 0, err);
        }
        return txn_end(s, c, rc, true, err);
    }
    if (status == CS_JOB_QUEUED) {
        const char *p[] = {id, owner, now};
        return run1(s,
                    "UPDATE jobs SET status = 'queued', owner = NULL, heartbeat = NULL,"
                    " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                    " updated = $3 WHERE id = $1 AND owner = $2 AND status = 'running'",
                    3, p, NULL, err);
    }
    if (status == CS_JOB_CANCELLED) {
        /* Stopped because its last waiter left, but someone joined since (and
         * withdrew the cancel): back to the queue, the attempt not counted.
         * The CASEs all read the row as it was. */
        const char *p[] = {id, owner, error_json, now};
        return run1(s,
                    "UPDATE jobs SET"
                    " status = CASE WHEN cancel_requested <> 1 AND waiters > 0 THEN 'queued'"
                    " ELSE 'cancelled' END,"
                    " error = CASE WHEN cancel_requested <> 1 AND waiters > 0 THEN NULL"
                    " ELSE $3 END,"
                    " owner = CASE WHEN cancel_requested <> 1 AND waiters > 0 THEN NULL"
                    " ELSE owner END,"
                    " heartbeat = CASE WHEN cancel_requested <> 1 AND waiters > 0 THEN NULL"
                    " ELSE heartbeat END,"
                    " attempts = CASE WHEN cancel_requested <> 1 AND waiters > 0 AND attempts > 0"
                    " THEN attempts - 1 ELSE attempts END,"
                    " updated = $4 WHERE id = $1 AND owner = $2 AND status = 'running'",
                    4, p, NULL, err);
    }
    if (status != CS_JOB_FAILED)
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
    int rc = run1(s,
                  "SELECT " JOB_COLS("j.") ", h.id, h.detached FROM job_handles h"
                  " JOIN jobs j ON j.id = h.job_id WHERE h.id = $1",
                  1, p, &rows, err);
    if (rc == CS_OK && rows.nrows == 0) {
        db_rows_free(&rows);
        rc = run1(s, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = $1", 1, p, &rows, err);
    }
    if (rc)
        return rc;
    if (rows.nrows > 0) {
        fill_job(&rows, 0, out);
        *found = true;
    }
    db_rows_free(&rows);
    return CS_OK;
}

int store_job_detach(cs_store *s, const char *handle, cs_detach *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    char now[40];
    fmt_time(now, sizeof now, store_wall_time());
    db_conn *c = txn_begin(s, err);
    if (!c)
        return CS_EIO;
    const char *ph[] = {handle};
    char cell[2][64] = {"", ""};
    bool hit = false;
    int rc = txn_q(s, c,
                   "UPDATE job_handles SET detached = 1 WHERE id = $1 AND detached = 0"
                   " RETURNING job_id",
                   1, ph, &hit, cell, 1, err);
    if (rc || !hit) {
        txn_end(s, c, rc, false, err);
        if (rc)
            return rc;
        /* unknown, or detached before: say how its job is */
        cs_store_job j;
        bool found = false;
        if ((rc = store_job_get(s, handle, &j, &found, err)))
            return rc;
        out->outcome = found && j.handle[0] ? CS_DETACH_ALREADY : CS_DETACH_NOT_FOUND;
        if (out->outcome == CS_DETACH_ALREADY) {
            snprintf(out->job_id, sizeof out->job_id, "%s", j.id);
            out->status = j.status;
            out->waiters = j.waiters;
        }
        if (found)
            store_job_clear(&j);
        return CS_OK;
    }
    snprintf(out->job_id, sizeof out->job_id, "%.39s", cell[0]);
    const char *pj[] = {out->job_id, now};
    rc = txn_q(s, c,
               "UPDATE jobs SET waiters = CASE WHEN waiters > 0 THEN waiters - 1 ELSE 0 END,"
               " updated = $2 WHERE id = $1 AND status IN ('queued', 'running')"
               " RETURNING waiters, status",
               2, pj, &hit, cell, 2, err);
    if (rc || !hit) {
        /* the job had ended: nothing to change, the handle stays as it was */
        txn_end(s, c, rc, false, err);
        if (rc)
            return rc;
        cs_store_job j;
        bool found = false;
        if ((rc = store_job_get(s, out->job_id, &j, &found, err)))
            return rc;
        out->outcome = CS_DETACH_FINISHED;
        out->status = found ? j.status : CS_JOB_FAILED;
        if (found)
            store_job_clear(&j);
        return CS_OK;
    }
    out->waiters = atoi(cell[0]);
    job_status_from_name(cell[1], &out->status);
    out->outcome = CS_DETACH_LEFT;
    if (out->waiters == 0 && out->status == CS_JOB_QUEUED) {
        const char *pc[] = {out->job_id, now,
                            "{\"code\":\"cancelled\",\"message\":\"cancelled: every client that "
                            "asked for it detached (DELETE)\",\"field\":\"\"}"};
        rc = txn_q(s, c,
                   "UPDATE jobs SET status = 'cancelled', error = $3, updated = $2"
                   " WHERE id = $1 AND status = 'queued' AND waiters = 0",
                   3, pc, NULL, NULL, 0, err);
        out->outcome = CS_DETACH_CANCELLED;
        out->status = CS_JOB_CANCELLED;
    } else if (out->waiters == 0) {
        rc = txn_q(s, c,
                   "UPDATE jobs SET cancel_requested = 2"
                   " WHERE id = $1 AND status = 'running' AND waiters = 0"
                   " AND cancel_requested = 0",
                   1, pj, NULL, NULL, 0, err);
        out->outcome = CS_DETACH_STOPPING;
    }
    return txn_end(s, c, rc, true, err);
}

int store_job_cancel(cs_store *s, const char *id_or_handle, cs_job_status *status_after,
                     bool *found, cs_error *err)
{
    *found = false;
    char now[40], id[64];
    fmt_time(now, sizeof now, store_wall_time());
    snprintf(id, sizeof id, "%s", id_or_handle);
    db_rows hr;
    const char *ph[] = {id_or_handle};
    int hrc = run1(s, "SELECT job_id FROM job_handles WHERE id = $1", 1, ph, &hr, err);
    if (hrc)
        return hrc;
    if (hr.nrows > 0)
        snprintf(id, sizeof id, "%s", db_cell(&hr, 0, 0));
    db_rows_free(&hr);
    const char *errjson =
        "{\"code\":\"cancelled\",\"message\":\"cancelled for every client by an explicit "
        "cancel\",\"field\":\"\"}";
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
                  " AND (cancel_requested = 1 OR (cancel_requested = 2 AND waiters = 0))"
                  " RETURNING id",
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

/* ---- the isomorphism index ------------------------------------------------------------------ */

int store_iso_put(cs_store *s, const char *iso_key, const char *key, const char *labelling,
                  cs_error *err)
{
    char created[32];
    fmt_time(created, sizeof created, store_wall_time());
    const char *p[] = {iso_key, key, labelling, created};
    return run1(s,
                "INSERT INTO iso_index (iso_key, key, labelling, created)"
                " VALUES ($1, $2, $3, CAST($4 AS DOUBLE PRECISION))"
                " ON CONFLICT (iso_key, key) DO NOTHING",
                4, p, NULL, err);
}

int store_iso_lookup(cs_store *s, const char *iso_key, int max, cs_iso_row **out, int *n,
                     cs_error *err)
{
    *out = NULL;
    *n = 0;
    char lim[16];
    snprintf(lim, sizeof lim, "%d", max);
    const char *p[] = {iso_key, lim};
    db_rows rows;
    int rc = run1(s,
                  "SELECT i.key, i.labelling, i.created,"
                  " CASE WHEN EXISTS (SELECT 1 FROM results r WHERE r.key = i.key)"
                  " THEN 1 ELSE 0 END,"
                  " (SELECT j.status FROM jobs j WHERE j.key = i.key"
                  "  AND j.status IN ('queued', 'running') LIMIT 1)"
                  " FROM iso_index i WHERE i.iso_key = $1 ORDER BY i.created, i.key"
                  " LIMIT CAST($2 AS INTEGER)",
                  2, p, &rows, err);
    if (rc)
        return rc;
    cs_iso_row *v = calloc((size_t)(rows.nrows ? rows.nrows : 1), sizeof *v);
    if (!v) {
        db_rows_free(&rows);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int i = 0; i < rows.nrows; i++) {
        const char *k = db_cell(&rows, i, 0), *l = db_cell(&rows, i, 1);
        snprintf(v[i].key, sizeof v[i].key, "%s", k ? k : "");
        v[i].labelling = strdup(l ? l : "");
        v[i].created = db_cell(&rows, i, 2) ? atof(db_cell(&rows, i, 2)) : 0;
        v[i].stored = db_cell(&rows, i, 3) && atoi(db_cell(&rows, i, 3)) == 1;
        cs_job_status st;
        const char *js = db_cell(&rows, i, 4);
        v[i].job_status = js && job_status_from_name(js, &st) == CS_OK ? (int)st : -1;
        if (!v[i].labelling) {
            store_iso_rows_free(v, i + 1);
            db_rows_free(&rows);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
    }
    *n = rows.nrows;
    *out = v;
    db_rows_free(&rows);
    return CS_OK;
}

void store_iso_rows_free(cs_iso_row *rows, int n)
{
    if (!rows)
        return;
    for (int i = 0; i < n; i++)
        free(rows[i].labelling);
    free(rows);
}

/* ---- lists --------------------------------------------------------------------------------- */

int store_result_index_put(cs_store *s, const char *key, const cs_summary *sum, cs_error *err)
{
    char root[16], ranks[16], nalgs[16], created[32];
    snprintf(root, sizeof root, "%d", sum->root);
    snprintf(ranks, sizeof ranks, "%d", sum->ranks);
    snprintf(nalgs, sizeof nalgs, "%d", sum->nalgs);
    const char *pk[] = {key};
    db_rows rows;
    /* the result's own time when it is stored, else now */
    int rc = run1(s, "SELECT CAST(created * 1000000 AS BIGINT) FROM results WHERE key = $1", 1,
                  pk, &rows, err);
    if (rc)
        return rc;
    if (rows.nrows > 0 && db_cell(&rows, 0, 0))
        snprintf(created, sizeof created, "%s", db_cell(&rows, 0, 0));
    else
        snprintf(created, sizeof created, "%lld", (long long)(store_wall_time() * 1e6));
    db_rows_free(&rows);
    const char *p[] = {key, sum->topology, sum->collective, root, sum->method, ranks, nalgs,
                       created};
    return run1(s,
                "INSERT INTO result_index (key, topology, collective, root, method, ranks, nalgs,"
                " created_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                " ON CONFLICT (key) DO NOTHING",
                8, p, NULL, err);
}

int store_results_unindexed(cs_store *s, int max, char (*keys)[65], int *n, cs_error *err)
{
    *n = 0;
    char lim[16];
    snprintf(lim, sizeof lim, "%d", max);
    const char *p[] = {lim};
    db_rows rows;
    int rc = run1(s,
                  "SELECT r.key FROM results r WHERE NOT EXISTS"
                  " (SELECT 1 FROM result_index i WHERE i.key = r.key) LIMIT $1",
                  1, p, &rows, err);
    if (rc)
        return rc;
    for (int i = 0; i < rows.nrows && i < max; i++)
        snprintf(keys[(*n)++], 65, "%s", db_cell(&rows, i, 0) ? db_cell(&rows, i, 0) : "");
    db_rows_free(&rows);
    return CS_OK;
}

/* A cursor is "<microseconds>.<id>": the last row of a page. */
static int parse_cursor(const char *after, char us[32], char id[80], cs_error *err)
{
    const char *dot = after ? strchr(after, '.') : NULL;
    size_t nus = dot ? (size_t)(dot - after) : 0, nid = dot ? strlen(dot + 1) : 0;
    bool ok = dot && nus > 0 && nus < 20 && nid > 0 && nid < 80;
    for (size_t i = 0; ok && i < nus; i++)
        ok = after[i] >= '0' && after[i] <= '9';
    for (size_t i = 0; ok && i < nid; i++)
        ok = (dot[1 + i] >= '0' && dot[1 + i] <= '9') || (dot[1 + i] >= 'a' && dot[1 + i] <= 'z') ||
             (dot[1 + i] >= 'A' && dot[1 + i] <= 'Z') || dot[1 + i] == '-' || dot[1 + i] == '_';
    if (!ok)
        return cs_error_set(err, CS_EINVAL, "after",
                            "after must be the \"next\" cursor of a previous page");
    snprintf(us, 32, "%.*s", (int)nus, after);
    snprintf(id, 80, "%s", dot + 1);
    return CS_OK;
}

/* Builds "WHERE ..." from the filters and the cursor, numbering parameters
 * from $1; the page's LIMIT is the last parameter. */
typedef struct where_clause {
    char sql[768];
    const char *params[12];
    int n;
    char us[32], id[80], status[16], limit[16];
} where_clause;

static void where_add(where_clause *w, const char *cond_fmt, const char *value)
{
    char cond[256];
    snprintf(cond, sizeof cond, cond_fmt, w->n + 1, w->n + 1);
    size_t used = strlen(w->sql);
    snprintf(w->sql + used, sizeof w->sql - used, "%s%s", w->n ? " AND " : " WHERE ", cond);
    w->params[w->n++] = value;
}

static int where_build(where_clause *w, const cs_list_query *q, const char *created_expr,
                       const char *id_col, bool jobs, cs_error *err)
{
    memset(w, 0, sizeof *w);
    if (q->topology)
        where_add(w, "topology = $%d", q->topology);
    if (q->collective)
        where_add(w, "collective = $%d", q->collective);
    if (q->method)
        where_add(w, "method = $%d", q->method);
    if (jobs && q->status >= 0) {
        snprintf(w->status, sizeof w->status, "%s", job_status_name((cs_job_status)q->status));
        where_add(w, "status = $%d", w->status);
    }
    if (q->after) {
        int rc = parse_cursor(q->after, w->us, w->id, err);
        if (rc)
            return rc;
        char cond[256];
        /* cast: SQLite orders every integer below every text */
        snprintf(cond, sizeof cond,
                 "(%s < CAST($%d AS BIGINT) OR (%s = CAST($%d AS BIGINT) AND %s < $%d))",
                 created_expr, w->n + 1, created_expr, w->n + 1, id_col, w->n + 2);
        size_t used = strlen(w->sql);
        snprintf(w->sql + used, sizeof w->sql - used, "%s%s", w->n ? " AND " : " WHERE ", cond);
        w->params[w->n++] = w->us;
        w->params[w->n++] = w->id;
    }
    /* one row more than asked tells whether there is a next page */
    snprintf(w->limit, sizeof w->limit, "%d", (q->limit > 0 ? q->limit : 50) + 1);
    w->params[w->n++] = w->limit;
    return CS_OK;
}

static void cell_str(const db_rows *r, int row, int col, char *out, size_t n)
{
    snprintf(out, n, "%s", db_cell(r, row, col) ? db_cell(r, row, col) : "");
}

static int cell_int(const db_rows *r, int row, int col, int dflt)
{
    return db_cell(r, row, col) ? atoi(db_cell(r, row, col)) : dflt;
}

int store_results_list(cs_store *s, const cs_list_query *q, cs_result_row **out, int *n,
                       char next[96], cs_error *err)
{
    *out = NULL;
    *n = 0;
    next[0] = '\0';
    where_clause w;
    int rc = where_build(&w, q, "created_us", "key", false, err);
    if (rc)
        return rc;
    char sql[1200];
    snprintf(sql, sizeof sql,
             "SELECT key, topology, collective, root, method, ranks, nalgs, created_us"
             " FROM result_index%s ORDER BY created_us DESC, key DESC"
             " LIMIT CAST($%d AS INTEGER)",
             w.sql, w.n);
    db_rows rows;
    if ((rc = run1(s, sql, w.n, w.params, &rows, err)))
        return rc;
    int limit = q->limit > 0 ? q->limit : 50;
    int take = rows.nrows < limit ? rows.nrows : limit;
    cs_result_row *r = calloc((size_t)(take > 0 ? take : 1), sizeof *r);
    if (!r) {
        db_rows_free(&rows);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int i = 0; i < take; i++) {
        cell_str(&rows, i, 0, r[i].key, sizeof r[i].key);
        cell_str(&rows, i, 1, r[i].sum.topology, sizeof r[i].sum.topology);
        cell_str(&rows, i, 2, r[i].sum.collective, sizeof r[i].sum.collective);
        r[i].sum.root = cell_int(&rows, i, 3, -1);
        cell_str(&rows, i, 4, r[i].sum.method, sizeof r[i].sum.method);
        r[i].sum.ranks = cell_int(&rows, i, 5, 0);
        r[i].sum.nalgs = cell_int(&rows, i, 6, 0);
        r[i].created = db_cell(&rows, i, 7) ? strtod(db_cell(&rows, i, 7), NULL) * 1e-6 : 0;
    }
    if (rows.nrows > limit && take > 0)
        snprintf(next, 96, "%s.%s", db_cell(&rows, take - 1, 7), r[take - 1].key);
    db_rows_free(&rows);
    *out = r;
    *n = take;
    return CS_OK;
}

int store_jobs_list(cs_store *s, const cs_list_query *q, cs_job_row **out, int *n,
                    char next[96], cs_error *err)
{
    *out = NULL;
    *n = 0;
    next[0] = '\0';
    where_clause w;
    int rc = where_build(&w, q, JOB_CREATED_US, "id", true, err);
    if (rc)
        return rc;
    char sql[1400];
    snprintf(sql, sizeof sql,
             "SELECT id, key, status, created, updated, topology, collective, root, method,"
             " ranks, waiters, " JOB_CREATED_US " FROM jobs%s"
             " ORDER BY " JOB_CREATED_US " DESC, id DESC LIMIT CAST($%d AS INTEGER)",
             w.sql, w.n);
    db_rows rows;
    if ((rc = run1(s, sql, w.n, w.params, &rows, err)))
        return rc;
    int limit = q->limit > 0 ? q->limit : 50;
    int take = rows.nrows < limit ? rows.nrows : limit;
    cs_job_row *r = calloc((size_t)(take > 0 ? take : 1), sizeof *r);
    if (!r) {
        db_rows_free(&rows);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int i = 0; i < take; i++) {
        cell_str(&rows, i, 0, r[i].id, sizeof r[i].id);
        cell_str(&rows, i, 1, r[i].key, sizeof r[i].key);
        if (job_status_from_name(db_cell(&rows, i, 2), &r[i].status) != CS_OK)
            r[i].status = CS_JOB_FAILED;
        r[i].created = db_cell(&rows, i, 3) ? strtod(db_cell(&rows, i, 3), NULL) : 0;
        r[i].updated = db_cell(&rows, i, 4) ? strtod(db_cell(&rows, i, 4), NULL) : 0;
        cell_str(&rows, i, 5, r[i].sum.topology, sizeof r[i].sum.topology);
        cell_str(&rows, i, 6, r[i].sum.collective, sizeof r[i].sum.collective);
        r[i].sum.root = cell_int(&rows, i, 7, -1);
        cell_str(&rows, i, 8, r[i].sum.method, sizeof r[i].sum.method);
        r[i].sum.ranks = cell_int(&rows, i, 9, 0);
        r[i].waiters = cell_int(&rows, i, 10, 0);
    }
    if (rows.nrows > limit && take > 0)
        snprintf(next, 96, "%s.%s", db_cell(&rows, take - 1, 11), r[take - 1].id);
    db_rows_free(&rows);
    *out = r;
    *n = take;
    return CS_OK;
}
