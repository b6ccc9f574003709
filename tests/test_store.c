/*
 * Tests of the store (server/store.h) on both engines: SQLite in a temp dir
 * and PostgreSQL on a throwaway server started by the test itself.  Each test
 * body runs once per engine; each PostgreSQL test gets its own database.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check_main.h"
#include "pg_fixture.h"
#include "server_harness.h"
#include "store.h"

static char tmpdir[256];

/* A store URL for this test: a fresh SQLite file, or a fresh PG database. */
static void store_url(bool use_pg, const char *name, char *url, size_t n)
{
    if (use_pg) {
        pg_fixture_db(name, url, n);
    } else {
        ck_assert_int_eq(make_temp_dir("collsynth-store", tmpdir, sizeof tmpdir), 0);
        snprintf(url, n, "sqlite:%s/test.db", tmpdir);
    }
}

static cs_store *open_store(const char *url)
{
    cs_store *s = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = store_open(url, NULL, 4, &s, &err);
    ck_assert_msg(rc == CS_OK, "store_open(%s): %s", url, err.message);
    return s;
}

static void cleanup(bool use_pg)
{
    if (!use_pg)
        remove_tree(tmpdir);
}

static void key_of(int i, char key[65])
{
    snprintf(key, 65, "%064x", i);
}

/* ---- bodies --------------------------------------------------------------------------- */

/* Deterministic bytes standing in for an encoded result (the store does not
 * read them), with every byte value, so binary handling is exercised. */
static char *fake_body(int seed, size_t len)
{
    char *b = malloc(len);
    unsigned x = (unsigned)seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (char)(x >> 16);
    }
    return b;
}

static void assert_body(const cs_stored_result *row, int seed, size_t len)
{
    ck_assert_ptr_nonnull(row->body);
    ck_assert_uint_eq(row->body->len, len);
    char *want = fake_body(seed, len);
    ck_assert(memcmp(row->body->data, want, len) == 0);
    free(want);
}

static void results_roundtrip(bool use_pg)
{
    char url[512];
    store_url(use_pg, "results_roundtrip", url, sizeof url);
    cs_store *s = open_store(url);
    ck_assert_str_eq(store_engine(s), use_pg ? "postgresql" : "sqlite");
    ck_assert_int_eq(store_ping(s, NULL), CS_OK);
    char key[65];
    key_of(1, key);
    cs_stored_result row;
    bool found = true;
    ck_assert_int_eq(store_result_load(s, key, STORE_WANT_BODY, &row, &found, NULL), CS_OK);
    ck_assert(!found);
    /* a result in the pre-codec form: its JSON, read back as legacy */
    ck_assert_int_eq(store_result_put_json(s, key, "{\"r\":1}", "{\"x\":\"caf\xc3\xa9 'q'\"}", NULL),
                     CS_OK);
    /* a second put of the same key keeps the first value (results are immutable) */
    ck_assert_int_eq(store_result_put_json(s, key, "{\"r\":2}", "{\"x\":2}", NULL), CS_OK);
    ck_assert_int_eq(store_result_load(s, key, STORE_WANT_REQUEST | STORE_WANT_BODY, &row,
                                       &found, NULL),
                     CS_OK);
    ck_assert(found);
    ck_assert(row.legacy);
    ck_assert_ptr_null(row.body);
    ck_assert_str_eq(row.header, "{\"x\":\"caf\xc3\xa9 'q'\"}");
    ck_assert_str_eq(row.request, "{\"r\":1}");
    store_result_clear(&row);
    /* migrating it to the encoded form, once */
    char *b0 = fake_body(0, 3000);
    ck_assert_int_eq(store_result_migrate(s, key, "{\"h\":0}", b0, 3000, NULL), CS_OK);
    ck_assert_int_eq(store_result_migrate(s, key, "{\"h\":9}", b0, 10, NULL), CS_OK);
    free(b0);
    ck_assert_int_eq(store_result_load(s, key, STORE_WANT_BODY, &row, &found, NULL), CS_OK);
    ck_assert(found && !row.legacy);
    ck_assert_str_eq(row.header, "{\"h\":0}");
    assert_body(&row, 0, 3000);
    store_result_clear(&row);
    /* encoded results: small (in the row) and large (SQLite: a file beside it) */
    size_t sizes[] = {1, 70000, (3u << 20) + 5};
    for (int i = 0; i < 3; i++) {
        char k[65];
        key_of(100 + i, k);
        char *b = fake_body(i + 1, sizes[i]);
        ck_assert_int_eq(store_result_save(s, k, "{\"r\":3}", "{\"h\":1}", b, sizes[i], NULL),
                         CS_OK);
        /* idempotent: the second save of a key changes nothing */
        ck_assert_int_eq(store_result_save(s, k, "{\"r\":4}", "{\"h\":2}", b, 1, NULL), CS_OK);
        free(b);
        bool exists = false;
        ck_assert_int_eq(store_result_exists(s, k, &exists, NULL), CS_OK);
        ck_assert(exists);
        /* the header alone, without the body */
        ck_assert_int_eq(store_result_load(s, k, 0, &row, &found, NULL), CS_OK);
        ck_assert(found && !row.legacy);
        ck_assert_ptr_null(row.body);
        ck_assert_str_eq(row.header, "{\"h\":1}");
        store_result_clear(&row);
        ck_assert_int_eq(store_result_load(s, k, STORE_WANT_BODY | STORE_WANT_REQUEST, &row,
                                           &found, NULL),
                         CS_OK);
        ck_assert_str_eq(row.request, "{\"r\":3}");
        assert_body(&row, i + 1, sizes[i]);
        store_result_clear(&row);
    }
    if (!use_pg) {
        /* the large body is a file; the losing second write left none behind */
        char cmd[700];
        snprintf(cmd, sizeof cmd, "test $(find %s/test.db.bodies -type f | wc -l) = 1", tmpdir);
        ck_assert_int_eq(system(cmd), 0);
    }
    ck_assert_int_eq(store_result_count(s, NULL), 4);
    /* artifacts: compressed bytes in, the same bytes out */
    cs_blob *body = NULL;
    bool zstd = false;
    ck_assert_int_eq(store_artifact_get(s, key, "msccl-xml", "alg=0", &body, &zstd, &found, NULL),
                     CS_OK);
    ck_assert(!found);
    char *z = fake_body(7, 5000);
    ck_assert_int_eq(store_artifact_put(s, key, "msccl-xml", "alg=0", z, 5000, NULL), CS_OK);
    ck_assert_int_eq(store_artifact_get(s, key, "msccl-xml", "alg=0", &body, &zstd, &found, NULL),
                     CS_OK);
    ck_assert(found && zstd);
    ck_assert_uint_eq(body->len, 5000);
    ck_assert(memcmp(body->data, z, 5000) == 0);
    blob_unref(body);
    free(z);
    store_close(s);
    cleanup(use_pg);
}

