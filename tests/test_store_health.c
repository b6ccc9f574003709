/*
 * collsynthd on a store it can read but not write (a full disk), against
 * the real daemon.  The audit's reproducer (2026-11-26): collsynthd on a
 * 1 MB tmpfs; once the disk was full every result failed to store
 * (event=job_store_failed), jobs stayed "running" with no progress and were
 * re-run until they failed as interrupted, queued ones were never claimed
 * (event=claim_failed twice a second), and GET /v1/health answered 200
 * "ok" throughout, since it only reads.
 *
 * A full disk without root: the daemon is started with a file-size limit
 * (RLIMIT_FSIZE, SIGXFSZ ignored), so every write that would grow a file of
 * the store past it fails with EFBIG, as ENOSPC would.  The store starts
 * well inside the limit; a result of a few MB (a body file) does not fit.
 * The job that made it then fails at once with the store's words.
 */
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "cs_common.h"
#include "daemon_check.h"
#include "server_harness.h"

/* Starts the daemon with every file it writes limited to limit_bytes. */
static void start_with_file_limit(cs_daemon *d, rlim_t limit_bytes)
{
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = limit_bytes;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of a core dump */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = daemon_start(d, NULL, NULL, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    ck_assert_msg(rc == 0, "collsynthd did not start under a %lu-byte file limit",
                  (unsigned long)limit_bytes);
}

START_TEST(health_reports_a_store_that_cannot_be_written)
{
    cs_daemon d;
    start_with_file_limit(&d, 1u << 20);
    long st = 0;
    json_t *h = get_json(&d, "/v1/health", &st);
    ck_assert_msg(st == 200, "health %ld before anything was written", st);
    ck_assert_str_eq(json_str(h, "status"), "ok");
    json_decref(h);
    h = NULL; /* the loop below drops the previous answer first */

    /* mesh2d:20x20 TACOS allgather: 160k sends, a result body of several MB.
     * The waiting POST hears the failure as the service's (503), not as a
     * fault of its request (422, which the CLI turns into exit 2) */
    json_t *doc = NULL;
    long pst = post_synthesize(&d,
                               "{\"topology\":\"mesh2d:20x20\",\"collective\":\"allgather\","
                               "\"method\":\"tacos\",\"options\":{\"wait_s\":20}}",
                               &doc);
    ck_assert_msg(pst == 503, "POST answered %ld (want 503 store_failed): %s", pst,
                  json_str(json_object_get(doc, "error"), "message"));
    ck_assert_str_eq(json_str(json_object_get(doc, "error"), "code"), "store_failed");
    char job[64] = "";
    snprintf(job, sizeof job, "%s", json_str(doc, "job"));
    json_decref(doc);

    /* the failed write shows in health within a few seconds */
    const char *status = "";
    json_t *store = NULL;
    double until = cs_now() + 20;
    do {
        json_decref(h);
        h = get_json(&d, "/v1/health", &st);
        status = json_str(h, "status");
        store = json_object_get(h, "store");
        if (st == 503)
            break;
        usleep(200 * 1000);
    } while (cs_now() < until);
    ck_assert_msg(st == 503 && strcmp(status, "degraded") == 0,
                  "health still %ld %s while the store cannot be written", st, status);
    ck_assert_msg(json_is_false(json_object_get(store, "ok")), "store.ok is not false");
    const char *why = json_str(store, "error");
    ck_assert_msg(strstr(why, "writes to the store fail") != NULL &&
                  (strstr(why, "File too large") || strstr(why, "full") ||
                   strstr(why, "I/O")),
                  "the cause is not named: %s", why);
    json_decref(h);

    /* the job says why at once: failed, in the store's words; not "running"
     * for --lease seconds, three runs, then "interrupted" */
    if (job[0]) {
        char path[128];
        snprintf(path, sizeof path, "/v1/jobs/%s", job);
        json_t *jd = NULL;
        until = cs_now() + 15;
        for (;;) {
            json_decref(jd);
            jd = get_json(&d, path, &st);
            if (strcmp(json_str(jd, "status"), "failed") == 0 || cs_now() > until)
                break;
            usleep(200 * 1000);
        }
        ck_assert_msg(strcmp(json_str(jd, "status"), "failed") == 0,
                      "job %s still %s, attempts %lld", job, json_str(jd, "status"),
                      json_integer_value(json_object_get(jd, "attempts")));
        json_t *e = json_object_get(jd, "error");
        ck_assert_str_eq(json_str(e, "code"), "store_failed");
        ck_assert_msg(strstr(json_str(e, "message"), "the store could not keep it") != NULL,
                      "%s", json_str(e, "message"));
        json_decref(jd);
    } else {
        ck_abort_msg("the POST answered neither the result nor a job");
    }

    /* reads still work: the list of results answers */
    json_t *list = get_json(&d, "/v1/results", &st);
    ck_assert_int_eq(st, 200);
    json_decref(list);
    daemon_stop(&d);
}
END_TEST

/* A store that cannot be opened is named with its cause: an unknown URL
 * scheme is refused (it used to become a SQLite file "mysql:" in the working
 * directory, or "unable to open database file"), a data dir that is a file
 * says so, and SQLite's bare "unable to open database file" gets the
 * system's reason. */
START_TEST(startup_names_why_the_store_cannot_be_opened)
{
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-storeopen", dir, sizeof dir), 0);
    char cmd[PATH_MAX + 1400], *out = NULL, *err = NULL;
    char bin[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(cs_test_build_dir(), bin));
    /* an unknown scheme, run in dir: nothing may be created there */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s/collsynthd --port 0 --store mysql://db.example/collsynth", dir, bin);
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc != 0, "started on mysql://");
    ck_assert_msg(strstr(err, "unknown store 'mysql://...'") != NULL, "%s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    cs_test_sh(cmd, &out, &err);
    ck_assert_msg(out[0] == '\0', "files created for mysql://: %s", out);
    free(out);
    free(err);
    /* a data dir that is a file */
    snprintf(cmd, sizeof cmd, "touch '%s/afile' && %s/collsynthd --port 0 --data-dir '%s/afile'",
             dir, bin, dir);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "afile is not a directory") != NULL, "%s", err);
    free(out);
    free(err);
    /* the database path is a directory: SQLite's message plus the reason */
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/d/collsynth.db' && %s/collsynthd --port 0 --data-dir '%s/d'", dir,
             bin, dir);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "unable to open database file (") != NULL, "no reason: %s", err);
    free(out);
    free(err);
    remove_tree(dir);
}
END_TEST

