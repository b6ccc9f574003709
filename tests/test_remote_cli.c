/*
 * Tests of the remote CLI (clients/cli/cli_remote.c) against the real
 * collsynthd: started once on an ephemeral port with an auth token, driven
 * through build/collsynth as a user would, output and exit codes checked.
 *
 * Expectations come from outside the CLI: the result document fetched with
 * `get --format json` is checked against the request (collective, ranks) and
 * the summary the CLI printed; the offline topology list (this build's
 * library) against the server's; exit codes against docs/clients.md.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "cs_common.h"

#define TOKEN "t0ken-for-tests"

static cs_test_daemon daemon_;
static bool daemon_up;
static char daemon_why[2048];
static char env_prefix[512];   /* COLLSYNTH_SERVER=... COLLSYNTH_TOKEN=... */
static char cli[300];

static void start_daemon(void)
{
    char *why = NULL;
    snprintf(cli, sizeof cli, "%s/collsynth", cs_test_build_dir());
    daemon_up = cs_test_daemon_start(&daemon_, TOKEN, &why) == 0;
    if (!daemon_up)
        snprintf(daemon_why, sizeof daemon_why, "%s", why ? why : "(no log)");
    free(why);
    snprintf(env_prefix, sizeof env_prefix, "COLLSYNTH_SERVER=%s COLLSYNTH_TOKEN=%s",
             daemon_.url, TOKEN);
}

static void stop_daemon(void)
{
    if (daemon_up)
        cs_test_daemon_stop(&daemon_);
    daemon_up = false;
}

/* Runs the CLI with the server and token set; returns the exit code. */
static int run(const char *args, char **out, char **err)
{
    ck_assert_msg(daemon_up, "collsynthd did not start:\n%s", daemon_why);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "env %s %s %s", env_prefix, cli, args);
    return cs_test_sh(cmd, out, err);
}

/* The value after "name: " on its own line, or NULL; caller frees. */
static char *line_value(const char *text, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "%s: ", name);
    for (const char *p = text; (p = strstr(p, key)) != NULL; p++)
        if (p == text || p[-1] == '\n') {
            p += strlen(key);
            return strndup(p, strcspn(p, "\n"));
        }
    return NULL;
}

