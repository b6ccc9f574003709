/*
 * server_harness.c - test helpers: the real daemon as a child process, HTTP
 * through libcurl, a throwaway PostgreSQL (see server_harness.h).
 */
#include "server_harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cs_common.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int make_temp_dir(const char *prefix, char *out, size_t n)
{
    snprintf(out, n, "/tmp/%s-XXXXXX", prefix);
    return mkdtemp(out) ? 0 : -1;
}

void remove_tree(const char *dir)
{
    if (!dir || !dir[0] || strncmp(dir, "/tmp/", 5) != 0)
        return; /* never anything outside /tmp */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    (void)rc;
}

int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

void daemon_binary(char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            slash = strrchr(exe, '/');
            if (slash) {
                *slash = '\0';
                snprintf(out, n, "%.*s/collsynthd", (int)(n - 16), exe);
                if (access(out, X_OK) == 0)
                    return;
            }
        }
    }
    const char *b = getenv("BUILD");
    snprintf(out, n, "%s/collsynthd", b && *b ? b : "build");
}

/* ---- HTTP ---------------------------------------------------------------------- */

static size_t on_header(char *data, size_t sz, size_t nm, void *arg)
{
    http_resp *r = arg;
    size_t add = sz * nm, used = strlen(r->headers);
    if (used + add + 1 < sizeof r->headers) {
        memcpy(r->headers + used, data, add);
        r->headers[used + add] = '\0';
    }
    return add;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int http_request_url(const char *url, const char *method, const char *body,
                     const char *const *headers, http_resp *out)
{
    pthread_once(&curl_once, curl_init_once);
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    cs_buf g = {0};
    struct curl_slist *hl = NULL;
    bool own_type = false; /* the caller's Content-Type (or "Content-Type:" for none) wins */
    for (int i = 0; headers && headers[i]; i++)
        own_type |= strncasecmp(headers[i], "Content-Type:", 13) == 0;
    if (body && !own_type)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    for (int i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, cs_buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    out->body = cs_buf_take(&g, &out->len);
    return rc == CURLE_OK && out->body ? 0 : -1;
}

int http_request(const cs_daemon *d, const char *method, const char *path, const char *body,
                 const char *const *headers, http_resp *out)
{
    char url[1200];
    snprintf(url, sizeof url, "%s%s", d->base_url, path);
    return http_request_url(url, method, body, headers, out);
}

void http_resp_free(http_resp *r)
{
    free(r->body);
    r->body = NULL;
}

const char *http_header(const http_resp *r, const char *name, char *buf, size_t n)
{
    size_t nl = strlen(name);
    const char *p = r->headers;
    while (*p) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            eol = p + strlen(p);
        if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, n, "%.*s", (int)(eol - v), v);
            return buf;
        }
        p = *eol ? eol + 2 : eol;
    }
    return NULL;
}

double metrics_value_in(const char *exposition, const char *series)
{
    size_t sl = strlen(series);
    for (const char *p = exposition; p && *p;) {
        if (!strncmp(p, series, sl) && p[sl] == ' ')
            return strtod(p + sl + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

double metrics_value(const cs_daemon *d, const char *series)
{
    const char *one[] = {series};
    return metrics_sum(d, one, 1);
}

double metrics_sum(const cs_daemon *d, const char *const *series, size_t n)
{
    http_resp r;
    if (http_request(d, "GET", "/metrics", NULL, NULL, &r) != 0 || r.status != 200) {
        http_resp_free(&r);
        return -1;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = metrics_value_in(r.body, series[i]);
        if (v < 0) {
            sum = -1;
            break;
        }
        sum += v;
    }
    http_resp_free(&r);
    return sum;
}

/* ---- daemon ---------------------------------------------------------------------- */

bool daemon_alive(const cs_daemon *d)
{
    if (d->pid <= 0)
        return false;
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG);
    return r == 0;
}

int daemon_start(cs_daemon *d, const char *store, const char *data_dir,
                 const char *const *extra)
{
    memset(d, 0, sizeof *d);
    if (data_dir) {
        snprintf(d->dir, sizeof d->dir, "%s", data_dir);
    } else {
        if (make_temp_dir("collsynthd-test", d->dir, sizeof d->dir) != 0)
            return -1;
        d->own_dir = true;
    }
    snprintf(d->log_path, sizeof d->log_path, "%s/daemon.log", d->dir);
    char bin[PATH_MAX];
    daemon_binary(bin, sizeof bin);
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    const char *argv[64];
    int ac = 0;
    argv[ac++] = bin;
    argv[ac++] = "--listen";
    argv[ac++] = "127.0.0.1";
    argv[ac++] = "--port";
    argv[ac++] = "0";
    argv[ac++] = "--data-dir";
    argv[ac++] = d->dir;
    /* a dashboard stand-in, outside what the store writes */
    char static_dir[300], index_path[340];
    snprintf(static_dir, sizeof static_dir, "%s/static", d->dir);
    mkdir(static_dir, 0755);
    snprintf(index_path, sizeof index_path, "%s/index.html", static_dir);
    FILE *ix = fopen(index_path, "w");
    if (ix) {
        fputs("<html><body>collsynth test dashboard</body></html>\n", ix);
        fclose(ix);
    }
    argv[ac++] = "--static-dir";
    argv[ac++] = static_dir;
    if (store) {
        argv[ac++] = "--store";
        argv[ac++] = store;
    }
    for (int i = 0; extra && extra[i] && ac < 62; i++)
        argv[ac++] = extra[i];
    argv[ac] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        int lfd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (lfd >= 0) {
            dup2(lfd, 2);
            close(lfd);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    d->pid = pid;
    /* The first stdout line names the address: "... listening on http://HOST:PORT ..." */
    FILE *f = fdopen(pfd[0], "r");
    char line[512] = "";
    bool got = f && fgets(line, sizeof line, f) != NULL;
    if (f)
        fclose(f); /* the daemon prints nothing else on stdout */
    const char *p = got ? strstr(line, "listening on http://") : NULL;
    if (!p) {
        fprintf(stderr, "harness: daemon did not start (log %s)\n", d->log_path);
        daemon_stop_ex(d, 2, true);
        return -1;
    }
    const char *colon = strrchr(p + 20, ':');
    d->port = colon ? atoi(colon + 1) : 0;
    snprintf(d->base_url, sizeof d->base_url, "http://127.0.0.1:%d", d->port);
    double until = now_s() + 15;
    while (now_s() < until) {
        http_resp r;
        if (http_request(d, "GET", "/v1/health", NULL, NULL, &r) == 0 && r.status == 200) {
            http_resp_free(&r);
            return 0;
        }
        http_resp_free(&r);
        usleep(20000);
    }
    daemon_stop_ex(d, 2, true);
    return -1;
}

int daemon_stop_ex(cs_daemon *d, double timeout_s, bool keep_dir)
{
    int status = -1;
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        double until = now_s() + timeout_s;
        int st;
        pid_t r = 0;
        while ((r = waitpid(d->pid, &st, WNOHANG)) == 0 && now_s() < until)
            usleep(10000);
        if (r == d->pid) {
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        } else if (r == 0) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &st, 0);
            status = -1;
        }
        d->pid = 0;
    }
    if (d->own_dir && !keep_dir)
        remove_tree(d->dir);
    return status;
}

