/*
 * guard.c - who may talk to collsynthd from a browser: the checks made when
 * a request's headers are complete, before its body is read.
 *
 * A daemon on loopback without a token trusts whatever reaches it, and a web
 * page the user opens can reach it: a form, or a fetch() with a text/plain
 * body, is a "simple" cross-site request that needs no CORS preflight, and
 * DNS rebinding makes evil.example resolve to 127.0.0.1 so the page even
 * reads the answers as same-origin.  Three rules close that:
 *   - Host: on a loopback bind only loopback names (localhost, *.localhost,
 *     127.0.0.0/8, ::1) and --allowed-hosts are answered; a rebound name
 *     carries its own name in Host.  --allowed-hosts also applies on other
 *     binds when given (a reverse proxy's name).
 *   - Origin: a request that changes state (POST, PUT, PATCH, DELETE) with an
 *     Origin header must come from the daemon's own origin (the dashboard it
 *     serves) or one listed in --cors-origins.  Clients that are not
 *     browsers send no Origin and are unaffected.
 *   - Content-Type: a POST body must be declared application/json, which no
 *     cross-site form can send without a preflight.
 * A refusal is recorded in the request state; server.c drains the body and
 * answers it then, so the client reads the error instead of a reset.
 */
#include "server_internal.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void trim(char **tok)
{
    while (**tok == ' ' || **tok == '\t')
        (*tok)++;
    size_t n = strlen(*tok);
    while (n > 0 && ((*tok)[n - 1] == ' ' || (*tok)[n - 1] == '\t'))
        (*tok)[--n] = '\0';
}

/* Splits a comma-separated list into strdup'ed entries; "*" sets *star. */
static int parse_list(const char *csv, char **out, int max, bool *star)
{
    char *buf = strdup(csv ? csv : "");
    int n = 0;
    char *save = NULL;
    for (char *tok = buf ? strtok_r(buf, ",", &save) : NULL; tok;
         tok = strtok_r(NULL, ",", &save)) {
        trim(&tok);
        if (!*tok)
            continue;
        if (star && !strcmp(tok, "*"))
            *star = true;
        else if (n < max)
            out[n++] = strdup(tok);
    }
    free(buf);
    return n;
}

static bool is_loopback_address(const char *a)
{
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, a, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, a, &v6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&v6);
    return false;
}

void guard_init(cs_server *s)
{
    s->ncors = parse_list(s->cfg.cors_origins, s->cors, MAX_CORS_ORIGINS, &s->cors_any);
    s->nhosts = parse_list(s->cfg.allowed_hosts, s->hosts, MAX_ALLOWED_HOSTS, NULL);
    s->loopback_bind = is_loopback_address(s->cfg.listen);
}

void guard_free(cs_server *s)
{
    for (int i = 0; i < s->ncors; i++)
        free(s->cors[i]);
    for (int i = 0; i < s->nhosts; i++)
        free(s->hosts[i]);
    s->ncors = s->nhosts = 0;
}

bool guard_cors_listed(const cs_server *s, const char *origin)
{
    if (s->cors_any)
        return true;
    for (int i = 0; i < s->ncors; i++)
        if (!strcmp(s->cors[i], origin))
            return true;
    return false;
}

/* The host part of a Host header value: "[::1]:80" -> "::1", "a.b:80" -> "a.b". */
static void host_name(const char *host, char *out, size_t n)
{
    const char *start = host, *end;
    if (*host == '[') {
        start = host + 1;
        end = strchr(start, ']');
        if (!end)
            end = start + strlen(start);
    } else {
        end = strrchr(host, ':');
        if (!end || strchr(host, ':') != end)
            end = host + strlen(host); /* no port, or a bare IPv6 literal */
    }
    size_t len = (size_t)(end - start);
    if (len >= n)
        len = n - 1;
    memcpy(out, start, len);
    out[len] = '\0';
    if (len > 0 && out[len - 1] == '.')
        out[len - 1] = '\0'; /* "localhost." names the same host */
}

static bool host_allowed(const cs_server *s, const char *host)
{
    if (!host)
        return true; /* HTTP/1.0 without Host: not a browser */
    char name[256];
    host_name(host, name, sizeof name);
    for (int i = 0; i < s->nhosts; i++)
        if (!strcasecmp(s->hosts[i], name))
            return true;
    if (!s->loopback_bind)
        return s->nhosts == 0;
    if (!strcasecmp(name, "localhost") || is_loopback_address(name))
        return true;
    size_t n = strlen(name);
    return n > 10 && !strcasecmp(name + n - 10, ".localhost");
}

/* Same origin: the Origin's authority is the Host the request was sent to
 * (the default port of the Origin's scheme may be left out on either side). */
static bool same_origin(const char *origin, const char *host)
{
    if (!host)
        return false;
    const char *auth = strstr(origin, "://");
    if (!auth)
        return false;
    bool https = !strncasecmp(origin, "https://", 8);
    if (!https && strncasecmp(origin, "http://", 7))
        return false;
    auth += 3;
    if (!strcasecmp(auth, host))
        return true;
    const char *dflt = https ? ":443" : ":80";
    size_t al = strlen(auth), hl = strlen(host), dl = strlen(dflt);
    if (al == hl + dl && !strncasecmp(auth, host, hl) && !strcasecmp(auth + hl, dflt))
        return true;
    return hl == al + dl && !strncasecmp(host, auth, al) && !strcasecmp(host + al, dflt);
}

static bool changes_state(const char *method)
{
    return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH") ||
           !strcmp(method, "DELETE");
}

/* application/json, any case, with parameters (charset) allowed. */
static bool is_json_type(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ')
        ct++;
    if (strncasecmp(ct, "application/json", 16))
        return false;
    char c = ct[16];
    return c == '\0' || c == ';' || c == ' ' || c == '\t';
}

void guard_refuse(req_state *rs, int status, const char *code, const char *field,
                  const char *fmt, ...)
{
    if (rs->refusal_status)
        return; /* the first reason stands */
    rs->refusal_status = status;
    snprintf(rs->refusal_code, sizeof rs->refusal_code, "%s", code);
    snprintf(rs->refusal_field, sizeof rs->refusal_field, "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rs->refusal_message, sizeof rs->refusal_message, fmt, ap);
    va_end(ap);
}

void guard_request(req_state *rs)
{
    cs_server *s = rs->srv;
    const char *host = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Host");
    if (!host_allowed(s, host)) {
        guard_refuse(rs, 403, "forbidden_host", "Host",
                     "this daemon does not answer to Host \"%.100s\" (on a loopback address "
                     "it answers to loopback names; add others with --allowed-hosts)",
                     host);
        return;
    }
    if (changes_state(rs->method)) {
        const char *origin = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Origin");
        if (origin && !same_origin(origin, host) && !guard_cors_listed(s, origin)) {
            guard_refuse(rs, 403, "forbidden_origin", "Origin",
                         "requests from the web origin \"%.100s\" may not change anything "
                         "here (list it in --cors-origins to allow it)",
                         origin);
            return;
        }
    }
    /* Only the route that reads a body needs it as JSON; a POST elsewhere
     * (curl -XPOST /v1/health) is answered 405 with the methods allowed,
     * not 415 about a body that would never be read. */
    if (!strcmp(rs->method, "POST") && rs->url && !strcmp(rs->url, "/v1/synthesize")) {
        const char *ct = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Content-Type");
        if (!is_json_type(ct))
            guard_refuse(rs, 415, "unsupported_media_type", "Content-Type",
                         "send the body with Content-Type: application/json (got %.80s)",
                         ct ? ct : "none");
    }
}
