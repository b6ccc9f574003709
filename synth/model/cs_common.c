/*
 * cs_common.c - error values, cancellation tokens and small OS helpers shared
 * by every module.  See cs_common.h for the conventions.
 */
#include "cs_common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cs_error_set(cs_error *err, int code, const char *field, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

void cs_error_clear(cs_error *err)
{
    if (err) {
        err->code = CS_OK;
        err->field[0] = '\0';
        err->message[0] = '\0';
    }
}

const char *cs_status_name(int code)
{
    switch (code) {
    case CS_OK: return "ok";
    case CS_EINVAL: return "invalid";
    case CS_ENOMEM: return "out_of_memory";
    case CS_EIO: return "io";
    case CS_ELIMIT: return "limit";
    case CS_EUNSAT: return "unsat";
    case CS_ETIMEOUT: return "timeout";
    case CS_ECANCELLED: return "cancelled";
    case CS_EVERIFY: return "verify";
    case CS_EUNSUPPORTED: return "unsupported";
    default: return "internal";
    }
}

/* ---- cancellation ------------------------------------------------------------ */

#define CS_CANCEL_MAX_HOOKS 64

struct cs_cancel {
    atomic_bool requested;
    pthread_mutex_t lock;   /* guards hooks; held while hooks run so unregister waits */
    struct { cs_cancel_hook fn; void *arg; bool used; } hooks[CS_CANCEL_MAX_HOOKS];
};

cs_cancel *cs_cancel_new(void)
{
    cs_cancel *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    atomic_init(&c->requested, false);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void cs_cancel_free(cs_cancel *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void cs_cancel_request(cs_cancel *c)
{
    if (!c)
        return;
    atomic_store(&c->requested, true);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < CS_CANCEL_MAX_HOOKS; i++)
        if (c->hooks[i].used)
            c->hooks[i].fn(c->hooks[i].arg);
    pthread_mutex_unlock(&c->lock);
}

bool cs_cancel_requested(const cs_cancel *c)
{
    return c && atomic_load(&((cs_cancel *)c)->requested);
}

int cs_cancel_register(cs_cancel *c, cs_cancel_hook hook, void *arg)
{
    if (!c || !hook)
        return CS_EINVAL;
    pthread_mutex_lock(&c->lock);
    int slot = -1;
    for (int i = 0; i < CS_CANCEL_MAX_HOOKS; i++)
        if (!c->hooks[i].used) {
            slot = i;
            break;
        }
    if (slot >= 0) {
        c->hooks[slot].fn = hook;
        c->hooks[slot].arg = arg;
        c->hooks[slot].used = true;
        /* A request that came before registration must still reach the hook. */
        if (atomic_load(&c->requested))
            hook(arg);
    }
    pthread_mutex_unlock(&c->lock);
    return slot >= 0 ? slot : CS_ELIMIT;
}

void cs_cancel_unregister(cs_cancel *c, int handle)
{
    if (!c || handle < 0 || handle >= CS_CANCEL_MAX_HOOKS)
        return;
    pthread_mutex_lock(&c->lock);
    c->hooks[handle].used = false;
    pthread_mutex_unlock(&c->lock);
}

/* ---- OS helpers ---------------------------------------------------------------- */

double cs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct timespec cs_deadline_after(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long whole = (long)seconds;
    long ns = ts.tv_nsec + (long)((seconds - (double)whole) * 1e9);
    ts.tv_sec += (time_t)(whole + ns / 1000000000L);
    ts.tv_nsec = ns % 1000000000L;
    return ts;
}

int cs_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)n : 1;
}

size_t cs_utf8_bom_len(const char *text, size_t len)
{
    return len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
                   (unsigned char)text[2] == 0xBF
               ? 3
               : 0;
}

int cs_read_file(const char *path, char **out, size_t *len, cs_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cs_error_set(err, CS_EIO, "", "cannot open %s: %s", path, strerror(errno));
    cs_buf b = {0};
    for (size_t got = 1; got > 0 && cs_buf_reserve(&b, 4096); b.len += got)
        got = fread(b.s + b.len, 1, b.cap - b.len - 1, f);
    int failed = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (b.failed) {
        cs_buf_free(&b);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory reading %s", path);
    }
    if (failed) {
        cs_buf_free(&b);
        return cs_error_set(err, CS_EIO, "", "error reading %s: %s", path, strerror(failed));
    }
    size_t bom = cs_utf8_bom_len(b.s, b.len);
    if (bom) {
        memmove(b.s, b.s + bom, b.len - bom);
        b.len -= bom;
    }
    b.s[b.len] = '\0';
    *out = cs_buf_take(&b, len);
    return CS_OK;
}

/* Optimal string alignment distance (Damerau-Levenshtein without repeated
 * edits of one substring), bounded rows: names are short. */
static int edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    enum { MAXN = 64 };
    if (na >= MAXN || nb >= MAXN)
        return MAXN;
    int d[MAXN + 1][MAXN + 1];
    for (size_t i = 0; i <= na; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

const char *cs_nearest_name(const char *word, size_t word_len, const char *const *names, int n)
{
    const char *best = NULL;
    int best_d = 3; /* at most 2 edits */
    for (int i = 0; word && i < n; i++) {
        if (!names[i])
            continue;
        int d = edit_distance(word, word_len, names[i], strlen(names[i]));
        if (d < best_d && 2 * (size_t)d < (word_len > strlen(names[i]) ? word_len : strlen(names[i]))) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}

void cs_text_printf(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
}

/* ---- cs_buf ---------------------------------------------------------------------- */

bool cs_buf_reserve(cs_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra < SIZE_MAX - b->len - 1 && b->len + extra + 1 <= b->cap)
        return true;
    if (extra >= SIZE_MAX / 2 - b->len) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + extra + 1, cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

bool cs_buf_append(cs_buf *b, const void *data, size_t n)
{
    if (!cs_buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

bool cs_buf_puts(cs_buf *b, const char *str) { return cs_buf_append(b, str, strlen(str)); }

bool cs_buf_printf(cs_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return false;
    va_list ap;
    va_start(ap, fmt);
    /* straight into the free space; once more when it did not fit */
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return false;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
        b->len += (size_t)n;
        return true;
    }
    if (!cs_buf_reserve(b, (size_t)n))
        return false;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

void cs_buf_reset(cs_buf *b)
{
    b->len = 0;
    b->failed = false;
    if (b->s)
        b->s[0] = '\0';
}

char *cs_buf_take(cs_buf *b, size_t *len)
{
    char *s = b->failed ? NULL : b->s ? b->s : calloc(1, 1);
    if (b->failed)
        free(b->s);
    if (len)
        *len = s ? b->len : 0;
    *b = (cs_buf){0};
    return s;
}

void cs_buf_free(cs_buf *b)
{
    free(b->s);
    *b = (cs_buf){0};
}

size_t cs_buf_write(char *data, size_t size, size_t nmemb, void *buf)
{
    size_t n = size * nmemb;
    return cs_buf_append(buf, data, n) ? n : 0;
}

void cs_format_size(char *buf, size_t n, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = bytes;
    int u = 0;
    while (u < 4 && v >= 1024 && fmod(v, 1024) == 0) {
        v /= 1024;
        u++;
    }
    if (v >= 1024) {
        while (u < 4 && v >= 1024) {
            v /= 1024;
            u++;
        }
        snprintf(buf, n, "%.4g%s", v, units[u]);
        return;
    }
    snprintf(buf, n, "%.6g%s", v, units[u]);
}
