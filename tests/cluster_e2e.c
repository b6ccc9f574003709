/*
 * cluster_e2e.c - issue 10's end-to-end cluster check over HTTP (see
 * cluster_e2e.h).
 */
#include "cluster_e2e.h"
#include "cluster_testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collective.h"
#include "msccl_check.h"
#include "msccl_interp.h"
#include "topology.h"

static double e2e_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void e2e_options_default(e2e_options *o)
{
    memset(o, 0, sizeof *o);
    o->done_timeout_s = 600;
    o->rank_stride = 1;
    o->max_algs = 1;
    o->executor = true;
    o->node_ranks = 8;
    o->warm_samples = 32;
}

/* ---- HTTP on one keep-alive connection --------------------------------------------------- */

typedef struct e2e_http {
    CURL *c;
    const char *base;
} e2e_http;

/* Sends one request; the body lands in *b (reset first).  Returns the HTTP
 * status, or -1 on a transport error; *ms gets the total time. */
static long e2e_req(e2e_http *h, const char *method, const char *path, const char *body,
                    cs_buf *b, double *ms)
{
    char url[2048];
    snprintf(url, sizeof url, "%s%s", h->base, path);
    cs_buf_reset(b);
    curl_easy_setopt(h->c, CURLOPT_URL, url);
    curl_easy_setopt(h->c, CURLOPT_WRITEFUNCTION, cs_buf_write);
    curl_easy_setopt(h->c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h->c, CURLOPT_TIMEOUT, 900L);
    struct curl_slist *hdr = NULL;
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, hdr);
    } else {
        curl_easy_setopt(h->c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, NULL);
    }
    curl_easy_setopt(h->c, CURLOPT_CUSTOMREQUEST, strcmp(method, "GET") && strcmp(method, "POST")
                                                      ? method : NULL);
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h->c, CURLOPT_ERRORBUFFER, ebuf);
    double t0 = e2e_now();
    CURLcode rc = curl_easy_perform(h->c);
    curl_easy_setopt(h->c, CURLOPT_ERRORBUFFER, NULL);
    if (ms)
        *ms = (e2e_now() - t0) * 1e3;
    curl_slist_free_all(hdr);
    if (body)
        curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, NULL);
    if (rc != CURLE_OK) {
        /* the transport error as the body, for the report */
        cs_buf_reset(b);
        cs_buf_puts(b, ebuf[0] ? ebuf : curl_easy_strerror(rc));
        return -1;
    }
    long status = 0;
    curl_easy_getinfo(h->c, CURLINFO_RESPONSE_CODE, &status);
    if (!b->s)
        cs_buf_puts(b, "");
    return status;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static const char *e2e_str(const json_t *o, const char *name, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? s : dflt;
}