static bool is_hex64(const char *s)
{
    if (s == NULL || strlen(s) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* A request quick for SMT: the frontier search bounded to 2 chunks. */
#define QUICK_OPTS "--option 'smt={\"max_chunks\":2}'"

/* ---- a daemon behind a reverse proxy under a path prefix ---------------------- */

/* A reverse proxy as nginx's `location /collsynth/ { proxy_pass
 * http://daemon/; }`: requests under PREFIX/ go to the daemon without the
 * prefix, one connection at a time (the CLI makes one request at a time);
 * anything else gets the proxy's own 404 page.  Every request line it saw
 * is kept, to check the CLI put every route under the prefix. */
typedef struct prefix_proxy {
    int lfd, port, backend_port;
    const char *prefix;
    pthread_t thread;
    volatile bool stop;
    char seen[8192];   /* "METHOD PATH\n" per request */
} prefix_proxy;

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void proxy_one(prefix_proxy *px, int cfd)
{
    char req[65536];
    size_t len = 0;
    char *end = NULL;
    while (!end && len + 1 < sizeof req) {
        ssize_t r = recv(cfd, req + len, sizeof req - 1 - len, 0);
        if (r <= 0)
            return;
        len += (size_t)r;
        req[len] = '\0';
        end = strstr(req, "\r\n\r\n");
    }
    if (!end)
        return;
    char method[16], path[2048];
    if (sscanf(req, "%15s %2047s", method, path) != 2)
        return;
    size_t sl = strlen(px->seen);
    snprintf(px->seen + sl, sizeof px->seen - sl, "%s %s\n", method, path);
    size_t pl = strlen(px->prefix);
    if (strncmp(path, px->prefix, pl) != 0 || path[pl] != '/') {
        static const char page[] = "<html>\r\n<head><title>404 Not Found</title></head>\r\n"
                                   "<body>not here</body>\r\n</html>\r\n";
        char head[256];
        int n = snprintf(head, sizeof head, "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n", sizeof page - 1);
        send_all(cfd, head, (size_t)n);
        send_all(cfd, page, sizeof page - 1);
        return;
    }
    /* the body: Content-Length bytes after the headers */
    size_t body_len = 0;
    for (char *h = strstr(req, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n"))
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
            body_len = strtoul(h + 17, NULL, 10);
    size_t head_len = (size_t)(end + 4 - req);
    char *body = malloc(body_len + 1);
    size_t have = len - head_len;
    memcpy(body, req + head_len, have);
    while (have < body_len) {
        ssize_t r = recv(cfd, body + have, body_len - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    /* the request line without the prefix, Connection: close */
    char out[70000];
    size_t o = (size_t)snprintf(out, sizeof out, "%s %s HTTP/1.1\r\n", method, path + pl);
    for (char *h = strstr(req, "\r\n") + 2; h < end + 2;) {
        char *eol = strstr(h, "\r\n");
        if (strncasecmp(h, "Connection:", 11) != 0)
            o += (size_t)snprintf(out + o, sizeof out - o, "%.*s\r\n", (int)(eol - h), h);
        h = eol + 2;
    }
    o += (size_t)snprintf(out + o, sizeof out - o, "Connection: close\r\n\r\n");
    int bfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px->backend_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(bfd, (struct sockaddr *)&a, sizeof a) == 0 && send_all(bfd, out, o) &&
        send_all(bfd, body, have)) {
        char buf[65536];
        ssize_t r;
        while ((r = recv(bfd, buf, sizeof buf, 0)) > 0 && send_all(cfd, buf, (size_t)r))
            ;
    }
    close(bfd);
    free(body);
}

static void *proxy_main(void *arg)
{
    prefix_proxy *px = arg;
    while (!px->stop) {
        struct pollfd p = {.fd = px->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int cfd = accept(px->lfd, NULL, NULL);
        if (cfd < 0)
            continue;
        proxy_one(px, cfd);
        close(cfd);
    }
    return NULL;
}

static void proxy_start(prefix_proxy *px, const char *prefix)
{
    memset(px, 0, sizeof *px);
    px->prefix = prefix;
    ck_assert_int_eq(sscanf(daemon_.url, "http://127.0.0.1:%d", &px->backend_port), 1);
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(px->lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(px->lfd, 16), 0);
    ck_assert_int_eq(getsockname(px->lfd, (struct sockaddr *)&a, &al), 0);
    px->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&px->thread, NULL, proxy_main, px), 0);
}

static void proxy_stop(prefix_proxy *px)
{
    px->stop = true;
    pthread_join(px->thread, NULL);
    close(px->lfd);
}

/* Runs the CLI against `server` (the token set); returns the exit code. */
static int run_at(const char *server, const char *args, char **out, char **err)
{
    ck_assert_msg(daemon_up, "collsynthd did not start:\n%s", daemon_why);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "env COLLSYNTH_TOKEN=%s %s --server '%s' %s", TOKEN, cli, server,
             args);
    return cs_test_sh(cmd, out, err);
}

/* `--server http://gw/collsynth` (a daemon behind a reverse proxy under a
 * path prefix): every route goes under the prefix, submit/wait/get work
 * through it; a wrong prefix gets the proxy's page, which the CLI says is
 * not collsynthd's answer; what cannot be a base URL is refused by name. */
START_TEST(a_daemon_behind_a_proxy_under_a_path_prefix)
{
    prefix_proxy px;
    proxy_start(&px, "/collsynth");
    char base[128], upper[128], wrong[128], url[256];
    snprintf(base, sizeof base, "http://127.0.0.1:%d/collsynth", px.port);
    snprintf(upper, sizeof upper, "HTTP://127.0.0.1:%d/collsynth/", px.port);
    snprintf(wrong, sizeof wrong, "http://127.0.0.1:%d/wrong", px.port);
    char *out, *err;
    int rc = run_at(base, "topologies", &out, &err);
    ck_assert_msg(rc == 0 && strstr(out, "ring:N") != NULL, "exit %d: %s", rc, err);
    free(out); free(err);
    rc = run_at(upper, "submit ring:4 allgather --method ring --wait", &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    char *key = line_value(out, "key");
    ck_assert_msg(is_hex64(key), "no key in:\n%s", out);
    free(out); free(err);
    char args[256];
    snprintf(args, sizeof args, "get %s --format msccl-xml", key);
    rc = run_at(base, args, &out, &err);
    ck_assert_msg(rc == 0 && strstr(out, "<algo") != NULL, "exit %d: %s", rc, err);
    free(out); free(err);
    free(key);
    /* every request went under the prefix */
    ck_assert_msg(strstr(px.seen, "POST /collsynth/v1/synthesize\n") != NULL, "%s", px.seen);
    for (const char *l = px.seen; *l; l = strchr(l, '\n') + 1) {
        const char *path = strchr(l, ' ') + 1;
        ck_assert_msg(strncmp(path, "/collsynth/v1/", 14) == 0, "outside the prefix: %s", l);
    }
    /* a wrong prefix: the proxy's 404, on one line, named as not the daemon's */
    rc = run_at(wrong, "topologies", &out, &err);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "HTTP 404, not in collsynthd's error form") != NULL &&
                      strstr(err, "path prefix") != NULL, "%s", err);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "not one line: %s", err);
    free(out); free(err);
    proxy_stop(&px);
    /* base URLs that cannot be: refused before any request, naming why */
    struct {
        const char *fmt, *want;
    } bad[] = {
        {"http://127.0.0.1:%d/collsynth/v1", "without /v1 (the routes are PREFIX/v1/...): "
                                             "http://127.0.0.1:%d/collsynth"},
        {"http://127.0.0.1:%d/collsynth?x=1", "has a query or a fragment"},
        {"http://user:pw@127.0.0.1:%d/", "--token-file"},
        {"ftp://127.0.0.1:%d/", "must start with http:// or https://"},
        {"http:///collsynth", "names no host"},
        {"http://127.0.0.1:%d/my prefix", "%%20"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[256];
        snprintf(url, sizeof url, bad[i].fmt, px.port);
        snprintf(want, sizeof want, bad[i].want, px.port);
        rc = run_at(url, "topologies", &out, &err);
        ck_assert_msg(rc == 2 && strstr(err, want) != NULL, "%s: exit %d: %s", url, rc, err);
        free(out); free(err);
    }
}
END_TEST

START_TEST(topologies_remote_matches_this_builds_library)
{
    char *rout, *rerr, *lout, *lerr;
    ck_assert_int_eq(run("topologies", &rout, &rerr), 0);
    ck_assert_ptr_nonnull(strstr(rout, "dgx1"));
    ck_assert_ptr_nonnull(strstr(rout, "ring"));
    /* offline: no server anywhere, the same command lists from the library */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env -u COLLSYNTH_SERVER %s topologies", cli);
    ck_assert_int_eq(cs_test_sh(cmd, &lout, &lerr), 0);
    /* the first column (syntax) of each line is the same on both sides */
    char *save1 = NULL;
    int lines = 0;
    for (char *l = strtok_r(lout, "\n", &save1); l; l = strtok_r(NULL, "\n", &save1)) {
        char syntax[64];
        ck_assert_int_eq(sscanf(l, "%63s", syntax), 1);
        char needle[80];
        snprintf(needle, sizeof needle, "%s ", syntax);
        ck_assert_msg(strstr(rout, needle) != NULL, "server lacks %s:\n%s", syntax, rout);
        lines++;
    }
    ck_assert_int_ge(lines, 3);
    /* one builtin expanded, remotely: Topology JSON */
    char *tout, *terr;
    ck_assert_int_eq(run("topologies ring:4", &tout, &terr), 0);
    json_t *doc = json_loads(tout, 0, NULL);
    ck_assert_msg(doc != NULL, "not JSON: %s", tout);
    json_t *t = json_object_get(doc, "topology");
    if (!json_is_object(t))
        t = doc;
    ck_assert_int_eq(json_integer_value(json_object_get(t, "ranks")), 4);
    json_decref(doc);
    free(tout); free(terr); free(rout); free(rerr); free(lout); free(lerr);
}
END_TEST

START_TEST(submit_wait_then_get_every_format)
{
    char *out, *err;
    int rc = run("submit ring:4 allgather --wait " QUICK_OPTS, &out, &err);
    ck_assert_msg(rc == 0, "exit %d\nstdout:\n%s\nstderr:\n%s", rc, out, err);
    char *key = line_value(out, "key");
    ck_assert_msg(is_hex64(key), "no key in:\n%s", out);
    char *fr = line_value(out, "frontier");
    ck_assert_ptr_nonnull(fr);
    int nalg = atoi(fr);
    ck_assert_int_ge(nalg, 1);

    /* the stored result agrees with the request and with the summary */
    char dir[] = "/tmp/collsynth-test-cli.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char args[512], path[300];
    snprintf(path, sizeof path, "%s/result.json", dir);
    snprintf(args, sizeof args, "get %s --format json -o %s", key, path);
    char *o2, *e2;
    ck_assert_int_eq(run(args, &o2, &e2), 0);
    json_error_t jerr;
    json_t *res = json_load_file(path, 0, &jerr);
    ck_assert_msg(res != NULL, "%s: %s", path, jerr.text);
    ck_assert_str_eq(json_string_value(json_object_get(res, "key")), key);
    json_t *frontier = json_object_get(res, "frontier");
    ck_assert_int_eq((int)json_array_size(frontier), nalg);
    size_t i;
    json_t *a;
    json_array_foreach(frontier, i, a) {
        ck_assert_int_eq(json_integer_value(json_object_get(a, "ranks")), 4);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "collective"), "kind")),
                         "allgather");
        /* allgather on 4 ranks moves at least 3 chunks into each of 4 ranks */
        ck_assert_int_ge((int)json_array_size(json_object_get(a, "sends")),
                         3 * 4 * (int)json_integer_value(json_object_get(a, "chunks")));
    }
    json_decref(res);

    char *o3, *e3;
    snprintf(args, sizeof args, "get %s --format msccl-xml --size 1MiB", key);
    rc = run(args, &o3, &e3);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e3);
    ck_assert_ptr_nonnull(strstr(o3, "<algo"));
    ck_assert_ptr_nonnull(strstr(o3, "ngpus=\"4\""));

    /* the older runtime's form of the same algorithm, by frontier index */
    char *o6, *e6;
    snprintf(args, sizeof args, "get %s --format msccl-xml --alg 0 --runtime msccl", key);
    rc = run(args, &o6, &e6);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e6);
    ck_assert_ptr_nonnull(strstr(o6, "coll=\"allgather\""));
    free(o6);
    free(e6);
    snprintf(args, sizeof args, "get %s --format msccl-xml --alg 0 --runtime nccl-9", key);
    rc = run(args, &o6, &e6);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, e6);
    ck_assert_ptr_nonnull(strstr(e6, "(field runtime)"));
    free(o6);
    free(e6);

    char *o4, *e4, *cuda = NULL;
    snprintf(path, sizeof path, "%s/alg.cu", dir);
    snprintf(args, sizeof args, "get %s --format cuda -o %s", key, path);
    rc = run(args, &o4, &e4);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e4);
    ck_assert_int_eq(cs_read_file(path, &cuda, NULL, NULL), CS_OK);
    ck_assert_int_gt((int)strlen(cuda), 100);

    /* the same request again: answered from the store, same key, no job */
    char *o5, *e5;
    ck_assert_int_eq(run("submit ring:4 allgather " QUICK_OPTS, &o5, &e5), 0);
    char *key2 = line_value(o5, "key");
    ck_assert_msg(key2 != NULL && strcmp(key2, key) == 0, "second submit:\n%s", o5);

    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(system(args), 0);
    free(key2); free(o5); free(e5); free(cuda); free(o4); free(e4); free(o3); free(e3);
    free(o2); free(e2); free(fr); free(key); free(out); free(err);
}
END_TEST