/* ---- a store that refuses a job's outcome, not just its result ---------------------
 *
 * The audit's case (2026-11-26): the result cannot be stored (a full disk),
 * and the job's failed state (store_failed) is refused as well.  The job
 * then stayed "running" until its lease ran out, ran again --max-attempts
 * times on the same live daemon (each refused the same way) and ended
 * "interrupted: the daemon running it stopped 3 times".  Now the daemon
 * holds the outcome, keeps the job's lease (no re-run), shows the outcome
 * as the job's progress, and records it once the store takes writes; a
 * daemon stopped before that says so in its log, and the next start
 * re-queues the job, which then completes.
 *
 * The refusals are injected with SQLite triggers added to the daemon's
 * database from outside (the store's own code unchanged): a result row
 * cannot be inserted, and a job cannot move to "failed" or "done"; the
 * heartbeat (an update that keeps the status) still goes through, as small
 * writes do on a nearly full disk.  Dropping the triggers frees the disk. */

static void store_sql(const cs_daemon *d, const char *sql)
{
    char path[400];
    snprintf(path, sizeof path, "%s/collsynth.db", d->dir);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
    sqlite3_close(db);
}

static const char refuse_outcomes[] =
    "CREATE TRIGGER full_results BEFORE INSERT ON results"
    " BEGIN SELECT RAISE(FAIL, 'database or disk is full (injected)'); END;"
    "CREATE TRIGGER full_jobs BEFORE UPDATE OF status ON jobs"
    " WHEN NEW.status IN ('failed', 'done')"
    " BEGIN SELECT RAISE(FAIL, 'database or disk is full (injected)'); END;";