static int e2e_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double e2e_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, e2e_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void e2e_problem(e2e_runtime_report *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void e2e_problem(e2e_runtime_report *rt, const char *fmt, ...)
{
    if (rt->first_problem[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->first_problem, sizeof rt->first_problem, fmt, ap);
    va_end(ap);
}

/* Where a slice's <gpu> elements are: [*lo, *hi) of its text; the header is
 * [0, *lo).  False when the slice has no "<gpu" or no "</algo>". */
static bool e2e_gpu_span(const char *xml, size_t len, size_t *lo, size_t *hi)
{
    const char *g = strstr(xml, "<gpu");
    const char *end = NULL;
    for (const char *p = strstr(xml, "</algo>"); p; p = strstr(p + 1, "</algo>"))
        end = p;
    if (!g || !end || end < g || (size_t)(end - xml) > len)
        return false;
    while (g > xml && (g[-1] == ' ' || g[-1] == '\t'))
        g--;
    *lo = (size_t)(g - xml);
    *hi = (size_t)(end - xml);
    return true;
}

/* ---- one algorithm under one runtime -------------------------------------------------------- */

static void e2e_check_runtime(const e2e_options *o, e2e_http *h, const char *key, int alg,
                              int ranks, cs_coll_kind kind, const char *runtime,
                              e2e_runtime_report *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->runtime = runtime;
    rt->interp_rc = -1;
    cs_msccl_runtime rtv = CS_MSCCL_RUNTIME_AUTO;
    cs_error err;
    msccl_runtime_from_name(runtime, &rtv, &err);
    int stride = o->rank_stride > 0 ? o->rank_stride : 1;
    int n = (ranks + stride - 1) / stride;
    double *cold = calloc((size_t)n, sizeof *cold);
    char **slices = calloc((size_t)ranks, sizeof *slices);
    size_t *lens = calloc((size_t)ranks, sizeof *lens);
    cs_buf b = {0};
    char path[512];
    int nc = 0;
    for (int r = 0; r < ranks; r += stride) {
        snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s&alg=%d&rank=%d",
                 key, runtime, alg, r);
        double ms = 0;
        long st = e2e_req(h, "GET", path, NULL, &b, &ms);
        cold[nc++] = ms;
        if (ms > rt->cold_ms_max)
            rt->cold_ms_max = ms;
        if (st != 200) {
            rt->refused++;
            if (st == 422 && b.s && strstr(b.s, "\"code\":\"limit\""))
                rt->refused_limit++;
            e2e_problem(rt, "rank %d: HTTP %ld: %.300s", r, st, b.s ? b.s : "");
            continue;
        }
        rt->fetched++;
        rt->bytes += (long)b.len;
        cs_msccl_check_stats cst;
        if (msccl_check_limits(b.s, b.len, rtv, &cst, &err) != CS_OK) {
            rt->limits_failed++;
            e2e_problem(rt, "rank %d: limits: %s", r, err.message);
        } else {
            if (cst.max_elements > rt->worst_elements) {
                rt->worst_elements = cst.max_elements;
                rt->worst_elements_rank = r;
            }
            if (cst.max_steps > rt->worst_steps)
                rt->worst_steps = cst.max_steps;
            if (cst.max_tbs > rt->worst_tbs)
                rt->worst_tbs = cst.max_tbs;
            if (cst.max_cnt > rt->worst_cnt)
                rt->worst_cnt = cst.max_cnt;
            rt->nchannels = cst.nchannels;
            if (cst.gpus != 1 || cst.ngpus != ranks)
                e2e_problem(rt, "rank %d: the slice holds %d <gpu> of ngpus=%d (want 1 of %d)",
                            r, cst.gpus, cst.ngpus, ranks);
        }
        cs_msccl_doc *doc = NULL;
        if (msccl_doc_parse_slice(b.s, b.len, &doc, &err) != CS_OK) {
            e2e_problem(rt, "rank %d: slice does not parse: %s", r, err.message);
        } else {
            if (!msccl_doc_has_gpu(doc, r))
                e2e_problem(rt, "rank %d: the slice has no <gpu id=\"%d\">", r, r);
            msccl_doc_free(doc);
        }
        slices[r] = cs_buf_take(&b, &lens[r]);
        if (o->log && (r / stride) % 128 == 127)
            fprintf(o->log, "    %s: %d/%d slices, last %.1f ms\n", runtime, r + 1, ranks, ms);
    }
    rt->cold_ms_median = e2e_median(cold, nc);
    /* warm: the same slices again, now cached */
    int nw = o->warm_samples < n ? o->warm_samples : n;
    double *warm = calloc((size_t)(nw > 0 ? nw : 1), sizeof *warm);
    for (int i = 0; i < nw; i++) {
        int r = (int)(((long)i * ranks / nw) / stride * stride);
        snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s&alg=%d&rank=%d",
                 key, runtime, alg, r);
        long st = e2e_req(h, "GET", path, NULL, &b, &warm[i]);
        if (st != 200 || !slices[r] || b.len != lens[r] || memcmp(b.s, slices[r], b.len))
            e2e_problem(rt, "rank %d: a repeated fetch answered %ld with other bytes", r, st);
        if (warm[i] > rt->warm_ms_max)
            rt->warm_ms_max = warm[i];
    }
    rt->warm_ms_median = e2e_median(warm, nw);
    free(warm);
    /* every node's slice (?ranks=A-B, what the Slurm hook asks for) = its
     * ranks' slices, byte for byte, within the limits */
    int nr = o->node_ranks > 0 ? o->node_ranks : 8;
    int nodes = ranks / nr;
    double *node_ms = calloc((size_t)(nodes > 0 ? nodes : 1), sizeof *node_ms);
    rt->node_ok = nodes >= 1;
    for (int node = 0; node < nodes; node++) {
        int lo = node * nr, hi = lo + nr - 1;
        snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&runtime=%s&alg=%d&ranks=%d-%d",
                 key, runtime, alg, lo, hi);
        long st = e2e_req(h, "GET", path, NULL, &b, &node_ms[node]);
        if (node_ms[node] > rt->node_ms_max)
            rt->node_ms_max = node_ms[node];
        if (st != 200) {
            rt->node_ok = false;
            e2e_problem(rt, "ranks %d-%d: HTTP %ld: %.300s", lo, hi, st, b.s ? b.s : "");
        } else if (msccl_check_limits(b.s, b.len, rtv, NULL, &err) != CS_OK) {
            rt->node_ok = false;
            e2e_problem(rt, "ranks %d-%d: limits: %s", lo, hi, err.message);
        } else {
            size_t glo, ghi, off = 0, plo, phi;
            bool same = e2e_gpu_span(b.s, b.len, &glo, &ghi);
            off = glo;
            bool have = true;   /* with a stride, only the limits are checked */
            for (int r = lo; r <= hi; r++)
                have = have && slices[r];
            for (int r = lo; have && same && r <= hi; r++) {
                same = slices[r] && e2e_gpu_span(slices[r], lens[r], &plo, &phi) &&
                       off + (phi - plo) <= ghi &&
                       !memcmp(b.s + off, slices[r] + plo, phi - plo) &&
                       plo == glo && !memcmp(b.s, slices[r], glo);
                if (same)
                    off += phi - plo;
            }
            if (have && (!same || off != ghi)) {
                rt->node_ok = false;
                e2e_problem(rt, "ranks %d-%d: the node's slice is not its ranks' slices", lo, hi);
            }
        }
    }
    rt->node_ms = e2e_median(node_ms, nodes);
    free(node_ms);
    /* reassemble and run */
    bool all = stride == 1 && rt->fetched == ranks;
    if (all) {
        size_t glo, ghi;
        size_t total = 0;
        bool ok = true;
        for (int r = 0; r < ranks && ok; r++) {
            ok = e2e_gpu_span(slices[r], lens[r], &glo, &ghi);
            total += ghi - glo;
        }
        if (!ok) {
            e2e_problem(rt, "a slice has no <gpu> ... </algo> span");
        } else {
            e2e_gpu_span(slices[0], lens[0], &glo, &ghi);
            size_t head = glo;
            char *doc_text = malloc(head + total + 16);
            memcpy(doc_text, slices[0], head);
            size_t at = head;
            for (int r = 0; r < ranks; r++) {
                e2e_gpu_span(slices[r], lens[r], &glo, &ghi);
                memcpy(doc_text + at, slices[r] + glo, ghi - glo);
                at += ghi - glo;
            }
            at += (size_t)sprintf(doc_text + at, "</algo>\n");
            double t0 = e2e_now();
            cs_msccl_doc *doc = NULL;
            rt->interp_rc = msccl_doc_parse(doc_text, at, &doc, &err);
            if (rt->interp_rc != CS_OK) {
                e2e_problem(rt, "reassembled document (%.1f MB): %s", (double)at / 1e6,
                            err.message);
            } else {
                cs_collective c;
                collective_init(&c, kind, -1);
                cs_msccl_interp_options io;
                msccl_interp_options_default(&io);
                io.collective = &c;
                io.elems_per_chunk = 1;
                cs_msccl_interp_stats ist;
                rt->interp_rc = msccl_interp_check(doc, &io, &ist, &err);
                rt->interp_steps = ist.steps_executed;
                if (rt->interp_rc != CS_OK)
                    e2e_problem(rt, "interpreter: %s", err.message);
                msccl_doc_free(doc);
            }
            rt->interp_s = e2e_now() - t0;
            free(doc_text);
        }
    }
    for (int r = 0; r < ranks; r++)
        free(slices[r]);
    free(slices);
    free(lens);
    free(cold);
    cs_buf_free(&b);
}