static void submit_outcomes(bool use_pg)
{
    char url[512];
    store_url(use_pg, "submit_outcomes", url, sizeof url);
    cs_store *s = open_store(url);
    char k1[65], k2[65], k3[65];
    key_of(1, k1);
    key_of(2, k2);
    key_of(3, k3);
    cs_submit sub;
    ck_assert_int_eq(store_job_submit(s, "job-a", k1, "{}", NULL, 0, 2, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_CREATED);
    ck_assert_str_eq(sub.job_id, "job-a");
    /* the same key joins the active job */
    ck_assert_int_eq(store_job_submit(s, "job-b", k1, "{}", NULL, 0, 2, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_JOINED);
    ck_assert_str_eq(sub.job_id, "job-a");
    ck_assert_int_eq(store_job_submit(s, "job-c", k2, "{}", NULL, 0, 2, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_CREATED);
    /* two queued, limit two: a third key is refused */
    ck_assert_int_eq(store_job_submit(s, "job-d", k3, "{}", NULL, 0, 2, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_FULL);
    long counts[CS_JOB_STATUS_COUNT];
    ck_assert_int_eq(store_job_counts(s, counts, NULL), CS_OK);
    ck_assert_int_eq(counts[CS_JOB_QUEUED], 2);
    /* run job-a to done: the key is then answered from the results */
    cs_store_job j;
    bool claimed = false;
    ck_assert_int_eq(store_job_claim(s, "me", &j, &claimed, NULL), CS_OK);
    ck_assert(claimed);
    ck_assert_str_eq(j.id, "job-a"); /* oldest first */
    ck_assert_int_eq(j.status, CS_JOB_RUNNING);
    ck_assert_int_eq(j.attempts, 1);
    ck_assert_int_eq(store_job_finish(s, j.id, "me", CS_JOB_DONE, k1, "{\"req\":1}",
                                      "{\"res\":1}", NULL, NULL),
                     CS_OK);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_submit(s, "job-e", k1, "{}", NULL, 0, 2, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_CACHED);
    bool found = false;
    ck_assert_int_eq(store_job_get(s, "job-a", &j, &found, NULL), CS_OK);
    ck_assert(found);
    ck_assert_int_eq(j.status, CS_JOB_DONE);
    store_job_clear(&j);
    store_close(s);
    cleanup(use_pg);
}

/* A submission racing the finish of the job it would join must either join
 * it or be answered from its result: a new job would synthesize it again
 * (seen in CI as one post of 48 neither coalesced nor a cache hit). */
typedef struct finisher {
    cs_store *store;
    const char *id, *key;
    int rc;
} finisher;

static void *finish_done(void *arg)
{
    finisher *f = arg;
    f->rc = store_job_finish(f->store, f->id, "me", CS_JOB_DONE, f->key, "{\"req\":1}",
                             "{\"res\":1}", NULL, NULL);
    return NULL;
}

static void submit_races_finish(bool use_pg)
{
    char url[512];
    store_url(use_pg, "submit_races_finish", url, sizeof url);
    cs_store *s = open_store(url);
    int created = 0, cached = 0;
    for (int i = 0; i < 60; i++) {
        char key[65], id[40];
        key_of(1000 + i, key);
        snprintf(id, sizeof id, "race-%d", i);
        cs_submit sub;
        ck_assert_int_eq(store_job_submit(s, id, key, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
        ck_assert_int_eq(sub.outcome, CS_SUBMIT_CREATED);
        cs_store_job j;
        bool claimed = false;
        ck_assert_int_eq(store_job_claim(s, "me", &j, &claimed, NULL), CS_OK);
        ck_assert(claimed);
        store_job_clear(&j);
        finisher f = {.store = s, .id = id, .key = key};
        pthread_t th;
        pthread_create(&th, NULL, finish_done, &f);
        /* submit until the job is no longer there to join */
        for (int n = 0;; n++) {
            char again[40];
            snprintf(again, sizeof again, "race-%d-%d", i, n);
            ck_assert_int_eq(store_job_submit(s, again, key, "{}", NULL, 0, 0, &sub, NULL),
                             CS_OK);
            if (sub.outcome != CS_SUBMIT_JOINED)
                break;
        }
        pthread_join(th, NULL);
        ck_assert_int_eq(f.rc, CS_OK);
        created += sub.outcome == CS_SUBMIT_CREATED;
        cached += sub.outcome == CS_SUBMIT_CACHED;
    }
    ck_assert_msg(created == 0, "%d of 60 submissions made a second job for a finished key",
                  created);
    ck_assert_int_eq(cached, 60);
    store_close(s);
    cleanup(use_pg);
}

typedef struct claimer {
    cs_store *store;
    char owner[16];
    int n;
    char ids[64][40];
} claimer;

static void *claim_all(void *arg)
{
    claimer *c = arg;
    for (;;) {
        cs_store_job j;
        bool claimed = false;
        if (store_job_claim(c->store, c->owner, &j, &claimed, NULL) != CS_OK || !claimed)
            break;
        if (c->n < 64)
            snprintf(c->ids[c->n], sizeof c->ids[0], "%s", j.id);
        c->n++;
        store_job_clear(&j);
    }
    return NULL;
}

static void claims_are_exclusive(bool use_pg)
{
    char url[512];
    store_url(use_pg, "claims_are_exclusive", url, sizeof url);
    /* two handles: two daemons sharing the store */
    cs_store *a = open_store(url), *b = open_store(url);
    enum { NJOBS = 40, NTHREADS = 4 };
    for (int i = 0; i < NJOBS; i++) {
        char key[65], id[40];
        key_of(i, key);
        snprintf(id, sizeof id, "job-%02d", i);
        cs_submit sub;
        ck_assert_int_eq(store_job_submit(a, id, key, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
        ck_assert_int_eq(sub.outcome, CS_SUBMIT_CREATED);
    }
    claimer cl[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&cl[i], 0, sizeof cl[i]);
        cl[i].store = i % 2 ? b : a;
        snprintf(cl[i].owner, sizeof cl[i].owner, "w%d", i);
        pthread_create(&th[i], NULL, claim_all, &cl[i]);
    }
    int total = 0;
    int seen[NJOBS] = {0};
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        total += cl[i].n;
        for (int k = 0; k < cl[i].n && k < 64; k++)
            seen[atoi(cl[i].ids[k] + 4)]++;
    }
    ck_assert_int_eq(total, NJOBS);
    for (int i = 0; i < NJOBS; i++)
        ck_assert_msg(seen[i] == 1, "job %d claimed %d times", i, seen[i]);
    store_close(a);
    store_close(b);
    cleanup(use_pg);
}

static void cancel_heartbeat_reap(bool use_pg)
{
    char url[512];
    store_url(use_pg, "cancel_heartbeat_reap", url, sizeof url);
    cs_store *s = open_store(url);
    char k1[65], k2[65], k3[65];
    key_of(1, k1);
    key_of(2, k2);
    key_of(3, k3);
    cs_submit sub;
    ck_assert_int_eq(store_job_submit(s, "q1", k1, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
    /* cancelling a queued job ends it at once */
    cs_job_status after;
    bool found = false;
    ck_assert_int_eq(store_job_cancel(s, "q1", &after, &found, NULL), CS_OK);
    ck_assert(found);
    ck_assert_int_eq(after, CS_JOB_CANCELLED);
    ck_assert_int_eq(store_job_cancel(s, "nope", &after, &found, NULL), CS_OK);
    ck_assert(!found);
    /* a running job gets the flag; its owner sees it on the heartbeat */
    ck_assert_int_eq(store_job_submit(s, "r1", k2, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
    cs_store_job j;
    bool claimed = false;
    ck_assert_int_eq(store_job_claim(s, "A", &j, &claimed, NULL), CS_OK);
    ck_assert(claimed);
    store_job_clear(&j);
    int cancel = -1;
    bool owner = false;
    ck_assert_int_eq(store_job_heartbeat(s, "r1", "A", "{\"done\":1}", &cancel, &owner, NULL),
                     CS_OK);
    ck_assert(owner);
    ck_assert_int_eq(cancel, CS_CANCEL_NONE);
    ck_assert_int_eq(store_job_heartbeat(s, "r1", "B", NULL, &cancel, &owner, NULL), CS_OK);
    ck_assert(!owner); /* not B's job */
    ck_assert_int_eq(store_job_cancel(s, "r1", &after, &found, NULL), CS_OK);
    ck_assert_int_eq(after, CS_JOB_RUNNING);
    ck_assert_int_eq(store_job_heartbeat(s, "r1", "A", NULL, &cancel, &owner, NULL), CS_OK);
    ck_assert_int_eq(cancel, CS_CANCEL_EXPLICIT);
    ck_assert_int_eq(store_job_finish(s, "r1", "A", CS_JOB_CANCELLED, k2, "{}", NULL,
                                      "{\"code\":\"cancelled\"}", NULL),
                     CS_OK);
    ck_assert_int_eq(store_job_get(s, "r1", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_CANCELLED);
    ck_assert_str_eq(j.progress, "{\"done\":1}");
    store_job_clear(&j);
    /* a job whose daemon died: re-queued until max_attempts, then failed */
    ck_assert_int_eq(store_job_submit(s, "d1", k3, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
    for (int attempt = 1; attempt <= 3; attempt++) {
        ck_assert_int_eq(store_job_claim(s, "dead", &j, &claimed, NULL), CS_OK);
        ck_assert(claimed);
        ck_assert_int_eq(j.attempts, attempt);
        store_job_clear(&j);
        int requeued = 0, failed = 0;
        /* a long lease spares a fresh heartbeat */
        ck_assert_int_eq(store_job_reap(s, 3600, 3, &requeued, &failed, NULL), CS_OK);
        ck_assert_int_eq(requeued + failed, 0);
        ck_assert_int_eq(store_job_reap(s, -1, 3, &requeued, &failed, NULL), CS_OK);
        ck_assert_int_eq(requeued, attempt < 3 ? 1 : 0);
        ck_assert_int_eq(failed, attempt < 3 ? 0 : 1);
    }
    ck_assert_int_eq(store_job_get(s, "d1", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_FAILED);
    ck_assert_ptr_nonnull(strstr(j.error, "interrupted"));
    store_job_clear(&j);
    /* giving a job back (graceful shutdown) does not count the attempt */
    char k4[65];
    key_of(4, k4);
    ck_assert_int_eq(store_job_submit(s, "g1", k4, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
    ck_assert_int_eq(store_job_claim(s, "A", &j, &claimed, NULL), CS_OK);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_finish(s, "g1", "A", CS_JOB_QUEUED, k4, "{}", NULL, NULL, NULL),
                     CS_OK);
    ck_assert_int_eq(store_job_get(s, "g1", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_QUEUED);
    ck_assert_int_eq(j.attempts, 0);
    store_job_clear(&j);
    store_close(s);
    cleanup(use_pg);
}

/* A child writes results as fast as it can and acknowledges each on a pipe
 * after store_result_put returned; we SIGKILL it mid-burst, reopen the
 * store, and every acknowledged key must be there. */
static void kill9_keeps_acknowledged(bool use_pg)
{
    char url[512];
    store_url(use_pg, "kill9_keeps_acknowledged", url, sizeof url);
    cs_store *s = open_store(url); /* creates the schema before the child races */
    store_close(s);
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        cs_store *cs = NULL;
        if (store_open(url, NULL, 1, &cs, NULL) != CS_OK)
            _exit(3);
        for (int i = 0;; i++) {
            char key[65], header[64];
            key_of(i, key);
            snprintf(header, sizeof header, "{\"i\":%d}", i);
            /* every fourth body is large: SQLite keeps it in a file */
            size_t len = i % 4 == 3 ? (1u << 20) + 4096u * (unsigned)i : 2048;
            char *body = fake_body(i, len);
            int rc = store_result_save(cs, key, "{}", header, body, len, NULL);
            free(body);
            if (rc != CS_OK)
                _exit(4);
            if (write(pfd[1], &i, sizeof i) != (ssize_t)sizeof i)
                _exit(5);
        }
    }
    close(pfd[1]);
    /* SIGKILL mid-burst, once 20 writes are acknowledged: a count, not a
     * time (0.6 s was too short for ten on a loaded machine's disk) */
    int acked = -1, v;
    for (double until = cs_now() + 60; acked < 19 && cs_now() < until;) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (poll(&p, 1, 100) == 1) {
            if (read(pfd[0], &v, sizeof v) != (ssize_t)sizeof v)
                break; /* the writer died */
            acked = v;
        }
    }
    kill(pid, SIGKILL);
    while (read(pfd[0], &v, sizeof v) == (ssize_t)sizeof v)
        acked = v; /* acks already in the pipe count too */
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFSIGNALED(st), "the writer died by itself (status %d)", st);
    ck_assert_int_ge(acked, 10);
    s = open_store(url);
    for (int i = 0; i <= acked; i++) {
        char key[65];
        bool found = false;
        key_of(i, key);
        cs_stored_result row;
        cs_error err;
        int rc = store_result_load(s, key, STORE_WANT_BODY, &row, &found, &err);
        ck_assert_msg(rc == CS_OK, "result %d: %s", i, err.message);
        ck_assert_msg(found, "acknowledged result %d of %d lost", i, acked);
        char want[32];
        snprintf(want, sizeof want, "{\"i\":%d}", i);
        ck_assert_str_eq(row.header, want);
        assert_body(&row, i, i % 4 == 3 ? (1u << 20) + 4096u * (unsigned)i : 2048);
        store_result_clear(&row);
    }
    fprintf(stderr, "kill9_keeps_acknowledged (%s): 1 SIGKILL, %d acknowledged, all found\n",
            use_pg ? "postgresql" : "sqlite", acked + 1);
    store_close(s);
    cleanup(use_pg);
}

/* Job handles: every submission that creates or joins a job gets its own
 * handle.  Detaching a handle leaves the job to the others; the last detach
 * stops it (queued: cancelled at once; running: a cancel request of kind
 * "abandoned"), unless someone joins before its daemon gives it up, in which
 * case it goes back to the queue.  An explicit cancel ends it for everyone. */
static void handles_detach_and_revive(bool use_pg)
{
    char url[512];
    store_url(use_pg, "handles_detach_and_revive", url, sizeof url);
    cs_store *s = open_store(url);
    char k1[65], k2[65], k3[65], k4[65];
    key_of(1, k1);
    key_of(2, k2);
    key_of(3, k3);
    key_of(4, k4);
    cs_submit a, b, c;
    ck_assert_int_eq(store_job_submit(s, "J1", k1, "{}", NULL, 0, 0, &a, NULL), CS_OK);
    ck_assert_int_eq(a.outcome, CS_SUBMIT_CREATED);
    ck_assert_int_eq(strlen(a.handle_id), 32);
    ck_assert_str_ne(a.handle_id, "J1");
    ck_assert_int_eq(store_job_submit(s, "J1b", k1, "{}", NULL, 0, 0, &b, NULL), CS_OK);
    ck_assert_int_eq(b.outcome, CS_SUBMIT_JOINED);
    ck_assert_str_eq(b.job_id, "J1");
    ck_assert_str_ne(b.handle_id, a.handle_id);
    cs_store_job j;
    bool found = false;
    ck_assert_int_eq(store_job_get(s, b.handle_id, &j, &found, NULL), CS_OK);
    ck_assert(found);
    ck_assert_str_eq(j.id, "J1");
    ck_assert_str_eq(j.handle, b.handle_id);
    ck_assert_int_eq(j.waiters, 2);
    ck_assert(!j.detached);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_get(s, "J1", &j, &found, NULL), CS_OK);
    ck_assert_str_eq(j.handle, "");
    store_job_clear(&j);
    /* the joiner leaves: the job goes on for the creator */
    cs_detach d;
    ck_assert_int_eq(store_job_detach(s, b.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_LEFT);
    ck_assert_int_eq(d.waiters, 1);
    ck_assert_str_eq(d.job_id, "J1");
    ck_assert_int_eq(store_job_detach(s, b.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_ALREADY);
    ck_assert_int_eq(store_job_get(s, b.handle_id, &j, &found, NULL), CS_OK);
    ck_assert(j.detached);
    ck_assert_int_eq(j.status, CS_JOB_QUEUED);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_detach(s, "0123456789abcdef0123456789abcdef", &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_NOT_FOUND);
    /* running; the creator leaves too: its daemon is asked to stop */
    bool claimed = false;
    ck_assert_int_eq(store_job_claim(s, "A", &j, &claimed, NULL), CS_OK);
    ck_assert(claimed);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_detach(s, a.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_STOPPING);
    int cancel = -1;
    bool owner = false;
    ck_assert_int_eq(store_job_heartbeat(s, "J1", "A", NULL, &cancel, &owner, NULL), CS_OK);
    ck_assert_int_eq(cancel, CS_CANCEL_ABANDONED);
    /* someone asks for it before its daemon gave up: it lives on */
    ck_assert_int_eq(store_job_submit(s, "J1c", k1, "{}", NULL, 0, 0, &c, NULL), CS_OK);
    ck_assert_int_eq(c.outcome, CS_SUBMIT_JOINED);
    ck_assert_int_eq(store_job_heartbeat(s, "J1", "A", NULL, &cancel, &owner, NULL), CS_OK);
    ck_assert_int_eq(cancel, CS_CANCEL_NONE);
    /* ... and if the daemon had stopped the solver already, it is queued again */
    ck_assert_int_eq(store_job_finish(s, "J1", "A", CS_JOB_CANCELLED, k1, "{}", NULL,
                                      "{\"code\":\"cancelled\"}", NULL),
                     CS_OK);
    ck_assert_int_eq(store_job_get(s, "J1", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_QUEUED);
    ck_assert_int_eq(j.attempts, 0);
    ck_assert_int_eq(j.waiters, 1);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_claim(s, "A", &j, &claimed, NULL), CS_OK);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_detach(s, c.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_STOPPING);
    ck_assert_int_eq(store_job_finish(s, "J1", "A", CS_JOB_CANCELLED, k1, "{}", NULL,
                                      "{\"code\":\"cancelled\"}", NULL),
                     CS_OK);
    ck_assert_int_eq(store_job_get(s, "J1", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_CANCELLED);
    store_job_clear(&j);
    /* queued, the only waiter leaves: cancelled at once */
    ck_assert_int_eq(store_job_submit(s, "J2", k2, "{}", NULL, 0, 0, &a, NULL), CS_OK);
    ck_assert_int_eq(store_job_detach(s, a.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_CANCELLED);
    ck_assert_int_eq(store_job_get(s, "J2", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_CANCELLED);
    ck_assert_ptr_nonnull(strstr(j.error, "detached"));
    store_job_clear(&j);
    /* an explicit cancel (through any handle) ends it for every waiter */
    ck_assert_int_eq(store_job_submit(s, "J3", k3, "{}", NULL, 0, 0, &a, NULL), CS_OK);
    ck_assert_int_eq(store_job_submit(s, "J3b", k3, "{}", NULL, 0, 0, &b, NULL), CS_OK);
    ck_assert_int_eq(store_job_claim(s, "A", &j, &claimed, NULL), CS_OK);
    ck_assert_str_eq(j.id, "J3");
    store_job_clear(&j);
    cs_job_status after;
    ck_assert_int_eq(store_job_cancel(s, b.handle_id, &after, &found, NULL), CS_OK);
    ck_assert(found);
    ck_assert_int_eq(after, CS_JOB_RUNNING);
    ck_assert_int_eq(store_job_heartbeat(s, "J3", "A", NULL, &cancel, &owner, NULL), CS_OK);
    ck_assert_int_eq(cancel, CS_CANCEL_EXPLICIT);
    ck_assert_int_eq(store_job_submit(s, "J3c", k3, "{}", NULL, 0, 0, &c, NULL), CS_OK);
    ck_assert_int_eq(store_job_heartbeat(s, "J3", "A", NULL, &cancel, &owner, NULL), CS_OK);
    ck_assert_int_eq(cancel, CS_CANCEL_EXPLICIT); /* a joiner does not undo it */
    ck_assert_int_eq(store_job_finish(s, "J3", "A", CS_JOB_CANCELLED, k3, "{}", NULL,
                                      "{\"code\":\"cancelled\"}", NULL),
                     CS_OK);
    ck_assert_int_eq(store_job_get(s, "J3", &j, &found, NULL), CS_OK);
    ck_assert_int_eq(j.status, CS_JOB_CANCELLED);
    store_job_clear(&j);
    /* a finished job: detaching changes nothing and says how it ended */
    ck_assert_int_eq(store_job_submit(s, "J4", k4, "{}", NULL, 0, 0, &a, NULL), CS_OK);
    ck_assert_int_eq(store_job_claim(s, "A", &j, &claimed, NULL), CS_OK);
    store_job_clear(&j);
    ck_assert_int_eq(store_job_finish(s, "J4", "A", CS_JOB_DONE, k4, "{}", "{\"r\":4}", NULL,
                                      NULL),
                     CS_OK);
    ck_assert_int_eq(store_job_detach(s, a.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_FINISHED);
    ck_assert_int_eq(d.status, CS_JOB_DONE);
    ck_assert_int_eq(store_job_get(s, a.handle_id, &j, &found, NULL), CS_OK);
    ck_assert(!j.detached);
    store_job_clear(&j);
    store_close(s);
    cleanup(use_pg);
}

/* The isomorphism index: rows per class, oldest first, each with whether
 * its result is stored and the state of its active job; puts are
 * idempotent (the first labelling stays). */
static void iso_index(bool use_pg)
{
    char url[300];
    store_url(use_pg, "iso_index", url, sizeof url);
    cs_store *s = open_store(url);
    char cls[65], other[65], k1[65], k2[65], k3[65];
    key_of(900, cls);
    key_of(901, other);
    key_of(1, k1);
    key_of(2, k2);
    key_of(3, k3);
    cs_iso_row *rows = NULL;
    int n = -1;
    ck_assert_int_eq(store_iso_lookup(s, cls, 16, &rows, &n, NULL), CS_OK);
    ck_assert_int_eq(n, 0);
    store_iso_rows_free(rows, n);
    ck_assert_int_eq(store_iso_put(s, cls, k2, "1,0,2", NULL), CS_OK);
    usleep(2000);
    ck_assert_int_eq(store_iso_put(s, cls, k1, "2,1,0", NULL), CS_OK);
    ck_assert_int_eq(store_iso_put(s, cls, k2, "0,1,2", NULL), CS_OK); /* kept as it was */
    ck_assert_int_eq(store_iso_put(s, other, k3, "0,1,2", NULL), CS_OK);
    /* k2's result is stored; k1 has a queued job, then a running one */
    char *b = fake_body(5, 100);
    ck_assert_int_eq(store_result_save(s, k2, "{}", "{}", b, 100, NULL), CS_OK);
    free(b);
    cs_submit sub;
    ck_assert_int_eq(store_job_submit(s, "job-k1", k1, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_CREATED);
    ck_assert_int_eq(store_iso_lookup(s, cls, 16, &rows, &n, NULL), CS_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(rows[0].key, k2); /* put first */
    ck_assert_str_eq(rows[0].labelling, "1,0,2");
    ck_assert(rows[0].stored);
    ck_assert_int_eq(rows[0].job_status, -1);
    ck_assert_str_eq(rows[1].key, k1);
    ck_assert(!rows[1].stored);
    ck_assert_int_eq(rows[1].job_status, CS_JOB_QUEUED);
    ck_assert(rows[0].created <= rows[1].created);
    store_iso_rows_free(rows, n);
    cs_store_job j;
    bool claimed = false;
    ck_assert_int_eq(store_job_claim(s, "me", &j, &claimed, NULL), CS_OK);
    ck_assert(claimed);
    store_job_clear(&j);
    ck_assert_int_eq(store_iso_lookup(s, cls, 1, &rows, &n, NULL), CS_OK);
    ck_assert_int_eq(n, 1); /* the limit holds */
    store_iso_rows_free(rows, n);
    ck_assert_int_eq(store_iso_lookup(s, cls, 16, &rows, &n, NULL), CS_OK);
    ck_assert_int_eq(rows[1].job_status, CS_JOB_RUNNING);
    store_iso_rows_free(rows, n);
    store_close(s);
    /* reopening keeps the rows (the table is created only when missing) */
    s = open_store(url);
    ck_assert_int_eq(store_iso_lookup(s, other, 16, &rows, &n, NULL), CS_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(rows[0].key, k3);
    store_iso_rows_free(rows, n);
    store_close(s);
    cleanup(use_pg);
}

#define BOTH(body)                                                          \
    START_TEST(sqlite_##body) { body(false); }                              \
    END_TEST                                                                \
    START_TEST(pg_##body) { body(true); }                                   \
    END_TEST

BOTH(results_roundtrip)
BOTH(submit_outcomes)
BOTH(submit_races_finish)
BOTH(claims_are_exclusive)
BOTH(cancel_heartbeat_reap)
BOTH(kill9_keeps_acknowledged)
BOTH(handles_detach_and_revive)
BOTH(iso_index)

START_TEST(url_forms)
{
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-store", dir, sizeof dir), 0);
    cs_store *s = NULL;
    char sub[300];
    snprintf(sub, sizeof sub, "%s/nested/dir", dir);
    /* default: collsynth.db under the data dir, which is created */
    ck_assert_int_eq(store_open(NULL, sub, 1, &s, NULL), CS_OK);
    store_close(s);
    char path[400];
    snprintf(path, sizeof path, "%s/collsynth.db", sub);
    ck_assert_int_eq(access(path, F_OK), 0);
    cs_error err;
    ck_assert_int_ne(store_open("postgresql://nobody@127.0.0.1:1/none", NULL, 1, &s, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "postgresql"));
    remove_tree(dir);
}
END_TEST


/* A store made before job handles existed (no job_handles table, no waiters
 * column) opens and works: its queued job can be joined and let go. */
START_TEST(old_store_gains_handles)
{
    char dir[256], path[320], url[340];
    ck_assert_int_eq(make_temp_dir("collsynth-store", dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/old.db", dir);
    snprintf(url, sizeof url, "sqlite:%s", path);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    char key[65];
    key_of(7, key);
    char sql[2048];
    snprintf(sql, sizeof sql,
             "CREATE TABLE jobs (id TEXT PRIMARY KEY, key TEXT NOT NULL, request TEXT NOT NULL,"
             " status TEXT NOT NULL, progress TEXT, error TEXT, owner TEXT,"
             " attempts INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0,"
             " time_limit_s DOUBLE PRECISION NOT NULL DEFAULT 0,"
             " created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL,"
             " heartbeat DOUBLE PRECISION);"
             "CREATE UNIQUE INDEX jobs_active_key ON jobs (key) WHERE status IN ('queued', 'running');"
             "INSERT INTO jobs (id, key, request, status, created, updated)"
             " VALUES ('old1', '%s', '{}', 'queued', 1, 1);",
             key);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    cs_store *s = open_store(url);
    cs_submit sub;
    ck_assert_int_eq(store_job_submit(s, "new1", key, "{}", NULL, 0, 0, &sub, NULL), CS_OK);
    ck_assert_int_eq(sub.outcome, CS_SUBMIT_JOINED);
    ck_assert_str_eq(sub.job_id, "old1");
    cs_detach d;
    ck_assert_int_eq(store_job_detach(s, sub.handle_id, &d, NULL), CS_OK);
    ck_assert_int_eq(d.outcome, CS_DETACH_CANCELLED);
    /* it gained the isomorphism index too */
    cs_iso_row *rows = NULL;
    int n = -1;
    ck_assert_int_eq(store_iso_lookup(s, key, 4, &rows, &n, NULL), CS_OK);
    ck_assert_int_eq(n, 0);
    store_iso_rows_free(rows, n);
    ck_assert_int_eq(store_iso_put(s, key, key, "0", NULL), CS_OK);
    store_close(s);
    /* and opening it again is a no-op */
    s = open_store(url);
    store_close(s);
    remove_tree(dir);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *lite = tcase_create("sqlite");
    tcase_set_timeout(lite, 60);
    tcase_add_test(lite, url_forms);
    tcase_add_test(lite, old_store_gains_handles);
    tcase_add_test(lite, sqlite_results_roundtrip);
    tcase_add_test(lite, sqlite_submit_outcomes);
    tcase_add_test(lite, sqlite_submit_races_finish);
    tcase_add_test(lite, sqlite_claims_are_exclusive);
    tcase_add_test(lite, sqlite_cancel_heartbeat_reap);
    tcase_add_test(lite, sqlite_kill9_keeps_acknowledged);
    tcase_add_test(lite, sqlite_handles_detach_and_revive);
    tcase_add_test(lite, sqlite_iso_index);
    suite_add_tcase(s, lite);
    TCase *pgc = tcase_create("postgresql");
    tcase_set_timeout(pgc, 60);
    tcase_add_unchecked_fixture(pgc, pg_fixture_setup, pg_fixture_teardown);
    tcase_add_test(pgc, pg_results_roundtrip);
    tcase_add_test(pgc, pg_submit_outcomes);
    tcase_add_test(pgc, pg_submit_races_finish);
    tcase_add_test(pgc, pg_claims_are_exclusive);
    tcase_add_test(pgc, pg_iso_index);
    tcase_add_test(pgc, pg_cancel_heartbeat_reap);
    tcase_add_test(pgc, pg_kill9_keeps_acknowledged);
    tcase_add_test(pgc, pg_handles_detach_and_revive);
    suite_add_tcase(s, pgc);
    return s;
}

CS_CHECK_MAIN(store_suite)