static const char take_outcomes[] =
    "DROP TRIGGER full_results; DROP TRIGGER full_jobs;";

/* Submits body (no waiting) and returns its job id (static buffer); a 200
 * (the ring job's result stored before the answer) is taken too. */
static const char *submit_job(const cs_daemon *d, const char *body)
{
    static char job[40];
    submit_job_checked(d, body, job, NULL);
    return job;
}

/* GET /v1/jobs/ID until pred holds or timeout_s passes; the last answer
 * (caller decrefs). */
static json_t *poll_job(const cs_daemon *d, const char *job, double timeout_s,
                        bool (*pred)(const json_t *))
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", job);
    json_t *jd = NULL;
    double until = cs_now() + timeout_s;
    for (;;) {
        long st = 0;
        json_decref(jd);
        jd = get_json(d, path, &st);
        if ((jd && pred(jd)) || cs_now() > until)
            return jd;
        usleep(100 * 1000);
    }
}

static bool shows_refused_outcome(const json_t *jd)
{
    const char *o = json_str(json_object_get(jd, "progress"), "outcome");
    return strcmp(o, "store_failed") == 0;
}

static bool has_ended(const json_t *jd)
{
    const char *st = json_str(jd, "status");
    return strcmp(st, "failed") == 0 || strcmp(st, "done") == 0;
}

static char *daemon_log(const cs_daemon *d)
{
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    ck_assert_int_eq(cs_read_file(d->log_path, &text, &len, &err), CS_OK);
    return text;
}

START_TEST(a_refused_failed_state_is_held_then_recorded)
{
    cs_daemon d;
    const char *extra[] = {"--lease", "1", "--max-attempts", "2", NULL};
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, extra), 0);
    store_sql(&d, refuse_outcomes);
    const char *job = submit_job(&d, "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                     "\"method\":\"ring\"}");
    char id[64];
    snprintf(id, sizeof id, "%s", job);
    json_t *jd = poll_job(&d, id, 15, shows_refused_outcome);
    ck_assert_msg(shows_refused_outcome(jd), "the job does not show why: %s",
                  json_dumps(jd, 0));
    ck_assert_str_eq(json_str(jd, "status"), "running");
    ck_assert_msg(strstr(json_str(json_object_get(jd, "progress"), "message"),
                         "the store could not keep it") != NULL, "%s", json_dumps(jd, 0));
    json_decref(jd);
    /* several leases later: not re-run, not "interrupted" */
    usleep(3500 * 1000);
    jd = poll_job(&d, id, 0, shows_refused_outcome);
    ck_assert_msg(strcmp(json_str(jd, "status"), "running") == 0 &&
                      json_integer_value(json_object_get(jd, "attempts")) == 1,
                  "the job was re-run or reaped: %s", json_dumps(jd, 0));
    json_decref(jd);
    /* the disk is freed: the failure is recorded, in the store's words */
    store_sql(&d, take_outcomes);
    jd = poll_job(&d, id, 10, has_ended);
    ck_assert_msg(strcmp(json_str(jd, "status"), "failed") == 0, "%s", json_dumps(jd, 0));
    json_t *e = json_object_get(jd, "error");
    ck_assert_str_eq(json_str(e, "code"), "store_failed");
    ck_assert_msg(strstr(json_str(e, "message"), "database or disk is full") != NULL, "%s",
                  json_str(e, "message"));
    ck_assert_int_eq(json_integer_value(json_object_get(jd, "attempts")), 1);
    json_decref(jd);
    char *log = daemon_log(&d);
    ck_assert_msg(strstr(log, "job_store_failed") && strstr(log, "refused that state too"),
                  "%s", log);
    ck_assert_msg(strstr(log, "job_outcome_recorded") != NULL, "%s", log);
    ck_assert_msg(strstr(log, "interrupted") == NULL, "%s", log);
    free(log);
    daemon_stop(&d);
}
END_TEST

