/*
 * algorithm.c - the schedule object (CONTRACT.md section 3), its JSON form,
 * bandwidth fitting, the alpha-beta cost, and synthesis results (section 4).
 *
 * Sends live in one flat array that grows geometrically: TACOS schedules reach
 * millions of sends, so there is no per-send allocation and no per-send JSON
 * object kept around.  The parser is strict about what it accepts (types,
 * ranges, consistency of the header) and names the JSON path of the first bad
 * field, because algorithms come from files and other programs; unknown keys
 * are ignored so the contract can grow.  Semantic validity (links, causality,
 * postcondition) is the verifier's job, not the parser's.
 *
 * Inversion and concatenation are in transform.c.
 */
#include "algorithm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this the dense per-chunk loops of the verifier and simulator stop
 * making sense; documents asking for more are refused up front. */
#define ALG_MAX_GLOBAL_CHUNKS ((long)1 << 40)
#define ALG_MAX_RANKS (1 << 24)
#define ALG_MAX_STEPS (1 << 24)

/* ---- construction -------------------------------------------------------------- */

static double global_chunks_estimate(const cs_collective *c, int ranks, int chunks)
{
    double p = ranks, ch = chunks;
    switch (c->kind) {
    case CS_COLL_ALLGATHER: case CS_COLL_GATHER: case CS_COLL_SCATTER:
    case CS_COLL_REDUCESCATTER:
        return p * ch;
    case CS_COLL_ALLTOALL:
        return p * p * ch;
    case CS_COLL_CUSTOM:
        return c->custom_global_chunks;
    default:
        return ch;
    }
}