int daemon_stop(cs_daemon *d) { return daemon_stop_ex(d, 30, false); }

void daemon_kill9(cs_daemon *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGKILL);
        int st;
        waitpid(d->pid, &st, 0);
        d->pid = 0;
    }
}

/* ---- PostgreSQL -------------------------------------------------------------------- */

static int run_as_postgres(const char *cmd)
{
    char full[2048];
    if (geteuid() == 0)
        snprintf(full, sizeof full, "runuser -u postgres -- %s", cmd);
    else
        snprintf(full, sizeof full, "%s", cmd);
    int rc = system(full);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int pg_start(cs_pg *pg)
{
    memset(pg, 0, sizeof *pg);
    glob_t g;
    if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        fprintf(stderr, "harness: PostgreSQL is not installed (no "
                        "/usr/lib/postgresql/*/bin/initdb)\n");
        return -1;
    }
    snprintf(pg->bindir, sizeof pg->bindir, "%s", g.gl_pathv[g.gl_pathc - 1]);
    globfree(&g);
    *strrchr(pg->bindir, '/') = '\0';
    if (make_temp_dir("collsynth-pg", pg->dir, sizeof pg->dir) != 0)
        return -1;
    chmod(pg->dir, 0755);
    if (geteuid() == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "chown postgres:postgres '%s'", pg->dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "harness: cannot chown %s to postgres\n", pg->dir);
            remove_tree(pg->dir);
            return -1;
        }
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s/initdb -D '%s/data' -A trust -U postgres --no-sync -E UTF8 >'%s/initdb.log' 2>&1",
             pg->bindir, pg->dir, pg->dir);
    if (run_as_postgres(cmd) != 0) {
        fprintf(stderr, "harness: initdb failed (see %s/initdb.log)\n", pg->dir);
        remove_tree(pg->dir);
        return -1;
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        pg->port = free_port();
        snprintf(cmd, sizeof cmd,
                 "%s/pg_ctl -D '%s/data' -l '%s/server.log' -w -t 30 -o \"-p %d -k '%s' "
                 "-c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100\" start "
                 ">/dev/null 2>&1",
                 pg->bindir, pg->dir, pg->dir, pg->port, pg->dir);
        if (run_as_postgres(cmd) == 0) {
            pg->running = true;
            snprintf(pg->url, sizeof pg->url, "postgresql://postgres@127.0.0.1:%d/postgres",
                     pg->port);
            return 0;
        }
    }
    fprintf(stderr, "harness: pg_ctl start failed (see %s/server.log)\n", pg->dir);
    remove_tree(pg->dir);
    return -1;
}

void pg_stop(cs_pg *pg)
{
    if (pg->running) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s/pg_ctl -D '%s/data' -m immediate -w stop >/dev/null 2>&1",
                 pg->bindir, pg->dir);
        run_as_postgres(cmd);
        pg->running = false;
    }
    remove_tree(pg->dir);
}

int pg_create_db(const cs_pg *pg, const char *name, char *url, size_t n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "psql -q -h 127.0.0.1 -p %d -U postgres -d postgres -c 'CREATE DATABASE \"%s\"' "
             ">/dev/null 2>&1",
             pg->port, name);
    int rc = system(cmd);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        return -1;
    snprintf(url, n, "postgresql://postgres@127.0.0.1:%d/%s", pg->port, name);
    return 0;
}
