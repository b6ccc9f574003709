/*
 * cs_common.h - conventions shared by every collsynth module.
 *
 * Errors: every fallible function returns an int status (CS_OK == 0, or one of
 * the negative CS_E* codes) and, when the caller passes a non-NULL cs_error,
 * fills it with a message a person can read and, where it applies, the name of
 * the input field at fault (the HTTP layer echoes it as "field").  Library code
 * never prints and never exits.
 *
 * Cancellation: a cs_cancel token is shared between a long computation (an SMT
 * search, TACOS trials) and whoever may stop it (the daemon's DELETE route, a
 * signal handler's thread).  Workers poll cs_cancel_requested() at safe points;
 * code that blocks inside a library that has its own interrupt (Z3_interrupt)
 * registers a hook that cs_cancel_request() calls from the cancelling thread.
 *
 * Progress: synthesizers report each unit of work (an SMT instance, a TACOS
 * trial) through a cs_progress_fn.  It may be called from worker threads, so
 * callbacks must be thread-safe and quick.
 *
 * There is no global mutable state anywhere in the library: everything lives in
 * objects the caller owns, so the daemon can run many syntheses in parallel.
 */
#ifndef CS_COMMON_H
#define CS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum {
    CS_OK = 0,
    CS_EINVAL = -1,     /* bad input: names the field and the reason */
    CS_ENOMEM = -2,     /* allocation failed */
    CS_EIO = -3,        /* file or network I/O failed */
    CS_ELIMIT = -4,     /* input exceeds a configured limit (ranks, variables, size) */
    CS_EUNSAT = -5,     /* proven: no algorithm exists for the instance */
    CS_ETIMEOUT = -6,   /* a time limit ran out before an answer */
    CS_ECANCELLED = -7, /* cs_cancel_request() was called */
    CS_EVERIFY = -8,    /* an algorithm failed verification */
    CS_EUNSUPPORTED = -9, /* a combination the method cannot handle */
    CS_EINTERNAL = -10  /* a bug: an invariant did not hold */
};

#define CS_ERROR_FIELD_MAX 96
#define CS_ERROR_MESSAGE_MAX 512

typedef struct cs_error {
    int code;                          /* one of the CS_E* codes */
    char field[CS_ERROR_FIELD_MAX];    /* JSON path of the bad field, "" if none */
    char message[CS_ERROR_MESSAGE_MAX];
} cs_error;

/* Fills err (if non-NULL) and returns code, so callers can write
 * `return cs_error_set(err, CS_EINVAL, "links[3].src", "rank %d out of range", r);` */
