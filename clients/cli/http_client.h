/*
 * http_client.h - the small HTTP/JSON client the remote CLI uses to talk to
 * collsynthd (CONTRACT.md section 4), on top of libcurl.
 *
 * One cs_http_client holds the daemon's base URL, the bearer token and a
 * timeout; cs_http_request() performs one request and returns the status and
 * body.  Transport failures (refused, DNS, timeout) are CS_EIO with
 * `unreachable` set, so the caller can tell "server down" (exit code 3) from
 * "server said no" (an HTTP status >= 400 carrying an error object).
 *
 * cs_http_error_from_body() turns the contract's
 * {"error": {"code", "message", "field"}} into a cs_error-like triple for
 * printing; bodies that are not that form fall back to the status line.
 *
 * Not thread-safe per client object (one request at a time); create one per
 * thread.  curl_global_init is the caller's business (the CLI calls
 * cs_http_global_init() once in its command).
 */
#ifndef CS_HTTP_CLIENT_H
#define CS_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cs_common.h"

typedef struct cs_http_client {
    char base_url[512];   /* "http://127.0.0.1:8080" or "http://gw/prefix", no trailing slash */
    char token[512];      /* bearer token, "" for none */
    double timeout_s;     /* whole-request limit; 0 = 60 s */
    double connect_timeout_s; /* 0 = 5 s */
} cs_http_client;

typedef struct cs_http_response {
    long status;          /* HTTP status, 0 when no answer */
    char *body;           /* NUL-terminated, owned, may be "" */
    size_t len;
    char content_type[128];
    bool unreachable;     /* connection or timeout failure: no answer at all */
    size_t downloaded;    /* cs_http_download: bytes written to the file */
    bool ends_in_newline; /* ... and whether the last was '\n' */
} cs_http_response;

/* curl_global_init once per process (safe to call more than once). */
void cs_http_global_init(void);

/* Fills c from base and token (may be NULL).  base is http://HOST[:PORT],
 * https://... (when libcurl has TLS; refused, naming the reason and a local
 * TLS proxy as the way round, when not), or HOST:PORT (plain http), with an
 * optional path prefix for a daemon behind a reverse proxy
 * (http://gw/collsynth: every route is then /collsynth/v1/...; trailing
 * slashes dropped).  Refused with a message naming the problem: another
 * scheme, no host, credentials in the URL (the token goes in --token-file),
 * a query or fragment, a prefix ending in /v1 (the routes add it), blanks. */
int cs_http_client_init(cs_http_client *c, const char *base, const char *token,
                        double timeout_s, cs_error *err);

/* method "GET", "POST", "DELETE"; path starts with '/', may carry a query;
 * body (JSON) may be NULL.  CS_OK whenever an HTTP answer arrived, whatever its
 * status; CS_EIO with resp->unreachable when none did. */
int cs_http_request(const cs_http_client *c, const char *method, const char *path,
                    const char *body, cs_http_response *resp, cs_error *err);
void cs_http_response_free(cs_http_response *resp);

/* GET path into out as it arrives, when the status is 2xx (resp->body is then
 * ""); other answers are collected in resp->body as cs_http_request does.  For
 * documents too large to hold in memory. */
int cs_http_download(const cs_http_client *c, const char *path, FILE *out,
                     cs_http_response *resp, cs_error *err);

/* From an error answer: code, message and field (each "" when absent).  Returns
 * true when the body was the contract's error object. */
bool cs_http_error_from_body(const cs_http_response *resp, char *code, size_t code_len,
                             char *message, size_t message_len, char *field,
                             size_t field_len);

/* Percent-encodes s for use in a URL path segment or query value. */
char *cs_http_escape(const char *s);

#endif