int algorithm_new(const cs_collective *c, const char *topology_name, int ranks, int chunks,
                  int steps, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    if (!c)
        return cs_error_set(err, CS_EINVAL, "collective", "collective is missing");
    if (ranks < 1 || ranks > ALG_MAX_RANKS)
        return cs_error_set(err, CS_EINVAL, "ranks", "ranks %d out of range [1, %d]", ranks,
                            ALG_MAX_RANKS);
    if (chunks < 1)
        return cs_error_set(err, CS_EINVAL, "chunks", "chunks must be >= 1, got %d", chunks);
    if (steps < 0 || steps > ALG_MAX_STEPS)
        return cs_error_set(err, CS_EINVAL, "steps", "steps %d out of range [0, %d]", steps,
                            ALG_MAX_STEPS);
    if (global_chunks_estimate(c, ranks, chunks) > (double)ALG_MAX_GLOBAL_CHUNKS)
        return cs_error_set(err, CS_ELIMIT, "chunks",
                            "%d chunks on %d ranks give more than %ld global chunks", chunks,
                            ranks, ALG_MAX_GLOBAL_CHUNKS);
    cs_algorithm *a = calloc(1, sizeof *a);
    if (!a)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    int rc = collective_copy(&a->collective, c, err);
    if (rc != CS_OK) {
        free(a);
        return rc;
    }
    rc = collective_validate(&a->collective, ranks, err);
    if (rc != CS_OK) {
        collective_free(&a->collective);
        free(a);
        return rc;
    }
    snprintf(a->topology, sizeof a->topology, "%s", topology_name ? topology_name : "");
    a->ranks = ranks;
    a->chunks = chunks;
    a->global_chunks = collective_global_chunks(&a->collective, ranks, chunks);
    a->steps = steps;
    a->rounds_per_step = malloc(sizeof(int) * (size_t)(steps > 0 ? steps : 1));
    if (!a->rounds_per_step) {
        algorithm_free(a);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    for (int s = 0; s < steps; s++)
        a->rounds_per_step[s] = 1;
    a->rounds = steps;
    *out = a;
    return CS_OK;
}

void algorithm_free(cs_algorithm *a)
{
    if (!a)
        return;
    collective_free(&a->collective);
    free(a->rounds_per_step);
    free(a->sends);
    free(a);
}

static int reserve_sends(cs_algorithm *a, long need)
{
    if (need <= a->cap)
        return CS_OK;
    long cap = a->cap ? a->cap : 64;
    while (cap < need)
        cap += cap / 2 + 16;
    if ((size_t)cap > SIZE_MAX / sizeof(cs_send))
        return CS_ENOMEM;
    cs_send *s = realloc(a->sends, sizeof(cs_send) * (size_t)cap);
    if (!s)
        return CS_ENOMEM;
    a->sends = s;
    a->cap = cap;
    return CS_OK;
}

int algorithm_clone(const cs_algorithm *a, cs_algorithm **out, cs_error *err)
{
    cs_algorithm *b = NULL;
    int rc = algorithm_new(&a->collective, a->topology, a->ranks, a->chunks, a->steps, &b, err);
    if (rc != CS_OK)
        return rc;
    memcpy(b->rounds_per_step, a->rounds_per_step, sizeof(int) * (size_t)a->steps);
    b->rounds = a->rounds;
    b->global_chunks = a->global_chunks;
    memcpy(b->method, a->method, sizeof b->method);
    memcpy(b->optimality, a->optimality, sizeof b->optimality);
    if (reserve_sends(b, a->nsends) != CS_OK) {
        algorithm_free(b);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory copying %ld sends", a->nsends);
    }
    if (a->nsends)
        memcpy(b->sends, a->sends, sizeof(cs_send) * (size_t)a->nsends);
    b->nsends = a->nsends;
    *out = b;
    return CS_OK;
}

int algorithm_add_timed_send(cs_algorithm *a, long chunk, int src, int dst, int step,
                             cs_op op, double start_us, double end_us)
{
    if (a->nsends == a->cap && reserve_sends(a, a->nsends + 1) != CS_OK)
        return CS_ENOMEM;
    cs_send *s = &a->sends[a->nsends++];
    s->chunk = chunk;
    s->src = src;
    s->dst = dst;
    s->step = step;
    s->op = op;
    s->start_us = start_us;
    s->end_us = end_us;
    return CS_OK;
}

int algorithm_add_send(cs_algorithm *a, long chunk, int src, int dst, int step, cs_op op)
{
    return algorithm_add_timed_send(a, chunk, src, dst, step, op, NAN, NAN);
}

int algorithm_set_steps(cs_algorithm *a, int steps, cs_error *err)
{
    if (steps < 0 || steps > ALG_MAX_STEPS)
        return cs_error_set(err, CS_EINVAL, "steps", "steps %d out of range [0, %d]", steps,
                            ALG_MAX_STEPS);
    int *r = realloc(a->rounds_per_step, sizeof(int) * (size_t)(steps > 0 ? steps : 1));
    if (!r)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    for (int s = a->steps; s < steps; s++)
        r[s] = 1;
    a->rounds_per_step = r;
    a->steps = steps;
    algorithm_update_rounds(a);
    return CS_OK;
}

void algorithm_update_rounds(cs_algorithm *a)
{
    long sum = 0;
    for (int s = 0; s < a->steps; s++)
        sum += a->rounds_per_step[s];
    a->rounds = sum > 0x7fffffff ? 0x7fffffff : (int)sum;
}

bool algorithm_is_timed(const cs_algorithm *a)
{
    if (a->nsends == 0)
        return false;
    for (long i = 0; i < a->nsends; i++)
        if (!isfinite(a->sends[i].start_us) || !isfinite(a->sends[i].end_us))
            return false;
    return true;
}

/* ---- bandwidth fitting ------------------------------------------------------------- */

int algorithm_fit_rounds(cs_algorithm *a, const cs_topology *t, cs_error *err)
{
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is not finalized");
    if (a->ranks != t->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "algorithm has %d ranks, topology %d",
                            a->ranks, t->ranks);
    int rc = CS_OK;
    long n = a->nsends;
    int S = a->steps;
    long *step_begin = calloc((size_t)S + 2, sizeof(long));
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int *link_of = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    long *link_count = calloc((size_t)t->nlinks + 1, sizeof(long));
    long *set_count = calloc((size_t)t->nshared + 1, sizeof(long));
    int *set_begin = calloc((size_t)t->nlinks + 2, sizeof(int));
    int *set_list = NULL;
    int *touched = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!step_begin || !order || !link_of || !link_count || !set_count || !set_begin ||
        !touched || n > 0x7fffffff) {
        rc = cs_error_set(err, n > 0x7fffffff ? CS_ELIMIT : CS_ENOMEM, NULL,
                          "cannot fit rounds for %ld sends", n);
        goto done;
    }
    /* link -> shared sets containing it */
    long nmember = 0;
    for (int k = 0; k < t->nshared; k++) {
        nmember += t->shared[k].nlinks;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            set_begin[t->shared[k].links[j] + 1]++;
    }
    for (int l = 0; l < t->nlinks; l++)
        set_begin[l + 1] += set_begin[l];
    set_list = malloc(sizeof(int) * (size_t)(nmember > 0 ? nmember : 1));
    int *fill = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    if (!set_list || !fill) {
        free(fill);
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    memcpy(fill, set_begin, sizeof(int) * (size_t)(t->nlinks + 1));
    for (int k = 0; k < t->nshared; k++)
        for (int j = 0; j < t->shared[k].nlinks; j++)
            set_list[fill[t->shared[k].links[j]]++] = k;
    free(fill);

    for (long i = 0; i < n; i++) {
        const cs_send *s = &a->sends[i];
        if (s->step < 0 || s->step >= S) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld: step %d out of range [0, %d)",
                              i, s->step, S);
            goto done;
        }
        if (s->src < 0 || s->src >= t->ranks || s->dst < 0 || s->dst >= t->ranks ||
            (link_of[i] = topology_find_link(t, s->src, s->dst)) < 0) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld (chunk %ld, %d->%d, step %d): "
                              "no link %d->%d", i, s->chunk, s->src, s->dst, s->step, s->src,
                              s->dst);
            goto done;
        }
        step_begin[s->step + 1]++;
    }
    for (int s = 0; s < S; s++)
        step_begin[s + 1] += step_begin[s];
    {
        long *pos = malloc(sizeof(long) * (size_t)(S + 1));
        if (!pos) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        memcpy(pos, step_begin, sizeof(long) * (size_t)(S + 1));
        for (long i = 0; i < n; i++)
            order[pos[a->sends[i].step]++] = (int)i;
        free(pos);
    }
    for (int s = 0; s < S; s++) {
        long need = 1;
        long ntouched = 0;
        for (long k = step_begin[s]; k < step_begin[s + 1]; k++) {
            int l = link_of[order[k]];
            if (link_count[l]++ == 0)
                touched[ntouched++] = l;
            for (int m = set_begin[l]; m < set_begin[l + 1]; m++)
                set_count[set_list[m]]++;
        }
        for (long k = 0; k < ntouched; k++) {
            int l = touched[k];
            long lanes = t->links[l].lanes;
            long r = (link_count[l] + lanes - 1) / lanes;
            if (r > need)
                need = r;
            for (int m = set_begin[l]; m < set_begin[l + 1]; m++) {
                int set = set_list[m];
                if (set_count[set] == 0)
                    continue;
                long sl = t->shared[set].lanes;
                r = (set_count[set] + sl - 1) / sl;
                if (r > need)
                    need = r;
                set_count[set] = 0;
            }
            link_count[l] = 0;
        }
        if (need > 0x7fffffff / (S > 0 ? S : 1)) {
            rc = cs_error_set(err, CS_ELIMIT, "rounds_per_step", "step %d needs %ld rounds", s,
                              need);
            goto done;
        }
        a->rounds_per_step[s] = (int)need;
    }
    algorithm_update_rounds(a);