int cs_error_set(cs_error *err, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cs_error_clear(cs_error *err);
/* A short stable name for a code ("invalid", "unsat", ...), used in JSON errors. */
const char *cs_status_name(int code);

/* ---- cancellation ---------------------------------------------------------- */

typedef struct cs_cancel cs_cancel;
typedef void (*cs_cancel_hook)(void *arg);

cs_cancel *cs_cancel_new(void);
void cs_cancel_free(cs_cancel *c);
/* Sets the flag and runs every registered hook (from the calling thread). */
void cs_cancel_request(cs_cancel *c);
/* NULL-safe: a NULL token is never cancelled. */
bool cs_cancel_requested(const cs_cancel *c);
/* Registers a hook to run on cancellation; returns a handle >= 0, or a negative
 * CS_E* code.  If the token is already cancelled the hook runs immediately. */
int cs_cancel_register(cs_cancel *c, cs_cancel_hook hook, void *arg);
void cs_cancel_unregister(cs_cancel *c, int handle);

/* ---- progress --------------------------------------------------------------- */

typedef struct cs_progress_event {
    const char *method;   /* "smt", "tacos", ... */
    const char *outcome;  /* "sat", "unsat", "timeout", "trial", "start", ... */
    const char *message;  /* one human-readable line */
    int steps, rounds, chunks; /* the instance, 0 where not applicable */
    double seconds;       /* time spent on this unit of work */
    double elapsed;       /* time since the synthesis started */
    int done, total;      /* units finished / planned (total 0 when unknown) */
    double best;          /* best cost so far (method-specific), NaN if none */
} cs_progress_event;

typedef void (*cs_progress_fn)(void *ctx, const cs_progress_event *ev);

/* ---- small utilities shared by the modules --------------------------------- */

/* Monotonic wall clock in seconds. */
double cs_now(void);
/* The CLOCK_REALTIME instant `seconds` from now, the absolute deadline
 * pthread_cond_timedwait() takes. */
struct timespec cs_deadline_after(double seconds);
/* Number of online CPUs (>= 1). */
int cs_cpu_count(void);
/* Reads a whole file; *out is NUL-terminated, caller frees.  The files read
 * are text inputs (JSON documents, tokens): a leading UTF-8 byte-order mark,
 * which Windows editors write, is dropped (RFC 8259 section 8.1 lets a JSON
 * parser ignore it; jansson does not). */
int cs_read_file(const char *path, char **out, size_t *len, cs_error *err);
/* The length of a UTF-8 byte-order mark at text[0..len): 3 or 0. */
size_t cs_utf8_bom_len(const char *text, size_t len);
/* The name in names[0..n) nearest to `word` (case-insensitive edit distance,
 * a transposition counting one), or NULL when none is close enough to be a
 * plausible typo (at most 2 edits, and fewer than half of the word): what
 * "did you mean ...?" messages suggest. */
const char *cs_nearest_name(const char *word, size_t word_len, const char *const *names,
                            int n);
/* snprintf for human text (reasons, notes) assembled from other bounded
 * text: a long one is cut to its buffer on purpose, without the
 * -Wformat-truncation error a direct snprintf gets at some -O levels. */
void cs_text_printf(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- a growable text buffer ---------------------------------------------------
 * The one every module appends text to (documents assembled in memory, HTTP
 * bodies collected by libcurl, the streaming algorithm loader's skeleton):
 * s is NUL-terminated once anything was added (NULL before: a zeroed
 * cs_buf is empty and ready), len excludes the NUL.  Growth doubles from
 * 4 KiB.  An allocation failure sets `failed` and makes every later append
 * a no-op returning false, so a writer can append freely and check once at
 * the end. */
typedef struct cs_buf {
    char *s;
    size_t len, cap;
    bool failed;
} cs_buf;

/* Room for `extra` more bytes (and the NUL); false (failed set) when not. */
bool cs_buf_reserve(cs_buf *b, size_t extra);
bool cs_buf_append(cs_buf *b, const void *data, size_t n);
bool cs_buf_puts(cs_buf *b, const char *str);
bool cs_buf_printf(cs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One character: inline, for scanners that copy a file a character at a time. */
static inline bool cs_buf_putc(cs_buf *b, char c)
{
    if ((b->failed || b->len + 2 > b->cap) && !cs_buf_reserve(b, 1))
        return false;
    b->s[b->len++] = c;
    b->s[b->len] = '\0';
    return true;
}
/* Empties the text, keeping the memory (and clearing `failed`). */
void cs_buf_reset(cs_buf *b);
/* Hands the text over (malloc'ed, "" when nothing was added; NULL when an
 * allocation failed, the text then freed) and leaves b empty. */
char *cs_buf_take(cs_buf *b, size_t *len);
void cs_buf_free(cs_buf *b);
/* An fwrite-shaped sink (libcurl's CURLOPT_WRITEFUNCTION with the cs_buf as
 * its data): appends size*nmemb bytes; returns that, or 0 when an allocation
 * failed (libcurl then stops the transfer). */
size_t cs_buf_write(char *data, size_t size, size_t nmemb, void *buf);

/* A byte count for people: "64MiB" for exact multiples of 1024, "21.33MiB"
 * otherwise (4 significant digits in the largest unit it reaches). */
void cs_format_size(char *buf, size_t n, double bytes);

#endif
