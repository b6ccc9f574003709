/* daemon_check.c - see daemon_check.h. */
#include "daemon_check.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

void daemon_start_checked(cs_daemon *d, const char *store, const char *const *extra)
{
    ck_assert_msg(daemon_start(d, store, NULL, extra) == 0, "daemon did not start");
}

json_t *resp_json(const http_resp *r)
{
    json_t *doc = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    ck_assert_msg(doc != NULL, "response is not JSON: %.300s", r->body ? r->body : "(none)");
    return doc;
}

const char *json_str(const json_t *doc, const char *key)
{
    const char *s = json_string_value(json_object_get(doc, key));
    return s ? s : "";
}

long post_synthesize(const cs_daemon *d, const char *body, json_t **doc)
{
    http_resp r;
    ck_assert_int_eq(http_request(d, "POST", "/v1/synthesize", body, NULL, &r), 0);
    long st = r.status;
    if (doc)
        *doc = resp_json(&r);
    http_resp_free(&r);
    return st;
}

json_t *get_json(const cs_daemon *d, const char *path, long *status)
{
    http_resp r;
    ck_assert_int_eq(http_request(d, "GET", path, NULL, NULL, &r), 0);
    if (status)
        *status = r.status;
    json_t *doc = resp_json(&r);
    http_resp_free(&r);
    return doc;
}

long submit_job_checked(const cs_daemon *d, const char *body, char id[40], char key[65])
{
    json_t *doc = NULL;
    long st = post_synthesize(d, body, &doc);
    ck_assert_msg(st == 202 || st == 200, "POST answered %ld: %s", st,
                  json_str(json_object_get(doc, "error"), "message"));
    id[0] = '\0';
    if (key)
        snprintf(key, 65, "%s", json_str(doc, "key"));
    if (st == 202) {
        snprintf(id, 40, "%s", json_str(doc, "job"));
    } else {
        long lst = 0;
        json_t *list = get_json(d, "/v1/jobs?limit=500", &lst);
        ck_assert_int_eq(lst, 200);
        json_t *jobs = json_object_get(list, "jobs");
        for (size_t i = 0; i < json_array_size(jobs) && !id[0]; i++)
            if (!strcmp(json_str(json_array_get(jobs, i), "key"), json_str(doc, "key")))
                snprintf(id, 40, "%s", json_str(json_array_get(jobs, i), "id"));
        json_decref(list);
    }
    ck_assert_msg(id[0], "no job for the submission (POST answered %ld)", st);
    json_decref(doc);
    return st;
}