done:
    free(step_begin);
    free(order);
    free(link_of);
    free(link_count);
    free(set_count);
    free(set_begin);
    free(set_list);
    free(touched);
    return rc;
}

/* ---- sorting --------------------------------------------------------------------- */

static int compare_sends(const void *pa, const void *pb)
{
    const cs_send *a = pa, *b = pb;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    /* timed sends: earlier start first; NaN (untimed) compares equal */
    if (a->start_us < b->start_us)
        return -1;
    if (a->start_us > b->start_us)
        return 1;
    return 0;
}

void algorithm_sort_sends(cs_algorithm *a)
{
    if (a->nsends > 1)
        qsort(a->sends, (size_t)a->nsends, sizeof(cs_send), compare_sends);
}

/* ---- JSON ------------------------------------------------------------------------ */

/* Reads an integer member.  required: absent is an error; else *out keeps its
 * default. */
static int json_get_long(const json_t *obj, const char *key, const char *path, bool required,
                         long lo, long hi, long *out, cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return cs_error_set(err, CS_EINVAL, path, "%s is required", path);
        return CS_OK;
    }
    if (!json_is_integer(v))
        return cs_error_set(err, CS_EINVAL, path, "%s must be an integer", path);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return cs_error_set(err, CS_EINVAL, path, "%s: %lld out of range [%ld, %ld]", path,
                            (long long)x, lo, hi);
    *out = (long)x;
    return CS_OK;
}

