/*
 * http_client.c - libcurl under the remote CLI.
 *
 * Kept deliberately small: one easy handle per request (the CLI makes a
 * handful of requests per run, so connection reuse is not worth the state),
 * the body collected into a cs_buf (cs_common.h), the token sent as
 * "Authorization: Bearer ...".  The distinction that matters to callers is
 * between "no answer" (curl error: refused, resolve, timeout), which the CLI
 * reports as exit code 3, and "an answer with an error status", which carries
 * the server's own error object.
 */
#include "http_client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void cs_http_global_init(void) { pthread_once(&global_once, global_init_once); }

/* libcurl without a TLS backend cannot speak https (a minimal build). */
static bool curl_has_tls(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    return v != NULL && (v->features & CURL_VERSION_SSL) != 0;
}

int cs_http_client_init(cs_http_client *c, const char *base, const char *token,
                        double timeout_s, cs_error *err)
{
    static const char form[] = "http://HOST:PORT, or http://HOST/PREFIX for a daemon behind a "
                               "reverse proxy";
    memset(c, 0, sizeof *c);
    if (base == NULL || base[0] == '\0')
        return cs_error_set(err, CS_EINVAL, "server",
                            "no server given (use --server URL or COLLSYNTH_SERVER)");
    size_t n = strlen(base);
    if (n >= sizeof c->base_url)
        return cs_error_set(err, CS_EINVAL, "server", "server URL is too long (%zu bytes)", n);
    for (const char *p = base; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return cs_error_set(err, CS_EINVAL, "server", "server URL '%s' has a blank or a "
                                "control character (write a space in the prefix as %%20)", base);
    /* the scheme, in any case; "host:port" alone means plain http */
    const char *rest = base;
    bool tls = false;
    if (strncasecmp(base, "http://", 7) == 0) {
        rest = base + 7;
    } else if (strncasecmp(base, "https://", 8) == 0) {
        rest = base + 8;
        tls = true;
    } else if (strstr(base, "://") != NULL) {
        return cs_error_set(err, CS_EINVAL, "server",
                            "server URL '%s' must start with http:// or https://", base);
    }
    if (tls && !curl_has_tls())
        return cs_error_set(err, CS_EINVAL, "server",
                            "server URL '%s': this build's libcurl has no TLS, so https:// is not "
                            "supported; reach the daemon through a local TLS proxy (stunnel, "
                            "nginx) listening on http://127.0.0.1:PORT and give that URL", base);
    /* authority, then the path prefix every route goes under (PREFIX/v1/...) */
    size_t alen = strcspn(rest, "/?#");
    if (alen == 0)
        return cs_error_set(err, CS_EINVAL, "server", "server URL '%s' names no host (%s)", base,
                            form);
    if (memchr(rest, '@', alen) != NULL)
        return cs_error_set(err, CS_EINVAL, "server", "server URL '%s' carries credentials, "
                            "which collsynth does not send: give the token with --token-file "
                            "or COLLSYNTH_TOKEN", base);
    const char *prefix = rest + alen;
    if (strpbrk(prefix, "?#") != NULL)
        return cs_error_set(err, CS_EINVAL, "server", "server URL '%s' has a query or a "
                            "fragment; give the daemon's base URL (%s)", base, form);
    size_t plen = strlen(prefix);
    while (plen > 0 && prefix[plen - 1] == '/')
        plen--;
    if (plen >= 3 && strncmp(prefix + plen - 3, "/v1", 3) == 0)
        return cs_error_set(err, CS_EINVAL, "server", "server URL '%s' ends in /v1: give the "
                            "prefix the daemon is served under, without /v1 (the routes are "
                            "PREFIX/v1/...): %.*s%.*s", base, (int)(prefix - base), base,
                            (int)(plen - 3), prefix);
    int w = snprintf(c->base_url, sizeof c->base_url, "%s://%.*s%.*s", tls ? "https" : "http",
                     (int)alen, rest, (int)plen, prefix);
    if (w < 0 || (size_t)w >= sizeof c->base_url)
        return cs_error_set(err, CS_EINVAL, "server", "server URL is too long");
    if (token != NULL) {
        size_t tl = strlen(token);
        while (tl > 0 && (token[tl - 1] == '\n' || token[tl - 1] == '\r' || token[tl - 1] == ' '))
            tl--;
        if (tl >= sizeof c->token)
            return cs_error_set(err, CS_EINVAL, "token", "token is too long (%zu bytes)", tl);
        memcpy(c->token, token, tl);
        c->token[tl] = '\0';
    }
    c->timeout_s = timeout_s;
    return CS_OK;
}

/* 2xx bodies of a download go to a file as they arrive; anything else is
 * collected (it is an error object the caller prints). */
typedef struct sink {
    CURL *h;
    FILE *out;
    cs_buf *b;
    bool to_file, decided, write_failed;
    int write_errno;     /* errno of the failed write, taken at the call (0: none given) */
    size_t written;
    char last;
} sink;

static size_t to_sink(char *ptr, size_t size, size_t nmemb, void *ud)
{
    sink *k = ud;
    if (!k->decided) {
        long status = 0;
        curl_easy_getinfo(k->h, CURLINFO_RESPONSE_CODE, &status);
        k->to_file = status >= 200 && status < 300;
        k->decided = true;
    }
    if (!k->to_file)
        return cs_buf_write(ptr, size, nmemb, k->b);
    size_t n = size * nmemb;
    errno = 0;
    if (fwrite(ptr, 1, n, k->out) != n) {
        k->write_failed = true;
        k->write_errno = errno; /* before curl's own calls overwrite it */
        return 0;
    }
    k->written += n;
    if (n)
        k->last = ptr[n - 1];
    return n;
}

static int perform(const cs_http_client *c, const char *method, const char *path,
                   const char *body, FILE *out, cs_http_response *resp, cs_error *err);

int cs_http_request(const cs_http_client *c, const char *method, const char *path,
                    const char *body, cs_http_response *resp, cs_error *err)
{
    return perform(c, method, path, body, NULL, resp, err);
}

int cs_http_download(const cs_http_client *c, const char *path, FILE *out,
                     cs_http_response *resp, cs_error *err)
{
    return perform(c, "GET", path, NULL, out, resp, err);
}

static int perform(const cs_http_client *c, const char *method, const char *path,
                   const char *body, FILE *out, cs_http_response *resp, cs_error *err)
{
    memset(resp, 0, sizeof *resp);
    cs_http_global_init();
    size_t url_len = strlen(c->base_url) + strlen(path) + 1;
    char *url = malloc(url_len);
    if (url == NULL)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    snprintf(url, url_len, "%s%s", c->base_url, path);

    CURL *h = curl_easy_init();
    if (h == NULL) {
        free(url);
        return cs_error_set(err, CS_ENOMEM, NULL, "curl_easy_init failed");
    }
    cs_buf b = {0};
    struct curl_slist *headers = NULL;
    char auth[600];
    headers = curl_slist_append(headers, "Accept: application/json");
    if (c->token[0] != '\0') {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        headers = curl_slist_append(headers, auth);
    }
    if (body != NULL)
        headers = curl_slist_append(headers, "Content-Type: application/json");

    long timeout_ms = (long)((c->timeout_s > 0 ? c->timeout_s : 60.0) * 1000.0);
    long connect_ms = (long)((c->connect_timeout_s > 0 ? c->connect_timeout_s : 5.0) * 1000.0);
    if (connect_ms > timeout_ms)
        connect_ms = timeout_ms;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    sink k = {.h = h, .out = out, .b = &b};
    if (out != NULL) {
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
    } else {
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cs_buf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    }
    /* every coding this libcurl decodes (gzip, zstd): results compress 10x */
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "collsynth-cli");
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode cc = curl_easy_perform(h);
    int rc = CS_OK;
    if (b.failed) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory reading the answer");
    } else if (k.write_failed) {
        /* a 2xx answer (only those go to the file): the failure is the
         * caller's output, not the server's */
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
        rc = cs_error_set(err, CS_EIO, "output", "cannot write the answer: %s",
                          k.write_errno ? strerror(k.write_errno) : "the write failed");
    } else if (cc != CURLE_OK) {
        resp->unreachable = true;
        rc = cs_error_set(err, CS_EIO, "server", "cannot reach %s: %s", c->base_url,
                          curl_easy_strerror(cc));
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
        char *ct = NULL;
        if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != NULL)
            snprintf(resp->content_type, sizeof resp->content_type, "%s", ct);
        resp->body = cs_buf_take(&b, &resp->len);
        if (resp->body == NULL)
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        resp->downloaded = k.written;
        resp->ends_in_newline = k.last == '\n';
    }
    cs_buf_free(&b);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    free(url);
    return rc;
}