/* get --rank/--ranks/--summary: the slice holds exactly the sends of those
 * ranks (checked against the whole document), bad ranges are refused before
 * or by the server, and a large result arrives whole through -o. */
START_TEST(get_slices_summaries_and_large_results)
{
    char *out, *err;
    int rc = run("submit mesh2d:8x8 allgather --method ring --wait", &out, &err);
    ck_assert_msg(rc == 0, "exit %d\n%s\n%s", rc, out, err);
    char *key = line_value(out, "key");
    ck_assert(is_hex64(key));
    char dir[] = "/tmp/collsynth-test-slices.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char args[600], full_path[300], slice_path[300];
    snprintf(full_path, sizeof full_path, "%s/full.json", dir);
    snprintf(slice_path, sizeof slice_path, "%s/slice.json", dir);
    snprintf(args, sizeof args, "get %s -o %s", key, full_path);
    char *o, *e;
    ck_assert_int_eq(run(args, &o, &e), 0);
    free(o); free(e);
    snprintf(args, sizeof args, "get %s --ranks 8-15 -o %s", key, slice_path);
    ck_assert_int_eq(run(args, &o, &e), 0);
    free(o); free(e);
    json_t *full = json_load_file(full_path, 0, NULL), *slice = json_load_file(slice_path, 0, NULL);
    ck_assert_ptr_nonnull(full);
    ck_assert_ptr_nonnull(slice);
    json_t *fs = json_object_get(json_array_get(json_object_get(full, "frontier"), 0), "sends");
    json_t *ss = json_object_get(json_array_get(json_object_get(slice, "frontier"), 0), "sends");
    size_t j = 0, i;
    json_t *snd;
    json_array_foreach(fs, i, snd) {
        long src = json_integer_value(json_object_get(snd, "src"));
        long dst = json_integer_value(json_object_get(snd, "dst"));
        if ((src < 8 || src > 15) && (dst < 8 || dst > 15))
            continue;
        ck_assert(json_equal(snd, json_array_get(ss, j++)));
    }
    ck_assert_uint_eq(j, json_array_size(ss));
    ck_assert_int_gt(j, 0);
    long nsends_full = (long)json_array_size(fs);
    json_t *rng = json_object_get(json_object_get(slice, "slice"), "ranks");
    ck_assert_int_eq(json_integer_value(json_array_get(rng, 0)), 8);
    ck_assert_int_eq(json_integer_value(json_array_get(rng, 1)), 15);
    json_decref(full);
    json_decref(slice);
    /* one rank, to stdout */
    snprintf(args, sizeof args, "get %s --rank 63", key);
    ck_assert_int_eq(run(args, &o, &e), 0);
    json_t *one = json_loads(o, 0, NULL);
    ck_assert_ptr_nonnull(one);
    json_array_foreach(json_object_get(json_array_get(json_object_get(one, "frontier"), 0), "sends"),
                       i, snd) {
        ck_assert(json_integer_value(json_object_get(snd, "src")) == 63 ||
                  json_integer_value(json_object_get(snd, "dst")) == 63);
    }
    json_decref(one);
    free(o); free(e);
    /* the summary: counts, no sends */
    snprintf(args, sizeof args, "get %s --summary", key);
    ck_assert_int_eq(run(args, &o, &e), 0);
    one = json_loads(o, 0, NULL);
    json_t *a0 = json_array_get(json_object_get(one, "frontier"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(a0, "nsends")), nsends_full);
    ck_assert_ptr_null(json_object_get(a0, "sends"));
    json_decref(one);
    free(o); free(e);
    /* refused here (usage) or there (the server names the field); no file left behind */
    const char *bad_local[] = {"--ranks 9-3", "--ranks x", "--rank -2", "--rank 1 --ranks 1-2"};
    for (size_t k = 0; k < sizeof bad_local / sizeof bad_local[0]; k++) {
        snprintf(args, sizeof args, "get %s %s", key, bad_local[k]);
        ck_assert_int_eq(run(args, &o, &e), 2);
        free(o); free(e);
    }
    snprintf(args, sizeof args, "get %s --rank 64 -o %s/never.json", key, dir);
    ck_assert_int_eq(run(args, &o, &e), 2);
    ck_assert_msg(strstr(e, "(field rank)") != NULL, "%s", e);
    free(o); free(e);
    char never[400];
    snprintf(never, sizeof never, "%s/never.json", dir);
    ck_assert_int_ne(access(never, F_OK), 0);
    /* a large result (TACOS, 104,652 sends, tens of MB) arrives whole */
    free(out); free(err);
    rc = run("submit mesh2d:18x18 allgather --method tacos --wait", &out, &err);
    ck_assert_msg(rc == 0, "exit %d\n%s", rc, err);
    char *key2 = line_value(out, "key");
    snprintf(args, sizeof args, "get %s -o %s", key2, full_path);
    ck_assert_int_eq(run(args, &o, &e), 0);
    free(o); free(e);
    full = json_load_file(full_path, 0, NULL);
    ck_assert_ptr_nonnull(full);
    fs = json_object_get(json_array_get(json_object_get(full, "frontier"), 0), "sends");
    ck_assert_int_eq(json_array_size(fs), 324 * 323);
    json_decref(full);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(system(args), 0);
    free(key2); free(key); free(out); free(err);
}
END_TEST