static int json_get_string(const json_t *obj, const char *key, const char *path, char *buf,
                           size_t size, cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return CS_OK;
    if (!json_is_string(v))
        return cs_error_set(err, CS_EINVAL, path, "%s must be a string", path);
    if (json_string_length(v) >= size)
        return cs_error_set(err, CS_EINVAL, path, "%s is longer than %zu characters", path,
                            size - 1);
    snprintf(buf, size, "%s", json_string_value(v));
    return CS_OK;
}

static int json_get_time(const json_t *obj, const char *key, const char *path, double *out,
                         cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = NAN;
        return CS_OK;
    }
    if (!json_is_number(v))
        return cs_error_set(err, CS_EINVAL, path, "%s must be a number", path);
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0)
        return cs_error_set(err, CS_EINVAL, path, "%s must be a finite number >= 0", path);
    *out = x;
    return CS_OK;
}

/* Integer member of a send; formats the field path only on error (parsing
 * millions of sends must not pay for a snprintf per field). */
static int send_int(const json_t *js, long i, const char *key, long lo, long hi,
                    const char *range_what, long *out, cs_error *err)
{
    json_t *v = json_object_get(js, key);
    char path[CS_ERROR_FIELD_MAX];
    if (v && json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x >= lo && x <= hi) {
            *out = (long)x;
            return CS_OK;
        }
        snprintf(path, sizeof path, "sends[%ld].%s", i, key);
        if (range_what)
            return cs_error_set(err, CS_EINVAL, path, "%s: %s %lld out of range for %ld %s", path,
                                key, (long long)x, hi + 1, range_what);
        return cs_error_set(err, CS_EINVAL, path, "%s: %lld out of range [%ld, %ld]", path,
                            (long long)x, lo, hi);
    }
    snprintf(path, sizeof path, "sends[%ld].%s", i, key);
    if (!v)
        return cs_error_set(err, CS_EINVAL, path, "%s is required", path);
    return cs_error_set(err, CS_EINVAL, path, "%s must be an integer", path);
}

static int parse_send(const json_t *js, long i, cs_algorithm *a, cs_error *err)
{
    char path[CS_ERROR_FIELD_MAX];
    if (!json_is_object(js)) {
        snprintf(path, sizeof path, "sends[%ld]", i);
        return cs_error_set(err, CS_EINVAL, path, "%s must be an object", path);
    }
    long chunk = -1, src = -1, dst = -1, step = -1;
    int rc;
    if ((rc = send_int(js, i, "chunk", 0, a->global_chunks - 1, "global chunks", &chunk, err)) ||
        (rc = send_int(js, i, "src", 0, a->ranks - 1, NULL, &src, err)) ||
        (rc = send_int(js, i, "dst", 0, a->ranks - 1, NULL, &dst, err)) ||
        (rc = send_int(js, i, "step", 0, (long)a->steps - 1, "steps", &step, err))) {
        /* ranks get the wording of the contract's example */
        if (err && (strstr(err->field, ".src") || strstr(err->field, ".dst")) &&
            strstr(err->message, "out of range")) {
            json_int_t r = json_integer_value(json_object_get(js, strstr(err->field, ".src")
                                                                  ? "src" : "dst"));
            snprintf(path, sizeof path, "%s", err->field);
            cs_error_set(err, CS_EINVAL, path, "%s: rank %lld out of range for %d ranks", path,
                         (long long)r, a->ranks);
        }
        return rc;
    }
    if (src == dst) {
        snprintf(path, sizeof path, "sends[%ld].dst", i);
        return cs_error_set(err, CS_EINVAL, path, "%s: rank %ld sends to itself", path, dst);
    }
    cs_op op = CS_OP_COPY;
    json_t *jop = json_object_get(js, "op");
    if (jop) {
        const char *name = json_string_value(jop);
        if (name && strcmp(name, "copy") == 0) {
            op = CS_OP_COPY;
        } else if (name && strcmp(name, "reduce") == 0) {
            op = CS_OP_REDUCE;
        } else {
            snprintf(path, sizeof path, "sends[%ld].op", i);
            if (!name)
                return cs_error_set(err, CS_EINVAL, path, "%s must be a string", path);
            return cs_error_set(err, CS_EINVAL, path, "%s: \"%s\" is not an op (copy or reduce)",
                                path, name);
        }
    }
    double start = NAN, end = NAN;
    json_t *js_start = json_object_get(js, "start_us"), *js_end = json_object_get(js, "end_us");
    if (js_start || js_end) {
        snprintf(path, sizeof path, "sends[%ld].start_us", i);
        if ((rc = json_get_time(js, "start_us", path, &start, err)) != CS_OK)
            return rc;
        snprintf(path, sizeof path, "sends[%ld].end_us", i);
        if ((rc = json_get_time(js, "end_us", path, &end, err)) != CS_OK)
            return rc;
        if (isnan(start) != isnan(end))
            return cs_error_set(err, CS_EINVAL, path,
                                "sends[%ld]: start_us and end_us must be given together", i);
        if (!isnan(start) && end < start)
            return cs_error_set(err, CS_EINVAL, path, "%s: %g is before start_us %g", path, end,
                                start);
    }
    if (algorithm_add_timed_send(a, chunk, (int)src, (int)dst, (int)step, op, start, end) !=
        CS_OK)
        return cs_error_set(err, CS_ENOMEM, "sends", "out of memory at send %ld", i);
    return CS_OK;
}