START_TEST(a_refused_outcome_at_shutdown_is_requeued_at_the_next_start)
{
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-unrecorded", dir, sizeof dir), 0);
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, dir, NULL), 0);
    store_sql(&d, refuse_outcomes);
    const char *job = submit_job(&d, "{\"topology\":\"ring:6\",\"collective\":\"allgather\","
                                     "\"method\":\"ring\"}");
    char id[64];
    snprintf(id, sizeof id, "%s", job);
    json_t *jd = poll_job(&d, id, 15, shows_refused_outcome);
    ck_assert_msg(shows_refused_outcome(jd), "%s", json_dumps(jd, 0));
    json_decref(jd);
    daemon_stop_ex(&d, 20, true);
    char *log = daemon_log(&d);
    ck_assert_msg(strstr(log, "job_outcome_unrecorded") != NULL &&
                      strstr(log, "the next start re-queues it") != NULL, "%s", log);
    free(log);
    /* the disk is freed while the daemon is down; the next start runs the
     * job again and it completes */
    store_sql(&d, take_outcomes);
    ck_assert_int_eq(daemon_start(&d, NULL, dir, NULL), 0);
    jd = poll_job(&d, id, 20, has_ended);
    ck_assert_msg(strcmp(json_str(jd, "status"), "done") == 0, "%s", json_dumps(jd, 0));
    ck_assert_int_eq(json_integer_value(json_object_get(jd, "attempts")), 2);
    json_decref(jd);
    daemon_stop(&d);
    remove_tree(dir);
}
END_TEST

START_TEST(a_refused_done_state_is_recorded_without_a_rerun)
{
    cs_daemon d;
    const char *extra[] = {"--lease", "1", NULL};
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, extra), 0);
    /* the result goes in; only the job's move to done is refused */
    store_sql(&d, "CREATE TRIGGER full_jobs BEFORE UPDATE OF status ON jobs"
                  " WHEN NEW.status = 'done'"
                  " BEGIN SELECT RAISE(FAIL, 'database or disk is full (injected)'); END;");
    const char *job = submit_job(&d, "{\"topology\":\"ring:5\",\"collective\":\"allgather\","
                                     "\"method\":\"ring\"}");
    char id[64];
    snprintf(id, sizeof id, "%s", job);
    usleep(3000 * 1000);
    json_t *jd = poll_job(&d, id, 0, has_ended);
    ck_assert_msg(strcmp(json_str(jd, "status"), "running") == 0 &&
                      json_integer_value(json_object_get(jd, "attempts")) == 1,
                  "%s", json_dumps(jd, 0));
    ck_assert_str_eq(json_str(json_object_get(jd, "progress"), "outcome"), "done_unrecorded");
    json_decref(jd);
    /* the refused write shows in health, as every other refused write does */
    long st = 0;
    json_t *h = get_json(&d, "/v1/health", &st);
    const char *why = json_str(json_object_get(h, "store"), "error");
    ck_assert_msg(st == 503 && strstr(why, "database or disk is full") != NULL,
                  "health %ld while the job's done state is refused: %s", st, why);
    json_decref(h);
    store_sql(&d, "DROP TRIGGER full_jobs;");
    jd = poll_job(&d, id, 10, has_ended);
    ck_assert_msg(strcmp(json_str(jd, "status"), "done") == 0 &&
                      json_integer_value(json_object_get(jd, "attempts")) == 1,
                  "%s", json_dumps(jd, 0));
    json_decref(jd);
    daemon_stop(&d);
}
END_TEST

static Suite *store_health_suite(void)
{
    Suite *s = suite_create("store_health");
    TCase *tc = tcase_create("full disk");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, health_reports_a_store_that_cannot_be_written);
    suite_add_tcase(s, tc);
    TCase *held = tcase_create("refused outcomes");
    tcase_set_timeout(held, 120);
    tcase_add_test(held, a_refused_failed_state_is_held_then_recorded);
    tcase_add_test(held, a_refused_outcome_at_shutdown_is_requeued_at_the_next_start);
    tcase_add_test(held, a_refused_done_state_is_recorded_without_a_rerun);
    suite_add_tcase(s, held);
    TCase *open = tcase_create("opening");
    tcase_set_timeout(open, 60);
    tcase_add_test(open, startup_names_why_the_store_cannot_be_opened);
    suite_add_tcase(s, open);
    return s;
}

CS_CHECK_MAIN(store_health_suite)