void cs_http_response_free(cs_http_response *resp)
{
    if (resp == NULL)
        return;
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    if (n == 0)
        return;
    snprintf(dst, n, "%s", src != NULL ? src : "");
}

bool cs_http_error_from_body(const cs_http_response *resp, char *code, size_t code_len,
                             char *message, size_t message_len, char *field,
                             size_t field_len)
{
    copy_str(code, code_len, "");
    copy_str(message, message_len, "");
    copy_str(field, field_len, "");
    if (resp->body == NULL)
        return false;
    json_t *doc = json_loadb(resp->body, resp->len, 0, NULL);
    json_t *e = doc != NULL ? json_object_get(doc, "error") : NULL;
    bool ok = json_is_object(e);
    if (ok) {
        copy_str(code, code_len, json_string_value(json_object_get(e, "code")));
        copy_str(message, message_len, json_string_value(json_object_get(e, "message")));
        copy_str(field, field_len, json_string_value(json_object_get(e, "field")));
    } else if (json_is_string(e)) {
        copy_str(message, message_len, json_string_value(e));
        ok = true;
    }
    json_decref(doc);
    return ok;
}

char *cs_http_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    if (out == NULL)
        return NULL;
    char *p = out;
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        unsigned char ch = *q;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~' || ch == ':') {
            *p++ = (char)ch;
        } else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    *p = '\0';
    return out;
}