/* Prepends `prefix` to err->field ("frontier[2]" + "sends[1].dst"). */
static void prefix_field(cs_error *err, const char *prefix)
{
    if (!err)
        return;
    char f[2 * CS_ERROR_FIELD_MAX + 8];
    size_t lp = strlen(prefix), lf = strlen(err->field);
    memcpy(f, prefix, lp);
    size_t n = lp;
    if (lf) {
        f[n++] = '.';
        memcpy(f + n, err->field, lf);
        n += lf;
    }
    if (n >= CS_ERROR_FIELD_MAX)
        n = CS_ERROR_FIELD_MAX - 1;
    memcpy(err->field, f, n);
    err->field[n] = '\0';
}

int algorithm_from_json(const json_t *doc, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "an algorithm must be a JSON object");
    json_t *jc = json_object_get(doc, "collective");
    if (!jc)
        return cs_error_set(err, CS_EINVAL, "collective", "collective is required");
    cs_collective coll;
    memset(&coll, 0, sizeof coll);
    int rc = collective_from_json(jc, &coll, err);
    if (rc != CS_OK) {
        if (err && strncmp(err->field, "collective", 10) != 0)
            prefix_field(err, "collective");
        return rc;
    }
    long ranks = 0, chunks = 0, steps = 0;
    if ((rc = json_get_long(doc, "ranks", "ranks", true, 1, ALG_MAX_RANKS, &ranks, err)) ||
        (rc = json_get_long(doc, "chunks", "chunks", true, 1, 0x7fffffff, &chunks, err)) ||
        (rc = json_get_long(doc, "steps", "steps", true, 0, ALG_MAX_STEPS, &steps, err))) {
        collective_free(&coll);
        return rc;
    }
    char topo[CS_NAME_MAX] = "";
    if ((rc = json_get_string(doc, "topology", "topology", topo, sizeof topo, err)) != CS_OK) {
        collective_free(&coll);
        return rc;
    }
    cs_algorithm *a = NULL;
    rc = algorithm_new(&coll, topo, (int)ranks, (int)chunks, (int)steps, &a, err);
    collective_free(&coll);
    if (rc != CS_OK) {
        if (err && err->field[0] && strncmp(err->field, "collective", 10) != 0 &&
            strcmp(err->field, "ranks") != 0 && strcmp(err->field, "chunks") != 0 &&
            strcmp(err->field, "steps") != 0)
            prefix_field(err, "collective");
        return rc;
    }
    long g = a->global_chunks;
    if ((rc = json_get_long(doc, "global_chunks", "global_chunks", false, 0, ALG_MAX_GLOBAL_CHUNKS,
                            &g, err)) != CS_OK)
        goto fail;
    if (g != a->global_chunks) {
        rc = cs_error_set(err, CS_EINVAL, "global_chunks",
                          "global_chunks %ld does not match %s with %d ranks and %d chunks "
                          "(expected %ld)", g, collective_kind_name(a->collective.kind),
                          a->ranks, a->chunks, a->global_chunks);
        goto fail;
    }
    json_t *jr = json_object_get(doc, "rounds_per_step");
    if (jr && !json_is_null(jr)) {
        if (!json_is_array(jr)) {
            rc = cs_error_set(err, CS_EINVAL, "rounds_per_step", "rounds_per_step must be an array");
            goto fail;
        }
        if ((long)json_array_size(jr) != steps) {
            rc = cs_error_set(err, CS_EINVAL, "rounds_per_step",
                              "rounds_per_step has %zu entries, steps is %ld",
                              json_array_size(jr), steps);
            goto fail;
        }
        for (long s = 0; s < steps; s++) {
            char path[64];
            snprintf(path, sizeof path, "rounds_per_step[%ld]", s);
            json_t *v = json_array_get(jr, (size_t)s);
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > 0x7fffffff) {
                rc = cs_error_set(err, CS_EINVAL, path, "%s must be an integer >= 1", path);
                goto fail;
            }
            a->rounds_per_step[s] = (int)json_integer_value(v);
        }
    }
    long sum = 0;
    for (long s = 0; s < steps; s++)
        sum += a->rounds_per_step[s];
    if (sum > 0x7fffffff) {
        rc = cs_error_set(err, CS_EINVAL, "rounds_per_step", "rounds_per_step sums to %ld", sum);
        goto fail;
    }
    algorithm_update_rounds(a);
    long rounds = a->rounds;
    if ((rc = json_get_long(doc, "rounds", "rounds", false, 0, 0x7fffffff, &rounds, err)) !=
        CS_OK)
        goto fail;
    if (rounds != a->rounds) {
        rc = cs_error_set(err, CS_EINVAL, "rounds",
                          "rounds %ld is not the sum of rounds_per_step (%d)", rounds, a->rounds);
        goto fail;
    }
    if ((rc = json_get_string(doc, "method", "method", a->method, sizeof a->method, err)) ||
        (rc = json_get_string(doc, "optimality", "optimality", a->optimality,
                              sizeof a->optimality, err)))
        goto fail;
    if (a->optimality[0] && strcmp(a->optimality, "latency") != 0 &&
        strcmp(a->optimality, "bandwidth") != 0 && strcmp(a->optimality, "both") != 0) {
        rc = cs_error_set(err, CS_EINVAL, "optimality",
                          "optimality \"%s\" is not latency, bandwidth, both or \"\"",
                          a->optimality);
        goto fail;
    }
    json_t *js = json_object_get(doc, "sends");
    if (!js) {
        rc = cs_error_set(err, CS_EINVAL, "sends", "sends is required");
        goto fail;
    }
    if (!json_is_array(js)) {
        rc = cs_error_set(err, CS_EINVAL, "sends", "sends must be an array");
        goto fail;
    }
    size_t n = json_array_size(js);
    if (reserve_sends(a, (long)n) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, "sends", "out of memory for %zu sends", n);
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = parse_send(json_array_get(js, i), (long)i, a, err)) != CS_OK)
            goto fail;
    long ntimed = 0;
    for (long i = 0; i < a->nsends; i++)
        ntimed += !isnan(a->sends[i].start_us);
    if (ntimed != 0 && ntimed != a->nsends) {
        rc = cs_error_set(err, CS_EINVAL, "sends",
                          "%ld of %ld sends have start_us/end_us: give them on every send or "
                          "none", ntimed, a->nsends);
        goto fail;
    }
    *out = a;
    return CS_OK;