START_TEST(server_errors_are_shown_with_their_exit_codes)
{
    char *out, *err;
    /* bad input: the server's code, message and field; exit 2 */
    int rc = run("submit '{\"name\":\"bad\",\"ranks\":2,\"links\":[{\"src\":0,\"dst\":5}]}' allgather",
                 &out, &err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "collsynth submit: error "));
    ck_assert_msg(strstr(err, "(field topology") != NULL, "no field in: %s", err);
    free(out); free(err);

    /* an unknown job and an unknown key: the server says no, exit 1 */
    rc = run("status 00000000000000000000000000000000", &out, &err);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "collsynth status: error "));
    ck_assert_ptr_nonnull(strstr(err, "[HTTP 404]"));
    free(out); free(err);
    /* a malformed id is the caller's input error (the server's 400): exit 2 */
    rc = run("status no-such-job", &out, &err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "(field id)"));
    free(out); free(err);
    rc = run("get 0000000000000000000000000000000000000000000000000000000000000000", &out, &err);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    free(out); free(err);

    /* a wrong token is refused (exit 1, the server's words) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env COLLSYNTH_SERVER=%s COLLSYNTH_TOKEN=wrong %s submit ring:4 allgather",
             daemon_.url, cli);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "HTTP 401"));
    free(out); free(err);

    /* unreachable: exit 3 */
    snprintf(cmd, sizeof cmd, "%s --server http://127.0.0.1:1 status 1", cli);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 3, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "cannot reach"));
    free(out); free(err);

    /* usage errors: exit 2 */
    ck_assert_int_eq(run("submit", &out, &err), 2);
    free(out); free(err);
    ck_assert_int_eq(run("get somekey --format pdf", &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "pdf"));
    free(out); free(err);
    ck_assert_int_eq(run("submit ring:4 'broadcast:x'", &out, &err), 2);
    free(out); free(err);
    snprintf(cmd, sizeof cmd, "env -u COLLSYNTH_SERVER %s status 1", cli);
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--server"));
    free(out); free(err);
}
END_TEST