/* ---- the whole case -------------------------------------------------------------------------- */

int e2e_run(const e2e_options *o, const char *topology, const char *collective, e2e_report *rep)
{
    memset(rep, 0, sizeof *rep);
    cs_coll_kind kind;
    if (collective_kind_from_name(collective, &kind) != CS_OK) {
        snprintf(rep->error, sizeof rep->error, "unknown collective %s", collective);
        return -1;
    }
    e2e_http h = {curl_easy_init(), o->base_url};
    if (!h.c) {
        snprintf(rep->error, sizeof rep->error, "curl_easy_init failed");
        return -1;
    }
    cs_buf b = {0};
    size_t blen = strlen(topology) + 256;
    char *body = malloc(blen);
    snprintf(body, blen,
             "{\"topology\":%s,\"collective\":{\"kind\":\"%s\"},\"method\":\"auto\","
             "\"options\":{\"wait_s\":%.0f}}",
             topology, collective, o->done_timeout_s < 300 ? o->done_timeout_s : 300);
    double t0 = e2e_now();
    rep->post_status = e2e_req(&h, "POST", "/v1/synthesize?view=summary", body, &b, &rep->post_ms);
    free(body);
    int rc = -1;
    json_t *res = NULL, *doc = b.s ? json_loads(b.s, 0, NULL) : NULL;
    if (rep->post_status == 202 && json_is_string(json_object_get(doc, "job"))) {
        char path[256];
        snprintf(path, sizeof path, "/v1/jobs/%s?view=summary",
                 json_string_value(json_object_get(doc, "job")));
        for (;;) {
            json_decref(doc);
            doc = NULL;
            long st = e2e_req(&h, "GET", path, NULL, &b, NULL);
            doc = st == 200 ? json_loads(b.s, 0, NULL) : NULL;
            const char *s = json_string_value(json_object_get(doc, "status"));
            if (s && !strcmp(s, "done")) {
                rep->server_s = json_number_value(json_object_get(doc, "updated")) -
                                json_number_value(json_object_get(doc, "created"));
                res = json_incref(json_object_get(doc, "result"));
                break;
            }
            if (!s || !strcmp(s, "failed") || !strcmp(s, "cancelled") ||
                e2e_now() - t0 > o->done_timeout_s) {
                snprintf(rep->error, sizeof rep->error, "job %s: %.400s", s ? s : "?",
                         b.s ? b.s : "");
                goto out;
            }
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    } else if (rep->post_status == 200 && json_is_array(json_object_get(doc, "frontier"))) {
        res = json_incref(doc);
    } else {
        snprintf(rep->error, sizeof rep->error, "POST answered %ld: %.400s", rep->post_status,
                 b.s ? b.s : "");
        goto out;
    }
    rep->done_s = e2e_now() - t0;
    rep->partial = o->rank_stride > 1;
    rep->done = true;
    snprintf(rep->key, sizeof rep->key, "%s",
             e2e_str(res, "key", ""));
    snprintf(rep->method, sizeof rep->method, "%s",
             e2e_str(res, "method", "?"));
    snprintf(rep->reason, sizeof rep->reason, "%s",
             e2e_str(res, "reason", ""));
    if (!rep->key[0]) {
        /* a result answered by POST may leave the key to the job; ask the list */
        snprintf(rep->error, sizeof rep->error, "the result names no key");
        goto out;
    }
    json_t *fr = json_object_get(res, "frontier");
    rep->nalgs = (int)json_array_size(fr);
    if (rep->nalgs == 0) {
        snprintf(rep->error, sizeof rep->error, "empty frontier");
        goto out;
    }
    rep->ranks = (int)json_integer_value(json_object_get(json_array_get(fr, 0), "ranks"));
    int want = o->max_algs > 0 && o->max_algs < rep->nalgs ? o->max_algs : rep->nalgs;
    if (want > E2E_MAX_ALGS)
        want = E2E_MAX_ALGS;
    const char *runtimes[2] = {"msccl", "msccl-executor"};
    for (int i = 0; i < want; i++) {
        e2e_alg_report *a = &rep->algs[i];
        json_t *aj = json_array_get(fr, (size_t)i);
        a->index = i;
        a->steps = (int)json_integer_value(json_object_get(aj, "steps"));
        a->chunks = (int)json_integer_value(json_object_get(aj, "chunks"));
        a->ratio_to_bound = json_number_value(json_object_get(aj, "ratio_to_bound"));
        a->nrt = o->executor ? 2 : 1;
        for (int k = 0; k < a->nrt; k++) {
            if (o->log)
                fprintf(o->log, "  alg %d (%d steps, %d chunks), runtime %s: fetching %d slices\n",
                        i, a->steps, a->chunks, runtimes[k], rep->ranks);
            e2e_check_runtime(o, &h, rep->key, i, rep->ranks, kind, runtimes[k], &a->rt[k]);
        }
        rep->nchecked = i + 1;
    }
    rc = 0;
out:
    json_decref(res);
    json_decref(doc);
    cs_buf_free(&b);
    curl_easy_cleanup(h.c);
    return rc;
}

bool e2e_ok(const e2e_report *rep)
{
    if (!rep->done || rep->error[0] || rep->nchecked == 0)
        return false;
    for (int i = 0; i < rep->nchecked; i++)
        for (int k = 0; k < rep->algs[i].nrt; k++) {
            const e2e_runtime_report *rt = &rep->algs[i].rt[k];
            if (rt->refused || rt->limits_failed || rt->first_problem[0] ||
                (!rep->partial && rt->interp_rc != CS_OK) || !rt->node_ok)
                return false;
        }
    return true;
}

void e2e_print(FILE *f, const char *label, const e2e_report *rep)
{
    fprintf(f, "%s: %s in %.2f s (POST %ld), method %s, %d ranks, %d frontier algorithms%s\n",
            label, rep->done ? "done" : "NOT done", rep->done_s, rep->post_status, rep->method,
            rep->ranks, rep->nalgs, rep->partial ? " (a stride of ranks: partial check)" : "");
    if (rep->reason[0])
        fprintf(f, "  reason: %s\n", rep->reason);
    if (rep->error[0])
        fprintf(f, "  error: %s\n", rep->error);
    for (int i = 0; i < rep->nchecked; i++) {
        const e2e_alg_report *a = &rep->algs[i];
        for (int k = 0; k < a->nrt; k++) {
            const e2e_runtime_report *rt = &a->rt[k];
            fprintf(f,
                    "  alg %d (%d steps, %d chunks, ratio %.3f) %-14s slices %d/%d ok, "
                    "%.1f MB; cold ms median %.1f max %.1f; warm ms median %.2f max %.2f; "
                    "worst rank %ld elements (rank %d), %d steps, %d tbs, cnt %d, %d channels; "
                    "node slices %s (ms median %.1f max %.1f); interpreter %s (%.1f s, %ld steps)\n",
                    a->index, a->steps, a->chunks, a->ratio_to_bound, rt->runtime,
                    rt->fetched - rt->limits_failed, rep->ranks, (double)rt->bytes / 1e6,
                    rt->cold_ms_median, rt->cold_ms_max, rt->warm_ms_median, rt->warm_ms_max,
                    rt->worst_elements, rt->worst_elements_rank, rt->worst_steps, rt->worst_tbs,
                    rt->worst_cnt, rt->nchannels, rt->node_ok ? "ok" : "FAILED", rt->node_ms,
                    rt->node_ms_max,
                    rt->interp_rc == CS_OK ? "ok" : rt->interp_rc < 0 ? "not run" : "REJECTED",
                    rt->interp_s, rt->interp_steps);
            if (rt->first_problem[0])
                fprintf(f, "    first problem: %s\n", rt->first_problem);
        }
    }
}

/* ---- the hook's cluster ------------------------------------------------------------------------ */

char *e2e_hook_dgx1_cluster(int nodes, char *msg, size_t msglen)
{
    json_t *topo = cluster_hook_dgx1("hook", nodes, 1, "switch", 12.5, NULL, msg, msglen);
    char *text = topo ? json_dumps(topo, JSON_COMPACT) : NULL;
    json_decref(topo);
    return text;
}