fail:
    algorithm_free(a);
    return rc;
}

int algorithm_parse(const char *text, size_t len, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return cs_error_set(err, CS_EINVAL, "", "invalid JSON at line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    int rc = algorithm_from_json(doc, out, err);
    json_decref(doc);
    return rc;
}

int algorithm_load_file(const char *path, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = cs_read_file(path, &text, &len, err);
    if (rc != CS_OK)
        return rc;
    rc = algorithm_parse(text, len, out, err);
    free(text);
    return rc;
}

/* json_object_set_new that tolerates a NULL value (allocation failure) by
 * reporting it through *ok. */
static void set_new(json_t *obj, const char *key, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(obj, key, v) != 0)
        *ok = false;
}

json_t *algorithm_to_json(const cs_algorithm *a)
{
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    bool ok = true;
    set_new(doc, "collective", collective_to_json(&a->collective), &ok);
    set_new(doc, "topology", json_string(a->topology), &ok);
    set_new(doc, "ranks", json_integer(a->ranks), &ok);
    set_new(doc, "chunks", json_integer(a->chunks), &ok);
    set_new(doc, "global_chunks", json_integer(a->global_chunks), &ok);
    set_new(doc, "steps", json_integer(a->steps), &ok);
    set_new(doc, "rounds", json_integer(a->rounds), &ok);
    json_t *rps = json_array();
    for (int s = 0; rps && s < a->steps; s++)
        if (json_array_append_new(rps, json_integer(a->rounds_per_step[s])) != 0)
            ok = false;
    set_new(doc, "rounds_per_step", rps, &ok);
    set_new(doc, "method", json_string(a->method), &ok);
    set_new(doc, "optimality", json_string(a->optimality), &ok);
    json_t *sends = json_array();
    for (long i = 0; sends && ok && i < a->nsends; i++) {
        const cs_send *s = &a->sends[i];
        json_t *js = json_object();
        if (!js) {
            ok = false;
            break;
        }
        set_new(js, "chunk", json_integer(s->chunk), &ok);
        set_new(js, "src", json_integer(s->src), &ok);
        set_new(js, "dst", json_integer(s->dst), &ok);
        set_new(js, "step", json_integer(s->step), &ok);
        set_new(js, "op", json_string(s->op == CS_OP_REDUCE ? "reduce" : "copy"), &ok);
        if (isfinite(s->start_us) && isfinite(s->end_us)) {
            set_new(js, "start_us", json_real(s->start_us), &ok);
            set_new(js, "end_us", json_real(s->end_us), &ok);
        }
        if (json_array_append_new(sends, js) != 0)
            ok = false;
    }
    set_new(doc, "sends", sends, &ok);
    if (!ok) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* ---- cost -------------------------------------------------------------------- */

double algorithm_chunk_bytes(const cs_algorithm *a, double bytes)
{
    return a->chunks > 0 ? bytes / a->chunks : 0.0;
}

double algorithm_cost_us(const cs_algorithm *a, const cs_topology *t, double bytes)
{
    double alpha = 0.0, min_gbps = INFINITY;
    for (int l = 0; l < t->nlinks; l++) {
        if (t->links[l].alpha_us > alpha)
            alpha = t->links[l].alpha_us;
        if (t->links[l].gbps < min_gbps)
            min_gbps = t->links[l].gbps;
    }
    double beta = isfinite(min_gbps) && min_gbps > 0 ? 1.0 / (min_gbps * 1e3) : 0.0;
    double per_chunk = a->chunks > 0 ? (double)a->rounds / a->chunks : 0.0;
    return a->steps * alpha + per_chunk * bytes * beta;
}

/* ---- results ----------------------------------------------------------------- */

int result_new(const char *method, cs_result **out, cs_error *err)
{
    cs_result *r = calloc(1, sizeof *r);
    if (!r) {
        *out = NULL;
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    snprintf(r->method, sizeof r->method, "%s", method ? method : "");
    r->bound_rounds_per_chunk = 0.0;
    *out = r;
    return CS_OK;
}

/* Frontier order: ascending steps, then descending rounds per chunk. */
static bool frontier_before(const cs_algorithm *x, const cs_algorithm *y)
{
    if (x->steps != y->steps)
        return x->steps < y->steps;
    double rx = (double)x->rounds / x->chunks, ry = (double)y->rounds / y->chunks;
    return rx > ry;
}

int result_add(cs_result *r, cs_algorithm *a)
{
    if (!a)
        return CS_EINVAL;
    cs_algorithm **algs = realloc(r->algs, sizeof *algs * (size_t)(r->nalgs + 1));
    if (!algs) {
        algorithm_free(a);
        return CS_ENOMEM;
    }
    r->algs = algs;
    int pos = r->nalgs;
    while (pos > 0 && frontier_before(a, algs[pos - 1]))
        pos--;
    memmove(&algs[pos + 1], &algs[pos], sizeof *algs * (size_t)(r->nalgs - pos));
    algs[pos] = a;
    r->nalgs++;
    return CS_OK;
}

void result_free(cs_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nalgs; i++)
        algorithm_free(r->algs[i]);
    free(r->algs);
    json_decref(r->stats);
    free(r);
}

json_t *result_to_json(const cs_result *r)
{
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    bool ok = true;
    set_new(doc, "method", json_string(r->method), &ok);
    set_new(doc, "reason", json_string(r->reason), &ok);
    json_t *fr = json_array();
    for (int i = 0; fr && ok && i < r->nalgs; i++) {
        json_t *ja = algorithm_to_json(r->algs[i]);
        if (!ja || json_array_append_new(fr, ja) != 0)
            ok = false;
    }
    set_new(doc, "frontier", fr, &ok);
    json_t *b = json_object();
    if (b) {
        set_new(b, "steps", json_integer(r->bound_steps), &ok);
        set_new(b, "rounds_per_chunk", isfinite(r->bound_rounds_per_chunk)
                                           ? json_real(r->bound_rounds_per_chunk)
                                           : json_null(), &ok);
    }
    set_new(doc, "bounds", b, &ok);
    set_new(doc, "synth_seconds", json_real(isfinite(r->synth_seconds) ? r->synth_seconds : 0.0),
            &ok);
    set_new(doc, "complete", json_boolean(r->complete), &ok);
    if (r->stats)
        set_new(doc, "stats", json_incref(r->stats), &ok);
    if (!ok) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int result_from_json(const json_t *doc, cs_result **out, cs_error *err)
{
    *out = NULL;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "a result must be a JSON object");
    char method[32] = "";
    int rc = json_get_string(doc, "method", "method", method, sizeof method, err);
    if (rc != CS_OK)
        return rc;
    cs_result *r = NULL;
    if ((rc = result_new(method, &r, err)) != CS_OK)
        return rc;
    if ((rc = json_get_string(doc, "reason", "reason", r->reason, sizeof r->reason, err)))
        goto fail;
    json_t *fr = json_object_get(doc, "frontier");
    if (!json_is_array(fr)) {
        rc = cs_error_set(err, CS_EINVAL, "frontier", "frontier must be an array");
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(fr); i++) {
        cs_algorithm *a = NULL;
        if ((rc = algorithm_from_json(json_array_get(fr, i), &a, err)) != CS_OK) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "frontier[%zu]", i);
            prefix_field(err, prefix);
            goto fail;
        }
        if (result_add(r, a) != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, "frontier", "out of memory");
            goto fail;
        }
    }
    json_t *b = json_object_get(doc, "bounds");
    if (b && !json_is_null(b)) {
        if (!json_is_object(b)) {
            rc = cs_error_set(err, CS_EINVAL, "bounds", "bounds must be an object");
            goto fail;
        }
        long steps = 0;
        if ((rc = json_get_long(b, "steps", "bounds.steps", false, 0, 0x7fffffff, &steps, err)))
            goto fail;
        r->bound_steps = (int)steps;
        json_t *rpc = json_object_get(b, "rounds_per_chunk");
        if (rpc && !json_is_null(rpc)) {
            if (!json_is_number(rpc) || json_number_value(rpc) < 0) {
                rc = cs_error_set(err, CS_EINVAL, "bounds.rounds_per_chunk",
                                  "bounds.rounds_per_chunk must be a number >= 0");
                goto fail;
            }
            r->bound_rounds_per_chunk = json_number_value(rpc);
        } else if (rpc) {
            r->bound_rounds_per_chunk = NAN;
        }
    }
    json_t *ss = json_object_get(doc, "synth_seconds");
    if (ss && !json_is_null(ss)) {
        if (!json_is_number(ss)) {
            rc = cs_error_set(err, CS_EINVAL, "synth_seconds", "synth_seconds must be a number");
            goto fail;
        }
        r->synth_seconds = json_number_value(ss);
    }
    json_t *cp = json_object_get(doc, "complete");
    if (cp && !json_is_null(cp)) {
        if (!json_is_boolean(cp)) {
            rc = cs_error_set(err, CS_EINVAL, "complete", "complete must be a boolean");
            goto fail;
        }
        r->complete = json_is_true(cp);
    }
    json_t *st = json_object_get(doc, "stats");
    if (st && json_is_object(st))
        r->stats = json_deep_copy(st);
    *out = r;
    return CS_OK;
fail:
    result_free(r);
    return rc;
}

const cs_algorithm *result_best_for_size(const cs_result *r, const cs_topology *t,
                                         double bytes)
{
    const cs_algorithm *best = NULL;
    double best_cost = INFINITY;
    for (int i = 0; i < r->nalgs; i++) {
        double c = algorithm_cost_us(r->algs[i], t, bytes);
        if (!best || c < best_cost) {
            best = r->algs[i];
            best_cost = c;
        }
    }
    return best;
}