/* Submits a request that keeps the daemon busy for a while; returns the job id.
 * SMT on the 36-rank torus2d:6x6 searches until its time limit (over 30 s when
 * measured), so the job is still running whenever the test looks; DGX-1 is no
 * longer slow enough for this. */
static char *submit_slow(const char *coll)
{
    char *out, *err;
    char args[512];
    snprintf(args, sizeof args,
             "submit torus2d:6x6 %s --method smt --option 'max_chunks=8' --option 'k=6'",
             coll);
    int rc = run(args, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    char *job = line_value(out, "job");
    ck_assert_msg(job != NULL, "no job id (answered at once?):\n%s", out);
    free(out);
    free(err);
    return job;
}

START_TEST(status_and_cancel_a_running_job)
{
    char *job = submit_slow("allreduce");
    char args[256], *out, *err;
    snprintf(args, sizeof args, "status %s", job);
    ck_assert_int_eq(run(args, &out, &err), 0);
    char *st = line_value(out, "status");
    ck_assert_msg(st != NULL && (strcmp(st, "queued") == 0 || strcmp(st, "running") == 0),
                  "status: %s", out);
    free(st); free(out); free(err);
    snprintf(args, sizeof args, "cancel %s", job);
    ck_assert_int_eq(run(args, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, job));
    free(out); free(err);
    /* waiting on a cancelled job is a negative result */
    snprintf(args, sizeof args, "wait %s --max 30", job);
    int rc = run(args, &out, &err);
    ck_assert_msg(rc == 1, "exit %d\n%s\n%s", rc, out, err);
    ck_assert_ptr_nonnull(strstr(err, "cancelled"));
    free(out); free(err); free(job);
}
END_TEST

START_TEST(wait_shows_a_bar_on_a_terminal_and_lines_otherwise)
{
    /* plain lines when stderr is not a terminal */
    char *job = submit_slow("allgather");
    char args[256], *out, *err;
    snprintf(args, sizeof args, "wait %s --max 2", job);
    run(args, &out, &err); /* exit 1: still running after 2 s, and that is fine */
    ck_assert_msg(strstr(err, "elapsed") != NULL, "no progress line: %s", err);
    ck_assert_ptr_null(strchr(err, '\r'));
    ck_assert_msg(strstr(err, "still running after") != NULL ||
                  strstr(err, "still queued after") != NULL, "no time-out line: %s", err);
    free(out); free(err);
    /* a terminal (script(1) gives the CLI a pty): one line redrawn with \r and a bar */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env %s script -qec '%s wait %s --max 2' /dev/null", env_prefix,
             cli, job);
    cs_test_sh(cmd, &out, &err);
    ck_assert_msg(strchr(out, '\r') != NULL, "no carriage return on a tty: %s", out);
    ck_assert_msg(strchr(out, '[') != NULL && strstr(out, "elapsed") != NULL, "no bar: %s", out);
    free(out); free(err);
    snprintf(args, sizeof args, "cancel %s", job);
    run(args, &out, &err);
    free(out); free(err); free(job);
}
END_TEST

static Suite *remote_cli_suite(void)
{
    Suite *s = suite_create("remote_cli");
    TCase *tc = tcase_create("against collsynthd");
    tcase_add_unchecked_fixture(tc, start_daemon, stop_daemon);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, topologies_remote_matches_this_builds_library);
    tcase_add_test(tc, submit_wait_then_get_every_format);
    tcase_add_test(tc, get_slices_summaries_and_large_results);
    tcase_add_test(tc, server_errors_are_shown_with_their_exit_codes);
    tcase_add_test(tc, status_and_cancel_a_running_job);
    tcase_add_test(tc, wait_shows_a_bar_on_a_terminal_and_lines_otherwise);
    tcase_add_test(tc, a_daemon_behind_a_proxy_under_a_path_prefix);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(remote_cli_suite)
